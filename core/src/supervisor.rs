//! The plugin supervisor: spawn, handshake, validate, watch, restart, drain (PROTOCOL.md §3–§7).
//!
//! Each configured plugin has a *slot*. A slot runs one *instance* at a time, identified by
//! (plugin id, epoch): epoch 0 at first spawn, +1 for every respawn. Requests to an instance
//! carry ids `"<epoch>:<n>"`, so a reply from an older epoch is recognised and dropped.
//!
//! Start-up spawns every plugin at once and runs the handshakes concurrently; capabilities are
//! validated afterwards against everything that came up, so a plugin may require a capability
//! of a plugin listed after it. Every transport (stdio, or a unix socket for `connect` and
//! `listen`, see [`crate::transport`]) comes down to one reader/writer pair under a
//! [`Connection`]. When an instance dies (process exit, closed stdout or socket, or a
//! stream that lost its frame boundary) the calls waiting on it fail at once with `-32000`,
//! and the slot respawns it after a delay that doubles from 200 ms up to 30 s; five crashes
//! within 60 s mark it `crash-loop`. Version mismatches (`-32004`), missing requirements
//! (`-32005`) and programs that do not exist are not retried: they need a config change.
//!
//! Stopping drains each instance: close its stdin or socket, wait `drain_timeout_ms`,
//! SIGTERM, wait `kill_timeout_ms`, SIGKILL; then remove its socket file.

use serde::Serialize;
use serde_json::{Value, json};
use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;
use tracing::{Instrument, debug, info, info_span, warn};
use utter_protocol::capability::{CapabilityRegistry, RUNNER_CAPABILITIES};
use utter_protocol::handshake::{DescribeResult, HealthStatus};
use utter_protocol::throttle::Throttle;
use utter_protocol::{
    CloseReason, Connection, ConnectionOptions, ErrorCode, ErrorObject, Incoming,
};

use crate::config::{Config, PluginEntry, Runtime, Transport};
use crate::policy::Provenance;
use crate::sandbox::Mechanism;
use utter_ipc::status::{DeclaredAxes, SandboxReport};

pub use utter_ipc::status::{PluginReport, PluginStatus, ReloadReport};

/// How many `host.*` callbacks of one plugin instance are served at once; more are refused
/// with `-32003`.
pub const MAX_HOST_CALLS_IN_FLIGHT: usize = 16;

/// The hard maximum of any per-request `timeout_ms`, in ms.
pub const HARD_MAX_TIMEOUT_MS: u64 = 60_000;

/// Crashes within [`CRASH_WINDOW`] that make a crash loop.
const CRASH_LOOP_COUNT: usize = 5;
/// The window for counting crashes; an instance that lived this long resets the backoff.
const CRASH_WINDOW: Duration = Duration::from_secs(60);

/// Environment variables passed from the runner to plugins; everything else is withheld
/// (a plugin gets its `[[plugin]] env` on top).
const PASSED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TERM",
    "TMPDIR",
    "SHELL",
    "BROWSER",
    "DBUS_SESSION_BUS_ADDRESS",
    "WAYLAND_DISPLAY",
    "DISPLAY",
    "NIRI_SOCKET",
    "HYPRLAND_INSTANCE_SIGNATURE",
    "SWAYSOCK",
    "I3SOCK",
    // An EIS server the input plugin may send to directly (libei's own variable).
    "LIBEI_SOCKET",
    // Where the session's PipeWire (the capture plugin's microphone) listens.
    "PIPEWIRE_RUNTIME_DIR",
    "PIPEWIRE_REMOTE",
    "RUST_LOG",
    "RUST_BACKTRACE",
];
const PASSED_ENV_PREFIXES: &[&str] = &["LC_", "XDG_", "UTTER_", "XKB_DEFAULT_"];

/// A change of a plugin's status, broadcast to subscribers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PluginEvent {
    /// Plugin id.
    pub id: String,
    /// Epoch of the instance concerned.
    pub epoch: u64,
    /// New status.
    pub status: PluginStatus,
}

/// Timings and limits of the supervisor.
#[derive(Debug, Clone)]
pub struct SupervisorOptions {
    /// Default call timeout and the timeout of each handshake step.
    pub rpc_timeout: Duration,
    /// Wait after closing stdin before SIGTERM.
    pub drain_timeout: Duration,
    /// Wait after SIGTERM before SIGKILL.
    pub kill_timeout: Duration,
    /// Frame body limit, bytes.
    pub max_frame_bytes: usize,
    /// Where bare program names are looked up first (default: beside the running executable).
    pub bin_dir: Option<PathBuf>,
    /// The directory of `connect`/`listen` plugin sockets (default
    /// `$XDG_RUNTIME_DIR/utter/plugins`).
    pub socket_dir: PathBuf,
    /// The first respawn delay after a crash; doubled per crash in a row.
    pub restart_delay: Duration,
    /// The longest respawn delay, and the delay of a crash-looping plugin.
    pub restart_delay_max: Duration,
    /// How plugins are confined: [`Mechanism::Off`] unless `[security] enforce`, probed by
    /// [`Supervisor::start`] and [`Supervisor::reload`] when it is on.
    pub sandbox: Mechanism,
    /// The plugins are the built-in default's ([`Config::plugins_inherited`]): one whose
    /// program is not installed is logged at `info`, not as a warning (it shows in
    /// `utter status` and `utter doctor` as not installed).
    pub default_plugins: bool,
    /// How often every running plugin's `plugin.health` is asked again, off the request
    /// path ([`Supervisor::plugins`] and `runner.status` answer from what was last heard).
    /// A failed call asks at once.
    pub health_interval: Duration,
}

impl SupervisorOptions {
    /// Options from `[runner]`.
    pub fn from_config(config: &Config) -> SupervisorOptions {
        let r = &config.runner;
        SupervisorOptions {
            rpc_timeout: Duration::from_millis(r.rpc_timeout_ms),
            drain_timeout: Duration::from_millis(r.drain_timeout_ms),
            kill_timeout: Duration::from_millis(r.kill_timeout_ms),
            max_frame_bytes: usize::try_from(r.max_frame_bytes).unwrap_or(usize::MAX),
            bin_dir: None,
            socket_dir: crate::transport::default_dir(),
            restart_delay: Duration::from_millis(r.restart_delay_ms),
            restart_delay_max: Duration::from_millis(
                r.restart_delay_max_ms.max(r.restart_delay_ms),
            ),
            sandbox: if config.security.enforce {
                Mechanism::Unavailable("not probed yet".into())
            } else {
                Mechanism::Off
            },
            default_plugins: config.plugins_inherited,
            health_interval: HEALTH_INTERVAL,
        }
    }
}

/// One running instance.
struct Instance {
    epoch: u64,
    conn: Connection,
    pid: Option<u32>,
    describe: DescribeResult,
    /// Ops from `action.capabilities`, fetched on first need, per instance (a respawn may
    /// change them); their argument schemas are compiled once, here.
    action_ops: tokio::sync::OnceCell<Arc<Vec<OpSpec>>>,
    /// The runner→plugin requests in flight (one entry per request).
    in_flight: InFlightList,
}

/// The runner→plugin requests of one instance in flight: a number for each, its provenance,
/// and for the step of a command (`action.invoke`) the step and who asks the person about it.
type InFlightList = Arc<Mutex<Vec<(u64, Provenance, Option<Serving>)>>>;

/// The step of a command an `action.invoke` carries: its summary, and the command's
/// confirmer (its requesting client's door, then the passive ones).
#[derive(Clone)]
pub struct Serving {
    /// The policy's summary of the step.
    pub step: String,
    /// Who asks the person for the command the step belongs to.
    pub confirmer: Option<crate::confirm::Confirmer>,
}

impl std::fmt::Debug for Serving {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Serving")
            .field("step", &self.step)
            .field("confirmer", &self.confirmer.is_some())
            .finish()
    }
}

/// Whose request a plugin's `host.*` callback serves, as far as the runner can tell.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Caller {
    /// The least trusted provenance of the runner→plugin requests the plugin is serving right
    /// now (`screen` when none is in flight).
    pub provenance: Provenance,
    /// The one step (`action.invoke` of a command) the plugin is serving, as the policy
    /// summarises it (`click_element {"description":"the purple gizmo"}`), with the
    /// command's confirmer, when exactly one is in flight.
    pub serving: Option<Serving>,
}

impl Caller {
    /// A caller of `provenance` serving nothing the runner knows of.
    pub fn new(provenance: Provenance) -> Caller {
        Caller {
            provenance,
            serving: None,
        }
    }
}

/// One op as an action plugin advertises it in `action.capabilities`
/// (`{op, side_effect, needs_confirm, args_schema}`).
#[derive(Clone)]
pub struct OpSpec {
    /// The op name, without an `action.` prefix.
    pub op: String,
    /// Whether it changes anything (default `true`).
    pub side_effect: bool,
    /// The plugin asks for a confirmation (it can add one, never remove one).
    pub needs_confirm: bool,
    /// The compiled `args_schema`; `Err` holds why the plugin's schema did not compile.
    pub schema: Option<Result<Arc<jsonschema::Validator>, String>>,
    /// How the op is undone (`undo`, [`crate::undo`]); `None` when the plugin declares
    /// nothing (or something malformed, which is logged).
    pub undo: Option<Vec<crate::undo::UndoRule>>,
}

impl std::fmt::Debug for OpSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpSpec")
            .field("op", &self.op)
            .field("side_effect", &self.side_effect)
            .field("needs_confirm", &self.needs_confirm)
            .field("has_schema", &self.schema.is_some())
            .field("undo_rules", &self.undo.as_ref().map(Vec::len))
            .finish()
    }
}

impl OpSpec {
    /// Check `args` against the op's schema: `-32602` naming the first failing field, or
    /// `-32000` when the plugin's schema itself is broken. No schema: everything passes.
    ///
    /// # Errors
    /// As above.
    pub fn validate(&self, args: &Value) -> Result<(), ErrorObject> {
        match &self.schema {
            None => Ok(()),
            Some(Err(e)) => Err(ErrorObject::plugin(format!(
                "op {:?}: the plugin's args_schema does not compile ({e}), so no arguments can be checked",
                self.op
            ))),
            Some(Ok(validator)) => {
                let Some(error) = validator.iter_errors(args).next() else {
                    return Ok(());
                };
                let path = error.instance_path().to_string();
                let field = match error.kind() {
                    jsonschema::error::ValidationErrorKind::Required { property } => {
                        let name = property
                            .as_str()
                            .map(str::to_owned)
                            .unwrap_or_else(|| property.to_string());
                        if path.is_empty() {
                            name
                        } else {
                            format!("{}/{name}", path.trim_start_matches('/'))
                        }
                    }
                    jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected }
                        if !unexpected.is_empty() =>
                    {
                        let name = unexpected.join(", ");
                        if path.is_empty() {
                            name
                        } else {
                            format!("{}/{name}", path.trim_start_matches('/'))
                        }
                    }
                    _ => path.trim_start_matches('/').to_owned(),
                };
                let field = if field.is_empty() {
                    "args".to_owned()
                } else {
                    field
                };
                Err(ErrorObject::invalid_params(format!(
                    "op {:?}: argument {field:?} does not match the op's schema: {error}",
                    self.op
                ))
                .with_data(json!({"op": self.op, "field": field})))
            }
        }
    }
}

