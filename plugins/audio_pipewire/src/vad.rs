//! Voice-activity detection with `earshot` (a small neural network, pure Rust, 16 ms frames
//! of 16 kHz audio): the end of speech while a listen is open, and the span of speech in a
//! finished utterance.
//!
//! * [`EndOfSpeech`] follows a listen as its audio arrives (any capture rate, any channel
//!   count: [`Downsampler`] brings it to 16 kHz mono) and says once when speech has been
//!   heard and then `end_silence_ms` of silence followed. The plugin sends that as the
//!   notification `audio.speech_ended`, and the runner ends a toggled listen with it.
//! * [`speech_span`] scores a finished 16 kHz utterance and gives the voiced frames and the
//!   span from the first to the last, which the gate uses to trim (a cough or a fan is
//!   loud but not voiced, so the energy gate keeps it and the VAD does not).

use earshot::{DefaultPredictor, Detector};

/// Samples in one VAD frame (16 ms at 16 kHz), as earshot requires.
pub const FRAME: usize = 256;
/// One frame's length in milliseconds.
pub const FRAME_MS: f64 = 16.0;
/// A frame scoring at least this is voiced (earshot's suggested threshold).
pub const THRESHOLD: f32 = 0.5;

/// A linear-interpolation resampler to 16 kHz, fed in pieces. Good enough for voice-activity
/// scores (the speech-to-text samples are resampled band-limited by [`crate::dsp`]).
#[derive(Debug, Clone)]
pub struct Downsampler {
    /// Input samples per output sample.
    step: f64,
    /// Position of the next output sample, in input samples from the start of the pending
    /// input (may be negative: between the kept last sample and the next input).
    position: f64,
    /// The last input sample of the previous piece.
    last: f32,
}

impl Downsampler {
    /// A resampler from `rate` Hz (0 is taken as 16 000).
    pub fn new(rate: u32) -> Downsampler {
        let rate = if rate == 0 { 16_000 } else { rate };
        Downsampler {
            step: f64::from(rate) / 16_000.0,
            position: 0.0,
            last: 0.0,
        }
    }

    /// Resample one piece of mono input, appending to `out`.
    pub fn push(&mut self, input: &[f32], out: &mut Vec<f32>) {
        if input.is_empty() {
            return;
        }
        let at = |i: isize| -> f32 {
            if i < 0 {
                self.last
            } else {
                input[(i as usize).min(input.len() - 1)]
            }
        };
        while self.position < (input.len() - 1) as f64 {
            let base = self.position.floor();
            let frac = (self.position - base) as f32;
            let i = base as isize;
            out.push(at(i) * (1.0 - frac) + at(i + 1) * frac);
            self.position += self.step;
        }
        self.position -= input.len() as f64;
        self.last = input[input.len() - 1];
    }
}

/// Average interleaved frames of `channels` channels into one mono channel.
///
/// `interleaved.len()` should be a multiple of `channels`; a trailing partial frame is
/// dropped. One channel is returned as is (copied).
pub fn downmix(interleaved: &[f32], channels: usize) -> Vec<f32> {
    if channels <= 1 {
        return interleaved.to_vec();
    }
    let scale = 1.0 / channels as f32;
    interleaved
        .chunks_exact(channels)
        .map(|frame| frame.iter().sum::<f32>() * scale)
        .collect()
}

/// The end of speech in a listen (see the module docs).
pub struct EndOfSpeech {
    detector: Box<Detector<DefaultPredictor>>,
    downsampler: Downsampler,
    channels: usize,
    /// 16 kHz samples waiting for a whole frame.
    pending: Vec<f32>,
    /// Voiced frames so far.
    voiced: u32,
    /// Unvoiced frames since the last voiced one.
    silent: u32,
    /// Voiced frames needed before silence can end the listen.
    min_voiced: u32,
    /// Unvoiced frames after speech that end it.
    end_after: u32,
    ended: bool,
}

/// What [`EndOfSpeech::push`] reports once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpeechEnded {
    /// Voiced time heard, in milliseconds.
    pub speech_ms: f64,
    /// Silence after the last voiced frame, in milliseconds (about `end_silence_ms`).
    pub silence_ms: f64,
}

impl EndOfSpeech {
    /// Follow audio of `rate` Hz and `channels` channels (interleaved); speech is at least
    /// `min_speech_ms` voiced, its end `end_silence_ms` unvoiced after it.
    pub fn new(rate: u32, channels: u32, min_speech_ms: u32, end_silence_ms: u32) -> EndOfSpeech {
        let frames = |ms: u32| ((f64::from(ms) / FRAME_MS).ceil() as u32).max(1);
        EndOfSpeech {
            detector: Detector::default_boxed(),
            downsampler: Downsampler::new(rate),
            channels: channels.max(1) as usize,
            pending: Vec::with_capacity(FRAME * 4),
            voiced: 0,
            silent: 0,
            min_voiced: frames(min_speech_ms),
            end_after: frames(end_silence_ms),
            ended: false,
        }
    }

