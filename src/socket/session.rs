//! One client connection: admission, authentication, the methods, cancellation and event
//! subscriptions.
//!
//! The methods, their shapes and errors are listed in the docs of [`crate::socket`].
//!
//! Cancellation (PROTOCOL.md §7): `$/cancel {id}` ends a running `runner.command` or
//! `runner.invoke` with `-32002`, and whatever it waited on is cancelled in turn (the plugin
//! call is sent `$/cancel`, a pending confirmation is withdrawn). A client that disconnects
//! cancels all of its running requests the same way; the older runner let them run on
//! (reference §12, item 12). A reload is never cut short.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio::sync::{broadcast, mpsc};
use tokio::task::AbortHandle;
use utter_protocol::capability::{CapabilityRegistry, Lookup, RUNNER_CAPABILITIES};
use utter_protocol::connection::CANCEL_METHOD;
use utter_protocol::frame::encode_frame;
use utter_protocol::handshake::{ABI, PROTOCOL_VERSION};
use utter_protocol::message::error_response_bytes;
use utter_protocol::{
    Connection, ConnectionOptions, ErrorCode, ErrorObject, Incoming, Notification, Request,
    RequestId,
};

use super::access::{Admission, Peer, Shared, constant_time_eq};
use crate::config::ConfigIssue;
use crate::confirm::{Door, PendingConfirmation, read_answer};
use crate::handles::{Scope, b64_decode, b64_encode};
use crate::pipeline::{CommandOptions, ConfirmRequest};
use crate::policy::{Provenance, normalise_op};
use crate::runner::{EVENT_BACKLOG, Runner, VERSION};
use crate::supervisor::PluginReport;

/// Requests allowed per connection within [`RATE_WINDOW`] (reference §9.1).
const RATE_LIMIT: usize = 1000;
/// The sliding window of the rate limit.
const RATE_WINDOW: Duration = Duration::from_secs(10);
/// Event subscriptions one connection may hold at once.
const MAX_SUBSCRIPTIONS: usize = 16;
/// The notification that carries events.
const EVENT_METHOD: &str = "runner.event";

/// The message of the `-32003` sent before authentication.
pub(crate) const AUTH_REQUIRED: &str = "authentication required (send runner.auth {token})";

/// Send one error frame (`id: null`) and close.
pub(super) async fn refuse(mut stream: UnixStream, error: ErrorObject) {
    let frame = encode_frame(&error_response_bytes(None, &error));
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        stream.write_all(&frame).await?;
        stream.shutdown().await
    })
    .await;
}

/// Identify the peer, admit or refuse it, and serve it until it leaves or the socket stops.
pub(super) async fn serve_connection(stream: UnixStream, shared: Arc<Shared>) {
    let cred = match stream.peer_cred() {
        Ok(cred) => cred,
        Err(e) => {
            tracing::warn!(error = %e, "client refused: its credentials (SO_PEERCRED) cannot be read");
            refuse(
                stream,
                ErrorObject::new(
                    ErrorCode::Denied,
                    "permission denied: peer credentials unavailable",
                ),
            )
            .await;
            return;
        }
    };
    let peer = Peer::identify(cred.pid(), cred.uid());
    let admission = shared.rules().admit(&peer);
    let pid = peer.pid.unwrap_or(0);
    let exe = peer
        .exe
        .as_ref()
        .map(|e| e.display().to_string())
        .unwrap_or_default();
    match &admission {
        Admission::Rejected(reason) => {
            tracing::warn!(pid, uid = peer.uid, exe = %exe, %reason, "client refused");
            refuse(stream, ErrorObject::new(ErrorCode::Denied, reason.clone())).await;
            return;
        }
        Admission::Admitted(why) => {
            tracing::debug!(pid, uid = peer.uid, exe = %exe, by = %why, "client admitted")
        }
        Admission::NeedsToken => {
            tracing::debug!(pid, uid = peer.uid, exe = %exe, "client connected; it must send runner.auth")
        }
    }
    let (conn, incoming) = Connection::spawn_unix(
        stream,
        ConnectionOptions {
            id_prefix: Some("0:".into()),
            label: format!("client pid {pid}"),
            ..Default::default()
        },
    );
    let connection = next_connection();
    let session = Session {
        shared,
        conn,
        peer,
        authenticated: matches!(admission, Admission::Admitted(_)),
        recent: VecDeque::new(),
        limited: false,
        limited_auth_logged: false,
        work: Arc::new(Mutex::new(HashMap::new())),
        subscriptions: Arc::new(Mutex::new(HashMap::new())),
        next_subscription: 0,
        scope: Scope::Client(connection),
        connection,
    };
    session.run(incoming).await;
}

/// Requests being worked on, by id: the task's abort handle once it is known. Whoever
/// removes an entry answers that request (the task when it finishes, `$/cancel`, or the
/// end of the connection), so each is answered exactly once.
type Work = Arc<Mutex<HashMap<RequestId, Option<AbortHandle>>>>;

struct Session {
    shared: Arc<Shared>,
    conn: Connection,
    peer: Peer,
    authenticated: bool,
    /// When the requests of the last [`RATE_WINDOW`] arrived.
    recent: VecDeque<Instant>,
    /// Whether the rate limit refusal was logged (once per episode).
    limited: bool,
    /// Whether a refusal for want of authentication was logged (once per connection).
    limited_auth_logged: bool,
    work: Work,
    subscriptions: Arc<Mutex<HashMap<String, AbortHandle>>>,
    next_subscription: u64,
    /// This connection's handle scope.
    scope: Scope,
    /// This connection's number (its scope and the owner of its streams).
    connection: u64,
}

/// A number for each client connection (its handle scope).
fn next_connection() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// How long a connection that is not admitted may take to send `runner.auth`; then it is
/// closed, so idle strangers cannot hold the connection slots.
pub const AUTH_TIMEOUT: Duration = Duration::from_secs(10);

