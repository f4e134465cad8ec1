//! The plugin's methods: `action.capabilities`, `action.invoke` (`key`, `type_keys`,
//! `scroll`, `click_point`, `pointer_move`) and `plugin.health`.

use crate::device::{DeviceStatus, Devices, Sent};
use crate::keys::{self, KeyError};
use crate::wayland::PointerAction;
use serde_json::{Value, json};
use std::time::Duration;
use utter_protocol::connection::Connection;
use utter_protocol::handshake::{HealthResult, HealthStatus};
use utter_protocol::plugin::{Call, Handler};
use utter_protocol::{ErrorCode, ErrorObject};

/// The ops this plugin serves, in `action.capabilities` order.
pub const OPS: [&str; 6] = [
    "key",
    "type_keys",
    "scroll",
    "click_point",
    "pointer_move",
    "terminal",
];
/// The most presses of one `key` call.
pub const MAX_REPEAT: u64 = 50;
/// The most wheel steps of one `scroll` call.
pub const MAX_SCROLL: u64 = 100;
/// Wheel steps of a `scroll` without `amount`.
pub const DEFAULT_SCROLL: u64 = 5;
/// How long focusing `app` may take (the compositor plugin watches for the focus itself).
const FOCUS_WAIT: Duration = Duration::from_millis(3000);
/// How long a `host.context` read may take.
const CONTEXT_WAIT: Duration = Duration::from_millis(1500);
/// The longest `app` accepted.
const MAX_APP: usize = 256;

/// Linux input button codes (`linux/input-event-codes.h`).
const BTN_LEFT: u32 = 0x110;
const BTN_RIGHT: u32 = 0x111;
const BTN_MIDDLE: u32 = 0x112;

fn plugin_error(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(ErrorCode::PluginError, message)
}

fn invalid(message: impl Into<String>) -> ErrorObject {
    ErrorObject::invalid_params(message)
}

/// A bad key name or chord is invalid params.
fn bad_keys(e: KeyError) -> ErrorObject {
    invalid(e.to_string())
}

/// The plugin's state: the devices, opened at start.
#[derive(Default)]
pub struct Service {
    devices: Devices,
}

impl Service {
    /// A service with its devices (the owner thread connects at once).
    pub fn new() -> Service {
        Service::default()
    }

    /// `plugin.health`: `ok` with the backends in use, `degraded` with why none is.
    pub async fn health(&self) -> HealthResult {
        let s = self.devices.checked_status(Duration::from_secs(2)).await;
        let detail = status_line(&s);
        let status = if s.keyboard.is_some() || s.pointer.is_some() {
            HealthStatus::Ok
        } else {
            HealthStatus::Degraded
        };
        HealthResult { status, detail }
    }