/// Read an `action.capabilities` result into op specs; malformed entries are skipped.
fn read_op_specs(result: &Value) -> Vec<OpSpec> {
    let Some(ops) = result.get("ops").and_then(Value::as_array) else {
        return Vec::new();
    };
    ops.iter()
        .filter_map(|o| {
            // The older form: a bare op name.
            if let Some(name) = o.as_str() {
                return Some(OpSpec {
                    op: crate::policy::normalise_op(name).to_owned(),
                    side_effect: true,
                    needs_confirm: false,
                    schema: None,
                    undo: None,
                });
            }
            let op = o.get("op").and_then(Value::as_str)?;
            let schema = o.get("args_schema").filter(|v| !v.is_null()).map(|schema| {
                jsonschema::validator_for(schema)
                    .map(Arc::new)
                    .map_err(|e| e.to_string())
            });
            let undo = o.get("undo").and_then(|u| match crate::undo::read_rules(u) {
                Ok(rules) => Some(rules),
                Err(e) => {
                    warn!(op, error = %e, "the op's undo declaration is malformed; it cannot be undone");
                    None
                }
            });
            Some(OpSpec {
                op: crate::policy::normalise_op(op).to_owned(),
                side_effect: o
                    .get("side_effect")
                    .and_then(Value::as_bool)
                    .unwrap_or(true),
                needs_confirm: o
                    .get("needs_confirm")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                schema,
                undo,
            })
        })
        .collect()
}

/// Answers plugin→runner requests (`host.*`, PROTOCOL.md §9). Set with
/// [`Supervisor::set_host`] once the runner exists.
pub trait HostHandler: Send + Sync {
    /// Serve `method` for plugin `plugin` (instance `epoch`) on behalf of `caller`: what the
    /// plugin is serving right now, and with what trust.
    fn handle(
        &self,
        plugin: String,
        epoch: u64,
        method: String,
        params: Value,
        caller: Caller,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Value, ErrorObject>> + Send>>;

    /// A notification from plugin `plugin` (instance `epoch`), e.g. a stream frame. Called on
    /// the plugin's read path: it must not wait (enqueue or drop only). Default: ignored.
    fn notify(&self, plugin: &str, epoch: u64, method: &str, params: Value) {
        let _ = (plugin, epoch, method, params);
    }

    /// A plugin's `fd.pass {kind, meta}` (PROTOCOL.md §10.2): the result and the descriptor
    /// its response frame carries. Only called for plugins on a socket transport. Default:
    /// `-32601`.
    fn fd_pass(
        &self,
        plugin: &str,
        params: &Value,
    ) -> Result<(Value, std::os::fd::OwnedFd), ErrorObject> {
        let _ = (plugin, params);
        Err(ErrorObject::method_not_found("fd.pass"))
    }
}

type HostSlot = Arc<std::sync::RwLock<Option<Arc<dyn HostHandler>>>>;

/// Removes one in-flight entry when the call ends (or is dropped).
struct InFlight {
    list: InFlightList,
    number: u64,
}

impl InFlight {
    /// Record a call of `provenance` (serving `step`, for `action.invoke`).
    fn start(list: &InFlightList, provenance: Provenance, step: Option<Serving>) -> InFlight {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let number = NEXT.fetch_add(1, Ordering::Relaxed);
        list.lock()
            .expect("in-flight lock")
            .push((number, provenance, step));
        InFlight {
            list: list.clone(),
            number,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut list = self.list.lock().expect("in-flight lock");
        if let Some(i) = list.iter().position(|(n, ..)| *n == self.number) {
            list.swap_remove(i);
        }
    }
}

/// Who a host callback serves: the least trusted provenance in flight (`screen` when nothing
/// is), and the step when exactly one `action.invoke` is in flight.
fn caller_in_flight(list: &InFlightList) -> Caller {
    let list = list.lock().expect("in-flight lock");
    if list.is_empty() {
        return Caller::new(Provenance::Screen);
    }
    let provenance = list
        .iter()
        .fold(Provenance::User, |acc, (_, p, _)| acc.least_trusted(*p));
    let mut steps = list.iter().filter_map(|(_, _, s)| s.as_ref());
    let serving = match (steps.next(), steps.next()) {
        (Some(one), None) => Some(one.clone()),
        _ => None,
    };
    Caller {
        provenance,
        serving,
    }
}

/// The child process of an instance, owned by the slot's watch task.
struct Process {
    child: Child,
    /// The child's pid, which is also its process group's id. Kept apart from `child`:
    /// once the child was reaped, `Child::id` no longer knows it, and the group may still
    /// hold what the plugin started.
    group: Option<u32>,
    conn: Connection,
    /// The task logging its stderr (ends at end of file).
    stderr: Option<JoinHandle<()>>,
    /// The socket file of a `connect`/`listen` plugin, removed once the process is stopped.
    socket: Option<PathBuf>,
}

#[derive(Default)]
struct SlotState {
    status: Option<PluginStatus>,
    epoch: u64,
    instance: Option<Arc<Instance>>,
    provides: BTreeSet<String>,
    requires: BTreeSet<String>,
    permissions: BTreeSet<String>,
    health: String,
    restarts: u64,
    last_error: Option<String>,
    warnings: Vec<String>,
    /// What confines the current (or last) instance, as it was started.
    sandbox: Option<SandboxReport>,
    /// What the last successful handshake declared.
    declared: Option<DeclaredAxes>,
    /// Sockets its sandbox would pass in but that did not exist when the current instance
    /// started ([`crate::sandbox::Plan::awaited`]): when one appears, the instance is started
    /// again so that it gets it.
    awaited: Vec<PathBuf>,
}

struct Slot {
    entry: PluginEntry,
    state: Mutex<SlotState>,
    /// Set to `true` to stop the slot's watch task (it drains the instance first).
    stop: watch::Sender<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
    /// The last lines its instances wrote to stderr, each with the instance's epoch, for
    /// error reports.
    stderr_tail: StderrTail,
}

/// The last lines a slot's instances wrote to stderr, tagged with their epoch: the reader of
/// an instance that ended may still be draining while the next one starts.
type StderrTail = Arc<Mutex<VecDeque<(u64, String)>>>;

impl Slot {
    /// `"; its last stderr lines: …"` of instance `epoch` alone, or nothing.
    fn stderr_summary(&self, epoch: u64) -> String {
        let tail = self.stderr_tail.lock().expect("stderr tail lock");
        let lines: Vec<&str> = tail
            .iter()
            .filter(|(e, _)| *e == epoch)
            .map(|(_, line)| line.as_str())
            .collect();
        let lines = &lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..];
        if lines.is_empty() {
            return String::new();
        }
        format!("; its last stderr lines: {}", lines.join(" | "))
    }
}

/// Stop one slot and wait until its instance has been drained.
async fn stop_slot(slot: &Slot) {
    slot.stop.send_replace(true);
    let task = slot.task.lock().expect("slot task lock").take();
    if let Some(task) = task {
        let _ = task.await;
    }
}

/// Why the supervisor cannot route a call to a plugin. Becomes an [`ErrorObject`] where it
/// leaves the core (`-32005` for an id that is not configured, `-32000` for a plugin that is
/// not running).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SupervisorError {
    /// No `[[plugin]]` has this id.
    #[error("no plugin with id {0:?} is configured")]
    NotConfigured(String),
    /// Configured, but not running now (starting, failed, crash-looping, stopped).
    #[error(
        "plugin {id:?} is not running (status {}{})",
        status.as_str(),
        last_error.as_ref().map(|e| format!("; last error: {e}")).unwrap_or_default()
    )]
    NotRunning {
        /// The plugin id.
        id: String,
        /// Its status.
        status: PluginStatus,
        /// Its last failure, if any.
        last_error: Option<String>,
    },
}

impl From<SupervisorError> for ErrorObject {
    fn from(e: SupervisorError) -> ErrorObject {
        match e {
            SupervisorError::NotConfigured(_) => {
                ErrorObject::new(ErrorCode::CapabilityMissing, e.to_string())
            }
            SupervisorError::NotRunning { .. } => ErrorObject::plugin(e.to_string()),
        }
    }
}

/// Why an instance could not start.
struct StartFailure {
    error: ErrorObject,
    /// Retrying cannot help (version mismatch, missing program, missing requirement).
    permanent: bool,
    /// The program is not installed (not found beside the utter binary nor on `PATH`).
    not_installed: bool,
}

impl StartFailure {
    /// A failure of a program that is there (`not_installed` false).
    fn new(error: ErrorObject, permanent: bool) -> StartFailure {
        StartFailure {
            error,
            permanent,
            not_installed: false,
        }
    }
}

/// The default [`SupervisorOptions::health_interval`]: a broken compositor config or a
/// compositor that went away shows in status within this long, for the price of one small
/// request per plugin.
pub const HEALTH_INTERVAL: Duration = Duration::from_secs(5);

/// How long each plugin may take to answer a health check made off the request path.
const HEALTH_TIMEOUT: Duration = Duration::from_millis(500);

/// The least time between two health checks, however many calls fail.
const HEALTH_WAKE_GAP: Duration = Duration::from_millis(250);

struct Shared {
    /// Wakes the health task ([`health_task`]) before its next tick: a call failed.
    health_wake: tokio::sync::Notify,
    slots: Mutex<Vec<Arc<Slot>>>,
    options: Mutex<SupervisorOptions>,
    registry: CapabilityRegistry,
    events: broadcast::Sender<PluginEvent>,
    host: HostSlot,
}

/// The supervisor of all configured plugins.
pub struct Supervisor {
    shared: Arc<Shared>,
    /// Asks the plugins' health every [`SupervisorOptions::health_interval`]; aborted on
    /// shutdown and drop.
    health: JoinHandle<()>,
}

/// The running plugin that produces a stream ([`Supervisor::find_stream`]).
#[derive(Debug, Clone)]
pub struct StreamSource {
    /// Its id.
    pub plugin: String,
    /// Its instance's epoch.
    pub epoch: u64,
    /// Its connection.
    pub conn: Connection,
    /// Whether it keeps a reliable stream's credit itself (`plugin.describe`
    /// `stream_credit`).
    pub credit: bool,
}

impl Supervisor {
    /// Spawn every active plugin of `config`, run the handshakes concurrently, validate
    /// capabilities, and start watching. Returns when every plugin is either running or has
    /// failed; failures are reported in [`Supervisor::plugins`], never as an error here.
    pub async fn start(config: &Config, mut options: SupervisorOptions) -> Supervisor {
        // What the plugins of a runner that was killed left running goes first.
        crate::groups::sweep();
        if config.security.enforce {
            options.sandbox = Mechanism::detect(true, &config.security.sandbox).await;
            if let Mechanism::Unavailable(why) = &options.sandbox {
                warn!("[security] enforce is on but plugins cannot be sandboxed: {why}");
            }
        }
        let (events, _) = broadcast::channel(256);
        let shared = Arc::new(Shared {
            health_wake: tokio::sync::Notify::new(),
            slots: Mutex::new(Vec::new()),
            options: Mutex::new(options),
            registry: CapabilityRegistry::builtin(),
            events,
            host: HostSlot::default(),
        });
        let health = tokio::spawn(health_task(shared.clone()));
        let supervisor = Supervisor { shared, health };
        let entries: Vec<PluginEntry> = config.active_plugins().cloned().collect();
        let slots = supervisor
            .start_slots(entries.into_iter().map(|e| (e, 0)).collect())
            .await;
        *supervisor.shared.slots.lock().expect("slot list lock") = slots;
        supervisor
    }

