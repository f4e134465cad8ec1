//! `utter-tts-espeak`: spoken feedback through `espeak-ng` (kind `tts`, PROTOCOL.md §8).
//!
//! # Wire methods
//!
//! * `tts.speak {text, voice?, rate?}` → `{spoken: true, ms}`: say `text` on the default
//!   sound device and answer when it has been said (`ms`: wall time of synthesis and
//!   playback). Started with an output directory (below), the speech is written to a new WAV
//!   file there instead, and the result also has `wav` (its path).
//! * `tts.synthesize {text, voice?, rate?}` → `{wav_b64, size, ms}`: the speech as a WAV file
//!   (16-bit mono PCM at espeak-ng's 22 050 Hz), base64; nothing is played.
//!
//! `text` is 1 to [`MAX_TEXT_CHARS`] characters without NUL; `voice` is an espeak-ng voice
//! name (`en`, `en-us`, `en+f3`, `mb-en1`; see `espeak-ng --voices`); `rate` is words per
//! minute, [`MIN_RATE`]–[`MAX_RATE`] (espeak-ng's default is 175). Bad params are `-32602`
//! naming the field.
//!
//! # How espeak-ng is run
//!
//! Directly (no shell), with fixed list arguments. The text never appears on the command
//! line: it is written to espeak-ng's standard input (`--stdin`), so text that starts with
//! `-`, or holds quotes, `;`, `$(...)` or SSML-looking tags, is spoken literally (SSML is off
//! without `-m`). Calls are spoken one after another, never over each other. espeak-ng exits
//! 0 even when it cannot open the sound device; its `error:` lines on stderr are turned into
//! a `-32000` error. A missing `espeak-ng` program is `-32000` naming the Debian package.
//!
//! # Options
//!
//! `utter-tts-espeak [--output-dir DIR]` (parsed by clap, see [`Options`]; `--help` explains
//! it), or `UTTER_TTS_OUTPUT_DIR=DIR`: write each
//! `tts.speak` utterance to `DIR/utter-tts-<pid>-<n>.wav` instead of the sound device (for
//! machines without one, and for tests). It is a start-up option, not a request param, so a
//! caller cannot make the plugin write files elsewhere.

#![warn(missing_docs)]

use clap::Parser;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;
use utter_protocol::handshake::{HealthResult, HealthStatus};
use utter_protocol::plugin::{self, Call, Handler};
use utter_protocol::serde_json::{Value, json};
use utter_protocol::{ErrorCode, ErrorObject};

/// The plugin's manifest, embedded at build time.
pub const MANIFEST: &str = include_str!("../utter-plugin.toml");

/// `tts.speak`.
pub const SPEAK: &str = "tts.speak";
/// `tts.synthesize`.
pub const SYNTHESIZE: &str = "tts.synthesize";

/// The longest text accepted, in characters (about two minutes of speech).
pub const MAX_TEXT_CHARS: usize = 2000;
/// The slowest rate accepted, in words per minute.
pub const MIN_RATE: u64 = 80;
/// The fastest rate accepted, in words per minute.
pub const MAX_RATE: u64 = 450;
/// The longest a voice name may be.
pub const MAX_VOICE_CHARS: usize = 64;

/// The program run, found on `PATH`.
pub const PROGRAM: &str = "espeak-ng";
/// The Debian package that ships it.
pub const PACKAGE: &str = "espeak-ng";
/// The environment variable naming the output directory.
pub const OUTPUT_DIR_ENV: &str = "UTTER_TTS_OUTPUT_DIR";

/// How long one espeak-ng run may take before it is killed.
const RUN_LIMIT: Duration = Duration::from_secs(180);

/// A validated request.
#[derive(Debug, Clone, PartialEq)]
pub struct Utterance {
    /// What to say.
    pub text: String,
    /// The espeak-ng voice, if not the default.
    pub voice: Option<String>,
    /// Words per minute, if not the default.
    pub rate: Option<u64>,
}

