//! The running compositor, whichever it is: detection from the environment and one handle
//! over the three IPC clients ([`crate::niri`], [`crate::sway`], [`crate::hyprland`]).
//!
//! Each client keeps a [`Snapshot`] fresh from the compositor's event stream in a
//! `tokio::sync::watch` channel: reading the context costs no round trip, and an action's
//! effect is verified by waiting for the snapshot that shows it ([`wait_for`]).

use crate::hyprland::Hyprland;
use crate::link::BackendError;
use crate::link::LinkState;
use crate::model::Snapshot;
use crate::niri::Niri;
use crate::sway::Sway;
use serde_json::Value;
use std::path::PathBuf;

use std::time::Duration;
use tokio::sync::watch;

/// Which compositor the session runs, from its IPC environment variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detected {
    /// `$NIRI_SOCKET`.
    Niri(PathBuf),
    /// `$HYPRLAND_INSTANCE_SIGNATURE`: the instance directory holding Hyprland's two sockets
    /// ([`crate::hyprland::instance_dir`]).
    Hyprland(PathBuf),
    /// `$SWAYSOCK` (sway, or i3 through `$I3SOCK`: the same wire).
    Sway(PathBuf),
    /// None of them is set.
    None,
}

impl Detected {
    /// Read the environment: `NIRI_SOCKET` first (niri also sets nothing else), then
    /// `HYPRLAND_INSTANCE_SIGNATURE` (with `XDG_RUNTIME_DIR`), then `SWAYSOCK`, then
    /// `I3SOCK`. Empty values count as unset; a signature that is not one directory name
    /// counts as unset too (and is logged).
    pub fn from_env() -> Detected {
        let var = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let hyprland = std::env::var("HYPRLAND_INSTANCE_SIGNATURE")
            .ok()
            .filter(|s| !s.is_empty())
            .and_then(
                |signature| match crate::hyprland::check_signature(&signature) {
                    Ok(()) => Some(crate::hyprland::instance_dir(
                        var("XDG_RUNTIME_DIR").as_deref(),
                        &signature,
                    )),
                    Err(why) => {
                        tracing::warn!("{why}; not looking for Hyprland");
                        None
                    }
                },
            );
        if let Some(path) = var("NIRI_SOCKET") {
            Detected::Niri(path)
        } else if let Some(dir) = hyprland {
            Detected::Hyprland(dir)
        } else if let Some(path) = var("SWAYSOCK").or_else(|| var("I3SOCK")) {
            Detected::Sway(path)
        } else {
            Detected::None
        }
    }
}

impl Detected {
    /// The environment variables [`Detected::from_env`] reads, in order.
    pub const ENV_VARS: [&'static str; 4] = [
        "NIRI_SOCKET",
        "HYPRLAND_INSTANCE_SIGNATURE",
        "SWAYSOCK",
        "I3SOCK",
    ];

    /// `"niri"`, `"hyprland"`, `"sway"` or `"none"`.
    pub fn name(&self) -> &'static str {
        match self {
            Detected::Niri(_) => "niri",
            Detected::Hyprland(_) => "hyprland",
            Detected::Sway(_) => "sway",
            Detected::None => "none",
        }
    }

    /// The socket path (Hyprland's instance directory), if a compositor was detected.
    pub fn socket(&self) -> Option<&std::path::Path> {
        match self {
            Detected::Niri(p) | Detected::Hyprland(p) | Detected::Sway(p) => Some(p),
            Detected::None => None,
        }
    }
}

/// A connected compositor client, whichever it is.
pub enum Backend {
    /// niri, through [`crate::niri`].
    Niri(Niri),
    /// sway or i3, through [`crate::sway`].
    Sway(Sway),
    /// Hyprland, through [`crate::hyprland`].
    Hyprland(Hyprland),
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Backend({} {:?})", self.name(), self.version())
    }
}

