//! Who may use the client socket (reference §9.1, §9.3, improved where §12 items 35–37 list
//! gaps).
//!
//! Every connection's peer is identified with `SO_PEERCRED` (pid, uid) and the executable
//! behind `/proc/<pid>/exe`. The decision, first match:
//!
//! 1. a process of another user → refused;
//! 2. the runner's own `utter` binary (the same path as `/proc/self/exe` at start, or the
//!    same device and inode) → admitted, so the CLI works with no configuration;
//! 3. `[socket] allow_same_uid = true` → admitted (a development switch; warned about);
//! 4. the executable is on `[socket] allow_binaries` → admitted. An entry containing `/`
//!    must equal the executable's absolute path (as written, or after resolving its
//!    symlinks);
//!    a bare name must equal the executable's file name exactly: `python3` does not admit
//!    `python3.11`;
//! 5. anyone else of this user may connect but must send `runner.auth {token}` before any
//!    other method (except `runner.version`).
//!
//! A missing `[socket]` table is the same as an empty one: it opens nothing.
//!
//! The token is `[socket] token` when set, else the content of the token file
//! `$XDG_STATE_HOME/utter/runner-token` (default `~/.local/state/utter/runner-token`),
//! created 0600 with 32 random bytes as unpadded URL-safe base64 when absent. The file
//! always holds the token in force, so clients of this user can read it. Tokens are
//! compared in constant time.
//!
//! The executable is read after the connection is accepted; a process that exits and whose
//! pid is reused in between could be judged by the wrong executable. Every admitted path
//! belongs to this user's own processes, which can read the token file anyway, so this
//! gives nothing away that the token does not.

use std::collections::HashMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use utter_protocol::throttle::Throttle;
use utter_protocol::{ErrorCode, ErrorObject};

use tokio::sync::watch;

use utter_core::config::Config;
use utter_core::runner::Runner;
use utter_ipc::paths::read_token;

/// Who is on the other end of a connection.
#[derive(Debug, Clone)]
pub(crate) struct Peer {
    /// Process id (`None` when the kernel could not tell, e.g. another pid namespace).
    pub pid: Option<i32>,
    /// User id.
    pub uid: u32,
    /// The executable, from `/proc/<pid>/exe`.
    pub exe: Option<PathBuf>,
    /// (device, inode) of the executable.
    pub exe_id: Option<(u64, u64)>,
}

impl Peer {
    /// Identify the peer from its credentials.
    pub fn identify(pid: Option<i32>, uid: u32) -> Peer {
        let (exe, exe_id) = match pid.filter(|p| *p > 0) {
            Some(pid) => {
                let link = PathBuf::from(format!("/proc/{pid}/exe"));
                (
                    std::fs::read_link(&link).ok(),
                    std::fs::metadata(&link).ok().map(|m| (m.dev(), m.ino())),
                )
            }
            None => (None, None),
        };
        Peer {
            pid,
            uid,
            exe,
            exe_id,
        }
    }
}

/// What happens to a new connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Every method may be called; the string says why.
    Admitted(String),
    /// Only `runner.auth` and `runner.version` until the token is given.
    NeedsToken,
    /// Refused: one error frame with the reason, then the connection is closed.
    Rejected(String),
}

/// The runner's own executable, recorded at start (a rebuilt binary at the same path is
/// still recognised by its path; a moved one by its inode).
#[derive(Debug, Clone, Default)]
pub(crate) struct OwnExe {
    path: Option<PathBuf>,
    id: Option<(u64, u64)>,
}

impl OwnExe {
    pub fn current() -> OwnExe {
        OwnExe {
            path: std::fs::read_link("/proc/self/exe").ok(),
            id: std::fs::metadata("/proc/self/exe")
                .ok()
                .map(|m| (m.dev(), m.ino())),
        }
    }

    fn matches(&self, peer: &Peer) -> bool {
        let by_path = self.path.is_some() && self.path == peer.exe;
        let by_id = self.id.is_some() && self.id == peer.exe_id;
        by_path || by_id
    }
}

