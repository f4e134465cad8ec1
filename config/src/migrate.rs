//! Bringing an older file up to [`CONFIG_VERSION`], keeping its comments: the older
//! runner's format (no `config_version`, booleans written as strings).

use crate::diagnostics::{ConfigError, ConfigIssue, line_of, path_string};
use crate::load::parse;
use crate::older::older_booleans;
use crate::schema::CONFIG_VERSION;

/// A config rewritten to the current `config_version` ([`migrate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migration {
    /// The version the text had (0: the older runner's format, without `config_version`).
    pub from: u32,
    /// The version it has now ([`CONFIG_VERSION`]).
    pub to: u32,
    /// The migrated text: the original with only the changes below, every comment kept.
    pub text: String,
    /// One sentence per change (empty when the text was current already).
    pub changes: Vec<String>,
}

/// Rewrite `text` (from `origin`, for messages) to [`CONFIG_VERSION`] with `toml_edit`, so
/// that comments, order and formatting stay as they were. Version 0 (no `config_version`,
/// the older runner's format, same keys) gets `config_version = 1` after its leading
/// comments, and its boolean keys written as strings (`enforce = "true"`) become booleans as
/// written. The result must load ([`parse`]); a current text comes back unchanged.
///
/// # Errors
/// A [`ConfigError`]: the text is not TOML, its version is newer than this runner reads, or
/// the migrated text still has errors (which migration cannot decide for the user).
pub fn migrate(text: &str, origin: &str) -> Result<Migration, ConfigError> {
    // Line ends and a byte-order mark are given back as the file had them.
    let (style, text) = crate::text_style::TextStyle::of(text);
    let at_line = |message: String, offset: Option<usize>| {
        ConfigError::one(ConfigIssue {
            file: origin.to_owned(),
            line: offset.map(|o| line_of(text, o)),
            key: None,
            message,
        })
    };
    let doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        at_line(
            format!("not TOML: {}", e.message()),
            e.span().map(|s| s.start),
        )
    })?;
    let from = match doc.get("config_version") {
        None => 0,
        Some(item) => match item.as_integer().and_then(|v| u32::try_from(v).ok()) {
            Some(v) => v,
            None => {
                return Err(ConfigError::one(ConfigIssue {
                    file: origin.to_owned(),
                    line: None,
                    key: Some("config_version".into()),
                    message: "must be a whole number".into(),
                }));
            }
        },
    };
    if from > CONFIG_VERSION {
        return Err(ConfigError::one(ConfigIssue {
            file: origin.to_owned(),
            line: None,
            key: Some("config_version".into()),
            message: format!(
                "version {from} is newer than this runner reads ({CONFIG_VERSION}); update utter"
            ),
        }));
    }
    let mut changes = Vec::new();
    let mut migrated = text.to_owned();
    // The line after which the version was put (errors are shown at the original lines).
    let mut inserted_after: Option<usize> = None;
    if from == 0 {
        // Strings where the older runner read booleans: as written, not as it read them.
        let mut doc = doc;
        for (path, word, flag) in older_booleans(&mut doc) {
            changes.push(format!(
                "{}: the string {word:?} is now the boolean {flag} (the older runner read every non-empty string as true)",
                path_string(&path)
            ));
        }
        migrated = doc.to_string();
        // The version goes first, after the file's leading comments and blank lines.
        let insert_at = {
            let mut offset = 0;
            for line in migrated.split_inclusive('\n') {
                let t = line.trim();
                if t.is_empty() || t.starts_with('#') {
                    offset += line.len();
                } else {
                    break;
                }
            }
            offset
        };
        // A last comment line without its newline gets one first.
        let newline = if insert_at > 0 && !migrated[..insert_at].ends_with('\n') {
            "\n"
        } else {
            ""
        };
        migrated.insert_str(
            insert_at,
            &format!("{newline}config_version = {CONFIG_VERSION}\n\n"),
        );
        inserted_after = Some(migrated[..insert_at].lines().count());
        changes.insert(
            0,
            format!(
                "added config_version = {CONFIG_VERSION} (the file was in the older runner's format, version 0)"
            ),
        );
    }
    // What migration cannot fix is the user's to decide: nothing is written. Its errors
    // name the lines of the file as it is.
    parse(&migrated, origin).map_err(|mut e| {
        if let Some(after) = inserted_after {
            for issue in e.errors.iter_mut().chain(e.warnings.iter_mut()) {
                if let Some(line) = issue.line.as_mut().filter(|l| **l > after) {
                    *line = line.saturating_sub(2).max(after);
                }
            }
        }
        e
    })?;
    Ok(Migration {
        from,
        to: CONFIG_VERSION,
        text: style.apply(migrated),
        changes,
    })
}