impl Session {
    async fn run(mut self, mut incoming: mpsc::Receiver<Incoming>) {
        let mut stop = self.shared.stop.clone();
        let auth_deadline = tokio::time::Instant::now() + AUTH_TIMEOUT;
        let stopping = loop {
            if *stop.borrow_and_update() {
                break true;
            }
            tokio::select! {
                _ = tokio::time::sleep_until(auth_deadline), if !self.authenticated => {
                    tracing::warn!(
                        pid = self.peer.pid.unwrap_or(0),
                        "client sent no runner.auth within {} s; closing",
                        AUTH_TIMEOUT.as_secs()
                    );
                    let _ = self
                        .conn
                        .notify(
                            "runner.closing",
                            json!({"reason": format!("not authenticated within {} s: send runner.auth {{token}} first", AUTH_TIMEOUT.as_secs())}),
                        )
                        .await;
                    break false;
                }
                message = incoming.recv() => match message {
                    Some(Incoming::Request(request)) => self.on_request(request).await,
                    Some(Incoming::Notification(note)) => self.on_notification(note).await,
                    None => break false,
                },
                changed = stop.changed() => {
                    if changed.is_err() {
                        break true;
                    }
                }
            }
        };
        self.finish(stopping).await;
    }

    /// Cancel what is still running and close. When the runner is stopping (the client is
    /// still there) each running request is answered and each subscription told.
    async fn finish(self, stopping: bool) {
        let work: Vec<_> = self.work.lock().expect("work lock").drain().collect();
        let cancelled = work.len();
        for (id, handle) in work {
            if let Some(handle) = handle {
                handle.abort();
            }
            if stopping {
                let _ = self
                    .conn
                    .respond(
                        id,
                        Err(ErrorObject::plugin(
                            "the runner is stopping; the request was abandoned",
                        )),
                    )
                    .await;
            }
        }
        let subscriptions: Vec<_> = self
            .subscriptions
            .lock()
            .expect("subscription lock")
            .drain()
            .collect();
        for (subscription, handle) in subscriptions {
            handle.abort();
            if stopping {
                let _ = self
                    .conn
                    .notify(
                        EVENT_METHOD,
                        json!({"subscription": subscription, "event": {"event": "dropped", "reason": "the runner is stopping"}}),
                    )
                    .await;
            }
        }
        if cancelled > 0 && !stopping {
            tracing::info!(
                pid = self.peer.pid.unwrap_or(0),
                cancelled,
                "client disconnected; its running requests were cancelled"
            );
        }
        // Its streams stop (the plugins are told); a client still there hears why.
        for stream_id in self.shared.runner.streams.stop_owner(self.connection) {
            if stopping {
                let _ = self
                    .conn
                    .notify(
                        utter_protocol::stream::END,
                        json!({"stream_id": stream_id, "reason": "the runner is stopping"}),
                    )
                    .await;
            }
        }
        if let Some(store) = &self.shared.runner.handles {
            store.drop_scope(&self.scope);
        }
        self.conn.close();
    }

    async fn on_notification(&mut self, note: Notification) {
        // `stream.ack` may come as a notification too (no answer, errors ignored).
        if note.method == "stream.ack" && self.authenticated {
            let _ = self
                .shared
                .runner
                .streams
                .ack(self.connection, &note.params);
            return;
        }
        if note.method != CANCEL_METHOD {
            tracing::debug!(method = %note.method, "client notification ignored");
            return;
        }
        let Some(id) = note.params.get("id").and_then(RequestId::from_value) else {
            return;
        };
        let entry = self.work.lock().expect("work lock").remove(&id);
        if let Some(handle) = entry {
            if let Some(handle) = handle {
                handle.abort();
            }
            tracing::debug!(%id, "request cancelled by the client");
            let _ = self
                .conn
                .respond(
                    id.clone(),
                    Err(ErrorObject::new(ErrorCode::Cancelled, "cancelled")
                        .with_data(json!({"id": id.to_value()}))),
                )
                .await;
        }
    }

    /// Count a request against the rate limit.
    fn admit_rate(&mut self) -> Result<(), ErrorObject> {
        let now = Instant::now();
        while self
            .recent
            .front()
            .is_some_and(|t| now.duration_since(*t) >= RATE_WINDOW)
        {
            self.recent.pop_front();
        }
        if self.recent.len() >= RATE_LIMIT {
            if !self.limited {
                self.limited = true;
                tracing::warn!(
                    pid = self.peer.pid.unwrap_or(0),
                    uid = self.peer.uid,
                    exe = %self.peer.exe.as_ref().map(|e| e.display().to_string()).unwrap_or_default(),
                    "client over the rate limit; refusing its requests"
                );
            }
            return Err(ErrorObject::new(
                ErrorCode::Denied,
                format!(
                    "rate limit exceeded: at most {RATE_LIMIT} requests per {} s on one connection",
                    RATE_WINDOW.as_secs()
                ),
            ));
        }
        self.limited = false;
        self.recent.push_back(now);
        Ok(())
    }

