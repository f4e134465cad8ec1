//! Events the runner publishes to its clients (the socket's event subscription, D-Bus
//! signals and properties).
//!
//! Subscribers first get a full status snapshot, then these changes. Delivery is bounded:
//! a subscriber that falls too far behind is dropped instead of growing memory.

pub use utter_ipc::event::Event;
pub use utter_ipc::status::ServiceState;
