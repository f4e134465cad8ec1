//! End to end through the real `utter` binary: `utter say ...` as a subprocess with the
//! built-in default configuration (the sandbox's `XDG_CONFIG_HOME` has no
//! `utter/config.toml`), so the runner starts the real `rules` router and `desktop` action
//! plugin, and the tests look for the effects on the (sandboxed) desktop: a program started
//! from a desktop entry, a URL handed to the `mimeapps.list` handler by `xdg-open`, a real
//! `mpv` paused and resumed over MPRIS on a private bus.
//!
//! Debian packages these tests need: dbus-daemon, xdg-utils, mpv, mpv-mpris, sox.

use crate::common;

use common::{DbusSession, MarkerProgram, Mpris, Mpv, Sandbox, run_utter, wait_for};
use std::time::Duration;
use utter_protocol::serde_json::json;

/// How long a started program or handler may take to leave its trace (a shared 2-core
/// machine can be slow; this is a limit, not an expectation).
const EFFECT_LIMIT: Duration = Duration::from_secs(30);

/// The sandbox uses the embedded default configuration.
fn assert_no_user_config(sb: &Sandbox) {
    assert!(!sb.path("config/utter/config.toml").exists());
}

#[tokio::test]
async fn the_default_configuration_starts_the_rules_desktop_compositor_a11y_and_input_plugins() {
    let sb = Sandbox::new();
    assert_no_user_config(&sb);
    let run = run_utter(&["plugins", "--json"], &sb.env(None)).await;
    assert_eq!(run.code, Some(0), "{run}");
    let plugins = run.json();
    let status: Vec<(&str, &str)> = plugins
        .as_array()
        .expect("an array of plugins")
        .iter()
        .map(|p| {
            (
                p["id"].as_str().unwrap_or("?"),
                p["status"].as_str().unwrap_or("?"),
            )
        })
        .collect();
    // The stt and capture plugins are configured too, but run only once the speech model
    // `[stt] model` names is installed (the sandbox has none); without it the daemon neither
    // needs nor waits for them. The compositor, a11y and input plugins run, degraded: the
    // sandbox has no niri or sway, no session bus and no Wayland display.
    assert_eq!(
        status,
        [
            ("rules", "ok"),
            ("desktop", "ok"),
            ("compositor", "degraded"),
            ("a11y", "degraded"),
            ("input", "degraded")
        ],
        "{run}"
    );
}

#[tokio::test]
async fn say_open_an_app_starts_its_desktop_entry_with_expanded_arguments() {
    let sb = Sandbox::new();
    assert_no_user_config(&sb);
    let workdir = sb.path("workdir");
    std::fs::create_dir_all(&workdir).expect("workdir");
    // The router matches the untranslated Name; %c is the German one (the runner passes
    // LANG=de_DE.UTF-8 on), "two words" stays one argument, %k is the entry's path.
    let app = sb.install_marker_app(
        "utter-e2e-marker.desktop",
        "Marker Writer",
        r#"%c "two words" %k"#,
        &format!("Name[de]=Markierer\nPath={}\n", workdir.display()),
    );

    let run = run_utter(&["say", "open marker writer"], &sb.env(None)).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        run.stdout.contains("launch_app") && run.stdout.contains("\"app_id\":\"utter-e2e-marker\""),
        "the plan is shown: {run}"
    );
    assert!(
        run.stdout.contains("launch_app ok [desktop]"),
        "the desktop plugin ran it: {run}"
    );

    assert!(
        wait_for(EFFECT_LIMIT, || app.program.recorded().is_some()).await,
        "the launched program never wrote {}\n{run}",
        app.program.marker.display()
    );
    let workdir = std::fs::canonicalize(&workdir).expect("canonical workdir");
    assert_eq!(
        app.program.recorded().expect("recorded"),
        [
            workdir.display().to_string(),
            MarkerProgram::ARG0.to_owned(),
            "Markierer".to_owned(),
            "two words".to_owned(),
            app.entry.display().to_string(),
        ]
    );
}

