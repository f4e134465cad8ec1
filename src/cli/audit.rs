//! `utter audit [--since SECS]`: the running service's recent policy decisions
//! (`runner.audit`), oldest first, one line each: time, decision (allowed, denied, confirmed,
//! reasked, chosen, executed, failed, dry-run), op, exact arguments, provenance, and the error
//! code, the deciding door or chooser and the plugin concerned where there is one; `--json`
//! prints the entries. Exit 0 when the service answered.

use utter_ipc::AuditEntry;

use super::connect::{Service, call_failed};
use super::output::{exit, out, print_answer, sanitize};

/// The arguments of `utter audit`.
#[derive(clap::Args)]
pub struct Args {
    /// Only decisions at or after this time, in Unix seconds (e.g. `$(date -d '-1 hour' +%s)`).
    #[arg(long, value_name = "UNIX_SECONDS")]
    since: Option<u64>,
    /// Print JSON: [{time, utterance, op, args, provenance, decision, code?, by?, plugin?}].
    #[arg(long)]
    json: bool,
}

/// Run `utter audit`.
pub async fn run(args: &Args, service: Service<'_>) -> u8 {
    let client = match service.connect("audit").await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let entries = match client.audit(args.since).await {
        Ok(entries) => entries,
        Err(e) => return call_failed("audit", &e),
    };
    if args.json {
        print_answer(&entries);
        return exit::OK;
    }
    if entries.is_empty() {
        out!("no decisions recorded yet");
    }
    for e in &entries {
        out!("{}", describe(e));
    }
    exit::OK
}

/// `TIME DECISION OP ARGS [PROVENANCE] code=… by=… plugin=…`.
fn describe(e: &AuditEntry) -> String {
    let extra: String = [
        ("code", e.code.map(|c| c.to_string())),
        ("by", e.by.clone()),
        ("plugin", e.plugin.clone()),
    ]
    .into_iter()
    .filter_map(|(key, value)| value.map(|v| format!(" {key}={v}")))
    .collect();
    format!(
        "{} {:<9} {} {} [{}]{extra}",
        e.time,
        e.decision,
        sanitize(&e.op),
        sanitize(&e.args.to_string()),
        e.provenance
    )
}
