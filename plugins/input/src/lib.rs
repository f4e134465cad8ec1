//! `utter-input`: key chords, keystroke typing, scrolling and pointer clicks through one
//! virtual keyboard and one virtual pointer that the plugin creates when it starts and keeps
//! until it exits (kind `action`, PROTOCOL.md §8).
//!
//! # Backends
//!
//! * **uinput** ([`uinput`]): a kernel virtual keyboard with wheels and buttons on
//!   `/dev/uinput`, used for keys where the device opens (any compositor, GNOME and KDE
//!   included). The compositor applies its own keymap to what uinput sends, so the key for
//!   each keysym comes from the person's layout ([`layout`]: libxkbcommon loaded at run time,
//!   the layout named by `UTTER_XKB_LAYOUT`/`UTTER_XKB_VARIANT` or `XKB_DEFAULT_LAYOUT`/
//!   `XKB_DEFAULT_VARIANT`, else `us`). It scrolls and clicks where the pointer is, but cannot
//!   put the pointer at a point.
//! * **Wayland** ([`wayland`]): `zwp_virtual_keyboard_v1` and `zwlr_virtual_pointer_v1` on
//!   `$WAYLAND_DISPLAY` (sway and other wlroots compositors, niri), used for keys where
//!   uinput is not available and always for the pointer when offered. The keyboard uploads a
//!   keymap of its own ([`keymap`]): one key per keysym needed, so what is typed is what was
//!   asked whatever the person's layout.
//! * **libei** ([`eis`], [`portal`]): a sender context on the compositor's EIS server, the
//!   way GNOME (46+) and KDE Plasma (6.1+) take input. The socket comes from the
//!   RemoteDesktop portal's `ConnectToEIS` (the person allows it once in the portal's dialog;
//!   the restore token is kept in `$XDG_STATE_HOME/utter/remote-desktop-token`), or from
//!   `LIBEI_SOCKET`. Keys are read through the keymap the server sends. Used when neither
//!   uinput nor a Wayland virtual keyboard is there, or when asked for.
//! * `UTTER_INPUT_BACKEND`: `auto` (the default: uinput, else Wayland, else libei),
//!   `uinput`, `wayland` (uinput stays closed), or `eis` (also `libei`, `portal`: libei
//!   alone). A failed libei connection is tried again at a call 10 s later at the soonest;
//!   after the person declined, not until the plugin restarts.
//!
//! `plugin.health` (and so `utter status`) names the backends in use, the layout uinput
//! types under, and why each other backend is not in use.
//!
//! # Methods
//!
//! * `action.capabilities {}` → `{ops: [{op, side_effect, needs_confirm, args_schema}]}`.
//! * `action.invoke {op, args, provenance, dry_run?, context?}` with the ops
//!   - `key {chord, repeat?, app?, window_id?}`: X keysym names joined by `+`, up to four
//!     modifiers (`ctrl`, `shift`, `alt`, `super`) and one key ([`keys::parse_chord`]):
//!     `Return`, `BackSpace`, `Tab`, `F5`, `ctrl+shift+t`, `super+Left`; pressed `repeat`
//!     times (1 to [`service::MAX_REPEAT`]). Every press has its release, modifiers
//!     included.
//!   - `type_keys {text, app?, window_id?}`: 1 to [`keys::MAX_TYPED`] characters typed as
//!     keystrokes (`\n` is Return, `\t` Tab; other control characters are refused).
//!   - `scroll {direction, amount?, app?, window_id?}`: `up`, `down`, `left`, `right`, in
//!     wheel steps (default [`service::DEFAULT_SCROLL`], at most [`service::MAX_SCROLL`]),
//!     over the focused window when the context gives its `rect`.
//!   - `click_point {x, y, button?, count?}` and `pointer_move {x, y}`: a point of the
//!     output layout in logical pixels (the context's `outputs` give its extent); `button`
//!     `left` (default), `right` or `middle`; `count` 1 to 3.
//!
//!   `app` first focuses that application through the runner (`host.action focus_app`,
//!   so the runner's policy sees it) and sends nothing unless the compositor shows it
//!   focused; `window_id` alone must be the focused window. Every result says `path`
//!   (`keyboard`, `pointer`), `backend`, and `verified: false` with a `detail` saying that
//!   the compositor took the events but their effect is not read back here (the `a11y`
//!   plugin reads typed text back when it falls back to `type_keys`).
//! * `plugin.health` → `ok` naming the backends in use, or `degraded` with why none is.
//!
//! Errors: `-32602` bad arguments (unknown key names and the bounds are named), `-32601` an
//! unknown op or method, `-32000` no device or a broken compositor connection.
//!
//! Module map: [`keys`] names and chords, [`keymap`] the uploaded keymaps, [`wayland`] the
//! protocol client, [`layout`] and [`uinput`] the kernel device, [`eis`] and [`portal`]
//! libei, [`device`] the thread that owns the devices, [`service`] the methods.

pub mod device;
pub mod eis;
pub mod keymap;
/// Key names and chords (the `utter-keys` crate, shared with the rules router).
pub use utter_keys as keys;
pub mod layout;
pub mod portal;
pub mod service;
pub mod uinput;
pub mod wayland;

use std::process::ExitCode;
use utter_protocol::plugin;

const MANIFEST: &str = include_str!("../utter-plugin.toml");

/// Serve the input plugin on the transport the runner chose until it closes it.
///
/// `log_to_stderr` installs a stderr logger (level from `UTTER_LOG`, default `info`). The
/// devices are created at once when a compositor is reachable, and on the first call after
/// one becomes reachable otherwise.
pub async fn run(log_to_stderr: bool) -> ExitCode {
    if log_to_stderr {
        utter_protocol::plugin::init_stderr_logging();
    }
    plugin::run(MANIFEST, service::Service::new()).await
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_manifest_parses() {
        let m =
            utter_protocol::manifest::Manifest::from_toml_str(super::MANIFEST, "utter-plugin.toml")
                .expect("valid manifest");
        assert_eq!(m.name, "input");
    }
}
