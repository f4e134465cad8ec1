//! The voice loop: push-to-talk → microphone → speech to text → the command pipeline.
//!
//! ```text
//!  key down (portal, evdev, `utter ptt press`, D-Bus PushToTalk)
//!      └─ AudioCapture::begin            (the pre-roll ring becomes the utterance's start)
//!  key up
//!      ├─ AudioCapture::end              "capture flush": downmix, resample to 16 kHz, gate
//!      ├─ handle.create (plugin scope)   the samples as raw f32le, PROTOCOL.md §10.1
//!      ├─ stt.transcribe {audio: handle://…, format: audio.pcm_f32le@1, rate: 16000, channels: 1}
//!      └─ Runner::command(transcript)    provenance `user`, the same gates as `utter say`
//!  → Event::Voice(VoiceReport)           transcript, results and the latency split
//! ```
//!
//! A press shorter than `[ptt] min_hold_ms` or a stuck key never reaches the microphone's
//! buffer (the state machine cancels it). Silence (below `[audio.vad]`) ends as `no-speech`
//! without calling the STT plugin. The microphone stream is opened when the service starts
//! and kept open so that the pre-roll exists; when it cannot be opened the voice loop reports
//! `unavailable` in `utter status` and tries again at the next press, and a named source is
//! never replaced by another device. Spoken feedback (`[tts] enabled`) says what waits for
//! confirmation and why a spoken command failed, through the `tts` plugin's `tts.speak`.

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::audio::{AudioCapture, CaptureStatus, Utterance};
use crate::events::Event;
use crate::handles::Scope;
use crate::pipeline::CommandOptions;
use crate::policy::Provenance;
use crate::ptt::PttEvent;
use crate::runner::Runner;

/// The wire format of the samples handed to the STT plugin (`capabilities.json`).
pub const AUDIO_FORMAT: &str = "audio.pcm_f32le@1";
/// Their rate in Hz.
pub const AUDIO_RATE: u32 = 16_000;

/// What `utter status` shows about the voice loop (`status.voice`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct VoiceStatus {
    /// `off` (no stt plugin configured), `starting`, `ready`, `listening`, `transcribing`,
    /// `unavailable` (the microphone could not be opened; see `detail`).
    pub state: String,
    /// A sentence for people: why it is off or unavailable, or what it uses.
    pub detail: String,
    /// The stt plugin's id, when one is configured.
    pub stt_plugin: Option<String>,
    /// The model directory passed to it (`[stt] model`), when set.
    pub model: Option<String>,
    /// The microphone stream, when open.
    pub microphone: Option<CaptureStatus>,
    /// Why the stt plugin could not load `model`, when it could not.
    pub model_error: Option<String>,
}

/// How one spoken command went, in milliseconds (wall clock, this process).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct VoiceTimings {
    /// How long the key was held.
    pub held_ms: f64,
    /// From key release until the 16 kHz samples were ready (take the buffer, downmix,
    /// resample, gate).
    pub capture_flush_ms: f64,
    /// Storing the samples as a handle.
    pub handoff_ms: f64,
    /// The `stt.transcribe` call (the plugin's model time plus the JSON-RPC hop).
    pub stt_ms: f64,
    /// The plugin's own inference time, as it reported it.
    pub stt_inference_ms: Option<f64>,
    /// The command pipeline: `router.plan`, gates, `action.invoke`.
    pub pipeline_ms: f64,
    /// From key release until the result: the sum of the above.
    pub total_ms: f64,
}

/// The outcome of one push-to-talk cycle, published as the event
/// `{"event":"voice", ...}` (see [`Event::Voice`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VoiceReport {
    /// `ok` (every step succeeded), `failed` (some stage or step failed), `no-speech`
    /// (only silence was captured, or the transcript was empty).
    pub outcome: String,
    /// Where it stopped when not `ok`: `capture`, `stt` or `pipeline`.
    pub stage: Option<String>,
    /// Why, for people.
    pub error: Option<String>,
    /// What the STT plugin heard.
    pub transcript: Option<String>,
    /// The pipeline's outcome (`{utterance, dry_run, plan, results}`, as `runner.command`).
    pub command: Option<Value>,
    /// The captured audio (durations, peak, level; not the samples).
    pub audio: Option<Utterance>,
    /// The latency split.
    pub timings: VoiceTimings,
}

