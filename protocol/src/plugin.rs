//! Serve a plugin written in Rust: a [`Handler`] plus one call (PROTOCOL.md §3, §7).
//!
//! ```no_run
//! use utter_protocol::plugin::{self, Call, Handler};
//! use utter_protocol::{ErrorObject, serde_json::{json, Value}};
//!
//! struct Hello;
//!
//! impl Handler for Hello {
//!     fn methods(&self) -> Vec<String> {
//!         vec!["greet.hello".into()]
//!     }
//!     async fn handle(&self, call: Call) -> Result<Value, ErrorObject> {
//!         match call.method.as_str() {
//!             "greet.hello" => Ok(json!({"text": "hello"})),
//!             other => Err(ErrorObject::method_not_found(other)),
//!         }
//!     }
//! }
//!
//! const MANIFEST: &str = r#"
//! name = "hello"
//! version = "0.1.0"
//! kind = "action"
//! protocol = "1.0"
//! abi = 1
//! runtime = "subprocess"
//! transport = "stdio"
//! entrypoint = ["hello"]
//! "#;
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> std::process::ExitCode {
//!     plugin::run(MANIFEST, Hello).await
//! }
//! ```
//!
//! [`run`] serves on the transport the runner chose in the plugin's environment (stdin and
//! stdout, or a unix socket; PROTOCOL.md §1.1).
//!
//! The server answers the handshake from the manifest, runs each request in its own task,
//! aborts a task on `$/cancel` (answering `-32002`), and returns when the runner closes the
//! stream, which is the plugin's cue to exit.

use crate::connection::{CANCEL_METHOD, Connection, ConnectionOptions, Incoming};
use crate::error::{ErrorCode, ErrorObject};
use crate::handshake::{
    self, DescribeResult, HealthResult, HelloParams, PROTOCOL_VERSION, methods,
};
use crate::manifest::Manifest;
use crate::message::RequestId;
use crate::stream::{StreamRegistry, StreamSender};
use futures::FutureExt;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::AbortHandle;

/// One request to a plugin.
#[derive(Debug, Clone)]
pub struct Call {
    /// The request id (for logs; the server answers it).
    pub id: RequestId,
    /// The method, e.g. `"action.invoke"`.
    pub method: String,
    /// Named params (always an object).
    pub params: Value,
    /// The epoch the runner gave this instance in `protocol.hello`.
    pub epoch: u64,
    /// The connection to the runner, for notifications and `host.*` callbacks.
    pub peer: Connection,
}

/// A plugin's behaviour. The handshake methods are answered by the server itself.
pub trait Handler: Send + Sync + 'static {
    /// Methods listed in `plugin.describe`.
    fn methods(&self) -> Vec<String>;

    /// Stream notification methods listed in `plugin.describe` (default none).
    fn streams(&self) -> Vec<String> {
        Vec::new()
    }

    /// Methods without side effects, listed in `plugin.describe` (default none: every method
    /// is treated as acting by the runner's policy).
    fn side_effect_free(&self) -> Vec<String> {
        Vec::new()
    }

    /// The answer to `plugin.health` (default `ok`).
    fn health(&self) -> impl Future<Output = HealthResult> + Send {
        async { HealthResult::ok() }
    }

    /// Answer one request. Unknown methods should return [`ErrorObject::method_not_found`].
    fn handle(&self, call: Call) -> impl Future<Output = Result<Value, ErrorObject>> + Send;

    /// A notification other than `$/cancel`, `stream.ack` and `stream.stop` (default:
    /// ignored).
    fn notify(&self, _method: &str, _params: Value) {}

    /// The runner opens a stream of one of [`Handler::streams`] for a subscriber
    /// (PROTOCOL.md §10.3). Keep `stream` and call [`StreamSender::send`] for each frame (in
    /// reliable mode it waits for credit) until it fails or [`StreamSender::stopped`]
    /// resolves; [`StreamSender::end`] tells the subscriber the stream is over. The server
    /// answers `stream.subscribe` with `{stream_id}` when this returns `Ok`, and handles
    /// `stream.ack` and `stream.stop` itself. Must not block (spawn the producer). Default:
    /// refused with `-32601`.
    fn subscribe(&self, stream: StreamSender) -> Result<(), ErrorObject> {
        let _ = stream;
        Err(ErrorObject::method_not_found(crate::stream::SUBSCRIBE))
    }
}

