//! The voice loop: push-to-talk → the capture plugin → speech to text → the command pipeline.
//!
//! ```text
//!  key down (portal, evdev, `utter ptt press`, D-Bus PushToTalk)
//!      ├─ audio.begin                    the capture plugin's pre-roll becomes the start
//!      └─ every [stt] partial_ms held:   audio.peek → stt.transcribe (greedy)
//!                                        → Event::VoicePartial (a preview, never run)
//!  key up
//!      ├─ audio.end                      "capture flush" in the plugin: downmix, resample to
//!      │                                 16 kHz, gate; the samples come back as a handle in
//!      │                                 the capture plugin's scope (PROTOCOL.md §10.1)
//!      ├─ the handle is passed to the stt plugin's scope (no copy: same blob)
//!      ├─ stt.transcribe {audio: handle://…, format: audio.pcm_f32le@1, rate: 16000, channels: 1}
//!      └─ Runner::command(transcript)    provenance `user`, the same gate as `utter say`
//!  → Event::Voice(VoiceReport)           transcript, results and the latency split
//! ```
//!
//! The microphone lives in its own process (a plugin of kind `audio`, by default
//! `utter-audio-pipewire`), so a PipeWire crash restarts that plugin, not the runner, and the
//! runner links no audio library. The runner configures it from `[audio]` with
//! `audio.configure` when the voice loop starts, after a reload that changed `[audio]`, and
//! whenever the plugin came back with a new epoch (a restarted capture plugin is configured
//! again at the next press).
//!
//! A press shorter than `[ptt] min_hold_ms` or a stuck key never reaches the capture (the
//! state machine cancels it). Silence (below `[audio.vad]`) ends as `no-speech` without
//! calling the STT plugin. When the microphone cannot be opened the voice loop reports
//! `unavailable` in `utter status` and tries again at the next press; a named source is never
//! replaced by another device. Spoken feedback (`[tts] enabled`) says what waits for
//! confirmation and why a spoken command failed, through the `tts` plugin's `tts.speak`.

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::events::Event;
use crate::handles::{HandleStore, Scope};
use crate::pipeline::CommandOptions;
use crate::policy::Provenance;
use crate::ptt::PttEvent;
use crate::runner::Runner;

pub use utter_ipc::event::{VoicePartial, VoiceReport, VoiceTimings};
pub use utter_ipc::status::VoiceStatus;

/// The capture plugin's notification that speech was followed by `[audio] end_silence_ms`
/// of silence: `{speech_ms, silence_ms}`.
pub const SPEECH_ENDED: &str = "audio.speech_ended";

/// The wire format of the samples handed to the STT plugin (`capabilities.json`).
pub const AUDIO_FORMAT: &str = "audio.pcm_f32le@1";
/// Their rate in Hz.
pub const AUDIO_RATE: u32 = 16_000;

/// A report of a cycle that stopped at `stage` with `error`.
fn failed_report(stage: &str, error: String, timings: VoiceTimings) -> VoiceReport {
    VoiceReport {
        outcome: "failed".into(),
        stage: Some(stage.into()),
        error: Some(error),
        transcript: None,
        command: None,
        audio: None,
        timings,
        hypotheses: Vec::new(),
    }
}

/// The voice loop's state, owned by the [`Runner`].
#[derive(Debug, Default)]
pub struct Voice {
    status: Mutex<VoiceStatus>,
    /// The capture plugin instance (`id`, epoch) that `audio.configure` last succeeded on;
    /// a new epoch (the plugin restarted) or a changed `[audio]` configures it again.
    configured: tokio::sync::Mutex<Option<(String, u64)>>,
    /// The router's vocabulary for the recogniser's prompt, asked for when the key went
    /// down (`[stt] vocabulary`), taken at release.
    vocabulary: Mutex<Option<tokio::task::JoinHandle<Option<String>>>>,
    /// The last vocabulary prompt the router gave, for the partial transcripts of a held
    /// key ([`partial_transcripts`]).
    prompt: Mutex<Option<String>>,
    /// The silence (ms) after which voice-activity detection ended the current listen; taken
    /// by the release it caused.
    speech_ended: Mutex<Option<f64>>,
    /// The capture plugin's number of the current listen (`audio.begin`'s `listen`): an
    /// `audio.speech_ended` of another listen is stale and ignored.
    listen: Mutex<Option<u64>>,
    /// Set while the voice loop waits for `[stt] model` to be installed: a reload that finds
    /// it starts the loop.
    pending_start: Mutex<Option<Weak<Runner>>>,
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

    /// The current status (this never waits).
    pub fn status(&self) -> VoiceStatus {
        self.status.lock().expect("voice status").clone()
    }

    fn set_state(&self, state: &str, detail: impl Into<String>) {
        let mut status = self.status.lock().expect("voice status");
        status.state = state.into();
        status.detail = detail.into();
    }

    /// [`Voice::set_state`] only while the state is still `from` (a press may have changed
    /// it since it was read); true when it was set.
    fn set_state_if(&self, from: &str, state: &str, detail: impl Into<String>) -> bool {
        let mut status = self.status.lock().expect("voice status");
        if status.state != from {
            return false;
        }
        status.state = state.into();
        status.detail = detail.into();
        true
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
        let pending = self.pending_start.lock().expect("pending start").take();
        if let Some(weak) = pending {
            // The loop never started: the model or the stt plugin was missing. Start it now
            // if both are there (start_voice waits again when the plugin is still missing).
            match weak.upgrade() {
                Some(runner) if config.stt.missing_model().is_none() => runner.start_voice(),
                Some(_) => {
                    *self.pending_start.lock().expect("pending start") = Some(weak);
                    if let Some(missing) = config.stt.missing_model() {
                        self.set_state("off", format!("{missing}, then `utter reload`"));
                    }
                }
                None => {}
            }
            return;
        }
        {
            let mut status = self.status.lock().expect("voice status");
            if status.stt_plugin.is_none() {
                return;
            }
            status.model = config.stt.model_path();
            status.model_error = None;
        }
        if audio_changed {
            *self.configured.lock().await = None;
            match self.capture(runner).await {
                Ok(_) => self.set_state("ready", "the microphone was opened again after a reload"),
                Err(e) => self.set_state("unavailable", e),
            }
        }
    }

    /// A press: open the microphone (`audio.begin`) and say `listening`, or `unavailable` with
    /// why.
    async fn begin_listening(&self, runner: &Arc<Runner>) {
        match self.capture(runner).await {
            Ok(plugin) => match capture_call(runner, &plugin, "audio.begin").await {
                Ok(begun) => {
                    *self.listen.lock().expect("listen") = begun["listen"].as_u64();
                    // The microphone as status shows it (recording now), then the state.
                    let microphone = capture_call(runner, &plugin, "audio.status").await;
                    self.set_microphone(microphone.ok());
                    self.set_state("listening", "push-to-talk is held");
                    self.fetch_vocabulary(runner);
                }
                Err(e) => {
                    self.drop_capture().await;
                    self.set_state("unavailable", e);
                }
            },
            Err(e) => self.set_state("unavailable", e),
        }
    }

    /// One more press handled (see [`VoiceStatus::presses`]); its outcome is in the state.
    fn count_press(&self) {
        self.status.lock().expect("voice status").presses += 1;
    }

    fn state(&self) -> String {
        self.status.lock().expect("voice status").state.clone()
    }

