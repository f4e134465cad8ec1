//! `utter`: the command-line face of the runner.

use clap::{Args, Parser, Subcommand};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use tracing_subscriber::EnvFilter;
use utter::client::{Client, ConfirmHandler};
use utter::config::{self, ConfigIssue, LoadedConfig};
use utter::confirm::{Door, PendingConfirmation};
use utter::pipeline::CommandOptions;
use utter::runner::Runner;
use utter::supervisor::SupervisorOptions;
use utter_protocol::ErrorObject;
use utter_protocol::serde_json::{Value, json};

impl SayArgs {
    /// The words of the utterance, joined with spaces.
    fn utterance(&self) -> String {
        self.words.join(" ")
    }
}

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
  4  the runner could not do its job (no router running, a plugin failed), or no runner
     listens on the socket (status, confirm, pending, reload, events)

Configuration: --config PATH, else $XDG_CONFIG_HOME/utter/config.toml, else the built-in
default (which runs the `rules` router and the `desktop` action plugin).
Logs go to stderr (`utter daemon` started by systemd logs to the journal); set the level with
--log-level or RUST_LOG.";

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
    /// Log level: error, warn, info, debug or trace (default: warn; info for `daemon`, which
    /// logs to the journal when systemd started it, else to stderr).
    #[arg(long, global = true, value_name = "LEVEL")]
    log_level: Option<String>,
    /// The running service's client socket: where `utter daemon` listens and where the
    /// client commands connect (default: [runner] socket_path, else $UTTER_RUNNER_SOCK, else
    /// $XDG_RUNTIME_DIR/utter/runner.sock).
    #[arg(long, global = true, value_name = "PATH")]
    socket: Option<PathBuf>,
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
        /// Do not connect to the D-Bus session bus.
        #[arg(long)]
        no_dbus: bool,
    },
    /// Install utter as a systemd user service: the binary, the unit, the session wrapper and
    /// the D-Bus activation file.
    ///
    /// Paths: ~/.local/bin/utter (--bin-dir), <bin-dir>/../libexec/utter/utter-session-env,
    /// $XDG_CONFIG_HOME/systemd/user/utter.service,
    /// $XDG_DATA_HOME/dbus-1/services/dev.utter.Runner1.service; the list is kept in
    /// $XDG_STATE_HOME/utter/installed.json for `utter uninstall --user`.
    Install(InstallArgs),
    /// Remove exactly the files `utter install --user` installed (stopping the service first).
    Uninstall(UninstallArgs),
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
    /// Show the running service's state and its plugins (exit 0 when it answered).
    Status {
        /// Print the runner's status object as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Answer a confirmation the running service is waiting for.
    ///
    /// Example: utter confirm 3f2a… yes
    Confirm {
        /// The confirmation's id (see `utter pending`).
        id: String,
        /// `yes` approves the step, `no` denies it.
        answer: Answer,
    },
    /// Show the running service's recent policy decisions (allowed, denied with code,
    /// confirmed by which door, asked again, chosen candidate), oldest first.
    Audit {
        /// Only decisions at or after this time, in Unix seconds (e.g. `$(date -d '-1 hour' +%s)`).
        #[arg(long, value_name = "UNIX_SECONDS")]
        since: Option<u64>,
        /// Print JSON: [{time, utterance, op, args, provenance, decision, code?, by?, plugin?}].
        #[arg(long)]
        json: bool,
    },
    /// List the confirmations the running service is waiting for.
    Pending {
        /// Print JSON: [{id, op, args, provenance, summary, created, expires}].
        #[arg(long)]
        json: bool,
    },
    /// Make the running service read its configuration again (an invalid one is refused and
    /// the running one kept; exit 3).
    Reload {
        /// Print JSON: {added, removed, restarted, unchanged}.
        #[arg(long)]
        json: bool,
    },
    /// Push-to-talk for a compositor key binding: press starts listening, release stops,
    /// toggle does whichever applies, state only reports.
    ///
    /// Bind `utter ptt press` to the key's press and `utter ptt release` to its release (or
    /// `utter ptt toggle` where the compositor only runs a command on press, as niri does).
    /// A release sooner than [ptt] min_hold_ms is cancelled as too-short; a hold longer than
    /// max_hold_ms is released automatically as stuck. Exit 0 when the runner answered.
    ///
    /// Example (niri): F13 { spawn "utter" "ptt" "toggle"; }
    Ptt {
        /// What to do.
        action: PttAction,
        /// Print JSON: {action, transition, listening, state}.
        #[arg(long)]
        json: bool,
    },
    /// Follow the running service's events until Ctrl-C: a snapshot first, then one line
    /// per change.
    Events {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Speak a command: one push-to-talk cycle from the terminal (--once), or follow what the
    /// running service hears.
    ///
    /// With --once: press push-to-talk, listen until Enter (or for --seconds), release, then
    /// print what was heard and what was done, with the latency split. Without --once: print
    /// every spoken command the service handles (from any trigger) until Ctrl-C.
    /// Needs the running service (`utter daemon`) with a plugin of kind "stt" (see [stt] in
    /// the config). Exit 0 when the command ran, 1 when nothing was heard or it failed.
    ///
    /// Example: utter listen --once --seconds 3
    Listen {
        /// Do one push-to-talk cycle and exit.
        #[arg(long)]
        once: bool,
        /// With --once: release after this many seconds instead of waiting for Enter.
        #[arg(long, value_name = "SECONDS")]
        seconds: Option<f64>,
        /// Print JSON: the voice report {outcome, stage, error, transcript, command, audio,
        /// timings} (one per line without --once).
        #[arg(long)]
        json: bool,
    },
    /// The microphone: list PipeWire sources, test-record from the configured one.
    ///
    /// Pick the source with `[audio] source = "NODE_NAME"` in the config; `utter audio
    /// sources` shows the names. Exit 4 when PipeWire is not running or the source is missing.
    Audio {
        #[command(subcommand)]
        action: AudioAction,
    },
}

/// `utter audio ...`
#[derive(Subcommand)]
enum AudioAction {
    /// List the audio sources (microphones) PipeWire has; the NAME column is what
    /// `[audio] source` takes, `*` marks the session's default.
    Sources {
        /// Print JSON: [{id, name, description, media_class, channels, rate, is_default}].
        #[arg(long)]
        json: bool,
    },
    /// Record from the configured source, the way push-to-talk does (16 kHz mono, silence
    /// gate), and write a WAV file to listen to.
    ///
    /// Example: utter audio record --seconds 3 --out /tmp/mic.wav
    Record {
        /// How long to record, in seconds.
        #[arg(long, default_value_t = 3.0, value_name = "SECONDS")]
        seconds: f64,
        /// The WAV file to write (16 kHz, mono, 32-bit float).
        #[arg(long, value_name = "PATH")]
        out: PathBuf,
        /// Use this source instead of `[audio] source` (a node name from `utter audio sources`).
        #[arg(long, value_name = "NODE_NAME")]
        source: Option<String>,
        /// Keep the silence around the speech (ignore `[audio.vad] trim`).
        #[arg(long)]
        no_trim: bool,
        /// Print JSON: {path, source, rate, channels, samples, duration_ms, captured_ms,
        /// speech_ms, has_speech, peak, rms_db, ...}.
        #[arg(long)]
        json: bool,
    },
}

/// An answer to a confirmation.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Answer {
    /// Approve the step.
    #[value(alias = "y", alias = "approve")]
    Yes,
    /// Deny it.
    #[value(alias = "n", alias = "deny")]
    No,
}

