//! Streams on the plugin side (PROTOCOL.md §10.3): number frames, honour the runner's credit
//! window, and notice `stream.stop`.
//!
//! The runner opens a stream with a request `stream.subscribe {stream_id, method, params,
//! mode, window}`. The plugin answers `{stream_id}` and then emits notifications
//! `<method> {stream_id, seq, data}` with `seq` counting from 1. In `reliable` mode it may
//! have at most `window` frames beyond the last acknowledged one: the runner forwards the
//! subscriber's cumulative acknowledgements as notifications `stream.ack {stream_id, seq}`, and
//! the plugin pauses while it is out of credit. `stream.stop {stream_id}` (a request, answered
//! `{}`) ends the stream; the plugin may end it itself with the notification
//! `stream.end {stream_id, reason?}`.
//!
//! A [`StreamRegistry`] does the bookkeeping; a [`StreamSender`] is one open stream:
//!
//! ```no_run
//! use utter_protocol::stream::{StreamRegistry, StreamSender};
//! use utter_protocol::serde_json::json;
//! # async fn demo(registry: StreamRegistry, conn: utter_protocol::Connection,
//! #               params: utter_protocol::serde_json::Value) {
//! // On the runner's `stream.subscribe` request:
//! let sender: StreamSender = registry.open(&conn, &params).unwrap();
//! let answer = sender.subscribe_result(); // respond with this
//! tokio::spawn(async move {
//!     for n in 0..10 {
//!         // Waits for credit in reliable mode; fails once the stream is stopped.
//!         if sender.send(json!({"n": n})).await.is_err() {
//!             return;
//!         }
//!     }
//!     sender.end("done").await;
//! });
//! // On `stream.ack` / `stream.stop` from the runner: registry.on_message(method, &params).
//! # }
//! ```
//!
//! Plugins served by [`crate::plugin::serve`] get all of this for free: implement
//! [`crate::plugin::Handler::subscribe`] and keep the [`StreamSender`] it is given.

use crate::connection::Connection;
use crate::error::ErrorObject;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::watch;

/// Runner → plugin request that opens a stream, and client → runner request that subscribes.
pub const SUBSCRIBE: &str = "stream.subscribe";
/// Cumulative acknowledgement: runner → plugin notification, client → runner request.
pub const ACK: &str = "stream.ack";
/// Ends a stream: runner → plugin request, client → runner request.
pub const STOP: &str = "stream.stop";
/// End of stream: plugin → runner notification, runner → client notification.
pub const END: &str = "stream.end";

/// Credit window used when the runner's `stream.subscribe` names none.
pub const DEFAULT_WINDOW: u64 = 64;

/// How a stream treats a slow subscriber (PROTOCOL.md §10.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamMode {
    /// A bounded queue that drops the oldest frame when full; gaps show in `seq`.
    #[default]
    Lossy,
    /// Nothing is dropped: a credit window with cumulative acknowledgements.
    Reliable,
}

impl StreamMode {
    /// `"lossy"` or `"reliable"`.
    pub fn as_str(self) -> &'static str {
        match self {
            StreamMode::Lossy => "lossy",
            StreamMode::Reliable => "reliable",
        }
    }

    /// Parse a `mode` param: absent or `null` is lossy.
    ///
    /// # Errors
    /// `-32602` for anything but `"lossy"`, `"reliable"` or null.
    pub fn from_param(value: Option<&Value>) -> Result<StreamMode, ErrorObject> {
        match value {
            None | Some(Value::Null) => Ok(StreamMode::Lossy),
            Some(Value::String(s)) if s == "lossy" => Ok(StreamMode::Lossy),
            Some(Value::String(s)) if s == "reliable" => Ok(StreamMode::Reliable),
            Some(other) => Err(ErrorObject::invalid_params(format!(
                "mode must be \"lossy\" or \"reliable\", got {other}"
            ))),
        }
    }
}

/// Why [`StreamSender::send`] failed: the stream is over.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamClosed {
    /// The runner sent `stream.stop` (the subscriber left or stopped it).
    #[error("the stream was stopped")]
    Stopped,
    /// The connection to the runner is closed.
    #[error("the connection to the runner is closed")]
    Disconnected,
}

struct State {
    /// Highest cumulative acknowledgement received.
    acked: watch::Sender<u64>,
    stopped: watch::Sender<bool>,
    pauses: AtomicU64,
}

type Table = Mutex<HashMap<String, Arc<State>>>;

/// The open streams of one plugin, by stream id. Cheap to clone.
#[derive(Clone, Default)]
pub struct StreamRegistry {
    streams: Arc<Table>,
}

impl std::fmt::Debug for StreamRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamRegistry")
            .field("open", &self.len())
            .finish()
    }
}

impl StreamRegistry {
    /// An empty registry.
    pub fn new() -> StreamRegistry {
        StreamRegistry::default()
    }

