//! Our own client for niri's IPC socket, written from niri's documentation (the `niri-ipc`
//! crate is GPL-3.0-or-later, so this module neither depends on it nor copies from it).
//!
//! # The wire, as this module speaks it
//!
//! Followed: the JSON wire of **niri 25.11** (docs.rs `niri-ipc` 25.11.0: `Request`, `Reply`,
//! `Response`, `Event`, `Window`, `Workspace`, `Output`, `LogicalOutput`, `KeyboardLayouts`,
//! `Action`), checked against the newer event list on niri's own docs site (which adds the
//! `Cast*` events) and niri's wiki page "IPC". 25.08 speaks the same subset; fields and
//! variants that one version has and another lacks are optional here.
//!
//! - Connect to the unix socket named by `$NIRI_SOCKET`.
//! - Write one request as JSON on one line. Unit requests are bare strings (`"Version"`,
//!   `"Windows"`, `"Workspaces"`, `"Outputs"`, `"FocusedWindow"`, `"FocusedOutput"`,
//!   `"KeyboardLayouts"`, `"EventStream"`); an action is `{"Action": {"FocusWindow": {"id": 7}}}`.
//! - Read one reply line: `{"Ok": <Response>}` or `{"Err": "<niri's message>"}`. A `Response`
//!   is externally tagged like the request: `{"Ok": {"Version": "25.11"}}`,
//!   `{"Ok": {"Windows": [...]}}`, `{"Ok": {"Outputs": {"DP-1": {...}}}}` (a map by name),
//!   `{"Ok": {"FocusedOutput": null}}`, and `{"Ok": "Handled"}` for actions.
//! - `"EventStream"` turns its connection into a one-way feed: after `{"Ok": "Handled"}` niri
//!   stops reading requests and writes one event per line, first the whole current state
//!   (`WorkspacesChanged`, `WindowsChanged`, `KeyboardLayoutsChanged`,
//!   `OverviewOpenedOrClosed`, …), then every change. Events are externally tagged too:
//!   `{"WindowFocusChanged": {"id": 7}}`.
//!
//! niri adds event variants and fields in its releases (its wiki asks clients to "handle
//! unknown fields or variants gracefully"), so every line is read as a [`serde_json::Value`]
//! first: unknown events are skipped (each name logged once), unknown fields ignored, and a line
//! that is not JSON or has the wrong shape is logged and skipped.
//!
//! Outputs are not part of the event stream: [`Niri`] reads `"Outputs"` and `"FocusedOutput"`
//! when it connects (and reconnects), and again when a `WorkspacesChanged` names a different set
//! of outputs than it knows (every connected output holds at least one workspace in niri).
//!
//! # Bounds
//!
//! A line longer than [`MAX_LINE`] is an error (the connection is dropped), never an
//! allocation without end. A request waits at most [`REQUEST_TIMEOUT`] for its reply;
//! [`Niri::connect`] waits at most [`READY_TIMEOUT`] for the initial state. A broken event
//! stream is reopened with backoff from 100 ms up to 2 s; meanwhile the last snapshot stays
//! readable, marked `compositor.connected: false`, and [`Niri::link`] says since when.
//! At most [`crate::model::MAX_WINDOWS`] windows, [`crate::model::MAX_WORKSPACES`]
//! workspaces and [`crate::model::MAX_OUTPUTS`] outputs are kept; 64 unknown event names
//! are remembered (each cut to 64 bytes), and log lines quote niri's text through
//! [`crate::link::clean`].
//!
//! # Event floods
//!
//! Events are applied to the client's own state as they are read, and a new snapshot is
//! built and published at most once per batch: when the lines already buffered have been
//! applied, and during a continuous stream at most every [`PUBLISH_EVERY`]. The first change
//! after a quiet period is published at once.

use crate::link::{BackendError, LineReader, Link, LinkState, ReadLine, clean};
use crate::model::{
    CompositorInfo, MAX_OUTPUTS, MAX_WINDOWS, MAX_WORKSPACES, Output, Rect, Screenshot, Snapshot,
    Window, Workspace,
};
use serde::Deserialize;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedReadHalf;
use tokio::sync::{oneshot, watch};

/// The longest reply or event line accepted (16 MiB); a longer one breaks the connection.
pub const MAX_LINE: usize = 16 * 1024 * 1024;
/// How long a request waits for niri's reply.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long [`Niri::connect`] waits for the event stream's initial state.
pub const READY_TIMEOUT: Duration = Duration::from_secs(3);
/// The first reconnect delay after the event stream broke.
const BACKOFF_MIN: Duration = Duration::from_millis(100);
/// The longest reconnect delay.
const BACKOFF_MAX: Duration = Duration::from_secs(2);
/// A stream that sent workspaces and windows but not (yet) the keyboard layouts or the overview
/// state counts as complete after this long without another line (older niri sends fewer).
const QUIET: Duration = Duration::from_millis(100);
/// How many distinct unknown event names are remembered for "log once".
const UNKNOWN_NAMES_CAP: usize = 64;
/// The longest unknown event name remembered or logged, in bytes (longer ones are cut).
const UNKNOWN_NAME_BYTES: usize = 64;
/// The least time between two published snapshots during a continuous event stream.
pub const PUBLISH_EVERY: Duration = Duration::from_millis(16);

const NAME: &str = "niri";

/// A live connection to niri: a [`Snapshot`] kept fresh from niri's event stream by a
/// background task, and requests (actions among them) on connections of their own.
///
/// Dropping it stops the background task.
pub struct Niri {
    socket: PathBuf,
    state: watch::Receiver<Snapshot>,
    link: Link,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Niri {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Niri")
            .field("socket", &self.socket)
            .field("version", &self.version())
            .finish_non_exhaustive()
    }
}

