//! The audit trail: every gate decision of the pipeline (allowed, denied with its code,
//! confirmed and by which door, asked again, the candidate a chooser picked), logged with
//! structured `tracing` fields and kept in a bounded in-memory ring.
//!
//! The ring holds the last [`AUDIT_CAPACITY`] entries; older ones are dropped, so the trail
//! can never grow memory without bound. [`crate::runner::Runner::audit`] reads it.

use serde::Serialize;
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::policy::Provenance;

/// How many entries the ring keeps.
pub const AUDIT_CAPACITY: usize = 1000;

/// One decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
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

/// The bounded ring of decisions.
#[derive(Debug, Default)]
pub struct Audit {
    ring: Mutex<VecDeque<AuditEntry>>,
}

impl Audit {
    /// An empty trail.
    pub fn new() -> Audit {
        Audit::default()
    }

    /// Log `entry` and keep it (dropping the oldest beyond [`AUDIT_CAPACITY`]).
    pub fn record(&self, entry: AuditEntry) {
        tracing::info!(
            target: "utter::audit",
            op = %entry.op,
            args = %entry.args,
            provenance = %entry.provenance,
            decision = %entry.decision,
            code = entry.code,
            by = entry.by.as_deref(),
            plugin = entry.plugin.as_deref(),
            utterance = %entry.utterance,
            "gate decision"
        );
        let mut ring = self.ring.lock().expect("audit lock");
        if ring.len() == AUDIT_CAPACITY {
            ring.pop_front();
        }
        ring.push_back(entry);
    }

    /// The entries at or after `since` (seconds since the Unix epoch), oldest first.
    pub fn entries(&self, since: Option<u64>) -> Vec<AuditEntry> {
        self.ring
            .lock()
            .expect("audit lock")
            .iter()
            .filter(|e| since.is_none_or(|s| e.time >= s))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_ring_is_bounded_and_filters_by_time() {
        let audit = Audit::new();
        for i in 0..(AUDIT_CAPACITY + 5) {
            audit.record(AuditEntry::new(
                "u",
                "op",
                &json!({"i": i}),
                Provenance::User,
                "allowed",
            ));
        }
        let all = audit.entries(None);
        assert_eq!(all.len(), AUDIT_CAPACITY);
        assert_eq!(all[0].args["i"], 5);
        assert!(audit.entries(Some(u64::MAX)).is_empty());
    }
}
