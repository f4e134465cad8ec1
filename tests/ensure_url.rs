//! `ensure_url` end to end: "open youtube" through the `utter` CLI with its embedded default
//! configuration (the rules router, the desktop and the compositor plugins) against a real
//! headless sway. A foot window started with `--app-id firefox` and a YouTube-like title
//! plays the browser; the desktop plugin must find it through `host.context` and focus it
//! through `host.action focus_app` instead of opening the URL, and open the URL (which the
//! sandbox's URL recorder catches instead of a browser) when no browser window shows the
//! site. Every effect is read back from sway itself. Through `utter daemon`, "undo that"
//! after a page was opened closes its tab: the key reaches the fake browser's own terminal.

use crate::common;

use crate::sway_session;

use common::daemon::Daemon;
use common::{ChildEnv, Sandbox, run_utter, wait_for};
use std::path::Path;
use std::time::Duration;
use sway_session::SwaySession;
use utter_protocol::serde_json::Value;

/// The title of the fake browser window, as Firefox would write it.
const YOUTUBE_TITLE: &str = "Some Video - YouTube — Mozilla Firefox";

/// How long an opened URL may take to reach the recorder.
const EFFECT_LIMIT: Duration = Duration::from_secs(10);

/// The sandbox's environment plus the sway session's (`SWAYSOCK`, `WAYLAND_DISPLAY`,
/// `XDG_RUNTIME_DIR`).
fn sway_env(sandbox: &Sandbox, sway: &SwaySession) -> ChildEnv {
    let mut env = sandbox.env(None);
    for (name, value) in sway.env() {
        env = env.with(&name, value);
    }
    env
}

/// `utter say --local --json [--dry-run] WORDS`, which must succeed; its one step result.
async fn say(env: &ChildEnv, words: &str, dry_run: bool) -> Value {
    let mut args = vec!["say", "--local", "--json"];
    if dry_run {
        args.push("--dry-run");
    }
    args.push(words);
    let run = run_utter(&args, env).await;
    assert_eq!(run.code, Some(0), "utter say {words:?}:\n{run}");
    let out = run.json();
    let results = out["results"].as_array().expect("results");
    assert_eq!(results.len(), 1, "{out}");
    assert_eq!(results[0]["op"], "ensure_url", "{out}");
    assert_eq!(results[0]["ok"], true, "{out}");
    results[0].clone()
}

/// sway's id of the first window of `app_id`.
fn window_id(sway: &SwaySession, app_id: &str) -> u64 {
    sway.window(app_id)
        .and_then(|(node, _)| node["id"].as_u64())
        .unwrap_or_else(|| panic!("no {app_id} window"))
}

/// Nothing reached the URL recorder within a moment.
async fn nothing_opened(recorded: &Path) -> bool {
    tokio::time::sleep(Duration::from_millis(700)).await;
    !recorded.exists()
}

