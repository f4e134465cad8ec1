//! The plugin's methods: `perception.a11y`, `action.capabilities`, `action.invoke`
//! (`type_text`, `click_element`) and `plugin.health`.

use crate::matching::{self, Candidate, Choice};
use crate::tree::{Bus, Limits, Node, Walk};
use atspi::proxy::editable_text::EditableTextProxy;
use atspi::proxy::text::TextProxy;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;
use utter_protocol::handshake::{HealthResult, HealthStatus};
use utter_protocol::plugin::{Call, Handler};
use utter_protocol::{ErrorCode, ErrorObject};

/// The ops this plugin serves, in `action.capabilities` order.
pub const OPS: [&str; 2] = ["type_text", "click_element"];
/// The longest text `type_text` inserts, in characters.
pub const MAX_TEXT: usize = 10_000;
/// The longest description `click_element` accepts, in characters.
pub const MAX_DESCRIPTION: usize = 256;
/// `perception.a11y`'s default depth bound.
pub const DEFAULT_DEPTH: usize = 12;
/// `perception.a11y`'s default node bound.
pub const DEFAULT_NODES: usize = 2000;
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

/// The message when nothing editable has the focus (keystroke typing comes later).
pub const NO_TEXT_FIELD: &str = "no focused text field accepts text through accessibility; keystroke typing is not available yet";

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
                HealthResult {
                    status: HealthStatus::Ok,
                    detail: format!(
                        "accessibility on; a11y bus at {} with {apps} application(s)",
                        bus.address
                    ),
                }
            }
            Err(reason) => HealthResult {
                status: HealthStatus::Degraded,
                detail: format!("the accessibility bus is not usable: {reason}"),
            },
        }
    }

    /// Find the focused application (see the crate docs for the order).
    async fn focused_app(&self, bus: &Bus, context: Option<&Value>) -> Result<App, ErrorObject> {
        let apps = bus.applications().await.map_err(plugin_error)?;
        let wanted_pid = context
            .and_then(|c| c.get("focused"))
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
        if let Some(pid) = wanted_pid
            && let Some(i) = pids.iter().position(|p| *p == Some(pid))
        {
            return Ok(make(i, "pid", bus.app_name(&apps[i]).await));
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
        let mut message = format!(
            "no application on the accessibility bus is focused ({} registered",
            apps.len()
        );
        if let Some(pid) = wanted_pid {
            message.push_str(&format!("; none has the focused window's pid {pid}"));
        }
        message.push(')');
        Err(plugin_error(message))
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

    /// `action.invoke {op, args, provenance, dry_run?, context?}`.
    async fn invoke(&self, params: &Value) -> Result<Value, ErrorObject> {
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
        let dry_run = params.get("dry_run").and_then(Value::as_bool) == Some(true);
        let context = params.get("context");
        match op {
            "type_text" => self.type_text(args, dry_run, context).await,
            "click_element" => self.click_element(args, dry_run, context).await,
            other => Err(ErrorObject::new(
                ErrorCode::MethodNotFound,
                format!(
                    "unknown op {other:?}; this plugin serves {}",
                    OPS.join(", ")
                ),
            )),
        }
    }

    async fn type_text(
        &self,
        args: &Value,
        dry_run: bool,
        context: Option<&Value>,
    ) -> Result<Value, ErrorObject> {
        let text = checked_text(args)?;
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
        let bus = self.bus_or_error().await?;
        let app = self.focused_app(&bus, context).await?;
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
            return Err(plugin_error(NO_TEXT_FIELD).with_data(json!({"app": app.describe()})));
        };
        let length = text.chars().count();
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
        let (text_proxy, editable) = proxies
            .await
            .map_err(|e| plugin_error(format!("the text field went away: {e}")))?;
        let before = text_proxy.get_text(0, -1).await.unwrap_or_default();
        let count = before.chars().count();
        let caret = text_proxy
            .caret_offset()
            .await
            .ok()
            .and_then(|c| usize::try_from(c).ok())
            .filter(|&c| c <= count)
            .unwrap_or(count);
        if dry_run {
            return Ok(json!({
                "ok": true, "dry_run": true, "path": "a11y", "app": app.describe(),
                "field": {"role": field.role, "name": field.name},
                "detail": format!("would insert {length} character(s) at offset {caret} of the focused {} of {}", field.role, app.name),
            }));
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
        let deadline = tokio::time::Instant::now() + VERIFY_TIMEOUT;
        let verified = loop {
            let now = text_proxy.get_text(0, -1).await.unwrap_or_default();
            if now == expected {
                break true;
            }
            if tokio::time::Instant::now() >= deadline {
                break false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        // Typing leaves the caret after the typed text; so does this (best effort: a field
        // that refuses keeps its caret, and the text is in place either way).
        let caret_after = i32::try_from(caret + length).unwrap_or(i32::MAX);
        let _ = text_proxy.set_caret_offset(caret_after).await;
        let detail = if verified {
            format!(
                "inserted {length} character(s) into the focused {} of {} and read them back",
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
            "app": app.describe(), "inserted_at": caret, "length": length,
        }))
    }

    async fn click_element(
        &self,
        args: &Value,
        dry_run: bool,
        context: Option<&Value>,
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
        let index = match matching::choose(&description, &candidates) {
            Choice::One(i) => i,
            Choice::Several(ids) => {
                return Err(plugin_error(format!(
                    "{} elements of {} match {description:?} equally well: {}; say which one",
                    ids.len(),
                    app.name,
                    names(&ids)
                ))
                .with_data(json!({"matches": listed(&ids), "provenance": "a11y", "truncated": walk.truncated})));
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
                return Err(plugin_error(message).with_data(
                    json!({"nearby": listed(&ids), "provenance": "a11y", "truncated": walk.truncated}),
                ));
            }
        };
        let node = nodes[index];
        let clicked = json!({"role": node.role, "name": node.name});
        if dry_run {
            return Ok(json!({
                "ok": true, "dry_run": true, "path": "a11y", "app": app.describe(),
                "would_click": clicked, "action": node.actions.first(), "provenance": "a11y",
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
        Ok(result)
    }
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

/// `action.capabilities`: both ops with their argument schemas.
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
            }
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
            }
        }
    ]})
}

impl Handler for Service {
    fn methods(&self) -> Vec<String> {
        vec![
            "perception.a11y".into(),
            "action.capabilities".into(),
            "action.invoke".into(),
        ]
    }

    fn side_effect_free(&self) -> Vec<String> {
        vec!["perception.a11y".into(), "action.capabilities".into()]
    }

    async fn health(&self) -> HealthResult {
        Service::health(self).await
    }

    async fn handle(&self, call: Call) -> Result<Value, ErrorObject> {
        match call.method.as_str() {
            "perception.a11y" => self.perceive(&call.params).await,
            "action.capabilities" => Ok(capabilities()),
            "action.invoke" => self.invoke(&call.params).await,
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
    fn capabilities_name_both_ops() {
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
