//! The Hyprland client against a fake Hyprland that speaks Hyprland's wire
//! (tests/hyprland_server).

mod hyprland_server;

use hyprland_server::{Desktop, FakeHyprland, Misbehave};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::future::Future;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use utter_compositor::backend::wait_for;
use utter_compositor::hyprland::Hyprland;
use utter_compositor::link::BackendError;
use utter_compositor::model::{Rect, Snapshot};
use utter_protocol::ErrorObject;
use utter_protocol::testkit::{SpawnOptions, TestPlugin};

const WAIT: Duration = Duration::from_secs(5);

/// Fail instead of hanging.
async fn within<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .expect("the test took longer than 30 s")
}

// --- the fake itself

/// One request on `.socket.sock`, as hyprctl sends it: write, then read until the fake
/// closes the connection.
async fn ask(hypr: &FakeHyprland, request: &str) -> String {
    let mut stream = UnixStream::connect(hypr.socket())
        .await
        .expect("connect to .socket.sock");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("write the request");
    let mut reply = vec![];
    stream
        .read_to_end(&mut reply)
        .await
        .expect("read the reply");
    String::from_utf8(reply).expect("a UTF-8 reply")
}

async fn ask_json(hypr: &FakeHyprland, request: &str) -> Value {
    let reply = ask(hypr, request).await;
    serde_json::from_str(&reply).unwrap_or_else(|e| panic!("{request}: not JSON ({e}): {reply}"))
}

/// A `.socket2.sock` connection, registered with the fake before it is returned.
struct Events(tokio::io::Lines<BufReader<UnixStream>>);

impl Events {
    async fn open(hypr: &FakeHyprland) -> Events {
        let before = hypr.event_streams_open();
        let stream = UnixStream::connect(hypr.event_socket())
            .await
            .expect("connect to .socket2.sock");
        assert!(hypr.wait_event_streams(before + 1, WAIT).await);
        Events(BufReader::new(stream).lines())
    }

    async fn next(&mut self) -> String {
        tokio::time::timeout(WAIT, self.0.next_line())
            .await
            .expect("an event within 5 s")
            .expect("read an event")
            .expect("the event stream ended")
    }

    async fn take(&mut self, n: usize) -> Vec<String> {
        let mut lines = vec![];
        for _ in 0..n {
            lines.push(self.next().await);
        }
        lines
    }
}

#[tokio::test]
async fn fake_answers_clients_monitors_and_devices_with_hyprland_fields() {
    within(async {
        let hypr = FakeHyprland::start_with(Desktop::two_monitors_hidpi()).await;
        assert!(hypr.dir().ends_with(format!("hypr/{}", hypr.signature())));
        assert!(hypr.dir().starts_with(hypr.runtime_dir()));

        let clients = ask_json(&hypr, "j/clients").await;
        let clients = clients.as_array().expect("a list of clients");
        assert_eq!(clients.len(), 5);
        let kitty = &clients[0];
        assert_eq!(kitty["address"], "0x55d1c0a2e6b0");
        assert_eq!(kitty["class"], "kitty");
        assert_eq!(kitty["title"], "~");
        assert_eq!(kitty["initialClass"], "kitty");
        assert_eq!(kitty["at"], serde_json::json!([0, 0]));
        assert_eq!(kitty["size"], serde_json::json!([1280, 1440]));
        assert_eq!(
            kitty["workspace"],
            serde_json::json!({"id": 1, "name": "1"})
        );
        assert_eq!(kitty["monitor"], 0);
        assert_eq!(kitty["fullscreen"], 0, "an integer state, not a bool");
        assert_eq!(kitty["floating"], false);
        assert_eq!(kitty["mapped"], true);
        assert_eq!(kitty["focusHistoryID"], 0);
        assert_eq!(kitty["pid"], 2101);
        assert_eq!(kitty["grouped"], serde_json::json!([]));
        assert_eq!(kitty["swallowing"], "0x0");
        let pavucontrol = clients
            .iter()
            .find(|c| c["class"] == "pavucontrol")
            .unwrap();
        assert_eq!(pavucontrol["floating"], true);
        assert_eq!(pavucontrol["workspace"]["id"], 2);

        // The reply is the whole answer, then the fake closes: a second read gets nothing.
        let text = ask(&hypr, "clients").await;
        assert!(
            text.starts_with("Window 55d1c0a2e6b0 -> ~:\n\tmapped: 1\n"),
            "{text}"
        );

        // Monitors: width/height in physical pixels, the logical size is width/scale.
        let monitors = ask_json(&hypr, "j/monitors").await;
        let dp = &monitors[0];
        assert_eq!(dp["name"], "DP-1");
        assert_eq!(
            (dp["width"].as_u64(), dp["height"].as_u64()),
            (Some(3840), Some(2160))
        );
        assert_eq!(dp["scale"], 1.5);
        assert_eq!(dp["focused"], true);
        assert_eq!(
            dp["activeWorkspace"],
            serde_json::json!({"id": 1, "name": "1"})
        );
        assert_eq!(
            dp["specialWorkspace"],
            serde_json::json!({"id": 0, "name": ""})
        );
        assert_eq!(monitors[1]["x"], 2560);

        let workspaces = ask_json(&hypr, "j/workspaces").await;
        let ws3 = &workspaces[2];
        assert_eq!(ws3["monitor"], "HDMI-A-1");
        assert_eq!(ws3["monitorID"], 1);
        assert_eq!(ws3["windows"], 1);
        assert_eq!(ws3["lastwindow"], "0x55d1c0a41c90");
        assert_eq!(ws3["lastwindowtitle"], "htop");

        let active = ask_json(&hypr, "j/activewindow").await;
        assert_eq!(active["class"], "kitty");
        let devices = ask_json(&hypr, "j/devices").await;
        let main = &devices["keyboards"][0];
        assert_eq!(main["name"], "at-translated-set-2-keyboard");
        assert_eq!(main["active_keymap"], "English (US)");
        assert_eq!(main["main"], true);
        assert!(devices["mice"].is_array());
        let version = ask_json(&hypr, "j/version").await;
        assert_eq!(version["tag"], "v0.50.1");
        assert_eq!(version["version"], "0.50.1");

        assert_eq!(hypr.requests()[0], "j/clients");
    })
    .await;
}

