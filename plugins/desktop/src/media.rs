//! The `media` op: play, pause, skip on an MPRIS player over the session bus.
//!
//! MPRIS D-Bus Interface Specification 2.2: every player owns a bus name
//! `org.mpris.MediaPlayer2.<name>` (possibly `.instance<pid>`) and serves
//! `/org/mpris/MediaPlayer2` with `org.mpris.MediaPlayer2` (`Identity`) and
//! `org.mpris.MediaPlayer2.Player` (`Play`, `Pause`, `PlayPause`, `Stop`, `Next`, `Previous`,
//! `PlaybackStatus`).
//!
//! Which player: with `player`, the ones whose bus-name suffix or `Identity` contains it
//! (ignoring case); otherwise all. Among those: a `Playing` one (the last used first, when
//! several play), else the one the person used last, else the first `Paused`, else the
//! first, in bus-name order. "Used last" is the player this plugin last sent a command to,
//! or the last whose `PlaybackStatus` turned `Playing` (a watcher follows every player's
//! `PropertiesChanged` from the plugin's start), whichever came later: with one player
//! paused by "pause" and another idle, "play" resumes the first.
//!
//! Volume with no `player` named is the system's: the default audio sink ([`crate::volume`],
//! WirePlumber's `wpctl`). A player's own volume (`volume_up`, `volume_down`: a step of
//! [`VOLUME_STEP`]; `mute`; `unmute`: the volume before the mute, else half) is its `Volume`
//! property (0.0 to 1.0), read back after it is set, so the result says whether the player
//! took it (`verified`); it is used when a player is named, or when the system volume cannot
//! be reached.

use crate::bus::{self, bounded};
use crate::plugin_error;
use serde::Deserialize;
use serde_json::{Value, json};
use std::time::Duration;
use utter_protocol::ErrorObject;
use zbus::Connection;
use zbus::proxy::CacheProperties;

/// The common prefix of MPRIS bus names.
pub const MPRIS_PREFIX: &str = "org.mpris.MediaPlayer2.";

/// Limit for each question to a player (a hung player must not hang the op).
const PLAYER_CALL: Duration = Duration::from_secs(2);

#[zbus::proxy(
    interface = "org.mpris.MediaPlayer2",
    default_path = "/org/mpris/MediaPlayer2",
    gen_blocking = false
)]
trait MediaPlayer2 {
    /// A friendly name for the player, e.g. "VLC media player".
    #[zbus(property)]
    fn identity(&self) -> zbus::Result<String>;
}

#[zbus::proxy(
    interface = "org.mpris.MediaPlayer2.Player",
    default_path = "/org/mpris/MediaPlayer2",
    gen_blocking = false
)]
trait Player {
    /// Start or resume playback.
    fn play(&self) -> zbus::Result<()>;
    /// Pause playback.
    fn pause(&self) -> zbus::Result<()>;
    /// Toggle between playing and paused.
    fn play_pause(&self) -> zbus::Result<()>;
    /// Stop playback.
    fn stop(&self) -> zbus::Result<()>;
    /// Skip to the next track.
    fn next(&self) -> zbus::Result<()>;
    /// Skip to the previous track.
    fn previous(&self) -> zbus::Result<()>;
    /// `Playing`, `Paused` or `Stopped`.
    #[zbus(property)]
    fn playback_status(&self) -> zbus::Result<String>;
    /// The volume, 0.0 to 1.0 (MPRIS allows more; it is clamped here).
    #[zbus(property)]
    fn volume(&self) -> zbus::Result<f64>;
    /// Set the volume.
    #[zbus(property)]
    fn set_volume(&self, volume: f64) -> zbus::Result<()>;
}

/// One volume step.
pub const VOLUME_STEP: f64 = 0.1;

/// The unique bus name of the player used last (see the module docs), and the volumes of
/// muted players by bus name.
#[derive(Default)]
struct Memory {
    last_used: Option<String>,
    muted: std::collections::HashMap<String, f64>,
}

