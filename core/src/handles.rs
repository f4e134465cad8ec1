//! The handle store (PROTOCOL.md §10): bulk data named `handle://<sha256 hex>`.
//!
//! Blobs are content-addressed files under the store root (`[runner] handle_root`, else
//! `$XDG_RUNTIME_DIR/utter/handles`, mode 0700; each runner process in `runner-<pid>`), written to a temporary file, synced and
//! renamed into place, so a reader never sees half a blob. A handle string is only ever
//! turned into a path after its syntax was checked (exactly 64 lowercase hex digits), so it
//! cannot name anything else.
//!
//! Handles are scoped. A scope is one client connection or one plugin; it sees the handles it
//! created and those passed to it in a request or response the runner relayed, and no others
//! (the older runner searched every scope; reference §12, item 26). Each scope holds a
//! reference count per handle; a blob is deleted by the collector once no scope refers to it
//! or its time to live (`[runner] handle_ttl`, renewed by `create` and `retain`) has passed.
//! Each client may hold at most its share, `quota` bytes but never more than half of `total`,
//! over all its connections (the scopes of one client process count together, see
//! [`HandleStore::set_owner`]; each plugin is a client of its own), and all scopes together
//! at most `total` bytes (the store usually lives in `$XDG_RUNTIME_DIR`, a tmpfs: memory).
//! So no one client can fill the store: when it is full, the client over its share is the
//! one refused, and another still stores. A runner that
//! stops cleanly removes its blobs ([`HandleStore::remove_all`]); one that was killed has
//! its directory removed by the next runner that opens the store.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use utter_protocol::{ErrorCode, ErrorObject};

/// Largest blob `handle.fetch` returns inline, in bytes.
pub const MAX_INLINE: u64 = 65_536;
/// Bytes one scope may hold unless configured (`[runner] handle_quota`'s default).
pub const DEFAULT_QUOTA: u64 = crate::config::DEFAULT_HANDLE_QUOTA;
/// Bytes all scopes together may hold unless configured (`[runner] handle_quota_total`'s
/// default).
pub const DEFAULT_TOTAL_QUOTA: u64 = crate::config::DEFAULT_HANDLE_QUOTA_TOTAL;
/// The prefix of every handle.
pub const PREFIX: &str = "handle://";

/// Who holds handles: a client connection or a plugin.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// One client connection, by its connection number.
    Client(u64),
    /// One plugin, by its id.
    Plugin(String),
}

/// The digest a handle names, when its syntax is exactly `handle://` (optionally followed by
/// `sha256/`) and 64 lowercase hex digits.
pub fn parse(handle: &str) -> Option<&str> {
    let rest = handle.strip_prefix(PREFIX)?;
    let hex = rest.strip_prefix("sha256/").unwrap_or(rest);
    let ok = hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    ok.then_some(hex)
}

pub use utter_protocol::digest::sha256_hex as digest_hex;

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

struct Blob {
    size: u64,
    /// Who created it: its bytes count against that client's share until the blob is gone,
    /// whoever holds it then (a handle passed to a plugin is still its creator's).
    creator: Holder,
    /// Unix seconds of the last create or retain.
    created: f64,
    expires_at: Instant,
}

/// Whose share bytes count against: a client process (all its connections), or a scope of
/// its own (a plugin, a client whose pid is unknown).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Holder {
    Process(u32),
    Scope(Scope),
}

#[derive(Default)]
struct Index {
    blobs: HashMap<String, Blob>,
    /// Per scope: the handles it sees, with its reference count for each (0: visible only).
    scopes: HashMap<Scope, HashMap<String, u64>>,
    /// The client process of each client scope whose peer's pid is known.
    owners: HashMap<Scope, u32>,
}

impl Index {
    fn visible(&self, scope: &Scope, digest: &str) -> bool {
        self.scopes
            .get(scope)
            .is_some_and(|held| held.contains_key(digest))
    }

    /// The digests held by `scope`'s client: by every scope of the same client process, or
    /// by `scope` alone.
    fn client_digests(&self, scope: &Scope) -> HashSet<&String> {
        let owner = self.owners.get(scope);
        let mut digests = HashSet::new();
        for (s, held) in &self.scopes {
            if s == scope || (owner.is_some() && self.owners.get(s) == owner) {
                digests.extend(held.keys());
            }
        }
        digests
    }