#[tokio::test]
async fn a_dispatch_changes_the_desktop_and_the_events_follow() {
    within(async {
        let hypr = FakeHyprland::start().await;
        let mut events = Events::open(&hypr).await;

        assert_eq!(ask(&hypr, "/dispatch workspace 2").await, "ok");
        assert_eq!(
            events.take(4).await,
            [
                "activewindow>>org.gnome.Nautilus,Home",
                "activewindowv2>>55d1c0a35a80",
                "workspace>>2",
                "workspacev2>>2,2",
            ]
        );
        assert_eq!(ask_json(&hypr, "j/activeworkspace").await["id"], 2);

        // A workspace that does not exist is created; leaving it empty destroys it.
        assert_eq!(ask(&hypr, "dispatch workspace 4").await, "ok");
        assert_eq!(
            events.take(6).await,
            [
                "createworkspace>>4",
                "createworkspacev2>>4,4",
                "activewindow>>,",
                "activewindowv2>>",
                "workspace>>4",
                "workspacev2>>4,4",
            ]
        );
        assert_eq!(ask(&hypr, "j/activewindow").await, "{}");
        assert_eq!(ask(&hypr, "dispatch workspace 1").await, "ok");
        assert_eq!(
            events.take(6).await,
            [
                "activewindow>>kitty,~",
                "activewindowv2>>55d1c0a2e6b0",
                "workspace>>1",
                "workspacev2>>1,1",
                "destroyworkspace>>4",
                "destroyworkspacev2>>4,4",
            ]
        );

        // Focusing the window on the other monitor: focusedmon, no workspace event.
        assert_eq!(
            ask(&hypr, "dispatch focuswindow class:^(foot)$").await,
            "ok"
        );
        assert_eq!(
            events.take(4).await,
            [
                "focusedmon>>HDMI-A-1,3",
                "focusedmonv2>>HDMI-A-1,3",
                "activewindow>>foot,htop",
                "activewindowv2>>55d1c0a41c90",
            ]
        );
        // Moving it, and the events Hyprland sends for that.
        assert_eq!(
            ask(
                &hypr,
                "dispatch movetoworkspacesilent 2,address:0x55d1c0a41c90"
            )
            .await,
            "ok"
        );
        assert_eq!(
            events.take(4).await,
            [
                "movewindow>>55d1c0a41c90,2",
                "movewindowv2>>55d1c0a41c90,2,2",
                "activewindow>>,",
                "activewindowv2>>",
            ]
        );
        let d = hypr.desktop();
        assert_eq!(d.window(0x55d1c0a41c90).unwrap().workspace, 2);
        assert_eq!(d.focused_window, None);
        assert_eq!(hypr.dispatches()[0], "workspace 2");

        // An exec opens a window of that program on the focused workspace.
        assert_eq!(
            ask(&hypr, "dispatch exec 'org.gnome.Calculator' --x").await,
            "ok"
        );
        let opened = events.next().await;
        assert!(
            opened.ends_with(",3,org.gnome.Calculator,org.gnome.Calculator"),
            "{opened}"
        );
        assert_eq!(hypr.execs(), ["'org.gnome.Calculator' --x"]);
    })
    .await;
}

