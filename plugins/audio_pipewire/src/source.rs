//! What the capture layers share: a PipeWire audio source as listed ([`SourceInfo`]), what
//! can go wrong with the microphone ([`AudioError`]) and the meter's window. A leaf, so
//! that the PipeWire thread ([`crate::pw`]) and the capture handle over it
//! ([`crate::capture`]) both use it without naming each other.

use serde::Serialize;

/// What can go wrong with the microphone.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum AudioError {
    /// No PipeWire server answers on this session.
    #[error(
        "PipeWire is not running (cannot connect to $PIPEWIRE_RUNTIME_DIR or $XDG_RUNTIME_DIR/pipewire-0: {0}); start it with `systemctl --user start pipewire wireplumber`"
    )]
    NotRunning(String),
    /// The named source is not in the graph.
    #[error("audio source {name:?} does not exist; available sources: {}", list_or_none(.available))]
    SourceNotFound {
        /// The requested `node.name`.
        name: String,
        /// The `node.name`s of the sources there are.
        available: Vec<String>,
    },
    /// The source name cannot be a PipeWire node name.
    #[error(
        "audio source {0:?} is not a PipeWire node name (no control characters or surrounding spaces)"
    )]
    InvalidSource(String),
    /// The stream did not start, failed, or lost its source.
    #[error("audio capture from {device}: {reason}")]
    Stream {
        /// The requested source, or `the default source`.
        device: String,
        /// What happened.
        reason: String,
    },
    /// `AudioCapture::end` without `AudioCapture::begin`.
    #[error("no utterance is being recorded (end without begin, or it was cancelled)")]
    NotRecording,
    /// Any other PipeWire failure.
    #[error("PipeWire: {0}")]
    PipeWire(String),
    /// Resampling failed.
    #[error("audio processing: {0}")]
    Processing(String),
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// Whether `name` can be a `node.name`: no control characters (a NUL would not even reach
/// PipeWire) and no surrounding whitespace. The empty name means the default source.
pub fn valid_source_name(name: &str) -> bool {
    !name.chars().any(char::is_control) && name.trim() == name
}

/// One PipeWire audio source (`media.class` `Audio/Source` or `Audio/Source/Virtual`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceInfo {
    /// The global object id (changes when the device comes back).
    pub id: u32,
    /// `node.name`: stable, the value for `audio.configure {source}`.
    pub name: String,
    /// `node.description` (or `node.nick`), for people.
    pub description: String,
    /// `media.class`.
    pub media_class: String,
    /// Channel count, when the node says (its channel map, else its output ports, else
    /// `audio.channels`).
    pub channels: Option<u32>,
    /// Sample rate in Hz, when the node says (`audio.rate`).
    pub rate: Option<u32>,
    /// The session's default source (`default.audio.source` in the `default` metadata).
    pub is_default: bool,
}

/// The span of audio `CaptureStatus::level_db` measures, in milliseconds.
pub const LEVEL_WINDOW_MS: u32 = 100;