/// One `allow_binaries` entry, prepared.
#[derive(Debug, Clone)]
struct AllowEntry {
    written: String,
    /// For path entries: the path with its symlinks resolved, when it exists.
    resolved: Option<PathBuf>,
}

impl AllowEntry {
    fn new(written: &str) -> AllowEntry {
        let resolved = Path::new(written)
            .is_absolute()
            .then(|| std::fs::canonicalize(written).ok())
            .flatten();
        AllowEntry {
            written: written.to_owned(),
            resolved,
        }
    }

    fn admits(&self, exe: &Path) -> bool {
        if self.written.contains('/') {
            Path::new(&self.written) == exe || self.resolved.as_deref() == Some(exe)
        } else {
            exe.file_name()
                .is_some_and(|name| name == self.written.as_str())
        }
    }
}

/// The admission rules of one config.
#[derive(Debug, Clone)]
pub(crate) struct AccessRules {
    uid: u32,
    own: OwnExe,
    allow_binaries: Vec<AllowEntry>,
    allow_same_uid: bool,
}

impl AccessRules {
    pub fn new(config: &Config, own: &OwnExe, uid: u32) -> AccessRules {
        let section = config.socket.clone().unwrap_or_default();
        AccessRules {
            uid,
            own: own.clone(),
            allow_binaries: section
                .allow_binaries
                .iter()
                .filter(|e| !e.trim().is_empty())
                .map(|e| AllowEntry::new(e))
                .collect(),
            allow_same_uid: section.allow_same_uid,
        }
    }

    /// Decide about `peer` (module docs).
    pub fn admit(&self, peer: &Peer) -> Admission {
        if peer.uid != self.uid {
            return Admission::Rejected(format!(
                "permission denied: processes of uid {} may not use this runner (it serves uid {})",
                peer.uid, self.uid
            ));
        }
        if self.own.matches(peer) {
            return Admission::Admitted("the utter binary".into());
        }
        if self.allow_same_uid {
            return Admission::Admitted("[socket] allow_same_uid".into());
        }
        if let Some(exe) = &peer.exe {
            if let Some(entry) = self.allow_binaries.iter().find(|e| e.admits(exe)) {
                return Admission::Admitted(format!("[socket] allow_binaries {:?}", entry.written));
            }
        }
        Admission::NeedsToken
    }
}

/// What every connection of one socket shares.
pub(crate) struct Shared {
    pub runner: Arc<Runner>,
    pub stop: watch::Receiver<bool>,
    own: OwnExe,
    uid: u32,
    token_file: Option<PathBuf>,
    /// The token the file holds (the generated one, or the config's once written).
    file_token: Mutex<Option<String>>,
    /// Log bounds for what any peer can cause at will (see [`SocketLogs`]).
    pub logs: SocketLogs,
    /// The bytes waiting for all clients together, which subscriptions keep to
    /// ([`super::session::SUBSCRIBERS_BUDGET`]).
    pub subscribers: Arc<utter_protocol::QueueBudget>,
    /// Event subscriptions held, by client process (its pid, else its connection).
    shares: Arc<Mutex<HashMap<ClientKey, usize>>>,
    /// Slots of the subscriptions that follow the log
    /// ([`super::session::MAX_LOG_FOLLOWERS`]).
    pub log_followers: Arc<tokio::sync::Semaphore>,
}

/// Whose share a subscription counts in: a client process, or a connection whose peer has
/// no pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ClientKey {
    Process(i32),
    Connection(u64),
}

/// One subscription counted in its client's share; given back when dropped.
pub(crate) struct Share {
    shares: Arc<Mutex<HashMap<ClientKey, usize>>>,
    key: ClientKey,
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut shares = self.shares.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(held) = shares.get_mut(&self.key) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                shares.remove(&self.key);
            }
        }
    }
}

/// One log bound per kind of line a peer can cause at will, so that a client that
/// reconnects in a loop, guesses tokens or floods the socket cannot flood the journal: at
/// most 20 lines per 10 s each, then one line saying how many were left out.
#[derive(Default)]
pub(crate) struct SocketLogs {
    /// Refused peers (another user, no credentials).
    pub refused: Throttle,
    /// Connections refused because every slot is in use.
    pub full: Throttle,
    /// Wrong tokens, authentication timeouts, the rate limit.
    pub auth: Throttle,
}