    fn set_microphone(&self, microphone: Option<Value>) {
        self.status.lock().expect("voice status").microphone = microphone;
    }

    /// The capture plugin, configured from `[audio]` (again when it restarted or the section
    /// changed): its id.
    async fn capture(&self, runner: &Runner) -> Result<String, String> {
        let config = runner.config().config;
        let Some(plugin) = plugin_of_kind(runner, &config.audio.plugin, "audio") else {
            return Err(
                "no capture plugin is configured (add a [[plugin]] of kind \"audio\", e.g. entrypoint = [\"utter-audio-pipewire\"])".into(),
            );
        };
        let epoch = runner
            .plugins()
            .into_iter()
            .find(|p| p.id == plugin && p.status.is_running())
            .map(|p| p.epoch)
            .ok_or_else(|| {
                format!("the capture plugin {plugin} is not running (see `utter plugins`)")
            })?;
        let mut configured = self.configured.lock().await;
        if configured.as_ref() == Some(&(plugin.clone(), epoch)) {
            return Ok(plugin);
        }
        let params = config.audio.configure_params();
        let timeout = Duration::from_millis(config.runner.rpc_timeout_ms);
        let answer = runner
            .supervisor
            .call(&plugin, "audio.configure", params, timeout)
            .await
            .map_err(|e| format!("{plugin}: {}", e.message))?;
        tracing::debug!(plugin, %answer, "capture plugin configured");
        let status = runner
            .supervisor
            .call(&plugin, "audio.status", json!({}), timeout)
            .await
            .ok();
        self.set_microphone(status);
        *configured = Some((plugin.clone(), epoch));
        Ok(plugin)
    }

    /// Forget the configuration (the stream failed), so the next press configures again.
    async fn drop_capture(&self) {
        *self.configured.lock().await = None;
    }

    /// Between presses, look at the microphone again so status follows it: while
    /// `unavailable`, try to open it (PipeWire may have started since) and say `ready` when
    /// it opens; while `ready`, read the capture plugin's `audio.status` and say
    /// `unavailable` with its error when the stream failed (PipeWire went away).
    async fn look_at_microphone(&self, runner: &Runner) {
        let stt = self.status().stt_plugin.unwrap_or_default();
        match self.state().as_str() {
            "unavailable" => match self.capture(runner).await {
                Ok(_) => {
                    if self.set_state_if(
                        "unavailable",
                        "ready",
                        format!("push-to-talk → {stt} (the microphone opened again)"),
                    ) {
                        tracing::info!("the microphone can be opened again");
                    }
                }
                Err(e) => {
                    // What the microphone said when it last opened is no longer true.
                    self.set_microphone(None);
                    self.set_state_if("unavailable", "unavailable", e);
                }
            },
            "ready" => {
                let config = runner.config().config;
                let Some(plugin) = plugin_of_kind(runner, &config.audio.plugin, "audio") else {
                    return;
                };
                let Ok(status) = capture_call(runner, &plugin, "audio.status").await else {
                    // The plugin itself is down: `utter plugins` and the next press say so;
                    // its last stream state is not shown as the present one.
                    self.set_microphone(None);
                    return;
                };
                let failed = status["state"] == "failed";
                let error = status["error"]
                    .as_str()
                    .or(status["last_error"].as_str())
                    .unwrap_or("the capture stream failed")
                    .to_owned();
                self.set_microphone(Some(status));
                if failed && self.set_state_if("ready", "unavailable", format!("{plugin}: {error}"))
                {
                    tracing::warn!(plugin, error, "the microphone stream failed");
                    self.drop_capture().await;
                }
            }
            _ => {}
        }
    }
}

/// How often [`Voice::look_at_microphone`] runs between presses.
const MICROPHONE_WATCH: Duration = Duration::from_secs(3);

/// Run [`Voice::look_at_microphone`] every [`MICROPHONE_WATCH`] while the runner lives.
async fn watch_microphone(weak: Weak<Runner>) {
    let mut tick = tokio::time::interval(MICROPHONE_WATCH);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(runner) = weak.upgrade() else { return };
        runner.voice.look_at_microphone(&runner).await;
    }
}

impl Voice {
    /// Ask the router for its vocabulary in the desktop context of this moment, in the
    /// background (`[stt] vocabulary`); [`Voice::take_vocabulary`] collects it at release.
    fn fetch_vocabulary(&self, runner: &Arc<Runner>) {
        let config = runner.config().config;
        let task = config.stt.vocabulary.then(|| {
            let runner = runner.clone();
            tokio::spawn(async move {
                let prompt = vocabulary_prompt(&runner).await;
                if prompt.is_some() {
                    prompt.clone_into(&mut runner.voice.prompt.lock().expect("prompt"));
                }
                prompt
            })
        });
        if let Some(old) =
            std::mem::replace(&mut *self.vocabulary.lock().expect("vocabulary"), task)
        {
            old.abort();
        }
    }
}

/// The prompt [`Voice::fetch_vocabulary`] asked for at this listen's press, waiting for it
/// at most [`VOCABULARY_WAIT`]; `None` when none was asked for, it failed or is late.
async fn take_vocabulary(
    task: Option<tokio::task::JoinHandle<Option<String>>>,
) -> Option<(String, Duration)> {
    let task = task?;
    let started = Instant::now();
    let prompt = match tokio::time::timeout(VOCABULARY_WAIT, task).await {
        Ok(Ok(prompt)) => prompt,
        Ok(Err(_)) => None,
        Err(_) => {
            tracing::debug!("the router's vocabulary was late; transcribing without it");
            None
        }
    };
    prompt.map(|p| (p, started.elapsed()))
}

/// The longest the release waits for the vocabulary asked for at the press.
const VOCABULARY_WAIT: Duration = Duration::from_millis(100);

/// `router.vocabulary {context}`'s `prompt` from the router that serves it.
async fn vocabulary_prompt(runner: &Runner) -> Option<String> {
    let supervisor = &runner.supervisor;
    let router = supervisor.find_provider("router.vocabulary", "router.vocabulary")?;
    let timeout = Duration::from_millis(runner.config().config.runner.rpc_timeout_ms);
    let context = runner.context.read(supervisor, timeout, None).await;
    let mut params = json!({});
    if let Some(snapshot) = context.snapshot() {
        params["context"] = snapshot.clone();
    }
    match supervisor
        .call(&router, "router.vocabulary", params, timeout)
        .await
    {
        Ok(answer) => answer["prompt"]
            .as_str()
            .map(str::to_owned)
            .filter(|p| !p.is_empty()),
        Err(e) => {
            tracing::debug!(router, error = %e.message, "router.vocabulary failed");
            None
        }
    }
}

/// Call `method` on the capture plugin with the runner's timeout.
async fn capture_call(runner: &Runner, plugin: &str, method: &str) -> Result<Value, String> {
    let timeout = Duration::from_millis(runner.config().config.runner.rpc_timeout_ms);
    runner
        .supervisor
        .call(plugin, method, json!({}), timeout)
        .await
        .map_err(|e| format!("{plugin}: {}", e.message))
}

/// The plugin `configured` names, else the first enabled one of `kind`
/// ([`crate::config::Config::plugin_for`]).
fn plugin_of_kind(runner: &Runner, configured: &str, kind: &str) -> Option<String> {
    runner
        .config()
        .config
        .plugin_for(configured, kind)
        .map(|p| p.id.clone())
}

