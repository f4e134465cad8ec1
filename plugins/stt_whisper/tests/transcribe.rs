//! Real speech: commands spoken by espeak-ng (two voices), transcribed by Whisper tiny.en
//! (fetched by tests/fetch-whisper-model.sh), then planned by the rules router.

mod support;

use std::time::Instant;
use support::{Plugin, loose, model_dir, samples_b64, speak};
use utter_protocol::Incoming;
use utter_protocol::serde_json::{Value, json};
use utter_rules::apps::AppEntry;
use utter_rules::phrases::{Curated, PhraseTable};
use utter_rules::rules::{self, Matched};
use utter_rules::sites::Catalog;
use utter_rules::text;
use utter_stt_whisper::{CHUNK_SAMPLES, LoadOptions, SAMPLE_RATE, Transcriber};

/// espeak-ng's default voice.
const DEFAULT_VOICE: &[&str] = &[];
/// The US English voice, slower.
const US_SLOW: &[&str] = &["-v", "en-us", "-s", "140"];

/// What the rules router plans for `utterance` (no installed applications): `(op, args)`.
fn plan(catalog: &Catalog, utterance: &str) -> Option<(String, Value)> {
    let normalized = text::normalize(utterance);
    let curated = Curated::builtin().expect("built-in compositor phrases");
    let sources = rules::Sources {
        catalog,
        apps: &Vec::<AppEntry>::new(),
        curated: &curated,
        binds: &PhraseTable::new(),
        context: None,
        utterance,
        profiles: rules::builtin_profiles(),
        words: rules::builtin_words(),
    };
    rules::plan(text::strip_fillers(&normalized), &sources)
        .map(|Matched { op, args, .. }| (op.to_owned(), args))
}

#[test]
fn ten_spoken_commands_route_to_the_right_plan() {
    let catalog = Catalog::builtin().expect("built-in site catalog");
    let commands: [(&str, &[&str]); 10] = [
        ("open youtube", DEFAULT_VOICE),
        ("open github", US_SLOW),
        ("pause the music", DEFAULT_VOICE),
        ("next track", US_SLOW),
        ("open wikipedia", DEFAULT_VOICE),
        ("go to reddit", US_SLOW),
        ("open netflix", DEFAULT_VOICE),
        ("previous track", US_SLOW),
        ("open stack overflow", DEFAULT_VOICE),
        ("stop the music", US_SLOW),
    ];
    let started = Instant::now();
    let whisper = Transcriber::load(&model_dir(), &LoadOptions::default()).expect("model loads");
    println!("model loaded in {} ms", started.elapsed().as_millis());

    let mut right = 0;
    let mut report = Vec::new();
    for (command, voice) in commands {
        let expected = plan(&catalog, command)
            .unwrap_or_else(|| panic!("the rules router has no plan for {command:?} itself"));
        let samples = speak(command, voice);
        let transcript = whisper
            .transcribe(&samples, Some("en"))
            .expect("transcribes");
        let got = plan(&catalog, &transcript.text);
        let ok = got.as_ref() == Some(&expected);
        right += usize::from(ok);
        let line = format!(
            "{} {command:?} (voice {voice:?}) -> {:?} [{} ms audio, {} ms inference] -> {}",
            if ok { "ok  " } else { "MISS" },
            transcript.text,
            transcript.audio.as_millis(),
            transcript.inference.as_millis(),
            got.map_or("no plan".into(), |(op, args)| format!("{op} {args}")),
        );
        println!("{line}");
        report.push(line);
        assert_eq!(transcript.language.as_deref(), Some("en"));
        assert_eq!(transcript.chunks, 1);
    }
    println!("{right}/10 planned right");
    assert!(
        right >= 9,
        "only {right}/10 commands planned right:\n{}",
        report.join("\n")
    );
}

/// [`loose`] without spaces: "Open Git Hub." and "open github" are the same.
fn squashed(text: &str) -> String {
    loose(text).replace(' ', "")
}

/// Start the plugin and load the test model through `stt.load`.
async fn loaded_plugin() -> Plugin {
    let plugin = Plugin::start(&[]).await;
    let model = model_dir();
    let loaded = plugin
        .call("stt.load", json!({"model": model, "language": "en"}))
        .await
        .expect("stt.load");
    println!("stt.load -> {loaded}");
    assert_eq!(
        loaded["model"],
        model.canonicalize().unwrap().to_string_lossy().as_ref()
    );
    assert_eq!(loaded["cached"], false);
    assert_eq!(loaded["multilingual"], false);
    assert!(loaded["load_ms"].is_u64());
    let again = plugin
        .call("stt.load", json!({"model": model}))
        .await
        .expect("stt.load again");
    assert_eq!(again["cached"], true);
    assert_eq!(again["language"], "en");
    // A language the English-only model cannot do is refused at load time, naming the
    // field, and the default stays as it was.
    let refused = plugin
        .call("stt.load", json!({"model": model, "language": "de"}))
        .await
        .unwrap_err();
    assert_eq!(refused.code, -32602, "{}", refused.message);
    assert!(
        refused.message.starts_with("language: "),
        "{}",
        refused.message
    );
    let kept = plugin
        .call("stt.load", json!({"model": model}))
        .await
        .expect("stt.load after a refusal");
    assert_eq!(kept["language"], "en");
    plugin
}

