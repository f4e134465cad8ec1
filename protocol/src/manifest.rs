//! Plugin manifests, `utter-plugin.toml` (PROTOCOL.md §11).
//!
//! A manifest is checked against `protocol/plugin.schema.json` (JSON Schema draft 2020-12, via
//! the `jsonschema` crate) before it is read, so every error names the offending field.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;
use std::sync::OnceLock;

/// The manifest schema shipped with this crate.
pub const MANIFEST_SCHEMA_JSON: &str = include_str!("../plugin.schema.json");

/// The plugin kinds the manifest schema allows (`properties.kind.enum` of
/// `plugin.schema.json`), in its order: the one list of kinds.
pub fn kinds() -> &'static [String] {
    static KINDS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    KINDS.get_or_init(|| {
        serde_json::from_str::<serde_json::Value>(MANIFEST_SCHEMA_JSON)
            .ok()
            .and_then(|schema| schema.pointer("/properties/kind/enum").cloned())
            .and_then(|kinds| serde_json::from_value(kinds).ok())
            .unwrap_or_default()
    })
}

/// The permission names the manifest schema allows (`properties.permissions.items.enum`
/// of `plugin.schema.json`): the one list of permissions.
pub fn permission_names() -> &'static [String] {
    static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        serde_json::from_str::<serde_json::Value>(MANIFEST_SCHEMA_JSON)
            .ok()
            .and_then(|schema| {
                schema
                    .pointer("/properties/permissions/items/enum")
                    .cloned()
            })
            .and_then(|names| serde_json::from_value(names).ok())
            .unwrap_or_default()
    })
}

/// An error in a manifest: where it is and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// The file is not TOML.
    #[error("{origin}: not valid TOML: {message}")]
    Toml {
        /// File name or other origin.
        origin: String,
        /// The TOML parser's message (with line and column).
        message: String,
    },
    /// The manifest breaks the schema; one entry per problem.
    #[error("{origin}: {}", .problems.join("; "))]
    Schema {
        /// File name or other origin.
        origin: String,
        /// `field: what is wrong` lines.
        problems: Vec<String>,
    },
    /// The file could not be read.
    #[error("{origin}: {message}")]
    Io {
        /// File name.
        origin: String,
        /// The OS error.
        message: String,
    },
}

/// `entrypoint` (of a manifest, and of a config's `[[plugin]]`): an argv list, or a single
/// string (a path with no arguments).
///
/// Read by hand rather than as an untagged enum, so that a wrong type is reported the way
/// any other key's is ("invalid type: integer `5`, expected a string (one program) or an
/// array of strings …") instead of serde's "data did not match any variant".
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Entrypoint {
    /// `["prog", "arg", ...]`
    Argv(Vec<String>),
    /// `"prog"`: one program, no arguments (never split on spaces).
    Program(String),
}

impl<'de> Deserialize<'de> for Entrypoint {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Entrypoint;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "a string (one program) or an array of strings (the program and its arguments)",
                )
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Entrypoint, E> {
                Ok(Entrypoint::Program(v.to_owned()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Entrypoint, A::Error> {
                let mut argv = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
                while let Some(arg) = seq.next_element::<String>()? {
                    argv.push(arg);
                }
                Ok(Entrypoint::Argv(argv))
            }
        }
        deserializer.deserialize_any(Visit)
    }
}

impl Entrypoint {
    /// The argv list.
    pub fn argv(&self) -> Vec<String> {
        match self {
            Entrypoint::Argv(v) => v.clone(),
            Entrypoint::Program(p) => vec![p.clone()],
        }
    }
}

/// A parsed, schema-valid `utter-plugin.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// The plugin id, `^[a-z0-9][a-z0-9._-]{1,63}$`.
    pub name: String,
    /// The plugin's semver.
    pub version: String,
    /// `stt`, `router`, `knowledge`, `llm`, `perceive`, `action`, `input`, `tts`, `context`,
    /// `ui` or `bundle`.
    pub kind: String,
    /// Wire protocol `major.minor`.
    pub protocol: String,
    /// Call-semantics version.
    pub abi: u64,
    /// `subprocess` (the only one run today), `wasm` or `native`.
    pub runtime: String,
    /// `stdio`, `connect` or `listen`.
    pub transport: String,
    /// What to run.
    pub entrypoint: Entrypoint,
    /// One-line description.
    #[serde(default)]
    pub description: Option<String>,
    /// Capabilities offered.
    #[serde(default)]
    pub provides: Vec<String>,
    /// Capabilities needed.
    #[serde(default)]
    pub requires: Vec<String>,
    /// Permissions asked for.
    #[serde(default)]
    pub permissions: Vec<String>,
    /// Supported platforms, e.g. `linux-x86_64`.
    #[serde(default)]
    pub platforms: Vec<String>,
    /// Oldest runner version this plugin works with.
    #[serde(default)]
    pub min_runner: Option<String>,
    /// Every other field, kept as JSON.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Value>,
}

