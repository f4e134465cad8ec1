//! Installed desktop applications, found through their `.desktop` files.
//!
//! Where to look and how files are named follow the XDG Base Directory and Desktop Entry
//! specifications: `$XDG_DATA_HOME/applications` first (default `~/.local/share`), then
//! `applications` under each of `$XDG_DATA_DIRS` (default `/usr/local/share:/usr/share`).
//! A file's desktop id is its path below `applications/` with `/` turned into `-` and the
//! `.desktop` suffix removed; the first directory holding an id decides it, so a user's
//! `Hidden=true` copy masks the system entry. The directories come from the `xdg` crate (see
//! [`application_dirs`]); files are parsed by `freedesktop-desktop-entry`. The listing is our
//! own: the crate's `Iter` canonicalises directories, which loses the path below
//! `applications/` that a desktop id is made of, and it reports no modification times.
//!
//! [`AppScanner`] caches the parsed list and re-reads it only when the set of files, or the
//! modification time or size of one of them, changed since the last look: a listing and a
//! `stat` per file, which stays cheap next to parsing a few hundred files.

use crate::text::{compact, normalize, strip_word_prefix, strip_word_suffix};
use freedesktop_desktop_entry::DesktopEntry;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// How deep to follow subdirectories of an `applications` directory. Real trees are one or
/// two levels deep; the limit only guards against symlink loops.
const MAX_DEPTH: usize = 8;

/// One launchable application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppEntry {
    /// The desktop id, e.g. `org.gnome.Nautilus` for `org.gnome.Nautilus.desktop`.
    pub id: String,
    /// The unlocalised `Name`.
    pub name: String,
    /// The unlocalised `GenericName`, if any.
    pub generic_name: Option<String>,
    /// The unlocalised `Keywords`.
    pub keywords: Vec<String>,
    /// `StartupWMClass`: the app_id (or X11 class) its windows are expected to have.
    pub wm_class: Option<String>,
    /// The file name of the program `Exec` runs (`firefox-esr`, `mpv`), if it names one.
    pub exec: Option<String>,
    /// `Categories` (`WebBrowser`, `TerminalEmulator`, `FileManager`, …), as written.
    pub categories: Vec<String>,
    /// `Terminal=true`: a program that runs inside a terminal (vim, htop), whose keys are
    /// the terminal's window's.
    pub terminal: bool,
    /// The forms a spoken name is compared with, made at the first lookup.
    keys: std::sync::OnceLock<AppKeys>,
}

/// An entry's fields as [`find_app`] compares them: compacted (`compact(normalize(..))`),
/// and the `Name`'s normalised words.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AppKeys {
    name: String,
    name_words: String,
    generic_name: Option<String>,
    generic_words: Option<String>,
    keywords: Vec<String>,
    id: String,
    id_last: String,
    exec: Option<String>,
    wm_class: Option<String>,
}

impl AppEntry {
    /// An entry from its parts.
    pub fn new(id: &str, name: &str, generic_name: Option<&str>, keywords: &[&str]) -> AppEntry {
        AppEntry {
            id: id.to_owned(),
            name: name.to_owned(),
            generic_name: generic_name.map(str::to_owned),
            keywords: keywords.iter().map(|k| (*k).to_owned()).collect(),
            wm_class: None,
            exec: None,
            categories: Vec::new(),
            terminal: false,
            keys: std::sync::OnceLock::new(),
        }
    }

    /// The same entry with `Terminal=true`.
    pub fn in_terminal(mut self) -> AppEntry {
        self.terminal = true;
        self
    }

    /// Whether the desktop id holds `said` (a compacted spoken name): the name is a brand
    /// ("firefox" in `firefox`), not a word the entry happens to be called ("files" for
    /// `org.gnome.Nautilus`).
    pub fn id_holds(&self, said: &str) -> bool {
        crate::text::compact(&self.id.to_lowercase()).contains(said)
    }

    /// Whether it has a window of its own whose keys are its own: not a program run in a
    /// terminal (`Terminal=true`), not a terminal emulator (whose keys go to what runs in
    /// it).
    pub fn is_graphical(&self) -> bool {
        !self.terminal && !self.categories.iter().any(|c| c == "TerminalEmulator")
    }

