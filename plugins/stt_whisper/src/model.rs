//! Loading a faster-whisper (CTranslate2) model directory and transcribing 16 kHz mono audio.
//!
//! A faster-whisper model directory, as produced by CTranslate2's
//! `ct2-transformers-converter` (and published as `Systran/faster-whisper-*`), holds:
//!
//! | file | read by | what it is |
//! |---|---|---|
//! | `model.bin` | CTranslate2 | the weights |
//! | `config.json` | CTranslate2 | suppressed tokens, language ids, alignment heads |
//! | `vocabulary.json` or `vocabulary.txt` | CTranslate2 | the token list |
//! | `tokenizer.json` | ct2rs (Hugging Face `tokenizers`) | decoding tokens to text |
//!
//! A `preprocessor_config.json` is not needed: the log-mel features are computed by
//! [`crate::features`] with the mel bin count the model reports.
//!
//! [`check_model_dir`] names every missing file before anything is loaded, so an incomplete
//! directory gives one clear error instead of the first failure deep inside CTranslate2.

use crate::features::{FrontEnd, HOP, N_FRAMES};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The sample rate Whisper expects, in Hz.
pub const SAMPLE_RATE: u32 = 16_000;

/// Samples in one Whisper window: 30 s at 16 kHz. Longer audio is cut into windows of this
/// size (see [`Transcriber::transcribe_with`]).
pub const CHUNK_SAMPLES: usize = 30 * SAMPLE_RATE as usize;

/// One file (or a choice of files) a model directory must hold.
struct Required {
    /// Any of these names satisfies the requirement.
    names: &'static [&'static str],
    /// How to get it when it is missing.
    fix: &'static str,
}

const REQUIRED: &[Required] = &[
    Required {
        names: &["model.bin"],
        fix: "model.bin holds the weights: point `model` at a complete faster-whisper \
              directory (e.g. a download of Systran/faster-whisper-tiny.en, or the output of \
              `ct2-transformers-converter --model openai/whisper-tiny.en`)",
    },
    Required {
        names: &["config.json"],
        fix: "config.json is written by ct2-transformers-converter next to model.bin; copy it \
              from the same model release",
    },
    Required {
        names: &["vocabulary.json", "vocabulary.txt"],
        fix: "vocabulary.json or vocabulary.txt is written by ct2-transformers-converter next \
              to model.bin; copy it from the same model release",
    },
    Required {
        names: &["tokenizer.json"],
        fix: "tokenizer.json comes with the original Hugging Face model (e.g. \
              openai/whisper-tiny.en) and with faster-whisper releases",
    },
];

/// Why a model directory cannot be used. The messages say what to fix.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The path does not exist.
    #[error(
        "Whisper model directory {} does not exist; set `model` to a faster-whisper \
         (CTranslate2) model directory (nothing is downloaded)", .dir.display()
    )]
    NotFound {
        /// The path given.
        dir: PathBuf,
    },
    /// The path exists but is not a directory.
    #[error(
        "{} is not a directory; `model` must name a faster-whisper (CTranslate2) model \
         directory holding model.bin, config.json, vocabulary.* and tokenizer.json", .dir.display()
    )]
    NotADirectory {
        /// The path given.
        dir: PathBuf,
    },
    /// Files are missing; `missing` names each (alternatives joined with " or ").
    #[error(
        "Whisper model directory {} is incomplete: missing {}. {}", .dir.display(),
        .missing.join(", "), .fixes.join("; ")
    )]
    Incomplete {
        /// The directory.
        dir: PathBuf,
        /// The missing files, e.g. `["model.bin", "vocabulary.json or vocabulary.txt"]`.
        missing: Vec<String>,
        /// How to obtain each missing file, in the same order.
        fixes: Vec<String>,
    },
    /// Every file is there but CTranslate2 or the tokenizer refused them.
    #[error(
        "cannot load the Whisper model in {}: {message}; is it a CTranslate2 (faster-whisper) \
         conversion and not a ggml/PyTorch file?", .dir.display()
    )]
    Load {
        /// The directory.
        dir: PathBuf,
        /// The engine's message.
        message: String,
    },
}

impl ModelError {
    /// The files this error says are missing (empty unless [`ModelError::Incomplete`]).
    pub fn missing(&self) -> &[String] {
        match self {
            ModelError::Incomplete { missing, .. } => missing,
            _ => &[],
        }
    }
}

/// Check that `dir` is a directory holding every file a faster-whisper model needs (see the
/// module docs), without loading anything. Every missing file is named in the error.
pub fn check_model_dir(dir: &Path) -> Result<(), ModelError> {
    let meta = std::fs::metadata(dir).map_err(|_| ModelError::NotFound {
        dir: dir.to_path_buf(),
    })?;
    if !meta.is_dir() {
        return Err(ModelError::NotADirectory {
            dir: dir.to_path_buf(),
        });
    }
    let mut missing = Vec::new();
    let mut fixes = Vec::new();
    for req in REQUIRED {
        if !req.names.iter().any(|name| dir.join(name).is_file()) {
            missing.push(req.names.join(" or "));
            fixes.push(req.fix.to_owned());
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(ModelError::Incomplete {
            dir: dir.to_path_buf(),
            missing,
            fixes,
        })
    }
}

/// How to load a model.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// CPU threads for inference; 0 picks the number of cores, at most 4.
    pub threads: usize,
}

