//! The D-Bus object `dev.utter.Runner1` on the session bus (stub; the session service work
//! fills it in).

use std::sync::Arc;

use crate::runner::Runner;

/// A served D-Bus object.
pub struct Bus;

impl Bus {
    /// Release the name and close the connection.
    pub async fn close(self) {}
}

/// Serve the object, then request the name. Without a session bus: one warning, `None`.
pub async fn serve(_runner: Arc<Runner>) -> Option<Bus> {
    None
}
