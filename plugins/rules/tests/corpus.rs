//! The project's command corpus (`tests/corpus/commands.toml`) through the real
//! `utter-rules` binary, as the runner talks to it: each case's utterance in its desktop
//! context (none, a browser, a terminal, an editor focused), with the applications of
//! `tests/corpus/applications/` installed and nothing of this machine's (a private home,
//! no niri config, no user profiles). Every case must plan as its file says; the table of
//! [`utter_rules::eval::Report`] is printed either way.

use std::path::PathBuf;
use utter_protocol::serde_json::json;
use utter_protocol::testkit::TestPlugin;
use utter_rules::eval::{self, Report};

mod common;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/corpus")
}

/// The rules binary in a private home with the corpus's applications installed.
async fn start_router(home: &tempfile::TempDir) -> TestPlugin {
    start_router_with(home, corpus_dir()).await
}

/// The rules binary in a private home with the applications of `data_dir/applications`.
async fn start_router_with(home: &tempfile::TempDir, data_dir: PathBuf) -> TestPlugin {
    common::start_router(home, Some(&data_dir)).await
}

/// Every case of `file` through `plugin`, scored.
async fn score(plugin: &TestPlugin, file: &str) -> (Vec<eval::Case>, Report) {
    let path = corpus_dir().join(file);
    let text = std::fs::read_to_string(&path).expect("the corpus is there");
    let cases = eval::parse(&text, file).expect("the corpus parses");
    // The set's own applications, where it has them: a window's class names its application.
    let classes = path
        .parent()
        .map(|dir| eval::window_classes(&dir.join("applications")))
        .unwrap_or_default();
    let mut report = Report::default();
    for case in &cases {
        let planned = plugin
            .request(
                "router.plan",
                json!({"utterance": case.say, "provenance": "user", "context": case.context()}),
            )
            .await
            .unwrap_or_else(|e| panic!("router.plan {:?} failed: {e:?}", case.say));
        let planned = eval::by_desktop_id(case, &planned, &classes);
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
/// desktop entries), printing its table and misses under `label`, and fail when fewer than
/// `floor` cases plan right or more than `false_positives` negatives plan something. A floor
/// is a regression guard, raised as causes are fixed; a set is never tuned to. (18 floors went
/// down by one, on purpose, when "undo that" became the runner's journal undo (issue 35):
/// those sets expect the editor's ctrl+z, which that undo runs when nothing recent is in the
/// journal, as on a fresh desktop, so the case now counts as the same effect.)
async fn score_held_out(dir: &str, label: &str, floor: usize, false_positives: usize) {
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
    assert!(
        total.right >= floor,
        "{label}: {} right, below {floor}",
        total.right
    );
    assert!(
        total.false_positives <= false_positives,
        "{label}: {} negatives planned something (at most {false_positives})",
        total.false_positives
    );
}

/// The held-out corpus (`tests/corpus/blind/`, 325 cases), written by someone who had not
/// read the router, from other voice tools' command lists and desktop habits: its table is
/// printed beside the project's own (first score 211). Its writer expects `launch_app` for "open
/// firefox" where the router plans focus-or-start (`ensure_app`, which the later sets
/// expect): those count as of the same effect, not as right.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_held_out_corpus_is_scored() {
    score_held_out("blind", "held-out", 284, 0).await;
}

/// A second held-out set (`tests/corpus/blind2/`, 150 cases), written blind after the first
/// one had been used to find causes (first score 126).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_second_held_out_corpus_is_scored() {
    score_held_out("blind2", "second held-out", 146, 0).await;
}

/// A third held-out set (`tests/corpus/blind3/`, 250 cases), written blind after the first
/// two had been used (first score 176).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_third_held_out_corpus_is_scored() {
    score_held_out("blind3", "third held-out", 240, 0).await;
}

/// A fourth held-out set (`tests/corpus/blind4/`, 200 cases), written blind after the third
/// had been used (first score 149).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fourth_held_out_corpus_is_scored() {
    score_held_out("blind4", "fourth held-out", 188, 0).await;
}

