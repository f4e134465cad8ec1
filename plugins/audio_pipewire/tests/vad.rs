//! The voice-activity detector on real synthetic speech (espeak-ng at 22 050 Hz, as the
//! microphone might deliver any rate): the end of speech after the configured silence, and
//! the speech span of a finished utterance.

mod support;

use support::{espeak_wav, read_wav, scratch};
use utter_audio_pipewire::dsp;
use utter_audio_pipewire::vad::{EndOfSpeech, speech_span};

/// "open youtube" at its own rate and channel count.
fn speech() -> (Vec<f32>, u32, u32) {
    let (_dir, path) = scratch();
    let wav = path.join("open.wav");
    espeak_wav("open youtube", &wav);
    read_wav(&wav)
}

#[test]
fn speech_then_silence_ends_after_end_silence_ms_in_small_pieces() {
    let (samples, rate, channels) = speech();
    let silence = vec![0.0f32; rate as usize * 2];
    let mut eos = EndOfSpeech::new(rate, channels, 100, 600);
    // Fed as a capture stream delivers it: ~10 ms pieces.
    let piece = (rate / 100) as usize * channels as usize;
    let mut fed = 0usize;
    let mut ended = None;
    for chunk in samples
        .iter()
        .chain(&silence)
        .copied()
        .collect::<Vec<_>>()
        .chunks(piece)
    {
        fed += chunk.len();
        if let Some(e) = eos.push(chunk) {
            ended = Some((e, fed));
            break;
        }
    }
    let (ended, at) = ended.expect("the end of speech is found");
    println!(
        "{ended:?} at {:.0} ms",
        at as f64 * 1000.0 / f64::from(rate)
    );
    assert!(ended.speech_ms >= 300.0, "{ended:?}");
    assert!((600.0..=650.0).contains(&ended.silence_ms), "{ended:?}");
    // It ends within the silence, not before the speech is over, and not long after.
    let speech_end_ms = samples.len() as f64 * 1000.0 / f64::from(rate);
    let at_ms = at as f64 * 1000.0 / f64::from(rate);
    assert!(
        at_ms > speech_end_ms,
        "ended at {at_ms} ms, speech lasts {speech_end_ms} ms"
    );
    assert!(at_ms < speech_end_ms + 600.0 + 300.0, "ended at {at_ms} ms");
    // Once only.
    assert!(eos.push(&silence).is_none());
}

#[test]
fn loud_noise_clicks_and_a_tone_are_no_speech_but_speech_in_noise_is_kept() {
    use utter_audio_pipewire::capture::Utterance;
    let gate = dsp::GateSettings::default();
    let mut x: u32 = 12345;
    let mut hiss = |n: usize, a: f32| -> Vec<f32> {
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                (x as f32 / u32::MAX as f32 * 2.0 - 1.0) * a
            })
            .collect()
    };
    // 30 s of loud noise at 48 kHz: the energy gate alone calls it speech, the detector not.
    let noise = hiss(48_000 * 30, 0.2);
    let energy_only = dsp::GateSettings {
        detector: false,
        ..gate
    };
    assert!(
        Utterance::from_interleaved(&noise, 48_000, 1, &energy_only, false)
            .unwrap()
            .has_speech
    );
    let u = Utterance::from_interleaved(&noise, 48_000, 1, &gate, false).unwrap();
    assert!(!u.has_speech, "{u:?}");
    assert!(u.samples.is_empty());
    // A click train after silence.
    let mut clicks = vec![0.0f32; 16_000];
    for i in 0..10 {
        clicks[1000 + i * 1200] = 0.9;
        clicks[1001 + i * 1200] = -0.9;
    }
    assert!(
        !Utterance::from_interleaved(&clicks, 16_000, 1, &gate, false)
            .unwrap()
            .has_speech
    );
    // The words inside soft noise are found and kept.
    let (samples, rate, channels) = speech();
    let mono = dsp::downmix(&samples, channels as usize);
    let mut noisy = hiss(rate as usize, 0.01);
    noisy.extend(mono.iter().zip(hiss(mono.len(), 0.01)).map(|(s, n)| s + n));
    noisy.extend(hiss(rate as usize, 0.01));
    let u = Utterance::from_interleaved(&noisy, rate, 1, &gate, false).unwrap();
    assert!(u.has_speech, "{u:?}");
    // Trimmed to about the words: most of the two seconds of noise around them is cut.
    let kept = u.samples.len() as f64 / 16_000.0;
    let words = mono.len() as f64 / f64::from(rate);
    assert!(
        kept < words + 0.8,
        "kept {kept:.2} s of {words:.2} s of words"
    );
}

#[test]
fn the_speech_span_finds_the_words_inside_silence() {
    let (samples, rate, channels) = speech();
    let mono = dsp::downmix(&samples, channels as usize);
    let voice = dsp::resample_to_16k(&mono, rate).unwrap();
    let mut padded = vec![0.0f32; 16_000];
    padded.extend(&voice);
    padded.extend(vec![0.0f32; 16_000]);
    let (voiced, span) = speech_span(&padded);
    let span = span.expect("speech is found");
    println!("{voiced} voiced frames, span {span:?} of {}", padded.len());
    assert!(voiced * 16 >= 300, "{voiced} frames");
    // Within the words (the first and last 16 ms frame may reach into the silence).
    assert!(span.start >= 16_000 - 256, "{span:?}");
    assert!(span.end <= 16_000 + voice.len() + 256, "{span:?}");
    assert!(span.end - span.start >= voice.len() / 2, "{span:?}");
}
