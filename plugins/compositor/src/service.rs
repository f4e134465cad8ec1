//! The plugin's methods: `context.snapshot`, `action.capabilities`, `action.invoke` and
//! `plugin.health`, over a lazily connected [`Backend`].
//!
//! The backend is connected by a background task that starts with the plugin and retries
//! once a second until it succeeds, so a plugin started before the compositor (or outside
//! any session) still passes the handshake and starts working once the compositor is there.
//! A caller never waits for a connection attempt longer than [`FIRST_WAIT`], and only for
//! the first one (a hung compositor makes calls fail fast, not slow).
//!
//! Once connected, the client follows its event connection ([`Backend::link`]): while it is
//! down, `plugin.health` is `degraded` ("lost the connection to sway at …; reconnecting"),
//! `context.snapshot` marks `compositor.connected: false` for [`GRACE`] and then fails with
//! `-32000`, and actions fail at once with the same words.

use crate::apps::{self, FocusOrder};
use crate::backend::{Backend, Detected, Sent, wait_for};
use crate::link::{BackendError, clean};
use crate::model::Output;
use crate::model::{Snapshot, Window};
use crate::table::{
    Action, Arg, CommandError, MAX_ARG, MAX_ARGV, MonitorDirection, TABLE, Verify, WantedState,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::watch;
use utter_protocol::handshake::{HealthResult, HealthStatus};
use utter_protocol::plugin::{Call, Handler};
use utter_protocol::{ErrorCode, ErrorObject};

/// The ops this plugin serves, in `action.capabilities` order.
pub const OPS: [&str; 4] = ["niri", "ensure_app", "focus_app", "close_app"];

/// How long an action's effect may take to show in the snapshot.
pub const VERIFY_TIMEOUT: Duration = Duration::from_millis(1500);
/// How long a closed window may take to go away (it may ask to save first).
pub const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a launched app may take to show a focused window.
pub const LAUNCH_TIMEOUT: Duration = Duration::from_secs(5);
/// How long `spawn` waits for a new window before it says "not verified" (a spawned
/// program need not open one).
pub const SPAWN_TIMEOUT: Duration = Duration::from_secs(3);
/// The bound on one attempt to connect to the compositor (in the background).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// The pause between two connection attempts.
const RETRY_EVERY: Duration = Duration::from_secs(1);
/// How long a call waits for the first connection attempt to finish.
pub const FIRST_WAIT: Duration = Duration::from_millis(1500);
/// How long `context.snapshot` still serves the last state (marked
/// `compositor.connected: false`) after the event connection was lost.
pub const GRACE: Duration = Duration::from_secs(2);
/// How long `context.snapshot {refresh: true}` waits for the compositor's state read afresh.
const REFRESH_WAIT: Duration = Duration::from_secs(2);
/// The longest app name, id or class accepted.
const MAX_NAME: usize = 256;

fn invalid_params(message: impl Into<String>) -> ErrorObject {
    ErrorObject::invalid_params(message)
}

fn plugin_error(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(ErrorCode::PluginError, message)
}

/// The program a terminal's argv runs (`foot -e claude`, `kitty codex`, `gnome-terminal --
/// aider`), when it names one: what a coding agent's step starts inside the terminal.
fn run_in_terminal(argv: &[String]) -> Option<&str> {
    let after_flag = argv
        .iter()
        .position(|a| matches!(a.as_str(), "-e" | "-x" | "--" | "--command" | "--exec"))
        .and_then(|i| argv.get(i + 1));
    let terminal = argv
        .first()
        .and_then(|p| std::path::Path::new(p).file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("");
    // These take the program as their argument (`kitty codex`); with options before it,
    // which of them take a value is not known here, so only the plain form is read.
    let positional = (matches!(terminal, "foot" | "footclient" | "kitty") && argv.len() == 2)
        .then(|| argv.get(1).filter(|a| !a.starts_with('-')))
        .flatten();
    after_flag.or(positional).map(String::as_str)
}

/// A program that is not installed fails before anything is sent (a dry run says the
/// same): the compositor would only log `exec: firefox: not found`, and the step would look
/// like an application that is slow to start. Looked up as `execvp` would, in this
/// plugin's `PATH` (the runner's).
fn check_installed(argv: &[String]) -> Result<(), ErrorObject> {
    let program = argv.first().map(String::as_str).unwrap_or("");
    let missing = std::iter::once(program)
        .chain(run_in_terminal(argv))
        .find(|p| utter_desktop::spawn::find_program(p, None).is_none());
    let Some(program) = missing else {
        return Ok(());
    };
    let shown = crate::link::clean(program);
    let path = std::env::var("PATH").unwrap_or_default();
    Err(plugin_error(if program.contains('/') {
        format!("{shown} is not installed: there is no executable file at that path")
    } else {
        format!(
            "{shown} is not installed: no program {shown} in PATH ({}); install it ({}), or give its full path",
            crate::link::clean(&path),
            how_to_install(program).unwrap_or_else(|| format!("on Debian: apt install {shown}, or the package that provides it"))
        )
    })
    .with_data(json!({"program": shown, "installed": false})))
}

/// How to install a program whose package is not called as the program is (Debian ships
/// Firefox as firefox-esr) or that no distribution ships (the coding agents).
fn how_to_install(program: &str) -> Option<String> {
    Some(
        match program {
            "firefox" => "on Debian: apt install firefox-esr, whose program is firefox-esr; elsewhere the firefox package",
            "code" => "Visual Studio Code comes from Microsoft's package repository or as a .deb from code.visualstudio.com",
            "claude" => "Claude Code: npm install -g @anthropic-ai/claude-code",
            "codex" => "Codex CLI: npm install -g @openai/codex",
            "gemini" => "Gemini CLI: npm install -g @google/gemini-cli",
            "opencode" => "opencode: npm install -g opencode-ai",
            "aider" => "aider: pipx install aider-chat",
            _ => return None,
        }
        .to_owned(),
    )
}

/// What the background connector has achieved so far.
#[derive(Default, Clone)]
struct Connection {
    backend: Option<Arc<Backend>>,
    last_error: Option<String>,
    /// Finished attempts (successful or not).
    attempts: u32,
}

struct Inner {
    detected: Detected,
    connection: watch::Sender<Connection>,
    connector_started: AtomicBool,
    /// When the connector started: calls wait for the first attempt only until
    /// [`FIRST_WAIT`] after this.
    started_at: std::sync::OnceLock<std::time::Instant>,
    focus: FocusOrder,
}

/// The plugin's [`Handler`].
#[derive(Clone)]
pub struct Service {
    inner: Arc<Inner>,
}

impl Service {
    /// A service for the compositor `detected` (see [`Detected::from_env`]); nothing is
    /// connected yet.
    pub fn new(detected: Detected) -> Service {
        Service {
            inner: Arc::new(Inner {
                detected,
                connection: watch::Sender::new(Connection::default()),
                connector_started: AtomicBool::new(false),
                started_at: std::sync::OnceLock::new(),
                focus: FocusOrder::default(),
            }),
        }
    }

    /// Start connecting in the background now (used at start so the first snapshot is
    /// warm), and log the first attempt's failure.
    pub async fn warm_up(&self) {
        if let Err(e) = self.backend().await {
            tracing::warn!("{}", e.message);
        }
    }

    /// Start the background connector once. Without a compositor there is nothing to try:
    /// the explanation is the error at once.
    fn start_connecting(&self) {
        if self.inner.connector_started.swap(true, Ordering::SeqCst) {
            return;
        }
        self.inner.started_at.get_or_init(std::time::Instant::now);
        if self.inner.detected == Detected::None {
            let message = self.explain_none();
            self.inner.connection.send_modify(|c| {
                c.last_error = Some(message);
                c.attempts += 1;
            });
            return;
        }
        tokio::spawn(connect_in_background(Arc::downgrade(&self.inner)));
    }

    /// The connected backend. Waits at most [`FIRST_WAIT`], and only while the first
    /// connection attempt is under way; otherwise answers at once with the last failure.
    async fn backend(&self) -> Result<Arc<Backend>, ErrorObject> {
        self.start_connecting();
        let mut rx = self.inner.connection.subscribe();
        let pending = {
            let c = rx.borrow_and_update();
            c.backend.is_none() && c.attempts == 0
        };
        let left = self
            .inner
            .started_at
            .get()
            .map_or(FIRST_WAIT, |t| FIRST_WAIT.saturating_sub(t.elapsed()));
        if pending && !left.is_zero() {
            let _ =
                tokio::time::timeout(left, rx.wait_for(|c| c.backend.is_some() || c.attempts > 0))
                    .await;
        }
        let c = rx.borrow().clone();
        if let Some(backend) = c.backend {
            return Ok(backend);
        }
        Err(plugin_error(c.last_error.unwrap_or_else(|| {
            format!(
                "still connecting to {} at {} after {} ms (is it hung?); retrying in the background",
                self.inner.detected.name(),
                self.socket_shown(),
                FIRST_WAIT.as_millis()
            )
        })))
    }

    /// The backend when its event connection is up: actions refuse to run on a stale view.
    async fn live_backend(&self) -> Result<Arc<Backend>, ErrorObject> {
        let backend = self.backend().await?;
        let link = backend.link();
        if !link.connected {
            return Err(plugin_error(self.lost(&backend, &link)));
        }
        Ok(backend)
    }

    /// "lost the connection to sway at …; reconnecting".
    fn lost(&self, backend: &Backend, link: &crate::link::LinkState) -> String {
        format!(
            "lost the connection to {} at {} {} s ago ({}); reconnecting",
            backend.name(),
            self.socket_shown(),
            link.since.elapsed().as_secs(),
            link.reason.as_deref().unwrap_or("the event stream ended")
        )
    }

    fn socket_shown(&self) -> String {
        self.inner
            .detected
            .socket()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    }

    fn explain_none(&self) -> String {
        // A signature that is set but cannot name a directory is said, not hidden.
        if let Some(why) = std::env::var("HYPRLAND_INSTANCE_SIGNATURE")
            .ok()
            .filter(|s| !s.is_empty())
            .and_then(|s| crate::hyprland::check_signature(&s).err())
        {
            return format!(
                "no compositor found: {why}, so Hyprland's sockets cannot be found (NIRI_SOCKET, \
                 SWAYSOCK and I3SOCK are not set either); restart the session or pass the \
                 variable Hyprland set (`systemctl --user import-environment \
                 HYPRLAND_INSTANCE_SIGNATURE`)"
            );
        }
        format!(
            "no compositor found: none of {} is set in the plugin's environment. Run \
             Utter inside a niri, Hyprland or sway session, or pass the variable to the \
             runner (e.g. `systemctl --user import-environment NIRI_SOCKET \
             HYPRLAND_INSTANCE_SIGNATURE SWAYSOCK`)",
            Detected::ENV_VARS.join(", ")
        )
    }

    /// A connection failure in words that say what was looked at and what to do.
    fn explain(&self, e: &BackendError) -> String {
        match &self.inner.detected {
            Detected::None => self.explain_none(),
            Detected::Niri(path) => format!(
                "{e} (from NIRI_SOCKET={}); is niri running in this session? The variable \
                 may be stale",
                path.display()
            ),
            Detected::Sway(path) => format!(
                "{e} (from SWAYSOCK/I3SOCK={}); is sway running in this session? The \
                 variable may be stale",
                path.display()
            ),
            Detected::Hyprland(dir) => format!(
                "{e} (the instance directory {} from HYPRLAND_INSTANCE_SIGNATURE and \
                 XDG_RUNTIME_DIR); is Hyprland running in this session? The variable may be \
                 stale",
                dir.display()
            ),
        }
    }

    async fn snapshot(&self, params: &Value) -> Result<Value, ErrorObject> {
        match params.get("sources") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) if items.iter().all(Value::is_string) => {}
            Some(other) => {
                return Err(invalid_params(format!(
                    "\"sources\" must be a list of strings, not {}",
                    short(other)
                )));
            }
        }
        let refresh = match params.get("refresh") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return Err(invalid_params(format!(
                    "\"refresh\" must be true or false, not {}",
                    short(other)
                )));
            }
        };
        let backend = self.backend().await?;
        let link = backend.link();
        if !link.connected && link.since.elapsed() > GRACE {
            return Err(plugin_error(self.lost(&backend, &link)));
        }
        // Asked for before a click is checked against the geometry: read afresh.
        if refresh && !backend.resync(REFRESH_WAIT).await {
            return Err(plugin_error(format!(
                "{} did not answer a fresh read of its windows within {} ms",
                backend.name(),
                REFRESH_WAIT.as_millis()
            )));
        }
        let mut snapshot = backend.snapshot();
        snapshot.compositor.connected = link.connected;
        Ok(serde_json::to_value(snapshot).expect("a snapshot serialises"))
    }

    /// `action.invoke {op, args, provenance, dry_run?}`.
    async fn invoke(&self, params: Value) -> Result<Value, ErrorObject> {
        let op = params
            .get("op")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid_params("action.invoke needs \"op\" (a string)"))?
            .to_owned();
        let dry_run = utter_protocol::plugin::dry_run(&params)?;
        let args = match params.get("args") {
            None | Some(Value::Null) => json!({}),
            Some(args @ Value::Object(_)) => args.clone(),
            Some(other) => {
                return Err(invalid_params(format!(
                    "\"args\" must be an object, not {}",
                    short(other)
                )));
            }
        };
        let provenance = params.get("provenance").map(short).unwrap_or_default();
        let op_shown = short(&Value::String(op.clone()));
        tracing::info!(op = %op_shown, dry_run, %provenance, "invoke");
        let result = match op.as_str() {
            "niri" => self.niri(parse(&op, args)?, dry_run).await,
            "focus_app" => self.focus_app(parse(&op, args)?, dry_run).await,
            "ensure_app" => self.ensure_app(parse(&op, args)?, dry_run).await,
            "close_app" => self.close_app(parse(&op, args)?, dry_run).await,
            other => Err(ErrorObject::new(
                ErrorCode::MethodNotFound,
                format!(
                    "unknown op {}; the compositor plugin serves {}",
                    short(&Value::String(other.to_owned())),
                    OPS.join(", ")
                ),
            )),
        };
        if let Err(e) = &result {
            tracing::warn!(code = e.code, message = %crate::link::clean(&e.message), "invoke failed");
        }
        result
    }

    /// The `niri` op: one action from the table.
    async fn niri(&self, args: NiriArgs, dry_run: bool) -> Result<Value, ErrorObject> {
        if args.args.len() > MAX_ARGV + 8 {
            return Err(invalid_params(format!(
                "niri: at most {} arguments, not {}",
                MAX_ARGV + 8,
                args.args.len()
            )));
        }
        let resolved = TABLE
            .resolve(&args.command, &args.args, &args.options)
            .map_err(|e| invalid_params(e.0))?;
        let action = resolved.action;
        // Without compositor IPC (GNOME, KDE Plasma) a screenshot is still possible: the
        // xdg-desktop-portal takes it.
        if action.name.starts_with("screenshot")
            && !matches!(self.inner.detected, Detected::Niri(_))
        {
            if let Err(no_compositor) = self.backend().await {
                return crate::screenshot::take_with_portal(&action.name, "none", dry_run)
                    .await
                    .map_err(|e| {
                        plugin_error(format!("{}; {}", e.message, no_compositor.message))
                    });
            }
        }
        let backend = self.live_backend().await?;
        let mut state = backend.state();
        let before = state.borrow_and_update().clone();
        if let Some(direction) = action.monitor {
            if let Some(e) = no_monitor_there(&before, direction, &action.name) {
                return Err(e);
            }
        }
        let wanted = resolved.wanted_state();
        // A spawned program's window is the news, not the window focused before.
        let target = if action.verify == Verify::WindowOpened {
            None
        } else {
            before.focused.clone()
        };
        // sway and Hyprland have no screenshot action: grim takes it (wlr-screencopy).
        if !matches!(backend.as_ref(), Backend::Niri(_)) && action.name.starts_with("screenshot") {
            return crate::screenshot::take(&action.name, &before, dry_run).await;
        }
        let sent = match backend.as_ref() {
            Backend::Niri(_) => Sent::Niri(resolved.niri()),
            Backend::Sway(_) => match resolved.sway() {
                Ok(command) => Sent::Sway(command),
                Err(CommandError::Unsupported) => return Err(cannot_do(action, "sway")),
                Err(CommandError::Unsafe(why)) => {
                    return Err(invalid_params(format!("{}: {why}", action.name)));
                }
            },
            Backend::Hyprland(_) => match resolved.hyprland() {
                Ok(command) => Sent::Hyprland(command),
                Err(CommandError::Unsupported) => return Err(cannot_do(action, "hyprland")),
                Err(CommandError::Unsafe(why)) => {
                    return Err(invalid_params(format!("{}: {why}", action.name)));
                }
            },
        };
        // What would be sent is well formed; is the program there?
        if action.name == "spawn" {
            let argv: Vec<String> = args
                .args
                .iter()
                .map(|a| match a {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect();
            check_installed(&argv)?;
        }
        let mut result = json!({
            "ok": true,
            "dry_run": dry_run,
            "command": action.name,
            "sent": sent.to_json(),
            "compositor": backend.name(),
        });
        if let Some(w) = &target {
            result["window"] = window_json(w);
        }

        // niri and Hyprland (as this table drives it) only toggle fullscreen: "on" or "off"
        // sends the toggle only when the window is known to be in the other state.
        let toggle_only = matches!(backend.as_ref(), Backend::Niri(_) | Backend::Hyprland(_))
            && action.verify == Verify::Fullscreen
            && !matches!(wanted, None | Some(WantedState::Toggle));
        if toggle_only {
            if let Some(w) = &target {
                let want = wanted.and_then(|s| s.target(w.fullscreen));
                if w.fullscreen.is_some() && w.fullscreen == want {
                    result["sent"] = Value::Null;
                    let already = format!(
                        "window {} is {} already; nothing {}",
                        w.id,
                        if want == Some(true) {
                            "fullscreen"
                        } else {
                            "out of fullscreen"
                        },
                        if dry_run { "would be sent" } else { "was sent" }
                    );
                    if !dry_run {
                        result["verified"] = true.into();
                    }
                    result["detail"] = already.into();
                    return Ok(result);
                }
            }
        }

        if dry_run {
            result["detail"] = format!(
                "would send {} to {} ({})",
                sent.describe(),
                backend.name(),
                action.doc
            )
            .into();
            return Ok(result);
        }
        backend.send(&sent).await.map_err(refused)?;

        let reference = resolved.values.get("reference").cloned();
        let needs_target = matches!(
            action.verify,
            Verify::WindowWorkspace
                | Verify::WindowWorkspaceChanged
                | Verify::WindowOutputChanged
                | Verify::Fullscreen
                | Verify::FloatingFlipped
                | Verify::FloatingOn
                | Verify::FloatingOff
                | Verify::WindowGone
        );
        // The window state this action changes, when the compositor does not report it.
        let unreported = target.as_ref().and_then(|w| match action.verify {
            Verify::Fullscreen if w.fullscreen.is_none() => Some("fullscreen"),
            Verify::FloatingFlipped | Verify::FloatingOn | Verify::FloatingOff
                if w.floating.is_none() =>
            {
                Some("floating")
            }
            _ => None,
        });
        let timeout = if action.verify == Verify::WindowOpened {
            SPAWN_TIMEOUT
        } else {
            VERIFY_TIMEOUT
        };
        let (verified, after, detail) = if action.verify == Verify::None {
            (
                false,
                None,
                format!(
                    "{} accepted {}; the snapshot cannot show its effect",
                    backend.name(),
                    action.name
                ),
            )
        } else if needs_target && target.is_none() {
            (
                false,
                None,
                format!(
                    "{} accepted {}, but no window had the focus, so nothing was expected to change",
                    backend.name(),
                    action.name
                ),
            )
        } else if let (Some(what), Some(w)) = (unreported, &target) {
            let blind = if toggle_only {
                format!(
                    "; {} has only a toggle, so window {} may now be {what} or not (say it again to undo)",
                    backend.name(),
                    w.id
                )
            } else {
                String::new()
            };
            (
                false,
                None,
                format!(
                    "{} accepted {}, but it does not report whether a window is {what}, so the change cannot be checked{blind}",
                    backend.name(),
                    action.name
                ),
            )
        } else {
            let check = Check {
                verify: action.verify,
                before: &before,
                target: target.as_ref().map(|w| w.id),
                reference: reference.as_ref(),
                wanted,
            };
            match wait_for(&mut state, timeout, |s| check.holds(s)).await {
                Some(after) => {
                    let detail = match check.opened(&after) {
                        Some(w) => format!(
                            "{}: window {} ({}) appeared",
                            action.name,
                            w.id,
                            w.app_id.as_deref().unwrap_or("no app_id")
                        ),
                        None => format!("{}: {}", action.name, check.describe_done()),
                    };
                    (true, Some(after), detail)
                }
                None if action.verify == Verify::WindowOpened => (
                    false,
                    None,
                    format!(
                        "{} accepted {}, but no new window appeared within {} s (the program may run without a window, or it failed to start)",
                        backend.name(),
                        action.name,
                        timeout.as_secs()
                    ),
                ),
                None => (
                    false,
                    None,
                    format!(
                        "{} accepted {}, but the change ({}) was not observed within {} ms",
                        backend.name(),
                        action.name,
                        check.describe_done(),
                        timeout.as_millis()
                    ),
                ),
            }
        };
        result["verified"] = verified.into();
        result["detail"] = detail.into();
        if let (Some(after), Some(t)) = (&after, &target) {
            if let Some(w) = after.window(t.id) {
                result["window"] = window_json(w);
            }
        }
        if let Some(after) = &after {
            if action.verify == Verify::WindowOpened {
                if let Some(w) = after.windows.iter().find(|w| before.window(w.id).is_none()) {
                    result["window"] = window_json(w);
                }
            }
            if let Some(ws) = after.focused_workspace() {
                result["workspace"] = serde_json::to_value(ws).unwrap_or(Value::Null);
            }
            // Where the screenshot went: the file niri named, or the clipboard only.
            if action.verify == Verify::Screenshot {
                let path = after.screenshot.as_ref().and_then(|s| s.path.clone());
                let saved = match &path {
                    Some(path) => format!("; saved to {path} and copied to the clipboard"),
                    None => "; copied to the clipboard (not saved to a file)".into(),
                };
                result["path"] = path.into();
                if let Some(detail) = result["detail"].as_str() {
                    result["detail"] = format!("{detail}{saved}").into();
                }
            }
        }
        Ok(result)
    }

    /// The app's windows, best match and most recently focused first.
    fn app_windows(&self, snapshot: &Snapshot, names: &[&str]) -> Vec<Window> {
        let order = self.inner.focus.ids();
        apps::windows_of(snapshot, names, &order)
            .into_iter()
            .cloned()
            .collect()
    }

    /// Pick `window_id` among `windows`, or the first.
    fn pick(app: &str, windows: &[Window], window_id: Option<u64>) -> Result<Window, ErrorObject> {
        match window_id {
            Some(id) => windows.iter().find(|w| w.id == id).cloned().ok_or_else(|| {
                let ids: Vec<u64> = windows.iter().map(|w| w.id).collect();
                plugin_error(format!(
                    "window {id} is not a window of {app} (its windows: {ids:?})"
                ))
            }),
            None => windows
                .first()
                .cloned()
                .ok_or_else(|| plugin_error(format!("no window of {app} is open"))),
        }
    }

    /// Send `focus_window(id)` and wait until it is focused.
    async fn focus_and_verify(
        &self,
        backend: &Backend,
        window: &Window,
    ) -> Result<(Sent, bool, Option<Window>), ErrorObject> {
        let sent = backend.focus_window(window.id);
        let mut state = backend.state();
        backend.send(&sent).await.map_err(refused)?;
        let id = window.id;
        let after = wait_for(&mut state, VERIFY_TIMEOUT, |s| {
            s.focused.as_ref().is_some_and(|f| f.id == id)
        })
        .await;
        let now = after.as_ref().and_then(|s| s.window(id).cloned());
        Ok((sent, after.is_some(), now))
    }

    /// `focus_app {app, window_id?}`.
    async fn focus_app(&self, args: FocusArgs, dry_run: bool) -> Result<Value, ErrorObject> {
        check_name("app", &args.app)?;
        let backend = self.live_backend().await?;
        let windows = self.app_windows(&backend.snapshot(), &[&args.app]);
        let window = Self::pick(&args.app, &windows, args.window_id)?;
        self.focus_result(&backend, &args.app, window, windows.len(), dry_run, false)
            .await
    }

    async fn focus_result(
        &self,
        backend: &Backend,
        app: &str,
        window: Window,
        count: usize,
        dry_run: bool,
        ensure: bool,
    ) -> Result<Value, ErrorObject> {
        let others = count.saturating_sub(1);
        let of = if others > 0 {
            format!(" (of {count} windows of {app})")
        } else {
            String::new()
        };
        let mut result = json!({
            "ok": true,
            "dry_run": dry_run,
            "compositor": backend.name(),
            "window": window_json(&window),
        });
        if ensure {
            result["launched"] = false.into();
        }
        if dry_run {
            let sent = backend.focus_window(window.id);
            result["sent"] = sent.to_json();
            result["detail"] = format!(
                "would focus {app} window {}{of} with {}",
                window.id,
                sent.describe()
            )
            .into();
            return Ok(result);
        }
        let (sent, verified, now) = self.focus_and_verify(backend, &window).await?;
        result["sent"] = sent.to_json();
        result["verified"] = verified.into();
        if let Some(now) = now {
            result["window"] = window_json(&now);
        }
        result["detail"] = if verified {
            format!("focused {app} window {}{of}", window.id)
        } else {
            format!(
                "asked {} to focus {app} window {}{of}, but the focus change was not observed within {} ms",
                backend.name(),
                window.id,
                VERIFY_TIMEOUT.as_millis()
            )
        }
        .into();
        Ok(result)
    }

    /// `ensure_app {app, argv?, desktop_id?, wm_class?}`.
    async fn ensure_app(&self, args: EnsureArgs, dry_run: bool) -> Result<Value, ErrorObject> {
        check_name("app", &args.app)?;
        for (field, value) in [
            ("desktop_id", &args.desktop_id),
            ("wm_class", &args.wm_class),
        ] {
            if let Some(v) = value {
                check_name(field, v)?;
            }
        }
        if let Some(argv) = &args.argv {
            if argv.is_empty() || argv.len() > 64 || argv.iter().any(|a| a.len() > 4096) {
                return Err(invalid_params(
                    "ensure_app: argv must be 1 to 64 strings of at most 4096 bytes",
                ));
            }
        }
        let names: Vec<&str> = [
            Some(args.app.as_str()),
            args.desktop_id.as_deref(),
            args.wm_class.as_deref(),
        ]
        .into_iter()
        .flatten()
        .collect();
        let backend = self.live_backend().await?;
        let windows = self.app_windows(&backend.snapshot(), &names);
        if let Some(window) = windows.first().cloned() {
            return self
                .focus_result(&backend, &args.app, window, windows.len(), dry_run, true)
                .await;
        }

        // Nothing open: launch.
        let (argv, how) = if let Some(argv) = &args.argv {
            (argv.clone(), "argv".to_owned())
        } else if let Some(desktop_id) = &args.desktop_id {
            let plan = utter_desktop::launch::run(
                utter_desktop::launch::LaunchArgs {
                    app_id: desktop_id.clone(),
                    name: Some(args.app.clone()),
                },
                true,
            )
            .await?;
            let mut argv: Vec<String> = plan["argv"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            if let (Some(program), Some(first)) = (plan["program"].as_str(), argv.first_mut()) {
                *first = program.to_owned();
            }
            let entry = plan["entry"].as_str().unwrap_or("?").to_owned();
            (argv, format!("the desktop entry {entry}"))
        } else {
            return Err(invalid_params(format!(
                "ensure_app: no window of {} is open, and launching it needs \"argv\" (a list of strings) or \"desktop_id\"",
                args.app
            )));
        };
        let sent = backend
            .spawn(&argv)
            .map_err(|e| invalid_params(format!("ensure_app: {e}")))?;
        check_installed(&argv)?;
        let mut result = json!({
            "ok": true,
            "dry_run": dry_run,
            "compositor": backend.name(),
            "sent": sent.to_json(),
            "argv": argv,
            "launched": !dry_run,
        });
        if dry_run {
            result["detail"] = format!(
                "no window of {} is open; would start {argv:?} (from {how}) with {}",
                args.app,
                sent.describe()
            )
            .into();
            return Ok(result);
        }
        let mut state = backend.state();
        let before: Vec<u64> = state
            .borrow_and_update()
            .windows
            .iter()
            .map(|w| w.id)
            .collect();
        backend.send(&sent).await.map_err(refused)?;
        let order = self.inner.focus.ids();
        let new_window = |s: &Snapshot| -> Option<Window> {
            apps::windows_of(s, &names, &order)
                .into_iter()
                .find(|w| !before.contains(&w.id))
                .cloned()
        };
        let appeared = wait_for(&mut state, LAUNCH_TIMEOUT, |s| {
            new_window(s).is_some_and(|w| w.focused)
        })
        .await;
        let latest = state.borrow().clone();
        let late_window = new_window(&latest);
        let (verified, window, detail) = match appeared {
            Some(s) => {
                let w = new_window(&s).expect("the predicate held");
                let detail = format!(
                    "started {} ({argv:?}); its window {} has the focus",
                    args.app, w.id
                );
                (true, Some(w), detail)
            }
            None => match late_window {
                // A window came but did not take the focus: give it the focus.
                Some(w) => {
                    let (_, focused, now) = self.focus_and_verify(&backend, &w).await?;
                    let detail = if focused {
                        format!(
                            "started {} ({argv:?}) and focused its window {}",
                            args.app, w.id
                        )
                    } else {
                        format!(
                            "started {} ({argv:?}); its window {} appeared but did not take the focus",
                            args.app, w.id
                        )
                    };
                    (focused, now.or(Some(w)), detail)
                }
                None => (
                    false,
                    None,
                    format!(
                        "started {argv:?} through {}, but no window of {} appeared within {} s",
                        backend.name(),
                        args.app,
                        LAUNCH_TIMEOUT.as_secs()
                    ),
                ),
            },
        };
        result["verified"] = verified.into();
        result["detail"] = detail.into();
        if let Some(w) = window {
            result["window"] = window_json(&w);
        }
        Ok(result)
    }

    /// `close_app {app, window_id?}`: close one window (the given one, else the most
    /// recently focused).
    async fn close_app(&self, args: FocusArgs, dry_run: bool) -> Result<Value, ErrorObject> {
        check_name("app", &args.app)?;
        let backend = self.live_backend().await?;
        let windows = self.app_windows(&backend.snapshot(), &[&args.app]);
        let window = Self::pick(&args.app, &windows, args.window_id)?;
        let others = windows.len() - 1;
        let remain = match others {
            0 => format!("no other {} window is open", args.app),
            1 => format!("1 other {} window remains", args.app),
            n => format!("{n} other {} windows remain", args.app),
        };
        let sent = backend.close_window(window.id);
        let mut result = json!({
            "ok": true,
            "dry_run": dry_run,
            "compositor": backend.name(),
            "sent": sent.to_json(),
            "window": window_json(&window),
            "remaining": others,
        });
        if dry_run {
            result["detail"] = format!(
                "would close {} window {} with {}; {remain}",
                args.app,
                window.id,
                sent.describe()
            )
            .into();
            return Ok(result);
        }
        let mut state = backend.state();
        backend.send(&sent).await.map_err(refused)?;
        let id = window.id;
        let gone = wait_for(&mut state, CLOSE_TIMEOUT, |s| s.window(id).is_none()).await;
        result["verified"] = gone.is_some().into();
        result["detail"] = if gone.is_some() {
            format!("closed {} window {id}; {remain}", args.app)
        } else {
            format!(
                "asked {} window {id} to close, but it was still open after {} s (it may be asking to save); {remain}",
                args.app,
                CLOSE_TIMEOUT.as_secs()
            )
        }
        .into();
        Ok(result)
    }

    async fn health(&self) -> HealthResult {
        match self.backend().await {
            Ok(backend) if !backend.link().connected => HealthResult {
                status: HealthStatus::Degraded,
                detail: self.lost(&backend, &backend.link()),
            },
            Ok(backend) => HealthResult {
                status: HealthStatus::Ok,
                detail: format!(
                    "connected to {} {} at {}",
                    backend.name(),
                    backend.version().as_deref().unwrap_or("(unknown version)"),
                    self.inner
                        .detected
                        .socket()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default()
                ),
            },
            Err(e) => HealthResult {
                status: HealthStatus::Degraded,
                detail: e.message,
            },
        }
    }
}

impl Handler for Service {
    fn methods(&self) -> Vec<String> {
        vec![
            "context.snapshot".into(),
            "action.capabilities".into(),
            "action.invoke".into(),
        ]
    }

    fn side_effect_free(&self) -> Vec<String> {
        vec!["context.snapshot".into(), "action.capabilities".into()]
    }

    async fn health(&self) -> HealthResult {
        Service::health(self).await
    }

    async fn handle(&self, call: Call) -> Result<Value, ErrorObject> {
        match call.method.as_str() {
            "context.snapshot" => self.snapshot(&call.params).await,
            "action.capabilities" => Ok(capabilities()),
            "action.invoke" => self.invoke(call.params).await,
            other => Err(ErrorObject::method_not_found(other)),
        }
    }
}

/// What a verification waits for, relative to the snapshot before the action.
struct Check<'a> {
    verify: Verify,
    before: &'a Snapshot,
    target: Option<u64>,
    reference: Option<&'a Arg>,
    /// The `state` option (fullscreen), when the entry has one.
    wanted: Option<WantedState>,
}

fn workspace_is(ws: &crate::model::Workspace, reference: Option<&Arg>) -> bool {
    match reference {
        Some(Arg::WorkspaceIndex(i)) => ws.index == Some(i64::from(*i)),
        Some(Arg::WorkspaceName(n)) => ws.name.as_deref() == Some(n.as_str()),
        _ => false,
    }
}

impl Check<'_> {
    fn holds(&self, s: &Snapshot) -> bool {
        let before_window = self.target.and_then(|id| self.before.window(id));
        let now_window = self.target.and_then(|id| s.window(id));
        match self.verify {
            Verify::FocusedWorkspace => s
                .focused_workspace()
                .is_some_and(|ws| workspace_is(ws, self.reference)),
            Verify::WindowWorkspace => now_window.is_some_and(|w| {
                let ws = match w.workspace_id {
                    Some(id) => s.workspaces.iter().find(|ws| ws.id == id),
                    None => s.workspaces.iter().find(|ws| ws.name == w.workspace),
                };
                ws.is_some_and(|ws| workspace_is(ws, self.reference))
            }),
            Verify::WindowWorkspaceChanged => match (before_window, now_window) {
                (Some(b), Some(n)) => {
                    b.workspace_id != n.workspace_id || b.workspace != n.workspace
                }
                _ => false,
            },
            Verify::WorkspaceChanged => {
                s.focused_workspace().map(|w| w.id) != self.before.focused_workspace().map(|w| w.id)
            }
            Verify::OutputChanged => s.focused_output() != self.before.focused_output(),
            Verify::WindowOutputChanged => match (before_window, now_window) {
                (Some(b), Some(n)) => b.output != n.output,
                _ => false,
            },
            Verify::Fullscreen => match (before_window, now_window) {
                (Some(b), Some(n)) => match self.wanted {
                    Some(WantedState::On) => n.fullscreen == Some(true),
                    Some(WantedState::Off) => n.fullscreen == Some(false),
                    _ => n.fullscreen.is_some() && b.fullscreen != n.fullscreen,
                },
                _ => false,
            },
            Verify::FloatingFlipped => match (before_window, now_window) {
                (Some(b), Some(n)) => n.floating.is_some() && b.floating != n.floating,
                _ => false,
            },
            Verify::FloatingOn => now_window.is_some_and(|n| n.floating == Some(true)),
            Verify::FloatingOff => now_window.is_some_and(|n| n.floating == Some(false)),
            Verify::WindowOpened => self.opened(s).is_some(),
            Verify::WindowGone => now_window.is_none(),
            Verify::OverviewFlipped => s.overview.is_some() && s.overview != self.before.overview,
            Verify::Screenshot => {
                let count = |s: &Snapshot| s.screenshot.as_ref().map_or(0, |shot| shot.count);
                count(s) > count(self.before)
            }
            Verify::LayoutChanged => s.keyboard_layout != self.before.keyboard_layout,
            Verify::Any => s != self.before,
            Verify::None => false,
        }
    }

    /// A window of `s` that was not there before.
    fn opened<'s>(&self, s: &'s Snapshot) -> Option<&'s Window> {
        if self.verify != Verify::WindowOpened {
            return None;
        }
        s.windows
            .iter()
            .find(|w| self.before.window(w.id).is_none())
    }

    fn describe_done(&self) -> String {
        let reference = match self.reference {
            Some(Arg::WorkspaceIndex(i)) => format!("workspace {i}"),
            Some(Arg::WorkspaceName(n)) => format!("workspace {n:?}"),
            _ => "the workspace".to_owned(),
        };
        let window = self
            .target
            .map(|id| format!("window {id}"))
            .unwrap_or_else(|| "the window".into());
        match self.verify {
            Verify::FocusedWorkspace => format!("{reference} is focused"),
            Verify::WindowWorkspace => format!("{window} is on {reference}"),
            Verify::WindowWorkspaceChanged => format!("{window} is on another workspace"),
            Verify::WorkspaceChanged => "another workspace is focused".into(),
            Verify::OutputChanged => "another monitor is focused".into(),
            Verify::WindowOutputChanged => format!("{window} is on another monitor"),
            Verify::Fullscreen => match self.wanted {
                Some(WantedState::On) => format!("{window} is fullscreen"),
                Some(WantedState::Off) => format!("{window} is not fullscreen"),
                _ => format!("{window}'s fullscreen state flipped"),
            },
            Verify::FloatingFlipped => format!("{window} moved between floating and tiling"),
            Verify::FloatingOn => format!("{window} floats"),
            Verify::FloatingOff => format!("{window} is tiled"),
            Verify::WindowOpened => "a new window appeared".into(),
            Verify::WindowGone => format!("{window} is closed"),
            Verify::OverviewFlipped => "the overview flipped".into(),
            Verify::Screenshot => "the screenshot was taken".into(),
            Verify::LayoutChanged => "the keyboard layout changed".into(),
            Verify::Any => "the compositor state changed".into(),
            Verify::None => "nothing observable".into(),
        }
    }
}