impl Utterance {
    /// Validate `{text, voice?, rate?}` of `method`; errors are `-32602` naming the field.
    pub fn from_params(method: &str, params: &Value) -> Result<Utterance, ErrorObject> {
        let text = match params.get("text") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
            Some(Value::String(_)) => return Err(bad(format!("{method}: text is blank"))),
            None | Some(Value::Null) => {
                return Err(bad(format!(
                    "{method} needs params.text (the words to say)"
                )));
            }
            Some(other) => {
                return Err(bad(format!("{method}: text must be a string, not {other}")));
            }
        };
        let chars = text.chars().count();
        if chars > MAX_TEXT_CHARS {
            return Err(bad(format!(
                "{method}: text has {chars} characters; the limit is {MAX_TEXT_CHARS}"
            )));
        }
        if text.contains('\0') {
            return Err(bad(format!("{method}: text contains a NUL character")));
        }
        let voice = match params.get("voice") {
            None | Some(Value::Null) => None,
            Some(Value::String(v)) if valid_voice(v) => Some(v.clone()),
            Some(other) => {
                return Err(bad(format!(
                    "{method}: voice {other} is not an espeak-ng voice name; use names like \
                     \"en\", \"en-us\" or \"en+f3\" (see `espeak-ng --voices`)"
                )));
            }
        };
        let rate = match params.get("rate") {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_u64() {
                Some(r) if (MIN_RATE..=MAX_RATE).contains(&r) => Some(r),
                _ => {
                    return Err(bad(format!(
                        "{method}: rate {v} is out of range; send words per minute from \
                         {MIN_RATE} to {MAX_RATE} (espeak-ng's default is 175)"
                    )));
                }
            },
        };
        Ok(Utterance { text, voice, rate })
    }

    /// The espeak-ng arguments that read the text from standard input, then `extra`.
    pub fn args(&self, extra: &[&str]) -> Vec<String> {
        let mut args = vec!["--stdin".to_owned()];
        if let Some(voice) = &self.voice {
            args.push("-v".into());
            args.push(voice.clone());
        }
        if let Some(rate) = self.rate {
            args.push("-s".into());
            args.push(rate.to_string());
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }
}

fn bad(message: String) -> ErrorObject {
    ErrorObject::invalid_params(message)
}

/// Letters, digits and `-_+/`, not starting with `-` or `/`, no `..`, at most
/// [`MAX_VOICE_CHARS`].
fn valid_voice(voice: &str) -> bool {
    !voice.is_empty()
        && voice.len() <= MAX_VOICE_CHARS
        && voice.starts_with(|c: char| c.is_ascii_alphanumeric())
        && !voice.contains("..")
        && voice
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '+' | '/'))
}

/// The `error:` lines espeak-ng printed, joined; `None` when there were none. espeak-ng
/// reports a sound device it cannot open this way but still exits 0.
pub fn espeak_errors(stderr: &str) -> Option<String> {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("error:") || l.starts_with("Error:"))
        .collect();
    (!lines.is_empty()).then(|| lines.join("; "))
}

/// What a finished espeak-ng run produced.
struct Output {
    stdout: Vec<u8>,
    elapsed: Duration,
}

/// The espeak-ng runner and the `tts.*` handlers.
pub struct EspeakPlugin {
    program: PathBuf,
    output_dir: Option<PathBuf>,
    counter: AtomicU64,
    /// Utterances are said one at a time.
    speaking: Arc<tokio::sync::Mutex<()>>,
}

impl EspeakPlugin {
    /// A plugin running `program` (normally [`PROGRAM`], found on `PATH`), writing speech to
    /// files in `output_dir` instead of the sound device when it is set.
    pub fn new(program: impl Into<PathBuf>, output_dir: Option<PathBuf>) -> EspeakPlugin {
        EspeakPlugin {
            program: program.into(),
            output_dir,
            counter: AtomicU64::new(0),
            speaking: Arc::default(),
        }
    }

    fn not_installed(&self) -> ErrorObject {
        ErrorObject::plugin(format!(
            "{} is not installed (not found on PATH); install the Debian package {PACKAGE}: \
             apt-get install --no-install-recommends {PACKAGE}",
            self.program.display()
        ))
        .with_data(json!({"program": self.program.display().to_string(), "package": PACKAGE}))
    }