/// Log to stderr (where the runner collects a plugin's log lines, PROTOCOL.md §7) at the
/// level `UTTER_LOG` names (an `EnvFilter` directive such as `debug` or `utter_input=trace`;
/// default `info`), without timestamps or colours: the runner adds its own. Does nothing
/// when a logger is installed already.
pub fn init_stderr_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("UTTER_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .without_time()
        .with_target(false)
        .try_init();
}

/// Why a `host.action` answer (a step result, PROTOCOL.md §9.6) is not a success: `None`
/// when its `ok` is `true`; else its `error.message`, else its `detail`, else a sentence
/// saying the answer is no successful step. The text is the runner's (and through it an
/// action plugin's): escape it before showing it.
pub fn step_failure(step: &Value) -> Option<&str> {
    if step.get("ok").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    Some(
        step.pointer("/error/message")
            .or_else(|| step.get("detail"))
            .and_then(Value::as_str)
            .unwrap_or("the runner's answer is not a successful step"),
    )
}

/// `params.dry_run` of an `action.invoke` (PROTOCOL.md §8.2): absent or `null` is `false`;
/// anything but a boolean is `-32602`, so a mistyped `"true"` or `1` never acts.
pub fn dry_run(params: &Value) -> Result<bool, ErrorObject> {
    match params.get("dry_run") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(ErrorObject::invalid_params(format!(
            "\"dry_run\" must be true or false, not {}",
            crate::text::escape_unprintable(&other.to_string(), 80).0
        ))),
    }
}

/// Errors that end [`serve`].
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The embedded manifest is invalid.
    #[error(transparent)]
    Manifest(#[from] crate::manifest::ManifestError),
}

/// Parse the manifest and serve on the transport the runner chose (see [`streams`]) until
/// the runner closes the stream. Errors are printed to stderr; the exit code is 0 on a clean
/// end and 1 otherwise.
pub async fn run<H: Handler>(manifest_toml: &str, handler: H) -> std::process::ExitCode {
    let manifest = match Manifest::from_toml_str(manifest_toml, "utter-plugin.toml") {
        Ok(m) => m,
        Err(e) => {
            eprintln!("invalid embedded manifest: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let (reader, writer) = match streams().await {
        Ok(pair) => pair,
        Err(e) => {
            eprintln!("{}: cannot reach the runner: {e}", manifest.name);
            return std::process::ExitCode::FAILURE;
        }
    };
    serve(reader, writer, manifest, handler).await;
    std::process::ExitCode::SUCCESS
}

/// The same as [`run`]: despite its name it honours `UTTER_PLUGIN_TRANSPORT` too, so a
/// plugin written against it works on every transport.
pub async fn run_stdio<H: Handler>(manifest_toml: &str, handler: H) -> std::process::ExitCode {
    run(manifest_toml, handler).await
}

/// A boxed reader half of a transport.
pub type BoxedReader = Box<dyn AsyncRead + Send + Unpin>;
/// A boxed writer half of a transport.
pub type BoxedWriter = Box<dyn AsyncWrite + Send + Unpin>;

/// The reader and writer of the transport the runner chose: the socket of
/// [`socket_from_env`] when there is one, else [`stdio`].
pub async fn streams() -> std::io::Result<(BoxedReader, BoxedWriter)> {
    Ok(match socket_from_env().await? {
        Some(stream) => {
            let (reader, writer, _) = crate::fd::split_into(stream, received_fds());
            (Box::new(reader), Box::new(writer))
        }
        None => stdio(),
    })
}

/// The descriptors the runner sent this process (with `fd.pass` answers) over the socket
/// [`streams`] opened; always empty over stdio. Take one right after its answer arrived.
pub fn received_fds() -> crate::fd::FdInbox {
    static INBOX: std::sync::OnceLock<crate::fd::FdInbox> = std::sync::OnceLock::new();
    INBOX.get_or_init(Default::default).clone()
}

/// The socket to the runner, as `UTTER_PLUGIN_TRANSPORT` and `UTTER_PLUGIN_SOCKET` say
/// (PROTOCOL.md §1.1): `connect` dials the runner's socket; `listen` binds the socket
/// (mode 0600, replacing a stale one) and accepts one connection. `None` for `stdio` or
/// when the variable is unset.
pub async fn socket_from_env() -> std::io::Result<Option<tokio::net::UnixStream>> {
    use std::io::{Error, ErrorKind};
    let transport = std::env::var("UTTER_PLUGIN_TRANSPORT").unwrap_or_default();
    if transport.is_empty() || transport == "stdio" {
        return Ok(None);
    }
    let path = std::env::var_os("UTTER_PLUGIN_SOCKET")
        .filter(|p| !p.is_empty())
        .map(std::path::PathBuf::from)
        .ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidInput,
                format!("UTTER_PLUGIN_TRANSPORT is {transport:?} but UTTER_PLUGIN_SOCKET is unset"),
            )
        })?;
    match transport.as_str() {
        "connect" => tokio::net::UnixStream::connect(&path).await.map(Some),
        "listen" => {
            use std::os::unix::fs::{FileTypeExt, PermissionsExt};
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_socket()) {
                std::fs::remove_file(&path)?;
            }
            let listener = tokio::net::UnixListener::bind(&path)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
            let (stream, _) = listener.accept().await?;
            Ok(Some(stream))
        }
        other => Err(Error::new(
            ErrorKind::InvalidInput,
            format!("unknown UTTER_PLUGIN_TRANSPORT {other:?}; expected stdio, connect or listen"),
        )),
    }
}

