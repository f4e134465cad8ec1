//! The client socket's relay cost (criterion). Prints figures; asserts nothing.
//!
//! * `socket/relay_fake_rs`: a client → `runner.sock` → runner → `fake_rs` → runner → client
//!   round trip: `runner.invoke` of fake_rs `action.invoke` (open_url, provenance user, dry
//!   run), through the admission, the policy gates and the supervisor, against a real
//!   `utter daemon --no-dbus` process.
//! * `socket/runner_status`: `runner.status` with two plugins running (fake_rs twice),
//!   answered from the supervisor's health cache (target: ≤ 1.5× the floor), and
//!   `socket/floor_status_sized`, the echo floor answering with that same status (the
//!   client's cost of reading a reply of its size, which the small floor does not have).
//! * `socket/floor_unix_pingpong`: the floor, in the same run: the same request frame over a
//!   unix socket to a minimal echo server thread that reads one Content-Length frame,
//!   parses it and answers with its id.
//!
//! Both clients are the same blocking loop. After criterion, a custom loop of 20 000 round
//! trips each gives p50 and p99; the summary prints both, criterion's medians and the
//! ratios (target: relay ≤ 2× its floor).
//!
//! Needs `cargo build --release --workspace --bins` first (the daemon and fake_rs are child
//! processes).

mod common;

use common::{Daemon, bin, median_ns};
use criterion::{Criterion, criterion_group};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::{Duration, Instant};

/// Round trips of the custom percentile loop, per path.
const PERCENTILE_ROUNDS: usize = 20_000;

/// A blocking JSON-RPC client: one request, one response.
struct BlockingClient {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    next_id: u64,
    header: String,
}

impl BlockingClient {
    fn connect(path: &Path) -> std::io::Result<BlockingClient> {
        let stream = UnixStream::connect(path)?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(BlockingClient {
            writer: stream.try_clone()?,
            reader: BufReader::new(stream),
            next_id: 0,
            header: String::new(),
        })
    }

    /// Send `method` with the `params` given as a JSON text, return the whole response.
    fn call(&mut self, method: &str, params: &str) -> Value {
        self.next_id += 1;
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"{method}","params":{params}}}"#,
            self.next_id
        );
        let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        frame.extend_from_slice(body.as_bytes());
        self.writer.write_all(&frame).expect("write a request");
        let reply = read_frame(&mut self.reader, &mut self.header).expect("a response");
        serde_json::from_slice(&reply).expect("a JSON response")
    }
}

/// Read one Content-Length frame's body; `None` at end of file.
fn read_frame(reader: &mut impl BufRead, line: &mut String) -> Option<Vec<u8>> {
    let mut length = None;
    loop {
        line.clear();
        if reader.read_line(line).ok()? == 0 {
            return None;
        }
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        if let Some((name, value)) = trimmed.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().ok();
            }
        }
    }
    let mut body = vec![0; length?];
    reader.read_exact(&mut body).ok()?;
    Some(body)
}

/// The floor: a thread answering each frame with `{"jsonrpc":"2.0","id":<id>,"result":
/// <result>}`.
fn start_echo_server(path: &Path, result: Value) {
    let listener = UnixListener::bind(path).expect("bind the floor socket");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let result = result.clone();
            std::thread::spawn(move || {
                let mut writer = stream.try_clone().expect("clone");
                let mut reader = BufReader::new(stream);
                let mut line = String::new();
                while let Some(body) = read_frame(&mut reader, &mut line) {
                    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let reply = serde_json::to_vec(&json!({
                        "jsonrpc": "2.0",
                        "id": request.get("id").cloned().unwrap_or(Value::Null),
                        "result": result,
                    }))
                    .expect("json");
                    let mut frame = format!("Content-Length: {}\r\n\r\n", reply.len()).into_bytes();
                    frame.extend_from_slice(&reply);
                    if writer.write_all(&frame).is_err() {
                        return;
                    }
                }
            });
        }
    });
}

