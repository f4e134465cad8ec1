//! The spoken test set (`tests/corpus/spoken.toml`): every command spoken by espeak-ng in
//! three voices at two speeds, transcribed by the real `utter-stt-whisper` plugin with
//! Whisper tiny.en (fetched by `tests/fetch-whisper-model.sh`) and the runner's own decoding
//! settings — the fitted window, the router's vocabulary (`router.vocabulary` of the real
//! `utter-rules`) as the prompt, five hypotheses re-ranked by the runner's rule
//! ([`Rerank`]) — then planned by the real `utter-rules` in the case's desktop context and
//! judged as `utter eval` judges. Prints the accuracy per voice, speed and category, and
//! every miss; fails below a floor, so a regression in recognition or routing is seen.
//!
//! The audio goes to the plugin as samples (`samples_b64`), not through the microphone,
//! so that 840 utterances take about a quarter of an hour on two cores rather than the half
//! hour of playing them in real time; `tests/voice.rs` plays commands into the private
//! PipeWire microphone. `UTTER_SPOKEN_SECONDS` bounds the run by time (CI sets it): the
//! utterances are then taken in an order each prefix of which is spread evenly over the
//! categories, voices and speeds, and the accuracy (and its floor) is that sample's.
//!
//! Debian packages: espeak-ng, sox, python3-pip (the model fetch).

use crate::common;

use common::{bin, repo_root, require_program, whisper_model};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::Instant;
use utter_core::runner::voice::{Rerank, plan_kind};
use utter_protocol::serde_json::{Value, json};
use utter_protocol::testkit::{SpawnOptions, TestPlugin};
use utter_rules::eval::{self, Report, Verdict};

/// The voices and speeds (words per minute) every case is spoken in.
const VOICES: &[&str] = &["en-us", "en-gb", "en-gb-scotland"];
const SPEEDS: &[u32] = &[150, 185];

/// The accuracy below which the test fails: a guard against regressions, under the 57%
/// measured when the set was made (the goal is 95%). A sample (`UTTER_SPOKEN_SECONDS`) is
/// held to [`floor_for`] instead.
const FLOOR: f64 = 0.50;

/// The floor for `heard` of the set's `all` utterances: [`FLOOR`] for the whole set; for a
/// sample, two standard errors of a sample that size below it, so that a set still at the
/// floor fails by chance about once in forty runs of a fresh sample (CI's sample of about
/// 110 is held to 41%: a broken recogniser or router fails, a drop of a few points is only
/// seen by the whole set).
fn floor_for(heard: usize, all: usize) -> f64 {
    if heard >= all {
        return FLOOR;
    }
    FLOOR - 2.0 * (FLOOR * (1.0 - FLOOR) / heard.max(1) as f64).sqrt()
}

#[test]
fn a_sample_is_held_to_a_floor_two_standard_errors_lower() {
    assert_eq!(floor_for(840, 840), FLOOR);
    assert!((floor_for(100, 840) - (FLOOR - 0.1)).abs() < 1e-9);
    assert!(floor_for(400, 840) > floor_for(100, 840));
}

/// Set to `1` to score the configuration before issue 15 instead (the full 30 s window,
/// one hypothesis, no prompt), for comparison; the floor does not apply then.
const BASELINE_ENV: &str = "UTTER_SPOKEN_BASELINE";

/// Another faster-whisper model directory to hear the set with (default: tiny.en, fetched
/// by `tests/fetch-whisper-model.sh`), to compare models on the same set.
const MODEL_ENV: &str = "UTTER_SPOKEN_MODEL";

/// A number of utterances to take (the first of [`sample_order`]) instead of all: two
/// settings compared on the same sample.
const COUNT_ENV: &str = "UTTER_SPOKEN_COUNT";

/// How long one transcription may take.
const TRANSCRIBE_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Seconds the set may take (CI sets it: `.ci/run`). Unset or 0: every utterance. With a
/// budget, utterances are taken in [`sample_order`] until it is spent, so the accuracy is
/// that of a sample spread evenly over the categories, voices and speeds.
const BUDGET_ENV: &str = "UTTER_SPOKEN_SECONDS";