    /// Run espeak-ng with `args`, the text on its standard input. Killed when the request is
    /// cancelled (the future dropped) or after [`RUN_LIMIT`].
    async fn run(&self, utterance: &Utterance, args: &[String]) -> Result<Output, ErrorObject> {
        let started = Instant::now();
        let mut child = Command::new(&self.program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => self.not_installed(),
                _ => ErrorObject::plugin(format!("cannot start {}: {e}", self.program.display())),
            })?;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let text = utterance.text.clone();
        let feed = async move {
            // A broken pipe only means espeak-ng stopped early; its exit status tells why.
            let _ = stdin.write_all(text.as_bytes()).await;
            let _ = stdin.shutdown().await;
        };
        let (_, output) = tokio::time::timeout(RUN_LIMIT, async {
            tokio::join!(feed, child.wait_with_output())
        })
        .await
        .map_err(|_| {
            ErrorObject::new(
                ErrorCode::PluginError,
                format!(
                    "{} took longer than {} s and was killed",
                    PROGRAM,
                    RUN_LIMIT.as_secs()
                ),
            )
        })?;
        let output = output.map_err(|e| ErrorObject::plugin(format!("{PROGRAM} failed: {e}")))?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !output.status.success() {
            return Err(ErrorObject::plugin(format!(
                "{PROGRAM} failed ({}): {}",
                output.status,
                stderr.trim()
            )));
        }
        if let Some(errors) = espeak_errors(&stderr) {
            return Err(ErrorObject::plugin(format!(
                "{PROGRAM} could not speak: {errors} (no usable sound device? start the plugin \
                 with --output-dir or {OUTPUT_DIR_ENV} to write WAV files instead)"
            )));
        }
        Ok(Output {
            stdout: output.stdout,
            elapsed: started.elapsed(),
        })
    }

    async fn speak(&self, params: &Value) -> Result<Value, ErrorObject> {
        let utterance = Utterance::from_params(SPEAK, params)?;
        let _one_at_a_time = self.speaking.lock().await;
        match &self.output_dir {
            None => {
                let out = self.run(&utterance, &utterance.args(&[])).await?;
                Ok(json!({"spoken": true, "ms": out.elapsed.as_millis() as u64}))
            }
            Some(dir) => {
                let n = self.counter.fetch_add(1, Ordering::Relaxed);
                let path = dir.join(format!("utter-tts-{}-{n}.wav", std::process::id()));
                let path_arg = path.to_string_lossy().into_owned();
                let out = self
                    .run(&utterance, &utterance.args(&["-w", &path_arg]))
                    .await?;
                Ok(json!({
                    "spoken": true,
                    "ms": out.elapsed.as_millis() as u64,
                    "wav": path_arg,
                }))
            }
        }
    }

    async fn synthesize(&self, params: &Value) -> Result<Value, ErrorObject> {
        let utterance = Utterance::from_params(SYNTHESIZE, params)?;
        let out = self.run(&utterance, &utterance.args(&["--stdout"])).await?;
        let mut wav = out.stdout;
        fix_wav_sizes(&mut wav);
        Ok(json!({
            "wav_b64": base64_encode(&wav),
            "size": wav.len(),
            "ms": out.elapsed.as_millis() as u64,
        }))
    }
}

/// espeak-ng streams WAV to stdout with placeholder sizes in the header; with the whole
/// file at hand, write the real RIFF and `data` sizes (canonical 44-byte header only).
pub fn fix_wav_sizes(wav: &mut [u8]) {
    if wav.len() < 44 || &wav[0..4] != b"RIFF" || &wav[8..12] != b"WAVE" || &wav[36..40] != b"data"
    {
        return;
    }
    let riff = u32::try_from(wav.len() - 8).unwrap_or(u32::MAX);
    let data = u32::try_from(wav.len() - 44).unwrap_or(u32::MAX);
    wav[4..8].copy_from_slice(&riff.to_le_bytes());
    wav[40..44].copy_from_slice(&data.to_le_bytes());
}

/// Standard padded base64 (RFC 4648 §4).
fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

impl Handler for EspeakPlugin {
    fn methods(&self) -> Vec<String> {
        vec![SPEAK.into(), SYNTHESIZE.into()]
    }

    fn side_effect_free(&self) -> Vec<String> {
        vec![SYNTHESIZE.into()]
    }

    async fn health(&self) -> HealthResult {
        let version = Command::new(&self.program)
            .arg("--version")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .await;
        match version {
            Ok(out) if out.status.success() => {
                let mut health = HealthResult::ok();
                health.detail = String::from_utf8_lossy(&out.stdout).trim().to_owned();
                if let Some(dir) = &self.output_dir {
                    health
                        .detail
                        .push_str(&format!("; writing WAV files to {}", dir.display()));
                }
                health
            }
            Ok(out) => HealthResult {
                status: HealthStatus::Degraded,
                detail: format!("{PROGRAM} --version failed ({})", out.status),
            },
            Err(_) => HealthResult {
                status: HealthStatus::Degraded,
                detail: self.not_installed().message,
            },
        }
    }

    async fn handle(&self, call: Call) -> Result<Value, ErrorObject> {
        match call.method.as_str() {
            SPEAK => self.speak(&call.params).await,
            SYNTHESIZE => self.synthesize(&call.params).await,
            other => Err(ErrorObject::method_not_found(other)),
        }
    }
}

