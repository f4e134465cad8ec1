//! Editing an application profile's shortcuts (`[shortcuts]`, name = "chord") for the
//! Commands page, without a GTK type in sight.
//!
//! A profile is edited in the user's profile directory (`$XDG_CONFIG_HOME/utter/profiles`):
//! the user's own file when the profile comes from one, else a new file of the built-in
//! profile's name that starts as a copy of the built-in text (a user's file replaces the
//! built-in profile of the same id, `utter profiles --help`). Edits go through `toml_edit`,
//! so every other line and comment stays, and the result must pass the router's own checker
//! (`utter_rules::profiles::parse`, which also checks each chord) before it is written,
//! atomically; a refused edit says `file:line:column: problem` and writes nothing. The
//! router reads a changed profile directory again by itself.

use std::path::{Path, PathBuf};

use utter_rules::profiles::{self, BUILTIN, Profile, Profiles};

/// The longest shortcut name or chord accepted, in characters.
pub const MAX_FIELD: usize = 64;

/// The largest profile file read, in bytes.
const MAX_FILE: u64 = 256 * 1024;

/// A profile opened for editing.
#[derive(Debug, Clone, PartialEq)]
pub struct Editable {
    /// Its id.
    pub id: String,
    /// The file that is written: the user's.
    pub path: PathBuf,
    /// The text as it is now (the user's file, or the built-in one it will start from).
    pub text: String,
    /// Whether the user has no file of it yet (saving creates one).
    pub from_builtin: bool,
}

/// The profiles in force: the built-in ones and those of `user_dir`.
pub fn list(user_dir: Option<&Path>) -> Profiles {
    Profiles::load(user_dir)
}

/// Open profile `id` for editing in `user_dir`.
///
/// # Errors
/// No profile has that id, or its file cannot be read.
pub fn open(id: &str, user_dir: &Path) -> Result<Editable, String> {
    let loaded = Profiles::load(Some(user_dir));
    let profile = loaded
        .by_id(id)
        .ok_or_else(|| format!("no profile has the id {id:?}"))?;
    let builtin = BUILTIN
        .iter()
        .find(|(name, _)| profile.source == format!("data/profiles/{name} (built in)"));
    match builtin {
        Some((name, text)) => {
            let path = user_dir.join(name);
            // A file of that name that is not this profile (another id, or one the router
            // skipped) is the person's own work: never replaced by a copy of the built-in.
            if std::fs::symlink_metadata(&path).is_ok() {
                let why = loaded
                    .problems
                    .iter()
                    .find(|p| p.starts_with(&path.display().to_string()))
                    .cloned()
                    .unwrap_or_else(|| "it holds another profile".to_owned());
                return Err(format!(
                    "{} exists but is not the {id} profile ({why}); fix or rename it, then edit again",
                    path.display()
                ));
            }
            Ok(Editable {
                id: id.to_owned(),
                path,
                text: (*text).to_owned(),
                from_builtin: true,
            })
        }
        None => {
            let path = PathBuf::from(&profile.source);
            let text = utter_config::paths::read_regular_file(&path, MAX_FILE)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            Ok(Editable {
                id: id.to_owned(),
                path,
                text,
                from_builtin: false,
            })
        }
    }
}

impl Editable {
    /// The profile as its text reads now.
    ///
    /// # Errors
    /// `file:line:column: problem` (a file edited by hand into something invalid).
    pub fn profile(&self) -> Result<Profile, String> {
        profiles::parse(&self.text, &self.path.display().to_string()).map_err(|e| e.to_string())
    }

    /// The text with shortcut `name` set to `chord` (added, or its chord replaced), or with
    /// it removed when `chord` is `None`, checked by the router's own checker.
    ///
    /// # Errors
    /// An empty or too long name or chord, a control character, a name that is not there
    /// to remove, or what the checker says (`file:line:column: problem`, e.g. an unknown
    /// key name in the chord).
    pub fn with_shortcut(&self, name: &str, chord: Option<&str>) -> Result<String, String> {
        let name = checked_field("shortcut name", name)?;
        // Line ends and a byte-order mark are given back as the file had them.
        let (style, text) = utter_config::text_style::TextStyle::of(&self.text);
        let mut doc: toml_edit::DocumentMut = text
            .parse()
            .map_err(|e| format!("{}: {e}", self.path.display()))?;
        let table = doc
            .entry("shortcuts")
            .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()))
            .as_table_like_mut()
            .ok_or_else(|| format!("{}: shortcuts is not a table", self.path.display()))?;
        // The key as written, when one matches (names compare without regard to case).
        let existing = table
            .iter()
            .map(|(k, _)| k.to_owned())
            .find(|k| k.trim().eq_ignore_ascii_case(&name));
        match chord {
            Some(chord) => {
                let chord = checked_field("keys", chord)?;
                match existing.and_then(|key| table.get_mut(&key)) {
                    // In place: the key as written and the value's comment stay.
                    Some(item) => {
                        let decor = item.as_value().map(|v| v.decor().clone());
                        *item = toml_edit::value(chord);
                        if let (Some(decor), Some(value)) = (decor, item.as_value_mut()) {
                            *value.decor_mut() = decor;
                        }
                    }
                    None => {
                        table.insert(&name, toml_edit::value(chord));
                    }
                }
            }
            None => {
                let key =
                    existing.ok_or_else(|| format!("{} has no shortcut {name:?}", self.id))?;
                table.remove(&key);
            }
        }
        let text = doc.to_string();
        profiles::parse(&text, &self.path.display().to_string()).map_err(|e| e.to_string())?;
        Ok(style.apply(text))
    }

    /// Write `text` (from [`Editable::with_shortcut`]) to the user's file, atomically,
    /// creating the profile directory when needed.
    ///
    /// # Errors
    /// The directory or the file cannot be written.
    pub fn save(&mut self, text: String) -> Result<(), String> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        utter_config::paths::write_atomic(&self.path, text.as_bytes(), 0o644)
            .map_err(|e| format!("{}: {e}", self.path.display()))?;
        self.text = text;
        self.from_builtin = false;
        Ok(())
    }
}

