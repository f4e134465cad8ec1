//! `utter reload`: make the running service read its configuration again (`runner.reload`)
//! and say which plugins were added, removed, restarted or left alone (or, with `--json`,
//! the report). An invalid file is refused and the running configuration kept: its errors
//! are printed as `file:line: key: message` and the exit code is 3. [`summary`] is the line
//! `utter events` shows for a reload too.

use serde_json::{Value, json};
use utter_ipc::{ErrorCode, ReloadReport};

use super::connect::{Service, call_failed};
use super::output::{exit, out, print_answer};

/// The arguments of `utter reload`.
#[derive(clap::Args)]
pub struct Args {
    /// Print JSON: {added, removed, restarted, unchanged}.
    #[arg(long)]
    json: bool,
}

/// Run `utter reload`.
pub async fn run(args: &Args, service: Service<'_>) -> u8 {
    if let Some(path) = service.config {
        // The service reads the file it was started with; a client cannot hand it another.
        eprintln!(
            "utter reload: note: the service re-reads the config file it was started with; --config {} only tells this command where the service's socket is (to switch files, restart the service with --config)",
            path.display()
        );
    }
    let client = match service.with_json(args.json).connect("reload").await {
        Ok(c) => c,
        Err(code) => return code,
    };
    match client.reload().await {
        Ok(report) => {
            if args.json {
                print_answer(&report);
            } else {
                out!("config reloaded: {}", summary(&report));
            }
            exit::OK
        }
        Err(e) if e.kind() == ErrorCode::InvalidParams => {
            // The error's data is `{errors, warnings}`, each issue `{file, line, key, message}`.
            let errors = e
                .data
                .as_ref()
                .and_then(|d| d["errors"].as_array().cloned())
                .unwrap_or_default();
            if args.json {
                out!("{}", json!({"ok": false, "error": e}));
            }
            for issue in &errors {
                eprintln!("error: {}", issue_line(issue));
            }
            if errors.is_empty() {
                eprintln!("error: {}", e.message);
            }
            eprintln!(
                "utter reload: the configuration is invalid; the service keeps running the one it had (fix it, then check it with `utter check-config`)"
            );
            exit::CONFIG
        }
        Err(e) => call_failed("reload", &e),
    }
}

/// `added a; removed -; restarted -; unchanged b, c`.
pub fn summary(report: &ReloadReport) -> String {
    let ids = |items: &[String]| {
        if items.is_empty() {
            "-".to_owned()
        } else {
            items.join(", ")
        }
    };
    format!(
        "added {}; removed {}; restarted {}; unchanged {}",
        ids(&report.added),
        ids(&report.removed),
        ids(&report.restarted),
        ids(&report.unchanged)
    )
}

/// `file:line: key: message` from one config issue of the refusal's data.
fn issue_line(issue: &Value) -> String {
    let mut line = issue["file"].as_str().unwrap_or("?").to_owned();
    if let Some(n) = issue["line"].as_u64() {
        line.push_str(&format!(":{n}"));
    }
    if let Some(key) = issue["key"].as_str() {
        line.push_str(&format!(": {key}"));
    }
    line.push_str(&format!(": {}", issue["message"].as_str().unwrap_or("")));
    line
}
