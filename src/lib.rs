//! The Utter runner: a small, trustworthy supervisor of plugins and the owner of policy.
//!
//! * [`config`]: the runner TOML, its validation, and the embedded default.
//! * [`supervisor`]: one slot per plugin; spawn, handshake, validate capabilities, watch,
//!   restart with backoff, drain.
//! * [`policy`]: provenance, the ops registry, the gates every step passes.
//! * [`pipeline`]: utterance → `router.plan` → policy → `action.invoke`.
//! * [`runner`]: the three together, as `utter say` and `utter daemon` use them.
//!
//! The wire protocol itself lives in the `utter-protocol` crate.

#![warn(missing_docs)]

pub mod config;
pub mod pipeline;
pub mod policy;
pub mod runner;
pub mod supervisor;