    /// The backend a dry run would use, or the error a real call would get: a dry run that
    /// says "would press" must not hide that nothing could be pressed.
    async fn ready(&self, device: Device) -> Result<&'static str, ErrorObject> {
        let s = self.devices.checked_status(Duration::from_secs(2)).await;
        let backend = match device {
            Device::Keyboard => s.keyboard,
            Device::Pointer => s.pointer,
        };
        backend.ok_or_else(|| {
            let what = match device {
                Device::Keyboard => "keyboard",
                Device::Pointer => "pointer",
            };
            plugin_error(format!(
                "no virtual {what} is available, so nothing could be sent ({})",
                s.unavailable.join("; ")
            ))
        })
    }

    async fn invoke(&self, params: &Value, peer: &Connection) -> Result<Value, ErrorObject> {
        let op = params.get("op").and_then(Value::as_str).unwrap_or("");
        let args = params.get("args").cloned().unwrap_or_else(|| json!({}));
        if !args.is_object() {
            return Err(invalid("args must be an object"));
        }
        let dry_run = utter_protocol::plugin::dry_run(params)?;
        let context = params.get("context").filter(|c| c.is_object()).cloned();
        match op {
            "key" => self.key(&args, dry_run, context, peer).await,
            "type_keys" => self.type_keys(&args, dry_run, context, peer).await,
            "terminal" => self.terminal(&args, dry_run, context, peer).await,
            "scroll" => self.scroll(&args, dry_run, context, peer).await,
            "click_point" | "pointer_move" => {
                self.point(op, &args, dry_run, context.as_ref()).await
            }
            other => Err(ErrorObject::new(
                ErrorCode::MethodNotFound,
                format!(
                    "unknown op {other:?}; this plugin serves {}",
                    OPS.join(", ")
                ),
            )),
        }
    }

    async fn key(
        &self,
        args: &Value,
        dry_run: bool,
        context: Option<Value>,
        peer: &Connection,
    ) -> Result<Value, ErrorObject> {
        only_keys(args, &["chord", "repeat", "app", "window_id"])?;
        let Some(chord) = args.get("chord").and_then(Value::as_str) else {
            return Err(invalid(
                "key needs a string chord of X keysym names, e.g. \"Return\" or \"ctrl+shift+t\"",
            ));
        };
        let chord = keys::parse_chord(chord).map_err(bad_keys)?;
        let repeat = match args.get("repeat") {
            None | Some(Value::Null) => 1,
            Some(v) => v
                .as_u64()
                .filter(|n| (1..=MAX_REPEAT).contains(n))
                .ok_or_else(|| {
                    invalid(format!("repeat must be an integer from 1 to {MAX_REPEAT}"))
                })?,
        };
        let target = Target::from_args(args)?;
        let name = chord.canonical();
        let times = if repeat == 1 {
            String::new()
        } else {
            format!(" {repeat} times")
        };
        if dry_run {
            let backend = self.ready(Device::Keyboard).await?;
            return Ok(
                json!({"ok": true, "dry_run": true, "path": "keyboard", "chord": name, "backend": backend,
                "detail": format!("would press {name}{times}{}", target.phrase())}),
            );
        }
        let focused = target.focus(peer, context.as_ref()).await?;
        let sent = self
            .devices
            .chord(&chord, repeat as u32)
            .await
            .map_err(plugin_error)?;
        Ok(json!({
            "ok": true,
            "path": "keyboard",
            "backend": sent.backend,
            "chord": name,
            "presses": sent.presses,
            "verified": false,
            "focused": focused,
            "detail": format!(
                "pressed {name}{times} through the {} on {}; the compositor took every event (what the application did with them is not read back)",
                backend_phrase(&sent), sent.display
            ),
        }))
    }

    async fn type_keys(
        &self,
        args: &Value,
        dry_run: bool,
        context: Option<Value>,
        peer: &Connection,
    ) -> Result<Value, ErrorObject> {
        only_keys(args, &["text", "app", "window_id"])?;
        let Some(text) = args.get("text").and_then(Value::as_str) else {
            return Err(invalid("type_keys needs a string text"));
        };
        let keysyms = keys::text_keysyms(text).map_err(bad_keys)?;
        let target = Target::from_args(args)?;
        // What is typed: "\r\n" is one Return.
        let n = keysyms.len();
        if dry_run {
            let backend = self.ready(Device::Keyboard).await?;
            return Ok(
                json!({"ok": true, "dry_run": true, "path": "keyboard", "length": n, "backend": backend,
                "detail": format!("would type {n} character(s) as keystrokes{}", target.phrase())}),
            );
        }
        let focused = target.focus(peer, context.as_ref()).await?;
        let sent = self
            .devices
            .type_keysyms(&keysyms)
            .await
            .map_err(plugin_error)?;
        Ok(json!({
            "ok": true,
            "path": "keyboard",
            "backend": sent.backend,
            "length": n,
            "presses": sent.presses,
            "verified": false,
            "focused": focused,
            "detail": format!(
                "typed {n} character(s) as keystrokes through the {} on {}; the compositor took every key (the text is not read back here)",
                backend_phrase(&sent), sent.display
            ),
        }))
    }

    /// `terminal {command, app?, window_id?}`: type one command line into the terminal and
    /// press Return. The runner keeps this op off by default and confirms every use; `app`
    /// (the terminal the router saw focused) is focused again, and seen focused, before a
    /// key is sent, so a command never lands in another window.
    async fn terminal(
        &self,
        args: &Value,
        dry_run: bool,
        context: Option<Value>,
        peer: &Connection,
    ) -> Result<Value, ErrorObject> {
        only_keys(args, &["command", "app", "window_id"])?;
        let Some(command) = args.get("command").and_then(Value::as_str) else {
            return Err(invalid("terminal needs a string command"));
        };
        let command = command.trim();
        if command.chars().any(char::is_control) {
            return Err(invalid(
                "terminal takes one command line: no newline or other control character",
            ));
        }
        let mut keysyms = keys::text_keysyms(command).map_err(bad_keys)?;
        keysyms.push(xkeysym::Keysym::Return);
        let target = Target::from_args(args)?;
        if dry_run {
            let backend = self.ready(Device::Keyboard).await?;
            return Ok(
                json!({"ok": true, "dry_run": true, "path": "keyboard", "backend": backend,
                "detail": format!("would type {command:?} and press Return{}", target.phrase())}),
            );
        }
        let focused = target.focus(peer, context.as_ref()).await?;
        let sent = self
            .devices
            .type_keysyms(&keysyms)
            .await
            .map_err(plugin_error)?;
        Ok(json!({
            "ok": true,
            "path": "keyboard",
            "backend": sent.backend,
            "presses": sent.presses,
            "verified": false,
            "focused": focused,
            "detail": format!(
                "typed {command:?} and pressed Return{} through the {} on {}; what the shell did is not read back",
                target.phrase(), backend_phrase(&sent), sent.display
            ),
        }))
    }

    async fn scroll(
        &self,
        args: &Value,
        dry_run: bool,
        context: Option<Value>,
        peer: &Connection,
    ) -> Result<Value, ErrorObject> {
        only_keys(args, &["direction", "amount", "app", "window_id"])?;
        let direction = args.get("direction").and_then(Value::as_str).unwrap_or("");
        let (horizontal, sign) = match direction {
            "down" => (false, 1),
            "up" => (false, -1),
            "right" => (true, 1),
            "left" => (true, -1),
            _ => {
                return Err(invalid(
                    "scroll needs direction \"up\", \"down\", \"left\" or \"right\"",
                ));
            }
        };
        let amount = match args.get("amount") {
            None | Some(Value::Null) => DEFAULT_SCROLL,
            Some(v) => v
                .as_u64()
                .filter(|n| (1..=MAX_SCROLL).contains(n))
                .ok_or_else(|| {
                    invalid(format!(
                        "amount must be an integer from 1 to {MAX_SCROLL} (wheel steps)"
                    ))
                })?,
        };
        let target = Target::from_args(args)?;
        if dry_run {
            let backend = self.ready(Device::Pointer).await?;
            return Ok(
                json!({"ok": true, "dry_run": true, "path": "pointer", "backend": backend,
                "detail": format!("would scroll {direction} {amount} step(s){}", target.phrase())}),
            );
        }
        let focused = target.focus(peer, context.as_ref()).await?;
        // Scrolling goes to the surface under the pointer: put it over the focused window
        // first when the context says where that is.
        let context = if focused.is_some() {
            fresh_context(peer).await.or(context)
        } else {
            context
        };
        let mut actions = Vec::new();
        // A window partly off the screens has its centre outside them: scroll where the
        // pointer is then, rather than refusing.
        let aimed = context
            .as_ref()
            .and_then(focused_centre)
            .and_then(|(point, layout)| Some((point, layout.move_to(point).ok()?)));
        if let Some((_, motion)) = aimed {
            actions.push(motion);
        }
        actions.push(PointerAction::Scroll {
            horizontal,
            steps: sign * amount as i32,
        });
        let sent = self.devices.pointer(actions).await.map_err(plugin_error)?;
        let at = match aimed {
            Some(((x, y), _)) => format!("over the focused window (at {x}, {y})"),
            None => {
                "where the pointer is (the context gives no on-screen window geometry)".to_owned()
            }
        };
        Ok(json!({
            "ok": true,
            "path": "pointer",
            "backend": sent.backend,
            "direction": direction,
            "amount": amount,
            "verified": false,
            "detail": format!(
                "scrolled {direction} {amount} wheel step(s) {at} through the {} on {}; whether the view moved is not read back",
                backend_phrase(&sent), sent.display
            ),
        }))
    }

    async fn point(
        &self,
        op: &str,
        args: &Value,
        dry_run: bool,
        context: Option<&Value>,
    ) -> Result<Value, ErrorObject> {
        let click = op == "click_point";
        if click {
            only_keys(args, &["x", "y", "button", "count"])?;
        } else {
            only_keys(args, &["x", "y"])?;
        }
        let coordinate = |k: &str| {
            args.get(k)
                .and_then(Value::as_i64)
                .filter(|v| (-MAX_COORDINATE..=MAX_COORDINATE).contains(v))
                .ok_or_else(|| invalid(format!("{op} needs an integer {k} in layout pixels")))
        };
        let point = (coordinate("x")?, coordinate("y")?);
        let (button, button_name) = match args.get("button").and_then(Value::as_str) {
            None if args.get("button").is_none_or(Value::is_null) => (BTN_LEFT, "left"),
            Some("left") => (BTN_LEFT, "left"),
            Some("right") => (BTN_RIGHT, "right"),
            Some("middle") => (BTN_MIDDLE, "middle"),
            _ => return Err(invalid("button must be \"left\", \"right\" or \"middle\"")),
        };
        let count = match args.get("count") {
            None | Some(Value::Null) => 1,
            Some(v) => v
                .as_u64()
                .filter(|n| (1..=3).contains(n))
                .ok_or_else(|| invalid("count must be 1, 2 or 3 (a double click is 2)"))?,
        };
        let layout = context.and_then(Layout::from_context).ok_or_else(|| {
            plugin_error(format!(
                "{op} needs the desktop context's outputs to know the screen's size; the compositor plugin gives none"
            ))
        })?;
        let motion = layout.move_to(point)?;
        let what = if click {
            format!(
                "{button_name} click{} at ({}, {})",
                if count > 1 {
                    format!(" ×{count}")
                } else {
                    String::new()
                },
                point.0,
                point.1
            )
        } else {
            format!("pointer to ({}, {})", point.0, point.1)
        };
        if dry_run {
            let backend = self.ready(Device::Pointer).await?;
            return Ok(
                json!({"ok": true, "dry_run": true, "path": "pointer", "backend": backend,
                "detail": format!("would move the {what}")}),
            );
        }
        let mut actions = vec![motion];
        if click {
            actions.push(PointerAction::Click {
                button,
                count: count as u32,
            });
        }
        let sent = self.devices.pointer(actions).await.map_err(plugin_error)?;
        Ok(json!({
            "ok": true,
            "path": "pointer",
            "backend": sent.backend,
            "x": point.0,
            "y": point.1,
            "verified": false,
            "detail": format!(
                "{} {what} through the {} on {}; what it hit is not read back",
                if click { "sent a" } else { "moved the" },
                backend_phrase(&sent),
                sent.display
            ),
        }))
    }
}

