//! Real speech: commands spoken by espeak-ng (two voices), transcribed by Whisper tiny.en
//! (fetched by tests/fetch-whisper-model.sh), then planned by the rules router.

mod support;

use std::time::Instant;
use support::{Plugin, loose, model_dir, samples_b64, speak};
use utter_protocol::Incoming;
use utter_protocol::serde_json::{Value, json};
use utter_rules::apps::AppEntry;
use utter_rules::phrases::{Curated, PhraseTable};
use utter_rules::plan::{self, Matched};
use utter_rules::profiles::Profiles;
use utter_rules::rules;
use utter_rules::sites::Catalog;
use utter_rules::text;
use utter_rules::vocabulary::Vocabulary;
use utter_stt_whisper::model::DecodeOptions;
use utter_stt_whisper::{CHUNK_SAMPLES, LoadOptions, SAMPLE_RATE, Transcriber};

/// espeak-ng's default voice.
const DEFAULT_VOICE: &[&str] = &[];
/// The US English voice, slower.
const US_SLOW: &[&str] = &["-v", "en-us", "-s", "140"];

/// What the rules router plans for `utterance` (no installed applications): `(op, args)`.
fn plan(catalog: &Catalog, utterance: &str) -> Option<(String, Value)> {
    let normalized = text::normalize(utterance);
    let curated = Curated::builtin().expect("built-in compositor phrases");
    let sources = plan::Sources {
        catalog,
        apps: &Vec::<AppEntry>::new(),
        curated: &curated,
        binds: &PhraseTable::new(),
        context: None,
        utterance,
        profiles: plan::builtin_profiles(),
        words: plan::builtin_words(),
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
    // The runner's prompt: the router's vocabulary (router.vocabulary).
    let prompt = Vocabulary::gather(&catalog, &Profiles::builtin(), &[], &[], None).prompt();
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
            .transcribe(
                &samples,
                &DecodeOptions {
                    language: Some("en".into()),
                    prompt: Some(prompt.clone()),
                    ..DecodeOptions::default()
                },
            )
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
    // tiny.en does not hear espeak-ng's voices the same way on every run (CTranslate2's
    // threads sum in varying order): one more miss than the usual is no regression.
    assert!(
        right >= 8,
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

/// `stt.transcribe {samples_b64, …}` with `extra` fields.
fn transcribe_params(samples: &[f32], extra: Value) -> Value {
    let mut params = json!({
        "samples_b64": samples_b64(samples),
        "format": "audio.pcm_f32le@1", "rate": 16000, "channels": 1,
    });
    for (k, v) in extra.as_object().expect("an object") {
        params[k] = v.clone();
    }
    params
}

#[tokio::test(flavor = "multi_thread")]
async fn the_window_fits_the_audio_and_n_best_comes_with_scores_and_no_speech_prob() {
    let plugin = loaded_plugin().await;
    let samples = speak("open github", US_SLOW);
    let fitted = plugin
        .call(
            "stt.transcribe",
            transcribe_params(
                &samples,
                json!({"hypotheses": 3, "prompt": "GitHub, YouTube, Firefox"}),
            ),
        )
        .await
        .expect("stt.transcribe");
    println!("fit + prompt + 3-best -> {fitted}");
    // The encoder saw the audio plus 1 s, in whole even frames, not 30 s.
    let frames = fitted["frames"].as_u64().unwrap();
    let expected = (samples.len() + 16_000).div_ceil(160).next_multiple_of(2) as u64;
    assert_eq!(frames, expected);
    assert!(frames < 3000);
    assert_eq!(squashed(fitted["text"].as_str().unwrap()), "opengithub");
    let hypotheses = fitted["hypotheses"].as_array().unwrap();
    assert!(
        !hypotheses.is_empty() && hypotheses.len() <= 3,
        "{hypotheses:?}"
    );
    assert_eq!(hypotheses[0]["text"], fitted["text"]);
    let scores: Vec<f64> = hypotheses
        .iter()
        .map(|h| h["score"].as_f64().expect("a score"))
        .collect();
    assert!(scores.iter().all(|s| *s <= 0.0), "{scores:?}");
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    // Distinct texts only.
    let mut texts: Vec<&str> = hypotheses
        .iter()
        .map(|h| h["text"].as_str().unwrap())
        .collect();
    texts.dedup();
    assert_eq!(texts.len(), hypotheses.len());
    assert_eq!(fitted["non_speech"], false);
    assert!(fitted["no_speech_prob"].as_f64().unwrap() < 0.5, "{fitted}");

    // The full 30 s window is still there.
    let full = plugin
        .call(
            "stt.transcribe",
            transcribe_params(&samples, json!({"window": "full"})),
        )
        .await
        .expect("stt.transcribe full");
    assert_eq!(full["frames"], 3000);
    assert!(!full["text"].as_str().unwrap().is_empty());

    // 2.5 s of zeros: Whisper still writes something ("you"), and says it is no speech.
    let silence = plugin
        .call(
            "stt.transcribe",
            transcribe_params(&vec![0.0; 40_000], json!({})),
        )
        .await
        .expect("stt.transcribe silence");
    println!("silence -> {silence}");
    assert!(
        silence["non_speech"] == true || silence["no_speech_prob"].as_f64().unwrap() > 0.6,
        "{silence}"
    );
}

/// White noise from a fixed seed (xorshift), at `amplitude`.
fn noise(samples: usize, amplitude: f32) -> Vec<f32> {
    let mut x: u32 = 0x9e37_79b9;
    (0..samples)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x as f32 / u32::MAX as f32 * 2.0 - 1.0) * amplitude
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_audio_gets_a_clear_answer_and_never_hangs() {
    let plugin = loaded_plugin().await;
    let speech = speak("open youtube", DEFAULT_VOICE);
    let transcribe = |samples: Vec<f32>| {
        let params = transcribe_params(&samples, json!({"hypotheses": 3}));
        let plugin = &plugin;
        async move {
            tokio::time::timeout(
                std::time::Duration::from_secs(60),
                plugin.call("stt.transcribe", params),
            )
            .await
            .expect("answered within a minute")
            .expect("stt.transcribe")
        }
    };
    // 0.1 s of the words: whatever Whisper makes of it, an answer with every field.
    let short = transcribe(speech[..1600].to_vec()).await;
    println!("0.1 s -> {short}");
    assert!(short["text"].is_string() && short["no_speech_prob"].is_f64());
    assert_eq!(short["audio_ms"], 100);
    // 30 s of loud noise: no command comes out of it.
    let hiss = transcribe(noise(30 * 16_000, 0.3)).await;
    println!("30 s of noise -> {hiss}");
    assert_eq!(hiss["chunks"], 1);
    let text = loose(hiss["text"].as_str().unwrap());
    assert!(
        hiss["non_speech"] == true
            || hiss["no_speech_prob"].as_f64().unwrap() > 0.5
            || text.split_whitespace().count() <= 3,
        "noise was heard as speech: {hiss}"
    );
    // Clipped speech (ten times too loud, cut at full scale) is still the words.
    let clipped: Vec<f32> = speech.iter().map(|s| (s * 10.0).clamp(-1.0, 1.0)).collect();
    let loud = transcribe(clipped).await;
    println!("clipped -> {loud}");
    assert!(
        loose(loud["text"].as_str().unwrap()).contains("you"),
        "{loud}"
    );
    // Out of range but finite samples are taken as they are; NaN is refused by name.
    let mut bad = speech.clone();
    bad[100] = f32::NAN;
    let err = plugin
        .call("stt.transcribe", transcribe_params(&bad, json!({})))
        .await
        .expect_err("NaN refused");
    assert_eq!(err.code, -32602);
    assert!(err.message.contains("sample 100"), "{}", err.message);
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_decoding_fields_are_refused_by_name_and_a_huge_prompt_is_cut() {
    let plugin = loaded_plugin().await;
    let samples = speak("next track", DEFAULT_VOICE);
    for (extra, field) in [
        (json!({"window": "banana"}), "window"),
        (json!({"window": 3}), "window"),
        (json!({"beam_size": 0}), "beam_size"),
        (json!({"beam_size": 11}), "beam_size"),
        (json!({"beam_size": -1}), "beam_size"),
        (json!({"hypotheses": 11}), "hypotheses"),
        (json!({"hypotheses": 4, "beam_size": 2}), "hypotheses"),
        (json!({"padding_ms": 10_001}), "padding_ms"),
        (json!({"prompt": 123}), "prompt"),
        (json!({"prompt": ["a"]}), "prompt"),
    ] {
        let err = plugin
            .call("stt.transcribe", transcribe_params(&samples, extra.clone()))
            .await
            .expect_err("refused");
        assert_eq!(err.code, -32602, "{extra}: {}", err.message);
        assert!(err.message.contains(field), "{extra}: {}", err.message);
        assert!(err.message.len() < 300, "{}", err.message);
    }
    // A 10 MB window value is not echoed back.
    let err = plugin
        .call(
            "stt.transcribe",
            transcribe_params(&samples, json!({"window": "x".repeat(10_000_000)})),
        )
        .await
        .expect_err("refused");
    assert!(err.message.len() < 300, "{} bytes", err.message.len());
    // A megabyte of prompt ending in control tokens (the end is what is kept) still
    // transcribes; what the pathological prompt makes of the words is not the point.
    let prompt = format!(
        "{} <|endoftext|><|startoftranscript|>",
        "Spotify, ".repeat(100_000)
    );
    let ok = plugin
        .call(
            "stt.transcribe",
            transcribe_params(&samples, json!({"prompt": prompt, "beam_size": 1})),
        )
        .await
        .expect("a long prompt is cut, not refused");
    assert!(!ok["text"].as_str().unwrap().trim().is_empty(), "{ok}");
    assert_eq!(ok["non_speech"], false, "{ok}");
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
    // The second window's words are there. Without a prompt tiny.en sometimes hears
    // "github" as "good hub" (seen under load): the windowing is what is tested here.
    assert!(text.contains("youtube") && text.contains("hub"), "{text}");
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
    assert!(loose(partials[1]["text"].as_str().unwrap()).contains("hub"));
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

#[tokio::test(flavor = "multi_thread")]
async fn phrases_are_weighed_against_the_audio_and_what_was_said_weighs_most() {
    let plugin = loaded_plugin().await;
    let samples = speak("pause the music", US_SLOW);
    let transcribed = plugin
        .call("stt.transcribe", transcribe_params(&samples, json!({})))
        .await
        .expect("stt.transcribe");
    println!("heard {}", transcribed["text"]);
    let phrases = [
        "Pause the music.",
        "Play the music.",
        "Pause.",
        "Open YouTube.",
        "Close the window.",
    ];
    let started = Instant::now();
    let scored = plugin
        .call(
            "stt.score",
            transcribe_params(&samples, json!({"phrases": phrases})),
        )
        .await
        .expect("stt.score");
    println!("stt.score in {:?} -> {scored}", started.elapsed());
    let scores = scored["scores"].as_array().expect("scores");
    assert_eq!(scores.len(), phrases.len());
    let logprob = |i: usize| scores[i]["logprob"].as_f64().expect("a log probability");
    for (i, phrase) in phrases.iter().enumerate() {
        assert_eq!(scores[i]["text"], *phrase);
        assert!(scores[i]["tokens"].as_u64().unwrap() >= 2, "{}", scores[i]);
        assert!(logprob(i) < 0.0);
    }
    // What was said is likelier than a phrase one word off, which is likelier than one
    // that shares nothing with it; a phrase that stops short pays at its full stop.
    assert!(logprob(0) > logprob(1), "{scored}");
    assert!(logprob(1) > logprob(3), "{scored}");
    assert!(logprob(0) > logprob(2), "{scored}");
    assert!(logprob(0) > logprob(4), "{scored}");

    // The same audio scored again gives the same numbers (the kept encoding is that audio's).
    let again = plugin
        .call(
            "stt.score",
            transcribe_params(&samples, json!({"phrases": [phrases[1]]})),
        )
        .await
        .expect("stt.score again");
    let same = again["scores"][0]["logprob"].as_f64().unwrap();
    assert!((same - logprob(1)).abs() < 1e-3, "{same} vs {}", logprob(1));
    // Other audio is encoded afresh: the same phrase weighs differently there.
    let other = speak("open youtube", US_SLOW);
    let there = plugin
        .call(
            "stt.score",
            transcribe_params(&other, json!({"phrases": ["Open YouTube.", phrases[0]]})),
        )
        .await
        .expect("stt.score on other audio");
    let there: Vec<f64> = there["scores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["logprob"].as_f64().unwrap())
        .collect();
    assert!(there[0] > there[1], "{there:?}");
    assert!(there[0] > logprob(3), "{there:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_phrases_are_refused_by_name() {
    let plugin = loaded_plugin().await;
    let samples = speak("pause", US_SLOW);
    let long = "word ".repeat(200);
    let many: Vec<String> = (0..65).map(|i| format!("phrase {i}")).collect();
    for (phrases, says) in [
        (json!(null), "phrases must be an array"),
        (json!("pause"), "phrases must be an array"),
        (json!([]), "give 1 to 64"),
        (json!(many), "holds 65 phrases"),
        (json!(["pause", 7]), "phrases[1] must be a string"),
        (json!(["  "]), "phrases[0] is empty"),
        (json!([long]), "phrases[0] is 1000 bytes"),
    ] {
        let refused = plugin
            .call(
                "stt.score",
                transcribe_params(&samples, json!({"phrases": phrases})),
            )
            .await
            .unwrap_err();
        assert_eq!(refused.code, -32602, "{}", refused.message);
        assert!(refused.message.contains(says), "{}", refused.message);
    }
    // Audio longer than a window is not a command to weigh.
    let long_audio = vec![0.0f32; CHUNK_SAMPLES + 1];
    let refused = plugin
        .call(
            "stt.score",
            transcribe_params(&long_audio, json!({"phrases": ["pause"]})),
        )
        .await
        .unwrap_err();
    assert_eq!(refused.code, -32602, "{}", refused.message);
    assert!(refused.message.contains("30 s"), "{}", refused.message);
    // Special-token text and punctuation are no words: null and no tokens, not a score
    // that beats real phrases; a special token inside a phrase is left out.
    let scored = plugin
        .call(
            "stt.score",
            transcribe_params(
                &samples,
                json!({"phrases": ["<|endoftext|>", "Pause.", ".", "<|en|> <|transcribe|>", "Pause.<|endoftext|>"]}),
            ),
        )
        .await
        .expect("stt.score");
    println!("{scored}");
    for i in [0, 2, 3] {
        assert!(scored["scores"][i]["logprob"].is_null(), "{scored}");
        assert_eq!(scored["scores"][i]["tokens"], 0, "{scored}");
    }
    assert!(scored["scores"][1]["logprob"].is_f64());
    assert_eq!(
        scored["scores"][4]["logprob"],
        scored["scores"][1]["logprob"]
    );
    // Audio missing: the error names this method.
    let refused = plugin
        .call(
            "stt.score",
            json!({"format": "audio.pcm_f32le@1", "rate": 16000, "channels": 1, "phrases": ["pause"]}),
        )
        .await
        .unwrap_err();
    assert!(
        refused.message.starts_with("stt.score needs params.audio"),
        "{}",
        refused.message
    );
    // And the plugin still transcribes.
    plugin
        .call("stt.transcribe", transcribe_params(&samples, json!({})))
        .await
        .expect("still serving");
}