    /// The same entry with these `Categories`.
    pub fn with_categories(mut self, categories: &[&str]) -> AppEntry {
        self.categories = categories.iter().map(|c| (*c).to_owned()).collect();
        self
    }

    /// Whether a window whose `app_id` is `app_id` is this application's: its desktop id, its
    /// `StartupWMClass`, or without one its program's name, its id's last part or its
    /// `Name`, up to ASCII case.
    pub fn has_app_id(&self, app_id: &str) -> bool {
        let same = |name: &str| !name.is_empty() && name.eq_ignore_ascii_case(app_id);
        same(&self.id)
            || self.wm_class.as_deref().is_some_and(same)
            // Where the entry says no StartupWMClass, a window is the entry's as desktops
            // match it: by the program's name ("zoom" for us.zoom.Zoom's `zoom %U`), the
            // reverse-DNS id's last part, or the Name an Electron application gives its
            // windows ("Element" for im.riot.Riot's `element-desktop`, "Proton Pass").
            || self.wm_class.is_none()
                && (self.exec.as_deref().is_some_and(same)
                    || self.id.contains('.') && self.id.rsplit('.').next().is_some_and(same)
                    || same(&self.name))
    }

    /// Whether its `Categories` hold every one of `wanted`.
    pub fn is_of(&self, wanted: &[String]) -> bool {
        !wanted.is_empty()
            && wanted
                .iter()
                .all(|w| self.categories.iter().any(|c| c == w))
    }

    /// The same entry with the program its `Exec` runs.
    pub fn with_exec(mut self, exec: &str) -> AppEntry {
        self.exec = Some(exec.to_owned());
        self.keys = std::sync::OnceLock::new();
        self
    }

    fn keys(&self) -> &AppKeys {
        self.keys.get_or_init(|| {
            let key = |field: &str| compact(&normalize(field));
            AppKeys {
                name: key(&self.name),
                name_words: normalize(&self.name),
                generic_name: self.generic_name.as_deref().map(key),
                generic_words: self.generic_name.as_deref().map(normalize),
                keywords: self.keywords.iter().map(|k| key(k)).collect(),
                id: key(&self.id),
                id_last: key(self.id.rsplit('.').next().unwrap_or(&self.id)),
                exec: self.exec.as_deref().map(key),
                wm_class: self.wm_class.as_deref().map(key),
            }
        })
    }

    /// The same entry with a `StartupWMClass`.
    pub fn with_wm_class(mut self, wm_class: &str) -> AppEntry {
        self.wm_class = Some(wm_class.to_owned());
        self.keys = std::sync::OnceLock::new();
        self
    }
}

/// How well a spoken name matched an entry; lower is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum MatchLevel {
    Name,
    GenericName,
    Keyword,
    /// The desktop id, or its last dot-separated part (`org.gnome.Calculator`).
    Id,
    /// The program `Exec` runs.
    Exec,
    /// `StartupWMClass`.
    WmClass,
    /// A run of the `Name`'s words that no other entry's `Name` has ("firefox" of
    /// "Firefox ESR", "media player" of "mpv Media Player").
    Part,
    /// The same of the `GenericName`'s words before its last, which says the kind
    /// ("minecraft" of Prism Launcher's "Minecraft Launcher"), one entry's alone.
    GenericPart,
}

/// Words too common to name an application alone ("open browser" says no more than "a
/// browser"); as part of a longer run ("media player") they count.
const GENERIC_WORDS: &[&str] = &[
    "app",
    "application",
    "browser",
    "web",
    "media",
    "player",
    "editor",
    "text",
    "file",
    "files",
    "manager",
    "viewer",
    "settings",
    "system",
    "tool",
    "tools",
    "terminal",
    "mail",
    "music",
    "video",
    "image",
    "office",
    "document",
    "the",
    "a",
    "of",
    "and",
    "for",
    "gnu",
    "desktop",
    "client",
    "studio",
    "code",
    "new",
    "open",
    "free",
];

