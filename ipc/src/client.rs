//! A typed client of the runner's socket: `utter status`, `say`, `confirm`, `pending`,
//! `reload`, `events` and `ptt` talk to a running `utter daemon` through it, and so can a
//! settings app or a bar widget.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let path = utter_ipc::paths::BaseDirs::from_env().socket();
//! let client = utter_ipc::Client::connect(&path, utter_ipc::client::client_token(None), None).await?;
//! let status = client.status().await?;
//! println!("{} with {} plugins", status.state.as_str(), status.plugins.len());
//! # Ok(()) }
//! ```
//!
//! The runner admits its own `utter` binary without a token. When the runner asks for one
//! anyway (an `utter` built elsewhere than the running daemon), the client reads the token
//! (`[socket] token`, else the token file) and sends `runner.auth` once, then repeats the
//! request. `host.confirm` requests from the runner go to the [`ConfirmHandler`];
//! `runner.event` notifications are kept for [`Client::next_event`].

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::methods::{
    self, AuditParams, CommandParams, ConfirmParams, EventParams, InvokeParams, PttParams,
    PttReply, Request, SubscribeParams, VersionInfo,
};
use crate::{AuditEntry, CommandOutcome, PendingConfirmation, ReloadReport, Status};
use utter_protocol::{Connection, ConnectionOptions, ErrorCode, ErrorObject, Incoming};

/// Answers the runner's `host.confirm` requests: given its params (`{id, op, args,
/// provenance, summary}`), returns whether the person approved.
pub type ConfirmHandler =
    Arc<dyn Fn(Value) -> Pin<Box<dyn Future<Output = bool> + Send>> + Send + Sync>;

/// Why the client could not reach the runner.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// Nothing listens on the socket (no file, or a stale one).
    #[error(
        "no runner is listening on {}; start it with `utter daemon` (or systemctl --user start utter)",
        .path.display()
    )]
    NotListening {
        /// The socket path tried.
        path: PathBuf,
    },
    /// The socket is served by a process of another user: it is not this user's runner, and
    /// nothing (a token least of all) is sent to it.
    #[error(
        "the socket {} is served by a process of uid {uid}, not by this user (uid {own}); refusing to talk to it",
        .path.display()
    )]
    ForeignServer {
        /// The socket path.
        path: PathBuf,
        /// The server's uid.
        uid: u32,
        /// This process's uid.
        own: u32,
    },
    /// Connecting failed for another reason (e.g. permission denied).
    #[error("cannot connect to the runner at {}: {source}{}", .path.display(), hint(.source))]
    Connect {
        /// The socket path tried.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

fn hint(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => {
            " (the socket belongs to another user, or its directory is private to its owner)"
        }
        std::io::ErrorKind::WouldBlock => {
            " (its queue of new connections stayed full for 2 s: another process is opening connections faster than the runner takes them; `ss -xp` shows who)"
        }
        _ => "",
    }
}

/// A connection to the runner.
pub struct Client {
    conn: Connection,
    path: PathBuf,
    token: Option<String>,
    authenticated: AtomicBool,
    events: mpsc::Receiver<EventParams>,
}

