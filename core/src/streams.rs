//! The stream relay (PROTOCOL.md §10.3): client subscriptions to plugin streams, lossy and
//! reliable delivery, acknowledgements, stop and end of stream.
//!
//! A client's `stream.subscribe {method, params?, mode?}` picks the running plugin whose
//! `plugin.describe` lists `method` in `streams`, draws an unguessable stream id, and asks the
//! plugin `stream.subscribe {stream_id, method, params, mode, window}`. The plugin's frames
//! (`<method> {stream_id, seq, data}` notifications) are taken off its read loop by
//! [`StreamHub::on_plugin_notification`], which only enqueues (lossy: drops the oldest frame
//! when the queue is full) and never waits. Each stream has its own delivery task that drains
//! the queue to the client's connection; in reliable mode it sends only frames with
//! `seq ≤ acked + window` and forwards every new cumulative acknowledgement to the plugin as a
//! `stream.ack` notification, so the plugin pauses instead of the runner dropping anything.
//! A plugin whose `plugin.describe` does not say `stream_credit: true` (one written for the
//! older runner, which never sent credit) is sent neither `mode`, `window` nor acks: the runner
//! holds its frames (up to [`RELIABLE_HOLD_WINDOWS`] windows) and keeps the window toward the
//! subscriber alone.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{Notify, watch};
use utter_protocol::stream::{ACK, END, STOP, SUBSCRIBE, StreamMode};
use utter_protocol::{Connection, ErrorCode, ErrorObject};

use crate::handles::{HandleStore, Scope};
use crate::supervisor::Supervisor;

/// How many frames a reliable stream may hold, in windows, before the producer counts as
/// ignoring its credit; the stream then ends with a reason instead of growing without bound.
pub const RELIABLE_HOLD_WINDOWS: u64 = 16;

/// What a stream holds between the plugin and the client.
#[derive(Default)]
struct Buffer {
    frames: VecDeque<(u64, Value)>,
    /// The last `seq` received from the plugin.
    last_seq: u64,
    /// Frames dropped (lossy mode).
    dropped: u64,
    /// Set when no more frames will come: the reason given to the subscriber.
    end: Option<String>,
    /// Set by stop: deliver nothing more.
    stopped: bool,
}

/// One subscription.
struct Stream {
    id: String,
    method: String,
    mode: StreamMode,
    /// The client connection number (its handle scope) that subscribed.
    owner: u64,
    plugin: String,
    epoch: u64,
    /// The id the plugin uses in its notifications.
    plugin_stream: Mutex<String>,
    plugin_conn: Connection,
    /// Whether the plugin keeps the credit itself (is sent `mode`, `window` and acks).
    plugin_credit: bool,
    window: u64,
    buffer: Mutex<Buffer>,
    wake: Notify,
    /// The subscriber's highest cumulative acknowledgement.
    acked: watch::Sender<u64>,
    /// The highest `seq` delivered to the subscriber.
    delivered: std::sync::atomic::AtomicU64,
}

#[derive(Default)]
struct Tables {
    /// By the client-facing stream id.
    streams: HashMap<String, Arc<Stream>>,
    /// By (plugin id, the plugin's stream id).
    routes: HashMap<(String, String), Arc<Stream>>,
    /// The last [`ENDED_MEMORY`] streams that ended or were stopped, with their owners: a
    /// late ack or stop from the subscriber is answered `{}` rather than as unknown.
    ended: VecDeque<(String, u64)>,
}

/// How many ended streams the hub remembers for late acks and stops.
pub const ENDED_MEMORY: usize = 4096;

/// All streams of the runner.
pub struct StreamHub {
    tables: Mutex<Tables>,
    lossy_queue: usize,
    credit_window: u64,
    handles: Option<Arc<HandleStore>>,
}

/// A fresh unguessable stream id: `stream-` and 128 random bits in hex.
fn new_stream_id() -> Result<String, ErrorObject> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| ErrorObject::internal(format!("no randomness for a stream id: {e}")))?;
    Ok(bytes.iter().fold(String::from("stream-"), |mut s, b| {
        use std::fmt::Write;
        let _ = write!(s, "{b:02x}");
        s
    }))
}

