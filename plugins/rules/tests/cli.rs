//! The `utter-rules` program's command line: help, version and usage errors, as a person or
//! the runner sees them (no JSON-RPC here; tests/rules_plugin.rs at the root covers that).

use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_utter-rules");

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("UTTER_SITES")
        .stdin(Stdio::null())
        .output()
        .expect("utter-rules runs")
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
        assert!(out.stderr.is_empty(), "{flag}: {}", text(&out.stderr));
        for wanted in [
            "rules router",
            "Usage: utter-rules [OPTIONS]",
            "--sites <PATH>",
            "--version",
            "Examples:",
            "utter plugin check -- utter-rules --sites",
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
        "$UTTER_SITES",
        "built into the program",
        "[[site]]",
    ] {
        assert!(long.contains(wanted), "no {wanted:?} in\n{long}");
    }
}

#[test]
fn version_is_the_package_version() {
    for flag in ["--version", "-V"] {
        let out = run(&[flag]);
        assert!(out.status.success());
        assert_eq!(
            text(&out.stdout).trim(),
            format!("utter-rules {}", env!("CARGO_PKG_VERSION"))
        );
    }
}

#[test]
fn bad_arguments_are_usage_errors_on_stderr() {
    for (args, wanted) in [
        (&["--frob"][..], "--frob"),
        (&["extra"], "extra"),
        (&["--sites"], "--sites <PATH>"),
    ] {
        let out = run(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
        assert!(stderr.contains(wanted), "{args:?}: {stderr}");
        assert!(stderr.contains("try '--help'"), "{args:?}: {stderr}");
    }
}

#[test]
fn a_catalog_given_with_equals_is_loaded() {
    let dir = tempfile::tempdir().expect("temp dir");
    let catalog = dir.path().join("broken.toml");
    std::fs::write(
        &catalog,
        "[[site]]\nname = \"A\"\nurl = \"ftp://a.example\"\n",
    )
    .expect("write catalog");
    let out = run(&[&format!("--sites={}", catalog.display())]);
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "nothing but frames on stdout");
    assert!(
        stderr.contains(&catalog.display().to_string()) && stderr.contains("line 3"),
        "{stderr}"
    );
}
