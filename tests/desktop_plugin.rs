//! The desktop action plugin (`utter-desktop`) driven as the runner drives it: a real
//! process over stdio, real programs started from desktop entries, real `xdg-open`, a real
//! `mpv` with the mpv-mpris script on a private `dbus-daemon`, and a stand-in portal
//! frontend on that bus (no xdg-desktop-portal backend can run headless).
//!
//! Debian packages these tests need: dbus-daemon, xdg-utils, mpv, mpv-mpris, sox.

use crate::common;

use common::{DbusSession, MPV_BUS_NAME, Mpris, Mpv, PluginProcess, Sandbox, bin, wait_for};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use utter_protocol::ErrorObject;
use utter_protocol::serde_json::{Value, json};
use zbus::zvariant::{OwnedObjectPath, OwnedValue};

/// Start `utter-desktop` in the sandbox; `bus` as for [`Sandbox::env`].
async fn start_plugin(sb: &Sandbox, bus: Option<&str>) -> PluginProcess {
    PluginProcess::start(&bin("utter-desktop"), &[], &sb.env(bus))
        .await
        .0
}

async fn invoke(
    plugin: &PluginProcess,
    op: &str,
    args: Value,
    dry_run: bool,
) -> Result<Value, ErrorObject> {
    plugin
        .call(
            "action.invoke",
            json!({"op": op, "args": args, "provenance": "user", "dry_run": dry_run}),
        )
        .await
}

fn expect_ok(result: Result<Value, ErrorObject>, what: &str) -> Value {
    match result {
        Ok(v) => {
            assert_eq!(v["ok"], true, "{what}: {v}");
            v
        }
        Err(e) => panic!("{what} failed: {e}"),
    }
}

fn expect_err(result: Result<Value, ErrorObject>, what: &str) -> ErrorObject {
    match result {
        Ok(v) => panic!("{what} should fail, got {v}"),
        Err(e) => e,
    }
}

/// Zombie children of `pid` (scanning /proc: state `Z`, parent `pid`).
fn zombie_children(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
                return false;
            };
            // After "pid (comm) ": state, ppid, ...
            let Some((_, rest)) = stat.rsplit_once(") ") else {
                return false;
            };
            let mut fields = rest.split(' ');
            let state = fields.next();
            let ppid = fields.next().and_then(|p| p.parse::<u32>().ok());
            state == Some("Z") && ppid == Some(pid)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// a) launch_app