    /// Feed interleaved samples; `Some` the first time speech was followed by enough silence.
    pub fn push(&mut self, interleaved: &[f32]) -> Option<SpeechEnded> {
        if self.ended {
            return None;
        }
        let mono = downmix(interleaved, self.channels);
        self.downsampler.push(&mono, &mut self.pending);
        let mut consumed = 0;
        let mut result = None;
        while self.pending.len() - consumed >= FRAME {
            let frame = clamped(&self.pending[consumed..consumed + FRAME]);
            consumed += FRAME;
            let score = self.detector.predict_f32(&frame);
            if score >= THRESHOLD {
                self.voiced += 1;
                self.silent = 0;
            } else if self.voiced > 0 {
                self.silent += 1;
            }
            if self.voiced >= self.min_voiced && self.silent >= self.end_after {
                self.ended = true;
                result = Some(SpeechEnded {
                    speech_ms: f64::from(self.voiced) * FRAME_MS,
                    silence_ms: f64::from(self.silent) * FRAME_MS,
                });
                break;
            }
        }
        self.pending.drain(..consumed);
        result
    }

    /// Voiced milliseconds heard so far.
    pub fn speech_ms(&self) -> f64 {
        f64::from(self.voiced) * FRAME_MS
    }
}

/// One frame with every sample in [-1, 1] (earshot asserts it in debug builds; a float
/// source or a resampler's overshoot can exceed it).
fn clamped(frame: &[f32]) -> [f32; FRAME] {
    let mut out = [0.0f32; FRAME];
    for (o, s) in out.iter_mut().zip(frame) {
        *o = s.clamp(-1.0, 1.0);
    }
    out
}

/// The voiced frames of a 16 kHz mono utterance: how many, and the sample range from the
/// start of the first to the end of the last (`None` without any).
pub fn speech_span(samples: &[f32]) -> (usize, Option<std::ops::Range<usize>>) {
    let mut detector = Detector::default_boxed();
    let mut voiced = 0;
    let mut first = None;
    let mut last = 0;
    for (i, frame) in samples.chunks_exact(FRAME).enumerate() {
        if detector.predict_f32(&clamped(frame)) >= THRESHOLD {
            voiced += 1;
            first.get_or_insert(i);
            last = i;
        }
    }
    let span = first.map(|f| f * FRAME..((last + 1) * FRAME).min(samples.len()));
    (voiced, span)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_downsampler_keeps_the_length_and_a_slow_signal() {
        let mut d = Downsampler::new(48_000);
        let mut out = Vec::new();
        let ramp: Vec<f32> = (0..48_000).map(|i| i as f32 / 48_000.0).collect();
        for piece in ramp.chunks(1000) {
            d.push(piece, &mut out);
        }
        assert!((out.len() as i64 - 16_000).abs() <= 2, "{}", out.len());
        // A ramp stays a ramp: sample k is about k/16000.
        for (k, v) in out.iter().enumerate().step_by(997) {
            assert!((v - k as f32 / 16_000.0).abs() < 1e-3, "{k}: {v}");
        }
        let mut same = Downsampler::new(16_000);
        let mut copy = Vec::new();
        same.push(&[0.1, 0.2, 0.3], &mut copy);
        same.push(&[0.4], &mut copy);
        assert_eq!(copy.len(), 3);
    }

    #[test]
    fn samples_beyond_full_scale_do_not_trip_the_detector() {
        let loud: Vec<f32> = (0..16_000)
            .map(|i| if i % 2 == 0 { 3.0 } else { -3.0 })
            .collect();
        let mut eos = EndOfSpeech::new(16_000, 1, 100, 600);
        let _ = eos.push(&loud);
        let _ = speech_span(&loud);
    }

    #[test]
    fn silence_and_a_tone_never_end_a_listen() {
        let mut eos = EndOfSpeech::new(48_000, 2, 100, 600);
        assert!(eos.push(&vec![0.0; 2 * 48_000 * 3]).is_none());
        let tone: Vec<f32> = (0..48_000 * 2)
            .map(|i| 0.3 * (i as f32 * 2.0 * std::f32::consts::PI * 1000.0 / 48_000.0).sin())
            .collect();
        let mut mono = EndOfSpeech::new(48_000, 1, 100, 600);
        assert!(mono.push(&tone).is_none());
        assert!(mono.push(&vec![0.0; 48_000]).is_none());
        let (voiced, _) = speech_span(&vec![0.0; 16_000]);
        assert_eq!(voiced, 0);
    }
}
