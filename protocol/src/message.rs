//! JSON-RPC 2.0 messages (PROTOCOL.md §2; JSON-RPC 2.0 specification §4–§5).
//!
//! One message per frame. Requests carry an `id` that is a string or an integer and is echoed
//! exactly (`92` and `"92"` are different ids). Params are always named (a JSON object); an
//! absent or `null` `params` reads as `{}`. Batches (JSON arrays) are not part of the protocol
//! and are answered with `-32600`.

use crate::error::{ErrorCode, ErrorObject};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;

/// A request id: a string or an integer, echoed exactly.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    /// An integer id (`"id": 7`).
    Number(i64),
    /// A string id (`"id": "0:7"`).
    String(String),
}

impl fmt::Display for RequestId {
    /// Integers print bare, strings print quoted, so `7` and `"7"` read differently in logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::String(s) => write!(f, "{s:?}"),
        }
    }
}

impl From<i64> for RequestId {
    fn from(n: i64) -> Self {
        RequestId::Number(n)
    }
}

impl From<&str> for RequestId {
    fn from(s: &str) -> Self {
        RequestId::String(s.to_owned())
    }
}

impl RequestId {
    /// The id as a JSON value.
    pub fn to_value(&self) -> Value {
        match self {
            RequestId::Number(n) => Value::from(*n),
            RequestId::String(s) => Value::from(s.as_str()),
        }
    }

    /// Read an id from JSON: a string or an integer that fits in `i64`; anything else is `None`.
    pub fn from_value(value: &Value) -> Option<RequestId> {
        match value {
            Value::String(s) => Some(RequestId::String(s.clone())),
            Value::Number(n) => n.as_i64().map(RequestId::Number),
            _ => None,
        }
    }
}

/// The `id` of a frame that is not valid JSON but reads as a response to a request of
/// ours: `{"jsonrpc":"2.0","id":"3:7","result":{"probability":NaN}}`. A tolerant scan of the
/// object's top level finds an `"id"` key with a number or string value and no `"method"`
/// key. `None` for anything else. The reader then fails that request at once instead of
/// leaving it to its timeout: the peer did answer, just not in JSON.
pub fn salvage_response_id(text: &str) -> Option<RequestId> {
    let b = text.as_bytes();
    let ws = |mut i: usize| {
        while b.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        i
    };
    // The end of the string starting at `i` (a `"`): the index after its closing quote.
    let string_end = |mut i: usize| -> Option<usize> {
        i += 1;
        while let Some(&c) = b.get(i) {
            match c {
                b'\\' => i += 2,
                b'"' => return Some(i + 1),
                _ => i += 1,
            }
        }
        None
    };
    let mut i = ws(0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    let mut id = None;
    loop {
        i = ws(i);
        match b.get(i)? {
            b'}' => break,
            b',' => {
                i += 1;
                continue;
            }
            b'"' => {}
            _ => return None,
        }
        let key_end = string_end(i)?;
        let key = &text[i + 1..key_end - 1];
        i = ws(key_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = ws(i + 1);
        let start = i;
        // Skip the value: strings whole, nested brackets counted.
        let mut depth = 0usize;
        while let Some(&c) = b.get(i) {
            match c {
                b'"' => {
                    i = string_end(i)?;
                    continue;
                }
                b'{' | b'[' => depth += 1,
                b'}' | b']' if depth == 0 => break,
                b'}' | b']' => depth -= 1,
                b',' if depth == 0 => break,
                _ => {}
            }
            i += 1;
        }
        let value = text[start..i].trim();
        match key {
            "method" => return None,
            "id" => {
                id = if value.starts_with('"') {
                    serde_json::from_str::<String>(value)
                        .ok()
                        .map(RequestId::String)
                } else {
                    value.parse::<i64>().ok().map(RequestId::Number)
                };
            }
            _ => {}
        }
    }
    id
}

/// A request: a method call that expects exactly one response with the same id.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The id to echo in the response.
    pub id: RequestId,
    /// The method name, e.g. `"router.plan"`.
    pub method: String,
    /// Named params, always a JSON object.
    pub params: Value,
}

/// A notification: a method call without an id; it is never answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    /// The method name, e.g. `"$/cancel"`.
    pub method: String,
    /// Named params, always a JSON object.
    pub params: Value,
}

