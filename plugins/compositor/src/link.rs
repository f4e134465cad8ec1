//! What both IPC clients ([`crate::niri`], [`crate::sway`]) share and [`crate::backend`]
//! joins: the state of a client's event connection ([`Link`]), its failures
//! ([`BackendError`]) and compositor text made safe to quote ([`clean`]). A leaf: it names
//! neither client.

use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The longest piece of compositor text a log line quotes, in characters.
pub const LOG_CHARS: usize = 200;

/// Compositor text made safe for a log line or a message
/// ([`utter_protocol::text::escape_unprintable`]): at most [`LOG_CHARS`] characters of it,
/// and `…` when something was cut off.
pub fn clean(text: &str) -> String {
    let (mut out, left_out) = utter_protocol::text::escape_unprintable(text, LOG_CHARS);
    if left_out > 0 {
        out.push('…');
    }
    out
}

/// The state of a client's event connection, as the client last saw it.
#[derive(Debug, Clone)]
pub struct LinkState {
    /// Whether the event connection is up.
    pub connected: bool,
    /// Since when `connected` has held.
    pub since: Instant,
    /// Why the connection was lost (while it is down).
    pub reason: Option<String>,
}

/// A client's [`LinkState`], shared between its background tasks and its readers.
#[derive(Debug, Clone)]
pub struct Link(Arc<Mutex<LinkState>>);

impl Default for Link {
    fn default() -> Self {
        Link(Arc::new(Mutex::new(LinkState {
            connected: true,
            since: Instant::now(),
            reason: None,
        })))
    }
}

impl Link {
    /// The current state.
    pub fn get(&self) -> LinkState {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The event connection is (again) up.
    pub fn up(&self) {
        let mut state = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if !state.connected {
            *state = LinkState {
                connected: true,
                since: Instant::now(),
                reason: None,
            };
        }
    }

    /// The event connection broke, for `reason`.
    pub fn down(&self, reason: &str) {
        let mut state = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if state.connected {
            *state = LinkState {
                connected: false,
                since: Instant::now(),
                reason: Some(clean(reason)),
            };
        }
    }
}

/// A compositor IPC failure.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The socket could not be reached.
    #[error("cannot connect to {compositor} at {socket}: {source}")]
    Connect {
        /// `"niri"` or `"sway"`.
        compositor: &'static str,
        /// The socket path.
        socket: String,
        /// Why.
        source: std::io::Error,
    },
    /// The connection broke or the compositor sent something unreadable.
    #[error("{compositor} IPC: {message}")]
    Io {
        /// `"niri"` or `"sway"`.
        compositor: &'static str,
        /// What went wrong.
        message: String,
    },
    /// The compositor refused the request (niri's `{"Err": …}`, sway's `success: false`).
    #[error("{compositor} refused {request}: {message}")]
    Refused {
        /// `"niri"` or `"sway"`.
        compositor: &'static str,
        /// The request as sent.
        request: String,
        /// The compositor's own words.
        message: String,
    },
}
