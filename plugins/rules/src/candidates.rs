//! Phrases of the command space that sound like what the recogniser wrote
//! (`router.candidates`), for the runner to weigh against the audio.
//!
//! A recogniser that does not know the command space writes the likelier English words:
//! "Prize" for "pause", "Go to G-Sub" for "go to GitHub", "Launch Kovex" for "launch
//! codex". The router knows which phrases it can act on, so for each hypothesis it proposes
//! the nearest of them, from three sources, after the other hypotheses themselves (which
//! the recogniser scored lower than a first one the router cannot act on):
//!
//! - **names**: a span of one to three words replaced by a name the router acts on that
//!   sounds like it (catalog sites, application profiles, installed applications, coding
//!   agents, media players, key names; [`crate::vocabulary::Vocabulary`]), the rest kept
//!   as written;
//! - **leads**: the first word replaced by a command's first word of the same sound
//!   ([`crate::heard::rewrites`]);
//! - **phrases**: whole fixed commands that sound like the whole hypothesis: shortcut names
//!   (the focused application's and the common ones), compositor phrases, playback verbs
//!   (alone and with a player), "press" with each key, the agents with their verbs, the
//!   built-in examples without free text.
//!
//! Nearness is by sound and spelling together ([`sounds_like`]); it only decides what is
//! proposed. Every candidate is then planned in the request's context, and only those that
//! plan steps (not a question, not typed text) are returned: a candidate is a command the
//! router would carry out. Which one, if any, replaces the transcript is decided by the
//! runner from the audio (`stt.score`), never here.
//!
//! Trust: every word a candidate adds comes from a trusted list (the catalog, profiles,
//! installed applications' names, the built-in tables), never from window titles or other
//! screen content, and the rest are the person's own transcribed words.

use crate::text::{compact, normalize};
use rphonetic::DoubleMetaphone;

/// How near (0–1, [`sounds_like`]) a span must sound to a name to be replaced by it.
pub const NAME_NEAR: f64 = 0.5;
/// How near a whole hypothesis must sound to a fixed phrase to propose it.
pub const PHRASE_NEAR: f64 = 0.4;
/// The same for a hypothesis of one word: a short command is often heard as a word that
/// shares only a sound or two with it ("Direct." for "next", "Review." for "resume"), and
/// the audio, not the spelling, tells them apart.
pub const WORD_NEAR: f64 = 0.25;
/// The most name substitutions proposed for one hypothesis.
const NAMES_PER_HYPOTHESIS: usize = 6;
/// The most fixed phrases proposed for one hypothesis.
const PHRASES_PER_HYPOTHESIS: usize = 8;
/// The most words a replaced name span is.
const MAX_SPAN: usize = 3;
/// The most words a hypothesis may have to get candidates: a spoken command is short, and
/// longer text (dictation) costs time for nothing.
pub const MAX_WORDS: usize = 24;
/// Words never replaced by a name on their own: "to" is not "Toot".
const KEEP_WORDS: &[&str] = &[
    "a", "an", "the", "to", "on", "in", "of", "for", "and", "go", "open", "switch", "close",
    "play", "pause", "start", "launch", "run", "with", "my", "me", "it", "this", "that", "up",
    "down", "left", "right", "next", "new", "tab", "window", "please", "is", "at", "by",
];

/// One phrase a hypothesis may have been.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The phrase, as the recogniser would write it where it kept the hypothesis's words.
    pub text: String,
    /// `"heard"`, `"name"`, `"lead"` or `"phrase"` (see the module docs and [`propose`]).
    pub source: &'static str,
    /// How near it sounds to the hypothesis it came from (0–1).
    pub near: f64,
    /// The index of that hypothesis.
    pub hypothesis: usize,
}

/// Fixed phrases made ready for comparison once ([`propose`] compares thousands).
#[derive(Default)]
pub struct PhraseList {
    keyed: Vec<(Keyed, String)>,
}

