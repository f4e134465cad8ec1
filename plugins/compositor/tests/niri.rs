//! The niri client against a fake niri that speaks niri's wire (tests/niri_server).

mod niri_server;

use niri_server::{Desktop, FakeNiri, FakeOutput, FakeWorkspace, Misbehave};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;
use utter_compositor::backend::wait_for;
use utter_compositor::link::BackendError;
use utter_compositor::model::{CompositorInfo, Output, Snapshot, Window, Workspace};
use utter_compositor::niri::Niri;
use utter_protocol::testkit::{SpawnOptions, TestPlugin};

const WAIT: Duration = Duration::from_secs(5);

/// Fail instead of hanging.
async fn within<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .expect("the test took longer than 30 s")
}

async fn connect(fake: &FakeNiri) -> Niri {
    Niri::connect(fake.socket().to_path_buf())
        .await
        .expect("connect to the fake niri")
}

async fn until(niri: &Niri, what: &str, done: impl FnMut(&Snapshot) -> bool) -> Snapshot {
    let mut state = niri.state();
    match wait_for(&mut state, WAIT, done).await {
        Some(snapshot) => snapshot,
        None => panic!(
            "{what}: not seen within {WAIT:?}; last: {:#?}",
            *state.borrow()
        ),
    }
}

fn window(id: u64, app_id: &str, title: &str, ws: &str, ws_id: u64, output: &str) -> Window {
    Window {
        id,
        app_id: Some(app_id.into()),
        title: Some(title.into()),
        pid: Some(1000 + id as i64),
        workspace: Some(ws.into()),
        workspace_id: Some(ws_id),
        output: Some(output.into()),
        focused: false,
        fullscreen: None,
        floating: Some(false),
        rect: None,
        frame: None,
        visible: None,
        focused_at: None,
    }
}

fn workspace(id: u64, index: i64, name: Option<&str>, output: &str, active: bool) -> Workspace {
    Workspace {
        id,
        index: Some(index),
        name: name.map(str::to_owned),
        output: Some(output.into()),
        focused: false,
        active,
    }
}

#[tokio::test]
async fn connect_builds_the_snapshot() {
    within(async {
        let fake = FakeNiri::start().await;
        let niri = connect(&fake).await;
        assert_eq!(niri.version().as_deref(), Some("25.11"));

        let mut firefox = window(10, "firefox", "Mozilla Firefox", "web", 1, "DP-1");
        firefox.focused = true;
        firefox.focused_at = Some(1_700_001_010.0);
        let mut foot = window(11, "foot", "~", "2", 2, "DP-1");
        foot.focused_at = Some(1_700_000_011.0);
        let mut htop = window(12, "foot", "htop", "1", 4, "HDMI-A-1");
        htop.focused_at = Some(1_700_000_012.0);
        let mut web = workspace(1, 1, Some("web"), "DP-1", true);
        web.focused = true;
        let expected = Snapshot {
            compositor: CompositorInfo {
                name: "niri".into(),
                version: Some("25.11".into()),
                socket: Some(fake.socket().display().to_string()),
                connected: true,
            },
            focused: Some(firefox.clone()),
            windows: vec![firefox, foot, htop],
            workspaces: vec![
                web,
                workspace(2, 2, None, "DP-1", false),
                workspace(3, 3, None, "DP-1", false),
                workspace(4, 1, None, "HDMI-A-1", true),
                workspace(5, 2, None, "HDMI-A-1", false),
            ],
            outputs: vec![
                Output {
                    name: "DP-1".into(),
                    focused: true,
                    make: Some("Dell Inc.".into()),
                    model: Some("DELL U2720Q".into()),
                    width: Some(2560),
                    height: Some(1440),
                    x: Some(0),
                    y: Some(0),
                },
                Output {
                    name: "HDMI-A-1".into(),
                    focused: false,
                    make: Some("Unknown".into()),
                    model: Some("Unknown".into()),
                    width: Some(1920),
                    height: Some(1080),
                    x: Some(2560),
                    y: Some(0),
                },
            ],
            keyboard_layout: Some("English (US)".into()),
            overview: Some(false),
            screenshot: None,
            truncated: false,
            provenance: Default::default(),
        };
        assert_eq!(*niri.state().borrow(), expected);

        // What it asked for, in order, before the stream.
        assert_eq!(
            fake.requests(),
            [
                r#""Version""#,
                r#""Outputs""#,
                r#""FocusedOutput""#,
                r#""EventStream""#
            ]
        );
    })
    .await;
}

