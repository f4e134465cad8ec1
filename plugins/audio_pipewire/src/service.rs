//! The JSON-RPC side: the `audio.*` methods (shapes in the crate's README.md).
//!
//! One plugin process holds at most one capture stream ([`AudioCapture`]) and at most one
//! utterance at a time: either one started by `audio.begin` (ended by `audio.end`) or one
//! timed by `audio.record`. Opening the stream (`audio.configure`, or `audio.begin` /
//! `audio.record` after the stream failed) is serialised; the status methods never wait for
//! it. Every error leaves the plugin serving: a failed stream is dropped and opened again,
//! from the last configured settings, by the next `audio.begin` or `audio.record`.

use crate::capture::{AudioCapture, CaptureSettings, RawUtterance, Utterance, list_sources};
use crate::dsp::{GateSettings, TARGET_RATE};
use crate::source::{AudioError, valid_source_name};
use base64::Engine as _;
use serde_json::{Map, Value, json};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use utter_protocol::handshake::{HealthResult, HealthStatus};
use utter_protocol::plugin::{Call, Handler};
use utter_protocol::{Connection, ErrorObject};

/// `audio.configure {source?, pre_roll_ms?, max_seconds?, vad?}`.
pub const CONFIGURE: &str = "audio.configure";
/// `audio.sources {}`.
pub const SOURCES: &str = "audio.sources";
/// `audio.status {}`.
pub const STATUS: &str = "audio.status";
/// `audio.begin {}`.
pub const BEGIN: &str = "audio.begin";
/// `audio.end {keep_silence?}`.
pub const END: &str = "audio.end";
/// `audio.cancel {}`.
pub const CANCEL: &str = "audio.cancel";
/// `audio.peek {}`: the utterance so far, as `audio.end` answers, while it goes on.
pub const PEEK: &str = "audio.peek";
/// `audio.record {seconds, keep_silence?}`.
pub const RECORD: &str = "audio.record";
/// The notification sent once per `audio.begin` when speech was heard and then
/// `end_silence_ms` of silence: `{speech_ms, silence_ms, listen}` (`listen`: the number
/// `audio.begin` answered). It always uses the voice-activity detector, whatever
/// `vad.detector` says about the gate.
pub const SPEECH_ENDED: &str = "audio.speech_ended";

/// How often the end-of-speech watcher looks at the recording.
const WATCH_EVERY: Duration = Duration::from_millis(20);

/// What the handles hold: raw little-endian 32-bit float samples.
pub const FORMAT: &str = "audio.pcm_f32le@1";

/// The longest utterance the plugin keeps, whatever `max_seconds` says: 180 s of 16 kHz
/// `f32` is 11.5 MB, 15.4 MB as the base64 of one `handle.create` request, which has to fit
/// the protocol's 16 MiB frame limit.
pub const MAX_UTTERANCE_SECONDS: u32 = 180;

/// How long the runner may take to answer `handle.create`.
pub const HANDLE_CREATE_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest `source` accepted, in bytes (node names are far shorter).
pub const MAX_SOURCE_LEN: usize = 512;

/// An utterance taken from its stream: the stream, what [`AudioCapture::take`] gave, and when
/// the flush started.
type Taken = (Arc<AudioCapture>, Result<RawUtterance, AudioError>, Instant);

/// What is being recorded.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Session {
    /// Nothing: the stream only keeps the pre-roll.
    #[default]
    Idle,
    /// An utterance started by `audio.begin`.
    Utterance,
    /// The `audio.record` with this number.
    Record(u64),
}

#[derive(Default)]
struct State {
    /// The settings of the last valid `audio.configure` (kept when opening failed, so that
    /// `audio.begin` can try again).
    wanted: Option<CaptureSettings>,
    /// The open stream.
    capture: Option<Arc<AudioCapture>>,
    session: Session,
    /// Why the last open failed or the stream was dropped.
    last_error: Option<String>,
    /// A stream is being opened.
    opening: bool,
    /// `audio.record` calls so far (numbers [`Session::Record`]).
    records: u64,
    /// `audio.begin` calls so far: an end-of-speech watcher stops when it changed.
    begins: u64,
}

#[derive(Default)]
struct Inner {
    state: Mutex<State>,
    /// Held while a stream is opened, so that two calls never open two streams.
    open: tokio::sync::Mutex<()>,
    /// Held while the sources are listed: one PipeWire connection for it at a time, however
    /// many `audio.sources` requests arrive.
    listing: tokio::sync::Mutex<()>,
}

/// The `audio` plugin: one capture stream and the request handlers.
#[derive(Clone, Default)]
pub struct AudioPlugin {
    inner: Arc<Inner>,
}

/// Clears [`State::opening`] however the open ends (also when its task is aborted).
struct OpeningFlag<'a>(&'a AudioPlugin);

impl Drop for OpeningFlag<'_> {
    fn drop(&mut self) {
        self.0.state().opening = false;
    }
}

/// Cancels an `audio.record` whose task was aborted (`$/cancel`, timeout, end of input).
struct RecordGuard {
    plugin: AudioPlugin,
    id: u64,
    capture: Arc<AudioCapture>,
    armed: bool,
}

