//! `utter history [--limit N]`: what the running service did (`runner.history`), newest
//! first: each command that acted, with its steps (ok or failed, verified or not) and the
//! window that was focused before it. `--json` prints the entries (times in Unix seconds).
//! Exit 0 when the service answered.

use utter_ipc::HistoryEntry;

use super::audit::local_time;
use super::connect::{Service, call_failed};
use super::output::{exit, out, print_answer, sanitize};

/// The arguments of `utter history`.
#[derive(clap::Args)]
pub struct Args {
    /// Only the last N commands (the service keeps 50).
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Print JSON: [{time, utterance, rule?, steps: [{op, args, ok, verified?, detail,
    /// plugin?}], before: {compositor, focused: {id, app_id, workspace, workspace_id,
    /// output}} | null}], newest first.
    #[arg(long)]
    json: bool,
}

/// Run `utter history`.
pub async fn run(args: &Args, service: Service<'_>) -> u8 {
    let client = match service.with_json(args.json).connect("history").await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let entries = match client.history(args.limit).await {
        Ok(entries) => entries,
        Err(e) => return call_failed("history", &e),
    };
    if args.json {
        print_answer(&entries);
        return exit::OK;
    }
    if entries.is_empty() {
        out!("nothing done yet (dry runs and refused commands are not kept)");
    }
    let tz = jiff::tz::TimeZone::system();
    for e in &entries {
        for line in describe(e, &tz) {
            out!("{line}");
        }
    }
    exit::OK
}

/// `#ID TIME "utterance" (before: app_id on workspace W) [undone | undid #N]`, then one
/// indented line per step.
fn describe(e: &HistoryEntry, tz: &jiff::tz::TimeZone) -> Vec<String> {
    let before = e
        .before
        .as_ref()
        .and_then(|b| b.get("focused"))
        .filter(|f| f.is_object())
        .map(|f| {
            let app = f["app_id"].as_str().unwrap_or("a window");
            match f.get("workspace").filter(|w| !w.is_null()) {
                Some(w) => format!(
                    " (before: {} on workspace {})",
                    sanitize(app),
                    sanitize(&w.to_string().replace('"', ""))
                ),
                None => format!(" (before: {})", sanitize(app)),
            }
        })
        .unwrap_or_default();
    // What "undo that" did and will skip.
    let mark = if !e.undid.is_empty() {
        let ids: Vec<String> = e.undid.iter().map(|id| format!("#{id}")).collect();
        format!(" [undid {}]", ids.join(", "))
    } else if e.undone {
        " [undone]".to_owned()
    } else {
        String::new()
    };
    let mut lines = vec![format!(
        "#{} {} {:?}{before}{mark}",
        e.id,
        local_time(e.time, tz),
        sanitize(&e.utterance)
    )];
    for step in &e.steps {
        let how = match (step.ok, step.verified) {
            (false, _) => "failed",
            (true, Some(true)) => "done, verified",
            (true, Some(false)) => "done, not verified",
            (true, None) => "done",
        };
        lines.push(format!(
            "  {} {}: {how}: {}",
            sanitize(&step.op),
            sanitize(&step.args.to_string()),
            sanitize(&step.detail)
        ));
    }
    lines
}