impl Backend {
    /// Connect to the detected compositor; the returned client has its full state loaded.
    ///
    /// # Errors
    /// [`BackendError::Connect`] for [`Detected::None`] too (with an empty socket and
    /// `NotFound`), so callers have one error to report.
    pub async fn connect(detected: &Detected) -> Result<Backend, BackendError> {
        match detected {
            Detected::Niri(path) => Ok(Backend::Niri(Niri::connect(path.clone()).await?)),
            Detected::Sway(path) => Ok(Backend::Sway(Sway::connect(path.clone()).await?)),
            Detected::Hyprland(dir) => Ok(Backend::Hyprland(Hyprland::connect(dir.clone()).await?)),
            Detected::None => Err(BackendError::Connect {
                compositor: "none",
                socket: String::new(),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "none of NIRI_SOCKET, HYPRLAND_INSTANCE_SIGNATURE, SWAYSOCK, I3SOCK is set",
                ),
            }),
        }
    }

    /// The snapshot channel, kept fresh from the compositor's event stream.
    pub fn state(&self) -> watch::Receiver<Snapshot> {
        match self {
            Backend::Niri(n) => n.state(),
            Backend::Sway(s) => s.state(),
            Backend::Hyprland(h) => h.state(),
        }
    }

    /// The current snapshot (no round trip).
    pub fn snapshot(&self) -> Snapshot {
        self.state().borrow().clone()
    }

    /// Read the compositor's state again before the next [`Backend::snapshot`], when its
    /// events may not have told a change (sway sends none for a floating window moved or
    /// resized, nor does Hyprland); niri's event stream covers window layouts, so there it is
    /// the snapshot as it is. `false` when the re-read did not finish within `limit`.
    pub async fn resync(&self, limit: std::time::Duration) -> bool {
        match self {
            Backend::Niri(_) => true,
            Backend::Sway(s) => s.resync(limit).await,
            Backend::Hyprland(h) => h.resync(limit).await,
        }
    }

    /// The event connection's state.
    pub fn link(&self) -> LinkState {
        match self {
            Backend::Niri(n) => n.link(),
            Backend::Sway(s) => s.link(),
            Backend::Hyprland(h) => h.link(),
        }
    }

    /// `"niri"`, `"sway"` or `"hyprland"`.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Niri(_) => "niri",
            Backend::Sway(_) => "sway",
            Backend::Hyprland(_) => "hyprland",
        }
    }

    /// The compositor's version string.
    pub fn version(&self) -> Option<String> {
        match self {
            Backend::Niri(n) => n.version(),
            Backend::Sway(s) => s.version(),
            Backend::Hyprland(h) => h.version(),
        }
    }

    /// Send one request in the compositor's own form: a niri `Action` JSON object for niri,
    /// a command string for sway, a command (`dispatch …`) for Hyprland. A request of the other form is a [`BackendError::Io`]
    /// (a bug of the caller, never sent).
    ///
    /// # Errors
    /// [`BackendError::Refused`] with the compositor's words, or the connection's error.
    pub async fn send(&self, request: &Sent) -> Result<(), BackendError> {
        match (self, request) {
            (Backend::Niri(n), Sent::Niri(action)) => n.action(action.clone()).await,
            (Backend::Sway(s), Sent::Sway(command)) => s.command(command).await,
            (Backend::Hyprland(h), Sent::Hyprland(command)) => h.command(command).await,
            (backend, request) => Err(BackendError::Io {
                compositor: backend.name(),
                message: format!("cannot send {} to {}", request.describe(), backend.name()),
            }),
        }
    }

    /// The request that focuses window `id`: niri `FocusWindow`, sway `[con_id=N] focus`,
    /// Hyprland `dispatch focuswindow address:0x…`.
    pub fn focus_window(&self, id: u64) -> Sent {
        match self {
            Backend::Niri(_) => Sent::Niri(serde_json::json!({"FocusWindow": {"id": id}})),
            Backend::Sway(_) => Sent::Sway(format!("[con_id={id}] focus")),
            Backend::Hyprland(_) => Sent::Hyprland(format!(
                "dispatch focuswindow {}",
                crate::hyprland::window_selector(id)
            )),
        }
    }

    /// The request that closes window `id`: niri `CloseWindow`, sway `[con_id=N] kill`,
    /// Hyprland `dispatch closewindow address:0x…`.
    pub fn close_window(&self, id: u64) -> Sent {
        match self {
            Backend::Niri(_) => Sent::Niri(serde_json::json!({"CloseWindow": {"id": id}})),
            Backend::Sway(_) => Sent::Sway(format!("[con_id={id}] kill")),
            Backend::Hyprland(_) => Sent::Hyprland(format!(
                "dispatch closewindow {}",
                crate::hyprland::window_selector(id)
            )),
        }
    }

    /// The request that starts `argv` through the compositor: niri `Spawn` (no shell), sway
    /// `exec exec '<program>' '<arg>'…` ([`crate::sway::exec_argv`]), Hyprland
    /// `dispatch exec exec '<program>' …` ([`crate::hyprland::exec_argv`]).
    ///
    /// # Errors
    /// A message when `argv` is empty, an argument holds a control character, or an
    /// argument cannot pass through sway's `exec` safely (a single quote, a backslash).
    pub fn spawn(&self, argv: &[String]) -> Result<Sent, String> {
        if argv.is_empty() || argv[0].is_empty() {
            return Err("argv must name a program".into());
        }
        if let Some(bad) = argv.iter().find(|a| a.chars().any(char::is_control)) {
            return Err(format!("argument {bad:?} contains a control character"));
        }
        match self {
            Backend::Niri(_) => Ok(Sent::Niri(serde_json::json!({"Spawn": {"command": argv}}))),
            Backend::Sway(_) => {
                let command = format!("exec {}", crate::sway::exec_argv(argv)?);
                if command.len() > crate::sway::MAX_EXEC {
                    return Err(format!(
                        "the sway command would be {} bytes, more than the {} sway's exec reads",
                        command.len(),
                        crate::sway::MAX_EXEC
                    ));
                }
                Ok(Sent::Sway(command))
            }
            Backend::Hyprland(_) => Ok(Sent::Hyprland(format!(
                "dispatch exec {}",
                crate::hyprland::exec_argv(argv)?
            ))),
        }
    }
}

