//! A bidirectional JSON-RPC endpoint over any `AsyncRead + AsyncWrite` pair (PROTOCOL.md §2, §7).
//!
//! Both ends of the protocol are peers: the runner calls plugins, and plugins call the runner
//! back (`host.*`). A [`Connection`] owns two tasks:
//!
//! * the **reader** decodes frames, resolves the caller waiting for each response, answers
//!   malformed input with `-32700`/`-32600`/`-32602`, and hands requests and notifications to
//!   the owner through a bounded channel ([`Incoming`]);
//! * the **writer** is the only place that writes to the stream, so frames never interleave;
//!   it flushes whenever its queue runs dry.
//!
//! A connection made with [`Connection::spawn_unix`] can also send a response together with
//! one file descriptor ([`Connection::respond_with_fd`]); that frame waits its turn in the same
//! queue and goes out with a single `sendmsg` carrying `SCM_RIGHTS`.
//!
//! When the stream ends, breaks, or loses its frame boundary, every call still waiting fails at
//! once with `-32000` and [`Connection::closed`] resolves with the [`CloseReason`].

use crate::error::{ErrorCode, ErrorObject};
use crate::frame::{DEFAULT_MAX_BODY, FrameCodec, InboundFrame};
use crate::message::{Message, Notification, Request, RequestId, Response, error_response_bytes};
use crate::throttle::Throttle;
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::fmt;
use std::os::fd::{AsRawFd, OwnedFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::codec::{FramedRead, FramedWrite};

/// The method name of the cancellation notification.
pub const CANCEL_METHOD: &str = "$/cancel";

/// Settings for one connection.
#[derive(Debug, Clone)]
pub struct ConnectionOptions {
    /// Largest frame body accepted or sent, in bytes (default 16 MiB).
    pub max_body: usize,
    /// When set, ids of requests sent from this side are the strings `"<prefix><n>"` (the
    /// runner uses `"<epoch>:"`), and responses whose string id has another `"<epoch>:"`
    /// prefix are dropped as stale. When `None`, ids are integers from 1.
    pub id_prefix: Option<String>,
    /// A label for log lines: the plugin id, or `"client"`.
    pub label: String,
    /// Capacity of the [`Incoming`] channel (requests and notifications not yet taken).
    pub incoming_capacity: usize,
    /// Capacity of the outgoing frame queue.
    pub outgoing_capacity: usize,
    /// Whether a frame over `max_body` ends the connection (a plugin, which the runner then
    /// restarts) instead of being skipped with a `-32700` report (a client). Skipping keeps
    /// a connection only while the peer really sends the bytes it declared; a peer whose
    /// declared length is wrong would otherwise have every later frame swallowed.
    pub oversized_is_fatal: bool,
    /// How long a frame may take from its first byte to its last before the connection is
    /// closed with a `-32700` report (`None`: no limit). A peer that trickles a frame a byte
    /// at a time, or declares a body it never sends, otherwise holds the connection for ever.
    pub frame_timeout: Option<Duration>,
    /// When set, the body limit of inbound frames is read from it at each frame header,
    /// never above `max_body`: a server keeps it small until the peer authenticated.
    pub inbound_limit: Option<crate::frame::BodyLimit>,
    /// When set, the bytes queued for this peer also count in a budget shared with other
    /// connections, which [`Connection::try_notify`] keeps to (see [`QueueBudget`]).
    pub shared_queue: Option<Arc<QueueBudget>>,
}

/// Bytes of frame bodies waiting for several peers together: every connection given the
/// same budget ([`ConnectionOptions::shared_queue`]) counts its queued bytes in it from the
/// moment a frame is queued until the writer takes it (or the connection ends).
///
/// [`Connection::try_notify`] refuses a notification that would take the budget past its
/// limit, except to a peer with less than [`QueueBudget::floor`] bytes waiting: a peer that
/// reads is never refused for what the others left unread. So the bytes waiting for all
/// peers together stay under `limit` plus `floor` for each connection.
#[derive(Debug)]
pub struct QueueBudget {
    used: AtomicUsize,
    limit: usize,
    floor: usize,
}

impl QueueBudget {
    /// A budget of `limit` bytes; a connection with less than `floor` bytes queued is never
    /// refused for it.
    pub fn new(limit: usize, floor: usize) -> Arc<QueueBudget> {
        Arc::new(QueueBudget {
            used: AtomicUsize::new(0),
            limit,
            floor,
        })
    }

    /// Bytes waiting for all the connections that share it.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::SeqCst)
    }

    /// The bound, in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// What a connection may have queued and still never be refused for the budget, in
    /// bytes.
    pub fn floor(&self) -> usize {
        self.floor
    }
}

impl Default for ConnectionOptions {
    fn default() -> Self {
        ConnectionOptions {
            max_body: DEFAULT_MAX_BODY,
            id_prefix: None,
            label: "peer".to_owned(),
            incoming_capacity: 256,
            outgoing_capacity: 1024,
            oversized_is_fatal: false,
            frame_timeout: None,
            inbound_limit: None,
            shared_queue: None,
        }
    }
}

/// A request or notification from the peer, to be handled by the connection's owner.
///
/// Every [`Incoming::Request`] must be answered once with [`Connection::respond`].
/// `$/cancel` arrives as a notification even when the peer sent it with an id (that id has
/// already been answered with `{}`).
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request to answer.
    Request(Request),
    /// A notification.
    Notification(Notification),
}

/// Why a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseReason {
    /// The peer closed its side cleanly (end of file between frames).
    Eof,
    /// The peer sent bytes that cannot be framed; the stream cannot be resynchronised.
    Framing(String),
    /// Reading or writing failed.
    Io(String),
    /// This side closed the connection.
    Local,
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CloseReason::Eof => f.write_str("peer closed the stream"),
            CloseReason::Framing(e) => write!(f, "unrecoverable framing error: {e}"),
            CloseReason::Io(e) => write!(f, "i/o error: {e}"),
            CloseReason::Local => f.write_str("closed by this side"),
        }
    }
}

enum Outbound {
    Frame(Bytes),
    /// A body whose frame must carry a descriptor.
    FrameWithFd(Bytes, OwnedFd),
    Close,
}

impl Outbound {
    /// The body bytes this item holds while it waits in the queue.
    fn len(&self) -> usize {
        match self {
            Outbound::Frame(body) | Outbound::FrameWithFd(body, _) => body.len(),
            Outbound::Close => 0,
        }
    }
}

/// Why [`Connection::try_notify`] did not queue a notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrySendError {
    /// The connection is closed (or closing): nothing more can be sent.
    Closed,
    /// The peer is not reading fast enough: the bodies already queued for it, `queued`
    /// bytes, plus this one would pass the caller's `limit`.
    Full {
        /// Bytes of frame bodies queued and not yet handed to the socket.
        queued: usize,
        /// The caller's bound, in bytes.
        limit: usize,
    },
    /// The peer is not reading fast enough: the queue holds as many frames as it takes
    /// (many small ones).
    Frames {
        /// Frames the queue holds at most.
        capacity: usize,
    },
    /// The peer has at least the budget's floor waiting, and the budget shared with other
    /// connections ([`QueueBudget`]) would pass its limit.
    Budget {
        /// Bytes waiting for this peer.
        queued: usize,
        /// Bytes waiting for all the connections of the budget.
        shared: usize,
        /// The budget's limit, in bytes.
        limit: usize,
    },
}