    /// Whose share `scope`'s bytes count against.
    fn holder(&self, scope: &Scope) -> Holder {
        self.owners
            .get(scope)
            .map_or_else(|| Holder::Scope(scope.clone()), |pid| Holder::Process(*pid))
    }

    /// Bytes held by `scope`'s client, or created by it and still stored (each blob once).
    fn used(&self, scope: &Scope) -> u64 {
        let holder = self.holder(scope);
        let held = self.client_digests(scope);
        self.blobs
            .iter()
            .filter(|(d, b)| b.creator == holder || held.contains(d))
            .map(|(_, b)| b.size)
            .sum()
    }

    fn referenced(&self, digest: &str) -> bool {
        self.scopes
            .values()
            .any(|held| held.get(digest).is_some_and(|n| *n > 0))
    }
}

/// The store. Cheap to share behind an [`Arc`].
pub struct HandleStore {
    root: PathBuf,
    ttl: Duration,
    quota: u64,
    total: u64,
    index: Mutex<Index>,
}

/// Why the handle store refused (PROTOCOL.md §10.1). Each has its JSON-RPC code and becomes
/// an [`ErrorObject`] (with `data`) where it leaves the core.
#[derive(Debug, thiserror::Error)]
pub enum HandleError {
    /// Not of the form `handle://<64 lowercase hex digits>` (`-32602`).
    #[error("not a handle: {0:?} (expected handle://<64 lowercase hex digits>)")]
    Malformed(String),
    /// Unknown, or not visible to this scope (`-32602`).
    #[error(
        "unknown handle {0:?}: it does not exist, has expired, or was not passed to this connection"
    )]
    Unknown(String),
    /// Past its time to live (`-32000`).
    #[error("handle expired: {0}")]
    Expired(String),
    /// The client (all its connections) or plugin would hold more than its share
    /// (`-32005`, `data {used, size, quota}`).
    #[error(
        "handle quota exceeded: this client holds {used} bytes over its connections, {size} more would pass its share of {quota} bytes ([runner] handle_quota, at most half of handle_quota_total); release handles first"
    )]
    Quota {
        /// Bytes the client holds.
        used: u64,
        /// Bytes asked for.
        size: u64,
        /// Its share.
        quota: u64,
    },
    /// The store as a whole would hold more than its total quota (`-32005`, `data {stored,
    /// size, total}`).
    #[error(
        "the handle store is full: it holds {stored} bytes for all clients and plugins, {size} more would pass its {total} byte total ([runner] handle_quota_total); try again when handles were released or expired"
    )]
    Full {
        /// Bytes the store holds.
        stored: u64,
        /// Bytes asked for.
        size: u64,
        /// The total quota.
        total: u64,
    },
    /// Too large for an inline answer (`-32007`, `data {size, max_inline, handle}`).
    #[error(
        "handle too large to return inline ({size} bytes > {MAX_INLINE}); use fd.pass {{kind: \"handle\"}}"
    )]
    TooLarge {
        /// The blob's size.
        size: u64,
        /// The handle.
        handle: String,
    },
    /// A ranged read starting past the end (`-32602`, `data {offset, size}`).
    #[error("handle.fetch: offset {offset} is past the end of the {size}-byte blob")]
    PastEnd {
        /// The offset asked for.
        offset: u64,
        /// The blob's size.
        size: u64,
    },
    /// Bytes offered for adoption hash to another digest (`-32602`).
    #[error("the bytes offered for handle://{claimed} hash to {actual}; not adopted")]
    DigestMismatch {
        /// The digest the handle names.
        claimed: String,
        /// The digest of the bytes.
        actual: String,
    },
    /// The file system failed (`-32603`).
    #[error("handle store: {what}: {source}")]
    Io {
        /// What the store was doing.
        what: &'static str,
        /// The error.
        source: std::io::Error,
    },
}