fn backend_phrase(sent: &Sent) -> &'static str {
    match sent.backend {
        crate::device::WAYLAND_KEYBOARD => "Wayland virtual keyboard (zwp_virtual_keyboard_v1)",
        crate::device::WAYLAND_POINTER => "wlr virtual pointer (zwlr_virtual_pointer_v1)",
        crate::device::UINPUT => "uinput keyboard",
        crate::device::UINPUT_WHEEL => "uinput wheel and buttons",
        crate::eis::EIS_BACKEND => "libei emulated-input device",
        _ => "virtual device",
    }
}

/// One line for `plugin.health`: what is in use and why the rest is not.
pub fn status_line(s: &DeviceStatus) -> String {
    let mut parts = Vec::new();
    let on = |backend: &str| match (backend, &s.display, &s.layout) {
        (crate::device::UINPUT, _, Some(layout)) => format!("{backend} (layout {layout})"),
        (crate::device::UINPUT | crate::device::UINPUT_WHEEL, _, _) => backend.to_owned(),
        (crate::eis::EIS_BACKEND, _, _) => match &s.eis_source {
            Some(from) => format!("{backend} from {from}"),
            None => backend.to_owned(),
        },
        (_, Some(d), _) => format!("{backend} on {d}"),
        _ => backend.to_owned(),
    };
    parts.push(format!(
        "keyboard: {}",
        s.keyboard.map_or("none".into(), on)
    ));
    parts.push(format!("pointer: {}", s.pointer.map_or("none".into(), on)));
    if !s.unavailable.is_empty() {
        parts.push(format!("not in use: {}", s.unavailable.join("; ")));
    }
    parts.join("; ")
}