/// Every utterance of the set, (case index, voice, speed), in an order each prefix of which
/// is a fair sample: every category in proportion to its size (an utterance's place is its
/// fractional place in its category's own list), each case said once before any is said
/// twice, and the voices and speeds rotated from case to case across the whole set (not
/// within each category: categories of ten cases would all start on the same three).
fn sample_order(cases: &[eval::Case]) -> Vec<(usize, &'static str, u32)> {
    let combos: Vec<(&'static str, u32)> = VOICES
        .iter()
        .flat_map(|v| SPEEDS.iter().map(move |s| (*v, *s)))
        .collect();
    let mut by_category: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, case) in cases.iter().enumerate() {
        by_category.entry(&case.category).or_default().push(i);
    }
    let mut keyed = Vec::new();
    // The rotation of each category starts where the one before it ended.
    let mut offset = 0;
    for members in by_category.values() {
        let len = members.len() * combos.len();
        for round in 0..combos.len() {
            for (j, &case) in members.iter().enumerate() {
                let k = round * members.len() + j;
                let (voice, speed) = combos[(offset + j + round) % combos.len()];
                keyed.push(((2 * k + 1) as f64 / (2 * len) as f64, (case, voice, speed)));
            }
        }
        offset += members.len();
    }
    // A stable sort: equal places keep the categories' order.
    keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
    keyed.into_iter().map(|(_, u)| u).collect()
}

#[test]
fn a_prefix_of_the_sample_order_covers_every_category_in_proportion() {
    let case = |category: &str, say: &str| eval::Case {
        category: category.into(),
        say: say.into(),
        focused: None,
        windows: Vec::new(),
        compositor: None,
        expect: Vec::new(),
        escalate: None,
        note: None,
    };
    // Three categories of ten cases (as the set's are) and a smaller one.
    let mut cases = Vec::new();
    for category in ["a", "b", "c"] {
        for i in 0..10 {
            cases.push(case(category, &format!("{category}{i}")));
        }
    }
    for i in 0..5 {
        cases.push(case("small", &format!("s{i}")));
    }
    let order = sample_order(&cases);
    let combos = VOICES.len() * SPEEDS.len();
    assert_eq!(order.len(), cases.len() * combos);
    let all: std::collections::BTreeSet<_> = order.iter().collect();
    assert_eq!(all.len(), order.len(), "each utterance once");
    // The first 35: each case once, so each category in proportion to its size.
    let head = &order[..35];
    let cases_seen: std::collections::BTreeSet<usize> = head.iter().map(|u| u.0).collect();
    assert_eq!(cases_seen.len(), 35, "{head:?}");
    // Every voice and speed about as often as the others.
    let mut per_combo: BTreeMap<(&str, u32), usize> = BTreeMap::new();
    for (_, voice, speed) in head {
        *per_combo.entry((voice, *speed)).or_default() += 1;
    }
    assert_eq!(per_combo.len(), combos, "{per_combo:?}");
    assert!(
        per_combo.values().all(|n| (5..=7).contains(n)),
        "{per_combo:?}"
    );
}

