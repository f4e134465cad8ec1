//! `utter models import DIR|FILE [--name NAME]`: install a speech model from a local
//! faster-whisper directory or an archive of one ([`super::archive`]), checked as a download is.
//!
//! * The name is `--name`, else the directory's name (in an archive: the model directory's, or
//!   the archive's own name when the files are at its top); a directory whose files have the
//!   sizes of a catalog model's is imported as that model when no `--name` says otherwise.
//! * A model of the catalog: every one of its files must be there with the pinned size (else
//!   refused before anything is copied) and SHA-256 (else refused once all are copied, naming
//!   each file that differs). Other files are left out. A name the catalog does not know: the
//!   directory must hold what the speech plugin loads ([`models::STT_FILES`]); every plain file
//!   of it is copied, and the model is installed unverified.
//! * The files are copied into `<models_dir>/.import-<pid>-<name>` and that directory is
//!   renamed to `<models_dir>/<name>` once every file is there: a failed or interrupted import
//!   installs nothing. The temporary directory is removed on failure; one left by a process
//!   that was killed is removed by the next import (its process is gone and it is not locked).
//! * Copies go through the same progress bar, events and bounded copy as `pull`
//!   ([`Report::progress`], [`copy_body`]).

use serde_json::json;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use indicatif::DecimalBytes;
use nix::fcntl::{Flock, FlockArg};
use utter_core::models::{self, Catalog, InstallState, Model, ModelFile, file_url_of};

use super::archive::{self, Kind, Member, MemberKind};
use super::{
    Failure, Report, Stop, catalog, copy_body, create_dir, exit, fail, free_bytes, io_problem,
    models_dir, sha256_file, sync_dir, write_problem,
};
use crate::cli::output::sanitize;

/// What a temporary directory of an import is called: `.import-<pid>-<name>`.
const STAGING_PREFIX: &str = ".import-";

/// The most entries a model directory may have.
const MAX_DIR_ENTRIES: usize = 10_000;

/// Where a file to import is.
#[derive(Debug, Clone)]
enum At {
    /// A regular file (a symbolic link already followed, within the directory).
    Path(PathBuf),
    /// A member of the archive.
    Member(Member),
    /// Not usable, and why (a link out of the directory, a device).
    Refused(String),
}

/// A file of the directory to import.
#[derive(Debug, Clone)]
struct Found {
    size: u64,
    at: At,
}

/// What was found at the path given: the directory (or the model directory of an archive).
struct Candidate {
    /// The path given, or `ARCHIVE (dir/)`, for messages.
    label: String,
    /// The name it suggests: the directory's (maybe not a valid model name).
    suggested: Option<String>,
    /// Its plain entries, by name.
    files: BTreeMap<String, Found>,
    /// What is left out whatever the model (subdirectories, hidden files), for the note.
    others: Vec<String>,
    /// The archive it is in.
    archive: Option<(PathBuf, Kind)>,
    /// The `file://` URL of the directory or archive.
    url: String,
}

/// One file to copy.
struct Planned<'a> {
    file: ModelFile,
    found: &'a Found,
    /// Whether the catalog pins its SHA-256 (`file.sha256`).
    pinned: bool,
}

