//! `utter-input`: the input plugin as a program of its own (see the library docs).

use std::process::ExitCode;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    utter_input::run(true).await
}
