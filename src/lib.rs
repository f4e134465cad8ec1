//! The `utter` crate: the runner's doors and its desktop side, on top of `utter-core`.
//!
//! The core (`utter-core`) decides: config, policy and the one gate, the pipeline, the
//! supervisor, host callbacks, handles, streams, confirmations, audit, events, push-to-talk
//! and the voice loop. This crate faces the world:
//!
//! * [`socket`]: the client socket (`$XDG_RUNTIME_DIR/utter/runner.sock`), default-deny.
//! * [`dbus`]: the D-Bus object `dev.utter.Runner1`, its signals and the confirmation
//!   notifications; [`dbus::session_address`] for the portal trigger.
//! * [`systemd`]: readiness and status notification for the user unit.
//! * [`triggers`]: push-to-talk triggers that need I/O (the GlobalShortcuts portal, evdev).
//! * [`daemon`]: `utter daemon`, the session service with all of the above.
//! * [`logs`]: the daemon's log lines as data for the clients that follow them.
//!
//! The client of the socket is the `utter-ipc` crate.
//!
//! The CLI (`src/main.rs`, one file per subcommand under `src/cli/`) and the installer live
//! in the binary, not here. The wire protocol is the `utter-protocol` crate.

#![warn(missing_docs)]

pub mod daemon;
pub mod dbus;
pub mod logs;
pub mod socket;
pub mod systemd;
pub mod triggers;