impl Runner {
    /// The capture plugin `plugin` heard the end of speech ([`SPEECH_ENDED`]): a listen
    /// that began with a toggle ends as if toggled again; a held key is left alone. Called on
    /// the plugin's read path: it never waits.
    pub(crate) fn speech_ended(&self, plugin: &str, params: &Value) {
        let capture = plugin_of_kind(self, &self.config().config.audio.plugin, "audio");
        if capture.as_deref() != Some(plugin) || self.voice.state() != "listening" {
            return;
        }
        // Another listen's end (it arrived after that one ended and this one began).
        let current = *self.voice.listen.lock().expect("listen");
        if params["listen"].as_u64() != current {
            tracing::debug!(?current, %params, "a stale end of speech is ignored");
            return;
        }
        let silence = params["silence_ms"]
            .as_f64()
            .filter(|s| s.is_finite() && *s >= 0.0);
        *self.voice.speech_ended.lock().expect("speech ended") = silence.or(Some(0.0));
        if self.ptt.end_of_speech().is_none() {
            self.voice.speech_ended.lock().expect("speech ended").take();
        } else {
            tracing::info!(plugin, ?silence, "the end of speech ended a toggled listen");
        }
    }

    /// Start the voice loop (`utter daemon` calls it once): open the microphone, ask the stt
    /// plugin to load its model, then turn every push-to-talk release into a command. Does
    /// nothing but set `state = "off"` when no stt plugin is configured.
    pub fn start_voice(self: &Arc<Self>) {
        let config = self.config().config;
        let Some(stt) = plugin_of_kind(self, &config.stt.plugin, "stt") else {
            self.voice.set_state(
                "off",
                "no stt plugin is configured (add a [[plugin]] of kind \"stt\", see docs/src/voice.md)",
            );
            // A reload that adds one starts the loop.
            *self.voice.pending_start.lock().expect("pending start") = Some(Arc::downgrade(self));
            return;
        };
        {
            let mut status = self.voice.status.lock().expect("voice status");
            status.stt_plugin = Some(stt.clone());
            status.model = config.stt.model_path();
        }
        if let Some(missing) = config.stt.missing_model() {
            // The config layer did not start the stt and capture plugins either; a reload
            // after `utter models pull` starts them and this loop.
            self.voice
                .set_state("off", format!("{missing}, then `utter reload`"));
            *self.voice.pending_start.lock().expect("pending start") = Some(Arc::downgrade(self));
            return;
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
            tokio::spawn(watch_microphone(weak.clone()));
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

/// Wait (at most about a minute) until plugin `id` has finished its handshake.
async fn wait_running(runner: &Runner, id: &str) {
    let mut plugin_events = runner.supervisor.events();
    for _ in 0..2 {
        if runner
            .plugins()
            .iter()
            .any(|p| p.id == id && p.status.is_running())
        {
            return;
        }
        let _ = tokio::time::timeout(Duration::from_secs(30), plugin_events.recv()).await;
    }
}

/// Configure the capture plugin and open the microphone (when it fails, the loop tries
/// again at each press).
async fn open_microphone(weak: &Weak<Runner>, stt: &str) {
    let Some(runner) = weak.upgrade() else { return };
    let configured = runner.config().config.audio.plugin;
    if let Some(audio) = plugin_of_kind(&runner, &configured, "audio") {
        runner
            .voice
            .status
            .lock()
            .expect("voice status")
            .audio_plugin = Some(audio.clone());
        wait_running(&runner, &audio).await;
    }
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
    wait_running(&runner, stt).await;
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
            PttEvent::Pressed { .. } => {
                runner.voice.begin_listening(&runner).await;
                runner.voice.count_press();
                if runner.voice.state() == "listening" {
                    let press = runner.voice.status().presses;
                    tokio::spawn(partial_transcripts(Arc::downgrade(&runner), press));
                }
            }
            PttEvent::Cancelled { reason, .. } => {
                runner
                    .voice
                    .speech_ended
                    .lock()
                    .expect("speech ended")
                    .take();
                runner.voice.vocabulary.lock().expect("vocabulary").take();
                if runner.voice.state() == "listening" {
                    if let Ok(plugin) = runner.voice.capture(&runner).await {
                        if let Err(e) = capture_call(&runner, &plugin, "audio.cancel").await {
                            tracing::warn!(error = %e, "audio.cancel failed");
                        }
                    }
                    runner.voice.set_state(
                        "ready",
                        format!("the last press was cancelled ({})", reason.as_str()),
                    );
                }
            }
            PttEvent::Released {
                held, dictation, ..
            } => {
                let released = Instant::now();
                let timings = VoiceTimings {
                    held_ms: ms(held),
                    end_of_speech_ms: runner
                        .voice
                        .speech_ended
                        .lock()
                        .expect("speech ended")
                        .take(),
                    ..VoiceTimings::default()
                };
                if runner.voice.state() != "listening" {
                    // The press could not reach the microphone; it said why already.
                    let detail = runner.voice.status().detail;
                    publish(&runner, failed_report("capture", detail, timings), released).await;
                    continue;
                }
                let ended = match runner.voice.capture(&runner).await {
                    Ok(plugin) => capture_call(&runner, &plugin, "audio.end")
                        .await
                        .map(|v| (plugin, v)),
                    Err(e) => Err(e),
                };
                let mut timings = timings;
                let round_trip = ms(released.elapsed());
                match ended {
                    Ok((plugin, captured)) => {
                        // The plugin's own DSP time is the flush; the rest of the round trip
                        // (handle.create, JSON-RPC) is the hand-off.
                        let flush = captured["flush_ms"].as_f64().unwrap_or(0.0);
                        timings.capture_flush_ms = flush;
                        timings.handoff_ms = (round_trip - flush).max(0.0);
                        runner.voice.set_state("transcribing", "speech to text");
                        // The next press may begin while this one is transcribed; this
                        // press's vocabulary goes with it.
                        let vocabulary = runner.voice.vocabulary.lock().expect("vocabulary").take();
                        let runner = runner.clone();
                        tokio::spawn(async move {
                            let microphone = capture_call(&runner, &plugin, "audio.status").await;
                            runner.voice.set_microphone(microphone.ok());
                            let report = transcribe_and_run(
                                &runner, &plugin, captured, vocabulary, timings, dictation,
                            )
                            .await;
                            publish(&runner, report, released).await;
                        });
                    }
                    Err(e) => {
                        timings.capture_flush_ms = round_trip;
                        runner.voice.drop_capture().await;
                        runner.voice.set_state("unavailable", e.clone());
                        publish(&runner, failed_report("capture", e, timings), released).await;
                    }
                }
            }
        }
    }
}

/// The capture plugin's stored audio `handle` made the stt plugin's (the same bytes, no
/// copy) and let go by the capture plugin: the stt plugin's scope, which releases it after.
///
/// Handles name their bytes, so a partial decode during the hold and the decode after the
/// release can hand over the very same audio (the gate trimmed the same speech from both):
/// each hand-over then holds a reference of its own, and the partial's release cannot take
/// the audio away from the final decode (or its rescoring).
fn hand_over(store: &HandleStore, capture: &str, stt: &str, handle: &str) -> Scope {
    let capture_scope = Scope::Plugin(capture.to_owned());
    let scope = Scope::Plugin(stt.to_owned());
    let value = json!({ "audio": handle });
    let held_already = store.unseen(&scope, &value).is_empty();
    if !held_already || store.retain(&scope, handle).is_err() {
        store.pass(&capture_scope, &scope, &value);
    }
    let _ = store.release(&capture_scope, handle);
    scope
}

/// `stt.transcribe`'s audio and model fields for the stored audio `handle`: format, rate,
/// channels, `[stt] model`, language and window (the caller adds the search).
fn transcribe_params(stt: &crate::config::SttSection, handle: &str) -> Value {
    let mut params = json!({
        "audio": handle,
        "format": AUDIO_FORMAT,
        "rate": AUDIO_RATE,
        "channels": 1,
        "window": stt.window,
    });
    if let Some(model) = stt.model_path() {
        params["model"] = json!(model);
    }
    if !stt.language.is_empty() {
        params["language"] = json!(stt.language);
    }
    params
}

/// While press number `press` is held, every `[stt] partial_ms` (0: never): transcribe the
/// audio so far (`audio.peek`, then `stt.transcribe` greedily with the last vocabulary
/// prompt) and publish it as [`Event::VoicePartial`] when it says something new. One decode
/// at a time; it stops at the release (a decode then running is not published) and on any
/// failure of the capture or stt plugin (logged at debug: the release still transcribes).
async fn partial_transcripts(weak: Weak<Runner>, press: u64) {
    let mut last = String::new();
    loop {
        let every = match weak.upgrade() {
            Some(runner) => runner.config().config.stt.partial_ms,
            None => return,
        };
        if every == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(every)).await;
        let Some(runner) = weak.upgrade() else { return };
        let held = |runner: &Runner| {
            runner.voice.state() == "listening" && runner.voice.status().presses == press
        };
        if !held(&runner) {
            return;
        }
        let partial = match partial_transcript(&runner).await {
            Ok(partial) => partial,
            Err(e) => {
                tracing::debug!(error = %e, "no partial transcript; the release transcribes");
                return;
            }
        };
        if let Some(partial) = partial
            && held(&runner)
            && partial.text != last
        {
            last.clone_from(&partial.text);
            runner.publish(Event::VoicePartial(partial));
        }
    }
}

