//! `utter say UTTERANCE`: plan one utterance with the router, check every step against the
//! policy and act on it. When the running service's socket answers, the service does the work
//! with its own configuration (and asks this terminal when a step needs confirmation);
//! otherwise, or with `--local`, a runner is started in this process and stopped again. The
//! result is printed as the plan and one line per step ([`print_outcome`], which `utter
//! listen` uses too) or, with `--json`, as the outcome object. Exit 0 when every step ran, 1
//! when nothing was done, 2 for an empty utterance, 4 when the runner could not do its job.

use std::path::{Path, PathBuf};
use utter_core::config::LoadedConfig;
use utter_core::pipeline::CommandOptions;
use utter_core::runner::Runner;
use utter_core::supervisor::SupervisorOptions;
use utter_ipc::client::{Client, ClientError};
use utter_ipc::methods::CommandParams;
use utter_ipc::{CommandOutcome, ErrorCode, ErrorObject};

use serde_json::{Value, json};

use super::output::{exit, out, print_answer, print_json, sanitize};
use super::{check_config, confirm_prompt, connect};

/// The arguments of `utter say`.
#[derive(clap::Args)]
pub struct Args {
    /// What to do, e.g. "open youtube", "pause", "launch calculator". Several words are
    /// joined with spaces, so quoting is optional.
    #[arg(required = true, num_args = 1.., value_name = "UTTERANCE")]
    words: Vec<String>,
    /// Plan and check, and let the action plugins say what they would do, without doing it.
    #[arg(long)]
    dry_run: bool,
    /// Print the plan and results as one JSON object.
    #[arg(long)]
    json: bool,
    /// Timeout of each plugin call, in ms (at most 60000).
    #[arg(long, value_name = "MS")]
    timeout_ms: Option<u64>,
    /// Run in this process even when the service is running (by default `say` uses the
    /// running service when its socket answers).
    #[arg(long)]
    local: bool,
}

impl Args {
    /// The words of the utterance, joined with spaces.
    fn utterance(&self) -> String {
        self.words.join(" ")
    }
}

/// Run `utter say`; `config` is `--config`, `socket` is `--socket`.
pub async fn run(args: Args, config: Option<PathBuf>, socket: Option<&Path>) -> u8 {
    if args.utterance().trim().is_empty() {
        let message = "the utterance is empty; say what to do, e.g. utter say \"open youtube\"";
        if args.json {
            out!(
                "{}",
                json!({"utterance": args.utterance(), "error": {"code": ErrorCode::InvalidParams.code(), "message": message}})
            );
        }
        eprintln!("utter say: {message}");
        return exit::USAGE;
    }
    let Some(loaded) = check_config::load(config.as_deref()) else {
        return exit::CONFIG;
    };
    if !args.local {
        let (path, token) = connect::endpoint(socket, &loaded.config);
        match Client::connect(&path, token, Some(confirm_prompt::handler())).await {
            Ok(client) => return remote(client, &args, config.is_some()).await,
            // No service: run in-process, unless a socket was named explicitly.
            Err(ClientError::NotListening { .. }) if socket.is_none() => {}
            Err(e) => {
                eprintln!("utter say: {e} (or pass --local to run in this process)");
                return exit::RUNNER;
            }
        }
    }
    local(loaded, config, &args).await
}

/// `utter say` in this process.
async fn local(mut loaded: LoadedConfig, config_path: Option<PathBuf>, args: &Args) -> u8 {
    // A one-shot command needs the router and the action plugins, not the voice loop's.
    loaded.config = loaded.config.without_voice();
    let options = SupervisorOptions::from_config(&loaded.config);
    let runner = Runner::start(loaded, options, config_path).await;
    let command_options = CommandOptions {
        dry_run: args.dry_run,
        timeout_ms: args.timeout_ms,
        ..Default::default()
    };
    let outcome = runner
        .command(
            &args.utterance(),
            &command_options,
            Some(confirm_prompt::door()),
        )
        .await;
    let code = match &outcome {
        Ok(outcome) => {
            if args.json {
                print_json(outcome);
            } else {
                print_outcome(outcome);
            }
            if outcome.all_ok() {
                exit::OK
            } else {
                exit::NOT_DONE
            }
        }
        Err(e) => {
            if args.json {
                out!("{}", json!({"utterance": args.utterance(), "error": e}));
            }
            eprintln!("utter say: {} [{}]", sanitize(&e.message), e.code);
            // What is down may be why the runner could not plan; not when the caller's words
            // were refused (too long, blank).
            let usage = e.kind() == ErrorCode::InvalidParams;
            for plugin in runner
                .plugins()
                .iter()
                .filter(|p| !usage && !p.status.is_running())
            {
                eprintln!(
                    "  plugin {} is {}{}",
                    plugin.id,
                    plugin.status.as_str(),
                    plugin
                        .last_error
                        .as_ref()
                        .map(|e| format!(": {}", sanitize(e)))
                        .unwrap_or_default()
                );
            }
            failed_exit(e)
        }
    };
    runner.shutdown().await;
    code
}

