//! Push-to-talk through real processes: `utter daemon` on a private `dbus-daemon`, driven by
//! the D-Bus methods `PushToTalk`/`TogglePushToTalk`, by `utter ptt …` over the client socket,
//! and by the real xdg-desktop-portal frontend (`/usr/libexec/xdg-desktop-portal`) with a
//! GlobalShortcuts backend served by this test (the only fake: no headless desktop implements
//! the portal), plus a bus without any portal.
//!
//! Debian packages: dbus-daemon (the bus), xdg-desktop-portal (the frontend).

use crate::common;

use common::portal::{FRONTEND, FakePortal};
use common::{ChildEnv, DbusSession, Sandbox, bin, run_utter};
use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use futures::StreamExt;
use utter_protocol::serde_json::{self, Value};
use zbus::Connection;
use zbus::object_server::SignalEmitter;

/// The longest any single wait may take before the test fails.
const LIMIT: Duration = Duration::from_secs(60);
const RUNNER_NAME: &str = "dev.utter.Runner1";
const RUNNER_PATH: &str = "/dev/utter/Runner1";

/// `utter daemon` (with D-Bus) with a test config and socket; SIGTERM then SIGKILL on drop.
struct Daemon {
    process: common::daemon::Daemon,
    config: PathBuf,
    _dir: tempfile::TempDir,
    _sandbox: Sandbox,
}

impl std::ops::Deref for Daemon {
    type Target = common::daemon::Daemon;
    fn deref(&self) -> &Self::Target {
        &self.process
    }
}

impl Daemon {
    fn start(bus: &str, config_body: &str) -> Daemon {
        let dir = tempfile::tempdir().expect("temp dir");
        let sandbox = Sandbox::new();
        let config = dir.path().join("utter.toml");
        // Push-to-talk needs no plugin: without [[plugin]] entries of its own, the config
        // says `plugin = []` (a file that names no plugins would run the built-in ones).
        let plugins = if config_body.contains("[[plugin]]") {
            ""
        } else {
            "plugin = []\n"
        };
        std::fs::write(
            &config,
            format!("config_version = 1\n{plugins}{config_body}"),
        )
        .expect("config");
        let process = common::daemon::Daemon::builder(&sandbox)
            .config(&config)
            .socket(&dir.path().join("runner.sock"))
            .log(&dir.path().join("runner.log"))
            .env(sandbox.env(Some(bus)))
            .log_level("debug")
            .dbus()
            .spawn();
        Daemon {
            process,
            config,
            _dir: dir,
            _sandbox: sandbox,
        }
    }

    /// `utter --socket S ARGS…` against this daemon.
    async fn utter(&self, args: &[&str]) -> common::UtterRun {
        let mut all = vec!["--socket", self.socket.to_str().expect("utf-8 path")];
        all.extend_from_slice(args);
        run_utter(&all, &ChildEnv::new()).await
    }
}

async fn connect(address: &str) -> Connection {
    zbus::connection::Builder::address(address)
        .expect("bus address")
        .method_timeout(Duration::from_secs(60))
        .build()
        .await
        .expect("connect to the private bus")
}

