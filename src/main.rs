//! `utter`: the command-line face of the runner.

use clap::{Args, Parser, Subcommand};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use tracing_subscriber::EnvFilter;
use utter::config::{self, ConfigIssue, LoadedConfig};
use utter::confirm::{Door, PendingConfirmation};
use utter::pipeline::{CommandOptions, CommandOutcome};
use utter::runner::Runner;
use utter::supervisor::{PluginReport, SupervisorOptions};

/// Set when writing to stdout failed (a closed pipe, a full disk): reported as exit code 4.
static STDOUT_FAILED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `println!` that never panics: a failed write is remembered, not fatal, so the plugins are
/// still shut down properly.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if writeln!(std::io::stdout(), $($arg)*).is_err() {
            STDOUT_FAILED.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }};
}

/// Exit codes, as listed in `utter --help`.
mod exit {
    pub const OK: u8 = 0;
    pub const NOT_DONE: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const CONFIG: u8 = 3;
    pub const RUNNER: u8 = 4;
}

const EXIT_CODES: &str = "\
Exit codes:
  0  success: every step ran (or, with --dry-run, would run)
  1  nothing was done: no rule matched, or a step failed or was denied
  2  usage error (bad arguments, empty utterance)
  3  the configuration (or a manifest given to check-manifest) is invalid
  4  the runner could not do its job (no router running, a plugin failed)

Configuration: --config PATH, else $XDG_CONFIG_HOME/utter/config.toml, else the built-in
default (which runs the `rules` router and the `desktop` action plugin).
Logs go to stderr; set the level with --log-level or RUST_LOG.";

/// Utter: say what you want, and the desktop does it.
///
/// The runner supervises plugins (a router that turns an utterance into steps, action
/// plugins that carry them out) and checks every step against its policy first.
#[derive(Parser)]
#[command(name = "utter", version, after_help = EXIT_CODES, propagate_version = true)]
struct Cli {
    /// Runner configuration file (TOML).
    #[arg(long, global = true, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Log level for stderr: error, warn, info, debug or trace (default: warn; info for `daemon`).
    #[arg(long, global = true, value_name = "LEVEL")]
    log_level: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one utterance: plan it with the router, check it, and act on it.
    ///
    /// Example: utter say "open youtube" --dry-run
    Say(SayArgs),
    /// Run the runner as a session service in the foreground: the client socket, the D-Bus
    /// object dev.utter.Runner1, SIGHUP reloads the config, SIGTERM/SIGINT stop it.
    Daemon {
        /// Client socket path (default: $XDG_RUNTIME_DIR/utter/runner.sock).
        #[arg(long, value_name = "PATH")]
        socket: Option<PathBuf>,
        /// Do not connect to the D-Bus session bus.
        #[arg(long)]
        no_dbus: bool,
    },
    /// Start the configured plugins, show their state, and stop them.
    Plugins {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Serve a built-in plugin on stdin/stdout (the runner starts these; see the config).
    ///
    /// The built-in plugins are compiled into this binary, so one installed `utter` carries
    /// them; each still runs as its own process and speaks the plugin protocol.
    Plugin {
        /// `rules` (the rules router) or `desktop` (the desktop actions).
        name: BuiltinPlugin,
        /// Arguments for the plugin (e.g. `--sites FILE` for rules).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Validate plugin manifests (utter-plugin.toml) against the protocol's schema.
    CheckManifest {
        /// Manifest files to check.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Print JSON: [{path, ok, errors}].
        #[arg(long)]
        json: bool,
    },
    /// Validate a configuration file (default: the one `utter` would use).
    CheckConfig {
        /// The file to check.
        path: Option<PathBuf>,
        /// Print JSON: {ok, origin, errors, warnings}.
        #[arg(long)]
        json: bool,
    },
}

/// The plugins compiled into `utter`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum BuiltinPlugin {
    /// The deterministic rules router.
    Rules,
    /// Open URLs, launch applications, control media players.
    Desktop,
}

#[derive(Args)]
struct SayArgs {
    /// What to do, e.g. "open youtube", "pause", "launch calculator".
    utterance: String,
    /// Plan and check, and let the action plugins say what they would do, without doing it.
    #[arg(long)]
    dry_run: bool,
    /// Print the plan and results as one JSON object.
    #[arg(long)]
    json: bool,
    /// Timeout of each plugin call, in ms (at most 60000).
    #[arg(long, value_name = "MS")]
    timeout_ms: Option<u64>,
}

fn init_logging(level: Option<&str>, default: &str) {
    let filter = match level {
        Some(level) => EnvFilter::new(level),
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default)),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let plugin_mode = matches!(cli.command, Command::Plugin { .. });
    let default_level = if matches!(cli.command, Command::Daemon { .. }) {
        "info"
    } else {
        "warn"
    };
    if !plugin_mode {
        // A built-in plugin logs on its own terms (its stderr is the runner's log).
        init_logging(cli.log_level.as_deref(), default_level);
    }
    // One thread: the runner only moves small frames between processes, and a cross-thread
    // wake-up per hop doubled the plugin round trip in `benches/roundtrip.rs`. Blocking work
    // (terminal prompts) goes to tokio's blocking pool.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("utter: cannot start the async runtime: {e}");
            return ExitCode::from(exit::RUNNER);
        }
    };
    let code = runtime.block_on(run(cli));
    if STDOUT_FAILED.load(std::sync::atomic::Ordering::Relaxed) && code == exit::OK {
        return ExitCode::from(exit::RUNNER);
    }
    ExitCode::from(code)
}

