//! `Content-Length` framing, the LSP base protocol (PROTOCOL.md §1).
//!
//! A frame is a header block of `Name: value` lines, each ended by `\r\n`, then an empty line,
//! then exactly `Content-Length` bytes of body (lines ended by a bare `\n` are read too, as LSP
//! readers commonly do, so such a peer is answered rather than left waiting):
//!
//! ```text
//! Content-Length: 46\r\n
//! \r\n
//! {"jsonrpc":"2.0","id":1,"method":"plugin.health"}
//! ```
//!
//! The header name is matched case-insensitively and every other header is ignored. The
//! header block (terminator included) is at most [`MAX_HEADER_BYTES`]; the body is at most
//! [`FrameCodec::max_body`] bytes (16 MiB by default), and that limit is checked *before* any
//! memory is reserved for the body. An oversized body is skipped without being buffered, so
//! the stream stays in step and the peer can be told with a `-32700` reply.

use bytes::{Buf, Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

/// The largest header block accepted, terminator included: 8 KiB.
pub const MAX_HEADER_BYTES: usize = 8 * 1024;

/// The default body limit: 16 MiB.
pub const DEFAULT_MAX_BODY: usize = 16 * 1024 * 1024;

/// The largest oversized body the decoder skips to find the next frame (1 GiB): a larger
/// declared length is a broken peer, and the connection is closed instead.
pub const MAX_SKIPPABLE: u64 = 1 << 30;

/// What the decoder yields for each frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InboundFrame {
    /// A complete body, not yet checked for UTF-8 or JSON.
    Body(Bytes),
    /// A frame whose declared body was larger than the limit. Its bytes are skipped as they
    /// arrive (never buffered), so the next frame decodes normally.
    Oversized {
        /// The `Content-Length` the peer declared, in bytes.
        declared: u64,
        /// The limit in force, in bytes.
        limit: usize,
    },
}

/// A framing error after which the byte stream cannot be trusted any more: the frame
/// boundary is lost, so the connection has to be closed (and a plugin restarted).
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// No empty line ends the header block within the first 8 KiB.
    #[error("header block longer than {MAX_HEADER_BYTES} bytes (or no blank line ends it)")]
    HeaderTooLarge,
    /// The header block has no `Content-Length`.
    #[error("missing Content-Length header")]
    MissingContentLength,
    /// `Content-Length` is not a plain decimal number.
    #[error("Content-Length is not a decimal byte count: {0:?}")]
    BadContentLength(String),
    /// `Content-Length` appears twice with different values.
    #[error("conflicting Content-Length headers: {0} and {1}")]
    ConflictingContentLength(u64, u64),
    /// A header line has no `:` or is not ASCII.
    #[error("malformed header line: {0:?}")]
    BadHeaderLine(String),
    /// `Content-Length` declares more than any peer would send ([`MAX_SKIPPABLE`] or 16
    /// times the limit, whichever is larger): skipping it would swallow every later frame.
    #[error("Content-Length {0} is beyond any frame this connection skips; closing")]
    AbsurdContentLength(u64),
    /// The stream ended in the middle of a frame.
    #[error("stream ended in the middle of a frame ({0} bytes pending)")]
    Truncated(usize),
    /// The body to be written is larger than the limit.
    #[error("outgoing body of {size} bytes exceeds the {limit}-byte limit")]
    OutgoingTooLarge {
        /// Body size in bytes.
        size: usize,
        /// Limit in bytes.
        limit: usize,
    },
    /// Reading or writing the underlying stream failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// An inbound body limit, in bytes, that can change while a reader runs: a server keeps
