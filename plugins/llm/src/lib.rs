//! `utter-llm`: the decision head's chooser (kind `llm`, PROTOCOL.md §8 and §9.4).
//!
//! When the router cannot tell what a misheard command meant, it prepares candidates from
//! trusted sources and the runner asks this plugin to pick one **by id**. The plugin never
//! writes an argument: it answers `{choice_id, probability, distribution}`, and the runner
//! runs the candidate it holds.
//!
//! # Wire methods
//!
//! * `llm.choose {utterance, context?, candidates: [{id, op?, args?, summary?}]}` →
//!   `{choice_id, probability, distribution: {id: p}}`: 1 to 50 candidates, scored as in
//!   [`choose`] (whole-sequence log-likelihood of each label, calibrated against a
//!   content-free utterance). `distribution` sums to 1; `probability` is the chosen one's
//!   share. With a server that gives no log-probabilities the answer is `{choice_id}` alone.
//!   `context` is not read.
//! * `llm.score {utterance, candidates}` → `{scores: [{id, raw, content_free, calibrated}],
//!   raw_choice, calibrated_choice}`: the numbers behind a choice, for tests and tuning (raw
//!   and content-free are natural-log likelihoods).
//! * `llm.complete {prompt, max_tokens?}` → `{text}`: greedy generation of at most
//!   `max_tokens` (1–[`MAX_COMPLETE_TOKENS`], default 64) tokens.
//! * `llm.plan {utterance, ops}` → `{steps: [{op, args}]}`: the planner fallback's proposal,
//!   1 to 3 steps over the offered op names with flat arguments, generated under a grammar
//!   (or a server's structured output) and checked again ([`plan`]).
//! * `llm.load {model} | {endpoint, api?, api_model?}` → `{backend, ms}`: load a GGUF file in
//!   process, or use an OpenAI-compatible server (see [`http`]); what the runner sends from
//!   its `[llm]` section. Replaces the backend in use.
//!
//! At most [`MAX_IN_FLIGHT`] requests use the model at once; more are refused as busy
//! (`-32000`). `$/cancel` stops a request, not only its answer ([`Cancel`]): the in-process
//! engine stops between tokens and between scoring batches, and an HTTP request's connection
//! is shut down, so the server stops too. When the runner closes the connection the program
//! exits at once, abandoning a request still in flight. A GGUF file that does not load is
//! reported with llama.cpp's own reason, from its log.
//!
//! Errors: `-32602` for bad params (naming the field); `-32000` when no model is loaded
//! (saying how to load one), when the model cannot be loaded, or when the server fails (its
//! status and what it said). `plugin.health` is `degraded` without a backend, naming why.
//!
//! # Backends
//!
//! * in process, with the cargo feature `llama`: llama.cpp through `llama-cpp-2` (the `llama` module);
//! * any OpenAI-compatible HTTP server ([`http`]).

#![warn(missing_docs)]

pub mod choose;
pub mod http;
#[cfg(feature = "llama")]
pub mod llama;
pub mod plan;

use choose::{ChooseRequest, Scores};
use clap::Parser;
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use utter_protocol::handshake::{HealthResult, HealthStatus};
use utter_protocol::plugin::{self, Call, Handler};
use utter_protocol::serde_json::{Value, json};
use utter_protocol::{ErrorObject, text::escape_unprintable};

/// The plugin's manifest, embedded at build time.
pub const MANIFEST: &str = include_str!("../utter-plugin.toml");

/// `llm.choose`.
pub const CHOOSE: &str = "llm.choose";
/// `llm.score`.
pub const SCORE: &str = "llm.score";
/// `llm.complete`.
pub const COMPLETE: &str = "llm.complete";
/// `llm.load`.
pub const LOAD: &str = "llm.load";
/// `llm.plan`.
pub const PLAN: &str = "llm.plan";

/// The most tokens `llm.complete` generates.
pub const MAX_COMPLETE_TOKENS: u64 = 512;
/// The longest `llm.complete` prompt, in characters.
pub const MAX_PROMPT_CHARS: usize = 8000;
/// The environment variable naming a GGUF model file.
pub const MODEL_ENV: &str = "UTTER_LLM_MODEL";
/// The environment variable naming an OpenAI-compatible server.
pub const ENDPOINT_ENV: &str = "UTTER_LLM_ENDPOINT";
/// The environment variable naming the server's API (`chat`, `completions`).
pub const API_ENV: &str = "UTTER_LLM_API";
/// The environment variable naming the server's model.
pub const API_MODEL_ENV: &str = "UTTER_LLM_API_MODEL";
/// The environment variable of the per-request timeout, in milliseconds.
pub const TIMEOUT_ENV: &str = "UTTER_LLM_TIMEOUT_MS";
/// How long a request waits for a model that is still loading.
pub const LOAD_WAIT: Duration = Duration::from_secs(30);