/// Why a transcription failed.
#[derive(Debug, thiserror::Error)]
pub enum TranscribeError {
    /// The language is not a Whisper language code.
    #[error(
        "language {0:?} is not a Whisper language code; use a lowercase ISO 639-1 code such as \
         \"en\" or \"de\""
    )]
    BadLanguage(String),
    /// An English-only model was asked for another language.
    #[error(
        "the model in {model} is English-only (a .en model) and cannot transcribe {language:?}; \
         use language \"en\" or a multilingual model"
    )]
    EnglishOnly {
        /// The model directory.
        model: String,
        /// The language asked for.
        language: String,
    },
    /// A sample is NaN or infinite.
    #[error("sample {index} is {value}; samples must be finite floats (normally in [-1, 1])")]
    NotFinite {
        /// Its index.
        index: usize,
        /// Its value.
        value: f32,
    },
    /// [`Transcriber::score`] was given audio longer than one window.
    #[error(
        "the audio is {samples} samples ({seconds:.3} s); phrases are scored against one window \
         of at most 480000 samples (30 s, a spoken command), so transcribe longer audio instead"
    )]
    TooLongToScore {
        /// The audio's length in samples.
        samples: usize,
        /// The audio's length in seconds.
        seconds: f64,
    },
    /// CTranslate2 failed.
    #[error("Whisper inference failed: {0}")]
    Engine(String),
}

/// How much of the 30 s window Whisper's encoder sees.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Window {
    /// Always 30 s (3000 frames), zero-padded: what Whisper was trained on, and what
    /// faster-whisper does. The encoder's cost does not depend on the audio's length.
    Full,
    /// The audio's length plus `padding` of silence, rounded up to whole frames (at most
    /// 30 s). The encoder's cost grows with the length, so a 1.5 s command costs a fraction
    /// of a full window.
    Fit {
        /// Silence appended after the audio (Whisper expects some before its end token).
        padding: Duration,
    },
}

impl Window {
    /// The default: the audio plus 1 s of silence.
    pub const DEFAULT: Window = Window::Fit {
        padding: Duration::from_millis(1000),
    };

    /// Frames (10 ms each) the encoder sees for `samples` samples of one window.
    pub fn frames(self, samples: usize) -> usize {
        match self {
            Window::Full => N_FRAMES,
            Window::Fit { padding } => {
                let padded = samples + (padding.as_secs_f64() * f64::from(SAMPLE_RATE)) as usize;
                // Even, so that the encoder's stride-2 convolution halves it exactly.
                padded.div_ceil(HOP).next_multiple_of(2).clamp(2, N_FRAMES)
            }
        }
    }
}

/// How to decode one transcription. [`DecodeOptions::default`] is what `stt.transcribe`
/// uses without parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeOptions {
    /// An ISO 639-1 code (`"en"`); `None` means English for an English-only model and
    /// detection otherwise.
    pub language: Option<String>,
    /// The encoder window (default [`Window::DEFAULT`]).
    pub window: Window,
    /// Beam width (1 is greedy search; default 5, as faster-whisper).
    pub beam_size: usize,
    /// How many hypotheses to return, best first (1..=`beam_size`; default 1).
    pub hypotheses: usize,
    /// Text the model sees as if it had been said just before (Whisper's "previous text"
    /// prompt after `<|startofprev|>`, faster-whisper's `initial_prompt`): names listed here
    /// become likelier spellings. At most [`MAX_PROMPT_TOKENS`] tokens are kept (the last
    /// ones, nearest to the audio).
    pub prompt: Option<String>,
}

impl Default for DecodeOptions {
    fn default() -> DecodeOptions {
        DecodeOptions {
            language: None,
            window: Window::DEFAULT,
            beam_size: 5,
            hypotheses: 1,
            prompt: None,
        }
    }
}

/// The most prompt tokens Whisper takes: half of its 448-token context, as OpenAI's
/// reference decoder keeps (`n_text_ctx // 2 - 1`).
pub const MAX_PROMPT_TOKENS: usize = 223;

/// One decoding hypothesis.
#[derive(Debug, Clone, PartialEq)]
pub struct Hypothesis {
    /// Its text, trimmed.
    pub text: String,
    /// CTranslate2's score: the sum of the tokens' log probabilities divided by the token
    /// count (length penalty 1), so 0 is certain and lower is less likely. `None` when
    /// the audio spanned several windows (the texts are joined, the scores are not).
    pub score: Option<f32>,
}

/// The result of one transcription.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    /// The text, each window's best text trimmed and joined with single spaces.
    pub text: String,
    /// The hypotheses, best first; the first one's text is `text`. More than one only when
    /// [`DecodeOptions::hypotheses`] asked for them and the audio fitted in one window.
    pub hypotheses: Vec<Hypothesis>,
    /// Whisper's probability that the audio holds no speech (the `<|nospeech|>` token at
    /// the first step, 0–1), the largest over the windows; 0 for no audio.
    pub no_speech_prob: f32,
    /// The language the model was told to transcribe (`None`: detected by a multilingual
    /// model, which ct2rs does not report).
    pub language: Option<String>,
    /// The length of the audio (samples / 16 000).
    pub audio: Duration,
    /// Wall time spent in feature extraction and inference.
    pub inference: Duration,
    /// How many 30 s windows the audio was cut into (0 for no audio).
    pub chunks: usize,
    /// Frames (10 ms) the encoder saw in the last window (see [`Window`]).
    pub frames: usize,
}

