//! A fake niri for tests: a tokio unix-socket server in a temp dir that speaks niri's IPC wire
//! (one JSON request per line, one `{"Ok": …}`/`{"Err": …}` reply per line, and an event
//! stream) over a small fake desktop. Nothing here comes from niri's code; the shapes follow
//! its documentation (see `src/niri.rs`).
//!
//! # API
//!
//! ```ignore
//! mod niri_server;
//! use niri_server::{FakeNiri, Desktop, Misbehave};
//!
//! let niri = FakeNiri::start().await;              // Desktop::two_outputs()
//! let niri = FakeNiri::start_with(desktop).await;  // your own desktop
//! niri.socket()                // the socket path, for $NIRI_SOCKET or Niri::connect
//! niri.requests()              // every request line received, verbatim (actions included)
//! niri.actions()               // the `{"Action": …}` requests, parsed (the whole object)
//! niri.action_lines()          // the same, verbatim lines
//! niri.refuse("CloseWindow", "no")  // that action (by variant name) answers {"Err":"no"}
//! niri.allow("CloseWindow")   // ... and no longer
//! niri.misbehave("Version", Misbehave::Garbage)  // that request answers badly (see Misbehave)
//! niri.desktop()               // a copy of the current fake state
//! niri.change(|d| vec![event]) // mutate the state, then send the returned events to every
//!                              // open event stream (atomically with respect to new streams)
//! niri.emit(event)             // send one event (a JSON value) to every open event stream
//! niri.emit_raw("garbage")     // send one raw line (a `\n` is appended)
//! niri.drop_connections()      // close every open connection; the listener stays
//! niri.event_streams_opened()  // how many EventStream requests were served so far
//! niri.event_streams_open()    // how many event streams are open now
//! niri.wait_event_streams_opened(n, timeout).await  // poll until at least n were served
//! ```
//!
//! Served requests: `Version`, `Windows`, `Workspaces`, `Outputs`, `FocusedWindow`,
//! `FocusedOutput`, `KeyboardLayouts`, `EventStream`, `{"Action": …}`. Any other request gets
//! `{"Err": …}`, as niri answers a request it cannot parse.
//!
//! Actions applied to the state (with the events niri would send): `FocusWorkspace`
//! (reference `Id`/`Index`/`Name`; `Index` counts on the focused output), `FocusWindow`,
//! `MoveWindowToWorkspace` (`window_id` or the focused window; `focus`), `CloseWindow`
//! (`id` or the focused window), `ToggleWindowFloating` / `MoveWindowToFloating` /
//! `MoveWindowToTiling` (`id` or the focused window), `FullscreenWindow` (flips
//! `is_fullscreen` of windows that report it), `Spawn` and `SpawnSh` (a new focused
//! window on the focused workspace, its app_id the program's file name or the command
//! line's first word; the program `true` opens none). Other actions are recorded and
//! answered `Handled`.
//!
//! The event stream starts with the full state: `WorkspacesChanged`, `WindowsChanged`, an
//! event no client knows (`{"FutureThing":{"x":1}}`), `KeyboardLayoutsChanged`,
//! `OverviewOpenedOrClosed`, `ConfigLoaded`. Windows, workspaces and `WorkspacesChanged` carry
//! extra fields no client knows (`x_future…`), to test tolerance.

#![allow(dead_code)]

use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, watch};

/// One fake output.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeOutput {
    pub name: String,
    pub make: String,
    pub model: String,
    /// Logical size; `None` = the output is off (`"logical": null`).
    pub logical: Option<(u32, u32)>,
    /// Logical x position.
    pub x: i32,
}

/// One fake workspace (niri's fields).
#[derive(Debug, Clone, PartialEq)]
pub struct FakeWorkspace {
    pub id: u64,
    pub idx: u8,
    pub name: Option<String>,
    pub output: Option<String>,
    pub is_active: bool,
    pub is_focused: bool,
    pub active_window_id: Option<u64>,
}

