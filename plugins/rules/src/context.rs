//! The desktop context a plan request may carry (`params.context`, the compositor plugin's
//! snapshot, see `plugins/compositor/src/model.rs`).
//!
//! Only two things are read from it: which compositor runs (so that niri actions are not
//! planned on sway) and the `app_id` of each window (so that "switch to foot" can focus a
//! window of an application that has no desktop entry, and the focused window's picks the
//! application profile a phrase is planned with). Titles, which whatever runs in a
//! window writes, are never read at all. Everything else in the snapshot is ignored, so a
//! newer snapshot with more fields still plans. Of a long window list only the first
//! [`MAX_WINDOWS`] are read, and a context of the wrong shape is planned without
//! ([`Context::from_param_or_none`]): the snapshot is a context plugin's work, passed on by
//! the runner unchecked, and an odd one is no reason to refuse an utterance.

use crate::text::compact;
use utter_protocol::serde_json::Value;

/// The most windows of a context read; the windows after the first this many are ignored.
pub const MAX_WINDOWS: usize = 4096;

/// The longest `app_id` considered; longer ones are skipped (no real application has one).
const MAX_APP_ID: usize = 255;

/// What the rules use of a plan request's context.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Context {
    /// `compositor.name`: `"niri"`, `"sway"`, `"hyprland"`, or `None` when the snapshot does
    /// not say.
    pub compositor: Option<String>,
    /// The `app_id`s of `focused` and `windows`, in that order, without repeats.
    pub app_ids: Vec<String>,
    /// The focused window's `app_id`, which picks the application profile a phrase is
    /// planned with ([`crate::profiles`]).
    pub focused_app_id: Option<String>,
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
    /// Read `params.context` for planning: [`Context::from_param`], with a context of the
    /// wrong shape taken as no context. The second value says why a context that was sent
    /// is not used (`context.windows[3].app_id must be …`), for the plan's message.
    ///
    /// The context is whatever a context plugin produced, passed on by the runner unchecked:
    /// an odd one must not stop the router from planning what needs no context at all.
    pub fn from_param_or_none(value: Option<&Value>) -> (Option<Context>, Option<String>) {
        match Context::from_param(value) {
            Ok(context) => (context, None),
            Err(problem) => (None, Some(problem)),
        }
    }

    /// Read `params.context` strictly. Absent or `null` is no context (`Ok(None)`). Otherwise
    /// it must be an object; `compositor` an object or null, with a string `name`; `focused`
    /// a window object or null; `windows` an array of window objects or null, of which the
    /// first [`MAX_WINDOWS`] are read and the rest ignored; a window's `app_id` a string or
    /// null. The error says which field is wrong.
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
        let mut focused_app_id = None;
        match object.get("focused") {
            None | Some(Value::Null) => {}
            Some(window) => {
                add(window, "context.focused")?;
                focused_app_id = window
                    .get("app_id")
                    .and_then(Value::as_str)
                    .map(str::trim)
                    .filter(|id| !id.is_empty() && id.len() <= MAX_APP_ID)
                    .map(str::to_owned);
            }
        }
        match object.get("windows") {
            None | Some(Value::Null) => {}
            Some(Value::Array(windows)) => {
                for (i, window) in windows.iter().take(MAX_WINDOWS).enumerate() {
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
            focused_app_id,
        }))
    }

    /// True when the context names a compositor the compositor plugin has a backend for
    /// (niri, sway, Hyprland), which can look for an application's window when a step runs
    /// (`ensure_app`, `focus_app`).
    pub fn has_window_ipc(context: Option<&Context>) -> bool {
        context
            .and_then(|c| c.compositor.as_deref())
            .is_some_and(|name| matches!(name, "niri" | "sway" | "hyprland"))
    }

    /// False when the context names a compositor other than niri: niri actions would fail
    /// there. No name (or no context) is taken as "may be niri".
    pub fn may_be_niri(context: Option<&Context>) -> bool {
        context
            .and_then(|c| c.compositor.as_deref())
            .is_none_or(|name| name == "niri")
    }

    /// The `app_id` of a window whose whole app_id is `spoken` (a normalised name), the
    /// likest first: the same text, else the same up to case, else the same once case,
    /// spaces, dashes and dots are ignored. "foot" finds `foot`, "gnome terminal" finds
    /// `Gnome-Terminal` but not `gnome-terminal-server`, and "xx" finds `xx` before `X-X`.
    /// The first window of the likest kind decides.
    pub fn window_app(&self, spoken: &str) -> Option<&str> {
        Likeness::ALL
            .into_iter()
            .find_map(|likeness| self.window_app_as(spoken, likeness))
    }

    /// The `app_id` of the first window whose app_id is `spoken` as alike as `likeness`
    /// says. An app_id with no letter or digit left once spaces, dashes and dots are
    /// dropped (`"."`, `"--"`) names nothing and is never found, nor is anything for a
    /// `spoken` of that kind.
    pub fn window_app_as(&self, spoken: &str, likeness: Likeness) -> Option<&str> {
        let lower = spoken.to_lowercase();
        let wanted = compact(&lower);
        if wanted.is_empty() {
            return None;
        }
        self.app_ids
            .iter()
            .filter(|id| !compact(id).is_empty())
            .find(|id| match likeness {
                Likeness::Same => id.as_str() == spoken,
                Likeness::Case => id.to_lowercase() == lower,
                Likeness::Loose => compact(&id.to_lowercase()) == wanted,
            })
            .map(String::as_str)
    }
}

