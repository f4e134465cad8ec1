//! `utter install --user` and `utter uninstall --user`: put the runner in place as a systemd
//! user service for the current user, and take exactly that away again.
//!
//! | file | installed to | from |
//! |---|---|---|
//! | binary | `~/.local/bin/utter` (or `--bin-dir DIR`) | the running `utter` executable |
//! | wrapper | `<bin-dir>/../libexec/utter/utter-session-env` | `systemd/utter-session-env` |
//! | unit | `$XDG_CONFIG_HOME/systemd/user/utter.service` | `systemd/utter.service` |
//! | D-Bus activation | `$XDG_DATA_HOME/dbus-1/services/dev.utter.Runner1.service` | `dbus/dev.utter.Runner1.service` |
//!
//! The templates carry the packaged paths (`/usr/bin/utter`,
//! `/usr/libexec/utter/utter-session-env`); the installer rewrites the unit's `ExecStart=` and
//! the activation file's `Exec=` to the installed ones. The wrapper goes to `libexec/` beside
//! `bin/`, as a package puts it under `/usr/libexec`, so it stays off `PATH`.
//!
//! Every file is written atomically (a temporary file in the same directory, then a rename);
//! a file that already holds the same bytes and mode is left alone ("unchanged"); a different
//! one is replaced, and the report says so. What was installed is recorded with its SHA-256 in
//! `$XDG_STATE_HOME/utter/installed.json`; uninstall removes exactly the files listed there
//! and keeps any whose content changed since, unless forced. The XDG base directories and
//! `HOME` come from the environment (relative XDG values are ignored, as the XDG spec says).
//!
//! Both may run `systemctl --user` (install: `daemon-reload`; uninstall: `disable --now`, then
//! `daemon-reload`), and report what it said; a missing or unreachable user manager is never
//! an error.
//!
//! The command-line side is at the end: [`InstallArgs`] and [`run_install`],
//! [`UninstallArgs`] and [`run_uninstall`] print the report (text, or JSON with `--json`)
//! and choose the exit code.

use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::output::{exit, out, print_json};

/// The unit's template, with the packaged paths.
pub const UNIT_TEMPLATE: &str = include_str!("../../systemd/utter.service");
/// The Wayland-readiness wrapper (`utter-session-env`), installed as it is.
pub const WRAPPER: &str = include_str!("../../systemd/utter-session-env");
/// The D-Bus activation file's template, with the packaged binary path.
pub const DBUS_SERVICE_TEMPLATE: &str = include_str!("../../dbus/dev.utter.Runner1.service");

/// The unit's name.
pub const UNIT_NAME: &str = "utter.service";
/// The D-Bus activation file's name.
pub const DBUS_SERVICE_NAME: &str = "dev.utter.Runner1.service";
/// The wrapper's file name.
pub const WRAPPER_NAME: &str = "utter-session-env";

/// The binary's path in the templates.
const TEMPLATE_BINARY: &str = "/usr/bin/utter";
/// The wrapper's path in the unit template.
const TEMPLATE_WRAPPER: &str = "/usr/libexec/utter/utter-session-env";
/// The manifest format this code writes.
const MANIFEST_VERSION: u32 = 1;
/// How long one `systemctl --user` call may take.
const SYSTEMCTL_LIMIT: Duration = Duration::from_secs(20);

