//! `utter confirm ID yes|no`: answer one of the confirmations the running service is waiting
//! for (`runner.confirm`; the ids are in `utter pending`, `utter events` and the
//! notification). Exit 0 when the answer was taken, 1 when the id is unknown (already
//! answered elsewhere, timed out, or mistyped), 4 when no service answers.

use utter_ipc::ErrorCode;

use super::connect::{Service, call_failed};
use super::output::{exit, out};

/// The arguments of `utter confirm`.
#[derive(clap::Args)]
pub struct Args {
    /// The confirmation's id (see `utter pending`).
    id: String,
    /// `yes` approves the step, `no` denies it.
    answer: Answer,
}

/// An answer to a confirmation.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Answer {
    /// Approve the step.
    #[value(alias = "y", alias = "approve")]
    Yes,
    /// Deny it.
    #[value(alias = "n", alias = "deny")]
    No,
}

/// Run `utter confirm`.
pub async fn run(args: &Args, service: Service<'_>) -> u8 {
    let approved = matches!(args.answer, Answer::Yes);
    let client = match service.connect("confirm").await {
        Ok(c) => c,
        Err(code) => return code,
    };
    match client.confirm(&args.id, approved).await {
        Ok(()) => {
            out!(
                "confirmation {} {}",
                args.id,
                if approved { "approved" } else { "denied" }
            );
            exit::OK
        }
        Err(e) if e.kind() == ErrorCode::InvalidParams => {
            eprintln!("utter confirm: {}", e.message);
            exit::NOT_DONE
        }
        Err(e) => call_failed("confirm", &e),
    }
}