impl From<HandleError> for ErrorObject {
    fn from(e: HandleError) -> ErrorObject {
        let message = e.to_string();
        match e {
            HandleError::Malformed(_) | HandleError::Unknown(_) => {
                ErrorObject::invalid_params(message)
            }
            HandleError::Expired(_) => ErrorObject::plugin(message),
            HandleError::Quota { used, size, quota } => {
                ErrorObject::new(ErrorCode::CapabilityMissing, message)
                    .with_data(json!({"used": used, "size": size, "quota": quota}))
            }
            HandleError::Full {
                stored,
                size,
                total,
            } => ErrorObject::new(ErrorCode::CapabilityMissing, message)
                .with_data(json!({"stored": stored, "size": size, "total": total})),
            HandleError::TooLarge { size, handle } => {
                ErrorObject::new(ErrorCode::HandleTooLarge, message)
                    .with_data(json!({"size": size, "max_inline": MAX_INLINE, "handle": handle}))
            }
            HandleError::PastEnd { offset, size } => ErrorObject::invalid_params(message)
                .with_data(json!({"offset": offset, "size": size})),
            HandleError::DigestMismatch { .. } => ErrorObject::invalid_params(message),
            HandleError::Io { .. } => ErrorObject::internal(message),
        }
    }
}

fn io_error(what: &'static str, source: std::io::Error) -> HandleError {
    HandleError::Io { what, source }
}

