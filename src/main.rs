//! `utter`: the command-line face of the runner. This file sets up logging (stderr, or the
//! journal for a `daemon` systemd started) and the single-threaded runtime, then hands the
//! parsed command line to its subcommand's module under `src/cli/`; the clap definitions are
//! in `src/cli/args.rs`, the exit codes in `src/cli/output.rs`.

mod cli;

use clap::Parser;
use cli::args::{Cli, Command};
use cli::connect::Service;
use cli::output::{self, exit};
use std::io::IsTerminal;
use std::process::ExitCode;
use tracing_subscriber::EnvFilter;

/// Log to stderr; or, for `utter daemon` whose stderr systemd connected to the journal
/// (`JOURNAL_STREAM`), natively to journald, with each event's fields as journal fields
/// (`UTTER_PLUGIN=`, `UTTER_EPOCH=`, ...). Without a journal socket, stderr it is. `daemon`
/// (the `utter daemon` command) also publishes its lines to the clients that follow them
/// ([`utter::logs`]).
fn init_logging(level: Option<&str>, default: &str, daemon: bool) {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = match level {
        Some(level) => match EnvFilter::try_new(level) {
            // A bare word must be a level (a bare "loud" would silently be a target name).
            Ok(filter)
                if level.contains('=')
                    || level.contains(',')
                    || ["error", "warn", "info", "debug", "trace", "off"]
                        .contains(&level.to_ascii_lowercase().as_str()) =>
            {
                filter
            }
            Ok(_) => {
                eprintln!(
                    "utter: --log-level {level:?} is not a level; use error, warn, info, debug, trace or a directive like utter=debug"
                );
                std::process::exit(i32::from(exit::USAGE));
            }
            Err(e) => {
                eprintln!(
                    "utter: --log-level {level:?} is not valid ({e}); use error, warn, info, debug or trace"
                );
                std::process::exit(i32::from(exit::USAGE));
            }
        },
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default)),
    };
    // ashpd's portal Request/Session proxies make zbus warn "Failed to populate properties
    // cache" on every GlobalShortcuts call (those objects have no properties); unless asked
    // for explicitly, only zbus' errors are shown.
    let asked_for_zbus = level.is_some_and(|l| l.contains("zbus"))
        || std::env::var("RUST_LOG").is_ok_and(|l| l.contains("zbus"));
    let filter = if asked_for_zbus {
        filter
    } else {
        filter.add_directive("zbus::proxy=error".parse().expect("a valid directive"))
    };
    let journal_error = if daemon && utter::systemd::stderr_is_journal() {
        match tracing_journald::layer() {
            Ok(layer) => {
                let layer = layer
                    .with_field_prefix(Some("UTTER".to_owned()))
                    .with_syslog_identifier("utter".to_owned());
                tracing_subscriber::registry()
                    .with(filter)
                    .with(layer)
                    .with(daemon.then(utter::logs::layer))
                    .init();
                return;
            }
            Err(e) => Some(e),
        }
    } else {
        None
    };
    // The daemon's followers (`runner.subscribe {logs: true}`) get the same lines as data.
    let tap = daemon.then(utter::logs::layer);
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::stderr().is_terminal()),
        )
        .with(tap)
        .init();
    if let Some(e) = journal_error {
        tracing::warn!(
            "stderr is the journal (JOURNAL_STREAM) but journald's socket cannot be reached ({e}); logging to stderr"
        );
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let plugin_mode = matches!(cli.command, Command::Plugin { .. });
    let daemon_mode = matches!(cli.command, Command::Daemon(_));
    // A one-shot command says in its own output what a plugin's warning says; its plugins'
    // stderr lines are shown only when they are errors (or when a level is asked for).
    let default_level = if daemon_mode {
        "info"
    } else {
        "warn,utter::plugin=error"
    };
    if !plugin_mode {
        // A built-in plugin logs on its own terms (its stderr is the runner's log).
        init_logging(cli.log_level.as_deref(), default_level, daemon_mode);
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
    // A terminal prompt whose question the runner withdrew (answered elsewhere, timed out)
    // still blocks a reader thread; it must not keep the process alive.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    if output::stdout_failed() && code == exit::OK {
        return ExitCode::from(exit::RUNNER);
    }
    ExitCode::from(code)
}

/// Hand the command line to its subcommand; returns the exit code.
async fn run(cli: Cli) -> u8 {
    use cli::{
        audio, audit, check_config, check_manifest, commands, config_file, confirm, context,
        daemon, doctor, eval, events, history, install, listen, models, pending, plugin, plugins,
        profiles, ptt, reload, say, status,
    };
    let service = Service {
        socket: cli.socket.as_deref(),
        config: cli.config.as_deref(),
        json: false,
    };
    match cli.command {
        Command::Say(args) => say::run(args, cli.config.clone(), cli.socket.as_deref()).await,
        Command::Daemon(args) => daemon::run(&args, cli.config.clone(), cli.socket.clone()).await,
        Command::Install(args) => install::run_install(args, cli.config.as_deref()).await,
        Command::Uninstall(args) => install::run_uninstall(&args),
        Command::Plugins(args) => plugins::run(&args, cli.config.as_deref()).await,
        Command::Profiles(args) => profiles::run(&args),
        Command::Eval(args) => eval::run(&args, cli.config.as_deref()).await,
        Command::Plugin { action } => plugin::run(action).await,
        Command::CheckManifest(args) => check_manifest::run(&args),
        Command::CheckConfig(args) => check_config::run(args, cli.config.clone()),
        Command::Config { action } => config_file::run(&action, cli.config.clone()),
        Command::Doctor(args) => {
            doctor::run(&args, cli.config.as_deref(), cli.socket.as_deref()).await
        }
        Command::Status(args) => status::run(&args, service).await,
        Command::Context(args) => {
            context::run(&args, cli.config.clone(), cli.socket.as_deref()).await
        }
        Command::Commands(args) => {
            commands::run(&args, cli.config.clone(), cli.socket.as_deref()).await
        }
        Command::Confirm(args) => confirm::run(&args, service).await,
        Command::Audit(args) => audit::run(&args, service).await,
        Command::History(args) => history::run(&args, service).await,
        Command::Pending(args) => pending::run(&args, service).await,
        Command::Reload(args) => reload::run(&args, service).await,
        Command::Ptt(args) => ptt::run(&args, service).await,
        Command::Events(args) => events::run(&args, service).await,
        Command::Listen(args) => listen::run(&args, service).await,
        Command::Audio { action } => audio::run(action, cli.config.as_deref()).await,
        Command::Models { action } => models::run(action, cli.config.as_deref()),
    }
}