/// One partial transcript of the audio held so far: `None` when the gate hears no speech
/// yet or the recogniser hears none.
async fn partial_transcript(runner: &Runner) -> Result<Option<VoicePartial>, String> {
    let config = runner.config().config;
    let capture = runner.voice.capture(runner).await?;
    let stt = plugin_of_kind(runner, &config.stt.plugin, "stt")
        .ok_or_else(|| "no stt plugin is configured".to_owned())?;
    let store = runner
        .handles
        .clone()
        .ok_or_else(|| "the handle store is unavailable".to_owned())?;
    let peeked = capture_call(runner, &capture, "audio.peek").await?;
    let Some(handle) = peeked["handle"].as_str() else {
        return Ok(None);
    };
    let scope = hand_over(&store, &capture, &stt, handle);
    let mut params = transcribe_params(&config.stt, handle);
    params["beam_size"] = json!(1);
    params["hypotheses"] = json!(1);
    if let Some(prompt) = runner.voice.prompt.lock().expect("prompt").clone() {
        params["prompt"] = json!(prompt);
    }
    let answer = runner
        .supervisor
        .call(
            &stt,
            "stt.transcribe",
            params,
            Duration::from_millis(config.stt.timeout_ms),
        )
        .await;
    let _ = store.release(&scope, handle);
    let answer = answer.map_err(|e| format!("{stt}: {}", e.message))?;
    if not_speech(&answer, config.stt.no_speech_threshold).is_some() {
        return Ok(None);
    }
    let text = answer["text"].as_str().unwrap_or("").trim();
    if text.is_empty() {
        return Ok(None);
    }
    let samples = peeked["samples"].as_f64().unwrap_or(0.0);
    Ok(Some(VoicePartial {
        text: text.to_owned(),
        audio_ms: samples * 1000.0 / f64::from(AUDIO_RATE),
        inference_ms: answer["inference_ms"].as_f64(),
    }))
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
    capture_plugin: &str,
    captured: Value,
    vocabulary: Option<tokio::task::JoinHandle<Option<String>>>,
    mut timings: VoiceTimings,
    held_to_dictate: bool,
) -> VoiceReport {
    let audio = captured.get("audio").cloned();
    let no_speech = |timings: VoiceTimings, stage: &str, why: &str| VoiceReport {
        outcome: "no-speech".into(),
        stage: Some(stage.into()),
        error: Some(why.into()),
        transcript: None,
        command: None,
        audio: audio.clone(),
        timings,
        hypotheses: Vec::new(),
    };
    let capture_scope = Scope::Plugin(capture_plugin.to_owned());
    let Some(handle) = captured
        .get("handle")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return no_speech(
            timings,
            "capture",
            "only silence was captured (below [audio.vad] silence_threshold_db)",
        );
    };
    let config = runner.config().config;
    let Some(store) = runner.handles.clone() else {
        return failed_report(
            "stt",
            "the handle store is unavailable (see the log), so audio cannot reach the stt plugin"
                .into(),
            timings,
        );
    };
    let Some(stt) = plugin_of_kind(runner, &config.stt.plugin, "stt") else {
        let _ = store.release(&capture_scope, &handle);
        return failed_report("stt", "no stt plugin is configured".into(), timings);
    };
    // The capture plugin's blob becomes visible to the stt plugin: the same bytes, no copy.
    let started = Instant::now();
    let scope = hand_over(&store, capture_plugin, &stt, &handle);
    timings.handoff_ms += ms(started.elapsed());

    let mut params = transcribe_params(&config.stt, &handle);
    params["beam_size"] = json!(config.stt.beam_size);
    params["hypotheses"] = json!(config.stt.hypotheses);
    // Dictation is decoded openly: its prompt is the text typed just before, for the
    // sentence to go on as it began; a command's is the router's vocabulary.
    // Dictated: the mode is on, or the key was held to dictate (`[ptt] dictation_key`).
    let dictating = held_to_dictate || runner.dictating();
    if dictating {
        if let Some(task) = vocabulary {
            task.abort();
        }
        let after = runner.dictation.after();
        if !after.trim().is_empty() {
            params["prompt"] = json!(after);
        }
    } else if let Some((prompt, waited)) = take_vocabulary(vocabulary).await {
        params["prompt"] = json!(prompt);
        timings.vocabulary_ms = Some(ms(waited));
    }
    let started = Instant::now();
    let answer = runner
        .supervisor
        .call(
            &stt,
            "stt.transcribe",
            params.clone(),
            Duration::from_millis(config.stt.timeout_ms),
        )
        .await;
    timings.stt_ms = ms(started.elapsed());
    let answer = match answer {
        Ok(v) => v,
        Err(e) => {
            let _ = store.release(&scope, &handle);
            let mut report = failed_report("stt", e.message, timings);
            report.audio = audio;
            return report;
        }
    };
    // The audio stays stored until the candidates are weighed against it.
    let release = |store: &crate::handles::HandleStore| {
        let _ = store.release(&scope, &handle);
    };
    timings.stt_inference_ms = answer["inference_ms"].as_f64();
    let Some(text) = answer["text"].as_str() else {
        release(&store);
        let mut report = failed_report(
            "stt",
            format!("{stt} answered stt.transcribe without a text string: {answer}"),
            timings,
        );
        report.audio = audio;
        return report;
    };
    let transcript = text.trim().to_owned();
    if let Some(why) = not_speech(&answer, config.stt.no_speech_threshold) {
        release(&store);
        return no_speech(timings, "stt", &why);
    }
    // The n-best list: the best hypothesis the router can plan.
    let mut hypotheses = Vec::new();
    let mut transcript = transcript;
    let mut kind = None;
    // Dictated text is whatever was said: no hypothesis is picked for being a command.
    let list = answer["hypotheses"]
        .as_array()
        .filter(|l| l.len() > 1 && !dictating);
    // The desktop context, read once for the re-ranking and the rescoring.
    let context = if list.is_some() || (config.stt.rescore && !dictating) {
        let timeout = Duration::from_millis(config.runner.rpc_timeout_ms);
        let read = runner.context.read(&runner.supervisor, timeout, None).await;
        read.snapshot().cloned()
    } else {
        None
    };
    if let Some(list) = list {
        let started = Instant::now();
        let (picked, picked_kind, weighed) = rerank(runner, list, context.as_ref()).await;
        timings.rerank_ms = Some(ms(started.elapsed()));
        if let Some(picked) = picked {
            transcript = picked;
        }
        kind = picked_kind;
        hypotheses = weighed;
    }
    // Commands that sound like it, weighed against the audio; in dictation, only its own
    // few commands, for a short transcript.
    if config.stt.rescore && !transcript.is_empty() {
        let started = Instant::now();
        let heard: Vec<String> = answer["hypotheses"]
            .as_array()
            .map(|l| {
                l.iter()
                    .filter_map(|h| h["text"].as_str())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_else(|| vec![transcript.clone()]);
        let mut audio_params = params.clone();
        for field in ["beam_size", "hypotheses", "prompt"] {
            if let Some(map) = audio_params.as_object_mut() {
                map.remove(field);
            }
        }
        let weighed = if dictating {
            rescore_dictated(runner, &stt, audio_params, &transcript, &heard).await
        } else {
            rescore(
                runner,
                &stt,
                audio_params,
                &transcript,
                kind,
                &heard,
                context,
            )
            .await
        };
        if let Some((picked, weighed)) = weighed {
            if let Some(picked) = picked {
                transcript = picked;
            }
            hypotheses.extend(weighed);
        }
        timings.rescore_ms = Some(ms(started.elapsed()));
    }
    release(&store);

    runner
        .voice
        .set_state("running", format!("running {transcript:?}"));
    let options = CommandOptions {
        provenance: Some(Provenance::User),
        // Dictated when it was heard: switching dictation off while it was being
        // transcribed does not make the words a command.
        dictation: dictating,
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
        audio,
        timings,
        hypotheses,
    }
}

/// How far below the best hypothesis's score (CTranslate2's mean token log probability)
/// another may be and still be taken because the router understands it.
pub const RERANK_MARGIN: f64 = 0.5;

/// What the router made of one hypothesis ([`plan_kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanKind {
    /// Steps from a rule: the router understood it (a destructive step's `confirm: true`
    /// without an `ask` still counts: the words were understood).
    Acts,
    /// A near match: a step that asks "did you mean …?" (`ask`), or candidates for the
    /// chooser.
    Asks,
    /// No steps and no candidates.
    Nothing,
    /// The router refused it (`escalate.reason: "refused"`: a wipe of the system): the
    /// refusal stands; no other hypothesis or candidate replaces it.
    Refused,
}

