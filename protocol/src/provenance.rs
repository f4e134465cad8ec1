//! Provenance: where a value came from (PROTOCOL.md §9). Only `user`, the person's own
//! utterance or CLI input, is trusted; everything read from the screen, the accessibility
//! tree, OCR, a window title or the clipboard is untrusted and may only *select* among
//! prepared candidates, never author an action's arguments.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

use crate::ErrorObject;

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

/// A `host.context` snapshot without its tags: every `{value, provenance}` object (how the
/// runner marks each untrusted scalar, PROTOCOL.md §9.6) replaced by its `value`, so a
/// plugin can read the same shape `action.invoke`'s `context` has. Everything else is kept.
pub fn untagged(value: &Value) -> Value {
    match value {
        Value::Object(map)
            if map.len() == 2 && map.contains_key("value") && map.contains_key("provenance") =>
        {
            untagged(&map["value"])
        }
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), untagged(v))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(untagged).collect()),
        scalar => scalar.clone(),
    }
}

#[cfg(test)]
mod untag_tests {
    use super::untagged;
    use serde_json::json;

    #[test]
    fn tags_come_off_and_other_objects_stay() {
        let tagged = json!({
            "focused": {"id": {"value": 7, "provenance": "screen"},
                        "title": {"value": "x", "provenance": "title"}},
            "windows": [{"rect": {"x": {"value": 1, "provenance": "screen"}}}],
            "other": {"value": 1, "provenance": "screen", "extra": true}
        });
        assert_eq!(
            untagged(&tagged),
            json!({"focused": {"id": 7, "title": "x"}, "windows": [{"rect": {"x": 1}}],
                   "other": {"value": 1, "provenance": "screen", "extra": true}})
        );
    }
}
