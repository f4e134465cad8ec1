//! Run a plugin process the way the runner does, for tests (feature `testkit`).
//!
//! [`TestPlugin::spawn`] starts a plugin command line with its stdin and stdout piped (the
//! `stdio` transport, PROTOCOL.md §1.1) and its stderr kept in a bounded buffer, and speaks
//! to it through a [`Connection`] whose request ids are the runner's `"<epoch>:<n>"` strings
//! (§2). Requests the plugin sends to the host (`host.*` callbacks, §9.6) are answered by a
//! [`HostHandler`], by default `-32601`. [`TestPlugin::start`] also runs the runner's
//! handshake ([`crate::host::handshake`]).
//!
//! Beyond ordinary requests a test can write raw bytes or frames to the plugin's stdin (to
//! send it malformed input), see every frame the plugin wrote to its stdout (the frame log:
//! [`TestPlugin::frame_mark`], [`TestPlugin::wait_for_frame`]), close its stdin and wait for
//! it to exit. The plugin runs in a process group of its own, which is killed when the
//! [`TestPlugin`] is dropped.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use utter_protocol::testkit::{SpawnOptions, TestPlugin};
//! use utter_protocol::serde_json::json;
//!
//! let mut plugin = TestPlugin::start(&["target/debug/fake_rs".into()], SpawnOptions::default()).await?;
//! let ops = plugin.request("action.capabilities", json!({})).await?;
//! assert!(ops["ops"].is_array());
//! let status = plugin.shutdown(std::time::Duration::from_secs(5)).await?;
//! assert!(status.success());
//! # Ok(()) }
//! ```
//!
//! [`conformance`] runs the protocol's rules against a plugin and says what to fix.

pub mod conformance;

use crate::connection::{Connection, ConnectionOptions, Incoming};
use crate::error::ErrorObject;
use crate::frame::{DEFAULT_MAX_BODY, FrameCodec, InboundFrame, encode_frame};
use crate::host::{self, Handshake, HandshakeError, HandshakeOptions};
use crate::message::{Notification, Request};
use bytes::BytesMut;
use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::Value;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::fmt;
use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio_util::codec::{Decoder, FramedRead};

/// Answers the requests a plugin sends to the host (`host.*`, `handle.*`, anything else).
///
/// The default, [`HostHandler::method_not_found`], answers every request `-32601`, as the
/// runner does for callbacks it does not serve.
#[derive(Clone)]
pub struct HostHandler {
    handle: Arc<dyn Fn(Request) -> BoxFuture<'static, Result<Value, ErrorObject>> + Send + Sync>,
}

impl HostHandler {
    /// A handler from an async function of the request.
    pub fn new<F, Fut>(f: F) -> HostHandler
    where
        F: Fn(Request) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ErrorObject>> + Send + 'static,
    {
        HostHandler {
            handle: Arc::new(move |request| Box::pin(f(request))),
        }
    }

    /// Answers everything with `-32601` naming the method.
    pub fn method_not_found() -> HostHandler {
        HostHandler::new(|request: Request| async move {
            Err(ErrorObject::method_not_found(&request.method))
        })
    }

    /// Answer one request.
    pub fn call(&self, request: Request) -> BoxFuture<'static, Result<Value, ErrorObject>> {
        (self.handle)(request)
    }
}

impl Default for HostHandler {
    fn default() -> Self {
        HostHandler::method_not_found()
    }
}

impl fmt::Debug for HostHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostHandler").finish_non_exhaustive()
    }
}

/// How to start a plugin.
#[derive(Debug, Clone)]
pub struct SpawnOptions {
    /// Extra environment variables (the plugin otherwise inherits this process's environment,
    /// with `UTTER_PLUGIN_TRANSPORT=stdio`, `UTTER_PLUGIN_ID` set and `UTTER_PLUGIN_SOCKET`
    /// removed, as the runner does for a `stdio` plugin).
    pub env: Vec<(OsString, OsString)>,
    /// `UTTER_PLUGIN_ID` (default `"testkit"`).
    pub plugin_id: String,
    /// The working directory (default: this process's).
    pub current_dir: Option<PathBuf>,
    /// The epoch sent in `protocol.hello` and used as the id prefix `"<epoch>:"`.
    pub epoch: u64,
    /// The bound on each request sent with [`TestPlugin::request`] and on each handshake
    /// step (default 5 s).
    pub timeout: Duration,
    /// How much of the plugin's stderr to keep, in bytes: the last ones (default 64 KiB).
    pub stderr_limit: usize,
    /// How many of the plugin's frames the frame log keeps, the latest ones (default 512).
    pub frame_log_limit: usize,
    /// The largest frame body accepted or sent (default 16 MiB).
    pub max_body: usize,
    /// Answers the plugin's own requests.
    pub host: HostHandler,
}

