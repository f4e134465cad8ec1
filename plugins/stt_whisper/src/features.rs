//! Whisper's log-mel front end, computed as OpenAI's reference (`whisper/audio.py`) and
//! faster-whisper's feature extractor do.
//!
//! For one window of at most 30 s of 16 kHz audio: zero-pad to 30 s (480 000 samples), take a
//! centred short-time Fourier transform (400-point periodic Hann window, hop 160, reflect
//! padding of 200 samples at both ends; 3000 frames), the power spectrum's first 201 bins,
//! a Slaney-normalised mel filter bank (80 or 128 bins), `log10` floored at 1e-10, then
//! clamp to 8 below the window's maximum and scale as `(x + 4) / 4`.
//!
//! ct2rs's own `Whisper::generate` normalises every frame by its own maximum and leaves the
//! padding at 0, which makes quiet frames look loud; on synthetic commands that turned
//! "open youtube" into ". . . .". This module replaces that step.

use rustfft::FftPlanner;
use rustfft::num_complex::Complex;

/// FFT size.
pub const N_FFT: usize = 400;
/// Hop between frames, in samples (10 ms).
pub const HOP: usize = 160;
/// Samples in a window (30 s).
pub const N_SAMPLES: usize = 480_000;
/// Frames in a window.
pub const N_FRAMES: usize = N_SAMPLES / HOP;
/// Power-spectrum bins used.
const N_BINS: usize = N_FFT / 2 + 1;

/// The log-mel features of one window, row-major `n_mels × frames`.
pub struct Features {
    /// The values.
    pub data: Vec<f32>,
    /// Mel bins (rows).
    pub n_mels: usize,
    /// Frames (columns), 10 ms each.
    pub frames: usize,
}

/// A reusable front end for `n_mels` mel bins.
pub struct FrontEnd {
    n_mels: usize,
    /// `n_mels × N_BINS`, row-major.
    filters: Vec<f32>,
    window: Vec<f32>,
    fft: std::sync::Arc<dyn rustfft::Fft<f32>>,
}

impl FrontEnd {
    /// A front end with librosa's Slaney mel filters for 16 kHz audio (the filters Whisper
    /// was trained with).
    pub fn new(n_mels: usize) -> FrontEnd {
        let mel = mel_spec::mel::mel(16_000.0, N_FFT, n_mels, None, None, false, true);
        let mut filters = Vec::with_capacity(n_mels * N_BINS);
        for m in 0..n_mels {
            for k in 0..N_BINS {
                filters.push(mel[[m, k]] as f32);
            }
        }
        let window = (0..N_FFT)
            .map(|i| 0.5 - 0.5 * (2.0 * std::f32::consts::PI * i as f32 / N_FFT as f32).cos())
            .collect();
        let fft = FftPlanner::new().plan_fft_forward(N_FFT);
        FrontEnd {
            n_mels,
            filters,
            window,
            fft,
        }
    }

    /// The features of `samples` (at most [`N_SAMPLES`]; longer input is cut) over a full
    /// 30 s window: `n_mels × N_FRAMES`.
    pub fn features(&self, samples: &[f32]) -> Features {
        self.features_frames(samples, N_FRAMES)
    }

    /// The features of `samples` over the first `frames` frames of the zero-padded window
    /// (`frames` is clamped to 2..=[`N_FRAMES`]; the result is `n_mels × frames`). The log
    /// floor (8 below the maximum) is taken over those frames only. CTranslate2's Whisper
    /// encoder accepts any length up to 3000 frames (`layers/whisper.cc` checks only the
    /// upper bound), and its cost grows with the length.
    pub fn features_frames(&self, samples: &[f32], frames: usize) -> Features {
        let frames = frames.clamp(2, N_FRAMES);
        let samples = &samples[..samples.len().min(N_SAMPLES)];
        let pad = N_FFT / 2;
        // The zero-padded 30 s window with reflect padding on both sides.
        let mut padded = vec![0.0f32; N_SAMPLES + 2 * pad];
        padded[pad..pad + samples.len()].copy_from_slice(samples);
        for i in 0..pad {
            padded[pad - 1 - i] = padded[pad + 1 + i];
            padded[pad + N_SAMPLES + i] = padded[pad + N_SAMPLES - 2 - i];
        }
        // Frames that only see zeros have no power; skip their FFTs.
        let last_loud = pad + samples.len() + pad;
        let floor = 1e-10f32.log10();
        let mut log = vec![floor; self.n_mels * frames];
        let mut buf = vec![Complex::new(0.0f32, 0.0); N_FFT];
        let mut scratch = vec![Complex::new(0.0f32, 0.0); self.fft.get_inplace_scratch_len()];
        let mut power = vec![0.0f32; N_BINS];
        for t in 0..frames {
            let start = t * HOP;
            if start > last_loud {
                break;
            }
            for (i, c) in buf.iter_mut().enumerate() {
                *c = Complex::new(padded[start + i] * self.window[i], 0.0);
            }
            self.fft.process_with_scratch(&mut buf, &mut scratch);
            for (p, c) in power.iter_mut().zip(&buf) {
                *p = c.norm_sqr();
            }
            for m in 0..self.n_mels {
                let row = &self.filters[m * N_BINS..(m + 1) * N_BINS];
                let energy: f32 = row.iter().zip(&power).map(|(f, p)| f * p).sum();
                log[m * frames + t] = energy.max(1e-10).log10();
            }
        }
        let max = log.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let low = max - 8.0;
        for v in &mut log {
            *v = (v.max(low) + 4.0) / 4.0;
        }
        Features {
            data: log,
            n_mels: self.n_mels,
            frames,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silence_is_flat_and_a_tone_lands_in_its_mel_bins() {
        let fe = FrontEnd::new(80);
        let silence = fe.features(&[]);
        assert_eq!(silence.data.len(), 80 * N_FRAMES);
        assert!(silence.data.iter().all(|v| *v == silence.data[0]));

        // One second of 1 kHz: loud in the low-middle bins for the first ~100 frames only.
        let tone: Vec<f32> = (0..16_000)
            .map(|i| 0.5 * (2.0 * std::f32::consts::PI * 1000.0 * i as f32 / 16_000.0).sin())
            .collect();
        let f = fe.features(&tone);
        let at = |m: usize, t: usize| f.data[m * N_FRAMES + t];
        let loudest = (0..80)
            .max_by(|a, b| at(*a, 50).total_cmp(&at(*b, 50)))
            .unwrap();
        assert!(
            (20..40).contains(&loudest),
            "1 kHz peaked in mel bin {loudest}"
        );
        assert!(at(loudest, 50) > at(loudest, 500) + 1.0);
        // After the tone, the floor: 8 below the maximum, scaled.
        let max = f.data.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        assert!((at(loudest, 2000) - (max - 2.0)).abs() < 1e-4);
    }
}