impl Drop for RecordGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut st = self.plugin.state();
        if st.session == Session::Record(self.id) {
            st.session = Session::Idle;
            self.capture.cancel();
        }
    }
}

impl AudioPlugin {
    /// A plugin with no stream open.
    pub fn new() -> AudioPlugin {
        AudioPlugin::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Held only for short, non-panicking updates; the state stays consistent.
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The open stream, when it is still healthy.
    fn healthy_capture(&self) -> Option<Arc<AudioCapture>> {
        self_healthy(&self.state())
    }

    /// Drop `capture` (when it is still the current stream) after it failed with `error`.
    fn forget(&self, capture: &Arc<AudioCapture>, error: &AudioError) {
        let mut st = self.state();
        if st.capture.as_ref().is_some_and(|c| Arc::ptr_eq(c, capture)) {
            st.capture = None;
            st.session = Session::Idle;
        }
        st.last_error = Some(error.to_string());
    }

    /// Open a stream for `wanted`; the caller holds [`Inner::open`].
    async fn open_locked(
        &self,
        method: &str,
        wanted: &CaptureSettings,
    ) -> Result<Arc<AudioCapture>, ErrorObject> {
        self.state().opening = true;
        let _flag = OpeningFlag(self);
        let effective = CaptureSettings {
            max_seconds: wanted.max_seconds.min(MAX_UTTERANCE_SECONDS),
            ..wanted.clone()
        };
        match AudioCapture::open(&effective).await {
            Ok(capture) => {
                let capture = Arc::new(capture);
                let mut st = self.state();
                st.capture = Some(capture.clone());
                st.last_error = None;
                Ok(capture)
            }
            Err(e) => {
                self.state().last_error = Some(e.to_string());
                Err(audio_error(method, e))
            }
        }
    }

    /// The healthy stream, opened again from the configured settings when it failed.
    async fn ensure_open(&self, method: &str) -> Result<Arc<AudioCapture>, ErrorObject> {
        if let Some(capture) = self.healthy_capture() {
            return Ok(capture);
        }
        let _one = self.inner.open.lock().await;
        if let Some(capture) = self.healthy_capture() {
            return Ok(capture);
        }
        let wanted = {
            let mut st = self.state();
            let Some(wanted) = st.wanted.clone() else {
                return Err(ErrorObject::plugin(format!(
                    "{method}: the microphone is not configured; call {CONFIGURE} first"
                )));
            };
            if let Some(old) = st.capture.take() {
                eprintln!(
                    "utter-audio-pipewire: reopening {}: {}",
                    old.source_label(),
                    old.healthy()
                        .err()
                        .map(|e| e.to_string())
                        .unwrap_or_default()
                );
            }
            st.session = Session::Idle;
            wanted
        };
        self.open_locked(method, &wanted).await
    }

    async fn configure(&self, params: &Value) -> Result<Value, ErrorObject> {
        let wanted = parse_settings(params)?;
        let _one = self.inner.open.lock().await;
        let (previous, healthy) = {
            let st = self.state();
            (st.wanted.clone(), self_healthy(&st))
        };
        let (status, capture) = match (previous, healthy) {
            (Some(previous), Some(capture)) if previous == wanted => ("unchanged", capture),
            (Some(previous), Some(capture)) if previous.same_stream(&wanted) => {
                capture.set_gate(wanted.vad);
                self.state().wanted = Some(wanted.clone());
                ("updated", capture)
            }
            (previous, _) => {
                let reopening = {
                    let mut st = self.state();
                    let reopening = previous.is_some() || st.capture.is_some();
                    st.wanted = Some(wanted.clone());
                    // An utterance in progress is dropped with the old stream.
                    st.capture = None;
                    st.session = Session::Idle;
                    reopening
                };
                let capture = self.open_locked(CONFIGURE, &wanted).await?;
                (if reopening { "reopened" } else { "opened" }, capture)
            }
        };
        let now = capture.status();
        Ok(json!({
            "status": status,
            "settings": settings_json(&wanted),
            "source": now.linked_source,
            "rate": now.rate,
            "channels": now.channels,
            "max_seconds": wanted.max_seconds.min(MAX_UTTERANCE_SECONDS),
        }))
    }

    async fn begin(&self, peer: &Connection) -> Result<Value, ErrorObject> {
        refuse_while_recording(&self.state(), BEGIN)?;
        let capture = self.ensure_open(BEGIN).await?;
        let mut st = self.state();
        refuse_while_recording(&st, BEGIN)?;
        if !st
            .capture
            .as_ref()
            .is_some_and(|c| Arc::ptr_eq(c, &capture))
        {
            return Err(ErrorObject::plugin(format!(
                "{BEGIN}: the stream was reconfigured meanwhile; try again"
            )));
        }
        match capture.begin() {
            Ok(()) => {
                st.session = Session::Utterance;
                st.begins += 1;
                let end_silence_ms = st.wanted.as_ref().map_or(0, |w| w.end_silence_ms);
                if end_silence_ms > 0 {
                    let min_speech_ms = capture.gate().min_speech_ms;
                    self.watch_end_of_speech(
                        st.begins,
                        capture.clone(),
                        peer.clone(),
                        min_speech_ms,
                        end_silence_ms,
                    );
                }
                Ok(json!({"end_silence_ms": end_silence_ms, "listen": st.begins}))
            }
            Err(e) => {
                st.capture = None;
                st.session = Session::Idle;
                st.last_error = Some(e.to_string());
                Err(audio_error(BEGIN, e))
            }
        }
    }

    async fn end(&self, call: &Call) -> Result<Value, ErrorObject> {
        let keep_silence = optional_bool(&call.params, "keep_silence", END)?.unwrap_or(false);
        let flush_started = Instant::now();
        let taken = {
            let mut st = self.state();
            match st.session {
                Session::Utterance => {}
                Session::Record(_) => {
                    return Err(ErrorObject::plugin(format!(
                        "{END}: {RECORD} is running and ends by itself ({CANCEL} stops it)"
                    )));
                }
                Session::Idle => return Err(audio_error(END, AudioError::NotRecording)),
            }
            st.session = Session::Idle;
            let capture = st
                .capture
                .clone()
                .ok_or_else(|| audio_error(END, AudioError::NotRecording))?;
            // Taken under the state lock: a begin right after this one starts afresh.
            let taken = capture.take();
            (capture, taken, flush_started)
        };
        self.finish(END, taken, &call.peer, keep_silence).await
    }

    /// [`PEEK`]: what [`END`] would answer now (a handle to the utterance so far, trimmed and
    /// gated; no handle while the gate hears no speech yet), and the utterance goes on.
    async fn peek(&self, call: &Call) -> Result<Value, ErrorObject> {
        let flush_started = Instant::now();
        let taken = {
            let st = self.state();
            if st.session != Session::Utterance {
                return Err(ErrorObject::plugin(format!(
                    "{PEEK}: no utterance is being recorded ({BEGIN} starts one)"
                )));
            }
            let capture = st
                .capture
                .clone()
                .ok_or_else(|| audio_error(PEEK, AudioError::NotRecording))?;
            let peeked = capture.peek();
            (capture, peeked, flush_started)
        };
        self.finish(PEEK, taken, &call.peer, false).await
    }

    /// Follow utterance `begin` of `capture` until speech was followed by `end_silence_ms`
    /// of silence, then send [`SPEECH_ENDED`] to `peer` once. Stops without a word when the
    /// utterance ends, is cancelled or another begins first.
    fn watch_end_of_speech(
        &self,
        begin: u64,
        capture: Arc<AudioCapture>,
        peer: Connection,
        min_speech_ms: u32,
        end_silence_ms: u32,
    ) {
        let plugin = self.clone();
        tokio::spawn(async move {
            let mut detector: Option<crate::vad::EndOfSpeech> = None;
            let mut read = 0usize;
            let mut format = (0, 0);
            loop {
                tokio::time::sleep(WATCH_EVERY).await;
                {
                    let st = plugin.state();
                    if st.begins != begin || st.session != Session::Utterance {
                        return;
                    }
                }
                let Some((samples, rate, channels)) = capture.recorded_since(read) else {
                    return;
                };
                if rate == 0 {
                    continue;
                }
                if format != (rate, channels) {
                    // The stream's format changed (the recording restarted): start over.
                    format = (rate, channels);
                    detector = None;
                }
                read += samples.len();
                let detector = detector.get_or_insert_with(|| {
                    crate::vad::EndOfSpeech::new(rate, channels, min_speech_ms, end_silence_ms)
                });
                if let Some(ended) = detector.push(&samples) {
                    let _ = peer
                        .notify(
                            SPEECH_ENDED,
                            json!({"speech_ms": ended.speech_ms, "silence_ms": ended.silence_ms, "listen": begin}),
                        )
                        .await;
                    return;
                }
            }
        });
    }

    fn cancel(&self) -> Value {
        let mut st = self.state();
        let cancelled = st.session != Session::Idle;
        st.session = Session::Idle;
        if let Some(capture) = &st.capture {
            capture.cancel();
        }
        json!({"cancelled": cancelled})
    }

    async fn record(&self, call: &Call) -> Result<Value, ErrorObject> {
        let seconds = required_seconds(&call.params)?;
        let keep_silence = optional_bool(&call.params, "keep_silence", RECORD)?.unwrap_or(false);
        refuse_while_recording(&self.state(), RECORD)?;
        let capture = self.ensure_open(RECORD).await?;
        let (id, max_seconds) = {
            let mut st = self.state();
            refuse_while_recording(&st, RECORD)?;
            if !st
                .capture
                .as_ref()
                .is_some_and(|c| Arc::ptr_eq(c, &capture))
            {
                return Err(ErrorObject::plugin(format!(
                    "{RECORD}: the stream was reconfigured meanwhile; try again"
                )));
            }
            let max_seconds = st
                .wanted
                .as_ref()
                .map_or(CaptureSettings::default().max_seconds, |w| w.max_seconds)
                .min(MAX_UTTERANCE_SECONDS);
            if let Err(e) = capture.begin_without_pre_roll() {
                st.capture = None;
                st.last_error = Some(e.to_string());
                return Err(audio_error(RECORD, e));
            }
            st.records += 1;
            st.session = Session::Record(st.records);
            (st.records, max_seconds)
        };
        let mut guard = RecordGuard {
            plugin: self.clone(),
            id,
            capture: capture.clone(),
            armed: true,
        };
        let capped = seconds > f64::from(max_seconds);
        let used = seconds.min(f64::from(max_seconds));
        let length = Duration::try_from_secs_f64(used).map_err(|e| {
            ErrorObject::invalid_params(format!("{RECORD}: seconds: {used} is not a duration: {e}"))
        })?;
        tokio::time::sleep(length).await;
        let flush_started = Instant::now();
        let taken = {
            let mut st = self.state();
            guard.armed = false;
            if st.session != Session::Record(id) {
                return Err(ErrorObject::plugin(format!(
                    "{RECORD}: cancelled before the {used} s were up ({CANCEL}, or {CONFIGURE} reopened the stream)"
                )));
            }
            st.session = Session::Idle;
            capture.take()
        };
        let mut result = self
            .finish(
                RECORD,
                (capture, taken, flush_started),
                &call.peer,
                keep_silence,
            )
            .await?;
        if let Some(map) = result.as_object_mut() {
            map.insert("seconds".into(), json!(used));
            map.insert("capped".into(), json!(capped));
        }
        Ok(result)
    }

    /// Process the utterance taken from `capture`, store its samples with `handle.create` on the runner,
    /// and describe it.
    async fn finish(
        &self,
        method: &str,
        (capture, taken, flush_started): Taken,
        peer: &Connection,
        keep_silence: bool,
    ) -> Result<Value, ErrorObject> {
        let capture = &capture;
        let processed = match taken {
            Ok(raw) => raw.process().await,
            Err(e) => Err(e),
        };
        let utterance = match processed {
            Ok(u) => u,
            Err(e) => {
                if matches!(e, AudioError::Stream { .. }) {
                    eprintln!("utter-audio-pipewire: {e}");
                    self.forget(capture, &e);
                }
                return Err(audio_error(method, e));
            }
        };
        let flush = flush_started.elapsed();
        let store = utterance.has_speech || (keep_silence && !utterance.samples.is_empty());
        let stored = if store {
            Some(
                hand_off(peer, &utterance.samples)
                    .await
                    .map_err(|e| ErrorObject {
                        message: format!("{method}: {}", e.message),
                        ..e
                    })?,
            )
        } else {
            None
        };
        Ok(json!({
            "audio": audio_json(&utterance, capture),
            "handle": stored.as_ref().map(|s| s.handle.clone()),
            "format": FORMAT,
            "rate": TARGET_RATE,
            "channels": 1,
            "samples": stored.as_ref().map_or(0, |_| utterance.samples.len()),
            "bytes": stored.as_ref().map_or(0, |s| s.bytes),
            "flush_ms": ms(flush),
            "encode_ms": ms(stored.as_ref().map_or(Duration::ZERO, |s| s.encode)),
            "handoff_ms": ms(stored.as_ref().map_or(Duration::ZERO, |s| s.round_trip)),
        }))
    }

    async fn sources(&self) -> Result<Value, ErrorObject> {
        let _one = self.inner.listing.lock().await;
        let sources = list_sources().await.map_err(|e| audio_error(SOURCES, e))?;
        Ok(json!({"sources": sources}))
    }

    fn status(&self) -> Value {
        let st = self.state();
        let capture = st.capture.as_ref().map(|c| (c.status(), c.healthy()));
        let (state, error) = match (&capture, &st.wanted) {
            _ if st.opening => ("opening".to_owned(), None),
            (Some((_, Err(e))), _) => ("failed".to_owned(), Some(e.to_string())),
            (Some((now, Ok(()))), _) => (now.state.clone(), None),
            (None, None) => ("unconfigured".to_owned(), None),
            (None, Some(_)) if st.last_error.is_some() => ("failed".to_owned(), None),
            (None, Some(_)) => ("closed".to_owned(), None),
        };
        json!({
            "configured": st.wanted.is_some(),
            "state": state,
            "error": error,
            "recording": match st.session {
                Session::Idle => Value::Null,
                Session::Utterance => json!("utterance"),
                Session::Record(_) => json!("record"),
            },
            "settings": st.wanted.as_ref().map(settings_json),
            "max_seconds": st.wanted.as_ref().map(|w| w.max_seconds.min(MAX_UTTERANCE_SECONDS)),
            "capture": capture.map(|(now, _)| now),
            "last_error": st.last_error,
        })
    }
}

/// What [`hand_off`] stored.
#[derive(Debug, Clone, PartialEq)]
pub struct HandOff {
    /// `handle://<sha256 hex>`, in the plugin's scope on the runner.
    pub handle: String,
    /// The size of the blob: 4 bytes per sample.
    pub bytes: usize,
    /// Turning the samples into little-endian bytes and base64.
    pub encode: Duration,
    /// The `handle.create` request, from sending it to its answer.
    pub round_trip: Duration,
}

/// Store `samples` on the runner as raw `audio.pcm_f32le@1` bytes: `handle.create
/// {data_b64}` on `peer` (PROTOCOL.md §10.1), the reply checked for a handle and the size.
///
/// # Errors
/// `-32000` when the runner refuses (its error is in `data.handle_create`) or answers
/// without a handle.
pub async fn hand_off(peer: &Connection, samples: &[f32]) -> Result<HandOff, ErrorObject> {
    let encode_started = Instant::now();
    let raw = crate::capture::pcm_f32le(samples);
    let data_b64 = base64::engine::general_purpose::STANDARD.encode(&raw);
    let encode = encode_started.elapsed();
    let sent = Instant::now();
    let reply = peer
        .request(
            "handle.create",
            json!({"data_b64": data_b64}),
            Some(HANDLE_CREATE_TIMEOUT),
        )
        .await
        .map_err(|e| handoff_error(raw.len(), e))?;
    let round_trip = sent.elapsed();
    let handle = created_handle(&reply, raw.len())?;
    Ok(HandOff {
        handle,
        bytes: raw.len(),
        encode,
        round_trip,
    })
}

/// The healthy stream in `st`, if any.
fn self_healthy(st: &State) -> Option<Arc<AudioCapture>> {
    st.capture.as_ref().filter(|c| c.healthy().is_ok()).cloned()
}

fn refuse_while_recording(st: &State, method: &str) -> Result<(), ErrorObject> {
    let busy = match st.session {
        Session::Record(_) => format!("{RECORD} is running ({CANCEL} stops it)"),
        Session::Utterance if method == RECORD => {
            format!("{BEGIN} started an utterance; {END} or {CANCEL} it first")
        }
        _ => return Ok(()),
    };
    Err(ErrorObject::plugin(format!("{method}: busy: {busy}")))
}

/// Milliseconds with microsecond precision.
fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1_000_000.0).round() / 1000.0
}

