//! The client socket: JSON-RPC 2.0 with `Content-Length` framing (PROTOCOL.md §1, §2) on a
//! unix socket, by default `$XDG_RUNTIME_DIR/utter/runner.sock`. The methods are those of
//! the older runner (reference §2.3, §2.4) plus reload, confirmations, pending, version and
//! events (below).
//!
//! **Binding** ([`bind`]):
//!
//! * The directory is created mode 0700 when it is missing. An existing directory must be a
//!   directory owned by this user, else the runner refuses to start. For the default layout
//!   (`$XDG_RUNTIME_DIR/utter`, or `<tmp>/utter-<uid>/utter` without `XDG_RUNTIME_DIR`) an
//!   existing directory is also set back to 0700. For a path chosen explicitly (`--socket`,
//!   `[runner] socket_path`, `UTTER_RUNNER_SOCK`) an existing directory keeps the mode its
//!   owner gave it (a warning says when others can enter it): the socket itself is 0600, and
//!   every connection's peer is checked anyway. A directory others may *write* to is refused:
//!   they could put their own socket in its place.
//! * A single-instance lock: `flock` on `<socket>.lock` beside the socket, holding the pid of
//!   the runner that has it. A second runner does not touch the socket; it stops with an
//!   error naming the process that holds it. A socket file left by a runner that died
//!   (nobody holds the lock) is replaced. The lock file itself is left in place on exit, so
//!   two starting runners always lock the same file.
//! * The socket is bound under a temporary name, set to 0600, and renamed into place, so it
//!   never exists at its path with looser permissions.
//!
//! **Admission** (`socket/access.rs`): the peer's credentials come from `SO_PEERCRED` on every
//! connection. Default-deny: a process of another user is refused (one `-32003` error frame,
//! then the connection is closed); a process of this user is admitted when it is the
//! runner's own `utter` binary or on `[socket] allow_binaries` (or with the development
//! switch `allow_same_uid`), and otherwise must first send `runner.auth {token}` with the
//! token from `$XDG_STATE_HOME/utter/runner-token`. The older runner let every same-user
//! process in when `[socket]` was missing, and matched binary names by prefix (reference
//! §12, items 35 and 36); this one does neither.
//!
//! **Limits**: at most [`MAX_CONNECTIONS`] connections at once (more are refused with an
//! error frame), [`RESERVED_CONNECTIONS`] of them for admitted clients and
//! [`SHORT_CONNECTIONS`] of those for short calls only (no command, subscription or stream); at most
//! 16 event subscriptions per client process; per connection 1000 requests per sliding 10 s, and a bounded event backlog
//! per subscription; 4 MiB of frames waiting for one client and 32 MiB for all of them
//! together before subscribers that fell behind are dropped (`session::SUBSCRIBERS_BUDGET`).
//!
//! The CLI's side (the `utter-ipc` crate) talks only to a socket served by a process of its own
//! user, so a socket planted by someone else never sees a token.
//!
//! Methods (params → result). Those of the older runner keep their shapes (reference §2.3);
//! results carry more members than it sent, never fewer.
//!
//! | method | params | result |
//! |---|---|---|
//! | `runner.auth` | `{token}` | `{}` (also when already admitted) |
//! | `runner.version` | `{}` | `{version, protocol: "1.0", abi: 1, authenticated}` |
//! | `runner.status`, `runner.plugins` | `{}` | `{version, state, config, plugins: [{id, kind, epoch, status, provides, requires, permissions, methods, health, restarts, pid, last_error, warnings}]}` |
//! | `runner.command` | `{utterance, provenance?, timeout_ms?, context?, dry_run?}` | `{utterance, dry_run, plan, results: [{op, ok, detail, args, provenance, plugin?, result?, error?, needs_confirm}]}` |
//! | `runner.invoke` | `{plugin, method, params?}` | whatever the plugin returned |
//! | `runner.validate_plugin` | `{plugin}` | `{ok, negotiated: {protocol, abi}, unknown_capabilities, missing_requires, permissions: [{name, enforced, mechanism?, detail}], id, status, warnings, sandbox}` |
//! | `runner.reload` | `{}` | `{added, removed, restarted, unchanged}` |
//! | `runner.confirm` | `{id, approved: bool}` | `{}` |
//! | `runner.pending` | `{}` | `[{id, op, args, provenance, summary, created, expires}]` |
//! | `runner.subscribe` | `{}` | `{subscription}`, then `runner.event` notifications |
//! | `runner.unsubscribe` | `{subscription}` | `{}` |
//! | `handle.create` | `{data_b64 \| data \| size}` | `{handle, sha256, size}` |
//! | `handle.fetch` | `{handle}` | `{size, sha256, data_b64}` (≤ 64 KiB, else `-32007`) |
//! | `handle.stat` | `{handle}` | `{handle, sha256, size, created, ttl, expires, refcount}` |
//! | `handle.retain`, `handle.release` | `{handle}` | `{refcount}` |
//! | `fd.pass` | `{kind: "handle" \| "memfd" \| "memfd.ring", meta}` | `{kind, …}` with one descriptor (`SCM_RIGHTS`) |
//!
//! Handles are scoped to the connection that made them or received them through
//! `runner.invoke` (PROTOCOL.md §10, [`utter_core::handles`]).
//!
//! Errors: `-32003` before authentication ("authentication required (send runner.auth
//! {token})"), for a wrong token, past the rate limit, and for policy denials; `-32602` for
//! bad params (a config that does not load on `runner.reload`, with `data {errors,
//! warnings}`); `-32005` for an unknown plugin in `runner.invoke`; `-32601` for unknown
//! methods; plugin errors are passed on with their own code.
//!
//! Runner → client: `host.confirm {id, op, args, provenance, summary}` (ids `"0:<n>"`) on the
//! connection whose request needs the confirmation; the answer `{approved: true}` (or
//! `true`, or `{ok: true}`) approves, any other answer or an error reply denies. When
//! another door answers first or the confirmation times out, the client is sent
//! `$/cancel {id}`. Events arrive as `runner.event {subscription, event}`: first
//! `{event: "snapshot", status}`, then each runner event; a subscriber that falls more than
//! the runner's event backlog behind gets `{event: "dropped", reason}` and its subscription
//! ends.
//!
//! `runner.invoke` passes acting methods through the policy gates first: `action.invoke`,
//! `host.action` and `input.*` (which must carry `params.provenance`, as the older runner
//! required) and every other method the plugin's `plugin.describe` does not list as
//! side-effect-free; the older runner checked only `action.invoke` (reference §12, item 30).
//! `$/cancel {id}` ends a running request with `-32002`, and a client that disconnects
//! cancels its running requests; the older runner let them run on (reference §12, item 12).

