//! Finding and reading desktop entries by desktop file id.
//!
//! Directories follow the XDG Base Directory Specification, as the `xdg` crate reads it:
//! `$XDG_DATA_HOME/applications` (default `~/.local/share/applications`), then
//! `applications` under each entry of `$XDG_DATA_DIRS` (default
//! `/usr/local/share:/usr/share`); relative paths in either variable are ignored, as that
//! spec asks. A desktop file id (Desktop Entry Specification,
//! "Desktop File ID") is the file's path below `applications/` with `/` turned into `-` and
//! `.desktop` removed; the first directory holding an id wins.
//!
//! Files are parsed with the `freedesktop-desktop-entry` crate, which undoes the string
//! escapes and keeps every translation. Only the keys we use are handed to it (see
//! [`KEYS`]): the crate rejects a whole file for an escape it does not know, such as the
//! `\;` that is legal in list values like `Keywords`, and we read no list.

use freedesktop_desktop_entry::DesktopEntry;
use std::path::{Path, PathBuf};

/// How deep to follow subdirectories of an `applications` directory. Real trees are one or
/// two levels deep; the limit guards against symlink loops.
const MAX_DEPTH: usize = 8;

/// The `[Desktop Entry]` keys this plugin reads; other keys and groups are not parsed.
const KEYS: &[&str] = &[
    "Type",
    "Name",
    "Icon",
    "Exec",
    "TryExec",
    "Path",
    "Terminal",
    "Hidden",
    "DBusActivatable",
];

/// The `applications` directories to search, most important first, from the process
/// environment: `applications` under the XDG data home and then under each XDG data dir.
///
/// The base directories come from the `xdg` crate, which `freedesktop-desktop-entry`'s
/// `default_paths()` wraps; that function is not called because it panics when there is no
/// home directory, where this leaves the user directory out (as it does a relative `$HOME`).
pub fn application_dirs() -> Vec<PathBuf> {
    let base = xdg::BaseDirectories::new();
    base.get_data_home()
        .into_iter()
        .chain(base.get_data_dirs())
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join("applications"))
        .collect()
}

/// The `mimeapps.list` files of this environment, most important first (the XDG MIME
/// Applications Associations spec): in the config home, each config dir, then the
/// `applications` directory of the data home and of each data dir ([`application_dirs`]),
/// each place's desktop-specific `<desktop>-mimeapps.list` (for each name of
/// `$XDG_CURRENT_DESKTOP`, lowercase) before its `mimeapps.list`. Files need not exist.
pub fn mimeapps_files() -> Vec<PathBuf> {
    let base = xdg::BaseDirectories::new();
    let config: Vec<PathBuf> = base
        .get_config_home()
        .into_iter()
        .chain(base.get_config_dirs())
        .filter(|dir| dir.is_absolute())
        .collect();
    let desktops: Vec<String> = std::env::var("XDG_CURRENT_DESKTOP")
        .unwrap_or_default()
        .split(':')
        .filter(|d| !d.is_empty())
        .map(str::to_lowercase)
        .collect();
    mimeapps_files_in(
        config
            .iter()
            .chain(&application_dirs())
            .map(PathBuf::as_path),
        &desktops,
    )
}

/// [`mimeapps_files`] of these directories (config directories and `applications`
/// directories, in precedence order) for these desktop names.
pub fn mimeapps_files_in<'a>(
    dirs: impl IntoIterator<Item = &'a Path>,
    desktops: &[String],
) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in dirs {
        for desktop in desktops {
            files.push(dir.join(format!("{desktop}-mimeapps.list")));
        }
        files.push(dir.join("mimeapps.list"));
    }
    files
}

/// The default applications of `files` (`[Default Applications]`: a MIME type, `=`, and a
/// `;`-separated list of desktop file ids), by MIME type: the ids in order of preference,
/// without `.desktop`, a more important file's before a less important one's. Files that are
/// not regular files (a FIFO, a device), unreadable, over 1 MiB or not UTF-8, and lines that
/// are no `key=value`, are skipped.
pub fn default_applications(files: &[PathBuf]) -> std::collections::HashMap<String, Vec<String>> {
    let mut defaults: std::collections::HashMap<String, Vec<String>> = Default::default();
    for path in files {
        // A regular file only: a FIFO would block the planner, a device never end.
        let Ok(text) = utter_protocol::files::read_regular_file(path, 1 << 20) else {
            continue;
        };
        let mut in_defaults = false;
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                in_defaults = line == "[Default Applications]";
                continue;
            }
            let Some((mime, ids)) = line.split_once('=').filter(|_| in_defaults) else {
                continue;
            };
            let list = defaults.entry(mime.trim().to_owned()).or_default();
            for id in ids.split(';').filter_map(|id| normalize_id(id.trim())) {
                if !list.iter().any(|known| known == id) {
                    list.push(id.to_owned());
                }
            }
        }
    }
    defaults
}