/// One fake window (niri's fields).
#[derive(Debug, Clone, PartialEq)]
pub struct FakeWindow {
    pub id: u64,
    pub title: Option<String>,
    pub app_id: Option<String>,
    pub pid: Option<i32>,
    pub workspace_id: Option<u64>,
    pub is_focused: bool,
    pub is_floating: bool,
    /// `None` plays a released niri, which does not report fullscreen; `Some` a future one
    /// that sends `is_fullscreen` (and `FullscreenWindow` then flips it).
    pub is_fullscreen: Option<bool>,
    /// When it last had the focus (`focus_timestamp.secs`); `None` for never.
    pub focus_secs: Option<u64>,
}

/// The fake desktop's whole state.
#[derive(Debug, Clone, PartialEq)]
pub struct Desktop {
    /// The `Version` reply.
    pub version: String,
    pub outputs: Vec<FakeOutput>,
    pub workspaces: Vec<FakeWorkspace>,
    pub windows: Vec<FakeWindow>,
    pub keyboard_layouts: Vec<String>,
    pub current_layout: u8,
    pub overview_open: bool,
    /// Whether the event stream's initial burst carries `KeyboardLayoutsChanged` and
    /// `OverviewOpenedOrClosed` (`false` plays an older niri that sends neither).
    pub stream_sends_layouts_and_overview: bool,
}

/// How a request is answered badly (see [`FakeNiri::misbehave`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Misbehave {
    /// A line that is not JSON.
    Garbage,
    /// Bytes without a newline, without end (until the client goes away).
    Endless,
    /// Nothing at all; the connection stays open.
    Silent,
    /// For `EventStream`: `{"Ok":"Handled"}`, then no events (the stream stays open).
    NoInitialState,
    /// Close the connection without a reply.
    Close,
}

impl Desktop {
    /// Two outputs: `DP-1` (2560×1440, focused) with workspaces 1 `"web"` (active, focused,
    /// firefox id 10 focused), 2 (foot id 11 `"~"`) and 3 (empty); `HDMI-A-1` (1920×1080) with
    /// workspaces 4 (active, foot id 12 `"htop"`) and 5 (empty). Layouts "English (US)",
    /// "German"; overview closed; version "25.11".
    pub fn two_outputs() -> Desktop {
        let ws = |id, idx, name: Option<&str>, output: &str, active, focused, win| FakeWorkspace {
            id,
            idx,
            name: name.map(str::to_owned),
            output: Some(output.to_owned()),
            is_active: active,
            is_focused: focused,
            active_window_id: win,
        };
        let win = |id, title: &str, app_id: &str, pid, ws, focused| FakeWindow {
            id,
            title: Some(title.to_owned()),
            app_id: Some(app_id.to_owned()),
            pid: Some(pid),
            workspace_id: Some(ws),
            is_focused: focused,
            is_floating: false,
            is_fullscreen: None,
            // Focused in the order of their ids, the focused one last.
            focus_secs: Some(1_700_000_000 + id + if focused { 1000 } else { 0 }),
        };
        Desktop {
            version: "25.11".into(),
            outputs: vec![
                FakeOutput {
                    name: "DP-1".into(),
                    make: "Dell Inc.".into(),
                    model: "DELL U2720Q".into(),
                    logical: Some((2560, 1440)),
                    x: 0,
                },
                FakeOutput {
                    name: "HDMI-A-1".into(),
                    make: "Unknown".into(),
                    model: "Unknown".into(),
                    logical: Some((1920, 1080)),
                    x: 2560,
                },
            ],
            workspaces: vec![
                ws(1, 1, Some("web"), "DP-1", true, true, Some(10)),
                ws(2, 2, None, "DP-1", false, false, Some(11)),
                ws(3, 3, None, "DP-1", false, false, None),
                ws(4, 1, None, "HDMI-A-1", true, false, Some(12)),
                ws(5, 2, None, "HDMI-A-1", false, false, None),
            ],
            windows: vec![
                win(10, "Mozilla Firefox", "firefox", 1010, 1, true),
                win(11, "~", "foot", 1011, 2, false),
                win(12, "htop", "foot", 1012, 4, false),
            ],
            keyboard_layouts: vec!["English (US)".into(), "German".into()],
            current_layout: 0,
            overview_open: false,
            stream_sends_layouts_and_overview: true,
        }
    }