/// A push-to-talk action.
#[derive(Clone, Copy, clap::ValueEnum)]
enum PttAction {
    /// Start listening (the key went down).
    Press,
    /// Stop listening (the key came up).
    Release,
    /// Press when released, release when held.
    Toggle,
    /// Drop the hold without transcribing anything (reason "cancelled").
    Cancel,
    /// Change nothing; show the state and the triggers.
    State,
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
struct InstallArgs {
    /// Install for the current user (required: there is no system-wide install yet).
    #[arg(long)]
    user: bool,
    /// Directory for the binary (default: ~/.local/bin); the wrapper goes to
    /// <DIR>/../libexec/utter/.
    #[arg(long, value_name = "DIR")]
    bin_dir: Option<PathBuf>,
    /// Say what would be written; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Do not run `systemctl --user daemon-reload` afterwards.
    #[arg(long)]
    no_systemctl: bool,
}

#[derive(Args)]
struct UninstallArgs {
    /// Uninstall the per-user install (required).
    #[arg(long)]
    user: bool,
    /// Also remove files that changed since they were installed.
    #[arg(long)]
    force: bool,
    /// Say what would be removed; remove nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Do not run `systemctl --user disable --now utter.service` and `daemon-reload`.
    #[arg(long)]
    no_systemctl: bool,
}

#[derive(Args)]
struct SayArgs {
    /// What to do, e.g. "open youtube", "pause", "launch calculator". Several words are
    /// joined with spaces, so quoting is optional.
    #[arg(required = true, num_args = 1.., value_name = "UTTERANCE")]
    words: Vec<String>,
    /// Plan and check, and let the action plugins say what they would do, without doing it.
    #[arg(long)]
    dry_run: bool,
    /// Print the plan and results as one JSON object.
    #[arg(long)]
    json: bool,
    /// Timeout of each plugin call, in ms (at most 60000).
    #[arg(long, value_name = "MS")]
    timeout_ms: Option<u64>,
    /// Run in this process even when the service is running (by default `say` uses the
    /// running service when its socket answers).
    #[arg(long)]
    local: bool,
}

/// Log to stderr; or, for `utter daemon` whose stderr systemd connected to the journal
/// (`JOURNAL_STREAM`), natively to journald, with each event's fields as journal fields
/// (`UTTER_PLUGIN=`, `UTTER_EPOCH=`, ...). Without a journal socket, stderr it is.
fn init_logging(level: Option<&str>, default: &str, journal: bool) {
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
    let journal_error = if journal && utter::systemd::stderr_is_journal() {
        match tracing_journald::layer() {
            Ok(layer) => {
                let layer = layer
                    .with_field_prefix(Some("UTTER".to_owned()))
                    .with_syslog_identifier("utter".to_owned());
                tracing_subscriber::registry()
                    .with(filter)
                    .with(layer)
                    .init();
                return;
            }
            Err(e) => Some(e),
        }
    } else {
        None
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
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
    let daemon_mode = matches!(cli.command, Command::Daemon { .. });
    let default_level = if daemon_mode { "info" } else { "warn" };
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
            if args.utterance().trim().is_empty() {
                eprintln!(
                    "utter say: the utterance is empty; say what to do, e.g. utter say \"open youtube\""
                );
                return exit::USAGE;
            }
            let Some(loaded) = load_config(cli.config.as_deref()) else {
                return exit::CONFIG;
            };
            if !args.local {
                let path = utter::socket::resolve_path(cli.socket.as_deref(), &loaded.config);
                let token = utter::client::client_token(
                    loaded.config.socket.as_ref().map(|s| s.token.as_str()),
                );
                match Client::connect(&path, token, Some(terminal_confirm_handler())).await {
                    Ok(client) => return say_remote(client, &args, cli.config.is_some()).await,
                    // No service: run in-process, unless a socket was named explicitly.
                    Err(utter::client::ClientError::NotListening { .. })
                        if cli.socket.is_none() => {}
                    Err(e) => {
                        eprintln!("utter say: {e} (or pass --local to run in this process)");
                        return exit::RUNNER;
                    }
                }
            }
            say(loaded, cli.config, args).await
        }
        Command::Status { json } => status(&cli.socket, &cli.config, json).await,
        Command::Pending { json } => pending(&cli.socket, &cli.config, json).await,
        Command::Audit { since, json } => audit(&cli.socket, &cli.config, since, json).await,
        Command::Confirm { id, answer } => {
            confirm(&cli.socket, &cli.config, &id, matches!(answer, Answer::Yes)).await
        }
        Command::Reload { json } => reload(&cli.socket, &cli.config, json).await,
        Command::Events { json } => events(&cli.socket, &cli.config, json).await,
        Command::Ptt { action, json } => ptt(&cli.socket, &cli.config, action, json).await,
        Command::Listen {
            once,
            seconds,
            json,
        } => listen(&cli.socket, &cli.config, once, seconds, json).await,
        Command::Daemon { no_dbus } => {
            let Some(loaded) = load_config(cli.config.as_deref()) else {
                return exit::CONFIG;
            };
            daemon(
                loaded,
                utter::daemon::DaemonOptions {
                    config_path: cli.config,
                    socket_path: cli.socket,
                    no_dbus,
                },
            )
            .await
        }
        Command::Install(args) => install(args),
        Command::Uninstall(args) => uninstall(args),
        Command::Plugins { json } => {
            let Some(loaded) = load_config(cli.config.as_deref()) else {
                return exit::CONFIG;
            };
            plugins(loaded, json).await
        }
        Command::Audio { action } => match action {
            AudioAction::Sources { json } => audio_sources(json).await,
            AudioAction::Record {
                seconds,
                out,
                source,
                no_trim,
                json,
            } => {
                let Some(loaded) = load_config(cli.config.as_deref()) else {
                    return exit::CONFIG;
                };
                let mut section = loaded.config.audio;
                if let Some(source) = source {
                    section.source = source;
                }
                if no_trim {
                    section.vad.trim = false;
                }
                audio_record(section, seconds, &out, json).await
            }
        },
    }
}

