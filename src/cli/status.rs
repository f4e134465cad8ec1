//! `utter status`: ask the running service for its state (`runner.status`) and show it: one
//! line for the runner (version, state, config, socket), the plugin table, push-to-talk with
//! each trigger, and the voice loop with its microphone (and, when `[stt] model` is not
//! installed, the `utter models pull` to run); `--json` prints the status object.
//! Exit 0 when the service answered, 4 when none listens.

use utter_ipc::{DecideStatus, Status, VoiceStatus};

use super::connect::{Service, call_failed};
use super::output::{exit, out, print_answer, sanitize};
use super::{plugins, ptt};

/// The arguments of `utter status`.
#[derive(clap::Args)]
pub struct Args {
    /// Print the runner's status object as JSON.
    #[arg(long)]
    json: bool,
}

/// Run `utter status`.
pub async fn run(args: &Args, service: Service<'_>) -> u8 {
    let client = match service.with_json(args.json).connect("status").await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let status: Status = match client.status().await {
        Ok(s) => s,
        Err(e) => return call_failed("status", &e),
    };
    if args.json {
        print_answer(&status);
    } else {
        out!(
            "runner {}: {} (config {}) at {}",
            status.version,
            status.state.as_str(),
            status.config,
            client.path().display()
        );
        plugins::print_plugins(&status.plugins, false);
        ptt::print_state(&status.ptt);
        print_voice(&status.voice);
        print_decide(&status.decide);
        match &status.context {
            Some(c) if c.compositor.is_some() => {
                out!(
                    "context: {} {} at {} (plugin {})",
                    sanitize(c.compositor.as_deref().unwrap_or("?")),
                    sanitize(c.version.as_deref().unwrap_or("")),
                    sanitize(c.socket.as_deref().unwrap_or("?")),
                    sanitize(&c.plugin)
                );
                if let Some(e) = &c.error {
                    out!("  the last read failed: {}", sanitize(e));
                }
            }
            Some(c) => out!(
                "context: unavailable (plugin {}): {}",
                sanitize(&c.plugin),
                sanitize(c.error.as_deref().unwrap_or("not read yet"))
            ),
            None => out!("context: none (no context plugin is configured)"),
        }
    }
    exit::OK
}

/// The decision head's lines: the tiers, then the chooser with its model, or why there is
/// none.
fn print_decide(d: &DecideStatus) {
    let on = |b: bool| if b { "on" } else { "off" };
    out!(
        "decide: act at {:.2}, ask at {:.2}, chooser {} (asked about at {:.2} and above), planner {}",
        d.act,
        d.ask,
        on(d.chooser_enabled),
        d.chooser_min,
        on(d.planner)
    );
    match (&d.chooser, d.chooser_status) {
        (None, _) => out!(
            "  chooser none: near names are asked about by the matcher alone (add a [[plugin]] \
             of kind \"llm\", utter-llm, to let a language model pick)"
        ),
        (Some(id), status) => {
            let model = match (&d.model, &d.endpoint) {
                (Some(m), _) => format!(", model {}", sanitize(m)),
                (None, Some(e)) => format!(", server {}", sanitize(e)),
                (None, None) => String::new(),
            };
            // The health of a degraded plugin starts with the word its status already says.
            let health = d
                .chooser_health
                .strip_prefix("degraded: ")
                .unwrap_or(&d.chooser_health);
            out!(
                "  chooser {} {}{model}: {}",
                sanitize(id),
                status.map_or("not running", |s| s.as_str()),
                sanitize(health)
            );
        }
    }
}

/// The voice-loop lines: its state and why, a speech model that is not installed, the stt
/// plugin and its model, the microphone.
fn print_voice(voice: &VoiceStatus) {
    out!(
        "voice: {} ({})",
        sanitize(&voice.state),
        sanitize(&voice.detail)
    );
    if let Some(missing) = &voice.missing_model {
        out!("  {}", sanitize(missing));
    }
    if let Some(plugin) = &voice.stt_plugin {
        let model = voice
            .model
            .as_ref()
            .map(|m| format!(", model {}", sanitize(m)))
            .unwrap_or_default();
        out!("  stt     {}{model}", sanitize(plugin));
    }
    // The capture plugin's own report (`audio.status`): its state, and the stream's source
    // and format when a stream is open (`capture`); what it does not know is left out.
    if let Some(mic) = voice.microphone.as_ref().filter(|m| !m.is_null()) {
        out!("  mic     {}", microphone_line(mic));
    }
}

/// `audio.status` in a few words: "alsa_input.usb streaming, 48000 Hz, 1 ch", "failed:
/// PipeWire is not running …", "(default source) unconfigured".
fn microphone_line(mic: &serde_json::Value) -> String {
    let stream = &mic["capture"];
    let source = [
        &stream["linked_source"],
        &stream["configured_source"],
        &mic["settings"]["source"],
    ]
    .into_iter()
    .find_map(|v| v.as_str().filter(|s| !s.is_empty()))
    .unwrap_or("(default source)");
    let state = mic["state"]
        .as_str()
        .or(stream["state"].as_str())
        .unwrap_or("state unknown");
    let mut line = format!("{} {}", sanitize(source), sanitize(state));
    let format = [(&stream["rate"], "Hz"), (&stream["channels"], "ch")]
        .into_iter()
        .filter_map(|(v, unit)| v.as_u64().map(|n| format!("{n} {unit}")))
        .collect::<Vec<_>>();
    if !format.is_empty() {
        line += &format!(", {}", format.join(", "));
    }
    if let Some(error) = mic["error"].as_str().or(mic["last_error"].as_str()) {
        line += &format!(": {}", sanitize(error));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::microphone_line;
    use serde_json::json;

    #[test]
    fn the_microphone_line_says_only_what_the_plugin_knows() {
        let streaming = json!({"state": "streaming", "capture": {
            "linked_source": "alsa_input.usb", "rate": 48000, "channels": 1}});
        assert_eq!(
            microphone_line(&streaming),
            "alsa_input.usb streaming, 48000 Hz, 1 ch"
        );
        let failed = json!({"state": "failed", "capture": null,
            "last_error": "PipeWire is not running"});
        assert_eq!(
            microphone_line(&failed),
            "(default source) failed: PipeWire is not running"
        );
        let hostile = json!({"state": "ok\u{1b}[2J", "capture": {"rate": "lots"}});
        let line = microphone_line(&hostile);
        assert!(!line.contains('\u{1b}') && !line.contains("null"), "{line}");
    }
}
