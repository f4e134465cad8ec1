//! Round-trip and start-up benchmarks (criterion). Prints figures; asserts nothing.
//!
//! * `roundtrip/runner_fake_rs`: a runner call of `action.invoke` to the `fake_rs` plugin
//!   over stdio, through the supervisor and the connection tasks.
//! * `roundtrip/floor_pipe_pingpong`: the floor, in the same run: a blocking Content-Length
//!   JSON-RPC ping-pong with `utter-pingpong` over a pipe.
//! * `startup/three_plugins`: spawn plus handshake of three Rust plugins until all are ok.
//!
//! Needs `cargo build --release --workspace --bins` first (the plugins are child processes).
//! At the end it prints both round-trip medians and their ratio.

mod common;

use common::{bin, median_ns};
use criterion::{Criterion, criterion_group};
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use utter_core::config;
use utter_core::supervisor::{Supervisor, SupervisorOptions};

fn config_with(ids: &[&str]) -> config::Config {
    let program = bin("fake_rs");
    let mut text = String::from("config_version = 1\n");
    for id in ids {
        text.push_str(&format!(
            "[[plugin]]\nid = \"{id}\"\nentrypoint = [{:?}]\n",
            program.display().to_string()
        ));
    }
    config::parse(&text, "bench.toml")
        .expect("bench config")
        .config
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// One blocking ping-pong over a pipe to `utter-pingpong`.
struct PipeFloor {
    child: std::process::Child,
    input: std::process::ChildStdin,
    output: BufReader<std::process::ChildStdout>,
    n: u64,
}

impl PipeFloor {
    fn start() -> PipeFloor {
        let mut child = Command::new(bin("utter-pingpong"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("utter-pingpong starts");
        let input = child.stdin.take().expect("stdin");
        let output = BufReader::new(child.stdout.take().expect("stdout"));
        PipeFloor {
            child,
            input,
            output,
            n: 0,
        }
    }

    fn ping(&mut self) {
        self.n += 1;
        let body = serde_json::to_vec(&json!({
            "jsonrpc": "2.0", "id": format!("0:{}", self.n), "method": "action.invoke",
            "params": {"op": "open_url", "args": {"url": "https://www.youtube.com"}, "provenance": "user"}
        }))
        .expect("json");
        write!(self.input, "Content-Length: {}\r\n\r\n", body.len()).expect("write");
        self.input.write_all(&body).expect("write");
        self.input.flush().expect("flush");
        let mut length = 0;
        let mut line = String::new();
        loop {
            line.clear();
            self.output.read_line(&mut line).expect("read");
            let t = line.trim_end();
            if t.is_empty() {
                break;
            }
            if let Some((_, v)) = t.split_once(':') {
                length = v.trim().parse().expect("length");
            }
        }
        let mut body = vec![0; length];
        self.output.read_exact(&mut body).expect("body");
        let reply: serde_json::Value = serde_json::from_slice(&body).expect("json reply");
        assert!(reply.get("result").is_some());
    }
}

impl Drop for PipeFloor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn roundtrip(c: &mut Criterion) {
    let rt = runtime();
    let config = config_with(&["fake_rs"]);
    let sup = rt.block_on(Supervisor::start(
        &config,
        SupervisorOptions::from_config(&config),
    ));
    let params = json!({"op": "open_url", "args": {"url": "https://www.youtube.com"}, "provenance": "user", "dry_run": true});
    let mut group = c.benchmark_group("roundtrip");
    group
        .sample_size(100)
        .measurement_time(Duration::from_secs(5));
    group.bench_function("runner_fake_rs", |b| {
        b.to_async(&rt).iter(|| async {
            sup.call(
                "fake_rs",
                "action.invoke",
                params.clone(),
                Duration::from_secs(5),
            )
            .await
            .expect("fake_rs answers")
        })
    });
    let mut floor = PipeFloor::start();
    group.bench_function("floor_pipe_pingpong", |b| b.iter(|| floor.ping()));
    group.finish();
    rt.block_on(sup.shutdown());
}

fn startup(c: &mut Criterion) {
    let rt = runtime();
    let config = config_with(&["a", "b", "c"]);
    let mut group = c.benchmark_group("startup");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(8));
    group.bench_function("three_plugins", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                let sup = rt.block_on(Supervisor::start(
                    &config,
                    SupervisorOptions::from_config(&config),
                ));
                total += start.elapsed();
                assert!(sup.plugins().iter().all(|p| p.status.is_running()));
                rt.block_on(sup.shutdown());
            }
            total
        })
    });
    group.finish();
}

fn summary() {
    let runner = median_ns("roundtrip/runner_fake_rs");
    let floor = median_ns("roundtrip/floor_pipe_pingpong");
    let startup = median_ns("startup/three_plugins");
    println!("\n== summary (medians) ==");
    if let (Some(r), Some(f)) = (runner, floor) {
        println!(
            "runner -> fake_rs -> runner round trip: {:.1} µs",
            r / 1000.0
        );
        println!(
            "floor (pipe ping-pong):                 {:.1} µs",
            f / 1000.0
        );
        println!(
            "ratio runner / floor:                   {:.2}  (target <= 1.5; median target <= 40 µs)",
            r / f
        );
    }
    if let Some(s) = startup {
        println!(
            "start-up of three plugins:              {:.2} ms (target <= 15 ms)",
            s / 1e6
        );
    }
}

criterion_group!(benches, roundtrip, startup);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    summary();
}
