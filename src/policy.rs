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

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fmt;
use utter_protocol::{ErrorCode, ErrorObject};

use crate::config::PolicySection;

/// Where a value came from. Only `user` is trusted (PROTOCOL.md §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provenance {
    /// The person's own utterance or CLI input.
    User,
    /// Read from the screen (the older runner's single untrusted tag).
    Screen,
    /// From the accessibility tree.
    A11y,
    /// From OCR.
    Ocr,
    /// From a window title.
    Title,
    /// From the clipboard.
    Clipboard,
}

impl Provenance {
    /// Whether values of this provenance may author action arguments.
    pub fn is_trusted(self) -> bool {
        self == Provenance::User
    }

    /// The wire word.
    pub fn as_str(self) -> &'static str {
        match self {
            Provenance::User => "user",
            Provenance::Screen => "screen",
            Provenance::A11y => "a11y",
            Provenance::Ocr => "ocr",
            Provenance::Title => "title",
            Provenance::Clipboard => "clipboard",
        }
    }

    /// Parse a wire value: absent, `null` or `""` mean `user` (as the older runner reads it).
    ///
    /// # Errors
    /// `-32602` naming the allowed words.
    pub fn from_value(value: Option<&Value>) -> Result<Provenance, ErrorObject> {
        match value {
            None | Some(Value::Null) => Ok(Provenance::User),
            Some(Value::String(s)) if s.is_empty() => Ok(Provenance::User),
            Some(Value::String(s)) => match s.as_str() {
                "user" => Ok(Provenance::User),
                "screen" => Ok(Provenance::Screen),
                "a11y" => Ok(Provenance::A11y),
                "ocr" => Ok(Provenance::Ocr),
                "title" => Ok(Provenance::Title),
                "clipboard" => Ok(Provenance::Clipboard),
                other => Err(bad_provenance(other)),
            },
            Some(other) => Err(bad_provenance(&other.to_string())),
        }
    }

    /// The less trusted of two: a plugin can lower a step's provenance, never raise it.
    pub fn least_trusted(self, other: Provenance) -> Provenance {
        if self.is_trusted() { other } else { self }
    }
}

fn bad_provenance(got: &str) -> ErrorObject {
    ErrorObject::invalid_params(format!(
        "bad provenance {got:?}: allowed are \"user\", \"screen\", \"a11y\", \"ocr\", \"title\", \"clipboard\""
    ))
}

impl fmt::Display for Provenance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

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

/// The ops the policy special-cases: (op, enabled, needs confirmation, URL schemes, concrete
/// argument keys). Compatible with the older runner's registry.
const BUILTIN_OPS: &[(&str, bool, bool, bool, &[&str])] = &[
    ("ensure_url", true, false, true, &["url"]),
    ("open_url", true, false, true, &["url"]),
    ("terminal", false, true, false, &["command", "argv"]),
    (
        "input",
        false,
        true,
        false,
        &["text", "key", "chord", "action", "button"],
    ),
    (
        "niri",
        true,
        false,
        false,
        &["app_id", "window_id", "command"],
    ),
    ("launch_app", true, false, false, &["app_id", "command"]),
    ("ensure_app", true, false, false, &["app", "argv"]),
    ("focus_app", true, false, false, &["app", "window_id"]),
    (
        "key",
        true,
        false,
        false,
        &["chord", "key", "app", "window_id"],
    ),
    (
        "type_text",
        true,
        false,
        false,
        &["text", "app", "window_id"],
    ),
    ("scroll", true, false, false, &["direction", "amount"]),
    ("media", true, false, false, &["command", "app", "player"]),
    ("click_element", true, false, false, &["description"]),
    ("click_point", true, false, false, &["x", "y"]),
    ("search", true, false, false, &["query", "q"]),
    ("close_app", true, true, false, &["app", "window_id"]),
];