/// Why a backend failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    /// The model (file or endpoint) is missing or unusable.
    #[error("{0}")]
    Model(String),
    /// The engine failed.
    #[error("{0}")]
    Backend(String),
    /// The HTTP server failed or answered something unusable.
    #[error("{0}")]
    Server(String),
    /// The request was cancelled (`$/cancel`, or the runner went away) before it finished.
    #[error("cancelled")]
    Cancelled,
}

impl From<LlmError> for ErrorObject {
    fn from(e: LlmError) -> ErrorObject {
        match e {
            LlmError::Cancelled => {
                ErrorObject::new(utter_protocol::ErrorCode::Cancelled, "cancelled")
            }
            e => ErrorObject::plugin(e.to_string()),
        }
    }
}

/// Whether the request a blocking backend call serves was cancelled. The async side holds a
/// [`CancelOnDrop`]: when its task is aborted (`$/cancel`, the runner gone) the flag is set
/// and the hooks run. The in-process engine checks the flag between decode steps; the HTTP
/// backend shuts its connection down from a hook, so the server sees the request dropped.
#[derive(Clone, Default)]
pub struct Cancel(Arc<CancelState>);

#[derive(Default)]
struct CancelState {
    cancelled: std::sync::atomic::AtomicBool,
    /// What to run once cancelled.
    hooks: Mutex<Vec<Box<dyn FnOnce() + Send>>>,
}

impl std::fmt::Debug for Cancel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cancel")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

impl Cancel {
    /// A flag that is not set.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Set the flag and run the hooks (once; later calls do nothing).
    pub fn cancel(&self) {
        if self.0.cancelled.swap(true, Ordering::SeqCst) {
            return;
        }
        let hooks = std::mem::take(&mut *self.0.hooks.lock().unwrap_or_else(|e| e.into_inner()));
        for hook in hooks {
            hook();
        }
    }

    /// Whether the request was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.0.cancelled.load(Ordering::SeqCst)
    }

    /// # Errors
    /// [`LlmError::Cancelled`] once the request was cancelled.
    pub fn check(&self) -> Result<(), LlmError> {
        if self.is_cancelled() {
            Err(LlmError::Cancelled)
        } else {
            Ok(())
        }
    }

    /// Run `hook` when the request is cancelled (at once when it already was).
    pub fn on_cancel(&self, hook: impl FnOnce() + Send + 'static) {
        let mut hooks = self.0.hooks.lock().unwrap_or_else(|e| e.into_inner());
        if self.is_cancelled() {
            drop(hooks);
            hook();
        } else {
            hooks.push(Box::new(hook));
        }
    }
}

/// Cancels its [`Cancel`] when dropped, unless [`CancelOnDrop::finish`]ed: the async side of
/// a request holds it while the blocking work runs.
pub struct CancelOnDrop(Option<Cancel>);

impl CancelOnDrop {
    /// Guard `cancel`.
    pub fn new(cancel: Cancel) -> CancelOnDrop {
        CancelOnDrop(Some(cancel))
    }

    /// The work finished: dropping no longer cancels.
    pub fn finish(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(cancel) = self.0.take() {
            cancel.cancel();
        }
    }
}

/// Run `work` on a blocking thread with a [`Cancel`] that is set when the returned future is
/// dropped before it finished (the request's task aborted). `what` names the work in the
/// error when the thread itself fails.
async fn blocking<T: Send + 'static>(
    what: &str,
    work: impl FnOnce(&Cancel) -> Result<T, LlmError> + Send + 'static,
) -> Result<T, ErrorObject> {
    let cancel = Cancel::new();
    let guard = CancelOnDrop::new(cancel.clone());
    let result = tokio::task::spawn_blocking(move || work(&cancel))
        .await
        .map_err(|e| ErrorObject::plugin(format!("the {what} task failed: {e}")))?;
    guard.finish();
    Ok(result?)
}

/// How a backend scored a choice.
#[derive(Debug, Clone, PartialEq)]
pub enum Scored {
    /// Log-likelihoods after the utterance and after the content-free one.
    Calibrated(Scores),
    /// A choice without numbers (structured output), as an index.
    Picked(usize),
}

/// A language model. Calls block: run them off the async runtime.
pub trait Backend: Send + Sync {
    /// What it is, for health and status lines.
    fn describe(&self) -> String;

    /// Whether it can serve now (a server that answers), for `plugin.health`; blocking and
    /// quick. Default: yes.
    fn check(&self) -> Result<(), String> {
        Ok(())
    }

    /// The natural-log likelihood of each of `continuations` right after `prefix`, summed over
    /// the continuation's tokens.
    ///
    /// Stops with [`LlmError::Cancelled`] once `cancel` is set (likewise below).
    fn sequence_logprobs(
        &self,
        prefix: &str,
        continuations: &[String],
        cancel: &Cancel,
    ) -> Result<Vec<f64>, LlmError>;

