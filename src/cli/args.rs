//! The command line as clap reads it: the global options ([`Cli`]) and one variant per
//! subcommand ([`Command`]), whose doc comments are the `--help` text (the exit-code table
//! at the end of `utter --help` is [`super::output::EXIT_CODES`]). Each subcommand's own
//! arguments are declared in its module, next to the code that uses them.

use clap::{Parser, Subcommand};
use std::path::PathBuf;

use super::output::EXIT_CODES;
use super::{
    audio, audit, check_config, check_manifest, commands, config_file, confirm, context, daemon,
    doctor, eval, events, history, install, listen, models, pending, plugin, plugins, profiles,
    ptt, reload, say, status,
};

/// Utter: say what you want, and the desktop does it.
///
/// The runner supervises plugins (a router that turns an utterance into steps, action
/// plugins that carry them out) and checks every step against its policy first.
#[derive(Parser)]
#[command(name = "utter", version, after_help = EXIT_CODES, propagate_version = true)]
pub struct Cli {
    /// Runner configuration file (TOML).
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Log level: error, warn, info, debug or trace (default: warn; info for `daemon`, which
    /// logs to the journal when systemd started it, else to stderr).
    #[arg(long, global = true, value_name = "LEVEL")]
    pub log_level: Option<String>,
    /// The running service's client socket: where `utter daemon` listens and where the
    /// client commands connect (default: [runner] socket_path, else $UTTER_RUNNER_SOCK, else
    /// $XDG_RUNTIME_DIR/utter/runner.sock).
    #[arg(long, global = true, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// Run one utterance: plan it with the router, check it, and act on it.
    ///
    /// Example: utter say "open youtube" --dry-run
    Say(say::Args),
    /// Run the runner as a session service in the foreground: the client socket, the D-Bus
    /// object dev.utter.Runner1, SIGHUP reloads the config, SIGTERM/SIGINT stop it.
    Daemon(daemon::Args),
    /// Install utter as a systemd user service: the binary, the unit, the session wrapper and
    /// the D-Bus activation file.
    ///
    /// Paths: ~/.local/bin/utter (--bin-dir), <bin-dir>/../libexec/utter/utter-session-env,
    /// $XDG_CONFIG_HOME/systemd/user/utter.service,
    /// $XDG_DATA_HOME/dbus-1/services/dev.utter.Runner1.service; the list is kept in
    /// $XDG_STATE_HOME/utter/installed.json for `utter uninstall --user`.
    Install(install::InstallArgs),
    /// Remove exactly the files `utter install --user` installed (stopping the service first).
    Uninstall(install::UninstallArgs),
    /// Start the configured plugins, show their state, and stop them.
    Plugins(plugins::Args),
    /// List the application profiles the rules router plans with (what "new tab" or "copy"
    /// presses in each application), built-in and your own.
    ///
    /// Your profiles are TOML files in $XDG_CONFIG_HOME/utter/profiles/ (one per
    /// application; a file with a built-in id replaces that profile). Fields: id, name, kind
    /// (browser, terminal, editor, app), aliases, app_ids, launch, run, search_url,
    /// [shortcuts] (name = "chord"), [commands] (phrase = "chord" or { op, args }). The
    /// router reads them again when a file changes.
    ///
    /// Example: utter profiles --json
    Profiles(profiles::Args),
    /// Score a command corpus against the configured router: per category, the cases it
    /// planned right, false positives and false escalations.
    ///
    /// The file holds [[case]] tables: category, say, focused (app_id), windows, compositor,
    /// expect = [{ op, args }] (args a subset of the planned ones; none for a negative),
    /// escalate (a negative's expected reason). Only router.plan is called; nothing runs.
    ///
    /// Example: utter eval my-commands.toml
    Eval(eval::Args),
    /// Serve a built-in plugin on stdin/stdout (the runner starts these; to see the
    /// configured plugins and their state, it is `utter plugins`).
    ///
    /// The built-in plugins are compiled into this binary, so one installed `utter` carries
    /// them; each still runs as its own process and speaks the plugin protocol.
    ///
    /// `utter plugin check -- CMD ARGS...` runs any plugin through the protocol's
    /// conformance checks instead.
    Plugin {
        #[command(subcommand)]
        action: plugin::Action,
    },
    /// Validate plugin manifests (utter-plugin.toml) against the protocol's schema.
    CheckManifest(check_manifest::Args),
    /// Check everything utter depends on (config, plugins against the install lockfile,
    /// sandbox, speech model, runtime directory, service, compositor, portal, PipeWire,
    /// AT-SPI, notifications, uinput), each failing line with the command that fixes it.
    ///
    /// Exit 0 when nothing of severity error failed, 1 otherwise. `--json` has stable field
    /// names (doctor_version 1).
    ///
    /// Example: utter doctor --json
    Doctor(doctor::Args),
    /// Validate a configuration file (default: the one `utter` would use): every error with
    /// file:line and key, warnings (unknown keys, unknown ops), and whether each plugin's
    /// program can start.
    ///
    /// Exit 0 when the runner would accept it (warnings allowed), 3 when it would not.
    ///
    /// Examples: utter check-config; utter check-config ~/.config/utter/config.toml --json
    CheckConfig(check_config::Args),
    /// Work on the configuration file: `utter config migrate` rewrites an older format to
    /// the current config_version, keeping its comments.
    Config {
        #[command(subcommand)]
        action: config_file::Action,
    },
    /// Show the running service's state and its plugins (exit 0 when it answered).
    Status(status::Args),
    /// Show the desktop context commands are planned in: the compositor, the focused window,
    /// the windows, workspaces and outputs (from the running service, else read once here).
    ///
    /// Example: utter context --json
    Context(context::Args),
    /// What can I say here? The commands of the focused application, the compositor's
    /// actions and every kind of command the router understands, each with examples.
    ///
    /// It reads the desktop context (the focused window, the compositor) and asks the
    /// router plugin (kind "router"; `rules` in the built-in config) for its examples in that
    /// context, through the running service, else with the plugins started in this process
    /// (as `utter context` does). The focused application's commands come first ("In
    /// Firefox": its profile's shortcuts and commands, see `utter profiles`), then the
    /// compositor actions (on niri), then the kinds of command that work anywhere.
    ///
    /// Each line is `  what to say  → the op it runs`: the router has planned every one of
    /// them, so saying it (or `utter say "what to say" --dry-run`) does what the line says.
    /// "(with foot focused)" marks one that needs another window focused.
    ///
    /// Exit 0 when the examples were listed, 3 for an invalid config, 4 when no router is
    /// configured or running or it does not serve router.examples.
    ///
    /// Examples: utter commands; utter commands --all; utter commands --json --local
    Commands(commands::Args),
    /// Answer a confirmation the running service is waiting for.
    ///
    /// Example: utter confirm 3f2a… yes
    Confirm(confirm::Args),
    /// Show the running service's recent policy decisions (allowed, denied with code,
    /// confirmed by which door, asked again, chosen candidate), oldest first.
    Audit(audit::Args),
    /// Show what the running service did, newest first: each command that acted, its steps
    /// (done, verified or failed) and the window focused before it (the last 50 are kept).
    ///
    /// Examples: utter history; utter history --limit 5 --json
    History(history::Args),
    /// List the confirmations the running service is waiting for.
    Pending(pending::Args),
    /// Make the running service read its configuration file again (the one it was started
    /// with; an invalid one is refused and the running one kept; exit 3). Plugins that failed
    /// for good (a program that was missing) are tried again.
    Reload(reload::Args),
    /// Push-to-talk for a compositor key binding: press starts listening, release stops,
    /// toggle does whichever applies, state only reports.
    ///
    /// Bind `utter ptt press` to the key's press and `utter ptt release` to its release (or
    /// `utter ptt toggle` where the compositor only runs a command on press, as niri does).
    /// A release sooner than [ptt] min_hold_ms is cancelled as too-short; a hold longer than
    /// max_hold_ms is released automatically as stuck. Exit 0 when the runner answered, 1
    /// when a press could not open the microphone (the reason is printed).
    ///
    /// Example (niri): F13 { spawn "utter" "ptt" "toggle"; }
    Ptt(ptt::Args),
    /// Follow the running service's events until Ctrl-C: a snapshot first, then one line
    /// per change.
    Events(events::Args),
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
    Listen(listen::Args),
    /// The microphone: list PipeWire sources, test-record from the configured one.
    ///
    /// Pick the source with `[audio] source = "NODE_NAME"` in the config; `utter audio
    /// sources` shows the names. Exit 4 when PipeWire is not running or the source is missing.
    Audio {
        #[command(subcommand)]
        action: audio::Action,
    },
    /// The speech models: list the catalog and what is installed, download and verify one
    /// (resumable), import one from a local directory or archive, remove one.
    ///
    /// A model is a directory in $XDG_DATA_HOME/utter/models/ that [stt] model names, e.g.
    /// [stt] model = "tiny.en" (the default config's). Every file of a catalog model is pinned
    /// by its size and SHA-256, whether it is downloaded, read from a file:// source or
    /// imported; only `import` under a name the catalog does not know installs a model
    /// unverified, and says so.
    #[command(after_help = models::MODELS_HELP)]
    Models {
        #[command(subcommand)]
        action: models::Action,
    },
}
