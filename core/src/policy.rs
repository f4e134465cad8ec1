//! The policy engine: provenance, the ops registry and the per-step gates.
//!
//! Every step a router proposes passes these gates before any action plugin sees it, in this
//! order (PROTOCOL.md §9):
//!
//! 1. **provenance**: a step from untrusted content (`screen`, `a11y`, `ocr`, `title`,
//!    `clipboard`) may not carry a *concrete* argument of its op → `-32006`;
//! 2. **enabled**: ops off by policy (`terminal`, `input` by default) → `-32003`;
//! 3. **URL scheme**: `open_url`/`ensure_url` only with `http`, `https`, `mailto` → `-32003`
//!    with `data {allowed}`;
//! 4. **argument schema** (in the pipeline, from the action plugin's `args_schema`) → `-32602`;
//! 5. **confirmation**: ops that need it (and steps or plugins that ask for it) are confirmed by
//!    a person.
//!
//! Actions are open strings: an op the registry does not know is allowed for trusted
//! provenance, and for untrusted provenance every one of its arguments counts as concrete.

use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use utter_protocol::{ErrorCode, ErrorObject};

use crate::config::PolicySection;

pub use utter_protocol::provenance::Provenance;

/// The URL schemes `open_url` and `ensure_url` accept.
pub const URL_SCHEMES: &[&str] = &["http", "https", "mailto"];

/// What the registry says about one op.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpRule {
    /// The op name, without an `action.` prefix.
    pub op: String,
    /// Whether it runs at all.
    pub enabled: bool,
    /// Whether a person must confirm each use.
    pub needs_confirm: bool,
    /// Allowed URL schemes of `args.url`; empty means the op takes no URL.
    pub url_schemes: Vec<String>,
    /// Argument keys untrusted provenance may not supply. `None`: every key is concrete.
    pub concrete: Option<Vec<String>>,
}

pub use utter_protocol::digest::normalise_op;

/// A step that passed the gates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// A person must confirm before it runs.
    pub needs_confirm: bool,
    /// One line saying exactly what will happen, arguments included.
    pub summary: String,
}

/// The policy built from `[policy]`.
#[derive(Debug, Clone)]
pub struct Policy {
    rules: BTreeMap<String, OpRule>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy::new(&PolicySection::default())
    }
}

impl Policy {
    /// The registry with `enabled_ops` then `disabled_ops` applied (disabled wins). Enabling
    /// `terminal` or `input` keeps their confirmation.
    pub fn new(section: &PolicySection) -> Policy {
        let mut rules: BTreeMap<String, OpRule> = crate::ops::BUILTIN
            .iter()
            .map(|(op, enabled, confirm, url, concrete)| {
                (
                    op.to_string(),
                    OpRule {
                        op: op.to_string(),
                        enabled: *enabled,
                        needs_confirm: *confirm,
                        url_schemes: if *url {
                            URL_SCHEMES.iter().map(|s| s.to_string()).collect()
                        } else {
                            Vec::new()
                        },
                        concrete: Some(concrete.iter().map(|s| s.to_string()).collect()),
                    },
                )
            })
            .collect();
        for (list, enabled) in [(&section.enabled_ops, true), (&section.disabled_ops, false)] {
            for op in list {
                let op = normalise_op(op).to_owned();
                rules
                    .entry(op.clone())
                    .or_insert_with(|| OpRule {
                        op,
                        enabled: true,
                        needs_confirm: false,
                        url_schemes: Vec::new(),
                        concrete: None,
                    })
                    .enabled = enabled;
            }
        }
        Policy { rules }
    }

    /// Every op the registry knows, by name.
    pub fn registered(&self) -> Vec<OpRule> {
        self.rules.values().cloned().collect()
    }

    /// The rule for `op`; an unregistered op gets the open default (enabled, every argument
    /// concrete).
    pub fn rule(&self, op: &str) -> OpRule {
        let op = normalise_op(op);
        self.rules.get(op).cloned().unwrap_or_else(|| OpRule {
            op: op.to_owned(),
            enabled: true,
            needs_confirm: false,
            url_schemes: Vec::new(),
            concrete: None,
        })
    }