/// Why an install or uninstall could not be done.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// `HOME` (or an XDG directory) is needed and missing.
    #[error("{0}")]
    Environment(String),
    /// A path cannot be written into a unit or activation file.
    #[error("{path}: {message}")]
    BadPath {
        /// The path.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// Reading or writing a file failed.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// What was being done ("write", "read", ...).
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The manifest of installed files is unreadable.
    #[error(
        "{path}: {message}; it lists the files `utter install --user` wrote: fix it, or delete it and remove those files by hand"
    )]
    Manifest {
        /// The manifest.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A built-in template lacks the line the installer rewrites (a bug in this build).
    #[error("built-in template {0} does not have the expected line; this utter build is broken")]
    Template(&'static str),
}

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> InstallError {
    move |source| InstallError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

// ---------------------------------------------------------------------------------------
// Where things go

/// The user's base directories, as the XDG Base Directory spec resolves them.
#[derive(Debug, Clone)]
pub struct Dirs {
    /// `HOME`, if set to an absolute path.
    pub home: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME`, else `~/.config`.
    pub config_home: PathBuf,
    /// `$XDG_DATA_HOME`, else `~/.local/share`.
    pub data_home: PathBuf,
    /// `$XDG_STATE_HOME`, else `~/.local/state`.
    pub state_home: PathBuf,
}

impl Dirs {
    /// From the process environment.
    ///
    /// # Errors
    /// [`InstallError::Environment`] when a directory has neither its variable nor `HOME`.
    pub fn from_env() -> Result<Dirs, InstallError> {
        Dirs::from_lookup(|name| std::env::var_os(name))
    }

    /// From `lookup` (a variable's value by name).
    ///
    /// # Errors
    /// As [`Dirs::from_env`].
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<OsString>) -> Result<Dirs, InstallError> {
        // One reader of the XDG variables: `BaseDirs`; an installer needs every one of them.
        let base = utter_core::paths::BaseDirs::from_lookup(lookup);
        let need = |dir: Option<PathBuf>, name: &str| {
            dir.ok_or_else(|| {
                InstallError::Environment(format!(
                    "neither {name} nor HOME is set to an absolute path; set HOME (or {name})"
                ))
            })
        };
        Ok(Dirs {
            config_home: need(base.config_home, "XDG_CONFIG_HOME")?,
            data_home: need(base.data_home, "XDG_DATA_HOME")?,
            state_home: need(base.state_home, "XDG_STATE_HOME")?,
            home: base.home,
        })
    }

    /// The manifest of installed files: `$XDG_STATE_HOME/utter/installed.json`.
    pub fn manifest(&self) -> PathBuf {
        self.state_home
            .join(utter_core::paths::APP)
            .join("installed.json")
    }
}

/// Where each installed file goes.
#[derive(Debug, Clone, Serialize)]
pub struct Layout {
    /// The binary.
    pub binary: PathBuf,
    /// The wrapper.
    pub wrapper: PathBuf,
    /// The unit.
    pub unit: PathBuf,
    /// The D-Bus activation file.
    pub dbus_service: PathBuf,
    /// The manifest.
    pub manifest: PathBuf,
}

impl Layout {
    /// The layout for `dirs`, with the binary in `bin_dir` (default `~/.local/bin`; a relative
    /// directory is taken from the current one) and the wrapper in `<bin_dir>/../libexec/utter`.
    ///
    /// # Errors
    /// [`InstallError::Environment`] without `bin_dir` and `HOME`, or when the current
    /// directory cannot be read for a relative `bin_dir`.
    pub fn new(dirs: &Dirs, bin_dir: Option<&Path>) -> Result<Layout, InstallError> {
        let bin_dir = match bin_dir {
            Some(dir) => std::path::absolute(dir).map_err(|e| {
                InstallError::Environment(format!("cannot make {} absolute: {e}", dir.display()))
            })?,
            None => dirs
                .home
                .as_ref()
                .map(|h| h.join(".local/bin"))
                .ok_or_else(|| {
                    InstallError::Environment(
                        "HOME is not set to an absolute path; set it, or pass --bin-dir".into(),
                    )
                })?,
        };
        let prefix = bin_dir.parent().unwrap_or(&bin_dir);
        Ok(Layout {
            binary: bin_dir.join("utter"),
            wrapper: prefix.join("libexec").join("utter").join(WRAPPER_NAME),
            unit: dirs
                .config_home
                .join("systemd")
                .join("user")
                .join(UNIT_NAME),
            dbus_service: dirs
                .data_home
                .join("dbus-1")
                .join("services")
                .join(DBUS_SERVICE_NAME),
            manifest: dirs.manifest(),
        })
    }
}

// ---------------------------------------------------------------------------------------
// Rewriting the templates

/// `path` as one argument of a systemd `ExecStart=` line: bare when it has only plain
/// characters, else double-quoted, with `%` and `$` doubled (specifiers and variables).
fn systemd_word(path: &Path) -> Result<String, InstallError> {
    let text = plain_path(path)?;
    if text.chars().all(is_plain) {
        return Ok(text.to_owned());
    }
    let mut word = String::from("\"");
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                word.push('\\');
                word.push(c);
            }
            '%' => word.push_str("%%"),
            '$' => word.push_str("$$"),
            _ => word.push(c),
        }
    }
    word.push('"');
    Ok(word)
}

/// `path` as one argument of a D-Bus activation `Exec=` line (dbus-daemon splits it like a
/// shell, without expansions): bare when plain, else single-quoted.
fn dbus_word(path: &Path) -> Result<String, InstallError> {
    let text = plain_path(path)?;
    if text.chars().all(is_plain) {
        return Ok(text.to_owned());
    }
    Ok(format!("'{}'", text.replace('\'', r"'\''")))
}

fn is_plain(c: char) -> bool {
    c.is_ascii_alphanumeric() || "/._-+,:@=~".contains(c)
}

/// `path` as UTF-8 text without control characters.
fn plain_path(path: &Path) -> Result<&str, InstallError> {
    let bad = |message: &str| InstallError::BadPath {
        path: path.to_path_buf(),
        message: message.to_owned(),
    };
    let text = path
        .to_str()
        .ok_or_else(|| bad("not UTF-8, so it cannot be written into a unit file"))?;
    if text.chars().any(char::is_control) {
        return Err(bad(
            "has a control character, so it cannot be written into a unit file",
        ));
    }
    Ok(text)
}

/// The unit with `ExecStart=` pointing at the installed wrapper and binary.
///
/// # Errors
/// [`InstallError::BadPath`] for a path that cannot be written into a unit;
/// [`InstallError::Template`] if the template has no such line.
pub fn render_unit(wrapper: &Path, binary: &Path) -> Result<String, InstallError> {
    let replacement = format!(
        "ExecStart={} {}",
        systemd_word(wrapper)?,
        systemd_word(binary)?
    );
    rewrite_line(UNIT_TEMPLATE, UNIT_NAME, |line| {
        let rest = line
            .strip_prefix("ExecStart=")?
            .strip_prefix(TEMPLATE_WRAPPER)?
            .strip_prefix(' ')?
            .strip_prefix(TEMPLATE_BINARY)?;
        (rest.is_empty() || rest.starts_with(' ')).then(|| format!("{replacement}{rest}"))
    })
}

/// The D-Bus activation file with `Exec=` pointing at the installed binary.
///
/// # Errors
/// As [`render_unit`].
pub fn render_dbus_service(binary: &Path) -> Result<String, InstallError> {
    let replacement = format!("Exec={}", dbus_word(binary)?);
    rewrite_line(DBUS_SERVICE_TEMPLATE, DBUS_SERVICE_NAME, |line| {
        let rest = line
            .strip_prefix("Exec=")?
            .trim_start()
            .strip_prefix(TEMPLATE_BINARY)?;
        (rest.is_empty() || rest.starts_with(' ')).then(|| format!("{replacement}{rest}"))
    })
}

/// `template` with the one line `rewrite` accepts replaced by what it returns.
fn rewrite_line(
    template: &str,
    name: &'static str,
    rewrite: impl Fn(&str) -> Option<String>,
) -> Result<String, InstallError> {
    let mut out = String::with_capacity(template.len() + 64);
    let mut rewritten = 0;
    for line in template.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (line, ""),
        };
        match rewrite(body) {
            Some(new) => {
                rewritten += 1;
                out.push_str(&new);
                out.push_str(end);
            }
            None => out.push_str(line),
        }
    }
    if rewritten == 1 {
        Ok(out)
    } else {
        Err(InstallError::Template(name))
    }
}

// ---------------------------------------------------------------------------------------
// Files and their hashes

/// What an installed file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileKind {
    /// The `utter` binary.
    Binary,
    /// A plugin's program the config names (`utter-input`, `utter-stt-whisper`, ...).
    Plugin,
    /// `utter-session-env`.
    Wrapper,
    /// `utter.service`.
    Unit,
    /// `dev.utter.Runner1.service`.
    DbusService,
}

impl FileKind {
    /// The name used in reports and the manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            FileKind::Binary => "binary",
            FileKind::Plugin => "plugin",
            FileKind::Wrapper => "wrapper",
            FileKind::Unit => "unit",
            FileKind::DbusService => "dbus-service",
        }
    }
}

/// Where an installed file's bytes come from.
enum Source {
    /// Copied from a file (the binary).
    File(PathBuf),
    /// Rendered text.
    Text(String),
}

/// One file to install.
struct Planned {
    kind: FileKind,
    path: PathBuf,
    source: Source,
    mode: u32,
    sha256: String,
}

use utter_protocol::digest::sha256_hex as sha256_bytes;

use utter_protocol::digest::sha256_file;

/// The hash and permission bits of what is at `path` now (`None`: nothing).
fn current_state(path: &Path) -> Result<Option<(String, u32)>, InstallError> {
    let meta = match fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error("inspect", path)(e)),
    };
    if !meta.is_file() {
        return Err(InstallError::BadPath {
            path: path.to_path_buf(),
            message: "exists and is not a regular file; move it away first".into(),
        });
    }
    let hash = sha256_file(path).map_err(io_error("read", path))?;
    Ok(Some((hash, meta.permissions().mode() & 0o7777)))
}

/// Write `source` to `path` with `mode` atomically ([`utter_core::paths::write_atomic_with`]).
/// Creates the directory.
fn write_atomic(path: &Path, source: &Source, mode: u32) -> Result<(), InstallError> {
    let dir = path.parent().ok_or_else(|| InstallError::BadPath {
        path: path.to_path_buf(),
        message: "has no parent directory".into(),
    })?;
    fs::create_dir_all(dir).map_err(io_error("create the directory", dir))?;
    utter_core::paths::write_atomic_with(path, mode, |file| match source {
        Source::Text(text) => file.write_all(text.as_bytes()),
        Source::File(from) => io::copy(&mut fs::File::open(from)?, file).map(|_| ()),
    })
    .map_err(io_error("write", path))
}

// ---------------------------------------------------------------------------------------
// The manifest

/// `$XDG_STATE_HOME/utter/installed.json`: what install wrote, so uninstall removes exactly
/// that.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    /// Format version (1).
    pub manifest_version: u32,
    /// The utter version that wrote it last.
    pub utter_version: String,
    /// The installed files.
    pub files: Vec<ManifestEntry>,
}

/// One installed file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ManifestEntry {
    /// What it is.
    pub kind: FileKind,
    /// Where it is.
    pub path: PathBuf,
    /// SHA-256 of the content written, in hex.
    pub sha256: String,
}

impl Manifest {
    /// Read `path`; `Ok(None)` when it does not exist.
    ///
    /// # Errors
    /// [`InstallError::Manifest`] when it cannot be read or parsed.
    pub fn read(path: &Path) -> Result<Option<Manifest>, InstallError> {
        let text = match utter_core::paths::read_regular_file(path, 4 * 1024 * 1024) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(InstallError::Manifest {
                    path: path.to_path_buf(),
                    message: format!("cannot read it: {e}"),
                });
            }
        };
        let manifest: Manifest =
            serde_json::from_str(&text).map_err(|e| InstallError::Manifest {
                path: path.to_path_buf(),
                message: format!("not a valid manifest: {e}"),
            })?;
        if manifest.manifest_version != MANIFEST_VERSION {
            return Err(InstallError::Manifest {
                path: path.to_path_buf(),
                message: format!(
                    "manifest_version {} is not {MANIFEST_VERSION} (written by another utter version)",
                    manifest.manifest_version
                ),
            });
        }
        Ok(Some(manifest))
    }

    fn write(&self, path: &Path) -> Result<(), InstallError> {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        write_atomic(path, &Source::Text(text), 0o644)
    }
}

// ---------------------------------------------------------------------------------------
// systemctl --user

/// One `systemctl --user` call and how it went.
#[derive(Debug, Clone, Serialize)]
pub struct SystemctlRun {
    /// The command line.
    pub command: String,
    /// Whether it exited 0.
    pub ok: bool,
    /// What it printed on stderr (or why it did not run), trimmed.
    pub detail: String,
}

fn systemctl_user(args: &[&str]) -> SystemctlRun {
    let command = format!("systemctl --user {}", args.join(" "));
    let child = Command::new("systemctl")
        .arg("--user")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => {
            let detail = if e.kind() == io::ErrorKind::NotFound {
                "systemctl is not installed".to_owned()
            } else {
                format!("cannot run systemctl: {e}")
            };
            return SystemctlRun {
                command,
                ok: false,
                detail,
            };
        }
    };
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() < SYSTEMCTL_LIMIT => {
                std::thread::sleep(Duration::from_millis(20));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = pipe.read_to_string(&mut stderr);
    }
    let mut detail = stderr.trim().to_owned();
    let ok = match status {
        Some(status) => status.success(),
        None => {
            detail = format!("no answer within {}s", SYSTEMCTL_LIMIT.as_secs());
            false
        }
    };
    SystemctlRun {
        command,
        ok,
        detail,
    }
}

// ---------------------------------------------------------------------------------------
// Install

/// How to install.
#[derive(Debug, Clone, Default)]
pub struct InstallOptions {
    /// The executable to copy (normally the running one).
    pub executable: PathBuf,
    /// `--bin-dir`.
    pub bin_dir: Option<PathBuf>,
    /// Say what would happen; write nothing, run nothing.
    pub dry_run: bool,
    /// Run `systemctl --user daemon-reload` afterwards.
    pub run_systemctl: bool,
    /// The programs of the config's plugins (bare names of their entrypoints other than
    /// `utter`, which is the binary): `(plugin id, program name)`. Each found beside
    /// [`InstallOptions::executable`] is installed beside the binary; the others are listed
    /// in the report as missing, with how to get them.
    pub plugin_programs: Vec<(String, String)>,
}

/// A plugin program the config names that was not beside `utter` to install.
#[derive(Debug, Clone, Serialize)]
pub struct MissingPlugin {
    /// The plugin's id.
    pub plugin: String,
    /// The program's name.
    pub program: String,
    /// How to get it.
    pub how: String,
}

/// What happened (or, in a dry run, would happen) to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileAction {
    /// It did not exist.
    Created,
    /// A different file was there and was replaced.
    Replaced,
    /// The same bytes and mode were already there.
    Unchanged,
}

/// One installed file in a report.
#[derive(Debug, Clone, Serialize)]
pub struct InstalledFile {
    /// What it is.
    pub kind: FileKind,
    /// Where.
    pub path: PathBuf,
    /// What was done.
    pub action: FileAction,
    /// Permission bits.
    pub mode: String,
    /// Why it was replaced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The result of an install.
#[derive(Debug, Clone, Serialize)]
pub struct InstallReport {
    /// Nothing was written.
    pub dry_run: bool,
    /// utter's version.
    pub version: &'static str,
    /// Every file.
    pub files: Vec<InstalledFile>,
    /// The manifest.
    pub manifest: PathBuf,
    /// `systemctl --user daemon-reload`, if it was run.
    pub daemon_reload: Option<SystemctlRun>,
    /// Commands for the user to run next.
    pub next_steps: Vec<String>,
    /// Anything else worth knowing.
    pub notes: Vec<String>,
    /// Plugin programs the config names that were not found beside `utter`.
    pub missing_plugins: Vec<MissingPlugin>,
}

/// Install for the current user.
///
/// # Errors
/// [`InstallError`] when a file cannot be read or written, or a path cannot be used; the
/// files written before the error stay, and the manifest lists them.
pub fn install(dirs: &Dirs, options: &InstallOptions) -> Result<InstallReport, InstallError> {
    let layout = Layout::new(dirs, options.bin_dir.as_deref())?;
    let executable = &options.executable;
    let binary_hash = sha256_file(executable).map_err(io_error("read", executable))?;
    let unit = render_unit(&layout.wrapper, &layout.binary)?;
    let dbus = render_dbus_service(&layout.binary)?;
    let mut planned = vec![
        Planned {
            kind: FileKind::Binary,
            path: layout.binary.clone(),
            source: Source::File(executable.clone()),
            mode: 0o755,
            sha256: binary_hash,
        },
        Planned {
            kind: FileKind::Wrapper,
            path: layout.wrapper.clone(),
            sha256: sha256_bytes(WRAPPER.as_bytes()),
            source: Source::Text(WRAPPER.to_owned()),
            mode: 0o755,
        },
        Planned {
            kind: FileKind::Unit,
            path: layout.unit.clone(),
            sha256: sha256_bytes(unit.as_bytes()),
            source: Source::Text(unit),
            mode: 0o644,
        },
        Planned {
            kind: FileKind::DbusService,
            path: layout.dbus_service.clone(),
            sha256: sha256_bytes(dbus.as_bytes()),
            source: Source::Text(dbus),
            mode: 0o644,
        },
    ];

    // The plugins' programs, from beside the running binary (`cargo build --release
    // --workspace --bins` puts them there) to beside the installed one, where the service
    // looks for a bare name first.
    let mut missing_plugins = Vec::new();
    let here = executable.parent().unwrap_or(Path::new("."));
    let bin_dir = layout.binary.parent().unwrap_or(Path::new("."));
    let mut seen = Vec::new();
    for (plugin, program) in &options.plugin_programs {
        if seen.contains(program) {
            continue;
        }
        seen.push(program.clone());
        let source = here.join(program);
        let usable =
            fs::metadata(&source).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
        if !usable {
            missing_plugins.push(MissingPlugin {
                plugin: plugin.clone(),
                program: program.clone(),
                how: utter_core::supervisor::install_hint(Path::new(program)),
            });
            continue;
        }
        planned.push(Planned {
            kind: FileKind::Plugin,
            path: bin_dir.join(program),
            sha256: sha256_file(&source).map_err(io_error("read", &source))?,
            source: Source::File(source),
            mode: 0o755,
        });
    }

    // Files of an earlier install stay listed until uninstall removes them.
    let mut manifest = Manifest::read(&layout.manifest)?.unwrap_or(Manifest {
        manifest_version: MANIFEST_VERSION,
        utter_version: String::new(),
        files: Vec::new(),
    });
    manifest.utter_version = utter_core::VERSION.to_owned();
    let ours: Vec<PathBuf> = manifest.files.iter().map(|e| e.path.clone()).collect();
    let mut left_alone = Vec::new();
    manifest
        .files
        .retain(|e| e.path.exists() && !planned.iter().any(|p| p.path == e.path));

    let mut files = Vec::new();
    for file in &planned {
        let (action, note) = match current_state(&file.path)? {
            None => (FileAction::Created, None),
            Some((hash, mode)) if hash == file.sha256 && mode == file.mode => {
                (FileAction::Unchanged, None)
            }
            // A plugin program's name in the bin directory that an earlier install did not
            // write is the person's own file: never replaced (and so never removed later).
            Some(_) if file.kind == FileKind::Plugin && !ours.contains(&file.path) => {
                left_alone.push(file.path.clone());
                continue;
            }
            Some((hash, mode)) => {
                let mut why = Vec::new();
                if hash != file.sha256 {
                    why.push("its content differed".to_owned());
                }
                if mode != file.mode {
                    why.push(format!("its mode was {mode:04o}"));
                }
                (FileAction::Replaced, Some(why.join(" and ")))
            }
        };
        if !options.dry_run && action != FileAction::Unchanged {
            write_atomic(&file.path, &file.source, file.mode)?;
        }
        files.push(InstalledFile {
            kind: file.kind,
            path: file.path.clone(),
            action,
            mode: format!("{:04o}", file.mode),
            note,
        });
        manifest.files.push(ManifestEntry {
            kind: file.kind,
            path: file.path.clone(),
            sha256: file.sha256.clone(),
        });
        // Keep the manifest current after each file, so an error part-way leaves a manifest
        // that lists everything written so far.
        if !options.dry_run {
            manifest.write(&layout.manifest)?;
        }
    }

    let daemon_reload =
        (!options.dry_run && options.run_systemctl).then(|| systemctl_user(&["daemon-reload"]));
    let enable = format!("systemctl --user enable --now {UNIT_NAME}");
    let next_steps = if daemon_reload.as_ref().is_some_and(|r| r.ok) {
        vec![enable]
    } else {
        vec![format!("systemctl --user daemon-reload && {enable}")]
    };

    let mut notes = Vec::new();
    for path in &left_alone {
        notes.push(format!(
            "{} is a file this installer did not write, so it was left as it is; remove it and install again to put the plugin program there",
            path.display()
        ));
    }
    if !options.dry_run && files.iter().any(|f| f.action == FileAction::Replaced) {
        notes.push(format!(
            "if {UNIT_NAME} is already running, `systemctl --user restart {UNIT_NAME}` puts the replaced files to use"
        ));
    }
    if let Some(bin_dir) = layout.binary.parent() {
        let on_path = std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|p| p == bin_dir));
        if !on_path {
            notes.push(format!(
                "{} is not on PATH: add it to run `utter` from a shell (the service uses the full path)",
                bin_dir.display()
            ));
        }
    }
    for m in &missing_plugins {
        notes.push(format!(
            "plugin {:?} runs {}, which is not beside {} and was not installed: {}; it stays off until it is on PATH or beside utter",
            m.plugin,
            m.program,
            executable.display(),
            m.how
        ));
    }
    Ok(InstallReport {
        dry_run: options.dry_run,
        version: utter_core::VERSION,
        files,
        manifest: layout.manifest,
        daemon_reload,
        next_steps,
        notes,
        missing_plugins,
    })
}