mod access;
pub(crate) mod session;

use std::fs::File;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nix::fcntl::{Flock, FlockArg};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use utter_protocol::{ErrorCode, ErrorObject};

use utter_core::config::Config;
use utter_core::runner::Runner;

/// How many client connections are served at once; further ones are refused with an error
/// frame until one closes.
pub const MAX_CONNECTIONS: usize = 64;

/// Of [`MAX_CONNECTIONS`], how many only clients admitted without a token (the `utter`
/// binary, `[socket] allow_binaries`) may take, so that a flood of connections that never
/// authenticate cannot lock the CLI out. Includes [`SHORT_CONNECTIONS`].
pub const RESERVED_CONNECTIONS: usize = 24;

/// Of [`RESERVED_CONNECTIONS`], how many are kept for short calls (`status`, `say`,
/// `confirm`): a connection in one of them cannot start a subscription or a stream, so
/// followers that took every other slot cannot lock `utter status` out; and it is closed
/// after [`SHORT_IDLE`] without a request.
pub const SHORT_CONNECTIONS: usize = 8;

/// How long a connection in a short-call slot may send nothing while nothing of its own
/// runs.
pub const SHORT_IDLE: Duration = Duration::from_secs(10);

/// Which pool a connection's slot came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotKind {
    /// Any client's.
    General,
    /// Admitted clients' only.
    Reserved,
    /// Admitted clients' short calls only.
    Short,
}

