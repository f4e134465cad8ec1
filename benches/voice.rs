//! The voice loop's latency split, end to end in a release build (issue 6's benchmark).
//!
//! Starts what `tests/voice.rs` starts — a private PipeWire session with the virtual
//! microphone (`fake_mic_sink` → `fake_mic`), the release `utter daemon` capturing from it,
//! the release `utter-stt-whisper` with Whisper tiny.en (fetched by
//! `tests/fetch-whisper-model.sh`), the `rules` router and the `desktop` plugin with a
//! recording `https` handler behind `xdg-open` — then runs one warm-up and N measured
//! push-to-talk cycles: `utter ptt press`, `pw-play` of a ~1.5 s `espeak-ng` command
//! ("open youtube" at 130 words per minute), `utter ptt release`, and reads the runner's
//! `{"event":"voice", …, timings}` report through `utter listen --json`.
//!
//! It does so once per lever of issue 15, each in a daemon of its own (`[stt]` settings):
//! the full 30 s window (the configuration before), the fitted window, greedy search, the
//! router's vocabulary as the prompt, and the final configuration (fitted, vocabulary,
//! 3-best re-ranked; 5-best too); for each it prints release → transcript (capture flush + hand-off +
//! the vocabulary wait + the `stt.transcribe` call) and release → action result, median and
//! p90, and the model's own inference time.
//!
//! For the final configuration it then prints median / p90 / min of each part of `timings`
//! (milliseconds, measured by the runner
//! from the moment it saw the key go up), the derived overheads, the STT real-time factor,
//! the model load time, and the in-process cost of `Utterance::from_interleaved` on 1.5 s of
//! 48 kHz audio for comparison. Asserts nothing about speed; fails when a cycle does not end
//! with the URL opened.
//!
//! Run: `cargo build --release --workspace --bins && cargo bench --bench voice`
//! (`UTTER_BENCH_CYCLES=N` changes the number of measured cycles, default 8).
//!
//! Debian packages: as `tests/voice.rs` (pipewire, pipewire-bin, wireplumber,
//! libspa-0.2-modules, dbus-daemon, espeak-ng, xdg-utils, python3-pip).

#[path = "../tests/common/mod.rs"]
mod common;

use common::voice::{Follower, LIMIT, VoiceDaemon, speak_into_mic};
use common::{PipeWireSession, require_program, whisper_model};
use std::path::Path;
use std::time::{Duration, Instant};
use utter_protocol::serde_json::{self, Value};

/// The spoken command and the URL the rules router turns it into.
const COMMAND: &str = "open youtube";
const URL: &str = "https://www.youtube.com";
/// espeak-ng's speed in words per minute: 130 makes "open youtube" about 1.5 s long.
const WORDS_PER_MINUTE: &str = "130";

/// What the benchmark asks of the running daemon besides [`VoiceDaemon`]'s own methods.
trait BenchDaemon {
    /// `utter --socket S ARGS…`, its stdout as JSON.
    fn json(&self, args: &[&str]) -> Value;
    /// Poll `utter status --json` until `voice.state` is `state`.
    fn wait_voice_state(&self, state: &str);
    /// Wait until the stt plugin answered `stt.load`; its `load_ms`, when the log has it.
    fn wait_model_loaded(&self) -> Option<f64>;
}

