//! The catalog of speech models a person can install with `utter models pull`, compiled in
//! from `data/models.toml`, and what is installed of them.
//!
//! A model is a directory of files, `<models_dir>/<name>/` (`$XDG_DATA_HOME/utter/models`,
//! [`BaseDirs::models_dir`]); each file is pinned by its size and SHA-256, and its URL is the
//! source (the model's own, or a mirror's: `http(s)://`, or `file://` for a local directory,
//! [`local_source_dir`]) followed by the file's name. `utter models import` checks a model it
//! installs from a local directory or archive against the same pins, and one the catalog does
//! not know against [`STT_FILES`]. `[stt] model =
//! "tiny.en"` names an installed model by its name ([`crate::config::SttSection`]).
//!
//! For a mirror with other models, and for tests, `$UTTER_MODELS_CATALOG` names a catalog file
//! of the same format that replaces the compiled-in one ([`Catalog::from_env`]). Names of
//! models and files are checked when a catalog is read: a file name is one plain path
//! component (no `/`, no `..`, no leading `.`), so no catalog can make a download write
//! outside its model's directory.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

use crate::paths::BaseDirs;

/// The compiled-in catalog, `data/models.toml`.
pub const EMBEDDED_CATALOG: &str = include_str!("../../data/models.toml");

/// The name shown for the compiled-in catalog in messages.
pub const EMBEDDED_CATALOG_ORIGIN: &str = "<embedded data/models.toml>";

/// The variable that names a catalog file to use instead of the compiled-in one (for
/// mirrors that carry other models, and for tests).
pub const CATALOG_ENV: &str = "UTTER_MODELS_CATALOG";

/// The variable that names a mirror: a base address holding the catalog's file names, used
/// instead of each model's own source (below `--source`, above `[models] source`).
pub const SOURCE_ENV: &str = "UTTER_MODELS_SOURCE";

/// What a file being downloaded is called until it is verified: `<file>.partial`.
pub const PARTIAL_SUFFIX: &str = ".partial";

/// The longest name of a model or a file.
const MAX_NAME: usize = 128;

/// The models that can be installed (`[[model]]` tables).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    /// The models, in the file's order.
    #[serde(default, rename = "model")]
    pub models: Vec<Model>,
}

/// One installable model (`[[model]]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    /// Its name: the directory under the models directory and what `[stt] model` says.
    pub name: String,
    /// One line for people.
    #[serde(default)]
    pub description: String,
    /// The base address of its files (`http://`, `https://`, or `file://` for a local
    /// directory); a file's URL is this followed by the file's name.
    pub source: String,
    /// Its files (`[[model.file]]`).
    #[serde(rename = "file")]
    pub files: Vec<ModelFile>,
}

/// One file of a model (`[[model.file]]`), pinned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelFile {
    /// Its name in the model's directory and at the source (one plain path component).
    pub name: String,
    /// Its exact size in bytes.
    pub size: u64,
    /// Its SHA-256, 64 lowercase hexadecimal digits.
    pub sha256: String,
}

/// How much of a model is in its directory (sizes only; `utter models pull` also checks each
/// file's SHA-256).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstallState {
    /// Every file is there with its pinned size.
    Installed,
    /// The directory holds some of it: the files that are missing or have another size.
    Incomplete {
        /// The files that are not (yet) there as pinned.
        missing: Vec<String>,
    },
    /// Nothing of it is there.
    NotInstalled,
}

impl InstallState {
    /// The word `utter models list --json` uses: `installed`, `incomplete`, `not-installed`.
    pub fn as_str(&self) -> &'static str {
        match self {
            InstallState::Installed => "installed",
            InstallState::Incomplete { .. } => "incomplete",
            InstallState::NotInstalled => "not-installed",
        }
    }
}

impl Catalog {
    /// The compiled-in catalog (checked by the tests, so it always parses).
    pub fn embedded() -> Catalog {
        // Parsed once: `runner.status` asks for it on every call (a missing model).
        static EMBEDDED: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
        EMBEDDED
            .get_or_init(|| {
                Catalog::parse(EMBEDDED_CATALOG, EMBEDDED_CATALOG_ORIGIN)
                    .expect("data/models.toml is a valid catalog")
            })
            .clone()
    }

