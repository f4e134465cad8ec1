//! The microphone as a Rust API: PipeWire sources, a capture stream with a pre-roll, and
//! utterances of 16 kHz mono `f32` samples.
//!
//! * [`list_sources`]: the `Audio/Source` nodes of the PipeWire graph.
//! * [`AudioCapture`]: one capture stream from one source, kept running so that the last
//!   `pre_roll_ms` of audio are always at hand; [`AudioCapture::begin`] starts an utterance
//!   (the pre-roll becomes its start), [`AudioCapture::end`] gives an [`Utterance`] of 16 kHz
//!   mono `f32` samples (`audio.pcm_f32le@1`, `audio.rate.16000@1`, `audio.channels.1@1`).
//!
//! PipeWire's main loop and objects are not `Send`: each connection runs on an OS thread of
//! its own (`utter-pipewire`); nothing here blocks the async runtime (the blocking parts run
//! on that thread or in `spawn_blocking`). A named source that does not exist is an error that
//! names it and lists the sources there are ([`AudioError::SourceNotFound`]); the stream is
//! created with `node.dont-reconnect`, so the session manager never moves it to another
//! device, and [`AudioCapture::end`] fails when the source went away.

use crate::dsp;
use crate::pw;
use crate::source::{AudioError, SourceInfo, valid_source_name};
use serde::Serialize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long [`AudioCapture::open`] waits for the stream to be linked and running.
pub const START_TIMEOUT: Duration = Duration::from_secs(5);

/// List the audio sources of the PipeWire graph, sorted by name.
///
/// # Errors
/// [`AudioError::NotRunning`] without a PipeWire server; [`AudioError::PipeWire`] when it
/// does not answer within 5 s.
pub async fn list_sources() -> Result<Vec<SourceInfo>, AudioError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("utter-pipewire".into())
        .spawn(move || {
            let _ = tx.send(pw::list_sources_blocking());
        })
        .map_err(|e| AudioError::PipeWire(format!("cannot start a thread: {e}")))?;
    rx.await
        .map_err(|_| AudioError::PipeWire("the PipeWire thread stopped".into()))?
}

/// A finished utterance: 16 kHz mono `f32` samples and what the gate found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Utterance {
    /// 16 000 Hz mono samples in `[-1, 1]`; without the silence around the speech when the
    /// gate trims; empty when there is no speech and the gate trims.
    #[serde(skip)]
    pub samples: Vec<f32>,
    /// Always [`dsp::TARGET_RATE`].
    pub rate: u32,
    /// Everything captured, pre-roll included.
    #[serde(serialize_with = "ser_ms", rename = "captured_ms")]
    pub captured: Duration,
    /// From the first to the last voiced 10 ms frame (zero for no speech).
    #[serde(serialize_with = "ser_ms", rename = "speech_ms")]
    pub speech: Duration,
    /// Silence cut before the kept samples.
    #[serde(serialize_with = "ser_ms", rename = "trimmed_leading_ms")]
    pub trimmed_leading: Duration,
    /// Silence cut after the kept samples.
    #[serde(serialize_with = "ser_ms", rename = "trimmed_trailing_ms")]
    pub trimmed_trailing: Duration,
    /// Largest absolute sample (of the whole capture, at 16 kHz).
    pub peak: f32,
    /// RMS of the speech span in dBFS (−120 when there is none).
    pub rms_db: f32,
    /// The gate found speech: enough voiced frames above the threshold.
    pub has_speech: bool,
    /// `max_seconds` was reached and later audio was dropped.
    pub truncated: bool,
    /// The rate PipeWire delivered, in Hz.
    pub source_rate: u32,
    /// The channels PipeWire delivered (averaged to mono).
    pub source_channels: u32,
}

fn ser_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

