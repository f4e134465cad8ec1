//! What the runner tells its subscribers (`runner.subscribe`, `utter events --json`, D-Bus
//! signals): plugin states, confirmations, finished commands, push-to-talk and voice cycles.
//! Subscribers get a full [`crate::Status`] first, then these changes; a subscriber that
//! falls too far behind is dropped rather than growing the runner's memory.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

use crate::command::{CommandOutcome, PendingConfirmation};
use crate::status::{PluginStatus, ReloadReport, ServiceState, Source, TriggerStatus};

/// One change. Serialised with an `"event"` tag, e.g.
/// `{"event":"plugin_state","id":"rules","epoch":1,"status":"ok"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// A plugin's status changed.
    PluginState {
        /// Plugin id.
        id: String,
        /// Instance epoch.
        epoch: u64,
        /// New status.
        status: PluginStatus,
    },
    /// The runner's state changed.
    State {
        /// New state.
        state: ServiceState,
    },
    /// A step waits for a person's yes.
    ConfirmationRequested(PendingConfirmation),
    /// A confirmation was answered, denied or timed out.
    ConfirmationResolved {
        /// Its id.
        id: String,
        /// Whether it was approved.
        approved: bool,
        /// Which door answered.
        by: String,
    },
    /// A command finished.
    CommandFinished {
        /// The utterance.
        utterance: String,
        /// The per-step results, as `runner.command` returns them.
        results: Value,
        /// What "undo that" would reverse now: the utterance of the journal's newest command
        /// not undone (`null` when there is none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        undoable: Option<String>,
    },
    /// Dictation was turned on or off ("start dictation", "stop dictation").
    Dictation {
        /// Whether what the voice loop hears is now typed.
        on: bool,
    },
    /// A plugin's own event (`host.emit`).
    PluginEvent {
        /// The plugin that emitted it.
        plugin: String,
        /// Its event name.
        #[serde(rename = "name")]
        event: String,
        /// Its data.
        data: Value,
    },
    /// A push-to-talk cycle ended: transcript, results and the latency split
    /// (`{"event":"voice","outcome":"ok","transcript":…,"timings":{…}}`).
    Voice(Box<VoiceReport>),
    /// What the recogniser has heard so far while the key is still held, about every
    /// `[stt] partial_ms` (`{"event":"voice_partial","text":"open fire","audio_ms":1200.0,
    /// "inference_ms":140.0}`, [`VoicePartial`]). Only a preview: the command is what the
    /// [`Event::Voice`] of the same press says.
    VoicePartial(VoicePartial),
    /// The config was reloaded.
    Reloaded {
        /// What changed.
        report: ReloadReport,
    },
    /// Push-to-talk changed: `{"event":"ptt","transition":"pressed"|"released"|"cancelled",
    /// "source":…, "held_ms"?, "reason"?}` ([`PttEvent`]).
    Ptt(PttEvent),
    /// A push-to-talk trigger's state changed: `{"event":"ptt_trigger","trigger":"portal",
    /// "state":"bound","detail":…}` ([`TriggerStatus`]).
    PttTrigger(TriggerStatus),
    /// The first message of every subscription: the whole state, then changes follow.
    Snapshot {
        /// The runner's status when the subscription started.
        status: Box<crate::Status>,
    },
    /// The subscription ended: the subscriber fell too far behind, or the runner stops.
    /// Subscribe again for a fresh snapshot.
    Dropped {
        /// Why.
        reason: String,
    },
    /// One line of the runner's own log, sent only to subscribers that asked for them
    /// (`runner.subscribe {logs: true}`): `{"event":"log","time_ms":…,"level":"INFO",
    /// "target":"utter_core::runner","message":"config reloaded","fields":{…}}` ([`LogLine`]).
    Log(LogLine),
    /// An event this version does not know (a newer runner's); clients skip it.
    #[serde(other)]
    Unknown,
}