#[tokio::test]
async fn unknown_events_and_fields_are_tolerated() {
    within(async {
        // The initial state already carries {"FutureThing":…} and x_future… fields.
        let fake = FakeNiri::start().await;
        let niri = connect(&fake).await;
        assert_eq!(niri.state().borrow().windows.len(), 3);

        fake.emit(json!({"AnotherFutureThing": {"y": [1, 2], "z": {"deep": null}}}));
        fake.emit(json!("BareFutureThing"));
        fake.emit(json!({"WindowOpenedOrChanged": {
            "window": {"id": 11, "title": "vim", "app_id": "foot", "pid": 1011,
                       "workspace_id": 2, "is_focused": false, "is_floating": true,
                       "brand_new_field": {"a": 1}},
            "x_future_event_field": 5
        }}));
        fake.emit(json!({"KeyboardLayoutSwitched": {"idx": 1, "x_why": "because"}}));
        fake.emit(json!({"OverviewOpenedOrClosed": {"is_open": true}}));
        let s = until(&niri, "the known events after the unknown ones", |s| {
            s.overview == Some(true)
        })
        .await;
        assert_eq!(s.window(11).unwrap().title.as_deref(), Some("vim"));
        assert_eq!(s.keyboard_layout.as_deref(), Some("German"));
        assert_eq!(fake.event_streams_opened(), 1);
    })
    .await;
}

#[tokio::test]
async fn an_action_is_sent_as_the_exact_json_line_and_its_events_apply() {
    within(async {
        let fake = FakeNiri::start().await;
        let niri = connect(&fake).await;

        niri.action(json!({"FocusWorkspace": {"reference": {"Index": 2}}}))
            .await
            .unwrap();
        assert_eq!(
            fake.action_lines(),
            [r#"{"Action":{"FocusWorkspace":{"reference":{"Index":2}}}}"#]
        );
        let s = until(&niri, "workspace 2 focused", |s| {
            s.focused_workspace().map(|w| w.id) == Some(2)
        })
        .await;
        assert_eq!(s.focused.as_ref().map(|w| w.id), Some(11));
        assert!(!s.workspaces[0].active && s.workspaces[1].active);
        assert!(
            s.workspaces[3].active,
            "the other output keeps its workspace"
        );

        niri.action(json!({"FocusWorkspace": {"reference": {"Name": "web"}}}))
            .await
            .unwrap();
        until(&niri, "web focused again", |s| {
            s.focused_workspace().map(|w| w.id) == Some(1)
                && s.focused.as_ref().map(|w| w.id) == Some(10)
        })
        .await;

        niri.action(json!({"MoveWindowToWorkspace": {
            "window_id": 12, "reference": {"Id": 3}, "focus": false
        }}))
        .await
        .unwrap();
        let s = until(&niri, "htop moved to workspace 3", |s| {
            s.window(12).and_then(|w| w.workspace_id) == Some(3)
        })
        .await;
        let htop = s.window(12).unwrap();
        assert_eq!(htop.workspace.as_deref(), Some("3"));
        assert_eq!(htop.output.as_deref(), Some("DP-1"));

        niri.action(json!({"FocusWindow": {"id": 12}}))
            .await
            .unwrap();
        let s = until(&niri, "htop focused", |s| {
            s.focused.as_ref().map(|w| w.id) == Some(12)
        })
        .await;
        assert_eq!(s.focused_workspace().map(|w| w.id), Some(3));
        assert_eq!(s.focused_output(), Some("DP-1"));

        niri.action(json!({"CloseWindow": {"id": null}}))
            .await
            .unwrap();
        let s = until(&niri, "htop closed", |s| s.window(12).is_none()).await;
        assert_eq!(s.focused, None);

        assert_eq!(
            fake.actions(),
            [
                json!({"Action": {"FocusWorkspace": {"reference": {"Index": 2}}}}),
                json!({"Action": {"FocusWorkspace": {"reference": {"Name": "web"}}}}),
                json!({"Action": {"MoveWindowToWorkspace": {
                    "window_id": 12, "reference": {"Id": 3}, "focus": false}}}),
                json!({"Action": {"FocusWindow": {"id": 12}}}),
                json!({"Action": {"CloseWindow": {"id": null}}}),
            ]
        );
    })
    .await;
}

#[tokio::test]
async fn an_err_reply_is_refused_with_niris_words() {
    within(async {
        let fake = FakeNiri::start().await;
        let niri = connect(&fake).await;
        fake.refuse("CloseWindow", "closing is not allowed today");

        let err = niri
            .action(json!({"CloseWindow": {"id": 10}}))
            .await
            .unwrap_err();
        match err {
            BackendError::Refused {
                compositor,
                request,
                message,
            } => {
                assert_eq!(compositor, "niri");
                assert_eq!(request, r#"{"Action":{"CloseWindow":{"id":10}}}"#);
                assert_eq!(message, "closing is not allowed today");
            }
            other => panic!("expected Refused, got {other:?}"),
        }
        assert!(niri.state().borrow().window(10).is_some());

        // The fake refuses a workspace it does not have, as niri does.
        let err = niri
            .action(json!({"FocusWorkspace": {"reference": {"Name": "nope"}}}))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, BackendError::Refused { message, .. } if message == "workspace not found"),
            "{err:?}"
        );

        // A request niri cannot parse.
        let err = niri.request(json!("NoSuchRequest")).await.unwrap_err();
        assert!(matches!(err, BackendError::Refused { .. }), "{err:?}");
    })
    .await;
}