/// Normalise a requested id: a trailing `.desktop` is dropped. Returns `None` for ids that
/// cannot name a desktop file (empty, or holding `/` or NUL).
pub fn normalize_id(app_id: &str) -> Option<&str> {
    let id = app_id.strip_suffix(".desktop").unwrap_or(app_id);
    (!id.is_empty() && !id.contains(['/', '\0'])).then_some(id)
}

/// The path of the desktop file with this id in the first of `dirs` that has one.
pub fn find(id: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    let file_name = format!("{id}.desktop");
    dirs.iter().find_map(|dir| {
        let direct = dir.join(&file_name);
        if direct.is_file() {
            return Some(direct);
        }
        find_below(dir, "", id, 0)
    })
}

/// Look in the subdirectories of `dir` (whose id prefix is `prefix`) for `id`.
fn find_below(dir: &Path, prefix: &str, id: &str, depth: usize) -> Option<PathBuf> {
    if depth > MAX_DEPTH {
        return None;
    }
    let mut children: Vec<(String, PathBuf, bool)> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let path = e.path();
            let is_dir = path.is_dir();
            Some((name, path, is_dir))
        })
        .collect();
    children.sort();
    for (name, path, is_dir) in children {
        let child_id = format!("{prefix}{name}");
        if is_dir {
            // Only a directory whose id prefix matches can hold the entry.
            let sub_prefix = format!("{child_id}-");
            if id.starts_with(&sub_prefix) {
                if let Some(found) = find_below(&path, &sub_prefix, id, depth + 1) {
                    return Some(found);
                }
            }
        } else if depth > 0 && child_id.strip_suffix(".desktop") == Some(id) && path.is_file() {
            return Some(path);
        }
    }
    None
}

/// Locales to try for translated keys, best first, from `LC_ALL`, `LC_MESSAGES` or `LANG`
/// (the first one set), in the order of the Desktop Entry Specification's "Localized values
/// for keys": `lang_COUNTRY@MODIFIER`, `lang_COUNTRY`, `lang@MODIFIER`, `lang`.
pub fn locale_candidates() -> Vec<String> {
    let value = ["LC_ALL", "LC_MESSAGES", "LANG"]
        .iter()
        .filter_map(|k| std::env::var(k).ok())
        .find(|v| !v.is_empty())
        .unwrap_or_default();
    candidates_for(&value)
}

fn candidates_for(locale: &str) -> Vec<String> {
    if locale.is_empty() || locale == "C" || locale == "POSIX" || locale.starts_with("C.") {
        return Vec::new();
    }
    let (rest, modifier) = match locale.split_once('@') {
        Some((rest, modifier)) => (rest, Some(modifier)),
        None => (locale, None),
    };
    let rest = rest
        .split_once('.')
        .map_or(rest, |(before, _encoding)| before);
    let (lang, country) = match rest.split_once('_') {
        Some((lang, country)) => (lang, Some(country)),
        None => (rest, None),
    };
    let mut out = Vec::new();
    if let (Some(country), Some(modifier)) = (country, modifier) {
        out.push(format!("{lang}_{country}@{modifier}"));
    }
    if let Some(country) = country {
        out.push(format!("{lang}_{country}"));
    }
    if let Some(modifier) = modifier {
        out.push(format!("{lang}@{modifier}"));
    }
    out.push(lang.to_owned());
    out
}

/// Why a desktop file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a valid desktop entry.
    #[error("{path} is not a valid desktop entry ({reason})")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        reason: String,
    },
}

/// The largest desktop entry read (real ones are a few kilobytes).
pub const MAX_ENTRY_BYTES: u64 = 1024 * 1024;

/// Read and parse the desktop entry at `path`, keeping only [`KEYS`] of `[Desktop Entry]`
/// (with all their translations).
pub fn read(path: &Path) -> Result<DesktopEntry, ReadError> {
    // A FIFO or a device named *.desktop is refused by its type, never read.
    let text =
        utter_protocol::files::read_regular_file(path, MAX_ENTRY_BYTES).map_err(|source| {
            ReadError::Io {
                path: path.to_owned(),
                source,
            }
        })?;
    let text = only_known_keys(&text);
    DesktopEntry::from_str(path, &text, None::<&[&str]>).map_err(|e| ReadError::Invalid {
        path: path.to_owned(),
        reason: e.to_string(),
    })
}