/// it small for a peer that has not authenticated yet and raises it afterwards, so a peer
/// that never authenticates cannot make it buffer large bodies. Clones share the value.
#[derive(Debug, Clone)]
pub struct BodyLimit(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl BodyLimit {
    /// A limit of `bytes`.
    pub fn new(bytes: usize) -> BodyLimit {
        BodyLimit(std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(
            bytes,
        )))
    }

    /// The limit now, in bytes.
    pub fn get(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Change the limit; it applies from the next frame header read.
    pub fn set(&self, bytes: usize) {
        self.0.store(bytes, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The tokio codec for `Content-Length` frames. Decodes to [`InboundFrame`], encodes bodies
/// given as [`Bytes`].
#[derive(Debug, Clone)]
pub struct FrameCodec {
    max_body: usize,
    /// A changing inbound limit, never above `max_body` (see [`BodyLimit`]).
    inbound: Option<BodyLimit>,
    /// Bytes of an oversized body still to be skipped.
    discard: u64,
}

impl Default for FrameCodec {
    fn default() -> Self {
        FrameCodec::new(DEFAULT_MAX_BODY)
    }
}

impl FrameCodec {
    /// A codec with a body limit of `max_body` bytes.
    pub fn new(max_body: usize) -> FrameCodec {
        FrameCodec {
            max_body,
            inbound: None,
            discard: 0,
        }
    }

    /// The same codec, decoding with the limit `inbound` holds at each frame header (capped
    /// at the codec's own limit); encoding keeps the codec's own limit.
    pub fn with_inbound_limit(mut self, inbound: BodyLimit) -> FrameCodec {
        self.inbound = Some(inbound);
        self
    }

    /// The body limit in bytes (of decoding, at this moment).
    pub fn max_body(&self) -> usize {
        match &self.inbound {
            Some(limit) => limit.get().min(self.max_body),
            None => self.max_body,
        }
    }

    /// Whether the decoder is inside an oversized body it skips (more of it is expected).
    pub fn skipping(&self) -> bool {
        self.discard > 0
    }
}

/// Where the header block ends: the first empty line, as (the block's length, the length
/// up to the body). Lines end in `\r\n` or in a bare `\n`. `None` until one is buffered.
fn find_terminator(buf: &[u8]) -> Option<(usize, usize)> {
    // An empty first line: an empty header block.
    if buf.starts_with(b"\n") {
        return Some((0, 1));
    }
    if buf.starts_with(b"\r\n") {
        return Some((0, 2));
    }
    let mut from = 0;
    while let Some(offset) = buf[from..].iter().position(|&b| b == b'\n') {
        let newline = from + offset;
        // The line that ended here ended at its `\r`, if it has one.
        let block = if newline > 0 && buf[newline - 1] == b'\r' {
            newline - 1
        } else {
            newline
        };
        let rest = &buf[newline + 1..];
        if rest.starts_with(b"\n") {
            return Some((block, newline + 2));
        }
        if rest.starts_with(b"\r\n") {
            return Some((block, newline + 3));
        }
        if rest.is_empty() || rest == b"\r" {
            return None;
        }
        from = newline + 1;
    }
    None
}

/// Parse a header block (without its terminator) and return the body length.
fn content_length(block: &[u8]) -> Result<u64, FrameError> {
    let mut found: Option<u64> = None;
    for line in block.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        let text = std::str::from_utf8(line)
            .map_err(|_| FrameError::BadHeaderLine(String::from_utf8_lossy(line).into_owned()))?;
        let Some((name, value)) = text.split_once(':') else {
            return Err(FrameError::BadHeaderLine(text.to_owned()));
        };
        if !name.trim().eq_ignore_ascii_case("content-length") {
            continue;
        }
        let value = value.trim();
        if value.is_empty() || value.len() > 19 || !value.bytes().all(|b| b.is_ascii_digit()) {
            return Err(FrameError::BadContentLength(value.to_owned()));
        }
        let n: u64 = value
            .parse()
            .map_err(|_| FrameError::BadContentLength(value.to_owned()))?;
        match found {
            Some(prev) if prev != n => return Err(FrameError::ConflictingContentLength(prev, n)),
            _ => found = Some(n),
        }
    }
    found.ok_or(FrameError::MissingContentLength)
}

impl Decoder for FrameCodec {
    type Item = InboundFrame;
    type Error = FrameError;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<InboundFrame>, FrameError> {
        if self.discard > 0 {
            let skip = self.discard.min(buf.len() as u64) as usize;
            buf.advance(skip);
            self.discard -= skip as u64;
            if self.discard > 0 {
                return Ok(None);
            }
        }
        let window = &buf[..buf.len().min(MAX_HEADER_BYTES)];
        let Some((end, header_len)) = find_terminator(window) else {
            if buf.len() >= MAX_HEADER_BYTES {
                return Err(FrameError::HeaderTooLarge);
            }
            return Ok(None);
        };
        let declared = content_length(&buf[..end])?;
        let limit = self.max_body();
        if declared > MAX_SKIPPABLE.max(16 * self.max_body as u64) {
            return Err(FrameError::AbsurdContentLength(declared));
        }
        if declared > limit as u64 {
            buf.advance(header_len);
            self.discard = declared;
            let frame = InboundFrame::Oversized { declared, limit };
            // Skip whatever part of the body is already buffered.
            let skip = self.discard.min(buf.len() as u64) as usize;
            buf.advance(skip);
            self.discard -= skip as u64;
            return Ok(Some(frame));
        }
        let body_len = declared as usize;
        let total = header_len + body_len;
        if buf.len() < total {
            // Safe to reserve: body_len is within the limit.
            buf.reserve(total - buf.len());
            return Ok(None);
        }
        buf.advance(header_len);
        Ok(Some(InboundFrame::Body(buf.split_to(body_len).freeze())))
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<InboundFrame>, FrameError> {
        match self.decode(buf)? {
            Some(frame) => Ok(Some(frame)),
            None if buf.is_empty() && self.discard == 0 => Ok(None),
            None => Err(FrameError::Truncated(buf.len() + self.discard as usize)),
        }
    }
}

impl Encoder<Bytes> for FrameCodec {
    type Error = FrameError;

    fn encode(&mut self, body: Bytes, dst: &mut BytesMut) -> Result<(), FrameError> {
        if body.len() > self.max_body {
            return Err(FrameError::OutgoingTooLarge {
                size: body.len(),
                limit: self.max_body,
            });
        }
        let header = format!("Content-Length: {}\r\n\r\n", body.len());
        dst.reserve(header.len() + body.len());
        dst.extend_from_slice(header.as_bytes());
        dst.extend_from_slice(&body);
        Ok(())
    }
}

/// Encode one body as a complete frame (header and body) into a new buffer.
pub fn encode_frame(body: &[u8]) -> Vec<u8> {
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_shared_inbound_limit_applies_from_the_next_header() {
        let limit = BodyLimit::new(8);
        let mut codec = FrameCodec::new(1024).with_inbound_limit(limit.clone());
        let mut buf = BytesMut::from(&encode_frame(b"0123456789")[..]);
        assert_eq!(
            codec.decode(&mut buf).unwrap(),
            Some(InboundFrame::Oversized {
                declared: 10,
                limit: 8
            })
        );
        assert!(buf.is_empty(), "the oversized body is skipped, not kept");
        limit.set(64);
        buf.extend_from_slice(&encode_frame(b"0123456789"));
        assert_eq!(
            codec.decode(&mut buf).unwrap(),
            Some(InboundFrame::Body(Bytes::from_static(b"0123456789")))
        );
        // Never above the codec's own limit.
        limit.set(usize::MAX);
        assert_eq!(codec.max_body(), 1024);
    }

    use super::*;

    fn decode_all(codec: &mut FrameCodec, input: &[u8]) -> Vec<Result<InboundFrame, String>> {
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(f)) => out.push(Ok(f)),
                Ok(None) => break,
                Err(e) => {
                    out.push(Err(e.to_string()));
                    break;
                }
            }
        }
        out
    }

    fn body(s: &str) -> Result<InboundFrame, String> {
        Ok(InboundFrame::Body(Bytes::copy_from_slice(s.as_bytes())))
    }

    #[test]
    fn coalesced_frames_decode_in_order() {
        let mut input = encode_frame(b"{\"a\":1}");
        input.extend(encode_frame(b"[]"));
        input.extend(encode_frame(b""));
        let got = decode_all(&mut FrameCodec::default(), &input);
        assert_eq!(got, vec![body("{\"a\":1}"), body("[]"), body("")]);
    }

    #[test]
    fn split_reads_byte_by_byte() {
        let input = encode_frame("{\"é\":\"ü\"}".as_bytes());
        let mut codec = FrameCodec::default();
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for &b in &input {
            buf.extend_from_slice(&[b]);
            if let Some(f) = codec.decode(&mut buf).unwrap() {
                got.push(f);
            }
        }
        assert_eq!(got, vec![body("{\"é\":\"ü\"}").unwrap()]);
        assert!(buf.is_empty());
    }

    #[test]
    fn header_name_is_case_insensitive_and_others_ignored() {
        let input = b"content-TYPE: application/vscode-jsonrpc; charset=utf-8\r\nCONTENT-LENGTH:  2 \r\n\r\n{}";
        assert_eq!(
            decode_all(&mut FrameCodec::default(), input),
            vec![body("{}")]
        );
    }

    /// A peer that ends its header lines with a bare `\n` is read (it was left waiting
    /// for a `\r\n\r\n` that never came); so is one that mixes both.
    #[test]
    fn header_lines_ended_by_a_bare_newline_are_read() {
        let got = decode_all(
            &mut FrameCodec::default(),
            b"Content-Length: 2\n\n{}Content-Length: 4\r\n\n[1 ]Content-Type: x\nContent-Length: 1\n\r\n7",
        );
        assert_eq!(got, [body("{}"), body("[1 ]"), body("7")]);
        // Byte by byte, too.
        let mut codec = FrameCodec::default();
        let mut buf = BytesMut::new();
        let mut frames = Vec::new();
        for b in b"Content-Length: 3\n\nabc" {
            buf.extend_from_slice(&[*b]);
            if let Some(frame) = codec.decode(&mut buf).unwrap() {
                frames.push(frame);
            }
        }
        assert_eq!(frames, [InboundFrame::Body(Bytes::from_static(b"abc"))]);
    }

    #[test]
    fn missing_content_length_is_fatal() {
        let got = decode_all(&mut FrameCodec::default(), b"Content-Type: x\r\n\r\n{}");
        assert_eq!(got, vec![Err("missing Content-Length header".into())]);
    }

    #[test]
    fn non_numeric_content_length_is_fatal() {
        for bad in ["abc", "-5", "+5", "1_0", "0x10", "12abc", ""] {
            let input = format!("Content-Length: {bad}\r\n\r\n{{}}");
            let got = decode_all(&mut FrameCodec::default(), input.as_bytes());
            assert!(
                matches!(&got[..], [Err(e)] if e.contains("not a decimal")),
                "{bad:?} gave {got:?}"
            );
        }
    }

    #[test]
    fn duplicated_content_length_must_agree() {
        let same = b"Content-Length: 2\r\ncontent-length: 2\r\n\r\n{}";
        assert_eq!(
            decode_all(&mut FrameCodec::default(), same),
            vec![body("{}")]
        );
        let differ = b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{} ";
        let got = decode_all(&mut FrameCodec::default(), differ);
        assert_eq!(
            got,
            vec![Err("conflicting Content-Length headers: 2 and 3".into())]
        );
    }

    #[test]
    fn header_line_without_colon_is_fatal() {
        let got = decode_all(&mut FrameCodec::default(), b"garbage\r\n\r\n");
        assert!(matches!(&got[..], [Err(e)] if e.contains("malformed header line")));
    }

    #[test]
    fn oversized_header_rejected_without_terminator() {
        let mut input = b"X-Pad: ".to_vec();
        input.extend(std::iter::repeat_n(b'a', MAX_HEADER_BYTES));
        let got = decode_all(&mut FrameCodec::default(), &input);
        assert!(matches!(&got[..], [Err(e)] if e.contains("header block longer")));
    }

    #[test]
    fn oversized_body_is_skipped_without_allocating() {
        let mut codec = FrameCodec::new(16);
        // Declares 100 MB: nothing may be reserved for it.
        let mut buf = BytesMut::from(&b"Content-Length: 100000000\r\n\r\nxyz"[..]);
        let cap_before = buf.capacity();
        let got = codec.decode(&mut buf).unwrap();
        assert_eq!(
            got,
            Some(InboundFrame::Oversized {
                declared: 100_000_000,
                limit: 16
            })
        );
        assert!(buf.capacity() <= cap_before);
        assert!(buf.is_empty());
    }

    #[test]
    fn an_absurd_length_closes_instead_of_swallowing_the_stream() {
        let mut codec = FrameCodec::new(16);
        let mut buf = BytesMut::from(
            &b"Content-Length: 9999999999999999999\r\n\r\nContent-Length: 2\r\n\r\n{}"[..],
        );
        assert!(matches!(
            codec.decode(&mut buf),
            Err(FrameError::AbsurdContentLength(9_999_999_999_999_999_999))
        ));
    }

    #[test]
    fn stream_resynchronises_after_an_oversized_body() {
        let mut codec = FrameCodec::new(4);
        let mut input = encode_frame(b"0123456789");
        input.extend(encode_frame(b"{}"));
        let got = decode_all(&mut codec, &input);
        assert_eq!(
            got,
            vec![
                Ok(InboundFrame::Oversized {
                    declared: 10,
                    limit: 4
                }),
                body("{}")
            ]
        );
    }

    #[test]
    fn truncated_frame_at_eof_is_an_error_and_clean_eof_is_none() {
        let mut codec = FrameCodec::default();
        let mut buf = BytesMut::from(&b"Content-Length: 10\r\n\r\n{}"[..]);
        assert!(codec.decode(&mut buf).unwrap().is_none());
        assert!(matches!(
            codec.decode_eof(&mut buf),
            Err(FrameError::Truncated(_))
        ));
        let mut empty = BytesMut::new();
        assert!(codec.decode_eof(&mut empty).unwrap().is_none());
    }

    #[test]
    fn encoder_refuses_oversized_bodies() {
        let mut codec = FrameCodec::new(3);
        let mut dst = BytesMut::new();
        assert!(codec.encode(Bytes::from_static(b"1234"), &mut dst).is_err());
        codec.encode(Bytes::from_static(b"123"), &mut dst).unwrap();
        assert_eq!(&dst[..], b"Content-Length: 3\r\n\r\n123");
    }
}
