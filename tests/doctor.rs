//! `utter doctor` through the real binary, with real plugin processes: its JSON field names
//! are pinned (they are a contract, versioned by `doctor_version`), the install lockfile it
//! writes is what it later compares against (a plugin whose declared version moved is
//! drift), and a broken config fails the run with the command that fixes it.

use crate::common;

use common::{Sandbox, bin, run_utter};
use std::collections::BTreeSet;
use utter_protocol::serde_json::{Value, json};

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .unwrap_or_else(|| panic!("an object: {v}"))
        .keys()
        .cloned()
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn config(sb: &Sandbox, version: &str) -> String {
    sb.write(
        "utter.toml",
        &format!(
            "config_version = 1\n[[plugin]]\nid = \"test\"\nkind = \"router\"\nentrypoint = {}\n",
            json!([
                bin("utter-test-plugin").display().to_string(),
                "--plugin-version",
                version
            ])
        ),
    )
    .display()
    .to_string()
}

#[tokio::test]
async fn doctor_fields_are_stable_and_the_lockfile_shows_drift() {
    let sb = Sandbox::new();
    let env = common::daemon::env(&sb, "state");
    let path = config(&sb, "0.1.0");

    let run = run_utter(&["doctor", "--json", "--config", &path], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    let report = run.json();
    assert_eq!(
        keys(&report),
        set(&[
            "doctor_version",
            "ok",
            "runner",
            "config",
            "service",
            "lockfile",
            "plugins",
            "checks"
        ]),
        "{report:#}"
    );
    assert_eq!(report["doctor_version"], 1);
    assert_eq!(
        keys(&report["runner"]),
        set(&["version", "protocol", "abi"])
    );
    assert_eq!(
        keys(&report["config"]),
        set(&["path", "ok", "errors", "warnings"])
    );
    assert_eq!(
        keys(&report["service"]),
        set(&["socket", "running", "detail"])
    );
    assert_eq!(
        keys(&report["lockfile"]),
        set(&["path", "present", "written"])
    );
    let plugin = &report["plugins"][0];
    assert_eq!(
        keys(plugin),
        set(&[
            "id",
            "kind",
            "status",
            "program",
            "sha256",
            "version",
            "protocol",
            "abi",
            "provides",
            "lock",
            "drift",
            "deprecations",
            "sandbox"
        ]),
        "{plugin:#}"
    );
    assert_eq!(plugin["version"], "0.1.0", "{plugin}");
    assert_eq!(plugin["lock"], "no-lockfile", "{plugin}");
    let names: BTreeSet<String> = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .map(|c| {
            assert_eq!(
                keys(c),
                set(&["name", "ok", "severity", "detail", "fix"]),
                "{c}"
            );
            c["name"].as_str().unwrap().to_owned()
        })
        .collect();
    for name in [
        "config",
        "plugins",
        "lockfile",
        "sandbox",
        "runtime-dir",
        "socket",
        "service",
        "compositor",
        "wayland",
        "pipewire",
        "uinput",
        "session-bus",
        // With no session bus (as here) these say they were not checked.
        "portal",
        "accessibility",
        "notifications",
    ] {
        assert!(names.contains(name), "no check {name}: {names:?}");
    }
    // Every failed check says what fixes it.
    for c in report["checks"].as_array().unwrap() {
        if c["ok"] == false {
            assert!(c["fix"].as_str().is_some_and(|f| !f.is_empty()), "{c}");
        }
    }

    // The lockfile, written, then matched.
    let run = run_utter(
        &["doctor", "--json", "--write-lock", "--config", &path],
        &env,
    )
    .await;
    assert_eq!(run.code, Some(0), "{run}");
    assert_eq!(run.json()["lockfile"]["written"], true, "{run}");
    let lock = sb.path("state/utter/install.lock");
    let locked: Value =
        serde_json::from_str(&std::fs::read_to_string(&lock).expect("the lockfile")).unwrap();
    assert_eq!(locked["lock_version"], 1);
    assert_eq!(locked["plugins"][0]["version"], "0.1.0", "{locked}");
    assert!(
        locked["plugins"][0]["sha256"]
            .as_str()
            .is_some_and(|h| h.len() == 64)
    );
    let run = run_utter(&["doctor", "--json", "--config", &path], &env).await;
    assert_eq!(run.json()["plugins"][0]["lock"], "match", "{run}");

    // The plugin now declares another version: drift, said with the fix.
    let path = config(&sb, "0.2.0");
    let run = run_utter(&["doctor", "--config", &path], &env).await;
    assert_eq!(run.code, Some(0), "drift is a warning: {run}");
    assert!(
        run.stdout.contains("version 0.1.0 → 0.2.0") && run.stdout.contains("--write-lock"),
        "{run}"
    );
    let run = run_utter(&["doctor", "--json", "--config", &path], &env).await;
    let plugin = &run.json()["plugins"][0];
    assert_eq!(plugin["lock"], "drift", "{plugin}");
    assert_eq!(
        plugin["drift"],
        json!(["version 0.1.0 → 0.2.0"]),
        "{plugin}"
    );

    // A plugin whose program is not installed is a warning with the command that installs
    // it, not a failure (the default config names optional plugins).
    let router = format!(
        "[[plugin]]\nid = \"test\"\nkind = \"router\"\nentrypoint = {}\n",
        json!([bin("utter-test-plugin").display().to_string()])
    );
    let missing = sb.write(
        "missing.toml",
        &format!("config_version = 1\n{router}[[plugin]]\nid = \"keys\"\nkind = \"action\"\nentrypoint = [\"utter-no-such-plugin\"]\n"),
    );
    let run = run_utter(
        &[
            "doctor",
            "--json",
            "--config",
            &missing.display().to_string(),
        ],
        &env,
    )
    .await;
    assert_eq!(run.code, Some(0), "{run}");
    let check = run.json()["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "plugins")
        .cloned()
        .unwrap();
    assert_eq!(
        (check["ok"].clone(), check["severity"].clone()),
        (json!(false), json!("warning")),
        "{check}"
    );
    assert!(
        check["fix"]
            .as_str()
            .is_some_and(|f| f.contains("install it") && f.contains("[plugins] disabled")),
        "{check}"
    );

    // A degraded plugin is said in the text too, not hidden in "started and answered".
    let degraded = sb.write(
        "degraded.toml",
        &format!(
            "config_version = 1\n[[plugin]]\nid = \"test\"\nkind = \"router\"\nentrypoint = {}\n",
            json!([
                bin("utter-test-plugin").display().to_string(),
                "--degraded",
                "no compositor socket"
            ])
        ),
    );
    let run = run_utter(
        &["doctor", "--config", &degraded.display().to_string()],
        &env,
    )
    .await;
    assert_eq!(run.code, Some(0), "a degraded plugin is a warning: {run}");
    assert!(
        run.stdout
            .contains("1 plugins started and answered, 1 of them degraded")
            && run
                .stdout
                .contains("test is degraded: no compositor socket"),
        "{run}"
    );

    // Without a router nothing can be planned: a failure, with what to add.
    let no_router = sb.write(
        "no-router.toml",
        &format!(
            "config_version = 1\n[[plugin]]\nid = \"act\"\nkind = \"action\"\nentrypoint = {}\n",
            json!([bin("utter-test-plugin").display().to_string()])
        ),
    );
    let run = run_utter(
        &[
            "doctor",
            "--json",
            "--config",
            &no_router.display().to_string(),
        ],
        &env,
    )
    .await;
    assert_eq!(run.code, Some(1), "{run}");
    let report = run.json();
    let check = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            c["detail"]
                .as_str()
                .is_some_and(|d| d.starts_with("no router plugin"))
        })
        .unwrap_or_else(|| panic!("no router check: {report:#}"));
    assert!(
        check["fix"].as_str().unwrap().contains("kind = \"router\""),
        "{check}"
    );

    // A broken config fails the run and names the command that shows why.
    let broken = sb.write(
        "broken.toml",
        "config_version = 1\n[runner]\nrpc_timeout_ms = 0\n",
    );
    let run = run_utter(&["doctor", "--config", &broken.display().to_string()], &env).await;
    assert_eq!(run.code, Some(1), "{run}");
    assert!(
        run.stdout.contains("FAIL config") && run.stdout.contains("utter check-config"),
        "{run}"
    );
}
