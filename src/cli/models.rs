//! `utter models list|pull|import|remove`: the speech models a person can install, from the
//! catalog `data/models.toml` ([`utter_core::models`]; `$UTTER_MODELS_CATALOG` replaces it)
//! into `$XDG_DATA_HOME/utter/models/<name>/`, where `[stt] model = "<name>"` finds them.
//!
//! `pull` downloads each file to `<file>.partial` (resumed with `Range: bytes=N-` when one is
//! there), never past the file's pinned size, checks its SHA-256 and only then renames it into
//! place, so a model directory holds verified files and `.partial` files, never an
//! unverified file under a final name. A progress bar is drawn on stderr when it is a
//! terminal; with `--json` every step is a line of JSON on stdout instead (`start`,
//! `restart`, `progress`, `verified`, `present`, then one `result`). The source of the files
//! is `--source`, else `$UTTER_MODELS_SOURCE`, else `[models] source`, else the model's own:
//! `http(s)://` or a local directory as `file:///DIR/` (read with the same checks).
//!
//! `import` ([`import`]) installs a model from a local directory or archive with the same
//! checks, the same progress bar and the same events, into a temporary directory that is
//! renamed into place once every file is there and verified.
//!
//! Exit codes: 0 done (or already installed), 1 the download, the disk or the directory
//! failed (what was downloaded is kept as `.partial` to resume, unless it was wrong), 2 an
//! unknown model or a bad `--source`, 3 an invalid catalog or configuration.

use serde_json::{Value, json};
use std::fs::{File, OpenOptions};
use std::io::{IsTerminal, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use indicatif::{DecimalBytes, ProgressBar, ProgressDrawTarget, ProgressStyle};
use utter_core::models::{
    self, CATALOG_ENV, Catalog, InstallState, Model, ModelFile, SOURCE_ENV, partial_path,
};

use super::check_config;
use super::output::{exit, out, print_json, sanitize};

mod archive;
mod import;

/// Examples and notes at the end of `utter models --help`.
pub const MODELS_HELP: &str = "\
Examples:
  utter models list                 # what can be installed, and what is
  utter models pull tiny.en         # download Whisper tiny.en (78 MB), verify, install
  utter models pull tiny.en --source https://mirror.example/tiny.en/
  utter models pull tiny.en --source file:///media/usb/tiny.en/   # a local copy, checked the same
  utter models import ~/Downloads/faster-whisper-tiny.en/          # a model directory you have
  utter models import model.tar.gz --name mine                    # or an archive (.tar, .tgz, .zip, .whl)
  utter models remove tiny.en

Models go to $XDG_DATA_HOME/utter/models/<name>/ (~/.local/share/utter/models/). Name one in
the config with [stt] model = \"tiny.en\"; `utter reload` then starts the speech plugins.
$UTTER_MODELS_CATALOG=FILE replaces the built-in catalog (for mirrors with other models, and
tests); $UTTER_MODELS_SOURCE=URL is a mirror for every model.";

/// Examples at the end of `utter models pull --help`.
const PULL_HELP: &str = "\
Each file is downloaded to <file>.partial, checked against the size and SHA-256 the catalog
pins, and only then renamed into place. An interrupted download (Ctrl-C, a lost connection)
resumes where it stopped when you run the same command again. A file that does not match is
deleted, never installed.

The files come from --source, else $UTTER_MODELS_SOURCE, else [models] source in the config,
else the model's own source (Whisper from its public repository on Hugging Face). A mirror
holds the same file names: the URL of a file is the source followed by the file's name. A
file:///DIR/ source is a local directory holding them (a USB stick, a network share, a copy
made on another machine): read with the same size and SHA-256 checks, nothing downloaded.

Examples:
  utter models pull tiny.en
  utter models pull tiny.en --json              # JSON lines: progress events, then the result
  UTTER_MODELS_SOURCE=http://127.0.0.1:8000/ utter models pull tiny.en
  utter models pull tiny.en --source file:///media/usb/tiny.en/

Exit codes: 0 installed (or already installed and verified), 1 the download, its
verification, the directory or the disk failed, 2 unknown model or bad --source, 3 invalid
catalog or configuration.";

/// Examples at the end of `utter models list --help`.
const LIST_HELP: &str = "\
States: installed (every file there with its pinned size), incomplete (some are missing:
`utter models pull NAME` finishes it), not installed. Directories in the models directory that
the catalog does not know are listed too.

Examples:
  utter models list
  utter models list --json";

/// Notes and examples at the end of `utter models import --help`.
const IMPORT_HELP: &str = "\
DIR|FILE is a faster-whisper (CTranslate2) model directory (model.bin, config.json,
tokenizer.json, vocabulary.*), e.g. a copy of Systran/faster-whisper-tiny.en or a Hugging
Face cache snapshot, or an archive holding one such directory: .tar, .tar.gz/.tgz, .zip, or a
.whl (a Python wheel is a zip). Nothing is downloaded.

The name is --name, else the directory's name; a directory whose files have the sizes of a
catalog model's (whisper-tiny.en holding tiny.en's files) is imported as that model. A model of
the catalog is checked exactly like a download: every file must have the catalog's size and
SHA-256, or nothing is installed and the files that differ are listed. A name the catalog does
not know is installed unverified, once the directory holds the files the speech plugin loads.

The files are copied (only the model's files: the catalog's, or every plain file of the
directory) into a temporary directory beside the models, which is renamed into place when
all of them are there; an interrupted import installs nothing. Refused: a symbolic link that
leaves the directory, an archive member with an absolute path or '..', links or devices in an
archive, an archive with two model directories, more than the free space.

Examples:
  utter models import ~/Downloads/faster-whisper-tiny.en/   # checked as tiny.en
  utter models import whisper-small.tar.gz --name small     # not in the catalog: unverified
  utter models import model.whl --json                      # JSON lines, as pull prints them