/// The manifest schema, parsed (`plugin.schema.json`, compiled in).
fn schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        serde_json::from_str(MANIFEST_SCHEMA_JSON).expect("plugin.schema.json is JSON")
    })
}

fn validator() -> &'static jsonschema::Validator {
    static VALIDATOR: OnceLock<jsonschema::Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| {
        jsonschema::validator_for(schema()).expect("plugin.schema.json is a valid schema")
    })
}

/// One schema error in words: an enum's allowed values in full (the validator's text says
/// "or 10 other candidates"), and for a pattern the field's `description` from the schema
/// instead of the regular expression.
fn schema_error_words(e: &jsonschema::ValidationError<'_>) -> String {
    use jsonschema::error::ValidationErrorKind as Kind;
    let shown = crate::text::clip(&e.instance().to_string(), 80);
    match e.kind() {
        Kind::Enum { options } => {
            let allowed: Vec<String> = options
                .as_array()
                .map(|a| a.iter().map(Value::to_string).collect())
                .unwrap_or_default();
            format!("{shown} is not one of {}", allowed.join(", "))
        }
        Kind::Pattern { .. } => {
            // `/properties/name/pattern` → `/properties/name/description`; an array's
            // `…/items/pattern` → the array's description.
            let at = e.schema_path().to_string();
            let mut parent = at.rsplit_once('/').map(|(p, _)| p);
            let mut description = None;
            for _ in 0..2 {
                let Some(p) = parent else { break };
                description = schema()
                    .pointer(&format!("{p}/description"))
                    .and_then(Value::as_str);
                if description.is_some() {
                    break;
                }
                parent = p.rsplit_once('/').map(|(p, _)| p);
            }
            match description {
                Some(d) => format!("{shown} is not valid here: {d}"),
                None => e.to_string(),
            }
        }
        _ => e.to_string(),
    }
}

/// What the runner makes of a manifest that passed the schema (PROTOCOL.md §4, §5, §11):
/// the rules a plugin's start would be refused by, found before it is installed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunnerCheck {
    /// Each is `field: what is wrong`; any of them refuses the plugin.
    pub errors: Vec<String>,
    /// Accepted, but worth knowing (an older or newer protocol minor, unknown or deprecated
    /// capabilities).
    pub warnings: Vec<String>,
}

impl Manifest {
    /// Check what the schema cannot: `abi` is exactly 1, `protocol` is one this runner
    /// speaks (the §4 rules, as the handshake applies them), `runtime` is `subprocess` (the
    /// only one run), `min_runner` is a semver requirement that `runner_version` meets,
    /// `max_protocol` is `major.minor`; capabilities not in the registry are warnings.
    pub fn runner_check(&self, runner_version: &str) -> RunnerCheck {
        let mut check = RunnerCheck::default();
        match crate::handshake::negotiate(
            crate::handshake::PROTOCOL_VERSION,
            &self.protocol,
            Some(self.abi),
        ) {
            Ok(negotiated) => check
                .warnings
                .extend(negotiated.warning.map(|w| format!("protocol: {w}"))),
            Err(e) if self.abi != crate::handshake::ABI => {
                check.errors.push(format!("abi: {}", e.message))
            }
            Err(e) => check.errors.push(format!("protocol: {}", e.message)),
        }
        if self.runtime != "subprocess" {
            check.errors.push(format!(
                "runtime: {:?} is not run by this runner; only \"subprocess\" is (PROTOCOL.md §11)",
                self.runtime
            ));
        }
        if let Some(wanted) = &self.min_runner {
            match semver::VersionReq::parse(wanted) {
                Err(e) => check.errors.push(format!(
                    "min_runner: {wanted:?} is not a semver requirement such as \">=0.1\" ({e})"
                )),
                Ok(req) => match semver::Version::parse(runner_version) {
                    Ok(runner) if !req.matches(&runner) => check.errors.push(format!(
                        "min_runner: the plugin needs a runner {wanted}; this runner is {runner}"
                    )),
                    _ => {}
                },
            }
        }
        if let Some(max) = self.extra.get("max_protocol").and_then(Value::as_str) {
            if max.parse::<crate::handshake::ProtocolVersion>().is_err() {
                check.errors.push(format!(
                    "max_protocol: {max:?} is not a protocol version major.minor such as \"1.0\""
                ));
            }
        }
        let registry = crate::capability::CapabilityRegistry::builtin();
        for (field, names) in [("provides", &self.provides), ("requires", &self.requires)] {
            check.warnings.extend(
                registry
                    .warnings(names)
                    .into_iter()
                    .map(|w| format!("{field}: {w}")),
            );
        }
        check
    }

