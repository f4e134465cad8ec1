//! Reading named JSON-RPC params the same way on every surface (JSON-RPC 2.0 §4.2: params
//! are an object here): one wording for a missing string, a non-boolean flag, a timeout.

use serde_json::Value;
use utter_protocol::ErrorObject;

/// `params[key]` as a boolean: absent or `null` is `false`; anything but a JSON boolean is
/// refused (a string `"false"` must not be read as true, nor `"true"` as false).
///
/// # Errors
/// `-32602` naming the key.
pub fn optional_bool(params: &Value, key: &str) -> Result<bool, ErrorObject> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(ErrorObject::invalid_params(format!(
            "params.{key} must be true or false, not {other}"
        ))),
    }
}

/// `params.timeout_ms` when it is a positive integer; anything else is ignored
/// (PROTOCOL.md §7).
pub fn timeout_ms(params: &Value) -> Option<u64> {
    params
        .get("timeout_ms")
        .and_then(Value::as_u64)
        .filter(|ms| *ms > 0)
}

/// `params[key]` as a non-empty string.
///
/// # Errors
/// `-32602` naming `method` and `key`.
pub fn required_str<'a>(
    params: &'a Value,
    key: &str,
    method: &str,
) -> Result<&'a str, ErrorObject> {
    params
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| {
            ErrorObject::invalid_params(format!("{method} needs params.{key}, a non-empty string"))
        })
}