    /// The catalog `$UTTER_MODELS_CATALOG` names when it is set (and not empty), else the
    /// compiled-in one.
    ///
    /// # Errors
    /// A sentence naming the file and what is wrong with it.
    pub fn from_env() -> Result<Catalog, String> {
        match std::env::var_os(CATALOG_ENV).filter(|v| !v.is_empty()) {
            None => Ok(Catalog::embedded()),
            Some(path) => Catalog::read(Path::new(&path)),
        }
    }

    /// Read the catalog file at `path`.
    ///
    /// # Errors
    /// A sentence naming the file and what is wrong with it.
    pub fn read(path: &Path) -> Result<Catalog, String> {
        let origin = path.display().to_string();
        let text = crate::paths::read_regular_file(path, 4 * 1024 * 1024)
            .map_err(|e| format!("cannot read the model catalog {origin} (${CATALOG_ENV}): {e}"))?;
        Catalog::parse(&text, &origin)
    }

    /// Parse and check catalog text; `origin` names it in messages.
    ///
    /// # Errors
    /// A sentence naming `origin`, the model or file, and what is wrong.
    pub fn parse(text: &str, origin: &str) -> Result<Catalog, String> {
        let catalog: Catalog =
            toml::from_str(text).map_err(|e| format!("model catalog {origin}: {e}"))?;
        let mut names = std::collections::BTreeSet::new();
        for model in &catalog.models {
            let at = format!("model catalog {origin}: model {:?}", model.name);
            check_name(&model.name).map_err(|e| format!("{at}: {e}"))?;
            if !names.insert(model.name.as_str()) {
                return Err(format!("{at}: the name is used twice"));
            }
            if let Some(why) = source_problem(&model.source) {
                return Err(format!("{at}: source: {why}"));
            }
            if model.files.is_empty() {
                return Err(format!("{at}: it has no [[model.file]]"));
            }
            let mut files = std::collections::BTreeSet::new();
            for file in &model.files {
                let at = format!("{at}: file {:?}", file.name);
                check_file_name(&file.name).map_err(|e| format!("{at}: {e}"))?;
                if !files.insert(file.name.as_str()) {
                    return Err(format!("{at}: the name is used twice"));
                }
                if file.size == 0 {
                    return Err(format!("{at}: size must be more than 0"));
                }
                if file.sha256.len() != 64
                    || !file
                        .sha256
                        .bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                {
                    return Err(format!(
                        "{at}: sha256 must be 64 lowercase hexadecimal digits, got {:?}",
                        file.sha256
                    ));
                }
            }
        }
        Ok(catalog)
    }

    /// The model called `name`.
    pub fn get(&self, name: &str) -> Option<&Model> {
        self.models.iter().find(|m| m.name == name)
    }

    /// The models' names, in the catalog's order.
    pub fn names(&self) -> Vec<&str> {
        self.models.iter().map(|m| m.name.as_str()).collect()
    }
}

impl Model {
    /// The size of all its files, in bytes.
    pub fn size(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }

    /// How much of it `dir` (its directory) holds, by each file's presence and size.
    pub fn state(&self, dir: &Path) -> InstallState {
        let mut missing = Vec::new();
        let mut found_any = false;
        for file in &self.files {
            let path = dir.join(&file.name);
            match std::fs::metadata(&path) {
                Ok(meta) if meta.is_file() && meta.len() == file.size => found_any = true,
                Ok(_) => {
                    found_any = true;
                    missing.push(file.name.clone());
                }
                Err(_) => {
                    found_any |= partial_path(&path).exists();
                    missing.push(file.name.clone());
                }
            }
        }
        match (missing.is_empty(), found_any) {
            (true, _) => InstallState::Installed,
            (false, true) => InstallState::Incomplete { missing },
            (false, false) => InstallState::NotInstalled,
        }
    }
}

/// `<path>.partial`: where a file is downloaded to until it is verified.
pub fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(PARTIAL_SUFFIX);
    path.with_file_name(name)
}

