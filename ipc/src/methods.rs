//! The runner socket's methods (reference §9.4, PROTOCOL.md §12), by name, with the params
//! each takes. Results are the types of [`crate::status`], [`crate::command`] and
//! [`crate::event`]; [`crate::Client`] has one typed method per name.
//!
//! Every method takes named params (an object); unknown params are ignored.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::status::PttState;

/// `runner.auth {token}` → `{authenticated: true}`: needed only when the runner did not
/// admit the client's executable (`[socket] allow_binaries`, the runner's own binary).
pub const AUTH: &str = "runner.auth";
/// `runner.version {}` → [`VersionInfo`].
pub const VERSION: &str = "runner.version";
/// `runner.status {}` → [`crate::Status`].
pub const STATUS: &str = "runner.status";
/// `runner.plugins {}`: the same answer as `runner.status` (the older runner's name).
pub const PLUGINS: &str = "runner.plugins";
/// `runner.context {}` → [`ContextReply`]: the desktop context now (the context plugin's
/// `context.snapshot`); `-32005` without a context plugin, the plugin's error when it fails.
pub const CONTEXT: &str = "runner.context";
/// `runner.pending {}` → `[`[`crate::PendingConfirmation`]`]`.
pub const PENDING: &str = "runner.pending";
/// `runner.confirm {id, approved, digest?}` → `{}`.
pub const CONFIRM: &str = "runner.confirm";
/// `runner.audit {since?}` → `[`[`crate::AuditEntry`]`]`, oldest first.
pub const AUDIT: &str = "runner.audit";
/// `runner.command` [`CommandParams`] → [`crate::CommandOutcome`].
pub const COMMAND: &str = "runner.command";
/// `runner.invoke {plugin, method, params}` → the plugin's result; acting methods pass the
/// runner's gate.
pub const INVOKE: &str = "runner.invoke";
/// `runner.reload {}` → [`crate::ReloadReport`]; an invalid file is `-32602` with
/// `data: {errors, warnings}` and the running config stays.
pub const RELOAD: &str = "runner.reload";
/// `runner.ptt {action}` → [`PttReply`].
pub const PTT: &str = "runner.ptt";
/// `runner.subscribe {logs?}` → `{subscription}`; then `runner.event` notifications (with
/// `logs: true` also the runner's log lines, [`crate::Event::Log`]).
pub const SUBSCRIBE: &str = "runner.subscribe";
/// `runner.unsubscribe {subscription}` → `{}`.
pub const UNSUBSCRIBE: &str = "runner.unsubscribe";
/// The notification carrying one [`EventParams`].
pub const EVENT: &str = "runner.event";
/// `runner.validate_plugin {plugin}` → `{ok, negotiated, unknown_capabilities,
/// missing_requires, permissions, id, status, warnings}`.
pub const VALIDATE_PLUGIN: &str = "runner.validate_plugin";
/// The runner's own request to a client: `host.confirm {id, op, args, provenance, summary,
/// digest}` → `{approved}`.
pub const HOST_CONFIRM: &str = "host.confirm";

/// `runner.context`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextReply {
    /// The context plugin's id.
    pub source: String,
    /// Its snapshot, as it sent it: `{compositor, focused, windows, workspaces, outputs,
    /// keyboard_layout, provenance}` for the compositor plugin. Untrusted (window titles).
    pub snapshot: Value,
}

/// `runner.version`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VersionInfo {
    /// The runner's version.
    pub version: String,
    /// The plugin protocol version it speaks.
    pub protocol: String,
    /// Its abi.
    pub abi: u64,
    /// Whether this connection has authenticated (or was admitted without a token).
    pub authenticated: bool,
}

/// `runner.command`'s params.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CommandParams {
    /// What the person said.
    pub utterance: String,
    /// Ask the action plugins what they would do, without doing it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// Per-call timeout in ms (each plugin call, and each confirmation wait).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Context for the router.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
}

/// `runner.ptt`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PttReply {
    /// The action taken: `press`, `release`, `toggle`, `cancel`, `state`.
    pub action: String,
    /// The transition it caused, if any (`{transition, source, held_ms?, reason?}`).
    #[serde(default)]
    pub transition: Option<crate::event::PttEvent>,
    /// Whether push-to-talk is held now.
    pub listening: bool,
    /// The state after it.
    pub state: PttState,
}

/// The params of one `runner.event` notification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventParams {
    /// The subscription it belongs to.
    pub subscription: String,
    /// [`crate::Event::Snapshot`] first, then one change each.
    pub event: crate::Event,
}
