//! In-app actions, measured end to end (percentile loops: each run changes the window, so
//! criterion's sampling does not fit). Prints figures; asserts nothing but that each run
//! had its effect.
//!
//! Against a real headless sway and the GTK form of `plugins/a11y/tests/fixtures/form.py`
//! on a private session and accessibility bus (the `desktop` test harness):
//!
//! * `type_text 100 chars, a11y`: `Runner::command("type <100 characters>")` with the
//!   rules router, the compositor plugin (context) and the a11y plugin (AT-SPI
//!   `EditableText`, read back), until the form has written the entry's new text.
//! * `type_keys 100 chars, keystrokes`: the input plugin's `action.invoke type_keys` (the
//!   Wayland virtual keyboard), until the form has written the entry's new text.
//! * `click_element, T1`: `Runner::command("click the blue button")` (rules → a11y
//!   `do_action`), from the utterance until the button's handler has written its marker.
//!
//! The entry is emptied between runs (ctrl+a, BackSpace; not timed). The form writes a file
//! on every change; the loop polls it every millisecond, so figures include up to 1 ms of
//! polling.
//!
//! Needs `cargo build --release --workspace --bins` first, and the Debian packages of the
//! harness (sway, dbus-daemon, at-spi2-core, libatk-adaptor, python3-gi, gir1.2-gtk-3.0,
//! wtype).

mod common;

#[path = "../plugins/a11y/tests/desktop/mod.rs"]
mod desktop;
#[path = "../plugins/compositor/tests/sway_session/mod.rs"]
mod sway_session;

use common::bin;
use desktop::Desktop;
use serde_json::{Value, json};
use std::ffi::OsString;
use std::sync::Arc;
use std::time::{Duration, Instant};
use utter_core::config;
use utter_core::pipeline::CommandOptions;
use utter_core::runner::Runner;
use utter_core::supervisor::SupervisorOptions;
use utter_protocol::testkit::{SpawnOptions, TestPlugin};

const RUNS: usize = 20;

fn text_of(len: usize) -> String {
    let words = "the quick brown fox jumps over a lazy dog ";
    words
        .chars()
        .cycle()
        .take(len)
        .collect::<String>()
        .trim_end()
        .to_owned()
        + "x"
}

async fn start_runner(desktop: &Desktop) -> Arc<Runner> {
    let utter = bin("utter").display().to_string();
    let runtime = desktop.sway.runtime_dir().display().to_string();
    let text = format!(
        "config_version = 1\n\
         [[plugin]]\nid = \"rules\"\nkind = \"router\"\nentrypoint = {rules}\n\
         [[plugin]]\nid = \"compositor\"\nkind = \"bundle\"\nentrypoint = {comp}\nenv = {{ SWAYSOCK = {sock:?}, NIRI_SOCKET = \"\" }}\n\
         [[plugin]]\nid = \"a11y\"\nkind = \"bundle\"\nentrypoint = {a11y}\nenv = {{ DBUS_SESSION_BUS_ADDRESS = {bus:?} }}\n\
         [[plugin]]\nid = \"input\"\nkind = \"action\"\nentrypoint = {input}\nenv = {{ WAYLAND_DISPLAY = \"wayland-1\", XDG_RUNTIME_DIR = {runtime:?} }}\n",
        rules = json!([utter, "plugin", "rules"]),
        comp = json!([utter, "plugin", "compositor"]),
        a11y = json!([utter, "plugin", "a11y"]),
        input = json!([bin("utter-input").display().to_string()]),
        sock = desktop.sway.socket.display().to_string(),
        bus = desktop.bus.address,
    );
    let loaded = config::parse(&text, "bench.toml").expect("bench config");
    let options = SupervisorOptions::from_config(&loaded.config);
    let runner = Runner::start(loaded, options, None).await;
    for p in runner.plugins() {
        assert!(p.status.is_running(), "{p:?}");
    }
    runner
}