impl InstallReport {
    /// The report for a person.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        if self.dry_run {
            let _ = writeln!(
                out,
                "dry run: nothing was written. `utter install --user` would install utter {}:",
                self.version
            );
        } else {
            let _ = writeln!(out, "installed utter {} for this user:", self.version);
        }
        for f in &self.files {
            let action = match (self.dry_run, f.action) {
                (false, FileAction::Created) => "created",
                (false, FileAction::Replaced) => "replaced",
                (_, FileAction::Unchanged) => "unchanged",
                (true, FileAction::Created) => "create",
                (true, FileAction::Replaced) => "replace",
            };
            file_line(
                &mut out,
                action,
                10,
                f.kind.as_str(),
                &f.path,
                f.note.as_deref(),
            );
        }
        let verb = if self.dry_run {
            "would record"
        } else {
            "recorded"
        };
        let _ = writeln!(
            out,
            "{verb} the installed files in {}",
            self.manifest.display()
        );
        if let Some(run) = &self.daemon_reload {
            if run.ok {
                let _ = writeln!(out, "ran `{}`", run.command);
            } else {
                let _ = writeln!(
                    out,
                    "could not run `{}` ({}); run it yourself once the user manager is up",
                    run.command,
                    first_line(&run.detail)
                );
            }
        }
        for note in &self.notes {
            let _ = writeln!(out, "note: {note}");
        }
        let _ = writeln!(out, "next:");
        for step in &self.next_steps {
            let _ = writeln!(out, "  {step}");
        }
        out
    }
}

