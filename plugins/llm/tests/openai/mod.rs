//! A test server speaking the OpenAI-compatible wire (`POST /v1/chat/completions`,
//! `POST /v1/completions`, and `GET /v1/models` for health checks, not recorded) over real
//! HTTP/1.1 on loopback, standing in for llama-server,
//! ollama or vLLM. Its "model" is a rule, chosen by the request's `model` field:
//!
//! * `biased` (chat, with `top_logprobs`): option 1 gets +2 nats whatever was heard (a label
//!   bias); an option whose label's last word appears in the heard words (spaces removed)
//!   gets +1.5. Raw scores pick option 1; calibrated ones pick the heard option.
//! * `plain` (chat, no `logprobs`): answers structured output `{"choice": N}` with the
//!   heard option's number (or `bad-number` answers 99).
//! * `echo` (completions with `echo`): per prompt, whitespace tokens with `text_offset`;
//!   each token costs 0.3 nats per character, and a token that appears in the heard words
//!   gains 1.
//! * `error500`, `garbage`, `slow` (3 s), `hang` (60 s, or until the client hangs up, which
//!   [`Server::hung_up`] counts), `no-numbers` (top_logprobs of words only), `echo-empty`
//!   (completions that score no token).
//! * any model, asked for structured output named `plan` (the planner): `open_url` of the
//!   Rust website for a command that says "rust", else a `terminal` step it was not offered.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use utter_protocol::serde_json::{self, Value, json};

/// A running test server.
pub struct Server {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The bodies it was sent, with their paths.
    pub requests: Arc<Mutex<Vec<(String, Value)>>>,
    /// How many `hang` requests the client dropped (closed its connection) before the answer.
    pub hung_up: Arc<std::sync::atomic::AtomicUsize>,
}

impl Server {
    pub fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
        let hung_up: Arc<std::sync::atomic::AtomicUsize> = Arc::default();
        let seen = requests.clone();
        let hangups = hung_up.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let seen = seen.clone();
                let hangups = hangups.clone();
                std::thread::spawn(move || serve(stream, &seen, &hangups));
            }
        });
        Server {
            url,
            requests,
            hung_up,
        }
    }
}

