//! `runner.invoke`: a client relays one call to one plugin (reference §9.4). Acting methods
//! pass the one gate of [`crate::pipeline`] (provenance → enabled → URL scheme → args schema →
//! confirmation → re-validation after approval → audit), exactly as a plan's steps do.

use std::sync::Arc;

use serde_json::{Value, json};
use utter_protocol::{ErrorCode, ErrorObject};

use crate::audit::AuditEntry;
use crate::confirm::Door;
use crate::handles::Scope;
use crate::params::{optional_bool, required_str, timeout_ms};
use crate::pipeline::{Author, CommandOptions, Pipeline, Target};
use crate::policy::Provenance;
use crate::runner::Runner;
use crate::supervisor::PluginReport;
use utter_ipc::methods::InvokeParams;

/// The plugin a client names: by id, else the first of that kind.
pub fn find_plugin<'a>(plugins: &'a [PluginReport], name: &str) -> Option<&'a PluginReport> {
    plugins
        .iter()
        .find(|p| p.id == name)
        .or_else(|| plugins.iter().find(|p| p.kind == name))
}

/// Methods whose params must say their provenance explicitly (reference §8.1).
fn needs_explicit_provenance(method: &str) -> bool {
    method == "action.invoke" || method == "host.action" || method.starts_with("input.")
}

