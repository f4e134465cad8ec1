//! The spoken test set (`tests/corpus/spoken.toml`): every command spoken by three engines of
//! Debian's packages, espeak-ng (three voices), flite (three) and Festival (one), each at two speeds
//! and, at its normal speed, mixed with pink noise at 10 dB SNR; transcribed by the real
//! `utter-stt-whisper` plugin with Whisper tiny.en (fetched by `tests/fetch-whisper-model.sh`)
//! and the runner's own decoding settings (the fitted window, the router's vocabulary,
//! `router.vocabulary` of the real `utter-rules`, as the prompt, three hypotheses re-ranked by
//! the runner's rule, [`Rerank`]), after the capture plugin's own gate has trimmed the silence
//! around the speech (`utter_audio_pipewire::dsp::gate`, the default `[audio.vad]`: audio in
//! which it hears no voice is never transcribed); dropped as the voice loop drops non-speech
//! ([`not_speech`]);
//! then planned by the real `utter-rules` in the case's desktop context and judged as `utter
//! eval` judges. A hundred clips without speech (silence, noise, music, coughs, hum and
//! clicks, made here) are heard the same way and must plan nothing. Prints the accuracy per
//! voice, speed and noise, per engine, per category, every miss, and fails below a floor, so
//! that a regression in recognition or routing is seen.
//!
//! The audio goes to the plugin as samples (`samples_b64`), not through the microphone,
//! so that the set takes minutes rather than the hour of playing it in real time;
//! `tests/voice.rs` plays commands into the private PipeWire microphone.
//! `UTTER_SPOKEN_SECONDS` bounds the run by time (CI sets it): the utterances are then taken
//! in an order each prefix of which is spread evenly over the categories, voices, speeds,
//! noise and the clips without speech, and the accuracy (and its floor) is that sample's.
//!
//! Debian packages: espeak-ng, flite, festival and festvox-kallpc16k, sox, python3-pip (the
//! model fetch).

use crate::common;

use common::{bin, repo_root, require_program, whisper_model};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::Instant;
use utter_core::runner::voice::{
    MAX_RESCORED, PlanKind, RESCORE_FLOOR, RESCORE_MARGIN, Rerank, Weighed, Weighing, not_speech,
    plan_kind, rescore_pick,
};
use utter_protocol::serde_json::{Value, json};
use utter_protocol::testkit::{SpawnOptions, TestPlugin};
use utter_rules::eval::{self, Report, Verdict};

/// A voice of a text-to-speech engine Debian packages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Voice {
    /// An espeak-ng voice (`espeak-ng -v`).
    Espeak(&'static str),
    /// A voice built into flite (`flite -voice`).
    Flite(&'static str),
    /// A Festival voice (`text2wave`, `(voice_<name>)`).
    Festival(&'static str),
}

impl Voice {
    fn engine(self) -> &'static str {
        match self {
            Voice::Espeak(_) => "espeak-ng",
            Voice::Flite(_) => "flite",
            Voice::Festival(_) => "festival",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Voice::Espeak(v) | Voice::Flite(v) | Voice::Festival(v) => v,
        }
    }
}

/// The voices every case is spoken in: three of espeak-ng's (American, British, Scottish),
/// three of flite's (slt, an American woman; rms, an American man; awb, a Scottish man) and
/// Festival's American diphone voice (kal, Debian's festvox-kallpc16k).
const VOICES: &[Voice] = &[
    Voice::Espeak("en-us"),
    Voice::Espeak("en-gb"),
    Voice::Espeak("en-gb-scotland"),
    Voice::Flite("slt"),
    Voice::Flite("rms"),
    Voice::Flite("awb"),
    Voice::Festival("kal_diphone"),
];

/// How fast: espeak-ng at 150 or 185 words per minute, flite and Festival at their own pace
/// or 20% faster (a duration stretch of 0.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Speed {
    Normal,
    Fast,
}

/// The signal-to-noise ratio of the noisy renditions, in dB.
const NOISE_SNR_DB: f64 = 10.0;

/// One way a case is said: a voice, a speed, and clean or mixed with noise at
/// [`NOISE_SNR_DB`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Rendition {
    voice: Voice,
    speed: Speed,
    noisy: bool,
}

impl std::fmt::Display for Rendition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} {}{}",
            self.voice.engine(),
            self.voice.name(),
            match self.speed {
                Speed::Normal => "normal",
                Speed::Fast => "fast",
            },
            if self.noisy { " +noise" } else { "" }
        )
    }
}

/// Every rendition: each voice at both speeds clean, and each voice at its normal speed with
/// noise.
fn renditions() -> Vec<Rendition> {
    let mut all = Vec::new();
    for &voice in VOICES {
        for speed in [Speed::Normal, Speed::Fast] {
            all.push(Rendition {
                voice,
                speed,
                noisy: false,
            });
        }
    }
    for &voice in VOICES {
        all.push(Rendition {
            voice,
            speed: Speed::Normal,
            noisy: true,
        });
    }
    all
}

/// How many clips without speech (silence, noise, music, coughs, hum and clicks) the set
/// holds; none may run anything.
const CLIPS: usize = 100;

/// One utterance of the set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Utterance {
    /// Case number `case` of `spoken.toml`, said as `rendition` says.
    Said { case: usize, rendition: Rendition },
    /// Clip number `n` of [`clip`]: no speech.
    Clip(usize),
}

/// The accuracy below which the test fails: a guard against regressions, under the 47.6%
/// measured over all seven voices, both speeds and the noisy renditions when flite, Festival
/// and noise were added (58.3% clean, 26.2% at 10 dB SNR; the goal is 90% clean and 80% with
/// noise). A sample (`UTTER_SPOKEN_SECONDS`) is held to [`floor_for`] instead.
const FLOOR: f64 = 0.45;

/// The share of the clips without speech that must plan nothing (silence, noise, music,
/// coughs: a command planned from one is an action nobody asked for).
const QUIET_FLOOR: f64 = 1.0;