#[tokio::test]
async fn flags_come_before_the_first_slash_unless_a_space_does() {
    within(async {
        let hypr = FakeHyprland::start().await;
        assert!(ask(&hypr, "version").await.starts_with("Hyprland 0.50.1"));
        assert_eq!(ask_json(&hypr, "j/version").await["tag"], "v0.50.1");
        // Unknown flag characters are ignored; `j` anywhere before the `/` counts.
        assert_eq!(ask_json(&hypr, "rj/activeworkspace").await["id"], 1);
        // Exact commands take no arguments.
        assert_eq!(ask(&hypr, "j/clients now").await, "unknown request");
        assert_eq!(ask(&hypr, "jclients").await, "unknown request");
        // Here the first `/` follows a space: no flags, the path stays whole.
        assert_eq!(
            ask(&hypr, "dispatch exec /usr/bin/foot --title a/b").await,
            "ok"
        );
        assert_eq!(hypr.execs(), ["/usr/bin/foot --title a/b"]);
        let d = hypr.desktop();
        let foot = d.focused_window().expect("the new window has the focus");
        assert_eq!((foot.class.as_str(), foot.workspace), ("foot", 1));
        // `monitors` takes an argument: `all` includes disabled monitors.
        assert_eq!(ask(&hypr, "monitors a b").await, "too many args");
        assert_eq!(
            ask_json(&hypr, "j/monitors all")
                .await
                .as_array()
                .unwrap()
                .len(),
            2
        );
    })
    .await;
}

#[tokio::test]
async fn refused_unknown_and_failing_dispatchers_answer_their_text() {
    within(async {
        let hypr = FakeHyprland::start().await;
        let firefox = "address:0x55d1c0a31f40";

        hypr.refuse("closewindow", "closeWindow: no window found");
        assert_eq!(
            ask(&hypr, &format!("dispatch closewindow {firefox}")).await,
            "closeWindow: no window found"
        );
        assert!(hypr.desktop().window(0x55d1c0a31f40).is_some());
        hypr.allow("closewindow");
        let mut events = Events::open(&hypr).await;
        assert_eq!(
            ask(&hypr, &format!("dispatch closewindow {firefox}")).await,
            "ok"
        );
        assert_eq!(events.next().await, "closewindow>>55d1c0a31f40");
        assert!(hypr.desktop().window(0x55d1c0a31f40).is_none());

        assert_eq!(
            ask(&hypr, "dispatch frobnicate 1").await,
            "Invalid dispatcher"
        );
        assert_eq!(ask(&hypr, "dispatch").await, "Invalid dispatcher");
        assert_eq!(
            ask(&hypr, "dispatch workspace nosuchname").await,
            "Error in changeworkspace, invalid value"
        );
        assert_eq!(
            ask(&hypr, "dispatch workspace 1").await,
            "Previous workspace doesn't exist"
        );
        assert_eq!(
            ask(&hypr, "dispatch focuswindow title:^nothing$").await,
            "No such window found"
        );
        // A documented dispatcher the fake does not model is recorded and answered ok.
        assert_eq!(ask(&hypr, "dispatch splitratio 0.1").await, "ok");
        assert_eq!(
            hypr.dispatches(),
            [
                "closewindow address:0x55d1c0a31f40",
                "closewindow address:0x55d1c0a31f40",
                "frobnicate 1",
                "dispatch",
                "workspace nosuchname",
                "workspace 1",
                "focuswindow title:^nothing$",
                "splitratio 0.1",
            ]
        );

        // switchxkblayout is a command, not a dispatcher.
        assert_eq!(ask(&hypr, "switchxkblayout current next").await, "ok");
        assert_eq!(
            events.next().await,
            "activelayout>>at-translated-set-2-keyboard,German"
        );
        assert_eq!(
            ask(&hypr, "switchxkblayout current 7").await,
            "layout idx out of range of 2"
        );
        assert_eq!(
            ask(&hypr, "switchxkblayout nosuch next").await,
            "device not found"
        );
    })
    .await;
}

