//! The desktop context as the plugin reports it in `context.snapshot` (PROTOCOL.md §8,
//! capability `context.live@1`), the same shape whichever compositor it came from.
//!
//! ```json
//! {
//!   "compositor": {"name": "sway", "version": "1.7", "socket": "/run/user/1000/sway-ipc.1000.42.sock"},
//!   "focused": {"id": 7, "app_id": "foot", "title": "~", "pid": 4242, "workspace": "2",
//!               "workspace_id": 5, "output": "HEADLESS-1", "focused": true, "fullscreen": false,
//!               "floating": false},
//!   "windows": [ ...the same objects, focused or not... ],
//!   "workspaces": [{"id": 5, "index": 2, "name": "2", "output": "HEADLESS-1", "focused": true,
//!                   "active": true}],
//!   "outputs": [{"name": "HEADLESS-1", "focused": true, "make": null, "model": null,
//!                "width": 1024, "height": 768, "x": 0, "y": 0}],
//!   "keyboard_layout": "English (US)",
//!   "overview": null,
//!   "truncated": false,
//!   "provenance": {"title": "title"}
//! }
//! ```
//!
//! `compositor.connected` is `false` while the client has lost its event connection and is
//! reconnecting (the rest is then the last state seen). `truncated` is `true` when the
//! compositor reported more than [`MAX_WINDOWS`] windows, [`MAX_WORKSPACES`] workspaces or
//! [`MAX_OUTPUTS`] outputs: the rest were left out.
//!
//! Window titles are written by whatever runs in the window (a web page, a file name), so
//! they are untrusted: `provenance.title = "title"` says so, and a router may use a title
//! only to *select* among prepared candidates, never as an action argument.

use serde::{Deserialize, Serialize};

/// The most windows a snapshot holds; more are left out (and `truncated` says so).
pub const MAX_WINDOWS: usize = 4096;
/// The most workspaces a snapshot holds.
pub const MAX_WORKSPACES: usize = 1024;
/// The most outputs a snapshot holds.
pub const MAX_OUTPUTS: usize = 64;

/// One compositor's whole state, as cached from its event stream.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Which compositor this came from.
    pub compositor: CompositorInfo,
    /// The window with keyboard focus, if any (a copy of its entry in `windows`).
    pub focused: Option<Window>,
    /// Every toplevel window, in the compositor's order.
    pub windows: Vec<Window>,
    /// Every workspace, in the compositor's order.
    pub workspaces: Vec<Workspace>,
    /// Every output (monitor).
    pub outputs: Vec<Output>,
    /// The active keyboard layout's name (`"English (US)"`), when the compositor reports it.
    pub keyboard_layout: Option<String>,
    /// Whether niri's overview is open; `None` on compositors that have none.
    pub overview: Option<bool>,
    /// The screenshots the compositor said it took since the plugin connected (niri's
    /// `ScreenshotCaptured`); `None` before the first, and on compositors that do not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screenshot: Option<Screenshot>,
    /// Whether windows, workspaces or outputs beyond the caps ([`MAX_WINDOWS`],
    /// [`MAX_WORKSPACES`], [`MAX_OUTPUTS`]) were left out.
    #[serde(default)]
    pub truncated: bool,
    /// The provenance of untrusted fields: always `{"title": "title"}`.
    pub provenance: SnapshotProvenance,
}

/// Where the snapshot came from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompositorInfo {
    /// `"niri"` or `"sway"` (i3 reports `"sway"` too: one wire).
    pub name: String,
    /// The compositor's own version string, e.g. `"1.7"` or `"25.08"`.
    pub version: Option<String>,
    /// The IPC socket in use.
    pub socket: Option<String>,
    /// Whether the client's event connection is up: `false` while it reconnects, when the
    /// rest of the snapshot is the last state seen.
    #[serde(default = "connected_by_default")]
    pub connected: bool,
}

fn connected_by_default() -> bool {
    true
}

