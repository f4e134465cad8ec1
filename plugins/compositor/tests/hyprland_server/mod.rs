//! A fake Hyprland for tests: tokio unix-socket servers in a temp dir that speak Hyprland's
//! IPC wire over a small fake desktop. Nothing here comes from Hyprland's code; the wire and
//! the behaviour follow the Hyprland wiki (IPC, Using hyprctl, Dispatchers) and, where the
//! wiki is silent, what Hyprland does on its sockets (reply texts, event order, JSON shapes).
//!
//! # API
//!
//! ```ignore
//! mod hyprland_server;
//! use hyprland_server::{Desktop, FakeHyprland, FakeWindow, Misbehave};
//!
//! let hypr = FakeHyprland::start().await;             // Desktop::two_monitors()
//! let hypr = FakeHyprland::start_with(desktop).await; // your own desktop
//! hypr.runtime_dir()        // the fake $XDG_RUNTIME_DIR (a temp dir)
//! hypr.signature()          // the fake $HYPRLAND_INSTANCE_SIGNATURE ("fake_1700000001_<pid>")
//! hypr.dir()                // <runtime>/hypr/<signature>/ (holds hyprland.lock and both sockets)
//! hypr.socket()             // <dir>/.socket.sock   (requests)
//! hypr.event_socket()       // <dir>/.socket2.sock  (events)
//! hypr.env()                // [("XDG_RUNTIME_DIR", …), ("HYPRLAND_INSTANCE_SIGNATURE", …)]
//! hypr.requests()           // every request received on .socket.sock, verbatim (flags included)
//! hypr.commands()           // every command run: each request and, for [[BATCH]], each part
//! hypr.dispatches()         // the `dispatch` commands as "name args" (refused ones included)
//! hypr.execs()              // the command lines given to exec/execr (nothing is run)
//! hypr.refuse("closewindow", "nope")  // that dispatcher answers "nope" and changes nothing
//! hypr.allow("closewindow") // ... and no longer
//! hypr.misbehave("clients", Misbehave::Garbage)  // that command answers badly (see Misbehave)
//! hypr.misbehave("dispatch workspace", Misbehave::Silent)  // one dispatcher only
//! hypr.misbehave("events", Misbehave::Close)      // new .socket2.sock connections misbehave
//! hypr.behave("clients")    // answer well again
//! hypr.desktop()            // a copy of the current fake state
//! hypr.change(|d| events)   // mutate the state, then send the returned event lines
//!                           // ("name>>data") to every open event stream, atomically with
//!                           // respect to new streams; e.g. `hypr.change(|d| d.set_title(a, "x"))`
//! hypr.emit("workspace>>2") // send one event line, formatted as Hyprland formats events
//! hypr.emit_raw(b"junk")    // send raw bytes to every event stream (no newline added)
//! hypr.drop_connections()   // close every open connection; the listeners stay
//! hypr.event_streams_opened()  // how many .socket2.sock connections were accepted
//! hypr.event_streams_open()    // how many are open now
//! hypr.wait_event_streams(n, timeout).await  // until at least n are open; false on timeout
//! ```
//!
//! `Desktop` also has what a person does by hand, each returning the events to send:
//! `d.dispatch(name, args)` (as `hyprctl dispatch`), `d.open_window(class, title)`,
//! `d.set_title(address, title)`, `d.close_window(address)`,
//! `d.switch_layout(device, cmd)`; and the JSON Hyprland would print (`clients_json`,
//! `monitors_json`, `workspaces_json`, …) to compare with.
//!
//! # The wire
//!
//! - `.socket.sock`: one request per connection. Like Hyprland, the fake reads the request
//!   in one go (chunks of 1023 bytes until a shorter one; a NUL ends a chunk), waits at most
//!   5 s for it (then closes without a reply), writes the whole reply and closes. It serves
//!   one connection at a time, as Hyprland does: a client that connects and writes nothing
//!   holds the others up to 5 s. (A request of exactly 1023 bytes, or a multiple, waits for
//!   more or for the client to close its side, as Hyprland's read does.)
//! - Flags: the characters before the first `/`, if that `/` comes before any space (`j` =
//!   JSON, `a` = all, including unmapped windows; `r`, `c` accepted). `j/clients` and
//!   `/dispatch workspace 2` have flags; `dispatch exec foo/bar` has none. Not for a request
//!   that starts with `[[BATCH]]`.
//! - Commands: `clients`, `workspaces`, `activeworkspace`, `activewindow` (`{}` / `Invalid`
//!   when none), `monitors` (`monitors all` includes disabled ones), `devices`, `version` and
//!   a few more are matched exactly (`clients x` is an `unknown request`); `dispatch`,
//!   `switchxkblayout`, `keyword`, `monitors`, … by prefix. Anything else: `unknown request`.
//!   Text replies (no `j`) follow Hyprland's text layout.
//! - `[[BATCH]]a;b;c`: split at `;` (not inside `[...]`, so exec rules survive), each part
//!   trimmed and run as a request of its own (with its own flags), the replies joined with
//!   `"\n\n\n"`.
//! - `dispatch <name> <args>`: `ok`, or Hyprland's error text (`Invalid dispatcher` for an
//!   unknown name, `No such window found`, `Error in changeworkspace, invalid value`,
//!   `Previous workspace doesn't exist` for the current workspace, …).
//! - `.socket2.sock`: nothing on connect (no initial state), then `EVENT>>DATA\n` lines.
//!   Addresses in events are hex without `0x`. Data is written raw (a title with `,` or
//!   `>>` is not escaped), cut at 1024 bytes (maybe inside a UTF-8 sequence), and a newline
//!   in the data is written as a space, as Hyprland's event manager does;
//!   `Desktop::raw_newlines_in_events` plays an older Hyprland that wrote it raw. A stream
//!   with 64 undelivered events beyond what the socket buffers is dropped, as Hyprland does.
//!
//! # The desktop
//!
//! Monitors: `width`/`height` are physical pixels (the mode), `x`/`y` logical; the logical
//! size is width/scale (`FakeMonitor::logical_size`). Window `at`/`size` are logical. JSON
//! field names and types are Hyprland's (the field set of a recent Hyprland, about 0.50):
//! clients `address` ("0x…"), `fullscreen`/`fullscreenClient` integers (0 none, 1 maximized,
//! 2 fullscreen), `focusHistoryID` (0 = most recently focused, the focused one when a
//! window has the focus), `monitor` a monitor id; workspaces `monitor` a name and
//! `monitorID` an id; `lastwindow` "0x0" when none.
//!
//! Dispatchers applied to the state, with the events Hyprland sends: `workspace` (id,
//! `+1`/`-1`, `name:X`, a name, `e±n`/`e~n`, `m±n`/`m~n`, `r±n`/`r~n` (approximate),
//! `previous`, `empty`[`m`][`n`], `next`, `special[:x]`; a missing workspace is created on
//! the focused monitor; an emptied hidden workspace is destroyed), `movetoworkspace` /
//! `movetoworkspacesilent` (`ws` or `ws,<window>`, split at the last `,`), `focuswindow`,
//! `closewindow` / `killwindow`, `killactive` / `forcekillactive`, `togglefloating` /
//! `setfloating` / `settiled`, `fullscreen` (`0`/`1` then `toggle`/`set`/`unset`),
//! `fullscreenstate`, `movefocus`, `focusmonitor` (l/r/u/d, ±n, id, name, `desc:`,
//! `current`), `movewindow` (direction, `mon:<monitor>`, ` silent`), `resizeactive`,
//! `moveactive`, `resizewindowpixel`, `movewindowpixel`, `centerwindow`, `pin`,
//! `togglegroup`, `cyclenext`, `pseudo`, `renameworkspace`, `togglespecialworkspace`,
//! `submap`, `event`, `dpms`, `exec` / `execr`. exec runs nothing: a new focused window
//! opens on the focused workspace (its class and title the program's file name: the first
//! word after POSIX-shell unquoting, skipping `VAR=value` words and a leading `exec`; the
//! program `true` opens none); exec rules `[workspace N [silent]; float; tile; fullscreen;
//! maximize; pin]` are honoured. Every other documented dispatcher is recorded and answered
//! `ok`. `switchxkblayout <device|current|main|all> <next|prev|index>` changes layouts and
//! sends `activelayout` per keyboard that changed.
//!
//! Window specs (`focuswindow class:^(kitty)$`, …): `active`, `floating`, `tiled`,
//! `class:` / `initialclass:` / `title:` / `initialtitle:` / `tag:` regexes and the default
//! class regex, matched against the whole value as Hyprland does; `address:0x…` and
//! `pid:<n>` exact. The regex crate is not a dependency of this package, so the fake has a
//! small matcher of its own: literals, `.`, `[...]`, `\d \w \s`, escapes, groups,
//! `|`, `* + ? {n,m}`, `^ $`, `(?i)`. A pattern it cannot parse matches nothing (as an
//! invalid RE2 pattern does).
//!
//! Layout is a rough dwindle: a new tiled window halves the focused tiled one along its
//! longer side; a closed one gives its space back to a sibling. Fullscreen and maximize
//! cover the monitor. Floated windows are centred at half the monitor's size.

#![allow(dead_code)]

use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, watch};

/// A logical rectangle: x, y, width, height.
pub type Rect = (i32, i32, i32, i32);

/// Hyprland's first special workspace id (`special` alone).
pub const SPECIAL_START: i64 = -99;

/// How long Hyprland waits for a request after accepting a connection.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Hyprland drops an event client once this many events wait for it.
const MAX_QUEUED_EVENTS: usize = 64;
/// What `Misbehave::Garbage` answers (not UTF-8, not JSON, no `>>`).
pub const GARBAGE: &[u8] = b"\xff\xfe this is not json {{{ nor an event\n";

/// Every dispatcher Hyprland knows (the wiki's list); others get `Invalid dispatcher`.
pub const DISPATCHERS: &[&str] = &[
    "exec",
    "execr",
    "pass",
    "sendshortcut",
    "sendkeystate",
    "killactive",
    "forcekillactive",
    "closewindow",
    "killwindow",
    "signal",
    "signalwindow",
    "workspace",
    "movetoworkspace",
    "movetoworkspacesilent",
    "togglefloating",
    "setfloating",
    "settiled",
    "fullscreen",
    "fullscreenstate",
    "dpms",
    "forceidle",
    "pin",
    "movefocus",
    "movewindow",
    "swapwindow",
    "centerwindow",
    "resizeactive",
    "moveactive",
    "resizewindowpixel",
    "movewindowpixel",
    "cyclenext",
    "swapnext",
    "tagwindow",
    "focuswindow",
    "focuswindowbyclass",
    "focusmonitor",
    "splitratio",
    "movecursortocorner",
    "movecursor",
    "renameworkspace",
    "exit",
    "forcerendererreload",
    "movecurrentworkspacetomonitor",
    "focusworkspaceoncurrentmonitor",
    "moveworkspacetomonitor",
    "swapactiveworkspaces",
    "bringactivetotop",
    "alterzorder",
    "togglespecialworkspace",
    "focusurgentorlast",
    "togglegroup",
    "changegroupactive",
    "focuscurrentorlast",
    "lockgroups",
    "lockactivegroup",
    "moveintogroup",
    "moveoutofgroup",
    "movewindoworgroup",
    "movegroupwindow",
    "denywindowfromgroup",
    "setignoregrouplock",
    "global",
    "submap",
    "event",
    "setprop",
    "toggleswallow",
    "pseudo",
    "togglesplit",
    "swapsplit",
    "layoutmsg",
    "workspaceopt",
    "mouse",
];

/// One fake monitor.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeMonitor {
    pub id: i64,
    pub name: String,
    pub make: String,
    pub model: String,
    pub serial: String,
    /// The mode in physical pixels (`width`/`height` in Hyprland's JSON).
    pub width: u32,
    pub height: u32,
    pub refresh_rate: f64,
    /// Logical position.
    pub x: i32,
    pub y: i32,
    pub scale: f64,
    pub physical_mm: (u32, u32),
    pub active_workspace: i64,
    /// The special workspace open on this monitor.
    pub special_workspace: Option<i64>,
    pub dpms: bool,
    /// A disabled monitor shows only in `monitors all`.
    pub disabled: bool,
}

impl FakeMonitor {
    /// The logical size: the mode divided by the scale.
    pub fn logical_size(&self) -> (i32, i32) {
        (
            (f64::from(self.width) / self.scale).round() as i32,
            (f64::from(self.height) / self.scale).round() as i32,
        )
    }

    pub fn logical_rect(&self) -> Rect {
        let (w, h) = self.logical_size();
        (self.x, self.y, w, h)
    }

    /// Hyprland's short description: make, model, serial.
    pub fn description(&self) -> String {
        format!("{} {} {}", self.make, self.model, self.serial)
    }
}

/// One fake workspace.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeWorkspace {
    /// Positive for numbered workspaces, -1337 and down for named ones, -99..-2 for special.
    pub id: i64,
    pub name: String,
    /// The monitor's name.
    pub monitor: String,
    pub last_window: Option<u64>,
    /// Where `previous` goes from here (id, name).
    pub previous: Option<(i64, String)>,
    /// A persistent workspace is not destroyed when empty.
    pub persistent: bool,
}

/// One fake window (Hyprland's fields).
#[derive(Debug, Clone, PartialEq)]
pub struct FakeWindow {
    pub address: u64,
    pub mapped: bool,
    pub hidden: bool,
    /// Logical position and size.
    pub at: (i32, i32),
    pub size: (i32, i32),
    pub workspace: i64,
    pub floating: bool,
    pub pseudo: bool,
    pub class: String,
    pub title: String,
    pub initial_class: String,
    pub initial_title: String,
    pub pid: i64,
    pub xwayland: bool,
    pub pinned: bool,
    /// 0 none, 1 maximized, 2 fullscreen (3 both).
    pub fullscreen: u8,
    pub fullscreen_client: u8,
    pub grouped: Vec<u64>,
    pub tags: Vec<String>,
    pub swallowing: u64,
    /// An application that does not close when asked (closewindow, killactive).
    pub ignores_close: bool,
    /// The geometry to go back to after fullscreen.
    pub saved_rect: Option<Rect>,
}

impl FakeWindow {
    /// A mapped, tiled window.
    pub fn new(
        address: u64,
        class: &str,
        title: &str,
        workspace: i64,
        rect: Rect,
        pid: i64,
    ) -> Self {
        FakeWindow {
            address,
            mapped: true,
            hidden: false,
            at: (rect.0, rect.1),
            size: (rect.2, rect.3),
            workspace,
            floating: false,
            pseudo: false,
            class: class.to_owned(),
            title: title.to_owned(),
            initial_class: class.to_owned(),
            initial_title: title.to_owned(),
            pid,
            xwayland: false,
            pinned: false,
            fullscreen: 0,
            fullscreen_client: 0,
            grouped: vec![],
            tags: vec![],
            swallowing: 0,
            ignores_close: false,
            saved_rect: None,
        }
    }

    pub fn rect(&self) -> Rect {
        (self.at.0, self.at.1, self.size.0, self.size.1)
    }

    /// "0x…", as in JSON and window specs.
    pub fn address_string(&self) -> String {
        format!("0x{:x}", self.address)
    }

    /// Hex without "0x", as in events.
    pub fn hex(&self) -> String {
        format!("{:x}", self.address)
    }
}

/// One fake keyboard (`devices`).
#[derive(Debug, Clone, PartialEq)]
pub struct FakeKeyboard {
    pub address: u64,
    pub name: String,
    pub rules: String,
    pub model: String,
    /// The xkb layout codes, as configured ("us,de").
    pub layout: String,
    pub variant: String,
    pub options: String,
    /// The layouts' names ("English (US)", "German").
    pub layouts: Vec<String>,
    pub active: usize,
    pub main: bool,
}

/// One fake mouse (`devices`).
#[derive(Debug, Clone, PartialEq)]
pub struct FakeMouse {
    pub address: u64,
    pub name: String,
}

/// What `version` says.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeVersion {
    pub tag: String,
    /// `None` plays an older Hyprland without the `version` field.
    pub version: Option<String>,
    pub branch: String,
    pub commit: String,
    pub commit_message: String,
    pub commit_date: String,
    pub commits: String,
}

/// The fake desktop's whole state.
#[derive(Debug, Clone, PartialEq)]
pub struct Desktop {
    pub version: FakeVersion,
    pub monitors: Vec<FakeMonitor>,
    pub workspaces: Vec<FakeWorkspace>,
    /// In Hyprland's order (creation order).
    pub windows: Vec<FakeWindow>,
    pub focused_monitor: String,
    pub focused_window: Option<u64>,
    /// Most recently focused first.
    pub focus_history: Vec<u64>,
    pub keyboards: Vec<FakeKeyboard>,
    pub mice: Vec<FakeMouse>,
    /// Write newlines in event data raw (an older Hyprland) instead of as spaces.
    pub raw_newlines_in_events: bool,
    /// `binds:workspace_back_and_forth`.
    pub workspace_back_and_forth: bool,
    pub next_address: u64,
    pub next_pid: i64,
}