/// `value` trimmed, when it is 1 to [`MAX_FIELD`] characters without control characters.
fn checked_field(what: &str, value: &str) -> Result<String, String> {
    let value = value.trim();
    if value.is_empty() {
        return Err(format!("the {what} is empty"));
    }
    if value.chars().count() > MAX_FIELD {
        return Err(format!("the {what} is longer than {MAX_FIELD} characters"));
    }
    if value.chars().any(char::is_control) {
        return Err(format!("the {what} holds a control character"));
    }
    Ok(value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_builtin_profile_is_copied_then_edited_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let mut foot = open("foot", dir.path()).expect("foot is built in");
        assert!(foot.from_builtin);
        assert_eq!(foot.path, dir.path().join("foot.toml"));
        let text = foot
            .with_shortcut("scroll to the top", Some("shift+Home"))
            .expect("a valid chord");
        // Only the new line is new; every comment of the built-in file is kept.
        assert_eq!(
            text.replace("\"scroll to the top\" = \"shift+Home\"\n", ""),
            foot.text
        );
        foot.save(text).unwrap();
        let loaded = list(Some(dir.path()));
        let edited = loaded.by_id("foot").expect("foot");
        assert_eq!(edited.shortcuts["scroll to the top"], "shift+Home");
        assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);

        // The user's file is edited from now on: replace a chord, remove a shortcut.
        let again = open("foot", dir.path()).unwrap();
        assert!(!again.from_builtin);
        let text = again.with_shortcut("Copy", Some("ctrl+Insert")).unwrap();
        assert!(text.contains("\"copy\" = \"ctrl+Insert\""), "{text}");
        let text = Editable {
            text,
            ..again.clone()
        }
        .with_shortcut("copy", None)
        .unwrap();
        assert!(!text.contains("\"copy\""), "{text}");
    }

    #[test]
    fn a_crlf_file_with_a_byte_order_mark_keeps_both() {
        let dir = tempfile::tempdir().unwrap();
        let foot = open("foot", dir.path()).unwrap();
        let text = format!("\u{feff}{}", foot.text.replace('\n', "\r\n"));
        let edited = Editable {
            text: text.clone(),
            ..foot
        }
        .with_shortcut("scroll to the top", Some("shift+Home"))
        .unwrap();
        assert_eq!(
            edited.replace("\"scroll to the top\" = \"shift+Home\"\r\n", ""),
            text
        );
    }

    #[test]
    fn bad_shortcuts_are_refused_with_their_place_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let foot = open("foot", dir.path()).unwrap();
        let err = foot
            .with_shortcut("explode", Some("ctrl+nosuchkey"))
            .unwrap_err();
        assert!(
            err.starts_with(&format!("{}:", foot.path.display())),
            "{err}"
        );
        assert!(err.contains("nosuchkey"), "{err}");
        for (name, chord) in [
            ("", "ctrl+a"),
            ("x", ""),
            ("a\nb", "ctrl+a"),
            ("x", "ctrl+a\n[evil]"),
            (&"n".repeat(MAX_FIELD + 1)[..], "ctrl+a"),
        ] {
            assert!(
                foot.with_shortcut(name, Some(chord)).is_err(),
                "{name:?} {chord:?}"
            );
        }
        assert!(foot.with_shortcut("no such one", None).is_err());
        assert!(open("nobody", dir.path()).is_err());
        assert!(!foot.path.exists(), "nothing was written");
    }

    #[test]
    fn a_file_of_the_builtin_name_that_is_not_that_profile_is_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let foot = dir.path().join("foot.toml");
        // The person's kitty profile in a file named foot.toml, then a broken file.
        let kitty = BUILTIN.iter().find(|(n, _)| *n == "kitty.toml").unwrap().1;
        for text in [kitty.to_owned(), "id = \"foot\"\nkind = [".to_owned()] {
            std::fs::write(&foot, &text).unwrap();
            let err = open("foot", dir.path()).expect_err("refused");
            assert!(
                err.contains("foot.toml exists but is not the foot profile"),
                "{err}"
            );
            assert_eq!(std::fs::read_to_string(&foot).unwrap(), text, "untouched");
        }
    }
}
