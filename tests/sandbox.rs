//! `[security] enforce = true` (issue 16): plugins under a real bubblewrap, checked from the
//! outside. A plugin without `network` cannot reach a listener on the host's loopback; it
//! reads only what its sandbox holds and writes only its `write_paths`; a socket-transport
//! plugin still connects and still receives a passed descriptor; and what the runner
//! reports (`runner.status`, `runner.validate_plugin`) is what is in force.
//!
//! Needs `bwrap` (Debian package `bubblewrap`, which `tests/run.sh` installs).

use crate::common;

use common::Sandbox;
use common::daemon::{Daemon, LIMIT};
use utter_protocol::serde_json::{Value, json};

fn plugin(id: &str, extra: &str, args: &[&str]) -> String {
    let mut argv = vec![common::bin("utter-test-plugin").display().to_string()];
    argv.extend(args.iter().map(|a| a.to_string()));
    format!(
        "[[plugin]]\nid = \"{id}\"\nkind = \"router\"\nentrypoint = {}\n{extra}\n",
        json!(argv)
    )
}

async fn invoke(
    client: &common::daemon::TestClient,
    plugin: &str,
    method: &str,
    params: Value,
) -> Value {
    client
        .call(
            "runner.invoke",
            json!({"plugin": plugin, "method": method, "params": params}),
        )
        .await
        .unwrap_or_else(|e| panic!("{plugin} {method}: {e:?}"))
}