/// A response: the result of a request, or its error.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The id of the request this answers.
    pub id: RequestId,
    /// `Ok(result)` or `Err(error object)`.
    pub result: Result<Value, ErrorObject>,
}

/// Any JSON-RPC message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A request.
    Request(Request),
    /// A notification.
    Notification(Notification),
    /// A response.
    Response(Response),
}

/// A message that could not be read. `reply` is the error response to send back, when one
/// can be sent (never for a broken notification or response).
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    /// The id to answer: the request's id when it could be read, else `None` (sent as `null`).
    pub id: Option<RequestId>,
    /// The error to report.
    pub error: ErrorObject,
    /// Whether an error response should be sent.
    pub reply: bool,
    /// This is not a malformed message but the peer's `{"id": null, "error": ...}` report
    /// about a message of ours it could not read.
    pub peer_report: bool,
    /// A batch (JSON array): the id of each member to answer, `None` (`null`) for one whose
    /// id could not be read; notifications in it are not answered. The reply is the array
    /// of one error response each (JSON-RPC 2.0 §6), `error` in every one.
    pub batch: Option<Vec<Option<RequestId>>>,
}

/// The most members of a batch answered one by one (each with its error); a larger batch
/// gets one error.
pub const MAX_BATCH: usize = 64;

impl Rejected {
    fn new(id: Option<RequestId>, code: ErrorCode, message: impl Into<String>) -> Rejected {
        Rejected {
            id,
            error: ErrorObject::new(code, message),
            reply: true,
            peer_report: false,
            batch: None,
        }
    }

    /// The error response frame body for this rejection (`id` is `null` when unknown); for
    /// a batch, the array of one error response per member answered.
    pub fn to_bytes(&self) -> Vec<u8> {
        match &self.batch {
            None => error_response_bytes(self.id.as_ref(), &self.error),
            Some(ids) => {
                let mut out = b"[".to_vec();
                for (i, id) in ids.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(&error_response_bytes(id.as_ref(), &self.error));
                }
                out.push(b']');
                out
            }
        }
    }
}

fn params_of(obj: &mut Map<String, Value>) -> Result<Value, &'static str> {
    match obj.remove("params") {
        None | Some(Value::Null) => Ok(Value::Object(Map::new())),
        Some(v @ Value::Object(_)) => Ok(v),
        Some(Value::Array(_)) => Err(
            "params must be an object of named parameters; positional (array) params are not used by this protocol",
        ),
        Some(_) => Err("params must be an object of named parameters"),
    }
}

impl Message {
    /// Parse a frame body.
    ///
    /// # Errors
    /// `-32700` for bytes that are not UTF-8 JSON; `-32600` for JSON that is not a JSON-RPC 2.0
    /// message object (a batch array, a scalar, a missing or wrong `"jsonrpc": "2.0"`, an id
    /// that is neither a string nor an integer, a non-string method); `-32602` for a request
    /// whose params are not an object. Errors in notifications and responses are returned
    /// with `reply == false`, since those cannot be answered.
    pub fn parse(body: &[u8]) -> Result<Message, Rejected> {
        let text = std::str::from_utf8(body).map_err(|e| {
            Rejected::new(
                None,
                ErrorCode::ParseError,
                format!(
                    "frame body is not valid UTF-8 (first bad byte at offset {})",
                    e.valid_up_to()
                ),
            )
        })?;
        // A batch is never served, so a large one is not read into memory member by member
        // (an array of eight million numbers would be a gigabyte): counted without keeping
        // its members, and past MAX_BATCH answered with one error.
        if text.trim_start().starts_with('[')
            && let Ok(members) = serde_json::from_str::<Vec<serde::de::IgnoredAny>>(text)
            && members.len() > MAX_BATCH
        {
            return Err(Rejected::new(
                None,
                ErrorCode::InvalidRequest,
                format!(
                    "a batch of {} members: batch requests are not served, and a batch of more than {MAX_BATCH} is not answered member by member; send one JSON-RPC message per frame",
                    members.len()
                ),
            ));
        }
        let value: Value = serde_json::from_str(text).map_err(|e| {
            Rejected::new(
                None,
                ErrorCode::ParseError,
                format!("frame body is not valid JSON: {e}"),
            )
        })?;
        Message::from_value(value)
    }

