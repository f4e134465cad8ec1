//! `utter plugin check [--json] [--manifest FILE] [--timeout-secs N] -- CMD ARGS…`: run a
//! plugin and check it against the plugin protocol, saying what to fix.
//!
//! The checks are `utter_protocol::testkit::conformance` (this needs `utter-protocol` with
//! its `testkit` feature). Output: one line per check (`ok`, `FAIL` or `skip`, the check id
//! and its title; a failure adds what was seen and the fix, a skip why), then a summary
//! line. `--json` prints the report instead: `{command, plugin, manifest, ok, passed, failed,
//! skipped, checks: [{id, title, status, ok, detail, fix?}], stderr}`.
//!
//! Exit codes: 0 every check passed (skipped ones do not count), 1 a check failed, 2 a usage
//! error (no command, a program that cannot be found, a missing manifest, a zero timeout).

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use super::output::sanitize;
use utter_protocol::testkit::conformance::{self, CheckOptions, Report, Status};

/// Arguments of `utter plugin check`.
#[derive(Debug, Clone, clap::Args)]
pub struct CheckArgs {
    /// Print the report as JSON: {command, plugin, manifest, ok, passed, failed, skipped,
    /// checks: [{id, title, status, ok, detail, fix?}], stderr}.
    #[arg(long)]
    pub json: bool,
    /// The plugin's manifest, compared with its hello (default: utter-plugin.toml next to
    /// the program, if there is one).
    #[arg(long, value_name = "FILE")]
    pub manifest: Option<PathBuf>,
    /// The bound on every wait: each request, and the exit after stdin closes.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub timeout_secs: u64,
    /// The plugin's command line, after `--`: the program and its arguments.
    ///
    /// Example: utter plugin check --manifest plugins/fake_rs/utter-plugin.toml -- target/debug/fake_rs
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

const EXIT_OK: u8 = 0;
const EXIT_FAILED: u8 = 1;
const EXIT_USAGE: u8 = 2;

fn usage_error(message: &str) -> u8 {
    let _ = writeln!(std::io::stderr(), "utter plugin check: {message}");
    EXIT_USAGE
}

/// Run the checks and print the result; see the module documentation for the exit codes.
pub async fn run(args: CheckArgs) -> u8 {
    let Some(program) = args.command.first() else {
        return usage_error(
            "give the plugin's command line after `--`, e.g. `-- ./my-plugin --flag`",
        );
    };
    if conformance::resolve_program(program, None).is_none() {
        return usage_error(&format!(
            "{} is not an executable file (nor a program on PATH)",
            program.to_string_lossy()
        ));
    }
    if let Some(manifest) = &args.manifest {
        if !manifest.is_file() {
            return usage_error(&format!("--manifest {}: no such file", manifest.display()));
        }
    }
    if args.timeout_secs == 0 {
        return usage_error("--timeout-secs must be at least 1");
    }
    let options = CheckOptions {
        manifest: args.manifest.clone(),
        timeout: Duration::from_secs(args.timeout_secs),
        ..Default::default()
    };
    let report = conformance::check(&args.command, &options).await;
    let printed = if args.json {
        print_json(&report)
    } else {
        print_text(&report)
    };
    if printed.is_err() {
        // Nowhere left to say it; the exit code still tells.
        return EXIT_FAILED;
    }
    if report.ok { EXIT_OK } else { EXIT_FAILED }
}

fn print_json(report: &Report) -> std::io::Result<()> {
    let text =
        utter_protocol::serde_json::to_string_pretty(report).map_err(std::io::Error::other)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()
}

fn print_text(report: &Report) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    let who = match &report.plugin {
        Some(p) if !p.name.is_empty() => format!("{} {}", p.name, p.version),
        _ => report.command.first().cloned().unwrap_or_default(),
    };
    // What the plugin said is shown escaped: it must not drive the terminal.
    let who = sanitize(&who);
    writeln!(
        out,
        "checking {who}: {}",
        sanitize(&report.command.join(" "))
    )?;
    if let Some(manifest) = &report.manifest {
        writeln!(out, "manifest: {manifest}")?;
    }
    let width = report.checks.iter().map(|c| c.id.len()).max().unwrap_or(0);
    for check in &report.checks {
        match check.status {
            Status::Pass => writeln!(out, "ok    {:width$}  {}", check.id, check.title)?,
            Status::Skip => writeln!(
                out,
                "skip  {:width$}  {} (skipped: {})",
                check.id,
                check.title,
                sanitize(&check.detail)
            )?,
            Status::Fail => {
                writeln!(out, "FAIL  {:width$}  {}", check.id, check.title)?;
                writeln!(
                    out,
                    "      {:width$}  seen: {}",
                    "",
                    sanitize(&check.detail)
                )?;
                if let Some(fix) = &check.fix {
                    writeln!(out, "      {:width$}  fix:  {fix}", "")?;
                }
            }
        }
    }
    let verdict = if report.ok {
        "conforms"
    } else {
        "does not conform"
    };
    writeln!(out, "{}: {verdict}", report.summary())?;
    out.flush()?;
    if !report.ok && !report.stderr.trim().is_empty() {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "the plugin's stderr (the end):");
        for line in report.stderr.trim_end().lines() {
            let _ = writeln!(err, "{}", sanitize(line));
        }
    }
    Ok(())
}