/// 16 kHz mono f32 samples of `text` said by `voice` at `speed` words per minute.
fn speak(text: &str, voice: &str, speed: u32) -> Vec<f32> {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(
            "espeak-ng -v \"$1\" -s \"$2\" --stdout \"$3\" | sox -q -t wav - -r 16000 -c 1 -e float -b 32 -t raw -",
        )
        .args(["sh", voice, &speed.to_string(), text])
        .output()
        .expect("espeak-ng and sox run");
    assert!(out.status.success(), "espeak-ng/sox failed: {out:?}");
    out.stdout
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn b64(samples: &[f32]) -> String {
    use base64::Engine as _;
    let bytes: Vec<u8> = samples.iter().flat_map(|s| s.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The rules router in a private home with the corpus's applications installed, as the
/// command corpus test starts it.
async fn start_router(home: &tempfile::TempDir) -> TestPlugin {
    let dir = |sub: &str| {
        let path = home.path().join(sub);
        std::fs::create_dir_all(&path).expect("mkdir");
        path.into_os_string()
    };
    let env: Vec<(OsString, OsString)> = vec![
        ("HOME".into(), dir("home")),
        ("XDG_CONFIG_HOME".into(), dir("config")),
        ("XDG_DATA_HOME".into(), dir("data")),
        (
            "XDG_DATA_DIRS".into(),
            repo_root().join("tests/corpus").into_os_string(),
        ),
        ("NIRI_CONFIG".into(), "".into()),
        ("UTTER_SITES".into(), "".into()),
        ("UTTER_SEARCH_URL".into(), "".into()),
    ];
    TestPlugin::start(
        &[bin("utter-rules").into_os_string()],
        SpawnOptions {
            env,
            ..SpawnOptions::default()
        },
    )
    .await
    .expect("utter-rules starts")
}

/// `case` with every string of its expected arguments in lower case (see [`lowercased`]).
fn lowercased_case(case: &eval::Case) -> eval::Case {
    fn lower(v: &mut toml::Value) {
        match v {
            toml::Value::String(s) => *s = s.to_lowercase(),
            toml::Value::Array(a) => a.iter_mut().for_each(lower),
            toml::Value::Table(t) => t.iter_mut().for_each(|(_, v)| lower(v)),
            _ => {}
        }
    }
    let mut case = case.clone();
    for expected in &mut case.expect {
        expected.args.iter_mut().for_each(|(_, v)| lower(v));
    }
    case
}

/// `planned` with every string of its steps' arguments in lower case: speech has no case,
/// and Whisper capitalises as it likes ("Click the Send button."), while the set's
/// expectations are written as typed; both sides are compared in lower case.
fn lowercased(planned: &Value) -> Value {
    fn lower(v: &mut Value) {
        match v {
            Value::String(s) => *s = s.to_lowercase(),
            Value::Array(a) => a.iter_mut().for_each(lower),
            Value::Object(o) => o.values_mut().for_each(lower),
            _ => {}
        }
    }
    let mut planned = planned.clone();
    if let Some(steps) = planned.get_mut("steps").and_then(Value::as_array_mut) {
        for step in steps {
            if let Some(args) = step.get_mut("args") {
                lower(args);
            }
        }
    }
    planned
}

#[derive(Default)]
struct Tally {
    right: usize,
    total: usize,
}

impl Tally {
    fn add(&mut self, ok: bool) {
        self.total += 1;
        self.right += usize::from(ok);
    }
    fn show(&self) -> String {
        format!(
            "{}/{} ({:.1}%)",
            self.right,
            self.total,
            100.0 * self.right as f64 / self.total.max(1) as f64
        )
    }
}

// Ignored in a plain `cargo test`: tests/run.sh runs it on its own with its output shown, so
// that every run prints the accuracy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by tests/run.sh: cargo test --workspace --test integration spoken:: -- --ignored --nocapture"]
async fn the_spoken_set_is_heard_and_planned() {
    require_program("espeak-ng", "espeak-ng");
    require_program("sox", "sox");
    let model = match std::env::var_os(MODEL_ENV).filter(|m| !m.is_empty()) {
        Some(dir) => std::path::PathBuf::from(dir),
        None => whisper_model(),
    };
    println!("model: {}", model.display());
    let text = std::fs::read_to_string(repo_root().join("tests/corpus/spoken.toml"))
        .expect("the spoken set is there");
    let cases = eval::parse(&text, "spoken.toml").expect("the spoken set parses");
    assert!(cases.len() >= 120, "{} cases", cases.len());
    let categories: std::collections::BTreeSet<&str> =
        cases.iter().map(|c| c.category.as_str()).collect();
    assert!(categories.len() >= 12, "{categories:?}");

    let home = tempfile::tempdir().expect("temp dir");
    let router = start_router(&home).await;
    let stt = TestPlugin::start(
        &[bin("utter-stt-whisper").into_os_string()],
        SpawnOptions::default(),
    )
    .await
    .expect("utter-stt-whisper starts");
    stt.request(
        "stt.load",
        json!({"model": model.display().to_string(), "language": "en"}),
    )
    .await
    .expect("the model loads");

    let baseline = std::env::var(BASELINE_ENV).is_ok_and(|v| v == "1");
    let decoding = if baseline {
        json!({"window": "full", "beam_size": 5, "hypotheses": 1})
    } else {
        json!({"window": "fit", "beam_size": 5, "hypotheses": 3})
    };
    println!(
        "decoding: {decoding}{}",
        if baseline {
            " (baseline, no prompt)"
        } else {
            " with the router's vocabulary"
        }
    );
    let budget = std::env::var(BUDGET_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|s| *s > 0)
        .map(std::time::Duration::from_secs);
    let mut order = sample_order(&cases);
    if let Some(count) = std::env::var(COUNT_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
    {
        order.truncate(count);
    }
    let started = Instant::now();
    let mut per_voice: BTreeMap<String, Tally> = BTreeMap::new();
    let mut total = Tally::default();
    let mut report = Report::default();
    let mut misses = Vec::new();
    let mut inference = Vec::new();
    let mut prompts: BTreeMap<usize, String> = BTreeMap::new();
    for &(index, voice, speed) in &order {
        if budget.is_some_and(|b| started.elapsed() >= b) {
            break;
        }
        let case = &cases[index];
        let context = case.context();
        let prompt = match prompts.get(&index) {
            Some(prompt) => prompt.clone(),
            None => {
                let vocabulary = router
                    .request("router.vocabulary", json!({"context": context}))
                    .await
                    .expect("router.vocabulary");
                let prompt = if baseline {
                    String::new()
                } else {
                    vocabulary["prompt"].as_str().unwrap_or("").to_owned()
                };
                prompts.insert(index, prompt.clone());
                prompt
            }
        };
        let lowered = lowercased_case(case);
        let samples = speak(&case.say, voice, speed);
        let mut params = json!({
            "samples_b64": b64(&samples),
            "format": "audio.pcm_f32le@1", "rate": 16000, "channels": 1,
            "language": "en", "prompt": prompt,
        });
        for (k, v) in decoding.as_object().expect("an object") {
            params[k] = v.clone();
        }
        // A transcription takes about a second; on a loaded two-core machine (CI, another
        // build beside it) one can pass the test kit's default 5 s, so it gets 60 s: a hang
        // still fails, a slow machine does not.
        let heard = stt
            .request_with_timeout("stt.transcribe", params, Some(TRANSCRIBE_LIMIT))
            .await
            .expect("stt.transcribe");
        inference.push(heard["inference_ms"].as_f64().unwrap_or(0.0));
        // The runner's n-best rule, planning each hypothesis it wants.
        let list = heard["hypotheses"].as_array().cloned().unwrap_or_default();
        let mut rule = Rerank::default();
        let mut plans = Vec::new();
        for hypothesis in &list {
            let text = hypothesis["text"].as_str().unwrap_or("").trim();
            let mut plan = None;
            if !text.is_empty() && rule.wants(hypothesis["score"].as_f64()) {
                plan = Some(
                    router
                        .request(
                            "router.plan",
                            json!({"utterance": text, "provenance": "user", "context": context}),
                        )
                        .await
                        .expect("router.plan"),
                );
            }
            rule.record(plan.as_ref().map(plan_kind));
            plans.push(plan);
        }
        let pick = rule.pick();
        let transcript = list
            .get(pick)
            .and_then(|h| h["text"].as_str())
            .unwrap_or("")
            .to_owned();
        let planned = match plans.get(pick).cloned().flatten() {
            Some(plan) => plan,
            None if !transcript.trim().is_empty() => router
                .request(
                    "router.plan",
                    json!({"utterance": transcript, "provenance": "user", "context": context}),
                )
                .await
                .expect("router.plan"),
            None => json!({"steps": []}),
        };
        let verdict = eval::judge(&lowered, &lowercased(&planned));
        let ok = matches!(verdict, Verdict::Right);
        if !ok {
            misses.push(format!(
                "MISS [{}] {:?} ({voice} {speed} wpm) heard {:?} (of {}): {}",
                case.category,
                case.say,
                transcript,
                list.iter()
                    .filter_map(|h| Some(format!(
                        "{} {:.2}",
                        h["text"].as_str()?,
                        h["score"].as_f64().unwrap_or(f64::NAN)
                    )))
                    .collect::<Vec<_>>()
                    .join(" | "),
                planned["message"].as_str().unwrap_or("")
            ));
        }
        report.add(case, verdict);
        per_voice
            .entry(format!("{voice} {speed} wpm"))
            .or_default()
            .add(ok);
        total.add(ok);
    }
    for miss in &misses {
        println!("{miss}");
    }
    println!("spoken set by voice:");
    for (voice, tally) in &per_voice {
        println!("  {voice:<24} {}", tally.show());
    }
    println!("spoken set by category:\n{}", report.table());
    inference.sort_by(f64::total_cmp);
    println!(
        "spoken set: {} of {} utterances ({} of {} commands{}) in {:.0} s; inference p50 {:.0} ms, p90 {:.0} ms (debug plugin build)",
        total.total,
        order.len(),
        prompts.len(),
        cases.len(),
        match budget {
            Some(b) if total.total < order.len() => format!(
                "; a sample spread over categories, voices and speeds, bounded by {BUDGET_ENV}={}",
                b.as_secs()
            ),
            _ => String::new(),
        },
        started.elapsed().as_secs_f64(),
        inference[inference.len() / 2],
        inference[inference.len() * 9 / 10],
    );
    println!(
        "SPOKEN SET ACCURACY: {} (floor {:.1}%)",
        total.show(),
        floor_for(total.total, order.len()) * 100.0
    );
    let accuracy = total.right as f64 / total.total as f64;
    let floor = floor_for(total.total, order.len());
    assert!(
        baseline || accuracy >= floor,
        "the spoken set fell to {} (floor {:.1}% for {} of {} utterances)",
        total.show(),
        floor * 100.0,
        total.total,
        order.len()
    );
}
