//! The command pipeline: utterance → `router.plan` → policy → `action.invoke`, one result per
//! step (PROTOCOL.md §8, §9).
//!
//! Step failures are reported inside the results, never as an error of the whole command, so a
//! client always sees what happened to each step. Steps run in order; a failed step does not
//! stop the ones after it.

use serde::Serialize;
use serde_json::{Value, json};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use utter_protocol::{ErrorCode, ErrorObject};

use crate::policy::{Decision, Policy, Provenance, normalise_op};
use crate::supervisor::Supervisor;

/// Options of one command.
#[derive(Debug, Clone, Default)]
pub struct CommandOptions {
    /// Ask the action plugins to say what they would do, without doing it.
    pub dry_run: bool,
    /// Per-call timeout in ms (each plugin call; clamped to 60 000); `None` = `rpc_timeout_ms`.
    pub timeout_ms: Option<u64>,
    /// Provenance of the utterance (default `user`).
    pub provenance: Option<Provenance>,
    /// Context passed to the router.
    pub context: Option<Value>,
}

/// A confirmation request: the op, its exact arguments and a summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfirmRequest {
    /// The op.
    pub op: String,
    /// The exact arguments that will run.
    pub args: Value,
    /// The step's provenance.
    pub provenance: Provenance,
    /// One human line.
    pub summary: String,
}

/// Something that can ask a person. Returns `true` only for an explicit yes.
pub type Confirmer =
    Arc<dyn Fn(ConfirmRequest) -> Pin<Box<dyn Future<Output = bool> + Send>> + Send + Sync>;

/// A confirmer that always says no (used when nobody can answer).
pub fn deny_all() -> Confirmer {
    Arc::new(|_| Box::pin(async { false }))
}

/// The plan the router made.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// The router plugin's id.
    pub router: String,
    /// The rule or reason the router gives, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// A message from the router (e.g. "no rule matched").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The steps, as the router returned them.
    pub steps: Vec<Value>,
}

/// The outcome of one step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepResult {
    /// The op.
    pub op: String,
    /// Whether it succeeded.
    pub ok: bool,
    /// What happened (or would happen, in a dry run).
    pub detail: String,
    /// The args the step ran with.
    pub args: Value,
    /// The provenance the policy saw.
    pub provenance: Provenance,
    /// The action plugin that ran it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    /// The action plugin's whole result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// The error, when `ok` is false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorObject>,
    /// Whether a confirmation was (or, in a dry run, would be) needed.
    pub needs_confirm: bool,
}

/// The outcome of a command: `{utterance, dry_run, plan, results}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommandOutcome {
    /// The utterance as given.
    pub utterance: String,
    /// Whether this was a dry run.
    pub dry_run: bool,
    /// The router's plan.
    pub plan: Plan,
    /// One result per step.
    pub results: Vec<StepResult>,
}

impl CommandOutcome {
    /// True when there were steps and every one succeeded.
    pub fn all_ok(&self) -> bool {
        !self.results.is_empty() && self.results.iter().all(|r| r.ok)
    }
}

/// Run one utterance through the router and the action plugins.
///
/// # Errors
/// `-32602` for a blank utterance; `-32005` when no router is running; the router's error
/// (`-32000`, `-32001`, its own codes) when planning fails.
pub async fn run_command(
    supervisor: &Supervisor,
    policy: &Policy,
    confirmer: &Confirmer,
    utterance: &str,
    options: &CommandOptions,
) -> Result<CommandOutcome, ErrorObject> {
    if utterance.trim().is_empty() {
        return Err(ErrorObject::invalid_params(
            "the utterance is empty; say what to do, e.g. \"open youtube\"",
        ));
    }
    let provenance = options.provenance.unwrap_or(Provenance::User);
    let timeout = supervisor.effective_timeout(options.timeout_ms);
    let router = supervisor.find_router().ok_or_else(|| {
        ErrorObject::new(
            ErrorCode::CapabilityMissing,
            "no router plugin is running (one providing router.plan@1); see `utter plugins`",
        )
    })?;
    let mut params = json!({"utterance": utterance, "provenance": provenance.as_str()});
    if let Some(context) = &options.context {
        params["context"] = context.clone();
    }
    let planned = supervisor
        .call(&router, "router.plan", params, timeout)
        .await?;
    let steps = planned
        .get("steps")
        .and_then(Value::as_array)
        .cloned()
        .ok_or_else(|| {
            ErrorObject::plugin(format!(
                "router {router:?} returned no \"steps\" array: {planned}"
            ))
        })?;
    let plan = Plan {
        router,
        rule: planned
            .get("rule")
            .and_then(Value::as_str)
            .map(str::to_owned),
        message: planned
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned),
        steps: steps.clone(),
    };
    // Every step passes the gates before any step runs: a plan with a refused step runs
    // nothing (a partly executed plan is worse than none).
    let prepared: Vec<Result<Prepared, Box<StepResult>>> = steps
        .iter()
        .enumerate()
        .map(|(i, step)| prepare_step(policy, i, step, provenance))
        .collect();
    let refused: Vec<usize> = prepared
        .iter()
        .enumerate()
        .filter(|(_, p)| p.is_err())
        .map(|(i, _)| i + 1)
        .collect();
    let mut results = Vec::with_capacity(steps.len());
    if !refused.is_empty() {
        let which = refused
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        for p in prepared {
            results.push(match p {
                Err(failed) => *failed,
                Ok(step) => step.into_result().failed(ErrorObject::new(
                    ErrorCode::Denied,
                    format!("not run: step {which} of this plan was refused, so no step ran"),
                )),
            });
        }
    } else {
        for step in prepared.into_iter().flatten() {
            results.push(run_step(supervisor, confirmer, step, options, timeout).await);
        }
    }
    Ok(CommandOutcome {
        utterance: utterance.to_owned(),
        dry_run: options.dry_run,
        plan,
        results,
    })
}