/// `utter say` through the running service.
async fn remote(client: Client, args: &Args, explicit_config: bool) -> u8 {
    if explicit_config {
        eprintln!(
            "utter say: using the running service at {} with its own configuration (--config is not used; pass --local to run in this process)",
            client.path().display()
        );
    }
    let params = CommandParams {
        utterance: args.utterance(),
        dry_run: args.dry_run,
        timeout_ms: args.timeout_ms,
        ..CommandParams::default()
    };
    let result = client.command(&params).await;
    client.close();
    match result {
        Ok(outcome) => {
            if args.json {
                print_answer(&outcome);
            } else {
                print_outcome(&outcome);
            }
            if outcome.all_ok() {
                exit::OK
            } else {
                exit::NOT_DONE
            }
        }
        Err(e) => {
            if args.json {
                out!("{}", json!({"utterance": args.utterance(), "error": e}));
            }
            eprintln!("utter say: {} [{}]", sanitize(&e.message), e.code);
            failed_exit(&e)
        }
    }
}

/// The exit code of a command the runner refused: 2 (usage) for what the caller sent
/// wrong (an utterance too long, bad params), else 4.
fn failed_exit(e: &ErrorObject) -> u8 {
    if e.kind() == ErrorCode::InvalidParams {
        exit::USAGE
    } else {
        exit::RUNNER
    }
}

/// Print a command's outcome for people: the plan the router made (or why there is none),
/// then one line per step's result.
pub fn print_outcome(outcome: &CommandOutcome) {
    let plan = &outcome.plan;
    let router = sanitize(&plan.router);
    let rule = plan
        .rule
        .as_ref()
        .map(|r| format!(", rule {r:?}"))
        .unwrap_or_default();
    if plan.steps.is_empty() {
        let reason = plan
            .escalate
            .as_ref()
            .and_then(|e| e.get("reason"))
            .and_then(Value::as_str)
            .map(|r| format!(" [{}]", sanitize(r)))
            .unwrap_or_default();
        out!(
            "plan (router {router}{rule}): nothing to do — {}{reason}",
            sanitize(
                plan.message
                    .as_deref()
                    .unwrap_or("the router returned no steps")
            )
        );
        // Nothing came close: where to find what can be said.
        if reason == " [no_rule]" {
            out!("  `utter commands` lists what can be said, with examples");
        }
        return;
    }
    out!("plan (router {router}{rule}):");
    if let Some(message) = &plan.message {
        out!("  {}", sanitize(message));
    }
    for (i, step) in plan.steps.iter().enumerate() {
        let ask = step
            .get("ask")
            .and_then(Value::as_str)
            .map(|q| format!(" — asks \"{}\"", sanitize(q)))
            .unwrap_or_default();
        let words = compositor_words(step, outcome.results.get(i)).unwrap_or_else(|| {
            // A step is as the router returned it: `{op, args}`, unchecked.
            let op = sanitize(step.get("op").and_then(Value::as_str).unwrap_or("?"));
            let args = sanitize(
                &step
                    .get("args")
                    .map_or_else(|| "{}".to_owned(), Value::to_string),
            );
            format!("{op} {args}")
        });
        out!("  {}. {words}{ask}", i + 1);
    }
    out!(
        "results{}:",
        if outcome.dry_run {
            " (dry run: nothing was done)"
        } else {
            ""
        }
    );
    for (i, r) in outcome.results.iter().enumerate() {
        let by = r
            .plugin
            .as_ref()
            .map(|p| format!(" [{p}]"))
            .unwrap_or_default();
        let state = match (&r.error, r.ok) {
            // Nothing ran in a dry run: a step that could not be checked or would fail says so.
            (Some(e), _) if outcome.dry_run => format!("would fail ({})", e.code),
            (Some(e), _) => format!("failed ({})", e.code),
            // A dry run verifies nothing by design.
            (None, true) => match r.verified.filter(|_| !outcome.dry_run) {
                Some(true) => "ok, verified".to_owned(),
                Some(false) => "ok, not verified".to_owned(),
                None => "ok".to_owned(),
            },
            (None, false) if outcome.dry_run => "not possible now".to_owned(),
            (None, false) => "not ok".to_owned(),
        };
        let confirm = if r.needs_confirm && outcome.dry_run {
            " (would ask for confirmation)"
        } else {
            ""
        };
        // A compositor step is named by the compositor that ran it ("sway ok"), not by
        // the op's historical name.
        let op = match r.result.as_ref().and_then(|v| v.get("compositor")) {
            Some(Value::String(compositor)) if r.op == "niri" => compositor.as_str(),
            _ => r.op.as_str(),
        };
        out!(
            "  {}. {} {state}{by}: {}{confirm}",
            i + 1,
            sanitize(op),
            sanitize(&r.detail)
        );
    }
}

/// A compositor step (op `niri`) in the words of the compositor that ran it: `sway: workspace
/// number 2` on sway (the command the compositor plugin sent), `niri: focus-workspace 2` on
/// niri; `None` for other steps, or when nothing was sent (a refused step: then its op and
/// arguments as planned).
fn compositor_words(
    step: &Value,
    result: Option<&utter_core::pipeline::StepResult>,
) -> Option<String> {
    if step.get("op").and_then(Value::as_str) != Some("niri") {
        return None;
    }
    let ran = result?.result.as_ref()?;
    let compositor = ran.get("compositor").and_then(Value::as_str)?;
    let sent = match ran.get("sent")? {
        Value::String(command) => command.clone(),
        // niri's own request: its action name and values as the step gave them.
        _ => utter_core::policy::compositor_action_words(step.get("args")?)?,
    };
    Some(format!("{}: {}", sanitize(compositor), sanitize(&sent)))
}
