//! The shared words of the command space: `data/grammar.toml` (embedded at build time), the
//! verbs, objects, directions, markers, fillers, size words and other name words every
//! generated family reads
//! ([`crate::space`]), and the reading of an utterance as those words ([`Grammar::read`]).
//!
//! A phrase of the file is one or more lowercase words; reading an utterance takes, at each
//! position, the longest phrase that fits, so "to the left" is one direction. A word no
//! phrase holds is a number when it is one ("3", "three", "third", "twenty one") and a plain
//! word otherwise; a family that meets a plain word it does not expect plans nothing.

use crate::numbers;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::sync::LazyLock;

/// The grammar compiled into the plugin.
pub const BUILTIN_TOML: &str = include_str!("../../../data/grammar.toml");

/// One word (or phrase) of an utterance as the grammar reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum Token {
    /// A verb phrase and every canonical verb it can say ("show": focus, toggle).
    Verb(Vec<String>),
    /// A canonical object: window, column, monitor, workspace.
    Object(String),
    /// A canonical direction: left, right, up, down, first, last, next, previous.
    Direction(String),
    /// "to", "into", "onto": a destination follows.
    To,
    /// "in", "out of", "within": a place follows.
    In,
    /// "number": an index follows.
    Index,
    /// A word that changes nothing ("the", "this").
    Filler,
    /// A size word: its `[sizes]` key (wider, narrower, taller, shorter, width, height,
    /// little, lot, percent).
    Size(String),
    /// A fraction of the screen, in percent ("half": 50).
    Fraction(f64),
    /// A number from 1 to 10000, said as digits, words or an ordinal.
    Number(u32),
    /// Any other word, as normalised.
    Word(String),
}

impl Token {
    /// True for a verb token that can say `verb`.
    pub fn says(&self, verb: &str) -> bool {
        matches!(self, Token::Verb(verbs) if verbs.iter().any(|v| v == verb))
    }
}

/// What a phrase of the file means (verbs gathered from every list that holds it).
#[derive(Debug, Clone, PartialEq)]
enum Meaning {
    Verbs(Vec<String>),
    Other(Token),
}

