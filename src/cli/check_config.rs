//! `utter check-config [PATH]`: validate a configuration file (by default the one `utter`
//! would use: `--config`, else `$XDG_CONFIG_HOME/utter/config.toml`, else the built-in
//! default) and print its warnings and errors as `file:line: key: message`, or, with
//! `--json`, `{ok, origin, errors, warnings}`; exit 3 when it is invalid. [`load`] is the
//! strict loading the subcommands that start plugins share (`say`, `daemon`, `plugins`,
//! `audio`): warnings go to the log, errors to stderr with a pointer to this command.

use std::path::{Path, PathBuf};
use utter_core::config::{self, ConfigIssue, LoadedConfig};

use super::output::{exit, out};

/// The arguments of `utter check-config`.
#[derive(clap::Args)]
pub struct Args {
    /// The file to check.
    path: Option<PathBuf>,
    /// Print JSON: {ok, origin, errors, warnings}.
    #[arg(long)]
    json: bool,
}

/// Load the configuration at `path` (`None`: the default one), or say why it is invalid.
pub fn load(path: Option<&Path>) -> Option<LoadedConfig> {
    match config::load(path) {
        Ok(loaded) => {
            for warning in &loaded.warnings {
                tracing::warn!("config: {warning}");
            }
            Some(loaded)
        }
        Err(e) => {
            for issue in &e.errors {
                eprintln!("error: {issue}");
            }
            eprintln!(
                "utter: the configuration is invalid; fix it, then check it with `utter check-config`"
            );
            None
        }
    }
}

/// Run `utter check-config`; `config` is `--config`, checked when no PATH is given.
pub fn run(args: Args, config: Option<PathBuf>) -> u8 {
    let path = args.path.or(config);
    let (origin, result) = match config::load(path.as_deref()) {
        Ok(loaded) => (loaded.origin.clone(), Ok(loaded)),
        Err(e) => (
            e.errors.first().map(|i| i.file.clone()).unwrap_or_default(),
            Err(e),
        ),
    };
    let (errors, warnings): (Vec<&ConfigIssue>, Vec<&ConfigIssue>) = match &result {
        Ok(loaded) => (Vec::new(), loaded.warnings.iter().collect()),
        Err(e) => (e.errors.iter().collect(), e.warnings.iter().collect()),
    };
    if args.json {
        let issue_json = |i: &&ConfigIssue| serde_json::json!({"file": i.file, "line": i.line, "key": i.key, "message": i.message});
        let report = serde_json::json!({
            "ok": errors.is_empty(),
            "origin": origin,
            "errors": errors.iter().map(issue_json).collect::<Vec<_>>(),
            "warnings": warnings.iter().map(issue_json).collect::<Vec<_>>(),
        });
        out!("{report:#}");
    } else {
        for w in &warnings {
            out!("warning: {w}");
        }
        for e in &errors {
            out!("error: {e}");
        }
        if errors.is_empty() {
            out!("config OK ({origin})");
        } else {
            out!("config INVALID ({origin})");
        }
    }
    if errors.is_empty() {
        exit::OK
    } else {
        exit::CONFIG
    }
}
