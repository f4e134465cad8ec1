//! Application profiles: what a phrase means in one application (Talon's lesson: the focused
//! application decides what "new tab" or "copy" presses).
//!
//! A profile is one TOML file (`data/profiles/*.toml` built in; the user's in
//! `$XDG_CONFIG_HOME/utter/profiles/*.toml`, replacing a built-in one of the same `id`):
//!
//! | field | meaning |
//! |---|---|
//! | `id` | `[a-z0-9_-]`, unique; a user file with a built-in id replaces that profile |
//! | `name` | what people call it, shown in messages |
//! | `kind` | `browser`, `terminal`, `editor` or `app` |
//! | `aliases` | more spoken names ("vs code") |
//! | `app_ids` | the Wayland `app_id`s of its windows; the focused window's picks the profile |
//! | `launch` | argv that starts it |
//! | `run` | terminals: the argv prefix that runs a program in a new window (`foot -e`) |
//! | `search_url` | browsers: the search template, `{q}` the form-encoded query |
//! | `[shortcuts]` | name → chord (X keysym names, `ctrl+shift+t`); said by name or a synonym of `data/commands.toml` |
//! | `[commands]` | spoken phrase → chord, or `{op, args}` for any other step |
//! | `base` | the id of a profile whose shortcuts and commands this one has too, its own winning (a fork of an application: Cursor is VS Code's) |
//!
//! The person's own phrases for any application live in `commands.toml` beside the
//! directory (`$XDG_CONFIG_HOME/utter/commands.toml`): a `[commands]` table of the same form
//! ("run tests" = `{ op = "terminal", args = { command = "cargo test" } }`), checked the
//! same way ([`parse_commands`]) and planned whatever is focused, before the built-in rules.
//!
//! Every chord is checked with the input plugin's own parser (`utter-keys`), every template
//! and argv when the file is read; a bad file is skipped with `file:line:column: problem`
//! (the plugin's health says so) and the others still load. [`ProfilesSource`] reads the
//! user's directory again when a file in it changed (one `read_dir` and a `stat` per file,
//! at most once per plan).

use crate::sites::check_search_template;
use crate::text::{column_of, compact, line_of, normalize};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use toml::Spanned;
use utter_protocol::serde_json::{self, Value};