/// The `-32000` error for an action `compositor` (`"sway"` or `"hyprland"`) has no command
/// for: short, with a close equivalent when the table names one, and the whole list of what
/// that compositor can do in `data`.
fn cannot_do(action: &Action, compositor: &str) -> ErrorObject {
    let hyprland = compositor == "hyprland";
    let supported: Vec<&str> = TABLE
        .actions()
        .iter()
        .filter(|a| {
            if hyprland {
                a.hyprland.is_some()
            } else {
                a.sway.is_some()
            }
        })
        .map(|a| a.name.as_str())
        .collect();
    let hint = if hyprland {
        &action.hyprland_hint
    } else {
        &action.hint
    };
    let mut message = if hyprland {
        format!("Hyprland has no dispatcher doing {}", action.name)
    } else {
        format!("sway cannot do {} (it exists only in niri)", action.name)
    };
    if let Some(hint) = hint {
        message.push_str(&format!("; try {hint}"));
    }
    plugin_error(message).with_data(json!({
        "command": action.name,
        "compositor": compositor,
        "hint": hint,
        "supported": supported,
    }))
}

/// The `-32000` error for a monitor action when the snapshot shows no monitor in its
/// direction: there is only one monitor, or (when every monitor's position is known) none
/// lies on that side of the focused one. `None` when there may be one, or the snapshot does
/// not say which monitor has the focus.
fn no_monitor_there(
    snapshot: &Snapshot,
    direction: MonitorDirection,
    command: &str,
) -> Option<ErrorObject> {
    let focused = snapshot.outputs.iter().find(|o| o.focused)?;
    // Outputs that are off (no logical size) hold no workspace to go to.
    let others: Vec<&Output> = snapshot
        .outputs
        .iter()
        .filter(|o| o.name != focused.name && o.width.is_some())
        .collect();
    let none = if others.is_empty() {
        true
    } else {
        match (focused.x, focused.y) {
            (Some(fx), Some(fy)) if others.iter().all(|o| o.x.is_some() && o.y.is_some()) => {
                // Both compositors only pick a monitor whose edge lies beyond the focused
                // one's on that side, so its origin does too.
                !others.iter().any(|o| {
                    let (ox, oy) = (o.x.unwrap_or(fx), o.y.unwrap_or(fy));
                    match direction {
                        MonitorDirection::Left => ox < fx,
                        MonitorDirection::Right => ox > fx,
                        MonitorDirection::Up => oy < fy,
                        MonitorDirection::Down => oy > fy,
                        MonitorDirection::Next | MonitorDirection::Previous => true,
                    }
                })
            }
            _ => false,
        }
    };
    if !none {
        return None;
    }
    let names: Vec<&str> = snapshot.outputs.iter().map(|o| o.name.as_str()).collect();
    Some(
        plugin_error(format!(
            "there is no monitor {} {}",
            direction.relation(),
            focused.name
        ))
        .with_data(json!({
            "command": command,
            "output": focused.name,
            "outputs": names,
        })),
    )
}

