//! The D-Bus side of the same service (see the `utter` crate's `dbus` module for its
//! members): a well-known name on the session bus, one object, one versioned interface.

/// The well-known bus name (activatable through `dev.utter.Runner1.service`).
pub const BUS_NAME: &str = "dev.utter.Runner1";
/// The object path.
pub const OBJECT_PATH: &str = "/dev/utter/Runner1";
/// The interface; a `2` would be a new interface beside it, not a change of this one.
pub const INTERFACE: &str = "dev.utter.Runner1";
