//! `utter-rules`: the rules router as a program of its own (see the library docs).

use std::process::ExitCode;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = match std::env::args_os()
        .skip(1)
        .map(|a| a.into_string())
        .collect::<Result<_, _>>()
    {
        Ok(args) => args,
        Err(bad) => {
            eprintln!("utter-rules: argument {bad:?} is not UTF-8");
            return ExitCode::FAILURE;
        }
    };
    utter_rules::run(args).await
}