fn first_line(text: &str) -> &str {
    let line = text.lines().next().unwrap_or("").trim();
    if line.is_empty() { "no message" } else { line }
}

// ---------------------------------------------------------------------------------------
// Uninstall

/// How to uninstall.
#[derive(Debug, Clone, Default)]
pub struct UninstallOptions {
    /// Say what would happen; remove nothing, run nothing.
    pub dry_run: bool,
    /// Remove files even if they changed since install.
    pub force: bool,
    /// Run `systemctl --user disable --now utter.service` first and `daemon-reload` after.
    pub run_systemctl: bool,
}

/// What happened (or would happen) to one installed file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RemovalAction {
    /// Removed.
    Removed,
    /// It was already gone.
    Missing,
    /// Kept: its content changed since install (use `--force`).
    KeptChanged,
    /// Kept: removing it failed.
    Failed,
}

/// One installed file in an uninstall report.
#[derive(Debug, Clone, Serialize)]
pub struct RemovedFile {
    /// What it is.
    pub kind: FileKind,
    /// Where.
    pub path: PathBuf,
    /// What was done.
    pub action: RemovalAction,
    /// Details.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The result of an uninstall.
#[derive(Debug, Clone, Serialize)]
pub struct UninstallReport {
    /// Nothing was removed.
    pub dry_run: bool,
    /// The manifest read.
    pub manifest: PathBuf,
    /// Whether there was one (without it there is nothing to do).
    pub manifest_found: bool,
    /// Every file it listed.
    pub files: Vec<RemovedFile>,
    /// The `systemctl --user` calls made.
    pub systemctl: Vec<SystemctlRun>,
}

impl UninstallReport {
    /// Whether files were kept (changed since install, or not removable).
    pub fn kept_any(&self) -> bool {
        self.files
            .iter()
            .any(|f| matches!(f.action, RemovalAction::KeptChanged | RemovalAction::Failed))
    }

