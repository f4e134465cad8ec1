//! The runner's side of the frozen handshake (PROTOCOL.md §3, §4, §5).
//!
//! Once the transport to a plugin is up, the runner sends three requests, in this order, each
//! bounded by its `rpc_timeout_ms`:
//!
//! ```text
//! runner → plugin  protocol.hello   {protocol: "1.0", abi: 1, runner: "utter/<semver>", epoch}
//!                  ← {protocol, abi, plugin: {name, version, kind}, transport,
//!                     provides: [..], requires: [..], permissions: [..]}
//! runner → plugin  plugin.describe  {}  ← {methods: [..], streams: [..]}
//! runner → plugin  plugin.health    {}  ← {status: "ok" | "degraded", detail}
//! ```
//!
//! then checks the capability names of `provides` and `requires` (§5). [`handshake()`] does all
//! of it over an existing [`Connection`]; [`hello`], [`describe`], [`health`] and
//! [`check_capabilities`] are the single steps, for callers (such as the conformance checker
//! of the `testkit` feature) that look at each one on its own.
//!
//! Every failure is a [`HandshakeError`], which carries the [`ErrorObject`] to report and says
//! whether starting the plugin again could help ([`HandshakeError::is_permanent`]): an
//! incompatible version, a malformed hello result or a malformed capability name cannot be
//! fixed by a restart (§7: such a plugin stays in `error`); a timeout, a crash or a bad
//! `plugin.describe`/`plugin.health` answer may be.
//!
//! Nothing here logs at warning level: the warnings (an older or newer minor version, unknown
//! or deprecated capabilities) are returned in [`Handshake::warnings`] for the caller to log
//! with its own context.

use crate::capability::{Capability, CapabilityRegistry};
use crate::connection::Connection;
use crate::error::{ErrorCode, ErrorObject};
use crate::handshake::{
    self, DescribeResult, HealthResult, HelloParams, HelloResult, Negotiated, PROTOCOL_VERSION,
    methods,
};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

/// The `runner` value this crate would send: `"utter/<version of this crate>"`.
pub fn default_runner_name() -> String {
    format!("utter/{}", env!("CARGO_PKG_VERSION"))
}

/// What the runner brings to a handshake.
#[derive(Debug, Clone)]
pub struct HandshakeOptions<'a> {
    /// `runner` in the hello params: `"utter/"` and the runner's semver (§3).
    pub runner: String,
    /// The epoch of this plugin instance: 0 at the first spawn, one more per respawn (§7).
    pub epoch: u64,
    /// The bound on each of the three requests (`rpc_timeout_ms`); `None` waits as long as
    /// the connection lives.
    pub timeout: Option<Duration>,
    /// Capabilities the runner's configuration lists for the plugin, added to its `provides`.
    pub configured_provides: Vec<String>,
    /// Capabilities the configuration lists as required, added to its `requires`.
    pub configured_requires: Vec<String>,
    /// Permissions the configuration grants, added to the plugin's `permissions`.
    pub configured_permissions: Vec<String>,
    /// The registry to look capability names up in; `None` uses the one built into this
    /// crate ([`CapabilityRegistry::builtin`]).
    pub registry: Option<&'a CapabilityRegistry>,
}

impl Default for HandshakeOptions<'_> {
    fn default() -> Self {
        HandshakeOptions {
            runner: default_runner_name(),
            epoch: 0,
            timeout: Some(Duration::from_secs(10)),
            configured_provides: Vec::new(),
            configured_requires: Vec::new(),
            configured_permissions: Vec::new(),
            registry: None,
        }
    }
}

impl HandshakeOptions<'_> {
    /// The params of `protocol.hello`: this crate's [`PROTOCOL_VERSION`] and
    /// [`handshake::ABI`], with [`HandshakeOptions::runner`] and [`HandshakeOptions::epoch`].
    pub fn hello_params(&self) -> HelloParams {
        HelloParams {
            protocol: PROTOCOL_VERSION.to_string(),
            abi: handshake::ABI,
            runner: self.runner.clone(),
            epoch: self.epoch,
        }
    }
}