/// A connection's slot; given back when dropped.
struct Slot {
    kind: SlotKind,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

/// The connection slots: a general pool, one reserved for admitted clients, and one kept
/// for their short calls.
struct Slots {
    general: Arc<Semaphore>,
    reserved: Arc<Semaphore>,
    short: Arc<Semaphore>,
}

impl Slots {
    fn new() -> Slots {
        Slots {
            general: Arc::new(Semaphore::new(MAX_CONNECTIONS - RESERVED_CONNECTIONS)),
            reserved: Arc::new(Semaphore::new(RESERVED_CONNECTIONS - SHORT_CONNECTIONS)),
            short: Arc::new(Semaphore::new(SHORT_CONNECTIONS)),
        }
    }

    fn from(pool: &Arc<Semaphore>, kind: SlotKind) -> Option<Slot> {
        let permit = pool.clone().try_acquire_owned().ok()?;
        Some(Slot {
            kind,
            _permit: permit,
        })
    }

    /// A slot for long-lived work: a general one, else (for an admitted client) a
    /// reserved one.
    fn take_long(&self, admitted: bool) -> Option<Slot> {
        Slots::from(&self.general, SlotKind::General).or_else(|| {
            admitted
                .then(|| Slots::from(&self.reserved, SlotKind::Reserved))
                .flatten()
        })
    }

    /// A slot for a new connection: a long-lived one, else (for an admitted client) a
    /// short-call one.
    fn take(&self, admitted: bool) -> Option<Slot> {
        self.take_long(admitted).or_else(|| {
            admitted
                .then(|| Slots::from(&self.short, SlotKind::Short))
                .flatten()
        })
    }
}

/// How long [`SocketTask::shutdown`] waits for connections to finish their last frames.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// How long after a connection ends the daemon gives freed memory back ([`give_memory_back`]):
/// once for all the connections that end meanwhile, not at each one.
const TRIM_AFTER: Duration = Duration::from_secs(1);

/// Give the heap's free pages back to the system (glibc `malloc_trim(0)`, every arena):
/// after a storm of large frames or stalled subscribers the allocator otherwise keeps what
/// it freed (measured: 94 MB ten seconds after a 315 MB burst, 32 MB idle; tests/abuse.rs).
/// Does nothing where the C library is not glibc.
fn give_memory_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim takes no pointers and only walks the allocator's own lists
        // under its locks; it is safe to call at any time from any thread.
        let released = unsafe { libc::malloc_trim(0) };
        tracing::debug!(
            released = released != 0,
            "freed memory given back (malloc_trim)"
        );
    }
}

/// The longest path a unix socket address can hold (`sun_path` is 108 bytes with its NUL).
const MAX_SOCKET_PATH: usize = 107;

/// Why the socket cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// Another runner holds the single-instance lock.
    #[error(
        "another runner{} is serving {}; stop it first (`systemctl --user stop utter`, or end that process), or give this one another --socket",
        .holder.map(|pid| format!(" (pid {pid})")).unwrap_or_default(),
        .path.display()
    )]
    Busy {
        /// The socket path.
        path: PathBuf,
        /// The pid written in the lock file by the runner holding it, when readable.
        holder: Option<u32>,
    },
    /// The directory is not safe to use (owned by someone else, not a directory).
    #[error("{0}")]
    Unsafe(String),
    /// Creating, locking or binding failed.
    #[error("{0}")]
    Bind(String),
}

/// The default socket path: `$XDG_RUNTIME_DIR/utter/runner.sock`, else
/// `<tmp>/utter-<uid>/utter/runner.sock` (reference §9.1).
pub fn default_path() -> PathBuf {
    utter_core::paths::BaseDirs::from_env().socket()
}

/// The socket path: `explicit`, else `[runner] socket_path`, else `$UTTER_RUNNER_SOCK`, else
/// [`default_path`] ([`Config::client_socket`]).
pub fn resolve_path(explicit: Option<&Path>, config: &Config) -> PathBuf {
    config.client_socket(explicit)
}

/// The socket file and the lock that makes it ours. Dropping it removes the socket file
/// (when it is still the one bound here), then releases the lock.
struct SocketFile {
    path: PathBuf,
    /// (device, inode) of the socket as bound.
    identity: Option<(u64, u64)>,
    _lock: Flock<File>,
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        let still_ours = std::fs::symlink_metadata(&self.path)
            .ok()
            .map(|m| (m.dev(), m.ino()))
            == self.identity;
        if still_ours {
            let _ = std::fs::remove_file(&self.path);
        }
        // The lock file goes too; it is still locked by us at this point, so a runner starting
        // now either saw our lock or creates a fresh file.
        let _ = std::fs::remove_file(lock_path(&self.path));
    }
}

