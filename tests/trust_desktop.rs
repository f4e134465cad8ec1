//! The trust model on a real desktop (issue 28), in the shape of the hostile trial that
//! broke it: headless sway with a GTK window on a real accessibility bus, the built-in
//! `rules`, `compositor` and `a11y` plugins and `utter-input` as real processes under an
//! in-process runner, a stand-in vision server (plugins/a11y/tests/grounding_server), and a
//! hostile AT-SPI application (plugins/a11y/tests/fixtures/hostile_app.py).
//!
//! - a click placed by screen grounding is asked about every time, the question naming what
//!   the person said and the window it lands in; approved, it clicks;
//! - a foreign window lying over the point refuses it before anyone is asked;
//! - a window that moves while the person is asked refuses it after the yes;
//! - a background application that claims to be active gets neither the typed text nor the
//!   click.
//!
//! Debian packages: as plugins/a11y/tests/gtk.rs (sway, foot, wtype, at-spi2-core,
//! python3-gi, gir1.2-gtk-3.0, gir1.2-atspi-2.0, grim); tests/run.sh installs them.

use crate::common;
use crate::desktop;
use crate::grounding_server;
use crate::sway_session;

use desktop::{Desktop, say_with_env, wait_for_file};
use grounding_server::GroundingServer;
use std::sync::Arc;
use std::time::Duration;
use sway_session::poll;
use utter_core::config;
use utter_core::events::Event;
use utter_core::pipeline::CommandOptions;
use utter_core::runner::Runner;
use utter_core::supervisor::SupervisorOptions;
use utter_protocol::serde_json::{Value, json};

const LIMIT: Duration = Duration::from_secs(60);

/// A runner in this process with the built-in rules, compositor and a11y plugins and
/// `utter-input`, all in `desktop`'s session; `grounding` is the vision server's URL.
pub(crate) async fn desktop_runner(desktop: &Desktop, grounding: &str) -> Arc<Runner> {
    let utter = common::bin("utter").display().to_string();
    let input = common::bin("utter-input").display().to_string();
    let runtime = desktop.sway.runtime_dir().display().to_string();
    let home = desktop.out.path().join("home");
    std::fs::create_dir_all(home.join("config")).expect("home");
    let env = json!({
        "WAYLAND_DISPLAY": "wayland-1",
        "XDG_RUNTIME_DIR": runtime,
        "SWAYSOCK": desktop.sway.socket.display().to_string(),
        "DBUS_SESSION_BUS_ADDRESS": desktop.bus.address,
        "HOME": home.display().to_string(),
        "XDG_CONFIG_HOME": home.join("config").display().to_string(),
        "UTTER_GROUNDING_URL": grounding,
    });
    let inline = |v: &Value| {
        let pairs: Vec<String> = v
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| format!("{k} = {v}"))
            .collect();
        format!("{{ {} }}", pairs.join(", "))
    };
    let mut text = String::from(
        "config_version = 1\n[runner]\nrpc_timeout_ms = 40000\nconfirm_timeout_ms = 30000\ndrain_timeout_ms = 300\nkill_timeout_ms = 300\n",
    );
    for (id, kind, argv) in [
        ("rules", "router", json!([utter, "plugin", "rules"])),
        (
            "compositor",
            "bundle",
            json!([utter, "plugin", "compositor"]),
        ),
        ("a11y", "bundle", json!([utter, "plugin", "a11y"])),
        ("input", "action", json!([input])),
    ] {
        text.push_str(&format!(
            "\n[[plugin]]\nid = \"{id}\"\nkind = \"{kind}\"\nentrypoint = {argv}\nenv = {}\n",
            inline(&env)
        ));
    }
    let loaded = config::parse(&text, "trust-desktop.toml").expect("valid config");
    let options = SupervisorOptions::from_config(&loaded.config);
    let r = Runner::start(loaded, options, None).await;
    for p in r.plugins() {
        assert!(p.status.is_running(), "{p:?}");
    }
    r
}

