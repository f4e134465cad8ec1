//! The Utter plugin protocol (see `protocol/PROTOCOL.md`).
//!
//! This crate owns the wire, and nothing else: no supervisor, no policy.
//!
//! * [`frame`]: `Content-Length` framing (the LSP base protocol) as a tokio codec, with capped
//!   headers and bodies.
//! * [`message`]: JSON-RPC 2.0 requests, notifications and responses; ids echoed exactly.
//! * [`error`]: the error codes (`-32700` … `-32007`) and the error object.
//! * [`connection`]: a bidirectional JSON-RPC endpoint over any `AsyncRead + AsyncWrite`,
//!   with timeouts, `$/cancel` and epoch-prefixed ids.
//! * [`handshake`]: `protocol.hello`, `plugin.describe`, `plugin.health` and version
//!   negotiation.
//! * [`host`]: the runner's side of that handshake over a [`Connection`], with typed
//!   permanent/retryable failures.
//! * `testkit` (feature `testkit`): run a plugin process for tests, and
//!   `testkit::conformance`, a checker of the protocol's rules for plugin authors.
//! * [`capability`]: capability names and the registry (`capabilities.json`).
//! * [`manifest`]: `utter-plugin.toml`, validated by `plugin.schema.json`.
//! * [`plugin`]: serve a Rust plugin with one call.
//! * [`ring`]: `memfd.ring`, a shared-memory single-producer/single-consumer frame ring.
//! * [`fd`]: receive descriptors (`fd.pass`) on a socket.
//! * [`senders`]: which processes write to a unix socket connection (`SCM_CREDENTIALS`).
//! * [`stream`]: the plugin side of streams (frame numbering, credit, stop).
//! * [`provenance`]: where a value came from; only `user` is trusted.
//! * [`digest`]: SHA-256 as lowercase hex, for handles and step digests.
//!
//! Compatibility promise: within protocol major 1, fields, methods and error codes are added,
//! never renamed or removed; receivers ignore fields they do not know.

#![warn(missing_docs)]

pub mod capability;
pub mod connection;
pub mod digest;
pub mod error;
pub mod fd;
pub mod files;
pub mod frame;
pub mod handshake;
pub mod host;
pub mod manifest;
pub mod message;
pub mod plugin;
pub mod provenance;
pub mod ring;
pub mod senders;
pub mod stream;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod text;
pub mod throttle;

pub use connection::{
    CloseReason, Connection, ConnectionOptions, Incoming, QueueBudget, TrySendError,
};
pub use error::{ErrorCode, ErrorObject};
pub use message::{Message, Notification, Request, RequestId, Response};
pub use provenance::Provenance;
pub use serde_json;