fn memory() -> std::sync::MutexGuard<'static, Memory> {
    static MEMORY: std::sync::OnceLock<std::sync::Mutex<Memory>> = std::sync::OnceLock::new();
    MEMORY
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Follow every player's `PlaybackStatus` on the session bus until the bus goes away,
/// remembering the last one that started playing. Started once, with the plugin.
pub async fn watch() {
    let Ok((conn, _)) = bus::connect().await else {
        return;
    };
    let rule = zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .interface("org.freedesktop.DBus.Properties")
        .and_then(|b| b.member("PropertiesChanged"))
        .and_then(|b| b.path("/org/mpris/MediaPlayer2"))
        .and_then(|b| b.arg(0, "org.mpris.MediaPlayer2.Player"))
        .map(|b| b.build());
    let Ok(rule) = rule else {
        return;
    };
    let Ok(mut stream) = zbus::MessageStream::for_match_rule(rule, &conn, Some(64)).await else {
        return;
    };
    use futures::StreamExt;
    while let Some(Ok(message)) = stream.next().await {
        let Some(sender) = message.header().sender().map(|s| s.to_string()) else {
            continue;
        };
        type Changed = (
            String,
            std::collections::HashMap<String, zbus::zvariant::OwnedValue>,
            Vec<String>,
        );
        let Ok((_, changed, _)) = message.body().deserialize::<Changed>() else {
            continue;
        };
        let playing = changed
            .get("PlaybackStatus")
            .and_then(|v| v.downcast_ref::<String>().ok())
            .is_some_and(|s| s == "Playing");
        if playing {
            memory().last_used = Some(sender);
        }
    }
}

/// What to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Command {
    /// `Play`.
    Play,
    /// `Pause`.
    Pause,
    /// `PlayPause`.
    PlayPause,
    /// `Stop`.
    Stop,
    /// `Next`.
    Next,
    /// `Previous`.
    Previous,
    /// `Volume` up a step.
    VolumeUp,
    /// `Volume` down a step.
    VolumeDown,
    /// `Volume` to 0.
    Mute,
    /// `Volume` back to what it was before `mute`.
    Unmute,
    /// `Volume` to `level` (what an undo of the volume commands sends).
    SetVolume,
}

impl Command {
    /// The MPRIS method name.
    pub fn method(self) -> &'static str {
        match self {
            Command::Play => "Play",
            Command::Pause => "Pause",
            Command::PlayPause => "PlayPause",
            Command::Stop => "Stop",
            Command::Next => "Next",
            Command::Previous => "Previous",
            Command::VolumeUp
            | Command::VolumeDown
            | Command::Mute
            | Command::Unmute
            | Command::SetVolume => "Set Volume",
        }
    }

    /// Whether it sets the volume.
    pub fn is_volume(self) -> bool {
        self == Command::SetVolume || self.volume_change().is_some()
    }

    /// The change of the system volume it stands for, if it sets the volume.
    pub fn volume_change(self) -> Option<crate::volume::Change> {
        use crate::volume::Change;
        match self {
            Command::VolumeUp => Some(Change::Up),
            Command::VolumeDown => Some(Change::Down),
            Command::Mute => Some(Change::Mute),
            Command::Unmute => Some(Change::Unmute),
            _ => None,
        }
    }
}

/// `{command, player?}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MediaArgs {
    /// The command.
    pub command: Command,
    /// Part of a player's bus name or `Identity`, e.g. `"spotify"`, `"mpv"`.
    #[serde(default)]
    pub player: Option<String>,
    /// For `set_volume`: the level, 0 to [`crate::volume::MAX_SET`] (1 is full).
    #[serde(default)]
    pub level: Option<f64>,
    /// For `set_volume`: muted or not (the system sound; a player has no mute of its own).
    #[serde(default)]
    pub muted: Option<bool>,
}