impl Daemon {
    fn start() -> Daemon {
        let daemon = Daemon::spawn(&format!(
            "config_version = 1\n[[plugin]]\nid = \"fake_rs\"\nentrypoint = [{fake:?}]\n\
             [[plugin]]\nid = \"fake_rs_2\"\nentrypoint = [{fake:?}]\n",
            fake = bin("fake_rs").display().to_string()
        ));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(mut client) = BlockingClient::connect(&daemon.socket) {
                if client.call("runner.version", "{}").get("result").is_some() {
                    break;
                }
            }
            assert!(Instant::now() < deadline, "utter daemon did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
        daemon
    }

    /// A client authenticated with the token (the bench binary is not `utter`).
    fn client(&self) -> BlockingClient {
        let token = std::fs::read_to_string(&self.token_file).expect("token file");
        let mut client = BlockingClient::connect(&self.socket).expect("connect");
        let auth = client.call("runner.auth", &json!({"token": token.trim()}).to_string());
        assert_eq!(auth["result"], json!({}), "{auth}");
        client
    }
}

/// The runner allows 1000 requests per 10 s on one connection; the relay client moves to a
/// fresh connection (outside the timed part) before it gets there.
const REQUESTS_PER_CONNECTION: u32 = 900;

/// A relay client that reconnects before the rate limit.
struct RelayClient<'a> {
    daemon: &'a Daemon,
    client: BlockingClient,
    used: u32,
}

impl RelayClient<'_> {
    /// Make sure the next call is allowed (untimed).
    fn prepare(&mut self) {
        if self.used >= REQUESTS_PER_CONNECTION {
            self.client = self.daemon.client();
            self.used = 0;
        }
        self.used += 1;
    }
}

/// Time `iters` calls of `call`, running `prepare` untimed before each.
fn timed(iters: u64, mut prepare: impl FnMut(), mut call: impl FnMut()) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        prepare();
        let start = Instant::now();
        call();
        total += start.elapsed();
    }
    total
}

const INVOKE_PARAMS: &str = r#"{"plugin":"fake_rs","method":"action.invoke","params":{"op":"open_url","args":{"url":"https://www.youtube.com"},"provenance":"user","dry_run":true}}"#;

fn relay(client: &mut BlockingClient) {
    let reply = client.call("runner.invoke", INVOKE_PARAMS);
    debug_assert_eq!(reply["result"]["ok"], true, "{reply}");
    if reply.get("result").is_none() {
        panic!("runner.invoke failed: {reply}");
    }
}

fn version(client: &mut BlockingClient) {
    let reply = client.call("runner.version", "{}");
    assert!(reply.get("result").is_some());
}

fn status(client: &mut BlockingClient) {
    let reply = client.call("runner.status", "{}");
    assert_eq!(reply["result"]["plugins"][1]["status"], "ok", "{reply}");
}

fn floor(client: &mut BlockingClient) {
    let reply = client.call("runner.invoke", INVOKE_PARAMS);
    assert!(reply.get("result").is_some());
}

/// p50 and p99 of `rounds` calls of `call` (each after an untimed `prepare`), after a
/// warm-up.
fn percentiles(
    rounds: usize,
    mut prepare: impl FnMut(),
    mut call: impl FnMut(),
) -> (Duration, Duration) {
    for _ in 0..1000 {
        prepare();
        call();
    }
    let mut times: Vec<Duration> = (0..rounds)
        .map(|_| {
            prepare();
            let start = Instant::now();
            call();
            start.elapsed()
        })
        .collect();
    times.sort_unstable();
    let at = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    (at(0.50), at(0.99))
}

struct Percentiles {
    relay: (Duration, Duration),
    version: (Duration, Duration),
    status: (Duration, Duration),
    floor: (Duration, Duration),
    floor_sized: (Duration, Duration),
    /// The status reply's length, bytes.
    status_bytes: usize,
}

