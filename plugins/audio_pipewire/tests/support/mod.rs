//! Shared by the plugin's tests and its benchmark: a private PipeWire session with a virtual
//! microphone, speech made with espeak-ng, and a stand-in for the runner that spawns the real
//! `utter-audio-pipewire` binary and talks to it over its stdio.
//!
//! The PipeWire session is what the root tests use (`tests/common/mod.rs`): a temporary
//! `XDG_RUNTIME_DIR` (mode 0700) with its own `dbus-daemon`, `pipewire`, `wireplumber` (it
//! links streams to their targets) and a `pw-loopback` whose sink `fake_mic_sink` comes out
//! of the source `fake_mic`, so whatever `pw-play --target fake_mic_sink` plays is "spoken
//! into the microphone". The plugin finds it through `XDG_RUNTIME_DIR` and
//! `PIPEWIRE_RUNTIME_DIR` in its environment, which is cleared of everything else.
//!
//! Debian packages: dbus-daemon, pipewire, pipewire-bin, wireplumber, libspa-0.2-modules,
//! espeak-ng. A missing program fails the test naming its package.

#![allow(dead_code)]

use base64::Engine as _;
use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use utter_protocol::serde_json::{Value, json};
use utter_protocol::{Connection, ConnectionOptions, ErrorCode, ErrorObject, Incoming};

/// The plugin binary of this build.
pub const BIN: &str = env!("CARGO_BIN_EXE_utter-audio-pipewire");

/// The virtual microphone's node (an `Audio/Source`).
pub const FAKE_MIC: &str = "fake_mic";
/// The sink that feeds it: what `pw-play --target` plays into.
pub const FAKE_MIC_SINK: &str = "fake_mic_sink";

/// Fail (not skip) when `program` is not on PATH, naming the Debian package that has it.
pub fn require_program(program: &str, package: &str) {
    let found = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::metadata(dir.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    });
    assert!(
        found,
        "{program} is not installed: apt-get install --no-install-recommends {package} (tests/run.sh installs it)"
    );
}

