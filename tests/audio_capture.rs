//! `utter::audio::AudioCapture` in this process against a real, private PipeWire with a
//! virtual microphone: push-to-talk capture of spoken audio, the pre-roll, silence, cancel,
//! a missing source, and the source going away.
//!
//! libpipewire finds its server through this process's `XDG_RUNTIME_DIR` /
//! `PIPEWIRE_RUNTIME_DIR`, so this file holds a single test that points them at its private
//! session before anything else runs.

mod common;

use common::{FAKE_MIC, PipeWireSession, espeak_wav};
use std::path::Path;
use std::time::{Duration, Instant};
use utter::audio::dsp::{self, GateSettings};
use utter::audio::{AudioCapture, AudioError, Utterance};
use utter::config::AudioSection;

fn section(source: &str, pre_roll_ms: u32) -> AudioSection {
    AudioSection {
        source: source.into(),
        pre_roll_ms,
        ..AudioSection::default()
    }
}

/// The gate's verdict on the WAV file itself (read with hound, resampled with the same code):
/// what a perfect capture would report.
fn reference(wav: &Path) -> Utterance {
    let mut reader = hound::WavReader::open(wav).unwrap();
    let spec = reader.spec();
    assert_eq!(spec.sample_format, hound::SampleFormat::Int);
    let scale = 1.0 / (1u32 << (spec.bits_per_sample - 1)) as f32;
    let samples: Vec<f32> = reader
        .samples::<i32>()
        .map(|s| s.unwrap() as f32 * scale)
        .collect();
    Utterance::from_interleaved(
        &samples,
        spec.sample_rate,
        spec.channels.into(),
        &GateSettings::default(),
        false,
    )
    .unwrap()
}

