//! The D-Bus door of `utter daemon`, tested through real processes: a private `dbus-daemon`
//! started by each test, the real `utter daemon` binary as a child process with its own socket
//! and config, `busctl` and `gdbus` as a user would run them, and a fake notification server
//! (a zbus object in the test process) standing in for the desktop's.
//!
//! Debian packages: dbus-daemon (the bus), systemd (busctl), libglib2.0-bin (gdbus),
//! util-linux (setpriv, for the other-user test, which runs only as root).

use crate::common;

use common::daemon::Daemon;
use common::{ChildEnv, DbusSession, Sandbox, bin, repo_root};
use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use utter_protocol::serde_json::{self, Value, json};
use zbus::Connection;
use zbus::message::Header;
use zbus::names::BusName;
use zbus::zvariant::{OwnedValue, Value as DbusValue};

/// The longest any single wait in these tests may take before it fails.
const LIMIT: Duration = Duration::from_secs(60);

const RUNNER_NAME: &str = "dev.utter.Runner1";
const RUNNER_PATH: &str = "/dev/utter/Runner1";
const NOTIFICATIONS: &str = "org.freedesktop.Notifications";
const NOTIFICATIONS_PATH: &str = "/org/freedesktop/Notifications";

// ---------------------------------------------------------------------------------------
// The runner as a child process

/// `utter --config CONFIG daemon --socket <dir>/<name>.sock` serving D-Bus, with the tests'
/// PATH and `env` only; its stderr in `<dir>/<name>.log`. Stopped (SIGTERM, then SIGKILL)
/// on drop.
fn start_daemon(dir: &Path, name: &str, config: &Path, env: &ChildEnv) -> Daemon {
    Daemon::builder_at(dir, name)
        .config(config)
        .env(env.clone())
        .dbus()
        .spawn()
}

/// SIGTERM `pid` and wait up to 10 s for it to go (so the runner drains its plugins), then
/// SIGKILL it.
fn stop_process(pid: u32) {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let Ok(raw) = i32::try_from(pid) else { return };
    let pid = Pid::from_raw(raw);
    if kill(pid, Signal::SIGTERM).is_err() {
        return;
    }
    for _ in 0..200 {
        // A zombie child still answers kill(0); /proc/<pid>/stat tells it apart.
        let stat = std::fs::read_to_string(format!("/proc/{raw}/stat")).unwrap_or_default();
        if stat.is_empty() || stat.contains(") Z ") {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = kill(pid, Signal::SIGKILL);
}

/// Poll `check` every 50 ms for up to `limit`.
async fn wait_until(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    common::wait_for(limit, &mut check).await
}

/// A config file: `body` after `config_version = 1`.
fn write_config(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("config_version = 1\n{body}")).expect("write config");
    path
}

/// `[[plugin]]` running `argv`.
fn plugin(id: &str, kind: &str, argv: &[&str]) -> String {
    format!(
        "\n[[plugin]]\nid = \"{id}\"\nkind = \"{kind}\"\nentrypoint = {}\n",
        json!(argv)
    )
}

/// The built-in plugins, run from this build's `utter`.
fn builtin_plugins() -> String {
    let utter = bin("utter").display().to_string();
    plugin("rules", "router", &[&utter, "plugin", "rules"])
        + &plugin("desktop", "action", &[&utter, "plugin", "desktop"])
}

/// One test plugin that plans a `terminal` step for "terminal <command>" and runs it,
/// recording every request it gets in `record`.
fn terminal_plugin(record: &Path) -> String {
    let program = bin("utter-test-plugin").display().to_string();
    let record = record.display().to_string();
    plugin(
        "test",
        "router",
        &[&program, "--plan-op", "terminal", "--record", &record],
    )
}

/// The `action.invoke` requests `record` holds.
fn invocations(record: &Path) -> Vec<Value> {
    std::fs::read_to_string(record)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["method"] == "action.invoke")
        .collect()
}

// ---------------------------------------------------------------------------------------
// Talking to the bus

async fn connect(address: &str) -> Connection {
    zbus::connection::Builder::address(address)
        .expect("bus address")
        .method_timeout(Duration::from_secs(120))
        .build()
        .await
        .expect("connect to the private bus")
}

async fn dbus_proxy(conn: &Connection) -> zbus::fdo::DBusProxy<'static> {
    zbus::fdo::DBusProxy::builder(conn)
        .cache_properties(zbus::proxy::CacheProperties::No)
        .build()
        .await
        .expect("org.freedesktop.DBus proxy")
}

/// Wait until `name` has an owner on the bus; its unique name.
async fn wait_for_name(conn: &Connection, name: &str) -> String {
    let bus = dbus_proxy(conn).await;
    let deadline = tokio::time::Instant::now() + LIMIT;
    loop {
        let wanted = BusName::try_from(name).expect("bus name");
        if let Ok(owner) = bus.get_name_owner(wanted).await {
            return owner.to_string();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} never appeared on the bus"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn pid_of(conn: &Connection, name: &str) -> u32 {
    dbus_proxy(conn)
        .await
        .get_connection_unix_process_id(BusName::try_from(name).expect("bus name"))
        .await
        .expect("the bus knows the pid")
}

#[zbus::proxy(
    interface = "dev.utter.Runner1",
    default_service = "dev.utter.Runner1",
    default_path = "/dev/utter/Runner1",
    gen_blocking = false
)]
trait Runner1 {
    fn command(
        &self,
        utterance: &str,
        options: HashMap<&str, DbusValue<'_>>,
    ) -> zbus::Result<String>;
    fn status(&self) -> zbus::Result<String>;
    fn confirm(&self, id: &str, approved: bool) -> zbus::Result<()>;
    fn confirm_digest(&self, id: &str, digest: &str, approved: bool) -> zbus::Result<()>;
    fn list_pending(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn plugins(&self) -> zbus::Result<String>;
    #[zbus(signal)]
    fn confirmation_requested(
        &self,
        id: String,
        op: String,
        summary: String,
        args: String,
    ) -> zbus::Result<()>;
    #[zbus(signal)]
    fn confirmation_resolved(&self, id: String, approved: bool, by: String) -> zbus::Result<()>;
    #[zbus(signal)]
    fn plugin_state_changed(&self, id: String, epoch: u32, status: String) -> zbus::Result<()>;
}

async fn runner_proxy(conn: &Connection) -> Runner1Proxy<'static> {
    Runner1Proxy::builder(conn)
        .cache_properties(zbus::proxy::CacheProperties::No)
        .build()
        .await
        .expect("runner proxy")
}

/// The next item of a signal stream, within [`LIMIT`].
async fn next<S: futures::Stream + Unpin>(stream: &mut S, what: &str) -> S::Item {
    tokio::time::timeout(LIMIT, stream.next())
        .await
        .unwrap_or_else(|_| panic!("no {what} within {LIMIT:?}"))
        .unwrap_or_else(|| panic!("the {what} stream ended"))
}

/// The name of a D-Bus error.
fn error_name(e: &zbus::Error) -> String {
    match e {
        zbus::Error::MethodError(name, _, _) => name.to_string(),
        other => format!("not a method error: {other}"),
    }
}

/// A command line tool run to completion (two minutes at most).
struct Tool {
    ok: bool,
    stdout: String,
    stderr: String,
}

