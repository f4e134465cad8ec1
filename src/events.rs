//! Events the runner publishes to its clients (the socket's event subscription, D-Bus
//! signals and properties).
//!
//! Subscribers first get a full status snapshot, then these changes. Delivery is bounded:
//! a subscriber that falls too far behind is dropped instead of growing memory.

use serde::Serialize;
use serde_json::Value;

use crate::confirm::PendingConfirmation;
use crate::ptt::{PttEvent, TriggerStatus};
use crate::supervisor::{PluginStatus, ReloadReport};

/// The runner's overall state, as D-Bus `State` and `runner.status` show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ServiceState {
    /// Plugins are being started.
    Starting,
    /// Every plugin is running.
    Ready,
    /// Some plugin is not running (failed, crash-looping, restarting).
    Degraded,
    /// Shutting down.
    Stopping,
}

impl ServiceState {
    /// The wire word.
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceState::Starting => "starting",
            ServiceState::Ready => "ready",
            ServiceState::Degraded => "degraded",
            ServiceState::Stopping => "stopping",
        }
    }
}

/// One change. Serialised with an `"event"` tag, e.g.
/// `{"event":"plugin_state","id":"rules","epoch":1,"status":"ok"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
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
    Voice(Box<crate::voice::VoiceReport>),
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
}