/// One line of the runner's log ([`Event::Log`]): what the journal (or stderr) gets, as
/// data. Text is untrusted where it quotes a plugin (its stderr lines, window titles).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLine {
    /// When it was logged: milliseconds since the Unix epoch (UTC).
    pub time_ms: u64,
    /// `ERROR`, `WARN`, `INFO`, `DEBUG` or `TRACE` (`tracing`'s level names).
    pub level: String,
    /// The module that logged it, e.g. `utter_core::runner` (`utter::plugin` for a plugin's
    /// stderr lines).
    pub target: String,
    /// The message, at most [`LogLine::MAX_TEXT`] bytes (longer ones end with `…`).
    pub message: String,
    /// The event's other fields (`plugin`, `epoch`, …) as text, each at most
    /// [`LogLine::MAX_TEXT`] bytes; left out when there are none.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub fields: std::collections::BTreeMap<String, String>,
}

/// Which log lines a follower has shown, so that the lines a new subscription replays
/// (`runner.subscribe {logs: true}` starts with the last ones the runner kept) are not shown
/// twice: a line older than the newest one taken, or the same as one taken in that same
/// millisecond, is old.
#[derive(Debug, Clone, Default)]
pub struct LogCursor {
    last_ms: u64,
    at_last: Vec<LogLine>,
}

impl LogCursor {
    /// The most lines of one millisecond remembered.
    const AT_ONCE: usize = 256;

    /// Whether `line` is new; a new line is taken (remembered as shown).
    pub fn take(&mut self, line: &LogLine) -> bool {
        match line.time_ms.cmp(&self.last_ms) {
            std::cmp::Ordering::Less => false,
            std::cmp::Ordering::Equal if self.at_last.contains(line) => false,
            std::cmp::Ordering::Equal => {
                if self.at_last.len() < Self::AT_ONCE {
                    self.at_last.push(line.clone());
                }
                true
            }
            std::cmp::Ordering::Greater => {
                self.last_ms = line.time_ms;
                self.at_last.clear();
                self.at_last.push(line.clone());
                true
            }
        }
    }
}

impl LogLine {
    /// The longest message or field value a log event carries, in bytes.
    pub const MAX_TEXT: usize = 4096;
    /// The most text one log event carries, message and fields (names and values)
    /// together, in bytes: a field past it is cut (ending with `…`) or left out.
    pub const MAX_LINE: usize = 8192;

    /// The line for people: `LEVEL target: message key=value …` (no time).
    pub fn display(&self) -> String {
        let mut line = format!("{} {}: {}", self.level, self.target, self.message);
        for (k, v) in &self.fields {
            line.push_str(&format!(" {k}={v}"));
        }
        line
    }
}
/// Why a hold did not become an utterance. Serialised kebab-case: `too-short`, `stuck`,
/// `device-lost`, `cancelled`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CancelReason {
    /// Released before `min_hold_ms`.
    TooShort,
    /// Still held after `max_hold_ms`: released automatically (stuck-key timeout).
    Stuck,
    /// The evdev device holding the key disappeared (unplugged, suspended).
    DeviceLost,
    /// Cancelled on request ([`Ptt::cancel`]).
    Cancelled,
}

impl CancelReason {
    /// The wire word.
    pub fn as_str(self) -> &'static str {
        match self {
            CancelReason::TooShort => "too-short",
            CancelReason::Stuck => "stuck",
            CancelReason::DeviceLost => "device-lost",
            CancelReason::Cancelled => "cancelled",
        }
    }
}

/// One transition of push-to-talk. Serialised with a `"transition"` tag, durations in whole
/// milliseconds, e.g. `{"transition":"released","source":"dbus","held_ms":840}` or
/// `{"transition":"cancelled","source":"socket","reason":"too-short","held_ms":20}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "transition", rename_all = "snake_case")]
pub enum PttEvent {
    /// Listening starts.
    Pressed {
        /// Who pressed.
        source: Source,
        /// Held to dictate (`[ptt] dictation_key`, `utter ptt press --dictation`): what is
        /// heard is typed, whatever the mode. Left out when false.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        dictation: bool,
    },
    /// Listening ended normally: `held` is a valid utterance window (≥ `min_hold`).
    Released {
        /// Who pressed (the hold's owner).
        source: Source,
        /// How long it was held.
        #[serde(rename = "held_ms", with = "crate::ms")]
        held: Duration,
        /// The hold was to dictate (see `Pressed`). Left out when false.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        dictation: bool,
    },
    /// Listening ended without an utterance.
    Cancelled {
        /// Who pressed (the hold's owner).
        source: Source,
        /// Why.
        reason: CancelReason,
        /// How long it was held.
        #[serde(rename = "held_ms", with = "crate::ms")]
        held: Duration,
    },
}