fn only_keys(args: &Value, allowed: &[&str]) -> Result<(), ErrorObject> {
    if let Some(map) = args.as_object() {
        if let Some(k) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(invalid(format!(
                "unknown argument {:?}; this op takes {}",
                utter_protocol::text::escape_unprintable(k, 64).0,
                allowed.join(", ")
            )));
        }
    }
    Ok(())
}

/// The two devices.
#[derive(Debug, Clone, Copy)]
enum Device {
    Keyboard,
    Pointer,
}

/// Which window a keyboard or scroll op acts in: `app` is focused first (through the
/// runner's gate, `host.action focus_app`); `window_id` alone must be the focused window.
#[derive(Debug, Default)]
struct Target {
    app: Option<String>,
    window_id: Option<u64>,
}

impl Target {
    fn from_args(args: &Value) -> Result<Target, ErrorObject> {
        let app = match args.get("app") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if !s.trim().is_empty() && s.chars().count() <= MAX_APP => {
                Some(s.trim().to_owned())
            }
            Some(_) => {
                return Err(invalid(format!(
                    "app must be a non-empty string of at most {MAX_APP} characters"
                )));
            }
        };
        let window_id = match args.get("window_id") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .ok_or_else(|| invalid("window_id must be a non-negative integer"))?,
            ),
        };
        Ok(Target { app, window_id })
    }

    fn phrase(&self) -> String {
        match (&self.app, self.window_id) {
            (Some(app), _) => format!(" in {app} (focused first)"),
            (None, Some(id)) => format!(" in window {id}"),
            (None, None) => " in the focused window".to_owned(),
        }
    }

    /// Focus the target when one is named; `Some(verified)` when it was focused here.
    async fn focus(
        &self,
        peer: &Connection,
        context: Option<&Value>,
    ) -> Result<Option<Value>, ErrorObject> {
        let Some(app) = &self.app else {
            if let Some(id) = self.window_id {
                let focused = context
                    .and_then(|c| c.pointer("/focused/id"))
                    .and_then(Value::as_u64);
                if focused != Some(id) {
                    return Err(plugin_error(format!(
                        "window {id} is not the focused window; name its app to focus it first"
                    )));
                }
            }
            return Ok(None);
        };
        let mut focus_args = json!({"app": app});
        if let Some(id) = self.window_id {
            focus_args["window_id"] = json!(id);
        }
        let step = peer
            .request(
                "host.action",
                json!({"op": "focus_app", "args": focus_args}),
                Some(FOCUS_WAIT),
            )
            .await
            .map_err(|e| plugin_error(format!("focusing {app} first failed: {}", e.message)))?;
        if let Some(why) = utter_protocol::plugin::step_failure(&step) {
            return Err(plugin_error(format!(
                "focusing {app} first failed: {}",
                utter_protocol::text::escape_unprintable(why, 300).0
            )));
        }
        if step.get("verified").and_then(Value::as_bool) == Some(false) {
            return Err(plugin_error(format!(
                "{app} was asked to take the focus but the compositor does not show it focused; nothing was sent"
            )));
        }
        Ok(Some(
            json!({"app": app, "verified": step.get("verified").cloned().unwrap_or(Value::Null)}),
        ))
    }
}