impl MediaArgs {
    /// The system volume change asked for, if any.
    ///
    /// # Errors
    /// `-32602` for `set_volume` without a `level`.
    fn volume_change(&self) -> Result<Option<crate::volume::Change>, ErrorObject> {
        match (self.command, self.level) {
            (Command::SetVolume, Some(volume))
                if (0.0..=crate::volume::MAX_SET).contains(&volume) =>
            {
                Ok(Some(crate::volume::Change::Set {
                    volume,
                    muted: self.muted,
                }))
            }
            (Command::SetVolume, Some(volume)) => Err(ErrorObject::invalid_params(format!(
                "set_volume: the level must be from 0 to {} (1 is full), not {volume}",
                crate::volume::MAX_SET
            ))),
            (Command::SetVolume, None) => Err(ErrorObject::invalid_params(
                "set_volume needs \"level\": a number from 0 to 1.5 (1 is full)",
            )),
            (command, _) => Ok(command.volume_change()),
        }
    }
}

/// The JSON Schema of [`MediaArgs`].
pub fn args_schema() -> Value {
    json!({
        "type": "object",
        "required": ["command"],
        "additionalProperties": false,
        "properties": {
            "command": {"enum": ["play", "pause", "play_pause", "stop", "next", "previous", "volume_up", "volume_down", "mute", "unmute", "set_volume"]},
            "level": {"type": "number", "minimum": 0, "maximum": crate::volume::MAX_SET,
                "description": "For set_volume: the level (1 is full)."},
            "muted": {"type": "boolean", "description": "For set_volume: muted or not."},
            "player": {
                "type": "string",
                "description": "Pick the player whose bus name or Identity contains this (case-insensitive); default: the one playing."
            }
        }
    })
}

/// The `undo` declaration of the op `media` (utter-core's `undo`): a volume change sets the
/// level it had before (the system sound's with its mute, or the same player's), play and
/// pause swap, next and previous swap; `stop` cannot be undone.
pub fn undo_rules() -> Value {
    let back = |command: &str| json!({"op": "media", "args": {"command": command, "player": "$result.player"}});
    let mut rules = vec![json!({
        "when": {"$result.target": "system"},
        "steps": [{"op": "media", "args": {"command": "set_volume", "level": "$result.volume_before",
                                           "muted": "$result.muted_before"}}]})];
    for command in ["volume_up", "volume_down", "mute", "unmute", "set_volume"] {
        rules.push(json!({"when": {"command": command},
            "steps": [{"op": "media", "args": {"command": "set_volume", "level": "$result.volume_before",
                                               "player": "$result.player"}}]}));
    }
    for (done, undo) in [
        ("play", "pause"),
        ("pause", "play"),
        ("play_pause", "play_pause"),
        ("next", "previous"),
        ("previous", "next"),
    ] {
        rules.push(json!({"when": {"command": done}, "steps": [back(undo)]}));
    }
    rules.push(json!({"when": {"command": "stop"},
        "none": "a stopped player does not resume where it was; say \"play\""}));
    Value::Array(rules)
}

/// One player found on the bus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Its bus name.
    pub bus_name: String,
    /// Its `Identity` (the bus-name suffix when it did not answer).
    pub identity: String,
    /// Its `PlaybackStatus` (`"Unknown"` when it did not answer).
    pub status: String,
    /// The unique name that owns `bus_name`, when the bus said.
    pub owner: Option<String>,
}

/// Choose a player; see the module documentation. `last_used` is the unique name of the
/// player used last.
pub fn choose<'a>(
    players: &'a [Found],
    wanted: Option<&str>,
    last_used: Option<&str>,
) -> Option<&'a Found> {
    let wanted = wanted
        .map(|w| w.trim().to_lowercase())
        .filter(|w| !w.is_empty());
    let candidates: Vec<&Found> = players
        .iter()
        .filter(|p| match &wanted {
            None => true,
            Some(w) => {
                let suffix = p.bus_name.strip_prefix(MPRIS_PREFIX).unwrap_or(&p.bus_name);
                // A bus name has no spaces: "quod libet" is `quodlibet`.
                let joined: String = w.split_whitespace().collect();
                let suffix = suffix.to_lowercase();
                // The whole bus name, as a result (and so an undo) names the player.
                p.bus_name.to_lowercase() == *w
                    || suffix.contains(w.as_str())
                    || suffix.contains(joined.as_str())
                    || p.identity.to_lowercase().contains(w.as_str())
            }
        })
        .collect();
    let is_last = |p: &Found| last_used.is_some() && p.owner.as_deref() == last_used;
    let playing: Vec<&Found> = candidates
        .iter()
        .copied()
        .filter(|p| p.status == "Playing")
        .collect();
    playing
        .iter()
        .copied()
        .find(|p| is_last(p))
        .or_else(|| playing.first().copied())
        .or_else(|| candidates.iter().copied().find(|p| is_last(p)))
        .or_else(|| candidates.iter().copied().find(|p| p.status == "Paused"))
        .or_else(|| candidates.first().copied())
}