/// How alike a window's `app_id` and a spoken name must be, for [`Context::window_app_as`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Likeness {
    /// Byte for byte the same.
    Same,
    /// The same up to case.
    Case,
    /// The same once case, spaces, dashes and dots are ignored.
    Loose,
}

impl Likeness {
    /// All kinds, the likest first.
    pub const ALL: [Likeness; 3] = [Likeness::Same, Likeness::Case, Likeness::Loose];
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
            ..Default::default()
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
        // Leniently, each of them is no context, and says why.
        for value in [
            json!("niri"),
            json!({"compositor": 7}),
            json!({"windows": 3}),
        ] {
            let (context, problem) = Context::from_param_or_none(Some(&value));
            assert_eq!(context, None, "{value}");
            assert!(problem.expect("a reason").contains("context"), "{value}");
        }
        assert_eq!(Context::from_param_or_none(None), (None, None));
    }

    #[test]
    fn only_the_first_windows_are_read() {
        let mut many: Vec<Value> = (0..MAX_WINDOWS + 904)
            .map(|i| json!({"id": i, "app_id": format!("app{i}")}))
            .collect();
        // Past the limit even a malformed window is not looked at.
        many.push(json!(5));
        let context = Context::from_param(Some(&json!({"windows": many})))
            .expect("read")
            .expect("a context");
        assert_eq!(context.app_ids.len(), MAX_WINDOWS);
        assert_eq!(context.window_app("app0"), Some("app0"));
        assert_eq!(context.window_app("app4095"), Some("app4095"));
        assert_eq!(context.window_app("app4096"), None);
    }

    #[test]
    fn the_likest_app_id_wins() {
        let ids = |ids: &[&str]| Context {
            app_ids: ids.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        let context = ids(&["x.x", "X-X", "XX", "xx"]);
        assert_eq!(context.window_app("xx"), Some("xx"));
        assert_eq!(ids(&["x.x", "X-X", "XX"]).window_app("xx"), Some("XX"));
        assert_eq!(ids(&["x.x", "X-X"]).window_app("xx"), Some("x.x"));
        assert_eq!(ids(&["X-X", "x.x"]).window_app("xx"), Some("X-X"));
        // An app_id of nothing but separators names nothing.
        let empty = ids(&[".", "--", " . "]);
        for spoken in [".", "--", "", " "] {
            for likeness in Likeness::ALL {
                assert_eq!(empty.window_app_as(spoken, likeness), None, "{spoken:?}");
            }
        }
        assert_eq!(empty.window_app("foot"), None);
    }
}
