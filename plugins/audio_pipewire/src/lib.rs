//! `utter-audio-pipewire`: the microphone as an Utter plugin (kind `audio`, capability
//! `audio.capture@1`), so that the runner itself does not link libpipewire.
//!
//! It captures one PipeWire source, keeps a pre-roll ring while the stream is open, and turns
//! each utterance into 16 kHz mono 32-bit float samples (downmixed, resampled with `rubato`,
//! cut to the speech by a frame-energy gate). The samples go to the runner with
//! `handle.create` on the plugin's own connection (PROTOCOL.md §10.1), and the reply names
//! the handle, ready for `stt.transcribe {audio, format: "audio.pcm_f32le@1", rate: 16000,
//! channels: 1}`.
//!
//! # Wire methods
//!
//! All params are named objects; every result is an object. The full shapes, units and
//! errors are in the crate's README.md.
//!
//! * `audio.configure {source?, pre_roll_ms?, max_seconds?, vad?: {silence_threshold_db?,
//!   trim?, margin_ms?, min_speech_ms?}}` → `{status, settings, source, rate, channels,
//!   max_seconds}`: open the stream (reopen it when the source, pre-roll or length limit
//!   changed; only the gate changes in place; nothing when unchanged).
//! * `audio.sources {}` → `{sources: [{id, name, description, media_class, channels, rate,
//!   is_default}]}` (side-effect-free).
//! * `audio.status {}` → `{configured, state, recording, settings, capture, last_error}`
//!   (side-effect-free).
//! * `audio.begin {}` → `{}`; `audio.cancel {}` → `{cancelled}`.
//! * `audio.end {keep_silence?}` and `audio.record {seconds, keep_silence?}` → `{audio,
//!   handle, format, rate, channels, samples, bytes, flush_ms, handoff_ms, encode_ms}`.
//! * `audio.peek {}` → the same, for the utterance recorded so far, which goes on (partial
//!   transcripts while the key is held); an error when no `audio.begin` utterance runs.
//!
//! # Modules
//!
//! * [`capture`]: [`AudioCapture`], [`list_sources`], [`Utterance`] (a Rust API).
//! * [`dsp`]: downmix, resampling and the gate, pure functions.
//! * [`service`]: the JSON-RPC side ([`AudioPlugin`]).

#![warn(missing_docs)]

pub mod capture;
pub mod dsp;
mod pw;
pub mod service;
pub mod source;
pub mod vad;

pub use capture::{
    AudioCapture, CaptureSettings, CaptureStatus, RawUtterance, Utterance, list_sources,
};
pub use service::AudioPlugin;
pub use source::{AudioError, SourceInfo};

/// The plugin's manifest, embedded at build time.
pub const MANIFEST: &str = include_str!("../utter-plugin.toml");

/// Serve the plugin on the transport the runner chose until it closes the connection.
pub async fn run() -> std::process::ExitCode {
    utter_protocol::plugin::run(MANIFEST, AudioPlugin::new()).await
}