fn socket(c: &mut Criterion) -> Percentiles {
    let daemon = Daemon::start();
    let relay_client = std::cell::RefCell::new(RelayClient {
        daemon: &daemon,
        client: daemon.client(),
        used: 0,
    });
    let floor_dir = tempfile::tempdir().expect("temp dir");
    let floor_path = floor_dir.path().join("echo.sock");
    start_echo_server(
        &floor_path,
        json!({"ok": true, "dry_run": true, "detail": "fake_rs would open https://www.youtube.com"}),
    );
    let mut floor_client =
        BlockingClient::connect(&floor_path).expect("connect to the echo server");
    // The same floor answering with the runner's own status.
    let status_result =
        relay_client.borrow_mut().client.call("runner.status", "{}")["result"].clone();
    let status_bytes = serde_json::to_vec(&status_result).expect("json").len();
    let sized_path = floor_dir.path().join("echo-sized.sock");
    start_echo_server(&sized_path, status_result);
    let mut sized_client =
        BlockingClient::connect(&sized_path).expect("connect to the sized echo server");

    let mut group = c.benchmark_group("socket");
    group
        .sample_size(100)
        .measurement_time(Duration::from_secs(5));
    group.bench_function("relay_fake_rs", |b| {
        b.iter_custom(|iters| {
            timed(
                iters,
                || relay_client.borrow_mut().prepare(),
                || relay(&mut relay_client.borrow_mut().client),
            )
        })
    });
    group.bench_function("runner_version", |b| {
        b.iter_custom(|iters| {
            timed(
                iters,
                || relay_client.borrow_mut().prepare(),
                || version(&mut relay_client.borrow_mut().client),
            )
        })
    });
    group.bench_function("runner_status", |b| {
        b.iter_custom(|iters| {
            timed(
                iters,
                || relay_client.borrow_mut().prepare(),
                || status(&mut relay_client.borrow_mut().client),
            )
        })
    });
    group.bench_function("floor_unix_pingpong", |b| {
        b.iter_custom(|iters| timed(iters, || {}, || floor(&mut floor_client)))
    });
    group.bench_function("floor_status_sized", |b| {
        b.iter_custom(|iters| timed(iters, || {}, || floor(&mut sized_client)))
    });
    group.finish();

    Percentiles {
        floor: percentiles(PERCENTILE_ROUNDS, || {}, || floor(&mut floor_client)),
        floor_sized: percentiles(PERCENTILE_ROUNDS, || {}, || floor(&mut sized_client)),
        status_bytes,
        relay: percentiles(
            PERCENTILE_ROUNDS,
            || relay_client.borrow_mut().prepare(),
            || relay(&mut relay_client.borrow_mut().client),
        ),
        version: percentiles(
            PERCENTILE_ROUNDS,
            || relay_client.borrow_mut().prepare(),
            || version(&mut relay_client.borrow_mut().client),
        ),
        status: percentiles(
            PERCENTILE_ROUNDS,
            || relay_client.borrow_mut().prepare(),
            || status(&mut relay_client.borrow_mut().client),
        ),
    }
}

fn summary(p: &Percentiles) {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!("\n== socket relay summary ==");
    if let (Some(r), Some(v), Some(st), Some(f)) = (
        median_ns("socket/relay_fake_rs"),
        median_ns("socket/runner_version"),
        median_ns("socket/runner_status"),
        median_ns("socket/floor_unix_pingpong"),
    ) {
        println!(
            "criterion medians: relay {:.1} µs, runner.version {:.1} µs, runner.status {:.1} µs, floor {:.1} µs, ratio relay / floor {:.2}, status / floor {:.2}",
            r / 1000.0,
            v / 1000.0,
            st / 1000.0,
            f / 1000.0,
            r / f,
            st / f
        );
    }
    println!(
        "{PERCENTILE_ROUNDS} round trips each:\n  relay    client -> socket -> runner -> fake_rs -> back: p50 {:.1} µs, p99 {:.1} µs\n  version  client -> socket -> runner -> back (no plugin):  p50 {:.1} µs, p99 {:.1} µs\n  status   runner.status, two plugins, from the cache:     p50 {:.1} µs, p99 {:.1} µs\n  floor    unix socket ping-pong to an echo thread:         p50 {:.1} µs, p99 {:.1} µs\n  ratio relay / floor: p50 {:.2}, p99 {:.2}  (target p50 <= 2.0)\n  ratio status / floor: p50 {:.2}, p99 {:.2}  (target p50 <= 1.5)\n  floor with the status's {} bytes as its reply:   p50 {:.1} µs, p99 {:.1} µs\n  ratio status / that floor: p50 {:.2}, p99 {:.2}",
        us(p.relay.0),
        us(p.relay.1),
        us(p.version.0),
        us(p.version.1),
        us(p.status.0),
        us(p.status.1),
        us(p.floor.0),
        us(p.floor.1),
        us(p.relay.0) / us(p.floor.0),
        us(p.relay.1) / us(p.floor.1),
        us(p.status.0) / us(p.floor.0),
        us(p.status.1) / us(p.floor.1),
        p.status_bytes,
        us(p.floor_sized.0),
        us(p.floor_sized.1),
        us(p.status.0) / us(p.floor_sized.0),
        us(p.status.1) / us(p.floor_sized.1),
    );
}

fn bench(c: &mut Criterion) {
    let percentiles = socket(c);
    summary_later(percentiles);
}

/// Criterion prints its own report when the group ends; the summary goes last.
fn summary_later(p: Percentiles) {
    SUMMARY.with(|s| *s.borrow_mut() = Some(p));
}

thread_local! {
    static SUMMARY: std::cell::RefCell<Option<Percentiles>> = const { std::cell::RefCell::new(None) };
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    SUMMARY.with(|s| {
        if let Some(p) = s.borrow().as_ref() {
            summary(p);
        }
    });
}
