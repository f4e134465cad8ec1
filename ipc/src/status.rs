//! Snapshots: the runner's status and its parts, as `runner.status`, `utter status --json`
//! and the D-Bus properties give them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A full status snapshot: `{version, state, config, plugins, ...}`.
///
/// `#[non_exhaustive]`: a newer runner adds fields (old clients ignore them, new clients
/// read a missing one as its default), so outside this crate a `Status` is built with
/// [`Status::new`] and the optional parts are then set field by field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Status {
    /// Runner version.
    pub version: String,
    /// Overall state.
    pub state: ServiceState,
    /// Where the config came from.
    pub config: String,
    /// Every plugin.
    pub plugins: Vec<PluginReport>,
    /// Push-to-talk: held or not, the limits, each trigger's state.
    pub ptt: PttState,
    /// The voice loop: its state, the stt plugin and the microphone.
    pub voice: VoiceStatus,
    /// The desktop context: which plugin serves it, which compositor its last good snapshot
    /// came from, and why the last read failed if it did; `null` before the first read or
    /// without a context plugin.
    #[serde(default)]
    pub context: Option<ContextStatus>,
    /// The decision head: its tiers and the chooser that picks among near candidates.
    #[serde(default)]
    pub decide: DecideStatus,
    /// What "undo that" would reverse now: the utterance of the journal's newest command not
    /// undone; `null` when there is none.
    #[serde(default)]
    pub undoable: Option<String>,
    /// Whether the voice loop dictates: types what it hears until "stop dictation".
    #[serde(default)]
    pub dictation: bool,
}

impl Status {
    /// A snapshot of the required parts; `context`, `undoable` are `None`, `decide` its
    /// default and `dictation` false until set.
    pub fn new(
        version: String,
        state: ServiceState,
        config: String,
        plugins: Vec<PluginReport>,
        ptt: PttState,
        voice: VoiceStatus,
    ) -> Status {
        Status {
            version,
            state,
            config,
            plugins,
            ptt,
            voice,
            context: None,
            decide: DecideStatus::default(),
            undoable: None,
            dictation: false,
        }
    }
}

/// The decision head (`runner.status`'s `decide`): the `[decide]` tiers and the chooser
/// plugin with its model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DecideStatus {
    /// Act at or above this confidence.
    pub act: f64,
    /// Ask at or above this confidence.
    pub ask: f64,
    /// Whether near candidates go to a chooser (`[decide] chooser`).
    pub chooser_enabled: bool,
    /// The chooser's least probability that is asked about.
    pub chooser_min: f64,
    /// Whether the planner fallback is on (`[decide] planner`).
    #[serde(default)]
    pub planner: bool,
    /// The chooser plugin (`[llm] plugin`, else the first of kind `llm`); `null` without one.
    pub chooser: Option<String>,
    /// Its status word; `null` without a chooser.
    pub chooser_status: Option<PluginStatus>,
    /// Its health detail: the model it runs, or why it has none.
    pub chooser_health: String,
    /// The model file as configured (`[llm] model`); `null` when it is not set.
    pub model: Option<String>,
    /// The server as configured (`[llm] endpoint`); `null` when it is not set.
    #[serde(default)]
    pub endpoint: Option<String>,
}

/// Where the desktop context comes from (`runner.status`'s `context`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextStatus {
    /// The context plugin's id.
    pub plugin: String,
    /// The compositor's name (`"niri"`, `"sway"`), as the plugin reported it.
    pub compositor: Option<String>,
    /// The compositor's version string.
    pub version: Option<String>,
    /// The compositor's IPC socket.
    pub socket: Option<String>,
    /// Why the last read failed (e.g. no compositor in the plugin's environment); `None`
    /// when it succeeded. The other fields then describe the last good read, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The runner's overall state, as D-Bus `State` and `runner.status` show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServiceState {
    /// Plugins are being started.
    Starting,
    /// Every plugin is running.
    Ready,
    /// Some plugin is not running (failed, crash-looping, restarting).
    Degraded,
    /// Shutting down.
    Stopping,
}

impl ServiceState {
    /// The wire word.
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceState::Starting => "starting",
            ServiceState::Ready => "ready",
            ServiceState::Degraded => "degraded",
            ServiceState::Stopping => "stopping",
        }
    }
}

/// The state of a plugin slot, as shown by `utter plugins` and `runner.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PluginStatus {
    /// Spawning or handshaking.
    Starting,
    /// Handshake done, health `ok`.
    Ok,
    /// Handshake done, health `degraded` (still used).
    Degraded,
    /// Failed and not retried until the config changes.
    Error,
    /// Crashed repeatedly; retried at the longest delay.
    CrashLoop,
    /// Stopped by the runner.
    Stopped,
}

