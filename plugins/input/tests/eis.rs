//! `utter-input`'s libei backend against an EIS server that records what it is sent
//! (`tests/portal`): through the RemoteDesktop portal (a fake frontend on a real private
//! `dbus-daemon`, spoken to by ashpd unchanged), and straight through `LIBEI_SOCKET`. The
//! keys must be those of the keymap the server sends (German here), every press must have
//! its release, pointer actions must arrive as libei's absolute motion, buttons and
//! discrete scroll, and a portal that declines, is too old or a server that misbehaves
//! must give a clear error without hanging the plugin.
//!
//! Debian packages: dbus-daemon, at-spi2-core (the shared bus helper checks for it),
//! libxkbcommon0 and xkb-data.

#[path = "../../a11y/tests/desktop/mod.rs"]
mod desktop;
mod portal;
#[path = "../../compositor/tests/sway_session/mod.rs"]
mod sway_session;

use desktop::SessionBus;
use portal::{Portal, PortalOptions, ServerOptions, keymap_of, wait_lines};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::time::Duration;
use utter_protocol::ErrorObject;
use utter_protocol::testkit::{SpawnOptions, TestPlugin};

async fn start_plugin(env: &[(&str, &str)]) -> TestPlugin {
    let options = SpawnOptions {
        env: env
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect(),
        timeout: Duration::from_secs(15),
        ..Default::default()
    };
    TestPlugin::start(&[env!("CARGO_BIN_EXE_utter-input").into()], options)
        .await
        .expect("the plugin starts and passes the handshake")
}

async fn invoke(plugin: &TestPlugin, op: &str, args: Value) -> Result<Value, ErrorObject> {
    let context =
        json!({"outputs": [{"name": "HDMI-A-1", "x": 0, "y": 0, "width": 1280, "height": 720}]});
    plugin
        .request(
            "action.invoke",
            json!({"op": op, "args": args, "provenance": "user", "context": context}),
        )
        .await
}

fn is_input(line: &str) -> bool {
    ["key ", "button ", "scroll", "move "]
        .iter()
        .any(|p| line.starts_with(p))
}

