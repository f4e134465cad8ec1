//! `utter check-config [PATH]`: validate a configuration file (by default the one `utter`
//! would use: `--config`, else `$XDG_CONFIG_HOME/utter/config.toml`, else the built-in
//! default) and print its warnings and errors as `file:line: key: message`, or, with
//! `--json`, `{ok, origin, errors, warnings}`; exit 3 when it is invalid. [`load`] is the
//! strict loading the subcommands that start plugins share (`say`, `daemon`, `plugins`,
//! `audio`): warnings go to the log, errors to stderr with a pointer to this command.

use std::path::{Path, PathBuf};
use utter_core::config::{self, ConfigIssue, LoadedConfig};
use utter_core::supervisor::{ProgramProblem, program_problem, resolve_program};

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
            let check = match path {
                Some(path) => format!("utter --config {} check-config", path.display()),
                None => "utter check-config".to_owned(),
            };
            eprintln!("utter: the configuration is invalid; fix it, then check it with `{check}`");
            None
        }
    }
}

/// The configured speech plugins (kind `stt`, and the microphone of kind `audio`) that are
/// not started because the speech model `[stt] model` names is not installed, with why:
/// `None` when the model is there or no such plugin is configured.
pub fn waiting_for_model(config: &config::Config) -> Option<(Vec<String>, String)> {
    let enabled = |p: &&config::PluginEntry| p.enabled && !config.plugins.disabled.contains(&p.id);
    if !config
        .plugin
        .iter()
        .filter(enabled)
        .any(|p| p.kind == "stt")
    {
        return None;
    }
    let why = config.stt.missing_model()?;
    let ids = config
        .plugin
        .iter()
        .filter(enabled)
        .filter(|p| p.kind == "stt" || (p.kind == "audio" && !config.start_capture))
        .map(|p| p.id.clone())
        .collect();
    Some((ids, format!("{why}; until then voice is off")))
}

/// The errors and warnings about the programs the active plugins of `loaded` name.
fn entrypoint_issues(loaded: &LoadedConfig) -> (Vec<ConfigIssue>, Vec<ConfigIssue>) {
    let (mut errors, mut warnings) = (Vec::new(), Vec::new());
    let config = &loaded.config;
    if let Some((ids, why)) = waiting_for_model(config) {
        warnings.push(ConfigIssue {
            file: loaded.origin.clone(),
            line: None,
            key: Some("stt.model".into()),
            message: format!("plugins {} will not start: {why}", ids.join(", ")),
        });
    }
    if !config.plugin.is_empty() && !config.runs_a_router() {
        warnings.push(ConfigIssue {
            file: loaded.origin.clone(),
            line: None,
            key: Some("plugin".into()),
            message: "no [[plugin]] of kind \"router\" runs: every command will fail with \"no router plugin is running\" (and `utter reload` refuses this config); the built-in one is [[plugin]] id = \"rules\", kind = \"router\", entrypoint = [\"utter\", \"plugin\", \"rules\"]".into(),
        });
    }
    for entry in config.active_plugins() {
        let Some(problem) = program_of(entry) else {
            continue;
        };
        let index = config
            .plugin
            .iter()
            .position(|p| p.id == entry.id)
            .unwrap_or_default();
        let issue = |message: String| ConfigIssue {
            file: loaded.origin.clone(),
            line: None,
            key: Some(format!("plugin[{index}].entrypoint")),
            message: format!("plugin {:?}: {message}", entry.id),
        };
        match problem {
            ProgramProblem::Unstartable(why) => errors.push(issue(why)),
            // The built-in plugins (the file names none of its own) are each optional: one
            // that is not installed is no fault of the file (`utter doctor` and `utter
            // plugins` say how to install it).
            ProgramProblem::Missing(_) if config.plugins_inherited => {}
            ProgramProblem::Missing(why) => warnings.push(issue(why)),
        }
    }
    (errors, warnings)
}

/// The ids of the built-in plugins (a config that names no plugins of its own) whose
/// program is not installed; empty for a config with its own `[[plugin]]` entries.
pub fn default_plugins_not_installed(config: &utter_core::config::Config) -> Vec<String> {
    if !config.plugins_inherited {
        return Vec::new();
    }
    config
        .active_plugins()
        .filter(|entry| matches!(program_of(entry), Some(ProgramProblem::Missing(_))))
        .map(|entry| entry.id.clone())
        .collect()
}

/// What keeps the program a plugin entry names from starting (looked up as the supervisor
/// does), if anything.
fn program_of(entry: &utter_core::config::PluginEntry) -> Option<ProgramProblem> {
    let argv = entry.entrypoint.argv();
    program_problem(&resolve_program(argv.first()?, None))
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
    // The entrypoints of the plugins it would start: a program that can never run (a
    // directory, no execute permission, a dangling link) is an error, one not installed
    // yet a warning that names the fix.
    let programs = match &result {
        Ok(loaded) => entrypoint_issues(loaded),
        Err(_) => (Vec::new(), Vec::new()),
    };
    let (mut errors, mut warnings): (Vec<&ConfigIssue>, Vec<&ConfigIssue>) = match &result {
        Ok(loaded) => (Vec::new(), loaded.warnings.iter().collect()),
        Err(e) => (e.errors.iter().collect(), e.warnings.iter().collect()),
    };
    errors.extend(programs.0.iter());
    warnings.extend(programs.1.iter());
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