#[tokio::test]
async fn request_returns_the_ok_payload() {
    within(async {
        let fake = FakeNiri::start().await;
        let niri = connect(&fake).await;

        let windows = niri.request(json!("Windows")).await.unwrap();
        let list = windows["Windows"].as_array().expect("a Windows array");
        assert_eq!(list.len(), 3);
        assert_eq!(list[0]["app_id"], "firefox");

        let focused = niri.request(json!("FocusedWindow")).await.unwrap();
        assert_eq!(focused["FocusedWindow"]["id"], 10);

        let layouts = niri.request(json!("KeyboardLayouts")).await.unwrap();
        assert_eq!(layouts["KeyboardLayouts"]["names"][1], "German");

        let workspaces = niri.request(json!("Workspaces")).await.unwrap();
        assert_eq!(workspaces["Workspaces"].as_array().map(Vec::len), Some(5));

        let handled = niri
            .request(json!({"Action": {"FocusWindow": {"id": 11}}}))
            .await
            .unwrap();
        assert_eq!(handled, Value::from("Handled"));
    })
    .await;
}

#[tokio::test]
async fn after_the_stream_drops_it_reconnects_and_follows_later_changes() {
    within(async {
        let fake = FakeNiri::start().await;
        let niri = connect(&fake).await;
        assert_eq!(fake.event_streams_opened(), 1);

        fake.drop_connections();
        // While disconnected, the last snapshot stays readable…
        assert_eq!(niri.state().borrow().windows.len(), 3);
        // …and a change now arrives with the full state the new stream starts with (or as an
        // event, if the client is back already).
        fake.change(|d| {
            d.window_mut(12).unwrap().title = Some("btop".into());
            vec![d.window_event(12)]
        });

        assert!(
            fake.wait_event_streams_opened(2, WAIT).await,
            "the client did not reopen the event stream"
        );
        until(&niri, "the change made while disconnected", |s| {
            s.window(12).and_then(|w| w.title.as_deref()) == Some("btop")
        })
        .await;

        // A later change on the new stream.
        fake.change(|d| {
            d.window_mut(11).unwrap().title = Some("after reconnect".into());
            vec![d.window_event(11)]
        });
        until(&niri, "the change after reconnecting", |s| {
            s.window(11).and_then(|w| w.title.as_deref()) == Some("after reconnect")
        })
        .await;
        // The version and outputs were read again on reconnect.
        let requests = fake.requests();
        assert_eq!(requests.iter().filter(|r| *r == r#""Version""#).count(), 2);
        assert_eq!(requests.iter().filter(|r| *r == r#""Outputs""#).count(), 2);
        assert_eq!(niri.version().as_deref(), Some("25.11"));
    })
    .await;
}

#[tokio::test]
async fn garbage_on_the_event_stream_is_skipped() {
    within(async {
        let fake = FakeNiri::start().await;
        let niri = connect(&fake).await;

        fake.emit_raw("this is not json");
        fake.emit_raw("");
        fake.emit_raw("[1, 2, 3]");
        fake.emit_raw(r#"{"A": 1, "B": 2}"#);
        fake.emit_raw(r#"{"WindowClosed": {"id": "eleven"}}"#);
        fake.emit_raw(r#"{"WindowsChanged": 42}"#);
        fake.emit_raw("\u{0}\u{1}\u{2}");
        fake.change(|d| {
            d.windows.retain(|w| w.id != 11);
            vec![json!({"WindowClosed": {"id": 11}})]
        });
        let s = until(&niri, "the valid event after the garbage", |s| {
            s.window(11).is_none()
        })
        .await;
        assert_eq!(
            s.windows.len(),
            2,
            "the wrong-shaped WindowsChanged was skipped"
        );
        assert_eq!(fake.event_streams_opened(), 1, "garbage does not reconnect");
    })
    .await;
}

#[tokio::test]
async fn an_overlong_event_line_breaks_the_stream_and_it_reconnects() {
    within(async {
        let fake = FakeNiri::start().await;
        let niri = connect(&fake).await;

        let huge = "x".repeat(utter_compositor::niri::MAX_LINE + 1024);
        fake.emit_raw(&huge);
        drop(huge);
        assert!(
            fake.wait_event_streams_opened(2, WAIT).await,
            "the client did not reopen the event stream after an overlong line"
        );
        assert_eq!(niri.state().borrow().windows.len(), 3);
        fake.change(|d| {
            d.window_mut(10).unwrap().title = Some("still alive".into());
            vec![d.window_event(10)]
        });
        until(&niri, "a change after the overlong line", |s| {
            s.window(10).and_then(|w| w.title.as_deref()) == Some("still alive")
        })
        .await;
    })
    .await;
}

#[tokio::test]
async fn bad_replies_to_requests_are_errors_not_hangs() {
    within(async {
        for how in [Misbehave::Garbage, Misbehave::Endless, Misbehave::Close] {
            let fake = FakeNiri::start().await;
            fake.misbehave("Version", how.clone());
            let started = std::time::Instant::now();
            let err = Niri::connect(fake.socket().to_path_buf())
                .await
                .expect_err("connect must fail");
            assert!(matches!(err, BackendError::Io { .. }), "{how:?}: {err:?}");
            assert!(
                started.elapsed() < Duration::from_secs(4),
                "{how:?} took {:?}",
                started.elapsed()
            );
        }

        // On a live client, a bad reply to one request leaves the client working.
        let fake = FakeNiri::start().await;
        let niri = connect(&fake).await;
        fake.misbehave("Windows", Misbehave::Endless);
        let err = niri.request(json!("Windows")).await.unwrap_err();
        assert!(matches!(err, BackendError::Io { .. }), "{err:?}");
        fake.misbehave("FocusWindow", Misbehave::Garbage);
        let err = niri
            .action(json!({"FocusWindow": {"id": 11}}))
            .await
            .unwrap_err();
        assert!(matches!(err, BackendError::Io { .. }), "{err:?}");
        fake.behave("Windows");
        assert!(niri.request(json!("Windows")).await.is_ok());
    })
    .await;
}

#[tokio::test]
async fn an_event_stream_without_initial_state_fails_connect_in_bounded_time() {
    within(async {
        let fake = FakeNiri::start().await;
        fake.misbehave("EventStream", Misbehave::NoInitialState);
        let started = std::time::Instant::now();
        let err = Niri::connect(fake.socket().to_path_buf())
            .await
            .expect_err("connect must fail");
        assert!(matches!(err, BackendError::Io { .. }), "{err:?}");
        assert!(started.elapsed() < Duration::from_secs(6));
    })
    .await;
}

#[tokio::test]
async fn a_missing_socket_is_a_connect_error_with_the_path() {
    within(async {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no-niri-here.sock");
        let err = Niri::connect(path.clone()).await.unwrap_err();
        match err {
            BackendError::Connect {
                compositor, socket, ..
            } => {
                assert_eq!(compositor, "niri");
                assert_eq!(socket, path.display().to_string());
            }
            other => panic!("expected Connect, got {other:?}"),
        }
    })
    .await;
}

#[tokio::test]
async fn a_new_output_in_the_workspaces_is_read_again() {
    within(async {
        let fake = FakeNiri::start().await;
        let niri = connect(&fake).await;

        fake.change(|d| {
            d.outputs.push(FakeOutput {
                name: "DP-2".into(),
                make: "Acme".into(),
                model: "Screen 9000".into(),
                logical: Some((1280, 1024)),
                x: 4480,
            });
            d.workspaces.push(FakeWorkspace {
                id: 6,
                idx: 1,
                name: None,
                output: Some("DP-2".into()),
                is_active: true,
                is_focused: false,
                active_window_id: None,
            });
            vec![json!({"WorkspacesChanged": {"workspaces": d.workspaces_json()}})]
        });
        let s = until(&niri, "the new output", |s| {
            s.outputs.iter().any(|o| o.name == "DP-2")
        })
        .await;
        let dp2 = s.outputs.iter().find(|o| o.name == "DP-2").unwrap();
        assert_eq!((dp2.width, dp2.height), (Some(1280), Some(1024)));
        assert_eq!(dp2.model.as_deref(), Some("Screen 9000"));
        assert!(s.workspaces.iter().any(|w| w.id == 6));
    })
    .await;
}

#[tokio::test]
async fn a_niri_without_keyboard_or_overview_events_still_connects() {
    within(async {
        // An older niri's initial burst: only workspaces and windows. The client counts the
        // state complete after a short quiet spell.
        let mut desktop = Desktop::two_outputs();
        desktop.stream_sends_layouts_and_overview = false;
        let fake = FakeNiri::start_with(desktop).await;
        let started = std::time::Instant::now();
        let niri = connect(&fake).await;
        assert!(started.elapsed() < Duration::from_secs(2));
        let s = niri.state().borrow().clone();
        assert_eq!(s.windows.len(), 3);
        assert_eq!(s.keyboard_layout, None);
        assert_eq!(s.overview, None);
        // Later events still apply.
        fake.emit(json!({"OverviewOpenedOrClosed": {"is_open": true}}));
        until(&niri, "the overview opened", |s| s.overview == Some(true)).await;
    })
    .await;
}

/// The plugin binary with `NIRI_SOCKET` pointing at the fake.
async fn plugin_for(fake: &FakeNiri) -> TestPlugin {
    let env: Vec<(OsString, OsString)> = vec![
        ("NIRI_SOCKET".into(), fake.socket().into()),
        ("SWAYSOCK".into(), "".into()),
        ("I3SOCK".into(), "".into()),
        ("HYPRLAND_INSTANCE_SIGNATURE".into(), "".into()),
    ];
    let options = SpawnOptions {
        env,
        timeout: Duration::from_secs(15),
        ..Default::default()
    };
    TestPlugin::start(&[env!("CARGO_BIN_EXE_utter-compositor").into()], options)
        .await
        .expect("the plugin starts and passes the handshake")
}

async fn invoke(
    plugin: &TestPlugin,
    args: Value,
    dry_run: bool,
) -> Result<Value, utter_protocol::ErrorObject> {
    plugin
        .request(
            "action.invoke",
            json!({"op": "niri", "args": args, "provenance": "user", "dry_run": dry_run}),
        )
        .await
}

async fn run(plugin: &TestPlugin, args: Value) -> Value {
    match invoke(plugin, args.clone(), false).await {
        Ok(v) => {
            assert_eq!(v["ok"], true, "{args}: {v}");
            v
        }
        Err(e) => panic!("{args} failed: {e}"),
    }
}

#[tokio::test]
async fn spawn_sends_the_exact_spawn_json_and_waits_for_the_window() {
    within(async {
        let fake = FakeNiri::start().await;
        let plugin = plugin_for(&fake).await;
        let caps = plugin
            .request("action.capabilities", json!({}))
            .await
            .expect("capabilities");
        let commands = caps["ops"][0]["args_schema"]["properties"]["command"]["enum"].clone();
        for name in [
            "spawn",
            "spawn-sh",
            "move-window-to-floating",
            "move-window-to-tiling",
        ] {
            assert!(
                commands.as_array().unwrap().contains(&json!(name)),
                "{name}"
            );
        }

        let r = run(
            &plugin,
            json!({"command": "spawn", "args": ["foot", "--flag"]}),
        )
        .await;
        assert_eq!(
            fake.action_lines().last().map(String::as_str),
            Some(r#"{"Action":{"Spawn":{"command":["foot","--flag"]}}}"#)
        );
        assert_eq!(r["sent"], json!({"Spawn": {"command": ["foot", "--flag"]}}));
        assert_eq!(r["verified"], true, "{r}");
        assert_eq!(r["window"]["app_id"], "foot", "{r}");
        assert_eq!(r["window"]["id"], 13, "{r}");

        // Quotes and separators mean nothing to niri's Spawn: they arrive as they were.
        run(
            &plugin,
            json!({"command": "spawn", "args": ["/usr/bin/sh", "-c", "echo 'a; b' \"c\""]}),
        )
        .await;
        assert_eq!(
            fake.actions().last().cloned(),
            Some(
                json!({"Action": {"Spawn": {"command": ["/usr/bin/sh", "-c", "echo 'a; b' \"c\""]}}})
            )
        );

        let r = run(
            &plugin,
            json!({"command": "spawn-sh", "args": ["notify-send 'hi'; foot"]}),
        )
        .await;
        assert_eq!(
            fake.action_lines().last().map(String::as_str),
            Some(r#"{"Action":{"SpawnSh":{"command":"notify-send 'hi'; foot"}}}"#)
        );
        assert_eq!(r["verified"], true, "{r}");

        // A program without a window: sent, and honestly not verified.
        let r = run(&plugin, json!({"command": "spawn", "args": ["true"]})).await;
        assert_eq!(r["verified"], false, "{r}");
        assert!(
            r["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("no new window appeared"),
            "{r}"
        );

        // A dry run sends nothing and claims nothing.
        let before = fake.action_lines().len();
        let dry = invoke(&plugin, json!({"command": "spawn", "args": ["foot"]}), true)
            .await
            .expect("dry run");
        assert!(dry.get("verified").is_none(), "{dry}");
        assert_eq!(fake.action_lines().len(), before);
    })
    .await;
}

#[tokio::test]
async fn floating_fullscreen_and_monitors_on_niri() {
    within(async {
        let fake = FakeNiri::start().await;
        let plugin = plugin_for(&fake).await;

        let r = run(&plugin, json!({"command": "move-window-to-floating"})).await;
        assert_eq!(
            fake.action_lines().last().map(String::as_str),
            Some(r#"{"Action":{"MoveWindowToFloating":{"id":null}}}"#)
        );
        assert_eq!(r["verified"], true, "{r}");
        assert_eq!(r["window"]["id"], 10, "{r}");
        assert_eq!(r["window"]["floating"], true, "{r}");
        let r = run(&plugin, json!({"command": "move-window-to-tiling"})).await;
        assert_eq!(
            fake.action_lines().last().map(String::as_str),
            Some(r#"{"Action":{"MoveWindowToTiling":{"id":null}}}"#)
        );
        assert_eq!(r["verified"], true, "{r}");
        assert_eq!(r["window"]["floating"], false, "{r}");
        let r = run(&plugin, json!({"command": "toggle-window-floating"})).await;
        assert_eq!(r["verified"], true, "{r}");
        assert!(fake.desktop().window(10).unwrap().is_floating);

        // niri does not report fullscreen: "off" sends the toggle and says it cannot know.
        let r = run(
            &plugin,
            json!({"command": "fullscreen-window", "options": {"state": "off"}}),
        )
        .await;
        assert_eq!(
            fake.action_lines().last().map(String::as_str),
            Some(r#"{"Action":{"FullscreenWindow":{"id":null}}}"#)
        );
        assert_eq!(r["verified"], false, "{r}");
        let detail = r["detail"].as_str().unwrap_or_default();
        assert!(
            detail.contains("does not report whether a window is fullscreen"),
            "{detail}"
        );

        // Two outputs side by side, DP-1 (x 0) focused: nothing to its left.
        let before = fake.action_lines().len();
        let e = invoke(&plugin, json!({"command": "focus-monitor-left"}), true)
            .await
            .expect_err("a dry run is refused too");
        assert_eq!(e.code, -32000);
        assert_eq!(fake.action_lines().len(), before);
        let before = fake.action_lines().len();
        let e = invoke(&plugin, json!({"command": "focus-monitor-left"}), false)
            .await
            .expect_err("no monitor on the left");
        assert_eq!(e.code, -32000);
        assert_eq!(e.message, "there is no monitor to the left of DP-1");
        let e = invoke(
            &plugin,
            json!({"command": "move-window-to-monitor-up"}),
            false,
        )
        .await
        .expect_err("no monitor above");
        assert_eq!(e.message, "there is no monitor above DP-1");
        assert_eq!(fake.action_lines().len(), before, "nothing was sent");
        run(&plugin, json!({"command": "focus-monitor-right"})).await;
        assert_eq!(
            fake.action_lines().last().map(String::as_str),
            Some(r#"{"Action":{"FocusMonitorRight":{}}}"#)
        );

        // On niri, maximize-column is sent as it is.
        run(&plugin, json!({"command": "maximize-column"})).await;
        assert_eq!(
            fake.action_lines().last().map(String::as_str),
            Some(r#"{"Action":{"MaximizeColumn":{}}}"#)
        );
    })
    .await;
}

#[tokio::test]
async fn a_niri_that_reports_fullscreen_gets_the_toggle_only_when_needed() {
    within(async {
        let mut desktop = Desktop::two_outputs();
        desktop.window_mut(10).unwrap().is_fullscreen = Some(false);
        let fake = FakeNiri::start_with(desktop).await;
        let plugin = plugin_for(&fake).await;
        let fullscreen =
            |state: &str| json!({"command": "fullscreen-window", "options": {"state": state}});

        // Already not fullscreen: nothing is sent, and that is known.
        let r = run(&plugin, fullscreen("off")).await;
        assert_eq!(r["sent"], Value::Null, "{r}");
        assert_eq!(r["verified"], true, "{r}");
        assert!(fake.action_lines().is_empty(), "{:?}", fake.action_lines());
        let dry = invoke(&plugin, fullscreen("off"), true)
            .await
            .expect("dry run");
        assert!(dry.get("verified").is_none(), "{dry}");
        assert_eq!(dry["sent"], Value::Null, "{dry}");

        // "on" sends the toggle once; a second "on" sends nothing.
        let r = run(&plugin, fullscreen("on")).await;
        assert_eq!(r["sent"], json!({"FullscreenWindow": {"id": null}}), "{r}");
        assert_eq!(r["verified"], true, "{r}");
        assert_eq!(r["window"]["fullscreen"], true, "{r}");
        let r = run(&plugin, fullscreen("on")).await;
        assert_eq!(r["sent"], Value::Null, "{r}");
        assert_eq!(fake.action_lines().len(), 1);
        assert_eq!(fake.desktop().window(10).unwrap().is_fullscreen, Some(true));

        let r = run(&plugin, fullscreen("toggle")).await;
        assert_eq!(r["verified"], true, "{r}");
        assert_eq!(
            fake.desktop().window(10).unwrap().is_fullscreen,
            Some(false)
        );
    })
    .await;
}

/// A minimal niri for the flood test: answers the requests a client makes when it connects,
/// and on `EventStream` sends the initial state, then `count` title changes of window 1 as
/// fast as the socket takes them, the last one titled "last".
async fn flooding_niri(dir: &Path, count: usize) -> PathBuf {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let path = dir.join("flood.sock");
    let listener = tokio::net::UnixListener::bind(&path).expect("bind");
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let (read, mut write) = stream.into_split();
                let mut line = String::new();
                if BufReader::new(read).read_line(&mut line).await.is_err() {
                    return;
                }
                let reply = match line.trim() {
                    r#""Version""# => json!({"Ok": {"Version": "25.11"}}),
                    r#""Outputs""# => json!({"Ok": {"Outputs": {"DP-1": {"name": "DP-1",
                        "make": "m", "model": "x", "logical": {"x": 0, "y": 0, "width": 1920, "height": 1080}}}}}),
                    r#""FocusedOutput""# => json!({"Ok": {"FocusedOutput": {"name": "DP-1"}}}),
                    r#""EventStream""# => json!({"Ok": "Handled"}),
                    _ => json!({"Ok": "Handled"}),
                };
                let mut out = format!("{reply}\n");
                if line.trim() != r#""EventStream""# {
                    let _ = write.write_all(out.as_bytes()).await;
                    return;
                }
                let window = |title: &str| json!({"id": 1, "title": title, "app_id": "foot", "workspace_id": 1, "is_focused": true});
                for event in [
                    json!({"WorkspacesChanged": {"workspaces": [{"id": 1, "idx": 1, "output": "DP-1",
                        "is_active": true, "is_focused": true}]}}),
                    json!({"WindowsChanged": {"windows": [window("first")]}}),
                    json!({"KeyboardLayoutsChanged": {"keyboard_layouts": {"names": ["us"], "current_idx": 0}}}),
                    json!({"OverviewOpenedOrClosed": {"is_open": false}}),
                ] {
                    out.push_str(&format!("{event}\n"));
                }
                if write.write_all(out.as_bytes()).await.is_err() {
                    return;
                }
                let mut batch = String::new();
                for k in 0..count {
                    let title = if k + 1 == count {
                        "last".to_owned()
                    } else {
                        format!("t{k}")
                    };
                    batch.push_str(&format!(
                        "{}\n",
                        json!({"WindowOpenedOrChanged": {"window": window(&title)}})
                    ));
                    if batch.len() > 32 * 1024 || k + 1 == count {
                        if write.write_all(batch.as_bytes()).await.is_err() {
                            return;
                        }
                        batch.clear();
                    }
                }
                // Stay open, quiet, as niri does.
                tokio::time::sleep(Duration::from_secs(3600)).await;
            });
        }
    });
    path
}

#[tokio::test]
async fn requests_are_answered_while_niri_floods_events() {
    within(async {
        let dir = tempfile::tempdir().expect("temp dir");
        let socket = flooding_niri(dir.path(), 300_000).await;
        let options = SpawnOptions {
            env: vec![
                ("NIRI_SOCKET".into(), socket.clone().into()),
                ("SWAYSOCK".into(), "".into()),
                ("I3SOCK".into(), "".into()),
            ],
            timeout: Duration::from_secs(15),
            ..Default::default()
        };
        let plugin = TestPlugin::start(&[env!("CARGO_BIN_EXE_utter-compositor").into()], options)
            .await
            .expect("the plugin starts");
        // During the flood: every request is answered (the bound is generous on purpose).
        for _ in 0..5 {
            let answer = tokio::time::timeout(
                Duration::from_secs(5),
                plugin.request("context.snapshot", json!({})),
            )
            .await
            .expect("context.snapshot answered within 5 s during the flood");
            if let Ok(snapshot) = answer {
                assert_eq!(snapshot["compositor"]["name"], "niri");
            }
            let health = tokio::time::timeout(
                Duration::from_secs(5),
                plugin.request("plugin.health", json!({})),
            )
            .await
            .expect("plugin.health answered within 5 s during the flood")
            .expect("health");
            assert!(health["status"].is_string(), "{health}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // After it: the snapshot shows the last title.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let snapshot = plugin
                .request("context.snapshot", json!({}))
                .await
                .expect("snapshot");
            if snapshot["focused"]["title"] == "last" {
                assert_eq!(snapshot["windows"].as_array().map(Vec::len), Some(1));
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the last title never showed: {snapshot}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
}

/// `focus_app {app}` on the plugin, checked and verified; the window id it focused.
async fn focus_app(plugin: &TestPlugin, app: &str) -> u64 {
    let r = plugin
        .request(
            "action.invoke",
            json!({"op": "focus_app", "args": {"app": app}, "provenance": "user"}),
        )
        .await
        .expect("focus_app");
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["verified"], true, "{r}");
    r["window"]["id"].as_u64().expect("a window id")
}

#[tokio::test]
async fn of_two_windows_the_one_niri_says_was_focused_last_is_chosen_even_after_a_restart() {
    within(async {
        let fake = FakeNiri::start().await;
        // Two foot windows: 11 first in niri's list, 12 focused more recently (its
        // focus_timestamp is later). A plugin that has just started has seen no focus
        // change of its own, and still picks 12.
        let plugin = plugin_for(&fake).await;
        assert_eq!(focus_app(&plugin, "foot").await, 12);
        drop(plugin);

        // By hand: the person focuses window 11, then firefox. niri updates the timestamps
        // (`WindowFocusTimestampChanged`), which the snapshot carries.
        fake.change(|d| {
            let mut events = d
                .apply_action(&json!({"FocusWindow": {"id": 11}}))
                .expect("focus 11");
            events.extend(
                d.apply_action(&json!({"FocusWindow": {"id": 10}}))
                    .expect("focus 10"),
            );
            events
        });
        let plugin = plugin_for(&fake).await;
        let snapshot = plugin
            .request("context.snapshot", json!({}))
            .await
            .expect("snapshot");
        let at = |id: u64| {
            snapshot["windows"]
                .as_array()
                .unwrap()
                .iter()
                .find(|w| w["id"] == id)
                .and_then(|w| w["focused_at"].as_f64())
                .unwrap_or_else(|| panic!("window {id} has no focused_at: {snapshot}"))
        };
        assert!(at(11) > at(12) && at(10) > at(11), "{snapshot}");
        // The restarted plugin picks 11, the foot focused last, although niri lists both.
        assert_eq!(focus_app(&plugin, "foot").await, 11);

        // Events that arrive while it runs move the order too: a timestamp for an unknown
        // window, or none at all, changes nothing and breaks nothing.
        fake.emit(json!({"WindowFocusTimestampChanged": {"id": 999, "focus_timestamp": {"secs": 1, "nanos": 0}}}));
        fake.emit(json!({"WindowFocusTimestampChanged": {"id": 12, "focus_timestamp": null}}));
        fake.emit(json!({"WindowFocusTimestampChanged": {"id": 12, "focus_timestamp": {"secs": "soon"}}}));
        let snapshot = plugin
            .request("context.snapshot", json!({}))
            .await
            .expect("a snapshot after odd events");
        assert_eq!(snapshot["compositor"]["connected"], true, "{snapshot}");
    })
    .await;
}

#[tokio::test]
async fn a_screenshot_is_verified_by_niris_own_report_with_its_path() {
    within(async {
        let fake = FakeNiri::start().await;
        let plugin = plugin_for(&fake).await;
        let r = run(&plugin, json!({"command": "screenshot-screen"})).await;
        assert_eq!(r["verified"], true, "{r}");
        assert_eq!(
            r["path"], "/tmp/Screenshot from fake niri ScreenshotScreen.png",
            "{r}"
        );
        let detail = r["detail"].as_str().unwrap();
        assert!(
            detail.contains("the screenshot was taken") && detail.contains("saved to /tmp/"),
            "{detail}"
        );
        // To the clipboard only: still verified, and it says there is no file.
        let r = run(
            &plugin,
            json!({"command": "screenshot-window", "options": {"write_to_disk": false}}),
        )
        .await;
        assert_eq!(r["verified"], true, "{r}");
        assert_eq!(r["path"], Value::Null, "{r}");
        assert!(
            r["detail"]
                .as_str()
                .unwrap()
                .contains("not saved to a file"),
            "{r}"
        );
        // niri refusing (no output to capture): an error in niri's words, nothing verified.
        fake.refuse("ScreenshotScreen", "no outputs to screenshot");
        let e = invoke(&plugin, json!({"command": "screenshot-screen"}), false)
            .await
            .expect_err("refused");
        assert!(
            e.message.contains("no outputs to screenshot"),
            "{}",
            e.message
        );
        fake.allow("ScreenshotScreen");
        // A path with control characters is not passed on.
        fake.emit(json!({"ScreenshotCaptured": {"path": "/tmp/a\u{1b}[2Jb.png"}}));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        let snapshot = loop {
            let snapshot = plugin
                .request("context.snapshot", json!({}))
                .await
                .expect("snapshot");
            if snapshot["screenshot"]["count"] == 3 {
                break snapshot;
            }
            assert!(tokio::time::Instant::now() < deadline, "{snapshot}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(snapshot["screenshot"]["path"].is_null(), "{snapshot}");
        // A payload of the wrong shape breaks nothing.
        fake.emit(json!({"ScreenshotCaptured": {"path": 42}}));
        let r = run(&plugin, json!({"command": "screenshot-screen"})).await;
        assert_eq!(r["verified"], true, "{r}");
    })
    .await;
}

#[tokio::test]
async fn a_dead_niri_is_reported_not_served_as_connected() {
    within(async {
        let fake = FakeNiri::start().await;
        let plugin = plugin_for(&fake).await;
        let snapshot = plugin
            .request("context.snapshot", json!({}))
            .await
            .expect("snapshot while niri lives");
        assert_eq!(snapshot["compositor"]["connected"], true, "{snapshot}");
        let socket = fake.socket().display().to_string();
        drop(fake);

        // Within the grace the last state is still served, marked; after it, an error.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let error = loop {
            match plugin.request("context.snapshot", json!({})).await {
                Ok(s) if s["compositor"]["connected"] == false => {}
                Ok(s) => assert_eq!(s["compositor"]["connected"], true),
                Err(e) => break e,
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the snapshot kept being served after niri died"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(error.code, -32000);
        assert!(
            error.message.contains("lost the connection to niri")
                && error.message.contains(&socket),
            "{}",
            error.message
        );
        let health = plugin
            .request("plugin.health", json!({}))
            .await
            .expect("health");
        assert_eq!(health["status"], "degraded", "{health}");
        assert!(
            health["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("reconnecting"),
            "{health}"
        );
        let started = std::time::Instant::now();
        let e = plugin
            .request(
                "action.invoke",
                json!({"op": "focus_app", "args": {"app": "foot"}, "provenance": "user"}),
            )
            .await
            .expect_err("no action on a dead niri");
        assert_eq!(e.code, -32000);
        assert!(e.message.contains("lost the connection"), "{}", e.message);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "it failed slowly"
        );
    })
    .await;
}
