//! `utter-llm`: the chooser plugin as a program (see the library docs and `utter-llm --help`).

use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("utter-llm: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(utter_llm::run(std::env::args_os().skip(1)));
    // When the runner closes the connection, a request still waiting on a server or on the
    // engine is abandoned: the process exits now, not when that request would have ended.
    runtime.shutdown_timeout(Duration::from_millis(100));
    code
}