#[tokio::test]
async fn launch_app_expands_exec_and_starts_the_program_detached() {
    let sb = Sandbox::new();
    let workdir = sb.path("workdir");
    std::fs::create_dir_all(&workdir).expect("workdir");
    // %c is the German Name (LANG=de_DE.UTF-8); %k is this file; %i gives `--icon
    // marker-icon`; %U and the deprecated %d vanish. The Keywords line holds the list
    // escape `\;`, which the plugin must not trip over.
    let app = sb.install_marker_app(
        "marker-writer.desktop",
        "Marker Writer",
        r#"%c "two words" "quote\\"inside" "100%%" %k %i %U %d"#,
        &format!(
            "Name[de]=Markierer\nIcon=marker-icon\nKeywords=marker\\;test;\nPath={}\n\n\
             [Desktop Action other]\nName=Other\nExec=/bin/false\n",
            workdir.display()
        ),
    );
    let (entry, marker) = (&app.entry, &app.program.marker);
    // The Exec line as it sits in the file: `\\` is the string-level escape for one
    // backslash, so `\\"` is the quoting escape `\"`, `\\$` is `\$` and `\\\\` is `\\`.
    // `%%` is a literal percent.
    let exec = format!(
        r#"/bin/sh -c "here=\\$(pwd); printf '%%s\\\\n' \\"\\$here\\" \\"\\$0\\" \\"\\$@\\" > '{m}.tmp' && mv '{m}.tmp' '{m}'" marker-writer %c "two words" "quote\\"inside" "100%%" %k %i %U %d"#,
        m = marker.display()
    );
    let written_entry = std::fs::read_to_string(entry).expect("read the entry");
    assert!(
        written_entry.lines().any(|l| l == format!("Exec={exec}")),
        "{written_entry}"
    );
    let script = format!(
        "here=$(pwd); printf '%s\\n' \"$here\" \"$0\" \"$@\" > '{m}.tmp' && mv '{m}.tmp' '{m}'",
        m = marker.display()
    );
    let entry_str = entry.display().to_string();
    let expected_argv = json!([
        "/bin/sh",
        "-c",
        script,
        "marker-writer",
        "Markierer",
        "two words",
        "quote\"inside",
        "100%",
        entry_str,
        "--icon",
        "marker-icon"
    ]);

    let plugin = start_plugin(&sb, None).await;

    // Dry run: the full argv, nothing started.
    let dry = expect_ok(
        invoke(
            &plugin,
            "launch_app",
            json!({"app_id": "marker-writer"}),
            true,
        )
        .await,
        "dry launch_app",
    );
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["argv"], expected_argv);
    assert_eq!(dry["entry"], entry_str.as_str());
    assert!(
        dry["detail"]
            .as_str()
            .unwrap_or("")
            .contains("would start Markierer"),
        "{dry}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!marker.exists(), "a dry run must not start anything");

    // For real (a trailing .desktop in the id is accepted).
    let done = expect_ok(
        invoke(
            &plugin,
            "launch_app",
            json!({"app_id": "marker-writer.desktop", "name": "marker writer"}),
            false,
        )
        .await,
        "launch_app",
    );
    assert_eq!(done["dry_run"], false);
    assert_eq!(done["argv"], expected_argv);
    assert!(done["pid"].as_u64().is_some(), "{done}");
    assert!(
        wait_for(Duration::from_secs(10), || marker.exists()).await,
        "the launched program never wrote {}",
        marker.display()
    );
    let written = std::fs::read_to_string(marker).expect("read marker");
    let workdir_real = std::fs::canonicalize(&workdir).expect("canonical workdir");
    let expected_lines = [
        workdir_real.display().to_string(),
        "marker-writer".to_owned(),
        "Markierer".to_owned(),
        "two words".to_owned(),
        "quote\"inside".to_owned(),
        "100%".to_owned(),
        entry_str.clone(),
        "--icon".to_owned(),
        "marker-icon".to_owned(),
    ];
    assert_eq!(written.lines().collect::<Vec<_>>(), expected_lines);

    // The plugin reaps what it started: no zombie child stays behind.
    let plugin_pid = plugin.child.id().expect("plugin pid");
    assert!(
        wait_for(Duration::from_secs(5), || zombie_children(plugin_pid)
            .is_empty())
        .await,
        "zombie children of the plugin: {:?}",
        zombie_children(plugin_pid)
    );
}

#[tokio::test]
async fn launch_app_refuses_what_it_cannot_run() {
    let sb = Sandbox::new();
    sb.write(
        "data/applications/needs-term.desktop",
        "[Desktop Entry]\nType=Application\nName=Top\nExec=top\nTerminal=true\n",
    );
    sb.write(
        "data/applications/bad-exec.desktop",
        "[Desktop Entry]\nType=Application\nName=Bad\nExec=app %x\n",
    );
    sb.write(
        "data/applications/gone.desktop",
        "[Desktop Entry]\nType=Application\nName=Gone\nExec=/no/such/program-utter\n",
    );
    std::fs::create_dir_all(sb.path("data/applications/vendor")).expect("vendor dir");
    sb.write(
        "data/applications/vendor/sub.desktop",
        "[Desktop Entry]\nType=Application\nName=Sub\nExec=/bin/true %f\n",
    );
    let plugin = start_plugin(&sb, None).await;

    let e = expect_err(
        invoke(
            &plugin,
            "launch_app",
            json!({"app_id": "needs-term"}),
            false,
        )
        .await,
        "Terminal=true",
    );
    assert_eq!(e.code, -32000);
    assert!(
        e.message.contains("needs a terminal; not supported yet"),
        "{}",
        e.message
    );

    let e = expect_err(
        invoke(&plugin, "launch_app", json!({"app_id": "bad-exec"}), true).await,
        "invalid Exec",
    );
    assert_eq!(e.code, -32602);
    assert!(e.message.contains("bad-exec.desktop"), "{}", e.message);
    assert!(e.message.contains("%x"), "{}", e.message);

    let e = expect_err(
        invoke(&plugin, "launch_app", json!({"app_id": "gone"}), true).await,
        "missing program",
    );
    assert_eq!(e.code, -32000);
    assert!(
        e.message.contains("/no/such/program-utter"),
        "{}",
        e.message
    );

    let e = expect_err(
        invoke(
            &plugin,
            "launch_app",
            json!({"app_id": "no-such-app"}),
            false,
        )
        .await,
        "unknown id",
    );
    assert_eq!(e.code, -32000);
    assert!(
        e.message
            .contains("no desktop entry with id no-such-app in"),
        "{}",
        e.message
    );
    assert!(
        e.message
            .contains(&sb.path("data/applications").display().to_string()),
        "{}",
        e.message
    );

    // A file in a subdirectory has the id vendor-sub.
    let found = expect_ok(
        invoke(&plugin, "launch_app", json!({"app_id": "vendor-sub"}), true).await,
        "subdirectory id",
    );
    assert_eq!(found["argv"], json!(["/bin/true"]));
}

