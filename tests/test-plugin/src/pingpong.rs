//! `utter-pingpong`: the floor for the round-trip benchmark. A blocking loop that reads one
//! Content-Length frame from stdin, parses it as JSON, and writes `{"jsonrpc":"2.0","id":<id>,
//! "result":{}}` to stdout. No runtime, no tasks: what a pipe and a JSON parse cost.

use std::io::{BufRead, BufReader, Read, Write};
use utter_protocol::serde_json::{self, Value};

fn main() {
    let stdin = std::io::stdin();
    let mut input = BufReader::new(stdin.lock());
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut line = String::new();
    loop {
        let mut length = None;
        loop {
            line.clear();
            match input.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let trimmed = line.trim_end();
            if trimmed.is_empty() {
                break;
            }
            if let Some((name, value)) = trimmed.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse::<usize>().ok();
                }
            }
        }
        let Some(length) = length else { return };
        let mut body = vec![0u8; length];
        if input.read_exact(&mut body).is_err() {
            return;
        }
        let id = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| v.get("id").cloned())
            .unwrap_or(Value::Null);
        let reply =
            serde_json::to_vec(&serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {}}))
                .unwrap_or_default();
        let _ = write!(out, "Content-Length: {}\r\n\r\n", reply.len());
        let _ = out.write_all(&reply);
        let _ = out.flush();
    }
}
