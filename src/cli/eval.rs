//! `utter eval FILE`: run a command corpus (the format of `tests/corpus/commands.toml`,
//! see `plugins/rules/src/eval.rs`) against the configured router, in this process, and
//! print per category how many cases it planned right, the false positives (steps for a
//! case that expects none) and the false escalations (no steps for one that expects some),
//! then every miss. Nothing is checked against the policy and nothing runs: only
//! `router.plan` is called, once per case, in the case's desktop context. `--json` prints
//! `{router, categories, total, misses}`. Exit 0 when every case is right, 1 when one is
//! not, 3 for a file that does not parse or a bad config, 4 when no router runs.

use std::path::{Path, PathBuf};
use utter_core::runner::Runner;
use utter_core::supervisor::SupervisorOptions;
use utter_rules::eval::{self, Report};

use super::check_config;
use super::output::{exit, out, print_json, sanitize};

/// The arguments of `utter eval`.
#[derive(clap::Args)]
pub struct Args {
    /// The corpus: a TOML file of [[case]] tables (category, say, focused?, windows?,
    /// compositor?, expect = [{op, args}], escalate?).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Timeout of each router call, in ms.
    #[arg(long, value_name = "MS")]
    timeout_ms: Option<u64>,
}

/// The largest corpus read, in bytes.
const MAX_CORPUS: u64 = 16 << 20;

fn read_limited(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut text = String::new();
    file.take(MAX_CORPUS + 1)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    if text.len() as u64 > MAX_CORPUS {
        return Err(format!("it is larger than {} MiB", MAX_CORPUS >> 20));
    }
    Ok(text)
}

/// Run `utter eval`; `config` is `--config`.
pub async fn run(args: &Args, config: Option<&Path>) -> u8 {
    let text = match read_limited(&args.file) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("utter eval: cannot read {}: {e}", args.file.display());
            return exit::CONFIG;
        }
    };
    let cases = match eval::parse(&text, &args.file.display().to_string()) {
        Ok(cases) => cases,
        Err(e) => {
            eprintln!("utter eval: {e}");
            return exit::CONFIG;
        }
    };
    let Some(mut loaded) = check_config::load(config) else {
        return exit::CONFIG;
    };
    // Only the router is needed.
    loaded.config = loaded.config.without_voice();
    let options = SupervisorOptions::from_config(&loaded.config);
    let runner = Runner::start(loaded, options, None).await;
    let mut report = Report::default();
    let mut router_id = String::new();
    for case in &cases {
        match runner
            .plan_only(&case.say, Some(case.context()), args.timeout_ms)
            .await
        {
            Ok((router, planned)) => {
                router_id = router;
                report.add(case, eval::judge(case, &planned));
            }
            // No router at all: nothing can be scored.
            Err(e) if e.kind() == utter_protocol::ErrorCode::CapabilityMissing => {
                eprintln!("utter eval: {} [{}]", sanitize(&e.message), e.code);
                runner.shutdown().await;
                return exit::RUNNER;
            }
            // The router refused this one case (too long, blank): a miss, named.
            Err(e) => report.add(
                case,
                eval::Verdict::Wrong(format!(
                    "the router answered error {}: {}",
                    e.code, e.message
                )),
            ),
        }
    }
    runner.shutdown().await;
    if args.json {
        let mut json = report.to_json();
        json["router"] = serde_json::Value::String(router_id);
        print_json(&json);
    } else {
        out!(
            "{} cases of {} against router {}:",
            cases.len(),
            args.file.display(),
            sanitize(&router_id)
        );
        for line in report.table().lines() {
            out!("{line}");
        }
        for miss in &report.misses {
            out!(
                "miss [{}] {:?}{}: {} — {}",
                sanitize(&miss.category),
                sanitize(&miss.say),
                miss.focused
                    .as_ref()
                    .map(|f| format!(" (focused {})", sanitize(f)))
                    .unwrap_or_default(),
                miss.kind,
                sanitize(&miss.detail)
            );
        }
    }
    if report.misses.is_empty() {
        exit::OK
    } else {
        exit::NOT_DONE
    }
}
