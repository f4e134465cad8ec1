//! The runner's configuration file (TOML), its validation, and the embedded default.
//!
//! The file is `$XDG_CONFIG_HOME/utter/config.toml` (else `~/.config/utter/config.toml`); when
//! it does not exist the default compiled from `data/config.default.toml` is used. The keys
//! are those of the older runner (`[runner]`, `[socket]`, `[security]`, `[policy]`,
//! `[plugins]`, `[[plugin]]`) plus `config_version = 1`. A file without `config_version` is
//! read as the older format, which has the same keys. Unknown keys are warnings; type errors
//! and bad values are errors that name the file, the line and the key, and say what is allowed.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use utter_protocol::capability::Capability;
use utter_protocol::manifest::Entrypoint;

/// The embedded default configuration.
pub const DEFAULT_CONFIG: &str = include_str!("../../data/config.default.toml");

/// The name shown for the embedded default in messages.
pub const DEFAULT_CONFIG_ORIGIN: &str = "<embedded data/config.default.toml>";

/// The largest configuration file read, in bytes (4 MiB).
pub const MAX_CONFIG_BYTES: u64 = 4 * 1024 * 1024;

/// The newest `config_version` this runner reads.
pub const CONFIG_VERSION: u32 = 1;

/// A problem in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// The file (or [`DEFAULT_CONFIG_ORIGIN`]).
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// Dotted key path, e.g. `plugin[1].transport`, when known.
    pub key: Option<String>,
    /// What is wrong and what is allowed.
    pub message: String,
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        // A quoted key may hold any character: shown escaped, so that a key cannot forge
        // another line or move the cursor.
        if let Some(key) = &self.key {
            write!(f, ": {}", utter_protocol::text::clip(key, 200))?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Errors found while loading; the config is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
pub struct ConfigError {
    /// Every error found (at least one).
    pub errors: Vec<ConfigIssue>,
    /// Warnings found as well (unknown keys, ...), so that one run reports everything.
    pub warnings: Vec<ConfigIssue>,
}

impl ConfigError {
    fn one(issue: ConfigIssue) -> ConfigError {
        ConfigError {
            errors: vec![issue],
            warnings: Vec::new(),
        }
    }
}

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
            handle_quota: crate::handles::DEFAULT_QUOTA,
            handle_quota_total: crate::handles::DEFAULT_TOTAL_QUOTA,
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

/// `[ptt]`: push-to-talk ([`crate::ptt`]).
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
        ) == (
            other.portal,
            &other.shortcut,
            other.evdev,
            &other.evdev_key,
            other.keyboard_monitor,
            &other.keyboard_monitor_key,
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
fn endpoint_problem(endpoint: &str) -> Option<String> {
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
fn home_path(path: &str) -> String {
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

/// `[stt]`: speech to text for the voice loop (see `crate::voice`).
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
    /// makes it about as likely (see `crate::runner::voice::Rescore`).
    pub rescore: bool,
    /// A transcript whose `no_speech_prob` is above this (0–1) and whose score is below
    /// -1 (faster-whisper's rule) is dropped as `no-speech`.
    pub no_speech_threshold: f64,
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

/// `[tts]`: spoken feedback (see `crate::voice`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct TtsSection {
    /// Speak short feedback: what is waiting for confirmation, and why a spoken command failed.
    pub enabled: bool,
    /// The id of the `[[plugin]]` that speaks; empty = the first plugin of kind `tts`.
    pub plugin: String,
}

/// `[audio]`: the microphone, as the capture plugin is configured with it (`audio.configure`,
/// see [`crate::voice`]).
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

/// The user's config path: `$XDG_CONFIG_HOME/utter/config.toml`, else
/// `$HOME/.config/utter/config.toml`.
pub fn user_config_path() -> Option<PathBuf> {
    crate::paths::BaseDirs::from_env().config_file()
}

/// The built-in default config ([`DEFAULT_CONFIG`]) as a TOML table, which every file is
/// layered over ([`layered`]).
fn default_table() -> &'static toml::Table {
    static DEFAULT: std::sync::OnceLock<toml::Table> = std::sync::OnceLock::new();
    DEFAULT.get_or_init(|| DEFAULT_CONFIG.parse().unwrap_or_default())
}

/// `own` layered over `base`: tables merged key by key, at every depth; any other value
/// (a number, a string, an array, the `[[plugin]]` array of tables) is `own`'s where it
/// has one, else `base`'s.
fn layered(base: &toml::Table, own: &toml::Table) -> toml::Table {
    let mut out = base.clone();
    for (key, value) in own {
        let merged = match (out.get(key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => {
                toml::Value::Table(layered(b, o))
            }
            _ => value.clone(),
        };
        out.insert(key.clone(), merged);
    }
    out
}

/// The `[[plugin]]` entries of the built-in default config ([`DEFAULT_CONFIG`]), which a
/// config without a `plugin` key runs.
pub fn default_plugins() -> &'static [PluginEntry] {
    static DEFAULTS: std::sync::OnceLock<Vec<PluginEntry>> = std::sync::OnceLock::new();
    DEFAULTS.get_or_init(|| {
        toml::from_str::<Config>(DEFAULT_CONFIG)
            .map(|c| c.plugin)
            .unwrap_or_default()
    })
}

/// Load `path`, or the user's config, or the embedded default when neither exists.
///
/// # Errors
/// A [`ConfigError`] when the named file cannot be read or is invalid.
pub fn load(path: Option<&Path>) -> Result<LoadedConfig, ConfigError> {
    match chosen_path(path) {
        Some(path) => {
            let origin = path.display().to_string();
            let text = crate::paths::read_regular_file(&path, MAX_CONFIG_BYTES).map_err(|e| {
                let message = match std::fs::read_link(&path) {
                    Ok(target) => format!(
                        "cannot read the file: it is a symbolic link to {}, which cannot be read ({e}); fix or remove the link",
                        target.display()
                    ),
                    Err(_) => format!("cannot read the file: {e}"),
                };
                ConfigError::one(ConfigIssue {
                    file: origin.clone(),
                    line: None,
                    key: None,
                    message,
                })
            })?;
            parse(&text, &origin)
        }
        None => parse(DEFAULT_CONFIG, DEFAULT_CONFIG_ORIGIN),
    }
}

/// A config rewritten to the current `config_version` ([`migrate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migration {
    /// The version the text had (0: the older runner's format, without `config_version`).
    pub from: u32,
    /// The version it has now ([`CONFIG_VERSION`]).
    pub to: u32,
    /// The migrated text: the original with only the changes below, every comment kept.
    pub text: String,
    /// One sentence per change (empty when the text was current already).
    pub changes: Vec<String>,
}

/// The boolean keys of the older runner's format, which it also accepted as strings (any
/// non-empty string counting as true, reference §10): `(table, key)`, `plugin` meaning each
/// `[[plugin]]`.
const OLDER_BOOLEAN_KEYS: &[(&str, &str)] = &[
    ("security", "enforce"),
    ("socket", "allow_same_uid"),
    ("plugin", "enabled"),
];

/// In a version-0 document, the [`OLDER_BOOLEAN_KEYS`] written as strings that say a
/// boolean (`"true"`, `"yes"`, `"on"`, `"1"`; `"false"`, `"no"`, `"off"`, `"0"`, `""`, any
/// case) become that boolean, in place (comments and spacing kept). Returns each change:
/// its key path, the word and the boolean. Other strings are left for the checker to
/// refuse. Used by [`migrate`] (written to the file) and [`parse`] (read so, with a warning),
/// so that what the runner reads from an older file is what migration writes.
fn older_booleans(doc: &mut toml_edit::DocumentMut) -> Vec<(Vec<Seg>, String, bool)> {
    let mut changes = Vec::new();
    let mut fix = |table: &mut toml_edit::Table, path: Vec<Seg>| {
        let Some(Seg::Key(key)) = path.last() else {
            return;
        };
        let Some(item) = table.get_mut(key) else {
            return;
        };
        let Some(value) = item.as_value() else { return };
        let Some(word) = value.as_str() else { return };
        let flag = match word.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "1" => true,
            "false" | "no" | "off" | "0" | "" => false,
            _ => return,
        };
        let word = word.to_owned();
        let decor = value.decor().clone();
        let mut new = toml_edit::Value::from(flag);
        *new.decor_mut() = decor;
        *item = toml_edit::Item::Value(new);
        changes.push((path, word, flag));
    };
    for (table, key) in OLDER_BOOLEAN_KEYS {
        let key_seg = || Seg::Key((*key).to_owned());
        if *table == "plugin" {
            if let Some(plugins) = doc
                .get_mut("plugin")
                .and_then(toml_edit::Item::as_array_of_tables_mut)
            {
                for (i, plugin) in plugins.iter_mut().enumerate() {
                    fix(
                        plugin,
                        vec![Seg::Key("plugin".into()), Seg::Index(i), key_seg()],
                    );
                }
            }
        } else if let Some(t) = doc.get_mut(table).and_then(toml_edit::Item::as_table_mut) {
            fix(t, vec![Seg::Key((*table).to_owned()), key_seg()]);
        }
    }
    changes
}

/// `text` with [`older_booleans`] applied when it is version 0 (no `config_version`) and
/// has any, and a warning for each; `None` when there is nothing to change (or the text is
/// not TOML, which [`parse`] reports itself). Values change in place, so lines stay.
fn read_older_booleans(text: &str, origin: &str) -> Option<(String, Vec<ConfigIssue>)> {
    let mut doc: toml_edit::DocumentMut = text.parse().ok()?;
    if doc.contains_key("config_version") {
        return None;
    }
    let changes = older_booleans(&mut doc);
    if changes.is_empty() {
        return None;
    }
    let notes = changes
        .into_iter()
        .map(|(path, word, flag)| {
            issue_at(
                text,
                origin,
                &path,
                format!(
                    "the string {word:?} is read as the boolean {flag} (the older runner read every non-empty string as true); `utter config migrate` writes it as a boolean"
                ),
            )
        })
        .collect();
    Some((doc.to_string(), notes))
}

/// Rewrite `text` (from `origin`, for messages) to [`CONFIG_VERSION`] with `toml_edit`, so
/// that comments, order and formatting stay as they were. Version 0 (no `config_version`,
/// the older runner's format, same keys) gets `config_version = 1` after its leading
/// comments, and its boolean keys written as strings (`enforce = "true"`) become booleans as
/// written. The result must load ([`parse`]); a current text comes back unchanged.
///
/// # Errors
/// A [`ConfigError`]: the text is not TOML, its version is newer than this runner reads, or
/// the migrated text still has errors (which migration cannot decide for the user).
pub fn migrate(text: &str, origin: &str) -> Result<Migration, ConfigError> {
    // Line ends and a byte-order mark are given back as the file had them.
    let (style, text) = crate::text_style::TextStyle::of(text);
    let at_line = |message: String, offset: Option<usize>| {
        ConfigError::one(ConfigIssue {
            file: origin.to_owned(),
            line: offset.map(|o| line_of(text, o)),
            key: None,
            message,
        })
    };
    let doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        at_line(
            format!("not TOML: {}", e.message()),
            e.span().map(|s| s.start),
        )
    })?;
    let from = match doc.get("config_version") {
        None => 0,
        Some(item) => match item.as_integer().and_then(|v| u32::try_from(v).ok()) {
            Some(v) => v,
            None => {
                return Err(ConfigError::one(ConfigIssue {
                    file: origin.to_owned(),
                    line: None,
                    key: Some("config_version".into()),
                    message: "must be a whole number".into(),
                }));
            }
        },
    };
    if from > CONFIG_VERSION {
        return Err(ConfigError::one(ConfigIssue {
            file: origin.to_owned(),
            line: None,
            key: Some("config_version".into()),
            message: format!(
                "version {from} is newer than this runner reads ({CONFIG_VERSION}); update utter"
            ),
        }));
    }
    let mut changes = Vec::new();
    let mut migrated = text.to_owned();
    // The line after which the version was put (errors are shown at the original lines).
    let mut inserted_after: Option<usize> = None;
    if from == 0 {
        // Strings where the older runner read booleans: as written, not as it read them.
        let mut doc = doc;
        for (path, word, flag) in older_booleans(&mut doc) {
            changes.push(format!(
                "{}: the string {word:?} is now the boolean {flag} (the older runner read every non-empty string as true)",
                path_string(&path)
            ));
        }
        migrated = doc.to_string();
        // The version goes first, after the file's leading comments and blank lines.
        let insert_at = {
            let mut offset = 0;
            for line in migrated.split_inclusive('\n') {
                let t = line.trim();
                if t.is_empty() || t.starts_with('#') {
                    offset += line.len();
                } else {
                    break;
                }
            }
            offset
        };
        // A last comment line without its newline gets one first.
        let newline = if insert_at > 0 && !migrated[..insert_at].ends_with('\n') {
            "\n"
        } else {
            ""
        };
        migrated.insert_str(
            insert_at,
            &format!("{newline}config_version = {CONFIG_VERSION}\n\n"),
        );
        inserted_after = Some(migrated[..insert_at].lines().count());
        changes.insert(
            0,
            format!(
                "added config_version = {CONFIG_VERSION} (the file was in the older runner's format, version 0)"
            ),
        );
    }
    // What migration cannot fix is the user's to decide: nothing is written. Its errors
    // name the lines of the file as it is.
    parse(&migrated, origin).map_err(|mut e| {
        if let Some(after) = inserted_after {
            for issue in e.errors.iter_mut().chain(e.warnings.iter_mut()) {
                if let Some(line) = issue.line.as_mut().filter(|l| **l > after) {
                    *line = line.saturating_sub(2).max(after);
                }
            }
        }
        e
    })?;
    Ok(Migration {
        from,
        to: CONFIG_VERSION,
        text: style.apply(migrated),
        changes,
    })
}

