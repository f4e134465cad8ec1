//! The HTTP backend: any server speaking the OpenAI-compatible wire (llama.cpp's
//! `llama-server`, ollama, vLLM), over plain HTTP to a local address.
//!
//! Two ways of scoring, chosen by [`Api`]:
//!
//! * [`Api::Completions`]: `POST {base}/v1/completions` with `echo: true, logprobs: 1,
//!   max_tokens: 1` and one prompt per candidate (the prompt followed by the label) in one
//!   request. The log-probabilities of the label's tokens (those whose `text_offset` is past
//!   the prompt) are summed: the same whole-sequence score as in process.
//! * [`Api::Chat`]: `POST {base}/v1/chat/completions` with the candidates as a numbered list,
//!   `max_tokens: 1, logprobs: true, top_logprobs: 20`; the first answered token's
//!   `top_logprobs` give each number's log-probability (a number not among them scores one
//!   nat below the lowest that is). Calibrated like the others, with the list asked a second
//!   time after the content-free utterance. A server that answers without `logprobs` is asked
//!   again with structured output (`response_format` of type `json_schema`, the numbers as an
//!   enum); that answer has no probability. More than [`MAX_NUMBERED`] options are asked for
//!   structured output at once (two-digit numbers are two tokens for many tokenizers). Labels
//!   are one line each; an endpoint with credentials, a path, or https is refused.
//!
//! Every request has one deadline (the `timeout` given to [`Http::new`]); an error status, a
//! body that is not JSON or lacks the fields above, and a body over [`MAX_RESPONSE`] bytes
//! are errors that name the server and quote (escaped, cut) what it sent.

use crate::choose::{self, ChooseRequest, Scores};
use crate::{Backend, Cancel, LlmError, Scored};
use std::time::Duration;
use utter_protocol::serde_json::{self, Value, json};
use utter_protocol::text::escape_unprintable;

/// The largest answer read, in bytes.
pub const MAX_RESPONSE: u64 = 8 << 20;
/// The most options scored by their numbers' log-probabilities (one digit each).
pub const MAX_NUMBERED: usize = 9;
/// The longest a health check waits for the server.
const PROBE_TIMEOUT: Duration = Duration::from_millis(300);
/// How many alternatives the chat API is asked for (the OpenAI maximum).
pub const TOP_LOGPROBS: usize = 20;

/// Which OpenAI-compatible endpoint scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `/v1/completions` with echoed prompt log-probabilities (vLLM; the OpenAI legacy API).
    Completions,
    /// `/v1/chat/completions` with `top_logprobs` (llama-server, ollama, vLLM).
    Chat,
}

impl std::str::FromStr for Api {
    type Err = String;
    fn from_str(s: &str) -> Result<Api, String> {
        match s {
            "completions" => Ok(Api::Completions),
            "chat" => Ok(Api::Chat),
            other => Err(format!(
                "the API is \"chat\" (/v1/chat/completions) or \"completions\" \
                 (/v1/completions), not {other:?}"
            )),
        }
    }
}

/// An OpenAI-compatible server.
#[derive(Debug, Clone)]
pub struct Http {
    base: String,
    model: String,
    api: Api,
    timeout: Duration,
}

