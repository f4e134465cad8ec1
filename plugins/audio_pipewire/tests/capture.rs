//! The real `utter-audio-pipewire` binary on a real, private PipeWire with a virtual
//! microphone (see `support`), driven the way the runner drives it: the handshake, then
//! `audio.*` requests, with this test answering the plugin's `handle.create` calls.
//!
//! One test walks through everything that needs the microphone in order (one PipeWire
//! session costs seconds to start, and the machine has two cores): sources, a missing
//! source, push-to-talk speech, silence, cancel, timed recordings, a refused hand-off, the
//! source going away, and stdin EOF.

mod support;

use std::time::{Duration, Instant};
use support::{FAKE_MIC, Host, PipeWireSession, espeak_wav, f32_samples, read_wav, scratch};
use utter_audio_pipewire::Utterance;
use utter_audio_pipewire::dsp::{self, GateSettings};
use utter_protocol::serde_json::{Value, json};

/// The gate's verdict on the WAV file itself: what a perfect capture would report.
fn reference(wav: &std::path::Path) -> Utterance {
    let (samples, rate, channels) = read_wav(wav);
    Utterance::from_interleaved(&samples, rate, channels, &GateSettings::default(), false)
        .expect("the reference resamples")
}

fn ms(v: &Value) -> Duration {
    Duration::from_millis(v.as_u64().unwrap_or_else(|| panic!("not ms: {v}")))
}

/// Check an `audio.end`/`audio.record` result that stored speech; returns the samples.
fn stored_speech(host: &Host, result: &Value) -> Vec<f32> {
    assert_eq!(result["format"], "audio.pcm_f32le@1", "{result}");
    assert_eq!(result["rate"], 16_000, "{result}");
    assert_eq!(result["channels"], 1, "{result}");
    let handle = result["handle"]
        .as_str()
        .unwrap_or_else(|| panic!("no handle: {result}"));
    let digest = handle.strip_prefix("handle://").expect("handle://");
    assert_eq!(digest.len(), 64, "{handle}");
    let bytes = host.blob(handle).expect("the host holds the blob");
    let samples = f32_samples(&bytes);
    assert_eq!(result["samples"], samples.len(), "{result}");
    assert_eq!(result["bytes"], bytes.len(), "{result}");
    assert!(samples.iter().all(|s| s.is_finite() && s.abs() <= 1.5));
    for key in ["flush_ms", "encode_ms", "handoff_ms"] {
        assert!(
            result[key].as_f64().is_some_and(|v| v >= 0.0),
            "{key}: {result}"
        );
    }
    samples
}