impl Runner {
    /// `runner.invoke {plugin, method, params}`: relay one call to one plugin for a client.
    /// `plugin` is an id or a kind; `params` must be an object. `door` asks the client when a
    /// confirmation is needed; `scope` is the client's handle scope; `client` names it in the
    /// audit trail.
    ///
    /// Acting methods pass the one gate (`action.invoke`, `host.action` and `input.*` always,
    /// with an explicit `params.provenance`; every other method unless the plugin's
    /// `plugin.describe` lists it as side-effect-free; the older runner checked only
    /// `action.invoke`, reference §12 item 30). Handles in the request become visible to the
    /// plugin, and those in its reply to the client.
    ///
    /// # Errors
    /// `-32602` for bad params (a missing plugin or method, params that are not an object,
    /// arguments that break the op's `args_schema`, naming the field); `-32005` for an unknown
    /// plugin; the gate's `-32003`/`-32006` refusals; the plugin's own error.
    pub async fn invoke(
        self: &Arc<Self>,
        params: InvokeParams,
        door: Door,
        scope: Scope,
        client: &str,
    ) -> Result<Value, ErrorObject> {
        let InvokeParams {
            plugin,
            method,
            params,
        } = params;
        let (name, method) = (plugin.trim(), method.trim());
        for (key, value) in [("plugin", name), ("method", method)] {
            if value.is_empty() {
                return Err(ErrorObject::invalid_params(format!(
                    "runner.invoke needs params.{key}, a non-empty string"
                )));
            }
        }
        // The handshake, protocol control messages, streams, handles and descriptors are the
        // runner's own business: a relayed stream.subscribe would open a stream nobody
        // tracks or stops (clients subscribe on the socket itself, PROTOCOL.md §10.3).
        if runner_owned(method) {
            return Err(ErrorObject::invalid_params(format!(
                "runner.invoke cannot send {method:?}: the handshake, $/ messages, stream.*, handle.* and fd.pass belong to the runner (use the socket's own stream.subscribe and handle.* methods)"
            )));
        }
        let call_params = match params {
            None | Some(Value::Null) => json!({}),
            Some(v @ Value::Object(_)) => v,
            Some(_) => {
                return Err(ErrorObject::invalid_params(
                    "runner.invoke: params.params must be an object",
                ));
            }
        };
        let supervisor = &self.supervisor;
        let (id, side_effect_free) = match supervisor.is_side_effect_free(name, method) {
            Some(free) => (name.to_owned(), free),
            None => {
                let plugins = self.plugins();
                let id = find_plugin(&plugins, name)
                    .map(|p| p.id.clone())
                    .ok_or_else(|| {
                        ErrorObject::new(
                            ErrorCode::CapabilityMissing,
                            format!(
                                "no plugin {name:?} (neither an id nor a kind); see runner.status"
                            ),
                        )
                    })?;
                let free = supervisor.is_side_effect_free(&id, method).unwrap_or(false);
                (id, free)
            }
        };
        let acting = needs_explicit_provenance(method) || !side_effect_free;
        // A refusal before the gate is still a gate decision: it goes in the audit trail.
        let refused = |e: ErrorObject| {
            if acting {
                let op = call_params
                    .get("op")
                    .and_then(Value::as_str)
                    .unwrap_or(method);
                self.audit_trail().record(
                    AuditEntry::new(
                        &format!("runner.invoke {method} on {id} from {client}"),
                        op,
                        call_params.get("args").unwrap_or(&Value::Null),
                        Provenance::from_value(call_params.get("provenance"))
                            .unwrap_or(Provenance::Screen),
                        "denied",
                    )
                    .code(e.code)
                    .by("policy")
                    .plugin(id.clone()),
                );
            }
            e
        };
        if needs_explicit_provenance(method) && call_params.get("provenance").is_none() {
            return Err(refused(ErrorObject::new(
                ErrorCode::Denied,
                format!(
                    "runner.invoke of {method} needs params.provenance: \"user\" for the person's own request, or where the values came from (screen, a11y, ocr, title, clipboard)"
                ),
            )));
        }
        // The plugin's own callbacks while serving this call run with the client's declared
        // provenance, so an untrusted relay cannot be laundered through `host.action`.
        let provenance = Provenance::from_value(call_params.get("provenance")).map_err(&refused)?;
        let timeout_ms = timeout_ms(&call_params);
        // Handles in the request become visible to the plugin (it learns their names only
        // from this call), and those in its reply to the client, except those the client
        // named without seeing them.
        let plugin_scope = Scope::Plugin(id.clone());
        let unseen = self
            .handles
            .as_ref()
            .map(|store| {
                store.pass(&scope, &plugin_scope, &call_params);
                store.unseen(&scope, &call_params)
            })
            .unwrap_or_default();
        let result = if acting {
            let relayed = self
                .gated_relay(
                    &id,
                    method,
                    call_params.clone(),
                    provenance,
                    timeout_ms,
                    door,
                    client,
                )
                .await;
            match relayed {
                Ok(v) => v,
                Err(Refusal::BeforeGate(e)) => return Err(refused(e)),
                Err(Refusal::Gate(e)) => return Err(e),
            }
        } else {
            let timeout = supervisor.effective_timeout(timeout_ms);
            supervisor
                .call_as(&id, method, call_params, timeout, provenance)
                .await?
        };
        if let Some(store) = &self.handles {
            crate::runner::host::adopt_handles(supervisor, store, &id, &plugin_scope, &result)
                .await;
            store.pass_except(&plugin_scope, &scope, &result, &unseen);
        }
        Ok(result)
    }

