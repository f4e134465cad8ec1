//! The plugin's methods: `perception.a11y`, `context.snapshot` (the focused application,
//! for desktops without compositor IPC), `action.capabilities`, `action.invoke`
//! (`type_text`, `click_element`) and `plugin.health`.

use crate::grounding;
use crate::matching::{self, Candidate, Choice};
use crate::tree::{Bus, Limits, Node, Walk};
use atspi::proxy::editable_text::EditableTextProxy;
use atspi::proxy::text::TextProxy;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;
use utter_protocol::connection::Connection;
use utter_protocol::handshake::{HealthResult, HealthStatus};
use utter_protocol::plugin::{Call, Handler};
use utter_protocol::{ErrorCode, ErrorObject};

/// The ops this plugin serves, in `action.capabilities` order.
pub const OPS: [&str; 3] = ["type_text", "delete_text", "click_element"];
/// The longest text `type_text` inserts, in characters.
pub const MAX_TEXT: usize = 10_000;
/// The longest description `click_element` accepts, in characters.
pub const MAX_DESCRIPTION: usize = 256;
/// `perception.a11y`'s default depth bound.
pub const DEFAULT_DEPTH: usize = 12;
/// `perception.a11y`'s default node bound.
pub const DEFAULT_NODES: usize = 2000;
/// The most applications `context.snapshot` looks at for the active window.
const MAX_CONTEXT_APPS: usize = 256;
/// The largest bounds a caller may ask for.
const MAX_DEPTH: usize = 64;
const MAX_NODES: usize = 20_000;
/// The time one walk of a tree may take.
pub const BUDGET: Duration = Duration::from_millis(500);
/// The bounds the actions search within (deeper and longer than a perception read: a text
/// field or a button may sit deep in a real application).
const ACTION_LIMITS: Limits = Limits {
    max_depth: 32,
    max_nodes: 5000,
    budget: Duration::from_millis(1500),
};
/// The roles `click_element` may press.
const CLICKABLE: [&str; 10] = [
    "push button",
    "button",
    "toggle button",
    "link",
    "menu item",
    "check menu item",
    "radio menu item",
    "check box",
    "radio button",
    "push button menu",
];
/// How long an action's effect may take to show through accessibility.
const VERIFY_TIMEOUT: Duration = Duration::from_millis(1000);

/// The message when nothing editable has the focus.
pub const NO_TEXT_FIELD: &str = "no focused text field accepts text through accessibility";
/// How long the keystroke fallback (`host.action type_keys`) may take.
const KEYSTROKE_WAIT: Duration = Duration::from_secs(30);

