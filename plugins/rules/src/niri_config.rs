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
//! (one `stat`) and parses it again only when one of them changed; the first read starts
//! when the plugin starts. Reading and parsing happen on a thread of their own, and a plan
//! or a health check waits for them only a moment: until they are done, the phrases of the
//! previous version (none at first) are used, so a slow parse never holds up the handshake.
//! A missing file means no phrases, silently. A file that cannot be read or parsed is logged
//! once per change, with `file:line:column`, and reported by [`Binds::problem`] (the
//! plugin's health turns `degraded`); meanwhile the phrases of the last good version stay in
//! use, as niri itself keeps running its last good config.
//!
//! Hostile files: a file larger than [`MAX_FILE`] is not read, and one nested deeper than
//! [`MAX_DEPTH`] is not parsed (the KDL parser recurses once per level, so a few thousand
//! levels would overflow its stack and abort the plugin); both are problems as above.

use crate::phrases::{NiriAction, PhraseTable, canonical, is_action_name, is_destructive};
use crate::text::{column_of, line_of, normalize};
use kdl::{KdlDocument, KdlNode, KdlValue};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};
use utter_protocol::serde_json::{Map, Number, Value, json};

/// The variable naming the niri config, as niri itself reads it.
pub const NIRI_CONFIG_ENV: &str = "NIRI_CONFIG";

/// The largest config read, in bytes. A niri config is usually under 50 KB (niri's own
/// default config is about 20 KB); this is ten times more than any real one, and small
/// enough that parsing it takes no longer than a moment.
pub const MAX_FILE: u64 = 512 * 1024;

/// The deepest nesting of `{ }` blocks (and `/* */` comments) parsed. The KDL parser
/// recurses once per level, so a file nested thousands of levels deep would overflow its
/// stack; a niri config nests four or five levels.
pub const MAX_DEPTH: usize = 32;

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
    /// True before the first read of the file is done: nothing is known about it yet.
    pub pending: bool,
}

