//! The conformance checker against real plugin processes: `fake_rs` passes every check, and
//! `utter-rulebreaker --break RULE` fails exactly the check that RULE breaks.
//!
//! The plugins are binaries of other workspace crates, so this test does not build them: it
//! looks for them in `$CARGO_TARGET_DIR/debug` (else `<workspace>/target/debug`, or the
//! directory this test binary runs from), where `cargo build -p fake_rs -p utter-test-plugin`
//! (or `tests/run.sh`, which builds every binary first) puts them. When one is missing the
//! test says so loudly and passes without checking anything.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;
use utter_protocol::serde_json::json;
use utter_protocol::testkit::conformance::{self, CheckOptions, Report, Status, ids};
use utter_protocol::testkit::{HostHandler, SpawnOptions, TestPlugin};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the protocol crate sits in the workspace")
        .to_path_buf()
}

/// Directories where the debug binaries may be.
fn bin_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        let target = PathBuf::from(target);
        let target = if target.is_relative() {
            workspace_root().join(target)
        } else {
            target
        };
        dirs.push(target.join("debug"));
    }
    // target/debug/deps/conformance-<hash> → target/debug
    if let Ok(exe) = std::env::current_exe() {
        if let Some(debug) = exe.parent().and_then(Path::parent) {
            dirs.push(debug.to_path_buf());
        }
    }
    dirs.push(workspace_root().join("target").join("debug"));
    dirs
}