/// Stdin and stdout as async streams. When they are pipes (as when the runner spawns the
/// plugin) they are registered with the reactor directly; tokio's own `stdin()`/`stdout()`
/// go through a blocking thread per read and write, which costs a thread hop on every frame.
/// Anything else (a terminal, a file) falls back to those.
pub fn stdio() -> (BoxedReader, BoxedWriter) {
    use std::os::fd::AsFd;
    use tokio::net::unix::pipe;
    let reader: BoxedReader = match std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .and_then(pipe::Receiver::from_owned_fd)
    {
        Ok(rx) => Box::new(rx),
        Err(_) => Box::new(tokio::io::stdin()),
    };
    let writer: BoxedWriter = match std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .and_then(pipe::Sender::from_owned_fd)
    {
        Ok(tx) => Box::new(tx),
        Err(_) => Box::new(tokio::io::stdout()),
    };
    (reader, writer)
}

/// Serve `handler` on a reader/writer pair until the peer closes the stream.
pub async fn serve<R, W, H>(reader: R, writer: W, manifest: Manifest, handler: H)
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
    H: Handler,
{
    let options = ConnectionOptions {
        label: manifest.name.clone(),
        ..Default::default()
    };
    let (conn, mut incoming) = Connection::spawn(reader, writer, options);
    let handler = Arc::new(handler);
    let manifest = Arc::new(manifest);
    let epoch = Arc::new(AtomicU64::new(0));
    let running: Arc<Mutex<HashMap<RequestId, AbortHandle>>> = Arc::default();
    let streams = StreamRegistry::new();

    while let Some(msg) = incoming.recv().await {
        match msg {
            Incoming::Notification(note) if note.method == CANCEL_METHOD => {
                let Some(id) = note.params.get("id").and_then(RequestId::from_value) else {
                    continue;
                };
                let task = running.lock().expect("task map lock").remove(&id);
                if let Some(task) = task {
                    task.abort();
                    let _ = conn
                        .respond(
                            id.clone(),
                            Err(ErrorObject::new(ErrorCode::Cancelled, "cancelled")
                                .with_data(json!({"id": id.to_value()}))),
                        )
                        .await;
                }
            }
            Incoming::Notification(note) => {
                if !streams.on_message(&note.method, &note.params) {
                    handler.notify(&note.method, note.params)
                }
            }
            Incoming::Request(req) => {
                let result = match req.method.as_str() {
                    crate::stream::ACK | crate::stream::STOP => {
                        streams.on_message(&req.method, &req.params);
                        Some(Ok(json!({})))
                    }
                    crate::stream::SUBSCRIBE if !handler.streams().is_empty() => {
                        Some(streams.open(&conn, &req.params).and_then(|sender| {
                            let answer = sender.subscribe_result();
                            handler.subscribe(sender).map(|()| answer)
                        }))
                    }
                    methods::HELLO => Some(hello(&manifest, &req.params, &epoch)),
                    methods::DESCRIBE => Some(Ok(serde_json::to_value(DescribeResult {
                        methods: with_subscribe(handler.methods(), !handler.streams().is_empty()),
                        streams: handler.streams(),
                        side_effect_free: handler.side_effect_free(),
                        // The stream registry below pauses at the window and reads acks.
                        stream_credit: !handler.streams().is_empty(),
                    })
                    .expect("describe serialises"))),
                    _ => None,
                };
                if let Some(result) = result {
                    let _ = conn.respond(req.id, result).await;
                    continue;
                }
                // A second request with the id of one still running would take its place in
                // the task map: the first could then never answer, and `$/cancel` would hit
                // the wrong one (JSON-RPC 2.0 §4: ids identify requests).
                if running.lock().expect("task map lock").contains_key(&req.id) {
                    let _ = conn
                        .respond(
                            req.id.clone(),
                            Err(ErrorObject::new(
                                ErrorCode::InvalidRequest,
                                format!(
                                    "request id {} is already in flight; use a new id",
                                    req.id.to_value()
                                ),
                            )),
                        )
                        .await;
                    continue;
                }
                let call = Call {
                    id: req.id.clone(),
                    method: req.method,
                    params: req.params,
                    epoch: epoch.load(Ordering::Relaxed),
                    peer: conn.clone(),
                };
                let id = req.id;
                let handler = handler.clone();
                let conn2 = conn.clone();
                let running2 = running.clone();
                // Hold the map lock while spawning so the task cannot finish (and try to
                // remove itself) before it is registered.
                let mut map = running.lock().expect("task map lock");
                let task = tokio::spawn({
                    let id = id.clone();
                    async move {
                        let method = call.method.clone();
                        let work = async {
                            if call.method == methods::HEALTH {
                                Ok(serde_json::to_value(handler.health().await)
                                    .expect("health serialises"))
                            } else {
                                handler.handle(call).await
                            }
                        };
                        // A handler that panics still answers: -32603 instead of silence
                        // (the caller would otherwise wait out its whole timeout).
                        let result = match std::panic::AssertUnwindSafe(work).catch_unwind().await {
                            Ok(result) => result,
                            Err(_) => Err(ErrorObject::new(
                                ErrorCode::InternalError,
                                format!(
                                    "the plugin failed inside {method}; this is a bug in the plugin"
                                ),
                            )),
                        };
                        let still_ours = running2
                            .lock()
                            .expect("task map lock")
                            .remove(&id)
                            .is_some();
                        if still_ours {
                            let _ = conn2.respond(id, result).await;
                        }
                    }
                });
                map.insert(id, task.abort_handle());
            }
        }
    }
    for (_, task) in running.lock().expect("task map lock").drain() {
        task.abort();
    }
    streams.stop_all();
}