/// The screenshots a compositor reported ([`Snapshot::screenshot`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Screenshot {
    /// How many were taken (since the plugin connected).
    pub count: u64,
    /// Where the last one was saved, when it was saved to a file (niri also puts it on the
    /// clipboard).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// One toplevel window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// The compositor's window id (sway's con_id, niri's window id).
    pub id: u64,
    /// The Wayland app_id (or the X11 class under Xwayland).
    pub app_id: Option<String>,
    /// The title. Untrusted: provenance `title`.
    pub title: Option<String>,
    /// The client's process id.
    pub pid: Option<i64>,
    /// The workspace's name (sway) or its name or index as a string (niri).
    pub workspace: Option<String>,
    /// The workspace's id.
    pub workspace_id: Option<u64>,
    /// The output the window is on.
    pub output: Option<String>,
    /// Whether it has keyboard focus.
    pub focused: bool,
    /// Whether it is fullscreen, when the compositor reports it (sway does; released niri
    /// versions do not).
    pub fullscreen: Option<bool>,
    /// Whether it is in the floating layout rather than tiled, when the compositor reports it
    /// (sway: a `floating_con` or anything below a workspace's `floating_nodes`; niri 25.01+:
    /// `is_floating`).
    #[serde(default)]
    pub floating: Option<bool>,
    /// Where its content (without borders and title bar) is, in the output layout's logical
    /// pixels, when the compositor reports it (sway: `rect` plus `window_rect`; niri 25.08+:
    /// its output's logical position plus `layout.tile_pos_in_workspace_view` plus
    /// `window_offset_in_tile`, sized `window_size`, for windows shown on a workspace). What
    /// `click_point`, `scroll` and screen grounding aim at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rect: Option<Rect>,
    /// Where the whole window is, its title bar and borders with it, when the compositor
    /// reports more than the content (sway: `rect` with the `deco_rect` title bar above it).
    /// Another window's frame is what covers a point of the focused one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame: Option<Rect>,
    /// Whether it is shown on its output, when the compositor says (sway's `visible`: a
    /// window behind another tab of a tabbed container, or on a workspace not shown, is
    /// not). A point is checked against the windows shown only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visible: Option<bool>,
    /// When it last had the focus, in seconds on the compositor's monotonic clock, when the
    /// compositor reports it (niri 25.05+: `focus_timestamp`). Only its order means
    /// anything: of two windows of an application, the one focused last is the later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub focused_at: Option<f64>,
}

/// A rectangle in the output layout's logical pixels: its top-left corner and size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rect {
    /// Left edge.
    pub x: i64,
    /// Top edge.
    pub y: i64,
    /// Width.
    pub width: i64,
    /// Height.
    pub height: i64,
}

/// One workspace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Workspace {
    /// The compositor's workspace id.
    pub id: u64,
    /// Its number: sway's `num` (`-1` for a named workspace without one is `None`), niri's
    /// `idx` (1-based, per output).
    pub index: Option<i64>,
    /// Its name (sway always has one; niri only for named workspaces).
    pub name: Option<String>,
    /// The output it is on.
    pub output: Option<String>,
    /// Whether it is the focused workspace (of the focused output).
    pub focused: bool,
    /// Whether it is visible on its output.
    pub active: bool,
}

/// One output (monitor).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Output {
    /// The connector name, e.g. `"DP-1"` or `"HEADLESS-1"`.
    pub name: String,
    /// Whether it has the focus.
    pub focused: bool,
    /// The manufacturer, when known.
    pub make: Option<String>,
    /// The model, when known.
    pub model: Option<String>,
    /// The logical width in pixels, when the output is on.
    pub width: Option<i64>,
    /// The logical height in pixels, when the output is on.
    pub height: Option<i64>,
    /// The left edge in the global logical layout, when the output is on.
    #[serde(default)]
    pub x: Option<i64>,
    /// The top edge in the global logical layout, when the output is on.
    #[serde(default)]
    pub y: Option<i64>,
}

/// The provenance of the snapshot's untrusted fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotProvenance {
    /// Always `"title"`: window titles are untrusted.
    pub title: String,
}

impl Default for SnapshotProvenance {
    fn default() -> Self {
        SnapshotProvenance {
            title: "title".into(),
        }
    }
}

impl Snapshot {
    /// Recompute `focused` from the windows' `focused` flags (call after any change).
    pub fn refresh_focus(&mut self) {
        self.focused = self.windows.iter().find(|w| w.focused).cloned();
    }

    /// The focused workspace, if any.
    pub fn focused_workspace(&self) -> Option<&Workspace> {
        self.workspaces.iter().find(|w| w.focused)
    }

    /// The focused output's name, if any.
    pub fn focused_output(&self) -> Option<&str> {
        self.outputs
            .iter()
            .find(|o| o.focused)
            .map(|o| o.name.as_str())
    }

    /// The window with this id.
    pub fn window(&self, id: u64) -> Option<&Window> {
        self.windows.iter().find(|w| w.id == id)
    }
}
