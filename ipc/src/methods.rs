//! The runner socket's methods (reference §9.4, PROTOCOL.md §12), by name, with the params
//! each takes. Results are the types of [`crate::status`], [`crate::command`] and
//! [`crate::event`]; [`crate::Client`] has one typed method per name.
//!
//! Every method takes named params (an object); unknown params are ignored.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::status::PttState;
use utter_protocol::ErrorObject;

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
/// `runner.history {limit?}` → `[`[`crate::HistoryEntry`]`]`, newest first: the commands
/// that acted, with what each step did and the desktop before them.
pub const HISTORY: &str = "runner.history";
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
    /// Per-call timeout in ms (each plugin call, and each confirmation wait); one that is
    /// not a positive whole number is ignored.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_timeout"
    )]
    pub timeout_ms: Option<u64>,
    /// Context for the router.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// Where the utterance came from (`{source, trust, ...}`, [`crate::Provenance`]): a
    /// client may only lower it from the default (`user`, trusted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Value>,
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

/// `runner.auth`'s params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthParams {
    /// The token the runner wrote to its token file ([`crate::paths`]).
    pub token: String,
}

/// `runner.confirm`'s params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfirmParams {
    /// The pending confirmation's id (`runner.pending`).
    pub id: String,
    /// `true` approves the step, `false` denies it.
    pub approved: bool,
    /// The pending confirmation's digest: the answer then counts only for exactly the step
    /// that was shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// `runner.audit`'s params.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditParams {
    /// Only the decisions at or after this time (Unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
}

/// `runner.history`'s params.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryParams {
    /// At most this many entries, the newest (all the runner keeps when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// `runner.invoke`'s params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InvokeParams {
    /// A plugin id, or a kind (its first plugin).
    pub plugin: String,
    /// The plugin's method (`action.invoke`, `router.plan`, ...).
    pub method: String,
    /// Its params: an object (`{}` when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
}

/// `runner.ptt`'s params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PttParams {
    /// `press`, `release`, `toggle`, `cancel` or `state`.
    pub action: String,
    /// With `press` or `toggle`: hold to dictate (what is heard is typed into the focused
    /// field, as in dictation mode, for this hold only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dictation: bool,
}

/// `runner.subscribe`'s params.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscribeParams {
    /// Also receive the runner's log lines ([`crate::Event::Log`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logs: Option<bool>,
}

/// `runner.unsubscribe`'s params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnsubscribeParams {
    /// The id `runner.subscribe` returned.
    pub subscription: String,
}

/// `runner.validate_plugin`'s params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValidatePluginParams {
    /// A plugin id, or a kind.
    pub plugin: String,
}

/// One request of the runner's socket, with its params typed: what a client sends
/// ([`crate::Client`] builds every call from one) and what the runner dispatches on
/// ([`Request::parse`]), so that the two sides share one list of names and one shape of
/// params. Methods of the plugin protocol that clients also use on the socket
/// (`handle.*`, `fd.pass`, `stream.*`) are not here: they are the protocol's.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Request {
    /// [`AUTH`].
    Auth(AuthParams),
    /// [`VERSION`].
    Version,
    /// [`STATUS`].
    Status,
    /// [`PLUGINS`]: the same answer as [`Request::Status`].
    Plugins,
    /// [`CONTEXT`].
    Context,
    /// [`PENDING`].
    Pending,
    /// [`CONFIRM`].
    Confirm(ConfirmParams),
    /// [`AUDIT`].
    Audit(AuditParams),
    /// [`HISTORY`].
    History(HistoryParams),
    /// [`COMMAND`].
    Command(CommandParams),
    /// [`INVOKE`].
    Invoke(InvokeParams),
    /// [`RELOAD`].
    Reload,
    /// [`PTT`].
    Ptt(PttParams),
    /// [`SUBSCRIBE`].
    Subscribe(SubscribeParams),
    /// [`UNSUBSCRIBE`].
    Unsubscribe(UnsubscribeParams),
    /// [`VALIDATE_PLUGIN`].
    ValidatePlugin(ValidatePluginParams),
}

