//! Changing values in a config text (`utter config set`, the settings app) while keeping
//! its comments, order and layout, and refusing an edit the runner would not load.

use std::path::Path;

use crate::diagnostics::{ConfigError, ConfigIssue, line_of};
use crate::load::parse;
use crate::schema::MAX_CONFIG_BYTES;

/// A config with some values changed ([`set_values`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edited {
    /// The whole new text.
    pub text: String,
    /// The dotted keys whose value changed, in the order given (a key set to the value it
    /// already had is not listed).
    pub changed: Vec<String>,
    /// What the checker warns about the edited keys (an unknown key is written, and ignored
    /// by the runner, as in any config file).
    pub warnings: Vec<ConfigIssue>,
}

/// The most dotted parts a key given to [`set_values`] may have.
pub const MAX_KEY_PARTS: usize = 8;
/// The longest key, in bytes, [`set_values`] takes.
pub const MAX_KEY_BYTES: usize = 256;

/// Set each dotted key of `edits` (`"ptt.evdev"`, `"audio.vad.trim"`) to its TOML value in
/// the config `text`, keeping comments, order and layout (`toml_edit`): a key that exists
/// keeps its place, its spacing and the comment after it; a missing key is appended to its
/// table, and a missing table is added at the end. The edited text must pass the checks the
/// runner applies when it loads a config ([`parse`]), so a value of the wrong type or out of
/// range is refused here, before anything is written. Used by `utter config set` and the
/// settings app.
///
/// # Errors
/// `text` is not TOML; a key is empty, goes through something that is not a table (such as
/// the `[[plugin]]` array, which is edited by hand) or names a table; or the edited config
/// fails [`parse`]. Each issue names `origin` and, where known, the line.
pub fn set_values(
    text: &str,
    origin: &str,
    edits: &[(String, toml_edit::Value)],
) -> Result<Edited, ConfigError> {
    // Line ends and a byte-order mark are given back as the file had them.
    let (style, text) = crate::text_style::TextStyle::of(text);
    let refuse = |key: &str, message: String| {
        ConfigError::one(ConfigIssue {
            file: origin.to_owned(),
            line: None,
            key: Some(key.to_owned()),
            message,
        })
    };
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        ConfigError::one(ConfigIssue {
            file: origin.to_owned(),
            line: e.span().map(|s| line_of(text, s.start)),
            key: None,
            message: format!("not TOML: {}", e.message()),
        })
    })?;
    let mut changed = Vec::new();
    for (key, value) in edits {
        // No setting is deeper than a few tables; a key of thousands of parts would make as
        // many nested tables (and their check quadratic) for nothing.
        if key.len() > MAX_KEY_BYTES || key.split('.').count() > MAX_KEY_PARTS {
            return Err(refuse(
                &utter_protocol::text::clip(key, 80),
                format!(
                    "is longer than any setting (at most {MAX_KEY_PARTS} parts and {MAX_KEY_BYTES} bytes); `utter config default` lists them"
                ),
            ));
        }
        let parts: Vec<&str> = key.split('.').collect();
        let bare = |p: &&str| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        if !parts.iter().all(bare) {
            return Err(refuse(
                key,
                "is not a dotted key such as ptt.evdev (letters, digits, _ and - between the dots)"
                    .to_owned(),
            ));
        }
        let (name, tables) = parts.split_last().expect("split gives one part at least");
        let mut table = doc.as_table_mut();
        for part in tables {
            let item = table
                .entry(part)
                .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()));
            table = match item {
                toml_edit::Item::Table(t) => t,
                _ => {
                    return Err(refuse(
                        key,
                        format!(
                            "{part} is not a table (a value, an array of tables such as [[plugin]], or an inline table, which are edited by hand)"
                        ),
                    ));
                }
            };
        }
        match table.get_mut(name) {
            Some(toml_edit::Item::Value(old)) => {
                if same_value(old, value) {
                    continue;
                }
                let mut new = value.clone();
                *new.decor_mut() = old.decor().clone();
                *old = new;
            }
            Some(toml_edit::Item::None) | None => {
                table.insert(name, toml_edit::Item::Value(value.clone()));
            }
            Some(_) => {
                return Err(refuse(key, "names a table, not a value".to_owned()));
            }
        }
        changed.push(key.clone());
    }
    let text = doc.to_string();
    let loaded = parse(&text, origin)?;
    // The warnings about what was set (`policy.enabled_ops[0]` for `policy.enabled_ops`).
    let about_edits = |w: &ConfigIssue| {
        w.key.as_deref().is_some_and(|k| {
            // At or under an edited key, or a table (unknown) that holds one.
            let under = |inner: &str, outer: &str| {
                inner
                    .strip_prefix(outer)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(['[', '.']))
            };
            edits.iter().any(|(e, _)| under(k, e) || under(e, k))
        })
    };
    let warnings: Vec<ConfigIssue> = loaded.warnings.into_iter().filter(about_edits).collect();
    // Setting a key the runner does not read would change nothing: refused, not written.
    if let Some(unknown) = warnings
        .iter()
        .find(|w| w.message.starts_with("unknown key"))
    {
        return Err(ConfigError::one(ConfigIssue {
            line: None,
            message: format!(
                "{} (setting it would change nothing)",
                unknown
                    .message
                    .replacen("unknown key; ignored", "is not a key utter reads", 1)
            ),
            ..unknown.clone()
        }));
    }
    Ok(Edited {
        text: style.apply(text),
        changed,
        warnings,
    })
}