    /// Start slots for `entries` with their first epochs (concurrently), validate their
    /// requirements against the runner, the plugins already running, and each other, and
    /// start their watch tasks.
    async fn start_slots(&self, entries: Vec<(PluginEntry, u64)>) -> Vec<Arc<Slot>> {
        let shared = &self.shared;
        let slots: Vec<Arc<Slot>> = entries
            .into_iter()
            .map(|(entry, epoch)| {
                let (stop, _) = watch::channel(false);
                Arc::new(Slot {
                    entry,
                    state: Mutex::new(SlotState {
                        status: Some(PluginStatus::Starting),
                        epoch,
                        ..Default::default()
                    }),
                    stop,
                    task: Mutex::new(None),
                    stderr_tail: Arc::default(),
                })
            })
            .collect();
        let starts = slots.iter().map(|slot| {
            let shared = shared.clone();
            let slot = slot.clone();
            async move {
                let epoch = slot.state.lock().expect("slot lock").epoch;
                shared.spawn_instance(&slot, epoch).await
            }
        });
        let mut outcomes: Vec<Option<Result<(Instance, Process), StartFailure>>> =
            futures::future::join_all(starts)
                .await
                .into_iter()
                .map(Some)
                .collect();

        // Validate requirements against everything that came up, to a fixpoint: dropping a
        // plugin may take away a capability another one needs.
        let already = shared.available();
        loop {
            let mut available = already.clone();
            for (slot, outcome) in slots.iter().zip(&outcomes) {
                if let Some(Ok(_)) = outcome {
                    available.extend(
                        slot.state
                            .lock()
                            .expect("slot lock")
                            .provides
                            .iter()
                            .cloned(),
                    );
                }
            }
            let mut changed = false;
            for (slot, outcome) in slots.iter().zip(outcomes.iter_mut()) {
                if !matches!(outcome, Some(Ok(_))) {
                    continue;
                }
                if let Err(error) = shared.check_requires(slot, &available) {
                    if let Some(Ok((_, process))) = outcome.take() {
                        tokio::spawn(drain(process, shared.options()));
                    }
                    *outcome = Some(Err(StartFailure::new(error, true)));
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }

        for (slot, outcome) in slots.iter().zip(outcomes) {
            let first = match outcome.expect("every outcome is set") {
                Ok((instance, process)) => {
                    shared.install(slot, instance);
                    Ok(process)
                }
                Err(failure) => {
                    let epoch = slot.state.lock().expect("slot lock").epoch;
                    shared.fail(slot, epoch, &failure);
                    Err(failure)
                }
            };
            let task = tokio::spawn(
                watch_slot(shared.clone(), slot.clone(), first)
                    .instrument(info_span!("plugin", plugin = %slot.entry.id)),
            );
            *slot.task.lock().expect("slot task lock") = Some(task);
        }
        slots
    }

    /// Apply a new config: stop plugins that are gone, start new ones, restart those whose
    /// `[[plugin]]` entry changed, and leave the others running with the same epoch. Runner
    /// timings (`[runner]`) apply to calls and drains from now on.
    pub async fn reload(&self, config: &Config, mut options: SupervisorOptions) -> ReloadReport {
        if config.security.enforce {
            options.sandbox = Mechanism::detect(true, &config.security.sandbox).await;
        }
        // Another sandbox restarts every plugin, so that each runs in what it reports.
        let sandbox_changed = self.shared.options().sandbox != options.sandbox;
        *self.shared.options.lock().expect("options lock") = options;
        let wanted: Vec<PluginEntry> = config.active_plugins().cloned().collect();
        let current = self.shared.slot_list();
        let mut report = ReloadReport::default();
        let mut keep = Vec::new();
        let mut to_stop = Vec::new();
        for slot in current {
            // A plugin that failed for good (its program was missing, its version refused)
            // is tried again on reload even when its entry did not change: what it needed
            // may be there now (`cargo install` of the plugin, then `utter reload`).
            let failed_for_good =
                slot.state.lock().expect("slot lock").status == Some(PluginStatus::Error);
            match wanted.iter().find(|e| e.id == slot.entry.id) {
                Some(entry) if *entry == slot.entry && !failed_for_good && !sandbox_changed => {
                    report.unchanged.push(slot.entry.id.clone());
                    keep.push(slot);
                }
                Some(_) => {
                    report.restarted.push(slot.entry.id.clone());
                    to_stop.push(slot);
                }
                None => {
                    report.removed.push(slot.entry.id.clone());
                    to_stop.push(slot);
                }
            }
        }
        for slot in &to_stop {
            stop_slot(slot).await;
        }
        *self.shared.slots.lock().expect("slot list lock") = keep;
        // A restarted plugin continues its epoch count; a new one starts at 0.
        let fresh: Vec<(PluginEntry, u64)> = wanted
            .iter()
            .filter(|e| !report.unchanged.contains(&e.id))
            .map(|e| {
                let next = to_stop
                    .iter()
                    .find(|s| s.entry.id == e.id)
                    .map_or(0, |s| s.state.lock().expect("slot lock").epoch + 1);
                (e.clone(), next)
            })
            .collect();
        report.added = fresh
            .iter()
            .filter(|(e, _)| !report.restarted.contains(&e.id))
            .map(|(e, _)| e.id.clone())
            .collect();
        let started = self.start_slots(fresh).await;
        // Keep config order.
        let mut slots = self.shared.slot_list();
        slots.extend(started);
        slots.sort_by_key(|s| wanted.iter().position(|e| e.id == s.entry.id));
        *self.shared.slots.lock().expect("slot list lock") = slots;
        report
    }

    /// Every slot, in config order.
    pub fn plugins(&self) -> Vec<PluginReport> {
        self.shared.slot_list().iter().map(|s| s.report()).collect()
    }

    /// Subscribe to status changes.
    pub fn events(&self) -> broadcast::Receiver<PluginEvent> {
        self.shared.events.subscribe()
    }

    /// The default call timeout.
    pub fn rpc_timeout(&self) -> Duration {
        self.shared.options().rpc_timeout
    }

    /// Clamp a client-supplied `timeout_ms` to the hard maximum; `None` or 0 means the
    /// default `rpc_timeout_ms`.
    pub fn effective_timeout(&self, timeout_ms: Option<u64>) -> Duration {
        match timeout_ms {
            Some(ms) if ms > 0 => Duration::from_millis(ms.min(HARD_MAX_TIMEOUT_MS)),
            _ => self.shared.options().rpc_timeout,
        }
    }

    /// Call `method` on plugin `id`.
    ///
    /// # Errors
    /// `-32005` for an unknown plugin id; `-32000` when it is not running or dies during the
    /// call; `-32001` on timeout (the plugin is sent `$/cancel`); or the plugin's own error.
    pub async fn call(
        &self,
        id: &str,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, ErrorObject> {
        self.call_as(id, method, params, timeout, Provenance::User)
            .await
    }

    /// Call `method` on plugin `id` on behalf of a request of `provenance`: while the call is
    /// in flight, the plugin's `host.*` callbacks run with (at most) that trust.
    ///
    /// # Errors
    /// As [`Supervisor::call`].
    pub async fn call_as(
        &self,
        id: &str,
        method: &str,
        params: Value,
        timeout: Duration,
        provenance: Provenance,
    ) -> Result<Value, ErrorObject> {
        self.call_serving(id, method, params, timeout, provenance, None)
            .await
    }

    /// [`Supervisor::call_as`] of a command's step: for `action.invoke`, the plugin's
    /// `host.*` callbacks while it runs are told the step and `confirmer` (the command's
    /// way of asking the person), so a question the runner asks for the plugin goes to the
    /// person who gave the command ([`Caller::serving`]).
    ///
    /// # Errors
    /// As [`Supervisor::call`].
    pub async fn call_serving(
        &self,
        id: &str,
        method: &str,
        params: Value,
        timeout: Duration,
        provenance: Provenance,
        confirmer: Option<crate::confirm::Confirmer>,
    ) -> Result<Value, ErrorObject> {
        let instance = self.instance(id)?;
        let step = (method == "action.invoke").then(|| {
            let op = params.get("op").and_then(Value::as_str).unwrap_or("?");
            let args = params.get("args").cloned().unwrap_or(Value::Null);
            Serving {
                step: crate::policy::summary(op, &args),
                confirmer,
            }
        });
        let _guard = InFlight::start(&instance.in_flight, provenance, step);
        // One span per request: `plugin`, `epoch`, `method`, so a command can be followed
        // from the socket through every plugin it reached.
        let span = tracing::debug_span!(
            "call",
            plugin = id,
            epoch = instance.epoch,
            method,
            provenance = provenance.as_str()
        );
        let started = std::time::Instant::now();
        let result = instance
            .conn
            .request(method, params, Some(timeout))
            .instrument(span.clone())
            .await;
        // A plugin that died or stopped answering: ask every plugin's health now rather
        // than at the next tick, so status says so soon.
        if let Err(e) = &result
            && [ErrorCode::PluginError, ErrorCode::Timeout]
                .iter()
                .any(|c| c.code() == e.code)
        {
            self.shared.health_wake.notify_one();
        }
        span.in_scope(|| match &result {
            Ok(_) => debug!(
                elapsed_ms = started.elapsed().as_secs_f64() * 1000.0,
                "answered"
            ),
            Err(e) => debug!(code = e.code, error = %e.message, "failed"),
        });
        result
    }

    /// Install the handler of plugin→runner `host.*` requests.
    pub fn set_host(&self, host: Arc<dyn HostHandler>) {
        *self.shared.host.write().expect("host lock") = Some(host);
    }

    /// The first running plugin whose `plugin.describe` lists `method` in `streams`: its id,
    /// epoch, connection and whether it keeps credit itself (PROTOCOL.md §10.3).
    pub fn find_stream(&self, method: &str) -> Option<StreamSource> {
        self.running()
            .into_iter()
            .find(|(_, inst)| inst.describe.streams.iter().any(|m| m == method))
            .map(|(slot, inst)| StreamSource {
                plugin: slot.entry.id.clone(),
                epoch: inst.epoch,
                conn: inst.conn.clone(),
                credit: inst.describe.stream_credit,
            })
    }

    /// The plugins the desktop context is read from, in the order they are asked: every
    /// running plugin that declares the capability `context.live` (config order), then those
    /// that only list `context.snapshot` in their `plugin.describe` (the a11y plugin's
    /// focused application, for desktops without compositor IPC). The context is what a
    /// plugin-written point is checked against, so a plugin that merely serves the method
    /// never comes before one that declares the capability (the compositor plugin).
    pub fn find_context_sources(&self) -> Vec<String> {
        let running = self.running();
        let provides = |slot: &Slot| {
            has_capability(
                &slot.state.lock().expect("slot lock").provides,
                "context.live",
            )
        };
        let lists = |inst: &Instance| {
            inst.describe
                .methods
                .iter()
                .any(|m| m == "context.snapshot")
        };
        let first = running.iter().filter(|(slot, _)| provides(slot));
        let then = running
            .iter()
            .filter(|(slot, inst)| !provides(slot) && lists(inst));
        first
            .chain(then)
            .map(|(slot, _)| slot.entry.id.clone())
            .collect()
    }

    /// The first running plugin that provides capability `name` (any version) or lists
    /// `method` in its `plugin.describe`.
    pub fn find_provider(&self, name: &str, method: &str) -> Option<String> {
        self.running()
            .iter()
            .find(|(slot, inst)| {
                has_capability(&slot.state.lock().expect("slot lock").provides, name)
                    || inst.describe.methods.iter().any(|m| m == method)
            })
            .map(|(slot, _)| slot.entry.id.clone())
    }

    /// The ops plugin `id` advertises (`action.capabilities`, cached per instance); empty
    /// when it is not running or serves no capabilities.
    pub async fn action_ops(&self, id: &str) -> Arc<Vec<OpSpec>> {
        match self.instance(id) {
            Ok(instance) => self.ops_of(id, &instance).await,
            Err(_) => Arc::default(),
        }
    }

    async fn ops_of(&self, id: &str, instance: &Instance) -> Arc<Vec<OpSpec>> {
        if !instance
            .describe
            .methods
            .iter()
            .any(|m| m == "action.invoke" || m == "action.capabilities")
        {
            return Arc::default();
        }
        instance
            .action_ops
            .get_or_init(|| async {
                match instance
                    .conn
                    .request(
                        "action.capabilities",
                        json!({}),
                        Some(self.shared.options().rpc_timeout),
                    )
                    .await
                {
                    Ok(result) => Arc::new(read_op_specs(&result)),
                    Err(e) => {
                        warn!(plugin = %id, error = %e, "action.capabilities failed");
                        Arc::default()
                    }
                }
            })
            .await
            .clone()
    }

    /// The plugin that executes `op` and what it says about the op (when it advertises it).
    pub async fn find_action_spec(&self, op: &str) -> Option<(String, Option<OpSpec>)> {
        let id = self.find_action(op).await?;
        let spec = self
            .action_ops(&id)
            .await
            .iter()
            .find(|s| s.op == op)
            .cloned();
        Some((id, spec))
    }

    /// Whether plugin `id` listed `method` as side-effect-free in its `plugin.describe`
    /// (`side_effect_free`). `None` when no plugin has that id; `Some(false)` when it is not
    /// running (nothing is known, so the method counts as acting).
    pub fn is_side_effect_free(&self, id: &str, method: &str) -> Option<bool> {
        let slot = self.slot(id).ok()?;
        let state = slot.state.lock().expect("slot lock");
        Some(
            state
                .instance
                .as_ref()
                .is_some_and(|i| i.describe.side_effect_free.iter().any(|m| m == method)),
        )
    }

    fn slot(&self, id: &str) -> Result<Arc<Slot>, SupervisorError> {
        self.shared
            .slot_list()
            .into_iter()
            .find(|s| s.entry.id == id)
            .ok_or_else(|| SupervisorError::NotConfigured(id.to_owned()))
    }

    fn instance(&self, id: &str) -> Result<Arc<Instance>, SupervisorError> {
        let slot = self.slot(id)?;
        let state = slot.state.lock().expect("slot lock");
        match (&state.instance, state.status) {
            (Some(instance), Some(status)) if status.is_running() => Ok(instance.clone()),
            (_, status) => Err(SupervisorError::NotRunning {
                id: id.to_owned(),
                status: status.unwrap_or(PluginStatus::Starting),
                last_error: state.last_error.clone(),
            }),
        }
    }

    /// The first running plugin serving `router.plan` (by capability or method), else the
    /// first running plugin of kind `router`.
    pub fn find_router(&self) -> Option<String> {
        let running = self.running();
        running
            .iter()
            .find(|(slot, inst)| {
                has_capability(
                    &slot.state.lock().expect("slot lock").provides,
                    "router.plan",
                ) || inst.describe.methods.iter().any(|m| m == "router.plan")
            })
            .or_else(|| running.iter().find(|(slot, _)| slot.entry.kind == "router"))
            .map(|(slot, _)| slot.entry.id.clone())
    }

    /// The plugin that executes `op`: the first running one providing `action.<op>@N`, else
    /// the first one whose `action.capabilities` lists `op`.
    pub async fn find_action(&self, op: &str) -> Option<String> {
        let running = self.running();
        let cap = format!("action.{op}");
        if let Some((slot, _)) = running
            .iter()
            .find(|(slot, _)| has_capability(&slot.state.lock().expect("slot lock").provides, &cap))
        {
            return Some(slot.entry.id.clone());
        }
        for (slot, instance) in &running {
            let ops = self.ops_of(&slot.entry.id, instance).await;
            if ops.iter().any(|o| o.op == op) {
                return Some(slot.entry.id.clone());
            }
        }
        None
    }

    fn running(&self) -> Vec<(Arc<Slot>, Arc<Instance>)> {
        self.shared
            .slot_list()
            .into_iter()
            .filter_map(|slot| {
                let instance = {
                    let state = slot.state.lock().expect("slot lock");
                    state
                        .status
                        .filter(|s| s.is_running())
                        .and(state.instance.clone())
                }?;
                Some((slot, instance))
            })
            .collect()
    }

    /// Stop every plugin (drain: stdin EOF, SIGTERM, SIGKILL) and wait for all of them.
    pub async fn shutdown(&self) {
        self.health.abort();
        let slots = self.shared.slot_list();
        futures::future::join_all(slots.iter().map(|slot| stop_slot(slot))).await;
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.health.abort();
    }
}

/// Ask every plugin's health every [`SupervisorOptions::health_interval`], and at once when
/// a call failed ([`Shared::health_wake`]), so that status is answered from what was last
/// heard instead of waiting for the slowest plugin. Aborted by [`Supervisor::shutdown`] and on
/// drop.
async fn health_task(shared: Arc<Shared>) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(shared.options().health_interval) => {}
            () = shared.health_wake.notified() => {}
        }
        shared.refresh_health(HEALTH_TIMEOUT).await;
        // Calls failing in a burst wake this task once, not once each.
        tokio::time::sleep(HEALTH_WAKE_GAP).await;
    }
}

