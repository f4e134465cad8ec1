//! The D-Bus door: the runner as the object `/dev/utter/Runner1` (interface
//! `dev.utter.Runner1`) owned under the well-known name `dev.utter.Runner1` on the session bus.
//!
//! The interface is versioned in its name; it only grows (members are added, never renamed or
//! removed). Its introspection data is committed as `dbus/dev.utter.Runner1.xml`, and a test
//! compares that file with the live object. Every payload that has structure travels as JSON
//! text (`s`), the same JSON as the client socket's, so that shell tools (`busctl`, `gdbus`) can
//! read it.
//!
//! | member | shape |
//! |---|---|
//! | `Command(s utterance, a{sv} options) → s outcome` | [`CommandOutcome`](utter_ipc::CommandOutcome) JSON; options `dry_run` (`b`), `timeout_ms` (`u`, `t`, `i` or `x`) |
//! | `Status() → s status` | [`utter_core::runner::Status`] JSON |
//! | `Reload() → s report` | [`utter_core::supervisor::ReloadReport`] JSON |
//! | `Confirm(s id, b approved)` | answers a pending confirmation (door `dbus`) |
//! | `ListPending() → s pending` | JSON list of [`utter_core::confirm::PendingConfirmation`] |
//! | `PushToTalk(b pressed) → s outcome` | push-to-talk press/release, source `dbus`; [`utter_core::ptt::Ptt::act`] JSON |
//! | `TogglePushToTalk() → s outcome` | push-to-talk toggle, source `dbus` |
//! | property `Listening` (`b`) | push-to-talk held |
//! | property `PushToTalkStatus` (`s`) | [`utter_core::ptt::PttState`] JSON, with each trigger's state |
//! | property `Version` (`s`, const) | the runner's version |
//! | property `State` (`s`) | `starting`, `ready`, `degraded` or `stopping` |
//! | property `Plugins` (`s`) | JSON array of [`utter_core::supervisor::PluginReport`] |
//! | signal `ConfirmationRequested(s id, s op, s summary, s args)` | `args`: the exact arguments as JSON |
//! | signal `ConfirmationResolved(s id, b approved, s by)` | |
//! | signal `PluginStateChanged(s id, u epoch, s status)` | |
//! | signal `CommandFinished(s utterance, s results)` | `results`: the per-step results as JSON |
//!
//! `State`, `Plugins`, `Listening` and `PushToTalkStatus` announce their changes with
//! `PropertiesChanged`. Method callers (and
//! property readers) are admitted only when the bus says they run as the runner's own uid
//! (`org.freedesktop.DBus.GetConnectionUnixUser` on the message's sender); errors carry the
//! names `dev.utter.Runner1.Error.*` ([`Error`]); a refused property read gets the standard
//! `org.freedesktop.DBus.Error.AccessDenied`. Signals are broadcast on the bus, like those of
//! any session service: on a session bus only the same user can listen.
//!
//! Start order: connect, serve the object, then request the name (so a call that activated the
//! service finds the object), with `DO_NOT_QUEUE` and without replacement: a second runner logs
//! an error and serves only its socket. Without a session bus the runner logs one warning and
//! serves only its socket.
//!
//! When a notification server is on the bus (`org.freedesktop.Notifications`, running or
//! activatable), confirmations are also asked by desktop notification ([`notify`]).

pub mod notify;
mod object;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;
use utter_protocol::{ErrorCode, ErrorObject};
use zbus::Connection;
use zbus::fdo::{self, RequestNameFlags, RequestNameReply};
use zbus::names::{BusName, UniqueName};
use zbus::zvariant::{OwnedValue, Value};

use object::{Gate, RunnerObject, follow_events};
use utter_core::pipeline::CommandOptions;
use utter_core::runner::Runner;

pub use utter_ipc::dbus::{BUS_NAME, INTERFACE, OBJECT_PATH};

/// How long the runner's own outgoing calls on the bus (to the bus daemon, to the notification
/// server) may take.
const OUTGOING_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The options `Command` accepts.
const COMMAND_OPTIONS: &[&str] = &["dry_run", "timeout_ms"];

/// Longest confirmation wait of a D-Bus `Command`, in ms (under the bus's 25 s reply timeout).
const DBUS_CONFIRM_WAIT_MS: u64 = 20_000;

