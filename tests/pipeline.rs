//! The command pipeline and the supervisor's handling of unruly plugins, through the library
//! with real plugin processes (`utter-test-plugin` as router and action plugin).

use crate::common;

use std::time::Duration;
use utter_core::config;
use utter_core::pipeline::CommandOptions;
use utter_core::runner::Runner;
use utter_core::supervisor::{PluginStatus, SupervisorOptions};
use utter_protocol::serde_json::{Value, json};

/// A runner whose router and action plugin are the test plugin with `args`.
async fn runner(args: &[&str]) -> std::sync::Arc<Runner> {
    let program = common::bin("utter-test-plugin");
    let mut argv = vec![program.display().to_string()];
    argv.extend(args.iter().map(|s| s.to_string()));
    let text = format!(
        "config_version = 1\n[runner]\nrpc_timeout_ms = 5000\ndrain_timeout_ms = 300\nkill_timeout_ms = 300\n\
         [[plugin]]\nid = \"t\"\nkind = \"bundle\"\nentrypoint = {}\n",
        json!(argv)
    );
    let loaded = config::parse(&text, "test.toml").expect("valid config");
    let options = SupervisorOptions::from_config(&loaded.config);
    Runner::start(loaded, options, None).await
}

fn records(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| utter_protocol::serde_json::from_str(l).ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_action_result_is_an_error_not_a_success() {
    for bad in [r#""just a string""#, "null", "[1,2]", r#"{"ok":"yes"}"#] {
        let r = runner(&["--invoke-result", bad]).await;
        let out = r
            .command("open https://example.com", &CommandOptions::default(), None)
            .await
            .expect("the command runs");
        let step = &out.results[0];
        assert!(!step.ok, "{bad}: {step:?}");
        let err = step.error.as_ref().expect("an error");
        assert_eq!(err.code, -32000, "{bad}");
        assert!(
            err.message.contains("malformed action.invoke result"),
            "{bad}: {}",
            err.message
        );
        r.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_with_a_refused_step_runs_no_step() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("rec.jsonl");
    let plan = json!([
        {"op": "open_url", "args": {"url": "https://one.example"}},
        {"op": "open_url", "args": {"url": "file:///etc/passwd"}},
        {"op": "open_url", "args": {"url": "https://three.example"}},
    ])
    .to_string();
    let r = runner(&["--plan", &plan, "--record", &rec.display().to_string()]).await;
    let out = r
        .command("anything", &CommandOptions::default(), None)
        .await
        .unwrap();
    assert_eq!(out.results.len(), 3);
    assert!(out.results.iter().all(|s| !s.ok));
    assert_eq!(out.results[1].error.as_ref().unwrap().code, -32003);
    for i in [0, 2] {
        let e = out.results[i].error.as_ref().unwrap();
        assert!(e.message.contains("not run: step 2"), "{}", e.message);
    }
    assert!(
        !records(&rec).iter().any(|r| r["method"] == "action.invoke"),
        "no step may reach the action plugin: {:?}",
        records(&rec)
    );
    r.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_with_an_unknown_provenance_is_refused() {
    let plan =
        json!([{"op": "open_url", "args": {"url": "https://x.example"}, "provenance": "admin"}])
            .to_string();
    let r = runner(&["--plan", &plan]).await;
    let out = r
        .command("x", &CommandOptions::default(), None)
        .await
        .unwrap();
    let e = out.results[0].error.as_ref().unwrap();
    assert_eq!(e.code, -32602);
    assert!(
        e.message.contains("bad provenance \"admin\""),
        "{}",
        e.message
    );
    r.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stderr_floods_and_invalid_utf8_do_not_hurt() {
    let r = runner(&["--stderr-noise"]).await;
    assert_eq!(r.plugins()[0].status, PluginStatus::Ok);
    let out = r
        .command("open https://example.com", &CommandOptions::default(), None)
        .await
        .unwrap();
    assert!(out.results[0].ok, "{:?}", out.results[0]);
    let echo = r
        .supervisor()
        .call("t", "test.echo", json!({}), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(echo["epoch"], 0, "the plugin was never restarted");
    r.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_a_plugin_leaves_in_its_group_are_stopped_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("sleeper.pid");
    let r = runner(&["--spawn-sleeper", &pid_file.display().to_string()]).await;
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    r.shutdown().await;
    let gone = common::wait_for(Duration::from_secs(10), || {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat.split_whitespace().nth(2) == Some("Z"),
        }
    })
    .await;
    assert!(gone, "sleep {pid} outlived its plugin");
}

/// Whether `pid` is gone (or a zombie nobody reaped yet).
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.split_whitespace().nth(2) == Some("Z"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_crashes_takes_what_it_started_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("sleeper.pid");
    let r = runner(&["--spawn-sleeper", &pid_file.display().to_string()]).await;
    let read_pid = || -> i32 {
        std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let first = read_pid();
    assert!(!gone(first));
    // The plugin exits by itself (status 7): no drain asked it to.
    let _ = r
        .supervisor()
        .call("t", "test.die", json!({}), Duration::from_secs(5))
        .await;
    let back = common::wait_for(Duration::from_secs(30), || {
        r.plugins()[0].status == PluginStatus::Ok && r.plugins()[0].epoch == 1
    })
    .await;
    assert!(back, "{:?}", r.plugins()[0]);
    // Its sleeper went with its process group before the next instance started.
    assert!(
        gone(first),
        "sleep {first} outlived the plugin that crashed"
    );
    let second = read_pid();
    assert_ne!(first, second);
    assert!(!gone(second), "the new instance's sleeper runs");
    r.shutdown().await;
    assert!(
        common::wait_for(Duration::from_secs(10), || gone(second)).await,
        "sleep {second} outlived its plugin"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_start_says_the_exit_status_and_what_the_plugin_said() {
    let r = runner(&["--exit-before-hello"]).await;
    let report = &r.plugins()[0];
    let err = report.last_error.clone().unwrap_or_default();
    assert!(err.contains("exit status: 3"), "{err}");
    assert!(err.contains("exiting before hello, as asked"), "{err}");
    r.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_timeout_also_bounds_the_confirmation_wait() {
    let program = common::bin("utter-test-plugin");
    let text = format!(
        "config_version = 1\n[runner]\nconfirm_timeout_ms = 60000\n[policy]\nenabled_ops = [\"terminal\"]\n\
         [[plugin]]\nid = \"t\"\nkind = \"bundle\"\nentrypoint = {}\n",
        json!([program.display().to_string(), "--plan-op", "terminal"])
    );
    let loaded = config::parse(&text, "test.toml").expect("valid config");
    let options = SupervisorOptions::from_config(&loaded.config);
    let r = Runner::start(loaded, options, None).await;
    let command = CommandOptions {
        timeout_ms: Some(300),
        ..Default::default()
    };
    let out = r.command("terminal ls", &command, None).await.unwrap();
    let step = &out.results[0];
    assert!(!step.ok);
    assert_eq!(
        step.error.as_ref().map(|e| e.code),
        Some(-32003),
        "{step:?}"
    );
    assert!(
        r.confirmations.pending().is_empty(),
        "the question was withdrawn"
    );
    r.shutdown().await;
}
