//! The frozen handshake and version negotiation (PROTOCOL.md §3, §4).
//!
//! ```text
//! runner → plugin  protocol.hello {protocol, abi, runner, epoch}
//!                  → {protocol, abi, plugin:{name,version,kind}, transport,
//!                     provides, requires, permissions}
//! runner → plugin  plugin.describe {} → {methods, streams}
//! runner → plugin  plugin.health {}   → {status: "ok" | "degraded", detail}
//! ```

use crate::error::{ErrorCode, ErrorObject};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::fmt;
use std::str::FromStr;

/// The protocol version this crate speaks.
pub const PROTOCOL_VERSION: ProtocolVersion = ProtocolVersion { major: 1, minor: 0 };

/// The runner-to-plugin call semantics version this crate speaks.
pub const ABI: u64 = 1;

/// How many minor versions older than ours a peer may be and still be accepted (N-2).
pub const MINOR_WINDOW: u32 = 2;

/// Method names of the handshake.
pub mod methods {
    /// `protocol.hello`
    pub const HELLO: &str = "protocol.hello";
    /// `plugin.describe`
    pub const DESCRIBE: &str = "plugin.describe";
    /// `plugin.health`
    pub const HEALTH: &str = "plugin.health";
}

/// A protocol version `"major.minor"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProtocolVersion {
    /// Incompatible wire changes bump this.
    pub major: u32,
    /// Additive changes bump this.
    pub minor: u32,
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl FromStr for ProtocolVersion {
    type Err = String;

    /// Parse `"major.minor"`, both plain decimal numbers.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad =
            || format!("protocol version {s:?} is not of the form \"major.minor\" (e.g. \"1.0\")");
        let (major, minor) = s.split_once('.').ok_or_else(bad)?;
        let num = |p: &str| {
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                Err(bad())
            } else {
                p.parse::<u32>().map_err(|_| bad())
            }
        };
        Ok(ProtocolVersion {
            major: num(major)?,
            minor: num(minor)?,
        })
    }
}

impl Serialize for ProtocolVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ProtocolVersion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The outcome of a successful negotiation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// The version both sides speak: the older of the two.
    pub version: ProtocolVersion,
    /// A warning for the log when the versions differ in their minor part.
    pub warning: Option<String>,
}

/// Decide whether a peer speaking `theirs` (with `abi`) can talk to us at `ours`.
///
/// Rules (PROTOCOL.md §4): majors must be equal; a peer one or two minors older is accepted
/// with a warning; older by more is refused; a newer minor is accepted with a warning and
/// spoken to at our minor; `abi` must equal [`ABI`].
///
/// # Errors
/// `-32004` with `data {runner, plugin}` (versions as strings) naming what differs.
pub fn negotiate(
    ours: ProtocolVersion,
    theirs: &str,
    abi: Option<u64>,
) -> Result<Negotiated, ErrorObject> {
    let refuse = |message: String| {
        ErrorObject::new(ErrorCode::IncompatibleVersion, message)
            .with_data(json!({"runner": ours.to_string(), "plugin": theirs, "abi": abi}))
    };
    let theirs_v: ProtocolVersion = theirs.parse().map_err(refuse)?;
    match abi {
        Some(ABI) => {}
        Some(other) => {
            return Err(refuse(format!(
                "plugin abi {other} is not supported; this runner speaks abi {ABI}"
            )));
        }
        None => return Err(refuse("the hello result has no integer \"abi\"".to_owned())),
    }
    if theirs_v.major != ours.major {
        return Err(refuse(format!(
            "protocol {theirs_v} is incompatible with the runner's {ours}: the major versions differ"
        )));
    }
    if theirs_v.minor + MINOR_WINDOW < ours.minor {
        return Err(refuse(format!(
            "protocol {theirs_v} is more than {MINOR_WINDOW} minor versions older than the runner's {ours}; update the plugin"
        )));
    }
    let warning = match theirs_v.minor.cmp(&ours.minor) {
        std::cmp::Ordering::Equal => None,
        std::cmp::Ordering::Less => Some(format!(
            "plugin speaks protocol {theirs_v}, older than the runner's {ours}; accepted (N-{MINOR_WINDOW} window)"
        )),
        std::cmp::Ordering::Greater => Some(format!(
            "plugin speaks protocol {theirs_v}, newer than the runner's {ours}; speaking {ours}"
        )),
    };
    Ok(Negotiated {
        version: theirs_v.min(ours),
        warning,
    })
}