/// The built-in profiles, embedded at build time: (file name, text).
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "firefox.toml",
        include_str!("../../../data/profiles/firefox.toml"),
    ),
    ("zen.toml", include_str!("../../../data/profiles/zen.toml")),
    (
        "chromium.toml",
        include_str!("../../../data/profiles/chromium.toml"),
    ),
    (
        "chrome.toml",
        include_str!("../../../data/profiles/chrome.toml"),
    ),
    (
        "brave.toml",
        include_str!("../../../data/profiles/brave.toml"),
    ),
    (
        "foot.toml",
        include_str!("../../../data/profiles/foot.toml"),
    ),
    (
        "kitty.toml",
        include_str!("../../../data/profiles/kitty.toml"),
    ),
    (
        "alacritty.toml",
        include_str!("../../../data/profiles/alacritty.toml"),
    ),
    (
        "ghostty.toml",
        include_str!("../../../data/profiles/ghostty.toml"),
    ),
    (
        "vscode.toml",
        include_str!("../../../data/profiles/vscode.toml"),
    ),
    (
        "cursor.toml",
        include_str!("../../../data/profiles/cursor.toml"),
    ),
    (
        "windsurf.toml",
        include_str!("../../../data/profiles/windsurf.toml"),
    ),
    (
        "jetbrains.toml",
        include_str!("../../../data/profiles/jetbrains.toml"),
    ),
    (
        "sublime-text.toml",
        include_str!("../../../data/profiles/sublime-text.toml"),
    ),
    (
        "edge.toml",
        include_str!("../../../data/profiles/edge.toml"),
    ),
    (
        "ptyxis.toml",
        include_str!("../../../data/profiles/ptyxis.toml"),
    ),
    (
        "gnome-console.toml",
        include_str!("../../../data/profiles/gnome-console.toml"),
    ),
    (
        "tilix.toml",
        include_str!("../../../data/profiles/tilix.toml"),
    ),
    (
        "opera.toml",
        include_str!("../../../data/profiles/opera.toml"),
    ),
    (
        "floorp.toml",
        include_str!("../../../data/profiles/floorp.toml"),
    ),
    (
        "waterfox.toml",
        include_str!("../../../data/profiles/waterfox.toml"),
    ),
    (
        "mullvad-browser.toml",
        include_str!("../../../data/profiles/mullvad-browser.toml"),
    ),
    (
        "tor-browser.toml",
        include_str!("../../../data/profiles/tor-browser.toml"),
    ),
    (
        "lapce.toml",
        include_str!("../../../data/profiles/lapce.toml"),
    ),
    (
        "spotify.toml",
        include_str!("../../../data/profiles/spotify.toml"),
    ),
    (
        "librewolf.toml",
        include_str!("../../../data/profiles/librewolf.toml"),
    ),
    (
        "vivaldi.toml",
        include_str!("../../../data/profiles/vivaldi.toml"),
    ),
    (
        "any-terminal.toml",
        include_str!("../../../data/profiles/any-terminal.toml"),
    ),
    (
        "any-browser.toml",
        include_str!("../../../data/profiles/any-browser.toml"),
    ),
    (
        "any-editor.toml",
        include_str!("../../../data/profiles/any-editor.toml"),
    ),
    (
        "discord.toml",
        include_str!("../../../data/profiles/discord.toml"),
    ),
    (
        "dolphin.toml",
        include_str!("../../../data/profiles/dolphin.toml"),
    ),
    (
        "element.toml",
        include_str!("../../../data/profiles/element.toml"),
    ),
    (
        "gedit.toml",
        include_str!("../../../data/profiles/gedit.toml"),
    ),
    (
        "gimp.toml",
        include_str!("../../../data/profiles/gimp.toml"),
    ),
    (
        "gnome-terminal.toml",
        include_str!("../../../data/profiles/gnome-terminal.toml"),
    ),
    (
        "gnome-text-editor.toml",
        include_str!("../../../data/profiles/gnome-text-editor.toml"),
    ),
    (
        "inkscape.toml",
        include_str!("../../../data/profiles/inkscape.toml"),
    ),
    (
        "kate.toml",
        include_str!("../../../data/profiles/kate.toml"),
    ),
    (
        "keepassxc.toml",
        include_str!("../../../data/profiles/keepassxc.toml"),
    ),
    (
        "konsole.toml",
        include_str!("../../../data/profiles/konsole.toml"),
    ),
    (
        "krita.toml",
        include_str!("../../../data/profiles/krita.toml"),
    ),
    (
        "libreoffice-calc.toml",
        include_str!("../../../data/profiles/libreoffice-calc.toml"),
    ),
    (
        "libreoffice-impress.toml",
        include_str!("../../../data/profiles/libreoffice-impress.toml"),
    ),
    (
        "libreoffice-writer.toml",
        include_str!("../../../data/profiles/libreoffice-writer.toml"),
    ),
    (
        "libreoffice.toml",
        include_str!("../../../data/profiles/libreoffice.toml"),
    ),
    ("mpv.toml", include_str!("../../../data/profiles/mpv.toml")),
    (
        "nautilus.toml",
        include_str!("../../../data/profiles/nautilus.toml"),
    ),
    (
        "obsidian.toml",
        include_str!("../../../data/profiles/obsidian.toml"),
    ),
    (
        "anki.toml",
        include_str!("../../../data/profiles/anki.toml"),
    ),
    (
        "reaper.toml",
        include_str!("../../../data/profiles/reaper.toml"),
    ),
    (
        "audacity.toml",
        include_str!("../../../data/profiles/audacity.toml"),
    ),
    (
        "kdenlive.toml",
        include_str!("../../../data/profiles/kdenlive.toml"),
    ),
    (
        "musescore.toml",
        include_str!("../../../data/profiles/musescore.toml"),
    ),
    (
        "shotcut.toml",
        include_str!("../../../data/profiles/shotcut.toml"),
    ),
    (
        "okular.toml",
        include_str!("../../../data/profiles/okular.toml"),
    ),
    (
        "zotero.toml",
        include_str!("../../../data/profiles/zotero.toml"),
    ),
    (
        "papers.toml",
        include_str!("../../../data/profiles/papers.toml"),
    ),
    (
        "signal.toml",
        include_str!("../../../data/profiles/signal.toml"),
    ),
    (
        "slack.toml",
        include_str!("../../../data/profiles/slack.toml"),
    ),
    (
        "telegram.toml",
        include_str!("../../../data/profiles/telegram.toml"),
    ),
    (
        "thunar.toml",
        include_str!("../../../data/profiles/thunar.toml"),
    ),
    (
        "thunderbird.toml",
        include_str!("../../../data/profiles/thunderbird.toml"),
    ),
    (
        "evolution.toml",
        include_str!("../../../data/profiles/evolution.toml"),
    ),
    ("vlc.toml", include_str!("../../../data/profiles/vlc.toml")),
    (
        "wezterm.toml",
        include_str!("../../../data/profiles/wezterm.toml"),
    ),
    ("zed.toml", include_str!("../../../data/profiles/zed.toml")),
    (
        "zoom.toml",
        include_str!("../../../data/profiles/zoom.toml"),
    ),
    (
        "rstudio.toml",
        include_str!("../../../data/profiles/rstudio.toml"),
    ),
    (
        "jupyterlab.toml",
        include_str!("../../../data/profiles/jupyterlab.toml"),
    ),
];

/// The largest profile file read, in bytes.
pub const MAX_FILE: u64 = 256 * 1024;
/// The most profile files read from the user's directory.
pub const MAX_FILES: usize = 256;

/// What an application is, for the rules that need one kind ("new tab" needs a browser,
/// "run ls" a terminal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A web browser: tabs, search.
    Browser,
    /// A terminal emulator: commands, agents.
    Terminal,
    /// A code editor.
    Editor,
    /// Anything else.
    App,
}

impl Kind {
    /// `browser`, `terminal`, `editor`, `app`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Browser => "browser",
            Kind::Terminal => "terminal",
            Kind::Editor => "editor",
            Kind::App => "app",
        }
    }
}

/// What a profile command does.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Press a chord (op `key`).
    Chord(String),
    /// Any other step.
    Step {
        /// The op.
        op: String,
        /// Its args (an object).
        args: Value,
    },
}

/// One application's profile, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// The unique id.
    pub id: String,
    /// The display name.
    pub name: String,
    /// The kind.
    pub kind: Kind,
    /// Spoken names, compacted ([`compact`] of [`normalize`]): the name, the id, the aliases.
    pub spoken: Vec<String>,
    /// The windows' `app_id`s.
    pub app_ids: Vec<String>,
    /// The argv that starts it (may be empty).
    pub launch: Vec<String>,
    /// The argv prefix that runs a program in a new window (terminals).
    pub run: Vec<String>,
    /// The search template (`{q}`).
    pub search_url: Option<String>,
    /// Normalised shortcut name → chord.
    pub shortcuts: BTreeMap<String, String>,
    /// Normalised phrase → command.
    pub commands: BTreeMap<String, Command>,
    /// Desktop entry `Categories` (`TerminalEmulator`) whose applications this profile
    /// stands for when they have no profile of their own: a kind's shared keys. Such a
    /// profile has no spoken names and no `app_ids`.
    pub categories: Vec<String>,
    /// Where it came from: `data/profiles/firefox.toml (built in)` or the user's path.
    pub source: String,
    /// The id of the profile whose shortcuts and commands it has too (its own win), merged
    /// in by [`Profiles::load`].
    pub base: Option<String>,
}

