//! The older runner's format (no `config_version`): its boolean keys, which it also took as
//! strings, read as what they say, by [`crate::migrate`] (written to the file) and by
//! [`crate::load::parse`] (read so, with a warning).

use crate::diagnostics::{ConfigIssue, Seg, issue_at};

/// The boolean keys of the older runner's format, which it also accepted as strings (any
/// non-empty string counting as true, reference §10): `(table, key)`, `plugin` meaning each
/// `[[plugin]]`.
const OLDER_BOOLEAN_KEYS: &[(&str, &str)] = &[
    ("security", "enforce"),
    ("socket", "allow_same_uid"),
    ("plugin", "enabled"),
];

/// In a version-0 document, the [`OLDER_BOOLEAN_KEYS`] written as strings that say a
/// boolean (`"true"`, `"yes"`, `"on"`, `"1"`; `"false"`, `"no"`, `"off"`, `"0"`, `""`, any
/// case) become that boolean, in place (comments and spacing kept). Returns each change:
/// its key path, the word and the boolean. Other strings are left for the checker to
/// refuse. Used by [`crate::migrate`] (written to the file) and [`crate::load::parse`] (read so, with a warning),
/// so that what the runner reads from an older file is what migration writes.
pub(crate) fn older_booleans(doc: &mut toml_edit::DocumentMut) -> Vec<(Vec<Seg>, String, bool)> {
    let mut changes = Vec::new();
    let mut fix = |table: &mut toml_edit::Table, path: Vec<Seg>| {
        let Some(Seg::Key(key)) = path.last() else {
            return;
        };
        let Some(item) = table.get_mut(key) else {
            return;
        };
        let Some(value) = item.as_value() else { return };
        let Some(word) = value.as_str() else { return };
        let flag = match word.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "1" => true,
            "false" | "no" | "off" | "0" | "" => false,
            _ => return,
        };
        let word = word.to_owned();
        let decor = value.decor().clone();
        let mut new = toml_edit::Value::from(flag);
        *new.decor_mut() = decor;
        *item = toml_edit::Item::Value(new);
        changes.push((path, word, flag));
    };
    for (table, key) in OLDER_BOOLEAN_KEYS {
        let key_seg = || Seg::Key((*key).to_owned());
        if *table == "plugin" {
            if let Some(plugins) = doc
                .get_mut("plugin")
                .and_then(toml_edit::Item::as_array_of_tables_mut)
            {
                for (i, plugin) in plugins.iter_mut().enumerate() {
                    fix(
                        plugin,
                        vec![Seg::Key("plugin".into()), Seg::Index(i), key_seg()],
                    );
                }
            }
        } else if let Some(t) = doc.get_mut(table).and_then(toml_edit::Item::as_table_mut) {
            fix(t, vec![Seg::Key((*table).to_owned()), key_seg()]);
        }
    }
    changes
}

/// `text` with [`older_booleans`] applied when it is version 0 (no `config_version`) and
/// has any, and a warning for each; `None` when there is nothing to change (or the text is
/// not TOML, which [`crate::load::parse`] reports itself). Values change in place, so lines stay.
pub(crate) fn read_older_booleans(text: &str, origin: &str) -> Option<(String, Vec<ConfigIssue>)> {
    let mut doc: toml_edit::DocumentMut = text.parse().ok()?;
    if doc.contains_key("config_version") {
        return None;
    }
    let changes = older_booleans(&mut doc);
    if changes.is_empty() {
        return None;
    }
    let notes = changes
        .into_iter()
        .map(|(path, word, flag)| {
            issue_at(
                text,
                origin,
                &path,
                format!(
                    "the string {word:?} is read as the boolean {flag} (the older runner read every non-empty string as true); `utter config migrate` writes it as a boolean"
                ),
            )
        })
        .collect();
    Some((doc.to_string(), notes))
}
