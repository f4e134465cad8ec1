//! `utter-rulebreaker`: a stdio plugin that follows the protocol except for the one rule
//! named by `--break RULE`, so that each check of `utter plugin check`
//! (`utter_protocol::testkit::conformance`) can be seen to fail on its own.
//!
//! ```text
//! utter-rulebreaker [--break RULE]     serve on stdin/stdout (no --break: break nothing)
//! utter-rulebreaker --print-manifest   print the utter-plugin.toml it answers the hello from
//! ```
//!
//! Rules, and the check each one fails:
//!
//! | RULE | what it does wrong | check |
//! |---|---|---|
//! | `wrong-major` | answers the hello with protocol `"2.0"` | `handshake.hello` |
//! | `accept-any-major` | accepts a runner of any protocol version | `handshake.incompatible-major` |
//! | `bad-capability` | provides `"Not A Capability"` | `handshake.capabilities` |
//! | `bad-describe` | `plugin.describe` answers `methods` as a string | `describe` |
//! | `bad-health` | `plugin.health` answers status `"fine"` | `health` |
//! | `manifest-mismatch` | the hello says kind `router` and provides one more capability than the manifest | `manifest` |
//! | `unknown-method-ok` | answers unknown methods with `{}` | `unknown-method` |
//! | `malformed-silent` | says nothing about a frame that is not JSON (still serves the next) | `malformed-frame` |
//! | `cancel-crash` | exits with status 3 on `$/cancel` | `cancel` |
//! | `ignore-eof` | keeps running after stdin closes | `stdin-eof` |
//!
//! It reads frames itself (a plain `Content-Length` reader) and parses and writes messages
//! with `utter_protocol`, rather than going through `plugin::serve`, which would not let it
//! break these rules. It serves one method of its own, `rulebreaker.echo`, which returns its
//! params.

use std::io;
use std::process::ExitCode;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use utter_protocol::frame::{DEFAULT_MAX_BODY, MAX_HEADER_BYTES, encode_frame};
use utter_protocol::handshake::{self, PROTOCOL_VERSION, methods};
use utter_protocol::message::error_response_bytes;
use utter_protocol::serde_json::{Value, json};
use utter_protocol::{ErrorCode, ErrorObject, Message, Request, Response};

/// The manifest the hello agrees with (unless `--break manifest-mismatch`).
const MANIFEST: &str = r#"# utter-rulebreaker: the plugin that breaks one protocol rule on request (tests only).
name = "rulebreaker"
version = "0.1.0"
kind = "action"
protocol = "1.0"
abi = 1
runtime = "subprocess"
transport = "stdio"
entrypoint = ["utter-rulebreaker"]
provides = ["experimental/rulebreaker@1"]
requires = []
permissions = []
"#;

/// Every rule it can break, as given to `--break`.
const RULES: &[&str] = &[
    "wrong-major",
    "accept-any-major",
    "bad-capability",
    "bad-describe",
    "bad-health",
    "manifest-mismatch",
    "unknown-method-ok",
    "malformed-silent",
    "cancel-crash",
    "ignore-eof",
];

fn usage() -> String {
    format!(
        "usage: utter-rulebreaker [--break RULE] | --print-manifest\nRULE: {}",
        RULES.join(", ")
    )
}

/// What `--break` chose (`None`: a well-behaved plugin).
struct Breaks(Option<&'static str>);

impl Breaks {
    fn is(&self, rule: &str) -> bool {
        self.0 == Some(rule)
    }
}

/// One frame body: `Ok(None)` at the end of input between frames; an error when the input
/// cannot be framed (PROTOCOL.md §1: header block at most 8 KiB, a plain decimal
/// `Content-Length`, a body of at most 16 MiB).
async fn read_frame<R: AsyncBufRead + Unpin>(reader: &mut R) -> io::Result<Option<Vec<u8>>> {
    let bad = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
    let mut length: Option<usize> = None;
    let mut header_bytes = 0usize;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut *reader)
            .take((MAX_HEADER_BYTES + 1 - header_bytes) as u64)
            .read_until(b'\n', &mut line)
            .await?;
        if n == 0 {
            return if header_bytes == 0 {
                Ok(None)
            } else {
                Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "input ended inside a header block",
                ))
            };
        }
        header_bytes += n;
        if header_bytes > MAX_HEADER_BYTES || !line.ends_with(b"\n") {
            return Err(bad(format!(
                "header block longer than {MAX_HEADER_BYTES} bytes"
            )));
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            break;
        }
        let Some((name, value)) = text.split_once(':') else {
            return Err(bad(format!("malformed header line {text:?}")));
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            let value = value.trim();
            if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad(format!("Content-Length {value:?} is not a byte count")));
            }
            length = Some(
                value
                    .parse()
                    .map_err(|_| bad(format!("Content-Length {value:?} is too large")))?,
            );
        }
    }
    let length = length.ok_or_else(|| bad("missing Content-Length header".to_owned()))?;
    if length > DEFAULT_MAX_BODY {
        return Err(bad(format!(
            "frame body of {length} bytes exceeds the {DEFAULT_MAX_BODY}-byte limit"
        )));
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).await?;
    Ok(Some(body))
}