impl Utterance {
    /// Turn raw interleaved capture into an utterance: downmix, resample to 16 kHz, gate.
    /// This is all of the work [`AudioCapture::end`] does after taking the buffer (what the
    /// "capture flush" benchmark measures).
    ///
    /// # Errors
    /// [`AudioError::Processing`] when the rate cannot be resampled.
    pub fn from_interleaved(
        interleaved: &[f32],
        rate: u32,
        channels: u32,
        gate: &dsp::GateSettings,
        truncated: bool,
    ) -> Result<Utterance, AudioError> {
        let mono = dsp::downmix(interleaved, channels.max(1) as usize);
        let mut samples = dsp::resample_to_16k(&mono, rate).map_err(AudioError::Processing)?;
        let found = dsp::gate(&samples, gate);
        let total = samples.len();
        let at_16k = |n: usize| Duration::from_micros(n as u64 * 1_000_000 / 16_000);
        let peak = dsp::peak(&samples);
        samples.truncate(found.keep.end);
        samples.drain(..found.keep.start);
        Ok(Utterance {
            samples,
            rate: dsp::TARGET_RATE,
            captured: if rate == 0 {
                Duration::ZERO
            } else {
                Duration::from_micros(mono.len() as u64 * 1_000_000 / u64::from(rate))
            },
            speech: found.speech,
            trimmed_leading: at_16k(found.keep.start),
            trimmed_trailing: at_16k(total.saturating_sub(found.keep.end)),
            peak,
            rms_db: found.speech_rms_db,
            has_speech: found.has_speech,
            truncated,
            source_rate: rate,
            source_channels: channels,
        })
    }

    /// Duration of the kept samples.
    pub fn duration(&self) -> Duration {
        Duration::from_micros(self.samples.len() as u64 * 1_000_000 / u64::from(self.rate.max(1)))
    }

    /// The kept samples as raw little-endian `f32` bytes (`audio.pcm_f32le@1`).
    pub fn to_le_bytes(&self) -> Vec<u8> {
        pcm_f32le(&self.samples)
    }
}

/// `samples` as raw little-endian `f32` bytes (`audio.pcm_f32le@1`), 4 per sample.
pub fn pcm_f32le(samples: &[f32]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(samples.len() * 4);
    for sample in samples {
        bytes.extend_from_slice(&sample.to_le_bytes());
    }
    bytes
}

/// An utterance as captured: interleaved samples at the graph's rate, not yet processed
/// ([`AudioCapture::take`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RawUtterance {
    /// Interleaved `f32` samples, pre-roll included.
    pub interleaved: Vec<f32>,
    /// Their rate in Hz.
    pub rate: u32,
    /// Their channel count.
    pub channels: u32,
    /// `max_seconds` was reached.
    pub truncated: bool,
    /// The gate to apply.
    pub gate: dsp::GateSettings,
}

impl RawUtterance {
    /// Downmix, resample to 16 kHz and gate ([`Utterance::from_interleaved`]), off the async
    /// runtime's thread.
    ///
    /// # Errors
    /// [`AudioError::Processing`].
    pub async fn process(self) -> Result<Utterance, AudioError> {
        tokio::task::spawn_blocking(move || {
            Utterance::from_interleaved(
                &self.interleaved,
                self.rate,
                self.channels,
                &self.gate,
                self.truncated,
            )
        })
        .await
        .map_err(|e| AudioError::Processing(format!("the processing task failed: {e}")))?
    }
}

/// What a capture stream is asked for: the plugin's `audio.configure` settings.
#[derive(Debug, Clone, PartialEq)]
pub struct CaptureSettings {
    /// The `node.name` to capture from; empty = the session's default source.
    pub source: String,
    /// Audio kept from before [`AudioCapture::begin`], in milliseconds.
    pub pre_roll_ms: u32,
    /// The longest utterance kept, in seconds; later audio is dropped (`truncated`).
    pub max_seconds: u32,
    /// The silence gate.
    pub vad: dsp::GateSettings,
    /// After speech, this much silence ends the listen (the notification
    /// `audio.speech_ended`); 0 = never (the key ends it).
    pub end_silence_ms: u32,
}

