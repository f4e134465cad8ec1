//! `utter doctor [--json] [--write-lock]`: everything Utter depends on, checked in one run,
//! each failing line with the command that fixes it. Exit 0 when no check of severity
//! `error` failed, 1 otherwise (warnings are optional parts: no compositor on a server).
//!
//! The JSON (`--json`) has stable field names, versioned by `doctor_version` (a field is
//! only ever added; a rename or removal raises the version):
//!
//! ```text
//! {doctor_version: 1, ok,
//!  runner:   {version, protocol, abi},
//!  config:   {path, ok, errors: [issue], warnings: [issue]}      issue: {file, line, key, message}
//!  service:  {socket, running, detail},
//!  lockfile: {path, present, written},
//!  plugins:  [{id, kind, status, program, sha256, version, protocol, abi, provides,
//!              lock: "match" | "drift" | "unlocked" | "no-lockfile", drift: [..],
//!              deprecations: [..], sandbox}],
//!  checks:   [{name, ok, severity: "error" | "warning", detail, fix}]}
//! ```
//!
//! A check's `severity` is what its failure means, whether it failed or not: `error` fails
//! the run, `warning` does not (a plugin whose program is not installed, no compositor).
//!
//! Check names: `config`, `plugins`, `lockfile`, `sandbox`, `speech-model`, `runtime-dir`,
//! `socket`, `token`, `compositor`, `wayland`, `session-bus`, `portal`, `pipewire`,
//! `accessibility`, `notifications`, `uinput`, `service`.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Value, json};
use utter_core::config::{self, Config, ConfigIssue, LoadedConfig};
use utter_core::lockfile::{LockedPlugin, Lockfile};
use utter_core::paths::BaseDirs;
use utter_core::runner::Runner;
use utter_core::supervisor::{SupervisorOptions, resolve_program};
use utter_ipc::PluginReport;
use utter_protocol::handshake::{ABI, PROTOCOL_VERSION};

use super::connect::endpoint;
use super::output::{exit, out, sanitize};

/// The version of the JSON's field set.
pub const DOCTOR_VERSION: u32 = 1;