impl Shared {
    /// Count one more subscription for `peer`'s process (or, without a pid, for the
    /// connection).
    ///
    /// # Errors
    /// `-32003` when the process already holds
    /// [`MAX_SUBSCRIPTIONS`](super::session::MAX_SUBSCRIPTIONS), over all its connections.
    pub(crate) fn subscription_share(
        &self,
        peer: &Peer,
        connection: u64,
    ) -> Result<Share, ErrorObject> {
        let key = peer
            .pid
            .map_or(ClientKey::Connection(connection), ClientKey::Process);
        let mut shares = self.shares.lock().unwrap_or_else(|e| e.into_inner());
        let held = shares.entry(key).or_insert(0);
        let limit = super::session::MAX_SUBSCRIPTIONS;
        if *held >= limit {
            return Err(ErrorObject::new(
                ErrorCode::Denied,
                format!(
                    "this client already holds {held} event subscriptions over its connections, its share (at most {limit} per process); end one with runner.unsubscribe"
                ),
            ));
        }
        *held += 1;
        Ok(Share {
            shares: self.shares.clone(),
            key,
        })
    }

    /// `file_token` is what [`prepare_token`] wrote before the socket was bound.
    pub fn new(
        runner: Arc<Runner>,
        stop: watch::Receiver<bool>,
        file_token: Option<String>,
    ) -> Shared {
        let config = runner.config().config;
        let socket = config.socket.clone().unwrap_or_default();
        if socket.allow_same_uid {
            tracing::warn!(
                "[socket] allow_same_uid = true: every process of this user may drive the runner without a token (a development switch; turn it off for daily use)"
            );
        }
        let token_file = utter_core::paths::BaseDirs::from_env().token();
        Shared {
            runner,
            stop,
            own: OwnExe::current(),
            uid: nix::unistd::getuid().as_raw(),
            token_file,
            file_token: Mutex::new(file_token),
            logs: SocketLogs::default(),
            shares: Arc::default(),
            log_followers: Arc::new(tokio::sync::Semaphore::new(
                super::session::MAX_LOG_FOLLOWERS,
            )),
            subscribers: utter_protocol::QueueBudget::new(
                super::session::SUBSCRIBERS_BUDGET,
                super::session::SUBSCRIBERS_FLOOR,
            ),
        }
    }

    /// The admission rules of the config in force (read per connection, so a reload
    /// applies to new connections).
    pub fn rules(&self) -> AccessRules {
        AccessRules::new(&self.runner.config().config, &self.own, self.uid)
    }

    /// The token in force: `[socket] token` when set (written to the token file when it
    /// changed), else the token file's. A token file found readable by others is replaced
    /// first ([`ensure_token_file`]), so the token it held is refused from then on.
    pub fn token(&self) -> Option<String> {
        if let Some(path) = &self.token_file {
            let exposed =
                std::fs::symlink_metadata(path).is_ok_and(|m| m.permissions().mode() & 0o077 != 0);
            if exposed {
                let configured = self
                    .runner
                    .config()
                    .config
                    .socket
                    .map(|s| s.token.trim().to_owned())
                    .unwrap_or_default();
                match ensure_token_file(path, &configured) {
                    Ok(token) => *self.file_token.lock().expect("token lock") = Some(token),
                    Err(e) => tracing::warn!(token_file = %path.display(), "{e}"),
                }
            }
        }
        let configured = self
            .runner
            .config()
            .config
            .socket
            .map(|s| s.token.trim().to_owned())
            .unwrap_or_default();
        let mut file_token = self.file_token.lock().expect("token lock");
        if configured.is_empty() {
            return file_token.clone();
        }
        if file_token.as_deref() != Some(configured.as_str()) {
            if let Some(path) = &self.token_file {
                match write_token_atomically(path, &configured) {
                    Ok(()) => *file_token = Some(configured.clone()),
                    Err(e) => {
                        tracing::warn!(token_file = %path.display(), "cannot write the configured token: {e}")
                    }
                }
            }
        }
        Some(configured)
    }
}

