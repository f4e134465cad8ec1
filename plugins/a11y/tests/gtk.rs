//! `utter-a11y` against a real GTK 3 application over a real accessibility bus.
//!
//! Each test starts a headless sway (as the user `nobody` under root, see
//! `../../compositor/tests/sway_session`), a private session `dbus-daemon` (root, its own
//! `HOME` and `XDG_RUNTIME_DIR`, so the accessibility bus that `at-spi-bus-launcher` starts
//! on demand is private too), and `tests/fixtures/form.py` (an entry, "Blue Button" and "Red
//! Button") on that bus and that Wayland display. The plugin gets the same bus and the
//! focused window from sway as `context`. Effects are read from files the fixture writes:
//! the entry's text on every change, a marker per button click.
//!
//! Debian packages: sway, foot, util-linux (setpriv), dbus-daemon, at-spi2-core,
//! libatk-adaptor, python3-gi, gir1.2-gtk-3.0. When one is missing the tests fail and say so.

mod desktop;
mod grounding_server;
#[path = "../../compositor/tests/sway_session/mod.rs"]
mod sway_session;

use desktop::{Desktop, say, say_with_env, wait_for_file};
use grounding_server::GroundingServer;
use serde_json::{Value, json};
use std::ffi::OsString;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use sway_session::poll;
use utter_protocol::testkit::{HostHandler, SpawnOptions, TestPlugin};
use utter_protocol::{ErrorObject, Request};

async fn start_plugin(bus_address: &str) -> TestPlugin {
    start_plugin_with(bus_address, &[], HostHandler::default()).await
}

/// The plugin with extra environment variables and a stand-in for the runner's `host.*`.
async fn start_plugin_with(
    bus_address: &str,
    env: &[(&str, &str)],
    host: HostHandler,
) -> TestPlugin {
    let mut vars = vec![(
        OsString::from("DBUS_SESSION_BUS_ADDRESS"),
        OsString::from(bus_address),
    )];
    vars.extend(
        env.iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v))),
    );
    let options = SpawnOptions {
        env: vars,
        timeout: Duration::from_secs(15),
        host,
        ..Default::default()
    };
    TestPlugin::start(&[env!("CARGO_BIN_EXE_utter-a11y").into()], options)
        .await
        .expect("the plugin starts and passes the handshake")
}

async fn invoke(
    plugin: &TestPlugin,
    op: &str,
    args: Value,
    context: &Value,
    dry_run: bool,
) -> Result<Value, ErrorObject> {
    plugin
        .request(
            "action.invoke",
            json!({"op": op, "args": args, "provenance": "user", "dry_run": dry_run,
                   "context": context}),
        )
        .await
}

