//! The rules router's cost with 12 profiles and 500 installed applications (percentile
//! loops; prints figures, asserts only that each utterance planned as expected):
//!
//! * `plan, in process`: `rules::plan_steps` over the built-in catalog and phrases, 500
//!   applications, the 11 built-in profiles and one of the user's, for a mix of utterances
//!   (a site, an app launch, a browser shortcut in Firefox, a search, a terminal command in
//!   foot, an agent, a compositor phrase, a negative), p50 and p99 per utterance and over all.
//! * `router.plan through the plugin`: the real `utter-rules` binary over stdio with 500
//!   `.desktop` files and the user's profile, as the runner calls it (JSON-RPC framing and
//!   the process hop included; the first call, which scans the applications, is left out).
//! * `matcher`: the decision head's matcher (`decide::decide`) for an open verb over the
//!   catalog's sites, the 500 applications and the profiles.
//! * `profile reload`: reading every profile again (a changed file), and the per-plan check
//!   that nothing changed (one `read_dir` and a `stat` per file).
//!
//! `cargo build --release --workspace --bins && cargo bench --bench router`.

mod common;

use serde_json::json;
use std::ffi::OsString;
use std::time::{Duration, Instant};
use utter_protocol::testkit::{SpawnOptions, TestPlugin};
use utter_rules::apps::AppEntry;
use utter_rules::commands::CommandWords;
use utter_rules::context::Context;
use utter_rules::decide;
use utter_rules::phrases::{Curated, PhraseTable};
use utter_rules::plan::Sources;
use utter_rules::profiles::{Profiles, ProfilesSource};
use utter_rules::rules;
use utter_rules::sites::Catalog;
use utter_rules::text;

const RUNS: usize = 2000;

/// (utterance, focused app_id, expected first op).
const MIX: &[(&str, Option<&str>, &str)] = &[
    ("open youtube", None, "ensure_url"),
    ("launch calculator", None, "launch_app"),
    ("reload the page", Some("firefox-esr"), "key"),
    ("search youtube for lofi beats", None, "open_url"),
    ("run ls -la", Some("foot"), "terminal"),
    ("start claude", Some("foot"), "type_text"),
    ("move this to workspace 3", None, "niri"),
    ("tell me a joke", None, ""),
];

fn apps() -> Vec<AppEntry> {
    let mut apps: Vec<AppEntry> = (0..497)
        .map(|i| {
            AppEntry::new(
                &format!("org.example.App{i}"),
                &format!("Example Application {i}"),
                Some(&format!("Tool number {i}")),
                &[&format!("keyword{i}"), "example"],
            )
            .with_exec(&format!("example-app-{i}"))
        })
        .collect();
    for (id, name) in [
        ("org.gnome.Calculator", "Calculator"),
        ("firefox-esr", "Firefox ESR"),
        ("foot", "Foot"),
    ] {
        apps.push(AppEntry::new(id, name, None, &[]).with_exec(id));
    }
    apps
}

const USER_PROFILE: &str = "id = \"marker\"\nname = \"Marker\"\nkind = \"editor\"\napp_ids = [\"marker\"]\n[shortcuts]\n\"save\" = \"ctrl+s\"\n\"toggle preview\" = \"ctrl+shift+p\"\n[commands]\n\"export as html\" = \"ctrl+shift+e\"\n";

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

fn report(name: &str, mut times: Vec<Duration>) {
    times.sort();
    println!(
        "{name:<44} p50 {:>8.4} ms   p99 {:>8.4} ms   ({} runs)",
        percentile(&times, 0.5),
        percentile(&times, 0.99),
        times.len()
    );
}

