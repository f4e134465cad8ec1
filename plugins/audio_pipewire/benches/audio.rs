//! What ending an utterance costs (criterion, plus one measurement of its own).
//!
//! * `audio/flush_48k_mono_1.8s`, `audio/flush_48k_stereo_1.8s`: the capture flush, what
//!   `AudioCapture::end` does after taking the buffer, on a 1.5 s utterance plus the default
//!   300 ms pre-roll captured at 48 kHz: downmix, rubato's FFT resampling to 16 kHz, the
//!   energy gate and trimming (`Utterance::from_interleaved`).
//! * `audio/handoff_in_process_1.5s`: storing 1.5 s of 16 kHz mono f32 (96 000 bytes) with
//!   `handle.create {data_b64}`: encoding plus the request's round trip to a runner stand-in
//!   on an in-memory pipe that decodes and hashes the bytes as the runner does.
//! * `audio/handoff_pipewire_1.5s` (printed, not a criterion benchmark: every sample takes
//!   1.5 s of real time): the real plugin binary capturing the virtual microphone of a
//!   private PipeWire session (`tests/support`) while a speech-like signal plays into it;
//!   `audio.begin`, 1.5 s, then the time from sending `audio.end` to its reply, which includes
//!   the flush, the hand-off and both pipes. Median, min and max of 21 utterances under
//!   `cargo bench` (3 in test mode; `UTTER_BENCH_HANDOFF_RUNS` sets it). The target for the
//!   capture → stt hand-off is ≤ 5 ms.
//!
//! Prints figures; asserts nothing beyond the plugin answering.

#[path = "../tests/support/mod.rs"]
mod support;

use base64::Engine as _;
use criterion::Criterion;
use std::hint::black_box;
use std::time::{Duration, Instant};
use utter_audio_pipewire::Utterance;
use utter_audio_pipewire::dsp::GateSettings;
use utter_audio_pipewire::service::hand_off;
use utter_protocol::serde_json::{Value, json};
use utter_protocol::{Connection, ConnectionOptions, ErrorObject, Incoming};

/// `lead` seconds of silence, then `seconds` of a speech-like signal (a 200 Hz tone with
/// harmonics, amplitude modulated at 4 Hz like syllables), at `rate` with `channels`.
fn speech_like(rate: u32, lead: f32, seconds: f32, channels: usize) -> Vec<f32> {
    let rate_f = rate as f32;
    let mut out = Vec::new();
    for i in 0..((lead + seconds) * rate_f) as usize {
        let t = i as f32 / rate_f;
        let s = if t < lead {
            0.0
        } else {
            let env = 0.5 + 0.5 * (2.0 * std::f32::consts::PI * 4.0 * t).sin();
            let tone: f32 = (1..=5)
                .map(|h| (2.0 * std::f32::consts::PI * 200.0 * h as f32 * t).sin() / h as f32)
                .sum();
            0.2 * env * tone
        };
        out.extend(std::iter::repeat_n(s, channels));
    }
    out
}

fn flush(c: &mut Criterion) {
    let gate = GateSettings::default();
    for (name, channels) in [("flush_48k_mono_1.8s", 1), ("flush_48k_stereo_1.8s", 2)] {
        let raw = speech_like(48_000, 0.3, 1.5, channels);
        c.bench_function(&format!("audio/{name}"), |b| {
            b.iter(|| {
                Utterance::from_interleaved(black_box(&raw), 48_000, channels as u32, &gate, false)
                    .expect("resamples")
            })
        });
    }
}

