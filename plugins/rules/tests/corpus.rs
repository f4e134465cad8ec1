//! The project's command corpus (`tests/corpus/commands.toml`) through the real
//! `utter-rules` binary, as the runner talks to it: each case's utterance in its desktop
//! context (none, a browser, a terminal, an editor focused), with the applications of
//! `tests/corpus/applications/` installed and nothing of this machine's (a private home,
//! no niri config, no user profiles). Every case must plan as its file says; the table of
//! [`utter_rules::eval::Report`] is printed either way.

use std::ffi::OsString;
use std::path::PathBuf;
use utter_protocol::serde_json::json;
use utter_protocol::testkit::{SpawnOptions, TestPlugin};
use utter_rules::eval::{self, Report};

const BIN: &str = env!("CARGO_BIN_EXE_utter-rules");

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/corpus")
}

/// The rules binary in a private home with the corpus's applications installed.
async fn start_router(home: &tempfile::TempDir) -> TestPlugin {
    start_router_with(home, corpus_dir()).await
}

/// The rules binary in a private home with the applications of `data_dir/applications`.
async fn start_router_with(home: &tempfile::TempDir, data_dir: PathBuf) -> TestPlugin {
    let dir = |sub: &str| {
        let path = home.path().join(sub);
        std::fs::create_dir_all(&path).expect("mkdir");
        path.into_os_string()
    };
    let env: Vec<(OsString, OsString)> = vec![
        ("HOME".into(), dir("home")),
        ("XDG_CONFIG_HOME".into(), dir("config")),
        ("XDG_DATA_HOME".into(), dir("data")),
        ("XDG_DATA_DIRS".into(), data_dir.into_os_string()),
        ("NIRI_CONFIG".into(), "".into()),
        ("UTTER_SITES".into(), "".into()),
        ("UTTER_SEARCH_URL".into(), "".into()),
    ];
    TestPlugin::start(
        &[BIN.into()],
        SpawnOptions {
            env,
            ..SpawnOptions::default()
        },
    )
    .await
    .expect("utter-rules starts")
}

/// Every case of `file` through `plugin`, scored.
async fn score(plugin: &TestPlugin, file: &str) -> (Vec<eval::Case>, Report) {
    let path = corpus_dir().join(file);
    let text = std::fs::read_to_string(&path).expect("the corpus is there");
    let cases = eval::parse(&text, file).expect("the corpus parses");
    let mut report = Report::default();
    for case in &cases {
        let planned = plugin
            .request(
                "router.plan",
                json!({"utterance": case.say, "provenance": "user", "context": case.context()}),
            )
            .await
            .unwrap_or_else(|e| panic!("router.plan {:?} failed: {e:?}", case.say));
        report.add(case, eval::judge(case, &planned));
    }
    (cases, report)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_project_corpus_plans_as_written() {
    let home = tempfile::tempdir().expect("temp dir");
    let plugin = start_router(&home).await;
    let (cases, report) = score(&plugin, "commands.toml").await;
    println!("{}", report.table());
    for miss in &report.misses {
        println!(
            "MISS [{}] {:?} (focused {:?}): {} — {}",
            miss.category, miss.say, miss.focused, miss.kind, miss.detail
        );
    }
    // The corpus the issue asks for: at least 400 cases, 20 per category, 40 negatives.
    assert!(cases.len() >= 400, "{} cases", cases.len());
    for (category, row) in &report.categories {
        let least = if category == "negative" { 40 } else { 20 };
        assert!(row.cases >= least, "{category}: {} cases", row.cases);
    }
    assert!(
        report.misses.is_empty(),
        "{} of {} cases planned otherwise than the corpus says (listed above)",
        report.misses.len(),
        cases.len()
    );
}

/// Score the held-out set in `tests/corpus/<dir>/` (its `commands.toml`, with its own
/// desktop entries), printing its table and misses under `label`: (right, false positives).
async fn score_held_out(dir: &str, label: &str) -> (usize, usize) {
    let home = tempfile::tempdir().expect("temp dir");
    let plugin = start_router_with(&home, corpus_dir().join(dir)).await;
    let (cases, report) = score(&plugin, &format!("{dir}/commands.toml")).await;
    println!("{label}:\n{}", report.table());
    for miss in &report.misses {
        println!(
            "MISS [{dir}] [{}] {:?} (focused {:?}): {} — {}",
            miss.category, miss.say, miss.focused, miss.kind, miss.detail
        );
    }
    let total = report.total();
    println!(
        "{label}: {} of {} right, {} more of the same effect",
        total.right,
        cases.len(),
        total.same_effect
    );
    (total.right, total.false_positives)
}

/// The held-out corpus (`tests/corpus/blind/`), written by someone who had not read the
/// router, from other voice tools' command lists and desktop habits: its table is printed
/// beside the project's own. Its score is a measure, not a target; the test fails only when
/// it falls below what the router reached last (a regression guard, raised as causes are
/// fixed) or a negative plans something new.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_held_out_corpus_is_scored() {
    let (right, false_positives) = score_held_out("blind", "held-out").await;
    assert!(right >= BLIND_FLOOR, "{right} right, below {BLIND_FLOOR}");
    assert!(false_positives <= 1, "{false_positives} false positives");
}