/// Mark an error of `type_text` as one that keystrokes can get around: accessibility cannot
/// reach a field, but the focused window may still take keys (a terminal, a game).
fn keys_may_work(e: ErrorObject) -> ErrorObject {
    let mut data = match e.data.clone() {
        Some(Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    data.insert("keystrokes".into(), json!(true));
    let mut e = e;
    e.data = Some(Value::Object(data));
    e
}

fn keys_may_work_for(e: &ErrorObject) -> bool {
    e.data
        .as_ref()
        .and_then(|d| d.get("keystrokes"))
        .and_then(Value::as_bool)
        == Some(true)
}

fn plugin_error(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(ErrorCode::PluginError, message)
}

fn invalid(message: impl Into<String>) -> ErrorObject {
    ErrorObject::invalid_params(message)
}

/// The plugin's [`Handler`]: one cached connection to the accessibility bus.
#[derive(Clone, Default)]
pub struct Service {
    bus: Arc<Mutex<Option<Arc<Bus>>>>,
}

/// The application the actions work in.
/// The focused text field of the focused app, with its text interfaces.
struct FocusedField {
    app: App,
    role: String,
    /// Its accessible name (untrusted).
    name: String,
    text: TextProxy<'static>,
    editable: EditableTextProxy<'static>,
    /// The field holds one line (AT-SPI state `single-line`: an entry, not a text view).
    single_line: bool,
}

/// A field's role and accessible name, for results.
struct FieldName {
    role: String,
    name: String,
}

struct App {
    bus_name: String,
    name: String,
    pid: Option<u32>,
    /// How it was found: `"pid"`, `"active frame"` or `"focused accessible"`.
    found_by: &'static str,
}

impl App {
    fn describe(&self) -> Value {
        json!({"name": self.name, "bus_name": self.bus_name, "pid": self.pid, "found_by": self.found_by})
    }
}

impl Service {
    /// A service with nothing connected yet.
    pub fn new() -> Service {
        Service::default()
    }

    /// The accessibility bus, connected (or reconnected) on demand, with session
    /// accessibility switched on before every use.
    async fn bus(&self) -> Result<Arc<Bus>, String> {
        let mut slot = self.bus.lock().await;
        if let Some(bus) = slot.as_ref() {
            let bus = bus.clone();
            match bus.ensure_enabled().await {
                Ok(()) if bus.applications().await.is_ok() => {
                    return Ok(bus);
                }
                _ => *slot = None,
            }
        }
        let bus = Arc::new(Bus::connect().await?);
        *slot = Some(bus.clone());
        Ok(bus)
    }

    async fn bus_or_error(&self) -> Result<Arc<Bus>, ErrorObject> {
        self.bus().await.map_err(|reason| {
            plugin_error(format!("the accessibility bus is not usable: {reason}"))
        })
    }

    /// `plugin.health`.
    pub async fn health(&self) -> HealthResult {
        match self.bus().await {
            Ok(bus) => {
                let apps = bus.applications().await.map(|a| a.len()).unwrap_or(0);
                match &bus.not_enabled {
                    None => HealthResult {
                        status: HealthStatus::Ok,
                        detail: format!(
                            "accessibility on; a11y bus at {} with {apps} application(s)",
                            bus.address
                        ),
                    },
                    Some(why) => HealthResult {
                        status: HealthStatus::Degraded,
                        detail: format!(
                            "a11y bus at {} with {apps} application(s), but {why}",
                            bus.address
                        ),
                    },
                }
            }
            Err(reason) => HealthResult {
                status: HealthStatus::Degraded,
                detail: format!("the accessibility bus is not usable: {reason}"),
            },
        }
    }

    /// Find the focused application (see the crate docs for the order). With a desktop
    /// context only the application the compositor says is focused counts: the one whose
    /// accessibility connection belongs to the focused window's pid (or a process it
    /// started); any other application's claim to be active is not believed, since a
    /// background application that says so would otherwise receive what the person types.
    /// Only without a context (no compositor plugin) are the active frame and the focused
    /// accessible asked.
    async fn focused_app(&self, bus: &Bus, context: Option<&Value>) -> Result<App, ErrorObject> {
        let apps = bus.applications().await.map_err(plugin_error)?;
        let desktop =
            context.filter(|c| c.get("compositor").is_some() || c.get("focused").is_some());
        let focused = desktop
            .and_then(|c| c.get("focused"))
            .filter(|f| f.is_object());
        let wanted_pid = focused
            .and_then(|f| f.get("pid"))
            .and_then(Value::as_u64)
            .and_then(|p| u32::try_from(p).ok())
            .filter(|&p| p > 0);
        let mut pids = Vec::with_capacity(apps.len());
        for name in &apps {
            pids.push(bus.pid_of(name).await);
        }
        let make = |i: usize, found_by: &'static str, name: String| App {
            bus_name: apps[i].clone(),
            name,
            pid: pids[i],
            found_by,
        };
        if let Some(pid) = wanted_pid {
            if let Some(i) = pids.iter().position(|p| *p == Some(pid)) {
                return Ok(make(i, "pid", bus.app_name(&apps[i]).await));
            }
            if let Some(i) = pids
                .iter()
                .position(|p| p.is_some_and(|p| descends_from(p, pid)))
            {
                return Ok(make(
                    i,
                    "pid (a process of the focused window's)",
                    bus.app_name(&apps[i]).await,
                ));
            }
        }
        if desktop.is_some() {
            let window = focused
                .map(|f| {
                    let app = f.get("app_id").and_then(Value::as_str).unwrap_or("?");
                    utter_protocol::text::clip(app, 80)
                })
                .unwrap_or_default();
            let message = match (focused, wanted_pid) {
                (None, _) => {
                    "no window is focused, so there is no application to act in".to_owned()
                }
                (Some(_), None) => format!(
                    "the compositor gives no pid for the focused window ({window}), so its application on the accessibility bus cannot be told from the others"
                ),
                (Some(_), Some(pid)) => format!(
                    "the focused window ({window}, pid {pid}) has no connection to the accessibility bus ({} other application(s) there are not it)",
                    apps.len()
                ),
            };
            return Err(plugin_error(message));
        }
        for (i, name) in apps.iter().enumerate() {
            if bus.has_active_frame(name).await {
                return Ok(make(i, "active frame", bus.app_name(name).await));
            }
        }
        for (i, name) in apps.iter().enumerate() {
            let walk = bus.walk(name, ACTION_LIMITS).await;
            if walk.nodes.iter().any(|n| n.has("focused")) {
                return Ok(make(i, "focused accessible", bus.app_name(name).await));
            }
        }
        Err(plugin_error(format!(
            "no application on the accessibility bus is focused ({} registered)",
            apps.len()
        )))
    }

    /// `perception.a11y {max_depth?, max_nodes?, context?}`.
    async fn perceive(&self, params: &Value) -> Result<Value, ErrorObject> {
        let bound = |key: &str, default: usize, max: usize| -> Result<usize, ErrorObject> {
            match params.get(key) {
                None | Some(Value::Null) => Ok(default),
                Some(v) => v
                    .as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .filter(|n| (1..=max).contains(n))
                    .ok_or_else(|| invalid(format!("{key} must be an integer from 1 to {max}"))),
            }
        };
        let limits = Limits {
            max_depth: bound("max_depth", DEFAULT_DEPTH, MAX_DEPTH)?,
            max_nodes: bound("max_nodes", DEFAULT_NODES, MAX_NODES)?,
            budget: BUDGET,
        };
        let bus = self.bus_or_error().await?;
        let app = self.focused_app(&bus, params.get("context")).await?;
        let walk = bus.walk(&app.bus_name, limits).await;
        let nodes: Vec<Value> = walk
            .nodes
            .iter()
            .enumerate()
            .map(|(id, n)| {
                json!({"id": id, "role": n.role, "name": n.name, "states": n.states,
                       "actions": n.actions, "parent": n.parent})
            })
            .collect();
        Ok(json!({
            "app": app.describe(),
            "nodes": nodes,
            "truncated": walk.truncated,
            "provenance": "a11y",
        }))
    }

    /// `context.snapshot {}`: the desktop context as accessibility sees it, for desktops
    /// whose compositor has no IPC the compositor plugin speaks (GNOME, KDE Plasma): the
    /// application with an `ACTIVE` window, its name as `app_id` (the name the application
    /// gives itself on the accessibility bus), that window's name as `title` (untrusted, as
    /// every title), its pid. No windows besides it, no workspaces, no outputs;
    /// `compositor.name` is `"none"` and `compositor.source` `"accessibility"`, so a reader
    /// knows what is missing. The runner asks it only when no compositor plugin answers.
    ///
    /// # Errors
    /// `-32000` when the accessibility bus is not usable or no application says it has the
    /// active window.
    async fn context_snapshot(&self) -> Result<Value, ErrorObject> {
        let bus = self.bus_or_error().await?;
        let apps = bus.applications().await.map_err(plugin_error)?;
        for name in apps.iter().take(MAX_CONTEXT_APPS) {
            let Some(title) = bus.active_frame(name).await else {
                continue;
            };
            let app = utter_protocol::text::clip(&bus.app_name(name).await, 256);
            let window = json!({
                "id": 0,
                "app_id": (!app.is_empty()).then_some(app),
                "title": utter_protocol::text::clip(&title, 1024),
                "pid": bus.pid_of(name).await,
                "focused": true,
            });
            return Ok(json!({
                "compositor": {"name": "none", "version": null, "socket": null,
                               "connected": true, "source": "accessibility"},
                "focused": window,
                "windows": [window],
                "workspaces": [],
                "outputs": [],
                "keyboard_layout": null,
                "overview": null,
                "truncated": false,
                "provenance": {"title": "title"},
            }));
        }
        Err(plugin_error(format!(
            "none of the {} application(s) on the accessibility bus has an active window",
            apps.len()
        )))
    }

    /// `action.invoke {op, args, provenance, dry_run?, context?}`.
    async fn invoke(&self, params: &Value, peer: &Connection) -> Result<Value, ErrorObject> {
        let op = params
            .get("op")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("action.invoke needs a string op"))?;
        let empty = json!({});
        let args = match params.get("args") {
            None | Some(Value::Null) => &empty,
            Some(a @ Value::Object(_)) => a,
            Some(_) => return Err(invalid("args must be an object")),
        };
        let dry_run = utter_protocol::plugin::dry_run(params)?;
        let context = params.get("context");
        match op {
            "type_text" => match self.type_text(args, dry_run, context).await {
                Err(e) if keys_may_work_for(&e) && !dry_run => {
                    type_by_keystrokes(peer, args, &e.message).await
                }
                Err(mut e) if keys_may_work_for(&e) => {
                    e.data = None;
                    Err(e)
                }
                other => other,
            },
            "click_element" => self.click_element(args, dry_run, context, peer).await,
            "delete_text" => self.delete_text(args, dry_run, context).await,
            other => Err(ErrorObject::new(
                ErrorCode::MethodNotFound,
                format!(
                    "unknown op {other:?}; this plugin serves {}",
                    OPS.join(", ")
                ),
            )),
        }
    }

    /// The focused text field of the focused app, for `type_text` and `delete_text`: `args`
    /// may name the `app` and the `window_id` it must be in (both checked against the
    /// context). Errors that keystrokes could get around are marked so ([`keys_may_work`]).
    async fn focused_field(
        &self,
        args: &Value,
        context: Option<&Value>,
    ) -> Result<FocusedField, ErrorObject> {
        let wanted_app = match args.get("app") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if !s.trim().is_empty() && s.chars().count() <= 256 => {
                Some(s.trim().to_lowercase())
            }
            Some(_) => {
                return Err(invalid(
                    "app must be a non-empty string of at most 256 characters",
                ));
            }
        };
        let window_id = match args.get("window_id") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .ok_or_else(|| invalid("window_id must be a non-negative integer"))?,
            ),
        };
        if let Some(id) = window_id {
            let focused = context
                .and_then(|c| c.pointer("/focused/id"))
                .and_then(Value::as_u64);
            if focused != Some(id) {
                return Err(plugin_error(format!(
                    "window {id} is not the focused window; type_text only types into the focused one"
                )));
            }
        }
        // The compositor says no window has the focus: neither accessibility nor keystrokes
        // would reach anything the person sees, so nothing is typed and that is said.
        if let Some(desktop) =
            context.filter(|c| c.get("compositor").is_some() || c.get("windows").is_some())
            && !desktop.get("focused").is_some_and(Value::is_object)
        {
            return Err(plugin_error(
                "no window is focused, so the text would go nowhere; focus the window to type into, then say it again",
            ));
        }
        let bus = self.bus_or_error().await.map_err(keys_may_work)?;
        let app = self
            .focused_app(&bus, context)
            .await
            .map_err(keys_may_work)?;
        if let Some(wanted) = &wanted_app {
            let focused_id = context
                .and_then(|c| c.pointer("/focused/app_id"))
                .and_then(Value::as_str)
                .map(str::to_lowercase);
            if app.name.to_lowercase() != *wanted && focused_id.as_deref() != Some(wanted) {
                return Err(plugin_error(format!(
                    "the focused application is not {wanted}; type_text only types into the focused one"
                )));
            }
        }
        let walk = bus.walk(&app.bus_name, ACTION_LIMITS).await;
        let Some(field) = focused_text_field(&walk) else {
            return Err(keys_may_work(
                plugin_error(NO_TEXT_FIELD).with_data(json!({"app": app.describe()})),
            ));
        };
        let proxies = async {
            let t = TextProxy::builder(&bus.a11y)
                .destination(field.bus.clone())?
                .path(field.path.clone())?
                .cache_properties(zbus::proxy::CacheProperties::No)
                .build()
                .await?;
            let e = EditableTextProxy::builder(&bus.a11y)
                .destination(field.bus.clone())?
                .path(field.path.clone())?
                .cache_properties(zbus::proxy::CacheProperties::No)
                .build()
                .await?;
            Ok::<_, zbus::Error>((t, e))
        };
        let (text, editable) = proxies
            .await
            .map_err(|e| plugin_error(format!("the text field went away: {e}")))?;
        Ok(FocusedField {
            app,
            role: field.role.clone(),
            name: field.name.clone(),
            text,
            editable,
            single_line: field.has("single-line"),
        })
    }

    async fn type_text(
        &self,
        args: &Value,
        dry_run: bool,
        context: Option<&Value>,
    ) -> Result<Value, ErrorObject> {
        let text = checked_text(args)?;
        let length = text.chars().count();
        let FocusedField {
            app,
            role,
            name,
            text: text_proxy,
            editable,
            single_line,
        } = self.focused_field(args, context).await?;
        // A line break ("new line" in dictation) goes into a text view; an entry would
        // either keep it as an odd character or, pressed as Return, send what it holds.
        if single_line && text.contains(['\n', '\r']) {
            return Err(plugin_error(format!(
                "the focused {role} of {} holds a single line, so a line break cannot be typed into it (say \"press enter\" to send or submit it)",
                app.name
            )));
        }
        let field = FieldName { role, name };
        let mut before = text_proxy.get_text(0, -1).await.unwrap_or_default();
        let count = before.chars().count();
        let mut caret = text_proxy
            .caret_offset()
            .await
            .ok()
            .and_then(|c| usize::try_from(c).ok())
            .filter(|&c| c <= count)
            .unwrap_or(count);
        // Typing over a selection replaces it ("select all", then "type x").
        let selection = match text_proxy.get_n_selections().await {
            Ok(n) if n > 0 => text_proxy.get_selection(0).await.ok().and_then(|(a, b)| {
                let (a, b) = (usize::try_from(a).ok()?, usize::try_from(b).ok()?);
                let (a, b) = (a.min(b), a.max(b).min(count));
                (a < b).then_some((a, b))
            }),
            _ => None,
        };
        if dry_run {
            return Ok(json!({
                "ok": true, "dry_run": true, "path": "a11y", "app": app.describe(),
                "field": {"role": field.role, "name": field.name},
                "detail": format!("would insert {length} character(s) at offset {caret} of the focused {} of {}", field.role, app.name),
            }));
        }
        let mut replaced = 0;
        if let Some((start, end)) = selection {
            let deleted = editable
                .delete_text(
                    i32::try_from(start).unwrap_or(i32::MAX),
                    i32::try_from(end).unwrap_or(i32::MAX),
                )
                .await
                .unwrap_or(false);
            if deleted {
                before = before
                    .chars()
                    .take(start)
                    .chain(before.chars().skip(end))
                    .collect();
                caret = start;
                replaced = end - start;
            }
        }
        let accepted = editable
            .insert_text(
                i32::try_from(caret).unwrap_or(i32::MAX),
                &text,
                i32::try_from(length).unwrap_or(i32::MAX),
            )
            .await
            .map_err(|e| plugin_error(format!("the text field refused the insertion: {e}")))?;
        if !accepted {
            return Err(plugin_error(format!(
                "the focused {} of {} refused the insertion (read-only?)",
                field.role, app.name
            )));
        }
        let expected: String = before
            .chars()
            .take(caret)
            .chain(text.chars())
            .chain(before.chars().skip(caret))
            .collect();
        let verified = reads_back(&text_proxy, &expected).await;
        // Typing leaves the caret after the typed text; so does this (best effort: a field
        // that refuses keeps its caret, and the text is in place either way).
        let caret_after = i32::try_from(caret + length).unwrap_or(i32::MAX);
        let _ = text_proxy.set_caret_offset(caret_after).await;
        let over = if replaced > 0 {
            format!(" in place of the {replaced} selected")
        } else {
            String::new()
        };
        let detail = if verified {
            format!(
                "inserted {length} character(s){over} into the focused {} of {} and read them back",
                field.role, app.name
            )
        } else {
            format!(
                "inserted {length} character(s) into the focused {} of {}, but reading the field back did not show them",
                field.role, app.name
            )
        };
        Ok(json!({
            "ok": true, "verified": verified, "path": "a11y", "detail": detail,
            "app": app.describe(), "inserted_at": caret, "length": length, "replaced": replaced,
        }))
    }

    /// `delete_text {text, at, app?, window_id?}`: remove `text` from offset `at` (in
    /// characters) of the focused text field, only when the field holds exactly that text
    /// there (what an undo of `type_text` sends). Result: `{ok, verified, path: "a11y",
    /// detail, app, deleted_at, length}`.
    ///
    /// # Errors
    /// `-32602` for bad args; `-32000` when there is no focused text field, or it no longer
    /// holds the text at `at` (it was edited since), or it refused the deletion.
    async fn delete_text(
        &self,
        args: &Value,
        dry_run: bool,
        context: Option<&Value>,
    ) -> Result<Value, ErrorObject> {
        let text = checked_text(args)?;
        let at = args
            .get("at")
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| *n <= MAX_FIELD_OFFSET)
            .ok_or_else(|| {
                invalid(format!(
                    "delete_text needs \"at\": a character offset from 0 to {MAX_FIELD_OFFSET}"
                ))
            })?;
        let field = self.focused_field(args, context).await.map_err(|mut e| {
            e.data = None;
            e
        })?;
        let length = text.chars().count();
        let now = field.text.get_text(0, -1).await.unwrap_or_default();
        let there: String = now.chars().skip(at).take(length).collect();
        if there != text {
            return Err(plugin_error(format!(
                "the focused {} of {} no longer holds the typed text at offset {at} (it was edited since), so nothing was deleted",
                field.role, field.app.name
            )));
        }
        if dry_run {
            return Ok(json!({
                "ok": true, "dry_run": true, "path": "a11y", "app": field.app.describe(),
                "detail": format!("would delete {length} character(s) at offset {at} of the focused {} of {}", field.role, field.app.name),
            }));
        }
        let (start, end) = (
            i32::try_from(at).unwrap_or(i32::MAX),
            i32::try_from(at + length).unwrap_or(i32::MAX),
        );
        let deleted = field
            .editable
            .delete_text(start, end)
            .await
            .map_err(|e| plugin_error(format!("the text field refused the deletion: {e}")))?;
        if !deleted {
            return Err(plugin_error(format!(
                "the focused {} of {} refused the deletion (read-only?)",
                field.role, field.app.name
            )));
        }
        let expected: String = now
            .chars()
            .take(at)
            .chain(now.chars().skip(at + length))
            .collect();
        let verified = reads_back(&field.text, &expected).await;
        let _ = field.text.set_caret_offset(start).await;
        Ok(json!({
            "ok": true, "verified": verified, "path": "a11y", "app": field.app.describe(),
            "deleted_at": at, "length": length,
            "detail": if verified {
                format!("deleted {length} character(s) at offset {at} of the focused {} of {} and read the field back", field.role, field.app.name)
            } else {
                format!("deleted {length} character(s) at offset {at} of the focused {} of {}, but reading the field back did not show it", field.role, field.app.name)
            },
        }))
    }

    async fn click_element(
        &self,
        args: &Value,
        dry_run: bool,
        context: Option<&Value>,
        peer: &Connection,
    ) -> Result<Value, ErrorObject> {
        let description = checked_description(args)?;
        let bus = self.bus_or_error().await?;
        let app = self.focused_app(&bus, context).await?;
        let walk = bus.walk(&app.bus_name, ACTION_LIMITS).await;
        let nodes: Vec<&Node> = walk
            .nodes
            .iter()
            .filter(|n| CLICKABLE.contains(&n.role.as_str()) && !n.actions.is_empty())
            .filter(|n| !n.has("defunct") && (n.has("enabled") || n.has("sensitive")))
            .collect();
        let candidates: Vec<Candidate> = nodes
            .iter()
            .map(|n| Candidate {
                role: n.role.clone(),
                name: n.name.clone(),
            })
            .collect();
        let listed = |ids: &[usize]| -> Vec<Value> {
            ids.iter()
                .map(|&i| json!({"role": candidates[i].role, "name": candidates[i].name}))
                .collect()
        };
        let names = |ids: &[usize]| -> String {
            ids.iter()
                .map(|&i| format!("{:?}", candidates[i].name))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut chosen_by: Option<Value> = None;
        let index = match matching::choose(&description, &candidates) {
            Choice::One(i) => i,
            Choice::Several(ids) => {
                let tie = || {
                    plugin_error(format!(
                        "{} elements of {} match {description:?} equally well: {}; say which one",
                        ids.len(),
                        app.name,
                        names(&ids)
                    ))
                    .with_data(json!({"matches": listed(&ids), "provenance": "a11y", "truncated": walk.truncated}))
                };
                // The runner's chooser may pick one of them by id (never by writing a name:
                // what is pressed is the node held under the id). Without a chooser, the
                // person is asked to say which.
                match choose_among(peer, &description, &ids, &candidates).await {
                    Some((i, by)) => {
                        chosen_by = Some(by);
                        i
                    }
                    None => return Err(tie()),
                }
            }
            Choice::Nothing(ids) => {
                let message = if ids.is_empty() {
                    format!(
                        "nothing in {} can be clicked through accessibility",
                        app.name
                    )
                } else {
                    format!(
                        "nothing in {} matches {description:?}; it has {}",
                        app.name,
                        names(&ids)
                    )
                };
                let data = json!({"nearby": listed(&ids), "provenance": "a11y", "truncated": walk.truncated});
                return match grounding::Config::from_env() {
                    Ok(None) => Err(plugin_error(format!(
                        "{message} (setting {} enables screen grounding: a local vision model finds the element on a screenshot)",
                        grounding::URL_VAR
                    ))
                    .with_data(data)),
                    Err(reason) => Err(plugin_error(format!(
                        "{message}; screen grounding is not usable: {reason}"
                    ))
                    .with_data(data)),
                    Ok(Some(config)) => {
                        let found = Grounding {
                            config: &config,
                            description: &description,
                            why: &message,
                            app: &app,
                        };
                        found
                            .click(dry_run, context, peer)
                            .await
                            .map_err(|e| match e.data {
                                Some(_) => e,
                                None => e.with_data(data),
                            })
                    }
                };
            }
        };
        let node = nodes[index];
        let clicked = json!({"role": node.role, "name": node.name});
        if dry_run {
            return Ok(json!({
                "ok": true, "dry_run": true, "path": "a11y", "app": app.describe(),
                "would_click": clicked, "action": node.actions.first(), "provenance": "a11y",
                "chosen_by": chosen_by,
                "detail": format!("would press the {} {:?} of {} ({})", node.role, node.name, app.name, node.actions[0]),
            }));
        }
        let action = bus
            .action(&node.bus, &node.path)
            .await
            .map_err(|e| plugin_error(format!("the element went away: {e}")))?;
        let before = bus.accessible(&node.bus, &node.path).await.ok();
        let checked_before = match &before {
            Some(p) => p
                .get_state()
                .await
                .ok()
                .map(|s| s.contains(atspi::State::Checked)),
            None => None,
        };
        let done = action
            .do_action(0)
            .await
            .map_err(|e| plugin_error(format!("pressing the {} failed: {e}", node.role)))?;
        if !done {
            return Err(plugin_error(format!(
                "the {} {:?} of {} refused its action",
                node.role, node.name, app.name
            )));
        }
        // Checkable elements show their effect in their state; a push button's effect is
        // the application's business and cannot be seen from here.
        let checkable = matches!(
            node.role.as_str(),
            "toggle button" | "check box" | "radio button" | "check menu item" | "radio menu item"
        );
        let mut verified = None;
        if checkable && let (Some(p), Some(was)) = (&before, checked_before) {
            let deadline = tokio::time::Instant::now() + VERIFY_TIMEOUT;
            verified = Some(loop {
                let now = p
                    .get_state()
                    .await
                    .ok()
                    .map(|s| s.contains(atspi::State::Checked));
                if now.is_some_and(|c| c != was || node.role == "radio button" && c) {
                    break true;
                }
                if tokio::time::Instant::now() >= deadline {
                    break false;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            });
        }
        let mut result = json!({
            "ok": true, "path": "a11y", "clicked": clicked, "app": app.describe(),
            "provenance": "a11y",
            "detail": format!("pressed the {} {:?} of {} ({})", node.role, node.name, app.name, node.actions[0]),
        });
        if let Some(v) = verified {
            result["verified"] = json!(v);
        }
        if let Some(by) = chosen_by {
            result["chosen_by"] = by;
        }
        Ok(result)
    }
}

/// How long the runner's chooser may take to break a tie.
const CHOOSE_WAIT: Duration = Duration::from_secs(15);

/// Ask the runner's chooser (`host.choose`) which of the tied candidates `ids` the person
/// meant. `Some((index, chosen_by))` when it picked one of them; `None` when no chooser
/// runs, it failed, or it answered anything but an offered id (the runner refuses that).
async fn choose_among(
    peer: &Connection,
    description: &str,
    ids: &[usize],
    candidates: &[Candidate],
) -> Option<(usize, Value)> {
    if ids.len() < 2 || ids.len() > 50 {
        return None;
    }
    let offered: Vec<Value> = ids
        .iter()
        .map(|&i| {
            let c = &candidates[i];
            let name = utter_protocol::text::escape_unprintable(&c.name, 200).0;
            json!({"id": format!("e{i}"), "summary": format!("{} {name:?}", c.role)})
        })
        .collect();
    let answer = peer
        .request(
            "host.choose",
            json!({"op": "click_element", "utterance": description, "candidates": offered}),
            Some(CHOOSE_WAIT),
        )
        .await
        .map_err(|e| tracing::info!("no choice between tied elements: {}", e.message))
        .ok()?;
    let id = answer.get("choice_id")?.as_str()?;
    let index: usize = id.strip_prefix('e')?.parse().ok()?;
    ids.contains(&index).then(|| {
        (
            index,
            json!({"chooser": answer.get("chooser").cloned().unwrap_or(Value::Null),
                   "choice_id": id, "tied": ids.len()}),
        )
    })
}

/// `type_text` where accessibility reaches no field: the same text as keystrokes through
/// the runner's gate (`host.action type_keys`, served by the input plugin), so the policy
/// and the audit see it. The result says the path (`keyboard`), why accessibility was not
/// used, and `verified: false` (nothing reads a keystroke-typed text back here).
async fn type_by_keystrokes(
    peer: &Connection,
    args: &Value,
    why: &str,
) -> Result<Value, ErrorObject> {
    let mut keys_args = json!({"text": args.get("text").cloned().unwrap_or(Value::Null)});
    for k in ["app", "window_id"] {
        if let Some(v) = args.get(k).filter(|v| !v.is_null()) {
            keys_args[k] = v.clone();
        }
    }
    let step = peer
        .request(
            "host.action",
            json!({"op": "type_keys", "args": keys_args}),
            Some(KEYSTROKE_WAIT),
        )
        .await
        .map_err(|e| {
            plugin_error(format!(
                "{why}, and typing keystrokes instead failed: {}",
                e.message
            ))
        })?;
    if let Some(inner) = utter_protocol::plugin::step_failure(&step) {
        return Err(plugin_error(format!(
            "{why}, and typing keystrokes instead failed: {}",
            utter_protocol::text::escape_unprintable(inner, 300).0
        )));
    }
    let result = step.get("result").cloned().unwrap_or(Value::Null);
    let inner = result.get("detail").and_then(Value::as_str).unwrap_or("");
    Ok(json!({
        "ok": true,
        "verified": false,
        "path": "keyboard",
        "backend": result.get("backend").cloned().unwrap_or(Value::Null),
        "length": result.get("length").cloned().unwrap_or(Value::Null),
        "fallback_reason": why,
        "detail": format!("{why}; typed it as keystrokes instead: {inner}"),
    }))
}

/// How long clicking through the runner's gate (`host.action click_point`) may take: the
/// runner asks the person first, within its own `confirm_timeout_ms` (30 s by default).
const CLICK_WAIT: Duration = Duration::from_secs(150);

/// T3 screen grounding for one `click_element` that accessibility could not serve: a
/// screenshot of the focused window, a point from the grounding model, and a click there
/// through the runner's gate (see [`grounding`]).
struct Grounding<'a> {
    config: &'a grounding::Config,
    /// The person's words (user provenance).
    description: &'a str,
    /// Why accessibility could not click (the message a11y alone would give).
    why: &'a str,
    app: &'a App,
}