/// How much less likely than the transcript (natural log of the probability, summed over
/// tokens) a candidate may be and still replace a transcript the router does not act on:
/// the prior that a person says a command the router knows rather than words it does not.
/// Calibrated with [`RESCORE_FLOOR`] on the spoken set (see there).
pub const RESCORE_MARGIN: f64 = 6.0;

/// The lowest mean log probability per token a candidate may have (about one chance in 55
/// per token): below it the audio does not say the candidate at all, however unlikely the
/// transcript is. Calibrated with [`RESCORE_MARGIN`] on 774 commands of the spoken set and
/// its 100 clips without speech (`UTTER_SPOKEN_WEIGHTS` in `tests/spoken.rs` writes each
/// weighing): of the 282 commands whose candidates were weighed, a floor of -2.5 switched
/// 44 to the right command and 11 to a wrong one, -4.0 switches 80 right and 26 wrong,
/// -4.5 89 and 30; no clip's best candidate averages better than -6 a token, so none is
/// switched at any of these. Each step down buys right commands at about two for every
/// wrong one; -4 keeps a clear distance from the clips.
pub const RESCORE_FLOOR: f64 = -4.0;

/// One phrase weighed against the audio by `stt.score`.
#[derive(Debug, Clone, PartialEq)]
pub struct Weighed {
    /// Its natural log probability given the audio, summed over its tokens.
    pub logprob: f64,
    /// How many tokens it is.
    pub tokens: usize,
}

impl Weighed {
    /// The mean log probability per token (the whole for a phrase of no tokens).
    pub fn mean(&self) -> f64 {
        self.logprob / self.tokens.max(1) as f64
    }
}

/// The rescoring rule, for a transcript the router does not act on: given its weight and
/// the router's candidates (each planned to steps) with theirs, the index of the candidate
/// to run instead, if any: the likeliest candidate, when its mean per token is at least
/// `floor` ([`RESCORE_FLOOR`]) and its log probability at least the transcript's minus
/// `margin` ([`RESCORE_MARGIN`]).
pub fn rescore_pick(
    transcript: &Weighed,
    candidates: &[Weighed],
    margin: f64,
    floor: f64,
) -> Option<usize> {
    let (best, weight) = candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| c.tokens > 0 && c.logprob.is_finite())
        .max_by(|a, b| a.1.logprob.total_cmp(&b.1.logprob))?;
    if weight.mean() < floor {
        return None;
    }
    (weight.logprob >= transcript.logprob - margin).then_some(best)
}

/// The forms a candidate is weighed in against the audio, as Whisper may write it: without
/// the closing punctuation (a full stop costs its own token, and the transcript is weighed
/// without one too), in sentence case ("Press delete") and with every word capitalised
/// ("Press Delete"), which is how Whisper writes names and, given the vocabulary prompt,
/// most commands ("Start Claude": "start claude" is about 13 nats less likely for the same
/// audio). Empty for a phrase with nothing but punctuation.
pub fn scoring_forms(text: &str) -> Vec<String> {
    let text = without_closing_punctuation(text);
    let capitalised = |word: &str| {
        let mut chars = word.chars();
        match chars.next() {
            Some(first) => first.to_uppercase().chain(chars).collect::<String>(),
            None => String::new(),
        }
    };
    if text.is_empty() {
        return Vec::new();
    }
    let sentence = capitalised(text);
    let title = text
        .split_whitespace()
        .map(capitalised)
        .collect::<Vec<_>>()
        .join(" ");
    if title == sentence {
        vec![sentence]
    } else {
        vec![sentence, title]
    }
}

/// `text` trimmed, without the punctuation that closes it ("Start, Log." is "Start, Log").
fn without_closing_punctuation(text: &str) -> &str {
    text.trim()
        .trim_end_matches(['.', ',', '!', '?', ';', ':', '…'])
        .trim_end()
}