impl Http {
    /// A server at `base` (`http://127.0.0.1:8080`, with or without a trailing `/v1`),
    /// asked for `model` (the server's model name; empty: the server's default), with
    /// `timeout` per request. Errors when `base` is not an `http://` URL.
    pub fn new(base: &str, model: &str, api: Api, timeout: Duration) -> Result<Http, LlmError> {
        let trimmed = base.trim().trim_end_matches('/');
        let trimmed = trimmed.strip_suffix("/v1").unwrap_or(trimmed);
        let shown = escape_unprintable(base, 120).0;
        if trimmed.starts_with("https://") {
            return Err(LlmError::Model(format!(
                "the endpoint {shown:?} is https, which is not supported (plain HTTP to a \
                 server on this machine); use http://127.0.0.1:PORT"
            )));
        }
        let valid = trimmed
            .parse::<ureq::http::Uri>()
            .ok()
            .filter(|u| u.scheme_str() == Some("http") && u.host().is_some());
        if valid
            .as_ref()
            .and_then(|u| u.authority())
            .is_some_and(|a| a.as_str().contains('@'))
        {
            return Err(LlmError::Model(
                "the endpoint has credentials in it (user@host), which are not supported: name \
                 the server as http://HOST:PORT"
                    .into(),
            ));
        }
        if let Some(uri) = &valid
            && !matches!(uri.path(), "" | "/")
        {
            return Err(LlmError::Model(format!(
                "the endpoint {shown:?} has the path {}; name the server's base address \
                 (http://HOST:PORT, or with /v1), not an API path",
                uri.path()
            )));
        }
        if valid.is_none() {
            return Err(LlmError::Model(format!(
                "the endpoint {shown:?} is not an http:// URL; name the server's address, for \
                 example http://127.0.0.1:8080 (llama-server) or http://127.0.0.1:11434 (ollama)"
            )));
        }
        Ok(Http {
            base: trimmed.to_owned(),
            model: model.to_owned(),
            api,
            timeout,
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}/v1/{path}", self.base)
    }

    /// POST `body` to `path`; a cancelled request shuts its connection down at once, so the
    /// server sees it dropped.
    fn post(&self, path: &str, body: &Value, cancel: &Cancel) -> Result<Value, LlmError> {
        cancel.check()?;
        let url = self.url(path);
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(self.timeout))
            .proxy(None)
            .max_redirects(0)
            .http_status_as_error(false)
            .build()
            .into();
        // An agent of its own per request: shutting it down ends this request only.
        let shut = agent.clone();
        cancel.on_cancel(move || shut.shutdown());
        let shown = escape_unprintable(&url, 120).0;
        let cancelled = |e: ureq::Error| {
            if cancel.is_cancelled() {
                LlmError::Cancelled
            } else {
                LlmError::Server(match e {
                    ureq::Error::Timeout(_) => format!(
                        "the LLM server at {shown} gave no answer within {} ms",
                        self.timeout.as_millis()
                    ),
                    e => format!("the LLM server at {shown} could not be reached: {e}"),
                })
            }
        };
        let mut response = agent.post(&url).send_json(body).map_err(cancelled)?;
        let status = response.status();
        let bytes = response
            .body_mut()
            .with_config()
            .limit(MAX_RESPONSE)
            .read_to_vec()
            .map_err(|e| {
                if cancel.is_cancelled() {
                    return LlmError::Cancelled;
                }
                LlmError::Server(match e {
                    ureq::Error::BodyExceedsLimit(_) => format!(
                        "the LLM server's answer is larger than {} MiB",
                        MAX_RESPONSE >> 20
                    ),
                    ureq::Error::Timeout(_) => format!(
                        "the LLM server at {shown} did not finish its answer within {} ms",
                        self.timeout.as_millis()
                    ),
                    e => format!("reading the LLM server's answer failed: {e}"),
                })
            })?;
        let text = String::from_utf8_lossy(&bytes);
        if !status.is_success() {
            return Err(LlmError::Server(format!(
                "the LLM server at {shown} answered HTTP {}: {}",
                status.as_u16(),
                escape_unprintable(text.trim(), 200).0
            )));
        }
        serde_json::from_slice(&bytes).map_err(|e| {
            LlmError::Server(format!(
                "the LLM server's answer is not JSON ({e}): {}",
                escape_unprintable(text.trim(), 200).0
            ))
        })
    }

    fn with_model(&self, mut body: Value) -> Value {
        if !self.model.is_empty() {
            body["model"] = json!(self.model);
        }
        body
    }

    /// The chat messages of a numbered choice.
    fn numbered(heard: &str, labels: &[String]) -> Value {
        let list: String = labels
            .iter()
            .enumerate()
            .map(|(i, l)| format!("{}. {l}\n", i + 1))
            .collect();
        json!([
            {"role": "system", "content": "You pick what a person meant by a voice command. The \
              speech recogniser may have misheard names. Answer with the number of one option \
              and nothing else."},
            {"role": "user", "content": format!(
                "{}\nOptions:\n{list}Which option did the person mean? Answer with its number.",
                choose::question(heard))},
        ])
    }

