//! The sway (and i3) IPC client, over the crate `swayipc-async` (MIT).
//!
//! Two connections to `$SWAYSOCK`: one for commands and queries, shared behind a mutex, and
//! one subscribed to `window`, `workspace`, `output` and `input` events. Each event only says
//! *what kind* of thing changed; the client then re-reads that part (`get_tree` for windows,
//! `get_workspaces`, `get_outputs`, `get_inputs` for the keyboard layout) and publishes a new
//! [`Snapshot`] into a `watch` channel when it differs from the last one. Bursts of events are
//! coalesced into one refresh.
//!
//! The shapes follow sway-ipc(7): windows are the tree's views (cons with an `app_id`, an X11
//! `window_properties.class` or a `pid` and no children), tiled or floating, each with the
//! workspace and output above it; `fullscreen` is `fullscreen_mode != 0`.
//!
//! Under a flood of events the refreshes stay bounded: the bits of a burst are merged, and
//! two refreshes start at least [`REFRESH_EVERY`] apart (the first change after a quiet
//! period is read at once).
//!
//! If the event connection breaks, the client reconnects once a second for as long as it
//! lives, and [`Sway::link`] says since when it is down; the command connection is reopened
//! on the next command. At most [`MAX_WINDOWS`] windows, [`MAX_WORKSPACES`] workspaces and
//! [`MAX_OUTPUTS`] outputs are kept (the snapshot then says `truncated: true`).

use crate::link::{BackendError, Link, LinkState, clean};
use crate::model::{
    CompositorInfo, MAX_OUTPUTS, MAX_WINDOWS, MAX_WORKSPACES, Output, Rect, Snapshot, Window,
    Workspace,
};
use async_io::Async;
use futures::StreamExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};
use swayipc_async::{Connection, EventType, Node, NodeType};
use tokio::sync::{Mutex, Notify, watch};

const NAME: &str = "sway";

/// The longest command this client sends with `exec`: sway copies an `exec` command line
/// into a 4096-byte buffer (cutting off the rest), so a longer one is refused instead.
pub const MAX_EXEC: usize = 4000;

/// The least time between the starts of two state refreshes during an event flood.
pub const REFRESH_EVERY: Duration = Duration::from_millis(16);

/// Why a string cannot go into a sway command: sway replaces `$name` by the value of a
/// `set $name …` variable of the user's config before it parses a command, inside quotes
/// too, so a `$` would let the config (or whoever wrote the argument) change what runs.
///
/// # Errors
/// A message naming the value when it holds a `$`.
pub fn refuse_variables(arg: &str) -> Result<(), String> {
    if arg.contains('$') {
        let shown: String = arg.chars().take(40).collect();
        return Err(format!(
            "{:?} contains '$', which sway would expand as a config variable (`set $name …`) even inside quotes",
            clean(&shown)
        ));
    }
    Ok(())
}

/// One argument single-quoted for sway's `exec`, which hands its arguments to `sh -c`.
/// Inside single quotes sh gives no character a meaning, and sway's own tokenizer (which
/// splits commands at `;` and `,` and reads criteria at `[`) treats only a backslash and
/// the closing quote specially. sway does expand its config variables (`$name`) anywhere
/// in a command, quotes or not, so a value stays one literal word only when it holds none
/// of `'`, `\`, `$` and control characters; those are refused.
///
/// # Errors
/// A message naming the value when it holds one of those characters.
pub fn exec_quote(arg: &str) -> Result<String, String> {
    refuse_variables(arg)?;
    if let Some(bad) = arg
        .chars()
        .find(|c| matches!(c, '\'' | '\\') || c.is_control())
    {
        let shown: String = arg.chars().take(40).collect();
        return Err(format!(
            "{:?} contains {}, which cannot pass through sway's exec safely",
            clean(&shown),
            match bad {
                '\'' => "a single quote".to_owned(),
                '\\' => "a backslash".to_owned(),
                c => format!("the control character U+{:04X}", u32::from(c)),
            }
        ));
    }
    Ok(format!("'{arg}'"))
}

/// A program and its arguments as the text after sway's `exec`: the shell's own `exec`,
/// then each word through [`exec_quote`] (`exec 'foot' '--app-id' 'x'`). The leading
/// `exec` keeps sway from seeing a lone quoted word, which it would unquote before handing
/// it to `sh -c`, and replaces the shell by the program.
///
/// # Errors
/// An empty argv, a program name starting with `-`, or a word [`exec_quote`] refuses.
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
        words.push(exec_quote(arg)?);
    }
    Ok(words.join(" "))
}

