//! `utter pending`: list the confirmations the running service is waiting for
//! (`runner.pending`), each with its id, summary, op, exact arguments, provenance and the
//! seconds left before it times out, and how to answer one (`utter confirm ID yes|no`);
//! `--json` prints the list. Exit 0 when the service answered.

use std::time::{SystemTime, UNIX_EPOCH};

use super::connect::{Service, call_failed};
use super::output::{exit, out, print_answer, sanitize};

/// The arguments of `utter pending`.
#[derive(clap::Args)]
pub struct Args {
    /// Print JSON: [{id, op, args, provenance, summary, created, expires}].
    #[arg(long)]
    json: bool,
}

/// Run `utter pending`.
pub async fn run(args: &Args, service: Service<'_>) -> u8 {
    let client = match service.with_json(args.json).connect("pending").await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let list = match client.pending().await {
        Ok(list) => list,
        Err(e) => return call_failed("pending", &e),
    };
    if args.json {
        print_answer(&list);
        return exit::OK;
    }
    if list.is_empty() {
        out!("no confirmations are pending");
        return exit::OK;
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    for p in &list {
        let r = &p.request;
        out!("{}  {}", sanitize(&p.id), sanitize(&r.summary));
        out!(
            "    op {}, args {}, provenance {}, expires in {} s",
            sanitize(&r.op),
            sanitize(&r.args.to_string()),
            r.provenance,
            p.expires.saturating_sub(now)
        );
    }
    out!("answer with: utter confirm ID yes|no");
    exit::OK
}