impl Default for SpawnOptions {
    fn default() -> Self {
        SpawnOptions {
            env: Vec::new(),
            plugin_id: "testkit".to_owned(),
            current_dir: None,
            epoch: 0,
            timeout: Duration::from_secs(5),
            stderr_limit: 64 * 1024,
            frame_log_limit: 512,
            max_body: DEFAULT_MAX_BODY,
            host: HostHandler::default(),
        }
    }
}

/// Why [`TestPlugin::start`] failed.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The command could not be started.
    #[error("cannot start the plugin: {0}")]
    Spawn(#[from] io::Error),
    /// The handshake failed; `stderr` is what the plugin wrote there meanwhile.
    #[error("handshake failed: {error}{}", stderr_suffix(stderr))]
    Handshake {
        /// What failed.
        error: HandshakeError,
        /// The plugin's stderr (the last bytes kept).
        stderr: String,
    },
}

fn stderr_suffix(stderr: &str) -> String {
    let trimmed = stderr.trim_end();
    if trimmed.is_empty() {
        String::new()
    } else {
        format!("; the plugin's stderr:\n{trimmed}")
    }
}

/// One frame the plugin wrote to its stdout, as the frame log keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedFrame {
    /// Its position among the plugin's frames, from 0.
    pub seq: u64,
    /// The body bytes.
    pub body: Vec<u8>,
    /// The body as JSON, when it is JSON.
    pub json: Option<Value>,
}

impl LoggedFrame {
    /// Whether this is a response (no `method`) whose `id` is exactly `id` (`7` and `"7"`
    /// differ; `Value::Null` matches `"id": null`).
    pub fn is_response_to(&self, id: &Value) -> bool {
        match &self.json {
            Some(Value::Object(obj)) => {
                !obj.contains_key("method")
                    && obj.get("id").unwrap_or(&Value::Null) == id
                    && (obj.contains_key("result") || obj.contains_key("error"))
            }
            _ => false,
        }
    }

    /// The `error.code` of a response, if it has one.
    pub fn error_code(&self) -> Option<i64> {
        self.json.as_ref()?.get("error")?.get("code")?.as_i64()
    }
}

#[derive(Default)]
struct FrameLogState {
    frames: VecDeque<LoggedFrame>,
    next_seq: u64,
    /// Set when the plugin's stdout could not be framed any more.
    broken: Option<String>,
    /// Set when the plugin's stdout ended.
    ended: bool,
}

struct FrameLog {
    state: Mutex<FrameLogState>,
    changed: Notify,
    limit: usize,
}