async fn input_plugin(desktop: &Desktop) -> TestPlugin {
    let options = SpawnOptions {
        env: vec![
            (
                OsString::from("WAYLAND_DISPLAY"),
                OsString::from("wayland-1"),
            ),
            (
                OsString::from("XDG_RUNTIME_DIR"),
                desktop.sway.runtime_dir().as_os_str().to_owned(),
            ),
        ],
        timeout: Duration::from_secs(15),
        ..Default::default()
    };
    TestPlugin::start(&[bin("utter-input").into()], options)
        .await
        .expect("the input plugin starts")
}

async fn wait_for(desktop: &Desktop, name: &str, want: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if desktop.read(name).as_deref() == Some(want) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    false
}

async fn invoke(plugin: &TestPlugin, op: &str, args: Value, context: &Value) -> Value {
    plugin
        .request(
            "action.invoke",
            json!({"op": op, "args": args, "provenance": "user", "context": context}),
        )
        .await
        .unwrap_or_else(|e| panic!("{op}: {e:?}"))
}

async fn clear(keys: &TestPlugin, desktop: &Desktop, context: &Value) {
    if desktop.read("entry.txt").unwrap_or_default().is_empty() {
        return;
    }
    invoke(keys, "key", json!({"chord": "ctrl+a"}), context).await;
    invoke(keys, "key", json!({"chord": "BackSpace"}), context).await;
    assert!(
        wait_for(desktop, "entry.txt", "").await,
        "the entry did not empty"
    );
}

fn report(name: &str, mut ms: Vec<f64>) {
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((q * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1];
    println!(
        "{name:<36} p50 {:>7.2} ms   p90 {:>7.2} ms   max {:>7.2} ms   ({} runs)",
        at(0.5),
        at(0.9),
        at(1.0),
        ms.len()
    );
}

fn main() {
    if let Some(filter) = std::env::args().skip(1).find(|a| !a.starts_with('-'))
        && !"inapp".contains(filter.as_str())
    {
        return;
    }
    let desktop = Desktop::start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async {
        let runner = start_runner(&desktop).await;
        let keys = input_plugin(&desktop).await;
        let context = desktop.context();
        let text = text_of(100);
        assert_eq!(text.chars().count(), 100);
        let options = CommandOptions::default();

        let mut a11y = Vec::new();
        for _ in 0..RUNS {
            clear(&keys, &desktop, &context).await;
            let t = Instant::now();
            let out = runner
                .command(&format!("type {text}"), &options, None)
                .await
                .expect("type");
            assert!(wait_for(&desktop, "entry.txt", &text).await, "{out:?}");
            a11y.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let mut keystrokes = Vec::new();
        for _ in 0..RUNS {
            clear(&keys, &desktop, &context).await;
            let t = Instant::now();
            invoke(&keys, "type_keys", json!({"text": text}), &context).await;
            assert!(
                wait_for(&desktop, "entry.txt", &text).await,
                "keystrokes left {:?}",
                desktop.read("entry.txt")
            );
            keystrokes.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let mut clicks = Vec::new();
        for i in 1..=RUNS {
            let t = Instant::now();
            let out = runner
                .command("click the blue button", &options, None)
                .await
                .expect("click");
            assert!(
                wait_for(&desktop, "blue-clicked", &i.to_string()).await,
                "{out:?}"
            );
            clicks.push(t.elapsed().as_secs_f64() * 1e3);
            // The click moved the focus to the button; give it back to the entry.
            invoke(&keys, "key", json!({"chord": "shift+Tab"}), &context).await;
            invoke(&keys, "key", json!({"chord": "shift+Tab"}), &context).await;
        }
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        println!(
            "in-app actions, headless sway + GTK 3 ({RUNS} runs each; load {})",
            load.trim()
        );
        report("type_text 100 chars, a11y (runner)", a11y);
        report("type_keys 100 chars, keystrokes", keystrokes);
        report("click_element T1 (runner)", clicks);
        runner.shutdown().await;
    });
}