Exit codes: 0 installed (or already installed and verified), 1 the model was refused (files
missing or different, a hostile archive) or the directory or the disk failed, 2 DIR|FILE does
not exist or is no directory or archive, or --name is not a model name, 3 invalid catalog.";

/// Examples at the end of `utter models remove --help`.
const REMOVE_HELP: &str = "\
Deletes $XDG_DATA_HOME/utter/models/NAME/ with everything in it (a model of the catalog or
one you put there). NAME is a directory name, never a path; a symbolic link there is removed,
not followed.

Examples:
  utter models remove tiny.en";

/// `utter models ...`
#[derive(clap::Subcommand)]
pub enum Action {
    /// List the models of the catalog, whether each is installed, its size and its directory.
    #[command(after_help = LIST_HELP)]
    List {
        /// Print JSON: {models_dir, models: [{name, description, in_catalog, state
        /// (installed, incomplete, not-installed; empty for an empty directory the catalog
        /// does not know), size, installed_bytes, path, missing, source}]}.
        #[arg(long)]
        json: bool,
    },
    /// Download a model, verify every file's SHA-256 and install it (resumes an interrupted
    /// download).
    #[command(after_help = PULL_HELP)]
    Pull {
        /// The model's name, as `utter models list` shows it (e.g. tiny.en).
        name: String,
        /// A mirror's base address (http:// or https://) holding the model's file names, or a
        /// local directory of them (file:///DIR/).
        #[arg(long, value_name = "URL")]
        source: Option<String>,
        /// Print JSON lines: {event: start|restart|progress|verified|present, ...}, then
        /// {event: "result", ok, ...}.
        #[arg(long)]
        json: bool,
    },
    /// Install a model from a local directory or archive (.tar, .tar.gz/.tgz, .zip, .whl),
    /// checked like a download.
    #[command(after_help = IMPORT_HELP)]
    Import {
        /// A faster-whisper model directory, or an archive holding one.
        #[arg(value_name = "DIR|FILE")]
        path: PathBuf,
        /// The name to install it under (a directory name, never a path); default: the
        /// directory's name, or the catalog model whose files it holds.
        #[arg(long)]
        name: Option<String>,
        /// Print JSON lines: {event: start|progress|verified|unverified|present, ...}, then
        /// {event: "result", ok, ...}, as pull prints them.
        #[arg(long)]
        json: bool,
    },
    /// Delete an installed model's directory.
    #[command(after_help = REMOVE_HELP)]
    Remove {
        /// The model's name (a directory in the models directory).
        name: String,
        /// Print JSON: {ok, name, path, removed}.
        #[arg(long)]
        json: bool,
    },
}

/// Run `utter models ...`; `config` is `--config` (read for `[models] source`).
pub fn run(action: Action, config: Option<&Path>) -> u8 {
    match action {
        Action::List { json } => list(json),
        Action::Pull { name, source, json } => {
            let mut report = Report::new(json, "pull");
            report.model = Some(name.clone());
            let code = pull(&name, source, config, &mut report);
            report.finish(&name, code)
        }
        Action::Import { path, name, json } => {
            let mut report = Report::new(json, "import");
            let code = import::import(&path, name.as_deref(), &mut report);
            report.finish(&path.display().to_string(), code)
        }
        Action::Remove { name, json } => remove(&name, json),
    }
}

/// A failure: the exit code and the sentence for the person.
#[derive(Debug)]
struct Failure {
    code: u8,
    message: String,
}

fn fail<T>(code: u8, message: impl Into<String>) -> Result<T, Failure> {
    Err(Failure {
        code,
        message: message.into(),
    })
}

/// The catalog in force, or exit 3 with why it is invalid.
fn catalog() -> Result<Catalog, Failure> {
    Catalog::from_env().map_err(|message| Failure {
        code: exit::CONFIG,
        message,
    })
}

fn unknown_model(name: &str, catalog: &Catalog) -> Failure {
    let known = catalog.names();
    let known = if known.is_empty() {
        "the catalog has none".to_owned()
    } else {
        format!("known models: {}", known.join(", "))
    };
    let from = match std::env::var_os(CATALOG_ENV).filter(|v| !v.is_empty()) {
        Some(path) => format!(" (catalog {})", Path::new(&path).display()),
        None => String::new(),
    };
    Failure {
        code: exit::USAGE,
        message: format!("unknown model {name:?}{from}; {known} (`utter models list` shows them)"),
    }
}

/// The models directory, or why there is none.
fn models_dir() -> Result<PathBuf, Failure> {
    models::models_dir().ok_or_else(|| Failure {
        code: exit::NOT_DONE,
        message: "there is no models directory: neither XDG_DATA_HOME nor HOME is an absolute path; set one of them".into(),
    })
}

// ---------------------------------------------------------------------------------------
// list

/// The files of a directory (not recursively), added up, for a model the catalog does not
/// know.
fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}

/// What is there of `model`'s files in `dir`, in bytes (verified or not, partial files too).
fn installed_bytes(model: &Model, dir: &Path) -> u64 {
    model
        .files
        .iter()
        .map(|f| {
            let path = dir.join(&f.name);
            std::fs::metadata(&path)
                .or_else(|_| std::fs::metadata(partial_path(&path)))
                .map(|m| m.len().min(f.size))
                .unwrap_or(0)
        })
        .sum()
}