impl FrameLog {
    fn new(limit: usize) -> FrameLog {
        FrameLog {
            state: Mutex::new(FrameLogState::default()),
            changed: Notify::new(),
            limit: limit.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FrameLogState> {
        // A panic while holding this lock cannot leave the log inconsistent; carry on.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, body: Vec<u8>) {
        let json = serde_json::from_slice(&body).ok();
        let mut state = self.lock();
        let seq = state.next_seq;
        state.next_seq += 1;
        state.frames.push_back(LoggedFrame { seq, body, json });
        while state.frames.len() > self.limit {
            state.frames.pop_front();
        }
        drop(state);
        self.changed.notify_waiters();
    }

    fn set_broken(&self, why: String) {
        self.lock().broken.get_or_insert(why);
        self.changed.notify_waiters();
    }

    fn end(&self) {
        self.lock().ended = true;
        self.changed.notify_waiters();
    }
}

/// The last `limit` bytes a plugin wrote to stderr.
struct StderrBuffer {
    bytes: Mutex<VecDeque<u8>>,
    limit: usize,
}

impl StderrBuffer {
    fn push(&self, chunk: &[u8]) {
        let mut bytes = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        bytes.extend(chunk);
        let excess = bytes.len().saturating_sub(self.limit);
        bytes.drain(..excess);
    }

    fn text(&self) -> String {
        let bytes = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        let (a, b) = bytes.as_slices();
        let mut all = Vec::with_capacity(a.len() + b.len());
        all.extend_from_slice(a);
        all.extend_from_slice(b);
        String::from_utf8_lossy(&all).into_owned()
    }
}

enum StdinCommand {
    Raw(Vec<u8>, oneshot::Sender<io::Result<()>>),
    Close(oneshot::Sender<()>),
}

/// A running plugin process and the connection to it. Dropping it kills the process group.
pub struct TestPlugin {
    child: Child,
    pid: Option<u32>,
    /// The process group to kill, until the leader's exit has been seen (and the group
    /// killed then: after that its id may be reused).
    group: Option<i32>,
    conn: Connection,
    stdin: mpsc::Sender<StdinCommand>,
    stderr: Arc<StderrBuffer>,
    frames: Arc<FrameLog>,
    notifications: mpsc::Receiver<Notification>,
    timeout: Duration,
    epoch: u64,
    exit: Option<ExitStatus>,
    handshake: Option<Handshake>,
}

impl fmt::Debug for TestPlugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestPlugin")
            .field("pid", &self.pid)
            .field("exit", &self.exit)
            .finish_non_exhaustive()
    }
}

