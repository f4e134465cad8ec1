//! Misheard lead words. A recogniser writes the likelier English word where the person said
//! a command's first word: "Right, thank you." for "write thank you", "Post" for "paste",
//! "And do." for "undo". When no rule plans an utterance, its first word (or its first two,
//! heard as one: "and do") is compared by sound (the Double Metaphone key the decision head
//! uses, [`crate::decide`]) with the **lead words** of the command space: the first word of
//! every built-in example, common shortcut and its synonyms, the typing, key, click, open
//! and playback verbs, and the curated focusing and closing verbs. Each lead word of the
//! same key that is not what was heard gives one [`rewrites`] candidate, the rest of the
//! utterance kept as it was said. These guesses are only ever **candidates weighed against
//! the audio** (`router.candidates`, then the recogniser's `stt.score`): planned from text
//! alone, noise that Whisper wrote as "Keep" or "And I" pressed ctrl+c and ctrl+z (three of
//! the spoken set's hundred clips without speech). Only the lead is ever replaced, only by
//! a word of the same sound: "right" in "move it right" is never touched. An utterance that
//! is one clause written twice ("Clear, Clear,": a decoder run on past a short command) is
//! offered once, first; that one the router plans directly.

use crate::decide::{MEDIA_VERBS, OPEN_VERBS, phonetic_key};
use crate::inapp::{CLICK_VERBS, KEY_VERBS, TYPE_VERBS};
use crate::phrases::Curated;
use crate::text::{compact, normalize};
use std::collections::BTreeSet;
use std::sync::LazyLock;

/// How near in spelling (normalised Damerau-Levenshtein) two words heard as one lead word
/// must be to it.
const TWO_WORDS_SPELLING: f64 = 0.5;

/// The built-in lead words (normalised single words), each with its phonetic key.
static BUILTIN: LazyLock<Vec<(String, String)>> = LazyLock::new(|| {
    let mut words = BTreeSet::new();
    let mut add = |phrase: &str| {
        if let Some(first) = normalize(phrase).split_whitespace().next() {
            words.insert(first.to_owned());
        }
    };
    if let Ok(examples) = crate::examples::Examples::builtin() {
        for category in &examples.categories {
            for example in &category.examples {
                add(&example.say);
            }
        }
    }
    let commands = crate::plan::builtin_words();
    for name in commands.common.keys() {
        add(name);
    }
    for (phrase, name) in commands.synonym_phrases() {
        add(phrase);
        add(name);
    }
    for verb in TYPE_VERBS.iter().chain(KEY_VERBS).chain(CLICK_VERBS) {
        add(verb);
    }
    for verb in OPEN_VERBS
        .iter()
        .chain(MEDIA_VERBS.iter().map(|(verb, _)| verb))
    {
        add(verb);
    }
    keyed(words)
});

fn keyed(words: BTreeSet<String>) -> Vec<(String, String)> {
    words
        .into_iter()
        // A word of one letter ("a" of "a new tab") leads nothing.
        .filter(|w| w.chars().count() > 1)
        .map(|w| (phonetic_key(&w), w))
        .filter(|(key, _)| !key.is_empty())
        .collect()
}

/// One utterance a transcript may have been ([`rewrites`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewrite {
    /// The words of the transcript that were replaced, as written ("Right,", "Clear, Clear,").
    pub heard: String,
    /// What stands in their place ("write", "Clear").
    pub meant: String,
    /// The whole utterance with them replaced ("write thank you.").
    pub utterance: String,
    /// Whether the lead was replaced by a word of the same sound (a guess only the audio
    /// can confirm), rather than a clause written twice said once.
    pub by_sound: bool,
}

/// `utterance` said once where the recogniser wrote one clause twice ("Clear, Clear,": a
/// decoder that ran on past a short command), or `None`. The one rewrite the router plans
/// from text alone; the first of [`rewrites`].
pub fn said_once(utterance: &str) -> Option<Rewrite> {
    let tokens: Vec<&str> = utterance.split_whitespace().collect();
    let key = |t: &str| compact(&normalize(t));
    let half = tokens.len() / 2;
    let twice = tokens.len().is_multiple_of(2)
        && half > 0
        && (0..half).all(|i| !key(tokens[i]).is_empty() && key(tokens[i]) == key(tokens[i + half]));
    if !twice {
        return None;
    }
    let once = tokens[..half]
        .join(" ")
        .trim_end_matches([',', ';'])
        .to_owned();
    Some(Rewrite {
        heard: tokens.join(" "),
        meant: once.clone(),
        utterance: once,
        by_sound: false,
    })
}