fn list(json: bool) -> u8 {
    let catalog = match catalog() {
        Ok(c) => c,
        Err(f) => return say_failure("list", &f, json),
    };
    let dir = models::models_dir();
    let mut rows: Vec<Value> = Vec::new();
    for model in &catalog.models {
        let path = dir.as_ref().map(|d| d.join(&model.name));
        let state = path
            .as_ref()
            .map_or(InstallState::NotInstalled, |p| model.state(p));
        let missing = match &state {
            InstallState::Incomplete { missing } => missing.clone(),
            InstallState::NotInstalled => model.files.iter().map(|f| f.name.clone()).collect(),
            InstallState::Installed => Vec::new(),
        };
        rows.push(json!({
            "name": model.name,
            "description": model.description,
            "in_catalog": true,
            "state": state.as_str(),
            "size": model.size(),
            "installed_bytes": path.as_ref().map_or(0, |p| installed_bytes(model, p)),
            "path": path,
            "missing": missing,
            "source": model.source,
        }));
    }
    // Directories in the models directory the catalog does not know.
    let mut others: Vec<(String, PathBuf)> = dir
        .as_ref()
        .and_then(|d| std::fs::read_dir(d).ok())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().into_string().ok()?, e.path())))
        // Not a name a model can have (`.import-...`: an import in progress, or one that was
        // killed and is removed by the next): not a model.
        .filter(|(name, path)| {
            models::is_model_name(name) && catalog.get(name).is_none() && path.is_dir()
        })
        .collect();
    others.sort();
    for (name, path) in others {
        let empty = std::fs::read_dir(&path).map_or(true, |mut d| d.next().is_none());
        rows.push(json!({
            "name": name,
            "description": "",
            "in_catalog": false,
            "state": if empty { "empty" } else { "installed" },
            "size": dir_bytes(&path),
            "installed_bytes": dir_bytes(&path),
            "path": path,
            "missing": [],
            "source": Value::Null,
        }));
    }
    if json {
        print_json(&json!({ "models_dir": dir, "models": rows }));
        return exit::OK;
    }
    match &dir {
        Some(d) => out!("models in {}:", d.display()),
        None => out!("models (no models directory: neither XDG_DATA_HOME nor HOME is set):"),
    }
    let width = rows
        .iter()
        .filter_map(|r| r["name"].as_str())
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(4);
    for row in &rows {
        let name = row["name"].as_str().unwrap_or_default();
        let size = DecimalBytes(row["size"].as_u64().unwrap_or(0));
        let state = match (row["state"].as_str(), row["in_catalog"].as_bool()) {
            (Some("installed"), Some(false)) => "installed (not in the catalog)".to_owned(),
            (Some("empty"), _) => "an empty directory (not in the catalog)".to_owned(),
            (Some("installed"), _) => "installed".to_owned(),
            (Some("incomplete"), _) => format!(
                "incomplete ({} of it there; `utter models pull {name}` finishes it)",
                DecimalBytes(row["installed_bytes"].as_u64().unwrap_or(0))
            ),
            _ => "not installed".to_owned(),
        };
        out!("  {name:<width$}  {state}, {size}");
        if let Some(d) = row["description"].as_str().filter(|d| !d.is_empty()) {
            out!("  {:<width$}  {d}", "");
        }
        if let Some(p) = row["path"].as_str() {
            out!("  {:<width$}  {p}", "");
        }
    }
    if rows.iter().any(|r| r["state"] != "installed") {
        out!("install one with `utter models pull NAME`, then set [stt] model = \"NAME\"");
    }
    exit::OK
}

// ---------------------------------------------------------------------------------------
// remove

fn remove(name: &str, json: bool) -> u8 {
    let result = remove_model(name);
    match &result {
        Ok((path, what)) if json => print_json(&json!({
            "ok": true, "name": name, "path": path, "removed": what,
        })),
        Ok((path, what)) => out!("removed {name}: {what} {}", path.display()),
        Err(f) if json => {
            eprintln!("utter: models remove: {}", f.message);
            print_json(&json!({ "ok": false, "name": name, "error": f.message }));
        }
        Err(f) => eprintln!("utter: models remove: {}", f.message),
    }
    result.map_or_else(|f| f.code, |_| exit::OK)
}

/// Delete `<models_dir>/<name>`: the directory with its files, or a symbolic link itself.
fn remove_model(name: &str) -> Result<(PathBuf, &'static str), Failure> {
    if let Err(why) = models::check_name(name) {
        return fail(
            exit::USAGE,
            format!("{name:?} is refused: {why}; `utter models list` shows the installed models"),
        );
    }
    let dir = models_dir()?;
    let path = dir.join(name);
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return fail(
                exit::NOT_DONE,
                format!(
                    "{name} is not installed (there is no {}); nothing was removed",
                    path.display()
                ),
            );
        }
        Err(e) => {
            return fail(
                exit::NOT_DONE,
                format!("cannot look at {}: {e}", path.display()),
            );
        }
    };
    let (result, what) = if meta.file_type().is_symlink() {
        (
            std::fs::remove_file(&path),
            "the symbolic link (not what it points to)",
        )
    } else if meta.is_dir() {
        (std::fs::remove_dir_all(&path), "the directory")
    } else {
        (std::fs::remove_file(&path), "the file")
    };
    match result {
        Ok(()) => Ok((path, what)),
        Err(e) => fail(exit::NOT_DONE, io_problem(&e, &path, "remove")),
    }
}

// ---------------------------------------------------------------------------------------
// pull: reporting

/// How `pull` reports: JSON lines on stdout, or words and a progress bar on stderr.
struct Report {
    json: bool,
    /// `pull` or `import`, for messages.
    command: &'static str,
    /// Whether a progress bar is drawn (stderr is a terminal and not `--json`).
    bar: bool,
    /// The model's name, once known (the failure result names it).
    model: Option<String>,
    /// The final result, once known (success).
    done: Option<Value>,
}

impl Report {
    fn new(json: bool, command: &'static str) -> Report {
        Report {
            json,
            command,
            bar: !json && std::io::stderr().is_terminal(),
            model: None,
            done: None,
        }
    }

