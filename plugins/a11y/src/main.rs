//! `utter-a11y`: the accessibility plugin as a program of its own (see the library docs).

use std::process::ExitCode;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    utter_a11y::run(true).await
}