fn audio_json(utterance: &Utterance, capture: &AudioCapture) -> Value {
    let mut value = serde_json::to_value(utterance).unwrap_or_else(|_| json!({}));
    if let Some(map) = value.as_object_mut() {
        map.insert(
            "duration_ms".into(),
            json!(utterance.duration().as_millis() as u64),
        );
        map.insert("source".into(), json!(capture.status().linked_source));
    }
    value
}

/// The handle in a `handle.create` reply, checked against what was sent.
fn created_handle(reply: &Value, size: usize) -> Result<String, ErrorObject> {
    let handle = reply
        .get("handle")
        .and_then(Value::as_str)
        .filter(|h| h.starts_with("handle://"))
        .ok_or_else(|| {
            ErrorObject::plugin(format!(
                "the runner's handle.create reply names no handle: {}",
                shown(reply)
            ))
        })?;
    match reply.get("size").and_then(Value::as_u64) {
        Some(stored) if stored != size as u64 => Err(ErrorObject::plugin(format!(
            "the runner's handle.create stored {stored} bytes of the {size} sent"
        ))),
        _ => Ok(handle.to_owned()),
    }
}

fn handoff_error(size: usize, e: ErrorObject) -> ErrorObject {
    ErrorObject::plugin(format!(
        "handing {size} bytes of audio to the runner failed: handle.create: {} [{}]",
        e.message, e.code
    ))
    .with_data(json!({"handle_create": e}))
}

