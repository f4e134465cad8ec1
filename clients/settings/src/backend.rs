//! What the app talks to, off the GTK main thread: the runner through the typed client
//! (`utter-ipc`, one shared connection made again when it closed, so a restarted runner is
//! found again, and one more for the event subscription), the
//! systemd user manager over D-Bus (`org.freedesktop.systemd1.Manager`), and the config file
//! through the runner's own editor and checker (`utter_core::config::set_values`). Speech
//! models are listed from the runner's catalog (`utter_core::models`) and downloaded by the
//! `utter` binary (`utter models pull NAME --json`, run with a list of arguments, its JSON
//! progress lines read as data); profiles are read and checked by the rules router's own
//! library (`utter_rules::profiles`).
//!
//! Every call runs on one tokio runtime; the GTK side awaits its [`tokio::task::JoinHandle`]
//! from `glib::spawn_future_local`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde_json::Value;
use utter_ipc::client::{Client, client_token};
use utter_ipc::{AuditEntry, CommandOutcome, Event, PendingConfirmation, Status};

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
#[derive(Clone)]
pub struct Target {
    /// The client socket.
    pub socket: PathBuf,
    /// The config file the app edits.
    pub config: PathBuf,
    /// `[socket] token` from the config, when set (else the token file is read).
    pub token: Option<String>,
    /// The connection the calls share (the level meter calls ten times a second); made
    /// again when it closed, so a restarted runner is found.
    shared: Arc<tokio::sync::Mutex<Option<Arc<Client>>>>,
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
            shared: Arc::default(),
        })
    }

    /// A connection of its own (for a subscription, which reads its events alone).
    async fn connect(&self) -> Result<Client, String> {
        Client::connect(&self.socket, client_token(self.token.as_deref()), None)
            .await
            .map_err(|e| e.to_string())
    }

    /// The shared connection, made again when it closed.
    async fn client(&self) -> Result<Arc<Client>, String> {
        let mut shared = self.shared.lock().await;
        if let Some(client) = shared.as_ref().filter(|c| !c.is_closed()) {
            return Ok(client.clone());
        }
        let client = Arc::new(self.connect().await?);
        *shared = Some(client.clone());
        Ok(client)
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

    /// `runner.invoke {plugin, method, params}`, for the side-effect-free methods the pages
    /// read (`audio.sources`, `audio.status`, `router.examples`).
    pub async fn invoke(
        &self,
        plugin: String,
        method: &str,
        params: Value,
    ) -> Result<Value, String> {
        let client = self.client().await?;
        client
            .invoke(&plugin, method, params)
            .await
            .map_err(|e| e.message)
    }

    /// `runner.audit {}`: the recent decisions, oldest first.
    pub async fn audit(&self) -> Result<Vec<AuditEntry>, String> {
        let client = self.client().await?;
        client.audit(None).await.map_err(|e| e.message)
    }

    /// Follow the runner's events and log lines (`runner.subscribe {logs: true}`), sending
    /// each to `tx` until it is closed; reconnects every 2 s while the runner is away
    /// (sending `None` once each time it goes).
    pub async fn follow(self, tx: tokio::sync::mpsc::Sender<Option<Event>>) {
        loop {
            if let Ok(mut client) = self.connect().await
                && client.subscribe_with(true).await.is_ok()
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

/// One model of the catalog and how much of it is installed.
#[derive(Debug, Clone)]
pub struct ModelRow {
    /// Its name (`[stt] model`).
    pub name: String,
    /// One line for people.
    pub description: String,
    /// The size of its files, in bytes.
    pub size: u64,
    /// `installed`, `incomplete` or `not-installed` ([`utter_core::models::InstallState`]).
    pub state: &'static str,
}

/// The speech models of the catalog (`$UTTER_MODELS_CATALOG`, else the built-in one) and
/// their state in the models directory.
///
/// # Errors
/// An unreadable catalog, or no `XDG_DATA_HOME`/`HOME` to find the models directory.
pub fn models() -> Result<Vec<ModelRow>, String> {
    let catalog = utter_core::models::Catalog::from_env()?;
    let dir = utter_core::models::models_dir()
        .ok_or("neither XDG_DATA_HOME nor HOME is set, so there is no models directory")?;
    Ok(catalog
        .models
        .iter()
        .map(|m| ModelRow {
            name: m.name.clone(),
            description: m.description.clone(),
            size: m.size(),
            state: m.state(&dir.join(&m.name)).as_str(),
        })
        .collect())
}

/// What a download reports ([`pull_model`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Pull {
    /// `bytes` of `size` of `file` are there.
    Progress {
        /// The file's name.
        file: String,
        /// Bytes downloaded so far.
        bytes: u64,
        /// The file's size.
        size: u64,
    },
    /// It ended: `Ok(status)` (`installed`, `already-installed`) or why it failed.
    Done(Result<String, String>),
}

/// The `utter` binary: the one beside this app, else the one on `PATH`.
fn utter_binary() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join("utter")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("utter"))
}

/// Download, verify and install the model `name` with `utter --config CONFIG models pull
/// NAME --json` (arguments as a list, never a shell line), sending its progress to `tx`
/// and then one [`Pull::Done`].
pub async fn pull_model(config: PathBuf, name: String, tx: tokio::sync::mpsc::Sender<Pull>) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt};
    let spawned = tokio::process::Command::new(utter_binary())
        .arg("--config")
        .arg(&config)
        .args(["models", "pull", &name, "--json"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            let _ = tx
                .send(Pull::Done(Err(format!(
                    "cannot run utter ({e}); is it installed on PATH?"
                ))))
                .await;
            return;
        }
    };
    let mut stderr = child.stderr.take();
    let stderr_text = tokio::spawn(async move {
        let mut text = String::new();
        if let Some(stderr) = stderr.as_mut() {
            let _ = stderr.take(64 * 1024).read_to_string(&mut text).await;
        }
        text
    });
    let mut outcome = None;
    if let Some(stdout) = child.stdout.take() {
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let Ok(event) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            let text = |k: &str| event[k].as_str().unwrap_or_default().to_owned();
            let number = |k: &str| event[k].as_u64().unwrap_or(0);
            let report = match event["event"].as_str() {
                Some("start") => Pull::Progress {
                    file: text("file"),
                    bytes: number("offset"),
                    size: number("size"),
                },
                Some("progress") => Pull::Progress {
                    file: text("file"),
                    bytes: number("bytes"),
                    size: number("size"),
                },
                Some("result") if event["ok"] == true => {
                    outcome = Some(Ok(text("status")));
                    continue;
                }
                Some("result") => {
                    outcome = Some(Err(text("error")));
                    continue;
                }
                _ => continue,
            };
            if tx.send(report).await.is_err() {
                return;
            }
        }
    }
    let status = child.wait().await;
    let stderr = stderr_text.await.unwrap_or_default();
    let outcome = outcome.unwrap_or_else(|| {
        Err(match stderr.trim() {
            "" => format!(
                "utter models pull ended ({}) without a result",
                status.map_or_else(|e| e.to_string(), |s| s.to_string())
            ),
            said => said.to_owned(),
        })
    });
    let _ = tx.send(Pull::Done(outcome)).await;
}