async fn audio_sources(json: bool) -> u8 {
    let sources = match utter::audio::list_sources().await {
        Ok(sources) => sources,
        Err(e) => {
            eprintln!("utter: {e}");
            return exit::RUNNER;
        }
    };
    if json {
        print_json(&sources);
        return exit::OK;
    }
    if sources.is_empty() {
        out!("No audio sources: PipeWire runs, but has no microphone or virtual source.");
        return exit::OK;
    }
    let name_width = sources
        .iter()
        .map(|s| s.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    out!(
        "  {:<name_width$}  {:>4}  {:>6}  DESCRIPTION",
        "NAME",
        "CH",
        "RATE"
    );
    for s in &sources {
        let opt = |v: Option<u32>| v.map_or("-".to_owned(), |v| v.to_string());
        out!(
            "{} {:<name_width$}  {:>4}  {:>6}  {}",
            if s.is_default { '*' } else { ' ' },
            sanitize(&s.name),
            opt(s.channels),
            opt(s.rate),
            sanitize(&s.description)
        );
    }
    out!("\nSet one with [audio] source = \"NAME\" in the config (* = the default source).");
    exit::OK
}

async fn audio_record(
    section: config::AudioSection,
    seconds: f64,
    path: &std::path::Path,
    json: bool,
) -> u8 {
    if !(seconds.is_finite() && seconds > 0.0 && seconds <= f64::from(section.max_seconds)) {
        eprintln!(
            "utter: --seconds must be more than 0 and at most [audio] max_seconds ({})",
            section.max_seconds
        );
        return exit::USAGE;
    }
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: utter::audio::dsp::TARGET_RATE,
        bits_per_sample: 32,
        sample_format: hound::SampleFormat::Float,
    };
    // Open the output first: a path that cannot be written must not cost a recording.
    let writer = match hound::WavWriter::create(path, spec) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("utter: cannot write {}: {e}", path.display());
            return exit::NOT_DONE;
        }
    };
    let capture = match utter::audio::AudioCapture::open(&section).await {
        Ok(capture) => capture,
        Err(e) => {
            drop(writer);
            let _ = std::fs::remove_file(path);
            eprintln!("utter: {e}");
            return exit::RUNNER;
        }
    };
    let linked = capture.status().linked_source.unwrap_or_default();
    if !json {
        eprintln!("Recording {seconds} s from {linked}...");
    }
    let utterance = match capture
        .record_for(std::time::Duration::from_secs_f64(seconds))
        .await
    {
        Ok(u) => u,
        Err(e) => {
            drop(writer);
            let _ = std::fs::remove_file(path);
            eprintln!("utter: {e}");
            return exit::RUNNER;
        }
    };
    drop(capture);
    let mut writer = writer;
    let written = utterance
        .samples
        .iter()
        .try_for_each(|s| writer.write_sample(*s))
        .and_then(|()| writer.finalize());
    if let Err(e) = written {
        eprintln!("utter: cannot write {}: {e}", path.display());
        return exit::NOT_DONE;
    }
    if json {
        let mut value = serde_json::to_value(&utterance).unwrap_or_default();
        if let Some(map) = value.as_object_mut() {
            map.insert("path".into(), json!(path));
            map.insert("source".into(), json!(linked));
            map.insert("channels".into(), json!(1));
            map.insert("samples".into(), json!(utterance.samples.len()));
            map.insert(
                "duration_ms".into(),
                json!(utterance.duration().as_millis() as u64),
            );
        }
        print_json(&value);
    } else {
        out!(
            "Wrote {} ({:.2} s at 16 kHz mono) from {linked}: peak {:.3}, {}",
            path.display(),
            utterance.duration().as_secs_f64(),
            utterance.peak,
            if utterance.has_speech {
                format!(
                    "speech {:.2} s at {:.1} dBFS",
                    utterance.speech.as_secs_f64(),
                    utterance.rms_db
                )
            } else {
                "no speech above the gate ([audio.vad] silence_threshold_db); check the source and its volume".to_owned()
            }
        );
    }
    exit::OK
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
            let r = &pending.request;
            let prompt = format!(
                "Confirm: {} (op {}, args {}, provenance {}) [y/N] ",
                r.summary, r.op, r.args, r.provenance
            );
            Some(prompt_yes_no(prompt).await)
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
        .command(&args.utterance(), &command_options, Some(terminal_door()))
        .await;
    let code = match &outcome {
        Ok(outcome) => {
            if args.json {
                print_json(outcome);
            } else {
                print_outcome(&serde_json::to_value(outcome).unwrap_or_default());
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
                    serde_json::json!({"utterance": args.utterance(), "error": e})
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

/// Print a command outcome (`runner.command`'s result shape) for people.
fn print_outcome(outcome: &Value) {
    let text = |v: &Value| sanitize(v.as_str().unwrap_or("?"));
    let plan = &outcome["plan"];
    let rule = plan["rule"]
        .as_str()
        .map(|r| format!(", rule {r:?}"))
        .unwrap_or_default();
    let steps = plan["steps"].as_array().cloned().unwrap_or_default();
    if steps.is_empty() {
        out!(
            "plan (router {}{rule}): nothing to do — {}",
            text(&plan["router"]),
            sanitize(
                plan["message"]
                    .as_str()
                    .unwrap_or("the router returned no steps")
            )
        );
        return;
    }
    out!("plan (router {}{rule}):", text(&plan["router"]));
    for (i, step) in steps.iter().enumerate() {
        let op = sanitize(step.get("op").and_then(|v| v.as_str()).unwrap_or("?"));
        let args = sanitize(
            &step
                .get("args")
                .map(|a| a.to_string())
                .unwrap_or_else(|| "{}".into()),
        );
        out!("  {}. {op} {args}", i + 1);
    }
    let dry_run = outcome["dry_run"].as_bool().unwrap_or(false);
    out!(
        "results{}:",
        if dry_run {
            " (dry run: nothing was done)"
        } else {
            ""
        }
    );
    let results = outcome["results"].as_array().cloned().unwrap_or_default();
    for (i, r) in results.iter().enumerate() {
        let by = r["plugin"]
            .as_str()
            .map(|p| format!(" [{p}]"))
            .unwrap_or_default();
        let ok = r["ok"].as_bool().unwrap_or(false);
        let state = match (r.get("error").filter(|e| !e.is_null()), ok) {
            (Some(e), _) => format!("failed ({})", e["code"]),
            (None, true) => "ok".to_owned(),
            (None, false) => "not ok".to_owned(),
        };
        let confirm = if r["needs_confirm"].as_bool().unwrap_or(false) && dry_run {
            " (would ask for confirmation)"
        } else {
            ""
        };
        out!(
            "  {}. {} {state}{by}: {}{confirm}",
            i + 1,
            text(&r["op"]),
            sanitize(r["detail"].as_str().unwrap_or(""))
        );
    }
}

async fn plugins(loaded: LoadedConfig, json: bool) -> u8 {
    let options = SupervisorOptions::from_config(&loaded.config);
    let runner = Runner::start(loaded, options, None).await;
    let reports = runner.plugins();
    runner.shutdown().await;
    if json {
        print_json(&reports);
    } else {
        let rows: Vec<Value> = reports
            .iter()
            .filter_map(|r| serde_json::to_value(r).ok())
            .collect();
        print_plugins(&rows);
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

/// Print plugins (`PluginReport` as JSON, as `utter plugins` and `runner.status` give them).
fn print_plugins(reports: &[Value]) {
    let list = |v: &Value, none: &str| {
        let items: Vec<&str> = v
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if items.is_empty() {
            none.to_owned()
        } else {
            items.join(",")
        }
    };
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
            p["id"].as_str().unwrap_or("?"),
            p["kind"].as_str().unwrap_or("?"),
            p["epoch"]
                .as_u64()
                .map_or_else(|| "?".to_owned(), |e| e.to_string()),
            p["status"].as_str().unwrap_or("?"),
            list(&p["provides"], ""),
            list(&p["requires"], "-")
        );
        if let Some(e) = p["last_error"].as_str() {
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

/// Ask a yes/no question on the terminal (stderr, then a line from stdin); only `y` or `yes`
/// approve. Runs on the blocking pool.
async fn prompt_yes_no(prompt: String) -> bool {
    tokio::task::spawn_blocking(move || {
        eprint!("{prompt}");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).is_ok()
            && matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
    })
    .await
    .unwrap_or(false)
}

// ---------------------------------------------------------------------------------------
// Client commands: the running service, through its socket (src/client.rs).

/// `host.confirm` from the service during `utter say`: ask on the terminal; without one,
/// deny at once.
fn terminal_confirm_handler() -> ConfirmHandler {
    let interactive = std::io::stdin().is_terminal();
    Arc::new(move |params: Value| {
        Box::pin(async move {
            let field = |k: &str| match &params[k] {
                Value::String(s) => s.clone(),
                Value::Null => "?".to_owned(),
                other => other.to_string(),
            };
            if !interactive {
                eprintln!(
                    "utter say: {} needs confirmation, but stdin is not a terminal; denied (run it in a terminal to answer)",
                    field("summary")
                );
                return false;
            }
            prompt_yes_no(format!(
                "Confirm: {} (op {}, args {}, provenance {}) [y/N] ",
                field("summary"),
                field("op"),
                field("args"),
                field("provenance")
            ))
            .await
        })
    })
}

/// `utter say` through the running service.
async fn say_remote(client: Client, args: &SayArgs, explicit_config: bool) -> u8 {
    if explicit_config {
        eprintln!(
            "utter say: using the running service at {} with its own configuration (--config is not used; pass --local to run in this process)",
            client.path().display()
        );
    }
    let mut params = json!({"utterance": args.utterance(), "dry_run": args.dry_run});
    if let Some(ms) = args.timeout_ms {
        params["timeout_ms"] = json!(ms);
    }
    let result = client.call("runner.command", params).await;
    client.close();
    match result {
        Ok(outcome) => {
            if args.json {
                print_json(&outcome);
            } else {
                print_outcome(&outcome);
            }
            let results = outcome["results"].as_array().cloned().unwrap_or_default();
            let all_ok = !results.is_empty() && results.iter().all(|r| r["ok"] == true);
            if all_ok { exit::OK } else { exit::NOT_DONE }
        }
        Err(e) => {
            if args.json {
                out!("{}", json!({"utterance": args.utterance(), "error": e}));
            }
            eprintln!("utter say: {} [{}]", e.message, e.code);
            if e.code == -32602 {
                exit::USAGE
            } else {
                exit::RUNNER
            }
        }
    }
}

/// Connect to the running service: the socket from --socket or the config (an invalid
/// config only warns here: it must not keep a client from the service).
async fn connect_service(
    socket: &Option<PathBuf>,
    config_path: &Option<PathBuf>,
    what: &str,
) -> Result<Client, u8> {
    let config = match config::load(config_path.as_deref()) {
        Ok(loaded) => loaded.config,
        // With an explicit --socket the file only matters for the token.
        Err(_) if socket.is_some() => config::Config::default(),
        Err(e) => {
            for issue in &e.errors {
                eprintln!("error: {issue}");
            }
            eprintln!(
                "utter {what}: the configuration is invalid, so the socket it names is unknown; fix it (see `utter check-config`) or pass --socket (the running service keeps its config)"
            );
            return Err(exit::CONFIG);
        }
    };
    let path = utter::socket::resolve_path(socket.as_deref(), &config);
    let token = utter::client::client_token(config.socket.as_ref().map(|s| s.token.as_str()));
    Client::connect(&path, token, None).await.map_err(|e| {
        eprintln!("utter {what}: {e}");
        exit::RUNNER
    })
}

/// Connect to the running service and make one call; on failure the error is reported and
/// the exit code returned.
async fn service_call(
    socket: &Option<PathBuf>,
    config_path: &Option<PathBuf>,
    what: &str,
    method: &str,
    params: Value,
) -> Result<Value, u8> {
    let client = connect_service(socket, config_path, what).await?;
    client
        .call(method, params)
        .await
        .map_err(|e| call_failed(what, &e))
}

/// Report a failed call: the message and code on stderr.
fn call_failed(what: &str, e: &ErrorObject) -> u8 {
    eprintln!("utter {what}: {} [{}]", e.message, e.code);
    exit::RUNNER
}

async fn status(socket: &Option<PathBuf>, config_path: &Option<PathBuf>, json: bool) -> u8 {
    let client = match connect_service(socket, config_path, "status").await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let status = match client.call("runner.status", json!({})).await {
        Ok(s) => s,
        Err(e) => return call_failed("status", &e),
    };
    if json {
        print_json(&status);
    } else {
        out!(
            "runner {}: {} (config {}) at {}",
            status["version"].as_str().unwrap_or("?"),
            status["state"].as_str().unwrap_or("?"),
            status["config"].as_str().unwrap_or("?"),
            client.path().display()
        );
        print_plugins(status["plugins"].as_array().map_or(&[], Vec::as_slice));
        print_ptt(&status["ptt"]);
        print_voice(&status["voice"]);
    }
    exit::OK
}

/// The voice-loop lines of `utter status`.
fn print_voice(voice: &Value) {
    if voice.is_null() {
        return;
    }
    let text = |v: &Value| sanitize(v.as_str().unwrap_or(""));
    out!(
        "voice: {} ({})",
        text(&voice["state"]),
        text(&voice["detail"])
    );
    if let Some(plugin) = voice["stt_plugin"].as_str() {
        let model = voice["model"]
            .as_str()
            .map(|m| format!(", model {}", sanitize(m)))
            .unwrap_or_default();
        out!("  stt     {}{model}", sanitize(plugin));
    }
    let mic = &voice["microphone"];
    if !mic.is_null() {
        let source = mic["linked_source"]
            .as_str()
            .or(mic["configured_source"].as_str())
            .filter(|s| !s.is_empty())
            .unwrap_or("(default source)");
        out!(
            "  mic     {} {} ({} Hz, {} ch)",
            sanitize(source),
            text(&mic["state"]),
            mic["rate"],
            mic["channels"]
        );
    }
}

/// One paragraph for a person about a finished push-to-talk cycle.
fn print_voice_report(report: &Value) {
    let text = |v: &Value| sanitize(v.as_str().unwrap_or(""));
    match report["outcome"].as_str().unwrap_or("") {
        "no-speech" => out!("heard nothing: {}", text(&report["error"])),
        _ => {
            if let Some(t) = report["transcript"].as_str() {
                out!("heard: {:?}", sanitize(t));
            }
            if report["command"].is_object() {
                print_outcome(&report["command"]);
            }
            if report["outcome"] != "ok" {
                out!(
                    "failed ({}): {}",
                    text(&report["stage"]),
                    text(&report["error"])
                );
            }
        }
    }
    let t = &report["timings"];
    let ms = |v: &Value| v.as_f64().unwrap_or(0.0);
    out!(
        "timings: held {:.0} ms; after release: capture {:.1} ms, hand-off {:.1} ms, stt {:.0} ms, pipeline {:.1} ms, total {:.0} ms",
        ms(&t["held_ms"]),
        ms(&t["capture_flush_ms"]),
        ms(&t["handoff_ms"]),
        ms(&t["stt_ms"]),
        ms(&t["pipeline_ms"]),
        ms(&t["total_ms"])
    );
}

/// How the listening phase of `utter listen --once` ended.
enum ListenStop {
    /// Enter or the `--seconds` timer: release and transcribe.
    Release,
    /// Ctrl-C: drop the hold.
    Cancel,
    /// Standard input is closed (EOF) before Enter.
    NoInput,
}

async fn listen(
    socket: &Option<PathBuf>,
    config_path: &Option<PathBuf>,
    once: bool,
    seconds: Option<f64>,
    json: bool,
) -> u8 {
    if seconds.is_some() && !once {
        eprintln!("utter listen: --seconds only applies with --once");
        return exit::USAGE;
    }
    if let Some(s) = seconds {
        if !(0.1..=600.0).contains(&s) {
            eprintln!("utter listen: --seconds must be between 0.1 and 600, got {s}");
            return exit::USAGE;
        }
    }
    let mut client = match connect_service(socket, config_path, "listen").await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let status = match client.call("runner.status", json!({})).await {
        Ok(s) => s,
        Err(e) => return call_failed("listen", &e),
    };
    if status["voice"]["state"] == "off" {
        eprintln!(
            "utter listen: the voice loop is off: {}",
            sanitize(status["voice"]["detail"].as_str().unwrap_or("?"))
        );
        return exit::RUNNER;
    }
    if let Err(e) = client.subscribe().await {
        return call_failed("listen", &e);
    }
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    if once {
        match client.ptt("press").await {
            Ok(v) if v["listening"] == true => {}
            Ok(v) => {
                eprintln!(
                    "utter listen: push-to-talk did not start: {}",
                    describe_ptt_transition(&v["transition"])
                );
                return exit::NOT_DONE;
            }
            Err(e) => return call_failed("listen", &e),
        }
        // Ctrl-C while listening drops the hold: nothing half-spoken is run.
        let stop = match seconds {
            Some(s) => {
                eprintln!("listening for {s} s… (Ctrl-C cancels)");
                tokio::select! {
                    _ = tokio::time::sleep(std::time::Duration::from_secs_f64(s)) => ListenStop::Release,
                    _ = &mut interrupted => ListenStop::Cancel,
                }
            }
            None => {
                eprintln!("listening… press Enter to stop (Ctrl-C cancels)");
                let mut line = String::new();
                let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
                tokio::select! {
                    read = tokio::io::AsyncBufReadExt::read_line(&mut stdin, &mut line) => match read {
                        Ok(0) | Err(_) => ListenStop::NoInput,
                        Ok(_) => ListenStop::Release,
                    },
                    _ = &mut interrupted => ListenStop::Cancel,
                }
            }
        };
        if !matches!(stop, ListenStop::Release) {
            let _ = client.ptt("cancel").await;
            if matches!(stop, ListenStop::NoInput) {
                eprintln!(
                    "utter listen: standard input is closed, so Enter cannot end listening; use --seconds N"
                );
                return exit::USAGE;
            }
            eprintln!("cancelled: nothing was transcribed");
            return exit::NOT_DONE;
        }
        match client.ptt("release").await {
            Ok(v) if v["transition"]["transition"] == "released" => {}
            Ok(v) => {
                eprintln!(
                    "utter listen: {}",
                    describe_ptt_transition(&v["transition"])
                );
                return exit::NOT_DONE;
            }
            Err(e) => return call_failed("listen", &e),
        }
        eprintln!("transcribing…");
    }
    loop {
        let params = tokio::select! {
            params = client.next_event() => params,
            _ = &mut interrupted => return if once { exit::NOT_DONE } else { exit::OK },
        };
        let Some(params) = params else {
            eprintln!("utter listen: the runner closed the connection");
            return exit::RUNNER;
        };
        let event = &params["event"];
        if event["event"] == "dropped" {
            if let Err(e) = client.subscribe().await {
                return call_failed("listen", &e);
            }
            continue;
        }
        if event["event"] != "voice" {
            continue;
        }
        let mut report = event.clone();
        if let Some(map) = report.as_object_mut() {
            map.remove("event");
        }
        if json {
            out!("{report}");
        } else {
            print_voice_report(&report);
        }
        if once {
            client.close();
            return if report["outcome"] == "ok" {
                exit::OK
            } else {
                exit::NOT_DONE
            };
        }
    }
}

/// The push-to-talk lines of `utter status` and `utter ptt`.
fn print_ptt(state: &Value) {
    if state.is_null() {
        return;
    }
    let held = if state["listening"] == true {
        format!(
            "listening (pressed by {}, held {} ms)",
            state["source"].as_str().unwrap_or("?"),
            state["held_ms"].as_u64().unwrap_or(0)
        )
    } else {
        "idle".to_owned()
    };
    out!(
        "push-to-talk: {held}; min hold {} ms, stuck after {} ms",
        state["min_hold_ms"].as_u64().unwrap_or(0),
        state["max_hold_ms"].as_u64().unwrap_or(0)
    );
    for t in state["triggers"].as_array().map_or(&[][..], Vec::as_slice) {
        out!(
            "  {:<7} {:<13} {}",
            sanitize(t["trigger"].as_str().unwrap_or("?")),
            sanitize(t["state"].as_str().unwrap_or("?")),
            sanitize(t["detail"].as_str().unwrap_or(""))
        );
    }
}

/// One line for a person about a push-to-talk transition (`null`: nothing changed).
fn describe_ptt_transition(t: &Value) -> String {
    let source = t["source"].as_str().unwrap_or("?");
    match t["transition"].as_str().unwrap_or("") {
        "pressed" => format!("push-to-talk pressed ({source}): listening"),
        "released" => format!(
            "push-to-talk released after {} ms ({source}): utterance window",
            t["held_ms"].as_u64().unwrap_or(0)
        ),
        "cancelled" => format!(
            "push-to-talk cancelled ({source}): {} after {} ms",
            t["reason"].as_str().unwrap_or("?"),
            t["held_ms"].as_u64().unwrap_or(0)
        ),
        _ => "push-to-talk: no change".to_owned(),
    }
}

async fn ptt(
    socket: &Option<PathBuf>,
    config_path: &Option<PathBuf>,
    action: PttAction,
    json: bool,
) -> u8 {
    let word = match action {
        PttAction::Press => "press",
        PttAction::Release => "release",
        PttAction::Toggle => "toggle",
        PttAction::Cancel => "cancel",
        PttAction::State => "state",
    };
    let client = match connect_service(socket, config_path, "ptt").await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let outcome = match client.ptt(word).await {
        Ok(v) => v,
        Err(e) => return call_failed("ptt", &e),
    };
    client.close();
    if json {
        print_json(&outcome);
    } else {
        if !matches!(action, PttAction::State) {
            out!("{}", describe_ptt_transition(&outcome["transition"]));
        }
        print_ptt(&outcome["state"]);
    }
    exit::OK
}

async fn audit(
    socket: &Option<PathBuf>,
    config_path: &Option<PathBuf>,
    since: Option<u64>,
    json: bool,
) -> u8 {
    let list = match service_call(
        socket,
        config_path,
        "audit",
        "runner.audit",
        json!({ "since": since }),
    )
    .await
    {
        Ok(v) => v,
        Err(code) => return code,
    };
    if json {
        print_json(&list);
        return exit::OK;
    }
    let items = list.as_array().cloned().unwrap_or_default();
    if items.is_empty() {
        out!("no decisions recorded yet");
    }
    for e in &items {
        let extra = [
            ("code", &e["code"]),
            ("by", &e["by"]),
            ("plugin", &e["plugin"]),
        ]
        .iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| {
            format!(
                " {k}={}",
                v.as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| v.to_string())
            )
        })
        .collect::<String>();
        out!(
            "{} {:<9} {} {} [{}]{}",
            e["time"].as_u64().unwrap_or(0),
            e["decision"].as_str().unwrap_or("?"),
            sanitize(e["op"].as_str().unwrap_or("?")),
            sanitize(&e["args"].to_string()),
            e["provenance"].as_str().unwrap_or("?"),
            extra
        );
    }
    exit::OK
}

/// Print any serialisable value as pretty JSON on stdout (for `--json`).
fn print_json(value: &impl serde::Serialize) {
    out!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_default()
    );
}

/// Control characters from plugins or utterances are shown escaped, so nothing printed can
/// move the cursor or fake another line.
fn sanitize(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

async fn pending(socket: &Option<PathBuf>, config_path: &Option<PathBuf>, json: bool) -> u8 {
    let list = match service_call(socket, config_path, "pending", "runner.pending", json!({})).await
    {
        Ok(v) => v,
        Err(code) => return code,
    };
    if json {
        print_json(&list);
        return exit::OK;
    }
    let items = list.as_array().cloned().unwrap_or_default();
    if items.is_empty() {
        out!("no confirmations are pending");
        return exit::OK;
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    for p in &items {
        out!(
            "{}  {}",
            p["id"].as_str().unwrap_or("?"),
            p["summary"].as_str().unwrap_or("?")
        );
        out!(
            "    op {}, args {}, provenance {}, expires in {} s",
            p["op"].as_str().unwrap_or("?"),
            p["args"],
            p["provenance"].as_str().unwrap_or("?"),
            p["expires"].as_u64().unwrap_or(now).saturating_sub(now)
        );
    }
    out!("answer with: utter confirm ID yes|no");
    exit::OK
}

async fn confirm(
    socket: &Option<PathBuf>,
    config_path: &Option<PathBuf>,
    id: &str,
    approved: bool,
) -> u8 {
    let client = match connect_service(socket, config_path, "confirm").await {
        Ok(c) => c,
        Err(code) => return code,
    };
    match client
        .call("runner.confirm", json!({"id": id, "approved": approved}))
        .await
    {
        Ok(_) => {
            out!(
                "confirmation {id} {}",
                if approved { "approved" } else { "denied" }
            );
            exit::OK
        }
        Err(e) if e.code == -32602 => {
            eprintln!("utter confirm: {}", e.message);
            exit::NOT_DONE
        }
        Err(e) => call_failed("confirm", &e),
    }
}

async fn reload(socket: &Option<PathBuf>, config_path: &Option<PathBuf>, json: bool) -> u8 {
    let client = match connect_service(socket, config_path, "reload").await {
        Ok(c) => c,
        Err(code) => return code,
    };
    match client.call("runner.reload", json!({})).await {
        Ok(report) => {
            if json {
                print_json(&report);
            } else {
                out!("config reloaded: {}", reload_summary(&report));
            }
            exit::OK
        }
        Err(e) if e.code == -32602 => {
            let errors = e
                .data
                .as_ref()
                .and_then(|d| d["errors"].as_array().cloned())
                .unwrap_or_default();
            if json {
                out!("{}", json!({"ok": false, "error": e}));
            }
            for issue in &errors {
                eprintln!("error: {}", issue_line(issue));
            }
            if errors.is_empty() {
                eprintln!("error: {}", e.message);
            }
            eprintln!(
                "utter reload: the configuration is invalid; the service keeps running the one it had (fix it, then check it with `utter check-config`)"
            );
            exit::CONFIG
        }
        Err(e) => call_failed("reload", &e),
    }
}

/// `added a; removed -; restarted -; unchanged b, c` from a reload report.
fn reload_summary(report: &Value) -> String {
    let ids = |k: &str| {
        let items: Vec<&str> = report[k]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if items.is_empty() {
            "-".to_owned()
        } else {
            items.join(", ")
        }
    };
    format!(
        "added {}; removed {}; restarted {}; unchanged {}",
        ids("added"),
        ids("removed"),
        ids("restarted"),
        ids("unchanged")
    )
}

/// `file:line: key: message` from a config issue as `runner.reload` reports it.
fn issue_line(issue: &Value) -> String {
    let mut line = issue["file"].as_str().unwrap_or("?").to_owned();
    if let Some(n) = issue["line"].as_u64() {
        line.push_str(&format!(":{n}"));
    }
    if let Some(key) = issue["key"].as_str() {
        line.push_str(&format!(": {key}"));
    }
    line.push_str(&format!(": {}", issue["message"].as_str().unwrap_or("")));
    line
}

async fn events(socket: &Option<PathBuf>, config_path: &Option<PathBuf>, json: bool) -> u8 {
    let mut client = match connect_service(socket, config_path, "events").await {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Err(e) = client.subscribe().await {
        return call_failed("events", &e);
    }
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    loop {
        let params = tokio::select! {
            params = client.next_event() => params,
            _ = &mut interrupted => return exit::OK,
        };
        let Some(params) = params else {
            eprintln!("utter events: the runner closed the connection");
            return exit::RUNNER;
        };
        let event = &params["event"];
        if json {
            out!("{event}");
        } else {
            out!("{}", describe_event(event));
        }
        if STDOUT_FAILED.load(std::sync::atomic::Ordering::Relaxed) {
            return exit::RUNNER;
        }
        if event["event"] == "dropped" {
            // Fell behind: start again with a fresh snapshot (when the runner is stopping,
            // the connection closes and the loop ends above).
            if let Err(e) = client.subscribe().await {
                return call_failed("events", &e);
            }
        }
    }
}

/// One line for a person about one event.
fn describe_event(event: &Value) -> String {
    let s = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match event["event"].as_str().unwrap_or("") {
        "snapshot" => {
            let status = &event["status"];
            let plugins: Vec<String> = status["plugins"]
                .as_array()
                .map(|ps| {
                    ps.iter()
                        .map(|p| {
                            format!("{} {} (epoch {})", s(&p["id"]), s(&p["status"]), p["epoch"])
                        })
                        .collect()
                })
                .unwrap_or_default();
            format!(
                "snapshot: runner {} {}; plugins: {}",
                s(&status["version"]),
                s(&status["state"]),
                if plugins.is_empty() {
                    "none".to_owned()
                } else {
                    plugins.join(", ")
                }
            )
        }
        "plugin_state" => format!(
            "plugin {}: {} (epoch {})",
            s(&event["id"]),
            s(&event["status"]),
            event["epoch"]
        ),
        "state" => format!("state: {}", s(&event["state"])),
        "confirmation_requested" => format!(
            "confirmation {} requested: {} (op {}, args {}, provenance {}); answer with `utter confirm {} yes|no`",
            s(&event["id"]),
            s(&event["summary"]),
            s(&event["op"]),
            event["args"],
            s(&event["provenance"]),
            s(&event["id"])
        ),
        "confirmation_resolved" => format!(
            "confirmation {} {} by {}",
            s(&event["id"]),
            if event["approved"] == true {
                "approved"
            } else {
                "denied"
            },
            s(&event["by"])
        ),
        "command_finished" => {
            let results = event["results"].as_array().cloned().unwrap_or_default();
            let ok = results.iter().filter(|r| r["ok"] == true).count();
            format!(
                "command {} finished: {ok} of {} step(s) ok",
                event["utterance"],
                results.len()
            )
        }
        "reloaded" => format!("config reloaded: {}", reload_summary(&event["report"])),
        "dropped" => format!("dropped: {}", s(&event["reason"])),
        "ptt" => describe_ptt_transition(event),
        "voice" => match event["transcript"].as_str() {
            Some(t) => format!(
                "voice {}: heard {:?} ({:.0} ms after release)",
                s(&event["outcome"]),
                sanitize(t),
                event["timings"]["total_ms"].as_f64().unwrap_or(0.0)
            ),
            None => format!("voice {}: {}", s(&event["outcome"]), s(&event["error"])),
        },
        "ptt_trigger" => format!(
            "push-to-talk trigger {}: {} ({})",
            s(&event["trigger"]),
            s(&event["state"]),
            s(&event["detail"])
        ),
        _ => event.to_string(),
    }
}

/// `utter install --user`.
fn install(args: InstallArgs) -> u8 {
    use utter::install::{Dirs, InstallOptions};
    if !args.user {
        eprintln!("utter install: only per-user installs exist so far; run `utter install --user`");
        return exit::USAGE;
    }
    let executable = match std::env::current_exe() {
        Ok(path) => path,
        Err(e) => {
            eprintln!("utter install: cannot find the running utter binary to copy: {e}");
            return exit::RUNNER;
        }
    };
    let options = InstallOptions {
        executable,
        bin_dir: args.bin_dir,
        dry_run: args.dry_run,
        run_systemctl: !args.no_systemctl,
    };
    match Dirs::from_env().and_then(|dirs| utter::install::install(&dirs, &options)) {
        Ok(report) => {
            if args.json {
                print_json(&report);
            } else {
                out!("{}", report.to_text().trim_end());
            }
            exit::OK
        }
        Err(e) => {
            if args.json {
                out!("{}", serde_json::json!({"error": e.to_string()}));
            }
            eprintln!("utter install: {e}");
            exit::RUNNER
        }
    }
}

/// `utter uninstall --user`.
fn uninstall(args: UninstallArgs) -> u8 {
    use utter::install::{Dirs, UninstallOptions};
    if !args.user {
        eprintln!(
            "utter uninstall: only per-user installs exist so far; run `utter uninstall --user`"
        );
        return exit::USAGE;
    }
    let options = UninstallOptions {
        dry_run: args.dry_run,
        force: args.force,
        run_systemctl: !args.no_systemctl,
    };
    match Dirs::from_env().and_then(|dirs| utter::install::uninstall(&dirs, &options)) {
        Ok(report) => {
            if args.json {
                print_json(&report);
            } else {
                out!("{}", report.to_text().trim_end());
            }
            if report.kept_any() {
                exit::NOT_DONE
            } else {
                exit::OK
            }
        }
        Err(e) => {
            if args.json {
                out!("{}", serde_json::json!({"error": e.to_string()}));
            }
            eprintln!("utter uninstall: {e}");
            exit::RUNNER
        }
    }
}