/// Whether `wanted` (normalised words) is a run of the words of `name` worth matching on
/// its own: several words, or one that is not a generic word and has three letters.
fn is_name_part(name_words: &str, wanted: &str) -> bool {
    let words: Vec<&str> = name_words.split(' ').collect();
    let want: Vec<&str> = wanted.split(' ').collect();
    if want.len() >= words.len() || want.is_empty() {
        return false;
    }
    if want.len() == 1 && (GENERIC_WORDS.contains(&want[0]) || want[0].chars().count() < 3) {
        return false;
    }
    words.windows(want.len()).any(|w| w == want.as_slice())
}

/// Words for the same kind of application: a `GenericName` ending in one is said with
/// any other ("E-Book Viewer" is an "ebook reader").
const KIND_SYNONYMS: &[&[&str]] = &[
    &["viewer", "reader"],
    &["client", "app"],
    &["editor", "maker"],
];

/// Whether `spoken` (normalised words, two or more) names the kind a `GenericName` says
/// (`generic`, normalised words) in other words: the same last word or a synonym of it
/// ([`KIND_SYNONYMS`]), and the words before it those of the name, in its order, some
/// left out ("vector editor" of "Vector Graphics Editor") or written together ("ebook
/// reader" of "E-Book Viewer").
fn says_kind(generic: &str, spoken: &str) -> bool {
    let (Some((g_head, g_kind)), Some((s_head, s_kind))) =
        (generic.rsplit_once(' '), spoken.rsplit_once(' '))
    else {
        return false;
    };
    let same_kind = g_kind == s_kind
        || KIND_SYNONYMS
            .iter()
            .any(|set| set.contains(&g_kind) && set.contains(&s_kind));
    if !same_kind || matches!(s_head, "the" | "my" | "a" | "an" | "this" | "that") {
        return false;
    }
    if compact(g_head) == compact(s_head) {
        return true;
    }
    // Each word said is the next of the name's, in order.
    let mut name = g_head.split(' ');
    s_head.split(' ').all(|w| name.any(|g| g == w))
}

/// The application a spoken name refers to, if any. `spoken` is [`normalize`]d text such as
/// `the marker writer app`. It is compared with each entry's `Name`, then `GenericName`,
/// then `Keywords`, the desktop id, the program of `Exec` and `StartupWMClass`, ignoring
/// case, punctuation and spaces, and last with a run of the `Name`'s words that only one
/// entry has ("firefox" finds "Firefox ESR", "media player" finds "mpv Media Player"; a
/// single generic word such as "browser" does not count); a better field wins over a worse
/// one, and among equals the shortest `Name` (then the smallest id) wins. A leading
/// "the"/"my"/"a" and a trailing "app", "application" or "program" are tried away if the
/// literal text matched nothing.
pub fn find_app<'a>(apps: &'a [AppEntry], spoken: &str) -> Option<&'a AppEntry> {
    app_forms(spoken)
        .iter()
        .find_map(|form| best_match(apps, form))
}

/// The forms of a spoken application name worth comparing, most literal first: as said;
/// without a leading article, a trailing "app", "application" or "program" and a trailing
/// "call", "meeting" or "chat"; and that with its last word in the singular when it is
/// several words ("virtual machines" → "virtual machine").
pub fn app_forms(spoken: &str) -> Vec<String> {
    let mut cleaned = spoken;
    for article in ["the", "my", "a", "an"] {
        if let Some(rest) = strip_word_prefix(cleaned, article).filter(|r| !r.is_empty()) {
            cleaned = rest;
            break;
        }
    }
    for suffix in ["application", "app", "program"] {
        if let Some(rest) = strip_word_suffix(cleaned, suffix).filter(|r| !r.is_empty()) {
            cleaned = rest;
            break;
        }
    }
    // "my zoom call", "the slack window": what the application is in, not its name.
    for suffix in ["call", "meeting", "chat"] {
        if let Some(rest) = strip_word_suffix(cleaned, suffix).filter(|r| !r.is_empty()) {
            cleaned = rest;
            break;
        }
    }
    let mut forms = vec![spoken.to_owned()];
    if cleaned != spoken {
        forms.push(cleaned.to_owned());
    }
    // "the virtual machines app": a keyword is said in the singular.
    if let Some(one) = cleaned
        .strip_suffix('s')
        .filter(|one| !one.ends_with('s') && one.len() > 3 && cleaned.contains(' '))
    {
        forms.push(one.to_owned());
    }
    forms
}

