//! Capability names and the registry (PROTOCOL.md §5).
//!
//! A capability is `name@N`: a lowercase dotted name, optionally followed by `/Suffix`, and a
//! version integer (`router.plan@1`, `audio.rate.16000@1`), or `experimental/<Name>@N`, an
//! extension namespace that needs no registry entry. Matching is exact, `@N` included.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// The registry shipped with this crate (`protocol/capabilities.json`).
pub const BUILTIN_REGISTRY_JSON: &str = include_str!("../capabilities.json");

/// The capabilities the runner itself provides to every plugin.
pub const RUNNER_CAPABILITIES: &[&str] = &[
    "host.audio.ringbuffer@1",
    "host.fd.pass@1",
    "fs.tmp@1",
    "host.context@1",
    "host.perceive@1",
    "host.action@1",
    "host.confirm@1",
    "host.choose@1",
    "host.emit@1",
    // The voice loop's audio, as it hands it to an `stt` plugin (`crate::voice` in the
    // runner): raw little-endian f32, 16 kHz, mono.
    "audio.pcm_f32le@1",
    "audio.rate.16000@1",
    "audio.channels.1@1",
];

/// A parsed capability name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Capability {
    /// The name without the version, e.g. `action.open_url`.
    pub name: String,
    /// The version after `@`.
    pub version: u32,
}

impl Capability {
    /// Whether this is in the `experimental/` namespace.
    pub fn is_experimental(&self) -> bool {
        self.name.starts_with("experimental/")
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.name, self.version)
    }
}

impl FromStr for Capability {
    type Err = String;

    /// Parse `name@N` or `experimental/Name@N` (the manifest schema's pattern).
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            format!(
                "capability {s:?} is malformed: {why} (expected e.g. \"action.open_url@1\" or \"experimental/MyThing@1\")"
            )
        };
        let (name, version) = s.rsplit_once('@').ok_or_else(|| bad("no @N version"))?;
        if version.is_empty() || !version.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad("the version after @ must be a whole number"));
        }
        let version: u32 = version.parse().map_err(|_| bad("version out of range"))?;
        let base_ok = |p: &str| {
            !p.is_empty()
                && p.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
        };
        let suffix_ok = |p: &str| {
            !p.is_empty()
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        };
        let valid = match name.split_once('/') {
            Some(("experimental", rest)) => suffix_ok(rest),
            Some((base, rest)) => base_ok(base) && suffix_ok(rest),
            None => base_ok(name),
        };
        if !valid {
            return Err(bad("names use lowercase letters, digits, '.', '_' and '-'"));
        }
        Ok(Capability {
            name: name.to_owned(),
            version,
        })
    }
}

/// A deprecation note on a registry entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Deprecation {
    /// The protocol version that deprecated it, e.g. `"1.2"`.
    pub since: String,
    /// The capability to use instead.
    pub replacement: String,
}

/// One registry entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CapabilityEntry {
    /// Who defines it (`utter-core`, a plugin name).
    pub owner: String,
    /// What it means. The older registry called this field `desc`; both are read.
    #[serde(alias = "desc")]
    pub description: String,
    /// Set when the capability is on its way out.
    #[serde(default)]
    pub deprecated: Option<Deprecation>,
}

/// What the registry says of a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup<'a> {
    /// Registered and current.
    Known(&'a CapabilityEntry),
    /// Registered but deprecated.
    Deprecated(&'a CapabilityEntry, &'a Deprecation),
    /// In the `experimental/` namespace: never registered, never warned about.
    Experimental,
    /// Not registered: a warning, not an error.
    Unknown,
}

#[derive(Deserialize)]
struct RegistryFile {
    #[allow(dead_code)]
    registry_version: u64,
    capabilities: BTreeMap<String, CapabilityEntry>,
}

/// The capability registry: the single source of truth for capability names.
#[derive(Debug, Clone, Default)]
pub struct CapabilityRegistry {
    entries: BTreeMap<String, CapabilityEntry>,
}