/// A config with some values changed ([`set_values`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edited {
    /// The whole new text.
    pub text: String,
    /// The dotted keys whose value changed, in the order given (a key set to the value it
    /// already had is not listed).
    pub changed: Vec<String>,
    /// What the checker warns about the edited keys (an unknown key is written, and ignored
    /// by the runner, as in any config file).
    pub warnings: Vec<ConfigIssue>,
}

/// The most dotted parts a key given to [`set_values`] may have.
pub const MAX_KEY_PARTS: usize = 8;
/// The longest key, in bytes, [`set_values`] takes.
pub const MAX_KEY_BYTES: usize = 256;

/// Set each dotted key of `edits` (`"ptt.evdev"`, `"audio.vad.trim"`) to its TOML value in
/// the config `text`, keeping comments, order and layout (`toml_edit`): a key that exists
/// keeps its place, its spacing and the comment after it; a missing key is appended to its
/// table, and a missing table is added at the end. The edited text must pass the checks the
/// runner applies when it loads a config ([`parse`]), so a value of the wrong type or out of
/// range is refused here, before anything is written. Used by `utter config set` and the
/// settings app.
///
/// # Errors
/// `text` is not TOML; a key is empty, goes through something that is not a table (such as
/// the `[[plugin]]` array, which is edited by hand) or names a table; or the edited config
/// fails [`parse`]. Each issue names `origin` and, where known, the line.
pub fn set_values(
    text: &str,
    origin: &str,
    edits: &[(String, toml_edit::Value)],
) -> Result<Edited, ConfigError> {
    // Line ends and a byte-order mark are given back as the file had them.
    let (style, text) = crate::text_style::TextStyle::of(text);
    let refuse = |key: &str, message: String| {
        ConfigError::one(ConfigIssue {
            file: origin.to_owned(),
            line: None,
            key: Some(key.to_owned()),
            message,
        })
    };
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        ConfigError::one(ConfigIssue {
            file: origin.to_owned(),
            line: e.span().map(|s| line_of(text, s.start)),
            key: None,
            message: format!("not TOML: {}", e.message()),
        })
    })?;
    let mut changed = Vec::new();
    for (key, value) in edits {
        // No setting is deeper than a few tables; a key of thousands of parts would make as
        // many nested tables (and their check quadratic) for nothing.
        if key.len() > MAX_KEY_BYTES || key.split('.').count() > MAX_KEY_PARTS {
            return Err(refuse(
                &utter_protocol::text::clip(key, 80),
                format!(
                    "is longer than any setting (at most {MAX_KEY_PARTS} parts and {MAX_KEY_BYTES} bytes); `utter config default` lists them"
                ),
            ));
        }
        let parts: Vec<&str> = key.split('.').collect();
        let bare = |p: &&str| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        if !parts.iter().all(bare) {
            return Err(refuse(
                key,
                "is not a dotted key such as ptt.evdev (letters, digits, _ and - between the dots)"
                    .to_owned(),
            ));
        }
        let (name, tables) = parts.split_last().expect("split gives one part at least");
        let mut table = doc.as_table_mut();
        for part in tables {
            let item = table
                .entry(part)
                .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()));
            table = match item {
                toml_edit::Item::Table(t) => t,
                _ => {
                    return Err(refuse(
                        key,
                        format!(
                            "{part} is not a table (a value, an array of tables such as [[plugin]], or an inline table, which are edited by hand)"
                        ),
                    ));
                }
            };
        }
        match table.get_mut(name) {
            Some(toml_edit::Item::Value(old)) => {
                if same_value(old, value) {
                    continue;
                }
                let mut new = value.clone();
                *new.decor_mut() = old.decor().clone();
                *old = new;
            }
            Some(toml_edit::Item::None) | None => {
                table.insert(name, toml_edit::Item::Value(value.clone()));
            }
            Some(_) => {
                return Err(refuse(key, "names a table, not a value".to_owned()));
            }
        }
        changed.push(key.clone());
    }
    let text = doc.to_string();
    let loaded = parse(&text, origin)?;
    // The warnings about what was set (`policy.enabled_ops[0]` for `policy.enabled_ops`).
    let about_edits = |w: &ConfigIssue| {
        w.key.as_deref().is_some_and(|k| {
            // At or under an edited key, or a table (unknown) that holds one.
            let under = |inner: &str, outer: &str| {
                inner
                    .strip_prefix(outer)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(['[', '.']))
            };
            edits.iter().any(|(e, _)| under(k, e) || under(e, k))
        })
    };
    let warnings: Vec<ConfigIssue> = loaded.warnings.into_iter().filter(about_edits).collect();
    // Setting a key the runner does not read would change nothing: refused, not written.
    if let Some(unknown) = warnings
        .iter()
        .find(|w| w.message.starts_with("unknown key"))
    {
        return Err(ConfigError::one(ConfigIssue {
            line: None,
            message: format!(
                "{} (setting it would change nothing)",
                unknown
                    .message
                    .replacen("unknown key; ignored", "is not a key utter reads", 1)
            ),
            ..unknown.clone()
        }));
    }
    Ok(Edited {
        text: style.apply(text),
        changed,
        warnings,
    })
}