/// The error object for an [`AudioError`] in `method`. A missing source is `-32602` in
/// `audio.configure` (the caller named it) and `-32000` elsewhere (it went away since);
/// both carry `data: {source, available}`.
fn audio_error(method: &str, e: AudioError) -> ErrorObject {
    let message = format!("{method}: {e}");
    match e {
        AudioError::SourceNotFound { name, available } => {
            let message = format!(
                "{message}; it is never replaced by another device ({SOURCES} lists the node names)"
            );
            let data = json!({"source": name, "available": available});
            if method == CONFIGURE {
                ErrorObject::invalid_params(message).with_data(data)
            } else {
                ErrorObject::plugin(message).with_data(data)
            }
        }
        AudioError::InvalidSource(_) => ErrorObject::invalid_params(message),
        AudioError::NotRunning(_)
        | AudioError::Stream { .. }
        | AudioError::NotRecording
        | AudioError::PipeWire(_)
        | AudioError::Processing(_) => ErrorObject::plugin(message),
    }
}

fn settings_json(s: &CaptureSettings) -> Value {
    json!({
        "source": s.source,
        "pre_roll_ms": s.pre_roll_ms,
        "max_seconds": s.max_seconds,
        "end_silence_ms": s.end_silence_ms,
        "vad": {
            "silence_threshold_db": s.vad.threshold_db,
            "trim": s.vad.trim,
            "margin_ms": s.vad.margin_ms,
            "min_speech_ms": s.vad.min_speech_ms,
            "detector": if s.vad.detector { "earshot" } else { "energy" },
        },
    })
}