/// The binary `name`, or `None` after a loud message.
fn plugin_bin(name: &str) -> Option<PathBuf> {
    let dirs = bin_dirs();
    if let Some(found) = dirs.iter().map(|d| d.join(name)).find(|p| p.is_file()) {
        return Some(found);
    }
    eprintln!(
        "\n!!!!! SKIPPED: {name} is not built (looked in {}).\n!!!!! Run `cargo build -p fake_rs -p utter-test-plugin` (tests/run.sh builds every binary) and run this test again.\n",
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    None
}

fn options(manifest: Option<PathBuf>) -> CheckOptions {
    CheckOptions {
        manifest,
        timeout: Duration::from_secs(5),
        ..Default::default()
    }
}

fn show(report: &Report) -> String {
    let mut out = String::new();
    for c in &report.checks {
        out.push_str(&format!(
            "  {:?} {}: {}{}\n",
            c.status,
            c.id,
            c.detail,
            c.fix
                .as_ref()
                .map(|f| format!(" / fix: {f}"))
                .unwrap_or_default()
        ));
    }
    out.push_str(&format!("  stderr: {}\n", report.stderr));
    out
}

/// The rulebreaker's manifest, written where the test can point `--manifest` at it.
fn rulebreaker_manifest(bin: &Path) -> PathBuf {
    let out = std::process::Command::new(bin)
        .arg("--print-manifest")
        .output()
        .expect("utter-rulebreaker --print-manifest runs");
    assert!(out.status.success());
    let dir = std::env::temp_dir().join(format!("utter-conformance-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("utter-plugin.toml");
    std::fs::write(&path, out.stdout).expect("write the manifest");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fake_rs_passes_every_check() {
    let Some(bin) = plugin_bin("fake_rs") else {
        return;
    };
    let manifest = workspace_root().join("plugins/fake_rs/utter-plugin.toml");
    let report = conformance::check(&[bin.into_os_string()], &options(Some(manifest))).await;
    assert!(report.ok, "fake_rs should pass:\n{}", show(&report));
    assert_eq!(report.checks.len(), conformance::CHECKS.len());
    for (check, (id, _)) in report.checks.iter().zip(conformance::CHECKS) {
        assert_eq!(check.id, *id);
        assert_eq!(check.status, Status::Pass, "{}", show(&report));
    }
    assert_eq!(
        report.plugin.as_ref().map(|p| p.name.as_str()),
        Some("fake_rs")
    );
    let json = utter_protocol::serde_json::to_value(&report).expect("the report serialises");
    assert_eq!(json["ok"], true);
    assert_eq!(json["checks"][0]["id"], ids::HELLO);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_well_behaved_rulebreaker_passes_too() {
    let Some(bin) = plugin_bin("utter-rulebreaker") else {
        return;
    };
    let manifest = rulebreaker_manifest(&bin);
    let report = conformance::check(&[bin.into_os_string()], &options(Some(manifest))).await;
    assert!(report.ok, "{}", show(&report));
    assert_eq!(
        report.passed,
        conformance::CHECKS.len(),
        "{}",
        show(&report)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_broken_rule_fails_exactly_its_check() {
    let Some(bin) = plugin_bin("utter-rulebreaker") else {
        return;
    };
    let manifest = rulebreaker_manifest(&bin);
    let cases = [
        ("wrong-major", ids::HELLO),
        ("accept-any-major", ids::INCOMPATIBLE_MAJOR),
        ("bad-capability", ids::CAPABILITIES),
        ("bad-describe", ids::DESCRIBE),
        ("bad-health", ids::HEALTH),
        ("manifest-mismatch", ids::MANIFEST),
        ("unknown-method-ok", ids::UNKNOWN_METHOD),
        ("malformed-silent", ids::MALFORMED_FRAME),
        ("cancel-crash", ids::CANCEL),
        ("ignore-eof", ids::STDIN_EOF),
    ];
    let mut problems = Vec::new();
    for (rule, expected) in cases {
        let command: Vec<OsString> = vec![bin.clone().into(), "--break".into(), rule.into()];
        // A malformed capability cannot be written in a manifest, so that one runs without.
        let manifest = (rule != "bad-capability").then(|| manifest.clone());
        let report = conformance::check(&command, &options(manifest)).await;
        let failed = report.failed_ids();
        if failed != [expected] {
            problems.push(format!(
                "--break {rule}: expected only {expected} to fail, got {failed:?}\n{}",
                show(&report)
            ));
            continue;
        }
        let check = report.check(expected).expect("the check is reported");
        if check.fix.as_deref().is_none_or(str::is_empty) {
            problems.push(format!("--break {rule}: the failure has no fix"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_failed_hello_the_dependent_checks_are_skipped_with_a_reason() {
    let Some(bin) = plugin_bin("utter-rulebreaker") else {
        return;
    };
    let command: Vec<OsString> = vec![bin.into(), "--break".into(), "wrong-major".into()];
    let report = conformance::check(&command, &options(None)).await;
    for id in [
        ids::CAPABILITIES,
        ids::DESCRIBE,
        ids::UNKNOWN_METHOD,
        ids::CANCEL,
    ] {
        let check = report.check(id).expect("reported");
        assert_eq!(check.status, Status::Skip, "{}", show(&report));
        assert!(
            check.detail.contains("protocol.hello") || check.detail.contains("hello"),
            "{}",
            check.detail
        );
    }
    // Independent of the hello: the second process, and end of stdin.
    assert_eq!(
        report.check(ids::INCOMPATIBLE_MAJOR).map(|c| c.status),
        Some(Status::Pass)
    );
    assert_eq!(
        report.check(ids::STDIN_EOF).map(|c| c.status),
        Some(Status::Pass)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_testkit_runs_a_plugin_like_the_runner() {
    let Some(bin) = plugin_bin("fake_rs") else {
        return;
    };
    let plugin = TestPlugin::start(
        &[bin.into_os_string()],
        SpawnOptions {
            epoch: 3,
            host: HostHandler::new(|request| async move { Ok(json!({"echo": request.method})) }),
            ..Default::default()
        },
    )
    .await
    .expect("fake_rs starts");
    let done = plugin.handshake_result().expect("handshake kept");
    assert_eq!(done.hello.plugin.name, "fake_rs");
    assert!(done.describe.methods.iter().any(|m| m == "action.invoke"));
    assert!(done.provides.contains("action.open_url@1"));

    let answer = plugin
        .request(
            "action.invoke",
            json!({"op": "open_url", "args": {"url": "https://example.com"}, "provenance": "user"}),
        )
        .await
        .expect("invoke answers");
    assert_eq!(answer["ok"], true);

    // Raw input: a broken body is answered -32700 (id null), and the plugin serves on.
    let mark = plugin.frame_mark();
    plugin
        .write_frame(b"not json at all")
        .await
        .expect("written");
    let parse_error = plugin
        .wait_for_frame(mark, Duration::from_secs(5), |f| {
            f.is_response_to(&json!(null)) && f.error_code() == Some(-32700)
        })
        .await;
    assert!(parse_error.is_some(), "{:?}", plugin.frames_since(mark));
    let health = plugin
        .request("plugin.health", json!({}))
        .await
        .expect("health");
    assert_eq!(health["status"], "ok");
    // The runner's ids carry the epoch.
    let sent_ids: Vec<_> = plugin
        .frames_since(0)
        .into_iter()
        .filter_map(|f| {
            f.json
                .and_then(|j| j.get("id").and_then(|i| i.as_str().map(str::to_owned)))
        })
        .collect();
    assert!(
        sent_ids.iter().all(|id| id.starts_with("3:")),
        "{sent_ids:?}"
    );

    let status = plugin
        .shutdown(Duration::from_secs(5))
        .await
        .expect("stops");
    assert!(status.success(), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_ignores_eof_is_killed_by_shutdown() {
    let Some(bin) = plugin_bin("utter-rulebreaker") else {
        return;
    };
    let command: Vec<OsString> = vec![bin.into(), "--break".into(), "ignore-eof".into()];
    let plugin = TestPlugin::start(&command, SpawnOptions::default())
        .await
        .expect("starts");
    assert!(plugin.stderr().contains("breaking ignore-eof") || plugin.stderr().is_empty());
    let status = plugin
        .shutdown(Duration::from_millis(300))
        .await
        .expect("killed");
    assert!(!status.success());
}