/// Wait until `name` has an owner.
async fn wait_for_name(conn: &Connection, name: &str, log: impl Fn() -> String) {
    let bus = zbus::fdo::DBusProxy::new(conn).await.expect("bus proxy");
    let deadline = tokio::time::Instant::now() + LIMIT;
    while !bus
        .name_has_owner(name.try_into().expect("bus name"))
        .await
        .unwrap_or(false)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} never appeared on the bus; log:\n{}",
            log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[zbus::proxy(
    interface = "dev.utter.Runner1",
    default_service = "dev.utter.Runner1",
    default_path = "/dev/utter/Runner1",
    gen_blocking = false
)]
trait Runner1 {
    fn push_to_talk(&self, pressed: bool) -> zbus::Result<String>;
    fn toggle_push_to_talk(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn listening(&self) -> zbus::Result<bool>;
    #[zbus(property)]
    fn push_to_talk_status(&self) -> zbus::Result<String>;
}

async fn runner_proxy(conn: &Connection) -> Runner1Proxy<'static> {
    Runner1Proxy::builder(conn)
        .cache_properties(zbus::proxy::CacheProperties::No)
        .build()
        .await
        .expect("runner proxy")
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// The next `Listening` value announced by `PropertiesChanged` on `stream`.
async fn next_listening(stream: &mut zbus::fdo::PropertiesChangedStream) -> bool {
    loop {
        let signal = tokio::time::timeout(LIMIT, stream.next())
            .await
            .expect("a PropertiesChanged within the limit")
            .expect("the signal stream ended");
        let args = signal.args().expect("PropertiesChanged args");
        if args.interface_name().as_str() != RUNNER_NAME {
            continue;
        }
        if let Some(value) = args.changed_properties().get("Listening") {
            return bool::try_from(value).expect("Listening is a boolean");
        }
    }
}

/// Poll the trigger `name` in `PushToTalkStatus` until its state is `state`; its detail.
async fn wait_trigger(
    runner: &Runner1Proxy<'_>,
    name: &str,
    state: &str,
    log: impl Fn() -> String,
) -> String {
    let deadline = tokio::time::Instant::now() + LIMIT;
    let mut last = Value::Null;
    while tokio::time::Instant::now() < deadline {
        if let Ok(text) = runner.push_to_talk_status().await {
            last = json(&text);
            if let Some(t) = last["triggers"]
                .as_array()
                .and_then(|ts| ts.iter().find(|t| t["trigger"] == name))
                && t["state"] == state
            {
                return t["detail"].as_str().unwrap_or("").to_owned();
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "trigger {name} never reached {state}; last status {last}\nrunner log:\n{}",
        log()
    );
}

/// Poll the trigger `name` until its state is `state` and its detail contains `needle`; the
/// detail.
async fn wait_trigger_saying(
    runner: &Runner1Proxy<'_>,
    name: &str,
    state: &str,
    needle: &str,
    log: impl Fn() -> String,
) -> String {
    let deadline = tokio::time::Instant::now() + LIMIT;
    let mut last = Value::Null;
    while tokio::time::Instant::now() < deadline {
        if let Ok(text) = runner.push_to_talk_status().await {
            last = json(&text);
            if let Some(t) = last["triggers"]
                .as_array()
                .and_then(|ts| ts.iter().find(|t| t["trigger"] == name))
                && t["state"] == state
                && t["detail"].as_str().is_some_and(|d| d.contains(needle))
            {
                return t["detail"].as_str().unwrap_or("").to_owned();
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "trigger {name} never reached {state} with {needle:?}; last status {last}\nrunner log:\n{}",
        log()
    );
}

// ---------------------------------------------------------------------------------------
// D-Bus and CLI

#[tokio::test]
async fn dbus_methods_change_listening_with_properties_changed_and_a_quick_release_is_too_short() {
    let bus = DbusSession::start();
    // A minimum hold long enough that two back-to-back calls are always "too short".
    let daemon = Daemon::start(
        &bus.address,
        "[ptt]\nportal = false\nmin_hold_ms = 1500\nmax_hold_ms = 60000\n",
    );
    let conn = connect(&bus.address).await;
    wait_for_name(&conn, RUNNER_NAME, || daemon.log()).await;
    let runner = runner_proxy(&conn).await;
    let props = zbus::fdo::PropertiesProxy::builder(&conn)
        .destination(RUNNER_NAME)
        .unwrap()
        .path(RUNNER_PATH)
        .unwrap()
        .cache_properties(zbus::proxy::CacheProperties::No)
        .build()
        .await
        .expect("properties proxy");
    let mut changes = props
        .receive_properties_changed()
        .await
        .expect("subscribe to PropertiesChanged");
    assert!(!runner.listening().await.expect("Listening"));

    // Press: listening, announced.
    let out = json(&runner.push_to_talk(true).await.expect("PushToTalk(true)"));
    assert_eq!(out["transition"]["transition"], "pressed", "{out}");
    assert_eq!(out["transition"]["source"], "dbus", "{out}");
    assert_eq!(out["listening"], true, "{out}");
    assert!(next_listening(&mut changes).await);
    assert!(runner.listening().await.unwrap());
    // A second press changes nothing.
    let out = json(&runner.push_to_talk(true).await.unwrap());
    assert!(out["transition"].is_null(), "{out}");

    // Released at once: cancelled as too short, not an utterance.
    let out = json(&runner.push_to_talk(false).await.expect("PushToTalk(false)"));
    assert_eq!(out["transition"]["transition"], "cancelled", "{out}");
    assert_eq!(out["transition"]["reason"], "too-short", "{out}");
    assert!(!next_listening(&mut changes).await);
    assert!(!runner.listening().await.unwrap());

    // Toggle: press, hold past the minimum, toggle again: a real utterance window.
    let out = json(
        &runner
            .toggle_push_to_talk()
            .await
            .expect("TogglePushToTalk"),
    );
    assert_eq!(out["transition"]["transition"], "pressed", "{out}");
    assert!(next_listening(&mut changes).await);
    tokio::time::sleep(Duration::from_millis(1700)).await;
    let out = json(&runner.toggle_push_to_talk().await.unwrap());
    assert_eq!(out["transition"]["transition"], "released", "{out}");
    assert!(
        out["transition"]["held_ms"].as_u64().unwrap() >= 1500,
        "{out}"
    );
    assert!(!next_listening(&mut changes).await);

    // The status names each trigger.
    let status = json(&runner.push_to_talk_status().await.unwrap());
    let states: HashMap<String, String> = status["triggers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["trigger"].as_str().unwrap().to_owned(),
                t["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        states.get("portal").map(String::as_str),
        Some("disabled"),
        "{status}"
    );
    assert_eq!(
        states.get("evdev").map(String::as_str),
        Some("disabled"),
        "{status}"
    );
}

#[tokio::test]
async fn utter_ptt_drives_the_running_daemon_and_events_and_status_show_it() {
    let bus = DbusSession::start();
    // A release is "too short" below min_hold_ms: 5 s, so that a loaded machine's slow
    // `utter ptt` runs between press and release (1.7 s seen) cannot make it a long one.
    let daemon = Daemon::start(&bus.address, "[ptt]\nportal = false\nmin_hold_ms = 5000\n");
    let conn = connect(&bus.address).await;
    wait_for_name(&conn, RUNNER_NAME, || daemon.log()).await;
    let runner = runner_proxy(&conn).await;

    // Follow the events with `utter events --json`.
    let mut events = std::process::Command::new(bin("utter"))
        .arg("--socket")
        .arg(&daemon.socket)
        .args(["events", "--json"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("utter events runs");
    let line_rx = common::stdout_lines(events.stdout.take().unwrap());
    let first = line_rx.recv_timeout(LIMIT).expect("the snapshot");
    assert_eq!(json(&first)["event"], "snapshot", "{first}");
    assert_eq!(json(&first)["status"]["ptt"]["listening"], false, "{first}");

    let press = daemon.utter(&["ptt", "press", "--json"]).await;
    assert_eq!(press.code, Some(0), "{press}");
    let out = press.json();
    assert_eq!(out["transition"]["transition"], "pressed", "{press}");
    assert_eq!(out["transition"]["source"], "socket", "{press}");
    assert_eq!(out["listening"], true, "{press}");
    assert!(
        runner.listening().await.unwrap(),
        "Listening follows the socket"
    );

    let state = daemon.utter(&["ptt", "state", "--json"]).await;
    assert_eq!(state.json()["state"]["listening"], true, "{state}");
    assert_eq!(state.json()["state"]["source"], "socket", "{state}");

    let release = daemon.utter(&["ptt", "release", "--json"]).await;
    let out = release.json();
    assert_eq!(out["transition"]["transition"], "cancelled", "{release}");
    assert_eq!(out["transition"]["reason"], "too-short", "{release}");
    assert_eq!(out["listening"], false, "{release}");

    let toggle = daemon.utter(&["ptt", "toggle"]).await;
    assert_eq!(toggle.code, Some(0), "{toggle}");
    // No voice loop here: the key is held, and the line says nothing will be heard.
    assert!(
        toggle
            .stdout
            .contains("pressed (socket): held, but the voice loop is off"),
        "{toggle}"
    );
    tokio::time::sleep(Duration::from_millis(5200)).await;
    let toggle = daemon.utter(&["ptt", "toggle", "--json"]).await;
    assert_eq!(
        toggle.json()["transition"]["transition"],
        "released",
        "{toggle}"
    );

    // `utter events` saw every transition, in order.
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + LIMIT;
    while seen.len() < 4 && std::time::Instant::now() < deadline {
        if let Ok(line) = line_rx.recv_timeout(Duration::from_millis(200)) {
            let e = json(&line);
            if e["event"] == "ptt" {
                seen.push(format!(
                    "{} {}",
                    e["transition"].as_str().unwrap(),
                    e["reason"].as_str().unwrap_or("")
                ));
            }
        }
    }
    let _ = events.kill();
    let _ = events.wait();
    assert_eq!(
        seen,
        vec!["pressed ", "cancelled too-short", "pressed ", "released "],
        "utter events --json"
    );

    // Status, human and JSON.
    let status = daemon.utter(&["status"]).await;
    assert!(status.stdout.contains("push-to-talk: idle"), "{status}");
    assert!(status.stdout.contains("portal"), "{status}");
    let status = daemon.utter(&["status", "--json"]).await;
    assert_eq!(status.json()["ptt"]["min_hold_ms"], 5000, "{status}");

    // A bad action is a usage error from clap, naming the choices.
    let bad = daemon.utter(&["ptt", "hold"]).await;
    assert_eq!(bad.code, Some(2), "{bad}");
    assert!(bad.stderr.contains("toggle"), "{bad}");
}

// ---------------------------------------------------------------------------------------
// The portal

/// A session bus with no service directory at all: nothing can be activated, so there is no
/// portal.
struct BareBus {
    address: String,
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl BareBus {
    fn start() -> BareBus {
        let dir = tempfile::tempdir().expect("temp dir");
        let socket = dir.path().join("bus");
        let config = dir.path().join("bus.conf");
        std::fs::write(
            &config,
            format!(
                r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"#,
                socket.display()
            ),
        )
        .expect("bus config");
        let mut child = std::process::Command::new("dbus-daemon")
            .arg(format!("--config-file={}", config.display()))
            .args(["--nofork", "--print-address=1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("dbus-daemon runs (apt-get install dbus-daemon)");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("dbus-daemon prints its address");
        BareBus {
            address: line.trim().to_owned(),
            child,
            _dir: dir,
        }
    }
}

impl Drop for BareBus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn without_any_portal_the_trigger_is_unavailable_and_push_to_talk_still_works() {
    let bus = BareBus::start();
    let daemon = Daemon::start(&bus.address, "[ptt]\nportal = true\nmin_hold_ms = 0\n");
    let conn = connect(&bus.address).await;
    wait_for_name(&conn, RUNNER_NAME, || daemon.log()).await;
    let runner = runner_proxy(&conn).await;
    let detail = wait_trigger(&runner, "portal", "unavailable", || daemon.log()).await;
    assert!(detail.contains("no xdg-desktop-portal"), "{detail}");
    let status = daemon.utter(&["status"]).await;
    assert_eq!(status.code, Some(0), "{status}");
    assert!(
        status.stdout.lines().any(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words.starts_with(&["portal", "unavailable"])
        }),
        "utter status shows it:\n{status}"
    );
    // Not an error: nothing is logged above info about it.
    let log = daemon.log();
    assert!(
        !log.lines()
            .any(|l| l.contains("portal") && (l.contains("WARN") || l.contains("ERROR"))),
        "{log}"
    );
    // The other triggers still work.
    let out = json(&runner.push_to_talk(true).await.unwrap());
    assert_eq!(out["listening"], true, "{out}");
}

#[tokio::test]
async fn a_portal_frontend_without_global_shortcuts_is_unavailable_not_an_error() {
    // The niri case: xdg-desktop-portal runs, but no backend implements GlobalShortcuts.
    assert!(
        Path::new(FRONTEND).exists(),
        "{FRONTEND} is missing: apt-get install xdg-desktop-portal (tests/run.sh does)"
    );
    let bus = DbusSession::start();
    let portals = tempfile::tempdir().expect("temp dir");
    let runtime = tempfile::tempdir().expect("runtime dir");
    let mut frontend = std::process::Command::new(FRONTEND)
        .arg("--replace")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
        .env("XDG_RUNTIME_DIR", runtime.path())
        .env("XDG_DESKTOP_PORTAL_DIR", portals.path())
        .env("XDG_CURRENT_DESKTOP", "niri")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("xdg-desktop-portal starts");
    let conn = connect(&bus.address).await;
    wait_for_name(&conn, "org.freedesktop.portal.Desktop", String::new).await;
    let daemon = Daemon::start(&bus.address, "[ptt]\nportal = true\n");
    wait_for_name(&conn, RUNNER_NAME, || daemon.log()).await;
    let runner = runner_proxy(&conn).await;
    let detail = wait_trigger(&runner, "portal", "unavailable", || daemon.log()).await;
    let _ = frontend.kill();
    let _ = frontend.wait();
    assert!(detail.contains("no GlobalShortcuts"), "{detail}");
    let log = daemon.log();
    assert!(
        !log.lines()
            .any(|l| l.contains("WARN") && l.contains("portal")),
        "nothing noisy in the log:\n{log}"
    );
}

#[tokio::test]
async fn a_reload_applies_new_limits_and_restarts_a_changed_trigger() {
    let bus = BareBus::start();
    let daemon = Daemon::start(&bus.address, "[ptt]\nportal = false\nmin_hold_ms = 100\n");
    let conn = connect(&bus.address).await;
    wait_for_name(&conn, RUNNER_NAME, || daemon.log()).await;
    let runner = runner_proxy(&conn).await;
    wait_trigger(&runner, "portal", "disabled", || daemon.log()).await;
    std::fs::write(
        &daemon.config,
        "config_version = 1\n[ptt]\nportal = true\nmin_hold_ms = 250\n",
    )
    .expect("rewrite the config");
    let reload = daemon.utter(&["reload", "--json"]).await;
    assert_eq!(reload.code, Some(0), "{reload}");
    // The portal trigger was started by the reload (and finds no portal on this bus).
    wait_trigger(&runner, "portal", "unavailable", || daemon.log()).await;
    let status = json(&runner.push_to_talk_status().await.unwrap());
    assert_eq!(status["min_hold_ms"], 250, "{status}");
}

#[tokio::test]
async fn the_real_portal_frontend_binds_the_shortcut_and_activation_drives_listening() {
    let bus = DbusSession::start();
    let portal = FakePortal::start(&bus.address).await;
    let backend = portal.connection().clone();
    let seen = portal.seen.clone();
    let frontend_text = || portal.frontend_log();

    let daemon = Daemon::start(
        &bus.address,
        "[ptt]\nportal = true\nshortcut = \"CTRL+ALT+F13\"\nmin_hold_ms = 0\ndictation_key = \"F14\"\n",
    );
    wait_for_name(&backend, RUNNER_NAME, || daemon.log()).await;
    let runner = runner_proxy(&backend).await;
    let log = || format!("{}\n--- frontend:\n{}", daemon.log(), frontend_text());
    let detail = wait_trigger(&runner, "portal", "bound", log).await;
    assert!(detail.contains("CTRL+ALT+F13"), "{detail}");
    let (session, bound) = {
        let seen = seen.lock().unwrap();
        (seen.session.clone(), seen.bound.clone())
    };
    assert_eq!(
        bound,
        vec![
            (
                "push-to-talk".to_owned(),
                "CTRL+ALT+F13".to_owned(),
                "Push to talk: hold to speak to Utter".to_owned()
            ),
            (
                "dictation".to_owned(),
                "F14".to_owned(),
                "Dictate: hold to type what you say".to_owned()
            )
        ],
        "BindShortcuts as the backend saw it"
    );
    let session = session.expect("CreateSession reached the backend");
    assert!(!runner.listening().await.unwrap());

    portal.key(&session, "push-to-talk", true, 1000).await;
    assert!(
        wait_listening(&runner, true).await,
        "Listening never became true after Activated; log:\n{}",
        log()
    );
    let status = json(&runner.push_to_talk_status().await.unwrap());
    assert_eq!(status["source"], "portal", "{status}");
    // Another shortcut id is not ours.
    portal.key(&session, "something-else", false, 1100).await;
    portal.key(&session, "push-to-talk", false, 1500).await;
    assert!(
        wait_listening(&runner, false).await,
        "Listening never became false after Deactivated; log:\n{}",
        log()
    );
    let status = json(&runner.push_to_talk_status().await.unwrap());
    assert_eq!(status["listening"], false, "{status}");
    assert_eq!(status["dictation"], false, "{status}");

    // The second shortcut holds to dictate.
    portal.key(&session, "dictation", true, 2000).await;
    assert!(wait_listening(&runner, true).await, "{}", log());
    let status = json(&runner.push_to_talk_status().await.unwrap());
    assert_eq!(status["dictation"], true, "{status}");
    portal.key(&session, "dictation", false, 2500).await;
    assert!(wait_listening(&runner, false).await, "{}", log());
}

/// Poll `Listening` until it is `wanted`.
async fn wait_listening(runner: &Runner1Proxy<'_>, wanted: bool) -> bool {
    let deadline = tokio::time::Instant::now() + LIMIT;
    while tokio::time::Instant::now() < deadline {
        if runner.listening().await.ok() == Some(wanted) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// `utter events --json` against `daemon`, its lines on a channel; killed on drop.
struct EventsTail {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl EventsTail {
    fn start(daemon: &Daemon) -> EventsTail {
        let mut child = std::process::Command::new(bin("utter"))
            .arg("--socket")
            .arg(&daemon.socket)
            .args(["events", "--json"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("utter events runs");
        let lines = common::stdout_lines(child.stdout.take().unwrap());
        let first = lines.recv_timeout(LIMIT).expect("the snapshot");
        assert_eq!(json(&first)["event"], "snapshot", "{first}");
        EventsTail { child, lines }
    }

    /// The next `ptt` event.
    fn next_ptt(&self) -> Value {
        let deadline = std::time::Instant::now() + LIMIT;
        while std::time::Instant::now() < deadline {
            if let Ok(line) = self.lines.recv_timeout(Duration::from_millis(200)) {
                let e = json(&line);
                if e["event"] == "ptt" {
                    return e;
                }
            }
        }
        panic!("no ptt event within the limit");
    }
}

impl Drop for EventsTail {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------
// The a11y keyboard monitor (niri 25.08+)

const A11Y_NAME: &str = "org.freedesktop.a11y.Manager";
const A11Y_PATH: &str = "/org/freedesktop/a11y/Manager";
const A11Y_INTERFACE: &str = "org.freedesktop.a11y.KeyboardMonitor";
/// XKB_KEY_F13.
const F13: u32 = 0xffca;

/// How the test keyboard monitor answers `SetKeyGrabs`.
#[derive(Clone, Copy)]
enum GrabReply {
    Ok,
    /// `org.freedesktop.DBus.Error.AccessDenied`, as mutter and KWin answer anyone but Orca.
    AccessDenied,
    /// `org.freedesktop.DBus.Error.Failed`.
    Failed,
}

/// One `SetKeyGrabs` call as the test service saw it.
#[derive(Debug, Clone)]
struct GrabCall {
    sender: String,
    modifiers: Vec<u32>,
    keystrokes: Vec<(u32, u32)>,
}

/// `org.freedesktop.a11y.KeyboardMonitor` as mutter's `org.freedesktop.a11y.xml` defines it
/// and niri serves it: records `SetKeyGrabs`, emits `KeyEvent` to the grabbing client.
struct TestMonitor {
    reply: GrabReply,
    calls: std::sync::Arc<std::sync::Mutex<Vec<GrabCall>>>,
}

#[zbus::interface(name = "org.freedesktop.a11y.KeyboardMonitor")]
impl TestMonitor {
    async fn set_key_grabs(
        &self,
        #[zbus(header)] header: zbus::message::Header<'_>,
        modifiers: Vec<u32>,
        keystrokes: Vec<(u32, u32)>,
    ) -> zbus::fdo::Result<()> {
        let sender = header.sender().map(|s| s.to_string()).unwrap_or_default();
        self.calls.lock().unwrap().push(GrabCall {
            sender,
            modifiers,
            keystrokes,
        });
        match self.reply {
            GrabReply::Ok => Ok(()),
            GrabReply::AccessDenied => Err(zbus::fdo::Error::AccessDenied(
                "only the screen reader may grab keys".into(),
            )),
            GrabReply::Failed => Err(zbus::fdo::Error::Failed("the test refuses".into())),
        }
    }

    async fn watch_keyboard(&self) {}
    async fn unwatch_keyboard(&self) {}
    async fn grab_keyboard(&self) {}
    async fn ungrab_keyboard(&self) {}

    #[zbus(signal)]
    async fn key_event(
        emitter: &SignalEmitter<'_>,
        released: bool,
        state: u32,
        keysym: u32,
        unichar: u32,
        keycode: u16,
    ) -> zbus::Result<()>;
}

/// A test keyboard monitor on its own connection, owning `org.freedesktop.a11y.Manager`.
struct Monitor {
    conn: Connection,
    calls: std::sync::Arc<std::sync::Mutex<Vec<GrabCall>>>,
}

impl Monitor {
    async fn start(bus: &str, reply: GrabReply) -> Monitor {
        let calls = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let conn = zbus::connection::Builder::address(bus)
            .unwrap()
            .serve_at(
                A11Y_PATH,
                TestMonitor {
                    reply,
                    calls: calls.clone(),
                },
            )
            .unwrap()
            .name(A11Y_NAME)
            .unwrap()
            .build()
            .await
            .expect("the test keyboard monitor is on the bus");
        Monitor { conn, calls }
    }

    fn calls(&self) -> Vec<GrabCall> {
        self.calls.lock().unwrap().clone()
    }

    /// Wait until `SetKeyGrabs` was called `n` times; the calls.
    async fn wait_calls(&self, n: usize) -> Vec<GrabCall> {
        let deadline = tokio::time::Instant::now() + LIMIT;
        loop {
            let calls = self.calls();
            if calls.len() >= n {
                return calls;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "SetKeyGrabs was called {} times, wanted {n}",
                calls.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Emit `KeyEvent` to the client that set the grabs, as niri does.
    async fn key(&self, released: bool, keysym: u32) {
        let client = self
            .calls()
            .last()
            .expect("a client set grabs")
            .sender
            .clone();
        let emitter = SignalEmitter::new(&self.conn, A11Y_PATH)
            .unwrap()
            .set_destination(zbus::names::BusName::try_from(client).unwrap());
        TestMonitor::key_event(&emitter, released, 0, keysym, 0, 191)
            .await
            .expect("emit KeyEvent");
    }

    /// Emit a `KeyEvent` whose arguments have the wrong types.
    async fn bad_key(&self) {
        let client = self
            .calls()
            .last()
            .expect("a client set grabs")
            .sender
            .clone();
        self.conn
            .emit_signal(
                Some(client.as_str()),
                A11Y_PATH,
                A11Y_INTERFACE,
                "KeyEvent",
                &("pressed", 7u8),
            )
            .await
            .expect("emit the malformed KeyEvent");
    }

    /// Leave the bus, as a compositor that exits does.
    async fn stop(self) {
        self.conn
            .close()
            .await
            .expect("close the monitor's connection");
    }
}

fn f13_grabs() -> Vec<(u32, u32)> {
    // The key with no lock modifier, Caps Lock, Num Lock (Mod2), both.
    vec![(F13, 0), (F13, 2), (F13, 16), (F13, 18)]
}

#[tokio::test]
async fn the_keyboard_monitor_grabs_the_key_drives_hold_to_talk_and_follows_the_service() {
    let bus = DbusSession::start();
    let monitor = Monitor::start(&bus.address, GrabReply::Ok).await;
    let daemon = Daemon::start(
        &bus.address,
        "[ptt]\nportal = false\nmin_hold_ms = 200\nkeyboard_monitor_key = \"F13\"\n",
    );
    let conn = connect(&bus.address).await;
    wait_for_name(&conn, RUNNER_NAME, || daemon.log()).await;
    let runner = runner_proxy(&conn).await;
    let detail = wait_trigger(&runner, "keyboard-monitor", "bound", || daemon.log()).await;
    assert!(
        detail.contains("F13") && detail.contains("0xffca"),
        "{detail}"
    );
    let calls = monitor.wait_calls(1).await;
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(calls[0].modifiers.is_empty(), "{calls:?}");
    assert_eq!(calls[0].keystrokes, f13_grabs());
    let events = EventsTail::start(&daemon);

    // Press: a hold by the keyboard monitor.
    monitor.key(false, F13).await;
    assert!(
        wait_listening(&runner, true).await,
        "Listening never became true after KeyEvent(press); log:\n{}",
        daemon.log()
    );
    let e = events.next_ptt();
    assert_eq!(e["transition"], "pressed", "{e}");
    assert_eq!(e["source"], "keyboard-monitor", "{e}");
    let state = daemon.utter(&["ptt", "state", "--json"]).await;
    assert_eq!(
        state.json()["state"]["source"],
        "keyboard-monitor",
        "{state}"
    );

    // Another key's release, then a KeyEvent with wrong argument types: both ignored. The
    // status names the malformed one once the trigger has read it, and so (signals from one
    // sender arrive in order) the other key too.
    monitor.key(true, F13 + 1).await;
    monitor.bad_key().await;
    let detail = wait_trigger_saying(&runner, "keyboard-monitor", "bound", "malformed", || {
        daemon.log()
    })
    .await;
    assert!(detail.contains("ignored 1 malformed KeyEvent"), "{detail}");
    assert!(runner.listening().await.unwrap(), "still held");
    assert!(daemon.log().contains("malformed KeyEvent"), "logged");

    // Release after min_hold_ms: an utterance window.
    tokio::time::sleep(Duration::from_millis(250)).await;
    monitor.key(true, F13).await;
    assert!(wait_listening(&runner, false).await, "{}", daemon.log());
    let e = events.next_ptt();
    assert_eq!(e["transition"], "released", "{e}");
    assert_eq!(e["source"], "keyboard-monitor", "{e}");
    assert!(e["held_ms"].as_u64().unwrap() >= 200, "{e}");

    // Held when the service goes away: the hold is cancelled, the trigger unavailable.
    monitor.key(false, F13).await;
    assert!(wait_listening(&runner, true).await);
    assert_eq!(events.next_ptt()["transition"], "pressed");
    monitor.stop().await;
    wait_trigger_saying(
        &runner,
        "keyboard-monitor",
        "unavailable",
        "went away",
        || daemon.log(),
    )
    .await;
    let e = events.next_ptt();
    assert_eq!(e["transition"], "cancelled", "{e}");
    assert_eq!(e["reason"], "device-lost", "{e}");
    assert!(!runner.listening().await.unwrap());

    // It comes back (a new connection, as a restarted compositor): grabbed again.
    let monitor = Monitor::start(&bus.address, GrabReply::Ok).await;
    wait_trigger(&runner, "keyboard-monitor", "bound", || daemon.log()).await;
    let calls = monitor.wait_calls(1).await;
    assert_eq!(calls[0].keystrokes, f13_grabs());
    monitor.key(false, F13).await;
    assert!(wait_listening(&runner, true).await, "{}", daemon.log());
    tokio::time::sleep(Duration::from_millis(250)).await;
    monitor.key(true, F13).await;
    assert!(wait_listening(&runner, false).await);
    let e = events.next_ptt();
    assert_eq!(e["transition"], "pressed", "{e}");
    assert_eq!(events.next_ptt()["transition"], "released");
    // Exactly one SetKeyGrabs per owner.
    assert_eq!(monitor.calls().len(), 1);
}

/// `[ptt] dictation_key`: a second keysym grabbed beside push-to-talk; held, it is a hold to
/// dictate (events and state say so); `utter ptt press --dictation` does the same from a
/// compositor binding, and `--dictation` with a release is refused.
#[tokio::test]
async fn the_dictation_key_is_grabbed_beside_push_to_talk_and_holds_to_dictate() {
    let bus = DbusSession::start();
    let monitor = Monitor::start(&bus.address, GrabReply::Ok).await;
    let daemon = Daemon::start(
        &bus.address,
        "[ptt]\nportal = false\nmin_hold_ms = 200\nkeyboard_monitor_key = \"F13\"\ndictation_key = \"F14\"\n",
    );
    let conn = connect(&bus.address).await;
    wait_for_name(&conn, RUNNER_NAME, || daemon.log()).await;
    let runner = runner_proxy(&conn).await;
    let detail = wait_trigger(&runner, "keyboard-monitor", "bound", || daemon.log()).await;
    assert!(
        detail.contains("F13") && detail.contains("F14") && detail.contains("dictate"),
        "{detail}"
    );
    let calls = monitor.wait_calls(1).await;
    let mut want = f13_grabs();
    want.extend(f13_grabs().iter().map(|&(k, m)| (k + 1, m)));
    assert_eq!(calls[0].keystrokes, want);
    let events = EventsTail::start(&daemon);

    monitor.key(false, F13 + 1).await;
    assert!(wait_listening(&runner, true).await, "{}", daemon.log());
    let e = events.next_ptt();
    assert_eq!(e["transition"], "pressed", "{e}");
    assert_eq!(e["dictation"], true, "{e}");
    let state = daemon.utter(&["ptt", "state", "--json"]).await;
    assert_eq!(state.json()["state"]["dictation"], true, "{state}");
    tokio::time::sleep(Duration::from_millis(250)).await;
    monitor.key(true, F13 + 1).await;
    assert!(wait_listening(&runner, false).await);
    let e = events.next_ptt();
    assert_eq!(e["transition"], "released", "{e}");
    assert_eq!(e["dictation"], true, "{e}");

    // The push-to-talk key is a command hold: no "dictation" on its events.
    monitor.key(false, F13).await;
    assert!(wait_listening(&runner, true).await);
    let e = events.next_ptt();
    assert!(e.get("dictation").is_none(), "{e}");
    monitor.key(true, F13).await;
    assert!(wait_listening(&runner, false).await);
    events.next_ptt();

    // From a compositor binding.
    let pressed = daemon
        .utter(&["ptt", "press", "--dictation", "--json"])
        .await;
    assert_eq!(pressed.code, Some(0), "{pressed}");
    assert_eq!(pressed.json()["transition"]["dictation"], true, "{pressed}");
    // No voice loop here: the line says so rather than promising typed words.
    let toggled = daemon.utter(&["ptt", "toggle"]).await;
    assert!(
        toggled.stdout.contains("no change"),
        "the other mode's toggle: {toggled}"
    );
    let refused = daemon.utter(&["ptt", "release", "--dictation"]).await;
    assert_eq!(refused.code, Some(2), "a usage error: {refused}");
    assert!(refused.stderr.contains("press or toggle"), "{refused}");
    let state = daemon.utter(&["ptt", "state", "--json"]).await;
    assert_eq!(
        state.json()["state"]["dictation"],
        true,
        "still held: {state}"
    );
    let released = daemon.utter(&["ptt", "release", "--json"]).await;
    assert_eq!(
        released.json()["transition"]["dictation"],
        true,
        "{released}"
    );
}

#[tokio::test]
async fn a_keyboard_monitor_that_appears_later_is_bound_and_refusals_and_errors_are_reported() {
    let bus = DbusSession::start();
    let daemon = Daemon::start(&bus.address, "[ptt]\nportal = false\n");
    let conn = connect(&bus.address).await;
    wait_for_name(&conn, RUNNER_NAME, || daemon.log()).await;
    let runner = runner_proxy(&conn).await;
    let detail = wait_trigger(&runner, "keyboard-monitor", "unavailable", || daemon.log()).await;
    assert!(
        detail.contains("niri 25.08") && detail.contains("session"),
        "{detail}"
    );
    let status = daemon.utter(&["status"]).await;
    assert!(
        status.stdout.contains("keyboard-monitor unavailable"),
        "{status}"
    );

    // A compositor that serves the interface to Orca only: refused, not an error.
    let monitor = Monitor::start(&bus.address, GrabReply::AccessDenied).await;
    let detail = wait_trigger_saying(
        &runner,
        "keyboard-monitor",
        "unavailable",
        "refused",
        || daemon.log(),
    )
    .await;
    assert!(detail.contains("Orca"), "{detail}");
    monitor.stop().await;

    // SetKeyGrabs answers an error: logged, status error, the daemon goes on.
    let monitor = Monitor::start(&bus.address, GrabReply::Failed).await;
    let detail = wait_trigger(&runner, "keyboard-monitor", "error", || daemon.log()).await;
    assert!(detail.contains("the test refuses"), "{detail}");
    assert_eq!(monitor.calls().len(), 1, "not retried with the same owner");
    assert!(
        daemon
            .log()
            .lines()
            .any(|l| l.contains("WARN") && l.contains("SetKeyGrabs")),
        "{}",
        daemon.log()
    );
    let out = json(
        &runner
            .push_to_talk(true)
            .await
            .expect("the daemon still answers"),
    );
    assert_eq!(out["listening"], true, "{out}");
    let _ = runner.push_to_talk(false).await;
    monitor.stop().await;
    wait_trigger_saying(
        &runner,
        "keyboard-monitor",
        "unavailable",
        "went away",
        || daemon.log(),
    )
    .await;

    // A working one appears: bound, and its key works.
    let monitor = Monitor::start(&bus.address, GrabReply::Ok).await;
    wait_trigger(&runner, "keyboard-monitor", "bound", || daemon.log()).await;
    monitor.wait_calls(1).await;
    monitor.key(false, F13).await;
    assert!(wait_listening(&runner, true).await, "{}", daemon.log());
}

#[tokio::test]
async fn a_restarted_portal_frontend_is_followed_and_the_shortcut_bound_again() {
    let bus = DbusSession::start();
    let mut portal = FakePortal::start(&bus.address).await;
    let backend = portal.connection().clone();
    let daemon = Daemon::start(
        &bus.address,
        "[ptt]\nportal = true\nkeyboard_monitor = false\nshortcut = \"F13\"\nmin_hold_ms = 0\n",
    );
    wait_for_name(&backend, RUNNER_NAME, || daemon.log()).await;
    let runner = runner_proxy(&backend).await;
    wait_trigger(&runner, "portal", "bound", || daemon.log()).await;
    let first = portal.session().expect("the first session");
    assert_eq!(portal.seen.lock().unwrap().bound.len(), 1);

    portal.stop_frontend().await;
    wait_trigger_saying(&runner, "portal", "unavailable", "went away", || {
        daemon.log()
    })
    .await;

    portal.start_frontend().await;
    let log = || format!("{}\n--- frontend:\n{}", daemon.log(), portal.frontend_log());
    wait_trigger(&runner, "portal", "bound", log).await;
    let second = portal.session().expect("the second session");
    assert_ne!(first, second, "a new session with the new frontend");
    assert_eq!(portal.seen.lock().unwrap().bound.len(), 2);
    portal.key(&second, "push-to-talk", true, 2000).await;
    assert!(
        wait_listening(&runner, true).await,
        "the new frontend's Activated drives Listening; log:\n{}",
        log()
    );
    portal.key(&second, "push-to-talk", false, 2500).await;
    assert!(wait_listening(&runner, false).await);
}