/// A `plugin.health` answer as status shows it: the health line (`degraded: ` before the
/// detail when degraded) and the plugin status it means.
fn health_report(health: utter_protocol::handshake::HealthResult) -> (String, PluginStatus) {
    match health.status {
        HealthStatus::Ok => (health.detail, PluginStatus::Ok),
        HealthStatus::Degraded => (
            format!("degraded: {}", health.detail),
            PluginStatus::Degraded,
        ),
    }
}

fn has_capability(provides: &BTreeSet<String>, name: &str) -> bool {
    provides
        .iter()
        .any(|c| c.rsplit_once('@').is_some_and(|(n, _)| n == name))
}

impl Slot {
    fn report(&self) -> PluginReport {
        let state = self.state.lock().expect("slot lock");
        PluginReport {
            id: self.entry.id.clone(),
            kind: self.entry.kind.clone(),
            epoch: state.epoch,
            status: state.status.unwrap_or(PluginStatus::Starting),
            provides: state.provides.iter().cloned().collect(),
            requires: state.requires.iter().cloned().collect(),
            permissions: state.permissions.iter().cloned().collect(),
            methods: state
                .instance
                .as_ref()
                .map(|i| i.describe.methods.clone())
                .unwrap_or_default(),
            health: state.health.clone(),
            restarts: state.restarts,
            pid: state.instance.as_ref().and_then(|i| i.pid),
            last_error: state.last_error.clone(),
            warnings: state.warnings.clone(),
            sandbox: state.sandbox.clone().map(|mut report| {
                let names: Vec<String> = state.permissions.iter().cloned().collect();
                report.permissions =
                    crate::sandbox::permissions(&report, &names, &self.entry.permissions);
                report
            }),
            declared: state.declared.clone(),
        }
    }
}

impl Shared {
    /// A snapshot of the slot list.
    fn slot_list(&self) -> Vec<Arc<Slot>> {
        self.slots.lock().expect("slot list lock").clone()
    }

    /// A copy of the current options.
    fn options(&self) -> SupervisorOptions {
        self.options.lock().expect("options lock").clone()
    }

    /// Ask every running plugin for its `plugin.health` again (PROTOCOL.md §3, step 3), all
    /// at once, each bounded by `timeout`, and keep the answers: a plugin whose health turned
    /// `degraded` (a compositor that went away, a config file that broke) shows it in status,
    /// and one that recovered is `ok` again; each change is a status event. A plugin that
    /// fails to answer keeps its last health (a crash is the watch task's business).
    async fn refresh_health(&self, timeout: Duration) {
        let shared = self;
        let checks = shared.slot_list().into_iter().filter_map(|slot| {
            let instance = {
                let state = slot.state.lock().expect("slot lock");
                match (&state.instance, state.status) {
                    (Some(i), Some(status)) if status.is_running() => Some(i.clone()),
                    _ => None,
                }
            }?;
            Some(async move {
                let Ok(health) = utter_protocol::host::health(&instance.conn, Some(timeout)).await
                else {
                    return;
                };
                let (text, status) = health_report(health);
                // Checked and set under one lock: an answer that arrives as the instance
                // crashes (the watch task has taken it out and set its status) changes
                // nothing, so a plugin that is down is never shown `ok` again.
                let changed = {
                    let mut state = slot.state.lock().expect("slot lock");
                    let current = state.epoch == instance.epoch
                        && state
                            .instance
                            .as_ref()
                            .is_some_and(|i| Arc::ptr_eq(i, &instance))
                        && state.status.is_some_and(PluginStatus::is_running);
                    if !current {
                        return;
                    }
                    state.health = text;
                    let changed = state.status != Some(status);
                    state.status = Some(status);
                    changed
                };
                if changed {
                    shared.announce(&slot, instance.epoch, status);
                }
            })
        });
        futures::future::join_all(checks).await;
    }

    fn set_status(&self, slot: &Slot, epoch: u64, status: PluginStatus) {
        {
            let mut state = slot.state.lock().expect("slot lock");
            if state.status == Some(status) && state.epoch == epoch {
                return;
            }
            state.status = Some(status);
            state.epoch = epoch;
        }
        self.announce(slot, epoch, status);
    }

    /// Log a slot's new status and send it as an event.
    fn announce(&self, slot: &Slot, epoch: u64, status: PluginStatus) {
        info!(plugin = %slot.entry.id, epoch, status = status.as_str(), "plugin status");
        let _ = self.events.send(PluginEvent {
            id: slot.entry.id.clone(),
            epoch,
            status,
        });
    }

