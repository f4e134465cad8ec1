//! The rules: from a normalised utterance to at most one step.
//!
//! Rules are tried in a fixed order and the first that matches decides:
//!
//! 1. `media`: playback commands ("pause", "next track", "pause spotify",
//!    "skip on vlc") → op `media`, args `{command, player?}`.
//! 2. `open_site`: "open / go to / visit / show <site>" for a site of the catalog
//!    → op `ensure_url`, args `{url}`.
//! 3. `launch_app`: "open / launch / start / run <app>" for an installed application
//!    → op `launch_app`, args `{app_id, name}`.
//! 4. `open_domain`: "open / go to / visit / show <host name>" → op `ensure_url` with
//!    `https://<host>`.
//!
//! So for "open X" a catalog site beats an application of the same name, and both beat
//! reading X as a host name. "go to", "visit" and "show" never launch applications.
//!
//! Everything here is pure over a given catalog and a given application list, which is how
//! the unit tests drive it; `main.rs` supplies the real ones.

use crate::apps::{AppEntry, find_app};
use crate::sites::{Catalog, site_forms};
use crate::text::{is_hostname, strip_word_prefix, strip_word_suffix};
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
    /// The rule's name: `media`, `open_site`, `launch_app` or `open_domain`.
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

/// Apply the rules to `text`, which must already be normalised with fillers stripped.
pub fn plan(text: &str, catalog: &Catalog, apps: &dyn AppLookup) -> Option<Matched> {
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
        if let Some(site) = catalog.lookup(target) {
            return Some(Matched {
                rule: "open_site",
                op: "ensure_url",
                args: json!({"url": site.url}),
                message: format!("open {} ({})", site.name, site.url),
            });
        }
    }
    for target in targets(text, APP_VERBS) {
        if let Some(app) = apps.find(target) {
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

/// The non-empty remainders of `text` after each verb of `verbs` it starts with.
fn targets<'a>(text: &'a str, verbs: &'a [&'a str]) -> impl Iterator<Item = &'a str> + 'a {
    verbs
        .iter()
        .filter_map(move |verb| strip_word_prefix(text, verb))
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
            AppEntry::new("firefox", "Firefox", Some("Web Browser"), &["internet"]),
            AppEntry::new("marker-writer", "Marker Writer", None, &[]),
            AppEntry::new("org.gnome.Calendar", "Calendar", None, &["events"]),
            AppEntry::new("spotify", "Spotify", Some("Music Player"), &[]),
            AppEntry::new("youtube-app", "YouTube", None, &[]),
        ]
    }

    fn run(utterance: &str) -> Option<Matched> {
        let catalog = Catalog::builtin().expect("built-in catalog");
        let normalized = normalize(utterance);
        plan(strip_fillers(&normalized), &catalog, &apps())
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
        assert_eq!(summary("go to marker writer"), None);
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
}