// ---------------------------------------------------------------------------------------
// b) open_url without a session bus: xdg-open

/// With nothing set to open a scheme, a dry run is a failed step, as the real run would be,
/// saying how to set a handler, instead of promising to open the URL.
#[tokio::test]
async fn a_dry_run_fails_when_no_application_opens_the_url() {
    let sb = Sandbox::new();
    let plugin = start_plugin(&sb, None).await;
    for url in ["https://www.youtube.com", "mailto:someone@example.org"] {
        let scheme = url.split(':').next().unwrap();
        let reply = invoke(&plugin, "open_url", json!({"url": url}), true)
            .await
            .expect("the dry run answers");
        assert_eq!(
            reply["ok"], false,
            "no handler: the step would fail: {reply}"
        );
        assert!(reply["handler"].is_null(), "{reply}");
        assert_eq!(reply["error"]["code"], -32000, "{reply}");
        let message = reply["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(&format!("no application is set to open {scheme} URLs"))
                && message.contains(&format!(
                    "xdg-mime default APP.desktop x-scheme-handler/{scheme}"
                )),
            "{reply}"
        );
        assert!(
            reply["detail"]
                .as_str()
                .is_some_and(|d| d.contains("would fail to open")),
            "{reply}"
        );
    }
}

#[tokio::test]
async fn open_url_without_a_bus_runs_xdg_open() {
    let sb = Sandbox::new();
    let recorded = sb.install_url_recorder();
    let plugin = start_plugin(&sb, None).await;

    let dry = expect_ok(
        invoke(
            &plugin,
            "open_url",
            json!({"url": "https://www.youtube.com"}),
            true,
        )
        .await,
        "dry open_url",
    );
    assert_eq!(dry["via"], "xdg-open");
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["argv"], json!(["xdg-open", "https://www.youtube.com"]));
    assert!(
        dry["handler"]
            .as_str()
            .is_some_and(|h| h.contains("recorder.desktop")),
        "the dry run names the handler: {dry}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!recorded.exists(), "a dry run must not open anything");

    let done = expect_ok(
        invoke(
            &plugin,
            "open_url",
            json!({"url": "https://www.youtube.com"}),
            false,
        )
        .await,
        "open_url",
    );
    assert_eq!(done["via"], "xdg-open", "{done}");
    assert_eq!(done["url"], "https://www.youtube.com");
    assert_eq!(done["exit_status"], 0, "{done}");
    assert!(
        wait_for(Duration::from_secs(10), || recorded.exists()).await,
        "the https handler was never run"
    );
    assert_eq!(
        std::fs::read_to_string(&recorded).expect("read recording"),
        "https://www.youtube.com\n"
    );

    // ensure_url does the same and says it cannot focus a tab.
    std::fs::remove_file(&recorded).expect("reset recording");
    let ensured = expect_ok(
        invoke(
            &plugin,
            "ensure_url",
            json!({"url": "https://example.org/a?b=c"}),
            false,
        )
        .await,
        "ensure_url",
    );
    assert_eq!(ensured["via"], "xdg-open");
    assert!(
        ensured["detail"]
            .as_str()
            .unwrap_or("")
            .contains("(no open window to switch to instead: "),
        "{ensured}"
    );
    assert!(wait_for(Duration::from_secs(10), || recorded.exists()).await);
    assert_eq!(
        std::fs::read_to_string(&recorded).expect("read recording"),
        "https://example.org/a?b=c\n"
    );
}

