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

use crate::features::{FrontEnd, N_FRAMES};
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
    #[error("sample {index} is {value}; samples must be finite floats in [-1, 1]")]
    NotFinite {
        /// Its index.
        index: usize,
        /// Its value.
        value: f32,
    },
    /// CTranslate2 failed.
    #[error("Whisper inference failed: {0}")]
    Engine(String),
}

/// The result of one transcription.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    /// The text, each window's text trimmed and joined with single spaces.
    pub text: String,
    /// The language the model was told to transcribe (`None`: detected by a multilingual
    /// model, which ct2rs does not report).
    pub language: Option<String>,
    /// The length of the audio (samples / 16 000).
    pub audio: Duration,
    /// Wall time spent in feature extraction and inference.
    pub inference: Duration,
    /// How many 30 s windows the audio was cut into (0 for no audio).
    pub chunks: usize,
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

    /// Transcribe `samples` (16 kHz, mono, f32 in [-1, 1]). `language` is an ISO 639-1 code
    /// (`"en"`); `None` means English for an English-only model and detection otherwise.
    /// Blocking. See [`Transcriber::transcribe_with`] for long audio.
    pub fn transcribe(
        &self,
        samples: &[f32],
        language: Option<&str>,
    ) -> Result<Transcript, TranscribeError> {
        self.transcribe_with(samples, language, |_| {})
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
        language: Option<&str>,
        mut on_chunk: impl FnMut(ChunkText),
    ) -> Result<Transcript, TranscribeError> {
        if let Some((index, value)) = samples.iter().enumerate().find(|(_, s)| !s.is_finite()) {
            return Err(TranscribeError::NotFinite {
                index,
                value: *value,
            });
        }
        let language = self.resolve_language(language)?;
        let started = Instant::now();
        let count = samples.len().div_ceil(CHUNK_SAMPLES);
        let mut texts = Vec::with_capacity(count);
        for (index, chunk) in samples.chunks(CHUNK_SAMPLES).enumerate() {
            let text = self.transcribe_window(chunk, language.as_deref())?;
            on_chunk(ChunkText {
                index,
                count,
                text: text.clone(),
            });
            texts.push(text);
        }
        Ok(Transcript {
            text: join_words(texts.iter().map(String::as_str)),
            language,
            audio: Duration::from_secs_f64(samples.len() as f64 / f64::from(SAMPLE_RATE)),
            inference: started.elapsed(),
            chunks: count,
        })
    }

    /// Decode one window of at most 30 s: features, prompt, beam search, detokenise.
    fn transcribe_window(
        &self,
        chunk: &[f32],
        language: Option<&str>,
    ) -> Result<String, TranscribeError> {
        let engine = |e: anyhow::Error| TranscribeError::Engine(format!("{e:#}"));
        let mut features = self.front_end.features(chunk);
        let shape = [1, features.n_mels, N_FRAMES];
        let view = ct2rs::sys::StorageView::new(&shape, &mut features.data, Default::default())
            .map_err(engine)?;
        // The prompt faster-whisper uses: English-only models take no language or task token.
        let mut prompt = vec!["<|startoftranscript|>".to_owned()];
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
        // The defaults: beam search of width 5, as faster-whisper does.
        let options = ct2rs::WhisperOptions::default();
        let result = self
            .whisper
            .generate(&view, &[prompt], &options)
            .map_err(engine)?;
        let tokens = result
            .into_iter()
            .next()
            .and_then(|r| r.sequences.into_iter().next())
            .unwrap_or_default();
        let text = ct2rs::Tokenizer::decode(&self.tokenizer, tokens).map_err(engine)?;
        Ok(text.trim().to_owned())
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