/// The answer to one request.
fn answer(breaks: &Breaks, request: &Request) -> Result<Value, ErrorObject> {
    match request.method.as_str() {
        methods::HELLO => {
            let theirs = request
                .params
                .get("protocol")
                .and_then(Value::as_str)
                .unwrap_or("");
            let abi = request.params.get("abi").and_then(Value::as_u64);
            if !breaks.is("accept-any-major") {
                handshake::negotiate(PROTOCOL_VERSION, theirs, abi)?;
            }
            let protocol = if breaks.is("wrong-major") {
                "2.0".to_owned()
            } else {
                PROTOCOL_VERSION.to_string()
            };
            let mut provides = vec!["experimental/rulebreaker@1"];
            if breaks.is("bad-capability") {
                provides.push("Not A Capability");
            }
            if breaks.is("manifest-mismatch") {
                provides.push("router.plan@1");
            }
            let kind = if breaks.is("manifest-mismatch") {
                "router"
            } else {
                "action"
            };
            Ok(json!({
                "protocol": protocol,
                "abi": handshake::ABI,
                "plugin": {"name": "rulebreaker", "version": "0.1.0", "kind": kind},
                "transport": "stdio",
                "provides": provides,
                "requires": [],
                "permissions": [],
            }))
        }
        methods::DESCRIBE if breaks.is("bad-describe") => {
            Ok(json!({"methods": "rulebreaker.echo", "streams": {}}))
        }
        methods::DESCRIBE => Ok(json!({"methods": ["rulebreaker.echo"], "streams": []})),
        methods::HEALTH if breaks.is("bad-health") => {
            Ok(json!({"status": "fine", "detail": "all good, really"}))
        }
        methods::HEALTH => Ok(json!({"status": "ok", "detail": ""})),
        "rulebreaker.echo" => Ok(request.params.clone()),
        // `$/cancel` sent with an id is answered `{}` (PROTOCOL.md §2).
        "$/cancel" => Ok(json!({})),
        _ if breaks.is("unknown-method-ok") => Ok(json!({})),
        other => Err(ErrorObject::method_not_found(other)),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let mut breaks = Breaks(None);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--print-manifest" => {
                print!("{MANIFEST}");
                return ExitCode::SUCCESS;
            }
            "--break" => {
                let rule = args.next().unwrap_or_default();
                match RULES.iter().find(|r| **r == rule) {
                    Some(r) => breaks.0 = Some(r),
                    None => {
                        eprintln!("utter-rulebreaker: unknown rule {rule:?}\n{}", usage());
                        return ExitCode::from(2);
                    }
                }
            }
            "--help" | "-h" => {
                println!("{}", usage());
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("utter-rulebreaker: unknown option {other:?}\n{}", usage());
                return ExitCode::from(2);
            }
        }
    }
    if let Some(rule) = breaks.0 {
        eprintln!("utter-rulebreaker: breaking {rule}");
    }

    let (reader, mut writer) = utter_protocol::plugin::stdio();
    let mut reader = BufReader::new(reader);
    loop {
        let reply: Option<Vec<u8>> = match read_frame(&mut reader).await {
            Ok(None) => break,
            Err(e) => {
                // The frame boundary is lost: say so and stop (PROTOCOL.md §1).
                eprintln!("utter-rulebreaker: {e}");
                let bytes = error_response_bytes(
                    None,
                    &ErrorObject::new(ErrorCode::ParseError, format!("{e}; closing")),
                );
                let _ = writer.write_all(&encode_frame(&bytes)).await;
                let _ = writer.flush().await;
                return ExitCode::from(1);
            }
            Ok(Some(body)) => match Message::parse(&body) {
                Err(rejected)
                    if breaks.is("malformed-silent")
                        && rejected.error.kind() == ErrorCode::ParseError =>
                {
                    None
                }
                Err(rejected) => rejected.reply.then(|| rejected.to_bytes()),
                Ok(Message::Notification(note)) => {
                    if note.method == "$/cancel" && breaks.is("cancel-crash") {
                        eprintln!("utter-rulebreaker: $/cancel received; crashing, as asked");
                        return ExitCode::from(3);
                    }
                    None
                }
                Ok(Message::Response(_)) => None,
                Ok(Message::Request(request)) => {
                    if request.method == "$/cancel" && breaks.is("cancel-crash") {
                        return ExitCode::from(3);
                    }
                    let result = answer(&breaks, &request);
                    Some(
                        Message::Response(Response {
                            id: request.id,
                            result,
                        })
                        .to_bytes(),
                    )
                }
            },
        };
        if let Some(body) = reply {
            if writer.write_all(&encode_frame(&body)).await.is_err()
                || writer.flush().await.is_err()
            {
                return ExitCode::from(1);
            }
        }
    }
    if breaks.is("ignore-eof") {
        eprintln!("utter-rulebreaker: stdin closed; staying up, as asked");
        loop {
            tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
        }
    }
    ExitCode::SUCCESS
}
