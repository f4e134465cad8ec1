//! The JSON-RPC side: `stt.load`, `stt.transcribe` and the `stt.partial`/`stt.final`
//! notifications (see the crate docs for the shapes).

use crate::audio;
use crate::model::{
    ChunkText, DecodeOptions, LoadOptions, MAX_SCORED_PHRASES, ModelError, TranscribeError,
    Transcriber, Window,
};
use crate::nonspeech::non_speech;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use utter_protocol::handshake::{HealthResult, HealthStatus};
use utter_protocol::plugin::{Call, Handler};
use utter_protocol::serde_json::{Value, json};
use utter_protocol::stream::StreamSender;
use utter_protocol::{Connection, ErrorCode, ErrorObject};

/// `stt.load {model, language?}`.
pub const LOAD: &str = "stt.load";
/// `stt.transcribe {audio | samples_b64, format, rate, channels, language?, model?}`.
pub const TRANSCRIBE: &str = "stt.transcribe";
/// `stt.score {audio | samples_b64, format, rate, channels, phrases, language?, model?,
/// window?, padding_ms?}` → `{scores: [{text, logprob, tokens}], inference_ms}`: how likely
/// the audio makes each phrase ([`Transcriber::score`]).
pub const SCORE: &str = "stt.score";
/// The most bytes one phrase of `stt.score` may be.
pub const MAX_PHRASE_BYTES: usize = 512;
/// Notification with the text of one 30 s window of a long clip.
pub const PARTIAL: &str = "stt.partial";
/// Notification with the whole text once a clip is transcribed.
pub const FINAL: &str = "stt.final";

/// The environment variable naming a model directory to load at start.
pub const MODEL_ENV: &str = "UTTER_STT_MODEL";
/// The environment variable naming the default language (ISO 639-1, e.g. `en`).
pub const LANGUAGE_ENV: &str = "UTTER_STT_LANGUAGE";

/// What the loaded models and the defaults are.
#[derive(Default)]
struct Models {
    /// Loaded models by canonical directory.
    loaded: HashMap<PathBuf, Arc<Transcriber>>,
    /// The model `stt.transcribe` uses without `model`: the last one `stt.load`ed.
    current: Option<PathBuf>,
    /// The language used without `language`.
    language: Option<String>,
    /// Why the start-up load failed, for `plugin.health`.
    start_error: Option<String>,
}

/// One open stream: its method and the queue its task drains.
type Subscriber = (String, tokio::sync::mpsc::UnboundedSender<Value>);

/// The `stt` plugin: a cache of loaded models and the request handlers.
#[derive(Clone, Default)]
pub struct SttPlugin {
    models: Arc<Mutex<Models>>,
    /// Serialises loads, so two requests for one model load it once.
    loading: Arc<tokio::sync::Mutex<()>>,
    /// The open `stt.partial` / `stt.final` streams: (method, queue to the stream's task).
    subscribers: Arc<Mutex<Vec<Subscriber>>>,
}

/// What `stt.load` reports.
struct Loaded {
    transcriber: Arc<Transcriber>,
    cached: bool,
}

impl SttPlugin {
    /// A plugin with nothing loaded.
    pub fn new() -> SttPlugin {
        SttPlugin::default()
    }

    /// Read [`MODEL_ENV`] and [`LANGUAGE_ENV`]: set the default language and, when a model is
    /// named, load it in the background (a failure is reported by `plugin.health` and by
    /// `stt.transcribe`).
    pub fn start_from_env(&self) {
        let language = std::env::var(LANGUAGE_ENV)
            .ok()
            .filter(|l| !l.trim().is_empty());
        self.models.lock().expect("models lock").language = language;
        let Some(model) = std::env::var_os(MODEL_ENV).filter(|m| !m.is_empty()) else {
            return;
        };
        let this = self.clone();
        tokio::spawn(async move {
            let dir = PathBuf::from(model);
            if let Err(e) = this.load(&dir).await {
                eprintln!("utter-stt-whisper: {MODEL_ENV}: {}", e.message);
                this.models.lock().expect("models lock").start_error =
                    Some(format!("{MODEL_ENV}: {}", e.message));
            }
        });
    }

