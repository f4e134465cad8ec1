//! `utter check-manifest FILE...`: validate plugin manifests (`utter-plugin.toml`) against the
//! protocol's schema (`utter_protocol::manifest`), printing `FILE: OK` or one line per
//! problem, or, with `--json`, `[{path, ok, errors}]`. Every file is checked even after one
//! fails; exit 3 when any of them is invalid.

use std::path::PathBuf;
use utter_protocol::manifest::{Manifest, ManifestError};

use super::output::{exit, out};

/// The arguments of `utter check-manifest`.
#[derive(clap::Args)]
pub struct Args {
    /// Manifest files to check.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Print JSON: [{path, ok, errors}].
    #[arg(long)]
    json: bool,
}

/// Run `utter check-manifest`.
pub fn run(args: &Args) -> u8 {
    let mut all_ok = true;
    let mut reports = Vec::new();
    for path in &args.paths {
        let errors: Vec<String> = match Manifest::from_path(path) {
            Ok(_) => Vec::new(),
            Err(ManifestError::Schema { problems, .. }) => problems,
            Err(e) => vec![e.to_string()],
        };
        all_ok &= errors.is_empty();
        if args.json {
            reports
                .push(serde_json::json!({"path": path, "ok": errors.is_empty(), "errors": errors}));
        } else if errors.is_empty() {
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