    pub fn window(&self, id: u64) -> Option<&FakeWindow> {
        self.windows.iter().find(|w| w.id == id)
    }

    pub fn window_mut(&mut self, id: u64) -> Option<&mut FakeWindow> {
        self.windows.iter_mut().find(|w| w.id == id)
    }

    pub fn focused_workspace(&self) -> Option<&FakeWorkspace> {
        self.workspaces.iter().find(|w| w.is_focused)
    }

    pub fn focused_window(&self) -> Option<&FakeWindow> {
        self.windows.iter().find(|w| w.is_focused)
    }

    /// niri's JSON for a window (with an unknown extra field).
    pub fn window_json(w: &FakeWindow) -> Value {
        let mut v = json!({
            "id": w.id,
            "title": w.title,
            "app_id": w.app_id,
            "pid": w.pid,
            "workspace_id": w.workspace_id,
            "is_focused": w.is_focused,
            "is_floating": w.is_floating,
            "is_urgent": false,
            "layout": {
                "pos_in_scrolling_layout": [1, 1],
                "tile_size": [800.0, 600.0],
                "window_size": [796, 596],
                "tile_pos_in_workspace_view": null,
                "window_offset_in_tile": [2.0, 2.0]
            },
            "focus_timestamp": w.focus_secs.map(|secs| json!({"secs": secs, "nanos": 0})),
            "x_future_window_field": {"nested": [1, 2, 3]}
        });
        if let Some(fullscreen) = w.is_fullscreen {
            v["is_fullscreen"] = fullscreen.into();
        }
        v
    }

    /// niri's JSON for a workspace (with an unknown extra field).
    pub fn workspace_json(w: &FakeWorkspace) -> Value {
        json!({
            "id": w.id,
            "idx": w.idx,
            "name": w.name,
            "output": w.output,
            "is_urgent": false,
            "is_active": w.is_active,
            "is_focused": w.is_focused,
            "active_window_id": w.active_window_id,
            "x_future_workspace_field": true
        })
    }

    /// niri's JSON for an output.
    pub fn output_json(o: &FakeOutput) -> Value {
        let (w, h) = o.logical.unwrap_or((1920, 1080));
        json!({
            "name": o.name,
            "make": o.make,
            "model": o.model,
            "serial": null,
            "physical_size": [600, 340],
            "modes": [{"width": w, "height": h, "refresh_rate": 60000, "is_preferred": true}],
            "current_mode": if o.logical.is_some() { json!(0) } else { Value::Null },
            "is_custom_mode": false,
            "vrr_supported": false,
            "vrr_enabled": false,
            "logical": o.logical.map(|(w, h)| json!({
                "x": o.x, "y": 0, "width": w, "height": h, "scale": 1.0, "transform": "Normal"
            }))
        })
    }

    pub fn windows_json(&self) -> Value {
        Value::Array(self.windows.iter().map(Self::window_json).collect())
    }

    pub fn workspaces_json(&self) -> Value {
        Value::Array(self.workspaces.iter().map(Self::workspace_json).collect())
    }

    pub fn keyboard_layouts_json(&self) -> Value {
        json!({"names": self.keyboard_layouts, "current_idx": self.current_layout})
    }

    /// The focused output: the focused workspace's.
    pub fn focused_output(&self) -> Option<&FakeOutput> {
        let name = self.focused_workspace()?.output.clone()?;
        self.outputs.iter().find(|o| o.name == name)
    }