fn in_process(profiles: &Profiles) {
    let catalog = Catalog::builtin().expect("catalog");
    let curated = Curated::builtin().expect("phrases");
    let words = CommandWords::builtin().expect("command words");
    let binds = PhraseTable::new();
    let apps = apps();
    let mut all = Vec::new();
    for (utterance, focused, op) in MIX {
        let context = Context::from_param(Some(&json!({
            "compositor": {"name": "niri"},
            "focused": focused.map(|f| json!({"app_id": f})),
            "windows": focused.map(|f| vec![json!({"app_id": f})]).unwrap_or_default(),
        })))
        .expect("context")
        .expect("some");
        let sources = Sources {
            catalog: &catalog,
            apps: &apps,
            curated: &curated,
            binds: &binds,
            context: Some(&context),
            utterance,
            profiles,
            words: &words,
        };
        let plan = || {
            let normalized = text::normalize(utterance);
            rules::plan_steps(text::strip_fillers(&normalized), &sources)
        };
        let first = plan();
        let got = first.as_ref().map(|s| s[0].op).unwrap_or("");
        assert_eq!(got, *op, "{utterance}: {first:?}");
        let mut times = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            let t = Instant::now();
            std::hint::black_box(plan()).ok();
            times.push(t.elapsed());
        }
        all.extend(times.iter().copied());
        report(&format!("plan, in process: {utterance:?}"), times);
    }
    report("plan, in process: all", all);

    // The decision head's matcher, when no rule plans: every site, the 500 applications and
    // the profiles are candidates of an open verb.
    let context = Context::default();
    for utterance in ["open gate hub", "launch the calculate or", "open sesame"] {
        let sources = Sources {
            catalog: &catalog,
            apps: &apps,
            curated: &curated,
            binds: &binds,
            context: Some(&context),
            utterance,
            profiles,
            words: &words,
        };
        let text = text::normalize(utterance);
        let mut times = Vec::with_capacity(RUNS / 4);
        for _ in 0..RUNS / 4 {
            let t = Instant::now();
            std::hint::black_box(decide::decide(
                &text,
                &sources,
                decide::Thresholds::default(),
            ));
            times.push(t.elapsed());
        }
        report(&format!("matcher, 540 candidates: {utterance:?}"), times);
    }
}

async fn through_the_plugin(profile_dir: &std::path::Path) {
    let home = tempfile::tempdir().expect("temp dir");
    let apps_dir = home.path().join("share/applications");
    std::fs::create_dir_all(&apps_dir).unwrap();
    for app in apps() {
        std::fs::write(
            apps_dir.join(format!("{}.desktop", app.id)),
            format!(
                "[Desktop Entry]\nType=Application\nName={}\nExec={}\n",
                app.name,
                app.exec.unwrap_or_default()
            ),
        )
        .unwrap();
    }
    let config = profile_dir.parent().and_then(|p| p.parent()).unwrap();
    let env: Vec<(OsString, OsString)> = vec![
        ("HOME".into(), home.path().into()),
        ("XDG_CONFIG_HOME".into(), config.into()),
        ("XDG_DATA_HOME".into(), home.path().join("none").into()),
        ("XDG_DATA_DIRS".into(), home.path().join("share").into()),
        ("NIRI_CONFIG".into(), "".into()),
    ];
    let plugin = TestPlugin::start(
        &[common::bin("utter-rules").into()],
        SpawnOptions {
            env,
            ..Default::default()
        },
    )
    .await
    .expect("utter-rules starts (cargo build --release --workspace --bins)");
    let health = plugin.request("plugin.health", json!({})).await.unwrap();
    println!("router health: {}", health["detail"]);
    let mut all = Vec::new();
    for (utterance, focused, op) in MIX {
        let params = json!({"utterance": utterance, "provenance": "user", "context": {
            "compositor": {"name": "niri"},
            "focused": focused.map(|f| json!({"app_id": f})),
        }});
        let first = plugin.request("router.plan", params.clone()).await.unwrap();
        assert_eq!(
            first["steps"][0]["op"].as_str().unwrap_or(""),
            *op,
            "{utterance}: {first}"
        );
        for _ in 0..RUNS / 4 {
            let t = Instant::now();
            plugin.request("router.plan", params.clone()).await.unwrap();
            all.push(t.elapsed());
        }
    }
    report("router.plan through the plugin: all", all);
}

fn reload(dir: &std::path::Path) {
    let mut times = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        let profiles = Profiles::load(Some(dir));
        times.push(t.elapsed());
        assert_eq!(profiles.len(), 12);
    }
    report("profile reload (12 profiles read and checked)", times);
    let source = ProfilesSource::new(Some(dir.to_owned()));
    source.current();
    let mut times = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        std::hint::black_box(source.current());
        times.push(t.elapsed());
    }
    report("profile change check (nothing changed)", times);
}

fn main() {
    // `cargo bench` passes --bench; nothing else is taken.
    let config = tempfile::tempdir().expect("temp dir");
    let dir = config.path().join("utter/profiles");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("marker.toml"), USER_PROFILE).unwrap();
    let profiles = Profiles::load(Some(&dir));
    assert_eq!(profiles.len(), 12, "{:?}", profiles.problems);
    in_process(&profiles);
    reload(&dir);
    tokio::runtime::Runtime::new()
        .expect("runtime")
        .block_on(through_the_plugin(&dir));
}