pub(super) fn import(path: &Path, name: Option<&str>, report: &mut Report) -> Result<(), Failure> {
    if let Some(name) = name {
        report.model = Some(name.to_owned());
        if let Err(why) = models::check_name(name) {
            return fail(exit::USAGE, format!("--name {name:?} is refused: {why}"));
        }
    }
    let catalog = catalog()?;
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dangling = std::fs::symlink_metadata(path).is_ok();
            return fail(
                exit::USAGE,
                format!(
                    "{} does not exist{}; give the directory of a faster-whisper model (holding model.bin, config.json, tokenizer.json, vocabulary.*) or an archive of one (.tar, .tar.gz/.tgz, .zip, .whl)",
                    path.display(),
                    if dangling {
                        " (it is a symbolic link to nothing)"
                    } else {
                        ""
                    }
                ),
            );
        }
        Err(e) => return fail(exit::NOT_DONE, io_problem(&e, path, "read")),
    };
    let models = models_dir()?;
    create_dir(&models)?;
    let free = free_bytes(&models);
    remove_stale_staging(&models);

    let named = name.and_then(|n| catalog.get(n));
    let candidate = if meta.is_dir() {
        scan_dir(path)?
    } else if meta.is_file() {
        let kind = archive::detect(path)?;
        scan_archive(path, kind, named, &catalog, free, &models)?
    } else {
        return fail(
            exit::USAGE,
            format!(
                "{} is neither a directory nor a regular file (an archive); give a model directory or an archive of one",
                path.display()
            ),
        );
    };

    // Its name, and the catalog's model of that name.
    let (name, model) = choose_name(name, &candidate, &catalog, report)?;
    report.model = Some(name.clone());

    // What to copy.
    let (plan, left_out) = match model {
        Some(model) => plan_catalog(model, &candidate)?,
        None => plan_unknown(&name, &candidate)?,
    };
    if !left_out.is_empty() {
        report.note(&format!(
            "left out of {name}: {}{}",
            left_out.join(", "),
            if model.is_some() {
                format!(" (not files of the catalog's {name})")
            } else {
                String::new()
            }
        ));
    }
    if model.is_none() {
        if let Some(like) = catalog.models.iter().find(|m| same_sizes(m, &candidate)) {
            report.note(&format!(
                "its files have the sizes of the catalog's {0}: `--name {0}` would check them against it",
                like.name
            ));
        }
    }
    let bytes: u64 = plan.iter().map(|p| p.file.size).sum();

    // Where it goes, and what is there now.
    let dest = models.join(&name);
    let _dest_lock = match std::fs::symlink_metadata(&dest) {
        Err(_) => None,
        Ok(m) if m.file_type().is_symlink() => {
            return fail(
                exit::NOT_DONE,
                format!(
                    "{} is a symbolic link; it is left alone: `utter models remove {name}` removes the link (not what it points to), or import under another name with --name",
                    dest.display()
                ),
            );
        }
        Ok(m) if !m.is_dir() => {
            return fail(
                exit::NOT_DONE,
                format!(
                    "{} is a file, not a model directory; remove it, or import under another name with --name",
                    dest.display()
                ),
            );
        }
        Ok(_) => {
            let lock = lock_dir(&dest, &name)?;
            if let Some(model) = model {
                if model.state(&dest) == InstallState::Installed
                    && verified_in_place(model, &dest, report)?
                {
                    report.done = Some(json!({
                        "event": "result", "ok": true, "model": name,
                        "status": "already-installed", "path": dest,
                        "files": model.files.len(), "bytes": model.size(), "verified": true,
                    }));
                    return Ok(());
                }
            } else if !is_empty_dir(&dest) {
                return fail(
                    exit::NOT_DONE,
                    format!(
                        "{name} is already installed in {} (not a model of the catalog: there is nothing to check it against); `utter models remove {name}` first to replace it, or import under another name with --name",
                        dest.display()
                    ),
                );
            }
            Some(lock)
        }
    };

    if let Some(free) = free {
        if free < bytes {
            return fail(
                exit::NOT_DONE,
                format!(
                    "not enough space in {}: {name} needs {} ({bytes} bytes), but only {} is free; free some space (or set XDG_DATA_HOME to a larger disk) and import again; nothing was installed",
                    models.display(),
                    DecimalBytes(bytes),
                    DecimalBytes(free)
                ),
            );
        }
    }

    // Copy every file into a temporary directory beside the models.
    let staging = Staging::create(&models, &name)?;
    let mut mismatches = Vec::new();
    let mut copied = |planned: &Planned, data: &mut dyn std::io::Read, from: &str, url: &str| {
        let actual = copy_in(&staging.path, planned, data, from, url, report)?;
        if !planned.pinned {
            report
                .event(json!({"event": "unverified", "file": planned.file.name, "sha256": actual}));
        } else if actual == planned.file.sha256 {
            report.event(json!({"event": "verified", "file": planned.file.name, "sha256": actual}));
            report.note(&format!("{}: SHA-256 verified", planned.file.name));
        } else {
            mismatches.push(format!(
                "{}: expected sha256 {}, got {actual}",
                planned.file.name, planned.file.sha256
            ));
        }
        Ok::<(), Failure>(())
    };
    match &candidate.archive {
        None => {
            for planned in &plan {
                let At::Path(from) = &planned.found.at else {
                    unreachable!("a directory's planned files are paths");
                };
                let mut input = open_source(from, planned.file.size)?;
                let url = file_url_of(from);
                copied(planned, &mut input, &from.display().to_string(), &url)?;
            }
        }
        Some((archive_path, kind)) => {
            let by_index: BTreeMap<usize, &Planned> = plan
                .iter()
                .filter_map(|p| match &p.found.at {
                    At::Member(m) => Some((m.index, p)),
                    _ => None,
                })
                .collect();
            let wanted: Vec<&Member> = plan
                .iter()
                .filter_map(|p| match &p.found.at {
                    At::Member(m) => Some(m),
                    _ => None,
                })
                .collect();
            let url = file_url_of(archive_path);
            archive::read(archive_path, *kind, &wanted, |member, data| {
                let planned = by_index[&member.index];
                let from = format!("{} ({})", archive_path.display(), sanitize(&member.path));
                copied(planned, data, &from, &url)
            })?;
        }
    }
    if !mismatches.is_empty() {
        return fail(
            exit::NOT_DONE,
            format!(
                "{} is not the catalog's {name}: {}; nothing was installed (the copies were removed). Another build of the model? `--name OTHER` installs it under another name, unverified",
                candidate.label,
                mismatches.join("; ")
            ),
        );
    }

    // Into place: a rename, or an exchange with what was there.
    sync_dir(&staging.path);
    let replaced = staging.install(&models, &dest, &name)?;
    report.done = Some(json!({
        "event": "result", "ok": true, "model": name, "status": "installed",
        "path": dest, "files": plan.len(), "bytes": bytes, "source": candidate.url,
        "verified": model.is_some(), "replaced": replaced, "left_out": left_out,
    }));
    Ok(())
}