impl fmt::Display for TrySendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Closed => f.write_str("the connection is closed"),
            TrySendError::Full { queued, limit } => write!(
                f,
                "the peer is not reading: {queued} bytes are waiting for it (bound {limit})"
            ),
            TrySendError::Frames { capacity } => write!(
                f,
                "the peer is not reading: {capacity} frames are waiting for it"
            ),
            TrySendError::Budget {
                queued,
                shared,
                limit,
            } => write!(
                f,
                "the peer is not reading: {queued} bytes are waiting for it, and {shared} for all peers together (bound {limit})"
            ),
        }
    }
}

/// The write side of a stream: ordinary bytes, and (on unix sockets) bytes with a descriptor.
trait FrameSink: AsyncWrite + Send + Unpin + 'static {
    /// Send the start of `bytes` together with `fd`; returns how many bytes went out.
    fn send_with_fd(
        &self,
        bytes: &[u8],
        fd: &OwnedFd,
    ) -> impl std::future::Future<Output = std::io::Result<usize>> + Send;
}

/// Any stream that cannot carry descriptors.
struct PlainSink<W>(W);

impl<W: AsyncWrite + Unpin> AsyncWrite for PlainSink<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl<W: AsyncWrite + Send + Unpin + 'static> FrameSink for PlainSink<W> {
    fn send_with_fd(
        &self,
        _bytes: &[u8],
        _fd: &OwnedFd,
    ) -> impl std::future::Future<Output = std::io::Result<usize>> + Send {
        std::future::ready(Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "this stream cannot carry file descriptors",
        )))
    }
}

