//! The in-process backend: llama.cpp through `llama-cpp-2`, loading a GGUF file (cargo
//! feature `llama`).
//!
//! llama.cpp's model and context live on one worker thread of their own (a context borrows
//! its model and must not be used from two threads); requests reach it over a channel.
//!
//! # KV cache reuse
//!
//! The prompt is decoded once into sequence 0 and kept: the next prompt re-decodes only from
//! the first token where it differs (the instruction is shared by every request, and the
//! content-free prompt is identical every time). Each candidate's continuation is decoded in
//! a sequence of its own that shares the prompt's cells (`llama_memory_seq_cp` on a unified
//! KV cache), so all candidates of a request go through in one batch, and their cells are
//! dropped afterwards.

use crate::{Backend, Cancel, LlmError};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use std::collections::VecDeque;
use std::num::NonZeroU32;
use std::path::Path;
use std::sync::{Mutex, OnceLock, mpsc};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};

/// The context window, in tokens: the prompt plus every continuation of a request.
const N_CTX: u32 = 4096;
/// Sequences: the prompt's and one per candidate of a batch.
const N_SEQ: u32 = 64;
/// The context kept free after a prompt, in tokens.
const PROMPT_MARGIN: usize = 64;
/// The most continuation tokens decoded in one batch (each with its logits: 512 rows of the
/// vocabulary at most, ~100 MB for a 49k vocabulary).
const BATCH_TOKENS: usize = 512;
/// The most tokens of one label that are scored (a label longer than this is scored by its
/// start, as all candidates are).
const LABEL_TOKENS: usize = 48;

/// How many of llama.cpp's last warning and error lines are kept.
const KEPT_LOG_LINES: usize = 8;
/// The longest kept line, in bytes.
const KEPT_LINE_BYTES: usize = 300;

/// llama.cpp's last warning and error lines (it says why a load failed only there: the
/// call itself returns no reason).
fn kept_log() -> &'static Mutex<VecDeque<String>> {
    static KEPT: OnceLock<Mutex<VecDeque<String>>> = OnceLock::new();
    KEPT.get_or_init(|| Mutex::new(VecDeque::with_capacity(KEPT_LOG_LINES)))
}

/// A `tracing` layer that keeps the WARN and ERROR lines llama.cpp logs ([`kept_log`]) and
/// shows nothing: llama.cpp logs every tensor it loads.
struct KeepWarnings;

impl<S: tracing::Subscriber> Layer<S> for KeepWarnings {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        if *event.metadata().level() > tracing::Level::WARN {
            return;
        }
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                if field.name() == "message" {
                    self.0 = value.to_owned();
                }
            }
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{value:?}");
                }
            }
        }
        let mut message = Message(String::new());
        event.record(&mut message);
        let line = utter_protocol::text::escape_unprintable(message.0.trim(), KEPT_LINE_BYTES).0;
        if line.is_empty() {
            return;
        }
        let mut kept = kept_log().lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() == KEPT_LOG_LINES {
            kept.pop_front();
        }
        kept.push_back(line);
    }
}

/// llama.cpp's global state: initialised once per process, its log kept ([`KeepWarnings`]).
fn backend() -> Result<&'static LlamaBackend, LlmError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            let b = LlamaBackend::init().map_err(|e| e.to_string())?;
            // The plugin logs nothing else through `tracing`; a subscriber set before
            // (a test harness) is left alone and the lines are simply not kept.
            let _ = tracing::subscriber::set_global_default(
                tracing_subscriber::registry()
                    .with(KeepWarnings.with_filter(tracing_subscriber::filter::LevelFilter::WARN)),
            );
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
            Ok(b)
        })
        .as_ref()
        .map_err(|e| LlmError::Backend(format!("llama.cpp did not initialise: {e}")))
}

/// The lines [`kept_log`] holds now, emptied: what llama.cpp said since the last call.
fn take_kept_log() -> Vec<String> {
    kept_log()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain(..)
        .collect()
}

enum Job {
    Score {
        prefix: String,
        continuations: Vec<String>,
        cancel: Cancel,
        reply: mpsc::Sender<Result<Vec<f64>, LlmError>>,
    },
    Complete {
        prompt: String,
        max_tokens: u32,
        grammar: Option<String>,
        cancel: Cancel,
        reply: mpsc::Sender<Result<String, LlmError>>,
    },
}

/// A GGUF model loaded in this process.
pub struct Llama {
    jobs: std::sync::Mutex<mpsc::Sender<Job>>,
    description: String,
    /// The model's chat template applied to one user turn [`TURN`] (with the assistant's
    /// turn opened), when the model has one.
    template: Option<String>,
}

/// The stand-in for the user's turn in [`Llama::template`].
const TURN: &str = "\u{1}TURN\u{1}";

