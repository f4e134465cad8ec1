//! The audit trail: every gate decision of the pipeline (allowed, denied with its code,
//! confirmed and by which door, asked again, the candidate a chooser picked), logged with
//! structured `tracing` fields and kept in a bounded in-memory ring.
//!
//! The ring holds the last [`AUDIT_CAPACITY`] entries; older ones are dropped, so the trail
//! can never grow memory without bound. [`crate::runner::Runner::audit`] reads it.

use std::collections::VecDeque;
use std::sync::Mutex;

pub use utter_ipc::command::AuditEntry;

/// How many entries the ring keeps.
pub const AUDIT_CAPACITY: usize = 1000;

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
            // Debug formatting escapes control characters: a client cannot forge log lines.
            op = ?entry.op,
            args = %entry.args,
            provenance = %entry.provenance,
            decision = %entry.decision,
            code = entry.code,
            by = entry.by.as_deref(),
            plugin = entry.plugin.as_deref(),
            utterance = ?entry.utterance,
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
    use crate::policy::Provenance;
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
