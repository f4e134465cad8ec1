//! `utter-input` against a real headless sway and a real GTK 3 window
//! (`plugins/a11y/tests/fixtures/form.py`, through the shared `desktop` harness): the
//! plugin's own virtual keyboard and pointer (Wayland virtual-keyboard and wlr
//! virtual-pointer protocols) type into the entry, press chords the window logs, scroll its
//! scrolled area and click its button. Effects are read from the files the fixture writes.
//!
//! Debian packages: those of the harness (sway, dbus-daemon, at-spi2-core, libatk-adaptor,
//! python3-gi, gir1.2-gtk-3.0, wtype).

#[path = "../../a11y/tests/desktop/mod.rs"]
mod desktop;
#[path = "../../compositor/tests/sway_session/mod.rs"]
mod sway_session;

use desktop::{Desktop, wait_for_file};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::time::Duration;
use sway_session::poll;
use utter_protocol::ErrorObject;
use utter_protocol::testkit::{SpawnOptions, TestPlugin};

async fn start_plugin(desktop: &Desktop) -> TestPlugin {
    let runtime = desktop.sway.runtime_dir().as_os_str().to_owned();
    let options = SpawnOptions {
        env: vec![
            (
                OsString::from("WAYLAND_DISPLAY"),
                OsString::from("wayland-1"),
            ),
            (OsString::from("XDG_RUNTIME_DIR"), runtime),
        ],
        timeout: Duration::from_secs(15),
        ..Default::default()
    };
    TestPlugin::start(&[env!("CARGO_BIN_EXE_utter-input").into()], options)
        .await
        .expect("the plugin starts and passes the handshake")
}

async fn invoke(
    plugin: &TestPlugin,
    op: &str,
    args: Value,
    context: &Value,
) -> Result<Value, ErrorObject> {
    plugin
        .request(
            "action.invoke",
            json!({"op": op, "args": args, "provenance": "user", "context": context}),
        )
        .await
}

/// The key presses the window logged since the last call, one "keyval modifiers" per line.
fn take_keys(desktop: &Desktop) -> Vec<String> {
    let path = desktop.path("keys.log");
    let lines = std::fs::read_to_string(&path).unwrap_or_default();
    let _ = std::fs::remove_file(&path);
    lines.lines().map(str::to_owned).collect()
}

