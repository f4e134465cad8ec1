//! Reading a config: the user's file (or the embedded default), layered over the default,
//! deserialized with unknown keys noted, then validated section by section
//! ([`crate::validate`]).

use std::path::{Path, PathBuf};

use crate::diagnostics::{
    ConfigError, ConfigIssue, Seg, issue_at, parse_ignored_path, shapes_of_sections, toml_error,
    top_level_keys,
};
use crate::older::read_older_booleans;

/// The keys the embedded default config writes in the table at `parents` (`[stt]`,
/// `[audio.vad]`); `None` where it has no such table (an array's element, a plugin).
fn default_keys_of(parents: &[Seg]) -> Option<Vec<String>> {
    static DEFAULT: std::sync::LazyLock<Option<toml::Table>> =
        std::sync::LazyLock::new(|| DEFAULT_CONFIG.parse::<toml::Table>().ok());
    let mut table = DEFAULT.as_ref()?;
    for seg in parents {
        let Seg::Key(key) = seg else { return None };
        table = table.get(key)?.as_table()?;
    }
    Some(table.keys().cloned().collect())
}
use crate::schema::*;
use crate::validate::Checks;

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
            // A misspelt key of a section ([stt] partal_ms): the nearest key the default
            // config gives that section.
            [parents @ .., Seg::Key(name)] => default_keys_of(parents).and_then(|keys| {
                crate::ops::nearest_of(name, keys.iter().map(String::as_str))
                    .map(|near| format!("; did you mean {near:?}?"))
            }),
            _ => None,
        }
        .unwrap_or_default();
        warnings.push(issue_at(
            text,
            origin,
            &path,
            format!(
                "unknown key; ignored{near} (check its spelling against the default config: `utter config default` prints it)"
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

    let mut checks = Checks {
        text,
        origin,
        errors: Vec::new(),
        warnings,
    };
    crate::validate::validate(&config, &mut checks);
    let Checks {
        mut errors,
        mut warnings,
        ..
    } = checks;
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