    /// The events that open an event stream: the full state, with an unknown event among it.
    pub fn initial_events(&self) -> Vec<Value> {
        if !self.stream_sends_layouts_and_overview {
            return vec![
                json!({"WorkspacesChanged": {"workspaces": self.workspaces_json()}}),
                json!({"WindowsChanged": {"windows": self.windows_json()}}),
            ];
        }
        vec![
            json!({"WorkspacesChanged": {"workspaces": self.workspaces_json(), "x_future_list_field": 1}}),
            json!({"WindowsChanged": {"windows": self.windows_json()}}),
            json!({"FutureThing": {"x": 1}}),
            json!({"KeyboardLayoutsChanged": {"keyboard_layouts": self.keyboard_layouts_json()}}),
            json!({"OverviewOpenedOrClosed": {"is_open": self.overview_open}}),
            json!({"ConfigLoaded": {"failed": false}}),
        ]
    }

    /// An event for a window that opened or changed.
    pub fn window_event(&self, id: u64) -> Value {
        let w = self.window(id).expect("no such window");
        json!({"WindowOpenedOrChanged": {"window": Self::window_json(w)}})
    }

    /// Make `ws` the active and focused workspace, focusing its active window. The events.
    pub fn focus_workspace(&mut self, ws: u64) -> Vec<Value> {
        let Some(target) = self.workspaces.iter().find(|w| w.id == ws).cloned() else {
            return vec![];
        };
        for w in &mut self.workspaces {
            if w.output == target.output {
                w.is_active = w.id == ws;
            }
            w.is_focused = w.id == ws;
        }
        let focus = target
            .active_window_id
            .filter(|id| self.window(*id).is_some())
            .or_else(|| {
                self.windows
                    .iter()
                    .find(|w| w.workspace_id == Some(ws))
                    .map(|w| w.id)
            });
        for w in &mut self.windows {
            w.is_focused = Some(w.id) == focus;
        }
        vec![
            json!({"WorkspaceActivated": {"id": ws, "focused": true}}),
            json!({"WindowFocusChanged": {"id": focus}}),
        ]
    }

    /// Resolve a `WorkspaceReferenceArg` (`{"Id":n}`, `{"Index":n}` on the focused output,
    /// `{"Name":s}`).
    pub fn resolve(&self, reference: &Value) -> Option<u64> {
        if let Some(id) = reference.get("Id").and_then(Value::as_u64) {
            return self.workspaces.iter().find(|w| w.id == id).map(|w| w.id);
        }
        if let Some(idx) = reference.get("Index").and_then(Value::as_u64) {
            let output = self.focused_workspace()?.output.clone();
            return self
                .workspaces
                .iter()
                .find(|w| w.output == output && u64::from(w.idx) == idx)
                .map(|w| w.id);
        }
        if let Some(name) = reference.get("Name").and_then(Value::as_str) {
            return self
                .workspaces
                .iter()
                .find(|w| w.name.as_deref() == Some(name))
                .map(|w| w.id);
        }
        None
    }