/// The models directory of this user, `$XDG_DATA_HOME/utter/models`
/// ([`BaseDirs::models_dir`]).
pub fn models_dir() -> Option<PathBuf> {
    BaseDirs::from_env().models_dir()
}

/// Whether `value` is a model's name rather than a path: letters, digits, `.`, `_`, `+`
/// and `-`, not starting with `.` or `-` (so `tiny.en`, not `./tiny.en`, `~/m` or `/m`).
pub fn is_model_name(value: &str) -> bool {
    check_name(value).is_ok()
}

/// Check a model's name ([`is_model_name`]).
///
/// # Errors
/// What is wrong and what is allowed.
pub fn check_name(name: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+');
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(format!("a name has 1 to {MAX_NAME} characters"));
    }
    if name.starts_with('.') || name.starts_with('-') || !name.chars().all(allowed) {
        return Err(
            "a name is letters, digits, '.', '_', '+' and '-', not starting with '.' or '-' (one directory name, never a path)"
                .into(),
        );
    }
    Ok(())
}

/// Check a file's name in a catalog: one plain path component that cannot leave the model's
/// directory, and not a `.partial` name.
///
/// # Errors
/// What is wrong and what is allowed.
pub fn check_file_name(name: &str) -> Result<(), String> {
    if name.contains('/') || name.contains('\\') || name == ".." || name.contains("../") {
        return Err(
            "a file name is one plain name, never a path ('/' and '..' are refused)".into(),
        );
    }
    check_name(name)?;
    if name.ends_with(PARTIAL_SUFFIX) {
        return Err(format!(
            "a file name may not end in {PARTIAL_SUFFIX} (the name of a download in progress)"
        ));
    }
    Ok(())
}

/// Why `source` is not a usable base address (`http://` or `https://` followed by a host, or
/// `file://` followed by an absolute path, [`local_source_dir`]); `None` when it is one, or
/// empty (not set).
pub fn source_problem(source: &str) -> Option<String> {
    if source.is_empty() {
        return None;
    }
    if source.starts_with("file:") {
        return local_source(source).err();
    }
    let rest = source
        .strip_prefix("https://")
        .or_else(|| source.strip_prefix("http://"));
    let Some(rest) = rest else {
        return Some(format!(
            "{source:?} is not an http://, https:// or file:// address (e.g. \"https://example.org/models/tiny.en/\" or \"file:///media/usb/tiny.en/\")"
        ));
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if host.is_empty() || rest.contains(char::is_whitespace) || source.contains(['?', '#']) {
        return Some(format!(
            "{source:?} is not a base address: a host after the scheme, then an optional path, no spaces, query or fragment"
        ));
    }
    None
}

/// The local directory a `file://` source names (`file:///media/usb/tiny.en/`, or
/// `file://localhost/...`; `%XX` escapes decoded), for `utter models pull --source
/// file:///...`; `None` for any other source, or a `file:` source that is not usable
/// ([`source_problem`] says why).
pub fn local_source_dir(source: &str) -> Option<PathBuf> {
    local_source(source).ok()
}

fn local_source(source: &str) -> Result<PathBuf, String> {
    let example = "e.g. \"file:///media/usb/tiny.en/\": three slashes, then the absolute path";
    let Some(rest) = source.strip_prefix("file://") else {
        return Err(format!("{source:?} is not a file:// address ({example})"));
    };
    let path = if rest.starts_with('/') {
        rest
    } else if let Some(path) = rest
        .strip_prefix("localhost")
        .filter(|p| p.starts_with('/'))
    {
        path
    } else {
        return Err(format!(
            "{source:?} names no local absolute path: a file:// source is a directory on this machine ({example})"
        ));
    };
    if path.contains(['?', '#']) {
        return Err(format!(
            "{source:?} has a query or fragment ('?', '#'); write those characters of a directory name as %3F and %23"
        ));
    }
    let decoded = percent_decode(path).ok_or_else(|| {
        format!("{source:?} has a '%' that is not followed by two hexadecimal digits")
    })?;
    use std::os::unix::ffi::OsStringExt;
    Ok(PathBuf::from(std::ffi::OsString::from_vec(decoded)))
}

/// `%XX` escapes decoded; `None` for a `%` without two hexadecimal digits after it.
fn percent_decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

/// The `file://` URL of a local `path` (bytes other than letters, digits and `/-._~` written as
/// `%XX`), as events and results name a local file.
pub fn file_url_of(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut url = String::from("file://");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~+".contains(&b) {
            url.push(b as char);
        } else {
            url.push_str(&format!("%{b:02X}"));
        }
    }
    url
}

