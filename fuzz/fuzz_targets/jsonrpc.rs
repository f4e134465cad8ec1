//! JSON-RPC 2.0 message parsing (PROTOCOL.md §2) of arbitrary bodies: a message or a
//! rejection, never a panic; an accepted message serialises to a body that parses back to
//! the same message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use utter_protocol::Message;

fuzz_target!(|data: &[u8]| {
    if let Ok(message) = Message::parse(data) {
        let again = Message::parse(&message.to_bytes()).expect("a serialised message parses");
        assert_eq!(again, message);
    }
});