impl Llama {
    /// Load the GGUF file at `path` with `threads` CPU threads (0: llama.cpp's default).
    /// Blocks until the model is loaded. Errors say what is wrong with the file.
    pub fn load(path: &Path, threads: u32) -> Result<Llama, LlmError> {
        let shown = shown_path(path);
        if !path.is_file() {
            return Err(LlmError::Model(format!(
                "{shown} is not a file; name a GGUF model file (for example \
                 SmolLM2-135M-Instruct.Q4_1.gguf)"
            )));
        }
        let backend = backend()?;
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(String, Option<String>), LlmError>>();
        let (jobs_tx, jobs_rx) = mpsc::channel::<Job>();
        let owned = path.to_owned();
        std::thread::Builder::new()
            .name("llama".into())
            .spawn(move || worker(backend, &owned, threads, &ready_tx, &jobs_rx))
            .map_err(|e| LlmError::Backend(format!("cannot start the llama.cpp thread: {e}")))?;
        let (description, template) = ready_rx.recv().map_err(|_| {
            LlmError::Backend("the llama.cpp thread stopped while loading".into())
        })??;
        Ok(Llama {
            jobs: std::sync::Mutex::new(jobs_tx),
            description,
            template,
        })
    }

    fn generate(
        &self,
        prompt: &str,
        max_tokens: u32,
        grammar: Option<String>,
        cancel: &Cancel,
    ) -> Result<String, LlmError> {
        let (reply, answer) = mpsc::channel();
        self.send(Job::Complete {
            prompt: prompt.to_owned(),
            max_tokens,
            grammar,
            cancel: cancel.clone(),
            reply,
        })?;
        answer
            .recv()
            .map_err(|_| LlmError::Backend("the llama.cpp thread stopped".into()))?
    }

    fn send(&self, job: Job) -> Result<(), LlmError> {
        self.jobs
            .lock()
            .expect("llama jobs lock")
            .send(job)
            .map_err(|_| LlmError::Backend("the llama.cpp thread has stopped".into()))
    }
}

impl Backend for Llama {
    fn describe(&self) -> String {
        self.description.clone()
    }

    fn prompt(&self, heard: &str) -> String {
        match &self.template {
            Some(t) => format!(
                "{}{}",
                t.replace(TURN, &crate::choose::question(heard)),
                crate::choose::ANSWER_LEAD
            ),
            None => crate::choose::prompt(heard),
        }
    }

    fn sequence_logprobs(
        &self,
        prefix: &str,
        continuations: &[String],
        cancel: &Cancel,
    ) -> Result<Vec<f64>, LlmError> {
        let (reply, answer) = mpsc::channel();
        self.send(Job::Score {
            prefix: prefix.to_owned(),
            continuations: continuations.to_vec(),
            cancel: cancel.clone(),
            reply,
        })?;
        answer
            .recv()
            .map_err(|_| LlmError::Backend("the llama.cpp thread stopped".into()))?
    }

    fn complete(&self, prompt: &str, max_tokens: u32, cancel: &Cancel) -> Result<String, LlmError> {
        self.generate(prompt, max_tokens, None, cancel)
    }

    fn complete_constrained(
        &self,
        prompt: &str,
        max_tokens: u32,
        grammar: &str,
        _schema: &utter_protocol::serde_json::Value,
        cancel: &Cancel,
    ) -> Result<String, LlmError> {
        self.generate(prompt, max_tokens, Some(grammar.to_owned()), cancel)
    }
}

/// A path as errors show it: escaped and cut.
fn shown_path(path: &Path) -> String {
    utter_protocol::text::escape_unprintable(&path.to_string_lossy(), 200).0
}