#[tokio::test]
async fn a_batch_is_split_at_semicolons_and_the_replies_joined() {
    within(async {
        let hypr = FakeHyprland::start().await;
        let reply = ask(
            &hypr,
            "[[BATCH]]dispatch workspace 2; j/activeworkspace ;dispatch bogus;",
        )
        .await;
        let parts: Vec<&str> = reply.split("\n\n\n").collect();
        assert_eq!(parts.len(), 3, "{reply:?}");
        assert_eq!(parts[0], "ok");
        let ws: Value = serde_json::from_str(parts[1]).expect("JSON for the second part");
        assert_eq!(ws["id"], 2);
        assert_eq!(parts[2], "Invalid dispatcher");
        assert_eq!(
            hypr.commands(),
            [
                "[[BATCH]]dispatch workspace 2; j/activeworkspace ;dispatch bogus;",
                "dispatch workspace 2",
                "j/activeworkspace",
                "dispatch bogus",
            ]
        );

        // A `;` inside exec rules does not split.
        let reply = ask(
            &hypr,
            "[[BATCH]]dispatch exec [workspace 5 silent; float] kitty;dispatch focuswindow class:^(kitty)$",
        )
        .await;
        assert_eq!(reply, "ok\n\n\nok");
        let d = hypr.desktop();
        let opened = d.windows.last().unwrap();
        assert_eq!((opened.workspace, opened.floating), (5, true));
        assert_eq!(d.focused_window().unwrap().class, "kitty");
        assert_eq!(d.focused_window().unwrap().workspace, 1);
    })
    .await;
}

#[tokio::test]
async fn hostile_titles_are_written_raw_into_events() {
    within(async {
        let hypr = FakeHyprland::start().await;
        let mut events = Events::open(&hypr).await;
        let kitty = 0x55d1c0a2e6b0;
        let title = "a,b>>c\nd";
        hypr.change(|d| d.set_title(kitty, title));
        assert_eq!(
            events.take(4).await,
            [
                "windowtitle>>55d1c0a2e6b0",
                // Hyprland writes the data raw, a newline as a space.
                "windowtitlev2>>55d1c0a2e6b0,a,b>>c d",
                "activewindow>>kitty,a,b>>c d",
                "activewindowv2>>55d1c0a2e6b0",
            ]
        );
        // JSON carries the title exactly.
        assert_eq!(ask_json(&hypr, "j/activewindow").await["title"], title);

        // An older Hyprland wrote the newline raw, splitting the event.
        hypr.change(|d| {
            d.raw_newlines_in_events = true;
            d.set_title(kitty, "x\ny")
        });
        assert_eq!(
            events.take(3).await,
            [
                "windowtitle>>55d1c0a2e6b0",
                "windowtitlev2>>55d1c0a2e6b0,x",
                "y"
            ]
        );
    })
    .await;
}

// --- the client and the plugin against the fake

const KITTY: u64 = 0x55d1c0a2e6b0;
const FIREFOX: u64 = 0x55d1c0a31f40;

async fn until(client: &Hyprland, what: &str, done: impl FnMut(&Snapshot) -> bool) -> Snapshot {
    let mut state = client.state();
    match wait_for(&mut state, WAIT, done).await {
        Some(snapshot) => snapshot,
        None => panic!(
            "{what}: not seen within {WAIT:?}; last: {:#?}",
            *state.borrow()
        ),
    }
}

