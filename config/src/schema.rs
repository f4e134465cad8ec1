//! The sections of the config file as types, with their defaults and the questions the
//! runner asks of a loaded config (which plugins run, which plugin serves a role).

use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use utter_protocol::manifest::Entrypoint;

use crate::diagnostics::ConfigIssue;

/// The embedded default configuration.
pub const DEFAULT_CONFIG: &str = include_str!("../../data/config.default.toml");

/// The name shown for the embedded default in messages.
pub const DEFAULT_CONFIG_ORIGIN: &str = "<embedded data/config.default.toml>";

/// The largest configuration file read, in bytes (4 MiB).
pub const MAX_CONFIG_BYTES: u64 = 4 * 1024 * 1024;

/// The default `[runner] handle_quota`: bytes one scope's handles may hold (64 MiB).
pub const DEFAULT_HANDLE_QUOTA: u64 = 64 * 1024 * 1024;

/// The default `[runner] handle_quota_total`: bytes all scopes' handles may hold together
/// (256 MiB).
pub const DEFAULT_HANDLE_QUOTA_TOTAL: u64 = 256 * 1024 * 1024;

/// The newest `config_version` this runner reads.
pub const CONFIG_VERSION: u32 = 1;

/// How a plugin process is reached.
///
/// Read from a string only (`transport = "stdio"`): anything else is "expected a string",
/// and an unknown word names the ones there are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase", try_from = "String")]
pub enum Transport {
    /// Frames over the child's stdin/stdout.
    Stdio,
    /// The runner listens on a unix socket and the plugin dials in.
    Connect,
    /// The plugin listens on a unix socket and the runner connects.
    Listen,
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Transport::Stdio => "stdio",
            Transport::Connect => "connect",
            Transport::Listen => "listen",
        })
    }
}

impl TryFrom<String> for Transport {
    type Error = String;
    fn try_from(word: String) -> Result<Self, String> {
        match word.as_str() {
            "stdio" => Ok(Transport::Stdio),
            "connect" => Ok(Transport::Connect),
            "listen" => Ok(Transport::Listen),
            _ => Err(format!(
                "unknown transport {word:?}: use \"stdio\", \"connect\" or \"listen\""
            )),
        }
    }
}

/// How a plugin is run. Read from a string only, as [`Transport`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase", try_from = "String")]
pub enum Runtime {
    /// A child process (the only runtime that runs today).
    Subprocess,
    /// Reserved.
    Wasm,
    /// Reserved.
    Native,
}

impl TryFrom<String> for Runtime {
    type Error = String;
    fn try_from(word: String) -> Result<Self, String> {
        match word.as_str() {
            "subprocess" => Ok(Runtime::Subprocess),
            "wasm" => Ok(Runtime::Wasm),
            "native" => Ok(Runtime::Native),
            _ => Err(format!(
                "unknown runtime {word:?}: use \"subprocess\" (\"wasm\" and \"native\" are reserved)"
            )),
        }
    }
}

/// `[runner]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct RunnerSection {
    /// Default timeout of a call to a plugin, in ms (10 000). Also each handshake step.
    pub rpc_timeout_ms: u64,
    /// How long a confirmation may wait, in ms (30 000).
    pub confirm_timeout_ms: u64,
    /// After closing a plugin's stdin, how long to wait for it to exit before SIGTERM, in ms
    /// (2 000).
    pub drain_timeout_ms: u64,
    /// After SIGTERM, how long to wait before SIGKILL, in ms (1 000).
    pub kill_timeout_ms: u64,
    /// Handle lifetime in seconds (300; 1 to 604 800).
    pub handle_ttl: f64,
    /// Handle store root ("" = `$XDG_RUNTIME_DIR/utter/handles`).
    pub handle_root: String,
    /// Bytes of handles one client (its connections together) or plugin may hold (64 MiB;
    /// never more than half of `handle_quota_total`).
    pub handle_quota: u64,
    /// Bytes of handles all scopes together may hold (256 MiB): the store usually lives in
    /// `$XDG_RUNTIME_DIR`, which is memory.
    pub handle_quota_total: u64,
    /// Frames per lossy stream (256).
    pub lossy_queue: u64,
    /// Credits per reliable stream (64).
    pub credit_window: u64,
    /// Client socket path ("" = `$XDG_RUNTIME_DIR/utter/runner.sock`).
    pub socket_path: String,
    /// Client socket transport (`unix`; `tcp` is not supported by this runner).
    pub socket_transport: String,
    /// Largest frame body accepted from a plugin, in bytes (16 MiB).
    pub max_frame_bytes: u64,
    /// Delay before a crashed plugin's first restart, in ms (200); it doubles with each crash
    /// in a row, up to `restart_delay_max_ms`.
    pub restart_delay_ms: u64,
    /// Longest delay between restarts, in ms (30 000): the delay of a crash-looping plugin.
    pub restart_delay_max_ms: u64,
}