impl FrameSink for tokio::net::unix::OwnedWriteHalf {
    async fn send_with_fd(&self, bytes: &[u8], fd: &OwnedFd) -> std::io::Result<usize> {
        use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
        let stream: &tokio::net::UnixStream = self.as_ref();
        let fds = [fd.as_raw_fd()];
        loop {
            stream.writable().await?;
            let sent = stream.try_io(tokio::io::Interest::WRITABLE, || {
                sendmsg::<()>(
                    stream.as_raw_fd(),
                    &[std::io::IoSlice::new(bytes)],
                    &[ControlMessage::ScmRights(&fds)],
                    MsgFlags::MSG_NOSIGNAL,
                    None,
                )
                .map_err(std::io::Error::from)
            });
            match sent {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

type Waiter = oneshot::Sender<Result<Value, ErrorObject>>;

/// One bound, for the whole process, on the log lines peers cause by what they send
/// (framing errors, oversized frames, malformed messages, their error reports): a peer that
/// floods garbage, or reconnects to do it again, cannot flood the log (see [`Throttle`]).
static PEER_LOGS: Throttle = Throttle::new(
    crate::throttle::DEFAULT_LINES,
    crate::throttle::DEFAULT_WINDOW,
);

/// What [`Message::parse`] puts before the message of a peer's `{"id": null, "error"}`.
const PEER_REPORT_PREFIX: &str = "the peer could not read a message: ";

/// The longest peer-supplied text a log line repeats, in bytes.
const LOGGED_TEXT: usize = 200;

struct Inner {
    out: mpsc::Sender<Outbound>,
    /// Bytes of frame bodies in `out`, not yet handed to the writer.
    queued: AtomicUsize,
    /// The budget those bytes also count in, when shared with other connections.
    budget: Option<Arc<QueueBudget>>,
    /// Wakes the writer to stop at once, dropping what is queued ([`Connection::abort`]).
    kill: Arc<tokio::sync::Notify>,
    pending: Mutex<HashMap<RequestId, Waiter>>,
    next_id: AtomicI64,
    prefix: Option<String>,
    label: String,
    /// Set when nothing more can be sent (local close, write error, broken framing).
    closing: AtomicBool,
    /// Set when nothing more will be received; new requests fail at once.
    read_done: AtomicBool,
    closed: watch::Sender<Option<CloseReason>>,
    stale: AtomicU64,
    peer_reports: AtomicU64,
    /// The last error the peer reported without an id (a refusal before it closes).
    last_peer_report: Mutex<Option<ErrorObject>>,
    max_body: usize,
    oversized_is_fatal: bool,
    frame_timeout: Option<Duration>,
    /// Whether the stream can carry descriptors (a unix socket).
    carries_fds: bool,
}

impl Inner {
    /// Mark the connection closed and fail every waiting call. Idempotent.
    ///
    /// A clean end of file from the peer only ends the read side: replies to the peer's own
    /// requests may still be written until this side closes. Every other reason also shuts
    /// the write side down.
    fn finish(&self, reason: CloseReason) {
        self.read_done.store(true, Ordering::SeqCst);
        let shut_writer = reason != CloseReason::Eof;
        if shut_writer {
            self.closing.store(true, Ordering::SeqCst);
        }
        self.closed.send_if_modified(|current| {
            if current.is_none() {
                *current = Some(reason.clone());
                true
            } else {
                false
            }
        });
        let waiters: Vec<_> = self
            .pending
            .lock()
            .expect("pending map lock")
            .drain()
            .collect();
        for (_, waiter) in waiters {
            let _ = waiter.send(Err(ErrorObject::new(
                ErrorCode::PluginError,
                format!("connection closed: {reason}"),
            )));
        }
        if shut_writer {
            let _ = self.out.try_send(Outbound::Close);
        }
    }

    fn try_send_bytes(&self, body: Vec<u8>) {
        if self.try_push(Outbound::Frame(body.into())).is_err() {
            tracing::warn!(peer = %self.label, "outgoing queue full; dropped an error reply");
        }
    }

    /// Count `bytes` as queued (here and in the shared budget).
    fn count_in(&self, bytes: usize) {
        self.queued.fetch_add(bytes, Ordering::SeqCst);
        if let Some(budget) = &self.budget {
            budget.used.fetch_add(bytes, Ordering::SeqCst);
        }
    }

    /// Count `bytes` as no longer queued (handed to the writer, or never to be written).
    fn count_out(&self, bytes: usize) {
        self.queued.fetch_sub(bytes, Ordering::SeqCst);
        if let Some(budget) = &self.budget {
            budget.used.fetch_sub(bytes, Ordering::SeqCst);
        }
    }

    /// Queue `item`, waiting for room in the queue; counts its bytes as queued once it is
    /// in (a caller that gives up while waiting leaves no count behind).
    async fn push(&self, item: Outbound) -> Result<(), ()> {
        let permit = self.out.reserve().await.map_err(|_| ())?;
        self.count_in(item.len());
        permit.send(item);
        Ok(())
    }

    /// Queue `item` when there is room now; counts its bytes as queued.
    fn try_push(&self, item: Outbound) -> Result<(), mpsc::error::TrySendError<Outbound>> {
        let permit = match self.out.try_reserve() {
            Ok(permit) => permit,
            Err(mpsc::error::TrySendError::Full(())) => {
                return Err(mpsc::error::TrySendError::Full(item));
            }
            Err(mpsc::error::TrySendError::Closed(())) => {
                return Err(mpsc::error::TrySendError::Closed(item));
            }
        };
        self.count_in(item.len());
        permit.send(item);
        Ok(())
    }

    /// Whether a string id carries an epoch prefix other than ours.
    fn is_stale(&self, id: &RequestId) -> bool {
        match (&self.prefix, id) {
            (Some(prefix), RequestId::String(s)) => !s.starts_with(prefix.as_str()),
            _ => false,
        }
    }
}

/// One end of a JSON-RPC connection. Cheap to clone; all clones share the stream.
#[derive(Clone)]
pub struct Connection {
    inner: Arc<Inner>,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("label", &self.inner.label)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Start the reader and writer tasks on `reader`/`writer` (must be called inside a tokio
    /// runtime). Returns the connection and the channel of [`Incoming`] requests and
    /// notifications; the channel ends when the connection closes.
    pub fn spawn<R, W>(
        reader: R,
        writer: W,
        options: ConnectionOptions,
    ) -> (Connection, mpsc::Receiver<Incoming>)
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        Self::start(reader, PlainSink(writer), false, options)
    }

    /// Like [`Connection::spawn`] on a unix stream socket, which can also carry descriptors
    /// ([`Connection::respond_with_fd`]).
    pub fn spawn_unix(
        stream: tokio::net::UnixStream,
        options: ConnectionOptions,
    ) -> (Connection, mpsc::Receiver<Incoming>) {
        let (read, write) = stream.into_split();
        Self::start(read, write, true, options)
    }

    /// Like [`Connection::spawn_unix`], and every read also records which process wrote
    /// the bytes ([`crate::senders`]): a door that admitted the connection for who connected
    /// can check, per request, that nobody else writes on it.
    ///
    /// # Errors
    /// Setting `SO_PASSCRED` failed.
    pub fn spawn_unix_tracking_senders(
        stream: tokio::net::UnixStream,
        options: ConnectionOptions,
    ) -> std::io::Result<(
        Connection,
        mpsc::Receiver<Incoming>,
        crate::senders::Senders,
    )> {
        crate::senders::pass_credentials(&stream)?;
        let (read, write) = stream.into_split();
        let senders = crate::senders::Senders::default();
        let read = crate::senders::TrackedRead::new(read, senders.clone());
        let (conn, incoming) = Self::start(read, write, true, options);
        Ok((conn, incoming, senders))
    }

    fn start<R, W>(
        reader: R,
        writer: W,
        carries_fds: bool,
        options: ConnectionOptions,
    ) -> (Connection, mpsc::Receiver<Incoming>)
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: FrameSink,
    {
        let (out_tx, out_rx) = mpsc::channel(options.outgoing_capacity.max(1));
        let (in_tx, in_rx) = mpsc::channel(options.incoming_capacity.max(1));
        let (closed, _) = watch::channel(None);
        let inner = Arc::new(Inner {
            out: out_tx,
            queued: AtomicUsize::new(0),
            budget: options.shared_queue,
            kill: Arc::new(tokio::sync::Notify::new()),
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicI64::new(1),
            prefix: options.id_prefix,
            label: options.label,
            closing: AtomicBool::new(false),
            read_done: AtomicBool::new(false),
            closed,
            stale: AtomicU64::new(0),
            peer_reports: AtomicU64::new(0),
            last_peer_report: Mutex::new(None),
            max_body: options.max_body,
            oversized_is_fatal: options.oversized_is_fatal,
            frame_timeout: options.frame_timeout,
            carries_fds,
        });
        let codec = match options.inbound_limit {
            Some(limit) => FrameCodec::new(options.max_body).with_inbound_limit(limit),
            None => FrameCodec::new(options.max_body),
        };
        let framed_read = FramedRead::new(reader, codec);
        let framed_write = FramedWrite::new(writer, FrameCodec::new(options.max_body));
        tokio::spawn(write_loop(
            framed_write,
            out_rx,
            Arc::downgrade(&inner),
            inner.kill.clone(),
        ));
        tokio::spawn(read_loop(framed_read, in_tx, Arc::downgrade(&inner)));
        (Connection { inner }, in_rx)
    }

    /// Whether [`Connection::respond_with_fd`] can work here (a unix socket connection).
    pub fn carries_fds(&self) -> bool {
        self.inner.carries_fds
    }

    /// Answer `id` with `result`, the frame carrying `fd` (`SCM_RIGHTS`, one `sendmsg`). The
    /// frame is queued behind every frame sent before it. Our copy of `fd` is closed once
    /// sent.
    ///
    /// # Errors
    /// `-32005` when the stream cannot carry descriptors (nothing is sent: answer the
    /// request otherwise); `-32000` when the connection is closed.
    pub async fn respond_with_fd(
        &self,
        id: RequestId,
        result: Value,
        fd: OwnedFd,
    ) -> Result<(), ErrorObject> {
        if !self.inner.carries_fds {
            return Err(ErrorObject::new(
                ErrorCode::CapabilityMissing,
                "fd.pass unsupported: this connection is not a unix socket",
            ));
        }
        let body = Message::Response(Response {
            id,
            result: Ok(result),
        })
        .to_bytes();
        if body.len() > self.inner.max_body {
            return Err(ErrorObject::internal(format!(
                "response of {} bytes exceeds the {}-byte frame limit",
                body.len(),
                self.inner.max_body
            )));
        }
        if self.inner.closing.load(Ordering::SeqCst) {
            return Err(self.closed_error());
        }
        self.inner
            .push(Outbound::FrameWithFd(body.into(), fd))
            .await
            .map_err(|_| self.closed_error())
    }

    /// The label given in [`ConnectionOptions::label`].
    pub fn label(&self) -> &str {
        &self.inner.label
    }

    /// Send a request and wait for its response.
    ///
    /// `timeout` of `None` waits until the response or the end of the connection. When the
    /// timeout expires, or when the returned future is dropped before the response arrived,
    /// `$/cancel {id}` is sent to the peer and a late response is ignored.
    ///
    /// # Errors
    /// The peer's error object; `-32001` with `data {id}` on timeout; `-32000` when the
    /// connection is or becomes closed.
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Option<Duration>,
    ) -> Result<Value, ErrorObject> {
        let inner = &self.inner;
        if inner.read_done.load(Ordering::SeqCst) || inner.closing.load(Ordering::SeqCst) {
            return Err(self.closed_error());
        }
        let n = inner.next_id.fetch_add(1, Ordering::Relaxed);
        let id = match &inner.prefix {
            Some(prefix) => RequestId::String(format!("{prefix}{n}")),
            None => RequestId::Number(n),
        };
        let (tx, rx) = oneshot::channel();
        inner
            .pending
            .lock()
            .expect("pending map lock")
            .insert(id.clone(), tx);
        let mut guard = CancelGuard {
            inner,
            id: Some(id.clone()),
        };
        let body = Message::Request(Request {
            id: id.clone(),
            method: method.to_owned(),
            params,
        })
        .to_bytes();
        if body.len() > inner.max_body {
            guard.disarm();
            return Err(ErrorObject::invalid_params(format!(
                "{method}: request of {} bytes exceeds the {}-byte frame limit",
                body.len(),
                inner.max_body
            )));
        }
        if inner.push(Outbound::Frame(body.into())).await.is_err() {
            guard.disarm();
            return Err(self.closed_error());
        }
        let outcome = match timeout {
            Some(limit) => match tokio::time::timeout(limit, rx).await {
                Ok(outcome) => outcome,
                Err(_) => {
                    // The guard sends `$/cancel` as it drops.
                    drop(guard);
                    return Err(ErrorObject::new(
                        ErrorCode::Timeout,
                        format!("{method}: no response within {} ms", limit.as_millis()),
                    )
                    .with_data(json!({ "id": id.to_value() })));
                }
            },
            None => rx.await,
        };
        guard.disarm();
        match outcome {
            Ok(result) => result,
            Err(_) => Err(self.closed_error()),
        }
    }

    /// Send a notification.
    ///
    /// # Errors
    /// `-32000` when the connection is closed.
    pub async fn notify(&self, method: &str, params: Value) -> Result<(), ErrorObject> {
        let body = Message::Notification(Notification {
            method: method.to_owned(),
            params,
        })
        .to_bytes();
        self.send_body(body).await
    }

    /// Send a notification only if the peer keeps up: when the bodies already queued for it
    /// plus this one stay within `limit` bytes and the queue has room, it is queued at
    /// once; otherwise nothing is queued. A queue that is empty always takes one
    /// notification, however large (up to the frame limit), so a bound smaller than one
    /// message cannot starve a reading peer. A connection with a shared budget
    /// ([`ConnectionOptions::shared_queue`]) keeps to it too.
    ///
    /// For senders that must not wait on a slow peer (event subscriptions): the caller
    /// decides what a full queue means.
    ///
    /// # Errors
    /// [`TrySendError::Full`] with the queued bytes; [`TrySendError::Budget`] past the shared
    /// budget; [`TrySendError::Frames`] when the frame queue is full; [`TrySendError::Closed`].
    pub fn try_notify(
        &self,
        method: &str,
        params: Value,
        limit: usize,
    ) -> Result<(), TrySendError> {
        self.try_queue_notification(method, params, Some(limit))
    }

    /// Queue a last notification whatever the bytes waiting: the notice that ends what
    /// [`Connection::try_notify`] refused (it keeps one frame slot free for this). Errors are
    /// as `try_notify`'s when even that slot is taken.
    pub fn try_notify_final(&self, method: &str, params: Value) -> Result<(), TrySendError> {
        self.try_queue_notification(method, params, None)
    }

    /// [`Connection::try_notify`] with a byte bound (keeping the last frame slot free), or
    /// [`Connection::try_notify_final`] without one.
    fn try_queue_notification(
        &self,
        method: &str,
        params: Value,
        limit: Option<usize>,
    ) -> Result<(), TrySendError> {
        if self.inner.closing.load(Ordering::SeqCst) {
            return Err(TrySendError::Closed);
        }
        let body = Message::Notification(Notification {
            method: method.to_owned(),
            params,
        })
        .to_bytes();
        let frames_full = || TrySendError::Frames {
            capacity: self.inner.out.max_capacity(),
        };
        if let Some(limit) = limit {
            let queued = self.inner.queued.load(Ordering::SeqCst);
            if queued > 0 && queued.saturating_add(body.len()) > limit {
                return Err(TrySendError::Full { queued, limit });
            }
            if let Some(budget) = &self.inner.budget {
                let shared = budget.used();
                if queued >= budget.floor && shared.saturating_add(body.len()) > budget.limit {
                    return Err(TrySendError::Budget {
                        queued,
                        shared,
                        limit: budget.limit,
                    });
                }
            }
            // The last free frame slot is kept for [`Connection::try_notify_final`].
            if self.inner.out.capacity() <= 1 {
                return Err(frames_full());
            }
        }
        self.inner
            .try_push(Outbound::Frame(body.into()))
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => frames_full(),
                mpsc::error::TrySendError::Closed(_) => TrySendError::Closed,
            })
    }

    /// Bytes of frame bodies queued for the peer and not yet handed to the socket writer.
    pub fn queued_bytes(&self) -> usize {
        self.inner.queued.load(Ordering::SeqCst)
    }

    /// Answer a request received as [`Incoming::Request`].
    ///
    /// # Errors
    /// `-32000` when the connection is closed.
    pub async fn respond(
        &self,
        id: RequestId,
        result: Result<Value, ErrorObject>,
    ) -> Result<(), ErrorObject> {
        let mut body = Message::Response(Response {
            id: id.clone(),
            result,
        })
        .to_bytes();
        if body.len() > self.inner.max_body {
            body = error_response_bytes(
                Some(&id),
                &ErrorObject::internal(format!(
                    "response of {} bytes exceeds the {}-byte frame limit",
                    body.len(),
                    self.inner.max_body
                )),
            );
        }
        self.send_body(body).await
    }

    /// [`Connection::respond`] to a peer that may not read: waits at most `patience` while
    /// more than `max_queued` bytes wait for the peer (or, for a peer with at least its
    /// shared budget's floor waiting, while that budget is spent) and for a free frame
    /// slot. A server answers this way so that a client which stops reading holds a
    /// bounded amount of memory and cannot stop the server's own timers.
    ///
    /// # Errors
    /// `-32001` when the answer could not be queued within `patience` (the caller should
    /// close the connection: its peer does not read); `-32000` when the connection is
    /// closed.
    pub async fn respond_within(
        &self,
        id: RequestId,
        result: Result<Value, ErrorObject>,
        max_queued: usize,
        patience: Duration,
    ) -> Result<(), ErrorObject> {
        let deadline = tokio::time::Instant::now() + patience;
        let stalled = || {
            ErrorObject::new(
                ErrorCode::Timeout,
                format!(
                    "the peer did not read its answers within {} ms",
                    patience.as_millis()
                ),
            )
        };
        if !self.wait_for_room(max_queued, deadline).await {
            return Err(stalled());
        }
        match tokio::time::timeout_at(deadline, self.respond(id, result)).await {
            Ok(sent) => sent,
            Err(_) => Err(stalled()),
        }
    }

    /// Wait, at most until `deadline`, for room for the peer: at most `max_queued` bytes
    /// waiting for it (an empty queue always has room) and, for a peer with at least its
    /// shared budget's floor waiting, the budget not spent. Whether there is room; a
    /// closed connection returns at once (`true`: the send that follows says it is closed).
    /// Polled: the queue drains as the writer takes frames, which wakes no one.
    pub async fn wait_for_room(&self, max_queued: usize, deadline: tokio::time::Instant) -> bool {
        loop {
            if self.inner.closing.load(Ordering::SeqCst) {
                return true;
            }
            let queued = self.queued_bytes();
            let own = queued > 0 && queued > max_queued;
            let shared = self
                .inner
                .budget
                .as_ref()
                .is_some_and(|b| queued >= b.floor && b.used() > b.limit);
            if !own && !shared {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn send_body(&self, body: Vec<u8>) -> Result<(), ErrorObject> {
        if self.inner.closing.load(Ordering::SeqCst) {
            return Err(self.closed_error());
        }
        self.inner
            .push(Outbound::Frame(body.into()))
            .await
            .map_err(|_| self.closed_error())
    }

    /// Close the connection: frames already queued are written, then the write side is shut
    /// down (for a stdio plugin this closes its stdin). Waiting calls fail with `-32000`.
    pub fn close(&self) {
        self.inner.finish(CloseReason::Local);
        self.inner.closing.store(true, Ordering::SeqCst);
        let _ = self.inner.out.try_send(Outbound::Close);
    }

    /// Close at once, dropping what is queued for the peer: for a peer that does not read,
    /// whose [`Connection::close`] would wait for ever to write what is queued first.
    pub fn abort(&self) {
        self.close();
        self.inner.kill.notify_one();
    }

    /// Whether the connection is closed or closing (on either side).
    pub fn is_closed(&self) -> bool {
        self.inner.closing.load(Ordering::SeqCst) || self.inner.read_done.load(Ordering::SeqCst)
    }

    /// Wait until the connection has closed and return why.
    pub async fn closed(&self) -> CloseReason {
        let mut rx = self.inner.closed.subscribe();
        loop {
            if let Some(reason) = rx.borrow_and_update().clone() {
                return reason;
            }
            if rx.changed().await.is_err() {
                return CloseReason::Local;
            }
        }
    }

    /// How many responses were dropped because their id carried another epoch's prefix.
    pub fn stale_replies(&self) -> u64 {
        self.inner.stale.load(Ordering::Relaxed)
    }

    /// How many `{"id": null, "error": ...}` reports the peer sent about messages of ours it
    /// could not read.
    pub fn peer_error_reports(&self) -> u64 {
        self.inner.peer_reports.load(Ordering::Relaxed)
    }

    /// The last `{"id": null, "error": ...}` the peer sent: a server that refuses a
    /// connection says why this way before it closes (JSON-RPC 2.0 §5: an error that
    /// belongs to no request).
    pub fn last_peer_report(&self) -> Option<ErrorObject> {
        self.inner
            .last_peer_report
            .lock()
            .expect("peer report lock")
            .clone()
    }

    /// How many of this side's requests are waiting for a response.
    pub fn pending_requests(&self) -> usize {
        self.inner.pending.lock().expect("pending map lock").len()
    }

    fn closed_error(&self) -> ErrorObject {
        let reason = self
            .inner
            .closed
            .borrow()
            .clone()
            .map(|r| r.to_string())
            .unwrap_or_else(|| "closing".to_owned());
        ErrorObject::new(
            ErrorCode::PluginError,
            format!("connection to {} closed: {reason}", self.inner.label),
        )
    }
}

/// Removes a pending request and tells the peer to stop working on it, unless disarmed.
struct CancelGuard<'a> {
    inner: &'a Inner,
    id: Option<RequestId>,
}

impl CancelGuard<'_> {
    fn disarm(&mut self) {
        if let Some(id) = self.id.take() {
            self.inner
                .pending
                .lock()
                .expect("pending map lock")
                .remove(&id);
        }
    }
}

impl Drop for CancelGuard<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let was_pending = self
            .inner
            .pending
            .lock()
            .expect("pending map lock")
            .remove(&id)
            .is_some();
        if was_pending && !self.inner.closing.load(Ordering::SeqCst) {
            let body = Message::Notification(Notification {
                method: CANCEL_METHOD.to_owned(),
                params: json!({ "id": id.to_value() }),
            })
            .to_bytes();
            self.inner.try_send_bytes(body);
        }
    }
}