/// `methods`, plus `stream.subscribe` when the plugin produces streams.
fn with_subscribe(mut methods: Vec<String>, streams: bool) -> Vec<String> {
    if streams && !methods.iter().any(|m| m == crate::stream::SUBSCRIBE) {
        methods.push(crate::stream::SUBSCRIBE.to_owned());
    }
    methods
}

fn hello(manifest: &Manifest, params: &Value, epoch: &AtomicU64) -> Result<Value, ErrorObject> {
    let hello: HelloParams = serde_json::from_value(params.clone()).map_err(|e| {
        ErrorObject::invalid_params(format!(
            "protocol.hello needs {{protocol, abi, runner, epoch}}: {e}"
        ))
    })?;
    let ours: handshake::ProtocolVersion = manifest.protocol.parse().unwrap_or(PROTOCOL_VERSION);
    handshake::negotiate(ours, &hello.protocol, Some(hello.abi))?;
    epoch.store(hello.epoch, Ordering::Relaxed);
    Ok(json!({
        "protocol": manifest.protocol,
        "abi": manifest.abi,
        "plugin": {"name": manifest.name, "version": manifest.version, "kind": manifest.kind},
        "transport": manifest.transport,
        "provides": manifest.provides,
        "requires": manifest.requires,
        "permissions": manifest.permissions,
    }))
}