/// A stream id param: a string, or a number (older plugins), as a string.
fn id_param(params: &Value) -> Option<String> {
    match params.get("stream_id")? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Whether `value` holds a string that looks like a handle (cheap; no locks).
fn mentions_handle(value: &Value) -> bool {
    match value {
        Value::String(s) => s.starts_with(crate::handles::PREFIX),
        Value::Array(items) => items.iter().any(mentions_handle),
        Value::Object(map) => map.values().any(mentions_handle),
        _ => false,
    }
}

impl StreamHub {
    /// A hub with `[runner] lossy_queue` and `credit_window`; handles in delivered frames are
    /// passed from the plugin's scope to the subscriber's through `handles`.
    pub fn new(
        lossy_queue: u64,
        credit_window: u64,
        handles: Option<Arc<HandleStore>>,
    ) -> StreamHub {
        StreamHub {
            tables: Mutex::new(Tables::default()),
            lossy_queue: usize::try_from(lossy_queue.max(1)).unwrap_or(usize::MAX),
            credit_window: credit_window.max(1),
            handles,
        }
    }

    /// How many streams are open (delivery not finished).
    pub fn len(&self) -> usize {
        self.tables.lock().expect("stream tables").streams.len()
    }

    /// Whether no stream is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Serve a client's `stream.subscribe {method, params?, mode?}` for connection `owner`
    /// whose frames go to `client`. Returns `{stream_id, mode}` and a starter: call it once
    /// the response is written, so frames follow the answer.
    ///
    /// # Errors
    /// `-32602` for a missing method, a bad mode or non-object params; `-32005` when no running
    /// plugin lists the stream; the plugin's own error, `-32000`/`-32001` when it fails.
    pub async fn subscribe(
        self: &Arc<Self>,
        supervisor: &Supervisor,
        client: Connection,
        owner: u64,
        params: &Value,
    ) -> Result<(Value, Box<dyn FnOnce() + Send>), ErrorObject> {
        let method = params
            .get("method")
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
            .ok_or_else(|| {
                ErrorObject::invalid_params(
                    "stream.subscribe needs {method, params?, mode?}: \"method\" (the stream's notification name, e.g. \"stt.partial\") is missing",
                )
            })?
            .to_owned();
        let mode = StreamMode::from_param(params.get("mode"))
            .map_err(|e| ErrorObject::invalid_params(format!("stream.subscribe: {}", e.message)))?;
        let inner = match params.get("params") {
            None | Some(Value::Null) => json!({}),
            Some(v @ Value::Object(_)) => v.clone(),
            Some(_) => {
                return Err(ErrorObject::invalid_params(
                    "stream.subscribe: params must be an object",
                ));
            }
        };
        let source = supervisor.find_stream(&method).ok_or_else(|| {
            ErrorObject::new(
                ErrorCode::CapabilityMissing,
                format!("no running plugin produces the stream {method:?} (none lists it in plugin.describe streams)"),
            )
        })?;
        let (plugin, epoch, plugin_conn) = (source.plugin, source.epoch, source.conn);
        let id = new_stream_id()?;
        let window = self.credit_window;
        let stream = Arc::new(Stream {
            id: id.clone(),
            method: method.clone(),
            mode,
            owner,
            plugin: plugin.clone(),
            epoch,
            plugin_stream: Mutex::new(id.clone()),
            plugin_conn: plugin_conn.clone(),
            plugin_credit: source.credit,
            window,
            buffer: Mutex::new(Buffer::default()),
            wake: Notify::new(),
            acked: watch::channel(0).0,
            delivered: Default::default(),
        });
        {
            // Routed before the plugin is asked, so frames it sends at once are kept.
            let mut tables = self.tables.lock().expect("stream tables");
            tables.streams.insert(id.clone(), stream.clone());
            tables
                .routes
                .insert((plugin.clone(), id.clone()), stream.clone());
        }
        let reply = supervisor
            .call(
                &plugin,
                SUBSCRIBE,
                if source.credit {
                    json!({"stream_id": id, "method": method, "params": inner, "mode": mode.as_str(), "window": window})
                } else {
                    // Written for the older runner: it is never told about credit (which it
                    // would wait for as requests), and the runner keeps the window alone.
                    json!({"stream_id": id, "method": method, "params": inner})
                },
                supervisor.rpc_timeout(),
            )
            .await;
        let reply = match reply {
            Ok(reply) => reply,
            Err(e) => {
                self.forget(&stream);
                return Err(e);
            }
        };
        // An older plugin chooses its own id and answers with it.
        if let Some(theirs) = id_param(&reply).filter(|theirs| *theirs != id) {
            let mut tables = self.tables.lock().expect("stream tables");
            tables.routes.remove(&(plugin.clone(), id.clone()));
            tables
                .routes
                .insert((plugin.clone(), theirs.clone()), stream.clone());
            *stream.plugin_stream.lock().expect("plugin stream id") = theirs;
        }
        if mode == StreamMode::Reliable && !source.credit {
            tracing::info!(stream = %id, %plugin, %method, "reliable stream of a plugin that keeps no credit itself (plugin.describe has no stream_credit): the runner holds its frames; a plugin built on utter_protocol::plugin::serve says stream_credit once rebuilt");
        }
        tracing::debug!(stream = %id, %plugin, %method, mode = mode.as_str(), "stream opened");
        let hub = self.clone();
        let start = move || {
            tokio::spawn(deliver(hub, stream, client));
        };
        Ok((
            json!({"stream_id": id, "mode": mode.as_str()}),
            Box::new(start),
        ))
    }

    fn owned(
        &self,
        owner: u64,
        params: &Value,
        method: &str,
    ) -> Result<Option<Arc<Stream>>, ErrorObject> {
        let id = params
            .get("stream_id")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                ErrorObject::invalid_params(format!("{method} needs a string \"stream_id\""))
            })?;
        let (stream, ended_owner) = {
            let tables = self.tables.lock().expect("stream tables");
            let ended = tables
                .ended
                .iter()
                .find(|(gone, _)| gone == id)
                .map(|(_, o)| *o);
            (tables.streams.get(id).cloned(), ended)
        };
        if let (None, Some(o)) = (&stream, ended_owner) {
            if o != owner {
                return Err(ErrorObject::new(
                    ErrorCode::Denied,
                    format!(
                        "{method}: stream {id} belongs to another connection; only its subscriber may ack or stop it"
                    ),
                ));
            }
            return Ok(None);
        }
        match stream {
            Some(s) if s.owner != owner => Err(ErrorObject::new(
                ErrorCode::Denied,
                format!(
                    "{method}: stream {id} belongs to another connection; only its subscriber may ack or stop it"
                ),
            )),
            other => Ok(other),
        }
    }

    /// A client's `stream.ack {stream_id, seq}`: everything up to `seq` arrived (cumulative;
    /// clamped to what was delivered). `{}`; a no-op on lossy streams.
    ///
    /// # Errors
    /// `-32602` for a missing id, a bad `seq` or an unknown stream; `-32003` when the stream
    /// belongs to another connection.
    pub fn ack(&self, owner: u64, params: &Value) -> Result<Value, ErrorObject> {
        let seq = params.get("seq").and_then(Value::as_u64).ok_or_else(|| {
            ErrorObject::invalid_params(
                "stream.ack needs {stream_id, seq}: seq must be a whole number",
            )
        })?;
        let id = params
            .get("stream_id")
            .and_then(Value::as_str)
            .unwrap_or("");
        let known = self.is_ended(id);
        let Some(stream) = self.owned(owner, params, ACK)? else {
            if known {
                // A late ack of a stream that is over: nothing to do.
                return Ok(json!({}));
            }
            return Err(ErrorObject::invalid_params(
                "stream.ack: unknown stream_id (no stream of this connection has that id)",
            ));
        };
        if stream.mode == StreamMode::Reliable {
            let seq = seq.min(stream.delivered.load(std::sync::atomic::Ordering::Acquire));
            stream.acked.send_if_modified(|acked| {
                let newer = seq > *acked;
                if newer {
                    *acked = seq;
                }
                newer
            });
        }
        Ok(json!({}))
    }

    /// A client's `stream.stop {stream_id}`: idempotent, `{}` also for an id that is gone.
    /// Frees the queue and asks the plugin to stop.
    ///
    /// # Errors
    /// `-32602` for a missing id; `-32003` when the stream belongs to another connection.
    pub fn stop(&self, owner: u64, params: &Value) -> Result<Value, ErrorObject> {
        if let Some(stream) = self.owned(owner, params, STOP)? {
            self.halt(&stream, true);
        }
        Ok(json!({}))
    }

    /// Whether connection `owner` has a stream running (it is not idle while data flows to
    /// it).
    pub fn owns_any(&self, owner: u64) -> bool {
        self.tables
            .lock()
            .expect("stream tables")
            .streams
            .values()
            .any(|s| s.owner == owner)
    }

    /// Stop every stream of connection `owner` (it disconnected, or the runner stops), and
    /// tell the plugins. Returns the client-facing ids stopped.
    pub fn stop_owner(&self, owner: u64) -> Vec<String> {
        let mine: Vec<Arc<Stream>> = self
            .tables
            .lock()
            .expect("stream tables")
            .streams
            .values()
            .filter(|s| s.owner == owner)
            .cloned()
            .collect();
        mine.iter()
            .map(|s| {
                self.halt(s, true);
                s.id.clone()
            })
            .collect()
    }

    /// Remove `stream`, drop what it holds and wake its delivery task (which then ends).
    fn halt(&self, stream: &Arc<Stream>, tell_plugin: bool) {
        let was_live = {
            let mut buffer = stream.buffer.lock().expect("stream buffer");
            let was_live = !buffer.stopped && buffer.end.is_none();
            buffer.stopped = true;
            buffer.frames = VecDeque::new();
            was_live
        };
        self.forget(stream);
        stream.wake.notify_one();
        if tell_plugin && was_live {
            let conn = stream.plugin_conn.clone();
            let theirs = stream
                .plugin_stream
                .lock()
                .expect("plugin stream id")
                .clone();
            tokio::spawn(async move {
                let _ = conn
                    .request(
                        STOP,
                        json!({"stream_id": theirs}),
                        Some(Duration::from_secs(5)),
                    )
                    .await;
            });
        }
        tracing::debug!(stream = %stream.id, "stream stopped");
    }

    fn is_ended(&self, id: &str) -> bool {
        self.tables
            .lock()
            .expect("stream tables")
            .ended
            .iter()
            .any(|(gone, _)| gone == id)
    }

    fn forget(&self, stream: &Arc<Stream>) {
        let mut tables = self.tables.lock().expect("stream tables");
        if tables
            .streams
            .get(&stream.id)
            .is_some_and(|s| Arc::ptr_eq(s, stream))
        {
            tables.streams.remove(&stream.id);
            if tables.ended.len() >= ENDED_MEMORY {
                tables.ended.pop_front();
            }
            tables.ended.push_back((stream.id.clone(), stream.owner));
        }
        tables.routes.retain(|_, s| !Arc::ptr_eq(s, stream));
    }

    /// A notification from plugin `plugin`: a frame of one of its streams, or its
    /// `stream.end`. Never waits: the frame is queued (lossy: the oldest dropped when the queue
    /// is full) and the stream's delivery task woken. Returns whether it belonged to a stream.
    pub fn on_plugin_notification(&self, plugin: &str, method: &str, params: Value) -> bool {
        let Some(theirs) = id_param(&params) else {
            return false;
        };
        let stream = self
            .tables
            .lock()
            .expect("stream tables")
            .routes
            .get(&(plugin.to_owned(), theirs))
            .cloned();
        let Some(stream) = stream else {
            tracing::debug!(plugin, method, "a frame for no open stream; dropped");
            return false;
        };
        if method == END {
            let reason = params
                .get("reason")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            self.end(
                &stream,
                format!(
                    "the plugin ended the stream{}",
                    if reason.is_empty() {
                        String::new()
                    } else {
                        format!(": {reason}")
                    }
                ),
            );
            return true;
        }
        if method != stream.method {
            tracing::debug!(plugin, method, stream = %stream.id, "a notification whose method is not the stream's; dropped");
            return false;
        }
        let mut params = params;
        let data = params
            .get_mut("data")
            .map(Value::take)
            .unwrap_or(Value::Null);
        let overflow = {
            let mut buffer = stream.buffer.lock().expect("stream buffer");
            if buffer.stopped || buffer.end.is_some() {
                return true;
            }
            let seq = params
                .get("seq")
                .and_then(Value::as_u64)
                .unwrap_or(buffer.last_seq + 1);
            buffer.last_seq = seq;
            match stream.mode {
                StreamMode::Lossy => {
                    if buffer.frames.len() >= self.lossy_queue {
                        buffer.frames.pop_front();
                        buffer.dropped += 1;
                    }
                    buffer.frames.push_back((seq, data));
                    false
                }
                StreamMode::Reliable => {
                    if buffer.frames.len() as u64 >= stream.window * RELIABLE_HOLD_WINDOWS {
                        true
                    } else {
                        buffer.frames.push_back((seq, data));
                        false
                    }
                }
            }
        };
        if overflow {
            let held = stream.window * RELIABLE_HOLD_WINDOWS;
            let reason = if stream.plugin_credit {
                tracing::warn!(plugin, stream = %stream.id, "the plugin ignores its credit window; the stream is ended");
                format!(
                    "protocol violation: plugin {plugin} sent more than {held} frames beyond the subscriber's acknowledgement (it ignores stream.ack credit)"
                )
            } else {
                tracing::warn!(plugin, stream = %stream.id, "the subscriber does not acknowledge; the stream is ended");
                format!(
                    "the subscriber fell more than {held} frames behind its acknowledgements; the runner holds no more for a plugin that does not keep credit itself"
                )
            };
            self.end(&stream, reason);
            let conn = stream.plugin_conn.clone();
            let theirs = stream
                .plugin_stream
                .lock()
                .expect("plugin stream id")
                .clone();
            tokio::spawn(async move {
                let _ = conn
                    .request(
                        STOP,
                        json!({"stream_id": theirs}),
                        Some(Duration::from_secs(5)),
                    )
                    .await;
            });
        } else {
            stream.wake.notify_one();
        }
        true
    }

    /// No more frames will come for `stream`: unroute it; the delivery task delivers what is
    /// held, then sends `stream.end` with `reason`.
    fn end(&self, stream: &Arc<Stream>, reason: String) {
        {
            let mut buffer = stream.buffer.lock().expect("stream buffer");
            if buffer.end.is_none() {
                buffer.end = Some(reason);
            }
        }
        self.tables
            .lock()
            .expect("stream tables")
            .routes
            .retain(|_, s| !Arc::ptr_eq(s, stream));
        stream.wake.notify_one();
    }

    /// Plugin `plugin` changed state: when it is not running, end its streams of epoch
    /// `epoch` or older with `reason`; when it runs epoch `epoch`, end those of older epochs.
    pub fn plugin_changed(&self, plugin: &str, epoch: u64, running: bool, reason: &str) {
        let gone: Vec<Arc<Stream>> = self
            .tables
            .lock()
            .expect("stream tables")
            .streams
            .values()
            .filter(|s| s.plugin == plugin && (s.epoch < epoch || (!running && s.epoch <= epoch)))
            .cloned()
            .collect();
        for stream in gone {
            self.end(&stream, reason.to_owned());
        }
    }
}

