//! Command corpora: utterances in a desktop context with the steps a router should plan,
//! scored per category. The project's own corpus is `tests/corpus/commands.toml`; `utter
//! eval FILE` runs any file of this form against the configured router, and the rules
//! plugin's tests run the project's against this router.
//!
//! ```toml
//! [[case]]
//! category = "browser"          # any name; the report has one row per category
//! say = "open a new tab"
//! focused = "firefox"           # the focused window's app_id (optional)
//! windows = ["foot"]            # more open windows' app_ids (optional)
//! compositor = "niri"           # the context's compositor (default niri)
//! expect = [{ op = "key", args = { chord = "ctrl+t" } }]
//! # expect = [] (or no expect) is a negative: nothing may be planned;
//! # escalate = "needs_browser" then also checks the plan's escalate.reason.
//! ```
//!
//! A plan is right when it has exactly the expected steps in order, each with the expected
//! op and at least the expected args (equal values; args the case does not name may be
//! anything). A case expecting steps that gets none is a false escalation; a negative that
//! gets steps is a false positive.

use serde::Deserialize;
use std::collections::BTreeMap;
use utter_protocol::serde_json::{self, Value, json};

/// One case of a corpus.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// The report row it counts in.
    pub category: String,
    /// The utterance.
    pub say: String,
    /// The focused window's `app_id`.
    #[serde(default)]
    pub focused: Option<String>,
    /// Other open windows' `app_id`s.
    #[serde(default)]
    pub windows: Vec<String>,
    /// The compositor the context names (default `niri`).
    #[serde(default)]
    pub compositor: Option<String>,
    /// The steps expected; empty for a negative.
    #[serde(default)]
    pub expect: Vec<Expected>,
    /// For a negative: the escalation reason expected.
    #[serde(default)]
    pub escalate: Option<String>,
    /// A note for people.
    #[serde(default)]
    pub note: Option<String>,
}

/// One expected step.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Expected {
    /// Its op.
    pub op: String,
    /// Args it must have (a subset of the planned ones).
    #[serde(default)]
    pub args: toml::Table,
    /// The step's `confirm`, when the case cares (the decision head's ask tier is
    /// `confirm = true`).
    #[serde(default)]
    pub confirm: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    case: Vec<Case>,
}

/// Read a corpus; `source` names it in errors.
///
/// # Errors
/// `source: <the TOML parser's message, with line and column>`, or an empty corpus.
pub fn parse(text: &str, source: &str) -> Result<Vec<Case>, String> {
    let file: File = toml::from_str(text).map_err(|e| format!("{source}: {e}"))?;
    if file.case.is_empty() {
        return Err(format!("{source}: no [[case]] tables"));
    }
    Ok(file.case)
}

impl Case {
    /// The desktop context the case is planned in (the compositor plugin's snapshot shape).
    pub fn context(&self) -> Value {
        let compositor = self.compositor.as_deref().unwrap_or("niri");
        let mut windows: Vec<Value> = Vec::new();
        let mut id = 1;
        let mut window = |app_id: &str| {
            let w = json!({"id": id, "app_id": app_id});
            id += 1;
            w
        };
        let focused = self.focused.as_deref().map(&mut window);
        if let Some(f) = &focused {
            windows.push(f.clone());
        }
        for app_id in &self.windows {
            windows.push(window(app_id));
        }
        json!({
            "compositor": {"name": compositor},
            "focused": focused,
            "windows": windows,
        })
    }

    /// Whether nothing may be planned.
    pub fn is_negative(&self) -> bool {
        self.expect.is_empty()
    }
}

/// How a plan fared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// As expected.
    Right,
    /// Steps, but not the expected ones (why).
    Wrong(String),
    /// Steps where none were expected.
    FalsePositive(String),
    /// No steps where some were expected (the plan's message).
    FalseEscalation(String),
}