/// The name and the catalog's model: `--name`, else the directory's name, else the catalog
/// model whose files the directory holds (by size).
fn choose_name<'c>(
    flag: Option<&str>,
    candidate: &Candidate,
    catalog: &'c Catalog,
    report: &Report,
) -> Result<(String, Option<&'c Model>), Failure> {
    if let Some(name) = flag {
        return Ok((name.to_owned(), catalog.get(name)));
    }
    let suggested = candidate.suggested.as_deref().unwrap_or_default();
    if let Some(model) = catalog.get(suggested) {
        return Ok((suggested.to_owned(), Some(model)));
    }
    if let Some(model) = catalog.models.iter().find(|m| same_sizes(m, candidate)) {
        report.note(&format!(
            "{} holds the files of the catalog's {name} (by their sizes): imported as {name}, every file's SHA-256 checked (--name NAME installs it under another name)",
            candidate.label,
            name = model.name
        ));
        return Ok((model.name.clone(), Some(model)));
    }
    match models::check_name(suggested) {
        Ok(()) => Ok((suggested.to_owned(), None)),
        Err(why) => fail(
            exit::USAGE,
            format!(
                "cannot tell what to call the model in {}: {:?} is not a model name ({why}); give one with --name NAME",
                candidate.label,
                sanitize(suggested)
            ),
        ),
    }
}

/// Whether `candidate` holds every file of `model` with its pinned size.
fn same_sizes(model: &Model, candidate: &Candidate) -> bool {
    model.files.iter().all(|f| {
        candidate
            .files
            .get(&f.name)
            .is_some_and(|found| found.size == f.size && !matches!(found.at, At::Refused(_)))
    })
}