impl Drop for Niri {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Niri {
    /// Connects to niri at `socket`: reads `Version`, `Outputs` and `FocusedOutput`, opens the
    /// event stream and waits (at most [`READY_TIMEOUT`]) until its initial full state has
    /// arrived, then keeps the snapshot fresh in a background tokio task. If the event stream
    /// drops, the task reconnects with backoff (100 ms → 2 s) and re-reads the full state;
    /// while it is disconnected the last snapshot stays readable.
    ///
    /// Errors: [`BackendError::Connect`] (with the path) when the socket cannot be reached,
    /// [`BackendError::Refused`] when niri answers `{"Err": …}`, [`BackendError::Io`] for a
    /// broken or unreadable connection or an initial state that did not come in time.
    pub async fn connect(socket: PathBuf) -> Result<Niri, BackendError> {
        let version = version_of(&request_at(&socket, &Value::from("Version")).await?);
        let (outputs, focused_output) = fetch_outputs(&socket).await?;
        let reader = open_event_stream(&socket).await?;

        let base = Base {
            socket: socket.clone(),
            version,
            outputs_truncated: outputs.len() > MAX_OUTPUTS,
            outputs: outputs.into_iter().take(MAX_OUTPUTS).collect(),
            focused_output,
        };
        let (tx, rx) = watch::channel(Snapshot {
            compositor: base.info(),
            ..Snapshot::default()
        });
        let (ready_tx, ready_rx) = oneshot::channel();
        let link = Link::default();
        let task = tokio::spawn(supervise(base, reader, tx, link.clone(), ready_tx));
        let niri = Niri {
            socket,
            state: rx,
            link,
            task,
        };
        match tokio::time::timeout(READY_TIMEOUT, ready_rx).await {
            Ok(Ok(())) => Ok(niri),
            _ => Err(io_error(format!(
                "the event stream at {} sent no complete initial state within {:?}",
                niri.socket.display(),
                READY_TIMEOUT
            ))),
        }
    }

    /// The snapshot channel: `borrow()` for the current state, `changed()`/`wait_for` to
    /// follow it.
    pub fn state(&self) -> watch::Receiver<Snapshot> {
        self.state.clone()
    }

    /// The socket this client talks to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Whether the event stream is up, and since when.
    pub fn link(&self) -> LinkState {
        self.link.get()
    }

    /// Sends `{"Action": action}` on a request connection of its own (as `niri msg action`
    /// does), e.g. `action(json!({"FocusWorkspace": {"reference": {"Index": 2}}}))`.
    /// `{"Ok": "Handled"}` → `Ok(())` (any other `Ok` payload is logged and counts as done
    /// too); `{"Err": msg}` → [`BackendError::Refused`] carrying niri's words; no reply within
    /// [`REQUEST_TIMEOUT`], or an unreadable one, → [`BackendError::Io`].
    pub async fn action(&self, action: Value) -> Result<(), BackendError> {
        let request = serde_json::json!({ "Action": action });
        let reply = request_at(&self.socket, &request).await?;
        if reply != "Handled" {
            tracing::debug!(reply = %clean(&reply.to_string()), "niri answered an action with something other than Handled");
        }
        Ok(())
    }

    /// Sends any request (`json!("Windows")`, `json!({"Action": …})`) and returns the `Ok`
    /// payload as niri sent it (e.g. `{"Windows": [...]}` or `"Handled"`); `{"Err": msg}` →
    /// [`BackendError::Refused`].
    pub async fn request(&self, request: Value) -> Result<Value, BackendError> {
        request_at(&self.socket, &request).await
    }