/// The floor for `heard` of the set's `all` utterances: [`FLOOR`] for the whole set; for a
/// sample, two standard errors of a sample that size below it, so that a set still at the
/// floor fails by chance about once in forty runs of a fresh sample (CI's sample of about
/// 150 utterances is held to about 37%: a broken recogniser or router fails, a drop of a few
/// points is only seen by the whole set).
fn floor_for(heard: usize, all: usize) -> f64 {
    if heard >= all {
        return FLOOR;
    }
    FLOOR - 2.0 * (FLOOR * (1.0 - FLOOR) / heard.max(1) as f64).sqrt()
}

#[test]
fn a_sample_is_held_to_a_floor_two_standard_errors_lower() {
    assert_eq!(floor_for(2940, 2940), FLOOR);
    let two_errors = 2.0 * (FLOOR * (1.0 - FLOOR) / 100.0).sqrt();
    assert!((floor_for(100, 2940) - (FLOOR - two_errors)).abs() < 1e-9);
    assert!(floor_for(400, 2940) > floor_for(100, 2940));
}

/// Set to `1` to score the configuration before issue 15 instead (the full 30 s window,
/// one hypothesis, no prompt), for comparison; the floor does not apply then.
const BASELINE_ENV: &str = "UTTER_SPOKEN_BASELINE";

/// Another faster-whisper model directory to hear the set with (default: tiny.en, fetched
/// by `tests/fetch-whisper-model.sh`), to compare models on the same set.
const MODEL_ENV: &str = "UTTER_SPOKEN_MODEL";

/// A number of utterances to take (the first of [`sample_order`]) instead of all: two
/// settings compared on the same sample.
const COUNT_ENV: &str = "UTTER_SPOKEN_COUNT";

/// `UTTER_SPOKEN_ONLY=clips` hears only the clips without speech, `commands` only the
/// commands (to calibrate the rescoring on more clips than a sample holds).
const ONLY_ENV: &str = "UTTER_SPOKEN_ONLY";

/// `UTTER_SPOKEN_WEIGHTS=FILE` writes a line for each utterance whose best candidate was
/// weighed against the audio, to calibrate [`RESCORE_MARGIN`] and [`RESCORE_FLOOR`] offline:
/// tab-separated `kind` (`command` or `clip`), category, rendition, the transcript's log
/// probability and tokens, the candidate's log probability and tokens, whether the
/// candidate's plan is right and whether the transcript's is (`-` for a clip), the
/// transcription's `no_speech_prob` and the audio's length in seconds.
const WEIGHTS_ENV: &str = "UTTER_SPOKEN_WEIGHTS";

/// One line of the [`WEIGHTS_ENV`] file: `what` (kind, category, rendition), the transcript's
/// and the best candidate's weights, `right` (the candidate's plan, the transcript's), the
/// `no_speech_prob` and the audio's seconds, tab-separated.
fn weights_line(
    what: [&str; 3],
    heard: &Weighed,
    candidate: &Weighed,
    right: [&str; 2],
    no_speech_prob: f64,
    seconds: f64,
) -> String {
    format!(
        "{}\t{}\t{}\t{}\t{}\t{}\t{no_speech_prob}\t{seconds:.2}",
        what.join("\t"),
        heard.logprob,
        heard.tokens,
        candidate.logprob,
        candidate.tokens,
        right.join("\t"),
    )
}

/// `UTTER_SPOKEN_RESCORE=0` leaves out the runner's rescoring (`router.candidates`, then
/// `stt.score`), to see what it adds.
const RESCORE_ENV: &str = "UTTER_SPOKEN_RESCORE";

/// The margins (natural log) the set is also judged at, to calibrate
/// [`utter_core::runner::voice::RESCORE_MARGIN`]: the accuracy each would give is printed.
const MARGINS: &[f64] = &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 12.0];

/// The floors (mean natural log per token) the set is also judged at, at
/// [`utter_core::runner::voice::RESCORE_MARGIN`], to calibrate
/// [`utter_core::runner::voice::RESCORE_FLOOR`]: the accuracy and the clips without speech
/// each would turn into commands are printed.
const FLOORS: &[f64] = &[-2.0, -2.5, -3.0, -3.5, -4.0, -5.0];

/// How long one transcription may take.
const TRANSCRIBE_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Seconds the set may take (CI sets it: `.ci/run`). Unset or 0: every utterance. With a
/// budget, utterances are taken in [`sample_order`] until it is spent, so the accuracy is
/// that of a sample spread evenly over the categories, voices and speeds.
const BUDGET_ENV: &str = "UTTER_SPOKEN_SECONDS";

/// Every utterance of the set in an order each prefix of which is a fair sample: every
/// category in proportion to its size (an utterance's place is its fractional place in its
/// category's own list), each case said once before any is said twice, the renditions
/// rotated from case to case across the whole set (not within each category: categories of
/// ten cases would all start on the same three), and the `clips` without speech spread
/// evenly among them.
fn sample_order(cases: &[eval::Case], clips: usize) -> Vec<Utterance> {
    let combos = renditions();
    let mut by_category: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, case) in cases.iter().enumerate() {
        by_category.entry(&case.category).or_default().push(i);
    }
    let mut keyed = Vec::new();
    // The rotation of each category starts where the one before it ended.
    let mut offset = 0;
    for members in by_category.values() {
        let len = members.len() * combos.len();
        for round in 0..combos.len() {
            for (j, &case) in members.iter().enumerate() {
                let k = round * members.len() + j;
                let rendition = combos[(offset + j + round) % combos.len()];
                keyed.push((
                    (2 * k + 1) as f64 / (2 * len) as f64,
                    Utterance::Said { case, rendition },
                ));
            }
        }
        offset += members.len();
    }
    for n in 0..clips {
        keyed.push(((2 * n + 1) as f64 / (2 * clips) as f64, Utterance::Clip(n)));
    }
    // A stable sort: equal places keep the categories' order.
    keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
    keyed.into_iter().map(|(_, u)| u).collect()
}