/// One request as sent to the compositor (the result's `sent` member).
#[derive(Debug, Clone, PartialEq)]
pub enum Sent {
    /// A niri `Action` object, e.g. `{"FocusWorkspace":{"reference":{"Index":2}}}`.
    Niri(Value),
    /// A sway command, e.g. `workspace number 2`.
    Sway(String),
    /// A Hyprland command as sent after its flags, e.g. `dispatch workspace 2`.
    Hyprland(String),
}

impl Sent {
    /// The JSON form: the action object, or the command string.
    pub fn to_json(&self) -> Value {
        match self {
            Sent::Niri(v) => v.clone(),
            Sent::Sway(s) | Sent::Hyprland(s) => Value::String(s.clone()),
        }
    }

    /// A short human form for messages.
    pub fn describe(&self) -> String {
        match self {
            Sent::Niri(v) => v.to_string(),
            Sent::Sway(s) | Sent::Hyprland(s) => format!("{s:?}"),
        }
    }
}

/// Wait until `state` shows a snapshot for which `done` holds, at most `timeout`. Returns the
/// snapshot that satisfied it, or `None` on timeout (or when the client stopped).
pub async fn wait_for(
    state: &mut watch::Receiver<Snapshot>,
    timeout: Duration,
    done: impl FnMut(&Snapshot) -> bool,
) -> Option<Snapshot> {
    match tokio::time::timeout(timeout, state.wait_for(done)).await {
        Ok(Ok(snapshot)) => Some(snapshot.clone()),
        _ => None,
    }
}
