//! The `Content-Length` frame decoder (PROTOCOL.md §1) over arbitrary bytes, fed in the
//! chunk sizes the input's first byte chooses: never a panic, never a body over the limit,
//! and what it decodes re-encodes to a frame that decodes to the same body.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use tokio_util::codec::Decoder;
use utter_protocol::frame::{FrameCodec, InboundFrame, encode_frame};

const LIMIT: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let Some((&step, bytes)) = data.split_first() else {
        return;
    };
    let step = usize::from(step % 64) + 1;
    let mut codec = FrameCodec::new(LIMIT);
    let mut buf = BytesMut::new();
    for chunk in bytes.chunks(step) {
        buf.extend_from_slice(chunk);
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(InboundFrame::Body(body))) => {
                    assert!(body.len() <= LIMIT);
                    let mut again = BytesMut::from(&encode_frame(&body)[..]);
                    let decoded = FrameCodec::new(LIMIT)
                        .decode(&mut again)
                        .expect("re-decode");
                    assert_eq!(decoded, Some(InboundFrame::Body(body)));
                }
                Ok(Some(InboundFrame::Oversized { limit, .. })) => assert_eq!(limit, LIMIT),
                Ok(None) => break,
                // A stream that cannot be resynchronised: the connection ends here.
                Err(_) => return,
            }
        }
    }
    let _ = codec.decode_eof(&mut buf);
});
