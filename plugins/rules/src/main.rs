//! `utter-rules`: the rules router as a program of its own (see the library docs and
//! `utter-rules --help`).

use std::process::ExitCode;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    // Arguments go to clap as they are (a non-UTF-8 catalog path is fine).
    utter_rules::run(std::env::args_os().skip(1)).await
}