fn best_match<'a>(apps: &'a [AppEntry], spoken: &str) -> Option<&'a AppEntry> {
    let wanted = compact(spoken);
    if wanted.is_empty() {
        return None;
    }
    let same = |key: &str| key == wanted;
    let spoken_words = normalize(spoken);
    let matches: Vec<(MatchLevel, usize, &str, &AppEntry)> = apps
        .iter()
        .filter_map(|app| {
            let keys = app.keys();
            let level = if same(&keys.name) {
                MatchLevel::Name
            } else if keys.generic_name.as_deref().is_some_and(same) {
                MatchLevel::GenericName
            } else if keys.keywords.iter().any(|k| same(k)) {
                MatchLevel::Keyword
            } else if same(&keys.id) || same(&keys.id_last) {
                MatchLevel::Id
            } else if keys.exec.as_deref().is_some_and(same) {
                MatchLevel::Exec
            } else if keys.wm_class.as_deref().is_some_and(same) {
                MatchLevel::WmClass
            } else if is_name_part(&keys.name_words, &spoken_words) {
                MatchLevel::Part
            } else if keys.generic_words.as_deref().is_some_and(|g| {
                // Not its last word: that says the kind ("calculator", "launcher").
                let qualifier = g.rsplit_once(' ').map_or("", |(head, _)| head);
                ((qualifier == spoken_words || is_name_part(qualifier, &spoken_words))
                    && !GENERIC_WORDS.contains(&spoken_words.as_str()))
                    || says_kind(g, &spoken_words)
            }) {
                MatchLevel::GenericPart
            } else {
                return None;
            };
            Some((level, app.name.chars().count(), app.id.as_str(), app))
        })
        .collect();
    let best = matches
        .iter()
        .min_by(|a, b| (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)))?;
    // A part of a name must be one application's alone, and so must a generic word that
    // several entries list ("the browser" with two browsers installed).
    let ambiguous = matches.iter().filter(|m| m.0 == best.0).count() > 1
        && (matches!(best.0, MatchLevel::Part | MatchLevel::GenericPart)
            || (matches!(best.0, MatchLevel::GenericName | MatchLevel::Keyword)
                && GENERIC_WORDS.contains(&spoken_words.as_str())));
    if ambiguous {
        return None;
    }
    Some(best.3)
}

/// The `applications` directories to scan, in precedence order (the desktop plugin's, so
/// that both plugins see the same applications; the Base Directory rules are documented and
/// tested there).
pub use utter_desktop::entry::application_dirs;

/// A `.desktop` file found by a listing, with what the freshness check compares.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FoundFile {
    id: String,
    path: PathBuf,
    modified: Option<SystemTime>,
    len: u64,
}

/// List the `.desktop` files of `dirs`, keeping only the first file for each desktop id.
fn list_files(dirs: &[PathBuf]) -> Vec<FoundFile> {
    let mut found: Vec<FoundFile> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for dir in dirs {
        let mut here = Vec::new();
        walk(dir, "", 0, &mut here);
        for file in here {
            if seen.insert(file.id.clone()) {
                found.push(file);
            }
        }
    }
    found
}

fn walk(dir: &Path, prefix: &str, depth: usize, out: &mut Vec<FoundFile>) {
    if depth > MAX_DEPTH {
        return;
    }
    // A missing or unreadable directory is normal (not every data dir has applications).
    let Ok(read) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<(String, PathBuf)> = read
        .filter_map(Result::ok)
        .filter_map(|e| Some((e.file_name().into_string().ok()?, e.path())))
        .collect();
    entries.sort();
    for (file_name, path) in entries {
        // Follows symlinks, as desktop environments do.
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            walk(&path, &format!("{prefix}{file_name}-"), depth + 1, out);
        } else if let Some(stem) = file_name.strip_suffix(".desktop") {
            if stem.is_empty() || !meta.is_file() {
                continue;
            }
            out.push(FoundFile {
                id: format!("{prefix}{stem}"),
                path,
                modified: meta.modified().ok(),
                len: meta.len(),
            });
        }
    }
}