/// The text of one 30 s window, as [`Transcriber::transcribe_with`] reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkText {
    /// 0-based index of the window.
    pub index: usize,
    /// How many windows the audio has.
    pub count: usize,
    /// The window's text, trimmed.
    pub text: String,
}

/// What one window decoded to.
struct WindowResult {
    hypotheses: Vec<Hypothesis>,
    no_speech_prob: f32,
    frames: usize,
}

/// How likely the audio makes one phrase ([`Transcriber::score`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PhraseScore {
    /// The phrase, as given.
    pub text: String,
    /// The natural log of the probability the decoder gives the phrase's tokens, one after
    /// the other, given the audio (the sum over its tokens; 0 is certain). Comparable
    /// between phrases of one audio; more tokens cost more, so a phrase that stops short of
    /// what was said is not favoured unless its last token (a full stop) is likely there.
    pub logprob: f32,
    /// How many tokens the phrase is.
    pub tokens: usize,
}

/// The encoder's output for the last audio transcribed in one window, kept so that
/// [`Transcriber::score`] on the same audio does not encode it again.
struct Encoded {
    /// [`audio_key`] of the samples, the frame count and the language.
    key: u64,
    /// Frames (10 ms) the encoder saw.
    frames: usize,
    /// `[1, frames / 2, d_model]` on the CPU.
    output: ct2rs::sys::StorageView<'static>,
}

/// What identifies one encoding: the samples' bits, the frame count and the language.
fn audio_key(samples: &[f32], frames: usize, language: Option<&str>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    samples.len().hash(&mut hasher);
    for sample in samples {
        sample.to_bits().hash(&mut hasher);
    }
    frames.hash(&mut hasher);
    language.hash(&mut hasher);
    hasher.finish()
}

/// The most phrases one [`Transcriber::score`] call takes.
pub const MAX_SCORED_PHRASES: usize = 64;

/// The most tokens of a phrase that are scored (a spoken command is a few dozen at most;
/// the rest of a longer one is not weighed, which bounds one call to
/// [`MAX_SCORED_PHRASES`] short decoder passes).
const MAX_PHRASE_TOKENS: usize = 64;

/// A loaded Whisper model: CTranslate2 on the CPU with int8 weights.
///
/// Loading takes about a second for tiny.en; keep one `Transcriber` per model and share it
/// (`transcribe` takes `&self`; CTranslate2 serialises concurrent calls on its replica).
pub struct Transcriber {
    whisper: ct2rs::sys::Whisper,
    tokenizer: ct2rs::tokenizers::hf::Tokenizer,
    front_end: FrontEnd,
    dir: PathBuf,
    load_time: Duration,
    /// The last single-window encoding ([`Transcriber::score`] reuses it).
    encoded: std::sync::Mutex<Option<Encoded>>,
}

impl std::fmt::Debug for Transcriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transcriber")
            .field("dir", &self.dir)
            .field("load_time", &self.load_time)
            .finish_non_exhaustive()
    }
}

impl Transcriber {
    /// Load the faster-whisper model in `dir` for int8 inference on the CPU.
    ///
    /// Errors: [`ModelError::NotFound`], [`ModelError::NotADirectory`],
    /// [`ModelError::Incomplete`] (naming every missing file, checked before loading) or
    /// [`ModelError::Load`] when the engine rejects the files. Blocking (about 1 s for tiny).
    pub fn load(dir: &Path, options: &LoadOptions) -> Result<Transcriber, ModelError> {
        check_model_dir(dir)?;
        let threads = if options.threads > 0 {
            options.threads
        } else {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
                .min(4)
        };
        let config = ct2rs::Config {
            device: ct2rs::Device::CPU,
            compute_type: ct2rs::ComputeType::INT8,
            num_threads_per_replica: threads,
            ..Default::default()
        };
        let started = Instant::now();
        let load_error = |e: anyhow::Error| ModelError::Load {
            dir: dir.to_path_buf(),
            message: format!("{e:#}"),
        };
        let whisper = ct2rs::sys::Whisper::new(dir, config).map_err(load_error)?;
        let tokenizer = ct2rs::tokenizers::hf::Tokenizer::new(dir).map_err(load_error)?;
        let front_end = FrontEnd::new(whisper.n_mels());
        Ok(Transcriber {
            whisper,
            tokenizer,
            front_end,
            dir: dir.to_path_buf(),
            load_time: started.elapsed(),
            encoded: std::sync::Mutex::new(None),
        })
    }

    /// The model directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How long [`Transcriber::load`] took.
    pub fn load_time(&self) -> Duration {
        self.load_time
    }

    /// Whether the model knows several languages (false for the `.en` models).
    pub fn is_multilingual(&self) -> bool {
        self.whisper.is_multilingual()
    }

    /// Transcribe `samples` (16 kHz, mono, f32 in [-1, 1]) as `options` say. Blocking.
    /// See [`Transcriber::transcribe_with`] for long audio.
    pub fn transcribe(
        &self,
        samples: &[f32],
        options: &DecodeOptions,
    ) -> Result<Transcript, TranscribeError> {
        self.transcribe_with(samples, options, |_| {})
    }

