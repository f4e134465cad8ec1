//! `utter audio`: what a person asks of the capture plugin from the command line (its
//! sources, a test recording), as typed requests of the runner: a door names what it wants
//! and the runner makes the plugin calls, so no door holds a way to call a plugin directly.

use std::time::Duration;

use serde_json::{Value, json};
use utter_protocol::{ErrorCode, ErrorObject};

use crate::runner::Runner;

/// What is asked of the capture plugin ([`Runner::capture`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CaptureRequest {
    /// `audio.sources {}`: the microphones it can record from (side-effect-free).
    Sources,
    /// `audio.configure` from `[audio]`, then `audio.record {seconds, keep_silence: true}`:
    /// a recording of `seconds`, its samples a handle in the plugin's scope.
    Record {
        /// How long, seconds (more than 0, at most `[audio] max_seconds`).
        seconds: f64,
    },
}

impl Runner {
    /// Ask the configured capture plugin (`[audio] plugin`, else the first of kind `audio`)
    /// for `request`, with the runner's call timeout (a recording's own length more).
    /// Returns the plugin's id and its answer.
    ///
    /// # Errors
    /// `-32005` when no capture plugin is configured; the plugin's own error, `-32000` when it
    /// is not running, `-32001` on timeout.
    pub async fn capture(&self, request: CaptureRequest) -> Result<(String, Value), ErrorObject> {
        let config = self.config().config;
        let plugin = config.capture_plugin().map(|p| p.id.clone()).ok_or_else(|| {
            ErrorObject::new(
                ErrorCode::CapabilityMissing,
                "no capture plugin is configured (a [[plugin]] of kind \"audio\", e.g. entrypoint = [\"utter-audio-pipewire\"])",
            )
        })?;
        let timeout = self.supervisor.rpc_timeout();
        let answer = match request {
            CaptureRequest::Sources => {
                self.supervisor
                    .call(&plugin, "audio.sources", json!({}), timeout)
                    .await?
            }
            CaptureRequest::Record { seconds } => {
                self.supervisor
                    .call(
                        &plugin,
                        "audio.configure",
                        config.audio.configure_params(),
                        timeout,
                    )
                    .await?;
                let long = timeout + Duration::from_secs(u64::from(config.audio.max_seconds));
                self.supervisor
                    .call(
                        &plugin,
                        "audio.record",
                        json!({"seconds": seconds, "keep_silence": true}),
                        long,
                    )
                    .await?
            }
        };
        Ok((plugin, answer))
    }
}