impl TestPlugin {
    /// Start `command` (program and arguments) without a handshake. Must be called inside a
    /// tokio runtime.
    ///
    /// # Errors
    /// An empty command line, or the error of starting the program.
    pub fn spawn(command: &[OsString], options: SpawnOptions) -> io::Result<TestPlugin> {
        let (program, args) = command.split_first().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "the command line is empty")
        })?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env("UTTER_PLUGIN_TRANSPORT", "stdio")
            .env("UTTER_PLUGIN_ID", &options.plugin_id)
            .env_remove("UTTER_PLUGIN_SOCKET")
            .envs(options.env.iter().map(|(k, v)| (k, v)))
            .process_group(0)
            .kill_on_drop(true);
        if let Some(dir) = &options.current_dir {
            cmd.current_dir(dir);
        }
        let mut child = cmd.spawn()?;
        let missing = || io::Error::other("the child's stdio pipes are missing");
        let stdin = child.stdin.take().ok_or_else(missing)?;
        let stdout = child.stdout.take().ok_or_else(missing)?;
        let stderr_pipe = child.stderr.take().ok_or_else(missing)?;
        let pid = child.id();

        // stdout → tap (frame log) → the connection's reader;
        // the connection's writer → pump (whole frames, raw writes between them) → stdin.
        let (tap_end, conn_read_end) = tokio::io::duplex(64 * 1024);
        let (conn_write_end, pump_end) = tokio::io::duplex(64 * 1024);
        let frames = Arc::new(FrameLog::new(options.frame_log_limit));
        tokio::spawn(stdout_tap(
            stdout,
            tap_end,
            frames.clone(),
            options.max_body,
        ));
        let (stdin_tx, stdin_rx) = mpsc::channel(16);
        tokio::spawn(stdin_pump(
            stdin,
            FramedRead::new(pump_end, FrameCodec::new(options.max_body)),
            stdin_rx,
        ));
        let stderr = Arc::new(StderrBuffer {
            bytes: Mutex::new(VecDeque::new()),
            limit: options.stderr_limit.max(1),
        });
        tokio::spawn(stderr_reader(stderr_pipe, stderr.clone()));

        let (conn, incoming) = Connection::spawn(
            conn_read_end,
            conn_write_end,
            ConnectionOptions {
                max_body: options.max_body,
                id_prefix: Some(format!("{}:", options.epoch)),
                label: options.plugin_id.clone(),
                ..Default::default()
            },
        );
        let (notes_tx, notes_rx) = mpsc::channel(256);
        tokio::spawn(serve_host(conn.clone(), incoming, options.host, notes_tx));
        Ok(TestPlugin {
            child,
            pid,
            group: pid.and_then(|p| i32::try_from(p).ok()),
            conn,
            stdin: stdin_tx,
            stderr,
            frames,
            notifications: notes_rx,
            timeout: options.timeout,
            epoch: options.epoch,
            exit: None,
            handshake: None,
        })
    }

    /// Start `command` and run the runner's handshake on it (with [`SpawnOptions::epoch`] and
    /// [`SpawnOptions::timeout`]).
    ///
    /// # Errors
    /// [`StartError::Spawn`], or [`StartError::Handshake`] with the plugin's stderr (the
    /// process is killed).
    pub async fn start(
        command: &[OsString],
        options: SpawnOptions,
    ) -> Result<TestPlugin, StartError> {
        let mut plugin = TestPlugin::spawn(command, options)?;
        let handshake_options = plugin.handshake_options();
        match plugin.handshake(&handshake_options).await {
            Ok(_) => Ok(plugin),
            Err(error) => {
                // Give its last words a moment to arrive.
                let _ = plugin.wait_for_exit(Duration::from_millis(200)).await;
                Err(StartError::Handshake {
                    error,
                    stderr: plugin.stderr(),
                })
            }
        }
    }

    /// Handshake options with this plugin's epoch and timeout and nothing configured.
    pub fn handshake_options(&self) -> HandshakeOptions<'static> {
        HandshakeOptions {
            epoch: self.epoch,
            timeout: Some(self.timeout),
            ..Default::default()
        }
    }

    /// Run the runner's handshake ([`host::handshake`]) and keep its result.
    ///
    /// # Errors
    /// The step that failed.
    pub async fn handshake(
        &mut self,
        options: &HandshakeOptions<'_>,
    ) -> Result<&Handshake, HandshakeError> {
        let done = host::handshake(&self.conn, options).await?;
        Ok(self.handshake.insert(done))
    }

    /// The result of the last successful [`TestPlugin::handshake`].
    pub fn handshake_result(&self) -> Option<&Handshake> {
        self.handshake.as_ref()
    }

    /// The connection to the plugin (request ids `"<epoch>:<n>"`).
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// The process id, while the process had not been reaped when it was started.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The epoch given in [`SpawnOptions::epoch`].
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The default request timeout ([`SpawnOptions::timeout`]).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Send a request and wait for its answer, at most [`SpawnOptions::timeout`].
    ///
    /// # Errors
    /// The plugin's error; `-32001` on timeout; `-32000` when the connection closed.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, ErrorObject> {
        self.conn.request(method, params, Some(self.timeout)).await
    }

    /// Send a request with a timeout of its own (`None`: as long as the connection lives).
    ///
    /// # Errors
    /// As [`TestPlugin::request`].
    pub async fn request_with_timeout(
        &self,
        method: &str,
        params: Value,
        timeout: Option<Duration>,
    ) -> Result<Value, ErrorObject> {
        self.conn.request(method, params, timeout).await
    }

    /// Send a notification.
    ///
    /// # Errors
    /// `-32000` when the connection is closed.
    pub async fn notify(&self, method: &str, params: Value) -> Result<(), ErrorObject> {
        self.conn.notify(method, params).await
    }

    /// Write `bytes` to the plugin's stdin as they are, between two of the connection's
    /// frames (never inside one). Waits at most [`SpawnOptions::timeout`] (a plugin that
    /// does not read its stdin fills the pipe).
    ///
    /// # Errors
    /// `BrokenPipe` when stdin is closed, `TimedOut`, or the write error.
    pub async fn write_raw(&self, bytes: impl Into<Vec<u8>>) -> io::Result<()> {
        let (tx, rx) = oneshot::channel();
        let closed = || io::Error::new(io::ErrorKind::BrokenPipe, "the plugin's stdin is closed");
        let write = async {
            self.stdin
                .send(StdinCommand::Raw(bytes.into(), tx))
                .await
                .map_err(|_| closed())?;
            rx.await.map_err(|_| closed())?
        };
        tokio::time::timeout(self.timeout, write)
            .await
            .unwrap_or_else(|_| {
                Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the plugin did not read its stdin within {} ms",
                        self.timeout.as_millis()
                    ),
                ))
            })
    }

    /// Write one `Content-Length` frame holding `body`, whatever it is.
    ///
    /// # Errors
    /// As [`TestPlugin::write_raw`].
    pub async fn write_frame(&self, body: &[u8]) -> io::Result<()> {
        self.write_raw(encode_frame(body)).await
    }

    /// Write one frame holding `message` as compact JSON (any value: a request with an id of
    /// your choosing, a notification, something invalid). Answers to requests sent so are not
    /// matched by the connection; find them with [`TestPlugin::wait_for_response`].
    ///
    /// # Errors
    /// As [`TestPlugin::write_raw`].
    pub async fn write_message(&self, message: &Value) -> io::Result<()> {
        let body = serde_json::to_vec(message).map_err(io::Error::other)?;
        self.write_frame(&body).await
    }

    /// Close the plugin's stdin (its cue to exit, §7). The connection can still read what the
    /// plugin writes; writing to it has no effect any more. Waits at most
    /// [`SpawnOptions::timeout`] for writes queued before (after that stdin closes as soon as
    /// they are done).
    pub async fn close_stdin(&self) {
        let (tx, rx) = oneshot::channel();
        let close = async {
            if self.stdin.send(StdinCommand::Close(tx)).await.is_ok() {
                let _ = rx.await;
            }
        };
        let _ = tokio::time::timeout(self.timeout, close).await;
    }

    /// The number of frames the plugin has written so far: pass it to
    /// [`TestPlugin::wait_for_frame`] to look only at frames that come later.
    pub fn frame_mark(&self) -> u64 {
        self.frames.lock().next_seq
    }

    /// The frames the frame log still holds, oldest first.
    pub fn frames(&self) -> Vec<LoggedFrame> {
        self.frames.lock().frames.iter().cloned().collect()
    }

    /// The frames numbered `mark` and later that the log still holds.
    pub fn frames_since(&self, mark: u64) -> Vec<LoggedFrame> {
        self.frames
            .lock()
            .frames
            .iter()
            .filter(|f| f.seq >= mark)
            .cloned()
            .collect()
    }

    /// Why the plugin's stdout could not be framed any more, if it could not.
    pub fn framing_error(&self) -> Option<String> {
        self.frames.lock().broken.clone()
    }

    /// Wait until the plugin writes a frame numbered `mark` or later for which `matches` is
    /// true, at most `timeout`. `None` on timeout or when the plugin's stdout ended first.
    pub async fn wait_for_frame(
        &self,
        mark: u64,
        timeout: Duration,
        mut matches: impl FnMut(&LoggedFrame) -> bool,
    ) -> Option<LoggedFrame> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let changed = self.frames.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let state = self.frames.lock();
                if let Some(found) = state.frames.iter().find(|f| f.seq >= mark && matches(f)) {
                    return Some(found.clone());
                }
                if state.ended || state.broken.is_some() {
                    return None;
                }
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return None;
            }
        }
    }

    /// Wait for the response (a frame numbered `mark` or later) whose id is exactly `id`; the
    /// whole message.
    pub async fn wait_for_response(
        &self,
        mark: u64,
        id: &Value,
        timeout: Duration,
    ) -> Option<Value> {
        self.wait_for_frame(mark, timeout, |f| f.is_response_to(id))
            .await
            .and_then(|f| f.json)
    }

    /// The next notification the plugin sent, waiting at most `timeout`.
    pub async fn next_notification(&mut self, timeout: Duration) -> Option<Notification> {
        tokio::time::timeout(timeout, self.notifications.recv())
            .await
            .ok()
            .flatten()
    }

    /// What the plugin wrote to stderr (the last [`SpawnOptions::stderr_limit`] bytes, invalid
    /// UTF-8 replaced).
    pub fn stderr(&self) -> String {
        self.stderr.text()
    }

    /// The exit status, if the process has exited (without waiting).
    pub fn try_exit_status(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.exited(status);
            }
        }
        self.exit
    }

    /// Record the exit, and kill what is left of the process group while its id is still
    /// ours.
    fn exited(&mut self, status: ExitStatus) {
        self.exit = Some(status);
        self.kill_group();
        self.group = None;
    }

    /// Wait at most `timeout` for the process to exit: `Ok(None)` when it is still running.
    ///
    /// # Errors
    /// The error of waiting for the child.
    pub async fn wait_for_exit(&mut self, timeout: Duration) -> io::Result<Option<ExitStatus>> {
        if let Some(status) = self.exit {
            return Ok(Some(status));
        }
        match tokio::time::timeout(timeout, self.child.wait()).await {
            Ok(Ok(status)) => {
                self.exited(status);
                Ok(Some(status))
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Ok(None),
        }
    }

    /// Kill the process group with SIGKILL and reap the process.
    ///
    /// # Errors
    /// The error of killing or waiting.
    pub async fn kill(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.try_exit_status() {
            return Ok(status);
        }
        self.kill_group();
        let _ = self.child.start_kill();
        let status = self.child.wait().await?;
        self.exited(status);
        Ok(status)
    }

    /// Stop the plugin as the runner drains one: close its stdin, wait up to `grace` for it
    /// to exit, then kill it.
    ///
    /// # Errors
    /// The error of waiting for or killing the child.
    pub async fn shutdown(mut self, grace: Duration) -> io::Result<ExitStatus> {
        self.close_stdin().await;
        if let Some(status) = self.wait_for_exit(grace).await? {
            return Ok(status);
        }
        self.kill().await
    }

    /// SIGKILL to the plugin's process group (it leads one of its own), so children it
    /// started go too. Harmless when the group is gone.
    fn kill_group(&self) {
        if let Some(group) = self.group {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(group),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

impl Drop for TestPlugin {
    fn drop(&mut self) {
        // The leader has not been reaped (else `group` is `None`), so the group id is still
        // ours; `kill_on_drop` reaps the leader.
        self.kill_group();
    }
}

/// Copy the plugin's stdout to the connection, logging each frame on the way.
async fn stdout_tap<R, W>(mut stdout: R, mut to_conn: W, log: Arc<FrameLog>, max_body: usize)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut chunk = vec![0u8; 64 * 1024];
    let mut codec = FrameCodec::new(max_body);
    let mut pending = BytesMut::new();
    let mut decoding = true;
    let mut conn_alive = true;
    loop {
        let n = match stdout.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let bytes = &chunk[..n];
        if conn_alive && to_conn.write_all(bytes).await.is_err() {
            // The connection is gone; keep reading so the plugin never blocks on a full pipe.
            conn_alive = false;
        }
        if decoding {
            pending.extend_from_slice(bytes);
            loop {
                match codec.decode(&mut pending) {
                    Ok(Some(InboundFrame::Body(body))) => log.push(body.to_vec()),
                    Ok(Some(InboundFrame::Oversized { .. })) => {}
                    Ok(None) => break,
                    Err(e) => {
                        log.set_broken(e.to_string());
                        decoding = false;
                        pending.clear();
                        break;
                    }
                }
            }
        }
    }
    if decoding && !pending.is_empty() {
        log.set_broken(format!(
            "stdout ended in the middle of a frame ({} bytes pending)",
            pending.len()
        ));
    }
    let _ = to_conn.shutdown().await;
    log.end();
}

/// Write the connection's frames and the raw writes to the plugin's stdin, one whole item at
/// a time, until both sides are done. Closing (by command, or by the connection shutting its
/// writer down) drops stdin, which the plugin sees as end of file.
async fn stdin_pump<W, R>(
    stdin: W,
    mut from_conn: FramedRead<R, FrameCodec>,
    mut commands: mpsc::Receiver<StdinCommand>,
) where
    W: AsyncWrite + Unpin,
    R: AsyncRead + Unpin,
{
    let mut stdin = Some(stdin);
    let mut conn_open = true;
    let mut commands_open = true;
    async fn put<W: AsyncWrite + Unpin>(stdin: &mut Option<W>, bytes: &[u8]) -> io::Result<()> {
        let Some(w) = stdin.as_mut() else {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the plugin's stdin is closed",
            ));
        };
        let result = match w.write_all(bytes).await {
            Ok(()) => w.flush().await,
            Err(e) => Err(e),
        };
        if result.is_err() {
            *stdin = None;
        }
        result
    }
    while conn_open || commands_open {
        tokio::select! {
            frame = from_conn.next(), if conn_open => match frame {
                Some(Ok(InboundFrame::Body(body))) => {
                    let _ = put(&mut stdin, &encode_frame(&body)).await;
                }
                Some(Ok(InboundFrame::Oversized { .. })) => {}
                Some(Err(_)) | None => {
                    conn_open = false;
                    stdin = None;
                }
            },
            command = commands.recv(), if commands_open => match command {
                Some(StdinCommand::Raw(bytes, reply)) => {
                    let _ = reply.send(put(&mut stdin, &bytes).await);
                }
                Some(StdinCommand::Close(reply)) => {
                    if let Some(mut w) = stdin.take() {
                        let _ = w.shutdown().await;
                    }
                    let _ = reply.send(());
                }
                None => commands_open = false,
            },
        }
    }
}

