//! Our own client for Hyprland's IPC, written from Hyprland's wiki (pages "IPC", "Hyprctl"
//! and "Dispatchers"); no Hyprland crate is linked.
//!
//! # The wire, as this module speaks it
//!
//! Hyprland's instance directory is `$XDG_RUNTIME_DIR/hypr/$HYPRLAND_INSTANCE_SIGNATURE`
//! (`/tmp/hypr/<signature>` before Hyprland 0.40; [`instance_dir`] looks at both). It holds
//! two unix sockets:
//!
//! - `.socket.sock` takes one request per connection: the client writes
//!   `[flags]/command args` (`j/clients` asks for JSON, `/dispatch workspace 2` has no flag)
//!   and reads the whole reply until Hyprland closes the connection. Hyprland serves this
//!   socket synchronously (an open connection stalls it), so each request opens, writes,
//!   reads and closes at once, within [`REQUEST_TIMEOUT`]. Every request this client sends
//!   starts with its flags and a `/`, so Hyprland never reads words of an argument as flags,
//!   and never with `[[BATCH]]` (which would split it at `;`); an argument holding a control
//!   character is refused before anything is sent.
//! - `.socket2.sock` is a one-way feed of events, one per line: `EVENT>>DATA`
//!   (`workspace>>2`, `openwindow>>55d1c0a2e6b0,2,kitty,~`). The data holds window titles
//!   verbatim (commas, `>>`, whatever a page put there), so this client reads only the event's
//!   *name* and re-reads the state by query, as the sway client does: `j/clients`,
//!   `j/workspaces`, `j/monitors` and `j/activewindow` after a window, workspace or monitor
//!   event, `j/devices` after `activelayout`. Bursts are coalesced into one refresh; two
//!   refreshes start at least [`REFRESH_EVERY`] apart.
//!
//! A dispatch (`dispatch <dispatcher> <args>`) answers `ok`, or Hyprland's own words when it
//! failed; `switchxkblayout` answers the same way.
//!
//! # Shapes
//!
//! - A window's id is its `address` (`"0x55d1c0a2e6b0"`) read as a number, and the
//!   dispatchers get it back as `address:0x…`. Unmapped clients are left out.
//! - Window positions (`at`, `size`) and monitor positions (`x`, `y`) are in the layout's
//!   logical pixels; a monitor's `width` and `height` are its mode's physical pixels, so its
//!   logical size is that over `scale` (sides swapped for a transform of 90° or 270°).
//! - Workspace ids are signed (named workspaces and special ones have negative ids); the
//!   snapshot's `u64` ids hold them as their two's complement bits, so they compare equal
//!   between windows and workspaces. `index` is the id of a numbered workspace (id > 0).
//! - `fullscreen` is an integer state in Hyprland 0.42+ (0 none, 1 maximized, 2 fullscreen)
//!   and a boolean before; either reads as fullscreen when not 0 / false.
//! - `focusHistoryID` orders windows by focus (0 is the last focused); the snapshot's
//!   `focused_at` is minus it, so later focus is larger, as on niri.
//!
//! # Bounds
//!
//! A reply longer than [`MAX_REPLY`] or an event line longer than [`MAX_EVENT_LINE`] is an
//! error, never an allocation without end. A broken event connection is reopened once a
//! second; meanwhile the last snapshot stays readable with `compositor.connected: false`.
//! At most [`crate::model::MAX_WINDOWS`] windows, [`crate::model::MAX_WORKSPACES`]
//! workspaces and [`crate::model::MAX_OUTPUTS`] outputs are kept.

use crate::link::{BackendError, LineReader, Link, LinkState, ReadLine, clean};
use crate::model::{
    CompositorInfo, MAX_OUTPUTS, MAX_WINDOWS, MAX_WORKSPACES, Output, Rect, Snapshot, Window,
    Workspace,
};
use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::{Notify, watch};

const NAME: &str = "hyprland";

/// The longest reply read from `.socket.sock` (16 MiB).
pub const MAX_REPLY: usize = 16 * 1024 * 1024;
/// The longest event line read from `.socket2.sock` (1 MiB); a longer one breaks the
/// connection (which is then reopened).
pub const MAX_EVENT_LINE: usize = 1024 * 1024;
/// The largest coordinate or side believed of Hyprland's geometry, in logical pixels.
const MAX_SIDE: i64 = 1 << 20;
/// The longest request sent, in bytes (a longer one is refused before sending).
pub const MAX_REQUEST: usize = 4096;
/// How long one request may take, from connecting to the end of its reply.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The least time between the starts of two state refreshes during an event flood.
/// (Hyprland answers requests on its main thread, so a flood of events must not become a
/// flood of requests.)
pub const REFRESH_EVERY: Duration = Duration::from_millis(40);