/// Run `media`.
///
/// Result: `{ok, dry_run, detail, player: "<bus name>", identity, method: "Pause",
/// status_before: "Playing"}`.
///
/// # Errors
///
/// `-32000` when there is no session bus, no (matching) player, or the player refused.
pub async fn run(args: MediaArgs, dry_run: bool) -> Result<Value, ErrorObject> {
    // "volume up" with no player named is the desktop's sound: the default audio sink.
    // Only where that cannot be reached (no PipeWire, no WirePlumber) is a player's own
    // volume changed instead, and the result says why.
    let mut system_unreachable = None;
    if let (Some(change), None) = (args.volume_change()?, &args.player) {
        match crate::volume::level().await {
            Ok(_) => return crate::volume::run(change, dry_run).await,
            Err(why) => system_unreachable = Some(why),
        }
    }
    let result = player_run(args, dry_run).await;
    match (result, system_unreachable) {
        (Ok(mut result), Some(why)) => {
            let detail = result["detail"].as_str().unwrap_or("").to_owned();
            result["detail"] = json!(format!(
                "{detail} (the system volume could not be reached: {why})"
            ));
            Ok(result)
        }
        (Err(mut e), Some(why)) => {
            e.message = format!("{why}; and no player's volume instead: {}", e.message);
            Err(e)
        }
        (result, None) => result,
    }
}

async fn player_run(args: MediaArgs, dry_run: bool) -> Result<Value, ErrorObject> {
    let (conn, _address) = bus::connect()
        .await
        .map_err(|e| plugin_error(e.with_fix()))?;
    let players = list_players(&conn).await?;
    if players.is_empty() {
        return Err(plugin_error(
            "no MPRIS player on the session bus; start one (a music app, a browser playing media, or mpv with its MPRIS plugin, mpv-mpris) and say it again",
        ));
    }
    let last_used = memory().last_used.clone();
    let Some(chosen) = choose(&players, args.player.as_deref(), last_used.as_deref()) else {
        let known: Vec<String> = players
            .iter()
            .map(|p| format!("{} ({})", p.identity, p.bus_name))
            .collect();
        return Err(plugin_error(format!(
            "no MPRIS player matching {:?}; players on the session bus: {}",
            args.player.unwrap_or_default(),
            known.join(", ")
        )));
    };
    let method = args.command.method();
    let described = format!("{} ({})", chosen.identity, chosen.bus_name);
    let mut result = json!({
        "ok": true,
        "dry_run": dry_run,
        "player": chosen.bus_name,
        "identity": chosen.identity,
        "method": method,
        "status_before": chosen.status,
    });
    if dry_run {
        result["detail"] = json!(format!(
            "would call {method} on {described}, which is {}",
            chosen.status
        ));
        return Ok(result);
    }
    let proxy = player_proxy(&conn, &chosen.bus_name)
        .await
        .map_err(plugin_error)?;
    if let Some(owner) = &chosen.owner {
        memory().last_used = Some(owner.clone());
    }
    if args.command.is_volume() {
        return set_volume(&proxy, args.command, args.level, chosen, &described, result).await;
    }
    let call = async {
        match args.command {
            Command::Play => proxy.play().await,
            Command::Pause => proxy.pause().await,
            Command::PlayPause => proxy.play_pause().await,
            Command::Stop => proxy.stop().await,
            Command::Next => proxy.next().await,
            Command::Previous => proxy.previous().await,
            // Handled above.
            _ => Ok(()),
        }
    };
    bounded(PLAYER_CALL, method, call)
        .await
        .map_err(|e| plugin_error(format!("{described} did not accept {e}")))?;
    result["detail"] = json!(format!(
        "called {method} on {described}, which was {}",
        chosen.status
    ));
    Ok(result)
}

