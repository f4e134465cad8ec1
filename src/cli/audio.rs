//! `utter audio sources|record`: the microphone, without the service. Both start a runner in
//! this process with only the capture plugin (`[audio] plugin`, else the first plugin of kind
//! `audio`) and call it: `sources` lists PipeWire's sources with the node name `[audio]
//! source` takes (`*` marks the session's default; `--json` prints the list), `record`
//! configures it as push-to-talk would (16 kHz mono, the silence gate) and writes what it
//! captured to a 16 kHz mono float WAV file, with the peak level and how much speech the gate
//! found. The plugin's answers are its own JSON, read as such. Exit 4 when the plugin cannot
//! start or PipeWire (or the source) is missing, 2 for a bad `--seconds`, 1 when the file
//! cannot be written.

use serde_json::{Value, json};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use utter_core::config::LoadedConfig;
use utter_core::handles::{HandleStore, Scope};
use utter_core::runner::Runner;
use utter_core::runner::capture::CaptureRequest;
use utter_core::supervisor::SupervisorOptions;

use super::check_config;
use super::output::{exit, out, print_json, sanitize};

/// `utter audio ...`
#[derive(clap::Subcommand)]
pub enum Action {
    /// List the audio sources (microphones) PipeWire has; the NAME column is what
    /// `[audio] source` takes, `*` marks the session's default.
    Sources {
        /// Print JSON: [{id, name, description, media_class, channels, rate, is_default}].
        #[arg(long)]
        json: bool,
    },
    /// Record from the configured source, the way push-to-talk does (16 kHz mono, silence
    /// gate), and write a WAV file to listen to.
    ///
    /// Example: utter audio record --seconds 3 --out /tmp/mic.wav
    Record {
        /// How long to record, in seconds.
        #[arg(long, default_value_t = 3.0, value_name = "SECONDS")]
        seconds: f64,
        /// The WAV file to write (16 kHz, mono, 32-bit float).
        #[arg(long, value_name = "PATH")]
        out: PathBuf,
        /// Use this source instead of `[audio] source` (a node name from `utter audio sources`).
        #[arg(long, value_name = "NODE_NAME")]
        source: Option<String>,
        /// Keep the silence around the speech (ignore `[audio.vad] trim`).
        #[arg(long)]
        no_trim: bool,
        /// Print JSON: {path, source, rate, channels, samples, duration_ms, captured_ms,
        /// speech_ms, has_speech, peak, rms_db, ...}.
        #[arg(long)]
        json: bool,
    },
}

/// Run `utter audio ...`; `config` is `--config`.
pub async fn run(action: Action, config: Option<&Path>) -> u8 {
    let Some(mut loaded) = check_config::load(config) else {
        return exit::CONFIG;
    };
    match action {
        Action::Sources { json } => sources(loaded, json).await,
        Action::Record {
            seconds,
            out,
            source,
            no_trim,
            json,
        } => {
            if let Some(source) = source {
                loaded.config.audio.source = source;
            }
            if no_trim {
                loaded.config.audio.vad.trim = false;
            }
            record(loaded, seconds, &out, json).await
        }
    }
}

/// Start a runner with only the capture plugin of `loaded` and ask it for `request`
/// ([`Runner::capture`]). Returns the answer, the runner (to read the recording's handle,
/// then shut down) and the plugin's id.
async fn call(
    loaded: LoadedConfig,
    request: CaptureRequest,
) -> Result<(Value, Arc<Runner>, String), String> {
    let plugin = loaded
        .config
        .capture_plugin()
        .map(|p| p.id.clone())
        .ok_or_else(|| {
            "no capture plugin is configured (a [[plugin]] of kind \"audio\", e.g. entrypoint = [\"utter-audio-pipewire\"])".to_owned()
        })?;
    let mut loaded = loaded;
    loaded.config = loaded.config.only_plugin(&plugin);
    let options = SupervisorOptions::from_config(&loaded.config);
    let runner = Runner::start(loaded, options, None).await;
    if let Some(report) = runner
        .plugins()
        .into_iter()
        .find(|p| p.id == plugin && !p.status.is_running())
    {
        runner.shutdown().await;
        return Err(format!(
            "the capture plugin {plugin} is {}{}",
            report.status.as_str(),
            report
                .last_error
                .map(|e| format!(": {e}"))
                .unwrap_or_default()
        ));
    }
    match runner.capture(request).await {
        Ok((plugin, answer)) => Ok((answer, runner, plugin)),
        Err(e) => {
            runner.shutdown().await;
            Err(e.message)
        }
    }
}

