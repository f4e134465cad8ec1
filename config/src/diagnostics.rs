//! What is wrong with a config file, said with its file, line and key: [`ConfigIssue`] and
//! [`ConfigError`], key paths and their spans in the text, and TOML's own errors reworded.

use std::fmt;
use std::ops::Range;

/// A problem in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// The file (or [`DEFAULT_CONFIG_ORIGIN`]).
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// Dotted key path, e.g. `plugin[1].transport`, when known.
    pub key: Option<String>,
    /// What is wrong and what is allowed.
    pub message: String,
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        // A quoted key may hold any character: shown escaped, so that a key cannot forge
        // another line or move the cursor.
        if let Some(key) = &self.key {
            write!(f, ": {}", utter_protocol::text::clip(key, 200))?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Errors found while loading; the config is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
pub struct ConfigError {
    /// Every error found (at least one).
    pub errors: Vec<ConfigIssue>,
    /// Warnings found as well (unknown keys, ...), so that one run reports everything.
    pub warnings: Vec<ConfigIssue>,
}

impl ConfigError {
    pub(crate) fn one(issue: ConfigIssue) -> ConfigError {
        ConfigError {
            errors: vec![issue],
            warnings: Vec::new(),
        }
    }
}

pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

pub(crate) fn path_string(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// The byte span of the key (or array element) at `path`, found by walking the parsed
/// document.
pub(crate) fn span_of(text: &str, path: &[Seg]) -> Option<Range<usize>> {
    use toml::de::{DeTable, DeValue};
    let doc = DeTable::parse(text).ok()?;
    let mut table: &DeTable = doc.get_ref();
    let mut value: Option<&toml::Spanned<DeValue>> = None;
    let mut span = None;
    for seg in path {
        match seg {
            Seg::Key(k) => {
                let (key, v) = match value.map(|v| v.get_ref()) {
                    Some(DeValue::Table(t)) => t.get_key_value(k.as_str())?,
                    Some(_) => return None,
                    None => table.get_key_value(k.as_str())?,
                };
                span = Some(key.span());
                value = Some(v);
                if let DeValue::Table(t) = v.get_ref() {
                    table = t;
                }
            }
            Seg::Index(i) => match value.map(|v| v.get_ref()) {
                Some(DeValue::Array(items)) => {
                    let item = items.get(*i)?;
                    span = Some(item.span());
                    value = Some(item);
                }
                _ => return None,
            },
        }
    }
    span
}

pub(crate) fn issue_at(text: &str, origin: &str, path: &[Seg], message: String) -> ConfigIssue {
    ConfigIssue {
        file: origin.to_owned(),
        line: span_of(text, path).map(|s| line_of(text, s.start)),
        key: Some(path_string(path)),
        message,
    }
}

/// The sections (tables of keys), as dotted paths: serde would also fill one from an
/// array, by position (`runner = [30000, 2000]`), which no one means.
const SECTIONS: &[&str] = &[
    "runner",
    "socket",
    "security",
    "policy",
    "plugins",
    "ptt",
    "audio",
    "audio.vad",
    "stt",
    "tts",
    "decide",
    "llm",
    "models",
];

/// The keys a config may have at its top level: [`SECTIONS`] without dots, and the rest.
pub(crate) fn top_level_keys() -> impl Iterator<Item = &'static str> {
    SECTIONS
        .iter()
        .copied()
        .filter(|s| !s.contains('.'))
        .chain(["config_version", "plugin", "start_capture"])
}

/// Refuse a section written as an array, and `[plugin]` written as a single table, with
/// what to write instead (other wrong types are the deserializer's to report).
pub(crate) fn shapes_of_sections(text: &str, origin: &str) -> Result<(), ConfigError> {
    use toml::de::{DeTable, DeValue};
    let Ok(doc) = DeTable::parse(text) else {
        return Ok(());
    };
    let mut errors = Vec::new();
    for section in SECTIONS {
        let path: Vec<Seg> = section.split('.').map(|k| Seg::Key(k.into())).collect();
        // The value at the whole path; a parent that is not a table is its own error.
        let mut table = doc.get_ref();
        let mut value = None;
        for (i, seg) in path.iter().enumerate() {
            let Seg::Key(k) = seg else { unreachable!() };
            value = table.get(k.as_str()).map(|v| v.get_ref());
            match value {
                Some(DeValue::Table(t)) => table = t,
                _ if i + 1 < path.len() => value = None,
                _ => {}
            }
            if value.is_none() {
                break;
            }
        }
        if let Some(DeValue::Array(_)) = value {
            errors.push(issue_at(
                text,
                origin,
                &path,
                format!("must be a table, not an array: write it as [{section}] with its keys on the lines below"),
            ));
        }
    }
    match doc.get_ref().get("plugin").map(|v| v.get_ref()) {
        Some(DeValue::Table(_)) => errors.push(issue_at(
            text,
            origin,
            &[Seg::Key("plugin".into())],
            "must be an array of tables: write each plugin as [[plugin]] (two brackets), not [plugin]".into(),
        )),
        // An entry that is itself an array would be filled by position.
        Some(DeValue::Array(entries)) => {
            for (i, entry) in entries.iter().enumerate() {
                if !matches!(entry.get_ref(), DeValue::Table(_)) {
                    errors.push(issue_at(
                        text,
                        origin,
                        &[Seg::Key("plugin".into()), Seg::Index(i)],
                        "must be a table of keys (id, entrypoint, ...): write each plugin as [[plugin]] with its keys below".into(),
                    ));
                }
            }
        }
        _ => {}
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ConfigError {
            errors,
            warnings: Vec::new(),
        })
    }
}