/// Change the volume of `chosen` by `command` and read it back.
async fn set_volume(
    proxy: &PlayerProxy<'_>,
    command: Command,
    level: Option<f64>,
    chosen: &Found,
    described: &str,
    mut result: Value,
) -> Result<Value, ErrorObject> {
    let before = bounded(PLAYER_CALL, "Volume", proxy.volume())
        .await
        .map_err(|e| plugin_error(format!("{described} reports no volume: {e}")))?;
    let before = if before.is_finite() {
        before.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let target = match command {
        Command::VolumeUp => (before + VOLUME_STEP).min(1.0),
        Command::VolumeDown => (before - VOLUME_STEP).max(0.0),
        Command::Mute => {
            if before > 0.0 {
                memory().muted.insert(chosen.bus_name.clone(), before);
            }
            0.0
        }
        Command::SetVolume => level.unwrap_or(before).clamp(0.0, 1.0),
        _ => {
            let kept = memory().muted.remove(&chosen.bus_name);
            if before > 0.0 && kept.is_none() {
                before
            } else {
                kept.unwrap_or(0.5)
            }
        }
    };
    let target = (target * 100.0).round() / 100.0;
    bounded(PLAYER_CALL, "Volume", proxy.set_volume(target))
        .await
        .map_err(|e| plugin_error(format!("{described} did not take the volume {target}: {e}")))?;
    let after = bounded(PLAYER_CALL, "Volume", proxy.volume()).await.ok();
    let verified = after.is_some_and(|a| (a - target).abs() < 0.011);
    result["volume_before"] = json!(before);
    result["volume_after"] = json!(after);
    result["verified"] = json!(verified);
    result["detail"] = json!(format!(
        "set the volume of {described} from {:.0}% to {:.0}%{}",
        before * 100.0,
        target * 100.0,
        if verified {
            ", read back"
        } else {
            "; the player reports another volume"
        }
    ));
    Ok(result)
}

/// Every MPRIS player on the bus, sorted by bus name, with its identity and status.
async fn list_players(conn: &Connection) -> Result<Vec<Found>, ErrorObject> {
    let dbus = bounded(PLAYER_CALL, "bus daemon", zbus::fdo::DBusProxy::new(conn))
        .await
        .map_err(plugin_error)?;
    let mut names: Vec<String> = bounded(PLAYER_CALL, "ListNames", dbus.list_names())
        .await
        .map_err(plugin_error)?
        .into_iter()
        .map(|n| n.to_string())
        .filter(|n| n.starts_with(MPRIS_PREFIX))
        .collect();
    names.sort();
    let mut players = Vec::with_capacity(names.len());
    for bus_name in names {
        let suffix = bus_name
            .strip_prefix(MPRIS_PREFIX)
            .unwrap_or(&bus_name)
            .to_owned();
        let status = match player_proxy(conn, &bus_name).await {
            Ok(proxy) => bounded(PLAYER_CALL, "PlaybackStatus", proxy.playback_status())
                .await
                .unwrap_or_else(|e| {
                    tracing::debug!(%bus_name, error = %e, "no PlaybackStatus");
                    "Unknown".to_owned()
                }),
            Err(_) => "Unknown".to_owned(),
        };
        let identity = match root_proxy(conn, &bus_name).await {
            Ok(proxy) => bounded(PLAYER_CALL, "Identity", proxy.identity())
                .await
                .unwrap_or_else(|_| suffix.clone()),
            Err(_) => suffix.clone(),
        };
        let owner = match zbus::names::BusName::try_from(bus_name.as_str()) {
            Ok(name) => bounded(PLAYER_CALL, "GetNameOwner", dbus.get_name_owner(name))
                .await
                .ok()
                .map(|o| o.to_string()),
            Err(_) => None,
        };
        players.push(Found {
            bus_name,
            identity,
            status,
            owner,
        });
    }
    Ok(players)
}

async fn player_proxy<'a>(conn: &Connection, bus_name: &'a str) -> Result<PlayerProxy<'a>, String> {
    let builder = PlayerProxy::builder(conn)
        .destination(bus_name)
        .map_err(|e| e.to_string())?
        .cache_properties(CacheProperties::No);
    bounded(PLAYER_CALL, "Player proxy", builder.build()).await
}