fn report_of<'a>(status: &'a Value, id: &str) -> &'a Value {
    status["plugins"]
        .as_array()
        .and_then(|all| all.iter().find(|p| p["id"] == id))
        .unwrap_or_else(|| panic!("no plugin {id} in {status}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn plugins_run_in_the_bubblewrap_sandbox_the_runner_reports() {
    plugins_run_in_the_sandbox_the_runner_reports("bwrap").await;
}

/// The same with Landlock, the fallback where bwrap is missing (chosen here with
/// `[security] sandbox = "landlock"`): TCP denied, paths as configured, on the unchanged
/// file system.
#[tokio::test(flavor = "multi_thread")]
async fn plugins_run_under_landlock_rules_the_runner_reports() {
    plugins_run_in_the_sandbox_the_runner_reports("landlock").await;
}

async fn plugins_run_in_the_sandbox_the_runner_reports(mechanism: &str) {
    let sb = Sandbox::new();
    // What the sandboxed plugins try to reach.
    let readable = sb.path("shared/readable");
    let writable = sb.path("out");
    let outside = sb.path("elsewhere");
    for dir in [&readable, &writable, &outside] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let allowed_file = readable.join("notes.txt");
    std::fs::write(&allowed_file, "fine").unwrap();
    let secret = outside.join("secret.txt");
    std::fs::write(&secret, "private").unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = std::thread::spawn(move || {
        listener.set_nonblocking(false).ok();
        // Counts connections until the test ends (the listener is dropped with the thread).
        let mut n = 0;
        for stream in listener.incoming() {
            match stream {
                Ok(_) => n += 1,
                Err(_) => break,
            }
            if n >= 1 {
                break;
            }
        }
        n
    });

    let config = sb.write(
        "utter.toml",
        &format!(
            "config_version = 1\n[security]\nenforce = true\nsandbox = \"{mechanism}\"\n{}{}{}",
            plugin(
                "jail",
                &format!(
                    "read_paths = [{:?}]\nwrite_paths = [{:?}]",
                    readable.display().to_string(),
                    writable.display().to_string()
                ),
                &[]
            ),
            plugin("net", "permissions = [\"network\"]", &[]),
            plugin("sock", "transport = \"connect\"", &[]),
        ),
    );
    let daemon = Daemon::start(&sb, &config, None).await;
    let client = daemon.client().await;

    // From the outside: what the plugin without `network` can do.
    let target = format!("127.0.0.1:{port}");
    let probe = invoke(
        &client,
        "jail",
        "test.probe",
        json!({
            "connect": target,
            "read": [allowed_file.display().to_string(), secret.display().to_string()],
            "write": [writable.display().to_string(), outside.display().to_string()],
        }),
    )
    .await;
    assert_ne!(probe["connect"], "ok", "no network in the sandbox: {probe}");
    assert_eq!(
        probe["read"][allowed_file.display().to_string()],
        "ok",
        "{probe}"
    );
    assert_ne!(probe["read"][secret.display().to_string()], "ok", "{probe}");
    assert_eq!(
        probe["write"][writable.display().to_string()],
        "ok",
        "{probe}"
    );
    assert_ne!(
        probe["write"][outside.display().to_string()],
        "ok",
        "{probe}"
    );
    assert!(
        writable.join("written-by-plugin").exists(),
        "the write landed on the host"
    );
    assert!(!outside.join("written-by-plugin").exists());

    // The plugin granted `network` reaches the host's loopback.
    let probe = invoke(&client, "net", "test.probe", json!({"connect": target})).await;
    assert_eq!(probe["connect"], "ok", "{probe}");
    assert_eq!(accepted.join().unwrap(), 1);

    // A socket transport still connects, and a passed descriptor still arrives.
    let bytes: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
    let made = invoke(
        &client,
        "sock",
        "test.host",
        json!({"method": "handle.create", "params": {"data_b64": utter_core::handles::b64_encode(&bytes)}, "provenance": "user"}),
    )
    .await;
    let handle = made["result"]["handle"]
        .as_str()
        .unwrap_or_else(|| panic!("{made}"))
        .to_owned();
    let passed = invoke(
        &client,
        "sock",
        "test.fdpass",
        json!({"handle": handle, "provenance": "user"}),
    )
    .await;
    assert_eq!(passed["size"], 50_000, "{passed}");

    // The report is what is in force.
    let status = client.call("runner.status", json!({})).await.unwrap();
    let jail = &report_of(&status, "jail")["sandbox"];
    assert_eq!(jail["mechanism"], mechanism, "{jail}");
    assert_eq!(jail["enforced"], true, "{jail}");
    let denied = if mechanism == "bwrap" {
        "denied"
    } else {
        "tcp-denied"
    };
    assert_eq!(jail["network"], denied, "{jail}");
    // What the mechanism leaves open is said with it.
    let limits = jail["limits"].as_array().map_or(0, Vec::len);
    if mechanism == "bwrap" {
        assert_eq!(limits, 0, "{jail}");
    } else {
        assert!(
            jail["limits"][0]
                .as_str()
                .unwrap()
                .contains("UDP and unix sockets"),
            "{jail}"
        );
    }
    let listed = |key: &str, path: &std::path::Path| {
        jail[key]
            .as_array()
            .is_some_and(|a| a.iter().any(|p| p == &json!(path.display().to_string())))
    };
    assert!(listed("read_paths", &readable), "{jail}");
    assert!(listed("write_paths", &writable), "{jail}");
    assert!(!listed("read_paths", &outside), "{jail}");
    assert_eq!(report_of(&status, "net")["sandbox"]["network"], "allowed");
    let validated = client
        .call("runner.validate_plugin", json!({"plugin": "net"}))
        .await
        .unwrap();
    let network = validated["permissions"]
        .as_array()
        .and_then(|a| a.iter().find(|p| p["name"] == "network"))
        .cloned()
        .unwrap_or_else(|| panic!("{validated}"));
    assert_eq!(network["enforced"], true, "{validated}");
    assert_eq!(network["mechanism"], mechanism, "{validated}");

    // `utter plugins --json` reports the same sandbox (started by the CLI itself).
    let run = common::run_utter(
        &[
            "plugins",
            "--json",
            "--config",
            &config.display().to_string(),
        ],
        &common::daemon::env(&sb, "client-state"),
    )
    .await;
    assert_eq!(run.code, Some(0), "{run}");
    let listed = run.json();
    let jail = listed
        .as_array()
        .and_then(|a| a.iter().find(|p| p["id"] == "jail"))
        .cloned()
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(jail["sandbox"]["network"], denied, "{jail}");
    // And in words, under the plugin's row.
    let run = common::run_utter(
        &["plugins", "--config", &config.display().to_string()],
        &common::daemon::env(&sb, "client-state"),
    )
    .await;
    assert!(
        run.stdout
            .contains(&format!("sandbox: {mechanism}, network {denied}")),
        "{run}"
    );
    let _ = LIMIT;
}

/// Without `[security] enforce` nothing is confined, and every permission says so.
#[tokio::test(flavor = "multi_thread")]
async fn without_enforce_every_permission_is_advisory() {
    let sb = Sandbox::new();
    let config = sb.write(
        "utter.toml",
        &format!(
            "config_version = 1\n{}",
            plugin("free", "permissions = [\"network\", \"clipboard\"]", &[])
        ),
    );
    let daemon = Daemon::start(&sb, &config, None).await;
    let client = daemon.client().await;
    let validated = client
        .call("runner.validate_plugin", json!({"plugin": "free"}))
        .await
        .unwrap();
    assert_eq!(validated["sandbox"]["mechanism"], "none", "{validated}");
    assert_eq!(
        validated["sandbox"]["network"], "unrestricted",
        "{validated}"
    );
    for p in validated["permissions"].as_array().expect("permissions") {
        assert_eq!(p["enforced"], false, "{validated}");
        assert!(
            p["detail"]
                .as_str()
                .is_some_and(|d| d.contains("enforce is off")),
            "{validated}"
        );
    }
}

/// The session bus reaches a sandboxed plugin only with the `dbus` permission: without it
/// the plugin has neither the address nor the socket (the bus is how a plugin would reach
/// the runner's own D-Bus interface, or any other service of the session).
#[tokio::test(flavor = "multi_thread")]
async fn the_session_bus_is_passed_into_a_sandbox_only_with_the_dbus_permission() {
    let sb = Sandbox::new();
    // Where the daemon's environment says the session bus and the Wayland display are:
    // listening sockets stand in.
    let bus = sb.path("run/no-such-bus");
    std::fs::create_dir_all(bus.parent().unwrap()).unwrap();
    let _listener = std::os::unix::net::UnixListener::bind(&bus).expect("bind the bus socket");
    let display = sb.path("run/utter-test-display");
    let _display = std::os::unix::net::UnixListener::bind(&display).expect("bind the display");
    let config = sb.write(
        "utter.toml",
        &format!(
            "config_version = 1\n[security]\nenforce = true\nsandbox = \"bwrap\"\n{}{}",
            plugin("nobus", "", &[]),
            plugin("bus", "permissions = [\"dbus\", \"wayland\"]", &[]),
        ),
    );
    let daemon = Daemon::start(&sb, &config, None).await;
    let client = daemon.client().await;
    let probe = |id: &'static str, socket: &std::path::Path| {
        let client = &client;
        let socket = socket.display().to_string();
        async move {
            invoke(
                client,
                id,
                "test.probe",
                json!({"env": ["DBUS_SESSION_BUS_ADDRESS", "WAYLAND_DISPLAY"],
                       "connect_unix": socket, "open_tty": true}),
            )
            .await
        }
    };
    let without = probe("nobus", &bus).await;
    assert_eq!(
        without["env"]["DBUS_SESSION_BUS_ADDRESS"], false,
        "{without}"
    );
    assert_eq!(without["env"]["WAYLAND_DISPLAY"], false, "{without}");
    assert_ne!(without["connect_unix"], "ok", "{without}");
    assert_ne!(probe("nobus", &display).await["connect_unix"], "ok");
    // No controlling terminal (a session of its own), so no keystrokes pushed into the
    // shell that started the runner.
    assert_ne!(without["open_tty"], "ok", "{without}");
    let with = probe("bus", &bus).await;
    assert_eq!(with["env"]["DBUS_SESSION_BUS_ADDRESS"], true, "{with}");
    assert_eq!(with["env"]["WAYLAND_DISPLAY"], true, "{with}");
    assert_eq!(with["connect_unix"], "ok", "{with}");
    assert_eq!(probe("bus", &display).await["connect_unix"], "ok");
    // The report says so.
    let status = client
        .call("runner.status", json!({}))
        .await
        .expect("status");
    let report = report_of(&status, "nobus");
    assert!(
        !report["sandbox"]["sockets"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s == &json!(bus.display().to_string())),
        "{report}"
    );
    let report = report_of(&status, "bus");
    let dbus = report["sandbox"]["permissions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "dbus")
        .cloned()
        .unwrap_or_default();
    assert_eq!(dbus["enforced"], true, "{report}");
}
