//! What the app talks to, off the GTK main thread: the runner through the typed client
//! (`utter-ipc`, a new connection per call, so a restarted runner is found again), the
//! systemd user manager over D-Bus (`org.freedesktop.systemd1.Manager`), and the config file
//! through the runner's own editor and checker (`utter_core::config::set_values`).
//!
//! Every call runs on one tokio runtime; the GTK side awaits its [`tokio::task::JoinHandle`]
//! from `glib::spawn_future_local`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use utter_ipc::client::{Client, client_token};
use utter_ipc::{CommandOutcome, Event, PendingConfirmation, Status};

/// The systemd unit the app drives.
pub const UNIT: &str = "utter.service";

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime")
    })
}

/// Run `fut` on the app's tokio runtime.
pub fn spawn<F>(fut: F) -> tokio::task::JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    runtime().spawn(fut)
}

/// Where the runner and the config are: `--socket`/`--config`, else the config's
/// `[runner] socket_path`, else the default paths (as the CLI finds them).
#[derive(Debug, Clone)]
pub struct Target {
    /// The client socket.
    pub socket: PathBuf,
    /// The config file the app edits.
    pub config: PathBuf,
    /// `[socket] token` from the config, when set (else the token file is read).
    pub token: Option<String>,
}

impl Target {
    /// Resolve from the command line.
    ///
    /// # Errors
    /// When neither `--config` is given nor `XDG_CONFIG_HOME`/`HOME` name a directory.
    pub fn resolve(socket: Option<PathBuf>, config: Option<PathBuf>) -> Result<Target, String> {
        let config = config
            .or_else(utter_core::config::user_config_path)
            .ok_or("neither --config nor XDG_CONFIG_HOME or HOME is set")?;
        // A broken file must not keep the app from the runner (which runs the config it
        // loaded): what still reads of it is used, as the CLI does.
        let loaded = match utter_core::config::load(Some(&config)) {
            Ok(loaded) => loaded.config,
            Err(_) => utter_core::config::salvage_client_settings(Some(&config)),
        };
        let socket = loaded.client_socket(socket.as_deref());
        let token = loaded.socket.map(|s| s.token).filter(|t| !t.is_empty());
        Ok(Target {
            socket,
            config,
            token,
        })
    }

    async fn client(&self) -> Result<Client, String> {
        Client::connect(&self.socket, client_token(self.token.as_deref()), None)
            .await
            .map_err(|e| e.to_string())
    }

    /// `runner.status`.
    pub async fn status(&self) -> Result<Status, String> {
        let client = self.client().await?;
        client.status().await.map_err(|e| e.message)
    }

    /// `runner.pending`.
    pub async fn pending(&self) -> Result<Vec<PendingConfirmation>, String> {
        let client = self.client().await?;
        client.pending().await.map_err(|e| e.message)
    }

    /// `runner.confirm {id, approved}`.
    pub async fn confirm(&self, id: String, approved: bool) -> Result<(), String> {
        let client = self.client().await?;
        client.confirm(&id, approved).await.map_err(|e| e.message)
    }

    /// `runner.command {utterance, dry_run: true}`: the plan and what each step would do.
    pub async fn dry_run(&self, utterance: String) -> Result<CommandOutcome, String> {
        let client = self.client().await?;
        let params = utter_ipc::methods::CommandParams {
            utterance,
            dry_run: true,
            timeout_ms: None,
            context: None,
        };
        client.command(&params).await.map_err(|e| e.message)
    }

    /// `runner.ptt toggle`.
    pub async fn toggle_ptt(&self) -> Result<bool, String> {
        let client = self.client().await?;
        client
            .ptt("toggle")
            .await
            .map(|r| r.listening)
            .map_err(|e| e.message)
    }

    /// `runner.reload`, after the config changed.
    pub async fn reload(&self) -> Result<(), String> {
        let client = self.client().await?;
        client.reload().await.map(|_| ()).map_err(|e| e.message)
    }

    /// Follow the runner's events, sending each to `tx` until it is closed; reconnects
    /// every 2 s while the runner is away (sending `None` once each time it goes).
    pub async fn follow(self, tx: tokio::sync::mpsc::Sender<Option<Event>>) {
        loop {
            if let Ok(mut client) = self.client().await
                && client.subscribe().await.is_ok()
            {
                while let Some(params) = client.next_event().await {
                    if tx.send(Some(params.event)).await.is_err() {
                        return;
                    }
                }
            }
            if tx.send(None).await.is_err() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        }
    }
}

/// Set `edits` (dotted keys, TOML values) in the config file at `path`, keeping its comments
/// and order; the result is checked with the runner's own checker before anything is
/// written ([`utter_core::config::set_in_file`]).
///
/// # Errors
/// Every issue as `file:line: message` (nothing was written), or the write error.
pub fn save_config(
    path: &Path,
    edits: &[(String, toml_edit::Value)],
) -> Result<Vec<String>, String> {
    utter_core::config::set_in_file(path, edits, true)
        .map(|edited| edited.changed)
        .map_err(|e| e.to_string())
}

/// What the config file says now (for the forms), or why it cannot be read.
pub fn read_config(path: &Path) -> Result<utter_core::config::Config, String> {
    match utter_core::config::load(Some(path)) {
        Ok(loaded) => Ok(loaded.config),
        Err(e) => Err(e.to_string()),
    }
}

/// One of `StartUnit`, `StopUnit`, `RestartUnit` on the user manager, or enabling the unit
/// (`EnableUnitFiles`, then `Reload`).
///
/// # Errors
/// Without a session bus or a user manager on it, or when systemd refuses: its message.
pub async fn systemd(verb: &'static str) -> Result<String, String> {
    let conn = zbus::Connection::session()
        .await
        .map_err(|e| format!("no session bus: {e}"))?;
    let manager = zbus::Proxy::new(
        &conn,
        "org.freedesktop.systemd1",
        "/org/freedesktop/systemd1",
        "org.freedesktop.systemd1.Manager",
    )
    .await
    .map_err(|e| format!("no systemd user manager: {e}"))?;
    let refused = |method: &str, e: zbus::Error| {
        format!(
            "systemd's user manager refused {method} {UNIT}: {e} (is `systemctl --user` working in this session?)"
        )
    };
    let unit_job = |method: &'static str, done: &'static str| {
        let manager = manager.clone();
        async move {
            manager
                .call_method(method, &(UNIT, "replace"))
                .await
                .map(|_| done.to_owned())
                .map_err(|e| refused(method, e))
        }
    };
    match verb {
        "start" => unit_job("StartUnit", "started").await,
        "stop" => unit_job("StopUnit", "stopped").await,
        "restart" => unit_job("RestartUnit", "restarted").await,
        "enable" => {
            // EnableUnitFiles(files, runtime = false, force = true), then Reload.
            manager
                .call_method("EnableUnitFiles", &(vec![UNIT], false, true))
                .await
                .map_err(|e| refused("EnableUnitFiles", e))?;
            manager
                .call_method("Reload", &())
                .await
                .map_err(|e| refused("Reload", e))?;
            Ok("enabled (starts with the graphical session)".into())
        }
        other => Err(format!("unknown systemd action {other}")),
    }
}