#[tokio::test(flavor = "multi_thread")]
async fn plugin_transcribes_inline_samples_and_emits_final() {
    let mut plugin = loaded_plugin().await;
    plugin.subscribe("stt.partial").await;
    plugin.subscribe("stt.final").await;
    let samples = speak("open youtube", DEFAULT_VOICE);
    let result = plugin
        .call(
            "stt.transcribe",
            json!({
                "samples_b64": samples_b64(&samples),
                "format": "audio.pcm_f32le@1", "rate": 16000, "channels": 1,
            }),
        )
        .await
        .expect("stt.transcribe");
    println!("stt.transcribe -> {result}");
    assert_eq!(squashed(result["text"].as_str().unwrap()), "openyoutube");
    assert_eq!(result["language"], "en");
    assert_eq!(
        result["audio_ms"],
        (samples.len() as u64 * 1000) / u64::from(SAMPLE_RATE)
    );
    assert!(result["inference_ms"].is_u64());

    // The same text went out on the stt.final stream, and nothing on stt.partial (one window).
    let notes = plugin.frames(1).await;
    let finals: Vec<_> = notes.iter().filter(|(m, _)| m == "stt.final").collect();
    assert_eq!(finals.len(), 1, "{notes:?}");
    assert_eq!(finals[0].1["text"], result["text"]);
    assert!(notes.iter().all(|(m, _)| m != "stt.partial"), "{notes:?}");

    // A language an English-only model cannot do is refused, naming the field.
    let err = plugin
        .call(
            "stt.transcribe",
            json!({
                "samples_b64": samples_b64(&samples[..1600]), "language": "de",
                "format": "audio.pcm_f32le@1", "rate": 16000, "channels": 1,
            }),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code, -32602);
    assert!(err.message.starts_with("language: "), "{}", err.message);
}

#[tokio::test(flavor = "multi_thread")]
async fn long_audio_is_cut_into_30_second_windows_with_partials() {
    let mut plugin = loaded_plugin().await;
    plugin.subscribe("stt.partial").await;
    // "open youtube", silence up to 30 s, then "open github" in the second window.
    let mut samples = speak("open youtube", DEFAULT_VOICE);
    samples.resize(CHUNK_SAMPLES, 0.0);
    samples.extend(speak("open github", DEFAULT_VOICE));
    let result = plugin
        .call(
            "stt.transcribe",
            json!({
                "samples_b64": samples_b64(&samples),
                "format": "audio.pcm_f32le@1", "rate": 16000, "channels": 1,
            }),
        )
        .await
        .expect("stt.transcribe");
    println!("stt.transcribe (long) -> {result}");
    assert_eq!(result["chunks"], 2);
    let text = loose(result["text"].as_str().unwrap());
    assert!(
        text.contains("youtube") && text.contains("github"),
        "{text}"
    );
    let notes = plugin.frames(2).await;
    let partials: Vec<&Value> = notes
        .iter()
        .filter(|(m, _)| m == "stt.partial")
        .map(|(_, p)| p)
        .collect();
    assert_eq!(partials.len(), 2, "{notes:?}");
    assert_eq!(partials[0]["chunk"], 0);
    assert_eq!(partials[1]["chunk"], 1);
    assert!(loose(partials[0]["text"].as_str().unwrap()).contains("youtube"));
    assert!(loose(partials[1]["text"].as_str().unwrap()).contains("github"));
}

/// The plugin reads `audio` handles with ranged `handle.fetch {handle, offset, length}`.
/// Here the test answers those requests itself, the way PROTOCOL.md §10.1 describes the
/// runner's reply (`{data_b64, offset, length, size}`, at most 64 KiB each).
#[tokio::test(flavor = "multi_thread")]
async fn plugin_reads_audio_handles_in_ranges() {
    use base64::Engine as _;
    let mut plugin = loaded_plugin().await;
    let samples = speak("next track", US_SLOW);
    let bytes: Vec<u8> = samples.iter().flat_map(|s| s.to_le_bytes()).collect();
    let digest = utter_protocol::digest::sha256_hex(&bytes);
    let handle = format!("handle://{digest}");

    let conn = plugin.conn.clone();
    let call = tokio::spawn({
        let handle = handle.clone();
        async move {
            conn.request(
                "stt.transcribe",
                json!({"audio": handle, "format": "audio.pcm_f32le@1", "rate": 16000, "channels": 1}),
                Some(std::time::Duration::from_secs(120)),
            )
            .await
        }
    });
    let mut reads = Vec::new();
    while let Some(msg) = plugin.incoming.recv().await {
        let Incoming::Request(req) = msg else {
            continue;
        };
        assert_eq!(req.method, "handle.fetch");
        assert_eq!(req.params["handle"], handle);
        let offset = req.params["offset"].as_u64().unwrap() as usize;
        let length = req.params["length"].as_u64().unwrap() as usize;
        assert!(length <= 65536);
        let end = (offset + length).min(bytes.len());
        reads.push((offset, end - offset));
        let reply = json!({
            "data_b64": base64::engine::general_purpose::STANDARD.encode(&bytes[offset..end]),
            "offset": offset, "length": end - offset, "size": bytes.len(),
        });
        plugin.conn.respond(req.id, Ok(reply)).await.unwrap();
        if end == bytes.len() {
            break;
        }
    }
    let result = call.await.unwrap().expect("stt.transcribe");
    println!(
        "{} bytes read in {} ranges -> {result}",
        bytes.len(),
        reads.len()
    );
    assert_eq!(reads.len(), bytes.len().div_ceil(65536));
    assert_eq!(reads[0], (0, 65536));
    assert_eq!(squashed(result["text"].as_str().unwrap()), "nexttrack");
}