impl Profile {
    /// Whether a window's `app_id` is one of this profile's (case-insensitive).
    pub fn has_app_id(&self, app_id: &str) -> bool {
        self.app_ids.iter().any(|a| a.eq_ignore_ascii_case(app_id))
    }

    /// Whether the program of its `launch` argv is on `PATH` (looked up on each call).
    pub fn launch_installed(&self) -> bool {
        self.launch
            .first()
            .is_some_and(|program| utter_protocol::files::find_on_path(program).is_some())
    }

    /// Whether `spoken` (normalised words) names this profile.
    pub fn is_named(&self, spoken: &str) -> bool {
        let key = compact(spoken);
        !key.is_empty() && self.spoken.contains(&key)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    id: Spanned<String>,
    name: Spanned<String>,
    kind: Kind,
    #[serde(default)]
    aliases: Vec<Spanned<String>>,
    #[serde(default)]
    app_ids: Vec<Spanned<String>>,
    #[serde(default)]
    categories: Vec<Spanned<String>>,
    launch: Option<Spanned<Vec<String>>>,
    run: Option<Spanned<Vec<String>>>,
    search_url: Option<Spanned<String>>,
    #[serde(default)]
    shortcuts: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    commands: BTreeMap<String, Spanned<CommandFile>>,
    base: Option<Spanned<String>>,
}

/// `~/.config/utter/commands.toml`: the person's own phrases, meant in any application.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CommandsFile {
    #[serde(default)]
    commands: BTreeMap<String, Spanned<CommandFile>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum CommandFile {
    Chord(String),
    Step {
        op: String,
        #[serde(default)]
        args: Option<toml::Table>,
    },
}

/// A profile file that did not load: `path:line:column: problem`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}:{line}:{column}: {message}")]
pub struct ProfileError {
    /// The file.
    pub path: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

/// Parse and check one profile's text; `source` names it in errors.
///
/// # Errors
/// The first problem, with its line and column.
pub fn parse(text: &str, source: &str) -> Result<Profile, ProfileError> {
    let at = |offset: usize, message: String| ProfileError {
        path: source.to_owned(),
        line: line_of(text, offset),
        column: column_of(text, offset),
        message,
    };
    let file: ProfileFile = toml::from_str(text).map_err(|e| {
        let offset = e.span().map_or(0, |s| s.start);
        at(offset, e.message().trim().to_owned())
    })?;
    let id = file.id.get_ref().trim().to_owned();
    if id.is_empty()
        || id.len() > 64
        || !id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
    {
        return Err(at(
            file.id.span().start,
            format!("id {id:?} must be 1 to 64 of a-z, 0-9, - and _"),
        ));
    }
    let name = file.name.get_ref().trim().to_owned();
    if normalize(&name).is_empty() {
        return Err(at(
            file.name.span().start,
            "name must contain a letter or digit".into(),
        ));
    }
    let mut spoken = vec![compact(&normalize(&name)), compact(&normalize(&id))];
    for alias in &file.aliases {
        let key = compact(&normalize(alias.get_ref()));
        if key.is_empty() {
            return Err(at(
                alias.span().start,
                "an alias must contain a letter or digit".into(),
            ));
        }
        if !spoken.contains(&key) {
            spoken.push(key);
        }
    }
    let mut app_ids = Vec::new();
    for app_id in &file.app_ids {
        let value = app_id.get_ref().trim();
        if value.is_empty()
            || value.len() > 255
            || value.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(at(
                app_id.span().start,
                format!("app_id {value:?} must be one word of at most 255 bytes"),
            ));
        }
        app_ids.push(value.to_owned());
    }
    let argv =
        |field: &Option<Spanned<Vec<String>>>, what: &str| -> Result<Vec<String>, ProfileError> {
            let Some(field) = field else {
                return Ok(Vec::new());
            };
            let list = field.get_ref();
            if list
                .iter()
                .any(|a| a.is_empty() || a.chars().any(char::is_control))
                || list.first().is_some_and(|p| p.starts_with('-'))
            {
                return Err(at(
                    field.span().start,
                    format!("{what} must list a program and its arguments, none empty"),
                ));
            }
            Ok(list.clone())
        };
    let launch = argv(&file.launch, "launch")?;
    let run = argv(&file.run, "run")?;
    let search_url = match &file.search_url {
        None => None,
        Some(template) => {
            let value = template.get_ref().trim();
            if let Some(problem) = check_search_template(value) {
                return Err(at(template.span().start, format!("search_url: {problem}")));
            }
            Some(value.to_owned())
        }
    };
    let chord = |value: &Spanned<String>, what: &str| -> Result<String, ProfileError> {
        let text = value.get_ref().trim();
        utter_keys::parse_chord(text)
            .map(|_| text.to_owned())
            .map_err(|e| at(value.span().start, format!("{what}: {e}")))
    };
    let mut shortcuts = BTreeMap::new();
    for (key, value) in &file.shortcuts {
        let name = normalize(key);
        if name.is_empty() {
            return Err(at(
                value.span().start,
                format!("shortcut name {key:?} has no words"),
            ));
        }
        shortcuts.insert(name, chord(value, &format!("shortcut {key:?}"))?);
    }
    let commands = read_commands(&file.commands, file.kind, &at)?;
    let mut categories = Vec::new();
    for category in &file.categories {
        let value = category.get_ref().trim();
        if value.is_empty() || !value.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(at(
                category.span().start,
                format!("category {value:?} must be a desktop entry category (letters, digits, -)"),
            ));
        }
        categories.push(value.to_owned());
    }
    if !categories.is_empty() {
        if let Some(first) = file.app_ids.first().or(file.aliases.first()) {
            return Err(at(
                first.span().start,
                "a profile for categories names no app_ids or aliases: it stands for applications without a profile".into(),
            ));
        }
        // Not said by name: "the terminal" names the open terminal, not this profile.
        spoken.clear();
    }
    let base = match &file.base {
        Some(base) if base.get_ref().trim() == id => {
            return Err(at(
                base.span().start,
                "a profile cannot be its own base".into(),
            ));
        }
        Some(base) => Some(base.get_ref().trim().to_owned()),
        None => None,
    };
    Ok(Profile {
        id,
        name,
        kind: file.kind,
        spoken,
        app_ids,
        launch,
        run,
        search_url,
        shortcuts,
        commands,
        categories,
        source: source.to_owned(),
        base,
    })
}

