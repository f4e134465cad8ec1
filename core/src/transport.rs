//! Plugin socket transports (PROTOCOL.md §1.1): `connect` (the runner listens, the plugin
//! dials in) and `listen` (the plugin listens, the runner dials in).
//!
//! A plugin's socket is `<dir>/<id>.sock`, `<dir>` being `$XDG_RUNTIME_DIR/utter/plugins` by
//! default. The directory is created with mode 0700 and must belong to this user; sockets
//! the runner binds are 0600. Whichever side listens, the runner checks the peer's
//! credentials (`SO_PEERCRED`): only the process it spawned, or one of that process's
//! descendants, may be on the other end.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::net::{UnixListener, UnixStream};
use tokio::process::Child;
use tokio::time::Instant;
use tracing::warn;
use utter_protocol::{ErrorCode, ErrorObject};

/// How often the runner retries dialing a `listen` plugin.
const DIAL_RETRY: Duration = Duration::from_millis(50);

/// The default directory of plugin sockets: `$XDG_RUNTIME_DIR/utter/plugins`, else
/// `<tmp>/utter-<uid>/utter/plugins`.
pub fn default_dir() -> PathBuf {
    crate::paths::BaseDirs::from_env().plugin_sockets()
}

/// The longest id kept in a socket name, in characters.
const MAX_ID_CHARS: usize = 128;

/// `id` with every character outside `[A-Za-z0-9_.-]` replaced by `_`, cut to 128
/// characters; `plugin` when nothing is left.
pub fn sanitize_id(id: &str) -> String {
    let cleaned: String = id
        .chars()
        .take(MAX_ID_CHARS)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if cleaned.is_empty() {
        return "plugin".into();
    }
    // "." and ".." would name directories, not sockets.
    if cleaned.chars().all(|c| c == '.') {
        cleaned.replace('.', "_")
    } else {
        cleaned
    }
}

/// The socket path of plugin `id` in `dir`.
pub fn socket_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{}.sock", sanitize_id(id)))
}

/// Create `dir` (mode 0700) if needed and make sure it is a directory of this user that
/// nobody else can enter.
pub fn prepare_dir(dir: &Path) -> Result<(), String> {
    crate::paths::ensure_private_dir(dir)
        .map_err(|e| format!("the plugin socket directory is unusable: {e}"))
}