/// `utter audio sources`: the table, or the plugin's list as JSON.
async fn sources(loaded: LoadedConfig, json: bool) -> u8 {
    let (answer, runner, _) = match call(loaded, CaptureRequest::Sources).await {
        Ok(v) => v,
        Err(e) => {
            eprintln!("utter: {e}");
            return exit::RUNNER;
        }
    };
    runner.shutdown().await;
    let sources = answer["sources"].as_array().cloned().unwrap_or_default();
    if json {
        print_json(&sources);
        return exit::OK;
    }
    if sources.is_empty() {
        out!("No audio sources: PipeWire runs, but has no microphone or virtual source.");
        return exit::OK;
    }
    let text = |s: &Value, k: &str| sanitize(s[k].as_str().unwrap_or(""));
    let name_width = sources
        .iter()
        .map(|s| text(s, "name").len())
        .max()
        .unwrap_or(4)
        .max(4);
    out!(
        "  {:<name_width$}  {:>4}  {:>6}  DESCRIPTION",
        "NAME",
        "CH",
        "RATE"
    );
    for s in &sources {
        let opt = |k: &str| s[k].as_u64().map_or("-".to_owned(), |v| v.to_string());
        out!(
            "{} {:<name_width$}  {:>4}  {:>6}  {}",
            if s["is_default"].as_bool() == Some(true) {
                '*'
            } else {
                ' '
            },
            text(s, "name"),
            opt("channels"),
            opt("rate"),
            text(s, "description")
        );
    }
    out!("\nSet one with [audio] source = \"NAME\" in the config (* = the default source).");
    exit::OK
}

/// `utter audio record`: record `seconds` and write the WAV file at `path`.
async fn record(loaded: LoadedConfig, seconds: f64, path: &Path, json: bool) -> u8 {
    let max_seconds = loaded.config.audio.max_seconds;
    if !(seconds.is_finite() && seconds > 0.0 && seconds <= f64::from(max_seconds)) {
        eprintln!(
            "utter: --seconds must be more than 0 and at most [audio] max_seconds ({max_seconds})"
        );
        return exit::USAGE;
    }
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 16_000,
        bits_per_sample: 32,
        sample_format: hound::SampleFormat::Float,
    };
    // Open the output first: a path that cannot be written must not cost a recording.
    let writer = match hound::WavWriter::create(path, spec) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("utter: cannot write {}: {e}", path.display());
            return exit::NOT_DONE;
        }
    };
    if !json {
        eprintln!("Recording {seconds} s...");
    }
    // The recording keeps silence: the file holds what the gate kept, speech or not (all of
    // it with `--no-trim`; nothing when trimming found no speech).
    let (answer, runner, plugin) = match call(loaded, CaptureRequest::Record { seconds }).await {
        Ok(v) => v,
        Err(e) => {
            drop(writer);
            let _ = std::fs::remove_file(path);
            eprintln!("utter: {e}");
            return exit::RUNNER;
        }
    };
    // The samples are a handle in the capture plugin's scope (none when there was no speech
    // and trimming is on).
    let scope = Scope::Plugin(plugin);
    let bytes = match (answer["handle"].as_str(), runner.handles.as_ref()) {
        (Some(handle), Some(store)) => read_blob(store, &scope, handle),
        _ => Ok(Vec::new()),
    };
    runner.shutdown().await;
    let bytes = match bytes {
        Ok(bytes) => bytes,
        Err(e) => {
            drop(writer);
            let _ = std::fs::remove_file(path);
            eprintln!("utter: cannot read the recording from the capture plugin: {e}");
            return exit::RUNNER;
        }
    };
    let mut writer = writer;
    let written = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .try_for_each(|s| writer.write_sample(s))
        .and_then(|()| writer.finalize());
    if let Err(e) = written {
        eprintln!("utter: cannot write {}: {e}", path.display());
        return exit::NOT_DONE;
    }
    let audio = &answer["audio"];
    let samples = bytes.len() / 4;
    if json {
        let mut value = audio.clone();
        if let Some(map) = value.as_object_mut() {
            map.insert("path".into(), json!(path));
            map.insert("channels".into(), json!(1));
            map.insert("samples".into(), json!(samples));
            map.insert("duration_ms".into(), json!(samples as u64 * 1000 / 16_000));
        }
        print_json(&value);
    } else {
        let f = |k: &str| audio[k].as_f64().unwrap_or(0.0);
        out!(
            "Wrote {} ({:.2} s at 16 kHz mono): peak {:.3}, {}",
            path.display(),
            samples as f64 / 16_000.0,
            f("peak"),
            if audio["has_speech"].as_bool() == Some(true) {
                format!(
                    "speech {:.2} s at {:.1} dBFS",
                    f("speech_ms") / 1000.0,
                    f("rms_db")
                )
            } else {
                "no speech above the gate ([audio.vad] silence_threshold_db); check the source and its volume".to_owned()
            }
        );
    }
    exit::OK
}

/// The whole blob behind `handle`: a recording of more than about a second is larger than
/// what [`HandleStore::fetch`] returns inline, so it is read through its descriptor.
fn read_blob(store: &HandleStore, scope: &Scope, handle: &str) -> Result<Vec<u8>, String> {
    let mut file = store.open_blob(scope, handle).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    Ok(bytes)
}
