//! The action journal (`runner.history`, `utter history`): the last commands that acted,
//! each with what its steps did and the desktop just before it, newest first.
//!
//! Only what reached an action plugin is kept: a plan the gate refused, a dry run and a
//! plan of no steps leave nothing. The ring holds the last [`HistoryEntry::KEPT`] commands
//! in memory; nothing is written to disk. The desktop before a command is taken from the
//! context reader's last good snapshot (no new read on the command's path), reduced to
//! what an undo needs: the focused window's id, `app_id`, workspace and output, and the
//! compositor's name; window titles (untrusted, and private) are left out.

use std::collections::VecDeque;
use std::sync::Mutex;

use serde_json::{Value, json};
pub use utter_ipc::command::{HistoryEntry, HistoryStep};
use utter_ipc::{CommandOutcome, ErrorCode};

/// The bounded journal.
#[derive(Debug, Default)]
pub struct History {
    ring: Mutex<VecDeque<HistoryEntry>>,
}

impl History {
    /// An empty journal.
    pub fn new() -> History {
        History::default()
    }

    /// Keep `outcome` if any of its steps reached an action plugin, with `before` (a context
    /// snapshot as the context plugin sent it, reduced by [`desktop_before`]); the oldest
    /// entry goes beyond [`HistoryEntry::KEPT`].
    pub fn record(&self, outcome: &CommandOutcome, before: Option<&Value>) {
        if outcome.dry_run {
            return;
        }
        let steps: Vec<HistoryStep> = outcome
            .results
            .iter()
            // A step that failed before any plugin had it (refused, no plugin offers the op)
            // did nothing.
            .filter(|r| {
                r.ok || (r.plugin.is_some()
                    && r.error.as_ref().is_none_or(|e| {
                        !matches!(e.kind(), ErrorCode::Denied | ErrorCode::CapabilityMissing)
                    }))
            })
            .map(|r| HistoryStep {
                op: r.op.clone(),
                args: r.args.clone(),
                ok: r.ok,
                verified: r.verified,
                detail: r.detail.clone(),
                plugin: r.plugin.clone(),
            })
            .collect();
        if steps.is_empty() {
            return;
        }
        let entry = HistoryEntry {
            time: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            utterance: outcome.utterance.clone(),
            rule: outcome.plan.rule.clone(),
            steps,
            before: before.map(desktop_before),
        };
        let mut ring = self.ring.lock().expect("history lock");
        if ring.len() == HistoryEntry::KEPT {
            ring.pop_front();
        }
        ring.push_back(entry);
    }

    /// The last `limit` entries (all when `None`), newest first.
    pub fn entries(&self, limit: Option<usize>) -> Vec<HistoryEntry> {
        let ring = self.ring.lock().expect("history lock");
        ring.iter()
            .rev()
            .take(limit.unwrap_or(usize::MAX))
            .cloned()
            .collect()
    }
}

/// What of a context snapshot the journal keeps: `{compositor, focused: {id, app_id,
/// workspace, workspace_id, output}}` (`focused` is `null` when nothing had focus). Fields
/// the snapshot lacks are left out; titles never kept.
pub fn desktop_before(snapshot: &Value) -> Value {
    let focused = snapshot.get("focused").filter(|f| f.is_object()).map(|f| {
        let mut kept = serde_json::Map::new();
        for key in ["id", "app_id", "workspace", "workspace_id", "output"] {
            if let Some(v) = f.get(key).filter(|v| !v.is_null()) {
                kept.insert(key.to_owned(), v.clone());
            }
        }
        Value::Object(kept)
    });
    json!({
        "compositor": snapshot.pointer("/compositor/name").cloned().unwrap_or(Value::Null),
        "focused": focused,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use utter_ipc::{ErrorObject, Plan, Provenance, StepResult};

    fn outcome(utterance: &str, results: Vec<StepResult>, dry_run: bool) -> CommandOutcome {
        CommandOutcome {
            utterance: utterance.into(),
            dry_run,
            plan: Plan {
                router: "rules".into(),
                rule: Some("compositor".into()),
                message: None,
                steps: Vec::new(),
                escalate: None,
            },
            results,
        }
    }

    fn step(op: &str, ok: bool, plugin: Option<&str>, error: Option<ErrorObject>) -> StepResult {
        StepResult {
            op: op.into(),
            ok,
            detail: format!("{op} done"),
            args: json!({"n": 1}),
            provenance: Provenance::User,
            plugin: plugin.map(str::to_owned),
            result: None,
            verified: ok.then_some(true),
            error,
            needs_confirm: false,
            selected_by: None,
            confirmed_by: None,
        }
    }

    #[test]
    fn only_what_reached_a_plugin_is_kept_newest_first_and_bounded() {
        let history = History::new();
        let before = json!({
            "compositor": {"name": "niri", "version": "25.08"},
            "focused": {"id": 7, "app_id": "foot", "title": "secret ~ rm -rf", "workspace": "2",
                        "workspace_id": 5, "output": "DP-1", "floating": false},
        });
        history.record(
            &outcome(
                "workspace three",
                vec![step("niri", true, Some("compositor"), None)],
                false,
            ),
            Some(&before),
        );
        // A dry run, a refused plan and a step no plugin offers leave nothing.
        history.record(
            &outcome(
                "workspace four",
                vec![step("niri", true, Some("compositor"), None)],
                true,
            ),
            Some(&before),
        );
        let denied = ErrorObject::new(ErrorCode::Denied, "not run");
        history.record(
            &outcome(
                "x",
                vec![step("niri", false, Some("compositor"), Some(denied))],
                false,
            ),
            None,
        );
        let missing = ErrorObject::new(ErrorCode::CapabilityMissing, "no plugin");
        history.record(
            &outcome("y", vec![step("zap", false, None, Some(missing))], false),
            None,
        );
        // A step a plugin tried and failed is kept, marked not ok.
        let failed = ErrorObject::plugin("the window is gone");
        history.record(
            &outcome(
                "close it",
                vec![step("close_app", false, Some("compositor"), Some(failed))],
                false,
            ),
            None,
        );
        let entries = history.entries(None);
        assert_eq!(entries.len(), 2, "{entries:#?}");
        assert_eq!(entries[0].utterance, "close it");
        assert!(!entries[0].steps[0].ok);
        assert_eq!(entries[0].before, None);
        assert_eq!(entries[1].utterance, "workspace three");
        assert_eq!(entries[1].rule.as_deref(), Some("compositor"));
        assert_eq!(
            entries[1].before,
            Some(
                json!({"compositor": "niri", "focused": {"id": 7, "app_id": "foot",
                "workspace": "2", "workspace_id": 5, "output": "DP-1"}})
            )
        );
        // No title reaches the journal.
        assert!(!serde_json::to_string(&entries).unwrap().contains("secret"));
        assert_eq!(history.entries(Some(1)).len(), 1);

        for i in 0..(HistoryEntry::KEPT + 3) {
            history.record(
                &outcome(
                    &format!("n{i}"),
                    vec![step("key", true, Some("input"), None)],
                    false,
                ),
                None,
            );
        }
        let entries = history.entries(None);
        assert_eq!(entries.len(), HistoryEntry::KEPT);
        assert_eq!(entries[0].utterance, format!("n{}", HistoryEntry::KEPT + 2));
    }

    #[test]
    fn a_snapshot_without_focus_or_compositor_is_kept_as_nulls() {
        assert_eq!(
            desktop_before(&json!({"windows": []})),
            json!({"compositor": null, "focused": null})
        );
        assert_eq!(
            desktop_before(&json!("garbage")),
            json!({"compositor": null, "focused": null})
        );
    }
}