/// The examples at the end of `utter-tts-espeak --help`.
const EXAMPLES: &str = "\
Examples:
  Check that it starts and answers, the way the runner talks to it:
    utter plugin check -- utter-tts-espeak --output-dir /tmp

  Turn spoken feedback on in the runner's config (config.toml):
    [tts]
    enabled = true

    [[plugin]]
    id = \"tts\"
    kind = \"tts\"
    entrypoint = [\"utter-tts-espeak\"]

Needs the program espeak-ng (Debian package espeak-ng); espeak-ng --voices
lists the voices.";

/// Utter's spoken feedback: text to speech through espeak-ng.
///
/// This is a plugin: Utter's runner starts it and speaks JSON-RPC 2.0 with it
/// on stdin and stdout (or on the socket the runner names) until it closes the
/// connection. You do not normally run it by hand.
///
/// It serves
///   - tts.speak {text, voice?, rate?}: say the text on the default sound
///     device (or into a WAV file, with --output-dir);
///   - tts.synthesize {text, voice?, rate?}: return the speech as a WAV file.
///
/// voice is an espeak-ng voice (en, en-us, en+f3); rate is words per minute,
/// 80 to 450. espeak-ng is run directly, without a shell, and the text goes to
/// its standard input, never onto its command line.
//
// (verbatim_doc_comment: clap 4 without its wrap_help feature does not wrap help text, so the
// lines above are wrapped by hand.)
#[derive(Debug, Clone, PartialEq, Eq, clap::Parser)]
#[command(
    name = "utter-tts-espeak",
    version,
    verbatim_doc_comment,
    args_override_self = true,
    after_help = EXAMPLES
)]
pub struct Options {
    /// Write speech to WAV files in DIR, not the sound device.
    ///
    /// Each tts.speak utterance goes to a new file, DIR/utter-tts-PID-N.wav.
    /// For machines without a sound device, and for tests. DIR must exist.
    /// Without this option $UTTER_TTS_OUTPUT_DIR names it; without either,
    /// speech is played.
    #[arg(long, value_name = "DIR", verbatim_doc_comment)]
    pub output_dir: Option<PathBuf>,
}

impl Options {
    /// Parse `args`, the command-line arguments after the program name. `--help` and
    /// `--version` come back as errors too, of kind `DisplayHelp` and `DisplayVersion`: print
    /// them with [`clap::Error::print`] and exit with [`clap::Error::exit_code`].
    pub fn parse_args<I, T>(args: I) -> Result<Options, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let program = OsString::from("utter-tts-espeak");
        Options::try_parse_from(std::iter::once(program).chain(args.into_iter().map(Into::into)))
    }

    /// The output directory: `--output-dir`, else [`OUTPUT_DIR_ENV`] as `var` reports it
    /// (empty counts as unset). It must be an existing directory.
    pub fn output_dir(
        &self,
        var: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Option<PathBuf>, String> {
        let dir = self.output_dir.clone().or_else(|| {
            var(OUTPUT_DIR_ENV)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        });
        if let Some(dir) = &dir {
            if !dir.is_dir() {
                return Err(format!(
                    "output directory {} does not exist or is not a directory",
                    dir.display()
                ));
            }
        }
        Ok(dir)
    }
}