async fn write_loop<W>(
    mut sink: FramedWrite<W, FrameCodec>,
    mut rx: mpsc::Receiver<Outbound>,
    inner: Weak<Inner>,
    kill: Arc<tokio::sync::Notify>,
) where
    W: FrameSink,
{
    let fail = |e: String| {
        if let Some(inner) = inner.upgrade() {
            tracing::debug!(peer = %inner.label, error = %e, "write failed");
            inner.finish(CloseReason::Io(e));
        }
    };
    // Each write also ends at [`Connection::abort`]: a peer that never reads would hold the
    // writer (and everything queued behind it) for ever.
    let failed = loop {
        let item = tokio::select! {
            item = rx.recv() => item,
            () = kill.notified() => break true,
        };
        let Some(item) = item else {
            break false;
        };
        // Handed to the writer: the codec's own buffer is flushed past its bound, so the
        // bytes are no longer waiting in the queue.
        if let Some(inner) = inner.upgrade() {
            inner.count_out(item.len());
        }
        let written = async {
            match item {
                Outbound::Frame(body) => {
                    sink.feed(body).await.map_err(|e| e.to_string())?;
                    if rx.is_empty() {
                        sink.flush().await.map_err(|e| e.to_string())?;
                    }
                    Ok(true)
                }
                Outbound::FrameWithFd(body, fd) => write_with_fd(&mut sink, &body, &fd)
                    .await
                    .map(|()| true)
                    .map_err(|e| e.to_string()),
                Outbound::Close => Ok(false),
            }
        };
        let written = tokio::select! {
            written = written => written,
            () = kill.notified() => break true,
        };
        match written {
            Ok(true) => {}
            Ok(false) => break false,
            Err(e) => {
                fail(e);
                break true;
            }
        }
    };
    // What is still queued will never be written: it no longer counts as waiting.
    rx.close();
    while let Ok(item) = rx.try_recv() {
        if let Some(inner) = inner.upgrade() {
            inner.count_out(item.len());
        }
    }
    if !failed {
        // Flush what was fed, then shut the write side down so the peer sees end of file.
        let _ = sink.close().await;
    }
}

