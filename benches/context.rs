//! The desktop context's cost (criterion plus percentile loops). Prints figures; asserts
//! nothing.
//!
//! Against a real headless sway with three foot windows (see
//! `plugins/compositor/tests/sway_session`), with the release `utter-compositor` and the
//! rules router (`utter plugin rules`) run by an in-process runner:
//!
//! * `context/snapshot_through_runner`: `Runner::context_now`, i.e. the runner → compositor
//!   plugin `context.snapshot` → runner round trip, answered from the plugin's event-stream
//!   cache (target: p50 ≤ 0.2 ms).
//! * `context/plan_with_context` and `context/plan_without_context`: a dry-run command
//!   ("pause", planned by the rules router and described by nobody: no action plugin runs)
//!   with the compositor plugin present (the runner reads the context and attaches it to
//!   `router.plan`) and absent: their difference is the added cost of the context.
//! * `sway action round trip` (a percentile loop, not criterion: each run changes sway):
//!   `runner.command("workspace N")` alternating 1 and 2, from the utterance to the plugin's
//!   answer, which comes after sway's own event showed the new focused workspace; checked once
//!   more with `swaymsg` after each run.
//!
//! Needs `cargo build --release --workspace --bins` first, and sway and foot (Debian).

mod common;

#[path = "../plugins/compositor/tests/sway_session/mod.rs"]
mod sway_session;

use common::{bin, median_ns};
use criterion::Criterion;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use sway_session::SwaySession;
use utter_core::config;
use utter_core::pipeline::CommandOptions;
use utter_core::runner::Runner;
use utter_core::supervisor::SupervisorOptions;

const ROUNDS: usize = 2_000;
const ACTION_ROUNDS: usize = 60;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// A runner with the rules router and, when `sway` is given, the compositor plugin on it.
async fn start_runner(sway: Option<&SwaySession>) -> Arc<Runner> {
    let utter = bin("utter").display().to_string();
    let mut text = format!(
        "config_version = 1\n[[plugin]]\nid = \"rules\"\nkind = \"router\"\nentrypoint = {}\n",
        json!([utter, "plugin", "rules"])
    );
    if let Some(sway) = sway {
        text.push_str(&format!(
            "[[plugin]]\nid = \"compositor\"\nkind = \"bundle\"\nentrypoint = {}\nenv = {{ SWAYSOCK = {:?}, NIRI_SOCKET = \"\" }}\n",
            json!([bin("utter-compositor").display().to_string()]),
            sway.socket.display().to_string()
        ));
    }
    let loaded = config::parse(&text, "bench.toml").expect("bench config");
    let options = SupervisorOptions::from_config(&loaded.config);
    let runner = Runner::start(loaded, options, None).await;
    for p in runner.plugins() {
        assert!(p.status.is_running(), "{p:?}");
    }
    runner
}

fn percentiles(mut us: Vec<f64>) -> (f64, f64) {
    us.sort_by(f64::total_cmp);
    let at = |q: f64| us[((q * us.len() as f64).ceil() as usize).clamp(1, us.len()) - 1];
    (at(0.5), at(0.99))
}

struct Rig {
    rt: tokio::runtime::Runtime,
    with: Arc<Runner>,
    without: Arc<Runner>,
}

fn bench(c: &mut Criterion, rig: &Rig) {
    let dry = CommandOptions {
        dry_run: true,
        ..Default::default()
    };
    let mut group = c.benchmark_group("context");
    group.bench_function("snapshot_through_runner", |b| {
        b.to_async(&rig.rt)
            .iter(|| async { rig.with.context_now().await.expect("a snapshot") });
    });
    group.bench_function("plan_with_context", |b| {
        b.to_async(&rig.rt)
            .iter(|| async { rig.with.command("pause", &dry, None).await.unwrap() });
    });
    group.bench_function("plan_without_context", |b| {
        b.to_async(&rig.rt)
            .iter(|| async { rig.without.command("pause", &dry, None).await.unwrap() });
    });
    group.finish();
}

fn main() {
    if let Some(filter) = std::env::args().skip(1).find(|a| !a.starts_with('-'))
        && !"context".contains(filter.as_str())
    {
        return;
    }
    let mut sway = SwaySession::start();
    for app in ["alpha", "beta", "gamma"] {
        sway.open_window(app);
    }
    let rt = runtime();
    let with = rt.block_on(start_runner(Some(&sway)));
    let without = rt.block_on(start_runner(None));
    let snapshot = rt.block_on(with.context_now()).expect("a snapshot");
    let windows = snapshot.snapshot["windows"].as_array().map_or(0, Vec::len);
    let bytes = snapshot.snapshot.to_string().len();
    let rig = Rig { rt, with, without };

    let mut criterion = Criterion::default()
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    bench(&mut criterion, &rig);
    criterion.final_summary();

    // Percentiles of the same three paths.
    let dry = CommandOptions {
        dry_run: true,
        ..Default::default()
    };
    let time = |f: &dyn Fn()| {
        (0..ROUNDS)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64() * 1e6
            })
            .collect::<Vec<f64>>()
    };
    let snap = time(&|| {
        rig.rt.block_on(rig.with.context_now()).unwrap();
    });
    let with_ctx = time(&|| {
        rig.rt
            .block_on(rig.with.command("pause", &dry, None))
            .unwrap();
    });
    let without_ctx = time(&|| {
        rig.rt
            .block_on(rig.without.command("pause", &dry, None))
            .unwrap();
    });

    // The action round trip on sway: utterance → sway's state changed.
    let mut action_us = Vec::with_capacity(ACTION_ROUNDS);
    let mut unverified = 0;
    for i in 0..ACTION_ROUNDS {
        let target = if i % 2 == 0 { "2" } else { "1" };
        let words = format!("workspace {target}");
        let t = Instant::now();
        let out = rig
            .rt
            .block_on(rig.with.command(&words, &CommandOptions::default(), None))
            .expect("the command runs");
        action_us.push(t.elapsed().as_secs_f64() * 1e6);
        assert!(out.all_ok(), "{out:?}");
        if out.results[0].verified != Some(true) {
            unverified += 1;
        }
        assert_eq!(sway.focused_workspace(), target, "sway did not change");
    }

    let (snap50, snap99) = percentiles(snap);
    let (with50, with99) = percentiles(with_ctx);
    let (without50, without99) = percentiles(without_ctx);
    let (act50, act99) = percentiles(action_us);
    println!();
    println!("context summary (sway 3 windows, snapshot {bytes} bytes, {windows} windows)");
    println!("  path                                   p50 µs     p99 µs  criterion median µs");
    let crit = |id: &str| median_ns(id).map_or("-".into(), |ns| format!("{:.1}", ns / 1e3));
    println!(
        "  snapshot through the runner        {snap50:>10.1} {snap99:>10.1} {:>10}",
        crit("context/snapshot_through_runner")
    );
    println!(
        "  dry-run plan with context          {with50:>10.1} {with99:>10.1} {:>10}",
        crit("context/plan_with_context")
    );
    println!(
        "  dry-run plan without context       {without50:>10.1} {without99:>10.1} {:>10}",
        crit("context/plan_without_context")
    );
    println!(
        "  added by the context (p50)         {:>10.1}",
        with50 - without50
    );
    println!(
        "  sway action round trip ({ACTION_ROUNDS} runs) {act50:>10.1} {act99:>10.1}   ({unverified} unverified)"
    );
    drop(rig);
}