impl BenchDaemon for VoiceDaemon {
    /// `utter --socket S ARGS…`, its stdout as JSON.
    fn json(&self, args: &[&str]) -> Value {
        let out = self.command(args).output().expect("utter runs");
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "utter {args:?} printed no JSON ({e}): {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    /// Poll `utter status --json` until `voice.state` is `state`.
    fn wait_voice_state(&self, state: &str) {
        let deadline = Instant::now() + LIMIT;
        loop {
            // The socket comes up a moment after the process starts.
            let out = self
                .command(&["status", "--json"])
                .output()
                .expect("utter runs");
            let Ok(status) = serde_json::from_slice::<Value>(&out.stdout) else {
                assert!(
                    Instant::now() < deadline,
                    "the daemon never answered:\n{}",
                    self.log()
                );
                std::thread::sleep(Duration::from_millis(50));
                continue;
            };
            if status["voice"]["state"] == state {
                return;
            }
            assert!(
                status["voice"]["state"] != "unavailable",
                "the microphone could not be opened: {}\n{}",
                status["voice"],
                self.log()
            );
            assert!(
                Instant::now() < deadline,
                "voice.state never became {state:?}: {}\nlog:\n{}",
                status["voice"],
                self.log()
            );
            std::thread::sleep(Duration::from_millis(if state == "listening" {
                10
            } else {
                100
            }));
        }
    }

    /// Wait until the stt plugin answered `stt.load`; its `load_ms`, when the log has it.
    fn wait_model_loaded(&self) -> Option<f64> {
        let deadline = Instant::now() + LIMIT;
        loop {
            let log = self.log();
            if let Some(line) = log.lines().find(|l| l.contains("speech model loaded")) {
                let at = line.find("\"load_ms\":")? + "\"load_ms\":".len();
                let digits: String = line[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.')
                    .collect();
                return digits.parse().ok();
            }
            assert!(
                !log.contains("the speech model did not load"),
                "the model did not load:\n{log}"
            );
            assert!(Instant::now() < deadline, "the model never loaded:\n{log}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// One push-to-talk cycle; the voice report, checked to have opened [`URL`].
fn cycle(daemon: &VoiceDaemon, follower: &Follower, pw: &PipeWireSession, wav: &Path) -> Value {
    let _ = std::fs::remove_file(&daemon.recorded);
    let press = daemon.json(&["ptt", "press", "--json"]);
    assert_eq!(press["listening"], true, "{press}");
    daemon.wait_voice_state("listening");
    speak_into_mic(pw, wav);
    let release = daemon.json(&["ptt", "release", "--json"]);
    assert_eq!(release["transition"]["transition"], "released", "{release}");
    let report = follower.next(daemon);
    assert_eq!(
        report["outcome"],
        "ok",
        "{report:#}\nlog:\n{}",
        daemon.log()
    );
    assert_eq!(
        report["command"]["results"][0]["args"]["url"], URL,
        "{report:#}"
    );
    let deadline = Instant::now() + LIMIT;
    while !daemon.recorded.exists() {
        assert!(Instant::now() < deadline, "the https handler never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    daemon.wait_voice_state("ready");
    report
}

/// Median, 90th percentile (nearest rank) and minimum.
fn stats(values: &[f64]) -> (f64, f64, f64) {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    let p90 = v[((0.9 * n as f64).ceil() as usize).clamp(1, n) - 1];
    (median, p90, v[0])
}

fn row(name: &str, values: &[f64]) {
    let (median, p90, min) = stats(values);
    println!("{name:<48} {median:>9.2} {p90:>9.2} {min:>9.2}");
}

fn wav_seconds(path: &Path) -> f64 {
    let reader = hound::WavReader::open(path).expect("espeak-ng wrote a WAV");
    reader.duration() as f64 / reader.spec().sample_rate as f64
}

fn main() {
    let cycles: usize = std::env::var("UTTER_BENCH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(8);
    // `cargo bench` passes `--bench`; a filter that does not name this bench skips it.
    if let Some(filter) = std::env::args().skip(1).find(|a| !a.starts_with('-'))
        && !"voice".contains(filter.as_str())
    {
        return;
    }

    let model = whisper_model();
    let pw = PipeWireSession::start();
    require_program("espeak-ng", "espeak-ng");
    let wav_dir = tempfile::tempdir().expect("temp dir");
    let wav = wav_dir.path().join("command.wav");
    let status = std::process::Command::new("espeak-ng")
        .args(["-s", WORDS_PER_MINUTE, "-w"])
        .arg(&wav)
        .arg(COMMAND)
        .status()
        .expect("espeak-ng runs");
    assert!(status.success(), "espeak-ng failed: {status}");
    let spoken = wav_seconds(&wav);

    // Each lever on its own, then all of them: today's configuration first.
    let levers: &[(&str, &str)] = &[
        (
            "full 30 s window, beam 5 (before)",
            "window = \"full\"\nhypotheses = 1\nvocabulary = false",
        ),
        (
            "fitted window (audio + 1 s)",
            "window = \"fit\"\nhypotheses = 1\nvocabulary = false",
        ),
        (
            "fitted window, greedy (beam 1)",
            "window = \"fit\"\nbeam_size = 1\nhypotheses = 1\nvocabulary = false",
        ),
        (
            "fitted + vocabulary prompt",
            "window = \"fit\"\nhypotheses = 1\nvocabulary = true",
        ),
        (
            "fitted + vocabulary + 5-best re-ranked",
            "window = \"fit\"\nhypotheses = 5\nvocabulary = true",
        ),
        (
            "fitted + vocabulary + 3-best re-ranked (final)",
            "window = \"fit\"\nhypotheses = 3\nvocabulary = true",
        ),
    ];
    let mut summary = Vec::new();
    let mut last = None;
    for (name, stt) in levers {
        let daemon =
            VoiceDaemon::start_with(&pw, &model, "[ptt]\nportal = false\nmin_hold_ms = 0", stt);
        daemon.wait_voice_state("ready");
        let load_ms = daemon.wait_model_loaded();
        let follower = Follower::start(&daemon);
        // The follower subscribes before the first key press.
        std::thread::sleep(Duration::from_millis(500));
        let warmup = cycle(&daemon, &follower, &pw, &wav);
        let reports: Vec<Value> = (0..cycles)
            .map(|_| cycle(&daemon, &follower, &pw, &wav))
            .collect();
        let t = |r: &Value, key: &str| r["timings"][key].as_f64().unwrap_or(0.0);
        // Release → transcript: the capture flush, the hand-off, the wait for the
        // vocabulary and the stt call (the n-best pick is in release → action).
        let to_transcript: Vec<f64> = reports
            .iter()
            .map(|r| {
                t(r, "capture_flush_ms")
                    + t(r, "handoff_ms")
                    + t(r, "vocabulary_ms")
                    + t(r, "stt_ms")
            })
            .collect();
        let to_action: Vec<f64> = reports.iter().map(|r| t(r, "total_ms")).collect();
        let inference: Vec<f64> = reports.iter().map(|r| t(r, "stt_inference_ms")).collect();
        summary.push((name.to_string(), to_transcript, to_action, inference));
        last = Some((daemon, follower, load_ms, warmup, reports));
    }
    println!();
    println!(
        "levers, release build, {cycles} cycles each of {COMMAND:?} ({spoken:.2} s of espeak-ng speech), tiny.en int8 on CPU"
    );
    println!(
        "{:<48} {:>12} {:>12} {:>12} {:>12} {:>10}",
        "ms", "→text p50", "→text p90", "→action p50", "→action p90", "infer p50"
    );
    for (name, text, action, inference) in &summary {
        let (t50, t90, _) = stats(text);
        let (a50, a90, _) = stats(action);
        let (i50, _, _) = stats(inference);
        println!("{name:<48} {t50:>12.1} {t90:>12.1} {a50:>12.1} {a90:>12.1} {i50:>10.1}");
    }
    let (_daemon, _follower, load_ms, warmup, reports) = last.expect("at least one lever");

    let field = |key: &str| -> Vec<f64> {
        reports
            .iter()
            .map(|r| r["timings"][key].as_f64().unwrap_or(0.0))
            .collect()
    };
    let audio = |r: &Value, key: &str| r["audio"][key].as_f64().unwrap_or(0.0);
    // The samples handed to the plugin: the capture without the trimmed silence.
    let passed_ms: Vec<f64> = reports
        .iter()
        .map(|r| {
            audio(r, "captured_ms")
                - audio(r, "trimmed_leading_ms")
                - audio(r, "trimmed_trailing_ms")
        })
        .collect();
    let speech_ms: Vec<f64> = reports.iter().map(|r| audio(r, "speech_ms")).collect();
    let t = |r: &Value, key: &str| r["timings"][key].as_f64().unwrap_or(0.0);
    let hop: Vec<f64> = reports
        .iter()
        .map(|r| t(r, "stt_ms") - t(r, "stt_inference_ms"))
        .collect();
    let gaps: Vec<f64> = reports
        .iter()
        .map(|r| {
            t(r, "total_ms")
                - t(r, "capture_flush_ms")
                - t(r, "handoff_ms")
                - t(r, "stt_ms")
                - t(r, "pipeline_ms")
        })
        .collect();
    let overhead: Vec<f64> = reports
        .iter()
        .map(|r| t(r, "total_ms") - t(r, "stt_inference_ms") - t(r, "pipeline_ms"))
        .collect();
    let outside_stt: Vec<f64> = reports
        .iter()
        .map(|r| t(r, "total_ms") - t(r, "stt_inference_ms"))
        .collect();
    let rtf_passed: Vec<f64> = reports
        .iter()
        .zip(&passed_ms)
        .map(|(r, ms)| t(r, "stt_inference_ms") / ms)
        .collect();
    let rtf_speech: Vec<f64> = reports
        .iter()
        .zip(&speech_ms)
        .map(|(r, ms)| t(r, "stt_inference_ms") / ms)
        .collect();

    println!();
    println!(
        "the final configuration in detail, release build, {cycles} cycles of {COMMAND:?} ({spoken:.2} s of espeak-ng speech), \
         tiny.en int8 on CPU"
    );
    println!("transcripts: {:?}", {
        let mut heard: Vec<&str> = reports
            .iter()
            .map(|r| r["transcript"].as_str().unwrap_or(""))
            .collect();
        heard.dedup();
        heard
    });
    println!(
        "{:<48} {:>9} {:>9} {:>9}",
        "ms (from key release)", "median", "p90", "min"
    );
    for key in [
        "capture_flush_ms",
        "handoff_ms",
        "stt_ms",
        "stt_inference_ms",
        "pipeline_ms",
        "total_ms",
    ] {
        row(key, &field(key));
    }
    row("  stt hop (stt_ms - stt_inference_ms)", &hop);
    row("  unaccounted (total - the parts)", &gaps);
    row("runner overhead (total - inference - pipeline)", &overhead);
    row("outside STT (total - stt_inference_ms)", &outside_stt);
    println!("audio");
    row(
        "  captured_ms",
        &reports
            .iter()
            .map(|r| audio(r, "captured_ms"))
            .collect::<Vec<_>>(),
    );
    row("  handed to STT (trimmed) ms", &passed_ms);
    row("  speech_ms", &speech_ms);
    println!("STT real-time factor (inference / audio)");
    row("  per second handed to STT", &rtf_passed);
    row("  per second of speech", &rtf_speech);
    match load_ms {
        Some(ms) => println!("{:<48} {ms:>9.0}", "model load (stt.load, load_ms)"),
        None => println!("model load: not found in the runner log"),
    }
    println!(
        "warm-up cycle: total {:.1} ms, stt_inference {:.1} ms (not in the table)",
        t(&warmup, "total_ms"),
        t(&warmup, "stt_inference_ms")
    );
    let (load1, load5, load15) = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| {
            let mut it = s.split_whitespace().map(str::to_owned);
            Some((it.next()?, it.next()?, it.next()?))
        })
        .unwrap_or_default();
    println!("load average: {load1} {load5} {load15}");
}