/// Why a dispatcher did not answer `ok`.
#[derive(Debug)]
enum Failure {
    /// The reply text.
    Error(String),
    /// A C++ exception escaping the dispatcher: the whole request answers `Err: <what>`.
    Exception(String),
}

impl From<&str> for Failure {
    fn from(s: &str) -> Self {
        Failure::Error(s.to_owned())
    }
}

impl From<String> for Failure {
    fn from(s: String) -> Self {
        Failure::Error(s)
    }
}

type Done = Result<(), Failure>;

/// What `exec` rules and `open_window_with` ask for.
#[derive(Debug, Clone, Default)]
struct OpenOptions {
    workspace: Option<String>,
    silent: bool,
    floating: Option<bool>,
    fullscreen: u8,
    pinned: bool,
}

fn push(out: &mut Vec<String>, name: &str, data: impl AsRef<str>) {
    out.push(format!("{name}>>{}", data.as_ref()));
}

/// `|a - b| < 2`, Hyprland's test for touching edges.
fn sticks(a: i32, b: i32) -> bool {
    (a - b).abs() < 2
}

fn overlap(a0: i32, a1: i32, b0: i32, b1: i32) -> i32 {
    (a1.min(b1) - a0.max(b0)).max(0)
}

fn is_direction(s: &str) -> bool {
    matches!(s, "l" | "r" | "u" | "d" | "t" | "b")
}

pub fn is_special(id: i64) -> bool {
    (SPECIAL_START..=-2).contains(&id)
}

/// Hyprland's isNumber (no floats): digits, an optional leading `-`, ending in a digit.
fn is_number(s: &str) -> bool {
    let b = s.as_bytes();
    if b.is_empty() {
        return false;
    }
    for (i, &c) in b.iter().enumerate() {
        if i == 0 && c == b'-' {
            continue;
        }
        if !c.is_ascii_digit() {
            return false;
        }
    }
    b[b.len() - 1].is_ascii_digit()
}

/// C's `stoi`: leading blanks, a sign, digits; trailing junk ignored; `None` when it throws.
fn stoi(s: &str) -> Option<i64> {
    let t = s.trim_start();
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let end = digits.bytes().take_while(u8::is_ascii_digit).count();
    if end == 0 {
        return None;
    }
    let n: i64 = digits[..end].parse().ok()?;
    let n = if neg { -n } else { n };
    (i64::from(i32::MIN)..=i64::from(i32::MAX))
        .contains(&n)
        .then_some(n)
}

/// C's `stof` on a prefix; `None` when it throws.
fn stof(s: &str) -> Option<f64> {
    let t = s.trim_start();
    let mut end = 0;
    let b = t.as_bytes();
    if end < b.len() && (b[end] == b'+' || b[end] == b'-') {
        end += 1;
    }
    let digits_start = end;
    while end < b.len() && (b[end].is_ascii_digit() || b[end] == b'.') {
        end += 1;
    }
    if end == digits_start {
        return None;
    }
    t[..end].parse().ok()
}

/// An event line as Hyprland writes it: `name>>data\n`, the data cut at 1024 bytes and its
/// newlines written as spaces (unless `raw_newlines`).
pub fn format_event(line: &str, raw_newlines: bool) -> Vec<u8> {
    let (name, data) = match line.split_once(">>") {
        Some(parts) => parts,
        None => {
            let mut out: Vec<u8> = line
                .bytes()
                .map(|b| if b == b'\n' && !raw_newlines { b' ' } else { b })
                .collect();
            out.push(b'\n');
            return out;
        }
    };
    let data = data.as_bytes();
    let data = &data[..data.len().min(1024)];
    let mut out = name.as_bytes().to_vec();
    out.extend_from_slice(b">>");
    out.extend(
        data.iter()
            .map(|&b| if b == b'\n' && !raw_newlines { b' ' } else { b }),
    );
    out.push(b'\n');
    out
}

/// The words of a POSIX shell command line, unquoted, up to the first unquoted control
/// operator.
fn shell_words(cmd: &str) -> Vec<String> {
    let mut words = vec![];
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = cmd.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    cur.push(c);
                }
            }
            '"' => {
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => match chars.peek() {
                            Some(&n) if matches!(n, '"' | '\\' | '$' | '`' | '\n') => {
                                chars.next();
                                if n != '\n' {
                                    cur.push(n);
                                }
                            }
                            _ => cur.push('\\'),
                        },
                        c => cur.push(c),
                    }
                }
            }
            '\\' => {
                if let Some(n) = chars.next()
                    && n != '\n'
                {
                    cur.push(n);
                    in_word = true;
                }
            }
            ' ' | '\t' | '\n' => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            ';' | '&' | '|' | '<' | '>' | '(' | ')' => break,
            c => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else {
        return false;
    };
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The file name of the program a command line runs.
pub fn program_of(cmd: &str) -> Option<String> {
    let words = shell_words(cmd);
    let mut words = words.iter().skip_while(|w| is_assignment(w)).peekable();
    if words.peek().is_some_and(|w| *w == "exec") {
        words.next();
    }
    let program = words.next()?;
    let name = program.rsplit('/').next().unwrap_or_default();
    (!name.is_empty()).then(|| name.to_owned())
}