/// The plugin's end of an in-memory pipe whose other end answers `handle.create` as the
/// runner does (strict base64, SHA-256), without writing a file.
fn runner_stand_in() -> Connection {
    let (a, b) = tokio::io::duplex(1 << 20);
    let (ar, aw) = tokio::io::split(a);
    let (br, bw) = tokio::io::split(b);
    let (plugin, _) = Connection::spawn(ar, aw, ConnectionOptions::default());
    let (runner, mut incoming) = Connection::spawn(br, bw, ConnectionOptions::default());
    tokio::spawn(async move {
        while let Some(Incoming::Request(req)) = incoming.recv().await {
            let result = base64::engine::general_purpose::STANDARD
                .decode(req.params["data_b64"].as_str().unwrap_or_default())
                .map(|bytes| {
                    let digest = utter_protocol::digest::sha256_hex(&bytes);
                    json!({"handle": format!("handle://{digest}"), "sha256": digest, "size": bytes.len()})
                })
                .map_err(|e| ErrorObject::invalid_params(e.to_string()));
            let _ = runner.respond(req.id, result).await;
        }
    });
    plugin
}

fn handoff_in_process(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let samples = speech_like(16_000, 0.0, 1.5, 1);
    let plugin = rt.block_on(async { runner_stand_in() });
    c.bench_function("audio/handoff_in_process_1.5s", |b| {
        b.iter(|| {
            rt.block_on(hand_off(&plugin, black_box(&samples)))
                .expect("stored")
        })
    });
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Write `seconds` of the speech-like signal at 48 kHz mono, 16-bit, to `path`.
fn write_wav(path: &std::path::Path, seconds: f32) {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 48_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut writer = hound::WavWriter::create(path, spec).expect("a WAV file");
    for s in speech_like(48_000, 0.0, seconds, 1) {
        writer
            .write_sample((s.clamp(-1.0, 1.0) * 32_767.0) as i16)
            .expect("write");
    }
    writer.finalize().expect("finalize");
}

fn handoff_over_pipewire(runs: usize) {
    let pw = support::PipeWireSession::start();
    let (_dir, dir) = support::scratch();
    let wav = dir.join("speech_like.wav");
    write_wav(&wav, 1.8 * runs as f32 + 10.0);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let host = support::Host::start(&pw.env()).await;
        host.call(
            "audio.configure",
            json!({"source": support::FAKE_MIC, "pre_roll_ms": 0}),
        )
        .await
        .expect("audio.configure");
        let mut player = pw.play(&wav);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (mut whole, mut flush, mut encode, mut create) = (vec![], vec![], vec![], vec![]);
        for _ in 0..runs {
            host.call("audio.begin", json!({})).await.expect("audio.begin");
            tokio::time::sleep(Duration::from_millis(1_500)).await;
            let sent = Instant::now();
            let ended: Value = host.call("audio.end", json!({})).await.expect("audio.end");
            whole.push(sent.elapsed().as_secs_f64() * 1000.0);
            assert!(ended["handle"].is_string(), "no speech stored: {ended}");
            let number = |key: &str| ended[key].as_f64().unwrap_or(f64::NAN);
            flush.push(number("flush_ms"));
            encode.push(number("encode_ms"));
            create.push(number("handoff_ms"));
        }
        let _ = player.kill();
        let _ = player.wait();
        let (min, max) = whole
            .iter()
            .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
        println!(
            "audio/handoff_pipewire_1.5s: audio.end request -> reply: median {:.2} ms (min {min:.2}, max {max:.2}, {runs} utterances); \
             inside the plugin: flush median {:.2} ms, encode {:.2} ms, handle.create round trip {:.2} ms",
            median(&mut whole),
            median(&mut flush),
            median(&mut encode),
            median(&mut create),
        );
        let exit = host.close_and_wait(Duration::from_secs(10)).await;
        assert!(exit.success(), "{exit}");
    });
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    flush(&mut c);
    handoff_in_process(&mut c);
    c.final_summary();

    // The PipeWire measurement honours a name filter like criterion's own.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let name = "audio/handoff_pipewire_1.5s";
    if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
        return;
    }
    let benching = args.iter().any(|a| a == "--bench");
    let runs = std::env::var("UTTER_BENCH_HANDOFF_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n: &usize| *n > 0)
        .unwrap_or(if benching { 21 } else { 3 });
    handoff_over_pipewire(runs);
}
