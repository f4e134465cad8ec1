//! The Utter runner: a small, trustworthy supervisor of plugins and the owner of policy.
//!
//! * [`config`]: the runner TOML, its validation, and the embedded default.
//! * [`supervisor`]: one slot per plugin; spawn, handshake, validate capabilities, watch,
//!   restart with backoff, drain.
//! * [`policy`]: provenance, the ops registry, the gates every step passes.
//! * [`pipeline`]: utterance → `router.plan` → (a chooser picks a candidate) → gates →
//!   confirmation and re-validation → `action.invoke`.
//! * [`confirm`]: argument-bearing confirmations, bound to a digest, and the doors that
//!   answer them.
//! * [`audio`]: the microphone: PipeWire sources, push-to-talk capture, 16 kHz resampling
//!   and the silence gate.
//! * [`audit`]: the bounded trail of gate decisions.
//! * [`events`]: what clients are told (plugin states, confirmations, finished commands).
//! * [`ptt`]: push-to-talk, one press/release state machine fed by the portal, the socket,
//!   D-Bus and evdev.
//! * [`runner`]: all of it as one service, as `utter say` and `utter daemon` use it, including
//!   the plugins' `host.*` callbacks.
//!
//! * [`daemon`]: `utter daemon`, the session service with its doors: [`socket`] (the client
//!   socket), [`dbus`] (the D-Bus object) and [`systemd`] (readiness notification).
//! * [`client`]: the CLI's client of the socket (`utter status`, `say`, `confirm`, `events`, ...).
//! * [`install`]: `utter install --user` / `utter uninstall --user`, the systemd user unit
//!   and D-Bus activation file in place.
//!
//! The wire protocol itself lives in the `utter-protocol` crate.

#![warn(missing_docs)]

pub mod audio;
pub mod audit;
pub mod client;
pub mod config;
pub mod confirm;
pub mod daemon;
pub mod dbus;
pub mod events;
pub mod handles;
pub mod install;
pub mod pipeline;
pub mod policy;
pub mod ptt;
pub mod runner;
pub mod socket;
pub mod streams;
pub mod supervisor;
pub mod systemd;
pub mod transport;
pub mod voice;
