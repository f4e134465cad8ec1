//! Phrases from the user's own niri key bindings.
//!
//! The config is `$NIRI_CONFIG` when that is set and not empty, else `niri/config.kdl` under
//! the XDG config home (`$XDG_CONFIG_HOME`, or `~/.config` when it is unset or relative; the
//! `xdg` crate decides, as for the application directories). niri's fallback
//! `/etc/niri/config.kdl` and its `include` files are not read.
//!
//! Every child of a top-level `binds` node is one binding: its name is the key
//! (`Mod+T`), its properties are the binding's flags (`repeat=false`,
//! `hotkey-overlay-title="Open a Terminal"`) and its first child is the action
//! (`spawn "foot"`). Each binding whose action has a niri action name becomes an action
//! `{command: <name>, args: <positional values>, options: <properties>}`, said as
//!
//! - the action's name with dashes as spaces, followed by its arguments (`focus workspace 1`,
//!   which also matches "focus workspace one"), when every argument can be spoken: a
//!   non-negative integer, or a string of plain words (`"foot"`; not `"-10%"` nor
//!   `"notify-send"`, whose punctuation normalisation would lose);
//! - its `hotkey-overlay-title`, when it has one (`open a terminal`).
//!
//! The first binding to claim a phrase keeps it. The file is the user's own, so its actions
//! are trusted as if the user had said them (the plan's provenance stays the request's).
//! Trusted is not unconfirmed: a binding whose action is destructive
//! ([`crate::phrases::ALWAYS_CONFIRM`], e.g. `close-window` or `quit`) plans a step with
//! `confirm: true`, as the curated phrase for the same action does.
//!
//! [`BindsSource`] checks the file's modification time, size and inode at most once per plan
//! (one `stat`) and parses it again only when one of them changed; it is also read when the
//! plugin starts. A missing file means no phrases, silently. A file that cannot be read or
//! parsed is logged once per change, with `file:line:column`, and reported by
//! [`Binds::problem`] (the plugin's health turns `degraded`); meanwhile the phrases of the
//! last good version stay in use, as niri itself keeps running its last good config.

use crate::phrases::{NiriAction, PhraseTable, canonical, is_action_name, is_destructive};
use crate::text::{column_of, line_of, normalize};
use kdl::{KdlDocument, KdlNode, KdlValue};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use utter_protocol::serde_json::{Map, Number, Value, json};

/// The variable naming the niri config, as niri itself reads it.
pub const NIRI_CONFIG_ENV: &str = "NIRI_CONFIG";

/// The largest config read; niri configs are a few kilobytes.
const MAX_FILE: u64 = 4 * 1024 * 1024;

/// The most bindings turned into phrases.
const MAX_BINDS: usize = 2000;

/// The most words a generated phrase may have.
const MAX_PHRASE_WORDS: usize = 16;

/// The niri config path: `$NIRI_CONFIG` (as `var` reports it; empty counts as unset), else
/// `config_home/niri/config.kdl`; `None` when neither is known.
pub fn config_path(
    var: impl Fn(&str) -> Option<std::ffi::OsString>,
    config_home: Option<PathBuf>,
) -> Option<PathBuf> {
    var(NIRI_CONFIG_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| config_home.map(|home| home.join("niri").join("config.kdl")))
}

/// [`config_path`] from the process environment.
pub fn default_config_path() -> Option<PathBuf> {
    let home = xdg::BaseDirectories::new()
        .get_config_home()
        .filter(|p| p.is_absolute());
    config_path(|name| std::env::var_os(name), home)
}

/// The phrases of one version of the config, and how it went.
#[derive(Debug, Clone, Default)]
pub struct Binds {
    /// The generated phrases.
    pub table: PhraseTable,
    /// How many bindings gave phrases.
    pub count: usize,
    /// Why the current file could not be used (`path:line:column: message`), if so.
    pub problem: Option<String>,
    /// The file, when there is one.
    pub path: Option<PathBuf>,
    /// False when the file does not exist (or no path is known).
    pub exists: bool,
}

impl Binds {
    /// One line for the plugin's health.
    pub fn summary(&self) -> String {
        match (&self.path, &self.problem, self.exists) {
            (None, _, _) => "no niri config path".to_owned(),
            (_, Some(problem), _) => format!("niri config unusable: {problem}"),
            (Some(path), None, false) => format!("no niri config at {}", path.display()),
            (Some(path), None, true) => format!(
                "{} from {} ({} phrases)",
                if self.count == 1 {
                    "1 niri binding".to_owned()
                } else {
                    format!("{} niri bindings", self.count)
                },
                path.display(),
                self.table.len()
            ),
        }
    }
}

/// What identifies one version of the file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
    device: u64,
}