    async fn on_request(&mut self, request: Request) {
        let Request { id, method, params } = request;
        // Acks are constant work and come at the frame rate of a reliable stream: they do not
        // count against the rate limit.
        let rate = if method == "stream.ack" && self.authenticated {
            Ok(())
        } else {
            self.admit_rate()
        };
        if let Err(e) = rate {
            let _ = self.conn.respond(id, Err(e)).await;
            return;
        }
        if !self.authenticated && !matches!(method.as_str(), "runner.auth" | "runner.version") {
            if !self.limited_auth_logged {
                self.limited_auth_logged = true;
                tracing::info!(
                    pid = self.peer.pid.unwrap_or(0),
                    uid = self.peer.uid,
                    exe = %self.peer.exe.as_ref().map(|e| e.display().to_string()).unwrap_or_default(),
                    %method,
                    "client refused: not authenticated (it is not an admitted binary and sent no token yet)"
                );
            }
            let _ = self
                .conn
                .respond(id, Err(ErrorObject::new(ErrorCode::Denied, AUTH_REQUIRED)))
                .await;
            return;
        }
        let runner = self.shared.runner.clone();
        let result = match method.as_str() {
            "runner.auth" => self.auth(&params),
            "runner.version" => Ok(json!({
                "version": VERSION,
                "protocol": PROTOCOL_VERSION.to_string(),
                "abi": ABI,
                "authenticated": self.authenticated,
            })),
            "runner.status" | "runner.plugins" => {
                serde_json::to_value(runner.status()).map_err(internal)
            }
            "runner.pending" => {
                serde_json::to_value(runner.confirmations.pending()).map_err(internal)
            }
            "runner.audit" => audit(&runner, &params),
            "runner.confirm" => self.confirm(&params),
            "runner.validate_plugin" => validate_plugin(&runner, &params),
            "runner.subscribe" => {
                self.subscribe(id).await;
                return;
            }
            "runner.unsubscribe" => self.unsubscribe(&params),
            "runner.command" => {
                let door = client_door(self.conn.clone());
                self.spawn_work(id, command(runner, params, door)).await;
                return;
            }
            "handle.create" | "handle.fetch" | "handle.stat" | "handle.retain"
            | "handle.release" => handle_method(&runner, &self.scope, &method, &params),
            "fd.pass" => match fd_pass(&runner, &self.scope, &params) {
                Ok((result, fd)) => {
                    if let Err(e) = self.conn.respond_with_fd(id.clone(), result, fd).await {
                        let _ = self.conn.respond(id, Err(e)).await;
                    }
                    return;
                }
                Err(e) => Err(e),
            },
            "runner.invoke" => {
                let door = client_door(self.conn.clone());
                let scope = self.scope.clone();
                self.spawn_work(id, invoke(runner, params, door, scope))
                    .await;
                return;
            }
            "runner.reload" => {
                self.spawn_work(id, reload(runner)).await;
                return;
            }
            "runner.ptt" => crate::ptt::socket_method(&runner.ptt, &params),
            "stream.subscribe" => {
                // Its own task: the plugin is asked first; the answer goes out before the
                // first frame.
                let conn = self.conn.clone();
                let owner = self.connection;
                tokio::spawn(async move {
                    let hub = runner.streams.clone();
                    match hub
                        .subscribe(&runner.supervisor, conn.clone(), owner, &params)
                        .await
                    {
                        Ok((answer, start)) => {
                            if conn.respond(id, Ok(answer)).await.is_ok() {
                                start();
                            } else {
                                hub.stop_owner(owner);
                            }
                        }
                        Err(e) => {
                            let _ = conn.respond(id, Err(e)).await;
                        }
                    }
                });
                return;
            }
            "stream.ack" => runner.streams.ack(self.connection, &params),
            "stream.stop" => runner.streams.stop(self.connection, &params),
            other => Err(ErrorObject::new(
                ErrorCode::MethodNotFound,
                format!("unknown method: {other}"),
            )),
        };
        let _ = self.conn.respond(id, result).await;
    }

    /// Run a request in its own task, so that it can be cancelled and others are served
    /// meanwhile.
    async fn spawn_work<F>(&self, id: RequestId, work: F)
    where
        F: std::future::Future<Output = Result<Value, ErrorObject>> + Send + 'static,
    {
        let duplicate = {
            let mut map = self.work.lock().expect("work lock");
            let duplicate = map.contains_key(&id);
            if !duplicate {
                map.insert(id.clone(), None);
            }
            duplicate
        };
        if duplicate {
            {
                let _ = self
                    .conn
                    .respond(
                        id.clone(),
                        Err(ErrorObject::new(
                            ErrorCode::InvalidRequest,
                            format!("a request with id {id} is still running; ids must be unique"),
                        )),
                    )
                    .await;
                return;
            }
        }
        let conn = self.conn.clone();
        let map = self.work.clone();
        let task_id = id.clone();
        let task = tokio::spawn(async move {
            let result = work.await;
            let still_mine = map.lock().expect("work lock").remove(&task_id).is_some();
            if still_mine {
                let _ = conn.respond(task_id, result).await;
            }
        });
        let mut map = self.work.lock().expect("work lock");
        match map.get_mut(&id) {
            Some(slot) => *slot = Some(task.abort_handle()),
            // Finished already (nothing to do) or cancelled before its handle was known.
            None => task.abort(),
        }
    }

    fn auth(&mut self, params: &Value) -> Result<Value, ErrorObject> {
        let token = params.get("token").and_then(Value::as_str).ok_or_else(|| {
            ErrorObject::invalid_params("runner.auth needs params.token, a string")
        })?;
        if self.authenticated {
            return Ok(json!({}));
        }
        let Some(expected) = self.shared.token() else {
            return Err(ErrorObject::new(
                ErrorCode::Denied,
                "this runner has no token (see its log); only allow-listed binaries may connect",
            ));
        };
        if constant_time_eq(token.trim().as_bytes(), expected.as_bytes()) {
            self.authenticated = true;
            tracing::debug!(
                pid = self.peer.pid.unwrap_or(0),
                "client authenticated with the token"
            );
            Ok(json!({}))
        } else {
            tracing::warn!(
                pid = self.peer.pid.unwrap_or(0),
                uid = self.peer.uid,
                exe = %self.peer.exe.as_ref().map(|e| e.display().to_string()).unwrap_or_default(),
                "client refused: invalid token"
            );
            Err(ErrorObject::new(ErrorCode::Denied, "invalid token"))
        }
    }

    fn confirm(&self, params: &Value) -> Result<Value, ErrorObject> {
        let id = params.get("id").and_then(Value::as_str).ok_or_else(|| {
            ErrorObject::invalid_params(
                "runner.confirm needs params.id, the id of a pending confirmation (see runner.pending)",
            )
        })?;
        let approved = match params.get("approved") {
            Some(Value::Bool(b)) => *b,
            _ => {
                return Err(ErrorObject::invalid_params(
                    "runner.confirm needs params.approved, a JSON boolean (true approves, false denies)",
                ));
            }
        };
        // With `digest`, the answer only counts for exactly the step that was shown.
        let confirmations = &self.shared.runner.confirmations;
        match params.get("digest") {
            None | Some(Value::Null) => confirmations.answer(id, approved, "runner.confirm")?,
            Some(Value::String(digest)) => {
                confirmations.answer_digest(id, digest, approved, "runner.confirm")?
            }
            Some(_) => {
                return Err(ErrorObject::invalid_params(
                    "runner.confirm: params.digest must be the pending confirmation's digest string",
                ));
            }
        }
        tracing::info!(pid = self.peer.pid.unwrap_or(0), %id, approved, "confirmation answered over the socket");
        Ok(json!({}))
    }