    /// How many streams are open.
    pub fn len(&self) -> usize {
        self.streams.lock().expect("stream table").len()
    }

    /// Whether no stream is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Open the stream a runner's `stream.subscribe {stream_id, method, params?, mode?,
    /// window?}` asks for; frames go out on `conn`. Answer the request with
    /// [`StreamSender::subscribe_result`].
    ///
    /// # Errors
    /// `-32602` when `stream_id` or `method` is missing, `mode` is not `lossy`/`reliable`, or
    /// `window` is not a positive whole number.
    pub fn open(&self, conn: &Connection, params: &Value) -> Result<StreamSender, ErrorObject> {
        let id = match params.get("stream_id") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => {
                return Err(ErrorObject::invalid_params(
                    "stream.subscribe needs a non-empty string stream_id (chosen by the runner)",
                ));
            }
        };
        let method = params
            .get("method")
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
            .ok_or_else(|| {
                ErrorObject::invalid_params("stream.subscribe needs a non-empty string method")
            })?
            .to_owned();
        let mode = StreamMode::from_param(params.get("mode"))?;
        let window = match params.get("window") {
            None | Some(Value::Null) => DEFAULT_WINDOW,
            Some(v) => v.as_u64().filter(|w| *w > 0).ok_or_else(|| {
                ErrorObject::invalid_params("stream.subscribe: window must be a positive integer")
            })?,
        };
        let state = Arc::new(State {
            acked: watch::channel(0).0,
            stopped: watch::channel(false).0,
            pauses: AtomicU64::new(0),
        });
        self.streams
            .lock()
            .expect("stream table")
            .insert(id.clone(), state.clone());
        Ok(StreamSender {
            id,
            method,
            params: params.get("params").cloned().unwrap_or_else(|| json!({})),
            mode,
            window,
            conn: conn.clone(),
            seq: tokio::sync::Mutex::new(0),
            state,
            registry: Arc::downgrade(&self.streams),
        })
    }

    /// Handle a `stream.ack {stream_id, seq}` or `stream.stop {stream_id}` from the runner
    /// (notification or request). Returns `false` for any other method. Unknown stream ids
    /// are ignored (stop is idempotent).
    pub fn on_message(&self, method: &str, params: &Value) -> bool {
        if method != ACK && method != STOP {
            return false;
        }
        let Some(id) = params.get("stream_id").and_then(Value::as_str) else {
            return true;
        };
        let mut table = self.streams.lock().expect("stream table");
        if method == STOP {
            if let Some(state) = table.remove(id) {
                state.stopped.send_replace(true);
            }
        } else if let (Some(state), Some(seq)) =
            (table.get(id), params.get("seq").and_then(Value::as_u64))
        {
            state.acked.send_if_modified(|acked| {
                let newer = seq > *acked;
                if newer {
                    *acked = seq;
                }
                newer
            });
        }
        true
    }

    /// Mark every open stream stopped (the connection to the runner ended).
    pub fn stop_all(&self) {
        for (_, state) in self.streams.lock().expect("stream table").drain() {
            state.stopped.send_replace(true);
        }
    }
}

/// One open stream: emits `<method> {stream_id, seq, data}` notifications, numbering them
/// from 1, and (reliable mode) waits for credit. Dropping it forgets the stream locally;
/// call [`StreamSender::end`] to tell the subscriber it is over.
pub struct StreamSender {
    id: String,
    method: String,
    params: Value,
    mode: StreamMode,
    window: u64,
    conn: Connection,
    /// The last `seq` sent; the lock keeps concurrent sends in order.
    seq: tokio::sync::Mutex<u64>,
    state: Arc<State>,
    registry: Weak<Table>,
}

impl std::fmt::Debug for StreamSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamSender")
            .field("id", &self.id)
            .field("method", &self.method)
            .field("mode", &self.mode)
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

impl StreamSender {
    /// The stream id the runner chose.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The notification method frames are sent as (what the client subscribed to).
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The subscriber's `params` (an object; `{}` when none were given).
    pub fn params(&self) -> &Value {
        &self.params
    }

    /// Lossy or reliable.
    pub fn mode(&self) -> StreamMode {
        self.mode
    }

    /// The credit window: frames allowed beyond the last acknowledgement (reliable mode).
    pub fn window(&self) -> u64 {
        self.window
    }

    /// The answer to the runner's `stream.subscribe`: `{stream_id}`.
    pub fn subscribe_result(&self) -> Value {
        json!({ "stream_id": self.id })
    }

    /// The highest `seq` the subscriber acknowledged (reliable mode; 0 before any).
    pub fn acked(&self) -> u64 {
        *self.state.acked.borrow()
    }

    /// How many times [`StreamSender::send`] had to wait for credit.
    pub fn pauses(&self) -> u64 {
        self.state.pauses.load(Ordering::Relaxed)
    }