    /// [`Transcriber::transcribe`], calling `on_chunk` with each window's text as soon as it
    /// is decoded.
    ///
    /// Whisper sees at most 30 s at once, so longer audio is cut into consecutive windows of
    /// [`CHUNK_SAMPLES`] (the last one shorter), each transcribed on its own, and the texts
    /// are joined with spaces. The cut is at fixed times, not at pauses: a word spoken across
    /// a boundary may be lost or doubled. Push-to-talk commands are far shorter than 30 s.
    pub fn transcribe_with(
        &self,
        samples: &[f32],
        options: &DecodeOptions,
        mut on_chunk: impl FnMut(ChunkText),
    ) -> Result<Transcript, TranscribeError> {
        if let Some((index, value)) = samples.iter().enumerate().find(|(_, s)| !s.is_finite()) {
            return Err(TranscribeError::NotFinite {
                index,
                value: *value,
            });
        }
        let language = self.resolve_language(options.language.as_deref())?;
        let prompt = self.prompt_tokens(options.prompt.as_deref())?;
        let started = Instant::now();
        let count = samples.len().div_ceil(CHUNK_SAMPLES);
        let mut windows = Vec::with_capacity(count);
        for (index, chunk) in samples.chunks(CHUNK_SAMPLES).enumerate() {
            let keep = count == 1;
            let window =
                self.transcribe_window(chunk, language.as_deref(), &prompt, options, keep)?;
            on_chunk(ChunkText {
                index,
                count,
                text: window.hypotheses[0].text.clone(),
            });
            windows.push(window);
        }
        let text = join_words(windows.iter().map(|w| w.hypotheses[0].text.as_str()));
        let no_speech_prob = windows.iter().map(|w| w.no_speech_prob).fold(0.0, f32::max);
        let frames = windows.last().map_or(0, |w| w.frames);
        let hypotheses = match windows.len() {
            1 => windows.pop().map(|w| w.hypotheses).unwrap_or_default(),
            _ => vec![Hypothesis {
                text: text.clone(),
                score: None,
            }],
        };
        Ok(Transcript {
            text,
            hypotheses,
            no_speech_prob,
            language,
            audio: Duration::from_secs_f64(samples.len() as f64 / f64::from(SAMPLE_RATE)),
            inference: started.elapsed(),
            chunks: count,
            frames,
        })
    }

    /// The prompt text as token strings, the last [`MAX_PROMPT_TOKENS`] of them.
    fn prompt_tokens(&self, prompt: Option<&str>) -> Result<Vec<String>, TranscribeError> {
        let Some(text) = prompt.map(str::trim).filter(|t| !t.is_empty()) else {
            return Ok(Vec::new());
        };
        // A leading space, as the words would follow earlier speech.
        let mut tokens = ct2rs::Tokenizer::encode(&self.tokenizer, &format!(" {text}"))
            .map_err(|e| TranscribeError::Engine(format!("cannot tokenise the prompt: {e:#}")))?;
        // Special tokens in the text would be taken as control tokens; the tokenizer
        // splits "<|" into ordinary pieces, but drop any that came through whole.
        tokens.retain(|t| !(t.starts_with("<|") && t.ends_with("|>")));
        if tokens.len() > MAX_PROMPT_TOKENS {
            tokens.drain(..tokens.len() - MAX_PROMPT_TOKENS);
        }
        Ok(tokens)
    }