impl Default for RunnerSection {
    fn default() -> Self {
        RunnerSection {
            rpc_timeout_ms: 10_000,
            confirm_timeout_ms: 30_000,
            drain_timeout_ms: 2_000,
            kill_timeout_ms: 1_000,
            handle_ttl: 300.0,
            handle_root: String::new(),
            handle_quota: DEFAULT_HANDLE_QUOTA,
            handle_quota_total: DEFAULT_HANDLE_QUOTA_TOTAL,
            lossy_queue: 256,
            credit_window: 64,
            socket_path: String::new(),
            socket_transport: String::new(),
            max_frame_bytes: utter_protocol::frame::DEFAULT_MAX_BODY as u64,
            restart_delay_ms: 200,
            restart_delay_max_ms: 30_000,
        }
    }
}

/// `[socket]`: who may use the client socket, and how long a connection may sit idle.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct SocketSection {
    /// Executables admitted by path or exact file name.
    pub allow_binaries: Vec<String>,
    /// Admit every process of the same user (development only).
    pub allow_same_uid: bool,
    /// Token for `runner.auth`.
    pub token: String,
    /// A connection that sends nothing for this long, and has no subscription, stream or
    /// request running, is closed, in ms (600 000: ten minutes).
    pub idle_timeout_ms: u64,
    /// A frame whose first bytes arrived must be complete within this long, in ms (30 000);
    /// else the connection is closed (a peer trickling bytes holds a slot otherwise).
    pub frame_timeout_ms: u64,
}

impl Default for SocketSection {
    fn default() -> Self {
        SocketSection {
            allow_binaries: Vec::new(),
            allow_same_uid: false,
            token: String::new(),
            idle_timeout_ms: 600_000,
            frame_timeout_ms: 30_000,
        }
    }
}

/// `[security]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct SecuritySection {
    /// Sandbox plugin processes.
    pub enforce: bool,
    /// Which sandbox: `auto` (bwrap when it works, else Landlock), `bwrap` or `landlock`.
    pub sandbox: String,
}

impl Default for SecuritySection {
    fn default() -> Self {
        SecuritySection {
            enforce: false,
            sandbox: "auto".into(),
        }
    }
}

/// `[policy]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(default)]
pub struct PolicySection {
    /// Ops to enable (`terminal`, `input` are off by default); `action.` prefixes are ignored.
    pub enabled_ops: Vec<String>,
    /// Ops to disable; wins over `enabled_ops`.
    pub disabled_ops: Vec<String>,
}

/// `[plugins]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(default)]
pub struct PluginsSection {
    /// Plugin ids forced off.
    pub disabled: Vec<String>,
}

fn default_kind() -> String {
    "action".to_owned()
}
fn default_runtime() -> Runtime {
    Runtime::Subprocess
}
fn default_transport() -> Transport {
    Transport::Stdio
}
fn default_true() -> bool {
    true
}

/// `[ptt]`: push-to-talk (`utter_core::ptt`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct PttSection {
    /// A hold released sooner than this is cancelled as `too-short`, in ms (150).
    pub min_hold_ms: u64,
    /// Stuck-key timeout: a hold longer than this is released automatically as `stuck`, in
    /// ms (30 000; 0 disables it).
    pub max_hold_ms: u64,
    /// Bind push-to-talk through the xdg-desktop-portal GlobalShortcuts portal (true).
    pub portal: bool,
    /// The preferred trigger asked of the portal, in the XDG shortcuts format
    /// (`"F13"`, `"CTRL+SHIFT+space"`); the desktop may let the user choose another.
    pub shortcut: String,
    /// Read the key from keyboards under /dev/input (false; needs group `input`).
    pub evdev: bool,
    /// The evdev key name (`KEY_F13`, `KEY_RIGHTCTRL`, ... from linux/input-event-codes.h).
    pub evdev_key: String,
    /// Hold-to-talk through the compositor's `org.freedesktop.a11y.KeyboardMonitor` (niri
    /// 25.08+ run as a session) when that service is on the session bus (true).
    pub keyboard_monitor: bool,
    /// The key grabbed through the keyboard monitor: an XKB keysym name (`F13`, `Pause`,
    /// `Scroll_Lock`, ...; see [`keysym`]) or a keysym number (`0xffca`).
    pub keyboard_monitor_key: String,
    /// A second key, held to dictate: what is heard is typed into the focused field, as in
    /// dictation mode, for that hold only. An XKB keysym name (`F14`, `Pause`, ...), grabbed
    /// through the keyboard monitor and asked of the portal beside `shortcut`; `""` (the
    /// default) binds none. evdev reads only the push-to-talk key; a compositor binding can
    /// run `utter ptt press --dictation`.
    pub dictation_key: String,
}