    /// Apply an action; `Ok(events)` or `Err(niri-like message)`. A test calls it through
    /// [`FakeNiri::change`] to play what the person does by hand.
    pub fn apply_action(&mut self, action: &Value) -> Result<Vec<Value>, String> {
        let Some((name, args)) = action.as_object().and_then(|m| m.iter().next()) else {
            return Err("error parsing request: expected an action".into());
        };
        match name.as_str() {
            "FocusWorkspace" => {
                let ws = self
                    .resolve(&args["reference"])
                    .ok_or_else(|| "workspace not found".to_string())?;
                Ok(self.focus_workspace(ws))
            }
            "FocusWindow" => {
                let id = args["id"].as_u64().ok_or("missing id")?;
                let ws = self
                    .window(id)
                    .ok_or_else(|| format!("no window with id {id}"))?
                    .workspace_id;
                let latest = self.windows.iter().filter_map(|w| w.focus_secs).max();
                let stamp = latest.unwrap_or(1_700_000_000) + 1;
                for w in &mut self.windows {
                    w.is_focused = w.id == id;
                    if w.id == id {
                        w.focus_secs = Some(stamp);
                    }
                }
                let mut events = vec![];
                if let Some(ws) = ws {
                    let output = self
                        .workspaces
                        .iter()
                        .find(|w| w.id == ws)
                        .and_then(|w| w.output.clone());
                    for w in &mut self.workspaces {
                        if w.output == output {
                            w.is_active = w.id == ws;
                        }
                        w.is_focused = w.id == ws;
                        if w.id == ws {
                            w.active_window_id = Some(id);
                        }
                    }
                    events.push(json!({"WorkspaceActivated": {"id": ws, "focused": true}}));
                }
                events.push(json!({"WindowFocusChanged": {"id": id}}));
                events.push(json!({"WindowFocusTimestampChanged": {
                    "id": id, "focus_timestamp": {"secs": stamp, "nanos": 0}
                }}));
                Ok(events)
            }
            "MoveWindowToWorkspace" => {
                let id = args["window_id"]
                    .as_u64()
                    .or_else(|| self.focused_window().map(|w| w.id))
                    .ok_or("no window to move")?;
                let ws = self
                    .resolve(&args["reference"])
                    .ok_or_else(|| "workspace not found".to_string())?;
                let focus = args["focus"].as_bool().unwrap_or(true);
                self.window_mut(id)
                    .ok_or_else(|| format!("no window with id {id}"))?
                    .workspace_id = Some(ws);
                let mut events = vec![];
                if focus {
                    for w in &mut self.workspaces {
                        if w.id == ws {
                            w.active_window_id = Some(id);
                        }
                    }
                    events.extend(self.focus_workspace(ws));
                }
                events.insert(0, self.window_event(id));
                Ok(events)
            }
            "CloseWindow" => {
                let id = args["id"]
                    .as_u64()
                    .or_else(|| self.focused_window().map(|w| w.id))
                    .ok_or("no window to close")?;
                let was_focused = self
                    .window(id)
                    .ok_or_else(|| format!("no window with id {id}"))?
                    .is_focused;
                self.windows.retain(|w| w.id != id);
                let mut events = vec![json!({"WindowClosed": {"id": id}})];
                if was_focused {
                    events.push(json!({"WindowFocusChanged": {"id": null}}));
                }
                Ok(events)
            }
            "ToggleWindowFloating" | "MoveWindowToFloating" | "MoveWindowToTiling" => {
                let id = args["id"]
                    .as_u64()
                    .or_else(|| self.focused_window().map(|w| w.id))
                    .ok_or("no window")?;
                let window = self
                    .window_mut(id)
                    .ok_or_else(|| format!("no window with id {id}"))?;
                window.is_floating = match name.as_str() {
                    "MoveWindowToFloating" => true,
                    "MoveWindowToTiling" => false,
                    _ => !window.is_floating,
                };
                Ok(vec![self.window_event(id)])
            }
            "FullscreenWindow" => {
                let id = args["id"]
                    .as_u64()
                    .or_else(|| self.focused_window().map(|w| w.id))
                    .ok_or("no window")?;
                let window = self
                    .window_mut(id)
                    .ok_or_else(|| format!("no window with id {id}"))?;
                match window.is_fullscreen.as_mut() {
                    Some(fullscreen) => {
                        *fullscreen = !*fullscreen;
                        Ok(vec![self.window_event(id)])
                    }
                    None => Ok(vec![]),
                }
            }
            "ScreenshotScreen" | "ScreenshotWindow" => {
                // niri writes the file when asked to (`write_to_disk`), and says so.
                let path = args["write_to_disk"]
                    .as_bool()
                    .unwrap_or(true)
                    .then(|| format!("/tmp/Screenshot from fake niri {}.png", name));
                Ok(vec![json!({"ScreenshotCaptured": {"path": path}})])
            }
            "Spawn" | "SpawnSh" => {
                let program = if name == "Spawn" {
                    let argv = args["command"].as_array().ok_or("command must be a list")?;
                    argv.first()
                        .and_then(Value::as_str)
                        .ok_or("an empty command")?
                        .rsplit('/')
                        .next()
                        .unwrap_or_default()
                        .to_owned()
                } else {
                    let line = args["command"].as_str().ok_or("command must be a string")?;
                    line.split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_owned()
                };
                if program == "true" {
                    return Ok(vec![]);
                }
                let id = self.windows.iter().map(|w| w.id).max().unwrap_or(0) + 1;
                let ws = self.focused_workspace().map(|w| w.id);
                let stamp = self.windows.iter().filter_map(|w| w.focus_secs).max();
                for w in &mut self.windows {
                    w.is_focused = false;
                }
                self.windows.push(FakeWindow {
                    id,
                    title: Some(program.clone()),
                    app_id: Some(program),
                    pid: Some(5000),
                    workspace_id: ws,
                    is_focused: true,
                    is_floating: false,
                    is_fullscreen: None,
                    focus_secs: Some(stamp.unwrap_or(1_700_000_000) + 1),
                });
                Ok(vec![
                    self.window_event(id),
                    json!({"WindowFocusChanged": {"id": id}}),
                ])
            }
            _ => Ok(vec![]),
        }
    }
}

