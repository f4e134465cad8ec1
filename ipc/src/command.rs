//! Commands and their trail: `runner.command`'s outcome, confirmations and audit entries.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::{SystemTime, UNIX_EPOCH};
use utter_protocol::digest::step_digest;
use utter_protocol::{ErrorObject, Provenance};

/// A confirmation request: the op, its exact arguments, their provenance, a summary, and the
/// digest an approval is bound to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfirmRequest {
    /// The op.
    pub op: String,
    /// The exact arguments that will run.
    pub args: Value,
    /// The step's provenance.
    pub provenance: Provenance,
    /// One human line.
    pub summary: String,
    /// SHA-256 of the canonical JSON of `{op, args, provenance}`
    /// ([`utter_protocol::digest::step_digest`]): an approval is valid for exactly this step.
    pub digest: String,
}

impl ConfirmRequest {
    /// A request for `op` with `args` of `provenance`; the digest is computed here.
    pub fn new(op: &str, args: &Value, provenance: Provenance, summary: &str) -> ConfirmRequest {
        ConfirmRequest {
            op: op.to_owned(),
            args: args.clone(),
            provenance,
            summary: summary.to_owned(),
            digest: step_digest(op, args, provenance),
        }
    }
}

/// The plan the router made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The router plugin's id.
    pub router: String,
    /// The rule or reason the router gives, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// A message from the router (e.g. "no rule matched").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The steps, as the router returned them.
    pub steps: Vec<Value>,
    /// Why there are no steps, when the router says (`{reason, message}`; reasons such as
    /// `no_rule`, `unknown_target`, `needs_browser`, `needs_terminal`, `incomplete`), so a
    /// client can tell "not understood" from "understood, but not possible here".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate: Option<Value>,
}

/// The outcome of one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepResult {
    /// The op.
    pub op: String,
    /// Whether it succeeded.
    pub ok: bool,
    /// What happened (or would happen, in a dry run).
    pub detail: String,
    /// The args the step ran with.
    pub args: Value,
    /// The provenance the policy saw.
    pub provenance: Provenance,
    /// The action plugin that ran it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    /// The action plugin's whole result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Whether the plugin observed the effect (its result's `verified`): `Some(false)` when
    /// the action was sent but its effect was not seen; `None` when the plugin does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
    /// The error, when `ok` is false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorObject>,
    /// Whether a confirmation was (or, in a dry run, would be) needed.
    pub needs_confirm: bool,
    /// When the step is a candidate an untrusted chooser picked:
    /// `{plugin, method, choice_id, digest}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selected_by: Option<Value>,
    /// Which door confirmed it, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmed_by: Option<String>,
}

/// The outcome of a command: `{utterance, dry_run, plan, results}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandOutcome {
    /// The utterance as given.
    pub utterance: String,
    /// Whether this was a dry run.
    pub dry_run: bool,
    /// The router's plan.
    pub plan: Plan,
    /// One result per step.
    pub results: Vec<StepResult>,
}

impl CommandOutcome {
    /// True when there were steps and every one succeeded.
    pub fn all_ok(&self) -> bool {
        !self.results.is_empty() && self.results.iter().all(|r| r.ok)
    }
}

/// One command that acted, as `runner.history` lists it: what was said, what each step did
/// and the desktop before it. Kept in memory for the last [`HistoryEntry::KEPT`] commands; the
/// runner builds an undo from it, never from screen content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// Its number in this runner's journal, counting from 1 (for `undo`'s bookkeeping).
    #[serde(default)]
    pub id: u64,
    /// When it finished, seconds since the Unix epoch.
    pub time: u64,
    /// The utterance as given (the person's words; untrusted text for display).
    pub utterance: String,
    /// The router's rule, when it named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The steps that ran, in order (a refused plan runs none and is not kept).
    pub steps: Vec<HistoryStep>,
    /// The desktop just before it ran, from the last context snapshot: `{focused: {id,
    /// app_id, workspace, workspace_id, output}, compositor}`; `null` without a context
    /// plugin. Window titles are left out.
    #[serde(default)]
    pub before: Option<Value>,
    /// Whether this command was an "undo that" (its inverse steps, or the application's
    /// undo chord it ran instead); an undo is not itself undone by the next "undo that".
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub undo: bool,
    /// The ids of the entries this undo reversed: those whose every inverse step succeeded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub undid: Vec<u64>,
    /// Set once a later "undo that" reversed it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub undone: bool,
}

