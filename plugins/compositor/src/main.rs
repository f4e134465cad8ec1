//! `utter-compositor`: the compositor plugin as a program of its own (see the library docs).

use std::process::ExitCode;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    utter_compositor::run(true).await
}