impl VoiceReport {
    fn failed(stage: &str, error: String, timings: VoiceTimings) -> VoiceReport {
        VoiceReport {
            outcome: "failed".into(),
            stage: Some(stage.into()),
            error: Some(error),
            transcript: None,
            command: None,
            audio: None,
            timings,
        }
    }
}

/// The voice loop's state, owned by the [`Runner`].
#[derive(Debug, Default)]
pub struct Voice {
    status: Mutex<VoiceStatus>,
    capture: tokio::sync::Mutex<Option<Arc<AudioCapture>>>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl Voice {
    /// A voice loop that has not started (`state = "off"`).
    pub fn new() -> Voice {
        let voice = Voice::default();
        voice.set_state(
            "off",
            "the voice loop has not started (utter daemon starts it)",
        );
        voice
    }

    /// The current status; `microphone` is left out while the stream is being opened (this
    /// never waits).
    pub fn status(&self) -> VoiceStatus {
        let mut status = self.status.lock().expect("voice status").clone();
        if let Ok(capture) = self.capture.try_lock() {
            status.microphone = capture.as_ref().map(|c| c.status());
        }
        status
    }

    fn set_state(&self, state: &str, detail: impl Into<String>) {
        let mut status = self.status.lock().expect("voice status");
        status.state = state.into();
        status.detail = detail.into();
    }

    /// The model did not load: `ready` becomes `degraded` with the reason, so `utter status`
    /// shows it before the first utterance fails on it.
    fn model_error(&self, message: &str) {
        let mut status = self.status.lock().expect("voice status");
        status.model_error = Some(message.to_owned());
        if status.state == "ready" || status.state == "starting" {
            status.state = "degraded".into();
            status.detail = format!("the speech model did not load: {message}");
        }
    }

    /// Take up a reloaded config: `[stt] model` as status shows it, and the microphone opened
    /// again when `[audio]` changed.
    pub(crate) async fn reconfigure(&self, runner: &Runner, audio_changed: bool) {
        let config = runner.config().config;
        {
            let mut status = self.status.lock().expect("voice status");
            if status.stt_plugin.is_none() {
                return;
            }
            status.model = config.stt.model_path();
            status.model_error = None;
        }
        if audio_changed {
            self.drop_capture().await;
            match self.capture(runner).await {
                Ok(_) => self.set_state("ready", "the microphone was opened again after a reload"),
                Err(e) => self.set_state("unavailable", e),
            }
        }
    }

    fn state(&self) -> String {
        self.status.lock().expect("voice status").state.clone()
    }

    /// The open microphone stream, opening it when there is none.
    async fn capture(&self, runner: &Runner) -> Result<Arc<AudioCapture>, String> {
        let mut slot = self.capture.lock().await;
        if let Some(capture) = slot.as_ref() {
            return Ok(capture.clone());
        }
        let section = runner.config().config.audio;
        match AudioCapture::open(&section).await {
            Ok(capture) => {
                let capture = Arc::new(capture);
                *slot = Some(capture.clone());
                Ok(capture)
            }
            Err(e) => Err(e.to_string()),
        }
    }

    /// Forget a stream that failed (its source went away), so the next press opens again.
    async fn drop_capture(&self) {
        *self.capture.lock().await = None;
    }
}

/// The stt plugin `[stt] plugin` names, else the first `[[plugin]]` of kind `stt`.
fn plugin_of_kind(runner: &Runner, configured: &str, kind: &str) -> Option<String> {
    if !configured.is_empty() {
        return Some(configured.to_owned());
    }
    runner
        .config()
        .config
        .plugin
        .iter()
        .find(|p| p.kind == kind && p.enabled)
        .map(|p| p.id.clone())
}

impl Runner {
    /// Start the voice loop (`utter daemon` calls it once): open the microphone, ask the stt
    /// plugin to load its model, then turn every push-to-talk release into a command. Does
    /// nothing but set `state = "off"` when no stt plugin is configured.
    pub fn start_voice(self: &Arc<Self>) {
        let config = self.config().config;
        let Some(stt) = plugin_of_kind(self, &config.stt.plugin, "stt") else {
            self.voice.set_state(
                "off",
                "no stt plugin is configured (add a [[plugin]] of kind \"stt\", see the README)",
            );
            return;
        };
        {
            let mut status = self.voice.status.lock().expect("voice status");
            status.stt_plugin = Some(stt.clone());
            status.model = config.stt.model_path();
        }
        self.voice.set_state("starting", "opening the microphone");
        let weak = Arc::downgrade(self);
        let events = self.ptt.subscribe();
        // Open the microphone first, then follow the key at once; the model loads beside it
        // (a press during the load is captured, and its transcription waits for the model).
        tokio::spawn(async move {
            open_microphone(&weak, &stt).await;
            let preload = weak.clone();
            tokio::spawn(async move { load_model(&preload, &stt).await });
            voice_loop(weak, events).await;
        });
        self.speak_confirmations();
    }

