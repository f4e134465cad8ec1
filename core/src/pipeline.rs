//! The command pipeline: utterance → `router.plan` → policy → `action.invoke`, one result per
//! step (PROTOCOL.md §8, §9).
//!
//! Step failures are reported inside the results, never as an error of the whole command, so a
//! client always sees what happened to each step. Steps run in order; a failed step does not
//! stop the ones after it.
//!
//! When the router offers `candidates` instead of steps, an untrusted chooser (`llm.choose`,
//! `perception.choose`) picks one by id and the runner runs the candidate it holds, checked by
//! digest; a chooser that sends back anything else fails the command with `-32006`. A step that
//! needs a confirmation is asked with its digest; after the yes, every gate runs again with the
//! policy in force then, and the desktop context is read again: a target that disappeared or a
//! focus that moved asks again (at most [`MAX_CONFIRM_ROUNDS`] times).

use serde_json::{Value, json};
use utter_protocol::{ErrorCode, ErrorObject};

use crate::audit::{Audit, AuditEntry};
use crate::confirm::Resolution;
use crate::context::Context;
use crate::history::UndoRun;
use crate::policy::{Decision, Policy, Provenance, normalise_op, step_digest};
use crate::supervisor::Supervisor;

pub use utter_ipc::command::{CommandOutcome, ConfirmRequest, Plan, StepResult};

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
    /// Longest wait for each confirmation, in ms (else `timeout_ms` when given, else the
    /// runner's `confirm_timeout_ms`). D-Bus callers get 20 000, under the bus's 25 s reply
    /// timeout, so nothing is approved after the caller gave up.
    pub confirm_timeout_ms: Option<u64>,
    /// The decision head's tiers sent to the router (`router.plan`'s `decide`); the runner
    /// fills them from `[decide]`.
    pub decide: Option<crate::config::DecideSection>,
    /// Heard by the voice loop while dictation is on: the router plans it as text to type
    /// (`router.plan`'s `dictation`).
    pub dictation: bool,
}

pub use crate::confirm::Confirmer;

/// Where a step goes once it passed the gate.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// `action.invoke {op, args, provenance, dry_run}` on the plugin that offers the op: a
    /// plan's step, a plugin's `host.action`.
    Action,
    /// A client's `runner.invoke`: `method` with exactly `params` to plugin `plugin` (its
    /// `action.capabilities` schema applies when `method` is `action.invoke`).
    Relay {
        /// The plugin's id.
        plugin: String,
        /// The method, e.g. `action.invoke` or `input.key`.
        method: String,
        /// The params sent as they are.
        params: Value,
    },
}

/// How many times a step is asked again when its context changed during the confirmation.
pub const MAX_CONFIRM_ROUNDS: usize = 3;

/// The longest utterance a command takes, in bytes (UTF-8). A spoken command is a few
/// dozen bytes; the bound keeps one request from filling the event backlog and every
/// subscriber's queue with megabytes.
pub const MAX_UTTERANCE_BYTES: usize = 64 * 1024;

/// The ops the planner fallback may propose (`llm.plan`'s `ops`): no `terminal`, no `input`.
pub const PLANNER_OPS: &[&str] = &[
    "open_url",
    "launch_app",
    "focus_app",
    "media",
    "key",
    "type_text",
    "scroll",
];

/// Ops whose effect depends on which window has the focus: when the focus moves while the
/// person is being asked, the approval no longer describes what would happen.
pub const FOCUS_DEPENDENT_OPS: &[&str] = &[
    "key",
    "type_text",
    "input",
    "click_element",
    "click_point",
    "scroll",
    "close_app",
];

/// Ops whose arguments are a point of the screen. When a plugin writes one (`host.action`,
/// e.g. screen grounding's click on a vision model's answer), the point came from what the
/// plugin saw, not from the person: the gate asks every time, names the window it lands in,
/// and refuses when that window is not what is at the point, or the layout or focus moved
/// while asking ([`point_target`]).
pub const POINT_OPS: &[&str] = &["click_point", "pointer_move"];

/// Who wrote a step's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Author {
    /// The person: a client's request (`runner.invoke`).
    Person,
    /// The router, planning the person's words (a plan's step, a candidate it prepared).
    Router {
        /// The router's id.
        plugin: String,
    },
    /// A plugin, through `host.action`, while the runner had it serving `serving` (the
    /// policy's summary of the step it was asked to do, when the runner can tell).
    Plugin {
        /// The plugin's id.
        plugin: String,
        /// What it was serving.
        serving: Option<String>,
    },
}

impl Author {
    /// Whether a plugin (a router included: a point is never words the person said) wrote a
    /// point the gate must place before anything acts on it.
    fn wrote_a_point(&self, op: &str) -> bool {
        !matches!(self, Author::Person) && POINT_OPS.contains(&op)
    }
}

/// Everything one command needs: the supervisor, a policy *provider* (read again after every
/// confirmation, so a reload in between applies), the confirmer, and the audit trail.
pub struct Pipeline<'a> {
    /// The plugins.
    pub supervisor: &'a Supervisor,
    /// The policy in force right now.
    pub policy: &'a (dyn Fn() -> Policy + Send + Sync),
    /// Asks a person.
    pub confirmer: &'a Confirmer,
    /// Where decisions are recorded.
    pub audit: Option<&'a Audit>,
    /// The desktop context reader.
    pub context: &'a Context,
    /// The input rate limit shared by every acting path.
    pub input_rate: &'a crate::rate::InputRate,
    /// The journal a command that acted is kept in, and "undo that" reads (`None`: neither).
    pub history: Option<&'a crate::history::History>,
    /// The dictation mode that op `dictation` switches (`None`: no mode here).
    pub dictation: Option<&'a crate::dictation::Dictation>,
}

/// Check a chooser's answer (`llm.choose`, `perception.choose`) against the ids it was
/// offered: it must be an object with a `choice_id` among `ids`, and besides it only the
/// documented numeric confidence: `probability` (a number from 0 to 1) and `distribution`
/// (offered id → a number from 0 to 1, summing to at most 1). Anything else, above all a
/// structure with an op or arguments, is refused. Returns the chosen id, or why the answer
/// is refused (for the caller's `-32006`).
pub fn check_choice(answer: &Value, ids: &[&str]) -> Result<String, String> {
    let Some(map) = answer.as_object() else {
        return Err("did not answer an object".into());
    };
    let known = |k: &String| ids.contains(&k.as_str());
    let share = |p: &Value| p.as_f64().is_some_and(|p| (0.0..=1.0).contains(&p));
    let extra = map.iter().find(|(k, v)| match k.as_str() {
        "choice_id" => false,
        "probability" => !share(v),
        "distribution" => !v.as_object().is_some_and(|d| {
            d.iter().all(|(id, p)| known(id) && share(p))
                && d.values().filter_map(Value::as_f64).sum::<f64>() <= 1.0 + 1e-3
        }),
        _ => true,
    });
    if let Some((extra, _)) = extra {
        return Err(format!("sent back {extra:?}"));
    }
    let choice = map.get("choice_id").and_then(Value::as_str).unwrap_or("");
    if !ids.contains(&choice) {
        return Err(format!("chose {choice:?}, which is no prepared candidate"));
    }
    Ok(choice.to_owned())
}

/// Add the chooser's pick to the plan's message: "…; the chooser picked open niri wiki
/// (0.78)".
fn note_pick(planned: &mut Value, chosen: &Chosen) {
    let p = chosen
        .probability
        .map(|p| format!(" ({p:.2})"))
        .unwrap_or_default();
    let pick = format!("the chooser picked {}{p}", chosen.summary);
    planned["message"] = match planned.get("message").and_then(Value::as_str) {
        Some(m) if !m.is_empty() => json!(format!("{m}; {pick}")),
        _ => json!(pick),
    };
}

/// Rewrite a plan's `message` and its `escalate.message`, where it has them, with `amend`.
fn amend_messages(planned: &mut Value, amend: impl Fn(&str) -> String) {
    for pointer in ["/message", "/escalate/message"] {
        if let Some(Value::String(m)) = planned.pointer_mut(pointer) {
            *m = amend(m);
        }
    }
}

/// Whether a plan's step is `op` (the runner serves `undo` and `dictation` itself).
fn has_op(step: &Value, op: &str) -> bool {
    step.get("op").and_then(Value::as_str) == Some(op)
}