    /// Each option number's log-probability as the first answered token; `None` when the
    /// server sent no `logprobs`.
    fn chat_logprobs(
        &self,
        heard: &str,
        labels: &[String],
        cancel: &Cancel,
    ) -> Result<Option<Vec<f64>>, LlmError> {
        let answer = self.post(
            "chat/completions",
            &self.with_model(json!({
                "messages": Http::numbered(heard, labels),
                "max_tokens": 1,
                "temperature": 0,
                "logprobs": true,
                "top_logprobs": TOP_LOGPROBS,
            })),
            cancel,
        )?;
        let first = answer.pointer("/choices/0/logprobs/content/0");
        let Some(top) = first
            .and_then(|f| f.get("top_logprobs"))
            .and_then(Value::as_array)
        else {
            if first.is_some() {
                return Err(malformed(
                    "chat/completions",
                    "a list in choices[0].logprobs.content[0].top_logprobs",
                    &answer,
                ));
            }
            if answer.pointer("/choices/0/message").is_some() {
                return Ok(None);
            }
            return Err(malformed("chat/completions", "choices[0].message", &answer));
        };
        let mut scores = vec![f64::NAN; labels.len()];
        for alt in top {
            let (Some(token), Some(lp)) = (
                alt.get("token").and_then(Value::as_str),
                alt.get("logprob").and_then(Value::as_f64),
            ) else {
                continue;
            };
            let digits = token.trim();
            if !digits.is_empty()
                && digits.bytes().all(|b| b.is_ascii_digit())
                && let Ok(n) = digits.parse::<usize>()
                && (1..=labels.len()).contains(&n)
                && scores[n - 1].is_nan()
                && lp.is_finite()
            {
                scores[n - 1] = lp;
            }
        }
        let seen = scores.iter().copied().filter(|s| !s.is_nan());
        let floor = seen.fold(f64::INFINITY, f64::min);
        if !floor.is_finite() {
            return Err(LlmError::Server(
                "the LLM server's top_logprobs name none of the options' numbers".into(),
            ));
        }
        Ok(Some(
            scores
                .into_iter()
                .map(|s| if s.is_nan() { floor - 1.0 } else { s })
                .collect(),
        ))
    }

    /// Structured output: the server must answer `{"choice": <number>}` from an enum.
    fn chat_structured(
        &self,
        heard: &str,
        labels: &[String],
        cancel: &Cancel,
    ) -> Result<usize, LlmError> {
        let numbers: Vec<Value> = (1..=labels.len()).map(|n| json!(n)).collect();
        let answer = self.post(
            "chat/completions",
            &self.with_model(json!({
                "messages": Http::numbered(heard, labels),
                "max_tokens": 16,
                "temperature": 0,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {
                        "name": "choice",
                        "strict": true,
                        "schema": {
                            "type": "object",
                            "properties": {"choice": {"enum": numbers}},
                            "required": ["choice"],
                            "additionalProperties": false,
                        },
                    },
                },
            })),
            cancel,
        )?;
        let content = answer
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed("chat/completions", "choices[0].message.content", &answer))?;
        let parsed: Value = serde_json::from_str(content.trim()).map_err(|_| {
            LlmError::Server(format!(
                "the LLM server's structured answer is not JSON: {}",
                escape_unprintable(content, 120).0
            ))
        })?;
        match parsed.get("choice").and_then(Value::as_u64) {
            Some(n) if (1..=labels.len() as u64).contains(&n) => Ok(n as usize - 1),
            _ => Err(LlmError::Server(format!(
                "the LLM server's structured answer {} is not {{\"choice\": N}} with N an option's \
                 number from 1 to {} (the server gave no logprobs, so it was asked for structured \
                 output)",
                escape_unprintable(&parsed.to_string(), 120).0,
                labels.len()
            ))),
        }
    }
}

/// The server's answer lacks what `wanted` says ("choices[0].text", "one choice per prompt").
fn malformed(path: &str, wanted: &str, answer: &Value) -> LlmError {
    LlmError::Server(format!(
        "the LLM server's /v1/{path} answer is not as expected (wanted: {wanted}): {}",
        escape_unprintable(&answer.to_string(), 200).0
    ))
}

