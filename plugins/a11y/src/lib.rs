//! `utter-a11y`: acting inside applications through accessibility (AT-SPI), with every effect
//! read back where accessibility can show it (kind `bundle`: `perception.*` and `action.*` in
//! one process, PROTOCOL.md §8).
//!
//! # Session accessibility
//!
//! At start and before every call the plugin makes sure `org.a11y.Status.IsEnabled` is true
//! on the session bus (`$DBUS_SESSION_BUS_ADDRESS`), setting it when it is not: Chromium and
//! Electron applications build their accessibility tree only then. GTK and Qt applications
//! expose theirs whenever the accessibility bus runs (GTK 3 through the ATK bridge; an
//! application started with `NO_AT_BRIDGE=1` exposes nothing). Firefox older than version 113
//! on Wayland may need `MOZ_ACCESSIBILITY_ATK2=1` in its environment to expose its tree; the
//! plugin cannot set it for an application that already runs.
//!
//! # The focused application
//!
//! The runner sends the desktop context with each `action.invoke` as `context` (untrusted;
//! `perception.a11y` takes the same optional `context`). With a context, the application is
//! the one whose connection to the accessibility bus belongs to the focused window's `pid`
//! (`GetConnectionUnixProcessID` on the accessibility bus), or to a process that pid started;
//! no other: an application's own claim to be active or focused is not believed, since a
//! background application could make it and receive what the person types. When the
//! focused window has no accessibility connection, `type_text` types keystrokes into the
//! focused window instead, and `click_element` says so. Only without a context (no
//! compositor plugin runs) is the first application with an `ACTIVE` window taken, else
//! the first with a `FOCUSED` accessible. The result's `app` says which rule found it
//! (`found_by`).
//!
//! # Methods
//!
//! * `perception.a11y {max_depth?, max_nodes?, context?}` → `{app: {name, bus_name, pid,
//!   found_by}, nodes: [{id, role, name, states, actions, parent}], truncated, provenance:
//!   "a11y"}`: the focused application's tree breadth first, within depth 12, 2000 nodes and
//!   500 ms by default (`truncated` says a bound cut it). Side-effect free. Every name is
//!   untrusted.
//! * `action.capabilities {}` → `{ops: [{op, side_effect, needs_confirm, args_schema}]}`.
//! * `action.invoke {op, args, provenance, dry_run?, context?}` with the ops
//!   - `type_text {text, app?, window_id?}`: inserts `text` (1 to 10 000 characters, no NUL) at the
//!     caret of the focused editable text field through `EditableText`, then reads the field
//!     back through `Text` → `{ok, verified, path: "a11y", detail, app, inserted_at,
//!     length}`. It never replaces what the field held. `app`, when given, must name the
//!     focused application (its accessible name or the focused window's `app_id`), and
//!     `window_id` the focused window.
//!     Text over a selection replaces it (`replaced` counts the characters). Where
//!     accessibility reaches no focused field (no accessibility bus, no focused application
//!     on it, no editable field: a terminal, a game) the text is typed as keystrokes
//!     through the runner's gate instead (`host.action type_keys`, the input plugin) →
//!     `{ok, verified: false, path: "keyboard", backend, fallback_reason, detail}`; a dry run
//!     then fails with `-32000` and the reason ([`service::NO_TEXT_FIELD`]).
//!   - `click_element {description}`: the person's words ("the blue button") choose one of
//!     the focused application's enabled push buttons, toggle buttons, links, menu items,
//!     check boxes and radio buttons that have an action ([`matching`]); exactly one clear
//!     match is pressed with its first action → `{ok, path: "a11y", clicked: {role, name},
//!     verified?, detail, app, provenance: "a11y"}` (`verified` only for checkable elements,
//!     whose state shows the effect). No match is `-32000` naming up to five elements there
//!     are (`data.nearby`; the message says that setting `UTTER_GROUNDING_URL` enables
//!     screen grounding). Several equally good matches go to the runner's chooser
//!     (`host.choose`, ids `e<index>` with `"<role> \"<name>\""` summaries): the element held
//!     under the id it picks is pressed and the result carries `chosen_by {chooser,
//!     choice_id, tied}`; without a chooser, or when it answers no offered id, the tie is
//!     `-32000` naming them (`data.matches`) so the person can say which. Names from the
//!     tree only select; nothing of them becomes an argument.
//!
//!     **T3 screen grounding** ([`grounding`]): when nothing matches and
//!     `UTTER_GROUNDING_URL` names an OpenAI-compatible chat-completions endpoint the
//!     person runs locally (e.g. `http://127.0.0.1:8080/v1/chat/completions` serving
//!     UI-TARS or another vision model; set it in `[[plugin]] env` or the runner's
//!     environment), the plugin takes a PNG of the focused window with `grim -g "X,Y WxH" -`
//!     (the window's `rect` from the context, at most 32 MiB), sends it with the quoted
//!     description (`UTTER_GROUNDING_MODEL`, default `ui-tars`; temperature 0; within
//!     `UTTER_GROUNDING_TIMEOUT_MS`, default 20 000) and asks for one point, `{"x", "y",
//!     "confidence"}` in pixels of the image. The first JSON object of the answer with
//!     numeric `x` and `y` counts, else a UI-TARS tuple `click(start_box='(x,y)')` (or a box,
//!     at its centre; without confidence) ([`grounding::parse_answer`]). The point is scaled
//!     from image to layout pixels (grim scales on HiDPI outputs) and clicked through the
//!     runner's gate (`host.action click_point`, the input plugin) → `{ok, path: "screen",
//!     verified: false, point: {x, y}, image: {width, height}, image_point, confidence,
//!     detail, confirmed_by, provenance: "screen"}`. The runner asks the person before every
//!     such click, whatever the model's confidence, naming the window it lands in, and
//!     refuses it when another window lies over the point or the window moved while asking
//!     (PROTOCOL.md §9.8); a refusal is `-32003`. The model's
//!     answer is untrusted: it only selects a point inside the focused window's screenshot;
//!     a point outside it, or no point, is `-32000` quoting what it said (escaped, cut to 200
//!     characters), and nothing is clicked. Limits: plain http only (no TLS; an `https://`
//!     URL is refused) to this machine only (loopback or `localhost`), no proxy, no redirects; `grim` takes the screenshot (wlr-screencopy:
//!     sway, other wlroots compositors, niri), and the context must give the focused
//!     window's `rect` (sway; niri 25.08 and later; otherwise grounding says so); the
//!     runner's `rpc_timeout_ms` bounds the whole step, so a slow model needs it raised too.
//!     A dry run takes the screenshot and asks the model, but clicks nothing (`would_click`).
//!
//!   A dry run finds the target and says what would be done (`would_click`, `field`)
//!   without doing it.
//! * `plugin.health` → `ok` ("accessibility on; a11y bus at … with N application(s)") or
//!   `degraded` with the reason the accessibility bus cannot be used.
//!
//! Errors: `-32602` bad arguments (the message names the bound), `-32601` an unknown op or
//! method, `-32000` no accessibility bus, no focused application, no field or element (or
//! screen grounding could not run or named no point), `-32003` the runner refused a
//! screen-grounded click (the person declined it, or it would not land in the focused
//! window).
//!
//! Module map: [`tree`] is the bus and the bounded walk, [`matching`] chooses an element for
//! a description, [`grounding`] finds one on a screenshot (T3), [`service`] serves the
//! methods.

pub mod grounding;
pub mod matching;
pub mod service;
pub mod tree;

use std::process::ExitCode;
use utter_protocol::plugin;

const MANIFEST: &str = include_str!("../utter-plugin.toml");

/// Serve the accessibility plugin on the transport the runner chose until it closes it.
///
/// `log_to_stderr` installs a stderr logger (level from `UTTER_LOG`, default `info`). The
/// plugin answers the handshake whether or not an accessibility bus is reachable; it
/// connects on demand.
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
        assert_eq!(m.name, "a11y");
    }
}
