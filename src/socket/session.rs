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
use utter_protocol::frame::{BodyLimit, DEFAULT_MAX_BODY, encode_frame};
use utter_protocol::handshake::{ABI, PROTOCOL_VERSION};
use utter_protocol::message::error_response_bytes;
use utter_protocol::{
    Connection, ConnectionOptions, ErrorCode, ErrorObject, Incoming, Notification, Request,
    RequestId, TrySendError,
};

use super::access::{Admission, Peer, Shared, constant_time_eq};
use super::{MAX_CONNECTIONS, SHORT_CONNECTIONS, SHORT_IDLE, Slot, SlotKind, Slots};
use utter_core::config::ConfigIssue;
use utter_core::confirm::{Door, PendingConfirmation, read_answer};
use utter_core::handles::Scope;
use utter_core::pipeline::CommandOptions;
use utter_core::policy::Provenance;
use utter_core::runner::host;
use utter_core::runner::invoke::find_plugin;
use utter_core::runner::{EVENT_BACKLOG, Runner, VERSION};
use utter_ipc::LogLine;
use utter_ipc::methods::{
    self, AuthParams, CommandParams, ConfirmParams, Request as RunnerRequest,
};

/// The largest frame body a client may send before it authenticated, in bytes (64 KiB): a
/// `runner.auth` is a few dozen. Larger frames are skipped unread and answered `-32700`.
pub(crate) const PRE_AUTH_MAX_BODY: usize = 64 * 1024;

/// Requests allowed per connection within [`RATE_WINDOW`] (reference §9.1).
const RATE_LIMIT: usize = 1000;
/// The sliding window of the rate limit.
const RATE_WINDOW: Duration = Duration::from_secs(10);
/// Subscriptions that follow the runner's log at once, over all clients (each replays the
/// kept lines: up to a few hundred KB).
pub(crate) const MAX_LOG_FOLLOWERS: usize = 16;

/// Event subscriptions one client process may hold at once, over all its connections.
pub(crate) const MAX_SUBSCRIPTIONS: usize = 16;
/// The notification that carries events.
const EVENT_METHOD: &str = "runner.event";
/// Bytes of frames that may wait for a client before its event subscriptions are dropped
/// (the events of a client that stops reading would otherwise pile up in the daemon).
pub(crate) const SUBSCRIBER_QUEUE_BYTES: usize = 4 * 1024 * 1024;

/// Bytes that may wait for all clients together before a subscriber with at least
/// [`SUBSCRIBERS_FLOOR`] waiting is dropped: one budget, so that many stalled subscribers
/// cost at most this much between them ([`utter_protocol::QueueBudget`]).
pub(crate) const SUBSCRIBERS_BUDGET: usize = 32 * 1024 * 1024;

/// What a client may have waiting and never be dropped for the shared budget, in bytes: a
/// subscriber that reads is not dropped for what others left unread (more than the largest
/// event, a command's of a 64 KiB utterance with its results, ~300 KB).
pub(crate) const SUBSCRIBERS_FLOOR: usize = 1024 * 1024;

/// How many bytes may wait for a client before the next line of a subscription's first
/// burst (the snapshot and the kept log lines) is queued: the burst goes out as the client
/// reads it, never queued whole.
const REPLAY_WINDOW: usize = 64 * 1024;

/// How long each message of a subscription's first burst (the snapshot and the kept log
/// lines) may wait for the client to read what is before it ([`REPLAY_WINDOW`]) before the
/// subscriber is dropped as one that does not read. Per message, not per burst: a client
/// that reads, however slowly, makes room within this time and keeps its subscription; one
/// that stops reading is dropped this long after it stopped.
const REPLAY_PATIENCE: Duration = Duration::from_secs(5);

/// The methods that act or answer for the person: refused to plugins and what they start
/// ([`utter_core::runner::Runner::refuse_plugin_caller`]).
const ACTING_METHODS: &[&str] = &[
    methods::COMMAND,
    methods::CONFIRM,
    methods::INVOKE,
    methods::RELOAD,
    methods::PTT,
];

/// Bytes of answers that may wait for a client before the next answer waits for it to
/// read (at most [`ANSWER_PATIENCE`]); with the subscribers' budget the same bounds hold for
/// answers as for events.
const ANSWER_QUEUE_BYTES: usize = 4 * 1024 * 1024;

/// How long an answer waits for a client to read the ones before it; then the client is
/// taken as one that does not read, and its connection is closed.
const ANSWER_PATIENCE: Duration = Duration::from_secs(10);

/// How long a notice the runner sends before it closes a connection may wait for room.
const NOTICE_PATIENCE: Duration = Duration::from_secs(1);

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

/// Who a new connection's peer is, and what the access rules make of it.
pub(super) struct Arrival {
    pub stream: UnixStream,
    pub peer: Peer,
    pub admission: Admission,
}

/// Identify the peer of a new connection (`SO_PEERCRED`, its executable) and apply the access
/// rules. `None` when its credentials cannot be read (it was refused).
pub(super) async fn identify(stream: UnixStream, shared: &Shared) -> Option<Arrival> {
    let cred = match stream.peer_cred() {
        Ok(cred) => cred,
        Err(e) => {
            if let Some(suppressed) = shared.logs.refused.allow() {
                tracing::warn!(error = %e, suppressed, "client refused: its credentials (SO_PEERCRED) cannot be read");
            }
            refuse(
                stream,
                ErrorObject::new(
                    ErrorCode::Denied,
                    "permission denied: peer credentials unavailable",
                ),
            )
            .await;
            return None;
        }
    };
    let peer = Peer::identify(cred.pid(), cred.uid());
    let admission = shared.rules().admit(&peer);
    Some(Arrival {
        stream,
        peer,
        admission,
    })
}