impl PhraseList {
    /// The phrases, normalised, without repeats or empty ones.
    pub fn new<'a>(phrases: impl IntoIterator<Item = &'a str>) -> PhraseList {
        let mut seen = std::collections::HashSet::new();
        let keyed = phrases
            .into_iter()
            .map(normalize)
            .filter(|p| !p.is_empty() && seen.insert(p.clone()))
            .map(|p| (Keyed::new(&p), p))
            .filter(|(k, _)| !k.spelt.is_empty())
            .collect();
        PhraseList { keyed }
    }

    /// Names, kept as written ("GitHub"), without repeats (compared without case).
    pub fn of_names<'a>(names: impl IntoIterator<Item = &'a str>) -> PhraseList {
        let mut seen = std::collections::HashSet::new();
        let keyed = names
            .into_iter()
            .map(str::trim)
            .filter(|n| !n.is_empty() && seen.insert(normalize(n)))
            .map(|n| (Keyed::new(n), n.to_owned()))
            .filter(|(k, _)| !k.spelt.is_empty())
            .collect();
        PhraseList { keyed }
    }

    /// How many phrases it holds.
    pub fn len(&self) -> usize {
        self.keyed.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.keyed.is_empty()
    }
}

/// What candidates are drawn from for one request.
pub struct Space<'a> {
    /// Names as their makers write them ("GitHub", "Claude").
    pub names: &'a PhraseList,
    /// Whole commands: the built-in ones and the focused application's.
    pub phrases: [&'a PhraseList; 2],
}

/// A phrase made ready for many comparisons.
struct Keyed {
    words: usize,
    spelt: String,
    /// The Double Metaphone keys of its words, joined: the primary and the alternate
    /// ("github" is J0P or KTP).
    sound: [String; 2],
}

impl Keyed {
    fn new(text: &str) -> Keyed {
        let normalized = normalize(text);
        let encoder = DoubleMetaphone::new(Some(8));
        let mut sound = [String::new(), String::new()];
        for word in normalized.split_whitespace() {
            // The encoder slices by bytes: ASCII letters only.
            let ascii: String = word.chars().filter(char::is_ascii_alphabetic).collect();
            if ascii.is_empty() {
                continue;
            }
            let keys = encoder.double_metaphone(&ascii);
            sound[0].push_str(&keys.primary());
            sound[1].push_str(&keys.alternate());
        }
        Keyed {
            words: normalized.split_whitespace().count(),
            spelt: compact(&normalized),
            sound,
        }
    }

    fn near(&self, other: &Keyed) -> f64 {
        if self.spelt.is_empty() || other.spelt.is_empty() {
            return 0.0;
        }
        if self.spelt == other.spelt {
            return 1.0;
        }
        let spelling = strsim::normalized_damerau_levenshtein(&self.spelt, &other.spelt);
        let mut sound: Option<f64> = None;
        for a in self.sound.iter().filter(|k| !k.is_empty()) {
            for b in other.sound.iter().filter(|k| !k.is_empty()) {
                let near = strsim::normalized_levenshtein(a, b);
                sound = Some(sound.map_or(near, |s| s.max(near)));
            }
        }
        0.6 * sound.unwrap_or(spelling) + 0.4 * spelling
    }
}

/// How alike two phrases sound, 0–1: the Double Metaphone keys of their words (60%: the
/// nearer of the primary and alternate keys) and their spelling without spaces (40%), each
/// by normalised edit distance; 1 for the same words. "prize" and "pause" are 0.56, "g sub"
/// and "github" 0.6, "direct" and "next" 0.28.
pub fn sounds_like(a: &str, b: &str) -> f64 {
    Keyed::new(a).near(&Keyed::new(b))
}

