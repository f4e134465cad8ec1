//! `llm.choose` in process: llama.cpp with SmolLM2-135M-Instruct (Q4_1) scoring 5, 20 and
//! 50 candidates (percentile loops; prints figures, asserts only that a choice is an offered
//! id).
//!
//! * `cold`: labels never seen, so the content-free prompt is scored too (two prompts, each
//!   decoded once and shared by the candidates of its batch);
//! * `warm`: the same labels again with a new utterance: the content-free scores are kept,
//!   and only the part of the prompt after the shared instruction is decoded.
//!
//! `tests/fetch-llm-model.sh && cargo bench -p utter-llm --features llama --bench choose`
//! (the model's path: `$UTTER_TEST_LLM_MODEL`, else target/models/).

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;
use utter_llm::choose::ChooseRequest;
use utter_llm::{Cancel, ContentFree, Scored, llama::Llama, score};
use utter_protocol::serde_json::json;

const RUNS: usize = 20;

const NAMES: &[&str] = &[
    "GitHub",
    "GitLab",
    "Gmail",
    "YouTube",
    "Reddit",
    "Wikipedia",
    "Arch Wiki",
    "niri wiki",
    "Firefox",
    "Chromium",
    "Thunderbird Mail",
    "Spotify",
    "Signal",
    "Discord",
    "Steam",
    "Calculator",
    "Calendar",
    "Files",
    "Text Editor",
    "Visual Studio Code",
    "Proton Mail",
    "Outlook",
    "Netflix",
    "Twitch",
    "Hacker News",
    "Stack Overflow",
    "LinkedIn",
    "DuckDuckGo",
    "Google Maps",
    "crates.io",
    "docs.rs",
    "foot",
    "Ghostty",
    "Alacritty",
    "Zen Browser",
    "OBS Studio",
    "KeePassXC",
    "LibreOffice Writer",
    "Nautilus",
    "GIMP",
    "VLC",
    "mpv",
    "Rhythmbox",
    "Celluloid",
    "Shotwell",
    "Evolution",
    "Kate",
    "Fractal",
    "Yelp",
    "Redis",
];

fn request(utterance: &str, n: usize, round: usize) -> ChooseRequest {
    // A round's own suffix makes the labels new (cold); round 0's are reused (warm).
    let candidates: Vec<_> = NAMES[..n]
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let label = if round == 0 {
                format!("open {name}")
            } else {
                format!("open {name} {round}")
            };
            json!({"id": format!("c{i}"), "summary": label})
        })
        .collect();
    ChooseRequest::from_params(&json!({"utterance": utterance, "candidates": candidates}))
        .expect("a valid request")
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let model = std::env::var_os("UTTER_TEST_LLM_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../target/models/SmolLM2-135M-Instruct.Q4_1.gguf")
        });
    let started = Instant::now();
    let llama = Llama::load(&model, 2).expect("the model loads (tests/fetch-llm-model.sh)");
    println!(
        "load: {:.0} ms ({})",
        started.elapsed().as_secs_f64() * 1e3,
        model.display()
    );
    let heard = [
        "open gate hub",
        "launch fire fox",
        "pause spot if i",
        "open nearly wiki",
    ];
    for n in [5, 20, 50] {
        let cache = Mutex::new(ContentFree::default());
        // Warm the cache with round 0's labels.
        score(&llama, 1, &request("open it", n, 0), &cache, &Cancel::new()).expect("scored");
        let (mut cold, mut warm) = (Vec::new(), Vec::new());
        for run in 0..RUNS {
            let utterance = heard[run % heard.len()];
            let r = request(utterance, n, run + 1);
            let t = Instant::now();
            let s = score(&llama, 1, &r, &cache, &Cancel::new()).expect("scored");
            cold.push(t.elapsed().as_secs_f64() * 1e3);
            let r = request(utterance, n, 0);
            let t = Instant::now();
            let s2 = score(&llama, 1, &r, &cache, &Cancel::new()).expect("scored");
            warm.push(t.elapsed().as_secs_f64() * 1e3);
            for s in [s, s2] {
                let Scored::Calibrated(s) = s else {
                    panic!("numbers")
                };
                assert!(s.calibrated_argmax() < n);
            }
        }
        cold.sort_by(f64::total_cmp);
        warm.sort_by(f64::total_cmp);
        println!(
            "llm.choose {n:>2} candidates: cold p50 {:>6.1} ms p99 {:>6.1} ms | warm p50 {:>6.1} ms p99 {:>6.1} ms",
            percentile(&cold, 0.5),
            percentile(&cold, 0.99),
            percentile(&warm, 0.5),
            percentile(&warm, 0.99)
        );
    }
}