// ---------------------------------------------------------------------------------------
// c) media: mpv + mpv-mpris on a private bus

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn media_pauses_and_plays_a_real_mpv() {
    let sb = Sandbox::new();
    let bus = DbusSession::start();
    let _mpv = Mpv::start(&sb, &bus);
    let mpris = Mpris::connect(&bus).await;
    assert_eq!(
        mpris
            .wait_for_status("Playing", Duration::from_secs(20))
            .await
            .as_deref(),
        Some("Playing"),
        "mpv did not show up as {MPV_BUS_NAME} playing"
    );

    let plugin = start_plugin(&sb, Some(&bus.address)).await;
    let health = plugin
        .call("plugin.health", json!({}))
        .await
        .expect("health");
    assert!(
        health["detail"]
            .as_str()
            .unwrap_or("")
            .contains("session bus reachable"),
        "{health}"
    );

    let dry = expect_ok(
        invoke(&plugin, "media", json!({"command": "pause"}), true).await,
        "dry pause",
    );
    assert_eq!(dry["method"], "Pause");
    assert_eq!(dry["player"], MPV_BUS_NAME);
    assert_eq!(dry["status_before"], "Playing");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        mpris.status().await.as_deref(),
        Some("Playing"),
        "dry run paused mpv"
    );

    let paused = expect_ok(
        invoke(&plugin, "media", json!({"command": "pause"}), false).await,
        "pause",
    );
    assert_eq!(paused["player"], MPV_BUS_NAME);
    assert_eq!(paused["method"], "Pause");
    assert_eq!(paused["status_before"], "Playing");
    assert_eq!(
        mpris
            .wait_for_status("Paused", Duration::from_secs(5))
            .await
            .as_deref(),
        Some("Paused")
    );

    let played = expect_ok(
        invoke(
            &plugin,
            "media",
            json!({"command": "play", "player": "MPV"}),
            false,
        )
        .await,
        "play",
    );
    assert_eq!(played["method"], "Play");
    assert_eq!(played["status_before"], "Paused");
    assert_eq!(
        mpris
            .wait_for_status("Playing", Duration::from_secs(5))
            .await
            .as_deref(),
        Some("Playing")
    );

    let e = expect_err(
        invoke(
            &plugin,
            "media",
            json!({"command": "next", "player": "vlc"}),
            false,
        )
        .await,
        "no matching player",
    );
    assert_eq!(e.code, -32000);
    assert!(
        e.message.contains("no MPRIS player matching"),
        "{}",
        e.message
    );
    assert!(e.message.contains(MPV_BUS_NAME), "{}", e.message);
}

#[tokio::test]
async fn media_without_players_or_without_a_bus_says_so() {
    let sb = Sandbox::new();
    let bus = DbusSession::start();
    let plugin = start_plugin(&sb, Some(&bus.address)).await;
    let e = expect_err(
        invoke(&plugin, "media", json!({"command": "play"}), false).await,
        "no player",
    );
    assert_eq!(e.code, -32000);
    assert!(
        e.message
            .starts_with("no MPRIS player on the session bus; start one"),
        "{}",
        e.message
    );

    // An empty DBUS_SESSION_BUS_ADDRESS and no $XDG_RUNTIME_DIR/bus: no bus at all.
    let no_bus = start_plugin(&sb, Some("")).await;
    let e = expect_err(
        invoke(&no_bus, "media", json!({"command": "play"}), false).await,
        "no bus",
    );
    assert_eq!(e.code, -32000);
    assert!(
        e.message
            .starts_with("no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS unset); run Utter in your desktop session")
            && e.message.contains("systemctl --user import-environment DBUS_SESSION_BUS_ADDRESS"),
        "{}",
        e.message
    );
}

// ---------------------------------------------------------------------------------------
// d) bad input

