//! `utter daemon` on a private PipeWire session with the Whisper plugin, as the voice tests
//! (`tests/voice.rs`) and the voice benchmark (`benches/voice.rs`) run it.

use super::{ChildEnv, FAKE_MIC, PipeWireSession, Sandbox, UtterRun, bin, run_utter};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use utter_protocol::serde_json::{self, Value};

/// The longest any single wait may take before a test fails (a limit, not an expectation).
pub const LIMIT: Duration = Duration::from_secs(120);

/// `utter daemon` capturing from the virtual microphone, with the Whisper plugin; SIGTERM
/// then SIGKILL on drop.
pub struct VoiceDaemon {
    process: super::daemon::Daemon,
    env: ChildEnv,
    /// Where the `https` handler writes the URL it was given.
    pub recorded: PathBuf,
    _dir: tempfile::TempDir,
    _sandbox: Sandbox,
}

impl VoiceDaemon {
    /// Start it on `pw`'s bus with `ptt` put at the top of the config (e.g. a `[ptt]`
    /// section).
    pub fn start(pw: &PipeWireSession, model: &Path, ptt: &str) -> VoiceDaemon {
        VoiceDaemon::start_with(pw, model, ptt, "")
    }

    /// [`VoiceDaemon::start`] with `stt` lines added to the `[stt]` table (e.g.
    /// `window = "full"`).
    pub fn start_with(pw: &PipeWireSession, model: &Path, ptt: &str, stt: &str) -> VoiceDaemon {
        VoiceDaemon::spawn(pw, &VoiceDaemon::config_text(model, ptt, stt))
    }

    /// [`VoiceDaemon::start`] with no stt plugin in the config: the voice loop is off until
    /// [`VoiceDaemon::stt_plugin`] is added to the file and the runner reloads.
    pub fn start_without_stt(pw: &PipeWireSession, model: &Path, ptt: &str) -> VoiceDaemon {
        let config = VoiceDaemon::config_text(model, ptt, "");
        let without = config.replace(&VoiceDaemon::stt_plugin(), "");
        assert_ne!(config, without, "the stt plugin's table is in the config");
        VoiceDaemon::spawn(pw, &without)
    }

    /// The `[[plugin]]` table of the Whisper plugin, as the config holds it.
    pub fn stt_plugin() -> String {
        format!(
            "[[plugin]]\nid = \"stt\"\nkind = \"stt\"\nentrypoint = [\"{}\"]\n",
            bin("utter-stt-whisper").display()
        )
    }

    /// The config file of a voice daemon.
    pub fn config_text(model: &Path, ptt: &str, stt: &str) -> String {
        format!(
            r#"config_version = 1
{ptt}

[audio]
source = "{FAKE_MIC}"

[stt]
model = "{model}"
language = "en"
{stt_extra}

[[plugin]]
id = "rules"
kind = "router"
entrypoint = ["{utter}", "plugin", "rules"]

[[plugin]]
id = "desktop"
kind = "action"
entrypoint = ["{utter}", "plugin", "desktop"]

{stt_plugin}
[[plugin]]
id = "audio"
kind = "audio"
entrypoint = ["{audio}"]
"#,
            model = model.display(),
            stt_extra = stt,
            utter = bin("utter").display(),
            stt_plugin = VoiceDaemon::stt_plugin(),
            audio = bin("utter-audio-pipewire").display(),
        )
    }

    /// A voice daemon with the config file `config_text` (see [`VoiceDaemon::config_text`]).
    pub fn spawn(pw: &PipeWireSession, config_text: &str) -> VoiceDaemon {
        let dir = tempfile::tempdir().expect("temp dir");
        let sandbox = Sandbox::new();
        let recorded = sandbox.install_url_recorder();
        let config = dir.path().join("utter.toml");
        std::fs::write(&config, config_text).expect("config");
        // The sandbox's desktop (xdg-open's handler, XDG dirs) on the PipeWire session's bus,
        // and PipeWire's socket directory.
        let env = sandbox
            .env(Some(pw.bus_address()))
            .with("PIPEWIRE_RUNTIME_DIR", pw.runtime_dir());
        let process = super::daemon::Daemon::builder_at(dir.path(), "runner")
            .config(&config)
            .env(env.clone())
            .log_level("info")
            .dbus()
            .spawn();
        VoiceDaemon {
            process,
            env,
            recorded,
            _dir: dir,
            _sandbox: sandbox,
        }
    }

    pub fn log(&self) -> String {
        self.process.log()
    }

    /// Its client socket.
    pub fn socket(&self) -> &Path {
        &self.process.socket
    }

    /// Its `$XDG_STATE_HOME` (where its token file is), for a client that is not `utter`.
    pub fn state_home(&self) -> PathBuf {
        match self.env.get("XDG_STATE_HOME") {
            Some(state) => PathBuf::from(state),
            None => PathBuf::from(self.env.get("HOME").expect("a HOME")).join(".local/state"),
        }
    }

    /// Its config file.
    pub fn config(&self) -> PathBuf {
        self._dir.path().join("utter.toml")
    }

    pub fn args<'a>(&'a self, args: &[&'a str]) -> Vec<&'a str> {
        let mut all = vec!["--socket", self.socket().to_str().expect("utf-8 path")];
        all.extend_from_slice(args);
        all
    }

    /// `utter --socket S ARGS…` against this daemon.
    pub async fn utter(&self, args: &[&str]) -> UtterRun {
        run_utter(&self.args(args), &self.env).await
    }

    /// `utter --socket S ARGS…` in this daemon's environment, stdin closed.
    pub fn command(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = std::process::Command::new(bin("utter"));
        cmd.args(self.args(args))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdin(Stdio::null());
        self.env.apply(&mut cmd);
        cmd
    }

    /// [`command`](Self::command) started in the background, stdout and stderr piped.
    pub fn spawn_utter(&self, args: &[&str]) -> std::process::Child {
        self.command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("utter starts")
    }
}

/// `utter listen --json` (follow mode): the reports it prints, one per line.
pub struct Follower {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Follower {
    pub fn start(daemon: &VoiceDaemon) -> Follower {
        let mut child = daemon.spawn_utter(&["listen", "--json"]);
        let lines = super::stdout_lines(child.stdout.take().expect("stdout"));
        Follower { child, lines }
    }

    /// The next voice report.
    pub fn next(&self, daemon: &VoiceDaemon) -> Value {
        let line = self.lines.recv_timeout(LIMIT).unwrap_or_else(|_| {
            panic!(
                "no voice report within {LIMIT:?}; runner log:\n{}",
                daemon.log()
            )
        });
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Play `wav` into the virtual microphone and wait until it has been played.
pub fn speak_into_mic(pw: &PipeWireSession, wav: &Path) {
    let mut play = pw.play(wav);
    let status = play.wait().expect("pw-play runs");
    let mut err = String::new();
    if let Some(mut e) = play.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    assert!(status.success(), "pw-play failed: {status} {err}");
    // Let the last buffers travel through the loopback before the key goes up.
    std::thread::sleep(Duration::from_millis(300));
}