    /// One JSON event line (with `--json`), display-safe (an archive's member names are
    /// anyone's).
    fn event(&self, event: Value) {
        if self.json {
            out!(
                "{}",
                utter_protocol::text::json_display_safe(&event.to_string())
            );
        }
    }

    /// One line for people on stderr (without `--json`).
    fn note(&self, text: &str) {
        if !self.json {
            eprintln!("{text}");
        }
    }

    /// The progress bar of one file, hidden unless stderr is a terminal.
    fn progress(&self, file: &str, size: u64, offset: u64) -> ProgressBar {
        let bar = ProgressBar::with_draw_target(Some(size), ProgressDrawTarget::hidden());
        if self.bar {
            let style = ProgressStyle::with_template(
                "{msg:<14} [{bar:20}] {decimal_bytes:>9}/{decimal_total_bytes} {decimal_bytes_per_sec:>11} ETA {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            bar.set_style(style);
            bar.set_message(file.to_owned());
            bar.set_draw_target(ProgressDrawTarget::stderr());
        }
        bar.set_position(offset);
        bar
    }

    /// Print the result and return the exit code; `subject` names what failed (the model's
    /// name, or the path imported).
    fn finish(self, subject: &str, code: Result<(), Failure>) -> u8 {
        match code {
            Ok(()) => {
                let done = self.done.unwrap_or_default();
                let name = done["model"].as_str().unwrap_or(subject);
                if self.json {
                    out!("{done}");
                } else if done["verified"] == false {
                    out!(
                        "installed {name} in {} ({}, {}); not verified: {name} is not in the catalog, so no checksum pins its files (it holds the files the speech plugin loads)",
                        done["path"].as_str().unwrap_or_default(),
                        files(&done),
                        DecimalBytes(done["bytes"].as_u64().unwrap_or(0))
                    );
                    out!(
                        "use it with [stt] model = \"{name}\" in the config (then `utter reload`)"
                    );
                } else if done["status"] == "already-installed" {
                    out!(
                        "{name} is already installed in {} ({}, {}, SHA-256 verified)",
                        done["path"].as_str().unwrap_or_default(),
                        files(&done),
                        DecimalBytes(done["bytes"].as_u64().unwrap_or(0))
                    );
                } else {
                    out!(
                        "installed {name} in {} ({}, {}, SHA-256 verified)",
                        done["path"].as_str().unwrap_or_default(),
                        files(&done),
                        DecimalBytes(done["bytes"].as_u64().unwrap_or(0))
                    );
                    out!(
                        "use it with [stt] model = \"{name}\" in the config (then `utter reload`)"
                    );
                }
                exit::OK
            }
            Err(f) => {
                eprintln!(
                    "utter: models {} {}: {}",
                    self.command,
                    sanitize(subject),
                    f.message
                );
                if self.json {
                    out!(
                        "{}",
                        json!({"event": "result", "ok": false, "model": self.model, "error": f.message})
                    );
                }
                f.code
            }
        }
    }
}

/// "1 file", "4 files" of a result.
fn files(done: &Value) -> String {
    match done["files"].as_u64().unwrap_or(0) {
        1 => "1 file".to_owned(),
        n => format!("{n} files"),
    }
}

fn say_failure(command: &str, f: &Failure, json: bool) -> u8 {
    eprintln!("utter: models {command}: {}", f.message);
    if json {
        print_json(&json!({ "ok": false, "error": f.message }));
    }
    f.code
}

// ---------------------------------------------------------------------------------------
// pull

/// Where the files come from: `--source`, `$UTTER_MODELS_SOURCE`, `[models] source`, the
/// model's own.
fn source_of(
    model: &Model,
    flag: Option<String>,
    config: Option<&Path>,
) -> Result<String, Failure> {
    let (source, from) = if let Some(s) = flag {
        (s, "--source")
    } else if let Some(s) = std::env::var(SOURCE_ENV)
        .ok()
        .filter(|s| !s.trim().is_empty())
    {
        (s, "$UTTER_MODELS_SOURCE")
    } else {
        let Some(loaded) = check_config::load(config) else {
            return fail(exit::CONFIG, "the configuration is invalid (see above)");
        };
        let s = loaded.config.models.source.trim().to_owned();
        if s.is_empty() {
            (model.source.clone(), "the catalog")
        } else {
            (s, "[models] source")
        }
    };
    let source = source.trim().to_owned();
    match models::source_problem(&source) {
        Some(why) => fail(exit::USAGE, format!("{from}: {why}")),
        None if source.is_empty() => fail(exit::USAGE, format!("{from} is empty")),
        None => match models::local_source_dir(&source) {
            Some(dir) if !dir.is_dir() => fail(
                exit::USAGE,
                format!(
                    "{from}: {} is not a directory{}; a file:// source is the directory that holds the model's files",
                    dir.display(),
                    if dir.exists() {
                        ""
                    } else {
                        " (it does not exist)"
                    }
                ),
            ),
            _ => Ok(source),
        },
    }
}

/// Create the model's directory (and its parents), or say what stops it.
fn create_dir(dir: &Path) -> Result<(), Failure> {
    std::fs::create_dir_all(dir).or_else(|e| fail(exit::NOT_DONE, io_problem(&e, dir, "create")))
}

/// A sentence about an I/O error on `path`: what to do about a directory that is not
/// writable, a path through a file, a full disk.
fn io_problem(e: &std::io::Error, path: &Path, doing: &str) -> String {
    use std::io::ErrorKind;
    // The nearest ancestor that exists: the directory that refused, or the file in the way.
    let existing = path.ancestors().find(|p| p.symlink_metadata().is_ok());
    match e.kind() {
        ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem => {
            let dir = existing.unwrap_or(path);
            format!(
                "cannot {doing} {}: {} is not writable for this user ({e}); make it writable \
                 (e.g. `chmod u+w {}`), or set XDG_DATA_HOME to a directory you own",
                path.display(),
                dir.display(),
                dir.display()
            )
        }
        ErrorKind::NotADirectory => {
            let file = path
                .ancestors()
                .find(|p| p.symlink_metadata().is_ok_and(|m| !m.is_dir()))
                .unwrap_or(path);
            format!(
                "cannot {doing} {}: {} is a file, not a directory; remove it, or set \
                 XDG_DATA_HOME to a directory",
                path.display(),
                file.display()
            )
        }
        ErrorKind::StorageFull | ErrorKind::QuotaExceeded => format!(
            "cannot {doing} {}: the disk is full ({e}); free some space and run the same command again",
            path.display()
        ),
        _ => format!("cannot {doing} {}: {e}", path.display()),
    }
}

/// Bytes free for this user on the file system of `dir`.
// The statvfs fields are u64 here, narrower on 32-bit targets.
#[allow(clippy::useless_conversion)]
fn free_bytes(dir: &Path) -> Option<u64> {
    let s = nix::sys::statvfs::statvfs(dir).ok()?;
    Some(u64::from(s.blocks_available()).saturating_mul(u64::from(s.fragment_size())))
}

use utter_protocol::digest::sha256_file;

/// Make `path`'s directory entry durable (after a rename into it).
fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

fn pull(
    name: &str,
    source: Option<String>,
    config: Option<&Path>,
    report: &mut Report,
) -> Result<(), Failure> {
    let catalog = catalog()?;
    let model = catalog
        .get(name)
        .ok_or_else(|| unknown_model(name, &catalog))?;
    let source = source_of(model, source, config)?;
    let dir = models_dir()?.join(&model.name);
    let created = std::fs::symlink_metadata(&dir).is_err();
    create_dir(&dir)?;
    let result = pull_into(model, &source, &dir, report);
    if result.is_err() && created {
        // Nothing came of it: leave no empty directory behind (one with a partial stays).
        let _ = std::fs::remove_dir(&dir);
    }
    result
}

/// [`pull`] into the model's directory `dir`, which exists.
fn pull_into(model: &Model, source: &str, dir: &Path, report: &mut Report) -> Result<(), Failure> {
    let name = model.name.as_str();
    let dir = dir.to_path_buf();

    // One pull of a model at a time: a second one would write the same partial files.
    let lock = File::open(&dir).map_err(|e| Failure {
        code: exit::NOT_DONE,
        message: io_problem(&e, &dir, "open"),
    })?;
    let _lock = match nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(l) => l,
        Err((_, errno)) => {
            return fail(
                exit::NOT_DONE,
                format!(
                    "another `utter models pull {name}` is downloading into {} ({errno}); wait for it",
                    dir.display()
                ),
            );
        }
    };

