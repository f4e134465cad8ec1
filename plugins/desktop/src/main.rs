//! `utter-desktop`: the desktop action plugin as a program of its own (see the library docs).

use std::process::ExitCode;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    utter_desktop::run(true).await
}