    /// The prompt of `heard` that a label continues (default: [`choose::prompt`]; a model
    /// with a chat template puts [`choose::question`] in it).
    fn prompt(&self, heard: &str) -> String {
        choose::prompt(heard)
    }

    /// Greedy generation after `prompt`, at most `max_tokens` tokens.
    fn complete(&self, prompt: &str, max_tokens: u32, cancel: &Cancel) -> Result<String, LlmError>;

    /// Generation after `prompt` held to a shape: `grammar` (GBNF, for llama.cpp) or `schema`
    /// (JSON schema, for a server's structured output), whichever the backend takes.
    fn complete_constrained(
        &self,
        prompt: &str,
        max_tokens: u32,
        grammar: &str,
        schema: &Value,
        cancel: &Cancel,
    ) -> Result<String, LlmError>;

    /// A scoring of its own for `request` (a chat API); `None`: score by
    /// [`Backend::sequence_logprobs`].
    fn score(&self, request: &ChooseRequest, cancel: &Cancel) -> Option<Result<Scored, LlmError>> {
        let _ = (request, cancel);
        None
    }
}

/// Content-free scores of labels, which do not change while a backend stays loaded (the
/// content-free prompt is always the same, and it does not list the candidates).
#[derive(Debug, Default)]
pub struct ContentFree {
    /// The backend the scores are of ([`LlmPlugin`] counts its loads).
    generation: u64,
    scores: HashMap<String, f64>,
}

impl ContentFree {
    fn get(&self, generation: u64, label: &str) -> Option<f64> {
        (self.generation == generation)
            .then(|| self.scores.get(label).copied())
            .flatten()
    }

    /// Keep `score`, unless it is of an older backend than the kept ones.
    fn put(&mut self, generation: u64, label: &str, score: f64) {
        if generation > self.generation || self.scores.len() > CONTENT_FREE_CACHE {
            self.scores.clear();
            self.generation = self.generation.max(generation);
        }
        if generation == self.generation {
            self.scores.insert(label.to_owned(), score);
        }
    }
}

/// The most labels whose content-free score is kept.
const CONTENT_FREE_CACHE: usize = 10_000;

/// Score `request` with `backend`: its own way ([`Backend::score`]), else whole-sequence
/// log-likelihoods ([`Backend::sequence_logprobs`]) with the content-free scores taken from
/// (and added to) `cache`. Blocking; stops once `cancel` is set.
///
/// # Errors
/// The backend's; [`LlmError::Cancelled`].
pub fn score(
    backend: &dyn Backend,
    generation: u64,
    request: &ChooseRequest,
    cache: &Mutex<ContentFree>,
    cancel: &Cancel,
) -> Result<Scored, LlmError> {
    if let Some(own) = backend.score(request, cancel) {
        return own;
    }
    let continuations: Vec<String> = request
        .candidates
        .iter()
        .map(|c| choose::continuation(&c.label))
        .collect();
    let raw =
        backend.sequence_logprobs(&backend.prompt(&request.utterance), &continuations, cancel)?;
    let known: Vec<Option<f64>> = {
        let cache = cache.lock().expect("content-free cache");
        request
            .candidates
            .iter()
            .map(|c| cache.get(generation, &c.label))
            .collect()
    };
    let missing: Vec<String> = continuations
        .iter()
        .zip(&known)
        .filter(|(_, k)| k.is_none())
        .map(|(c, _)| c.clone())
        .collect();
    let fresh = if missing.is_empty() {
        Vec::new()
    } else {
        backend.sequence_logprobs(&backend.prompt(choose::CONTENT_FREE), &missing, cancel)?
    };
    let mut fresh = fresh.into_iter();
    let mut cache = cache.lock().expect("content-free cache");
    let content_free = request
        .candidates
        .iter()
        .zip(known)
        .map(|(c, k)| {
            k.unwrap_or_else(|| {
                let s = fresh.next().unwrap_or(f64::NAN);
                cache.put(generation, &c.label, s);
                s
            })
        })
        .collect();
    if raw.len() != request.candidates.len() {
        return Err(LlmError::Backend(format!(
            "the backend scored {} of {} candidates",
            raw.len(),
            request.candidates.len()
        )));
    }
    Ok(Scored::Calibrated(Scores { raw, content_free }))
}

/// What to load: a GGUF file or a server.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// A GGUF model file, run in process.
    Model(PathBuf),
    /// An OpenAI-compatible server.
    Endpoint {
        /// Its base URL.
        url: String,
        /// Which API scores.
        api: http::Api,
        /// The server's model name ("" = its default).
        model: String,
    },
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Model(path) => write!(f, "the model file {}", path.display()),
            Source::Endpoint { url, .. } => write!(f, "the server {url}"),
        }
    }
}