/// A window in a result, with its title marked untrusted.
fn window_json(w: &Window) -> Value {
    let mut v = serde_json::to_value(w).expect("a window serialises");
    v["provenance"] = json!({"title": "title"});
    v
}

/// A compositor failure as a `-32000` error carrying the compositor's own words.
fn refused(e: BackendError) -> ErrorObject {
    match &e {
        BackendError::Refused {
            compositor,
            request,
            message,
        } => plugin_error(format!("{compositor} refused {request}: {message}"))
            .with_data(json!({"compositor": compositor, "request": request, "error": message})),
        _ => plugin_error(e.to_string()),
    }
}

fn check_name(field: &str, value: &str) -> Result<(), ErrorObject> {
    if value.is_empty() || value.len() > MAX_NAME || value.chars().any(char::is_control) {
        return Err(invalid_params(format!(
            "\"{field}\" must be 1 to {MAX_NAME} bytes without control characters"
        )));
    }
    Ok(())
}

/// A JSON value cut short for messages and logs.
fn short(v: &Value) -> String {
    let s = match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    };
    if s.chars().count() > 80 {
        format!("{}…", s.chars().take(80).collect::<String>())
    } else {
        s
    }
}

/// `niri {command, args?, options?}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NiriArgs {
    command: String,
    #[serde(default)]
    args: Vec<Value>,
    #[serde(default)]
    options: Map<String, Value>,
}