impl PttSection {
    /// Whether `other` starts the same triggers (a reload restarts them when it does not;
    /// the hold limits change in place).
    pub fn same_triggers(&self, other: &PttSection) -> bool {
        (
            self.portal,
            &self.shortcut,
            self.evdev,
            &self.evdev_key,
            self.keyboard_monitor,
            &self.keyboard_monitor_key,
            &self.dictation_key,
        ) == (
            other.portal,
            &other.shortcut,
            other.evdev,
            &other.evdev_key,
            other.keyboard_monitor,
            &other.keyboard_monitor_key,
            &other.dictation_key,
        )
    }
}

impl Default for PttSection {
    fn default() -> Self {
        PttSection {
            min_hold_ms: 150,
            max_hold_ms: 30_000,
            portal: true,
            shortcut: "F13".to_owned(),
            evdev: false,
            evdev_key: "KEY_F13".to_owned(),
            keyboard_monitor: true,
            keyboard_monitor_key: "F13".to_owned(),
            dictation_key: String::new(),
        }
    }
}

/// `[decide]`: the decision head's tiers for a name the router matched without a rule (a
/// misheard "gate hub" for GitHub): at or above `act` the step runs, at or above `ask` the
/// person is asked "did you mean GitHub?" first, below it nothing runs and the plan says the
/// closest names. Confidences run from 0 to 1. Below `act`, when a chooser runs (a plugin
/// providing `llm.choose`, see `[llm]`) and `chooser` is on, the router's near candidates go
/// to it: its pick is asked about ("did you mean …?"), and when it fails, or its probability
/// is below `chooser_min`, the matcher's own tier applies.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, serde::Serialize)]
#[serde(default)]
pub struct DecideSection {
    /// Act at or above this confidence (0.88).
    pub act: f64,
    /// Ask at or above this confidence (0.72); at most `act`.
    pub ask: f64,
    /// Offer near candidates to a running chooser (true).
    pub chooser: bool,
    /// The chooser's least probability that is asked about (0.5); below it the matcher's
    /// tier applies.
    pub chooser_min: f64,
    /// When no rule matches (or nothing is called what was named) and no name is near, ask
    /// the chooser plugin's planner (`llm.plan`) for steps, each confirmed before it runs
    /// (false).
    pub planner: bool,
}

impl Default for DecideSection {
    fn default() -> Self {
        DecideSection {
            act: 0.88,
            ask: 0.72,
            chooser: true,
            chooser_min: 0.5,
            planner: false,
        }
    }
}

/// `[llm]`: the language model of the chooser plugin (kind `llm`, `utter-llm`), handed to it
/// in its environment ([`Config::apply_llm`]). Set `model` or `endpoint`, not both; with
/// neither, the plugin uses its own setting (`--model`, ...). Nothing is downloaded.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct LlmSection {
    /// The id of the `[[plugin]]` that chooses; empty = the first plugin of kind `llm`.
    pub plugin: String,
    /// A GGUF model file run in process (the plugin's `llama` feature); a leading `~/` is the
    /// home directory.
    pub model: String,
    /// An OpenAI-compatible server's base URL (`http://127.0.0.1:8080`).
    pub endpoint: String,
    /// The server's API that scores: `chat` (default) or `completions`.
    pub api: String,
    /// The server's model name; empty = its default.
    pub api_model: String,
    /// How long one request to the server may take, in milliseconds (100–600 000).
    pub timeout_ms: u64,
}