    /// Answer `{subscription}`, then start forwarding: a snapshot first, then each event.
    async fn subscribe(&mut self, id: RequestId) {
        if self.subscriptions.lock().expect("subscription lock").len() >= MAX_SUBSCRIPTIONS {
            let _ = self
                .conn
                .respond(
                    id,
                    Err(ErrorObject::new(
                        ErrorCode::Denied,
                        format!("at most {MAX_SUBSCRIPTIONS} subscriptions per connection; end one with runner.unsubscribe"),
                    )),
                )
                .await;
            return;
        }
        let runner = &self.shared.runner;
        // Subscribe before the snapshot, so nothing between the two is lost.
        let events = runner.subscribe();
        let snapshot = runner.status();
        self.next_subscription += 1;
        let subscription = format!("sub-{}", self.next_subscription);
        if self
            .conn
            .respond(id, Ok(json!({"subscription": subscription})))
            .await
            .is_err()
        {
            return;
        }
        let mut subscriptions = self.subscriptions.lock().expect("subscription lock");
        let task = tokio::spawn(forward_events(
            self.conn.clone(),
            subscription.clone(),
            serde_json::to_value(snapshot).unwrap_or(Value::Null),
            events,
            self.subscriptions.clone(),
        ));
        subscriptions.insert(subscription, task.abort_handle());
    }

    fn unsubscribe(&self, params: &Value) -> Result<Value, ErrorObject> {
        let subscription = params
            .get("subscription")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                ErrorObject::invalid_params(
                    "runner.unsubscribe needs params.subscription, the id runner.subscribe returned",
                )
            })?;
        let handle = self
            .subscriptions
            .lock()
            .expect("subscription lock")
            .remove(subscription);
        match handle {
            Some(handle) => {
                handle.abort();
                Ok(json!({}))
            }
            None => Err(ErrorObject::invalid_params(format!(
                "no subscription {subscription:?} on this connection"
            ))),
        }
    }
}

/// Forward runner events to one subscription until it is ended, the client is gone, or it
/// falls behind.
async fn forward_events(
    conn: Connection,
    subscription: String,
    snapshot: Value,
    mut events: broadcast::Receiver<crate::events::Event>,
    subscriptions: Arc<Mutex<HashMap<String, AbortHandle>>>,
) {
    let send = |event: Value| {
        conn.notify(
            EVENT_METHOD,
            json!({"subscription": subscription, "event": event}),
        )
    };
    if send(json!({"event": "snapshot", "status": snapshot}))
        .await
        .is_ok()
    {
        loop {
            match events.recv().await {
                Ok(event) => {
                    let value = serde_json::to_value(&event).unwrap_or(Value::Null);
                    if send(value).await.is_err() {
                        break;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(%subscription, missed, "event subscriber too far behind; dropped");
                    let _ = send(json!({
                        "event": "dropped",
                        "reason": format!(
                            "this subscriber fell more than {EVENT_BACKLOG} events behind ({missed} missed); subscribe again for a fresh snapshot"
                        ),
                    }))
                    .await;
                    break;
                }
                Err(broadcast::error::RecvError::Closed) => {
                    let _ =
                        send(json!({"event": "dropped", "reason": "the runner is stopping"})).await;
                    break;
                }
            }
        }
    }
    subscriptions
        .lock()
        .expect("subscription lock")
        .remove(&subscription);
}

/// The requesting client's confirmation door: `host.confirm` on its connection, with no
/// timeout of its own (the registry's timeout drops this future, which sends `$/cancel`).
/// An error reply is a denial; a closed connection cannot answer.
fn client_door(conn: Connection) -> Door {
    Arc::new(move |pending: PendingConfirmation| {
        let conn = conn.clone();
        Box::pin(async move {
            let request = &pending.request;
            let params = json!({
                "id": pending.id,
                "op": request.op,
                "args": request.args,
                "provenance": request.provenance,
                "summary": request.summary,
            });
            match conn.request("host.confirm", params, None).await {
                Ok(answer) => Some(read_answer(&answer)),
                // The connection's own "closed" error (an error reply from the client carries
                // the client's code).
                Err(e) if e.kind() == ErrorCode::PluginError && conn.is_closed() => None,
                Err(e) => {
                    tracing::debug!(error = %e, "host.confirm answered with an error: denied");
                    Some(false)
                }
            }
        })
    })
}

fn internal(e: serde_json::Error) -> ErrorObject {
    ErrorObject::internal(format!("cannot serialise the result: {e}"))
}

/// `params[key]` as a boolean: absent or `null` is `false`; anything but a JSON boolean is
/// refused (a string `"false"` must not be read as true, nor `"true"` as false).
fn optional_bool(params: &Value, key: &str) -> Result<bool, ErrorObject> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(ErrorObject::invalid_params(format!(
            "params.{key} must be true or false, not {other}"
        ))),
    }
}

/// `params.timeout_ms` when it is a positive integer; anything else is ignored
/// (PROTOCOL.md §7).
fn timeout_ms(params: &Value) -> Option<u64> {
    params
        .get("timeout_ms")
        .and_then(Value::as_u64)
        .filter(|ms| *ms > 0)
}

fn required_str<'a>(params: &'a Value, key: &str, method: &str) -> Result<&'a str, ErrorObject> {
    params
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| {
            ErrorObject::invalid_params(format!("{method} needs params.{key}, a non-empty string"))
        })
}

/// `runner.command`.
async fn command(runner: Arc<Runner>, params: Value, door: Door) -> Result<Value, ErrorObject> {
    let utterance = params
        .get("utterance")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            ErrorObject::invalid_params(
                "runner.command needs params.utterance, a non-empty string (e.g. \"open youtube\")",
            )
        })?
        .to_owned();
    let options = CommandOptions {
        dry_run: optional_bool(&params, "dry_run")?,
        timeout_ms: timeout_ms(&params),
        provenance: Some(Provenance::from_value(params.get("provenance"))?),
        context: params.get("context").filter(|c| !c.is_null()).cloned(),
        confirm_timeout_ms: None,
    };
    let outcome = runner.command(&utterance, &options, Some(door)).await?;
    serde_json::to_value(outcome).map_err(internal)
}

