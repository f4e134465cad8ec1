//! `utter-stt-whisper`: speech to text with OpenAI's Whisper through CTranslate2, the engine
//! behind faster-whisper (kind `stt`, PROTOCOL.md §8).
//!
//! The model is any faster-whisper (CTranslate2) model directory the user points the plugin
//! at (see [`model`] for the files it must hold); it runs on the CPU with int8 weights.
//! Nothing is ever downloaded.
//!
//! # Wire methods (JSON-RPC, PROTOCOL.md §8)
//!
//! * `stt.load {model, language?}` → `{model, load_ms, cached, multilingual, language}`:
//!   load the model directory (or find it loaded) and make it the default; `language`
//!   (ISO 639-1, e.g. `"en"`) becomes the default language. The runner calls it once at
//!   start.
//! * `stt.transcribe {audio | samples_b64, format, rate, channels, language?, model?}` →
//!   `{text, language, audio_ms, inference_ms, chunks}`. `audio` is a runner handle
//!   (`"handle://<sha256>"`) holding raw little-endian f32 samples, read with ranged
//!   `handle.fetch`; `samples_b64` (base64 of the same bytes) is the inline fallback for
//!   short clips (the 16 MiB frame limit allows about a minute). `format` must be
//!   `"audio.pcm_f32le@1"`, `rate` 16000 and `channels` 1; anything else is `-32602` naming
//!   the field. Audio is limited to [`audio::MAX_SECONDS`].
//! * Notifications: `stt.partial {request, text, chunk, chunks}` for each 30 s window of a
//!   clip longer than 30 s, and `stt.final {request, text, language, audio_ms, inference_ms,
//!   chunks}` after every transcription (`request` is the id of the `stt.transcribe` call).
//!
//! Errors: a missing or incomplete model directory is `-32602` whose message names every
//! missing file and how to get it, with `data: {model, missing: [..]}`; a model the engine
//! rejects, or a failed inference, is `-32000`.
//!
//! # Settings
//!
//! `UTTER_STT_MODEL` (a model directory, loaded at start) and `UTTER_STT_LANGUAGE` (the
//! default language). Both can also be set with `stt.load`.

#![warn(missing_docs)]

pub mod audio;
pub mod features;
pub mod model;
pub mod service;

pub use model::{
    CHUNK_SAMPLES, ChunkText, LoadOptions, ModelError, SAMPLE_RATE, TranscribeError, Transcriber,
    Transcript, check_model_dir,
};
pub use service::SttPlugin;

/// The plugin's manifest, embedded at build time.
pub const MANIFEST: &str = include_str!("../utter-plugin.toml");

/// Serve the plugin on the transport the runner chose until it closes the connection,
/// loading `UTTER_STT_MODEL` in the background first when it is set.
pub async fn run() -> std::process::ExitCode {
    let plugin = SttPlugin::new();
    plugin.start_from_env();
    utter_protocol::plugin::run(MANIFEST, plugin).await
}
