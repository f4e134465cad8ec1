//! A stand-in screen-grounding server for the T3 tests: a tiny HTTP/1.1 server on
//! `127.0.0.1` (one thread, `std::net::TcpListener`) serving `POST /v1/chat/completions`
//! the OpenAI way. It checks that each request carries a base64 PNG in a `data:` URL whose
//! IHDR size is the one the test expects, records every request, and answers the content
//! the test set (a point, or anything else). A request that fails a check is answered
//! HTTP 400 naming the reason, and the reason is recorded.

#![allow(dead_code)]

use base64::Engine;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The largest request body read, in bytes.
const MAX_BODY: usize = 64 << 20;

/// What one request carried.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The request line's method and path, e.g. `"POST /v1/chat/completions"`.
    pub request_line: String,
    /// `model`.
    pub model: Option<String>,
    /// The text part of the user message (the prompt).
    pub prompt: Option<String>,
    /// The IHDR width and height of the PNG it carried.
    pub png_size: Option<(u32, u32)>,
    /// `temperature`.
    pub temperature: Option<f64>,
    /// Why the request was refused (HTTP 400), when it was.
    pub refused: Option<String>,
}

struct State {
    /// The PNG size each request must carry, when the test knows it.
    expect_size: Option<(u32, u32)>,
    /// The assistant content answered.
    content: String,
    seen: Vec<Seen>,
}

/// The server; it stops on drop.
pub struct GroundingServer {
    /// `http://127.0.0.1:PORT/v1/chat/completions`.
    pub url: String,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    port: u16,
    thread: Option<JoinHandle<()>>,
}

impl GroundingServer {
    /// Start on a free port, answering `{"x": 0, "y": 0, "confidence": 0.9}` until told
    /// otherwise.
    pub fn start() -> GroundingServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().expect("local address").port();
        let state = Arc::new(Mutex::new(State {
            expect_size: None,
            content: point_json(0, 0, 0.9),
            seen: Vec::new(),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let state = state.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(stream) = stream {
                        serve(stream, &state);
                    }
                }
            })
        };
        GroundingServer {
            url: format!("http://127.0.0.1:{port}/v1/chat/completions"),
            state,
            stop,
            port,
            thread: Some(thread),
        }
    }

    /// Refuse (HTTP 400) a request whose PNG is not `width`×`height`.
    pub fn expect_size(&self, width: u32, height: u32) {
        self.state.lock().unwrap().expect_size = Some((width, height));
    }

    /// Answer `content` as the assistant's message from now on.
    pub fn answer(&self, content: &str) {
        self.state.lock().unwrap().content = content.to_owned();
    }

    /// Answer the point `(x, y)` with `confidence`, as the prompt asks.
    pub fn answer_point(&self, x: i64, y: i64, confidence: f64) {
        self.answer(&point_json(x, y, confidence));
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }
}

impl Drop for GroundingServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The content `{"x":X,"y":Y,"confidence":C}`.
pub fn point_json(x: i64, y: i64, confidence: f64) -> String {
    json!({"x": x, "y": y, "confidence": confidence}).to_string()
}

/// The IHDR width and height of a PNG.
pub fn png_size(png: &[u8]) -> Option<(u32, u32)> {
    if png.len() < 24 || !png.starts_with(b"\x89PNG\r\n\x1a\n") || &png[12..16] != b"IHDR" {
        return None;
    }
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    Some((be(&png[16..20]), be(&png[20..24])))
}

fn respond(stream: &mut TcpStream, status: &str, body: &str) {
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.flush();
}

fn serve(mut stream: TcpStream, state: &Mutex<State>) {
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
        return; // the wake-up connection of Drop, or a client that went away
    }
    let mut length: Option<usize> = None;
    let mut chunked = false;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            let name = name.trim().to_ascii_lowercase();
            if name == "content-length" {
                length = value.trim().parse().ok();
            } else if name == "transfer-encoding" {
                chunked = true;
            }
        }
    }
    let request_line = request_line
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    let mut seen = Seen {
        request_line: request_line.clone(),
        model: None,
        prompt: None,
        png_size: None,
        temperature: None,
        refused: None,
    };
    let body = match length {
        Some(n) if n <= MAX_BODY && !chunked => {
            let mut body = vec![0; n];
            reader.read_exact(&mut body).map(|_| body).ok()
        }
        _ => None,
    };
    let outcome = check(&request_line, body.as_deref(), state, &mut seen);
    let mut s = state.lock().unwrap();
    match outcome {
        Ok(()) => {
            let answer = json!({
                "id": "test", "object": "chat.completion",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": s.content}}]
            });
            s.seen.push(seen);
            drop(s);
            respond(&mut stream, "200 OK", &answer.to_string());
        }
        Err(reason) => {
            seen.refused = Some(reason.clone());
            s.seen.push(seen);
            drop(s);
            respond(
                &mut stream,
                "400 Bad Request",
                &json!({"error": {"message": reason}}).to_string(),
            );
        }
    }
}

fn check(
    request_line: &str,
    body: Option<&[u8]>,
    state: &Mutex<State>,
    seen: &mut Seen,
) -> Result<(), String> {
    if request_line != "POST /v1/chat/completions" {
        return Err(format!("unexpected request {request_line:?}"));
    }
    let body = body.ok_or("no Content-Length body")?;
    let request: Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    seen.model = request["model"].as_str().map(str::to_owned);
    seen.temperature = request["temperature"].as_f64();
    let content = request
        .pointer("/messages/0/content")
        .and_then(Value::as_array)
        .ok_or("messages[0].content is not an array of parts")?;
    seen.prompt = content
        .iter()
        .find(|p| p["type"] == "text")
        .and_then(|p| p["text"].as_str())
        .map(str::to_owned);
    let url = content
        .iter()
        .find(|p| p["type"] == "image_url")
        .and_then(|p| p.pointer("/image_url/url"))
        .and_then(Value::as_str)
        .ok_or("no image_url part")?;
    let data = url
        .strip_prefix("data:image/png;base64,")
        .ok_or("the image is not a data:image/png;base64 URL")?;
    let png = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| format!("the image is not base64: {e}"))?;
    let size = png_size(&png).ok_or("the image is not a PNG")?;
    seen.png_size = Some(size);
    let expect = state.lock().unwrap().expect_size;
    if let Some(want) = expect
        && want != size
    {
        return Err(format!("the PNG is {size:?}, expected {want:?}"));
    }
    Ok(())
}