#[tokio::test]
async fn say_open_youtube_hands_the_url_to_the_default_browser() {
    let sb = Sandbox::new();
    assert_no_user_config(&sb);
    let recorded = sb.install_url_recorder();

    let run = run_utter(&["say", "open youtube"], &sb.env(None)).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        run.stdout
            .contains("ensure_url {\"site\":\"YouTube\",\"url\":\"https://www.youtube.com\"}"),
        "{run}"
    );
    assert!(
        wait_for(EFFECT_LIMIT, || recorded.exists()).await,
        "the https handler from mimeapps.list was never run\n{run}"
    );
    assert_eq!(
        std::fs::read_to_string(&recorded).expect("read the recording"),
        "https://www.youtube.com\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn say_pause_and_play_drive_a_real_mpv_over_mpris() {
    let sb = Sandbox::new();
    assert_no_user_config(&sb);
    let bus = DbusSession::start();
    let _mpv = Mpv::start(&sb, &bus);
    let mpris = Mpris::connect(&bus).await;
    assert_eq!(
        mpris
            .wait_for_status("Playing", Duration::from_secs(30))
            .await
            .as_deref(),
        Some("Playing"),
        "mpv did not show up on the bus, playing"
    );
    let env = sb.env(Some(&bus.address));

    let run = run_utter(&["say", "pause"], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        run.stdout.contains("media {\"command\":\"pause\"}"),
        "{run}"
    );
    assert_eq!(
        mpris
            .wait_for_status("Paused", EFFECT_LIMIT)
            .await
            .as_deref(),
        Some("Paused"),
        "{run}"
    );

    let run = run_utter(&["say", "play"], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(run.stdout.contains("media {\"command\":\"play\"}"), "{run}");
    assert_eq!(
        mpris
            .wait_for_status("Playing", EFFECT_LIMIT)
            .await
            .as_deref(),
        Some("Playing"),
        "{run}"
    );
}

#[tokio::test]
async fn a_dry_run_shows_the_plan_and_the_plugins_answer_and_opens_nothing() {
    let sb = Sandbox::new();
    assert_no_user_config(&sb);
    let recorded = sb.install_url_recorder();
    let env = sb.env(None);

    let run = run_utter(&["say", "open youtube", "--dry-run"], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    for expected in [
        // The rules plugin's plan.
        "plan (router rules, rule \"open_site\"):",
        "1. ensure_url {\"site\":\"YouTube\",\"url\":\"https://www.youtube.com\"}",
        // The desktop plugin's dry-run answer.
        "results (dry run: nothing was done):",
        "1. ensure_url ok [desktop]:",
        "would run",
        "xdg-open https://www.youtube.com",
    ] {
        assert!(run.stdout.contains(expected), "{expected:?} missing: {run}");
    }

    let run = run_utter(&["say", "open youtube", "--dry-run", "--json"], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    let outcome = run.json();
    assert_eq!(outcome["utterance"], "open youtube", "{run}");
    assert_eq!(outcome["dry_run"], true, "{run}");
    assert_eq!(outcome["plan"]["router"], "rules", "{run}");
    let steps = outcome["plan"]["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 1, "{run}");
    assert_eq!(steps[0]["op"], "ensure_url", "{run}");
    assert_eq!(
        steps[0]["args"],
        json!({"url": "https://www.youtube.com", "site": "YouTube"}),
        "{run}"
    );
    let results = outcome["results"].as_array().expect("results");
    assert_eq!(results.len(), 1, "{run}");
    assert_eq!(results[0]["ok"], true, "{run}");
    assert_eq!(results[0]["plugin"], "desktop", "{run}");
    assert_eq!(results[0]["result"]["dry_run"], true, "{run}");
    assert_eq!(
        results[0]["result"]["url"], "https://www.youtube.com",
        "{run}"
    );

    // Nothing may have been handed to the browser. A handler would have written within
    // the first second or so; wait a little longer than that.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!recorded.exists(), "a dry run opened the URL");
}

#[tokio::test]
async fn an_utterance_no_rule_matches_exits_1() {
    let sb = Sandbox::new();
    assert_no_user_config(&sb);
    let env = sb.env(None);

    let run = run_utter(&["say", "blorp the frobnicator"], &env).await;
    assert_eq!(run.code, Some(1), "{run}");
    assert!(
        run.stdout
            .contains("no rule matched \"blorp the frobnicator\""),
        "{run}"
    );

    let run = run_utter(&["say", "blorp the frobnicator", "--json"], &env).await;
    assert_eq!(run.code, Some(1), "{run}");
    let outcome = run.json();
    assert_eq!(outcome["plan"]["steps"], json!([]), "{run}");
    assert_eq!(outcome["results"], json!([]), "{run}");
    assert!(
        outcome["plan"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("no rule matched"),
        "{run}"
    );
}