    /// Classify a parsed JSON value; see [`Message::parse`] for the errors.
    pub fn from_value(value: Value) -> Result<Message, Rejected> {
        let mut obj = match value {
            Value::Object(obj) => obj,
            // JSON-RPC 2.0 §6: an empty batch is one invalid request; otherwise every member
            // that is not a notification is answered, in an array (none at all when all are
            // notifications). Batches are not served here: each answer says so.
            Value::Array(members) => {
                let message = "batch requests are not served: send one JSON-RPC message per frame";
                if members.is_empty() {
                    return Err(Rejected::new(None, ErrorCode::InvalidRequest, message));
                }
                let ids: Vec<Option<RequestId>> = members
                    .iter()
                    .filter(|m| {
                        // A notification: an object with a method and no id.
                        !(m.get("method").is_some() && m.get("id").is_none())
                    })
                    .map(|m| m.get("id").and_then(RequestId::from_value))
                    .collect();
                return Err(Rejected {
                    id: None,
                    error: ErrorObject::new(ErrorCode::InvalidRequest, message),
                    reply: !ids.is_empty(),
                    peer_report: false,
                    batch: Some(ids),
                });
            }
            other => {
                return Err(Rejected::new(
                    None,
                    ErrorCode::InvalidRequest,
                    format!(
                        "a JSON-RPC message must be an object, got {}",
                        kind_of(&other)
                    ),
                ));
            }
        };
        let raw_id = obj.remove("id");
        let id = raw_id.as_ref().and_then(RequestId::from_value);
        let has_method = obj.contains_key("method");
        // Requests are answered; a broken notification or response is just logged (answering
        // a response could start an endless exchange). An object that is neither (`{}`, no
        // method, no result, no error) is answered too, with `id: null` when it has none.
        let response_shaped = obj.contains_key("result") || obj.contains_key("error");
        let answerable = has_method && raw_id.is_some() || !has_method && !response_shaped;
        let reject = |code, msg: String| Rejected {
            id: id.clone(),
            error: ErrorObject::new(code, msg),
            reply: answerable,
            peer_report: false,
            batch: None,
        };

        match obj.get("jsonrpc") {
            Some(Value::String(v)) if v == "2.0" => {}
            Some(other) => {
                return Err(reject(
                    ErrorCode::InvalidRequest,
                    format!("\"jsonrpc\" must be \"2.0\", got {other}"),
                ));
            }
            None => {
                return Err(reject(
                    ErrorCode::InvalidRequest,
                    "missing \"jsonrpc\": \"2.0\"".to_owned(),
                ));
            }
        }
        let null_id_error_report =
            !has_method && raw_id == Some(Value::Null) && obj.contains_key("error");
        if let Some(raw) = &raw_id {
            if id.is_none() && !null_id_error_report {
                return Err(reject(
                    ErrorCode::InvalidRequest,
                    format!(
                        "\"id\" must be a string or an integer, got {}",
                        kind_of(raw)
                    ),
                ));
            }
        }

        if has_method {
            let method = match obj.remove("method") {
                Some(Value::String(m)) if !m.is_empty() => m,
                Some(other) => {
                    return Err(reject(
                        ErrorCode::InvalidRequest,
                        format!("\"method\" must be a non-empty string, got {other}"),
                    ));
                }
                None => unreachable!("checked above"),
            };
            let params = params_of(&mut obj)
                .map_err(|msg| reject(ErrorCode::InvalidParams, format!("{method}: {msg}")))?;
            return Ok(match id {
                Some(id) => Message::Request(Request { id, method, params }),
                None => Message::Notification(Notification { method, params }),
            });
        }

        let Some(id) = id else {
            // `{"id": null, "error": ...}` is how a peer reports a message of ours it could not
            // read (JSON-RPC 2.0 §5); pass its error on for the log.
            if matches!(raw_id, Some(Value::Null)) {
                if let Some(err) = obj.remove("error") {
                    let err = parse_error_object(err);
                    return Err(Rejected {
                        id: None,
                        error: ErrorObject {
                            message: format!("the peer could not read a message: {}", err.message),
                            ..err
                        },
                        reply: false,
                        peer_report: true,
                        batch: None,
                    });
                }
            }
            return Err(Rejected {
                id: None,
                error: ErrorObject::new(
                    ErrorCode::InvalidRequest,
                    "a message with neither \"method\" nor \"id\" is neither a request nor a response",
                ),
                reply: answerable,
                peer_report: false,
                batch: None,
            });
        };
        let result = match (obj.remove("result"), obj.remove("error")) {
            (_, Some(err)) => Err(parse_error_object(err)),
            (Some(result), None) => Ok(result),
            (None, None) => Ok(Value::Null),
        };
        Ok(Message::Response(Response { id, result }))
    }