/// A finished handshake: what the plugin said, and what the runner made of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Handshake {
    /// The `protocol.hello` result as the plugin sent it.
    pub hello: HelloResult,
    /// The version both sides speak, and the warning when the minors differ.
    pub negotiated: Negotiated,
    /// The `plugin.describe` result.
    pub describe: DescribeResult,
    /// The `plugin.health` result.
    pub health: HealthResult,
    /// The configured `provides` joined with the plugin's own, sorted, without repeats.
    pub provides: BTreeSet<String>,
    /// The configured `requires` joined with the plugin's own.
    pub requires: BTreeSet<String>,
    /// The configured `permissions` joined with the plugin's own.
    pub permissions: BTreeSet<String>,
    /// Things to log: the negotiation warning first, then unknown and deprecated capabilities.
    pub warnings: Vec<String>,
}

/// The step of the handshake a [`HandshakeError`] comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HandshakeStep {
    /// `protocol.hello` and the version negotiation.
    Hello,
    /// `plugin.describe`.
    Describe,
    /// `plugin.health`.
    Health,
    /// The capability names of `provides` and `requires`.
    Capabilities,
}

/// Why a handshake failed. [`HandshakeError::error`] is the error object to report (its
/// message is the one the runner shows in the plugin's status).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HandshakeError {
    /// The `protocol.hello` request itself failed: a timeout (`-32001`), the connection
    /// closed (`-32000`), or the plugin answered with an error, which is passed on as it is.
    /// Permanent only when that error is `-32004` (the plugin refused the runner's version).
    #[error("{}", .0.message)]
    HelloFailed(ErrorObject),
    /// The hello result is not `{protocol, abi, plugin, ...}` (for example `abi` is not an
    /// integer): `-32004`, permanent.
    #[error("{}", .0.message)]
    MalformedHello(ErrorObject),
    /// The versions do not agree (§4): `-32004` with `data {runner, plugin, abi}`, permanent.
    #[error("{}", .0.message)]
    Incompatible(ErrorObject),
    /// The `plugin.describe` request failed (timeout, closed, the plugin's error); retryable.
    #[error("{}", .0.message)]
    DescribeFailed(ErrorObject),
    /// The describe result does not have the shape `{methods: [..], streams: [..]}`:
    /// `-32000`, retryable.
    #[error("{}", .0.message)]
    MalformedDescribe(ErrorObject),
    /// The `plugin.health` request failed; retryable.
    #[error("{}", .0.message)]
    HealthFailed(ErrorObject),
    /// The health result is not `{status: "ok" | "degraded", detail}`: `-32000`, retryable.
    #[error("{}", .0.message)]
    MalformedHealth(ErrorObject),
    /// A name in `provides` or `requires` is not `name@N` (§5): `-32602` listing every bad
    /// name, permanent.
    #[error("{}", .0.message)]
    BadCapability(ErrorObject),
}

impl HandshakeError {
    /// Whether starting the plugin again cannot help (the runner leaves it in `error`).
    pub fn is_permanent(&self) -> bool {
        match self {
            HandshakeError::HelloFailed(e) => e.kind() == ErrorCode::IncompatibleVersion,
            HandshakeError::MalformedHello(_)
            | HandshakeError::Incompatible(_)
            | HandshakeError::BadCapability(_) => true,
            HandshakeError::DescribeFailed(_)
            | HandshakeError::MalformedDescribe(_)
            | HandshakeError::HealthFailed(_)
            | HandshakeError::MalformedHealth(_) => false,
        }
    }

    /// The error object to report.
    pub fn error(&self) -> &ErrorObject {
        match self {
            HandshakeError::HelloFailed(e)
            | HandshakeError::MalformedHello(e)
            | HandshakeError::Incompatible(e)
            | HandshakeError::DescribeFailed(e)
            | HandshakeError::MalformedDescribe(e)
            | HandshakeError::HealthFailed(e)
            | HandshakeError::MalformedHealth(e)
            | HandshakeError::BadCapability(e) => e,
        }
    }

    /// The error object, by value.
    pub fn into_error(self) -> ErrorObject {
        match self {
            HandshakeError::HelloFailed(e)
            | HandshakeError::MalformedHello(e)
            | HandshakeError::Incompatible(e)
            | HandshakeError::DescribeFailed(e)
            | HandshakeError::MalformedDescribe(e)
            | HandshakeError::HealthFailed(e)
            | HandshakeError::MalformedHealth(e)
            | HandshakeError::BadCapability(e) => e,
        }
    }