/// A JSON value for an error message, cut to 80 characters.
fn shown(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// The member `key` of `obj`, treating `null` as absent.
fn present<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

fn object<'a>(params: &'a Value, method: &str) -> Result<&'a Map<String, Value>, ErrorObject> {
    params.as_object().ok_or_else(|| {
        ErrorObject::invalid_params(format!(
            "{method}: params must be an object of named parameters, not {}",
            shown(params)
        ))
    })
}

/// A whole number in `min..=max`, or `default` when absent.
fn whole(
    obj: &Map<String, Value>,
    key: &str,
    shown_as: &str,
    (min, max): (u32, u32),
    unit: &str,
    default: u32,
) -> Result<u32, ErrorObject> {
    let Some(v) = present(obj, key) else {
        return Ok(default);
    };
    v.as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| {
            ErrorObject::invalid_params(format!(
                "{CONFIGURE}: {shown_as} must be a whole number of {unit} from {min} to {max}, not {}",
                shown(v)
            ))
        })
}

/// `audio.configure`'s params; absent members take the defaults of the runner's `[audio]`.
fn parse_settings(params: &Value) -> Result<CaptureSettings, ErrorObject> {
    let obj = object(params, CONFIGURE)?;
    let defaults = CaptureSettings::default();
    let source = match present(obj, "source") {
        None => defaults.source.clone(),
        Some(Value::String(name)) => {
            if name.len() > MAX_SOURCE_LEN {
                return Err(ErrorObject::invalid_params(format!(
                    "{CONFIGURE}: source is {} bytes long; a PipeWire node name has at most {MAX_SOURCE_LEN}",
                    name.len()
                )));
            }
            if !valid_source_name(name) {
                return Err(ErrorObject::invalid_params(format!(
                    "{CONFIGURE}: source {} is not a PipeWire node name (no control characters or surrounding spaces); {SOURCES} lists them",
                    shown(&Value::String(name.clone()))
                )));
            }
            name.clone()
        }
        Some(other) => {
            return Err(ErrorObject::invalid_params(format!(
                "{CONFIGURE}: source must be a string (a node name from {SOURCES}, or \"\" for the default source), not {}",
                shown(other)
            )));
        }
    };
    let pre_roll_ms = whole(
        obj,
        "pre_roll_ms",
        "pre_roll_ms",
        (0, 5000),
        "milliseconds",
        defaults.pre_roll_ms,
    )?;
    let max_seconds = whole(
        obj,
        "max_seconds",
        "max_seconds",
        (1, 600),
        "seconds",
        defaults.max_seconds,
    )?;
    let vad = match present(obj, "vad") {
        None => defaults.vad,
        Some(Value::Object(vad)) => parse_gate(vad, defaults.vad)?,
        Some(other) => {
            return Err(ErrorObject::invalid_params(format!(
                "{CONFIGURE}: vad must be an object {{silence_threshold_db, trim, margin_ms, min_speech_ms}}, not {}",
                shown(other)
            )));
        }
    };
    let end_silence_ms = whole(
        obj,
        "end_silence_ms",
        "end_silence_ms",
        (0, 10_000),
        "milliseconds",
        defaults.end_silence_ms,
    )?;
    Ok(CaptureSettings {
        source,
        pre_roll_ms,
        max_seconds,
        vad,
        end_silence_ms,
    })
}