/// [`set_values`] on the config file at `path`, written back atomically when `write` is set
/// and something changed. A link is written through to its target, the file keeps its mode,
/// and a file that does not exist yet starts as `config_version = 1` (its directory is
/// created).
///
/// # Errors
/// As [`set_values`] (nothing is written); a file that cannot be read (not a regular file,
/// too large) or written, as an issue of that file.
pub fn set_in_file(
    path: &Path,
    edits: &[(String, toml_edit::Value)],
    write: bool,
) -> Result<Edited, ConfigError> {
    use std::os::unix::fs::PermissionsExt;
    let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    let path = match std::fs::canonicalize(path) {
        Ok(real) => real,
        // A link whose target is missing: writing would replace the link with a file.
        Err(_) if link => {
            return Err(ConfigError::one(ConfigIssue {
                file: path.display().to_string(),
                line: None,
                key: None,
                message: format!(
                    "is a link to {}, which does not exist: create that file, or name another with --config",
                    std::fs::read_link(path)
                        .map(|t| t.display().to_string())
                        .unwrap_or_default()
                ),
            }));
        }
        Err(_) => path.to_path_buf(),
    };
    let origin = path.display().to_string();
    let io = |what: &str, e: std::io::Error| {
        ConfigError::one(ConfigIssue {
            file: origin.clone(),
            line: None,
            key: None,
            message: format!("cannot {what} it: {e}"),
        })
    };
    // One writer at a time: the directory is locked from the read to the rename, so two
    // edits at once both land (each reads what the other wrote).
    let _lock = if write {
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| io("create the directory of", e))?;
        let handle = std::fs::File::open(dir).map_err(|e| io("open the directory of", e))?;
        Some(
            nix::fcntl::Flock::lock(handle, nix::fcntl::FlockArg::LockExclusive)
                .map_err(|(_, e)| io("lock the directory of", e.into()))?,
        )
    } else {
        None
    };
    // A file that does not exist yet starts with nothing but its version: it is layered over
    // the built-in default, so the one value set changes that value only, and the default's
    // plugins (and later versions' defaults) still run.
    let text = match crate::paths::read_regular_file(&path, MAX_CONFIG_BYTES) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => NEW_FILE.to_owned(),
        Err(e) => return Err(io("read", e)),
    };
    let before = parse(&text, &origin).ok();
    let mut edited = set_values(&text, &origin, edits)?;
    // Say when the change leaves a plugin that ran before out.
    if let (Some(before), Ok(after)) = (before, parse(&edited.text, &origin)) {
        let ran: Vec<String> = before
            .config
            .active_plugins()
            .map(|p| p.id.clone())
            .collect();
        let runs: Vec<String> = after
            .config
            .active_plugins()
            .map(|p| p.id.clone())
            .collect();
        let lost: Vec<&String> = ran.iter().filter(|id| !runs.contains(id)).collect();
        if !lost.is_empty() {
            edited.warnings.push(ConfigIssue {
                file: origin.clone(),
                line: None,
                key: None,
                message: format!(
                    "after this change these plugins no longer run: {}",
                    lost.iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
    }
    if write && !edited.changed.is_empty() {
        let mode = std::fs::metadata(&path)
            .map(|m| m.permissions().mode() & 0o7777)
            .unwrap_or(0o600);
        crate::paths::write_atomic(&path, edited.text.as_bytes(), mode)
            .map_err(|e| io("write", e))?;
    }
    Ok(edited)
}

/// What [`set_in_file`] starts a config file that does not exist with.
pub const NEW_FILE: &str = "\
# Utter's configuration. Each value here changes the built-in default's; what is left out
# is the default's (`utter config default` prints it, with a comment for every key). Without
# [[plugin]] entries the default's plugins run; with any, exactly those listed.
config_version = 1
";

/// Whether two TOML values are equal, whatever their spelling (`'a'` and `"a"`, `1_000` and
/// `1000`) and the comments around them.
fn same_value(a: &toml_edit::Value, b: &toml_edit::Value) -> bool {
    use toml_edit::Value as V;
    match (a, b) {
        (V::String(x), V::String(y)) => x.value() == y.value(),
        (V::Integer(x), V::Integer(y)) => x.value() == y.value(),
        (V::Float(x), V::Float(y)) => x.value() == y.value(),
        (V::Boolean(x), V::Boolean(y)) => x.value() == y.value(),
        (V::Array(x), V::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| same_value(p, q))
        }
        (x, y) => {
            let bare = |v: &toml_edit::Value| {
                let mut v = v.clone();
                v.decor_mut().clear();
                v.to_string()
            };
            bare(x) == bare(y)
        }
    }
}