#[tokio::test]
async fn the_client_reads_the_desktop_and_follows_its_events() {
    within(async {
        let fake = FakeHyprland::start().await;
        let client = Hyprland::connect(fake.dir().to_path_buf())
            .await
            .expect("connects to the fake Hyprland");
        assert_eq!(client.version().as_deref(), Some("0.50.1"));
        let s = client.state().borrow().clone();
        assert_eq!(s.compositor.name, "hyprland");
        assert!(s.compositor.connected);
        assert_eq!(s.windows.len(), 5, "{:#?}", s.windows);
        let kitty = s.focused.clone().expect("a focused window");
        assert_eq!(kitty.id, KITTY);
        assert_eq!(kitty.app_id.as_deref(), Some("kitty"));
        assert_eq!(kitty.workspace.as_deref(), Some("1"));
        assert_eq!(kitty.output.as_deref(), Some("DP-1"));
        assert_eq!(kitty.floating, Some(false));
        assert_eq!(kitty.fullscreen, Some(false));
        assert_eq!(
            kitty.rect,
            Some(Rect {
                x: 0,
                y: 0,
                width: 1280,
                height: 1440
            })
        );
        let firefox = s.window(FIREFOX).expect("firefox");
        assert_eq!(firefox.visible, Some(true));
        assert!(kitty.focused_at > firefox.focused_at, "focus history order");
        let nautilus = s
            .windows
            .iter()
            .find(|w| w.app_id.as_deref() == Some("org.gnome.Nautilus"))
            .unwrap();
        assert_eq!(nautilus.visible, Some(false), "on a hidden workspace");
        let pavucontrol = s
            .windows
            .iter()
            .find(|w| w.app_id.as_deref() == Some("pavucontrol"))
            .unwrap();
        assert_eq!(pavucontrol.floating, Some(true));
        let ws = |index: i64| s.workspaces.iter().find(|w| w.index == Some(index)).unwrap();
        assert!(ws(1).focused && ws(1).active);
        assert!(!ws(2).active);
        assert!(ws(3).active && !ws(3).focused);
        assert_eq!(ws(3).output.as_deref(), Some("HDMI-A-1"));
        assert_eq!(s.outputs.len(), 2);
        assert!(s.outputs[0].focused);
        assert_eq!(
            (s.outputs[1].x, s.outputs[1].width, s.outputs[1].height),
            (Some(2560), Some(1920), Some(1080))
        );
        assert_eq!(s.keyboard_layout.as_deref(), Some("English (US)"));

        // A window opened by hand, with a title no event line can carry as it is.
        let hostile = "a, b>>openwindow>>0,1,evil,x\nline two \u{202e}";
        fake.change(|d| d.open_window("gimp", hostile).1);
        let s = until(&client, "the new window", |s| {
            s.windows
                .iter()
                .any(|w| w.app_id.as_deref() == Some("gimp"))
        })
        .await;
        let gimp = s
            .windows
            .iter()
            .find(|w| w.app_id.as_deref() == Some("gimp"))
            .unwrap();
        assert_eq!(gimp.title.as_deref(), Some(hostile), "read from j/clients, not the event");
        assert_eq!(s.windows.len(), 6, "no window made up from the event's text");

        fake.change(|d| d.switch_layout("all", "next").expect("switch"));
        until(&client, "the layout change", |s| {
            s.keyboard_layout.as_deref() == Some("German")
        })
        .await;

        // A dispatch sent by the client, and its effect seen.
        client
            .command("dispatch workspace 2")
            .await
            .expect("workspace 2");
        until(&client, "workspace 2 focused", |s| {
            s.focused_workspace().and_then(|w| w.index) == Some(2)
        })
        .await;
        let refused = client.command("dispatch frobnicate").await;
        assert!(
            matches!(&refused, Err(BackendError::Refused { message, .. }) if message.contains("Invalid dispatcher")),
            "{refused:?}"
        );
    })
    .await;
}

#[tokio::test]
async fn hidpi_monitors_report_their_logical_size() {
    within(async {
        let fake = FakeHyprland::start_with(Desktop::two_monitors_hidpi()).await;
        let client = Hyprland::connect(fake.dir().to_path_buf())
            .await
            .expect("connects");
        let s = client.state().borrow().clone();
        let dp = &s.outputs[0];
        assert_eq!((dp.width, dp.height), (Some(2560), Some(1440)), "{dp:?}");
    })
    .await;
}

#[tokio::test]
async fn a_lost_event_stream_is_reopened_and_the_state_read_again() {
    within(async {
        let fake = FakeHyprland::start().await;
        let client = Hyprland::connect(fake.dir().to_path_buf())
            .await
            .expect("connects");
        assert!(fake.wait_event_streams(1, WAIT).await);
        fake.misbehave("events", Misbehave::Close);
        fake.drop_connections();
        until(&client, "the loss", |s| !s.compositor.connected).await;
        assert!(!client.link().connected);
        // Changed while nobody listened: no event will tell.
        fake.change(|d| {
            d.open_window("gimp", "untitled");
            Vec::new()
        });
        fake.behave("events");
        let s = until(&client, "the reconnection", |s| {
            s.compositor.connected
                && s.windows
                    .iter()
                    .any(|w| w.app_id.as_deref() == Some("gimp"))
        })
        .await;
        assert_eq!(s.windows.len(), 6);
        assert!(client.link().connected);
    })
    .await;
}