impl PluginStatus {
    /// Whether calls are routed to it.
    pub fn is_running(self) -> bool {
        matches!(self, PluginStatus::Ok | PluginStatus::Degraded)
    }

    /// The wire word (`"ok"`, `"crash-loop"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            PluginStatus::Starting => "starting",
            PluginStatus::Ok => "ok",
            PluginStatus::Degraded => "degraded",
            PluginStatus::Error => "error",
            PluginStatus::CrashLoop => "crash-loop",
            PluginStatus::Stopped => "stopped",
        }
    }
}

/// A plugin as reported to clients.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginReport {
    /// Plugin id.
    pub id: String,
    /// Kind from the config.
    pub kind: String,
    /// Current (or last) epoch.
    pub epoch: u64,
    /// Status word.
    pub status: PluginStatus,
    /// Capabilities offered (config ∪ hello), sorted.
    pub provides: Vec<String>,
    /// Capabilities needed (config ∪ hello), sorted.
    pub requires: Vec<String>,
    /// Permissions (config ∪ hello), sorted.
    pub permissions: Vec<String>,
    /// Methods from `plugin.describe`.
    pub methods: Vec<String>,
    /// Health detail.
    pub health: String,
    /// How many times it was respawned.
    pub restarts: u64,
    /// Process id of the running instance.
    pub pid: Option<u32>,
    /// The last failure, if any.
    pub last_error: Option<String>,
    /// Warnings from the handshake (unknown capabilities, version drift).
    pub warnings: Vec<String>,
    /// What confines the process, exactly as the current (or last) instance was started;
    /// absent before the first start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxReport>,
    /// What the last successful handshake declared (`protocol.hello`); absent before one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared: Option<DeclaredAxes>,
}

/// The axes a plugin declared in its hello (PROTOCOL.md §3), which the install lockfile
/// pins and `utter doctor` compares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeclaredAxes {
    /// The plugin's own version (`plugin.version`).
    pub version: String,
    /// Its protocol version.
    pub protocol: String,
    /// Its abi.
    pub abi: u64,
}

/// What confines a plugin process (`[security] enforce`), built from the same plan as the
/// command line it was started with, so it says what is in force and nothing more.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxReport {
    /// `bwrap` (bubblewrap), `landlock`, or `none`.
    pub mechanism: String,
    /// Whether a sandbox is in force.
    pub enforced: bool,
    /// Why there is none (`enforce` off, bwrap missing, `sandbox = false`), when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// `denied` (bwrap: a network namespace of its own, no network, not even the host's
    /// loopback), `tcp-denied` (Landlock: TCP connect and bind denied, UDP and unix sockets
    /// not), `allowed` (the `network` permission) or `unrestricted` (no sandbox).
    pub network: String,
    /// What it may read (read-only binds, absolute paths): system directories, its program,
    /// its `read_paths`. Empty without a sandbox (everything the user may read).
    pub read_paths: Vec<String>,
    /// What it may write: its `write_paths`, its socket directory and private `/tmp`.
    pub write_paths: Vec<String>,
    /// Session sockets passed in (the bus, Wayland, the compositor, PipeWire...).
    pub sockets: Vec<String>,
    /// Each permission of the plugin (config ∪ hello): enforced or advisory, and why.
    pub permissions: Vec<PermissionReport>,
    /// What this mechanism leaves unconfined, in words (Landlock: UDP and unix sockets, a
    /// shared `/tmp`, no namespaces of its own). Empty (and absent from JSON) for bwrap and
    /// for no sandbox, whose `why` says it all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<String>,
}

/// One permission in a [`SandboxReport`] (and `runner.validate_plugin`'s `permissions`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionReport {
    /// The permission name (`network`, `filesystem.read`, `microphone`, ...).
    pub name: String,
    /// Whether the sandbox decides it: granted only when the `[[plugin]]` entry grants it.
    pub enforced: bool,
    /// The mechanism enforcing it, when enforced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mechanism: Option<String>,
    /// What it means here: what is granted or denied, or why it is only advisory.
    pub detail: String,
}

/// What [`Supervisor::reload`] did, by plugin id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadReport {
    /// Started: new in the config.
    pub added: Vec<String>,
    /// Stopped: gone from the config (or disabled).
    pub removed: Vec<String>,
    /// Restarted: their `[[plugin]]` entry changed.
    pub restarted: Vec<String>,
    /// Left running with the same epoch.
    pub unchanged: Vec<String>,
}