impl CapabilityRegistry {
    /// The registry compiled into this crate.
    pub fn builtin() -> CapabilityRegistry {
        CapabilityRegistry::from_json(BUILTIN_REGISTRY_JSON)
            .expect("the built-in capabilities.json is valid (checked by a test)")
    }

    /// Load a registry from the text of a `capabilities.json`.
    ///
    /// # Errors
    /// A message naming the JSON problem or the malformed capability name.
    pub fn from_json(text: &str) -> Result<CapabilityRegistry, String> {
        let file: RegistryFile =
            serde_json::from_str(text).map_err(|e| format!("capabilities.json: {e}"))?;
        for name in file.capabilities.keys() {
            name.parse::<Capability>()?;
        }
        Ok(CapabilityRegistry {
            entries: file.capabilities,
        })
    }

    /// Look a name up.
    pub fn lookup(&self, name: &str) -> Lookup<'_> {
        if name.starts_with("experimental/") {
            return Lookup::Experimental;
        }
        match self.entries.get(name) {
            Some(entry) => match &entry.deprecated {
                Some(dep) => Lookup::Deprecated(entry, dep),
                None => Lookup::Known(entry),
            },
            None => Lookup::Unknown,
        }
    }

    /// Every registered name, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// Warnings for a plugin's `provides` then `requires`: unknown and deprecated names.
    pub fn warnings<'a>(&self, names: impl IntoIterator<Item = &'a String>) -> Vec<String> {
        let mut out = Vec::new();
        for name in names {
            match self.lookup(name) {
                Lookup::Unknown => out.push(format!(
                    "unknown capability {name:?} (not in the registry; ignored)"
                )),
                Lookup::Deprecated(_, dep) => out.push(format!(
                    "capability {name:?} is deprecated since protocol {}; use {:?}",
                    dep.since, dep.replacement
                )),
                Lookup::Known(_) | Lookup::Experimental => {}
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_registry_loads_and_holds_the_older_names() {
        let reg = CapabilityRegistry::builtin();
        for name in [
            "router.plan@1",
            "action.open_url@1",
            "host.fd.pass@1",
            "action.quicknote@1",
            "audio.rate.16000@1",
        ] {
            assert!(matches!(reg.lookup(name), Lookup::Known(_)), "{name}");
        }
        for name in RUNNER_CAPABILITIES {
            assert!(matches!(reg.lookup(name), Lookup::Known(_)), "{name}");
        }
    }

    #[test]
    fn parse_names() {
        assert_eq!(
            "action.open_url@1".parse::<Capability>().unwrap(),
            Capability {
                name: "action.open_url".into(),
                version: 1
            }
        );
        assert!(
            "experimental/UiCustom@2"
                .parse::<Capability>()
                .unwrap()
                .is_experimental()
        );
        for bad in [
            "action.open_url",
            "Action@1",
            "a@x",
            "a@",
            "@1",
            "experimental/@1",
            "a b@1",
        ] {
            assert!(bad.parse::<Capability>().is_err(), "{bad}");
        }
    }

    #[test]
    fn deprecated_entries_warn_with_their_replacement() {
        let reg = CapabilityRegistry::from_json(
            r#"{"registry_version":1,"capabilities":{
                "old.thing@1":{"owner":"x","desc":"old","deprecated":{"since":"1.1","replacement":"new.thing@1"}},
                "new.thing@1":{"owner":"x","description":"new"}}}"#,
        )
        .unwrap();
        let names = vec![
            "old.thing@1".to_string(),
            "new.thing@1".into(),
            "nope@1".into(),
            "experimental/X@1".into(),
        ];
        let warnings = reg.warnings(&names);
        assert_eq!(warnings.len(), 2);
        assert!(warnings[0].contains("new.thing@1"));
        assert!(warnings[1].contains("unknown capability \"nope@1\""));
    }
}