/// Create (or check) the token file of `config` before the socket is bound, so that a client
/// that sees the socket also finds the token: `[socket] token` when set, else the file's,
/// else a new one. `None` (logged) when there is no token file.
pub(crate) fn prepare_token(config: &utter_core::config::Config) -> Option<String> {
    let configured = config
        .socket
        .as_ref()
        .map(|s| s.token.clone())
        .unwrap_or_default();
    let Some(path) = utter_core::paths::BaseDirs::from_env().token() else {
        tracing::warn!(
            "neither XDG_STATE_HOME nor HOME is set: no token file; only the allow-listed binaries can use the socket"
        );
        return None;
    };
    match ensure_token_file(&path, &configured) {
        Ok(token) => {
            tracing::info!(token_file = %path.display(), "client token ready");
            Some(token)
        }
        Err(e) => {
            tracing::error!(token_file = %path.display(), "{e}; clients other than the allow-listed binaries cannot authenticate");
            None
        }
    }
}

/// Make sure the token file exists, is ours and 0600, and holds `configured` when that is
/// not empty (else a token, generated when the file is missing or empty). Returns the token.
fn ensure_token_file(path: &Path, configured: &str) -> Result<String, String> {
    let configured = configured.trim();
    if let Some(dir) = path.parent() {
        utter_core::paths::ensure_private_dir(dir)?;
    }
    let existing = match std::fs::symlink_metadata(path) {
        Ok(meta) => {
            let uid = nix::unistd::getuid().as_raw();
            if !meta.is_file() || meta.uid() != uid {
                return Err(format!(
                    "{} is not a regular file owned by this user (uid {uid}); remove it",
                    path.display()
                ));
            }
            if meta.permissions().mode() & 0o077 != 0 {
                // Whoever could read it may hold it: a new one replaces it (the old one is
                // refused from now on), unless the config fixes the token.
                if configured.is_empty() {
                    tracing::warn!(token_file = %path.display(), "the token file was readable by others: replaced with a new token (clients read the new one; the old one is refused)");
                    let token = new_token()?;
                    write_token_atomically(path, &token)?;
                    return Ok(token);
                }
                tracing::warn!(token_file = %path.display(), "the token file was readable by others; set to 0600, but the token is fixed by [socket] token: change it there, it may have been read");
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
                    .map_err(|e| format!("cannot set {} to 0600: {e}", path.display()))?;
            }
            read_token(path)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("cannot inspect {}: {e}", path.display())),
    };
    let token = match (configured, existing) {
        ("", Some(existing)) => return Ok(existing),
        ("", None) => new_token()?,
        (configured, Some(existing)) if configured == existing => return Ok(existing),
        (configured, _) => configured.to_owned(),
    };
    write_token_atomically(path, &token)?;
    Ok(token)
}

/// Write `token` and a newline to a new 0600 file beside `path`, then rename it over `path`.
fn write_token_atomically(path: &Path, token: &str) -> Result<(), String> {
    utter_core::paths::write_atomic(path, format!("{token}\n").as_bytes(), 0o600)
        .map_err(|e| format!("cannot write {e}"))
}

/// 32 random bytes as unpadded URL-safe base64 (43 characters).
fn new_token() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| format!("no random bytes for the token: {e}"))?;
    Ok(base64_url(&bytes))
}

