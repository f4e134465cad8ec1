//! The runner's config (TOML) from arbitrary text: loaded or refused with issues that carry
//! a line inside the text, never a panic; the migration of an older format either fails or
//! yields a config that loads.
#![no_main]

use libfuzzer_sys::fuzz_target;
use utter_core::config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lines = text.lines().count().max(1) + 1;
    match config::parse(text, "fuzz.toml") {
        Ok(loaded) => {
            for issue in &loaded.warnings {
                assert!(issue.line.is_none_or(|l| l <= lines), "{issue}");
            }
        }
        Err(e) => {
            assert!(!e.errors.is_empty());
            for issue in &e.errors {
                assert!(issue.line.is_none_or(|l| l <= lines), "{issue}");
            }
        }
    }
    if let Ok(migrated) = config::migrate(text, "fuzz.toml") {
        config::parse(&migrated.text, "fuzz.toml").expect("a migrated config loads");
    }
});