    /// Load (or find loaded) the model in `dir` and make it the current one.
    async fn load(&self, dir: &Path) -> Result<Loaded, ErrorObject> {
        let _one_at_a_time = self.loading.lock().await;
        let key = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let cached = self
            .models
            .lock()
            .expect("models lock")
            .loaded
            .get(&key)
            .cloned();
        let (transcriber, cached) = match cached {
            Some(t) => (t, true),
            None => {
                let path = key.clone();
                let loaded = tokio::task::spawn_blocking(move || {
                    Transcriber::load(&path, &LoadOptions::default())
                })
                .await
                .map_err(|e| ErrorObject::internal(format!("model loading panicked: {e}")))?
                .map_err(model_error)?;
                (Arc::new(loaded), false)
            }
        };
        let mut models = self.models.lock().expect("models lock");
        models.loaded.insert(key.clone(), transcriber.clone());
        models.current = Some(key);
        models.start_error = None;
        Ok(Loaded {
            transcriber,
            cached,
        })
    }

    async fn handle_load(&self, params: &Value) -> Result<Value, ErrorObject> {
        let model = required_string(params, "model", LOAD)?;
        let language = optional_string(params, "language", LOAD)?;
        let loaded = self.load(Path::new(&model)).await?;
        loaded
            .transcriber
            .check_language(language.as_deref())
            .map_err(transcribe_error)?;
        if language.is_some() {
            self.models.lock().expect("models lock").language = language.clone();
        }
        let t = &loaded.transcriber;
        let language = self.models.lock().expect("models lock").language.clone();
        Ok(json!({
            "model": t.dir().display().to_string(),
            "load_ms": t.load_time().as_millis() as u64,
            "cached": loaded.cached,
            "multilingual": t.is_multilingual(),
            "language": language,
        }))
    }

    /// What `stt.transcribe` and `stt.score` both read from `call`: the format checked, the
    /// samples, the model (`model`, else the current one) and the decoding options with the
    /// language (`language`, else the default). Errors name `method`.
    async fn audio_request(
        &self,
        call: &Call,
        method: &str,
    ) -> Result<(Arc<Transcriber>, Vec<f32>, DecodeOptions), ErrorObject> {
        let params = &call.params;
        check_format(params)?;
        let language = optional_string(params, "language", method)?;
        let model = optional_string(params, "model", method)?;
        let samples = read_samples(&call.peer, params, method).await?;
        let transcriber = match model {
            Some(dir) => self.load(Path::new(&dir)).await?.transcriber,
            None => self.current()?,
        };
        let mut options = decode_options(params, method)?;
        options.language =
            language.or_else(|| self.models.lock().expect("models lock").language.clone());
        Ok((transcriber, samples, options))
    }

    async fn handle_transcribe(&self, call: &Call) -> Result<Value, ErrorObject> {
        let (transcriber, samples, options) = self.audio_request(call, TRANSCRIBE).await?;

        let (partials_tx, mut partials_rx) = tokio::sync::mpsc::unbounded_channel::<ChunkText>();
        let work = tokio::task::spawn_blocking(move || {
            transcriber.transcribe_with(&samples, &options, |chunk| {
                let _ = partials_tx.send(chunk);
            })
        });
        let request = call.id.to_value();
        while let Some(chunk) = partials_rx.recv().await {
            // One window is not worth a partial: the final follows at once.
            if chunk.count > 1 {
                self.emit(
                    PARTIAL,
                    json!({"request": request, "text": chunk.text, "chunk": chunk.index, "chunks": chunk.count}),
                );
            }
        }
        let transcript = work
            .await
            .map_err(|e| ErrorObject::internal(format!("transcription panicked: {e}")))?
            .map_err(transcribe_error)?;
        let hypotheses: Vec<Value> = transcript
            .hypotheses
            .iter()
            .map(|h| json!({"text": h.text, "score": h.score}))
            .collect();
        let result = json!({
            "text": transcript.text,
            "language": transcript.language,
            "audio_ms": transcript.audio.as_millis() as u64,
            "inference_ms": transcript.inference.as_millis() as u64,
            "chunks": transcript.chunks,
            "hypotheses": hypotheses,
            "no_speech_prob": transcript.no_speech_prob,
            "non_speech": non_speech(&transcript.text),
            "frames": transcript.frames,
        });
        let mut note = result.clone();
        note["request"] = request;
        self.emit(FINAL, note);
        Ok(result)
    }