/// The request socket's file name in the instance directory.
pub const REQUEST_SOCKET: &str = ".socket.sock";
/// The event socket's file name in the instance directory.
pub const EVENT_SOCKET: &str = ".socket2.sock";

/// What an event asked to re-read (bit flags): the clients alone (a title changed), the
/// whole layout (clients, workspaces, monitors, the active window), the keyboards.
const DIRTY_CLIENTS: u8 = 1;
const DIRTY_STATE: u8 = 3;
const DIRTY_DEVICES: u8 = 4;
const DIRTY_ALL: u8 = 7;

/// The instance directory of the Hyprland whose signature is `signature`:
/// `<runtime>/hypr/<signature>` when it holds the request socket or when `/tmp` has none
/// (Hyprland 0.40+), else `/tmp/hypr/<signature>` (older Hyprland).
pub fn instance_dir(runtime: Option<&Path>, signature: &str) -> PathBuf {
    let current = runtime.map(|r| r.join("hypr").join(signature));
    let old = Path::new("/tmp/hypr").join(signature);
    match current {
        Some(dir) if dir.join(REQUEST_SOCKET).exists() || !old.join(REQUEST_SOCKET).exists() => dir,
        _ => old,
    }
}

/// Why a signature cannot name an instance directory: it must be one path component.
///
/// # Errors
/// A message when it is empty, holds a `/` or a control character, or is `.` / `..`.
pub fn check_signature(signature: &str) -> Result<(), String> {
    if signature.is_empty()
        || signature == "."
        || signature == ".."
        || signature.contains('/')
        || signature.chars().any(char::is_control)
    {
        return Err(format!(
            "HYPRLAND_INSTANCE_SIGNATURE={:?} is not a directory name",
            clean(signature)
        ));
    }
    Ok(())
}

/// One argument single-quoted for the shell that Hyprland's `exec` dispatcher runs its
/// command line with (`sh -c`): inside single quotes nothing is special, and a single quote
/// itself is written `'\''`.
///
/// # Errors
/// A message when the argument holds a control character (a newline would end the request).
pub fn sh_quote(arg: &str) -> Result<String, String> {
    if let Some(bad) = arg.chars().find(|c| c.is_control()) {
        let shown: String = arg.chars().take(40).collect();
        return Err(format!(
            "{:?} contains the control character U+{:04X}, which cannot pass through Hyprland's exec",
            clean(&shown),
            u32::from(bad)
        ));
    }
    Ok(format!("'{}'", arg.replace('\'', r"'\''")))
}

/// A program and its arguments as the command line of Hyprland's `exec`: the shell's own
/// `exec`, then each word through [`sh_quote`] (`exec 'foot' '--app-id' 'x'`). Starting with
/// a word, never with `[`, it cannot be read as `exec`'s window rules.
///
/// # Errors
/// An empty argv, a program name starting with `-`, or a word [`sh_quote`] refuses.
pub fn exec_argv(argv: &[String]) -> Result<String, String> {
    let Some(program) = argv.first().filter(|p| !p.is_empty()) else {
        return Err("argv must name a program".into());
    };
    if program.starts_with('-') {
        return Err(format!(
            "the program name {program:?} starts with '-', which the shell's exec would read as an option"
        ));
    }
    let mut words = vec!["exec".to_owned()];
    for arg in argv {
        words.push(sh_quote(arg)?);
    }
    Ok(words.join(" "))
}

/// A window id as Hyprland's window selector: `address:0x55d1c0a2e6b0`.
pub fn window_selector(id: u64) -> String {
    format!("address:0x{id:x}")
}

/// A live Hyprland IPC client.
pub struct Hyprland {
    dir: PathBuf,
    state: watch::Receiver<Snapshot>,
    version: Option<String>,
    /// The event connection's state.
    link: Link,
    /// Whether the last re-read of the state worked: a reply that cannot be read leaves the
    /// snapshot as it was, so it is marked stale (down) until a re-read works again.
    reads: Link,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// What the refresh task must re-read, and its wake-up.
    dirty: Arc<AtomicU8>,
    wake: Arc<Notify>,
    /// How many refreshes the refresh task has finished.
    refreshed: watch::Receiver<u64>,
}