    /// Decode one window of at most 30 s: features, prompt, beam search, detokenise. With
    /// `keep`, the encoder's output is kept for [`Transcriber::score`].
    fn transcribe_window(
        &self,
        chunk: &[f32],
        language: Option<&str>,
        previous: &[String],
        options: &DecodeOptions,
        keep: bool,
    ) -> Result<WindowResult, TranscribeError> {
        let engine = |e: anyhow::Error| TranscribeError::Engine(format!("{e:#}"));
        let frames = options.window.frames(chunk.len());
        let mut features = self.front_end.features_frames(chunk, frames);
        let shape = [1, features.n_mels, features.frames];
        let view = ct2rs::sys::StorageView::new(&shape, &mut features.data, Default::default())
            .map_err(engine)?;
        // Encoded once: the decoder takes the encoder's output as it takes features, and a
        // later score of the same audio reuses it.
        let encoded = self.whisper.encode(&view, true).map_err(engine)?;
        // The prompt faster-whisper uses: the previous text after <|startofprev|>, then
        // <|startoftranscript|>; English-only models take no language or task token.
        let mut prompt = Vec::with_capacity(previous.len() + 4);
        if !previous.is_empty() {
            prompt.push("<|startofprev|>".to_owned());
            prompt.extend(previous.iter().cloned());
        }
        prompt.push("<|startoftranscript|>".to_owned());
        if self.is_multilingual() {
            let token = match language {
                Some(lang) => format!("<|{lang}|>"),
                None => self
                    .whisper
                    .detect_language(&view)
                    .map_err(engine)?
                    .into_iter()
                    .next()
                    .and_then(|d| d.into_iter().next())
                    .map(|d| d.language)
                    .ok_or_else(|| {
                        TranscribeError::Engine("language detection gave nothing".into())
                    })?,
            };
            prompt.push(token);
            prompt.push("<|transcribe|>".to_owned());
        }
        prompt.push("<|notimestamps|>".to_owned());
        let beam_size = options.beam_size.clamp(1, 16);
        let mut whisper_options = ct2rs::sys::WhisperOptions {
            beam_size,
            num_hypotheses: options.hypotheses.clamp(1, beam_size),
            return_scores: true,
            return_no_speech_prob: true,
            ..Default::default()
        };
        if let Window::Fit { .. } = options.window {
            // A shortened window lets the decoder run on past the speech, repeating it
            // (whisper.cpp's `audio_ctx` does the same): give it a token budget that fits
            // the audio's length, and cut whole-utterance repeats below.
            // CTranslate2 generates at most min(max_length / 2, max_length - prompt) tokens
            // (models/whisper.cc), so this gives exactly `budget` (the prompt is at most 223
            // + 4 tokens, so it stays below the model's 448).
            let budget = token_budget(chunk.len());
            whisper_options.max_length = (2 * budget).max(budget + prompt.len()).min(448);
        }
        let generate = |options: &ct2rs::sys::WhisperOptions| {
            self.whisper
                .generate(&encoded, std::slice::from_ref(&prompt), options)
                .map_err(engine)?
                .into_iter()
                .next()
                .ok_or_else(|| TranscribeError::Engine("Whisper returned no result".into()))
        };
        let first_text = |result: &ct2rs::sys::WhisperGenerationResult| {
            result
                .sequences
                .first()
                .map(|tokens| ct2rs::Tokenizer::decode(&self.tokenizer, tokens.clone()))
                .transpose()
                .map_err(engine)
                .map(Option::unwrap_or_default)
        };
        let mut result = generate(&whisper_options)?;
        // A transcript that still loops once its repeats are cut (a whole utterance said
        // again and again is cut to one, which is right for a command) compresses too well
        // (faster-whisper's test): decode again with sampling, at rising temperatures, and
        // keep the first that does not loop; if each loops, the least looping one is cut
        // at its first repeat below.
        let uncut = |text: &str| cut_loop(&collapse_repeats(text.trim()));
        let first = uncut(&first_text(&result)?);
        let mut looped = is_loop(&first);
        if looped {
            let mut best = compression_ratio(&first);
            for temperature in LOOP_TEMPERATURES {
                let sampled = ct2rs::sys::WhisperOptions {
                    beam_size: 1,
                    num_hypotheses: 1,
                    sampling_topk: 20,
                    sampling_temperature: *temperature,
                    ..whisper_options.clone()
                };
                let again = generate(&sampled)?;
                let text = uncut(&first_text(&again)?);
                let ratio = compression_ratio(&text);
                note_retry(*temperature, ratio);
                if ratio < best {
                    best = ratio;
                    result = again;
                }
                if !is_loop(&text) {
                    looped = false;
                    break;
                }
            }
        }
        let mut hypotheses = Vec::with_capacity(result.sequences.len());
        let fitted = matches!(options.window, Window::Fit { .. });
        for (i, tokens) in result.sequences.into_iter().enumerate() {
            let text = ct2rs::Tokenizer::decode(&self.tokenizer, tokens).map_err(engine)?;
            let text = if fitted || looped {
                cut_loop(&collapse_repeats(text.trim()))
            } else {
                text.trim().to_owned()
            };
            if hypotheses.iter().any(|h: &Hypothesis| h.text == text) {
                continue;
            }
            hypotheses.push(Hypothesis {
                text,
                score: result.scores.get(i).copied(),
            });
        }
        if hypotheses.is_empty() {
            hypotheses.push(Hypothesis {
                text: String::new(),
                score: None,
            });
        }
        if keep {
            let key = audio_key(chunk, frames, language);
            *self.encoded.lock().unwrap_or_else(|e| e.into_inner()) = Some(Encoded {
                key,
                frames,
                output: encoded,
            });
        }
        Ok(WindowResult {
            hypotheses,
            no_speech_prob: result.no_speech_prob,
            frames,
        })
    }