async fn fresh_context(peer: &Connection) -> Option<Value> {
    let answer = peer
        .request("host.context", json!({}), Some(CONTEXT_WAIT))
        .await
        .ok()?;
    let snapshot = utter_protocol::provenance::untagged(answer.get("snapshot")?);
    snapshot.is_object().then_some(snapshot)
}

/// The output layout's bounding box, from the context's outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    x: i64,
    y: i64,
    width: i64,
    height: i64,
}

impl Layout {
    fn from_context(context: &Value) -> Option<Layout> {
        let outputs = context.get("outputs")?.as_array()?;
        let boxes: Vec<(i64, i64, i64, i64)> = outputs
            .iter()
            .filter_map(|o| {
                let n = |k: &str| o.get(k).and_then(Value::as_i64);
                Some((n("x")?, n("y")?, n("width")?, n("height")?))
            })
            .filter(|&b| sane(b))
            .collect();
        if boxes.is_empty() {
            return None;
        }
        let x = boxes.iter().map(|b| b.0).min()?;
        let y = boxes.iter().map(|b| b.1).min()?;
        let right = boxes.iter().map(|b| b.0 + b.2).max()?;
        let bottom = boxes.iter().map(|b| b.1 + b.3).max()?;
        Some(Layout {
            x,
            y,
            width: right - x,
            height: bottom - y,
        })
    }