/// The result of a step the runner answers itself (`undo`, `dictation`) before any plugin
/// has it: the step's op and args (`{}` when it has none), as the router wrote them.
fn runner_step_result(step: &Value, provenance: Provenance, router: &str) -> StepResult {
    Step {
        op: step
            .get("op")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        args: step.get("args").cloned().unwrap_or_else(|| json!({})),
        provenance,
        confirm_requested: false,
        target: Target::Action,
        author: Author::Router {
            plugin: router.to_owned(),
        },
    }
    .blank_result()
}

/// The outcome of a plan the runner answered itself, no plugin having run: `message`, else
/// the router's own.
fn answered(
    utterance: &str,
    options: &CommandOptions,
    router: &str,
    planned: &Value,
    message: Option<String>,
    steps: Vec<Value>,
    results: Vec<StepResult>,
) -> CommandOutcome {
    let said = |key: &str| planned.get(key).and_then(Value::as_str).map(str::to_owned);
    CommandOutcome {
        utterance: utterance.to_owned(),
        dry_run: options.dry_run,
        plan: Plan {
            router: router.to_owned(),
            rule: said("rule"),
            message: message.or_else(|| said("message")),
            steps,
            escalate: None,
        },
        results,
    }
}

/// What a chooser picked: the held candidate's step and how it was picked.
struct Chosen {
    step: Value,
    selected_by: Value,
    /// The chooser's `probability`, when it sent one.
    probability: Option<f64>,
    /// The candidate's summary ("open GitHub").
    summary: String,
}

/// A candidate the router prepared, with the digest it is held under.
struct Candidate {
    id: String,
    step: Value,
    op: String,
    args: Value,
    provenance: Provenance,
    digest: String,
}