/// The phrases one rescoring weighs (`stt.score`'s `phrases`): the transcript as the
/// recogniser wrote it (without its closing punctuation), then each candidate in its
/// [`scoring_forms`]; [`Weighing::fold`] gives each its best form's weight.
#[derive(Debug, Clone, PartialEq)]
pub struct Weighing {
    /// What to send to `stt.score`, in order.
    pub phrases: Vec<String>,
    /// For each phrase, whose form it is: 0 the transcript, `i + 1` candidate `i`.
    owners: Vec<usize>,
    /// How many candidates there are.
    candidates: usize,
}

impl Weighing {
    /// The phrases for `transcript` and `candidates` (texts as the router wrote them).
    pub fn new<S: AsRef<str>>(transcript: &str, candidates: &[S]) -> Weighing {
        let heard = without_closing_punctuation(transcript);
        let mut phrases = vec![
            if heard.is_empty() {
                transcript.trim()
            } else {
                heard
            }
            .to_owned(),
        ];
        let mut owners = vec![0];
        for (i, candidate) in candidates.iter().enumerate() {
            for form in scoring_forms(candidate.as_ref()) {
                phrases.push(form);
                owners.push(i + 1);
            }
        }
        Weighing {
            phrases,
            owners,
            candidates: candidates.len(),
        }
    }

    /// `stt.score`'s scores (one per phrase, in order) as the transcript's weight and each
    /// candidate's (the likeliest of its forms; a candidate with none weighs nothing: no
    /// tokens, log probability −∞). `None` when the count does not match the phrases.
    pub fn fold(&self, scores: &[Weighed]) -> Option<(Weighed, Vec<Weighed>)> {
        if scores.len() != self.phrases.len() {
            return None;
        }
        let nothing = Weighed {
            logprob: f64::NEG_INFINITY,
            tokens: 0,
        };
        let mut weights = vec![nothing; self.candidates + 1];
        for (owner, score) in self.owners.iter().zip(scores) {
            let kept = &mut weights[*owner];
            if kept.tokens == 0 || score.logprob > kept.logprob {
                *kept = score.clone();
            }
        }
        let transcript = weights.remove(0);
        Some((transcript, weights))
    }
}

/// When the router does not act on the transcript (it plans nothing or only asks), ask it
/// for candidates that sound like the hypotheses (`router.candidates`), weigh them and the
/// transcript against the audio (`stt.score` on the same handle), and pick by
/// [`rescore_pick`]. `audio_params` are the transcription's audio fields (handle,
/// format, window, language, model). Returns the pick (when it is a candidate) and the
/// candidates as weighed, for the report; `None` when there was nothing to weigh or a
/// plugin could not (logged at debug: the transcript stands).
async fn rescore(
    runner: &Runner,
    stt: &str,
    audio_params: Value,
    transcript: &str,
    kind: Option<PlanKind>,
    heard: &[String],
    context: Option<Value>,
) -> Option<(Option<String>, Vec<Value>)> {
    let router = runner
        .supervisor
        .find_provider("router.candidates", "router.candidates")?;
    let kind = match kind {
        Some(kind) => kind,
        None => match runner.plan_only(transcript, context.clone(), None).await {
            Ok((_, planned)) => plan_kind(&planned),
            Err(_) => PlanKind::Nothing,
        },
    };
    // Each phrase weighed costs a decoder pass (about 15 ms with tiny.en on two cores): only
    // transcripts the router does not act on are weighed.
    // A refusal stands: a wipe said is not weighed against commands that sound like it.
    if matches!(kind, PlanKind::Acts | PlanKind::Refused) {
        return None;
    }
    let mut params = json!({"hypotheses": heard});
    if let Some(context) = context {
        params["context"] = context;
    }
    let candidates = router_candidates(runner, &router, params, None).await?;
    weigh(runner, stt, audio_params, transcript, &candidates).await
}

/// The router's `router.candidates` for `params`, as (text, candidate) pairs, at most
/// [`MAX_RESCORED`], only those of `source` when given. `None` when the call failed (logged
/// at debug) or the answer has no candidate list.
async fn router_candidates(
    runner: &Runner,
    router: &str,
    params: Value,
    source: Option<&str>,
) -> Option<Vec<(String, Value)>> {
    let timeout = Duration::from_millis(runner.config().config.runner.rpc_timeout_ms);
    let answer = match runner
        .supervisor
        .call(router, "router.candidates", params, timeout)
        .await
    {
        Ok(answer) => answer,
        Err(e) => {
            tracing::debug!(router, error = %e.message, "router.candidates failed");
            return None;
        }
    };
    let candidates = answer["candidates"]
        .as_array()?
        .iter()
        .filter(|c| source.is_none_or(|source| c["source"] == source))
        .filter_map(|c| Some((c["text"].as_str()?.to_owned(), c.clone())))
        .take(MAX_RESCORED)
        .collect();
    Some(candidates)
}

/// In dictation, a short transcript weighed against the dictation commands that sound like
/// it (`router.candidates` with `dictation`): "Crash mod" is "scratch that" when the audio
/// favours it within [`RESCORE_MARGIN`]; anything else stays the words to type. Returns as
/// [`rescore`].
async fn rescore_dictated(
    runner: &Runner,
    stt: &str,
    audio_params: Value,
    transcript: &str,
    heard: &[String],
) -> Option<(Option<String>, Vec<Value>)> {
    let router = runner
        .supervisor
        .find_provider("router.candidates", "router.candidates")?;
    let params = json!({"hypotheses": heard, "dictation": {}});
    let candidates = router_candidates(runner, &router, params, Some("dictation")).await?;
    weigh(runner, stt, audio_params, transcript, &candidates).await
}

/// `candidates` (text, the router's candidate) weighed against the audio with the
/// transcript (`stt.score`): the one [`rescore_pick`] takes, if any, and each weighed as
/// `{text, candidate, logprob, picked}`. `None` when nothing could be weighed.
async fn weigh(
    runner: &Runner,
    stt: &str,
    mut audio_params: Value,
    transcript: &str,
    candidates: &[(String, Value)],
) -> Option<(Option<String>, Vec<Value>)> {
    let supervisor = &runner.supervisor;
    if candidates.is_empty() {
        return None;
    }
    let texts: Vec<&str> = candidates.iter().map(|(text, _)| text.as_str()).collect();
    let weighing = Weighing::new(transcript, &texts);
    audio_params["phrases"] = json!(weighing.phrases);
    let scored = match supervisor
        .call(
            stt,
            "stt.score",
            audio_params,
            Duration::from_millis(runner.config().config.stt.timeout_ms),
        )
        .await
    {
        Ok(scored) => scored,
        Err(e) => {
            tracing::debug!(stt, error = %e.message, "stt.score failed; the transcript stands");
            return None;
        }
    };
    let weights: Vec<Weighed> = scored["scores"]
        .as_array()?
        .iter()
        .map(|s| Weighed {
            logprob: s["logprob"].as_f64().unwrap_or(f64::NEG_INFINITY),
            tokens: s["tokens"].as_u64().unwrap_or(0) as usize,
        })
        .collect();
    let (heard, weights) = weighing.fold(&weights)?;
    let pick = rescore_pick(&heard, &weights, RESCORE_MARGIN, RESCORE_FLOOR);
    let weighed = candidates
        .iter()
        .zip(&weights)
        .enumerate()
        .map(|(i, ((text, c), w))| {
            json!({
                "text": text,
                "candidate": c["source"],
                "logprob": w.logprob,
                "picked": pick == Some(i),
            })
        })
        .collect();
    tracing::debug!(
        transcript,
        transcript_logprob = heard.logprob,
        picked = ?pick.map(|i| &candidates[i].0),
        "weighed the router's candidates"
    );
    Some((pick.map(|i| candidates[i].0.clone()), weighed))
}

