//! The Utter runner core: everything that decides, and nothing that faces the desktop.
//!
//! The core cannot name a door: it has no dependency on D-Bus, the portal, evdev or
//! PipeWire, and the doors (the client socket, the D-Bus object, notifications, systemd,
//! the push-to-talk triggers) live in the `utter` crate on top of it
//! (`ARCHITECTURE.md`).
//!
//! * [`config`]: the runner TOML, its validation (file:line: key) and the embedded default.
//! * [`models`]: the catalog of installable speech models (`data/models.toml`) and what is
//!   installed of them.
//! * [`paths`]: the one place that reads the XDG base directories; private directories,
//!   atomic writes.
//! * [`sandbox`]: the bubblewrap sandbox of each plugin under `[security] enforce`, and the
//!   report of what it enforces.
//! * [`supervisor`] and [`transport`]: one slot per plugin; spawn, handshake, validate
//!   capabilities, watch, restart with backoff, drain; stdio, `connect` and `listen`.
//!   [`groups`]: the markers that let a runner stop what a killed runner's plugins left.
//! * [`policy`]: provenance, the ops registry and the policy half of the gate; [`ops`]: the
//!   built-in ops by name.
//! * [`pipeline`]: utterance → `router.plan` → (a chooser picks a candidate) → **the gate**
//!   (provenance → enabled → URL scheme → args schema → confirmation → re-validation →
//!   audit) → the plugin. Every acting path passes it: plan steps, `host.action`,
//!   `runner.invoke`.
//! * [`handles`] and [`streams`]: the data plane (content-addressed blobs, stream relay).
//! * [`confirm`]: argument-bearing confirmations, bound to a digest.
//! * [`context`]: the one reader of the desktop context (`context.snapshot`).
//! * [`audit`]: the bounded trail of gate decisions.
//! * [`lockfile`]: the install lockfile `utter doctor` compares the plugins against.
//! * [`events`]: what clients are told.
//! * [`ptt`]: the push-to-talk state machine every trigger feeds.
//! * [`runner`]: all of it as one service, with its parts [`runner::host`] (the plugins'
//!   `host.*` callbacks and the handle methods of every scope), [`runner::invoke`] (a
//!   client's `runner.invoke`, through the gate) and [`runner::voice`] (push-to-talk → the
//!   capture plugin → the stt plugin → the pipeline).
//! * [`params`]: reading named JSON-RPC params with one wording of errors.
//! * [`dictation`]: the mode in which the voice loop types what it hears.
//! * [`history`] and [`undo`]: the journal of commands that acted, and the inverse steps an
//!   "undo that" builds from it with what the action plugins declare.

#![warn(missing_docs)]

pub mod audit;
pub mod confirm;
pub mod context;
pub mod dictation;
pub mod events;
pub mod groups;
pub mod handles;
pub mod history;
pub mod lockfile;
pub mod params;
pub mod pipeline;
pub mod policy;
pub mod ptt;
pub mod rate;
pub mod runner;
pub mod sandbox;
pub mod streams;
pub mod supervisor;
pub mod transport;
pub mod undo;

pub use runner::{Runner, VERSION};

// The config and the files around it are their own crate (`utter-config`), which the
// settings app uses without the core; these names keep `utter_core::config::Config` and the
// core's own `crate::paths` paths.
pub use utter_config as config;
pub use utter_config::{models, ops, paths, text_style};