/// Errors of the `dev.utter.Runner1` interface, each with its own D-Bus error name
/// `dev.utter.Runner1.Error.<Variant>`; the text says what went wrong and what to do.
#[derive(Debug, zbus::DBusError)]
#[zbus(prefix = "dev.utter.Runner1.Error")]
pub enum Error {
    /// A failure of the bus connection itself.
    #[zbus(error)]
    ZBus(zbus::Error),
    /// A bad argument: an empty utterance, an unknown option key, an option of the wrong type.
    InvalidArgs(String),
    /// `Reload`: the config file is invalid (`file:line: key: message`, one per line); the
    /// running config stays.
    ConfigInvalid(String),
    /// `Confirm`: no confirmation with that id is pending (answered, timed out, or unknown).
    NoSuchConfirmation(String),
    /// The caller does not run as the runner's uid (or the bus could not say who it is).
    AccessDenied(String),
    /// `Command`: no running plugin offers what is needed (e.g. no router).
    CapabilityMissing(String),
    /// `Command`: a plugin failed, crashed or is not running.
    PluginFailed(String),
    /// `Command`: a plugin call ran past its timeout.
    Timeout(String),
    /// `Command`: refused by policy.
    Denied(String),
    /// Any other failure.
    Failed(String),
}

impl Error {
    /// The D-Bus error for a JSON-RPC error of the runner (the message keeps the JSON-RPC code).
    fn from_rpc(e: &ErrorObject) -> Error {
        let text = format!("{} (JSON-RPC error {})", e.message, e.code);
        match ErrorCode::from_code(e.code) {
            ErrorCode::InvalidParams => Error::InvalidArgs(text),
            ErrorCode::CapabilityMissing => Error::CapabilityMissing(text),
            ErrorCode::PluginError => Error::PluginFailed(text),
            ErrorCode::Timeout => Error::Timeout(text),
            ErrorCode::Denied | ErrorCode::UntrustedArgument => Error::Denied(text),
            _ => Error::Failed(text),
        }
    }
}

/// Every JSON text the interface sends (replies, signal arguments), made safe to show
/// ([`utter_protocol::text::json_display_safe`]: the same value, with no raw control, bidi
/// or invisible character a window title or app id could carry into a script's terminal or
/// a settings window).
fn to_json<T: serde::Serialize>(value: &T) -> Result<String, Error> {
    serde_json::to_string(value)
        .map(|text| utter_protocol::text::json_display_safe(&text))
        .map_err(|e| Error::Failed(format!("cannot encode JSON: {e}")))
}