    // What is there already: verified files stay; a final file that does not match is
    // downloaded again.
    let mut todo: Vec<&ModelFile> = Vec::new();
    for file in &model.files {
        let path = dir.join(&file.name);
        match std::fs::metadata(&path) {
            Ok(meta) if meta.is_file() && meta.len() == file.size => {
                let actual = sha256_file(&path).map_err(|e| Failure {
                    code: exit::NOT_DONE,
                    message: io_problem(&e, &path, "read"),
                })?;
                if actual == file.sha256 {
                    report.event(json!({"event": "present", "file": file.name, "sha256": actual}));
                    // A partial download left beside the installed file is of no use.
                    let _ = std::fs::remove_file(partial_path(&path));
                    continue;
                }
                report.note(&format!(
                    "{} in {} does not match its pinned SHA-256 (expected {}, found {actual}); downloading it again",
                    file.name,
                    dir.display(),
                    file.sha256
                ));
                remove_stale(&path)?;
            }
            Ok(meta) if meta.is_file() => {
                report.note(&format!(
                    "{} in {} has {} bytes, not the pinned {}; downloading it again",
                    file.name,
                    dir.display(),
                    meta.len(),
                    file.size
                ));
                remove_stale(&path)?;
            }
            Ok(_) => {
                return fail(
                    exit::NOT_DONE,
                    format!(
                        "{} is not a regular file; remove it (or `utter models remove {name}`) and pull again",
                        path.display()
                    ),
                );
            }
            Err(_) => {}
        }
        todo.push(file);
    }

    let bytes = model.size();
    if todo.is_empty() {
        report.done = Some(json!({
            "event": "result", "ok": true, "model": name, "status": "already-installed",
            "path": dir, "files": model.files.len(), "bytes": bytes, "verified": true,
        }));
        return Ok(());
    }

    // Enough room for what is left to download?
    let needed: u64 = todo
        .iter()
        .map(|f| {
            let have = std::fs::metadata(partial_path(&dir.join(&f.name)))
                .map(|m| m.len())
                .unwrap_or(0);
            f.size.saturating_sub(have)
        })
        .sum();
    if let Some(free) = free_bytes(&dir) {
        if free < needed {
            return fail(
                exit::NOT_DONE,
                format!(
                    "not enough space in {}: {name} needs {} ({needed} bytes) more, but only {} is free; free some space (or set XDG_DATA_HOME to a larger disk) and run the same command again",
                    dir.display(),
                    DecimalBytes(needed),
                    DecimalBytes(free)
                ),
            );
        }
    }

    // A local directory (file://) is read; anything else is downloaded.
    let local = models::local_source_dir(source);
    let agent = if local.is_none() { Some(agent()) } else { None };
    for file in todo {
        match (&local, &agent) {
            (Some(from), _) => copy_local(from, source, &dir, file, report)?,
            (None, Some(agent)) => download(agent, source, &dir, file, report)?,
            (None, None) => unreachable!("an agent is made for every source that is not local"),
        }
    }
    report.done = Some(json!({
        "event": "result", "ok": true, "model": name, "status": "installed",
        "path": dir, "files": model.files.len(), "bytes": bytes, "source": source,
        "verified": true,
    }));
    Ok(())
}