    /// niri's version string (`Version` request), as of the last (re)connect.
    pub fn version(&self) -> Option<String> {
        self.state.borrow().compositor.version.clone()
    }
}

// ---------------------------------------------------------------------------------------------
// Our serde shapes for the part of niri's wire we read. Unknown fields are ignored (serde's
// default); fields that some niri versions lack are optional or defaulted.

/// A niri toplevel window (`Window` on the wire).
#[derive(Debug, Clone, Deserialize)]
struct WireWindow {
    id: u64,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    app_id: Option<String>,
    #[serde(default)]
    pid: Option<i64>,
    #[serde(default)]
    workspace_id: Option<u64>,
    #[serde(default)]
    is_focused: bool,
    /// Not in any released niri (proposed upstream); read if a future niri sends it.
    #[serde(default)]
    is_fullscreen: Option<bool>,
    /// Since niri 25.01.
    #[serde(default)]
    is_floating: Option<bool>,
    /// Since niri 25.08; its parts are optional there too.
    #[serde(default)]
    layout: Option<WireWindowLayout>,
    /// When it last had the focus, on niri's monotonic clock (since niri 25.05; `null` for a
    /// window never focused).
    #[serde(default)]
    focus_timestamp: Option<WireTimestamp>,
}

/// A point on niri's monotonic clock (`Timestamp` on the wire).
#[derive(Debug, Clone, Copy, Default, Deserialize)]
struct WireTimestamp {
    #[serde(default)]
    secs: u64,
    #[serde(default)]
    nanos: u32,
}

impl WireTimestamp {
    /// Seconds, for ordering.
    fn seconds(self) -> f64 {
        self.secs as f64 + f64::from(self.nanos.min(999_999_999)) / 1e9
    }
}

/// `ScreenshotCaptured`: `{path}` (`null` when it went to the clipboard only).
#[derive(Debug, Deserialize)]
struct Captured {
    #[serde(default)]
    path: Option<String>,
}

/// `WindowFocusTimestampChanged`: `{id, focus_timestamp}`.
#[derive(Debug, Deserialize)]
struct FocusTimestamp {
    id: u64,
    #[serde(default)]
    focus_timestamp: Option<WireTimestamp>,
}

/// A window's place and size (`WindowLayout` on the wire, niri 25.08+), in logical pixels.
#[derive(Debug, Clone, Default, Deserialize)]
struct WireWindowLayout {
    /// The tile's top-left corner in its workspace's view (the output's logical area);
    /// absent for windows not shown (another workspace, a tab behind another).
    #[serde(default)]
    tile_pos_in_workspace_view: Option<(f64, f64)>,
    /// Where the window sits inside its tile (borders).
    #[serde(default)]
    window_offset_in_tile: Option<(f64, f64)>,
    /// The window's own size.
    #[serde(default)]
    window_size: Option<(i64, i64)>,
}

impl WireWindowLayout {
    /// The window's content rectangle in the output layout, given its output's logical
    /// top-left corner.
    fn rect(&self, output: (i64, i64)) -> Option<Rect> {
        let (tx, ty) = self.tile_pos_in_workspace_view?;
        let (ox, oy) = self.window_offset_in_tile.unwrap_or((0.0, 0.0));
        let (width, height) = self.window_size?;
        let finite = [tx, ty, ox, oy]
            .iter()
            .all(|v| v.is_finite() && v.abs() < 1e7);
        (finite && width > 0 && height > 0 && width < 1 << 20 && height < 1 << 20).then(|| Rect {
            x: output.0 + (tx + ox).round() as i64,
            y: output.1 + (ty + oy).round() as i64,
            width,
            height,
        })
    }
}

/// `WindowLayoutsChanged`: `{changes: [[id, WindowLayout], ...]}`.
#[derive(Debug, Deserialize)]
struct LayoutsChanged {
    changes: Vec<(u64, WireWindowLayout)>,
}

/// A niri workspace (`Workspace` on the wire). `idx` is 1-based and per output.
#[derive(Debug, Clone, Deserialize)]
struct WireWorkspace {
    id: u64,
    #[serde(default)]
    idx: Option<i64>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    output: Option<String>,
    #[serde(default)]
    is_active: bool,
    #[serde(default)]
    is_focused: bool,
}

/// A niri output (`Output` on the wire; only the fields we report).
#[derive(Debug, Clone, Deserialize)]
struct WireOutput {
    name: String,
    #[serde(default)]
    make: Option<String>,
    #[serde(default)]
    model: Option<String>,
    /// `None` when the output is off.
    #[serde(default)]
    logical: Option<WireLogical>,
}

/// An output's place in the logical space (`LogicalOutput` on the wire).
#[derive(Debug, Clone, Deserialize)]
struct WireLogical {
    #[serde(default)]
    x: Option<i64>,
    #[serde(default)]
    y: Option<i64>,
    width: i64,
    height: i64,
}

/// The configured layouts and the active one (`KeyboardLayouts` on the wire).
#[derive(Debug, Clone, Deserialize)]
struct WireKeyboardLayouts {
    #[serde(default)]
    names: Vec<String>,
    #[serde(default)]
    current_idx: usize,
}

// ---------------------------------------------------------------------------------------------
// Requests.

fn io_error(message: impl Into<String>) -> BackendError {
    BackendError::Io {
        compositor: NAME,
        message: message.into(),
    }
}

fn connect_error(socket: &Path, source: std::io::Error) -> BackendError {
    BackendError::Connect {
        compositor: NAME,
        socket: socket.display().to_string(),
        source,
    }
}

/// Send one request on a fresh connection and return the `Ok` payload.
async fn request_at(socket: &Path, request: &Value) -> Result<Value, BackendError> {
    let line = serde_json::to_string(request).map_err(|e| io_error(e.to_string()))?;
    let stream = UnixStream::connect(socket)
        .await
        .map_err(|e| connect_error(socket, e))?;
    let (read, mut write) = stream.into_split();
    let mut reader = LineReader::new(read, MAX_LINE);
    let exchange = async {
        write_line(&mut write, &line).await?;
        read_reply(&mut reader, &line).await
    };
    match tokio::time::timeout(REQUEST_TIMEOUT, exchange).await {
        Ok(result) => result,
        Err(_) => Err(io_error(format!(
            "no reply to {line} within {REQUEST_TIMEOUT:?}"
        ))),
    }
}

async fn write_line(
    write: &mut tokio::net::unix::OwnedWriteHalf,
    line: &str,
) -> Result<(), BackendError> {
    let mut bytes = Vec::with_capacity(line.len() + 1);
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    write
        .write_all(&bytes)
        .await
        .map_err(|e| io_error(format!("sending {line}: {e}")))?;
    write
        .flush()
        .await
        .map_err(|e| io_error(format!("sending {line}: {e}")))
}

/// Read one `{"Ok": …}` / `{"Err": …}` reply line.
async fn read_reply<R: AsyncRead + Unpin>(
    reader: &mut LineReader<R>,
    request: &str,
) -> Result<Value, BackendError> {
    let bytes = match reader.next_line().await {
        Ok(ReadLine::Line(bytes)) => bytes,
        Ok(ReadLine::Eof) => {
            return Err(io_error(format!(
                "niri closed the connection without answering {request}"
            )));
        }
        Ok(ReadLine::TooLong) => {
            return Err(io_error(format!(
                "the reply to {request} is longer than {MAX_LINE} bytes"
            )));
        }
        Err(e) => return Err(io_error(format!("reading the reply to {request}: {e}"))),
    };
    let reply: Value = serde_json::from_slice(&bytes).map_err(|e| {
        io_error(format!(
            "the reply to {request} is not JSON ({e}): {}",
            preview(&bytes)
        ))
    })?;
    match reply {
        Value::Object(mut map) if map.len() == 1 => {
            if let Some(ok) = map.remove("Ok") {
                Ok(ok)
            } else if let Some(err) = map.remove("Err") {
                let message = match err {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                Err(BackendError::Refused {
                    compositor: NAME,
                    request: request.to_string(),
                    message,
                })
            } else {
                Err(io_error(format!(
                    "the reply to {request} is neither Ok nor Err: {}",
                    preview(&bytes)
                )))
            }
        }
        _ => Err(io_error(format!(
            "the reply to {request} is neither Ok nor Err: {}",
            preview(&bytes)
        ))),
    }
}

/// At most 200 characters of a line, control characters escaped, for messages and logs.
fn preview(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(800)]);
    let mut shown = clean(&text);
    if bytes.len() > 800 && !shown.ends_with('…') {
        shown.push('…');
    }
    shown
}

/// The payload of `{"<tag>": payload}`, if the response carries that tag.
fn tagged(response: Value, tag: &str) -> Result<Value, BackendError> {
    match response {
        Value::Object(mut map) if map.contains_key(tag) => Ok(map.remove(tag).unwrap_or_default()),
        other => Err(io_error(format!(
            "expected a {tag} response, got {}",
            preview(other.to_string().as_bytes())
        ))),
    }
}