fn parse_gate(
    vad: &Map<String, Value>,
    defaults: GateSettings,
) -> Result<GateSettings, ErrorObject> {
    let threshold_db = match present(vad, "silence_threshold_db") {
        None => defaults.threshold_db,
        Some(v) => v
            .as_f64()
            .filter(|db| db.is_finite() && (-120.0..=0.0).contains(db))
            .map(|db| db as f32)
            .ok_or_else(|| {
                ErrorObject::invalid_params(format!(
                    "{CONFIGURE}: vad.silence_threshold_db must be a number of dBFS from -120 to 0, not {}",
                    shown(v)
                ))
            })?,
    };
    let trim = match present(vad, "trim") {
        None => defaults.trim,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(ErrorObject::invalid_params(format!(
                "{CONFIGURE}: vad.trim must be true or false, not {}",
                shown(other)
            )));
        }
    };
    let margin_ms = whole(
        vad,
        "margin_ms",
        "vad.margin_ms",
        (0, 2000),
        "milliseconds",
        defaults.margin_ms,
    )?;
    let min_speech_ms = whole(
        vad,
        "min_speech_ms",
        "vad.min_speech_ms",
        (0, 5000),
        "milliseconds",
        defaults.min_speech_ms,
    )?;
    let detector = match present(vad, "detector") {
        None => defaults.detector,
        Some(Value::String(d)) if d == "earshot" => true,
        Some(Value::String(d)) if d == "energy" => false,
        Some(other) => {
            return Err(ErrorObject::invalid_params(format!(
                "{CONFIGURE}: vad.detector must be \"earshot\" (a voice-activity detector) or \"energy\" (the level gate only), not {}",
                shown(other)
            )));
        }
    };
    Ok(GateSettings {
        threshold_db,
        trim,
        margin_ms,
        min_speech_ms,
        detector,
    })
}

fn optional_bool(params: &Value, key: &str, method: &str) -> Result<Option<bool>, ErrorObject> {
    match present(object(params, method)?, key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(ErrorObject::invalid_params(format!(
            "{method}: {key} must be true or false, not {}",
            shown(other)
        ))),
    }
}