impl Source {
    /// Validate `llm.load`'s params: `{model}` or `{endpoint, api?, api_model?}`.
    pub fn from_params(params: &Value) -> Result<Source, ErrorObject> {
        let text = |k: &str| -> Result<Option<String>, ErrorObject> {
            match params.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.trim().to_owned())),
                Some(other) => Err(ErrorObject::invalid_params(format!(
                    "llm.load: {k} must be a non-empty string, not {other}"
                ))),
            }
        };
        match (text("model")?, text("endpoint")?) {
            (Some(model), None) => Ok(Source::Model(PathBuf::from(model))),
            (None, Some(url)) => Ok(Source::Endpoint {
                url,
                api: text("api")?
                    .as_deref()
                    .unwrap_or("chat")
                    .parse()
                    .map_err(ErrorObject::invalid_params)?,
                model: text("api_model")?.unwrap_or_default(),
            }),
            (Some(_), Some(_)) => Err(ErrorObject::invalid_params(
                "llm.load: give model (a GGUF file) or endpoint (a server), not both",
            )),
            (None, None) => Err(ErrorObject::invalid_params(
                "llm.load needs params.model (a GGUF file) or params.endpoint (an \
                 OpenAI-compatible server's URL)",
            )),
        }
    }

    /// Load it (blocking). `threads` is for the in-process engine, `timeout` for a server.
    pub fn load(&self, threads: u32, timeout: Duration) -> Result<Arc<dyn Backend>, LlmError> {
        match self {
            Source::Model(path) => load_model(path, threads),
            Source::Endpoint { url, api, model } => {
                Ok(Arc::new(http::Http::new(url, model, *api, timeout)?))
            }
        }
    }
}

#[cfg(feature = "llama")]
fn load_model(path: &Path, threads: u32) -> Result<Arc<dyn Backend>, LlmError> {
    Ok(Arc::new(llama::Llama::load(path, threads)?))
}

#[cfg(not(feature = "llama"))]
fn load_model(path: &Path, _threads: u32) -> Result<Arc<dyn Backend>, LlmError> {
    let missing = if path.is_file() {
        ""
    } else {
        " (which is not a file either)"
    };
    Err(LlmError::Model(format!(
        "cannot load {}{missing}: this utter-llm was built without llama.cpp; rebuild it with \
         `cargo install --path plugins/llm --features llama`, or use an OpenAI-compatible \
         server ([llm] endpoint)",
        path.display()
    )))
}

enum Loaded {
    /// Nothing was named.
    None,
    Loading(String),
    /// The backend and the load it came from.
    Ready(Arc<dyn Backend>, u64),
    Failed(String),
}

/// The most requests that use the model at once; more are refused as busy.
pub const MAX_IN_FLIGHT: usize = 8;

/// The `llm` plugin.
pub struct LlmPlugin {
    loaded: Arc<RwLock<Loaded>>,
    content_free: Arc<Mutex<ContentFree>>,
    /// Counts loads: a load applies only when no later one started.
    generation: Arc<std::sync::atomic::AtomicU64>,
    /// One `llm.load` at a time.
    loading: tokio::sync::Mutex<()>,
    in_flight: Arc<tokio::sync::Semaphore>,
    threads: u32,
    timeout: Duration,
}