struct State {
    desktop: Desktop,
    requests: Vec<String>,
    refuse: HashMap<String, String>,
    misbehave: HashMap<String, Misbehave>,
    streams: Vec<mpsc::UnboundedSender<String>>,
    silent_streams: Vec<mpsc::UnboundedSender<String>>,
    streams_opened: usize,
}

struct Shared {
    state: Mutex<State>,
    /// Bumped by `drop_connections`: every connection task watching it closes.
    kill: watch::Sender<u64>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn broadcast(state: &mut State, lines: impl IntoIterator<Item = String>) {
        let lines: Vec<String> = lines.into_iter().collect();
        state
            .streams
            .retain(|tx| lines.iter().all(|l| tx.send(l.clone()).is_ok()));
    }
}

/// The running fake niri. Dropping it stops the server and removes the temp dir.
pub struct FakeNiri {
    _dir: tempfile::TempDir,
    path: PathBuf,
    shared: Arc<Shared>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for FakeNiri {
    fn drop(&mut self) {
        self.accept.abort();
        self.shared.kill.send_modify(|n| *n += 1);
    }
}

impl FakeNiri {
    /// Start with [`Desktop::two_outputs`].
    pub async fn start() -> FakeNiri {
        FakeNiri::start_with(Desktop::two_outputs()).await
    }

