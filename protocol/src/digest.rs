//! SHA-256 digests as lowercase hex (FIPS 180-4): the names of content-addressed handles
//! (`handle://sha256:<hex>`, PROTOCOL.md §10.1) and the digests confirmations and candidates are
//! bound to, over canonical JSON (object keys sorted by their bytes, no whitespace).

use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use std::fmt::Write as _;

use crate::Provenance;

/// SHA-256 of `bytes`: 64 lowercase hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let mut hasher = Sha256Hex::default();
    hasher.update(bytes);
    hasher.finish()
}

/// SHA-256 of the file at `path`, read in 64 KiB pieces: 64 lowercase hex digits.
///
/// # Errors
/// The error of opening or reading the file.
pub fn sha256_file(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read as _;
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256Hex::default();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok(hasher.finish());
        }
        hasher.update(&buf[..n]);
    }
}

/// An incremental SHA-256 whose [`Sha256Hex::finish`] is [`sha256_hex`] of everything fed.
#[derive(Default)]
pub struct Sha256Hex(Sha256);

impl Sha256Hex {
    /// Feed more bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The hex digest.
    pub fn finish(self) -> String {
        self.0
            .finalize()
            .iter()
            .fold(String::with_capacity(64), |mut s, b| {
                let _ = write!(s, "{b:02x}");
                s
            })
    }
}

/// Strip an `action.` prefix: `action.open_url` and `open_url` are the same op.
pub fn normalise_op(op: &str) -> &str {
    op.strip_prefix("action.").unwrap_or(op)
}

/// Canonical JSON: object keys sorted by their UTF-8 bytes at every level, no whitespace,
/// strings and numbers as `serde_json` writes them. Two values that are equal as JSON have the
/// same canonical text whatever order their maps were built in.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                if let Some(v) = map.get(key) {
                    write_canonical(v, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// The SHA-256 (lowercase hex) of the canonical JSON of `value`.
pub fn value_digest(value: &Value) -> String {
    sha256_hex(canonical_json(value).as_bytes())
}

/// The digest a confirmation and a candidate are bound to: SHA-256 over the canonical JSON of
/// `{op, args, provenance}`.
pub fn step_digest(op: &str, args: &Value, provenance: Provenance) -> String {
    value_digest(&json!({"op": normalise_op(op), "args": args, "provenance": provenance.as_str()}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let mut h = Sha256Hex::default();
        h.update(b"a");
        h.update(b"bc");
        assert_eq!(h.finish(), sha256_hex(b"abc"));
    }
}