/// `audio.record`'s `seconds`: a number above 0 (capped at `max_seconds` later).
fn required_seconds(params: &Value) -> Result<f64, ErrorObject> {
    let obj = object(params, RECORD)?;
    let Some(v) = present(obj, "seconds") else {
        return Err(ErrorObject::invalid_params(format!(
            "{RECORD} needs params.seconds: how long to record, in seconds (more than 0; capped at max_seconds)"
        )));
    };
    v.as_f64()
        .filter(|s| s.is_finite() && *s > 0.0)
        .ok_or_else(|| {
            ErrorObject::invalid_params(format!(
                "{RECORD}: seconds must be a number of seconds above 0, not {}",
                shown(v)
            ))
        })
}

impl Handler for AudioPlugin {
    fn methods(&self) -> Vec<String> {
        [CONFIGURE, SOURCES, STATUS, BEGIN, END, CANCEL, RECORD, PEEK]
            .map(String::from)
            .to_vec()
    }

    fn side_effect_free(&self) -> Vec<String> {
        vec![SOURCES.into(), STATUS.into()]
    }

    async fn health(&self) -> HealthResult {
        let st = self.state();
        let mut health = HealthResult::ok();
        let Some(wanted) = &st.wanted else {
            health.detail = format!("not configured yet ({CONFIGURE})");
            return health;
        };
        match st.capture.as_ref().map(|c| (c.status(), c.healthy())) {
            Some((now, Ok(()))) => {
                health.detail = format!(
                    "capturing from {} at {} Hz, {} channel(s)",
                    now.linked_source.unwrap_or_default(),
                    now.rate,
                    now.channels
                );
            }
            Some((_, Err(e))) => {
                health.status = HealthStatus::Degraded;
                health.detail = e.to_string();
            }
            None => {
                health.status = HealthStatus::Degraded;
                health.detail = st.last_error.clone().unwrap_or_else(|| {
                    format!(
                        "the stream from {:?} is not open; {BEGIN} opens it",
                        wanted.source
                    )
                });
            }
        }
        health
    }

