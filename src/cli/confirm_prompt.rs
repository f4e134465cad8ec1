//! The terminal confirmation prompt of `utter say`, the one place that asks a person at the
//! terminal. A step that needs confirmation reaches it from the runner `say` starts in this
//! process (as a confirmation [`Door`]) or from the running service (its `host.confirm`
//! request, through a [`ConfirmHandler`]); either way the question is the same line on stderr,
//! `Confirm: SUMMARY (op OP, args ARGS, provenance PROVENANCE) [y/N] `, answered by a line on
//! stdin, and only `y` or `yes` approve. Without a terminal on stdin nobody can answer, so the
//! answer is an immediate no, with a note saying where it could be answered.

use super::output::sanitize;
use serde_json::Value;
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use utter_core::confirm::{Door, PendingConfirmation};
use utter_ipc::{ConfirmHandler, ConfirmRequest};

/// What the person is asked to approve, as it is shown.
struct Question {
    summary: String,
    op: String,
    args: String,
    provenance: String,
}

impl Question {
    fn from_request(request: &ConfirmRequest) -> Question {
        // Everything shown is escaped: a plugin-authored summary or argument must not
        // move the cursor, erase the line or hide text to fake a harmless prompt.
        Question {
            summary: sanitize(&request.summary),
            op: sanitize(&request.op),
            args: sanitize(&request.args.to_string()),
            provenance: request.provenance.to_string(),
        }
    }

    /// From `host.confirm`'s params, `{id, op, args, provenance, summary}`: a string as it
    /// is, other values as JSON, a missing one as `?`.
    fn from_host_confirm(params: &Value) -> Question {
        let field = |key: &str| match params.get(key) {
            Some(Value::String(s)) => s.clone(),
            None | Some(Value::Null) => "?".to_owned(),
            Some(other) => other.to_string(),
        };
        Question {
            summary: sanitize(&field("summary")),
            op: sanitize(&field("op")),
            args: sanitize(&field("args")),
            provenance: sanitize(&field("provenance")),
        }
    }
}

/// The door of the runner `utter say` starts in this process.
pub fn door() -> Door {
    let interactive = std::io::stdin().is_terminal();
    Arc::new(move |pending: PendingConfirmation| {
        Box::pin(async move {
            let question = Question::from_request(&pending.request);
            Some(
                ask(
                    question,
                    interactive,
                    "run it in a terminal, or through the running service",
                )
                .await,
            )
        })
    })
}

/// The answer to the running service's `host.confirm` during `utter say`.
pub fn handler() -> ConfirmHandler {
    let interactive = std::io::stdin().is_terminal();
    Arc::new(move |params: Value| {
        Box::pin(async move {
            let question = Question::from_host_confirm(&params);
            ask(question, interactive, "run it in a terminal to answer").await
        })
    })
}

/// Ask `question` on the terminal, or, when stdin is not one, deny it and say so (`elsewhere`
/// tells where it could be answered).
async fn ask(question: Question, interactive: bool, elsewhere: &str) -> bool {
    if !interactive {
        eprintln!(
            "utter say: {} needs confirmation, but stdin is not a terminal; denied ({elsewhere})",
            question.summary
        );
        return false;
    }
    let prompt = format!(
        "Confirm: {} (op {}, args {}, provenance {}) [y/N] ",
        question.summary, question.op, question.args, question.provenance
    );
    prompt_yes_no(prompt).await
}

/// Ask a yes/no question on the terminal (stderr, then a line from stdin); only `y` or `yes`
/// approve. Runs on the blocking pool: a question the runner withdraws (answered elsewhere,
/// timed out) leaves its reader thread behind, which `main` does not wait for.
async fn prompt_yes_no(prompt: String) -> bool {
    tokio::task::spawn_blocking(move || {
        eprint!("{prompt}");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).is_ok()
            && matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
    })
    .await
    .unwrap_or(false)
}