#[cfg(test)]
mod dry_run_tests {
    use serde_json::json;

    #[test]
    fn only_a_boolean_is_a_dry_run_answer() {
        assert_eq!(super::dry_run(&json!({})), Ok(false));
        assert_eq!(super::dry_run(&json!({"dry_run": null})), Ok(false));
        assert_eq!(super::dry_run(&json!({"dry_run": true})), Ok(true));
        for bad in [json!("true"), json!(1), json!([true]), json!({"x": 1})] {
            let e = super::dry_run(&json!({ "dry_run": bad })).unwrap_err();
            assert_eq!(e.code, -32602);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    struct Sleepy;

    impl Handler for Sleepy {
        fn methods(&self) -> Vec<String> {
            vec!["nap".into(), "echo".into(), "boom".into()]
        }
        async fn handle(&self, call: Call) -> Result<Value, ErrorObject> {
            match call.method.as_str() {
                "nap" => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Ok(json!("woke"))
                }
                "echo" => Ok(json!({"params": call.params, "epoch": call.epoch})),
                "boom" => panic!("a handler bug"),
                other => Err(ErrorObject::method_not_found(other)),
            }
        }
    }

    const MANIFEST: &str = r#"
name = "sleepy"
version = "0.1.0"
kind = "action"
protocol = "1.0"
abi = 1
runtime = "subprocess"
transport = "stdio"
entrypoint = ["sleepy"]
provides = ["experimental/sleepy@1"]
"#;

    async fn start() -> Connection {
        let (a, b) = tokio::io::duplex(64 * 1024);
        let (br, bw) = tokio::io::split(b);
        let manifest = Manifest::from_toml_str(MANIFEST, "test").unwrap();
        tokio::spawn(serve(br, bw, manifest, Sleepy));
        let (ar, aw) = tokio::io::split(a);
        Connection::spawn(ar, aw, ConnectionOptions::default()).0
    }

    #[tokio::test]
    async fn handshake_is_answered_from_the_manifest() {
        let runner = start().await;
        let hello = runner
            .request(
                "protocol.hello",
                json!({"protocol":"1.0","abi":1,"runner":"test","epoch":5}),
                None,
            )
            .await
            .unwrap();
        assert_eq!(hello["plugin"]["name"], "sleepy");
        assert_eq!(hello["provides"], json!(["experimental/sleepy@1"]));
        let describe = runner
            .request("plugin.describe", json!({}), None)
            .await
            .unwrap();
        assert_eq!(describe["methods"], json!(["nap", "echo", "boom"]));
        let health = runner
            .request("plugin.health", json!({}), None)
            .await
            .unwrap();
        assert_eq!(health["status"], "ok");
        let echo = runner.request("echo", json!({"a": 1}), None).await.unwrap();
        assert_eq!(echo["epoch"], 5);
        let missing = runner.request("nope", json!({}), None).await.unwrap_err();
        assert_eq!(missing.code, -32601);
    }

    /// Produces `count` frames of `t.ticks` per subscriber.
    struct Ticker;

    impl Handler for Ticker {
        fn methods(&self) -> Vec<String> {
            Vec::new()
        }
        fn streams(&self) -> Vec<String> {
            vec!["t.ticks".into()]
        }
        async fn handle(&self, call: Call) -> Result<Value, ErrorObject> {
            Err(ErrorObject::method_not_found(&call.method))
        }
        fn subscribe(&self, stream: StreamSender) -> Result<(), ErrorObject> {
            let count = stream.params()["count"].as_u64().unwrap_or(0);
            tokio::spawn(async move {
                for n in 0..count {
                    if stream.send(json!(n)).await.is_err() {
                        return;
                    }
                }
                stream.end("done").await;
            });
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_handler_streams_with_credit_through_serve() {
        let ((runner, mut notes), (pr, pw)) = {
            let (a, b) = tokio::io::duplex(64 * 1024);
            let (ar, aw) = tokio::io::split(a);
            (
                Connection::spawn(ar, aw, ConnectionOptions::default()),
                tokio::io::split(b),
            )
        };
        let manifest = Manifest::from_toml_str(MANIFEST, "test").unwrap();
        tokio::spawn(serve(pr, pw, manifest, Ticker));
        let describe = runner
            .request("plugin.describe", json!({}), None)
            .await
            .unwrap();
        assert_eq!(describe["streams"], json!(["t.ticks"]));
        assert_eq!(describe["methods"], json!(["stream.subscribe"]));
        let answer = runner
            .request(
                "stream.subscribe",
                json!({"stream_id": "s", "method": "t.ticks", "params": {"count": 5}, "mode": "reliable", "window": 2}),
                None,
            )
            .await
            .unwrap();
        assert_eq!(answer, json!({"stream_id": "s"}));
        let mut seqs = Vec::new();
        loop {
            let Some(Incoming::Notification(n)) = notes.recv().await else {
                panic!("closed");
            };
            if n.method == "stream.end" {
                break;
            }
            let seq = n.params["seq"].as_u64().unwrap();
            seqs.push(seq);
            // Credit one frame at a time, once the window is used.
            if seq >= 2 {
                runner
                    .notify("stream.ack", json!({"stream_id": "s", "seq": seq - 1}))
                    .await
                    .unwrap();
            }
        }
        assert_eq!(seqs, [1, 2, 3, 4, 5]);
    }

    #[tokio::test]
    async fn incompatible_runner_is_refused() {
        let runner = start().await;
        let err = runner
            .request(
                "protocol.hello",
                json!({"protocol":"2.0","abi":1,"runner":"test","epoch":0}),
                None,
            )
            .await
            .unwrap_err();
        assert_eq!(err.code, -32004);
    }

    /// Raw frames in, decoded answers out: ids chosen by the test, not by a `Connection`.
    #[tokio::test]
    async fn a_reused_id_in_flight_is_refused_and_a_panicking_handler_still_answers() {
        use futures::StreamExt;
        use tokio::io::AsyncWriteExt;
        let (a, b) = tokio::io::duplex(64 * 1024);
        let (br, bw) = tokio::io::split(b);
        let manifest = Manifest::from_toml_str(MANIFEST, "test").unwrap();
        tokio::spawn(serve(br, bw, manifest, Sleepy));
        let (ar, mut aw) = tokio::io::split(a);
        let mut answers =
            tokio_util::codec::FramedRead::new(ar, crate::frame::FrameCodec::new(1 << 20));
        let mut next = async || -> Value {
            match answers.next().await {
                Some(Ok(crate::frame::InboundFrame::Body(b))) => {
                    serde_json::from_slice(&b).unwrap()
                }
                other => panic!("no answer: {other:?}"),
            }
        };
        for body in [
            json!({"jsonrpc": "2.0", "id": 7, "method": "nap", "params": {}}),
            json!({"jsonrpc": "2.0", "id": 7, "method": "echo", "params": {}}),
            json!({"jsonrpc": "2.0", "id": 8, "method": "boom", "params": {}}),
        ] {
            aw.write_all(&crate::frame::encode_frame(body.to_string().as_bytes()))
                .await
                .unwrap();
        }
        let first = next().await;
        assert_eq!(first["id"], 7);
        assert_eq!(first["error"]["code"], -32600, "{first}");
        assert!(
            first["error"]["message"]
                .as_str()
                .unwrap()
                .contains("already in flight")
        );
        let second = next().await;
        assert_eq!(second["id"], 8);
        assert_eq!(second["error"]["code"], -32603, "{second}");
        // Still serving, and the nap with id 7 is still the one a cancel reaches.
        let cancel = json!({"jsonrpc": "2.0", "method": "$/cancel", "params": {"id": 7}});
        aw.write_all(&crate::frame::encode_frame(cancel.to_string().as_bytes()))
            .await
            .unwrap();
        let third = next().await;
        assert_eq!(third["id"], 7);
        assert_eq!(third["error"]["code"], -32002, "{third}");
    }

    #[tokio::test]
    async fn timed_out_task_is_cancelled_and_the_plugin_keeps_serving() {
        let runner = start().await;
        let err = runner
            .request("nap", json!({}), Some(Duration::from_millis(50)))
            .await
            .unwrap_err();
        assert_eq!(err.code, -32001);
        let echo = runner.request("echo", json!({}), None).await.unwrap();
        assert_eq!(echo["params"], json!({}));
    }
}
