//! Dictation: while the runner has dictation on (`router.plan`'s `dictation`), what is heard
//! is text to type, written as dictation tools write it, and only a few phrases are
//! commands: "stop dictation", "scratch that", "new line", "new paragraph", and "command
//! <anything>" (one command, planned as usual, without leaving dictation).
//!
//! "start dictation" and "stop dictation" said outside dictation plan op `dictation {on}`,
//! which the runner serves itself.

use crate::inapp::written_marks;
use crate::plan::Matched;
use crate::text::{normalize, strip_fillers};
use utter_protocol::serde_json::json;

/// What an utterance is in dictation.
#[derive(Debug, PartialEq)]
pub enum Dictated {
    /// Steps: the text typed (a line break is typed text too), a mode switch, an undo.
    Steps(Vec<Matched>),
    /// "command <rest>": `rest` is planned as any command.
    Command(String),
}

/// Phrases that turn dictation on.
const START: &[&str] = &[
    "start dictation",
    "start dictating",
    "begin dictation",
    "dictation mode",
    "dictation on",
    "turn on dictation",
    "switch to dictation",
    "take dictation",
];

/// Phrases that turn it off.
const STOP: &[&str] = &[
    "stop dictation",
    "stop dictating",
    "end dictation",
    "exit dictation",
    "dictation off",
    "turn off dictation",
    "command mode",
    "back to commands",
];

/// Phrases that take back the last phrase typed (the runner's journal undo).
const SCRATCH: &[&str] = &["scratch that", "undo that", "delete that", "strike that"];

/// The line breaks said as commands.
const BREAKS: &[&str] = &["new line", "new paragraph"];

/// The most words a dictated hypothesis may have to be weighed against the dictation
/// commands: they are said on their own, between sentences.
const COMMAND_WORDS: usize = 4;