/// Write everything queued before, then the frame of `body` with `fd` riding on its first
/// bytes; whatever `sendmsg` did not take is written plainly after it.
async fn write_with_fd<W: FrameSink>(
    sink: &mut FramedWrite<W, FrameCodec>,
    body: &[u8],
    fd: &OwnedFd,
) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    sink.flush().await.map_err(std::io::Error::other)?;
    let frame = crate::frame::encode_frame(body);
    let sent = sink.get_ref().send_with_fd(&frame, fd).await?;
    if sent == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::WriteZero,
            "sendmsg sent nothing",
        ));
    }
    let rest = &frame[sent..];
    if !rest.is_empty() {
        sink.get_mut().write_all(rest).await?;
    }
    sink.get_mut().flush().await
}

/// The longest error message kept from a peer's response, in characters (escaped).
const MAX_PEER_ERROR_CHARS: usize = 4000;

/// How long the reader goes on after a write failed: the peer may have said why it closed
/// (a refusal's reason) in a frame that is still waiting to be read.
const READ_AFTER_WRITE_FAILURE: Duration = Duration::from_secs(2);

/// Resolves when reading should stop although the peer has not closed its side: at once
/// after [`Connection::close`]; [`READ_AFTER_WRITE_FAILURE`] after any other close reason
/// (a failed write), counted from the first time it is seen (`deadline` keeps it).
async fn stop_reading(
    closed: &mut watch::Receiver<Option<CloseReason>>,
    deadline: &mut Option<tokio::time::Instant>,
) {
    loop {
        if let Some(at) = *deadline {
            tokio::time::sleep_until(at).await;
            return;
        }
        let reason = closed.borrow_and_update().clone();
        match reason {
            Some(CloseReason::Local) => return,
            Some(_) => {
                *deadline = Some(tokio::time::Instant::now() + READ_AFTER_WRITE_FAILURE);
            }
            None => {
                if closed.changed().await.is_err() {
                    return;
                }
            }
        }
    }
}

