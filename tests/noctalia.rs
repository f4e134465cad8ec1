//! The Noctalia bar widget's contract (`clients/noctalia/`): the JSON lines of
//! `utter events --json` and the array of `utter pending --json` it reads, and what it makes of
//! them. A real runner is driven through push-to-talk, a voice cycle and a confirmation; the
//! lines `utter events --json` printed are checked for every field the widget reads, then
//! fed, with the pending list, to the widget's own state file (`UtterState.js`, run under
//! node by `tests/noctalia/driver.js`), whose phase must follow: offline → idle → listening
//! → transcribing → … → confirm → idle. Hostile lines leave its state as it was.

use crate::common;

use common::Sandbox;
use common::daemon::{Daemon, LIMIT, TERMINAL_ON, write_config};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;
use utter_protocol::serde_json::{self, Value, json};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Feed `inputs` to the widget's state file under node; one output per input.
fn widget(inputs: &[Value]) -> Vec<Value> {
    let mut node = Command::new("node")
        .arg(root().join("tests/noctalia/driver.js"))
        .arg(root().join("clients/noctalia/UtterState.js"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs (tests/run.sh installs nodejs)");
    {
        let mut stdin = node.stdin.take().unwrap();
        for input in inputs {
            writeln!(stdin, "{input}").unwrap();
        }
    }
    let out = node.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the widget's state file failed under node: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let outputs: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(outputs.len(), inputs.len(), "one output per input");
    outputs
}

/// Fields the widget reads, by event: each must be there with its JSON type.
fn check_shape(event: &Value) {
    let is = |v: &Value, what: &str, ok: bool| assert!(ok, "{what} in {event}: {v}");
    match event["event"]
        .as_str()
        .expect("every line has an event tag")
    {
        "snapshot" => {
            let status = &event["status"];
            is(
                &status["state"],
                "status.state",
                status["state"].is_string(),
            );
            is(
                &status["ptt"]["listening"],
                "status.ptt.listening",
                status["ptt"]["listening"].is_boolean(),
            );
            for p in status["plugins"].as_array().expect("status.plugins") {
                is(&p["id"], "plugin id", p["id"].is_string());
                is(&p["status"], "plugin status", p["status"].is_string());
            }
        }
        "state" => is(&event["state"], "state", event["state"].is_string()),
        "plugin_state" => {
            is(&event["id"], "id", event["id"].is_string());
            is(&event["status"], "status", event["status"].is_string());
        }
        "ptt" => {
            let t = event["transition"].as_str().unwrap_or_default();
            is(
                &event["transition"],
                "transition",
                ["pressed", "released", "cancelled"].contains(&t),
            );
        }
        "voice_partial" => {
            is(&event["text"], "text", event["text"].is_string());
            is(
                &event["audio_ms"],
                "audio_ms",
                event["audio_ms"].is_number(),
            );
        }
        "voice" => {
            let o = event["outcome"].as_str().unwrap_or_default();
            is(
                &event["outcome"],
                "outcome",
                ["ok", "failed", "no-speech"].contains(&o),
            );
            is(
                &event["transcript"],
                "transcript",
                event["transcript"].is_string() || event["transcript"].is_null(),
            );
            if o == "failed" {
                is(&event["error"], "error", event["error"].is_string());
                is(&event["stage"], "stage", event["stage"].is_string());
            }
        }
        "command_finished" => {
            is(
                &event["undoable"],
                "undoable",
                event["undoable"].is_string() || event.get("undoable").is_none(),
            );
            for r in event["results"].as_array().expect("results") {
                is(&r["op"], "op", r["op"].is_string());
                is(&r["ok"], "ok", r["ok"].is_boolean());
                if r["ok"] == false {
                    is(
                        &r["error"]["message"],
                        "error.message",
                        r["error"]["message"].is_string() || r["detail"].is_string(),
                    );
                }
            }
        }
        "confirmation_requested" => {
            is(&event["id"], "id", event["id"].is_string());
            is(&event["op"], "op", event["op"].is_string());
            is(&event["summary"], "summary", event["summary"].is_string());
            is(&event["expires"], "expires", event["expires"].is_u64());
        }
        "confirmation_resolved" => {
            is(&event["id"], "id", event["id"].is_string());
            is(
                &event["approved"],
                "approved",
                event["approved"].is_boolean(),
            );
        }
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_widget_follows_a_real_runner_through_voice_and_a_confirmation() {
    let sb = Sandbox::new();
    let config = write_config(
        &sb,
        &format!("{TERMINAL_ON}[ptt]\nportal = false\nmin_hold_ms = 50\n"),
    );
    let daemon = Daemon::start(&sb, &config, None).await;

    // `utter events --json`, as the widget's Main.qml runs it.
    let mut cmd = Command::new(common::bin("utter"));
    cmd.args(["events", "--json", "--socket"])
        .arg(&daemon.socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    common::daemon::env(&sb, "client-state").apply(&mut cmd);
    let mut events = cmd.spawn().expect("utter events starts");
    let rx = common::stdout_lines(events.stdout.take().unwrap());
    let mut lines: Vec<String> = Vec::new();
    let wait_for = |lines: &mut Vec<String>, what: &dyn Fn(&Value) -> bool| {
        let deadline = std::time::Instant::now() + LIMIT;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = rx
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no such event in time; got {lines:#?}"));
            lines.push(line.clone());
            if what(&serde_json::from_str(&line).unwrap()) {
                return;
            }
        }
    };
    wait_for(&mut lines, &|e| e["event"] == "snapshot");

    // Push-to-talk, held past min_hold_ms: pressed, then released (this runner has no
    // voice loop, so no voice event follows).
    let press = daemon.utter(&sb, &["ptt", "press"]).await;
    assert_eq!(press.code, Some(0), "{press}");
    wait_for(&mut lines, &|e| e["transition"] == "pressed");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let release = daemon.utter(&sb, &["ptt", "release"]).await;
    assert_eq!(release.code, Some(0), "{release}");
    wait_for(&mut lines, &|e| e["transition"] == "released");

    // A step that needs a yes: asked of a client that does not answer.
    let mut asker = daemon.client().await;
    let command = asker
        .command_waiting_for_a_yes("terminal echo from the bar")
        .await;
    wait_for(&mut lines, &|e| e["event"] == "confirmation_requested");
    let pending = daemon.utter(&sb, &["pending", "--json"]).await;
    assert_eq!(pending.code, Some(0), "{pending}");
    let id = pending.json()[0]["id"].as_str().unwrap().to_owned();
    // The panel's Approve button runs exactly this.
    let approve = daemon.utter(&sb, &["confirm", &id, "yes"]).await;
    assert_eq!(approve.code, Some(0), "{approve}");
    wait_for(&mut lines, &|e| e["event"] == "command_finished");
    let outcome = command.await.unwrap().expect("the command finished");
    assert_eq!(outcome["results"][0]["ok"], true, "{outcome}");
    let _ = events.kill();
    let _ = events.wait();

    // Every line carries the fields the widget reads.
    let parsed: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for event in &parsed {
        check_shape(event);
    }

    // The widget's phases, line by line (the pending list read right after the snapshot, as
    // Main.qml does).
    let mut inputs = vec![json!({"line": lines[0]}), json!({"pending": "[]"})];
    inputs.extend(lines[1..].iter().map(|l| json!({"line": l})));
    inputs.push(json!({"disconnected": true}));
    let outputs = widget(&inputs);
    // Output k follows input k: the snapshot (0), the pending list (1), then line i at i + 1.
    let phase_after = |pred: &dyn Fn(&Value) -> bool| -> String {
        let i = parsed.iter().position(pred).expect("that event");
        let at = if i == 0 { 1 } else { i + 1 };
        outputs[at]["phase"].as_str().unwrap().to_owned()
    };
    assert_eq!(
        phase_after(&|e| e["event"] == "snapshot"),
        "idle",
        "{outputs:#?}"
    );
    assert_eq!(phase_after(&|e| e["transition"] == "pressed"), "listening");
    // No voice loop here (status.voice.state "off"): a release waits for nothing.
    assert_eq!(parsed[0]["status"]["voice"]["state"], "off");
    assert_eq!(phase_after(&|e| e["transition"] == "released"), "idle");
    assert_eq!(
        phase_after(&|e| e["event"] == "confirmation_requested"),
        "confirm"
    );
    assert_eq!(
        phase_after(&|e| e["event"] == "confirmation_resolved"),
        "idle"
    );
    let last = &outputs[outputs.len() - 2];
    assert_eq!(last["state"]["pending"], json!([]), "{last}");
    assert_eq!(last["state"]["lastResult"]["ok"], true, "{last}");
    assert_eq!(
        last["state"]["lastResult"]["text"], "done: terminal",
        "{last}"
    );
    // The command acted, so the panel offers to undo it (the runner's journal).
    assert_eq!(
        last["state"]["undoable"], "terminal echo from the bar",
        "{last}"
    );
    // Nothing had acted when it subscribed.
    assert_eq!(outputs[0]["state"]["undoable"], "", "{:?}", outputs[0]);
    assert_eq!(outputs[0]["state"]["dictation"], false, "{:?}", outputs[0]);
    // The dictation event, as the runner's own type serialises it, turns the mode on.
    let on = serde_json::to_string(&utter_ipc::Event::Dictation { on: true }).unwrap();
    let dictating = widget(&[json!({"line": lines[0]}), json!({"line": on})]);
    assert_eq!(dictating[1]["state"]["dictation"], true, "{dictating:?}");
    assert_eq!(outputs.last().unwrap()["phase"], "offline");
    assert_eq!(outputs.last().unwrap()["icon"], "microphone-off");

    // With a voice loop: the same snapshot with voice ready, the real ptt lines, and voice
    // events serialised from the runner's own type (a failed cycle, then one whose command is
    // the outcome this runner just returned).
    let mut voice_snapshot = parsed[0].clone();
    voice_snapshot["status"]["voice"]["state"] = json!("ready");
    let pressed = lines
        .iter()
        .find(|l| l.contains("\"pressed\""))
        .unwrap()
        .clone();
    let released = lines
        .iter()
        .find(|l| l.contains("\"released\""))
        .unwrap()
        .clone();
    let voice =
        |outcome: &str, error: Option<&str>, transcript: Option<&str>, command: Option<Value>| {
            let event = utter_ipc::Event::Voice(Box::new(utter_ipc::VoiceReport {
                outcome: outcome.to_owned(),
                stage: error.map(|_| "stt".to_owned()),
                error: error.map(str::to_owned),
                transcript: transcript.map(str::to_owned),
                command,
                audio: None,
                timings: Default::default(),
                hypotheses: Vec::new(),
            }));
            let line = serde_json::to_string(&event).unwrap();
            check_shape(&serde_json::from_str(&line).unwrap());
            json!({"line": line})
        };
    let partial = |text: &str| {
        let event = utter_ipc::Event::VoicePartial(utter_ipc::VoicePartial {
            text: text.to_owned(),
            audio_ms: 1200.0,
            inference_ms: Some(140.0),
        });
        let line = serde_json::to_string(&event).unwrap();
        check_shape(&serde_json::from_str(&line).unwrap());
        json!({"line": line})
    };
    let out = widget(&[
        json!({"line": voice_snapshot.to_string()}),
        json!({"line": pressed}),
        partial("open fire"),
        json!({"line": released}),
        voice(
            "failed",
            Some("the speech model tiny.en is not installed"),
            None,
            None,
        ),
        json!({"line": pressed}),
        json!({"line": released}),
        voice(
            "ok",
            None,
            Some("terminal echo from the bar"),
            Some(outcome.clone()),
        ),
        json!({"line": pressed}),
        json!({"line": released}),
        json!({"timed_out": true}),
    ]);
    let phases: Vec<&str> = out.iter().map(|o| o["phase"].as_str().unwrap()).collect();
    assert_eq!(
        phases,
        [
            "idle",
            "listening",
            "listening",
            "transcribing",
            "error",
            "listening",
            "transcribing",
            "idle",
            "listening",
            "transcribing",
            "error"
        ],
        "{out:#?}"
    );
    // What was heard so far shows while the key is held, and goes with the release.
    assert_eq!(out[2]["describe"], "Listening… “open fire”", "{out:#?}");
    assert_eq!(out[3]["state"]["partial"], "open fire");
    assert_eq!(out[5]["describe"], "Listening…", "{out:#?}");
    assert_eq!(
        out[4]["describe"],
        "the speech model tiny.en is not installed"
    );
    assert_eq!(out[4]["icon"], "alert-triangle");
    assert_eq!(
        out[7]["state"]["lastTranscript"],
        "terminal echo from the bar"
    );
    assert_eq!(out[7]["state"]["lastResult"]["text"], "done: terminal");
    assert_eq!(out[7]["describe"], "Last: terminal echo from the bar");
    assert_eq!(
        out[10]["state"]["lastError"],
        "no result from the voice loop"
    );

    // A confirmation asked before the widget subscribed comes from `utter pending --json`.
    let asked_before = json!([{
        "id": "0123456789abcdef0123456789abcdef", "op": "terminal",
        "args": {"command": "ls"}, "provenance": "user", "summary": "run ls in a terminal",
        "digest": "x", "created": 1, "expires": 2
    }]);
    let out = widget(&[
        json!({"line": lines[0]}),
        json!({"pending": asked_before.to_string()}),
    ]);
    assert_eq!(out[1]["phase"], "confirm", "{out:#?}");
    assert_eq!(
        out[1]["describe"],
        "Waiting for your answer: run ls in a terminal"
    );
}

#[test]
fn hostile_lines_leave_the_widget_as_it_was() {
    let snapshot = json!({"event": "snapshot", "status": {
        "state": "ready", "ptt": {"listening": false}, "plugins": [{"id": "rules", "status": "ok"}]
    }})
    .to_string();
    let hostile = [
        "".to_owned(),
        "not json".to_owned(),
        "[1,2,3]".to_owned(),
        "null".to_owned(),
        "{\"event\": 5}".to_owned(),
        "{\"no_event\": true}".to_owned(),
        "{\"event\": \"from_a_newer_runner\", \"x\": 1}".to_owned(),
        "{\"event\": \"confirmation_resolved\"}".to_owned(),
        "{\"event\": \"ptt\", \"transition\": {\"nested\": true}}".to_owned(),
        "{\"event\": \"snap".to_owned(),
        format!(
            "{{\"event\": \"voice\", \"outcome\": \"{}\"",
            "x".repeat(1 << 20)
        ),
    ];
    let mut inputs = vec![json!({"line": snapshot})];
    inputs.extend(hostile.iter().map(|l| json!({"line": l})));
    inputs.push(json!({"pending": "{\"not\": \"a list\"}"}));
    inputs.push(json!({"pending": "garbage"}));
    let out = widget(&inputs);
    let first = &out[0];
    assert_eq!(first["phase"], "idle");
    for (i, o) in out.iter().enumerate().skip(1) {
        assert_eq!(
            o["state"], first["state"],
            "input {i} changed the state: {o}"
        );
    }
    // A command_finished with results that are not what a runner sends does not break it.
    let out = widget(&[
        json!({"line": snapshot}),
        json!({"line": json!({"event": "command_finished", "results": "nope"}).to_string()}),
        json!({"line": json!({"event": "command_finished", "results": [null, 7]}).to_string()}),
    ]);
    assert_eq!(out[1]["state"]["lastResult"]["text"], "nothing to do");
    assert_eq!(out[2]["state"]["lastResult"]["ok"], false);
}

#[test]
fn the_plugin_names_every_entry_point_it_ships() {
    let dir = root().join("clients/noctalia");
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap())
            .expect("manifest.json is JSON");
    assert_eq!(manifest["id"], "utter");
    let entries = manifest["entryPoints"].as_object().expect("entryPoints");
    for key in ["main", "barWidget", "panel", "settings"] {
        let file = entries[key].as_str().unwrap_or_else(|| panic!("{key}"));
        let text =
            std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(text.contains("property var pluginApi"), "{file}");
    }
    // Main.qml runs the commands this contract is about, as list arguments.
    let main = std::fs::read_to_string(dir.join("Main.qml")).unwrap();
    for needle in [
        "\"events\", \"--json\"",
        "\"pending\", \"--json\"",
        "[\"ptt\", \"toggle\"]",
        "[\"confirm\", id, approved ? \"yes\" : \"no\"]",
    ] {
        assert!(main.contains(needle), "Main.qml lacks {needle}");
    }
    for key in ["utterCommand", "hideWhenIdle", "restartDelayMs"] {
        assert!(
            !manifest["metadata"]["defaultSettings"][key].is_null(),
            "default for {key}"
        );
    }
}

/// Qt's own linter on every QML and JavaScript file of the plugin. Quickshell's and
/// Noctalia's modules (`Quickshell`, `qs.Commons`, `qs.Widgets`, …) are not installable here,
/// so the checks that need their types (imports, types, unqualified names, properties) are
/// off; syntax, JavaScript and the rest stay on. tests/run.sh installs qmllint
/// (qt6-declarative-dev-tools).
#[test]
fn qmllint_passes_on_what_it_can_check_here() {
    let dir = root().join("clients/noctalia");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "qml" || e == "js"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "{files:?}");
    let out = Command::new("/usr/lib/qt6/bin/qmllint")
        .args([
            "--import",
            "disable",
            "--type",
            "disable",
            "--unqualified",
            "disable",
        ])
        .args(["--property", "disable", "--unused-imports", "disable"])
        .args(["--required", "disable"])
        .args(&files)
        .output()
        .expect("qmllint runs (tests/run.sh installs qt6-declarative-dev-tools)");
    assert!(
        out.status.success(),
        "qmllint: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // And it does find what it checks: a broken copy fails.
    let broken = tempfile::tempdir().unwrap();
    let copy = broken.path().join("BarWidget.qml");
    let text = std::fs::read_to_string(dir.join("BarWidget.qml")).unwrap();
    std::fs::write(&copy, text.replacen("visible:", "visible: (", 1)).unwrap();
    let out = Command::new("/usr/lib/qt6/bin/qmllint")
        .args([
            "--import",
            "disable",
            "--type",
            "disable",
            "--unqualified",
            "disable",
        ])
        .arg(&copy)
        .output()
        .unwrap();
    assert!(!out.status.success(), "a syntax error passes qmllint");
}