/// `focus_app` / `close_app {app, window_id?}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FocusArgs {
    app: String,
    #[serde(default, deserialize_with = "window_id")]
    window_id: Option<u64>,
}

/// A window id: a whole number `0..=2^64-1`. One beyond that is "out of range" (JSON
/// readers hand it over as a float), a fraction is not an id.
fn window_id<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    use serde::de::Error;
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match (n.as_u64(), n.as_f64()) {
            (Some(id), _) => Ok(Some(id)),
            (None, Some(f)) if f.is_finite() && f.fract() == 0.0 && f > 0.0 => {
                Err(D::Error::custom(format!(
                    "window_id {n} is out of range (0..=18446744073709551615)"
                )))
            }
            _ => Err(D::Error::custom(format!(
                "window_id must be a whole number 0 or more, not {n}"
            ))),
        },
        Some(other) => Err(D::Error::custom(format!(
            "window_id must be an integer, not {}",
            short(&other)
        ))),
    }
}

/// `ensure_app {app, argv?, desktop_id?, wm_class?}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EnsureArgs {
    app: String,
    #[serde(default)]
    argv: Option<Vec<String>>,
    #[serde(default)]
    desktop_id: Option<String>,
    #[serde(default)]
    wm_class: Option<String>,
}

fn parse<T: DeserializeOwned>(op: &str, args: Value) -> Result<T, ErrorObject> {
    serde_json::from_value(args).map_err(|e| {
        let shape = match op {
            "niri" => "{command: string, args?: [number|string], options?: {name: value}}",
            "ensure_app" => {
                "{app: string, argv?: [string], desktop_id?: string, wm_class?: string}"
            }
            _ => "{app: string, window_id?: integer}",
        };
        let message = e.to_string();
        let message = if message.chars().count() > 200 {
            format!("{}…", message.chars().take(200).collect::<String>())
        } else {
            message
        };
        invalid_params(format!("bad args for {op}: {message}; expected {shape}"))
    })
}