impl Default for CaptureSettings {
    fn default() -> Self {
        CaptureSettings {
            source: String::new(),
            pre_roll_ms: 300,
            max_seconds: 30,
            vad: dsp::GateSettings::default(),
            end_silence_ms: 600,
        }
    }
}

impl CaptureSettings {
    /// Whether a stream opened with `self` can serve `other` as it is: the same source,
    /// pre-roll and length limit (the gate can change without reopening).
    pub fn same_stream(&self, other: &CaptureSettings) -> bool {
        self.source == other.source
            && self.pre_roll_ms == other.pre_roll_ms
            && self.max_seconds == other.max_seconds
    }
}

/// The state of a capture stream.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaptureStatus {
    /// The requested `node.name`, or empty for the default source.
    pub configured_source: String,
    /// The source the stream is linked to right now (`None`: not linked).
    pub linked_source: Option<String>,
    /// `connecting`, `paused`, `streaming`, `recording` or `failed`.
    pub state: String,
    /// Why it failed, when `state` is `failed`.
    pub error: Option<String>,
    /// The rate PipeWire delivers, in Hz (0 until negotiated).
    pub rate: u32,
    /// The channels PipeWire delivers (0 until negotiated).
    pub channels: u32,
    /// Frames received since the stream started.
    pub frames: u64,
    /// The RMS level of the last [`crate::source::LEVEL_WINDOW_MS`] of audio received, in dBFS (the same
    /// measure as `vad.silence_threshold_db`); `None` before that much arrived or without a
    /// pre-roll ring to read it from (`pre_roll_ms = 0` and not recording). A meter polls it.
    pub level_db: Option<f32>,
}

/// A running capture stream from one source; see the module docs.
///
/// Dropping it stops the stream and its thread.
pub struct AudioCapture {
    shared: Arc<Mutex<pw::Shared>>,
    stop: pipewire::channel::Sender<()>,
    source: String,
    gate: Mutex<dsp::GateSettings>,
}