/// A bound listener (and the lock that makes it ours).
pub struct Listener {
    listener: std::os::unix::net::UnixListener,
    file: SocketFile,
    /// The token written before binding.
    token: Option<String>,
}

impl Listener {
    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.file.path
    }
}

/// Create the directory, take the single-instance lock, write the client token file of
/// `config`, bind (see the module docs). The token file is in place before the socket
/// exists, so a client that sees the socket finds the token too.
///
/// # Errors
/// [`SocketError::Busy`] when another runner holds the lock; [`SocketError::Unsafe`] when
/// the directory belongs to another user or is not a directory; [`SocketError::Bind`] for
/// everything else (the message names the path and what to do).
pub fn bind(path: &Path, config: &Config) -> Result<Listener, SocketError> {
    let path = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    let len = path.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        return Err(SocketError::Bind(format!(
            "socket path {} is {len} bytes long; a unix socket path holds at most {MAX_SOCKET_PATH}: choose a shorter --socket",
            path.display()
        )));
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .ok_or_else(|| {
            SocketError::Bind(format!("socket path {} has no directory", path.display()))
        })?
        .to_path_buf();
    let is_default = path == default_path();
    prepare_dir(&dir, is_default)?;
    if is_default && std::env::var_os("XDG_RUNTIME_DIR").is_none_or(|v| v.is_empty()) {
        // `<tmp>/utter-<uid>` is shared ground: it must be ours too (reference §12, item 17).
        if let Some(parent) = dir.parent() {
            check_owned_dir(parent, true)?;
        }
    }

    let lock = take_lock(&path)?;

    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.file_type().is_socket() => {
            tracing::info!(socket = %path.display(), "replacing a stale socket (no runner holds its lock)");
            std::fs::remove_file(&path).map_err(|e| {
                SocketError::Bind(format!(
                    "cannot remove the stale socket {}: {e}",
                    path.display()
                ))
            })?;
        }
        Ok(_) => {
            return Err(SocketError::Bind(format!(
                "{} exists and is not a socket; move it away or choose another --socket",
                path.display()
            )));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(SocketError::Bind(format!(
                "cannot inspect {}: {e}",
                path.display()
            )));
        }
    }

    let token = access::prepare_token(config);
    let listener = bind_private(&path)?;
    listener.set_nonblocking(true).map_err(|e| {
        SocketError::Bind(format!("cannot make {} non-blocking: {e}", path.display()))
    })?;
    let identity = std::fs::symlink_metadata(&path)
        .ok()
        .map(|m| (m.dev(), m.ino()));
    Ok(Listener {
        listener,
        file: SocketFile {
            path,
            identity,
            _lock: lock,
        },
        token,
    })
}

/// Make sure `dir` exists, is a directory and is ours; create it (and missing parents) 0700.
fn prepare_dir(dir: &Path, make_private: bool) -> Result<(), SocketError> {
    match std::fs::metadata(dir) {
        Ok(_) => check_owned_dir(dir, make_private),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| {
                    SocketError::Bind(format!(
                        "cannot create the socket directory {}: {e}",
                        dir.display()
                    ))
                })?;
            // The umask may have narrowed the mode further; it cannot have widened it, but
            // set it exactly so the directory is what the docs say.
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
            check_owned_dir(dir, false)
        }
        Err(e) => Err(SocketError::Bind(format!(
            "cannot inspect the socket directory {}: {e}",
            dir.display()
        ))),
    }
}