/// `runner.audit {since?}`: the recent gate decisions, oldest first.
fn audit(runner: &Runner, params: &Value) -> Result<Value, ErrorObject> {
    let since = match params.get("since") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_u64().ok_or_else(|| {
            ErrorObject::invalid_params(
                "runner.audit: params.since must be Unix seconds (a whole number)",
            )
        })?),
    };
    serde_json::to_value(runner.audit(since)).map_err(internal)
}

/// The plugin `name` designates: the one with that id, else the first of that kind
/// (reference §8.6).
fn find_plugin<'a>(plugins: &'a [PluginReport], name: &str) -> Option<&'a PluginReport> {
    plugins
        .iter()
        .find(|p| p.id == name)
        .or_else(|| plugins.iter().find(|p| p.kind == name))
}

/// Methods whose params must say their provenance explicitly (reference §8.1).
fn needs_explicit_provenance(method: &str) -> bool {
    method == "action.invoke" || method == "host.action" || method.starts_with("input.")
}

/// `runner.invoke`: relay a call to one plugin. Acting methods pass the policy gates first:
/// `action.invoke`, `host.action` and `input.*` always, and every other method unless the
/// plugin's `plugin.describe` lists it as side-effect-free (the older runner checked only
/// `action.invoke`; reference §12, item 30).
async fn invoke(
    runner: Arc<Runner>,
    params: Value,
    door: Door,
    scope: Scope,
) -> Result<Value, ErrorObject> {
    let name = required_str(&params, "plugin", "runner.invoke")?;
    let method = required_str(&params, "method", "runner.invoke")?;
    // The handshake and protocol control messages are the runner's own business.
    if method == "protocol.hello" || method.starts_with("$/") {
        return Err(ErrorObject::invalid_params(format!(
            "runner.invoke cannot send {method:?}: the handshake and $/ messages belong to the runner"
        )));
    }
    let call_params = match params.get("params") {
        None | Some(Value::Null) => json!({}),
        Some(v @ Value::Object(_)) => v.clone(),
        Some(_) => {
            return Err(ErrorObject::invalid_params(
                "runner.invoke: params.params must be an object",
            ));
        }
    };
    let supervisor = &runner.supervisor;
    let (id, side_effect_free) = match supervisor.is_side_effect_free(name, method) {
        Some(free) => (name.to_owned(), free),
        None => {
            let plugins = runner.plugins();
            let id = find_plugin(&plugins, name)
                .map(|p| p.id.clone())
                .ok_or_else(|| {
                    ErrorObject::new(
                        ErrorCode::CapabilityMissing,
                        format!("no plugin {name:?} (neither an id nor a kind); see runner.status"),
                    )
                })?;
            let free = supervisor.is_side_effect_free(&id, method).unwrap_or(false);
            (id, free)
        }
    };
    if needs_explicit_provenance(method) || !side_effect_free {
        gate(&runner, method, &call_params, door).await?;
    }
    // The plugin's own callbacks while serving this call run with the client's declared
    // provenance, so an untrusted relay cannot be laundered through `host.action`.
    let provenance = Provenance::from_value(call_params.get("provenance"))?;
    let timeout = supervisor.effective_timeout(timeout_ms(&call_params));
    // Handles in the request become visible to the plugin, and those in its reply to the
    // client, except those the client named without seeing them.
    let plugin_scope = Scope::Plugin(id.clone());
    let unseen = runner
        .handles
        .as_ref()
        .map(|store| {
            store.pass(&scope, &plugin_scope, &call_params);
            store.unseen(&scope, &call_params)
        })
        .unwrap_or_default();
    let result = supervisor
        .call_as(&id, method, call_params, timeout, provenance)
        .await?;
    if let Some(store) = &runner.handles {
        adopt_handles(supervisor, store, &id, &plugin_scope, &result).await;
        store.pass_except(&plugin_scope, &scope, &result, &unseen);
    }
    Ok(result)
}

/// Handles adopted from one reply at most.
const MAX_ADOPTED: usize = 16;

/// Handles in a plugin's reply that the store does not hold are fetched from the plugin
/// (`handle.fetch {handle}` → `{data_b64}`) and adopted into its scope, but only when the
/// bytes hash to the digest the handle names (the older runner trusted the plugin's word).
async fn adopt_handles(
    supervisor: &crate::supervisor::Supervisor,
    store: &crate::handles::HandleStore,
    plugin: &str,
    scope: &Scope,
    result: &Value,
) {
    for digest in store.unknown(result).into_iter().take(MAX_ADOPTED) {
        let handle = format!("{}{digest}", crate::handles::PREFIX);
        let timeout = supervisor.effective_timeout(None);
        let outcome = match supervisor
            .call(plugin, "handle.fetch", json!({"handle": handle}), timeout)
            .await
        {
            Ok(reply) => match reply
                .get("data_b64")
                .and_then(Value::as_str)
                .and_then(b64_decode)
            {
                Some(bytes) => store.adopt(scope, &digest, &bytes),
                None => Err(ErrorObject::invalid_params(
                    "its handle.fetch reply has no valid data_b64",
                )),
            },
            Err(e) => Err(e),
        };
        match outcome {
            Ok(()) => tracing::debug!(plugin, %handle, "handle adopted from a plugin"),
            Err(e) => {
                tracing::warn!(plugin, %handle, error = %e.message, "a plugin's handle was not adopted")
            }
        }
    }
}