async fn run(cli: Cli) -> u8 {
    match cli.command {
        Command::CheckConfig { path, json } => check_config(path.or(cli.config), json),
        Command::CheckManifest { paths, json } => check_manifests(&paths, json),
        Command::Plugin { name, args } => {
            let code = match name {
                BuiltinPlugin::Rules => utter_rules::run(args).await,
                BuiltinPlugin::Desktop => utter_desktop::run(true).await,
            };
            if code == ExitCode::SUCCESS {
                exit::OK
            } else {
                exit::RUNNER
            }
        }
        Command::Say(args) => {
            if args.utterance.trim().is_empty() {
                eprintln!(
                    "utter say: the utterance is empty; say what to do, e.g. utter say \"open youtube\""
                );
                return exit::USAGE;
            }
            let Some(loaded) = load_config(cli.config.as_deref()) else {
                return exit::CONFIG;
            };
            say(loaded, cli.config, args).await
        }
        Command::Daemon { socket, no_dbus } => {
            let Some(loaded) = load_config(cli.config.as_deref()) else {
                return exit::CONFIG;
            };
            daemon(
                loaded,
                utter::daemon::DaemonOptions {
                    config_path: cli.config,
                    socket_path: socket,
                    no_dbus,
                },
            )
            .await
        }
        Command::Plugins { json } => {
            let Some(loaded) = load_config(cli.config.as_deref()) else {
                return exit::CONFIG;
            };
            plugins(loaded, json).await
        }
    }
}

