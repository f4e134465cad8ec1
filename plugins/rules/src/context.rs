//! The desktop context a plan request may carry (`params.context`, the compositor plugin's
//! snapshot, see `plugins/compositor/src/model.rs`).
//!
//! Only two things are read from it: which compositor runs (so that niri actions are not
//! planned on sway) and the `app_id` of each window (so that "switch to foot" can focus a
//! window of an application that has no desktop entry). Titles, which whatever runs in a
//! window writes, are never read at all. Everything else in the snapshot is ignored, so a
//! newer snapshot with more fields still plans.

use crate::text::compact;
use utter_protocol::serde_json::Value;

/// The most windows a context may list; a bigger one is refused as malformed.
pub const MAX_WINDOWS: usize = 4096;

/// The longest `app_id` considered; longer ones are skipped (no real application has one).
const MAX_APP_ID: usize = 255;

/// What the rules use of a plan request's context.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Context {
    /// `compositor.name`: `"niri"`, `"sway"`, or `None` when the snapshot does not say.
    pub compositor: Option<String>,
    /// The `app_id`s of `focused` and `windows`, in that order, without repeats.
    pub app_ids: Vec<String>,
}

/// The JSON type of a value, for messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl Context {
    /// Read `params.context`. Absent or `null` is no context (`Ok(None)`). Otherwise it must
    /// be an object; `compositor` an object or null, with a string `name`; `focused` a window
    /// object or null; `windows` an array (at most [`MAX_WINDOWS`]) of window objects or
    /// null; a window's `app_id` a string or null. The error says which field is wrong.
    pub fn from_param(value: Option<&Value>) -> Result<Option<Context>, String> {
        let object = match value {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Object(object)) => object,
            Some(other) => {
                return Err(format!(
                    "context must be an object or null, not {}",
                    kind(other)
                ));
            }
        };
        let compositor = match object.get("compositor") {
            None | Some(Value::Null) => None,
            Some(Value::Object(c)) => match c.get("name") {
                None | Some(Value::Null) => None,
                Some(Value::String(name)) => Some(name.trim().to_ascii_lowercase()),
                Some(other) => {
                    return Err(format!(
                        "context.compositor.name must be a string, not {}",
                        kind(other)
                    ));
                }
            },
            Some(other) => {
                return Err(format!(
                    "context.compositor must be an object or null, not {}",
                    kind(other)
                ));
            }
        };
        let mut app_ids: Vec<String> = Vec::new();
        let mut add = |window: &Value, what: &str| -> Result<(), String> {
            let Value::Object(window) = window else {
                return Err(format!(
                    "{what} must be a window object, not {}",
                    kind(window)
                ));
            };
            match window.get("app_id") {
                None | Some(Value::Null) => {}
                Some(Value::String(id)) => {
                    let id = id.trim();
                    if !id.is_empty() && id.len() <= MAX_APP_ID && !app_ids.iter().any(|a| a == id)
                    {
                        app_ids.push(id.to_owned());
                    }
                }
                Some(other) => {
                    return Err(format!(
                        "{what}.app_id must be a string or null, not {}",
                        kind(other)
                    ));
                }
            }
            Ok(())
        };
        match object.get("focused") {
            None | Some(Value::Null) => {}
            Some(window) => add(window, "context.focused")?,
        }
        match object.get("windows") {
            None | Some(Value::Null) => {}
            Some(Value::Array(windows)) => {
                if windows.len() > MAX_WINDOWS {
                    return Err(format!(
                        "context.windows lists {} windows; at most {MAX_WINDOWS} are accepted",
                        windows.len()
                    ));
                }
                for (i, window) in windows.iter().enumerate() {
                    add(window, &format!("context.windows[{i}]"))?;
                }
            }
            Some(other) => {
                return Err(format!(
                    "context.windows must be an array or null, not {}",
                    kind(other)
                ));
            }
        }
        Ok(Some(Context {
            compositor,
            app_ids,
        }))
    }

    /// False when the context names a compositor other than niri: niri actions would fail
    /// there. No name (or no context) is taken as "may be niri".
    pub fn may_be_niri(context: Option<&Context>) -> bool {
        context
            .and_then(|c| c.compositor.as_deref())
            .is_none_or(|name| name == "niri")
    }

    /// The `app_id` of a window whose whole app_id is `spoken` (a normalised name) once case,
    /// spaces, dashes and dots are ignored: "foot" finds `foot`, "gnome terminal" finds
    /// `Gnome-Terminal` but not `gnome-terminal-server`. The first such window decides.
    pub fn window_app(&self, spoken: &str) -> Option<&str> {
        let wanted = compact(&spoken.to_lowercase());
        if wanted.is_empty() {
            return None;
        }
        self.app_ids
            .iter()
            .find(|id| compact(&id.to_lowercase()) == wanted)
            .map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use utter_protocol::serde_json::json;

    #[test]
    fn a_snapshot_is_read_for_compositor_and_app_ids_only() {
        let snapshot = json!({
            "compositor": {"name": "niri", "version": "25.08"},
            "focused": {"id": 7, "app_id": "foot", "title": "firefox", "focused": true},
            "windows": [
                {"id": 7, "app_id": "foot", "title": "firefox"},
                {"id": 8, "app_id": "org.gnome.Nautilus", "title": "x"},
                {"id": 9, "app_id": null, "title": "no id"},
                {"id": 10, "title": "no id either"},
            ],
            "workspaces": [{"id": 1, "index": 1}],
            "outputs": "ignored, even of the wrong type",
            "provenance": {"title": "title"},
        });
        let context = Context::from_param(Some(&snapshot))
            .unwrap()
            .expect("a context");
        assert_eq!(context.compositor.as_deref(), Some("niri"));
        assert_eq!(context.app_ids, ["foot", "org.gnome.Nautilus"]);
        assert_eq!(context.window_app("foot"), Some("foot"));
        assert_eq!(
            context.window_app("org gnome nautilus"),
            Some("org.gnome.Nautilus")
        );
        assert_eq!(
            context.window_app("ORG.GNOME.NAUTILUS"),
            Some("org.gnome.Nautilus")
        );
        // Titles are not looked at.
        assert_eq!(context.window_app("firefox"), None);
        assert_eq!(context.window_app(""), None);
    }

    #[test]
    fn absent_null_and_empty_contexts() {
        assert_eq!(Context::from_param(None), Ok(None));
        assert_eq!(Context::from_param(Some(&Value::Null)), Ok(None));
        let empty = Context::from_param(Some(&json!({})))
            .unwrap()
            .expect("some");
        assert_eq!(empty, Context::default());
        assert!(Context::may_be_niri(None));
        assert!(Context::may_be_niri(Some(&empty)));
        let sway = Context {
            compositor: Some("sway".into()),
            app_ids: vec![],
        };
        assert!(!Context::may_be_niri(Some(&sway)));
    }

    #[test]
    fn wrong_types_are_refused_with_the_field() {
        let cases = [
            (json!("niri"), "context must be an object"),
            (json!([1, 2]), "context must be an object"),
            (json!({"compositor": "niri"}), "context.compositor must be"),
            (
                json!({"compositor": {"name": 3}}),
                "context.compositor.name",
            ),
            (json!({"focused": 3}), "context.focused must be"),
            (json!({"windows": {"a": 1}}), "context.windows must be"),
            (json!({"windows": [{}, 5]}), "context.windows[1] must be"),
            (
                json!({"windows": [{"app_id": ["x"]}]}),
                "context.windows[0].app_id",
            ),
        ];
        for (value, wanted) in cases {
            let err = Context::from_param(Some(&value)).expect_err("refused");
            assert!(err.contains(wanted), "{value}: {err}");
        }
        let many: Vec<Value> = (0..=MAX_WINDOWS).map(|i| json!({"id": i})).collect();
        let err = Context::from_param(Some(&json!({"windows": many}))).expect_err("too many");
        assert!(err.contains("at most"), "{err}");
    }
}
