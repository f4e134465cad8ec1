//! A running `utter daemon --no-dbus` in a [`Sandbox`] and JSON-RPC clients of its socket,
//! shared by the socket and abuse tests.
//!
//! The daemon's config has `utter-test-plugin` as its router (recording every message it
//! gets into `record.jsonl`, planning `terminal <command>` as a terminal step) and
//! `fake_rs` as its action plugin.

use super::{ChildEnv, Sandbox, bin, run_utter};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::sync::mpsc;
use utter_protocol::serde_json::{self, Value, json};
use utter_protocol::{Connection, ConnectionOptions, ErrorObject, Incoming};

/// How long anything may take before a test gives up.
pub const LIMIT: Duration = Duration::from_secs(60);

/// The environment of a daemon or client in `sb`: the sandbox plus a state directory (for
/// the token file).
pub fn env(sb: &Sandbox, state: &str) -> ChildEnv {
    sb.env(None).with("XDG_STATE_HOME", sb.path(state))
}

/// A config: the test plugin as router (recording into `record.jsonl`, planning terminal
/// steps), fake_rs as the action plugin, terminal enabled, then `extra` TOML.
pub fn write_config(sb: &Sandbox, extra: &str) -> PathBuf {
    let record = sb.path("record.jsonl");
    sb.write(
        "utter.toml",
        &format!(
            "config_version = 1\n{extra}\n\
             [[plugin]]\nid = \"test\"\nkind = \"router\"\nentrypoint = {}\n\
             [[plugin]]\nid = \"fake_rs\"\nkind = \"action\"\nentrypoint = {}\n",
            json!([
                bin("utter-test-plugin").display().to_string(),
                "--record",
                record.display().to_string(),
                "--plan-op",
                "terminal"
            ]),
            json!([bin("fake_rs").display().to_string()]),
        ),
    )
}

/// The usual policy section of these tests.
pub const TERMINAL_ON: &str = "[policy]\nenabled_ops = [\"terminal\"]\n";

/// A running `utter daemon`; SIGTERM on drop (then SIGKILL if it lingers). Every test that
/// runs the daemon as a process starts it here ([`Daemon::builder`]), whatever else it keeps
/// beside it.
pub struct Daemon {
    pub child: std::process::Child,
    pub socket: PathBuf,
    pub log: PathBuf,
    pub token_file: PathBuf,
}

/// How to start a [`Daemon`]: `utter [--log-level L] daemon [--no-dbus] [--config C]
/// [--socket S]` with only the tests' PATH and the given environment, its stderr in a log
/// file.
pub struct DaemonBuilder {
    config: Option<PathBuf>,
    socket: Option<PathBuf>,
    default_socket: PathBuf,
    log: PathBuf,
    token_file: PathBuf,
    env: ChildEnv,
    dbus: bool,
    log_level: Option<String>,
}

impl DaemonBuilder {
    /// A daemon listening on `default_socket` (without [`DaemonBuilder::socket`], no
    /// `--socket` is passed and the runner picks that path itself), logging to `log`.
    fn new(default_socket: PathBuf, log: PathBuf, token_file: PathBuf, env: ChildEnv) -> Self {
        DaemonBuilder {
            config: None,
            socket: None,
            default_socket,
            log,
            token_file,
            env,
            dbus: false,
            log_level: None,
        }
    }

    /// `--config PATH` (without one, the sandbox's user config or the built-in default).
    pub fn config(mut self, path: &Path) -> Self {
        self.config = Some(path.to_path_buf());
        self
    }

    /// `--socket PATH` (without one, `$XDG_RUNTIME_DIR/utter/runner.sock` of the sandbox).
    pub fn socket(mut self, path: &Path) -> Self {
        self.socket = Some(path.to_path_buf());
        self
    }

    /// Where its stderr goes (default: a new `daemon-N.log` in the sandbox).
    pub fn log(mut self, path: &Path) -> Self {
        self.log = path.to_path_buf();
        self
    }

    /// Its environment besides PATH (default: the sandbox's, with a state directory for the
    /// token file).
    pub fn env(mut self, env: ChildEnv) -> Self {
        self.env = env;
        self
    }