fn version_of(response: &Value) -> Option<String> {
    response
        .get("Version")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// `Outputs` (a map by name, sorted here by name) and the `FocusedOutput`'s name.
async fn fetch_outputs(socket: &Path) -> Result<(Vec<WireOutput>, Option<String>), BackendError> {
    let outputs = tagged(
        request_at(socket, &Value::from("Outputs")).await?,
        "Outputs",
    )?;
    let Value::Object(map) = outputs else {
        return Err(io_error("the Outputs response is not a map"));
    };
    let mut list = Vec::with_capacity(map.len());
    for (name, value) in map {
        match serde_json::from_value::<WireOutput>(value) {
            Ok(output) => list.push(output),
            Err(e) => {
                tracing::warn!(output = %clean(&name), error = %clean(&e.to_string()), "skipping an unreadable niri output")
            }
        }
    }
    list.sort_by(|a, b| a.name.cmp(&b.name));
    let focused = tagged(
        request_at(socket, &Value::from("FocusedOutput")).await?,
        "FocusedOutput",
    )?;
    let focused = focused
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok((list, focused))
}

/// Connect, ask for the event stream and check niri's `Handled`.
async fn open_event_stream(socket: &Path) -> Result<LineReader<OwnedReadHalf>, BackendError> {
    let stream = UnixStream::connect(socket)
        .await
        .map_err(|e| connect_error(socket, e))?;
    let (read, mut write) = stream.into_split();
    let mut reader = LineReader::new(read, MAX_LINE);
    let line = "\"EventStream\"";
    let handshake = async {
        write_line(&mut write, line).await?;
        read_reply(&mut reader, line).await
    };
    let reply = match tokio::time::timeout(REQUEST_TIMEOUT, handshake).await {
        Ok(result) => result?,
        Err(_) => {
            return Err(io_error(format!(
                "no reply to {line} within {REQUEST_TIMEOUT:?}"
            )));
        }
    };
    if reply != "Handled" {
        return Err(io_error(format!(
            "niri answered EventStream with {}",
            preview(reply.to_string().as_bytes())
        )));
    }
    // niri reads nothing more on this connection; the write half is dropped (our side shuts
    // down writing), which niri does not mind.
    drop(write);
    Ok(reader)
}

// ---------------------------------------------------------------------------------------------
// The event stream and the snapshot.

/// What outlives one event-stream session: facts from requests.
struct Base {
    socket: PathBuf,
    version: Option<String>,
    /// Sorted by name.
    outputs: Vec<WireOutput>,
    /// The `FocusedOutput` reply's name.
    focused_output: Option<String>,
    /// niri reported more than [`MAX_OUTPUTS`] outputs.
    outputs_truncated: bool,
}

impl Base {
    fn info(&self) -> CompositorInfo {
        CompositorInfo {
            name: NAME.into(),
            version: self.version.clone(),
            socket: Some(self.socket.display().to_string()),
            connected: true,
        }
    }

    /// Re-read the version and the outputs after a reconnect; keep the old ones on failure.
    async fn refresh(&mut self) {
        match request_at(&self.socket, &Value::from("Version")).await {
            Ok(reply) => {
                if let Some(version) = version_of(&reply) {
                    self.version = Some(version);
                }
            }
            Err(e) => tracing::debug!(error = %e, "niri: re-reading the version failed"),
        }
        self.refresh_outputs().await;
    }

    async fn refresh_outputs(&mut self) {
        match fetch_outputs(&self.socket).await {
            Ok((outputs, focused)) => {
                self.outputs_truncated = outputs.len() > MAX_OUTPUTS;
                self.outputs = outputs.into_iter().take(MAX_OUTPUTS).collect();
                self.focused_output = focused;
            }
            Err(e) => tracing::debug!(error = %e, "niri: re-reading the outputs failed"),
        }
    }
}

/// The state one event-stream session has built.
#[derive(Default)]
struct Live {
    workspaces: Option<Vec<WireWorkspace>>,
    windows: Option<Vec<WireWindow>>,
    keyboard: Option<WireKeyboardLayouts>,
    overview: Option<bool>,
    /// The screenshots `ScreenshotCaptured` reported.
    screenshot: Option<Screenshot>,
    /// Windows beyond [`MAX_WINDOWS`] were left out.
    windows_dropped: bool,
    /// Workspaces beyond [`MAX_WORKSPACES`] were left out.
    workspaces_dropped: bool,
}

impl Live {
    /// Everything niri's initial burst carries has come.
    fn complete(&self) -> bool {
        self.has_core() && self.keyboard.is_some() && self.overview.is_some()
    }

    /// The parts without which no snapshot makes sense have come.
    fn has_core(&self) -> bool {
        self.workspaces.is_some() && self.windows.is_some()
    }

    fn snapshot(&self, base: &Base) -> Snapshot {
        let workspaces = self.workspaces.as_deref().unwrap_or_default();
        let windows = self.windows.as_deref().unwrap_or_default();
        let by_id: HashMap<u64, &WireWorkspace> = workspaces.iter().map(|w| (w.id, w)).collect();
        let workspace = |id: Option<u64>| id.and_then(|id| by_id.get(&id).copied());
        let focused_output = workspaces
            .iter()
            .find(|w| w.is_focused)
            .and_then(|w| w.output.clone())
            .or_else(|| base.focused_output.clone());
        let mut snapshot = Snapshot {
            compositor: base.info(),
            focused: None,
            windows: windows
                .iter()
                .map(|w| {
                    let ws = workspace(w.workspace_id);
                    Window {
                        id: w.id,
                        app_id: w.app_id.clone(),
                        title: w.title.clone(),
                        pid: w.pid,
                        workspace: ws.and_then(|ws| {
                            ws.name
                                .clone()
                                .or_else(|| ws.idx.map(|idx| idx.to_string()))
                        }),
                        workspace_id: w.workspace_id,
                        output: ws.and_then(|ws| ws.output.clone()),
                        focused: w.is_focused,
                        fullscreen: w.is_fullscreen,
                        floating: w.is_floating,
                        rect: ws
                            .and_then(|ws| ws.output.as_deref())
                            .and_then(|name| base.outputs.iter().find(|o| o.name == name))
                            .and_then(|o| o.logical.as_ref())
                            .and_then(|l| {
                                w.layout
                                    .as_ref()?
                                    .rect((l.x.unwrap_or(0), l.y.unwrap_or(0)))
                            }),
                        frame: None,
                        visible: None,
                        focused_at: w.focus_timestamp.map(WireTimestamp::seconds),
                    }
                })
                .collect(),
            workspaces: workspaces
                .iter()
                .map(|w| Workspace {
                    id: w.id,
                    index: w.idx,
                    name: w.name.clone(),
                    output: w.output.clone(),
                    focused: w.is_focused,
                    active: w.is_active,
                })
                .collect(),
            outputs: base
                .outputs
                .iter()
                .map(|o| Output {
                    name: o.name.clone(),
                    focused: focused_output.as_deref() == Some(o.name.as_str()),
                    make: o.make.clone().filter(|s| !s.is_empty()),
                    model: o.model.clone().filter(|s| !s.is_empty()),
                    width: o.logical.as_ref().map(|l| l.width),
                    height: o.logical.as_ref().map(|l| l.height),
                    x: o.logical.as_ref().and_then(|l| l.x),
                    y: o.logical.as_ref().and_then(|l| l.y),
                })
                .collect(),
            keyboard_layout: self
                .keyboard
                .as_ref()
                .and_then(|k| k.names.get(k.current_idx).cloned()),
            overview: self.overview,
            screenshot: self.screenshot.clone(),
            truncated: self.windows_dropped || self.workspaces_dropped || base.outputs_truncated,
            provenance: Default::default(),
        };
        snapshot.refresh_focus();
        snapshot
    }

    /// Apply one known event. Returns whether the event was known, or an error message when a
    /// known event's payload did not have the expected shape.
    fn apply(&mut self, name: &str, payload: Value) -> Result<bool, String> {
        fn parse<T: serde::de::DeserializeOwned>(payload: Value) -> Result<T, String> {
            serde_json::from_value(payload).map_err(|e| e.to_string())
        }
        #[derive(Deserialize)]
        struct Workspaces {
            workspaces: Vec<WireWorkspace>,
        }
        #[derive(Deserialize)]
        struct Activated {
            id: u64,
            #[serde(default)]
            focused: bool,
        }
        #[derive(Deserialize)]
        struct Windows {
            windows: Vec<WireWindow>,
        }
        #[derive(Deserialize)]
        struct Opened {
            window: WireWindow,
        }
        #[derive(Deserialize)]
        struct Closed {
            id: u64,
        }
        #[derive(Deserialize)]
        struct Focus {
            #[serde(default)]
            id: Option<u64>,
        }
        #[derive(Deserialize)]
        struct Layouts {
            keyboard_layouts: WireKeyboardLayouts,
        }
        #[derive(Deserialize)]
        struct Switched {
            idx: usize,
        }
        #[derive(Deserialize)]
        struct Overview {
            is_open: bool,
        }

        match name {
            "WorkspacesChanged" => {
                let mut workspaces = parse::<Workspaces>(payload)?.workspaces;
                self.workspaces_dropped = workspaces.len() > MAX_WORKSPACES;
                workspaces.truncate(MAX_WORKSPACES);
                self.workspaces = Some(workspaces);
            }
            "WorkspaceActivated" => {
                // The workspace becomes the active one of its output; with `focused` it is
                // also the single focused workspace.
                let event: Activated = parse(payload)?;
                if let Some(workspaces) = self.workspaces.as_mut() {
                    let output = workspaces
                        .iter()
                        .find(|w| w.id == event.id)
                        .map(|w| w.output.clone());
                    if let Some(output) = output {
                        for ws in workspaces.iter_mut() {
                            if ws.output == output {
                                ws.is_active = ws.id == event.id;
                            }
                            if event.focused {
                                ws.is_focused = ws.id == event.id;
                            }
                        }
                    }
                }
            }
            "WindowsChanged" => {
                let mut windows = parse::<Windows>(payload)?.windows;
                self.windows_dropped = windows.len() > MAX_WINDOWS;
                windows.truncate(MAX_WINDOWS);
                self.windows = Some(windows);
            }
            "WindowOpenedOrChanged" => {
                // A focused window takes the focus from every other window.
                let window = parse::<Opened>(payload)?.window;
                let windows = self.windows.get_or_insert_with(Vec::new);
                if window.is_focused {
                    for w in windows.iter_mut() {
                        w.is_focused = false;
                    }
                }
                if let Some(slot) = windows.iter_mut().find(|w| w.id == window.id) {
                    *slot = window;
                } else if windows.len() < MAX_WINDOWS {
                    windows.push(window);
                } else {
                    self.windows_dropped = true;
                }
            }
            "WindowClosed" => {
                let id = parse::<Closed>(payload)?.id;
                if let Some(windows) = self.windows.as_mut() {
                    windows.retain(|w| w.id != id);
                }
            }
            "WindowFocusChanged" => {
                let id = parse::<Focus>(payload)?.id;
                if let Some(windows) = self.windows.as_mut() {
                    for w in windows.iter_mut() {
                        w.is_focused = Some(w.id) == id;
                    }
                }
            }
            "KeyboardLayoutsChanged" => {
                self.keyboard = Some(parse::<Layouts>(payload)?.keyboard_layouts);
            }
            "KeyboardLayoutSwitched" => {
                let idx = parse::<Switched>(payload)?.idx;
                if let Some(keyboard) = self.keyboard.as_mut() {
                    keyboard.current_idx = idx;
                }
            }
            "OverviewOpenedOrClosed" => {
                self.overview = Some(parse::<Overview>(payload)?.is_open);
            }
            "WindowLayoutsChanged" => {
                let changes = parse::<LayoutsChanged>(payload)?.changes;
                if let Some(windows) = self.windows.as_mut() {
                    for (id, layout) in changes {
                        if let Some(w) = windows.iter_mut().find(|w| w.id == id) {
                            w.layout = Some(layout);
                        }
                    }
                }
            }
            "WindowFocusTimestampChanged" => {
                let changed = parse::<FocusTimestamp>(payload)?;
                if let Some(w) = self
                    .windows
                    .as_mut()
                    .and_then(|windows| windows.iter_mut().find(|w| w.id == changed.id))
                {
                    w.focus_timestamp = changed.focus_timestamp;
                }
            }
            "ScreenshotCaptured" => {
                let captured = parse::<Captured>(payload)?;
                let shot = self.screenshot.get_or_insert_with(Screenshot::default);
                shot.count += 1;
                // A path is a file niri wrote; an odd one (too long, a control character) is
                // not reported.
                shot.path = captured
                    .path
                    .filter(|p| p.len() <= 4096 && !p.chars().any(char::is_control));
            }
            // Known, but nothing in the snapshot depends on them.
            "WorkspaceUrgencyChanged"
            | "WorkspaceActiveWindowChanged"
            | "WindowUrgencyChanged"
            | "ConfigLoaded"
            | "CastsChanged"
            | "CastStartedOrChanged"
            | "CastStopped" => {}
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The outputs the workspaces are on.
    fn workspace_outputs(&self) -> BTreeSet<String> {
        self.workspaces
            .iter()
            .flatten()
            .filter_map(|w| w.output.clone())
            .collect()
    }
}

/// Split an externally tagged event into its name and payload: `{"Name": {...}}`, or a bare
/// `"Name"` for a variant without fields.
fn split_event(value: Value) -> Option<(String, Value)> {
    match value {
        Value::Object(map) if map.len() == 1 => map.into_iter().next(),
        Value::String(name) => Some((name, Value::Null)),
        _ => None,
    }
}

/// What the client remembers across sessions to log things once.
#[derive(Default)]
struct Notes {
    /// Unknown event names seen (each cut to [`UNKNOWN_NAME_BYTES`]).
    unknown: HashSet<String>,
    /// Whether leaving out state beyond the caps was logged.
    truncation_logged: bool,
}

/// `name` cut to at most `max` bytes at a character boundary.
fn cut(name: &str, max: usize) -> &str {
    if name.len() <= max {
        return name;
    }
    let mut end = max;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// The background task: run the session, and reconnect when it ends.
async fn supervise(
    mut base: Base,
    reader: LineReader<OwnedReadHalf>,
    tx: watch::Sender<Snapshot>,
    link: Link,
    ready: oneshot::Sender<()>,
) {
    let mut ready = Some(ready);
    let mut notes = Notes::default();
    let mut reader = Some(reader);
    let mut backoff = BACKOFF_MIN;
    loop {
        if let Some(mut r) = reader.take() {
            let (reached_ready, why) =
                run_session(&mut base, &mut r, &tx, &link, &mut ready, &mut notes).await;
            tracing::info!(socket = %base.socket.display(), reason = %why, "niri event stream ended; reconnecting");
            link.down(&why);
            tx.send_if_modified(|s| std::mem::replace(&mut s.compositor.connected, false));
            if reached_ready {
                backoff = BACKOFF_MIN;
            } else {
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
        tokio::time::sleep(backoff).await;
        match open_event_stream(&base.socket).await {
            Ok(r) => {
                base.refresh().await;
                reader = Some(r);
            }
            Err(e) => {
                tracing::debug!(error = %e, "niri: reopening the event stream failed");
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
}

/// Read and apply one line; returns the event's name when it changed the state.
fn apply_line(live: &mut Live, bytes: &[u8], notes: &mut Notes) -> Option<String> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    let value: Value = match serde_json::from_slice(bytes) {
        Ok(value) => value,
        Err(e) => {
            tracing::warn!(error = %clean(&e.to_string()), line = %preview(bytes), "niri sent a line that is not JSON; skipped");
            return None;
        }
    };
    let Some((name, payload)) = split_event(value) else {
        tracing::warn!(line = %preview(bytes), "niri sent a line that is not an event; skipped");
        return None;
    };
    match live.apply(&name, payload) {
        Ok(true) => Some(name),
        Ok(false) => {
            let short = cut(&name, UNKNOWN_NAME_BYTES);
            if notes.unknown.len() < UNKNOWN_NAMES_CAP && !notes.unknown.contains(short) {
                notes.unknown.insert(short.to_owned());
                tracing::info!(event = %clean(short), "niri sent an event this client does not know; ignoring it");
            }
            None
        }
        Err(e) => {
            tracing::warn!(event = %clean(cut(&name, UNKNOWN_NAME_BYTES)), error = %clean(&e), "niri sent an event of an unexpected shape; skipped");
            None
        }
    }
}

/// Read one event stream until it ends. Events are applied to `live` as they come; a
/// snapshot is published once the initial state is in, then after each batch of buffered
/// lines, at most every [`PUBLISH_EVERY`] while the stream keeps going. Returns whether the
/// initial state came, and why the session ended.
async fn run_session(
    base: &mut Base,
    reader: &mut LineReader<OwnedReadHalf>,
    tx: &watch::Sender<Snapshot>,
    link: &Link,
    ready_signal: &mut Option<oneshot::Sender<()>>,
    notes: &mut Notes,
) -> (bool, String) {
    let mut live = Live::default();
    let mut ready = false;
    let mut checked_outputs: Option<BTreeSet<String>> = None;
    // A change applied but not yet published.
    let mut dirty = false;
    let mut last_publish: Option<Instant> = None;
    let publish = |live: &Live, base: &Base, notes: &mut Notes| {
        let snapshot = live.snapshot(base);
        if snapshot.truncated && !notes.truncation_logged {
            notes.truncation_logged = true;
            tracing::warn!(
                "niri reports more than {MAX_WINDOWS} windows, {MAX_WORKSPACES} workspaces or \
                 {MAX_OUTPUTS} outputs; the rest are left out of the snapshot (truncated: true)"
            );
        }
        tx.send_if_modified(|current| {
            if *current == snapshot {
                false
            } else {
                *current = snapshot;
                true
            }
        });
        Instant::now()
    };
    loop {
        // How long to wait for the next line before acting without it: the initial state is
        // complete after a quiet moment; a pending change is published by its deadline.
        let wait = if !ready {
            live.has_core().then_some(QUIET)
        } else if dirty {
            Some(last_publish.map_or(Duration::ZERO, |t| {
                PUBLISH_EVERY.saturating_sub(t.elapsed())
            }))
        } else {
            None
        };
        let next = match wait {
            Some(wait) => match tokio::time::timeout(wait, reader.next_line()).await {
                Ok(next) => next,
                Err(_) => {
                    if !ready {
                        ready = true;
                        link.up();
                        if let Some(signal) = ready_signal.take() {
                            let _ = signal.send(());
                        }
                    }
                    last_publish = Some(publish(&live, base, notes));
                    dirty = false;
                    continue;
                }
            },
            None => reader.next_line().await,
        };
        let mut line = match next {
            Ok(ReadLine::Line(bytes)) => bytes,
            Ok(ReadLine::Eof) => return (ready, "niri closed the connection".into()),
            Ok(ReadLine::TooLong) => {
                return (
                    ready,
                    format!("an event line is longer than {MAX_LINE} bytes"),
                );
            }
            Err(e) => return (ready, format!("reading: {e}")),
        };
        // Apply this line and every complete line already buffered, without waiting.
        let mut workspaces_changed = false;
        loop {
            if let Some(name) = apply_line(&mut live, &line, notes) {
                dirty = true;
                workspaces_changed |= name == "WorkspacesChanged";
            }
            match reader.buffered_line() {
                Some(ReadLine::Line(bytes)) => line = bytes,
                Some(ReadLine::TooLong) => {
                    return (
                        ready,
                        format!("an event line is longer than {MAX_LINE} bytes"),
                    );
                }
                Some(ReadLine::Eof) | None => break,
            }
        }
        if workspaces_changed {
            // Outputs are not in the event stream: when the workspaces name another set of
            // outputs than we know, read them again (once per distinct set).
            let seen = live.workspace_outputs();
            let known: BTreeSet<String> = base.outputs.iter().map(|o| o.name.clone()).collect();
            if seen != known && checked_outputs.as_ref() != Some(&seen) && !base.outputs_truncated {
                base.refresh_outputs().await;
                checked_outputs = Some(seen);
            }
        }
        if !ready && live.complete() {
            ready = true;
            link.up();
            if let Some(signal) = ready_signal.take() {
                let _ = signal.send(());
            }
        }
        if ready && dirty && last_publish.is_none_or(|t| t.elapsed() >= PUBLISH_EVERY) {
            last_publish = Some(publish(&live, base, notes));
            dirty = false;
        }
        // A stream that never pauses must not keep this worker from other tasks (the
        // buffered lines cost tokio's budget nothing).
        tokio::task::yield_now().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> Base {
        Base {
            socket: "/run/niri.sock".into(),
            version: Some("25.11".into()),
            outputs: vec![WireOutput {
                name: "DP-1".into(),
                make: Some("Acme".into()),
                model: Some(String::new()),
                logical: Some(WireLogical {
                    x: Some(0),
                    y: Some(0),
                    width: 1920,
                    height: 1080,
                }),
            }],
            focused_output: None,
            outputs_truncated: false,
        }
    }

    #[test]
    fn window_layouts_give_the_content_rect_in_the_output_layout() {
        let mut live = Live::default();
        live.apply(
            "WorkspacesChanged",
            json!({"workspaces": [{"id": 1, "idx": 1, "output": "DP-1", "is_active": true,
                                   "is_focused": true}]}),
        )
        .unwrap();
        let mut b = base();
        b.outputs[0].logical.as_mut().unwrap().x = Some(1920);
        live.apply(
            "WindowsChanged",
            json!({"windows": [
                {"id": 7, "app_id": "foot", "workspace_id": 1, "is_focused": true,
                 "layout": {"pos_in_scrolling_layout": [1, 1], "tile_size": [960.0, 1040.0],
                            "window_size": [956, 1036], "tile_pos_in_workspace_view": [16.0, 20.5],
                            "window_offset_in_tile": [2.0, 2.0]}},
                {"id": 8, "app_id": "off", "workspace_id": 1,
                 "layout": {"window_size": [10, 10], "tile_pos_in_workspace_view": null}},
                {"id": 9, "app_id": "old", "workspace_id": 1}
            ]}),
        )
        .unwrap();
        let s = live.snapshot(&b);
        assert_eq!(
            s.window(7).unwrap().rect,
            Some(Rect {
                x: 1920 + 18,
                y: 23,
                width: 956,
                height: 1036
            })
        );
        assert_eq!(s.window(8).unwrap().rect, None, "not shown: no position");
        assert_eq!(s.window(9).unwrap().rect, None, "niri before 25.08");
        // A layout change moves it; hostile numbers give no rect rather than a wrong one.
        live.apply(
            "WindowLayoutsChanged",
            json!({"changes": [[7, {"window_size": [100, 50], "tile_pos_in_workspace_view": [0.0, 0.0]}],
                               [9, {"window_size": [-5, 50], "tile_pos_in_workspace_view": [0.0, 0.0]}],
                               [404, {"window_size": [1, 1]}]]}),
        )
        .unwrap();
        let s = live.snapshot(&b);
        assert_eq!(
            s.window(7).unwrap().rect,
            Some(Rect {
                x: 1920,
                y: 0,
                width: 100,
                height: 50
            })
        );
        assert_eq!(s.window(9).unwrap().rect, None);
        assert!(
            live.apply("WindowLayoutsChanged", json!({"changes": "x"}))
                .is_err()
        );
        let huge = WireWindowLayout {
            tile_pos_in_workspace_view: Some((f64::MAX, 0.0)),
            window_offset_in_tile: None,
            window_size: Some((10, 10)),
        };
        assert_eq!(huge.rect((0, 0)), None);
    }

    #[test]
    fn events_build_the_snapshot() {
        let mut live = Live::default();
        let ws = |id: u64, idx: i64, name: Option<&str>, active: bool, focused: bool| {
            json!({"id": id, "idx": idx, "name": name, "output": "DP-1", "is_urgent": false,
                   "is_active": active, "is_focused": focused, "active_window_id": null})
        };
        live.apply(
            "WorkspacesChanged",
            json!({"workspaces": [ws(1, 1, Some("web"), true, true), ws(2, 2, None, false, false)]}),
        )
        .unwrap();
        live.apply(
            "WindowsChanged",
            json!({"windows": [
                {"id": 7, "title": "t", "app_id": "foot", "pid": 3, "workspace_id": 2,
                 "is_focused": false, "is_floating": false, "new_field": [1]},
                {"id": 8, "title": null, "app_id": "firefox", "pid": null, "workspace_id": 1,
                 "is_focused": true}
            ]}),
        )
        .unwrap();
        live.apply(
            "KeyboardLayoutsChanged",
            json!({"keyboard_layouts": {"names": ["English (US)", "German"], "current_idx": 0}}),
        )
        .unwrap();
        assert!(!live.complete());
        live.apply("OverviewOpenedOrClosed", json!({"is_open": false}))
            .unwrap();
        assert!(live.complete());
        assert_eq!(live.apply("FutureThing", json!({"x": 1})), Ok(false));
        assert!(live.apply("WindowClosed", json!({"nope": 1})).is_err());

        let s = live.snapshot(&base());
        assert_eq!(s.focused.as_ref().map(|w| w.id), Some(8));
        assert_eq!(s.window(7).unwrap().workspace.as_deref(), Some("2"));
        assert_eq!(s.window(8).unwrap().workspace.as_deref(), Some("web"));
        assert_eq!(s.window(8).unwrap().output.as_deref(), Some("DP-1"));
        assert_eq!(s.outputs[0].model, None);
        assert!(s.outputs[0].focused);
        assert_eq!(s.keyboard_layout.as_deref(), Some("English (US)"));

        live.apply("WorkspaceActivated", json!({"id": 2, "focused": true}))
            .unwrap();
        live.apply("WindowFocusChanged", json!({"id": 7})).unwrap();
        live.apply("KeyboardLayoutSwitched", json!({"idx": 1}))
            .unwrap();
        let s = live.snapshot(&base());
        assert_eq!(s.focused_workspace().map(|w| w.id), Some(2));
        assert!(!s.workspaces[0].active);
        assert_eq!(s.focused.as_ref().map(|w| w.id), Some(7));
        assert_eq!(s.keyboard_layout.as_deref(), Some("German"));

        live.apply("WindowFocusChanged", json!({"id": null}))
            .unwrap();
        assert_eq!(live.snapshot(&base()).focused, None);
    }

    #[test]
    fn windows_and_workspaces_beyond_the_caps_are_left_out() {
        let mut live = Live::default();
        let windows: Vec<Value> = (0..MAX_WINDOWS as u64 + 10)
            .map(|id| json!({"id": id, "app_id": "a", "workspace_id": 1}))
            .collect();
        let workspaces: Vec<Value> = (0..MAX_WORKSPACES as u64 + 3)
            .map(|id| json!({"id": id, "idx": 1, "output": "DP-1"}))
            .collect();
        live.apply("WorkspacesChanged", json!({ "workspaces": workspaces }))
            .unwrap();
        live.apply("WindowsChanged", json!({ "windows": windows }))
            .unwrap();
        let s = live.snapshot(&base());
        assert_eq!(s.windows.len(), MAX_WINDOWS);
        assert_eq!(s.workspaces.len(), MAX_WORKSPACES);
        assert!(s.truncated);
        // A new window at the cap is left out too; a known one still changes.
        live.apply(
            "WindowOpenedOrChanged",
            json!({"window": {"id": 999_999, "app_id": "new"}}),
        )
        .unwrap();
        live.apply(
            "WindowOpenedOrChanged",
            json!({"window": {"id": 5, "app_id": "a", "title": "changed"}}),
        )
        .unwrap();
        let s = live.snapshot(&base());
        assert_eq!(s.windows.len(), MAX_WINDOWS);
        assert!(s.window(999_999).is_none());
        assert_eq!(s.window(5).unwrap().title.as_deref(), Some("changed"));
        // A state within the caps is whole again.
        live.apply("WindowsChanged", json!({"windows": []}))
            .unwrap();
        live.apply("WorkspacesChanged", json!({"workspaces": []}))
            .unwrap();
        assert!(!live.snapshot(&base()).truncated);
    }

    #[test]
    fn unknown_event_names_are_remembered_cut_and_bounded() {
        let mut live = Live::default();
        let mut notes = Notes::default();
        for k in 0..200 {
            let name = format!("Unknown{k}{}\u{1b}[2J", "N".repeat(500));
            let line = json!({ name: {} }).to_string();
            assert_eq!(apply_line(&mut live, line.as_bytes(), &mut notes), None);
        }
        assert_eq!(notes.unknown.len(), UNKNOWN_NAMES_CAP);
        assert!(notes.unknown.iter().all(|n| n.len() <= UNKNOWN_NAME_BYTES));
        assert_eq!(cut("ab\u{e9}", 3), "ab");
    }

    #[test]
    fn quoted_compositor_text_is_escaped_and_short() {
        let shown = preview(format!("\u{1b}[2J{}", "x".repeat(100_000)).as_bytes());
        assert!(!shown.chars().any(char::is_control), "{shown:?}");
        assert!(
            shown.chars().count() <= crate::link::LOG_CHARS + 1,
            "{}",
            shown.len()
        );
        assert!(shown.ends_with('…'));
    }

    #[test]
    fn buffered_lines_are_read_without_waiting() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let data: &[u8] = b"one\ntwo\nthr";
            let mut reader = LineReader::new(data, MAX_LINE);
            assert!(reader.buffered_line().is_none(), "nothing read yet");
            assert!(matches!(reader.next_line().await, Ok(ReadLine::Line(l)) if l == b"one"));
            assert!(matches!(reader.buffered_line(), Some(ReadLine::Line(l)) if l == b"two"));
            assert!(reader.buffered_line().is_none(), "a partial line waits");
            assert!(matches!(reader.next_line().await, Ok(ReadLine::Line(l)) if l == b"thr"));
        });
    }

    #[test]
    fn events_split_by_tag() {
        assert_eq!(
            split_event(json!({"A": {"b": 1}})),
            Some(("A".into(), json!({"b": 1})))
        );
        assert_eq!(
            split_event(json!("Unit")),
            Some(("Unit".into(), Value::Null))
        );
        assert_eq!(split_event(json!({"A": 1, "B": 2})), None);
        assert_eq!(split_event(json!([1])), None);
    }
}