#[tokio::test]
async fn bad_input_gets_json_rpc_errors() {
    let sb = Sandbox::new();
    let plugin = start_plugin(&sb, None).await;

    let e = expect_err(
        invoke(&plugin, "teleport", json!({}), false).await,
        "unknown op",
    );
    assert_eq!(e.code, -32601);
    assert!(
        e.message
            .contains("open_url, ensure_url, launch_app, media"),
        "{}",
        e.message
    );

    let e = expect_err(
        invoke(&plugin, "launch_app", json!({}), false).await,
        "no app_id",
    );
    assert_eq!(e.code, -32602);
    assert!(e.message.contains("app_id"), "{}", e.message);

    let e = expect_err(
        invoke(
            &plugin,
            "open_url",
            json!({"url": "javascript:alert(1)"}),
            false,
        )
        .await,
        "javascript URL",
    );
    assert_eq!(e.code, -32602);
    assert!(e.message.contains("http, https, mailto"), "{}", e.message);

    let e = expect_err(
        invoke(&plugin, "media", json!({"command": "louder"}), false).await,
        "unknown command",
    );
    assert_eq!(e.code, -32602);

    let caps = plugin
        .call("action.capabilities", json!({}))
        .await
        .expect("capabilities");
    let ops: Vec<&str> = caps["ops"]
        .as_array()
        .expect("ops")
        .iter()
        .filter_map(|o| o["op"].as_str())
        .collect();
    assert_eq!(
        ops,
        ["open_url", "ensure_url", "launch_app", "media", "close_tab"]
    );
    // Every op says how it is undone (utter-core's undo rules).
    for op in caps["ops"].as_array().unwrap() {
        assert!(op["undo"].is_array(), "{op}");
    }

    // An undo's set_volume needs a level in range; close_tab a web address, and a runner.
    for (args, why) in [
        (json!({"command": "set_volume"}), "level"),
        (json!({"command": "set_volume", "level": 7.0}), "level"),
        (json!({"command": "set_volume", "level": "loud"}), "level"),
    ] {
        let e = expect_err(
            invoke(&plugin, "media", args.clone(), false).await,
            "set_volume",
        );
        assert_eq!(e.code, -32602, "{args}");
        assert!(e.message.contains(why), "{args}: {}", e.message);
    }
    let e = expect_err(
        invoke(
            &plugin,
            "close_tab",
            json!({"url": "javascript:alert(1)"}),
            false,
        )
        .await,
        "javascript URL",
    );
    assert_eq!(e.code, -32602);
    let e = expect_err(
        invoke(
            &plugin,
            "close_tab",
            json!({"url": "https://www.youtube.com"}),
            false,
        )
        .await,
        "no runner",
    );
    assert!(e.message.contains("desktop context"), "{}", e.message);
}

// ---------------------------------------------------------------------------------------
// e) open_url through the portal (a stand-in frontend on a private bus)

/// Serves `org.freedesktop.portal.OpenURI` as xdg-desktop-portal's frontend does: answers
/// the call with the request path, then emits `Response` on it. URIs containing
/// `portal-fails` get response 2.
struct FakeOpenUri {
    seen: Arc<Mutex<Vec<String>>>,
}