#[test]
fn a_prefix_of_the_sample_order_covers_every_category_in_proportion() {
    let case = |category: &str, say: &str| eval::Case {
        category: category.into(),
        say: say.into(),
        focused: None,
        windows: Vec::new(),
        compositor: None,
        expect: Vec::new(),
        escalate: None,
        note: None,
    };
    // Three categories of ten cases (as the set's are) and a smaller one.
    let mut cases = Vec::new();
    for category in ["a", "b", "c"] {
        for i in 0..10 {
            cases.push(case(category, &format!("{category}{i}")));
        }
    }
    for i in 0..5 {
        cases.push(case("small", &format!("s{i}")));
    }
    let order = sample_order(&cases, 0);
    let combos = renditions().len();
    assert_eq!(order.len(), cases.len() * combos);
    let all: std::collections::BTreeSet<_> = order.iter().collect();
    assert_eq!(all.len(), order.len(), "each utterance once");
    // The first 35: each case once, so each category in proportion to its size.
    let head = &order[..35];
    let said = |u: &Utterance| match u {
        Utterance::Said { case, rendition } => (*case, *rendition),
        Utterance::Clip(_) => unreachable!("no clips asked for"),
    };
    let cases_seen: std::collections::BTreeSet<usize> = head.iter().map(|u| said(u).0).collect();
    assert_eq!(cases_seen.len(), 35, "{head:?}");
    // Every rendition about as often as the others.
    let mut per_combo: BTreeMap<Rendition, usize> = BTreeMap::new();
    for u in head {
        *per_combo.entry(said(u).1).or_default() += 1;
    }
    assert_eq!(per_combo.len(), combos, "{per_combo:?}");
    assert!(
        per_combo.values().all(|n| (1..=3).contains(n)),
        "{per_combo:?}"
    );
    // Clips without speech are spread through the order: about half are in its first half.
    let order = sample_order(&cases, 10);
    let early = order[..order.len() / 2]
        .iter()
        .filter(|u| matches!(u, Utterance::Clip(_)))
        .count();
    assert_eq!(early, 5, "{order:?}");
}

/// 16 kHz mono f32 samples of `text` said as `rendition` says: espeak-ng, flite or Festival,
/// resampled by sox, mixed with noise when the rendition is noisy.
fn speak(text: &str, rendition: Rendition) -> Vec<f32> {
    let to_raw = "sox -q -t wav - -r 16000 -c 1 -e float -b 32 -t raw -";
    // flite and Festival write a file: a duration stretch for their speed, and a place.
    let stretch = match rendition.speed {
        Speed::Normal => "1.0",
        Speed::Fast => "0.8",
    };
    let dir = tempfile::tempdir().expect("a temp dir");
    let wav = dir.path().join("said.wav");
    let out = match rendition.voice {
        Voice::Espeak(voice) => {
            let wpm = match rendition.speed {
                Speed::Normal => "150",
                Speed::Fast => "185",
            };
            std::process::Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "espeak-ng -v \"$1\" -s \"$2\" --stdout \"$3\" | {to_raw}"
                ))
                .args(["sh", voice, wpm, text])
                .output()
                .expect("espeak-ng and sox run")
        }
        Voice::Flite(voice) => {
            std::process::Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "flite -voice \"$1\" --setf duration_stretch=\"$2\" -t \"$3\" -o \"$4\" && {to_raw} < \"$4\""
                ))
                .args(["sh", voice, stretch, text])
                .arg(&wav)
                .output()
                .expect("flite and sox run")
        }
        Voice::Festival(voice) => {
            // The text goes in on stdin and the voice and speed as Scheme calls built of
            // fixed names only (the voice is one of [`VOICES`]).
            let mut child = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "text2wave -o \"$3\" -eval \"(voice_$1)\" -eval \"(Parameter.set 'Duration_Stretch $2)\" && {to_raw} < \"$3\""
                ))
                .args(["sh", voice, stretch])
                .arg(&wav)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("text2wave (festival) and sox run");
            {
                use std::io::Write as _;
                let mut stdin = child.stdin.take().expect("stdin");
                stdin
                    .write_all(text.as_bytes())
                    .expect("text2wave reads the text");
            }
            child.wait_with_output().expect("text2wave and sox end")
        }
    };
    assert!(
        out.status.success(),
        "{} ({rendition}) or sox failed: {out:?}",
        rendition.voice.engine()
    );
    let mut samples: Vec<f32> = out
        .stdout
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    if rendition.noisy {
        let seed = text.bytes().fold(0x9e37_79b9_7f4a_7c15_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        add_noise(&mut samples, NOISE_SNR_DB, seed);
    }
    samples
}

/// A small deterministic random source (xorshift64*), so that every run hears the same
/// noise.
struct Noise(u64);

impl Noise {
    fn new(seed: u64) -> Noise {
        Noise(seed | 1)
    }

    /// Uniform in [-1, 1).
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let bits = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40;
        (bits as f32 / (1u64 << 23) as f32) - 1.0
    }

    /// Pink-ish noise (white noise through a one-pole low-pass), `n` samples at RMS 1.
    fn pink(&mut self, n: usize) -> Vec<f32> {
        let mut low = 0.0f32;
        let mut out: Vec<f32> = (0..n)
            .map(|_| {
                low = 0.9 * low + 0.1 * self.next();
                low + 0.15 * self.next()
            })
            .collect();
        let rms = (out.iter().map(|x| x * x).sum::<f32>() / n.max(1) as f32).sqrt();
        if rms > 0.0 {
            out.iter_mut().for_each(|x| *x /= rms);
        }
        out
    }
}