#[tokio::test]
async fn capture_over_the_protocol_on_real_pipewire() {
    let mut pw = PipeWireSession::start();
    let (_dir, dir) = scratch();
    let wav = dir.join("open_youtube.wav");
    espeak_wav("open youtube", &wav);
    let expected = reference(&wav);
    assert!(expected.has_speech);

    let host = Host::start(&pw.env()).await;

    // The handshake, as the supervisor reads it.
    assert_eq!(host.hello["plugin"]["kind"], "audio", "{}", host.hello);
    assert_eq!(host.hello["plugin"]["name"], "audio_pipewire");
    let provides = host.hello["provides"].as_array().expect("provides");
    for cap in [
        "audio.capture@1",
        "audio.pcm_f32le@1",
        "audio.rate.16000@1",
        "audio.channels.1@1",
    ] {
        assert!(provides.contains(&json!(cap)), "{cap}: {}", host.hello);
    }
    assert_eq!(
        host.describe["side_effect_free"],
        json!(["audio.sources", "audio.status"]),
        "{}",
        host.describe
    );
    for method in [
        "audio.configure",
        "audio.sources",
        "audio.status",
        "audio.begin",
        "audio.end",
        "audio.cancel",
        "audio.record",
        "audio.peek",
    ] {
        assert!(
            host.describe["methods"]
                .as_array()
                .expect("methods")
                .contains(&json!(method)),
            "{method}: {}",
            host.describe
        );
    }
    assert_eq!(host.health["status"], "ok", "{}", host.health);

    // The sources.
    let listed = host.call("audio.sources", json!({})).await.unwrap();
    let sources = listed["sources"].as_array().expect("sources");
    let mic = sources
        .iter()
        .find(|s| s["name"] == FAKE_MIC)
        .unwrap_or_else(|| panic!("{FAKE_MIC} is not listed: {listed}"));
    assert_eq!(mic["media_class"], "Audio/Source", "{mic}");
    assert_eq!(mic["channels"], 1, "pw-loopback made a mono source: {mic}");
    assert!(mic["id"].as_u64().is_some(), "{mic}");
    assert!(mic["is_default"].is_boolean(), "{mic}");
    assert!(
        !sources.iter().any(|s| s["name"] == "fake_mic_sink"),
        "a sink is no source: {listed}"
    );

    // Nothing is configured yet.
    let status = host.call("audio.status", json!({})).await.unwrap();
    assert_eq!(status["state"], "unconfigured", "{status}");
    let err = host.call("audio.begin", json!({})).await.unwrap_err();
    assert_eq!(err.code, -32000);
    assert!(err.message.contains("audio.configure"), "{err}");

    // A missing source: -32602 naming it and listing what there is; no fallback.
    let err = host
        .call("audio.configure", json!({"source": "no_such_mic"}))
        .await
        .unwrap_err();
    assert_eq!(err.code, -32602, "{err}");
    assert!(err.message.contains("\"no_such_mic\""), "{err}");
    assert!(
        err.message
            .contains(&format!("available sources: {FAKE_MIC}")),
        "{err}"
    );
    assert_eq!(
        err.data,
        Some(json!({"source": "no_such_mic", "available": [FAKE_MIC]}))
    );
    let status = host.call("audio.status", json!({})).await.unwrap();
    assert_eq!(status["state"], "failed", "{status}");
    assert!(status["capture"].is_null(), "{status}");
    // begin tries the configured source again, and still refuses to use another one.
    let err = host.call("audio.begin", json!({})).await.unwrap_err();
    assert_eq!(err.code, -32000, "{err}");
    assert!(
        err.message.contains("\"no_such_mic\" does not exist"),
        "{err}"
    );

    // The virtual microphone.
    let opened = host
        .call("audio.configure", json!({"source": FAKE_MIC}))
        .await
        .unwrap();
    assert_eq!(opened["status"], "reopened", "{opened}");
    assert_eq!(opened["source"], FAKE_MIC, "{opened}");
    assert_eq!(opened["channels"], 1, "{opened}");
    assert!(opened["rate"].as_u64().is_some_and(|r| r > 0), "{opened}");
    assert_eq!(opened["settings"]["pre_roll_ms"], 300, "defaults: {opened}");
    assert_eq!(opened["settings"]["vad"]["silence_threshold_db"], -50.0);
    let same = host
        .call(
            "audio.configure",
            json!({"source": FAKE_MIC, "pre_roll_ms": 300, "vad": {"trim": true}}),
        )
        .await
        .unwrap();
    assert_eq!(same["status"], "unchanged", "{same}");
    let frames_before = host.call("audio.status", json!({})).await.unwrap()["capture"]["frames"]
        .as_u64()
        .expect("frames");
    let gate_only = host
        .call(
            "audio.configure",
            json!({"source": FAKE_MIC, "vad": {"silence_threshold_db": -45}}),
        )
        .await
        .unwrap();
    assert_eq!(gate_only["status"], "updated", "{gate_only}");
    let status = host.call("audio.status", json!({})).await.unwrap();
    assert_eq!(status["state"], "streaming", "{status}");
    assert_eq!(status["capture"]["linked_source"], FAKE_MIC, "{status}");
    assert!(
        status["capture"]["frames"].as_u64() >= Some(frames_before),
        "the same stream kept running: {status}"
    );
    assert_eq!(status["settings"]["vad"]["silence_threshold_db"], -45.0);
    host.call("audio.configure", json!({"source": FAKE_MIC}))
        .await
        .unwrap();
    let health = host.call("plugin.health", json!({})).await.unwrap();
    assert_eq!(health["status"], "ok", "{health}");
    assert!(
        health["detail"]
            .as_str()
            .unwrap_or_default()
            .contains(FAKE_MIC),
        "{health}"
    );

    // end without begin, and a peek with nothing recorded.
    let err = host.call("audio.end", json!({})).await.unwrap_err();
    assert_eq!(err.code, -32000);
    assert!(err.message.contains("no utterance"), "{err}");
    let err = host.call("audio.peek", json!({})).await.unwrap_err();
    assert_eq!(err.code, -32000);
    assert!(err.message.contains("no utterance"), "{err}");

    // Push to talk: the pre-roll fills, begin, speech, end.
    tokio::time::sleep(Duration::from_millis(400)).await;
    // The end of speech is watched for, after the default 600 ms of silence.
    assert_eq!(
        host.call("audio.begin", json!({})).await.unwrap(),
        json!({"end_silence_ms": 600, "listen": 1})
    );
    let status = host.call("audio.status", json!({})).await.unwrap();
    assert_eq!(status["recording"], "utterance", "{status}");
    assert_eq!(status["state"], "recording", "{status}");
    // The silent mic reads low on the level meter, the speech high, while it plays.
    let quiet = status["capture"]["level_db"].as_f64().expect("a level");
    assert!(quiet < -60.0, "silence at {quiet} dBFS: {status}");
    let mut player = pw.play(&wav);
    let mut loudest = f64::MIN;
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline && player.try_wait().expect("pw-play").is_none() {
        let status = host.call("audio.status", json!({})).await.unwrap();
        loudest = loudest.max(status["capture"]["level_db"].as_f64().unwrap_or(f64::MIN));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let played = tokio::task::spawn_blocking(move || player.wait())
        .await
        .expect("join")
        .expect("pw-play ends");
    assert!(played.success(), "pw-play failed: {played}");
    tokio::time::sleep(Duration::from_millis(250)).await;
    // Silence reads at the floor; speech (whichever 100 ms windows were read) well above.
    assert!(
        loudest > -50.0 && loudest - quiet >= 20.0,
        "the speech peaked at {loudest} dBFS on the meter, silence read {quiet}"
    );
    // A peek while the key is held: the speech so far as a handle, and the utterance goes on.
    let peeked = host.call("audio.peek", json!({})).await.unwrap();
    let so_far = stored_speech(&host, &peeked);
    assert_eq!(peeked["audio"]["has_speech"], true, "{peeked}");
    let status = host.call("audio.status", json!({})).await.unwrap();
    assert_eq!(status["recording"], "utterance", "{status}");
    let asked = Instant::now();
    let spoken = host.call("audio.end", json!({})).await.unwrap();
    let round_trip = asked.elapsed();
    eprintln!(
        "audio.end for {} ms of audio: reply after {round_trip:?}; flush {} ms, encode {} ms, handle.create {} ms",
        spoken["audio"]["captured_ms"],
        spoken["flush_ms"],
        spoken["encode_ms"],
        spoken["handoff_ms"]
    );
    let samples = stored_speech(&host, &spoken);
    // The end holds at least what the peek held (the same speech, gated the same way).
    assert!(
        samples.len() >= so_far.len(),
        "end {} samples, peek {}",
        samples.len(),
        so_far.len()
    );
    let audio = &spoken["audio"];
    assert_eq!(audio["has_speech"], true, "{spoken}");
    assert_eq!(audio["rate"], 16_000);
    assert_eq!(audio["source"], FAKE_MIC, "{spoken}");
    assert_eq!(audio["truncated"], false);
    assert!(audio["source_rate"].as_u64().is_some_and(|r| r > 0));
    let speech = ms(&audio["speech_ms"]);
    assert!(
        speech.abs_diff(expected.speech) <= Duration::from_millis(120),
        "speech {speech:?} captured, {:?} in the file: {spoken}",
        expected.speech
    );
    assert!(
        audio["peak"].as_f64().unwrap_or(0.0) > 0.5 * f64::from(expected.peak),
        "peak {} (file {}): {spoken}",
        audio["peak"],
        expected.peak
    );
    assert!(
        audio["rms_db"].as_f64().unwrap_or(-120.0) > -35.0,
        "{spoken}"
    );
    // 16 kHz: the samples are as long as the audio says, and the same gate finds the same
    // speech in them, above the threshold.
    let kept = Duration::from_micros(samples.len() as u64 * 1_000_000 / 16_000);
    assert!(
        kept.abs_diff(ms(&audio["duration_ms"])) <= Duration::from_millis(1),
        "{kept:?}: {spoken}"
    );
    assert!(
        kept >= speech && kept <= speech + Duration::from_millis(310),
        "{kept:?} kept for {speech:?} of speech"
    );
    let again = dsp::gate(&samples, &GateSettings::default());
    assert!(again.has_speech);
    assert!(again.speech_rms_db > -35.0, "{again:?}");
    // The span is the voice-activity detector's (the default): it finds it again.
    let (_, span) = utter_audio_pipewire::vad::speech_span(&samples);
    let span = span.expect("the detector hears the kept speech");
    let redetected = Duration::from_micros((span.end - span.start) as u64 * 1_000_000 / 16_000);
    assert!(
        redetected.abs_diff(speech) <= Duration::from_millis(50),
        "{redetected:?} found again for {speech:?}"
    );
    assert!(
        ms(&audio["trimmed_leading_ms"]) >= Duration::from_millis(140),
        "the pre-roll's silence was cut: {spoken}"
    );
    // One handle.create for the peek, one for the end.
    assert_eq!(host.creates.load(std::sync::atomic::Ordering::SeqCst), 2);

    // Silence: no speech, no handle, no handle.create.
    host.call("audio.begin", json!({})).await.unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let quiet = host.call("audio.end", json!({})).await.unwrap();
    assert!(quiet["handle"].is_null(), "{quiet}");
    assert_eq!(quiet["samples"], 0, "{quiet}");
    assert_eq!(quiet["audio"]["has_speech"], false, "{quiet}");
    assert!(
        quiet["audio"]["peak"].as_f64().unwrap_or(1.0) < 0.003,
        "{quiet}"
    );
    let captured = ms(&quiet["audio"]["captured_ms"]);
    assert!(
        captured >= Duration::from_millis(800) && captured <= Duration::from_millis(1_500),
        "{quiet}"
    );
    // One handle.create for the peek, one for the end.
    assert_eq!(host.creates.load(std::sync::atomic::Ordering::SeqCst), 2);

    // Silence kept on purpose (untrimmed): stored although the gate found no speech.
    let untrimmed = host
        .call(
            "audio.configure",
            json!({"source": FAKE_MIC, "vad": {"trim": false}}),
        )
        .await
        .unwrap();
    assert_eq!(untrimmed["status"], "updated");
    // Let the pre-roll fill again (the last begin emptied it).
    tokio::time::sleep(Duration::from_millis(400)).await;
    host.call("audio.begin", json!({})).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let kept_silence = host
        .call("audio.end", json!({"keep_silence": true}))
        .await
        .unwrap();
    assert_eq!(kept_silence["audio"]["has_speech"], false, "{kept_silence}");
    let silent = stored_speech(&host, &kept_silence);
    assert!(
        (12_000..=20_000).contains(&silent.len()),
        "about 0.3 s pre-roll + 0.5 s: {} samples",
        silent.len()
    );
    host.call("audio.configure", json!({"source": FAKE_MIC}))
        .await
        .unwrap();

    // Cancel drops the utterance.
    host.call("audio.begin", json!({})).await.unwrap();
    let cancelled = host.call("audio.cancel", json!({})).await.unwrap();
    assert_eq!(cancelled, json!({"cancelled": true}));
    assert!(host.call("audio.end", json!({})).await.is_err());
    assert_eq!(
        host.call("audio.cancel", json!({})).await.unwrap(),
        json!({"cancelled": false})
    );

    // A timed recording with speech in it.
    let record = host.call("audio.record", json!({"seconds": 2.0}));
    let speak = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        pw.speak(&wav).await;
    };
    let (recorded, ()) = tokio::join!(record, speak);
    let recorded = recorded.unwrap();
    stored_speech(&host, &recorded);
    assert_eq!(recorded["seconds"], 2.0, "{recorded}");
    assert_eq!(recorded["capped"], false, "{recorded}");
    assert_eq!(recorded["audio"]["has_speech"], true, "{recorded}");
    let captured = ms(&recorded["audio"]["captured_ms"]);
    assert!(
        (Duration::from_millis(1_900)..=Duration::from_millis(2_300)).contains(&captured),
        "no pre-roll, about 2 s: {recorded}"
    );

    // While an utterance is open, record is refused (and the other way round).
    host.call("audio.begin", json!({})).await.unwrap();
    let err = host
        .call("audio.record", json!({"seconds": 1}))
        .await
        .unwrap_err();
    assert_eq!(err.code, -32000);
    assert!(err.message.contains("busy"), "{err}");
    host.call("audio.cancel", json!({})).await.unwrap();

    // A record whose request times out is cancelled ($/cancel) and leaves nothing behind.
    let err = host
        .call_within(
            "audio.record",
            json!({"seconds": 5}),
            Duration::from_millis(300),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code, -32001, "{err}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let status = host.call("audio.status", json!({})).await.unwrap();
    assert!(status["recording"].is_null(), "{status}");
    host.call("audio.begin", json!({})).await.unwrap();
    host.call("audio.cancel", json!({})).await.unwrap();

    // seconds above max_seconds is capped.
    let short = host
        .call(
            "audio.configure",
            json!({"source": FAKE_MIC, "max_seconds": 1}),
        )
        .await
        .unwrap();
    assert_eq!(short["status"], "reopened", "{short}");
    let capped = host
        .call("audio.record", json!({"seconds": 1e300}))
        .await
        .unwrap();
    assert_eq!(capped["seconds"], 1.0, "{capped}");
    assert_eq!(capped["capped"], true, "{capped}");
    assert!(capped["handle"].is_null(), "silence: {capped}");
    assert!(
        ms(&capped["audio"]["captured_ms"]) <= Duration::from_millis(1_000),
        "{capped}"
    );
    // Hostile params on a live stream: refused, and the stream goes on.
    for (method, params) in [
        ("audio.record", json!({"seconds": -1})),
        ("audio.record", json!({"seconds": "1"})),
        ("audio.record", json!({})),
        ("audio.end", json!({"keep_silence": 1})),
        ("audio.configure", json!({"pre_roll_ms": 1e12})),
        ("audio.configure", json!({"source": {"name": FAKE_MIC}})),
        ("audio.configure", json!([FAKE_MIC])),
    ] {
        let err = host.call(method, params.clone()).await.unwrap_err();
        assert_eq!(err.code, -32602, "{method} {params}: {err}");
    }
    let status = host.call("audio.status", json!({})).await.unwrap();
    assert_eq!(status["state"], "streaming", "{status}");
    host.call("audio.configure", json!({"source": FAKE_MIC}))
        .await
        .unwrap();

    // The runner refuses the hand-off: a clear error, and the next utterance works.
    host.refuse_handles
        .store(true, std::sync::atomic::Ordering::SeqCst);
    host.call("audio.begin", json!({})).await.unwrap();
    pw.speak(&wav).await;
    let err = host.call("audio.end", json!({})).await.unwrap_err();
    assert_eq!(err.code, -32000, "{err}");
    assert!(
        err.message.contains("handle.create") && err.message.contains("quota"),
        "{err}"
    );
    assert_eq!(err.data.as_ref().unwrap()["handle_create"]["code"], -32005);
    host.refuse_handles
        .store(false, std::sync::atomic::Ordering::SeqCst);
    host.call("audio.begin", json!({})).await.unwrap();
    pw.speak(&wav).await;
    stored_speech(&host, &host.call("audio.end", json!({})).await.unwrap());

    // The source goes away while listening: end fails naming it; nothing else is used.
    host.call("audio.begin", json!({})).await.unwrap();
    pw.stop_loopback();
    let mut gone = false;
    for _ in 0..200 {
        let status = host.call("audio.status", json!({})).await.unwrap();
        if status["state"] == "failed" {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gone, "the stream never noticed the source went away");
    let err = host.call("audio.end", json!({})).await.unwrap_err();
    assert_eq!(err.code, -32000, "{err}");
    assert!(err.message.contains(FAKE_MIC), "{err}");
    let status = host.call("audio.status", json!({})).await.unwrap();
    assert!(status["last_error"].is_string(), "{status}");
    let health = host.call("plugin.health", json!({})).await.unwrap();
    assert_eq!(health["status"], "degraded", "{health}");
    let err = host.call("audio.begin", json!({})).await.unwrap_err();
    assert!(
        err.message.contains("does not exist") && err.message.contains("available sources: none"),
        "{err}"
    );
    let err = host
        .call("audio.configure", json!({"source": FAKE_MIC}))
        .await
        .unwrap_err();
    assert_eq!(err.code, -32602, "{err}");
    assert_eq!(err.data.as_ref().unwrap()["available"], json!([]));

    // Still serving; stdin EOF ends it.
    host.call("audio.sources", json!({})).await.unwrap();
    let exit = host.close_and_wait(Duration::from_secs(10)).await;
    assert!(exit.success(), "{exit}");
}