/// What each method's params are, as an invalid-params error says them.
const PARAM_HINTS: &[(&str, &str)] = &[
    (AUTH, "params.token, the runner's token (a string)"),
    (
        CONFIRM,
        "params.id (the id of a pending confirmation, see runner.pending), params.approved (true approves, false denies) and optionally params.digest (the confirmation's digest string)",
    ),
    (
        AUDIT,
        "optionally params.since, Unix seconds (a whole number)",
    ),
    (
        HISTORY,
        "optionally params.limit, the most entries to return (a whole number)",
    ),
    (
        COMMAND,
        "params.utterance (a non-empty string, e.g. \"open youtube\"), optionally params.dry_run (true or false), params.timeout_ms and params.context",
    ),
    (
        INVOKE,
        "params.plugin (an id or a kind), params.method (a string) and optionally params.params (an object)",
    ),
    (
        PTT,
        "params.action: \"press\", \"release\", \"toggle\", \"cancel\" or \"state\"",
    ),
    (
        SUBSCRIBE,
        "optionally params.logs (true or false: the runner's log lines too)",
    ),
    (
        UNSUBSCRIBE,
        "params.subscription, the id runner.subscribe returned",
    ),
    (VALIDATE_PLUGIN, "params.plugin, a plugin id or a kind"),
];

impl Request {
    /// The method's wire name (`runner.status`, ...).
    pub fn method(&self) -> &'static str {
        match self {
            Request::Auth(_) => AUTH,
            Request::Version => VERSION,
            Request::Status => STATUS,
            Request::Plugins => PLUGINS,
            Request::Context => CONTEXT,
            Request::Pending => PENDING,
            Request::Confirm(_) => CONFIRM,
            Request::Audit(_) => AUDIT,
            Request::History(_) => HISTORY,
            Request::Command(_) => COMMAND,
            Request::Invoke(_) => INVOKE,
            Request::Reload => RELOAD,
            Request::Ptt(_) => PTT,
            Request::Subscribe(_) => SUBSCRIBE,
            Request::Unsubscribe(_) => UNSUBSCRIBE,
            Request::ValidatePlugin(_) => VALIDATE_PLUGIN,
        }
    }

    /// The params as they go on the wire (`{}` for a method that takes none).
    pub fn params(&self) -> Value {
        let value = match self {
            Request::Auth(p) => serde_json::to_value(p),
            Request::Confirm(p) => serde_json::to_value(p),
            Request::Audit(p) => serde_json::to_value(p),
            Request::History(p) => serde_json::to_value(p),
            Request::Command(p) => serde_json::to_value(p),
            Request::Invoke(p) => serde_json::to_value(p),
            Request::Ptt(p) => serde_json::to_value(p),
            Request::Subscribe(p) => serde_json::to_value(p),
            Request::Unsubscribe(p) => serde_json::to_value(p),
            Request::ValidatePlugin(p) => serde_json::to_value(p),
            Request::Version
            | Request::Status
            | Request::Plugins
            | Request::Context
            | Request::Pending
            | Request::Reload => Ok(Value::Object(serde_json::Map::new())),
        };
        // These types hold strings, numbers, booleans and JSON values only: serialising
        // them cannot fail.
        value.unwrap_or_else(|_| Value::Object(serde_json::Map::new()))
    }

    /// The request a client sent: `None` when `method` is not one of the runner's own
    /// (the caller then tries the protocol's `handle.*`, `fd.pass` and `stream.*`, else
    /// answers method-not-found). Params left out or `null` are `{}`; unknown params are
    /// ignored (the compatibility promise).
    ///
    /// # Errors
    /// `-32602` (invalid params) saying what is wrong and what the method takes: params
    /// that are not an object, a required one missing, one of the wrong type.
    pub fn parse(method: &str, params: &Value) -> Option<Result<Request, ErrorObject>> {
        fn typed<T: serde::de::DeserializeOwned>(
            method: &str,
            params: &Value,
        ) -> Result<T, ErrorObject> {
            let hint = PARAM_HINTS
                .iter()
                .find(|(m, _)| *m == method)
                .map_or("named params", |(_, h)| h);
            let object = match params {
                Value::Null => Value::Object(serde_json::Map::new()),
                Value::Object(_) => params.clone(),
                _ => {
                    return Err(ErrorObject::invalid_params(format!(
                        "{method} takes named params (a JSON object): {hint}"
                    )));
                }
            };
            serde_json::from_value(object)
                .map_err(|e| ErrorObject::invalid_params(format!("{method}: {e}; it takes {hint}")))
        }
        let request = match method {
            AUTH => typed(method, params).map(Request::Auth),
            VERSION => Ok(Request::Version),
            STATUS => Ok(Request::Status),
            PLUGINS => Ok(Request::Plugins),
            CONTEXT => Ok(Request::Context),
            PENDING => Ok(Request::Pending),
            CONFIRM => typed(method, params).map(Request::Confirm),
            AUDIT => typed(method, params).map(Request::Audit),
            HISTORY => typed(method, params).map(Request::History),
            COMMAND => typed(method, params).map(Request::Command),
            INVOKE => typed(method, params).map(Request::Invoke),
            RELOAD => Ok(Request::Reload),
            PTT => typed(method, params).map(Request::Ptt),
            SUBSCRIBE => typed(method, params).map(Request::Subscribe),
            UNSUBSCRIBE => typed(method, params).map(Request::Unsubscribe),
            VALIDATE_PLUGIN => typed(method, params).map(Request::ValidatePlugin),
            _ => return None,
        };
        Some(request)
    }
}