/// `dir` must be a directory owned by this user. With `make_private`, group and other
/// access is removed; without, it is only warned about.
fn check_owned_dir(dir: &Path, make_private: bool) -> Result<(), SocketError> {
    let meta = std::fs::metadata(dir).map_err(|e| {
        SocketError::Bind(format!(
            "cannot inspect the socket directory {}: {e}",
            dir.display()
        ))
    })?;
    if !meta.is_dir() {
        return Err(SocketError::Unsafe(format!(
            "{} is not a directory; the socket needs a directory of its own",
            dir.display()
        )));
    }
    let uid = nix::unistd::getuid().as_raw();
    if meta.uid() != uid {
        return Err(SocketError::Unsafe(format!(
            "refusing to serve in {}: it belongs to uid {}, not to this user (uid {uid}); remove it, or choose a directory you own with --socket",
            dir.display(),
            meta.uid()
        )));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o022 != 0 && !make_private {
        // Whoever may write to the directory may replace the socket with their own.
        return Err(SocketError::Unsafe(format!(
            "refusing to serve in {}: other users may write to it (mode {mode:o}), so they could replace the socket; use a directory only you can write to",
            dir.display()
        )));
    }
    if mode & 0o077 != 0 {
        if make_private {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(|e| {
                SocketError::Bind(format!("cannot set {} to mode 0700: {e}", dir.display()))
            })?;
            tracing::info!(dir = %dir.display(), old_mode = format!("{mode:o}"), "socket directory set to mode 0700");
        } else {
            tracing::warn!(
                dir = %dir.display(),
                mode = format!("{mode:o}"),
                "the socket directory is open to other users; the socket is 0600 and every peer is checked, but a private (0700) directory is safer"
            );
        }
    }
    Ok(())
}

/// The lock file beside the socket: `<socket>.lock`.
fn lock_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// Take the single-instance lock and write our pid into it.
fn take_lock(path: &Path) -> Result<Flock<File>, SocketError> {
    let lock_file = lock_path(path);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(nix::libc::O_CLOEXEC | nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(&lock_file)
        .map_err(|e| {
            SocketError::Bind(format!(
                "cannot open the lock file {}: {e}",
                lock_file.display()
            ))
        })?;
    // A file by that name that is not a lock file of ours (empty, or a pid) is someone's
    // data: never written over.
    {
        use std::io::Read as _;
        let mut head = Vec::new();
        let regular = file.metadata().is_ok_and(|m| m.file_type().is_file());
        let looks_ours = regular
            && (&file).take(64).read_to_end(&mut head).is_ok()
            && head.len() < 32
            && head
                .iter()
                .all(|b| b.is_ascii_digit() || b.is_ascii_whitespace());
        if !looks_ours {
            return Err(SocketError::Bind(format!(
                "{} is not a lock file of utter's (not a regular file holding a process id); move it away, or set another [socket] socket_path",
                lock_file.display()
            )));
        }
    }
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(mut lock) => {
            let pid = std::process::id();
            let written = lock
                .set_len(0)
                .and_then(|()| lock.write_all(format!("{pid}\n").as_bytes()))
                .and_then(|()| lock.flush());
            if let Err(e) = written {
                tracing::warn!(lock = %lock_file.display(), error = %e, "cannot record our pid in the lock file");
            }
            Ok(lock)
        }
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
            let holder = std::fs::read_to_string(&lock_file)
                .ok()
                .and_then(|t| t.trim().parse().ok());
            Err(SocketError::Busy {
                path: path.to_path_buf(),
                holder,
            })
        }
        Err((_, errno)) => Err(SocketError::Bind(format!(
            "cannot lock {}: {errno}",
            lock_file.display()
        ))),
    }
}

/// Bind at `path` with mode 0600: bind under a temporary name in the same directory, chmod,
/// rename into place. When the temporary name would not fit in a socket address, bind in
/// place and chmod at once (the directory check above still applies).
fn bind_private(path: &Path) -> Result<std::os::unix::net::UnixListener, SocketError> {
    use std::os::unix::net::UnixListener;
    let bind_error = |p: &Path, e: std::io::Error| {
        SocketError::Bind(format!("cannot bind the socket {}: {e}", p.display()))
    };
    let private = std::fs::Permissions::from_mode(0o600);
    let dir = path.parent().unwrap_or(Path::new("."));
    let temp = dir.join(format!(".utter-{}.sock.tmp", std::process::id()));
    if temp.as_os_str().len() <= MAX_SOCKET_PATH {
        let _ = std::fs::remove_file(&temp);
        let listener = UnixListener::bind(&temp).map_err(|e| bind_error(&temp, e))?;
        let placed =
            std::fs::set_permissions(&temp, private).and_then(|()| std::fs::rename(&temp, path));
        if let Err(e) = placed {
            let _ = std::fs::remove_file(&temp);
            return Err(bind_error(path, e));
        }
        Ok(listener)
    } else {
        let listener = UnixListener::bind(path).map_err(|e| bind_error(path, e))?;
        std::fs::set_permissions(path, private).map_err(|e| bind_error(path, e))?;
        Ok(listener)
    }
}

