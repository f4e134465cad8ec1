//! `utter-tts-espeak`: the espeak-ng spoken-feedback plugin as a program (see the library
//! docs and `utter-tts-espeak --help`).

use std::process::ExitCode;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    // Arguments go to clap as they are (a non-UTF-8 directory is fine).
    utter_tts_espeak::run(std::env::args_os().skip(1)).await
}