impl HistoryEntry {
    /// How many commands the runner keeps.
    pub const KEPT: usize = 50;
}

/// One step of a [`HistoryEntry`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryStep {
    /// The op.
    pub op: String,
    /// The exact args it ran with.
    pub args: Value,
    /// Whether it succeeded.
    pub ok: bool,
    /// Whether its effect was observed (`None` when the plugin does not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
    /// What happened, in the plugin's words.
    pub detail: String,
    /// The action plugin that ran it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    /// The step's provenance; an undo of it carries the same or a less trusted one.
    #[serde(default = "user")]
    pub provenance: Provenance,
    /// Whether the person confirmed it before it ran; an undo of it asks again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub confirmed: bool,
    /// What the plugin reported (its `action.invoke` result), with every `title` field
    /// removed: the ids, states and levels an undo is built from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// The desktop just before this step ran (the same shape as [`HistoryEntry::before`]);
    /// the first step's is the entry's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
}

fn user() -> Provenance {
    Provenance::User
}

/// A confirmation waiting for its answer, as listed by `runner.pending` and D-Bus
/// `ListPending`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingConfirmation {
    /// Unguessable id (32 hex digits).
    pub id: String,
    /// The op, its exact args, provenance and summary.
    #[serde(flatten)]
    pub request: ConfirmRequest,
    /// When it was asked, seconds since the Unix epoch.
    pub created: u64,
    /// When it times out, seconds since the Unix epoch.
    pub expires: u64,
}

/// One decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// Seconds since the Unix epoch.
    pub time: u64,
    /// The utterance the decision belongs to (empty for a plugin's `host.*` callback).
    pub utterance: String,
    /// The op.
    pub op: String,
    /// The exact arguments.
    pub args: Value,
    /// The provenance the policy saw.
    pub provenance: Provenance,
    /// `allowed`, `denied`, `confirmed`, `reasked`, `chosen`, `executed`, `failed`, and for
    /// dry runs `dry-run` / `dry-run-failed` (nothing was done).
    pub decision: String,
    /// The error code of a denial.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<i64>,
    /// Who decided: a confirmation door, a chooser plugin, `policy`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// The plugin concerned (the action plugin, or the plugin making a callback).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
}

impl AuditEntry {
    /// An entry stamped now.
    pub fn new(
        utterance: &str,
        op: &str,
        args: &Value,
        provenance: Provenance,
        decision: &str,
    ) -> AuditEntry {
        AuditEntry {
            time: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            utterance: clip(utterance),
            op: clip(op),
            args: clip_value(args),
            provenance,
            decision: decision.to_owned(),
            code: None,
            by: None,
            plugin: None,
        }
    }

    /// With an error code.
    pub fn code(mut self, code: i64) -> AuditEntry {
        self.code = Some(code);
        self
    }

    /// With who decided.
    pub fn by(mut self, by: impl Into<String>) -> AuditEntry {
        self.by = Some(by.into());
        self
    }

    /// With the plugin concerned.
    pub fn plugin(mut self, plugin: impl Into<String>) -> AuditEntry {
        self.plugin = Some(plugin.into());
        self
    }
}

/// The longest text kept in an audit entry (utterance, op, each string in the args), in
/// bytes; longer text is cut and marked, so the trail stays small and readable.
pub const MAX_AUDIT_TEXT: usize = 1024;

fn clip(text: &str) -> String {
    if text.len() <= MAX_AUDIT_TEXT {
        return text.to_owned();
    }
    let mut end = MAX_AUDIT_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [{} bytes in all]", &text[..end], text.len())
}

fn clip_value(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(clip(s)),
        Value::Array(items) => Value::Array(items.iter().take(64).map(clip_value).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .take(64)
                .map(|(k, v)| (clip(k), clip_value(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}