impl Grounding<'_> {
    fn could_not_run(&self, reason: impl std::fmt::Display) -> ErrorObject {
        plugin_error(format!(
            "{}; screen grounding could not run: {reason}",
            self.why
        ))
    }

    async fn click(
        &self,
        dry_run: bool,
        context: Option<&Value>,
        peer: &Connection,
    ) -> Result<Value, ErrorObject> {
        let rect = grounding::Rect::from_context(context).ok_or_else(|| {
            self.could_not_run(
                "the compositor gives no window geometry for the focused window \
                 (sway and niri 25.08 or later do)",
            )
        })?;
        let (png, tool) = grounding::screenshot_any(rect, grounding::layout_from_context(context))
            .await
            .map_err(|r| self.could_not_run(r))?;
        let image = grounding::png_size(&png)
            .ok_or_else(|| self.could_not_run("the screenshot is not a PNG"))?;
        let body = grounding::request_body(&self.config.model, self.description, &png, image);
        drop(png);
        let said = grounding::ask(self.config, body)
            .await
            .map_err(|r| self.could_not_run(r))?;
        let model = &self.config.model;
        let shown = utter_protocol::text::escape_unprintable(&said, 200).0;
        let refused = |what: String| {
            plugin_error(format!(
                "{}; {what}, so nothing was clicked (the model said {shown:?})",
                self.why
            ))
            .with_data(
                json!({"answer": shown, "image": {"width": image.0, "height": image.1},
                              "path": "screen", "verified": false, "provenance": "screen"}),
            )
        };
        let Some(answer) = grounding::parse_answer(&said) else {
            return Err(refused(format!(
                "the grounding model {model:?} named no point to click"
            )));
        };
        let Some(pixel) = grounding::image_pixel(&answer, image) else {
            return Err(refused(format!(
                "the grounding model {model:?} pointed at ({}, {}), outside the {}x{} screenshot of the focused window",
                answer.x, answer.y, image.0, image.1
            )));
        };
        let (x, y) = grounding::to_layout(rect, image, pixel);
        let confidence = match answer.confidence {
            Some(c) => format!("confidence {c:.2}"),
            None => "no confidence given".to_owned(),
        };
        let found = format!(
            "the grounding model {model:?} pointed at ({}, {}) of a {}x{} screenshot of the focused window ({confidence})",
            pixel.0, pixel.1, image.0, image.1
        );
        let mut result = json!({
            "ok": true, "path": "screen", "verified": false,
            "point": {"x": x, "y": y},
            "image": {"width": image.0, "height": image.1},
            "image_point": {"x": pixel.0, "y": pixel.1},
            "confidence": answer.confidence,
            "app": self.app.describe(),
            "provenance": "screen",
            "screenshot": tool.name(),
        });
        if dry_run {
            result["dry_run"] = json!(true);
            result["would_click"] = json!({"x": x, "y": y});
            // The runner asks before every click a plugin places, whatever the model's
            // confidence: the point is the model's, not the person's.
            result["needs_confirm"] = json!(true);
            result["detail"] = json!(format!(
                "{}; {found}; would click at ({x}, {y}) in layout pixels once the person confirms",
                self.why
            ));
            return Ok(result);
        }
        // The runner's refusal (the person said no, another window lies over the point)
        // stays a refusal, whether it comes as the call's error or as a failed step.
        let not_done = |code: Option<i64>, why: &str| {
            let code = match code {
                Some(c) if c == ErrorCode::Denied.code() => ErrorCode::Denied,
                _ => ErrorCode::PluginError,
            };
            ErrorObject::new(
                code,
                format!(
                    "{}; {found}, and clicking at ({x}, {y}) was not done: {}",
                    self.why,
                    utter_protocol::text::escape_unprintable(why, 400).0
                ),
            )
            .with_data(json!({"point": {"x": x, "y": y}, "path": "screen", "verified": false, "provenance": "screen"}))
        };
        let step = peer
            .request(
                "host.action",
                json!({"op": "click_point", "args": {"x": x, "y": y}}),
                Some(CLICK_WAIT),
            )
            .await
            .map_err(|e| not_done(Some(e.code), &e.message))?;
        if let Some(inner) = utter_protocol::plugin::step_failure(&step) {
            return Err(not_done(
                step.pointer("/error/code").and_then(Value::as_i64),
                inner,
            ));
        }
        let inner = step
            .pointer("/result/detail")
            .and_then(Value::as_str)
            .unwrap_or("");
        result["confirmed_by"] = step.get("confirmed_by").cloned().unwrap_or(Value::Null);
        result["backend"] = step
            .pointer("/result/backend")
            .cloned()
            .unwrap_or(Value::Null);
        result["detail"] = json!(format!(
            "{}; {found}; clicked at ({x}, {y}) in layout pixels through the runner: {}; whether the click hit the element is not read back",
            self.why,
            utter_protocol::text::escape_unprintable(inner, 300).0
        ));
        Ok(result)
    }
}