/// A step that passed the gates.
struct Prepared {
    op: String,
    args: Value,
    provenance: Provenance,
    decision: Decision,
}

impl Prepared {
    fn into_result(self) -> StepResult {
        StepResult {
            op: self.op,
            ok: false,
            detail: String::new(),
            args: self.args,
            provenance: self.provenance,
            plugin: None,
            result: None,
            error: None,
            needs_confirm: self.decision.needs_confirm,
        }
    }
}

impl StepResult {
    fn failed(mut self, error: ErrorObject) -> StepResult {
        self.ok = false;
        self.detail = error.message.clone();
        self.error = Some(error);
        self
    }
}

/// Read one step and run the policy gates on it.
fn prepare_step(
    policy: &Policy,
    index: usize,
    step: &Value,
    command_provenance: Provenance,
) -> Result<Prepared, Box<StepResult>> {
    let op = step
        .get("op")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let args = step.get("args").cloned().unwrap_or_else(|| json!({}));
    let step_provenance = Provenance::from_value(step.get("provenance"));
    // A step's provenance is the least trusted of the command's and the step's own.
    let provenance =
        command_provenance.least_trusted(*step_provenance.as_ref().unwrap_or(&Provenance::Screen));
    let blank = StepResult {
        op: op.clone(),
        ok: false,
        detail: String::new(),
        args: args.clone(),
        provenance,
        plugin: None,
        result: None,
        error: None,
        needs_confirm: false,
    };
    if !step.is_object() || op.is_empty() {
        return Err(Box::new(blank.failed(ErrorObject::invalid_params(
            format!(
                "step {} is not an object with an \"op\" string: {step}",
                index + 1
            ),
        ))));
    }
    if let Err(e) = step_provenance {
        return Err(Box::new(blank.failed(ErrorObject::invalid_params(
            format!("step {}: {}", index + 1, e.message),
        ))));
    }
    let op = normalise_op(&op).to_owned();
    let confirm_requested = step
        .get("confirm")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    match policy.check(&op, &args, provenance, confirm_requested) {
        Ok(decision) => Ok(Prepared {
            op,
            args,
            provenance,
            decision,
        }),
        Err(e) => Err(Box::new(blank.failed(e))),
    }
}

/// Confirm (when needed), find the action plugin, invoke, and read its result.
async fn run_step(
    supervisor: &Supervisor,
    confirmer: &Confirmer,
    step: Prepared,
    options: &CommandOptions,
    timeout: std::time::Duration,
) -> StepResult {
    let request = ConfirmRequest {
        op: step.op.clone(),
        args: step.args.clone(),
        provenance: step.provenance,
        summary: step.decision.summary.clone(),
    };
    let needs_confirm = step.decision.needs_confirm;
    let op = step.op.clone();
    let args = step.args.clone();
    let provenance = step.provenance;
    let mut result = step.into_result();
    if needs_confirm && !options.dry_run && !confirmer(request.clone()).await {
        return result.failed(
            ErrorObject::new(
                ErrorCode::Denied,
                format!(
                    "not confirmed: {} (denied, timed out, or nobody could answer)",
                    request.summary
                ),
            )
            .with_data(serde_json::to_value(&request).unwrap_or(Value::Null)),
        );
    }
    let Some(plugin) = supervisor.find_action(&op).await else {
        return result.failed(ErrorObject::new(
            ErrorCode::CapabilityMissing,
            format!("no running action plugin offers the op {op:?}"),
        ));
    };
    result.plugin = Some(plugin.clone());
    let params = json!({
        "op": op,
        "args": args,
        "provenance": provenance.as_str(),
        "dry_run": options.dry_run,
    });
    match supervisor
        .call(&plugin, "action.invoke", params, timeout)
        .await
    {
        Ok(value) => match read_action_result(&value) {
            Ok((ok, detail)) => {
                result.ok = ok;
                result.detail = detail;
                result.result = Some(value);
                result
            }
            Err(e) => {
                result.result = Some(value);
                result.failed(e)
            }
        },
        Err(e) => result.failed(e),
    }
}

/// An `action.invoke` result must be an object; `ok` (a boolean, default true) and `detail`
/// (or `message`, a string) are read from it (PROTOCOL.md §8).
fn read_action_result(value: &Value) -> Result<(bool, String), ErrorObject> {
    let Some(obj) = value.as_object() else {
        return Err(ErrorObject::plugin(format!(
            "malformed action.invoke result (expected an object {{ok, detail}}): {value}"
        )));
    };
    let ok = match obj.get("ok") {
        None => true,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(ErrorObject::plugin(format!(
                "malformed action.invoke result: \"ok\" must be a boolean, got {other}"
            )));
        }
    };
    let detail = obj
        .get("detail")
        .or_else(|| obj.get("message"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    Ok((ok, detail))
}