/// Wait until the runner's context (the compositor plugin's snapshot) shows `app_id`
/// focused and, when given, the focused window at `rect`.
pub(crate) async fn wait_context(r: &Runner, app_id: &str, rect: Option<&Value>) {
    let deadline = tokio::time::Instant::now() + LIMIT;
    loop {
        if let Ok(reply) = r.context_now().await {
            let focused = &reply.snapshot["focused"];
            if focused["app_id"] == app_id && rect.is_none_or(|r| &focused["rect"] == r) {
                return;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the runner's context never showed {app_id} focused"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Run `words` in a task; return its handle.
pub(crate) fn command(r: &Arc<Runner>, words: &str) -> tokio::task::JoinHandle<Value> {
    let r = r.clone();
    let words = words.to_owned();
    tokio::spawn(async move {
        let outcome = r
            .command(&words, &CommandOptions::default(), None)
            .await
            .expect("the command is planned");
        utter_protocol::serde_json::to_value(outcome).expect("JSON")
    })
}

/// The next confirmation the runner asks, within [`LIMIT`].
pub(crate) async fn next_question(
    events: &mut tokio::sync::broadcast::Receiver<Event>,
) -> utter_core::confirm::PendingConfirmation {
    tokio::time::timeout(LIMIT, async {
        loop {
            if let Ok(Event::ConfirmationRequested(p)) = events.recv().await {
                return p;
            }
        }
    })
    .await
    .expect("the runner asks for a confirmation")
}

/// The centre of one of the fixture's widgets, in image pixels of the window's content, and
/// that content's size (from the fixture's `layout.json` and the context's `rect`).
fn widget_centre(desktop: &Desktop, context: &Value, widget: &str) -> ((u32, u32), (i64, i64)) {
    let layout: Value =
        utter_protocol::serde_json::from_str(&desktop.read("layout.json").expect("layout.json"))
            .unwrap();
    let w = &layout[widget];
    let centre = (
        w["x"].as_i64().unwrap() + w["width"].as_i64().unwrap() / 2,
        w["y"].as_i64().unwrap() + w["height"].as_i64().unwrap() / 2,
    );
    let rect = &context["focused"]["rect"];
    let size = (
        u32::try_from(rect["width"].as_u64().unwrap()).unwrap(),
        u32::try_from(rect["height"].as_u64().unwrap()).unwrap(),
    );
    (size, centre)
}

fn step(outcome: &Value) -> &Value {
    &outcome["results"][0]
}

fn message(outcome: &Value) -> String {
    step(outcome)["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grounded_click_is_always_asked_and_refused_under_a_foreign_window_or_after_a_move() {
    let mut desktop = Desktop::start();
    let context = desktop.context();
    let form_id = context["focused"]["app_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let form_pid = context["focused"]["pid"].as_i64().expect("the form's pid");
    let (size, red) = widget_centre(&desktop, &context, "Red Button");
    let rect = &context["focused"]["rect"];
    let on_screen = (
        rect["x"].as_i64().unwrap() + red.0,
        rect["y"].as_i64().unwrap() + red.1,
    );
    let server = GroundingServer::start();
    server.expect_size(size.0, size.1);
    // A sure answer: the model's confidence decides nothing.
    server.answer_point(red.0, red.1, 0.99);
    let r = desktop_runner(&desktop, &server.url).await;
    let mut events = r.subscribe();

    // 1. Asked, with a question that names the words and the window; approved: clicked.
    let call = command(&r, "click the big red square");
    let asked = next_question(&mut events).await;
    assert_eq!(asked.request.op, "click_point", "{asked:?}");
    let summary = &asked.request.summary;
    assert!(
        summary.contains(&format!("({}, {})", on_screen.0, on_screen.1)),
        "{summary}"
    );
    assert!(
        summary.contains(&form_id),
        "the window it lands in: {summary}"
    );
    assert!(
        summary.contains("big red square"),
        "what was said: {summary}"
    );
    assert!(summary.contains("plugin a11y"), "who placed it: {summary}");
    r.confirmations
        .answer(&asked.id, true, "test")
        .expect("answered");
    let outcome = tokio::time::timeout(LIMIT, call).await.unwrap().unwrap();
    assert_eq!(step(&outcome)["ok"], true, "{outcome}");
    assert_eq!(step(&outcome)["result"]["path"], "screen", "{outcome}");
    assert_eq!(
        step(&outcome)["result"]["confirmed_by"],
        "test",
        "{outcome}"
    );
    assert!(
        wait_for_file(&desktop, "red-clicked", "1").await,
        "the approved click did not press the Red Button: {outcome}"
    );
    std::fs::remove_file(desktop.path("red-clicked")).expect("reset");

    // 2. Another app's window floats over the point: refused before anyone is asked, and
    // nothing is clicked (the trial's foreign "Approve" button lay there).
    desktop.sway.open_window("intruder");
    let x = (on_screen.0 - 100).max(0);
    let y = (on_screen.1 - 60).max(0);
    desktop.sway.msg(&[
        "[app_id=intruder]",
        "floating",
        "enable,",
        "resize",
        "set",
        "240",
        "140,",
        "move",
        "position",
        &x.to_string(),
        &y.to_string(),
    ]);
    desktop.sway.msg(&[&format!("[pid={form_pid}]"), "focus"]);
    let refocused = poll(Duration::from_secs(5), || {
        (desktop.sway.focused_app().as_deref() == Some(form_id.as_str())).then_some(())
    });
    assert!(refocused.is_some(), "the form did not take the focus back");
    wait_context(&r, &form_id, None).await;
    let outcome = tokio::time::timeout(LIMIT, command(&r, "click the big red square"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(step(&outcome)["ok"], false, "{outcome}");
    assert_eq!(step(&outcome)["error"]["code"], -32003, "{outcome}");
    let why = message(&outcome);
    assert!(why.contains("another window, intruder"), "{why}");
    let mut asked_again = false;
    while let Ok(event) = events.try_recv() {
        asked_again |= matches!(event, Event::ConfirmationRequested(_));
    }
    assert!(
        !asked_again,
        "nobody is asked about a point another window covers"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(desktop.read("red-clicked"), None, "nothing was clicked");

    // 2b. The intruder floats elsewhere, then is moved over the point: sway sends no event
    // for a floating window moved, so only a fresh read of the tree sees it.
    desktop.sway.msg(&[
        "[app_id=intruder]",
        "move",
        "position",
        &(on_screen.0 + 300).to_string(),
        &(on_screen.1 + 300).to_string(),
    ]);
    // Focus changes are events: the plugin re-reads the tree and sees the intruder away.
    desktop.sway.msg(&["[app_id=intruder]", "focus"]);
    wait_context(&r, "intruder", None).await;
    desktop.sway.msg(&[&format!("[pid={form_pid}]"), "focus"]);
    wait_context(&r, &form_id, None).await;
    // Wait until the context shows the intruder away from the point, then move it back.
    let deadline = tokio::time::Instant::now() + LIMIT;
    loop {
        let snapshot = r.context_now().await.expect("context").snapshot;
        let away = snapshot["windows"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|w| w["app_id"] == "intruder" && w["rect"]["x"].as_i64() > Some(on_screen.0));
        if away {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the context never showed the move"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    desktop.sway.msg(&[
        "[app_id=intruder]",
        "move",
        "position",
        &x.to_string(),
        &y.to_string(),
    ]);
    let outcome = tokio::time::timeout(LIMIT, command(&r, "click the big red square"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(step(&outcome)["error"]["code"], -32003, "{outcome}");
    assert!(
        message(&outcome).contains("another window, intruder"),
        "{outcome}"
    );

    // 2c. Only the intruder's title bar lies over the point: that covers it too.
    desktop.sway.msg(&[
        "[app_id=intruder]",
        "move",
        "position",
        &x.to_string(),
        &(on_screen.1 - 4).to_string(),
    ]);
    let content_top = poll(Duration::from_secs(5), || {
        let (node, _) = desktop.sway.window("intruder")?;
        let top = node["rect"]["y"].as_i64()? + node["window_rect"]["y"].as_i64()?;
        (top > on_screen.1
            && node["rect"]["y"].as_i64()? - node["deco_rect"]["height"].as_i64()? <= on_screen.1)
            .then_some(top)
    });
    assert!(
        content_top.is_some(),
        "the intruder's title bar did not come to lie over the point: {:?}",
        desktop.sway.window("intruder")
    );
    desktop.sway.msg(&[&format!("[pid={form_pid}]"), "focus"]);
    wait_context(&r, &form_id, None).await;
    let outcome = tokio::time::timeout(LIMIT, command(&r, "click the big red square"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(step(&outcome)["error"]["code"], -32003, "{outcome}");
    assert!(
        message(&outcome).contains("another window, intruder"),
        "{outcome}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(desktop.read("red-clicked"), None, "nothing was clicked");
    desktop.sway.msg(&["[app_id=intruder]", "kill"]);
    let gone = poll(Duration::from_secs(5), || {
        desktop.sway.window("intruder").is_none().then_some(())
    });
    assert!(gone.is_some(), "the intruder's window did not close");

    // 3. The window moves while the person is asked: the yes comes too late for the point.
    let refocused = poll(Duration::from_secs(5), || {
        (desktop.sway.focused_app().as_deref() == Some(form_id.as_str())).then_some(())
    });
    assert!(refocused.is_some(), "the form did not take the focus back");
    wait_context(&r, &form_id, None).await;
    let mut events = r.subscribe();
    let call = command(&r, "click the big red square");
    let asked = next_question(&mut events).await;
    let before = desktop.window().expect("the form")["rect"].clone();
    desktop.sway.msg(&[
        &format!("[pid={form_pid}]"),
        "floating",
        "enable,",
        "resize",
        "set",
        "500",
        "400,",
        "move",
        "position",
        "40",
        "30",
    ]);
    let moved = poll(Duration::from_secs(5), || {
        (desktop.window()?["rect"] != before).then_some(())
    });
    assert!(moved.is_some(), "sway did not move the form");
    // The compositor plugin follows sway's events: wait until it shows the move.
    let deadline = tokio::time::Instant::now() + LIMIT;
    loop {
        let now = r.context_now().await.expect("context").snapshot["focused"]["rect"].clone();
        if now != context["focused"]["rect"] {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the context never showed the move"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    r.confirmations
        .answer(&asked.id, true, "test")
        .expect("answered");
    let outcome = tokio::time::timeout(LIMIT, call).await.unwrap().unwrap();
    assert_eq!(step(&outcome)["ok"], false, "{outcome}");
    assert_eq!(step(&outcome)["error"]["code"], -32003, "{outcome}");
    let why = message(&outcome);
    assert!(
        why.contains("moved or was resized") || why.contains("outside the focused window"),
        "{why}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(desktop.read("red-clicked"), None, "nothing was clicked");
    let audit = r.audit(None);
    assert!(
        audit
            .iter()
            .any(|e| e.op == "click_point" && e.decision == "denied"),
        "{audit:?}"
    );
    r.shutdown().await;
}

/// The hostile AT-SPI application, started on `desktop`'s bus; killed on drop.
struct Hostile {
    child: std::process::Child,
    dir: tempfile::TempDir,
}

impl Hostile {
    fn start(desktop: &Desktop) -> Hostile {
        let dir = tempfile::tempdir().expect("temp dir");
        let script = common::repo_root().join("plugins/a11y/tests/fixtures/hostile_app.py");
        let child = std::process::Command::new("/usr/bin/python3")
            .arg(&script)
            .arg(dir.path())
            .env("DBUS_SESSION_BUS_ADDRESS", &desktop.bus.address)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("log")).expect("log"))
            .spawn()
            .expect("python3 (Debian: python3-gi gir1.2-atspi-2.0)");
        let mut hostile = Hostile { child, dir };
        let ready = poll(Duration::from_secs(15), || {
            if let Ok(Some(status)) = hostile.child.try_wait() {
                panic!(
                    "hostile_app.py exited with {status}:\n{}",
                    hostile.read("log")
                );
            }
            hostile.dir.path().join("ready").exists().then_some(())
        });
        assert!(
            ready.is_some(),
            "hostile_app.py did not register:\n{}",
            hostile.read("log")
        );
        hostile
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default()
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_app_that_claims_to_be_active_gets_no_typing_and_no_click() {
    let mut desktop = Desktop::start();
    // The focused window is a terminal, which has no accessibility connection; the hostile
    // application says its frame is active and its password field focused.
    desktop.sway.open_window("term");
    let focused = poll(Duration::from_secs(5), || {
        (desktop.sway.focused_app().as_deref() == Some("term")).then_some(())
    });
    assert!(focused.is_some(), "the terminal did not take the focus");
    let hostile = Hostile::start(&desktop);

    let (code, out) = say_with_env(&desktop, "type my password is hunter2", &[]);
    let step = &out["results"][0];
    assert_eq!(step["op"], "type_text", "{out}");
    assert_eq!(step["plugin"], "a11y", "{out}");
    // Typed as keystrokes into the focused terminal, not inserted into the claimant.
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(step["result"]["path"], "keyboard", "{out}");
    let reason = step["result"]["fallback_reason"]
        .as_str()
        .unwrap_or_default();
    assert!(
        reason.contains("has no connection to the accessibility bus"),
        "{reason}"
    );
    assert_eq!(
        hostile.read("inserted"),
        "",
        "the background app got the text"
    );
    assert_eq!(desktop.read("entry.txt").unwrap_or_default(), "");

    let (code, out) = say_with_env(&desktop, "click approve", &[]);
    assert_ne!(code, Some(0), "{out}");
    let message = out["results"][0]["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.contains("has no connection to the accessibility bus"),
        "{out}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        hostile.read("approved"),
        "",
        "the background app's button was pressed"
    );
}