impl std::fmt::Debug for AudioCapture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AudioCapture")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl AudioCapture {
    /// Connect to PipeWire, check that the source exists, start the stream and wait (up to
    /// [`START_TIMEOUT`]) until it is linked to that source and buffers flow. From then on
    /// the last `pre_roll_ms` of audio are kept in a ring.
    ///
    /// # Errors
    /// [`AudioError::InvalidSource`], [`AudioError::NotRunning`],
    /// [`AudioError::SourceNotFound`] (names the source and lists the available ones),
    /// [`AudioError::Stream`] when it is not linked or not running in time (no session
    /// manager, no driver) or linked to another source.
    pub async fn open(settings: &CaptureSettings) -> Result<AudioCapture, AudioError> {
        if !valid_source_name(&settings.source) {
            return Err(AudioError::InvalidSource(settings.source.clone()));
        }
        let shared = Arc::new(Mutex::new(pw::Shared::new(
            settings.pre_roll_ms,
            settings.max_seconds,
        )));
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let (stop_tx, stop_rx) = pipewire::channel::channel();
        let request = pw::StreamRequest {
            source: settings.source.clone(),
        };
        let thread_shared = shared.clone();
        std::thread::Builder::new()
            .name("utter-pipewire".into())
            .spawn(move || pw::capture_thread(request, thread_shared, ready_tx, stop_rx))
            .map_err(|e| AudioError::PipeWire(format!("cannot start a thread: {e}")))?;
        let capture = AudioCapture {
            shared,
            stop: stop_tx,
            source: settings.source.clone(),
            gate: Mutex::new(settings.vad),
        };
        ready_rx
            .await
            .map_err(|_| AudioError::PipeWire("the PipeWire thread stopped".into()))??;
        let started = Instant::now();
        loop {
            match capture.start_verdict(started) {
                Some(Ok(())) => return Ok(capture),
                Some(Err(reason)) => return Err(capture.stream_error(reason)),
                None => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    }

    /// `Some(Ok)` once the stream runs linked to the right source, `Some(Err)` when it cannot,
    /// `None` while it may still get there.
    fn start_verdict(&self, started: Instant) -> Option<Result<(), String>> {
        let s = self.lock();
        let linked = s.linked_source();
        if let pw::StreamPhase::Failed(reason) = &s.phase {
            return Some(Err(reason.clone()));
        }
        if let Some(other) = linked
            .as_ref()
            .filter(|l| !self.source.is_empty() && **l != self.source)
        {
            return Some(Err(format!(
                "the session manager linked the stream to {other:?} instead"
            )));
        }
        if linked.is_some() && s.phase == pw::StreamPhase::Streaming && s.frames_seen > 0 {
            return Some(Ok(()));
        }
        if started.elapsed() <= START_TIMEOUT {
            return None;
        }
        let reason = match (&linked, &s.phase) {
            (None, _) => "the stream was not linked to the source (is WirePlumber running?)",
            (Some(_), pw::StreamPhase::Streaming) => "no audio arrived",
            (Some(_), _) => "the stream did not start running (no driver?)",
        };
        Some(Err(format!(
            "{reason} within {} s",
            START_TIMEOUT.as_secs()
        )))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, pw::Shared> {
        // The lock is only held for short copies; a panic while holding it would be a bug in
        // this crate, and the data is still usable.
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The source as messages name it: `"node_name"` or `the default source`.
    pub fn source_label(&self) -> String {
        if self.source.is_empty() {
            "the default source".into()
        } else {
            format!("{:?}", self.source)
        }
    }

    /// The requested `node.name` (empty for the default source).
    pub fn source(&self) -> &str {
        &self.source
    }

    fn stream_error(&self, reason: String) -> AudioError {
        AudioError::Stream {
            device: self.source_label(),
            reason,
        }
    }

    fn check_healthy(&self, s: &pw::Shared) -> Result<(), AudioError> {
        if let pw::StreamPhase::Failed(reason) = &s.phase {
            return Err(self.stream_error(reason.clone()));
        }
        if s.linked_source().is_none() {
            return Err(self.stream_error(
                "the source went away (unplugged, or its node was removed); it is not replaced by another device".into(),
            ));
        }
        Ok(())
    }

    /// Whether the stream still runs linked to its source.
    ///
    /// # Errors
    /// [`AudioError::Stream`] saying what went wrong.
    pub fn healthy(&self) -> Result<(), AudioError> {
        self.check_healthy(&self.lock())
    }

    /// Use other gate settings from the next [`end`](Self::end) on.
    pub fn set_gate(&self, gate: dsp::GateSettings) {
        *self.gate.lock().unwrap_or_else(|e| e.into_inner()) = gate;
    }

    /// The gate settings [`end`](Self::end) uses.
    pub fn gate(&self) -> dsp::GateSettings {
        *self.gate.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Start keeping audio, beginning with the pre-roll. Calling it again while recording
    /// restarts the utterance. Never blocks.
    ///
    /// # Errors
    /// [`AudioError::Stream`] when the stream failed or lost its source.
    pub fn begin(&self) -> Result<(), AudioError> {
        let mut s = self.lock();
        self.check_healthy(&s)?;
        let pre_roll: Vec<f32> = s.ring.drain(..).collect();
        s.recording = Some(pre_roll);
        s.truncated = false;
        Ok(())
    }

    /// Start keeping audio from now on, without the pre-roll (a recording of an exact length).
    ///
    /// # Errors
    /// As [`begin`](Self::begin).
    pub fn begin_without_pre_roll(&self) -> Result<(), AudioError> {
        let mut s = self.lock();
        self.check_healthy(&s)?;
        s.ring.clear();
        s.recording = Some(Vec::new());
        s.truncated = false;
        Ok(())
    }

    /// The interleaved samples recorded from index `from` on, with the rate and channel
    /// count; `None` when nothing is being recorded. Never blocks for long (one copy under
    /// the stream's lock).
    pub fn recorded_since(&self, from: usize) -> Option<(Vec<f32>, u32, u32)> {
        let s = self.lock();
        let rec = s.recording.as_ref()?;
        Some((rec[from.min(rec.len())..].to_vec(), s.rate, s.channels))
    }

    /// Whether an utterance is being recorded.
    pub fn is_recording(&self) -> bool {
        self.lock().recording.is_some()
    }

    /// Stop keeping audio and turn it into an [`Utterance`] (downmix, resample to 16 kHz,
    /// gate), off the async runtime's thread.
    ///
    /// # Errors
    /// [`AudioError::NotRecording`] without [`begin`](Self::begin); [`AudioError::Stream`] when
    /// the stream failed or lost its source meanwhile (the audio is dropped then).
    pub async fn end(&self) -> Result<Utterance, AudioError> {
        self.take()?.process().await
    }

    /// The first half of [`end`](Self::end): stop keeping audio and take what was captured,
    /// without processing it. Never blocks; from its return on, [`begin`](Self::begin)
    /// starts a new utterance.
    ///
    /// # Errors
    /// As [`end`](Self::end).
    pub fn take(&self) -> Result<RawUtterance, AudioError> {
        let mut s = self.lock();
        let raw = s.recording.take().ok_or(AudioError::NotRecording)?;
        self.raw(&s, raw)
    }

    /// A copy of the utterance recorded so far, which goes on recording: what
    /// [`take`](Self::take) would give now, for a partial transcript while the key is held.
    /// Never blocks for long (one copy under the stream's lock).
    ///
    /// # Errors
    /// As [`end`](Self::end).
    pub fn peek(&self) -> Result<RawUtterance, AudioError> {
        let s = self.lock();
        let raw = s.recording.clone().ok_or(AudioError::NotRecording)?;
        self.raw(&s, raw)
    }

    /// `interleaved` as an utterance of the stream in state `s`, when the stream is healthy.
    fn raw(&self, s: &pw::Shared, interleaved: Vec<f32>) -> Result<RawUtterance, AudioError> {
        self.check_healthy(s)?;
        Ok(RawUtterance {
            interleaved,
            rate: s.rate,
            channels: s.channels,
            truncated: s.truncated,
            gate: self.gate(),
        })
    }

    /// Drop the utterance being recorded (if any) and go back to keeping the pre-roll.
    /// Returns whether there was one.
    pub fn cancel(&self) -> bool {
        self.lock().recording.take().is_some()
    }

    /// The stream's state.
    pub fn status(&self) -> CaptureStatus {
        let s = self.lock();
        let (state, error) = match &s.phase {
            pw::StreamPhase::Failed(e) => ("failed", Some(e.clone())),
            _ if s.recording.is_some() => ("recording", None),
            pw::StreamPhase::Streaming => ("streaming", None),
            pw::StreamPhase::Paused => ("paused", None),
            pw::StreamPhase::Connecting => ("connecting", None),
        };
        CaptureStatus {
            configured_source: self.source.clone(),
            linked_source: s.linked_source(),
            state: state.into(),
            error,
            rate: s.rate,
            channels: s.channels,
            frames: s.frames_seen,
            level_db: s.recent_level_db(),
        }
    }
}

impl Drop for AudioCapture {
    fn drop(&mut self) {
        // The thread quits its main loop, disconnects and ends; nothing to wait for.
        let _ = self.stop.send(());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_handles_can_be_shared_between_tasks() {
        fn shareable<T: Send + Sync>() {}
        shareable::<AudioCapture>();
        shareable::<Utterance>();
    }

    #[test]
    fn utterance_from_stereo_48k() {
        // 0.5 s silence, 0.5 s of a 300 Hz tone on the left channel only, 0.5 s silence.
        let mut raw = vec![0.0f32; 48_000];
        for i in 0..24_000 {
            let s = 0.4 * (2.0 * std::f32::consts::PI * 300.0 * i as f32 / 48_000.0).sin();
            raw.extend([s, 0.0]);
        }
        raw.extend(vec![0.0f32; 48_000]);
        // A tone is not a voice: the energy gate alone (the detector is tested in tests/vad.rs).
        let energy = dsp::GateSettings {
            detector: false,
            ..dsp::GateSettings::default()
        };
        let u = Utterance::from_interleaved(&raw, 48_000, 2, &energy, false).unwrap();
        assert_eq!(u.rate, 16_000);
        assert_eq!(u.captured, Duration::from_millis(1_500));
        assert!(u.has_speech);
        assert!(u.speech.abs_diff(Duration::from_millis(500)) <= Duration::from_millis(10));
        // Averaged with a silent channel: half the amplitude.
        assert!((u.peak - 0.2).abs() < 0.01, "{}", u.peak);
        assert!(u.duration().abs_diff(Duration::from_millis(800)) <= Duration::from_millis(12));
        assert!(
            u.trimmed_leading.abs_diff(Duration::from_millis(350)) <= Duration::from_millis(12)
        );
        assert!(
            u.trimmed_trailing.abs_diff(Duration::from_millis(350)) <= Duration::from_millis(12)
        );
        let json = serde_json::to_value(&u).unwrap();
        assert_eq!(json["captured_ms"], 1_500);
        assert_eq!(json["has_speech"], true);
        assert!(json.get("samples").is_none());
        let bytes = u.to_le_bytes();
        assert_eq!(bytes.len(), u.samples.len() * 4);
        assert_eq!(bytes[..4], u.samples[0].to_le_bytes());
    }

    #[test]
    fn empty_and_degenerate_input_does_not_panic() {
        let gate = dsp::GateSettings::default();
        let u = Utterance::from_interleaved(&[], 48_000, 2, &gate, false).unwrap();
        assert!(!u.has_speech && u.samples.is_empty());
        assert_eq!(u.captured, Duration::ZERO);
        // A channel count of 0 is read as 1; a partial frame is dropped.
        let u = Utterance::from_interleaved(&[0.1; 7], 16_000, 0, &gate, false).unwrap();
        assert_eq!(u.source_channels, 0);
        assert!(Utterance::from_interleaved(&[0.1; 8], 0, 1, &gate, false).is_err());
    }

    #[test]
    fn errors_say_what_to_do() {
        let e = AudioError::SourceNotFound {
            name: "usb_mic".into(),
            available: vec!["a".into(), "b".into()],
        };
        assert_eq!(
            e.to_string(),
            "audio source \"usb_mic\" does not exist; available sources: a, b"
        );
        let none = AudioError::SourceNotFound {
            name: "x".into(),
            available: vec![],
        };
        assert!(none.to_string().ends_with("available sources: none"));
        assert!(
            AudioError::NotRunning("Creation failed".into())
                .to_string()
                .contains("systemctl --user start pipewire")
        );
    }

    #[test]
    fn source_names_are_checked_before_they_reach_pipewire() {
        assert!(valid_source_name(""));
        assert!(valid_source_name(
            "alsa_input.usb-Blue_Yeti-00.analog-stereo"
        ));
        assert!(!valid_source_name("mic\0"));
        assert!(!valid_source_name(" mic"));
        assert!(!valid_source_name("mic\n"));
    }

    #[tokio::test]
    async fn a_bad_source_name_is_refused_without_touching_pipewire() {
        let settings = CaptureSettings {
            source: "a\0b".into(),
            ..CaptureSettings::default()
        };
        let err = AudioCapture::open(&settings).await.unwrap_err();
        assert_eq!(err, AudioError::InvalidSource("a\0b".into()));
    }

    #[test]
    fn only_the_gate_can_change_without_reopening() {
        let a = CaptureSettings::default();
        let mut b = a.clone();
        b.vad.threshold_db = -40.0;
        assert!(a.same_stream(&b));
        b.pre_roll_ms = 0;
        assert!(!a.same_stream(&b));
    }
}
