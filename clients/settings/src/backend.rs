//! What the app talks to, off the GTK main thread: the runner through the typed client
//! (`utter-ipc`, one shared connection made again when it closed, so a restarted runner is
//! found again, and one more for the event subscription), the
//! systemd user manager over D-Bus (`org.freedesktop.systemd1.Manager`), and the config file
//! through the runner's own editor and checker (`utter_config::set_values`). Speech
//! models are listed from the runner's catalog (`utter_config::models`) and downloaded by the
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
            .or_else(utter_config::user_config_path)
            .ok_or("neither --config nor XDG_CONFIG_HOME or HOME is set")?;
        // A broken file must not keep the app from the runner (which runs the config it
        // loaded): what still reads of it is used, as the CLI does.
        let loaded = match utter_config::load(Some(&config)) {
            Ok(loaded) => loaded.config,
            Err(_) => utter_config::salvage_client_settings(Some(&config)),
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
            ..Default::default()
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
    ///
    /// A subscription the runner dropped (this app fell behind) is made again at once on a
    /// fresh connection, starting with a new snapshot.
    pub async fn follow(self, tx: tokio::sync::mpsc::Sender<Option<Event>>) {
        loop {
            let mut dropped = false;
            if let Ok(mut client) = self.connect().await
                && client.subscribe_with(true).await.is_ok()
            {
                while let Some(params) = client.next_event().await {
                    dropped = matches!(params.event, Event::Dropped { .. });
                    if tx.send(Some(params.event)).await.is_err() {
                        return;
                    }
                    if dropped {
                        break;
                    }
                }
            }
            if dropped {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                continue;
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
/// written ([`utter_config::set_in_file`]).
///
/// # Errors
/// Every issue as `file:line: message` (nothing was written), or the write error.
pub fn save_config(
    path: &Path,
    edits: &[(String, toml_edit::Value)],
) -> Result<Vec<String>, String> {
    utter_config::set_in_file(path, edits, true)
        .map(|edited| edited.changed)
        .map_err(|e| e.to_string())
}

/// What the config file says now (for the forms), or why it cannot be read.
pub fn read_config(path: &Path) -> Result<utter_config::Config, String> {
    match utter_config::load(Some(path)) {
        Ok(loaded) => Ok(loaded.config),
        Err(e) => Err(e.to_string()),
    }
}

/// systemd's well-known name and its manager object.
const SYSTEMD: &str = "org.freedesktop.systemd1";
const MANAGER_PATH: &str = "/org/freedesktop/systemd1";

/// The user manager (`org.freedesktop.systemd1.Manager`) on the session bus.
///
/// (systemd's private socket, `$XDG_RUNTIME_DIR/systemd/private`, is not used: zbus 5.19
/// panics on the sender field of systemd's replies there, "Invalid unique name".)
///
/// # Errors
/// No session bus, or no systemd on it: what to run instead.
async fn user_manager() -> Result<zbus::Proxy<'static>, String> {
    let conn = zbus::Connection::session().await.map_err(|e| {
        format!("no session bus ({e}); use `systemctl --user start|stop|restart {UNIT}`")
    })?;
    let dbus = zbus::fdo::DBusProxy::new(&conn)
        .await
        .map_err(|e| e.to_string())?;
    let on_bus = dbus
        .name_has_owner(SYSTEMD.try_into().expect("a valid bus name"))
        .await
        .unwrap_or(false);
    if !on_bus {
        return Err(format!(
            "systemd's user manager is not on this session bus; use `systemctl --user start|stop|restart {UNIT}`"
        ));
    }
    manager_proxy(&conn).await
}

async fn manager_proxy(conn: &zbus::Connection) -> Result<zbus::Proxy<'static>, String> {
    let path = zbus::zvariant::ObjectPath::from_static_str_unchecked(MANAGER_PATH);
    systemd_proxy(conn, path, "org.freedesktop.systemd1.Manager")
        .await
        .map_err(|e| format!("no systemd user manager: {e}"))
}

/// A proxy to one of systemd's objects that reads each property when asked (the app reads
/// one or two, once).
async fn systemd_proxy(
    conn: &zbus::Connection,
    path: zbus::zvariant::ObjectPath<'static>,
    interface: &'static str,
) -> Result<zbus::Proxy<'static>, String> {
    zbus::proxy::Builder::new(conn)
        .destination(SYSTEMD)
        .and_then(|b| b.path(path))
        .and_then(|b| b.interface(interface))
        .map_err(|e| e.to_string())?
        .cache_properties(zbus::proxy::CacheProperties::No)
        .build()
        .await
        .map_err(|e| e.to_string())
}

/// The unit's `ActiveState` (`active`, `inactive`, `failed`, `activating`, ...) and
/// `Result` (`success`, `exit-code`, ...).
async fn unit_state(manager: &zbus::Proxy<'static>) -> Result<(String, String), String> {
    let path: zbus::zvariant::OwnedObjectPath = manager
        .call("LoadUnit", &(UNIT,))
        .await
        .map_err(|e| format!("systemd does not know {UNIT}: {e}"))?;
    let unit = systemd_proxy(
        manager.connection(),
        path.clone().into_inner(),
        "org.freedesktop.systemd1.Unit",
    )
    .await?;
    let service = systemd_proxy(
        manager.connection(),
        path.into_inner(),
        "org.freedesktop.systemd1.Service",
    )
    .await?;
    let active: String = unit
        .get_property("ActiveState")
        .await
        .map_err(|e| e.to_string())?;
    let result: String = service.get_property("Result").await.unwrap_or_default();
    Ok((active, result))
}

/// How long a start, stop or restart may take before the app says it is still going on.
const JOB_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// One of `StartUnit`, `StopUnit`, `RestartUnit` on the user manager, then waiting until
/// the unit is there (`active` after a start or restart, `inactive` after a stop); or
/// enabling the unit (`EnableUnitFiles`, then `Reload`).
///
/// # Errors
/// No user manager ([`user_manager`]), systemd refused the job, or the unit ended
/// `failed` (with its `Result` and the command that shows its log).
pub async fn systemd(verb: &'static str) -> Result<String, String> {
    let manager = user_manager().await?;
    let refused = |method: &str, e: zbus::Error| {
        format!("systemd's user manager refused {method} {UNIT}: {e}")
    };
    let (method, wanted) = match verb {
        "start" => ("StartUnit", "active"),
        "stop" => ("StopUnit", "inactive"),
        "restart" => ("RestartUnit", "active"),
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
            return Ok("enabled (starts with the graphical session)".into());
        }
        other => return Err(format!("unknown systemd action {other}")),
    };
    manager
        .call_method(method, &(UNIT, "replace"))
        .await
        .map_err(|e| refused(method, e))?;
    // The job is queued; say what the unit became, not that it was asked.
    let deadline = tokio::time::Instant::now() + JOB_WAIT;
    loop {
        let (active, result) = unit_state(&manager).await?;
        if active == wanted {
            return Ok(format!("is {active}"));
        }
        if active == "failed" {
            return Err(format!(
                "{UNIT} failed ({result}); `journalctl --user -u {UNIT}` shows why"
            ));
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!(
                "{UNIT} is still {active} after {} s",
                JOB_WAIT.as_secs()
            ));
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
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
    /// `installed`, `incomplete` or `not-installed` ([`utter_config::models::InstallState`]).
    pub state: &'static str,
    /// Where it is (or would be) installed: `<models dir>/<name>`.
    pub dir: PathBuf,
}

/// The speech models of the catalog (`$UTTER_MODELS_CATALOG`, else the built-in one) and
/// their state in the models directory.
///
/// # Errors
/// An unreadable catalog, or no `XDG_DATA_HOME`/`HOME` to find the models directory.
pub fn models() -> Result<Vec<ModelRow>, String> {
    let catalog = utter_config::models::Catalog::from_env()?;
    let dir = utter_config::models::models_dir()
        .ok_or("neither XDG_DATA_HOME nor HOME is set, so there is no models directory")?;
    Ok(catalog
        .models
        .iter()
        .map(|m| ModelRow {
            name: m.name.clone(),
            description: m.description.clone(),
            size: m.size(),
            state: m.state(&dir.join(&m.name)).as_str(),
            dir: dir.join(&m.name),
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

/// How long a download may go without a line of progress before it is stopped.
const PULL_STALL: std::time::Duration = std::time::Duration::from_secs(120);

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
/// and then one [`Pull::Done`]. Lines longer than 64 KiB and lines that are not JSON are
/// skipped; a child silent for [`PULL_STALL`] is killed.
pub async fn pull_model(config: PathBuf, name: String, tx: tokio::sync::mpsc::Sender<Pull>) {
    let mut command = tokio::process::Command::new(utter_binary());
    command
        .arg("--config")
        .arg(&config)
        .args(["models", "pull", &name, "--json"]);
    follow_pull(command, tx).await;
}

/// Run `command` (an `utter models pull --json`) and report its JSON lines to `tx`.
async fn follow_pull(mut command: tokio::process::Command, tx: tokio::sync::mpsc::Sender<Pull>) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt};
    const MAX_LINE: u64 = 64 * 1024;
    const MAX_STDERR: u64 = 64 * 1024;
    let spawned = command
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
    // Stderr: the first 64 KiB kept (as text, whatever its bytes), the rest read and
    // dropped so that the child never writes into a closed pipe.
    let mut stderr = child.stderr.take();
    let stderr_text = tokio::spawn(async move {
        let mut kept = Vec::new();
        if let Some(stderr) = stderr.as_mut() {
            let _ = (&mut *stderr).take(MAX_STDERR).read_to_end(&mut kept).await;
            let _ = tokio::io::copy(stderr, &mut tokio::io::sink()).await;
        }
        String::from_utf8_lossy(&kept).into_owned()
    });
    let mut outcome = None;
    if let Some(stdout) = child.stdout.take() {
        let mut reader = tokio::io::BufReader::new(stdout);
        let mut line = Vec::new();
        // Inside a line longer than MAX_LINE: its rest is skipped.
        let mut skipping = false;
        loop {
            line.clear();
            let read = tokio::time::timeout(
                PULL_STALL,
                (&mut reader).take(MAX_LINE).read_until(b'\n', &mut line),
            )
            .await;
            match read {
                Err(_) => {
                    let _ = child.start_kill();
                    outcome = Some(Err(format!(
                        "utter models pull said nothing for {} s, so it was stopped; what it downloaded is kept to resume",
                        PULL_STALL.as_secs()
                    )));
                    break;
                }
                Ok(Err(_) | Ok(0)) => break,
                Ok(Ok(_)) => {}
            }
            let whole = line.ends_with(b"\n");
            if std::mem::replace(&mut skipping, !whole) || !whole {
                continue;
            }
            let Ok(event) = serde_json::from_slice::<Value>(&line) else {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What a pull reports for a child that prints `script`'s output.
    async fn reports(script: &str) -> Vec<Pull> {
        let mut command = tokio::process::Command::new("/bin/sh");
        command.args(["-c", script]);
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        tokio::spawn(follow_pull(command, tx));
        let mut all = Vec::new();
        while let Some(r) = rx.recv().await {
            all.push(r);
        }
        all
    }

    #[tokio::test]
    async fn garbage_long_lines_and_bad_bytes_are_skipped_and_the_result_kept() {
        let got = reports(
            r#"echo 'not json'; printf '\377\376{"event":"progress"}\n'
               head -c 300000 /dev/zero | tr '\0' x; echo '{"event":"result","ok":false}'
               echo '{"event":"progress","file":"m.bin","bytes":5,"size":10}'
               echo '{"event":"result","ok":true,"status":"installed"}'"#,
        )
        .await;
        assert_eq!(
            got,
            vec![
                Pull::Progress {
                    file: "m.bin".into(),
                    bytes: 5,
                    size: 10
                },
                Pull::Done(Ok("installed".into()))
            ]
        );
    }

    #[tokio::test]
    async fn without_a_result_stderr_says_why_whatever_its_bytes() {
        let got = reports(r#"printf 'caf\351: no such model\n' >&2; exit 2"#).await;
        assert_eq!(
            got,
            vec![Pull::Done(Err("caf\u{fffd}: no such model".into()))]
        );
        let got = reports("exit 3").await;
        assert!(
            matches!(&got[..], [Pull::Done(Err(e))] if e.contains("without a result")),
            "{got:?}"
        );
    }
}
