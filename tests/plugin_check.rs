//! `utter plugin check`: the conformance checker from the command line.
//!
//! `fake_rs` conforms (exit 0); `utter-rulebreaker --break RULE` does not (exit 1, naming the
//! failed check and its fix); a missing command or program is a usage error (exit 2). The
//! plugin binaries sit next to `utter` (`cargo build --workspace --bins`, as tests/run.sh
//! does).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn utter() -> &'static str {
    env!("CARGO_BIN_EXE_utter")
}

/// A workspace binary next to `utter`, checked to exist.
fn bin(name: &str) -> PathBuf {
    let path = Path::new(utter())
        .parent()
        .expect("utter has a parent directory")
        .join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace --bins` first (tests/run.sh does)",
        path.display()
    );
    path
}

fn check(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(utter())
        .args(["plugin", "check"])
        .args(args)
        .output()
        .expect("utter runs")
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn fake_rs_conforms() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("plugins/fake_rs/utter-plugin.toml");
    let fake_rs = bin("fake_rs");
    let out = check(&[
        "--manifest".as_ref(),
        manifest.as_os_str(),
        "--".as_ref(),
        fake_rs.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("FAIL"), "{}", text(&out));
    for id in [
        "handshake.hello",
        "unknown-method",
        "malformed-frame",
        "stdin-eof",
    ] {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("ok") && l.contains(id)),
            "{id}: {}",
            text(&out)
        );
    }
    assert!(
        stdout.contains("10 passed, 0 failed, 0 skipped"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_rulebreaker_fails_the_check_it_breaks() {
    let rulebreaker = bin("utter-rulebreaker");
    let out = check(&[
        "--".as_ref(),
        rulebreaker.as_os_str(),
        "--break".as_ref(),
        "unknown-method-ok".as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let failed: Vec<&str> = stdout.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert_eq!(failed.len(), 1, "{}", text(&out));
    assert!(failed[0].contains("unknown-method"), "{}", text(&out));
    assert!(stdout.contains("fix:"), "{}", text(&out));
    assert!(stdout.contains("1 failed"), "{}", text(&out));
}

#[test]
fn json_output_is_the_report() {
    let rulebreaker = bin("utter-rulebreaker");
    let out = check(&[
        "--json".as_ref(),
        "--timeout-secs".as_ref(),
        "2".as_ref(),
        "--".as_ref(),
        rulebreaker.as_os_str(),
        "--break".as_ref(),
        "ignore-eof".as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let report: utter_protocol::serde_json::Value =
        utter_protocol::serde_json::from_slice(&out.stdout).expect("the report is JSON");
    assert_eq!(report["ok"], false);
    assert_eq!(report["failed"], 1);
    let failed: Vec<&str> = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["status"] == "fail")
        .filter_map(|c| c["id"].as_str())
        .collect();
    assert_eq!(failed, ["stdin-eof"], "{}", text(&out));
}

#[test]
fn usage_errors_exit_2() {
    let no_command = check(&[]);
    assert_eq!(no_command.status.code(), Some(2), "{}", text(&no_command));
    let missing = check(&["--".as_ref(), "/nonexistent/plugin".as_ref()]);
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing));
    let fake_rs = bin("fake_rs");
    let no_manifest = check(&[
        "--manifest".as_ref(),
        "/nonexistent/utter-plugin.toml".as_ref(),
        "--".as_ref(),
        fake_rs.as_os_str(),
    ]);
    assert_eq!(no_manifest.status.code(), Some(2), "{}", text(&no_manifest));
}