/// Read `Command`'s `a{sv}` options. Unknown keys are refused by name.
fn command_options(options: &HashMap<String, OwnedValue>) -> Result<CommandOptions, Error> {
    let mut unknown: Vec<&str> = options
        .keys()
        .map(String::as_str)
        .filter(|k| !COMMAND_OPTIONS.contains(k))
        .collect();
    if !unknown.is_empty() {
        unknown.sort_unstable();
        return Err(Error::InvalidArgs(format!(
            "unknown option{} {}; the options are dry_run (b) and timeout_ms (u, t, i or x)",
            if unknown.len() == 1 { "" } else { "s" },
            unknown
                .iter()
                .map(|k| format!("{k:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let mut parsed = CommandOptions::default();
    if let Some(value) = options.get("dry_run") {
        match &**value {
            Value::Bool(b) => parsed.dry_run = *b,
            other => {
                return Err(Error::InvalidArgs(format!(
                    "option dry_run must be a boolean (b), got type {}",
                    other.value_signature()
                )));
            }
        }
    }
    if let Some(value) = options.get("timeout_ms") {
        let ms: Option<u64> = match &**value {
            Value::U32(n) => Some(u64::from(*n)),
            Value::U64(n) => Some(*n),
            Value::I32(n) => u64::try_from(*n).ok(),
            Value::I64(n) => u64::try_from(*n).ok(),
            other => {
                return Err(Error::InvalidArgs(format!(
                    "option timeout_ms must be an integer (u, t, i or x), got type {}",
                    other.value_signature()
                )));
            }
        };
        match ms {
            Some(ms) => parsed.timeout_ms = Some(ms),
            None => {
                return Err(Error::InvalidArgs(
                    "option timeout_ms must not be negative".into(),
                ));
            }
        }
    }
    // The bus gives up on a reply after 25 s by default: end a confirmation wait before that.
    parsed.confirm_timeout_ms = Some(DBUS_CONFIRM_WAIT_MS);
    Ok(parsed)
}

/// The session bus address: `$DBUS_SESSION_BUS_ADDRESS`; else, when a session bus activated
/// this process, `$DBUS_STARTER_ADDRESS`; else `unix:path=$XDG_RUNTIME_DIR/bus` when that
/// socket exists.
///
/// # Errors
/// A sentence saying that there is no session bus and what was looked at.
pub fn session_address() -> Result<String, String> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let started_by_session_bus = var("DBUS_STARTER_BUS_TYPE").is_some_and(|t| t == "session");
    let given = var("DBUS_SESSION_BUS_ADDRESS")
        .map(|a| ("DBUS_SESSION_BUS_ADDRESS", a))
        .or_else(|| {
            var("DBUS_STARTER_ADDRESS")
                .filter(|_| started_by_session_bus)
                .map(|a| ("DBUS_STARTER_ADDRESS", a))
        });
    if let Some((name, address)) = given {
        return address
            .into_string()
            .map_err(|_| format!("{name} is not valid UTF-8, so there is no session bus to use"));
    }
    // The fallback every D-Bus library uses ($XDG_RUNTIME_DIR/bus), as zbus resolves it; only
    // taken when that socket is there, so a missing bus is said here, not at connect time.
    let fallback = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|v| !v.is_empty())
        .map(|dir| PathBuf::from(dir).join("bus"));
    if fallback.is_some_and(|socket| socket.exists()) {
        if let Ok(address) = zbus::Address::session() {
            return Ok(address.to_string());
        }
    }
    Err(
        "no session bus: DBUS_SESSION_BUS_ADDRESS is unset and $XDG_RUNTIME_DIR/bus does not exist"
            .to_owned(),
    )
}

/// The served D-Bus object: its connection and the tasks that follow the runner and the
/// notification server.
pub struct Bus {
    conn: Connection,
    runner: Arc<Runner>,
    tasks: Vec<JoinHandle<()>>,
}

impl Bus {
    /// The bus connection (e.g. to learn its unique name).
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// A receiver that is sent why once the connection to the bus is gone: the bus daemon
    /// exited (the session ended) or dropped us. A task of its own reads the connection's
    /// message stream without pause (a stream left unread would hold up every incoming
    /// message once 64 wait in it); the object server has its own copy of each message.
    pub fn watch_disconnect(&mut self) -> tokio::sync::oneshot::Receiver<String> {
        use futures::StreamExt;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let mut stream = zbus::MessageStream::from(&self.conn);
        self.tasks.push(tokio::spawn(async move {
            let why = loop {
                match stream.next().await {
                    Some(Ok(_)) => {}
                    Some(Err(e)) => break e.to_string(),
                    None => break "the connection ended".into(),
                }
            };
            let _ = tx.send(why);
        }));
        rx
    }

    /// Withdraw the notification door, release the name, remove the object and close the
    /// connection.
    pub async fn close(self) {
        for task in &self.tasks {
            task.abort();
        }
        self.runner.confirmations.set_notifier(None);
        if let Err(e) = self.conn.release_name(BUS_NAME).await {
            tracing::debug!(error = %e, "D-Bus: releasing the name failed");
        }
        let _ = self
            .conn
            .object_server()
            .remove::<RunnerObject, _>(OBJECT_PATH)
            .await;
        let _ = self.conn.close().await;
        tracing::info!("D-Bus: {BUS_NAME} released");
    }
}

/// Serve the object on the session bus, then request the name.
///
/// Returns `None`, after logging why, when there is no session bus (one warning: the runner
/// goes on with its socket only), when the connection fails, or when another process owns
/// `dev.utter.Runner1` (an error: it is not replaced).
pub async fn serve(runner: Arc<Runner>) -> Option<Bus> {
    match session_address() {
        Ok(address) => serve_on(runner, &address).await,
        Err(why) => {
            tracing::warn!(
                "D-Bus: {why}; the D-Bus object {BUS_NAME} is not served (the client socket still is)"
            );
            None
        }
    }
}

/// [`serve`] on the bus at `address` (a D-Bus address such as `unix:path=/run/user/1000/bus`).
pub async fn serve_on(runner: Arc<Runner>, address: &str) -> Option<Bus> {
    let conn = match connect(address).await {
        Ok(conn) => conn,
        Err(e) => {
            tracing::warn!(
                "D-Bus: cannot connect to the session bus at {address}: {e}; the D-Bus object {BUS_NAME} is not served (the client socket still is)"
            );
            return None;
        }
    };
    match start(conn, runner, address).await {
        Ok(bus) => Some(bus),
        Err(e) => {
            tracing::error!("D-Bus: {e}");
            None
        }
    }
}

async fn connect(address: &str) -> zbus::Result<Connection> {
    zbus::connection::Builder::address(address)?
        .method_timeout(OUTGOING_CALL_TIMEOUT)
        .build()
        .await
}

async fn start(conn: Connection, runner: Arc<Runner>, address: &str) -> Result<Bus, String> {
    let bus = fdo::DBusProxy::builder(&conn)
        .cache_properties(zbus::proxy::CacheProperties::No)
        .build()
        .await
        .map_err(|e| format!("cannot talk to the bus daemon at {address}: {e}"))?;
    let object = RunnerObject {
        runner: runner.clone(),
        gate: Gate {
            bus: bus.clone(),
            uid: nix::unistd::getuid().as_raw(),
            admitted: Mutex::new(HashSet::new()),
        },
    };
    // The object first: a call that activated us may already be waiting for the name.
    conn.object_server()
        .at(OBJECT_PATH, object)
        .await
        .map_err(|e| format!("cannot serve {OBJECT_PATH}: {e}"))?;
    let iface = conn
        .object_server()
        .interface::<_, RunnerObject>(OBJECT_PATH)
        .await
        .map_err(|e| format!("cannot find the served object {OBJECT_PATH}: {e}"))?;
    let mut tasks = vec![tokio::spawn(follow_events(iface, runner.subscribe()))];
    let reply = conn
        .request_name_with_flags(BUS_NAME, RequestNameFlags::DoNotQueue.into())
        .await;
    match reply {
        Ok(RequestNameReply::PrimaryOwner | RequestNameReply::AlreadyOwner) => {}
        Ok(RequestNameReply::Exists | RequestNameReply::InQueue) | Err(zbus::Error::NameTaken) => {
            for task in &tasks {
                task.abort();
            }
            return Err(format!(
                "the name {BUS_NAME} is already owned{}: another runner serves this session; this one serves only its client socket (stop the other runner first)",
                describe_owner(&bus).await
            ));
        }
        Err(e) => {
            for task in &tasks {
                task.abort();
            }
            return Err(format!("cannot request the name {BUS_NAME}: {e}"));
        }
    }
    tasks.push(tokio::spawn(notify::follow_server(
        conn.clone(),
        bus,
        runner.clone(),
    )));
    tracing::info!(
        name = BUS_NAME,
        path = OBJECT_PATH,
        unique = %conn.unique_name().map(|n| n.as_str()).unwrap_or("?"),
        "D-Bus: serving {INTERFACE} on the session bus"
    );
    Ok(Bus {
        conn,
        runner,
        tasks,
    })
}

/// " by :1.5 (pid 123)", as far as the bus can tell.
async fn describe_owner(bus: &fdo::DBusProxy<'_>) -> String {
    let Ok(name) = BusName::try_from(BUS_NAME) else {
        return String::new();
    };
    let Ok(owner) = bus.get_name_owner(name).await else {
        return String::new();
    };
    let owner: UniqueName<'_> = owner.into();
    match bus
        .get_connection_unix_process_id(BusName::Unique(owner.clone()))
        .await
    {
        Ok(pid) => format!(" by {owner} (pid {pid})"),
        Err(_) => format!(" by {owner}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(pairs: Vec<(&str, Value<'static>)>) -> HashMap<String, OwnedValue> {
        pairs
            .into_iter()
            .map(|(k, v)| (k.to_owned(), OwnedValue::try_from(v).expect("owned")))
            .collect()
    }

    #[test]
    fn command_options_accept_the_documented_types() {
        let o = command_options(&options(vec![("dry_run", Value::Bool(true))])).unwrap();
        assert!(o.dry_run);
        assert_eq!(o.timeout_ms, None);
        for v in [
            Value::U32(1500),
            Value::U64(1500),
            Value::I32(1500),
            Value::I64(1500),
        ] {
            let o = command_options(&options(vec![("timeout_ms", v)])).unwrap();
            assert_eq!(o.timeout_ms, Some(1500));
        }
        assert!(!command_options(&HashMap::new()).unwrap().dry_run);
    }

    #[test]
    fn unknown_or_mistyped_options_are_refused_by_name() {
        let e = command_options(&options(vec![
            ("zeta", Value::Bool(true)),
            ("alpha", Value::U32(1)),
            ("dry_run", Value::Bool(true)),
        ]))
        .unwrap_err();
        match e {
            Error::InvalidArgs(text) => {
                assert!(text.contains("\"alpha\", \"zeta\""), "{text}");
                assert!(!text.contains("\"dry_run\","), "{text}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            command_options(&options(vec![("dry_run", Value::U32(1))])),
            Err(Error::InvalidArgs(_))
        ));
        assert!(matches!(
            command_options(&options(vec![("timeout_ms", Value::I32(-5))])),
            Err(Error::InvalidArgs(_))
        ));
        assert!(matches!(
            command_options(&options(vec![("timeout_ms", Value::from("10"))])),
            Err(Error::InvalidArgs(_))
        ));
    }

    #[test]
    fn runner_errors_keep_their_kind() {
        let e = Error::from_rpc(&ErrorObject::new(ErrorCode::CapabilityMissing, "no router"));
        assert!(
            matches!(e, Error::CapabilityMissing(ref t) if t.contains("no router") && t.contains("-32005"))
        );
        assert!(matches!(
            Error::from_rpc(&ErrorObject::invalid_params("empty")),
            Error::InvalidArgs(_)
        ));
        use zbus::DBusError;
        assert_eq!(
            Error::NoSuchConfirmation("x".into()).name().as_str(),
            "dev.utter.Runner1.Error.NoSuchConfirmation"
        );
    }
}