    /// Which step failed.
    pub fn step(&self) -> HandshakeStep {
        match self {
            HandshakeError::HelloFailed(_)
            | HandshakeError::MalformedHello(_)
            | HandshakeError::Incompatible(_) => HandshakeStep::Hello,
            HandshakeError::DescribeFailed(_) | HandshakeError::MalformedDescribe(_) => {
                HandshakeStep::Describe
            }
            HandshakeError::HealthFailed(_) | HandshakeError::MalformedHealth(_) => {
                HandshakeStep::Health
            }
            HandshakeError::BadCapability(_) => HandshakeStep::Capabilities,
        }
    }
}

/// Run the whole handshake on `conn`: [`hello`], [`describe`], [`health`], then
/// [`check_capabilities`] on the configured names joined with the plugin's.
///
/// # Errors
/// The first step that fails, as a [`HandshakeError`]; nothing after it is sent.
pub async fn handshake(
    conn: &Connection,
    options: &HandshakeOptions<'_>,
) -> Result<Handshake, HandshakeError> {
    let (hello_result, negotiated) = hello(conn, options).await?;
    let describe_result = describe(conn, options.timeout).await?;
    let health_result = health(conn, options.timeout).await?;

    let joined = |configured: &[String], own: &[String]| -> BTreeSet<String> {
        configured.iter().chain(own).cloned().collect()
    };
    let provides = joined(&options.configured_provides, &hello_result.provides);
    let requires = joined(&options.configured_requires, &hello_result.requires);
    let permissions = joined(&options.configured_permissions, &hello_result.permissions);

    let mut warnings: Vec<String> = negotiated.warning.iter().cloned().collect();
    warnings.extend(check_capabilities(
        provides.iter().chain(&requires),
        options.registry,
    )?);
    Ok(Handshake {
        hello: hello_result,
        negotiated,
        describe: describe_result,
        health: health_result,
        provides,
        requires,
        permissions,
        warnings,
    })
}

/// Step 1 (§3, §4): send `protocol.hello` with [`HandshakeOptions::hello_params`], read the
/// result and negotiate the version with [`handshake::negotiate`].
///
/// # Errors
/// [`HandshakeError::HelloFailed`] when the request fails, [`HandshakeError::MalformedHello`]
/// when the result is not a hello result, [`HandshakeError::Incompatible`] when the versions
/// do not agree.
pub async fn hello(
    conn: &Connection,
    options: &HandshakeOptions<'_>,
) -> Result<(HelloResult, Negotiated), HandshakeError> {
    let params = hello_params_value(&options.hello_params());
    let raw = conn
        .request(methods::HELLO, params, options.timeout)
        .await
        .map_err(HandshakeError::HelloFailed)?;
    let result = parse_hello(raw)?;
    let negotiated = handshake::negotiate(PROTOCOL_VERSION, &result.protocol, Some(result.abi))
        .map_err(HandshakeError::Incompatible)?;
    Ok((result, negotiated))
}

/// Read a `protocol.hello` result (what [`hello`] does with the answer).
///
/// # Errors
/// [`HandshakeError::MalformedHello`], `-32004`, naming what serde could not read.
pub fn parse_hello(raw: Value) -> Result<HelloResult, HandshakeError> {
    serde_json::from_value(raw).map_err(|e| {
        HandshakeError::MalformedHello(ErrorObject::new(
            ErrorCode::IncompatibleVersion,
            format!(
                "bad protocol.hello result: {e}; expected {{protocol, abi, plugin, provides, requires, permissions}}"
            ),
        ))
    })
}

/// Step 2 (§3): send `plugin.describe {}` and read `{methods, streams}`.
///
/// # Errors
/// [`HandshakeError::DescribeFailed`] or [`HandshakeError::MalformedDescribe`].
pub async fn describe(
    conn: &Connection,
    timeout: Option<Duration>,
) -> Result<DescribeResult, HandshakeError> {
    let raw = conn
        .request(methods::DESCRIBE, json!({}), timeout)
        .await
        .map_err(HandshakeError::DescribeFailed)?;
    parse_describe(raw)
}

/// Read a `plugin.describe` result.
///
/// # Errors
/// [`HandshakeError::MalformedDescribe`], `-32000`.
pub fn parse_describe(raw: Value) -> Result<DescribeResult, HandshakeError> {
    serde_json::from_value(raw).map_err(|e| {
        HandshakeError::MalformedDescribe(ErrorObject::plugin(format!(
            "bad plugin.describe result: {e}"
        )))
    })
}