/// Remove a socket left at `path` by an earlier run. Anything that is not a socket is left
/// alone and reported.
pub fn remove_stale(path: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => std::fs::remove_file(path)
            .map_err(|e| format!("cannot remove the stale socket {}: {e}", path.display())),
        Ok(_) => Err(format!(
            "{} exists and is not a socket; remove it",
            path.display()
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot inspect {}: {e}", path.display())),
    }
}

/// Bind the runner's listening socket for a `connect` plugin (mode 0600).
pub fn bind(path: &Path) -> Result<UnixListener, String> {
    let listener = std::os::unix::net::UnixListener::bind(path)
        .map_err(|e| format!("cannot bind the plugin socket {}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("cannot set {} to mode 0600: {e}", path.display()))?;
    listener
        .set_nonblocking(true)
        .and_then(|()| UnixListener::from_std(listener))
        .map_err(|e| format!("cannot listen on {}: {e}", path.display()))
}

/// Whether `pid` is `ancestor` or one of its descendants.
pub fn is_same_or_descendant(pid: i32, ancestor: i32) -> bool {
    let mut current = pid;
    // A bound on the walk: process trees are never this deep, and a racing reuse of pids
    // cannot make it loop.
    for _ in 0..256 {
        if current == ancestor {
            return true;
        }
        if current <= 1 {
            return false;
        }
        match crate::groups::parent_of(current) {
            Some(parent) => current = parent,
            None => return false,
        }
    }
    false
}

/// The peer's pid, when it is the spawned process `child_pid` or a descendant; else why not.
fn check_peer(stream: &UnixStream, child_pid: i32) -> Result<(), String> {
    let cred = stream
        .peer_cred()
        .map_err(|e| format!("cannot read the peer's credentials: {e}"))?;
    match cred.pid() {
        Some(pid) if is_same_or_descendant(pid, child_pid) => Ok(()),
        Some(pid) => Err(format!(
            "peer pid {pid} (uid {}) is not the plugin process {child_pid} or a descendant",
            cred.uid()
        )),
        None => Err("the peer's pid is unknown".into()),
    }
}

fn timed_out(id: &str, path: &Path, what: &str, limit: Duration) -> ErrorObject {
    ErrorObject::new(
        ErrorCode::Timeout,
        format!(
            "plugin {id:?}: {what} on {} within {} ms",
            path.display(),
            limit.as_millis()
        ),
    )
}

fn exited(id: &str, path: &Path, status: std::io::Result<std::process::ExitStatus>) -> ErrorObject {
    let status = status
        .map(|s| s.to_string())
        .unwrap_or_else(|e| e.to_string());
    ErrorObject::plugin(format!(
        "plugin {id:?} {status} before its socket {} was connected",
        path.display()
    ))
}

/// `connect`: wait for the spawned plugin (or a descendant) to dial in. Other peers are
/// refused (closed at once) and logged; the wait goes on until `limit` has passed
/// (`-32001`) or the plugin exits (`-32000`).
pub async fn accept_plugin(
    listener: &UnixListener,
    child: &mut Child,
    id: &str,
    path: &Path,
    limit: Duration,
) -> Result<UnixStream, ErrorObject> {
    let child_pid = child.id().map(|p| p as i32).unwrap_or(-1);
    let deadline = Instant::now() + limit;
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    warn!(plugin = %id, error = %e, "accepting on the plugin socket failed");
                    tokio::time::sleep(DIAL_RETRY).await;
                    continue;
                }
            },
            status = child.wait() => return Err(exited(id, path, status)),
            _ = tokio::time::sleep_until(deadline) => {
                return Err(timed_out(id, path, "the plugin did not connect", limit));
            }
        };
        match check_peer(&stream, child_pid) {
            Ok(()) => return Ok(stream),
            Err(why) => {
                warn!(plugin = %id, socket = %path.display(), "refused a connection: {why}");
                drop(stream);
            }
        }
    }
}

/// `listen`: dial the plugin's socket every 50 ms until it answers and is the spawned
/// plugin (or a descendant), `limit` has passed (`-32001`) or the plugin exits (`-32000`).
pub async fn dial_plugin(
    child: &mut Child,
    id: &str,
    path: &Path,
    limit: Duration,
) -> Result<UnixStream, ErrorObject> {
    let child_pid = child.id().map(|p| p as i32).unwrap_or(-1);
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(exited(id, path, Ok(status)));
        }
        if let Ok(stream) = UnixStream::connect(path).await {
            match check_peer(&stream, child_pid) {
                Ok(()) => return Ok(stream),
                Err(why) => {
                    warn!(plugin = %id, socket = %path.display(), "refused to use the socket: {why}");
                }
            }
        }
        tokio::select! {
            status = child.wait() => return Err(exited(id, path, status)),
            _ = tokio::time::sleep(DIAL_RETRY) => {}
        }
        if Instant::now() >= deadline {
            return Err(timed_out(
                id,
                path,
                "the plugin did not accept a connection",
                limit,
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_sanitised() {
        assert_eq!(sanitize_id("desktop"), "desktop");
        assert_eq!(sanitize_id("a/b c:d"), "a_b_c_d");
        assert_eq!(sanitize_id("x.y-z_1"), "x.y-z_1");
        assert_eq!(sanitize_id(".."), "__");
        assert_eq!(sanitize_id("é"), "_");
        assert_eq!(sanitize_id(""), "plugin");
        assert_eq!(sanitize_id(&"x".repeat(300)).len(), 128);
    }

    #[test]
    fn this_process_descends_from_itself_not_from_its_child() {
        let me = std::process::id() as i32;
        assert!(is_same_or_descendant(me, me));
        let parent = crate::groups::parent_of(me).expect("a parent");
        assert!(is_same_or_descendant(me, parent));
        assert!(!is_same_or_descendant(parent, me));
    }
}