/// The catalog model's files, each there with its pinned size; what else is there is left out.
fn plan_catalog<'a>(
    model: &Model,
    candidate: &'a Candidate,
) -> Result<(Vec<Planned<'a>>, Vec<String>), Failure> {
    let mut problems = Vec::new();
    let mut plan = Vec::new();
    for file in &model.files {
        match candidate.files.get(&file.name) {
            None => problems.push(format!("{} is missing", file.name)),
            Some(Found {
                at: At::Refused(why),
                ..
            }) => problems.push(why.clone()),
            Some(found) if found.size != file.size => problems.push(format!(
                "{} has {} bytes, the catalog pins {}",
                file.name, found.size, file.size
            )),
            Some(found) => plan.push(Planned {
                file: file.clone(),
                found,
                pinned: true,
            }),
        }
    }
    if !problems.is_empty() {
        return fail(
            exit::NOT_DONE,
            format!(
                "{} is not the catalog's {}: {}; nothing was copied. Another build of the model? `--name OTHER` installs it under another name, unverified",
                candidate.label,
                model.name,
                problems.join("; ")
            ),
        );
    }
    let mut left_out: Vec<String> = candidate
        .files
        .keys()
        .filter(|n| model.files.iter().all(|f| &f.name != *n))
        .cloned()
        .collect();
    left_out.extend(candidate.others.iter().cloned());
    Ok((plan, left_out))
}

/// A model the catalog does not know: the files the speech plugin loads must be there; every
/// plain file is copied (none may be refused).
fn plan_unknown<'a>(
    name: &str,
    candidate: &'a Candidate,
) -> Result<(Vec<Planned<'a>>, Vec<String>), Failure> {
    // Every plain file is copied, so none may be refused.
    for (file_name, found) in &candidate.files {
        if let At::Refused(why) = &found.at {
            if models::check_file_name(file_name).is_ok() {
                return fail(exit::NOT_DONE, format!("{why}; nothing was installed"));
            }
        }
    }
    let usable = |n: &str| {
        candidate
            .files
            .get(n)
            .is_some_and(|f| !matches!(f.at, At::Refused(_)))
    };
    let missing = models::missing_stt_files(usable);
    if !missing.is_empty() {
        let none = models::STT_FILES
            .iter()
            .all(|names| !names.iter().any(|n| usable(n)));
        return fail(
            exit::NOT_DONE,
            format!(
                "{} is {}: it lacks {} (the speech plugin loads model.bin, config.json, tokenizer.json and vocabulary.json or vocabulary.txt from a faster-whisper model directory, e.g. a copy of Systran/faster-whisper-tiny.en); nothing was installed as {name}",
                candidate.label,
                if none {
                    "not a model directory"
                } else {
                    "not a complete model directory"
                },
                missing.join(", ")
            ),
        );
    }
    let mut plan = Vec::new();
    let mut left_out = candidate.others.clone();
    for (file_name, found) in &candidate.files {
        if models::check_file_name(file_name).is_err() {
            left_out.push(sanitize(file_name));
            continue;
        }
        plan.push(Planned {
            file: ModelFile {
                name: file_name.clone(),
                size: found.size,
                sha256: String::new(),
            },
            found,
            pinned: false,
        });
    }
    Ok((plan, left_out))
}

/// Where symbolic links of the directory `real` may lead: itself, or, for a Hugging Face cache
/// snapshot (`.../models--ORG--NAME/snapshots/REV`, whose files are links to `../../blobs/`),
/// the model's cache directory.
fn link_root(real: &Path) -> PathBuf {
    let parent = real.parent();
    let is_snapshot = parent
        .and_then(Path::file_name)
        .is_some_and(|n| n == "snapshots");
    let repo = parent.and_then(Path::parent);
    match repo {
        Some(repo)
            if is_snapshot
                && repo
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("models--")) =>
        {
            repo.to_path_buf()
        }
        _ => real.to_path_buf(),
    }
}