async fn read_loop<R>(
    mut stream: FramedRead<R, FrameCodec>,
    incoming: mpsc::Sender<Incoming>,
    inner: Weak<Inner>,
) where
    R: AsyncRead + Unpin,
{
    let frame_timeout = inner.upgrade().and_then(|i| i.frame_timeout);
    // Closed from this side (`Connection::close`): stop reading at once, so that the read
    // half (and with it the descriptor) is released even when the peer never sends again.
    // After a failed write, read on a little: the peer's last frame may say why.
    let mut closed = match inner.upgrade() {
        Some(i) => i.closed.subscribe(),
        None => return,
    };
    let mut stop_deadline = None;
    // When a frame's first bytes were seen (checked at each tick while waiting).
    let mut partial_since: Option<tokio::time::Instant> = None;
    let reason = loop {
        let item = match frame_timeout {
            None => tokio::select! {
                item = stream.next() => item,
                _ = stop_reading(&mut closed, &mut stop_deadline) => return,
            },
            Some(limit) => {
                // `next` keeps its progress in the codec, so waking up to look at the buffer
                // loses nothing.
                let tick = (limit / 4).clamp(Duration::from_millis(20), Duration::from_secs(5));
                let mut timed_out = false;
                let item = loop {
                    tokio::select! {
                        item = stream.next() => break item,
                        _ = stop_reading(&mut closed, &mut stop_deadline) => return,
                        _ = tokio::time::sleep(tick) => {
                            let partial = !stream.read_buffer().is_empty() || stream.decoder().skipping();
                            if !partial {
                                partial_since = None;
                                continue;
                            }
                            let since = *partial_since.get_or_insert_with(tokio::time::Instant::now);
                            if since.elapsed() >= limit {
                                timed_out = true;
                                break None;
                            }
                        }
                    }
                };
                partial_since = None;
                if timed_out {
                    let Some(inner) = inner.upgrade() else { return };
                    let message = format!(
                        "a frame was begun but not finished within {} ms; closing the connection",
                        limit.as_millis()
                    );
                    if let Some(suppressed) = PEER_LOGS.allow() {
                        tracing::warn!(peer = %inner.label, suppressed, "{message}");
                    }
                    inner.try_send_bytes(error_response_bytes(
                        None,
                        &ErrorObject::new(ErrorCode::ParseError, message.clone()),
                    ));
                    break CloseReason::Framing(message);
                }
                item
            }
        };
        let Some(inner) = inner.upgrade() else { return };
        let body = match item {
            None => break CloseReason::Eof,
            Some(Err(crate::frame::FrameError::Io(e))) => break CloseReason::Io(e.to_string()),
            Some(Err(e)) => {
                if let Some(suppressed) = PEER_LOGS.allow() {
                    tracing::warn!(peer = %inner.label, error = %e, suppressed, "unrecoverable framing error; closing");
                }
                inner.try_send_bytes(error_response_bytes(
                    None,
                    &ErrorObject::new(
                        ErrorCode::ParseError,
                        format!("{e}; the frame boundary is lost, closing the connection"),
                    ),
                ));
                break CloseReason::Framing(e.to_string());
            }
            Some(Ok(InboundFrame::Oversized { declared, limit })) if inner.oversized_is_fatal => {
                if let Some(suppressed) = PEER_LOGS.allow() {
                    tracing::warn!(peer = %inner.label, declared, limit, suppressed, "oversized frame; closing");
                }
                break CloseReason::Framing(format!(
                    "a frame of {declared} bytes was declared, over the {limit}-byte limit"
                ));
            }
            Some(Ok(InboundFrame::Oversized { declared, limit })) => {
                if let Some(suppressed) = PEER_LOGS.allow() {
                    tracing::warn!(peer = %inner.label, declared, limit, suppressed, "oversized frame skipped");
                }
                // Under a lowered inbound limit (a server's, until the peer authenticates)
                // the usual cause is a large frame sent before the answer that raises it.
                let lowered = if limit < inner.max_body && declared <= inner.max_body as u64 {
                    format!(
                        " (this connection takes frames of up to {} bytes once it is authenticated: wait for the answer to the authentication before sending a larger one)",
                        inner.max_body
                    )
                } else {
                    String::new()
                };
                inner.try_send_bytes(error_response_bytes(
                    None,
                    &ErrorObject::new(
                        ErrorCode::ParseError,
                        format!(
                            "frame body of {declared} bytes exceeds the {limit}-byte limit; the frame was skipped{lowered}"
                        ),
                    )
                    .with_data(json!({ "declared": declared, "limit": limit })),
                ));
                continue;
            }
            Some(Ok(InboundFrame::Body(body))) => body,
        };
        match Message::parse(&body) {
            Err(rejected) if rejected.peer_report => {
                inner.peer_reports.fetch_add(1, Ordering::Relaxed);
                if rejected.error.kind() == ErrorCode::Denied {
                    // A refusal (too many connections, another user): the caller that was
                    // refused reports it itself (`last_peer_report`).
                    tracing::debug!(peer = %inner.label, error = %crate::text::clip(&rejected.error.message, LOGGED_TEXT), "refused by the peer");
                } else if let Some(suppressed) = PEER_LOGS.allow() {
                    tracing::warn!(peer = %inner.label, code = rejected.error.code, error = %crate::text::clip(&rejected.error.message, LOGGED_TEXT), suppressed, "error report from the peer");
                }
                // Kept as the peer said it (a refusal's reason), without the log's framing.
                let mut said = rejected.error;
                if let Some(own) = said.message.strip_prefix(PEER_REPORT_PREFIX) {
                    said.message = own.to_owned();
                }
                *inner.last_peer_report.lock().expect("peer report lock") = Some(said);
            }
            Err(rejected) => {
                if let Some(suppressed) = PEER_LOGS.allow() {
                    tracing::warn!(peer = %inner.label, error = %crate::text::clip(&rejected.error.message, LOGGED_TEXT), suppressed, "malformed message");
                }
                if rejected.reply {
                    inner.try_send_bytes(rejected.to_bytes());
                }
                // An answer of ours that is not JSON (a NaN in it) still ends its request,
                // at once rather than at its timeout.
                let answered = std::str::from_utf8(&body)
                    .ok()
                    .and_then(crate::message::salvage_response_id);
                if let Some(id) = answered {
                    let waiter = inner.pending.lock().expect("pending map lock").remove(&id);
                    if let Some(waiter) = waiter {
                        let _ = waiter.send(Err(ErrorObject::new(
                            ErrorCode::ParseError,
                            format!(
                                "{} answered with a frame that is not valid JSON-RPC: {}",
                                inner.label,
                                crate::text::clip(&rejected.error.message, 300)
                            ),
                        )));
                    }
                }
            }
            Ok(Message::Response(mut response)) => {
                // The peer answers: an earlier report of its is no reason for what comes.
                *inner.last_peer_report.lock().expect("peer report lock") = None;
                // A peer's error text is shown and logged wherever it goes: escaped and cut
                // here, once, so no log line or terminal obeys an escape it carries.
                if let Err(e) = &mut response.result {
                    if e.message.chars().any(crate::text::is_unprintable)
                        || e.message.len() > MAX_PEER_ERROR_CHARS
                    {
                        e.message = crate::text::clip(&e.message, MAX_PEER_ERROR_CHARS);
                    }
                }
                let waiter = inner
                    .pending
                    .lock()
                    .expect("pending map lock")
                    .remove(&response.id);
                match waiter {
                    Some(waiter) => {
                        let _ = waiter.send(response.result);
                    }
                    None if inner.is_stale(&response.id) => {
                        inner.stale.fetch_add(1, Ordering::Relaxed);
                        if let Some(suppressed) = PEER_LOGS.allow() {
                            tracing::warn!(peer = %inner.label, id = %crate::text::clip(&response.id.to_string(), 64), suppressed, "dropped a response from a stale epoch");
                        }
                    }
                    None => {
                        tracing::debug!(peer = %inner.label, id = %crate::text::clip(&response.id.to_string(), 64), "response to no waiting request (late or unknown); ignored");
                    }
                }
            }
            Ok(Message::Request(request)) if request.method == CANCEL_METHOD => {
                // `$/cancel` is a notification; answer it anyway when it came with an id.
                inner.try_send_bytes(
                    Message::Response(Response {
                        id: request.id,
                        result: Ok(json!({})),
                    })
                    .to_bytes(),
                );
                let note = Notification {
                    method: request.method,
                    params: request.params,
                };
                cancel_own(&inner, &note);
                if incoming.send(Incoming::Notification(note)).await.is_err() {
                    continue;
                }
            }
            Ok(Message::Notification(note)) => {
                if note.method == CANCEL_METHOD {
                    cancel_own(&inner, &note);
                }
                let _ = incoming.send(Incoming::Notification(note)).await;
            }
            Ok(Message::Request(request)) => {
                let id = request.id.clone();
                let method = request.method.clone();
                if incoming.send(Incoming::Request(request)).await.is_err() {
                    inner.try_send_bytes(error_response_bytes(
                        Some(&id),
                        &ErrorObject::method_not_found(&method),
                    ));
                }
            }
        }
    };
    if let Some(inner) = inner.upgrade() {
        if reason != CloseReason::Eof {
            tracing::debug!(peer = %inner.label, %reason, "connection closed");
        }
        inner.finish(reason);
    }
}