fn take(log: &portal::Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_clicks_and_scrolls_go_through_the_remote_desktop_portal() {
    let bus = SessionBus::start();
    let options = PortalOptions {
        server: ServerOptions {
            keymap: Some(keymap_of("de")),
            region: Some((0, 0, 1280, 720)),
            ..Default::default()
        },
        ..Default::default()
    };
    let portal = Portal::start(&bus.address, options).await;
    let state = tempfile::tempdir().unwrap();
    let env = [
        ("DBUS_SESSION_BUS_ADDRESS", bus.address.as_str()),
        ("UTTER_INPUT_BACKEND", "portal"),
        ("XDG_STATE_HOME", state.path().to_str().unwrap()),
        ("LIBEI_SOCKET", ""),
    ];
    let plugin = start_plugin(&env).await;
    let health = plugin.request("plugin.health", json!({})).await.unwrap();
    assert_eq!(health["status"], "ok", "{health}");
    let detail = health["detail"].as_str().unwrap();
    assert!(
        detail.contains("keyboard: libei from the RemoteDesktop portal's EIS server"),
        "{detail}"
    );
    assert!(detail.contains("pointer: libei"), "{detail}");

    // The portal was asked for keyboard and pointer (3), to persist until revoked (2),
    // with no token the first time; the token it gave is kept for the next start.
    {
        let calls = portal.calls.lock().unwrap().clone();
        assert_eq!(calls.select.len(), 1, "{calls:?}");
        assert_eq!(calls.select[0].get("types").map(String::as_str), Some("3"));
        assert_eq!(
            calls.select[0].get("persist_mode").map(String::as_str),
            Some("2")
        );
        assert!(!calls.select[0].contains_key("restore_token"), "{calls:?}");
        assert_eq!((calls.started, calls.connected), (1, 1));
    }
    let token = state.path().join("utter/remote-desktop-token");
    assert_eq!(std::fs::read_to_string(&token).unwrap(), "restore-1");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&token).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let hello = wait_lines(&portal.log, 1, |l| l.starts_with("hello")).await;
    assert_eq!(hello, ["hello utter-input"]);
    take(&portal.log);

    // Typing reads the server's German keymap: z and y trade places with the US layout,
    // and @ is AltGr (right Alt, 100) + q (16).
    let typed = invoke(&plugin, "type_keys", json!({"text": "zy@"}))
        .await
        .unwrap();
    assert_eq!(typed["backend"], "libei", "{typed}");
    assert_eq!(typed["path"], "keyboard");
    assert_eq!(typed["verified"], false);
    let detail = typed["detail"].as_str().unwrap();
    assert!(detail.contains("libei emulated-input device"), "{detail}");
    let keys = wait_lines(&portal.log, 8, is_input).await;
    assert_eq!(
        keys,
        [
            "key 21 press",
            "key 21 release",
            "key 44 press",
            "key 44 release",
            "key 100 press",
            "key 16 press",
            "key 16 release",
            "key 100 release"
        ]
    );
    let log = take(&portal.log);
    assert_eq!(log.first().map(String::as_str), Some("start"), "{log:?}");
    assert_eq!(log.last().map(String::as_str), Some("stop"), "{log:?}");

    // A chord: modifiers wrap the key and are released in reverse order.
    let chord = invoke(&plugin, "key", json!({"chord": "ctrl+shift+t"}))
        .await
        .unwrap();
    assert_eq!(chord["presses"], 3, "{chord}");
    let keys = wait_lines(&portal.log, 6, is_input).await;
    assert_eq!(
        keys,
        [
            "key 29 press",
            "key 42 press",
            "key 20 press",
            "key 20 release",
            "key 42 release",
            "key 29 release"
        ]
    );
    take(&portal.log);

    // A click at a point: absolute motion in layout pixels, then press and release.
    let click = invoke(&plugin, "click_point", json!({"x": 100, "y": 200}))
        .await
        .unwrap();
    assert_eq!(click["backend"], "libei", "{click}");
    let events = wait_lines(&portal.log, 3, is_input).await;
    assert_eq!(
        events,
        ["move 100 200", "button 272 press", "button 272 release"]
    );
    take(&portal.log);

    // Scrolling: discrete wheel steps of 120, then a stop.
    invoke(&plugin, "scroll", json!({"direction": "up", "amount": 2}))
        .await
        .unwrap();
    let events = wait_lines(&portal.log, 3, is_input).await;
    assert_eq!(events, ["scroll 0 -120", "scroll 0 -120", "scroll-stop"]);
    take(&portal.log);

    // Bad input is refused before anything is sent.
    let err = invoke(&plugin, "key", json!({"chord": "ctrl+nosuchkey"}))
        .await
        .unwrap_err();
    assert_eq!(err.code, -32602, "{err:?}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !portal.log.lock().unwrap().iter().any(|l| is_input(l)),
        "nothing is sent for a refused chord"
    );

    // The next start sends the kept token, so the person is not asked again.
    drop(plugin);
    let plugin = start_plugin(&env).await;
    let health = plugin.request("plugin.health", json!({})).await.unwrap();
    assert_eq!(health["status"], "ok", "{health}");
    let calls = portal.calls.lock().unwrap().clone();
    assert_eq!(calls.select.len(), 2, "{calls:?}");
    assert_eq!(
        calls.select[1].get("restore_token").map(String::as_str),
        Some("restore-1"),
        "{calls:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declined_or_too_old_portal_says_why_and_sends_nothing() {
    for (options, expect) in [
        (
            PortalOptions {
                decline: true,
                ..Default::default()
            },
            "declined",
        ),
        (
            PortalOptions {
                version: 1,
                ..Default::default()
            },
            "interface version 1",
        ),
    ] {
        let bus = SessionBus::start();
        let portal = Portal::start(&bus.address, options).await;
        let state = tempfile::tempdir().unwrap();
        let plugin = start_plugin(&[
            ("DBUS_SESSION_BUS_ADDRESS", bus.address.as_str()),
            ("UTTER_INPUT_BACKEND", "portal"),
            ("XDG_STATE_HOME", state.path().to_str().unwrap()),
            ("LIBEI_SOCKET", ""),
        ])
        .await;
        let health = plugin.request("plugin.health", json!({})).await.unwrap();
        assert_eq!(health["status"], "degraded", "{health}");
        assert!(
            health["detail"].as_str().unwrap().contains(expect),
            "{health}"
        );
        let err = invoke(&plugin, "type_keys", json!({"text": "hi"}))
            .await
            .unwrap_err();
        assert_eq!(err.code, -32000, "{err:?}");
        assert!(err.message.contains(expect), "{err:?}");
        assert!(portal.log.lock().unwrap().iter().all(|l| !is_input(l)));
        assert!(!state.path().join("utter/remote-desktop-token").exists());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn libei_socket_is_used_directly_and_misbehaving_servers_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("eis-0");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let log: portal::Log = Default::default();
    let served = log.clone();
    std::thread::spawn(move || {
        let mut n = 0;
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            n += 1;
            match n {
                // A well-behaved server without a keymap: the environment's layout (US).
                1 => {
                    portal::serve(stream, ServerOptions::default(), served.clone());
                }
                // Garbage instead of a handshake.
                2 => {
                    std::thread::spawn(move || {
                        use std::io::Write;
                        let _ = stream.write_all(&[0xff; 64]);
                        std::thread::sleep(Duration::from_secs(5));
                    });
                }
                // Silence: the handshake must time out.
                3 => {
                    std::thread::spawn(move || {
                        std::thread::sleep(Duration::from_secs(10));
                        drop(stream);
                    });
                }
                // Devices that are never resumed.
                _ => {
                    portal::serve(
                        stream,
                        ServerOptions {
                            never_resume: true,
                            ..Default::default()
                        },
                        served.clone(),
                    );
                }
            }
        }
    });
    let env = [
        ("LIBEI_SOCKET", path.to_str().unwrap()),
        ("UTTER_INPUT_BACKEND", "eis"),
        ("UTTER_XKB_LAYOUT", "us"),
        ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent"),
    ];

    let plugin = start_plugin(&env).await;
    let health = plugin.request("plugin.health", json!({})).await.unwrap();
    assert_eq!(health["status"], "ok", "{health}");
    assert!(
        health["detail"]
            .as_str()
            .unwrap()
            .contains("(LIBEI_SOCKET)"),
        "{health}"
    );
    let typed = invoke(&plugin, "type_keys", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(typed["backend"], "libei", "{typed}");
    let keys = wait_lines(&log, 4, is_input).await;
    assert_eq!(
        keys,
        [
            "key 35 press",
            "key 35 release",
            "key 23 press",
            "key 23 release"
        ]
    );
    // No region was offered, so any point of the layout is taken.
    invoke(
        &plugin,
        "click_point",
        json!({"x": 5, "y": 5, "button": "right"}),
    )
    .await
    .unwrap();
    drop(plugin);
    // The click's events reach the server's log after the plugin's answer (on a loaded
    // machine, after this line): wait until the log is quiet before emptying it, so that
    // none of them is taken for input sent while the session is paused below.
    let mut seen = usize::MAX;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = log.lock().unwrap().len();
        if now == seen {
            break;
        }
        seen = now;
    }
    take(&log);

    for expect in ["malformed", "did not answer in time"] {
        let plugin = start_plugin(&env).await;
        let started = std::time::Instant::now();
        let err = invoke(&plugin, "key", json!({"chord": "Return"}))
            .await
            .unwrap_err();
        assert_eq!(err.code, -32000, "{err:?}");
        assert!(err.message.contains(expect), "{expect}: {err:?}");
        assert!(started.elapsed() < Duration::from_secs(12), "bounded");
        // The plugin still answers.
        plugin.request("plugin.health", json!({})).await.unwrap();
    }

    let plugin = start_plugin(&env).await;
    let err = invoke(&plugin, "key", json!({"chord": "Return"}))
        .await
        .unwrap_err();
    assert!(err.message.contains("paused"), "{err:?}");
    assert!(log.lock().unwrap().iter().all(|l| !is_input(l)));
}

/// Serve every connection to a fresh socket with `options`; the log of all of them.
fn serve_socket(options: ServerOptions) -> (tempfile::TempDir, std::path::PathBuf, portal::Log) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("eis-0");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let log: portal::Log = Default::default();
    let served = log.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            portal::serve(stream, options.clone(), served.clone());
        }
    });
    (dir, path, log)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_paused_during_a_call_fails_it_and_releases_every_key() {
    let (_dir, path, log) = serve_socket(ServerOptions {
        pause_after_keys: Some(20),
        ..Default::default()
    });
    let plugin = start_plugin(&[
        ("LIBEI_SOCKET", path.to_str().unwrap()),
        ("UTTER_INPUT_BACKEND", "eis"),
        ("UTTER_XKB_LAYOUT", "us"),
    ])
    .await;
    // 2000 capitals: each is Shift and the key, pressed and released, each event framed
    // (about 200 bytes a character), more than a unix socket holds; the server stops reading
    // after the pause, so the plugin must read the pause before it could have sent it all.
    let text = "ABCDEFGHIJ".repeat(200);
    let err = invoke(&plugin, "type_keys", json!({"text": text}))
        .await
        .expect_err("a pause mid-call is no success");
    assert_eq!(err.code, -32000, "{err:?}");
    assert!(err.message.contains("paused or removed"), "{err:?}");
    let lines = log.lock().unwrap().clone();
    assert!(lines.iter().any(|l| l == "paused"), "{lines:?}");
    let presses = lines.iter().filter(|l| l.ends_with(" press")).count();
    let releases = lines.iter().filter(|l| l.ends_with(" release")).count();
    assert_eq!(presses, releases, "every press has its release: {lines:?}");
    assert!(
        presses < 4000,
        "it stopped after the pause ({presses} of 4000 presses)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devices_the_server_adds_late_are_used_and_a_missing_keyboard_is_named() {
    let (_dir, path, log) = serve_socket(ServerOptions {
        add_late: Some(Duration::from_millis(3500)),
        ..Default::default()
    });
    let plugin = start_plugin(&[
        ("LIBEI_SOCKET", path.to_str().unwrap()),
        ("UTTER_INPUT_BACKEND", "eis"),
        ("UTTER_XKB_LAYOUT", "us"),
    ])
    .await;
    // Connected, but the server has no device yet (its setup window is 3 s).
    let err = invoke(&plugin, "key", json!({"chord": "Return"}))
        .await
        .expect_err("no keyboard yet");
    assert!(err.message.contains("offers no keyboard"), "{err:?}");
    wait_lines(&log, 1, |l| l == "added").await;
    let pressed = invoke(&plugin, "key", json!({"chord": "Return"}))
        .await
        .expect("the late keyboard is used");
    assert_eq!(pressed["backend"], "libei", "{pressed}");
    let keys = wait_lines(&log, 2, is_input).await;
    assert_eq!(keys, ["key 28 press", "key 28 release"]);
}
