//! D-Bus benchmark (criterion). Prints figures; asserts nothing.
//!
//! * `dbus/runner_status`: a `dev.utter.Runner1.Status()` call through a private
//!   `dbus-daemon` to a runner (with one `fake_rs` plugin) served by `utter::dbus::serve_on`,
//!   including the uid check and the JSON of the status.
//! * `dbus/floor_trivial_call`: the floor, in the same run and through the same bus: a bare
//!   zbus method call to a trivial interface that returns a ready-made string as long as the
//!   status JSON.
//!
//! The served side runs on a thread of its own (one current-thread runtime, as `utter daemon`
//! has); the calls come from criterion's runtime on a separate connection. Needs
//! `dbus-daemon` and `cargo build --release --workspace --bins` first. At the end it prints
//! both medians and their ratio.

mod common;

use common::{bin, median_ns};
use criterion::{Criterion, criterion_group};
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::Duration;
use utter_core::config;
use utter_core::runner::Runner;
use utter_core::supervisor::SupervisorOptions;

const FLOOR_NAME: &str = "dev.utter.BenchFloor1";
const FLOOR_PATH: &str = "/dev/utter/BenchFloor1";

/// A private bus, killed on drop.
struct PrivateBus {
    address: String,
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl PrivateBus {
    fn start() -> PrivateBus {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut child = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--print-address=1"])
            .arg(format!(
                "--address=unix:path={}",
                dir.path().join("bus").display()
            ))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("dbus-daemon runs (apt-get install dbus-daemon)");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("dbus-daemon prints its address");
        PrivateBus {
            address: line.trim().to_owned(),
            child,
            _dir: dir,
        }
    }
}

impl Drop for PrivateBus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The floor: one method returning a prepared string.
struct Floor {
    answer: String,
}

#[zbus::interface(name = "dev.utter.BenchFloor1")]
impl Floor {
    fn status(&self) -> String {
        self.answer.clone()
    }
}

/// Serve the runner and the floor on `address` from a thread of their own until `stop` fires.
fn serve(address: String, stop: tokio::sync::oneshot::Receiver<()>) -> std::thread::JoinHandle<()> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let text = format!(
                "config_version = 1\n[[plugin]]\nid = \"fake_rs\"\nentrypoint = [{:?}]\n",
                bin("fake_rs").display().to_string()
            );
            let loaded = config::parse(&text, "bench.toml").expect("bench config");
            let options = SupervisorOptions::from_config(&loaded.config);
            let runner = Runner::start(loaded, options, None).await;
            assert!(runner.plugins().iter().all(|p| p.status.is_running()));
            let status_len = serde_json::to_string(&runner.status())
                .expect("status JSON")
                .len();
            let bus = utter::dbus::serve_on(runner.clone(), &address)
                .await
                .expect("the runner is served on the private bus");
            let floor = zbus::connection::Builder::address(address.as_str())
                .expect("address")
                .serve_at(
                    FLOOR_PATH,
                    Floor {
                        answer: "x".repeat(status_len),
                    },
                )
                .expect("serve the floor")
                .name(FLOOR_NAME)
                .expect("name")
                .build()
                .await
                .expect("floor connection");
            ready_tx.send(()).expect("ready");
            let _ = stop.await;
            drop(floor);
            bus.close().await;
            runner.shutdown().await;
        });
    });
    ready_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the served side starts");
    handle
}

fn dbus(c: &mut Criterion) {
    let bus = PrivateBus::start();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
    let server = serve(bus.address.clone(), stop_rx);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let client = rt.block_on(async {
        zbus::connection::Builder::address(bus.address.as_str())
            .expect("address")
            .build()
            .await
            .expect("client connection")
    });
    let call = |name: &'static str, path: &'static str, iface: &'static str| {
        let client = client.clone();
        async move {
            let reply = client
                .call_method(Some(name), path, Some(iface), "Status", &())
                .await
                .expect("Status answered");
            let text: String = reply.body().deserialize().expect("a string");
            assert!(!text.is_empty());
        }
    };
    let mut group = c.benchmark_group("dbus");
    group
        .sample_size(100)
        .measurement_time(Duration::from_secs(5));
    group.bench_function("runner_status", |b| {
        b.to_async(&rt).iter(|| {
            call(
                utter::dbus::BUS_NAME,
                utter::dbus::OBJECT_PATH,
                utter::dbus::INTERFACE,
            )
        })
    });
    group.bench_function("floor_trivial_call", |b| {
        b.to_async(&rt)
            .iter(|| call(FLOOR_NAME, FLOOR_PATH, FLOOR_NAME))
    });
    group.finish();
    drop(client);
    let _ = stop_tx.send(());
    let _ = server.join();
}

criterion_group!(benches, dbus);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    let runner = median_ns("dbus/runner_status");
    let floor = median_ns("dbus/floor_trivial_call");
    println!("\n== summary (medians) ==");
    if let (Some(r), Some(f)) = (runner, floor) {
        println!("D-Bus Status() of the runner:      {:.1} µs", r / 1000.0);
        println!("floor (trivial zbus method call):  {:.1} µs", f / 1000.0);
        println!("ratio runner / floor:              {:.2}", r / f);
    } else {
        println!("(no estimates found under target/criterion/dbus/)");
    }
}