    /// The report for a person.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        if !self.manifest_found {
            let _ = writeln!(
                out,
                "nothing to uninstall: {} does not exist (utter was not installed with `utter install --user`, or was uninstalled already)",
                self.manifest.display()
            );
            return out;
        }
        if self.dry_run {
            let _ = writeln!(
                out,
                "dry run: nothing was removed. `utter uninstall --user` would:"
            );
        } else {
            let _ = writeln!(out, "uninstalled utter for this user:");
        }
        for run in &self.systemctl {
            if run.ok {
                let _ = writeln!(out, "  ran `{}`", run.command);
            } else {
                let _ = writeln!(
                    out,
                    "  could not run `{}` ({})",
                    run.command,
                    first_line(&run.detail)
                );
            }
        }
        for f in &self.files {
            let action = match (self.dry_run, f.action) {
                (false, RemovalAction::Removed) => "removed",
                (true, RemovalAction::Removed) => "remove",
                (_, RemovalAction::Missing) => "gone",
                (_, RemovalAction::KeptChanged) => "kept",
                (_, RemovalAction::Failed) => "failed",
            };
            file_line(
                &mut out,
                action,
                8,
                f.kind.as_str(),
                &f.path,
                f.note.as_deref(),
            );
        }
        if self.kept_any() {
            let _ = writeln!(
                out,
                "some files were kept; {} still lists them (`utter uninstall --user --force` removes changed files too)",
                self.manifest.display()
            );
        } else if !self.dry_run {
            let _ = writeln!(out, "removed {}", self.manifest.display());
        }
        out
    }
}