/// `handle.create`, `handle.fetch`, `handle.stat`, `handle.retain` and `handle.release`
/// (PROTOCOL.md §10).
pub(crate) fn handle_method(
    runner: &Runner,
    scope: &Scope,
    method: &str,
    params: &Value,
) -> Result<Value, ErrorObject> {
    let store = runner.handles.as_ref().ok_or_else(|| {
        ErrorObject::new(
            ErrorCode::CapabilityMissing,
            "the handle store is unavailable (its directory could not be made; see the runner log)",
        )
    })?;
    if method == "handle.create" {
        let bytes = create_bytes(params, store.quota())?;
        return store.create(scope, &bytes);
    }
    let handle = required_str(params, "handle", method)?;
    match method {
        "handle.fetch"
            if params.get("offset").is_some_and(|v| !v.is_null())
                || params.get("length").is_some_and(|v| !v.is_null()) =>
        {
            let number = |key: &str| match params.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                    ErrorObject::invalid_params(format!(
                        "handle.fetch: {key} must be a whole number of bytes"
                    ))
                }),
            };
            let offset = number("offset")?.unwrap_or(0);
            let length = number("length")?.unwrap_or(crate::handles::MAX_INLINE);
            let (size, bytes) = store.read_range(scope, handle, offset, length)?;
            let digest = crate::handles::parse(handle).unwrap_or_default();
            Ok(json!({
                "offset": offset,
                "length": bytes.len(),
                "size": size,
                "sha256": digest,
                "data_b64": b64_encode(&bytes),
            }))
        }
        "handle.fetch" => {
            let bytes = store.fetch(scope, handle)?;
            let digest = crate::handles::digest_hex(&bytes);
            Ok(json!({"size": bytes.len(), "sha256": digest, "data_b64": b64_encode(&bytes)}))
        }
        "handle.stat" => store.stat(scope, handle),
        "handle.retain" => store.retain(scope, handle),
        _ => store.release(scope, handle),
    }
}

/// `fd.pass {kind, meta}`: the result and the descriptor its response frame carries.
///
/// * `handle`: a read-only descriptor of `meta.handle`'s blob; `{kind, handle, size}`.
/// * `memfd`: a sealed memfd (close-on-exec; it cannot grow or shrink) holding `meta.data`
///   (a string) or `meta.data_b64`, at least `meta.size` bytes; `{kind, size}`.
/// * `memfd.ring`: a ring of `meta.capacity` slots of `meta.frame_size` bytes (PROTOCOL.md
///   §10.4), holding the frames of `meta.frames` (strings) if given, closed when
///   `meta.close` is true; `{kind, capacity, frame_size}`.
pub(crate) fn fd_pass(
    runner: &Runner,
    scope: &Scope,
    params: &Value,
) -> Result<(Value, std::os::fd::OwnedFd), ErrorObject> {
    let kind = required_str(params, "kind", "fd.pass")?;
    let meta = match params.get("meta") {
        None | Some(Value::Null) => json!({}),
        Some(v @ Value::Object(_)) => v.clone(),
        Some(_) => {
            return Err(ErrorObject::invalid_params(
                "fd.pass: params.meta must be an object",
            ));
        }
    };
    let quota = runner
        .handles
        .as_ref()
        .map_or(crate::handles::DEFAULT_QUOTA, |h| h.quota());
    match kind {
        "handle" => {
            let store = runner.handles.as_ref().ok_or_else(|| {
                ErrorObject::new(
                    ErrorCode::CapabilityMissing,
                    "the handle store is unavailable",
                )
            })?;
            let handle = required_str(&meta, "handle", "fd.pass {kind: \"handle\"} (meta)")?;
            let file = store.open_blob(scope, handle)?;
            let size = file
                .metadata()
                .map_err(|e| ErrorObject::internal(format!("fd.pass: {e}")))?
                .len();
            Ok((
                json!({"kind": "handle", "handle": handle, "size": size}),
                file.into(),
            ))
        }
        "memfd" => {
            let data = if let Some(text) = meta.get("data_b64").and_then(Value::as_str) {
                b64_decode(text).ok_or_else(|| {
                    ErrorObject::invalid_params("fd.pass: meta.data_b64 is not valid base64")
                })?
            } else {
                match meta.get("data") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::String(s)) => s.as_bytes().to_vec(),
                    Some(_) => {
                        return Err(ErrorObject::invalid_params(
                            "fd.pass: meta.data must be a string",
                        ));
                    }
                }
            };
            let size = match meta.get("size") {
                None | Some(Value::Null) => data.len() as u64,
                Some(v) => v.as_u64().ok_or_else(|| {
                    ErrorObject::invalid_params(
                        "fd.pass: meta.size must be a whole number of bytes",
                    )
                })?,
            }
            .max(data.len() as u64);
            if size > quota {
                return Err(ErrorObject::new(
                    ErrorCode::CapabilityMissing,
                    format!("fd.pass: a memfd of {size} bytes is more than the {quota} byte quota"),
                ));
            }
            let fd = sealed_memfd(&data, size).map_err(|e| {
                ErrorObject::internal(format!("fd.pass: the memfd could not be made: {e}"))
            })?;
            Ok((json!({"kind": "memfd", "size": size}), fd))
        }
        "memfd.ring" => {
            let number = |key: &str| {
                meta.get(key)
                    .and_then(Value::as_u64)
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| {
                        ErrorObject::invalid_params(format!(
                            "fd.pass {{kind: \"memfd.ring\"}} needs meta.{key}, a whole number"
                        ))
                    })
            };
            let capacity = number("capacity")?;
            let frame_size = number("frame_size")?;
            let total = 256 + u64::from(capacity) * (4 + u64::from(frame_size));
            if total > quota {
                return Err(ErrorObject::new(
                    ErrorCode::CapabilityMissing,
                    format!("fd.pass: a ring of {total} bytes is more than the {quota} byte quota"),
                ));
            }
            let (mut writer, fd) = utter_protocol::ring::create(capacity, frame_size)
                .map_err(|e| ErrorObject::invalid_params(format!("fd.pass: {e}")))?;
            if let Some(frames) = meta.get("frames").and_then(Value::as_array) {
                for frame in frames {
                    let bytes = frame.as_str().ok_or_else(|| {
                        ErrorObject::invalid_params("fd.pass: meta.frames must hold strings")
                    })?;
                    let pushed = writer.push(bytes.as_bytes()).map_err(|e| {
                        ErrorObject::invalid_params(format!("fd.pass: meta.frames: {e}"))
                    })?;
                    if !pushed {
                        return Err(ErrorObject::invalid_params(
                            "fd.pass: meta.frames holds more frames than the ring's capacity",
                        ));
                    }
                }
            }
            if meta.get("close") == Some(&Value::Bool(true)) {
                writer.close();
            }
            Ok((
                json!({"kind": "memfd.ring", "capacity": capacity, "frame_size": frame_size}),
                fd,
            ))
        }
        other => Err(ErrorObject::invalid_params(format!(
            "fd.pass: unknown kind {other:?} (handle, memfd or memfd.ring)"
        ))),
    }
}