/// Mix pink noise into `samples` at `snr_db` below the speech: the speech's power is that of
/// its 20 ms frames within 30 dB of the loudest (the pauses left out).
fn add_noise(samples: &mut [f32], snr_db: f64, seed: u64) {
    let frames: Vec<f64> = samples
        .chunks(320)
        .map(|f| f.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>() / f.len() as f64)
        .collect();
    let loudest = frames.iter().copied().fold(0.0, f64::max);
    let voiced: Vec<f64> = frames
        .into_iter()
        .filter(|p| *p > loudest / 1000.0)
        .collect();
    if voiced.is_empty() {
        return;
    }
    let speech = voiced.iter().sum::<f64>() / voiced.len() as f64;
    let gain = (speech / 10f64.powf(snr_db / 10.0)).sqrt() as f32;
    let noise = Noise::new(seed).pink(samples.len());
    for (s, n) in samples.iter_mut().zip(noise) {
        *s = (*s + gain * n).clamp(-1.0, 1.0);
    }
}

#[test]
fn noise_is_mixed_at_the_asked_ratio_and_every_run_hears_the_same() {
    let clean: Vec<f32> = (0..16_000).map(|i| 0.3 * (i as f32 * 0.05).sin()).collect();
    let mut noisy = clean.clone();
    add_noise(&mut noisy, NOISE_SNR_DB, 7);
    let power = |x: &[f32]| x.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>();
    let noise: Vec<f32> = noisy.iter().zip(&clean).map(|(n, c)| n - c).collect();
    let snr = 10.0 * (power(&clean) / power(&noise)).log10();
    assert!((snr - NOISE_SNR_DB).abs() < 0.5, "{snr} dB");
    let mut again = clean.clone();
    add_noise(&mut again, NOISE_SNR_DB, 7);
    assert_eq!(again, noisy);
}

#[test]
fn the_clips_without_speech_are_of_every_kind_and_in_range() {
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for n in 0..CLIPS {
        let (kind, samples) = clip(n);
        *kinds.entry(kind).or_default() += 1;
        let seconds = samples.len() as f32 / 16_000.0;
        assert!((0.5..=3.6).contains(&seconds), "{kind} {n}: {seconds} s");
        assert!(
            samples.iter().all(|s| s.is_finite() && s.abs() <= 1.0),
            "{kind} {n}"
        );
    }
    assert_eq!(kinds.len(), 5, "{kinds:?}");
    assert!(kinds.values().all(|n| *n == CLIPS / 5), "{kinds:?}");
}

/// Clip number `n` of the [`CLIPS`] without speech, as its kind and 16 kHz samples: digital
/// silence with a little dither, steady noise at several levels, music (chords with a beat
/// and a melody), coughs (bursts of noise that die away), and mains hum with key clicks,
/// each 0.6–3.5 s long.
fn clip(n: usize) -> (&'static str, Vec<f32>) {
    let rate = 16_000.0f32;
    let mut noise = Noise::new(0x5eed_0000 + n as u64);
    let seconds = 0.6 + (n % 7) as f32 * 0.48;
    let len = (seconds * rate) as usize;
    let level = |db: f32| 10f32.powf(db / 20.0);
    match n % 5 {
        0 => {
            let dither = level(-80.0 + (n % 3) as f32 * 10.0);
            let samples = (0..len).map(|_| dither * noise.next()).collect();
            ("silence", samples)
        }
        1 => {
            let gain = level(-45.0 + (n / 5 % 6) as f32 * 6.0);
            let samples = noise.pink(len).into_iter().map(|x| gain * x).collect();
            ("noise", samples)
        }
        2 => {
            // A chord on each beat and a melody above it, in a key chosen by n.
            let root = 110.0 * 2f32.powf((n % 12) as f32 / 12.0);
            let chord = [1.0, 1.26, 1.5];
            let melody = [2.0, 2.25, 2.52, 3.0, 2.52, 2.25];
            let beat = (0.35 + (n % 4) as f32 * 0.1) * rate;
            let gain = level(-20.0 - (n / 5 % 3) as f32 * 6.0);
            let samples = (0..len)
                .map(|i| {
                    let t = i as f32 / rate;
                    let in_beat = (i as f32 % beat) / beat;
                    let envelope = (-4.0 * in_beat).exp();
                    let note = melody[(i as f32 / beat) as usize % melody.len()];
                    let tone: f32 = chord
                        .iter()
                        .map(|m| (std::f32::consts::TAU * root * m * t).sin())
                        .sum::<f32>()
                        / 3.0;
                    let lead = (std::f32::consts::TAU * root * note * t).sin();
                    gain * envelope * (0.6 * tone + 0.4 * lead)
                })
                .collect();
            ("music", samples)
        }
        3 => {
            // Two or three coughs: a sharp onset, a decay of about 150 ms, low-passed noise.
            let coughs = 2 + n % 2;
            let gain = level(-12.0 - (n / 5 % 3) as f32 * 6.0);
            let mut samples = vec![0.0f32; len];
            let mut low = 0.0f32;
            for (i, s) in samples.iter_mut().enumerate() {
                let t = i as f32 / len as f32 * coughs as f32;
                let into = t.fract() * seconds / coughs as f32;
                let envelope = if into < 0.01 {
                    into / 0.01
                } else {
                    (-(into - 0.01) / 0.15).exp()
                };
                low = 0.7 * low + 0.3 * noise.next();
                *s = gain * envelope * low * 2.0;
            }
            ("cough", samples)
        }
        _ => {
            // 50 Hz hum with its harmonics, and key clicks at uneven times.
            let gain = level(-30.0 - (n / 5 % 3) as f32 * 6.0);
            let mut samples: Vec<f32> = (0..len)
                .map(|i| {
                    let t = i as f32 / rate;
                    gain * ((std::f32::consts::TAU * 50.0 * t).sin()
                        + 0.5 * (std::f32::consts::TAU * 100.0 * t).sin()
                        + 0.25 * (std::f32::consts::TAU * 150.0 * t).sin())
                })
                .collect();
            let mut at = 0usize;
            while at + 80 < len {
                for k in 0..80 {
                    samples[at + k] += level(-18.0) * noise.next() * (-(k as f32) / 12.0).exp();
                }
                at += 1200 + (noise.next().abs() * 3000.0) as usize;
            }
            ("hum and clicks", samples)
        }
    }
}

