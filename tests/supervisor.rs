//! The supervisor against real child processes (`utter-test-plugin`, which misbehaves on
//! command): handshake, version and capability failures, crashes, timeouts, drain.

use crate::common;

use std::path::Path;
use std::time::Duration;
use utter_core::config;
use utter_core::supervisor::{PluginStatus, Supervisor, SupervisorOptions};
use utter_protocol::serde_json::{Value, json};

/// A config with one `[[plugin]]` per (id, args) running the test plugin.
fn config_for(plugins: &[(&str, &[&str])], runner_extra: &str) -> config::Config {
    let program = common::bin("utter-test-plugin");
    let mut text = format!("config_version = 1\n[runner]\nrpc_timeout_ms = 5000\n{runner_extra}\n");
    for (id, args) in plugins {
        let mut argv = vec![program.display().to_string()];
        argv.extend(args.iter().map(|s| s.to_string()));
        text.push_str(&format!(
            "[[plugin]]\nid = \"{id}\"\nkind = \"bundle\"\nentrypoint = {}\n",
            json!(argv)
        ));
    }
    config::parse(&text, "test.toml")
        .expect("test config is valid")
        .config
}

async fn start(plugins: &[(&str, &[&str])], runner_extra: &str) -> Supervisor {
    let config = config_for(plugins, runner_extra);
    Supervisor::start(&config, SupervisorOptions::from_config(&config)).await
}

fn status_of(sup: &Supervisor, id: &str) -> (PluginStatus, u64, Option<String>) {
    let p = sup
        .plugins()
        .into_iter()
        .find(|p| p.id == id)
        .expect("plugin listed");
    (p.status, p.epoch, p.last_error)
}

async fn wait_status(sup: &Supervisor, id: &str, status: PluginStatus, epoch: u64) -> bool {
    common::wait_for(Duration::from_secs(20), || {
        let (s, e, _) = status_of(sup, id);
        s == status && e == epoch
    })
    .await
}

/// `test.echo` on plugin `id`: its params, epoch and pid.
async fn echo(sup: &Supervisor, id: &str) -> Value {
    sup.call(id, "test.echo", json!({}), Duration::from_secs(5))
        .await
        .expect("test.echo answers")
}

fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| utter_protocol::serde_json::from_str(l).ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_succeeds_and_calls_are_served() {
    let sup = start(&[("t", &["--provides", "experimental/test@1"])], "").await;
    let (status, epoch, err) = status_of(&sup, "t");
    assert_eq!((status, epoch, err), (PluginStatus::Ok, 0, None));
    let report = &sup.plugins()[0];
    assert_eq!(report.provides, vec!["experimental/test@1"]);
    assert!(report.methods.contains(&"test.echo".to_string()));
    let echo = sup
        .call("t", "test.echo", json!({"x": 1}), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(echo["params"], json!({"x": 1}));
    assert_eq!(echo["epoch"], 0);
    sup.shutdown().await;
    assert_eq!(status_of(&sup, "t").0, PluginStatus::Stopped);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_major_mismatch_is_refused_with_minus_32004() {
    let sup = start(
        &[("old", &["--protocol", "2.0"]), ("abi", &["--abi", "9"])],
        "",
    )
    .await;
    for id in ["old", "abi"] {
        let (status, _, err) = status_of(&sup, id);
        assert_eq!(status, PluginStatus::Error);
        assert!(
            err.as_deref().unwrap_or("").contains("[-32004]"),
            "{id}: {err:?}"
        );
    }
    let call = sup
        .call("old", "test.echo", json!({}), Duration::from_secs(1))
        .await
        .unwrap_err();
    assert_eq!(call.code, -32000);
    sup.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_minor_version_is_accepted_with_a_warning() {
    // The runner speaks 1.0; a 1.x plugin with a newer minor is spoken to at 1.0.
    let sup = start(&[("newer", &["--protocol", "1.2"])], "").await;
    let report = &sup.plugins()[0];
    assert_eq!(report.status, PluginStatus::Ok);
    assert!(
        report.warnings.iter().any(|w| w.contains("newer")),
        "{:?}",
        report.warnings
    );
    sup.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_requires_fail_closed_and_order_does_not_matter() {
    let sup = start(
        &[
            ("needy", &["--requires", "context.live@1"]),
            ("lonely", &["--requires", "perception.a11y@1"]),
            ("provider", &["--provides", "context.live@1"]),
        ],
        "",
    )
    .await;
    // `needy` is satisfied by a plugin listed after it.
    assert_eq!(status_of(&sup, "needy").0, PluginStatus::Ok);
    assert_eq!(status_of(&sup, "provider").0, PluginStatus::Ok);
    let (status, _, err) = status_of(&sup, "lonely");
    assert_eq!(status, PluginStatus::Error);
    let err = err.unwrap_or_default();
    assert!(
        err.contains("[-32005]") && err.contains("perception.a11y@1"),
        "{err}"
    );
    sup.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_dies_mid_request_fails_the_call_and_comes_back_with_a_new_epoch() {
    let sup = start(&[("t", &[])], "").await;
    let first_pid = echo(&sup, "t").await["pid"].clone();
    // A long timeout: the error must come from the crash, not from the clock.
    let err = sup
        .call("t", "test.die", json!({}), Duration::from_secs(50))
        .await
        .unwrap_err();
    assert_eq!(err.code, -32000, "{err:?}");
    assert!(
        wait_status(&sup, "t", PluginStatus::Ok, 1).await,
        "{:?}",
        sup.plugins()
    );
    let echo = echo(&sup, "t").await;
    assert_eq!(echo["epoch"], 1);
    assert_ne!(echo["pid"], first_pid);
    assert_eq!(sup.plugins()[0].restarts, 1);
    sup.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_never_answers_times_out_and_is_sent_cancel() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("rec.jsonl");
    let rec_arg = rec.display().to_string();
    let sup = start(&[("t", &["--record", &rec_arg])], "").await;
    let err = sup
        .call("t", "test.hang", json!({}), Duration::from_millis(300))
        .await
        .unwrap_err();
    assert_eq!(err.code, -32001);
    let id = err
        .data
        .as_ref()
        .and_then(|d| d.get("id"))
        .cloned()
        .expect("timeout data has the id");
    assert!(id.as_str().is_some_and(|s| s.starts_with("0:")), "{id}");
    let got_cancel = common::wait_for(Duration::from_secs(10), || {
        records(&rec)
            .iter()
            .any(|r| r["notification"] == "$/cancel" && r["params"]["id"] == id)
    })
    .await;
    assert!(got_cancel, "no $/cancel for {id}: {:?}", records(&rec));
    // The plugin is still the same instance and still serves.
    let echo = echo(&sup, "t").await;
    assert_eq!(echo["epoch"], 0);
    sup.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_stream_restarts_the_plugin() {
    let sup = start(&[("t", &[])], "").await;
    let err = sup
        .call("t", "test.garbage", json!({}), Duration::from_secs(30))
        .await
        .unwrap_err();
    assert_eq!(err.code, -32000, "{err:?}");
    assert!(
        wait_status(&sup, "t", PluginStatus::Ok, 1).await,
        "{:?}",
        sup.plugins()
    );
    let echo = echo(&sup, "t").await;
    assert_eq!(echo["epoch"], 1);
    sup.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_json_from_a_plugin_is_answered_and_the_plugin_keeps_its_epoch() {
    let sup = start(&[("t", &[])], "").await;
    let sent = sup
        .call("t", "test.badjson", json!({}), Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(sent["sent"], "a frame of invalid JSON");
    assert_eq!(
        sent["error_reports"], 1,
        "the runner answers the bad frame with -32700"
    );
    // The stream stayed in step: same instance, still serving.
    let echo = sup
        .call(
            "t",
            "test.echo",
            json!({"after": true}),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
    assert_eq!(
        (echo["epoch"].clone(), echo["params"].clone()),
        (json!(0), json!({"after": true}))
    );
    assert_eq!(status_of(&sup, "t"), (PluginStatus::Ok, 0, None));
    sup.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_restarts_only_what_changed() {
    let sup = start(&[("keep", &[]), ("change", &[]), ("drop", &[])], "").await;
    let pid = |id: &str| {
        sup.plugins()
            .into_iter()
            .find(|p| p.id == id)
            .and_then(|p| p.pid)
    };
    let (keep_pid, change_pid) = (pid("keep"), pid("change"));
    let new = config_for(
        &[
            ("keep", &[]),
            ("change", &["--provides", "experimental/x@1"]),
            ("add", &[]),
        ],
        "",
    );
    let report = sup.reload(&new, SupervisorOptions::from_config(&new)).await;
    assert_eq!(report.unchanged, vec!["keep"]);
    assert_eq!(report.restarted, vec!["change"]);
    assert_eq!(report.removed, vec!["drop"]);
    assert_eq!(report.added, vec!["add"]);
    let ids: Vec<String> = sup.plugins().into_iter().map(|p| p.id).collect();
    assert_eq!(ids, vec!["keep", "change", "add"]);
    assert_eq!(status_of(&sup, "keep"), (PluginStatus::Ok, 0, None));
    assert_eq!(pid("keep"), keep_pid);
    assert_eq!(status_of(&sup, "change"), (PluginStatus::Ok, 1, None));
    assert_ne!(pid("change"), change_pid);
    assert_eq!(status_of(&sup, "add"), (PluginStatus::Ok, 0, None));
    assert!(
        sup.call("drop", "test.echo", json!({}), Duration::from_secs(1))
            .await
            .is_err()
    );
    sup.shutdown().await;
}

fn process_alive(pid: i32) -> bool {
    // A reaped process has no /proc entry; a zombie would show state Z.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.split_whitespace().nth(2).is_none_or(|s| s != "Z"),
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_that_ignore_eof_and_sigterm_are_still_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let pid_a = dir.path().join("a.pid");
    let pid_b = dir.path().join("b.pid");
    let rec = dir.path().join("rec.jsonl");
    let (a, b, r) = (
        pid_a.display().to_string(),
        pid_b.display().to_string(),
        rec.display().to_string(),
    );
    let sup = start(
        &[
            ("deaf", &["--ignore-eof", "--pid-file", &a, "--record", &r]),
            (
                "stubborn",
                &["--ignore-eof", "--ignore-term", "--pid-file", &b],
            ),
        ],
        "drain_timeout_ms = 200\nkill_timeout_ms = 200",
    )
    .await;
    let pids: Vec<i32> = [&pid_a, &pid_b]
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap().trim().parse().unwrap())
        .collect();
    assert!(pids.iter().all(|&p| process_alive(p)));
    sup.shutdown().await;
    for pid in pids {
        assert!(!process_alive(pid), "pid {pid} survived shutdown");
    }
    // The drain began with end of file on stdin.
    assert!(records(&rec).iter().any(|r| r["eof"] == true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_keeps_crashing_is_shown_as_crash_looping() {
    let sup = start(&[("t", &["--exit-before-hello"])], "").await;
    let mut events = sup.events();
    let looped = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match events.recv().await {
                Ok(e) if e.status == PluginStatus::CrashLoop => return e,
                Ok(_) => continue,
                Err(e) => panic!("event stream ended: {e}"),
            }
        }
    })
    .await
    .expect("crash-loop reached within 30 s");
    assert!(looped.epoch >= 4, "{looped:?}");
    assert_eq!(status_of(&sup, "t").0, PluginStatus::CrashLoop);
    sup.shutdown().await;
}

#[tokio::test]
async fn a_plugin_whose_program_was_missing_starts_on_reload_once_installed() {
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("later-plugin");
    let text = format!(
        "config_version = 1\n[[plugin]]\nid = \"later\"\nkind = \"bundle\"\nentrypoint = [{:?}]\n",
        program.display().to_string()
    );
    let config = config::parse(&text, "test.toml").unwrap().config;
    let sup = Supervisor::start(&config, SupervisorOptions::from_config(&config)).await;
    let (status, _, error) = status_of(&sup, "later");
    assert_eq!(status, PluginStatus::Error);
    let error = error.unwrap_or_default();
    assert!(
        error.contains("program not found") && error.contains("utter reload"),
        "{error}"
    );
    // The plugin is installed; the same entry, reloaded, is tried again.
    std::fs::copy(common::bin("utter-test-plugin"), &program).unwrap();
    let report = sup
        .reload(&config, SupervisorOptions::from_config(&config))
        .await;
    assert_eq!(report.restarted, ["later"], "{report:?}");
    assert!(wait_status(&sup, "later", PluginStatus::Ok, 1).await);
    echo(&sup, "later").await;
    // A running plugin with an unchanged entry is left alone.
    let report = sup
        .reload(&config, SupervisorOptions::from_config(&config))
        .await;
    assert_eq!(report.unchanged, ["later"], "{report:?}");
    sup.shutdown().await;
}

/// Status is truthful through a crash: `error` (with the instance's reason, its own last
/// stderr lines and when it is tried again) from the moment the process is seen gone, never
/// `ok` while it is down, then `starting` and `ok` with the next epoch. The stderr quoted
/// is that of the instance that failed, not of an earlier one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_says_error_with_the_failed_instances_own_words_while_it_is_down() {
    let dir = tempfile::tempdir().unwrap();
    let count = dir.path().join("count");
    let script = dir.path().join("plugin.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nn=$(cat {c} 2>/dev/null || echo 0)\necho $((n + 1)) > {c}\necho \"instance $n says hello\" >&2\nexec {p}\n",
            c = count.display(),
            p = common::bin("utter-test-plugin").display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = script.display().to_string();
    let text = format!(
        "config_version = 1\n[runner]\nrpc_timeout_ms = 5000\n[[plugin]]\nid = \"t\"\nkind = \"bundle\"\nentrypoint = [{script:?}]\n"
    );
    let config = config::parse(&text, "test.toml").unwrap().config;
    let sup = Supervisor::start(&config, SupervisorOptions::from_config(&config)).await;
    assert!(
        wait_status(&sup, "t", PluginStatus::Ok, 0).await,
        "{:?}",
        sup.plugins()
    );
    for dying in 0..2u64 {
        let mut events = sup.events();
        let _ = sup
            .call("t", "test.die", json!({}), Duration::from_secs(30))
            .await;
        // While it is down (the backoff, then the next start), last_error is complete once
        // it says when the next try is.
        // The call fails when the connection closes; the watch task sees the exit a moment
        // later, and from then on the status is not ok until the next epoch is.
        assert!(
            common::wait_for(Duration::from_secs(10), || status_of(&sup, "t").0
                != PluginStatus::Ok
                || status_of(&sup, "t").1 > dying)
            .await
        );
        let mut report = None;
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while report.is_none() && std::time::Instant::now() < deadline {
            let (status, epoch, error) = status_of(&sup, "t");
            assert!(
                !(status == PluginStatus::Ok && epoch == dying),
                "ok while down? {error:?}"
            );
            report = error.filter(|e| e.contains("restarting in"));
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let report = report.expect("a complete report while it was down");
        assert!(
            report.starts_with(&format!("epoch {dying} exited with")),
            "{report}"
        );
        assert!(
            report.contains(&format!("instance {dying} says hello")),
            "{report}"
        );
        if dying > 0 {
            assert!(
                !report.contains("instance 0 says"),
                "an earlier instance's words: {report}"
            );
        }
        assert!(
            wait_status(&sup, "t", PluginStatus::Ok, dying + 1).await,
            "{:?}",
            sup.plugins()
        );
        let mut seen = Vec::new();
        while let Ok(e) = events.try_recv() {
            seen.push((e.status, e.epoch));
        }
        assert_eq!(
            seen,
            vec![
                (PluginStatus::Error, dying),
                (PluginStatus::Starting, dying + 1),
                (PluginStatus::Ok, dying + 1)
            ],
            "the status on the way down and up"
        );
    }
    sup.shutdown().await;
}

/// A plugin that declares a body it never sends cannot stay in step: it is restarted, not
/// left deaf with every later reply read as part of that body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_declaring_an_absurd_length_is_restarted() {
    let sup = start(&[("t", &[])], "").await;
    let err = sup
        .call("t", "test.oversized", json!({}), Duration::from_secs(30))
        .await
        .unwrap_err();
    assert_eq!(err.code, -32000, "the call fails at once: {err:?}");
    assert!(
        wait_status(&sup, "t", PluginStatus::Ok, 1).await,
        "{:?}",
        sup.plugins()
    );
    assert_eq!(echo(&sup, "t").await["epoch"], 1);
    sup.shutdown().await;
}

/// An entrypoint that can never run is `error` at once, with the reason, and is not retried
/// as a crash (the older behaviour: `starting` for ever, EACCES on every retry).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_or_a_non_executable_entrypoint_is_an_error_not_a_crash_loop() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain");
    std::fs::write(&plain, "text").unwrap();
    for (program, needle) in [
        (dir.path().display().to_string(), "is a directory"),
        (plain.display().to_string(), "is not executable"),
    ] {
        let text = format!(
            "config_version = 1\n[[plugin]]\nid = \"t\"\nkind = \"bundle\"\nentrypoint = [{program:?}]\n"
        );
        let config = config::parse(&text, "test.toml").unwrap().config;
        let sup = Supervisor::start(&config, SupervisorOptions::from_config(&config)).await;
        let (status, _, error) = status_of(&sup, "t");
        assert_eq!(status, PluginStatus::Error, "{program}: {error:?}");
        let error = error.unwrap_or_default();
        assert!(error.contains(needle), "{error}");
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(sup.plugins()[0].restarts, 0, "not retried");
        assert_eq!(status_of(&sup, "t").0, PluginStatus::Error);
        sup.shutdown().await;
    }
}
