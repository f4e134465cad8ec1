//! JSON-RPC error codes and the error object (PROTOCOL.md §6).
//!
//! The standard codes come from the JSON-RPC 2.0 specification §5.1; the `-32000..=-32007`
//! range is Utter's own, fixed by the plugin protocol and shared with the older runner.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

/// A JSON-RPC error code known to the Utter protocol.
///
/// Codes outside this list may still travel on the wire (a plugin may send any integer);
/// they are kept as [`ErrorObject::code`] and map to [`ErrorCode::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// `-32700`: the frame body is not valid UTF-8 JSON, or the framing itself is broken.
    ParseError,
    /// `-32600`: valid JSON, but not a JSON-RPC 2.0 request object (bad `jsonrpc`, bad `id`,
    /// a batch array, a scalar).
    InvalidRequest,
    /// `-32601`: the method is not served here.
    MethodNotFound,
    /// `-32602`: the params are missing, of the wrong shape or have wrong values.
    InvalidParams,
    /// `-32603`: the receiver failed in a way that is not the caller's fault.
    InternalError,
    /// `-32000`: a plugin failed, crashed, or is not running.
    PluginError,
    /// `-32001`: the call ran past its `timeout_ms`.
    Timeout,
    /// `-32002`: the call was cancelled with `$/cancel` or by its caller going away.
    Cancelled,
    /// `-32003`: denied by policy (op disabled, scheme not allowed, confirmation denied,
    /// authentication required).
    Denied,
    /// `-32004`: protocol major or abi mismatch.
    IncompatibleVersion,
    /// `-32005`: a required capability is missing or unavailable.
    CapabilityMissing,
    /// `-32006`: an argument was authored by untrusted (screen) provenance.
    UntrustedArgument,
    /// `-32007`: a handle is too large to return inline.
    HandleTooLarge,
    /// Any other integer code.
    Other(i64),
}

impl ErrorCode {
    /// The integer sent on the wire.
    pub fn code(self) -> i64 {
        match self {
            ErrorCode::ParseError => -32700,
            ErrorCode::InvalidRequest => -32600,
            ErrorCode::MethodNotFound => -32601,
            ErrorCode::InvalidParams => -32602,
            ErrorCode::InternalError => -32603,
            ErrorCode::PluginError => -32000,
            ErrorCode::Timeout => -32001,
            ErrorCode::Cancelled => -32002,
            ErrorCode::Denied => -32003,
            ErrorCode::IncompatibleVersion => -32004,
            ErrorCode::CapabilityMissing => -32005,
            ErrorCode::UntrustedArgument => -32006,
            ErrorCode::HandleTooLarge => -32007,
            ErrorCode::Other(code) => code,
        }
    }

    /// The code for an integer received on the wire.
    pub fn from_code(code: i64) -> ErrorCode {
        match code {
            -32700 => ErrorCode::ParseError,
            -32600 => ErrorCode::InvalidRequest,
            -32601 => ErrorCode::MethodNotFound,
            -32602 => ErrorCode::InvalidParams,
            -32603 => ErrorCode::InternalError,
            -32000 => ErrorCode::PluginError,
            -32001 => ErrorCode::Timeout,
            -32002 => ErrorCode::Cancelled,
            -32003 => ErrorCode::Denied,
            -32004 => ErrorCode::IncompatibleVersion,
            -32005 => ErrorCode::CapabilityMissing,
            -32006 => ErrorCode::UntrustedArgument,
            -32007 => ErrorCode::HandleTooLarge,
            other => ErrorCode::Other(other),
        }
    }

    /// A short lowercase name, used in logs and CLI output (`"timeout"`, `"denied"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::ParseError => "parse error",
            ErrorCode::InvalidRequest => "invalid request",
            ErrorCode::MethodNotFound => "method not found",
            ErrorCode::InvalidParams => "invalid params",
            ErrorCode::InternalError => "internal error",
            ErrorCode::PluginError => "plugin error",
            ErrorCode::Timeout => "timeout",
            ErrorCode::Cancelled => "cancelled",
            ErrorCode::Denied => "denied by policy",
            ErrorCode::IncompatibleVersion => "incompatible version",
            ErrorCode::CapabilityMissing => "capability missing",
            ErrorCode::UntrustedArgument => "untrusted argument",
            ErrorCode::HandleTooLarge => "handle too large",
            ErrorCode::Other(_) => "error",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.code(), self.name())
    }
}

/// The JSON-RPC error object: `{"code": int, "message": str, "data"?: any}`.
///
/// `data` is omitted from the wire when it is `None`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{message} [{code}]")]
pub struct ErrorObject {
    /// The integer code; see [`ErrorCode`].
    pub code: i64,
    /// A human-readable message that says what went wrong and, where possible, what to fix.
    pub message: String,
    /// Structured detail (`{"id": ...}` for timeouts, `{"missing": [...]}` for -32005, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    /// An error with `code` and `message` and no `data`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ErrorObject {
        ErrorObject {
            code: code.code(),
            message: message.into(),
            data: None,
        }
    }

    /// The same error with `data` attached.
    pub fn with_data(mut self, data: Value) -> ErrorObject {
        self.data = Some(data);
        self
    }

    /// The typed code.
    pub fn kind(&self) -> ErrorCode {
        ErrorCode::from_code(self.code)
    }

    /// `-32602` with `message`.
    pub fn invalid_params(message: impl Into<String>) -> ErrorObject {
        ErrorObject::new(ErrorCode::InvalidParams, message)
    }

    /// `-32601` naming the method.
    pub fn method_not_found(method: &str) -> ErrorObject {
        ErrorObject::new(
            ErrorCode::MethodNotFound,
            format!("method not found: {}", crate::text::clip(method, 200)),
        )
    }

    /// `-32603` with `message`.
    pub fn internal(message: impl Into<String>) -> ErrorObject {
        ErrorObject::new(ErrorCode::InternalError, message)
    }

    /// `-32000` with `message`.
    pub fn plugin(message: impl Into<String>) -> ErrorObject {
        ErrorObject::new(ErrorCode::PluginError, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for code in [
            -32700, -32600, -32601, -32602, -32603, -32000, -32001, -32002, -32003,
        ]
        .into_iter()
        .chain(-32007..=-32004)
        .chain([7, -1])
        {
            assert_eq!(ErrorCode::from_code(code).code(), code);
        }
        assert_eq!(ErrorCode::from_code(-32006), ErrorCode::UntrustedArgument);
    }

    #[test]
    fn data_is_omitted_when_absent() {
        let text = serde_json::to_string(&ErrorObject::new(ErrorCode::Timeout, "slow")).unwrap();
        assert_eq!(text, r#"{"code":-32001,"message":"slow"}"#);
    }
}