    /// How likely the audio makes each of `phrases`: the log probability Whisper's decoder
    /// gives each phrase's tokens given the audio (CTranslate2's forced alignment, which
    /// runs the decoder over the given tokens instead of searching), so that a phrase the
    /// recogniser did not write itself can be weighed against the ones it did. Each phrase
    /// is scored as Whisper writes a transcript (a leading space; the caller writes the
    /// capitals and the full stop it expects), after `<|startoftranscript|>` (and the
    /// language and task for a multilingual model) with no previous-text prompt, so scores
    /// do not depend on the vocabulary the decoding was prompted with.
    ///
    /// `options` must be those the audio was transcribed with (window, language): the
    /// encoder's output of the last transcription is reused when the samples, window and
    /// language match, and the audio is encoded again otherwise. Blocking; about a decoder
    /// pass per phrase (a few milliseconds each for tiny.en on two cores).
    ///
    /// # Errors
    /// [`TranscribeError::TooLongToScore`] past one 30 s window, the language errors of
    /// [`Transcriber::transcribe`], [`TranscribeError::NotFinite`], and
    /// [`TranscribeError::Engine`].
    pub fn score(
        &self,
        samples: &[f32],
        phrases: &[String],
        options: &DecodeOptions,
    ) -> Result<Vec<PhraseScore>, TranscribeError> {
        let engine = |e: anyhow::Error| TranscribeError::Engine(format!("{e:#}"));
        if samples.len() > CHUNK_SAMPLES {
            return Err(TranscribeError::TooLongToScore {
                samples: samples.len(),
                seconds: samples.len() as f64 / f64::from(SAMPLE_RATE),
            });
        }
        if let Some((index, value)) = samples.iter().enumerate().find(|(_, s)| !s.is_finite()) {
            return Err(TranscribeError::NotFinite {
                index,
                value: *value,
            });
        }
        let language = self.resolve_language(options.language.as_deref())?;
        if phrases.is_empty() {
            return Ok(Vec::new());
        }
        let frames = options.window.frames(samples.len());
        let key = audio_key(samples, frames, language.as_deref());
        let mut cache = self.encoded.lock().unwrap_or_else(|e| e.into_inner());
        if cache.as_ref().is_none_or(|c| c.key != key) {
            let mut features = self.front_end.features_frames(samples, frames);
            let shape = [1, features.n_mels, features.frames];
            let view = ct2rs::sys::StorageView::new(&shape, &mut features.data, Default::default())
                .map_err(engine)?;
            let output = self.whisper.encode(&view, true).map_err(engine)?;
            *cache = Some(Encoded {
                key,
                frames,
                output,
            });
        }
        let Some(encoded) = cache.as_ref() else {
            unreachable!("encoded just above")
        };
        let special = |name: &str| {
            self.tokenizer
                .token_to_id(name)
                .map(|id| id as usize)
                .ok_or_else(|| {
                    TranscribeError::Engine(format!("the tokenizer has no {name} token"))
                })
        };
        let end_of_text = special("<|endoftext|>")?;
        let mut start = vec![special("<|startoftranscript|>")?];
        if self.is_multilingual() {
            let Some(language) = language.as_deref() else {
                return Err(TranscribeError::Engine(
                    "scoring with a multilingual model needs a language".into(),
                ));
            };
            start.push(special(&format!("<|{language}|>"))?);
            start.push(special("<|transcribe|>")?);
        }
        let mut scores = Vec::with_capacity(phrases.len());
        for phrase in phrases {
            // Whisper's special tokens written in a phrase ("<|endoftext|>") are not words:
            // they are taken out, and a phrase with no letter or digit left has nothing to
            // weigh (a lone space or full stop would otherwise score like a short word).
            let words = without_special_tokens(phrase);
            if !words.chars().any(char::is_alphanumeric) {
                scores.push(PhraseScore {
                    text: phrase.clone(),
                    logprob: f32::NEG_INFINITY,
                    tokens: 0,
                });
                continue;
            }
            let encoding = self
                .tokenizer
                .encode(format!(" {}", words.trim()), false)
                .map_err(|e| TranscribeError::Engine(format!("cannot tokenise {phrase:?}: {e}")))?;
            // Text tokens only: the ids below <|endoftext|> (a special token written in the
            // phrase is not taken as one).
            let ids: Vec<usize> = encoding
                .get_ids()
                .iter()
                .map(|id| *id as usize)
                .filter(|id| *id < end_of_text)
                .take(MAX_PHRASE_TOKENS)
                .collect();
            if ids.is_empty() {
                scores.push(PhraseScore {
                    text: phrase.clone(),
                    logprob: f32::NEG_INFINITY,
                    tokens: 0,
                });
                continue;
            }
            let aligned = self
                .whisper
                .align(
                    &encoded.output,
                    &start,
                    std::slice::from_ref(&ids),
                    &[encoded.frames],
                    7,
                )
                .map_err(engine)?;
            let probs = aligned
                .into_iter()
                .next()
                .map(|a| a.text_token_probs)
                .unwrap_or_default();
            let logprob = probs.iter().map(|p| p.max(1e-12).ln()).sum::<f32>();
            scores.push(PhraseScore {
                text: phrase.clone(),
                logprob,
                tokens: ids.len(),
            });
        }
        Ok(scores)
    }

    /// Check `language` against this model without transcribing: `stt.load` refuses what
    /// every later `stt.transcribe` would refuse.
    ///
    /// # Errors
    /// [`TranscribeError::BadLanguage`] for a malformed code,
    /// [`TranscribeError::EnglishOnly`] for a language an English-only model cannot do.
    pub fn check_language(&self, language: Option<&str>) -> Result<(), TranscribeError> {
        self.resolve_language(language).map(|_| ())
    }

    /// The language to put in the prompt, checked against the model.
    fn resolve_language(&self, language: Option<&str>) -> Result<Option<String>, TranscribeError> {
        let language = language.map(str::trim).filter(|l| !l.is_empty());
        if let Some(lang) = language {
            let valid =
                (2..=3).contains(&lang.len()) && lang.bytes().all(|b| b.is_ascii_lowercase());
            if !valid {
                return Err(TranscribeError::BadLanguage(lang.to_owned()));
            }
        }
        if self.is_multilingual() {
            return Ok(language.map(str::to_owned));
        }
        match language {
            None | Some("en") => Ok(Some("en".to_owned())),
            Some(other) => Err(TranscribeError::EnglishOnly {
                model: self.dir.display().to_string(),
                language: other.to_owned(),
            }),
        }
    }
}