    async fn handle_score(&self, call: &Call) -> Result<Value, ErrorObject> {
        let phrases = phrases(&call.params)?;
        let (transcriber, samples, options) = self.audio_request(call, SCORE).await?;
        let started = std::time::Instant::now();
        let scores =
            tokio::task::spawn_blocking(move || transcriber.score(&samples, &phrases, &options))
                .await
                .map_err(|e| ErrorObject::internal(format!("scoring panicked: {e}")))?
                .map_err(transcribe_error)?;
        let scores: Vec<Value> = scores
            .iter()
            .map(|s| {
                // JSON has no infinity: a phrase with no text tokens scores null.
                let logprob = s.logprob.is_finite().then_some(s.logprob);
                json!({"text": s.text, "logprob": logprob, "tokens": s.tokens})
            })
            .collect();
        Ok(json!({
            "scores": scores,
            "inference_ms": started.elapsed().as_secs_f64() * 1000.0,
        }))
    }

    /// The current model, or a `-32602` error saying how to choose one.
    fn current(&self) -> Result<Arc<Transcriber>, ErrorObject> {
        let models = self.models.lock().expect("models lock");
        if let Some(t) = models.current.as_ref().and_then(|k| models.loaded.get(k)) {
            return Ok(t.clone());
        }
        let why = models
            .start_error
            .as_ref()
            .map(|e| format!(" (the start-up load failed: {e})"))
            .unwrap_or_default();
        Err(ErrorObject::invalid_params(format!(
            "no Whisper model is loaded{why}; call stt.load {{model: \"/path/to/faster-whisper-model\"}}, \
             pass params.model, or start the plugin with {MODEL_ENV} set"
        )))
    }
}

impl SttPlugin {
    /// Queue `data` as the next frame of every open stream of `method` (PROTOCOL.md §10.3).
    /// Each stream has its own task and queue, so a reliable subscriber that is out of
    /// credit delays only its own frames, never the transcription; frames keep their order.
    fn emit(&self, method: &str, data: Value) {
        let mut subscribers = self.subscribers.lock().expect("subscribers lock");
        subscribers.retain(|(m, queue)| m != method || queue.send(data.clone()).is_ok());
    }
}

/// The most bytes of `prompt` taken, from its end (the model keeps at most 223 tokens of
/// it anyway).
pub const MAX_PROMPT_CHARS: usize = 4096;

/// The decoding fields of `stt.transcribe`: `window` (`"fit"` or `"full"`), `padding_ms`
/// (0–10 000, with `"fit"`), `beam_size` (1–10), `hypotheses` (1–`beam_size`) and `prompt`
/// (text; its last [`MAX_PROMPT_CHARS`] bytes are taken). Each has the default of
/// [`DecodeOptions::default`]; a bad value is `-32602` naming the field.
fn decode_options(params: &Value, method: &str) -> Result<DecodeOptions, ErrorObject> {
    let mut options = DecodeOptions::default();
    let number =
        |field: &str, range: std::ops::RangeInclusive<u64>| -> Result<Option<u64>, ErrorObject> {
            match params.get(field) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => match v.as_u64() {
                    Some(n) if range.contains(&n) => Ok(Some(n)),
                    _ => Err(ErrorObject::invalid_params(format!(
                        "{method}: {field} must be an integer from {} to {}, not {}",
                        range.start(),
                        range.end(),
                        shown(Some(v))
                    ))),
                },
            }
        };
    let padding = number("padding_ms", 0..=10_000)?;
    match params.get("window") {
        None | Some(Value::Null) => {}
        Some(Value::String(w)) if w == "full" => options.window = Window::Full,
        Some(Value::String(w)) if w == "fit" => {}
        Some(other) => {
            return Err(ErrorObject::invalid_params(format!(
                "{method}: window must be \"fit\" (the audio plus padding_ms) or \"full\" (30 s), not {}",
                shown(Some(other))
            )));
        }
    }
    if let (Some(ms), Window::Fit { .. }) = (padding, options.window) {
        options.window = Window::Fit {
            padding: std::time::Duration::from_millis(ms),
        };
    }
    if let Some(beam) = number("beam_size", 1..=10)? {
        options.beam_size = beam as usize;
    }
    if let Some(n) = number("hypotheses", 1..=10)? {
        if n as usize > options.beam_size {
            return Err(ErrorObject::invalid_params(format!(
                "{method}: hypotheses ({n}) cannot exceed beam_size ({}); raise beam_size or ask for fewer",
                options.beam_size
            )));
        }
        options.hypotheses = n as usize;
    }
    match params.get("prompt") {
        None | Some(Value::Null) => {}
        Some(Value::String(p)) => {
            // The end is nearest to the audio and what the model keeps: cut the front.
            let mut start = p.len().saturating_sub(MAX_PROMPT_CHARS);
            while !p.is_char_boundary(start) {
                start += 1;
            }
            options.prompt = Some(p[start..].to_owned());
        }
        Some(other) => {
            return Err(ErrorObject::invalid_params(format!(
                "{method}: prompt must be a string (names the speaker may say), not {}",
                shown(Some(other))
            )));
        }
    }
    Ok(options)
}