impl Backend for Http {
    fn check(&self) -> Result<(), String> {
        // Reachable at all: any HTTP answer to GET /v1/models will do.
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(self.timeout.min(PROBE_TIMEOUT)))
            .proxy(None)
            .http_status_as_error(false)
            .build()
            .into();
        match agent.get(self.url("models")).call() {
            Ok(_) => Ok(()),
            Err(e) => Err(format!("the server {} does not answer: {e}", self.base)),
        }
    }

    fn describe(&self) -> String {
        let api = match self.api {
            Api::Completions => "completions",
            Api::Chat => "chat",
        };
        let model = if self.model.is_empty() {
            "the server's default model".to_owned()
        } else {
            format!("model {}", self.model)
        };
        format!(
            "OpenAI-compatible server {} ({api} API, {model})",
            self.base
        )
    }

    fn sequence_logprobs(
        &self,
        prefix: &str,
        continuations: &[String],
        cancel: &Cancel,
    ) -> Result<Vec<f64>, LlmError> {
        let prompts: Vec<String> = continuations
            .iter()
            .map(|c| format!("{prefix}{c}"))
            .collect();
        let answer = self.post(
            "completions",
            &self.with_model(json!({
                "prompt": prompts,
                "max_tokens": 1,
                "temperature": 0,
                "echo": true,
                "logprobs": 1,
            })),
            cancel,
        )?;
        let choices = answer
            .get("choices")
            .and_then(Value::as_array)
            .ok_or_else(|| malformed("completions", "choices", &answer))?;
        let start = prefix.chars().count() as u64;
        let mut scores = vec![None; prompts.len()];
        for (n, choice) in choices.iter().enumerate() {
            let index = choice
                .get("index")
                .and_then(Value::as_u64)
                .map_or(n, |i| i as usize);
            let (Some(lps), Some(offsets)) = (
                choice
                    .pointer("/logprobs/token_logprobs")
                    .and_then(Value::as_array),
                choice
                    .pointer("/logprobs/text_offset")
                    .and_then(Value::as_array),
            ) else {
                return Err(malformed(
                    "completions",
                    "choices[].logprobs.token_logprobs and text_offset (does the server support echo?)",
                    &answer,
                ));
            };
            let Some(prompt) = prompts.get(index) else {
                return Err(malformed(
                    "completions",
                    "a choice index within the prompts",
                    &answer,
                ));
            };
            let end = prompt.chars().count() as u64;
            let mut sum = 0.0;
            let mut counted = 0;
            for (lp, off) in lps.iter().zip(offsets) {
                let Some(off) = off.as_u64() else {
                    return Err(malformed(
                        "completions",
                        "whole-number text_offsets",
                        &answer,
                    ));
                };
                if off >= start && off < end {
                    let lp = lp
                        .as_f64()
                        .filter(|lp| lp.is_finite() && *lp <= 0.0)
                        .ok_or_else(|| {
                            malformed(
                                "completions",
                                "a log-probability (a number at most 0) for each label token",
                                &answer,
                            )
                        })?;
                    sum += lp;
                    counted += 1;
                }
            }
            if counted == 0 {
                return Err(malformed(
                    "completions",
                    "log-probabilities of the label's tokens (none fell inside the label)",
                    &answer,
                ));
            }
            scores[index] = Some(sum);
        }
        scores
            .into_iter()
            .map(|s| s.ok_or_else(|| malformed("completions", "one choice per prompt", &answer)))
            .collect()
    }

    fn complete(&self, prompt: &str, max_tokens: u32, cancel: &Cancel) -> Result<String, LlmError> {
        let answer = self.post(
            "completions",
            &self.with_model(json!({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0})),
            cancel,
        )?;
        answer
            .pointer("/choices/0/text")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| malformed("completions", "choices[0].text", &answer))
    }

    fn complete_constrained(
        &self,
        prompt: &str,
        max_tokens: u32,
        _grammar: &str,
        schema: &Value,
        cancel: &Cancel,
    ) -> Result<String, LlmError> {
        let answer = self.post(
            "chat/completions",
            &self.with_model(json!({
                "messages": [{"role": "user", "content": prompt}],
                "max_tokens": max_tokens,
                "temperature": 0,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "plan", "schema": schema},
                },
            })),
            cancel,
        )?;
        answer
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| malformed("chat/completions", "choices[0].message.content", &answer))
    }

    fn score(&self, request: &ChooseRequest, cancel: &Cancel) -> Option<Result<Scored, LlmError>> {
        if self.api != Api::Chat {
            return None;
        }
        let labels = request.labels();
        // Option numbers past 9 are two tokens for many tokenizers: the first token cannot
        // tell them apart, so longer lists are asked for structured output.
        if labels.len() > MAX_NUMBERED {
            return Some(
                self.chat_structured(&request.utterance, &labels, cancel)
                    .map(Scored::Picked),
            );
        }
        Some((|| {
            let Some(raw) = self.chat_logprobs(&request.utterance, &labels, cancel)? else {
                return Ok(Scored::Picked(self.chat_structured(
                    &request.utterance,
                    &labels,
                    cancel,
                )?));
            };
            let content_free = self
                .chat_logprobs(choose::CONTENT_FREE, &labels, cancel)?
                .ok_or_else(|| {
                    LlmError::Server("the LLM server stopped sending logprobs".into())
                })?;
            Ok(Scored::Calibrated(Scores { raw, content_free }))
        })())
    }
}