/// Remove what [`install`] wrote, as listed in the manifest.
///
/// # Errors
/// [`InstallError::Manifest`] when the manifest is unreadable; [`InstallError::Io`] when an
/// updated manifest cannot be written.
pub fn uninstall(dirs: &Dirs, options: &UninstallOptions) -> Result<UninstallReport, InstallError> {
    let manifest_path = dirs.manifest();
    let Some(manifest) = Manifest::read(&manifest_path)? else {
        return Ok(UninstallReport {
            dry_run: options.dry_run,
            manifest: manifest_path,
            manifest_found: false,
            files: Vec::new(),
            systemctl: Vec::new(),
        });
    };

    // Decide first, so the service is stopped only if its unit is really going away.
    let mut files: Vec<RemovedFile> = Vec::new();
    for entry in &manifest.files {
        let (action, note) = match fs::symlink_metadata(&entry.path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => (RemovalAction::Missing, None),
            Err(e) => (
                RemovalAction::Failed,
                Some(format!("cannot inspect it: {e}")),
            ),
            Ok(meta) if !meta.is_file() => (
                RemovalAction::KeptChanged,
                Some("no longer a regular file".to_owned()),
            ),
            Ok(_) => match sha256_file(&entry.path) {
                Ok(hash) if hash == entry.sha256 => (RemovalAction::Removed, None),
                Ok(_) if options.force => (
                    RemovalAction::Removed,
                    Some("changed since install; removed because of --force".to_owned()),
                ),
                Ok(_) => (
                    RemovalAction::KeptChanged,
                    Some("changed since install; --force removes it".to_owned()),
                ),
                Err(e) => (RemovalAction::Failed, Some(format!("cannot read it: {e}"))),
            },
        };
        files.push(RemovedFile {
            kind: entry.kind,
            path: entry.path.clone(),
            action,
            note,
        });
    }

    let removes_unit = files
        .iter()
        .any(|f| f.kind == FileKind::Unit && f.action == RemovalAction::Removed);
    let mut systemctl = Vec::new();
    if !options.dry_run && options.run_systemctl && removes_unit {
        systemctl.push(systemctl_user(&["disable", "--now", UNIT_NAME]));
    }

    if !options.dry_run {
        for f in files.iter_mut() {
            if f.action != RemovalAction::Removed {
                continue;
            }
            match fs::remove_file(&f.path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    f.action = RemovalAction::Missing;
                }
                Err(e) => {
                    f.action = RemovalAction::Failed;
                    f.note = Some(format!("cannot remove it: {e}"));
                }
            }
            // The wrapper's own directory goes too, when nothing else is in it.
            if f.kind == FileKind::Wrapper {
                if let Some(dir) = f.path.parent().filter(|d| d.ends_with("utter")) {
                    let _ = fs::remove_dir(dir);
                }
            }
        }
        let kept: Vec<ManifestEntry> = manifest
            .files
            .iter()
            .zip(&files)
            .filter(|(_, f)| matches!(f.action, RemovalAction::KeptChanged | RemovalAction::Failed))
            .map(|(entry, _)| entry.clone())
            .collect();
        if kept.is_empty() {
            match fs::remove_file(&manifest_path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_error("remove", &manifest_path)(e)),
            }
            if let Some(dir) = manifest_path.parent() {
                let _ = fs::remove_dir(dir); // only if empty: other state may live there
            }
        } else {
            Manifest {
                files: kept,
                ..manifest
            }
            .write(&manifest_path)?;
        }
        if options.run_systemctl && removes_unit {
            systemctl.push(systemctl_user(&["daemon-reload"]));
        }
    }

    Ok(UninstallReport {
        dry_run: options.dry_run,
        manifest: manifest_path,
        manifest_found: true,
        files,
        systemctl,
    })
}