/// A close-on-exec memfd of `size` bytes starting with `data`, sealed against growing,
/// shrinking and further sealing; its offset is back at 0.
fn sealed_memfd(data: &[u8], size: u64) -> std::io::Result<std::os::fd::OwnedFd> {
    use nix::fcntl::{FcntlArg, SealFlag, fcntl};
    use nix::sys::memfd::{MFdFlags, memfd_create};
    use std::io::{Seek, Write};
    let fd = memfd_create(
        c"utter-memfd",
        MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING,
    )
    .map_err(std::io::Error::from)?;
    let mut file = std::fs::File::from(fd);
    file.set_len(size)?;
    file.write_all(data)?;
    file.rewind()?;
    fcntl(
        &file,
        FcntlArg::F_ADD_SEALS(
            SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_SEAL,
        ),
    )
    .map_err(std::io::Error::from)?;
    Ok(file.into())
}

/// The bytes of `handle.create`: `data_b64` (strict base64), else `data` (a string, as
/// UTF-8), else `size` zero bytes (a whole number no larger than the quota).
fn create_bytes(params: &Value, quota: u64) -> Result<Vec<u8>, ErrorObject> {
    if let Some(v) = params.get("data_b64").filter(|v| !v.is_null()) {
        let text = v.as_str().ok_or_else(|| {
            ErrorObject::invalid_params("handle.create: params.data_b64 must be a string")
        })?;
        return b64_decode(text).ok_or_else(|| {
            ErrorObject::invalid_params(
                "handle.create: params.data_b64 is not valid base64 (standard alphabet, padded, no whitespace)",
            )
        });
    }
    if let Some(v) = params.get("data").filter(|v| !v.is_null()) {
        let text = v.as_str().ok_or_else(|| {
            ErrorObject::invalid_params("handle.create: params.data must be a string")
        })?;
        return Ok(text.as_bytes().to_vec());
    }
    if let Some(v) = params.get("size").filter(|v| !v.is_null()) {
        let size = v.as_u64().ok_or_else(|| {
            ErrorObject::invalid_params(
                "handle.create: params.size must be a whole number of bytes",
            )
        })?;
        if size > quota {
            return Err(ErrorObject::new(
                ErrorCode::CapabilityMissing,
                format!("handle quota exceeded: {size} bytes is more than the {quota} byte quota"),
            )
            .with_data(json!({"size": size, "quota": quota})));
        }
        return Ok(vec![0; size as usize]);
    }
    Err(ErrorObject::invalid_params(
        "handle.create needs params.data_b64 (base64), params.data (a string) or params.size (bytes)",
    ))
}

/// The policy gates for one acting `runner.invoke`, with a confirmation when needed.
async fn gate(
    runner: &Runner,
    method: &str,
    params: &Value,
    door: Door,
) -> Result<(), ErrorObject> {
    if needs_explicit_provenance(method) && params.get("provenance").is_none() {
        return Err(ErrorObject::new(
            ErrorCode::Denied,
            format!(
                "runner.invoke of {method} needs params.provenance: \"user\" for the person's own request, or where the values came from (screen, a11y, ocr, title, clipboard)"
            ),
        ));
    }
    let provenance = Provenance::from_value(params.get("provenance"))?;
    let (op, args) = if method == "action.invoke" || method == "host.action" {
        let op = required_str(params, "op", method)?.to_owned();
        (op, params.get("args").cloned().unwrap_or_else(|| json!({})))
    } else if method.starts_with("input.") {
        let args = params
            .get("args")
            .cloned()
            .unwrap_or_else(|| without_envelope(params));
        ("input".to_owned(), args)
    } else {
        (method.to_owned(), without_envelope(params))
    };
    let confirm_requested = optional_bool(params, "confirm")?;
    // Only `action.invoke` has a protocol meaning for `dry_run` (PROTOCOL.md §8).
    let dry_run = method == "action.invoke" && optional_bool(params, "dry_run")?;
    let decision = runner.check_policy(&op, &args, provenance, confirm_requested)?;
    if decision.needs_confirm && !dry_run {
        let request = ConfirmRequest::new(normalise_op(&op), &args, provenance, &decision.summary);
        let resolution = runner.confirmations.ask(request.clone(), Some(door)).await;
        if !resolution.approved {
            return Err(ErrorObject::new(
                ErrorCode::Denied,
                format!("confirmation denied: {}", decision.summary),
            )
            .with_data(serde_json::to_value(&request).unwrap_or(Value::Null)));
        }
    }
    Ok(())
}

/// A method's params without the envelope members the runner reads itself.
fn without_envelope(params: &Value) -> Value {
    let mut args = params.as_object().cloned().unwrap_or_default();
    for key in ["provenance", "confirm", "timeout_ms", "dry_run"] {
        args.remove(key);
    }
    Value::Object(args)
}

fn registry() -> &'static CapabilityRegistry {
    static REGISTRY: OnceLock<CapabilityRegistry> = OnceLock::new();
    REGISTRY.get_or_init(CapabilityRegistry::builtin)
}

/// `runner.validate_plugin` (reference §9.5). Sandboxing does not exist yet, so every
/// permission is reported `enforced: false` (advisory).
fn validate_plugin(runner: &Runner, params: &Value) -> Result<Value, ErrorObject> {
    let name = required_str(params, "plugin", "runner.validate_plugin")?;
    let plugins = runner.plugins();
    let report = find_plugin(&plugins, name).ok_or_else(|| {
        ErrorObject::invalid_params(format!(
            "no plugin {name:?} (neither an id nor a kind); see runner.status"
        ))
    })?;
    let unknown: Vec<&String> = report
        .provides
        .iter()
        .chain(&report.requires)
        .filter(|c| matches!(registry().lookup(c), Lookup::Unknown))
        .collect();
    let mut available: BTreeSet<&str> = RUNNER_CAPABILITIES.iter().copied().collect();
    for p in plugins.iter().filter(|p| p.status.is_running()) {
        available.extend(p.provides.iter().map(String::as_str));
    }
    available.extend(report.provides.iter().map(String::as_str));
    let missing: Vec<&String> = report
        .requires
        .iter()
        .filter(|r| !available.contains(r.as_str()))
        .collect();
    let permissions: Vec<Value> = report
        .permissions
        .iter()
        .map(|name| json!({"name": name, "enforced": false}))
        .collect();
    Ok(json!({
        "ok": report.status.is_running() && missing.is_empty(),
        "negotiated": {"protocol": PROTOCOL_VERSION.to_string(), "abi": ABI},
        "unknown_capabilities": unknown,
        "missing_requires": missing,
        "permissions": permissions,
        "id": report.id,
        "status": report.status,
        "warnings": report.warnings,
    }))
}

