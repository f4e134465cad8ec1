//! The client socket: JSON-RPC over `$XDG_RUNTIME_DIR/utter/runner.sock` (stub; the session
//! service work fills it in).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::Config;
use crate::runner::Runner;

/// Why the socket cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// Creating, locking or binding failed.
    #[error("{0}")]
    Bind(String),
}

/// The socket path: `explicit`, else `[runner] socket_path`, else `$UTTER_RUNNER_SOCK`, else
/// `$XDG_RUNTIME_DIR/utter/runner.sock`.
pub fn resolve_path(explicit: Option<&Path>, config: &Config) -> PathBuf {
    if let Some(p) = explicit {
        return p.to_path_buf();
    }
    if !config.runner.socket_path.is_empty() {
        return PathBuf::from(&config.runner.socket_path);
    }
    if let Some(p) = std::env::var_os("UTTER_RUNNER_SOCK").filter(|v| !v.is_empty()) {
        return PathBuf::from(p);
    }
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join(format!("utter-{}", nix::unistd::getuid())));
    runtime.join("utter").join("runner.sock")
}

/// A bound listener (and the lock that makes it ours).
pub struct Listener {
    _path: PathBuf,
}

/// Create the directory, take the lock, bind.
///
/// # Errors
/// [`SocketError::Bind`].
pub fn bind(path: &Path) -> Result<Listener, SocketError> {
    Ok(Listener {
        _path: path.to_path_buf(),
    })
}

/// The serving task.
pub struct SocketTask;

impl SocketTask {
    /// Stop accepting, close connections, remove the socket file.
    pub async fn shutdown(self) {}
}

/// Serve clients until shut down.
pub fn serve(_listener: Listener, _runner: Arc<Runner>) -> SocketTask {
    SocketTask
}