impl Stamp {
    fn of(path: &Path) -> Option<Stamp> {
        let meta = std::fs::metadata(path).ok()?;
        Some(Stamp {
            modified: meta.modified().ok(),
            len: meta.len(),
            inode: meta.ino(),
            device: meta.dev(),
        })
    }
}

struct Cached {
    /// `None` before the first look; `Some(None)` when the file was missing.
    stamp: Option<Option<Stamp>>,
    binds: Arc<Binds>,
}

/// The user's niri bindings, re-read when the file changes.
pub struct BindsSource {
    path: Option<PathBuf>,
    cache: Mutex<Cached>,
}

impl BindsSource {
    /// Bindings from `path` (see [`default_config_path`]); `None` gives none. Nothing is read
    /// until [`Self::current`].
    pub fn new(path: Option<PathBuf>) -> BindsSource {
        BindsSource {
            path: path.clone(),
            cache: Mutex::new(Cached {
                stamp: None,
                binds: Arc::new(Binds {
                    path,
                    ..Binds::default()
                }),
            }),
        }
    }

    /// The bindings as of now: one `stat`, and a read and parse when the file changed since
    /// the last call. Blocking file I/O.
    pub fn current(&self) -> Arc<Binds> {
        let Some(path) = &self.path else {
            return Arc::new(Binds::default());
        };
        let stamp = Stamp::of(path);
        // The cache is replaced whole, so a poisoned lock holds nothing half-written.
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.stamp == Some(stamp) {
            return cache.binds.clone();
        }
        let binds = match stamp {
            None => Binds {
                path: Some(path.clone()),
                ..Binds::default()
            },
            Some(_) => match load(path) {
                Ok((table, count)) => Binds {
                    table,
                    count,
                    problem: None,
                    path: Some(path.clone()),
                    exists: true,
                },
                Err(problem) => {
                    tracing::warn!(
                        "{problem}; the compositor phrases of the niri bindings {}",
                        if cache.binds.count > 0 {
                            "stay as they were"
                        } else {
                            "are not available"
                        }
                    );
                    let last = &cache.binds;
                    Binds {
                        table: last.table.clone(),
                        count: last.count,
                        problem: Some(problem),
                        path: Some(path.clone()),
                        exists: true,
                    }
                }
            },
        };
        let binds = Arc::new(binds);
        *cache = Cached {
            stamp: Some(stamp),
            binds: binds.clone(),
        };
        binds
    }
}