#[tokio::test]
async fn garbage_on_either_socket_is_an_error_not_a_crash() {
    within(async {
        let fake = FakeHyprland::start().await;
        fake.misbehave("clients", Misbehave::Garbage);
        let err = Hyprland::connect(fake.dir().to_path_buf())
            .await
            .expect_err("garbage instead of j/clients");
        assert!(err.to_string().contains("j/clients"), "{err}");
        fake.behave("clients");
        let client = Hyprland::connect(fake.dir().to_path_buf())
            .await
            .expect("connects");
        // Junk and an endless line on the event stream: the stream is dropped and reopened,
        // the snapshot stays readable.
        fake.emit_raw(b"no separator here\n\xff\xfe>>\n");
        fake.emit_raw(vec![b'x'; 2 * 1024 * 1024]);
        until(&client, "the reconnection after an endless line", |s| {
            s.compositor.connected
        })
        .await;
        assert!(fake.wait_event_streams(1, WAIT).await);
        fake.change(|d| d.open_window("gimp", "after").1);
        until(&client, "an event after the junk", |s| {
            s.windows
                .iter()
                .any(|w| w.app_id.as_deref() == Some("gimp"))
        })
        .await;
        // A silent request socket: the request fails within its bound.
        fake.misbehave("dispatch", Misbehave::Silent);
        let started = std::time::Instant::now();
        let silent = client.command("dispatch workspace 2").await;
        assert!(silent.is_err(), "{silent:?}");
        assert!(started.elapsed() < Duration::from_secs(20));
    })
    .await;
}

/// The plugin binary with Hyprland's variables pointing at the fake (and no other
/// compositor's).
async fn plugin_for(fake: &FakeHyprland) -> TestPlugin {
    let mut env: Vec<(OsString, OsString)> = fake
        .env()
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    for name in ["NIRI_SOCKET", "SWAYSOCK", "I3SOCK"] {
        env.push((name.into(), "".into()));
    }
    let options = SpawnOptions {
        env,
        timeout: Duration::from_secs(15),
        ..Default::default()
    };
    TestPlugin::start(&[env!("CARGO_BIN_EXE_utter-compositor").into()], options)
        .await
        .expect("the plugin starts and passes the handshake")
}

async fn invoke(plugin: &TestPlugin, op: &str, args: Value) -> Result<Value, ErrorObject> {
    plugin
        .request(
            "action.invoke",
            json!({"op": op, "args": args, "provenance": "user"}),
        )
        .await
}

async fn run(plugin: &TestPlugin, args: Value) -> Value {
    match invoke(plugin, "niri", args.clone()).await {
        Ok(v) => {
            assert_eq!(v["ok"], true, "{args}: {v}");
            v
        }
        Err(e) => panic!("{args} failed: {e}"),
    }
}

fn last_dispatch(fake: &FakeHyprland) -> String {
    fake.dispatches().last().cloned().unwrap_or_default()
}