/// Step 3 (§3): send `plugin.health {}` and read `{status, detail}`.
///
/// # Errors
/// [`HandshakeError::HealthFailed`] or [`HandshakeError::MalformedHealth`].
pub async fn health(
    conn: &Connection,
    timeout: Option<Duration>,
) -> Result<HealthResult, HandshakeError> {
    let raw = conn
        .request(methods::HEALTH, json!({}), timeout)
        .await
        .map_err(HandshakeError::HealthFailed)?;
    parse_health(raw)
}

/// Read a `plugin.health` result.
///
/// # Errors
/// [`HandshakeError::MalformedHealth`], `-32000`.
pub fn parse_health(raw: Value) -> Result<HealthResult, HandshakeError> {
    serde_json::from_value(raw).map_err(|e| {
        HandshakeError::MalformedHealth(ErrorObject::plugin(format!(
            "bad plugin.health result: {e}"
        )))
    })
}

/// Step 4 (§5): every name must parse as a [`Capability`]; names the registry does not know,
/// or knows as deprecated, are returned as warnings (`registry` `None`: the built-in one).
///
/// # Errors
/// [`HandshakeError::BadCapability`], `-32602`, its message every parse error joined by
/// `"; "`.
pub fn check_capabilities<'n>(
    names: impl IntoIterator<Item = &'n String>,
    registry: Option<&CapabilityRegistry>,
) -> Result<Vec<String>, HandshakeError> {
    let names: Vec<&String> = names.into_iter().collect();
    let bad: Vec<String> = names
        .iter()
        .filter_map(|name| name.parse::<Capability>().err())
        .collect();
    if !bad.is_empty() {
        return Err(HandshakeError::BadCapability(ErrorObject::invalid_params(
            bad.join("; "),
        )));
    }
    Ok(match registry {
        Some(registry) => registry.warnings(names),
        None => CapabilityRegistry::builtin().warnings(names),
    })
}