    /// Serve D-Bus too (the session bus of its environment); without this, `--no-dbus`.
    pub fn dbus(mut self) -> Self {
        self.dbus = true;
        self
    }

    /// `--log-level LEVEL`.
    pub fn log_level(mut self, level: &str) -> Self {
        self.log_level = Some(level.to_owned());
        self
    }

    /// Start it without waiting for anything (a test that waits for its bus name or a log
    /// line itself).
    pub fn spawn(self) -> Daemon {
        let mut cmd = std::process::Command::new(bin("utter"));
        if let Some(level) = &self.log_level {
            cmd.arg("--log-level").arg(level);
        }
        cmd.arg("daemon");
        if !self.dbus {
            cmd.arg("--no-dbus");
        }
        if let Some(config) = &self.config {
            cmd.arg("--config").arg(config);
        }
        if let Some(socket) = &self.socket {
            cmd.arg("--socket").arg(socket);
        }
        cmd.env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&self.log).expect("daemon log"));
        if let Some(path) = std::env::var_os("PATH") {
            cmd.env("PATH", path);
        }
        self.env.apply(&mut cmd);
        let child = cmd.spawn().expect("utter daemon starts");
        Daemon {
            child,
            socket: self.socket.unwrap_or(self.default_socket),
            log: self.log,
            token_file: self.token_file,
        }
    }

    /// Start it and wait until it answers `runner.version` on its socket.
    pub async fn start(self) -> Daemon {
        let mut daemon = self.spawn();
        daemon.wait_ready().await;
        daemon
    }
}

impl Daemon {
    /// A daemon in `sb`, to be configured and started.
    pub fn builder(sb: &Sandbox) -> DaemonBuilder {
        DaemonBuilder::new(
            sb.path("run/utter/runner.sock"),
            sb.path(&format!("daemon-{}.log", unique())),
            sb.path("state/utter/runner-token"),
            env(sb, "state"),
        )
    }

    /// A daemon whose socket and log are `<dir>/<name>.sock` and `<dir>/<name>.log`, with no
    /// environment but PATH until [`DaemonBuilder::env`].
    pub fn builder_at(dir: &Path, name: &str) -> DaemonBuilder {
        let socket = dir.join(format!("{name}.sock"));
        DaemonBuilder::new(
            socket.clone(),
            dir.join(format!("{name}.log")),
            dir.join("state/utter/runner-token"),
            ChildEnv::new(),
        )
        .socket(&socket)
    }

    /// Start `utter daemon --no-dbus --config CONFIG [--socket SOCKET]` in `sb` and wait
    /// until it answers on its socket.
    pub async fn start(sb: &Sandbox, config: &Path, socket: Option<&Path>) -> Daemon {
        let mut builder = Daemon::builder(sb).config(config);
        if let Some(socket) = socket {
            builder = builder.socket(socket);
        }
        builder.start().await
    }

    /// Start `utter daemon --no-dbus` with no `--config`: the user's config file in `sb`
    /// (`$XDG_CONFIG_HOME/utter/config.toml`) when there is one, else the built-in default.
    pub async fn start_default(sb: &Sandbox) -> Daemon {
        Daemon::builder(sb).start().await
    }