/// The most candidates weighed against the audio for one command (each costs a decoder
/// pass).
pub const MAX_RESCORED: usize = 8;

/// Why an `stt.transcribe` answer holds no command, if it does not: an empty transcript,
/// one the recogniser marks `non_speech` (what Whisper writes for silence or noise), or a
/// `no_speech_prob` above `no_speech_threshold` (0–1, `[stt] no_speech_threshold`) with a
/// best score below -1 (faster-whisper's rule) or with a transcript of one word. The voice loop drops such a transcript as
/// `no-speech`; the spoken test set judges its noise clips by the same rule.
pub fn not_speech(answer: &Value, no_speech_threshold: f64) -> Option<String> {
    let transcript = answer["text"].as_str().unwrap_or("").trim();
    if transcript.is_empty() {
        return Some("the transcript is empty".into());
    }
    if answer["non_speech"] == true {
        return Some(format!(
            "{transcript:?} is what Whisper writes for silence or noise, not a command"
        ));
    }
    let no_speech_prob = answer["no_speech_prob"].as_f64().unwrap_or(0.0);
    let best_score = answer["hypotheses"][0]["score"].as_f64().unwrap_or(0.0);
    if no_speech_prob > no_speech_threshold && best_score < -1.0 {
        return Some(format!(
            "Whisper thinks this is not speech (no_speech_prob {no_speech_prob:.2}, score {best_score:.2}); heard {transcript:?}"
        ));
    }
    // One word where Whisper thinks there is no speech: a name of the prompt echoed over
    // music or noise ("Google" over a tune, measured by the spoken set's clips), not a
    // command however sure the decoding.
    (no_speech_prob > no_speech_threshold && transcript.split_whitespace().count() == 1).then(
        || {
            format!(
                "one word where Whisper hears no speech (no_speech_prob {no_speech_prob:.2}): {transcript:?} is taken for an echo of the vocabulary, not a command"
            )
        },
    )
}

/// Read a `router.plan` answer as a [`PlanKind`].
pub fn plan_kind(planned: &Value) -> PlanKind {
    if planned["escalate"]["reason"] == "refused" {
        return PlanKind::Refused;
    }
    let steps = planned["steps"].as_array().map_or(&[][..], Vec::as_slice);
    let candidates = planned["candidates"]
        .as_array()
        .is_some_and(|c| !c.is_empty());
    if !steps.is_empty() && steps.iter().all(|s| !s["ask"].is_string()) {
        PlanKind::Acts
    } else if !steps.is_empty() || candidates {
        PlanKind::Asks
    } else {
        PlanKind::Nothing
    }
}

/// The n-best re-ranking rule, one hypothesis at a time (best first): feed each
/// hypothesis's score and, when [`Rerank::wants`] it, what the router made of it; then
/// [`Rerank::pick`]. The first hypothesis that [`PlanKind::Acts`] wins, else the first
/// that [`PlanKind::Asks`], else the best stays. Only hypotheses within
/// [`RERANK_MARGIN`] of the best score are planned, and nothing after one that acts.
#[derive(Debug, Default)]
pub struct Rerank {
    best: Option<f64>,
    acts: Option<usize>,
    asks: Option<usize>,
    seen: usize,
}

impl Rerank {
    /// Whether hypothesis number `seen` (the next one) with `score` needs planning.
    pub fn wants(&mut self, score: Option<f64>) -> bool {
        let best = *self.best.get_or_insert(score.unwrap_or(0.0));
        self.acts.is_none() && score.is_none_or(|s| s >= best - RERANK_MARGIN)
    }

    /// Record what the router made of the next hypothesis (`None`: not planned). A refused
    /// hypothesis is decisive like one that acts: the refusal is what runs (and refuses),
    /// nothing heard after it takes its place.
    pub fn record(&mut self, kind: Option<PlanKind>) {
        match kind {
            Some(PlanKind::Acts | PlanKind::Refused) if self.acts.is_none() => {
                self.acts = Some(self.seen);
            }
            Some(PlanKind::Asks) if self.asks.is_none() => self.asks = Some(self.seen),
            _ => {}
        }
        self.seen += 1;
    }

    /// The index of the hypothesis to run.
    pub fn pick(&self) -> usize {
        self.acts.or(self.asks).unwrap_or(0)
    }
}