    /// Run the gates for one step. `confirm_requested` is the step's own `confirm` flag (it can
    /// add a confirmation, never remove one).
    ///
    /// # Errors
    /// A [`Denial`]: untrusted arguments, a disabled op, a URL op without a URL, a URL
    /// scheme outside the allow-list.
    pub fn check(
        &self,
        op: &str,
        args: &Value,
        provenance: Provenance,
        confirm_requested: bool,
    ) -> Result<Decision, Denial> {
        // An op is a lowercase word: `OPEN_URL` or `open_url ` must not pass as an unknown
        // (and so unrestricted) op on its way to a plugin that would fold it to `open_url`.
        let bare = normalise_op(op);
        let well_formed = bare.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
            && bare.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'.' | b'-')
            });
        if !well_formed {
            return Err(Denial::BadOpName { op: op.to_owned() });
        }
        let rule = self.rule(op);
        let empty = serde_json::Map::new();
        let arg_map = args.as_object().unwrap_or(&empty);
        if !provenance.is_trusted() {
            let fields: Vec<String> = match &rule.concrete {
                Some(keys) => keys
                    .iter()
                    .filter(|k| arg_map.contains_key(*k))
                    .cloned()
                    .collect(),
                None => arg_map.keys().cloned().collect(),
            };
            let non_object_args = !args.is_object() && !args.is_null();
            if !fields.is_empty() || non_object_args {
                return Err(Denial::UntrustedArguments {
                    op: rule.op,
                    provenance,
                    fields: if non_object_args {
                        vec!["args".to_owned()]
                    } else {
                        fields
                    },
                });
            }
        }
        if let Some((field, c)) = unprintable_name(arg_map) {
            return Err(Denial::UnprintableName {
                op: rule.op,
                field,
                character: format!("U+{:04X}", u32::from(c)),
            });
        }
        if !rule.enabled {
            return Err(Denial::Disabled { op: rule.op });
        }
        if !rule.url_schemes.is_empty() {
            let url = arg_map
                .get("url")
                .and_then(Value::as_str)
                .unwrap_or("")
                .trim();
            if url.is_empty() {
                return Err(Denial::MissingUrl { op: rule.op });
            }
            let scheme = url_scheme(url);
            if !scheme
                .as_deref()
                .is_some_and(|s| rule.url_schemes.iter().any(|a| a == s))
            {
                return Err(Denial::SchemeNotAllowed {
                    url: url.to_owned(),
                    allowed: rule.url_schemes.clone(),
                });
            }
        }
        Ok(Decision {
            needs_confirm: rule.needs_confirm || confirm_requested || runs_a_program(op, args),
            summary: summary(&rule.op, args),
        })
    }
}

/// Argument keys that hold a person's own words (typed text, a query, what to click), shown
/// escaped but taken as they are. Every other string argument is a name (an app id, a
/// workspace, an output, a player, a chord, an action), and names never hold
/// [`utter_protocol::text::is_unprintable`] characters.
pub const FREE_TEXT_KEYS: &[&str] = &["text", "query", "q", "description"];

/// The first argument (outside [`FREE_TEXT_KEYS`]) holding a control or invisible formatting
/// character, and that character: a window's `app_id` such as `"spotify\n\n✅\u{202e}"`
/// copied into `close_app` would otherwise forge what the person reads before approving.
fn unprintable_name(args: &serde_json::Map<String, Value>) -> Option<(String, char)> {
    fn find(value: &Value) -> Option<char> {
        match value {
            Value::String(s) => utter_protocol::text::first_outside_names(s),
            Value::Array(items) => items.iter().find_map(find),
            Value::Object(map) => map.values().find_map(find),
            _ => None,
        }
    }
    args.iter()
        .filter(|(k, _)| !FREE_TEXT_KEYS.contains(&k.as_str()))
        .find_map(|(k, v)| find(v).map(|c| (k.clone(), c)))
}

/// Whether the step starts a program through the compositor: `niri` with `spawn` or
/// `spawn-sh` (sway's `exec`; `spawn-sh` is a shell in all but name). Such a step is
/// confirmed every time, like `terminal`, whoever planned it.
pub fn runs_a_program(op: &str, args: &Value) -> bool {
    if normalise_op(op) != "niri" {
        return false;
    }
    let command = args.get("command").and_then(Value::as_str).unwrap_or("");
    let first = command.split_whitespace().next().unwrap_or("");
    ["spawn", "spawn-sh", "exec"]
        .iter()
        .any(|p| first.eq_ignore_ascii_case(p))
}