/// The plain entries of the directory `dir`, symbolic links followed when they stay inside it
/// ([`link_root`]).
fn scan_dir(dir: &Path) -> Result<Candidate, Failure> {
    let real = dir
        .canonicalize()
        .or_else(|e| fail(exit::NOT_DONE, io_problem(&e, dir, "read")))?;
    let root = link_root(&real);
    let entries =
        std::fs::read_dir(&real).or_else(|e| fail(exit::NOT_DONE, io_problem(&e, dir, "read")))?;
    let mut files = BTreeMap::new();
    let mut others = Vec::new();
    for (count, entry) in entries.enumerate() {
        if count >= MAX_DIR_ENTRIES {
            return fail(
                exit::NOT_DONE,
                format!(
                    "{} has more than {MAX_DIR_ENTRIES} entries: not a model directory",
                    dir.display()
                ),
            );
        }
        let entry = entry.or_else(|e| fail(exit::NOT_DONE, io_problem(&e, dir, "read")))?;
        let Ok(name) = entry.file_name().into_string() else {
            others.push(sanitize(&entry.file_name().to_string_lossy()));
            continue;
        };
        if name.starts_with('.') {
            others.push(sanitize(&name));
            continue;
        }
        let path = dir.join(&name);
        let meta = std::fs::symlink_metadata(&path)
            .or_else(|e| fail(exit::NOT_DONE, io_problem(&e, &path, "read")))?;
        let (size, at) = if meta.is_file() {
            (meta.len(), At::Path(real.join(&name)))
        } else if meta.file_type().is_symlink() {
            match std::fs::canonicalize(&path) {
                Err(e) => (
                    0,
                    At::Refused(format!(
                        "{} is a symbolic link that leads nowhere ({e})",
                        path.display()
                    )),
                ),
                Ok(target) if !target.starts_with(&root) => (
                    0,
                    At::Refused(format!(
                        "{} is a symbolic link to {}, outside {}; refused (an import copies only what is in the directory): copy the real files into one directory (`cp -L`) and import that",
                        path.display(),
                        target.display(),
                        root.display()
                    )),
                ),
                Ok(target) => match std::fs::metadata(&target) {
                    Ok(m) if m.is_file() => (m.len(), At::Path(target)),
                    Ok(m) if m.is_dir() => {
                        others.push(format!("{}/", sanitize(&name)));
                        continue;
                    }
                    _ => (
                        0,
                        At::Refused(format!(
                            "{} leads to {}, which is not a regular file",
                            path.display(),
                            target.display()
                        )),
                    ),
                },
            }
        } else if meta.is_dir() {
            others.push(format!("{}/", sanitize(&name)));
            continue;
        } else {
            (
                0,
                At::Refused(format!(
                    "{} is not a regular file (a FIFO, socket or device)",
                    path.display()
                )),
            )
        };
        files.insert(name, Found { size, at });
    }
    others.sort();
    // A Hugging Face snapshot is called after its repository (models--ORG--NAME: NAME), not
    // its revision.
    let suggested = if root == real {
        real.file_name().map(|n| n.to_string_lossy().into_owned())
    } else {
        root.file_name().map(|n| {
            let n = n.to_string_lossy();
            n.rsplit("--").next().unwrap_or(&n).to_owned()
        })
    };
    Ok(Candidate {
        label: dir.display().to_string(),
        suggested,
        files,
        others,
        archive: None,
        url: file_url_of(&real),
    })
}