    fn move_to(&self, (x, y): (i64, i64)) -> Result<PointerAction, ErrorObject> {
        let inside =
            x >= self.x && y >= self.y && x < self.x + self.width && y < self.y + self.height;
        if !inside {
            return Err(invalid(format!(
                "({x}, {y}) is outside the screens, which span ({}, {}) to ({}, {})",
                self.x,
                self.y,
                self.x + self.width - 1,
                self.y + self.height - 1
            )));
        }
        let u = |v: i64| u32::try_from(v).unwrap_or(u32::MAX);
        Ok(PointerAction::MoveTo {
            x: u(x - self.x),
            y: u(y - self.y),
            width: u(self.width),
            height: u(self.height),
        })
    }
}

/// The centre of the focused window and the layout, when the context has both.
fn focused_centre(context: &Value) -> Option<((i64, i64), Layout)> {
    let layout = Layout::from_context(context)?;
    let rect = context.pointer("/focused/rect").or_else(|| {
        let id = context.pointer("/focused/id")?;
        context
            .get("windows")?
            .as_array()?
            .iter()
            .find(|w| w.get("id") == Some(id))?
            .get("rect")
    })?;
    let n = |k: &str| rect.get(k).and_then(Value::as_i64);
    let (x, y, w, h) = (n("x")?, n("y")?, n("width")?, n("height")?);
    sane((x, y, w, h)).then(|| ((x + w / 2, y + h / 2), layout))
}

/// The largest coordinate and side a context may give for an output or a window, in
/// logical pixels: the context is untrusted, and numbers beyond these are no screen.
const MAX_COORDINATE: i64 = 1 << 20;
const MAX_SIDE: i64 = 1 << 16;

/// Whether a rectangle `(x, y, width, height)` from the context can be a real one.
fn sane((x, y, w, h): (i64, i64, i64, i64)) -> bool {
    (-MAX_COORDINATE..=MAX_COORDINATE).contains(&x)
        && (-MAX_COORDINATE..=MAX_COORDINATE).contains(&y)
        && (1..=MAX_SIDE).contains(&w)
        && (1..=MAX_SIDE).contains(&h)
}