/// One trigger's state as status shows it, e.g. `{trigger: "portal", state: "bound",
/// detail: "F13"}` or `{trigger: "evdev", state: "no-permission", detail: "add your user to
/// group input …"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TriggerStatus {
    /// `portal`, `evdev`, `keyboard-monitor`, `socket` or `dbus`.
    pub trigger: String,
    /// A short word: `disabled`, `starting`, `bound`, `unavailable`, `error`, `listening`,
    /// `no-devices`, `no-permission`, `ready`.
    pub state: String,
    /// A sentence for a person (what was bound, which devices, what to do).
    pub detail: String,
}

/// A snapshot of push-to-talk for status (`runner.status`'s `ptt`, D-Bus
/// `PushToTalkStatus`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PttState {
    /// Whether it is held now.
    pub listening: bool,
    /// Who holds it.
    pub source: Option<Source>,
    /// For how long, in ms.
    pub held_ms: Option<u64>,
    /// Held to dictate (`[ptt] dictation_key`): what is heard is typed.
    #[serde(default)]
    pub dictation: bool,
    /// `[ptt] min_hold_ms` in force.
    pub min_hold_ms: u64,
    /// `[ptt] max_hold_ms` in force (0: no stuck-key timeout).
    pub max_hold_ms: u64,
    /// Every trigger, by name.
    pub triggers: Vec<TriggerStatus>,
}

/// What `utter status` shows about the voice loop (`status.voice`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VoiceStatus {
    /// `off` (no stt plugin configured), `starting`, `ready`, `listening`, `transcribing`,
    /// `unavailable` (the microphone could not be opened; see `detail`).
    pub state: String,
    /// A sentence for people: why it is off or unavailable, or what it uses.
    pub detail: String,
    /// The stt plugin's id, when one is configured.
    pub stt_plugin: Option<String>,
    /// The model directory passed to it (`[stt] model`), when set.
    pub model: Option<String>,
    /// The capture plugin's id, when one is configured.
    pub audio_plugin: Option<String>,
    /// The microphone stream as the capture plugin last reported it (`audio.status`: source,
    /// state, rate, channels, frames), when it has been opened.
    pub microphone: Option<Value>,
    /// Why the stt plugin could not load `model`, when it could not.
    pub model_error: Option<String>,
    /// When `[stt] model` names a model by its name and that is not installed, what to do
    /// about it ("speech model tiny.en is not installed: run `utter models pull tiny.en`");
    /// the stt and capture plugins then do not run. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_model: Option<String>,
    /// How many push-to-talk presses the voice loop has handled since it started: a press
    /// counts once the microphone was opened for it (`state` then `listening`, or later) or
    /// could not be (`unavailable`, with `detail`). A client that pressed waits for this to
    /// grow, then reads the outcome in `state`.
    #[serde(default)]
    pub presses: u64,
}

/// Who pressed or released push-to-talk. Serialised lowercase: `portal`, `socket`, `dbus`,
/// `evdev`, `keyboard-monitor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// The xdg-desktop-portal `GlobalShortcuts` portal (`Activated`/`Deactivated`).
    Portal,
    /// A client of the runner's socket (`utter ptt …`, `runner.ptt`).
    Socket,
    /// The D-Bus methods `PushToTalk(b)` / `TogglePushToTalk()`.
    Dbus,
    /// A keyboard read through evdev.
    Evdev,
    /// The compositor's `org.freedesktop.a11y.KeyboardMonitor` (`KeyEvent` of a grabbed
    /// keysym; niri 25.08+). Serialised `keyboard-monitor`.
    #[serde(rename = "keyboard-monitor")]
    KeyboardMonitor,
}

impl Source {
    /// The wire word.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Portal => "portal",
            Source::Socket => "socket",
            Source::Dbus => "dbus",
            Source::Evdev => "evdev",
            Source::KeyboardMonitor => "keyboard-monitor",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_status_with_fields_this_version_does_not_know_still_reads() {
        let wire = json!({
            "version": "9.9.9", "state": "degraded", "config": "<embedded>", "future": [1, 2],
            "plugins": [{"id": "rules", "kind": "router", "epoch": 2, "status": "crash-loop",
                "provides": [], "requires": [], "permissions": [], "methods": [], "health": "",
                "restarts": 5, "pid": null, "last_error": "boom", "warnings": [], "cgroup": "x"}],
            "ptt": {"listening": false, "source": null, "held_ms": null, "min_hold_ms": 150,
                "max_hold_ms": 30000, "triggers": []},
            "voice": {"state": "off", "detail": "", "stt_plugin": null, "model": null,
                "audio_plugin": null, "microphone": null, "model_error": null},
        });
        let status: Status = serde_json::from_value(wire).unwrap();
        assert_eq!(status.state, ServiceState::Degraded);
        assert_eq!(status.plugins[0].status, PluginStatus::CrashLoop);
        assert!(!status.plugins[0].status.is_running());
        assert_eq!(status.ptt.min_hold_ms, 150);
    }
}