/// The model directory in the archive at `path`: the one directory holding the model's
/// weights (`named`'s largest file, else `model.bin` or the weights of a catalog model).
fn scan_archive(
    path: &Path,
    kind: Kind,
    named: Option<&Model>,
    catalog: &Catalog,
    free: Option<u64>,
    models: &Path,
) -> Result<Candidate, Failure> {
    let members = archive::list(path, kind, |member| match free {
        Some(free) if member.kind == MemberKind::File && member.size > free => fail(
            exit::NOT_DONE,
            format!(
                "{}: member \"{}\" declares {} bytes ({}), more than the {} free in {}: not enough space for it (or a damaged or hostile archive); nothing was written",
                path.display(),
                sanitize(&member.path),
                member.size,
                DecimalBytes(member.size),
                DecimalBytes(free),
                models.display()
            ),
        ),
        _ => Ok(()),
    })?;
    let weights = |model: &Model| -> String {
        model
            .files
            .iter()
            .find(|f| f.name == "model.bin")
            .or_else(|| model.files.iter().max_by_key(|f| f.size))
            .map(|f| f.name.clone())
            .unwrap_or_default()
    };
    let markers: Vec<String> = match named {
        Some(model) => vec![weights(model)],
        None => {
            let mut all: Vec<String> = std::iter::once("model.bin".to_owned())
                .chain(catalog.models.iter().map(weights))
                .collect();
            all.sort();
            all.dedup();
            all
        }
    };

    // The files of each directory, by name; a member met twice refuses the archive.
    let mut dirs: BTreeMap<Vec<String>, BTreeMap<String, &Member>> = BTreeMap::new();
    for member in &members {
        if member.kind != MemberKind::File {
            continue;
        }
        let Some((file_name, dir)) = member.parts.split_last() else {
            continue;
        };
        let files = dirs.entry(dir.to_vec()).or_default();
        if files.insert(file_name.clone(), member).is_some() {
            return fail(
                exit::NOT_DONE,
                format!(
                    "{}: member \"{}\" is in it twice; refused (which one is the model's?)",
                    path.display(),
                    sanitize(&member.path)
                ),
            );
        }
    }
    let holding: Vec<&Vec<String>> = dirs
        .iter()
        .filter(|(_, files)| markers.iter().any(|m| files.contains_key(m)))
        .map(|(dir, _)| dir)
        .collect();
    let shown = |dir: &[String]| {
        if dir.is_empty() {
            "its top level".to_owned()
        } else {
            format!("{}/", sanitize(&dir.join("/")))
        }
    };
    let dir = match holding.as_slice() {
        [] => {
            return fail(
                exit::NOT_DONE,
                format!(
                    "{} holds no model: no directory in it has {} (a faster-whisper model directory holds model.bin, config.json, tokenizer.json and vocabulary.*); nothing was installed",
                    path.display(),
                    markers.join(" or ")
                ),
            );
        }
        [one] => *one,
        several => {
            let list: Vec<String> = several.iter().map(|d| shown(d)).collect();
            return fail(
                exit::NOT_DONE,
                format!(
                    "{} holds {} model directories ({}); one archive, one model: unpack it (`tar xf` or `unzip`) and import the directory you mean (`utter models import DIR`); nothing was installed",
                    path.display(),
                    several.len(),
                    list.join(", ")
                ),
            );
        }
    };
    let mut files = BTreeMap::new();
    let mut others = Vec::new();
    for (file_name, member) in &dirs[dir] {
        if file_name.starts_with('.') {
            others.push(sanitize(file_name));
            continue;
        }
        files.insert(
            file_name.clone(),
            Found {
                size: member.size,
                at: At::Member((*member).clone()),
            },
        );
    }
    // Subdirectories of the model directory are left out.
    for sub in dirs.keys() {
        if sub.len() == dir.len() + 1 && sub.starts_with(dir) {
            others.push(format!("{}/", sanitize(&sub[dir.len()])));
        }
    }
    others.sort();
    others.dedup();
    let archive_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let suggested = match dir.last() {
        Some(last) => last.clone(),
        None => {
            let lower = archive_name.to_ascii_lowercase();
            let cut = [".tar.gz", ".tgz", ".tar", ".zip", ".whl"]
                .iter()
                .find(|ext| lower.ends_with(*ext))
                .map_or(0, |ext| ext.len());
            archive_name[..archive_name.len() - cut].to_owned()
        }
    };
    Ok(Candidate {
        label: if dir.is_empty() {
            path.display().to_string()
        } else {
            format!("{} ({})", path.display(), shown(dir))
        },
        suggested: Some(suggested),
        files,
        others,
        archive: Some((path.to_path_buf(), kind)),
        url: file_url_of(&path.canonicalize().unwrap_or_else(|_| path.to_path_buf())),
    })
}