fn load_config(path: Option<&std::path::Path>) -> Option<LoadedConfig> {
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

fn check_config(path: Option<PathBuf>, json: bool) -> u8 {
    let (origin, result) = match config::load(path.as_deref()) {
        Ok(loaded) => (loaded.origin.clone(), Ok(loaded)),
        Err(e) => (
            e.errors.first().map(|i| i.file.clone()).unwrap_or_default(),
            Err(e),
        ),
    };
    let issue_json = |i: &ConfigIssue| serde_json::json!({"file": i.file, "line": i.line, "key": i.key, "message": i.message});
    let (errors, warnings): (Vec<&ConfigIssue>, Vec<&ConfigIssue>) = match &result {
        Ok(loaded) => (Vec::new(), loaded.warnings.iter().collect()),
        Err(e) => (e.errors.iter().collect(), e.warnings.iter().collect()),
    };
    if json {
        let out = serde_json::json!({
            "ok": errors.is_empty(),
            "origin": origin,
            "errors": errors.iter().map(|i| issue_json(i)).collect::<Vec<_>>(),
            "warnings": warnings.iter().map(|i| issue_json(i)).collect::<Vec<_>>(),
        });
        out!("{out:#}");
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

fn check_manifests(paths: &[PathBuf], json: bool) -> u8 {
    use utter_protocol::manifest::{Manifest, ManifestError};
    let mut all_ok = true;
    let mut out = Vec::new();
    for path in paths {
        let result = Manifest::from_path(path);
        let errors: Vec<String> = match &result {
            Ok(_) => Vec::new(),
            Err(ManifestError::Schema { problems, .. }) => problems.clone(),
            Err(e) => vec![e.to_string()],
        };
        all_ok &= errors.is_empty();
        if json {
            out.push(serde_json::json!({"path": path, "ok": errors.is_empty(), "errors": errors}));
        } else if errors.is_empty() {
            out!("{}: OK", path.display());
        } else {
            for e in &errors {
                out!("{}: {e}", path.display());
            }
        }
    }
    if json {
        out!("{}", serde_json::Value::Array(out));
    }
    if all_ok { exit::OK } else { exit::CONFIG }
}

/// The `utter say` confirmation door: in a terminal, ask on stderr and read a line from
/// stdin; elsewhere nobody can answer, so the answer is an immediate no.
fn terminal_door() -> Door {
    let interactive = std::io::stdin().is_terminal();
    Arc::new(move |pending: PendingConfirmation| {
        Box::pin(async move {
            if !interactive {
                eprintln!(
                    "utter say: {} needs confirmation, but stdin is not a terminal; denied (run it in a terminal, or through the running service)",
                    pending.request.summary
                );
                return Some(false);
            }
            let answer = tokio::task::spawn_blocking(move || {
                let r = &pending.request;
                eprint!(
                    "Confirm: {} (op {}, args {}, provenance {}) [y/N] ",
                    r.summary, r.op, r.args, r.provenance
                );
                let _ = std::io::stderr().flush();
                let mut line = String::new();
                std::io::stdin().read_line(&mut line).is_ok()
                    && matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
            })
            .await
            .unwrap_or(false);
            Some(answer)
        })
    })
}

async fn say(loaded: LoadedConfig, config_path: Option<PathBuf>, args: SayArgs) -> u8 {
    let options = SupervisorOptions::from_config(&loaded.config);
    let runner = Runner::start(loaded, options, config_path).await;
    let command_options = CommandOptions {
        dry_run: args.dry_run,
        timeout_ms: args.timeout_ms,
        ..Default::default()
    };
    let outcome = runner
        .command(&args.utterance, &command_options, Some(terminal_door()))
        .await;
    let code = match &outcome {
        Ok(outcome) => {
            if args.json {
                out!(
                    "{}",
                    serde_json::to_string_pretty(outcome).unwrap_or_default()
                );
            } else {
                print_outcome(outcome);
            }
            if outcome.all_ok() {
                exit::OK
            } else {
                exit::NOT_DONE
            }
        }
        Err(e) => {
            if args.json {
                out!(
                    "{}",
                    serde_json::json!({"utterance": args.utterance, "error": e})
                );
            }
            eprintln!("utter say: {} [{}]", e.message, e.code);
            for plugin in runner.plugins().iter().filter(|p| !p.status.is_running()) {
                eprintln!(
                    "  plugin {} is {}{}",
                    plugin.id,
                    plugin.status.as_str(),
                    plugin
                        .last_error
                        .as_ref()
                        .map(|e| format!(": {e}"))
                        .unwrap_or_default()
                );
            }
            exit::RUNNER
        }
    };
    runner.shutdown().await;
    code
}

fn print_outcome(outcome: &CommandOutcome) {
    let plan = &outcome.plan;
    let rule = plan
        .rule
        .as_ref()
        .map(|r| format!(", rule {r:?}"))
        .unwrap_or_default();
    if plan.steps.is_empty() {
        out!(
            "plan (router {}{rule}): nothing to do — {}",
            plan.router,
            plan.message
                .as_deref()
                .unwrap_or("the router returned no steps")
        );
        return;
    }
    out!("plan (router {}{rule}):", plan.router);
    for (i, step) in plan.steps.iter().enumerate() {
        let op = step.get("op").and_then(|v| v.as_str()).unwrap_or("?");
        let args = step
            .get("args")
            .map(|a| a.to_string())
            .unwrap_or_else(|| "{}".into());
        out!("  {}. {op} {args}", i + 1);
    }
    out!(
        "results{}:",
        if outcome.dry_run {
            " (dry run: nothing was done)"
        } else {
            ""
        }
    );
    for (i, r) in outcome.results.iter().enumerate() {
        let by = r
            .plugin
            .as_ref()
            .map(|p| format!(" [{p}]"))
            .unwrap_or_default();
        let state = match (&r.error, r.ok) {
            (Some(e), _) => format!("failed ({})", e.code),
            (None, true) => "ok".to_owned(),
            (None, false) => "not ok".to_owned(),
        };
        let confirm = if r.needs_confirm && outcome.dry_run {
            " (would ask for confirmation)"
        } else {
            ""
        };
        out!("  {}. {} {state}{by}: {}{confirm}", i + 1, r.op, r.detail);
    }
}

async fn plugins(loaded: LoadedConfig, json: bool) -> u8 {
    let options = SupervisorOptions::from_config(&loaded.config);
    let runner = Runner::start(loaded, options, None).await;
    let reports = runner.plugins();
    runner.shutdown().await;
    if json {
        out!(
            "{}",
            serde_json::to_string_pretty(&reports).unwrap_or_default()
        );
    } else {
        print_plugins(&reports);
    }
    if reports
        .iter()
        .all(|p| p.status.is_running() || p.status == utter::supervisor::PluginStatus::Stopped)
    {
        exit::OK
    } else {
        exit::RUNNER
    }
}

fn print_plugins(reports: &[PluginReport]) {
    out!(
        "{:<12} {:<8} {:>5}  {:<10} {:<40} REQUIRES",
        "ID",
        "KIND",
        "EPOCH",
        "STATUS",
        "PROVIDES"
    );
    for p in reports {
        out!(
            "{:<12} {:<8} {:>5}  {:<10} {:<40} {}",
            p.id,
            p.kind,
            p.epoch,
            p.status.as_str(),
            p.provides.join(","),
            if p.requires.is_empty() {
                "-".to_owned()
            } else {
                p.requires.join(",")
            }
        );
        if let Some(e) = &p.last_error {
            out!("{:>14}last error: {e}", "");
        }
    }
}

async fn daemon(loaded: LoadedConfig, options: utter::daemon::DaemonOptions) -> u8 {
    match utter::daemon::run(loaded, options).await {
        Ok(()) => exit::OK,
        Err(e) => {
            eprintln!("utter daemon: {e}");
            exit::RUNNER
        }
    }
}
