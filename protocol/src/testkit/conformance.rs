//! A conformance checker for plugin authors: run a plugin, hold it to each rule of the
//! protocol the runner depends on, and say what to change (feature `testkit`).
//!
//! [`check`] starts the plugin command line (twice: the second process only sees an
//! incompatible `protocol.hello`) and runs the checks of [`CHECKS`], in that order:
//!
//! | id | rule (PROTOCOL.md) |
//! |---|---|
//! | `handshake.hello` | §3, §4: `protocol.hello` with the runner's version is answered with a compatible `protocol`, the integer `abi` 1 and a `plugin.name` |
//! | `handshake.incompatible-major` | §4: a hello with protocol `"99.0"` is refused with `-32004` |
//! | `handshake.capabilities` | §5: `provides` and `requires` are `name@N` names |
//! | `describe` | §3: `plugin.describe` answers `{methods: [..], streams: [..]}` |
//! | `health` | §3: `plugin.health` answers `{status: "ok" \| "degraded", detail}` |
//! | `manifest` | §11: the manifest's name, version, kind, protocol, provides and requires agree with the hello |
//! | `unknown-method` | §2, §12: an unknown method is answered `-32601`, the id echoed exactly (string and integer) |
//! | `malformed-frame` | §1: a frame whose body is not JSON is answered `-32700` with `id: null`, and the next request is served |
//! | `cancel` | §2, §7: `$/cancel` for an unknown and for an in-flight id is never answered, and serving goes on |
//! | `stdin-eof` | §7: the plugin exits when its stdin closes, within the timeout |
//!
//! Checks on the first process need a successful hello (the runner would go no further);
//! when it failed, or the plugin died during an earlier check, they are reported as skipped
//! with the reason. Every wait is bounded by [`CheckOptions::timeout`].
//!
//! The manifest is [`CheckOptions::manifest`], else a `utter-plugin.toml` next to the
//! program; without one the `manifest` check is skipped.

use super::{SpawnOptions, TestPlugin};
use crate::error::ErrorCode;
use crate::handshake::{self, PROTOCOL_VERSION, PluginInfo, methods};
use crate::host;
use crate::manifest::Manifest;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Check ids, stable: scripts may match on them.
pub mod ids {
    /// The hello with the runner's own version.
    pub const HELLO: &str = "handshake.hello";
    /// The hello with an incompatible major version.
    pub const INCOMPATIBLE_MAJOR: &str = "handshake.incompatible-major";
    /// The capability names in the hello.
    pub const CAPABILITIES: &str = "handshake.capabilities";
    /// The shape of `plugin.describe`.
    pub const DESCRIBE: &str = "describe";
    /// The shape of `plugin.health`.
    pub const HEALTH: &str = "health";
    /// The manifest against the hello.
    pub const MANIFEST: &str = "manifest";
    /// An unknown method.
    pub const UNKNOWN_METHOD: &str = "unknown-method";
    /// A frame that is not JSON.
    pub const MALFORMED_FRAME: &str = "malformed-frame";
    /// `$/cancel` notifications.
    pub const CANCEL: &str = "cancel";
    /// Exit on end of stdin.
    pub const STDIN_EOF: &str = "stdin-eof";
}

/// Every check, `(id, title)`, in the order they run and are reported.
pub const CHECKS: &[(&str, &str)] = &[
    (
        ids::HELLO,
        "protocol.hello is answered with a compatible protocol, abi 1 and a plugin name",
    ),
    (
        ids::INCOMPATIBLE_MAJOR,
        "a hello with an incompatible major version (99.0) is refused with -32004",
    ),
    (
        ids::CAPABILITIES,
        "provides and requires hold well-formed capability names",
    ),
    (
        ids::DESCRIBE,
        "plugin.describe answers {methods: [...], streams: [...]}",
    ),
    (
        ids::HEALTH,
        "plugin.health answers {status: \"ok\" | \"degraded\", detail}",
    ),
    (ids::MANIFEST, "the manifest agrees with the hello"),
    (
        ids::UNKNOWN_METHOD,
        "an unknown method is answered -32601 with the same id",
    ),
    (
        ids::MALFORMED_FRAME,
        "a frame that is not JSON is answered -32700 (id null) and serving goes on",
    ),
    (
        ids::CANCEL,
        "$/cancel for an unknown and an in-flight id is tolerated without a reply",
    ),
    (ids::STDIN_EOF, "the plugin exits when its stdin closes"),
];

/// The title of a check id (the id itself for an unknown one).
pub fn title_of(id: &str) -> &str {
    CHECKS
        .iter()
        .find(|(i, _)| *i == id)
        .map_or(id, |(_, title)| title)
}

