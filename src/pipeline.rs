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
    let mut results = Vec::with_capacity(steps.len());
    for (i, step) in steps.iter().enumerate() {
        results.push(
            run_step(
                supervisor, policy, confirmer, i, step, provenance, options, timeout,
            )
            .await,
        );
    }
    Ok(CommandOutcome {
        utterance: utterance.to_owned(),
        dry_run: options.dry_run,
        plan,
        results,
    })
}

#[allow(clippy::too_many_arguments)]
async fn run_step(
    supervisor: &Supervisor,
    policy: &Policy,
    confirmer: &Confirmer,
    index: usize,
    step: &Value,
    command_provenance: Provenance,
    options: &CommandOptions,
    timeout: std::time::Duration,
) -> StepResult {
    let op = step
        .get("op")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let args = step.get("args").cloned().unwrap_or_else(|| json!({}));
    // A step's provenance is the least trusted of the command's and the step's own; a step
    // word we do not know counts as untrusted (fail closed).
    let step_provenance =
        Provenance::from_value(step.get("provenance")).unwrap_or(Provenance::Screen);
    let provenance = command_provenance.least_trusted(step_provenance);
    let mut result = StepResult {
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
    let fail = |mut r: StepResult, e: ErrorObject| {
        r.detail = e.message.clone();
        r.error = Some(e);
        r
    };
    if op.is_empty() {
        return fail(
            result,
            ErrorObject::invalid_params(format!("step {index} has no \"op\" string: {step}")),
        );
    }
    let op_name = normalise_op(&op).to_owned();
    let confirm_requested = step
        .get("confirm")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let decision: Decision = match policy.check(&op_name, &args, provenance, confirm_requested) {
        Ok(d) => d,
        Err(e) => return fail(result, e),
    };
    result.needs_confirm = decision.needs_confirm;
    if decision.needs_confirm && !options.dry_run {
        let request = ConfirmRequest {
            op: op_name.clone(),
            args: args.clone(),
            provenance,
            summary: decision.summary.clone(),
        };
        if !confirmer(request.clone()).await {
            return fail(
                result,
                ErrorObject::new(
                    ErrorCode::Denied,
                    format!("confirmation denied: {}", decision.summary),
                )
                .with_data(serde_json::to_value(&request).unwrap_or(Value::Null)),
            );
        }
    }
    let Some(plugin) = supervisor.find_action(&op_name).await else {
        return fail(
            result,
            ErrorObject::new(
                ErrorCode::CapabilityMissing,
                format!("no running action plugin offers the op {op_name:?}"),
            ),
        );
    };
    result.plugin = Some(plugin.clone());
    let params = json!({
        "op": op_name,
        "args": args,
        "provenance": provenance.as_str(),
        "dry_run": options.dry_run,
    });
    match supervisor
        .call(&plugin, "action.invoke", params, timeout)
        .await
    {
        Ok(value) => {
            result.ok = value.get("ok").and_then(Value::as_bool).unwrap_or(true);
            result.detail = value
                .get("detail")
                .or_else(|| value.get("message"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            result.result = Some(value);
            result
        }
        Err(e) => fail(result, e),
    }
}