impl Pipeline<'_> {
    fn record(&self, entry: AuditEntry) {
        if let Some(audit) = self.audit {
            audit.record(entry);
        }
    }

    /// Run one utterance: plan, choose among candidates (when the router offers them), pass
    /// every step through the gates, then confirm and run each.
    ///
    /// # Errors
    /// `-32602` for a blank utterance or one longer than [`MAX_UTTERANCE_BYTES`]; `-32005`
    /// when no router (or no chooser the plan asks
    /// for) is running; `-32006` when a chooser answers anything but the id of a prepared
    /// candidate; the router's error when planning fails.
    pub async fn run(
        &self,
        utterance: &str,
        options: &CommandOptions,
    ) -> Result<CommandOutcome, ErrorObject> {
        if utterance.trim().is_empty() {
            return Err(ErrorObject::invalid_params(
                "the utterance is empty; say what to do, e.g. \"open youtube\"",
            ));
        }
        if utterance.len() > MAX_UTTERANCE_BYTES {
            return Err(ErrorObject::invalid_params(format!(
                "the utterance is {} bytes long; at most {MAX_UTTERANCE_BYTES} are taken (type long text from a file or the clipboard instead)",
                utterance.len()
            )));
        }
        let provenance = options.provenance.unwrap_or(Provenance::User);
        let supervisor = self.supervisor;
        let timeout = supervisor.effective_timeout(options.timeout_ms);
        let router = supervisor.find_router().ok_or_else(|| {
            ErrorObject::new(
                ErrorCode::CapabilityMissing,
                "no router plugin is running (one providing router.plan@1); see `utter plugins`",
            )
        })?;
        // The command is planned in the desktop context of this moment; a client's own
        // `context` (a script's, a test's) is used as it is instead.
        let context = match &options.context {
            Some(given) => Some(given.clone()),
            None => self
                .context
                .read(supervisor, timeout, None)
                .await
                .snapshot()
                .cloned(),
        };
        let mut params = json!({"utterance": utterance, "provenance": provenance.as_str()});
        if let Some(context) = &context {
            params["context"] = context.clone();
        }
        // The voice loop decided when it heard the words; the mode switched since changes
        // nothing about them.
        let dictating = options.dictation && self.dictation.is_some();
        if let (true, Some(dictation)) = (dictating, self.dictation) {
            params["dictation"] = json!({"after": dictation.after()});
        }
        if let Some(decide) = &options.decide {
            params["decide"] = json!({"act": decide.act, "ask": decide.ask});
            // The router offers near candidates only when a chooser can take them.
            if decide.chooser
                && supervisor
                    .find_provider("llm.choose", "llm.choose")
                    .is_some()
            {
                params["decide"]["chooser"] = json!("llm.choose");
            }
        }
        let planned = supervisor
            .call_as(&router, "router.plan", params, timeout, provenance)
            .await?;
        let offered = planned
            .get("candidates")
            .and_then(Value::as_array)
            .filter(|c| !c.is_empty())
            .cloned();
        let fallback = planned.get("fallback").filter(|f| f.is_object()).cloned();
        let mut planned = planned;
        let mut chosen_step = None;
        let mut selected_by = None;
        let mut fell_back = false;
        if let Some(offered) = offered {
            let chosen = self
                .choose(utterance, &planned, &offered, provenance, options, timeout)
                .await;
            let floor = options.decide.map_or(0.0, |d| d.chooser_min);
            // The fallback stands in for a chooser that failed or is unsure; a refusal is a
            // chooser misbehaving, and then nothing runs, not even the fallback.
            let why = match (&chosen, &fallback) {
                (_, None) => None,
                (Err(e), Some(_)) if e.code == ErrorCode::UntrustedArgument.code() => None,
                (Err(e), Some(_)) => Some(format!("the chooser failed ({})", e.message)),
                (Ok(c), Some(_)) => c.probability.filter(|p| *p < floor).map(|p| {
                    format!(
                        "the chooser was unsure ({} at {p:.2}, below [decide] chooser_min {floor})",
                        c.summary
                    )
                }),
            };
            match (why, fallback) {
                (Some(why), Some(fallback)) => {
                    tracing::info!(%why, "the plan's fallback is used");
                    planned = fallback;
                    amend_messages(&mut planned, |m| format!("{why}; {m}"));
                    fell_back = true;
                }
                _ => {
                    let chosen = chosen?;
                    note_pick(&mut planned, &chosen);
                    chosen_step = Some(chosen.step);
                    selected_by = Some(chosen.selected_by);
                }
            }
        }
        let steps = match chosen_step {
            Some(step) => vec![step],
            // A fallback may be an escalation alone.
            None if fell_back => planned
                .get("steps")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            None => planned
                .get("steps")
                .and_then(Value::as_array)
                .cloned()
                .ok_or_else(|| {
                    ErrorObject::plugin(format!(
                        "router {router:?} returned no \"steps\" array: {planned}"
                    ))
                })?,
        };
        // Dictated words are never given to the planner to make a command of.
        let (steps, planned) = if steps.is_empty() && selected_by.is_none() && !dictating {
            self.propose(utterance, steps, planned, provenance, options, timeout)
                .await
        } else {
            (steps, planned)
        };
        // "undo that": the runner turns the router's `undo` step into the inverse steps of
        // the journal's latest commands, which then pass the gate like any step. One undo
        // at a time, from choosing what it undoes until that is recorded.
        let _undoing = match self.history {
            Some(history) if steps.iter().any(|s| has_op(s, "undo")) => {
                Some(history.undo_guard().await)
            }
            _ => None,
        };
        let (steps, undo_run, undo_message) = match self
            .expand_undo(steps, context.as_ref(), provenance, dictating)
            .await
        {
            Ok(expanded) => expanded,
            Err((steps, why)) => {
                let step = steps
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| json!({"op": "undo"}));
                let failed = runner_step_result(&step, provenance, &router);
                self.record(
                    AuditEntry::new(utterance, "undo", &failed.args, provenance, "denied")
                        .code(ErrorCode::PluginError.code())
                        .by("undo"),
                );
                let failed = failed.failed(ErrorObject::plugin(why.clone()));
                return Ok(answered(
                    utterance,
                    options,
                    &router,
                    &planned,
                    Some(why),
                    vec![step],
                    vec![failed],
                ));
            }
        };
        // "start dictation", "stop dictation": the runner's own mode, switched here, alone
        // in its plan, by the person's own words only.
        if steps.len() > 1 && steps.iter().any(|s| has_op(s, "dictation")) {
            let e = ErrorObject::new(
                ErrorCode::Denied,
                "\"start dictation\" and \"stop dictation\" are commands of their own; say them alone",
            );
            let results = steps
                .iter()
                .map(|s| runner_step_result(s, provenance, &router).failed(e.clone()))
                .collect();
            return Ok(answered(
                utterance,
                options,
                &router,
                &planned,
                Some(e.message),
                steps,
                results,
            ));
        }
        if let [step] = steps.as_slice()
            && has_op(step, "dictation")
        {
            let result = self.switch_dictation(utterance, step, provenance, &router, options);
            return Ok(answered(
                utterance,
                options,
                &router,
                &planned,
                None,
                steps,
                vec![result],
            ));
        }
        let plan = Plan {
            router: router.clone(),
            rule: planned
                .get("rule")
                .and_then(Value::as_str)
                .map(str::to_owned),
            message: undo_message.or_else(|| {
                planned
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            }),
            steps: steps.clone(),
            escalate: planned
                .get("escalate")
                .filter(|e| e.is_object() && steps.is_empty())
                .cloned(),
        };
        // Every step passes the gates before any step runs: a plan with a refused step runs
        // nothing (a partly executed plan is worse than none).
        let policy = (self.policy)();
        let mut prepared: Vec<Result<Prepared, Box<StepResult>>> = Vec::with_capacity(steps.len());
        for (i, step) in steps.iter().enumerate() {
            prepared.push(
                self.prepare_step(
                    &policy,
                    &router,
                    utterance,
                    i,
                    step,
                    provenance,
                    selected_by.clone(),
                )
                .await,
            );
        }
        let refused: Vec<usize> = prepared
            .iter()
            .enumerate()
            .filter(|(_, p)| p.is_err())
            .map(|(i, _)| i + 1)
            .collect();
        let mut results = Vec::with_capacity(steps.len());
        let mut befores = Vec::with_capacity(steps.len());
        if !refused.is_empty() {
            let which = refused
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", ");
            for p in prepared {
                results.push(match p {
                    Err(failed) => *failed,
                    Ok(step) => {
                        let result = step.result();
                        // It passed the gates, and so paid its input events: it runs not.
                        self.input_rate.refund(&result.op, &result.args);
                        result.failed(ErrorObject::new(
                            ErrorCode::Denied,
                            format!(
                                "not run: step {which} of this plan was refused, so no step ran"
                            ),
                        ))
                    }
                });
            }
        } else {
            // Each step sees the context as it is when it runs: after a step that acted, the
            // context is read again before the next one (it may have moved the focus, opened
            // or closed a window).
            let mut current = context;
            let count = prepared.len();
            for (i, step) in prepared.into_iter().flatten().enumerate() {
                befores.push(current.clone());
                let result = self
                    .run_step(utterance, step, options, timeout, current.as_ref())
                    .await;
                let acted = result.ok && !options.dry_run;
                results.push(result);
                if acted && i + 1 < count && options.context.is_none() {
                    current = self
                        .context
                        .read(supervisor, timeout, None)
                        .await
                        .snapshot()
                        .cloned();
                }
            }
        }
        let outcome = CommandOutcome {
            utterance: utterance.to_owned(),
            dry_run: options.dry_run,
            plan,
            results,
        };
        if let Some(history) = self.history {
            history.record(&outcome, &befores, undo_run.as_ref());
        }
        // What dictation typed, for the next phrase's capital and space; "scratch that"
        // that took one back.
        if let (true, Some(dictation), false) = (dictating, self.dictation, options.dry_run) {
            for r in outcome.results.iter().filter(|r| r.ok) {
                match (r.op.as_str(), undo_run.is_some()) {
                    (_, true) => dictation.pop(),
                    ("type_text" | "type_keys", false) => {
                        if let Some(text) = r.args.get("text").and_then(Value::as_str) {
                            dictation.push(text);
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(outcome)
    }

    /// Switch the dictation mode for a plan's one `dictation {on}` step: only the person's
    /// own words do (any other provenance is refused), audited; nothing switches in a dry
    /// run or where there is no mode.
    fn switch_dictation(
        &self,
        utterance: &str,
        step: &Value,
        provenance: Provenance,
        router: &str,
        options: &CommandOptions,
    ) -> StepResult {
        let step_provenance =
            Provenance::from_value(step.get("provenance")).unwrap_or(Provenance::Screen);
        let switch_provenance = provenance.least_trusted(step_provenance);
        let only_on = step
            .get("args")
            .and_then(Value::as_object)
            .is_some_and(|a| a.keys().all(|k| k == "on"));
        let on = step
            .pointer("/args/on")
            .and_then(Value::as_bool)
            .filter(|_| only_on);
        let mut result = runner_step_result(step, provenance, router);
        let decision = if !switch_provenance.is_trusted() {
            "denied"
        } else if on.is_some() && self.dictation.is_some() {
            "allowed"
        } else {
            "denied"
        };
        self.record(
            AuditEntry::new(
                utterance,
                "dictation",
                &result.args,
                switch_provenance,
                decision,
            )
            .by("runner"),
        );
        match (on, self.dictation) {
            _ if !switch_provenance.is_trusted() => {
                result = result.failed(ErrorObject::new(
                    ErrorCode::UntrustedArgument,
                    format!(
                        "dictation is switched by the person's own words only, not by {} content",
                        switch_provenance.as_str()
                    ),
                ));
            }
            (Some(on), Some(dictation)) => {
                if !options.dry_run {
                    if on && let Some(history) = self.history {
                        dictation.begin_at(history.next_id());
                    }
                    dictation.set(on);
                }
                result.ok = true;
                result.verified = Some(!options.dry_run);
                result.detail = match (on, options.dry_run) {
                    (true, false) => "dictation on: what you say is typed into the focused field until you say \"stop dictation\"".to_owned(),
                    (false, false) => "dictation off: what you say is a command again".to_owned(),
                    (true, true) => "would turn dictation on".to_owned(),
                    (false, true) => "would turn dictation off".to_owned(),
                };
            }
            (None, _) => {
                result = result.failed(ErrorObject::invalid_params(
                    "dictation takes one argument, \"on\": true or false",
                ));
            }
            (_, None) => {
                result = result.failed(ErrorObject::plugin(
                    "dictation is the voice loop's mode; this path has none",
                ));
            }
        }
        result
    }

    /// Replace a plan's `undo {count?, otherwise?}` step by the inverse steps of the
    /// journal's latest `count` commands ([`crate::undo`]), or by `otherwise` (a step) when
    /// there is none or the newest is older than [`crate::undo::RECENT_S`]; a plan without
    /// one is returned as it is. Returns the steps, which command each reverses (for the
    /// journal; `None` for a plan with no undo) and the plan's message when it is an undo.
    ///
    /// # Errors
    /// The plan's steps and why nothing can be undone (no journal, nothing left, an op
    /// without an inverse, a window gone, an `undo` beside other steps).
    #[allow(clippy::type_complexity)]
    async fn expand_undo(
        &self,
        steps: Vec<Value>,
        now: Option<&Value>,
        provenance: Provenance,
        dictating: bool,
    ) -> Result<(Vec<Value>, Option<UndoRun>, Option<String>), (Vec<Value>, String)> {
        if !steps.iter().any(|s| has_op(s, "undo")) {
            return Ok((steps, None, None));
        }
        if steps.len() > 1 {
            return Err((
                steps,
                "\"undo\" is a command of its own; say it alone".to_owned(),
            ));
        }
        let Some(history) = self.history else {
            return Err((
                steps,
                "nothing to undo: this path keeps no journal".to_owned(),
            ));
        };
        let count = match steps[0].pointer("/args/count") {
            None | Some(Value::Null) => Some(1),
            Some(n) => n
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .filter(|n| (1..=crate::undo::MAX_UNDO).contains(n)),
        };
        let Some(count) = count else {
            return Err((
                steps,
                format!(
                    "undo's count must be a whole number from 1 to {}",
                    crate::undo::MAX_UNDO
                ),
            ));
        };
        // "undo that" said long after the last command, or with nothing in the journal,
        // means the application in front of the person: the router's `otherwise` step (its
        // undo chord) runs instead, when it gave one.
        let otherwise = steps[0]
            .pointer("/args/otherwise")
            .filter(|o| o.is_object())
            .cloned();
        // "scratch that" in dictation takes back what this dictation typed, nothing before.
        let since = if dictating {
            self.dictation.map_or(0, |d| d.since())
        } else {
            0
        };
        let entries = history.undoable_since(count, since);
        let now_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let stale = match &entries {
            Ok(found) => found
                .first()
                .is_none_or(|e| now_s.saturating_sub(e.time) > crate::undo::RECENT_S),
            Err(_) => true,
        };
        if let (true, Some(otherwise)) = (stale, otherwise) {
            let why = match &entries {
                Ok(_) => format!(
                    "nothing Utter did in the last {} s, so the focused application's own undo",
                    crate::undo::RECENT_S
                ),
                Err(_) => {
                    "nothing Utter did to undo, so the focused application's own undo".to_owned()
                }
            };
            return Ok((
                vec![otherwise],
                Some(UndoRun {
                    reverses: vec![None],
                }),
                Some(why),
            ));
        }
        let entries = match entries {
            Ok(entries) => entries,
            Err(why) => return Err((steps, why)),
        };
        let mut rules = std::collections::HashMap::new();
        for step in entries.iter().flat_map(|e| &e.steps) {
            if !rules.contains_key(&step.op) {
                let spec = self.supervisor.find_action_spec(&step.op).await;
                rules.insert(step.op.clone(), spec.and_then(|(_, s)| s?.undo));
            }
        }
        let rules_of = |op: &str| rules.get(op).cloned().flatten();
        match crate::undo::inverse_steps(&entries, &rules_of, now, provenance) {
            Ok(inverse) => {
                let reverses = inverse.iter().map(|s| Some(s.entry)).collect();
                let message = match entries.as_slice() {
                    [one] => format!(
                        "undo \"{}\"",
                        utter_protocol::text::clip(&one.utterance, 80)
                    ),
                    many => format!("undo the last {} commands", many.len()),
                };
                let steps = inverse
                    .into_iter()
                    .map(|s| {
                        let mut step = json!({"op": s.op, "args": s.args,
                            "provenance": s.provenance.as_str(), "confirm": s.confirm});
                        if s.confirm {
                            step["ask"] = json!(format!("undo {}", s.undoes));
                        }
                        step
                    })
                    .collect();
                Ok((steps, Some(UndoRun { reverses }), Some(message)))
            }
            Err(why) => Err((steps, why)),
        }
    }

    /// Run one step that did not come from a plan (a plugin's `host.action`, a client's
    /// `runner.invoke`) through the same gate as a plan's steps: provenance, enabled, URL
    /// scheme, args schema, confirmation, re-validation after approval, audit. `author`
    /// says who wrote the arguments ([`Author::Plugin`] for `host.action`).
    #[allow(clippy::too_many_arguments)]
    pub async fn run_one(
        &self,
        label: &str,
        op: &str,
        args: &Value,
        provenance: Provenance,
        confirm_requested: bool,
        target: Target,
        author: Author,
        options: &CommandOptions,
    ) -> StepResult {
        let timeout = self.supervisor.effective_timeout(options.timeout_ms);
        let policy = (self.policy)();
        let step = Step {
            op: normalise_op(op).to_owned(),
            args: args.clone(),
            provenance,
            confirm_requested,
            target,
            author,
        };
        match self.admit(&policy, label, step, None).await {
            Ok(prepared) => {
                self.run_step(label, prepared, options, timeout, options.context.as_ref())
                    .await
            }
            Err(failed) => *failed,
        }
    }

    /// The planner fallback (`[decide] planner`): when the router found no rule, or no
    /// target for its verb, and no near name (`escalate.reason` `no_rule` or
    /// `unknown_target`), and a plugin provides `llm.plan`, ask it for steps over
    /// [`PLANNER_OPS`]. Its steps carry the command's provenance (it was shown the utterance
    /// and nothing else), each asks first, and they pass every gate as any plan's. A planner
    /// that fails leaves the escalation as it was, saying so.
    async fn propose(
        &self,
        utterance: &str,
        steps: Vec<Value>,
        mut planned: Value,
        provenance: Provenance,
        options: &CommandOptions,
        timeout: std::time::Duration,
    ) -> (Vec<Value>, Value) {
        let reason = planned.pointer("/escalate/reason").and_then(Value::as_str);
        let wanted = options.decide.is_some_and(|d| d.planner)
            && matches!(reason, Some("no_rule" | "unknown_target"));
        let planner = match wanted {
            true => self.supervisor.find_provider("llm.plan", "llm.plan"),
            false => None,
        };
        let Some(planner) = planner else {
            return (steps, planned);
        };
        let params = json!({"utterance": utterance, "ops": PLANNER_OPS});
        let answer = self
            .supervisor
            .call_as(&planner, "llm.plan", params, timeout, provenance)
            .await;
        let proposed: Result<Vec<Value>, String> = match &answer {
            Err(e) => Err(e.message.clone()),
            Ok(answer) => match answer.get("steps").and_then(Value::as_array) {
                Some(list) if (1..=3).contains(&list.len()) => list
                    .iter()
                    .map(
                        |s| match (s.get("op").and_then(Value::as_str), s.get("args")) {
                            // Only the ops it was offered: anything else is a planner
                            // reaching for what it was not given, and the plan is refused.
                            (Some(op), _) if !PLANNER_OPS.contains(&normalise_op(op)) => Err(format!(
                                "proposed the op {:?}, which is not one of the ops it was offered ({})",
                                utter_protocol::text::clip(op, 40),
                                PLANNER_OPS.join(", ")
                            )),
                            (Some(op), Some(args)) if args.is_object() => Ok(json!({
                                "op": op,
                                "args": args,
                                "provenance": provenance.as_str(),
                                "confirm": true,
                                "ask": "the language model proposes this: run it?",
                            })),
                            _ => Err(format!("answered a step that is not {{op, args}}: {s}")),
                        },
                    )
                    .collect(),
                _ => Err("answered no list of 1 to 3 steps".into()),
            },
        };
        match proposed {
            Ok(proposed) => {
                let said: Vec<String> = proposed
                    .iter()
                    .map(|s| format!("{} {}", s["op"].as_str().unwrap_or(""), s["args"]))
                    .collect();
                tracing::info!(planner, steps = %said.join("; "), "the planner proposed");
                planned = json!({
                    "steps": proposed,
                    "rule": "planner",
                    "message": format!("no rule matched; the planner {planner:?} proposes: {}", said.join("; then ")),
                });
                (proposed, planned)
            }
            Err(why) => {
                tracing::warn!(planner, %why, "the planner failed");
                amend_messages(&mut planned, |m| {
                    format!("{m} (the planner {planner:?} failed: {why})")
                });
                (steps, planned)
            }
        }
    }

    /// Hold the router's candidates under their digests, ask an untrusted chooser for an id,
    /// and return the held candidate with that id as the one step to run.
    async fn choose(
        &self,
        utterance: &str,
        planned: &Value,
        offered: &[Value],
        provenance: Provenance,
        options: &CommandOptions,
        timeout: std::time::Duration,
    ) -> Result<Chosen, ErrorObject> {
        let mut held: Vec<Candidate> = Vec::with_capacity(offered.len());
        for (i, c) in offered.iter().enumerate() {
            let id = c.get("id").and_then(Value::as_str).unwrap_or("");
            let op = c.get("op").and_then(Value::as_str).unwrap_or("");
            if id.is_empty() || op.is_empty() || held.iter().any(|h| h.id == id) {
                return Err(ErrorObject::plugin(format!(
                    "candidate {} needs a unique string \"id\" and an \"op\": {c}",
                    i + 1
                )));
            }
            let own = Provenance::from_value(c.get("provenance"))?;
            let cand_provenance = provenance.least_trusted(own);
            let op = normalise_op(op).to_owned();
            let args = c.get("args").cloned().unwrap_or_else(|| json!({}));
            let mut step = json!({
                "op": op,
                "args": args,
                "provenance": cand_provenance.as_str(),
                "confirm": c.get("confirm").and_then(Value::as_bool).unwrap_or(false),
            });
            // The router's question for a confirmed candidate ("did you mean GitHub?").
            if let Some(ask) = c.get("ask").and_then(Value::as_str) {
                step["ask"] = json!(ask);
            }
            held.push(Candidate {
                id: id.to_owned(),
                digest: step_digest(&op, &args, cand_provenance),
                step,
                op,
                args,
                provenance: cand_provenance,
            });
        }
        let method = planned
            .pointer("/choose/method")
            .and_then(Value::as_str)
            .unwrap_or("llm.choose");
        if method != "llm.choose" && method != "perception.choose" {
            return Err(ErrorObject::invalid_params(format!(
                "choose.method must be \"llm.choose\" or \"perception.choose\", not {method:?}"
            )));
        }
        let chooser = self
            .supervisor
            .find_provider(method, method)
            .ok_or_else(|| {
                ErrorObject::new(
                    ErrorCode::CapabilityMissing,
                    format!("the plan offers candidates but no running plugin provides {method}@1"),
                )
            })?;
        let shown: Vec<Value> = offered
            .iter()
            .zip(&held)
            .map(|(c, h)| {
                json!({
                    "id": h.id,
                    "op": h.op,
                    "args": h.args,
                    "summary": c.get("summary").and_then(Value::as_str).unwrap_or(""),
                })
            })
            .collect();
        let params = json!({
            "utterance": utterance,
            "context": options.context.clone().unwrap_or(Value::Null),
            "candidates": shown,
        });
        // The chooser reads untrusted content: its requests are served as untrusted.
        let answer = self
            .supervisor
            .call_as(&chooser, method, params, timeout, Provenance::Screen)
            .await?;
        let refuse = |why: String| {
            ErrorObject::new(
                ErrorCode::UntrustedArgument,
                format!("chooser {chooser:?} {why}; a chooser may only answer {{\"choice_id\": <id of a prepared candidate>}}"),
            )
            .with_data(json!({"chooser": chooser, "answer": answer}))
        };
        let ids: Vec<&str> = held.iter().map(|h| h.id.as_str()).collect();
        let choice = match check_choice(&answer, &ids) {
            Ok(choice) => choice,
            Err(why) => {
                let e = refuse(why);
                self.record(
                    AuditEntry::new(utterance, method, &answer, Provenance::Screen, "denied")
                        .code(e.code)
                        .plugin(chooser.clone()),
                );
                return Err(e);
            }
        };
        let Some(pick) = held.iter().find(|h| h.id == choice) else {
            return Err(refuse(format!(
                "chose {choice:?}, which is no prepared candidate"
            )));
        };
        // What runs is what was held, verified by its digest.
        if step_digest(&pick.op, &pick.args, pick.provenance) != pick.digest {
            return Err(refuse(
                "picked a candidate whose digest no longer matches".into(),
            ));
        }
        let mut selected_by = json!({
            "plugin": chooser,
            "method": method,
            "choice_id": pick.id,
            "digest": pick.digest,
        });
        let probability = answer.get("probability").and_then(Value::as_f64);
        if let Some(p) = probability {
            selected_by["probability"] = json!(p);
        }
        self.record(
            AuditEntry::new(utterance, &pick.op, &pick.args, pick.provenance, "chosen")
                .by(format!("{method}:{chooser}"))
                .plugin(chooser.clone()),
        );
        let summary = offered
            .iter()
            .find(|c| c.get("id").and_then(Value::as_str) == Some(pick.id.as_str()))
            .and_then(|c| c.get("summary"))
            .and_then(Value::as_str)
            .unwrap_or(&pick.op)
            .to_owned();
        Ok(Chosen {
            step: pick.step.clone(),
            selected_by,
            probability,
            summary,
        })
    }

    /// The gates after provenance, enabled and URL scheme ([`Policy::check`]): the action
    /// plugin's `args_schema`, and its `needs_confirm` (which can only add a confirmation).
    /// Returns the decision and the action plugin, if one offers the op.
    async fn gates(
        &self,
        policy: &Policy,
        step: &Step,
        charge: bool,
    ) -> Result<(Decision, Option<String>), ErrorObject> {
        let Step {
            op,
            args,
            provenance,
            confirm_requested,
            target,
            author,
        } = step;
        let mut decision = policy.check(op, args, *provenance, *confirm_requested)?;
        // A point a plugin wrote is asked about every time, whatever the plugin or its
        // model thought of it.
        decision.needs_confirm |= author.wrote_a_point(op);
        let found = match target {
            Target::Action => self.supervisor.find_action_spec(op).await,
            Target::Relay { plugin, method, .. } if method == "action.invoke" => {
                let ops = self.supervisor.action_ops(plugin).await;
                let spec = ops.iter().find(|s| s.op == *op).cloned();
                Some((plugin.clone(), spec))
            }
            Target::Relay { plugin, .. } => Some((plugin.clone(), None)),
        };
        let Some((plugin, spec)) = found else {
            return Ok((decision, None));
        };
        if let Some(spec) = spec {
            spec.validate(args)?;
            decision.needs_confirm |= spec.needs_confirm;
        }
        // Last: a step refused by an earlier gate costs no input budget. A step gated again
        // after its approval has paid already.
        if charge {
            self.input_rate.take(op, args)?;
        }
        Ok((decision, Some(plugin)))
    }

    /// Read one step of a plan and run the gate on it.
    #[allow(clippy::too_many_arguments)]
    async fn prepare_step(
        &self,
        policy: &Policy,
        router: &str,
        utterance: &str,
        index: usize,
        step: &Value,
        command_provenance: Provenance,
        selected_by: Option<Value>,
    ) -> Result<Prepared, Box<StepResult>> {
        let op = step
            .get("op")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let args = step.get("args").cloned().unwrap_or_else(|| json!({}));
        let step_provenance = Provenance::from_value(step.get("provenance"));
        // A step's provenance is the least trusted of the command's and the step's own.
        let provenance = command_provenance
            .least_trusted(*step_provenance.as_ref().unwrap_or(&Provenance::Screen));
        let malformed = if !step.is_object() || op.is_empty() {
            Some(format!(
                "step {} is not an object with an \"op\" string: {step}",
                index + 1
            ))
        } else {
            step_provenance
                .err()
                .map(|e| format!("step {}: {}", index + 1, e.message))
        };
        if let Some(why) = malformed {
            let e = ErrorObject::invalid_params(why);
            self.record(
                AuditEntry::new(utterance, &op, &args, provenance, "denied")
                    .code(e.code)
                    .by("policy"),
            );
            let mut blank = Step {
                op,
                args,
                provenance,
                confirm_requested: false,
                target: Target::Action,
                author: Author::Person,
            }
            .blank_result();
            blank.selected_by = selected_by;
            return Err(Box::new(blank.failed(e)));
        }
        // The router's question for a step it asks about ("did you mean GitHub?"), shown
        // before the step's own summary; one short line.
        let ask: Option<String> = step
            .get("ask")
            .and_then(Value::as_str)
            .filter(|a| !a.trim().is_empty())
            .map(|a| utter_protocol::text::clip(a.trim(), 200));
        let step = Step {
            op: normalise_op(&op).to_owned(),
            args,
            provenance,
            confirm_requested: step
                .get("confirm")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            target: Target::Action,
            author: Author::Router {
                plugin: router.to_owned(),
            },
        };
        let mut prepared = self.admit(policy, utterance, step, selected_by).await?;
        if let Some(ask) = ask
            && prepared.step.confirm_requested
        {
            prepared.decision.summary = format!("{ask} ({})", prepared.decision.summary);
        }
        Ok(prepared)
    }

    /// The gate's first half, for every acting path: provenance, enabled, URL scheme
    /// ([`Policy::check`]), then the action plugin's `args_schema` and `needs_confirm`. The
    /// decision is audited (`allowed` or `denied`). [`Pipeline::run_step`] is the second
    /// half: confirmation, re-validation, invocation.
    async fn admit(
        &self,
        policy: &Policy,
        label: &str,
        step: Step,
        selected_by: Option<Value>,
    ) -> Result<Prepared, Box<StepResult>> {
        match self.gates(policy, &step, true).await {
            Ok((decision, plugin)) => {
                let mut entry =
                    AuditEntry::new(label, &step.op, &step.args, step.provenance, "allowed")
                        .by("policy");
                if let Some(p) = &plugin {
                    entry = entry.plugin(p.clone());
                }
                self.record(entry);
                Ok(Prepared {
                    step,
                    decision,
                    selected_by,
                })
            }
            Err(e) => {
                self.record(
                    AuditEntry::new(label, &step.op, &step.args, step.provenance, "denied")
                        .code(e.code)
                        .by("policy"),
                );
                let mut blank = step.blank_result();
                blank.selected_by = selected_by;
                Err(Box::new(blank.failed(e)))
            }
        }
    }

    /// Refuse a plugin-written point that is not on the focused window's surface (or whose
    /// window moved while asking): nothing is clicked, and the audit says why.
    fn refuse_point(
        &self,
        utterance: &str,
        step: &Step,
        result: StepResult,
        why: String,
    ) -> StepResult {
        let by = match &step.author {
            Author::Plugin { plugin, .. } | Author::Router { plugin } => {
                format!("context (a point plugin {plugin} wrote)")
            }
            Author::Person => "context".to_owned(),
        };
        let e = ErrorObject::new(
            ErrorCode::Denied,
            format!("not done: {why}; nothing was clicked"),
        )
        .with_data(json!({"op": step.op, "args": step.args}));
        self.record(
            AuditEntry::new(utterance, &step.op, &step.args, step.provenance, "denied")
                .code(e.code)
                .by(by),
        );
        result.failed(e)
    }

    /// The context for a confirmation's drift check ([`crate::context::ContextRead::for_drift`]);
    /// read afresh from the compositor for a plugin-written point (`fresh`), whose check
    /// must not rest on geometry the compositor's events left out.
    async fn read_context(&self, timeout: std::time::Duration, fresh: bool) -> Option<Value> {
        let read = if fresh {
            self.context.read_refreshed(self.supervisor, timeout).await
        } else {
            self.context.read(self.supervisor, timeout, None).await
        };
        read.for_drift()
    }

    /// Gate again, confirm (when needed, re-validating after every approval), then invoke.
    /// `context` is the desktop context the step runs in (sent along as `action.invoke`'s
    /// `context`).
    async fn run_step(
        &self,
        utterance: &str,
        prepared: Prepared,
        options: &CommandOptions,
        timeout: std::time::Duration,
        context: Option<&Value>,
    ) -> StepResult {
        let mut result = prepared.result();
        let Prepared {
            step,
            decision: planned,
            ..
        } = prepared;
        let (op, args, provenance) = (step.op.clone(), step.args.clone(), step.provenance);
        // The policy in force when the step runs, not when its plan was checked: a reload
        // while an earlier step waited for its yes applies to this one. What the plan
        // asked for (a confirmation, the router's question) stays.
        let (mut decision, mut plugin) = match self.gates(&(self.policy)(), &step, false).await {
            Ok((mut fresh, plugin)) => {
                fresh.needs_confirm |= planned.needs_confirm;
                fresh.summary = planned.summary;
                (fresh, plugin)
            }
            Err(e) => {
                self.record(
                    AuditEntry::new(utterance, &op, &args, provenance, "denied")
                        .code(e.code)
                        .by("policy (when the step ran)"),
                );
                return result.failed(e);
            }
        };
        let point = step.author.wrote_a_point(&op);
        if decision.needs_confirm && !options.dry_run {
            let mut round = 0;
            loop {
                round += 1;
                let before = self.read_context(timeout, point).await;
                if point {
                    match point_target(&args, before.as_ref()) {
                        Ok(window) => {
                            decision.summary = point_summary(&op, &args, &window, &step.author)
                        }
                        Err(why) => return self.refuse_point(utterance, &step, result, why),
                    }
                } else if round == 1 {
                    // The question names the window the step acts on, as the desktop shows
                    // it now ("close app foot — foot \"~/src\"").
                    if let Some(window) = acts_on(&op, &args, before.as_ref()) {
                        decision.summary = format!("{} — {window}", decision.summary);
                    }
                }
                let request = ConfirmRequest::new(&op, &args, provenance, &decision.summary);
                let resolution = (self.confirmer)(request.clone()).await;
                if !resolution.approved {
                    let e = ErrorObject::new(
                        ErrorCode::Denied,
                        refusal_text(&resolution, &request.summary),
                    )
                    .with_data(serde_json::to_value(&request).unwrap_or(Value::Null));
                    self.record(
                        AuditEntry::new(utterance, &op, &args, provenance, "denied")
                            .code(e.code)
                            .by(resolution.by),
                    );
                    return result.failed(e);
                }
                self.record(
                    AuditEntry::new(utterance, &op, &args, provenance, "confirmed")
                        .by(resolution.by.clone()),
                );
                // The approval covers exactly this digest.
                let digest = step_digest(&op, &args, provenance);
                // Every gate again, with the policy in force now.
                let fresh = (self.policy)();
                let regated = if digest == request.digest {
                    self.gates(&fresh, &step, false).await
                } else {
                    Err(ErrorObject::new(
                        ErrorCode::Denied,
                        "the step changed after it was approved",
                    ))
                };
                match regated {
                    // Approved: it stays a confirmed step with the summary the person saw.
                    Ok((_, p)) => plugin = p,
                    Err(e) => {
                        self.record(
                            AuditEntry::new(utterance, &op, &args, provenance, "denied")
                                .code(e.code)
                                .by("policy (after approval)"),
                        );
                        return result.failed(e);
                    }
                }
                let after = self.read_context(timeout, point).await;
                if point {
                    // A point aims at what was on the screen when it was found: once the
                    // window moved, resized or lost the focus, it aims at something else,
                    // and asking again would approve a stale aim.
                    let moved = point_moved(before.as_ref(), after.as_ref());
                    if let Some(why) = moved.or_else(|| point_target(&args, after.as_ref()).err()) {
                        return self.refuse_point(utterance, &step, result, why);
                    }
                }
                match context_drift(&op, &args, before.as_ref(), after.as_ref()) {
                    None => {
                        result.confirmed_by = Some(resolution.by);
                        break;
                    }
                    Some(why) if round < MAX_CONFIRM_ROUNDS => {
                        tracing::info!(op = %op, why = %why, round, "context changed during the confirmation; asking again");
                        self.record(
                            AuditEntry::new(utterance, &op, &args, provenance, "reasked").by(why),
                        );
                    }
                    Some(why) => {
                        let e = ErrorObject::new(
                            ErrorCode::Denied,
                            format!(
                                "not run: {why} while asking, {MAX_CONFIRM_ROUNDS} times; {}",
                                request.summary
                            ),
                        )
                        .with_data(serde_json::to_value(&request).unwrap_or(Value::Null));
                        self.record(
                            AuditEntry::new(utterance, &op, &args, provenance, "denied")
                                .code(e.code)
                                .by("context"),
                        );
                        return result.failed(e);
                    }
                }
            }
        }
        result.needs_confirm = decision.needs_confirm;
        let plugin = match plugin {
            Some(p) => p,
            None => match self.supervisor.find_action(&op).await {
                Some(p) => p,
                None => {
                    // An action plugin that is down may be the one that offers it: say so.
                    let down: Vec<String> = self
                        .supervisor
                        .plugins()
                        .into_iter()
                        .filter(|p| p.kind == "action" && !p.status.is_running())
                        .map(|p| {
                            format!(
                                "{} is {}{}",
                                p.id,
                                p.status.as_str(),
                                p.last_error
                                    .map(|e| format!(": {}", utter_protocol::text::clip(&e, 300)))
                                    .unwrap_or_default()
                            )
                        })
                        .collect();
                    let why = if down.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " (an action plugin that is not running may offer it: {})",
                            down.join("; ")
                        )
                    };
                    return result.failed(ErrorObject::new(
                        ErrorCode::CapabilityMissing,
                        format!("no running action plugin offers the op {op:?}{why}"),
                    ));
                }
            },
        };
        result.plugin = Some(plugin.clone());
        let (method, params) = match step.target {
            Target::Action => {
                let mut params = json!({
                    "op": op,
                    "args": args,
                    "provenance": provenance.as_str(),
                    "dry_run": options.dry_run,
                });
                if let Some(context) = context {
                    params["context"] = context.clone();
                }
                ("action.invoke".to_owned(), params)
            }
            Target::Relay { method, params, .. } => (method, params),
        };
        let outcome = match self
            .supervisor
            .call_serving(
                &plugin,
                &method,
                params,
                timeout,
                provenance,
                Some(self.confirmer.clone()),
            )
            .await
        {
            Ok(value) if method != "action.invoke" => {
                result.ok = true;
                result.result = Some(value);
                result
            }
            Ok(value) => match read_action_result(&value) {
                Ok((ok, detail)) => {
                    result.ok = ok;
                    result.detail = detail;
                    result.verified = value.get("verified").and_then(Value::as_bool);
                    result.result = Some(value);
                    result
                }
                Err(e) => {
                    result.result = Some(value);
                    result.failed(e)
                }
            },
            Err(e) => result.failed(e),
        };
        let mut entry = AuditEntry::new(
            utterance,
            &op,
            &args,
            provenance,
            match (options.dry_run, outcome.ok) {
                (true, true) => "dry-run",
                (true, false) => "dry-run-failed",
                (false, true) => "executed",
                (false, false) => "failed",
            },
        )
        .plugin(plugin);
        if let Some(e) = &outcome.error {
            entry = entry.code(e.code);
        }
        if let Some(by) = &outcome.confirmed_by {
            entry = entry.by(by.clone());
        }
        self.record(entry);
        outcome
    }
}

/// Why an approved step no longer matches its context, or `None`. `before` and `after` are
/// context snapshots (`None`: no context plugin). The target window or app must still exist;
/// for focus-dependent ops the focused window must be the same.
pub fn context_drift(
    op: &str,
    args: &Value,
    before: Option<&Value>,
    after: Option<&Value>,
) -> Option<String> {
    // A focus-dependent op that names its window acts on that window, wherever the focus is.
    let names_window = args.get("window_id").is_some_and(|v| !v.is_null());
    let targets = names_window
        || ["app", "app_id"]
            .iter()
            .any(|k| args.get(*k).is_some_and(Value::is_string));
    let focus_dependent = FOCUS_DEPENDENT_OPS.contains(&op) && !names_window;
    if (before.is_none() && after.is_none()) || !(targets || focus_dependent) {
        return None;
    }
    let Some(after) = after.filter(|a| a.is_object()) else {
        return Some("the context could not be read again".into());
    };
    let windows: Vec<&Value> = after
        .get("windows")
        .and_then(Value::as_array)
        .map(|w| w.iter().collect())
        .unwrap_or_default();
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if let Some(target) = args.get("window_id").filter(|v| !v.is_null()) {
        let wanted = text(target);
        let present = windows.iter().any(|w| {
            w.get("window_id")
                .or_else(|| w.get("id"))
                .is_some_and(|id| text(id) == wanted)
        });
        if !present {
            return Some(format!("window {wanted} is gone"));
        }
    }
    for key in ["app", "app_id"] {
        if let Some(target) = args.get(key).and_then(Value::as_str) {
            let present = windows.iter().any(|w| {
                ["app_id", "app"]
                    .iter()
                    .any(|k| w.get(*k).and_then(Value::as_str) == Some(target))
            });
            if !present {
                return Some(format!("app {target} has no window any more"));
            }
        }
    }
    if focus_dependent {
        let focused = |s: Option<&Value>| {
            s.and_then(|s| s.get("focused")).map(|f| {
                f.get("window_id")
                    .or_else(|| f.get("id"))
                    .cloned()
                    .unwrap_or(f.clone())
            })
        };
        if focused(before) != focused(Some(after)) {
            return Some("the focused window changed".into());
        }
    }
    None
}

/// Why a confirmation was not a yes, for the step's error: a denial says who denied it, a
/// timeout says nobody answered (`Resolution::by` tells them apart).
fn refusal_text(resolution: &Resolution, summary: &str) -> String {
    match resolution.by.as_str() {
        "timeout" => format!(
            "confirmation timed out: nobody answered within the confirmation time ([runner] confirm_timeout_ms); {summary}"
        ),
        "cancelled" => {
            format!("confirmation withdrawn: the request that asked was cancelled; {summary}")
        }
        by => format!(
            "confirmation denied: {summary} (answered no through {})",
            utter_protocol::text::clip(by, 60)
        ),
    }
}

/// A context snapshot's focused window.
fn focused_window(context: Option<&Value>) -> Option<&Value> {
    context?.get("focused").filter(|f| f.is_object())
}

/// A window's rectangle `key` (`rect`: its content; `frame`: with its title bar and
/// borders) as `(x, y, width, height)`, when the compositor gave one.
fn rect_of(window: &Value, key: &str) -> Option<(i64, i64, i64, i64)> {
    let r = window.get(key)?;
    let n = |k: &str| r.get(k).and_then(Value::as_i64);
    Some((n("x")?, n("y")?, n("width")?, n("height")?))
}

/// A window's content rectangle ([`rect_of`] `rect`).
fn window_rect(window: &Value) -> Option<(i64, i64, i64, i64)> {
    rect_of(window, "rect")
}

/// A window's id (`id`, or `window_id`).
fn window_id(window: &Value) -> Option<&Value> {
    window.get("id").or_else(|| window.get("window_id"))
}

/// A window as the person knows it: `foot "~/src"` (app id and title, escaped and cut).
fn describe_window(window: &Value) -> String {
    let field = |k: &str| window.get(k).and_then(Value::as_str).unwrap_or("");
    let app = utter_protocol::text::clip(field("app_id"), 80);
    let title = utter_protocol::text::clip(field("title"), 80);
    match (app.is_empty(), title.is_empty()) {
        (false, false) => format!("{app} {title:?}"),
        (false, true) => app,
        (true, false) => format!("the window {title:?}"),
        (true, true) => "the focused window".to_owned(),
    }
}

/// Where a plugin-written point (`click_point`/`pointer_move {x, y}`) lands: the focused
/// window, described for the question, when the point lies inside that window's `rect`
/// and no other window shown (on a workspace that is visible) covers it; else why not. A
/// floating window is taken to lie over tiled ones; two windows of the same layer that
/// overlap at the point count as covering (the stacking order among them is not in the
/// context), so the answer errs on the side of not clicking. Layer-shell surfaces (panels,
/// notifications) are not in the context and are not seen.
///
/// # Errors
/// Why the point cannot be placed: no context, no focused window, no geometry, outside the
/// window, another window over it.
pub fn point_target(args: &Value, context: Option<&Value>) -> Result<String, String> {
    let (Some(x), Some(y)) = (
        args.get("x").and_then(Value::as_i64),
        args.get("y").and_then(Value::as_i64),
    ) else {
        return Err("the point has no whole-number x and y".into());
    };
    let Some(focused) = focused_window(context) else {
        return Err(format!(
            "the desktop context shows no focused window to check the point ({x}, {y}) against"
        ));
    };
    let name = describe_window(focused);
    let Some(rect) = window_rect(focused) else {
        return Err(format!(
            "the compositor gives no geometry for the focused window {name}, so the point ({x}, {y}) cannot be checked against it"
        ));
    };
    let inside = |(rx, ry, w, h): (i64, i64, i64, i64)| {
        x >= rx && y >= ry && x < rx.saturating_add(w) && y < ry.saturating_add(h)
    };
    if !inside(rect) {
        return Err(format!(
            "the point ({x}, {y}) lies outside the focused window {name} (at {}, {}, {}x{})",
            rect.0, rect.1, rect.2, rect.3
        ));
    }
    let context = context.unwrap_or(&Value::Null);
    let visible_workspaces: Option<Vec<&Value>> = context
        .get("workspaces")
        .and_then(Value::as_array)
        .map(|w| {
            w.iter()
                .filter(|w| w.get("active").and_then(Value::as_bool) != Some(false))
                .filter_map(|w| w.get("id"))
                .collect()
        });
    let floating = |w: &Value| w.get("floating").and_then(Value::as_bool);
    let own_id = window_id(focused);
    let windows = context.get("windows").and_then(Value::as_array);
    for other in windows.into_iter().flatten() {
        if window_id(other) == own_id {
            continue;
        }
        if other.get("visible").and_then(Value::as_bool) == Some(false) {
            continue;
        }
        let shown = match (&visible_workspaces, other.get("workspace_id")) {
            (Some(visible), Some(ws)) => visible.contains(&ws),
            _ => true,
        };
        // A tiled window lies under a floating focused one.
        let below = floating(focused) == Some(true) && floating(other) == Some(false);
        // Its frame (title bar and borders) covers as much as its content.
        let covers = rect_of(other, "frame").or_else(|| window_rect(other));
        if shown && !below && covers.is_some_and(inside) {
            return Err(format!(
                "another window, {}, lies over the point ({x}, {y}) of the focused window {name}",
                describe_window(other)
            ));
        }
    }
    Ok(name)
}

/// Why a plugin-written point no longer aims where it did: the focused window is another
/// one, or it moved or was resized, between `before` and `after`.
fn point_moved(before: Option<&Value>, after: Option<&Value>) -> Option<String> {
    let (b, a) = (focused_window(before), focused_window(after));
    if b.and_then(window_id) != a.and_then(window_id) {
        return Some("the focus moved to another window while asking".into());
    }
    if b.and_then(window_rect) != a.and_then(window_rect) {
        return Some(
            "the focused window moved or was resized while asking, so the point no longer aims at what was found"
                .into(),
        );
    }
    None
}

/// The window a step acts on, as the person knows it, from `context`: the window it names
/// (`window_id`), else the windows of the app it names (`app`), else for a focus-dependent
/// op the focused window. `None` when the context does not tell.
fn acts_on(op: &str, args: &Value, context: Option<&Value>) -> Option<String> {
    let context = context?;
    let windows: Vec<&Value> = context
        .get("windows")
        .and_then(Value::as_array)
        .map(|w| w.iter().collect())
        .unwrap_or_default();
    if let Some(id) = args.get("window_id").filter(|v| !v.is_null()) {
        let window = windows.iter().find(|w| window_id(w) == Some(id))?;
        return Some(describe_window(window));
    }
    if let Some(app) = args.get("app").and_then(Value::as_str) {
        let of_app: Vec<&&Value> = windows
            .iter()
            .filter(|w| w.get("app_id").and_then(Value::as_str) == Some(app))
            .collect();
        return match of_app.as_slice() {
            [] => None,
            [one] => Some(describe_window(one)),
            many => Some(format!(
                "{} windows of {}: {}",
                many.len(),
                utter_protocol::text::clip(app, 80),
                many.iter()
                    .take(3)
                    .map(|w| describe_window(w))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        };
    }
    if FOCUS_DEPENDENT_OPS.contains(&op) {
        return focused_window(Some(context)).map(|w| format!("in {}", describe_window(w)));
    }
    None
}

/// The question for a plugin-written point: what happens, where, and for what.
fn point_summary(op: &str, args: &Value, window: &str, author: &Author) -> String {
    let n = |k: &str| args.get(k).and_then(Value::as_i64).unwrap_or(0);
    let button = match args.get("button").and_then(Value::as_str) {
        Some(b) if b != "left" => format!("{} ", utter_protocol::text::clip(b, 10)),
        _ => String::new(),
    };
    let times = match args.get("count").and_then(Value::as_i64) {
        Some(2) => "double-".to_owned(),
        Some(3) => "triple-".to_owned(),
        Some(c) if c > 3 => format!("{c} times "),
        _ => String::new(),
    };
    let verb = match op {
        "pointer_move" => "move the pointer to".to_owned(),
        _ => format!("{button}{times}click at"),
    };
    let why = match author {
        Author::Plugin {
            plugin,
            serving: Some(serving),
        } => format!("; plugin {plugin} placed it from the screen for {serving}"),
        Author::Plugin { plugin, .. } => format!("; plugin {plugin} placed it from the screen"),
        Author::Router { plugin } => format!("; the router {plugin} planned it"),
        Author::Person => String::new(),
    };
    format!("{verb} ({}, {}) in {window}{why}", n("x"), n("y"))
}

/// One step as the gate sees it: the op (normalised), its exact arguments, their
/// provenance, whether the step itself asks for a confirmation, and where it goes.
struct Step {
    op: String,
    args: Value,
    provenance: Provenance,
    confirm_requested: bool,
    target: Target,
    author: Author,
}

impl Step {
    /// A result for this step that has not run (yet).
    fn blank_result(&self) -> StepResult {
        StepResult {
            op: self.op.clone(),
            ok: false,
            detail: String::new(),
            args: self.args.clone(),
            provenance: self.provenance,
            plugin: None,
            result: None,
            verified: None,
            error: None,
            needs_confirm: false,
            selected_by: None,
            confirmed_by: None,
        }
    }
}

/// A step that passed the gate's first half ([`Pipeline::admit`]).
struct Prepared {
    step: Step,
    decision: Decision,
    selected_by: Option<Value>,
}

impl Prepared {
    fn result(&self) -> StepResult {
        let mut result = self.step.blank_result();
        result.needs_confirm = self.decision.needs_confirm;
        result.selected_by = self.selected_by.clone();
        result
    }
}

/// A step result that failed with `error`.
trait Failed {
    fn failed(self, error: ErrorObject) -> StepResult;
}

impl Failed for StepResult {
    fn failed(mut self, error: ErrorObject) -> StepResult {
        self.ok = false;
        self.detail = error.message.clone();
        self.error = Some(error);
        self
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

#[cfg(test)]
mod tests {
    use super::*;

    fn desk(windows: &[(i64, &str)], focused: i64) -> Value {
        json!({
            "focused": {"window_id": focused},
            "windows": windows.iter().map(|(id, app)| json!({"window_id": id, "app_id": app})).collect::<Vec<_>>(),
        })
    }

    #[test]
    fn context_drift_checks_targets_and_focus() {
        let both = desk(&[(1, "firefox"), (2, "foot")], 1);
        let one = desk(&[(2, "foot")], 2);
        let moved = desk(&[(1, "firefox"), (2, "foot")], 2);
        let close = json!({"app": "firefox", "window_id": 1});
        assert_eq!(
            context_drift("close_app", &close, Some(&both), Some(&both)),
            None
        );
        assert!(context_drift("close_app", &close, Some(&both), Some(&one)).is_some());
        // It names its window: the focus moving elsewhere does not matter.
        assert_eq!(
            context_drift("close_app", &close, Some(&both), Some(&moved)),
            None
        );
        let chord = json!({"chord": "ctrl+w"});
        assert!(context_drift("key", &chord, Some(&both), Some(&moved)).is_some());
        assert!(context_drift("key", &chord, Some(&both), Some(&Value::Null)).is_some());
        // Steps that do not depend on the context are not held up by it.
        let url = json!({"url": "https://example.com"});
        assert_eq!(
            context_drift("open_url", &url, Some(&both), Some(&Value::Null)),
            None
        );
        assert_eq!(context_drift("key", &chord, None, None), None);
        assert!(
            context_drift(
                "focus_app",
                &json!({"app": "vlc"}),
                Some(&both),
                Some(&both)
            )
            .is_some()
        );
    }

    #[test]
    fn a_point_must_land_on_the_focused_windows_own_surface() {
        let window = |id: i64, rect: (i64, i64, i64, i64), floating: bool| {
            json!({"id": id, "app_id": format!("app{id}"), "floating": floating, "workspace_id": 1,
                   "rect": {"x": rect.0, "y": rect.1, "width": rect.2, "height": rect.3}})
        };
        let mut focused = window(1, (0, 0, 1000, 800), false);
        let mut over = window(2, (400, 100, 200, 100), true);
        // Its title bar (frame) reaches above its content, over the point (450, 90).
        over["frame"] = json!({"x": 400, "y": 80, "width": 200, "height": 120});
        let context = json!({"focused": focused, "windows": [focused, over],
                             "workspaces": [{"id": 1, "active": true}]});
        let at = |x: i64, y: i64| json!({"x": x, "y": y});
        assert_eq!(point_target(&at(10, 10), Some(&context)), Ok("app1".into()));
        let under = point_target(&at(450, 150), Some(&context)).unwrap_err();
        assert!(under.contains("another window, app2"), "{under}");
        let title_bar = point_target(&at(450, 90), Some(&context)).unwrap_err();
        assert!(title_bar.contains("another window, app2"), "{title_bar}");
        assert!(
            point_target(&at(2000, 10), Some(&context))
                .unwrap_err()
                .contains("outside")
        );
        assert!(point_target(&at(10, 10), None).is_err());
        // A floating focused window lies over tiled ones; a window on a hidden workspace or
        // behind another tab covers nothing.
        focused["floating"] = json!(true);
        let tiled = window(3, (0, 0, 1000, 800), false);
        let mut hidden = window(4, (0, 0, 1000, 800), true);
        hidden["workspace_id"] = json!(2);
        let mut tab = window(5, (0, 0, 1000, 800), true);
        tab["visible"] = json!(false);
        let context = json!({"focused": focused, "windows": [focused, tiled, hidden, tab],
                             "workspaces": [{"id": 1, "active": true}, {"id": 2, "active": false}]});
        assert_eq!(point_target(&at(10, 10), Some(&context)), Ok("app1".into()));
        // The question says how often and with which button.
        let author = Author::Router {
            plugin: "rules".into(),
        };
        let asked = point_summary(
            "click_point",
            &json!({"x": 1, "y": 2, "count": 3, "button": "right"}),
            "app1",
            &author,
        );
        assert_eq!(
            asked,
            "right triple-click at (1, 2) in app1; the router rules planned it"
        );
        assert!(
            point_moved(
                Some(&json!({"focused": window(1, (0, 0, 10, 10), false)})),
                Some(&json!({"focused": window(1, (5, 0, 10, 10), false)}))
            )
            .is_some()
        );
    }
}