impl Client {
    /// Connect to the socket at `path`. `token` is used only if the runner asks for
    /// authentication; `confirm` answers `host.confirm` (without one, every confirmation
    /// is denied).
    ///
    /// # Errors
    /// [`ClientError::NotListening`] when nothing listens there;
    /// [`ClientError::ForeignServer`] when another user's process serves it;
    /// [`ClientError::Connect`] otherwise.
    pub async fn connect(
        path: &Path,
        token: Option<String>,
        confirm: Option<ConfirmHandler>,
    ) -> Result<Client, ClientError> {
        // A full connection queue (EAGAIN: another process floods the socket) clears in
        // moments; try again for up to two seconds before saying so.
        let mut attempt = 0u32;
        let connected = loop {
            match tokio::net::UnixStream::connect(path).await {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && attempt < 40 => {
                    attempt += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                other => break other,
            }
        };
        let stream = connected.map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                ClientError::NotListening {
                    path: path.to_path_buf(),
                }
            }
            _ => ClientError::Connect {
                path: path.to_path_buf(),
                source,
            },
        })?;
        // Whoever may write to the socket's directory could have put their own server there;
        // talk only to a process of this user.
        let own = nix::unistd::getuid().as_raw();
        match stream.peer_cred() {
            Ok(cred) if cred.uid() == own => {}
            Ok(cred) => {
                return Err(ClientError::ForeignServer {
                    path: path.to_path_buf(),
                    uid: cred.uid(),
                    own,
                });
            }
            Err(source) => {
                return Err(ClientError::Connect {
                    path: path.to_path_buf(),
                    source,
                });
            }
        }
        let (read, write) = stream.into_split();
        let (conn, incoming) = Connection::spawn(
            read,
            write,
            ConnectionOptions {
                label: "runner".into(),
                ..Default::default()
            },
        );
        let (events_tx, events) = mpsc::channel(256);
        tokio::spawn(serve_incoming(conn.clone(), incoming, confirm, events_tx));
        Ok(Client {
            conn,
            path: path.to_path_buf(),
            token,
            authenticated: AtomicBool::new(false),
            events,
        })
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Call `method` and wait for its result (no timeout: the runner bounds its own work).
    /// When the runner asks for authentication, authenticate once and repeat the call (also
    /// when another call of this client authenticated meanwhile).
    ///
    /// # Errors
    /// The runner's error object; `-32000` when the connection closed (the message then
    /// says that the runner may have refused this process).
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, ErrorObject> {
        match self.raw_call(method, params.clone()).await {
            Err(e) if is_auth_required(&e) => {
                // Two calls made at once may both be refused before either authenticated:
                // the one that finds the connection authenticated by the other repeats its
                // call rather than report the refusal.
                if !self.authenticated.load(Ordering::Acquire) {
                    let Some(token) = &self.token else {
                        return Err(ErrorObject::new(
                            ErrorCode::Denied,
                            format!(
                                "{} — the runner did not admit this binary, and no token was found (set [socket] token, or run the utter binary the runner runs)",
                                e.message
                            ),
                        ));
                    };
                    self.raw_call("runner.auth", json!({"token": token}))
                        .await?;
                    self.authenticated.store(true, Ordering::Release);
                }
                self.raw_call(method, params).await
            }
            other => other,
        }
    }

    async fn raw_call(&self, method: &str, params: Value) -> Result<Value, ErrorObject> {
        let e = match self.conn.request(method, params, None).await {
            Ok(value) => return Ok(value),
            Err(e) => e,
        };
        if e.kind() != ErrorCode::PluginError || !self.conn.is_closed() {
            return Err(e);
        }
        // The runner says why it refused before it closes; writing our request may have
        // failed first (a broken pipe), before that frame was read: give the reader a moment.
        let mut said = self.conn.last_peer_report();
        for _ in 0..100 {
            if said.is_some() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            said = self.conn.last_peer_report();
        }
        Err(match said {
            Some(said) => ErrorObject::new(
                said.kind(),
                format!("the runner refused this connection: {}", said.message),
            ),
            None => ErrorObject::new(
                ErrorCode::PluginError,
                format!(
                    "the runner closed the connection ({}); it refuses processes of other users, and stops when asked to",
                    e.message
                ),
            ),
        })
    }

    /// Call `method` and read its result as `T`.
    ///
    /// # Errors
    /// As [`Client::call`]; `-32603` when the result does not have `T`'s shape.
    pub async fn call_typed<T: DeserializeOwned>(
        &self,
        method: &str,
        params: Value,
    ) -> Result<T, ErrorObject> {
        let value = self.call(method, params).await?;
        serde_json::from_value(value).map_err(|e| {
            ErrorObject::internal(format!("{method} answered in an unexpected shape: {e}"))
        })
    }

    /// One request of the runner ([`Request`]: its name and typed params), its result read
    /// as `T`.
    ///
    /// # Errors
    /// As [`Client::call_typed`].
    pub async fn send<T: DeserializeOwned>(&self, request: &Request) -> Result<T, ErrorObject> {
        self.call_typed(request.method(), request.params()).await
    }

    /// `runner.version`.
    ///
    /// # Errors
    /// As [`Client::call_typed`].
    pub async fn version(&self) -> Result<VersionInfo, ErrorObject> {
        self.send(&Request::Version).await
    }

    /// `runner.status`: the whole state.
    ///
    /// # Errors
    /// As [`Client::call_typed`].
    pub async fn status(&self) -> Result<Status, ErrorObject> {
        self.send(&Request::Status).await
    }

    /// `runner.context`: the desktop context now.
    ///
    /// # Errors
    /// `-32005` without a context plugin; the plugin's error; else as [`Client::call_typed`].
    pub async fn context(&self) -> Result<crate::methods::ContextReply, ErrorObject> {
        self.send(&Request::Context).await
    }

    /// `runner.pending`: the confirmations waiting for an answer.
    ///
    /// # Errors
    /// As [`Client::call_typed`].
    pub async fn pending(&self) -> Result<Vec<PendingConfirmation>, ErrorObject> {
        self.send(&Request::Pending).await
    }

    /// `runner.confirm {id, approved}`.
    ///
    /// # Errors
    /// As [`Client::call`]; `-32602` for an unknown id.
    pub async fn confirm(&self, id: &str, approved: bool) -> Result<(), ErrorObject> {
        let params = ConfirmParams {
            id: id.to_owned(),
            approved,
            digest: None,
        };
        self.send::<Value>(&Request::Confirm(params))
            .await
            .map(|_| ())
    }

    /// `runner.audit {since?}`: the gate's recent decisions, oldest first; `since` in seconds
    /// since the Unix epoch.
    ///
    /// # Errors
    /// As [`Client::call_typed`].
    pub async fn audit(&self, since: Option<u64>) -> Result<Vec<AuditEntry>, ErrorObject> {
        self.send(&Request::Audit(AuditParams { since })).await
    }

    /// `runner.history {limit?}`: the commands that acted, newest first.
    ///
    /// # Errors
    /// As [`Client::call_typed`].
    pub async fn history(
        &self,
        limit: Option<usize>,
    ) -> Result<Vec<crate::HistoryEntry>, ErrorObject> {
        self.send(&Request::History(crate::methods::HistoryParams { limit }))
            .await
    }

    /// `runner.command`: plan, check and run one utterance.
    ///
    /// # Errors
    /// As [`Client::call_typed`]; the runner's `-32602` for a blank utterance, `-32005`
    /// without a router.
    pub async fn command(&self, params: &CommandParams) -> Result<CommandOutcome, ErrorObject> {
        self.send(&Request::Command(params.clone())).await
    }

    /// `runner.invoke {plugin, method, params}`: one call to one plugin, through the gate
    /// when it acts.
    ///
    /// # Errors
    /// As [`Client::call`].
    pub async fn invoke(
        &self,
        plugin: &str,
        method: &str,
        params: Value,
    ) -> Result<Value, ErrorObject> {
        let params = InvokeParams {
            plugin: plugin.to_owned(),
            method: method.to_owned(),
            params: Some(params),
        };
        self.send(&Request::Invoke(params)).await
    }

    /// `runner.reload`: read the config again.
    ///
    /// # Errors
    /// As [`Client::call_typed`]; `-32602` with `data: {errors, warnings}` for an invalid
    /// file (the running config stays).
    pub async fn reload(&self) -> Result<ReloadReport, ErrorObject> {
        self.send(&Request::Reload).await
    }

    /// Push-to-talk: `runner.ptt {action}` with `action` one of `press`, `release`,
    /// `toggle`, `cancel`, `state`.
    ///
    /// # Errors
    /// As [`Client::call_typed`]; `-32602` for an unknown action.
    pub async fn ptt(&self, action: &str) -> Result<PttReply, ErrorObject> {
        self.ptt_for(action, false).await
    }

    /// [`Client::ptt`]; with `dictation`, a `press` or `toggle` holds to dictate (what is
    /// heard is typed, for this hold).
    ///
    /// # Errors
    /// As [`Client::ptt`]; `-32602` for `dictation` with another action.
    pub async fn ptt_for(&self, action: &str, dictation: bool) -> Result<PttReply, ErrorObject> {
        let params = PttParams {
            action: action.to_owned(),
            dictation,
        };
        self.send(&Request::Ptt(params)).await
    }

    /// Subscribe to events; they then arrive through [`Client::next_event`], a
    /// [`crate::Event::Snapshot`] first.
    ///
    /// # Errors
    /// As [`Client::call`].
    pub async fn subscribe(&self) -> Result<String, ErrorObject> {
        self.subscribe_with(false).await
    }

    /// As [`Client::subscribe`]; with `logs`, the runner's log lines come too
    /// ([`crate::Event::Log`]): the last ones it kept right after the snapshot, then each new
    /// one.
    ///
    /// # Errors
    /// As [`Client::call`].
    pub async fn subscribe_with(&self, logs: bool) -> Result<String, ErrorObject> {
        let params = SubscribeParams { logs: Some(logs) };
        let result: Value = self.send(&Request::Subscribe(params)).await?;
        result
            .get("subscription")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| ErrorObject::plugin(format!("runner.subscribe returned {result}")))
    }

    /// The next event of a subscription, or `None` when the connection closed. An event this
    /// version does not know is [`crate::Event::Unknown`].
    pub async fn next_event(&mut self) -> Option<EventParams> {
        self.events.recv().await
    }

    /// Close the connection.
    pub fn close(&self) {
        self.conn.close();
    }

    /// Whether the connection is closed or closing (on either side); a long-lived client
    /// connects again when it is.
    pub fn is_closed(&self) -> bool {
        self.conn.is_closed()
    }
}