/// `text` without anything written like a Whisper special token (`<|…|>`).
fn without_special_tokens(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("<|") {
        match rest[start + 2..].find("|>") {
            Some(end) => {
                out.push_str(&rest[..start]);
                out.push(' ');
                rest = &rest[start + 2 + end + 2..];
            }
            None => break,
        }
    }
    out.push_str(rest);
    out
}

/// The most tokens a window of `samples` samples can need: 8 per second of audio (fast
/// speech is about 3 words, 4–5 tokens, a second) plus 8 for punctuation and a short clip.
fn token_budget(samples: usize) -> usize {
    8 + (samples as f64 / f64::from(SAMPLE_RATE) * 8.0).ceil() as usize
}

/// A word as transcripts are compared: its letters and digits, in lower case ("YouTube," is
/// "youtube").
pub fn word_key(word: &str) -> String {
    word.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// `text` without whole-utterance repeats: "Open YouTube Open YouTube. Open" is "Open
/// YouTube". The words (compared without case and punctuation) must be two or more copies
/// of their first `p` words, the last copy possibly cut short (even inside its last word);
/// the first copy is kept as
/// written, without a dangling comma. Anything else is returned unchanged.
pub fn collapse_repeats(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let keys: Vec<String> = words.iter().map(|w| word_key(w)).collect();
    for period in 1..=keys.len() / 2 {
        // One word said twice ("down down", "next next") may be meant; three times is a
        // loop.
        if period == 1 && keys.len() < 3 {
            continue;
        }
        // The decoder may stop inside the last word of the last copy ("Trades, Search
        // for Rust Tr"): that word need only begin like its twin.
        let last = keys.len() - 1;
        let repeats = keys.iter().enumerate().skip(period).all(|(i, k)| {
            *k == keys[i % period]
                || (i == last && !k.is_empty() && keys[i % period].starts_with(k.as_str()))
        });
        if repeats {
            let kept = words[..period].join(" ");
            return kept.trim_end_matches([',', ';']).to_owned();
        }
    }
    text.to_owned()
}

/// The temperatures a looping window is decoded again at, in order (faster-whisper's
/// fallback steps, from 0.2).
const LOOP_TEMPERATURES: &[f32] = &[0.2, 0.4, 0.6, 0.8];

/// The compression ratio above which a transcript is taken for a loop (faster-whisper's
/// `compression_ratio_threshold`).
pub const LOOP_COMPRESSION_RATIO: f64 = 2.4;

/// How well `text` compresses: its length in bytes over its zlib-compressed length. Speech
/// stays well under [`LOOP_COMPRESSION_RATIO`]; a decoder repeating itself goes over it.
/// 0 for empty text.
pub fn compression_ratio(text: &str) -> f64 {
    use std::io::Write as _;
    if text.is_empty() {
        return 0.0;
    }
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    if encoder.write_all(text.as_bytes()).is_err() {
        return 0.0;
    }
    match encoder.finish() {
        Ok(compressed) if !compressed.is_empty() => text.len() as f64 / compressed.len() as f64,
        _ => 0.0,
    }
}

/// Whether `text` reads as a decoder loop: it compresses past [`LOOP_COMPRESSION_RATIO`],
/// or a clause after the first repeats ([`cut_loop`] would cut it).
pub fn is_loop(text: &str) -> bool {
    compression_ratio(text) > LOOP_COMPRESSION_RATIO || cut_loop(text).len() < text.trim().len()
}

/// A note on stderr (which the runner logs; stdout is the protocol) per decode-again.
fn note_retry(temperature: f32, ratio: f64) {
    eprintln!(
        "a looping window was decoded again at temperature {temperature}: compression ratio {ratio:.2}"
    );
}

/// `text` cut before a clause that loops: when, after some first clauses, the rest is two
/// or more copies of one clause (compared as [`word_key`]s; the last copy may be cut
/// short), only the first clauses are kept. "Launch Codex, Blanche Codex, Blanche Codex" is
/// "Launch Codex"; "Open Firefox, Open Open Firefox, Open Open Firefox" is "Open Firefox".
/// A loop begins after a clause's punctuation (`,` `.` `;` `?` `!`); a repeated clause of
/// one word needs three copies ("next, next" may be meant). Anything else is unchanged.
pub fn cut_loop(text: &str) -> String {
    let text = text.trim();
    let words: Vec<&str> = text.split_whitespace().collect();
    let keys: Vec<String> = words.iter().map(|w| word_key(w)).collect();
    let n = keys.len();
    for start in 1..n {
        if !words[start - 1].ends_with([',', '.', ';', '?', '!']) {
            continue;
        }
        let tail = n - start;
        for period in 1..=tail / 2 {
            if period == 1 && tail < 3 {
                continue;
            }
            let last = n - 1;
            let repeats = (start + period..n).all(|i| {
                let twin = &keys[start + (i - start) % period];
                keys[i] == *twin
                    || (i == last && !keys[i].is_empty() && twin.starts_with(keys[i].as_str()))
            });
            if repeats {
                return words[..start]
                    .join(" ")
                    .trim_end_matches([',', ';'])
                    .to_owned();
            }
        }
    }
    text.to_owned()
}

/// Trim each part and join the non-empty ones with single spaces.
fn join_words<'a>(parts: impl Iterator<Item = &'a str>) -> String {
    parts
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_tokens_are_not_words() {
        assert_eq!(without_special_tokens("<|endoftext|>").trim(), "");
        assert_eq!(
            without_special_tokens("pause the music<|endoftext|>").trim(),
            "pause the music"
        );
        assert_eq!(without_special_tokens("a <|en|> b"), "a   b");
        assert_eq!(without_special_tokens("a <| b"), "a <| b");
        assert_eq!(without_special_tokens("<|x|><|y|>."), "  .");
    }

    #[test]
    fn a_clause_that_loops_after_the_first_is_cut() {
        assert_eq!(
            cut_loop("Open Firefox, Open Open Firefox, Open Open Firefox, Open Open Firefox"),
            "Open Firefox"
        );
        assert_eq!(
            cut_loop("Launch Codex, Blanche Codex, Blanche Codex, Blanche Co"),
            "Launch Codex"
        );
        assert_eq!(cut_loop("Pause. Next, next, next, next"), "Pause.");
        // Speech that repeats a little, or not after a clause, is kept.
        for kept in [
            "Open Firefox, then open Spotify",
            "next, next",
            "press tab tab",
            "Type hello, hello world",
            "Go to workspace two",
        ] {
            assert_eq!(cut_loop(kept), kept);
        }
    }

    #[test]
    fn loops_compress_and_speech_does_not() {
        let looping = "Open Firefox, ".repeat(12);
        assert!(compression_ratio(&looping) > LOOP_COMPRESSION_RATIO);
        assert!(is_loop(&looping));
        for speech in [
            "Open Firefox",
            "Search YouTube for lo-fi hip hop beats to study to",
            "Move this window to workspace three and then focus the column on the left",
        ] {
            assert!(
                compression_ratio(speech) < LOOP_COMPRESSION_RATIO,
                "{speech}"
            );
            assert!(!is_loop(speech), "{speech}");
        }
        assert_eq!(compression_ratio(""), 0.0);
    }

    #[test]
    fn repeats_of_the_whole_utterance_are_cut() {
        assert_eq!(
            collapse_repeats("Open YouTube Open YouTube Open YouTube"),
            "Open YouTube"
        );
        assert_eq!(
            collapse_repeats("Open YouTube. Open YouTube. Open"),
            "Open YouTube."
        );
        assert_eq!(collapse_repeats("Next, next, next"), "Next");
        assert_eq!(collapse_repeats("down down"), "down down");
        assert_eq!(
            collapse_repeats("Search for Rust Trades, Search for Rust Trades, Search for Rust Tr"),
            "Search for Rust Trades"
        );
        assert_eq!(collapse_repeats("Open YouTube"), "Open YouTube");
        // A repeat inside the utterance, or a single word, is speech.
        assert_eq!(collapse_repeats("press tab tab"), "press tab tab");
        assert_eq!(collapse_repeats("scroll down, down"), "scroll down, down");
        assert_eq!(collapse_repeats("go"), "go");
        assert_eq!(collapse_repeats(""), "");
    }

    #[test]
    fn a_fitted_window_is_the_audio_plus_padding_in_even_frames() {
        assert_eq!(Window::Full.frames(16_000), N_FRAMES);
        // 1.5 s + 1 s = 2.5 s = 250 frames.
        assert_eq!(Window::DEFAULT.frames(24_000), 250);
        // Odd frame counts round up to even; 30 s and more is the full window.
        let none = Window::Fit {
            padding: Duration::ZERO,
        };
        assert_eq!(none.frames(161), 2);
        assert_eq!(none.frames(0), 2);
        assert_eq!(Window::DEFAULT.frames(CHUNK_SAMPLES), N_FRAMES);
        assert_eq!(token_budget(16_000), 16);
    }

    #[test]
    fn a_missing_directory_is_named() {
        let dir = Path::new("/nonexistent/utter-whisper-model");
        let err = check_model_dir(dir).unwrap_err();
        assert!(matches!(err, ModelError::NotFound { .. }));
        assert!(err.to_string().contains("/nonexistent/utter-whisper-model"));
    }

    #[test]
    fn every_missing_file_is_named_with_a_fix() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("model.bin"), b"x").unwrap();
        std::fs::write(dir.path().join("vocabulary.txt"), b"x").unwrap();
        let err = check_model_dir(dir.path()).unwrap_err();
        assert_eq!(err.missing(), ["config.json", "tokenizer.json"]);
        let text = err.to_string();
        assert!(
            text.contains("is incomplete: missing config.json, tokenizer.json."),
            "{text}"
        );
        assert!(text.contains("openai/whisper-tiny.en"), "{text}");
    }

    #[test]
    fn either_vocabulary_file_will_do() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["model.bin", "config.json", "tokenizer.json"] {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        let err = check_model_dir(dir.path()).unwrap_err();
        assert_eq!(err.missing(), ["vocabulary.json or vocabulary.txt"]);
        std::fs::write(dir.path().join("vocabulary.json"), b"[]").unwrap();
        check_model_dir(dir.path()).unwrap();
    }

    #[test]
    fn a_file_is_not_a_model_directory() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("model.bin");
        std::fs::write(&file, b"x").unwrap();
        assert!(matches!(
            check_model_dir(&file),
            Err(ModelError::NotADirectory { .. })
        ));
    }
}
