//! The `utter-tts-espeak` program's command line: help, version and usage errors.

use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_utter-tts-espeak");

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("UTTER_TTS_OUTPUT_DIR")
        .stdin(Stdio::null())
        .output()
        .expect("utter-tts-espeak runs")
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
            "espeak-ng",
            "Usage: utter-tts-espeak [OPTIONS]",
            "--output-dir <DIR>",
            "--version",
            "Examples:",
            "utter plugin check -- utter-tts-espeak",
        ] {
            assert!(
                stdout.contains(wanted),
                "{flag}: no {wanted:?} in\n{stdout}"
            );
        }
    }
    let long = text(&run(&["--help"]).stdout);
    for wanted in [
        "runner starts it",
        "tts.speak",
        "tts.synthesize",
        "$UTTER_TTS_OUTPUT_DIR",
    ] {
        assert!(long.contains(wanted), "no {wanted:?} in\n{long}");
    }
}

#[test]
fn version_is_the_package_version() {
    let out = run(&["--version"]);
    assert!(out.status.success());
    assert_eq!(
        text(&out.stdout).trim(),
        format!("utter-tts-espeak {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn bad_arguments_are_usage_errors_on_stderr() {
    for (args, wanted) in [
        (&["--frob"][..], "--frob"),
        (&["extra"], "extra"),
        (&["--output-dir"], "--output-dir <DIR>"),
    ] {
        let out = run(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
        assert!(stderr.contains(wanted), "{args:?}: {stderr}");
    }
}