/// The arguments of `utter doctor`.
#[derive(clap::Args)]
pub struct Args {
    /// Print JSON with stable field names (see `doctor_version`).
    #[arg(long)]
    json: bool,
    /// Record the plugins as they are now in the install lockfile
    /// ($XDG_STATE_HOME/utter/install.lock), which later runs compare against.
    #[arg(long)]
    write_lock: bool,
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
struct Check {
    name: &'static str,
    ok: bool,
    /// `error` fails the run; `warning` is an optional part.
    severity: &'static str,
    detail: String,
    /// The command (or step) that fixes it, when it failed.
    fix: Option<String>,
}

fn pass(name: &'static str, detail: impl Into<String>) -> Check {
    Check {
        name,
        ok: true,
        severity: "error",
        detail: detail.into(),
        fix: None,
    }
}

fn fail(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
    Check {
        name,
        ok: false,
        severity: "error",
        detail: detail.into(),
        fix: Some(fix.into()),
    }
}

fn warn(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
    Check {
        severity: "warning",
        ..fail(name, detail, fix)
    }
}

/// Run `utter doctor`; `config` is `--config`, `socket` is `--socket`.
pub async fn run(args: &Args, config_path: Option<&Path>, socket: Option<&Path>) -> u8 {
    let dirs = BaseDirs::from_env();
    let mut checks = Vec::new();

    // The config.
    let loaded = config::load(config_path);
    let origin = match &loaded {
        Ok(l) => l.origin.clone(),
        Err(e) => e.errors.first().map(|i| i.file.clone()).unwrap_or_default(),
    };
    let (config, config_json) = match &loaded {
        Ok(l) => {
            checks.push(pass(
                "config",
                format!("{} is valid ({} warnings)", l.origin, l.warnings.len()),
            ));
            (
                Some(l.config.clone()),
                json!({"path": l.origin, "ok": true, "errors": [], "warnings": issues(&l.warnings)}),
            )
        }
        Err(e) => {
            checks.push(fail(
                "config",
                format!(
                    "{} is invalid: {}",
                    origin,
                    e.errors
                        .first()
                        .map(ToString::to_string)
                        .unwrap_or_default()
                ),
                format!("utter check-config {origin}"),
            ));
            (
                None,
                json!({"path": origin, "ok": false, "errors": issues(&e.errors), "warnings": issues(&e.warnings)}),
            )
        }
    };

    // The plugins, started here as `utter plugins` does, against the lockfile.
    let lock_path = dirs.state_dir().map(|d| utter_core::lockfile::path_in(&d));
    // With --write-lock the file is replaced, whatever it held.
    let mut lock_unreadable = false;
    let locked = match lock_path
        .as_deref()
        .filter(|_| !args.write_lock)
        .map(Lockfile::read)
    {
        Some(Ok(lock)) => lock,
        Some(Err(e)) => {
            lock_unreadable = true;
            checks.push(fail(
                "lockfile",
                e,
                "utter doctor --write-lock (records the plugins as they are now)",
            ));
            None
        }
        None => None,
    };
    let mut plugins_json = Vec::new();
    let mut written = false;
    if let (Ok(loaded), Some(config)) = (&loaded, &config) {
        let (reports, now) = current_plugins(loaded, None).await;
        for (report, entry) in reports.iter().zip(&now) {
            plugins_json.push(plugin_json(report, entry, locked.as_ref()));
        }
        let down: Vec<&PluginReport> = reports
            .iter()
            .filter(|p| !p.status.is_running() && p.status != utter_ipc::PluginStatus::Stopped)
            .collect();
        let degraded: Vec<&PluginReport> = reports
            .iter()
            .filter(|p| p.status == utter_ipc::PluginStatus::Degraded)
            .collect();
        if down.is_empty() {
            checks.push(pass(
                "plugins",
                match degraded.len() {
                    0 => format!("{} plugins started and answered", reports.len()),
                    n => format!(
                        "{} plugins started and answered, {n} of them degraded (below)",
                        reports.len()
                    ),
                },
            ));
        }
        // Running without a part they need here: said, as `utter status` does.
        for p in &degraded {
            let why = p.health.strip_prefix("degraded: ").unwrap_or(&p.health);
            checks.push(warn(
                "plugins",
                format!("{} is degraded: {why}", p.id),
                "it runs without that part; `utter plugins` shows each plugin's state",
            ));
        }
        // Nothing plans a command without a router.
        if !reports
            .iter()
            .any(|p| p.kind == "router" && p.status.is_running())
        {
            checks.push(fail(
                "plugins",
                "no router plugin is running: no command can be planned",
                "add to the config: [[plugin]] id = \"rules\" kind = \"router\" entrypoint = [\"utter\", \"plugin\", \"rules\"] (the built-in rules router)",
            ));
        }
        if !down.is_empty() {
            for p in down {
                let why = p.last_error.as_deref().unwrap_or("no reason given");
                let detail = format!("{} is {}: {why}", p.id, p.status.as_str());
                let program = program_of(config, &p.id, None);
                // A plugin whose program is not installed is an optional part left out (the
                // default config names `input`, the speech plugins); one that fails is not.
                checks.push(if why.contains("program not found") {
                    warn(
                        "plugins",
                        detail,
                        format!(
                            "{}, or add {:?} to [plugins] disabled",
                            utter_core::supervisor::install_hint(&program),
                            p.id
                        ),
                    )
                } else {
                    fail(
                        "plugins",
                        detail,
                        format!(
                            "fix its [[plugin]] entry {:?} (see `utter plugins`), or add it to [plugins] disabled",
                            p.id
                        ),
                    )
                });
            }
        }
        let drifted: Vec<String> = plugins_json
            .iter()
            .filter(|p| p["lock"] == "drift")
            .map(|p| format!("{}: {}", p["id"].as_str().unwrap_or(""), p["drift"]))
            .collect();
        let unlocked: Vec<&str> = plugins_json
            .iter()
            .filter(|p| p["lock"] == "unlocked")
            .filter_map(|p| p["id"].as_str())
            .collect();
        if args.write_lock && lock_path.is_none() {
            checks.push(fail(
                "lockfile",
                "no state directory for the install lockfile: neither XDG_STATE_HOME nor HOME is set (or it is not absolute)",
                "set HOME (or XDG_STATE_HOME), then utter doctor --write-lock",
            ));
        }
        if args.write_lock {
            if let Some(path) = &lock_path {
                match lock_of(now).write(path) {
                    Ok(()) => {
                        written = true;
                        checks.push(pass("lockfile", format!("wrote {}", path.display())));
                    }
                    Err(e) => checks.push(fail(
                        "lockfile",
                        format!("cannot write {}: {e}", path.display()),
                        format!(
                            "check that {} is a directory you can write",
                            path.parent().unwrap_or(path).display()
                        ),
                    )),
                }
            }
        } else if lock_unreadable {
            // Said above.
        } else if locked.is_none() {
            checks.push(warn(
                "lockfile",
                "no install lockfile: drift cannot be told",
                "utter doctor --write-lock",
            ));
        } else if drifted.is_empty() && unlocked.is_empty() {
            checks.push(pass(
                "lockfile",
                "every plugin matches the install lockfile",
            ));
        } else {
            if !unlocked.is_empty() {
                checks.push(warn(
                    "lockfile",
                    format!("not in the install lockfile: {}", unlocked.join(", ")),
                    "if they were added on purpose: utter doctor --write-lock",
                ));
            }
            for d in drifted {
                checks.push(warn(
                    "lockfile",
                    format!("drift from the install lockfile: {d}"),
                    "if the change is intended: utter doctor --write-lock",
                ));
            }
        }
        checks.extend(sandbox_check(config, &reports).await);
        if let Some(missing) = config.stt.missing_model() {
            checks.push(warn(
                "speech-model",
                missing,
                format!("utter models pull {}", config.stt.model.trim()),
            ));
        } else {
            match config.stt.model_path() {
                Some(path) if !Path::new(&path).exists() => checks.push(warn(
                    "speech-model",
                    format!("the speech model {path} does not exist"),
                    "point [stt] model at a model directory (or a name that utter models pull installs)",
                )),
                Some(path) => checks.push(pass(
                    "speech-model",
                    format!("the speech model {path} is there"),
                )),
                None => checks.push(pass("speech-model", "no speech model is configured")),
            }
        }
    } else {
        checks.push(fail(
            "plugins",
            "not started: the config is invalid",
            format!("utter check-config {origin}"),
        ));
    }

    // The runtime directory, the socket, the token, the running service.
    let default_config = Config::default();
    let (socket_path, token) = endpoint(socket, config.as_ref().unwrap_or(&default_config));
    checks.extend(runtime_checks(&dirs, &socket_path));
    let (running, service_detail) =
        match utter_ipc::client::Client::connect(&socket_path, token, None).await {
            Ok(client) => match client.status().await {
                Ok(status) => (true, format!("running, {:?}", status.state)),
                Err(e) => (true, format!("answers, but status failed: {}", e.message)),
            },
            Err(e) => (false, e.to_string()),
        };
    checks.push(if running {
        pass("service", service_detail.clone())
    } else if unit_installed(&dirs) {
        warn(
            "service",
            service_detail.clone(),
            "systemctl --user start utter (or utter daemon)",
        )
    } else {
        // No unit to start yet: installing it comes first.
        warn(
            "service",
            format!("{service_detail}; no utter.service is installed"),
            "utter install --user, then systemctl --user enable --now utter (or run utter daemon in a terminal)",
        )
    });

    // The desktop it acts on.
    checks.extend(desktop_checks().await);

    let ok = checks.iter().all(|c| c.ok || c.severity != "error");
    if args.json {
        let report = json!({
            "doctor_version": DOCTOR_VERSION,
            "ok": ok,
            "runner": {"version": env!("CARGO_PKG_VERSION"), "protocol": PROTOCOL_VERSION.to_string(), "abi": ABI},
            "config": config_json,
            "service": {"socket": socket_path.display().to_string(), "running": running, "detail": service_detail},
            "lockfile": {
                "path": lock_path.as_ref().map(|p| p.display().to_string()),
                "present": lock_path.as_ref().is_some_and(|p| p.exists()),
                "written": written,
            },
            "plugins": plugins_json,
            "checks": checks,
        });
        out!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        out!(
            "utter {} (protocol {}, abi {ABI})",
            env!("CARGO_PKG_VERSION"),
            PROTOCOL_VERSION
        );
        for c in &checks {
            let mark = match (c.ok, c.severity) {
                (true, _) => "ok  ",
                (false, "error") => "FAIL",
                (false, _) => "warn",
            };
            out!("{mark} {:<14} {}", c.name, sanitize(&c.detail));
            if let Some(fix) = c.fix.as_ref().filter(|_| !c.ok) {
                out!("     {:<14} fix: {}", "", sanitize(fix));
            }
        }
        out!(
            "{}",
            if ok {
                "no problems that stop utter"
            } else {
                "some checks failed (FAIL lines)"
            }
        );
    }
    if ok { exit::OK } else { exit::NOT_DONE }
}

/// Start the plugins of `loaded` as `utter plugins` does, and stop them: their reports and
/// their lockfile entries (programs hashed now), in config order.
/// The config's plugins, started and asked, and their lock entries; bare program names are
/// looked up in `bin_dir` first (default: beside this executable), as the supervisor does.
async fn current_plugins(
    loaded: &LoadedConfig,
    bin_dir: Option<&Path>,
) -> (Vec<PluginReport>, Vec<LockedPlugin>) {
    let mut options = SupervisorOptions::from_config(&loaded.config);
    if let Some(dir) = bin_dir {
        options.bin_dir = Some(dir.to_path_buf());
    }
    let runner = Runner::start(loaded.clone(), options, None).await;
    let reports = runner.plugins();
    runner.shutdown().await;
    let entries = reports
        .iter()
        .map(|r| LockedPlugin::of(r, &program_of(&loaded.config, &r.id, bin_dir)))
        .collect();
    (reports, entries)
}

fn lock_of(plugins: Vec<LockedPlugin>) -> Lockfile {
    Lockfile {
        lock_version: utter_core::lockfile::LOCK_VERSION,
        utter_version: env!("CARGO_PKG_VERSION").into(),
        protocol: PROTOCOL_VERSION.to_string(),
        plugins,
    }
}

/// Record the plugins of the config at `config` (`None`: the one `utter` would use) as they
/// are now in the install lockfile (what `utter install --user` does after installing):
/// its path and how many plugins it holds.
///
/// # Errors
/// A sentence: the config is invalid, there is no state directory, or the write failed.
pub async fn record_lock(
    config: Option<&Path>,
    bin_dir: Option<&Path>,
) -> Result<(PathBuf, usize), String> {
    let loaded = config::load(config).map_err(|e| {
        format!(
            "the configuration is invalid ({}), so its plugins were not recorded",
            e.errors
                .first()
                .map(ToString::to_string)
                .unwrap_or_default()
        )
    })?;
    let path = BaseDirs::from_env()
        .state_dir()
        .map(|d| utter_core::lockfile::path_in(&d))
        .ok_or("neither XDG_STATE_HOME nor HOME is set")?;
    let (_, now) = current_plugins(&loaded, bin_dir).await;
    let count = now.len();
    lock_of(now)
        .write(&path)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok((path, count))
}

fn issues(list: &[ConfigIssue]) -> Vec<Value> {
    list.iter()
        .map(|i| json!({"file": i.file, "line": i.line, "key": i.key, "message": i.message}))
        .collect()
}

/// The program of the plugin `id`, resolved as the supervisor does (and as execvp would,
/// for a bare name on `PATH`).
fn program_of(config: &Config, id: &str, bin_dir: Option<&Path>) -> PathBuf {
    let Some(entry) = config.plugin.iter().find(|p| p.id == id) else {
        return PathBuf::new();
    };
    let argv = entry.entrypoint.argv();
    utter_core::paths::executable_path(&resolve_program(
        argv.first().map(String::as_str).unwrap_or(""),
        bin_dir,
    ))
}

fn plugin_json(report: &PluginReport, now: &LockedPlugin, lock: Option<&Lockfile>) -> Value {
    let (state, drift) = match lock {
        None => ("no-lockfile", Vec::new()),
        Some(lock) => match lock.plugins.iter().find(|p| p.id == report.id) {
            None => ("unlocked", Vec::new()),
            Some(locked) => {
                let drift = locked.drift(now);
                (if drift.is_empty() { "match" } else { "drift" }, drift)
            }
        },
    };
    let deprecations: Vec<&String> = report
        .warnings
        .iter()
        .filter(|w| w.contains("deprecated"))
        .collect();
    json!({
        "id": report.id,
        "kind": report.kind,
        "status": report.status,
        "program": now.program,
        "sha256": now.sha256,
        "version": now.version,
        "protocol": now.protocol,
        "abi": now.abi,
        "provides": now.provides,
        "lock": state,
        "drift": drift,
        "deprecations": deprecations,
        "sandbox": report.sandbox,
    })
}

/// The permissions a sandbox decides that each sandboxed plugin declares (its hello) but
/// its `[[plugin]]` entry does not grant: what the sandbox would take from it.
fn ungranted(config: &Config, reports: &[PluginReport]) -> Vec<(String, Vec<String>)> {
    const DECIDED: &[&str] = &[
        "network",
        "microphone",
        "accessibility",
        "dbus",
        "wayland",
        "compositor",
        "input-injection",
    ];
    reports
        .iter()
        .filter_map(|r| {
            let entry = config.plugin.iter().find(|e| e.id == r.id)?;
            if !entry.sandbox {
                return None;
            }
            let missing: Vec<String> = r
                .permissions
                .iter()
                .filter(|p| DECIDED.contains(&p.as_str()) && !entry.permissions.contains(p))
                .cloned()
                .collect();
            (!missing.is_empty()).then(|| (r.id.clone(), missing))
        })
        .collect()
}

/// "a11y (accessibility, dbus), input (dbus)".
fn describe_ungranted(list: &[(String, Vec<String>)]) -> String {
    list.iter()
        .map(|(id, missing)| format!("{id} ({})", missing.join(", ")))
        .collect::<Vec<_>>()
        .join(", ")
}

async fn sandbox_check(config: &Config, reports: &[PluginReport]) -> Vec<Check> {
    let ungranted = ungranted(config, reports);
    if !config.security.enforce {
        // Recommend the switch only when it keeps everything working.
        if ungranted.is_empty() {
            return vec![warn(
                "sandbox",
                "[security] enforce is off: plugins run unconfined",
                "set [security] enforce = true in the config (needs bubblewrap); every plugin's entry grants what it declares",
            )];
        }
        return vec![warn(
            "sandbox",
            format!(
                "[security] enforce is off: plugins run unconfined; turned on now, the sandbox would withhold what these declare: {}",
                describe_ungranted(&ungranted)
            ),
            "grant each of them first (permissions = [...] in its [[plugin]] entry), then set [security] enforce = true",
        )];
    }
    let mut checks = Vec::new();
    for (id, missing) in &ungranted {
        let degraded = reports
            .iter()
            .any(|r| &r.id == id && r.status != utter_ipc::status::PluginStatus::Ok);
        let detail = format!(
            "{id} declares {} but its [[plugin]] entry does not grant it, so its sandbox withholds it{}",
            missing.join(", "),
            if degraded {
                " (and it is degraded)"
            } else {
                ""
            }
        );
        checks.push(warn(
            "sandbox",
            detail,
            format!(
                "add permissions = [{}] to its [[plugin]] entry",
                missing
                    .iter()
                    .map(|m| format!("{m:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    checks.extend(sandbox_mechanism(config).await);
    checks
}

async fn sandbox_mechanism(config: &Config) -> Vec<Check> {
    match utter_core::sandbox::Mechanism::detect(true, &config.security.sandbox).await {
        utter_core::sandbox::Mechanism::Bwrap(path) => vec![pass(
            "sandbox",
            format!("plugins run under {}", path.display()),
        )],
        // Chosen, or the fallback where bwrap is missing or does not work.
        utter_core::sandbox::Mechanism::Landlock if config.security.sandbox == "landlock" => {
            vec![pass(
                "sandbox",
                "plugins run under Landlock rules ([security] sandbox = \"landlock\"; UDP, unix sockets and /tmp are not confined)",
            )]
        }
        utter_core::sandbox::Mechanism::Landlock => vec![pass(
            "sandbox",
            "plugins run under Landlock rules: bwrap is missing or does not work here (install bubblewrap for mount and network namespaces)",
        )],
        utter_core::sandbox::Mechanism::Unavailable(why) => vec![fail(
            "sandbox",
            format!("[security] enforce is on, but {why}"),
            "install bubblewrap (apt install bubblewrap)",
        )],
        utter_core::sandbox::Mechanism::Off => Vec::new(),
    }
}

/// The runtime directory (0700, ours), the socket (0600) and the token file (0600).
/// Whether a systemd user unit `utter.service` is installed: the person's own
/// (`$XDG_CONFIG_HOME/systemd/user`, as `utter install --user` writes it) or a package's.
fn unit_installed(dirs: &BaseDirs) -> bool {
    let own = dirs
        .config_home
        .as_ref()
        .map(|c| c.join("systemd/user/utter.service"));
    own.into_iter()
        .chain(
            [
                "/etc/systemd/user",
                "/usr/local/lib/systemd/user",
                "/usr/lib/systemd/user",
            ]
            .iter()
            .map(|d| Path::new(d).join("utter.service")),
        )
        .any(|unit| unit.exists())
}

fn runtime_checks(dirs: &BaseDirs, socket: &Path) -> Vec<Check> {
    let uid = nix::unistd::getuid().as_raw();
    let private = |name: &'static str, path: &Path, mode: u32, what: &str| -> Check {
        match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => pass(
                name,
                format!(
                    "{what} {} does not exist yet (the service creates it)",
                    path.display()
                ),
            ),
            Err(e) => fail(
                name,
                format!("cannot read {what} {}: {e}", path.display()),
                format!("ls -ld {}", path.display()),
            ),
            Ok(meta) if meta.uid() != uid => fail(
                name,
                format!(
                    "{what} {} belongs to uid {}, not to you ({uid})",
                    path.display(),
                    meta.uid()
                ),
                format!(
                    "remove it: rm -r {} (the service makes a new one)",
                    path.display()
                ),
            ),
            Ok(meta) if meta.permissions().mode() & 0o077 != 0 => fail(
                name,
                format!(
                    "{what} {} has mode {:o}; others must not get in (at most {mode:o})",
                    path.display(),
                    meta.permissions().mode() & 0o7777
                ),
                format!("chmod {mode:o} {}", path.display()),
            ),
            Ok(meta) => pass(
                name,
                format!(
                    "{what} {} (mode {:o})",
                    path.display(),
                    meta.permissions().mode() & 0o7777
                ),
            ),
        }
    };
    let mut checks = vec![private(
        "runtime-dir",
        &dirs.runtime_dir(),
        0o700,
        "the runtime directory",
    )];
    checks.push(private("socket", socket, 0o600, "the socket"));
    if let Some(token) = dirs.token() {
        checks.push(private("token", &token, 0o600, "the token file"));
    }
    checks
}

/// What the desktop offers: the compositor, Wayland, the session bus and what is on it,
/// PipeWire, `/dev/uinput`. All warnings: each is needed only by some commands.
async fn desktop_checks() -> Vec<Check> {
    let mut checks = Vec::new();
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let connectable = |path: &Path| std::os::unix::net::UnixStream::connect(path).is_ok();
    // Hyprland names an instance; its request socket is under the runtime directory.
    let hyprland = env("HYPRLAND_INSTANCE_SIGNATURE").map(|signature| {
        let runtime = BaseDirs::from_env().session_runtime_dir().to_path_buf();
        let dir = if signature.contains('/') || signature == ".." {
            PathBuf::new()
        } else {
            runtime.join("hypr").join(&signature)
        };
        (
            "HYPRLAND_INSTANCE_SIGNATURE",
            dir.join(".socket.sock").display().to_string(),
        )
    });
    let compositor = env("NIRI_SOCKET")
        .map(|v| ("NIRI_SOCKET", v))
        .or(hyprland)
        .or_else(|| {
            ["SWAYSOCK", "I3SOCK"]
                .iter()
                .find_map(|name| env(name).map(|v| (*name, v)))
        });
    checks.push(match compositor {
        Some((name, path)) if connectable(Path::new(&path)) => {
            pass("compositor", format!("{name}={path} answers"))
        }
        Some((name, path)) => warn(
            "compositor",
            format!("{name}={path} does not answer"),
            "run utter inside the compositor's session",
        ),
        None => warn(
            "compositor",
            "none of NIRI_SOCKET, HYPRLAND_INSTANCE_SIGNATURE, SWAYSOCK, I3SOCK is set: windows and workspaces are unknown, and the focused application is read from accessibility (GNOME, KDE Plasma)",
            "systemctl --user import-environment NIRI_SOCKET HYPRLAND_INSTANCE_SIGNATURE SWAYSOCK (in the compositor's startup)",
        ),
    });
    let runtime = BaseDirs::from_env().session_runtime_dir().to_path_buf();
    checks.push(match env("WAYLAND_DISPLAY") {
        Some(display) => {
            let path = if display.starts_with('/') {
                PathBuf::from(&display)
            } else {
                runtime.join(&display)
            };
            if connectable(&path) {
                pass("wayland", format!("{} answers", path.display()))
            } else {
                warn(
                    "wayland",
                    format!(
                        "WAYLAND_DISPLAY={display}, but {} does not answer",
                        path.display()
                    ),
                    "run utter inside the Wayland session",
                )
            }
        }
        None => warn(
            "wayland",
            "WAYLAND_DISPLAY is not set: no typing or clipboard through Wayland",
            "systemctl --user import-environment WAYLAND_DISPLAY",
        ),
    });
    let pipewire = env("PIPEWIRE_RUNTIME_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| runtime.clone())
        .join("pipewire-0");
    checks.push(if connectable(&pipewire) {
        pass("pipewire", format!("{} answers", pipewire.display()))
    } else {
        warn(
            "pipewire",
            format!("{} does not answer: no microphone", pipewire.display()),
            "systemctl --user start pipewire wireplumber",
        )
    });
    checks.push(
        match std::fs::OpenOptions::new().write(true).open("/dev/uinput") {
            Ok(_) => pass("uinput", "/dev/uinput can be written"),
            Err(e) => warn(
                "uinput",
                format!("/dev/uinput: {e}: keys are typed only through Wayland or the portal"),
                "sudo modprobe uinput, and a udev rule giving your user access (see docs/src/keys-and-pointer.md)",
            ),
        },
    );
    match zbus::Connection::session().await {
        Err(e) => {
            checks.push(warn(
                "session-bus",
                format!("no session bus: {e}"),
                "run utter doctor from a terminal of your desktop session (where DBUS_SESSION_BUS_ADDRESS is set)",
            ));
            // What is found on the bus cannot be checked without it: said, not left out.
            for name in ["portal", "accessibility", "notifications"] {
                checks.push(warn(
                    name,
                    "not checked: no session bus",
                    "run utter doctor from a terminal of your desktop session",
                ));
            }
        }
        Ok(conn) => {
            checks.push(pass("session-bus", "reachable"));
            let bus = zbus::fdo::DBusProxy::new(&conn).await.ok();
            let activatable: Vec<String> = match &bus {
                Some(bus) => bus
                    .list_activatable_names()
                    .await
                    .map(|names| names.iter().map(|n| n.to_string()).collect())
                    .unwrap_or_default(),
                None => Vec::new(),
            };
            for (name, service, fix) in [
                (
                    "portal",
                    "org.freedesktop.portal.Desktop",
                    "install xdg-desktop-portal and a backend (xdg-desktop-portal-gnome or -gtk)",
                ),
                (
                    "accessibility",
                    "org.a11y.Bus",
                    "install at-spi2-core (clicks on named buttons need it)",
                ),
                (
                    "notifications",
                    "org.freedesktop.Notifications",
                    "run a notification daemon (mako, dunst, swaync)",
                ),
            ] {
                let owned = match (&bus, zbus::names::BusName::try_from(service)) {
                    (Some(bus), Ok(n)) => bus.name_has_owner(n).await.unwrap_or(false),
                    _ => false,
                };
                let can_start = activatable.iter().any(|a| a == service);
                checks.push(if owned || can_start {
                    pass(
                        name,
                        format!(
                            "{service} {}",
                            if owned {
                                "is running"
                            } else {
                                "can be started"
                            }
                        ),
                    )
                } else {
                    warn(name, format!("{service} is not on the session bus"), fix)
                });
            }
        }
    }
    checks
}