impl Default for LlmSection {
    fn default() -> Self {
        LlmSection {
            plugin: String::new(),
            model: String::new(),
            endpoint: String::new(),
            api: "chat".into(),
            api_model: String::new(),
            timeout_ms: 10_000,
        }
    }
}

/// Why `endpoint` (`[llm] endpoint`, trimmed) is not a server's base address; `None` when it
/// is one or is empty.
pub(crate) fn endpoint_problem(endpoint: &str) -> Option<String> {
    if endpoint.is_empty() {
        return None;
    }
    if endpoint.starts_with("https://") {
        return Some(format!(
            "{endpoint:?}: https is not supported (the chooser talks plain HTTP to a server on \
             this machine); use \"http://127.0.0.1:PORT\""
        ));
    }
    let Some(rest) = endpoint.strip_prefix("http://") else {
        return Some(format!(
            "{endpoint:?} is not an http:// URL; name the server's address, e.g. \
             \"http://127.0.0.1:8080\" (llama-server) or \"http://127.0.0.1:11434\" (ollama)"
        ));
    };
    let path = rest
        .split_once('/')
        .map_or("", |(_, p)| p)
        .trim_end_matches('/');
    if !(path.is_empty() || path == "v1") {
        return Some(format!(
            "{endpoint:?} has the path /{path}; name the server's base address (http://HOST:PORT, \
             or with /v1), not an API path"
        ));
    }
    None
}

/// `path` with a leading `~/` replaced by the home directory (`$HOME`, else the password
/// database's entry); unchanged when there is none.
pub(crate) fn home_path(path: &str) -> String {
    let path = path.trim();
    match (
        path.strip_prefix("~/"),
        crate::paths::BaseDirs::from_env().home,
    ) {
        (Some(rest), Some(home)) => std::path::Path::new(&home)
            .join(rest)
            .to_string_lossy()
            .into_owned(),
        _ => path.to_owned(),
    }
}

/// One `[[plugin]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PluginEntry {
    /// Unique id.
    pub id: String,
    /// Plugin kind (informative; routing uses capabilities and methods).
    #[serde(default = "default_kind")]
    pub kind: String,
    /// Only `subprocess` runs.
    #[serde(default = "default_runtime")]
    pub runtime: Runtime,
    /// `stdio` (default), `connect` (the plugin dials the runner's socket) or `listen` (the
    /// runner dials the plugin's socket); PROTOCOL.md §1.1.
    #[serde(default = "default_transport")]
    pub transport: Transport,
    /// argv; a bare program name is looked up next to the `utter` binary first, then on PATH.
    #[serde(alias = "argv")]
    pub entrypoint: Entrypoint,
    /// Permissions (merged with the plugin's hello).
    #[serde(default)]
    pub permissions: Vec<String>,
    /// Capabilities offered (merged with the plugin's hello).
    #[serde(default)]
    pub provides: Vec<String>,
    /// Capabilities needed (merged with the plugin's hello).
    #[serde(default)]
    pub requires: Vec<String>,
    /// `false` keeps the entry but does not run it.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Working directory ("" = the runner's).
    #[serde(default)]
    pub cwd: String,
    /// Extra environment for the plugin.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Sandbox read-only paths.
    #[serde(default)]
    pub read_paths: Vec<String>,
    /// Sandbox writable paths.
    #[serde(default)]
    pub write_paths: Vec<String>,
    /// `false` runs this plugin unconfined even with `[security] enforce` (reported so):
    /// for a plugin that starts applications, which would inherit its sandbox.
    #[serde(default = "default_true")]
    pub sandbox: bool,
}