    fn install(&self, slot: &Slot, instance: Instance) {
        let epoch = instance.epoch;
        let status = {
            let mut state = slot.state.lock().expect("slot lock");
            state.instance = Some(Arc::new(instance));
            state.last_error = None;
            if state.health.starts_with("degraded") {
                PluginStatus::Degraded
            } else {
                PluginStatus::Ok
            }
        };
        self.set_status(slot, epoch, status);
    }

    fn fail(&self, slot: &Slot, epoch: u64, failure: &StartFailure) {
        if failure.not_installed && self.options().default_plugins {
            // The built-in list names every plugin Utter ships; one not installed here is
            // a fact for `utter status` and `utter doctor`, not a warning on every command.
            info!(plugin = %slot.entry.id, epoch, error = %failure.error.message, "plugin not installed");
        } else {
            warn!(plugin = %slot.entry.id, epoch, error = %failure.error.message, code = failure.error.code, "plugin failed to start");
        }
        {
            let mut state = slot.state.lock().expect("slot lock");
            state.instance = None;
            state.last_error = Some(format!(
                "{} [{}]",
                failure.error.message, failure.error.code
            ));
        }
        if failure.permanent {
            self.set_status(slot, epoch, PluginStatus::Error);
        }
    }

    /// Requirements of `slot` not in `available` (nor in its own provides) → `-32005`.
    fn check_requires(&self, slot: &Slot, available: &BTreeSet<String>) -> Result<(), ErrorObject> {
        let state = slot.state.lock().expect("slot lock");
        let missing: Vec<&String> = state
            .requires
            .iter()
            .filter(|r| !available.contains(*r) && !state.provides.contains(*r))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        Err(ErrorObject::new(
            ErrorCode::CapabilityMissing,
            format!(
                "plugin {:?} requires {} which no running plugin and not the runner provides",
                slot.entry.id,
                missing
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
        .with_data(json!({"missing": missing})))
    }

    /// The capabilities available to a respawned plugin: the runner's own plus those of every
    /// running plugin.
    fn available(&self) -> BTreeSet<String> {
        let mut available: BTreeSet<String> =
            RUNNER_CAPABILITIES.iter().map(|s| s.to_string()).collect();
        for slot in self.slot_list() {
            let state = slot.state.lock().expect("slot lock");
            if state.status.is_some_and(PluginStatus::is_running) {
                available.extend(state.provides.iter().cloned());
            }
        }
        available
    }

    /// Spawn one instance with `epoch` and run the handshake.
    async fn spawn_instance(
        &self,
        slot: &Slot,
        epoch: u64,
    ) -> Result<(Instance, Process), StartFailure> {
        let entry = &slot.entry;
        self.set_status(slot, epoch, PluginStatus::Starting);
        let permanent = |error: ErrorObject| StartFailure::new(error, true);
        if entry.runtime != Runtime::Subprocess {
            return Err(permanent(ErrorObject::invalid_params(format!(
                "plugin {:?}: only runtime \"subprocess\" runs today",
                entry.id
            ))));
        }
        let options = self.options();
        let argv = entry.entrypoint.argv();
        let program = resolve_program(&argv[0], options.bin_dir.as_deref());
        // A socket plugin's socket: the directory made safe, a stale file removed; for
        // `connect` the runner binds before spawning, so the plugin can dial at once.
        let socket = match entry.transport {
            Transport::Stdio => None,
            Transport::Connect | Transport::Listen => {
                let path = crate::transport::socket_path(&options.socket_dir, &entry.id);
                crate::transport::prepare_dir(&options.socket_dir)
                    .and_then(|()| crate::transport::remove_stale(&path))
                    .map_err(|e| {
                        permanent(ErrorObject::plugin(format!(
                            "cannot start plugin {:?}: {e}",
                            entry.id
                        )))
                    })?;
                Some(path)
            }
        };
        let listener = match (&entry.transport, &socket) {
            (Transport::Connect, Some(path)) => {
                Some(crate::transport::bind(path).map_err(|e| {
                    StartFailure::new(
                        ErrorObject::plugin(format!("cannot start plugin {:?}: {e}", entry.id)),
                        false,
                    )
                })?)
            }
            _ => None,
        };
        // A write path under the home directory that does not exist yet (~/Pictures/Screenshots
        // before the first screenshot) is made, so that the sandbox can pass it in.
        if matches!(
            options.sandbox,
            crate::sandbox::Mechanism::Bwrap(_) | crate::sandbox::Mechanism::Landlock
        ) && entry.sandbox
        {
            let home = crate::paths::BaseDirs::from_env().home;
            for path in entry.write_paths.iter().map(Path::new) {
                if home
                    .as_ref()
                    .is_some_and(|h| h.is_absolute() && path.starts_with(h) && path != h)
                    && !path.exists()
                {
                    if let Err(e) = std::fs::create_dir_all(path) {
                        warn!(plugin = %entry.id, path = %path.display(), error = %e, "cannot make a write path for the sandbox");
                    }
                }
            }
        }
        let plan = {
            let env = |name: &str| {
                entry
                    .env
                    .get(name)
                    .cloned()
                    .or_else(|| std::env::var(name).ok().filter(|_| passes_env(name)))
            };
            crate::sandbox::plan(
                &options.sandbox,
                crate::sandbox::Start {
                    entry,
                    program: &program,
                    socket_dir: socket.as_ref().and_then(|p| p.parent()),
                    env: &env,
                },
            )
        };
        {
            let mut state = slot.state.lock().expect("slot lock");
            state.sandbox = Some(plan.report.clone());
            state.awaited = plan.awaited.clone();
        }
        let mut cmd = match plan.prefix.split_first() {
            Some((wrapper, args)) => {
                let mut cmd = Command::new(wrapper);
                cmd.args(args).arg(&program);
                cmd
            }
            None => Command::new(&program),
        };
        cmd.args(&argv[1..])
            .env_clear()
            .envs(std::env::vars().filter(|(k, _)| passes_env(k)))
            .envs(&entry.env)
            .envs(plan.extra_env.iter().map(|(k, v)| (*k, v.as_str())))
            .env("UTTER_PLUGIN_ID", &entry.id)
            .env("UTTER_PLUGIN_TRANSPORT", entry.transport.to_string())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for key in &plan.withheld_env {
            cmd.env_remove(key);
        }
        // The plugin dies with the runner, even when the runner is killed with SIGKILL (which
        // no drain can follow): the kernel sends it SIGKILL when its parent thread ends. The
        // runner's runtime spawns on one thread that lives as long as the process. What the
        // plugin started itself is in its process group, which a drain stops; under systemd
        // the service's cgroup is stopped as a whole as well.
        let parent = nix::unistd::getpid();
        // SAFETY: between fork and exec the closure only makes three system calls (setsid,
        // prctl, getppid), which are async-signal-safe, and allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                // A session of its own, and so a process group of its own whose id is its pid:
                // a terminal's Ctrl-C reaches the runner, which drains, and the plugin has no
                // controlling terminal, so it cannot push keystrokes into the person's shell
                // (TIOCSTI) or open /dev/tty.
                nix::unistd::setsid().map_err(std::io::Error::from)?;
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                    .map_err(std::io::Error::from)?;
                // The runner may have died before the line above: then nobody would stop us.
                // (ESRCH, "no such process": an error without an allocation.)
                if nix::unistd::getppid() != parent {
                    return Err(std::io::Error::from_raw_os_error(nix::libc::ESRCH));
                }
                Ok(())
            });
        }
        if let Some(rules) = &plan.landlock {
            // The ruleset is made here, in the runner; the child only applies it.
            let ruleset = crate::sandbox::landlock_ruleset(rules).map_err(|e| {
                permanent(ErrorObject::plugin(format!(
                    "cannot sandbox plugin {:?}: {e}",
                    entry.id
                )))
            })?;
            let ruleset = Mutex::new(Some(ruleset));
            // SAFETY: in the child the closure locks a mutex no other thread can hold (only
            // this closure reaches it) and makes two system calls (prctl,
            // landlock_restrict_self); it allocates nothing when they succeed.
            unsafe {
                cmd.pre_exec(move || {
                    let taken = ruleset.lock().ok().and_then(|mut r| r.take());
                    match taken {
                        Some(ruleset) => crate::sandbox::restrict(ruleset),
                        None => Err(std::io::Error::from_raw_os_error(nix::libc::EPERM)),
                    }
                });
            }
        }
        match &socket {
            Some(path) => {
                cmd.env("UTTER_PLUGIN_SOCKET", path)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null());
            }
            None => {
                cmd.env_remove("UTTER_PLUGIN_SOCKET")
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped());
            }
        }
        if !entry.cwd.is_empty() {
            cmd.current_dir(&entry.cwd);
        }
        let mut child = cmd.spawn().map_err(|e| {
            let not_found = e.kind() == std::io::ErrorKind::NotFound;
            // Neither a missing program nor one that cannot be run gets better by retrying:
            // the plugin stays in `error` until the config or the file changes (reload).
            let problem = program_problem(&program);
            let permanent =
                not_found || matches!(problem, Some(ProgramProblem::Unstartable(_)));
            let message = if let Some(ProgramProblem::Unstartable(why)) = &problem {
                format!("cannot start plugin {:?}: {why}", entry.id)
            } else if not_found {
                format!(
                    "cannot start plugin {:?}: program not found: {} (looked beside the utter binary and on PATH); {} (then `utter reload` when the service runs), fix its entrypoint, or turn it off with [plugins] disabled = [{:?}]",
                    entry.id,
                    program.display(),
                    install_hint(&program),
                    entry.id
                )
            } else {
                format!(
                    "cannot start plugin {:?}: {}: {e}",
                    entry.id,
                    program.display()
                )
            };
            if let Some(path) = &socket {
                let _ = crate::transport::remove_stale(path);
            }
            StartFailure {
                not_installed: not_found,
                permanent,
                error: ErrorObject::plugin(message),
            }
        })?;
        let pid = child.id();
        if let Some(group) = pid {
            crate::groups::record(group, &entry.id);
        }
        // The stderr reader ends at EOF; a failed start waits (bounded) for it so that the
        // report carries the plugin's last words, not a race with the reader task.
        let mut stderr_reader = child.stderr.take().map(|stderr| {
            tokio::spawn(
                log_stderr(stderr, entry.id.clone(), epoch, slot.stderr_tail.clone())
                    .instrument(info_span!("plugin", plugin = %entry.id, epoch)),
            )
        });
        // One transport abstraction: whatever carries the frames is a boxed reader and writer.
        // Socket plugins get a connection that can carry descriptors (`fd.pass`).
        let streams: Result<PluginStream, ErrorObject> = match (&socket, listener) {
            (None, _) => {
                let stdin = child.stdin.take().expect("stdin piped");
                let stdout = child.stdout.take().expect("stdout piped");
                Ok(PluginStream::Pipes(Box::new(stdout), Box::new(stdin)))
            }
            (Some(path), Some(listener)) => crate::transport::accept_plugin(
                &listener,
                &mut child,
                &entry.id,
                path,
                options.rpc_timeout,
            )
            .await
            .map(PluginStream::Socket),
            (Some(path), None) => {
                crate::transport::dial_plugin(&mut child, &entry.id, path, options.rpc_timeout)
                    .await
                    .map(PluginStream::Socket)
            }
        };
        let stream = match streams {
            Ok(stream) => stream,
            Err(mut error) => {
                // Say what it last said, and stop it.
                if let Ok(Ok(status)) =
                    tokio::time::timeout(Duration::from_millis(50), child.wait()).await
                {
                    error.message.push_str(&format!(" (the plugin {status})"));
                    await_stderr_eof(&mut stderr_reader).await;
                }
                error.message.push_str(&slot.stderr_summary(epoch));
                tokio::spawn(async move {
                    stop_process(child, pid, options).await;
                    if let Some(path) = socket {
                        let _ = crate::transport::remove_stale(&path);
                    }
                });
                return Err(StartFailure::new(error, false));
            }
        };
        let conn_options = ConnectionOptions {
            max_body: options.max_frame_bytes,
            id_prefix: Some(format!("{epoch}:")),
            label: entry.id.clone(),
            // A plugin's stream that cannot stay in step is restarted, not left deaf.
            oversized_is_fatal: true,
            ..Default::default()
        };
        let (conn, incoming) = match stream {
            PluginStream::Pipes(reader, writer) => Connection::spawn(reader, writer, conn_options),
            PluginStream::Socket(socket) => Connection::spawn_unix(socket, conn_options),
        };
        let in_flight: InFlightList = Arc::default();
        tokio::spawn(
            serve_plugin_requests(
                conn.clone(),
                incoming,
                entry.id.clone(),
                epoch,
                self.host.clone(),
                in_flight.clone(),
            )
            .instrument(info_span!("plugin", plugin = %entry.id, epoch)),
        );
        let process = Process {
            child,
            group: pid,
            conn: conn.clone(),
            stderr: stderr_reader.take(),
            socket,
        };
        match self.handshake(slot, &conn, epoch).await {
            Ok(describe) => Ok((
                Instance {
                    epoch,
                    conn,
                    pid,
                    describe,
                    action_ops: tokio::sync::OnceCell::new(),
                    in_flight,
                },
                process,
            )),
            Err(mut failure) => {
                // Say why: the exit status if it already died, and what it last said.
                let mut process = process;
                if let Ok(Ok(status)) =
                    tokio::time::timeout(Duration::from_secs(2), process.child.wait()).await
                {
                    failure
                        .error
                        .message
                        .push_str(&format!(" (the plugin {status})"));
                    await_stderr_eof(&mut process.stderr).await;
                }
                failure.error.message.push_str(&slot.stderr_summary(epoch));
                tokio::spawn(drain(process, self.options()));
                Err(failure)
            }
        }
    }

    /// The frozen handshake (PROTOCOL.md §3) through [`utter_protocol::host::handshake`];
    /// the slot keeps the joined capabilities, permissions, health and warnings.
    async fn handshake(
        &self,
        slot: &Slot,
        conn: &Connection,
        epoch: u64,
    ) -> Result<DescribeResult, StartFailure> {
        let entry = &slot.entry;
        let options = utter_protocol::host::HandshakeOptions {
            runner: format!("utter/{}", env!("CARGO_PKG_VERSION")),
            epoch,
            timeout: Some(self.options().rpc_timeout),
            configured_provides: entry.provides.clone(),
            configured_requires: entry.requires.clone(),
            configured_permissions: entry.permissions.clone(),
            registry: Some(&self.registry),
        };
        let done = utter_protocol::host::handshake(conn, &options)
            .await
            .map_err(|e| {
                let permanent = e.is_permanent();
                StartFailure::new(e.into_error(), permanent)
            })?;
        for w in &done.warnings {
            warn!(plugin = %entry.id, "{w}");
        }
        if !done.hello.plugin.name.is_empty() && done.hello.plugin.name != entry.id {
            debug!(plugin = %entry.id, name = %done.hello.plugin.name, "plugin name differs from its configured id");
        }
        let mut state = slot.state.lock().expect("slot lock");
        state.provides = done.provides;
        state.requires = done.requires;
        state.permissions = done.permissions;
        state.health = health_report(done.health).0;
        state.warnings = done.warnings;
        state.declared = Some(DeclaredAxes {
            version: done.hello.plugin.version.clone(),
            protocol: done.hello.protocol.clone(),
            abi: done.hello.abi,
        });
        Ok(done.describe)
    }
}

