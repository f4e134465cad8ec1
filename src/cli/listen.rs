//! `utter listen`: speak a command. With `--once`, one push-to-talk cycle from the terminal:
//! press, listen until Enter (or for `--seconds`), release, then wait for the service's voice
//! report and print what was heard, what was done and the latency split (Ctrl-C, or stdin
//! closing before Enter, drops the hold so nothing half-spoken runs). Without `--once`, print
//! every spoken command the service handles, from any trigger, until Ctrl-C. Needs the
//! running service with a speech-to-text plugin; exit 0 when the command ran, 1 when nothing
//! was heard or it failed, 2 for bad arguments or a closed stdin, 4 when the voice loop is off
//! or the service is gone.

use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};
use utter_ipc::{Event, PluginStatus, PttEvent, Status, VoiceReport};

use super::connect::{Service, call_failed};
use super::output::{answer_line, exit, out, sanitize};
use super::{ptt, say};

/// The arguments of `utter listen`.
#[derive(clap::Args)]
pub struct Args {
    /// Do one push-to-talk cycle and exit.
    #[arg(long)]
    once: bool,
    /// With --once: release after this many seconds instead of waiting for Enter.
    #[arg(long, value_name = "SECONDS")]
    seconds: Option<f64>,
    /// Print JSON: the voice report {outcome, stage, error, transcript, command, audio,
    /// timings} (one per line without --once).
    #[arg(long)]
    json: bool,
}

/// How the listening phase of `utter listen --once` ended.
enum Stop {
    /// Enter or the `--seconds` timer: release and transcribe.
    Release,
    /// Ctrl-C: drop the hold.
    Cancel,
    /// Standard input is closed (EOF) before Enter.
    NoInput,
}

/// Why speech cannot work now, from the service's status: the voice loop is off, the
/// speech model is missing or did not load, or the stt or capture plugin is down (a
/// microphone that could not be opened is tried again at the press, so it is not one).
fn voice_problem(status: &Status) -> Option<String> {
    let voice = &status.voice;
    if voice.state == "off" {
        return Some(format!(
            "the voice loop is off: {}",
            sanitize(&voice.detail)
        ));
    }
    if let Some(missing) = &voice.missing_model {
        return Some(sanitize(missing));
    }
    if let Some(error) = &voice.model_error {
        return Some(format!(
            "the speech model did not load: {} (see `utter status`)",
            sanitize(error)
        ));
    }
    for (role, id) in [
        ("speech-to-text", &voice.stt_plugin),
        ("capture", &voice.audio_plugin),
    ] {
        let Some(id) = id else { continue };
        let Some(plugin) = status.plugins.iter().find(|p| &p.id == id) else {
            continue;
        };
        if matches!(
            plugin.status,
            PluginStatus::Error | PluginStatus::CrashLoop | PluginStatus::Stopped
        ) {
            return Some(format!(
                "the {role} plugin {id} is {}: {} (see `utter plugins`)",
                plugin.status.as_str(),
                sanitize(plugin.last_error.as_deref().unwrap_or("no reason given"))
            ));
        }
    }
    None
}