/// Serve the plugin until the runner closes the connection. `args` are the command-line
/// arguments after the program name (see [`Options`]). `--help` and `--version` print and
/// return success; invalid arguments print a usage error on stderr and return clap's usage
/// exit code (2); a missing output directory prints why and returns failure.
pub async fn run<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let options = match Options::parse_args(args) {
        Ok(options) => options,
        Err(e) => {
            // Nothing more can be said if stdout or stderr is gone.
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    let dir = match options.output_dir(|name| std::env::var_os(name)) {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!("utter-tts-espeak: {e}");
            return ExitCode::FAILURE;
        }
    };
    plugin::run(MANIFEST, EspeakPlugin::new(PROGRAM, dir)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_never_reaches_the_command_line() {
        let u = Utterance::from_params(
            SPEAK,
            &json!({"text": "-w /tmp/x; rm -rf ~ $(id)", "voice": "en-us", "rate": 140}),
        )
        .unwrap();
        let args = u.args(&["--stdout"]);
        assert_eq!(args, ["--stdin", "-v", "en-us", "-s", "140", "--stdout"]);
        assert!(!args.iter().any(|a| a.contains("rm -rf")));
    }

    #[test]
    fn params_are_checked_by_field() {
        let err = |p: Value| Utterance::from_params(SPEAK, &p).unwrap_err();
        assert!(err(json!({})).message.contains("params.text"));
        assert!(err(json!({"text": "  "})).message.contains("blank"));
        assert!(
            err(json!({"text": 5}))
                .message
                .contains("text must be a string")
        );
        let long = "a".repeat(MAX_TEXT_CHARS + 1);
        assert!(err(json!({"text": long})).message.contains("limit is 2000"));
        assert!(err(json!({"text": "a\0b"})).message.contains("NUL"));
        for voice in ["-w", "/etc/x", "en us", "../x", "a;b", ""] {
            let e = err(json!({"text": "hi", "voice": voice}));
            assert_eq!(e.code, -32602);
            assert!(e.message.contains("voice"), "{voice}: {}", e.message);
        }
        for rate in [json!(10), json!(1000), json!("fast"), json!(-5)] {
            assert!(
                err(json!({"text": "hi", "rate": rate}))
                    .message
                    .contains("rate")
            );
        }
        let ok = Utterance::from_params(SPEAK, &json!({"text": "hi", "voice": "en+f3"})).unwrap();
        assert_eq!(ok.voice.as_deref(), Some("en+f3"));
    }

    #[test]
    fn error_lines_are_found() {
        let stderr = "ALSA lib pcm.c:2666:(snd_pcm_open_noupdate) Unknown PCM default\n\
                      error: No such file or directory\n";
        assert_eq!(
            espeak_errors(stderr).as_deref(),
            Some("error: No such file or directory")
        );
        assert_eq!(espeak_errors(""), None);
        assert_eq!(espeak_errors("a warning\n"), None);
    }

    #[test]
    fn command_line() {
        let parse = |a: &[&str]| Options::parse_args(a.iter().copied());
        let dir = |a: &[&str]| parse(a).map(|o| o.output_dir);
        assert_eq!(
            dir(&["--output-dir", "/x"]).unwrap(),
            Some(PathBuf::from("/x"))
        );
        assert_eq!(
            dir(&["--output-dir=/y"]).unwrap(),
            Some(PathBuf::from("/y"))
        );
        // The last one wins, as before clap.
        assert_eq!(
            dir(&["--output-dir=/a", "--output-dir", "/b"]).unwrap(),
            Some(PathBuf::from("/b"))
        );
        assert_eq!(dir(&[]).unwrap(), None);
        for bad in [
            &["--output-dir"][..],
            &["--frob"],
            &["extra"],
            &["--output-dir="],
        ] {
            let err = parse(bad).expect_err("refused");
            assert_eq!(err.exit_code(), 2, "{bad:?}");
            assert!(err.use_stderr(), "{bad:?}");
        }
        for (flag, kind) in [
            ("--help", clap::error::ErrorKind::DisplayHelp),
            ("-h", clap::error::ErrorKind::DisplayHelp),
            ("--version", clap::error::ErrorKind::DisplayVersion),
            ("-V", clap::error::ErrorKind::DisplayVersion),
        ] {
            let err = parse(&[flag]).expect_err("not options");
            assert_eq!(err.kind(), kind, "{flag}");
            assert_eq!(err.exit_code(), 0, "{flag}");
        }
        use clap::CommandFactory;
        Options::command().debug_assert();
    }

    #[test]
    fn the_output_dir_comes_from_the_option_then_the_environment() {
        let tmp = tempfile::tempdir().unwrap();
        let here = tmp.path().to_owned();
        let env = |value: Option<PathBuf>| {
            move |name: &str| {
                assert_eq!(name, OUTPUT_DIR_ENV);
                value.clone().map(OsString::from)
            }
        };
        let given = Options {
            output_dir: Some(here.clone()),
        };
        let none = Options { output_dir: None };
        let missing = tmp.path().join("missing");
        assert_eq!(
            given.output_dir(env(Some(missing.clone()))),
            Ok(Some(here.clone()))
        );
        assert_eq!(none.output_dir(env(Some(here.clone()))), Ok(Some(here)));
        assert_eq!(none.output_dir(env(Some(PathBuf::new()))), Ok(None));
        assert_eq!(none.output_dir(env(None)), Ok(None));
        let err = none.output_dir(env(Some(missing))).unwrap_err();
        assert!(err.contains("does not exist"), "{err}");
    }

    #[test]
    fn wav_sizes_are_fixed() {
        let mut wav = Vec::new();
        wav.extend_from_slice(b"RIFF\xff\xff\xff\x7fWAVEfmt ");
        wav.extend_from_slice(&[0u8; 20]);
        wav.extend_from_slice(b"data\xff\xff\xff\x7f");
        wav.extend_from_slice(&[1, 2, 3, 4]);
        fix_wav_sizes(&mut wav);
        assert_eq!(&wav[4..8], &40u32.to_le_bytes());
        assert_eq!(&wav[40..44], &4u32.to_le_bytes());
    }
}