/// Wait until the plugin sees the form's tree (the bridge registers shortly after start).
async fn wait_for_tree(plugin: &TestPlugin, context: &Value) -> Value {
    let mut last = String::new();
    for _ in 0..100 {
        match plugin
            .request("perception.a11y", json!({"context": context}))
            .await
        {
            Ok(v)
                if v["app"]["found_by"] == "pid"
                    && v["nodes"]
                        .as_array()
                        .is_some_and(|n| n.iter().any(|n| n["name"] == "Red Button")) =>
            {
                return v;
            }
            Ok(v) => last = v.to_string(),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "the plugin never saw the form's tree; last answer: {last}; stderr:\n{}",
        plugin.stderr()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_the_tree_and_types_into_the_focused_entry() {
    let desktop = Desktop::start();
    let plugin = start_plugin(&desktop.bus.address).await;
    let context = desktop.context();

    let health = plugin
        .request("plugin.health", json!({}))
        .await
        .expect("health");
    assert_eq!(health["status"], "ok", "{health}");

    let tree = wait_for_tree(&plugin, &context).await;
    assert_eq!(tree["provenance"], "a11y");
    assert_eq!(tree["app"]["pid"], desktop.form.id());
    let nodes = tree["nodes"].as_array().expect("nodes");
    assert_eq!(nodes[0]["parent"], Value::Null);
    let blue = nodes
        .iter()
        .find(|n| n["name"] == "Blue Button")
        .expect("Blue Button in the tree");
    assert_eq!(blue["role"], "button", "{blue}");
    assert!(
        blue["actions"].as_array().is_some_and(|a| !a.is_empty()),
        "{blue}"
    );
    let small = plugin
        .request(
            "perception.a11y",
            json!({"context": context, "max_nodes": 2}),
        )
        .await
        .expect("a bounded read");
    assert_eq!(small["nodes"].as_array().map(Vec::len), Some(2));
    assert_eq!(small["truncated"], true);

    // Without the focused window's pid the application is found by its active window.
    let fallback = plugin
        .request("perception.a11y", json!({}))
        .await
        .expect("a read without context");
    assert_eq!(
        fallback["app"]["found_by"], "active frame",
        "{}",
        fallback["app"]
    );
    assert_eq!(fallback["app"]["pid"], desktop.form.id());

    // A dry run says what it would do and types nothing.
    let dry = invoke(
        &plugin,
        "type_text",
        json!({"text": "hello world"}),
        &context,
        true,
    )
    .await
    .expect("dry run");
    assert_eq!(dry["dry_run"], true, "{dry}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(desktop.read("entry.txt"), None, "a dry run typed something");

    let typed = invoke(
        &plugin,
        "type_text",
        json!({"text": "hello world"}),
        &context,
        false,
    )
    .await
    .unwrap_or_else(|e| panic!("type_text failed: {e}; stderr:\n{}", plugin.stderr()));
    assert_eq!(typed["ok"], true, "{typed}");
    assert_eq!(typed["verified"], true, "{typed}");
    assert_eq!(typed["path"], "a11y", "{typed}");
    assert!(
        wait_for_file(&desktop, "entry.txt", "hello world").await,
        "the entry holds {:?}",
        desktop.read("entry.txt")
    );
    // The caret follows the typed text, so the next words go after it.
    let more = invoke(
        &plugin,
        "type_text",
        json!({"text": ", again"}),
        &context,
        false,
    )
    .await
    .expect("type more");
    assert_eq!(more["verified"], true, "{more}");
    assert_eq!(more["inserted_at"], 11, "{more}");
    assert!(
        wait_for_file(&desktop, "entry.txt", "hello world, again").await,
        "the entry holds {:?}",
        desktop.read("entry.txt")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clicks_the_button_the_person_names() {
    let desktop = Desktop::start();
    let plugin = start_plugin(&desktop.bus.address).await;
    let context = desktop.context();
    wait_for_tree(&plugin, &context).await;

    let dry = invoke(
        &plugin,
        "click_element",
        json!({"description": "the blue button"}),
        &context,
        true,
    )
    .await
    .expect("dry run");
    assert_eq!(dry["would_click"]["name"], "Blue Button", "{dry}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!desktop.path("blue-clicked").exists(), "a dry run clicked");

    let clicked = invoke(
        &plugin,
        "click_element",
        json!({"description": "the blue button"}),
        &context,
        false,
    )
    .await
    .unwrap_or_else(|e| panic!("click_element failed: {e}; stderr:\n{}", plugin.stderr()));
    assert_eq!(clicked["ok"], true, "{clicked}");
    assert_eq!(clicked["path"], "a11y");
    assert_eq!(
        clicked["clicked"],
        json!({"role": "button", "name": "Blue Button"})
    );
    assert!(
        wait_for_file(&desktop, "blue-clicked", "1").await,
        "Blue Button was not clicked"
    );
    assert!(!desktop.path("red-clicked").exists());

    let red = invoke(
        &plugin,
        "click_element",
        json!({"description": "Red"}),
        &context,
        false,
    )
    .await
    .expect("click red");
    assert_eq!(red["clicked"]["name"], "Red Button", "{red}");
    assert!(
        wait_for_file(&desktop, "red-clicked", "1").await,
        "Red Button was not clicked"
    );
    assert_eq!(desktop.read("blue-clicked").as_deref(), Some("1"));

    // A check box shows its effect in its state: the click is verified.
    let remember = invoke(
        &plugin,
        "click_element",
        json!({"description": "the remember me check box"}),
        &context,
        false,
    )
    .await
    .expect("click the check box");
    assert_eq!(remember["clicked"]["name"], "Remember me", "{remember}");
    assert_eq!(remember["verified"], true, "{remember}");
    assert!(
        wait_for_file(&desktop, "remember", "on").await,
        "the check box was not toggled"
    );

    let e = invoke(
        &plugin,
        "click_element",
        json!({"description": "the green button"}),
        &context,
        false,
    )
    .await
    .expect_err("no green button");
    assert_eq!(e.code, -32000);
    assert!(
        e.message.contains("Blue Button") && e.message.contains("Red Button"),
        "{}",
        e.message
    );

    let e = invoke(
        &plugin,
        "click_element",
        json!({"description": "button"}),
        &context,
        false,
    )
    .await
    .expect_err("ambiguous");
    assert_eq!(e.code, -32000);
    assert!(e.message.contains("equally"), "{}", e.message);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(desktop.read("blue-clicked").as_deref(), Some("1"));
    assert_eq!(desktop.read("red-clicked").as_deref(), Some("1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_inputs_are_refused_and_the_plugin_keeps_serving() {
    let desktop = Desktop::start();
    let plugin = start_plugin(&desktop.bus.address).await;
    let context = desktop.context();
    wait_for_tree(&plugin, &context).await;
    let cases = [
        ("type_text", json!({"text": ""})),
        ("type_text", json!({"text": "x".repeat(10_001)})),
        ("type_text", json!({"text": "a\u{0}b"})),
        ("type_text", json!({"text": 42})),
        ("type_text", json!({})),
        (
            "click_element",
            json!({"description": "b".repeat(100 * 1024)}),
        ),
        ("click_element", json!({"description": ""})),
        ("click_element", json!({"description": "blue\u{0}"})),
    ];
    for (op, args) in cases {
        let e = invoke(&plugin, op, args, &context, false)
            .await
            .expect_err("hostile input");
        assert_eq!(e.code, -32602, "{op}: {e}");
    }
    let e = plugin
        .request("perception.a11y", json!({"max_depth": -1}))
        .await
        .expect_err("bad bound");
    assert_eq!(e.code, -32602);
    let e = invoke(&plugin, "nonsense", json!({}), &context, false)
        .await
        .expect_err("unknown op");
    assert_eq!(e.code, -32601);
    // The compositor says nothing is focused: nothing is typed, by accessibility or by
    // keystrokes, and the error says why.
    let mut unfocused = context.clone();
    unfocused["focused"] = Value::Null;
    let e = invoke(
        &plugin,
        "type_text",
        json!({"text": "lost"}),
        &unfocused,
        false,
    )
    .await
    .expect_err("typed with no window focused");
    assert!(
        e.message.contains("no window is focused") && !e.message.contains("keystrokes"),
        "{}",
        e.message
    );
    // Still serving, and nothing was typed.
    let typed = invoke(&plugin, "type_text", json!({"text": "ok"}), &context, false)
        .await
        .expect("type after the hostile inputs");
    assert_eq!(typed["verified"], true, "{typed}");
    assert!(wait_for_file(&desktop, "entry.txt", "ok").await);
    // An undo's delete_text removes only what the field still holds where it was typed:
    // other text, another offset, or hostile args delete nothing.
    for (args, why) in [
        (json!({"text": "no", "at": 0}), "no longer holds"),
        (json!({"text": "ok", "at": 1}), "no longer holds"),
        (json!({"text": "ok", "at": -1}), "character offset"),
        (json!({"text": "ok", "at": "0"}), "character offset"),
        (json!({"text": "", "at": 0}), "empty"),
    ] {
        let e = invoke(&plugin, "delete_text", args.clone(), &context, false)
            .await
            .expect_err("deleted what it should not");
        assert!(e.message.contains(why), "{args}: {}", e.message);
    }
    assert_eq!(desktop.read("entry.txt").as_deref(), Some("ok"));

    // The fixture's buttons take the focus when clicked: then no text field is focused, and
    // type_text says so rather than typing somewhere else.
    invoke(
        &plugin,
        "click_element",
        json!({"description": "blue"}),
        &context,
        false,
    )
    .await
    .expect("click blue");
    assert!(wait_for_file(&desktop, "blue-clicked", "1").await);
    // The button took the focus in its clicked handler, before the marker was written.
    let refused = invoke(
        &plugin,
        "type_text",
        json!({"text": "nope"}),
        &context,
        false,
    )
    .await
    .expect_err("typed although the entry had lost the focus");
    let e = refused;
    assert_eq!(e.code, -32000);
    // Alone (no runner to serve host.action), the keystroke fallback cannot run; the
    // message says both why accessibility could not type and why keystrokes did not.
    assert!(
        e.message.contains("no focused text field")
            && e.message.contains("typing keystrokes instead failed"),
        "{}",
        e.message
    );
    assert_eq!(desktop.read("entry.txt").as_deref(), Some("ok"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_accessibility_bus_health_is_degraded_and_says_why() {
    let dir = tempfile::tempdir().expect("temp dir");
    let address = format!("unix:path={}", dir.path().join("no-bus").display());
    let plugin = start_plugin(&address).await;
    let health = plugin
        .request("plugin.health", json!({}))
        .await
        .expect("health");
    assert_eq!(health["status"], "degraded", "{health}");
    let detail = health["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("session bus"), "{detail}");

    let caps = plugin
        .request("action.capabilities", json!({}))
        .await
        .expect("capabilities");
    assert_eq!(caps["ops"].as_array().map(Vec::len), Some(3));
    let e = plugin
        .request(
            "action.invoke",
            json!({"op": "type_text", "args": {"text": "hi"}, "provenance": "user"}),
        )
        .await
        .expect_err("no bus");
    assert_eq!(e.code, -32000);
    assert!(e.message.contains("accessibility bus"), "{}", e.message);

    // A session bus without at-spi (no service directory holds org.a11y.Bus): degraded too.
    let bare = dir.path().join("bare.conf");
    std::fs::write(
        &bare,
        format!(
            "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\" \
             \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n<busconfig><type>session</type>\
             <listen>unix:path={}</listen><policy context=\"default\"><allow send_destination=\"*\" eavesdrop=\"true\"/>\
             <allow eavesdrop=\"true\"/><allow own=\"*\"/></policy></busconfig>\n",
            dir.path().join("bare").display()
        ),
    )
    .expect("write a bus config");
    let mut cmd = Command::new("dbus-daemon");
    cmd.arg(format!("--config-file={}", bare.display()))
        .args(["--nofork", "--print-address=1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut bus = cmd.spawn().expect("dbus-daemon");
    let mut line = String::new();
    use std::io::BufRead;
    std::io::BufReader::new(bus.stdout.take().expect("piped"))
        .read_line(&mut line)
        .expect("address");
    let plugin = start_plugin(line.trim()).await;
    let health = plugin
        .request("plugin.health", json!({}))
        .await
        .expect("health");
    let _ = bus.kill();
    let _ = bus.wait();
    assert_eq!(health["status"], "degraded", "{health}");
    let detail = health["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("org.a11y"), "{detail}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn utter_say_types_and_clicks_through_the_runner_in_the_focused_window() {
    let desktop = Desktop::start();
    // The runner plans with the compositor's context (the focused window's pid), and the
    // a11y plugin finds the form by that pid.
    let (code, out) = say(&desktop, "type hello world");
    assert_eq!(code, Some(0), "{out}");
    let step = &out["results"][0];
    assert_eq!(step["op"], "type_text", "{out}");
    assert_eq!(step["plugin"], "a11y", "{out}");
    assert_eq!(step["verified"], true, "{out}");
    assert_eq!(step["result"]["path"], "a11y", "{out}");
    assert!(
        wait_for_file(&desktop, "entry.txt", "hello world").await,
        "the entry holds {:?}",
        desktop.read("entry.txt")
    );

    let (code, out) = say(&desktop, "click the blue button");
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        out["results"][0]["result"]["clicked"]["name"], "Blue Button",
        "{out}"
    );
    assert!(
        poll(Duration::from_secs(5), || desktop
            .path("blue-clicked")
            .exists()
            .then_some(()))
        .is_some(),
        "the Blue Button's handler did not run"
    );
}

/// `[security] enforce = true` over the default config: every built-in plugin runs in its
/// bwrap sandbox with the permissions the default gives it, and typing still goes through
/// the accessibility bus (read back), not keystrokes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_sandbox_enforced_the_default_config_still_types_through_accessibility() {
    assert!(
        sway_session::which("bwrap").is_some(),
        "bwrap is not installed (Debian: bubblewrap)"
    );
    let desktop = Desktop::start();
    let config = desktop.out.path().join("home/config/utter");
    std::fs::create_dir_all(&config).expect("config dir");
    std::fs::write(config.join("config.toml"), "[security]\nenforce = true\n").expect("config");
    // On a desktop sway and the plugins are one user. Here sway is `nobody` and the plugins
    // root, and root in a bwrap sandbox has no capabilities: it reaches nobody's sockets only
    // as any other user would, so they are opened to others.
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let runtime = desktop.sway.runtime_dir();
    std::fs::set_permissions(runtime, std::fs::Permissions::from_mode(0o711)).expect("chmod");
    for entry in std::fs::read_dir(runtime).expect("runtime dir").flatten() {
        if entry.file_type().is_ok_and(|t| t.is_socket()) {
            std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o777))
                .expect("chmod");
        }
    }
    // Every plugin of the default config starts in its sandbox but the desktop plugin
    // (whose launched apps would inherit it), and each reaches what it needs.
    let (code, plugins) = desktop::utter_json(&desktop, &["plugins", "--json"], &[]);
    assert_eq!(code, Some(0), "{plugins}");
    for plugin in plugins.as_array().expect("a list") {
        let id = plugin["id"].as_str().unwrap_or_default();
        let sandboxed = plugin["sandbox"]["enforced"] == true;
        assert_eq!(sandboxed, id != "desktop", "{plugin:#}");
        let health = plugin["health"].as_str().unwrap_or_default();
        match id {
            "compositor" => assert!(!health.starts_with("degraded"), "{plugin:#}"),
            "a11y" => assert!(health.starts_with("accessibility on"), "{plugin:#}"),
            "input" => assert!(health.contains("wayland-virtual-keyboard"), "{plugin:#}"),
            _ => {}
        }
    }

    let (code, out) = say(&desktop, "type hello world");
    assert_eq!(code, Some(0), "{out}");
    let step = &out["results"][0];
    assert_eq!(step["plugin"], "a11y", "{out}");
    assert_eq!(
        step["result"]["path"], "a11y",
        "typed through accessibility: {out}"
    );
    assert_eq!(step["verified"], true, "{out}");
    assert!(
        wait_for_file(&desktop, "entry.txt", "hello world").await,
        "the entry holds {:?}",
        desktop.read("entry.txt")
    );
    // Nothing warned that a plugin could not reach what it needs.
    let warnings = out["warnings"].to_string();
    assert!(!warnings.contains("sandbox"), "{out}");

    // A screenshot on sway: grim, run by the sandboxed compositor plugin, reaches the display
    // and writes into ~/Pictures/Screenshots, which the sandbox passes in.
    let (code, out) = say(&desktop, "take a screenshot");
    assert_eq!(code, Some(0), "{out}");
    let step = &out["results"][0]["result"];
    assert_eq!(step["verified"], true, "{out}");
    let path = std::path::PathBuf::from(step["path"].as_str().expect("a path"));
    assert!(
        path.starts_with(desktop.out.path().join("home/Pictures/Screenshots")),
        "{}",
        path.display()
    );
    let png = std::fs::read(&path).expect("the screenshot is there outside the sandbox");
    assert!(png.starts_with(b"\x89PNG"), "{}", path.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn utter_say_presses_keys_scrolls_and_falls_back_to_keystrokes_through_the_runner() {
    let desktop = Desktop::start();
    let (code, out) = say(&desktop, "type hello world");
    assert_eq!(code, Some(0), "{out}");
    assert!(wait_for_file(&desktop, "entry.txt", "hello world").await);

    // "press control a" (the input plugin's virtual keyboard) selects the entry's text;
    // "type x" (accessibility) then replaces it and reads the field back.
    let (code, out) = say(&desktop, "press control a");
    assert_eq!(code, Some(0), "{out}");
    let step = &out["results"][0];
    assert_eq!(step["op"], "key", "{out}");
    assert_eq!(step["plugin"], "input", "{out}");
    assert_eq!(step["result"]["chord"], "ctrl+a", "{out}");
    assert_eq!(step["result"]["path"], "keyboard", "{out}");
    assert_eq!(
        step["result"]["backend"], "wayland-virtual-keyboard",
        "{out}"
    );
    let (code, out) = say(&desktop, "type x");
    assert_eq!(code, Some(0), "{out}");
    let step = &out["results"][0];
    assert_eq!(step["result"]["path"], "a11y", "{out}");
    assert_eq!(step["result"]["replaced"], 11, "{out}");
    assert_eq!(step["verified"], true, "{out}");
    assert!(
        wait_for_file(&desktop, "entry.txt", "x").await,
        "the entry holds {:?}",
        desktop.read("entry.txt")
    );

    // "press backspace" through the virtual keyboard.
    let (code, out) = say(&desktop, "press backspace");
    assert_eq!(code, Some(0), "{out}");
    assert!(wait_for_file(&desktop, "entry.txt", "").await);

    // "scroll down" over the focused window moves its scrolled area.
    let (code, out) = say(&desktop, "scroll down");
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(out["results"][0]["result"]["path"], "pointer", "{out}");
    assert!(
        poll(Duration::from_secs(5), || desktop
            .read("scroll")
            .and_then(|s| s.parse::<i64>().ok())
            .filter(|&v| v > 0))
        .is_some(),
        "the scrolled area did not move: {out}"
    );

    // With the focus on a button no field takes text through accessibility: "type hi"
    // falls back to keystrokes, says so, and the window sees the keys.
    let (code, out) = say(&desktop, "click the blue button");
    assert_eq!(code, Some(0), "{out}");
    assert!(wait_for_file(&desktop, "blue-clicked", "1").await);
    let _ = std::fs::remove_file(desktop.path("keys.log"));
    let (code, out) = say(&desktop, "type hi");
    assert_eq!(code, Some(0), "{out}");
    let step = &out["results"][0];
    assert_eq!(step["plugin"], "a11y", "{out}");
    assert_eq!(step["result"]["path"], "keyboard", "{out}");
    assert_eq!(step["verified"], false, "{out}");
    assert!(
        step["result"]["fallback_reason"]
            .as_str()
            .is_some_and(|r| r.contains("no focused text field")),
        "{out}"
    );
    let typed = poll(Duration::from_secs(5), || {
        let log = desktop.read("keys.log")?;
        (log.lines().count() >= 2).then_some(log)
    });
    assert_eq!(typed.as_deref(), Some("h -\ni -\n"), "{out}");
}

/// The window's size and the centre of one of its widgets inside it (image pixels of a
/// screenshot of the window's content), from the fixture's `layout.json`.
fn widget_centre(desktop: &Desktop, context: &Value, widget: &str) -> ((u32, u32), (i64, i64)) {
    let layout: Value =
        serde_json::from_str(&desktop.read("layout.json").expect("layout.json")).unwrap();
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

/// A point of the window's content in layout pixels.
fn on_screen(context: &Value, (x, y): (i64, i64)) -> Value {
    let rect = &context["focused"]["rect"];
    json!({"x": rect["x"].as_i64().unwrap() + x, "y": rect["y"].as_i64().unwrap() + y})
}

fn step_error(out: &Value) -> String {
    let step = &out["results"][0];
    step["error"]["message"]
        .as_str()
        .or_else(|| out["error"]["message"].as_str())
        .unwrap_or_else(|| panic!("no error message in {out}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn utter_say_asks_before_clicking_what_screen_grounding_finds_and_nobody_at_a_pipe_approves()
{
    let desktop = Desktop::start();
    let context = desktop.context();
    let (size, red) = widget_centre(&desktop, &context, "Red Button");
    let server = GroundingServer::start();
    server.expect_size(size.0, size.1);
    server.answer_point(red.0, red.1, 0.9);

    // No accessible element is named "big red square": T1 finds nothing, T3 asks the
    // server, which points at the Red Button's centre in the screenshot. The runner then
    // asks the person before clicking (whatever the model's confidence); `utter say` with
    // no terminal on stdin cannot ask, so it is a no, and nothing is clicked. (The approved
    // click is tests/trust_desktop.rs.)
    let (code, out) = say_with_env(
        &desktop,
        "click the big red square",
        &[("UTTER_GROUNDING_URL", &server.url)],
    );
    assert_eq!(code, Some(1), "{out}");
    let step = &out["results"][0];
    assert_eq!(step["op"], "click_element", "{out}");
    assert_eq!(step["plugin"], "a11y", "{out}");
    assert_eq!(step["error"]["code"], -32003, "{out}");
    let message = step["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("confirmation denied"), "{message}");
    assert!(
        message.contains(&format!(
            "click at ({}, {})",
            on_screen(&context, red)["x"],
            on_screen(&context, red)["y"]
        )),
        "{message}"
    );
    assert!(message.contains("big red square"), "{message}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(desktop.read("red-clicked"), None, "nothing was clicked");

    let seen = server.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let request = &seen[0];
    assert_eq!(request.refused, None, "{request:?}");
    assert_eq!(request.png_size, Some(size), "{request:?}");
    assert_eq!(request.model.as_deref(), Some("ui-tars"), "{request:?}");
    assert_eq!(request.temperature, Some(0.0), "{request:?}");
    let prompt = request.prompt.as_deref().unwrap_or_default();
    assert!(prompt.contains("big red square\""), "{prompt}");
    assert!(prompt.contains("\"x\""), "{prompt}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn utter_say_refuses_answers_that_place_no_point_in_the_window_and_clicks_nothing() {
    let desktop = Desktop::start();
    let context = desktop.context();
    let (size, red) = widget_centre(&desktop, &context, "Red Button");
    let server = GroundingServer::start();
    server.expect_size(size.0, size.1);
    let env = [("UTTER_GROUNDING_URL", server.url.as_str())];

    // Without a grounding endpoint: the old error, naming what there is, with the hint.
    let (code, out) = say(&desktop, "click the big red square");
    assert_ne!(code, Some(0), "{out}");
    let message = step_error(&out);
    assert!(
        message.contains("Blue Button") && message.contains("Red Button"),
        "{message}"
    );
    assert!(message.contains("UTTER_GROUNDING_URL"), "{message}");

    // An https endpoint is refused before anything is sent.
    let (code, out) = say_with_env(
        &desktop,
        "click the big red square",
        &[(
            "UTTER_GROUNDING_URL",
            "https://127.0.0.1:1/v1/chat/completions",
        )],
    );
    assert_ne!(code, Some(0), "{out}");
    let message = step_error(&out);
    assert!(message.contains("only plain http"), "{message}");

    // Prose with the Red Button's numbers in a form the parser does not take.
    let prose = format!(
        "The red square is at x = {}, y = {} \u{1b}[2J I think.",
        red.0, red.1
    );
    server.answer(&prose);
    let (code, out) = say_with_env(&desktop, "click the big red square", &env);
    assert_ne!(code, Some(0), "{out}");
    let message = step_error(&out);
    assert!(message.contains("named no point"), "{message}");
    assert!(message.contains("The red square is at"), "{message}");
    assert!(
        !message.contains('\u{1b}'),
        "the model's words are not escaped: {message:?}"
    );

    // A point one window width right of the Red Button: outside the screenshot.
    server.answer_point(red.0 + i64::from(size.0), red.1, 0.95);
    let (code, out) = say_with_env(&desktop, "click the big red square", &env);
    assert_ne!(code, Some(0), "{out}");
    let message = step_error(&out);
    assert!(message.contains("outside"), "{message}");
    assert!(
        message.contains(&format!("{}x{}", size.0, size.1)),
        "{message}"
    );

    // A huge answer is cut in the message.
    server.answer(&"z".repeat(100_000));
    let (code, out) = say_with_env(&desktop, "click the big red square", &env);
    assert_ne!(code, Some(0), "{out}");
    let message = step_error(&out);
    assert!(message.contains("named no point"), "{message}");
    assert!(message.len() < 2000, "{} bytes", message.len());

    // Then accessibility clicks the Blue Button: the events before it are all processed by
    // now, and none of the refused answers pressed the Red Button.
    let (code, out) = say(&desktop, "click the blue button");
    assert_eq!(code, Some(0), "{out}");
    assert!(
        wait_for_file(&desktop, "blue-clicked", "1").await,
        "the Blue Button was not clicked: {out}"
    );
    assert_eq!(
        desktop.read("red-clicked"),
        None,
        "a refused answer clicked the Red Button"
    );
    let seen = server.seen();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(seen.iter().all(|s| s.refused.is_none()), "{seen:?}");
    assert!(seen.iter().all(|s| s.png_size == Some(size)), "{seen:?}");
}

/// What the stand-in runner saw of the plugin's `host.*` requests.
type HostLog = Arc<Mutex<Vec<(String, Value)>>>;

/// A stand-in runner: records `host.*` requests and answers `host.action` as the runner's
/// gate would once the person answered `approve`: a confirmed successful step (without
/// clicking), or the step refused with `-32003`.
fn recording_host(log: &HostLog, approve: &Arc<Mutex<bool>>) -> HostHandler {
    let log = log.clone();
    let approve = approve.clone();
    HostHandler::new(move |request: Request| {
        let log = log.clone();
        let approve = approve.clone();
        async move {
            log.lock()
                .unwrap()
                .push((request.method.clone(), request.params.clone()));
            match request.method.as_str() {
                "host.action" if *approve.lock().unwrap() => {
                    Ok(json!({"ok": true, "plugin": "input",
                    "needs_confirm": true, "confirmed_by": "test",
                    "result": {"ok": true, "path": "pointer", "backend": "test", "detail": "left click"}}))
                }
                "host.action" => Ok(
                    json!({"ok": false, "op": "click_point", "needs_confirm": true,
                    "error": {"code": -32003, "message": "confirmation denied: click at … (answered no through test)"}}),
                ),
                other => Err(ErrorObject::method_not_found(other)),
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn screen_grounding_leaves_every_click_to_the_runners_gate_and_a_dry_run_clicks_nothing() {
    let desktop = Desktop::start();
    let context = desktop.context();
    let (size, red) = widget_centre(&desktop, &context, "Red Button");
    let want = on_screen(&context, red);
    let server = GroundingServer::start();
    server.expect_size(size.0, size.1);
    let log: HostLog = Arc::default();
    let approve = Arc::new(Mutex::new(false));
    let runtime = desktop.sway.runtime_dir().display().to_string();
    let display = [
        ("WAYLAND_DISPLAY", "wayland-1"),
        ("XDG_RUNTIME_DIR", runtime.as_str()),
    ];
    let mut env = display.to_vec();
    env.push(("UTTER_GROUNDING_URL", &server.url));
    env.push(("UTTER_GROUNDING_MODEL", "test-model"));
    let plugin =
        start_plugin_with(&desktop.bus.address, &env, recording_host(&log, &approve)).await;
    wait_for_tree(&plugin, &context).await;
    let args = json!({"description": "the big red square"});

    // A dry run grounds but clicks nothing, and says the runner would ask.
    server.answer_point(red.0, red.1, 0.9);
    let dry = invoke(&plugin, "click_element", args.clone(), &context, true)
        .await
        .unwrap_or_else(|e| panic!("dry run failed: {e}; stderr:\n{}", plugin.stderr()));
    assert_eq!(dry["dry_run"], true, "{dry}");
    assert_eq!(dry["path"], "screen", "{dry}");
    assert_eq!(dry["verified"], false, "{dry}");
    assert_eq!(dry["would_click"], want, "{dry}");
    assert_eq!(dry["needs_confirm"], true, "{dry}");
    assert!(log.lock().unwrap().is_empty(), "{:?}", log.lock().unwrap());
    assert_eq!(server.seen().len(), 1);
    assert_eq!(server.seen()[0].model.as_deref(), Some("test-model"));

    // Whatever the model's confidence, the plugin never decides whether to ask: it hands the
    // point to the runner's gate (host.action) and nothing else. Refused there (the person
    // said no): -32003, nothing clicked.
    for (answer, confidence) in [
        (
            json!({"x": red.0, "y": red.1, "confidence": 0.3}).to_string(),
            json!(0.3),
        ),
        (
            json!({"x": red.0, "y": red.1, "confidence": 0.99}).to_string(),
            json!(0.99),
        ),
        (
            format!("click(start_box='({},{})')", red.0, red.1),
            Value::Null,
        ),
    ] {
        *approve.lock().unwrap() = false;
        log.lock().unwrap().clear();
        server.answer(&answer);
        let e = invoke(&plugin, "click_element", args.clone(), &context, false)
            .await
            .expect_err("a refused click");
        assert_eq!(e.code, -32003, "{e}");
        assert!(e.message.contains("was not done"), "{}", e.message);
        {
            let log = log.lock().unwrap();
            let methods: Vec<&str> = log.iter().map(|(m, _)| m.as_str()).collect();
            assert_eq!(methods, ["host.action"], "{log:?}");
            assert_eq!(
                log[0].1,
                json!({"op": "click_point", "args": want}),
                "only the point comes from the model, and no confirm flag of the plugin's"
            );
        }
        // Approved by the person: clicked, and the result says who confirmed.
        *approve.lock().unwrap() = true;
        log.lock().unwrap().clear();
        let clicked = invoke(&plugin, "click_element", args.clone(), &context, false)
            .await
            .unwrap_or_else(|e| panic!("confirmed click failed: {e}"));
        assert_eq!(clicked["path"], "screen", "{clicked}");
        assert_eq!(clicked["verified"], false, "{clicked}");
        assert_eq!(clicked["confirmed_by"], "test", "{clicked}");
        assert_eq!(clicked["point"], want, "{clicked}");
        assert_eq!(clicked["confidence"], confidence, "{clicked}");
        let methods: Vec<String> = log.lock().unwrap().iter().map(|(m, _)| m.clone()).collect();
        assert_eq!(methods, ["host.action"]);
    }

    // Without the window's geometry (niri today) grounding says why it cannot run, and
    // asks the server nothing.
    let asked = server.seen().len();
    let mut no_rect = context.clone();
    no_rect["focused"].as_object_mut().unwrap().remove("rect");
    no_rect["windows"] = json!([]);
    let e = invoke(&plugin, "click_element", args.clone(), &no_rect, false)
        .await
        .expect_err("no geometry");
    assert_eq!(e.code, -32000);
    assert!(e.message.contains("no window geometry"), "{}", e.message);
    assert_eq!(server.seen().len(), asked);

    // grim missing from PATH.
    let empty = tempfile::tempdir().expect("temp dir");
    let path = empty.path().display().to_string();
    let mut env = display.to_vec();
    env.push(("UTTER_GROUNDING_URL", &server.url));
    env.push(("PATH", &path));
    let no_grim =
        start_plugin_with(&desktop.bus.address, &env, recording_host(&log, &approve)).await;
    wait_for_tree(&no_grim, &context).await;
    let e = invoke(&no_grim, "click_element", args.clone(), &context, false)
        .await
        .expect_err("no grim");
    assert_eq!(e.code, -32000);
    assert!(e.message.contains("grim is not installed"), "{}", e.message);

    // Nobody listening at the endpoint.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let url = format!("http://127.0.0.1:{port}/v1/chat/completions");
    let mut env = display.to_vec();
    env.push(("UTTER_GROUNDING_URL", &url));
    let unreachable =
        start_plugin_with(&desktop.bus.address, &env, recording_host(&log, &approve)).await;
    wait_for_tree(&unreachable, &context).await;
    let e = invoke(&unreachable, "click_element", args.clone(), &context, false)
        .await
        .expect_err("no server");
    assert_eq!(e.code, -32000);
    assert!(e.message.contains("could not be reached"), "{}", e.message);
    assert_eq!(server.seen().len(), asked);
    assert!(server.seen().iter().all(|s| s.refused.is_none()));
    // The stand-in runner clicked nothing, so the fixture saw no click at all.
    assert_eq!(desktop.read("red-clicked"), None);
}

/// A stand-in runner whose chooser answers `host.choose` with the offered id whose summary
/// names `pick` (or, with `pick` empty, an id never offered).
fn choosing_host(pick: &'static str, log: &HostLog) -> HostHandler {
    let log = log.clone();
    HostHandler::new(move |request: Request| {
        let log = log.clone();
        async move {
            log.lock()
                .unwrap()
                .push((request.method.clone(), request.params.clone()));
            match request.method.as_str() {
                "host.choose" => {
                    let offered = request.params["candidates"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default();
                    let id = offered
                        .iter()
                        .find(|c| {
                            !pick.is_empty() && c["summary"].as_str().unwrap_or("").contains(pick)
                        })
                        .map(|c| c["id"].clone())
                        .unwrap_or(json!("e999"));
                    Ok(json!({"choice_id": id, "chooser": "llm"}))
                }
                other => Err(ErrorObject::method_not_found(other)),
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tie_goes_to_the_chooser_which_only_picks_among_the_tied() {
    let desktop = Desktop::start();
    let context = desktop.context();
    let log: HostLog = Arc::default();
    let plugin = start_plugin_with(&desktop.bus.address, &[], choosing_host("Red", &log)).await;
    wait_for_tree(&plugin, &context).await;
    let done = invoke(
        &plugin,
        "click_element",
        json!({"description": "button"}),
        &context,
        false,
    )
    .await
    .expect("the chooser breaks the tie");
    assert_eq!(done["clicked"]["name"], "Red Button", "{done}");
    assert_eq!(done["chosen_by"]["chooser"], "llm", "{done}");
    assert_eq!(done["chosen_by"]["tied"], 2, "{done}");
    assert!(wait_for_file(&desktop, "red-clicked", "1").await);
    assert_eq!(desktop.read("blue-clicked"), None);
    let asked: Vec<Value> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|(m, _)| m == "host.choose")
        .map(|(_, p)| p.clone())
        .collect();
    assert_eq!(asked.len(), 1, "{asked:?}");
    let summaries: Vec<&str> = asked[0]["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["summary"].as_str().unwrap())
        .collect();
    assert_eq!(summaries.len(), 2, "{summaries:?}");
    assert!(
        summaries.iter().any(|s| s.contains("Blue Button")),
        "{summaries:?}"
    );

    // A chooser that answers an id never offered changes nothing: the person is asked.
    let plugin = start_plugin_with(&desktop.bus.address, &[], choosing_host("", &log)).await;
    wait_for_tree(&plugin, &context).await;
    let e = invoke(
        &plugin,
        "click_element",
        json!({"description": "button"}),
        &context,
        false,
    )
    .await
    .expect_err("no valid choice");
    assert!(e.message.contains("equally well"), "{}", e.message);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(desktop.read("red-clicked").as_deref(), Some("1"));
    assert_eq!(desktop.read("blue-clicked"), None);
}