#[tokio::test]
async fn actions_are_sent_as_dispatchers_and_verified() {
    within(async {
        let fake = FakeHyprland::start().await;
        let plugin = plugin_for(&fake).await;
        let context = plugin
            .request("context.snapshot", json!({}))
            .await
            .expect("context");
        assert_eq!(context["compositor"]["name"], "hyprland", "{context}");
        assert_eq!(context["focused"]["app_id"], "kitty", "{context}");
        let health = plugin.request("plugin.health", json!({})).await.unwrap();
        assert_eq!(health["status"], "ok", "{health}");

        let r = run(&plugin, json!({"command": "focus-workspace", "args": [2]})).await;
        assert_eq!(last_dispatch(&fake), "workspace 2");
        assert_eq!(r["sent"], "dispatch workspace 2");
        assert_eq!(r["compositor"], "hyprland");
        assert_eq!(r["verified"], true, "{r}");

        let r = run(&plugin, json!({"command": "focus-workspace", "args": ["chat"]})).await;
        assert_eq!(last_dispatch(&fake), "workspace name:chat");
        assert_eq!(r["verified"], true, "{r}");

        run(&plugin, json!({"command": "focus-workspace", "args": [1]})).await;
        let r = run(
            &plugin,
            json!({"command": "move-window-to-workspace", "args": [3], "options": {"focus": false}}),
        )
        .await;
        assert_eq!(last_dispatch(&fake), "movetoworkspacesilent 3");
        assert_eq!(r["verified"], true, "{r}");
        assert_eq!(
            fake.desktop().window(KITTY).unwrap().workspace,
            3,
            "kitty moved"
        );

        // Fullscreen: the toggle only when the window is in the other state.
        let r = run(
            &plugin,
            json!({"command": "fullscreen-window", "options": {"state": "on"}}),
        )
        .await;
        assert_eq!(last_dispatch(&fake), "fullscreen 0");
        assert_eq!(r["verified"], true, "{r}");
        let sent_before = fake.dispatches().len();
        let r = run(
            &plugin,
            json!({"command": "fullscreen-window", "options": {"state": "on"}}),
        )
        .await;
        assert_eq!(r["sent"], Value::Null, "{r}");
        assert_eq!(fake.dispatches().len(), sent_before, "nothing sent");
        let r = run(
            &plugin,
            json!({"command": "fullscreen-window", "options": {"state": "off"}}),
        )
        .await;
        assert_eq!(r["verified"], true, "{r}");

        let r = run(&plugin, json!({"command": "toggle-window-floating"})).await;
        assert_eq!(last_dispatch(&fake), "togglefloating");
        assert_eq!(r["verified"], true, "{r}");
        let r = run(&plugin, json!({"command": "move-window-to-tiling"})).await;
        assert_eq!(last_dispatch(&fake), "settiled");
        assert_eq!(r["verified"], true, "{r}");

        // Applications by window.
        let r = invoke(&plugin, "focus_app", json!({"app": "firefox"}))
            .await
            .expect("focus firefox");
        assert_eq!(last_dispatch(&fake), "focuswindow address:0x55d1c0a31f40");
        assert_eq!(r["verified"], true, "{r}");
        let r = invoke(&plugin, "close_app", json!({"app": "firefox"}))
            .await
            .expect("close firefox");
        assert_eq!(last_dispatch(&fake), "closewindow address:0x55d1c0a31f40");
        assert_eq!(r["verified"], true, "{r}");
        assert!(fake.desktop().window(FIREFOX).is_none());

        // A program started through exec, each word quoted for its shell.
        let r = run(&plugin, json!({"command": "spawn", "args": ["foot", "--title", "it's"]})).await;
        assert_eq!(
            fake.execs().last().map(String::as_str),
            Some(r"exec 'foot' '--title' 'it'\''s'")
        );
        assert_eq!(r["verified"], true, "{r}");
        assert_eq!(r["window"]["app_id"], "foot", "{r}");

        let r = run(&plugin, json!({"command": "switch-layout", "args": ["next"]})).await;
        assert!(
            fake.commands()
                .iter()
                .any(|c| c == "/switchxkblayout all next"),
            "{:?}",
            fake.commands()
        );
        assert_eq!(r["verified"], true, "{r}");

        // What Hyprland has no dispatcher for: a clear error, with a near one where known.
        let e = invoke(&plugin, "niri", json!({"command": "toggle-overview"}))
            .await
            .expect_err("no overview");
        assert!(e.message.contains("Hyprland has no dispatcher doing toggle-overview"), "{e}");
        assert_eq!(e.data.as_ref().unwrap()["compositor"], "hyprland");
        let e = invoke(&plugin, "niri", json!({"command": "center-column"}))
            .await
            .expect_err("no columns");
        assert!(e.message.contains("try center-window"), "{e}");
        let e = invoke(&plugin, "niri", json!({"command": "set-column-width", "args": ["50%"]}))
            .await
            .expect_err("an exact width");
        assert_eq!(e.code, -32602, "{e}");
        assert!(e.message.contains("both sides"), "{e}");

        // Hyprland's own refusal, in its words.
        fake.refuse("workspace", "workspace refused by the test");
        let e = invoke(&plugin, "niri", json!({"command": "focus-workspace", "args": [2]}))
            .await
            .expect_err("refused");
        assert!(e.message.contains("workspace refused by the test"), "{e}");
    })
    .await;
}