impl LlmPlugin {
    /// A plugin with no backend yet, running `threads` engine threads and `timeout` per
    /// server request.
    pub fn new(threads: u32, timeout: Duration) -> LlmPlugin {
        LlmPlugin {
            loaded: Arc::new(RwLock::new(Loaded::None)),
            content_free: Arc::default(),
            generation: Arc::default(),
            loading: tokio::sync::Mutex::new(()),
            in_flight: Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT)),
            threads,
            timeout,
        }
    }

    /// Load `source` in the background (the handshake does not wait for a model).
    pub fn load_in_background(&self, source: Source) {
        *self.loaded.write().expect("loaded lock") = Loaded::Loading(source.to_string());
        let loaded = self.loaded.clone();
        let counter = self.generation.clone();
        let generation = counter.fetch_add(1, Ordering::SeqCst) + 1;
        let (threads, timeout) = (self.threads, self.timeout);
        std::thread::spawn(move || {
            let result = source.load(threads, timeout);
            let mut loaded = loaded.write().expect("loaded lock");
            // An llm.load that started meanwhile wins.
            if counter.load(Ordering::SeqCst) == generation {
                *loaded = match result {
                    Ok(b) => Loaded::Ready(b, generation),
                    Err(e) => Loaded::Failed(e.to_string()),
                };
            }
        });
    }

    /// The loaded backend; a model still loading is waited for (at most [`LOAD_WAIT`]).
    async fn backend(&self) -> Result<(Arc<dyn Backend>, u64), ErrorObject> {
        let started = Instant::now();
        while matches!(
            &*self.loaded.read().expect("loaded lock"),
            Loaded::Loading(_)
        ) && started.elapsed() < LOAD_WAIT
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        match &*self.loaded.read().expect("loaded lock") {
            Loaded::Ready(b, generation) => Ok((b.clone(), *generation)),
            Loaded::None => Err(ErrorObject::plugin(format!(
                "no language model is loaded; name a GGUF file or a server in the runner's \
                 [llm] section (model = \"...gguf\" or endpoint = \"http://127.0.0.1:8080\"), \
                 or start utter-llm with --model or --endpoint ({MODEL_ENV}, {ENDPOINT_ENV})"
            ))),
            Loaded::Loading(_) => Err(ErrorObject::plugin(
                "the language model is still loading; try again in a moment",
            )),
            Loaded::Failed(e) => Err(ErrorObject::plugin(format!(
                "the language model did not load: {e}"
            ))),
        }
    }

    async fn scored(&self, params: &Value) -> Result<(ChooseRequest, Scored), ErrorObject> {
        let request = ChooseRequest::from_params(params)?;
        let (backend, generation) = self.backend().await?;
        let cache = self.content_free.clone();
        let r = request.clone();
        let scored = blocking("scoring", move |cancel| {
            score(backend.as_ref(), generation, &r, &cache, cancel)
        })
        .await?;
        Ok((request, scored))
    }

    async fn handle_call(&self, call: Call) -> Result<Value, ErrorObject> {
        match call.method.as_str() {
            CHOOSE => {
                let (request, scored) = self.scored(&call.params).await?;
                Ok(match scored {
                    Scored::Calibrated(scores) => choose::answer(&request, &scores),
                    Scored::Picked(i) => json!({"choice_id": request.candidates[i].id}),
                })
            }
            SCORE => {
                let (request, scored) = self.scored(&call.params).await?;
                let Scored::Calibrated(scores) = scored else {
                    return Err(ErrorObject::plugin(
                        "the server answered with structured output only: there are no scores",
                    ));
                };
                let calibrated = scores.calibrated();
                let rows: Vec<Value> = request
                    .candidates
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        json!({
                            "id": c.id,
                            "label": c.label,
                            "raw": scores.raw[i],
                            "content_free": scores.content_free[i],
                            "calibrated": calibrated[i],
                        })
                    })
                    .collect();
                Ok(json!({
                    "scores": rows,
                    "raw_choice": request.candidates[scores.raw_argmax()].id,
                    "calibrated_choice": request.candidates[scores.calibrated_argmax()].id,
                }))
            }
            COMPLETE => {
                let prompt = match call.params.get("prompt") {
                    Some(Value::String(p)) if !p.is_empty() => p.clone(),
                    _ => {
                        return Err(ErrorObject::invalid_params(
                            "llm.complete needs params.prompt (a non-empty string)",
                        ));
                    }
                };
                if prompt.chars().count() > MAX_PROMPT_CHARS {
                    return Err(ErrorObject::invalid_params(format!(
                        "llm.complete: the prompt is longer than {MAX_PROMPT_CHARS} characters"
                    )));
                }
                let max_tokens = match call.params.get("max_tokens") {
                    None | Some(Value::Null) => 64,
                    Some(v) => match v.as_u64() {
                        Some(n) if (1..=MAX_COMPLETE_TOKENS).contains(&n) => n,
                        _ => {
                            return Err(ErrorObject::invalid_params(format!(
                                "llm.complete: max_tokens must be a whole number from 1 to \
                                 {MAX_COMPLETE_TOKENS}, not {}",
                                escape_unprintable(&v.to_string(), 40).0
                            )));
                        }
                    },
                };
                let (backend, _) = self.backend().await?;
                let text = blocking("generation", move |cancel| {
                    backend.complete(&prompt, max_tokens as u32, cancel)
                })
                .await?;
                Ok(json!({"text": text}))
            }
            PLAN => {
                let request = plan::PlanRequest::from_params(&call.params)?;
                let (backend, _) = self.backend().await?;
                let steps = blocking("planning", move |cancel| {
                    let text = backend.complete_constrained(
                        &plan::prompt(&request),
                        plan::MAX_TOKENS,
                        &plan::grammar(&request.ops),
                        &plan::schema(&request.ops),
                        cancel,
                    )?;
                    plan::parse(&text, &request.ops)
                })
                .await?;
                Ok(json!({"steps": steps}))
            }
            LOAD => {
                let source = Source::from_params(&call.params)?;
                let _one_at_a_time = self.loading.lock().await;
                let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
                {
                    let mut loaded = self.loaded.write().expect("loaded lock");
                    if !matches!(*loaded, Loaded::Ready(..)) {
                        *loaded = Loaded::Loading(source.to_string());
                    }
                }
                let started = Instant::now();
                let (threads, timeout) = (self.threads, self.timeout);
                let backend = tokio::task::spawn_blocking(move || source.load(threads, timeout))
                    .await
                    .map_err(|e| ErrorObject::plugin(format!("the loading task failed: {e}")))?;
                let backend = match backend {
                    Ok(b) => b,
                    Err(e) => {
                        // A backend that works is kept; anything else now says why.
                        let mut loaded = self.loaded.write().expect("loaded lock");
                        if !matches!(*loaded, Loaded::Ready(..)) {
                            *loaded = Loaded::Failed(e.to_string());
                        }
                        return Err(e.into());
                    }
                };
                let description = backend.describe();
                *self.loaded.write().expect("loaded lock") = Loaded::Ready(backend, generation);
                Ok(json!({"backend": description, "ms": started.elapsed().as_millis() as u64}))
            }
            other => Err(ErrorObject::method_not_found(other)),
        }
    }
}