/// Parse the person's own commands (`~/.config/utter/commands.toml`: a `[commands]` table
/// of phrase → chord or `{op, args}`, checked as a profile's are, `terminal` steps allowed)
/// into a profile of no application, which the router plans in any application.
///
/// # Errors
/// The first problem, with its line and column.
pub fn parse_commands(text: &str, source: &str) -> Result<Profile, ProfileError> {
    let at = |offset: usize, message: String| ProfileError {
        path: source.to_owned(),
        line: line_of(text, offset),
        column: column_of(text, offset),
        message,
    };
    let file: CommandsFile = toml::from_str(text).map_err(|e| {
        let offset = e.span().map_or(0, |s| s.start);
        at(offset, e.message().trim().to_owned())
    })?;
    // Checked as a terminal's commands are: a "run tests" that types into the focused
    // terminal is what people write here most.
    let commands = read_commands(&file.commands, Kind::Terminal, &at)?;
    Ok(Profile {
        id: GLOBAL_ID.to_owned(),
        name: "your commands".to_owned(),
        kind: Kind::App,
        spoken: Vec::new(),
        app_ids: Vec::new(),
        launch: Vec::new(),
        run: Vec::new(),
        search_url: None,
        shortcuts: BTreeMap::new(),
        commands,
        categories: Vec::new(),
        source: source.to_owned(),
        base: None,
    })
}

/// The id of the person's own commands ([`parse_commands`]).
pub const GLOBAL_ID: &str = "your-commands";

/// The `[commands]` of a file, checked: phrase (normalised) → command.
fn read_commands(
    table: &BTreeMap<String, Spanned<CommandFile>>,
    kind: Kind,
    at: &dyn Fn(usize, String) -> ProfileError,
) -> Result<BTreeMap<String, Command>, ProfileError> {
    let chord = |value: &Spanned<String>, what: &str| -> Result<String, ProfileError> {
        let text = value.get_ref().trim();
        utter_keys::parse_chord(text)
            .map(|_| text.to_owned())
            .map_err(|e| at(value.span().start, format!("{what}: {e}")))
    };
    let mut commands = BTreeMap::new();
    for (key, value) in table {
        // A phrase with a control or format character would silently become other words
        // (normalising turns it into a space); it is a mistake or a trick either way.
        if let Some(c) = utter_protocol::text::first_unprintable(key) {
            return Err(at(
                value.span().start,
                format!(
                    "command phrase {} holds the character U+{:04X}, which cannot be spoken; write the phrase in words",
                    utter_protocol::text::escape_unprintable(key, 80).0,
                    u32::from(c)
                ),
            ));
        }
        let phrase = normalize(key);
        if phrase.is_empty() {
            return Err(at(
                value.span().start,
                format!("command phrase {key:?} has no words"),
            ));
        }
        let command = match value.get_ref() {
            CommandFile::Chord(text) => {
                let spanned = Spanned::new(value.span(), text.clone());
                Command::Chord(chord(&spanned, &format!("command {key:?}"))?)
            }
            CommandFile::Step { op, args } => {
                let Some(known) = known_op(op) else {
                    return Err(at(
                        value.span().start,
                        format!(
                            "command {key:?}: op {op:?} is not one of {}",
                            KNOWN_OPS.join(", ")
                        ),
                    ));
                };
                let args = match args {
                    None => Value::Object(Default::default()),
                    Some(table) => serde_json::to_value(table).map_err(|e| {
                        at(value.span().start, format!("command {key:?}: args: {e}"))
                    })?,
                };
                if let Err(problem) = check_step(known, &args, kind) {
                    return Err(at(
                        value.span().start,
                        format!("command {key:?}: {problem}"),
                    ));
                }
                Command::Step {
                    op: op.clone(),
                    args,
                }
            }
        };
        commands.insert(phrase, command);
    }
    Ok(commands)
}

/// What is wrong with a profile command's step, if anything: the same rules as the router's
/// own steps (addresses `http`/`https` only, a `terminal` step only in a terminal's profile,
/// a chord that parses, a text for typing).
fn check_step(op: &str, args: &Value, kind: Kind) -> Result<(), String> {
    let text = |key: &str| args.get(key).and_then(Value::as_str);
    match op {
        "open_url" | "ensure_url" => {
            let url = text("url").ok_or("needs args.url, a string")?;
            let lower = url.trim_start().to_ascii_lowercase();
            if !(lower.starts_with("https://") || lower.starts_with("http://"))
                || url.chars().any(|c| c.is_control() || c.is_whitespace())
            {
                return Err(format!(
                    "url {url:?} must be an http:// or https:// address"
                ));
            }
        }
        "terminal" if kind != Kind::Terminal => {
            return Err(
                "a terminal step belongs in a terminal's profile (kind = \"terminal\")".into(),
            );
        }
        "terminal" => {
            let command = text("command").ok_or("needs args.command, a string")?;
            if command.chars().any(char::is_control) {
                return Err("args.command must be one line".into());
            }
        }
        "key" => {
            let chord = text("chord").ok_or("needs args.chord, a string")?;
            utter_keys::parse_chord(chord).map_err(|e| format!("args.chord: {e}"))?;
        }
        "type_text" | "type_keys" => {
            let typed = text("text").ok_or("needs args.text, a string")?;
            utter_keys::text_keysyms(typed).map_err(|e| format!("args.text: {e}"))?;
        }
        _ => {}
    }
    Ok(())
}