    pub async fn wait_ready(&mut self) {
        let deadline = tokio::time::Instant::now() + LIMIT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("utter daemon exited with {status}:\n{}", self.log());
            }
            if let Ok(client) = TestClient::connect(&self.socket).await {
                if let Ok(Ok(_)) = tokio::time::timeout(
                    Duration::from_secs(5),
                    client.conn.request("runner.version", json!({}), None),
                )
                .await
                {
                    return;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "utter daemon did not answer on {} within {LIMIT:?}:\n{}",
                self.socket.display(),
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Wait until its log holds `needle`, failing with the log after [`LIMIT`].
    pub async fn wait_log(&self, needle: &str) {
        let found = super::wait_for(LIMIT, || self.log().contains(needle)).await;
        assert!(
            found,
            "the runner never logged {needle:?}; its log:\n{}",
            self.log()
        );
    }

    pub fn token(&self) -> String {
        std::fs::read_to_string(&self.token_file)
            .expect("the daemon wrote its token file")
            .trim()
            .to_owned()
    }

    /// A test client, authenticated with the token.
    pub async fn client(&self) -> TestClient {
        let client = TestClient::connect(&self.socket)
            .await
            .expect("connect to the daemon");
        client
            .call("runner.auth", json!({"token": self.token()}))
            .await
            .expect("the token is accepted");
        client
    }

    /// `utter ARGS --socket SOCKET` in `sb`, with a state directory without a token (so the
    /// CLI is admitted as the utter binary, not by the token).
    pub async fn utter(&self, sb: &Sandbox, args: &[&str]) -> super::UtterRun {
        let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        all.push("--socket".into());
        all.push(self.socket.display().to_string());
        run_utter(&all, &env(sb, "client-state")).await
    }

    /// SIGKILL, leaving the socket file behind.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            for _ in 0..200 {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// A JSON-RPC client over the socket (this test binary: not admitted without the token).
pub struct TestClient {
    pub conn: Connection,
    pub incoming: mpsc::Receiver<Incoming>,
}

impl TestClient {
    pub async fn connect(path: &Path) -> std::io::Result<TestClient> {
        let stream = tokio::net::UnixStream::connect(path).await?;
        let (read, write) = stream.into_split();
        let (conn, incoming) = Connection::spawn(
            read,
            write,
            ConnectionOptions {
                label: "test client".into(),
                ..Default::default()
            },
        );
        Ok(TestClient { conn, incoming })
    }

    pub async fn call(&self, method: &str, params: Value) -> Result<Value, ErrorObject> {
        self.conn.request(method, params, Some(LIMIT)).await
    }

    pub async fn next_incoming(&mut self) -> Incoming {
        tokio::time::timeout(LIMIT, self.incoming.recv())
            .await
            .expect("a message from the runner in time")
            .expect("the connection is open")
    }

    /// Run `utterance` (a step that needs a yes) as `runner.command` from this client, which
    /// never answers the runner's `host.confirm`, and return once the runner has asked: the
    /// step then waits in `runner.pending` for another door. Keep the client alive while it
    /// waits (closing it withdraws the question); the handle gives the command's result.
    pub async fn command_waiting_for_a_yes(
        &mut self,
        utterance: &str,
    ) -> tokio::task::JoinHandle<Result<Value, ErrorObject>> {
        let command = tokio::spawn({
            let conn = self.conn.clone();
            let utterance = utterance.to_owned();
            async move {
                conn.request(
                    "runner.command",
                    json!({"utterance": utterance}),
                    Some(LIMIT),
                )
                .await
            }
        });
        loop {
            if let Incoming::Request(r) = self.next_incoming().await {
                assert_eq!(r.method, "host.confirm");
                return command;
            }
        }
    }

    /// The next `runner.event`'s event object.
    pub async fn next_event(&mut self) -> Value {
        loop {
            if let Incoming::Notification(n) = self.next_incoming().await {
                if n.method == "runner.event" {
                    return n.params["event"].clone();
                }
            }
        }
    }
}

/// One JSON-RPC request `{id, method, params}` as a `Content-Length` frame.
pub fn frame(id: i64, method: &str, params: Value) -> Vec<u8> {
    utter_protocol::frame::encode_frame(
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
            .to_string()
            .as_bytes(),
    )
}

/// Decode the frames of `read` into JSON values (a task feeding a channel).
pub fn tokio_util_frames(read: tokio::net::unix::OwnedReadHalf) -> mpsc::Receiver<Value> {
    let (tx, rx) = mpsc::channel(2048);
    tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        let mut read = read;
        let mut buf: Vec<u8> = Vec::new();
        let mut chunk = [0u8; 65536];
        loop {
            while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                let length: usize = head
                    .split("\r\n")
                    .find_map(|l| l.strip_prefix("Content-Length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .expect("a length");
                if buf.len() < end + 4 + length {
                    break;
                }
                let body: Vec<u8> = buf.drain(..end + 4 + length).skip(end + 4).collect();
                if tx
                    .send(serde_json::from_slice(&body).expect("JSON"))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            match read.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    });
    rx
}