impl Binds {
    /// One line for the plugin's health.
    pub fn summary(&self) -> String {
        match (&self.path, &self.problem, self.exists) {
            (None, _, _) => "no niri config path".to_owned(),
            (Some(path), _, _) if self.pending => {
                format!("niri config {} still being read", path.display())
            }
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

/// What one `stat` of the config path found.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    /// Nothing there (`ENOENT`, also a dangling symlink): no phrases, and no problem.
    Missing,
    /// The path cannot even be looked at (a symlink loop, a directory without permission on
    /// the way): the OS error, reported as a problem.
    Unreadable(String),
    /// Something is there; reading it tells whether it can be used.
    Found(Stamp),
}

impl Seen {
    fn of(path: &Path) -> Seen {
        match std::fs::metadata(path) {
            Ok(meta) => Seen::Found(Stamp {
                modified: meta.modified().ok(),
                len: meta.len(),
                inode: meta.ino(),
                device: meta.dev(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Seen::Missing,
            Err(e) => Seen::Unreadable(e.to_string()),
        }
    }
}

/// The cached state of one [`BindsSource`], behind its mutex.
struct Cached {
    /// What the bindings in `binds` were made from; `None` before the first look.
    seen: Option<Seen>,
    binds: Arc<Binds>,
    /// The version a loader thread is reading now, if one runs.
    loading: Option<Seen>,
}

/// The part of a [`BindsSource`] its loader threads share.
struct Shared {
    path: PathBuf,
    cache: Mutex<Cached>,
    /// Signalled whenever a loader thread stores its result.
    loaded: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Cached> {
        // The cache is replaced field by field under the lock and never left half-written
        // by a panic (nothing in between can panic), so a poisoned lock is still good.
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Store the outcome of reading version `seen`: the new phrases, or the problem with the
    /// last good phrases kept.
    fn store(&self, cache: &mut Cached, seen: Seen, outcome: Result<(PhraseTable, usize), String>) {
        let path = Some(self.path.clone());
        let binds = match outcome {
            Ok((table, count)) => Binds {
                table,
                count,
                problem: None,
                path,
                exists: true,
                pending: false,
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
                    path,
                    exists: !matches!(seen, Seen::Missing),
                    pending: false,
                }
            }
        };
        cache.seen = Some(seen);
        cache.binds = Arc::new(binds);
    }
}

/// The stack of a loader thread. The KDL parser (with its KDL v1 fallback) takes tens of
/// kilobytes of stack per level of nesting in a debug build: [`MAX_DEPTH`] levels fit in
/// the 2 MiB of an ordinary thread, twice as many do not. This is thirty times that, a
/// second line of defence should the nesting check ever miss a way to nest. It is address
/// space, not memory: only the pages the parser touches are ever allocated.
const LOADER_STACK: usize = 64 * 1024 * 1024;

/// The user's niri bindings, re-read when the file changes.
///
/// The file is read and parsed on a thread of its own (with a large stack, see
/// `LOADER_STACK`), never on the caller's: [`BindsSource::current`] waits for that thread
/// at most as long as it is told to, and otherwise answers with the phrases of the previous
/// version, so a slow parse never holds up the plugin's handshake or a plan.
pub struct BindsSource {
    shared: Option<Arc<Shared>>,
}

impl BindsSource {
    /// Bindings from `path` (see [`default_config_path`]); `None` gives none. Nothing is read
    /// until [`Self::current`].
    pub fn new(path: Option<PathBuf>) -> BindsSource {
        BindsSource {
            shared: path.map(|path| {
                Arc::new(Shared {
                    cache: Mutex::new(Cached {
                        seen: None,
                        binds: Arc::new(Binds {
                            path: Some(path.clone()),
                            pending: true,
                            ..Binds::default()
                        }),
                        loading: None,
                    }),
                    path,
                    loaded: Condvar::new(),
                })
            }),
        }
    }

    /// The bindings as of now: one `stat`, and when the file changed since the last look,
    /// a read and parse on a loader thread, waited for at most `wait`. When the wait is
    /// over first, the bindings of the previous version come back (none before the first
    /// load) and the loader goes on; a later call picks its result up. `Duration::ZERO`
    /// only starts the loader. Blocking (the `stat` and the wait).
    pub fn current(&self, wait: Duration) -> Arc<Binds> {
        let Some(shared) = &self.shared else {
            return Arc::new(Binds::default());
        };
        let seen = Seen::of(&shared.path);
        let deadline = Instant::now() + wait;
        let mut cache = shared.lock();
        loop {
            if cache.seen.as_ref() == Some(&seen) {
                return cache.binds.clone();
            }
            match &seen {
                Seen::Missing => {
                    cache.seen = Some(Seen::Missing);
                    cache.binds = Arc::new(Binds {
                        path: Some(shared.path.clone()),
                        ..Binds::default()
                    });
                    return cache.binds.clone();
                }
                Seen::Unreadable(error) => {
                    let problem = format!("{}: unreadable: {error}", shared.path.display());
                    shared.store(&mut cache, seen.clone(), Err(problem));
                    return cache.binds.clone();
                }
                Seen::Found(_) => {}
            }
            // One loader at a time, so that an older version never lands after a newer one;
            // when another version is being read, this one is read after it.
            if cache.loading.is_none() {
                cache.loading = Some(seen.clone());
                if let Err(e) = spawn_loader(shared.clone(), seen.clone()) {
                    cache.loading = None;
                    let problem = format!(
                        "{}: not read: no thread to read it on: {e}",
                        shared.path.display()
                    );
                    shared.store(&mut cache, seen.clone(), Err(problem));
                    return cache.binds.clone();
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return cache.binds.clone();
            }
            cache = shared
                .loaded
                .wait_timeout(cache, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// True while a loader thread is reading the file.
    pub fn loading(&self) -> bool {
        self.shared
            .as_ref()
            .is_some_and(|shared| shared.lock().loading.is_some())
    }
}

/// Start a thread that reads version `seen` of the file and stores the outcome.
fn spawn_loader(shared: Arc<Shared>, seen: Seen) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("niri-config".into())
        .stack_size(LOADER_STACK)
        .spawn(move || {
            let outcome = load(&shared.path);
            let mut cache = shared.lock();
            cache.loading = None;
            shared.store(&mut cache, seen, outcome);
            drop(cache);
            shared.loaded.notify_all();
        })
        .map(drop)
}

/// Read and parse the config into phrases; the error is `path:line:column: message`, or
/// `path: message` when the file could not be read at all.
fn load(path: &Path) -> Result<(PhraseTable, usize), String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("{shown}: unreadable: {e}"))?;
    if !meta.is_file() {
        // A directory, a FIFO or a device (/dev/zero would never end).
        return Err(format!("{shown}: not a regular file"));
    }
    let too_big = |len: u64| {
        format!(
            "{shown}: not read: {len} bytes is larger than {MAX_FILE} bytes ({} KiB); a niri \
             config is usually under 50 KB",
            MAX_FILE / 1024
        )
    };
    if meta.len() > MAX_FILE {
        return Err(too_big(meta.len()));
    }
    // Bounded again while reading: the file may grow after the stat.
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(MAX_FILE + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("{shown}: unreadable: {e}"))?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(too_big(bytes.len() as u64));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        format!(
            "{shown}: not UTF-8 text (at byte {})",
            e.utf8_error().valid_up_to()
        )
    })?;
    parse(&text).map_err(|(offset, message)| {
        format!(
            "{shown}:{}:{}: {message}",
            line_of(&text, offset),
            column_of(&text, offset)
        )
    })
}

/// Parse config text; the error is a byte offset and a message. Text nested deeper than
/// [`MAX_DEPTH`] is refused before the KDL parser sees it (see [`too_deep`]), so this is safe
/// to call on any text and any thread.
pub fn parse(text: &str) -> Result<(PhraseTable, usize), (usize, String)> {
    if let Some(offset) = too_deep(text, MAX_DEPTH) {
        return Err((
            offset,
            format!(
                "blocks nested more than {MAX_DEPTH} levels deep (a niri config nests a few); \
                 the file is not parsed"
            ),
        ));
    }
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

/// The byte offset of the first `{` (or `/*`) that opens level `limit + 1`, if `text` nests
/// that deep.
///
/// One pass over the bytes, with just enough KDL to not count braces that are not blocks:
/// quoted strings (`"..."`, with `\` escapes; a multi-line `"""` string reads as an empty
/// string and a quoted one, which skips the same text), raw strings (`r"..."`, `r#"..."#` of
/// KDL v1 and `#"..."#` of v2), `//` line comments and nested `/* */` block comments, whose
/// levels count on top of the blocks around them (the parser recurses into those too). An
/// unterminated string or comment runs to the end, as the parser would read it. It is not a
/// validator: text it lets through may still be invalid KDL, which the parser then reports.
pub fn too_deep(text: &str, limit: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let at = |i: usize| bytes.get(i).copied();
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(byte) = at(i) {
        match byte {
            b'"' => {
                i += 1;
                while let Some(b) = at(i) {
                    i += if b == b'\\' { 2 } else { 1 };
                    if b == b'"' {
                        break;
                    }
                }
                continue;
            }
            b'/' if at(i + 1) == Some(b'/') => {
                while at(i).is_some_and(|b| b != b'\n') {
                    i += 1;
                }
                continue;
            }
            b'/' if at(i + 1) == Some(b'*') => {
                let mut level = 0usize;
                while let Some(b) = at(i) {
                    if b == b'/' && at(i + 1) == Some(b'*') {
                        level += 1;
                        if depth + level > limit {
                            return Some(i);
                        }
                        i += 2;
                    } else if b == b'*' && at(i + 1) == Some(b'/') {
                        level -= 1;
                        i += 2;
                        if level == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
                continue;
            }
            b'r' | b'#' => {
                // `r` starts a raw string only where a value can start, not inside a name.
                let starts = byte == b'#'
                    || i == 0
                    || matches!(bytes[i - 1], b'{' | b';' | b'=' | b'(' | b')')
                    || bytes[i - 1].is_ascii_whitespace();
                let mut j = i + usize::from(byte == b'r');
                let hashes_from = j;
                while at(j) == Some(b'#') {
                    j += 1;
                }
                let hashes = j - hashes_from;
                if starts && at(j) == Some(b'"') && (byte == b'r' || hashes > 0) {
                    i = j + 1;
                    while let Some(b) = at(i) {
                        i += 1;
                        let closes = bytes
                            .get(i..i + hashes)
                            .is_some_and(|h| h.iter().all(|&c| c == b'#'));
                        if b == b'"' && closes {
                            i += hashes;
                            break;
                        }
                    }
                    continue;
                }
                i = j.max(i + 1);
                continue;
            }
            b'{' => {
                depth += 1;
                if depth > limit {
                    return Some(i);
                }
            }
            b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
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

    /// Long enough for any test file to be read: the tests are not about timing.
    const WAIT: Duration = Duration::from_secs(60);

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
        let missing = source.current(WAIT);
        assert!(!missing.exists && missing.problem.is_none() && missing.table.is_empty());

        std::fs::write(&path, "binds { Mod+Q { close-window; }; }\n").expect("write");
        let first = source.current(WAIT);
        assert_eq!((first.count, first.problem.as_deref()), (1, None));
        assert!(
            Arc::ptr_eq(&first, &source.current(WAIT)),
            "unchanged: not parsed again"
        );

        // Broken: a problem with file:line, and the last good phrases stay.
        std::fs::write(&path, "binds {\n  Mod+Q { close-window; }\n  Mod+W {\n").expect("write");
        let broken = source.current(WAIT);
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
        let fixed = source.current(WAIT);
        assert!(fixed.problem.is_none());
        assert!(fixed.table.lookup("toggle overview").is_some());
        assert!(fixed.table.lookup("close window").is_none());
        assert!(
            fixed.summary().contains("1 niri binding"),
            "{}",
            fixed.summary()
        );

        std::fs::remove_file(&path).expect("remove");
        let gone = source.current(WAIT);
        assert!(!gone.exists && gone.table.is_empty() && gone.problem.is_none());
        assert!(BindsSource::new(None).current(WAIT).table.is_empty());
    }

    #[test]
    fn deep_nesting_is_refused_before_parsing_with_the_line() {
        // One line, a thousand levels open: refused at the 33rd brace.
        let text = "a {".repeat(1000);
        let (offset, message) = parse(&text).expect_err("too deep");
        assert_eq!((line_of(&text, offset), offset), (1, 32 * 3 + 2));
        assert!(message.contains("more than 32 levels"), "{message}");
        // Balanced, one level a line: the line where level 33 opens.
        let mut text = String::new();
        for _ in 0..300 {
            text.push_str("a {\n");
        }
        for _ in 0..300 {
            text.push_str("}\n");
        }
        let (offset, _) = parse(&text).expect_err("too deep");
        assert_eq!(line_of(&text, offset), 33);
        // Nested block comments count too.
        let text = format!("binds {{\n{}\n", "/*".repeat(100));
        let (offset, _) = parse(&text).expect_err("too deep");
        assert_eq!(line_of(&text, offset), 2);
        // Exactly the limit parses, on an ordinary thread's stack.
        let text = format!("{}{}\n", "a {".repeat(MAX_DEPTH), "}".repeat(MAX_DEPTH));
        parse(&text).expect("32 levels are fine");
    }

    #[test]
    fn braces_in_strings_and_comments_are_not_blocks() {
        let deep = "{".repeat(100);
        for text in [
            format!("a \"{deep}\"\n"),
            format!("a \"\\\"{deep}\"\n"),
            format!("// {deep}\nb 1\n"),
            format!("/* {deep} */\nb 1\n"),
            format!("/* /* {deep} */ */\nb 1\n"),
            format!("a r\"{deep}\"\n"),
            format!("a r#\"\"{deep}\"#\n"),
            format!("a #\"\"{deep}\"#\n"),
            format!("a ##\"\"#{deep}\"##\n"),
            format!("a \"\"\"\n{deep}\n\"\"\"\n"),
        ] {
            assert_eq!(too_deep(&text, MAX_DEPTH), None, "{text}");
        }
        // Not raw strings: an `r` inside a name, `#true`.
        assert_eq!(too_deep("Mod+r { a #true { b { }; }; }", 2), Some(20));
        // After a string or comment closes, braces count again.
        let text = format!("a \"x\" /* y */ {}", "{".repeat(40));
        assert!(too_deep(&text, MAX_DEPTH).is_some());
    }

    #[test]
    fn oversized_configs_are_not_read() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("config.kdl");
        let line = "    Mod+1 { focus-workspace 1; }\n";
        let text = format!("binds {{\n{}}}\n", line.repeat(1024 * 1024 / line.len()));
        std::fs::write(&path, text).expect("write");
        let binds = BindsSource::new(Some(path.clone())).current(WAIT);
        let problem = binds.problem.clone().expect("refused");
        assert!(
            problem.starts_with(&format!("{}: ", path.display()))
                && problem.contains("larger than 524288 bytes (512 KiB)")
                && problem.contains("a niri config is usually under 50 KB"),
            "{problem}"
        );
        assert!(binds.table.is_empty());
    }

    #[test]
    fn a_symlink_loop_is_unreadable_not_missing() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("config.kdl");
        std::os::unix::fs::symlink(&path, &path).expect("symlink to itself");
        let binds = BindsSource::new(Some(path.clone())).current(WAIT);
        let problem = binds.problem.clone().expect("a problem");
        assert!(
            problem.starts_with(&format!("{}: unreadable: ", path.display()))
                && problem.contains("os error"),
            "{problem}"
        );
        assert!(binds.summary().contains("unusable"), "{}", binds.summary());
        // A dangling symlink is just no config.
        let dangling = dir.path().join("dangling.kdl");
        std::os::unix::fs::symlink(dir.path().join("nothing"), &dangling).expect("symlink");
        let binds = BindsSource::new(Some(dangling)).current(WAIT);
        assert!(binds.problem.is_none() && !binds.exists);
    }

    #[test]
    fn reading_happens_in_the_background() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("config.kdl");
        std::fs::write(&path, "binds { Mod+Q { close-window; }; }\n").expect("write");
        let source = BindsSource::new(Some(path));
        // No wait: the read is started and the placeholder comes back (unless the loader
        // was quick enough to be done already).
        let first = source.current(Duration::ZERO);
        assert!(first.pending || first.count == 1);
        if first.pending {
            assert!(
                first.summary().contains("still being read"),
                "{}",
                first.summary()
            );
        }
        let done = source.current(WAIT);
        assert_eq!((done.count, done.pending), (1, false));
        assert!(!source.loading());
    }
}