/// The profiles in force: the built-in ones with the user's replacing or adding by id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Profiles {
    list: Vec<Profile>,
    /// The person's own commands, meant in any application (`commands.toml` beside the
    /// profile directory), when the file is there and loads.
    global: Option<Profile>,
    /// Files that did not load (`path:line:column: problem`), and an unreadable directory.
    pub problems: Vec<String>,
}

impl Profiles {
    /// The built-in profiles alone.
    ///
    /// # Panics
    /// Never for the shipped files (a test parses each).
    pub fn builtin() -> Profiles {
        Profiles::load(None)
    }

    /// The built-in profiles, then every `*.toml` of `user_dir` (in name order) replacing
    /// one of the same id or adding one. Files that do not load are listed in
    /// [`Profiles::problems`] and skipped.
    pub fn load(user_dir: Option<&Path>) -> Profiles {
        let mut profiles = Profiles::default();
        for (name, text) in BUILTIN {
            match parse(text, &format!("data/profiles/{name} (built in)")) {
                Ok(p) => profiles.add(p),
                Err(e) => profiles.problems.push(e.to_string()),
            }
        }
        let Some(dir) = user_dir else {
            profiles.merge_bases();
            return profiles;
        };
        if let Some(path) = commands_file(dir).filter(|p| p.exists()) {
            let shown = path.display().to_string();
            match read_limited(&path) {
                Ok(text) => match parse_commands(&text, &shown) {
                    Ok(global) => profiles.global = Some(global),
                    Err(e) => profiles.problems.push(format!("{e} (file skipped)")),
                },
                Err(e) => profiles.problems.push(format!("{shown}: {e}; skipped")),
            }
        }
        let files = match user_files(dir) {
            Ok((files, skipped)) => {
                profiles.problems.extend(skipped);
                files
            }
            Err(problem) => {
                profiles.problems.push(problem);
                profiles.merge_bases();
                return profiles;
            }
        };
        let mut seen: Vec<(String, String)> = Vec::new();
        for (path, _) in files {
            let shown = path.display().to_string();
            let text = match read_limited(&path) {
                Ok(text) => text,
                Err(e) => {
                    profiles.problems.push(format!("{shown}: {e}; skipped"));
                    continue;
                }
            };
            match parse(&text, &shown) {
                Ok(p) => {
                    if let Some((_, other)) = seen.iter().find(|(id, _)| *id == p.id) {
                        profiles.problems.push(format!(
                            "{shown}: id {:?} is also {other}'s; this file, later in name order, wins",
                            p.id
                        ));
                    }
                    seen.push((p.id.clone(), shown.clone()));
                    profiles.add(p);
                }
                Err(e) => profiles.problems.push(format!("{e} (file skipped)")),
            }
        }
        profiles.merge_bases();
        profiles
    }

    /// Give each profile with a `base` the base's shortcuts and commands it does not have
    /// itself, following a chain of bases (a terminal's base is `any-terminal` unless it
    /// names another). A base that is not there is a problem, and the
    /// chain stops there; so does a chain that comes back to a profile already in it (each
    /// profile of the loop keeps what it took from the others before the loop closed, and
    /// reports it).
    fn merge_bases(&mut self) {
        let original = self.list.clone();
        for profile in &mut self.list {
            let mut seen = vec![profile.id.clone()];
            // A terminal without a base of its own takes the shared terminal profile's
            // phrases it lacks ("clear the screen" in GNOME Console as in foot).
            let shared = (profile.kind == Kind::Terminal && profile.id != "any-terminal")
                .then(|| "any-terminal".to_owned())
                .filter(|id| original.iter().any(|p| p.id == *id));
            let mut next = profile.base.clone().or(shared);
            while let Some(id) = next {
                if seen.contains(&id) {
                    self.problems.push(format!(
                        "{}: base {id:?} leads back to {:?}; its chain stops there",
                        profile.source, profile.id
                    ));
                    break;
                }
                let Some(base) = original.iter().find(|p| p.id == id) else {
                    self.problems.push(format!(
                        "{}: base {id:?} is no profile; only its own shortcuts are used",
                        profile.source
                    ));
                    break;
                };
                // The shared terminal lends its phrases only: its shortcuts (tabs) are not
                // every terminal's ("new tab" in foot, which has none).
                let lends_shortcuts = profile.base.is_some() || seen.len() > 1;
                if lends_shortcuts {
                    for (name, chord) in &base.shortcuts {
                        profile
                            .shortcuts
                            .entry(name.clone())
                            .or_insert_with(|| chord.clone());
                    }
                }
                for (phrase, command) in &base.commands {
                    profile
                        .commands
                        .entry(phrase.clone())
                        .or_insert_with(|| command.clone());
                }
                seen.push(id);
                next = base.base.clone();
            }
        }
    }

    fn add(&mut self, profile: Profile) {
        match self.list.iter_mut().find(|p| p.id == profile.id) {
            Some(slot) => *slot = profile,
            None => self.list.push(profile),
        }
    }