async fn stderr_reader<R: AsyncRead + Unpin>(mut stderr: R, buffer: Arc<StderrBuffer>) {
    let mut chunk = vec![0u8; 8 * 1024];
    loop {
        match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buffer.push(&chunk[..n]),
        }
    }
}

/// Answer the plugin's requests with the host handler (each on its own task) and pass its
/// notifications on (dropped when nobody reads them and the queue is full).
async fn serve_host(
    conn: Connection,
    mut incoming: mpsc::Receiver<Incoming>,
    handler: HostHandler,
    notes: mpsc::Sender<Notification>,
) {
    while let Some(msg) = incoming.recv().await {
        match msg {
            Incoming::Request(request) => {
                let conn = conn.clone();
                let handler = handler.clone();
                tokio::spawn(async move {
                    let id = request.id.clone();
                    let result = handler.call(request).await;
                    let _ = conn.respond(id, result).await;
                });
            }
            Incoming::Notification(note) => {
                let _ = notes.try_send(note);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn stderr_keeps_the_last_bytes() {
        let buffer = StderrBuffer {
            bytes: Mutex::new(VecDeque::new()),
            limit: 5,
        };
        buffer.push(b"abc");
        buffer.push(b"defgh");
        assert_eq!(buffer.text(), "defgh");
    }

    #[tokio::test]
    async fn the_frame_log_is_bounded_and_numbered() {
        let log = FrameLog::new(2);
        for n in 0..3 {
            log.push(format!("{{\"n\":{n}}}").into_bytes());
        }
        let state = log.lock();
        let seqs: Vec<u64> = state.frames.iter().map(|f| f.seq).collect();
        assert_eq!(seqs, [1, 2]);
        assert_eq!(state.frames[1].json, Some(json!({"n": 2})));
    }

    /// Whether process `pid` is gone or a zombie.
    fn dead(pid: &str) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        }
    }

    #[tokio::test]
    async fn dropping_the_plugin_kills_what_it_started() {
        let plugin = TestPlugin::spawn(
            &[
                "sh".into(),
                "-c".into(),
                "sleep 1000 & echo $! >&2; exec cat >/dev/null".into(),
            ],
            SpawnOptions::default(),
        )
        .expect("sh runs");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        let sleeper = loop {
            let text = plugin.stderr();
            if let Some(line) = text.lines().next().filter(|_| text.ends_with('\n')) {
                break line.trim().to_owned();
            }
            assert!(tokio::time::Instant::now() < deadline, "no pid on stderr");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(!dead(&sleeper));
        drop(plugin);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !dead(&sleeper) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "sleep {sleeper} survived"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn a_shell_plugin_is_spoken_to_and_stopped() {
        // `cat` echoes our frames back: each request comes back as a request from "the
        // plugin", which the host handler answers -32601 (and `cat` echoes that too).
        let mut plugin = TestPlugin::spawn(
            &["cat".into()],
            SpawnOptions {
                timeout: Duration::from_millis(300),
                ..Default::default()
            },
        )
        .expect("cat runs");
        let mark = plugin.frame_mark();
        plugin
            .write_message(&json!({"jsonrpc": "2.0", "id": "x", "method": "m", "params": {}}))
            .await
            .unwrap();
        let echoed = plugin
            .wait_for_frame(mark, Duration::from_secs(5), |f| {
                f.json.as_ref().is_some_and(|j| j["id"] == "x")
            })
            .await
            .expect("cat echoes the frame");
        assert_eq!(echoed.json.unwrap()["method"], "m");
        plugin.close_stdin().await;
        let status = plugin.wait_for_exit(Duration::from_secs(5)).await.unwrap();
        assert!(status.is_some_and(|s| s.success()));
    }
}