/// The utterances `utterance` may have been: said once where it was written twice, then
/// with its lead replaced by a lead word of the same sound (see the module docs): the first
/// word's twins first, then the first two words' ("and do" → "undo"), each group nearest in
/// length, then in spelling, first ("right" is "write" before "redo"). Empty when neither
/// applies.
pub fn rewrites(utterance: &str, curated: &Curated) -> Vec<Rewrite> {
    let tokens: Vec<&str> = utterance.split_whitespace().collect();
    if tokens.is_empty() {
        return Vec::new();
    }
    let extra = keyed(
        curated
            .focus_verbs
            .iter()
            .chain(&curated.close_verbs)
            .filter_map(|v| v.split_whitespace().next().map(str::to_owned))
            .collect(),
    );
    let mut out: Vec<Rewrite> = said_once(utterance).into_iter().collect();
    let key = |t: &str| compact(&normalize(t));
    let leads: Vec<&(String, String)> = BUILTIN.iter().chain(&extra).collect();
    let is_lead = |word: &str| leads.iter().any(|(_, w)| w == word);
    let first = key(tokens[0]);
    if first.is_empty() || is_lead(&first) {
        return out;
    }
    for taken in 1..=tokens.len().min(2) {
        let heard = key(&tokens[..taken].join(" "));
        let key = phonetic_key(&heard);
        if key.is_empty() {
            continue;
        }
        // Two words heard as one lead must also be spelt near it ("and do" is "undo"): by
        // sound alone, "i want" would be "undo" too.
        let near = |w: &str| strsim::normalized_damerau_levenshtein(&heard, w);
        let mut twins: Vec<&String> = leads
            .iter()
            .filter(|(k, w)| *k == key && *w != heard)
            .filter(|(_, w)| taken == 1 || near(w) >= TWO_WORDS_SPELLING)
            .map(|(_, w)| w)
            .collect();
        // Nearest in length, then in spelling: "right" is "write" before "redo".
        let length = heard.chars().count();
        twins.sort_by(|a, b| {
            let apart = |w: &str| w.chars().count().abs_diff(length);
            apart(a)
                .cmp(&apart(b))
                .then(near(b).total_cmp(&near(a)))
                .then(a.cmp(b))
        });
        let rest = tokens[taken..].join(" ");
        for word in twins {
            let candidate = format!("{word} {rest}").trim().to_owned();
            if !out.iter().any(|r| r.utterance == candidate) {
                out.push(Rewrite {
                    heard: tokens[..taken].join(" "),
                    meant: word.clone(),
                    utterance: candidate,
                    by_sound: true,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curated() -> Curated {
        crate::phrases::Curated::builtin().expect("curated phrases")
    }

    /// The rewritten utterances alone.
    fn said(utterance: &str, c: &Curated) -> Vec<String> {
        rewrites(utterance, c)
            .into_iter()
            .map(|r| r.utterance)
            .collect()
    }

    #[test]
    fn a_lead_heard_as_a_likelier_word_is_offered_by_its_sound() {
        let c = curated();
        let right = rewrites("Right, thank you.", &c);
        assert_eq!(
            right.first(),
            Some(&Rewrite {
                heard: "Right,".into(),
                meant: "write".into(),
                utterance: "write thank you.".into(),
                by_sound: true,
            }),
            "{right:?}"
        );
        assert!(said("Post", &c).contains(&"paste".to_owned()));
        assert_eq!(said("Clear, Clear,", &c), ["Clear"]);
        assert_eq!(said("Play, Play,", &c), ["Play"]);
        assert_eq!(said("new tab new tab", &c), ["new tab"]);
        assert!(said("Baste.", &c).contains(&"paste".to_owned()));
        assert!(
            said("And do.", &c).contains(&"undo".to_owned()),
            "{:?}",
            said("And do.", &c)
        );
    }

    #[test]
    fn a_lead_word_or_an_unlike_word_is_left_alone() {
        let c = curated();
        assert_eq!(said("press this", &c), Vec::<String>::new());
        assert_eq!(said("open youtube", &c), Vec::<String>::new());
        assert_eq!(said("zebra crossing", &c), Vec::<String>::new());
        assert_eq!(said("", &c), Vec::<String>::new());
        // By sound alone "i want" is "undo"; spelt so far apart it is not.
        assert_eq!(said("i want to", &c), Vec::<String>::new());
        assert_eq!(said("١٢٣ ٤", &c), Vec::<String>::new());
    }
}
