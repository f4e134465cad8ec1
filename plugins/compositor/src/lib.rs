//! `utter-compositor`: desktop context and compositor actions on niri, sway and Hyprland (kind
//! `bundle`: `context.*` and `action.*` in one process, PROTOCOL.md §8).
//!
//! The compositor is found from the environment ([`backend::Detected::from_env`]:
//! `$NIRI_SOCKET`, then `$HYPRLAND_INSTANCE_SIGNATURE`, then `$SWAYSOCK`, then `$I3SOCK`). Its client keeps a [`model::Snapshot`]
//! fresh from the compositor's event stream, so reading the context costs no round trip and
//! every action's effect is checked against the snapshot that follows it.
//!
//! Methods:
//!
//! * `context.snapshot {sources?, refresh?}` → the cached [`model::Snapshot`] (side-effect
//!   free); with `refresh: true` the state is read from the compositor first (sway sends no
//!   event when a floating window moves; the runner asks so before it checks a click
//!   against the focused window's geometry).
//! * `action.capabilities {}` → `{ops: [{op, side_effect, needs_confirm, args_schema}],
//!   niri_commands: [{name, doc, params, options, sway, sway_hint, hyprland,
//!   hyprland_hint}]}`.
//! * `action.invoke {op, args, provenance, dry_run?}` with the ops
//!   - `niri {command, args?, options?}`: one action of the table
//!     `data/compositor-actions.toml` ([`table`]), named as `niri msg action` names it,
//!     sent to niri as its IPC `Action` JSON, to sway as the matching command, to Hyprland
//!     as the matching dispatcher (grim takes screenshots on both). Among them
//!     `spawn` (args: the program and its arguments), `spawn-sh` (args: one shell line),
//!     `fullscreen-window` with the option `state: "on" | "off" | "toggle"`, and
//!     `move-window-to-floating` / `move-window-to-tiling`;
//!   - `focus_app {app, window_id?}`: focus a window of the app ([`apps`] matching, the most
//!     recently focused first: by the focus changes this plugin saw, then by niri's
//!     `focus_timestamp`, so a restart does not lose the order);
//!   - `ensure_app {app, argv?, desktop_id?, wm_class?}`: focus one, else start the app
//!     through the compositor (niri `Spawn`, sway `exec`, Hyprland's `exec` dispatcher) and
//!     wait up to 5 s for its
//!     focused window;
//!   - `close_app {app, window_id?}` (needs confirmation): close one window of the app.
//!
//!   Every result is `{ok, detail, verified, sent, compositor, dry_run, window?}`: `sent`
//!   is the niri Action object, the sway command or the Hyprland command string (`null`
//!   when nothing needed
//!   sending), `verified` says whether the snapshot showed the effect in time (`ok: true,
//!   verified: false` when it did not, or when the compositor does not report the state).
//!   A dry run sends nothing, says what it would send, and has no `verified`. niri's
//!   `screenshot-screen` and `screenshot-window` are verified by niri's own
//!   `ScreenshotCaptured` report, and their result has the `path` it saved (`null`: the
//!   clipboard only).
//! * `plugin.health` → `ok` with "connected to sway 1.7 at …", or `degraded` saying why not
//!   (also while the event connection is lost: "lost the connection to sway at …;
//!   reconnecting"). While it is lost, `context.snapshot` says `compositor.connected: false`
//!   for a short grace and then fails with `-32000`, and actions fail at once.
//!
//! Errors: `-32601` an unknown op or method; `-32602` bad arguments (the message names the
//! command and its parameters, or close names for an unknown command); `-32000` no
//! compositor (the message names the variables looked at), a command the running compositor
//! cannot do ("sway cannot do maximize-column (it exists only in niri); try
//! fullscreen-window", "Hyprland has no dispatcher doing toggle-overview", with
//! `data.supported` listing what that compositor can do), a monitor action
//! with no monitor in its direction ("there is no monitor to the right of HEADLESS-1"), the
//! compositor's refusal in its own words, no window of the app.
//!
//! Module map: [`model`] is the snapshot shape, [`backend`] detects the compositor and
//! wraps the three IPC clients [`niri`], [`sway`] and [`hyprland`], [`table`] is the action
//! table, [`screenshot`] takes screenshots with grim,
//! [`apps`] matches windows to apps, [`service`] serves the methods.

pub mod apps;
pub mod backend;
pub mod hyprland;
pub mod link;
pub mod model;
pub mod niri;
pub mod screenshot;
pub mod service;
pub mod sway;
pub mod table;

use std::process::ExitCode;
use utter_protocol::plugin;

const MANIFEST: &str = include_str!("../utter-plugin.toml");

/// Serve the compositor plugin on stdin/stdout until the runner closes stdin.
///
/// `log_to_stderr` installs a stderr logger (level from `UTTER_LOG`, default `info`); pass
/// `false` when the caller already installed one. The plugin starts and answers the
/// handshake whether or not a compositor is reachable; it connects in the background and
/// retries on demand.
pub async fn run(log_to_stderr: bool) -> ExitCode {
    if log_to_stderr {
        utter_protocol::plugin::init_stderr_logging();
    }
    let service = service::Service::new(backend::Detected::from_env());
    tokio::spawn({
        let service = service.clone();
        async move { service.warm_up().await }
    });
    plugin::run_stdio(MANIFEST, service).await
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_manifest_parses() {
        let m =
            utter_protocol::manifest::Manifest::from_toml_str(super::MANIFEST, "utter-plugin.toml")
                .expect("valid manifest");
        assert_eq!(m.name, "compositor");
    }
}