#[tokio::test]
async fn hostile_arguments_and_titles_never_make_a_second_command() {
    within(async {
        let fake = FakeHyprland::start().await;
        let plugin = plugin_for(&fake).await;
        let before = fake.dispatches().len();
        // Separators and substitutions stay inside one single-quoted word of exec's shell.
        run(
            &plugin,
            json!({"command": "spawn", "args": ["true", "; dispatch exit", "$(id)", "[[BATCH]]x;y", "a'b"]}),
        )
        .await;
        assert_eq!(
            fake.execs().last().map(String::as_str),
            Some(r"exec 'true' '; dispatch exit' '$(id)' '[[BATCH]]x;y' 'a'\''b'")
        );
        assert_eq!(fake.dispatches().len(), before + 1, "{:?}", fake.dispatches());
        run(
            &plugin,
            json!({"command": "spawn-sh", "args": ["[workspace 9 silent] true; echo '$HOME'"]}),
        )
        .await;
        assert_eq!(
            fake.execs().last().map(String::as_str),
            Some(r"sh -c '[workspace 9 silent] true; echo '\''$HOME'\'''"),
            "exec's window rules cannot be smuggled in"
        );
        // A newline would end the request: refused before anything is sent.
        let sent = fake.requests().len();
        for args in [
            json!({"command": "spawn", "args": ["foot", "a\ndispatch exit"]}),
            json!({"command": "focus-workspace", "args": ["chat,address:0x1"]}),
            json!({"command": "focus-workspace", "args": ["a;b"]}),
            json!({"command": "focus-monitor", "args": ["DP-1\nexit"]}),
        ] {
            let e = invoke(&plugin, "niri", args.clone())
                .await
                .expect_err("refused");
            assert_eq!(e.code, -32602, "{args}: {e}");
        }
        assert!(
            fake.requests()[sent..].iter().all(|r| !r.starts_with("/dispatch")),
            "{:?}",
            &fake.requests()[sent..]
        );
        assert!(
            fake.requests().iter().all(|r| !r.contains("[[BATCH]]")
                || r.starts_with("/dispatch exec")),
            "{:?}",
            fake.requests()
        );
        assert!(fake.requests().iter().all(|r| r.starts_with("j/") || r.starts_with('/')));

        // Hostile titles: read, shown, never acted on.
        fake.change(|d| {
            d.set_title(
                KITTY,
                "\u{1b}[2J x>>closewindow>>55d1c0a31f40\ndispatch exit \"; rm -rf ~",
            )
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        let context = plugin
            .request("context.snapshot", json!({}))
            .await
            .expect("context");
        assert_eq!(context["provenance"]["title"], "title");
        assert!(fake.desktop().window(FIREFOX).is_some(), "nothing closed");
        let r = invoke(&plugin, "focus_app", json!({"app": "firefox"}))
            .await
            .expect("still works");
        assert_eq!(r["ok"], true, "{r}");
    })
    .await;
}

/// Found by a hostile reviewer: Hyprland reads a request in chunks of 1023 bytes until a
/// shorter one, so a request of exactly that length waited (Hyprland frozen) until the
/// client gave up, and was reported failed although it ran; a maximized window (state 1)
/// counted as fullscreen; a reply that could not be read left the snapshot stale while it
/// still said connected.
#[tokio::test]
async fn chunk_sized_requests_maximized_windows_and_unreadable_replies() {
    within(async {
        let fake = FakeHyprland::start().await;
        let plugin = plugin_for(&fake).await;
        // `/dispatch exec exec 'sh' '<x…>'` of exactly 1023 bytes.
        let fixed = "/dispatch exec exec 'sh' ''".len();
        let arg = "x".repeat(1023 - fixed);
        let started = std::time::Instant::now();
        let r = run(&plugin, json!({"command": "spawn", "args": ["sh", arg]})).await;
        assert_eq!(r["verified"], true, "{r}");
        assert!(
            fake.requests().iter().any(|q| q.len() == 1023),
            "the request was 1023 bytes"
        );
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "not left waiting: {:?}",
            started.elapsed()
        );

        run(&plugin, json!({"command": "maximize-column"})).await;
        assert_eq!(last_dispatch(&fake), "fullscreen 1");
        let r = run(
            &plugin,
            json!({"command": "fullscreen-window", "options": {"state": "on"}}),
        )
        .await;
        assert_eq!(last_dispatch(&fake), "fullscreen 0", "{r}");
        assert_ne!(
            r["sent"],
            Value::Null,
            "a maximized window is not fullscreen: {r}"
        );

        // An unreadable reply: the snapshot is said to be stale, then fresh again.
        fake.misbehave("clients", Misbehave::Garbage);
        fake.change(|d| d.dispatch("workspace", "2").expect("workspace 2"));
        let mut stale = false;
        for _ in 0..100 {
            let health = plugin.request("plugin.health", json!({})).await.unwrap();
            if health["status"] == "degraded" {
                assert!(
                    health["detail"]
                        .as_str()
                        .unwrap_or_default()
                        .contains("j/clients"),
                    "{health}"
                );
                stale = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(stale, "a failed re-read is not hidden");
        let e = invoke(
            &plugin,
            "niri",
            json!({"command": "focus-workspace", "args": [3]}),
        )
        .await
        .expect_err("no action on a stale view");
        assert!(e.message.contains("re-reading"), "{e}");
        fake.behave("clients");
        fake.change(|d| d.dispatch("workspace", "1").expect("workspace 1"));
        let mut fresh = false;
        for _ in 0..100 {
            let context = plugin.request("context.snapshot", json!({})).await;
            if let Ok(c) = context {
                if c["compositor"]["connected"] == true
                    && c["workspaces"]
                        .as_array()
                        .is_some_and(|w| w.iter().any(|w| w["index"] == 1 && w["focused"] == true))
                {
                    fresh = true;
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(fresh, "connected and current again once replies read");
    })
    .await;
}