    /// Serialise to compact JSON bytes (the frame body).
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&self.to_value()).expect("JSON values always serialise")
    }

    /// The message as a JSON value.
    pub fn to_value(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("jsonrpc".into(), "2.0".into());
        match self {
            Message::Request(r) => {
                obj.insert("id".into(), r.id.to_value());
                obj.insert("method".into(), r.method.clone().into());
                obj.insert("params".into(), r.params.clone());
            }
            Message::Notification(n) => {
                obj.insert("method".into(), n.method.clone().into());
                obj.insert("params".into(), n.params.clone());
            }
            Message::Response(r) => {
                obj.insert("id".into(), r.id.to_value());
                match &r.result {
                    Ok(v) => obj.insert("result".into(), v.clone()),
                    Err(e) => obj.insert(
                        "error".into(),
                        serde_json::to_value(e).expect("error objects serialise"),
                    ),
                };
            }
        }
        Value::Object(obj)
    }
}

/// Read an error object leniently: a code that is not an integer becomes `-32000`, a missing
/// message becomes `"plugin error"`, `data` passes through.
fn parse_error_object(err: Value) -> ErrorObject {
    let code = err
        .get("code")
        .and_then(Value::as_i64)
        .unwrap_or(ErrorCode::PluginError.code());
    let message = match err.get("message") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => "plugin error".to_owned(),
    };
    ErrorObject {
        code,
        message,
        data: err.get("data").cloned().filter(|d| !d.is_null()),
    }
}

/// What kind of JSON `v` is, in words; a number as an id would read it (an id is an
/// integer that fits 64 bits).
fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() => "a number",
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() != 0.0) => "a fractional number",
        Value::Number(_) => "an integer too large for an id",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The body of an error response; `id` `None` is sent as `null` (JSON-RPC 2.0 §5).