/// The files the speech plugin (`plugins/stt_whisper`, `model.rs` `REQUIRED`) loads from a
/// model directory: each entry is satisfied by any one of its names. A model the catalog does
/// not know is installed by `utter models import` only when its directory has them.
pub const STT_FILES: &[&[&str]] = &[
    &["model.bin"],
    &["config.json"],
    &["vocabulary.json", "vocabulary.txt"],
    &["tokenizer.json"],
];

/// The entries of [`STT_FILES`] that `has` (whether a file of that name is there) finds none
/// of, e.g. `["tokenizer.json", "vocabulary.json or vocabulary.txt"]`.
pub fn missing_stt_files(has: impl Fn(&str) -> bool) -> Vec<String> {
    STT_FILES
        .iter()
        .filter(|names| !names.iter().any(|n| has(n)))
        .map(|names| names.join(" or "))
        .collect()
}

/// The URL of `file` at `source`: the source with a trailing `/`, then the file's name.
pub fn file_url(source: &str, file: &str) -> String {
    if source.ends_with('/') {
        format!("{source}{file}")
    } else {
        format!("{source}/{file}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_catalog_pins_tiny_en_and_base() {
        let catalog = Catalog::embedded();
        let tiny = catalog.get("tiny.en").expect("tiny.en is in the catalog");
        let names: Vec<&str> = tiny.files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "config.json",
                "model.bin",
                "tokenizer.json",
                "vocabulary.txt"
            ]
        );
        assert_eq!(tiny.size(), 2317 + 75_537_502 + 2_128_466 + 422_309);
        assert!(tiny.source.starts_with("https://huggingface.co/Systran/"));
        // base, offered beside it (docs/src/speech-models.md, "Choosing the speech model").
        let base = catalog.get("base").expect("base is in the catalog");
        assert_eq!(base.size(), 2309 + 145_217_532 + 2_203_239 + 459_861);
        assert!(base.source.contains("/Systran/faster-whisper-base/"));
    }

    #[test]
    fn names_are_one_component_and_bad_catalogs_are_refused() {
        for ok in ["tiny.en", "base", "large-v3", "a_b+c"] {
            assert!(is_model_name(ok), "{ok}");
        }
        for bad in [
            "", ".", "..", "../x", "/abs", "~/m", "./m", "a b", "-x", ".hidden", "a/b",
        ] {
            assert!(!is_model_name(bad), "{bad}");
        }
        let file = |name: &str, sha: &str| {
            format!(
                "[[model]]\nname = \"m\"\nsource = \"http://h/\"\n[[model.file]]\nname = \"{name}\"\nsize = 1\nsha256 = \"{sha}\"\n"
            )
        };
        let sha = "0".repeat(64);
        assert!(Catalog::parse(&file("a.bin", &sha), "t").is_ok());
        for (name, sha, why) in [
            ("../evil", sha.as_str(), "never a path"),
            ("..", sha.as_str(), "never a path"),
            ("a/b", sha.as_str(), "never a path"),
            ("x.partial", sha.as_str(), ".partial"),
            ("a.bin", "ABC", "64 lowercase"),
        ] {
            let e = Catalog::parse(&file(name, sha), "t").unwrap_err();
            assert!(e.contains(why), "{name}: {e}");
        }
        let e = Catalog::parse(
            "[[model]]\nname = \"m\"\nsource = \"ftp://h/\"\nfile = []\n",
            "t",
        )
        .unwrap_err();
        assert!(e.contains("http://"), "{e}");
        let e = Catalog::parse(
            "[[model]]\nname = \"m\"\nsource = \"http://h/\"\nfile = []\nurl = 1\n",
            "t",
        )
        .unwrap_err();
        assert!(e.contains("url"), "{e}");
    }

    #[test]
    fn sources_are_http_https_or_file_base_addresses() {
        for ok in [
            "",
            "http://127.0.0.1:8000/",
            "https://example.org/m",
            "http://h",
            "file:///media/usb/tiny.en/",
            "file://localhost/m",
            "file:///my%20models",
        ] {
            assert_eq!(source_problem(ok), None, "{ok}");
        }
        for bad in [
            "file://models/",
            "file:/m",
            "file://",
            "file:///a?b",
            "file:///a%2",
            "file:///a%zz",
        ] {
            assert!(source_problem(bad).is_some(), "{bad}");
        }
        assert_eq!(
            local_source_dir("file:///my%20models/tiny.en/"),
            Some(PathBuf::from("/my models/tiny.en/"))
        );
        assert_eq!(
            local_source_dir("file://localhost/m"),
            Some(PathBuf::from("/m"))
        );
        assert_eq!(local_source_dir("http://h/m"), None);
        assert_eq!(
            file_url_of(Path::new("/a b/%/tiny.en")),
            "file:///a%20b/%25/tiny.en"
        );
        assert_eq!(
            local_source_dir(&file_url_of(Path::new("/a b/%/é"))),
            Some(PathBuf::from("/a b/%/é"))
        );
        for bad in [
            "example.org",
            "ftp://h/",
            "http://",
            "https:///x",
            "http://h/?a=1",
        ] {
            assert!(source_problem(bad).is_some(), "{bad}");
        }
        assert_eq!(file_url("http://h/m", "a"), "http://h/m/a");
        assert_eq!(file_url("file:///m/", "a"), "file:///m/a");
        assert_eq!(file_url("http://h/m/", "a"), "http://h/m/a");
    }

    #[test]
    fn the_stt_files_are_the_plugins() {
        // The list the speech plugin checks a directory against (it cannot be shared: the
        // plugin depends on no crate of the runner).
        let plugin = include_str!("../../plugins/stt_whisper/src/model.rs");
        let required = &plugin[plugin.find("const REQUIRED").unwrap()..];
        let required = &required[..required.find("];").unwrap()];
        let in_plugin: Vec<&str> = required
            .lines()
            .filter_map(|l| l.trim().strip_prefix("names: &["))
            .collect();
        let ours: Vec<String> = STT_FILES
            .iter()
            .map(|names| {
                let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
                format!("{}],", quoted.join(", "))
            })
            .collect();
        assert_eq!(in_plugin, ours);
        assert_eq!(
            missing_stt_files(|n| n == "model.bin" || n == "vocabulary.txt"),
            ["config.json", "tokenizer.json"]
        );
        assert_eq!(
            missing_stt_files(|_| false)[2],
            "vocabulary.json or vocabulary.txt"
        );
    }

    #[test]
    fn state_follows_the_files_and_their_sizes() {
        let dir = tempfile::tempdir().unwrap();
        let model = Model {
            name: "m".into(),
            description: String::new(),
            source: "http://h/".into(),
            files: vec![
                ModelFile {
                    name: "a".into(),
                    size: 3,
                    sha256: "0".repeat(64),
                },
                ModelFile {
                    name: "b".into(),
                    size: 2,
                    sha256: "0".repeat(64),
                },
            ],
        };
        let m = dir.path().join("m");
        assert_eq!(model.state(&m), InstallState::NotInstalled);
        std::fs::create_dir(&m).unwrap();
        assert_eq!(model.state(&m), InstallState::NotInstalled);
        std::fs::write(m.join("a.partial"), "x").unwrap();
        assert_eq!(
            model.state(&m),
            InstallState::Incomplete {
                missing: vec!["a".into(), "b".into()]
            }
        );
        std::fs::write(m.join("a"), "abc").unwrap();
        std::fs::write(m.join("b"), "toolong").unwrap();
        assert_eq!(model.state(&m).as_str(), "incomplete");
        std::fs::write(m.join("b"), "ok").unwrap();
        assert_eq!(model.state(&m), InstallState::Installed);
    }
}