/// Pick among the recogniser's `list` (`[{text, score}]`, best first) the hypothesis to run
/// by [`Rerank`], planning through [`Runner::plan_only`] in the desktop `context` (nothing
/// runs). Returns the pick (when not the best), what the router made of the hypothesis run
/// (`None`: not planned), and the list with `planned` marked.
async fn rerank(
    runner: &Runner,
    list: &[Value],
    context: Option<&Value>,
) -> (Option<String>, Option<PlanKind>, Vec<Value>) {
    let mut rule = Rerank::default();
    let mut weighed = Vec::with_capacity(list.len());
    let mut kinds = Vec::with_capacity(list.len());
    for hypothesis in list.iter().take(10) {
        let text = hypothesis["text"].as_str().unwrap_or("").trim().to_owned();
        let score = hypothesis["score"].as_f64();
        let mut entry = json!({"text": text, "score": score});
        let mut kind = None;
        if !text.is_empty() && rule.wants(score) {
            if let Ok((_, planned)) = runner.plan_only(&text, context.cloned(), None).await {
                let k = plan_kind(&planned);
                entry["planned"] = json!(matches!(k, PlanKind::Acts | PlanKind::Asks));
                kind = Some(k);
            }
        }
        rule.record(kind);
        kinds.push(kind);
        weighed.push(entry);
    }
    let index = rule.pick();
    let pick = Some(index)
        .filter(|i| *i > 0)
        .and_then(|i| weighed[i]["text"].as_str().map(str::to_owned));
    (pick, kinds.get(index).copied().flatten(), weighed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partial_and_the_final_decode_of_the_same_audio_each_hold_it() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            HandleStore::open(dir.path().join("h"), Duration::from_secs(60), 1000, 1000).unwrap();
        let capture = Scope::Plugin("audio".into());
        let bytes = b"the same trimmed speech";
        // A partial decode during the hold peeks the audio and hands it over...
        let peeked = store.create(&capture, bytes).unwrap()["handle"]
            .as_str()
            .unwrap()
            .to_owned();
        let partial = hand_over(&store, "audio", "stt", &peeked);
        // ...and the release captures the very same bytes while the partial still runs.
        let ended = store.create(&capture, bytes).unwrap()["handle"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(peeked, ended, "handles name their bytes");
        let last = hand_over(&store, "audio", "stt", &ended);
        // The partial ends and lets go: the final decode still has its audio.
        store.release(&partial, &peeked).unwrap();
        assert!(
            store.fetch(&last, &ended).is_ok(),
            "the final decode lost its audio"
        );
        store.release(&last, &ended).unwrap();
        assert!(store.fetch(&last, &ended).is_err());
    }

    #[test]
    fn silence_noise_and_an_unsure_transcript_are_not_speech() {
        let answer = |text: &str, non_speech: bool, prob: f64, score: f64| {
            json!({"text": text, "non_speech": non_speech, "no_speech_prob": prob,
                   "hypotheses": [{"text": text, "score": score}]})
        };
        assert!(not_speech(&answer("  ", false, 0.0, 0.0), 0.6).is_some());
        assert!(not_speech(&answer("Thank you.", true, 0.1, -0.2), 0.6).is_some());
        // Likely silence and an unsure decoding: dropped; either alone is kept.
        assert!(not_speech(&answer("Open it.", false, 0.8, -1.4), 0.6).is_some());
        assert!(not_speech(&answer("Open it.", false, 0.8, -0.5), 0.6).is_none());
        // One word over music: an echo of the prompt, however sure.
        assert!(not_speech(&answer("Google", false, 0.78, -0.86), 0.6).is_some());
        assert!(not_speech(&answer("Pause.", false, 0.1, -0.3), 0.6).is_none());
        assert!(not_speech(&answer("Open it.", false, 0.3, -1.4), 0.6).is_none());
        assert!(not_speech(&answer("open youtube", false, 0.01, -0.1), 0.6).is_none());
    }

    #[test]
    fn the_first_hypothesis_the_router_acts_on_wins_within_the_margin() {
        let mut r = Rerank::default();
        assert!(r.wants(Some(-0.2)));
        r.record(Some(PlanKind::Nothing));
        assert!(r.wants(Some(-0.4)));
        r.record(Some(PlanKind::Asks));
        assert!(r.wants(Some(-0.6)));
        r.record(Some(PlanKind::Acts));
        // After one acts, nothing more is planned.
        assert!(!r.wants(Some(-0.61)));
        r.record(None);
        assert_eq!(r.pick(), 2);

        // Too far below the best: not planned, the best stays.
        let mut far = Default::default();
        let r2: &mut Rerank = &mut far;
        assert!(r2.wants(Some(-0.1)));
        r2.record(Some(PlanKind::Nothing));
        assert!(!r2.wants(Some(-0.9)));
        r2.record(None);
        assert_eq!(r2.pick(), 0);

        // A refused hypothesis is decisive: a wipe said is not replaced by a command heard
        // after it.
        let mut refused = Rerank::default();
        assert!(refused.wants(Some(-0.2)));
        refused.record(Some(PlanKind::Refused));
        assert!(!refused.wants(Some(-0.3)));
        refused.record(None);
        assert_eq!(refused.pick(), 0);
    }

    #[test]
    fn plans_are_read_as_acts_asks_or_nothing() {
        assert_eq!(
            plan_kind(&json!({"steps": [{"op": "media"}]})),
            PlanKind::Acts
        );
        // A destructive step confirms, but the words were understood.
        assert_eq!(
            plan_kind(&json!({"steps": [{"op": "close_window", "confirm": true}]})),
            PlanKind::Acts
        );
        assert_eq!(
            plan_kind(
                &json!({"steps": [{"op": "ensure_url", "confirm": true, "ask": "did you mean GitHub?"}]})
            ),
            PlanKind::Asks
        );
        assert_eq!(
            plan_kind(&json!({"steps": [], "candidates": [{"id": "c1"}]})),
            PlanKind::Asks
        );
        assert_eq!(
            plan_kind(&json!({"steps": [], "rule": null})),
            PlanKind::Nothing
        );
        assert_eq!(
            plan_kind(&json!({"steps": [], "escalate": {"reason": "refused", "message": "no"}})),
            PlanKind::Refused
        );
        assert_eq!(plan_kind(&json!("garbage")), PlanKind::Nothing);
    }

    fn weight(logprob: f64, tokens: usize) -> Weighed {
        Weighed { logprob, tokens }
    }

    #[test]
    fn a_candidate_replaces_a_transcript_the_router_cannot_act_on_within_the_margin() {
        // "Prize." (nothing planned) at -6; "Pause." at -8 is within 4 nats: taken.
        let heard = weight(-6.0, 3);
        let pick = rescore_pick(
            &heard,
            &[weight(-12.0, 5), weight(-8.0, 4)],
            4.0,
            RESCORE_FLOOR,
        );
        assert_eq!(pick, Some(1));
        // Past the margin, the transcript stands; a margin of 0 takes only what is as likely.
        assert_eq!(
            rescore_pick(&heard, &[weight(-10.5, 5)], 4.0, RESCORE_FLOOR),
            None
        );
        assert_eq!(
            rescore_pick(&heard, &[weight(-8.0, 4)], 0.0, RESCORE_FLOOR),
            None
        );
        assert_eq!(
            rescore_pick(&heard, &[weight(-5.0, 3)], 0.0, RESCORE_FLOOR),
            Some(0)
        );
    }

    #[test]
    fn a_candidate_the_audio_does_not_say_is_never_taken() {
        // Noise transcribed as a word: everything is unlikely; a candidate whose tokens
        // average below the floor is not a command that was said.
        let heard = weight(-30.0, 3);
        assert_eq!(
            rescore_pick(&heard, &[weight(-13.0, 3)], 4.0, RESCORE_FLOOR),
            None
        );
        assert_eq!(
            rescore_pick(&heard, &[weight(-11.9, 3)], 40.0, RESCORE_FLOOR),
            Some(0)
        );
        // No candidates, none with tokens, or no finite score: nothing.
        assert_eq!(rescore_pick(&heard, &[], 4.0, RESCORE_FLOOR), None);
        assert_eq!(
            rescore_pick(&heard, &[weight(-1.0, 0)], 4.0, RESCORE_FLOOR),
            None
        );
        assert_eq!(
            rescore_pick(&heard, &[weight(f64::NEG_INFINITY, 2)], 4.0, RESCORE_FLOOR),
            None
        );
    }

    #[test]
    fn candidates_are_weighed_as_the_recogniser_writes_without_closing_punctuation() {
        assert_eq!(scoring_forms("pause"), ["Pause"]);
        assert_eq!(
            scoring_forms(" go to GitHub. "),
            ["Go to GitHub", "Go To GitHub"]
        );
        assert_eq!(
            scoring_forms("start claude"),
            ["Start claude", "Start Claude"]
        );
        assert_eq!(
            scoring_forms("what's next?"),
            ["What's next", "What's Next"]
        );
        assert!(scoring_forms("  ").is_empty());
        assert!(scoring_forms(" ?! ").is_empty());
        assert_eq!(scoring_forms("élan"), ["Élan"]);
    }

    #[test]
    fn each_candidate_weighs_as_its_likeliest_form() {
        let weighing = Weighing::new("Start, Log.", &["start claude", "pause", "..."]);
        assert_eq!(
            weighing.phrases,
            ["Start, Log", "Start claude", "Start Claude", "Pause"]
        );
        let scores = [
            weight(-5.5, 3),
            weight(-18.0, 3),
            weight(-5.4, 2),
            weight(-20.0, 2),
        ];
        let (heard, candidates) = weighing.fold(&scores).expect("as many scores as phrases");
        assert_eq!(heard, weight(-5.5, 3));
        assert_eq!(
            candidates,
            [
                weight(-5.4, 2),
                weight(-20.0, 2),
                weight(f64::NEG_INFINITY, 0)
            ]
        );
        // A plugin that answered another count is not trusted.
        assert_eq!(weighing.fold(&scores[..3]), None);
        // A transcript of punctuation only is weighed as written.
        assert_eq!(Weighing::new(" . ", &["pause"]).phrases, [".", "Pause"]);
    }
}
