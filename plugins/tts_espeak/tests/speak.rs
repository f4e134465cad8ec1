//! The real `utter-tts-espeak` binary over JSON-RPC on its stdio, running the real
//! `espeak-ng` (Debian package espeak-ng). There is no sound card on the test machines, so
//! speech goes to WAV files through the plugin's `--output-dir` option.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};
use utter_protocol::serde_json::{Value, json};
use utter_protocol::{Connection, ConnectionOptions, ErrorObject};

const BIN: &str = env!("CARGO_BIN_EXE_utter-tts-espeak");

struct Plugin {
    conn: Connection,
    _child: Child,
}

impl Plugin {
    /// Start the plugin with `args` and `PATH` as given, and complete the handshake.
    async fn start(args: &[&str], path: Option<&str>) -> (Plugin, Value) {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .env_remove("UTTER_TTS_OUTPUT_DIR")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        if let Some(path) = path {
            cmd.env("PATH", path);
        }
        let mut child = cmd.spawn().expect("plugin starts");
        let (conn, _incoming) = Connection::spawn(
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
        (
            Plugin {
                conn,
                _child: child,
            },
            hello,
        )
    }

    async fn call(&self, method: &str, params: Value) -> Result<Value, ErrorObject> {
        self.conn
            .request(method, params, Some(Duration::from_secs(60)))
            .await
    }
}

/// espeak-ng must be installed; fail with the package name if not.
fn require_espeak() {
    let ok = std::process::Command::new("espeak-ng")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "espeak-ng is missing: install the Debian package espeak-ng (tests/run.sh does)"
    );
}