impl Handler for LlmPlugin {
    fn methods(&self) -> Vec<String> {
        vec![
            CHOOSE.into(),
            SCORE.into(),
            COMPLETE.into(),
            PLAN.into(),
            LOAD.into(),
        ]
    }

    fn side_effect_free(&self) -> Vec<String> {
        vec![
            CHOOSE.into(),
            SCORE.into(),
            COMPLETE.into(),
            PLAN.into(),
            LOAD.into(),
        ]
    }

    async fn health(&self) -> HealthResult {
        let mut health = HealthResult::ok();
        let ready = match &*self.loaded.read().expect("loaded lock") {
            Loaded::Ready(b, _) => Some(b.clone()),
            _ => None,
        };
        if let Some(b) = ready {
            let checked = tokio::task::spawn_blocking(move || (b.check(), b.describe())).await;
            match checked {
                Ok((Ok(()), described)) => health.detail = described,
                Ok((Err(why), _)) => {
                    health.status = HealthStatus::Degraded;
                    health.detail = why;
                }
                Err(e) => {
                    health.status = HealthStatus::Degraded;
                    health.detail = format!("the health check failed: {e}");
                }
            }
            return health;
        }
        match &*self.loaded.read().expect("loaded lock") {
            Loaded::Ready(b, _) => health.detail = b.describe(),
            Loaded::Loading(what) => health.detail = format!("loading {what}"),
            Loaded::None => {
                health.status = HealthStatus::Degraded;
                health.detail = "no model: set [llm] model (a GGUF file) or endpoint (an \
                                 OpenAI-compatible server)"
                    .into();
            }
            Loaded::Failed(e) => {
                health.status = HealthStatus::Degraded;
                health.detail = e.clone();
            }
        }
        health
    }

    async fn handle(&self, call: Call) -> Result<Value, ErrorObject> {
        if call.method == LOAD {
            return self.handle_call(call).await;
        }
        let Ok(_permit) = self.in_flight.clone().try_acquire_owned() else {
            return Err(ErrorObject::plugin(format!(
                "busy: {MAX_IN_FLIGHT} requests are being served; try again when one is done"
            )));
        };
        self.handle_call(call).await
    }
}

const EXAMPLES: &str = "\
Examples:
  Check the plugin against the protocol:
    utter plugin check -- utter-llm --model ~/models/SmolLM2-135M-Instruct.Q4_1.gguf

  Use it from the runner's config (config.toml):
    [llm]
    model = \"~/models/SmolLM2-135M-Instruct.Q4_1.gguf\"   # or endpoint = \"http://127.0.0.1:8080\"

    [[plugin]]
    id = \"llm\"
    kind = \"llm\"
    entrypoint = [\"utter-llm\"]

A GGUF model needs the in-process engine (cargo feature llama); a server
(llama-server, ollama, vLLM) needs none.";

/// Utter's chooser: picks what a misheard command meant, among the router's
/// prepared candidates, with a small language model.
///
/// This is a plugin: Utter's runner starts it and speaks JSON-RPC 2.0 with it
/// on stdin and stdout until it closes the connection. You do not normally run
/// it by hand.
///
/// It serves
///   - llm.choose {utterance, candidates}: the id of the likeliest candidate,
///     with a calibrated probability (never an argument of its own);
///   - llm.score: the numbers behind a choice;
///   - llm.complete {prompt, max_tokens?}: greedy text generation;
///   - llm.plan {utterance, ops}: steps over the given ops, for the runner's
///     planner fallback (generated under a grammar);
///   - llm.load {model} or {endpoint}: change the model.
//
// (verbatim_doc_comment: clap 4 without its wrap_help feature does not wrap help text.)
#[derive(Debug, Clone, PartialEq, Eq, clap::Parser)]
#[command(
    name = "utter-llm",
    version,
    verbatim_doc_comment,
    args_override_self = true,
    after_help = EXAMPLES
)]
pub struct Options {
    /// A GGUF model file to run in process (needs the llama feature).
    ///
    /// Without it $UTTER_LLM_MODEL names one.
    #[arg(
        long,
        value_name = "FILE",
        verbatim_doc_comment,
        conflicts_with = "endpoint"
    )]
    pub model: Option<PathBuf>,
    /// An OpenAI-compatible server, e.g. http://127.0.0.1:8080.
    ///
    /// Without it $UTTER_LLM_ENDPOINT names one.
    #[arg(long, value_name = "URL", verbatim_doc_comment)]
    pub endpoint: Option<String>,
    /// The server's API that scores: chat or completions.
    #[arg(long, value_name = "API", default_value = "chat", value_parser = ["chat", "completions"])]
    pub api: String,
    /// The server's model name (default: the server's own).
    #[arg(long, value_name = "NAME", default_value = "")]
    pub api_model: String,
    /// CPU threads of the in-process engine, 1 to 64 (0: one per CPU).
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=64))]
    pub threads: u32,
    /// How long one server request may take, in milliseconds (10000).
    ///
    /// Without it $UTTER_LLM_TIMEOUT_MS sets it.
    #[arg(long, value_name = "MS", verbatim_doc_comment,
          value_parser = clap::value_parser!(u64).range(100..=600_000))]
    pub timeout_ms: Option<u64>,
}

