//! Plugin manifests (`utter-plugin.toml`, PROTOCOL.md §11) from arbitrary text: a manifest
//! or an error, and the runner's checks of an accepted one, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use utter_protocol::manifest::Manifest;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(manifest) = Manifest::from_toml_str(text, "fuzz.toml") {
        let _ = manifest.runner_check("0.1.0");
    }
});
