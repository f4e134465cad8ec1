//! Signal processing for captured audio: downmix, resampling to 16 kHz and the silence gate.
//!
//! Everything here is pure (no PipeWire), so it is unit-tested and benchmarked on its own.
//! Samples are `f32` in the usual full-scale range `[-1.0, 1.0]`; decibels are dBFS
//! (0 dBFS = a full-scale square wave, so a full-scale sine has an RMS of −3 dBFS).

use rubato::audioadapter_buffers::direct::InterleavedSlice;
use rubato::{Fft, FixedSync, Resampler};
use std::time::Duration;

/// The sample rate speech-to-text gets, in Hz (Whisper's rate).
pub const TARGET_RATE: u32 = 16_000;

/// Length of one gate frame, in milliseconds.
pub const GATE_FRAME_MS: u32 = 10;

/// The floor used for the dBFS of digital silence (an RMS of exactly 0).
pub const SILENCE_FLOOR_DB: f32 = -120.0;

pub use crate::vad::downmix;

/// Resample mono `input` from `rate` Hz to [`TARGET_RATE`] with rubato's synchronous FFT
/// resampler (band-limited, no phase shift: rubato trims its own delay).
///
/// The output has `ceil(len × 16000 / rate)` samples (± 1). `rate == 16000` copies.
///
/// # Errors
/// A message when `rate` is 0 or rubato refuses the ratio.
pub fn resample_to_16k(input: &[f32], rate: u32) -> Result<Vec<f32>, String> {
    if rate == TARGET_RATE {
        return Ok(input.to_vec());
    }
    if rate == 0 {
        return Err("the capture rate is 0 Hz".into());
    }
    if input.is_empty() {
        return Ok(Vec::new());
    }
    let mut resampler = Fft::<f32>::new(
        rate as usize,
        TARGET_RATE as usize,
        1024,
        1,
        FixedSync::Input,
    )
    .map_err(|e| format!("cannot resample {rate} Hz to {TARGET_RATE} Hz: {e}"))?;
    let needed = resampler.process_all_needed_output_len(input.len());
    let mut out = vec![0.0f32; needed];
    let source = InterleavedSlice::new(input, 1, input.len()).map_err(|e| e.to_string())?;
    let mut sink = InterleavedSlice::new_mut(&mut out, 1, needed).map_err(|e| e.to_string())?;
    let (_, produced) = resampler
        .process_all_into_buffer(&source, &mut sink, input.len(), None)
        .map_err(|e| format!("resampling failed: {e}"))?;
    out.truncate(produced);
    Ok(out)
}

/// The RMS of `samples` in dBFS ([`SILENCE_FLOOR_DB`] for silence or an empty slice).
pub fn rms_db(samples: &[f32]) -> f32 {
    if samples.is_empty() {
        return SILENCE_FLOOR_DB;
    }
    let mean_square = samples
        .iter()
        .map(|s| f64::from(*s) * f64::from(*s))
        .sum::<f64>()
        / samples.len() as f64;
    if mean_square <= 0.0 {
        return SILENCE_FLOOR_DB;
    }
    ((10.0 * mean_square.log10()) as f32).max(SILENCE_FLOOR_DB)
}

/// The largest absolute sample value (0 for an empty slice).
pub fn peak(samples: &[f32]) -> f32 {
    samples.iter().fold(0.0f32, |m, s| m.max(s.abs()))
}

/// Settings of the energy gate: the runner's `[audio.vad]`, sent as `audio.configure {vad}`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GateSettings {
    /// A 10 ms frame whose RMS is at or above this many dBFS counts as voiced.
    pub threshold_db: f32,
    /// Cut the silence before the first and after the last voiced frame.
    pub trim: bool,
    /// Silence kept on each side of the voiced span when trimming, in milliseconds.
    pub margin_ms: u32,
    /// Fewer voiced milliseconds than this means "no speech" (a click, a key press).
    pub min_speech_ms: u32,
    /// Also ask the voice-activity detector ([`crate::vad`]): the span kept is where it hears
    /// a voice, and loud audio without one (noise, clicks, music) is "no speech".
    pub detector: bool,
}

impl Default for GateSettings {
    fn default() -> Self {
        GateSettings {
            threshold_db: -50.0,
            trim: true,
            margin_ms: 150,
            min_speech_ms: 100,
            detector: true,
        }
    }
}

/// What the gate found in a 16 kHz mono signal.
#[derive(Debug, Clone, PartialEq)]
pub struct GateResult {
    /// Sample range kept (the whole input when nothing is trimmed).
    pub keep: std::ops::Range<usize>,
    /// From the start of the first to the end of the last voiced frame (zero for no speech).
    pub speech: Duration,
    /// Total duration of voiced frames.
    pub voiced: Duration,
    /// Whether the voiced time reached `min_speech_ms`.
    pub has_speech: bool,
    /// RMS over the voiced span in dBFS ([`SILENCE_FLOOR_DB`] when there is none).
    pub speech_rms_db: f32,
}

