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
//! * `stt.transcribe {audio | samples_b64, format, rate, channels, language?, model?,
//!   window?, padding_ms?, beam_size?, hypotheses?, prompt?}` → `{text, language, audio_ms,
//!   inference_ms, chunks, hypotheses, no_speech_prob, non_speech, frames}`. The decoding
//!   fields are [`model::DecodeOptions`]: `window` `"fit"` (default: the encoder sees the
//!   audio plus `padding_ms`, 1000, a fraction of a 30 s window's cost) or `"full"`;
//!   `beam_size` 1–10 (5); `hypotheses` 1–`beam_size` (1), best first with their scores;
//!   `prompt`, names to expect (Whisper's previous-text prompt, the last 223 tokens kept).
//!   `no_speech_prob` is Whisper's own (0–1); `non_speech` says the text is one of Whisper's
//!   writings for silence or noise ([`nonspeech`]). `audio` is a runner handle
//!   (`"handle://<sha256>"`) holding raw little-endian f32 samples, read with ranged
//!   `handle.fetch`; `samples_b64` (base64 of the same bytes) is the inline fallback for
//!   short clips (the 16 MiB frame limit allows about a minute). `format` must be
//!   `"audio.pcm_f32le@1"`, `rate` 16000 and `channels` 1; anything else is `-32602` naming
//!   the field. Audio is limited to [`audio::MAX_SECONDS`].
//! * `stt.score {audio | samples_b64, format, rate, channels, phrases, language?, model?,
//!   window?, padding_ms?}` → `{scores: [{text, logprob, tokens}], inference_ms}`: how
//!   likely the audio makes each of 1–64 `phrases` ([`model::Transcriber::score`]):
//!   `logprob` is the natural log of the probability Whisper's decoder gives the phrase's
//!   tokens given the audio (null for a phrase of no text tokens). The runner weighs the
//!   router's candidates near a transcript with it. Pass the `window` and `padding_ms` the
//!   audio was transcribed with: the encoder's work is then reused.
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
pub mod nonspeech;
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
