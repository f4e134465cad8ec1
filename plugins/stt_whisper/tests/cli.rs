//! The `utter-stt-whisper` program's command line: help, version and usage errors (no
//! model is needed for any of these).

use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_utter-stt-whisper");

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("UTTER_STT_MODEL")
        .stdin(Stdio::null())
        .output()
        .expect("utter-stt-whisper runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn help_says_what_it_is_how_it_is_started_and_shows_an_example() {
    for flag in ["--help", "-h"] {
        let out = run(&[flag]);
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{flag}: {stdout}");
        for wanted in [
            "Whisper",
            "Usage: utter-stt-whisper",
            "UTTER_STT_MODEL",
            "UTTER_STT_LANGUAGE",
            "--version",
            "Examples:",
            "utter plugin check -- utter-stt-whisper",
        ] {
            assert!(
                stdout.contains(wanted),
                "{flag}: no {wanted:?} in\n{stdout}"
            );
        }
    }
    let long = text(&run(&["--help"]).stdout);
    for wanted in ["runner starts it", "stt.load", "stt.transcribe"] {
        assert!(long.contains(wanted), "no {wanted:?} in\n{long}");
    }
}

#[test]
fn version_is_the_package_version() {
    let out = run(&["--version"]);
    assert!(out.status.success());
    assert_eq!(
        text(&out.stdout).trim(),
        format!("utter-stt-whisper {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn any_argument_is_a_usage_error_on_stderr() {
    for arg in ["--model", "extra"] {
        let out = run(&[arg]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{arg}: {stderr}");
        assert!(out.stdout.is_empty(), "{arg}: nothing on stdout");
        assert!(stderr.contains(arg), "{arg}: {stderr}");
    }
}
