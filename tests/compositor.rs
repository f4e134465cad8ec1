//! Desktop context and compositor commands end to end: the `utter` CLI with its embedded
//! default configuration (the rules router, the desktop and the compositor plugins) against a
//! real headless sway with real foot windows, every effect read back from sway itself; and the
//! same phrases against a niri test server speaking niri's wire (niri cannot run here), where
//! the exact `Action` JSON it received is checked.

use crate::common;

use crate::sway_session;

use crate::niri_server;

use common::{ChildEnv, Sandbox, run_utter};
use niri_server::FakeNiri;
use std::time::Duration;
use sway_session::{SwaySession, poll};
use utter_core::config;
use utter_core::pipeline::CommandOptions;
use utter_core::runner::Runner;
use utter_core::supervisor::SupervisorOptions;
use utter_protocol::serde_json::{Value, json};

/// The sandbox's environment plus the sway session's (`SWAYSOCK`, `WAYLAND_DISPLAY`,
/// `XDG_RUNTIME_DIR`).
fn sway_env(sandbox: &Sandbox, sway: &SwaySession) -> ChildEnv {
    let mut env = sandbox.env(None);
    for (name, value) in sway.env() {
        env = env.with(&name, value);
    }
    env
}

/// `utter say WORDS --json` in this process (`--local`), which must succeed.
async fn say(env: &ChildEnv, words: &str) -> Value {
    let run = run_utter(&["say", "--local", "--json", words], env).await;
    assert_eq!(run.code, Some(0), "utter say {words:?}:\n{run}");
    run.json()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn utter_context_shows_the_windows_of_a_real_sway() {
    let sandbox = Sandbox::new();
    let mut sway = SwaySession::start();
    sway.open_window("alpha");
    sway.open_window("beta");
    let env = sway_env(&sandbox, &sway);

    let run = run_utter(&["context", "--json"], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    let reply = run.json();
    assert_eq!(reply["source"], "compositor", "{reply}");
    let snapshot = &reply["snapshot"];
    assert_eq!(snapshot["compositor"]["name"], "sway", "{snapshot}");
    let apps: Vec<&str> = snapshot["windows"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["app_id"].as_str())
        .collect();
    assert!(
        apps.contains(&"alpha") && apps.contains(&"beta"),
        "{apps:?}"
    );
    // sway focuses the newest window; the snapshot says the same as sway.
    assert_eq!(sway.focused_app().as_deref(), Some("beta"));
    assert_eq!(snapshot["focused"]["app_id"], "beta", "{snapshot}");
    assert_eq!(snapshot["provenance"]["title"], "title");

    let text = run_utter(&["context"], &env).await;
    assert_eq!(text.code, Some(0), "{text}");
    assert!(text.stdout.contains("compositor: sway"), "{text}");
    assert!(text.stdout.contains("focused: "), "{text}");
    assert!(text.stdout.contains("beta"), "{text}");

    // Without a compositor the answer says what is missing, and the exit code says not done.
    let none = run_utter(&["context"], &sandbox.env(None)).await;
    assert_eq!(none.code, Some(1), "{none}");
    assert!(none.stderr.contains("SWAYSOCK"), "{none}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spoken_workspace_and_window_commands_change_a_real_sway() {
    let sandbox = Sandbox::new();
    let mut sway = SwaySession::start();
    sway.open_window("alpha");
    sway.open_window("beta");
    let env = sway_env(&sandbox, &sway);
    assert_eq!(sway.focused_workspace(), "1");

    let out = say(&env, "workspace two").await;
    assert_eq!(out["results"][0]["op"], "niri", "{out}");
    assert_eq!(out["results"][0]["verified"], true, "{out}");
    assert_eq!(sway.focused_workspace(), "2");

    // The text output speaks sway's words: the command sent, and the result named by sway.
    let text = run_utter(&["say", "--local", "go to workspace 1"], &env).await;
    assert_eq!(text.code, Some(0), "{text}");
    assert!(text.stdout.contains("1. sway: workspace"), "{text}");
    assert!(text.stdout.contains("1. sway ok"), "{text}");
    assert!(!text.stdout.contains("niri"), "{text}");
    assert_eq!(sway.focused_workspace(), "1");

    // "this window" is the focused one: beta moves to workspace 3, alpha stays.
    let out = say(&env, "move this window to workspace three").await;
    assert_eq!(out["results"][0]["verified"], true, "{out}");
    assert_eq!(sway.window("beta").map(|(_, ws)| ws).as_deref(), Some("3"));
    assert_eq!(sway.window("alpha").map(|(_, ws)| ws).as_deref(), Some("1"));

    // Switching to an app focuses its window, on whichever workspace it is.
    let out = say(&env, "switch to beta").await;
    assert_eq!(out["results"][0]["verified"], true, "{out}");
    assert_eq!(sway.focused_app().as_deref(), Some("beta"));
    assert_eq!(sway.focused_workspace(), "3");

    let out = say(&env, "fullscreen").await;
    assert_eq!(out["results"][0]["verified"], true, "{out}");
    let fullscreen = |sway: &SwaySession| {
        sway.window("beta")
            .map(|(node, _)| node["fullscreen_mode"].as_u64().unwrap_or(0) != 0)
    };
    assert_eq!(fullscreen(&sway), Some(true));
    say(&env, "fullscreen").await;
    assert_eq!(fullscreen(&sway), Some(false));

    let out = say(&env, "next workspace").await;
    assert_eq!(out["results"][0]["ok"], true, "{out}");

    // A dry run says what it would send and changes nothing.
    let before = sway.focused_workspace();
    let run = run_utter(
        &["say", "--local", "--json", "--dry-run", "workspace 5"],
        &env,
    )
    .await;
    assert_eq!(run.code, Some(0), "{run}");
    let sent = &run.json()["results"][0]["result"]["sent"];
    assert!(sent.as_str().unwrap_or_default().contains('5'), "{run}");
    assert_eq!(sway.focused_workspace(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensure_app_focuses_an_open_window_and_launches_a_missing_one() {
    let sandbox = Sandbox::new();
    let mut sway = SwaySession::start();
    sway.open_window("alpha");
    sway.open_window("beta");
    // An installed application whose window is "gamma": a desktop entry that starts foot.
    let foot = sway_session::which("foot").expect("foot");
    sandbox.write(
        "data/applications/gamma.desktop",
        &format!(
            "[Desktop Entry]\nType=Application\nName=Gamma\nExec={} --app-id gamma\nStartupWMClass=gamma\n",
            foot.display()
        ),
    );
    let env = sway_env(&sandbox, &sway);

    // alpha is open: switching to it focuses it and launches nothing.
    say(&env, "switch to alpha").await;
    assert_eq!(sway.focused_app().as_deref(), Some("alpha"));
    assert_eq!(sway.views().len(), 2);

    // gamma is installed but not open: it is launched, and its window gets the focus.
    let out = say(&env, "switch to gamma").await;
    assert_eq!(out["results"][0]["op"], "ensure_app", "{out}");
    let focused = poll(Duration::from_secs(10), || {
        (sway.focused_app().as_deref() == Some("gamma")).then_some(())
    });
    assert!(focused.is_some(), "{out}");
    assert_eq!(sway.views().len(), 3);

    // Asked again, the open gamma is focused, not launched twice.
    sway.msg(&["focus", "left"]);
    say(&env, "switch to gamma").await;
    assert_eq!(sway.focused_app().as_deref(), Some("gamma"));
    assert_eq!(sway.views().len(), 3);
}

/// A runner with the rules router and the compositor plugin talking to `niri`.
async fn niri_runner(niri: &FakeNiri, home: &std::path::Path) -> std::sync::Arc<Runner> {
    let utter = common::bin("utter").display().to_string();
    let compositor = common::bin("utter-compositor").display().to_string();
    let env = format!(
        "env = {{ NIRI_SOCKET = {:?}, SWAYSOCK = \"\", XDG_CONFIG_HOME = {:?}, HOME = {:?} }}",
        niri.socket().display().to_string(),
        home.join("config").display().to_string(),
        home.display().to_string(),
    );
    let text = format!(
        "config_version = 1\n[runner]\nrpc_timeout_ms = 10000\ndrain_timeout_ms = 300\nkill_timeout_ms = 300\n\
         [[plugin]]\nid = \"rules\"\nkind = \"router\"\nentrypoint = {}\n{env}\n\
         [[plugin]]\nid = \"compositor\"\nkind = \"bundle\"\nentrypoint = {}\n{env}\n",
        json!([utter, "plugin", "rules"]),
        json!([compositor]),
    );
    let loaded = config::parse(&text, "niri-test.toml").expect("valid config");
    let options = SupervisorOptions::from_config(&loaded.config);
    let runner = Runner::start(loaded, options, None).await;
    for p in runner.plugins() {
        assert!(p.status.is_running(), "{p:?}");
    }
    runner
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_phrases_send_the_right_action_json_to_niri() {
    let niri = FakeNiri::start().await;
    let home = tempfile::tempdir().unwrap();
    let runner = niri_runner(&niri, home.path()).await;
    let status = runner.status();
    let context = status.context.expect("the context was read at start");
    assert_eq!(context.compositor.as_deref(), Some("niri"));

    let cases: &[(&str, Value)] = &[
        (
            "workspace two",
            json!({"FocusWorkspace": {"reference": {"Index": 2}}}),
        ),
        ("next workspace", json!({"FocusWorkspaceDown": {}})),
        ("previous workspace", json!({"FocusWorkspaceUp": {}})),
        (
            "focus the monitor on the right",
            json!({"FocusMonitorRight": {}}),
        ),
        ("maximize", json!({"MaximizeColumn": {}})),
        ("toggle the overview", json!({"ToggleOverview": {}})),
    ];
    for (words, want) in cases {
        let before = niri.actions().len();
        let out = runner
            .command(words, &CommandOptions::default(), None)
            .await
            .unwrap_or_else(|e| panic!("{words:?}: {e:?}"));
        assert!(out.all_ok(), "{words:?}: {out:?}");
        let actions = niri.actions();
        assert_eq!(actions.len(), before + 1, "{words:?}: {actions:?}");
        let sent = &actions[before]["Action"];
        let (name, fields) = want.as_object().unwrap().iter().next().unwrap();
        let got = sent
            .get(name)
            .unwrap_or_else(|| panic!("{words:?}: sent {sent}, wanted {want}"));
        for (key, value) in fields.as_object().unwrap() {
            assert_eq!(&got[key], value, "{words:?}: sent {sent}");
        }
    }

    // "move window to workspace three" moves the focused window (niri's focused: firefox 10).
    let out = runner
        .command(
            "move window to workspace three",
            &CommandOptions::default(),
            None,
        )
        .await
        .unwrap();
    assert!(out.all_ok(), "{out:?}");
    let last = niri.actions().last().cloned().unwrap();
    assert_eq!(
        last["Action"]["MoveWindowToWorkspace"]["reference"],
        json!({"Index": 3}),
        "{last}"
    );

    // "switch to foot": a window of foot exists, so it is focused by id (no launch).
    let out = runner
        .command("switch to foot", &CommandOptions::default(), None)
        .await
        .unwrap();
    assert!(out.all_ok(), "{out:?}");
    let last = niri.actions().last().cloned().unwrap();
    assert!(last["Action"]["FocusWindow"]["id"].is_u64(), "{last}");

    // niri's Err is reported as a failed step with niri's words.
    niri.refuse("FocusWorkspace", "no such workspace, as asked");
    let out = runner
        .command("workspace four", &CommandOptions::default(), None)
        .await
        .unwrap();
    assert!(!out.all_ok(), "{out:?}");
    let error = out.results[0].error.as_ref().expect("an error");
    assert!(
        error.message.contains("no such workspace, as asked"),
        "{error:?}"
    );
    niri.allow("FocusWorkspace");

    // The compositor's socket drops: the plugin reconnects and goes on.
    let opened = niri.event_streams_opened();
    niri.drop_connections();
    assert!(
        niri.wait_event_streams_opened(opened + 1, Duration::from_secs(10))
            .await,
        "the plugin did not reconnect to niri"
    );
    let out = runner
        .command("workspace two", &CommandOptions::default(), None)
        .await
        .unwrap();
    assert!(out.all_ok(), "{out:?}");
    runner.shutdown().await;
}

/// niri's own actions with a declared inverse, each undone by "undo that": the inverse
/// action niri receives is read from the fake niri's wire (niri itself cannot run here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_that_sends_niri_the_inverse_of_each_reversible_action() {
    let niri = FakeNiri::start().await;
    let home = tempfile::tempdir().unwrap();
    let runner = niri_runner(&niri, home.path()).await;
    let last_action = || {
        let sent = niri.actions().last().cloned().expect("an action");
        sent["Action"]
            .as_object()
            .and_then(|a| a.keys().next().cloned())
            .unwrap_or_else(|| panic!("not an action: {sent}"))
    };
    let cases = [
        ("move the column left", "MoveColumnLeft", "MoveColumnRight"),
        ("move the window down", "MoveWindowDown", "MoveWindowUp"),
        (
            "move this window to the workspace below",
            "MoveWindowToWorkspaceDown",
            "MoveWindowToWorkspaceUp",
        ),
        (
            "move this workspace up",
            "MoveWorkspaceUp",
            "MoveWorkspaceDown",
        ),
        ("next workspace", "FocusWorkspaceDown", "FocusWindow"),
    ];
    for (words, done, undone) in cases {
        let out = runner
            .command(words, &CommandOptions::default(), None)
            .await
            .unwrap_or_else(|e| panic!("{words:?}: {e:?}"));
        assert!(out.all_ok(), "{words:?}: {out:?}");
        assert_eq!(last_action(), done, "{words:?}");
        let before = niri.actions().len();
        let out = runner
            .command("undo that", &CommandOptions::default(), None)
            .await
            .unwrap_or_else(|e| panic!("undo {words:?}: {e:?}"));
        assert!(out.all_ok(), "undo {words:?}: {out:?}");
        assert_eq!(niri.actions().len(), before + 1, "undo {words:?}: {out:?}");
        assert_eq!(last_action(), undone, "undo {words:?}: {out:?}");
    }
    // An action whose inverse is not recorded says why and sends nothing.
    let out = runner
        .command("center the column", &CommandOptions::default(), None)
        .await
        .unwrap();
    assert!(out.all_ok(), "{out:?}");
    let before = niri.actions().len();
    let out = runner
        .command("undo that", &CommandOptions::default(), None)
        .await
        .unwrap();
    assert!(!out.all_ok(), "{out:?}");
    let why = out.results[0].error.as_ref().expect("why").message.clone();
    assert!(why.contains("not recorded"), "{why}");
    assert_eq!(niri.actions().len(), before);
    runner.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_asked_again_on_a_timer_so_a_broken_niri_config_shows_with_its_line() {
    let niri = FakeNiri::start().await;
    let home = tempfile::tempdir().unwrap();
    let runner = niri_runner(&niri, home.path()).await;
    let rules = |r: &Runner| {
        r.plugins()
            .into_iter()
            .find(|p| p.id == "rules")
            .expect("the rules plugin")
    };
    assert_eq!(rules(&runner).status.as_str(), "ok");
    let config = home.path().join("config/niri/config.kdl");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "binds {\n    Mod+T { spawn \"foot\"; \n").unwrap();
    // Nobody asks: the supervisor's own health checks (every 5 s) find it.
    let report = until_status(&runner, "degraded").await;
    assert!(report.health.contains("config.kdl:"), "{report:?}");
    // Fixed: ok again.
    std::fs::write(&config, "binds {\n    Mod+T { spawn \"foot\"; }\n}\n").unwrap();
    until_status(&runner, "ok").await;
    runner.shutdown().await;
}

/// The rules plugin's report once its status is `want`, read from the runner's cache (no
/// health is asked for); fails after 20 s, four times the health interval.
async fn until_status(runner: &Runner, want: &str) -> utter_core::supervisor::PluginReport {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let report = runner
            .plugins()
            .into_iter()
            .find(|p| p.id == "rules")
            .expect("the rules plugin");
        if report.status.as_str() == want {
            return report;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still not {want} after 20 s: {report:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Without compositor IPC (GNOME, KDE Plasma) "take a screenshot" goes through the real
/// xdg-desktop-portal frontend, whose Screenshot backend is the test's (the only fake): the
/// file it saved is reported and checked, a window-only screenshot is refused with the reason,
/// and a refusal by the person is an error, not a success.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn screenshots_without_compositor_ipc_go_through_the_portal() {
    let bus = common::DbusSession::start();
    let portal = common::portal::FakePortal::start(&bus.address).await;
    let sandbox = Sandbox::new();
    let mut env = sandbox.env(Some(&bus.address));
    for name in [
        "NIRI_SOCKET",
        "SWAYSOCK",
        "I3SOCK",
        "HYPRLAND_INSTANCE_SIGNATURE",
    ] {
        env = env.without(name);
    }

    let reply = say(&env, "take a screenshot").await;
    let result = &reply["results"][0]["result"];
    assert_eq!(result["tool"], "portal", "{reply}");
    assert_eq!(result["compositor"], "none", "{reply}");
    assert_eq!(result["verified"], true, "{reply}");
    let path = result["path"].as_str().expect("the saved file");
    assert!(path.ends_with("Screenshot 1.png"), "{path}");
    assert_eq!(
        std::fs::read(path).unwrap(),
        common::portal::ONE_PIXEL_PNG,
        "the portal's file, found from its percent-encoded URI"
    );
    {
        let seen = portal.seen.lock().unwrap();
        assert_eq!(seen.screenshots.len(), 1);
        assert_eq!(seen.screenshots[0].get("interactive"), Some(&false));
    }

    // One window cannot be taken without the person picking it: refused, nothing asked.
    let run = run_utter(
        &[
            "say",
            "--local",
            "--json",
            "take a screenshot of this window",
        ],
        &env,
    )
    .await;
    assert_ne!(run.code, Some(0), "{run}");
    assert!(
        run.stdout.contains("picks") || run.stderr.contains("picks"),
        "{run}"
    );
    assert_eq!(portal.seen.lock().unwrap().screenshots.len(), 1);

    // The person says no: an error that says so.
    portal.seen.lock().unwrap().refuse_screenshots = true;
    let run = run_utter(&["say", "--local", "--json", "take a screenshot"], &env).await;
    assert_ne!(run.code, Some(0), "{run}");
    assert!(
        run.stdout.contains("refused") || run.stderr.contains("refused"),
        "{run}"
    );
}

/// GNOME and KDE Plasma have no window IPC the compositor plugin speaks: there the desktop
/// context comes from accessibility (the a11y plugin's `context.snapshot`, asked only when no
/// compositor plugin answers): the application with the active window, its title and pid,
/// and a compositor named "none" so every reader knows what is missing. Played here by a real
/// GTK window on a real accessibility bus, with the compositor's socket withheld.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_compositor_ipc_the_focused_application_comes_from_accessibility() {
    let desktop = crate::desktop::Desktop::start();
    let no_ipc = [("SWAYSOCK", ""), ("I3SOCK", ""), ("NIRI_SOCKET", "")];
    let (code, reply) = crate::desktop::utter_json(&desktop, &["context", "--json"], &no_ipc);
    assert_eq!(code, Some(0), "{reply}");
    assert_eq!(reply["source"], "a11y", "{reply}");
    let snapshot = &reply["snapshot"];
    assert_eq!(snapshot["compositor"]["name"], "none", "{snapshot}");
    assert_eq!(
        snapshot["compositor"]["source"], "accessibility",
        "{snapshot}"
    );
    let focused = &snapshot["focused"];
    assert_eq!(focused["title"], "Utter a11y form", "{snapshot}");
    assert_eq!(focused["pid"], desktop.form.id(), "{snapshot}");
    assert_eq!(
        focused["app_id"], "form.py",
        "GTK's program name: {snapshot}"
    );
    assert_eq!(snapshot["provenance"]["title"], "title");

    // With the socket, the compositor plugin answers as before (it comes first).
    let (code, reply) = crate::desktop::utter_json(&desktop, &["context", "--json"], &[]);
    assert_eq!(code, Some(0), "{reply}");
    assert_eq!(reply["source"], "compositor", "{reply}");
    assert_eq!(reply["snapshot"]["compositor"]["name"], "sway", "{reply}");

    // A command planned in that context types into the focused field by accessibility.
    let (code, out) = crate::desktop::say_with_env(&desktop, "type hello there", &no_ipc);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        crate::desktop::wait_for_file(&desktop, "entry.txt", "hello there").await,
        "{out}\n{}",
        desktop.form_log()
    );
}