fn remove_stale(path: &Path) -> Result<(), Failure> {
    std::fs::remove_file(path).or_else(|e| fail(exit::NOT_DONE, io_problem(&e, path, "remove")))
}

/// The system's bundle of trusted certificate authorities, where distributions keep it
/// (`$SSL_CERT_FILE` first, as OpenSSL and curl read it).
const CA_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Arch, Gentoo
    "/etc/pki/tls/certs/ca-bundle.crt",   // Fedora, RHEL
    "/etc/ssl/ca-bundle.pem",             // openSUSE
    "/etc/ssl/cert.pem",                  // Alpine, macOS
];

/// The certificate authorities HTTPS trusts: the system's bundle, so that an authority the
/// administrator added (a company proxy) is trusted as curl and pip trust it; without a
/// readable bundle, the Mozilla roots compiled into `utter` (webpki-roots).
fn tls_roots() -> ureq::tls::RootCerts {
    use ureq::tls::{PemItem, RootCerts, parse_pem};
    let from_env = std::env::var_os("SSL_CERT_FILE").map(PathBuf::from);
    let bundles = from_env
        .into_iter()
        .chain(CA_BUNDLES.iter().map(PathBuf::from));
    for bundle in bundles {
        let Ok(pem) = std::fs::read(&bundle) else {
            continue;
        };
        let certs: Vec<_> = parse_pem(&pem)
            .filter_map(|item| match item {
                Ok(PemItem::Certificate(c)) => Some(c),
                _ => None,
            })
            .collect();
        if !certs.is_empty() {
            tracing::debug!(bundle = %bundle.display(), count = certs.len(), "TLS roots");
            return RootCerts::Specific(std::sync::Arc::new(certs));
        }
    }
    tracing::debug!("TLS roots: the compiled-in Mozilla roots (webpki-roots)");
    RootCerts::WebPki
}

/// The HTTP client: statuses are answers (not errors), bounded waits for the connection,
/// the answer and each read, no limit on the whole download (a slow line still finishes;
/// Ctrl-C and the same command again resume it). HTTPS is rustls (on ring) with
/// [`tls_roots`].
fn agent() -> ureq::Agent {
    let tls = ureq::tls::TlsConfig::builder()
        .root_certs(tls_roots())
        .build();
    ureq::Agent::config_builder()
        .tls_config(tls)
        .http_status_as_error(false)
        .timeout_connect(Some(Duration::from_secs(30)))
        .timeout_recv_response(Some(Duration::from_secs(60)))
        .timeout_per_read(Some(Duration::from_secs(60)))
        .user_agent(format!("utter/{}", env!("CARGO_PKG_VERSION")))
        .build()
        .new_agent()
}

/// A sentence about a request that got no answer.
fn request_problem(e: &ureq::Error, url: &str) -> String {
    match e {
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => format!(
            "cannot connect to {url}: connection refused (is the server running, and is the source right?)"
        ),
        ureq::Error::HostNotFound => {
            format!("cannot resolve the host of {url} (offline, or a typo in the source?)")
        }
        ureq::Error::Io(io) if io.to_string().contains("certificate") => format!(
            "{url}: TLS failed: {io} (the server's certificate is not trusted; behind a proxy \
             with its own authority, add it to the system's CA bundle or name a bundle with \
             SSL_CERT_FILE)"
        ),
        ureq::Error::Io(io) if io.to_string().contains("lookup address") => {
            format!("cannot resolve the host of {url} ({io}; offline, or a typo in the source?)")
        }
        ureq::Error::Timeout(t) => format!("{url}: no answer in time ({t})"),
        ureq::Error::Tls(_) | ureq::Error::Rustls(_) => format!("{url}: TLS failed: {e}"),
        _ => format!("{url}: the request failed: {e}"),
    }
}

/// `Content-Range: bytes START-END/TOTAL` → (START, TOTAL when given).
fn content_range(value: &str) -> Option<(u64, Option<u64>)> {
    let rest = value.trim().strip_prefix("bytes ")?;
    let (range, total) = rest.split_once('/')?;
    let (start, _end) = range.split_once('-')?;
    let total = match total.trim() {
        "*" => None,
        t => Some(t.parse().ok()?),
    };
    Some((start.trim().parse().ok()?, total))
}