/// Answer requests a plugin sends to the runner: `host.*` callbacks go to the installed
/// [`HostHandler`] (each on its own task, so a slow confirmation blocks nothing else);
/// anything else, or any callback before a handler is installed, is `-32601`.
async fn serve_plugin_requests(
    conn: Connection,
    mut incoming: tokio::sync::mpsc::Receiver<Incoming>,
    id: String,
    epoch: u64,
    host: HostSlot,
    in_flight: InFlightList,
) {
    let busy = Arc::new(AtomicUsize::new(0));
    while let Some(msg) = incoming.recv().await {
        match msg {
            Incoming::Request(req) => {
                let handler = host.read().expect("host lock").clone();
                let handler = handler.filter(|_| {
                    req.method.starts_with("host.")
                        || req.method.starts_with("handle.")
                        || req.method == "fd.pass"
                });
                let Some(handler) = handler else {
                    debug!(plugin = %id, method = %req.method, "plugin request refused");
                    let _ = conn
                        .respond(
                            req.id,
                            Err(ErrorObject::new(
                                ErrorCode::MethodNotFound,
                                format!(
                                    "method not found: {} (the runner serves host.context, host.perceive, host.action, host.confirm, host.choose, host.emit, handle.create, handle.fetch, handle.stat, handle.retain, handle.release and fd.pass)",
                                    req.method
                                ),
                            )),
                        )
                        .await;
                    continue;
                };
                // Bounded: a plugin flooding the runner with callbacks (or looping through
                // host.action into itself) is refused instead of growing tasks without limit.
                if busy.load(Ordering::SeqCst) >= MAX_HOST_CALLS_IN_FLIGHT {
                    warn!(plugin = %id, method = %req.method, "too many host callbacks in flight; refused");
                    let _ = conn
                        .respond(
                            req.id,
                            Err(ErrorObject::new(
                                ErrorCode::Denied,
                                format!(
                                    "too many host callbacks in flight (at most {MAX_HOST_CALLS_IN_FLIGHT} per plugin)"
                                ),
                            )),
                        )
                        .await;
                    continue;
                }
                if req.method == "fd.pass" {
                    // Answered here: the descriptor rides on the response frame.
                    let result = if conn.carries_fds() {
                        handler.fd_pass(&id, &req.params)
                    } else {
                        Err(ErrorObject::new(
                            ErrorCode::CapabilityMissing,
                            "fd.pass unsupported: this plugin runs on stdio, which cannot carry descriptors; use transport \"connect\" or \"listen\", or read the blob with handle.fetch {handle, offset, length}",
                        ))
                    };
                    match result {
                        Ok((value, fd)) => {
                            if let Err(e) = conn.respond_with_fd(req.id.clone(), value, fd).await {
                                let _ = conn.respond(req.id, Err(e)).await;
                            }
                        }
                        Err(e) => {
                            let _ = conn.respond(req.id, Err(e)).await;
                        }
                    }
                    continue;
                }
                busy.fetch_add(1, Ordering::SeqCst);
                let caller = caller_in_flight(&in_flight);
                let conn = conn.clone();
                let id = id.clone();
                let busy = busy.clone();
                tokio::spawn(async move {
                    debug!(plugin = %id, method = %req.method, provenance = %caller.provenance, "host callback");
                    let result = handler
                        .handle(id, epoch, req.method, req.params, caller)
                        .await;
                    busy.fetch_sub(1, Ordering::SeqCst);
                    let _ = conn.respond(req.id, result).await;
                });
            }
            Incoming::Notification(note) => match host.read().expect("host lock").clone() {
                Some(handler) => handler.notify(&id, epoch, &note.method, note.params),
                None => debug!(plugin = %id, method = %note.method, "plugin notification ignored"),
            },
        }
    }
}

/// Forget crashes older than [`CRASH_WINDOW`].
fn prune(crashes: &mut VecDeque<Instant>) {
    while crashes.front().is_some_and(|t| t.elapsed() > CRASH_WINDOW) {
        crashes.pop_front();
    }
}

/// The status of a plugin that is down and waits for its restart: `crash-loop` while it
/// keeps failing, else `error` (its `last_error` says why and when it is tried again).
fn down_status(looping: bool) -> PluginStatus {
    if looping {
        PluginStatus::CrashLoop
    } else {
        PluginStatus::Error
    }
}

/// Watch a slot: wait for its instance to end, respawn with backoff, drain on shutdown.
async fn watch_slot(shared: Arc<Shared>, slot: Arc<Slot>, first: Result<Process, StartFailure>) {
    let mut shutdown = slot.stop.subscribe();
    let mut crashes: VecDeque<Instant> = VecDeque::new();
    let mut looping = false;
    let mut delay = shared.options().restart_delay;
    let mut current = match first {
        Ok(process) => Some((process, Instant::now())),
        Err(failure) if failure.permanent => None,
        Err(_) => {
            crashes.push_back(Instant::now());
            None
        }
    };
    if current.is_none()
        && slot.state.lock().expect("slot lock").status == Some(PluginStatus::Error)
    {
        // Permanent failure: nothing to watch until the config changes.
        let _ = stop_requested(&mut shutdown).await;
        return;
    }
    loop {
        // An instance started again because a socket it awaited appeared: no crash, no delay.
        let mut requested = false;
        if let Some((mut process, started)) = current.take() {
            let epoch = slot.state.lock().expect("slot lock").epoch;
            let conn = process.conn.clone();
            let reason = tokio::select! {
                appeared = awaited_socket(&slot) => {
                    requested = true;
                    format!("is started again: {} appeared after it started, and its sandbox passes it in only at the start", appeared.display())
                }
                status = process.child.wait() => {
                    format!("exited with {}", status.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string()))
                }
                reason = conn.closed() => match reason {
                    CloseReason::Framing(e) => format!("sent an unreadable stream ({e}); restarting it"),
                    other => {
                        // A process that exits closes its stdout a moment before it is seen
                        // gone: its exit status says more than the closed stream.
                        match tokio::time::timeout(Duration::from_millis(500), process.child.wait()).await {
                            Ok(Ok(status)) => format!("exited with {status}"),
                            _ => format!("closed its connection ({other})"),
                        }
                    }
                },
                _ = stop_requested(&mut shutdown) => {
                    drain(process, shared.options()).await;
                    shared.set_status(&slot, epoch, PluginStatus::Stopped);
                    return;
                }
            };
            conn.close();
            if requested {
                info!(plugin = %slot.entry.id, epoch, "plugin {reason}");
            } else {
                warn!(plugin = %slot.entry.id, epoch, "plugin {reason}");
                if started.elapsed() >= CRASH_WINDOW {
                    delay = shared.options().restart_delay;
                }
                crashes.push_back(Instant::now());
                prune(&mut crashes);
                looping |= crashes.len() >= CRASH_LOOP_COUNT;
            }
            // Down from this moment on: say so before the drain, which may take seconds.
            {
                let mut state = slot.state.lock().expect("slot lock");
                state.instance = None;
                if !requested {
                    state.last_error = Some(format!("epoch {epoch} {reason}"));
                }
            }
            shared.set_status(&slot, epoch, down_status(looping));
            let mut stderr = process.stderr.take();
            drain(process, shared.options()).await;
            // What this instance said last, not an earlier one.
            await_stderr_eof(&mut stderr).await;
            if !requested {
                slot.state.lock().expect("slot lock").last_error = Some(format!(
                    "epoch {epoch} {reason}{}",
                    slot.stderr_summary(epoch)
                ));
            }
        }
        prune(&mut crashes);
        // Once crash-looping, it stays so (retried at the longest delay) until a start works.
        looping |= crashes.len() >= CRASH_LOOP_COUNT;
        let max = shared.options().restart_delay_max;
        if looping {
            delay = max;
        }
        let epoch = slot.state.lock().expect("slot lock").epoch;
        if !requested {
            if let Some(error) = &mut slot.state.lock().expect("slot lock").last_error {
                if !error.contains("; restarting in ") {
                    error.push_str(&format!("; restarting in {} ms", delay.as_millis()));
                }
            }
            shared.set_status(&slot, epoch, down_status(looping));
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = stop_requested(&mut shutdown) => {
                    shared.set_status(&slot, epoch, PluginStatus::Stopped);
                    return;
                }
            }
            delay = (delay * 2).min(max);
        }
        let epoch = epoch + 1;
        slot.state.lock().expect("slot lock").restarts += 1;
        match shared.spawn_instance(&slot, epoch).await {
            Ok((instance, process)) => {
                let available = shared.available();
                match shared.check_requires(&slot, &available) {
                    Ok(()) => {
                        shared.install(&slot, instance);
                        looping = false;
                        current = Some((process, Instant::now()));
                    }
                    Err(error) => {
                        drain(process, shared.options()).await;
                        shared.fail(&slot, epoch, &StartFailure::new(error, true));
                        let _ = stop_requested(&mut shutdown).await;
                        return;
                    }
                }
            }
            Err(failure) => {
                shared.fail(&slot, epoch, &failure);
                if failure.permanent {
                    let _ = stop_requested(&mut shutdown).await;
                    return;
                }
                crashes.push_back(Instant::now());
            }
        }
    }
}

