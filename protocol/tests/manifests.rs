//! Every plugin manifest in this repository validates against `plugin.schema.json`, and its
//! capability names parse.

use std::path::Path;
use utter_protocol::capability::{Capability, CapabilityRegistry, Lookup};
use utter_protocol::manifest::Manifest;

#[test]
fn the_repository_manifests_are_valid() {
    let plugins = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins");
    let mut checked = 0;
    let registry = CapabilityRegistry::builtin();
    for entry in std::fs::read_dir(&plugins).expect("plugins/ exists") {
        let path = entry
            .expect("readable dir entry")
            .path()
            .join("utter-plugin.toml");
        if !path.exists() {
            continue;
        }
        let manifest = Manifest::from_path(&path).unwrap_or_else(|e| panic!("{e}"));
        for cap in manifest.provides.iter().chain(&manifest.requires) {
            cap.parse::<Capability>()
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(
                !matches!(registry.lookup(cap), Lookup::Unknown),
                "{}: {cap} is not in capabilities.json",
                path.display()
            );
        }
        checked += 1;
    }
    assert!(
        checked >= 3,
        "found only {checked} manifests under {}",
        plugins.display()
    );
}
