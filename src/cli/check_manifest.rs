//! `utter check-manifest FILE...`: validate plugin manifests (`utter-plugin.toml`) against the
//! protocol's schema (`utter_protocol::manifest`) and the rules the runner applies at start
//! (`Manifest::runner_check`: abi 1, a protocol it speaks, the `subprocess` runtime, a
//! `min_runner` it meets), printing `FILE: OK` or one line per problem, warnings (unknown
//! capabilities, another protocol minor) as `FILE: warning: …`, or, with `--json`,
//! `[{path, ok, errors, warnings}]`. Every file is checked even after one fails; exit 3 when
//! any of them is invalid.

use std::path::PathBuf;
use utter_protocol::manifest::{Manifest, ManifestError};

use super::output::{exit, out};

/// The arguments of `utter check-manifest`.
#[derive(clap::Args)]
pub struct Args {
    /// Manifest files to check.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Print JSON: [{path, ok, errors, warnings}].
    #[arg(long)]
    json: bool,
}

/// Run `utter check-manifest`.
pub fn run(args: &Args) -> u8 {
    let mut all_ok = true;
    let mut reports = Vec::new();
    for path in &args.paths {
        let (errors, warnings): (Vec<String>, Vec<String>) = match Manifest::from_path(path) {
            Ok(manifest) => {
                let check = manifest.runner_check(env!("CARGO_PKG_VERSION"));
                (check.errors, check.warnings)
            }
            Err(ManifestError::Schema { problems, .. }) => (problems, Vec::new()),
            Err(e) => (vec![e.to_string()], Vec::new()),
        };
        all_ok &= errors.is_empty();
        if args.json {
            reports.push(serde_json::json!({
                "path": path, "ok": errors.is_empty(), "errors": errors, "warnings": warnings,
            }));
            continue;
        }
        for w in &warnings {
            out!("{}: warning: {w}", path.display());
        }
        if errors.is_empty() {
            out!("{}: OK", path.display());
        } else {
            for e in &errors {
                out!("{}: {e}", path.display());
            }
        }
    }
    if args.json {
        out!("{}", serde_json::Value::Array(reports));
    }
    if all_ok { exit::OK } else { exit::CONFIG }
}