pub fn error_response_bytes(id: Option<&RequestId>, error: &ErrorObject) -> Vec<u8> {
    let value = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id.map(RequestId::to_value).unwrap_or(Value::Null),
        "error": error,
    });
    serde_json::to_vec(&value).expect("JSON values always serialise")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<Message, Rejected> {
        Message::parse(&serde_json::to_vec(&v).unwrap())
    }

    #[test]
    fn ids_are_echoed_exactly() {
        for id in [
            json!(7),
            json!("7"),
            json!("0:12"),
            json!(-3),
            json!(i64::MAX),
        ] {
            let msg = parse(json!({"jsonrpc":"2.0","id":id,"method":"m"})).unwrap();
            let Message::Request(req) = msg else { panic!() };
            let reply = Message::Response(Response {
                id: req.id,
                result: Ok(json!(null)),
            });
            assert_eq!(reply.to_value()["id"], id);
        }
    }

    #[test]
    fn absent_or_null_params_read_as_empty_object() {
        for msg in [
            json!({"jsonrpc":"2.0","id":1,"method":"m"}),
            json!({"jsonrpc":"2.0","id":1,"method":"m","params":null}),
        ] {
            let Message::Request(r) = parse(msg).unwrap() else {
                panic!()
            };
            assert_eq!(r.params, json!({}));
        }
    }

    #[test]
    fn positional_params_are_invalid_params_with_the_id() {
        let err = parse(json!({"jsonrpc":"2.0","id":"a","method":"m","params":[1]})).unwrap_err();
        assert_eq!(err.error.code, -32602);
        assert_eq!(err.id, Some(RequestId::from("a")));
        assert!(err.reply);
    }

    #[test]
    fn batch_and_scalars_are_invalid_requests() {
        for v in [
            json!([{"jsonrpc":"2.0","id":1,"method":"m"}]),
            json!(3),
            json!("x"),
        ] {
            let err = parse(v).unwrap_err();
            assert_eq!(err.error.code, -32600);
            assert_eq!(err.id, None);
        }
    }

    /// A number is named as what it is: a body of 42 is "a number", an id past 64 bits
    /// "an integer too large for an id".
    #[test]
    fn numbers_are_named_as_they_are() {
        let err = Message::parse(b"42").unwrap_err();
        assert!(
            err.error.message.ends_with("got a number"),
            "{}",
            err.error.message
        );
        let err = Message::parse(br#"{"jsonrpc":"2.0","id":18446744073709551616,"method":"m"}"#)
            .unwrap_err();
        assert!(
            err.error.message.contains("too large for an id"),
            "{}",
            err.error.message
        );
        let err = Message::parse(br#"{"jsonrpc":"2.0","id":1.5,"method":"m"}"#).unwrap_err();
        assert!(
            err.error.message.contains("fractional"),
            "{}",
            err.error.message
        );
    }

    /// A batch past [`MAX_BATCH`] members gets one error, however large.
    #[test]
    fn a_large_batch_gets_one_answer() {
        let body = format!("[{}1]", "1,".repeat(100_000));
        let err = Message::parse(body.as_bytes()).unwrap_err();
        assert!(err.batch.is_none() && err.reply, "{err:?}");
        assert_eq!(err.error.code, -32600);
        assert!(
            err.error.message.contains("100001 members"),
            "{}",
            err.error.message
        );
        assert!(err.to_bytes().len() < 400);
    }

    /// JSON-RPC 2.0 §6: each request of a batch is answered (with "not served"), its
    /// notifications are not, an empty batch is one invalid request, and a batch of
    /// notifications alone gets no answer.
    #[test]
    fn a_batch_gets_one_answer_per_request() {
        let err = parse(json!([
            {"jsonrpc":"2.0","id":1,"method":"m"},
            {"jsonrpc":"2.0","method":"note"},
            {"jsonrpc":"2.0","id":"b","method":"m"},
            5
        ]))
        .unwrap_err();
        assert!(err.reply);
        let answer: Value = serde_json::from_slice(&err.to_bytes()).unwrap();
        let ids: Vec<&Value> = answer
            .as_array()
            .unwrap()
            .iter()
            .map(|r| &r["id"])
            .collect();
        assert_eq!(ids, [&json!(1), &json!("b"), &Value::Null]);
        assert!(
            answer
                .as_array()
                .unwrap()
                .iter()
                .all(|r| r["error"]["code"] == -32600)
        );
        let empty = parse(json!([])).unwrap_err();
        assert!(empty.reply && empty.batch.is_none());
        let notes = parse(json!([{"jsonrpc":"2.0","method":"note"}])).unwrap_err();
        assert!(!notes.reply);
    }

    /// `{}` and other objects that are neither a request nor a response are answered with
    /// -32600 and `id: null`; a broken response or notification is not (no endless replies).
    #[test]
    fn an_object_that_is_no_message_is_answered() {
        for v in [json!({}), json!({"jsonrpc":"2.0"}), json!({"foo": 1})] {
            let err = parse(v.clone()).unwrap_err();
            assert!(err.reply, "{v}");
            assert_eq!((err.error.code, err.id), (-32600, None), "{v}");
        }
        for v in [
            json!({"result": 1}),
            json!({"jsonrpc":"1.0","id":1,"result":1}),
            json!({"method":"m"}),
        ] {
            assert!(!parse(v.clone()).unwrap_err().reply, "{v}");
        }
    }

    #[test]
    fn invalid_json_and_utf8_are_parse_errors() {
        assert_eq!(Message::parse(b"{\"a\":").unwrap_err().error.code, -32700);
        assert_eq!(
            Message::parse(b"\xff\xfe{}").unwrap_err().error.code,
            -32700
        );
        assert_eq!(Message::parse(b"").unwrap_err().error.code, -32700);
    }

    #[test]
    fn bad_ids_and_versions_are_rejected() {
        for (v, code) in [
            (json!({"jsonrpc":"2.0","id":1.5,"method":"m"}), -32600),
            (json!({"jsonrpc":"2.0","id":true,"method":"m"}), -32600),
            (json!({"jsonrpc":"2.0","id":[1],"method":"m"}), -32600),
            (json!({"jsonrpc":"2.0","id":null,"method":"m"}), -32600),
            (json!({"jsonrpc":"1.0","id":1,"method":"m"}), -32600),
            (json!({"id":1,"method":"m"}), -32600),
            (json!({"jsonrpc":"2.0","id":1,"method":5}), -32600),
        ] {
            let err = parse(v.clone()).unwrap_err();
            assert_eq!(err.error.code, code, "{v}");
            assert!(err.reply, "{v}");
        }
    }

    #[test]
    fn notifications_and_responses_classify() {
        assert!(matches!(
            parse(json!({"jsonrpc":"2.0","method":"$/cancel","params":{"id":3}})).unwrap(),
            Message::Notification(_)
        ));
        let Message::Response(r) =
            parse(json!({"jsonrpc":"2.0","id":"0:1","error":{"code":"x"}})).unwrap()
        else {
            panic!()
        };
        let err = r.result.unwrap_err();
        assert_eq!((err.code, err.message.as_str()), (-32000, "plugin error"));
    }

    #[test]
    fn a_null_id_error_is_read_as_the_peer_s_report() {
        let err =
            parse(json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad json"}}))
                .unwrap_err();
        assert_eq!(err.error.code, -32700);
        assert!(
            err.error
                .message
                .contains("could not read a message: bad json")
        );
        assert!(!err.reply && err.peer_report);
    }

    #[test]
    fn rejected_replies_carry_null_id_when_unknown() {
        let err = Message::parse(b"nope").unwrap_err();
        let v: Value = serde_json::from_slice(&err.to_bytes()).unwrap();
        assert_eq!(v["id"], Value::Null);
        assert_eq!(v["error"]["code"], -32700);
    }
    #[test]
    fn a_response_that_is_not_json_still_names_its_id() {
        assert_eq!(
            salvage_response_id(
                r#"{"jsonrpc":"2.0","id":"3:7","result":{"choice_id":"a","probability":NaN}}"#
            ),
            Some(RequestId::String("3:7".into()))
        );
        assert_eq!(
            salvage_response_id(r#"{"result": [1, {"x": "}\"],"}], "id": 12}"#),
            Some(RequestId::Number(12))
        );
        // A request is not a response; garbage names nothing.
        assert_eq!(
            salvage_response_id(r#"{"id":1,"method":"x","params":NaN}"#),
            None
        );
        assert_eq!(salvage_response_id("NaN"), None);
        assert_eq!(
            salvage_response_id(r#"{"id": null, "error": Infinity}"#),
            None
        );
        assert_eq!(salvage_response_id(r#"{"id":"unterminated"#), None);
        assert_eq!(salvage_response_id(""), None);
    }
}