    /// Start with this desktop.
    pub async fn start_with(desktop: Desktop) -> FakeNiri {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("niri.sock");
        let listener = UnixListener::bind(&path).expect("bind the fake niri socket");
        let (kill, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                desktop,
                requests: vec![],
                refuse: HashMap::new(),
                misbehave: HashMap::new(),
                streams: vec![],
                silent_streams: vec![],
                streams_opened: 0,
            }),
            kill,
        });
        let accept = tokio::spawn({
            let shared = shared.clone();
            async move {
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    tokio::spawn(serve(shared.clone(), stream));
                }
            }
        });
        FakeNiri {
            _dir: dir,
            path,
            shared,
            accept,
        }
    }

    /// The socket path.
    pub fn socket(&self) -> &Path {
        &self.path
    }

    /// Every request line received, verbatim, in order.
    pub fn requests(&self) -> Vec<String> {
        self.shared.lock().requests.clone()
    }

    /// The action request lines, verbatim.
    pub fn action_lines(&self) -> Vec<String> {
        self.requests()
            .into_iter()
            .filter(|l| {
                serde_json::from_str::<Value>(l)
                    .map(|v| v.get("Action").is_some())
                    .unwrap_or(false)
            })
            .collect()
    }

    /// The action requests, parsed (`{"Action": {...}}` objects).
    pub fn actions(&self) -> Vec<Value> {
        self.action_lines()
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Answer `{"Err": message}` to every action of this variant name.
    pub fn refuse(&self, action: &str, message: &str) {
        self.shared
            .lock()
            .refuse
            .insert(action.to_owned(), message.to_owned());
    }

    /// Stop refusing this action (see [`FakeNiri::refuse`]).
    pub fn allow(&self, action: &str) {
        self.shared.lock().refuse.remove(action);
    }

    /// Answer this request (by name: `"Version"`, `"Outputs"`, `"EventStream"`, an action's
    /// variant name…) badly from now on.
    pub fn misbehave(&self, request: &str, how: Misbehave) {
        self.shared.lock().misbehave.insert(request.to_owned(), how);
    }

    /// Behave again.
    pub fn behave(&self, request: &str) {
        self.shared.lock().misbehave.remove(request);
    }

    /// A copy of the current desktop.
    pub fn desktop(&self) -> Desktop {
        self.shared.lock().desktop.clone()
    }

    /// Change the desktop and send the events `f` returns to every open event stream, in one
    /// step (a stream opening meanwhile sees either the old state and the events, or the new
    /// state).
    pub fn change(&self, f: impl FnOnce(&mut Desktop) -> Vec<Value>) {
        let mut state = self.shared.lock();
        let events = f(&mut state.desktop);
        Shared::broadcast(&mut state, events.iter().map(Value::to_string));
    }

    /// Send one event to every open event stream.
    pub fn emit(&self, event: Value) {
        let mut state = self.shared.lock();
        Shared::broadcast(&mut state, [event.to_string()]);
    }

    /// Send one raw line (a `\n` is appended) to every open event stream.
    pub fn emit_raw(&self, line: &str) {
        let mut state = self.shared.lock();
        Shared::broadcast(&mut state, [line.to_owned()]);
    }

    /// Close every open connection (request connections and event streams); keep listening.
    pub fn drop_connections(&self) {
        {
            let mut state = self.shared.lock();
            state.streams.clear();
            state.silent_streams.clear();
        }
        self.shared.kill.send_modify(|n| *n += 1);
    }

    /// How many `EventStream` requests were answered so far.
    pub fn event_streams_opened(&self) -> usize {
        self.shared.lock().streams_opened
    }

    /// How many event streams are open now.
    pub fn event_streams_open(&self) -> usize {
        let mut state = self.shared.lock();
        state.streams.retain(|tx| !tx.is_closed());
        state.streams.len()
    }

    /// Wait until at least `n` event streams were served; false on timeout.
    pub async fn wait_event_streams_opened(&self, n: usize, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while self.event_streams_opened() < n {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        true
    }
}

/// What one request line asks for: its name (`"Windows"`, or the action's variant name) and
/// whether it is an action.
fn request_name(request: &Value) -> (String, bool) {
    match request {
        Value::String(s) => (s.clone(), false),
        Value::Object(m) => match m.get("Action").and_then(Value::as_object) {
            Some(action) => (action.keys().next().cloned().unwrap_or_default(), true),
            None => (m.keys().next().cloned().unwrap_or_default(), false),
        },
        _ => (String::new(), false),
    }
}

enum Answer {
    Reply(Value),
    Stream(Vec<String>, mpsc::UnboundedReceiver<String>),
    Bad(Misbehave),
}

fn answer(shared: &Shared, line: &str) -> Answer {
    let mut state = shared.lock();
    state.requests.push(line.to_owned());
    let Ok(request) = serde_json::from_str::<Value>(line) else {
        return Answer::Reply(json!({"Err": format!("error parsing request: {line}")}));
    };
    let (name, is_action) = request_name(&request);
    if let Some(how) = state.misbehave.get(&name) {
        if name == "EventStream" && *how == Misbehave::NoInitialState {
            let (tx, rx) = mpsc::unbounded_channel();
            // Keep the sender alive but never send on it: no events at all.
            state.silent_streams.push(tx);
            state.streams_opened += 1;
            return Answer::Stream(vec![], rx);
        }
        return Answer::Bad(how.clone());
    }
    if is_action {
        if let Some(message) = state.refuse.get(&name) {
            return Answer::Reply(json!({"Err": message}));
        }
        return match state.desktop.apply_action(&request["Action"]) {
            Ok(events) => {
                Shared::broadcast(&mut state, events.iter().map(Value::to_string));
                Answer::Reply(json!({"Ok": "Handled"}))
            }
            Err(message) => Answer::Reply(json!({"Err": message})),
        };
    }
    let d = &state.desktop;
    let ok = |v: Value| Answer::Reply(json!({ "Ok": v }));
    match name.as_str() {
        "Version" => ok(json!({"Version": d.version})),
        "Windows" => ok(json!({"Windows": d.windows_json()})),
        "Workspaces" => ok(json!({"Workspaces": d.workspaces_json()})),
        "Outputs" => {
            let map: serde_json::Map<String, Value> = d
                .outputs
                .iter()
                .map(|o| (o.name.clone(), Desktop::output_json(o)))
                .collect();
            ok(json!({"Outputs": map}))
        }
        "FocusedWindow" => {
            ok(json!({"FocusedWindow": d.focused_window().map(Desktop::window_json)}))
        }
        "FocusedOutput" => {
            ok(json!({"FocusedOutput": d.focused_output().map(Desktop::output_json)}))
        }
        "KeyboardLayouts" => ok(json!({"KeyboardLayouts": d.keyboard_layouts_json()})),
        "EventStream" => {
            let initial = d.initial_events().iter().map(Value::to_string).collect();
            let (tx, rx) = mpsc::unbounded_channel();
            state.streams.push(tx);
            state.streams_opened += 1;
            Answer::Stream(initial, rx)
        }
        other => Answer::Reply(
            json!({"Err": format!("error parsing request: unknown variant `{other}`")}),
        ),
    }
}

async fn write_line(stream: &mut tokio::net::unix::OwnedWriteHalf, line: &str) -> bool {
    let mut bytes = line.as_bytes().to_vec();
    bytes.push(b'\n');
    stream.write_all(&bytes).await.is_ok()
}

/// Serve one connection until it closes or `drop_connections` is called.
async fn serve(shared: Arc<Shared>, stream: UnixStream) {
    let mut kill = shared.kill.subscribe();
    kill.mark_unchanged();
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let work = async {
        loop {
            let Ok(Some(line)) = lines.next_line().await else {
                return;
            };
            match answer(&shared, &line) {
                Answer::Reply(reply) => {
                    if !write_line(&mut write, &reply.to_string()).await {
                        return;
                    }
                }
                Answer::Bad(how) => match how {
                    Misbehave::Garbage => {
                        if !write_line(&mut write, "this is not json {{{").await {
                            return;
                        }
                    }
                    Misbehave::Endless => {
                        let chunk = vec![b'x'; 64 * 1024];
                        while write.write_all(&chunk).await.is_ok() {}
                        return;
                    }
                    Misbehave::Silent | Misbehave::NoInitialState => {
                        std::future::pending::<()>().await;
                    }
                    Misbehave::Close => return,
                },
                Answer::Stream(initial, mut rx) => {
                    if !write_line(&mut write, r#"{"Ok":"Handled"}"#).await {
                        return;
                    }
                    for line in initial {
                        if !write_line(&mut write, &line).await {
                            return;
                        }
                    }
                    // niri reads no more requests on an event stream.
                    while let Some(line) = rx.recv().await {
                        if !write_line(&mut write, &line).await {
                            return;
                        }
                    }
                    return;
                }
            }
        }
    };
    tokio::select! {
        _ = work => {}
        _ = kill.changed() => {}
    }
}