/// `[stt]`: speech to text for the voice loop (see `utter_core::runner::voice`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct SttSection {
    /// The id of the `[[plugin]]` that transcribes; empty = the first plugin of kind `stt`.
    /// Without any stt plugin the voice loop is off (push-to-talk still changes state).
    pub plugin: String,
    /// The speech model: the name of one `utter models pull` installed (`"tiny.en"`: a name
    /// without `/` is the directory `$XDG_DATA_HOME/utter/models/<name>`, see
    /// [`crate::models`]), or a faster-whisper (CTranslate2) model directory (a leading `~/`
    /// is the home directory; a relative directory is written with a `/`, e.g. `./m`). The
    /// directory is passed to the plugin's `stt.load` and `stt.transcribe`. Empty = the
    /// plugin's own setting (e.g. `UTTER_STT_MODEL`). The runner never downloads a model.
    pub model: String,
    /// The spoken language (ISO 639-1, e.g. `"en"`); empty = let the model detect it.
    pub language: String,
    /// How long one transcription may take, in milliseconds (1 000–600 000).
    pub timeout_ms: u64,
    /// The encoder window: `"fit"` (the audio plus 1 s, a fraction of the cost for a short
    /// command) or `"full"` (always 30 s, as Whisper was trained). Sent as `stt.transcribe`'s
    /// `window`.
    pub window: String,
    /// Beam width (1–10; 1 is greedy search).
    pub beam_size: u32,
    /// Hypotheses asked for (1–`beam_size`); with more than one, the voice loop takes the
    /// best one that the router can plan.
    pub hypotheses: u32,
    /// Tell the recogniser the router's names (`router.vocabulary`: sites, applications,
    /// players) as its prompt, fetched while the key is held.
    pub vocabulary: bool,
    /// Weigh the router's candidates against the audio (`router.candidates`, then the stt
    /// plugin's `stt.score`): a phrase the router acts on that sounds like the transcript
    /// ("pause" for "Prize.", "go to GitHub" for "Go to G-Sub.") replaces it when the audio
    /// makes it about as likely (see `utter_core::runner::voice`).
    pub rescore: bool,
    /// A transcript whose `no_speech_prob` is above this (0–1) and whose score is below
    /// -1 (faster-whisper's rule) is dropped as `no-speech`.
    pub no_speech_threshold: f64,
    /// While the key is held, decode the audio so far every this many milliseconds and
    /// publish what was heard as a `voice_partial` event (shown by `utter listen`, the
    /// settings app and the bar widget); 0 = off, else 300–10 000. The first comes this long
    /// after the press, so a short command (most are under a second) costs nothing; a
    /// decode still running at release delays the final one by up to its length (~150 ms
    /// with tiny.en on two cores).
    pub partial_ms: u64,
}

impl Default for SttSection {
    fn default() -> Self {
        SttSection {
            plugin: String::new(),
            model: String::new(),
            language: "en".into(),
            timeout_ms: 60_000,
            window: "fit".into(),
            beam_size: 5,
            hypotheses: 3,
            vocabulary: true,
            rescore: true,
            no_speech_threshold: 0.6,
            partial_ms: 1_000,
        }
    }
}

impl SttSection {
    /// The directory [`model`](Self::model) names: a model's name
    /// ([`crate::models::is_model_name`], e.g. `"tiny.en"`) is `<models_dir>/<name>`, a path
    /// is itself with a leading `~/` replaced by `$HOME/`; `None` when empty.
    pub fn model_path(&self) -> Option<String> {
        self.model_path_in(&crate::paths::BaseDirs::from_env())
    }

    /// [`model_path`](Self::model_path) with the base directories `dirs`.
    pub fn model_path_in(&self, dirs: &crate::paths::BaseDirs) -> Option<String> {
        let model = self.model.trim();
        if model.is_empty() {
            return None;
        }
        if let (Some(name), Some(models)) = (self.model_name(), dirs.models_dir()) {
            return Some(models.join(name).to_string_lossy().into_owned());
        }
        Some(home_path(model))
    }

    /// [`model`](Self::model) when it is a model's name rather than a path.
    pub fn model_name(&self) -> Option<&str> {
        Some(self.model.trim()).filter(|m| crate::models::is_model_name(m))
    }

    /// Why the model [`model`](Self::model) names cannot be used, when it names one by its
    /// name and that is not (completely) installed, e.g. "speech model tiny.en is not
    /// installed: run `utter models pull tiny.en`"; `None` for a path (the plugin says what is
    /// wrong with it) or an installed model. Reads the catalog of
    /// [`crate::models::Catalog::from_env`] and looks at the files' sizes (no hashing).
    pub fn missing_model(&self) -> Option<String> {
        let catalog = crate::models::Catalog::from_env()
            .unwrap_or_else(|_| crate::models::Catalog::embedded());
        self.missing_model_in(&crate::paths::BaseDirs::from_env(), &catalog)
    }

