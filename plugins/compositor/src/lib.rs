//! `utter-compositor`: desktop context and compositor actions (kind `bundle`: `context.*` and
//! `action.*` in one process).
//!
//! Module map: [`model`] is the snapshot shape, [`backend`] detects the compositor and
//! defines the shared error, [`niri`] and [`sway`] are the two IPC clients.

pub mod backend;
pub mod model;
pub mod niri;
pub mod sway;

use std::process::ExitCode;

/// Serve the compositor plugin on stdin/stdout until the runner closes stdin.
pub async fn run(_log_to_stderr: bool) -> ExitCode {
    ExitCode::FAILURE
}