/// The energy gate: split 16 kHz mono `samples` into 10 ms frames, call a frame voiced when
/// its RMS reaches `threshold_db`, and keep the span from the first to the last voiced frame
/// plus `margin_ms` on each side. Pauses between words inside the span are kept (Whisper
/// wants them); the span is "no speech" when the voiced frames add up to less than
/// `min_speech_ms`, and then nothing is kept when trimming. With `settings.detector`, speech
/// the levels found is checked by the voice-activity detector ([`crate::vad::speech_span`]):
/// the span becomes the one it hears a voice in, and less than `min_speech_ms` of voice is
/// "no speech".
pub fn gate(samples: &[f32], settings: &GateSettings) -> GateResult {
    let found = energy_gate(samples, settings);
    if !settings.detector || !found.has_speech {
        return found;
    }
    let (voiced_frames, span) = crate::vad::speech_span(samples);
    let ms = |n: usize| Duration::from_micros(n as u64 * 1_000_000 / u64::from(TARGET_RATE));
    let voiced = ms(voiced_frames * crate::vad::FRAME);
    match span.filter(|_| voiced >= Duration::from_millis(settings.min_speech_ms.into())) {
        Some(span) => kept(samples, span, voiced, settings),
        None => no_speech(samples.len(), voiced, settings),
    }
}

/// The gate's answer when it found no speech.
fn no_speech(len: usize, voiced: Duration, settings: &GateSettings) -> GateResult {
    GateResult {
        keep: if settings.trim { 0..0 } else { 0..len },
        speech: Duration::ZERO,
        voiced,
        has_speech: false,
        speech_rms_db: SILENCE_FLOOR_DB,
    }
}

/// The gate's answer for speech in `span`: `margin_ms` kept around it when trimming.
fn kept(
    samples: &[f32],
    span: std::ops::Range<usize>,
    voiced: Duration,
    settings: &GateSettings,
) -> GateResult {
    let ms = |n: usize| Duration::from_micros(n as u64 * 1_000_000 / u64::from(TARGET_RATE));
    // In u64: a margin from a library caller is not range-checked, and must not overflow.
    let margin = (u64::from(TARGET_RATE) * u64::from(settings.margin_ms) / 1000) as usize;
    let keep = if settings.trim {
        span.start.saturating_sub(margin)..span.end.saturating_add(margin).min(samples.len())
    } else {
        0..samples.len()
    };
    GateResult {
        keep,
        speech: ms(span.end - span.start),
        voiced,
        has_speech: true,
        speech_rms_db: rms_db(&samples[span]),
    }
}