/// What the router planned right of the held-out corpus when this floor was last raised.
const BLIND_FLOOR: usize = 300;

/// A second held-out set (`tests/corpus/blind2/`), written blind after the first one had been
/// used to find causes: the measure of whether those fixes generalise. Scored like the
/// first; a regression guard, never tuned to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_second_held_out_corpus_is_scored() {
    let (right, false_positives) = score_held_out("blind2", "second held-out").await;
    assert!(right >= BLIND2_FLOOR, "{right} right, below {BLIND2_FLOOR}");
    assert_eq!(
        false_positives, 0,
        "a negative of the second set planned something"
    );
}

/// What the router planned right of the second held-out set when this floor was last raised
/// (126 at its first score).
const BLIND2_FLOOR: usize = 136;

/// A third held-out set (`tests/corpus/blind3/`, 250 cases), written blind by a helper who
/// had not read the project, after the first two had been used to find causes; scored like
/// them, a regression guard, never tuned to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_third_held_out_corpus_is_scored() {
    let (right, false_positives) = score_held_out("blind3", "third held-out").await;
    assert!(right >= BLIND3_FLOOR, "{right} right, below {BLIND3_FLOOR}");
    assert!(
        false_positives <= BLIND3_FALSE_POSITIVES,
        "{false_positives} false positives"
    );
}

/// What the router planned right of the third held-out set when this floor was last raised.
const BLIND3_FLOOR: usize = 216;

/// The third set's false positives when the floor was last set.
const BLIND3_FALSE_POSITIVES: usize = 1;

/// A fourth held-out set (`tests/corpus/blind4/`, 200 cases), written blind by a helper who
/// had not read the project, after the third had been used to find causes: scored like the
/// others, a regression guard, never tuned to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fourth_held_out_corpus_is_scored() {
    let (right, false_positives) = score_held_out("blind4", "fourth held-out").await;
    assert!(right >= BLIND4_FLOOR, "{right} right, below {BLIND4_FLOOR}");
    assert!(
        false_positives <= BLIND4_FALSE_POSITIVES,
        "{false_positives} false positives"
    );
}

/// What the router planned right of the fourth held-out set at its first score.
const BLIND4_FLOOR: usize = 166;

/// The fourth set's false positives at its first score.
const BLIND4_FALSE_POSITIVES: usize = 1;

/// A fifth held-out set (`tests/corpus/blind5/`, 150 cases), written blind by hand at the
/// end of the session whose fixes the third and fourth sets guided: the measure of those
/// fixes. Scored like the others, a regression guard, never tuned to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fifth_held_out_corpus_is_scored() {
    let (right, false_positives) = score_held_out("blind5", "fifth held-out").await;
    assert!(right >= BLIND5_FLOOR, "{right} right, below {BLIND5_FLOOR}");
    assert!(
        false_positives <= BLIND5_FALSE_POSITIVES,
        "{false_positives} false positives"
    );
}

/// What the router planned right of the fifth held-out set at its first score.
const BLIND5_FLOOR: usize = 128;

/// The fifth set's false positives at its first score.
const BLIND5_FALSE_POSITIVES: usize = 1;

/// The decision head on misheard names (`tests/corpus/mishearings.toml`): the accuracy per
/// category is printed; a negative that plans anything fails the test, and so does an
/// accuracy below the floor this matcher reached when it was written (a regression guard,
/// not a target).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misheard_names_find_their_candidate_and_nonsense_matches_nothing() {
    let home = tempfile::tempdir().expect("temp dir");
    let plugin = start_router(&home).await;
    let (cases, report) = score(&plugin, "mishearings.toml").await;
    println!("{}", report.table());
    for miss in &report.misses {
        println!(
            "MISS [{}] {:?}: {} — {}",
            miss.category, miss.say, miss.kind, miss.detail
        );
    }
    assert!(cases.len() >= 80, "{} cases", cases.len());
    assert_eq!(
        report.categories["negative"].false_positives, 0,
        "a negative matched"
    );
    // The hand-made cases, and the real transcripts: those the recogniser got right must all
    // plan; of the garbled ones the matcher alone finds only some (the chooser plugin's test
    // measures what a language model adds), and must not lose any it finds today.
    let mut hand = eval::Row::default();
    for (category, row) in &report.categories {
        if !category.starts_with("whisper") {
            hand.cases += row.cases;
            hand.right += row.right;
        }
    }
    assert!(
        hand.accuracy() >= FLOOR,
        "accuracy {:.1}% on the hand-made cases is below {FLOOR}%",
        hand.accuracy()
    );
    let exact = &report.categories["whisper-exact"];
    assert!(exact.cases >= 40, "{} exact transcripts", exact.cases);
    assert_eq!(
        exact.right, exact.cases,
        "a transcript without mistakes did not plan"
    );
    let garbled = &report.categories["whisper-garbled"];
    assert!(garbled.cases >= 40, "{} garbled transcripts", garbled.cases);
    assert!(
        garbled.accuracy() >= GARBLED_FLOOR,
        "accuracy {:.1}% on garbled transcripts is below {GARBLED_FLOOR}%",
        garbled.accuracy()
    );
}

/// The matcher alone on Whisper's garbled transcripts (25.0% when they were added).
const GARBLED_FLOOR: f64 = 25.0;
const FLOOR: f64 = 90.0;