    /// Whether the runner stopped the stream.
    pub fn is_stopped(&self) -> bool {
        *self.state.stopped.borrow()
    }

    /// Resolves once the runner stops the stream.
    pub async fn stopped(&self) {
        let mut rx = self.state.stopped.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }

    /// Send one frame; returns its `seq`. In reliable mode this first waits until
    /// `seq ≤ acked + window` (counted in [`StreamSender::pauses`] when it had to wait).
    ///
    /// # Errors
    /// [`StreamClosed`] once the stream is stopped or the connection closed; nothing is
    /// sent then.
    pub async fn send(&self, data: Value) -> Result<u64, StreamClosed> {
        let mut seq = self.seq.lock().await;
        if self.is_stopped() {
            return Err(StreamClosed::Stopped);
        }
        let next = *seq + 1;
        if self.mode == StreamMode::Reliable && next > self.acked() + self.window {
            self.state.pauses.fetch_add(1, Ordering::Relaxed);
            let mut acked = self.state.acked.subscribe();
            let mut stopped = self.state.stopped.subscribe();
            let window = self.window;
            tokio::select! {
                r = acked.wait_for(|a| next <= a + window) => {
                    if r.is_err() {
                        return Err(StreamClosed::Stopped);
                    }
                }
                _ = stopped.wait_for(|s| *s) => return Err(StreamClosed::Stopped),
                _ = self.conn.closed() => return Err(StreamClosed::Disconnected),
            }
        }
        self.conn
            .notify(
                &self.method,
                json!({"stream_id": self.id, "seq": next, "data": data}),
            )
            .await
            .map_err(|_| StreamClosed::Disconnected)?;
        *seq = next;
        Ok(next)
    }

    /// End the stream from the plugin's side: `stream.end {stream_id, reason}` after the
    /// frames already sent. The runner delivers what it holds, then tells the subscriber.
    pub async fn end(&self, reason: &str) {
        let _seq = self.seq.lock().await;
        self.forget();
        if !self.is_stopped() {
            self.state.stopped.send_replace(true);
            let _ = self
                .conn
                .notify(END, json!({"stream_id": self.id, "reason": reason}))
                .await;
        }
    }

    fn forget(&self) {
        if let Some(table) = self.registry.upgrade() {
            let mut table = table.lock().expect("stream table");
            if table
                .get(&self.id)
                .is_some_and(|s| Arc::ptr_eq(s, &self.state))
            {
                table.remove(&self.id);
            }
        }
    }
}

impl Drop for StreamSender {
    fn drop(&mut self) {
        self.forget();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connection::{ConnectionOptions, Incoming, memory_pair};
    use std::time::Duration;

    #[tokio::test]
    async fn reliable_sender_pauses_without_credit_and_resumes_on_ack() {
        let ((plugin, _prx), (_runner, mut rrx)) =
            memory_pair(ConnectionOptions::default(), ConnectionOptions::default());
        let registry = StreamRegistry::new();
        let sender = registry
            .open(
                &plugin,
                &json!({"stream_id": "s1", "method": "t.ticks", "mode": "reliable", "window": 2}),
            )
            .unwrap();
        assert_eq!(sender.subscribe_result(), json!({"stream_id": "s1"}));
        assert_eq!(sender.send(json!(1)).await, Ok(1));
        assert_eq!(sender.send(json!(2)).await, Ok(2));
        let sender = Arc::new(sender);
        let third = tokio::spawn({
            let sender = sender.clone();
            async move { sender.send(json!(3)).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!third.is_finished(), "the third frame must wait for credit");
        assert_eq!(sender.pauses(), 1);
        assert!(registry.on_message(ACK, &json!({"stream_id": "s1", "seq": 1})));
        assert_eq!(third.await.unwrap(), Ok(3));
        let mut seqs = Vec::new();
        while seqs.len() < 3 {
            if let Some(Incoming::Notification(n)) = rrx.recv().await {
                assert_eq!(n.method, "t.ticks");
                seqs.push(n.params["seq"].as_u64().unwrap());
            }
        }
        assert_eq!(seqs, [1, 2, 3]);
        registry.on_message(STOP, &json!({"stream_id": "s1"}));
        assert_eq!(sender.send(json!(4)).await, Err(StreamClosed::Stopped));
        assert!(registry.is_empty());
    }

    #[tokio::test]
    async fn bad_subscribe_params_are_refused() {
        let ((plugin, _prx), _other) =
            memory_pair(ConnectionOptions::default(), ConnectionOptions::default());
        let registry = StreamRegistry::new();
        for params in [
            json!({"method": "x"}),
            json!({"stream_id": "a"}),
            json!({"stream_id": "a", "method": "x", "mode": "fast"}),
            json!({"stream_id": "a", "method": "x", "window": 0}),
        ] {
            assert_eq!(registry.open(&plugin, &params).unwrap_err().code, -32602);
        }
    }
}