/// Why the policy refused a step (PROTOCOL.md §9). Each has its JSON-RPC code
/// ([`Denial::code`]) and becomes an [`ErrorObject`] with `data` where it leaves the core.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denial {
    /// Untrusted content tried to author arguments (`-32006`, select-never-author).
    #[error(
        "op {op:?}: {provenance} provenance may only select among prepared candidates, not supply arguments ({})",
        fields.join(", ")
    )]
    UntrustedArguments {
        /// The op.
        op: String,
        /// The step's provenance.
        provenance: Provenance,
        /// The argument fields it tried to set (`args` when they were not an object).
        fields: Vec<String>,
    },
    /// The op is off (`-32003`).
    #[error("op {op:?} is disabled by policy; enable it with [policy] enabled_ops = [{op:?}]")]
    Disabled {
        /// The op.
        op: String,
    },
    /// Not an op name: lowercase letters, digits, `_`, `.`, `-`, starting with a letter
    /// (`-32602`).
    #[error(
        "{op:?} is not an op name: use lowercase letters, digits, '_', '.' or '-', starting with a letter (e.g. open_url)"
    )]
    BadOpName {
        /// What was given.
        op: String,
    },
    /// A name that becomes an argument (an app id, a workspace or output name) holds a
    /// control or invisible formatting character (`-32602`): no real name has one, and shown
    /// in a confirmation it could fake what is being approved.
    #[error(
        "op {op:?}: args.{field} holds the character {character}, a control or invisible formatting character no app, workspace or output name has; refused"
    )]
    UnprintableName {
        /// The op.
        op: String,
        /// The argument's key.
        field: String,
        /// The character, as `U+202E`.
        character: String,
    },
    /// A URL op without a URL (`-32602`).
    #[error("op {op:?} needs args.url, a non-empty string")]
    MissingUrl {
        /// The op.
        op: String,
    },
    /// The URL's scheme is not on the allow-list (`-32003`).
    #[error("URL {url:?} is not allowed: its scheme must be one of {}", allowed.join(", "))]
    SchemeNotAllowed {
        /// The URL as given.
        url: String,
        /// The schemes allowed for the op.
        allowed: Vec<String>,
    },
}

impl Denial {
    /// The JSON-RPC error code (PROTOCOL.md §6).
    pub fn code(&self) -> ErrorCode {
        match self {
            Denial::UntrustedArguments { .. } => ErrorCode::UntrustedArgument,
            Denial::Disabled { .. } | Denial::SchemeNotAllowed { .. } => ErrorCode::Denied,
            Denial::MissingUrl { .. }
            | Denial::BadOpName { .. }
            | Denial::UnprintableName { .. } => ErrorCode::InvalidParams,
        }
    }
}

impl From<Denial> for ErrorObject {
    fn from(denial: Denial) -> ErrorObject {
        let data = match &denial {
            Denial::UntrustedArguments { op, fields, .. } => {
                Some(json!({"op": op, "fields": fields}))
            }
            Denial::Disabled { op } => Some(json!({"op": op})),
            Denial::MissingUrl { .. } => None,
            Denial::UnprintableName {
                op,
                field,
                character,
            } => Some(json!({"op": op, "field": field, "character": character})),
            Denial::BadOpName { op } => Some(json!({"op": op})),
            Denial::SchemeNotAllowed { url, allowed } => {
                Some(json!({"allowed": allowed, "url": url}))
            }
        };
        let error = ErrorObject::new(denial.code(), denial.to_string());
        match data {
            Some(data) => error.with_data(data),
            None => error,
        }
    }
}

/// The lowercased scheme of an absolute URL (RFC 3986 §3.1), or `None`.
fn url_scheme(url: &str) -> Option<String> {
    let (scheme, _) = url.split_once(':')?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    if !first.is_ascii_alphabetic()
        || !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return None;
    }
    Some(scheme.to_ascii_lowercase())
}