    /// An acting relay through the one gate. What the gate sees is what the plugin gets:
    /// for `action.invoke` and `host.action` the op is `params.op` with `params.args`, and
    /// the params may hold nothing else but the envelope (`provenance`, `dry_run`,
    /// `confirm`, `timeout_ms`); for `input.*` the op is `input`, for any other method the
    /// method itself, and the arguments are all of the params less the envelope.
    #[allow(clippy::too_many_arguments)]
    async fn gated_relay(
        self: &Arc<Self>,
        plugin: &str,
        method: &str,
        params: Value,
        provenance: Provenance,
        timeout_ms: Option<u64>,
        door: Door,
        client: &str,
    ) -> Result<Value, Refusal> {
        let before = Refusal::BeforeGate;
        let (op, args) = if method == "action.invoke" || method == "host.action" {
            let op = required_str(&params, "op", method)
                .map_err(before)?
                .to_owned();
            let extra: Vec<String> = params
                .as_object()
                .into_iter()
                .flat_map(|m| m.keys())
                .filter(|k| k.as_str() != "op" && k.as_str() != "args")
                .filter(|k| !ENVELOPE.contains(&k.as_str()))
                .map(|k| format!("{k:?}"))
                .collect();
            if !extra.is_empty() {
                return Err(before(ErrorObject::invalid_params(format!(
                    "runner.invoke of {method}: params may hold only op, args and {}; not {}",
                    ENVELOPE.join(", "),
                    extra.join(", ")
                ))));
            }
            (op, params.get("args").cloned().unwrap_or_else(|| json!({})))
        } else if method.starts_with("input.") {
            ("input".to_owned(), without_envelope(&params))
        } else {
            (method.to_owned(), without_envelope(&params))
        };
        let confirm_requested = optional_bool(&params, "confirm").map_err(before)?;
        // Only `action.invoke` has a protocol meaning for `dry_run` (PROTOCOL.md §8).
        let dry_run =
            method == "action.invoke" && optional_bool(&params, "dry_run").map_err(before)?;
        let options = CommandOptions {
            dry_run,
            timeout_ms,
            provenance: Some(provenance),
            ..CommandOptions::default()
        };
        // A caller's timeout also bounds the confirmation wait.
        let confirmer =
            self.confirmer(Some(door), timeout_ms.map(std::time::Duration::from_millis));
        let policy = || self.policy();
        let label = format!("runner.invoke {method} on {plugin} from {client}");
        let target = Target::Relay {
            plugin: plugin.to_owned(),
            method: method.to_owned(),
            params,
        };
        let step = Pipeline {
            supervisor: &self.supervisor,
            policy: &policy,
            confirmer: &confirmer,
            audit: Some(self.audit_trail()),
            context: &self.context,
            input_rate: &self.input_rate,
            history: None,
            dictation: None,
        }
        .run_one(
            &label,
            &op,
            &args,
            provenance,
            confirm_requested,
            target,
            Author::Person,
            &options,
        )
        .await;
        // The plugin answered: its answer goes back as it is (an `action.invoke` result with
        // `ok: false` included); otherwise the gate's refusal or the call's error.
        match (step.result, step.error) {
            (Some(value), _) => Ok(value),
            (None, Some(e)) => Err(Refusal::Gate(e)),
            (None, None) => Err(Refusal::Gate(ErrorObject::internal(
                "runner.invoke: the step neither ran nor failed",
            ))),
        }
    }
}

/// Why an acting relay did not reach the plugin: refused before the gate ran (bad params;
/// the caller audits it), or by the gate (which audited it).
enum Refusal {
    BeforeGate(ErrorObject),
    Gate(ErrorObject),
}

/// The members of an acting method's params the runner reads itself.
const ENVELOPE: &[&str] = &["provenance", "confirm", "timeout_ms", "dry_run"];

/// Methods only the runner sends or serves.
fn runner_owned(method: &str) -> bool {
    method == "protocol.hello"
        || method.starts_with("$/")
        || method.starts_with("stream.")
        || method.starts_with("handle.")
        || method == "fd.pass"
}

/// A method's params without the envelope members the runner reads itself.
fn without_envelope(params: &Value) -> Value {
    let mut args = params.as_object().cloned().unwrap_or_default();
    for key in ENVELOPE {
        args.remove(*key);
    }
    Value::Object(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_are_strict_and_envelopes_are_not_arguments() {
        assert!(!optional_bool(&json!({}), "dry_run").unwrap());
        assert!(!optional_bool(&json!({"dry_run": null}), "dry_run").unwrap());
        assert!(optional_bool(&json!({"dry_run": true}), "dry_run").unwrap());
        assert_eq!(
            optional_bool(&json!({"dry_run": "false"}), "dry_run")
                .unwrap_err()
                .code,
            -32602
        );
        assert_eq!(
            without_envelope(
                &json!({"text": "hi", "provenance": "user", "confirm": true, "timeout_ms": 5})
            ),
            json!({"text": "hi"})
        );
        assert_eq!(timeout_ms(&json!({"timeout_ms": 0})), None);
        assert_eq!(timeout_ms(&json!({"timeout_ms": -5})), None);
        assert_eq!(timeout_ms(&json!({"timeout_ms": 250})), Some(250));
    }
}
