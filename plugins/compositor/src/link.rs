//! What the IPC clients ([`crate::niri`], [`crate::sway`], [`crate::hyprland`]) share and
//! [`crate::backend`] joins: the state of a client's event connection ([`Link`]), its
//! failures ([`BackendError`]), compositor text made safe to quote ([`clean`]) and a bounded
//! line reader for the line-based wires (niri's JSON lines, Hyprland's events). A leaf: it
//! names no client.

use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

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
        /// `"niri"`, `"sway"` or `"hyprland"`.
        compositor: &'static str,
        /// The socket path.
        socket: String,
        /// Why.
        source: std::io::Error,
    },
    /// The connection broke or the compositor sent something unreadable.
    #[error("{compositor} IPC: {message}")]
    Io {
        /// `"niri"`, `"sway"` or `"hyprland"`.
        compositor: &'static str,
        /// What went wrong.
        message: String,
    },
    /// The compositor refused the request (niri's `{"Err": …}`, sway's `success: false`).
    #[error("{compositor} refused {request}: {message}")]
    Refused {
        /// `"niri"`, `"sway"` or `"hyprland"`.
        compositor: &'static str,
        /// The request as sent.
        request: String,
        /// The compositor's own words.
        message: String,
    },
}

// ---------------------------------------------------------------------------------------------
// Bounded line reading.

pub(crate) enum ReadLine {
    /// One line without its `\n` (a last line without `\n` before EOF counts too).
    Line(Vec<u8>),
    /// The peer closed the connection.
    Eof,
    /// The line grew past the reader's `max`; the connection is no longer usable.
    TooLong,
}

/// Reads `\n`-terminated lines of at most the reader's `max` bytes. Cancel-safe: a partly read line
/// is kept in `self` and completed by the next call.
pub(crate) struct LineReader<R> {
    inner: BufReader<R>,
    partial: Vec<u8>,
    max: usize,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// A reader of lines of at most `max` bytes.
    pub(crate) fn new(read: R, max: usize) -> Self {
        LineReader {
            inner: BufReader::with_capacity(64 * 1024, read),
            partial: Vec::new(),
            max,
        }
    }

    /// The next complete line if it is already buffered (no reading, no waiting).
    pub(crate) fn buffered_line(&mut self) -> Option<ReadLine> {
        let chunk = self.inner.buffer();
        let pos = chunk.iter().position(|&b| b == b'\n')?;
        if self.partial.len() + pos > self.max {
            self.partial = Vec::new();
            return Some(ReadLine::TooLong);
        }
        self.partial.extend_from_slice(&chunk[..pos]);
        self.inner.consume(pos + 1);
        Some(ReadLine::Line(std::mem::take(&mut self.partial)))
    }

    pub(crate) async fn next_line(&mut self) -> std::io::Result<ReadLine> {
        loop {
            let chunk = self.inner.fill_buf().await?;
            if chunk.is_empty() {
                return Ok(if self.partial.is_empty() {
                    ReadLine::Eof
                } else {
                    ReadLine::Line(std::mem::take(&mut self.partial))
                });
            }
            // No await between looking at the chunk and consuming it: cancel-safe.
            if let Some(pos) = chunk.iter().position(|&b| b == b'\n') {
                if self.partial.len() + pos > self.max {
                    self.partial = Vec::new();
                    return Ok(ReadLine::TooLong);
                }
                self.partial.extend_from_slice(&chunk[..pos]);
                self.inner.consume(pos + 1);
                return Ok(ReadLine::Line(std::mem::take(&mut self.partial)));
            }
            let n = chunk.len();
            if self.partial.len() + n > self.max {
                self.partial = Vec::new();
                return Ok(ReadLine::TooLong);
            }
            self.partial.extend_from_slice(chunk);
            self.inner.consume(n);
        }
    }
}