/// Refuse a peer the access rules rejected: one error frame, then close.
pub(super) async fn reject(peer: Peer, reason: &str, stream: UnixStream, shared: &Shared) {
    if let Some(suppressed) = shared.logs.refused.allow() {
        let exe = peer
            .exe
            .as_ref()
            .map(|e| e.display().to_string())
            .unwrap_or_default();
        tracing::warn!(pid = peer.pid.unwrap_or(0), uid = peer.uid, exe = %exe, %reason, suppressed, "client refused");
    }
    refuse(
        stream,
        ErrorObject::new(ErrorCode::Denied, reason.to_owned()),
    )
    .await;
}

/// Serve an admitted peer (or one that must authenticate) in `slot` until it leaves or the
/// socket stops.
pub(super) async fn serve_connection(
    arrival: Arrival,
    shared: Arc<Shared>,
    slot: Slot,
    slots: Arc<Slots>,
) {
    let Arrival {
        stream,
        peer,
        admission,
    } = arrival;
    let pid = peer.pid.unwrap_or(0);
    let exe = peer
        .exe
        .as_ref()
        .map(|e| e.display().to_string())
        .unwrap_or_default();
    match &admission {
        Admission::Rejected(reason) => {
            reject(peer, reason, stream, &shared).await;
            return;
        }
        Admission::Admitted(why) => {
            tracing::debug!(pid, uid = peer.uid, exe = %exe, by = %why, "client admitted")
        }
        Admission::NeedsToken => {
            tracing::debug!(pid, uid = peer.uid, exe = %exe, "client connected; it must send runner.auth")
        }
    }
    let timeouts = shared
        .runner
        .config()
        .config
        .socket
        .clone()
        .unwrap_or_default();
    let admitted = matches!(admission, Admission::Admitted(_));
    // Until it authenticates, a client's frames are small: a `runner.auth` fits, and a
    // peer without the token cannot make the runner buffer megabytes per connection.
    let body_limit = BodyLimit::new(if admitted {
        DEFAULT_MAX_BODY
    } else {
        PRE_AUTH_MAX_BODY
    });
    // Every read names the process that wrote it: a connection admitted for its peer's
    // executable is only that peer's (a process that takes its descriptor gains nothing).
    let spawned = Connection::spawn_unix_tracking_senders(
        stream,
        ConnectionOptions {
            id_prefix: Some("0:".into()),
            label: format!("client pid {pid}"),
            frame_timeout: Some(Duration::from_millis(timeouts.frame_timeout_ms)),
            inbound_limit: Some(body_limit.clone()),
            shared_queue: Some(shared.subscribers.clone()),
            ..Default::default()
        },
    );
    let (conn, incoming, senders) = match spawned {
        Ok(spawned) => spawned,
        Err(e) => {
            tracing::warn!(pid, error = %e, "client refused: SO_PASSCRED cannot be set on its connection");
            return;
        }
    };
    let connection = next_connection();
    // A client's handles count against one share over all its connections.
    if let (Some(store), Some(pid)) = (
        &shared.runner.handles,
        peer.pid.and_then(|p| u32::try_from(p).ok()),
    ) {
        store.set_owner(&Scope::Client(connection), pid);
    }
    let session = Session {
        shared,
        conn,
        peer,
        authenticated: admitted,
        admitted_as_peer: admitted,
        senders,
        writers: Vec::new(),
        body_limit,
        recent: VecDeque::new(),
        limited: false,
        limited_auth_logged: false,
        work: Arc::new(Mutex::new(HashMap::new())),
        subscriptions: Arc::new(Mutex::new(HashMap::new())),
        dropped: Arc::new(Mutex::new(None)),
        next_subscription: 0,
        idle_timeout: Duration::from_millis(timeouts.idle_timeout_ms),
        slot,
        slots,
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
    /// Admitted for who connected (its executable), not for a token: then only that process
    /// may write on the connection.
    admitted_as_peer: bool,
    /// The processes that wrote on the connection ([`utter_protocol::senders`]).
    senders: utter_protocol::senders::Senders,
    /// Writers other than the connecting peer seen so far (pids), at most 16.
    writers: Vec<u32>,
    /// The inbound frame limit: [`PRE_AUTH_MAX_BODY`] until the client authenticated.
    body_limit: BodyLimit,
    /// When the requests of the last [`RATE_WINDOW`] arrived.
    recent: VecDeque<Instant>,
    /// Whether the rate limit refusal was logged (once per episode).
    limited: bool,
    /// Whether a refusal for want of authentication was logged (once per connection).
    limited_auth_logged: bool,
    work: Work,
    subscriptions: Arc<Mutex<HashMap<String, AbortHandle>>>,
    /// Why the runner last ended one of this connection's subscriptions (`sub-<n> was
    /// dropped: <reason>`), until the connection's closing notice repeats it.
    dropped: Arc<Mutex<Option<String>>>,
    next_subscription: u64,
    /// `[socket] idle_timeout_ms`: how long the connection may send nothing while nothing
    /// of its own runs ([`SHORT_IDLE`] at most in a short-call slot).
    idle_timeout: Duration,
    /// The connection slot it holds.
    slot: Slot,
    /// Where a short-call slot is exchanged for a long-lived one.
    slots: Arc<Slots>,
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
    /// This connection as the audit trail names it: `client <n> (pid <pid>, <exe>)`.
    fn describe(&self) -> String {
        let pid = self
            .peer
            .pid
            .map_or_else(|| "pid ?".to_owned(), |p| format!("pid {p}"));
        match &self.peer.exe {
            Some(exe) => format!("client {} ({pid}, {})", self.connection, exe.display()),
            None => format!("client {} ({pid})", self.connection),
        }
    }

    async fn run(mut self, mut incoming: mpsc::Receiver<Incoming>) {
        let mut stop = self.shared.stop.clone();
        let auth_deadline = tokio::time::Instant::now() + AUTH_TIMEOUT;
        let mut last_heard = tokio::time::Instant::now();
        let stopping = loop {
            if *stop.borrow_and_update() {
                break true;
            }
            let idle_deadline = last_heard + self.idle_limit();
            tokio::select! {
                _ = tokio::time::sleep_until(idle_deadline), if self.authenticated => {
                    if self.busy() {
                        // Something of its own runs (a subscription, a stream, a request):
                        // waiting for it is not idling.
                        last_heard = tokio::time::Instant::now();
                        continue;
                    }
                    let limit = self.idle_limit().as_millis();
                    tracing::info!(
                        pid = self.peer.pid.unwrap_or(0),
                        "client sent nothing for {limit} ms and has nothing running; closing",
                    );
                    let idle = if self.slot.kind == SlotKind::Short {
                        format!("idle for {limit} ms with nothing running in a connection slot kept for short calls; connect again when needed")
                    } else {
                        format!("idle for {limit} ms with nothing running ([socket] idle_timeout_ms); connect again when needed")
                    };
                    // A subscription the runner ended is why nothing runs: the last thing
                    // the client reads says so, not only that it idled.
                    let reason = match self.dropped.lock().expect("dropped lock").take() {
                        Some(dropped) => format!("{dropped}; then {idle}"),
                        None => idle,
                    };
                    self.notice("runner.closing", json!({"reason": reason}))
                        .await;
                    break false;
                }
                _ = tokio::time::sleep_until(auth_deadline), if !self.authenticated => {
                    if let Some(suppressed) = self.shared.logs.auth.allow() {
                        tracing::warn!(
                            pid = self.peer.pid.unwrap_or(0),
                            suppressed,
                            "client sent no runner.auth within {} s; closing",
                            AUTH_TIMEOUT.as_secs()
                        );
                    }
                    self.notice(
                            "runner.closing",
                            json!({"reason": format!("not authenticated within {} s: send runner.auth {{token}} first", AUTH_TIMEOUT.as_secs())}),
                        )
                        .await;
                    break false;
                }
                message = incoming.recv() => { last_heard = tokio::time::Instant::now(); match message {
                    Some(Incoming::Request(request)) => {
                        // One span per client request: a command can be followed through
                        // the gate and every plugin call it makes (their spans nest here).
                        let span = tracing::info_span!(
                            "request",
                            client = self.connection,
                            id = %utter_protocol::text::clip(&request.id.to_string(), 64),
                            method = %utter_protocol::text::clip(&request.method, 120)
                        );
                        tracing::Instrument::instrument(self.on_request(request), span).await;
                        // Closed while answering (a client that does not read its answers).
                        if self.conn.is_closed() {
                            break false;
                        }
                    }
                    Some(Incoming::Notification(note)) => self.on_notification(note).await,
                    None => break false,
                }},
                changed = stop.changed() => {
                    if changed.is_err() {
                        break true;
                    }
                }
            }
        };
        self.finish(stopping).await;
    }

    /// Answer request `id`; a client that does not read its answers (more than
    /// [`ANSWER_QUEUE_BYTES`] waiting for [`ANSWER_PATIENCE`]) is closed, so that it holds
    /// neither unbounded memory nor a session that no longer checks its own timeouts.
    /// Whether it was sent.
    async fn answer(&self, id: RequestId, result: Result<Value, ErrorObject>) -> bool {
        answer_on(&self.conn, id, result).await
    }

    /// Send a notice (a closing, a subscription or stream ended): it waits at most
    /// [`NOTICE_PATIENCE`] for room, a client that does not read not holding the session.
    async fn notice(&self, method: &str, params: Value) {
        let _ = tokio::time::timeout(NOTICE_PATIENCE, self.conn.notify(method, params)).await;
    }

    /// How long the connection may send nothing while nothing of its own runs.
    fn idle_limit(&self) -> Duration {
        match self.slot.kind {
            SlotKind::Short => self.idle_timeout.min(SHORT_IDLE),
            SlotKind::General | SlotKind::Reserved => self.idle_timeout,
        }
    }

    /// Make sure the connection holds a slot for long-lived work (a subscription, a stream):
    /// a short-call slot is exchanged for a free long-lived one.
    ///
    /// # Errors
    /// `-32003` when every long-lived slot is taken.
    fn take_long_slot(&mut self, what: &str) -> Result<(), ErrorObject> {
        if self.slot.kind != SlotKind::Short {
            return Ok(());
        }
        match self.slots.take_long(self.admitted_as_peer) {
            Some(slot) => {
                self.slot = slot;
                Ok(())
            }
            None => Err(ErrorObject::new(
                ErrorCode::Denied,
                format!(
                    "cannot start {what}: the runner's {} connection slots for commands, subscriptions and streams are in use, and the last {SHORT_CONNECTIONS} are kept for short calls such as `utter status`; end a follower (`utter events`) or try again later",
                    MAX_CONNECTIONS - SHORT_CONNECTIONS
                ),
            )),
        }
    }

    /// Whether anything of this connection's own runs: a request, an event subscription,
    /// a stream.
    fn busy(&self) -> bool {
        !self.work.lock().expect("work lock").is_empty()
            || !self
                .subscriptions
                .lock()
                .expect("subscription lock")
                .is_empty()
            || self.shared.runner.streams.owns_any(self.connection)
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
                    .answer(
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
                self.notice(
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
                self.notice(
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
                .answer(
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
                if let Some(suppressed) = self.shared.logs.auth.allow() {
                    tracing::warn!(
                        pid = self.peer.pid.unwrap_or(0),
                        uid = self.peer.uid,
                        exe = %self.peer.exe.as_ref().map(|e| e.display().to_string()).unwrap_or_default(),
                        suppressed,
                        "client over the rate limit; refusing its requests"
                    );
                }
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

    /// Look at who wrote since the last request: another user, or (on a connection admitted
    /// for its peer) a process the access rules would not admit, ends the connection.
    fn check_writers(&mut self) -> Result<(), ErrorObject> {
        let (writers, overflowed) = self.senders.take();
        let own = self.peer.pid.and_then(|p| u32::try_from(p).ok());
        let rules = self.shared.rules();
        for w in writers {
            // 0: bytes written before the kernel was asked for credentials (the peer's
            // first request, raced with the accept).
            if w.pid == 0 || Some(w.pid) == own {
                continue;
            }
            if w.uid != self.peer.uid {
                return Err(ErrorObject::new(
                    ErrorCode::Denied,
                    format!(
                        "a process of uid {} wrote on this connection; closed",
                        w.uid
                    ),
                ));
            }
            if self.admitted_as_peer {
                let other = Peer::identify(i32::try_from(w.pid).ok(), w.uid);
                if !matches!(rules.admit(&other), Admission::Admitted(_)) {
                    return Err(ErrorObject::new(
                        ErrorCode::Denied,
                        format!(
                            "pid {} ({}), which is not admitted, wrote on a connection admitted for pid {}; closed",
                            w.pid,
                            other.exe.as_ref().map_or_else(
                                || "?".to_owned(),
                                |e| utter_protocol::text::clip(&e.display().to_string(), 200)
                            ),
                            own.unwrap_or(0)
                        ),
                    ));
                }
            }
            if self.writers.len() < 16 && !self.writers.contains(&w.pid) {
                self.writers.push(w.pid);
            }
        }
        if overflowed && self.admitted_as_peer {
            return Err(ErrorObject::new(
                ErrorCode::Denied,
                "more than 16 processes wrote on this connection; closed",
            ));
        }
        Ok(())
    }

    /// Refuse an acting method (command, confirm, invoke, reload, push-to-talk) when any
    /// process that wrote on this connection is a plugin of this runner or one it started.
    fn refuse_plugins(&self, method: &str) -> Result<(), ErrorObject> {
        let connected = self.peer.pid.and_then(|p| u32::try_from(p).ok());
        for pid in connected.into_iter().chain(self.writers.iter().copied()) {
            self.shared.runner.refuse_plugin_caller(Some(pid), method)?;
        }
        Ok(())
    }

    async fn on_request(&mut self, request: Request) {
        if let Err(e) = self.check_writers() {
            if let Some(suppressed) = self.shared.logs.refused.allow() {
                tracing::warn!(
                    pid = self.peer.pid.unwrap_or(0),
                    suppressed,
                    "{}",
                    e.message
                );
            }
            let _ = self.answer(request.id, Err(e)).await;
            self.conn.close();
            return;
        }
        let Request { id, method, params } = request;
        if ACTING_METHODS.contains(&method.as_str()) {
            if let Err(e) = self.refuse_plugins(&method) {
                let _ = self.answer(id, Err(e)).await;
                return;
            }
        }
        // Acks are constant work and come at the frame rate of a reliable stream: they do not
        // count against the rate limit.
        let rate = if method == "stream.ack" && self.authenticated {
            Ok(())
        } else {
            self.admit_rate()
        };
        if let Err(e) = rate {
            let _ = self.answer(id, Err(e)).await;
            return;
        }
        if !self.authenticated && ![methods::AUTH, methods::VERSION].contains(&method.as_str()) {
            if !self.limited_auth_logged {
                self.limited_auth_logged = true;
                if let Some(suppressed) = self.shared.logs.auth.allow() {
                    tracing::info!(
                        pid = self.peer.pid.unwrap_or(0),
                        uid = self.peer.uid,
                        exe = %self.peer.exe.as_ref().map(|e| e.display().to_string()).unwrap_or_default(),
                        method = %utter_protocol::text::clip(&method, 120),
                        suppressed,
                        "client refused: not authenticated (it is not an admitted binary and sent no token yet)"
                    );
                }
            }
            let _ = self
                .answer(id, Err(ErrorObject::new(ErrorCode::Denied, AUTH_REQUIRED)))
                .await;
            return;
        }
        // A command may wait for a person (a confirmation) for as long as its timeout: it
        // takes a long-lived slot, so that waiting commands cannot hold the ones kept for
        // short calls.
        if [methods::COMMAND, methods::INVOKE].contains(&method.as_str())
            && let Err(e) = self.take_long_slot("a command")
        {
            self.answer(id, Err(e)).await;
            return;
        }
        let runner = self.shared.runner.clone();
        // The runner's own methods, typed (utter_ipc::methods::Request: the same types the
        // clients build their calls from); then the protocol's handle, fd and stream methods.
        let request = match RunnerRequest::parse(&method, &params) {
            Some(Ok(request)) => Some(request),
            Some(Err(e)) => {
                let _ = self.answer(id, Err(e)).await;
                return;
            }
            None => None,
        };
        if let Some(request) = request {
            let result = match request {
                RunnerRequest::Auth(p) => self.auth(&p),
                RunnerRequest::Version => Ok(json!({
                    "version": VERSION,
                    "protocol": PROTOCOL_VERSION.to_string(),
                    "abi": ABI,
                    "authenticated": self.authenticated,
                })),
                RunnerRequest::Status | RunnerRequest::Plugins => status(&runner),
                RunnerRequest::Pending => {
                    serde_json::to_value(runner.confirmations.pending()).map_err(internal)
                }
                RunnerRequest::Audit(p) => {
                    serde_json::to_value(runner.audit(p.since)).map_err(internal)
                }
                RunnerRequest::History(p) => {
                    serde_json::to_value(runner.history(p.limit)).map_err(internal)
                }
                RunnerRequest::Confirm(p) => self.confirm(p),
                RunnerRequest::ValidatePlugin(p) => validate_plugin(&runner, &p.plugin),
                RunnerRequest::Subscribe(p) => {
                    // `logs: true` asks for the runner's log lines too.
                    self.subscribe(id, p.logs.unwrap_or(false)).await;
                    return;
                }
                RunnerRequest::Unsubscribe(p) => self.unsubscribe(&p.subscription),
                RunnerRequest::Context => {
                    self.spawn_work(id, context(runner)).await;
                    return;
                }
                RunnerRequest::Command(p) => {
                    let door = client_door(self.conn.clone());
                    self.spawn_work(id, command(runner, p, door)).await;
                    return;
                }
                RunnerRequest::Invoke(p) => {
                    let door = client_door(self.conn.clone());
                    let scope = self.scope.clone();
                    let client = self.describe();
                    self.spawn_work(
                        id,
                        async move { runner.invoke(p, door, scope, &client).await },
                    )
                    .await;
                    return;
                }
                RunnerRequest::Reload => {
                    self.spawn_work(id, reload(runner)).await;
                    return;
                }
                RunnerRequest::Ptt(p) => {
                    utter_core::ptt::socket_method(&runner.ptt, &p.action, p.dictation)
                }
                // A request a newer utter-ipc knows and this runner does not serve.
                _ => Err(ErrorObject::new(
                    ErrorCode::MethodNotFound,
                    format!(
                        "unknown method: {}",
                        utter_protocol::text::clip(&method, 200)
                    ),
                )),
            };
            let _ = self.answer(id, result).await;
            return;
        }
        let result = match method.as_str() {
            "handle.create" | "handle.fetch" | "handle.stat" | "handle.retain"
            | "handle.release" => host::handle_method(&runner, &self.scope, &method, &params),
            "fd.pass" => match host::fd_pass(&runner, &self.scope, &params) {
                Ok((result, fd)) => {
                    if let Err(e) = self.conn.respond_with_fd(id.clone(), result, fd).await {
                        let _ = self.answer(id, Err(e)).await;
                    }
                    return;
                }
                Err(e) => Err(e),
            },
            "stream.subscribe" => {
                if let Err(e) = self.take_long_slot("a stream") {
                    let _ = self.answer(id, Err(e)).await;
                    return;
                }
                // Its own task: the plugin is asked first; the answer goes out before the
                // first frame.
                let conn = self.conn.clone();
                let owner = self.connection;
                tokio::spawn(async move {
                    let hub = runner.streams.clone();
                    match runner.subscribe_stream(conn.clone(), owner, &params).await {
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
                format!("unknown method: {}", utter_protocol::text::clip(other, 200)),
            )),
        };
        let _ = self.answer(id, result).await;
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
                    .answer(
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
        let task = tokio::spawn(tracing::Instrument::in_current_span(async move {
            let result = work.await;
            let still_mine = map.lock().expect("work lock").remove(&task_id).is_some();
            if still_mine {
                answer_on(&conn, task_id, result).await;
            }
        }));
        let mut map = self.work.lock().expect("work lock");
        match map.get_mut(&id) {
            Some(slot) => *slot = Some(task.abort_handle()),
            // Finished already (nothing to do) or cancelled before its handle was known.
            None => task.abort(),
        }
    }

    fn auth(&mut self, params: &AuthParams) -> Result<Value, ErrorObject> {
        let token = params.token.as_str();
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
            self.body_limit.set(DEFAULT_MAX_BODY);
            tracing::debug!(
                pid = self.peer.pid.unwrap_or(0),
                "client authenticated with the token"
            );
            Ok(json!({}))
        } else {
            if let Some(suppressed) = self.shared.logs.auth.allow() {
                tracing::warn!(
                    pid = self.peer.pid.unwrap_or(0),
                    uid = self.peer.uid,
                    exe = %self.peer.exe.as_ref().map(|e| e.display().to_string()).unwrap_or_default(),
                    suppressed,
                    "client refused: invalid token"
                );
            }
            Err(ErrorObject::new(ErrorCode::Denied, "invalid token"))
        }
    }

    fn confirm(&self, params: ConfirmParams) -> Result<Value, ErrorObject> {
        let ConfirmParams {
            id,
            approved,
            digest,
        } = params;
        // With `digest`, the answer only counts for exactly the step that was shown.
        let confirmations = &self.shared.runner.confirmations;
        match digest {
            None => confirmations.answer(&id, approved, methods::CONFIRM)?,
            Some(digest) => {
                confirmations.answer_digest(&id, &digest, approved, methods::CONFIRM)?
            }
        }
        tracing::info!(pid = self.peer.pid.unwrap_or(0), %id, approved, "confirmation answered over the socket");
        Ok(json!({}))
    }

    /// Answer `{subscription}`, then start forwarding: a snapshot first, then each event
    /// (with `logs`, the runner's last log lines after the snapshot, then each new one).
    async fn subscribe(&mut self, id: RequestId, logs: bool) {
        if let Err(e) = self.take_long_slot("a subscription") {
            let _ = self.answer(id, Err(e)).await;
            return;
        }
        let share = match self.shared.subscription_share(&self.peer, self.connection) {
            Ok(share) => share,
            Err(e) => {
                let _ = self.answer(id, Err(e)).await;
                return;
            }
        };
        // Log followers each hold the runner's kept lines while they replay: a few at once.
        let log_slot = if logs {
            match self.shared.log_followers.clone().try_acquire_owned() {
                Ok(slot) => Some(slot),
                Err(_) => {
                    let _ = self
                        .answer(
                            id,
                            Err(ErrorObject::new(
                                ErrorCode::Denied,
                                format!(
                                    "at most {MAX_LOG_FOLLOWERS} subscriptions follow the runner's log at once; subscribe without logs, or try again when one has ended"
                                ),
                            )),
                        )
                        .await;
                    return;
                }
            }
        } else {
            None
        };
        // A subscription that starts again is the answer to an earlier drop.
        self.dropped.lock().expect("dropped lock").take();
        let runner = &self.shared.runner;
        // Subscribe before the snapshot, so nothing between the two is lost.
        let events = runner.subscribe();
        let logs = logs.then(crate::logs::follow);
        let snapshot = runner.status();
        self.next_subscription += 1;
        let subscription = format!("sub-{}", self.next_subscription);
        if !self
            .answer(id, Ok(json!({"subscription": subscription})))
            .await
        {
            return;
        }
        let mut subscriptions = self.subscriptions.lock().expect("subscription lock");
        let forward = forward_events(
            self.conn.clone(),
            subscription.clone(),
            serde_json::to_value(snapshot).unwrap_or(Value::Null),
            events,
            logs,
            self.subscriptions.clone(),
            self.dropped.clone(),
        );
        // The share is given back when the subscription ends, however it ends.
        let task = tokio::spawn(async move {
            let _held = (share, log_slot);
            forward.await
        });
        subscriptions.insert(subscription, task.abort_handle());
    }

    fn unsubscribe(&self, subscription: &str) -> Result<Value, ErrorObject> {
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
/// falls behind: more than the runner's event backlog behind the events, or more than
/// [`SUBSCRIBER_QUEUE_BYTES`] of frames waiting for a client that does not read them.
///
/// Events are queued without waiting on the client (`try_notify`), so a subscriber that
/// never reads holds at most that many bytes of the daemon's memory, whatever its socket's
/// write is doing; the final `dropped` notice is queued past the bound (it is small).
///
/// With `logs` (the last lines and a receiver, [`crate::logs::follow`]), log lines go out as
/// `{event: "log", ...}` too; a follower that falls behind the log misses the oldest lines
/// and is told how many in a line of its own, and stays subscribed.
async fn forward_events(
    conn: Connection,
    subscription: String,
    snapshot: Value,
    mut events: broadcast::Receiver<utter_core::events::Event>,
    logs: Option<(Vec<LogLine>, broadcast::Receiver<LogLine>)>,
    subscriptions: Arc<Mutex<HashMap<String, AbortHandle>>>,
    dropped: Arc<Mutex<Option<String>>>,
) {
    let send = |event: Value| {
        conn.try_notify(
            EVENT_METHOD,
            json!({"subscription": subscription, "event": event}),
            SUBSCRIBER_QUEUE_BYTES,
        )
    };
    let drop_with = |reason: String| {
        *dropped.lock().expect("dropped lock") =
            Some(format!("{subscription} was dropped: {reason}"));
        // Past the bound on purpose (try_notify keeps a slot for it): the client learns why,
        // whenever it reads again.
        let _ = conn.try_notify_final(
            EVENT_METHOD,
            json!({"subscription": subscription, "event": {"event": "dropped", "reason": reason}}),
        );
    };
    let log_event = |line: LogLine| {
        serde_json::to_value(utter_core::events::Event::Log(line)).unwrap_or(Value::Null)
    };
    // The snapshot and the kept log lines go out as the client reads them: each waits until
    // at most REPLAY_WINDOW bytes wait before it, for a while, before the subscriber is
    // called one that does not read. (Polled: the queue drains as the writer hands frames
    // to the socket, which wakes no one.)
    let send_patiently = |event: Value| {
        let send = &send;
        let conn = &conn;
        async move {
            let deadline = tokio::time::Instant::now() + REPLAY_PATIENCE;
            loop {
                if !conn.wait_for_room(REPLAY_WINDOW, deadline).await {
                    return Err(TrySendError::Full {
                        queued: conn.queued_bytes(),
                        limit: REPLAY_WINDOW,
                    });
                }
                match send(event.clone()) {
                    Err(
                        TrySendError::Full { .. }
                        | TrySendError::Frames { .. }
                        | TrySendError::Budget { .. },
                    ) if tokio::time::Instant::now() < deadline => {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    outcome => return outcome,
                }
            }
        }
    };
    let mut outcome = send_patiently(json!({"event": "snapshot", "status": snapshot})).await;
    let mut log_lines = None;
    if let Some((recent, receiver)) = logs {
        for line in recent {
            if outcome.is_err() {
                break;
            }
            outcome = send_patiently(log_event(line)).await;
        }
        log_lines = Some(receiver);
    }
    while outcome.is_ok() {
        let next = match log_lines.as_mut() {
            Some(lines) => tokio::select! {
                event = events.recv() => Either::Event(event),
                line = lines.recv() => Either::Log(line),
            },
            None => Either::Event(events.recv().await),
        };
        let event = match next {
            Either::Event(event) => event,
            Either::Log(Ok(line)) => {
                outcome = send(log_event(line));
                continue;
            }
            Either::Log(Err(broadcast::error::RecvError::Lagged(missed))) => {
                outcome = send(log_event(LogLine {
                    time_ms: crate::logs::now_ms(),
                    level: "WARN".into(),
                    target: "utter::logs".into(),
                    message: format!(
                        "{missed} log lines were skipped: this subscriber fell more than {} lines behind",
                        crate::logs::BACKLOG
                    ),
                    fields: Default::default(),
                }));
                continue;
            }
            Either::Log(Err(broadcast::error::RecvError::Closed)) => {
                log_lines = None;
                continue;
            }
        };
        outcome = match event {
            Ok(event) => send(serde_json::to_value(&event).unwrap_or(Value::Null)),
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                tracing::warn!(%subscription, missed, "event subscriber too far behind; dropped");
                drop_with(format!(
                    "this subscriber fell more than {EVENT_BACKLOG} events behind ({missed} missed); subscribe again for a fresh snapshot"
                ));
                break;
            }
            Err(broadcast::error::RecvError::Closed) => {
                drop_with("the runner is stopping".into());
                break;
            }
        };
    }
    match outcome {
        Err(TrySendError::Full { queued, limit }) => {
            tracing::warn!(%subscription, queued, limit, "event subscriber is not reading; dropped");
            drop_with(format!(
                "this subscriber stopped reading: {queued} bytes of events were waiting for it (at most {limit}); subscribe again for a fresh snapshot"
            ));
        }
        Err(TrySendError::Frames { capacity }) => {
            tracing::warn!(%subscription, capacity, "event subscriber is not reading; dropped");
            drop_with(format!(
                "this subscriber stopped reading: {capacity} messages were waiting for it; subscribe again for a fresh snapshot"
            ));
        }
        Err(TrySendError::Budget {
            queued,
            shared,
            limit,
        }) => {
            tracing::warn!(%subscription, queued, shared, limit, "event subscriber is behind while the subscribers' budget is spent; dropped");
            drop_with(format!(
                "this subscriber fell behind: {queued} bytes of events were waiting for it while all clients together had {shared} waiting (the runner keeps at most {limit}); subscribe again for a fresh snapshot"
            ));
        }
        _ => {}
    }
    subscriptions
        .lock()
        .expect("subscription lock")
        .remove(&subscription);
}

/// [`Session::answer`] on `conn` (also for the tasks of long requests); whether it was
/// sent.
async fn answer_on(conn: &Connection, id: RequestId, result: Result<Value, ErrorObject>) -> bool {
    match conn
        .respond_within(id, result, ANSWER_QUEUE_BYTES, ANSWER_PATIENCE)
        .await
    {
        Ok(()) => true,
        Err(e) => {
            if e.kind() == ErrorCode::Timeout {
                tracing::warn!(error = %e.message, "client does not read its answers; closing");
                conn.abort();
            }
            false
        }
    }
}

/// What a subscription's forwarder woke up for.
enum Either {
    Event(Result<utter_core::events::Event, broadcast::error::RecvError>),
    Log(Result<LogLine, broadcast::error::RecvError>),
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

/// `runner.command`.
async fn command(
    runner: Arc<Runner>,
    params: CommandParams,
    door: Door,
) -> Result<Value, ErrorObject> {
    let options = CommandOptions {
        dry_run: params.dry_run,
        timeout_ms: params.timeout_ms,
        provenance: Some(Provenance::from_value(params.provenance.as_ref())?),
        context: params.context.filter(|c| !c.is_null()),
        confirm_timeout_ms: None,
        decide: None,
        // A client's words are commands; only the voice loop dictates.
        dictation: false,
    };
    let utterance = params.utterance;
    let outcome = runner.command(&utterance, &options, Some(door)).await?;
    serde_json::to_value(outcome).map_err(internal)
}

/// `runner.status {}`: the status, with each plugin's health as last heard (the supervisor
/// asks again every few seconds and after a failed call, off the request path).
fn status(runner: &Runner) -> Result<Value, ErrorObject> {
    serde_json::to_value(runner.status()).map_err(internal)
}

/// `runner.context {}`: the desktop context now.
async fn context(runner: Arc<Runner>) -> Result<Value, ErrorObject> {
    serde_json::to_value(runner.context_now().await?).map_err(internal)
}

/// The plugin `name` designates: the one with that id, else the first of that kind
/// (reference §8.6).
fn registry() -> &'static CapabilityRegistry {
    static REGISTRY: OnceLock<CapabilityRegistry> = OnceLock::new();
    REGISTRY.get_or_init(CapabilityRegistry::builtin)
}

/// `runner.validate_plugin` (reference §9.5), with each permission as the plugin's sandbox
/// enforces it (`{name, enforced, mechanism?, detail}`) and the whole `sandbox` report.
fn validate_plugin(runner: &Runner, name: &str) -> Result<Value, ErrorObject> {
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
    // Each permission as the plugin's sandbox enforces it (advisory without one), with the
    // mechanism and what it means here.
    let permissions: Vec<Value> = match &report.sandbox {
        Some(sandbox) => sandbox
            .permissions
            .iter()
            .map(|p| serde_json::to_value(p).unwrap_or_default())
            .collect(),
        None => report
            .permissions
            .iter()
            .map(|name| json!({"name": name, "enforced": false, "detail": "not started yet"}))
            .collect(),
    };
    Ok(json!({
        "ok": report.status.is_running() && missing.is_empty(),
        "negotiated": {"protocol": PROTOCOL_VERSION.to_string(), "abi": ABI},
        "unknown_capabilities": unknown,
        "missing_requires": missing,
        "permissions": permissions,
        "id": report.id,
        "status": report.status,
        "warnings": report.warnings,
        "sandbox": report.sandbox,
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
    use utter_core::events::{Event, ServiceState};
    use utter_core::pipeline::ConfirmRequest;
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

    /// An event channel of `capacity` into which `count` events were sent (the sender is
    /// returned so that the channel stays open).
    fn backlog(
        capacity: usize,
        count: usize,
    ) -> (broadcast::Sender<Event>, broadcast::Receiver<Event>) {
        let (events, receiver) = broadcast::channel(capacity);
        for _ in 0..count {
            events
                .send(Event::State {
                    state: ServiceState::Ready,
                })
                .unwrap();
        }
        (events, receiver)
    }

    #[tokio::test]
    async fn a_subscriber_that_falls_behind_is_dropped_with_a_reason() {
        let ((runner_side, _runner_rx), (_client, mut client_rx)) =
            memory_pair(ConnectionOptions::default(), ConnectionOptions::default());
        let (_events, receiver) = backlog(4, 10);
        let subscriptions = Arc::new(Mutex::new(HashMap::new()));
        let dropped = Arc::new(Mutex::new(None));
        forward_events(
            runner_side,
            "sub-1".into(),
            json!({"state": "ready"}),
            receiver,
            None,
            subscriptions,
            dropped.clone(),
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
        // The session keeps the reason for the connection's closing notice.
        let kept = dropped.lock().unwrap().clone().expect("the drop is kept");
        assert!(
            kept.starts_with("sub-1 was dropped: ") && kept.ends_with(reason),
            "{kept}"
        );
    }

    /// A log follower that falls behind misses the oldest lines, is told how many, and
    /// stays subscribed; events still reach it.
    #[tokio::test]
    async fn a_log_follower_that_falls_behind_is_told_and_kept() {
        let ((runner_side, _runner_rx), (_client, mut client_rx)) =
            memory_pair(ConnectionOptions::default(), ConnectionOptions::default());
        let (events, receiver) = backlog(4, 0);
        let line = |n: usize| LogLine {
            time_ms: 1,
            level: "INFO".into(),
            target: "test".into(),
            message: format!("line {n}"),
            fields: Default::default(),
        };
        let (lines, lines_rx) = broadcast::channel(2);
        for n in 1..=5 {
            lines.send(line(n)).unwrap();
        }
        let subscriptions = Arc::new(Mutex::new(HashMap::new()));
        let dropped = Arc::new(Mutex::new(None));
        let task = tokio::spawn(forward_events(
            runner_side,
            "sub-1".into(),
            json!({"state": "ready"}),
            receiver,
            Some((vec![line(0)], lines_rx)),
            subscriptions,
            dropped.clone(),
        ));
        let mut next = async || match client_rx.recv().await.unwrap() {
            Incoming::Notification(n) => n.params["event"].clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(next().await["event"], "snapshot");
        assert_eq!(next().await["message"], "line 0", "the kept lines first");
        let skipped = next().await;
        assert_eq!(skipped["level"], "WARN");
        assert!(
            skipped["message"]
                .as_str()
                .unwrap()
                .starts_with("3 log lines were skipped"),
            "{skipped}"
        );
        assert_eq!(next().await["message"], "line 4");
        assert_eq!(next().await["message"], "line 5");
        events
            .send(Event::State {
                state: ServiceState::Ready,
            })
            .unwrap();
        assert_eq!(next().await["event"], "state", "still subscribed");
        task.abort();
    }

    /// Many small events fill the queue's frame slots long before its byte bound: the
    /// subscriber is dropped all the same, and the notice still gets through (try_notify
    /// keeps the last slot for it).
    #[tokio::test]
    async fn a_subscriber_that_stops_reading_small_events_is_dropped_with_a_notice() {
        let ((runner_side, _runner_rx), (_client, mut client_rx)) = memory_pair(
            ConnectionOptions {
                outgoing_capacity: 8,
                ..Default::default()
            },
            ConnectionOptions {
                incoming_capacity: 1,
                ..Default::default()
            },
        );
        let (_events, receiver) = backlog(4096, 3000);
        let subscriptions = Arc::new(Mutex::new(HashMap::new()));
        let dropped = Arc::new(Mutex::new(None));
        // Returns: the subscription ended instead of waiting for the client.
        tokio::time::timeout(
            Duration::from_secs(30),
            forward_events(
                runner_side,
                "sub-1".into(),
                json!({"state": "ready"}),
                receiver,
                None,
                subscriptions,
                dropped.clone(),
            ),
        )
        .await
        .expect("the forwarder does not wait for a client that does not read");
        let mut received = 0;
        let reason = loop {
            match client_rx.recv().await.expect("the notice arrives") {
                Incoming::Notification(n) if n.params["event"]["event"] == "dropped" => {
                    break n.params["event"]["reason"].as_str().unwrap().to_owned();
                }
                Incoming::Notification(_) => received += 1,
                other => panic!("{other:?}"),
            }
        };
        assert!(reason.contains("messages were waiting"), "{reason}");
        assert!(received < 3000, "{received} events were queued");
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
}