/// Read and parse the config into phrases; the error is `path:line:column: message`.
fn load(path: &Path) -> Result<(PhraseTable, usize), String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("{shown}: {e}"))?;
    if !meta.is_file() {
        // A directory, a FIFO or a device (/dev/zero would never end).
        return Err(format!("{shown}: not a regular file"));
    }
    if meta.len() > MAX_FILE {
        return Err(format!(
            "{shown}: {} bytes is more than a niri config can be",
            meta.len()
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{shown}: {e}"))?;
    parse(&text).map_err(|(offset, message)| {
        format!(
            "{shown}:{}:{}: {message}",
            line_of(&text, offset),
            column_of(&text, offset)
        )
    })
}

/// Parse config text; the error is a byte offset and a message.
pub fn parse(text: &str) -> Result<(PhraseTable, usize), (usize, String)> {
    let document = KdlDocument::parse(text).map_err(|e| {
        let first = e.diagnostics.first();
        let offset = first.map_or(0, |d| d.span.offset());
        let mut message = first
            .and_then(|d| d.message.clone())
            .unwrap_or_else(|| "not valid KDL".to_owned());
        if let Some(help) = first.and_then(|d| d.help.as_deref()) {
            message = format!("{message} ({help})");
        }
        (offset, format!("invalid KDL: {message}"))
    })?;
    let mut table = PhraseTable::new();
    let mut count = 0;
    let binds = document
        .nodes()
        .iter()
        .filter(|n| n.name().value() == "binds")
        .filter_map(KdlNode::children)
        .flat_map(|children| children.nodes());
    for bind in binds.take(MAX_BINDS) {
        let Some(action_node) = bind.children().and_then(|c| c.nodes().first()) else {
            continue;
        };
        let Some(action) = action_of(action_node) else {
            continue;
        };
        let action = Arc::new(action);
        let mut said = false;
        for phrase in spoken_forms(bind, action_node, &action) {
            if phrase.is_empty() || phrase.split(' ').count() > MAX_PHRASE_WORDS {
                continue;
            }
            // The first binding that claims a phrase keeps it.
            said |= table.insert(phrase, action.clone()).is_ok();
        }
        count += usize::from(said);
    }
    Ok((table, count))
}

/// A KDL value as JSON (a float that JSON cannot hold is null).
fn json_of(value: &KdlValue) -> Value {
    match value {
        KdlValue::String(s) => Value::String(s.clone()),
        KdlValue::Integer(i) => i64::try_from(*i)
            .map(|i| json!(i))
            .or_else(|_| u64::try_from(*i).map(|u| json!(u)))
            .unwrap_or_else(|_| Value::String(i.to_string())),
        KdlValue::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
        KdlValue::Bool(b) => Value::Bool(*b),
        KdlValue::Null => Value::Null,
    }
}

/// The action a binding's action node stands for, if its name is a niri action name.
fn action_of(node: &KdlNode) -> Option<NiriAction> {
    let command = node.name().value();
    if !is_action_name(command) {
        return None;
    }
    let mut args = Vec::new();
    let mut options = Map::new();
    for entry in node.entries() {
        match entry.name() {
            None => args.push(json_of(entry.value())),
            Some(name) => {
                options.insert(name.value().to_owned(), json_of(entry.value()));
            }
        }
    }
    Some(NiriAction {
        command: command.to_owned(),
        args,
        options,
        confirm: is_destructive(command),
    })
}

/// How an argument is said, when it can be said without losing what it is.
fn spoken_arg(value: &KdlValue) -> Option<String> {
    match value {
        KdlValue::Integer(i) if *i >= 0 => Some(i.to_string()),
        KdlValue::String(s) => {
            let words = normalize(s);
            let plain = s
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .to_lowercase();
            (!words.is_empty() && words == plain).then_some(words)
        }
        _ => None,
    }
}

/// The canonical phrases of one binding.
fn spoken_forms(bind: &KdlNode, action_node: &KdlNode, action: &NiriAction) -> Vec<String> {
    let mut forms = Vec::new();
    let positional: Vec<&KdlValue> = action_node
        .entries()
        .iter()
        .filter(|e| e.name().is_none())
        .map(|e| e.value())
        .collect();
    let args: Option<Vec<String>> = positional.iter().map(|v| spoken_arg(v)).collect();
    if let Some(args) = args {
        let mut said = action.command.replace('-', " ");
        for arg in args {
            said.push(' ');
            said.push_str(&arg);
        }
        forms.push(canonical(&said));
    }
    if let Some(KdlValue::String(title)) = bind.get("hotkey-overlay-title") {
        let title = canonical(title);
        if !forms.contains(&title) {
            forms.push(title);
        }
    }
    forms
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    const CONFIG: &str = r#"
input {
    keyboard {
        xkb {
            layout "us,de"
        }
    }
}
binds {
    Mod+1 { focus-workspace 1; }
    Mod+Shift+2 { move-column-to-workspace 2 focus=false; }
    Mod+Q repeat=false { close-window; }
    Mod+T hotkey-overlay-title="Open a Terminal" { spawn "foot"; }
    Mod+D { spawn "fuzzel" "--no-exit-on-keyboard-focus-loss"; }
    Mod+Minus { set-column-width "-10%"; }
    Print { screenshot show-pointer=false; }
    Mod+W { focus-workspace "browser"; }
    Mod+Alt+T hotkey-overlay-title="Open a Terminal" { spawn "alacritty"; }
    XF86AudioMute allow-when-locked=true { spawn "wpctl" "set-mute" "@DEFAULT_AUDIO_SINK@" "toggle"; }
    Mod+Empty { }
}
"#;

    fn args_of(table: &PhraseTable, phrase: &str) -> Option<Value> {
        table
            .lookup(&canonical(phrase))
            .map(|(a, n)| a.step_args(n))
    }

    #[test]
    fn bindings_become_phrases() {
        let (table, count) = parse(CONFIG).expect("parses (as KDL v1)");
        assert_eq!(count, 7, "{:?}", table.phrases().collect::<Vec<_>>());
        let cases = [
            (
                "focus workspace 1",
                json!({"command": "focus-workspace", "args": [1]}),
            ),
            (
                "Focus workspace one.",
                json!({"command": "focus-workspace", "args": [1]}),
            ),
            (
                "move column to workspace two",
                json!({"command": "move-column-to-workspace", "args": [2], "options": {"focus": false}}),
            ),
            ("close window", json!({"command": "close-window"})),
            (
                "open a terminal",
                json!({"command": "spawn", "args": ["foot"]}),
            ),
            ("spawn foot", json!({"command": "spawn", "args": ["foot"]})),
            (
                "spawn alacritty",
                json!({"command": "spawn", "args": ["alacritty"]}),
            ),
            (
                "screenshot",
                json!({"command": "screenshot", "options": {"show-pointer": false}}),
            ),
            (
                "focus workspace browser",
                json!({"command": "focus-workspace", "args": ["browser"]}),
            ),
            // Not speakable arguments: only a title could name these.
            ("set column width 10", Value::Null),
            ("set column width", Value::Null),
            ("spawn fuzzel", Value::Null),
        ];
        for (phrase, want) in cases {
            assert_eq!(
                args_of(&table, phrase).unwrap_or(Value::Null),
                want,
                "{phrase}"
            );
        }
    }

    #[test]
    fn destructive_bindings_are_marked_to_confirm() {
        let (table, _) = parse(CONFIG).expect("parses");
        let confirm_of = |phrase: &str| table.lookup(&canonical(phrase)).map(|(a, _)| a.confirm);
        assert_eq!(confirm_of("close window"), Some(true));
        assert_eq!(confirm_of("focus workspace 1"), Some(false));
        assert_eq!(confirm_of("open a terminal"), Some(false));
        let (table, _) = parse(
            "binds { Mod+E { quit skip-confirmation=true; }; Mod+P { power-off-monitors; }; }\n",
        )
        .expect("parses");
        for phrase in ["quit", "power off monitors"] {
            let (action, _) = table.lookup(phrase).expect(phrase);
            assert!(action.confirm, "{phrase}");
        }
    }

    #[test]
    fn kdl_v2_configs_parse_too() {
        let (table, count) =
            parse("binds {\n    Mod+Q repeat=#false { close-window }\n}\n").expect("v2");
        assert_eq!(count, 1);
        assert!(table.lookup("close window").is_some());
        let (table, count) = parse("// nothing bound\n").expect("empty");
        assert_eq!((table.len(), count), (0, 0));
    }

    #[test]
    fn broken_configs_say_where() {
        let text =
            "binds {\n    Mod+1 { focus-workspace 1; }\n    Mod+2 { focus-workspace \"2; }\n";
        let (offset, message) = parse(text).expect_err("broken");
        assert!(message.starts_with("invalid KDL"), "{message}");
        assert!(
            line_of(text, offset) >= 2,
            "line {} for {message}",
            line_of(text, offset)
        );
        let (offset, _) =
            parse("binds {\n  Mod+1 { focus-workspace 1; }\n}\n}\n").expect_err("extra brace");
        assert_eq!(
            line_of("binds {\n  Mod+1 { focus-workspace 1; }\n}\n}\n", offset),
            4
        );
    }

    #[test]
    fn the_path_comes_from_niri_config_then_the_config_home() {
        let env = |value: Option<&'static str>| move |_: &str| value.map(OsString::from);
        let home = Some(PathBuf::from("/cfg"));
        assert_eq!(
            config_path(env(Some("/n.kdl")), home.clone()),
            Some(PathBuf::from("/n.kdl"))
        );
        assert_eq!(
            config_path(env(Some("")), home.clone()),
            Some(PathBuf::from("/cfg/niri/config.kdl"))
        );
        assert_eq!(
            config_path(env(None), home),
            Some(PathBuf::from("/cfg/niri/config.kdl"))
        );
        assert_eq!(config_path(env(None), None), None);
    }

    #[test]
    fn the_file_is_read_again_when_it_changes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("config.kdl");
        let source = BindsSource::new(Some(path.clone()));
        let missing = source.current();
        assert!(!missing.exists && missing.problem.is_none() && missing.table.is_empty());

        std::fs::write(&path, "binds { Mod+Q { close-window; }; }\n").expect("write");
        let first = source.current();
        assert_eq!((first.count, first.problem.as_deref()), (1, None));
        assert!(
            Arc::ptr_eq(&first, &source.current()),
            "unchanged: not parsed again"
        );

        // Broken: a problem with file:line, and the last good phrases stay.
        std::fs::write(&path, "binds {\n  Mod+Q { close-window; }\n  Mod+W {\n").expect("write");
        let broken = source.current();
        let problem = broken.problem.clone().expect("a problem");
        assert!(
            problem.starts_with(&format!("{}:", path.display())),
            "{problem}"
        );
        assert!(
            problem.contains(":4:") || problem.contains(":3:"),
            "{problem}"
        );
        assert!(broken.table.lookup("close window").is_some());
        assert!(
            broken.summary().contains("unusable"),
            "{}",
            broken.summary()
        );

        std::fs::write(&path, "binds {\n  Mod+O { toggle-overview; }\n}\n").expect("write");
        let fixed = source.current();
        assert!(fixed.problem.is_none());
        assert!(fixed.table.lookup("toggle overview").is_some());
        assert!(fixed.table.lookup("close window").is_none());
        assert!(
            fixed.summary().contains("1 niri binding"),
            "{}",
            fixed.summary()
        );

        std::fs::remove_file(&path).expect("remove");
        let gone = source.current();
        assert!(!gone.exists && gone.table.is_empty() && gone.problem.is_none());
        assert!(BindsSource::new(None).current().table.is_empty());
    }
}