/// Download `file` from `source` into `dir`: `<file>.partial`, resumed when it is there, then
/// verified and renamed into place.
fn download(
    agent: &ureq::Agent,
    source: &str,
    dir: &Path,
    file: &ModelFile,
    report: &Report,
) -> Result<(), Failure> {
    let url = models::file_url(source, &file.name);
    let target = dir.join(&file.name);
    let partial = partial_path(&target);
    let not_done = |message: String| Failure {
        code: exit::NOT_DONE,
        message,
    };
    let remove_partial = || {
        let _ = std::fs::remove_file(&partial);
    };

    // A server that ignores the range or refuses it: start over, once.
    let mut restarted = false;
    loop {
        let mut offset: u64 = match std::fs::symlink_metadata(&partial) {
            Ok(m) if m.is_file() => m.len(),
            Ok(_) => {
                return Err(not_done(format!(
                    "{} is not a regular file; remove it and pull again",
                    partial.display()
                )));
            }
            Err(_) => 0,
        };
        if offset > file.size {
            remove_partial();
            offset = 0;
        }
        report.event(json!({
            "event": "start", "file": file.name, "url": url, "size": file.size, "offset": offset,
        }));
        if offset > 0 {
            report.note(&format!(
                "resuming {} at {} of {} from {url}",
                file.name,
                DecimalBytes(offset),
                DecimalBytes(file.size)
            ));
        } else {
            report.note(&format!(
                "downloading {} ({}) from {url}",
                file.name,
                DecimalBytes(file.size)
            ));
        }
        if offset < file.size {
            let mut request = agent.get(&url);
            if offset > 0 {
                request = request.header("Range", format!("bytes={offset}-"));
            }
            let mut response = request
                .call()
                .map_err(|e| not_done(request_problem(&e, &url)))?;
            let status = response.status().as_u16();
            let header = |name: &str| {
                response
                    .headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
            };
            let length: Option<u64> = header("content-length").and_then(|v| v.trim().parse().ok());
            // A 200 to a Range request: the whole file, taken from its start (the partial
            // is dropped once the answer's length is checked).
            let whole_again = status == 200 && offset > 0;
            let restart = match status {
                200 if offset > 0 => {
                    offset = 0;
                    None
                }
                206 if offset == 0 => {
                    return Err(not_done(format!(
                        "{url} answered 206 Partial Content to a request for the whole file"
                    )));
                }
                206 => match header("content-range").as_deref().and_then(content_range) {
                    Some((start, total))
                        if start == offset && total.is_none_or(|t| t == file.size) =>
                    {
                        None
                    }
                    _ => Some("the server answered with another part of the file than asked for"),
                },
                416 => Some("the server refused the range (416 Range Not Satisfiable)"),
                200 => None,
                _ => {
                    let reason = response.status().canonical_reason().unwrap_or("");
                    let hint = if status == 404 {
                        " (the source has no such file: is it a mirror with the catalog's file names?)"
                    } else {
                        ""
                    };
                    return Err(not_done(format!("HTTP {status} {reason} from {url}{hint}")));
                }
            };
            if let Some(why) = restart {
                // Ask again for the whole file.
                if restarted {
                    return Err(not_done(format!("{url}: {why}, again after starting over")));
                }
                restarted = true;
                report.event(json!({"event": "restart", "file": file.name, "reason": why}));
                report.note(&format!("{}: {why}; starting it over", file.name));
                remove_partial();
                continue;
            }
            let remaining = file.size - offset;
            if let Some(len) = length.filter(|&len| len != remaining) {
                return Err(not_done(format!(
                    "{url} announces {len} bytes, but the catalog pins {remaining} bytes{} for {}; refused (nothing was written)",
                    if offset > 0 {
                        " from the resume point"
                    } else {
                        ""
                    },
                    file.name
                )));
            }
            if whole_again {
                let why = "the server does not resume downloads (it answered the Range request with the whole file)";
                report.event(json!({"event": "restart", "file": file.name, "reason": why}));
                report.note(&format!("{}: {why}; starting it over", file.name));
                remove_partial();
            }
            let mut out = OpenOptions::new()
                .create(true)
                .append(true)
                .custom_flags(nix::libc::O_NOFOLLOW)
                .open(&partial)
                .map_err(|e| not_done(io_problem(&e, &partial, "write")))?;
            let bar = report.progress(&file.name, file.size, offset);
            let result = copy_body(
                &mut response.body_mut().as_reader(),
                &mut out,
                offset,
                file,
                &bar,
                report,
            );
            bar.finish_and_clear();
            match result {
                Ok(()) => {}
                Err(Stop::TooLong) => {
                    drop(out);
                    remove_partial();
                    return Err(not_done(format!(
                        "{url} sent more than the {} bytes pinned for {}; refused, and the download was removed",
                        file.size, file.name
                    )));
                }
                Err(Stop::Short { got, why }) => {
                    return Err(not_done(format!(
                        "the download of {} stopped after {got} of {} bytes ({why}); run the same command again to resume it",
                        file.name, file.size
                    )));
                }
                Err(Stop::Write(e)) => {
                    let written = std::fs::metadata(&partial).map(|m| m.len()).unwrap_or(0);
                    return Err(not_done(write_problem(
                        &e, &partial, dir, file, written, true,
                    )));
                }
            }
            out.sync_all()
                .map_err(|e| not_done(io_problem(&e, &partial, "write")))?;
        }

        return install_partial(&partial, &target, dir, file, &url, report);
    }
}

/// Check the SHA-256 of `partial` (complete, `file.size` bytes) and rename it to `target` in
/// `dir`; a file that does not match is deleted.
fn install_partial(
    partial: &Path,
    target: &Path,
    dir: &Path,
    file: &ModelFile,
    url: &str,
    report: &Report,
) -> Result<(), Failure> {
    let not_done = |message: String| Failure {
        code: exit::NOT_DONE,
        message,
    };
    let actual = sha256_file(partial).map_err(|e| not_done(io_problem(&e, partial, "read")))?;
    if actual != file.sha256 {
        let _ = std::fs::remove_file(partial);
        return Err(not_done(format!(
            "{} from {url} does not match the catalog: expected sha256 {}, got {actual}; the download was removed (a wrong mirror, or a changed upstream file)",
            file.name, file.sha256
        )));
    }
    std::fs::rename(partial, target).map_err(|e| not_done(io_problem(&e, target, "install")))?;
    sync_dir(dir);
    report.event(json!({"event": "verified", "file": file.name, "sha256": actual}));
    report.note(&format!("{}: SHA-256 verified", file.name));
    Ok(())
}

/// The sentence for a write that failed while `written` of `file`'s bytes were in `dir`: a full
/// disk says how much more is needed (and that the same command resumes, when it does).
fn write_problem(
    e: &std::io::Error,
    path: &Path,
    dir: &Path,
    file: &ModelFile,
    written: u64,
    resumes: bool,
) -> String {
    if matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    ) {
        format!(
            "the disk is full: writing {} in {} stopped at {written} of its {} bytes ({} more are needed for it); free some space and run the same command again{}",
            file.name,
            dir.display(),
            file.size,
            DecimalBytes(file.size - written.min(file.size)),
            if resumes { " to resume" } else { "" }
        )
    } else {
        io_problem(e, path, "write")
    }
}