/// `stt.score`'s `phrases`: 1–[`MAX_SCORED_PHRASES`] strings of at most [`MAX_PHRASE_BYTES`]
/// bytes each; else `-32602` saying what is wrong.
fn phrases(params: &Value) -> Result<Vec<String>, ErrorObject> {
    let Some(list) = params.get("phrases").and_then(Value::as_array) else {
        return Err(ErrorObject::invalid_params(format!(
            "{SCORE}: phrases must be an array of strings (the phrases to weigh against the audio), not {}",
            shown(params.get("phrases"))
        )));
    };
    if list.is_empty() || list.len() > MAX_SCORED_PHRASES {
        return Err(ErrorObject::invalid_params(format!(
            "{SCORE}: phrases holds {} phrases; give 1 to {MAX_SCORED_PHRASES}",
            list.len()
        )));
    }
    list.iter()
        .enumerate()
        .map(|(i, phrase)| match phrase.as_str() {
            Some(text) if text.len() <= MAX_PHRASE_BYTES && !text.trim().is_empty() => {
                Ok(text.to_owned())
            }
            Some(text) if text.trim().is_empty() => Err(ErrorObject::invalid_params(format!(
                "{SCORE}: phrases[{i}] is empty; every phrase needs words"
            ))),
            Some(text) => Err(ErrorObject::invalid_params(format!(
                "{SCORE}: phrases[{i}] is {} bytes; a phrase is a spoken command of at most {MAX_PHRASE_BYTES}",
                text.len()
            ))),
            None => Err(ErrorObject::invalid_params(format!(
                "{SCORE}: phrases[{i}] must be a string, not {}",
                shown(Some(phrase))
            ))),
        })
        .collect()
}

/// `format`, `rate` and `channels` must say 16 kHz mono f32le; else `-32602` naming the field.
fn check_format(params: &Value) -> Result<(), ErrorObject> {
    match params.get("format") {
        Some(Value::String(f)) if f == audio::FORMAT => {}
        other => {
            return Err(ErrorObject::invalid_params(format!(
                "format: {} is not supported; send \"{}\" (32-bit little-endian float samples)",
                shown(other),
                audio::FORMAT
            )));
        }
    }
    match params.get("rate") {
        Some(v) if v.as_u64() == Some(u64::from(crate::SAMPLE_RATE)) => {}
        other => {
            return Err(ErrorObject::invalid_params(format!(
                "rate: {} is not supported; resample to 16000 Hz and send rate: 16000",
                shown(other)
            )));
        }
    }
    match params.get("channels") {
        Some(v) if v.as_u64() == Some(1) => {}
        other => {
            return Err(ErrorObject::invalid_params(format!(
                "channels: {} is not supported; mix down to mono and send channels: 1",
                shown(other)
            )));
        }
    }
    Ok(())
}

/// A value as an error message shows it: at most 60 characters of its JSON.
fn shown(value: Option<&Value>) -> String {
    match value {
        None => "missing".into(),
        Some(v) => {
            let text = v.to_string();
            match text.char_indices().nth(60) {
                Some((end, _)) => format!("{}…", &text[..end]),
                None => text,
            }
        }
    }
}

/// The samples of a request: `audio` (a runner handle) or `samples_b64`, exactly one.
async fn read_samples(
    peer: &Connection,
    params: &Value,
    method: &str,
) -> Result<Vec<f32>, ErrorObject> {
    let handle = optional_string(params, "audio", method)?;
    let inline = optional_string(params, "samples_b64", method)?;
    let (field, bytes) = match (handle, inline) {
        (Some(handle), None) => ("audio", audio::fetch_handle(peer, "audio", &handle).await?),
        (None, Some(b64)) => ("samples_b64", audio::decode_b64("samples_b64", &b64)?),
        (Some(_), Some(_)) => {
            return Err(ErrorObject::invalid_params(format!(
                "{method}: send either audio (a handle) or samples_b64, not both"
            )));
        }
        (None, None) => {
            return Err(ErrorObject::invalid_params(format!(
                "{method} needs params.audio (\"handle://<sha256>\" of f32le samples) or \
                 params.samples_b64 (base64 of the f32le bytes)"
            )));
        }
    };
    audio::samples_from_bytes(field, &bytes)
}