async fn root_proxy<'a>(
    conn: &Connection,
    bus_name: &'a str,
) -> Result<MediaPlayer2Proxy<'a>, String> {
    let builder = MediaPlayer2Proxy::builder(conn)
        .destination(bus_name)
        .map_err(|e| e.to_string())?
        .cache_properties(CacheProperties::No);
    bounded(PLAYER_CALL, "MediaPlayer2 proxy", builder.build()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(name: &str, identity: &str, status: &str) -> Found {
        Found {
            bus_name: format!("{MPRIS_PREFIX}{name}"),
            identity: identity.to_owned(),
            status: status.to_owned(),
            owner: Some(format!(":1.{}", name.len())),
        }
    }

    #[test]
    fn the_playing_player_wins_then_paused_then_first() {
        let players = [
            p("a", "A", "Stopped"),
            p("b", "B", "Paused"),
            p("c", "C", "Playing"),
        ];
        assert_eq!(choose(&players, None, None), Some(&players[2]));
        assert_eq!(choose(&players[..2], None, None), Some(&players[1]));
        assert_eq!(choose(&players[..1], None, None), Some(&players[0]));
        assert_eq!(choose(&[], None, None), None);
        // A result's whole bus name (what an undo sends back) names its player.
        let named = players[0].bus_name.clone();
        assert_eq!(choose(&players, Some(&named), None), Some(&players[0]));
    }

    #[test]
    fn the_player_used_last_wins_over_another_paused_one() {
        let mut players = [
            p("a", "A", "Paused"),
            p("bb", "B", "Paused"),
            p("ccc", "C", "Stopped"),
        ];
        // B (":1.2") was used last: it wins over A, which sorts first.
        assert_eq!(choose(&players, None, Some(":1.2")), Some(&players[1]));
        // A stopped player used last still wins over a paused one.
        assert_eq!(choose(&players, None, Some(":1.3")), Some(&players[2]));
        // A playing player wins over the one used last, unless both play.
        players[0].status = "Playing".into();
        assert_eq!(choose(&players, None, Some(":1.2")), Some(&players[0]));
        players[1].status = "Playing".into();
        assert_eq!(choose(&players, None, Some(":1.2")), Some(&players[1]));
        // A player gone from the bus is forgotten.
        assert_eq!(choose(&players, None, Some(":1.99")), Some(&players[0]));
    }

    #[test]
    fn a_wanted_player_matches_suffix_or_identity_ignoring_case() {
        let players = [
            p("spotify", "Spotify", "Paused"),
            p("vlc", "VLC media player", "Playing"),
            p("mpv.instance42", "mpv", "Stopped"),
        ];
        assert_eq!(choose(&players, Some("SPOT"), None), Some(&players[0]));
        assert_eq!(
            choose(&players, Some("media player"), None),
            Some(&players[1])
        );
        assert_eq!(
            choose(&players, Some("instance42"), None),
            Some(&players[2])
        );
        assert_eq!(choose(&players, Some("rhythmbox"), None), None);
        // A name said in words is a bus name written as one.
        let more = [p("quodlibet", "Music", "Paused")];
        assert_eq!(choose(&more, Some("quod libet"), None), Some(&more[0]));
        // Blank means "any".
        assert_eq!(choose(&players, Some("  "), None), Some(&players[1]));
    }

    #[test]
    fn commands_map_to_mpris_methods() {
        let parsed: MediaArgs =
            serde_json::from_value(json!({"command": "play_pause"})).expect("parses");
        assert_eq!(parsed.command.method(), "PlayPause");
        assert!(serde_json::from_value::<MediaArgs>(json!({"command": "louder"})).is_err());
        let volume: MediaArgs =
            serde_json::from_value(json!({"command": "volume_up"})).expect("parses");
        assert!(volume.command.is_volume());
    }
}