    /// [`missing_model`](Self::missing_model) with the base directories `dirs` and `catalog`.
    pub fn missing_model_in(
        &self,
        dirs: &crate::paths::BaseDirs,
        catalog: &crate::models::Catalog,
    ) -> Option<String> {
        use crate::models::InstallState;
        let name = self.model_name()?;
        let Some(models) = dirs.models_dir() else {
            return Some(format!(
                "speech model {name} cannot be found: neither XDG_DATA_HOME nor HOME is an absolute path, so there is no models directory"
            ));
        };
        let dir = models.join(name);
        match catalog.get(name).map(|m| m.state(&dir)) {
            Some(InstallState::Installed) => None,
            Some(InstallState::NotInstalled) => Some(format!(
                "speech model {name} is not installed: run `utter models pull {name}`"
            )),
            Some(InstallState::Incomplete { missing }) => Some(format!(
                "speech model {name} is incomplete (missing {}): run `utter models pull {name}`",
                missing.join(", ")
            )),
            None if dir.is_dir() => None,
            None => Some(format!(
                "speech model {name} is not installed in {} and the catalog has no model of that name (`utter models list` shows them)",
                models.display()
            )),
        }
    }
}

/// `[models]`: where `utter models pull` downloads speech models from.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ModelsSection {
    /// A mirror: an `http://` or `https://` base address that holds the catalog's file names
    /// (a file's URL is this followed by its name), or a local directory of them as
    /// `file:///DIR/`, used instead of each model's own source.
    /// Empty = the model's own source. `utter models pull --source URL` and
    /// `$UTTER_MODELS_SOURCE` come before it.
    pub source: String,
}

/// `[tts]`: spoken feedback (see `utter_core::runner::voice`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct TtsSection {
    /// Speak short feedback: what is waiting for confirmation, and why a spoken command failed.
    pub enabled: bool,
    /// The id of the `[[plugin]]` that speaks; empty = the first plugin of kind `tts`.
    pub plugin: String,
}

/// `[audio]`: the microphone, as the capture plugin is configured with it (`audio.configure`,
/// see `utter_core::runner::voice`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct AudioSection {
    /// The capture plugin's id; empty = the first `[[plugin]]` of kind `audio`.
    pub plugin: String,
    /// The PipeWire `node.name` of the source to capture from (`utter audio sources` lists
    /// them); empty = the session's default source. A named source that does not exist is an
    /// error, never replaced by another device.
    pub source: String,
    /// Audio kept from before the key went down, in milliseconds (0–5000).
    pub pre_roll_ms: u32,
    /// The longest utterance kept, in seconds (1–600); later audio is dropped.
    pub max_seconds: u32,
    /// A listen started by a toggle (`utter ptt toggle`, niri's binding) ends by itself after
    /// this much silence following speech, in milliseconds (0–10 000; 0 = only the key
    /// ends it). A held key is never cut short.
    pub end_silence_ms: u32,
    /// `[audio.vad]`: the silence gate.
    pub vad: VadSection,
}

impl Default for AudioSection {
    fn default() -> Self {
        AudioSection {
            plugin: String::new(),
            source: String::new(),
            pre_roll_ms: 300,
            max_seconds: 30,
            end_silence_ms: 600,
            vad: VadSection::default(),
        }
    }
}

impl AudioSection {
    /// The params of `audio.configure` (PROTOCOL.md §8) for this section: how the capture
    /// plugin is told what `[audio]` says.
    pub fn configure_params(&self) -> serde_json::Value {
        serde_json::json!({
            "source": self.source,
            "pre_roll_ms": self.pre_roll_ms,
            "max_seconds": self.max_seconds,
            "end_silence_ms": self.end_silence_ms,
            "vad": {
                "silence_threshold_db": self.vad.silence_threshold_db,
                "trim": self.vad.trim,
                "margin_ms": self.vad.margin_ms,
                "min_speech_ms": self.vad.min_speech_ms,
                "detector": self.vad.detector,
            },
        })
    }
}

/// `[audio.vad]`: the energy gate that finds speech in 10 ms frames (in the capture plugin).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct VadSection {
    /// A frame at or above this RMS level in dBFS is voiced (−120 to 0).
    pub silence_threshold_db: f32,
    /// Cut leading and trailing silence (keeping `margin_ms`).
    pub trim: bool,
    /// Silence kept around the speech when trimming, in milliseconds (0–2000).
    pub margin_ms: u32,
    /// Less voiced time than this, in milliseconds, counts as "no speech" (0–5000).
    pub min_speech_ms: u32,
    /// `"earshot"`: a voice-activity detector also decides (the span kept is where it hears
    /// a voice, and loud noise without one is "no speech"); `"energy"`: the level alone. (The end of speech of `end_silence_ms` always uses the detector.)
    pub detector: String,
}