    /// Say one short sentence through the tts plugin when `[tts] enabled`; failures are
    /// logged, never raised (feedback must not break the command).
    pub async fn speak(&self, text: &str) {
        let config = self.config().config;
        if !config.tts.enabled {
            return;
        }
        let Some(plugin) = plugin_of_kind(self, &config.tts.plugin, "tts") else {
            tracing::warn!("[tts] enabled = true but no plugin of kind \"tts\" is configured");
            return;
        };
        let timeout = Duration::from_millis(config.runner.rpc_timeout_ms);
        if let Err(e) = self
            .supervisor
            .call(&plugin, "tts.speak", json!({ "text": text }), timeout)
            .await
        {
            tracing::warn!(plugin, error = %e.message, "spoken feedback failed");
        }
    }

    /// Speak every confirmation request while `[tts] enabled`.
    fn speak_confirmations(self: &Arc<Self>) {
        let mut events = self.subscribe();
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let event = match events.recv().await {
                    Ok(e) => e,
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                let Some(runner) = weak.upgrade() else { return };
                if let Event::ConfirmationRequested(pending) = event {
                    let text = format!("Confirm: {}", pending.request.summary);
                    tokio::spawn(async move { runner.speak(&text).await });
                }
            }
        });
    }
}

/// Open the microphone (when it fails, the loop tries again at each press).
async fn open_microphone(weak: &Weak<Runner>, stt: &str) {
    let Some(runner) = weak.upgrade() else { return };
    match runner.voice.capture(&runner).await {
        Ok(_) => runner
            .voice
            .set_state("ready", format!("push-to-talk → {stt}")),
        Err(e) => {
            tracing::warn!(error = %e, "the microphone cannot be opened; the voice loop retries at the next press");
            runner.voice.set_state("unavailable", e);
        }
    }
}

/// Ask the stt plugin to load `[stt] model` (when it fails, the plugin loads it at the first
/// transcription, which then reports why).
async fn load_model(weak: &Weak<Runner>, stt: &str) {
    let Some(runner) = weak.upgrade() else { return };
    let config = runner.config().config;
    let Some(model) = config.stt.model_path() else {
        return;
    };
    let mut params = json!({ "model": model });
    if !config.stt.language.is_empty() {
        params["language"] = json!(config.stt.language);
    }
    // The plugin may still be handshaking: wait until it runs.
    let mut plugin_events = runner.supervisor.events();
    for _ in 0..2 {
        if runner
            .plugins()
            .iter()
            .any(|p| p.id == stt && p.status.is_running())
        {
            break;
        }
        let _ = tokio::time::timeout(Duration::from_secs(30), plugin_events.recv()).await;
    }
    let timeout = Duration::from_millis(config.stt.timeout_ms);
    match runner
        .supervisor
        .call(stt, "stt.load", params, timeout)
        .await
    {
        Ok(loaded) => tracing::info!(plugin = stt, %loaded, "speech model loaded"),
        Err(e) => {
            tracing::warn!(plugin = stt, error = %e.message, "the speech model did not load");
            runner.voice.model_error(&e.message);
        }
    }
}

