//! The rules router's normaliser, its in-app phrase planner and its readers of words said
//! for symbols (shell commands, addresses) over arbitrary text (what speech-to-text or a
//! client hands it): never a panic, and normalising is idempotent.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let once = utter_rules::text::normalize(&text);
    assert_eq!(utter_rules::text::normalize(&once), once, "{text:?}");
    let _ = utter_rules::text::normalize_words(&text);
    let _ = utter_rules::inapp::plan(&text);
    let _ = utter_rules::language::spoken_symbols(&text);
    let words: Vec<&str> = once.split(' ').collect();
    let _ = utter_rules::text::spoken_address(&words);
});