/// Read one `.desktop` file; `None` for files that are not shown as applications (wrong
/// `Type`, `Hidden`, `NoDisplay`, no `Name`) or cannot be read or parsed.
fn read_entry(file: &FoundFile) -> Option<AppEntry> {
    // A FIFO or a device named *.desktop would block the router or never end: refused.
    let text =
        utter_protocol::files::read_regular_file(&file.path, utter_desktop::entry::MAX_ENTRY_BYTES)
            .ok()?;
    // No locale filter and no locales asked for below: only the unlocalised values are used.
    let entry = DesktopEntry::from_str(&file.path, &text, None::<&[&str]>).ok()?;
    if entry.type_() != Some("Application") || entry.hidden() || entry.no_display() {
        return None;
    }
    let unlocalised: &[&str] = &[];
    let name = entry
        .name(unlocalised)
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())?;
    let generic_name = entry
        .generic_name(unlocalised)
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty());
    let keywords = entry
        .keywords(unlocalised)
        .unwrap_or_default()
        .iter()
        .map(|k| k.trim().to_owned())
        .filter(|k| !k.is_empty())
        .collect();
    let wm_class = entry
        .startup_wm_class()
        .map(|c| c.trim().to_owned())
        .filter(|c| !c.is_empty());
    // The program: the first word that is no variable assignment and not `env`.
    let exec = entry.exec().and_then(|line| {
        line.split_whitespace()
            .find(|w| !w.contains('=') && *w != "env")
            .map(|w| {
                w.trim_matches('"')
                    .rsplit('/')
                    .next()
                    .unwrap_or(w)
                    .to_owned()
            })
            .filter(|w| !w.is_empty())
    });
    let categories = entry
        .categories()
        .unwrap_or_default()
        .iter()
        .map(|c| c.trim().to_owned())
        .filter(|c| !c.is_empty())
        .collect();
    Some(AppEntry {
        id: file.id.clone(),
        name,
        generic_name,
        keywords,
        wm_class,
        exec,
        categories,
        terminal: entry.terminal(),
        keys: std::sync::OnceLock::new(),
    })
}

/// Parse every listed file into the applications to offer.
fn parse_all(files: &[FoundFile]) -> Vec<AppEntry> {
    files.iter().filter_map(read_entry).collect()
}

struct Cached {
    files: Vec<FoundFile>,
    apps: Arc<Vec<AppEntry>>,
}

/// The default applications by MIME type ([`AppScanner::defaults`]).
pub type Defaults = std::collections::HashMap<String, Vec<String>>;

/// What tells a file changed: its modification time and length, `None` when it is not
/// there.
type FileStamp = Option<(SystemTime, u64)>;

/// The installed applications of a fixed list of directories, re-read when they change,
/// and the person's default applications (`mimeapps.list`).
pub struct AppScanner {
    dirs: Vec<PathBuf>,
    cache: Mutex<Option<Cached>>,
    mimeapps: Vec<PathBuf>,
    defaults: Mutex<Option<(Vec<FileStamp>, Arc<Defaults>)>>,
}

impl AppScanner {
    /// A scanner over `dirs` (see [`application_dirs`]), with the `mimeapps.list` of each
    /// for the default applications. Nothing is read until [`Self::apps`].
    pub fn new(dirs: Vec<PathBuf>) -> AppScanner {
        let mimeapps =
            utter_desktop::entry::mimeapps_files_in(dirs.iter().map(PathBuf::as_path), &[]);
        AppScanner {
            dirs,
            cache: Mutex::new(None),
            mimeapps,
            defaults: Mutex::new(None),
        }
    }

    /// The same scanner, with the default applications read from `files` (most important
    /// first: [`utter_desktop::entry::mimeapps_files`]) instead.
    pub fn with_mimeapps(mut self, files: Vec<PathBuf>) -> AppScanner {
        self.mimeapps = files;
        self
    }