/// The serving task.
pub struct SocketTask {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl SocketTask {
    /// Stop accepting, end every connection (requests still running are answered `-32000`,
    /// subscriptions get a final `dropped` event), and remove the socket file.
    pub async fn shutdown(self) {
        self.stop.send_replace(true);
        let _ = self.task.await;
    }
}

/// Serve clients until shut down. Must be called inside the tokio runtime.
pub fn serve(listener: Listener, runner: Arc<Runner>) -> SocketTask {
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(accept_loop(listener, runner, stop_rx));
    SocketTask { stop, task }
}

async fn accept_loop(listener: Listener, runner: Arc<Runner>, mut stop: watch::Receiver<bool>) {
    let Listener {
        listener,
        file,
        token,
    } = listener;
    let listener = match tokio::net::UnixListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(socket = %file.path.display(), error = %e, "cannot serve the client socket");
            return;
        }
    };
    let shared = Arc::new(access::Shared::new(runner, stop.clone(), token));
    let slots = Arc::new(Slots::new());
    let mut connections = JoinSet::new();
    // When to give freed memory back: a moment after the last connection that ended.
    let mut trim_at: Option<tokio::time::Instant> = None;
    tracing::info!(socket = %file.path.display(), "client socket ready");
    loop {
        // (A disabled branch's future is still built: an hour away stands for never.)
        let trim = tokio::time::sleep_until(
            trim_at.unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(3600)),
        );
        tokio::select! {
            () = trim, if trim_at.is_some() => {
                trim_at = None;
                let _ = tokio::task::spawn_blocking(give_memory_back).await;
            }
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    break;
                }
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let shared = shared.clone();
                    let slots = slots.clone();
                    // Identifying the peer reads /proc; it runs beside the accept loop.
                    connections.spawn(async move {
                        let Some(arrival) = session::identify(stream, &shared).await else {
                            return;
                        };
                        if let access::Admission::Rejected(reason) = &arrival.admission {
                            // Refused at once; it takes no slot.
                            session::reject(arrival.peer, reason, arrival.stream, &shared).await;
                            return;
                        }
                        let admitted = matches!(arrival.admission, access::Admission::Admitted(_));
                        match slots.take(admitted) {
                            Some(slot) => {
                                session::serve_connection(arrival, shared, slot, slots).await;
                            }
                            None => {
                                if let Some(suppressed) = shared.logs.full.allow() {
                                    tracing::warn!(limit = MAX_CONNECTIONS, admitted, suppressed, "too many client connections; refusing one");
                                }
                                session::refuse(
                                    arrival.stream,
                                    ErrorObject::new(
                                        ErrorCode::Denied,
                                        if admitted {
                                            format!("too many connections to the runner (all {MAX_CONNECTIONS} are in use); try again later")
                                        } else {
                                            format!("too many connections to the runner ({} are open to unauthenticated clients, {RESERVED_CONNECTIONS} more only to the utter binary and allow-listed programs); try again later", MAX_CONNECTIONS - RESERVED_CONNECTIONS)
                                        },
                                    ),
                                )
                                .await;
                            }
                        }
                    });
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning,
                    // and log it as rarely as the other lines a peer can cause.
                    if let Some(suppressed) = shared.logs.full.allow() {
                        tracing::warn!(error = %e, suppressed, "accept failed");
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {
                // At most once a TRIM_AFTER, however many close meanwhile.
                trim_at.get_or_insert_with(|| tokio::time::Instant::now() + TRIM_AFTER);
            }
        }
    }
    drop(listener);
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        connections.abort_all();
    }
    drop(file);
    tracing::info!("client socket closed");
}
