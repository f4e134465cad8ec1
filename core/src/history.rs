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
    /// Held by an "undo that" from choosing what it undoes until it is recorded, so that two
    /// at once never reverse the same command twice.
    undo: tokio::sync::Mutex<()>,
}

/// What an "undo that" ran, for [`History::record`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UndoRun {
    /// For each step of the plan, the journal id of the command it reverses (`None` for the
    /// application's undo chord run instead).
    pub reverses: Vec<Option<u64>>,
}

/// The largest plugin result the journal keeps whole, in bytes of JSON; a larger one keeps
/// only its top-level scalars.
pub const MAX_RESULT_BYTES: usize = 16 * 1024;

/// The largest args the journal keeps, in bytes of JSON; larger ones are not kept (and that
/// step cannot be undone).
pub const MAX_ARGS_BYTES: usize = 64 * 1024;

/// The longest detail kept, in characters.
pub const MAX_DETAIL_CHARS: usize = 1000;

impl History {
    /// An empty journal.
    pub fn new() -> History {
        History::default()
    }

    /// Keep `outcome` if any of its steps reached an action plugin. `befores[i]` is the
    /// context snapshot step `i` ran in, as the context plugin sent it (reduced here by
    /// [`desktop_before`]); a missing one is `None`. The oldest entry goes beyond
    /// [`HistoryEntry::KEPT`]. `undo` says which command each step of an "undo that"
    /// reversed: a command is marked undone only when every one of its inverse steps
    /// succeeded. Returns the new entry's id, if one was kept.
    pub fn record(
        &self,
        outcome: &CommandOutcome,
        befores: &[Option<Value>],
        undo: Option<&UndoRun>,
    ) -> Option<u64> {
        if outcome.dry_run {
            return None;
        }
        let steps: Vec<HistoryStep> = outcome
            .results
            .iter()
            .zip(befores.iter().chain(std::iter::repeat(&None)))
            // A step that failed before any plugin had it (refused, no plugin offers the op)
            // did nothing.
            .filter(|(r, _)| {
                // The runner's own steps (a dictation switch) reached no plugin either.
                r.plugin.is_some()
                    && (r.ok
                        || r.error.as_ref().is_none_or(|e| {
                            !matches!(e.kind(), ErrorCode::Denied | ErrorCode::CapabilityMissing)
                        }))
            })
            .map(|(r, before)| HistoryStep {
                op: r.op.clone(),
                args: bounded_args(&r.args),
                ok: r.ok,
                verified: r.verified,
                detail: utter_protocol::text::clip(&r.detail, MAX_DETAIL_CHARS),
                plugin: r.plugin.clone(),
                provenance: r.provenance,
                confirmed: r.confirmed_by.is_some(),
                result: r.result.clone().map(without_titles).map(bounded_result),
                before: before.as_ref().map(desktop_before),
            })
            .collect();
        if steps.is_empty() {
            return None;
        }
        // The commands every inverse step of which succeeded.
        let undid: Vec<u64> = undo.map_or_else(Vec::new, |run| {
            let mut ids: Vec<u64> = run.reverses.iter().flatten().copied().collect();
            ids.dedup();
            ids.retain(|id| {
                run.reverses
                    .iter()
                    .zip(&outcome.results)
                    .filter(|(of, _)| **of == Some(*id))
                    .all(|(_, r)| r.ok)
            });
            ids
        });
        let mut ring = self.ring.lock().expect("history lock");
        let id = ring.back().map_or(1, |e| e.id + 1);
        let entry = HistoryEntry {
            id,
            time: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            utterance: outcome.utterance.clone(),
            rule: outcome.plan.rule.clone(),
            before: steps[0].before.clone(),
            steps,
            undo: undo.is_some(),
            undid: undid.clone(),
            undone: false,
        };
        if !undid.is_empty() {
            for e in ring.iter_mut().filter(|e| undid.contains(&e.id)) {
                e.undone = true;
            }
        }
        if ring.len() == HistoryEntry::KEPT {
            ring.pop_front();
        }
        ring.push_back(entry);
        Some(id)
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

    /// Wait until no other "undo that" is choosing or running; hold the guard until the
    /// undo is recorded.
    pub async fn undo_guard(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.undo.lock().await
    }

    /// The newest `count` entries an "undo that" reverses, newest first: those not undone
    /// yet and not themselves an undo.
    ///
    /// # Errors
    /// Why there are not `count` of them ("nothing to undo: …").
    pub fn undoable(&self, count: usize) -> Result<Vec<HistoryEntry>, String> {
        self.undoable_since(count, 0)
    }

    /// The id the next entry gets.
    pub fn next_id(&self) -> u64 {
        let ring = self.ring.lock().expect("history lock");
        ring.back().map_or(1, |e| e.id + 1)
    }

    /// [`History::undoable`] among the entries from id `since` on (what dictation typed
    /// since it began: "scratch that" never reaches back before it).
    ///
    /// # Errors
    /// As [`History::undoable`].
    pub fn undoable_since(&self, count: usize, since: u64) -> Result<Vec<HistoryEntry>, String> {
        let ring = self.ring.lock().expect("history lock");
        let found: Vec<HistoryEntry> = ring
            .iter()
            .rev()
            .filter(|e| e.id >= since && !e.undone && !e.undo)
            .take(count)
            .cloned()
            .collect();
        match found.len() {
            0 if ring.is_empty() => {
                Err("nothing to undo: no command has acted since the runner started".to_owned())
            }
            0 => Err(
                "nothing to undo: every command still in the journal was undone already".to_owned(),
            ),
            1 if count > 1 => Err(format!(
                "only the last command can be undone, not {count}; say \"undo that\""
            )),
            n if n < count => Err(format!(
                "only {n} commands can be undone, not {count}; say \"undo the last {n}\""
            )),
            _ => Ok(found),
        }
    }
}

/// A plugin's result as the journal keeps it: whole up to [`MAX_RESULT_BYTES`], else its
/// top-level numbers, booleans and short strings, marked `"truncated": true`.
fn bounded_result(value: Value) -> Value {
    if serde_json::to_string(&value).map_or(0, |t| t.len()) <= MAX_RESULT_BYTES {
        return value;
    }
    let mut kept = serde_json::Map::new();
    if let Value::Object(map) = &value {
        for (key, v) in map.iter().take(64) {
            let small = match v {
                Value::Number(_) | Value::Bool(_) => true,
                Value::String(s) => s.len() <= 256,
                _ => false,
            };
            if small && key.len() <= 64 {
                kept.insert(key.clone(), v.clone());
            }
        }
    }
    kept.insert("truncated".to_owned(), Value::Bool(true));
    Value::Object(kept)
}

/// A step's args as the journal keeps them: whole up to [`MAX_ARGS_BYTES`], else
/// `{"truncated": true}`.
fn bounded_args(args: &Value) -> Value {
    if serde_json::to_string(args).map_or(0, |t| t.len()) <= MAX_ARGS_BYTES {
        args.clone()
    } else {
        json!({"truncated": true})
    }
}

/// `value` without any object field called `title`, at any depth: window titles are
/// written by whatever runs in the window, and an undo must not be built from them.
fn without_titles(mut value: Value) -> Value {
    fn strip(value: &mut Value) {
        match value {
            Value::Object(map) => {
                map.remove("title");
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut value);
    value
}

/// What of a context snapshot the journal keeps: `{compositor, focused: {id, app_id,
/// workspace, workspace_id, output}, workspace: {id, index, name, output}}` (`focused` is
/// `null` when nothing had focus, `workspace` when no workspace is marked focused). Fields
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
    // The focused workspace, for an undo on a desktop where no window had the focus.
    let workspace = snapshot
        .get("workspaces")
        .and_then(Value::as_array)
        .and_then(|all| {
            all.iter()
                .find(|w| w.get("focused") == Some(&Value::Bool(true)))
        })
        .map(|w| {
            let mut kept = serde_json::Map::new();
            for key in ["id", "index", "name", "output"] {
                if let Some(v) = w.get(key).filter(|v| !v.is_null()) {
                    kept.insert(key.to_owned(), v.clone());
                }
            }
            Value::Object(kept)
        });
    json!({
        "compositor": snapshot.pointer("/compositor/name").cloned().unwrap_or(Value::Null),
        "focused": focused,
        "workspace": workspace,
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
            &[Some(before.clone())],
            None,
        );
        // A dry run, a refused plan and a step no plugin offers leave nothing.
        history.record(
            &outcome(
                "workspace four",
                vec![step("niri", true, Some("compositor"), None)],
                true,
            ),
            &[Some(before.clone())],
            None,
        );
        let denied = ErrorObject::new(ErrorCode::Denied, "not run");
        history.record(
            &outcome(
                "x",
                vec![step("niri", false, Some("compositor"), Some(denied))],
                false,
            ),
            &[],
            None,
        );
        let missing = ErrorObject::new(ErrorCode::CapabilityMissing, "no plugin");
        history.record(
            &outcome("y", vec![step("zap", false, None, Some(missing))], false),
            &[],
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
            &[],
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
                "workspace": "2", "workspace_id": 5, "output": "DP-1"}, "workspace": null})
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
                &[],
                None,
            );
        }
        let entries = history.entries(None);
        assert_eq!(entries.len(), HistoryEntry::KEPT);
        assert_eq!(entries[0].utterance, format!("n{}", HistoryEntry::KEPT + 2));
        assert_eq!(entries[0].id, entries[1].id + 1);
    }

    #[test]
    fn an_undo_marks_what_it_undid_and_is_not_itself_undoable() {
        let history = History::new();
        assert!(
            history
                .undoable(1)
                .unwrap_err()
                .contains("no command has acted")
        );
        let mut with_title = step("ensure_app", true, Some("compositor"), None);
        with_title.result =
            Some(json!({"window": {"id": 4, "title": "Inbox - mail"}, "launched": true}));
        let a = history
            .record(&outcome("open foot", vec![with_title], false), &[], None)
            .unwrap();
        let b = history
            .record(
                &outcome(
                    "workspace 2",
                    vec![step("niri", true, Some("compositor"), None)],
                    false,
                ),
                &[],
                None,
            )
            .unwrap();
        let journal = history.entries(None);
        assert_eq!(
            journal[1].steps[0].result,
            Some(json!({"window": {"id": 4}, "launched": true}))
        );
        let two = history.undoable(2).unwrap();
        assert_eq!(two.iter().map(|e| e.id).collect::<Vec<_>>(), vec![b, a]);
        assert!(history.undoable(3).unwrap_err().contains("only 2"));
        history.record(
            &outcome(
                "undo that",
                vec![step("niri", true, Some("compositor"), None)],
                false,
            ),
            &[],
            Some(&UndoRun {
                reverses: vec![Some(b)],
            }),
        );
        let left = history.undoable(1).unwrap();
        assert_eq!(left[0].id, a, "the undo and what it undid are skipped");
        assert!(history.entries(None)[1].undone);
    }

    #[test]
    fn a_snapshot_without_focus_or_compositor_is_kept_as_nulls() {
        assert_eq!(
            desktop_before(&json!({"windows": []})),
            json!({"compositor": null, "focused": null, "workspace": null})
        );
        assert_eq!(
            desktop_before(&json!("garbage")),
            json!({"compositor": null, "focused": null, "workspace": null})
        );
    }

    #[test]
    fn a_failed_undo_marks_nothing_and_an_apps_own_undo_is_not_undone_again() {
        let history = History::new();
        let a = history
            .record(
                &outcome(
                    "workspace 2",
                    vec![step("niri", true, Some("compositor"), None)],
                    false,
                ),
                &[],
                None,
            )
            .unwrap();
        // Its inverse failed at the plugin: the command is still there to undo.
        let failed = ErrorObject::plugin("the window is gone");
        history.record(
            &outcome(
                "undo that",
                vec![step("focus_app", false, Some("compositor"), Some(failed))],
                false,
            ),
            &[],
            Some(&UndoRun {
                reverses: vec![Some(a)],
            }),
        );
        assert_eq!(history.undoable(1).unwrap()[0].id, a);
        assert!(history.entries(Some(1))[0].undid.is_empty());
        // The application's undo chord run instead is an undo too: never reversed itself.
        history.record(
            &outcome(
                "undo that",
                vec![step("key", true, Some("input"), None)],
                false,
            ),
            &[],
            Some(&UndoRun {
                reverses: vec![None],
            }),
        );
        assert_eq!(history.undoable(1).unwrap()[0].id, a);
        // A huge result keeps its small fields only.
        let mut big = step("media", true, Some("desktop"), None);
        big.result =
            Some(json!({"player": "mpv", "level": 0.5, "blob": "x".repeat(MAX_RESULT_BYTES)}));
        history.record(&outcome("pause", vec![big], false), &[], None);
        assert_eq!(
            history.entries(Some(1))[0].steps[0].result,
            Some(json!({"player": "mpv", "level": 0.5, "truncated": true}))
        );
    }
}