/// The hello params as JSON (built by hand: nothing here can fail to serialise).
pub fn hello_params_value(params: &HelloParams) -> Value {
    json!({
        "protocol": params.protocol,
        "abi": params.abi,
        "runner": params.runner,
        "epoch": params.epoch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connection::{ConnectionOptions, Incoming, memory_pair};
    use tokio::sync::mpsc;

    /// A fake plugin answering the three handshake methods with the given values.
    fn plugin(conn: Connection, mut rx: mpsc::Receiver<Incoming>, answers: [Value; 3]) {
        tokio::spawn(async move {
            while let Some(msg) = rx.recv().await {
                if let Incoming::Request(r) = msg {
                    let answer = match r.method.as_str() {
                        methods::HELLO => answers[0].clone(),
                        methods::DESCRIBE => answers[1].clone(),
                        methods::HEALTH => answers[2].clone(),
                        other => {
                            let _ = conn
                                .respond(r.id, Err(ErrorObject::method_not_found(other)))
                                .await;
                            continue;
                        }
                    };
                    let result = match answer.get("error") {
                        Some(e) => Err(serde_json::from_value(e.clone()).expect("error object")),
                        None => Ok(answer),
                    };
                    let _ = conn.respond(r.id, result).await;
                }
            }
        });
    }

    fn good_hello() -> Value {
        json!({"protocol": "1.0", "abi": 1,
               "plugin": {"name": "p", "version": "0.1.0", "kind": "action"},
               "transport": "stdio", "provides": ["action.open_url@1", "experimental/p@1"],
               "requires": [], "permissions": ["network"]})
    }

    async fn run(
        answers: [Value; 3],
        options: HandshakeOptions<'_>,
    ) -> Result<Handshake, HandshakeError> {
        let ((runner, _rrx), (p, prx)) = memory_pair(
            ConnectionOptions {
                id_prefix: Some("0:".into()),
                ..Default::default()
            },
            ConnectionOptions::default(),
        );
        plugin(p, prx, answers);
        handshake(&runner, &options).await
    }

    #[tokio::test]
    async fn a_good_plugin_completes_the_handshake() {
        let options = HandshakeOptions {
            configured_provides: vec!["router.plan@1".into()],
            configured_permissions: vec!["network".into(), "audio".into()],
            ..Default::default()
        };
        let done = run(
            [
                good_hello(),
                json!({"methods": ["action.invoke"]}),
                json!({"status": "degraded", "detail": "slow"}),
            ],
            options,
        )
        .await
        .unwrap();
        assert_eq!(done.hello.plugin.name, "p");
        assert_eq!(done.negotiated.version, PROTOCOL_VERSION);
        assert_eq!(done.describe.methods, ["action.invoke"]);
        assert!(done.describe.streams.is_empty());
        assert_eq!(done.health.status, handshake::HealthStatus::Degraded);
        assert_eq!(
            done.provides.iter().collect::<Vec<_>>(),
            ["action.open_url@1", "experimental/p@1", "router.plan@1"]
        );
        assert_eq!(done.permissions.len(), 2);
        assert!(done.warnings.is_empty(), "{:?}", done.warnings);
    }

    #[tokio::test]
    async fn an_older_minor_and_unknown_capabilities_are_warnings() {
        let mut hello = good_hello();
        hello["protocol"] = json!("1.0");
        hello["requires"] = json!(["no.such.thing@1"]);
        let done = run(
            [hello, json!({"methods": []}), json!({"status": "ok"})],
            HandshakeOptions::default(),
        )
        .await
        .unwrap();
        assert_eq!(done.warnings.len(), 1);
        assert!(done.warnings[0].contains("no.such.thing@1"));
    }

    #[tokio::test]
    async fn version_problems_are_permanent() {
        let mut hello = good_hello();
        hello["protocol"] = json!("2.0");
        let e = run([hello, json!({}), json!({})], HandshakeOptions::default())
            .await
            .unwrap_err();
        assert!(matches!(e, HandshakeError::Incompatible(_)), "{e:?}");
        assert!(e.is_permanent());
        assert_eq!(e.error().code, -32004);
        assert!(e.to_string().contains("the major versions differ"), "{e}");

        let mut hello = good_hello();
        hello["abi"] = json!(1.0);
        let e = run([hello, json!({}), json!({})], HandshakeOptions::default())
            .await
            .unwrap_err();
        assert!(matches!(e, HandshakeError::MalformedHello(_)), "{e:?}");
        assert!(e.is_permanent());
        assert!(e.error().message.starts_with("bad protocol.hello result: "));

        let refused = json!({"error": {"code": -32004, "message": "too new for me"}});
        let e = run([refused, json!({}), json!({})], HandshakeOptions::default())
            .await
            .unwrap_err();
        assert!(matches!(e, HandshakeError::HelloFailed(_)), "{e:?}");
        assert!(e.is_permanent());
        assert_eq!(e.step(), HandshakeStep::Hello);
    }

    #[tokio::test]
    async fn bad_describe_and_health_are_retryable() {
        let e = run(
            [
                good_hello(),
                json!({"methods": "x"}),
                json!({"status": "ok"}),
            ],
            HandshakeOptions::default(),
        )
        .await
        .unwrap_err();
        assert!(matches!(e, HandshakeError::MalformedDescribe(_)), "{e:?}");
        assert!(!e.is_permanent());
        assert_eq!(e.error().code, -32000);
        assert!(
            e.error()
                .message
                .starts_with("bad plugin.describe result: ")
        );

        let e = run(
            [
                good_hello(),
                json!({"methods": []}),
                json!({"status": "fine"}),
            ],
            HandshakeOptions::default(),
        )
        .await
        .unwrap_err();
        assert!(matches!(e, HandshakeError::MalformedHealth(_)), "{e:?}");
        assert!(!e.is_permanent());
        assert!(e.error().message.starts_with("bad plugin.health result: "));
    }

    #[tokio::test]
    async fn a_malformed_capability_name_is_permanent() {
        let options = HandshakeOptions {
            configured_requires: vec!["Bad Name@1".into()],
            ..Default::default()
        };
        let e = run(
            [
                good_hello(),
                json!({"methods": []}),
                json!({"status": "ok"}),
            ],
            options,
        )
        .await
        .unwrap_err();
        assert!(matches!(e, HandshakeError::BadCapability(_)), "{e:?}");
        assert!(e.is_permanent());
        assert_eq!(e.error().code, -32602);
        assert!(e.error().message.contains("\"Bad Name@1\" is malformed"));
    }

    #[tokio::test]
    async fn a_timeout_is_retryable() {
        let ((runner, _rrx), (_p, _prx)) =
            memory_pair(ConnectionOptions::default(), ConnectionOptions::default());
        let options = HandshakeOptions {
            timeout: Some(Duration::from_millis(50)),
            ..Default::default()
        };
        let e = handshake(&runner, &options).await.unwrap_err();
        assert!(matches!(e, HandshakeError::HelloFailed(_)), "{e:?}");
        assert_eq!(e.error().code, -32001);
        assert!(!e.is_permanent());
    }
}