/// Whether process `pid` was started by process `ancestor` (its chain of parents in
/// `/proc` reaches it): a window's application whose accessibility lives in a child process.
fn descends_from(pid: u32, ancestor: u32) -> bool {
    let mut current = pid;
    for _ in 0..64 {
        if current == ancestor {
            return true;
        }
        if current <= 1 {
            return false;
        }
        let Some(parent) = std::fs::read_to_string(format!("/proc/{current}/stat"))
            .ok()
            .and_then(|stat| {
                let rest = &stat[stat.rfind(')')? + 1..];
                rest.split_whitespace().nth(1)?.parse::<u32>().ok()
            })
        else {
            return false;
        };
        current = parent;
    }
    false
}

/// The focused node that takes text: `EditableText` and `Text`, focused, editable.
fn focused_text_field(walk: &Walk) -> Option<&Node> {
    walk.nodes
        .iter()
        .find(|n| n.editable_text && n.text && n.has("focused") && n.has("editable"))
}

fn checked_text(args: &Value) -> Result<String, ErrorObject> {
    let Some(text) = args.get("text").and_then(Value::as_str) else {
        return Err(invalid("type_text needs a string text"));
    };
    if text.is_empty() {
        return Err(invalid("text is empty: there is nothing to type"));
    }
    if text.contains('\0') {
        return Err(invalid("text contains a NUL character"));
    }
    let n = text.chars().count();
    if n > MAX_TEXT {
        return Err(invalid(format!(
            "text has {n} characters; type_text takes at most {MAX_TEXT}"
        )));
    }
    Ok(text.to_owned())
}