/// The candidates for `hypotheses` (best first) in `space`: first each hypothesis after the
/// first as written (source `"heard"`, near 1: the recogniser wrote it, but with a lower
/// score than a transcript the router could not act on, so the audio decides between
/// them), then the proposed phrases nearest first, without repeats and without the
/// hypotheses. Not yet planned: the caller keeps those that plan.
pub fn propose(
    hypotheses: &[String],
    space: &Space<'_>,
    curated: &crate::phrases::Curated,
) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = Vec::new();
    let said: Vec<String> = hypotheses.iter().map(|h| compact(&normalize(h))).collect();
    let push = |out: &mut Vec<Candidate>, candidate: Candidate| {
        let key = compact(&normalize(&candidate.text));
        if key.is_empty()
            || said.contains(&key)
            || out.iter().any(|c| compact(&normalize(&c.text)) == key)
        {
            return;
        }
        out.push(candidate);
    };
    let mut heard: Vec<Candidate> = Vec::new();
    for (index, hypothesis) in hypotheses.iter().enumerate().skip(1) {
        let key = &said[index];
        if key.is_empty() || key == &said[0] || said[1..index].contains(key) {
            continue;
        }
        heard.push(Candidate {
            text: hypothesis.trim().to_owned(),
            source: "heard",
            near: 1.0,
            hypothesis: index,
        });
    }
    for (index, hypothesis) in hypotheses.iter().enumerate() {
        if hypothesis.split_whitespace().count() > MAX_WORDS || hypothesis.len() > 512 {
            continue;
        }
        for candidate in by_name(index, hypothesis, &space.names.keyed) {
            push(&mut out, candidate);
        }
        for rewrite in crate::heard::rewrites(hypothesis, curated) {
            let near = sounds_like(&rewrite.heard, &rewrite.meant);
            push(
                &mut out,
                Candidate {
                    text: rewrite.utterance,
                    source: "lead",
                    near,
                    hypothesis: index,
                },
            );
        }
        for list in space.phrases {
            for candidate in by_phrase(index, hypothesis, &list.keyed) {
                push(&mut out, candidate);
            }
        }
    }
    // Nearest first (the sort is stable: the better hypothesis first among equals).
    out.sort_by(|a, b| b.near.total_cmp(&a.near));
    heard.extend(out);
    heard
}

/// Name substitutions of one hypothesis, nearest first.
fn by_name(index: usize, hypothesis: &str, names: &[(Keyed, String)]) -> Vec<Candidate> {
    let tokens: Vec<&str> = hypothesis.split_whitespace().collect();
    let mut found: Vec<(f64, usize, usize, &str)> = Vec::new();
    for start in 0..tokens.len() {
        for end in start + 1..=tokens.len().min(start + MAX_SPAN) {
            let span = tokens[start..end].join(" ");
            let keyed = Keyed::new(&span);
            // A span neither begins nor ends with a small word: "go to" is not "GitHub".
            let small = |token: &str| KEEP_WORDS.contains(&normalize(token).as_str());
            if keyed.spelt.is_empty() || small(tokens[start]) || small(tokens[end - 1]) {
                continue;
            }
            for (name, written) in names {
                // A span of many more words than the name is not it ("open my mail" is
                // not "Gmail"), nor one far longer or shorter in letters.
                if end - start > name.words + 1
                    || keyed.spelt.len() * 2 < name.spelt.len()
                    || name.spelt.len() * 2 < keyed.spelt.len()
                {
                    continue;
                }
                let near = keyed.near(name);
                if (NAME_NEAR..1.0).contains(&near) {
                    found.push((near, start, end, written.as_str()));
                }
            }
        }
    }
    found.sort_by(|a, b| b.0.total_cmp(&a.0));
    found
        .into_iter()
        .take(NAMES_PER_HYPOTHESIS)
        .map(|(near, start, end, written)| {
            // The punctuation after the span stays where it was ("G-Sub." → "GitHub.").
            let last = tokens[end - 1];
            let trailing: String = last
                .chars()
                .rev()
                .take_while(|c| matches!(c, '.' | ',' | '!' | '?' | ';' | ':'))
                .collect();
            let mut words: Vec<String> = tokens[..start].iter().map(|t| t.to_string()).collect();
            words.push(format!(
                "{written}{}",
                trailing.chars().rev().collect::<String>()
            ));
            words.extend(tokens[end..].iter().map(|t| t.to_string()));
            Candidate {
                text: words.join(" "),
                source: "name",
                near,
                hypothesis: index,
            }
        })
        .collect()
}