/// serde_ignored prints paths like `plugin.0.flavour`; turn them into segments.
pub(crate) fn parse_ignored_path(path: &str) -> Vec<Seg> {
    path.split('.')
        .map(|part| match part.parse::<usize>() {
            Ok(i) => Seg::Index(i),
            Err(_) => Seg::Key(part.to_owned()),
        })
        .collect()
}

pub(crate) fn toml_error(text: &str, origin: &str, e: &toml::de::Error) -> ConfigError {
    let line = e.span().map(|s| line_of(text, s.start));
    let key = e.span().and_then(|s| key_at(text, s.start));
    let mut message = e.message().trim().to_owned();
    // The parser points at the repeated key but does not name it: name it.
    if message == "duplicate key" {
        if let Some(name) = e
            .span()
            .and_then(|s| text.get(s))
            .map(|k| k.trim().trim_matches('"'))
            .filter(|k| !k.is_empty())
        {
            message = format!(
                "duplicate key {:?}: it is given twice in the same table; keep one",
                utter_protocol::text::clip(name, 80)
            );
        }
    }
    ConfigError::one(ConfigIssue {
        file: origin.to_owned(),
        line,
        key,
        message: in_toml_words(&message),
    })
}

/// serde's type names in a message in TOML's words: `expected struct PttSection` is
/// "expected a table", `expected u32` "expected a whole number from 0 to 4294967295",
/// `map` a table and `sequence` an array, so an error names no Rust type.
pub(crate) fn in_toml_words(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find("expected ") {
        let (before, after) = rest.split_at(at + "expected ".len());
        out.push_str(before);
        let word_end = |s: &str| {
            s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(s.len())
        };
        let (said, used) = if let Some(name) = after.strip_prefix("struct ") {
            ("a table", "struct ".len() + word_end(name))
        } else {
            let word = &after[..word_end(after)];
            let said = match word {
                "u8" => "a whole number from 0 to 255",
                "u16" => "a whole number from 0 to 65535",
                "u32" => "a whole number from 0 to 4294967295",
                "u64" | "usize" => "a whole number, 0 or more",
                "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number",
                "f32" | "f64" => "a number",
                "map" => "a table",
                _ => "",
            };
            (said, if said.is_empty() { 0 } else { word.len() })
        };
        out.push_str(said);
        rest = &after[used..];
    }
    out.push_str(rest);
    out.replace("invalid type: map", "invalid type: table")
        .replace("expected a map", "expected a table")
        .replace(" as i128,", " (past what TOML holds),")
        .replace(" as u128,", " (past what TOML holds),")
        .replace("floating point `", "float `")
        .replace("unknown variant", "unknown value")
        .replace("expected a sequence", "expected an array")
        .replace("invalid type: sequence", "invalid type: array")
}

/// The dotted key whose value starts at or contains `offset`, for type errors.
pub(crate) fn key_at(text: &str, offset: usize) -> Option<String> {
    use toml::de::{DeTable, DeValue};
    let doc = DeTable::parse(text).ok()?;
    fn walk(table: &DeTable, offset: usize, prefix: &str, best: &mut Option<(usize, String)>) {
        for (k, v) in table.iter() {
            let name = if prefix.is_empty() {
                k.get_ref().to_string()
            } else {
                format!("{prefix}.{}", k.get_ref())
            };
            let span = v.span();
            let contains = span.start <= offset && offset < span.end.max(span.start + 1);
            let key_contains = k.span().start <= offset && offset < k.span().end;
            if contains || key_contains {
                let width = span.end - span.start;
                if best.as_ref().is_none_or(|(w, _)| width <= *w) {
                    *best = Some((width, name.clone()));
                }
            }
            match v.get_ref() {
                DeValue::Table(t) => walk(t, offset, &name, best),
                DeValue::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        if let DeValue::Table(t) = item.get_ref() {
                            walk(t, offset, &format!("{name}[{i}]"), best);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let mut best = None;
    walk(doc.get_ref(), offset, "", &mut best);
    best.map(|(_, name)| name)
}