/// Split the body of a `[[BATCH]]` request at `;` outside `[...]`, trimming each part.
fn split_batch(body: &str) -> Vec<String> {
    let mut parts = vec![];
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in body
        .char_indices()
        .chain(std::iter::once((body.len(), ';')))
    {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ';' if depth == 0 => {
                if start < i {
                    parts.push(body[start..i].trim().to_owned());
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    parts
}

fn obj(fields: Vec<(&str, Value)>) -> Value {
    Value::Object(
        fields
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect::<Map<String, Value>>(),
    )
}

impl Desktop {
    /// Two monitors: `DP-1` (id 0, 2560×1440 at 0,0, scale 1, focused) shows workspace 1
    /// (kitty "~" tiled at 0,0 1280×1440, focused; firefox "Mozilla Firefox" tiled at
    /// 1280,0 1280×1440) and has workspace 2 hidden (org.gnome.Nautilus "Home" tiled at 0,0
    /// 2560×1440; pavucontrol "Volume Control" floating at 880,420 800×600); `HDMI-A-1` (id
    /// 1, 1920×1080 at 2560,0) shows workspace 3 (foot "htop" at 2560,0 1920×1080).
    /// Addresses 0x55d1c0a2e6b0 (kitty), 0x55d1c0a31f40 (firefox), 0x55d1c0a35a80
    /// (nautilus), 0x55d1c0a3b210 (pavucontrol), 0x55d1c0a41c90 (foot); pids 2101…2505.
    /// Focus history: kitty, firefox, foot, nautilus, pavucontrol. Keyboards
    /// "at-translated-set-2-keyboard" (main) and "power-button", layouts "English (US)" and
    /// "German" ("us,de"). Version v0.50.1.
    pub fn two_monitors() -> Desktop {
        let monitor = |id: i64, name: &str, make: &str, model: &str, serial: &str| FakeMonitor {
            id,
            name: name.to_owned(),
            make: make.to_owned(),
            model: model.to_owned(),
            serial: serial.to_owned(),
            width: 2560,
            height: 1440,
            refresh_rate: 59.951,
            x: 0,
            y: 0,
            scale: 1.0,
            physical_mm: (600, 340),
            active_workspace: 1,
            special_workspace: None,
            dpms: true,
            disabled: false,
        };
        let dp = monitor(0, "DP-1", "Dell Inc.", "DELL U2720Q", "4K0ABC1");
        let hdmi = FakeMonitor {
            width: 1920,
            height: 1080,
            refresh_rate: 60.0,
            x: 2560,
            physical_mm: (530, 300),
            active_workspace: 3,
            ..monitor(
                1,
                "HDMI-A-1",
                "Samsung Electric Company",
                "S24F350",
                "H4ZN500123",
            )
        };
        let ws = |id: i64, monitor: &str, last: u64| FakeWorkspace {
            id,
            name: id.to_string(),
            monitor: monitor.to_owned(),
            last_window: Some(last),
            previous: None,
            persistent: false,
        };
        let mut pavucontrol = FakeWindow::new(
            0x55d1c0a3b210,
            "pavucontrol",
            "Volume Control",
            2,
            (880, 420, 800, 600),
            2404,
        );
        pavucontrol.floating = true;
        let keyboard = |address: u64, name: &str, main: bool| FakeKeyboard {
            address,
            name: name.to_owned(),
            rules: String::new(),
            model: String::new(),
            layout: "us,de".into(),
            variant: ",".into(),
            options: String::new(),
            layouts: vec!["English (US)".into(), "German".into()],
            active: 0,
            main,
        };
        Desktop {
            version: FakeVersion {
                tag: "v0.50.1".into(),
                version: Some("0.50.1".into()),
                branch: String::new(),
                commit: "4e242d086e20b32951fdc0ebcbfb4d41b5be8dcc".into(),
                commit_message: "version: bump to 0.50.1".into(),
                commit_date: "Tue Jul 29 18:02:11 2025".into(),
                commits: "6348".into(),
            },
            monitors: vec![dp, hdmi],
            workspaces: vec![
                ws(1, "DP-1", 0x55d1c0a2e6b0),
                ws(2, "DP-1", 0x55d1c0a35a80),
                ws(3, "HDMI-A-1", 0x55d1c0a41c90),
            ],
            windows: vec![
                FakeWindow::new(0x55d1c0a2e6b0, "kitty", "~", 1, (0, 0, 1280, 1440), 2101),
                FakeWindow::new(
                    0x55d1c0a31f40,
                    "firefox",
                    "Mozilla Firefox",
                    1,
                    (1280, 0, 1280, 1440),
                    2202,
                ),
                FakeWindow::new(
                    0x55d1c0a35a80,
                    "org.gnome.Nautilus",
                    "Home",
                    2,
                    (0, 0, 2560, 1440),
                    2303,
                ),
                pavucontrol,
                FakeWindow::new(
                    0x55d1c0a41c90,
                    "foot",
                    "htop",
                    3,
                    (2560, 0, 1920, 1080),
                    2505,
                ),
            ],
            focused_monitor: "DP-1".into(),
            focused_window: Some(0x55d1c0a2e6b0),
            focus_history: vec![
                0x55d1c0a2e6b0,
                0x55d1c0a31f40,
                0x55d1c0a41c90,
                0x55d1c0a35a80,
                0x55d1c0a3b210,
            ],
            keyboards: vec![
                keyboard(0x55d1c09f1a30, "at-translated-set-2-keyboard", true),
                keyboard(0x55d1c09e2b40, "power-button", false),
            ],
            mice: vec![FakeMouse {
                address: 0x55d1c09d3c50,
                name: "elan0676:00-04f3:3195-touchpad".into(),
            }],
            raw_newlines_in_events: false,
            workspace_back_and_forth: false,
            next_address: 0x55d1c0b00000,
            next_pid: 5000,
        }
    }

    /// [`Desktop::two_monitors`] with DP-1 a 3840×2160 panel at scale 1.5: the same logical
    /// layout (2560×1440), twice the pixels.
    pub fn two_monitors_hidpi() -> Desktop {
        let mut d = Desktop::two_monitors();
        let dp = &mut d.monitors[0];
        dp.width = 3840;
        dp.height = 2160;
        dp.scale = 1.5;
        dp.model = "DELL U2723QE".into();
        d
    }

    // --- lookups

    pub fn window(&self, address: u64) -> Option<&FakeWindow> {
        self.windows.iter().find(|w| w.address == address)
    }

    pub fn window_mut(&mut self, address: u64) -> Option<&mut FakeWindow> {
        self.windows.iter_mut().find(|w| w.address == address)
    }

    pub fn window_by_class(&self, class: &str) -> Option<&FakeWindow> {
        self.windows.iter().find(|w| w.class == class)
    }

    /// The address of the first window of this class (panics when there is none).
    pub fn address_of(&self, class: &str) -> u64 {
        self.window_by_class(class)
            .unwrap_or_else(|| panic!("no {class} window"))
            .address
    }

    pub fn workspace(&self, id: i64) -> Option<&FakeWorkspace> {
        self.workspaces.iter().find(|w| w.id == id)
    }

    pub fn workspace_mut(&mut self, id: i64) -> Option<&mut FakeWorkspace> {
        self.workspaces.iter_mut().find(|w| w.id == id)
    }

    pub fn workspace_by_name(&self, name: &str) -> Option<&FakeWorkspace> {
        self.workspaces.iter().find(|w| w.name == name)
    }

    pub fn monitor(&self, name: &str) -> Option<&FakeMonitor> {
        self.monitors.iter().find(|m| m.name == name)
    }

    pub fn monitor_mut(&mut self, name: &str) -> Option<&mut FakeMonitor> {
        self.monitors.iter_mut().find(|m| m.name == name)
    }

    pub fn focused_monitor(&self) -> Option<&FakeMonitor> {
        self.monitor(&self.focused_monitor)
    }

    pub fn focused_window(&self) -> Option<&FakeWindow> {
        self.focused_window.and_then(|a| self.window(a))
    }

    /// The focused monitor's active workspace (`activeworkspace`).
    pub fn active_workspace(&self) -> Option<&FakeWorkspace> {
        self.workspace(self.focused_monitor()?.active_workspace)
    }

    pub fn monitor_of_workspace(&self, ws: i64) -> Option<&FakeMonitor> {
        self.monitor(&self.workspace(ws)?.monitor)
    }

    fn monitor_name_of_workspace(&self, ws: i64) -> String {
        self.workspace(ws)
            .map(|w| w.monitor.clone())
            .unwrap_or_else(|| self.focused_monitor.clone())
    }

    fn monitor_name_of_window(&self, a: u64) -> Option<String> {
        Some(self.workspace(self.window(a)?.workspace)?.monitor.clone())
    }

    /// Shown: a monitor's active workspace or its open special one.
    pub fn is_visible(&self, ws: i64) -> bool {
        self.monitors
            .iter()
            .any(|m| !m.disabled && (m.active_workspace == ws || m.special_workspace == Some(ws)))
    }

    fn window_count(&self, ws: i64) -> usize {
        self.windows
            .iter()
            .filter(|w| w.mapped && w.workspace == ws)
            .count()
    }

    fn workspace_name(&self, ws: i64) -> String {
        self.workspace(ws)
            .map(|w| w.name.clone())
            .unwrap_or_default()
    }

    /// What Hyprland passes around to name a workspace in a dispatcher.
    pub fn config_name(&self, ws: i64) -> String {
        let name = self.workspace_name(ws);
        if is_special(ws) {
            name
        } else if ws > 0 {
            ws.to_string()
        } else {
            format!("name:{name}")
        }
    }

    fn focus_history_id(&self, a: u64) -> i64 {
        self.focus_history
            .iter()
            .position(|&h| h == a)
            .map_or(-1, |i| i as i64)
    }

    fn ws_rect(&self, ws: i64) -> Rect {
        self.monitor_of_workspace(ws)
            .or_else(|| self.focused_monitor())
            .map_or((0, 0, 1920, 1080), FakeMonitor::logical_rect)
    }

    fn rect(&self, a: u64) -> Rect {
        self.window(a).map_or((0, 0, 0, 0), FakeWindow::rect)
    }

    fn set_rect(&mut self, a: u64, r: Rect) {
        if let Some(w) = self.window_mut(a) {
            w.at = (r.0, r.1);
            w.size = (r.2, r.3);
        }
    }

    /// A window's place in the layout (its saved geometry while fullscreen).
    fn tile_rect(&self, a: u64) -> Rect {
        match self.window(a) {
            Some(w) if w.fullscreen != 0 => w.saved_rect.unwrap_or_else(|| w.rect()),
            Some(w) => w.rect(),
            None => (0, 0, 0, 0),
        }
    }

    fn set_tile_rect(&mut self, a: u64, r: Rect) {
        match self.window_mut(a) {
            Some(w) if w.fullscreen != 0 => w.saved_rect = Some(r),
            Some(_) => self.set_rect(a, r),
            None => {}
        }
    }

    // --- JSON

    /// A client as `j/clients` prints it.
    pub fn client_json(&self, w: &FakeWindow) -> Value {
        let (ws_id, ws_name) = match self.workspace(w.workspace) {
            Some(ws) => (ws.id, ws.name.clone()),
            None => (-1, String::new()),
        };
        let monitor = self.monitor_of_workspace(w.workspace).map_or(-1, |m| m.id);
        obj(vec![
            ("address", json!(w.address_string())),
            ("mapped", json!(w.mapped)),
            ("hidden", json!(w.hidden)),
            ("at", json!([w.at.0, w.at.1])),
            ("size", json!([w.size.0, w.size.1])),
            ("workspace", json!({"id": ws_id, "name": ws_name})),
            ("floating", json!(w.floating)),
            ("pseudo", json!(w.pseudo)),
            ("monitor", json!(monitor)),
            ("class", json!(w.class)),
            ("title", json!(w.title)),
            ("initialClass", json!(w.initial_class)),
            ("initialTitle", json!(w.initial_title)),
            ("pid", json!(w.pid)),
            ("xwayland", json!(w.xwayland)),
            ("pinned", json!(w.pinned)),
            ("fullscreen", json!(w.fullscreen)),
            ("fullscreenClient", json!(w.fullscreen_client)),
            (
                "grouped",
                json!(
                    w.grouped
                        .iter()
                        .map(|a| format!("0x{a:x}"))
                        .collect::<Vec<_>>()
                ),
            ),
            ("tags", json!(w.tags)),
            ("swallowing", json!(format!("0x{:x}", w.swallowing))),
            ("focusHistoryID", json!(self.focus_history_id(w.address))),
            ("inhibitingIdle", json!(false)),
            ("xdgTag", json!("")),
            ("xdgDescription", json!("")),
        ])
    }

    /// `j/clients` (`j/a/clients`… with `all`: unmapped windows too).
    pub fn clients_json(&self, all: bool) -> Value {
        Value::Array(
            self.windows
                .iter()
                .filter(|w| w.mapped || all)
                .map(|w| self.client_json(w))
                .collect(),
        )
    }

    /// `j/activewindow`: the focused window, or `{}`.
    pub fn active_window_json(&self) -> Value {
        match self.focused_window().filter(|w| w.mapped) {
            Some(w) => self.client_json(w),
            None => json!({}),
        }
    }

    pub fn monitor_json(&self, m: &FakeMonitor) -> Value {
        let active = self.workspace(m.active_workspace);
        let special = m.special_workspace.and_then(|id| self.workspace(id));
        let modes = if m.width >= 2560 {
            vec![
                format!("{}x{}@{:.2}Hz", m.width, m.height, m.refresh_rate),
                "1920x1080@60.00Hz".to_owned(),
                "1280x720@60.00Hz".to_owned(),
            ]
        } else {
            vec![
                format!("{}x{}@{:.2}Hz", m.width, m.height, m.refresh_rate),
                "1280x720@60.00Hz".to_owned(),
            ]
        };
        obj(vec![
            ("id", json!(m.id)),
            ("name", json!(m.name)),
            ("description", json!(m.description())),
            ("make", json!(m.make)),
            ("model", json!(m.model)),
            ("serial", json!(m.serial)),
            ("width", json!(m.width)),
            ("height", json!(m.height)),
            ("physicalWidth", json!(m.physical_mm.0)),
            ("physicalHeight", json!(m.physical_mm.1)),
            ("refreshRate", json!(m.refresh_rate)),
            ("x", json!(m.x)),
            ("y", json!(m.y)),
            (
                "activeWorkspace",
                json!({
                    "id": active.map_or(0, |w| w.id),
                    "name": active.map(|w| w.name.clone()).unwrap_or_default(),
                }),
            ),
            (
                "specialWorkspace",
                json!({
                    "id": special.map_or(0, |w| w.id),
                    "name": special.map(|w| w.name.clone()).unwrap_or_default(),
                }),
            ),
            ("reserved", json!([0, 0, 0, 0])),
            ("scale", json!(m.scale)),
            ("transform", json!(0)),
            ("focused", json!(m.name == self.focused_monitor)),
            ("dpmsStatus", json!(m.dpms)),
            ("vrr", json!(false)),
            ("solitary", json!("0")),
            ("solitaryBlockedBy", json!(["CANDIDATE"])),
            ("activelyTearing", json!(false)),
            ("tearingBlockedBy", json!(["NOT_TORN", "USER"])),
            ("directScanoutTo", json!("0")),
            ("directScanoutBlockedBy", json!(["USER"])),
            ("disabled", json!(m.disabled)),
            ("currentFormat", json!("XRGB8888")),
            ("mirrorOf", json!("none")),
            ("availableModes", json!(modes)),
        ])
    }

    /// `j/monitors` (`all`: disabled monitors too, as `j/monitors all`).
    pub fn monitors_json(&self, all: bool) -> Value {
        Value::Array(
            self.monitors
                .iter()
                .filter(|m| all || !m.disabled)
                .map(|m| self.monitor_json(m))
                .collect(),
        )
    }

    pub fn workspace_json(&self, ws: &FakeWorkspace) -> Value {
        let monitor = self.monitor(&ws.monitor);
        let last = self
            .last_window_of(ws.id)
            .and_then(|a| self.window(a))
            .or_else(|| {
                ws.last_window
                    .and_then(|a| self.window(a))
                    .filter(|w| w.workspace == ws.id)
            });
        obj(vec![
            ("id", json!(ws.id)),
            ("name", json!(ws.name)),
            (
                "monitor",
                json!(monitor.map_or("?".to_owned(), |m| m.name.clone())),
            ),
            ("monitorID", monitor.map_or(Value::Null, |m| json!(m.id))),
            ("windows", json!(self.window_count(ws.id))),
            (
                "hasfullscreen",
                json!(
                    self.windows
                        .iter()
                        .any(|w| w.workspace == ws.id && w.fullscreen != 0)
                ),
            ),
            (
                "lastwindow",
                json!(format!("0x{:x}", last.map_or(0, |w| w.address))),
            ),
            (
                "lastwindowtitle",
                json!(last.map(|w| w.title.clone()).unwrap_or_default()),
            ),
            ("ispersistent", json!(ws.persistent)),
        ])
    }

    pub fn workspaces_json(&self) -> Value {
        Value::Array(
            self.workspaces
                .iter()
                .map(|w| self.workspace_json(w))
                .collect(),
        )
    }

    pub fn devices_json(&self) -> Value {
        let mice: Vec<Value> = self
            .mice
            .iter()
            .map(|m| {
                json!({
                    "address": format!("0x{:x}", m.address),
                    "name": m.name,
                    "defaultSpeed": 0.0,
                    "scrollFactor": -1.0,
                })
            })
            .collect();
        let keyboards: Vec<Value> = self
            .keyboards
            .iter()
            .map(|k| {
                obj(vec![
                    ("address", json!(format!("0x{:x}", k.address))),
                    ("name", json!(k.name)),
                    ("rules", json!(k.rules)),
                    ("model", json!(k.model)),
                    ("layout", json!(k.layout)),
                    ("variant", json!(k.variant)),
                    ("options", json!(k.options)),
                    ("active_layout_index", json!(k.active)),
                    (
                        "active_keymap",
                        json!(k.layouts.get(k.active).cloned().unwrap_or_default()),
                    ),
                    ("capsLock", json!(false)),
                    ("numLock", json!(false)),
                    ("main", json!(k.main)),
                ])
            })
            .collect();
        json!({
            "mice": mice,
            "keyboards": keyboards,
            "tablets": [],
            "touch": [],
            "switches": [],
        })
    }

    pub fn version_json(&self) -> Value {
        let v = &self.version;
        let mut fields = vec![("branch", json!(v.branch)), ("commit", json!(v.commit))];
        if let Some(version) = &v.version {
            fields.push(("version", json!(version)));
        }
        fields.extend([
            ("dirty", json!(false)),
            ("commit_message", json!(v.commit_message)),
            ("commit_date", json!(v.commit_date)),
            ("tag", json!(v.tag)),
            ("commits", json!(v.commits)),
            ("buildAquamarine", json!("0.9.2")),
            ("buildHyprlang", json!("0.6.3")),
            ("buildHyprutils", json!("0.8.2")),
            ("buildHyprcursor", json!("0.1.13")),
            ("buildHyprgraphics", json!("0.1.5")),
            ("systemAquamarine", json!("0.9.2")),
            ("systemHyprlang", json!("0.6.3")),
            ("systemHyprutils", json!("0.8.2")),
            ("systemHyprcursor", json!("0.1.13")),
            ("systemHyprgraphics", json!("0.1.5")),
            ("flags", json!([])),
        ]);
        obj(fields)
    }

    // --- text replies (no `j` flag)

    fn client_text(&self, w: &FakeWindow) -> String {
        let grouped = if w.grouped.is_empty() {
            "0".to_owned()
        } else {
            w.grouped
                .iter()
                .map(|a| format!("{a:x}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        format!(
            "Window {:x} -> {}:\n\tmapped: {}\n\thidden: {}\n\tat: {},{}\n\tsize: {},{}\n\t\
             workspace: {} ({})\n\tfloating: {}\n\tpseudo: {}\n\tmonitor: {}\n\tclass: {}\n\t\
             title: {}\n\tinitialClass: {}\n\tinitialTitle: {}\n\tpid: {}\n\txwayland: {}\n\t\
             pinned: {}\n\tfullscreen: {}\n\tfullscreenClient: {}\n\tgrouped: {}\n\ttags: {}\n\t\
             swallowing: {:x}\n\tfocusHistoryID: {}\n\tinhibitingIdle: 0\n\txdgTag: \n\t\
             xdgDescription: \n\n",
            w.address,
            w.title,
            u8::from(w.mapped),
            u8::from(w.hidden),
            w.at.0,
            w.at.1,
            w.size.0,
            w.size.1,
            w.workspace,
            self.workspace_name(w.workspace),
            u8::from(w.floating),
            u8::from(w.pseudo),
            self.monitor_of_workspace(w.workspace).map_or(-1, |m| m.id),
            w.class,
            w.title,
            w.initial_class,
            w.initial_title,
            w.pid,
            u8::from(w.xwayland),
            u8::from(w.pinned),
            w.fullscreen,
            w.fullscreen_client,
            grouped,
            w.tags.join(", "),
            w.swallowing,
            self.focus_history_id(w.address),
        )
    }

    fn monitor_text(&self, m: &FakeMonitor) -> String {
        let active = self.workspace(m.active_workspace);
        let special = m.special_workspace.and_then(|id| self.workspace(id));
        format!(
            "Monitor {} (ID {}):\n\t{}x{}@{:.5} at {}x{}\n\tdescription: {}\n\tmake: {}\n\t\
             model: {}\n\tphysical size (mm): {}x{}\n\tserial: {}\n\tactive workspace: {} ({})\n\t\
             special workspace: {} ({})\n\treserved: 0 0 0 0\n\tscale: {:.2}\n\ttransform: 0\n\t\
             focused: {}\n\tdpmsStatus: {}\n\tvrr: false\n\tsolitary: 0\n\t\
             solitaryBlockedBy: missing candidate\n\tactivelyTearing: false\n\t\
             tearingBlockedBy: next frame is not torn,user settings\n\tdirectScanoutTo: 0\n\t\
             directScanoutBlockedBy: user settings\n\tdisabled: {}\n\tcurrentFormat: XRGB8888\n\t\
             mirrorOf: none\n\tavailableModes: {}x{}@{:.2}Hz\n\n",
            m.name,
            m.id,
            m.width,
            m.height,
            m.refresh_rate,
            m.x,
            m.y,
            m.description(),
            m.make,
            m.model,
            m.physical_mm.0,
            m.physical_mm.1,
            m.serial,
            active.map_or(0, |w| w.id),
            active.map(|w| w.name.clone()).unwrap_or_default(),
            special.map_or(0, |w| w.id),
            special.map(|w| w.name.clone()).unwrap_or_default(),
            m.scale,
            if m.name == self.focused_monitor {
                "yes"
            } else {
                "no"
            },
            u8::from(m.dpms),
            m.disabled,
            m.width,
            m.height,
            m.refresh_rate,
        )
    }

    fn workspace_text(&self, ws: &FakeWorkspace) -> String {
        let monitor = self.monitor(&ws.monitor);
        let last = self.last_window_of(ws.id).and_then(|a| self.window(a));
        format!(
            "workspace ID {} ({}) on monitor {}:\n\tmonitorID: {}\n\twindows: {}\n\t\
             hasfullscreen: {}\n\tlastwindow: 0x{:x}\n\tlastwindowtitle: {}\n\tispersistent: {}\n\n",
            ws.id,
            ws.name,
            monitor.map_or("?".to_owned(), |m| m.name.clone()),
            monitor.map_or("null".to_owned(), |m| m.id.to_string()),
            self.window_count(ws.id),
            u8::from(
                self.windows
                    .iter()
                    .any(|w| w.workspace == ws.id && w.fullscreen != 0)
            ),
            last.map_or(0, |w| w.address),
            last.map(|w| w.title.clone()).unwrap_or_default(),
            u8::from(ws.persistent),
        )
    }

    fn devices_text(&self) -> String {
        let mut s = String::from("mice:\n");
        for m in &self.mice {
            s += &format!(
                "\tMouse at {:x}:\n\t\t{}\n\t\t\tdefault speed: 0.00000\n\t\t\tscroll factor: -1.00\n",
                m.address, m.name
            );
        }
        s += "\n\nKeyboards:\n";
        for k in &self.keyboards {
            s += &format!(
                "\tKeyboard at {:x}:\n\t\t{}\n\t\t\trules: r \"{}\", m \"{}\", l \"{}\", v \"{}\", \
                 o \"{}\"\n\t\t\tactive layout index: {}\n\t\t\tactive keymap: {}\n\t\t\t\
                 capsLock: no\n\t\t\tnumLock: no\n\t\t\tmain: {}\n",
                k.address,
                k.name,
                k.rules,
                k.model,
                k.layout,
                k.variant,
                k.options,
                k.active,
                k.layouts.get(k.active).cloned().unwrap_or_default(),
                if k.main { "yes" } else { "no" },
            );
        }
        s += "\n\nTablets:\n\n\nTouch:\n\n\nSwitches:\n";
        s
    }

    fn version_text(&self) -> String {
        let v = &self.version;
        format!(
            "Hyprland {} built from branch {} at commit {}  ({}).\nDate: {}\nTag: {}, commits: {}\n\n\
             Libraries:\nHyprgraphics: built against 0.1.5, system has 0.1.5\n\
             Hyprutils: built against 0.8.2, system has 0.8.2\n\
             Hyprcursor: built against 0.1.13, system has 0.1.13\n\
             Hyprlang: built against 0.6.3, system has 0.6.3\n\
             Aquamarine: built against 0.9.2, system has 0.9.2\n\nno flags were set\n",
            v.version.clone().unwrap_or_default(),
            v.branch,
            v.commit,
            v.commit_message,
            v.commit_date,
            v.tag,
            v.commits,
        )
    }

    // --- window specs and workspace selectors

    /// Resolve a window spec as Hyprland's dispatchers do (`None`: no such window).
    pub fn find_window(&self, spec: &str) -> Option<u64> {
        let spec = spec.trim();
        if spec.starts_with("active") {
            return self.focused_window;
        }
        if spec.starts_with("floating") || spec.starts_with("tiled") {
            let focused = self.focused_window()?;
            let want = spec.starts_with("floating");
            return self
                .windows
                .iter()
                .find(|w| {
                    w.mapped && !w.hidden && w.floating == want && w.workspace == focused.workspace
                })
                .map(|w| w.address);
        }
        enum Mode<'a> {
            Class(&'a str),
            InitialClass(&'a str),
            Title(&'a str),
            InitialTitle(&'a str),
            Tag(&'a str),
            Address(&'a str),
            Pid(&'a str),
        }
        let mode = if let Some(r) = spec.strip_prefix("class:") {
            Mode::Class(r)
        } else if let Some(r) = spec.strip_prefix("initialclass:") {
            Mode::InitialClass(r)
        } else if let Some(r) = spec.strip_prefix("title:") {
            Mode::Title(r)
        } else if let Some(r) = spec.strip_prefix("initialtitle:") {
            Mode::InitialTitle(r)
        } else if let Some(r) = spec.strip_prefix("tag:") {
            Mode::Tag(r)
        } else if let Some(r) = spec.strip_prefix("address:") {
            Mode::Address(r)
        } else if let Some(r) = spec.strip_prefix("pid:") {
            Mode::Pid(r)
        } else {
            Mode::Class(spec)
        };
        self.windows
            .iter()
            .filter(|w| w.mapped && !w.hidden)
            .find(|w| match mode {
                Mode::Class(re) => mini_re::full_match(re, &w.class),
                Mode::InitialClass(re) => mini_re::full_match(re, &w.initial_class),
                Mode::Title(re) => mini_re::full_match(re, &w.title),
                Mode::InitialTitle(re) => mini_re::full_match(re, &w.initial_title),
                Mode::Tag(re) => w.tags.iter().any(|t| mini_re::full_match(re, t)),
                Mode::Address(a) => w.address_string() == a,
                Mode::Pid(p) => w.pid.to_string() == p,
            })
            .map(|w| w.address)
    }

    fn next_named_id(&self) -> i64 {
        let mut lowest = -1337 + 1;
        for w in &self.workspaces {
            if w.id < -1 && w.id < lowest {
                lowest = w.id;
            }
        }
        lowest - 1
    }

    fn new_special_id(&self) -> i64 {
        let mut highest = SPECIAL_START;
        for w in &self.workspaces {
            if is_special(w.id) && w.id > highest {
                highest = w.id;
            }
        }
        highest + 1
    }

    /// Resolve a workspace selector as Hyprland does: `Ok(None)` is an invalid one, `Err` a
    /// C++ exception (a number too big for an int).
    pub fn resolve_workspace(&self, spec: &str) -> Result<Option<(i64, String)>, String> {
        let active = self.focused_monitor().map(|m| m.active_workspace);
        if spec.starts_with("special") {
            if spec.len() > 8 {
                let name = format!("special:{}", spec.get(8..).unwrap_or_default());
                let id = self
                    .workspace_by_name(&name)
                    .map_or_else(|| self.new_special_id(), |w| w.id);
                return Ok(Some((id, name)));
            }
            return Ok(Some((SPECIAL_START, "special:special".into())));
        }
        if let Some(name) = spec.strip_prefix("name:") {
            let id = self
                .workspace_by_name(name)
                .map_or_else(|| self.next_named_id(), |w| w.id);
            return Ok(Some((id, name.to_owned())));
        }
        if let Some(flags) = spec.strip_prefix("empty") {
            let mut id = if flags.contains('n') {
                active.unwrap_or(0)
            } else {
                0
            };
            loop {
                id += 1;
                if self.workspace(id).is_none() || self.window_count(id) == 0 {
                    return Ok(Some((id, String::new())));
                }
            }
        }
        if spec.starts_with("prev") {
            let Some(ws) = self.active_workspace() else {
                return Ok(None);
            };
            let Some((id, name)) = ws.previous.clone() else {
                return Ok(None);
            };
            return Ok(Some(match self.workspace(id) {
                Some(w) => (w.id, w.name.clone()),
                None => (id, name),
            }));
        }
        if spec == "next" {
            let Some(a) = active else { return Ok(None) };
            if a < 0 {
                return Ok(None);
            }
            return Ok(Some((a + 1, (a + 1).to_string())));
        }
        let b = spec.as_bytes();
        if b.len() >= 2
            && matches!(b[0], b'r' | b'm' | b'e')
            && matches!(b[1], b'+' | b'-' | b'~')
            && is_number(&spec[2..])
        {
            return Ok(self.relative_workspace(b[0], b[1] == b'~', spec));
        }
        if b.first().is_some_and(|&c| c == b'+' || c == b'-') {
            let (Some(a), Some(delta)) = (active, stof(spec)) else {
                return Ok(None);
            };
            let id = ((a as f64 + delta) as i64).max(1);
            return Ok(Some((id, id.to_string())));
        }
        if is_number(spec) {
            let n = stoi(spec).ok_or("stoi")?;
            let id = n.max(1);
            return Ok(Some((id, id.to_string())));
        }
        Ok(self
            .workspace_by_name(spec)
            .map(|w| (w.id, w.id.to_string())))
    }

    /// `m±n`/`m~n` (on the focused monitor), `e±n`/`e~n` (open workspaces anywhere), and an
    /// approximation of `r±n`/`r~n` (any id not used on another monitor).
    fn relative_workspace(&self, kind: u8, absolute: bool, spec: &str) -> Option<(i64, String)> {
        let n = stof(if absolute { &spec[2..] } else { &spec[1..] })? as i64;
        let mon = self.focused_monitor.clone();
        let active = self.focused_monitor()?.active_workspace;
        let name_of = |id: i64| {
            self.workspace(id)
                .map_or_else(|| id.to_string(), |w| w.name.clone())
        };
        if kind == b'r' {
            let invalid = |id: i64| {
                self.workspace(id)
                    .is_some_and(|w| is_special(w.id) || w.monitor != mon)
            };
            let id = if absolute {
                let mut named: Vec<i64> = self
                    .workspaces
                    .iter()
                    .filter(|w| w.id < 0 && !is_special(w.id) && w.monitor == mon)
                    .map(|w| w.id)
                    .collect();
                named.sort_unstable();
                let mut remains = n - 1;
                if remains >= 0 && (remains as usize) < named.len() {
                    named[remains as usize]
                } else {
                    remains -= named.len() as i64;
                    let mut id = 0;
                    while remains >= 0 {
                        id += 1;
                        if !invalid(id) {
                            remains -= 1;
                        }
                    }
                    id
                }
            } else {
                let step = n.signum();
                let mut left = n.abs();
                let mut id = active.max(0);
                while left > 0 {
                    id += step;
                    if id <= 0 {
                        break;
                    }
                    if !invalid(id) {
                        left -= 1;
                    }
                }
                if id <= 0 {
                    id = 1;
                    while invalid(id) {
                        id += 1;
                    }
                }
                id
            };
            return Some((id, name_of(id)));
        }
        let all = kind == b'e';
        let mut valid: Vec<i64> = self
            .workspaces
            .iter()
            .filter(|w| !is_special(w.id) && (all || w.monitor == mon))
            .map(|w| w.id)
            .collect();
        valid.sort_unstable();
        if valid.is_empty() {
            return None;
        }
        let len = valid.len() as i64;
        let index = if absolute {
            (n - 1).clamp(0, len - 1)
        } else {
            let rem = if n < 0 { -((-n) % len) } else { n % len };
            let current = valid
                .iter()
                .position(|&id| id == active)
                .map_or(-1, |i| i as i64);
            let mut i = current + rem;
            if i >= len {
                i %= len;
            } else if i < 0 {
                i += len;
            }
            i
        };
        let id = valid[index as usize];
        Some((id, name_of(id)))
    }

    /// A monitor by Hyprland's monitor selector: `current`, a direction, `+n`/`-n`, an id,
    /// `desc:…`, or a name.
    pub fn monitor_from_string(&self, s: &str) -> Option<String> {
        let enabled: Vec<&FakeMonitor> = self.monitors.iter().filter(|m| !m.disabled).collect();
        if s == "current" {
            return Some(self.focused_monitor.clone());
        }
        if is_direction(s) {
            return self.monitor_in_direction(&self.focused_monitor, s.as_bytes()[0] as char);
        }
        if s.starts_with('+') || s.starts_with('-') {
            let offset = stoi(s)?;
            let len = enabled.len() as i64;
            let current = enabled
                .iter()
                .position(|m| m.name == self.focused_monitor)? as i64;
            let index = (current + offset).rem_euclid(len);
            return Some(enabled[index as usize].name.clone());
        }
        if is_number(s) {
            let id = stoi(s)?;
            return enabled.iter().find(|m| m.id == id).map(|m| m.name.clone());
        }
        if let Some(desc) = s.strip_prefix("desc:") {
            return enabled
                .iter()
                .find(|m| m.description().starts_with(desc.trim()))
                .map(|m| m.name.clone());
        }
        enabled.iter().find(|m| m.name == s).map(|m| m.name.clone())
    }

    fn monitor_in_direction(&self, from: &str, dir: char) -> Option<String> {
        let (sx, sy, sw, sh) = self.monitor(from)?.logical_rect();
        self.monitors
            .iter()
            .filter(|m| !m.disabled && m.name != from)
            .filter_map(|m| {
                let (x, y, w, h) = m.logical_rect();
                let shared = match dir {
                    'l' if sticks(x + w, sx) => overlap(sy, sy + sh, y, y + h),
                    'r' if sticks(sx + sw, x) => overlap(sy, sy + sh, y, y + h),
                    'u' | 't' if sticks(y + h, sy) => overlap(sx, sx + sw, x, x + w),
                    'd' | 'b' if sticks(sy + sh, y) => overlap(sx, sx + sw, x, x + w),
                    _ => 0,
                };
                (shared > 0).then_some((shared, m.name.clone()))
            })
            .max_by_key(|(shared, _)| *shared)
            .map(|(_, name)| name)
    }

    // --- the primitives Hyprland's dispatchers are made of, each pushing its events

    fn set_active_monitor(&mut self, mon: &str, out: &mut Vec<String>) {
        if self.focused_monitor == mon || self.monitor(mon).is_none() {
            return;
        }
        self.focused_monitor = mon.to_owned();
        let ws = self.monitor(mon).map_or(-1, |m| m.active_workspace);
        let (id, name) = match self.workspace(ws) {
            Some(w) => (w.id, w.name.clone()),
            None => (-1, "?".to_owned()),
        };
        push(out, "focusedmon", format!("{mon},{name}"));
        push(out, "focusedmonv2", format!("{mon},{id}"));
    }

    fn focus(&mut self, target: Option<u64>, out: &mut Vec<String>) {
        match target {
            None => {
                if self.focused_window.take().is_some() {
                    push(out, "activewindow", ",");
                    push(out, "activewindowv2", "");
                }
            }
            Some(a) => {
                if self.focused_window == Some(a) {
                    return;
                }
                let Some(w) = self.window(a).cloned() else {
                    return;
                };
                if w.pinned {
                    let active = self.focused_monitor().map(|m| m.active_workspace);
                    if let (Some(ws), Some(win)) = (active, self.window_mut(a)) {
                        win.workspace = ws;
                    }
                }
                self.focused_window = Some(a);
                self.focus_history.retain(|&h| h != a);
                self.focus_history.insert(0, a);
                let ws = self.window(a).map_or(w.workspace, |w| w.workspace);
                if let Some(ws) = self.workspace_mut(ws) {
                    ws.last_window = Some(a);
                }
                push(out, "activewindow", format!("{},{}", w.class, w.title));
                push(out, "activewindowv2", w.hex());
            }
        }
    }

    fn last_window_of(&self, ws: i64) -> Option<u64> {
        let a = self.workspace(ws)?.last_window?;
        self.window(a)
            .filter(|w| w.mapped && !w.hidden && w.workspace == ws)
            .map(|w| w.address)
    }

    /// Which window gets the focus when a workspace is shown.
    fn pick_focus_on(&self, ws: i64) -> Option<u64> {
        let on_ws = || {
            self.windows
                .iter()
                .filter(move |w| w.mapped && !w.hidden && w.workspace == ws)
        };
        on_ws()
            .find(|w| w.fullscreen != 0)
            .map(|w| w.address)
            .or_else(|| self.last_window_of(ws))
            .or_else(|| {
                on_ws()
                    .filter(|w| !w.floating)
                    .min_by_key(|w| (w.at.1, w.at.0))
                    .map(|w| w.address)
            })
            .or_else(|| on_ws().next().map(|w| w.address))
    }

    fn remember_previous(&mut self, target: i64, from: i64) {
        if target == from {
            return;
        }
        let name = self.workspace_name(from);
        if let Some(ws) = self.workspace_mut(target) {
            ws.previous = Some((from, name));
        }
    }

    /// Show `ws` on monitor `mon` (Hyprland's CMonitor::changeWorkspace).
    fn change_workspace(&mut self, mon: &str, ws: i64, focus: bool, out: &mut Vec<String>) {
        let Some(old) = self.monitor(mon).map(|m| m.active_workspace) else {
            return;
        };
        if old == ws {
            return;
        }
        if let Some(m) = self.monitor_mut(mon) {
            m.active_workspace = ws;
        }
        if let Some(w) = self.workspace_mut(ws) {
            w.monitor = mon.to_owned();
        }
        for w in &mut self.windows {
            if w.workspace == old && w.pinned {
                w.workspace = ws;
            }
        }
        if focus {
            let special_open = self
                .focused_monitor()
                .is_some_and(|m| m.special_workspace.is_some());
            let pinned_here = self
                .focused_window()
                .is_some_and(|w| w.pinned && self.monitor_name_of_workspace(w.workspace) == mon);
            if !special_open && !pinned_here {
                let target = self.pick_focus_on(ws);
                self.focus(target, out);
            }
        }
        let name = self.workspace_name(ws);
        push(out, "workspace", &name);
        push(out, "workspacev2", format!("{ws},{name}"));
    }

    fn create_workspace(&mut self, id: i64, name: &str, mon: &str, out: &mut Vec<String>) {
        let name = if name.is_empty() {
            id.to_string()
        } else {
            name.to_owned()
        };
        self.workspaces.push(FakeWorkspace {
            id,
            name: name.clone(),
            monitor: mon.to_owned(),
            last_window: None,
            previous: None,
            persistent: false,
        });
        push(out, "createworkspace", &name);
        push(out, "createworkspacev2", format!("{id},{name}"));
    }

    /// Destroy the empty workspaces nobody sees.
    fn sanity_check(&mut self, out: &mut Vec<String>) {
        let doomed: Vec<(i64, String)> = self
            .workspaces
            .iter()
            .filter(|w| {
                !w.persistent
                    && !self.is_visible(w.id)
                    && !self.windows.iter().any(|x| x.workspace == w.id)
            })
            .map(|w| (w.id, w.name.clone()))
            .collect();
        for (id, name) in doomed {
            self.workspaces.retain(|w| w.id != id);
            push(out, "destroyworkspace", &name);
            push(out, "destroyworkspacev2", format!("{id},{name}"));
        }
    }

    fn tiled_on(&self, ws: i64, except: u64) -> Vec<u64> {
        self.windows
            .iter()
            .filter(|w| {
                w.mapped && !w.hidden && !w.floating && w.workspace == ws && w.address != except
            })
            .map(|w| w.address)
            .collect()
    }

    /// Give a tiled window its place: the whole monitor, or half of the focused (else the
    /// last) tiled window on the workspace.
    fn tile_into(&mut self, a: u64, ws: i64) {
        let others = self.tiled_on(ws, a);
        let rect = if others.is_empty() {
            self.ws_rect(ws)
        } else {
            let target = self
                .focused_window
                .filter(|f| others.contains(f))
                .unwrap_or(others[others.len() - 1]);
            let (x, y, w, h) = self.tile_rect(target);
            if w >= h {
                let half = w / 2;
                self.set_tile_rect(target, (x, y, half, h));
                (x + half, y, w - half, h)
            } else {
                let half = h / 2;
                self.set_tile_rect(target, (x, y, w, half));
                (x, y + half, w, h - half)
            }
        };
        self.set_tile_rect(a, rect);
    }

    /// Take a tiled window out of its workspace's layout: a sibling takes its space.
    fn untile(&mut self, a: u64) {
        let Some(w) = self.window(a) else { return };
        if w.floating {
            return;
        }
        let ws = w.workspace;
        let (ax, ay, aw, ah) = self.tile_rect(a);
        let others = self.tiled_on(ws, a);
        if others.len() == 1 {
            let full = self.ws_rect(ws);
            self.set_tile_rect(others[0], full);
            return;
        }
        for b in others {
            let (bx, by, bw, bh) = self.tile_rect(b);
            let merged = if by == ay && bh == ah && (bx + bw == ax || ax + aw == bx) {
                Some((bx.min(ax), by, bw + aw, bh))
            } else if bx == ax && bw == aw && (by + bh == ay || ay + ah == by) {
                Some((bx, by.min(ay), bw, bh + ah))
            } else {
                None
            };
            if let Some(r) = merged {
                self.set_tile_rect(b, r);
                return;
            }
        }
    }

    fn set_fullscreen(&mut self, a: u64, mode: u8, out: &mut Vec<String>) {
        self.set_fullscreen_state(a, mode, mode, out);
    }

    fn set_fullscreen_state(&mut self, a: u64, internal: u8, client: u8, out: &mut Vec<String>) {
        let Some(w) = self.window(a) else { return };
        let (old, ws) = (w.fullscreen, w.workspace);
        if internal != 0 {
            let others: Vec<u64> = self
                .windows
                .iter()
                .filter(|o| o.workspace == ws && o.fullscreen != 0 && o.address != a)
                .map(|o| o.address)
                .collect();
            for o in others {
                self.set_fullscreen(o, 0, out);
            }
        }
        let monitor = self.ws_rect(ws);
        if old == 0 && internal != 0 {
            let rect = self.rect(a);
            if let Some(w) = self.window_mut(a) {
                w.saved_rect = Some(rect);
            }
            self.set_rect(a, monitor);
        } else if old != 0 && internal == 0 {
            let saved = self.window_mut(a).and_then(|w| w.saved_rect.take());
            if let Some(r) = saved {
                self.set_rect(a, r);
            }
        }
        if let Some(w) = self.window_mut(a) {
            w.fullscreen = internal;
            w.fullscreen_client = client;
        }
        if old != internal {
            push(out, "fullscreen", if internal != 0 { "1" } else { "0" });
        }
    }

    /// Move a window to a workspace (Hyprland's moveWindowToWorkspaceSafe).
    fn move_window_to(&mut self, a: u64, ws: i64, out: &mut Vec<String>) {
        let Some(w) = self.window(a) else { return };
        if w.workspace == ws {
            return;
        }
        let (fs, floating, old_ws) = (w.fullscreen, w.floating, w.workspace);
        if fs != 0 {
            self.set_fullscreen(a, 0, out);
        }
        let old_origin = self.ws_rect(old_ws);
        let new_origin = self.ws_rect(ws);
        if !floating {
            self.untile(a);
        }
        if let Some(w) = self.window_mut(a) {
            w.workspace = ws;
            if floating {
                w.at.0 += new_origin.0 - old_origin.0;
                w.at.1 += new_origin.1 - old_origin.1;
            }
        }
        if !floating {
            self.tile_into(a, ws);
        }
        let name = self.workspace_name(ws);
        let hex = format!("{a:x}");
        push(out, "movewindow", format!("{hex},{name}"));
        push(out, "movewindowv2", format!("{hex},{ws},{name}"));
        if fs != 0 {
            self.set_fullscreen(a, fs, out);
        }
    }

    fn remove_window(&mut self, a: u64, out: &mut Vec<String>) {
        let Some(w) = self.window(a).cloned() else {
            return;
        };
        let was_focused = self.focused_window == Some(a);
        self.untile(a);
        self.windows.retain(|x| x.address != a);
        self.focus_history.retain(|&h| h != a);
        for ws in &mut self.workspaces {
            if ws.last_window == Some(a) {
                ws.last_window = None;
            }
        }
        push(out, "closewindow", w.hex());
        if was_focused {
            let next = self.focus_history.iter().copied().find(|&h| {
                self.window(h)
                    .is_some_and(|x| x.mapped && !x.hidden && x.workspace == w.workspace)
            });
            match next {
                Some(n) => {
                    self.focused_window = None;
                    self.focus(Some(n), out);
                }
                None => self.focus(None, out),
            }
        }
        self.sanity_check(out);
    }

    fn close_window_into(&mut self, a: u64, force: bool, out: &mut Vec<String>) {
        if !force && self.window(a).is_some_and(|w| w.ignores_close) {
            return;
        }
        self.remove_window(a, out);
    }

    fn open_special(&mut self, mon: &str, id: i64, out: &mut Vec<String>) {
        let others: Vec<String> = self
            .monitors
            .iter()
            .filter(|m| m.name != mon && m.special_workspace == Some(id))
            .map(|m| m.name.clone())
            .collect();
        for other in others {
            if let Some(m) = self.monitor_mut(&other) {
                m.special_workspace = None;
            }
            push(out, "activespecial", format!(",{other}"));
            push(out, "activespecialv2", format!(",,{other}"));
        }
        if let Some(m) = self.monitor_mut(mon) {
            m.special_workspace = Some(id);
        }
        if let Some(w) = self.workspace_mut(id) {
            w.monitor = mon.to_owned();
        }
        let target = self.last_window_of(id).or_else(|| self.pick_focus_on(id));
        self.focus(target, out);
        let name = self.workspace_name(id);
        push(out, "activespecial", format!("{name},{mon}"));
        push(out, "activespecialv2", format!("{id},{name},{mon}"));
    }

    fn close_special(&mut self, mon: &str, out: &mut Vec<String>) {
        let Some(m) = self.monitor_mut(mon) else {
            return;
        };
        if m.special_workspace.take().is_none() {
            return;
        }
        let active = m.active_workspace;
        push(out, "activespecial", format!(",{mon}"));
        push(out, "activespecialv2", format!(",,{mon}"));
        let target = self.last_window_of(active);
        self.focus(target, out);
        self.sanity_check(out);
    }

    /// Focus a window as keyboard navigation does (Hyprland's switchToWindow).
    fn switch_to_window(&mut self, b: u64, out: &mut Vec<String>) {
        let Some(last) = self.focused_window else {
            self.focus(Some(b), out);
            return;
        };
        if last == b {
            return;
        }
        let (Some(lw), Some(bw)) = (self.window(last).cloned(), self.window(b).cloned()) else {
            return;
        };
        if lw.workspace == bw.workspace && lw.fullscreen != 0 {
            let mode = lw.fullscreen;
            if !bw.pinned {
                self.set_fullscreen(last, 0, out);
            }
            self.focus(Some(b), out);
            if !bw.pinned {
                self.set_fullscreen(b, mode, out);
            }
        } else {
            self.focus(Some(b), out);
            let (lm, bm) = (
                self.monitor_name_of_workspace(lw.workspace),
                self.monitor_name_of_workspace(bw.workspace),
            );
            if lm != bm {
                self.set_active_monitor(&bm, out);
            }
        }
    }

    fn try_move_focus_to_monitor(&mut self, mon: &str, out: &mut Vec<String>) -> bool {
        if self.focused_monitor == mon {
            return false;
        }
        let Some(m) = self.monitor(mon).cloned() else {
            return false;
        };
        if let Some(current) = self.focused_monitor().map(|m| m.active_workspace) {
            self.remember_previous(m.active_workspace, current);
        }
        let ws = m.special_workspace.unwrap_or(m.active_workspace);
        let target = self.last_window_of(ws);
        self.focus(target, out);
        self.set_active_monitor(mon, out);
        true
    }

    /// The window next to `src` in direction `dir` (Hyprland's getWindowInDirection):
    /// tiled windows touching the edge, the most recently focused first; for a floating
    /// window, the nearest window whose centre lies that way.
    fn window_in_direction_from(
        &self,
        src: Rect,
        src_ws: i64,
        dir: char,
        ignore: u64,
        floating: bool,
    ) -> Option<u64> {
        let src_mon = self.monitor_name_of_workspace(src_ws);
        let ws_has_fullscreen = self
            .windows
            .iter()
            .any(|w| w.workspace == src_ws && w.fullscreen != 0);
        let candidates = self.windows.iter().filter(|w| {
            w.address != ignore
                && w.mapped
                && !w.hidden
                && self.is_visible(w.workspace)
                && (floating || !w.floating || w.fullscreen != 0)
                && !(self.monitor_name_of_workspace(w.workspace) == src_mon
                    && w.workspace != src_ws)
                && !(ws_has_fullscreen && w.fullscreen == 0)
        });
        let (sx, sy, sw, sh) = src;
        if !floating {
            return candidates
                .filter(|w| {
                    let (x, y, ww, wh) = w.rect();
                    let shared = match dir {
                        'l' if sticks(sx, x + ww) => overlap(sy, sy + sh, y, y + wh),
                        'r' if sticks(sx + sw, x) => overlap(sy, sy + sh, y, y + wh),
                        'u' | 't' if sticks(sy, y + wh) => overlap(sx, sx + sw, x, x + ww),
                        'd' | 'b' if sticks(sy + sh, y) => overlap(sx, sx + sw, x, x + ww),
                        _ => 0,
                    };
                    shared > 0
                })
                .min_by_key(|w| {
                    let id = self.focus_history_id(w.address);
                    if id < 0 { i64::MAX } else { id }
                })
                .map(|w| w.address);
        }
        let (cx, cy) = (sx + sw / 2, sy + sh / 2);
        candidates
            .filter_map(|w| {
                let (x, y, ww, wh) = w.rect();
                let (dx, dy) = (x + ww / 2 - cx, y + wh / 2 - cy);
                let that_way = match dir {
                    'l' => dx < 0 && dy.abs() <= -dx,
                    'r' => dx > 0 && dy.abs() <= dx,
                    'u' | 't' => dy < 0 && dx.abs() <= -dy,
                    _ => dy > 0 && dx.abs() <= dy,
                };
                that_way.then_some((i64::from(dx).pow(2) + i64::from(dy).pow(2), w.address))
            })
            .min()
            .map(|(_, a)| a)
    }

    fn window_in_direction(&self, a: u64, dir: char) -> Option<u64> {
        let w = self.window(a)?;
        let src = if w.fullscreen != 0 {
            self.ws_rect(w.workspace)
        } else {
            w.rect()
        };
        self.window_in_direction_from(src, w.workspace, dir, a, w.floating)
    }

    // --- dispatchers

    /// Run a dispatcher as `hyprctl dispatch name args` does: the events, or the reply text
    /// when it is not `ok`. A test calls it through [`FakeHyprland::change`] to play what
    /// the person does by hand.
    pub fn dispatch(&mut self, name: &str, args: &str) -> Result<Vec<String>, String> {
        if !DISPATCHERS.contains(&name) {
            return Err("Invalid dispatcher".into());
        }
        self.run_dispatcher(name, args).map_err(|f| match f {
            Failure::Error(e) => e,
            Failure::Exception(what) => format!("Err: {what}"),
        })
    }

    fn run_dispatcher(&mut self, name: &str, arg: &str) -> Result<Vec<String>, Failure> {
        let mut out = vec![];
        self.dispatch_into(name, arg, &mut out)?;
        Ok(out)
    }

    fn dispatch_into(&mut self, name: &str, arg: &str, out: &mut Vec<String>) -> Done {
        match name {
            "exec" => self.exec(arg, true, out),
            "execr" => self.exec(arg, false, out),
            "killactive" => {
                if let Some(a) = self.focused_window {
                    self.close_window_into(a, false, out);
                }
            }
            "forcekillactive" => {
                let a = self.focused_window.ok_or("killActive: no window found")?;
                self.close_window_into(a, true, out);
            }
            "closewindow" => {
                let a = self
                    .find_window(arg)
                    .ok_or("closeWindow: no window found")?;
                self.close_window_into(a, false, out);
            }
            "killwindow" => {
                let a = self.find_window(arg).ok_or("killWindow: no window found")?;
                self.close_window_into(a, true, out);
            }
            "workspace" => self.workspace_cmd(arg, out)?,
            "movetoworkspace" => self.move_to_workspace_cmd(arg, false, out)?,
            "movetoworkspacesilent" => self.move_to_workspace_cmd(arg, true, out)?,
            "togglefloating" => self.floating_cmd(arg, None, out)?,
            "setfloating" => self.floating_cmd(arg, Some(true), out)?,
            "settiled" => self.floating_cmd(arg, Some(false), out)?,
            "fullscreen" => self.fullscreen_cmd(arg, out)?,
            "fullscreenstate" => self.fullscreen_state_cmd(arg, out)?,
            "movefocus" => self.move_focus_cmd(arg, out)?,
            "focuswindow" | "focuswindowbyclass" => self.focus_window_cmd(arg, out)?,
            "focusmonitor" => {
                if let Some(m) = self.monitor_from_string(arg) {
                    self.try_move_focus_to_monitor(&m, out);
                }
            }
            "movewindow" => self.move_window_cmd(arg, out)?,
            "resizeactive" => {
                let a = self.focused_window.ok_or("No window found")?;
                self.resize(a, arg)?;
            }
            "moveactive" => {
                let a = self.focused_window.ok_or("No window found")?;
                self.reposition(a, arg)?;
            }
            "resizewindowpixel" => {
                let (cmd, spec) = arg.split_once(',').unwrap_or((arg, arg));
                let a = self.find_window(spec).ok_or("resizeWindow: no window")?;
                self.resize(a, cmd)?;
            }
            "movewindowpixel" => {
                let (cmd, spec) = arg.split_once(',').unwrap_or((arg, arg));
                let a = self.find_window(spec).ok_or("moveWindow: no window")?;
                self.reposition(a, cmd)?;
            }
            "centerwindow" => {
                let a = self
                    .focused_window()
                    .filter(|w| w.floating && w.fullscreen == 0)
                    .map(|w| w.address)
                    .ok_or("No floating window found")?;
                let (mx, my, mw, mh) = self.ws_rect(self.window(a).map_or(0, |w| w.workspace));
                if let Some(w) = self.window_mut(a) {
                    w.at = (mx + mw / 2 - w.size.0 / 2, my + mh / 2 - w.size.1 / 2);
                }
            }
            "pin" => self.pin_cmd(arg, out)?,
            "togglegroup" => {
                let a = self.focused_window.ok_or("Window not found")?;
                if self.window(a).is_some_and(|w| w.fullscreen != 0) {
                    self.set_fullscreen(a, 0, out);
                }
                let members = self
                    .window(a)
                    .map(|w| w.grouped.clone())
                    .unwrap_or_default();
                if members.is_empty() {
                    if let Some(w) = self.window_mut(a) {
                        w.grouped = vec![a];
                    }
                    push(out, "togglegroup", format!("1,{a:x}"));
                } else {
                    for m in &members {
                        if let Some(w) = self.window_mut(*m) {
                            w.grouped.clear();
                            w.hidden = false;
                        }
                    }
                    let list: Vec<String> = members.iter().map(|m| format!("{m:x}")).collect();
                    push(out, "togglegroup", format!("0,{}", list.join(",")));
                }
            }
            "cyclenext" => self.cycle_next_cmd(arg, out),
            "dpms" => {
                let enable = arg.starts_with("on");
                let toggle = arg.starts_with("toggle");
                let port = arg.split_once(' ').map(|(_, p)| p.to_owned());
                for m in self.monitors.iter_mut().filter(|m| !m.disabled) {
                    if port.as_ref().is_some_and(|p| *p != m.name) {
                        continue;
                    }
                    m.dpms = if toggle { !m.dpms } else { enable };
                }
            }
            "pseudo" => {
                let a = if arg != "active" && arg.len() > 1 {
                    self.find_window(arg)
                } else {
                    self.focused_window
                }
                .ok_or("Window not found")?;
                if let Some(w) = self.window_mut(a) {
                    w.pseudo = !w.pseudo;
                }
            }
            "renameworkspace" => {
                let (id_str, new) = match arg.split_once(' ') {
                    Some((id, name)) => (id, name),
                    None => (arg, ""),
                };
                let id = stoi(id_str).ok_or_else(|| {
                    format!(
                        "Invalid arg in renameWorkspace, expected numeric id only or a numeric id \
                         and string name. \"{arg}\": \"stoi\""
                    )
                })?;
                let ws = self.workspace_mut(id).ok_or("No such workspace")?;
                ws.name = if new.is_empty() {
                    id.to_string()
                } else {
                    new.to_owned()
                };
                let name = ws.name.clone();
                push(out, "renameworkspace", format!("{id},{name}"));
            }
            "togglespecialworkspace" => {
                let spec = format!("special:{arg}");
                let (id, name) = self
                    .resolve_workspace(&spec)
                    .map_err(Failure::Exception)?
                    .filter(|(id, _)| is_special(*id))
                    .ok_or("Invalid workspace passed to special")?;
                let mon = self.focused_monitor.clone();
                if self.monitor(&mon).and_then(|m| m.special_workspace) == Some(id) {
                    self.close_special(&mon, out);
                } else {
                    if self.workspace(id).is_none() {
                        self.create_workspace(id, &name, &mon, out);
                    }
                    self.open_special(&mon, id, out);
                }
            }
            "submap" => {
                if arg == "reset" || arg.is_empty() {
                    push(out, "submap", "");
                } else {
                    return Err(format!(
                        "Cannot set submap {arg}, submap doesn't exist (wasn't registered!)"
                    )
                    .into());
                }
            }
            "event" => push(out, "custom", arg),
            _ => {}
        }
        Ok(())
    }

    fn exec(&mut self, arg: &str, rules: bool, out: &mut Vec<String>) {
        let mut cmd = arg.trim();
        let mut opts = OpenOptions::default();
        if rules
            && cmd.starts_with('[')
            && let Some(end) = cmd.find(']')
        {
            for rule in cmd[1..end].split(';') {
                let words: Vec<&str> = rule.split_whitespace().collect();
                match words.first().copied() {
                    Some("workspace") => {
                        let mut rest = &words[1..];
                        if rest.last() == Some(&"silent") {
                            opts.silent = true;
                            rest = &rest[..rest.len() - 1];
                        }
                        opts.workspace = Some(rest.join(" "));
                    }
                    Some("float") => opts.floating = Some(true),
                    Some("tile") => opts.floating = Some(false),
                    Some("fullscreen") => opts.fullscreen = 2,
                    Some("maximize") => opts.fullscreen = 1,
                    Some("pin") => opts.pinned = true,
                    _ => {}
                }
            }
            cmd = &cmd[end + 1..];
        }
        let Some(program) = program_of(cmd) else {
            return;
        };
        if program == "true" {
            return;
        }
        self.open_window_with(&program, &program, &opts, out);
    }

    /// A new window of this class and title opens on the focused workspace and takes the
    /// focus, as an application started by hand does. Its address, and the events.
    pub fn open_window(&mut self, class: &str, title: &str) -> (u64, Vec<String>) {
        let mut out = vec![];
        let a = self.open_window_with(class, title, &OpenOptions::default(), &mut out);
        (a, out)
    }

    fn open_window_with(
        &mut self,
        class: &str,
        title: &str,
        opts: &OpenOptions,
        out: &mut Vec<String>,
    ) -> u64 {
        let mon = self.focused_monitor.clone();
        let current = self
            .monitor(&mon)
            .map_or(1, |m| m.special_workspace.unwrap_or(m.active_workspace));
        let ws = match opts
            .workspace
            .as_deref()
            .and_then(|spec| self.resolve_workspace(spec).ok().flatten())
        {
            Some((id, name)) => {
                if self.workspace(id).is_none() {
                    self.create_workspace(id, &name, &mon, out);
                }
                id
            }
            None => current,
        };
        let address = self.next_address;
        self.next_address += 0x7d40;
        let pid = self.next_pid;
        self.next_pid += 1;
        let mut window = FakeWindow::new(address, class, title, ws, (0, 0, 0, 0), pid);
        window.floating = opts.floating.unwrap_or(false);
        self.windows.push(window);
        if opts.floating == Some(true) {
            let (mx, my, mw, mh) = self.ws_rect(ws);
            self.set_rect(address, (mx + mw / 4, my + mh / 4, mw / 2, mh / 2));
        } else {
            self.tile_into(address, ws);
        }
        let ws_name = self.workspace_name(ws);
        push(
            out,
            "openwindow",
            format!("{address:x},{ws_name},{class},{title}"),
        );
        if self.is_visible(ws) {
            self.focus(Some(address), out);
        } else if !opts.silent {
            let owner = self.monitor_name_of_workspace(ws);
            if let Some(w) = self.workspace_mut(ws) {
                w.last_window = Some(address);
            }
            if let Some(from) = self.monitor(&owner).map(|m| m.active_workspace) {
                self.remember_previous(ws, from);
            }
            self.set_active_monitor(&owner, out);
            self.change_workspace(&owner, ws, true, out);
        }
        if opts.fullscreen != 0 {
            self.set_fullscreen(address, opts.fullscreen, out);
        }
        if opts.pinned
            && let Some(w) = self.window_mut(address)
            && w.floating
        {
            w.pinned = true;
        }
        self.sanity_check(out);
        address
    }

    /// The window's title changes (the application set it). The events.
    pub fn set_title(&mut self, address: u64, title: &str) -> Vec<String> {
        let mut out = vec![];
        let Some(w) = self.window_mut(address) else {
            return out;
        };
        w.title = title.to_owned();
        let class = w.class.clone();
        push(&mut out, "windowtitle", format!("{address:x}"));
        push(&mut out, "windowtitlev2", format!("{address:x},{title}"));
        if self.focused_window == Some(address) {
            push(&mut out, "activewindow", format!("{class},{title}"));
            push(&mut out, "activewindowv2", format!("{address:x}"));
        }
        out
    }

    /// The window goes away (the application quit). The events.
    pub fn close_window(&mut self, address: u64) -> Vec<String> {
        let mut out = vec![];
        self.remove_window(address, &mut out);
        out
    }

    fn workspace_cmd(&mut self, arg: &str, out: &mut Vec<String>) -> Done {
        let mon = self.focused_monitor.clone();
        let cur = self
            .monitor(&mon)
            .map(|m| m.active_workspace)
            .ok_or("Last monitor not found")?;
        let explicit_previous = arg.contains("previous");
        let prev = self.workspace(cur).and_then(|w| w.previous.clone());
        let (target, target_name) = if arg.starts_with("previous") {
            match &prev {
                Some((id, name)) if *id != cur => match self.workspace(*id) {
                    Some(w) => (w.id, w.name.clone()),
                    None => (*id, name.clone()),
                },
                _ => return Ok(()),
            }
        } else {
            self.resolve_workspace(arg)
                .map_err(Failure::Exception)?
                .ok_or("Error in changeworkspace, invalid value")?
        };
        let is_current = target == cur;
        if is_current && (!(self.workspace_back_and_forth || explicit_previous) || prev.is_none()) {
            return Err("Previous workspace doesn't exist".into());
        }
        let (target, target_name) = match (is_current, prev) {
            (true, Some(p)) => p,
            _ => (target, target_name),
        };
        if self.workspace(target).is_none() {
            self.create_workspace(target, &target_name, &mon, out);
        }
        if is_special(target) {
            if !is_current {
                self.open_special(&mon, target, out);
            }
            return Ok(());
        }
        let owner = self.monitor_name_of_workspace(target);
        self.remember_previous(target, cur);
        self.set_active_monitor(&owner, out);
        self.change_workspace(&owner, target, true, out);
        if owner != mon
            && let Some(last) = self.last_window_of(target)
        {
            self.focus(Some(last), out);
        }
        self.sanity_check(out);
        Ok(())
    }

    fn move_to_workspace_cmd(&mut self, arg: &str, silent: bool, out: &mut Vec<String>) -> Done {
        let (spec, window) = match arg.rfind(',') {
            Some(i) => (&arg[..i], self.find_window(&arg[i + 1..])),
            None => (arg, self.focused_window),
        };
        let a = window.ok_or("Window not found")?;
        let (target, target_name) = self
            .resolve_workspace(spec)
            .map_err(Failure::Exception)?
            .ok_or(if silent {
                "Error in moveActiveToWorkspaceSilent, invalid value"
            } else {
                "Invalid workspace in moveActiveToWorkspace"
            })?;
        let from = self.window(a).map_or(0, |w| w.workspace);
        if target == from {
            if silent {
                return Ok(());
            }
            return Err("Not moving to workspace because it didn't change.".into());
        }
        let window_monitor = self.monitor_name_of_workspace(from);
        if silent {
            let (x, y, w, h) = self.rect(a);
            let middle = (x + w / 2, y + h / 2);
            let was_focused = self.focused_window == Some(a);
            if self.workspace(target).is_none() {
                self.create_workspace(target, &target_name, &window_monitor, out);
            }
            self.move_window_to(a, target, out);
            if was_focused {
                let under = self
                    .windows
                    .iter()
                    .filter(|w| w.mapped && !w.hidden && self.is_visible(w.workspace))
                    .filter(|w| {
                        let (x, y, ww, wh) = w.rect();
                        (x..x + ww).contains(&middle.0) && (y..y + wh).contains(&middle.1)
                    })
                    .max_by_key(|w| w.floating)
                    .map(|w| w.address);
                self.focus(under, out);
            }
        } else {
            let monitor = if self.workspace(target).is_some() {
                self.move_window_to(a, target, out);
                let m = self.monitor_name_of_workspace(target);
                self.set_active_monitor(&m, out);
                m
            } else {
                self.create_workspace(target, &target_name, &window_monitor, out);
                self.move_window_to(a, target, out);
                window_monitor
            };
            let first = self
                .windows
                .iter()
                .find(|w| w.mapped && w.workspace == from)
                .map(|w| w.address);
            if let Some(ws) = self.workspace_mut(from) {
                ws.last_window = first;
            }
            if is_special(target) {
                self.open_special(&monitor, target, out);
            } else {
                self.remember_previous(target, from);
                self.change_workspace(&monitor, target, true, out);
            }
            self.focus(Some(a), out);
        }
        self.sanity_check(out);
        Ok(())
    }

    fn floating_cmd(&mut self, arg: &str, want: Option<bool>, out: &mut Vec<String>) -> Done {
        let a = if arg != "active" && arg.len() > 1 {
            self.find_window(arg)
        } else {
            self.focused_window
        }
        .ok_or("Window not found")?;
        let Some(w) = self.window(a) else {
            return Err("Window not found".into());
        };
        let floating = want.unwrap_or(!w.floating);
        if want.is_some() && floating == w.floating {
            return Ok(());
        }
        if w.fullscreen != 0 {
            self.set_fullscreen(a, 0, out);
        }
        let ws = self.window(a).map_or(0, |w| w.workspace);
        if floating {
            self.untile(a);
            let (mx, my, mw, mh) = self.ws_rect(ws);
            if let Some(w) = self.window_mut(a) {
                w.floating = true;
                w.pinned = false;
                w.size = (mw / 2, mh / 2);
                w.at = (mx + mw / 4, my + mh / 4);
            }
        } else {
            if let Some(w) = self.window_mut(a) {
                w.floating = false;
                w.pinned = false;
            }
            self.tile_into(a, ws);
        }
        push(
            out,
            "changefloatingmode",
            format!("{a:x},{}", u8::from(floating)),
        );
        Ok(())
    }

    fn fullscreen_cmd(&mut self, arg: &str, out: &mut Vec<String>) -> Done {
        let a = self.focused_window.ok_or("Window not found")?;
        let mut words = arg.split_whitespace();
        let mode: u8 = if words.next() == Some("1") { 1 } else { 2 };
        let current = self.window(a).map_or(0, |w| w.fullscreen);
        let effective = if current & 2 != 0 { 2 } else { current & 1 };
        let target = match words.next() {
            Some("set") => mode,
            Some("unset") => 0,
            _ if effective == mode => 0,
            _ => mode,
        };
        self.set_fullscreen(a, target, out);
        Ok(())
    }

    fn fullscreen_state_cmd(&mut self, arg: &str, out: &mut Vec<String>) -> Done {
        let a = self.focused_window.ok_or("Window not found")?;
        let mut words = arg.split_whitespace();
        let internal = words.next().and_then(stoi).unwrap_or(-1);
        let client = words.next().and_then(stoi).unwrap_or(-1);
        let w = self.window(a).cloned().ok_or("Window not found")?;
        let (ci, cc) = (i64::from(w.fullscreen), i64::from(w.fullscreen_client));
        let ni = if internal != -1 { internal } else { ci };
        let nc = if client != -1 { client } else { cc };
        let (ni, nc) = if internal != -1 && client != -1 && ci == ni && cc == nc {
            (0, 0)
        } else if internal != -1 && client == -1 && ci == ni {
            (0, cc)
        } else if internal == -1 && client != -1 && cc == nc {
            (ci, 0)
        } else {
            (ni, nc)
        };
        self.set_fullscreen_state(a, ni.clamp(0, 3) as u8, nc.clamp(0, 3) as u8, out);
        Ok(())
    }

    fn move_focus_cmd(&mut self, arg: &str, out: &mut Vec<String>) -> Done {
        let c = arg.chars().next().unwrap_or('\0');
        if !is_direction(arg) {
            return Err(format!(
                "Cannot move focus in direction {c}, unsupported direction. Supported: l,r,u/t,d/b"
            )
            .into());
        }
        let Some(a) = self.focused_window else {
            if let Some(m) = self.monitor_in_direction(&self.focused_monitor.clone(), c) {
                self.try_move_focus_to_monitor(&m, out);
            }
            return Ok(());
        };
        if let Some(b) = self.window_in_direction(a, c) {
            self.switch_to_window(b, out);
            return Ok(());
        }
        if let Some(m) = self.monitor_in_direction(&self.focused_monitor.clone(), c)
            && self.try_move_focus_to_monitor(&m, out)
        {
            return Ok(());
        }
        let ws = self.window(a).map_or(0, |w| w.workspace);
        let (mx, my, mw, mh) = self.ws_rect(ws);
        let (ax, ay, aw, ah) = self.rect(a);
        let back = if matches!(c, 'l' | 'r') {
            sticks(ax, mx) && sticks(aw, mw)
        } else {
            sticks(ay, my) && sticks(ah, mh)
        };
        if back {
            return Err("move does not make sense, would return back".into());
        }
        let edge = match c {
            'l' => (mx + mw, my, 1, mh),
            'r' => (mx - 1, my, 1, mh),
            'u' | 't' => (mx, my + mh, mw, 1),
            _ => (mx, my - 1, mw, 1),
        };
        let floating = self.window(a).is_some_and(|w| w.floating);
        if let Some(b) = self.window_in_direction_from(edge, ws, c, a, floating) {
            self.switch_to_window(b, out);
        }
        Ok(())
    }

    fn focus_window_cmd(&mut self, arg: &str, out: &mut Vec<String>) -> Done {
        let a = self.find_window(arg).ok_or("No such window found")?;
        let ws = self.window(a).map_or(0, |w| w.workspace);
        let (active, special) = self
            .focused_monitor()
            .map_or((0, None), |m| (m.active_workspace, m.special_workspace));
        if active != ws && special != Some(ws) {
            let name = self.config_name(ws);
            let mut ignored = vec![];
            let _ = self.workspace_cmd(&name, &mut ignored);
            out.extend(ignored);
        }
        let fullscreen_other = self
            .windows
            .iter()
            .find(|w| w.workspace == ws && w.fullscreen != 0 && w.address != a)
            .map(|w| (w.address, w.fullscreen));
        match fullscreen_other {
            Some((other, mode)) if self.window(a).is_some_and(|w| !w.floating && !w.pinned) => {
                self.set_fullscreen(other, 0, out);
                self.focus(Some(a), out);
                self.set_fullscreen(a, mode, out);
            }
            _ => self.focus(Some(a), out),
        }
        Ok(())
    }

    fn move_window_cmd(&mut self, arg: &str, out: &mut Vec<String>) -> Done {
        let first = arg.chars().next().unwrap_or('\0');
        let silent = arg.ends_with(" silent");
        let args = if silent {
            &arg[..arg.len() - " silent".len()]
        } else {
            arg
        };
        if let Some(name) = args.strip_prefix("mon:") {
            let mon = self
                .monitor_from_string(name)
                .ok_or_else(|| format!("Monitor {name} not found"))?;
            let ws = self.monitor(&mon).map_or(0, |m| m.active_workspace);
            let target = self.config_name(ws);
            let _ = self.move_to_workspace_cmd(&target, silent, out);
            return Ok(());
        }
        if !is_direction(args) {
            return Err(format!(
                "Cannot move window in direction {first}, unsupported direction. Supported: l,r,u/t,d/b"
            )
            .into());
        }
        let dir = first;
        let a = self.focused_window.ok_or("Window to move not found")?;
        let w = self.window(a).cloned().ok_or("Window to move not found")?;
        if w.fullscreen != 0 {
            return Err("Can't move fullscreen window".into());
        }
        if w.floating {
            let (mx, my, mw, mh) = self.ws_rect(w.workspace);
            if let Some(win) = self.window_mut(a) {
                match dir {
                    'l' => win.at.0 = mx,
                    'r' => win.at.0 = mx + mw - win.size.0,
                    'u' | 't' => win.at.1 = my,
                    _ => win.at.1 = my + mh - win.size.1,
                }
            }
            return Ok(());
        }
        if let Some(b) = self.window_in_direction(a, dir) {
            let b_ws = self.window(b).map_or(0, |x| x.workspace);
            if b_ws == w.workspace {
                let (ra, rb) = (self.tile_rect(a), self.tile_rect(b));
                self.set_tile_rect(a, rb);
                self.set_tile_rect(b, ra);
            } else {
                let target = self.config_name(b_ws);
                let _ = self.move_to_workspace_cmd(&target, silent, out);
            }
            return Ok(());
        }
        let mon = self.monitor_name_of_workspace(w.workspace);
        let next = self
            .monitor_in_direction(&mon, dir)
            .ok_or("Nowhere to move active window to")?;
        let ws = self.monitor(&next).map_or(0, |m| m.active_workspace);
        let target = self.config_name(ws);
        let _ = self.move_to_workspace_cmd(&target, silent, out);
        Ok(())
    }

    /// Hyprland's resizeparams: `exact W H`, or a delta `dx dy`; `%` of the window (delta)
    /// or of the monitor (exact). No space: no change.
    fn vector_args(&self, args: &str, relative_to: (i32, i32)) -> (i32, i32) {
        if !args.contains(' ') && !args.contains('\t') {
            return relative_to;
        }
        let words: Vec<&str> = args.split_whitespace().collect();
        let (mut x, mut y) = (
            words.first().copied().unwrap_or(""),
            words.get(1).copied().unwrap_or(""),
        );
        let exact = x == "exact";
        if exact {
            x = words.get(1).copied().unwrap_or("");
            y = words.get(2).copied().unwrap_or("");
        }
        let (x_pct, y_pct) = (x.contains('%'), y.contains('%'));
        let x = x.trim_end_matches('%');
        let y = y.trim_end_matches('%');
        if !is_number(x) || !is_number(y) {
            return relative_to;
        }
        let (xv, yv) = (stoi(x).unwrap_or(0) as f64, stoi(y).unwrap_or(0) as f64);
        let (mw, mh) = self
            .focused_monitor()
            .map_or((1920, 1080), |m| m.logical_size());
        let (rx, ry) = (f64::from(relative_to.0), f64::from(relative_to.1));
        if exact {
            (
                if x_pct { xv * 0.01 * f64::from(mw) } else { xv } as i32,
                if y_pct { yv * 0.01 * f64::from(mh) } else { yv } as i32,
            )
        } else {
            (
                if x_pct { xv * 0.01 * rx + rx } else { xv + rx } as i32,
                if y_pct { yv * 0.01 * ry + ry } else { yv + ry } as i32,
            )
        }
    }

    fn resize(&mut self, a: u64, args: &str) -> Done {
        let w = self.window(a).cloned().ok_or("No window found")?;
        if w.fullscreen != 0 {
            return Err("Window is fullscreen".into());
        }
        let size = self.vector_args(args, w.size);
        if size.0 < 1 || size.1 < 1 {
            return Err("Invalid size provided".into());
        }
        if let Some(w) = self.window_mut(a) {
            w.size = size;
        }
        Ok(())
    }

    fn reposition(&mut self, a: u64, args: &str) -> Done {
        let w = self.window(a).cloned().ok_or("No window found")?;
        if w.fullscreen != 0 {
            return Err("Window is fullscreen".into());
        }
        let at = self.vector_args(args, w.at);
        if let Some(w) = self.window_mut(a) {
            w.at = at;
        }
        Ok(())
    }

    fn pin_cmd(&mut self, arg: &str, out: &mut Vec<String>) -> Done {
        let a = if arg != "active" && arg.len() > 1 {
            self.find_window(arg)
        } else {
            self.focused_window
        }
        .ok_or("pin: window not found")?;
        let w = self.window(a).cloned().ok_or("pin: window not found")?;
        if !w.floating || w.fullscreen != 0 {
            return Err("Window does not qualify to be pinned".into());
        }
        let active = self
            .monitor_of_workspace(w.workspace)
            .map(|m| m.active_workspace);
        if let Some(win) = self.window_mut(a) {
            win.pinned = !win.pinned;
            if let Some(ws) = active {
                win.workspace = ws;
            }
        }
        push(out, "pin", format!("{a:x},{}", u8::from(!w.pinned)));
        Ok(())
    }

    fn cycle_next_cmd(&mut self, arg: &str, out: &mut Vec<String>) {
        let Some(current) = self.focused_window else {
            let ws = self.focused_monitor().map_or(0, |m| m.active_workspace);
            if let Some(first) = self
                .windows
                .iter()
                .find(|w| w.mapped && !w.hidden && w.workspace == ws)
                .map(|w| w.address)
            {
                self.switch_to_window(first, out);
            }
            return;
        };
        let words: Vec<&str> = arg.split_whitespace().collect();
        let has = |names: &[&str]| words.iter().any(|w| names.contains(w));
        let float_filter = if has(&["tile", "tiled"]) {
            Some(false)
        } else if has(&["float", "floating"]) {
            Some(true)
        } else {
            None
        };
        let visible = has(&["visible", "v"]);
        let prev = has(&["prev", "p", "last", "l"]);
        let hist = has(&["hist", "h"]);
        let ws = self.window(current).map_or(0, |w| w.workspace);
        let eligible = |w: &FakeWindow| {
            w.address != current
                && w.mapped
                && !w.hidden
                && (if visible {
                    self.is_visible(w.workspace)
                } else {
                    w.workspace == ws
                })
                && float_filter.is_none_or(|f| w.floating == f)
        };
        let next = if hist {
            self.focus_history
                .iter()
                .filter_map(|&h| self.window(h))
                .find(|w| eligible(w))
                .map(|w| w.address)
        } else {
            let n = self.windows.len();
            let start = self
                .windows
                .iter()
                .position(|w| w.address == current)
                .unwrap_or(0);
            (1..n)
                .map(|i| {
                    if prev {
                        (start + n - i) % n
                    } else {
                        (start + i) % n
                    }
                })
                .map(|i| &self.windows[i])
                .find(|w| eligible(w))
                .map(|w| w.address)
        };
        if let Some(next) = next {
            self.switch_to_window(next, out);
        }
    }

    /// `switchxkblayout <device> <cmd>`: the events, or the reply text when not `ok`.
    pub fn switch_layout(&mut self, device: &str, cmd: &str) -> Result<Vec<String>, String> {
        let mut out = vec![];
        match device {
            "main" | "active" | "current" => {
                let i = self
                    .keyboards
                    .iter()
                    .position(|k| k.main)
                    .ok_or("no device")?;
                Self::update_keyboard(&mut self.keyboards[i], cmd, &mut out)?;
            }
            "all" => {
                let mut errors = String::new();
                for k in &mut self.keyboards {
                    if let Err(e) = Self::update_keyboard(k, cmd, &mut out) {
                        errors += &e;
                        errors.push('\n');
                    }
                }
                if !errors.is_empty() {
                    return Err(errors);
                }
            }
            name => {
                let internal = name.replace(' ', "-").to_lowercase();
                let k = self
                    .keyboards
                    .iter_mut()
                    .find(|k| k.name == internal)
                    .ok_or("device not found")?;
                Self::update_keyboard(k, cmd, &mut out)?;
            }
        }
        Ok(out)
    }

    fn update_keyboard(
        k: &mut FakeKeyboard,
        cmd: &str,
        out: &mut Vec<String>,
    ) -> Result<(), String> {
        let n = k.layouts.len().max(1);
        let new = match cmd {
            "next" => (k.active + 1) % n,
            "prev" => (k.active + n - 1) % n,
            _ => {
                let i = stoi(cmd).ok_or("invalid arg 2")?;
                if i < 0 || i as usize > n - 1 {
                    return Err(format!("layout idx out of range of {n}"));
                }
                i as usize
            }
        };
        if new != k.active {
            k.active = new;
            let layout = k.layouts.get(new).cloned().unwrap_or_default();
            push(out, "activelayout", format!("{},{layout}", k.name));
        }
        Ok(())
    }
}

/// A small regex matcher for window specs: full matches only (as Hyprland's RE2::FullMatch).
mod mini_re {
    #[derive(Debug, Clone)]
    enum Node {
        Lit(char),
        Any,
        Set(Vec<(char, char)>, bool),
        Start,
        End,
        Alt(Vec<Vec<Node>>),
        Rep(Box<Node>, usize, Option<usize>),
    }

    /// Whether `pattern` matches the whole of `text`; false for a pattern it cannot parse.
    pub fn full_match(pattern: &str, text: &str) -> bool {
        let (pattern, icase) = match pattern.strip_prefix("(?i)") {
            Some(p) => (p, true),
            None => (pattern, false),
        };
        let p: Vec<char> = pattern.chars().collect();
        let mut pos = 0;
        let Ok(alts) = parse_alt(&p, &mut pos, 0) else {
            return false;
        };
        if pos != p.len() {
            return false;
        }
        let text: Vec<char> = text.chars().collect();
        let m = Matcher { text: &text, icase };
        let len = text.len();
        m.node(&Node::Alt(alts), 0, &|end| end == len)
    }

    fn parse_alt(p: &[char], pos: &mut usize, depth: usize) -> Result<Vec<Vec<Node>>, ()> {
        let mut alts = vec![vec![]];
        while *pos < p.len() {
            match p[*pos] {
                '|' => {
                    *pos += 1;
                    alts.push(vec![]);
                }
                ')' => {
                    return if depth == 0 { Err(()) } else { Ok(alts) };
                }
                _ => {
                    let atom = parse_atom(p, pos, depth)?;
                    let atom = parse_quantifier(p, pos, atom)?;
                    if let Some(seq) = alts.last_mut() {
                        seq.push(atom);
                    }
                }
            }
        }
        if depth > 0 { Err(()) } else { Ok(alts) }
    }

    fn class(c: char) -> Option<(Vec<(char, char)>, bool)> {
        let digits = vec![('0', '9')];
        let word = vec![('a', 'z'), ('A', 'Z'), ('0', '9'), ('_', '_')];
        let space = vec![(' ', ' '), ('\t', '\r')];
        Some(match c {
            'd' => (digits, false),
            'D' => (digits, true),
            'w' => (word, false),
            'W' => (word, true),
            's' => (space, false),
            'S' => (space, true),
            _ => return None,
        })
    }

    fn escaped(c: char) -> Result<char, ()> {
        Ok(match c {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            'f' => '\u{c}',
            'v' => '\u{b}',
            c if c.is_ascii_alphanumeric() => return Err(()),
            c => c,
        })
    }

    fn parse_atom(p: &[char], pos: &mut usize, depth: usize) -> Result<Node, ()> {
        let c = p[*pos];
        *pos += 1;
        Ok(match c {
            '.' => Node::Any,
            '^' => Node::Start,
            '$' => Node::End,
            '(' => {
                if p.get(*pos) == Some(&'?') {
                    if p.get(*pos + 1) == Some(&':') {
                        *pos += 2;
                    } else {
                        return Err(());
                    }
                }
                let alts = parse_alt(p, pos, depth + 1)?;
                if p.get(*pos) != Some(&')') {
                    return Err(());
                }
                *pos += 1;
                Node::Alt(alts)
            }
            '[' => parse_set(p, pos)?,
            '\\' => {
                let e = *p.get(*pos).ok_or(())?;
                *pos += 1;
                match e {
                    'A' => Node::Start,
                    'z' => Node::End,
                    e => match class(e) {
                        Some((ranges, negated)) => Node::Set(ranges, negated),
                        None => Node::Lit(escaped(e)?),
                    },
                }
            }
            '*' | '+' | '?' => return Err(()),
            c => Node::Lit(c),
        })
    }

    fn parse_set(p: &[char], pos: &mut usize) -> Result<Node, ()> {
        let mut negated = false;
        if p.get(*pos) == Some(&'^') {
            negated = true;
            *pos += 1;
        }
        let mut ranges = vec![];
        let mut first = true;
        loop {
            let c = *p.get(*pos).ok_or(())?;
            *pos += 1;
            if c == ']' && !first {
                break;
            }
            first = false;
            let lo = if c == '\\' {
                let e = *p.get(*pos).ok_or(())?;
                *pos += 1;
                if let Some((more, false)) = class(e) {
                    ranges.extend(more);
                    continue;
                }
                escaped(e)?
            } else {
                c
            };
            if p.get(*pos) == Some(&'-') && p.get(*pos + 1).is_some_and(|&n| n != ']') {
                let mut hi = p[*pos + 1];
                *pos += 2;
                if hi == '\\' {
                    hi = escaped(*p.get(*pos).ok_or(())?)?;
                    *pos += 1;
                }
                if hi < lo {
                    return Err(());
                }
                ranges.push((lo, hi));
            } else {
                ranges.push((lo, lo));
            }
        }
        Ok(Node::Set(ranges, negated))
    }

    /// `{n}`, `{n,}`, `{n,m}` at `start`: (min, max, the index after `}`).
    fn braces(p: &[char], start: usize) -> Option<(usize, Option<usize>, usize)> {
        let mut i = start + 1;
        let number = |i: &mut usize| {
            let from = *i;
            while *i < p.len() && p[*i].is_ascii_digit() {
                *i += 1;
            }
            p[from..*i].iter().collect::<String>().parse::<usize>().ok()
        };
        let min = number(&mut i)?;
        let max = if p.get(i) == Some(&',') {
            i += 1;
            number(&mut i)
        } else {
            Some(min)
        };
        if p.get(i) != Some(&'}') || max.is_some_and(|m| m < min) {
            return None;
        }
        Some((min, max, i + 1))
    }

    fn parse_quantifier(p: &[char], pos: &mut usize, atom: Node) -> Result<Node, ()> {
        let (min, max) = match p.get(*pos) {
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('?') => (0, Some(1)),
            Some('{') => match braces(p, *pos) {
                Some((min, max, end)) => {
                    *pos = end - 1;
                    (min, max)
                }
                None => return Ok(atom),
            },
            _ => return Ok(atom),
        };
        *pos += 1;
        if p.get(*pos) == Some(&'?') {
            *pos += 1; // lazy: the same full-match answer
        }
        if matches!(p.get(*pos), Some('*' | '+' | '?')) {
            return Err(());
        }
        Ok(Node::Rep(Box::new(atom), min, max))
    }

    struct Matcher<'a> {
        text: &'a [char],
        icase: bool,
    }

    impl Matcher<'_> {
        fn same(&self, a: char, b: char) -> bool {
            a == b || (self.icase && a.to_lowercase().eq(b.to_lowercase()))
        }

        fn in_set(&self, c: char, ranges: &[(char, char)], negated: bool) -> bool {
            let hit = |c: char| ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(&c));
            let found =
                hit(c) || (self.icase && (c.to_lowercase().any(hit) || c.to_uppercase().any(hit)));
            found != negated
        }

        fn seq(&self, nodes: &[Node], pos: usize, k: &dyn Fn(usize) -> bool) -> bool {
            match nodes.split_first() {
                None => k(pos),
                Some((first, rest)) => self.node(first, pos, &|p| self.seq(rest, p, k)),
            }
        }

        fn node(&self, n: &Node, pos: usize, k: &dyn Fn(usize) -> bool) -> bool {
            let at = self.text.get(pos).copied();
            match n {
                Node::Lit(c) => at.is_some_and(|t| self.same(t, *c)) && k(pos + 1),
                Node::Any => at.is_some_and(|t| t != '\n') && k(pos + 1),
                Node::Set(ranges, negated) => {
                    at.is_some_and(|t| self.in_set(t, ranges, *negated)) && k(pos + 1)
                }
                Node::Start => pos == 0 && k(pos),
                Node::End => pos == self.text.len() && k(pos),
                Node::Alt(alts) => alts.iter().any(|a| self.seq(a, pos, k)),
                Node::Rep(inner, min, max) => self.rep(inner, *min, *max, 0, pos, k),
            }
        }

        fn rep(
            &self,
            inner: &Node,
            min: usize,
            max: Option<usize>,
            count: usize,
            pos: usize,
            k: &dyn Fn(usize) -> bool,
        ) -> bool {
            if max.is_some_and(|m| count >= m) {
                return k(pos);
            }
            let more = |p: usize| {
                if p == pos {
                    k(p)
                } else {
                    self.rep(inner, min, max, count + 1, p, k)
                }
            };
            self.node(inner, pos, &more) || (count >= min && k(pos))
        }
    }
}

// --- the server

/// How a request (or the event socket) is answered badly (see [`FakeHyprland::misbehave`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Misbehave {
    /// [`GARBAGE`] instead of the reply (then the connection closes); on `.socket2.sock`, a
    /// garbage line first, then the events.
    Garbage,
    /// Nothing at all; the connection stays open. (On `.socket2.sock` such a stream counts
    /// in `event_streams_opened` but not in `event_streams_open`.)
    Silent,
    /// Close the connection without a reply (`.socket2.sock`: right after accepting).
    Close,
    /// Bytes without a newline, without end (until the client goes away).
    Endless,
}

struct EventStream {
    tx: mpsc::UnboundedSender<Vec<u8>>,
    queued: Arc<AtomicUsize>,
}

struct State {
    desktop: Desktop,
    requests: Vec<String>,
    commands: Vec<String>,
    dispatches: Vec<String>,
    execs: Vec<String>,
    refuse: HashMap<String, String>,
    misbehave: HashMap<String, Misbehave>,
    streams: Vec<EventStream>,
    streams_opened: usize,
}

/// Why a request got no ordinary reply.
enum Fail {
    Misbehave(Misbehave),
    Exception(String),
}

/// The exact commands (matched whole) and the prefix ones, in Hyprland's order.
const EXACT_COMMANDS: &[&str] = &[
    "workspaces",
    "workspacerules",
    "activeworkspace",
    "clients",
    "kill",
    "activewindow",
    "layers",
    "version",
    "devices",
    "splash",
    "cursorpos",
    "binds",
    "globalshortcuts",
    "systeminfo",
    "animations",
    "rollinglog",
    "layouts",
    "configerrors",
    "locked",
    "descriptions",
    "submap",
    "reloadshaders",
];
const PREFIX_COMMANDS: &[&str] = &[
    "monitors",
    "reload",
    "plugin",
    "notify",
    "dismissnotify",
    "setprop",
    "getprop",
    "seterror",
    "switchxkblayout",
    "output",
    "dispatch",
    "keyword",
    "setcursor",
    "getoption",
    "decorations",
    "[[BATCH]]",
];

#[derive(Default, Clone, Copy)]
struct Flags {
    json: bool,
    all: bool,
}

/// Split `j/clients` into its flags and command as Hyprland does: the flags end at the
/// first `/`, unless a space comes first (then there are none, but the characters seen
/// still count, as in Hyprland).
fn parse_flags(request: &str) -> (Flags, &str) {
    let mut flags = Flags::default();
    if request.starts_with("[[BATCH]]") || !request.contains('/') {
        return (flags, request);
    }
    let mut sep = request.len();
    for (i, c) in request.char_indices() {
        if c == '/' {
            sep = i;
            break;
        }
        if c == ' ' {
            break;
        }
        match c {
            'j' => flags.json = true,
            'a' => flags.all = true,
            _ => {}
        }
    }
    if sep < request.len() {
        (flags, &request[sep + 1..])
    } else {
        (flags, request)
    }
}

impl State {
    fn broadcast_lines(&mut self, lines: &[String]) {
        let raw = self.desktop.raw_newlines_in_events;
        let chunks: Vec<Vec<u8>> = lines.iter().map(|l| format_event(l, raw)).collect();
        self.broadcast(chunks);
    }

    fn broadcast(&mut self, chunks: Vec<Vec<u8>>) {
        if chunks.is_empty() {
            return;
        }
        self.streams.retain(|s| {
            for chunk in &chunks {
                // Hyprland drops a client whose queue of unsent events overflows.
                if s.queued.load(Ordering::SeqCst) >= MAX_QUEUED_EVENTS {
                    return false;
                }
                s.queued.fetch_add(1, Ordering::SeqCst);
                if s.tx.send(chunk.clone()).is_err() {
                    return false;
                }
            }
            true
        });
    }

    fn misbehaviour_for(&self, command: &str) -> Option<Misbehave> {
        let word = if command.starts_with("[[BATCH]]") {
            "[[BATCH]]"
        } else {
            command.split(' ').next().unwrap_or_default()
        };
        if word == "dispatch"
            && let Some((_, rest)) = command.split_once(' ')
        {
            let name = rest.split(' ').next().unwrap_or_default();
            if let Some(how) = self.misbehave.get(&format!("dispatch {name}")) {
                return Some(how.clone());
            }
        }
        self.misbehave.get(word).cloned()
    }

    /// Hyprland's getReply: one command (a batch part included).
    fn reply(&mut self, request: &str, events: &mut Vec<String>) -> Result<String, Fail> {
        self.commands.push(request.to_owned());
        let (flags, command) = parse_flags(request);
        if let Some(how) = self.misbehaviour_for(command) {
            return Err(Fail::Misbehave(how));
        }
        let mut result = if EXACT_COMMANDS.contains(&command) {
            self.exact(command, flags)
        } else {
            String::new()
        };
        if result.is_empty()
            && let Some(name) = PREFIX_COMMANDS.iter().find(|n| command.starts_with(**n))
        {
            result = self.prefixed(name, command, flags, events)?;
        }
        if result.is_empty() {
            return Ok("unknown request".into());
        }
        Ok(result)
    }

    fn exact(&mut self, command: &str, flags: Flags) -> String {
        let d = &self.desktop;
        let pretty = |v: Value| serde_json::to_string_pretty(&v).unwrap_or_default();
        let json = flags.json;
        match command {
            "clients" if json => pretty(d.clients_json(flags.all)),
            "clients" => {
                let text: String = d
                    .windows
                    .iter()
                    .filter(|w| w.mapped || flags.all)
                    .map(|w| d.client_text(w))
                    .collect();
                if text.is_empty() {
                    "no open windows".into()
                } else {
                    text
                }
            }
            "activewindow" if json => pretty(d.active_window_json()),
            "activewindow" => d
                .focused_window()
                .filter(|w| w.mapped)
                .map_or("Invalid".into(), |w| d.client_text(w)),
            "workspaces" if json => pretty(d.workspaces_json()),
            "workspaces" => d.workspaces.iter().map(|w| d.workspace_text(w)).collect(),
            "activeworkspace" => match d.active_workspace() {
                Some(w) if json => pretty(d.workspace_json(w)),
                Some(w) => d.workspace_text(w),
                None => "internal error".into(),
            },
            "devices" if json => pretty(d.devices_json()),
            "devices" => d.devices_text(),
            "version" if json => pretty(d.version_json()),
            "version" | "systeminfo" => d.version_text(),
            "splash" => "Thanks Brodie!".into(),
            "cursorpos" if json => "\n{\n    \"x\": 1280,\n    \"y\": 720\n}\n".into(),
            "cursorpos" => "1280, 720".into(),
            "locked" if json => "\n{\n    \"locked\": false\n}\n".into(),
            "locked" => "false".into(),
            "submap" if json => "{\"default\"}\n".into(),
            "submap" => "default\n".into(),
            "layouts" if json => "[\n    \"dwindle\",\n    \"master\"\n]\n".into(),
            "layouts" => "dwindle\nmaster\n".into(),
            "configerrors" if json => "[\n\t\"\"\n]\n".into(),
            "configerrors" => "\n".into(),
            "globalshortcuts" if json => "[]\n".into(),
            "globalshortcuts" => "none".into(),
            "kill" | "reloadshaders" => "ok".into(),
            "binds" | "workspacerules" | "animations" | "rollinglog" | "layers"
            | "descriptions"
                if json =>
            {
                "[]".into()
            }
            _ => String::new(),
        }
    }

    fn prefixed(
        &mut self,
        name: &str,
        command: &str,
        flags: Flags,
        events: &mut Vec<String>,
    ) -> Result<String, Fail> {
        let words: Vec<&str> = command.split_whitespace().collect();
        let word = |i: usize| words.get(i).copied().unwrap_or("");
        let pretty = |v: Value| serde_json::to_string_pretty(&v).unwrap_or_default();
        Ok(match name {
            "monitors" => {
                if words.len() > 2 {
                    "too many args".into()
                } else {
                    let all = words.len() == 2 && word(1) == "all";
                    let d = &self.desktop;
                    if flags.json {
                        pretty(d.monitors_json(all))
                    } else {
                        d.monitors
                            .iter()
                            .filter(|m| all || !m.disabled)
                            .map(|m| d.monitor_text(m))
                            .collect()
                    }
                }
            }
            "reload" | "seterror" | "dismissnotify" => "ok".into(),
            "plugin" => match word(1) {
                "" => "not enough args".into(),
                "list" => "no plugins loaded".into(),
                "load" | "unload" if words.len() < 3 => "not enough args".into(),
                "load" => "error in loading plugin, last error: not a fake".into(),
                "unload" => "plugin not loaded".into(),
                _ => "unknown opt".into(),
            },
            "notify" if words.len() < 5 => "not enough args".into(),
            "notify" => "ok".into(),
            "setprop" => "DEPRECATED: use hyprctl dispatch setprop instead".into(),
            "getprop" if words.len() < 3 => "not enough args".into(),
            "getprop" => match self.desktop.find_window(word(1)) {
                None => "window not found".into(),
                Some(_) => "prop not found".into(),
            },
            "switchxkblayout" => match self.desktop.switch_layout(word(1), word(2)) {
                Ok(ev) => {
                    events.extend(ev);
                    "ok".into()
                }
                Err(text) => text,
            },
            "output" if words.len() < 2 => "not enough args".into(),
            "output" => "ok".into(),
            "dispatch" => return self.dispatch(command, events),
            "keyword" => match command.split_once(' ') {
                None => "Invalid input: no space found".into(),
                Some((_, rest)) => match rest.split_once(' ') {
                    None => "Invalid input: command and value not properly formatted".into(),
                    Some(("", _)) => "Invalid input: command is empty".into(),
                    Some(_) => "ok".into(),
                },
            },
            "setcursor" => match stoi(words.last().copied().unwrap_or("")) {
                None => "size not int".into(),
                Some(n) if n <= 0 => "size not positive".into(),
                Some(_) => "ok".into(),
            },
            "getoption" => "no such option".into(),
            "decorations" => match self.desktop.find_window(word(1)) {
                None => "none".into(),
                Some(_) if flags.json => "[]".into(),
                Some(_) => "Decoration\tPriority\n".into(),
            },
            "[[BATCH]]" => {
                let mut replies = vec![];
                for part in split_batch(&command["[[BATCH]]".len()..]) {
                    replies.push(self.reply(&part, events)?);
                }
                replies.join("\n\n\n")
            }
            _ => String::new(),
        })
    }

    fn dispatch(&mut self, command: &str, events: &mut Vec<String>) -> Result<String, Fail> {
        let rest = match command.find(' ') {
            Some(i) => &command[i + 1..],
            None => command,
        };
        let (name, arg) = match rest.find(' ') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, ""),
        };
        self.dispatches.push(rest.to_owned());
        if let Some(reply) = self.refuse.get(name) {
            return Ok(reply.clone());
        }
        if !DISPATCHERS.contains(&name) {
            return Ok("Invalid dispatcher".into());
        }
        if name == "exec" || name == "execr" {
            self.execs.push(arg.to_owned());
        }
        match self.desktop.run_dispatcher(name, arg) {
            Ok(ev) => {
                events.extend(ev);
                Ok("ok".into())
            }
            Err(Failure::Error(text)) => Ok(text),
            Err(Failure::Exception(what)) => Err(Fail::Exception(what)),
        }
    }
}

struct Shared {
    state: Mutex<State>,
    /// Bumped by `drop_connections`: every connection task watching it closes.
    kill: watch::Sender<u64>,
    /// Hyprland serves `.socket.sock` connections one at a time.
    serial: tokio::sync::Mutex<()>,
}

enum Outcome {
    Reply(Vec<u8>),
    Bad(Misbehave),
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn handle(&self, request: &str) -> Outcome {
        let mut state = self.lock();
        state.requests.push(request.to_owned());
        let mut events = vec![];
        let result = state.reply(request, &mut events);
        state.broadcast_lines(&events);
        match result {
            Ok(reply) => Outcome::Reply(reply.into_bytes()),
            Err(Fail::Exception(what)) => Outcome::Reply(format!("Err: {what}").into_bytes()),
            Err(Fail::Misbehave(how)) => Outcome::Bad(how),
        }
    }
}

static INSTANCES: AtomicU64 = AtomicU64::new(1);

/// The running fake Hyprland. Dropping it stops the servers and removes the temp dir.
pub struct FakeHyprland {
    runtime: tempfile::TempDir,
    signature: String,
    dir: PathBuf,
    shared: Arc<Shared>,
    accept: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for FakeHyprland {
    fn drop(&mut self) {
        for task in &self.accept {
            task.abort();
        }
        self.shared.kill.send_modify(|n| *n += 1);
    }
}

impl FakeHyprland {
    /// Start with [`Desktop::two_monitors`].
    pub async fn start() -> FakeHyprland {
        FakeHyprland::start_with(Desktop::two_monitors()).await
    }

    /// Start with this desktop.
    pub async fn start_with(desktop: Desktop) -> FakeHyprland {
        let runtime = tempfile::tempdir().expect("temp dir");
        let signature = format!(
            "fake_{}_{}",
            1_700_000_000 + INSTANCES.fetch_add(1, Ordering::SeqCst),
            std::process::id()
        );
        let dir = runtime.path().join("hypr").join(&signature);
        std::fs::create_dir_all(&dir).expect("the instance dir");
        std::fs::write(
            dir.join("hyprland.lock"),
            format!("{}\nwayland-1\n", std::process::id()),
        )
        .expect("hyprland.lock");
        let requests = UnixListener::bind(dir.join(".socket.sock")).expect("bind .socket.sock");
        let events = UnixListener::bind(dir.join(".socket2.sock")).expect("bind .socket2.sock");
        let (kill, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                desktop,
                requests: vec![],
                commands: vec![],
                dispatches: vec![],
                execs: vec![],
                refuse: HashMap::new(),
                misbehave: HashMap::new(),
                streams: vec![],
                streams_opened: 0,
            }),
            kill,
            serial: tokio::sync::Mutex::new(()),
        });
        let accept_requests = tokio::spawn({
            let shared = shared.clone();
            async move {
                loop {
                    let Ok((stream, _)) = requests.accept().await else {
                        continue;
                    };
                    tokio::spawn(serve_request(shared.clone(), stream));
                }
            }
        });
        let accept_events = tokio::spawn({
            let shared = shared.clone();
            async move {
                loop {
                    let Ok((stream, _)) = events.accept().await else {
                        continue;
                    };
                    tokio::spawn(serve_events(shared.clone(), stream));
                }
            }
        });
        FakeHyprland {
            runtime,
            signature,
            dir,
            shared,
            accept: vec![accept_requests, accept_events],
        }
    }

    /// The fake `$XDG_RUNTIME_DIR`.
    pub fn runtime_dir(&self) -> &Path {
        self.runtime.path()
    }

    /// The fake `$HYPRLAND_INSTANCE_SIGNATURE`.
    pub fn signature(&self) -> &str {
        &self.signature
    }

    /// The instance dir, `<runtime>/hypr/<signature>/`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `.socket.sock`, for requests.
    pub fn socket(&self) -> PathBuf {
        self.dir.join(".socket.sock")
    }

    /// `.socket2.sock`, for events.
    pub fn event_socket(&self) -> PathBuf {
        self.dir.join(".socket2.sock")
    }

    /// The environment a Hyprland client finds its instance by.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            (
                "XDG_RUNTIME_DIR".into(),
                self.runtime_dir().display().to_string(),
            ),
            ("HYPRLAND_INSTANCE_SIGNATURE".into(), self.signature.clone()),
        ]
    }

    /// Every request received on `.socket.sock`, verbatim, in order.
    pub fn requests(&self) -> Vec<String> {
        self.shared.lock().requests.clone()
    }

    /// Every command run: each request, and each part of a `[[BATCH]]` after it.
    pub fn commands(&self) -> Vec<String> {
        self.shared.lock().commands.clone()
    }

    /// The `dispatch` commands, as "name args" (what follows `dispatch `).
    pub fn dispatches(&self) -> Vec<String> {
        self.shared.lock().dispatches.clone()
    }

    /// The command lines `exec`/`execr` were given (rules included).
    pub fn execs(&self) -> Vec<String> {
        self.shared.lock().execs.clone()
    }

    /// Answer `reply` to this dispatcher and change nothing.
    pub fn refuse(&self, dispatcher: &str, reply: &str) {
        self.shared
            .lock()
            .refuse
            .insert(dispatcher.to_owned(), reply.to_owned());
    }

    /// Stop refusing this dispatcher (see [`FakeHyprland::refuse`]).
    pub fn allow(&self, dispatcher: &str) {
        self.shared.lock().refuse.remove(dispatcher);
    }

    /// Answer this command badly from now on: a command word (`"clients"`, `"monitors"`,
    /// `"dispatch"`, `"[[BATCH]]"`…), one dispatcher (`"dispatch workspace"`), or `"events"`
    /// for new `.socket2.sock` connections. A misbehaving command changes nothing.
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

    /// Change the desktop and send the event lines `f` returns to every open event stream,
    /// in one step (a stream opening meanwhile sees all of the events or none).
    pub fn change(&self, f: impl FnOnce(&mut Desktop) -> Vec<String>) {
        let mut state = self.shared.lock();
        let events = f(&mut state.desktop);
        state.broadcast_lines(&events);
    }

    /// Send one event line (`"name>>data"`), formatted as Hyprland formats events.
    pub fn emit(&self, line: &str) {
        self.shared.lock().broadcast_lines(&[line.to_owned()]);
    }

    /// Send these bytes, as they are, to every open event stream.
    pub fn emit_raw(&self, bytes: impl AsRef<[u8]>) {
        self.shared.lock().broadcast(vec![bytes.as_ref().to_vec()]);
    }

    /// Close every open connection (requests and event streams); keep listening.
    pub fn drop_connections(&self) {
        self.shared.lock().streams.clear();
        self.shared.kill.send_modify(|n| *n += 1);
    }

    /// How many `.socket2.sock` connections were accepted so far.
    pub fn event_streams_opened(&self) -> usize {
        self.shared.lock().streams_opened
    }

    /// How many event streams are open now.
    pub fn event_streams_open(&self) -> usize {
        let mut state = self.shared.lock();
        state.streams.retain(|s| !s.tx.is_closed());
        state.streams.len()
    }

    /// Wait until at least `n` event streams are open; false on timeout.
    pub async fn wait_event_streams(&self, n: usize, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while self.event_streams_open() < n {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        true
    }
}

/// Read a request as Hyprland does: wait up to 5 s for it, then chunks of 1023 bytes until
/// a shorter one (a NUL ends a chunk). `None`: nothing came in time.
async fn read_request(stream: &mut UnixStream) -> Option<String> {
    let mut buf = [0u8; 1023];
    let mut request = vec![];
    let mut first = true;
    loop {
        let n = if first {
            match tokio::time::timeout(REQUEST_TIMEOUT, stream.read(&mut buf)).await {
                Ok(Ok(n)) => n,
                Ok(Err(_)) => 0,
                Err(_) => return None,
            }
        } else {
            stream.read(&mut buf).await.unwrap_or(0)
        };
        first = false;
        if n == 0 {
            break;
        }
        let chunk = &buf[..n];
        let end = chunk.iter().position(|&b| b == 0).unwrap_or(n);
        request.extend_from_slice(&chunk[..end]);
        if n < buf.len() {
            break;
        }
    }
    Some(String::from_utf8_lossy(&request).into_owned())
}

async fn misbehave_on(stream: &mut UnixStream, how: Misbehave) {
    match how {
        Misbehave::Garbage => {
            let _ = stream.write_all(GARBAGE).await;
            let _ = stream.shutdown().await;
        }
        Misbehave::Silent => std::future::pending::<()>().await,
        Misbehave::Close => {}
        Misbehave::Endless => {
            let chunk = vec![b'x'; 64 * 1024];
            while stream.write_all(&chunk).await.is_ok() {}
        }
    }
}

/// Serve one `.socket.sock` connection: one request, one reply, close.
async fn serve_request(shared: Arc<Shared>, mut stream: UnixStream) {
    let mut kill = shared.kill.subscribe();
    kill.mark_unchanged();
    let work = async {
        let serial = shared.serial.lock().await;
        let Some(request) = read_request(&mut stream).await else {
            return;
        };
        match shared.handle(&request) {
            Outcome::Reply(reply) => {
                let _ = stream.write_all(&reply).await;
                let _ = stream.shutdown().await;
                drop(serial);
            }
            Outcome::Bad(how) => {
                drop(serial);
                misbehave_on(&mut stream, how).await;
            }
        }
    };
    tokio::select! {
        _ = work => {}
        _ = kill.changed() => {}
    }
}

/// Serve one `.socket2.sock` connection: events until either side goes away.
async fn serve_events(shared: Arc<Shared>, stream: UnixStream) {
    let mut kill = shared.kill.subscribe();
    kill.mark_unchanged();
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let queued = Arc::new(AtomicUsize::new(0));
    let how = {
        let mut state = shared.lock();
        state.streams_opened += 1;
        let how = state.misbehave.get("events").cloned();
        if how.is_none() || how == Some(Misbehave::Garbage) {
            state.streams.push(EventStream {
                tx: tx.clone(),
                queued: queued.clone(),
            });
        }
        how
    };
    let (mut read, mut write) = stream.into_split();
    let work = async {
        match how {
            Some(Misbehave::Close) => return,
            Some(Misbehave::Silent) => {
                // Open, but nothing ever comes.
                let mut sink = [0u8; 256];
                while read.read(&mut sink).await.is_ok_and(|n| n > 0) {}
                return;
            }
            Some(Misbehave::Endless) => {
                let chunk = vec![b'x'; 64 * 1024];
                while write.write_all(&chunk).await.is_ok() {}
                return;
            }
            Some(Misbehave::Garbage) if write.write_all(GARBAGE).await.is_err() => return,
            Some(Misbehave::Garbage) | None => {}
        }
        drop(tx);
        let writer = async {
            while let Some(chunk) = rx.recv().await {
                if write.write_all(&chunk).await.is_err() {
                    return;
                }
                queued.fetch_sub(1, Ordering::SeqCst);
            }
        };
        // Hyprland reads nothing on this socket; a hangup ends the stream.
        let reader = async {
            let mut sink = [0u8; 256];
            while read.read(&mut sink).await.is_ok_and(|n| n > 0) {}
        };
        tokio::select! {
            _ = writer => {}
            _ = reader => {}
        }
    };
    tokio::select! {
        _ = work => {}
        _ = kill.changed() => {}
    }
}