/// A fifth held-out set (`tests/corpus/blind5/`, 150 cases), written blind by hand after the
/// fourth had been used (first score 120).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fifth_held_out_corpus_is_scored() {
    score_held_out("blind5", "fifth held-out", 145, 0).await;
}

/// A sixth held-out set (`tests/corpus/blind6/`, 200 cases), written blind by hand against
/// another desktop's applications (KDE and flatpak apps, Alacritty, Ghostty, Zed, Brave) after
/// the fifth had been used (first score 167).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sixth_held_out_corpus_is_scored() {
    score_held_out("blind6", "sixth held-out", 194, 0).await;
}

/// A seventh held-out set (`tests/corpus/blind7/`, 200 cases), written blind by hand against
/// a GNOME desktop's applications and flatpaks (Ptyxis, WezTerm, Chrome, Epiphany, IntelliJ,
/// Neovide, a LibreOffice suite entry) after the sixth had been used (first score 173).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seventh_held_out_corpus_is_scored() {
    score_held_out("blind7", "seventh held-out", 194, 0).await;
}

/// An eighth held-out set (`tests/corpus/blind8/`, 200 cases), written blind by hand against
/// an Xfce-leaning desktop's applications (kitty, Xfce Terminal, Vivaldi, LibreWolf, Code -
/// OSS, Thunar, Kdenlive) after the seventh had been used (first score 165).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_eighth_held_out_corpus_is_scored() {
    score_held_out("blind8", "eighth held-out", 189, 0).await;
}

/// A ninth held-out set (`tests/corpus/blind9/`, 200 cases), written blind by hand against
/// a GNOME-leaning desktop's applications after the eighth had been used.
#[tokio::test]
async fn the_ninth_held_out_corpus_is_scored() {
    score_held_out("blind9", "ninth held-out", 185, 0).await;
}

/// A tenth held-out set (`tests/corpus/blind10/`, 200 cases), written blind by hand against
/// a KDE Plasma-leaning desktop's applications after the ninth had been used.
#[tokio::test]
async fn the_tenth_held_out_corpus_is_scored() {
    score_held_out("blind10", "tenth held-out", 181, 0).await;
}

/// An eleventh held-out set (`tests/corpus/blind11/`, 200 cases), written blind by hand
/// against an Arch-style niri desktop with GNOME and proprietary applications after the
/// tenth had been used.
#[tokio::test]
async fn the_eleventh_held_out_corpus_is_scored() {
    score_held_out("blind11", "eleventh held-out", 185, 0).await;
}

/// A twelfth held-out set (`tests/corpus/blind12/`, 200 cases), written blind by hand
/// against a Fedora-style niri desktop of GNOME applications and Flatpaks after the
/// eleventh had been used.
#[tokio::test]
async fn the_twelfth_held_out_corpus_is_scored() {
    score_held_out("blind12", "twelfth held-out", 186, 0).await;
}

/// A thirteenth held-out set (`tests/corpus/blind13/`, 200 cases), written blind by hand
/// against a Debian-style niri desktop of GNOME, KDE and Qt applications after the twelfth
/// had been used.
#[tokio::test]
async fn the_thirteenth_held_out_corpus_is_scored() {
    score_held_out("blind13", "thirteenth held-out", 189, 0).await;
}

/// A fourteenth held-out set (`tests/corpus/blind14/`, 200 cases), written blind by hand
/// against a privacy-minded niri desktop (Rio, LibreWolf, Mullvad Browser, Emacs, Lapce)
/// after the thirteenth had been used.
#[tokio::test]
async fn the_fourteenth_held_out_corpus_is_scored() {
    score_held_out("blind14", "fourteenth held-out", 181, 0).await;
}

/// A fifteenth held-out set (`tests/corpus/blind15/`, 200 cases), written blind by hand
/// against a creative and study desktop (Ghostty, Vivaldi, Zed, Obsidian, Anki, Zotero,
/// Krita, Strawberry) after the fourteenth had been used.
#[tokio::test]
async fn the_fifteenth_held_out_corpus_is_scored() {
    score_held_out("blind15", "fifteenth held-out", 169, 0).await;
}