/// Strip an `action.` prefix: `action.open_url` and `open_url` are the same op.
pub fn normalise_op(op: &str) -> &str {
    op.strip_prefix("action.").unwrap_or(op)
}

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
        let mut rules: BTreeMap<String, OpRule> = BUILTIN_OPS
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
    /// `-32006` untrusted argument (`data {op, fields}`); `-32003` disabled op or URL scheme
    /// (`data {allowed}`); `-32602` a URL op without a string `url`.
    pub fn check(
        &self,
        op: &str,
        args: &Value,
        provenance: Provenance,
        confirm_requested: bool,
    ) -> Result<Decision, ErrorObject> {
        let rule = self.rule(op);
        let empty = serde_json::Map::new();
        let arg_map = args.as_object().unwrap_or(&empty);
        if !provenance.is_trusted() {
            let fields: Vec<&String> = match &rule.concrete {
                Some(keys) => keys.iter().filter(|k| arg_map.contains_key(*k)).collect(),
                None => arg_map.keys().collect(),
            };
            let non_object_args = !args.is_object() && !args.is_null();
            if !fields.is_empty() || non_object_args {
                return Err(ErrorObject::new(
                    ErrorCode::UntrustedArgument,
                    format!(
                        "op {:?}: {} provenance may only select among prepared candidates, not supply arguments ({})",
                        rule.op,
                        provenance,
                        if non_object_args { "args".to_owned() } else { fields.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ") }
                    ),
                )
                .with_data(json!({"op": rule.op, "fields": fields})));
            }
        }
        if !rule.enabled {
            return Err(ErrorObject::new(
                ErrorCode::Denied,
                format!(
                    "op {:?} is disabled by policy; enable it with [policy] enabled_ops = [{:?}]",
                    rule.op, rule.op
                ),
            )
            .with_data(json!({"op": rule.op})));
        }
        if !rule.url_schemes.is_empty() {
            let url = arg_map
                .get("url")
                .and_then(Value::as_str)
                .unwrap_or("")
                .trim();
            if url.is_empty() {
                return Err(ErrorObject::invalid_params(format!(
                    "op {:?} needs args.url, a non-empty string",
                    rule.op
                )));
            }
            let scheme = url_scheme(url);
            if !scheme
                .as_deref()
                .is_some_and(|s| rule.url_schemes.iter().any(|a| a == s))
            {
                return Err(ErrorObject::new(
                    ErrorCode::Denied,
                    format!(
                        "URL {url:?} is not allowed: its scheme must be one of {}",
                        rule.url_schemes.join(", ")
                    ),
                )
                .with_data(json!({"allowed": rule.url_schemes, "url": url})));
            }
        }
        Ok(Decision {
            needs_confirm: rule.needs_confirm || confirm_requested,
            summary: summary(&rule.op, args),
        })
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

/// A one-line, argument-bearing description of a step.
pub fn summary(op: &str, args: &Value) -> String {
    let s = |k: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_owned()
    };
    match op {
        "open_url" | "ensure_url" => format!("open URL {}", s("url")),
        "launch_app" => format!("launch app {}", s("app_id")),
        "media" => format!("media: {}", s("command")),
        "terminal" => format!(
            "run command {}",
            args.get("command")
                .or(args.get("argv"))
                .map(Value::to_string)
                .unwrap_or_default()
        ),
        "close_app" => format!("close app {}", s("app")),
        _ => format!("{op} {args}"),
    }
}

/// Canonical JSON: object keys sorted by their UTF-8 bytes at every level, no whitespace,
/// strings and numbers as `serde_json` writes them. Two values that are equal as JSON have the
/// same canonical text whatever order their maps were built in.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                if let Some(v) = map.get(key) {
                    write_canonical(v, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// The SHA-256 (lowercase hex) of the canonical JSON of `value`.
pub fn sha256_hex(value: &Value) -> String {
    use sha2::Digest;
    let hash = sha2::Sha256::digest(canonical_json(value).as_bytes());
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

/// The digest a confirmation and a candidate are bound to: SHA-256 over the canonical JSON of
/// `{op, args, provenance}`.
pub fn step_digest(op: &str, args: &Value, provenance: Provenance) -> String {
    sha256_hex(&json!({"op": normalise_op(op), "args": args, "provenance": provenance.as_str()}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(op: &str, args: Value, p: Provenance) -> Result<Decision, i64> {
        Policy::default()
            .check(op, &args, p, false)
            .map_err(|e| e.code)
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