/// The dictation commands that sound like a short dictated hypothesis ("Crash mod" for
/// "scratch that", "new power graph" for "new paragraph"), nearest first, for the runner to
/// weigh against the audio (`router.candidates` with `dictation`): whichever the audio
/// favours, the open transcript or one of these, is planned. Each is `(phrase, near)`, at
/// most four; none for a hypothesis that is one already or is longer than a command.
pub fn candidates(hypotheses: &[String]) -> Vec<(&'static str, f64)> {
    let mut out: Vec<(&'static str, f64)> = Vec::new();
    for (index, hypothesis) in hypotheses.iter().enumerate() {
        let said = strip_fillers(&normalize(hypothesis)).to_owned();
        let words = said.split_whitespace().count();
        if words == 0 || words > COMMAND_WORDS {
            continue;
        }
        for &phrase in SCRATCH.iter().chain(STOP).chain(BREAKS) {
            // The transcript is a command already; a lower hypothesis that is one is the
            // nearest candidate there is.
            let near = match (said == phrase, index) {
                (true, 0) => return Vec::new(),
                (true, _) => 1.0,
                (false, _) => crate::candidates::sounds_like(&said, phrase),
            };
            if near >= crate::candidates::WORD_NEAR {
                match out.iter_mut().find(|(p, _)| *p == phrase) {
                    Some(seen) => seen.1 = seen.1.max(near),
                    None => out.push((phrase, near)),
                }
            }
        }
    }
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    out.truncate(4);
    out
}

/// "start dictation" / "stop dictation" outside dictation: op `dictation {on}`.
pub fn switch(text: &str) -> Option<Matched> {
    let on = if START.contains(&text) {
        true
    } else if STOP.contains(&text) {
        false
    } else {
        return None;
    };
    Some(mode(on))
}

fn mode(on: bool) -> Matched {
    Matched {
        rule: "dictation",
        op: "dictation",
        args: json!({"on": on}),
        message: if on {
            "dictation on: what you say is typed until you say \"stop dictation\"".to_owned()
        } else {
            "dictation off".to_owned()
        },
        confirm: false,
    }
}

/// The plan of `utterance` said in dictation; `after` is the text dictated just before
/// (what the runner typed last, `""` at the start), which decides the capital letter and
/// the space before this phrase.
pub fn plan(utterance: &str, after: &str) -> Dictated {
    // Control and hidden formatting characters are never typed, nor do they part words or
    // hide the end of the sentence before.
    let visible = |text: &str| -> String {
        text.chars()
            .map(|c| if c.is_whitespace() { ' ' } else { c })
            .filter(|c| !c.is_control() && !is_hidden_format(*c))
            .collect()
    };
    let keep_lines = |text: &str| -> String {
        text.chars()
            .filter(|&c| c == '\n' || (!c.is_control() && !is_hidden_format(c)))
            .collect()
    };
    let after = keep_lines(after);
    let clean = visible(utterance);
    let utterance = clean.as_str();
    let normalized = normalize(utterance);
    let said = strip_fillers(&normalized);
    if STOP.contains(&said) {
        return Dictated::Steps(vec![mode(false)]);
    }
    if SCRATCH.contains(&said) {
        return Dictated::Steps(vec![Matched {
            rule: "dictation",
            op: "undo",
            args: json!({"count": 1}),
            message: "take back the last phrase".to_owned(),
            confirm: false,
        }]);
    }
    let words = crate::text::normalize_words(utterance);
    if words.first().is_some_and(|w| w.text == "command") && words.len() > 1 {
        // The words after "command" as said (their case, their punctuation), from the
        // input word the second one came from.
        let rest = utterance[words[1].raw.start..].trim();
        return Dictated::Command(rest.to_owned());
    }
    let mut steps = Vec::new();
    let mut before = after;
    for piece in pieces(utterance) {
        match piece {
            Piece::Text(text) => {
                let typed = written(&text, &before);
                if typed.trim().is_empty() {
                    continue;
                }
                before.push_str(&typed);
                steps.push(Matched {
                    rule: "dictation",
                    op: "type_text",
                    message: format!("type {typed:?}"),
                    args: json!({"text": typed}),
                    confirm: false,
                });
            }
            Piece::Break(lines) => {
                // Typed as text, not pressed as Return: a line break goes into a text view
                // (and "scratch that" takes it back like any text), while an entry refuses
                // it instead of sending what it holds.
                let breaks = "\n".repeat(lines);
                before.push_str(&breaks);
                steps.push(Matched {
                    rule: "dictation",
                    op: "type_text",
                    message: if lines > 1 {
                        "new paragraph"
                    } else {
                        "new line"
                    }
                    .to_owned(),
                    args: json!({"text": breaks}),
                    confirm: false,
                });
            }
        }
    }
    Dictated::Steps(steps)
}

/// The invisible formatting characters that can disguise text (bidi embeddings, overrides
/// and isolates, marks, zero-width ones): never typed.
fn is_hidden_format(c: char) -> bool {
    matches!(
        c,
        '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{061c}' | '\u{feff}'
    )
}

/// The most line breaks one utterance presses; further "new line"s are typed as words.
const MAX_BREAKS: usize = 5;

/// A stretch of dictated text, or a line break said ("new line": 1, "new paragraph": 2).
#[derive(Debug, PartialEq)]
enum Piece {
    Text(String),
    Break(usize),
}

/// `utterance` cut at each "new line" / "new paragraph" said as a command of its own: at
/// the start or the end, or set apart by punctuation ("Dear Anna, new line, thanks"), not
/// inside a sentence ("a new line of products").
fn pieces(utterance: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let words: Vec<&str> = utterance.split_whitespace().collect();
    let bare = |w: &str| {
        w.trim_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase()
    };
    let mut i = 0;
    while i < words.len() {
        let pair = (
            bare(words[i]),
            words.get(i + 1).map(|w| bare(w)).unwrap_or_default(),
        );
        let apart = i == 0
            || i + 2 == words.len()
            || words[i - 1].ends_with([',', '.', ';', ':', '!', '?'])
            || words
                .get(i + 1)
                .is_some_and(|w| w.ends_with([',', '.', ';', ':', '!', '?']));
        let breaks = out.iter().filter(|p| matches!(p, Piece::Break(_))).count();
        let lines = match (pair.0.as_str(), pair.1.as_str()) {
            _ if !apart || breaks >= MAX_BREAKS => None,
            ("new", "line") => Some(1),
            ("new", "paragraph") => Some(2),
            _ => None,
        };
        if let Some(lines) = lines {
            if !current.is_empty() {
                out.push(Piece::Text(current.join(" ")));
                current.clear();
            }
            out.push(Piece::Break(lines));
            i += 2;
            continue;
        }
        current.push(words[i]);
        i += 1;
    }
    if !current.is_empty() {
        out.push(Piece::Text(current.join(" ")));
    }
    out
}

/// `text` as it is typed after `before`: spoken marks written ("comma" → ","), a mark the
/// recogniser wrote beside a spoken one kept once, a capital letter after the end of a
/// sentence (or at the start), a lowercase first letter in the middle of one (but "I"), and
/// a space before it unless the text before ends in one or it starts with a mark.
fn written(text: &str, before: &str) -> String {
    let mut typed = written_marks(text.trim());
    for (doubled, once) in [
        ("..", "."),
        (",.", "."),
        (".,", "."),
        ("?.", "?"),
        ("!.", "!"),
        (",,", ","),
    ] {
        while typed.contains(doubled) {
            typed = typed.replace(doubled, once);
        }
    }
    let tail = before.trim_end_matches([' ', '\t']);
    let starts_sentence = tail.is_empty() || tail.ends_with(['.', '?', '!', '\n']);
    let mut chars = typed.chars();
    let Some(first) = chars.next() else {
        return typed;
    };
    let rest: String = chars.collect();
    let first_word = typed.split_whitespace().next().unwrap_or("");
    let is_i =
        first_word == "I" || first_word.starts_with("I'") || first_word.starts_with("I\u{2019}");
    let first = if starts_sentence {
        first.to_uppercase().collect::<String>()
    } else if is_i || rest.chars().next().is_some_and(char::is_uppercase) {
        // "I", and a word in capitals ("NASA"), stay as they are.
        first.to_string()
    } else {
        first.to_lowercase().collect::<String>()
    };
    let typed = format!("{first}{rest}");
    let needs_space = !before.is_empty()
        && !before.ends_with([' ', '\n', '\t', '(', '[', '{', '\u{201c}', '\u{2018}', '/'])
        && !typed.starts_with([',', '.', '?', '!', ';', ':']);
    if needs_space {
        format!(" {typed}")
    } else {
        typed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(said: &str, after: &str) -> Vec<(String, String)> {
        match plan(said, after) {
            Dictated::Steps(steps) => steps
                .into_iter()
                .map(|m| {
                    let what = m
                        .args
                        .get("text")
                        .or(m.args.get("chord"))
                        .or(m.args.get("on"));
                    (
                        m.op.to_owned(),
                        what.map(|v| v.to_string()).unwrap_or_default(),
                    )
                })
                .collect(),
            Dictated::Command(rest) => vec![("command".to_owned(), rest)],
        }
    }

    #[test]
    fn text_is_written_with_its_marks_capitals_and_spaces() {
        assert_eq!(
            typed("hello comma how are you question mark", ""),
            [("type_text".into(), "\"Hello, how are you?\"".into())]
        );
        // After the end of a sentence: a space and a capital; in the middle: a lowercase.
        assert_eq!(
            typed("I am fine period", "How are you?"),
            [("type_text".into(), "\" I am fine.\"".into())]
        );
        assert_eq!(
            typed("And you.", "Hello,"),
            [("type_text".into(), "\" and you.\"".into())]
        );
        // The recogniser's own full stop beside a spoken one is one full stop.
        assert_eq!(
            typed("See you period.", ""),
            [("type_text".into(), "\"See you.\"".into())]
        );
        assert_eq!(
            typed("NASA called", "so"),
            [("type_text".into(), "\" NASA called\"".into())]
        );
    }

    #[test]
    fn line_breaks_scratch_stop_and_command_are_commands() {
        // A sentence's own "new line" is words.
        assert_eq!(
            typed("I bought a new line of products", ""),
            [(
                "type_text".into(),
                "\"I bought a new line of products\"".into()
            )]
        );
        // Control and hidden formatting characters are never typed.
        assert_eq!(
            typed("hello\u{8}\u{202e} there\u{0}", ""),
            [("type_text".into(), "\"Hello there\"".into())]
        );
        assert_eq!(
            typed("- command open youtube", "x"),
            [("command".into(), "open youtube".into())]
        );
        assert_eq!(
            typed("dear Anna, new line, thanks", ""),
            [
                ("type_text".into(), "\"Dear Anna,\"".into()),
                ("type_text".into(), "\"\\n\"".into()),
                ("type_text".into(), "\"Thanks\"".into()),
            ]
        );
        assert_eq!(
            typed("New paragraph.", "x"),
            [("type_text".into(), "\"\\n\\n\"".into())]
        );
        assert_eq!(typed("Scratch that.", "x")[0].0, "undo");
        assert_eq!(
            typed("stop dictation", "x"),
            [("dictation".into(), "false".into())]
        );
        assert_eq!(
            typed("Command, go to workspace 2.", "x"),
            [("command".into(), "go to workspace 2.".into())]
        );
        assert_eq!(
            switch("start dictation").map(|m| m.args),
            Some(json!({"on": true}))
        );
        assert_eq!(switch("type hello"), None);
        // Hidden characters neither part words nor hide the end of the sentence before.
        assert_eq!(typed("scratch\u{202e}that", "x")[0].0, "type_text");
        assert_eq!(
            typed("hello world", "Fine.\u{200b}\u{202e}"),
            [("type_text".into(), "\" Hello world\"".into())]
        );
    }

    #[test]
    fn short_hypotheses_are_offered_the_dictation_commands_they_sound_like() {
        let near = |h: &str| candidates(&[h.to_owned()]);
        for (heard, meant) in [
            ("Crash mod", "scratch that"),
            ("scratch not", "scratch that"),
            ("new power graph.", "new paragraph"),
            ("in your line", "new line"),
        ] {
            let offered = near(heard);
            eprintln!("{heard:?} -> {offered:?}");
            assert!(
                offered.iter().any(|(p, _)| *p == meant),
                "{heard:?}: {offered:?}"
            );
        }
        // Already a command, or a sentence: nothing to weigh.
        assert!(near("Scratch that.").is_empty());
        assert!(near("Stop dictating.").is_empty());
        // A lower hypothesis that is a command comes first.
        let both = candidates(&["Crash mod.".to_owned(), "Scratch that.".to_owned()]);
        assert_eq!(both[0], ("scratch that", 1.0), "{both:?}");
        assert!(near("I bought milk and bread at the shop today").is_empty());
    }
}
