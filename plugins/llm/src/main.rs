//! `utter-llm`: the chooser plugin as a program (see the library docs and `utter-llm --help`).

use std::process::ExitCode;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    utter_llm::run(std::env::args_os().skip(1)).await
}
