//! A missing or incomplete model directory: the error names the missing files and how to
//! get them, from the library and from the real plugin binary over JSON-RPC. Needs no model.

mod support;

use support::Plugin;
use utter_protocol::serde_json::json;
use utter_stt_whisper::{LoadOptions, ModelError, Transcriber};

/// A directory with some of a model's files (contents do not matter to the check).
fn partial_model(files: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in files {
        std::fs::write(dir.path().join(name), b"not a real model").unwrap();
    }
    dir
}

#[test]
fn library_names_a_missing_directory() {
    let err = Transcriber::load(
        std::path::Path::new("/nonexistent/whisper-tiny"),
        &LoadOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(err, ModelError::NotFound { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("/nonexistent/whisper-tiny does not exist"),
        "{text}"
    );
    assert!(text.contains("nothing is downloaded"), "{text}");
}

#[test]
fn library_names_every_missing_file() {
    let dir = partial_model(&["config.json", "vocabulary.txt"]);
    let err = Transcriber::load(dir.path(), &LoadOptions::default()).unwrap_err();
    assert_eq!(err.missing(), ["model.bin", "tokenizer.json"]);
    let text = err.to_string();
    println!("{text}");
    assert!(
        text.contains("incomplete: missing model.bin, tokenizer.json."),
        "{text}"
    );
    // Each missing file comes with how to get it.
    assert!(text.contains("ct2-transformers-converter"), "{text}");
    assert!(text.contains("openai/whisper-tiny.en"), "{text}");
}

#[test]
fn library_reports_files_the_engine_rejects() {
    // Every file is present but none is a model: CTranslate2's refusal is passed on.
    let dir = partial_model(&[
        "model.bin",
        "config.json",
        "vocabulary.txt",
        "tokenizer.json",
    ]);
    let err = Transcriber::load(dir.path(), &LoadOptions::default()).unwrap_err();
    println!("{err}");
    assert!(matches!(err, ModelError::Load { .. }), "{err:?}");
    assert!(
        err.to_string().contains("cannot load the Whisper model"),
        "{err}"
    );
}

#[tokio::test]
async fn plugin_names_missing_files_over_json_rpc() {
    let plugin = Plugin::start(&[]).await;

    let err = plugin
        .call("stt.load", json!({"model": "/nonexistent/whisper-tiny"}))
        .await
        .unwrap_err();
    assert_eq!(err.code, -32602);
    assert!(
        err.message
            .contains("/nonexistent/whisper-tiny does not exist"),
        "{}",
        err.message
    );

    let dir = partial_model(&["model.bin", "config.json", "tokenizer.json"]);
    let model = dir.path().to_string_lossy().into_owned();
    let err = plugin
        .call("stt.load", json!({"model": model}))
        .await
        .unwrap_err();
    println!("{}", err.message);
    assert_eq!(err.code, -32602);
    assert!(
        err.message
            .contains("incomplete: missing vocabulary.json or vocabulary.txt."),
        "{}",
        err.message
    );
    let data = err.data.expect("data");
    assert_eq!(data["model"], model);
    assert_eq!(
        data["missing"],
        json!(["vocabulary.json or vocabulary.txt"])
    );

    // stt.transcribe with no model loaded says how to load one.
    let err = plugin
        .call(
            "stt.transcribe",
            json!({"samples_b64": "AAAAAA==", "format": "audio.pcm_f32le@1", "rate": 16000, "channels": 1}),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code, -32602);
    assert!(
        err.message.contains("no Whisper model is loaded"),
        "{}",
        err.message
    );
    assert!(err.message.contains("stt.load"), "{}", err.message);
}

#[tokio::test]
async fn a_bad_model_at_start_shows_in_health_and_in_transcribe() {
    let dir = partial_model(&["model.bin"]);
    let model = dir.path().to_string_lossy().into_owned();
    let plugin = Plugin::start(&[("UTTER_STT_MODEL", &model)]).await;
    let mut health = json!(null);
    for _ in 0..100 {
        health = plugin.call("plugin.health", json!({})).await.unwrap();
        if health["status"] == "degraded" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(health["status"], "degraded", "{health}");
    let detail = health["detail"].as_str().unwrap();
    assert!(detail.contains("UTTER_STT_MODEL"), "{detail}");
    assert!(detail.contains("missing config.json"), "{detail}");
    let err = plugin
        .call(
            "stt.transcribe",
            json!({"samples_b64": "AAAAAA==", "format": "audio.pcm_f32le@1", "rate": 16000, "channels": 1}),
        )
        .await
        .unwrap_err();
    assert!(
        err.message.contains("start-up load failed"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn wrong_audio_shapes_name_the_field() {
    let plugin = Plugin::start(&[]).await;
    let base = json!({"samples_b64": "AAAAAA==", "format": "audio.pcm_f32le@1", "rate": 16000, "channels": 1});
    let cases = [
        ("format", json!("audio.pcm_s16le@1"), "format: "),
        ("rate", json!(48000), "rate: 48000"),
        ("channels", json!(2), "channels: 2"),
        ("samples_b64", json!("AAAAAA"), "samples_b64 is not valid"),
        ("samples_b64", json!("AAAA"), "samples_b64: 3 bytes"),
        (
            "audio",
            json!("/tmp/audio.raw"),
            "audio: \"/tmp/audio.raw\" is not a handle",
        ),
    ];
    for (field, value, expected) in cases {
        let mut params = base.clone();
        if field == "audio" {
            params.as_object_mut().unwrap().remove("samples_b64");
        }
        params[field] = value;
        let err = plugin.call("stt.transcribe", params).await.unwrap_err();
        assert_eq!(err.code, -32602, "{field}: {}", err.message);
        assert!(err.message.contains(expected), "{field}: {}", err.message);
    }
    let mut missing = base.clone();
    missing.as_object_mut().unwrap().remove("rate");
    let err = plugin.call("stt.transcribe", missing).await.unwrap_err();
    assert!(err.message.contains("rate: missing"), "{}", err.message);
}