impl Options {
    /// Parse `args`, the command-line arguments after the program name. `--help` and
    /// `--version` come back as errors of kind `DisplayHelp` and `DisplayVersion`.
    pub fn parse_args<I, T>(args: I) -> Result<Options, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let program = OsString::from("utter-llm");
        Options::try_parse_from(std::iter::once(program).chain(args.into_iter().map(Into::into)))
    }

    /// What to load at start: the options, else the environment as `var` reports it
    /// ([`MODEL_ENV`], or [`ENDPOINT_ENV`] with [`API_ENV`] and [`API_MODEL_ENV`]; empty
    /// counts as unset); `None` when nothing is named. An unknown [`API_ENV`] is an error.
    pub fn source(&self, var: impl Fn(&str) -> Option<OsString>) -> Result<Option<Source>, String> {
        let set = |name: &str| {
            var(name)
                .filter(|v| !v.is_empty())
                .map(|v| v.to_string_lossy().into_owned())
        };
        if let Some(model) = &self.model {
            return Ok(Some(Source::Model(model.clone())));
        }
        if let Some(url) = &self.endpoint {
            return Ok(Some(Source::Endpoint {
                url: url.clone(),
                api: self.api.parse()?,
                model: self.api_model.clone(),
            }));
        }
        if let Some(model) = set(MODEL_ENV) {
            return Ok(Some(Source::Model(PathBuf::from(model))));
        }
        let Some(url) = set(ENDPOINT_ENV) else {
            return Ok(None);
        };
        Ok(Some(Source::Endpoint {
            url,
            api: set(API_ENV)
                .as_deref()
                .unwrap_or("chat")
                .parse()
                .map_err(|e| format!("{API_ENV}: {e}"))?,
            model: set(API_MODEL_ENV).unwrap_or_default(),
        }))
    }

    /// The per-request timeout: `--timeout-ms`, else [`TIMEOUT_ENV`] when it is a number
    /// from 100 to 600 000 (another value is said on stderr and not used).
    pub fn timeout(&self, var: impl Fn(&str) -> Option<OsString>) -> Duration {
        let given = var(TIMEOUT_ENV).filter(|v| !v.is_empty());
        let env = given
            .as_ref()
            .and_then(|v| v.to_str().and_then(|v| v.parse::<u64>().ok()))
            .filter(|ms| (100..=600_000).contains(ms));
        if let (Some(v), None, None) = (&given, env, self.timeout_ms) {
            eprintln!(
                "utter-llm: {TIMEOUT_ENV}={} is not a number of milliseconds from 100 to \
                 600000; using 10000",
                v.to_string_lossy()
            );
        }
        Duration::from_millis(self.timeout_ms.or(env).unwrap_or(10_000))
    }

    /// The engine's threads: `--threads`, or one per CPU for 0.
    pub fn engine_threads(&self) -> u32 {
        match self.threads {
            0 => std::thread::available_parallelism().map_or(2, |n| n.get().min(64) as u32),
            n => n,
        }
    }
}