/// The `action.capabilities` result: the four ops with their schemas, and the `niri`
/// command table (`niri_commands`: name, doc, params, options, whether sway can do it).
pub fn capabilities() -> Value {
    let names: Vec<&str> = TABLE.actions().iter().map(|a| a.name.as_str()).collect();
    let app = json!({"type": "string", "minLength": 1, "maxLength": MAX_NAME,
        "description": "The app: its Wayland app_id, X11 class or desktop id (matched exactly, then ignoring case, then as desktop ids)."});
    let window_id = json!({"type": "integer", "minimum": 0,
        "description": "One window of the app (its id in context.snapshot)."});
    let niri_schema = json!({
        "type": "object",
        "required": ["command"],
        "additionalProperties": false,
        "properties": {
            "command": {"type": "string", "enum": names,
                "description": "niri's action name, as in `niri msg action <command>`."},
            "args": {"type": "array", "maxItems": MAX_ARGV + 8,
                "items": {"type": ["integer", "string"], "maxLength": MAX_ARG},
                "description": "Positional values, e.g. [2] for focus-workspace, or the program and its arguments for spawn: [\"foot\", \"--server\"]."},
            "options": {"type": "object", "maxProperties": 8,
                "additionalProperties": {"type": ["boolean", "integer", "string"],
                    "maxLength": crate::table::MAX_STRING},
                "description": "Named options, e.g. {\"focus\": false}, or {\"state\": \"off\"} for fullscreen-window."}
        }
    });
    let focus_schema = json!({
        "type": "object", "required": ["app"], "additionalProperties": false,
        "properties": {"app": app, "window_id": window_id}
    });
    let ensure_schema = json!({
        "type": "object", "required": ["app"], "additionalProperties": false,
        "properties": {
            "app": app,
            "argv": {"type": "array", "minItems": 1, "maxItems": 64,
                "items": {"type": "string", "maxLength": 4096},
                "description": "The program and its arguments, started through the compositor when no window is open."},
            "desktop_id": {"type": "string", "minLength": 1, "maxLength": MAX_NAME,
                "description": "A desktop file id to start from when no argv is given; also matched against app_ids."},
            "wm_class": {"type": "string", "minLength": 1, "maxLength": MAX_NAME,
                "description": "Another app_id/class to recognise the app's windows by."}
        }
    });
    let op = |name: &str, confirm: bool, schema: Value, undo: Value| json!({"op": name, "side_effect": true, "needs_confirm": confirm, "args_schema": schema, "undo": undo});
    // How the runner undoes each op (utter-core's `undo`): from the journal's args, this
    // plugin's result and the desktop before the step.
    let niri_undo: Vec<Value> = TABLE
        .actions()
        .iter()
        .flat_map(|a| a.undo_rules(TABLE.actions()).unwrap_or_default())
        .collect();
    let focus_before = json!({
        "steps": [{"op": "focus_app", "args": {"app": "$before.focused.app_id",
                                               "window_id": "$before.focused.id"}}],
        "requires": {"window": "$before.focused.id"}});
    let workspace_before = json!({
        "steps": [{"op": "niri", "args": {"command": "focus-workspace",
                                          "args": ["$before.workspace.index"]}}]});
    let ensure_undo = json!([
        {"when": {"$result.launched": true},
         "steps": [{"op": "close_app", "args": {"app": "$args.app", "window_id": "$result.window.id"}}],
         "requires": {"window": "$result.window.id"}, "confirm": true},
        focus_before, workspace_before,
    ]);
    json!({
        "ops": [
            op("niri", false, niri_schema, Value::Array(niri_undo)),
            op("ensure_app", false, ensure_schema, ensure_undo),
            op("focus_app", false, focus_schema.clone(), json!([focus_before, workspace_before])),
            op("close_app", true, focus_schema,
                json!([{"none": "a closed window cannot be opened again as it was"}])),
        ],
        "niri_commands": TABLE.actions().iter().map(|a| a.describe()).collect::<Vec<_>>(),
    })
}