/// A compositor step's action in words, from its `{command, args?}`: the action's name and
/// its values, strings unquoted (`focus-workspace 2`, `spawn foot -e claude`); `None` when
/// `command` is not a string. Not escaped (see [`summary`]).
pub fn compositor_action_words(args: &Value) -> Option<String> {
    let mut words = vec![args.get("command")?.as_str()?.to_owned()];
    for value in args
        .get("args")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        words.push(match value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        });
    }
    Some(words.join(" "))
}

/// A one-line, argument-bearing description of a step, escaped for showing
/// ([`utter_protocol::text::escape_unprintable`]; at most 400 characters): an argument
/// cannot move the cursor, add a line or reverse what the person reads.
pub fn summary(op: &str, args: &Value) -> String {
    let s = |k: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_owned()
    };
    let json = |v: Option<&Value>| v.map(Value::to_string).unwrap_or_default();
    let text = match op {
        "open_url" | "ensure_url" => format!("open URL {}", s("url")),
        "launch_app" => format!("launch app {}", s("app_id")),
        "media" => format!("media: {}", s("command")),
        "terminal" => format!(
            "run command {}",
            json(args.get("command").or(args.get("argv")))
        ),
        "close_app" => format!("close app {}", s("app")),
        "niri" if runs_a_program(op, args) => format!(
            "start a program through the compositor ({}): {}",
            s("command"),
            json(args.get("args"))
        ),
        // Any other compositor action in its own words: "compositor: close-window",
        // "compositor: focus-workspace 2".
        "niri" => compositor_action_words(args).map_or_else(
            || format!("{op} {args}"),
            |words| format!("compositor: {words}"),
        ),
        "key" if args.get("chord").is_some_and(Value::is_string) => {
            format!("press {}", s("chord"))
        }
        "type_text" if args.get("text").is_some_and(Value::is_string) => {
            format!("type {}", json(args.get("text")))
        }
        _ => format!("{op} {args}"),
    };
    utter_protocol::text::clip(&text, 400)
}

pub use utter_protocol::digest::{canonical_json, step_digest, value_digest};

#[cfg(test)]
mod tests {
    use super::*;

    fn check(op: &str, args: Value, p: Provenance) -> Result<Decision, i64> {
        Policy::default()
            .check(op, &args, p, false)
            .map_err(|e| ErrorObject::from(e).code)
    }

    #[test]
    fn url_schemes_are_allow_listed() {
        assert!(
            check(
                "open_url",
                json!({"url": "https://www.youtube.com"}),
                Provenance::User
            )
            .is_ok()
        );
        assert!(check("ensure_url", json!({"url": "MAILTO:a@b"}), Provenance::User).is_ok());
        for bad in [
            "javascript:alert(1)",
            "file:///etc/passwd",
            "www.youtube.com",
            "ftp://x",
        ] {
            assert_eq!(
                check("open_url", json!({"url": bad}), Provenance::User),
                Err(-32003),
                "{bad}"
            );
        }
        assert_eq!(check("open_url", json!({}), Provenance::User), Err(-32602));
    }

    #[test]
    fn dangerous_ops_are_off_and_still_confirmed_when_enabled() {
        assert_eq!(
            check("terminal", json!({"command": "ls"}), Provenance::User),
            Err(-32003)
        );
        let policy = Policy::new(&PolicySection {
            enabled_ops: vec!["action.terminal".into()],
            disabled_ops: vec![],
        });
        let d = policy
            .check(
                "terminal",
                &json!({"command": "ls"}),
                Provenance::User,
                false,
            )
            .unwrap();
        assert!(d.needs_confirm);
        let off = Policy::new(&PolicySection {
            enabled_ops: vec!["terminal".into()],
            disabled_ops: vec!["terminal".into()],
        });
        assert!(
            off.check("terminal", &json!({}), Provenance::User, false)
                .is_err()
        );
    }

    #[test]
    fn names_with_controls_or_bidi_are_refused_and_free_text_is_not() {
        let forged = json!({"app": "spotify\n\n\u{2705} \u{2714}\u{202e}"});
        assert_eq!(check("close_app", forged, Provenance::User), Err(-32602));
        let workspace = json!({"command": "focus-workspace", "args": ["chat\u{2066}"]});
        assert_eq!(check("niri", workspace, Provenance::User), Err(-32602));
        let e = Policy::default()
            .check(
                "focus_app",
                &json!({"app": "a\u{e0041}"}),
                Provenance::User,
                false,
            )
            .unwrap_err();
        assert!(e.to_string().contains("U+E0041"), "{e}");
        // A person's own words may hold a newline or an emoji joiner.
        assert!(
            check(
                "type_text",
                json!({"text": "a\nb \u{1f469}\u{200d}\u{1f4bb}"}),
                Provenance::User
            )
            .is_ok()
        );
        assert!(
            check(
                "close_app",
                json!({"app": "org.gnome.Terminal"}),
                Provenance::User
            )
            .is_ok()
        );
    }