/// Unpadded URL-safe base64 (RFC 4648 §5).
fn base64_url(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Compare two secrets in time that depends only on their lengths.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let longest = a.len().max(b.len());
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..longest {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= x ^ y;
    }
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(uid: u32, exe: &str) -> Peer {
        Peer {
            pid: Some(4242),
            uid,
            exe: Some(PathBuf::from(exe)),
            exe_id: Some((1, 2)),
        }
    }

    fn rules(socket: Option<&str>) -> AccessRules {
        let text = match socket {
            Some(body) => format!("config_version = 1\n[socket]\n{body}\n"),
            None => "config_version = 1\n".to_owned(),
        };
        let config = utter_core::config::parse(&text, "test.toml")
            .unwrap()
            .config;
        let own = OwnExe {
            path: Some(PathBuf::from("/opt/utter/bin/utter")),
            id: Some((7, 99)),
        };
        AccessRules::new(&config, &own, 1000)
    }

    #[test]
    fn another_uid_is_always_refused() {
        for r in [rules(None), rules(Some("allow_same_uid = true"))] {
            let mut p = peer(1001, "/opt/utter/bin/utter");
            p.exe_id = Some((7, 99));
            assert!(matches!(r.admit(&p), Admission::Rejected(_)));
        }
    }

    #[test]
    fn the_utter_binary_is_admitted_by_path_or_inode() {
        let r = rules(None);
        assert!(matches!(
            r.admit(&peer(1000, "/opt/utter/bin/utter")),
            Admission::Admitted(_)
        ));
        let mut moved = peer(1000, "/elsewhere/utter-copy");
        moved.exe_id = Some((7, 99));
        assert!(matches!(r.admit(&moved), Admission::Admitted(_)));
        assert_eq!(
            r.admit(&peer(1000, "/usr/bin/utter")),
            Admission::NeedsToken
        );
    }

    #[test]
    fn a_missing_socket_table_opens_nothing() {
        assert_eq!(
            rules(None).admit(&peer(1000, "/usr/bin/python3")),
            Admission::NeedsToken
        );
    }

    #[test]
    fn bare_names_match_exactly_and_paths_match_whole() {
        let r = rules(Some(
            r#"allow_binaries = ["python3", "/usr/local/bin/voice"]"#,
        ));
        assert!(matches!(
            r.admit(&peer(1000, "/usr/bin/python3")),
            Admission::Admitted(_)
        ));
        for refused in [
            "/usr/bin/python3.11",
            "/usr/bin/python",
            "/usr/bin/python3-evil",
            "/usr/local/bin/voice2",
            "/tmp/usr/local/bin/voice",
        ] {
            assert_eq!(
                r.admit(&peer(1000, refused)),
                Admission::NeedsToken,
                "{refused}"
            );
        }
        assert!(matches!(
            r.admit(&peer(1000, "/usr/local/bin/voice")),
            Admission::Admitted(_)
        ));
        let same_uid = rules(Some("allow_same_uid = true"));
        assert!(matches!(
            same_uid.admit(&peer(1000, "/usr/bin/anything")),
            Admission::Admitted(_)
        ));
    }

    #[test]
    fn tokens_are_43_url_safe_characters() {
        let t = new_token().unwrap();
        assert_eq!(t.len(), 43);
        assert!(
            t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
        assert_ne!(t, new_token().unwrap());
        // RFC 4648 test vectors, URL-safe alphabet, no padding.
        assert_eq!(base64_url(b""), "");
        assert_eq!(base64_url(b"f"), "Zg");
        assert_eq!(base64_url(b"fo"), "Zm8");
        assert_eq!(base64_url(b"foo"), "Zm9v");
        assert_eq!(base64_url(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64_url(&[0xfb, 0xff]), "-_8");
    }

    #[test]
    fn constant_time_comparison() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
        assert!(constant_time_eq(b"", b""));
    }

    #[test]
    fn the_token_file_is_created_private_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/utter/runner-token");
        let first = ensure_token_file(&path, "").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(read_token(&path).as_deref(), Some(first.as_str()));
        assert_eq!(ensure_token_file(&path, "").unwrap(), first);
        // A configured token wins and is written for clients to read.
        assert_eq!(
            ensure_token_file(&path, " from-config ").unwrap(),
            "from-config"
        );
        assert_eq!(read_token(&path).as_deref(), Some("from-config"));
        // A file others can read is made private; a configured token cannot be replaced.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(
            ensure_token_file(&path, "from-config").unwrap(),
            "from-config"
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // A generated token others could read is replaced by a new one.
        let before = ensure_token_file(&path, "").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let after = ensure_token_file(&path, "").unwrap();
        assert_ne!(after, before, "an exposed token is rotated");
        assert_eq!(read_token(&path).as_deref(), Some(after.as_str()));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