    async fn handle(&self, call: Call) -> Result<Value, ErrorObject> {
        object(&call.params, &call.method)?;
        match call.method.as_str() {
            CONFIGURE => self.configure(&call.params).await,
            SOURCES => self.sources().await,
            STATUS => Ok(self.status()),
            BEGIN => self.begin(&call.peer).await,
            END => self.end(&call).await,
            CANCEL => Ok(self.cancel()),
            PEEK => self.peek(&call).await,
            RECORD => self.record(&call).await,
            other => Err(ErrorObject::method_not_found(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configure_params_take_the_runner_defaults() {
        let s = parse_settings(&json!({})).unwrap();
        assert_eq!(s, CaptureSettings::default());
        let s = parse_settings(&json!({
            "source": "mic", "pre_roll_ms": 0, "max_seconds": 600, "timeout_ms": 9000,
            "vad": {"silence_threshold_db": -42.5, "trim": false, "margin_ms": 2000, "min_speech_ms": null},
        }))
        .unwrap();
        assert_eq!(s.source, "mic");
        assert_eq!((s.pre_roll_ms, s.max_seconds), (0, 600));
        assert_eq!(s.vad.threshold_db, -42.5);
        assert!(!s.vad.trim);
        assert_eq!(s.vad.margin_ms, 2000);
        assert_eq!(s.vad.min_speech_ms, 100);
        assert_eq!(settings_json(&s)["vad"]["silence_threshold_db"], -42.5);
    }

    #[test]
    fn bad_configure_params_name_the_field() {
        for (params, field) in [
            (json!({"source": 5}), "source must be a string"),
            (json!({"source": "a\u{0}b"}), "not a PipeWire node name"),
            (json!({"source": " mic"}), "not a PipeWire node name"),
            (json!({"source": "x".repeat(600)}), "at most 512"),
            (json!({"pre_roll_ms": -1}), "pre_roll_ms must be"),
            (json!({"end_silence_ms": 10_001}), "end_silence_ms must be"),
            (json!({"end_silence_ms": "600"}), "end_silence_ms must be"),
            (
                json!({"vad": {"detector": "silero"}}),
                "vad.detector must be",
            ),
            (json!({"vad": {"detector": 1}}), "vad.detector must be"),
            (json!({"pre_roll_ms": 5001}), "pre_roll_ms must be"),
            (json!({"pre_roll_ms": 1.5}), "pre_roll_ms must be"),
            (json!({"pre_roll_ms": "300"}), "pre_roll_ms must be"),
            (json!({"max_seconds": 0}), "max_seconds must be"),
            (json!({"max_seconds": 1e300}), "max_seconds must be"),
            (json!({"max_seconds": u64::MAX}), "max_seconds must be"),
            (json!({"vad": []}), "vad must be an object"),
            (json!({"vad": {"trim": "yes"}}), "vad.trim must be"),
            (
                json!({"vad": {"silence_threshold_db": 3}}),
                "silence_threshold_db",
            ),
            (
                json!({"vad": {"silence_threshold_db": "loud"}}),
                "silence_threshold_db",
            ),
            (json!({"vad": {"margin_ms": 99999}}), "vad.margin_ms"),
            (json!({"vad": {"min_speech_ms": -5}}), "vad.min_speech_ms"),
            (json!([1]), "params must be an object"),
        ] {
            let err = parse_settings(&params).unwrap_err();
            assert_eq!(err.code, -32602, "{params}");
            assert!(err.message.contains(field), "{params}: {}", err.message);
            assert!(err.message.len() < 400, "{}", err.message);
        }
    }

    #[test]
    fn record_seconds_must_be_positive() {
        assert_eq!(required_seconds(&json!({"seconds": 1.5})).unwrap(), 1.5);
        assert_eq!(required_seconds(&json!({"seconds": 1e300})).unwrap(), 1e300);
        for bad in [
            json!({}),
            json!({"seconds": 0}),
            json!({"seconds": -2}),
            json!({"seconds": "3"}),
            json!({"seconds": [3]}),
        ] {
            let err = required_seconds(&bad).unwrap_err();
            assert_eq!(err.code, -32602, "{bad}");
            assert!(err.message.contains("seconds"), "{}", err.message);
        }
    }

    #[test]
    fn a_missing_source_names_it_and_the_present_ones() {
        let e = AudioError::SourceNotFound {
            name: "usb".into(),
            available: vec!["fake_mic".into()],
        };
        let in_configure = audio_error(CONFIGURE, e.clone());
        assert_eq!(in_configure.code, -32602);
        assert!(in_configure.message.contains("\"usb\""));
        assert!(in_configure.message.contains("available sources: fake_mic"));
        assert_eq!(
            in_configure.data,
            Some(json!({"source": "usb", "available": ["fake_mic"]}))
        );
        assert_eq!(audio_error(BEGIN, e).code, -32000);
    }

    #[test]
    fn handle_create_replies_are_checked() {
        let ok = json!({"handle": "handle://ab", "size": 8, "sha256": "ab"});
        assert_eq!(created_handle(&ok, 8).unwrap(), "handle://ab");
        assert!(created_handle(&ok, 9).is_err());
        assert!(created_handle(&json!({"handle": 3}), 8).is_err());
        assert!(created_handle(&json!({"handle": "/etc/passwd"}), 8).is_err());
        assert_eq!(shown(&json!("x".repeat(500))).chars().count(), 81);
    }

    /// A runner stand-in on an in-memory pipe that answers `handle.create` with `answer`.
    fn runner(answer: fn(&Value) -> Result<Value, ErrorObject>) -> (Connection, Connection) {
        use utter_protocol::{ConnectionOptions, Incoming};
        let (a, b) = tokio::io::duplex(1 << 20);
        let (ar, aw) = tokio::io::split(a);
        let (br, bw) = tokio::io::split(b);
        let (plugin, _) = Connection::spawn(ar, aw, ConnectionOptions::default());
        let (host, mut incoming) = Connection::spawn(br, bw, ConnectionOptions::default());
        let replies = host.clone();
        tokio::spawn(async move {
            while let Some(Incoming::Request(req)) = incoming.recv().await {
                let result = if req.method == "handle.create" {
                    answer(&req.params)
                } else {
                    Err(ErrorObject::method_not_found(&req.method))
                };
                let _ = replies.respond(req.id, result).await;
            }
        });
        (plugin, host)
    }

    #[tokio::test]
    async fn hand_off_sends_the_samples_as_f32le_base64() {
        let (plugin, _host) = runner(|params| {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(params["data_b64"].as_str().unwrap_or_default())
                .map_err(|e| ErrorObject::invalid_params(e.to_string()))?;
            assert_eq!(bytes[4..8], 0.5f32.to_le_bytes());
            Ok(json!({"handle": format!("handle://{}", "a".repeat(64)), "size": bytes.len()}))
        });
        let stored = hand_off(&plugin, &[0.0, 0.5, -1.0]).await.unwrap();
        assert_eq!(stored.bytes, 12);
        assert!(stored.handle.starts_with("handle://aaa"));

        let (plugin, _host) = runner(|_| {
            Err(ErrorObject::new(
                utter_protocol::ErrorCode::CapabilityMissing,
                "handle quota exceeded",
            ))
        });
        let err = hand_off(&plugin, &[0.1; 10]).await.unwrap_err();
        assert_eq!(err.code, -32000);
        assert!(
            err.message.contains("40 bytes") && err.message.contains("quota"),
            "{err}"
        );
        assert_eq!(err.data.unwrap()["handle_create"]["code"], -32005);
    }

    #[tokio::test]
    async fn state_errors_without_a_stream() {
        let plugin = AudioPlugin::new();
        let (peer, _runner) = runner(|_| Ok(json!({})));
        let err = plugin.begin(&peer).await.unwrap_err();
        assert_eq!(err.code, -32000);
        assert!(
            err.message.contains("audio.configure first"),
            "{}",
            err.message
        );
        assert_eq!(plugin.cancel(), json!({"cancelled": false}));
        let status = plugin.status();
        assert_eq!(status["state"], "unconfigured");
        assert_eq!(status["configured"], false);
        assert_eq!(plugin.health().await.status, HealthStatus::Ok);
    }
}