/// The URL the recorder got, waiting for it.
async fn opened(recorded: &Path) -> Option<String> {
    wait_for(EFFECT_LIMIT, || recorded.exists())
        .await
        .then(|| std::fs::read_to_string(recorded).expect("read the recording"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_youtube_focuses_the_browser_window_already_showing_it() {
    let sandbox = Sandbox::new();
    let recorded = sandbox.install_url_recorder();
    let mut sway = SwaySession::start();
    sway.open_window_titled("firefox", YOUTUBE_TITLE);
    sway.open_window("beta");
    let firefox = window_id(&sway, "firefox");
    assert_eq!(sway.focused_app().as_deref(), Some("beta"));
    let env = sway_env(&sandbox, &sway);

    // The plan names the site as the catalog writes it.
    let step = say(&env, "open youtube", true).await;
    assert_eq!(step["args"]["site"], "YouTube", "{step}");
    assert_eq!(step["args"]["url"], "https://www.youtube.com", "{step}");
    // A dry run says it would focus the window, and neither focuses nor opens.
    let result = &step["result"];
    assert_eq!(result["reused"], true, "{step}");
    assert_eq!(result["window_id"], firefox, "{step}");
    assert!(
        result["detail"]
            .as_str()
            .unwrap_or_default()
            .starts_with("would focus the firefox window already showing YouTube"),
        "{step}"
    );
    assert!(nothing_opened(&recorded).await, "a dry run opened the URL");
    assert_eq!(sway.focused_app().as_deref(), Some("beta"));

    // Said for real, the firefox window gets the focus and no URL is opened.
    let step = say(&env, "open youtube", false).await;
    let result = &step["result"];
    assert_eq!(result["reused"], true, "{step}");
    assert_eq!(result["verified"], true, "{step}");
    assert_eq!(step["verified"], true, "{step}");
    assert_eq!(result["window_id"], firefox, "{step}");
    assert_eq!(
        result["detail"],
        format!("focused the firefox window already showing YouTube (window {firefox})"),
        "{step}"
    );
    assert_eq!(sway.focused_app().as_deref(), Some("firefox"));
    assert!(
        nothing_opened(&recorded).await,
        "the URL was opened although a browser window showed the site"
    );

    // No window shows GitHub: the URL is opened, and the detail says why.
    let step = say(&env, "open github", false).await;
    let result = &step["result"];
    assert_eq!(result["reused"], false, "{step}");
    assert_eq!(
        result["reuse_skipped"], "the one browser window's title does not mention GitHub",
        "{step}"
    );
    assert_eq!(
        opened(&recorded).await.as_deref(),
        Some("https://github.com\n"),
        "{step}"
    );
    assert_eq!(sway.focused_app().as_deref(), Some("firefox"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_of_another_app_showing_the_site_is_not_reused() {
    let sandbox = Sandbox::new();
    let recorded = sandbox.install_url_recorder();
    let mut sway = SwaySession::start();
    // A terminal whose title claims to be a browser showing YouTube.
    sway.open_window_titled("notes", YOUTUBE_TITLE);
    sway.open_window("beta");
    let env = sway_env(&sandbox, &sway);

    let step = say(&env, "open youtube", false).await;
    let result = &step["result"];
    assert_eq!(result["reused"], false, "{step}");
    let skipped = result["reuse_skipped"].as_str().unwrap_or_default();
    assert!(
        skipped.starts_with("no window of a known web browser is open")
            && skipped.contains("only browsers are reused"),
        "{step}"
    );
    assert_eq!(
        opened(&recorded).await.as_deref(),
        Some("https://www.youtube.com\n"),
        "{step}"
    );
    assert_eq!(sway.focused_app().as_deref(), Some("beta"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_title_only_selects_and_never_reaches_the_detail() {
    let sandbox = Sandbox::new();
    let recorded = sandbox.install_url_recorder();
    let mut sway = SwaySession::start();
    // Escape sequences, a bell and a bidi override around the site's name.
    let title = "\u{1b}]0;owned\u{7} YouTube \u{202e}\u{1b}[2J; rm -rf ~ — Mozilla Firefox";
    sway.open_window_titled("firefox", title);
    sway.open_window("beta");
    let firefox = window_id(&sway, "firefox");
    let env = sway_env(&sandbox, &sway);

    let step = say(&env, "open youtube", false).await;
    let result = &step["result"];
    assert_eq!(result["reused"], true, "{step}");
    assert_eq!(sway.focused_app().as_deref(), Some("firefox"));
    // The window was named by its id and app_id only.
    assert_eq!(
        result["focus"]["args"],
        utter_protocol::serde_json::json!({"app": "firefox", "window_id": firefox}),
        "{step}"
    );
    let detail = result["detail"].as_str().unwrap_or_default();
    assert!(!detail.chars().any(char::is_control), "{detail:?}");
    for word in ["owned", "rm -rf", "\u{202e}"] {
        assert!(!detail.contains(word), "{detail:?}");
        assert!(!step["args"].to_string().contains(word), "{step}");
    }
    assert!(nothing_opened(&recorded).await);
}

/// "open youtube" opens the page (no browser window showed it), the browser shows it in its
/// focused window, and "undo that" closes that tab: ctrl+w reaches that window, and nothing is
/// pressed when the focused window no longer shows the site.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_that_closes_the_tab_an_opened_site_shows() {
    let sandbox = Sandbox::new();
    let recorded = sandbox.install_url_recorder();
    let mut sway = SwaySession::start();
    sway.open_window("beta");
    // The fake browser: a terminal called chromium on a new tab, which shows YouTube once
    // the URL was handed over (`opened`), then records the one key it gets and closes, as
    // ctrl+w closes a browser's last tab.
    let dir = sway.runtime_dir().to_path_buf();
    let script = format!(
        "stty raw -echo; printf '\\033]2;New Tab - Chromium\\007'; \
         while [ ! -e {d}/opened ]; do sleep 0.1; done; \
         printf '\\033]2;YouTube - Chromium\\007'; \
         head -c 1 > {d}/pressed.tmp; mv {d}/pressed.tmp {d}/pressed",
        d = dir.display()
    );
    let mut browser = sway
        .command(
            "foot",
            &[("WAYLAND_DISPLAY", "wayland-1"), ("SHELL", "/bin/sh")],
        )
        .args(["--app-id", "chromium", "sh", "-c", &script])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start foot");
    let titled = |title: &str| {
        let title = title.to_owned();
        let sway = &sway;
        move || {
            sway.views()
                .into_iter()
                .find(|(n, _)| n["app_id"] == "chromium" && n["name"] == title.as_str())
        }
    };
    assert!(
        sway_session::poll(Duration::from_secs(10), titled("New Tab - Chromium")).is_some(),
        "the fake browser did not come up"
    );
    assert_eq!(sway.focused_app().as_deref(), Some("chromium"));
    let daemon = Daemon::builder(&sandbox)
        .env(sway_env(&sandbox, &sway).with("XDG_STATE_HOME", sandbox.path("state")))
        .socket(&sandbox.path("run/utter/runner.sock"))
        .start()
        .await;
    let say = |words: &'static str| {
        let (daemon, sandbox) = (&daemon, &sandbox);
        async move { daemon.utter(sandbox, &["say", words, "--json"]).await }
    };

    let run = say("open youtube").await;
    assert_eq!(run.code, Some(0), "{run}\n{}", daemon.log());
    assert_eq!(run.json()["results"][0]["result"]["reused"], false, "{run}");
    assert_eq!(
        opened(&recorded).await.as_deref(),
        Some("https://www.youtube.com\n"),
        "{run}"
    );
    std::fs::write(dir.join("opened"), "").expect("hand the URL to the fake browser");
    assert!(
        sway_session::poll(Duration::from_secs(10), titled("YouTube - Chromium")).is_some(),
        "the fake browser did not show the page"
    );
    let run = say("undo that").await;
    assert_eq!(run.code, Some(0), "{run}\n{}", daemon.log());
    let step = &run.json()["results"][0];
    assert_eq!(step["op"], "close_tab", "{run}");
    assert_eq!(step["result"]["chord"], "ctrl+w", "{run}");
    assert_eq!(step["verified"], true, "{run}");
    let pressed = std::fs::read(dir.join("pressed")).expect("the browser got a key");
    assert_eq!(pressed, [0x17], "ctrl+w is byte 0x17 on a terminal");
    let _ = browser.wait();
    assert!(
        sway.window("chromium").is_none(),
        "the tab's window is still open"
    );

    // Again with the page no longer shown: refused, nothing pressed.
    let run = say("open youtube").await;
    assert_eq!(run.code, Some(0), "{run}");
    let run = say("undo that").await;
    let step = &run.json()["results"][0];
    assert_eq!(step["op"], "close_tab", "{run}");
    assert_eq!(step["ok"], false, "{run}");
    let why = step["error"]["message"].as_str().unwrap_or_default();
    assert!(why.contains("not a web browser"), "{why}");
}