/// `params.timeout_ms` when it is a positive whole number; anything else is read as no
/// timeout of the caller's (PROTOCOL.md §7: an unusable timeout is ignored, not refused).
fn lenient_timeout<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let value = Value::deserialize(d)?;
    Ok(value.as_u64().filter(|ms| *ms > 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_request_goes_out_and_comes_back_the_same() {
        let requests = [
            Request::Auth(AuthParams { token: "t".into() }),
            Request::Version,
            Request::Status,
            Request::Plugins,
            Request::Context,
            Request::Pending,
            Request::Confirm(ConfirmParams {
                id: "c1".into(),
                approved: true,
                digest: Some("d".into()),
            }),
            Request::Audit(AuditParams { since: Some(5) }),
            Request::History(HistoryParams { limit: Some(3) }),
            Request::History(HistoryParams::default()),
            Request::Command(CommandParams {
                utterance: "open youtube".into(),
                dry_run: true,
                timeout_ms: Some(500),
                context: Some(json!({"focused": null})),
                provenance: None,
            }),
            Request::Invoke(InvokeParams {
                plugin: "rules".into(),
                method: "router.plan".into(),
                params: Some(json!({"utterance": "x"})),
            }),
            Request::Reload,
            Request::Ptt(PttParams {
                action: "toggle".into(),
                dictation: true,
            }),
            Request::Subscribe(SubscribeParams { logs: Some(true) }),
            Request::Unsubscribe(UnsubscribeParams {
                subscription: "sub-1".into(),
            }),
            Request::ValidatePlugin(ValidatePluginParams {
                plugin: "stt".into(),
            }),
        ];
        for request in requests {
            let parsed = Request::parse(request.method(), &request.params())
                .expect("a runner method")
                .expect("its own params parse");
            assert_eq!(parsed, request);
        }
        assert!(Request::parse("handle.fetch", &json!({})).is_none());
        assert!(Request::parse("runner.nope", &json!({})).is_none());
    }

    #[test]
    fn bad_params_say_what_the_method_takes() {
        let e = Request::parse(CONFIRM, &json!({"id": "c1", "approved": "yes"}))
            .unwrap()
            .unwrap_err();
        assert_eq!(e.code, utter_protocol::ErrorCode::InvalidParams.code());
        assert!(
            e.message.starts_with("runner.confirm: invalid type"),
            "{}",
            e.message
        );
        assert!(e.message.contains("params.approved"), "{}", e.message);
        let e = Request::parse(SUBSCRIBE, &json!({"logs": "yes"}))
            .unwrap()
            .unwrap_err();
        assert!(e.message.contains("params.logs"), "{}", e.message);
        let e = Request::parse(AUTH, &json!(["t"])).unwrap().unwrap_err();
        assert!(e.message.contains("named params"), "{}", e.message);
        let e = Request::parse(COMMAND, &json!({})).unwrap().unwrap_err();
        assert!(
            e.message.contains("missing field `utterance`"),
            "{}",
            e.message
        );
        // Left out, null, and unknown params are fine; a timeout that is not a positive
        // whole number is no timeout.
        assert_eq!(
            Request::parse(AUDIT, &Value::Null).unwrap().unwrap(),
            Request::Audit(AuditParams::default())
        );
        // A limit that is not a whole number says what the method takes.
        let err = Request::parse(HISTORY, &serde_json::json!({"limit": "ten"}))
            .unwrap()
            .unwrap_err();
        assert!(err.message.contains("params.limit"), "{err}");
        let Request::Command(c) = Request::parse(
            COMMAND,
            &json!({"utterance": "pause", "timeout_ms": "soon", "colour": 1}),
        )
        .unwrap()
        .unwrap() else {
            panic!("a command")
        };
        assert_eq!(c.timeout_ms, None);
    }
}