/// Judge a router's `router.plan` answer for `case`.
pub fn judge(case: &Case, planned: &Value) -> Verdict {
    let steps = planned
        .get("steps")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let shown = |steps: &[Value]| {
        steps
            .iter()
            .map(|s| format!("{} {}", s["op"].as_str().unwrap_or("?"), s["args"]))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if case.is_negative() {
        if !steps.is_empty() {
            return Verdict::FalsePositive(shown(&steps));
        }
        if let Some(want) = &case.escalate {
            let got = planned
                .pointer("/escalate/reason")
                .and_then(Value::as_str)
                .unwrap_or("(none)");
            if got != want {
                return Verdict::Wrong(format!("escalate.reason {got}, expected {want}"));
            }
        }
        return Verdict::Right;
    }
    if steps.is_empty() {
        return Verdict::FalseEscalation(
            planned
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("no steps")
                .to_owned(),
        );
    }
    if steps.len() != case.expect.len() {
        return Verdict::Wrong(format!(
            "{} steps ({}), expected {}",
            steps.len(),
            shown(&steps),
            case.expect.len()
        ));
    }
    for (i, (step, want)) in steps.iter().zip(&case.expect).enumerate() {
        let op = step.get("op").and_then(Value::as_str).unwrap_or("");
        if op != want.op {
            return Verdict::Wrong(format!(
                "step {}: {} (expected op {})",
                i + 1,
                shown(std::slice::from_ref(step)),
                want.op
            ));
        }
        if let Some(want) = want.confirm {
            let got = step
                .get("confirm")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            if got != want {
                return Verdict::Wrong(format!(
                    "step {}: {} has confirm {got}, expected {want}",
                    i + 1,
                    shown(std::slice::from_ref(step))
                ));
            }
        }
        let args = step.get("args").cloned().unwrap_or(Value::Null);
        for (key, value) in &want.args {
            let want_value = serde_json::to_value(value).unwrap_or(Value::Null);
            if args.get(key) != Some(&want_value) {
                return Verdict::Wrong(format!(
                    "step {}: {} (expected {key} = {want_value})",
                    i + 1,
                    shown(std::slice::from_ref(step))
                ));
            }
        }
    }
    Verdict::Right
}

/// One row of the report.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Row {
    /// Cases.
    pub cases: usize,
    /// Right ones.
    pub right: usize,
    /// Negatives that got steps.
    pub false_positives: usize,
    /// Positives that got none.
    pub false_escalations: usize,
}

impl Row {
    /// Right ones in percent.
    pub fn accuracy(&self) -> f64 {
        if self.cases == 0 {
            0.0
        } else {
            100.0 * self.right as f64 / self.cases as f64
        }
    }
}

/// A wrong case, for the report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Miss {
    /// Its category.
    pub category: String,
    /// The utterance.
    pub say: String,
    /// The focused app_id.
    pub focused: Option<String>,
    /// `wrong`, `false_positive` or `false_escalation`.
    pub kind: &'static str,
    /// What was planned or said.
    pub detail: String,
}

/// The per-category table and the misses.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Report {
    /// Category → row, in name order.
    pub categories: BTreeMap<String, Row>,
    /// Every case that was not right.
    pub misses: Vec<Miss>,
}

impl Report {
    /// Count one case.
    pub fn add(&mut self, case: &Case, verdict: Verdict) {
        let row = self.categories.entry(case.category.clone()).or_default();
        row.cases += 1;
        let (kind, detail) = match verdict {
            Verdict::Right => {
                row.right += 1;
                return;
            }
            Verdict::Wrong(d) => ("wrong", d),
            Verdict::FalsePositive(d) => {
                row.false_positives += 1;
                ("false_positive", d)
            }
            Verdict::FalseEscalation(d) => {
                row.false_escalations += 1;
                ("false_escalation", d)
            }
        };
        self.misses.push(Miss {
            category: case.category.clone(),
            say: case.say.clone(),
            focused: case.focused.clone(),
            kind,
            detail,
        });
    }