/// Deliver one stream's frames to its subscriber, in order, from its own task.
async fn deliver(hub: Arc<StreamHub>, stream: Arc<Stream>, client: Connection) {
    use std::sync::atomic::Ordering;
    let mut acks = stream.acked.subscribe();
    let mut forwarded = 0u64;
    let plugin_scope = Scope::Plugin(stream.plugin.clone());
    let client_scope = Scope::Client(stream.owner);
    loop {
        // Forward a new cumulative acknowledgement to the plugin (its credit).
        let acked = *acks.borrow_and_update();
        if acked > forwarded && stream.plugin_credit {
            forwarded = acked;
            let theirs = stream
                .plugin_stream
                .lock()
                .expect("plugin stream id")
                .clone();
            let _ = stream
                .plugin_conn
                .notify(ACK, json!({"stream_id": theirs, "seq": acked}))
                .await;
        }
        enum Next {
            Frame(u64, Value),
            End(String, u64, u64),
            Wait,
            Stop,
        }
        let next = {
            let mut buffer = stream.buffer.lock().expect("stream buffer");
            if buffer.stopped {
                Next::Stop
            } else {
                let allowed = match (stream.mode, buffer.frames.front()) {
                    (_, None) => false,
                    (StreamMode::Lossy, Some(_)) => true,
                    (StreamMode::Reliable, Some((seq, _))) => *seq <= acked + stream.window,
                };
                if allowed {
                    let (seq, data) = buffer.frames.pop_front().expect("a frame");
                    Next::Frame(seq, data)
                } else if buffer.frames.is_empty() && buffer.end.is_some() {
                    Next::End(
                        buffer.end.clone().unwrap_or_default(),
                        buffer.last_seq,
                        buffer.dropped,
                    )
                } else {
                    Next::Wait
                }
            }
        };
        match next {
            Next::Frame(seq, data) => {
                if let Some(store) = &hub.handles {
                    if mentions_handle(&data) {
                        store.pass(&plugin_scope, &client_scope, &data);
                    }
                }
                stream.delivered.fetch_max(seq, Ordering::AcqRel);
                if client
                    .notify(
                        &stream.method,
                        json!({"stream_id": stream.id, "seq": seq, "data": data}),
                    )
                    .await
                    .is_err()
                {
                    hub.halt(&stream, true);
                    return;
                }
            }
            Next::End(reason, last_seq, dropped) => {
                let _ = client
                    .notify(
                        END,
                        json!({"stream_id": stream.id, "reason": reason, "last_seq": last_seq, "dropped": dropped}),
                    )
                    .await;
                hub.forget(&stream);
                tracing::debug!(stream = %stream.id, %reason, "stream ended");
                return;
            }
            Next::Stop => return,
            Next::Wait => {
                tokio::select! {
                    _ = stream.wake.notified() => {}
                    changed = acks.changed() => {
                        if changed.is_err() {
                            return;
                        }
                    }
                    _ = client.closed() => {
                        hub.halt(&stream, true);
                        return;
                    }
                }
            }
        }
    }
}
