//! Helpers shared by the benchmarks: the built binaries and criterion's saved estimates.

#![allow(dead_code)]

use std::path::PathBuf;

/// A binary of this build (`target/<profile>/<name>`), checked to exist.
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("bench executable path");
    let deps = exe.parent().expect("deps dir");
    let path = deps.parent().expect("profile dir").join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --release --workspace --bins` first",
        path.display()
    );
    path
}

/// Criterion's median estimate for a benchmark id (`group/name`), in nanoseconds, read from
/// `target/criterion/<id>/new/estimates.json`.
pub fn median_ns(id: &str) -> Option<f64> {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    let text = std::fs::read_to_string(
        dir.join("criterion")
            .join(id)
            .join("new")
            .join("estimates.json"),
    )
    .ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["median"]["point_estimate"].as_f64()
}