/// How often a slot looks whether a socket its sandbox awaited has appeared.
const AWAITED_EVERY: Duration = Duration::from_secs(2);

/// The first socket the slot's instance awaited (see [`SlotState::awaited`]) once it exists;
/// never, when it awaits none.
async fn awaited_socket(slot: &Slot) -> PathBuf {
    loop {
        let awaited = slot.state.lock().expect("slot lock").awaited.clone();
        if awaited.is_empty() {
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(AWAITED_EVERY).await;
        if let Some(path) = crate::sandbox::Plan::appeared(&awaited) {
            return path.to_path_buf();
        }
    }
}

type BoxedReader = Box<dyn tokio::io::AsyncRead + Send + Unpin>;
type BoxedWriter = Box<dyn tokio::io::AsyncWrite + Send + Unpin>;

/// What carries a plugin's frames: its stdout/stdin pipes, or a connected socket (which can
/// also carry descriptors). Closing the connection shuts the write side down, so the plugin
/// sees end of file.
enum PluginStream {
    Pipes(BoxedReader, BoxedWriter),
    Socket(tokio::net::UnixStream),
}

/// Resolves once shutdown has been requested (or the supervisor is gone).
async fn stop_requested(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await.map(|_| ());
}

/// Stop a process: close its stdin or socket, wait, SIGTERM its process group, wait, SIGKILL the
/// group; always reaps it. Processes it left behind in its group are stopped too (the
/// plugin runs in a group of its own; apps it launches for the user start their own groups).
async fn drain(process: Process, options: SupervisorOptions) {
    // Closing the connection closes stdin, or shuts the socket's write side down.
    process.conn.close();
    stop_process(process.child, process.group, options).await;
    if let Some(path) = process.socket {
        let _ = crate::transport::remove_stale(&path);
    }
}

/// The waiting and signalling part of [`drain`]. `group` is the plugin's pid (it was spawned
/// with `process_group(0)`, so it leads a group of that id).
async fn stop_process(mut child: Child, group: Option<u32>, options: SupervisorOptions) {
    let group = group.map(|pid| nix::unistd::Pid::from_raw(pid as i32));
    let exited = tokio::time::timeout(options.drain_timeout, child.wait())
        .await
        .is_ok();
    let Some(group) = group else { return };
    stop_group(&mut child, group, exited, options).await;
    crate::groups::forget(group.as_raw() as u32);
}

/// Signal the group of a plugin that was asked to exit: SIGTERM when it did not, then
/// SIGKILL; then whatever is left in its group.
async fn stop_group(
    child: &mut Child,
    group: nix::unistd::Pid,
    exited: bool,
    options: SupervisorOptions,
) {
    use nix::sys::signal::{Signal, killpg};
    if !exited {
        let _ = killpg(group, Signal::SIGTERM);
        if tokio::time::timeout(options.kill_timeout, child.wait())
            .await
            .is_err()
        {
            let _ = killpg(group, Signal::SIGKILL);
            let _ = child.kill().await;
            return;
        }
    }
    // Leftovers in the group (a script plugin's `sleep`, say): ask, then insist.
    if killpg(group, None).is_ok() {
        let _ = killpg(group, Signal::SIGTERM);
        tokio::time::sleep(options.kill_timeout).await;
        let _ = killpg(group, Signal::SIGKILL);
    }
}

/// The longest stderr line logged; the rest of a longer line is dropped.
const MAX_STDERR_LINE: usize = 8 * 1024;
/// The `tracing` target of the lines a plugin wrote to its stderr, relayed at their own
/// level: a one-shot command's log filter can quiet them (its output already says what
/// failed) while the service logs them.
pub const PLUGIN_LOG_TARGET: &str = "utter::plugin";

/// How many stderr lines of one instance an error report quotes.
const STDERR_TAIL_LINES: usize = 5;
/// How many stderr lines a slot keeps, of all its instances.
const STDERR_KEPT_LINES: usize = 16;
/// How many stderr lines of one instance are logged per 10 s; the rest are counted and the
/// count is logged (they still reach the tail that error reports quote).
const STDERR_LOGGED_LINES: u32 = 50;

/// Log a plugin's stderr line by line, tagged with its id and epoch. Lines are capped at
/// 8 KiB and decoded lossily, so neither a flood without newlines nor invalid UTF-8 can hurt
/// the runner or stop the reading (which would leave the plugin blocked on a full pipe).
/// After a plugin exited, give its stderr reader a moment (at most 500 ms: a process it left
/// behind may hold the pipe open) to read the last lines up to EOF.
async fn await_stderr_eof(reader: &mut Option<JoinHandle<()>>) {
    if let Some(reader) = reader.as_mut() {
        let _ = tokio::time::timeout(Duration::from_millis(500), reader).await;
    }
}

async fn log_stderr(
    mut stderr: impl tokio::io::AsyncRead + Unpin,
    id: String,
    epoch: u64,
    tail: StderrTail,
) {
    use tokio::io::AsyncReadExt;
    let throttle = Throttle::new(STDERR_LOGGED_LINES, Duration::from_secs(10));
    let mut line: Vec<u8> = Vec::with_capacity(256);
    let mut truncated = false;
    let mut chunk = [0u8; 4096];
    let emit = |line: &mut Vec<u8>, truncated: &mut bool| {
        // A plugin's stderr may quote what it read (a window title, a compositor's bytes):
        // control characters are escaped so a log viewer shows them instead of obeying them.
        let (mut text, _) =
            utter_protocol::text::escape_unprintable(&String::from_utf8_lossy(line), usize::MAX);
        if *truncated {
            text.push_str(" [line truncated]");
        }
        if let Some(suppressed) = throttle.allow() {
            let (level, message) = stderr_level(&text);
            let message = if suppressed > 0 {
                format!("{message} [{suppressed} earlier stderr lines were not logged]")
            } else {
                message.to_owned()
            };
            // One level per line: the plugin's own, when its line starts with one.
            match level {
                tracing::Level::ERROR => {
                    tracing::error!(target: PLUGIN_LOG_TARGET, plugin = %id, epoch, "{message}")
                }
                tracing::Level::WARN => {
                    warn!(target: PLUGIN_LOG_TARGET, plugin = %id, epoch, "{message}")
                }
                tracing::Level::INFO => {
                    info!(target: PLUGIN_LOG_TARGET, plugin = %id, epoch, "{message}")
                }
                _ => debug!(target: PLUGIN_LOG_TARGET, plugin = %id, epoch, "{message}"),
            }
        }
        let mut tail = tail.lock().expect("stderr tail lock");
        if tail.len() == STDERR_KEPT_LINES {
            tail.pop_front();
        }
        tail.push_back((epoch, text));
        line.clear();
        *truncated = false;
    };
    loop {
        let n = match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &byte in &chunk[..n] {
            if byte == b'\n' {
                emit(&mut line, &mut truncated);
            } else if line.len() < MAX_STDERR_LINE {
                line.push(byte);
            } else {
                truncated = true;
            }
        }
    }
    if !line.is_empty() {
        emit(&mut line, &mut truncated);
    }
    let left_out = throttle.suppressed();
    if left_out > 0 {
        warn!(plugin = %id, epoch, suppressed = left_out, "{left_out} more stderr lines of this instance were not logged (at most {STDERR_LOGGED_LINES} per 10 s)");
    }
}

/// The level a plugin's stderr line states at its start, and the rest of the line: the
/// level word of `tracing`'s format (`  WARN message`, as [`utter_protocol::plugin::
/// init_stderr_logging`] writes), of Python's `logging` (`WARNING:root:message`) or in
/// brackets (`[error] message`), in any case. A line without one is `INFO`, whole.
fn stderr_level(line: &str) -> (tracing::Level, &str) {
    let trimmed = line.trim_start();
    let end = trimmed
        .find(|c: char| c.is_whitespace() || c == ':')
        .unwrap_or(trimmed.len());
    let word = &trimmed[..end];
    let bare = word
        .strip_prefix('[')
        .and_then(|w| w.strip_suffix(']'))
        .unwrap_or(word);
    let level = match bare.to_ascii_uppercase().as_str() {
        "TRACE" => tracing::Level::TRACE,
        "DEBUG" => tracing::Level::DEBUG,
        "INFO" => tracing::Level::INFO,
        "WARN" | "WARNING" => tracing::Level::WARN,
        "ERROR" | "CRITICAL" | "FATAL" => tracing::Level::ERROR,
        _ => return (tracing::Level::INFO, line),
    };
    let rest = trimmed[end..].trim_start_matches(':').trim_start();
    (level, rest)
}

/// Whether an environment variable is passed to plugins.
fn passes_env(name: &str) -> bool {
    PASSED_ENV.contains(&name) || PASSED_ENV_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Resolve argv[0]: a bare name is looked up beside the running executable (or `bin_dir`)
/// first, else left for PATH; a path is used as given.
pub fn resolve_program(program: &str, bin_dir: Option<&Path>) -> PathBuf {
    if program.contains('/') {
        return PathBuf::from(program);
    }
    let dirs: Vec<PathBuf> = match bin_dir {
        Some(dir) => vec![dir.to_path_buf()],
        None => executable_dirs(),
    };
    for dir in dirs {
        let candidate = dir.join(program);
        if candidate.is_file() {
            return candidate;
        }
    }
    PathBuf::from(program)
}

/// How to install a missing plugin program: the command for the plugins in this
/// repository (by program name), else a general sentence.
pub fn install_hint(program: &Path) -> String {
    let name = program
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let krate = match name.as_str() {
        "utter-input" => "plugins/input",
        "utter-stt-whisper" => "plugins/stt_whisper",
        "utter-audio-pipewire" => "plugins/audio_pipewire",
        "utter-tts-espeak" => "plugins/tts_espeak",
        "utter-llm" => "plugins/llm --features llama",
        "utter-rules" | "utter-desktop" | "utter-compositor" | "utter-a11y" => {
            return format!(
                "{name} is built into utter: use `utter plugin {}` as the entrypoint",
                name.trim_start_matches("utter-")
            );
        }
        _ => return "install it".into(),
    };
    format!("install it with `cargo install --path {krate}` from the source tree")
}

/// What keeps a resolved program from being started, found before trying: `None` when it
/// looks startable. A bare name that is not beside `utter` is looked up on `PATH` the way
/// `execvp` does. Each answer is a sentence that says what to do.
pub fn program_problem(program: &Path) -> Option<ProgramProblem> {
    use std::os::unix::fs::PermissionsExt;
    let found = if program.components().count() > 1 || program.is_absolute() {
        Some(program.to_path_buf())
    } else {
        // As execvp: the first executable file by that name on PATH; else the first thing
        // by that name, to say what is wrong with it.
        let candidates: Vec<PathBuf> = std::env::var_os("PATH")
            .map(|path| {
                std::env::split_paths(&path)
                    .map(|dir| dir.join(program))
                    .filter(|candidate| candidate.symlink_metadata().is_ok())
                    .collect()
            })
            .unwrap_or_default();
        let runnable = candidates.iter().find(|c| {
            std::fs::metadata(c).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        });
        runnable.or(candidates.first()).cloned()
    };
    let Some(found) = found else {
        return Some(ProgramProblem::Missing(format!(
            "program not found: {} (looked beside the utter binary and on PATH); {}, fix the entrypoint, or turn the plugin off with [plugins] disabled",
            program.display(),
            install_hint(program)
        )));
    };
    let shown = found.display();
    match std::fs::metadata(&found) {
        Err(e) => match std::fs::read_link(&found) {
            Ok(target) => Some(ProgramProblem::Unstartable(format!(
                "{shown} is a symbolic link to {}, which cannot be followed ({e}); fix or remove the link",
                target.display()
            ))),
            Err(_) if e.kind() == std::io::ErrorKind::NotFound => Some(ProgramProblem::Missing(
                format!("program not found: {shown}"),
            )),
            Err(_) => Some(ProgramProblem::Unstartable(format!("{shown}: {e}"))),
        },
        Ok(meta) if meta.is_dir() => Some(ProgramProblem::Unstartable(format!(
            "{shown} is a directory, not a program; name the program inside it"
        ))),
        Ok(meta) if !meta.is_file() => Some(ProgramProblem::Unstartable(format!(
            "{shown} is not a regular file, so it cannot be run"
        ))),
        Ok(meta) if meta.permissions().mode() & 0o111 == 0 => {
            Some(ProgramProblem::Unstartable(format!(
                "{shown} is not executable (mode {:o}); `chmod +x` it if it is a program, or fix the entrypoint",
                meta.permissions().mode() & 0o7777
            )))
        }
        Ok(_) => None,
    }
}

/// Why an entrypoint cannot start ([`program_problem`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgramProblem {
    /// Nothing by that name (it may be installed later).
    Missing(String),
    /// Something is there, but it can never run as it is: a directory, a file without the
    /// execute permission, a dangling or looping symbolic link.
    Unstartable(String),
}

impl ProgramProblem {
    /// The sentence.
    pub fn message(&self) -> &str {
        match self {
            ProgramProblem::Missing(m) | ProgramProblem::Unstartable(m) => m,
        }
    }
}

/// The directory of the running executable, and its parent when that is cargo's `deps/`
/// (tests and benchmarks run from `target/<profile>/deps`).
fn executable_dirs() -> Vec<PathBuf> {
    let Ok(exe) = std::env::current_exe() else {
        return Vec::new();
    };
    let Some(dir) = exe.parent() else {
        return Vec::new();
    };
    let mut dirs = vec![dir.to_path_buf()];
    if dir.file_name().is_some_and(|n| n == "deps") {
        if let Some(parent) = dir.parent() {
            dirs.push(parent.to_path_buf());
        }
    }
    dirs
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_missing_program_is_told_how_to_install() {
        assert!(
            install_hint(Path::new("utter-input")).contains("cargo install --path plugins/input")
        );
        assert!(install_hint(Path::new("/x/utter-llm")).contains("plugins/llm --features llama"));
        assert!(install_hint(Path::new("utter-rules")).contains("utter plugin rules"));
        assert_eq!(install_hint(Path::new("mine")), "install it");
    }

    #[test]
    fn a_plugins_stderr_line_is_logged_at_its_own_level_once() {
        use tracing::Level;
        assert_eq!(
            stderr_level("  WARN model missing x=1"),
            (Level::WARN, "model missing x=1")
        );
        assert_eq!(stderr_level("ERROR boom"), (Level::ERROR, "boom"));
        assert_eq!(
            stderr_level("WARNING:root:disk full"),
            (Level::WARN, "root:disk full")
        );
        assert_eq!(stderr_level("[debug] detail"), (Level::DEBUG, "detail"));
        assert_eq!(stderr_level("CRITICAL: gone"), (Level::ERROR, "gone"));
        assert_eq!(
            stderr_level("Warnings are fine"),
            (Level::INFO, "Warnings are fine")
        );
        assert_eq!(stderr_level("plain text"), (Level::INFO, "plain text"));
        assert_eq!(stderr_level(""), (Level::INFO, ""));
        assert_eq!(stderr_level("info"), (Level::INFO, ""));
    }

    use super::*;

    #[test]
    fn environment_is_filtered() {
        assert!(passes_env("PATH") && passes_env("XDG_DATA_HOME") && passes_env("LC_ALL"));
        assert!(!passes_env("AWS_SECRET_ACCESS_KEY") && !passes_env("SSH_AUTH_SOCK"));
    }

    #[tokio::test]
    async fn stderr_lines_are_capped_decoded_lossily_and_read_to_the_end() {
        use tokio::io::AsyncWriteExt;
        let (mut tx, rx) = tokio::io::duplex(1024);
        let tail: StderrTail = Arc::default();
        let reader = tokio::spawn(log_stderr(rx, "p".into(), 0, tail.clone()));
        tx.write_all(b"\xff\xfebad\n").await.unwrap();
        tx.write_all(&vec![b'a'; MAX_STDERR_LINE * 4])
            .await
            .unwrap();
        tx.write_all(b"\nlast words").await.unwrap();
        drop(tx);
        reader.await.unwrap();
        let tail: Vec<String> = tail
            .lock()
            .unwrap()
            .iter()
            .map(|(_, l)| l.clone())
            .collect();
        assert_eq!(tail.len(), 3);
        assert_eq!(tail[0], "\u{fffd}\u{fffd}bad");
        assert!(tail[1].ends_with("[line truncated]") && tail[1].len() < MAX_STDERR_LINE + 32);
        assert_eq!(tail[2], "last words");
    }

    #[tokio::test]
    async fn a_stderr_flood_is_kept_whole_in_the_tail_but_logged_within_the_bound() {
        use tokio::io::AsyncWriteExt;
        let (mut tx, rx) = tokio::io::duplex(1 << 16);
        let tail: StderrTail = Arc::default();
        let reader = tokio::spawn(log_stderr(rx, "p".into(), 3, tail.clone()));
        for n in 0..10_000 {
            tx.write_all(format!("line {n}\n").as_bytes())
                .await
                .unwrap();
        }
        drop(tx);
        reader.await.unwrap();
        let tail = tail.lock().unwrap();
        assert_eq!(tail.len(), STDERR_KEPT_LINES);
        assert_eq!(tail.back(), Some(&(3, "line 9999".to_owned())));
    }

    #[test]
    fn callbacks_run_with_the_least_trusted_request_in_flight() {
        let list: InFlightList = Arc::default();
        let step = |text: &str| {
            Some(Serving {
                step: text.to_owned(),
                confirmer: None,
            })
        };
        let serving = |c: Caller| c.serving.map(|s| s.step);
        assert_eq!(
            caller_in_flight(&list).provenance,
            Provenance::Screen,
            "none in flight"
        );
        assert_eq!(serving(caller_in_flight(&list)), None);
        let user = InFlight::start(&list, Provenance::User, step("click_element {}"));
        assert_eq!(caller_in_flight(&list).provenance, Provenance::User);
        assert_eq!(
            serving(caller_in_flight(&list)).as_deref(),
            Some("click_element {}")
        );
        let guard = InFlight::start(&list, Provenance::Clipboard, None);
        assert_eq!(caller_in_flight(&list).provenance, Provenance::Clipboard);
        assert_eq!(
            serving(caller_in_flight(&list)).as_deref(),
            Some("click_element {}")
        );
        // Two steps in flight: which one a callback serves cannot be told.
        let other = InFlight::start(&list, Provenance::User, step("type_text {}"));
        assert_eq!(serving(caller_in_flight(&list)), None);
        drop(other);
        drop(guard);
        assert_eq!(caller_in_flight(&list).provenance, Provenance::User);
        drop(user);
        assert_eq!(caller_in_flight(&list).provenance, Provenance::Screen);
    }

    #[test]
    fn op_specs_are_read_leniently_and_schemas_name_the_field() {
        let specs = read_op_specs(&json!({"ops": [
            "action.media",
            {"op": "open_url", "needs_confirm": true, "args_schema": {"required": ["url"]}},
            {"op": "broken", "args_schema": {"type": 5}},
            {"no_op": true},
            7,
        ]}));
        let names: Vec<&str> = specs.iter().map(|s| s.op.as_str()).collect();
        assert_eq!(names, ["media", "open_url", "broken"]);
        assert!(specs[1].needs_confirm && specs[1].side_effect);
        let e = specs[1].validate(&json!({})).unwrap_err();
        assert_eq!(
            (e.code, e.data.unwrap()["field"].clone()),
            (-32602, json!("url"))
        );
        assert_eq!(specs[2].validate(&json!({})).unwrap_err().code, -32000);
        assert!(specs[0].validate(&json!({"anything": 1})).is_ok());
        assert!(read_op_specs(&json!("nonsense")).is_empty());
    }

    #[test]
    fn paths_are_used_as_given() {
        assert_eq!(
            resolve_program("/bin/true", None),
            PathBuf::from("/bin/true")
        );
        assert_eq!(
            resolve_program("definitely-not-here", Some(Path::new("/nonexistent"))),
            PathBuf::from("definitely-not-here")
        );
    }
}