/// Serve the plugin until the runner closes the connection. `--help` and `--version` print
/// and return success; invalid arguments print a usage error and return 2.
pub async fn run<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let options = match Options::parse_args(args) {
        Ok(options) => options,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    let var = |name: &str| std::env::var_os(name);
    let plugin = LlmPlugin::new(options.engine_threads(), options.timeout(var));
    match options.source(var) {
        Ok(Some(source)) => plugin.load_in_background(source),
        Ok(None) => {}
        Err(e) => {
            eprintln!("utter-llm: {e}");
            return ExitCode::FAILURE;
        }
    }
    plugin::run(MANIFEST, plugin).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_free_scores_of_an_older_backend_are_not_kept() {
        let mut cache = ContentFree::default();
        cache.put(2, "open GitHub", -3.0);
        assert_eq!(cache.get(2, "open GitHub"), Some(-3.0));
        // A call that began before the load of backend 3 ends after it.
        cache.put(3, "open Gmail", -4.0);
        cache.put(2, "open GitLab", -9.0);
        assert_eq!(cache.get(3, "open GitLab"), None);
        assert_eq!(cache.get(3, "open GitHub"), None);
        assert_eq!(cache.get(3, "open Gmail"), Some(-4.0));
        assert_eq!(cache.get(2, "open Gmail"), None);
    }

    #[test]
    fn load_params_are_checked() {
        let err = |p: Value| Source::from_params(&p).unwrap_err().message;
        assert!(err(json!({})).contains("model"));
        assert!(err(json!({"model": "a", "endpoint": "b"})).contains("not both"));
        assert!(err(json!({"model": 3})).contains("string"));
        assert!(err(json!({"endpoint": "http://x", "api": "grpc"})).contains("chat"));
        assert_eq!(
            Source::from_params(&json!({"model": " /m.gguf "})).unwrap(),
            Source::Model("/m.gguf".into())
        );
        assert_eq!(
            Source::from_params(
                &json!({"endpoint": "http://h:1", "api": "completions", "api_model": "q"})
            )
            .unwrap(),
            Source::Endpoint {
                url: "http://h:1".into(),
                api: http::Api::Completions,
                model: "q".into()
            }
        );
    }

    #[test]
    fn the_source_comes_from_options_then_environment() {
        let none = |_: &str| None;
        let o = Options::parse_args(["--model", "/a.gguf"]).unwrap();
        assert_eq!(o.source(none), Ok(Some(Source::Model("/a.gguf".into()))));
        let o = Options::parse_args(["--endpoint", "http://h:1", "--api", "completions"]).unwrap();
        assert!(matches!(
            o.source(none),
            Ok(Some(Source::Endpoint {
                api: http::Api::Completions,
                ..
            }))
        ));
        let o = Options::parse_args::<[&str; 0], &str>([]).unwrap();
        assert_eq!(o.source(none), Ok(None));
        assert_eq!(o.timeout(none), Duration::from_secs(10));
        let env = |name: &str| match name {
            ENDPOINT_ENV => Some(OsString::from("http://e:2")),
            API_ENV => Some(OsString::from("completions")),
            API_MODEL_ENV => Some(OsString::from("qwen")),
            TIMEOUT_ENV => Some(OsString::from("2500")),
            _ => None,
        };
        assert_eq!(
            o.source(env),
            Ok(Some(Source::Endpoint {
                url: "http://e:2".into(),
                api: http::Api::Completions,
                model: "qwen".into()
            }))
        );
        assert_eq!(o.timeout(env), Duration::from_millis(2500));
        let bad_api = |name: &str| match name {
            ENDPOINT_ENV => Some(OsString::from("http://e:2")),
            API_ENV => Some(OsString::from("grpc")),
            _ => None,
        };
        assert!(o.source(bad_api).unwrap_err().contains(API_ENV));
        let empty = |_: &str| Some(OsString::new());
        assert_eq!(o.source(empty), Ok(None));
        for bad in [
            &["--model", "a", "--endpoint", "b"][..],
            &["--api", "x"],
            &["--timeout-ms", "5"],
        ] {
            assert_eq!(
                Options::parse_args(bad.iter().copied())
                    .unwrap_err()
                    .exit_code(),
                2,
                "{bad:?}"
            );
        }
        use clap::CommandFactory;
        Options::command().debug_assert();
    }

    #[test]
    fn endpoints_must_be_http() {
        let t = Duration::from_secs(1);
        for bad in ["ftp://x", "x", "https://example.com", "http://"] {
            assert!(
                http::Http::new(bad, "", http::Api::Chat, t).is_err(),
                "{bad}"
            );
        }
        let h = http::Http::new("http://127.0.0.1:8080/v1/", "", http::Api::Chat, t).unwrap();
        assert!(
            h.describe().contains("http://127.0.0.1:8080 "),
            "{}",
            h.describe()
        );
    }

    #[cfg(not(feature = "llama"))]
    #[test]
    fn a_build_without_llama_says_how_to_get_it() {
        let e = Source::Model("/m.gguf".into())
            .load(0, Duration::from_secs(1))
            .err()
            .unwrap();
        assert!(e.to_string().contains("--features llama"), "{e}");
    }
}