/// What espeak-ng itself writes for `text` read from stdin with `args`.
fn reference_wav(text: &str, args: &[&str], out: &Path) -> Vec<u8> {
    use std::io::Write;
    let mut child = std::process::Command::new("espeak-ng")
        .arg("--stdin")
        .args(args)
        .arg("-w")
        .arg(out)
        .stdin(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
    std::fs::read(out).unwrap()
}

/// The number of samples in a 16-bit mono WAV file, from its size (44-byte header).
fn wav_samples(wav: &[u8]) -> usize {
    assert_eq!(&wav[0..4], b"RIFF");
    assert_eq!(&wav[8..12], b"WAVE");
    (wav.len() - 44) / 2
}

#[tokio::test]
async fn hostile_text_is_spoken_literally_and_nothing_runs() {
    require_espeak();
    let out = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let s = scratch.path().display();
    // Options, shell syntax, command substitution and SSML, none of which may take effect.
    let hostile = format!(
        "-w {s}/written.wav; touch {s}/touched $(touch {s}/substituted) `touch {s}/backtick` \
         <speak><audio src=\"{s}/x\"/></speak> --stdout"
    );
    let (plugin, hello) =
        Plugin::start(&["--output-dir", &out.path().to_string_lossy()], None).await;
    assert_eq!(hello["plugin"]["kind"], "tts");
    assert_eq!(hello["provides"], json!(["tts.speak@1"]));

    let result = plugin
        .call(
            "tts.speak",
            json!({"text": hostile, "voice": "en-us", "rate": 160}),
        )
        .await
        .expect("tts.speak");
    assert_eq!(result["spoken"], true, "{result}");
    assert!(result["ms"].is_u64(), "{result}");
    let wav_path = result["wav"].as_str().expect("wav path").to_owned();
    assert!(
        wav_path.starts_with(&*out.path().to_string_lossy()),
        "{wav_path}"
    );
    let spoken = std::fs::read(&wav_path).unwrap();

    // Nothing the text names was created.
    let left: Vec<_> = std::fs::read_dir(scratch.path()).unwrap().collect();
    assert!(left.is_empty(), "the text had effects: {left:?}");

    // Exactly the speech espeak-ng makes for the literal text: the plugin passed it whole,
    // as text, with the requested voice and rate.
    let reference = reference_wav(
        &hostile,
        &["-v", "en-us", "-s", "160"],
        &out.path().join("ref.wav"),
    );
    assert_eq!(
        spoken, reference,
        "the plugin's speech differs from espeak-ng's for the same text"
    );
    // And it is long speech (the whole sentence), not a short word or silence.
    let seconds = wav_samples(&spoken) as f64 / 22050.0;
    println!("hostile text: {seconds:.1} s of speech in {wav_path}");
    assert!(seconds > 5.0, "only {seconds:.1} s of speech");
}

#[tokio::test]
async fn synthesize_returns_a_wav_with_speech() {
    require_espeak();
    let (plugin, _) = Plugin::start(&[], None).await;
    let result = plugin
        .call("tts.synthesize", json!({"text": "open youtube"}))
        .await
        .expect("tts.synthesize");
    use base64::Engine as _;
    let wav = base64::engine::general_purpose::STANDARD
        .decode(result["wav_b64"].as_str().unwrap())
        .unwrap();
    assert_eq!(result["size"], wav.len());
    // The header sizes were fixed up from espeak-ng's streaming placeholders.
    assert_eq!(
        u32::from_le_bytes(wav[4..8].try_into().unwrap()) as usize,
        wav.len() - 8
    );
    assert_eq!(
        u32::from_le_bytes(wav[40..44].try_into().unwrap()) as usize,
        wav.len() - 44
    );
    let samples: Vec<i16> = wav[44..]
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect();
    let seconds = samples.len() as f64 / 22050.0;
    let loud = samples.iter().filter(|s| s.unsigned_abs() > 1000).count();
    println!("synthesized {seconds:.2} s, {loud} loud samples");
    assert!((0.5..5.0).contains(&seconds), "{seconds} s");
    assert!(loud > 1000, "no audible speech");

    // Bad params name the field.
    let err = plugin
        .call("tts.synthesize", json!({"text": "hi", "voice": "-w"}))
        .await
        .unwrap_err();
    assert_eq!(err.code, -32602);
    assert!(err.message.contains("voice"), "{}", err.message);
    let err = plugin
        .call("tts.speak", json!({"text": ""}))
        .await
        .unwrap_err();
    assert_eq!(err.code, -32602);
}

#[tokio::test]
async fn speak_writes_one_file_per_utterance() {
    require_espeak();
    let out = tempfile::tempdir().unwrap();
    let (plugin, _) =
        Plugin::start(&[&format!("--output-dir={}", out.path().display())], None).await;
    let a = plugin
        .call("tts.speak", json!({"text": "done"}))
        .await
        .unwrap();
    let b = plugin
        .call("tts.speak", json!({"text": "that did not work, sorry"}))
        .await
        .unwrap();
    assert_ne!(a["wav"], b["wav"]);
    let short = wav_samples(&std::fs::read(a["wav"].as_str().unwrap()).unwrap());
    let long = wav_samples(&std::fs::read(b["wav"].as_str().unwrap()).unwrap());
    assert!(long > short * 2, "{short} vs {long} samples");
}

#[tokio::test]
async fn missing_espeak_is_named_with_its_package() {
    let empty = tempfile::tempdir().unwrap();
    let (plugin, _) = Plugin::start(&[], Some(&empty.path().to_string_lossy())).await;
    let health = plugin.call("plugin.health", json!({})).await.unwrap();
    assert_eq!(health["status"], "degraded", "{health}");
    assert!(
        health["detail"].as_str().unwrap().contains("espeak-ng"),
        "{health}"
    );
    let err = plugin
        .call("tts.speak", json!({"text": "hello"}))
        .await
        .unwrap_err();
    assert_eq!(err.code, -32000);
    assert!(
        err.message.contains("install the Debian package espeak-ng"),
        "{}",
        err.message
    );
    assert_eq!(err.data.unwrap()["package"], "espeak-ng");
}

#[tokio::test]
async fn a_bad_output_dir_stops_the_plugin_with_a_message() {
    let out = std::process::Command::new(BIN)
        .args(["--output-dir", "/nonexistent/utter-tts"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("/nonexistent/utter-tts does not exist"),
        "{stderr}"
    );
}