/// A sixteenth held-out set (`tests/corpus/blind16/`, 200 cases), written blind by hand
/// against an everyday family and home-office desktop of GNOME applications (GNOME Terminal,
/// Firefox, LibreOffice, Spotify, Zoom) after the fifteenth had been used.
#[tokio::test]
async fn the_sixteenth_held_out_corpus_is_scored() {
    score_held_out("blind16", "sixteenth held-out", 175, 0).await;
}

/// A seventeenth held-out set (`tests/corpus/blind17/`, 200 cases), written blind by hand
/// against a gamer's and streamer's desktop of KDE and Flatpak applications (Alacritty,
/// Brave, Steam, Lutris, OBS, Discord) after the sixteenth had been used.
#[tokio::test]
async fn the_seventeenth_held_out_corpus_is_scored() {
    score_held_out("blind17", "seventeenth held-out", 169, 0).await;
}

/// An eighteenth held-out set (`tests/corpus/blind18/`, 200 cases), written blind by hand
/// against a researcher's and data scientist's desktop of GNOME and Flatpak applications
/// (kitty, Chromium, VS Code, RStudio, JupyterLab, Zotero, Thunderbird, Slack) after the
/// seventeenth had been used.
#[tokio::test]
async fn the_eighteenth_held_out_corpus_is_scored() {
    score_held_out("blind18", "eighteenth held-out", 171, 0).await;
}

/// A nineteenth held-out set (`tests/corpus/blind19/`, 200 cases), written blind by hand
/// against a writer's and journalist's home desktop of GNOME and Flatpak applications
/// (GNOME Console, Firefox, Google Chrome, Evolution, LibreOffice, Lollypop, calibre) after
/// the eighteenth had been used.
#[tokio::test]
async fn the_nineteenth_held_out_corpus_is_scored() {
    score_held_out("blind19", "nineteenth held-out", 177, 0).await;
}

/// A twentieth held-out set (`tests/corpus/blind20/`, 200 cases), written blind by hand
/// against a DevOps engineer's and homelab tinkerer's Arch desktop (foot, Zen Browser,
/// Chromium, Code - OSS, Remmina, virt-manager, Wireshark, DBeaver) after the nineteenth had
/// been used.
#[tokio::test]
async fn the_twentieth_held_out_corpus_is_scored() {
    score_held_out("blind20", "twentieth held-out", 174, 0).await;
}

/// A twenty-first held-out set (`tests/corpus/blind21/`, 200 cases), written blind by hand
/// against a small-business owner's desktop of KDE applications (Konsole, Microsoft Edge,
/// GnuCash, LibreOffice, Thunderbird, Elisa, VLC) after the twentieth had been used.
#[tokio::test]
async fn the_twenty_first_held_out_corpus_is_scored() {
    score_held_out("blind21", "twenty-first held-out", 169, 0).await;
}

/// A twenty-second held-out set (`tests/corpus/blind22/`, 200 cases), written blind by hand
/// against a university student's desktop on niri (kitty, Firefox, Steam, Discord, OBS,
/// Spotify, Obsidian, Anki, Zoom, LibreOffice) after the twenty-first had been used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_twenty_second_held_out_corpus_is_scored() {
    score_held_out("blind22", "twenty-second held-out", 171, 0).await;
}

/// A twenty-third held-out set (`tests/corpus/blind23/`, 200 cases), written blind by hand
/// against a musician's and video maker's desktop on niri (Alacritty, Google Chrome, Ardour,
/// Audacity, MuseScore, Kdenlive, OBS, REAPER, Quod Libet) after the twenty-second had been
/// used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_twenty_third_held_out_corpus_is_scored() {
    score_held_out("blind23", "twenty-third held-out", 171, 0).await;
}

/// A twenty-fourth held-out set (`tests/corpus/blind24/`, 200 cases), written blind by hand
/// against the desktop of a translator who drives it by voice (kitty, Brave, Evolution,
/// LibreOffice, Okular, Foliate, Telegram, Slack, Obsidian, Zotero, Poedit, Zed, GNOME
/// utilities) after the twenty-third had been used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_twenty_fourth_held_out_corpus_is_scored() {
    score_held_out("blind24", "twenty-fourth held-out", 175, 0).await;
}