impl Default for VadSection {
    fn default() -> Self {
        VadSection {
            silence_threshold_db: -50.0,
            trim: true,
            margin_ms: 150,
            min_speech_ms: 100,
            detector: "earshot".into(),
        }
    }
}

/// The whole file.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
pub struct Config {
    /// `1`, or absent for the older format.
    #[serde(default)]
    pub config_version: Option<u32>,
    /// `[runner]`
    #[serde(default)]
    pub runner: RunnerSection,
    /// `[socket]`; `None` when the table is absent (which does **not** open the socket).
    #[serde(default)]
    pub socket: Option<SocketSection>,
    /// `[security]`
    #[serde(default)]
    pub security: SecuritySection,
    /// `[policy]`
    #[serde(default)]
    pub policy: PolicySection,
    /// `[plugins]`
    #[serde(default)]
    pub plugins: PluginsSection,
    /// `[ptt]`
    #[serde(default)]
    pub ptt: PttSection,
    /// `[audio]`
    #[serde(default)]
    pub audio: AudioSection,
    /// `[stt]`
    #[serde(default)]
    pub stt: SttSection,
    /// `[tts]`
    #[serde(default)]
    pub tts: TtsSection,
    /// `[decide]`
    #[serde(default)]
    pub decide: DecideSection,
    /// `[llm]`
    #[serde(default)]
    pub llm: LlmSection,
    /// `[models]`
    #[serde(default)]
    pub models: ModelsSection,
    /// `[[plugin]]`
    #[serde(default, rename = "plugin")]
    pub plugin: Vec<PluginEntry>,
    /// Start the capture plugin even without an stt plugin (set by [`Config::only_plugin`],
    /// never read from a file).
    #[serde(skip)]
    pub start_capture: bool,
    /// The plugins are the built-in default's: the embedded default itself, or a file with
    /// no `plugin` key ([`default_plugins`]); never read from a file.
    #[serde(skip)]
    pub plugins_inherited: bool,
}

/// A config that loaded, with where it came from and the warnings found.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    /// The parsed config.
    pub config: Config,
    /// The file, or [`DEFAULT_CONFIG_ORIGIN`].
    pub origin: String,
    /// Unknown keys, older format, runtimes that will not run, ...
    pub warnings: Vec<ConfigIssue>,
}

/// Plugin kinds that serve only the voice loop; a one-shot command (`utter say`) does not
/// start them.
pub const VOICE_KINDS: &[&str] = &["audio", "stt", "tts"];

impl Config {
    /// The client socket: `explicit` (`--socket`), else `[runner] socket_path`, else
    /// `$UTTER_RUNNER_SOCK`, else `$XDG_RUNTIME_DIR/utter/runner.sock`
    /// ([`crate::paths::BaseDirs::socket`]; reference §9.1). The runner binds it, and every
    /// client (the CLI, the settings app) looks for it, here.
    pub fn client_socket(&self, explicit: Option<&Path>) -> PathBuf {
        if let Some(p) = explicit {
            return p.to_path_buf();
        }
        if !self.runner.socket_path.is_empty() {
            return PathBuf::from(&self.runner.socket_path);
        }
        if let Some(p) = std::env::var_os("UTTER_RUNNER_SOCK").filter(|v| !v.is_empty()) {
            return PathBuf::from(p);
        }
        crate::paths::BaseDirs::from_env().socket()
    }

    /// This config without the plugins of [`VOICE_KINDS`] (they stay listed, disabled), for
    /// a one-shot command that needs a router and action plugins only.
    pub fn without_voice(mut self) -> Config {
        for p in &mut self.plugin {
            if VOICE_KINDS.contains(&p.kind.as_str()) {
                p.enabled = false;
            }
        }
        self
    }

    /// This config with only plugin `id` enabled (e.g. the capture plugin for `utter audio`),
    /// started even without an stt plugin.
    pub fn only_plugin(mut self, id: &str) -> Config {
        for p in &mut self.plugin {
            p.enabled = p.enabled && p.id == id;
        }
        self.start_capture = true;
        self
    }

