//! `utter ptt press|release|toggle|cancel|state`: push-to-talk for a compositor key binding,
//! through the running service (`runner.ptt`). Prints the transition it caused and the state
//! after it (who holds it, the hold limits, each trigger), or, with `--json`, the reply
//! `{action, transition, listening, state}`. Exit 0 when the runner answered, 1 when a press
//! could not open the microphone. The two
//! printers, [`print_state`] and [`describe_transition`], also serve `status`, `events` and
//! `listen`.

use std::time::Duration;
use utter_ipc::client::Client;
use utter_ipc::{PttEvent, PttState, Source};

use super::connect::{Service, call_failed};
use super::output::{exit, out, print_answer, sanitize};

/// The arguments of `utter ptt`.
#[derive(clap::Args)]
pub struct Args {
    /// What to do.
    action: Action,
    /// With press or toggle: hold to dictate. What is heard is typed into the focused
    /// field (spoken marks written, "scratch that" takes a phrase back), as in dictation
    /// mode, for this hold only. Bind it to a second key, e.g. in niri:
    /// `Mod+F14 { spawn "utter" "ptt" "toggle" "--dictation"; }`.
    #[arg(long)]
    dictation: bool,
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

/// Run `utter ptt`. A press (or a toggle that pressed) waits until the voice loop took it
/// and exits 1 with why when the microphone could not be opened; with the voice loop off it
/// says so on stderr (the key still reaches `utter events` followers).
pub async fn run(args: &Args, service: Service<'_>) -> u8 {
    if args.dictation && !matches!(args.action, Action::Press | Action::Toggle) {
        eprintln!(
            "utter ptt: --dictation goes with press or toggle (a hold to dictate), not {}",
            args.action.as_str()
        );
        return exit::USAGE;
    }
    let client = match service.with_json(args.json).connect("ptt").await {
        Ok(c) => c,
        Err(code) => return code,
    };
    // The voice loop's state before a press (is the microphone refused?) or a release (is
    // anything transcribed?).
    let presses = matches!(
        args.action,
        Action::Press | Action::Toggle | Action::Release
    );
    let before = match presses {
        true => match client.status().await {
            Ok(status) => Some(status.voice),
            Err(e) => return call_failed("ptt", &e),
        },
        false => None,
    };
    let mut reply = match client.ptt_for(args.action.as_str(), args.dictation).await {
        Ok(reply) => reply,
        Err(e) => return call_failed("ptt", &e),
    };
    let mut code = exit::OK;
    // The key's state changes whether or not anything listens; the line says which.
    let voice_off = before.as_ref().is_some_and(|v| v.state == "off");
    if let (Some(voice), Some(PttEvent::Pressed { .. })) = (&before, &reply.transition) {
        if voice.state == "off" {
            eprintln!(
                "utter ptt: nothing will be heard: the voice loop is off ({})",
                sanitize(&voice.detail)
            );
        } else if let Some(why) = microphone_refused(&client, voice.presses).await {
            // Nothing can be heard: the hold is dropped, so the next toggle presses again,
            // and what is printed is the state after that.
            if let Ok(cancelled) = client.ptt("cancel").await {
                reply.listening = cancelled.listening;
                reply.state = cancelled.state;
            }
            eprintln!(
                "utter ptt: the microphone could not be opened, so the press was cancelled: {why}"
            );
            code = exit::NOT_DONE;
        }
    }
    client.close();
    if args.json {
        print_answer(&reply);
    } else {
        if !matches!(args.action, Action::State) {
            let mut line = describe_transition(reply.transition.as_ref());
            if code != exit::OK {
                line = line.replace(": listening", ", then cancelled: no microphone");
            } else if voice_off {
                line = line
                    .replace(
                        ": listening to dictate (what you say is typed)",
                        ": listening",
                    )
                    .replace(": listening", ": held, but the voice loop is off")
                    .replace(": dictated words", ": utterance window")
                    .replace(
                        ": utterance window",
                        ": nothing is transcribed (the voice loop is off)",
                    );
            }
            out!("{line}");
        }
        print_state(&reply.state);
    }
    code
}

/// After a press: wait until the voice loop has handled it (its `presses` passed `before`)
/// and return why not when it found the microphone `unavailable`. Gives up waiting (and lets
/// the hold go on) after 10 s, the runner's default call timeout.
pub async fn microphone_refused(client: &Client, before: u64) -> Option<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while tokio::time::Instant::now() < deadline {
        let voice = client.status().await.ok()?.voice;
        if voice.presses > before {
            return (voice.state == "unavailable").then(|| sanitize(&voice.detail));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
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
        Some(PttEvent::Pressed { source, dictation }) => format!(
            "push-to-talk pressed ({}): listening{}",
            source.as_str(),
            if *dictation {
                " to dictate (what you say is typed)"
            } else {
                ""
            }
        ),
        Some(PttEvent::Released {
            source,
            held,
            dictation,
        }) => format!(
            "push-to-talk released after {} ms ({}): {}",
            held.as_millis(),
            source.as_str(),
            if *dictation {
                "dictated words"
            } else {
                "utterance window"
            }
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