fn b64(samples: &[f32]) -> String {
    use base64::Engine as _;
    let bytes: Vec<u8> = samples.iter().flat_map(|s| s.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The rules router in a private home with the corpus's applications installed, as the
/// command corpus test starts it.
async fn start_router(home: &tempfile::TempDir) -> TestPlugin {
    let dir = |sub: &str| {
        let path = home.path().join(sub);
        std::fs::create_dir_all(&path).expect("mkdir");
        path.into_os_string()
    };
    let env: Vec<(OsString, OsString)> = vec![
        ("HOME".into(), dir("home")),
        ("XDG_CONFIG_HOME".into(), dir("config")),
        ("XDG_DATA_HOME".into(), dir("data")),
        (
            "XDG_DATA_DIRS".into(),
            repo_root().join("tests/corpus").into_os_string(),
        ),
        ("NIRI_CONFIG".into(), "".into()),
        ("UTTER_SITES".into(), "".into()),
        ("UTTER_SEARCH_URL".into(), "".into()),
    ];
    TestPlugin::start(
        &[bin("utter-rules").into_os_string()],
        SpawnOptions {
            env,
            ..SpawnOptions::default()
        },
    )
    .await
    .expect("utter-rules starts")
}

/// `case` with every string of its expected arguments in lower case (see [`lowercased`]).
fn lowercased_case(case: &eval::Case) -> eval::Case {
    fn lower(v: &mut toml::Value) {
        match v {
            toml::Value::String(s) => *s = s.to_lowercase(),
            toml::Value::Array(a) => a.iter_mut().for_each(lower),
            toml::Value::Table(t) => t.iter_mut().for_each(|(_, v)| lower(v)),
            _ => {}
        }
    }
    let mut case = case.clone();
    for expected in &mut case.expect {
        expected.args.iter_mut().for_each(|(_, v)| lower(v));
    }
    case
}

/// `planned` with every string of its steps' arguments in lower case: speech has no case,
/// and Whisper capitalises as it likes ("Click the Send button."), while the set's
/// expectations are written as typed; both sides are compared in lower case.
fn lowercased(planned: &Value) -> Value {
    fn lower(v: &mut Value) {
        match v {
            Value::String(s) => *s = s.to_lowercase(),
            Value::Array(a) => a.iter_mut().for_each(lower),
            Value::Object(o) => o.values_mut().for_each(lower),
            _ => {}
        }
    }
    let mut planned = planned.clone();
    if let Some(steps) = planned.get_mut("steps").and_then(Value::as_array_mut) {
        for step in steps {
            if let Some(args) = step.get_mut("args") {
                lower(args);
            }
        }
    }
    planned
}

#[derive(Default, Clone)]
struct Tally {
    right: usize,
    total: usize,
}

impl Tally {
    fn add(&mut self, ok: bool) {
        self.total += 1;
        self.right += usize::from(ok);
    }
    fn show(&self) -> String {
        format!(
            "{}/{} ({:.1}%)",
            self.right,
            self.total,
            100.0 * self.right as f64 / self.total.max(1) as f64
        )
    }
}

// Ignored in a plain `cargo test`: tests/run.sh runs it on its own with its output shown, so
// that every run prints the accuracy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by tests/run.sh: cargo test --workspace spoken:: -- --ignored --nocapture"]
async fn the_spoken_set_is_heard_and_planned() {
    require_program("espeak-ng", "espeak-ng");
    require_program("flite", "flite");
    require_program("text2wave", "festival festvox-kallpc16k");
    require_program("sox", "sox");
    let model = match std::env::var_os(MODEL_ENV).filter(|m| !m.is_empty()) {
        Some(dir) => std::path::PathBuf::from(dir),
        None => whisper_model(),
    };
    println!("model: {}", model.display());
    let text = std::fs::read_to_string(repo_root().join("tests/corpus/spoken.toml"))
        .expect("the spoken set is there");
    let cases = eval::parse(&text, "spoken.toml").expect("the spoken set parses");
    assert!(cases.len() >= 120, "{} cases", cases.len());
    let categories: std::collections::BTreeSet<&str> =
        cases.iter().map(|c| c.category.as_str()).collect();
    assert!(categories.len() >= 12, "{categories:?}");

    let home = tempfile::tempdir().expect("temp dir");
    let router = start_router(&home).await;
    let stt = TestPlugin::start(
        &[bin("utter-stt-whisper").into_os_string()],
        SpawnOptions::default(),
    )
    .await
    .expect("utter-stt-whisper starts");
    // Loading takes a second; on a loaded machine (a build beside it) more than the test
    // kit's 5 s.
    stt.request_with_timeout(
        "stt.load",
        json!({"model": model.display().to_string(), "language": "en"}),
        Some(TRANSCRIBE_LIMIT),
    )
    .await
    .expect("the model loads");

    let baseline = std::env::var(BASELINE_ENV).is_ok_and(|v| v == "1");
    let rescoring = !baseline && std::env::var(RESCORE_ENV).map_or(true, |v| v != "0");
    let decoding = if baseline {
        json!({"window": "full", "beam_size": 5, "hypotheses": 1})
    } else {
        json!({"window": "fit", "beam_size": 5, "hypotheses": 3})
    };
    println!(
        "decoding: {decoding}{}",
        if baseline {
            " (baseline, no prompt)"
        } else {
            " with the router's vocabulary"
        }
    );
    let budget = std::env::var(BUDGET_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|s| *s > 0)
        .map(std::time::Duration::from_secs);
    let mut order = sample_order(&cases, CLIPS);
    if let Some(count) = std::env::var(COUNT_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
    {
        order.truncate(count);
    }
    let clips_only = std::env::var(ONLY_ENV).as_deref() == Ok("clips");
    match std::env::var(ONLY_ENV).as_deref() {
        Ok("clips") => order.retain(|u| matches!(u, Utterance::Clip(_))),
        Ok("commands") => order.retain(|u| matches!(u, Utterance::Said { .. })),
        Ok(other) => panic!("{ONLY_ENV} is `clips` or `commands`, not {other:?}"),
        Err(_) => {}
    }
    let mut weights_file = std::env::var_os(WEIGHTS_ENV).map(|path| {
        std::fs::File::create(&path)
            .unwrap_or_else(|e| panic!("cannot write {WEIGHTS_ENV}={}: {e}", path.display()))
    });
    let mut write_weights = |line: String| {
        if let Some(file) = weights_file.as_mut() {
            use std::io::Write as _;
            writeln!(file, "{line}").expect("the weights file is written");
        }
    };
    let no_speech_threshold = utter_core::config::SttSection::default().no_speech_threshold;
    let started = Instant::now();
    let mut per_rendition: BTreeMap<String, Tally> = BTreeMap::new();
    let mut per_axis: BTreeMap<String, Tally> = BTreeMap::new();
    let mut total = Tally::default();
    let mut clean = Tally::default();
    let mut noisy = Tally::default();
    let mut quiet = Tally::default();
    let mut report = Report::default();
    let mut misses = Vec::new();
    let mut inference = Vec::new();
    let mut prompts: BTreeMap<Option<usize>, String> = BTreeMap::new();
    let mut commands_heard = std::collections::BTreeSet::new();
    // Per margin: (right, heard) if the runner rescored with that margin.
    // Judged at each of MARGINS, then at each of FLOORS; and the clips without speech each
    // would switch to a candidate (a command where nothing was said).
    let mut at_margin = vec![Tally::default(); MARGINS.len() + FLOORS.len()];
    let mut clips_switched = vec![0usize; MARGINS.len() + FLOORS.len()];
    let mut rescore_ms = Vec::new();
    let mut switched = Tally::default();
    for (done, &utterance) in order.iter().enumerate() {
        if budget.is_some_and(|b| started.elapsed() >= b) {
            break;
        }
        // A line of progress every hundred utterances (a whole run takes half an hour).
        if done > 0 && done % 100 == 0 {
            eprintln!(
                "spoken set: {done}/{} heard in {:.0} s, {} right so far",
                order.len(),
                started.elapsed().as_secs_f64(),
                total.show()
            );
        }
        let (case, rendition) = match utterance {
            Utterance::Said { case, rendition } => (Some(&cases[case]), Some(rendition)),
            Utterance::Clip(_) => (None, None),
        };
        let index = match utterance {
            Utterance::Said { case, .. } => Some(case),
            Utterance::Clip(_) => None,
        };
        // A clip is heard on the corpus's usual desktop: a browser focused, a terminal open.
        let context = match case {
            Some(case) => case.context(),
            None => {
                json!({"focused": {"app_id": "firefox"}, "windows": [{"app_id": "firefox"}, {"app_id": "foot"}]})
            }
        };
        let prompt = match prompts.get(&index) {
            Some(prompt) => prompt.clone(),
            None => {
                let vocabulary = router
                    .request("router.vocabulary", json!({"context": context}))
                    .await
                    .expect("router.vocabulary");
                let prompt = if baseline {
                    String::new()
                } else {
                    vocabulary["prompt"].as_str().unwrap_or("").to_owned()
                };
                prompts.insert(index, prompt.clone());
                prompt
            }
        };
        let (samples, clip_kind) = match (case, rendition) {
            (Some(case), Some(rendition)) => (speak(&case.say, rendition), None),
            _ => {
                let Utterance::Clip(n) = utterance else {
                    unreachable!("a clip")
                };
                let (kind, samples) = clip(n);
                (samples, Some(kind))
            }
        };
        // The capture plugin's gate, as the voice loop hears a press: the silence around
        // speech trimmed, and audio in which its detector hears no voice never transcribed.
        let gated = utter_audio_pipewire::dsp::gate(
            &samples,
            &utter_audio_pipewire::dsp::GateSettings::default(),
        );
        let samples = samples[gated.keep.clone()].to_vec();
        let mut params = json!({
            "samples_b64": b64(&samples),
            "format": "audio.pcm_f32le@1", "rate": 16000, "channels": 1,
            "language": "en", "prompt": prompt,
        });
        for (k, v) in decoding.as_object().expect("an object") {
            params[k] = v.clone();
        }
        // A transcription takes about a second; on a loaded two-core machine (CI, another
        // build beside it) one can pass the test kit's default 5 s, so it gets 60 s: a hang
        // still fails, a slow machine does not.
        let heard = if gated.has_speech {
            stt.request_with_timeout("stt.transcribe", params, Some(TRANSCRIBE_LIMIT))
                .await
                .expect("stt.transcribe")
        } else {
            // What the voice loop reports as "only silence was captured".
            json!({"text": "", "hypotheses": [], "inference_ms": 0.0})
        };
        if gated.has_speech {
            inference.push(heard["inference_ms"].as_f64().unwrap_or(0.0));
        }
        // What the voice loop drops before routing (utter_core::runner::voice::not_speech).
        let dropped = not_speech(&heard, no_speech_threshold);
        // The runner's n-best rule, planning each hypothesis it wants.
        let list = heard["hypotheses"].as_array().cloned().unwrap_or_default();
        let mut rule = Rerank::default();
        let mut plans = Vec::new();
        for hypothesis in list.iter().filter(|_| dropped.is_none()) {
            let text = hypothesis["text"].as_str().unwrap_or("").trim();
            let mut plan = None;
            if !text.is_empty() && rule.wants(hypothesis["score"].as_f64()) {
                plan = Some(
                    router
                        .request(
                            "router.plan",
                            json!({"utterance": text, "provenance": "user", "context": context}),
                        )
                        .await
                        .expect("router.plan"),
                );
            }
            rule.record(plan.as_ref().map(plan_kind));
            plans.push(plan);
        }
        let pick = rule.pick();
        let transcript = list
            .get(pick)
            .and_then(|h| h["text"].as_str())
            .unwrap_or("")
            .to_owned();
        let planned = match plans.get(pick).cloned().flatten() {
            Some(plan) => plan,
            None if dropped.is_none() && !transcript.trim().is_empty() => router
                .request(
                    "router.plan",
                    json!({"utterance": transcript, "provenance": "user", "context": context}),
                )
                .await
                .expect("router.plan"),
            None => json!({"steps": []}),
        };
        // The runner's rescoring: the router's candidates weighed against the audio.
        // (what, its plan, taken at RESCORE_MARGIN, taken at each of MARGINS and FLOORS)
        let mut best_candidate: Option<(String, Value, bool, Vec<bool>)> = None;
        // The transcript's weight and the best candidate's, for the weights file.
        let mut best_weights: Option<(Weighed, Weighed)> = None;
        // As the runner: only a transcript the router does not act on.
        if rescoring
            && dropped.is_none()
            && !transcript.trim().is_empty()
            && !matches!(plan_kind(&planned), PlanKind::Acts | PlanKind::Refused)
        {
            let texts: Vec<&str> = list.iter().filter_map(|h| h["text"].as_str()).collect();
            let candidates = router
                .request_with_timeout(
                    "router.candidates",
                    json!({"hypotheses": texts, "context": context}),
                    Some(TRANSCRIBE_LIMIT),
                )
                .await
                .expect("router.candidates");
            let candidates: Vec<String> = candidates["candidates"]
                .as_array()
                .expect("candidates")
                .iter()
                .filter_map(|c| c["text"].as_str().map(str::to_owned))
                .take(MAX_RESCORED)
                .collect();
            if !candidates.is_empty() {
                let weighing = Weighing::new(&transcript, &candidates);
                let mut params = json!({
                    "samples_b64": b64(&samples),
                    "format": "audio.pcm_f32le@1", "rate": 16000, "channels": 1,
                    "language": "en", "phrases": weighing.phrases,
                });
                if let Some(window) = decoding.get("window") {
                    params["window"] = window.clone();
                }
                let scored = stt
                    .request_with_timeout("stt.score", params, Some(TRANSCRIBE_LIMIT))
                    .await
                    .expect("stt.score");
                rescore_ms.push(scored["inference_ms"].as_f64().unwrap_or(0.0));
                let scores: Vec<Weighed> = scored["scores"]
                    .as_array()
                    .expect("scores")
                    .iter()
                    .map(|s| Weighed {
                        logprob: s["logprob"].as_f64().unwrap_or(f64::NEG_INFINITY),
                        tokens: s["tokens"].as_u64().unwrap_or(0) as usize,
                    })
                    .collect();
                let (heard, weights) = weighing.fold(&scores).expect("a score per phrase");
                // The likeliest candidate is the only one any margin or floor can pick.
                if let Some(best) = rescore_pick(&heard, &weights, f64::INFINITY, f64::NEG_INFINITY)
                {
                    let text = candidates[best].clone();
                    best_weights = Some((heard.clone(), weights[best].clone()));
                    let plan = router
                        .request(
                            "router.plan",
                            json!({"utterance": text, "provenance": "user", "context": context}),
                        )
                        .await
                        .expect("router.plan");
                    // Whether each margin (at the floor) and each floor (at the margin)
                    // switches to it.
                    let switches: Vec<bool> =
                        MARGINS
                            .iter()
                            .map(|m| rescore_pick(&heard, &weights, *m, RESCORE_FLOOR).is_some())
                            .chain(FLOORS.iter().map(|f| {
                                rescore_pick(&heard, &weights, RESCORE_MARGIN, *f).is_some()
                            }))
                            .collect();
                    let takes =
                        rescore_pick(&heard, &weights, RESCORE_MARGIN, RESCORE_FLOOR).is_some();
                    best_candidate = Some((
                        format!(
                            "{text:?} (#{best} of {}) {:.1} ({:.2} a token) vs {:.1}",
                            candidates.len(),
                            weights[best].logprob,
                            weights[best].mean(),
                            heard.logprob,
                        ),
                        plan,
                        takes,
                        switches,
                    ));
                }
            }
        }
        let no_speech_prob = heard["no_speech_prob"].as_f64().unwrap_or(f64::NAN);
        let seconds = samples.len() as f64 / 16_000.0;
        let hypotheses = list
            .iter()
            .filter_map(|h| {
                Some(format!(
                    "{} {:.2}",
                    h["text"].as_str()?,
                    h["score"].as_f64().unwrap_or(f64::NAN)
                ))
            })
            .collect::<Vec<_>>()
            .join(" | ");
        let transcript_plan = planned.clone();
        let (planned, rescored) = match &best_candidate {
            Some((what, plan, true, _)) => (plan.clone(), format!(", rescored to {what}")),
            Some((what, _, false, _)) => (planned, format!(", candidate {what}")),
            None => (planned, String::new()),
        };
        let (Some(case), Some(rendition)) = (case, rendition) else {
            // No speech: nothing may be planned.
            if let Some((heard, candidate)) = &best_weights {
                write_weights(weights_line(
                    ["clip", "-", clip_kind.unwrap_or("clip")],
                    heard,
                    candidate,
                    ["-", "-"],
                    no_speech_prob,
                    seconds,
                ));
            }
            if let Some((_, _, _, switches)) = &best_candidate {
                for (count, switch) in clips_switched.iter_mut().zip(switches) {
                    *count += usize::from(*switch);
                }
            }
            let steps = planned["steps"].as_array().map_or(0, Vec::len);
            quiet.add(steps == 0);
            if steps > 0 {
                misses.push(format!(
                    "MISS [no speech] {} ({:.1} s) heard {transcript:?} (of {hypotheses}){rescored}, no_speech_prob {:.2}: planned {}",
                    clip_kind.unwrap_or("clip"),
                    samples.len() as f64 / 16_000.0,
                    heard["no_speech_prob"].as_f64().unwrap_or(f64::NAN),
                    planned["steps"]
                ));
            }
            continue;
        };
        commands_heard.insert(index);
        let lowered = lowercased_case(case);
        let verdict = eval::judge(&lowered, &lowercased(&planned));
        let ok = matches!(verdict, Verdict::Right);
        // What each margin would have given.
        match &best_candidate {
            Some((_, candidate_plan, taken, switches)) => {
                let right = |plan: &Value| {
                    matches!(eval::judge(&lowered, &lowercased(plan)), Verdict::Right)
                };
                let transcript_right = right(&transcript_plan);
                let candidate_right = right(candidate_plan);
                if let Some((heard, candidate)) = &best_weights {
                    write_weights(weights_line(
                        ["command", &case.category, &rendition.to_string()],
                        heard,
                        candidate,
                        [&candidate_right.to_string(), &transcript_right.to_string()],
                        no_speech_prob,
                        seconds,
                    ));
                }
                if *taken {
                    switched.add(candidate_right);
                }
                for (tally, switch) in at_margin.iter_mut().zip(switches) {
                    tally.add(if *switch {
                        candidate_right
                    } else {
                        transcript_right
                    });
                }
            }
            None => at_margin.iter_mut().for_each(|t| t.add(ok)),
        }
        if !ok {
            misses.push(format!(
                "MISS [{}] {:?} ({rendition}) heard {transcript:?} (of {hypotheses}){rescored}{}: {}",
                case.category,
                case.say,
                dropped
                    .as_deref()
                    .map(|why| format!(", dropped: {why}"))
                    .unwrap_or_default(),
                planned["message"].as_str().unwrap_or("")
            ));
        }
        report.add(case, verdict);
        per_rendition
            .entry(rendition.to_string())
            .or_default()
            .add(ok);
        for axis in [
            format!("engine {}", rendition.voice.engine()),
            format!(
                "speed {}",
                match rendition.speed {
                    Speed::Normal => "normal",
                    Speed::Fast => "fast",
                }
            ),
            format!(
                "noise {}",
                if rendition.noisy { "10 dB SNR" } else { "none" }
            ),
        ] {
            per_axis.entry(axis).or_default().add(ok);
        }
        total.add(ok);
        if rendition.noisy {
            noisy.add(ok);
        } else {
            clean.add(ok);
        }
    }
    for miss in &misses {
        println!("{miss}");
    }
    println!("spoken set by voice, speed and noise:");
    for (rendition, tally) in &per_rendition {
        println!("  {rendition:<34} {}", tally.show());
    }
    println!("spoken set by engine, speed and noise:");
    for (axis, tally) in &per_axis {
        println!("  {axis:<34} {}", tally.show());
    }
    println!("spoken set by category:\n{}", report.table());
    if rescoring {
        rescore_ms.sort_by(f64::total_cmp);
        println!(
            "rescoring: {} commands weighed candidates (stt.score p50 {:.0} ms, p90 {:.0} ms); {} switched, right after switching: {}",
            rescore_ms.len(),
            rescore_ms.get(rescore_ms.len() / 2).copied().unwrap_or(0.0),
            rescore_ms
                .get(rescore_ms.len() * 9 / 10)
                .copied()
                .unwrap_or(0.0),
            switched.total,
            switched.show()
        );
        for (i, (margin, tally)) in MARGINS.iter().zip(&at_margin).enumerate() {
            println!(
                "  margin {margin:>4.1} (floor {RESCORE_FLOOR}): {}, clips turned into commands {}",
                tally.show(),
                clips_switched[i]
            );
        }
        for (i, (floor, tally)) in FLOORS.iter().zip(&at_margin[MARGINS.len()..]).enumerate() {
            println!(
                "  floor {floor:>4.1} (margin {RESCORE_MARGIN}): {}, clips turned into commands {}",
                tally.show(),
                clips_switched[MARGINS.len() + i]
            );
        }
    }
    inference.sort_by(f64::total_cmp);
    let said_in_order = order
        .iter()
        .filter(|u| matches!(u, Utterance::Said { .. }))
        .count();
    println!(
        "spoken set: {} of {} utterances ({} of {} commands{}) and {} of {} clips without speech in {:.0} s; inference p50 {:.0} ms, p90 {:.0} ms (debug plugin build)",
        total.total,
        said_in_order,
        commands_heard.len(),
        cases.len(),
        match budget {
            Some(b) if total.total < said_in_order => format!(
                "; a sample spread over categories, voices, speeds and noise, bounded by {BUDGET_ENV}={}",
                b.as_secs()
            ),
            _ => String::new(),
        },
        quiet.total,
        order.len() - said_in_order,
        started.elapsed().as_secs_f64(),
        inference.get(inference.len() / 2).copied().unwrap_or(0.0),
        inference
            .get(inference.len() * 9 / 10)
            .copied()
            .unwrap_or(0.0),
    );
    println!(
        "SPOKEN SET ACCURACY: {} (floor {:.1}%); clean {}, with noise {}; clips without speech that ran nothing: {}",
        total.show(),
        floor_for(total.total, said_in_order) * 100.0,
        clean.show(),
        noisy.show(),
        quiet.show(),
    );
    let accuracy = total.right as f64 / total.total.max(1) as f64;
    let floor = floor_for(total.total, said_in_order);
    // (UTTER_SPOKEN_ONLY=clips hears no command: only the clips' floor applies.)
    assert!(
        baseline || clips_only || accuracy >= floor,
        "the spoken set fell to {} (floor {:.1}% for {} of {} utterances)",
        total.show(),
        floor * 100.0,
        total.total,
        said_in_order
    );
    assert!(
        quiet.right as f64 >= QUIET_FLOOR * quiet.total as f64,
        "clips without speech planned commands: {} ran nothing (floor {:.0}%)",
        quiet.show(),
        QUIET_FLOOR * 100.0
    );
}