/// Run `utter listen`.
pub async fn run(args: &Args, service: Service<'_>) -> u8 {
    let once = args.once;
    if args.seconds.is_some() && !once {
        eprintln!("utter listen: --seconds only applies with --once");
        return exit::USAGE;
    }
    if let Some(s) = args.seconds {
        if !(0.1..=600.0).contains(&s) {
            eprintln!("utter listen: --seconds must be between 0.1 and 600, got {s}");
            return exit::USAGE;
        }
    }
    let mut client = match service.connect("listen").await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let status = match client.status().await {
        Ok(s) => s,
        Err(e) => return call_failed("listen", &e),
    };
    // Following (without --once) only needs the loop; what goes wrong in it is reported.
    let problem = if once {
        voice_problem(&status)
    } else {
        (status.voice.state == "off")
            .then(|| format!("the voice loop is off: {}", sanitize(&status.voice.detail)))
    };
    if let Some(problem) = problem {
        eprintln!("utter listen: {problem}");
        return exit::RUNNER;
    }
    if let Err(e) = client.subscribe().await {
        return call_failed("listen", &e);
    }
    // SIGINT is taken over now, before the press: `tokio::signal::ctrl_c()` would only take
    // it over when first polled, and a Ctrl-C between the press and that poll killed the
    // process with the hold still down.
    let mut interrupt = match signal(SignalKind::interrupt()) {
        Ok(interrupt) => interrupt,
        Err(e) => {
            eprintln!("utter listen: cannot handle Ctrl-C ({e})");
            return exit::RUNNER;
        }
    };
    if once {
        match client.ptt("press").await {
            Ok(reply) if reply.listening => {}
            Ok(reply) => {
                eprintln!(
                    "utter listen: push-to-talk did not start: {}",
                    ptt::describe_transition(reply.transition.as_ref())
                );
                return exit::NOT_DONE;
            }
            Err(e) => return call_failed("listen", &e),
        }
        // The press reaches the microphone a moment later; when it cannot, say so now
        // rather than after the whole listening time.
        if let Some(problem) = ptt::microphone_refused(&client, status.voice.presses).await {
            let _ = client.ptt("cancel").await;
            eprintln!("utter listen: the microphone could not be opened: {problem}");
            return exit::RUNNER;
        }
        // Ctrl-C while listening drops the hold: nothing half-spoken is run.
        let stop = match args.seconds {
            Some(s) => {
                eprintln!("listening for {s} s… (Ctrl-C cancels)");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs_f64(s)) => Stop::Release,
                    _ = interrupt.recv() => Stop::Cancel,
                }
            }
            None => {
                eprintln!("listening… press Enter to stop (Ctrl-C cancels)");
                let mut line = String::new();
                let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
                tokio::select! {
                    read = tokio::io::AsyncBufReadExt::read_line(&mut stdin, &mut line) => match read {
                        Ok(0) | Err(_) => Stop::NoInput,
                        Ok(_) => Stop::Release,
                    },
                    _ = interrupt.recv() => Stop::Cancel,
                }
            }
        };
        if !matches!(stop, Stop::Release) {
            let _ = client.ptt("cancel").await;
            if matches!(stop, Stop::NoInput) {
                eprintln!(
                    "utter listen: standard input is closed, so Enter cannot end listening; use --seconds N"
                );
                return exit::USAGE;
            }
            eprintln!("cancelled: nothing was transcribed");
            return exit::NOT_DONE;
        }
        match client.ptt("release").await {
            Ok(reply) if matches!(reply.transition, Some(PttEvent::Released { .. })) => {}
            Ok(reply) => {
                eprintln!(
                    "utter listen: {}",
                    ptt::describe_transition(reply.transition.as_ref())
                );
                return exit::NOT_DONE;
            }
            Err(e) => return call_failed("listen", &e),
        }
        eprintln!("transcribing…");
    }
    loop {
        let params = tokio::select! {
            params = client.next_event() => params,
            _ = interrupt.recv() => return if once { exit::NOT_DONE } else { exit::OK },
        };
        let Some(params) = params else {
            eprintln!("utter listen: the runner closed the connection");
            return exit::RUNNER;
        };
        let report = match params.event {
            Event::Dropped { .. } => {
                if let Err(e) = client.subscribe().await {
                    return call_failed("listen", &e);
                }
                continue;
            }
            Event::Voice(report) => report,
            // What was heard so far while the key is held: a preview on stderr, so that
            // stdout keeps one report per command.
            Event::VoicePartial(partial) => {
                if !args.json {
                    eprintln!("hearing: {:?}…", sanitize(&partial.text));
                }
                continue;
            }
            _ => continue,
        };
        if args.json {
            out!("{}", answer_line(&report));
        } else {
            print_report(&report);
        }
        if once {
            client.close();
            return if report.outcome == "ok" {
                exit::OK
            } else {
                exit::NOT_DONE
            };
        }
    }
}

/// One paragraph for a person about a finished push-to-talk cycle: what was heard, the plan
/// and results, why it failed, and the latency split.
fn print_report(report: &VoiceReport) {
    let text = |s: &Option<String>| sanitize(s.as_deref().unwrap_or(""));
    if report.outcome == "no-speech" {
        out!("heard nothing: {}", text(&report.error));
    } else {
        if let Some(t) = &report.transcript {
            // A command the router proposed that the audio weighed likelier than what the
            // recogniser wrote.
            let rescored = report
                .hypotheses
                .iter()
                .any(|h| h["candidate"].is_string() && h["picked"] == true);
            let written = report
                .hypotheses
                .iter()
                .find(|h| h.get("candidate").is_none())
                .and_then(|h| h["text"].as_str());
            match written.filter(|_| rescored) {
                Some(written) => out!(
                    "heard: {:?} (the recogniser wrote {:?}; this command sounds like it and the audio bears it out)",
                    sanitize(t),
                    sanitize(written)
                ),
                None => out!("heard: {:?}", sanitize(t)),
            }
        }
        if let Some(outcome) = report.command_outcome() {
            say::print_outcome(&outcome);
        }
        if report.outcome != "ok" {
            out!("failed ({}): {}", text(&report.stage), text(&report.error));
        }
    }
    let t = &report.timings;
    let rescore = t
        .rescore_ms
        .map(|ms| format!(", weighing candidates {ms:.0} ms"))
        .unwrap_or_default();
    out!(
        "timings: held {:.0} ms; after release: capture {:.1} ms, hand-off {:.1} ms, stt {:.0} ms{rescore}, pipeline {:.1} ms, total {:.0} ms",
        t.held_ms,
        t.capture_flush_ms,
        t.handoff_ms,
        t.stt_ms,
        t.pipeline_ms,
        t.total_ms
    );
}
