//! `utter events`: follow the running service's events until Ctrl-C (`runner.subscribe`): a
//! snapshot of the whole state first, then one line per change (plugin states, the runner's
//! state, confirmations asked and answered, finished commands, reloads, push-to-talk and its
//! triggers, spoken commands), or, with `--json`, one event object per line. A subscription
//! the runner drops because this reader fell behind is started again, with a fresh snapshot.
//! With `--logs` the runner's own log lines (INFO and above) are followed too: the last ones
//! it kept first, then each new one (`{"event":"log",...}` with `--json`).
//! Exit 0 on Ctrl-C, 4 when the runner goes away or stdout cannot be written.

use serde_json::Value;
use utter_ipc::Event;

use super::connect::{Service, call_failed};
use super::output::{answer_line, exit, out, sanitize, stdout_failed};
use super::{ptt, reload};

/// The arguments of `utter events`.
#[derive(clap::Args)]
pub struct Args {
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
    /// Follow the runner's log lines (INFO, WARN, ERROR) too, starting with the last ones
    /// it kept.
    #[arg(long)]
    logs: bool,
}

/// Run `utter events`.
pub async fn run(args: &Args, service: Service<'_>) -> u8 {
    let mut client = match service.with_json(args.json).connect("events").await {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Err(e) = client.subscribe_with(args.logs).await {
        return call_failed("events", &e);
    }
    // A resubscription starts with the log lines the runner kept; those already shown stay
    // out.
    let mut shown = utter_ipc::LogCursor::default();
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    loop {
        let params = tokio::select! {
            params = client.next_event() => params,
            _ = &mut interrupted => return exit::OK,
        };
        let Some(params) = params else {
            eprintln!("utter events: the runner closed the connection");
            return exit::RUNNER;
        };
        let event = &params.event;
        if let Event::Log(line) = event
            && !shown.take(line)
        {
            continue;
        }
        if args.json {
            out!("{}", answer_line(event));
        } else {
            out!("{}", describe(event));
        }
        if stdout_failed() {
            return exit::RUNNER;
        }
        if matches!(event, Event::Dropped { .. }) {
            // Fell behind: start again with a fresh snapshot (when the runner is stopping,
            // the connection closes and the loop ends above).
            if let Err(e) = client.subscribe_with(args.logs).await {
                return call_failed("events", &e);
            }
        }
    }
}

/// One line for a person about one event; an event without a line of its own (a plugin's
/// event, one this version does not know) is shown as its JSON.
fn describe(event: &Event) -> String {
    match event {
        Event::Snapshot { status } => {
            let plugins: Vec<String> = status
                .plugins
                .iter()
                .map(|p| format!("{} {} (epoch {})", p.id, p.status.as_str(), p.epoch))
                .collect();
            format!(
                "snapshot: runner {} {}; plugins: {}",
                status.version,
                status.state.as_str(),
                if plugins.is_empty() {
                    "none".to_owned()
                } else {
                    plugins.join(", ")
                }
            )
        }
        Event::PluginState { id, epoch, status } => {
            format!("plugin {id}: {} (epoch {epoch})", status.as_str())
        }
        Event::State { state } => format!("state: {}", state.as_str()),
        Event::Dictation { on } => format!(
            "dictation {}",
            if *on {
                "on: what you say is typed"
            } else {
                "off"
            }
        ),
        Event::ConfirmationRequested(pending) => {
            let r = &pending.request;
            format!(
                "confirmation {} requested: {} (op {}, args {}, provenance {}); answer with `utter confirm {} yes|no`",
                pending.id, r.summary, r.op, r.args, r.provenance, pending.id
            )
        }
        Event::ConfirmationResolved { id, approved, by } => format!(
            "confirmation {id} {} by {by}",
            if *approved { "approved" } else { "denied" }
        ),
        Event::CommandFinished {
            utterance, results, ..
        } => {
            // The results are `runner.command`'s, as JSON.
            let results = results.as_array().map_or(&[][..], Vec::as_slice);
            let ok = results.iter().filter(|r| r["ok"] == true).count();
            format!(
                "command {} finished: {ok} of {} step(s) ok",
                Value::from(utterance.as_str()),
                results.len()
            )
        }
        Event::Reloaded { report } => format!("config reloaded: {}", reload::summary(report)),
        Event::Dropped { reason } => format!("dropped: {reason}"),
        Event::Ptt(transition) => ptt::describe_transition(Some(transition)),
        Event::Voice(report) => match &report.transcript {
            Some(t) => format!(
                "voice {}: heard {:?} ({:.0} ms after release)",
                report.outcome,
                sanitize(t),
                report.timings.total_ms
            ),
            // Without an error the line has always read `null`.
            None => format!(
                "voice {}: {}",
                report.outcome,
                report.error.as_deref().unwrap_or("null")
            ),
        },
        Event::VoicePartial(partial) => format!(
            "voice partial: heard so far {:?} ({:.1} s of audio)",
            sanitize(&partial.text),
            partial.audio_ms / 1000.0
        ),
        Event::PttTrigger(t) => format!(
            "push-to-talk trigger {}: {} ({})",
            t.trigger, t.state, t.detail
        ),
        Event::Log(line) => format!(
            "log {} {}",
            super::audit::local_time(line.time_ms / 1000, &jiff::tz::TimeZone::system()),
            sanitize(&line.display())
        ),
        Event::PluginEvent { .. } | Event::Unknown => answer_line(event),
        // An event a newer utter-ipc adds, before this CLI has a line for it.
        _ => answer_line(event),
    }
}
