//! `utter ptt press|release|toggle|cancel|state`: push-to-talk for a compositor key binding,
//! through the running service (`runner.ptt`). Prints the transition it caused and the state
//! after it (who holds it, the hold limits, each trigger), or, with `--json`, the reply
//! `{action, transition, listening, state}`. Exit 0 when the runner answered. The two
//! printers, [`print_state`] and [`describe_transition`], also serve `status`, `events` and
//! `listen`.

use utter_ipc::{PttEvent, PttState, Source};

use super::connect::{Service, call_failed};
use super::output::{exit, out, print_answer, sanitize};

/// The arguments of `utter ptt`.
#[derive(clap::Args)]
pub struct Args {
    /// What to do.
    action: Action,
    /// Print JSON: {action, transition, listening, state}.
    #[arg(long)]
    json: bool,
}

/// A push-to-talk action.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Action {
    /// Start listening (the key went down).
    Press,
    /// Stop listening (the key came up).
    Release,
    /// Press when released, release when held.
    Toggle,
    /// Drop the hold without transcribing anything (reason "cancelled").
    Cancel,
    /// Change nothing; show the state and the triggers.
    State,
}

impl Action {
    /// The word `runner.ptt` takes.
    fn as_str(self) -> &'static str {
        match self {
            Action::Press => "press",
            Action::Release => "release",
            Action::Toggle => "toggle",
            Action::Cancel => "cancel",
            Action::State => "state",
        }
    }
}

/// Run `utter ptt`.
pub async fn run(args: &Args, service: Service<'_>) -> u8 {
    let client = match service.connect("ptt").await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let reply = match client.ptt(args.action.as_str()).await {
        Ok(reply) => reply,
        Err(e) => return call_failed("ptt", &e),
    };
    client.close();
    if args.json {
        print_answer(&reply);
    } else {
        if !matches!(args.action, Action::State) {
            out!("{}", describe_transition(reply.transition.as_ref()));
        }
        print_state(&reply.state);
    }
    exit::OK
}

/// The push-to-talk lines: held or idle, the limits, then one line per trigger.
pub fn print_state(state: &PttState) {
    let held = if state.listening {
        format!(
            "listening (pressed by {}, held {} ms)",
            state.source.map_or("?", Source::as_str),
            state.held_ms.unwrap_or(0)
        )
    } else {
        "idle".to_owned()
    };
    out!(
        "push-to-talk: {held}; min hold {} ms, stuck after {} ms",
        state.min_hold_ms,
        state.max_hold_ms
    );
    let width = state
        .triggers
        .iter()
        .map(|t| t.trigger.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(7, 24);
    for t in &state.triggers {
        out!(
            "  {:<width$} {:<13} {}",
            sanitize(&t.trigger),
            sanitize(&t.state),
            sanitize(&t.detail)
        );
    }
}

/// One line for a person about a push-to-talk transition (`None`: nothing changed).
pub fn describe_transition(transition: Option<&PttEvent>) -> String {
    match transition {
        Some(PttEvent::Pressed { source }) => {
            format!("push-to-talk pressed ({}): listening", source.as_str())
        }
        Some(PttEvent::Released { source, held }) => format!(
            "push-to-talk released after {} ms ({}): utterance window",
            held.as_millis(),
            source.as_str()
        ),
        Some(PttEvent::Cancelled {
            source,
            reason,
            held,
        }) => format!(
            "push-to-talk cancelled ({}): {} after {} ms",
            source.as_str(),
            reason.as_str(),
            held.as_millis()
        ),
        None => "push-to-talk: no change".to_owned(),
    }
}