/// Open a file of the directory to copy: still a regular file of the size it had.
fn open_source(path: &Path, size: u64) -> Result<File, Failure> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .or_else(|e| fail(exit::NOT_DONE, io_problem(&e, path, "read")))?;
    match file.metadata() {
        Ok(m) if m.is_file() && m.len() == size => Ok(file),
        Ok(_) => fail(
            exit::NOT_DONE,
            format!(
                "{} changed while it was imported (it is not the file it was a moment ago); nothing was installed",
                path.display()
            ),
        ),
        Err(e) => fail(exit::NOT_DONE, io_problem(&e, path, "read")),
    }
}

/// Copy one file into the temporary directory `staging` with the progress bar and events
/// of `pull`; its SHA-256.
fn copy_in(
    staging: &Path,
    planned: &Planned,
    data: &mut dyn std::io::Read,
    from: &str,
    url: &str,
    report: &Report,
) -> Result<String, Failure> {
    let file = &planned.file;
    let mut start = json!({
        "event": "start", "file": file.name, "url": url, "size": file.size, "offset": 0,
    });
    if let At::Member(member) = &planned.found.at {
        start["member"] = json!(member.path);
    }
    report.event(start);
    report.note(&format!(
        "copying {} ({}) from {from}",
        file.name,
        DecimalBytes(file.size)
    ));
    let target = staging.join(&file.name);
    let mut out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&target)
        .or_else(|e| fail(exit::NOT_DONE, io_problem(&e, &target, "write")))?;
    let bar = report.progress(&file.name, file.size, 0);
    let mut data = data;
    let result = copy_body(&mut data, &mut out, 0, file, &bar, report);
    bar.finish_and_clear();
    let declared = if matches!(planned.found.at, At::Member(_)) {
        "its header declares"
    } else {
        "it had when the import began"
    };
    match result {
        Ok(()) => {}
        Err(Stop::TooLong) => {
            return fail(
                exit::NOT_DONE,
                format!(
                    "{from} holds more than the {} bytes {declared}; refused (a damaged or hostile archive, or a file that changed); nothing was installed",
                    file.size
                ),
            );
        }
        Err(Stop::Short { got, why }) => {
            return fail(
                exit::NOT_DONE,
                format!(
                    "{from} ended after {got} of the {} bytes {declared} ({why}: a damaged or truncated archive, or a file that changed); nothing was installed",
                    file.size
                ),
            );
        }
        Err(Stop::Write(e)) => {
            let written = std::fs::metadata(&target).map(|m| m.len()).unwrap_or(0);
            return fail(
                exit::NOT_DONE,
                write_problem(&e, &target, staging, file, written, false),
            );
        }
    }
    out.sync_all()
        .or_else(|e| fail(exit::NOT_DONE, io_problem(&e, &target, "write")))?;
    sha256_file(&target).or_else(|e| fail(exit::NOT_DONE, io_problem(&e, &target, "read")))
}

/// Whether the installed `model` in `dir` has every file with its pinned SHA-256 (`present`
/// events for them).
fn verified_in_place(model: &Model, dir: &Path, report: &Report) -> Result<bool, Failure> {
    let mut sums = Vec::new();
    for file in &model.files {
        let path = dir.join(&file.name);
        let actual =
            sha256_file(&path).or_else(|e| fail(exit::NOT_DONE, io_problem(&e, &path, "read")))?;
        if actual != file.sha256 {
            return Ok(false);
        }
        sums.push((file.name.clone(), actual));
    }
    for (file, sha256) in sums {
        report.event(json!({"event": "present", "file": file, "sha256": sha256}));
    }
    Ok(true)
}

fn is_empty_dir(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none())
}

