//! Helpers shared by the integration tests: where the built binaries are, a private
//! `dbus-daemon`, and a JSON-RPC client that spawns a real plugin process.
//!
//! The plugin binaries are built by `cargo build --workspace --bins` (the test script in
//! `tests/run.sh` does this before `cargo test`); a missing one fails with that advice.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};
use utter_protocol::serde_json::{Value, json};
use utter_protocol::{Connection, ConnectionOptions, ErrorObject};

/// The directory holding `utter` and the plugin binaries of this build.
pub fn bin_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_utter"))
        .parent()
        .expect("binary has a parent directory")
        .to_path_buf()
}

/// The path of a workspace binary, checked to exist.
pub fn bin(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace --bins` first (tests/run.sh does)",
        path.display()
    );
    path
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A private session bus: `dbus-daemon --session` on a socket in a temporary directory,
/// killed on drop.
pub struct DbusSession {
    /// `unix:path=...`, for `DBUS_SESSION_BUS_ADDRESS`.
    pub address: String,
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl DbusSession {
    /// Start a bus with the default session policy.
    pub fn start() -> DbusSession {
        let dir = tempfile::tempdir().expect("temp dir");
        let socket = dir.path().join("bus");
        let mut child = std::process::Command::new("dbus-daemon")
            .arg("--session")
            .arg("--nofork")
            .arg("--print-address=1")
            .arg(format!("--address=unix:path={}", socket.display()))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("dbus-daemon runs (apt-get install dbus-daemon)");
        let mut line = String::new();
        use std::io::BufRead;
        std::io::BufReader::new(child.stdout.take().expect("stdout piped"))
            .read_line(&mut line)
            .expect("dbus-daemon prints its address");
        assert!(line.starts_with("unix:"), "dbus-daemon said {line:?}");
        DbusSession {
            address: line.trim().to_owned(),
            child,
            _dir: dir,
        }
    }
}

impl Drop for DbusSession {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A real plugin process driven over its stdio by a JSON-RPC connection, as the runner would.
pub struct PluginProcess {
    /// The connection to the plugin.
    pub conn: Connection,
    /// The child process.
    pub child: Child,
}

impl PluginProcess {
    /// Spawn `program` with `envs` and complete the handshake (hello, describe, health).
    /// Returns the process and the hello result.
    pub async fn start(
        program: &Path,
        args: &[&str],
        envs: &[(&str, &str)],
    ) -> (PluginProcess, Value) {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("plugin spawns");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (conn, _incoming) = Connection::spawn(
            stdout,
            stdin,
            ConnectionOptions {
                label: program.display().to_string(),
                id_prefix: Some("0:".into()),
                ..Default::default()
            },
        );
        let hello = conn
            .request(
                "protocol.hello",
                json!({"protocol": "1.0", "abi": 1, "runner": "utter-tests", "epoch": 0}),
                Some(Duration::from_secs(10)),
            )
            .await
            .expect("hello answered");
        conn.request("plugin.describe", json!({}), Some(Duration::from_secs(10)))
            .await
            .expect("describe answered");
        conn.request("plugin.health", json!({}), Some(Duration::from_secs(10)))
            .await
            .expect("health answered");
        (PluginProcess { conn, child }, hello)
    }

    /// Call a method with a 20 s timeout.
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, ErrorObject> {
        self.conn
            .request(method, params, Some(Duration::from_secs(20)))
            .await
    }
}

/// Poll `check` every 50 ms for up to `limit`; true as soon as it holds.
pub async fn wait_for(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
