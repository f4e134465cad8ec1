//! The capture flush (criterion): what `AudioCapture::end` does after the key goes up, on a
//! 1.5 s utterance plus the default 300 ms pre-roll captured at 48 kHz: downmix, rubato's
//! FFT resampling to 16 kHz, the energy gate and trimming (`Utterance::from_interleaved`).
//! Prints figures; asserts nothing.
//!
//! * `audio/flush_48k_mono_1.8s`: mono, as a USB headset or the test's virtual microphone.
//! * `audio/flush_48k_stereo_1.8s`: stereo (downmixed first).
//!
//! The end-to-end flush measured against real PipeWire (which adds a `spawn_blocking` hop and
//! taking the buffer from under the mutex) is printed by `tests/audio_capture.rs`.

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use utter::audio::Utterance;
use utter::audio::dsp::GateSettings;

/// 0.3 s of silence, 1.5 s of a speech-like signal (a 200 Hz tone with harmonics, amplitude
/// modulated at 4 Hz like syllables), at 48 kHz with `channels` channels.
fn utterance(channels: usize) -> Vec<f32> {
    let rate = 48_000.0f32;
    let mut out = Vec::new();
    for i in 0..(1.8 * rate) as usize {
        let t = i as f32 / rate;
        let s = if t < 0.3 {
            0.0
        } else {
            let env = 0.5 + 0.5 * (2.0 * std::f32::consts::PI * 4.0 * t).sin();
            let tone: f32 = (1..=5)
                .map(|h| (2.0 * std::f32::consts::PI * 200.0 * h as f32 * t).sin() / h as f32)
                .sum();
            0.2 * env * tone
        };
        out.extend(std::iter::repeat_n(s, channels));
    }
    out
}

fn flush(c: &mut Criterion) {
    let gate = GateSettings::default();
    for (name, channels) in [("flush_48k_mono_1.8s", 1), ("flush_48k_stereo_1.8s", 2)] {
        let raw = utterance(channels);
        c.bench_function(&format!("audio/{name}"), |b| {
            b.iter(|| {
                Utterance::from_interleaved(black_box(&raw), 48_000, channels as u32, &gate, false)
                    .unwrap()
            })
        });
    }
}

criterion_group!(benches, flush);
criterion_main!(benches);
