//! What every rule shares: the step a rule plans ([`Matched`]), why a recognised phrase
//! plans none ([`Escalation`]), and the sources the rules read ([`Sources`]), with the
//! verbs and player names more than one family uses. A leaf: it names no rule, so each
//! family (one file each, tried in the order [`crate::rules`] writes) depends on it and
//! never on another family's cascade.

use crate::apps::{AppEntry, find_app};
use crate::commands::CommandWords;
use crate::context::Context;
use crate::phrases::{Curated, NiriAction, PhraseTable};
use crate::profiles::{Kind, Profiles};
use crate::sites::Catalog;
use crate::text::strip_word_prefix;
use std::sync::Arc;
use utter_protocol::serde_json::Value;

/// Why a recognised phrase gives no step, for the plan's `escalate: {reason, message}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Escalation {
    /// A stable reason code: `no_rule`, `unknown_target`, `needs_browser`, `needs_terminal`,
    /// `needs_editor`, `needs_app`, `no_key` (the focused application has no key for it),
    /// `incomplete`, `bad_number`, `other_compositor`, `too_many_parts` (more commands joined
    /// by "and" than are planned at once), `refused`.
    pub reason: &'static str,
    /// What to tell the person.
    pub message: String,
}

impl Escalation {
    /// The escalation of a phrase that needs a focused application of `kind`.
    pub fn needs(kind: Kind, what: &str) -> Escalation {
        let (reason, article) = match kind {
            Kind::Browser => ("needs_browser", "a browser"),
            Kind::Terminal => ("needs_terminal", "a terminal"),
            Kind::Editor => ("needs_editor", "an editor"),
            Kind::App => ("needs_app", "the application it belongs to"),
        };
        Escalation {
            reason,
            message: format!("\"{what}\" needs {article} to be focused"),
        }
    }
}

/// Verbs that launch an application, longest first.
pub(crate) const APP_VERBS: &[&str] = &[
    "start up",
    "fire up",
    "boot up",
    "spin up",
    "kick off",
    "open up",
    "launch",
    "start",
    "open",
    "run",
    "i need",
    "i want",
    "id like",
    "i would like",
    "get me",
    "give me",
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
    /// when nothing was found (see [`crate::explain::explain`]).
    fn names(&self) -> Vec<String>;

    /// Every installed application (the decision head's candidates, [`crate::decide`]).
    fn all(&self) -> &[AppEntry];

    /// The person's default applications for `mime` (`x-scheme-handler/https`), desktop
    /// ids most preferred first (`mimeapps.list`); none by default.
    fn defaults_for(&self, mime: &str) -> Vec<String> {
        let _ = mime;
        Vec::new()
    }
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

impl<'a> Sources<'a> {
    /// These sources with `utterance` as the words as said: a part, a rewording or a
    /// clause planned on its own ("" lets the normalised text stand in for it).
    pub fn saying<'b>(&self, utterance: &'b str) -> Sources<'b>
    where
        'a: 'b,
    {
        Sources { utterance, ..*self }
    }

    /// The profile of a window's `app_id`: its own, else the profile that stands for its
    /// installed desktop entry's `Categories` (Ptyxis, with no profile, is a terminal).
    pub(crate) fn profile_of(&self, app_id: &str) -> Option<&'a crate::profiles::Profile> {
        if let Some(profile) = self.profiles.for_app_id(app_id) {
            return Some(profile);
        }
        let entry = self.installed_for(app_id)?;
        self.profiles.for_categories(&entry.categories)
    }

    /// The installed application whose windows carry `app_id` ([`AppEntry::has_app_id`]).
    pub(crate) fn installed_for(&self, app_id: &str) -> Option<&'a AppEntry> {
        let apps: &'a dyn AppLookup = self.apps;
        apps.all().iter().find(|a| a.has_app_id(app_id))
    }

    /// The utterance the in-app rules read: [`Sources::utterance`], else `text`.
    pub(crate) fn spoken<'t>(&'t self, text: &'t str) -> &'t str {
        if self.utterance.trim().is_empty() {
            text
        } else {
            self.utterance
        }
    }
}

/// The non-empty remainders of `text` after each verb of `verbs` it starts with.
pub(crate) fn targets<'a, V: AsRef<str>>(
    text: &'a str,
    verbs: &'a [V],
) -> impl Iterator<Item = &'a str> + 'a {
    verbs
        .iter()
        .filter_map(move |verb| strip_word_prefix(text, verb.as_ref()))
        .filter(|rest| !rest.is_empty())
}