    /// The person's default applications by MIME type (`x-scheme-handler/https` →
    /// `["brave-browser", …]`), read again when a `mimeapps.list` changed (a `stat` of each
    /// per call). Blocking file I/O.
    pub fn defaults(&self) -> Arc<Defaults> {
        let stamps: Vec<FileStamp> = self
            .mimeapps
            .iter()
            .map(|f| {
                let meta = std::fs::metadata(f).ok()?;
                Some((meta.modified().ok()?, meta.len()))
            })
            .collect();
        let mut cache = self.defaults.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((known, defaults)) = cache.as_ref()
            && *known == stamps
        {
            return defaults.clone();
        }
        let defaults = Arc::new(utter_desktop::entry::default_applications(&self.mimeapps));
        *cache = Some((stamps, defaults.clone()));
        defaults
    }

    /// The current applications. Lists the directories on every call and parses the files
    /// again only if the listing differs from the previous one. Blocking file I/O.
    pub fn apps(&self) -> Arc<Vec<AppEntry>> {
        let files = list_files(&self.dirs);
        // A panic while the lock was held cannot leave the cache half-written (it is replaced
        // whole), so a poisoned lock is still usable.
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(cached) = cache.as_ref() {
            if cached.files == files {
                return cached.apps.clone();
            }
        }
        let apps = Arc::new(parse_all(&files));
        *cache = Some(Cached {
            files,
            apps: apps.clone(),
        });
        apps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_is_said_in_other_words_of_its_generic_name() {
        let apps = vec![
            AppEntry::new("foliate", "Foliate", Some("E-Book Viewer"), &[]),
            AppEntry::new("okular", "Okular", Some("Document Viewer"), &[]),
            AppEntry::new("inkscape", "Inkscape", Some("Vector Graphics Editor"), &[]),
        ];
        let found = |said: &str| find_app(&apps, said).map(|a| a.id.as_str());
        assert_eq!(found("ebook reader"), Some("foliate"));
        assert_eq!(found("my e book reader"), Some("foliate"));
        assert_eq!(found("document reader"), Some("okular"));
        assert_eq!(found("vector editor"), Some("inkscape"));
        // Words out of order, another kind, or a word the name lacks: none.
        assert_eq!(found("editor vector"), None);
        assert_eq!(found("vector viewer"), None);
        assert_eq!(found("raster editor"), None);
        // A generic word before the kind names no application.
        assert_eq!(found("the reader"), None);
    }

    fn sample() -> Vec<AppEntry> {
        vec![
            AppEntry::new(
                "org.gnome.Nautilus",
                "Files",
                Some("File Manager"),
                &["folder", "browse"],
            ),
            AppEntry::new(
                "firefox",
                "Firefox",
                Some("Web Browser"),
                &["internet", "www"],
            ),
            AppEntry::new(
                "org.gnome.Terminal",
                "Terminal",
                Some("Terminal Emulator"),
                &["shell", "prompt", "command line"],
            ),
            AppEntry::new("kitty", "kitty", Some("Terminal Emulator"), &["shell"]),
            AppEntry::new("marker-writer", "Marker Writer", None, &["notes"]),
            AppEntry::new("org.kde.konsole", "Konsole", None, &["terminal"]),
            AppEntry::new(
                "writer-long",
                "Writer Deluxe Edition",
                Some("Word Processor"),
                &[],
            ),
            AppEntry::new(
                "libreoffice-writer",
                "LibreOffice Writer",
                Some("Word Processor"),
                &[],
            ),
        ]
    }

    fn id_of(apps: &[AppEntry], spoken: &str) -> Option<String> {
        find_app(apps, spoken).map(|a| a.id.clone())
    }

    #[test]
    fn names_beat_generic_names_beat_keywords() {
        let apps = sample();
        assert_eq!(id_of(&apps, "firefox").as_deref(), Some("firefox"));
        assert_eq!(
            id_of(&apps, "marker writer").as_deref(),
            Some("marker-writer")
        );
        assert_eq!(
            id_of(&apps, "markerwriter").as_deref(),
            Some("marker-writer")
        );
        // "terminal" is Terminal's Name and Konsole's keyword: the Name wins.
        assert_eq!(
            id_of(&apps, "terminal").as_deref(),
            Some("org.gnome.Terminal")
        );
        assert_eq!(
            id_of(&apps, "file manager").as_deref(),
            Some("org.gnome.Nautilus")
        );
        assert_eq!(id_of(&apps, "web browser").as_deref(), Some("firefox"));
        assert_eq!(id_of(&apps, "notes").as_deref(), Some("marker-writer"));
        assert_eq!(
            id_of(&apps, "command line").as_deref(),
            Some("org.gnome.Terminal")
        );
        assert_eq!(id_of(&apps, "blorp"), None);
        assert_eq!(id_of(&apps, ""), None);
    }

    #[test]
    fn ties_go_to_the_shortest_name() {
        let apps = sample();
        // Both Terminal and kitty are "Terminal Emulator"; kitty's name is shorter.
        assert_eq!(id_of(&apps, "terminal emulator").as_deref(), Some("kitty"));
        assert_eq!(
            id_of(&apps, "word processor").as_deref(),
            Some("libreoffice-writer")
        );
    }

    #[test]
    fn articles_and_app_suffixes_are_tolerated() {
        let apps = sample();
        assert_eq!(
            id_of(&apps, "the file manager").as_deref(),
            Some("org.gnome.Nautilus")
        );
        assert_eq!(id_of(&apps, "the firefox app").as_deref(), Some("firefox"));
        assert_eq!(
            id_of(&apps, "my terminal application").as_deref(),
            Some("org.gnome.Terminal")
        );
    }

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    fn app(name: &str) -> String {
        format!("[Desktop Entry]\nType=Application\nName={name}\nExec=true\n")
    }

    #[test]
    fn scanning_follows_ids_precedence_and_visibility() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let user = tmp.path().join("home/applications");
        let system = tmp.path().join("sys/applications");
        write(&system.join("vendor/tool.desktop"), &app("Vendor Tool"));
        write(&system.join("editor.desktop"), &app("System Editor"));
        write(&user.join("editor.desktop"), &app("My Editor"));
        write(&system.join("masked.desktop"), &app("Masked"));
        write(
            &user.join("masked.desktop"),
            "[Desktop Entry]\nType=Application\nName=Masked\nHidden=true\n",
        );
        write(
            &system.join("hidden.desktop"),
            "[Desktop Entry]\nType=Application\nName=Nope\nNoDisplay=true\n",
        );
        write(
            &system.join("link.desktop"),
            "[Desktop Entry]\nType=Link\nName=A Link\nURL=https://a.com\n",
        );
        write(
            &system.join("broken.desktop"),
            "this is not a desktop file\n",
        );
        write(&system.join("notes.txt"), &app("Not Desktop"));
        write(
            &system.join("kw.desktop"),
            "[Desktop Entry]\nType=Application\nName=Key Words\nGenericName=Thing Maker\n\
             Keywords=alpha;beta\\sgamma;\nName[de]=Schlüsselwörter\n\
             StartupWMClass=KeyWords\n",
        );

        let scanner = AppScanner::new(vec![user.clone(), system.clone()]);
        let apps = scanner.apps();
        let mut ids: Vec<&str> = apps.iter().map(|a| a.id.as_str()).collect();
        ids.sort();
        assert_eq!(ids, ["editor", "kw", "vendor-tool"]);
        let editor = apps.iter().find(|a| a.id == "editor").expect("editor");
        assert_eq!(editor.name, "My Editor");
        let kw = apps.iter().find(|a| a.id == "kw").expect("kw");
        assert_eq!(kw.generic_name.as_deref(), Some("Thing Maker"));
        assert_eq!(kw.keywords, ["alpha", "beta gamma"]);
        assert_eq!(kw.name, "Key Words");
        assert_eq!(kw.wm_class.as_deref(), Some("KeyWords"));
        assert_eq!(editor.wm_class, None);

        // Unchanged: the same parsed list is handed out again.
        assert!(Arc::ptr_eq(&apps, &scanner.apps()));

        // A file created later is seen on the next look.
        write(&user.join("late.desktop"), &app("Late Comer"));
        let again = scanner.apps();
        assert!(
            again
                .iter()
                .any(|a| a.id == "late" && a.name == "Late Comer")
        );
    }
}