/// Poll `check` every 50 ms for up to `limit`, blocking the thread.
pub fn poll(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The variables a child gets: exactly these, plus `PATH`.
pub type ChildEnv = Vec<(&'static str, OsString)>;

/// A process that is killed and reaped on drop.
struct Owned {
    name: &'static str,
    child: std::process::Child,
}

impl Drop for Owned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A private PipeWire session (see the module docs). Everything is killed on drop.
pub struct PipeWireSession {
    // Declared first: the processes go before their directory.
    children: Vec<Owned>,
    bus: Option<Owned>,
    bus_address: String,
    dir: tempfile::TempDir,
}

impl PipeWireSession {
    /// Start it all and wait (up to 20 s) until `fake_mic` is in the graph.
    pub fn start() -> PipeWireSession {
        for (program, package) in [
            ("dbus-daemon", "dbus-daemon"),
            ("pipewire", "pipewire-bin"),
            ("wireplumber", "wireplumber"),
            ("pw-loopback", "pipewire-bin"),
            ("pw-cli", "pipewire-bin"),
            ("pw-play", "pipewire-bin"),
        ] {
            require_program(program, package);
        }
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
            .expect("chmod 700");
        let (bus, bus_address) = start_bus(dir.path());
        let mut session = PipeWireSession {
            children: Vec::new(),
            bus: Some(bus),
            bus_address,
            dir,
        };
        session.spawn("pipewire", &[]);
        let socket = session.dir.path().join("pipewire-0");
        let up = poll(Duration::from_secs(20), || socket.exists());
        assert!(
            up,
            "pipewire did not create {} within 20 s (is libspa-0.2-modules installed?); log:\n{}",
            socket.display(),
            session.log("pipewire")
        );
        session.spawn("wireplumber", &[]);
        session.spawn(
            "pw-loopback",
            &[
                "-m",
                "[ FL ]",
                "--capture-props=media.class=Audio/Sink node.name=fake_mic_sink audio.position=[MONO]",
                "--playback-props=media.class=Audio/Source node.name=fake_mic audio.position=[MONO]",
            ],
        );
        let wanted = format!("node.name = \"{FAKE_MIC}\"");
        let ready = poll(Duration::from_secs(20), || {
            session
                .command("pw-cli")
                .args(["ls", "Node"])
                .output()
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(&wanted))
        });
        assert!(
            ready,
            "the virtual microphone {FAKE_MIC} did not appear within 20 s; wireplumber log:\n{}",
            session.log("wireplumber")
        );
        session
    }

    /// The environment that points a child at this session (and nowhere else).
    pub fn env(&self) -> ChildEnv {
        let run = self.dir.path();
        vec![
            ("XDG_RUNTIME_DIR", run.into()),
            ("PIPEWIRE_RUNTIME_DIR", run.into()),
            ("XDG_CONFIG_HOME", run.join("config").into()),
            ("XDG_STATE_HOME", run.join("state").into()),
            ("HOME", run.join("home").into()),
            ("DBUS_SESSION_BUS_ADDRESS", self.bus_address.clone().into()),
        ]
    }

    /// A command with only [`env`](Self::env) and `PATH`.
    pub fn command(&self, program: &str) -> std::process::Command {
        let mut cmd = std::process::Command::new(program);
        apply(&mut cmd, &self.env());
        cmd
    }

    fn spawn(&mut self, name: &'static str, args: &[&str]) {
        let log =
            std::fs::File::create(self.dir.path().join(format!("{name}.log"))).expect("log file");
        let child = self
            .command(name)
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{name} does not start: {e}"));
        self.children.push(Owned { name, child });
    }

    /// What `program` (started by this session) logged so far.
    pub fn log(&self, program: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{program}.log"))).unwrap_or_default()
    }

    /// Kill `pw-loopback`: the virtual microphone disappears, as if unplugged.
    pub fn stop_loopback(&mut self) {
        self.children.retain(|c| c.name != "pw-loopback");
    }

    /// Start `pw-play --target fake_mic_sink WAV`: the file is "spoken into the microphone".
    pub fn play(&self, wav: &Path) -> std::process::Child {
        self.command("pw-play")
            .args(["--target", FAKE_MIC_SINK])
            .arg(wav)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("pw-play starts (apt-get install pipewire-bin)")
    }

    /// Play `wav` into the microphone and wait until it has been played, plus a little for
    /// the last buffers to come through the graph.
    pub async fn speak(&self, wav: &Path) {
        let mut player = self.play(wav);
        let status = tokio::task::spawn_blocking(move || player.wait())
            .await
            .expect("join")
            .expect("pw-play ends");
        assert!(status.success(), "pw-play failed: {status}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

impl Drop for PipeWireSession {
    fn drop(&mut self) {
        // The graph first (in reverse order of starting), then its bus.
        while self.children.pop().is_some() {}
        self.bus.take();
    }
}

/// `dbus-daemon --session` on a socket in `dir`: the process and its address.
fn start_bus(dir: &Path) -> (Owned, String) {
    let socket = dir.join("bus");
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
    (
        Owned {
            name: "dbus-daemon",
            child,
        },
        line.trim().to_owned(),
    )
}

/// Clear `cmd`'s environment, then set `PATH` and `env`.
pub fn apply(cmd: &mut std::process::Command, env: &ChildEnv) {
    cmd.env_clear();
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    for (key, value) in env {
        cmd.env(key, value);
    }
}

/// Write `text` spoken by `espeak-ng` (its default voice, 22 050 Hz mono) to `path`.
pub fn espeak_wav(text: &str, path: &Path) {
    require_program("espeak-ng", "espeak-ng");
    let status = std::process::Command::new("espeak-ng")
        .arg("-w")
        .arg(path)
        .arg(text)
        .status()
        .expect("espeak-ng runs");
    assert!(
        status.success(),
        "espeak-ng -w {} {text:?}: {status}",
        path.display()
    );
}

/// The samples of a 16-bit PCM WAV file as `f32` in `[-1, 1]`, with its rate and channels.
pub fn read_wav(path: &Path) -> (Vec<f32>, u32, u32) {
    let mut reader = hound::WavReader::open(path).expect("a readable WAV");
    let spec = reader.spec();
    assert_eq!(spec.sample_format, hound::SampleFormat::Int);
    let scale = 1.0 / (1u32 << (spec.bits_per_sample - 1)) as f32;
    let samples = reader
        .samples::<i32>()
        .map(|s| s.expect("a sample") as f32 * scale)
        .collect();
    (samples, spec.sample_rate, spec.channels.into())
}

/// Little-endian `f32` bytes back to samples.
pub fn f32_samples(bytes: &[u8]) -> Vec<f32> {
    assert_eq!(
        bytes.len() % 4,
        0,
        "{} bytes is not whole f32 samples",
        bytes.len()
    );
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// The blobs a [`Host`] keeps for the plugin: digest → bytes.
pub type Blobs = Arc<Mutex<HashMap<String, Vec<u8>>>>;

/// The runner's side of one plugin: the real plugin binary, spawned with only `PATH` and
/// the given environment, the handshake done (protocol.hello, plugin.describe,
/// plugin.health, as the supervisor does), and `handle.create` answered the way the runner
/// answers it (strict padded base64 → `{handle: "handle://<sha256 hex>", sha256, size}`),
/// keeping the bytes.
pub struct Host {
    /// The connection to the plugin.
    pub conn: Connection,
    /// The plugin process (killed on drop).
    pub child: tokio::process::Child,
    /// The hello, describe and health results.
    pub hello: Value,
    /// `plugin.describe`'s result.
    pub describe: Value,
    /// `plugin.health`'s result.
    pub health: Value,
    /// What the plugin stored with `handle.create`.
    pub blobs: Blobs,
    /// How many `handle.create` requests arrived.
    pub creates: Arc<AtomicUsize>,
    /// While set, `handle.create` is refused with `-32005` (a full quota).
    pub refuse_handles: Arc<AtomicBool>,
}

impl Host {
    /// Spawn the plugin with `env` and complete the handshake.
    pub async fn start(env: &ChildEnv) -> Host {
        let mut cmd = std::process::Command::new(BIN);
        apply(&mut cmd, env);
        cmd.env("UTTER_PLUGIN_ID", "audio")
            .env("UTTER_PLUGIN_TRANSPORT", "stdio")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut cmd = tokio::process::Command::from(cmd);
        cmd.kill_on_drop(true);
        let mut child = cmd.spawn().expect("the plugin starts");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (conn, incoming) = Connection::spawn(
            stdout,
            stdin,
            ConnectionOptions {
                label: "audio".into(),
                id_prefix: Some("0:".into()),
                ..Default::default()
            },
        );
        let blobs = Blobs::default();
        let creates = Arc::new(AtomicUsize::new(0));
        let refuse_handles = Arc::new(AtomicBool::new(false));
        tokio::spawn(serve_callbacks(
            conn.clone(),
            incoming,
            blobs.clone(),
            creates.clone(),
            refuse_handles.clone(),
        ));
        let limit = Some(Duration::from_secs(10));
        let hello = conn
            .request(
                "protocol.hello",
                json!({"protocol": "1.0", "abi": 1, "runner": "utter/0.1.0", "epoch": 0}),
                limit,
            )
            .await
            .expect("protocol.hello answered");
        let describe = conn
            .request("plugin.describe", json!({}), limit)
            .await
            .expect("plugin.describe answered");
        let health = conn
            .request("plugin.health", json!({}), limit)
            .await
            .expect("plugin.health answered");
        Host {
            conn,
            child,
            hello,
            describe,
            health,
            blobs,
            creates,
            refuse_handles,
        }
    }

    /// Call a method with a 30 s timeout.
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, ErrorObject> {
        self.call_within(method, params, Duration::from_secs(30))
            .await
    }

    /// Call a method with a timeout of `limit` (on expiry the plugin gets `$/cancel`).
    pub async fn call_within(
        &self,
        method: &str,
        params: Value,
        limit: Duration,
    ) -> Result<Value, ErrorObject> {
        self.conn.request(method, params, Some(limit)).await
    }

    /// The bytes of a handle the plugin created.
    pub fn blob(&self, handle: &str) -> Option<Vec<u8>> {
        let digest = handle.strip_prefix("handle://")?;
        self.blobs.lock().ok()?.get(digest).cloned()
    }

    /// Close the plugin's stdin and wait (up to `limit`) for it to exit.
    pub async fn close_and_wait(mut self, limit: Duration) -> std::process::ExitStatus {
        self.conn.close();
        tokio::time::timeout(limit, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("the plugin did not exit within {limit:?} of stdin EOF"))
            .expect("wait for the plugin")
    }
}

/// Answer the plugin's requests as the runner would: `handle.create` is kept, anything
/// else is `-32601`.
async fn serve_callbacks(
    conn: Connection,
    mut incoming: tokio::sync::mpsc::Receiver<Incoming>,
    blobs: Blobs,
    creates: Arc<AtomicUsize>,
    refuse: Arc<AtomicBool>,
) {
    while let Some(message) = incoming.recv().await {
        let Incoming::Request(req) = message else {
            continue;
        };
        let result = match req.method.as_str() {
            "handle.create" => {
                creates.fetch_add(1, Ordering::SeqCst);
                if refuse.load(Ordering::SeqCst) {
                    Err(ErrorObject::new(
                        ErrorCode::CapabilityMissing,
                        "handle quota exceeded: this scope holds 67108864 bytes",
                    ))
                } else {
                    create(&req.params, &blobs)
                }
            }
            other => Err(ErrorObject::method_not_found(other)),
        };
        let _ = conn.respond(req.id, result).await;
    }
}

fn create(params: &Value, blobs: &Blobs) -> Result<Value, ErrorObject> {
    let text = params["data_b64"].as_str().ok_or_else(|| {
        ErrorObject::invalid_params("handle.create: params.data_b64 must be a string")
    })?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| ErrorObject::invalid_params(format!("handle.create: bad base64: {e}")))?;
    let digest = utter_protocol::digest::sha256_hex(&bytes);
    let size = bytes.len();
    blobs
        .lock()
        .map_err(|_| ErrorObject::internal("blob map poisoned"))?
        .insert(digest.clone(), bytes);
    Ok(json!({"handle": format!("handle://{digest}"), "sha256": digest, "size": size}))
}

/// A directory for the tests' own files.
pub fn scratch() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().to_path_buf();
    (dir, path)
}
