//! `utter daemon`: the runner as a per-user session service.
//!
//! Start order: plugins (the runner) → the client socket → the D-Bus object and name →
//! `READY=1` to systemd. SIGHUP reloads the config; SIGTERM and SIGINT stop: `STOPPING=1`,
//! the doors close, every plugin is drained.

use std::path::PathBuf;
use std::sync::Arc;

use crate::{dbus, socket, systemd};
use utter_core::config::LoadedConfig;
use utter_core::runner::Runner;
use utter_core::supervisor::SupervisorOptions;

/// Options of the daemon from the command line.
#[derive(Debug, Clone, Default)]
pub struct DaemonOptions {
    /// `--config`: the file reloads read again.
    pub config_path: Option<PathBuf>,
    /// `--socket`: the client socket path (else config, `UTTER_RUNNER_SOCK`, the default).
    pub socket_path: Option<PathBuf>,
    /// `--no-dbus`: do not connect to the session bus.
    pub no_dbus: bool,
}

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The client socket could not be served (e.g. another runner holds it).
    #[error(transparent)]
    Socket(#[from] socket::SocketError),
    /// Signal handlers could not be installed.
    #[error("cannot install signal handlers: {0}")]
    Signals(std::io::Error),
}

/// Run until SIGTERM or SIGINT.
///
/// # Errors
/// [`DaemonError`] when a door cannot be opened; plugin failures are not errors (they show
/// in the status).
pub async fn run(loaded: LoadedConfig, options: DaemonOptions) -> Result<(), DaemonError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).map_err(DaemonError::Signals)?;
    let mut int = signal(SignalKind::interrupt()).map_err(DaemonError::Signals)?;
    let mut hup = signal(SignalKind::hangup()).map_err(DaemonError::Signals)?;

    // Take the socket (and its single-instance lock) before starting plugins, so a second
    // runner stops at once without spawning anything.
    let socket_path = socket::resolve_path(options.socket_path.as_deref(), &loaded.config);
    let listener = socket::bind(&socket_path, &loaded.config)?;
    tracing::info!(config = %loaded.origin, socket = %socket_path.display(), "starting");

    let supervisor_options = SupervisorOptions::from_config(&loaded.config);
    let runner: Arc<Runner> =
        Runner::start(loaded, supervisor_options, options.config_path.clone()).await;
    for p in runner.plugins() {
        tracing::info!(plugin = %p.id, epoch = p.epoch, status = p.status.as_str(), "plugin");
    }
    runner.start_ptt_triggers(crate::triggers::starter(!options.no_dbus));
    runner.start_voice();
    let socket_task = socket::serve(listener, runner.clone());
    let mut bus = if options.no_dbus {
        None
    } else {
        dbus::serve(runner.clone()).await
    };
    systemd::notify_ready();
    tracing::info!("ready");

    // The session bus going away means the session is over (a D-Bus-activated runner would
    // otherwise outlive it, holding whatever its caller gave it).
    let bus_lost = {
        let watch = bus.as_mut().map(crate::dbus::Bus::watch_disconnect);
        let bus_gone = async {
            match watch {
                Some(rx) => rx.await.unwrap_or_else(|_| "the watcher stopped".into()),
                None => std::future::pending().await,
            }
        };
        tokio::pin!(bus_gone);
        let mut bus_lost = false;
        loop {
            tokio::select! {
                why = &mut bus_gone => {
                    tracing::warn!(reason = %why, "the session bus is gone: the session is over; stopping (run with --no-dbus to keep a runner without a bus)");
                    bus_lost = true;
                    break;
                }
                _ = term.recv() => { tracing::info!("SIGTERM: stopping"); break; }
                _ = int.recv() => { tracing::info!("SIGINT: stopping"); break; }
                _ = hup.recv() => {
                    tracing::info!("SIGHUP: reloading the config");
                    systemd::notify_reloading();
                    if let Err(e) = runner.reload().await {
                        for issue in &e.errors {
                            tracing::error!("reload refused, keeping the running config: {issue}");
                        }
                    }
                    systemd::notify_ready();
                }
            }
        }
        bus_lost
    };
    systemd::notify_stopping();
    if let Some(bus) = bus.filter(|_| !bus_lost) {
        bus.close().await;
    }
    socket_task.shutdown().await;
    runner.shutdown().await;
    tracing::info!("stopped");
    Ok(())
}