impl PttEvent {
    /// Whether push-to-talk is held after this transition.
    pub fn listening(&self) -> bool {
        matches!(self, PttEvent::Pressed { .. })
    }
}

/// How one spoken command went, in milliseconds (wall clock, this process).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// Waiting at release for the router's vocabulary (`router.vocabulary`, asked for when
    /// the key went down; usually 0). Absent when no vocabulary was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vocabulary_ms: Option<f64>,
    /// Planning the n-best hypotheses to pick the one the router understands. Absent with
    /// one hypothesis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerank_ms: Option<f64>,
    /// Asking the router for candidates that sound like the transcript and weighing them
    /// against the audio (`[stt] rescore`). Absent when not done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rescore_ms: Option<f64>,
    /// Speech ended (voice-activity detection) this long before the listen ended by itself
    /// (`[audio] end_silence_ms` of silence). Absent when the key ended the listen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_of_speech_ms: Option<f64>,
    /// The command pipeline: `router.plan`, gates, `action.invoke`.
    pub pipeline_ms: f64,
    /// From key release until the result: the sum of the above.
    pub total_ms: f64,
}

/// A transcript of the audio so far while the key is held ([`Event::VoicePartial`]):
/// decoded greedily (one hypothesis, the vocabulary prompt), never planned or run. The text
/// is the person's words as heard, untrusted like any transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VoicePartial {
    /// What was heard so far, trimmed; never empty.
    pub text: String,
    /// How much audio it was decoded from, in milliseconds (the silence gate's trim
    /// included).
    pub audio_ms: f64,
    /// The recogniser's own inference time, in milliseconds, when it reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inference_ms: Option<f64>,
}

/// The outcome of one push-to-talk cycle, published as the event
/// `{"event":"voice", ...}` (see [`Event::Voice`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// The captured audio as the capture plugin describes it (durations in ms, peak, level;
    /// not the samples).
    pub audio: Option<Value>,
    /// The latency split.
    pub timings: VoiceTimings,
    /// The recogniser's n-best list, best first, as the voice loop weighed it:
    /// `{text, score, planned}` (`planned`: whether the router had steps for it; absent
    /// when not tried). Empty (and left out) with one hypothesis.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hypotheses: Vec<Value>,
}

impl VoiceReport {
    /// [`VoiceReport::command`] read as a [`CommandOutcome`]; `None` when the cycle did not
    /// reach the pipeline, or the value does not have that shape.
    pub fn command_outcome(&self) -> Option<CommandOutcome> {
        CommandOutcome::deserialize(self.command.as_ref()?).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_log_cursor_skips_what_a_new_subscription_replays() {
        let line = |ms: u64, m: &str| LogLine {
            time_ms: ms,
            level: "INFO".into(),
            target: "t".into(),
            message: m.into(),
            fields: Default::default(),
        };
        let mut cursor = LogCursor::default();
        let first = [line(1, "a"), line(2, "b"), line(2, "c")];
        assert!(first.iter().all(|l| cursor.take(l)));
        // The replay after a resubscription: all old, then one new line.
        assert!(!first.iter().any(|l| cursor.take(l)));
        assert!(cursor.take(&line(2, "d")));
        assert!(cursor.take(&line(3, "a")));
        assert!(!cursor.take(&line(2, "e")), "older than the newest taken");
    }

    #[test]
    fn events_round_trip_and_unknown_ones_are_kept_apart() {
        let wire =
            json!({"event": "ptt", "transition": "released", "source": "dbus", "held_ms": 840});
        let event: Event = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(
            event,
            Event::Ptt(PttEvent::Released {
                source: Source::Dbus,
                held: Duration::from_millis(840),
                dictation: false,
            })
        );
        assert_eq!(serde_json::to_value(&event).unwrap(), wire);
        // A newer runner's event, and new fields in a known one, do not break a client.
        let newer: Event =
            serde_json::from_value(json!({"event": "window_focused", "id": 7})).unwrap();
        assert_eq!(newer, Event::Unknown);
        let state: Event =
            serde_json::from_value(json!({"event": "state", "state": "ready", "since": 12}))
                .unwrap();
        assert_eq!(
            state,
            Event::State {
                state: ServiceState::Ready
            }
        );
    }
}
