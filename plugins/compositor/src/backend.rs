//! The running compositor, whichever it is: detection from the environment and one handle
//! over the two IPC clients ([`crate::niri`], [`crate::sway`]).
//!
//! Each client keeps a [`Snapshot`] fresh from the compositor's event stream in a
//! `tokio::sync::watch` channel: reading the context costs no round trip, and an action's
//! effect is verified by waiting for the snapshot that shows it ([`Backend::wait_for`]).

use crate::model::Snapshot;
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::watch;

/// Which compositor the session runs, from its IPC environment variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detected {
    /// `$NIRI_SOCKET`.
    Niri(PathBuf),
    /// `$SWAYSOCK` (sway, or i3 through `$I3SOCK`: the same wire).
    Sway(PathBuf),
    /// None of them is set.
    None,
}

impl Detected {
    /// Read the environment: `NIRI_SOCKET` first (niri also sets nothing else), then
    /// `SWAYSOCK`, then `I3SOCK`. Empty values count as unset.
    pub fn from_env() -> Detected {
        let var = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        if let Some(path) = var("NIRI_SOCKET") {
            Detected::Niri(path)
        } else if let Some(path) = var("SWAYSOCK").or_else(|| var("I3SOCK")) {
            Detected::Sway(path)
        } else {
            Detected::None
        }
    }
}

/// A compositor IPC failure.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The socket could not be reached.
    #[error("cannot connect to {compositor} at {socket}: {source}")]
    Connect {
        /// `"niri"` or `"sway"`.
        compositor: &'static str,
        /// The socket path.
        socket: String,
        /// Why.
        source: std::io::Error,
    },
    /// The connection broke or the compositor sent something unreadable.
    #[error("{compositor} IPC: {message}")]
    Io {
        /// `"niri"` or `"sway"`.
        compositor: &'static str,
        /// What went wrong.
        message: String,
    },
    /// The compositor refused the request (niri's `{"Err": …}`, sway's `success: false`).
    #[error("{compositor} refused {request}: {message}")]
    Refused {
        /// `"niri"` or `"sway"`.
        compositor: &'static str,
        /// The request as sent.
        request: String,
        /// The compositor's own words.
        message: String,
    },
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
