//! The `media` op: play, pause, skip on an MPRIS player over the session bus.
//!
//! MPRIS D-Bus Interface Specification 2.2: every player owns a bus name
//! `org.mpris.MediaPlayer2.<name>` (possibly `.instance<pid>`) and serves
//! `/org/mpris/MediaPlayer2` with `org.mpris.MediaPlayer2` (`Identity`) and
//! `org.mpris.MediaPlayer2.Player` (`Play`, `Pause`, `PlayPause`, `Stop`, `Next`, `Previous`,
//! `PlaybackStatus`).
//!
//! Which player: with `player`, the ones whose bus-name suffix or `Identity` contains it
//! (ignoring case); otherwise all. Among those, the first `Playing`, else the first
//! `Paused`, else the first, in bus-name order.

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
}

/// The JSON Schema of [`MediaArgs`].
pub fn args_schema() -> Value {
    json!({
        "type": "object",
        "required": ["command"],
        "additionalProperties": false,
        "properties": {
            "command": {"enum": ["play", "pause", "play_pause", "stop", "next", "previous"]},
            "player": {
                "type": "string",
                "description": "Pick the player whose bus name or Identity contains this (case-insensitive); default: the one playing."
            }
        }
    })
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
}

/// Choose a player; see the module documentation.
pub fn choose<'a>(players: &'a [Found], wanted: Option<&str>) -> Option<&'a Found> {
    let wanted = wanted
        .map(|w| w.trim().to_lowercase())
        .filter(|w| !w.is_empty());
    let candidates: Vec<&Found> = players
        .iter()
        .filter(|p| match &wanted {
            None => true,
            Some(w) => {
                let suffix = p.bus_name.strip_prefix(MPRIS_PREFIX).unwrap_or(&p.bus_name);
                suffix.to_lowercase().contains(w.as_str())
                    || p.identity.to_lowercase().contains(w.as_str())
            }
        })
        .collect();
    candidates
        .iter()
        .find(|p| p.status == "Playing")
        .or_else(|| candidates.iter().find(|p| p.status == "Paused"))
        .or_else(|| candidates.first())
        .copied()
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
    let (conn, _address) = bus::connect()
        .await
        .map_err(|e| plugin_error(e.to_string()))?;
    let players = list_players(&conn).await?;
    if players.is_empty() {
        return Err(plugin_error("no MPRIS player on the session bus"));
    }
    let Some(chosen) = choose(&players, args.player.as_deref()) else {
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
    let call = async {
        match args.command {
            Command::Play => proxy.play().await,
            Command::Pause => proxy.pause().await,
            Command::PlayPause => proxy.play_pause().await,
            Command::Stop => proxy.stop().await,
            Command::Next => proxy.next().await,
            Command::Previous => proxy.previous().await,
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
        players.push(Found {
            bus_name,
            identity,
            status,
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
        }
    }

    #[test]
    fn the_playing_player_wins_then_paused_then_first() {
        let players = [
            p("a", "A", "Stopped"),
            p("b", "B", "Paused"),
            p("c", "C", "Playing"),
        ];
        assert_eq!(choose(&players, None), Some(&players[2]));
        assert_eq!(choose(&players[..2], None), Some(&players[1]));
        assert_eq!(choose(&players[..1], None), Some(&players[0]));
        assert_eq!(choose(&[], None), None);
    }

    #[test]
    fn a_wanted_player_matches_suffix_or_identity_ignoring_case() {
        let players = [
            p("spotify", "Spotify", "Paused"),
            p("vlc", "VLC media player", "Playing"),
            p("mpv.instance42", "mpv", "Stopped"),
        ];
        assert_eq!(choose(&players, Some("SPOT")), Some(&players[0]));
        assert_eq!(choose(&players, Some("media player")), Some(&players[1]));
        assert_eq!(choose(&players, Some("instance42")), Some(&players[2]));
        assert_eq!(choose(&players, Some("rhythmbox")), None);
        // Blank means "any".
        assert_eq!(choose(&players, Some("  ")), Some(&players[1]));
    }

    #[test]
    fn commands_map_to_mpris_methods() {
        let parsed: MediaArgs =
            serde_json::from_value(json!({"command": "play_pause"})).expect("parses");
        assert_eq!(parsed.command.method(), "PlayPause");
        assert!(serde_json::from_value::<MediaArgs>(json!({"command": "louder"})).is_err());
    }
}