fn serve(
    stream: TcpStream,
    seen: &Mutex<Vec<(String, Value)>>,
    hung_up: &std::sync::atomic::AtomicUsize,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    reader.read_line(&mut request_line).unwrap();
    let path = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or("")
        .to_owned();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut stream = stream;
    // The plugin's health check; not a request of interest.
    if request_line.starts_with("GET /v1/models") {
        let text = r#"{"object":"list","data":[]}"#;
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
            text.len()
        );
        return;
    }
    seen.lock().unwrap().push((path.clone(), body.clone()));
    let model = body["model"].as_str().unwrap_or("").to_owned();
    let (status, text) = match model.as_str() {
        "error500" => (500, r#"{"error":{"message":"model exploded"}}"#.to_owned()),
        "garbage" => (200, "<html>not json</html>".to_owned()),
        "slow" => {
            std::thread::sleep(std::time::Duration::from_secs(3));
            (200, "{}".to_owned())
        }
        "hang" => {
            // Wait, watching for the client to hang up (a read that ends: it sent its whole
            // request already).
            stream
                .set_read_timeout(Some(std::time::Duration::from_millis(50)))
                .unwrap();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            let mut byte = [0u8; 1];
            while std::time::Instant::now() < deadline {
                match stream.read(&mut byte) {
                    Ok(0) => {
                        hung_up.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        return;
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    _ => {
                        hung_up.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        return;
                    }
                }
            }
            (200, "{}".to_owned())
        }
        _ if path == "/v1/chat/completions" => (200, chat(&model, &body).to_string()),
        _ if path == "/v1/completions" => (200, completions(&body).to_string()),
        _ => (404, r#"{"error":"no such path"}"#.to_owned()),
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
}

/// The heard words and the options of a chat request.
fn parse_chat(body: &Value) -> (String, Vec<String>) {
    let user = body["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_owned();
    let heard = user
        .split("Heard: \"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or("")
        .to_owned();
    let options = user
        .lines()
        .filter_map(|l| {
            let (n, label) = l.split_once(". ")?;
            n.parse::<usize>().ok().map(|_| label.to_owned())
        })
        .collect();
    (heard, options)
}

fn squash(s: &str) -> String {
    s.to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric())
        .collect()
}

fn heard_option(heard: &str, options: &[String]) -> Option<usize> {
    let heard = squash(heard);
    options.iter().position(|o| {
        let last = o.split_whitespace().last().unwrap_or("");
        !heard.is_empty() && heard.contains(&squash(last))
    })
}

fn chat(model: &str, body: &Value) -> Value {
    // The planner's structured output: a plan for "rust" commands, else an op it was not
    // offered (a model that goes astray).
    if body.pointer("/response_format/json_schema/name") == Some(&json!("plan")) {
        let prompt = body["messages"][0]["content"].as_str().unwrap_or("");
        let command = prompt.rsplit("Command: \"").next().unwrap_or("");
        let plan = if command.contains("rust") {
            json!({"steps": [{"op": "open_url", "args": {"url": "https://www.rust-lang.org"}}]})
        } else {
            json!({"steps": [{"op": "terminal", "args": {"command": "rm -rf ~"}}]})
        };
        return json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": plan.to_string()}}]});
    }
    let (heard, options) = parse_chat(body);
    let hit = heard_option(&heard, &options);
    match model {
        "plain" | "bad-number" => {
            let n = if model == "bad-number" {
                99
            } else {
                hit.unwrap_or(0) + 1
            };
            json!({"choices": [{"index": 0, "message": {"role": "assistant",
                "content": json!({"choice": n}).to_string()}}]})
        }
        "no-numbers" => {
            json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "Sure"},
            "logprobs": {"content": [{"token": "Sure", "logprob": -0.1,
                "top_logprobs": [{"token": "Sure", "logprob": -0.1}, {"token": "I", "logprob": -3.0}]}]}}]})
        }
        _ => {
            let mut scores: Vec<f64> = (0..options.len())
                .map(|i| {
                    let mut s = -6.0;
                    if i == 0 {
                        s += 2.0;
                    }
                    if Some(i) == hit {
                        s += 1.5;
                    }
                    s
                })
                .collect();
            // As a real server: a log-softmax over the options.
            let max = scores.iter().copied().fold(f64::MIN, f64::max);
            let log_sum = max + scores.iter().map(|s| (s - max).exp()).sum::<f64>().ln();
            for s in &mut scores {
                *s -= log_sum;
            }
            let top: Vec<Value> = scores
                .iter()
                .enumerate()
                .map(|(i, lp)| json!({"token": format!("{}", i + 1), "logprob": lp}))
                .chain([json!({"token": "The", "logprob": -9.0})])
                .collect();
            json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "1"},
                "logprobs": {"content": [{"token": "1", "logprob": scores[0], "top_logprobs": top}]}}]})
        }
    }
}

/// The log-probability the `echo` model gives a token, after the prompt's heard words.
pub fn token_logprob(token: &str, heard: &str) -> f64 {
    let t = squash(token);
    let mut lp = -0.3 * t.chars().count() as f64;
    if !t.is_empty() && squash(heard).contains(&t) {
        lp += 1.0;
    }
    lp
}

fn completions(body: &Value) -> Value {
    let prompts: Vec<String> = match &body["prompt"] {
        Value::Array(a) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        Value::String(s) => vec![s.clone()],
        _ => Vec::new(),
    };
    if body["model"] == "echo-empty" {
        let choices: Vec<Value> = (0..prompts.len())
            .map(|i| json!({"index": i, "text": "", "logprobs": {"tokens": [], "token_logprobs": [], "text_offset": []}}))
            .collect();
        return json!({"choices": choices});
    }
    if body["echo"] != true {
        return json!({"choices": [{"index": 0, "text": " done"}]});
    }
    let choices: Vec<Value> = prompts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let heard = p
                .split("Heard: \"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .unwrap_or("");
            let (mut tokens, mut offsets, mut lps) = (Vec::new(), Vec::new(), Vec::new());
            let mut at = 0;
            let chars: Vec<char> = p.chars().collect();
            while at < chars.len() {
                let start = at;
                at += 1;
                while at < chars.len() && !chars[at].is_whitespace() {
                    at += 1;
                }
                let token: String = chars[start..at].iter().collect();
                lps.push(if start == 0 {
                    Value::Null
                } else {
                    json!(token_logprob(&token, heard))
                });
                tokens.push(token);
                offsets.push(start);
            }
            // The generated token, past the prompt.
            tokens.push(" x".into());
            offsets.push(chars.len());
            lps.push(json!(-0.5));
            json!({"index": i, "text": format!("{p} x"),
                   "logprobs": {"tokens": tokens, "token_logprobs": lps, "text_offset": offsets}})
        })
        .collect();
    json!({"choices": choices})
}