/// The grammar: every phrase and what it means, and the `[aliases]`.
#[derive(Debug, Clone)]
pub struct Grammar {
    phrases: HashMap<String, Meaning>,
    max_words: usize,
    /// `[aliases]`: a name as people say it → the start of the action names it stands for.
    pub aliases: Vec<(String, String)>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    verbs: BTreeMap<String, Vec<String>>,
    objects: BTreeMap<String, Vec<String>>,
    directions: BTreeMap<String, Vec<String>>,
    markers: Markers,
    fillers: Fillers,
    sizes: BTreeMap<String, Vec<String>>,
    fractions: BTreeMap<String, f64>,
    #[serde(default)]
    words: BTreeMap<String, Vec<String>>,
    aliases: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Markers {
    to: Vec<String>,
    #[serde(rename = "in")]
    within: Vec<String>,
    index: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Fillers {
    words: Vec<String>,
}

/// The largest number a spoken number may be here.
const MAX_NUMBER: u32 = 10_000;

impl Grammar {
    /// The built-in grammar (`data/grammar.toml`).
    pub fn builtin() -> &'static Grammar {
        static BUILTIN: LazyLock<Grammar> = LazyLock::new(|| {
            Grammar::parse(BUILTIN_TOML).expect("data/grammar.toml is valid (tested)")
        });
        &BUILTIN
    }

    /// Read a grammar file.
    ///
    /// # Errors
    /// The TOML parser's message, or which phrase is in two sections, or is not written as
    /// the router's normalisation writes words.
    pub fn parse(text: &str) -> Result<Grammar, String> {
        let file: File = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut phrases: HashMap<String, Meaning> = HashMap::new();
        let mut put = |phrase: &str, meaning: Meaning| -> Result<(), String> {
            let written = crate::text::normalize(phrase);
            if written != phrase && phrase != "%" {
                return Err(format!(
                    "\"{phrase}\" is not written as the router reads it (\"{written}\")"
                ));
            }
            match (phrases.get_mut(phrase), meaning) {
                (None, meaning) => {
                    phrases.insert(phrase.to_owned(), meaning);
                }
                (Some(Meaning::Verbs(have)), Meaning::Verbs(more)) => have.extend(more),
                (Some(_), _) => return Err(format!("\"{phrase}\" is in two sections")),
            }
            Ok(())
        };
        for (verb, said) in &file.verbs {
            for phrase in said {
                put(phrase, Meaning::Verbs(vec![verb.clone()]))?;
            }
        }
        for (object, said) in &file.objects {
            for phrase in said {
                put(phrase, Meaning::Other(Token::Object(object.clone())))?;
            }
        }
        for (direction, said) in &file.directions {
            for phrase in said {
                put(phrase, Meaning::Other(Token::Direction(direction.clone())))?;
            }
        }
        for phrase in &file.markers.to {
            put(phrase, Meaning::Other(Token::To))?;
        }
        for phrase in &file.markers.within {
            put(phrase, Meaning::Other(Token::In))?;
        }
        for phrase in &file.markers.index {
            put(phrase, Meaning::Other(Token::Index))?;
        }
        for phrase in &file.fillers.words {
            put(phrase, Meaning::Other(Token::Filler))?;
        }
        for (size, said) in &file.sizes {
            for phrase in said {
                put(phrase, Meaning::Other(Token::Size(size.clone())))?;
            }
        }
        for (phrase, percent) in &file.fractions {
            if !(1.0..=100.0).contains(percent) {
                return Err(format!("the fraction \"{phrase}\" is {percent}%"));
            }
            put(phrase, Meaning::Other(Token::Fraction(*percent)))?;
        }
        // Other words of actions' names, and what people say for them ("free" for
        // available): read as the name's own word.
        for (word, said) in &file.words {
            for phrase in said {
                put(phrase, Meaning::Other(Token::Word(word.clone())))?;
            }
        }
        let max_words = phrases
            .keys()
            .map(|p| p.split(' ').count())
            .max()
            .unwrap_or(1);
        // A phrase that is a verb's own name says that verb first ("open": open, then
        // show and toggle), which decides between actions said equally well.
        for (phrase, meaning) in phrases.iter_mut() {
            if let Meaning::Verbs(verbs) = meaning
                && let Some(at) = verbs.iter().position(|v| v == phrase)
            {
                let own = verbs.remove(at);
                verbs.insert(0, own);
            }
        }
        Ok(Grammar {
            phrases,
            max_words,
            aliases: file.aliases.into_iter().collect(),
        })
    }

    /// `text` (normalised) as the grammar's tokens, fillers kept as [`Token::Filler`].
    pub fn read(&self, text: &str) -> Vec<Token> {
        let words: Vec<&str> = text.split(' ').filter(|w| !w.is_empty()).collect();
        let mut out: Vec<Token> = Vec::with_capacity(words.len());
        let mut i = 0;
        while i < words.len() {
            let longest = (1..=self.max_words.min(words.len() - i))
                .rev()
                .find_map(|n| {
                    let phrase = words[i..i + n].join(" ");
                    self.phrases.get(&phrase).map(|m| (n, m))
                });
            match longest {
                Some((n, meaning)) => {
                    out.push(match meaning {
                        Meaning::Verbs(verbs) => Token::Verb(verbs.clone()),
                        Meaning::Other(token) => token.clone(),
                    });
                    i += n;
                }
                None => {
                    out.push(
                        number(words[i])
                            .map_or_else(|| Token::Word(words[i].to_owned()), Token::Number),
                    );
                    i += 1;
                }
            }
        }
        // "twenty one": a tens number and a unit after it are one number.
        let mut merged: Vec<Token> = Vec::with_capacity(out.len());
        for token in out {
            if let (Some(Token::Number(tens)), Token::Number(unit)) = (merged.last(), &token)
                && *tens >= 20
                && *tens <= 90
                && tens % 10 == 0
                && (1..10).contains(unit)
            {
                let sum = tens + unit;
                merged.pop();
                merged.push(Token::Number(sum));
                continue;
            }
            merged.push(token);
        }
        merged
    }

    /// True when `phrase` is a phrase of any section.
    pub fn knows(&self, phrase: &str) -> bool {
        self.phrases.contains_key(phrase)
    }

    /// Every canonical verb a phrase can say ("show": focus, toggle), `None` for a phrase
    /// that is no verb.
    pub fn verbs(&self, phrase: &str) -> Option<&[String]> {
        match self.phrases.get(phrase)? {
            Meaning::Verbs(verbs) => Some(verbs),
            Meaning::Other(_) => None,
        }
    }

    /// The canonical meaning of one word of an action's name ("monitors" → the object
    /// monitor, "left" → the direction left), `None` for a word of no section but verbs.
    pub fn word(&self, word: &str) -> Option<Token> {
        match self.phrases.get(word)? {
            Meaning::Other(token) => Some(token.clone()),
            Meaning::Verbs(_) => None,
        }
    }
}

/// One word as a number of 1 to [`MAX_NUMBER`] ("3", "three", "third", "3rd").
fn number(word: &str) -> Option<u32> {
    let digits = numbers::digits(word);
    digits
        .parse::<u32>()
        .ok()
        .filter(|n| (1..=MAX_NUMBER).contains(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_grammar_loads_and_reads_the_longest_phrase() {
        let g = Grammar::parse(BUILTIN_TOML).expect("valid");
        let read = g.read("move this column to the left");
        assert_eq!(
            read,
            vec![
                Token::Verb(vec!["move".into()]),
                Token::Filler,
                Token::Object("column".into()),
                Token::Direction("left".into()),
            ]
        );
        assert!(g.read("show me")[0].says("toggle") && g.read("show me")[0].says("focus"));
        assert_eq!(
            g.read("workspace twenty one")[1],
            Token::Number(21),
            "tens and units join"
        );
        assert_eq!(g.read("the third column")[1], Token::Number(3));
        assert_eq!(g.read("a third")[0], Token::Fraction(33.333));
        assert_eq!(g.read("blorp")[0], Token::Word("blorp".into()));
    }

    #[test]
    fn a_phrase_in_two_sections_or_written_otherwise_is_refused() {
        let two = BUILTIN_TOML.replace("\"leftmost\"", "\"leftmost\", \"column\"");
        assert!(Grammar::parse(&two).unwrap_err().contains("two sections"));
        let upper = BUILTIN_TOML.replace("\"leftmost\"", "\"Leftmost\"");
        assert!(Grammar::parse(&upper).unwrap_err().contains("not written"));
    }
}