    /// Every profile, built-in order first.
    pub fn iter(&self) -> impl Iterator<Item = &Profile> {
        self.list.iter()
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The profile of a window's `app_id`.
    pub fn for_app_id(&self, app_id: &str) -> Option<&Profile> {
        self.list.iter().find(|p| p.has_app_id(app_id))
    }

    /// The profile that stands for an application of these desktop entry `categories`
    /// without a profile of its own (a terminal's, a browser's shared keys).
    pub fn for_categories(&self, categories: &[String]) -> Option<&Profile> {
        self.list.iter().find(|p| {
            !p.categories.is_empty() && p.categories.iter().any(|c| categories.contains(c))
        })
    }

    /// The profile a spoken name (normalised words) names.
    pub fn named(&self, spoken: &str) -> Option<&Profile> {
        self.list.iter().find(|p| p.is_named(spoken))
    }

    /// The profile with this id.
    pub fn by_id(&self, id: &str) -> Option<&Profile> {
        self.list.iter().find(|p| p.id == id)
    }

    /// The person's own commands, meant in any application ([`parse_commands`]).
    pub fn global(&self) -> Option<&Profile> {
        self.global.as_ref()
    }
}

/// The person's own commands file for the profile directory `dir`: `commands.toml` in the
/// directory above it (`~/.config/utter/commands.toml`).
pub fn commands_file(dir: &Path) -> Option<PathBuf> {
    Some(dir.parent()?.join("commands.toml"))
}

/// The profile files of a directory with their modification time and size.
/// An error (the directory cannot be read) is a stamp too, so that its coming and going is
/// noticed.
type Stamp = Result<(Vec<(PathBuf, (SystemTime, u64))>, Vec<String>), String>;

/// The `*.toml` files of `dir` with their modification stamp, in name order, and the
/// `*.toml` entries that are no readable regular file (a dangling link, a directory, a
/// FIFO); a missing directory has none.
fn user_files(dir: &Path) -> Stamp {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(e) => return Err(format!("{}: cannot read the directory: {e}", dir.display())),
    };
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let meta = match std::fs::metadata(&path) {
            Ok(meta) if meta.is_file() => meta,
            Ok(_) => {
                skipped.push(format!("{}: not a regular file; skipped", path.display()));
                continue;
            }
            Err(e) => {
                skipped.push(format!("{}: {e}; skipped", path.display()));
                continue;
            }
        };
        let stamp = (
            meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            meta.len(),
        );
        files.push((path, stamp));
        if files.len() > MAX_FILES {
            return Err(format!(
                "{}: more than {MAX_FILES} profile files; none of them was read",
                dir.display()
            ));
        }
    }
    files.sort();
    skipped.sort();
    Ok((files, skipped))
}

fn read_limited(path: &Path) -> Result<String, String> {
    // A FIFO or a device is refused by its type (it would block the router, or never end).
    utter_protocol::files::read_regular_file(path, MAX_FILE).map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidData => e.to_string(),
        _ => format!("cannot read it: {e}"),
    })
}

/// The user's profile directory: `$XDG_CONFIG_HOME/utter/profiles`, else
/// `~/.config/utter/profiles`.
pub fn default_user_dir() -> Option<PathBuf> {
    let absolute = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    absolute("XDG_CONFIG_HOME")
        .or_else(|| absolute("HOME").map(|h| h.join(".config")))
        .map(|c| c.join("utter").join("profiles"))
}

/// The stamps of the profile files and of the commands file (modification time and size).
type SourceStamp = (Stamp, Option<(SystemTime, u64)>);

/// The profiles, read again when the user's directory changed.
pub struct ProfilesSource {
    dir: Option<PathBuf>,
    /// The stamps of the profile files and of the commands file last read, and what they
    /// held.
    current: Mutex<(Option<SourceStamp>, Arc<Profiles>)>,
}

impl ProfilesSource {
    /// Profiles from the built-in ones and `dir` (read at the first [`ProfilesSource::current`]).
    pub fn new(dir: Option<PathBuf>) -> ProfilesSource {
        ProfilesSource {
            dir,
            current: Mutex::new((None, Arc::new(Profiles::default()))),
        }
    }

    /// The user's directory.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The profiles now: the last ones read, or a new reading when a file of the directory
    /// was added, removed or changed (size or modification time) since.
    pub fn current(&self) -> Arc<Profiles> {
        let stamp = match &self.dir {
            Some(dir) => (
                user_files(dir),
                commands_file(dir)
                    .and_then(|f| std::fs::metadata(f).ok())
                    .map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len())),
            ),
            None => (Ok(Default::default()), None),
        };
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if current.0.as_ref() != Some(&stamp) {
            let profiles = Profiles::load(self.dir.as_deref());
            for problem in &profiles.problems {
                tracing::warn!("profile skipped: {problem}");
            }
            *current = (Some(stamp), Arc::new(profiles));
        }
        current.1.clone()
    }
}

/// The ops a profile command may name (the op registry of PROTOCOL.md and the older
/// runner, reference §8.2, with the in-app ops of this project).
pub const KNOWN_OPS: &[&str] = &[
    "key",
    "type_text",
    "type_keys",
    "scroll",
    "click_element",
    "click_point",
    "pointer_move",
    "ensure_url",
    "open_url",
    "launch_app",
    "ensure_app",
    "focus_app",
    "close_app",
    "media",
    "niri",
    "terminal",
    "search",
];