async fn voice_loop(weak: Weak<Runner>, mut events: broadcast::Receiver<PttEvent>) {
    loop {
        let event = match events.recv().await {
            Ok(e) => e,
            Err(broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!(
                    missed = n,
                    "the voice loop fell behind the push-to-talk events"
                );
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let Some(runner) = weak.upgrade() else { return };
        match event {
            PttEvent::Pressed { .. } => match runner.voice.capture(&runner).await {
                Ok(capture) => match capture.begin() {
                    Ok(()) => runner.voice.set_state("listening", "push-to-talk is held"),
                    Err(e) => {
                        runner.voice.drop_capture().await;
                        runner.voice.set_state("unavailable", e.to_string());
                    }
                },
                Err(e) => runner.voice.set_state("unavailable", e),
            },
            PttEvent::Cancelled { reason, .. } => {
                if let Some(capture) = runner.voice.capture.lock().await.as_ref() {
                    capture.cancel();
                }
                if runner.voice.state() == "listening" {
                    runner.voice.set_state(
                        "ready",
                        format!("the last press was cancelled ({})", reason.as_str()),
                    );
                }
            }
            PttEvent::Released { held, .. } => {
                let released = Instant::now();
                let timings = VoiceTimings {
                    held_ms: ms(held),
                    ..VoiceTimings::default()
                };
                let capture = runner.voice.capture.lock().await.clone();
                let Some(capture) = capture else {
                    // The press could not open the microphone; it said why already.
                    let detail = runner.voice.status().detail;
                    publish(
                        &runner,
                        VoiceReport::failed("capture", detail, timings),
                        released,
                    )
                    .await;
                    continue;
                };
                let utterance = capture.end().await;
                let mut timings = timings;
                timings.capture_flush_ms = ms(released.elapsed());
                match utterance {
                    Ok(utterance) => {
                        runner.voice.set_state("transcribing", "speech to text");
                        // The next press may begin while this one is transcribed.
                        let runner = runner.clone();
                        tokio::spawn(async move {
                            let report = transcribe_and_run(&runner, utterance, timings).await;
                            publish(&runner, report, released).await;
                        });
                    }
                    Err(e) => {
                        runner.voice.drop_capture().await;
                        runner.voice.set_state("unavailable", e.to_string());
                        publish(
                            &runner,
                            VoiceReport::failed("capture", e.to_string(), timings),
                            released,
                        )
                        .await;
                    }
                }
            }
        }
    }
}

/// Publish `report` (with `total_ms` since `released`), reset the state and give spoken
/// feedback for failures.
async fn publish(runner: &Runner, mut report: VoiceReport, released: Instant) {
    report.timings.total_ms = ms(released.elapsed());
    match report.outcome.as_str() {
        "ok" => tracing::info!(
            transcript = report.transcript.as_deref().unwrap_or(""),
            total_ms = report.timings.total_ms,
            "spoken command done"
        ),
        _ => tracing::warn!(
            outcome = %report.outcome,
            stage = report.stage.as_deref().unwrap_or(""),
            error = report.error.as_deref().unwrap_or(""),
            "spoken command did not complete"
        ),
    }
    let feedback = match (report.outcome.as_str(), report.stage.as_deref()) {
        ("no-speech", _) => Some("I did not hear anything.".to_owned()),
        ("failed", Some("pipeline")) => Some(format!(
            "That did not work: {}",
            report.error.as_deref().unwrap_or("a step failed")
        )),
        ("failed", _) => Some("Speech input failed.".to_owned()),
        _ => None,
    };
    if matches!(runner.voice.state().as_str(), "transcribing" | "running") {
        runner
            .voice
            .set_state("ready", "push-to-talk to speak a command");
    }
    runner.publish(Event::Voice(Box::new(report)));
    if let Some(text) = feedback {
        runner.speak(&text).await;
    }
}

async fn transcribe_and_run(
    runner: &Arc<Runner>,
    utterance: Utterance,
    mut timings: VoiceTimings,
) -> VoiceReport {
    let no_speech = |audio: Utterance, timings: VoiceTimings, why: &str| VoiceReport {
        outcome: "no-speech".into(),
        stage: Some("capture".into()),
        error: Some(why.into()),
        transcript: None,
        command: None,
        audio: Some(audio),
        timings,
    };
    if !utterance.has_speech || utterance.samples.is_empty() {
        return no_speech(
            utterance,
            timings,
            "only silence was captured (below [audio.vad] silence_threshold_db)",
        );
    }
    let config = runner.config().config;
    let Some(stt) = plugin_of_kind(runner, &config.stt.plugin, "stt") else {
        return VoiceReport::failed("stt", "no stt plugin is configured".into(), timings);
    };

    // Hand the samples over as a handle in the plugin's own scope.
    let started = Instant::now();
    let Some(store) = runner.handles.clone() else {
        return VoiceReport::failed(
            "stt",
            "the handle store is unavailable (see the log), so audio cannot reach the stt plugin"
                .into(),
            timings,
        );
    };
    let bytes: Vec<u8> = utterance
        .samples
        .iter()
        .flat_map(|s| s.to_le_bytes())
        .collect();
    let scope = Scope::Plugin(stt.clone());
    let created = store.create(&scope, &bytes);
    drop(bytes);
    let handle = match created {
        Ok(v) => v["handle"].as_str().unwrap_or_default().to_owned(),
        Err(e) => return VoiceReport::failed("stt", e.message, timings),
    };
    timings.handoff_ms = ms(started.elapsed());

    let mut params = json!({
        "audio": handle,
        "format": AUDIO_FORMAT,
        "rate": AUDIO_RATE,
        "channels": 1,
    });
    if let Some(model) = config.stt.model_path() {
        params["model"] = json!(model);
    }
    if !config.stt.language.is_empty() {
        params["language"] = json!(config.stt.language);
    }
    let started = Instant::now();
    let answer = runner
        .supervisor
        .call(
            &stt,
            "stt.transcribe",
            params,
            Duration::from_millis(config.stt.timeout_ms),
        )
        .await;
    timings.stt_ms = ms(started.elapsed());
    let _ = store.release(&scope, &handle);
    let answer = match answer {
        Ok(v) => v,
        Err(e) => {
            let mut report = VoiceReport::failed("stt", e.message, timings);
            report.audio = Some(utterance);
            return report;
        }
    };
    timings.stt_inference_ms = answer["inference_ms"].as_f64();
    let Some(text) = answer["text"].as_str() else {
        let mut report = VoiceReport::failed(
            "stt",
            format!("{stt} answered stt.transcribe without a text string: {answer}"),
            timings,
        );
        report.audio = Some(utterance);
        return report;
    };
    let transcript = text.trim().to_owned();
    if transcript.is_empty() {
        return no_speech(utterance, timings, "the transcript is empty");
    }

    runner
        .voice
        .set_state("running", format!("running {transcript:?}"));
    let options = CommandOptions {
        provenance: Some(Provenance::User),
        ..CommandOptions::default()
    };
    let started = Instant::now();
    let outcome = runner.command(&transcript, &options, None).await;
    timings.pipeline_ms = ms(started.elapsed());
    let (outcome_word, stage, error, command) = match outcome {
        Ok(outcome) => {
            let ok = outcome.all_ok();
            let error = (!ok).then(|| {
                outcome
                    .results
                    .iter()
                    .find(|r| !r.ok)
                    .map(|r| r.detail.clone())
                    .unwrap_or_else(|| {
                        if outcome.plan.steps.is_empty() {
                            format!("nothing to do for {transcript:?}")
                        } else {
                            "a step failed".into()
                        }
                    })
            });
            (
                if ok { "ok" } else { "failed" },
                (!ok).then(|| "pipeline".to_owned()),
                error,
                serde_json::to_value(&outcome).ok(),
            )
        }
        Err(e) => ("failed", Some("pipeline".to_owned()), Some(e.message), None),
    };
    VoiceReport {
        outcome: outcome_word.into(),
        stage,
        error,
        transcript: Some(transcript),
        command,
        audio: Some(utterance),
        timings,
    }
}