#[zbus::interface(name = "org.freedesktop.portal.OpenURI")]
impl FakeOpenUri {
    #[zbus(name = "OpenURI")]
    async fn open_uri(
        &self,
        #[zbus(header)] header: zbus::message::Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        _parent_window: &str,
        uri: &str,
        options: HashMap<String, OwnedValue>,
    ) -> zbus::fdo::Result<OwnedObjectPath> {
        if let Ok(mut seen) = self.seen.lock() {
            seen.push(uri.to_owned());
        }
        let sender = header
            .sender()
            .ok_or_else(|| zbus::fdo::Error::Failed("no sender".into()))?
            .to_owned();
        let token = options
            .get("handle_token")
            .and_then(|v| v.downcast_ref::<String>().ok())
            .unwrap_or_else(|| "t".to_owned());
        let path = format!(
            "/org/freedesktop/portal/desktop/request/{}/{token}",
            sender.trim_start_matches(':').replace('.', "_")
        );
        let handle = OwnedObjectPath::try_from(path.clone())
            .map_err(|e| zbus::fdo::Error::Failed(e.to_string()))?;
        let code: u32 = if uri.contains("portal-fails") { 2 } else { 0 };
        let conn = conn.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let results: HashMap<&str, zbus::zvariant::Value<'_>> = HashMap::new();
            let _ = conn
                .emit_signal(
                    Some(sender),
                    path.as_str(),
                    "org.freedesktop.portal.Request",
                    "Response",
                    &(code, results),
                )
                .await;
        });
        Ok(handle)
    }

    #[zbus(property, name = "version")]
    fn version(&self) -> u32 {
        4
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_url_goes_through_the_portal_and_falls_back_when_it_fails() {
    let sb = Sandbox::new();
    let recorded = sb.install_url_recorder();
    let bus = DbusSession::start();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let _portal = zbus::connection::Builder::address(bus.address.as_str())
        .expect("bus address")
        .serve_at(
            "/org/freedesktop/portal/desktop",
            FakeOpenUri { seen: seen.clone() },
        )
        .expect("serve")
        .name("org.freedesktop.portal.Desktop")
        .expect("name")
        .build()
        .await
        .expect("portal stand-in on the bus");
    let plugin = start_plugin(&sb, Some(&bus.address)).await;
    let seen_now = || seen.lock().map(|s| s.clone()).unwrap_or_default();

    let dry = expect_ok(
        invoke(
            &plugin,
            "open_url",
            json!({"url": "https://example.org/"}),
            true,
        )
        .await,
        "dry portal open",
    );
    assert_eq!(dry["via"], "portal", "{dry}");
    assert!(
        dry["detail"].as_str().unwrap_or("").contains("version 4"),
        "{dry}"
    );
    assert!(seen_now().is_empty(), "a dry run must not call OpenURI");

    let done = expect_ok(
        invoke(
            &plugin,
            "open_url",
            json!({"url": "https://example.org/"}),
            false,
        )
        .await,
        "portal open",
    );
    assert_eq!(done["via"], "portal", "{done}");
    assert!(
        done["detail"].as_str().unwrap_or("").starts_with("opened"),
        "{done}"
    );
    assert_eq!(seen_now(), ["https://example.org/"]);
    assert!(
        !recorded.exists(),
        "xdg-open must not run when the portal worked"
    );

    // Response 2 from the portal: fall back to xdg-open.
    let url = "https://example.org/portal-fails";
    let fell_back = expect_ok(
        invoke(&plugin, "open_url", json!({"url": url}), false).await,
        "fallback",
    );
    assert_eq!(fell_back["via"], "xdg-open", "{fell_back}");
    assert!(
        fell_back["portal_skipped"]
            .as_str()
            .unwrap_or("")
            .contains("answered 2"),
        "{fell_back}"
    );
    assert!(wait_for(Duration::from_secs(10), || recorded.exists()).await);
    assert_eq!(
        std::fs::read_to_string(&recorded).expect("recording"),
        format!("{url}\n")
    );
    assert_eq!(seen_now().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn media_volume_is_read_back_and_untargeted_commands_go_to_the_player_used_last() {
    let sb = Sandbox::new();
    let bus = DbusSession::start();
    // The idle one takes the plain name and sorts first on the bus.
    let _idle = Mpv::start_with(&sb, &bus, &["--pause"]);
    let mpris = Mpris::connect(&bus).await;
    assert_eq!(
        mpris
            .wait_for_status("Paused", Duration::from_secs(20))
            .await
            .as_deref(),
        Some("Paused"),
        "the paused mpv did not show up as {MPV_BUS_NAME}"
    );
    let _playing = Mpv::start(&sb, &bus);
    let plugin = start_plugin(&sb, Some(&bus.address)).await;
    // The second mpv is on the bus once a dry run finds a playing player.
    let mut other = String::new();
    for _ in 0..100 {
        let dry = invoke(&plugin, "media", json!({"command": "pause"}), true).await;
        if let Ok(dry) = dry
            && dry["status_before"] == "Playing"
        {
            other = dry["player"].as_str().unwrap_or("").to_owned();
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        other.starts_with(&format!("{MPV_BUS_NAME}.")),
        "the second mpv's name: {other:?}"
    );

    let down = expect_ok(
        invoke(&plugin, "media", json!({"command": "volume_down"}), false).await,
        "volume down",
    );
    assert_eq!(down["player"], other.as_str(), "{down}");
    assert_eq!(down["verified"], true, "{down}");
    let before = down["volume_before"].as_f64().unwrap();
    let after = down["volume_after"].as_f64().unwrap();
    assert!(
        (before - 0.1 - after).abs() < 0.011,
        "{before} → {after}: {down}"
    );
    let muted = expect_ok(
        invoke(&plugin, "media", json!({"command": "mute"}), false).await,
        "mute",
    );
    assert_eq!(muted["volume_after"], 0.0, "{muted}");
    let unmuted = expect_ok(
        invoke(&plugin, "media", json!({"command": "unmute"}), false).await,
        "unmute",
    );
    assert!(
        (unmuted["volume_after"].as_f64().unwrap() - after).abs() < 0.011,
        "the volume before the mute comes back: {unmuted}"
    );

    // "pause" pauses the playing one; then both are paused, and "play" resumes the one
    // used last, not the one that sorts first.
    let paused = expect_ok(
        invoke(&plugin, "media", json!({"command": "pause"}), false).await,
        "pause",
    );
    assert_eq!(paused["player"], other.as_str(), "{paused}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let played = expect_ok(
        invoke(&plugin, "media", json!({"command": "play"}), false).await,
        "play",
    );
    assert_eq!(played["player"], other.as_str(), "{played}");
    assert_eq!(played["status_before"], "Paused", "{played}");
    assert_eq!(
        mpris.status().await.as_deref(),
        Some("Paused"),
        "the idle mpv stayed paused"
    );
}