/// The `&'static` name of a known op.
pub fn known_op(op: &str) -> Option<&'static str> {
    KNOWN_OPS.iter().copied().find(|k| *k == op)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_profile_loads() {
        let profiles = Profiles::builtin();
        assert!(profiles.problems.is_empty(), "{:?}", profiles.problems);
        assert_eq!(profiles.len(), BUILTIN.len());
        let firefox = profiles.for_app_id("firefox-esr").expect("firefox");
        assert_eq!(firefox.kind, Kind::Browser);
        assert_eq!(firefox.shortcuts["new tab"], "ctrl+t");
        assert!(profiles.named("vs code").is_some_and(|p| p.id == "vscode"));
        assert!(
            profiles
                .named("fire fox")
                .is_some_and(|p| p.id == "firefox")
        );
        let foot = profiles.by_id("foot").unwrap();
        assert_eq!(foot.run, ["foot", "-e"]);
        assert_eq!(foot.commands["clear"], Command::Chord("ctrl+l".into()));
    }

    /// A fork names its base: Cursor has VS Code's keys, its own shortcut wins over the
    /// base's, a missing base and a loop are problems that keep the profile's own keys.
    #[test]
    fn a_profile_has_its_bases_shortcuts_and_its_own_win() {
        let builtin = Profiles::builtin();
        let cursor = builtin.for_app_id("cursor").expect("cursor");
        assert_eq!(cursor.kind, Kind::Editor);
        assert_eq!(cursor.shortcuts["command palette"], "ctrl+shift+p");
        assert!(builtin.named("cursor").is_some_and(|p| p.id == "cursor"));
        assert!(builtin.named("vs code").is_some_and(|p| p.id == "vscode"));

        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        write(
            "a.toml",
            "id = \"my-fork\"\nname = \"My Fork\"\nkind = \"editor\"\nbase = \"vscode\"\n[shortcuts]\n\"command palette\" = \"F1\"\n",
        );
        write(
            "b.toml",
            "id = \"orphan\"\nname = \"Orphan\"\nkind = \"app\"\nbase = \"nothing-here\"\n[shortcuts]\n\"save\" = \"ctrl+s\"\n",
        );
        write(
            "c.toml",
            "id = \"ping\"\nname = \"Ping\"\nkind = \"app\"\nbase = \"pong\"\n",
        );
        write(
            "d.toml",
            "id = \"pong\"\nname = \"Pong\"\nkind = \"app\"\nbase = \"ping\"\n",
        );
        write(
            "e.toml",
            "id = \"selfish\"\nname = \"Selfish\"\nkind = \"app\"\nbase = \"selfish\"\n",
        );
        let profiles = Profiles::load(Some(dir.path()));
        let fork = profiles.by_id("my-fork").unwrap();
        assert_eq!(fork.shortcuts["command palette"], "F1");
        assert_eq!(fork.shortcuts["quick open"], "ctrl+p");
        let orphan = profiles.by_id("orphan").unwrap();
        assert_eq!(orphan.shortcuts.len(), 1);
        let problems = profiles.problems.join("\n");
        assert!(
            problems.contains("b.toml: base \"nothing-here\" is no profile"),
            "{problems}"
        );
        assert!(problems.contains("leads back to"), "{problems}");
        assert!(
            problems.contains("e.toml:4:8: a profile cannot be its own base"),
            "{problems}"
        );
        assert!(profiles.by_id("selfish").is_none());
    }

    /// A named pipe or a device where the commands file should be is a problem, never a
    /// read that waits for a writer or never ends (the router would be stuck for good).
    #[test]
    fn a_fifo_or_a_device_as_the_commands_file_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let profiles_dir = dir.path().join("profiles");
        std::fs::create_dir(&profiles_dir).unwrap();
        let file = dir.path().join("commands.toml");
        let made = std::process::Command::new("mkfifo").arg(&file).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        let loaded = Profiles::load(Some(&profiles_dir));
        assert!(loaded.global().is_none());
        assert!(
            loaded.problems.iter().any(|p| p.contains("FIFO")),
            "{:?}",
            loaded.problems
        );
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &file).unwrap();
        let loaded = Profiles::load(Some(&profiles_dir));
        assert!(
            loaded.problems.iter().any(|p| p.contains("device")),
            "{:?}",
            loaded.problems
        );
    }

    #[test]
    fn problems_name_the_file_line_and_column() {
        let bad_chord =
            "id = \"x\"\nname = \"X\"\nkind = \"app\"\n[shortcuts]\n\"go\" = \"ctrl+nosuchkey\"\n";
        let e = parse(bad_chord, "x.toml").unwrap_err();
        assert_eq!((e.path.as_str(), e.line), ("x.toml", 5), "{e}");
        assert!(e.message.contains("nosuchkey"), "{e}");
        for (text, line, needle) in [
            ("id = \"x\"\nname = \"X\"\nkind = \"robot\"\n", 3, "robot"),
            ("id = \"X Y\"\nname = \"X\"\nkind = \"app\"\n", 1, "id"),
            (
                "id = \"x\"\nname = \"X\"\nkind = \"app\"\ncolour = 1\n",
                4,
                "colour",
            ),
            (
                "id = \"x\"\nname = \"X\"\nkind = \"browser\"\nsearch_url = \"http://e.com/?q=\"\n",
                4,
                "{q}",
            ),
            (
                "id = \"x\"\nname = \"X\"\nkind = \"app\"\nlaunch = [\"\"]\n",
                4,
                "launch",
            ),
            (
                "id = \"x\"\nname = \"X\"\nkind = \"app\"\n[commands]\n\"do\" = { op = \"Rm -rf\" }\n",
                5,
                "op",
            ),
            (
                "id = \"x\"\nname = \"X\"\nkind = \"app\"\n[shortcuts]\n\"!!\" = \"a\"\n",
                5,
                "no words",
            ),
            ("not toml at all [", 1, ""),
            (
                "id = \"x\"\nname = \"X\"\nkind = \"app\"\n[commands]\n\"go\" = { op = \"keys\" }\n",
                5,
                "not one of",
            ),
            (
                "id = \"x\"\nname = \"X\"\nkind = \"app\"\n[commands]\n\"x\" = { op = \"open_url\", args = { url = \"javascript:alert(1)\" } }\n",
                5,
                "http",
            ),
            (
                "id = \"x\"\nname = \"X\"\nkind = \"app\"\n[commands]\n\"x\" = { op = \"ensure_url\", args = { url = \"file:///etc/passwd\" } }\n",
                5,
                "http",
            ),
            (
                "id = \"x\"\nname = \"X\"\nkind = \"app\"\n[commands]\n\"x\" = { op = \"terminal\", args = { command = \"ls\" } }\n",
                5,
                "terminal's profile",
            ),
            (
                "id = \"x\"\nname = \"X\"\nkind = \"app\"\napp_ids = [\"a\\u001bb\"]\n",
                4,
                "app_id",
            ),
        ] {
            let e = parse(text, "p.toml").unwrap_err();
            assert_eq!(e.line, line, "{text}: {e}");
            assert!(e.message.contains(needle), "{text}: {e}");
            assert!(e.to_string().starts_with(&format!("p.toml:{line}:")), "{e}");
        }
    }

    #[test]
    fn the_persons_own_commands_load_from_commands_toml_and_are_checked() {
        let config = tempfile::tempdir().unwrap();
        let dir = config.path().join("profiles");
        std::fs::create_dir(&dir).unwrap();
        let file = config.path().join("commands.toml");
        std::fs::write(
            &file,
            "[commands]\n\"run tests\" = { op = \"terminal\", args = { command = \"cargo test\" } }\n\"save everything\" = \"ctrl+shift+s\"\n",
        )
        .unwrap();
        let source = ProfilesSource::new(Some(dir.clone()));
        let global = source.current().global().cloned().expect("loaded");
        assert_eq!(global.id, GLOBAL_ID);
        assert_eq!(
            global.commands["run tests"],
            Command::Step {
                op: "terminal".into(),
                args: serde_json::json!({"command": "cargo test"})
            }
        );
        assert_eq!(
            global.commands["save everything"],
            Command::Chord("ctrl+shift+s".into())
        );
        // Checked as a profile is: a bad chord names the line, and nothing of it loads.
        std::fs::write(&file, "[commands]\n\"x\" = \"ctrl+nosuchkey\"\n").unwrap();
        let reread = source.current();
        assert!(reread.global().is_none());
        assert!(
            reread
                .problems
                .iter()
                .any(|p| p.contains("commands.toml:2:")),
            "{:?}",
            reread.problems
        );
        // An address op must be http(s); unknown fields are refused.
        for bad in [
            "[commands]\n\"x\" = { op = \"open_url\", args = { url = \"file:///etc/passwd\" } }\n",
            "[commands]\n\"x\" = { op = \"rm\" }\n",
            "[shortcuts]\n\"x\" = \"ctrl+a\"\n",
        ] {
            assert!(parse_commands(bad, "c.toml").is_err(), "{bad}");
        }
        // A phrase holding a control or format character is refused with its line, shown
        // escaped, instead of becoming other words.
        for bad in [
            "[commands]\n\"run\\u0007tests\" = \"ctrl+t\"\n",
            "[commands]\n\"run\\u202etests\" = \"ctrl+t\"\n",
            "[commands]\n\"run\\ntests\" = \"ctrl+t\"\n",
        ] {
            let e = parse_commands(bad, "c.toml").expect_err(bad).to_string();
            assert!(
                e.contains("c.toml:2") && e.contains("cannot be spoken"),
                "{e}"
            );
            assert!(!e.chars().any(char::is_control), "{e:?}");
        }
    }

    #[test]
    fn user_files_replace_by_id_and_reload_on_change() {
        let dir = tempfile::tempdir().unwrap();
        let source = ProfilesSource::new(Some(dir.path().to_owned()));
        assert!(source.current().problems.is_empty());
        let before = source.current();
        assert_eq!(
            before.by_id("firefox").unwrap().shortcuts["new tab"],
            "ctrl+t"
        );
        std::fs::write(
            dir.path().join("firefox.toml"),
            "id = \"firefox\"\nname = \"Firefox\"\nkind = \"browser\"\napp_ids = [\"firefox\"]\n[shortcuts]\n\"new tab\" = \"ctrl+alt+t\"\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("broken.toml"), "id = \n").unwrap();
        std::fs::write(
            dir.path().join("mine.toml"),
            "id = \"mine\"\nname = \"Marker\"\nkind = \"app\"\napp_ids = [\"marker\"]\n[commands]\n\"export it\" = { op = \"key\", args = { chord = \"ctrl+e\" } }\n",
        )
        .unwrap();
        let after = source.current();
        assert_eq!(
            after.by_id("firefox").unwrap().shortcuts["new tab"],
            "ctrl+alt+t"
        );
        assert_eq!(after.len(), BUILTIN.len() + 1);
        assert_eq!(after.problems.len(), 1, "{:?}", after.problems);
        assert!(
            after.problems[0].contains("broken.toml:1:"),
            "{:?}",
            after.problems
        );
        assert_eq!(
            after.for_app_id("marker").unwrap().commands["export it"],
            Command::Step {
                op: "key".into(),
                args: utter_protocol::serde_json::json!({"chord": "ctrl+e"})
            }
        );
        // Unchanged: the same reading.
        assert!(Arc::ptr_eq(&after, &source.current()));
    }

    #[test]
    fn odd_entries_and_too_many_files_are_problems_that_come_and_go() {
        let dir = tempfile::tempdir().unwrap();
        let source = ProfilesSource::new(Some(dir.path().to_owned()));
        assert!(source.current().problems.is_empty());
        std::fs::create_dir(dir.path().join("dir.toml")).unwrap();
        std::os::unix::fs::symlink("/nonexistent", dir.path().join("dangling.toml")).unwrap();
        let odd = source.current();
        assert_eq!(odd.problems.len(), 2, "{:?}", odd.problems);
        assert!(
            odd.problems
                .iter()
                .any(|p| p.contains("dir.toml: not a regular file"))
        );
        std::fs::remove_dir(dir.path().join("dir.toml")).unwrap();
        std::fs::remove_file(dir.path().join("dangling.toml")).unwrap();
        for i in 0..=MAX_FILES {
            std::fs::write(dir.path().join(format!("p{i}.toml")), "").unwrap();
        }
        let many = source.current();
        assert_eq!(many.problems.len(), 1, "{:?}", many.problems);
        assert!(
            many.problems[0].contains("more than"),
            "{:?}",
            many.problems
        );
        for i in 0..=MAX_FILES {
            std::fs::remove_file(dir.path().join(format!("p{i}.toml"))).unwrap();
        }
        assert!(
            source.current().problems.is_empty(),
            "the problem went with the files"
        );
    }
}