/// How to run the checks.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The manifest to compare with the hello; `None` looks for `utter-plugin.toml` next to
    /// the program.
    pub manifest: Option<PathBuf>,
    /// The bound on every wait: each request, and the exit after stdin closes (default 5 s).
    pub timeout: Duration,
    /// Extra environment variables for the plugin.
    pub env: Vec<(OsString, OsString)>,
    /// The plugin's working directory (default: this process's).
    pub current_dir: Option<PathBuf>,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            manifest: None,
            timeout: Duration::from_secs(5),
            env: Vec::new(),
            current_dir: None,
        }
    }
}

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The plugin follows the rule.
    Pass,
    /// It does not; see [`Check::fix`].
    Fail,
    /// The check could not run; [`Check::detail`] says why.
    Skip,
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    /// The stable id (see [`ids`]).
    pub id: String,
    /// What the rule is, in one line.
    pub title: String,
    /// Pass, fail or skip.
    pub status: Status,
    /// `status == Pass`.
    pub ok: bool,
    /// What was seen (for a skip: why it did not run).
    pub detail: String,
    /// For a failure: what to change, in one sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    fn new(id: &str, status: Status, detail: impl Into<String>, fix: Option<String>) -> Check {
        Check {
            id: id.to_owned(),
            title: title_of(id).to_owned(),
            status,
            ok: status == Status::Pass,
            detail: detail.into(),
            fix,
        }
    }

    /// A passed check.
    pub fn pass(id: &str, detail: impl Into<String>) -> Check {
        Check::new(id, Status::Pass, detail, None)
    }

    /// A failed check with what to change.
    pub fn fail(id: &str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check::new(id, Status::Fail, detail, Some(fix.into()))
    }

    /// A check that could not run, and why.
    pub fn skip(id: &str, why: impl Into<String>) -> Check {
        Check::new(id, Status::Skip, why, None)
    }
}

/// Everything [`check`] found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The command line that was checked.
    pub command: Vec<String>,
    /// The plugin as its hello named it.
    #[serde(default)]
    pub plugin: Option<PluginInfo>,
    /// The manifest compared with the hello, if any.
    #[serde(default)]
    pub manifest: Option<String>,
    /// No check failed (skipped ones do not count).
    pub ok: bool,
    /// How many checks passed.
    pub passed: usize,
    /// How many failed.
    pub failed: usize,
    /// How many were skipped.
    pub skipped: usize,
    /// One entry per check of [`CHECKS`], in that order.
    pub checks: Vec<Check>,
    /// The end of what the plugin wrote to stderr during the checks.
    pub stderr: String,
}

impl Report {
    /// The check with this id.
    pub fn check(&self, id: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.id == id)
    }

    /// The ids of the failed checks, in order.
    pub fn failed_ids(&self) -> Vec<&str> {
        self.checks
            .iter()
            .filter(|c| c.status == Status::Fail)
            .map(|c| c.id.as_str())
            .collect()
    }

    /// A line of counts: `"8 passed, 1 failed, 1 skipped"`.
    pub fn summary(&self) -> String {
        format!(
            "{} passed, {} failed, {} skipped",
            self.passed, self.failed, self.skipped
        )
    }

    fn finish(command: &[OsString], checks: Vec<Check>) -> Report {
        let count = |s: Status| checks.iter().filter(|c| c.status == s).count();
        let (passed, failed, skipped) = (
            count(Status::Pass),
            count(Status::Fail),
            count(Status::Skip),
        );
        Report {
            command: command
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            plugin: None,
            manifest: None,
            ok: failed == 0,
            passed,
            failed,
            skipped,
            checks,
            stderr: String::new(),
        }
    }
}

/// Where `program` is: itself when it names a path (relative to `dir`, else the current
/// directory), else the first executable of that name on `PATH`.
pub fn resolve_program(program: &OsStr, dir: Option<&Path>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = Path::new(program);
    let is_executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if path.components().count() > 1 || program.to_string_lossy().contains('/') {
        let full = match dir {
            Some(dir) if path.is_relative() => dir.join(path),
            _ => path.to_path_buf(),
        };
        return is_executable(&full).then_some(full);
    }
    let search = std::env::var_os("PATH")?;
    std::env::split_paths(&search)
        .map(|d| d.join(path))
        .find(|p| is_executable(p))
}

/// The manifest to use: the given one, else `utter-plugin.toml` next to the program.
fn find_manifest(command: &[OsString], options: &CheckOptions) -> Option<PathBuf> {
    if let Some(path) = &options.manifest {
        return Some(path.clone());
    }
    let program = resolve_program(command.first()?, options.current_dir.as_deref())?;
    let beside = program.parent()?.join("utter-plugin.toml");
    beside.is_file().then_some(beside)
}

/// A JSON value in at most `max` characters, for details.
fn brief(value: &Value, max: usize) -> String {
    let text = value.to_string();
    if text.chars().count() <= max {
        text
    } else {
        let cut: String = text.chars().take(max).collect();
        format!("{cut}…")
    }
}