/// Params of `protocol.hello`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HelloParams {
    /// The runner's protocol version, e.g. `"1.0"`.
    pub protocol: String,
    /// The runner's abi, e.g. `1`.
    pub abi: u64,
    /// The runner's name and version, e.g. `"utter/0.1.0"`.
    pub runner: String,
    /// The epoch of this plugin instance: 0 at first spawn, +1 per respawn.
    pub epoch: u64,
}

/// Name, version and kind of a plugin, as sent in the hello result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct PluginInfo {
    /// The plugin id (manifest `name`).
    pub name: String,
    /// The plugin's own semver.
    pub version: String,
    /// The plugin kind (`action`, `router`, ...).
    pub kind: String,
}

/// Result of `protocol.hello`. Unknown fields are ignored; missing lists read as empty.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HelloResult {
    /// The plugin's protocol version.
    pub protocol: String,
    /// The plugin's abi.
    pub abi: u64,
    /// The plugin's identity.
    #[serde(default)]
    pub plugin: PluginInfo,
    /// The transport the plugin believes it speaks over.
    #[serde(default)]
    pub transport: String,
    /// Capabilities offered, `name@N`.
    #[serde(default)]
    pub provides: Vec<String>,
    /// Capabilities needed, `name@N`.
    #[serde(default)]
    pub requires: Vec<String>,
    /// Permissions the plugin asks for.
    #[serde(default)]
    pub permissions: Vec<String>,
}

/// Result of `plugin.describe`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct DescribeResult {
    /// Methods the plugin serves.
    #[serde(default)]
    pub methods: Vec<String>,
    /// Stream notification methods the plugin can emit.
    #[serde(default)]
    pub streams: Vec<String>,
    /// Methods that have no side effects (queries); every other method is treated as acting.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub side_effect_free: Vec<String>,
    /// Whether the plugin keeps a reliable stream's credit itself: it is sent `mode` and
    /// `window` with `stream.subscribe` and every acknowledgement as a `stream.ack`
    /// notification, and pauses when the window is used up (PROTOCOL.md §10.3). Plugins
    /// that do not say so (those written for the older runner) are sent neither: the runner
    /// holds their frames and keeps the window toward the subscriber alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stream_credit: bool,
}

/// `plugin.health` status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HealthStatus {
    /// Fully working.
    Ok,
    /// Working with reduced function; still used.
    Degraded,
}

/// Result of `plugin.health`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HealthResult {
    /// `ok` or `degraded`.
    pub status: HealthStatus,
    /// Free text shown in status listings.
    #[serde(default)]
    pub detail: String,
}

impl HealthResult {
    /// `{status: "ok", detail: ""}`.
    pub fn ok() -> HealthResult {
        HealthResult {
            status: HealthStatus::Ok,
            detail: String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> ProtocolVersion {
        s.parse().unwrap()
    }

    #[test]
    fn parse_versions() {
        assert_eq!(v("1.0"), ProtocolVersion { major: 1, minor: 0 });
        for bad in ["1", "1.", ".1", "1.0.0", "a.b", "+1.0", "1.-1"] {
            assert!(bad.parse::<ProtocolVersion>().is_err(), "{bad}");
        }
    }

    #[test]
    fn equal_versions_negotiate_silently() {
        let n = negotiate(v("1.0"), "1.0", Some(1)).unwrap();
        assert_eq!((n.version, n.warning), (v("1.0"), None));
    }

    #[test]
    fn major_mismatch_and_bad_abi_are_refused() {
        assert_eq!(
            negotiate(v("1.0"), "2.0", Some(1)).unwrap_err().code,
            -32004
        );
        assert_eq!(
            negotiate(v("1.0"), "0.9", Some(1)).unwrap_err().code,
            -32004
        );
        assert_eq!(
            negotiate(v("1.0"), "1.0", Some(2)).unwrap_err().code,
            -32004
        );
        assert_eq!(negotiate(v("1.0"), "1.0", None).unwrap_err().code, -32004);
        assert_eq!(
            negotiate(v("1.0"), "one", Some(1)).unwrap_err().code,
            -32004
        );
    }

    #[test]
    fn two_minors_older_warns_three_refuses() {
        let n = negotiate(v("1.5"), "1.3", Some(1)).unwrap();
        assert_eq!(n.version, v("1.3"));
        assert!(n.warning.unwrap().contains("older"));
        assert!(negotiate(v("1.5"), "1.2", Some(1)).is_err());
    }

    #[test]
    fn newer_minor_is_spoken_at_ours() {
        let n = negotiate(v("1.0"), "1.4", Some(1)).unwrap();
        assert_eq!(n.version, v("1.0"));
        assert!(n.warning.unwrap().contains("newer"));
    }
}