impl std::fmt::Debug for Hyprland {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hyprland")
            .field("dir", &self.dir)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl Drop for Hyprland {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

fn io_error(message: impl std::fmt::Display) -> BackendError {
    BackendError::Io {
        compositor: NAME,
        message: message.to_string(),
    }
}

/// Send `request` (flags, `/`, command) on a fresh connection and read the whole reply.
async fn ask(dir: &Path, request: &str) -> Result<Vec<u8>, BackendError> {
    if request.len() > MAX_REQUEST {
        return Err(io_error(format!(
            "the request would be {} bytes, more than the {MAX_REQUEST} this client sends",
            request.len()
        )));
    }
    if request.chars().any(char::is_control) {
        return Err(io_error(format!(
            "the request {:?} holds a control character",
            clean(request)
        )));
    }
    let socket = dir.join(REQUEST_SOCKET);
    let exchange = async {
        let mut stream =
            UnixStream::connect(&socket)
                .await
                .map_err(|source| BackendError::Connect {
                    compositor: NAME,
                    socket: socket.display().to_string(),
                    source,
                })?;
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| io_error(format!("writing {:?}: {e}", clean(request))))?;
        // Hyprland reads a request in chunks until a short one; a request of a multiple of
        // its chunk size would leave it waiting for more (its whole event loop, up to 5 s)
        // unless it sees the end of the stream.
        stream
            .shutdown()
            .await
            .map_err(|e| io_error(format!("ending {:?}: {e}", clean(request))))?;
        let mut reply = Vec::new();
        let mut limited = (&mut stream).take(MAX_REPLY as u64 + 1);
        limited
            .read_to_end(&mut reply)
            .await
            .map_err(|e| io_error(format!("reading the reply to {:?}: {e}", clean(request))))?;
        if reply.len() > MAX_REPLY {
            return Err(io_error(format!(
                "the reply to {:?} is longer than {MAX_REPLY} bytes",
                clean(request)
            )));
        }
        Ok(reply)
    };
    match tokio::time::timeout(REQUEST_TIMEOUT, exchange).await {
        Ok(result) => result,
        Err(_) => Err(io_error(format!(
            "no whole reply to {:?} within {} s",
            clean(request),
            REQUEST_TIMEOUT.as_secs()
        ))),
    }
}

/// A JSON query (`j/<what>`), parsed. Bytes that are not UTF-8 (Hyprland passes a Latin-1
/// X11 title through as it is) are read as U+FFFD rather than failing the whole reply.
async fn query<T: serde::de::DeserializeOwned>(dir: &Path, what: &str) -> Result<T, BackendError> {
    let reply = ask(dir, &format!("j/{what}")).await?;
    let text = String::from_utf8_lossy(&reply);
    serde_json::from_str(&text).map_err(|e| {
        let text = String::from_utf8_lossy(&reply[..reply.len().min(400)]).into_owned();
        io_error(format!(
            "the reply to j/{what} is not what Hyprland sends ({e}): {}",
            clean(&text)
        ))
    })
}

async fn subscribe(dir: &Path) -> Result<LineReader<UnixStream>, BackendError> {
    let socket = dir.join(EVENT_SOCKET);
    let stream = UnixStream::connect(&socket)
        .await
        .map_err(|source| BackendError::Connect {
            compositor: NAME,
            socket: socket.display().to_string(),
            source,
        })?;
    Ok(LineReader::new(stream, MAX_EVENT_LINE))
}

impl Hyprland {
    /// Connect to the Hyprland whose instance directory is `dir` (see [`instance_dir`]):
    /// read its version and whole state once, subscribe to its events, and start the tasks
    /// that keep [`Hyprland::state`] fresh.
    ///
    /// # Errors
    /// [`BackendError::Connect`] when a socket cannot be reached, [`BackendError::Io`] when
    /// the first queries fail or answer in another shape.
    pub async fn connect(dir: PathBuf) -> Result<Hyprland, BackendError> {
        let version: WireVersion = query(&dir, "version").await?;
        let version = version.name();
        let info = CompositorInfo {
            name: NAME.into(),
            version: version.clone(),
            socket: Some(dir.join(REQUEST_SOCKET).display().to_string()),
            connected: true,
        };
        // Subscribe before the first read, so that no change after it is missed.
        let events = subscribe(&dir).await?;
        let mut parts = Parts::default();
        parts.refresh(&dir, DIRTY_ALL).await?;
        let (tx, rx) = watch::channel(parts.snapshot(&info));
        let dirty = Arc::new(AtomicU8::new(0));
        let wake = Arc::new(Notify::new());
        let link = Link::default();
        let reads = Link::default();
        let tx = Arc::new(tx);
        let reader = tokio::spawn(read_events(
            dir.clone(),
            events,
            dirty.clone(),
            wake.clone(),
            link.clone(),
            tx.clone(),
        ));
        let (done, refreshed) = watch::channel(0u64);
        let refresher = tokio::spawn(refresh_loop(
            dir.clone(),
            parts,
            info,
            tx,
            Links {
                events: link.clone(),
                reads: reads.clone(),
            },
            dirty.clone(),
            wake.clone(),
            done,
        ));
        Ok(Hyprland {
            dir,
            state: rx,
            version,
            link,
            reads,
            tasks: vec![reader, refresher],
            dirty,
            wake,
            refreshed,
        })
    }