/// [`set_values`] on the config file at `path`, written back atomically when `write` is set
/// and something changed. A link is written through to its target, the file keeps its mode,
/// and a file that does not exist yet starts as `config_version = 1` (its directory is
/// created).
///
/// # Errors
/// As [`set_values`] (nothing is written); a file that cannot be read (not a regular file,
/// too large) or written, as an issue of that file.
pub fn set_in_file(
    path: &Path,
    edits: &[(String, toml_edit::Value)],
    write: bool,
) -> Result<Edited, ConfigError> {
    use std::os::unix::fs::PermissionsExt;
    let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    let path = match std::fs::canonicalize(path) {
        Ok(real) => real,
        // A link whose target is missing: writing would replace the link with a file.
        Err(_) if link => {
            return Err(ConfigError::one(ConfigIssue {
                file: path.display().to_string(),
                line: None,
                key: None,
                message: format!(
                    "is a link to {}, which does not exist: create that file, or name another with --config",
                    std::fs::read_link(path)
                        .map(|t| t.display().to_string())
                        .unwrap_or_default()
                ),
            }));
        }
        Err(_) => path.to_path_buf(),
    };
    let origin = path.display().to_string();
    let io = |what: &str, e: std::io::Error| {
        ConfigError::one(ConfigIssue {
            file: origin.clone(),
            line: None,
            key: None,
            message: format!("cannot {what} it: {e}"),
        })
    };
    // One writer at a time: the directory is locked from the read to the rename, so two
    // edits at once both land (each reads what the other wrote).
    let _lock = if write {
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| io("create the directory of", e))?;
        let handle = std::fs::File::open(dir).map_err(|e| io("open the directory of", e))?;
        Some(
            nix::fcntl::Flock::lock(handle, nix::fcntl::FlockArg::LockExclusive)
                .map_err(|(_, e)| io("lock the directory of", e.into()))?,
        )
    } else {
        None
    };
    // A file that does not exist yet starts with nothing but its version: it is layered over
    // the built-in default, so the one value set changes that value only, and the default's
    // plugins (and later versions' defaults) still run.
    let text = match crate::paths::read_regular_file(&path, MAX_CONFIG_BYTES) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => NEW_FILE.to_owned(),
        Err(e) => return Err(io("read", e)),
    };
    let before = parse(&text, &origin).ok();
    let mut edited = set_values(&text, &origin, edits)?;
    // Say when the change leaves a plugin that ran before out.
    if let (Some(before), Ok(after)) = (before, parse(&edited.text, &origin)) {
        let ran: Vec<String> = before
            .config
            .active_plugins()
            .map(|p| p.id.clone())
            .collect();
        let runs: Vec<String> = after
            .config
            .active_plugins()
            .map(|p| p.id.clone())
            .collect();
        let lost: Vec<&String> = ran.iter().filter(|id| !runs.contains(id)).collect();
        if !lost.is_empty() {
            edited.warnings.push(ConfigIssue {
                file: origin.clone(),
                line: None,
                key: None,
                message: format!(
                    "after this change these plugins no longer run: {}",
                    lost.iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
    }
    if write && !edited.changed.is_empty() {
        let mode = std::fs::metadata(&path)
            .map(|m| m.permissions().mode() & 0o7777)
            .unwrap_or(0o600);
        crate::paths::write_atomic(&path, edited.text.as_bytes(), mode)
            .map_err(|e| io("write", e))?;
    }
    Ok(edited)
}

/// What [`set_in_file`] starts a config file that does not exist with.
pub const NEW_FILE: &str = "\
# Utter's configuration. Each value here changes the built-in default's; what is left out
# is the default's (`utter config default` prints it, with a comment for every key). Without
# [[plugin]] entries the default's plugins run; with any, exactly those listed.
config_version = 1
";

/// Whether two TOML values are equal, whatever their spelling (`'a'` and `"a"`, `1_000` and
/// `1000`) and the comments around them.
fn same_value(a: &toml_edit::Value, b: &toml_edit::Value) -> bool {
    use toml_edit::Value as V;
    match (a, b) {
        (V::String(x), V::String(y)) => x.value() == y.value(),
        (V::Integer(x), V::Integer(y)) => x.value() == y.value(),
        (V::Float(x), V::Float(y)) => x.value() == y.value(),
        (V::Boolean(x), V::Boolean(y)) => x.value() == y.value(),
        (V::Array(x), V::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| same_value(p, q))
        }
        (x, y) => {
            let bare = |v: &toml_edit::Value| {
                let mut v = v.clone();
                v.decor_mut().clear();
                v.to_string()
            };
            bare(x) == bare(y)
        }
    }
}

/// The file [`load`] reads: `path`, else the user's config file when there is one (a link
/// there counts as a file there, even when it leads nowhere: its error is reported, never
/// silently replaced by the built-in default); `None` for the built-in default.
fn chosen_path(path: Option<&Path>) -> Option<PathBuf> {
    match path {
        Some(p) => Some(p.to_path_buf()),
        None => user_config_path().filter(|p| p.symlink_metadata().is_ok()),
    }
}

/// What a client can still use of a config that [`load`] refused: the defaults, with the
/// file's `[runner] socket_path` and `[socket] token` when the file is readable TOML and
/// those two are strings. The client commands use it to reach a running service (which keeps
/// the config it loaded) while the file is broken.
pub fn salvage_client_settings(path: Option<&Path>) -> Config {
    let mut config = Config::default();
    let Some(table) = chosen_path(path)
        .and_then(|p| crate::paths::read_regular_file(&p, MAX_CONFIG_BYTES).ok())
        .and_then(|text| text.parse::<toml::Table>().ok())
    else {
        return config;
    };
    if let Some(path) = table
        .get("runner")
        .and_then(|r| r.get("socket_path"))
        .and_then(toml::Value::as_str)
    {
        config.runner.socket_path = path.to_owned();
    }
    if let Some(token) = table
        .get("socket")
        .and_then(|s| s.get("token"))
        .and_then(toml::Value::as_str)
    {
        config.socket = Some(SocketSection {
            token: token.to_owned(),
            ..SocketSection::default()
        });
    }
    config
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
}

fn path_string(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// The byte span of the key (or array element) at `path`, found by walking the parsed
/// document.
fn span_of(text: &str, path: &[Seg]) -> Option<Range<usize>> {
    use toml::de::{DeTable, DeValue};
    let doc = DeTable::parse(text).ok()?;
    let mut table: &DeTable = doc.get_ref();
    let mut value: Option<&toml::Spanned<DeValue>> = None;
    let mut span = None;
    for seg in path {
        match seg {
            Seg::Key(k) => {
                let (key, v) = match value.map(|v| v.get_ref()) {
                    Some(DeValue::Table(t)) => t.get_key_value(k.as_str())?,
                    Some(_) => return None,
                    None => table.get_key_value(k.as_str())?,
                };
                span = Some(key.span());
                value = Some(v);
                if let DeValue::Table(t) = v.get_ref() {
                    table = t;
                }
            }
            Seg::Index(i) => match value.map(|v| v.get_ref()) {
                Some(DeValue::Array(items)) => {
                    let item = items.get(*i)?;
                    span = Some(item.span());
                    value = Some(item);
                }
                _ => return None,
            },
        }
    }
    span
}

fn issue_at(text: &str, origin: &str, path: &[Seg], message: String) -> ConfigIssue {
    ConfigIssue {
        file: origin.to_owned(),
        line: span_of(text, path).map(|s| line_of(text, s.start)),
        key: Some(path_string(path)),
        message,
    }
}

/// The sections (tables of keys), as dotted paths: serde would also fill one from an
/// array, by position (`runner = [30000, 2000]`), which no one means.
const SECTIONS: &[&str] = &[
    "runner",
    "socket",
    "security",
    "policy",
    "plugins",
    "ptt",
    "audio",
    "audio.vad",
    "stt",
    "tts",
    "decide",
    "llm",
    "models",
];

/// The keys a config may have at its top level: [`SECTIONS`] without dots, and the rest.
fn top_level_keys() -> impl Iterator<Item = &'static str> {
    SECTIONS
        .iter()
        .copied()
        .filter(|s| !s.contains('.'))
        .chain(["config_version", "plugin", "start_capture"])
}

/// Refuse a section written as an array, and `[plugin]` written as a single table, with
/// what to write instead (other wrong types are the deserializer's to report).
fn shapes_of_sections(text: &str, origin: &str) -> Result<(), ConfigError> {
    use toml::de::{DeTable, DeValue};
    let Ok(doc) = DeTable::parse(text) else {
        return Ok(());
    };
    let mut errors = Vec::new();
    for section in SECTIONS {
        let path: Vec<Seg> = section.split('.').map(|k| Seg::Key(k.into())).collect();
        // The value at the whole path; a parent that is not a table is its own error.
        let mut table = doc.get_ref();
        let mut value = None;
        for (i, seg) in path.iter().enumerate() {
            let Seg::Key(k) = seg else { unreachable!() };
            value = table.get(k.as_str()).map(|v| v.get_ref());
            match value {
                Some(DeValue::Table(t)) => table = t,
                _ if i + 1 < path.len() => value = None,
                _ => {}
            }
            if value.is_none() {
                break;
            }
        }
        if let Some(DeValue::Array(_)) = value {
            errors.push(issue_at(
                text,
                origin,
                &path,
                format!("must be a table, not an array: write it as [{section}] with its keys on the lines below"),
            ));
        }
    }
    match doc.get_ref().get("plugin").map(|v| v.get_ref()) {
        Some(DeValue::Table(_)) => errors.push(issue_at(
            text,
            origin,
            &[Seg::Key("plugin".into())],
            "must be an array of tables: write each plugin as [[plugin]] (two brackets), not [plugin]".into(),
        )),
        // An entry that is itself an array would be filled by position.
        Some(DeValue::Array(entries)) => {
            for (i, entry) in entries.iter().enumerate() {
                if !matches!(entry.get_ref(), DeValue::Table(_)) {
                    errors.push(issue_at(
                        text,
                        origin,
                        &[Seg::Key("plugin".into()), Seg::Index(i)],
                        "must be a table of keys (id, entrypoint, ...): write each plugin as [[plugin]] with its keys below".into(),
                    ));
                }
            }
        }
        _ => {}
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ConfigError {
            errors,
            warnings: Vec::new(),
        })
    }
}

/// Parse and validate config text; `origin` names it in messages.
///
/// # Errors
/// Every error found, each with file, line and key where known.
pub fn parse(text: &str, origin: &str) -> Result<LoadedConfig, ConfigError> {
    let mut warnings = Vec::new();
    let mut unknown: Vec<String> = Vec::new();
    // An older file's booleans written as strings are read as what they say.
    let older = read_older_booleans(text, origin);
    let text = match &older {
        Some((converted, notes)) => {
            warnings.extend(notes.iter().cloned());
            converted.as_str()
        }
        None => text,
    };
    let deserializer = toml::Deserializer::parse(text).map_err(|e| toml_error(text, origin, &e))?;
    shapes_of_sections(text, origin)?;
    let mut config: Config = serde_ignored::deserialize(deserializer, |path| {
        unknown.push(path.to_string());
    })
    .map_err(|e| wrong_types(text, origin, &e))?;
    // The file is layered over the built-in default: what it leaves out is the default's
    // (a file holding one setting changes that setting only, and runs the built-in
    // plugins); `[[plugin]]` entries, or `plugin = []`, choose the plugins. The file alone
    // was checked above, so errors name its own lines.
    if origin == DEFAULT_CONFIG_ORIGIN {
        config.plugins_inherited = true;
    } else {
        // A file the typed reading took that cannot be layered (an integer past what TOML
        // tables hold) is refused: read as it is, it would silently run no plugins.
        let own = text
            .parse::<toml::Table>()
            .map_err(|e| toml_error(text, origin, &e))?;
        let version = config.config_version;
        match toml::Value::Table(layered(default_table(), &own)).try_into::<Config>() {
            Ok(mut merged) => {
                merged.config_version = version;
                merged.plugins_inherited = !own.contains_key("plugin");
                config = merged;
            }
            Err(e) => {
                return Err(ConfigError {
                    errors: vec![ConfigIssue {
                        file: origin.to_owned(),
                        line: None,
                        key: None,
                        message: format!(
                            "it cannot be layered over the built-in default: {}",
                            e.message().trim()
                        ),
                    }],
                    warnings,
                });
            }
        }
    }
    // `~/` in a sandbox path is the home directory, as in [stt] model. With no home directory
    // at all the path names nothing: it is left out with a warning (an error here would make
    // the built-in default invalid on such a machine).
    for p in &mut config.plugin {
        for (key, paths) in [
            ("read_paths", &mut p.read_paths),
            ("write_paths", &mut p.write_paths),
        ] {
            for path in paths.iter_mut() {
                *path = home_path(path);
            }
            paths.retain(|path| {
                let homeless = path.starts_with("~/");
                if homeless {
                    warnings.push(ConfigIssue {
                        file: origin.to_owned(),
                        line: None,
                        key: Some(format!("plugin {:?} {key}", p.id)),
                        message: format!(
                            "{path:?} is under a home directory, but HOME is not set and the \
                             password database has no home for this user; it is not given \
                             to the plugin"
                        ),
                    });
                }
                !homeless
            });
        }
    }

    for key in unknown {
        let path = parse_ignored_path(&key);
        // A misspelt section ([secruity]) would leave what it holds at its default: say
        // which one was meant.
        let near = match path.as_slice() {
            [Seg::Key(name)] => crate::ops::nearest_of(name, top_level_keys())
                .map(|near| format!("; did you mean {near:?}?")),
            _ => None,
        }
        .unwrap_or_default();
        warnings.push(issue_at(
            text,
            origin,
            &path,
            format!(
                "unknown key; ignored{near} (check its spelling against data/config.default.toml)"
            ),
        ));
    }
    match config.config_version {
        None => warnings.push(ConfigIssue {
            file: origin.to_owned(),
            line: None,
            key: None,
            message: "no config_version: read as the older runner's format (same keys); `utter config migrate` brings it up to date, keeping its comments".into(),
        }),
        Some(0) => {
            return Err(ConfigError {
                errors: vec![issue_at(
                    text,
                    origin,
                    &[Seg::Key("config_version".into())],
                    format!("0 is not a config version; use {CONFIG_VERSION} (or leave the key out for the older format)"),
                )],
                warnings,
            });
        }
        Some(v) if v > CONFIG_VERSION => {
            return Err(ConfigError {
                errors: vec![issue_at(
                    text,
                    origin,
                    &[Seg::Key("config_version".into())],
                    format!("version {v} is newer than this runner reads ({CONFIG_VERSION}); update utter"),
                )],
                warnings,
            });
        }
        Some(_) => {}
    }

    let mut errors = Vec::new();
    let mut seen = BTreeMap::new();
    for (i, p) in config.plugin.iter().enumerate() {
        let at = |key: &str| {
            vec![
                Seg::Key("plugin".into()),
                Seg::Index(i),
                Seg::Key(key.into()),
            ]
        };
        if p.id.trim().is_empty() {
            errors.push(issue_at(
                text,
                origin,
                &at("id"),
                "the plugin id must not be empty".into(),
            ));
        } else if let Some(first) = seen.insert(p.id.clone(), i) {
            errors.push(issue_at(
                text,
                origin,
                &at("id"),
                format!(
                    "duplicate plugin id {:?} (also plugin[{first}]); ids must be unique",
                    p.id
                ),
            ));
        }
        if p.id.chars().any(|c| c.is_control() || c.is_whitespace()) {
            errors.push(issue_at(
                text,
                origin,
                &at("id"),
                format!(
                    "{:?}: a plugin id may not contain spaces or control characters",
                    p.id
                ),
            ));
        }
        let kinds = utter_protocol::manifest::kinds();
        if !kinds.contains(&p.kind) {
            warnings.push(issue_at(
                text,
                origin,
                &at("kind"),
                format!(
                    "unknown kind {:?}; known kinds: {}",
                    p.kind,
                    kinds.join(", ")
                ),
            ));
        }
        if let Entrypoint::Program(program) = &p.entrypoint {
            if program.contains(' ') {
                warnings.push(issue_at(
                    text,
                    origin,
                    &at("entrypoint"),
                    format!("{program:?} is one program path (never split on spaces); to pass arguments write a list such as {:?}", program.split_whitespace().collect::<Vec<_>>()),
                ));
            }
        }
        // The default's own entries (inherited, not written here) say what they need under a
        // sandbox in case one is switched on: nothing to warn about.
        if !config.security.enforce
            && !config.plugins_inherited
            && origin != DEFAULT_CONFIG_ORIGIN
            && (!p.read_paths.is_empty() || !p.write_paths.is_empty())
        {
            warnings.push(issue_at(
                text,
                origin,
                &at(if p.read_paths.is_empty() {
                    "write_paths"
                } else {
                    "read_paths"
                }),
                "read_paths and write_paths only apply in a sandbox: set [security] enforce = true"
                    .into(),
            ));
        }
        let argv = p.entrypoint.argv();
        let words: Vec<&str> = argv.iter().map(String::as_str).collect();
        let starts_apps = words.ends_with(&["plugin", "desktop"])
            || words.first().and_then(|a| a.rsplit('/').next()) == Some("utter-desktop");
        if config.security.enforce && p.sandbox && starts_apps {
            warnings.push(issue_at(
                text,
                origin,
                &at("entrypoint"),
                format!(
                    "the desktop plugin {:?} starts applications, which would inherit its sandbox (no home directory, no network): add sandbox = false to its entry unless that is what you want",
                    p.id
                ),
            ));
        }
        let known = utter_protocol::manifest::permission_names();
        for (j, name) in p.permissions.iter().enumerate() {
            if !known.iter().any(|k| k == name) {
                warnings.push(issue_at(
                    text,
                    origin,
                    &[
                        Seg::Key("plugin".into()),
                        Seg::Index(i),
                        Seg::Key("permissions".into()),
                        Seg::Index(j),
                    ],
                    format!(
                        "{name:?} is not a permission (known: {}); it grants nothing",
                        known.join(", ")
                    ),
                ));
            }
        }
        for (key, paths) in [
            ("read_paths", &p.read_paths),
            ("write_paths", &p.write_paths),
        ] {
            for (j, path) in paths.iter().enumerate() {
                let at_path = [
                    Seg::Key("plugin".into()),
                    Seg::Index(i),
                    Seg::Key(key.into()),
                    Seg::Index(j),
                ];
                if !Path::new(path).is_absolute() {
                    errors.push(issue_at(
                        text,
                        origin,
                        &at_path,
                        format!("{path:?} is not an absolute path"),
                    ));
                } else if Path::new(path).parent().is_none() {
                    errors.push(issue_at(
                        text,
                        origin,
                        &at_path,
                        "\"/\" would give the plugin the whole file system; name the directories it needs".into(),
                    ));
                } else if config.security.enforce && !Path::new(path).exists() {
                    warnings.push(issue_at(
                        text,
                        origin,
                        &at_path,
                        format!("{path:?} does not exist, so the sandbox does not include it"),
                    ));
                }
            }
        }
        let argv = p.entrypoint.argv();
        if argv.is_empty() || argv[0].trim().is_empty() {
            errors.push(issue_at(
                text,
                origin,
                &at("entrypoint"),
                "the entrypoint must name a program: a non-empty argv list such as [\"utter-rules\"]".into(),
            ));
        }
        if p.runtime != Runtime::Subprocess {
            warnings.push(issue_at(
                text,
                origin,
                &at("runtime"),
                "only runtime = \"subprocess\" runs today; this plugin will be reported as failed"
                    .into(),
            ));
        }
        for (key, list) in [("provides", &p.provides), ("requires", &p.requires)] {
            for (j, cap) in list.iter().enumerate() {
                if let Err(e) = cap.parse::<Capability>() {
                    let mut path = at(key);
                    path.push(Seg::Index(j));
                    errors.push(issue_at(text, origin, &path, e));
                }
            }
        }
        if !p.cwd.is_empty() && !Path::new(&p.cwd).is_dir() {
            warnings.push(issue_at(
                text,
                origin,
                &at("cwd"),
                format!("{:?} is not a directory", p.cwd),
            ));
        }
    }
    if !["auto", "bwrap", "landlock"].contains(&config.security.sandbox.as_str()) {
        errors.push(issue_at(
            text,
            origin,
            &[Seg::Key("security".into()), Seg::Key("sandbox".into())],
            format!(
                "{:?} is not a sandbox; use \"auto\" (bwrap, else Landlock), \"bwrap\" or \"landlock\"",
                config.security.sandbox
            ),
        ));
    }
    if config.security.enforce
        && config.security.sandbox == "bwrap"
        && crate::paths::find_on_path("bwrap").is_none()
    {
        warnings.push(issue_at(
            text,
            origin,
            &[Seg::Key("security".into()), Seg::Key("enforce".into())],
            "bwrap is not installed, so plugins would run unconfined (and be reported so): install bubblewrap".into(),
        ));
    }
    for (i, id) in config.plugins.disabled.iter().enumerate() {
        if !config.plugin.iter().any(|p| &p.id == id) {
            warnings.push(issue_at(
                text,
                origin,
                &[
                    Seg::Key("plugins".into()),
                    Seg::Key("disabled".into()),
                    Seg::Index(i),
                ],
                format!("no [[plugin]] has the id {id:?}"),
            ));
        }
    }
    for (key, ops) in [
        ("enabled_ops", &config.policy.enabled_ops),
        ("disabled_ops", &config.policy.disabled_ops),
    ] {
        for (i, op) in ops.iter().enumerate() {
            let name = utter_protocol::digest::normalise_op(op);
            if crate::ops::builtin_names().any(|known| known == name) {
                continue;
            }
            let hint = match crate::ops::nearest(name) {
                Some(near) => format!("did you mean {near:?}? "),
                None => String::new(),
            };
            warnings.push(issue_at(
                text,
                origin,
                &[
                    Seg::Key("policy".into()),
                    Seg::Key(key.into()),
                    Seg::Index(i),
                ],
                format!(
                    "{op:?} is not a built-in op ({hint}known: {}); it only applies if an action plugin offers an op of that name",
                    crate::ops::builtin_names().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
    }
    for (i, op) in config.policy.enabled_ops.iter().enumerate() {
        if config.policy.disabled_ops.iter().any(|d| {
            utter_protocol::digest::normalise_op(d) == utter_protocol::digest::normalise_op(op)
        }) {
            warnings.push(issue_at(
                text,
                origin,
                &[
                    Seg::Key("policy".into()),
                    Seg::Key("enabled_ops".into()),
                    Seg::Index(i),
                ],
                format!("{op:?} is also in disabled_ops, which wins: it stays disabled"),
            ));
        }
    }
    if config.plugin.is_empty() {
        warnings.push(ConfigIssue {
            file: origin.to_owned(),
            line: None,
            key: None,
            message: "plugin = [] names no plugin: nothing will run (remove the key to run the built-in plugins, or add [[plugin]] entries)".into(),
        });
    }
    let r = &config.runner;
    for (key, value, min) in [
        ("rpc_timeout_ms", r.rpc_timeout_ms, 1),
        ("confirm_timeout_ms", r.confirm_timeout_ms, 1),
        ("lossy_queue", r.lossy_queue, 1),
        ("credit_window", r.credit_window, 1),
        ("handle_quota", r.handle_quota, 1),
        ("handle_quota_total", r.handle_quota_total, 1),
        ("max_frame_bytes", r.max_frame_bytes, 1024),
        ("restart_delay_ms", r.restart_delay_ms, 10),
        (
            "restart_delay_max_ms",
            r.restart_delay_max_ms,
            r.restart_delay_ms.max(10),
        ),
    ] {
        if value < min {
            errors.push(issue_at(
                text,
                origin,
                &[Seg::Key("runner".into()), Seg::Key(key.into())],
                format!("must be at least {min}, got {value}"),
            ));
        }
    }
    // NaN fails the range test too.
    if !(1.0..=604_800.0).contains(&r.handle_ttl) {
        errors.push(issue_at(
            text,
            origin,
            &[Seg::Key("runner".into()), Seg::Key("handle_ttl".into())],
            format!(
                "must be between 1 and 604800 (seconds, a week), got {}",
                r.handle_ttl
            ),
        ));
    }
    if let Some(socket) = &config.socket {
        for (key, value) in [
            ("idle_timeout_ms", socket.idle_timeout_ms),
            ("frame_timeout_ms", socket.frame_timeout_ms),
        ] {
            if value < 100 {
                errors.push(issue_at(
                    text,
                    origin,
                    &[Seg::Key("socket".into()), Seg::Key(key.into())],
                    format!("must be at least 100 (milliseconds), got {value}"),
                ));
            }
        }
    }
    let decide = &config.decide;
    let decide_key = |key: &str| [Seg::Key("decide".into()), Seg::Key(key.into())];
    for (key, value) in [
        ("act", decide.act),
        ("ask", decide.ask),
        ("chooser_min", decide.chooser_min),
    ] {
        if !(0.0..=1.0).contains(&value) {
            errors.push(issue_at(
                text,
                origin,
                &decide_key(key),
                format!("must be a confidence from 0 to 1, got {value}"),
            ));
        }
    }
    if decide.ask > decide.act {
        errors.push(issue_at(
            text,
            origin,
            &decide_key("ask"),
            format!(
                "must be at most act ({}), got {} (ask is the lower tier: asked, not acted on)",
                decide.act, decide.ask
            ),
        ));
    }
    let ptt = &config.ptt;
    let ptt_key = |key: &str| [Seg::Key("ptt".into()), Seg::Key(key.into())];
    if let Err(e) = check_key_name(&ptt.evdev_key) {
        errors.push(issue_at(text, origin, &ptt_key("evdev_key"), e));
    }
    if let Err(e) = keysym(&ptt.keyboard_monitor_key) {
        errors.push(issue_at(text, origin, &ptt_key("keyboard_monitor_key"), e));
    }
    if ptt.portal && ptt.shortcut.trim().is_empty() {
        errors.push(issue_at(
            text,
            origin,
            &ptt_key("shortcut"),
            "must name a key in the XDG shortcuts format, e.g. \"F13\" or \"CTRL+ALT+space\" (or set portal = false)".into(),
        ));
    }
    if ptt.max_hold_ms != 0 && ptt.max_hold_ms <= ptt.min_hold_ms {
        errors.push(issue_at(
            text,
            origin,
            &ptt_key("max_hold_ms"),
            format!(
                "must be larger than min_hold_ms ({}), got {} (0 disables the stuck-key timeout)",
                ptt.min_hold_ms, ptt.max_hold_ms
            ),
        ));
    }
    if !matches!(r.socket_transport.as_str(), "" | "unix") {
        errors.push(issue_at(
            text,
            origin,
            &[
                Seg::Key("runner".into()),
                Seg::Key("socket_transport".into()),
            ],
            format!(
                "{:?} is not supported; allowed: \"unix\" (or leave it out)",
                r.socket_transport
            ),
        ));
    }
    let a = &config.audio;
    let audio_key = |key: &str| {
        let mut path = vec![Seg::Key("audio".into())];
        path.extend(key.split('.').map(|k| Seg::Key(k.into())));
        path
    };
    for (key, value, min, max) in [
        ("pre_roll_ms", a.pre_roll_ms, 0, 5000),
        ("max_seconds", a.max_seconds, 1, 600),
        ("end_silence_ms", a.end_silence_ms, 0, 10_000),
        ("vad.margin_ms", a.vad.margin_ms, 0, 2000),
        ("vad.min_speech_ms", a.vad.min_speech_ms, 0, 5000),
    ] {
        if !(min..=max).contains(&value) {
            errors.push(issue_at(
                text,
                origin,
                &audio_key(key),
                format!("must be between {min} and {max}, got {value}"),
            ));
        }
    }
    if a.vad.detector != "earshot" && a.vad.detector != "energy" {
        errors.push(issue_at(
            text,
            origin,
            &audio_key("vad.detector"),
            format!(
                "must be \"earshot\" (a voice-activity detector) or \"energy\" (the level alone), got {:?}",
                a.vad.detector
            ),
        ));
    }
    let threshold = a.vad.silence_threshold_db;
    if !(-120.0..=0.0).contains(&threshold) {
        errors.push(issue_at(
            text,
            origin,
            &audio_key("vad.silence_threshold_db"),
            format!("must be between -120 and 0 (dBFS), got {threshold}"),
        ));
    }
    if a.source.chars().any(|c| c.is_control()) || a.source.trim() != a.source {
        errors.push(issue_at(
            text,
            origin,
            &audio_key("source"),
            format!(
                "{:?} is not a PipeWire node name (no surrounding spaces or control characters); `utter audio sources` lists them",
                a.source
            ),
        ));
    }
    let stt = &config.stt;
    let stt_key = |key: &str| vec![Seg::Key("stt".into()), Seg::Key(key.into())];
    if !(1_000..=600_000).contains(&stt.timeout_ms) {
        errors.push(issue_at(
            text,
            origin,
            &stt_key("timeout_ms"),
            format!("must be between 1000 and 600000, got {}", stt.timeout_ms),
        ));
    }
    if stt.window != "fit" && stt.window != "full" {
        errors.push(issue_at(
            text,
            origin,
            &stt_key("window"),
            format!(
                "must be \"fit\" (the audio plus 1 s) or \"full\" (30 s), got {:?}",
                stt.window
            ),
        ));
    }
    if !(1..=10).contains(&stt.beam_size) {
        errors.push(issue_at(
            text,
            origin,
            &stt_key("beam_size"),
            format!("must be between 1 and 10, got {}", stt.beam_size),
        ));
    }
    if stt.hypotheses < 1 || stt.hypotheses > stt.beam_size.max(1) {
        errors.push(issue_at(
            text,
            origin,
            &stt_key("hypotheses"),
            format!(
                "must be between 1 and beam_size ({}), got {}",
                stt.beam_size, stt.hypotheses
            ),
        ));
    }
    if !(0.0..=1.0).contains(&stt.no_speech_threshold) {
        errors.push(issue_at(
            text,
            origin,
            &stt_key("no_speech_threshold"),
            format!("must be between 0 and 1, got {}", stt.no_speech_threshold),
        ));
    }
    if !stt.language.is_empty()
        && (!(2..=3).contains(&stt.language.len())
            || !stt.language.chars().all(|c| c.is_ascii_lowercase()))
    {
        errors.push(issue_at(
            text,
            origin,
            &stt_key("language"),
            format!(
                "{:?} is not a language code; use an ISO 639-1 code like \"en\" or \"de\", or \"\" to detect",
                stt.language
            ),
        ));
    }
    let llm = &config.llm;
    let llm_key = |key: &str| vec![Seg::Key("llm".into()), Seg::Key(key.into())];
    if !(100..=600_000).contains(&llm.timeout_ms) {
        errors.push(issue_at(
            text,
            origin,
            &llm_key("timeout_ms"),
            format!("must be between 100 and 600000, got {}", llm.timeout_ms),
        ));
    }
    if !llm.model.trim().is_empty() && !llm.endpoint.trim().is_empty() {
        errors.push(issue_at(
            text,
            origin,
            &llm_key("endpoint"),
            "set model (a GGUF file run in process) or endpoint (a server), not both".into(),
        ));
    }
    if let Some(why) = endpoint_problem(llm.endpoint.trim()) {
        errors.push(issue_at(text, origin, &llm_key("endpoint"), why));
    }
    let named = !llm.model.trim().is_empty() || !llm.endpoint.trim().is_empty();
    if named && config.plugin_for(&llm.plugin, "llm").is_none() {
        warnings.push(issue_at(
            text,
            origin,
            &llm_key(if llm.model.trim().is_empty() {
                "endpoint"
            } else {
                "model"
            }),
            "no [[plugin]] of kind \"llm\" is configured, so nothing uses it; add one with \
             entrypoint = [\"utter-llm\"]"
                .into(),
        ));
    }
    if let Some(why) = crate::models::source_problem(config.models.source.trim()) {
        errors.push(issue_at(
            text,
            origin,
            &[Seg::Key("models".into()), Seg::Key("source".into())],
            why,
        ));
    }
    if !["chat", "completions"].contains(&llm.api.as_str()) {
        errors.push(issue_at(
            text,
            origin,
            &llm_key("api"),
            format!(
                "{:?} is no API; use \"chat\" (/v1/chat/completions) or \"completions\" (/v1/completions)",
                llm.api
            ),
        ));
    }
    for (section, key, id, kind) in [
        ("stt", "plugin", &stt.plugin, "stt"),
        ("tts", "plugin", &config.tts.plugin, "tts"),
        ("llm", "plugin", &llm.plugin, "llm"),
    ] {
        if id.is_empty() {
            continue;
        }
        let message = match config.plugin.iter().find(|p| p.id == *id) {
            None => format!(
                "no [[plugin]] has id {id:?}; name a plugin of kind {kind:?} or leave it empty"
            ),
            Some(p) if p.kind != kind => format!(
                "plugin {id:?} is of kind {:?}, not {kind:?}; name a plugin of kind {kind:?} or leave it empty",
                p.kind
            ),
            Some(_) => continue,
        };
        errors.push(issue_at(
            text,
            origin,
            &[Seg::Key(section.into()), Seg::Key(key.into())],
            message,
        ));
    }
    // Report in file order.
    warnings.sort_by_key(|w| w.line.unwrap_or(0));
    errors.sort_by_key(|e| e.line.unwrap_or(0));
    if errors.is_empty() {
        let mut config = config;
        config.apply_llm();
        Ok(LoadedConfig {
            config,
            origin: origin.to_owned(),
            warnings,
        })
    } else {
        Err(ConfigError { errors, warnings })
    }
}

/// serde_ignored prints paths like `plugin.0.flavour`; turn them into segments.
fn parse_ignored_path(path: &str) -> Vec<Seg> {
    path.split('.')
        .map(|part| match part.parse::<usize>() {
            Ok(i) => Seg::Index(i),
            Err(_) => Seg::Key(part.to_owned()),
        })
        .collect()
}

/// Values of the wrong type that the deserializer would stop at, up to 16, so one run of
/// check-config names them all: after `first`, the line it points at is blanked (in a copy,
/// so lines keep their numbers) and the text read again, while the error is on a line of
/// its own that can go without breaking the TOML. An error that blanking a line causes
/// ("missing field") is not reported.
fn wrong_types(text: &str, origin: &str, first: &toml::de::Error) -> ConfigError {
    let mut errors = toml_error(text, origin, first).errors;
    let mut copy = text.to_owned();
    let mut at = first.span().map(|s| s.start);
    for _ in 0..15 {
        let Some(offset) = at.filter(|&o| o <= copy.len() && copy.is_char_boundary(o)) else {
            break;
        };
        let start = copy[..offset].rfind('\n').map_or(0, |i| i + 1);
        let end = copy[offset..].find('\n').map_or(copy.len(), |i| offset + i);
        // A table header holds the rest of its table: not blanked.
        if copy[start..end].trim_start().starts_with('[') {
            break;
        }
        copy.replace_range(start..end, &" ".repeat(end - start));
        let Ok(deserializer) = toml::Deserializer::parse(&copy) else {
            break;
        };
        let Err(e) = serde_ignored::deserialize::<_, _, Config>(deserializer, |_| {}) else {
            break;
        };
        if e.message().starts_with("missing field") {
            break;
        }
        let next = toml_error(&copy, origin, &e).errors;
        if next.iter().any(|n| errors.iter().any(|o| o.line == n.line)) {
            break;
        }
        errors.extend(next);
        at = e.span().map(|s| s.start);
    }
    // In file order, as every other list of issues.
    errors.sort_by_key(|e| e.line.unwrap_or(0));
    ConfigError {
        errors,
        warnings: Vec::new(),
    }
}

fn toml_error(text: &str, origin: &str, e: &toml::de::Error) -> ConfigError {
    let line = e.span().map(|s| line_of(text, s.start));
    let key = e.span().and_then(|s| key_at(text, s.start));
    let mut message = e.message().trim().to_owned();
    // The parser points at the repeated key but does not name it: name it.
    if message == "duplicate key" {
        if let Some(name) = e
            .span()
            .and_then(|s| text.get(s))
            .map(|k| k.trim().trim_matches('"'))
            .filter(|k| !k.is_empty())
        {
            message = format!(
                "duplicate key {:?}: it is given twice in the same table; keep one",
                utter_protocol::text::clip(name, 80)
            );
        }
    }
    ConfigError::one(ConfigIssue {
        file: origin.to_owned(),
        line,
        key,
        message: in_toml_words(&message),
    })
}

/// serde's type names in a message in TOML's words: `expected struct PttSection` is
/// "expected a table", `expected u32` "expected a whole number from 0 to 4294967295",
/// `map` a table and `sequence` an array, so an error names no Rust type.
fn in_toml_words(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find("expected ") {
        let (before, after) = rest.split_at(at + "expected ".len());
        out.push_str(before);
        let word_end = |s: &str| {
            s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(s.len())
        };
        let (said, used) = if let Some(name) = after.strip_prefix("struct ") {
            ("a table", "struct ".len() + word_end(name))
        } else {
            let word = &after[..word_end(after)];
            let said = match word {
                "u8" => "a whole number from 0 to 255",
                "u16" => "a whole number from 0 to 65535",
                "u32" => "a whole number from 0 to 4294967295",
                "u64" | "usize" => "a whole number, 0 or more",
                "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number",
                "f32" | "f64" => "a number",
                "map" => "a table",
                _ => "",
            };
            (said, if said.is_empty() { 0 } else { word.len() })
        };
        out.push_str(said);
        rest = &after[used..];
    }
    out.push_str(rest);
    out.replace("invalid type: map", "invalid type: table")
        .replace("expected a map", "expected a table")
        .replace(" as i128,", " (past what TOML holds),")
        .replace(" as u128,", " (past what TOML holds),")
        .replace("floating point `", "float `")
        .replace("unknown variant", "unknown value")
        .replace("expected a sequence", "expected an array")
        .replace("invalid type: sequence", "invalid type: array")
}

/// The dotted key whose value starts at or contains `offset`, for type errors.
fn key_at(text: &str, offset: usize) -> Option<String> {
    use toml::de::{DeTable, DeValue};
    let doc = DeTable::parse(text).ok()?;
    fn walk(table: &DeTable, offset: usize, prefix: &str, best: &mut Option<(usize, String)>) {
        for (k, v) in table.iter() {
            let name = if prefix.is_empty() {
                k.get_ref().to_string()
            } else {
                format!("{prefix}.{}", k.get_ref())
            };
            let span = v.span();
            let contains = span.start <= offset && offset < span.end.max(span.start + 1);
            let key_contains = k.span().start <= offset && offset < k.span().end;
            if contains || key_contains {
                let width = span.end - span.start;
                if best.as_ref().is_none_or(|(w, _)| width <= *w) {
                    *best = Some((width, name.clone()));
                }
            }
            match v.get_ref() {
                DeValue::Table(t) => walk(t, offset, &name, best),
                DeValue::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        if let DeValue::Table(t) = item.get_ref() {
                            walk(t, offset, &format!("{name}[{i}]"), best);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let mut best = None;
    walk(doc.get_ref(), offset, "", &mut best);
    best.map(|(_, name)| name)
}

/// Named XKB keysyms that `[ptt] keyboard_monitor_key` accepts besides `F1`…`F35`: keys that
/// are free for push-to-talk on most layouts and are no modifiers (the keyboard monitor's
/// keystroke grabs are for non-modifier keys). Values from xkbcommon's
/// `xkbcommon-keysyms.h` (X11 `keysymdef.h`, `XF86keysym.h`).
const NAMED_KEYSYMS: &[(&str, u32)] = &[
    ("Pause", 0xff13),
    ("Scroll_Lock", 0xff14),
    ("Home", 0xff50),
    ("Prior", 0xff55),
    ("Page_Up", 0xff55),
    ("Next", 0xff56),
    ("Page_Down", 0xff56),
    ("End", 0xff57),
    ("Print", 0xff61),
    ("Insert", 0xff63),
    ("Menu", 0xff67),
    ("Help", 0xff6a),
    ("Break", 0xff6b),
    ("XF86Tools", 0x1008_ff81),
    ("XF86Launch5", 0x1008_ff45),
    ("XF86Launch6", 0x1008_ff46),
    ("XF86Launch7", 0x1008_ff47),
    ("XF86Launch8", 0x1008_ff48),
    ("XF86Launch9", 0x1008_ff49),
    ("XF86AudioMicMute", 0x1008_ffb2),
];

/// The XKB keysym of `[ptt] keyboard_monitor_key`: `F1`…`F35` (`F13` is 0xffca), a name
/// of [`NAMED_KEYSYMS`] (`Pause`, `Scroll_Lock`, `Insert`, `Menu`, `XF86AudioMicMute`, ...;
/// names compare without regard to case), or a keysym number written `0x…` for any other key
/// (`xev` or `wev` print them).
///
/// # Errors
/// A sentence naming the bad name and valid examples.
pub fn keysym(name: &str) -> Result<u32, String> {
    let name = name.trim();
    let bad = || {
        format!(
            "{name:?} is not a keysym push-to-talk can grab; use an XKB keysym name such as F13, F14, Pause, Scroll_Lock, Insert, Menu or XF86AudioMicMute, or a keysym number such as 0xffca (wev or xev print them)"
        )
    };
    if let Some(hex) = name.strip_prefix("0x").or_else(|| name.strip_prefix("0X")) {
        return match u32::from_str_radix(hex, 16) {
            // 0 is NoSymbol; above 0x1ffffff no keysym is defined.
            Ok(v) if v != 0 && v <= 0x1ff_ffff => Ok(v),
            _ => Err(bad()),
        };
    }
    if let Some(n) = name
        .strip_prefix('F')
        .or_else(|| name.strip_prefix('f'))
        .filter(|n| !n.starts_with('0'))
        .and_then(|n| n.parse::<u32>().ok())
        && (1..=35).contains(&n)
    {
        // XKB_KEY_F1 is 0xffbe and F1…F35 are consecutive.
        return Ok(0xffbe + n - 1);
    }
    NAMED_KEYSYMS
        .iter()
        .find(|(known, _)| known.eq_ignore_ascii_case(name))
        .map(|&(_, v)| v)
        .ok_or_else(bad)
}

/// Check the shape of an evdev key name such as `KEY_F13` or `KEY_RIGHTCTRL` (the names of
/// `linux/input-event-codes.h`): `KEY_` or `BTN_` and upper-case letters, digits or `_`. The
/// daemon's evdev trigger resolves the name to a code and reports an unknown one in its status.
///
/// # Errors
/// A sentence naming the bad name and valid examples.
pub fn check_key_name(name: &str) -> Result<(), String> {
    let name = name.trim();
    let body = name
        .strip_prefix("KEY_")
        .or_else(|| name.strip_prefix("BTN_"));
    match body {
        Some(b)
            if !b.is_empty()
                && b.bytes()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_') =>
        {
            Ok(())
        }
        _ => Err(format!(
            "{name:?} is not an evdev key name; use a name from linux/input-event-codes.h such as KEY_F13, KEY_RIGHTCTRL, KEY_RIGHTALT, KEY_PAUSE or KEY_SCROLLLOCK"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_default_is_valid() {
        let loaded = parse(DEFAULT_CONFIG, DEFAULT_CONFIG_ORIGIN).unwrap();
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        assert!(loaded.config.active_plugins().count() >= 2);
    }

    #[test]
    fn unknown_transport_names_file_line_and_key() {
        let text = "config_version = 1\n\n[[plugin]]\nid = \"x\"\ntransport = \"pigeon\"\nentrypoint = [\"x\"]\n";
        let err = parse(text, "c.toml").unwrap_err();
        let issue = &err.errors[0];
        assert_eq!(issue.line, Some(5), "{issue}");
        assert_eq!(issue.key.as_deref(), Some("plugin[0].transport"), "{issue}");
        assert!(issue.message.contains("stdio"), "{issue}");
    }

    #[test]
    fn unknown_keys_warn_with_lines() {
        let text = "config_version = 1\n[runner]\nrpc_timeout = 5\n[[plugin]]\nid = \"x\"\nentrypoint = \"x\"\nflavour = 1\n";
        let loaded = parse(text, "c.toml").unwrap();
        let keys: Vec<_> = loaded
            .warnings
            .iter()
            .map(|w| (w.key.clone().unwrap(), w.line))
            .collect();
        assert_eq!(
            keys,
            vec![
                ("runner.rpc_timeout".to_string(), Some(3)),
                ("plugin[0].flavour".to_string(), Some(7))
            ]
        );
    }

    #[test]
    fn older_format_is_accepted_with_a_note() {
        let loaded = parse("[[plugin]]\nid = \"x\"\nentrypoint = [\"x\"]\n", "old.toml").unwrap();
        assert!(loaded.warnings[0].message.contains("older"));
        assert!(
            loaded.warnings[0].message.contains("utter config migrate"),
            "{:?}",
            loaded.warnings
        );
    }

    #[test]
    fn an_older_files_string_booleans_are_read_as_what_they_say() {
        // As the older runner wrote them; it read every non-empty string as true.
        let text = "# mine\n[security]\nenforce = \"true\" # on\n[socket]\nallow_same_uid = \"Off\"\n[[plugin]]\nid = \"x\"\nentrypoint = [\"x\"]\nenabled = \"no\"\n";
        let loaded = parse(text, "old.toml").unwrap();
        assert!(loaded.config.security.enforce);
        assert!(!loaded.config.socket.as_ref().unwrap().allow_same_uid);
        assert!(!loaded.config.plugin[0].enabled);
        let notes: Vec<_> = loaded
            .warnings
            .iter()
            .filter(|w| w.message.contains("is read as the boolean"))
            .map(|w| (w.key.clone().unwrap(), w.line.unwrap()))
            .collect();
        assert_eq!(
            notes,
            [
                ("security.enforce".to_owned(), 3),
                ("socket.allow_same_uid".to_owned(), 5),
                ("plugin[0].enabled".to_owned(), 9),
            ]
        );
        // What the runner reads is what migration writes.
        let migrated = migrate(text, "old.toml").unwrap();
        let mut read = parse(&migrated.text, "new.toml").unwrap().config;
        read.config_version = None;
        assert_eq!(read, loaded.config);
        // A word that says no boolean is still refused, where it is.
        let e = parse("[security]\nenforce = \"maybe\"\n", "old.toml").unwrap_err();
        assert_eq!(e.errors[0].line, Some(2), "{e}");
        // A current file's strings are not booleans.
        assert!(
            parse(
                "config_version = 1\n[security]\nenforce = \"true\"\n",
                "c.toml"
            )
            .is_err()
        );
    }

    #[test]
    fn a_duplicate_key_is_named() {
        let text = "config_version = 1\n[policy]\nenabled_ops = []\nenabled_ops = [\"terminal\"]\n";
        let err = parse(text, "dup.toml").unwrap_err();
        assert_eq!(err.errors[0].line, Some(4), "{err:?}");
        assert!(
            err.errors[0]
                .message
                .starts_with("duplicate key \"enabled_ops\""),
            "{err:?}"
        );
    }

    #[test]
    fn a_string_entrypoint_is_one_program() {
        let loaded = parse(
            "config_version = 1\n[[plugin]]\nid = \"x\"\nentrypoint = \"/usr/bin/my plugin\"\n",
            "c",
        )
        .unwrap();
        assert_eq!(
            loaded.config.plugin[0].entrypoint.argv(),
            vec!["/usr/bin/my plugin"]
        );
    }

    #[test]
    fn semantic_errors_are_collected() {
        let text = "config_version = 1\n[[plugin]]\nid = \"a\"\nentrypoint = []\n[[plugin]]\nid = \"a\"\nentrypoint = [\"b\"]\nrequires = [\"nope\"]\n";
        let err = parse(text, "c.toml").unwrap_err();
        let keys: Vec<_> = err
            .errors
            .iter()
            .map(|e| (e.key.clone().unwrap(), e.line))
            .collect();
        assert_eq!(
            keys,
            vec![
                ("plugin[0].entrypoint".to_string(), Some(4)),
                ("plugin[1].id".to_string(), Some(6)),
                ("plugin[1].requires[0]".to_string(), Some(8)),
            ]
        );
    }

    #[test]
    fn type_errors_name_the_key() {
        let err = parse(
            "config_version = 1\n[runner]\nrpc_timeout_ms = \"soon\"\n",
            "c.toml",
        )
        .unwrap_err();
        let issue = &err.errors[0];
        assert_eq!(
            (issue.line, issue.key.as_deref()),
            (Some(3), Some("runner.rpc_timeout_ms")),
            "{issue}"
        );
    }

    #[test]
    fn warnings_are_kept_beside_errors() {
        let err = parse(
            "config_version = 1\n[[plugin]]\nid = \"a\"\nflavour = 1\nentrypoint = []\n",
            "c",
        )
        .unwrap_err();
        assert_eq!(err.errors[0].key.as_deref(), Some("plugin[0].entrypoint"));
        assert_eq!(err.warnings[0].key.as_deref(), Some("plugin[0].flavour"));
    }

    #[test]
    fn an_op_name_that_is_not_built_in_is_a_warning_naming_the_nearest() {
        let text = "config_version = 1\n[policy]\nenabled_ops = [\"terminal\",\n  \"termnal\"]\ndisabled_ops = [\"action.open_url\", \"my_plugin_op\"]\n";
        let loaded = parse(text, "c.toml").unwrap();
        let ops: Vec<_> = loaded
            .warnings
            .iter()
            .filter(|w| w.key.as_deref().is_some_and(|k| k.starts_with("policy.")))
            .collect();
        assert_eq!(ops.len(), 2, "{ops:?}");
        assert_eq!(ops[0].key.as_deref(), Some("policy.enabled_ops[1]"));
        assert_eq!(ops[0].line, Some(4), "{}", ops[0]);
        assert!(
            ops[0].message.contains("did you mean \"terminal\""),
            "{}",
            ops[0]
        );
        assert_eq!(ops[1].key.as_deref(), Some("policy.disabled_ops[1]"));
        assert!(!ops[1].message.contains("did you mean"), "{}", ops[1]);
        assert!(
            ops[1].message.contains("action plugin offers"),
            "{}",
            ops[1]
        );
    }

    #[test]
    fn migration_adds_the_version_keeps_comments_and_fixes_string_booleans() {
        let old = "# my utter config\n# second line\n\n[security]\n# why: testing\nenforce = \"false\" # as a string\n\n[[plugin]]\nid = \"r\" # the router\nentrypoint = [\"utter\", \"plugin\", \"rules\"]\nenabled = \"yes\"\n";
        let m = migrate(old, "c.toml").expect("migrates");
        assert_eq!((m.from, m.to), (0, CONFIG_VERSION));
        assert!(
            m.text
                .starts_with("# my utter config\n# second line\n\nconfig_version = 1\n"),
            "{}",
            m.text
        );
        for comment in [
            "# my utter config",
            "# second line",
            "# why: testing",
            "# as a string",
            "# the router",
        ] {
            assert!(m.text.contains(comment), "{comment} lost: {}", m.text);
        }
        assert!(
            m.text.contains("enforce = false # as a string"),
            "{}",
            m.text
        );
        assert!(m.text.contains("enabled = true"), "{}", m.text);
        assert_eq!(m.changes.len(), 3, "{:?}", m.changes);
        let loaded = parse(&m.text, "c.toml").unwrap();
        assert!(!loaded.config.security.enforce);
        assert!(
            loaded
                .warnings
                .iter()
                .all(|w| w.key.as_deref() != Some("config_version"))
        );
        // Current already: unchanged.
        let again = migrate(&m.text, "c.toml").unwrap();
        assert_eq!(again.text, m.text);
        assert!(again.changes.is_empty());
        // Newer: refused.
        let newer = migrate("config_version = 9\n", "c.toml").unwrap_err();
        assert!(newer.errors[0].message.contains("newer"), "{newer}");
        // Not TOML: refused with its line.
        let broken = migrate("a = 1\n[b\n", "c.toml").unwrap_err();
        assert_eq!(broken.errors[0].line, Some(2), "{broken}");
    }

    #[test]
    fn sandbox_paths_take_the_home_directory_and_the_desktop_plugin_is_warned_about() {
        let home = std::env::var("HOME").unwrap_or_default();
        let text = "config_version = 1\n[security]\nenforce = true\nsandbox = \"landlock\"\n[[plugin]]\nid = \"d\"\nkind = \"action\"\nentrypoint = [\"utter\", \"plugin\", \"desktop\"]\nread_paths = [\"~/.config/utter/profiles\"]\n";
        let loaded = parse(text, "c.toml").unwrap();
        if !home.is_empty() {
            assert_eq!(
                loaded.config.plugin[0].read_paths,
                vec![format!("{home}/.config/utter/profiles")]
            );
        }
        assert!(
            loaded
                .warnings
                .iter()
                .any(|w| w.message.contains("starts applications") && w.line == Some(8)),
            "{:?}",
            loaded.warnings
        );
        let quiet = text.replace("read_paths", "sandbox = false\nread_paths");
        let loaded = parse(&quiet, "c.toml").unwrap();
        assert!(
            !loaded
                .warnings
                .iter()
                .any(|w| w.message.contains("starts applications"))
        );
        let bad = parse(&text.replace("\"landlock\"", "\"jail\""), "c.toml").unwrap_err();
        assert_eq!(
            bad.errors[0].key.as_deref(),
            Some("security.sandbox"),
            "{bad}"
        );
    }

    #[test]
    fn doubtful_settings_are_flagged() {
        let text = "config_version = 1\n[security]\nenforce = true\n[policy]\nenabled_ops = [\"terminal\"]\ndisabled_ops = [\"action.terminal\"]\n[plugins]\ndisabled = [\"nope\"]\n[[plugin]]\nid = \"a\"\nkind = \"bogus\"\nentrypoint = \"utter plugin rules\"\nread_paths = [\"/x\"]\n";
        let loaded = parse(text, "c").unwrap();
        let keys: Vec<_> = loaded
            .warnings
            .iter()
            .map(|w| w.key.clone().unwrap())
            .collect();
        for key in [
            "policy.enabled_ops[0]",
            "plugins.disabled[0]",
            "plugin[0].kind",
            "plugin[0].entrypoint",
            "plugin[0].read_paths[0]",
        ] {
            assert!(keys.contains(&key.to_string()), "{key} not in {keys:?}");
        }
        assert!(parse("config_version = 0\n", "c").is_err());
        assert!(
            parse(
                "config_version = 1\n[[plugin]]\nid = \"a b\"\nentrypoint = [\"x\"]\n",
                "c"
            )
            .is_err()
        );
    }

    #[test]
    fn ptt_section_defaults_and_errors() {
        let loaded = parse("config_version = 1\n", "c").unwrap();
        assert_eq!(loaded.config.ptt, PttSection::default());
        let loaded = parse(
            "config_version = 1\n[ptt]\nmin_hold_ms = 100\nevdev = true\nevdev_key = \"KEY_RIGHTCTRL\"\nloudness = 3\n",
            "c",
        )
        .unwrap();
        assert_eq!(loaded.config.ptt.min_hold_ms, 100);
        assert!(loaded.config.ptt.evdev);
        assert!(
            loaded
                .warnings
                .iter()
                .any(|w| w.key.as_deref() == Some("ptt.loudness") && w.line == Some(6)),
            "{:?}",
            loaded.warnings
        );
        let err = parse(
            "config_version = 1\n[ptt]\nevdev_key = \"F13\"\nmax_hold_ms = 10\n",
            "c",
        )
        .unwrap_err();
        let keys: Vec<_> = err
            .errors
            .iter()
            .map(|e| (e.key.clone().unwrap(), e.line))
            .collect();
        assert_eq!(
            keys,
            vec![
                ("ptt.evdev_key".to_string(), Some(3)),
                ("ptt.max_hold_ms".to_string(), Some(4))
            ]
        );
        assert!(
            err.errors[0].message.contains("KEY_F13"),
            "{}",
            err.errors[0]
        );
    }

    #[test]
    fn newer_config_version_is_refused() {
        assert!(parse("config_version = 9\n", "c").is_err());
    }

    #[test]
    fn audio_section_defaults_values_and_errors() {
        let base = "config_version = 1\n[[plugin]]\nid = \"x\"\nentrypoint = [\"x\"]\n";
        let loaded = parse(base, "c.toml").unwrap();
        assert_eq!(loaded.config.audio, AudioSection::default());
        assert_eq!(loaded.config.audio.pre_roll_ms, 300);
        assert_eq!(loaded.config.audio.vad.silence_threshold_db, -50.0);
        let embedded = parse(DEFAULT_CONFIG, DEFAULT_CONFIG_ORIGIN).unwrap();
        assert_eq!(embedded.config.audio, AudioSection::default());

        let text = format!(
            "{base}[audio]\nsource = \"alsa_input.usb-mic\"\npre_roll_ms = 500\nloudness = 3\n[audio.vad]\nsilence_threshold_db = -42\ntrim = false\n"
        );
        let loaded = parse(&text, "c.toml").unwrap();
        let audio = &loaded.config.audio;
        assert_eq!(audio.source, "alsa_input.usb-mic");
        assert_eq!(audio.pre_roll_ms, 500);
        assert_eq!(audio.max_seconds, 30);
        assert_eq!(audio.vad.silence_threshold_db, -42.0);
        assert!(!audio.vad.trim);
        assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
        assert_eq!(loaded.warnings[0].key.as_deref(), Some("audio.loudness"));
        assert_eq!(loaded.warnings[0].line, Some(8));

        let text = format!(
            "{base}[audio]\npre_roll_ms = 9000\nsource = \" mic\"\n[audio.vad]\nsilence_threshold_db = 3\n"
        );
        let err = parse(&text, "c.toml").unwrap_err();
        let keys: Vec<_> = err.errors.iter().map(|e| e.key.clone().unwrap()).collect();
        assert_eq!(
            keys,
            vec![
                "audio.pre_roll_ms",
                "audio.source",
                "audio.vad.silence_threshold_db"
            ],
            "{:?}",
            err.errors
        );
        assert_eq!(err.errors[0].line, Some(6));
        assert!(err.errors[0].message.contains("between 0 and 5000"));
    }

    #[test]
    fn decoding_and_end_of_speech_settings_are_checked_by_name() {
        let text = "config_version = 1\n[stt]\nwindow = \"half\"\nbeam_size = 0\nhypotheses = 3\nno_speech_threshold = 1.5\n[audio]\nend_silence_ms = 20000\n[audio.vad]\ndetector = \"silero\"\n";
        let err = parse(text, "test.toml").unwrap_err();
        let keys: Vec<String> = err
            .errors
            .iter()
            .map(|e| e.key.clone().unwrap_or_default())
            .collect();
        for key in [
            "stt.window",
            "stt.beam_size",
            "stt.hypotheses",
            "stt.no_speech_threshold",
            "audio.end_silence_ms",
            "audio.vad.detector",
        ] {
            assert!(keys.iter().any(|k| k == key), "{key} not in {keys:?}");
        }
        let window = err
            .errors
            .iter()
            .find(|e| e.key.as_deref() == Some("stt.window"))
            .unwrap();
        assert_eq!(window.line, Some(3));
        assert!(window.message.contains("\"fit\""), "{}", window.message);
        // The defaults pass, and go to the plugins as they are.
        let ok = parse("config_version = 1\n", "t.toml").unwrap().config;
        assert_eq!(ok.stt.window, "fit");
        assert_eq!((ok.stt.beam_size, ok.stt.hypotheses), (5, 3));
        assert_eq!(ok.audio.configure_params()["end_silence_ms"], 600);
        assert_eq!(ok.audio.configure_params()["vad"]["detector"], "earshot");
    }

    #[test]
    fn stt_and_tts_must_name_a_plugin_of_their_kind() {
        let text = "config_version = 1\n[stt]\nplugin = \"rules\"\n[tts]\nplugin = \"nope\"\n\n[[plugin]]\nid = \"rules\"\nkind = \"router\"\nentrypoint = [\"utter\", \"plugin\", \"rules\"]\n";
        let err = parse(text, "test.toml").unwrap_err();
        let issues: Vec<(String, Option<usize>, String)> = err
            .errors
            .iter()
            .map(|e| (e.key.clone().unwrap_or_default(), e.line, e.message.clone()))
            .collect();
        assert_eq!(issues.len(), 2, "{issues:?}");
        assert_eq!(issues[0].0, "stt.plugin");
        assert_eq!(issues[0].1, Some(3));
        assert!(
            issues[0].2.contains("is of kind \"router\", not \"stt\""),
            "{issues:?}"
        );
        assert_eq!(issues[1].0, "tts.plugin");
        assert!(
            issues[1].2.contains("no [[plugin]] has id \"nope\""),
            "{issues:?}"
        );
    }

    #[test]
    fn key_names_are_checked_and_a_bad_one_names_examples() {
        assert!(check_key_name("KEY_F13").is_ok());
        assert!(check_key_name("KEY_RIGHTCTRL").is_ok());
        assert!(check_key_name("BTN_SIDE").is_ok());
        for bad in ["F13", "KEY_", "key_f13", "KEY_F13;rm", ""] {
            let e = check_key_name(bad).unwrap_err();
            assert!(e.contains("KEY_F13") && e.contains("KEY_RIGHTCTRL"), "{e}");
        }
    }

    #[test]
    fn keyboard_monitor_keys_map_to_keysyms_and_a_bad_one_fails_the_load() {
        assert_eq!(keysym("F13"), Ok(0xffca));
        assert_eq!(keysym("F1"), Ok(0xffbe));
        assert_eq!(keysym("f35"), Ok(0xffe0));
        assert_eq!(keysym(" Pause "), Ok(0xff13));
        assert_eq!(keysym("scroll_lock"), Ok(0xff14));
        assert_eq!(keysym("XF86AudioMicMute"), Ok(0x1008_ffb2));
        assert_eq!(keysym("0xffca"), Ok(0xffca));
        for bad in [
            "F0",
            "F36",
            "F013",
            "KEY_F13",
            "0x0",
            "0xzz",
            "0x2000000",
            "",
            "Shift_L",
        ] {
            let e = keysym(bad).unwrap_err();
            assert!(e.contains("F13") && e.contains("0xffca"), "{bad}: {e}");
        }
        let loaded = parse("config_version = 1\n", "c").unwrap();
        assert!(loaded.config.ptt.keyboard_monitor);
        assert_eq!(loaded.config.ptt.keyboard_monitor_key, "F13");
        let err = parse(
            "config_version = 1\n[ptt]\nkeyboard_monitor = true\nkeyboard_monitor_key = \"KEY_F13\"\n",
            "c",
        )
        .unwrap_err();
        assert_eq!(err.errors.len(), 1, "{err:?}");
        assert_eq!(
            err.errors[0].key.as_deref(),
            Some("ptt.keyboard_monitor_key")
        );
        assert_eq!(err.errors[0].line, Some(4));
        // Another key restarts the triggers; other limits do not.
        let a = PttSection::default();
        let b = PttSection {
            keyboard_monitor_key: "F14".into(),
            ..PttSection::default()
        };
        let c = PttSection {
            min_hold_ms: 10,
            ..PttSection::default()
        };
        assert!(!a.same_triggers(&b));
        assert!(a.same_triggers(&c));
    }

    #[test]
    fn the_capture_plugin_runs_only_with_an_stt_plugin_or_when_picked() {
        let entry = |id: &str, kind: &str| {
            format!("[[plugin]]\nid = \"{id}\"\nkind = \"{kind}\"\nentrypoint = [\"x\"]\n")
        };
        let ids = |c: &Config| c.active_plugins().map(|p| p.id.clone()).collect::<Vec<_>>();
        // (No model named: the stt plugin's own setting, so it runs.)
        let text = format!(
            "config_version = 1\n[stt]\nmodel = \"\"\n{}{}",
            entry("rules", "router"),
            entry("mic", "audio")
        );
        let without_stt = parse(&text, "t.toml").unwrap().config;
        assert_eq!(ids(&without_stt), ["rules"]);
        assert_eq!(ids(&without_stt.clone().only_plugin("mic")), ["mic"]);
        assert_eq!(
            without_stt.capture_plugin().map(|p| p.id.as_str()),
            Some("mic")
        );
        let with_stt = parse(&format!("{text}{}", entry("stt", "stt")), "t.toml")
            .unwrap()
            .config;
        assert_eq!(ids(&with_stt), ["rules", "mic", "stt"]);
        // `utter say` needs none of the voice loop's plugins.
        assert_eq!(ids(&with_stt.without_voice()), ["rules"]);
    }

    #[test]
    fn stt_model_names_resolve_in_the_models_dir_and_paths_stay_paths() {
        let data = tempfile::tempdir().unwrap();
        let dirs = crate::paths::BaseDirs::from_lookup(|name| match name {
            "HOME" => Some("/home/u".into()),
            "XDG_DATA_HOME" => Some(data.path().as_os_str().to_owned()),
            _ => None,
        });
        let stt = |model: &str| SttSection {
            model: model.into(),
            ..SttSection::default()
        };
        let models = data.path().join("utter/models");
        let path = |p: &Path| Some(p.to_string_lossy().into_owned());
        assert_eq!(
            stt("tiny.en").model_path_in(&dirs),
            path(&models.join("tiny.en"))
        );
        assert_eq!(stt("").model_path_in(&dirs), None);
        assert_eq!(stt("/m/w").model_path_in(&dirs), Some("/m/w".into()));
        assert_eq!(stt("./w").model_path_in(&dirs), Some("./w".into()));
        assert_eq!(stt("~/w").model_name(), None);

        let catalog = crate::models::Catalog::parse(
            "[[model]]\nname = \"tiny.en\"\nsource = \"http://h/\"\n[[model.file]]\nname = \"a\"\nsize = 2\nsha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"\n",
            "t",
        )
        .unwrap();
        assert_eq!(
            stt("tiny.en").missing_model_in(&dirs, &catalog).as_deref(),
            Some("speech model tiny.en is not installed: run `utter models pull tiny.en`")
        );
        assert_eq!(stt("/m/w").missing_model_in(&dirs, &catalog), None);
        assert_eq!(stt("").missing_model_in(&dirs, &catalog), None);
        std::fs::create_dir_all(models.join("tiny.en")).unwrap();
        std::fs::write(models.join("tiny.en/a.partial"), "x").unwrap();
        let incomplete = stt("tiny.en").missing_model_in(&dirs, &catalog).unwrap();
        assert!(
            incomplete.contains("incomplete (missing a)"),
            "{incomplete}"
        );
        std::fs::write(models.join("tiny.en/a"), "xy").unwrap();
        assert_eq!(stt("tiny.en").missing_model_in(&dirs, &catalog), None);
        // A name the catalog does not know is fine when its directory exists.
        let other = stt("mine").missing_model_in(&dirs, &catalog).unwrap();
        assert!(other.contains("`utter models list`"), "{other}");
        std::fs::create_dir_all(models.join("mine")).unwrap();
        assert_eq!(stt("mine").missing_model_in(&dirs, &catalog), None);
    }

    #[test]
    fn voice_plugins_wait_for_a_named_model_and_models_source_is_checked() {
        let text = "config_version = 1\n[stt]\nmodel = \"utter-test-no-such-model\"\n[[plugin]]\nid = \"rules\"\nkind = \"router\"\nentrypoint = [\"x\"]\n[[plugin]]\nid = \"mic\"\nkind = \"audio\"\nentrypoint = [\"x\"]\n[[plugin]]\nid = \"stt\"\nkind = \"stt\"\nentrypoint = [\"x\"]\n";
        let config = parse(text, "t.toml").unwrap().config;
        let ids: Vec<&str> = config.active_plugins().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["rules"]);
        let ids: Vec<String> = config
            .clone()
            .only_plugin("mic")
            .active_plugins()
            .map(|p| p.id.clone())
            .collect();
        assert_eq!(ids, ["mic"]);

        let loaded = parse(
            "config_version = 1\n[models]\nsource = \"https://mirror.example/tiny.en/\"\n",
            "t",
        )
        .unwrap();
        assert_eq!(
            loaded.config.models.source,
            "https://mirror.example/tiny.en/"
        );
        let err = parse(
            "config_version = 1\n[models]\nsource = \"mirror:8000\"\n",
            "t",
        )
        .unwrap_err();
        assert_eq!(err.errors[0].key.as_deref(), Some("models.source"));
        assert_eq!(err.errors[0].line, Some(3));
        assert!(
            err.errors[0].message.contains("http://"),
            "{}",
            err.errors[0]
        );
        let embedded = parse(DEFAULT_CONFIG, DEFAULT_CONFIG_ORIGIN).unwrap().config;
        assert_eq!(embedded.stt.model, "tiny.en");
        assert_eq!(embedded.models, ModelsSection::default());
    }

    #[test]
    fn llm_endpoints_must_be_a_plain_http_base_address() {
        for ok in [
            "",
            "http://127.0.0.1:8080",
            "http://localhost:11434/",
            "http://h:1/v1",
        ] {
            assert_eq!(endpoint_problem(ok), None, "{ok}");
        }
        for (bad, why) in [
            ("localhost:8080", "not an http:// URL"),
            (":11434", "not an http:// URL"),
            ("https://h:1", "https is not supported"),
            ("http://h:1/v1/chat/completions", "not an API path"),
        ] {
            let e = endpoint_problem(bad).unwrap_or_default();
            assert!(e.contains(why), "{bad}: {e}");
        }
        // A model with no plugin to use it is said, not silently ignored.
        let text = "config_version = 1\n[llm]\nendpoint = \"http://127.0.0.1:1\"\n";
        let loaded = parse(text, "t.toml").unwrap();
        assert!(
            loaded
                .warnings
                .iter()
                .any(|w| w.message.contains("no [[plugin]] of kind \"llm\"")),
            "{:?}",
            loaded.warnings
        );
    }

    fn set(text: &str, edits: &[(&str, toml_edit::Value)]) -> Result<Edited, ConfigError> {
        let edits: Vec<(String, toml_edit::Value)> = edits
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        set_values(text, "test.toml", &edits)
    }

    #[test]
    fn a_key_deeper_or_longer_than_any_setting_is_refused_at_once() {
        let deep = vec!["a"; 5000].join(".");
        let e = set("", &[(deep.as_str(), true.into())]).expect_err("deep");
        assert!(e.to_string().contains("longer than any setting"), "{e}");
        let long = "x".repeat(300);
        assert!(set("", &[(long.as_str(), true.into())]).is_err());
        // The deepest real setting still works.
        assert!(set("", &[("ptt.evdev", true.into())]).is_ok());
    }

    #[test]
    fn set_values_changes_only_the_values_in_place_with_their_comments() {
        let text = "config_version = 1\n# mine\n[ptt]\nportal = false   # none here\nevdev = false     # not yet\nevdev_key = 'KEY_F13' # thumb\n\n[audio]\nmax_seconds = 30\n";
        let edited = set(
            text,
            &[
                ("ptt.evdev", true.into()),
                ("ptt.evdev_key", "KEY_PAUSE".into()),
                ("ptt.portal", false.into()),
            ],
        )
        .unwrap();
        assert_eq!(edited.changed, ["ptt.evdev", "ptt.evdev_key"]);
        assert_eq!(
            edited.text,
            text.replace("evdev = false     # not yet", "evdev = true     # not yet")
                .replace(
                    "evdev_key = 'KEY_F13' # thumb",
                    "evdev_key = \"KEY_PAUSE\" # thumb"
                )
        );
        // The same value, spelled otherwise, is no change.
        let same = set(
            text,
            &[
                ("ptt.evdev_key", "KEY_F13".into()),
                ("audio.max_seconds", 30.into()),
            ],
        )
        .unwrap();
        assert!(same.changed.is_empty());
        assert_eq!(same.text, text);
    }

    #[test]
    fn type_errors_name_toml_types_not_rust_ones() {
        for (text, line, said) in [
            (
                "config_version = 1\n\nptt = 3\n",
                3,
                "invalid type: integer `3`, expected a table",
            ),
            (
                "config_version = 1\n[audio]\nmax_seconds = -4\n",
                3,
                "invalid value: integer `-4`, expected a whole number from 0 to 4294967295",
            ),
            (
                "config_version = 1\n[policy]\nenabled_ops = \"terminal\"\n",
                3,
                "invalid type: string \"terminal\", expected an array",
            ),
            (
                "config_version = 1\n[[plugin]]\nid = \"a\"\nentrypoint = 5\n",
                4,
                "invalid type: integer `5`, expected a string (one program) or an array of strings (the program and its arguments)",
            ),
            (
                "config_version = 1\n[[plugin]]\nid = \"a\"\nentrypoint = \"a\"\nenv = 2\n",
                5,
                "invalid type: integer `2`, expected a table",
            ),
        ] {
            let e = parse(text, "c.toml").unwrap_err();
            assert_eq!(e.errors[0].line, Some(line), "{e}");
            assert_eq!(e.errors[0].message, said, "{e}");
        }
        assert_eq!(
            in_toml_words("expected struct X or u64"),
            "expected a table or u64"
        );
        assert_eq!(in_toml_words("expected something"), "expected something");
        assert_eq!(in_toml_words("expected "), "expected ");
    }

    #[test]
    fn every_wrong_type_is_named_in_one_run() {
        let text = "config_version = 1\n[runner]\nrpc_timeout_ms = \"soon\"\n[ptt]\nevdev = 3\nmin_hold_ms = 150\n[audio]\nmax_seconds = 1.5\n";
        let e = parse(text, "c.toml").unwrap_err();
        let found: Vec<_> = e
            .errors
            .iter()
            .map(|i| (i.line, i.key.clone().unwrap_or_default()))
            .collect();
        assert_eq!(
            found,
            [
                (Some(3), "runner.rpc_timeout_ms".to_owned()),
                (Some(5), "ptt.evdev".to_owned()),
                (Some(8), "audio.max_seconds".to_owned()),
            ],
            "{e}"
        );
        // A required field of the wrong type is one error, not also "missing field".
        let e = parse(
            "config_version = 1\n[[plugin]]\nid = 5\nentrypoint = \"x\"\n",
            "c.toml",
        )
        .unwrap_err();
        assert_eq!(e.errors.len(), 1, "{e}");
        // An array over several lines cannot go alone: the first error stands by itself.
        let e = parse(
            "config_version = 1\n[policy]\nenabled_ops = [\n1,\n]\n[ptt]\nevdev = 3\n",
            "c.toml",
        )
        .unwrap_err();
        assert_eq!(e.errors[0].line, Some(4), "{e}");
    }

    #[test]
    fn shapes_and_words_serde_would_get_wrong() {
        let plugin = "[[plugin]]\nid = \"a\"\nentrypoint = \"a\"\n";
        for (text, line, key, said) in [
            (
                format!("config_version = 1\n{plugin}transport = \"udp\"\n"),
                5,
                "plugin[0].transport",
                "unknown transport \"udp\": use \"stdio\", \"connect\" or \"listen\"",
            ),
            (
                format!("config_version = 1\n{plugin}transport = {{ stdio = {{}} }}\n"),
                5,
                "plugin[0].transport",
                "invalid type: table, expected a string",
            ),
            (
                format!("config_version = 1\n{plugin}runtime = \"Subprocess\"\n"),
                5,
                "plugin[0].runtime",
                "unknown runtime \"Subprocess\": use \"subprocess\" (\"wasm\" and \"native\" are reserved)",
            ),
            (
                "config_version = 1\nrunner = [30000, 2000]\n".to_owned(),
                2,
                "runner",
                "must be a table, not an array: write it as [runner] with its keys on the lines below",
            ),
            (
                "config_version = 1\n[audio]\nvad = []\n".to_owned(),
                3,
                "audio.vad",
                "must be a table, not an array: write it as [audio.vad] with its keys on the lines below",
            ),
            (
                "config_version = 1\naudio = []\n".to_owned(),
                2,
                "audio",
                "must be a table, not an array: write it as [audio] with its keys on the lines below",
            ),
            (
                "config_version = 1\nplugin = [[\"a\", \"router\"]]\n".to_owned(),
                2,
                "plugin[0]",
                "must be a table of keys (id, entrypoint, ...): write each plugin as [[plugin]] with its keys below",
            ),
            (
                "config_version = 1\n[plugin]\nid = \"a\"\n".to_owned(),
                2,
                "plugin",
                "must be an array of tables: write each plugin as [[plugin]] (two brackets), not [plugin]",
            ),
            (
                "config_version = 1\n[runner]\nhandle_ttl = nan\n".to_owned(),
                3,
                "runner.handle_ttl",
                "must be between 1 and 604800 (seconds, a week), got NaN",
            ),
            (
                "config_version = 1\n[runner]\nhandle_quota = 18446744073709551616\n".to_owned(),
                3,
                "runner.handle_quota",
                "invalid type: integer `18446744073709551616` (past what TOML holds), expected a whole number, 0 or more",
            ),
        ] {
            let e = parse(&text, "c.toml").unwrap_err();
            assert_eq!(e.errors.len(), 1, "{e}");
            assert_eq!(e.errors[0].line, Some(line), "{e}");
            assert_eq!(e.errors[0].key.as_deref(), Some(key), "{e}");
            assert_eq!(e.errors[0].message, said, "{e}");
        }
        // A quoted key holds anything: printed escaped, it cannot forge a line of its own.
        let loaded = parse(
            "config_version = 1\n[ptt]\n\"x\\nerror: forged\\u001b[31m\" = []\n",
            "c.toml",
        )
        .unwrap();
        let shown: String = loaded.warnings.iter().map(ToString::to_string).collect();
        assert!(
            !shown.contains('\u{1b}') && shown.contains("x\\nerror: forged\\u{1b}[31m"),
            "{shown}"
        );
    }

    #[test]
    fn edits_keep_the_files_line_ends_and_byte_order_mark() {
        // Written on Windows, or by an editor set to CRLF: toml_edit alone would give back
        // every line with "\n" and drop the mark.
        let text = "\u{feff}config_version = 1\r\n# mine\r\n[ptt]\r\nevdev = false # not yet\r\n";
        let edited = set(
            text,
            &[("ptt.evdev", true.into()), ("audio.max_seconds", 20.into())],
        )
        .unwrap();
        assert_eq!(
            edited.text,
            "\u{feff}config_version = 1\r\n# mine\r\n[ptt]\r\nevdev = true # not yet\r\n\r\n[audio]\r\nmax_seconds = 20\r\n"
        );
        let old = "\u{feff}# old\r\n[security]\r\nenforce = \"true\"\r\n";
        let m = migrate(old, "c.toml").unwrap();
        assert_eq!(
            m.text,
            "\u{feff}# old\r\nconfig_version = 1\r\n\r\n[security]\r\nenforce = true\r\n"
        );
        assert_eq!(migrate(&m.text, "c.toml").unwrap().text, m.text);
        // A value's own line ends are its own: not made "\r\n" with the file's.
        let edited = set(text, &[("llm.api_model", "first\nsecond".into())]).unwrap();
        assert!(edited.text.contains("\r\n[llm]\r\n"), "{:?}", edited.text);
        let read: toml::Table = edited.text.trim_start_matches('\u{feff}').parse().unwrap();
        assert_eq!(read["llm"]["api_model"].as_str(), Some("first\nsecond"));
    }

    #[test]
    fn a_file_that_cannot_be_layered_is_refused_not_read_alone() {
        // Past what a TOML table holds: read alone it would run no plugins.
        for text in [
            "config_version = 1\nx = 99999999999999999999999\n",
            "config_version = 1\n[runner]\nrpc_timeout_ms = 9223372036854775808\n",
        ] {
            let err = parse(text, "big.toml").unwrap_err();
            assert!(!err.errors.is_empty(), "{text}");
        }
    }

    #[test]
    fn a_file_with_nothing_but_its_version_is_the_built_in_default() {
        // Every value a file leaves out is the built-in default's: one key changes one key.
        let embedded = parse(DEFAULT_CONFIG, DEFAULT_CONFIG_ORIGIN).unwrap().config;
        let mut bare = parse("config_version = 1\n", "bare.toml").unwrap().config;
        assert!(bare.plugins_inherited);
        bare.plugins_inherited = false;
        // A missing [socket] table reads as an empty one (it opens nothing either way).
        bare.socket = bare.socket.or_else(|| Some(SocketSection::default()));
        let mut differ = Vec::new();
        macro_rules! same {
            ($($field:ident),*) => {$(
                if embedded.$field != bare.$field {
                    differ.push(format!("{}: {:?} != {:?}", stringify!($field), embedded.$field, bare.$field));
                }
            )*};
        }
        same!(
            runner, socket, security, policy, plugins, ptt, audio, stt, tts, decide, llm, models,
            plugin
        );
        assert!(
            differ.is_empty(),
            "the struct defaults differ from data/config.default.toml:\n{}",
            differ.join("\n")
        );
    }

    #[test]
    fn a_file_that_names_no_plugins_runs_the_built_in_ones() {
        let one_key = parse("config_version = 1\n[ptt]\nevdev = true\n", "one.toml").unwrap();
        assert!(one_key.config.ptt.evdev);
        assert!(one_key.config.plugins_inherited);
        let ids: Vec<&str> = one_key
            .config
            .plugin
            .iter()
            .map(|p| p.id.as_str())
            .collect();
        let defaults: Vec<&str> = default_plugins().iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, defaults);
        assert!(ids.contains(&"rules") && ids.contains(&"a11y"), "{ids:?}");
        assert!(
            !one_key
                .warnings
                .iter()
                .any(|w| w.message.contains("nothing will run")),
            "{:?}",
            one_key.warnings
        );
        // `[[plugin]]` entries choose; `plugin = []` chooses none, and says so.
        let own = parse(
            "config_version = 1\n[[plugin]]\nid = \"mine\"\nkind = \"router\"\nentrypoint = [\"/bin/true\"]\n",
            "own.toml",
        )
        .unwrap();
        assert_eq!(own.config.plugin.len(), 1);
        assert!(!own.config.plugins_inherited);
        let none = parse("config_version = 1\nplugin = []\n", "none.toml").unwrap();
        assert!(none.config.plugin.is_empty());
        assert!(
            none.warnings
                .iter()
                .any(|w| w.message.contains("nothing will run")),
            "{:?}",
            none.warnings
        );
    }

    #[test]
    fn setting_a_key_of_a_file_that_does_not_exist_writes_that_key_over_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("utter/config.toml");
        let edited = set_in_file(
            &path,
            &[("stt.model".into(), toml_edit::Value::from("/models/tiny"))],
            true,
        )
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, edited.text);
        // The one value alone; the default's plugins run, inherited.
        assert!(!text.contains("id = \"rules\""), "{text}");
        assert!(text.starts_with(NEW_FILE), "{text}");
        let loaded = parse(&text, "x").unwrap().config;
        assert!(loaded.plugins_inherited);
        assert_eq!(loaded.stt.model, "/models/tiny");
        let default = parse(DEFAULT_CONFIG, DEFAULT_CONFIG_ORIGIN).unwrap().config;
        assert_eq!(loaded.plugin, default.plugin);
        // A change that leaves a plugin out says so.
        let edited = set_in_file(
            &path,
            &[(
                "plugins.disabled".into(),
                "[\"a11y\"]".parse::<toml_edit::Value>().unwrap(),
            )],
            false,
        )
        .unwrap();
        assert!(
            edited
                .warnings
                .iter()
                .any(|w| w.message.contains("no longer run: a11y")),
            "{:?}",
            edited.warnings
        );
    }

    #[test]
    fn set_values_adds_missing_keys_and_tables() {
        let text = "config_version = 1\n[ptt]\nevdev = false\n";
        let edited = set(
            text,
            &[
                ("ptt.min_hold_ms", 200.into()),
                ("audio.vad.trim", false.into()),
            ],
        )
        .unwrap();
        let loaded = parse(&edited.text, "test.toml").unwrap();
        assert_eq!(loaded.config.ptt.min_hold_ms, 200);
        assert!(!loaded.config.audio.vad.trim);
        assert!(
            edited
                .text
                .starts_with("config_version = 1\n[ptt]\nevdev = false\nmin_hold_ms = 200\n"),
            "{}",
            edited.text
        );
        // An empty file gets what it needs, and stays a valid config.
        let fresh = set("", &[("ptt.evdev", true.into())]).unwrap();
        assert!(parse(&fresh.text, "test.toml").unwrap().config.ptt.evdev);
    }

    #[test]
    fn set_values_refuses_what_the_runner_would_refuse_and_says_where() {
        let text = "config_version = 1\n[ptt]\nevdev = false\n";
        // A value of the wrong type: the checker's own error, with the line.
        let e = set(text, &[("ptt.evdev", "yes".into())]).unwrap_err();
        assert_eq!(e.errors[0].line, Some(3), "{e:?}");
        assert!(e.errors[0].to_string().contains("test.toml:3"), "{e:?}");
        // Through something that is not a table.
        let e = set(
            "config_version = 1\n[[plugin]]\nid = \"x\"\nkind = \"router\"\nentrypoint = [\"x\"]\n",
            &[("plugin.id", "y".into())],
        )
        .unwrap_err();
        assert!(e.errors[0].message.contains("not a table"), "{e:?}");
        // A table is not a value; an empty part is not a key.
        assert!(set(text, &[("ptt", true.into())]).is_err());
        assert!(set(text, &[("ptt..evdev", true.into())]).is_err());
        assert!(set(text, &[("", true.into())]).is_err());
        // A key the runner does not read is not written: it would change nothing.
        let e = set(text, &[("ptt.evdevv", true.into())]).unwrap_err();
        assert_eq!(e.errors[0].key.as_deref(), Some("ptt.evdevv"), "{e:?}");
        assert!(
            e.errors[0].message.starts_with("is not a key utter reads"),
            "{e:?}"
        );
        let e = set(text, &[("secruity.enforce", true.into())]).unwrap_err();
        assert!(
            e.errors[0].message.contains("did you mean \"security\"?"),
            "{e:?}"
        );
        // Warnings about what was set are shown, down to its elements.
        let edited = set(
            text,
            &[(
                "policy.enabled_ops",
                toml_edit::Value::from_iter(["termnal"]),
            )],
        )
        .unwrap();
        assert!(
            edited.warnings[0]
                .message
                .contains("did you mean \"terminal\""),
            "{:?}",
            edited.warnings
        );
        // Text that is not TOML: its line.
        let e = set("config_version = 1\n[ptt\n", &[("ptt.evdev", true.into())]).unwrap_err();
        assert_eq!(e.errors[0].line, Some(2), "{e:?}");
        // An error at the start of a line is on that line (not the one before), as in
        // check-config.
        let bad = "config_version = 1\n\n\n= 3\n";
        let e = set(bad, &[("ptt.evdev", true.into())]).unwrap_err();
        assert_eq!(e.errors[0].line, Some(4), "{e:?}");
        let e = migrate(bad, "test.toml").unwrap_err();
        assert_eq!(e.errors[0].line, Some(4), "{e:?}");
        assert_eq!(parse(bad, "test.toml").unwrap_err().errors[0].line, Some(4));
    }
}