/// Lock the model directory `dir` as `pull` does, so that no pull writes into it meanwhile.
fn lock_dir(dir: &Path, name: &str) -> Result<Flock<File>, Failure> {
    let handle = File::open(dir).or_else(|e| fail(exit::NOT_DONE, io_problem(&e, dir, "open")))?;
    Flock::lock(handle, FlockArg::LockExclusiveNonblock).or_else(|(_, errno)| {
        fail(
            exit::NOT_DONE,
            format!(
                "another `utter models pull {name}` or import is writing into {} ({errno}); wait for it",
                dir.display()
            ),
        )
    })
}

/// Remove the temporary directories of imports whose process is gone (killed: a failed
/// import removes its own) and that no one holds locked.
fn remove_stale_staging(models: &Path) {
    let Ok(entries) = std::fs::read_dir(models) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(STAGING_PREFIX)) else {
            continue;
        };
        let pid = rest
            .split('-')
            .next()
            .and_then(|p| p.parse::<i32>().ok())
            .unwrap_or(0);
        let alive = pid > 0
            && matches!(
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
                Ok(()) | Err(nix::errno::Errno::EPERM)
            );
        if alive {
            continue;
        }
        let path = entry.path();
        let Ok(handle) = File::open(&path) else {
            continue;
        };
        if let Ok(lock) = Flock::lock(handle, FlockArg::LockExclusiveNonblock) {
            tracing::debug!(path = %path.display(), "removing what a killed import left");
            let _ = std::fs::remove_dir_all(&path);
            drop(lock);
        }
    }
}

/// The temporary directory an import copies into, locked while it lives and removed when it
/// is dropped (on success it holds nothing, or what the model replaced).
struct Staging {
    path: PathBuf,
    _lock: Flock<File>,
}

impl Staging {
    fn create(models: &Path, name: &str) -> Result<Staging, Failure> {
        let path = models.join(format!("{STAGING_PREFIX}{}-{name}", std::process::id()));
        // One of this process's own, left by nothing (a pid is one process at a time).
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir(&path)
            .or_else(|e| fail(exit::NOT_DONE, io_problem(&e, &path, "create")))?;
        let handle =
            File::open(&path).or_else(|e| fail(exit::NOT_DONE, io_problem(&e, &path, "open")))?;
        let lock = Flock::lock(handle, FlockArg::LockExclusiveNonblock).or_else(|(_, errno)| {
            fail(
                exit::NOT_DONE,
                format!("cannot lock {} ({errno})", path.display()),
            )
        })?;
        Ok(Staging { path, _lock: lock })
    }

    /// Rename it to `dest`, or exchange it with the directory there (whose old contents are
    /// then removed with this one); whether something was replaced.
    fn install(&self, models: &Path, dest: &Path, name: &str) -> Result<bool, Failure> {
        let replace = dest.is_dir() && !is_empty_dir(dest);
        let result = if replace {
            exchange(&self.path, dest)
        } else {
            std::fs::rename(&self.path, dest)
        };
        match result {
            Ok(()) => {
                sync_dir(models);
                Ok(replace)
            }
            Err(e) if !replace && dest.is_dir() => fail(
                exit::NOT_DONE,
                format!(
                    "{} appeared while {name} was being imported ({e}); nothing was installed: remove it or import under another name with --name",
                    dest.display()
                ),
            ),
            Err(e) => fail(exit::NOT_DONE, io_problem(&e, dest, "install")),
        }
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Swap the directories `a` and `b` in one step where the kernel can (renameat2
/// RENAME_EXCHANGE), else in two renames through a third name.
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
        match renameat2(AT_FDCWD, a, AT_FDCWD, b, RenameFlags::RENAME_EXCHANGE) {
            Ok(()) => return Ok(()),
            Err(nix::errno::Errno::EINVAL | nix::errno::Errno::ENOSYS) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let mut aside = a.as_os_str().to_owned();
    aside.push(".old");
    let aside = PathBuf::from(aside);
    std::fs::rename(b, &aside)?;
    if let Err(e) = std::fs::rename(a, b) {
        let _ = std::fs::rename(&aside, b);
        return Err(e);
    }
    std::fs::rename(&aside, a)
}