/// The frames since `mark`, for a failure's detail.
fn seen_since(plugin: &TestPlugin, mark: u64) -> String {
    let frames = plugin.frames_since(mark);
    if frames.is_empty() {
        return "it wrote nothing".to_owned();
    }
    let mut out = format!("it wrote {} frame(s):", frames.len());
    for frame in frames.iter().take(3) {
        let shown = match &frame.json {
            Some(v) => brief(v, 160),
            None => format!("{:?} (not JSON)", String::from_utf8_lossy(&frame.body)),
        };
        let _ = write!(out, " {shown}");
    }
    if frames.len() > 3 {
        out.push_str(" …");
    }
    out
}

fn secs(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// A request frame with an id of our choosing.
fn request(id: &Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// Run every check of [`CHECKS`] against the plugin started by `command` (program and
/// arguments). Never panics on what the plugin sends; every wait is bounded.
pub async fn check(command: &[OsString], options: &CheckOptions) -> Report {
    let mut run = Run::new(command, options);
    run.all().await;
    let plugin_info = run.plugin_info.take();
    let manifest = run.manifest_used.take();
    let stderr = run.stderr.clone();
    let mut report = Report::finish(command, std::mem::take(&mut run.checks));
    report.plugin = plugin_info;
    report.manifest = manifest;
    report.stderr = stderr;
    report
}

/// How many bytes of stderr the report keeps.
const REPORT_STDERR: usize = 4 * 1024;

/// A short grace period for things that should already have arrived.
fn grace(timeout: Duration) -> Duration {
    timeout.min(Duration::from_millis(300))
}

struct Run<'a> {
    command: &'a [OsString],
    options: &'a CheckOptions,
    checks: Vec<Check>,
    plugin_info: Option<PluginInfo>,
    manifest_used: Option<String>,
    stderr: String,
    /// Why checks on the main process cannot run, once something broke.
    blocked: Option<String>,
    hello: Option<handshake::HelloResult>,
}

impl<'a> Run<'a> {
    fn new(command: &'a [OsString], options: &'a CheckOptions) -> Run<'a> {
        Run {
            command,
            options,
            checks: Vec::new(),
            plugin_info: None,
            manifest_used: None,
            stderr: String::new(),
            blocked: None,
            hello: None,
        }
    }

    fn spawn_options(&self) -> SpawnOptions {
        SpawnOptions {
            env: self.options.env.clone(),
            current_dir: self.options.current_dir.clone(),
            timeout: self.options.timeout,
            plugin_id: "conformance".to_owned(),
            ..Default::default()
        }
    }

    fn push(&mut self, check: Check) {
        self.checks.push(check);
    }

    /// Skip `id` when something earlier broke, or when the plugin has exited since.
    fn blocked(&mut self, id: &str, plugin: &mut TestPlugin) -> bool {
        if self.blocked.is_none() {
            if let Some(status) = plugin.try_exit_status() {
                self.blocked = Some(format!(
                    "the plugin exited ({status}) during an earlier check"
                ));
            }
        }
        match &self.blocked {
            Some(why) => {
                let why = why.clone();
                self.push(Check::skip(id, why));
                true
            }
            None => false,
        }
    }

    /// The detail for a write to the plugin that failed: normally because it exited.
    async fn write_failed(
        &mut self,
        plugin: &mut TestPlugin,
        error: std::io::Error,
        after: &str,
    ) -> String {
        self.blocked = Some("the plugin's stdin closed".into());
        match plugin.wait_for_exit(grace(self.options.timeout)).await {
            Ok(Some(status)) => format!("the plugin exited ({status}) after {after}"),
            _ => format!("could not write to the plugin after {after}: {error}"),
        }
    }

    async fn all(&mut self) {
        let timeout = self.options.timeout;
        let mut plugin = match TestPlugin::spawn(self.command, self.spawn_options()) {
            Ok(p) => p,
            Err(e) => {
                let shown = self
                    .command
                    .iter()
                    .map(|a| a.to_string_lossy())
                    .collect::<Vec<_>>()
                    .join(" ");
                self.push(Check::fail(
                    ids::HELLO,
                    format!("cannot start `{shown}`: {e}"),
                    "Give the command line of an executable plugin (program, then its arguments).",
                ));
                for (id, _) in &CHECKS[1..] {
                    self.push(Check::skip(id, "the plugin could not be started"));
                }
                return;
            }
        };

        let hello = self.hello(&mut plugin).await;
        self.push(hello);
        let incompatible = self.incompatible_major().await;
        self.push(incompatible);

        for id in [ids::CAPABILITIES, ids::DESCRIBE, ids::HEALTH, ids::MANIFEST] {
            if self.blocked(id, &mut plugin) {
                continue;
            }
            let check = match id {
                ids::CAPABILITIES => self.capabilities(),
                ids::DESCRIBE => self.describe(&plugin).await,
                ids::HEALTH => self.health(&plugin).await,
                _ => self.manifest(),
            };
            self.push(check);
        }
        for id in [ids::UNKNOWN_METHOD, ids::MALFORMED_FRAME, ids::CANCEL] {
            if self.blocked(id, &mut plugin) {
                continue;
            }
            let check = match id {
                ids::UNKNOWN_METHOD => self.unknown_method(&mut plugin).await,
                ids::MALFORMED_FRAME => self.malformed_frame(&mut plugin).await,
                _ => self.cancel(&mut plugin).await,
            };
            self.push(check);
        }

        // End of stdin: runs whatever happened before, as long as the process still lives.
        let check = match plugin.try_exit_status() {
            Some(status) => Check::skip(
                ids::STDIN_EOF,
                format!("the plugin had already exited ({status}) before its stdin was closed"),
            ),
            None => {
                plugin.close_stdin().await;
                let started = Instant::now();
                match plugin.wait_for_exit(timeout).await {
                    Ok(Some(status)) => Check::pass(
                        ids::STDIN_EOF,
                        format!(
                            "exited ({status}) {} ms after its stdin closed",
                            started.elapsed().as_millis()
                        ),
                    ),
                    Ok(None) => Check::fail(
                        ids::STDIN_EOF,
                        format!("still running {} after its stdin closed", secs(timeout)),
                        "Exit when stdin reaches end of file: the runner closes it to stop a plugin and kills it 2 s later (PROTOCOL.md §7).",
                    ),
                    Err(e) => Check::fail(
                        ids::STDIN_EOF,
                        format!("could not wait for the plugin: {e}"),
                        "Exit when stdin reaches end of file (PROTOCOL.md §7).",
                    ),
                }
            }
        };
        self.push(check);
        let _ = plugin.kill().await;
        let text = plugin.stderr();
        let start = text.len().saturating_sub(REPORT_STDERR);
        let start = (start..text.len())
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(text.len());
        self.stderr = text[start..].to_owned();
    }

    async fn hello(&mut self, plugin: &mut TestPlugin) -> Check {
        let options = plugin.handshake_options();
        let params = host::hello_params_value(&options.hello_params());
        let timeout = self.options.timeout;
        let raw = match plugin
            .request_with_timeout(methods::HELLO, params.clone(), Some(timeout))
            .await
        {
            Ok(raw) => raw,
            Err(e) => {
                self.blocked = Some("protocol.hello failed, and the runner goes no further".into());
                let exited = plugin.wait_for_exit(grace(timeout)).await.ok().flatten();
                let detail = match (exited, e.kind()) {
                    (Some(status), _) => {
                        format!("the plugin exited ({status}) instead of answering")
                    }
                    (None, ErrorCode::Timeout) => format!("no answer within {}", secs(timeout)),
                    (None, _) => format!("answered with an error: {e}"),
                };
                let fix = match e.kind() {
                    ErrorCode::IncompatibleVersion => format!(
                        "Accept the runner's protocol {PROTOCOL_VERSION}: refuse only a different major version (handshake::negotiate does this)."
                    ),
                    _ => "Answer protocol.hello {protocol, abi, runner, epoch} with {protocol: \"1.0\", abi: 1, plugin: {name, version, kind}, transport, provides, requires, permissions} (PROTOCOL.md §3).".to_owned(),
                };
                return Check::fail(
                    ids::HELLO,
                    format!("{detail} (sent {})", brief(&params, 200)),
                    fix,
                );
            }
        };
        let result = match host::parse_hello(raw.clone()) {
            Ok(r) => r,
            Err(e) => {
                self.blocked = Some("the hello result could not be read".into());
                return Check::fail(
                    ids::HELLO,
                    format!("{} (got {})", e.error().message, brief(&raw, 200)),
                    "Answer {protocol: \"1.0\", abi: 1, plugin: {name, version, kind}, transport, provides: [], requires: [], permissions: []}, with abi the JSON integer 1 (PROTOCOL.md §3, §4).",
                );
            }
        };
        self.plugin_info = Some(result.plugin.clone());
        self.hello = Some(result.clone());
        let negotiated = match handshake::negotiate(
            PROTOCOL_VERSION,
            &result.protocol,
            Some(result.abi),
        ) {
            Ok(n) => n,
            Err(e) => {
                self.blocked = Some(
                    "the hello's version is incompatible, and the runner goes no further".into(),
                );
                return Check::fail(
                    ids::HELLO,
                    e.message,
                    format!(
                        "Answer protocol \"{PROTOCOL_VERSION}\" (or a minor version the runner accepts: same major, at most {} minors older) and abi 1.",
                        handshake::MINOR_WINDOW
                    ),
                );
            }
        };
        if result.plugin.name.trim().is_empty() {
            self.blocked = Some("the hello names no plugin".into());
            return Check::fail(
                ids::HELLO,
                format!(
                    "the hello result has no plugin.name (got {})",
                    brief(&raw, 200)
                ),
                "Put plugin: {name, version, kind} in the hello result, name being the manifest's name.",
            );
        }
        let mut detail = format!(
            "plugin {:?} {} ({}), protocol {}, abi {}",
            result.plugin.name,
            result.plugin.version,
            if result.plugin.kind.is_empty() {
                "no kind"
            } else {
                &result.plugin.kind
            },
            result.protocol,
            result.abi
        );
        if let Some(w) = negotiated.warning {
            let _ = write!(detail, "; {w}");
        }
        Check::pass(ids::HELLO, detail)
    }

    async fn incompatible_major(&mut self) -> Check {
        let id = ids::INCOMPATIBLE_MAJOR;
        let timeout = self.options.timeout;
        let mut plugin = match TestPlugin::spawn(self.command, self.spawn_options()) {
            Ok(p) => p,
            Err(e) => {
                return Check::fail(
                    id,
                    format!("could not start a second process: {e}"),
                    "Let the plugin start more than once (the runner respawns it after a crash).",
                );
            }
        };
        let params = json!({
            "protocol": "99.0",
            "abi": handshake::ABI,
            "runner": host::default_runner_name(),
            "epoch": 0,
        });
        let answer = plugin
            .request_with_timeout(methods::HELLO, params, Some(timeout))
            .await;
        let exited = match &answer {
            Err(e) if e.kind() == ErrorCode::PluginError => {
                plugin.wait_for_exit(grace(timeout)).await.ok().flatten()
            }
            _ => None,
        };
        let _ = plugin.kill().await;
        let fix = "Compare the runner's protocol major with yours and answer a different one with error -32004, data {runner, plugin} (PROTOCOL.md §4; handshake::negotiate does this).";
        match answer {
            Err(e) if e.kind() == ErrorCode::IncompatibleVersion => {
                Check::pass(id, format!("refused: {}", e.message))
            }
            Err(e) if e.kind() == ErrorCode::Timeout => {
                Check::fail(id, format!("no answer within {}", secs(timeout)), fix)
            }
            Err(e) => {
                let detail = match exited {
                    Some(status) => format!("the plugin exited ({status}) instead of answering"),
                    None => format!("answered error {} instead of -32004: {}", e.code, e.message),
                };
                Check::fail(id, detail, fix)
            }
            Ok(result) => Check::fail(
                id,
                format!(
                    "accepted a runner speaking protocol 99.0 (answered {})",
                    brief(&result, 200)
                ),
                fix,
            ),
        }
    }

    fn capabilities(&mut self) -> Check {
        let id = ids::CAPABILITIES;
        let Some(hello) = &self.hello else {
            return Check::skip(id, "there is no hello result to read");
        };
        match host::check_capabilities(hello.provides.iter().chain(&hello.requires), None) {
            Ok(warnings) => {
                let mut detail = format!(
                    "provides {:?}, requires {:?}",
                    hello.provides, hello.requires
                );
                for w in warnings {
                    let _ = write!(detail, "; warning: {w}");
                }
                Check::pass(id, detail)
            }
            Err(e) => Check::fail(
                id,
                e.error().message.clone(),
                "Write every capability as name@N with a lowercase dotted name (e.g. action.open_url@1), or experimental/Name@N for your own (PROTOCOL.md §5).",
            ),
        }
    }

    async fn describe(&mut self, plugin: &TestPlugin) -> Check {
        let id = ids::DESCRIBE;
        let fix_shape = "Answer plugin.describe with {methods: [\"your.method\", ...], streams: [...]}: arrays of method names (PROTOCOL.md §3).";
        let raw = match plugin
            .request_with_timeout(methods::DESCRIBE, json!({}), Some(self.options.timeout))
            .await
        {
            Ok(raw) => raw,
            Err(e) => {
                return Check::fail(
                    id,
                    format!("plugin.describe failed: {e}"),
                    "Serve plugin.describe {} with {methods: [...], streams: [...]} (PROTOCOL.md §3).",
                );
            }
        };
        let Value::Object(obj) = &raw else {
            return Check::fail(
                id,
                format!("the result is not an object: {}", brief(&raw, 200)),
                fix_shape,
            );
        };
        let mut problems = Vec::new();
        let mut list = |field: &str, required: bool| -> usize {
            match obj.get(field) {
                None if required => {
                    problems.push(format!("no {field:?} list"));
                    0
                }
                None => 0,
                Some(Value::Array(items)) => {
                    let bad: Vec<String> = items
                        .iter()
                        .filter(|v| v.as_str().is_none_or(str::is_empty))
                        .map(|v| brief(v, 60))
                        .collect();
                    if !bad.is_empty() {
                        problems.push(format!(
                            "{field:?} holds entries that are not method names: {}",
                            bad.join(", ")
                        ));
                    }
                    items.len()
                }
                Some(other) => {
                    problems.push(format!("{field:?} is not an array: {}", brief(other, 80)));
                    0
                }
            }
        };
        let n_methods = list("methods", true);
        let n_streams = list("streams", false);
        list("side_effect_free", false);
        if problems.is_empty() {
            if let Err(e) = host::parse_describe(raw.clone()) {
                problems.push(e.error().message.clone());
            }
        }
        if problems.is_empty() {
            Check::pass(id, format!("{n_methods} method(s), {n_streams} stream(s)"))
        } else {
            Check::fail(
                id,
                format!("{} (got {})", problems.join("; "), brief(&raw, 200)),
                fix_shape,
            )
        }
    }

    async fn health(&mut self, plugin: &TestPlugin) -> Check {
        let id = ids::HEALTH;
        let fix_shape = "Answer plugin.health with {status: \"ok\"} or {status: \"degraded\", detail: \"why\"} (PROTOCOL.md §3).";
        let raw = match plugin
            .request_with_timeout(methods::HEALTH, json!({}), Some(self.options.timeout))
            .await
        {
            Ok(raw) => raw,
            Err(e) => {
                return Check::fail(
                    id,
                    format!("plugin.health failed: {e}"),
                    "Serve plugin.health {} with {status: \"ok\" | \"degraded\", detail} (PROTOCOL.md §3).",
                );
            }
        };
        let status = raw.get("status");
        let detail = raw.get("detail");
        let mut problems = Vec::new();
        if !raw.is_object() {
            problems.push("the result is not an object".to_owned());
        } else {
            match status.and_then(Value::as_str) {
                Some("ok" | "degraded") => {}
                Some(other) => problems.push(format!(
                    "status {other:?} is neither \"ok\" nor \"degraded\""
                )),
                None => problems.push("no \"status\" string".to_owned()),
            }
            if detail.is_some_and(|d| !d.is_string()) {
                problems.push("\"detail\" is not a string".to_owned());
            }
            if problems.is_empty() {
                if let Err(e) = host::parse_health(raw.clone()) {
                    problems.push(e.error().message.clone());
                }
            }
        }
        if problems.is_empty() {
            Check::pass(id, format!("answered {}", brief(&raw, 200)))
        } else {
            Check::fail(
                id,
                format!("{} (got {})", problems.join("; "), brief(&raw, 200)),
                fix_shape,
            )
        }
    }

    fn manifest(&mut self) -> Check {
        let id = ids::MANIFEST;
        let Some(path) = find_manifest(self.command, self.options) else {
            let beside = self
                .command
                .first()
                .and_then(|p| resolve_program(p, self.options.current_dir.as_deref()))
                .map(|p| format!(" next to {}", p.display()))
                .unwrap_or_default();
            return Check::skip(
                id,
                format!("no manifest: none given (--manifest) and no utter-plugin.toml{beside}"),
            );
        };
        self.manifest_used = Some(path.display().to_string());
        let Some(hello) = &self.hello else {
            return Check::skip(id, "there is no hello result to compare");
        };
        let manifest = match Manifest::from_path(&path) {
            Ok(m) => m,
            Err(e) => {
                return Check::fail(
                    id,
                    e.to_string(),
                    "Fix the manifest so it passes `utter check-manifest` (PROTOCOL.md §11).",
                );
            }
        };
        let set = |v: &[String]| v.iter().cloned().collect::<BTreeSet<_>>();
        let mut differences = Vec::new();
        let mut compare = |field: &str, ours: String, theirs: String| {
            if ours != theirs {
                differences.push(format!("{field}: manifest {ours}, hello {theirs}"));
            }
        };
        compare(
            "name",
            format!("{:?}", manifest.name),
            format!("{:?}", hello.plugin.name),
        );
        compare(
            "version",
            format!("{:?}", manifest.version),
            format!("{:?}", hello.plugin.version),
        );
        compare(
            "kind",
            format!("{:?}", manifest.kind),
            format!("{:?}", hello.plugin.kind),
        );
        compare(
            "protocol",
            format!("{:?}", manifest.protocol),
            format!("{:?}", hello.protocol),
        );
        compare(
            "provides",
            format!("{:?}", set(&manifest.provides)),
            format!("{:?}", set(&hello.provides)),
        );
        compare(
            "requires",
            format!("{:?}", set(&manifest.requires)),
            format!("{:?}", set(&hello.requires)),
        );
        if differences.is_empty() {
            Check::pass(id, format!("{} agrees with the hello", path.display()))
        } else {
            Check::fail(
                id,
                format!("{}: {}", path.display(), differences.join("; ")),
                "Answer the hello from the manifest (plugin::serve does), or change the manifest to say what the plugin really is and does.",
            )
        }
    }

    async fn unknown_method(&mut self, plugin: &mut TestPlugin) -> Check {
        let id = ids::UNKNOWN_METHOD;
        let timeout = self.options.timeout;
        let fix = "Answer every request for a method you do not serve with error -32601, echoing its id exactly as sent, string or integer (PROTOCOL.md §2, §12).";
        let method = "conformance.no_such_method";
        let epoch = plugin.epoch();
        let ids_sent = [
            json!(format!("{epoch}:conformance-unknown")),
            json!(7_770_001),
        ];
        let mut seen = Vec::new();
        for sent in &ids_sent {
            let mark = plugin.frame_mark();
            if let Err(e) = plugin
                .write_message(&request(sent, method, json!({})))
                .await
            {
                let detail = self.write_failed(plugin, e, "the previous request").await;
                return Check::fail(id, detail, fix);
            }
            let Some(answer) = plugin.wait_for_response(mark, sent, timeout).await else {
                return Check::fail(
                    id,
                    format!(
                        "no response with id {sent} to {method} within {}; {}",
                        secs(timeout),
                        seen_since(plugin, mark)
                    ),
                    fix,
                );
            };
            match answer.pointer("/error/code").and_then(Value::as_i64) {
                Some(-32601) => seen.push(format!("id {sent}: -32601")),
                Some(code) => {
                    return Check::fail(
                        id,
                        format!(
                            "answered id {sent} with error {code} instead of -32601: {}",
                            brief(&answer, 200)
                        ),
                        fix,
                    );
                }
                None => {
                    return Check::fail(
                        id,
                        format!(
                            "answered {method} (id {sent}) as if it existed: {}",
                            brief(&answer, 200)
                        ),
                        fix,
                    );
                }
            }
        }
        Check::pass(id, seen.join(", "))
    }

    async fn malformed_frame(&mut self, plugin: &mut TestPlugin) -> Check {
        let id = ids::MALFORMED_FRAME;
        let timeout = self.options.timeout;
        let fix = "When a frame's body is not JSON, answer {\"id\": null, \"error\": {\"code\": -32700}} and go on reading the next frame (PROTOCOL.md §1).";
        let after = json!(format!("{}:conformance-after-malformed", plugin.epoch()));
        let mark = plugin.frame_mark();
        let written = match plugin.write_frame(b"{this is not JSON").await {
            Ok(()) => {
                plugin
                    .write_message(&request(&after, methods::HEALTH, json!({})))
                    .await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            let detail = self
                .write_failed(plugin, e, "a frame that is not JSON")
                .await;
            return Check::fail(id, detail, fix);
        }
        let is_parse_error = |f: &super::LoggedFrame| {
            f.is_response_to(&Value::Null) && f.error_code() == Some(-32700)
        };
        let served = plugin.wait_for_response(mark, &after, timeout).await;
        // The parse error normally comes first; allow a moment for one sent out of order.
        let wait = if served.is_some() {
            grace(timeout)
        } else {
            Duration::ZERO
        };
        let parse_error = plugin.wait_for_frame(mark, wait, is_parse_error).await;
        match (parse_error, served) {
            (Some(_), Some(_)) => Check::pass(
                id,
                "answered -32700 with id null, then served plugin.health",
            ),
            (None, Some(_)) => Check::fail(
                id,
                format!(
                    "served the next request but never answered the malformed frame; {}",
                    seen_since(plugin, mark)
                ),
                fix,
            ),
            (_, None) => {
                let exited = plugin.wait_for_exit(grace(timeout)).await.ok().flatten();
                let what = match exited {
                    Some(status) => format!("the plugin exited ({status})"),
                    None => format!("no answer to the next request within {}", secs(timeout)),
                };
                self.blocked = Some(format!("the plugin stopped serving during {id}"));
                Check::fail(
                    id,
                    format!(
                        "after a frame that is not JSON: {what}; {}",
                        seen_since(plugin, mark)
                    ),
                    fix,
                )
            }
        }
    }

    async fn cancel(&mut self, plugin: &mut TestPlugin) -> Check {
        let id = ids::CANCEL;
        let timeout = self.options.timeout;
        let fix = "Treat $/cancel as a notification: never answer it, ignore ids you do not know, and answer a cancelled request once (-32002 or its result) (PROTOCOL.md §2, §7).";
        let epoch = plugin.epoch();
        let unknown = json!(format!("{epoch}:conformance-never-sent"));
        let in_flight = json!(format!("{epoch}:conformance-in-flight"));
        let after = json!(format!("{epoch}:conformance-after-cancel"));
        let cancel = |target: &Value| json!({"jsonrpc": "2.0", "method": "$/cancel", "params": {"id": target}});
        let mark = plugin.frame_mark();
        let messages = [
            cancel(&unknown),
            request(&in_flight, methods::HEALTH, json!({})),
            cancel(&in_flight),
            request(&after, methods::HEALTH, json!({})),
        ];
        let mut last_sent = "the previous check";
        for (message, what) in messages.iter().zip([
            "$/cancel for an unknown id",
            "a request",
            "$/cancel for an in-flight request",
            "a request",
        ]) {
            if let Err(e) = plugin.write_message(message).await {
                let detail = self.write_failed(plugin, e, last_sent).await;
                return Check::fail(id, detail, fix);
            }
            last_sent = what;
        }
        let served = plugin.wait_for_response(mark, &after, timeout).await;
        if served.is_none() {
            let exited = plugin.wait_for_exit(grace(timeout)).await.ok().flatten();
            let what = match exited {
                Some(status) => format!("the plugin exited ({status})"),
                None => format!("no answer to the next request within {}", secs(timeout)),
            };
            self.blocked = Some(format!("the plugin stopped serving during {id}"));
            return Check::fail(
                id,
                format!("after $/cancel: {what}; {}", seen_since(plugin, mark)),
                fix,
            );
        }
        let answered_in_flight = plugin
            .wait_for_response(mark, &in_flight, grace(timeout))
            .await;
        // Anything else that arrived meanwhile (and a moment after) answers a notification.
        tokio::time::sleep(grace(timeout)).await;
        let frames = plugin.frames_since(mark);
        let responses_to =
            |target: &Value| frames.iter().filter(|f| f.is_response_to(target)).count();
        let mut problems = Vec::new();
        let stray: Vec<String> = frames
            .iter()
            .filter(|f| {
                f.json.as_ref().is_some_and(|j| j.get("method").is_none())
                    && !f.is_response_to(&in_flight)
                    && !f.is_response_to(&after)
            })
            .map(|f| f.json.as_ref().map_or_else(String::new, |j| brief(j, 160)))
            .collect();
        if !stray.is_empty() {
            problems.push(format!(
                "answered a $/cancel notification: {}",
                stray.join(" ")
            ));
        }
        if answered_in_flight.is_none() {
            problems.push(format!(
                "never answered the cancelled request {in_flight} (answer it once: -32002 or its result)"
            ));
        }
        if responses_to(&in_flight) > 1 {
            problems.push(format!(
                "answered the cancelled request {in_flight} more than once"
            ));
        }
        if problems.is_empty() {
            let how = answered_in_flight
                .as_ref()
                .and_then(|a| a.pointer("/error/code").and_then(Value::as_i64))
                .map_or_else(
                    || "with its result".to_owned(),
                    |c| format!("with error {c}"),
                );
            Check::pass(
                id,
                format!(
                    "ignored the unknown id, answered the in-flight request {how}, kept serving"
                ),
            )
        } else {
            Check::fail(id, problems.join("; "), fix)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_check_has_a_distinct_id_and_a_title() {
        let ids: BTreeSet<&str> = CHECKS.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids.len(), CHECKS.len());
        assert_eq!(title_of(ids::CANCEL), CHECKS[8].1);
        assert_eq!(title_of("nope"), "nope");
    }

    #[test]
    fn the_report_serialises_with_lowercase_statuses() {
        let report = Report::finish(
            &["x".into()],
            vec![
                Check::pass(ids::HELLO, "fine"),
                Check::fail(ids::HEALTH, "bad", "fix it"),
                Check::skip(ids::CANCEL, "why"),
            ],
        );
        assert!(!report.ok);
        assert_eq!(report.summary(), "1 passed, 1 failed, 1 skipped");
        assert_eq!(report.failed_ids(), [ids::HEALTH]);
        let value = serde_json::to_value(&report).unwrap();
        assert_eq!(value["checks"][1]["status"], "fail");
        assert_eq!(value["checks"][1]["fix"], "fix it");
        assert!(value["checks"][0].get("fix").is_none());
        let back: Report = serde_json::from_value(value).unwrap();
        assert_eq!(back, report);
    }

    #[tokio::test]
    async fn a_program_that_does_not_exist_fails_the_hello_and_skips_the_rest() {
        let report = check(
            &["/nonexistent/utter-plugin".into()],
            &CheckOptions::default(),
        )
        .await;
        assert_eq!(report.failed_ids(), [ids::HELLO]);
        assert_eq!(report.skipped, CHECKS.len() - 1);
    }

    #[test]
    fn programs_are_found_on_path_and_by_path() {
        assert!(resolve_program(OsStr::new("sh"), None).is_some());
        assert!(resolve_program(OsStr::new("/bin/sh"), None).is_some());
        assert!(resolve_program(OsStr::new("./no-such-program"), None).is_none());
        assert!(resolve_program(OsStr::new("no-such-program-anywhere"), None).is_none());
    }
}