/// Dropping the client closes its connection at once, so the runner frees its slot
/// (the connection's reader task would otherwise keep the socket open).
impl Drop for Client {
    fn drop(&mut self) {
        self.conn.close();
    }
}

fn is_auth_required(e: &ErrorObject) -> bool {
    e.kind() == ErrorCode::Denied && e.message.starts_with("authentication required")
}

async fn serve_incoming(
    conn: Connection,
    mut incoming: mpsc::Receiver<Incoming>,
    confirm: Option<ConfirmHandler>,
    events: mpsc::Sender<EventParams>,
) {
    while let Some(message) = incoming.recv().await {
        match message {
            Incoming::Request(request) if request.method == "host.confirm" => {
                let conn = conn.clone();
                let confirm = confirm.clone();
                tokio::spawn(async move {
                    let approved = match confirm {
                        Some(ask) => ask(request.params).await,
                        None => false,
                    };
                    let _ = conn
                        .respond(request.id, Ok(json!({"approved": approved})))
                        .await;
                });
            }
            Incoming::Request(request) => {
                let _ = conn
                    .respond(
                        request.id,
                        Err(ErrorObject::method_not_found(&request.method)),
                    )
                    .await;
            }
            Incoming::Notification(note) if note.method == methods::EVENT => {
                let Ok(params) = serde_json::from_value::<EventParams>(note.params) else {
                    // Not even a subscription and an event: nothing a client could use.
                    continue;
                };
                if events.send(params).await.is_err() {
                    // Nobody reads events; keep serving confirmations.
                    continue;
                }
            }
            Incoming::Notification(_) => {}
        }
    }
}

/// The token a client offers: `[socket] token` when `configured` is not empty, else the
/// token file's content.
pub fn client_token(configured: Option<&str>) -> Option<String> {
    configured
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .or_else(|| {
            crate::paths::BaseDirs::from_env()
                .token()
                .and_then(|p| crate::paths::read_token(&p))
        })
}
