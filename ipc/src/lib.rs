//! The Utter client API: what a client of the runner can say and hear.
//!
//! * [`methods`]: every method of the runner's socket (`runner.status`, `runner.command`,
//!   `runner.invoke`, ...) by name, with its params type.
//! * [`status`]: [`Status`] and its parts ([`PluginReport`], [`PttState`], [`VoiceStatus`]),
//!   as `runner.status` answers.
//! * [`command`]: [`CommandOutcome`] (`runner.command`), [`PendingConfirmation`],
//!   [`AuditEntry`].
//! * [`event`]: [`Event`], what `runner.subscribe` sends after its first snapshot.
//! * [`dbus`]: the D-Bus names of the same service.
//! * [`paths`]: where the socket and the token file are.
//! * [`client`]: [`Client`], a typed async client over the socket.
//!
//! The wire is JSON-RPC 2.0 with `Content-Length` framing over the unix socket
//! `$XDG_RUNTIME_DIR/utter/runner.sock` (`protocol/PROTOCOL.md`, and the older runner's
//! reference §9 for the method set).
//!
//! # Compatibility promise
//! Within protocol major 1, fields, methods, events and enum values are **added, never
//! renamed or removed**. Every type here ignores fields it does not know, and
//! [`Event::Unknown`] stands for an event a newer runner sends, so a client built against
//! this crate keeps working against a newer runner. A field whose meaning changes gets a new
//! name instead.

#![warn(missing_docs)]

pub mod client;
pub mod command;
pub mod dbus;
pub mod event;
pub mod methods;
pub mod paths;
pub mod status;

pub use client::{Client, ClientError, ConfirmHandler};
pub use command::{
    AuditEntry, CommandOutcome, ConfirmRequest, HistoryEntry, HistoryStep, PendingConfirmation,
    Plan, StepResult,
};
pub use event::{
    CancelReason, Event, LogCursor, LogLine, PttEvent, VoicePartial, VoiceReport, VoiceTimings,
};
pub use status::{
    DecideStatus, DeclaredAxes, PermissionReport, PluginReport, PluginStatus, PttState,
    ReloadReport, SandboxReport, ServiceState, Source, Status, TriggerStatus, VoiceStatus,
};
pub use utter_protocol::{ErrorCode, ErrorObject, Provenance};

/// Durations on the wire are whole milliseconds (`held_ms`); serde helpers for them.
pub(crate) mod ms {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}