/// `action.capabilities`: the ops with their argument schemas.
pub fn capabilities() -> Value {
    let target = json!({
        "app": {"type": "string", "minLength": 1, "maxLength": MAX_APP},
        "window_id": {"type": "integer", "minimum": 0}
    });
    let with_target = |mut props: Value| {
        for (k, v) in target.as_object().expect("object") {
            props[k] = v.clone();
        }
        props
    };
    let op = |name: &str, props: Value, required: &[&str]| {
        json!({"op": name, "side_effect": true, "needs_confirm": false, "args_schema": {
            "type": "object", "properties": props, "required": required,
            "additionalProperties": false}})
    };
    let xy = json!({"x": {"type": "integer"}, "y": {"type": "integer"}});
    // The shell runs what it is given: the runner confirms every use.
    let mut terminal = op(
        "terminal",
        with_target(json!({
            "command": {"type": "string", "minLength": 1, "maxLength": keys::MAX_TYPED}
        })),
        &["command"],
    );
    terminal["needs_confirm"] = json!(true);
    let mut click = xy.clone();
    click["button"] = json!({"enum": ["left", "right", "middle"]});
    click["count"] = json!({"type": "integer", "minimum": 1, "maximum": 3});
    let mut ops = json!([
        op(
            "key",
            with_target(json!({
                "chord": {"type": "string", "minLength": 1, "maxLength": keys::MAX_CHORD_LEN},
                "repeat": {"type": "integer", "minimum": 1, "maximum": MAX_REPEAT}
            })),
            &["chord"]
        ),
        op(
            "type_keys",
            with_target(json!({
                "text": {"type": "string", "minLength": 1, "maxLength": keys::MAX_TYPED}
            })),
            &["text"]
        ),
        op(
            "scroll",
            with_target(json!({
                "direction": {"enum": ["up", "down", "left", "right"]},
                "amount": {"type": "integer", "minimum": 1, "maximum": MAX_SCROLL}
            })),
            &["direction"]
        ),
        op("click_point", click, &["x", "y"]),
        op("pointer_move", xy, &["x", "y"]),
        terminal,
    ]);
    // How the runner undoes each op (utter-core's `undo`), from the journal.
    let none = |why: &str| json!([{"none": why}]);
    let mut scroll_undo = Vec::new();
    for (done, undo) in [
        ("up", "down"),
        ("down", "up"),
        ("left", "right"),
        ("right", "left"),
    ] {
        scroll_undo.push(json!({"when": {"direction": done},
            "steps": [{"op": "scroll", "args": {"direction": undo, "amount": "$args.amount?",
                                                "window_id": "$before.focused.id"}}],
            "requires": {"focused": "$before.focused.id"}}));
    }
    let undo = [
        none("I can't undo a key press; say \"undo\" alone to press the app's own undo"),
        json!([{"steps": [{"op": "key", "args": {"chord": "BackSpace",
                "repeat": {"$chars": "$args.text", "max": MAX_REPEAT}, "window_id": "$before.focused.id"}}],
            "requires": {"focused": "$before.focused.id"}}]),
        Value::Array(scroll_undo),
        none("a click is not undone; say \"undo\" alone to press the app's own undo"),
        none("the pointer is not moved back"),
        none("a command run in a terminal is not undone"),
    ];
    for (op, undo) in ops.as_array_mut().expect("ops").iter_mut().zip(undo) {
        op["undo"] = undo;
    }
    json!({"ops": ops})
}

impl Handler for Service {
    fn methods(&self) -> Vec<String> {
        vec!["action.capabilities".into(), "action.invoke".into()]
    }

    fn side_effect_free(&self) -> Vec<String> {
        vec!["action.capabilities".into()]
    }

    async fn health(&self) -> HealthResult {
        Service::health(self).await
    }