async fn run_tool(program: &str, args: &[&str], env: &[(&str, &str)]) -> Tool {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .env_clear()
        .stdin(Stdio::null())
        .kill_on_drop(true);
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{program} {args:?} did not finish"))
        .unwrap_or_else(|e| panic!("{program} runs ({e}); see this file's doc for packages"));
    Tool {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `busctl --address=ADDR --json=short ARGS...`, its JSON answer.
async fn busctl_json(address: &str, args: &[&str]) -> Value {
    let address_arg = format!("--address={address}");
    let mut all = vec![address_arg.as_str(), "--json=short"];
    all.extend_from_slice(args);
    let out = run_tool("busctl", &all, &[]).await;
    assert!(
        out.ok,
        "busctl {all:?} failed:\n{}\n{}",
        out.stdout, out.stderr
    );
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("busctl printed no JSON ({e}): {}", out.stdout))
}

/// A bus with the runner on it, started with `config_body`.
struct Rig {
    // Dropped in this order: the runner first, the bus after it.
    daemon: Daemon,
    conn: Connection,
    bus: DbusSession,
    _sandbox: Sandbox,
    dir: tempfile::TempDir,
}

impl Rig {
    async fn start(config_body: &str) -> Rig {
        let bus = DbusSession::start();
        Rig::start_on(bus, config_body).await
    }

    async fn start_on(bus: DbusSession, config_body: &str) -> Rig {
        let dir = tempfile::tempdir().expect("temp dir");
        let sandbox = Sandbox::new();
        // Dry runs of `open …` name the application that would open the URL.
        sandbox.install_url_recorder();
        let config = write_config(dir.path(), "utter.toml", config_body);
        let daemon = start_daemon(
            dir.path(),
            "runner",
            &config,
            &sandbox.env(Some(&bus.address)),
        );
        let conn = connect(&bus.address).await;
        wait_for_name(&conn, RUNNER_NAME).await;
        Rig {
            dir,
            _sandbox: sandbox,
            daemon,
            bus,
            conn,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Shell tools, properties, errors

#[tokio::test]
async fn busctl_and_gdbus_run_a_dry_run_command_and_read_the_properties() {
    let rig = Rig::start(&builtin_plugins()).await;
    let address = rig.bus.address.as_str();

    let answer = busctl_json(
        address,
        &[
            "call",
            RUNNER_NAME,
            RUNNER_PATH,
            RUNNER_NAME,
            "Command",
            "sa{sv}",
            "open youtube",
            "1",
            "dry_run",
            "b",
            "true",
        ],
    )
    .await;
    assert_eq!(answer["type"], "s", "{answer}");
    let outcome: Value =
        serde_json::from_str(answer["data"][0].as_str().expect("one string")).expect("JSON");
    assert_eq!(outcome["dry_run"], true, "{outcome}");
    assert_eq!(outcome["results"][0]["op"], "ensure_url", "{outcome}");
    assert_eq!(
        outcome["results"][0]["args"]["url"], "https://www.youtube.com",
        "{outcome}"
    );
    assert_eq!(outcome["results"][0]["ok"], true, "{outcome}");

    let gdbus = run_tool(
        "gdbus",
        &[
            "call",
            "--address",
            address,
            "--dest",
            RUNNER_NAME,
            "--object-path",
            RUNNER_PATH,
            "--method",
            "dev.utter.Runner1.Command",
            "open youtube",
            "{'dry_run': <true>, 'timeout_ms': <uint32 20000>}",
        ],
        &[],
    )
    .await;
    assert!(gdbus.ok, "gdbus failed: {}{}", gdbus.stdout, gdbus.stderr);
    assert!(
        gdbus.stdout.contains(r#"\"op\":\"ensure_url\""#)
            || gdbus.stdout.contains(r#""op":"ensure_url""#),
        "{}",
        gdbus.stdout
    );
    assert!(
        gdbus.stdout.contains("https://www.youtube.com"),
        "{}",
        gdbus.stdout
    );

    let state = busctl_json(
        address,
        &[
            "get-property",
            RUNNER_NAME,
            RUNNER_PATH,
            RUNNER_NAME,
            "State",
        ],
    )
    .await;
    assert_eq!(state, json!({"type": "s", "data": "ready"}));
    let plugins = busctl_json(
        address,
        &[
            "get-property",
            RUNNER_NAME,
            RUNNER_PATH,
            RUNNER_NAME,
            "Plugins",
        ],
    )
    .await;
    let plugins: Value =
        serde_json::from_str(plugins["data"].as_str().expect("a string")).expect("JSON");
    let ids: Vec<&str> = plugins
        .as_array()
        .expect("an array")
        .iter()
        .filter_map(|p| p["id"].as_str())
        .collect();
    assert_eq!(ids, ["rules", "desktop"], "{plugins}");
    assert!(
        plugins
            .as_array()
            .expect("array")
            .iter()
            .all(|p| p["status"] == "ok"),
        "{plugins}"
    );
    let version = busctl_json(
        address,
        &[
            "get-property",
            RUNNER_NAME,
            RUNNER_PATH,
            RUNNER_NAME,
            "Version",
        ],
    )
    .await;
    assert_eq!(version["data"], env!("CARGO_PKG_VERSION"));

    // Errors carry our own names and say what is wrong.
    let proxy = runner_proxy(&rig.conn).await;
    let e = proxy
        .command(
            "open youtube",
            HashMap::from([
                ("dry_run", DbusValue::Bool(true)),
                ("loud", DbusValue::U32(1)),
            ]),
        )
        .await
        .expect_err("an unknown option is refused");
    assert_eq!(error_name(&e), "dev.utter.Runner1.Error.InvalidArgs");
    assert!(e.to_string().contains("\"loud\""), "{e}");
    let e = proxy
        .command(
            "open youtube",
            HashMap::from([("dry_run", DbusValue::from("yes"))]),
        )
        .await
        .expect_err("dry_run must be a boolean");
    assert_eq!(error_name(&e), "dev.utter.Runner1.Error.InvalidArgs");
    let e = proxy
        .confirm("0123456789abcdef0123456789abcdef", true)
        .await
        .expect_err("no such confirmation");
    assert_eq!(error_name(&e), "dev.utter.Runner1.Error.NoSuchConfirmation");
    assert_eq!(proxy.list_pending().await.expect("ListPending"), "[]");
    let status: Value = serde_json::from_str(&proxy.status().await.expect("Status")).expect("JSON");
    assert_eq!(status["state"], "ready", "{status}");
    assert_eq!(status["version"], env!("CARGO_PKG_VERSION"), "{status}");
}

#[tokio::test]
async fn reload_reports_changes_and_refuses_an_invalid_config_with_file_line_and_key() {
    let rig = Rig::start(&builtin_plugins()).await;
    let proxy = runner_proxy(&rig.conn).await;
    let config = rig.dir.path().join("utter.toml");
    let report: Value = serde_json::from_str(
        &zbus::Proxy::new(&rig.conn, RUNNER_NAME, RUNNER_PATH, RUNNER_NAME)
            .await
            .expect("proxy")
            .call::<_, _, String>("Reload", &())
            .await
            .expect("Reload"),
    )
    .expect("JSON");
    assert_eq!(report["unchanged"], json!(["rules", "desktop"]), "{report}");

    std::fs::write(
        &config,
        "config_version = 1\n[runner]\nrpc_timeout_ms = \"soon\"\n",
    )
    .expect("write");
    let e = zbus::Proxy::new(&rig.conn, RUNNER_NAME, RUNNER_PATH, RUNNER_NAME)
        .await
        .expect("proxy")
        .call::<_, _, String>("Reload", &())
        .await
        .expect_err("an invalid config is refused");
    assert_eq!(error_name(&e), "dev.utter.Runner1.Error.ConfigInvalid");
    let text = e.to_string();
    assert!(
        text.contains(&format!("{}:3: runner.rpc_timeout_ms", config.display())),
        "{text}"
    );
    let status: Value = serde_json::from_str(&proxy.status().await.expect("Status")).expect("JSON");
    assert_eq!(
        status["state"], "ready",
        "the running config stays: {status}"
    );
}

#[tokio::test]
async fn the_book_examples_run() {
    // The book's D-Bus chapter (docs/src/dbus.md), which the README points to.
    let chapter =
        std::fs::read_to_string(repo_root().join("docs/src/dbus.md")).expect("docs/src/dbus.md");
    let section = chapter
        .split("# D-Bus\n")
        .nth(1)
        .expect("docs/src/dbus.md has a \"# D-Bus\" heading");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the D-Bus section has a sh code block");
    let commands: Vec<&str> = block
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert!(commands.len() >= 4, "{commands:?}");

    let rig = Rig::start(&builtin_plugins()).await;
    // `--user` and `--session` find the private bus through DBUS_SESSION_BUS_ADDRESS; the
    // runtime directory has no `bus` of its own.
    let runtime = rig.dir.path().join("run");
    std::fs::create_dir_all(&runtime).expect("runtime dir");
    let runtime = runtime.display().to_string();
    let env = [
        ("DBUS_SESSION_BUS_ADDRESS", rig.bus.address.as_str()),
        ("XDG_RUNTIME_DIR", runtime.as_str()),
    ];
    let mut saw_command = false;
    for command in commands {
        let out = run_tool("sh", &["-c", command], &env).await;
        assert!(
            out.ok,
            "command of docs/src/dbus.md failed: {command}\n{}{}",
            out.stdout, out.stderr
        );
        assert!(!out.stdout.trim().is_empty(), "no output: {command}");
        if command.contains(" Command ") {
            saw_command = true;
            assert!(
                out.stdout.contains("ensure_url"),
                "{command}: {}",
                out.stdout
            );
        }
        if command.ends_with(" State") {
            assert_eq!(out.stdout.trim(), "s \"ready\"", "{command}");
        }
    }
    assert!(saw_command, "docs/src/dbus.md shows a Command call");
}

// ---------------------------------------------------------------------------------------
// Signals

#[tokio::test]
async fn a_killed_plugin_is_signalled_and_comes_back_with_the_next_epoch() {
    let program = bin("utter-test-plugin").display().to_string();
    let rig = Rig::start(&plugin("victim", "action", &[&program])).await;
    let proxy = runner_proxy(&rig.conn).await;
    let mut changes = proxy
        .receive_plugin_state_changed()
        .await
        .expect("subscribe PluginStateChanged");
    let properties = zbus::fdo::PropertiesProxy::builder(&rig.conn)
        .destination(RUNNER_NAME)
        .expect("destination")
        .path(RUNNER_PATH)
        .expect("path")
        .build()
        .await
        .expect("Properties proxy");
    let mut properties_changed = properties
        .receive_properties_changed()
        .await
        .expect("subscribe PropertiesChanged");

    let status: Value = serde_json::from_str(&proxy.status().await.expect("Status")).expect("JSON");
    let victim = &status["plugins"][0];
    assert_eq!(victim["id"], "victim", "{status}");
    assert_eq!(victim["status"], "ok", "{status}");
    let epoch = victim["epoch"].as_u64().expect("epoch");
    let pid = victim["pid"].as_u64().expect("pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(pid).expect("pid fits")),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill -9 the plugin");

    let mut seen = Vec::new();
    loop {
        let signal = next(&mut changes, "PluginStateChanged").await;
        let args = signal.args().expect("PluginStateChanged args");
        seen.push((args.id.clone(), args.epoch, args.status.clone()));
        assert_eq!(args.id, "victim");
        if u64::from(args.epoch) == epoch + 1 && args.status == "ok" {
            break;
        }
    }
    assert!(
        seen.iter()
            .any(|(_, e, s)| u64::from(*e) == epoch && s != "ok"),
        "the crash itself is signalled first: {seen:?}"
    );

    // Plugins and State announced the changes with PropertiesChanged: the runner went
    // degraded, the plugin came back, the runner is ready again.
    let (mut degraded, mut back, mut ready_again) = (false, false, false);
    while !(degraded && back && ready_again) {
        let change = next(&mut properties_changed, "PropertiesChanged").await;
        let args = change.args().expect("PropertiesChanged args");
        assert_eq!(args.interface_name.as_str(), RUNNER_NAME);
        if let Some(DbusValue::Str(state)) = args.changed_properties.get("State") {
            match state.as_str() {
                "degraded" => degraded = true,
                "ready" if degraded => ready_again = true,
                _ => {}
            }
        }
        if let Some(DbusValue::Str(text)) = args.changed_properties.get("Plugins") {
            let plugins: Value = serde_json::from_str(text.as_str()).expect("JSON");
            if plugins[0]["epoch"] == json!(epoch + 1) && plugins[0]["status"] == "ok" {
                assert_ne!(plugins[0]["pid"], json!(pid));
                back = true;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Introspection

/// One interface as comparable lines: every method, argument, property, signal and
/// annotation, in a fixed order.
fn describe_interface(xml: &str, interface: &str) -> Vec<String> {
    let node = zbus_xml::Node::from_reader(xml.as_bytes()).expect("introspection XML parses");
    let iface = node
        .interfaces()
        .iter()
        .find(|i| i.name().as_str() == interface)
        .unwrap_or_else(|| panic!("no interface {interface} in:\n{xml}"));
    let annotations = |list: &[zbus_xml::Annotation]| -> String {
        let mut a: Vec<String> = list
            .iter()
            .map(|a| format!("@{}={}", a.name(), a.value()))
            .collect();
        a.sort();
        a.join(" ")
    };
    let args = |list: &[zbus_xml::Arg]| -> String {
        list.iter()
            .map(|a| {
                format!(
                    "{}:{}:{:?}",
                    a.name().unwrap_or("-"),
                    a.ty().inner(),
                    a.direction()
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut lines = Vec::new();
    for m in iface.methods() {
        lines.push(format!(
            "method {}({}) {}",
            m.name(),
            args(m.args()),
            annotations(m.annotations())
        ));
    }
    for s in iface.signals() {
        lines.push(format!(
            "signal {}({}) {}",
            s.name(),
            args(s.args()),
            annotations(s.annotations())
        ));
    }
    for p in iface.properties() {
        lines.push(format!(
            "property {} {} {:?} {}",
            p.name(),
            p.ty().inner(),
            p.access(),
            annotations(p.annotations())
        ));
    }
    lines.push(format!("interface {}", annotations(iface.annotations())));
    lines.sort();
    lines
}

#[tokio::test]
async fn the_live_interface_matches_the_committed_introspection_xml() {
    let program = bin("utter-test-plugin").display().to_string();
    let rig = Rig::start(&plugin("p", "action", &[&program])).await;
    let live: String = zbus::fdo::IntrospectableProxy::builder(&rig.conn)
        .destination(RUNNER_NAME)
        .expect("destination")
        .path(RUNNER_PATH)
        .expect("path")
        .build()
        .await
        .expect("Introspectable proxy")
        .introspect()
        .await
        .expect("Introspect");
    let committed = std::fs::read_to_string(repo_root().join("dbus/dev.utter.Runner1.xml"))
        .expect("dbus/dev.utter.Runner1.xml");
    let live_lines = describe_interface(&live, RUNNER_NAME);
    let committed_lines = describe_interface(&committed, RUNNER_NAME);
    assert_eq!(
        live_lines, committed_lines,
        "dbus/dev.utter.Runner1.xml does not match the live object; the live XML:\n{live}"
    );
    for member in [
        "method Command(utterance:s:Some(In), options:a{sv}:Some(In), outcome:s:Some(Out))",
        "signal ConfirmationRequested(id:s:None, op:s:None, summary:s:None, args:s:None)",
        "property State s Read",
    ] {
        assert!(
            live_lines.iter().any(|l| l.starts_with(member)),
            "{member} missing from {live_lines:#?}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Start-up without a bus, with a second runner, by activation

#[tokio::test]
async fn without_a_session_bus_the_socket_is_served_and_one_warning_names_d_bus() {
    let program = bin("utter-test-plugin").display().to_string();
    for unset in [true, false] {
        let dir = tempfile::tempdir().expect("temp dir");
        let sandbox = Sandbox::new();
        let config = write_config(
            dir.path(),
            "utter.toml",
            &plugin("p", "action", &[&program]),
        );
        // Either no address at all (and no $XDG_RUNTIME_DIR/bus), or one nothing listens on.
        let env = if unset {
            sandbox.env(None).without("DBUS_SESSION_BUS_ADDRESS")
        } else {
            sandbox.env(None)
        };
        let daemon = start_daemon(dir.path(), "runner", &config, &env);
        daemon.wait_log("utter::daemon: ready").await;
        let connected = wait_until(LIMIT, || {
            std::os::unix::net::UnixStream::connect(&daemon.socket).is_ok()
        })
        .await;
        assert!(connected, "the socket is served:\n{}", daemon.log());
        let log = daemon.log();
        let warnings: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("WARN") && l.contains("D-Bus"))
            .collect();
        assert_eq!(warnings.len(), 1, "exactly one D-Bus warning:\n{log}");
        assert!(warnings[0].contains("dev.utter.Runner1"), "{log}");
        if unset {
            assert!(
                warnings[0].contains("DBUS_SESSION_BUS_ADDRESS is unset"),
                "{log}"
            );
        }
        assert!(
            !log.lines().any(|l| l.contains("ERROR")),
            "no errors:\n{log}"
        );
    }
}

#[tokio::test]
async fn a_second_runner_leaves_the_name_to_the_first_and_says_so() {
    let program = bin("utter-test-plugin").display().to_string();
    let rig = Rig::start(&plugin("p", "action", &[&program])).await;
    let first_pid = pid_of(&rig.conn, RUNNER_NAME).await;
    assert_eq!(first_pid, rig.daemon.pid());

    let sandbox = Sandbox::new();
    let config = rig.dir.path().join("utter.toml");
    let second = start_daemon(
        rig.dir.path(),
        "second",
        &config,
        &sandbox.env(Some(&rig.bus.address)),
    );
    second.wait_log("utter::daemon: ready").await;
    let log = second.log();
    let error = log
        .lines()
        .find(|l| l.contains("ERROR"))
        .unwrap_or_else(|| panic!("the second runner logs an error:\n{log}"));
    assert!(
        error.contains("dev.utter.Runner1 is already owned"),
        "{log}"
    );
    assert!(error.contains(&format!("pid {first_pid}")), "{log}");
    assert_eq!(
        pid_of(&rig.conn, RUNNER_NAME).await,
        first_pid,
        "not replaced"
    );
}

/// A `dbus-daemon` run with a config file of the test (its own service directory); killed on
/// drop.
struct ConfiguredBus {
    address: String,
    child: std::process::Child,
}

impl ConfiguredBus {
    fn start(config: &Path) -> ConfiguredBus {
        let mut child = std::process::Command::new("dbus-daemon")
            .arg(format!("--config-file={}", config.display()))
            .args(["--nofork", "--print-address=1"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("dbus-daemon runs (apt-get install dbus-daemon)");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("dbus-daemon prints its address");
        assert!(line.starts_with("unix:"), "dbus-daemon said {line:?}");
        ConfiguredBus {
            address: line.trim().to_owned(),
            child,
        }
    }
}

impl Drop for ConfiguredBus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Stops a process that is not our child (one the bus started) on drop.
struct StopOnDrop(Option<u32>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            stop_process(pid);
        }
    }
}

/// A session bus config listening at `socket`, activating services from `services` (if any),
/// and open to every user when `any_user` (else only to the user running it).
fn bus_config(socket: &Path, services: Option<&Path>, any_user: bool) -> String {
    format!(
        r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
  {services}
  <policy context="default">
    {users}
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"#,
        socket = socket.display(),
        services = services
            .map(|s| format!("<servicedir>{}</servicedir>", s.display()))
            .unwrap_or_default(),
        users = if any_user { r#"<allow user="*"/>"# } else { "" },
    )
}

#[tokio::test]
async fn a_call_to_the_name_activates_the_runner_from_the_committed_service_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let services = dir.path().join("services");
    std::fs::create_dir_all(&services).expect("services dir");
    let program = bin("utter-test-plugin").display().to_string();
    let config = write_config(
        dir.path(),
        "utter.toml",
        &plugin("p", "action", &[&program]),
    );
    let socket = dir.path().join("activated.sock");
    let log = dir.path().join("activated.log");

    // The committed activation file, with its Exec= line pointing at this build; the runner
    // logs to a file through a shell so the test can show it.
    let template = std::fs::read_to_string(repo_root().join("dbus/dev.utter.Runner1.service"))
        .expect("dbus/dev.utter.Runner1.service");
    assert!(template.contains("\n[D-BUS Service]\n"), "{template}");
    assert!(
        template.contains("\nName=dev.utter.Runner1\n"),
        "{template}"
    );
    assert!(
        template.contains("\nExec=/usr/bin/utter daemon\n"),
        "{template}"
    );
    assert!(
        template.contains("\nSystemdService=utter.service\n"),
        "{template}"
    );
    let exec = format!(
        "Exec=/bin/sh -c 'exec {} --config {} daemon --socket {} 2>>{}'",
        bin("utter").display(),
        config.display(),
        socket.display(),
        log.display()
    );
    let activation = template.replace("Exec=/usr/bin/utter daemon", &exec);
    std::fs::write(services.join("dev.utter.Runner1.service"), activation).expect("write");
    let bus_conf = dir.path().join("bus.conf");
    std::fs::write(
        &bus_conf,
        bus_config(&dir.path().join("bus"), Some(&services), false),
    )
    .expect("write bus.conf");
    let bus = ConfiguredBus::start(&bus_conf);

    let conn = connect(&bus.address).await;
    let activatable = dbus_proxy(&conn)
        .await
        .list_activatable_names()
        .await
        .expect("ListActivatableNames");
    assert!(
        activatable.iter().any(|n| n.as_str() == RUNNER_NAME),
        "{activatable:?}"
    );
    // Nobody owns the name; this one call starts the runner and is answered by it.
    let mut guard = StopOnDrop(None);
    let status = tokio::time::timeout(LIMIT, async {
        let proxy = runner_proxy(&conn).await;
        proxy.status().await
    })
    .await
    .expect("the activating call is answered in time");
    if let Ok(pid) = dbus_proxy(&conn)
        .await
        .get_connection_unix_process_id(BusName::try_from(RUNNER_NAME).expect("name"))
        .await
    {
        guard.0 = Some(pid);
    }
    let status = status.unwrap_or_else(|e| {
        panic!(
            "the activating Status call failed: {e}\nrunner log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    });
    let status: Value = serde_json::from_str(&status).expect("JSON");
    assert_eq!(status["plugins"][0]["id"], "p", "{status}");
    assert!(guard.0.is_some(), "the activated runner is on the bus");
    drop(guard);
    drop(bus);
}

#[tokio::test]
async fn a_caller_of_another_uid_is_refused_with_access_denied() {
    if !nix::unistd::getuid().is_root() {
        eprintln!("skipped: switching to another uid needs root");
        return;
    }
    // A bus other users may connect to, in a directory they can enter.
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let bus_conf = dir.path().join("bus.conf");
    std::fs::write(&bus_conf, bus_config(&dir.path().join("bus"), None, true)).expect("write");
    let bus = ConfiguredBus::start(&bus_conf);
    let program = bin("utter-test-plugin").display().to_string();
    let config = write_config(
        dir.path(),
        "utter.toml",
        &plugin("p", "action", &[&program]),
    );
    let sandbox = Sandbox::new();
    let _daemon = start_daemon(
        dir.path(),
        "runner",
        &config,
        &sandbox.env(Some(&bus.address)),
    );
    let conn = connect(&bus.address).await;
    wait_for_name(&conn, RUNNER_NAME).await;

    let address = format!("--address={}", bus.address);
    let out = run_tool(
        "setpriv",
        &[
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "gdbus",
            "call",
            "--address",
            &bus.address,
            "--dest",
            RUNNER_NAME,
            "--object-path",
            RUNNER_PATH,
            "--method",
            "dev.utter.Runner1.Status",
        ],
        &[],
    )
    .await;
    assert!(!out.ok, "refused: {}", out.stdout);
    assert!(
        out.stderr.contains("dev.utter.Runner1.Error.AccessDenied"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("uid 65534"), "{}", out.stderr);
    // Reading a property is refused too (with the standard error of the Properties interface).
    let out = run_tool(
        "setpriv",
        &[
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "gdbus",
            "call",
            "--address",
            &bus.address,
            "--dest",
            RUNNER_NAME,
            "--object-path",
            RUNNER_PATH,
            "--method",
            "org.freedesktop.DBus.Properties.Get",
            RUNNER_NAME,
            "Plugins",
        ],
        &[],
    )
    .await;
    assert!(!out.ok, "refused: {}", out.stdout);
    assert!(
        out.stderr
            .contains("org.freedesktop.DBus.Error.AccessDenied"),
        "{}",
        out.stderr
    );
    // The same call as our own uid is answered.
    let own = run_tool(
        "busctl",
        &[
            &address,
            "call",
            RUNNER_NAME,
            RUNNER_PATH,
            RUNNER_NAME,
            "Status",
        ],
        &[],
    )
    .await;
    assert!(own.ok, "{}", own.stderr);
}

// ---------------------------------------------------------------------------------------
// Confirmations by desktop notification

/// One `Notify` call as the fake server received it.
#[derive(Debug, Clone)]
struct Shown {
    id: u32,
    caller: String,
    app_name: String,
    replaces_id: u32,
    icon: String,
    summary: String,
    body: String,
    actions: Vec<String>,
    urgency: Option<u8>,
    expire_timeout: i32,
}

#[derive(Debug, Default)]
struct Seen {
    shown: Vec<Shown>,
    closed: Vec<u32>,
}

/// A stand-in for the desktop's notification server (Desktop Notifications Specification
/// 1.2): records what it is asked, shows nothing.
struct FakeServer {
    next_id: AtomicU32,
    seen: Arc<Mutex<Seen>>,
}

#[zbus::interface(name = "org.freedesktop.Notifications")]
impl FakeServer {
    #[allow(clippy::too_many_arguments)]
    async fn notify(
        &self,
        #[zbus(header)] header: Header<'_>,
        app_name: String,
        replaces_id: u32,
        app_icon: String,
        summary: String,
        body: String,
        actions: Vec<String>,
        hints: HashMap<String, OwnedValue>,
        expire_timeout: i32,
    ) -> u32 {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let urgency = hints.get("urgency").and_then(|v| match &**v {
            DbusValue::U8(b) => Some(*b),
            _ => None,
        });
        self.seen.lock().expect("seen").shown.push(Shown {
            id,
            caller: header.sender().map(|s| s.to_string()).unwrap_or_default(),
            app_name,
            replaces_id,
            icon: app_icon,
            summary,
            body,
            actions,
            urgency,
            expire_timeout,
        });
        id
    }

    async fn close_notification(
        &self,
        #[zbus(signal_emitter)] emitter: zbus::object_server::SignalEmitter<'_>,
        id: u32,
    ) {
        self.seen.lock().expect("seen").closed.push(id);
        let _ = FakeServer::notification_closed(&emitter, id, 3).await;
    }

    fn get_capabilities(&self) -> Vec<String> {
        vec!["actions".into(), "body".into()]
    }

    fn get_server_information(&self) -> (String, String, String, String) {
        (
            "utter-tests".into(),
            "utter".into(),
            "1".into(),
            "1.2".into(),
        )
    }

    #[zbus(signal)]
    async fn action_invoked(
        emitter: &zbus::object_server::SignalEmitter<'_>,
        id: u32,
        action_key: &str,
    ) -> zbus::Result<()>;

    #[zbus(signal)]
    async fn notification_closed(
        emitter: &zbus::object_server::SignalEmitter<'_>,
        id: u32,
        reason: u32,
    ) -> zbus::Result<()>;
}

/// The fake server on the bus, owning `org.freedesktop.Notifications`.
struct Notifications {
    conn: Connection,
    seen: Arc<Mutex<Seen>>,
}

impl Notifications {
    async fn start(address: &str) -> Notifications {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let conn = zbus::connection::Builder::address(address)
            .expect("address")
            .serve_at(
                NOTIFICATIONS_PATH,
                FakeServer {
                    next_id: AtomicU32::new(7),
                    seen: seen.clone(),
                },
            )
            .expect("serve")
            .name(NOTIFICATIONS)
            .expect("name")
            .build()
            .await
            .expect("the fake notification server connects");
        Notifications { conn, seen }
    }

    /// Wait for the `n`th `Notify` (1-based).
    async fn wait_shown(&self, n: usize) -> Shown {
        let seen = self.seen.clone();
        let found = wait_until(LIMIT, || seen.lock().expect("seen").shown.len() >= n).await;
        assert!(found, "no Notify #{n} arrived");
        self.seen.lock().expect("seen").shown[n - 1].clone()
    }

    async fn wait_closed(&self, id: u32) {
        let seen = self.seen.clone();
        let closed = wait_until(LIMIT, || seen.lock().expect("seen").closed.contains(&id)).await;
        assert!(closed, "notification {id} was never withdrawn");
    }

    /// Send a signal to the connection that asked (servers often send these unicast).
    async fn signal(
        &self,
        to: &Shown,
        member: &str,
        body: &(impl serde::Serialize + zbus::zvariant::Type),
    ) {
        self.conn
            .emit_signal(
                Some(to.caller.as_str()),
                NOTIFICATIONS_PATH,
                NOTIFICATIONS,
                member,
                body,
            )
            .await
            .expect("emit");
    }

    async fn action(&self, shown: &Shown, key: &str) {
        self.signal(shown, "ActionInvoked", &(shown.id, key)).await;
    }

    async fn closed(&self, shown: &Shown, reason: u32) {
        self.signal(shown, "NotificationClosed", &(shown.id, reason))
            .await;
    }
}

/// A bus with a fake notification server and a runner whose router plans `terminal` steps.
struct ConfirmRig {
    rig: Rig,
    server: Notifications,
    proxy: Runner1Proxy<'static>,
    record: PathBuf,
    _record_dir: tempfile::TempDir,
}

impl ConfirmRig {
    async fn start(confirm_timeout_ms: u64) -> ConfirmRig {
        let bus = DbusSession::start();
        let server = Notifications::start(&bus.address).await;
        let record_dir = tempfile::tempdir().expect("temp dir");
        let record = record_dir.path().join("record.jsonl");
        let rig = Rig::start_on(
            bus,
            &format!(
                "[runner]\nconfirm_timeout_ms = {confirm_timeout_ms}\n\n[policy]\nenabled_ops = [\"terminal\"]\n{}",
                terminal_plugin(&record)
            ),
        )
        .await;
        rig.daemon
            .wait_log("confirmations are also asked by desktop notification")
            .await;
        let proxy = runner_proxy(&rig.conn).await;
        ConfirmRig {
            rig,
            server,
            proxy,
            record,
            _record_dir: record_dir,
        }
    }

    /// Start `Command("terminal <command>")` (no dry run) in a task.
    fn command(&self, command: &str) -> tokio::task::JoinHandle<zbus::Result<String>> {
        let proxy = self.proxy.clone();
        let utterance = format!("terminal {command}");
        tokio::spawn(async move { proxy.command(&utterance, HashMap::new()).await })
    }
}

/// The outcome JSON of a finished `Command`.
async fn finished(call: tokio::task::JoinHandle<zbus::Result<String>>) -> Value {
    let text = tokio::time::timeout(LIMIT, call)
        .await
        .expect("the command finishes")
        .expect("task")
        .expect("Command answered");
    serde_json::from_str(&text).expect("JSON outcome")
}

#[tokio::test]
async fn approve_in_the_notification_runs_the_exact_step() {
    let c = ConfirmRig::start(60_000).await;
    let mut requested = c
        .proxy
        .receive_confirmation_requested()
        .await
        .expect("subscribe");
    let mut resolved = c
        .proxy
        .receive_confirmation_resolved()
        .await
        .expect("subscribe");
    let call = c.command("echo 'hi <there>' && rm -rf ~/nothing");

    let request = next(&mut requested, "ConfirmationRequested").await;
    let request = request.args().expect("args");
    assert_eq!(request.op, "terminal");
    let args: Value = serde_json::from_str(&request.args).expect("args JSON");
    assert_eq!(
        args,
        json!({"command": "echo 'hi <there>' && rm -rf ~/nothing"})
    );

    let shown = c.server.wait_shown(1).await;
    assert_eq!(shown.app_name, "Utter");
    assert_eq!(shown.replaces_id, 0);
    assert_eq!(shown.icon, "");
    assert_eq!(shown.summary, "Confirm: terminal");
    assert_eq!(
        shown.body,
        format!("{}\n{}\nfrom user", request.summary, request.args),
        "the body carries the exact arguments (the server has no body-markup, so no escaping)"
    );
    assert_eq!(shown.actions, ["approve", "Approve", "deny", "Deny"]);
    assert_eq!(shown.urgency, Some(2));
    assert_eq!(shown.expire_timeout, 0);
    let runner_unique = wait_for_name(&c.rig.conn, RUNNER_NAME).await;
    assert_eq!(shown.caller, runner_unique, "the runner itself asked");
    assert!(
        invocations(&c.record).is_empty(),
        "nothing ran before the answer"
    );

    c.server.action(&shown, "approve").await;
    let outcome = finished(call).await;
    assert_eq!(outcome["results"][0]["ok"], true, "{outcome}");
    let resolution = next(&mut resolved, "ConfirmationResolved").await;
    let resolution = resolution.args().expect("args");
    assert_eq!(resolution.id, request.id);
    assert!(resolution.approved);
    assert_eq!(resolution.by, "notification");
    let ran = invocations(&c.record);
    assert_eq!(ran.len(), 1, "{ran:?}");
    assert_eq!(ran[0]["params"]["op"], "terminal");
    assert_eq!(ran[0]["params"]["args"], args);
    assert_eq!(ran[0]["params"]["dry_run"], false);
    // Answered: the notification is withdrawn.
    c.server.wait_closed(shown.id).await;
}

#[tokio::test]
async fn deny_or_dismissing_the_notification_denies_and_nothing_runs() {
    let c = ConfirmRig::start(60_000).await;
    let mut resolved = c
        .proxy
        .receive_confirmation_resolved()
        .await
        .expect("subscribe");
    for (n, how) in [(1, "deny"), (2, "dismissed")] {
        let call = c.command(&format!("echo {how}"));
        let shown = c.server.wait_shown(n).await;
        if how == "deny" {
            c.server.action(&shown, "deny").await;
        } else {
            // Reason 2: dismissed by the user.
            c.server.closed(&shown, 2).await;
        }
        let outcome = finished(call).await;
        assert_eq!(outcome["results"][0]["ok"], false, "{how}: {outcome}");
        assert_eq!(
            outcome["results"][0]["error"]["code"], -32003,
            "{how}: {outcome}"
        );
        let resolution = next(&mut resolved, "ConfirmationResolved").await;
        let resolution = resolution.args().expect("args");
        assert!(!resolution.approved, "{how}");
        assert_eq!(resolution.by, "notification", "{how}");
    }
    assert!(invocations(&c.record).is_empty(), "nothing ran");
}

#[tokio::test]
async fn no_answer_times_out_as_a_denial_and_the_notification_is_withdrawn() {
    let c = ConfirmRig::start(1_500).await;
    let mut resolved = c
        .proxy
        .receive_confirmation_resolved()
        .await
        .expect("subscribe");
    let call = c.command("echo late");
    let shown = c.server.wait_shown(1).await;
    let outcome = finished(call).await;
    assert_eq!(outcome["results"][0]["ok"], false, "{outcome}");
    let resolution = next(&mut resolved, "ConfirmationResolved").await;
    let resolution = resolution.args().expect("args");
    assert!(!resolution.approved);
    assert_eq!(resolution.by, "timeout");
    c.server.wait_closed(shown.id).await;
    assert!(invocations(&c.record).is_empty(), "nothing ran");
}

#[tokio::test]
async fn an_action_signal_from_another_connection_is_ignored() {
    let c = ConfirmRig::start(60_000).await;
    let mut resolved = c
        .proxy
        .receive_confirmation_resolved()
        .await
        .expect("subscribe");
    let call = c.command("echo forged");
    let shown = c.server.wait_shown(1).await;

    // Someone else on the bus sends "approve" for our notification id, straight to the runner.
    let intruder = connect(&c.rig.bus.address).await;
    intruder
        .emit_signal(
            Some(shown.caller.as_str()),
            NOTIFICATIONS_PATH,
            NOTIFICATIONS,
            "ActionInvoked",
            &(shown.id, "approve"),
        )
        .await
        .expect("emit the forged signal");
    c.rig
        .daemon
        .wait_log("ignored a signal that did not come from the notification server")
        .await;
    let pending: Value =
        serde_json::from_str(&c.proxy.list_pending().await.expect("ListPending")).expect("JSON");
    assert_eq!(
        pending.as_array().map(Vec::len),
        Some(1),
        "still pending: {pending}"
    );
    assert!(
        invocations(&c.record).is_empty(),
        "the forged approval ran nothing"
    );

    // The real server's answer still counts.
    c.server.action(&shown, "deny").await;
    let outcome = finished(call).await;
    assert_eq!(outcome["results"][0]["ok"], false, "{outcome}");
    let resolution = next(&mut resolved, "ConfirmationResolved").await;
    let resolution = resolution.args().expect("args");
    assert_eq!(resolution.by, "notification");
    assert!(!resolution.approved);
    assert!(invocations(&c.record).is_empty(), "nothing ran");
}

#[tokio::test]
async fn the_dbus_confirm_door_answers_and_the_notification_is_withdrawn() {
    let c = ConfirmRig::start(60_000).await;
    let mut requested = c
        .proxy
        .receive_confirmation_requested()
        .await
        .expect("subscribe");
    let mut resolved = c
        .proxy
        .receive_confirmation_resolved()
        .await
        .expect("subscribe");

    // 1. Approved over D-Bus while the notification is up: it runs, the notification goes.
    let call = c.command("echo via-dbus");
    let request = next(&mut requested, "ConfirmationRequested").await;
    let id = request.args().expect("args").id.clone();
    let shown = c.server.wait_shown(1).await;
    let pending: Value =
        serde_json::from_str(&c.proxy.list_pending().await.expect("ListPending")).expect("JSON");
    assert_eq!(pending[0]["id"], json!(id), "{pending}");
    assert_eq!(
        pending[0]["args"],
        json!({"command": "echo via-dbus"}),
        "{pending}"
    );
    c.proxy.confirm(&id, true).await.expect("Confirm");
    let outcome = finished(call).await;
    assert_eq!(outcome["results"][0]["ok"], true, "{outcome}");
    let resolution = next(&mut resolved, "ConfirmationResolved").await;
    let resolution = resolution.args().expect("args");
    assert_eq!(
        (resolution.approved, resolution.by.as_str()),
        (true, "dbus")
    );
    c.server.wait_closed(shown.id).await;
    let e = c
        .proxy
        .confirm(&id, true)
        .await
        .expect_err("an answer counts once");
    assert_eq!(error_name(&e), "dev.utter.Runner1.Error.NoSuchConfirmation");

    // 2. A notification that expired (reason 1) is no answer: D-Bus still decides.
    let call = c.command("echo after-expiry");
    let request = next(&mut requested, "ConfirmationRequested").await;
    let id = request.args().expect("args").id.clone();
    let shown = c.server.wait_shown(2).await;
    c.server.closed(&shown, 1).await;
    c.rig
        .daemon
        .wait_log("the notification expired or was withdrawn")
        .await;
    c.proxy.confirm(&id, false).await.expect("Confirm");
    let outcome = finished(call).await;
    assert_eq!(outcome["results"][0]["ok"], false, "{outcome}");
    let resolution = next(&mut resolved, "ConfirmationResolved").await;
    let resolution = resolution.args().expect("args");
    assert_eq!(
        (resolution.approved, resolution.by.as_str()),
        (false, "dbus")
    );

    let ran = invocations(&c.record);
    assert_eq!(ran.len(), 1, "only the approved step ran: {ran:?}");
    assert_eq!(ran[0]["params"]["args"]["command"], "echo via-dbus");
}

#[tokio::test]
async fn a_notification_server_that_comes_later_is_used_and_one_that_leaves_is_not() {
    let record_dir = tempfile::tempdir().expect("temp dir");
    let record = record_dir.path().join("record.jsonl");
    let rig = Rig::start(&format!(
        "[policy]\nenabled_ops = [\"terminal\"]\n{}",
        terminal_plugin(&record)
    ))
    .await;
    rig.daemon.wait_log("D-Bus: serving").await;
    assert!(
        !rig.daemon.log().contains("asked by desktop notification"),
        "no server yet:\n{}",
        rig.daemon.log()
    );

    let server = Notifications::start(&rig.bus.address).await;
    rig.daemon
        .wait_log("confirmations are also asked by desktop notification")
        .await;
    let proxy = runner_proxy(&rig.conn).await;
    let call = {
        let proxy = proxy.clone();
        tokio::spawn(async move { proxy.command("terminal echo late", HashMap::new()).await })
    };
    let shown = server.wait_shown(1).await;
    server.action(&shown, "deny").await;
    let outcome = finished(call).await;
    assert_eq!(outcome["results"][0]["ok"], false, "{outcome}");

    drop(server);
    rig.daemon
        .wait_log("the notification server left the bus")
        .await;
    assert!(invocations(&record).is_empty(), "nothing ran");
}

/// When the session bus goes away the session is over: the runner says so and stops
/// cleanly (it would otherwise outlive the session, holding what its caller gave it).
#[tokio::test]
async fn the_runner_stops_when_its_session_bus_goes_away() {
    let mut rig = Rig::start(&builtin_plugins()).await;
    rig.daemon.wait_log("ready").await;
    rig.bus.stop();
    let exited = wait_until(LIMIT, || matches!(rig.daemon.child.try_wait(), Ok(Some(_)))).await;
    assert!(exited, "the runner outlived its bus:\n{}", rig.daemon.log());
    let status = rig.daemon.child.wait().expect("waited");
    assert!(status.success(), "{status}\n{}", rig.daemon.log());
    let log = rig.daemon.log();
    assert!(log.contains("the session bus is gone"), "{log}");
    assert!(!rig.daemon.socket.exists(), "the socket was removed");
}

/// The script a hostile plugin starts (`--run-on-plan`): it waits for the runner's question,
/// tries to answer it itself over D-Bus, then to command for the person; each outcome goes
/// to the file `$1`.
const REACHING_PLUGIN: &str = r#"#!/bin/sh
out="$1"
call() { gdbus call --session --dest dev.utter.Runner1 --object-path /dev/utter/Runner1 --method "dev.utter.Runner1.$@"; }
id=""
for i in $(seq 1 200); do
  id=$(call ListPending 2>&1 | sed -n 's/.*"id":"\([0-9a-f]\{32\}\)".*/\1/p')
  [ -n "$id" ] && break
  sleep 0.05
done
echo "id=$id" >> "$out"
call Confirm "$id" true >> "$out" 2>&1; echo "confirm_status=$?" >> "$out"
call Command "terminal echo injected" "{}" >> "$out" 2>&1; echo "command_status=$?" >> "$out"
echo done >> "$out"
"#;

#[tokio::test]
async fn a_plugin_cannot_answer_its_own_question_or_command_over_d_bus() {
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("reach.sh");
    std::fs::write(&script, REACHING_PLUGIN).expect("script");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let out = dir.path().join("reach.out");
    let record = dir.path().join("record.jsonl");
    let program = bin("utter-test-plugin").display().to_string();
    let run = json!([script.display().to_string(), out.display().to_string()]).to_string();
    let rig = Rig::start(&format!(
        "[runner]\nconfirm_timeout_ms = 60000\n\n[policy]\nenabled_ops = [\"terminal\"]\n{}",
        plugin(
            "test",
            "router",
            &[
                &program,
                "--plan-op",
                "terminal",
                "--record",
                &record.display().to_string(),
                "--run-on-plan",
                &run,
            ],
        )
    ))
    .await;
    let proxy = runner_proxy(&rig.conn).await;
    let mut requested = proxy
        .receive_confirmation_requested()
        .await
        .expect("subscribe");
    let call = {
        let proxy = proxy.clone();
        tokio::spawn(async move {
            proxy
                .command("terminal echo from-the-person", HashMap::new())
                .await
        })
    };
    let request = next(&mut requested, "ConfirmationRequested").await;
    let id = request.args().expect("args").id.clone();
    let finished_script = wait_until(LIMIT, || {
        std::fs::read_to_string(&out).is_ok_and(|t| t.contains("done"))
    })
    .await;
    let said = std::fs::read_to_string(&out).unwrap_or_default();
    assert!(
        finished_script,
        "the plugin's script did not finish:\n{said}"
    );
    assert!(
        said.contains(&format!("id={id}")),
        "it saw the question: {said}"
    );
    assert!(said.contains("confirm_status=1"), "{said}");
    assert!(said.contains("command_status=1"), "{said}");
    assert!(said.contains("AccessDenied"), "{said}");
    assert!(
        said.contains("plugin \"test\""),
        "the refusal names the plugin: {said}"
    );
    // Still waiting for the person: the plugin's yes did not count.
    let pending: Value =
        serde_json::from_str(&proxy.list_pending().await.expect("ListPending")).expect("JSON");
    assert_eq!(pending[0]["id"], json!(id), "{pending}");
    assert!(
        invocations(&record).is_empty(),
        "nothing ran: {:?}",
        invocations(&record)
    );
    // The person's door: a yes bound to another step's digest does not count, the right
    // one does.
    let digest = pending[0]["request"]["digest"]
        .as_str()
        .or_else(|| pending[0]["digest"].as_str())
        .expect("a digest")
        .to_owned();
    let e = proxy
        .confirm_digest(&id, &"0".repeat(64), true)
        .await
        .expect_err("another digest");
    assert_eq!(error_name(&e), "dev.utter.Runner1.Error.NoSuchConfirmation");
    proxy
        .confirm_digest(&id, &digest, true)
        .await
        .expect("ConfirmDigest");
    let text = tokio::time::timeout(LIMIT, call)
        .await
        .expect("the command finishes")
        .expect("task")
        .expect("Command");
    let outcome: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(outcome["results"][0]["ok"], true, "{outcome}");
    let ran = invocations(&record);
    assert_eq!(ran.len(), 1, "only the person's step ran: {ran:?}");
    assert_eq!(ran[0]["params"]["args"]["command"], "echo from-the-person");
    let log = rig.daemon.log();
    assert!(
        log.contains("refused a client call from a plugin's process"),
        "{log}"
    );
}

/// The hand-off a hostile trial found: a plugin's child opens a bus connection, gives it to
/// a grandchild and exits, so the pid the bus names for the connection is gone. Such a
/// caller is refused too (whoever holds the connection cannot be told from the plugin).
const HANDING_PLUGIN: &str = r#"#!/bin/sh
out="$1"; bus="$2"; script="$3"
id=""
for i in $(seq 1 200); do
  id=$(gdbus call --session --dest dev.utter.Runner1 --object-path /dev/utter/Runner1 --method dev.utter.Runner1.ListPending 2>&1 | sed -n 's/.*"id":"\([0-9a-f]\{32\}\)".*/\1/p')
  [ -n "$id" ] && break
  sleep 0.05
done
/usr/bin/python3 "$script" "$bus" "$id" "$out.reply"
for i in $(seq 1 200); do [ -s "$out.reply" ] && break; sleep 0.05; done
echo "id=$id" >> "$out"
echo done >> "$out"
"#;

#[tokio::test]
async fn a_plugin_that_hands_its_bus_connection_on_is_refused_too() {
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("hand.sh");
    std::fs::write(&script, HANDING_PLUGIN).expect("script");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let out = dir.path().join("hand.out");
    let record = dir.path().join("record.jsonl");
    let program = bin("utter-test-plugin").display().to_string();
    let bus = DbusSession::start();
    let run = json!([
        script.display().to_string(),
        out.display().to_string(),
        bus.address,
        repo_root()
            .join("tests/dbus_handoff.py")
            .display()
            .to_string()
    ])
    .to_string();
    let rig = Rig::start_on(
        bus,
        &format!(
            "[runner]\nconfirm_timeout_ms = 60000\n\n[policy]\nenabled_ops = [\"terminal\"]\n{}",
            plugin(
                "test",
                "router",
                &[
                    &program,
                    "--plan-op",
                    "terminal",
                    "--record",
                    &record.display().to_string(),
                    "--run-on-plan",
                    &run,
                ],
            )
        ),
    )
    .await;
    let proxy = runner_proxy(&rig.conn).await;
    let mut requested = proxy
        .receive_confirmation_requested()
        .await
        .expect("subscribe");
    let call = {
        let proxy = proxy.clone();
        tokio::spawn(async move {
            proxy
                .command("terminal echo from-the-person", HashMap::new())
                .await
        })
    };
    let request = next(&mut requested, "ConfirmationRequested").await;
    let id = request.args().expect("args").id.clone();
    let finished = wait_until(LIMIT, || {
        std::fs::read_to_string(&out).is_ok_and(|t| t.contains("done"))
    })
    .await;
    let reply = std::fs::read_to_string(format!("{}.reply", out.display())).unwrap_or_default();
    assert!(finished, "the script did not finish: {reply}");
    assert!(
        reply.starts_with("error"),
        "the handed-on connection's Confirm: {reply}"
    );
    assert!(reply.contains("D-Bus Confirm is refused"), "{reply}");
    assert!(reply.contains("is gone"), "{reply}");
    // Still waiting: the person denies it.
    proxy.confirm(&id, false).await.expect("Confirm");
    let text = tokio::time::timeout(LIMIT, call)
        .await
        .expect("the command finishes")
        .expect("task")
        .expect("Command");
    let outcome: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(outcome["results"][0]["ok"], false, "{outcome}");
    assert!(invocations(&record).is_empty(), "nothing ran");
}

/// A plugin that runs its own notification server (there is none in the session) and
/// approves every notification it is shown: the runner does not take the server's word,
/// withdraws the notification, and the step waits for the person, who denies it.
#[tokio::test]
async fn a_notification_server_a_plugin_runs_cannot_approve_anything() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("server.log");
    let record = dir.path().join("record.jsonl");
    let program = bin("utter-test-plugin").display().to_string();
    let run = json!([
        repo_root()
            .join("tests/fake_notifications.py")
            .display()
            .to_string(),
        out.display().to_string(),
    ])
    .to_string();
    let rig = Rig::start(&format!(
        "[runner]\nconfirm_timeout_ms = 60000\n\n[policy]\nenabled_ops = [\"terminal\"]\n{}",
        plugin(
            "test",
            "router",
            &[
                &program,
                "--plan-op",
                "terminal",
                "--record",
                &record.display().to_string(),
                "--run-on-plan",
                &run,
            ],
        )
    ))
    .await;
    let proxy = runner_proxy(&rig.conn).await;
    let mut requested = proxy
        .receive_confirmation_requested()
        .await
        .expect("subscribe");
    let command = |words: &'static str| {
        let proxy = proxy.clone();
        tokio::spawn(async move { proxy.command(words, HashMap::new()).await })
    };
    // The first plan starts the plugin's server; its step is denied by the person.
    let first = command("terminal echo one");
    let id = next(&mut requested, "ConfirmationRequested")
        .await
        .args()
        .expect("args")
        .id
        .clone();
    let owning = wait_until(LIMIT, || {
        std::fs::read_to_string(&out).is_ok_and(|t| t.contains("owner"))
    })
    .await;
    assert!(
        owning,
        "the plugin's server did not take the name (python3-gi?)"
    );
    proxy.confirm(&id, false).await.expect("Confirm");
    let _ = tokio::time::timeout(LIMIT, first).await;
    // The second is shown to that server, which approves it at once: not taken.
    let second = command("terminal echo two");
    let id = next(&mut requested, "ConfirmationRequested")
        .await
        .args()
        .expect("args")
        .id
        .clone();
    let shown = wait_until(LIMIT, || {
        std::fs::read_to_string(&out).is_ok_and(|t| t.contains("notify") && t.contains("close"))
    })
    .await;
    let log = std::fs::read_to_string(&out).unwrap_or_default();
    assert!(shown, "the notification was not withdrawn: {log}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        invocations(&record).is_empty(),
        "nothing ran on the plugin's approval"
    );
    let pending = proxy.list_pending().await.expect("ListPending");
    assert!(
        pending.contains(&id),
        "still waiting for the person: {pending}"
    );
    proxy.confirm(&id, false).await.expect("Confirm");
    let text = tokio::time::timeout(LIMIT, second)
        .await
        .expect("the command finishes")
        .expect("task")
        .expect("Command");
    let outcome: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(outcome["results"][0]["ok"], false, "{outcome}");
    assert!(invocations(&record).is_empty(), "nothing ran");
}