/// One line of an install or uninstall report: `  <action> <kind> <path> (<note>)`, the
/// action padded to `width`.
fn file_line(
    out: &mut String,
    action: &str,
    width: usize,
    kind: &str,
    path: &std::path::Path,
    note: Option<&str>,
) {
    let note = note.map(|n| format!(" ({n})")).unwrap_or_default();
    let _ = writeln!(
        out,
        "  {action:<width$} {kind:<13} {}{note}",
        path.display()
    );
}

// ---------------------------------------------------------------------------------------
// The command line: `utter install --user` and `utter uninstall --user`.

/// The arguments of `utter install`.
#[derive(clap::Args)]
pub struct InstallArgs {
    /// Install for the current user (required: there is no system-wide install yet).
    #[arg(long)]
    user: bool,
    /// Directory for the binary (default: ~/.local/bin); the wrapper goes to
    /// <DIR>/../libexec/utter/.
    #[arg(long, value_name = "DIR")]
    bin_dir: Option<PathBuf>,
    /// Say what would be written; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Do not run `systemctl --user daemon-reload` afterwards.
    #[arg(long)]
    no_systemctl: bool,
}

/// The arguments of `utter uninstall`.
#[derive(clap::Args)]
pub struct UninstallArgs {
    /// Uninstall the per-user install (required).
    #[arg(long)]
    user: bool,
    /// Also remove files that changed since they were installed.
    #[arg(long)]
    force: bool,
    /// Say what would be removed; remove nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Do not run `systemctl --user disable --now utter.service` and `daemon-reload`.
    #[arg(long)]
    no_systemctl: bool,
}

/// Run `utter install --user`: exit 0 when done, 2 without `--user`, 4 when it failed.
/// After a real install the configured plugins are recorded in the install lockfile
/// (`utter doctor` compares against it); a failure there is a warning, not a failed install.
pub async fn run_install(args: InstallArgs, config: Option<&Path>) -> u8 {
    if !args.user {
        eprintln!("utter install: only per-user installs exist so far; run `utter install --user`");
        return exit::USAGE;
    }
    let executable = match std::env::current_exe() {
        Ok(path) => path,
        Err(e) => {
            eprintln!("utter install: cannot find the running utter binary to copy: {e}");
            return exit::RUNNER;
        }
    };
    // The programs the config's plugins run (the service's config: the file, else the
    // built-in default).
    let plugin_programs: Vec<(String, String)> = utter_core::config::load(config)
        .map(|loaded| {
            loaded
                .config
                .plugin
                .iter()
                .filter(|p| p.enabled)
                .filter_map(|p| {
                    let program = p.entrypoint.argv().first()?.clone();
                    // Utter's own plugin programs only: a plugin run by an interpreter
                    // (python3, node) or a program of the person's is found on PATH and is
                    // never copied over a file of that name.
                    (!program.contains('/') && program.starts_with("utter-"))
                        .then(|| (p.id.clone(), program))
                })
                .collect()
        })
        .unwrap_or_default();
    let options = InstallOptions {
        executable,
        bin_dir: args.bin_dir,
        dry_run: args.dry_run,
        run_systemctl: !args.no_systemctl,
        plugin_programs,
    };
    let installed_bin = Dirs::from_env()
        .and_then(|dirs| Layout::new(&dirs, options.bin_dir.as_deref()))
        .ok()
        .and_then(|l| l.binary.parent().map(Path::to_path_buf));
    match Dirs::from_env().and_then(|dirs| install(&dirs, &options)) {
        Ok(report) => {
            if args.json {
                print_json(&report);
            } else {
                out!("{}", report.to_text().trim_end());
            }
            if !args.dry_run {
                // Recorded as the installed service finds its plugins: beside the installed
                // binary, not where this one was built.
                match super::doctor::record_lock(config, installed_bin.as_deref()).await {
                    Ok((path, n)) if !args.json => {
                        out!("install lockfile: {} ({n} plugins)", path.display())
                    }
                    Ok(_) => {}
                    Err(e) => eprintln!(
                        "utter install: warning: the install lockfile was not written: {e}"
                    ),
                }
            }
            exit::OK
        }
        Err(e) => {
            if args.json {
                out!("{}", serde_json::json!({"error": e.to_string()}));
            }
            eprintln!("utter install: {e}");
            exit::RUNNER
        }
    }
}