/// Copy `file` from the local directory `from` (the `file://` source `source_url`) into `dir`: like
/// [`download`], through `<file>.partial` (resumed), never past the pinned size, verified,
/// then renamed into place. A file of another size is refused before anything is copied.
fn copy_local(
    from: &Path,
    source_url: &str,
    dir: &Path,
    file: &ModelFile,
    report: &Report,
) -> Result<(), Failure> {
    use std::io::{Seek, SeekFrom};
    let url = models::file_url(source_url, &file.name);
    let source = from.join(&file.name);
    let target = dir.join(&file.name);
    let partial = partial_path(&target);
    let not_done = |message: String| Failure {
        code: exit::NOT_DONE,
        message,
    };
    // O_NONBLOCK: a FIFO by a file's name is opened without waiting for a writer, and then
    // refused as no regular file below.
    let mut input = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open(&source)
    }
    .map_err(|e| {
        not_done(if e.kind() == std::io::ErrorKind::NotFound {
            format!(
                "{} is not in the source directory {} (it holds the catalog's file names, as a mirror does)",
                file.name,
                from.display()
            )
        } else {
            io_problem(&e, &source, "read")
        })
    })?;
    let meta = input
        .metadata()
        .map_err(|e| not_done(io_problem(&e, &source, "read")))?;
    if !meta.is_file() {
        return Err(not_done(format!(
            "{} is not a regular file; refused",
            source.display()
        )));
    }
    if meta.len() != file.size {
        return Err(not_done(format!(
            "{} has {} bytes, but the catalog pins {} bytes for {}; refused (nothing was written)",
            source.display(),
            meta.len(),
            file.size,
            file.name
        )));
    }
    let mut offset = match std::fs::symlink_metadata(&partial) {
        Ok(m) if m.is_file() => m.len(),
        Ok(_) => {
            return Err(not_done(format!(
                "{} is not a regular file; remove it and pull again",
                partial.display()
            )));
        }
        Err(_) => 0,
    };
    if offset > file.size {
        let _ = std::fs::remove_file(&partial);
        offset = 0;
    }
    report.event(json!({
        "event": "start", "file": file.name, "url": url, "size": file.size, "offset": offset,
    }));
    report.note(&format!(
        "{} {} ({}) from {}",
        if offset > 0 { "resuming" } else { "copying" },
        file.name,
        DecimalBytes(file.size),
        source.display()
    ));
    if offset < file.size {
        input
            .seek(SeekFrom::Start(offset))
            .map_err(|e| not_done(io_problem(&e, &source, "read")))?;
        let mut out = OpenOptions::new()
            .create(true)
            .append(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&partial)
            .map_err(|e| not_done(io_problem(&e, &partial, "write")))?;
        let bar = report.progress(&file.name, file.size, offset);
        let result = copy_body(&mut input, &mut out, offset, file, &bar, report);
        bar.finish_and_clear();
        match result {
            Ok(()) => {}
            Err(Stop::TooLong) => {
                drop(out);
                let _ = std::fs::remove_file(&partial);
                return Err(not_done(format!(
                    "{} grew past the {} bytes pinned for {} while it was read; refused, and the copy was removed",
                    source.display(),
                    file.size,
                    file.name
                )));
            }
            Err(Stop::Short { got, why }) => {
                return Err(not_done(format!(
                    "reading {} stopped after {got} of {} bytes ({why}); run the same command again to resume",
                    source.display(),
                    file.size
                )));
            }
            Err(Stop::Write(e)) => {
                let written = std::fs::metadata(&partial).map(|m| m.len()).unwrap_or(0);
                return Err(not_done(write_problem(
                    &e, &partial, dir, file, written, true,
                )));
            }
        }
        out.sync_all()
            .map_err(|e| not_done(io_problem(&e, &partial, "write")))?;
    }
    install_partial(&partial, &target, dir, file, &url, report)
}

/// Why copying a body stopped early.
enum Stop {
    /// The server sent more than the pinned size.
    TooLong,
    /// The body ended (or failed) before the pinned size.
    Short { got: u64, why: String },
    /// Writing the partial file failed.
    Write(std::io::Error),
}

/// Copy the body into `out` (already `offset` bytes long) until the pinned size, and one
/// read more to see that nothing follows; progress every MiB and at the end.
fn copy_body(
    body: &mut impl Read,
    out: &mut File,
    offset: u64,
    file: &ModelFile,
    bar: &ProgressBar,
    report: &Report,
) -> Result<(), Stop> {
    const EVERY: u64 = 1 << 20;
    let mut buf = vec![0u8; 1 << 16];
    let mut have = offset;
    let mut reported = offset;
    loop {
        let n = match body.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(Stop::Short {
                    got: have,
                    why: e.to_string(),
                });
            }
        };
        if n == 0 {
            break;
        }
        let n = n as u64;
        if have + n > file.size {
            return Err(Stop::TooLong);
        }
        out.write_all(&buf[..n as usize]).map_err(Stop::Write)?;
        have += n;
        bar.set_position(have);
        if have - reported >= EVERY || (have == file.size && have != reported) {
            reported = have;
            report.event(json!({
                "event": "progress", "file": file.name, "bytes": have, "size": file.size,
            }));
        }
    }
    if have < file.size {
        return Err(Stop::Short {
            got: have,
            why: "the connection closed".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_ranges_parse() {
        assert_eq!(content_range("bytes 10-99/100"), Some((10, Some(100))));
        assert_eq!(content_range("bytes 0-1/*"), Some((0, None)));
        assert_eq!(content_range("items 0-1/2"), None);
        assert_eq!(content_range("bytes x-1/2"), None);
    }
}