/// Play `wav` into the virtual microphone and wait until pw-play is done, plus a little for
/// the last buffers to come through the graph.
async fn speak(pw: &PipeWireSession, wav: &Path) {
    let mut player = pw.play(wav);
    let status = tokio::task::spawn_blocking(move || player.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "pw-play failed: {status}");
    tokio::time::sleep(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn push_to_talk_capture_on_real_pipewire() {
    let mut pw = PipeWireSession::start();
    let env = pw.env();
    for name in [
        "XDG_RUNTIME_DIR",
        "PIPEWIRE_RUNTIME_DIR",
        "XDG_CONFIG_HOME",
        "XDG_STATE_HOME",
    ] {
        // SAFETY: this is the only test in this binary, and nothing else reads the
        // environment concurrently (libpipewire reads it when it connects, later).
        unsafe { std::env::set_var(name, env.get(name).unwrap()) };
    }
    // SAFETY: as above.
    unsafe { std::env::remove_var("PIPEWIRE_REMOTE") };

    let dir = tempfile::tempdir().unwrap();
    let wav = dir.path().join("open_youtube.wav");
    espeak_wav("open youtube", &wav);
    let expected = reference(&wav);
    assert!(expected.has_speech);

    // The sources, as `utter audio sources` gets them.
    let sources = utter::audio::list_sources().await.unwrap();
    assert!(sources.iter().any(|s| s.name == FAKE_MIC), "{sources:?}");

    // A source that is not there: an error naming it and listing what there is.
    let missing = AudioCapture::open(&section("no_such_mic", 300))
        .await
        .unwrap_err();
    match &missing {
        AudioError::SourceNotFound { name, available } => {
            assert_eq!(name, "no_such_mic");
            assert_eq!(available, &vec![FAKE_MIC.to_owned()]);
        }
        other => panic!("expected SourceNotFound, got {other:?}"),
    }
    assert!(missing.to_string().contains("available sources: fake_mic"));

    // Push to talk: begin, speak, end.
    let capture = AudioCapture::open(&section(FAKE_MIC, 300)).await.unwrap();
    let status = capture.status();
    assert_eq!(
        status.linked_source.as_deref(),
        Some(FAKE_MIC),
        "{status:?}"
    );
    assert_eq!(status.state, "streaming", "{status:?}");
    assert!(status.rate > 0 && status.channels == 1, "{status:?}");
    assert!(matches!(capture.end().await, Err(AudioError::NotRecording)));

    // Let the 300 ms pre-roll fill, as it would while the user reaches for the key.
    tokio::time::sleep(Duration::from_millis(400)).await;
    capture.begin().unwrap();
    assert_eq!(capture.status().state, "recording");
    speak(&pw, &wav).await;
    let flush_started = Instant::now();
    let utterance = capture.end().await.unwrap();
    let flush = flush_started.elapsed();
    eprintln!(
        "capture flush (end() → samples ready) for {:?} of audio: {flush:?}",
        utterance.captured
    );
    assert_eq!(utterance.rate, 16_000);
    assert!(utterance.has_speech, "{utterance:?}");
    let diff = utterance.speech.abs_diff(expected.speech);
    assert!(
        diff <= Duration::from_millis(120),
        "speech {:?} captured, {:?} in the file",
        utterance.speech,
        expected.speech
    );
    assert!(
        utterance.peak > 0.5 * expected.peak,
        "peak {} (file {})",
        utterance.peak,
        expected.peak
    );
    assert!(utterance.rms_db > -35.0, "{utterance:?}");
    // Trimmed to the speech plus the 150 ms margins.
    let kept = utterance.duration();
    assert!(
        kept >= utterance.speech && kept <= utterance.speech + Duration::from_millis(310),
        "{kept:?} kept for {:?} of speech",
        utterance.speech
    );
    assert_eq!(
        utterance.samples.len() as u128,
        kept.as_micros() * 16 / 1000,
        "16 kHz"
    );
    // At least the pre-roll's silence minus the margin was cut in front.
    assert!(
        utterance.trimmed_leading >= Duration::from_millis(140),
        "{utterance:?}"
    );
    assert!(utterance.captured >= expected.captured, "{utterance:?}");
    // The same gate finds the same speech in the trimmed samples.
    let again = dsp::gate(&utterance.samples, &GateSettings::default());
    assert!(again.speech.abs_diff(utterance.speech) <= Duration::from_millis(20));

    // Nothing spoken: no speech, nothing kept.
    capture.begin().unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let silence = capture.end().await.unwrap();
    assert!(!silence.has_speech, "{silence:?}");
    assert!(silence.samples.is_empty());
    assert!(
        silence.captured >= Duration::from_millis(800)
            && silence.captured <= Duration::from_millis(1_500),
        "{silence:?}"
    );
    assert!(silence.peak < 0.003, "{silence:?}");

    // Cancel drops the utterance.
    capture.begin().unwrap();
    capture.cancel();
    assert!(matches!(capture.end().await, Err(AudioError::NotRecording)));
    drop(capture);

    // The pre-roll: speech that ended just before the key went down is kept with a long
    // pre-roll, and gone without one.
    for (pre_roll_ms, kept) in [(4_000, true), (0, false)] {
        let capture = AudioCapture::open(&section(FAKE_MIC, pre_roll_ms))
            .await
            .unwrap();
        speak(&pw, &wav).await;
        capture.begin().unwrap();
        let u = capture.end().await.unwrap();
        assert_eq!(u.has_speech, kept, "pre_roll_ms {pre_roll_ms}: {u:?}");
        if kept {
            assert!(
                u.speech.abs_diff(expected.speech) <= Duration::from_millis(120),
                "{u:?}"
            );
        }
    }

    // The default source (no name configured) is the virtual microphone, the only one.
    let capture = AudioCapture::open(&section("", 300)).await.unwrap();
    assert_eq!(capture.status().linked_source.as_deref(), Some(FAKE_MIC));
    drop(capture);

    // The source goes away while armed: end() fails loudly instead of recording from
    // something else.
    let capture = AudioCapture::open(&section(FAKE_MIC, 300)).await.unwrap();
    capture.begin().unwrap();
    pw.stop_loopback();
    let gone = common::wait_for(Duration::from_secs(10), || {
        capture.status().linked_source.is_none()
    })
    .await;
    assert!(gone, "{:?}", capture.status());
    let err = capture.end().await.unwrap_err();
    // Either the link went (the source was removed) or PipeWire disconnected the stream
    // (node.dont-reconnect): both name the source.
    assert!(
        matches!(&err, AudioError::Stream { device, .. } if device.contains(FAKE_MIC)),
        "{err}"
    );
    assert!(capture.begin().is_err());
}