    /// All categories together.
    pub fn total(&self) -> Row {
        let mut total = Row::default();
        for row in self.categories.values() {
            total.cases += row.cases;
            total.right += row.right;
            total.false_positives += row.false_positives;
            total.false_escalations += row.false_escalations;
        }
        total
    }

    /// The table for people: one line per category and a total.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{:<14} {:>6} {:>6} {:>9} {:>10} {:>11}\n",
            "category", "cases", "right", "accuracy", "false pos", "false escal"
        );
        let line = |name: &str, r: &Row| {
            format!(
                "{:<14} {:>6} {:>6} {:>8.1}% {:>10} {:>11}\n",
                name,
                r.cases,
                r.right,
                r.accuracy(),
                r.false_positives,
                r.false_escalations
            )
        };
        for (name, row) in &self.categories {
            out.push_str(&line(name, row));
        }
        out.push_str(&line("total", &self.total()));
        out
    }

    /// The report as JSON: `{categories: {name: row + accuracy}, total, misses}`.
    pub fn to_json(&self) -> Value {
        let row = |r: &Row| {
            let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
            v["accuracy"] = json!((r.accuracy() * 10.0).round() / 10.0);
            v
        };
        json!({
            "categories": self.categories.iter().map(|(k, r)| (k.clone(), row(r))).collect::<serde_json::Map<_, _>>(),
            "total": row(&self.total()),
            "misses": self.misses,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(text: &str) -> Case {
        parse(text, "t.toml").unwrap().remove(0)
    }

    #[test]
    fn judging_counts_subsets_order_and_negatives() {
        let c = case(
            "[[case]]\ncategory = \"x\"\nsay = \"new tab\"\nfocused = \"firefox\"\nexpect = [{ op = \"key\", args = { chord = \"ctrl+t\" } }]\n",
        );
        assert_eq!(c.context()["focused"]["app_id"], "firefox");
        let plan = |steps: Value| json!({"steps": steps, "message": "m"});
        assert_eq!(
            judge(
                &c,
                &plan(json!([{"op": "key", "args": {"chord": "ctrl+t", "app": "x"}}]))
            ),
            Verdict::Right
        );
        assert!(matches!(
            judge(
                &c,
                &plan(json!([{"op": "key", "args": {"chord": "ctrl+n"}}]))
            ),
            Verdict::Wrong(_)
        ));
        assert!(matches!(
            judge(&c, &plan(json!([]))),
            Verdict::FalseEscalation(_)
        ));
        let n = case("[[case]]\ncategory = \"n\"\nsay = \"hello\"\nescalate = \"no_rule\"\n");
        assert!(matches!(
            judge(&n, &plan(json!([{"op": "key", "args": {}}]))),
            Verdict::FalsePositive(_)
        ));
        assert_eq!(
            judge(&n, &json!({"steps": [], "escalate": {"reason": "no_rule"}})),
            Verdict::Right
        );
        let mut report = Report::default();
        report.add(&c, Verdict::Right);
        report.add(&n, Verdict::FalsePositive("key".into()));
        assert_eq!(report.total().cases, 2);
        assert!(report.table().contains("total"));
        assert_eq!(report.to_json()["total"]["false_positives"], 1);
    }

    #[test]
    fn bad_corpora_are_refused_with_the_line() {
        assert!(parse("", "e.toml").unwrap_err().contains("no [[case]]"));
        let e = parse("[[case]]\ncategory = \"x\"\nsay = 1\n", "e.toml").unwrap_err();
        assert!(e.contains("line 3"), "{e}");
        let e = parse(
            "[[case]]\ncategory = \"x\"\nsay = \"a\"\nfocus = \"y\"\n",
            "e.toml",
        )
        .unwrap_err();
        assert!(e.contains("focus"), "{e}");
    }
}
