//! The playback family: "pause", "next track", "pause spotify", "spotify pause", "skip on
//! vlc", "go back to the previous song", "turn it up" → op `media`, args `{command,
//! player?}` (the desktop plugin's MPRIS and volume commands).

use crate::plan::{KNOWN_PLAYERS, Matched};
use crate::text::{strip_word_prefix, strip_word_suffix};
use utter_protocol::serde_json::{Value, json};

/// What follows "play", "pause", "stop", "resume" or "unpause" without changing the command.
const MEDIA_OBJECTS: &[&str] = &[
    "",
    "it",
    "music",
    "the music",
    "my music",
    "some music",
    "something",
    "some tunes",
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
    "stream",
    "the stream",
    "movie",
    "the movie",
    "episode",
    "the episode",
    "show",
    "the show",
];

/// Sites and places a video or a song plays on, said before it ("pause the youtube
/// video"): they have no player of their own (the browser plays them), so the command goes
/// to the player playing.
const PLAYED_ON: &[&str] = &[
    "youtube",
    "netflix",
    "twitch",
    "browser",
    "web",
    "vimeo",
    "soundcloud",
    "bandcamp",
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

/// The family's step for `text`, if it is a playback command (with the player it names).
pub(crate) fn plan(text: &str) -> Option<Matched> {
    if let Some((level, player)) = set_volume(text) {
        let percent = (level * 100.0).round();
        let mut args = json!({"command": "set_volume", "level": level});
        let mut message = format!("set the volume to {percent}%");
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
    let (command, player) = media(text)?;
    let mut args = json!({"command": command.as_str()});
    let mut message = command.describe().to_owned();
    if let Some(player) = player {
        message = format!("{message} on {player}");
        args["player"] = Value::String(player);
    }
    Some(Matched {
        rule: "media",
        op: "media",
        args,
        message,
        confirm: false,
    })
}

/// [`plan`] in the desktop of `sources`: "pause the video" with a browser focused, "pause
/// the youtube video" with one open, is for the video that browser plays (its own MPRIS
/// player, named as its profile is), not whichever player played last.
pub(crate) fn plan_here(text: &str, sources: &crate::plan::Sources<'_>) -> Option<Matched> {
    let mut m = plan(text)?;
    if m.args.get("player").is_some() {
        return Some(m);
    }
    let words: Vec<&str> = text.split(' ').collect();
    let on_the_web = words.iter().any(|w| PLAYED_ON.contains(w));
    let browser = |id: &str| {
        sources
            .profile_of(id)
            .filter(|p| p.kind == crate::profiles::Kind::Browser)
    };
    let context = sources.context;
    let focused = context
        .and_then(|c| c.focused_app_id.as_deref())
        .and_then(browser)
        .filter(|_| on_the_web || words.contains(&"video"));
    let open = || {
        on_the_web
            .then(|| context?.app_ids.iter().find_map(|id| browser(id)))
            .flatten()
    };
    if let Some(browser) = focused.or_else(open) {
        m.message = format!("{} on {}", m.message, browser.name);
        m.args["player"] = Value::String(browser.id.clone());
    } else if let Some((player, name)) = player_here(&words, sources) {
        m.message = format!("{} on {name}", m.message);
        m.args["player"] = Value::String(player);
    }
    Some(m)
}

/// The player a command that names none is for, by the windows: the focused window's
/// application when it plays media ("pause the video" in mpv), else, for "the music", the
/// one open window of an application that plays audio (Spotify beside the notes being
/// written), and for "the video" or "the movie" of one that plays video (mpv). `(MPRIS name, application name)`; `None` when the windows do not tell.
fn player_here(words: &[&str], sources: &crate::plan::Sources<'_>) -> Option<(String, String)> {
    let context = sources.context?;
    let installed = |app_id: &str| sources.installed_for(app_id);
    let player = |app_id: &str| {
        installed(app_id)
            .filter(|a| is_player(a))
            .map(|a| (mpris_name(a, app_id), a.name.clone()))
    };
    if let Some(focused) = context.focused_app_id.as_deref()
        && let Some(found) = player(focused)
    {
        return Some(found);
    }
    // "the music": an audio player; "the video", "the movie": a video player.
    let category = if words.contains(&"music") {
        "Audio"
    } else if words
        .iter()
        .any(|w| matches!(*w, "video" | "movie" | "film" | "episode"))
    {
        "Video"
    } else {
        return None;
    };
    let open: Vec<_> = context
        .app_ids
        .iter()
        .filter(|id| {
            installed(id)
                .is_some_and(|a| is_player(a) && a.categories.iter().any(|c| c == category))
        })
        .collect();
    match open.as_slice() {
        [only] => player(only),
        _ => None,
    }
}

/// Whether an installed application may play media (its `Categories` say `Player`, `Audio`
/// or `Video`: a video editor too, so only where it is named).
pub(crate) fn plays(app: &crate::apps::AppEntry) -> bool {
    app.categories
        .iter()
        .any(|c| matches!(c.as_str(), "Player" | "Audio" | "Video"))
}

/// Whether an installed application is a player (`Categories` says `Player`).
fn is_player(app: &crate::apps::AppEntry) -> bool {
    app.categories.iter().any(|c| c == "Player")
}

/// The MPRIS name a player's application is nearly always found under: its program's
/// (`Videos` is `totem`); a Flatpak's or a wrapper's program says nothing, so `said` (the
/// name as said, or its window's `app_id`) stays.
pub(crate) fn mpris_name(app: &crate::apps::AppEntry, said: &str) -> String {
    app.exec
        .as_deref()
        .filter(|p| !matches!(*p, "flatpak" | "env" | "sh" | "bash" | "snap"))
        .map_or_else(|| said.to_lowercase(), str::to_lowercase)
}

/// A playback command and the player it names, if `text` is one.
pub(crate) fn media(text: &str) -> Option<(MediaCommand, Option<String>)> {
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

/// Verbs that may open a volume setting ("set the volume to 40 percent").
const VOLUME_VERBS: &[&str] = &["set", "put", "turn", "change", "bring", "adjust", "make"];

/// Levels said by name, as fractions of full volume.
const NAMED_LEVELS: &[(&str, f64)] = &[
    ("half", 0.5),
    ("halfway", 0.5),
    ("max", 1.0),
    ("maximum", 1.0),
    ("full", 1.0),
    ("a hundred percent", 1.0),
];

/// "set the volume to 40 percent", "volume 30", "put the sound at fifty percent", "spotify
/// volume to 20", "set the volume of spotify to half", "half volume", "max volume": the
/// level (0 to 1; a number is a percentage, 0 to 100) and the player named, if any. Other
/// words, or a number above 100, are no volume setting.
pub(crate) fn set_volume(text: &str) -> Option<(f64, Option<String>)> {
    // "half volume", "full volume", "max volume".
    for (name, level) in NAMED_LEVELS {
        if let Some(rest) = strip_word_prefix(text, name)
            && matches!(rest, "volume" | "sound")
        {
            return Some((*level, None));
        }
    }
    let mut rest = text;
    for verb in VOLUME_VERBS {
        if let Some(after) = strip_word_prefix(rest, verb) {
            rest = after;
            break;
        }
    }
    rest = strip_word_prefix(rest, "the").unwrap_or(rest);
    // A player before the volume: "spotify volume 20", "the spotify volume to 20".
    let mut player = None;
    for known in KNOWN_PLAYERS {
        if let Some(after) = strip_word_prefix(rest, known) {
            player = Some((*known).to_owned());
            rest = after;
            break;
        }
    }
    rest = ["volume", "sound"]
        .iter()
        .find_map(|n| strip_word_prefix(rest, n))?;
    // ... or after it: "the volume of spotify", "the volume on vlc".
    for preposition in ["of", "on", "in", "for"] {
        if player.is_some() {
            break;
        }
        if let Some(after) = strip_word_prefix(rest, preposition) {
            let after = strip_word_prefix(after, "the").unwrap_or(after);
            if let Some((known, tail)) = KNOWN_PLAYERS
                .iter()
                .find_map(|k| strip_word_prefix(after, k).map(|t| (*k, t)))
            {
                player = Some(known.to_owned());
                rest = tail;
            }
        }
    }
    // "volume on 30 percent" (German "auf"), "volume to 30", "volume at 30".
    let rest = ["to", "at", "on"]
        .iter()
        .find_map(|p| strip_word_prefix(rest, p))
        .unwrap_or(rest);
    let rest = rest.trim();
    if let Some((_, level)) = NAMED_LEVELS.iter().find(|(name, _)| *name == rest) {
        return Some((*level, player));
    }
    let number = ["percent", "per cent", "%"]
        .iter()
        .find_map(|unit| strip_word_suffix(rest, unit))
        .unwrap_or(rest)
        .trim();
    // One number: not digits run together ("0.8" and "1/2" are written "0 8", "1 2"), nor
    // a fraction ("one third").
    let words: Vec<&str> = number.split(' ').collect();
    let digits = |w: &&str| w.bytes().all(|b| b.is_ascii_digit());
    if number.is_empty()
        || (words.len() > 1 && words.iter().any(digits))
        || words.iter().any(|w| {
            matches!(
                *w,
                "third" | "thirds" | "quarter" | "quarters" | "fifth" | "fifths" | "point"
            )
        })
    {
        return None;
    }
    let percent = crate::numbers::said_number(number).filter(|n| *n <= 100)?;
    #[allow(clippy::cast_precision_loss)] // at most 100
    let level = percent as f64 / 100.0;
    Some((level, player))
}

/// How much, said around a volume change ("a bit quieter", "turn it down a little"): a
/// step either way, as without it.
const DEGREES: &[&str] = &[
    "a little bit",
    "a little",
    "a tiny bit",
    "a bit",
    "a tad",
    "slightly",
    "just a bit",
    "some",
    "more",
    "a bit more",
    "a little more",
];

/// Words a complaint about the volume may hold besides the level ([`complaint`]).
const COMPLAINT_WORDS: &[&str] = &[
    "ugh", "oh", "man", "wow", "its", "it", "is", "this", "thats", "that", "way", "much", "far",
    "a", "bit", "little", "the", "music", "volume", "sound", "audio", "video", "song", "now", "so",
    "really", "kinda", "just", "still",
];

/// "ugh it's way too loud" (volume down), "the music is too quiet" (volume up): the level
/// said as too much or too little, with only [`COMPLAINT_WORDS`] around it.
fn complaint(text: &str) -> Option<MediaCommand> {
    let (rest, command) = [
        ("too loud", MediaCommand::VolumeDown),
        ("too quiet", MediaCommand::VolumeUp),
        ("too soft", MediaCommand::VolumeUp),
        ("too low", MediaCommand::VolumeUp),
    ]
    .iter()
    .find_map(|(level, command)| Some((strip_word_suffix(text, level)?, *command)))?;
    rest.split(' ')
        .filter(|w| !w.is_empty())
        .all(|w| COMPLAINT_WORDS.contains(&w))
        .then_some(command)
}

/// The command a whole phrase (without a player) stands for, with a degree said before or
/// after a volume change ([`DEGREES`]).
fn media_phrase(text: &str) -> Option<MediaCommand> {
    if let Some(command) = bare_media_phrase(text) {
        return Some(command);
    }
    let volume = |c: MediaCommand| matches!(c, MediaCommand::VolumeUp | MediaCommand::VolumeDown);
    // "hit play", "press pause": the player's button, said as a key. "click play" is the
    // click family's: a control called Play (a game's, in Steam) is clicked.
    if let Some(rest) = ["hit", "press", "tap"]
        .iter()
        .find_map(|verb| strip_word_prefix(text, verb))
        && let Some(command) = bare_media_phrase(rest).filter(|c| !volume(*c))
    {
        return Some(command);
    }
    // "ugh it's way too loud", "the music is too quiet": a complaint about the level.
    if let Some(command) = complaint(text) {
        return Some(command);
    }
    // "make it louder", "make it a bit quieter", "make louder" (the object left out, as
    // people new to English say it), "make the music louder".
    if let Some(rest) = ["make it", "make the music", "make the sound", "make"]
        .iter()
        .find_map(|lead| strip_word_prefix(text, lead))
        && let Some(command) = media_phrase(rest).filter(|c| volume(*c))
    {
        return Some(command);
    }
    DEGREES.iter().find_map(|degree| {
        let rest = strip_word_prefix(text, degree).or_else(|| strip_word_suffix(text, degree))?;
        bare_media_phrase(rest.trim()).filter(|c| volume(*c))
    })
}

/// The command a whole phrase stands for, said as it is.
fn bare_media_phrase(text: &str) -> Option<MediaCommand> {
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
        // The sound (not the music) back on is the mute undone.
        ("put the sound back on", Unmute),
        ("turn the sound back on", Unmute),
        ("turn the sound on", Unmute),
        ("bring the sound back", Unmute),
        ("sound back on", Unmute),
        ("sound on", Unmute),
        ("sound on again", Unmute),
        ("the sound on again", Unmute),
        ("turn the sound on again", Unmute),
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
        // "go back to the song before": what is played, then "before".
        if let Some(what) = strip_word_suffix(rest, "before")
            && !what.is_empty()
            && TRACK_WORDS.contains(&what)
        {
            return Some(Previous);
        }
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
    // "put the music back on", "turn it back on", "put on some music": playing again.
    // ("turn it back on" may be anything: with "turn" and "switch" what plays is named.)
    let again = ["put", "turn", "switch"].iter().find_map(|verb| {
        let rest = strip_word_prefix(text, verb)?;
        let what = strip_word_suffix(rest, "back on").or_else(|| strip_word_prefix(rest, "on"))?;
        Some((*verb, what))
    });
    if let Some((verb, what)) = again
        && !matches!(what, "" | "something")
        && (verb == "put" || what != "it")
        && MEDIA_OBJECTS.contains(&what)
    {
        return Some(Play);
    }
    // "the song before", "the track before": what is played, then "before" ("the one
    // before" may be anything).
    if let Some(what) = strip_word_prefix(text, "the").and_then(|r| strip_word_suffix(r, "before"))
        && matches!(what, "song" | "track")
    {
        return Some(Previous);
    }
    let (verb, rest) = text.split_once(' ').unwrap_or((text, ""));
    let (allowed, command): (&[&str], MediaCommand) = match verb {
        // "continue the music" is "resume the music" ("continue" alone, or "continue it",
        // may be anything).
        "continue"
            if matches!(
                rest,
                "the music"
                    | "my music"
                    | "the song"
                    | "the track"
                    | "the playback"
                    | "playback"
                    | "the podcast"
                    | "the video"
            ) =>
        {
            (MEDIA_OBJECTS, Play)
        }
        "play" | "resume" | "unpause" => (MEDIA_OBJECTS, Play),
        "pause" => (MEDIA_OBJECTS, Pause),
        "stop" => (MEDIA_OBJECTS, Stop),
        "next" => (TRACK_WORDS, Next),
        "skip" => (SKIP_OBJECTS, Next),
        "previous" => (TRACK_WORDS, Previous),
        _ => return None,
    };
    if allowed.contains(&rest) {
        return Some(command);
    }
    // "pause the youtube video": where it plays, said before what is played.
    let rest = strip_word_prefix(rest, "the").unwrap_or(rest);
    let (place, what) = rest.split_once(' ')?;
    (allowed == MEDIA_OBJECTS && PLAYED_ON.contains(&place) && allowed.contains(&what))
        .then_some(command)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_volume_said_as_a_level_is_set() {
        let level = |text: &str| super::set_volume(text);
        assert_eq!(level("set the volume to 50 percent"), Some((0.5, None)));
        assert_eq!(level("set volume to 30"), Some((0.3, None)));
        assert_eq!(level("volume 20"), Some((0.2, None)));
        assert_eq!(level("put the sound at 75 percent"), Some((0.75, None)));
        assert_eq!(level("half volume"), Some((0.5, None)));
        assert_eq!(level("volume to max"), Some((1.0, None)));
        assert_eq!(level("turn the volume to 0"), Some((0.0, None)));
        assert_eq!(level("volume on 30 percent"), Some((0.3, None)));
        assert_eq!(
            level("set the volume of spotify to 40"),
            Some((0.4, Some("spotify".to_owned())))
        );
        assert_eq!(
            level("spotify volume 10 percent"),
            Some((0.1, Some("spotify".to_owned())))
        );
        // Not levels: above full, no number, other sentences.
        for text in [
            "set the volume to 150",
            "volume up",
            "turn the sound on",
            "put the sound back on",
            "set the volume",
            "volume",
            "the volume is 50",
            "set the alarm to 50",
            "set volume to 0.8",
            "volume 1/2",
            "volume one third",
        ] {
            assert_eq!(level(text), None, "{text}");
        }
        let m = super::plan("set the volume to 50 percent").expect("planned");
        assert_eq!(m.args["command"], "set_volume");
        assert_eq!(m.args["level"], 0.5);
    }

    use super::*;

    #[test]
    fn where_a_video_plays_may_be_said_before_it() {
        assert_eq!(
            media("pause the youtube video"),
            Some((MediaCommand::Pause, None))
        );
        assert_eq!(
            media("play the twitch stream"),
            Some((MediaCommand::Play, None))
        );
        assert_eq!(
            media("resume the netflix video"),
            Some((MediaCommand::Play, None))
        );
        assert_eq!(media("pause the kitchen video"), None);
    }

    #[test]
    fn a_degree_said_with_a_volume_change_keeps_it() {
        for (said, command) in [
            ("a bit quieter", MediaCommand::VolumeDown),
            ("turn the volume down a bit", MediaCommand::VolumeDown),
            ("turn it up a little", MediaCommand::VolumeUp),
            ("slightly louder", MediaCommand::VolumeUp),
            ("ugh its way too loud", MediaCommand::VolumeDown),
            ("the music is too quiet", MediaCommand::VolumeUp),
            ("too loud", MediaCommand::VolumeDown),
            ("make louder", MediaCommand::VolumeUp),
            ("make the music quieter", MediaCommand::VolumeDown),
            ("sound on again", MediaCommand::Unmute),
            ("continue the music", MediaCommand::Play),
            ("the song before", MediaCommand::Previous),
        ] {
            assert_eq!(media_phrase(said), Some(command), "{said}");
        }
        // Only a volume change takes a degree: "pause a bit" is no pause.
        for said in [
            "pause a bit",
            "a bit",
            "some",
            "next a little",
            "more",
            "my boss is too loud",
            "the fan is too loud",
            "continue",
            "make",
            "continue the meeting",
            "continue it",
            "the day before",
            "the one before",
            "the video before",
        ] {
            assert_eq!(media_phrase(said), None, "{said}");
        }
    }
}