impl HandleStore {
    /// A store under `root` (created 0700 when missing). This process keeps its blobs in
    /// `root/runner-<pid>`, so runners sharing a root never delete each other's blobs; the
    /// directories of runners that are no longer alive are removed here (the older runner
    /// left them forever).
    pub fn open(
        root: PathBuf,
        ttl: Duration,
        quota: u64,
        total: u64,
    ) -> std::io::Result<Arc<HandleStore>> {
        let make = |dir: &Path| -> std::io::Result<()> {
            crate::paths::ensure_private_dir(dir).map_err(std::io::Error::other)
        };
        make(&root)?;
        let own = std::process::id();
        for entry in std::fs::read_dir(&root)?.flatten() {
            let name = entry.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix("runner-"))
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            let gone = pid as u32 == own
                || matches!(
                    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
                    Err(nix::errno::Errno::ESRCH)
                );
            if gone && pid > 0 {
                if let Err(e) = std::fs::remove_dir_all(entry.path()) {
                    tracing::warn!(dir = %entry.path().display(), error = %e, "stale handle directory could not be removed");
                }
            }
        }
        let root = root.join(format!("runner-{own}"));
        make(&root)?;
        Ok(Arc::new(HandleStore {
            root,
            ttl,
            quota,
            total,
            index: Mutex::new(Index::default()),
        }))
    }

    /// `[runner] handle_root`, else `$XDG_RUNTIME_DIR/utter/handles`, else
    /// `<tmp>/utter-<uid>/utter/handles`.
    pub fn default_root(configured: &str) -> PathBuf {
        if !configured.is_empty() {
            return PathBuf::from(configured);
        }
        crate::paths::BaseDirs::from_env().handles()
    }

    /// The directory of this process's blobs.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path_of(&self, digest: &str) -> PathBuf {
        debug_assert!(parse(&format!("{PREFIX}{digest}")).is_some());
        self.root.join(digest)
    }

    /// Start the collector: every `period`, expired and unreferenced blobs are deleted.
    pub fn spawn_collector(self: &Arc<Self>) {
        let weak: Weak<HandleStore> = Arc::downgrade(self);
        let period = (self.ttl / 4).clamp(Duration::from_millis(100), Duration::from_secs(5));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(store) = weak.upgrade() else { return };
                store.collect();
            }
        });
    }

    /// Delete every blob that expired or that no scope refers to; returns how many. The
    /// files go while the index is locked, so a `create` of the same bytes cannot have its
    /// fresh file removed under it.
    pub fn collect(&self) -> usize {
        let now = Instant::now();
        let mut index = self.index.lock().expect("handle index");
        let doomed: Vec<String> = index
            .blobs
            .iter()
            .filter(|(d, b)| b.expires_at <= now || !index.referenced(d))
            .map(|(d, _)| d.clone())
            .collect();
        for d in &doomed {
            self.delete(&mut index, d);
        }
        index.scopes.retain(|_, held| !held.is_empty());
        doomed.len()
    }

    /// Forget blob `digest` (every scope's view of it too) and delete its file; under the
    /// index lock, so no create can race it.
    fn delete(&self, index: &mut Index, digest: &str) {
        index.blobs.remove(digest);
        for held in index.scopes.values_mut() {
            held.remove(digest);
        }
        match std::fs::remove_file(self.path_of(digest)) {
            Ok(()) => tracing::debug!(handle = %digest, "handle deleted"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(handle = %digest, error = %e, "handle blob could not be deleted")
            }
        }
    }

    /// Store `bytes` for `scope`: `{handle, sha256, size}`.
    pub fn create(&self, scope: &Scope, bytes: &[u8]) -> Result<Value, HandleError> {
        let digest = digest_hex(bytes);
        let size = bytes.len() as u64;
        {
            let mut index = self.index.lock().expect("handle index");
            // A blob the client holds already (on any of its connections) costs nothing more.
            let already = index.client_digests(scope).contains(&digest);
            let used = index.used(scope);
            if !already && used.saturating_add(size) > self.share() {
                return Err(HandleError::Quota {
                    used,
                    size,
                    quota: self.share(),
                });
            }
            let stored: u64 = index.blobs.values().map(|b| b.size).sum();
            if !index.blobs.contains_key(&digest) && stored.saturating_add(size) > self.total {
                return Err(HandleError::Full {
                    stored,
                    size,
                    total: self.total,
                });
            }
            if index.blobs.contains_key(&digest) {
                // Indexed, so its file is there: the collector removes both under this lock.
                return Ok(self.take_reference(&mut index, scope, digest, size));
            }
        }
        // A blob the index does not know is (re)written: a file left from before is never
        // trusted. The collector only deletes indexed blobs, so it cannot take this one
        // before it is indexed below.
        self.write_atomically(&self.path_of(&digest), bytes)?;
        let mut index = self.index.lock().expect("handle index");
        Ok(self.take_reference(&mut index, scope, digest, size))
    }

    /// Index `digest` (when new), renew its lifetime and count one more reference from
    /// `scope`: the result of `handle.create`.
    fn take_reference(&self, index: &mut Index, scope: &Scope, digest: String, size: u64) -> Value {
        let creator = index.holder(scope);
        let blob = index.blobs.entry(digest.clone()).or_insert(Blob {
            size,
            creator,
            created: 0.0,
            expires_at: Instant::now(),
        });
        blob.created = unix_now();
        blob.expires_at = Instant::now() + self.ttl;
        *index
            .scopes
            .entry(scope.clone())
            .or_default()
            .entry(digest.clone())
            .or_insert(0) += 1;
        json!({"handle": format!("{PREFIX}{digest}"), "sha256": digest, "size": size})
    }

    fn write_atomically(&self, path: &Path, bytes: &[u8]) -> Result<(), HandleError> {
        crate::paths::write_atomic(path, bytes, 0o600).map_err(|e| io_error("writing a blob", e))
    }

    /// The digest `handle` names when `scope` may see it and it is still alive.
    fn resolve<'h>(&self, scope: &Scope, handle: &'h str) -> Result<&'h str, HandleError> {
        let digest = parse(handle).ok_or_else(|| HandleError::Malformed(handle.to_owned()))?;
        let index = self.index.lock().expect("handle index");
        match index.blobs.get(digest) {
            Some(blob) if index.visible(scope, digest) => {
                if blob.expires_at <= Instant::now() {
                    Err(HandleError::Expired(handle.to_owned()))
                } else {
                    Ok(digest)
                }
            }
            _ => Err(HandleError::Unknown(handle.to_owned())),
        }
    }

    /// The blob's metadata.
    pub fn stat(&self, scope: &Scope, handle: &str) -> Result<Value, HandleError> {
        let digest = self.resolve(scope, handle)?;
        let index = self.index.lock().expect("handle index");
        let blob = index
            .blobs
            .get(digest)
            .ok_or_else(|| HandleError::Unknown(handle.to_owned()))?;
        let ttl = self.ttl.as_secs_f64();
        let refcount = index.scopes.get(scope).and_then(|h| h.get(digest)).copied();
        Ok(json!({
            "handle": format!("{PREFIX}{digest}"),
            "sha256": digest,
            "size": blob.size,
            "created": blob.created,
            "ttl": ttl,
            "expires": blob.created + ttl,
            "refcount": refcount.unwrap_or(0),
        }))
    }

    /// The blob's bytes, when at most [`MAX_INLINE`].
    pub fn fetch(&self, scope: &Scope, handle: &str) -> Result<Vec<u8>, HandleError> {
        let digest = self.resolve(scope, handle)?;
        let size = std::fs::metadata(self.path_of(digest))
            .map_err(|e| io_error("reading a blob", e))?
            .len();
        if size > MAX_INLINE {
            return Err(HandleError::TooLarge {
                size,
                handle: handle.to_owned(),
            });
        }
        std::fs::read(self.path_of(digest)).map_err(|e| io_error("reading a blob", e))
    }

    /// Up to `length` bytes (at most [`MAX_INLINE`]) of the blob from `offset`, and the
    /// blob's size. Fewer at the end of the blob; none at `offset == size`.
    ///
    /// # Errors
    /// As [`HandleStore::fetch`] for the handle; `-32602` when `offset` is past the end.
    pub fn read_range(
        &self,
        scope: &Scope,
        handle: &str,
        offset: u64,
        length: u64,
    ) -> Result<(u64, Vec<u8>), HandleError> {
        use std::io::{Read, Seek, SeekFrom};
        let mut file = self.open_blob(scope, handle)?;
        let size = file
            .metadata()
            .map_err(|e| io_error("reading a blob", e))?
            .len();
        if offset > size {
            return Err(HandleError::PastEnd { offset, size });
        }
        let take = length.min(MAX_INLINE).min(size - offset);
        let mut bytes = vec![0; take as usize];
        file.seek(SeekFrom::Start(offset))
            .and_then(|_| file.read_exact(&mut bytes))
            .map_err(|e| io_error("reading a blob", e))?;
        Ok((size, bytes))
    }

    /// A read-only descriptor of the blob.
    pub fn open_blob(&self, scope: &Scope, handle: &str) -> Result<std::fs::File, HandleError> {
        let digest = self.resolve(scope, handle)?;
        std::fs::File::open(self.path_of(digest)).map_err(|e| io_error("opening a blob", e))
    }

    /// One more reference from `scope`; the time to live starts again.
    pub fn retain(&self, scope: &Scope, handle: &str) -> Result<Value, HandleError> {
        let digest = self.resolve(scope, handle)?.to_owned();
        let mut index = self.index.lock().expect("handle index");
        if let Some(blob) = index.blobs.get_mut(&digest) {
            blob.expires_at = Instant::now() + self.ttl;
            blob.created = unix_now();
        }
        let held = index.scopes.entry(scope.clone()).or_default();
        let n = held.entry(digest).or_insert(0);
        *n += 1;
        Ok(json!({"refcount": *n}))
    }

    /// One reference fewer from `scope`. At zero the scope no longer sees the handle, and a
    /// blob nobody refers to any more is deleted at once (its bytes free for others now,
    /// not at the collector's next round).
    pub fn release(&self, scope: &Scope, handle: &str) -> Result<Value, HandleError> {
        let digest = parse(handle).ok_or_else(|| HandleError::Unknown(handle.to_owned()))?;
        let mut index = self.index.lock().expect("handle index");
        let held = index
            .scopes
            .get_mut(scope)
            .ok_or_else(|| HandleError::Unknown(handle.to_owned()))?;
        let n = held
            .get_mut(digest)
            .ok_or_else(|| HandleError::Unknown(handle.to_owned()))?;
        *n = n.saturating_sub(1);
        let left = *n;
        if left == 0 {
            held.remove(digest);
            if !index.referenced(digest) {
                self.delete(&mut index, digest);
            }
        }
        Ok(json!({"refcount": left}))
    }

    /// Let `to` see (and hold one reference to) every handle in `value` that `from` sees:
    /// the runner relayed `value` from one scope to the other. Returns how many.
    pub fn pass(&self, from: &Scope, to: &Scope, value: &Value) -> usize {
        self.pass_except(from, to, value, &HashSet::new())
    }

    /// The handles in `value` the store does not hold at all (candidates for adoption).
    pub fn unknown(&self, value: &Value) -> Vec<String> {
        let mut found = HashSet::new();
        collect_handles(value, &mut found);
        let index = self.index.lock().expect("handle index");
        let mut unknown: Vec<String> = found
            .into_iter()
            .filter(|d| !index.blobs.contains_key(d))
            .collect();
        unknown.sort();
        unknown
    }

    /// Adopt the bytes a plugin says `digest` names, into `scope`, only when they hash to it.
    pub fn adopt(&self, scope: &Scope, digest: &str, bytes: &[u8]) -> Result<(), HandleError> {
        let actual = digest_hex(bytes);
        if actual != digest {
            return Err(HandleError::DigestMismatch {
                claimed: digest.to_owned(),
                actual,
            });
        }
        self.create(scope, bytes).map(|_| ())
    }

    /// The digests of the handles in `value` that `scope` does not see.
    pub fn unseen(&self, scope: &Scope, value: &Value) -> HashSet<String> {
        let mut found = HashSet::new();
        collect_handles(value, &mut found);
        let index = self.index.lock().expect("handle index");
        found.retain(|d| !index.visible(scope, d));
        found
    }

    /// [`HandleStore::pass`], leaving out the digests in `except`: a reply must not hand a
    /// client the handles it named in its request without being allowed to see them (it
    /// would learn a blob from its digest alone).
    pub fn pass_except(
        &self,
        from: &Scope,
        to: &Scope,
        value: &Value,
        except: &HashSet<String>,
    ) -> usize {
        let mut found = HashSet::new();
        collect_handles(value, &mut found);
        found.retain(|d| !except.contains(d));
        if found.is_empty() {
            return 0;
        }
        let mut index = self.index.lock().expect("handle index");
        let mut passed = 0;
        for digest in found {
            if index.visible(from, &digest) && index.blobs.contains_key(&digest) {
                let held = index.scopes.entry(to.clone()).or_default();
                let n = held.entry(digest).or_insert(0);
                if *n == 0 {
                    *n = 1;
                }
                passed += 1;
            }
        }
        passed
    }

    /// Delete every blob and this process's directory: the runner is stopping cleanly and
    /// no handle outlives it. Later calls find no blobs.
    pub fn remove_all(&self) {
        let mut index = self.index.lock().expect("handle index");
        index.blobs.clear();
        index.scopes.clear();
        match std::fs::remove_dir_all(&self.root) {
            Ok(()) => tracing::debug!(dir = %self.root.display(), "handle blobs removed"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(dir = %self.root.display(), error = %e, "handle blobs could not be removed")
            }
        }
    }

    /// Drop every reference `scope` holds (its connection closed or its plugin stopped).
    pub fn drop_scope(&self, scope: &Scope) {
        let mut index = self.index.lock().expect("handle index");
        index.scopes.remove(scope);
        index.owners.remove(scope);
    }

    /// Count `scope` (a client connection) as one of the connections of the client process
    /// `pid`: their handles count against one share. Forgotten with [`HandleStore::drop_scope`].
    pub fn set_owner(&self, scope: &Scope, pid: u32) {
        self.index
            .lock()
            .expect("handle index")
            .owners
            .insert(scope.clone(), pid);
    }

    /// What one client (all its connections) or plugin may hold: the quota, but never more
    /// than half the total, so that no one client fills the store.
    pub fn share(&self) -> u64 {
        self.quota.min(self.total / 2)
    }
}