/// The `[Desktop Entry]` group of `text` reduced to the lines of [`KEYS`] (comments, blank
/// lines, other keys and other groups dropped).
fn only_known_keys(text: &str) -> String {
    let mut out = String::from("[Desktop Entry]\n");
    let mut in_main = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with('[') {
            in_main = trimmed.trim_end() == "[Desktop Entry]";
            continue;
        }
        if !in_main || trimmed.starts_with('#') {
            continue;
        }
        let Some((key, _)) = line.split_once('=') else {
            continue;
        };
        let base = key.trim_end();
        let base = base.split_once('[').map_or(base, |(b, _locale)| b);
        if KEYS.contains(&base) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A desktop's own list comes before the shared one, a more important place's before
    /// a less important one's; other groups, junk lines and missing files are skipped.
    #[test]
    fn default_applications_follow_the_files_precedence() {
        let tmp = tempfile::tempdir().unwrap();
        let config = tmp.path().join("config");
        let apps = tmp.path().join("data/applications");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::create_dir_all(&apps).unwrap();
        std::fs::write(
            config.join("niri-mimeapps.list"),
            "[Default Applications]\nx-scheme-handler/https=brave-browser.desktop\n",
        )
        .unwrap();
        std::fs::write(
            config.join("mimeapps.list"),
            "[Added Associations]\ninode/directory=thunar.desktop\n\
             [Default Applications]\nx-scheme-handler/https=firefox.desktop;brave-browser.desktop;\n\
             garbage line\ninode/directory=org.gnome.Nautilus.desktop\n",
        )
        .unwrap();
        std::fs::write(
            apps.join("mimeapps.list"),
            "[Default Applications]\ninode/directory=nemo.desktop\n",
        )
        .unwrap();
        let files = mimeapps_files_in([config.as_path(), apps.as_path()], &["niri".into()]);
        assert_eq!(files[0], config.join("niri-mimeapps.list"));
        let defaults = default_applications(&files);
        assert_eq!(
            defaults["x-scheme-handler/https"],
            ["brave-browser", "firefox"]
        );
        assert_eq!(defaults["inode/directory"], ["org.gnome.Nautilus", "nemo"]);
        assert_eq!(defaults.len(), 2);
    }

    /// A FIFO (which would block the planner), a device, an oversized or binary file where
    /// a `mimeapps.list` should be is skipped at once; the next file still counts.
    #[test]
    fn hostile_mimeapps_files_are_skipped_at_once() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("fifo-mimeapps.list");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let zero = tmp.path().join("zero-mimeapps.list");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let big = tmp.path().join("big-mimeapps.list");
        std::fs::write(
            &big,
            "[Default Applications]\n".to_owned() + &"x=y.desktop\n".repeat(200_000),
        )
        .unwrap();
        let binary = tmp.path().join("binary-mimeapps.list");
        std::fs::write(&binary, [0xff, 0xfe, 0x00, b'[', 0x80]).unwrap();
        let good = tmp.path().join("mimeapps.list");
        std::fs::write(&good, "[Default Applications]\ntext/plain=gedit.desktop\n").unwrap();
        // (A FIFO opened for reading would wait for a writer: this call would never return.)
        let defaults = default_applications(&[fifo, zero, big, binary, good]);
        assert_eq!(defaults.len(), 1, "{defaults:?}");
        assert_eq!(defaults["text/plain"], ["gedit"]);
    }

    /// Set for a child test process that is to print [`application_dirs`].
    const PRINT_DIRS: &str = "UTTER_DESKTOP_TEST_PRINT_APPLICATION_DIRS";

    /// Not a test of its own: [`dirs_with_env`] runs it in a child process.
    #[test]
    fn print_application_dirs_for_the_parent_test() {
        if std::env::var_os(PRINT_DIRS).is_some() {
            // The harness may have printed "test NAME ... " without a line end.
            println!();
            for dir in application_dirs() {
                println!("dir={}", dir.display());
            }
        }
    }

    /// [`application_dirs`] in a process whose whole environment is `vars` (the XDG crate
    /// reads the process environment, which a test must not change under the others).
    fn dirs_with_env(vars: &[(&str, &str)]) -> Vec<PathBuf> {
        let exe = std::env::current_exe().expect("test binary");
        let output = std::process::Command::new(exe)
            .args([
                "--exact",
                "entry::tests::print_application_dirs_for_the_parent_test",
                "--nocapture",
                "--test-threads=1",
            ])
            .env_clear()
            .env(PRINT_DIRS, "1")
            .envs(vars.iter().copied())
            .output()
            .expect("the test binary runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{stdout}");
        let dirs: Vec<PathBuf> = stdout
            .lines()
            .filter_map(|line| line.strip_prefix("dir="))
            .map(PathBuf::from)
            .collect();
        assert!(
            !dirs.is_empty(),
            "the child printed no directories: {stdout}"
        );
        dirs
    }

    #[test]
    fn application_dirs_follow_the_base_directory_spec() {
        assert_eq!(
            dirs_with_env(&[("HOME", "/home/u")]),
            [
                "/home/u/.local/share/applications",
                "/usr/local/share/applications",
                "/usr/share/applications",
            ]
            .map(PathBuf::from)
        );
        assert_eq!(
            dirs_with_env(&[
                ("HOME", "/home/u"),
                ("XDG_DATA_HOME", "/d/home"),
                ("XDG_DATA_DIRS", "/a:relative::/b/"),
            ]),
            ["/d/home/applications", "/a/applications", "/b/applications"].map(PathBuf::from)
        );
        // Relative values are ignored: XDG_DATA_HOME falls back to HOME, an all-relative
        // XDG_DATA_DIRS to the default, and a relative HOME gives no user directory.
        assert_eq!(
            dirs_with_env(&[
                ("HOME", "/h"),
                ("XDG_DATA_HOME", "rel"),
                ("XDG_DATA_DIRS", "/s")
            ]),
            ["/h/.local/share/applications", "/s/applications"].map(PathBuf::from)
        );
        assert_eq!(
            dirs_with_env(&[("HOME", "relative"), ("XDG_DATA_DIRS", "x:")]),
            ["/usr/local/share/applications", "/usr/share/applications"].map(PathBuf::from)
        );
    }

    #[test]
    fn locale_candidates_follow_the_spec_order() {
        assert_eq!(
            candidates_for("sr_YU.UTF-8@Latn"),
            ["sr_YU@Latn", "sr_YU", "sr@Latn", "sr"]
        );
        assert_eq!(candidates_for("de_DE.UTF-8"), ["de_DE", "de"]);
        assert_eq!(candidates_for("ca@valencia"), ["ca@valencia", "ca"]);
        assert_eq!(candidates_for("fr"), ["fr"]);
        assert!(candidates_for("C.UTF-8").is_empty());
        assert!(candidates_for("POSIX").is_empty());
        assert!(candidates_for("").is_empty());
    }

    #[test]
    fn ids_are_normalised() {
        assert_eq!(normalize_id("firefox.desktop"), Some("firefox"));
        assert_eq!(
            normalize_id("org.gnome.Nautilus"),
            Some("org.gnome.Nautilus")
        );
        assert_eq!(normalize_id(""), None);
        assert_eq!(normalize_id(".desktop"), None);
        assert_eq!(normalize_id("../evil"), None);
        assert_eq!(normalize_id("a\0b"), None);
    }

    #[test]
    fn ids_map_to_files_in_subdirectories_and_the_first_dir_wins() {
        let root = std::env::temp_dir().join(format!("utter-desktop-entry-{}", std::process::id()));
        let user = root.join("user/applications");
        let system = root.join("system/applications");
        for dir in [&user, &system.join("kde4"), &system.join("org/deep")] {
            std::fs::create_dir_all(dir).expect("create test dirs");
        }
        let write = |p: PathBuf| std::fs::write(&p, "[Desktop Entry]\n").map(|_| p);
        let kate = write(system.join("kde4/kate.desktop")).expect("write");
        let deep = write(system.join("org/deep/app.desktop")).expect("write");
        let sys_gedit = write(system.join("gedit.desktop")).expect("write");
        let user_gedit = write(user.join("gedit.desktop")).expect("write");
        let dirs = vec![user.clone(), system.clone()];
        assert_eq!(find("kde4-kate", &dirs), Some(kate));
        assert_eq!(find("org-deep-app", &dirs), Some(deep));
        assert_eq!(find("gedit", &dirs), Some(user_gedit));
        assert_eq!(find("gedit", &dirs[1..]), Some(sys_gedit));
        assert_eq!(find("kate", &dirs), None);
        assert_eq!(find("kde4", &dirs), None);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn only_our_keys_reach_the_parser() {
        let text = "# comment\n[Desktop Entry]\nName=Editor\nName[de]=Editor DE\n\
                    Keywords=text\\;edit;\nExec=ed %f\n\n[Desktop Action new]\nExec=other\n";
        assert_eq!(
            only_known_keys(text),
            "[Desktop Entry]\nName=Editor\nName[de]=Editor DE\nExec=ed %f\n"
        );
        let entry = DesktopEntry::from_str(
            "/x/applications/ed.desktop",
            &only_known_keys(text),
            None::<&[&str]>,
        )
        .expect("parses");
        assert_eq!(entry.exec(), Some("ed %f"));
        assert_eq!(entry.name(&["de"]).as_deref(), Some("Editor DE"));
        assert_eq!(entry.name::<&str>(&[]).as_deref(), Some("Editor"));
    }

    #[test]
    fn string_escapes_are_undone_by_the_parser() {
        let text = "[Desktop Entry]\nExec=sh -c \"echo \\\\\"a\\\\\" \\\\$HOME\" b\\sc\n";
        let entry = DesktopEntry::from_str("/x/applications/e.desktop", text, None::<&[&str]>)
            .expect("parses");
        assert_eq!(entry.exec(), Some(r#"sh -c "echo \"a\" \$HOME" b c"#));
    }
}