/// Run `utter uninstall --user`: exit 0 when everything listed was removed, 1 when changed
/// files were kept, 2 without `--user`, 4 when it failed.
pub fn run_uninstall(args: &UninstallArgs) -> u8 {
    if !args.user {
        eprintln!(
            "utter uninstall: only per-user installs exist so far; run `utter uninstall --user`"
        );
        return exit::USAGE;
    }
    let options = UninstallOptions {
        dry_run: args.dry_run,
        force: args.force,
        run_systemctl: !args.no_systemctl,
    };
    match Dirs::from_env().and_then(|dirs| uninstall(&dirs, &options)) {
        Ok(report) => {
            if args.json {
                print_json(&report);
            } else {
                out!("{}", report.to_text().trim_end());
            }
            if report.kept_any() {
                exit::NOT_DONE
            } else {
                exit::OK
            }
        }
        Err(e) => {
            if args.json {
                out!("{}", serde_json::json!({"error": e.to_string()}));
            }
            eprintln!("utter uninstall: {e}");
            exit::RUNNER
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs_from(vars: &[(&str, &str)]) -> Result<Dirs, InstallError> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Dirs::from_lookup(|name| {
            vars.iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| OsString::from(v))
        })
    }

    #[test]
    fn base_directories_follow_the_xdg_spec() {
        let d = dirs_from(&[("HOME", "/h")]).unwrap();
        assert_eq!(d.config_home, Path::new("/h/.config"));
        assert_eq!(d.data_home, Path::new("/h/.local/share"));
        assert_eq!(d.state_home, Path::new("/h/.local/state"));
        assert_eq!(
            d.manifest(),
            Path::new("/h/.local/state/utter/installed.json")
        );

        let d = dirs_from(&[
            ("HOME", "/h"),
            ("XDG_CONFIG_HOME", "/c"),
            ("XDG_DATA_HOME", "relative/is/ignored"),
            ("XDG_STATE_HOME", "/s"),
        ])
        .unwrap();
        assert_eq!(d.config_home, Path::new("/c"));
        assert_eq!(d.data_home, Path::new("/h/.local/share"));
        assert_eq!(d.state_home, Path::new("/s"));

        let e = dirs_from(&[("XDG_CONFIG_HOME", "/c")]).unwrap_err();
        assert!(e.to_string().contains("HOME"), "{e}");

        let d = dirs_from(&[
            ("XDG_CONFIG_HOME", "/c"),
            ("XDG_DATA_HOME", "/d"),
            ("XDG_STATE_HOME", "/s"),
        ])
        .unwrap();
        assert!(Layout::new(&d, None).is_err(), "no HOME and no --bin-dir");
        let l = Layout::new(&d, Some(Path::new("/opt/u/bin"))).unwrap();
        assert_eq!(l.binary, Path::new("/opt/u/bin/utter"));
        assert_eq!(
            l.wrapper,
            Path::new("/opt/u/libexec/utter/utter-session-env")
        );
        assert_eq!(l.unit, Path::new("/c/systemd/user/utter.service"));
        assert_eq!(
            l.dbus_service,
            Path::new("/d/dbus-1/services/dev.utter.Runner1.service")
        );
    }

    #[test]
    fn the_default_layout_is_under_home() {
        let d = dirs_from(&[("HOME", "/home/u")]).unwrap();
        let l = Layout::new(&d, None).unwrap();
        assert_eq!(l.binary, Path::new("/home/u/.local/bin/utter"));
        assert_eq!(
            l.wrapper,
            Path::new("/home/u/.local/libexec/utter/utter-session-env")
        );
    }

    #[test]
    fn the_templates_have_the_lines_the_installer_rewrites() {
        let unit = render_unit(Path::new("/w/env"), Path::new("/b/utter")).unwrap();
        assert!(
            unit.contains("\nExecStart=/w/env /b/utter daemon\n"),
            "{unit}"
        );
        assert!(!unit.contains("/usr/bin/utter"), "{unit}");
        assert_eq!(unit.lines().count(), UNIT_TEMPLATE.lines().count());
        let dbus = render_dbus_service(Path::new("/b/utter")).unwrap();
        assert!(dbus.contains("\nExec=/b/utter daemon\n"), "{dbus}");
        assert!(dbus.contains("SystemdService=utter.service"), "{dbus}");
        assert!(dbus.contains("Name=dev.utter.Runner1"), "{dbus}");
    }

    #[test]
    fn unusual_paths_are_quoted() {
        let unit = render_unit(
            Path::new("/my home/50%/$x/env"),
            Path::new("/b/\"q\"/utter"),
        )
        .unwrap();
        assert!(
            unit.contains(r#"ExecStart="/my home/50%%/$$x/env" "/b/\"q\"/utter" daemon"#),
            "{unit}"
        );
        let dbus = render_dbus_service(Path::new("/it's here/utter")).unwrap();
        assert!(
            dbus.contains(r"Exec='/it'\''s here/utter' daemon"),
            "{dbus}"
        );
        assert!(matches!(
            render_unit(Path::new("/a\nb"), Path::new("/b")),
            Err(InstallError::BadPath { .. })
        ));
    }

    #[test]
    fn rewriting_needs_exactly_one_matching_line() {
        let none = rewrite_line("a\nb\n", "t", |_| None);
        assert!(matches!(none, Err(InstallError::Template("t"))));
        let two = rewrite_line("x\nx\n", "t", |l| (l == "x").then(|| "y".to_owned()));
        assert!(two.is_err());
        let one = rewrite_line("a\nx", "t", |l| (l == "x").then(|| "y".to_owned())).unwrap();
        assert_eq!(one, "a\ny");
    }

    #[test]
    fn atomic_writes_set_the_mode_and_leave_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/file");
        write_atomic(&path, &Source::Text("one".into()), 0o755).unwrap();
        write_atomic(&path, &Source::Text("two".into()), 0o644).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "two");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o644);
        let names: Vec<_> = fs::read_dir(dir.path().join("sub"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![OsString::from("file")]);
        assert_eq!(
            current_state(&path).unwrap(),
            Some((sha256_bytes(b"two"), 0o644))
        );
        assert_eq!(current_state(&dir.path().join("nope")).unwrap(), None);
        assert!(current_state(dir.path()).is_err(), "a directory");
    }

    #[test]
    fn a_bad_manifest_is_an_error_that_says_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("installed.json");
        assert!(Manifest::read(&path).unwrap().is_none());
        fs::write(&path, "{not json").unwrap();
        let e = Manifest::read(&path).unwrap_err().to_string();
        assert!(e.contains("remove those files by hand"), "{e}");
        fs::write(
            &path,
            r#"{"manifest_version": 9, "utter_version": "x", "files": []}"#,
        )
        .unwrap();
        assert!(Manifest::read(&path).is_err());
    }
}