/// The level gate alone (see [`gate`]).
fn energy_gate(samples: &[f32], settings: &GateSettings) -> GateResult {
    let frame = (TARGET_RATE * GATE_FRAME_MS / 1000) as usize;
    let ms = |n: usize| Duration::from_micros(n as u64 * 1_000_000 / u64::from(TARGET_RATE));
    let mut first = None;
    let mut last = 0;
    let mut voiced_frames = 0usize;
    for (i, chunk) in samples.chunks(frame).enumerate() {
        if rms_db(chunk) >= settings.threshold_db {
            first.get_or_insert(i);
            last = i;
            voiced_frames += 1;
        }
    }
    let voiced = ms(voiced_frames * frame);
    let has_speech =
        first.is_some() && voiced >= Duration::from_millis(settings.min_speech_ms.into());
    let Some(first) = first.filter(|_| has_speech) else {
        return no_speech(samples.len(), voiced, settings);
    };
    let end = ((last + 1) * frame).min(samples.len());
    kept(samples, first * frame..end, voiced, settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The level gate alone: these tests use tones, which are not a voice.
    fn energy() -> GateSettings {
        GateSettings {
            detector: false,
            ..GateSettings::default()
        }
    }

    fn sine(freq: f32, rate: u32, seconds: f32, amplitude: f32) -> Vec<f32> {
        let n = (rate as f32 * seconds) as usize;
        (0..n)
            .map(|i| amplitude * (2.0 * std::f32::consts::PI * freq * i as f32 / rate as f32).sin())
            .collect()
    }

    /// Upward zero crossings: a sine of f Hz has f per second.
    fn crossings(s: &[f32]) -> usize {
        s.windows(2).filter(|w| w[0] < 0.0 && w[1] >= 0.0).count()
    }

    #[test]
    fn resampling_a_48k_sine_keeps_its_frequency_and_length() {
        let input = sine(440.0, 48_000, 1.0, 0.5);
        let out = resample_to_16k(&input, 48_000).unwrap();
        assert!(
            (out.len() as i64 - 16_000).abs() <= 2,
            "length {}",
            out.len()
        );
        let c = crossings(&out);
        assert!(
            (438..=441).contains(&c),
            "440 Hz became {c} crossings per second"
        );
        // Amplitude survives the band-limited filter (440 Hz is far below 8 kHz).
        let p = peak(&out[1000..15_000]);
        assert!((0.48..0.52).contains(&p), "peak {p}");
        // And it is still a sine, in phase with the original at the same instants.
        let reference = sine(440.0, 16_000, 1.0, 0.5);
        let err = out[1000..15_000]
            .iter()
            .zip(&reference[1000..15_000])
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(err < 0.01, "max deviation from the ideal 16 kHz sine {err}");
    }

    #[test]
    fn resampling_44100_and_identity() {
        let input = sine(1000.0, 44_100, 0.5, 0.3);
        let out = resample_to_16k(&input, 44_100).unwrap();
        assert!(
            (out.len() as i64 - 8_000).abs() <= 2,
            "length {}",
            out.len()
        );
        let c = crossings(&out);
        assert!(
            (498..=501).contains(&c),
            "1 kHz over 0.5 s gave {c} crossings"
        );
        let same = resample_to_16k(&input[..100], 16_000).unwrap();
        assert_eq!(same, input[..100]);
        assert!(resample_to_16k(&input, 0).is_err());
    }

    #[test]
    fn gate_takes_extreme_settings_without_overflow() {
        let mut signal = vec![0.0f32; 1_600];
        signal.extend(sine(300.0, 16_000, 0.2, 0.3));
        let g = gate(
            &signal,
            &GateSettings {
                margin_ms: u32::MAX,
                min_speech_ms: 0,
                ..energy()
            },
        );
        assert!(g.has_speech);
        assert_eq!(g.keep, 0..signal.len());
        let never = gate(
            &signal,
            &GateSettings {
                min_speech_ms: u32::MAX,
                ..energy()
            },
        );
        assert!(!never.has_speech);
    }

    #[test]
    fn downmix_averages_channels() {
        let stereo = [1.0, 0.0, 0.5, 0.5, -1.0, 1.0, 0.25];
        assert_eq!(downmix(&stereo, 2), vec![0.5, 0.5, 0.0]);
        assert_eq!(downmix(&[0.1, 0.2], 1), vec![0.1, 0.2]);
        let quad = [1.0, 1.0, 1.0, -1.0];
        assert_eq!(downmix(&quad, 4), vec![0.5]);
    }

    #[test]
    fn rms_in_dbfs() {
        assert!((rms_db(&sine(100.0, 16_000, 1.0, 1.0)) + 3.01).abs() < 0.05);
        assert!((rms_db(&sine(100.0, 16_000, 1.0, 0.1)) + 23.01).abs() < 0.05);
        assert_eq!(rms_db(&[0.0; 10]), SILENCE_FLOOR_DB);
        assert_eq!(rms_db(&[]), SILENCE_FLOOR_DB);
    }

    #[test]
    fn gate_trims_silence_around_a_tone() {
        let mut signal = vec![0.0f32; 16_000]; // 1 s silence
        signal.extend(sine(300.0, 16_000, 0.5, 0.3)); // 0.5 s tone
        signal.extend(vec![0.0f32; 8_000]); // 0.5 s silence
        let settings = energy();
        let g = gate(&signal, &settings);
        assert!(g.has_speech);
        let speech_ms = g.speech.as_millis() as i64;
        assert!((speech_ms - 500).abs() <= 10, "speech {speech_ms} ms");
        // Kept: the tone plus 150 ms each side.
        assert_eq!(g.keep.start, 16_000 - 2_400);
        assert_eq!(g.keep.end, 24_000 + 2_400);
        assert!((g.speech_rms_db + 13.5).abs() < 0.2, "{}", g.speech_rms_db);
        // Without trimming everything is kept, and the speech is still measured.
        let untrimmed = gate(
            &signal,
            &GateSettings {
                trim: false,
                ..settings
            },
        );
        assert_eq!(untrimmed.keep, 0..signal.len());
        assert_eq!(untrimmed.speech, g.speech);
    }

    #[test]
    fn gate_reports_no_speech_for_silence_noise_and_clicks() {
        let settings = energy();
        let silence = vec![0.0f32; 32_000];
        let g = gate(&silence, &settings);
        assert!(!g.has_speech);
        assert_eq!(g.keep, 0..0);
        assert_eq!(g.speech, Duration::ZERO);
        // Noise at about −60 dBFS stays under a −50 dBFS gate.
        let mut state = 12345u32;
        let noise: Vec<f32> = (0..32_000)
            .map(|_| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                ((state >> 8) as f32 / (1u32 << 24) as f32 - 0.5) * 0.0035
            })
            .collect();
        assert!(rms_db(&noise) < -58.0 && rms_db(&noise) > -65.0);
        assert!(!gate(&noise, &settings).has_speech);
        // The same noise is "speech" for a gate at −70 dBFS: the threshold is what decides.
        assert!(
            gate(
                &noise,
                &GateSettings {
                    threshold_db: -70.0,
                    ..settings
                }
            )
            .has_speech
        );
        // A 30 ms click is shorter than min_speech_ms.
        let mut click = vec![0.0f32; 16_000];
        click[8_000..8_480].iter_mut().for_each(|s| *s = 0.5);
        assert!(!gate(&click, &settings).has_speech);
        assert!(!gate(&[], &settings).has_speech);
    }
}