    #[test]
    fn spawning_through_the_compositor_is_always_confirmed() {
        for command in ["spawn", "spawn-sh"] {
            let d = Policy::default()
                .check(
                    "niri",
                    &json!({"command": command, "args": ["sh", "-c", "rm -rf ~"]}),
                    Provenance::User,
                    false,
                )
                .unwrap();
            assert!(d.needs_confirm, "{command}");
            assert!(d.summary.starts_with("start a program"), "{}", d.summary);
        }
        let d = Policy::default()
            .check(
                "niri",
                &json!({"command": "focus-workspace", "args": [2]}),
                Provenance::User,
                false,
            )
            .unwrap();
        assert!(!d.needs_confirm);
    }

    #[test]
    fn summaries_are_escaped() {
        assert_eq!(
            summary("niri", &json!({"command": "close-window"})),
            "compositor: close-window"
        );
        assert_eq!(
            summary("niri", &json!({"command": "focus-workspace", "args": [2]})),
            "compositor: focus-workspace 2"
        );
        assert_eq!(summary("key", &json!({"chord": "ctrl+w"})), "press ctrl+w");
        assert_eq!(summary("type_text", &json!({"text": "hi"})), "type \"hi\"");
        let s = summary("close_app", &json!({"app": "x\u{1b}[2J\u{202e}"}));
        assert_eq!(s, "close app x\\u{1b}[2J\\u{202e}");
    }

    #[test]
    fn untrusted_provenance_cannot_author_arguments() {
        assert_eq!(
            check(
                "open_url",
                json!({"url": "https://evil.example"}),
                Provenance::Screen
            ),
            Err(-32006)
        );
        // An unknown op: every key is concrete.
        assert_eq!(
            check("frobnicate", json!({"anything": 1}), Provenance::Clipboard),
            Err(-32006)
        );
        assert!(check("frobnicate", json!({"anything": 1}), Provenance::User).is_ok());
        // The provenance check comes before the enabled check.
        assert_eq!(
            check("terminal", json!({"command": "rm"}), Provenance::Title),
            Err(-32006)
        );
    }

    #[test]
    fn provenance_parsing_and_lowering() {
        assert_eq!(Provenance::from_value(None).unwrap(), Provenance::User);
        assert_eq!(
            Provenance::from_value(Some(&json!("ocr"))).unwrap(),
            Provenance::Ocr
        );
        assert!(Provenance::from_value(Some(&json!("admin"))).is_err());
        assert_eq!(
            Provenance::User.least_trusted(Provenance::Screen),
            Provenance::Screen
        );
        assert_eq!(
            Provenance::Title.least_trusted(Provenance::User),
            Provenance::Title
        );
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let a: Value =
            serde_json::from_str(r#"{"b":1,"a":{"z":[{"y":2,"x":"\u00e9"}],"c":null}}"#).unwrap();
        let b: Value =
            serde_json::from_str(r#"{"a":{"c":null,"z":[{"x":"é","y":2}]},"b":1}"#).unwrap();
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"c":null,"z":[{"x":"é","y":2}]},"b":1}"#
        );
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(
            step_digest("open_url", &a, Provenance::User),
            step_digest("action.open_url", &b, Provenance::User)
        );
        assert_ne!(
            step_digest("open_url", &a, Provenance::User),
            step_digest("open_url", &a, Provenance::Screen)
        );
        assert_eq!(step_digest("x", &json!({}), Provenance::User).len(), 64);
    }

    #[test]
    fn step_confirm_adds_a_confirmation() {
        let d = Policy::default()
            .check(
                "media",
                &json!({"command": "pause"}),
                Provenance::User,
                true,
            )
            .unwrap();
        assert!(d.needs_confirm);
        assert_eq!(d.summary, "media: pause");
    }
}