    /// The plugin a section names for a role (`[stt] plugin`, `[tts] plugin`, `[audio]
    /// plugin`): the entry with id `configured` when that is set, else the first enabled
    /// `[[plugin]]` of `kind` that `[plugins] disabled` does not list.
    pub fn plugin_for(&self, configured: &str, kind: &str) -> Option<&PluginEntry> {
        if !configured.is_empty() {
            return self.plugin.iter().find(|p| p.id == configured);
        }
        self.plugin
            .iter()
            .filter(|p| p.enabled && !self.plugins.disabled.contains(&p.id))
            .find(|p| p.kind == kind)
    }

    /// Hand `[llm]` to the chooser plugin ([`Config::plugin_for`] of `[llm] plugin`, kind
    /// `llm`) in its environment, so every instance of it (a respawn too) loads the model as
    /// it starts: `UTTER_LLM_MODEL` (the GGUF file), or `UTTER_LLM_ENDPOINT` with
    /// `UTTER_LLM_API` and `UTTER_LLM_API_MODEL`. A variable the entry's own `env` sets is
    /// left as it is.
    pub fn apply_llm(&mut self) {
        let llm = self.llm.clone();
        let mut vars: Vec<(&str, String)> = Vec::new();
        if !llm.model.trim().is_empty() {
            vars.push(("UTTER_LLM_MODEL", home_path(&llm.model)));
        } else if !llm.endpoint.trim().is_empty() {
            vars.push(("UTTER_LLM_ENDPOINT", llm.endpoint.trim().to_owned()));
            vars.push(("UTTER_LLM_TIMEOUT_MS", llm.timeout_ms.to_string()));
            vars.push(("UTTER_LLM_API", llm.api.clone()));
            if !llm.api_model.is_empty() {
                vars.push(("UTTER_LLM_API_MODEL", llm.api_model.clone()));
            }
        }
        let Some(id) = self.plugin_for(&llm.plugin, "llm").map(|p| p.id.clone()) else {
            return;
        };
        if let Some(entry) = self.plugin.iter_mut().find(|p| p.id == id) {
            for (k, v) in vars {
                entry.env.entry(k.to_owned()).or_insert(v);
            }
        }
    }

    /// The capture plugin's entry ([`Config::plugin_for`] of `[audio] plugin`, kind `audio`),
    /// whether or not it runs now (see [`Config::active_plugins`]).
    pub fn capture_plugin(&self) -> Option<&PluginEntry> {
        self.plugin_for(&self.audio.plugin, "audio")
    }

    /// Whether a plugin that can plan runs (one of kind `router`, or a `bundle`, which may
    /// serve `router.plan`, other than the built-in compositor and a11y bundles, which do
    /// not): without one every command fails.
    pub fn runs_a_router(&self) -> bool {
        self.active_plugins().any(|p| match p.kind.as_str() {
            "router" => true,
            "bundle" => {
                let argv = p.entrypoint.argv();
                let words: Vec<&str> = argv.iter().map(String::as_str).collect();
                let program = words.first().and_then(|a| a.rsplit('/').next());
                !(words.ends_with(&["plugin", "compositor"])
                    || words.ends_with(&["plugin", "a11y"])
                    || matches!(program, Some("utter-compositor" | "utter-a11y")))
            }
            _ => false,
        })
    }

    /// The plugin entries that will run: enabled and not in `[plugins] disabled`.
    ///
    /// A capture plugin (kind `audio`) serves only the voice loop, so it runs only when a
    /// plugin of kind `stt` does too, or when [`Config::only_plugin`] picked it (`utter
    /// audio`): a daemon without speech to text neither needs the microphone nor waits for a
    /// capture program that was never installed. When `[stt] model` names a model that is
    /// not installed ([`SttSection::missing_model`]), the stt plugins do not run either (nor,
    /// so, the capture plugin): the default config names `tiny.en`, and a machine without it
    /// runs everything else. After `utter models pull`, a reload starts them.
    pub fn active_plugins(&self) -> impl Iterator<Item = &PluginEntry> {
        let enabled = |p: &&PluginEntry| p.enabled && !self.plugins.disabled.contains(&p.id);
        let stt_wanted = self.stt.missing_model().is_none();
        let voice = stt_wanted && self.plugin.iter().filter(enabled).any(|p| p.kind == "stt");
        let capture_wanted = voice || self.start_capture;
        self.plugin
            .iter()
            .filter(enabled)
            .filter(move |p| p.kind != "stt" || stt_wanted)
            .filter(move |p| p.kind != "audio" || capture_wanted)
    }
}