/// What an event asked to re-read (bit flags).
const DIRTY_TREE: u8 = 1;
const DIRTY_WORKSPACES: u8 = 2;
const DIRTY_OUTPUTS: u8 = 4;
const DIRTY_INPUTS: u8 = 8;
const DIRTY_ALL: u8 = 15;

/// A live sway IPC client.
pub struct Sway {
    socket: PathBuf,
    commands: Arc<Mutex<Option<Connection>>>,
    state: watch::Receiver<Snapshot>,
    version: Option<String>,
    link: Link,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// What the refresh task must re-read, and its wake-up.
    dirty: Arc<AtomicU8>,
    wake: Arc<Notify>,
    /// How many refreshes the refresh task has finished.
    refreshed: watch::Receiver<u64>,
}

impl std::fmt::Debug for Sway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sway")
            .field("socket", &self.socket)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl Drop for Sway {
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

async fn open(socket: &Path) -> Result<Connection, BackendError> {
    let stream = Async::<UnixStream>::connect(socket)
        .await
        .map_err(|source| BackendError::Connect {
            compositor: NAME,
            socket: socket.display().to_string(),
            source,
        })?;
    Ok(Connection::from(stream))
}

impl Sway {
    /// Connect to the sway socket at `socket`, read the whole state once, and start the event
    /// task that keeps [`Sway::state`] fresh.
    ///
    /// # Errors
    /// [`BackendError::Connect`] when the socket cannot be reached, [`BackendError::Io`] when
    /// the first queries or the subscription fail.
    pub async fn connect(socket: PathBuf) -> Result<Sway, BackendError> {
        let mut conn = open(&socket).await?;
        let version = conn
            .get_version()
            .await
            .map_err(|e| io_error(format!("get_version: {e}")))?;
        let version = Some(version.human_readable);
        let info = CompositorInfo {
            name: NAME.into(),
            version: version.clone(),
            socket: Some(socket.display().to_string()),
            connected: true,
        };
        let mut parts = Parts::default();
        parts.refresh(&mut conn, DIRTY_ALL).await?;
        let (tx, rx) = watch::channel(parts.snapshot(&info));
        let commands = Arc::new(Mutex::new(Some(conn)));

        // Subscribe before returning so that no change after the first read is missed.
        let events = subscribe(&socket).await?;

        let dirty = Arc::new(AtomicU8::new(0));
        let wake = Arc::new(Notify::new());
        let link = Link::default();
        let tx = Arc::new(tx);
        let reader = tokio::spawn(read_events(
            socket.clone(),
            events,
            dirty.clone(),
            wake.clone(),
            link.clone(),
            tx.clone(),
        ));
        let (done, refreshed) = watch::channel(0u64);
        let refresher = tokio::spawn(refresh_loop(
            commands.clone(),
            socket.clone(),
            parts,
            info,
            tx,
            dirty.clone(),
            wake.clone(),
            done,
        ));
        Ok(Sway {
            socket,
            commands,
            state: rx,
            version,
            link,
            tasks: vec![reader, refresher],
            dirty,
            wake,
            refreshed,
        })
    }

    /// Re-read the tree now and wait (up to `limit`) until the snapshot holds it: sway sends
    /// no event when a floating window is moved or resized, so what a click is checked
    /// against must be read afresh. `false` when the re-read did not finish in time.
    pub async fn resync(&self, limit: Duration) -> bool {
        let mut refreshed = self.refreshed.clone();
        let before = *refreshed.borrow_and_update();
        self.dirty.fetch_or(DIRTY_TREE, Ordering::SeqCst);
        self.wake.notify_one();
        tokio::time::timeout(limit, refreshed.wait_for(|n| *n > before))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// The snapshot channel, kept fresh from the event stream.
    pub fn state(&self) -> watch::Receiver<Snapshot> {
        self.state.clone()
    }

    /// sway's version string (`get_version`'s `human_readable`, e.g. `"1.7"`).
    pub fn version(&self) -> Option<String> {
        self.version.clone()
    }

    /// The socket this client talks to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Whether the event connection is up, and since when.
    pub fn link(&self) -> LinkState {
        self.link.get()
    }

    /// Run `command` (sway command syntax, several separated by `;` or `,`). Every outcome
    /// must succeed.
    ///
    /// # Errors
    /// [`BackendError::Refused`] with sway's own error text when any outcome failed;
    /// [`BackendError::Io`]/[`BackendError::Connect`] when the socket is gone (reconnected
    /// once before giving up).
    pub async fn command(&self, command: &str) -> Result<(), BackendError> {
        let mut guard = self.commands.lock().await;
        let mut attempt = 0;
        let outcomes = loop {
            attempt += 1;
            if guard.is_none() {
                *guard = Some(open(&self.socket).await?);
            }
            let conn = guard.as_mut().expect("just opened");
            match conn.run_command(command).await {
                Ok(outcomes) => break outcomes,
                Err(e) => {
                    *guard = None;
                    if attempt >= 2 {
                        return Err(io_error(format!("run_command: {e}")));
                    }
                    tracing::warn!(error = %e, "sway command connection broke; reconnecting");
                }
            }
        };
        drop(guard);
        let failures: Vec<String> = outcomes
            .into_iter()
            .filter_map(|o| o.err())
            .map(|e| match e {
                swayipc_async::Error::CommandFailed(m) | swayipc_async::Error::CommandParse(m) => m,
                other => other.to_string(),
            })
            .collect();
        if failures.is_empty() {
            Ok(())
        } else {
            Err(BackendError::Refused {
                compositor: NAME,
                request: command.to_owned(),
                message: failures.join("; "),
            })
        }
    }
}

/// Subscribe to window, workspace, output and input events. sway before 1.8 has no
/// `output` event and refuses the whole subscription with it, so a refusal is retried
/// without it (output changes then show through the workspace events that accompany them).
async fn subscribe(socket: &Path) -> Result<swayipc_async::EventStream, BackendError> {
    let all = [
        EventType::Window,
        EventType::Workspace,
        EventType::Output,
        EventType::Input,
    ];
    match open(socket).await?.subscribe(all).await {
        Ok(stream) => Ok(stream),
        Err(swayipc_async::Error::SubscriptionFailed(_)) => open(socket)
            .await?
            .subscribe([EventType::Window, EventType::Workspace, EventType::Input])
            .await
            .map_err(|e| io_error(format!("subscribe: {e}"))),
        Err(e) => Err(io_error(format!("subscribe: {e}"))),
    }
}

/// Read events and mark what they invalidate; on a broken stream, reconnect every second.
async fn read_events(
    socket: PathBuf,
    mut events: swayipc_async::EventStream,
    dirty: Arc<AtomicU8>,
    wake: Arc<Notify>,
    link: Link,
    tx: Arc<watch::Sender<Snapshot>>,
) {
    let mut warned_decode = false;
    loop {
        let mut why = "sway closed the event connection".to_owned();
        while let Some(event) = events.next().await {
            let bits = match event {
                Ok(swayipc_async::Event::Window(_)) => DIRTY_TREE,
                // The focused output changes with the focused workspace.
                Ok(swayipc_async::Event::Workspace(_)) => {
                    DIRTY_TREE | DIRTY_WORKSPACES | DIRTY_OUTPUTS
                }
                Ok(swayipc_async::Event::Output(_)) => DIRTY_ALL,
                Ok(swayipc_async::Event::Input(_)) => DIRTY_INPUTS,
                Ok(_) => 0,
                Err(swayipc_async::Error::Io(e)) => {
                    tracing::warn!(error = %e, "sway event stream broke");
                    why = format!("the event connection broke: {e}");
                    break;
                }
                Err(e) => {
                    // An event this crate cannot decode still says something changed.
                    if !warned_decode {
                        warned_decode = true;
                        tracing::warn!(error = %clean(&e.to_string()), "undecodable sway event (logged once); re-reading everything");
                    }
                    DIRTY_ALL
                }
            };
            if bits != 0 {
                dirty.fetch_or(bits, Ordering::SeqCst);
                wake.notify_one();
            }
        }
        link.down(&why);
        tx.send_if_modified(|s| std::mem::replace(&mut s.compositor.connected, false));
        // Reconnect: resubscribe and re-read everything, since events may have been missed.
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            match subscribe(&socket).await {
                Ok(stream) => {
                    tracing::info!(socket = %socket.display(), "sway event stream reconnected");
                    events = stream;
                    link.up();
                    dirty.fetch_or(DIRTY_ALL, Ordering::SeqCst);
                    wake.notify_one();
                    break;
                }
                Err(e) => tracing::debug!(error = %e, "sway reconnect failed"),
            }
        }
    }
}

/// Re-read what events invalidated and publish the new snapshot when it changed.
#[allow(clippy::too_many_arguments)]
async fn refresh_loop(
    commands: Arc<Mutex<Option<Connection>>>,
    socket: PathBuf,
    mut parts: Parts,
    info: CompositorInfo,
    tx: Arc<watch::Sender<Snapshot>>,
    dirty: Arc<AtomicU8>,
    wake: Arc<Notify>,
    done: watch::Sender<u64>,
) {
    let mut last_refresh: Option<Instant> = None;
    let mut truncation_logged = false;
    loop {
        wake.notified().await;
        // During a flood, let the bits of the next REFRESH_EVERY gather into one refresh.
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
        let result = {
            let mut guard = commands.lock().await;
            if guard.is_none() {
                match open(&socket).await {
                    Ok(conn) => *guard = Some(conn),
                    Err(e) => {
                        tracing::debug!(error = %e, "sway query connection unavailable");
                        dirty.fetch_or(bits, Ordering::SeqCst);
                        drop(guard);
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        wake.notify_one();
                        continue;
                    }
                }
            }
            let conn = guard.as_mut().expect("connection present");
            let result = parts.refresh(conn, bits).await;
            if result.is_err() {
                *guard = None;
            }
            result
        };
        match result {
            Ok(()) => {
                let next = parts.snapshot(&info);
                if next.truncated && !std::mem::replace(&mut truncation_logged, true) {
                    tracing::warn!(
                        "sway reports more than {MAX_WINDOWS} windows, {MAX_WORKSPACES} \
                         workspaces or {MAX_OUTPUTS} outputs; the rest are left out of the \
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
                tracing::warn!(error = %e, "re-reading sway state failed; retrying");
                dirty.fetch_or(bits, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(200)).await;
                wake.notify_one();
            }
        }
    }
}

/// The last read of each part of sway's state.
#[derive(Debug, Default)]
struct Parts {
    windows: Vec<Window>,
    workspaces: Vec<Workspace>,
    outputs: Vec<Output>,
    keyboard_layout: Option<String>,
    /// Windows, workspaces or outputs beyond the caps were left out (by part).
    windows_dropped: bool,
    workspaces_dropped: bool,
    outputs_dropped: bool,
}

impl Parts {
    async fn refresh(&mut self, conn: &mut Connection, bits: u8) -> Result<(), BackendError> {
        if bits & DIRTY_TREE != 0 {
            let tree = conn
                .get_tree()
                .await
                .map_err(|e| io_error(format!("get_tree: {e}")))?;
            let (windows, dropped) = windows_of(&tree);
            self.windows = windows;
            self.windows_dropped = dropped;
        }
        if bits & DIRTY_WORKSPACES != 0 {
            let workspaces = conn
                .get_workspaces()
                .await
                .map_err(|e| io_error(format!("get_workspaces: {e}")))?;
            self.workspaces_dropped = workspaces.len() > MAX_WORKSPACES;
            self.workspaces = workspaces
                .into_iter()
                .take(MAX_WORKSPACES)
                .map(|w| Workspace {
                    id: u64::try_from(w.id).unwrap_or_default(),
                    index: (w.num >= 0).then_some(i64::from(w.num)),
                    name: Some(w.name),
                    output: Some(w.output),
                    focused: w.focused,
                    active: w.visible,
                })
                .collect();
        }
        if bits & DIRTY_OUTPUTS != 0 {
            let outputs = conn
                .get_outputs()
                .await
                .map_err(|e| io_error(format!("get_outputs: {e}")))?;
            self.outputs_dropped = outputs.len() > MAX_OUTPUTS;
            self.outputs = outputs
                .into_iter()
                .take(MAX_OUTPUTS)
                .map(|o| Output {
                    name: o.name,
                    focused: o.focused,
                    make: Some(o.make).filter(|m| !m.is_empty()),
                    model: Some(o.model).filter(|m| !m.is_empty()),
                    width: o.active.then_some(i64::from(o.rect.width)),
                    height: o.active.then_some(i64::from(o.rect.height)),
                    x: o.active.then_some(i64::from(o.rect.x)),
                    y: o.active.then_some(i64::from(o.rect.y)),
                })
                .collect();
        }
        if bits & DIRTY_INPUTS != 0 {
            let inputs = conn
                .get_inputs()
                .await
                .map_err(|e| io_error(format!("get_inputs: {e}")))?;
            self.keyboard_layout = inputs
                .into_iter()
                .filter(|i| i.input_type == "keyboard")
                .find_map(|i| i.xkb_active_layout_name);
        }
        Ok(())
    }

    fn snapshot(&self, info: &CompositorInfo) -> Snapshot {
        let mut snapshot = Snapshot {
            compositor: info.clone(),
            focused: None,
            windows: self.windows.clone(),
            workspaces: self.workspaces.clone(),
            outputs: self.outputs.clone(),
            keyboard_layout: self.keyboard_layout.clone(),
            overview: None,
            // sway takes no screenshots itself (grim does).
            screenshot: None,
            truncated: self.windows_dropped || self.workspaces_dropped || self.outputs_dropped,
            provenance: Default::default(),
        };
        snapshot.refresh_focus();
        snapshot
    }
}

/// Every view in the tree, tiled and floating, in tree order; at most [`MAX_WINDOWS`], and
/// whether more were left out.
fn windows_of(root: &Node) -> (Vec<Window>, bool) {
    let mut out = Vec::new();
    let mut dropped = false;
    walk(root, None, None, false, &mut out, &mut dropped);
    (out, dropped)
}

/// `floating`: the node hangs below a workspace's `floating_nodes` (a floating view, or a
/// view inside a floating container).
fn walk(
    node: &Node,
    output: Option<&str>,
    workspace: Option<(&str, u64)>,
    floating: bool,
    out: &mut Vec<Window>,
    dropped: &mut bool,
) {
    let floating = floating || node.node_type == NodeType::FloatingCon;
    let (output, workspace) = match node.node_type {
        NodeType::Output => (node.name.as_deref(), None),
        NodeType::Workspace => (
            output,
            node.name
                .as_deref()
                .map(|n| (n, u64::try_from(node.id).unwrap_or_default())),
        ),
        _ => (output, workspace),
    };
    let is_view = matches!(node.node_type, NodeType::Con | NodeType::FloatingCon)
        && (node.app_id.is_some()
            || node
                .window_properties
                .as_ref()
                .is_some_and(|p| p.class.is_some())
            || (node.pid.is_some() && node.nodes.is_empty() && node.floating_nodes.is_empty()));
    if is_view && out.len() >= MAX_WINDOWS {
        *dropped = true;
    } else if is_view {
        let app_id = node.app_id.clone().or_else(|| {
            node.window_properties
                .as_ref()
                .and_then(|p| p.class.clone())
        });
        // The scratchpad lives on the hidden output "__i3": report no output for it.
        let output = output.filter(|o| *o != "__i3");
        out.push(Window {
            id: u64::try_from(node.id).unwrap_or_default(),
            app_id,
            title: node.name.clone(),
            pid: node.pid.map(i64::from),
            workspace: workspace.map(|(name, _)| name.to_owned()),
            workspace_id: workspace.map(|(_, id)| id),
            output: output.map(str::to_owned),
            focused: node.focused,
            fullscreen: node.fullscreen_mode.map(|m| m != 0),
            floating: Some(floating),
            // `rect` is the container in layout coordinates; `window_rect` the content
            // within it.
            rect: (node.rect.width > 0 && node.rect.height > 0).then(|| Rect {
                x: i64::from(node.rect.x) + i64::from(node.window_rect.x),
                y: i64::from(node.rect.y) + i64::from(node.window_rect.y),
                width: i64::from(node.window_rect.width),
                height: i64::from(node.window_rect.height),
            }),
            // sway's `rect` holds the borders, and the title bar (`deco_rect`, relative to
            // the parent) sits just above it.
            frame: (node.rect.width > 0 && node.rect.height > 0).then(|| {
                let title = i64::from(node.deco_rect.height.max(0));
                Rect {
                    x: i64::from(node.rect.x),
                    y: i64::from(node.rect.y) - title,
                    width: i64::from(node.rect.width),
                    height: i64::from(node.rect.height) + title,
                }
            }),
            visible: node.visible,
            // sway keeps a focus order in its tree but no time.
            focused_at: None,
        });
    }
    for child in &node.nodes {
        walk(child, output, workspace, floating, out, dropped);
    }
    for child in &node.floating_nodes {
        walk(child, output, workspace, true, out, dropped);
    }
}