fn issues_json(issues: &[ConfigIssue]) -> Vec<Value> {
    issues
        .iter()
        .map(|i| json!({"file": i.file, "line": i.line, "key": i.key, "message": i.message}))
        .collect()
}

/// `runner.reload`, in a task of its own: a client that leaves or cancels cannot stop a
/// reload halfway.
async fn reload(runner: Arc<Runner>) -> Result<Value, ErrorObject> {
    let joined = tokio::spawn(async move { runner.reload().await }).await;
    match joined {
        Ok(Ok(report)) => serde_json::to_value(report).map_err(internal),
        Ok(Err(e)) => {
            let first = e
                .errors
                .first()
                .map(ToString::to_string)
                .unwrap_or_default();
            let more = e.errors.len().saturating_sub(1);
            Err(ErrorObject::invalid_params(format!(
                "the configuration is invalid; the running one is kept: {first}{}",
                if more > 0 {
                    format!(" (and {more} more)")
                } else {
                    String::new()
                }
            ))
            .with_data(
                json!({"errors": issues_json(&e.errors), "warnings": issues_json(&e.warnings)}),
            ))
        }
        Err(e) => Err(ErrorObject::internal(format!("the reload failed: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{Event, ServiceState};
    use utter_protocol::connection::memory_pair;

    fn pending() -> PendingConfirmation {
        PendingConfirmation {
            id: "c1".into(),
            request: ConfirmRequest::new(
                "terminal",
                &json!({"command": "ls"}),
                Provenance::User,
                "run command \"ls\"",
            ),
            created: 0,
            expires: 30,
        }
    }

    #[tokio::test]
    async fn a_subscriber_that_falls_behind_is_dropped_with_a_reason() {
        let ((runner_side, _runner_rx), (_client, mut client_rx)) =
            memory_pair(ConnectionOptions::default(), ConnectionOptions::default());
        let (events, receiver) = broadcast::channel(4);
        for _ in 0..10 {
            events
                .send(Event::State {
                    state: ServiceState::Ready,
                })
                .unwrap();
        }
        let subscriptions = Arc::new(Mutex::new(HashMap::new()));
        forward_events(
            runner_side,
            "sub-1".into(),
            json!({"state": "ready"}),
            receiver,
            subscriptions,
        )
        .await;
        let mut notes = Vec::new();
        for _ in 0..2 {
            match client_rx.recv().await.unwrap() {
                Incoming::Notification(n) => notes.push(n),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(notes[0].method, "runner.event");
        assert_eq!(notes[0].params["subscription"], "sub-1");
        assert_eq!(notes[0].params["event"]["event"], "snapshot");
        assert_eq!(notes[0].params["event"]["status"]["state"], "ready");
        assert_eq!(notes[1].params["event"]["event"], "dropped");
        let reason = notes[1].params["event"]["reason"].as_str().unwrap();
        assert!(reason.contains("behind"), "{reason}");
    }

    #[tokio::test]
    async fn the_client_door_reads_answers_strictly() {
        for (reply, expected) in [
            (Ok(json!({"approved": true})), Some(true)),
            (Ok(json!(true)), Some(true)),
            (Ok(json!({"approved": "yes"})), Some(false)),
            (Err(ErrorObject::internal("no idea")), Some(false)),
            (
                Err(ErrorObject::new(ErrorCode::Cancelled, "declined")),
                Some(false),
            ),
        ] {
            let ((runner_side, _runner_rx), (client, mut client_rx)) =
                memory_pair(ConnectionOptions::default(), ConnectionOptions::default());
            let answering = tokio::spawn(async move {
                let Some(Incoming::Request(r)) = client_rx.recv().await else {
                    panic!("host.confirm expected");
                };
                assert_eq!(r.method, "host.confirm");
                assert_eq!(r.params["id"], "c1");
                assert_eq!(r.params["args"], json!({"command": "ls"}));
                client.respond(r.id, reply).await.unwrap();
            });
            let door = client_door(runner_side);
            assert_eq!(door(pending()).await, expected);
            answering.await.unwrap();
        }
        // A client that is gone cannot answer: the door stays out of the race.
        let ((runner_side, _runner_rx), (client, client_rx)) =
            memory_pair(ConnectionOptions::default(), ConnectionOptions::default());
        client.close();
        drop(client_rx);
        let door = client_door(runner_side);
        assert_eq!(door(pending()).await, None);
    }

    #[test]
    fn booleans_are_strict_and_envelopes_are_not_arguments() {
        assert!(!optional_bool(&json!({}), "dry_run").unwrap());
        assert!(!optional_bool(&json!({"dry_run": null}), "dry_run").unwrap());
        assert!(optional_bool(&json!({"dry_run": true}), "dry_run").unwrap());
        assert_eq!(
            optional_bool(&json!({"dry_run": "false"}), "dry_run")
                .unwrap_err()
                .code,
            -32602
        );
        assert_eq!(
            without_envelope(
                &json!({"text": "hi", "provenance": "user", "confirm": true, "timeout_ms": 5})
            ),
            json!({"text": "hi"})
        );
        assert_eq!(timeout_ms(&json!({"timeout_ms": 0})), None);
        assert_eq!(timeout_ms(&json!({"timeout_ms": -5})), None);
        assert_eq!(timeout_ms(&json!({"timeout_ms": 250})), Some(250));
    }
}
