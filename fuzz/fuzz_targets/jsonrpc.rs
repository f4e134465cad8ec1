//! JSON-RPC 2.0 message parsing (PROTOCOL.md §2) of arbitrary bodies: a message or a
//! rejection, never a panic; an accepted message serialises to a body that parses back to
//! the same message, and a rejection's answer is JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;
use utter_protocol::Message;

fuzz_target!(|data: &[u8]| {
    match Message::parse(data) {
        Ok(message) => {
            let again = Message::parse(&message.to_bytes()).expect("a serialised message parses");
            assert_eq!(again, message);
        }
        // What a rejection answers (an error response, or a batch's array of them) is JSON.
        Err(rejected) => {
            let answer: utter_protocol::serde_json::Value =
                utter_protocol::serde_json::from_slice(&rejected.to_bytes())
                    .expect("a rejection's answer is JSON");
            assert!(answer.is_object() || answer.is_array());
        }
    }
});