fn required_string(params: &Value, field: &str, method: &str) -> Result<String, ErrorObject> {
    optional_string(params, field, method)?.ok_or_else(|| {
        ErrorObject::invalid_params(format!(
            "{method} needs params.{field} (a non-empty string)"
        ))
    })
}

fn optional_string(
    params: &Value,
    field: &str,
    method: &str,
) -> Result<Option<String>, ErrorObject> {
    match params.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.clone())),
        Some(other) => Err(ErrorObject::invalid_params(format!(
            "{method}: {field} must be a non-empty string, not {other}"
        ))),
    }
}

/// A bad model directory is the caller's input (`-32602`, naming the missing files in
/// `data.missing`); an engine that rejects complete files is the plugin's failure (`-32000`).
fn model_error(e: ModelError) -> ErrorObject {
    match &e {
        ModelError::Load { dir, .. } => ErrorObject::plugin(e.to_string())
            .with_data(json!({"model": dir.display().to_string()})),
        ModelError::NotFound { dir }
        | ModelError::NotADirectory { dir }
        | ModelError::Incomplete { dir, .. } => ErrorObject::invalid_params(format!("model: {e}"))
            .with_data(json!({"model": dir.display().to_string(), "missing": e.missing()})),
    }
}

fn transcribe_error(e: TranscribeError) -> ErrorObject {
    match e {
        TranscribeError::BadLanguage(_) | TranscribeError::EnglishOnly { .. } => {
            ErrorObject::invalid_params(format!("language: {e}"))
        }
        TranscribeError::NotFinite { .. } | TranscribeError::TooLongToScore { .. } => {
            ErrorObject::invalid_params(format!("audio: {e}"))
        }
        TranscribeError::Engine(_) => ErrorObject::new(ErrorCode::PluginError, e.to_string()),
    }
}

impl Handler for SttPlugin {
    fn methods(&self) -> Vec<String> {
        vec![LOAD.into(), TRANSCRIBE.into(), SCORE.into()]
    }

    fn streams(&self) -> Vec<String> {
        vec![PARTIAL.into(), FINAL.into()]
    }

    fn side_effect_free(&self) -> Vec<String> {
        vec![LOAD.into(), TRANSCRIBE.into(), SCORE.into()]
    }

    async fn health(&self) -> HealthResult {
        let models = self.models.lock().expect("models lock");
        let mut health = HealthResult::ok();
        match (&models.current, &models.start_error) {
            (_, Some(error)) => {
                health.status = HealthStatus::Degraded;
                health.detail = error.clone();
            }
            (Some(current), None) => health.detail = format!("model {}", current.display()),
            (None, None) => health.detail = "no model loaded yet (stt.load)".into(),
        }
        health
    }

    fn subscribe(&self, stream: StreamSender) -> Result<(), ErrorObject> {
        let method = stream.method().to_owned();
        if method != PARTIAL && method != FINAL {
            return Err(ErrorObject::invalid_params(format!(
                "method: this plugin streams {PARTIAL} and {FINAL}, not {method:?}"
            )));
        }
        let (queue, mut frames) = tokio::sync::mpsc::unbounded_channel::<Value>();
        self.subscribers
            .lock()
            .expect("subscribers lock")
            .push((method, queue));
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    frame = frames.recv() => {
                        let Some(data) = frame else { return };
                        if stream.send(data).await.is_err() {
                            return;
                        }
                    }
                    () = stream.stopped() => return,
                }
            }
        });
        Ok(())
    }

    async fn handle(&self, call: Call) -> Result<Value, ErrorObject> {
        match call.method.as_str() {
            LOAD => self.handle_load(&call.params).await,
            TRANSCRIBE => self.handle_transcribe(&call).await,
            SCORE => self.handle_score(&call).await,
            other => Err(ErrorObject::method_not_found(other)),
        }
    }
}