/// The background connector: try, and try again every [`RETRY_EVERY`], until connected or
/// the service is gone.
async fn connect_in_background(inner: Weak<Inner>) {
    let mut warned = false;
    loop {
        let Some(strong) = inner.upgrade() else {
            return;
        };
        let service = Service { inner: strong };
        let detected = service.inner.detected.clone();
        let attempt = tokio::time::timeout(CONNECT_TIMEOUT, Backend::connect(&detected)).await;
        let error = match attempt {
            Ok(Ok(backend)) => {
                let backend = Arc::new(backend);
                tracing::info!(
                    compositor = backend.name(),
                    version = backend.version().as_deref().unwrap_or("?"),
                    "connected"
                );
                let _tracker = service.inner.focus.track(backend.state());
                service.inner.connection.send_modify(|c| {
                    c.backend = Some(backend);
                    c.last_error = None;
                    c.attempts += 1;
                });
                return;
            }
            Ok(Err(e)) => service.explain(&e),
            Err(_) => format!(
                "connecting to {} at {} timed out after {} s (is it hung?); retrying in the background",
                detected.name(),
                service.socket_shown(),
                CONNECT_TIMEOUT.as_secs()
            ),
        };
        if !warned {
            warned = true;
            tracing::warn!("{}", clean(&error));
        } else {
            tracing::debug!("{}", clean(&error));
        }
        service.inner.connection.send_modify(|c| {
            c.last_error = Some(error);
            c.attempts += 1;
        });
        drop(service);
        tokio::time::sleep(RETRY_EVERY).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_list_the_ops_and_the_vocabulary() {
        let caps = capabilities();
        let ops = caps["ops"].as_array().expect("ops");
        let names: Vec<&str> = ops.iter().filter_map(|o| o["op"].as_str()).collect();
        assert_eq!(names, OPS);
        for op in ops {
            assert_eq!(op["side_effect"], true);
            assert_eq!(op["needs_confirm"], op["op"] == "close_app");
            assert_eq!(op["args_schema"]["type"], "object");
        }
        let commands = ops[0]["args_schema"]["properties"]["command"]["enum"]
            .as_array()
            .expect("enum");
        assert!(commands.contains(&json!("focus-workspace")));
        assert_eq!(commands.len(), TABLE.actions().len());
    }

    #[tokio::test]
    async fn bad_invocations_get_the_right_codes_without_a_compositor() {
        let service = Service::new(Detected::None);
        let code = |params: Value| {
            let service = service.clone();
            async move { service.invoke(params).await.map_err(|e| e.code) }
        };
        assert_eq!(code(json!({"op": "fly", "args": {}})).await, Err(-32601));
        assert_eq!(code(json!({"args": {}})).await, Err(-32602));
        assert_eq!(code(json!({"op": "niri", "args": []})).await, Err(-32602));
        assert_eq!(code(json!({"op": "niri", "args": {}})).await, Err(-32602));
        assert_eq!(
            code(json!({"op": "niri", "args": {"command": "nope"}})).await,
            Err(-32602)
        );
        assert_eq!(
            code(json!({"op": "niri", "args": {"command": "focus-workspace", "args": [{}]}})).await,
            Err(-32602)
        );
        assert_eq!(
            code(json!({"op": "niri", "args": {"command": "focus-workspace", "args": [2]}})).await,
            Err(-32000)
        );
        assert_eq!(
            code(json!({"op": "focus_app", "args": {"app": ""}})).await,
            Err(-32602)
        );
        assert_eq!(
            code(json!({"op": "focus_app", "args": {"app": "x", "title": "y"}})).await,
            Err(-32602)
        );
        assert_eq!(
            code(json!({"op": "close_app", "args": {"app": "x"}, "dry_run": "yes"})).await,
            Err(-32602)
        );
        let err = service
            .snapshot(&json!({}))
            .await
            .expect_err("no compositor");
        assert_eq!(err.code, -32000);
        assert!(
            err.message
                .contains("NIRI_SOCKET, HYPRLAND_INSTANCE_SIGNATURE, SWAYSOCK, I3SOCK"),
            "{}",
            err.message
        );
        let health = service.health().await;
        assert_eq!(health.status, HealthStatus::Degraded);
    }

    #[test]
    fn a_huge_window_id_is_out_of_range_not_fractional() {
        let e = parse::<FocusArgs>(
            "focus_app",
            serde_json::from_str(r#"{"app": "x", "window_id": 1180591620717411303424}"#).unwrap(),
        )
        .expect_err("too big");
        assert!(e.message.contains("out of range"), "{}", e.message);
        let e = parse::<FocusArgs>("focus_app", json!({"app": "x", "window_id": 1.5}))
            .expect_err("a fraction");
        assert!(e.message.contains("whole number"), "{}", e.message);
        let ok = parse::<FocusArgs>("focus_app", json!({"app": "x", "window_id": 7})).unwrap();
        assert_eq!(ok.window_id, Some(7));
        let none = parse::<FocusArgs>("focus_app", json!({"app": "x"})).unwrap();
        assert_eq!(none.window_id, None);
    }

    #[test]
    fn a_monitor_action_with_no_monitor_there_is_refused() {
        let output = |name: &str, focused, x: Option<i64>| Output {
            name: name.into(),
            focused,
            width: Some(1000),
            height: Some(800),
            x,
            y: x.map(|_| 0),
            ..Default::default()
        };
        let one = Snapshot {
            outputs: vec![output("HEADLESS-1", true, Some(0))],
            ..Default::default()
        };
        let e = no_monitor_there(&one, MonitorDirection::Right, "focus-monitor-right")
            .expect("refused");
        assert_eq!(e.code, -32000);
        assert_eq!(e.message, "there is no monitor to the right of HEADLESS-1");
        assert!(no_monitor_there(&one, MonitorDirection::Next, "focus-monitor-next").is_some());
        // Two side by side: right exists, left and up do not.
        let two = Snapshot {
            outputs: vec![
                output("DP-1", true, Some(0)),
                output("DP-2", false, Some(1000)),
            ],
            ..Default::default()
        };
        assert!(no_monitor_there(&two, MonitorDirection::Right, "x").is_none());
        assert!(no_monitor_there(&two, MonitorDirection::Next, "x").is_none());
        let e = no_monitor_there(&two, MonitorDirection::Left, "x").expect("none left");
        assert_eq!(e.message, "there is no monitor to the left of DP-1");
        assert!(no_monitor_there(&two, MonitorDirection::Up, "x").is_some());
        // Positions unknown: only the count decides.
        let unknown = Snapshot {
            outputs: vec![output("DP-1", true, None), output("DP-2", false, None)],
            ..Default::default()
        };
        assert!(no_monitor_there(&unknown, MonitorDirection::Left, "x").is_none());
        // A second output that is off does not count.
        let mut off = two.clone();
        off.outputs[1].width = None;
        assert!(no_monitor_there(&off, MonitorDirection::Right, "x").is_some());
        // No focused output known: nothing is claimed.
        let mut unfocused = one.clone();
        unfocused.outputs[0].focused = false;
        assert!(no_monitor_there(&unfocused, MonitorDirection::Right, "x").is_none());
    }

    #[test]
    fn window_state_checks_follow_the_wanted_state() {
        let window = |fullscreen, floating| Window {
            id: 7,
            fullscreen,
            floating,
            ..Default::default()
        };
        let with = |w: Window| Snapshot {
            windows: vec![w],
            ..Default::default()
        };
        let before = with(window(Some(false), Some(false)));
        let check = |verify, wanted| Check {
            verify,
            before: &before,
            target: Some(7),
            reference: None,
            wanted,
        };
        let off = check(Verify::Fullscreen, Some(WantedState::Off));
        assert!(off.holds(&before), "already off holds at once");
        let on = check(Verify::Fullscreen, Some(WantedState::On));
        assert!(!on.holds(&before));
        assert!(on.holds(&with(window(Some(true), Some(false)))));
        let toggle = check(Verify::Fullscreen, Some(WantedState::Toggle));
        assert!(!toggle.holds(&before));
        assert!(toggle.holds(&with(window(Some(true), Some(false)))));
        assert!(!toggle.holds(&with(window(None, Some(false)))));
        let float = check(Verify::FloatingOn, None);
        assert!(!float.holds(&before));
        assert!(float.holds(&with(window(Some(false), Some(true)))));
        assert!(check(Verify::FloatingOff, None).holds(&before));
        let flip = check(Verify::FloatingFlipped, None);
        assert!(flip.holds(&with(window(Some(false), Some(true)))));
        let opened = check(Verify::WindowOpened, None);
        assert!(!opened.holds(&before));
        let mut more = before.clone();
        more.windows.push(Window {
            id: 8,
            ..Default::default()
        });
        assert!(opened.holds(&more));
        assert_eq!(opened.opened(&more).map(|w| w.id), Some(8));
    }

    #[test]
    fn checks_compare_with_the_snapshot_before() {
        let ws = |id, index: i64, focused| crate::model::Workspace {
            id,
            index: Some(index),
            name: Some(index.to_string()),
            focused,
            ..Default::default()
        };
        let before = Snapshot {
            workspaces: vec![ws(1, 1, true), ws(2, 2, false)],
            ..Default::default()
        };
        let after = Snapshot {
            workspaces: vec![ws(1, 1, false), ws(2, 2, true)],
            ..Default::default()
        };
        let two = Arg::WorkspaceIndex(2);
        let check = Check {
            verify: Verify::FocusedWorkspace,
            before: &before,
            target: None,
            reference: Some(&two),
            wanted: None,
        };
        assert!(!check.holds(&before));
        assert!(check.holds(&after));
        let any = Check {
            verify: Verify::Any,
            ..check
        };
        assert!(!any.holds(&before));
        assert!(any.holds(&after));
    }
}