/// Key presses the window logged, waiting until `n` are there (or 5 s).
async fn wait_for_keys(desktop: &Desktop, n: usize) -> Vec<String> {
    for _ in 0..100 {
        let lines = std::fs::read_to_string(desktop.path("keys.log")).unwrap_or_default();
        if lines.lines().count() >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    take_keys(desktop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn types_presses_chords_scrolls_and_clicks_in_a_real_window() {
    let desktop = Desktop::start();
    let plugin = start_plugin(&desktop).await;
    let health = plugin.request("plugin.health", json!({})).await.unwrap();
    assert_eq!(health["status"], "ok", "{health}");
    let detail = health["detail"].as_str().unwrap();
    assert!(
        detail.contains("keyboard: wayland-virtual-keyboard on wayland-1")
            && detail.contains("pointer: wlr-virtual-pointer on wayland-1")
            && detail.contains("uinput"),
        "{detail}"
    );
    let context = desktop.context();
    take_keys(&desktop);

    // Keystroke typing, capitals, punctuation and a character outside US ASCII.
    let typed = invoke(
        &plugin,
        "type_keys",
        json!({"text": "Hello, wörld!"}),
        &context,
    )
    .await
    .expect("type_keys");
    assert_eq!(typed["path"], "keyboard", "{typed}");
    assert_eq!(typed["backend"], "wayland-virtual-keyboard", "{typed}");
    assert_eq!(typed["verified"], false, "{typed}");
    assert_eq!(typed["presses"], 13, "{typed}");
    assert!(
        wait_for_file(&desktop, "entry.txt", "Hello, wörld!").await,
        "the entry holds {:?}",
        desktop.read("entry.txt")
    );

    // Ten calls in a row each arrive whole (the device stays; no first key is lost).
    for i in 0..10 {
        let before = desktop.read("entry.txt").unwrap_or_default();
        invoke(
            &plugin,
            "type_keys",
            json!({"text": format!(" {i}x")}),
            &context,
        )
        .await
        .expect("type_keys");
        let want = format!("{before} {i}x");
        assert!(
            wait_for_file(&desktop, "entry.txt", &want).await,
            "call {i}: the entry holds {:?}, want {want:?}",
            desktop.read("entry.txt")
        );
    }
    take_keys(&desktop);

    // A chord arrives with its modifiers held, and every modifier is released after it.
    let chord = invoke(&plugin, "key", json!({"chord": "ctrl+shift+T"}), &context)
        .await
        .expect("key");
    assert_eq!(chord["chord"], "ctrl+shift+t", "{chord}");
    assert_eq!(chord["path"], "keyboard", "{chord}");
    let keys = wait_for_keys(&desktop, 3).await;
    assert_eq!(
        keys,
        ["Control_L -", "Shift_L ctrl", "T ctrl+shift"],
        "the window saw {keys:?}"
    );
    invoke(&plugin, "key", json!({"chord": "a"}), &context)
        .await
        .expect("key a");
    let keys = wait_for_keys(&desktop, 1).await;
    assert_eq!(keys, ["a -"], "a modifier stuck: {keys:?}");

    // Select everything and replace it: ctrl+a, then type.
    invoke(&plugin, "key", json!({"chord": "ctrl+a"}), &context)
        .await
        .expect("ctrl+a");
    assert_eq!(wait_for_keys(&desktop, 2).await, ["Control_L -", "a ctrl"]);
    invoke(&plugin, "type_keys", json!({"text": "x"}), &context)
        .await
        .expect("type x");
    assert!(
        wait_for_file(&desktop, "entry.txt", "x").await,
        "ctrl+a then x left {:?}",
        desktop.read("entry.txt")
    );
    // BackSpace three times through repeat: "x" and then nothing more to delete.
    invoke(&plugin, "type_keys", json!({"text": "abc"}), &context)
        .await
        .expect("type abc");
    assert!(wait_for_file(&desktop, "entry.txt", "xabc").await);
    let back = invoke(
        &plugin,
        "key",
        json!({"chord": "BackSpace", "repeat": 2}),
        &context,
    )
    .await
    .expect("BackSpace ×2");
    assert_eq!(back["presses"], 2, "{back}");
    assert!(
        wait_for_file(&desktop, "entry.txt", "xa").await,
        "two BackSpaces left {:?}",
        desktop.read("entry.txt")
    );

    // Scrolling over the focused window moves its scrolled area.
    assert_eq!(desktop.read("scroll"), None);
    let scrolled = invoke(
        &plugin,
        "scroll",
        json!({"direction": "down", "amount": 5}),
        &context,
    )
    .await
    .expect("scroll");
    assert_eq!(scrolled["path"], "pointer", "{scrolled}");
    assert!(
        scrolled["detail"]
            .as_str()
            .unwrap()
            .contains("over the focused window"),
        "{scrolled}"
    );
    let moved = poll(Duration::from_secs(5), || {
        desktop
            .read("scroll")
            .and_then(|s| s.parse::<i64>().ok())
            .filter(|&v| v > 0)
    });
    assert!(moved.is_some(), "the scrolled area did not move");
    // Where it comes to rest: the first value read may be mid-scroll (smooth scrolling runs
    // on after the event), and scrolling up must be compared with where it ended.
    let mut down = moved.unwrap();
    let settle = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < settle {
        std::thread::sleep(Duration::from_millis(300));
        let now = desktop
            .read("scroll")
            .and_then(|s| s.parse::<i64>().ok())
            .unwrap_or(down);
        if now == down {
            break;
        }
        down = now;
    }
    invoke(
        &plugin,
        "scroll",
        json!({"direction": "up", "amount": 1}),
        &context,
    )
    .await
    .expect("scroll up");
    let up = poll(Duration::from_secs(5), || {
        desktop
            .read("scroll")
            .and_then(|s| s.parse::<i64>().ok())
            .filter(|&v| v < down)
    });
    assert!(up.is_some(), "scrolling up did not move back from {down}");

    // A click at the Red Button's centre (window content origin + the widget's place).
    let layout: Value =
        serde_json::from_str(&desktop.read("layout.json").expect("layout.json")).unwrap();
    let red = &layout["Red Button"];
    let origin = &context["focused"]["rect"];
    let x = origin["x"].as_i64().unwrap()
        + red["x"].as_i64().unwrap()
        + red["width"].as_i64().unwrap() / 2;
    let y = origin["y"].as_i64().unwrap()
        + red["y"].as_i64().unwrap()
        + red["height"].as_i64().unwrap() / 2;
    let clicked = invoke(&plugin, "click_point", json!({"x": x, "y": y}), &context)
        .await
        .expect("click_point");
    assert_eq!(clicked["path"], "pointer", "{clicked}");
    assert_eq!(clicked["backend"], "wlr-virtual-pointer", "{clicked}");
    assert!(
        wait_for_file(&desktop, "red-clicked", "1").await,
        "the click at ({x}, {y}) did not press the Red Button (layout {layout})"
    );
    assert_eq!(
        desktop.read("blue-clicked"),
        None,
        "the click hit the wrong button"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_inputs_get_clear_errors_and_no_stuck_key() {
    let desktop = Desktop::start();
    let plugin = start_plugin(&desktop).await;
    let context = desktop.context();
    take_keys(&desktop);
    let cases = [
        (
            "key",
            json!({"chord": "ctrl+NoSuchKey"}),
            "no X keysym name",
        ),
        (
            "key",
            json!({"chord": "ctrl+shift+alt+super+a+b+c+d"}),
            "at most 5",
        ),
        ("key", json!({"chord": "a+b"}), "two keys"),
        ("key", json!({"chord": ""}), "empty"),
        (
            "key",
            json!({"chord": "Return", "repeat": 10_000}),
            "repeat must be",
        ),
        (
            "key",
            json!({"chord": "Return", "evil": true}),
            "unknown argument",
        ),
        ("key", json!({}), "needs a string chord"),
        ("type_keys", json!({"text": ""}), "empty"),
        (
            "type_keys",
            json!({"text": "x".repeat(10_000)}),
            "at most 2000",
        ),
        ("type_keys", json!({"text": "a\u{7}b"}), "control character"),
        ("scroll", json!({"direction": "sideways"}), "direction"),
        (
            "scroll",
            json!({"direction": "down", "amount": 0}),
            "amount must be",
        ),
        (
            "click_point",
            json!({"x": 99_999, "y": 5}),
            "outside the screens",
        ),
        ("click_point", json!({"x": 5}), "integer y"),
        (
            "click_point",
            json!({"x": 5, "y": 5, "button": "nose"}),
            "button must be",
        ),
        (
            "key",
            json!({"chord": "Return", "window_id": 424_242}),
            "not the focused window",
        ),
    ];
    for (op, args, want) in cases {
        let e = invoke(&plugin, op, args.clone(), &context)
            .await
            .expect_err(&format!("{op} {args} should fail"));
        assert!(
            e.message.contains(want),
            "{op} {args}: {} (wanted {want:?})",
            e.message
        );
    }
    let e = invoke(&plugin, "click_point", json!({"x": 5, "y": 5}), &json!({}))
        .await
        .unwrap_err();
    assert!(e.message.contains("outputs"), "{}", e.message);
    let e = invoke(&plugin, "warp_drive", json!({}), &context)
        .await
        .unwrap_err();
    assert_eq!(e.code, -32601);
    // A non-boolean dry_run acts never: it is refused.
    let e = plugin
        .request(
            "action.invoke",
            json!({"op": "key", "args": {"chord": "Return"}, "provenance": "user",
                   "dry_run": "true", "context": context}),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, -32602, "{e:?}");
    // Hostile context numbers: a clear error, no panic, no silence.
    let e = invoke(
        &plugin,
        "click_point",
        json!({"x": 5, "y": 5}),
        &json!({"outputs": [{"x": i64::MAX, "y": 0, "width": 1, "height": 1}]}),
    )
    .await
    .unwrap_err();
    assert!(e.message.contains("outputs"), "{}", e.message);
    // Nothing of the above reached the window, and the plugin still types.
    assert_eq!(take_keys(&desktop), Vec::<String>::new());
    invoke(&plugin, "type_keys", json!({"text": "ok"}), &context)
        .await
        .expect("type_keys after the bad calls");
    assert!(wait_for_file(&desktop, "entry.txt", "ok").await);
    let keys = wait_for_keys(&desktop, 2).await;
    assert_eq!(keys, ["o -", "k -"], "{keys:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_compositor_health_is_degraded_and_calls_say_why() {
    let options = SpawnOptions {
        env: vec![(
            OsString::from("WAYLAND_DISPLAY"),
            OsString::from("wayland-nowhere"),
        )],
        timeout: Duration::from_secs(15),
        ..Default::default()
    };
    let plugin = TestPlugin::start(&[env!("CARGO_BIN_EXE_utter-input").into()], options)
        .await
        .expect("the plugin starts without a compositor");
    let health = plugin.request("plugin.health", json!({})).await.unwrap();
    assert_eq!(health["status"], "degraded", "{health}");
    assert!(
        health["detail"]
            .as_str()
            .unwrap()
            .contains("wayland-nowhere"),
        "{health}"
    );
    let e = plugin
        .request(
            "action.invoke",
            json!({"op": "key", "args": {"chord": "Return"}, "provenance": "user"}),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, -32000, "{e:?}");
    assert!(e.message.contains("no Wayland compositor"), "{}", e.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_stops_typing_between_keys() {
    let desktop = Desktop::start();
    let plugin = start_plugin(&desktop).await;
    let context = desktop.context();
    // 2000 distinct CJK characters need nine keymaps, with a pause before each new one:
    // far longer than the 100 ms after which the request is cancelled ($/cancel).
    let text: String = (0..2000u32)
        .map(|i| char::from_u32(0x4e00 + i).unwrap())
        .collect();
    let e = plugin
        .request_with_timeout(
            "action.invoke",
            json!({"op": "type_keys", "args": {"text": text}, "provenance": "user",
                   "context": context}),
            Some(Duration::from_millis(100)),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, -32001, "{e:?}");
    // Once the device thread has seen the cancel, the entry stops growing well short of
    // the whole text.
    let settled = poll(Duration::from_secs(10), || {
        let a = desktop.read("entry.txt").unwrap_or_default();
        std::thread::sleep(Duration::from_millis(400));
        let b = desktop.read("entry.txt").unwrap_or_default();
        (a == b).then_some(b)
    })
    .expect("the entry settles");
    let typed = settled.chars().count();
    assert!(
        typed < 2000,
        "all {typed} characters were typed after the cancel"
    );
    assert!(
        text.starts_with(&settled),
        "what was typed is a prefix of the text"
    );
    // No key is left down: the next key arrives plain.
    let _ = std::fs::remove_file(desktop.path("keys.log"));
    invoke(&plugin, "key", json!({"chord": "a"}), &context)
        .await
        .expect("key after the cancel");
    assert_eq!(wait_for_keys(&desktop, 1).await, ["a -"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_types_one_line_and_presses_return_and_refuses_more() {
    let desktop = Desktop::start();
    let plugin = start_plugin(&desktop).await;
    let context = desktop.context();
    take_keys(&desktop);
    let ran = invoke(&plugin, "terminal", json!({"command": "echo hi"}), &context)
        .await
        .expect("terminal");
    assert_eq!(ran["path"], "keyboard", "{ran}");
    assert_eq!(ran["verified"], false, "{ran}");
    assert_eq!(ran["presses"], 8, "seven characters and Return: {ran}");
    assert!(
        wait_for_file(&desktop, "entry.txt", "echo hi").await,
        "the entry holds {:?}",
        desktop.read("entry.txt")
    );
    let keys = wait_for_keys(&desktop, 8).await;
    assert_eq!(
        keys.last().map(String::as_str),
        Some("Return -"),
        "{keys:?}"
    );
    // Two lines, or a control character, are no command line: nothing is typed.
    for bad in ["ls\nrm -rf ~", "ls\u{7}", ""] {
        let e = invoke(&plugin, "terminal", json!({"command": bad}), &context)
            .await
            .expect_err("refused");
        assert_eq!(e.code, -32602, "{bad:?}: {e:?}");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        take_keys(&desktop).is_empty(),
        "nothing was typed for a refused command"
    );
}