/// Fixed phrases that sound like the whole hypothesis, nearest first.
fn by_phrase(index: usize, hypothesis: &str, phrases: &[(Keyed, String)]) -> Vec<Candidate> {
    let heard = Keyed::new(hypothesis);
    if heard.spelt.is_empty() {
        return Vec::new();
    }
    let least = if heard.words == 1 {
        WORD_NEAR
    } else {
        PHRASE_NEAR
    };
    let mut found: Vec<(f64, &str)> = phrases
        .iter()
        .filter(|(p, _)| p.words.abs_diff(heard.words) <= 1)
        .map(|(p, written)| (heard.near(p), written.as_str()))
        .filter(|(near, _)| *near >= least && *near < 1.0)
        .collect();
    found.sort_by(|a, b| b.0.total_cmp(&a.0));
    found
        .into_iter()
        .take(PHRASES_PER_HYPOTHESIS)
        .map(|(near, written)| Candidate {
            text: written.to_owned(),
            source: "phrase",
            near,
            hypothesis: index,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::phrases::Curated;

    fn texts(hypotheses: &[&str]) -> Vec<String> {
        let curated = Curated::builtin().expect("curated");
        let hypotheses: Vec<String> = hypotheses.iter().map(|h| h.to_string()).collect();
        let names = PhraseList::of_names([
            "GitHub", "YouTube", "Codex", "Claude", "Spotify", "Firefox", "Gmail",
        ]);
        let phrases = PhraseList::new(["pause", "play", "next", "resume", "new tab", "close tab"]);
        let focused = PhraseList::new(["undo", "undo"]);
        assert_eq!(focused.len(), 1);
        let space = Space {
            names: &names,
            phrases: [&phrases, &focused],
        };
        propose(&hypotheses, &space, &curated)
            .into_iter()
            .map(|c| c.text)
            .collect()
    }

    #[test]
    fn a_misheard_name_is_replaced_by_the_name_it_sounds_like() {
        let found = texts(&["Go to G-Sub."]);
        assert!(found.contains(&"Go to GitHub.".to_owned()), "{found:?}");
        let found = texts(&["Launch Kovex"]);
        assert!(found.contains(&"Launch Codex".to_owned()), "{found:?}");
        // The verb is kept; only the name's span changes.
        assert!(!found.iter().any(|f| f.starts_with("Codex")), "{found:?}");
    }

    #[test]
    fn a_short_command_heard_as_another_word_gets_the_commands_that_sound_alike() {
        let found = texts(&["Prize."]);
        assert!(found.contains(&"pause".to_owned()), "{found:?}");
        assert!(!found.contains(&"close tab".to_owned()), "{found:?}");
        let found = texts(&["Direct."]);
        assert!(found.contains(&"next".to_owned()), "{found:?}");
    }

    #[test]
    fn what_was_heard_is_not_proposed_again_and_nothing_repeats() {
        let found = texts(&["pause", "Pause."]);
        assert!(!found.iter().any(|f| compact(&normalize(f)) == "pause"));
        let mut unique = found.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), found.len(), "{found:?}");
    }

    #[test]
    fn the_other_hypotheses_come_first_once_each() {
        let hypotheses: Vec<String> = ["Press this.", "Press Space.", "press space", "Press this"]
            .iter()
            .map(|h| h.to_string())
            .collect();
        let curated = Curated::builtin().expect("curated");
        let names = PhraseList::of_names(["GitHub"]);
        let none = PhraseList::default();
        let space = Space {
            names: &names,
            phrases: [&none, &none],
        };
        let found = propose(&hypotheses, &space, &curated);
        // The second hypothesis as written, its repeat (in other case) and the first
        // hypothesis again (without its full stop) not.
        let heard: Vec<(&str, usize)> = found
            .iter()
            .filter(|c| c.source == "heard")
            .map(|c| (c.text.as_str(), c.hypothesis))
            .collect();
        assert_eq!(heard, [("Press Space.", 1)], "{found:?}");
        assert_eq!(found[0].source, "heard");
    }

    #[test]
    fn long_text_gets_no_candidates() {
        let long = "go to g sub ".repeat(10);
        assert!(texts(&[long.as_str()]).is_empty());
    }

    #[test]
    fn small_words_and_far_names_are_left_alone() {
        // "to" sounds like nothing it should become, and "open my mail" keeps its words.
        let found = texts(&["go to the store"]);
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn sound_and_spelling_make_the_nearness() {
        assert_eq!(sounds_like("Pause.", "pause"), 1.0);
        assert!(sounds_like("prize", "pause") > sounds_like("prize", "new tab"));
        assert!(sounds_like("g sub", "github") >= NAME_NEAR);
        assert!(sounds_like("", "github") == 0.0);
    }
}