    /// Parse and validate manifest text. `origin` names the file in error messages.
    ///
    /// # Errors
    /// [`ManifestError::Toml`] for TOML syntax, [`ManifestError::Schema`] listing every field
    /// that breaks the schema (missing required fields, bad names, unknown fields, ...).
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Manifest, ManifestError> {
        let table: toml::Table = toml::from_str(text).map_err(|e| ManifestError::Toml {
            origin: origin.to_owned(),
            message: e.to_string(),
        })?;
        let value = serde_json::to_value(&table).map_err(|e| ManifestError::Toml {
            origin: origin.to_owned(),
            message: e.to_string(),
        })?;
        Manifest::from_json(value, origin)
    }

    /// Validate a manifest already in JSON form.
    ///
    /// # Errors
    /// As [`Manifest::from_toml_str`].
    pub fn from_json(value: Value, origin: &str) -> Result<Manifest, ManifestError> {
        let problems: Vec<String> = validator()
            .iter_errors(&value)
            .map(|e| {
                let path = e.instance_path().to_string();
                let field = path.trim_start_matches('/').replace('/', ".");
                let said = schema_error_words(&e);
                if field.is_empty() {
                    format!("manifest: {said}")
                } else {
                    format!("field `{field}`: {said}")
                }
            })
            .collect();
        if !problems.is_empty() {
            return Err(ManifestError::Schema {
                origin: origin.to_owned(),
                problems,
            });
        }
        serde_json::from_value(value).map_err(|e| ManifestError::Schema {
            origin: origin.to_owned(),
            problems: vec![e.to_string()],
        })
    }

    /// Read and validate a manifest file.
    ///
    /// # Errors
    /// [`ManifestError::Io`] when the file cannot be read, else as [`Manifest::from_toml_str`].
    pub fn from_path(path: &Path) -> Result<Manifest, ManifestError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ManifestError::Io {
            origin: origin.clone(),
            message: e.to_string(),
        })?;
        Manifest::from_toml_str(&text, &origin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "fake_rs"
version = "0.1.0"
kind = "action"
protocol = "1.0"
abi = 1
runtime = "subprocess"
transport = "stdio"
entrypoint = ["fake_rs"]
provides = ["action.open_url@1", "experimental/fake_rs@1"]
"#;

    #[test]
    fn a_good_manifest_parses() {
        let m = Manifest::from_toml_str(GOOD, "good.toml").unwrap();
        assert_eq!(m.name, "fake_rs");
        assert_eq!(m.entrypoint.argv(), vec!["fake_rs"]);
    }

    #[test]
    fn a_missing_required_field_is_named() {
        let text = GOOD.replace("kind = \"action\"\n", "");
        let err = Manifest::from_toml_str(&text, "m.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("m.toml") && err.contains("\"kind\""), "{err}");
    }

    #[test]
    fn a_bad_name_is_named() {
        let text = GOOD.replace("name = \"fake_rs\"", "name = \"Fake RS\"");
        let err = Manifest::from_toml_str(&text, "m.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("field `name`"), "{err}");
    }

    #[test]
    fn unknown_fields_and_bad_capabilities_are_refused() {
        let text = format!("{GOOD}\nflavour = \"mint\"\nrequires = [\"no version\"]\n");
        let err = Manifest::from_toml_str(&text, "m.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("flavour"), "{err}");
        assert!(err.contains("field `requires.0`"), "{err}");
    }

    #[test]
    fn schema_errors_are_in_words() {
        let err = |text: &str| {
            Manifest::from_toml_str(text, "m.toml")
                .unwrap_err()
                .to_string()
        };
        // An enum lists every allowed value, not "or 10 other candidates".
        let said = err(&GOOD.replace("kind = \"action\"", "kind = \"acton\""));
        assert!(
            said.contains("\"acton\" is not one of \"stt\", \"router\"")
                && said.contains("\"action\"")
                && !said.contains("candidates"),
            "{said}"
        );
        // A pattern is explained by the field's description, not shown as a regex.
        let said = err(&GOOD.replace("version = \"0.1.0\"", "version = \"0.1\""));
        assert!(
            said.contains(
                "\"0.1\" is not valid here: The plugin's own semantic version, MAJOR.MINOR.PATCH"
            ),
            "{said}"
        );
        let said = err(&GOOD.replace("\"action.open_url@1\"", "\"no version\""));
        assert!(
            said.contains("is not valid here: Capabilities the plugin offers"),
            "{said}"
        );
    }

    #[test]
    fn toml_syntax_errors_are_reported() {
        assert!(matches!(
            Manifest::from_toml_str("name = ", "m.toml"),
            Err(ManifestError::Toml { .. })
        ));
    }

    #[test]
    fn the_kinds_come_from_the_schema() {
        let kinds = kinds();
        for kind in ["stt", "router", "action", "tts", "bundle"] {
            assert!(kinds.iter().any(|k| k == kind), "{kind} in {kinds:?}");
        }
    }
}