/// A twenty-fifth held-out set (`tests/corpus/blind25/`, 200 cases), written blind by hand
/// against the desktop of a maths and physics teacher who speaks while presenting (Konsole,
/// Firefox, Thunderbird, LibreOffice Impress, Okular, GeoGebra, Xournal++, VLC, Elisa,
/// Discord, Zoom, KDE utilities) after the twenty-fourth had been used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_twenty_fifth_held_out_corpus_is_scored() {
    score_held_out("blind25", "twenty-fifth held-out", 170, 0).await;
}

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

/// A twenty-sixth held-out set (`tests/corpus/blind26/`, 200 cases), written blind by hand
/// against the desktop of a support team lead who drives niri by voice because of RSI
/// (WezTerm, Chromium, Slack, Signal, Element, Thunderbird, GNOME apps, Zoom), after the
/// twenty-fifth had been used (first score 180, 193 by effect, one false positive: a wipe
/// of the home folder said in words, since refused).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_twenty_sixth_held_out_corpus_is_scored() {
    score_held_out("blind26", "twenty-sixth held-out", 182, 0).await;
}

/// A twenty-seventh held-out set (`tests/corpus/blind27/`, 200 cases), written blind by hand
/// against the desktop of an illustrator and game streamer with a hand injury who drives
/// niri by voice (Firefox, Alacritty, Kate, Dolphin, Spotify, Discord, Obsidian,
/// LibreOffice, Inkscape, Steam, OBS Studio, Okular, Gwenview, KeePassXC): first score
/// 162 (81.0%), 181 by effect, no false positive; five misses were the brief's spelling of
/// media commands, renamed after scoring (its `SOURCES.md`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_twenty_seventh_held_out_corpus_is_scored() {
    score_held_out("blind27", "twenty-seventh held-out", 176, 0).await;
}

/// A twenty-eighth held-out set (`tests/corpus/blind28/`, 200 cases), written blind by hand
/// against the desktop of a retired teacher new to Linux, with a tremor (Chromium, GNOME
/// Console, Text Editor, Files, Evince, Rhythmbox, VLC, Thunderbird, LibreOffice Writer,
/// GIMP, Shotwell, Signal, Zoom), the first with the journal's `undo`: first score 133
/// (66.5%), 146 by effect, no false positive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_twenty_eighth_held_out_corpus_is_scored() {
    score_held_out("blind28", "twenty-eighth held-out", 168, 0).await;
}

/// A twenty-ninth held-out set (`tests/corpus/blind29/`, 200 cases), written blind by hand
/// against the desktop of a computer science student just come from Windows, casual and
/// clipped (Firefox, kitty, VS Code, Obsidian, Spotify, Discord, Telegram, Zotero,
/// LibreOffice Calc, Thunar, mpv, Okular, Steam, KeePassXC): first score 162 (81.0%), 172
/// by effect, no false positive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_twenty_ninth_held_out_corpus_is_scored() {
    score_held_out("blind29", "twenty-ninth held-out", 181, 0).await;
}

/// A thirtieth held-out set (`tests/corpus/blind30/`, 200 cases), written blind by a fresh
/// helper against the desktop of a systems administrator with RSI come from Talon on macOS,
/// terse Talon grammar mixed with sentences (Chromium, Alacritty, Zed, Slack, Zoom,
/// Thunderbird, Files, Evince, KeePassXC, mpv, Spotify, System Monitor, Text Editor, OBS):
/// first score 157 (78.5%), 178 by effect, no false positive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_thirtieth_held_out_corpus_is_scored() {
    score_held_out("blind30", "thirtieth held-out", 169, 0).await;
}

/// A thirty-first held-out set (`tests/corpus/blind31/`, 200 cases), written blind by a fresh
/// helper against the desktop of a biology PhD student, a German native speaker new to voice
/// control, with non-native phrasings (Firefox, VS Code, Zotero, Okular, Signal, Element,
/// Spotify, Zoom, Alacritty, Files, RStudio, LibreOffice Calc, Thunderbird, pavucontrol,
/// Calculator): first score 137 (68.5%), 148 by effect, no false positive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_thirty_first_held_out_corpus_is_scored() {
    score_held_out("blind31", "thirty-first held-out", 171, 0).await;
}