fn checked_description(args: &Value) -> Result<String, ErrorObject> {
    let Some(d) = args.get("description").and_then(Value::as_str) else {
        return Err(invalid("click_element needs a string description"));
    };
    if d.contains('\0') {
        return Err(invalid("description contains a NUL character"));
    }
    let n = d.chars().count();
    if n > MAX_DESCRIPTION {
        return Err(invalid(format!(
            "description has {n} characters; click_element takes at most {MAX_DESCRIPTION}"
        )));
    }
    if matching::words(d).is_empty() {
        return Err(invalid("description has no words"));
    }
    Ok(d.trim().to_owned())
}

/// Whether the field's whole text reads `expected` within [`VERIFY_TIMEOUT`] (polled every
/// 50 ms): how an insertion or a deletion is verified.
async fn reads_back(text: &TextProxy<'_>, expected: &str) -> bool {
    let deadline = tokio::time::Instant::now() + VERIFY_TIMEOUT;
    loop {
        if text.get_text(0, -1).await.unwrap_or_default() == expected {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The most BackSpaces an undo of text typed as keystrokes presses (the input plugin's
/// `key` repeats at most this often).
const MAX_BACKSPACES: u64 = 50;

/// The longest offset `delete_text` takes, in characters.
const MAX_FIELD_OFFSET: usize = 1 << 24;

/// `action.capabilities`: the ops with their argument schemas, and how the runner undoes
/// them (utter-core's `undo`).
pub fn capabilities() -> Value {
    json!({"ops": [
        {
            "op": "type_text", "side_effect": true, "needs_confirm": false,
            "args_schema": {
                "type": "object",
                "properties": {
                    "text": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT},
                    "app": {"type": "string", "minLength": 1, "maxLength": 256},
                    "window_id": {"type": "integer", "minimum": 0}
                },
                "required": ["text"],
                "additionalProperties": false
            },
            "undo": [
                // Inserted through accessibility over no selection: delete exactly it, where
                // it was put, if the field still holds it there.
                {"when": {"$result.path": "a11y", "$result.replaced": 0},
                 "steps": [{"op": "delete_text", "args": {"text": "$args.text",
                     "at": "$result.inserted_at", "window_id": "$before.focused.id"}}],
                 "requires": {"focused": "$before.focused.id"}},
                {"when": {"$result.path": "a11y"},
                 "none": "it typed over selected text, and the text it replaced was not recorded"},
                // Typed as keystrokes: as many BackSpaces, in the same window.
                {"steps": [{"op": "key", "args": {"chord": "BackSpace",
                     "repeat": {"$chars": "$args.text", "max": MAX_BACKSPACES}, "window_id": "$before.focused.id"}}],
                 "requires": {"focused": "$before.focused.id"}}
            ]
        },
        {
            "op": "delete_text", "side_effect": true, "needs_confirm": false,
            "args_schema": {
                "type": "object",
                "properties": {
                    "text": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT},
                    "at": {"type": "integer", "minimum": 0, "maximum": MAX_FIELD_OFFSET},
                    "app": {"type": "string", "minLength": 1, "maxLength": 256},
                    "window_id": {"type": "integer", "minimum": 0}
                },
                "required": ["text", "at"],
                "additionalProperties": false
            },
            "undo": [{"none": "deleted text is not put back by undo; say \"type\" and the text"}]
        },
        {
            "op": "click_element", "side_effect": true, "needs_confirm": false,
            "args_schema": {
                "type": "object",
                "properties": {
                    "description": {"type": "string", "minLength": 1, "maxLength": MAX_DESCRIPTION}
                },
                "required": ["description"],
                "additionalProperties": false
            },
            "undo": [{"none": "a click is not undone; say \"undo\" to press the app's own undo"}]
        }
    ]})
}

impl Handler for Service {
    fn methods(&self) -> Vec<String> {
        vec![
            "perception.a11y".into(),
            "context.snapshot".into(),
            "action.capabilities".into(),
            "action.invoke".into(),
        ]
    }

    fn side_effect_free(&self) -> Vec<String> {
        vec![
            "perception.a11y".into(),
            "context.snapshot".into(),
            "action.capabilities".into(),
        ]
    }

    async fn health(&self) -> HealthResult {
        Service::health(self).await
    }

    async fn handle(&self, call: Call) -> Result<Value, ErrorObject> {
        match call.method.as_str() {
            "perception.a11y" => self.perceive(&call.params).await,
            "context.snapshot" => self.context_snapshot().await,
            "action.capabilities" => Ok(capabilities()),
            "action.invoke" => self.invoke(&call.params, &call.peer).await,
            other => Err(ErrorObject::method_not_found(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_bounds() {
        assert!(checked_text(&json!({"text": "hello"})).is_ok());
        for bad in [
            json!({}),
            json!({"text": ""}),
            json!({"text": 5}),
            json!({"text": "a\u{0}b"}),
            json!({"text": "x".repeat(MAX_TEXT + 1)}),
        ] {
            assert_eq!(checked_text(&bad).unwrap_err().code, -32602, "{bad}");
        }
        assert!(checked_text(&json!({"text": "é".repeat(MAX_TEXT)})).is_ok());
    }

    #[test]
    fn description_bounds() {
        assert!(checked_description(&json!({"description": "the blue button"})).is_ok());
        for bad in [
            json!({}),
            json!({"description": ""}),
            json!({"description": " ?! "}),
            json!({"description": "a\u{0}"}),
            json!({"description": "x".repeat(100_000)}),
        ] {
            assert_eq!(checked_description(&bad).unwrap_err().code, -32602);
        }
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
