//! `utter daemon`: run the runner in the foreground as the user's session service, until
//! SIGTERM or SIGINT. The work is `utter::daemon` (the client socket, the D-Bus object
//! `dev.utter.Runner1`, readiness for systemd, SIGHUP to reload); this module loads the
//! configuration strictly (exit 3 when it is invalid) and turns a door that cannot be opened,
//! such as a socket another runner holds, into exit 4.

use std::path::PathBuf;

use super::check_config;
use super::output::exit;

/// The arguments of `utter daemon`.
#[derive(clap::Args)]
pub struct Args {
    /// Do not connect to the D-Bus session bus.
    #[arg(long)]
    no_dbus: bool,
}

/// Run `utter daemon`; `config` is `--config` (read again on every reload), `socket` is
/// `--socket`.
pub async fn run(args: &Args, config: Option<PathBuf>, socket: Option<PathBuf>) -> u8 {
    let Some(loaded) = check_config::load(config.as_deref()) else {
        return exit::CONFIG;
    };
    let options = utter::daemon::DaemonOptions {
        config_path: config,
        socket_path: socket,
        no_dbus: args.no_dbus,
    };
    match utter::daemon::run(loaded, options).await {
        Ok(()) => exit::OK,
        Err(e) => {
            eprintln!("utter daemon: {e}");
            exit::RUNNER
        }
    }
}
