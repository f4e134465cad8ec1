//! Getting the audio of one `stt.transcribe` request: from a runner handle (PROTOCOL.md §10.1)
//! read in ranged `handle.fetch` calls, or inline as `samples_b64`.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use std::time::Duration;
use utter_protocol::serde_json::{Value, json};
use utter_protocol::{Connection, ErrorObject};

/// The only sample format accepted: `audio.pcm_f32le@1`.
pub const FORMAT: &str = "audio.pcm_f32le@1";

/// The longest audio accepted, in seconds (600 s = 38.4 MB of f32 samples at 16 kHz).
pub const MAX_SECONDS: u64 = 600;

/// The largest audio accepted, in bytes.
pub const MAX_BYTES: u64 = MAX_SECONDS * crate::SAMPLE_RATE as u64 * 4;

/// Bytes asked for per ranged `handle.fetch` (the runner's inline limit).
pub const FETCH_CHUNK: u64 = 65_536;

/// How long one `handle.fetch` may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The 64 hex digits of a `handle://<sha256>` or `handle://sha256/<sha256>` reference, or a
/// `-32602` error naming `field`.
pub fn parse_handle(field: &str, handle: &str) -> Result<String, ErrorObject> {
    let hex = handle
        .strip_prefix("handle://")
        .map(|rest| rest.strip_prefix("sha256/").unwrap_or(rest));
    match hex {
        Some(hex) if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Ok(hex.to_ascii_lowercase())
        }
        _ => Err(ErrorObject::invalid_params(format!(
            "{field}: {handle:?} is not a handle; expected \"handle://<sha256 hex>\" (64 hex digits)"
        ))),
    }
}

/// Decode strict padded base64 in `field`, or a `-32602` error naming it.
pub fn decode_b64(field: &str, text: &str) -> Result<Vec<u8>, ErrorObject> {
    // 4 base64 characters carry 3 bytes; refuse oversized input before decoding it.
    if text.len() as u64 / 4 * 3 > MAX_BYTES + 3 {
        return Err(too_long(field, text.len() as u64 / 4 * 3));
    }
    BASE64.decode(text).map_err(|e| {
        ErrorObject::invalid_params(format!(
            "{field} is not valid standard base64 (padded, no whitespace): {e}"
        ))
    })
}

fn too_long(field: &str, bytes: u64) -> ErrorObject {
    ErrorObject::invalid_params(format!(
        "{field}: {bytes} bytes is {:.1} s of 16 kHz mono f32 audio; the limit is {MAX_SECONDS} s",
        bytes as f64 / 4.0 / f64::from(crate::SAMPLE_RATE)
    ))
}

/// Little-endian f32 samples from `bytes`, or a `-32602` error naming `field` when the
/// length is not a multiple of 4.
pub fn samples_from_bytes(field: &str, bytes: &[u8]) -> Result<Vec<f32>, ErrorObject> {
    if !bytes.len().is_multiple_of(4) {
        return Err(ErrorObject::invalid_params(format!(
            "{field}: {} bytes is not a whole number of 4-byte f32 samples ({FORMAT})",
            bytes.len()
        )));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

/// Read the whole blob behind `handle` from the runner with ranged `handle.fetch
/// {handle, offset, length}` calls of [`FETCH_CHUNK`] bytes (PROTOCOL.md §10.1), which work on
/// every transport. Each reply is `{data_b64, offset, length, size}`; a reply without
/// `offset` (a runner without ranged reads) is taken as the whole blob. The assembled bytes
/// must hash to the handle's SHA-256. Blobs over [`MAX_BYTES`] are refused with `-32602`
/// naming `field`; a runner error is passed on as it came.
pub async fn fetch_handle(
    peer: &Connection,
    field: &str,
    handle: &str,
) -> Result<Vec<u8>, ErrorObject> {
    let digest = parse_handle(field, handle)?;
    let mut bytes: Vec<u8> = Vec::new();
    let mut size: Option<u64> = None;
    loop {
        let offset = bytes.len() as u64;
        if size.is_some_and(|size| offset >= size) {
            break;
        }
        let reply = peer
            .request(
                "handle.fetch",
                json!({"handle": handle, "offset": offset, "length": FETCH_CHUNK}),
                Some(FETCH_TIMEOUT),
            )
            .await?;
        let total = reply
            .get("size")
            .and_then(Value::as_u64)
            .ok_or_else(|| bad_reply(handle, "no integer size"))?;
        if total > MAX_BYTES {
            return Err(too_long(field, total));
        }
        if size.is_some_and(|s| s != total) {
            return Err(bad_reply(handle, "the size changed between reads"));
        }
        size = Some(total);
        let data = reply
            .get("data_b64")
            .and_then(Value::as_str)
            .ok_or_else(|| bad_reply(handle, "no data_b64"))?;
        let data = BASE64
            .decode(data)
            .map_err(|_| bad_reply(handle, "data_b64 is not valid base64"))?;
        match reply.get("offset").and_then(Value::as_u64) {
            None => {
                // A runner without ranged reads sent the whole blob.
                bytes = data;
                break;
            }
            Some(got) if got != offset => {
                return Err(bad_reply(
                    handle,
                    "it answered another offset than asked for",
                ));
            }
            Some(_) => {}
        }
        if data.is_empty() && offset < total {
            return Err(bad_reply(
                handle,
                "an empty read before the end of the blob",
            ));
        }
        bytes.extend_from_slice(&data);
        if bytes.len() as u64 > total {
            return Err(bad_reply(handle, "more bytes than its size"));
        }
    }
    if size.is_some_and(|s| s != bytes.len() as u64) {
        return Err(bad_reply(handle, "fewer bytes than its size"));
    }
    let actual = utter_protocol::digest::sha256_hex(&bytes);
    if actual != digest {
        return Err(bad_reply(handle, &format!("the bytes hash to {actual}")));
    }
    Ok(bytes)
}

fn bad_reply(handle: &str, what: &str) -> ErrorObject {
    ErrorObject::plugin(format!(
        "reading {handle} from the runner failed: handle.fetch gave {what}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_checked() {
        let hex = "ab".repeat(32);
        assert_eq!(
            parse_handle("audio", &format!("handle://{hex}")).unwrap(),
            hex
        );
        assert_eq!(
            parse_handle("audio", &format!("handle://sha256/{hex}")).unwrap(),
            hex
        );
        let err = parse_handle("audio", "file:///etc/passwd").unwrap_err();
        assert_eq!(err.code, -32602);
        assert!(err.message.starts_with("audio: "), "{}", err.message);
    }

    #[test]
    fn samples_are_little_endian_f32() {
        let bytes: Vec<u8> = [0.5f32, -1.0]
            .iter()
            .flat_map(|s| s.to_le_bytes())
            .collect();
        assert_eq!(samples_from_bytes("x", &bytes).unwrap(), vec![0.5, -1.0]);
        let err = samples_from_bytes("samples_b64", &bytes[..7]).unwrap_err();
        assert!(
            err.message.contains("samples_b64: 7 bytes"),
            "{}",
            err.message
        );
    }

    #[test]
    fn base64_must_be_strict() {
        assert_eq!(decode_b64("f", "AAAAPw==").unwrap(), vec![0, 0, 0, 0x3f]);
        assert!(decode_b64("f", "AAAAPw").is_err());
        assert!(decode_b64("f", "AAAA Pw==").is_err());
    }
}