    async fn handle(&self, call: Call) -> Result<Value, ErrorObject> {
        match call.method.as_str() {
            "action.capabilities" => Ok(capabilities()),
            "action.invoke" => self.invoke(&call.params, &call.peer).await,
            other => Err(ErrorObject::method_not_found(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context() -> Value {
        json!({
            "outputs": [
                {"name": "A", "x": 0, "y": 0, "width": 1280, "height": 720},
                {"name": "B", "x": 1280, "y": 0, "width": 1920, "height": 1080},
                {"name": "off", "x": null, "y": null, "width": null, "height": null}
            ],
            "focused": {"id": 4},
            "windows": [{"id": 4, "rect": {"x": 1300, "y": 20, "width": 800, "height": 600}}]
        })
    }

    #[test]
    fn the_layout_spans_every_active_output() {
        let layout = Layout::from_context(&context()).unwrap();
        assert_eq!(
            layout,
            Layout {
                x: 0,
                y: 0,
                width: 3200,
                height: 1080
            }
        );
        assert_eq!(
            layout.move_to((1300, 500)).unwrap(),
            PointerAction::MoveTo {
                x: 1300,
                y: 500,
                width: 3200,
                height: 1080
            }
        );
        let e = layout.move_to((3200, 5)).unwrap_err();
        assert!(layout.move_to((i64::MIN, i64::MAX)).is_err());
        assert!(e.message.contains("outside the screens"), "{}", e.message);
        assert!(layout.move_to((-1, 5)).is_err());
        assert!(Layout::from_context(&json!({"outputs": []})).is_none());
        assert!(Layout::from_context(&json!({})).is_none());
    }

    #[test]
    fn numbers_no_screen_has_are_ignored_not_overflowed() {
        for outputs in [
            json!([{"x": i64::MAX, "y": 0, "width": 1, "height": 1}]),
            json!([{"x": i64::MIN, "y": 0, "width": 10, "height": 10},
                   {"x": 9_223_372_036_854_775_000_i64, "y": 0, "width": 10, "height": 10}]),
            json!([{"x": 0, "y": 0, "width": i64::MAX, "height": 10}]),
        ] {
            assert!(
                Layout::from_context(&json!({"outputs": outputs})).is_none(),
                "{outputs}"
            );
        }
        let hostile = json!({
            "outputs": [{"x": 0, "y": 0, "width": 100, "height": 100}],
            "focused": {"id": 1, "rect": {"x": i64::MAX, "y": 0, "width": 4, "height": 4}}
        });
        assert!(focused_centre(&hostile).is_none());
        let off_screen = json!({
            "outputs": [{"x": 0, "y": 0, "width": 10, "height": 10}],
            "focused": {"id": 1, "rect": {"x": 50, "y": 50, "width": 10, "height": 10}}
        });
        let ((x, y), layout) = focused_centre(&off_screen).unwrap();
        assert!(
            layout.move_to((x, y)).is_err(),
            "so scroll goes where the pointer is"
        );
    }

    #[test]
    fn the_focused_window_centre_comes_from_its_rect() {
        let ((x, y), _) = focused_centre(&context()).unwrap();
        assert_eq!((x, y), (1700, 320));
        let mut no_rect = context();
        no_rect["windows"][0]
            .as_object_mut()
            .unwrap()
            .remove("rect");
        assert!(focused_centre(&no_rect).is_none());
    }

    #[test]
    fn unknown_arguments_are_named() {
        let e = only_keys(&json!({"chord": "a", "evil": 1}), &["chord"]).unwrap_err();
        assert_eq!(e.code, -32602);
        assert!(e.message.contains("\"evil\""), "{}", e.message);
    }

    #[test]
    fn capabilities_name_every_op() {
        let caps = capabilities();
        let ops: Vec<&str> = caps["ops"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["op"].as_str().unwrap())
            .collect();
        assert_eq!(ops, OPS);
    }
}