fn worker(
    backend: &'static LlamaBackend,
    path: &Path,
    threads: u32,
    ready: &mpsc::Sender<Result<(String, Option<String>), LlmError>>,
    jobs: &mpsc::Receiver<Job>,
) {
    take_kept_log();
    let model = match LlamaModel::load_from_file(backend, path, &LlamaModelParams::default()) {
        Ok(m) => m,
        Err(e) => {
            // llama.cpp's own words say why; the error value only says that it failed.
            let said = take_kept_log();
            let why = if said.is_empty() {
                e.to_string()
            } else {
                format!("llama.cpp said: {}", said.join("; "))
            };
            let _ = ready.send(Err(LlmError::Model(format!(
                "llama.cpp could not load {} ({why}); is it a whole GGUF model file?",
                shown_path(path)
            ))));
            return;
        }
    };
    let mut params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(N_CTX))
        .with_n_batch(N_CTX)
        .with_n_ubatch(512)
        .with_n_seq_max(N_SEQ)
        .with_kv_unified(true);
    if threads > 0 {
        let t = i32::try_from(threads).unwrap_or(i32::MAX);
        params = params.with_n_threads(t).with_n_threads_batch(t);
    }
    let ctx = match model.new_context(backend, params) {
        Ok(c) => c,
        Err(e) => {
            let _ = ready.send(Err(LlmError::Backend(format!(
                "llama.cpp could not make a context for {}: {e}",
                shown_path(path)
            ))));
            return;
        }
    };
    let description = format!(
        "llama.cpp in process: {} ({} M parameters)",
        shown_path(path),
        model.n_params() / 1_000_000
    );
    let template = model.chat_template(None).ok().and_then(|t| {
        let turn = LlamaChatMessage::new("user".into(), TURN.into()).ok()?;
        model.apply_chat_template(&t, &[turn], true).ok()
    });
    if ready.send(Ok((description, template))).is_err() {
        return;
    }
    let mut state = State {
        model: &model,
        ctx,
        prompt: Vec::new(),
        last: Vec::new(),
    };
    while let Ok(job) = jobs.recv() {
        match job {
            // A job cancelled while it waited is not started.
            Job::Score {
                prefix,
                continuations,
                cancel,
                reply,
            } => {
                let result = cancel
                    .check()
                    .and_then(|()| state.score(&prefix, &continuations, &cancel));
                let _ = reply.send(result);
            }
            Job::Complete {
                prompt,
                max_tokens,
                grammar,
                cancel,
                reply,
            } => {
                let result = cancel.check().and_then(|()| {
                    state.complete(&prompt, max_tokens, grammar.as_deref(), &cancel)
                });
                let _ = reply.send(result);
            }
        }
    }
}

struct State<'m> {
    model: &'m LlamaModel,
    ctx: LlamaContext<'m>,
    /// The tokens in sequence 0.
    prompt: Vec<LlamaToken>,
    /// Log-softmax of the logits after the last prompt token.
    last: Vec<f32>,
}

fn decode_error(e: impl std::fmt::Display) -> LlmError {
    LlmError::Backend(format!("llama.cpp decode failed: {e}"))
}

/// `log(softmax(logits))[token]`.
fn log_softmax(logits: &[f32]) -> Vec<f32> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = logits.iter().map(|l| (l - max).exp()).sum();
    let log_sum = max + sum.ln();
    logits.iter().map(|l| l - log_sum).collect()
}

