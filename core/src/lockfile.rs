//! The install lockfile, `$XDG_STATE_HOME/utter/install.lock` (JSON): what was installed, as
//! the plugins declared it then. `utter install --user` and `utter doctor --write-lock`
//! write it; `utter doctor` compares the plugins as they are now against it, axis by axis
//! (PROTOCOL.md §4: program hash, plugin version, protocol, abi, capabilities), and reports
//! each difference as drift.
//!
//! ```json
//! {"lock_version": 1, "utter_version": "0.1.0", "protocol": "1.3",
//!  "plugins": [{"id": "rules", "program": "/usr/bin/utter", "sha256": "…",
//!               "version": "0.1.0", "protocol": "1.3", "abi": 1,
//!               "provides": ["router.plan@1"]}]}
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use utter_ipc::status::PluginReport;

/// The format version of the file.
pub const LOCK_VERSION: u32 = 1;

/// The whole lockfile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lockfile {
    /// [`LOCK_VERSION`].
    pub lock_version: u32,
    /// The `utter` that wrote it.
    pub utter_version: String,
    /// The protocol version of that runner.
    pub protocol: String,
    /// One entry per configured plugin, in config order.
    pub plugins: Vec<LockedPlugin>,
}

/// One plugin as it was installed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockedPlugin {
    /// Its `[[plugin]]` id.
    pub id: String,
    /// Its program, resolved (absolute when it was found).
    pub program: String,
    /// SHA-256 of the program file; `None` when it could not be read.
    pub sha256: Option<String>,
    /// What its hello declared; `None` when it did not start.
    pub version: Option<String>,
    /// Its protocol version.
    pub protocol: Option<String>,
    /// Its abi.
    pub abi: Option<u64>,
    /// The capabilities it provided (config ∪ hello), sorted.
    pub provides: Vec<String>,
}

/// The lockfile's path in the state directory `state` (`$XDG_STATE_HOME/utter`).
pub fn path_in(state: &Path) -> PathBuf {
    state.join("install.lock")
}

impl LockedPlugin {
    /// The entry for a plugin as `report` shows it, with `program` hashed now.
    pub fn of(report: &PluginReport, program: &Path) -> LockedPlugin {
        LockedPlugin {
            id: report.id.clone(),
            program: program.display().to_string(),
            sha256: utter_protocol::digest::sha256_file(program).ok(),
            version: report.declared.as_ref().map(|d| d.version.clone()),
            protocol: report.declared.as_ref().map(|d| d.protocol.clone()),
            abi: report.declared.as_ref().map(|d| d.abi),
            provides: report.provides.clone(),
        }
    }

    /// Each way `now` differs from this locked entry, as one sentence each (empty: no
    /// drift). Axes `now` does not know (a plugin that did not start) are not compared.
    pub fn drift(&self, now: &LockedPlugin) -> Vec<String> {
        let mut out = Vec::new();
        if self.program != now.program {
            out.push(format!("program {} → {}", self.program, now.program));
        } else if now.sha256.is_some() && self.sha256 != now.sha256 {
            out.push(format!(
                "program {} changed since it was locked (sha256 {} → {})",
                now.program,
                short(self.sha256.as_deref()),
                short(now.sha256.as_deref())
            ));
        }
        let mut axis = |name: &str, was: &Option<String>, is: &Option<String>| {
            if is.is_some() && was != is {
                out.push(format!(
                    "{name} {} → {}",
                    was.as_deref().unwrap_or("?"),
                    is.as_deref().unwrap_or("?")
                ));
            }
        };
        axis("version", &self.version, &now.version);
        axis("protocol", &self.protocol, &now.protocol);
        axis(
            "abi",
            &self.abi.map(|a| a.to_string()),
            &now.abi.map(|a| a.to_string()),
        );
        if now.version.is_some() && self.provides != now.provides {
            let gone: Vec<&String> = self
                .provides
                .iter()
                .filter(|c| !now.provides.contains(c))
                .collect();
            let new: Vec<&String> = now
                .provides
                .iter()
                .filter(|c| !self.provides.contains(c))
                .collect();
            out.push(format!("capabilities: no longer {gone:?}, newly {new:?}"));
        }
        out
    }
}

/// The first 12 characters of a hash (whatever a hostile lockfile holds).
fn short(hash: Option<&str>) -> String {
    hash.map(|h| h.chars().take(12).collect())
        .unwrap_or_else(|| "?".into())
}

impl Lockfile {
    /// Read the lockfile at `path`: `Ok(None)` when there is none.
    ///
    /// # Errors
    /// A sentence when it cannot be read, is not a lockfile, or has another `lock_version`.
    pub fn read(path: &Path) -> Result<Option<Lockfile>, String> {
        let text = match crate::paths::read_regular_file(path, 16 * 1024 * 1024) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let lock: Lockfile = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not an install lockfile: {e}", path.display()))?;
        if lock.lock_version != LOCK_VERSION {
            return Err(format!(
                "{} has lock_version {}, this utter reads {LOCK_VERSION}",
                path.display(),
                lock.lock_version
            ));
        }
        Ok(Some(lock))
    }

    /// Write it to `path` atomically (mode 0644), creating the directory.
    ///
    /// # Errors
    /// The I/O error, with the path.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        crate::paths::write_atomic(path, text.as_bytes(), 0o644)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn locked(version: &str, sha: &str, provides: &[&str]) -> LockedPlugin {
        LockedPlugin {
            id: "p".into(),
            program: "/usr/bin/p".into(),
            sha256: Some(sha.into()),
            version: Some(version.into()),
            protocol: Some("1.0".into()),
            abi: Some(1),
            provides: provides.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn each_axis_that_moved_is_one_line_of_drift() {
        let was = locked("0.1.0", "aaaa", &["router.plan@1"]);
        assert!(was.drift(&was.clone()).is_empty());
        let now = locked("0.2.0", "bbbb", &["router.plan@1", "context.snapshot@1"]);
        let drift = was.drift(&now);
        assert_eq!(drift.len(), 3, "{drift:?}");
        assert!(
            drift[0].contains("changed since it was locked"),
            "{drift:?}"
        );
        assert_eq!(drift[1], "version 0.1.0 → 0.2.0");
        assert!(
            drift[2].contains("newly [\"context.snapshot@1\"]"),
            "{drift:?}"
        );
        // A plugin that did not start now is only compared by its program.
        let down = LockedPlugin {
            version: None,
            protocol: None,
            abi: None,
            provides: Vec::new(),
            ..was.clone()
        };
        assert!(was.drift(&down).is_empty());
        // A hostile lockfile's hash is cut by characters, never inside one.
        let odd = locked("0.1.0", "aaaaaaaaaaaébbbb", &["router.plan@1"]);
        assert!(
            odd.drift(&was)[0].contains("aaaaaaaaaaaé"),
            "{:?}",
            odd.drift(&was)
        );
    }
}