/// The digests of every handle string anywhere in `value`.
fn collect_handles(value: &Value, out: &mut HashSet<String>) {
    match value {
        Value::String(s) => {
            if let Some(d) = parse(s) {
                out.insert(d.to_owned());
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_handles(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_handles(v, out)),
        _ => {}
    }
}

/// Standard padded base64 (RFC 4648 §4), as `data_b64` fields carry bytes.
pub fn b64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Strict standard base64 (RFC 4648 §4): padded, no whitespace, no stray trailing bits;
/// `None` for anything else.
pub fn b64_decode(text: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handle_syntax_is_strict() {
        let hex = "a".repeat(64);
        assert_eq!(parse(&format!("handle://{hex}")), Some(hex.as_str()));
        assert_eq!(parse(&format!("handle://sha256/{hex}")), Some(hex.as_str()));
        assert!(parse(&format!("handle://{}", "A".repeat(64))).is_none());
        assert!(parse(&format!("handle://{}", "a".repeat(63))).is_none());
        assert!(parse("handle://../../etc/passwd").is_none());
        assert!(parse(&format!("handle:///{hex}")).is_none());
    }

    #[test]
    fn base64_round_trips_and_is_strict() {
        for data in [&b""[..], b"f", b"fo", b"foo", b"foob", b"fooba", b"foobar"] {
            assert_eq!(b64_decode(&b64_encode(data)).unwrap(), data);
        }
        assert_eq!(b64_encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(b64_encode(b"fo"), "Zm8=");
        assert!(b64_decode("Zm9").is_none());
        assert!(b64_decode("Zm9=").is_none());
        assert!(b64_decode("Zm=v").is_none());
        assert!(b64_decode("Zm 9v").is_none());
    }

    /// The connections of one client process share one share (at most half the total);
    /// another process and a plugin have their own; a dropped connection gives its part back.
    #[test]
    fn a_client_holds_one_share_over_its_connections() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            HandleStore::open(dir.path().join("h"), Duration::from_secs(60), 100, 120).unwrap();
        assert_eq!(store.share(), 60, "the quota, but at most half the total");
        let (one, two, other) = (Scope::Client(1), Scope::Client(2), Scope::Client(3));
        store.set_owner(&one, 7);
        store.set_owner(&two, 7);
        store.set_owner(&other, 8);
        store.create(&one, &[1; 40]).unwrap();
        let refused = store.create(&two, &[2; 40]).unwrap_err();
        assert!(
            matches!(
                refused,
                HandleError::Quota {
                    used: 40,
                    size: 40,
                    quota: 60
                }
            ),
            "{refused:?}"
        );
        // The same blob again costs the client nothing more.
        store.create(&two, &[1; 40]).unwrap();
        store.create(&other, &[3; 40]).unwrap();
        // 80 bytes stored: a plugin's 41 more would pass the total of 120.
        let full = store
            .create(&Scope::Plugin("p".into()), &[4; 41])
            .unwrap_err();
        assert!(
            matches!(full, HandleError::Full { stored: 80, .. }),
            "{full:?}"
        );
        store.drop_scope(&one);
        store.drop_scope(&two);
        store.collect();
        store.create(&other, &[5; 20]).unwrap();
    }

    /// A blob handed to a plugin still counts against the client that created it, until it
    /// is gone: passing handles on is no way past the share.
    #[test]
    fn a_blob_passed_on_still_counts_against_its_creator() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            HandleStore::open(dir.path().join("h"), Duration::from_secs(60), 100, 1000).unwrap();
        let (client, plugin) = (Scope::Client(1), Scope::Plugin("p".into()));
        store.set_owner(&client, 7);
        let made = store.create(&client, &[1; 60]).unwrap();
        let handle = made["handle"].as_str().unwrap().to_owned();
        assert_eq!(store.pass(&client, &plugin, &json!([handle])), 1);
        store.release(&client, &handle).unwrap();
        let refused = store.create(&client, &[2; 60]).unwrap_err();
        assert!(
            matches!(refused, HandleError::Quota { used: 60, .. }),
            "{refused:?}"
        );
        // Once the plugin lets go, the blob is gone and the share is free.
        store.release(&plugin, &handle).unwrap();
        store.create(&client, &[2; 60]).unwrap();
    }

    #[test]
    fn scopes_refcounts_and_collection() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            HandleStore::open(dir.path().join("h"), Duration::from_secs(60), 10, 1000).unwrap();
        let a = Scope::Client(1);
        let b = Scope::Plugin("p".into());
        let made = store.create(&a, b"hello").unwrap();
        let handle = made["handle"].as_str().unwrap().to_owned();
        assert_eq!(store.fetch(&a, &handle).unwrap(), b"hello");
        assert!(store.fetch(&b, &handle).is_err());
        assert_eq!(store.pass(&a, &b, &json!({"x": [handle]})), 1);
        assert_eq!(store.fetch(&b, &handle).unwrap(), b"hello");
        assert_eq!(
            ErrorObject::from(store.create(&a, b"too long!!").unwrap_err()).code,
            -32005
        );
        // A third scope naming the handle does not get it back through b's reply.
        let c = Scope::Client(3);
        let named = json!({"h": handle});
        let unseen = store.unseen(&c, &named);
        assert_eq!(store.pass(&c, &b, &named), 0);
        assert_eq!(store.pass_except(&b, &c, &named, &unseen), 0);
        assert!(store.fetch(&c, &handle).is_err());
        store.release(&a, &handle).unwrap();
        assert_eq!(store.collect(), 0, "b still refers to it");
        let file = store.root().join(made["sha256"].as_str().unwrap());
        assert!(file.exists());
        // The last reference released: deleted at once, nothing left to collect.
        store.release(&b, &handle).unwrap();
        assert!(!file.exists());
        assert_eq!(store.collect(), 0);
    }
}