    /// The snapshot channel, kept fresh from the event stream.
    pub fn state(&self) -> watch::Receiver<Snapshot> {
        self.state.clone()
    }

    /// Hyprland's version (`j/version`'s `version`, else its `tag` without the `v`).
    pub fn version(&self) -> Option<String> {
        self.version.clone()
    }

    /// The instance directory this client talks to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the client is following Hyprland, and since when: the event connection is
    /// up and the last re-read of the state worked (a reply that could not be read leaves
    /// the snapshot stale, which is said here until a re-read works).
    pub fn link(&self) -> LinkState {
        let events = self.link.get();
        if events.connected {
            self.reads.get()
        } else {
            events
        }
    }

    /// Re-read the state now and wait (up to `limit`) until the snapshot holds it: Hyprland
    /// sends no event when a window is moved or resized. `false` when the re-read did not
    /// finish in time.
    pub async fn resync(&self, limit: Duration) -> bool {
        let mut refreshed = self.refreshed.clone();
        let before = *refreshed.borrow_and_update();
        self.dirty.fetch_or(DIRTY_STATE, Ordering::SeqCst);
        self.wake.notify_one();
        tokio::time::timeout(limit, refreshed.wait_for(|n| *n > before))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Send one command without flags (`dispatch workspace 2`, `switchxkblayout all next`)
    /// and return Hyprland's reply as text.
    ///
    /// # Errors
    /// [`BackendError::Connect`]/[`BackendError::Io`] when the socket is gone, the command is
    /// too long or holds a control character.
    pub async fn request(&self, command: &str) -> Result<String, BackendError> {
        let reply = ask(&self.dir, &format!("/{command}")).await?;
        Ok(String::from_utf8_lossy(&reply).into_owned())
    }

    /// Run a command that answers `ok` on success: a dispatch (`dispatch <dispatcher>
    /// <args>`) or `switchxkblayout`.
    ///
    /// # Errors
    /// [`BackendError::Refused`] with Hyprland's own words when the reply is not `ok`, or
    /// the errors of [`Hyprland::request`].
    pub async fn command(&self, command: &str) -> Result<(), BackendError> {
        let reply = self.request(command).await?;
        if reply.trim() == "ok" {
            Ok(())
        } else {
            Err(BackendError::Refused {
                compositor: NAME,
                request: command.to_owned(),
                message: if reply.trim().is_empty() {
                    "an empty reply".to_owned()
                } else {
                    clean(reply.trim())
                },
            })
        }
    }
}

/// Read events and mark what they invalidate; on a broken stream, reconnect every second.
async fn read_events(
    dir: PathBuf,
    mut events: LineReader<UnixStream>,
    dirty: Arc<AtomicU8>,
    wake: Arc<Notify>,
    link: Link,
    tx: Arc<watch::Sender<Snapshot>>,
) {
    loop {
        let why = loop {
            let bits = match events.next_line().await {
                Ok(ReadLine::Line(line)) => event_bits(&line),
                Ok(ReadLine::Eof) => break "Hyprland closed the event connection".to_owned(),
                Ok(ReadLine::TooLong) => {
                    break format!("an event line is longer than {MAX_EVENT_LINE} bytes");
                }
                Err(e) => break format!("the event connection broke: {e}"),
            };
            if bits != 0 {
                dirty.fetch_or(bits, Ordering::SeqCst);
                wake.notify_one();
            }
        };
        tracing::warn!(reason = %why, "Hyprland event stream lost");
        link.down(&why);
        tx.send_if_modified(|s| std::mem::replace(&mut s.compositor.connected, false));
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            match subscribe(&dir).await {
                Ok(stream) => {
                    tracing::info!(dir = %dir.display(), "Hyprland event stream reconnected");
                    events = stream;
                    link.up();
                    // The re-read that follows marks the snapshot connected again.
                    dirty.fetch_or(DIRTY_ALL, Ordering::SeqCst);
                    wake.notify_one();
                    break;
                }
                Err(e) => tracing::debug!(error = %e, "Hyprland reconnect failed"),
            }
        }
    }
}

/// What one event line asks to re-read: the keyboard devices for `activelayout`, nothing for
/// events that change no part of the snapshot, the state for every other (unknown names
/// included: a newer Hyprland's event still says something changed).
fn event_bits(line: &[u8]) -> u8 {
    let name = match line.windows(2).position(|w| w == b">>") {
        Some(end) => &line[..end],
        None => line,
    };
    match name {
        b"activelayout" => DIRTY_DEVICES,
        b"configreloaded" => DIRTY_ALL,
        // A page with a ticking title sends these all the time: one query, not four.
        b"windowtitle" | b"windowtitlev2" => DIRTY_CLIENTS,
        // The cursor's submap, a screencast's state, the pointer's bell and the like.
        b"submap" | b"screencast" | b"bell" | b"urgent" | b"minimized" | b"ignoregrouplock"
        | b"lockgroups" => 0,
        b"" => 0,
        _ => DIRTY_STATE,
    }
}

/// The two states the snapshot's `connected` is made of.
struct Links {
    events: Link,
    reads: Link,
}

/// Re-read what events invalidated and publish the new snapshot when it changed.
#[allow(clippy::too_many_arguments)]
async fn refresh_loop(
    dir: PathBuf,
    mut parts: Parts,
    info: CompositorInfo,
    tx: Arc<watch::Sender<Snapshot>>,
    links: Links,
    dirty: Arc<AtomicU8>,
    wake: Arc<Notify>,
    done: watch::Sender<u64>,
) {
    let mut last_refresh: Option<Instant> = None;
    let mut truncation_logged = false;
    loop {
        wake.notified().await;
        if let Some(wait) = last_refresh.map(|t| REFRESH_EVERY.saturating_sub(t.elapsed())) {
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
        }
        last_refresh = Some(Instant::now());
        let bits = dirty.swap(0, Ordering::SeqCst);
        if bits == 0 {
            continue;
        }
        match parts.refresh(&dir, bits).await {
            Ok(()) => {
                links.reads.up();
                let mut next = parts.snapshot(&info);
                next.compositor.connected = links.events.get().connected;
                if next.truncated && !std::mem::replace(&mut truncation_logged, true) {
                    tracing::warn!(
                        "Hyprland reports more than {MAX_WINDOWS} windows, {MAX_WORKSPACES} \
                         workspaces or {MAX_OUTPUTS} monitors; the rest are left out of the \
                         snapshot (truncated: true)"
                    );
                }
                tx.send_if_modified(|current| {
                    if *current == next {
                        false
                    } else {
                        *current = next;
                        true
                    }
                });
                done.send_modify(|n| *n += 1);
            }
            Err(e) => {
                tracing::warn!(error = %e, "re-reading Hyprland's state failed; retrying");
                links
                    .reads
                    .down(&format!("re-reading its state failed: {e}"));
                tx.send_if_modified(|s| std::mem::replace(&mut s.compositor.connected, false));
                dirty.fetch_or(bits, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(1)).await;
                wake.notify_one();
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The wire's shapes (only the fields used; unknown ones are ignored, missing ones default).

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireVersion {
    version: Option<String>,
    tag: Option<String>,
}

impl WireVersion {
    fn name(&self) -> Option<String> {
        self.version
            .clone()
            .filter(|v| !v.is_empty())
            .or_else(|| {
                self.tag
                    .as_deref()
                    .map(|t| t.strip_prefix('v').unwrap_or(t).to_owned())
            })
            .filter(|v| !v.is_empty())
            .map(|v| clean(&v))
    }
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
struct WireWorkspaceRef {
    id: i64,
    name: String,
}

#[derive(Debug, Deserialize)]
#[serde(default)]
struct WireClient {
    address: String,
    mapped: bool,
    hidden: bool,
    at: Option<[i64; 2]>,
    size: Option<[i64; 2]>,
    workspace: WireWorkspaceRef,
    floating: bool,
    monitor: i64,
    class: String,
    title: String,
    #[serde(rename = "initialClass")]
    initial_class: String,
    pid: i64,
    fullscreen: Value,
    #[serde(rename = "focusHistoryID")]
    focus_history_id: Option<i64>,
}

impl Default for WireClient {
    fn default() -> Self {
        WireClient {
            address: String::new(),
            mapped: true,
            hidden: false,
            at: None,
            size: None,
            workspace: WireWorkspaceRef::default(),
            floating: false,
            monitor: -1,
            class: String::new(),
            title: String::new(),
            initial_class: String::new(),
            pid: -1,
            fullscreen: Value::Null,
            focus_history_id: None,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireWorkspace {
    id: i64,
    name: String,
    monitor: String,
}

#[derive(Debug, Deserialize)]
#[serde(default)]
struct WireMonitor {
    id: i64,
    name: String,
    make: String,
    model: String,
    width: i64,
    height: i64,
    x: i64,
    y: i64,
    scale: f64,
    transform: i64,
    #[serde(rename = "activeWorkspace")]
    active_workspace: WireWorkspaceRef,
    #[serde(rename = "specialWorkspace")]
    special_workspace: WireWorkspaceRef,
    focused: bool,
    disabled: bool,
}

impl Default for WireMonitor {
    fn default() -> Self {
        WireMonitor {
            id: -1,
            name: String::new(),
            make: String::new(),
            model: String::new(),
            width: 0,
            height: 0,
            x: 0,
            y: 0,
            scale: 1.0,
            transform: 0,
            active_workspace: WireWorkspaceRef::default(),
            special_workspace: WireWorkspaceRef::default(),
            focused: false,
            disabled: false,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireDevices {
    keyboards: Vec<WireKeyboard>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireKeyboard {
    active_keymap: Option<String>,
    main: bool,
}

/// `j/activewindow`: the focused client, or `{}` when none.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireActive {
    address: Option<String>,
}

/// A JSON array read as at most `N` elements: the rest are skipped without being kept, so a
/// huge reply costs its bytes, not a value per element.
struct Capped<T, const N: usize>(Vec<T>);

impl<'de, T: Deserialize<'de>, const N: usize> Deserialize<'de> for Capped<T, N> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit<T, const N: usize>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>, const N: usize> serde::de::Visitor<'de> for Visit<T, N> {
            type Value = Capped<T, N>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                let mut kept = Vec::new();
                while kept.len() < N {
                    match seq.next_element()? {
                        Some(item) => kept.push(item),
                        None => return Ok(Capped(kept)),
                    }
                }
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Capped(kept))
            }
        }
        deserializer.deserialize_seq(Visit::<T, N>(std::marker::PhantomData))
    }
}

/// A window address (`0x55d1c0a2e6b0`, or the bare hex that events carry) as a number: 1 to
/// 16 hex digits, nothing else.
pub fn parse_address(address: &str) -> Option<u64> {
    let hex = address
        .strip_prefix("0x")
        .or_else(|| address.strip_prefix("0X"))
        .unwrap_or(address);
    if hex.is_empty() || hex.len() > 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// A signed workspace id in the snapshot's `u64` (its two's complement bits).
pub fn workspace_id(id: i64) -> u64 {
    id as u64
}

/// Whether a client is fullscreen: Hyprland 0.42+ reports a state whose bit 2 is
/// fullscreen (1 is maximized, which is not), older Hyprland a boolean.
fn fullscreen_of(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => n.as_i64().map(|n| n & 2 != 0),
        _ => None,
    }
}

/// The last read of each part of Hyprland's state.
#[derive(Debug, Default)]
struct Parts {
    clients: Vec<WireClient>,
    workspaces: Vec<WireWorkspace>,
    monitors: Vec<WireMonitor>,
    active: Option<u64>,
    keyboard_layout: Option<String>,
}

impl Parts {
    async fn refresh(&mut self, dir: &Path, bits: u8) -> Result<(), BackendError> {
        if bits & DIRTY_STATE == DIRTY_STATE {
            // Read into locals first: a failed read leaves the last whole state in place.
            let clients: Capped<WireClient, { MAX_WINDOWS + 1 }> = query(dir, "clients").await?;
            let workspaces: Capped<WireWorkspace, { MAX_WORKSPACES + 1 }> =
                query(dir, "workspaces").await?;
            let monitors: Capped<WireMonitor, { MAX_OUTPUTS + 1 }> = query(dir, "monitors").await?;
            let active: WireActive = query(dir, "activewindow").await?;
            self.clients = clients.0;
            self.workspaces = workspaces.0;
            self.monitors = monitors.0;
            self.active = active.address.as_deref().and_then(parse_address);
        } else if bits & DIRTY_CLIENTS != 0 {
            let clients: Capped<WireClient, { MAX_WINDOWS + 1 }> = query(dir, "clients").await?;
            self.clients = clients.0;
        }
        if bits & DIRTY_DEVICES != 0 {
            let devices: WireDevices = query(dir, "devices").await?;
            self.keyboard_layout = devices
                .keyboards
                .iter()
                .find(|k| k.main)
                .or_else(|| devices.keyboards.first())
                .and_then(|k| k.active_keymap.clone());
        }
        Ok(())
    }

    fn snapshot(&self, info: &CompositorInfo) -> Snapshot {
        let focused_monitor = self.monitors.iter().find(|m| m.focused);
        let shown = |id: i64| {
            self.monitors.iter().any(|m| {
                !m.disabled && (m.active_workspace.id == id || m.special_workspace.id == id)
            })
        };
        let monitor_name = |id: i64| {
            self.monitors
                .iter()
                .find(|m| m.id == id)
                .map(|m| m.name.clone())
        };

        let mapped: Vec<&WireClient> = self.clients.iter().filter(|c| c.mapped).collect();
        let windows_dropped = mapped.len() > MAX_WINDOWS;
        let windows: Vec<Window> = mapped
            .into_iter()
            .take(MAX_WINDOWS)
            .filter_map(|c| {
                let id = parse_address(&c.address)?;
                let app_id = Some(c.class.clone())
                    .filter(|s| !s.is_empty())
                    .or_else(|| Some(c.initial_class.clone()).filter(|s| !s.is_empty()));
                let rect = match (c.at, c.size) {
                    (Some([x, y]), Some([width, height]))
                        if (1..=MAX_SIDE).contains(&width)
                            && (1..=MAX_SIDE).contains(&height)
                            && (-MAX_SIDE..=MAX_SIDE).contains(&x)
                            && (-MAX_SIDE..=MAX_SIDE).contains(&y) =>
                    {
                        Some(Rect {
                            x,
                            y,
                            width,
                            height,
                        })
                    }
                    _ => None,
                };
                Some(Window {
                    id,
                    app_id,
                    title: Some(c.title.clone()),
                    pid: (c.pid > 0).then_some(c.pid),
                    workspace: Some(c.workspace.name.clone()).filter(|n| !n.is_empty()),
                    workspace_id: Some(workspace_id(c.workspace.id)),
                    output: monitor_name(c.monitor),
                    focused: self.active == Some(id),
                    fullscreen: fullscreen_of(&c.fullscreen),
                    floating: Some(c.floating),
                    rect,
                    frame: None,
                    visible: Some(!c.hidden && shown(c.workspace.id)),
                    focused_at: c.focus_history_id.map(|n| -(n as f64)),
                })
            })
            .collect();

        let workspaces_dropped = self.workspaces.len() > MAX_WORKSPACES;
        let workspaces = self
            .workspaces
            .iter()
            .take(MAX_WORKSPACES)
            .map(|w| Workspace {
                id: workspace_id(w.id),
                index: (w.id > 0).then_some(w.id),
                name: Some(w.name.clone()).filter(|n| !n.is_empty()),
                output: Some(w.monitor.clone()).filter(|n| !n.is_empty()),
                focused: focused_monitor.is_some_and(|m| m.active_workspace.id == w.id),
                active: shown(w.id),
            })
            .collect();

        let outputs_dropped = self.monitors.len() > MAX_OUTPUTS;
        let outputs = self
            .monitors
            .iter()
            .take(MAX_OUTPUTS)
            .map(|m| {
                let on = !m.disabled && m.width > 0 && m.height > 0;
                // Hyprland's scales lie between 0.25 and 10; anything else is not believed.
                let scale = if m.scale.is_finite() && (0.1..=16.0).contains(&m.scale) {
                    m.scale
                } else {
                    1.0
                };
                let (w, h) = if m.transform % 2 == 1 {
                    (m.height, m.width)
                } else {
                    (m.width, m.height)
                };
                let logical = |px: i64| ((px as f64 / scale).round() as i64).clamp(0, MAX_SIDE);
                Output {
                    name: m.name.clone(),
                    focused: m.focused,
                    make: Some(m.make.clone()).filter(|s| !s.is_empty()),
                    model: Some(m.model.clone()).filter(|s| !s.is_empty()),
                    width: on.then(|| logical(w)),
                    height: on.then(|| logical(h)),
                    x: on.then_some(m.x),
                    y: on.then_some(m.y),
                }
            })
            .collect();

        let mut snapshot = Snapshot {
            compositor: info.clone(),
            focused: None,
            windows,
            workspaces,
            outputs,
            keyboard_layout: self.keyboard_layout.clone(),
            overview: None,
            // Hyprland takes no screenshots itself (grim does).
            screenshot: None,
            truncated: windows_dropped || workspaces_dropped || outputs_dropped,
            provenance: Default::default(),
        };
        snapshot.refresh_focus();
        snapshot
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_read_as_numbers_both_ways() {
        assert_eq!(parse_address("0x55d1c0a2e6b0"), Some(0x55d1_c0a2_e6b0));
        assert_eq!(parse_address("55d1c0a2e6b0"), Some(0x55d1_c0a2_e6b0));
        assert_eq!(window_selector(0x55d1_c0a2_e6b0), "address:0x55d1c0a2e6b0");
        assert_eq!(parse_address(""), None);
        assert_eq!(parse_address("0x"), None);
        assert_eq!(parse_address("0x12345678901234567"), None);
        assert_eq!(parse_address("zz"), None);
        assert_eq!(parse_address("0x+10"), None, "a sign is no hex digit");
    }

    #[test]
    fn exec_words_are_single_quoted_for_sh() {
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            exec_argv(&argv(&["foot", "--title", "it's; rm -rf ~"])).unwrap(),
            r"exec 'foot' '--title' 'it'\''s; rm -rf ~'"
        );
        assert!(exec_argv(&argv(&["foot", "a\nb"])).is_err());
        assert!(exec_argv(&argv(&["-x"])).is_err());
        assert!(exec_argv(&[]).is_err());
        assert_eq!(sh_quote("$(id)").unwrap(), "'$(id)'");
    }

    #[test]
    fn event_names_choose_what_is_read_again() {
        assert_eq!(event_bits(b"activelayout>>kb,German"), DIRTY_DEVICES);
        assert_eq!(event_bits(b"openwindow>>55,2,kitty,a>>b,c"), DIRTY_STATE);
        assert_eq!(event_bits(b"somethingnew>>1"), DIRTY_STATE);
        assert_eq!(event_bits(b"submap>>resize"), 0);
        assert_eq!(event_bits(b"windowtitlev2>>55,a page"), DIRTY_CLIENTS);
        assert_eq!(event_bits(b""), 0);
    }

    #[test]
    fn signatures_are_one_path_component() {
        assert!(check_signature("abc_123_456").is_ok());
        for bad in ["", ".", "..", "a/b", "a\nb"] {
            assert!(check_signature(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_snapshot_from_the_wire() {
        let clients: Vec<WireClient> = serde_json::from_value(serde_json::json!([
            {"address": "0x10", "mapped": true, "hidden": false, "at": [0, 0], "size": [1280, 1440],
             "workspace": {"id": 1, "name": "1"}, "floating": false, "monitor": 0,
             "class": "kitty", "title": "~", "initialClass": "kitty", "pid": 42,
             "fullscreen": 1, "focusHistoryID": 0},
            {"address": "0x20", "mapped": true, "hidden": false, "at": [2560, 0], "size": [900, 600],
             "workspace": {"id": -1337, "name": "chat"}, "floating": true, "monitor": 1,
             "class": "", "initialClass": "Signal", "title": "Signal", "pid": 43,
             "fullscreen": true, "focusHistoryID": 1},
            {"address": "0x30", "mapped": false, "class": "ghost"}
        ]))
        .unwrap();
        let monitors: Vec<WireMonitor> = serde_json::from_value(serde_json::json!([
            {"id": 0, "name": "DP-1", "width": 3840, "height": 2160, "x": 0, "y": 0, "scale": 2.0,
             "activeWorkspace": {"id": 1, "name": "1"}, "focused": true},
            {"id": 1, "name": "HDMI-A-1", "width": 1080, "height": 1920, "x": 1920, "y": 0,
             "scale": 1.0, "transform": 1, "activeWorkspace": {"id": -1337, "name": "chat"},
             "focused": false}
        ]))
        .unwrap();
        let workspaces: Vec<WireWorkspace> = serde_json::from_value(serde_json::json!([
            {"id": 1, "name": "1", "monitor": "DP-1"},
            {"id": -1337, "name": "chat", "monitor": "HDMI-A-1"},
            {"id": 4, "name": "4", "monitor": "DP-1"}
        ]))
        .unwrap();
        let parts = Parts {
            clients,
            workspaces,
            monitors,
            active: Some(0x10),
            keyboard_layout: Some("German".into()),
        };
        let s = parts.snapshot(&CompositorInfo {
            name: NAME.into(),
            ..Default::default()
        });
        assert_eq!(s.windows.len(), 2, "the unmapped client is left out");
        let kitty = s.focused.as_ref().expect("focused");
        assert_eq!(kitty.id, 0x10);
        assert_eq!(kitty.output.as_deref(), Some("DP-1"));
        assert_eq!(
            kitty.fullscreen,
            Some(false),
            "1 is maximized, not fullscreen"
        );
        assert_eq!(kitty.focused_at, Some(0.0));
        let signal = s.window(0x20).unwrap();
        assert_eq!(
            signal.app_id.as_deref(),
            Some("Signal"),
            "initialClass when class is empty"
        );
        assert_eq!(signal.fullscreen, Some(true), "an older Hyprland's boolean");
        assert_eq!(signal.workspace_id, Some(workspace_id(-1337)));
        assert_eq!(signal.visible, Some(true));
        assert!(signal.focused_at < kitty.focused_at);
        assert_eq!(
            s.outputs[0].width,
            Some(1920),
            "physical pixels over the scale"
        );
        assert_eq!(
            s.outputs[1].width,
            Some(1920),
            "sides swapped by a 90° transform"
        );
        assert_eq!(s.outputs[1].height, Some(1080));
        let ws = |id: i64| {
            s.workspaces
                .iter()
                .find(|w| w.id == workspace_id(id))
                .unwrap()
        };
        assert!(ws(1).focused && ws(1).active);
        assert!(!ws(-1337).focused && ws(-1337).active);
        assert_eq!(ws(-1337).index, None, "a named workspace has no number");
        assert!(!ws(4).active);
        assert_eq!(s.keyboard_layout.as_deref(), Some("German"));
    }
}