/// A peer's `$/cancel` naming one of *our* pending requests fails that request with `-32002`
/// (how a client declines a `host.confirm` it was sent).
fn cancel_own(inner: &Inner, note: &Notification) {
    let Some(id) = note.params.get("id").and_then(RequestId::from_value) else {
        return;
    };
    let waiter = inner.pending.lock().expect("pending map lock").remove(&id);
    if let Some(waiter) = waiter {
        let _ = waiter.send(Err(ErrorObject::new(
            ErrorCode::Cancelled,
            "cancelled by the peer",
        )
        .with_data(json!({ "id": id.to_value() }))));
    }
}

/// A connected pair of in-memory connections, for tests and benchmarks that need no process.
pub fn memory_pair(
    options_a: ConnectionOptions,
    options_b: ConnectionOptions,
) -> (
    (Connection, mpsc::Receiver<Incoming>),
    (Connection, mpsc::Receiver<Incoming>),
) {
    let (a, b) = tokio::io::duplex(64 * 1024);
    let (ar, aw) = tokio::io::split(a);
    let (br, bw) = tokio::io::split(b);
    (
        Connection::spawn(ar, aw, options_a),
        Connection::spawn(br, bw, options_b),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn opts(label: &str, prefix: Option<&str>) -> ConnectionOptions {
        ConnectionOptions {
            label: label.into(),
            id_prefix: prefix.map(str::to_owned),
            ..Default::default()
        }
    }

    /// Answer every request with its own params, except `slow` (never answered).
    fn echo_server(conn: Connection, mut rx: mpsc::Receiver<Incoming>) -> mpsc::Receiver<Value> {
        let (seen_tx, seen_rx) = mpsc::channel(16);
        tokio::spawn(async move {
            while let Some(msg) = rx.recv().await {
                match msg {
                    Incoming::Request(r) if r.method == "slow" => {}
                    Incoming::Request(r) => {
                        conn.respond(r.id, Ok(r.params)).await.unwrap();
                    }
                    Incoming::Notification(n) => {
                        let _ = seen_tx
                            .send(json!({"method": n.method, "params": n.params}))
                            .await;
                    }
                }
            }
        });
        seen_rx
    }

    /// A writer whose peer is gone: every write fails with a broken pipe.
    struct BrokenPipe;

    impl AsyncWrite for BrokenPipe {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            _: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// A peer that refuses says why and closes; our request's write may fail first. The
    /// reason must still be read (it was lost when the reader stopped at the write error).
    #[tokio::test]
    async fn a_refusal_read_after_a_failed_write_is_kept() {
        let (read, mut peer) = tokio::io::duplex(4096);
        let (conn, _rx) = Connection::spawn(read, BrokenPipe, opts("runner", None));
        let err = conn
            .request("runner.status", json!({}), None)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorCode::PluginError, "{err:?}");
        assert!(conn.is_closed());
        // The refusal arrives only now, after the write failed.
        let refusal = error_response_bytes(
            None,
            &ErrorObject::new(ErrorCode::Denied, "too many connections"),
        );
        peer.write_all(&crate::frame::encode_frame(&refusal))
            .await
            .unwrap();
        let mut said = None;
        for _ in 0..100 {
            said = conn.last_peer_report();
            if said.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let said = said.expect("the refusal is read after the write failed");
        assert_eq!(said.kind(), ErrorCode::Denied);
        assert_eq!(said.message, "too many connections");
    }

    #[tokio::test]
    async fn request_response_round_trip_with_prefixed_ids() {
        let ((a, _arx), (b, brx)) = memory_pair(opts("a", Some("4:")), opts("b", None));
        let _seen = echo_server(b, brx);
        let got = a.request("echo", json!({"x": 1}), None).await.unwrap();
        assert_eq!(got, json!({"x": 1}));
    }

    #[tokio::test]
    async fn timeout_sends_cancel_and_reports_minus_32001() {
        let ((a, _arx), (b, brx)) = memory_pair(opts("a", Some("0:")), opts("b", None));
        let mut seen = echo_server(b, brx);
        let err = a
            .request("slow", json!({}), Some(Duration::from_millis(50)))
            .await
            .unwrap_err();
        assert_eq!(err.code, -32001);
        assert_eq!(err.data, Some(json!({"id": "0:1"})));
        let cancel = seen.recv().await.unwrap();
        assert_eq!(
            cancel,
            json!({"method": "$/cancel", "params": {"id": "0:1"}})
        );
        assert_eq!(a.pending_requests(), 0);
    }

    #[tokio::test]
    async fn dropping_a_call_sends_cancel() {
        let ((a, _arx), (b, brx)) = memory_pair(opts("a", None), opts("b", None));
        let mut seen = echo_server(b, brx);
        let call = a.request("slow", json!({}), None);
        let _ = tokio::time::timeout(Duration::from_millis(20), call).await;
        let cancel = seen.recv().await.unwrap();
        assert_eq!(cancel["params"]["id"], json!(1));
    }

    /// Two connections whose peers never read share a budget: the one that filled it is
    /// refused past its floor, the other still gets what fits under the floor, and the
    /// budget counts nothing once both are gone.
    #[tokio::test]
    async fn a_shared_budget_bounds_what_waits_for_all_peers() {
        let budget = QueueBudget::new(200_000, 50_000);
        let spawn = || {
            // A pipe of 1 KiB that nobody reads: frames stay queued.
            let (a, b) = tokio::io::duplex(1024);
            let (ar, aw) = tokio::io::split(a);
            let options = ConnectionOptions {
                shared_queue: Some(budget.clone()),
                ..opts("stalled", None)
            };
            let (conn, rx) = Connection::spawn(ar, aw, options);
            (conn, rx, b)
        };
        let (first, _rx1, peer1) = spawn();
        let (second, _rx2, peer2) = spawn();
        let note = json!({"pad": "x".repeat(20_000)});
        let mut sent = 0;
        let refused = loop {
            match first.try_notify("n", note.clone(), usize::MAX) {
                Ok(()) => sent += 1,
                Err(e) => break e,
            }
            assert!(sent < 100, "the budget never refused");
        };
        let TrySendError::Budget { shared, limit, .. } = refused else {
            panic!("{refused:?}");
        };
        assert_eq!(limit, 200_000);
        assert!(shared <= 200_000 + 20_100, "{shared}");
        // The budget is spent, but the second peer has nothing waiting: under the floor it
        // is still served.
        // (The writer holds one frame it could not finish; the floor is 2.5 frames.)
        let mut taken = 0;
        let refused = loop {
            match second.try_notify("n", note.clone(), usize::MAX) {
                Ok(()) => taken += 1,
                Err(e) => break e,
            }
            assert!(taken < 10, "the budget never refused the second peer");
        };
        assert!((2..=4).contains(&taken), "{taken}");
        assert!(
            matches!(refused, TrySendError::Budget { .. }),
            "{refused:?}"
        );
        // The peers go: what was queued will never be written.
        drop((peer1, peer2));
        tokio::time::timeout(Duration::from_secs(5), async {
            while budget.used() > 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("closed connections release their share of the budget");
    }

    #[tokio::test]
    async fn peer_eof_fails_pending_calls_at_once() {
        let (a, b) = tokio::io::duplex(4096);
        let (ar, aw) = tokio::io::split(a);
        let (conn, _rx) = Connection::spawn(ar, aw, opts("a", None));
        let call = tokio::spawn({
            let conn = conn.clone();
            async move { conn.request("x", json!({}), None).await }
        });
        // Read the request, then hang up.
        let mut b = b;
        let mut buf = [0u8; 256];
        let _ = b.read(&mut buf).await.unwrap();
        drop(b);
        let err = call.await.unwrap().unwrap_err();
        assert_eq!(err.code, -32000);
        assert_eq!(conn.closed().await, CloseReason::Eof);
        assert!(conn.request("y", json!({}), None).await.is_err());
    }

    async fn raw_exchange(input: &[u8]) -> Vec<Value> {
        let (a, mut b) = tokio::io::duplex(64 * 1024);
        let (ar, aw) = tokio::io::split(a);
        let (conn, rx) = Connection::spawn(ar, aw, opts("a", None));
        let _seen = echo_server(conn, rx);
        b.write_all(input).await.unwrap();
        b.shutdown().await.unwrap();
        let mut out = Vec::new();
        b.read_to_end(&mut out).await.unwrap();
        let mut codec = FrameCodec::default();
        let mut buf = bytes::BytesMut::from(&out[..]);
        let mut values = Vec::new();
        while let Some(InboundFrame::Body(body)) =
            tokio_util::codec::Decoder::decode(&mut codec, &mut buf).unwrap()
        {
            values.push(serde_json::from_slice(&body).unwrap());
        }
        values
    }

    #[tokio::test]
    async fn malformed_input_is_answered_and_the_stream_continues() {
        let mut input = Vec::new();
        input.extend(crate::frame::encode_frame(b"{not json"));
        input.extend(crate::frame::encode_frame(b"[1,2]"));
        input.extend(crate::frame::encode_frame(
            br#"{"jsonrpc":"2.0","id":"s","method":"echo","params":{"ok":true}}"#,
        ));
        input.extend(crate::frame::encode_frame(
            br#"{"jsonrpc":"2.0","id":9,"method":"$/cancel","params":{"id":1}}"#,
        ));
        let replies = raw_exchange(&input).await;
        assert_eq!(replies[0]["error"]["code"], -32700);
        // A batch of two members that are no messages: one -32600 each, id null.
        assert_eq!(replies[1][0]["error"]["code"], -32600);
        assert_eq!(replies[1][1]["id"], Value::Null);
        assert!(replies.contains(&json!({"jsonrpc":"2.0","id":"s","result":{"ok":true}})));
        assert!(replies.contains(&json!({"jsonrpc":"2.0","id":9,"result":{}})));
    }

    #[tokio::test]
    async fn broken_header_is_answered_then_closed() {
        let replies = raw_exchange(b"Content-Length: lots\r\n\r\n{}").await;
        assert_eq!(replies.len(), 1);
        assert_eq!(replies[0]["error"]["code"], -32700);
    }

    #[tokio::test]
    async fn stale_epoch_replies_are_dropped() {
        let (a, mut b) = tokio::io::duplex(4096);
        let (ar, aw) = tokio::io::split(a);
        let (conn, _rx) = Connection::spawn(ar, aw, opts("a", Some("3:")));
        let call = tokio::spawn({
            let conn = conn.clone();
            async move {
                conn.request("x", json!({}), Some(Duration::from_millis(300)))
                    .await
            }
        });
        let mut buf = [0u8; 256];
        let _ = b.read(&mut buf).await.unwrap();
        b.write_all(&crate::frame::encode_frame(
            br#"{"jsonrpc":"2.0","id":"2:1","result":"old"}"#,
        ))
        .await
        .unwrap();
        let err = call.await.unwrap().unwrap_err();
        assert_eq!(err.code, -32001);
        assert_eq!(conn.stale_replies(), 1);
    }

    #[tokio::test]
    async fn descriptors_are_refused_cleanly_over_streams_that_cannot_carry_them() {
        let ((a, _a_rx), (_b, _b_rx)) = memory_pair(opts("a", None), opts("b", None));
        assert!(!a.carries_fds());
        let fd: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
        let e = a
            .respond_with_fd(RequestId::Number(1), json!({}), fd)
            .await
            .unwrap_err();
        assert_eq!(e.code, -32005);
        assert!(!a.is_closed());
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_descriptor_rides_on_its_frame_even_when_sendmsg_takes_only_part() {
        use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
        use std::os::fd::FromRawFd;
        let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
        let (conn, _rx) = Connection::spawn_unix(ours, opts("unix", None));
        assert!(conn.carries_fds());
        conn.notify("before", json!({})).await.unwrap();
        // Larger than a socket buffer, so sendmsg cannot take it all at once.
        let big = "x".repeat(4 * 1024 * 1024);
        let fd: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
        conn.respond_with_fd(RequestId::Number(7), json!({"big": big}), fd)
            .await
            .unwrap();
        conn.notify("after", json!({})).await.unwrap();
        conn.close();
        let theirs = theirs.into_std().unwrap();
        theirs.set_nonblocking(false).unwrap();
        let reader = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let mut fds = Vec::new();
            let mut chunk = vec![0u8; 65536];
            let mut space = nix::cmsg_space!([std::os::fd::RawFd; 2]);
            loop {
                let (n, got) = {
                    let mut iov = [std::io::IoSliceMut::new(&mut chunk)];
                    let msg = recvmsg::<()>(
                        theirs.as_raw_fd(),
                        &mut iov,
                        Some(&mut space),
                        MsgFlags::MSG_CMSG_CLOEXEC,
                    )
                    .unwrap();
                    let mut got = Vec::new();
                    for c in msg.cmsgs().unwrap() {
                        if let ControlMessageOwned::ScmRights(r) = c {
                            got.extend(r);
                        }
                    }
                    (msg.bytes, got)
                };
                for fd in got {
                    // SAFETY: a fresh descriptor from SCM_RIGHTS.
                    drop(unsafe { OwnedFd::from_raw_fd(fd) });
                    fds.push((bytes.len(), bytes.len() + n));
                }
                if n == 0 {
                    break;
                }
                bytes.extend_from_slice(&chunk[..n]);
            }
            (bytes, fds)
        });
        let (bytes, fds) = reader.join().unwrap();
        let text = String::from_utf8(bytes).unwrap();
        let big_at = text.find("xxxx").unwrap();
        let response_at = text[..big_at].rfind("Content-Length").unwrap();
        // One descriptor, returned by the read that returns the response's first byte (that
        // read may also return the end of the frame before it).
        assert_eq!(fds.len(), 1, "{fds:?}");
        assert!(
            fds[0].0 <= response_at && response_at < fds[0].1,
            "{fds:?} {response_at}"
        );
        assert!(text.find("before").unwrap() < response_at);
        assert!(text.rfind("after").unwrap() > big_at + 4 * 1024 * 1024);
    }
}