impl State<'_> {
    fn tokenize(&self, text: &str, first: bool) -> Vec<LlamaToken> {
        let vocab = self.model.vocab();
        // The prompt's special tokens are the template's: the heard words have no angle
        // brackets left (choose::question), so they cannot spell one.
        vocab.tokenize(text.as_bytes(), first && vocab.should_add_bos(), first)
    }

    /// Make sequence 0 hold `prefix`, decoding only what differs from what it holds.
    fn set_prompt(&mut self, prefix: &str) -> Result<(), LlmError> {
        let tokens = self.tokenize(prefix, true);
        if tokens.is_empty() {
            return Err(LlmError::Backend("the prompt has no tokens".into()));
        }
        if tokens == self.prompt && !self.last.is_empty() {
            return Ok(());
        }
        let mut keep = self
            .prompt
            .iter()
            .zip(&tokens)
            .take_while(|(a, b)| a == b)
            .count();
        // At least the last token is decoded again, for its logits.
        keep = keep.min(tokens.len() - 1);
        self.ctx
            .clear_kv_cache_seq(Some(0), Some(keep as u32), None)
            .map_err(decode_error)?;
        self.prompt.truncate(keep);
        self.last.clear();
        let rest = &tokens[keep..];
        if tokens.len() + PROMPT_MARGIN > N_CTX as usize {
            return Err(LlmError::Backend(format!(
                "the prompt has {} tokens; at most {} fit the context of {N_CTX} (the rest is \
                 kept for the answer)",
                tokens.len(),
                N_CTX as usize - PROMPT_MARGIN
            )));
        }
        let mut batch = LlamaBatch::new(rest.len(), 1);
        for (i, t) in rest.iter().enumerate() {
            batch
                .add(*t, (keep + i) as i32, &[0], i + 1 == rest.len())
                .map_err(decode_error)?;
        }
        self.ctx.decode(&mut batch).map_err(decode_error)?;
        self.last = log_softmax(self.ctx.get_logits_ith(batch.n_tokens() - 1));
        self.prompt = tokens;
        Ok(())
    }

    /// Between batches it stops once `cancel` is set.
    fn score(
        &mut self,
        prefix: &str,
        continuations: &[String],
        cancel: &Cancel,
    ) -> Result<Vec<f64>, LlmError> {
        self.set_prompt(prefix)?;
        let n_prompt = self.prompt.len();
        let conts: Vec<Vec<LlamaToken>> = continuations
            .iter()
            .map(|c| {
                let mut t = self.tokenize(c, false);
                t.truncate(LABEL_TOKENS);
                t
            })
            .collect();
        let mut scores = Vec::with_capacity(conts.len());
        let room = (N_CTX as usize - n_prompt).min(BATCH_TOKENS);
        // Candidates go in batches of at most N_SEQ - 1 sequences and `room` tokens.
        let mut start = 0;
        while start < conts.len() {
            cancel.check()?;
            let mut end = start;
            let mut tokens = 0;
            while end < conts.len()
                && end - start < (N_SEQ - 1) as usize
                && tokens + conts[end].len() <= room
            {
                tokens += conts[end].len();
                end += 1;
            }
            if end == start {
                return Err(LlmError::Backend(format!(
                    "a continuation of {} tokens does not fit the context",
                    conts[start].len()
                )));
            }
            scores.extend(self.score_batch(n_prompt, &conts[start..end], tokens)?);
            start = end;
        }
        Ok(scores)
    }

    fn score_batch(
        &mut self,
        n_prompt: usize,
        conts: &[Vec<LlamaToken>],
        tokens: usize,
    ) -> Result<Vec<f64>, LlmError> {
        let mut batch = LlamaBatch::new(tokens.max(1), conts.len() as i32);
        // Where each continuation's tokens sit in the batch.
        let mut at = Vec::with_capacity(conts.len());
        for (i, cont) in conts.iter().enumerate() {
            let seq = i as i32 + 1;
            self.ctx
                .kv_cache_seq_cp(0, seq, None, None)
                .map_err(decode_error)?;
            at.push(batch.n_tokens());
            for (j, t) in cont.iter().enumerate() {
                // A token's logits score the next one: the label's last token needs none.
                let logits = j + 1 < cont.len();
                batch
                    .add(*t, (n_prompt + j) as i32, &[seq], logits)
                    .map_err(decode_error)?;
            }
        }
        let decoded = if batch.n_tokens() > 0 {
            self.ctx.decode(&mut batch).map_err(decode_error)
        } else {
            Ok(())
        };
        let mut scores = Vec::with_capacity(conts.len());
        if decoded.is_ok() {
            for (cont, first) in conts.iter().zip(&at) {
                let mut lp = 0.0f64;
                for (j, t) in cont.iter().enumerate() {
                    let p = if j == 0 {
                        self.last[t.0 as usize]
                    } else {
                        let row = log_softmax(self.ctx.get_logits_ith(first + j as i32 - 1));
                        row[t.0 as usize]
                    };
                    lp += f64::from(p);
                }
                scores.push(lp);
            }
        }
        for i in 0..conts.len() {
            let _ = self.ctx.clear_kv_cache_seq(Some(i as u32 + 1), None, None);
        }
        decoded?;
        Ok(scores)
    }

    /// Generate after `prompt` (greedy; within `grammar` when one is given, GBNF), in
    /// sequence 1 so that sequence 0 keeps the prompt for the next request. Stops between
    /// tokens once `cancel` is set.
    fn complete(
        &mut self,
        prompt: &str,
        max_tokens: u32,
        grammar: Option<&str>,
        cancel: &Cancel,
    ) -> Result<String, LlmError> {
        self.set_prompt(prompt)?;
        let n_prompt = self.prompt.len();
        let mut sampler = match grammar {
            Some(g) => LlamaSampler::chain_simple([
                LlamaSampler::grammar(self.model, g, "root").map_err(|e| {
                    LlmError::Backend(format!("llama.cpp refused the grammar: {e}"))
                })?,
                LlamaSampler::greedy(),
            ]),
            None => LlamaSampler::greedy(),
        };
        // Sequence 1 shares the prompt but its last token, which it decodes again for the
        // logits the sampler reads.
        let last = self.prompt[n_prompt - 1];
        self.ctx
            .kv_cache_seq_cp(0, 1, None, Some((n_prompt - 1) as u32))
            .map_err(decode_error)?;
        let result = (|| {
            let mut batch = LlamaBatch::new(1, 1);
            batch
                .add(last, (n_prompt - 1) as i32, &[1], true)
                .map_err(decode_error)?;
            self.ctx.decode(&mut batch).map_err(decode_error)?;
            let mut out = Vec::<u8>::new();
            let end = (n_prompt + max_tokens as usize).min(N_CTX as usize - 1);
            for pos in n_prompt..end {
                cancel.check()?;
                let token = sampler.sample(&self.ctx, 0);
                if self.model.vocab().is_eog(token) {
                    break;
                }
                out.extend(self.model.vocab().token_to_piece(token, false, None));
                let mut batch = LlamaBatch::new(1, 1);
                batch
                    .add(token, pos as i32, &[1], true)
                    .map_err(decode_error)?;
                self.ctx.decode(&mut batch).map_err(decode_error)?;
            }
            Ok(String::from_utf8_lossy(&out).into_owned())
        })();
        let _ = self.ctx.clear_kv_cache_seq(Some(1), None, None);
        result
    }
}
