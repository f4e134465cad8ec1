//! The real plugin binary with no PipeWire to talk to (an empty runtime directory): every
//! request gets a clear answer, hostile params are refused with `-32602` naming the field,
//! the plugin keeps serving after each of them, and it exits when its stdin closes.

mod support;

use std::time::Duration;
use support::{ChildEnv, Host};
use utter_protocol::serde_json::{Value, json};

fn no_pipewire(dir: &std::path::Path) -> ChildEnv {
    vec![
        ("XDG_RUNTIME_DIR", dir.into()),
        ("PIPEWIRE_RUNTIME_DIR", dir.into()),
        ("HOME", dir.into()),
    ]
}

async fn still_serving(host: &Host) {
    let status = host
        .call("audio.status", json!({}))
        .await
        .expect("audio.status still answers");
    assert!(status["state"].is_string(), "{status}");
}

#[tokio::test]
async fn without_pipewire_errors_are_clear_and_the_plugin_serves_on() {
    let (_dir, dir) = support::scratch();
    let host = Host::start(&no_pipewire(&dir)).await;
    assert_eq!(host.health["status"], "ok", "{}", host.health);

    let err = host.call("audio.sources", json!({})).await.unwrap_err();
    assert_eq!(err.code, -32000, "{err}");
    assert!(err.message.contains("PipeWire is not running"), "{err}");
    let err = host.call("audio.configure", json!({})).await.unwrap_err();
    assert_eq!(err.code, -32000, "{err}");
    assert!(err.message.contains("PipeWire is not running"), "{err}");
    let status = host.call("audio.status", json!({})).await.unwrap();
    assert_eq!(status["configured"], true, "{status}");
    assert_eq!(status["state"], "failed", "{status}");
    assert!(
        status["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("PipeWire is not running")),
        "{status}"
    );
    let health = host.call("plugin.health", json!({})).await.unwrap();
    assert_eq!(health["status"], "degraded", "{health}");
    let err = host.call("audio.begin", json!({})).await.unwrap_err();
    assert!(err.message.contains("PipeWire is not running"), "{err}");
    let err = host.call("audio.end", json!({})).await.unwrap_err();
    assert!(err.message.contains("no utterance"), "{err}");
    let err = host.call("audio.peek", json!({})).await.unwrap_err();
    assert!(err.message.contains("no utterance"), "{err}");

    let exit = host.close_and_wait(Duration::from_secs(10)).await;
    assert!(exit.success(), "{exit}");
}

#[tokio::test]
async fn hostile_params_are_refused_and_the_plugin_keeps_answering() {
    let (_dir, dir) = support::scratch();
    let host = Host::start(&no_pipewire(&dir)).await;
    let huge_name = "m".repeat(100_000);
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "audio.configure",
            json!({"source": 5}),
            "source must be a string",
        ),
        (
            "audio.configure",
            json!({"source": true}),
            "source must be a string",
        ),
        (
            "audio.configure",
            json!({"source": "mic\u{0}evil"}),
            "not a PipeWire node name",
        ),
        (
            "audio.configure",
            json!({"source": "mic\n"}),
            "not a PipeWire node name",
        ),
        (
            "audio.configure",
            json!({"source": huge_name}),
            "at most 512",
        ),
        ("audio.configure", json!({"pre_roll_ms": -1}), "pre_roll_ms"),
        (
            "audio.configure",
            json!({"pre_roll_ms": 1e20}),
            "pre_roll_ms",
        ),
        (
            "audio.configure",
            json!({"pre_roll_ms": 18446744073709551615u64}),
            "pre_roll_ms",
        ),
        (
            "audio.configure",
            json!({"pre_roll_ms": "300"}),
            "pre_roll_ms",
        ),
        ("audio.configure", json!({"max_seconds": 0}), "max_seconds"),
        (
            "audio.configure",
            json!({"max_seconds": 601}),
            "max_seconds",
        ),
        (
            "audio.configure",
            json!({"max_seconds": -30}),
            "max_seconds",
        ),
        (
            "audio.configure",
            json!({"vad": "loud"}),
            "vad must be an object",
        ),
        (
            "audio.configure",
            json!({"vad": [1, 2]}),
            "vad must be an object",
        ),
        ("audio.configure", json!({"vad": {"trim": 1}}), "vad.trim"),
        (
            "audio.configure",
            json!({"vad": {"silence_threshold_db": 10}}),
            "silence_threshold_db",
        ),
        (
            "audio.configure",
            json!({"vad": {"silence_threshold_db": -1e300}}),
            "silence_threshold_db",
        ),
        (
            "audio.configure",
            json!({"vad": {"margin_ms": 1e9}}),
            "vad.margin_ms",
        ),
        (
            "audio.configure",
            json!({"vad": {"min_speech_ms": -1}}),
            "vad.min_speech_ms",
        ),
        ("audio.record", json!({}), "seconds"),
        ("audio.record", json!({"seconds": -3}), "seconds"),
        ("audio.record", json!({"seconds": 0}), "seconds"),
        ("audio.record", json!({"seconds": "2"}), "seconds"),
        ("audio.record", json!({"seconds": null}), "seconds"),
        ("audio.record", json!({"seconds": {"n": 1}}), "seconds"),
        (
            "audio.record",
            json!({"seconds": 1, "keep_silence": "no"}),
            "keep_silence",
        ),
        ("audio.end", json!({"keep_silence": [true]}), "keep_silence"),
        // Not an object: refused by the protocol layer, never reaching a handler.
        ("audio.configure", json!([1, 2]), "params"),
        ("audio.begin", json!("start"), "params"),
        ("audio.record", json!(3), "params"),
        ("audio.peek", json!([true]), "params"),
    ];
    for (method, params, field) in &cases {
        let err = host
            .call(method, params.clone())
            .await
            .expect_err("refused");
        assert_eq!(err.code, -32602, "{method} {params}: {err}");
        assert!(err.message.contains(field), "{method} {params}: {err}");
        assert!(err.message.len() < 500, "short message: {err}");
        still_serving(&host).await;
    }
    // Nothing was configured by any of them.
    let status = host.call("audio.status", json!({})).await.unwrap();
    assert_eq!(status["configured"], false, "{status}");

    // Valid params, but nothing to record from: a state error, not a crash.
    let err = host
        .call("audio.record", json!({"seconds": 1e300}))
        .await
        .unwrap_err();
    assert_eq!(err.code, -32000, "{err}");
    assert!(err.message.contains("audio.configure first"), "{err}");
    let err = host.call("audio.nope", json!({})).await.unwrap_err();
    assert_eq!(err.code, -32601, "{err}");

    // Many bad requests at once: every one answered.
    let calls = (0..64).map(|i| {
        host.call(
            "audio.configure",
            json!({"pre_roll_ms": -i, "vad": {"margin_ms": "x"}}),
        )
    });
    for answer in futures::future::join_all(calls).await {
        assert_eq!(answer.unwrap_err().code, -32602);
    }
    still_serving(&host).await;

    let exit = host.close_and_wait(Duration::from_secs(10)).await;
    assert!(exit.success(), "{exit}");
}
