//! Phrase tables: fixed spoken phrases, each planning one niri action.
//!
//! Two tables exist at run time. The curated one comes from `data/compositor-phrases.toml`
//! (embedded at build time, see the file's header for its format): patterns with optional
//! words, alternatives and a number slot, expanded here into every phrase they stand for.
//! The other is generated from the user's own niri key bindings ([`crate::niri_config`]).
//! Both are a map from a *canonical* phrase to an action: the phrase as [`normalize`] writes
//! it, with spoken numbers as digits ([`numbers::digits`]) and the number slot written
//! [`SLOT`]. A lookup is one or two hash probes per word of the utterance.

use crate::numbers;
use crate::text::normalize;
use serde::Deserialize;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use toml::Spanned;
use utter_protocol::serde_json::{Map, Value, json};

/// The curated phrases compiled into the plugin.
pub const BUILTIN_TOML: &str = include_str!("../../../data/compositor-phrases.toml");

/// How the curated phrases are named in messages.
pub const BUILTIN_NAME: &str = "data/compositor-phrases.toml (built in)";

/// The number slot of a pattern, and its placeholder in `args`.
pub const SLOT: &str = "{n}";

/// The largest number a slot takes (niri's workspace indices are 8-bit).
pub const MAX_SLOT: u32 = 255;

/// How many phrases one pattern may expand to; more is a mistake in the file.
const MAX_EXPANSIONS: usize = 1024;

/// niri actions that lose work or cut the person off their screen when misheard: closing the
/// focused window, ending the session and blanking every monitor. A step planned for one of
/// them always carries `confirm: true` (the runner asks first, PROTOCOL.md §9.5), whether it
/// comes from the curated file (whose entries for them must say `confirm = true`) or from the
/// user's own key bindings.
pub const ALWAYS_CONFIRM: &[&str] = &["close-window", "quit", "power-off-monitors"];

/// True when a step for the niri action `command` must ask first whatever the phrase file
/// says (see [`ALWAYS_CONFIRM`]).
pub fn is_destructive(command: &str) -> bool {
    ALWAYS_CONFIRM.contains(&command)
}

/// One niri action: what `niri msg action <command> <args...>` would run.
#[derive(Debug, Clone, PartialEq)]
pub struct NiriAction {
    /// The action's name in kebab case, e.g. `focus-workspace`.
    pub command: String,
    /// Positional values; the string [`SLOT`] stands for the spoken number.
    pub args: Vec<Value>,
    /// Named values (KDL properties of the action node).
    pub options: Map<String, Value>,
    /// The planned step asks the person before it runs (`confirm: true` on the step).
    pub confirm: bool,
}

impl NiriAction {
    /// True when an argument is the number slot.
    pub fn has_slot(&self) -> bool {
        self.args.iter().any(|a| a.as_str() == Some(SLOT))
    }

    /// The step's args: `{command, args?, options?}` with the slot filled by `number`.
    /// Empty `args` and `options` are left out.
    pub fn step_args(&self, number: Option<u32>) -> Value {
        let mut out = json!({"command": self.command});
        let args: Vec<Value> = self
            .args
            .iter()
            .map(|a| match (a.as_str(), number) {
                (Some(SLOT), Some(n)) => json!(n),
                _ => a.clone(),
            })
            .collect();
        if !args.is_empty() {
            out["args"] = Value::Array(args);
        }
        if !self.options.is_empty() {
            out["options"] = Value::Object(self.options.clone());
        }
        out
    }

    /// `compositor: focus-workspace 3`, `compositor: screenshot show-pointer=false`: the
    /// action in words that hold on every compositor (the compositor plugin says what it sent).
    pub fn describe(&self, number: Option<u32>) -> String {
        let mut text = format!("compositor: {}", self.command);
        if let Value::Array(args) = &self.step_args(number)["args"] {
            for arg in args {
                match arg {
                    Value::String(s) => text.push_str(&format!(" {s:?}")),
                    other => text.push_str(&format!(" {other}")),
                }
            }
        }
        for (key, value) in &self.options {
            text.push_str(&format!(" {key}={value}"));
        }
        text
    }
}

/// A map from canonical phrases to actions.
#[derive(Debug, Clone, Default)]
pub struct PhraseTable {
    map: HashMap<String, Arc<NiriAction>>,
    /// The most words any phrase has: longer utterances are not looked up at all.
    max_words: usize,
}

impl PhraseTable {
    /// A table without phrases.
    pub fn new() -> PhraseTable {
        PhraseTable::default()
    }

    /// How many phrases the table holds.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when the table holds no phrase.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Every canonical phrase, in no particular order.
    pub fn phrases(&self) -> impl Iterator<Item = &str> {
        self.map.keys().map(String::as_str)
    }

    /// Add `phrase` (already canonical) for `action`. A phrase already in the table keeps
    /// its action, which is returned as the error.
    pub fn insert(
        &mut self,
        phrase: String,
        action: Arc<NiriAction>,
    ) -> Result<(), Arc<NiriAction>> {
        if let Some(existing) = self.map.get(&phrase) {
            return Err(existing.clone());
        }
        self.max_words = self.max_words.max(phrase.split(' ').count());
        self.map.insert(phrase, action);
        Ok(())
    }

    /// The action `canonical` (normalised text with numbers as digits) names, with the
    /// number it gave the slot. An exact phrase wins over one with a slot.
    pub fn lookup(&self, canonical: &str) -> Option<(Arc<NiriAction>, Option<u32>)> {
        if canonical.is_empty() {
            return None;
        }
        let words: Vec<&str> = canonical.split(' ').collect();
        if words.len() > self.max_words {
            return None;
        }
        if let Some(action) = self.map.get(canonical) {
            return Some((action.clone(), None));
        }
        for (i, word) in words.iter().enumerate() {
            let Some(n) = numbers::slot_value(word, MAX_SLOT) else {
                continue;
            };
            let mut key = words.clone();
            key[i] = SLOT;
            if let Some(action) = self.map.get(&key.join(" ")).filter(|a| a.has_slot()) {
                return Some((action.clone(), Some(n)));
            }
        }
        None
    }

    /// A phrase with a number slot that `canonical` would be, were its number one the slot
    /// takes: "workspace 0", "workspace 300", "workspace minus 1" (how [`normalize`] writes
    /// "-1"). Returns the action and the number as the person wrote it (`"-1"`, `"300"`), so
    /// that the plan can say why it has no step instead of using a different number.
    pub fn lookup_bad_number(&self, canonical: &str) -> Option<(Arc<NiriAction>, String)> {
        let words: Vec<&str> = canonical.split(' ').filter(|w| !w.is_empty()).collect();
        if words.is_empty() || words.len() > self.max_words + 1 {
            return None;
        }
        let is_digits = |w: &str| !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit());
        for i in 0..words.len() {
            // A signed number takes two words ("minus 1"), an unsigned one a single word.
            let (number, taken) = match (words[i], words.get(i + 1)) {
                (sign @ ("minus" | "negative" | "plus"), Some(n)) if is_digits(n) => {
                    (format!("{}{n}", if sign == "plus" { "+" } else { "-" }), 2)
                }
                (n, _) if is_digits(n) && numbers::slot_value(n, MAX_SLOT).is_none() => {
                    (n.to_owned(), 1)
                }
                _ => continue,
            };
            let mut key = words[..i].to_vec();
            key.push(SLOT);
            key.extend_from_slice(&words[i + taken..]);
            if let Some(action) = self.map.get(&key.join(" ")).filter(|a| a.has_slot()) {
                return Some((action.clone(), number));
            }
        }
        None
    }
}

/// The canonical form of spoken or written text: [`normalize`]d, numbers as digits.
pub fn canonical(text: &str) -> String {
    numbers::digits(&normalize(text))
}

/// The curated phrases and the verbs of the application rules.
#[derive(Debug, Clone, Default)]
pub struct Curated {
    /// The niri phrases.
    pub table: PhraseTable,
    /// "switch to", "focus", ...: normalised, longest first.
    pub focus_verbs: Vec<String>,
    /// "close", "quit", ...: normalised, longest first.
    pub close_verbs: Vec<String>,
    /// The actions whose entries say `confirm = true`, besides [`ALWAYS_CONFIRM`].
    pub confirmed: BTreeSet<String>,
}

/// Why the curated phrase file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PhraseError {
    /// Not valid TOML, or not the expected shape.
    #[error("cannot parse phrase file {path}: {source}")]
    Parse {
        /// The file.
        path: String,
        /// The parser's message (it names the line).
        #[source]
        source: toml::de::Error,
    },
    /// Well-formed but unusable.
    #[error("invalid phrase file {path}, line {line}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// 1-based line of the offending value.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PhraseFile {
    #[serde(default)]
    apps: AppVerbs,
    #[serde(default)]
    phrase: Vec<PhraseEntry>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct AppVerbs {
    #[serde(default)]
    focus_verbs: Vec<String>,
    #[serde(default)]
    close_verbs: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PhraseEntry {
    command: Spanned<String>,
    #[serde(default)]
    args: Vec<toml::Value>,
    #[serde(default)]
    options: toml::Table,
    #[serde(default)]
    confirm: bool,
    say: Vec<Spanned<String>>,
}

/// True for a niri action name: lowercase ASCII words joined by single dashes.
pub fn is_action_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.split('-').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
        && name.starts_with(|c: char| c.is_ascii_lowercase())
}

/// A TOML scalar as JSON; `None` for arrays, tables and dates.
fn scalar(value: &toml::Value) -> Option<Value> {
    match value {
        toml::Value::String(s) => Some(Value::String(s.clone())),
        toml::Value::Integer(i) => Some(json!(i)),
        toml::Value::Float(f) => {
            utter_protocol::serde_json::Number::from_f64(*f).map(Value::Number)
        }
        toml::Value::Boolean(b) => Some(Value::Bool(*b)),
        _ => None,
    }
}

/// Normalised verbs, longest first (so "switch to" is tried before "switch").
fn verbs(list: &[String]) -> Vec<String> {
    let mut out: Vec<String> = list
        .iter()
        .map(|v| normalize(v))
        .filter(|v| !v.is_empty())
        .collect();
    out.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    out.dedup();
    out
}

impl Curated {
    /// The phrases compiled into the plugin.
    pub fn builtin() -> Result<Curated, PhraseError> {
        Curated::parse(BUILTIN_TOML, BUILTIN_NAME)
    }

    /// Parse a phrase file; `source` names it in errors.
    pub fn parse(text: &str, source: &str) -> Result<Curated, PhraseError> {
        let file: PhraseFile = toml::from_str(text).map_err(|e| PhraseError::Parse {
            path: source.to_owned(),
            source: e,
        })?;
        let invalid = |span: std::ops::Range<usize>, message: String| PhraseError::Invalid {
            path: source.to_owned(),
            line: crate::text::line_of(text, span.start),
            message,
        };
        let mut table = PhraseTable::new();
        // Every entry of one action must agree on `confirm`: the line of the first says so.
        let mut confirm_of: HashMap<String, (bool, usize)> = HashMap::new();
        for entry in file.phrase {
            let command = entry.command.get_ref().trim().to_owned();
            if !is_action_name(&command) {
                return Err(invalid(
                    entry.command.span(),
                    format!(
                        "{command:?} is not a niri action name (lowercase words joined by dashes)"
                    ),
                ));
            }
            if is_destructive(&command) && !entry.confirm {
                return Err(invalid(
                    entry.command.span(),
                    format!(
                        "{command} cannot be undone when misheard, so its entry needs \
                         confirm = true"
                    ),
                ));
            }
            let line = crate::text::line_of(text, entry.command.span().start);
            match confirm_of.get(&command) {
                Some(&(earlier, earlier_line)) if earlier != entry.confirm => {
                    return Err(invalid(
                        entry.command.span(),
                        format!(
                            "{command} has confirm = {} here but confirm = {earlier} at line \
                             {earlier_line}; every entry of one action must agree",
                            entry.confirm
                        ),
                    ));
                }
                Some(_) => {}
                None => {
                    confirm_of.insert(command.clone(), (entry.confirm, line));
                }
            }
            let mut args = Vec::with_capacity(entry.args.len());
            for arg in &entry.args {
                let Some(value) = scalar(arg) else {
                    return Err(invalid(
                        entry.command.span(),
                        format!("{command}: args may hold only strings, numbers and booleans"),
                    ));
                };
                args.push(value);
            }
            let mut options = Map::new();
            for (key, value) in &entry.options {
                let Some(value) = scalar(value).filter(|v| v.as_str() != Some(SLOT)) else {
                    return Err(invalid(
                        entry.command.span(),
                        format!("{command}: option {key:?} must be a string, number or boolean"),
                    ));
                };
                options.insert(key.clone(), value);
            }
            let action = Arc::new(NiriAction {
                command: command.clone(),
                args,
                options,
                confirm: entry.confirm,
            });
            let slots_in_args = action
                .args
                .iter()
                .filter(|a| a.as_str() == Some(SLOT))
                .count();
            if slots_in_args > 1 {
                return Err(invalid(
                    entry.command.span(),
                    format!("{command}: at most one argument may be {SLOT}"),
                ));
            }
            if entry.say.is_empty() {
                return Err(invalid(
                    entry.command.span(),
                    format!("{command}: say is empty"),
                ));
            }
            for pattern in &entry.say {
                let phrases = expand(pattern.get_ref())
                    .map_err(|message| invalid(pattern.span(), format!("{command}: {message}")))?;
                for phrase in phrases {
                    let slots = phrase.split(' ').filter(|w| *w == SLOT).count();
                    if slots != slots_in_args {
                        return Err(invalid(
                            pattern.span(),
                            format!(
                                "{command}: {phrase:?} has {slots} number slot(s) where the args \
                                 have {slots_in_args}"
                            ),
                        ));
                    }
                    if let Err(owner) = table.insert(phrase.clone(), action.clone()) {
                        if owner != action {
                            return Err(invalid(
                                pattern.span(),
                                format!(
                                    "{phrase:?} is said for both {} and {command}",
                                    owner.describe(None)
                                ),
                            ));
                        }
                    }
                }
            }
        }
        Ok(Curated {
            table,
            focus_verbs: verbs(&file.apps.focus_verbs),
            close_verbs: verbs(&file.apps.close_verbs),
            confirmed: confirm_of
                .into_iter()
                .filter(|(_, (confirm, _))| *confirm)
                .map(|(command, _)| command)
                .collect(),
        })
    }

    /// True when a step for the niri action `command` asks first: one of [`ALWAYS_CONFIRM`],
    /// or an action the file marks `confirm = true`. The user's key bindings are held to the
    /// same list, so binding `close-window` to a phrase does not make it skip the question.
    pub fn confirms(&self, command: &str) -> bool {
        is_destructive(command) || self.confirmed.contains(command)
    }
}

/// One piece of a pattern: fixed words, or a choice between alternatives.
enum Piece {
    Words(String),
    Choice {
        options: Vec<String>,
        optional: bool,
    },
}

/// Split a pattern into pieces; an error for unbalanced or nested groups.
fn pieces(pattern: &str) -> Result<Vec<Piece>, String> {
    let mut out = Vec::new();
    let mut rest = pattern;
    while !rest.is_empty() {
        let Some(start) = rest.find(['[', '(', ']', ')', '|']) else {
            out.push(Piece::Words(rest.to_owned()));
            break;
        };
        let (before, from) = rest.split_at(start);
        out.push(Piece::Words(before.to_owned()));
        let open = from.chars().next().unwrap_or('|');
        let close = match open {
            '[' => ']',
            '(' => ')',
            other => return Err(format!("{other:?} outside a group in {pattern:?}")),
        };
        let body_and_rest = &from[1..];
        let Some(end) = body_and_rest.find(close) else {
            return Err(format!("{open:?} without {close:?} in {pattern:?}"));
        };
        let body = &body_and_rest[..end];
        if body.contains(['[', '(', ']', ')']) {
            return Err(format!("groups do not nest, in {pattern:?}"));
        }
        let options: Vec<String> = body.split('|').map(|o| o.trim().to_owned()).collect();
        if options.iter().any(String::is_empty) {
            return Err(format!("an empty alternative in {pattern:?}"));
        }
        out.push(Piece::Choice {
            options,
            optional: open == '[',
        });
        rest = &body_and_rest[end + 1..];
    }
    Ok(out)
}

/// Every canonical phrase a pattern stands for (deduplicated, in pattern order).
pub fn expand(pattern: &str) -> Result<Vec<String>, String> {
    let mut partial: Vec<String> = vec![String::new()];
    for piece in pieces(pattern)? {
        let choices: Vec<&str> = match &piece {
            Piece::Words(words) => vec![words.as_str()],
            Piece::Choice { options, optional } => {
                let mut c: Vec<&str> = options.iter().map(String::as_str).collect();
                if *optional {
                    c.insert(0, "");
                }
                c
            }
        };
        if partial.len().saturating_mul(choices.len()) > MAX_EXPANSIONS {
            return Err(format!(
                "{pattern:?} stands for more than {MAX_EXPANSIONS} phrases"
            ));
        }
        partial = partial
            .iter()
            .flat_map(|head| choices.iter().map(move |c| format!("{head} {c}")))
            .collect();
    }
    let mut out: Vec<String> = Vec::new();
    for raw in partial {
        let phrase = canonical_pattern(&raw);
        if phrase.is_empty() {
            return Err(format!("{pattern:?} can be said as nothing at all"));
        }
        if !out.contains(&phrase) {
            out.push(phrase);
        }
    }
    Ok(out)
}

/// The canonical form of one expanded pattern, keeping [`SLOT`] words.
fn canonical_pattern(raw: &str) -> String {
    let words: Vec<String> = raw
        .split_whitespace()
        .map(|w| {
            if w == SLOT {
                SLOT.to_owned()
            } else {
                normalize(w)
            }
        })
        .filter(|w| !w.is_empty())
        .collect();
    numbers::digits(&words.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_expand_to_canonical_phrases() {
        assert_eq!(
            expand("[go to] [the] workspace {n}").unwrap(),
            [
                "workspace {n}",
                "the workspace {n}",
                "go to workspace {n}",
                "go to the workspace {n}"
            ]
        );
        assert_eq!(expand("(Close|quit) it!").unwrap(), ["close it", "quit it"]);
        assert_eq!(expand("close this one").unwrap(), ["close this 1"]);
        for bad in ["[a", "a)", "[a (b)]", "a | b", "(a||b)", "[a]", "[a|b] [c]"] {
            // "[a|b] [c]" can be said as nothing; the others are malformed.
            assert!(expand(bad).is_err(), "{bad}");
        }
        let huge = "[a|b|c|d] [a|b|c|d] [a|b|c|d] [a|b|c|d] [a|b|c|d] x";
        assert!(expand(huge).unwrap_err().contains("more than"));
    }

    #[test]
    fn the_builtin_file_loads() {
        let curated = Curated::builtin().expect("built-in phrases");
        assert!(curated.table.len() > 500, "{} phrases", curated.table.len());
        // Longest first, so that "switch over to" is tried before "switch to".
        let longest = curated.focus_verbs.iter().map(String::len).max();
        assert_eq!(curated.focus_verbs.first().map(String::len), longest);
        assert!(curated.close_verbs.contains(&"close".to_owned()));
        for phrase in curated.table.phrases() {
            assert_eq!(canonical_pattern(phrase), phrase, "stored canonical");
        }
    }

    #[test]
    fn lookups_fill_the_slot() {
        let curated = Curated::builtin().expect("built-in phrases");
        let (action, n) = curated.table.lookup("go to workspace 3").expect("found");
        assert_eq!(n, Some(3));
        assert_eq!(
            action.step_args(n),
            json!({"command": "focus-workspace", "args": [3]})
        );
        assert_eq!(action.describe(n), "compositor: focus-workspace 3");
        let (action, n) = curated.table.lookup("close window").expect("found");
        assert_eq!((action.command.as_str(), n), ("close-window", None));
        assert_eq!(action.step_args(n), json!({"command": "close-window"}));
        assert!(curated.table.lookup("go to workspace 0").is_none());
        assert!(curated.table.lookup("go to workspace 256").is_none());
        assert!(curated.table.lookup("").is_none());
        let long = "workspace ".repeat(100) + "3";
        assert!(curated.table.lookup(&long).is_none());
    }

    #[test]
    fn bad_files_are_refused_with_the_line() {
        let err = Curated::parse(
            "[[phrase]]\ncommand = \"maximize-column\"\nsay = [\"big it\"]\n\n[[phrase]]\n\
             command = \"center-column\"\nsay = [\"big it\"]\n",
            "p.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("p.toml, line 7") && err.contains("both"),
            "{err}"
        );
        let err = Curated::parse(
            "[[phrase]]\ncommand = \"focus-workspace\"\nargs = [\"{n}\"]\nsay = [\"workspace\"]\n",
            "q.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("line 4") && err.contains("slot"), "{err}");
        let err = Curated::parse(
            "[[phrase]]\ncommand = \"Bad Name\"\nsay = [\"x\"]\n",
            "r.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("line 2"), "{err}");
        let err = Curated::parse("[[phrase]]\ncommand = \"x\"\nsay = [\"(a\"]\n", "s.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 3") && err.contains("without"), "{err}");
        assert!(Curated::parse("colour = 1\n", "t.toml").is_err());
        assert!(
            Curated::parse("", "u.toml")
                .expect("empty is fine")
                .table
                .is_empty()
        );
    }

    #[test]
    fn destructive_entries_must_confirm_and_entries_of_one_action_agree() {
        let curated = Curated::builtin().expect("built-in phrases");
        for command in ALWAYS_CONFIRM {
            assert!(curated.confirms(command), "{command}");
        }
        let (close, _) = curated.table.lookup("close this window").expect("found");
        assert!(close.confirm);
        let (off, _) = curated
            .table
            .lookup("turn off the monitors")
            .expect("found");
        assert_eq!(
            (off.command.as_str(), off.confirm),
            ("power-off-monitors", true)
        );
        let (ws, _) = curated.table.lookup("workspace 2").expect("found");
        assert!(!ws.confirm && !curated.confirms("focus-workspace"));

        let err = Curated::parse(
            "[[phrase]]\ncommand = \"close-window\"\nsay = [\"close it\"]\n",
            "a.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("a.toml, line 2") && err.contains("confirm = true"),
            "{err}"
        );
        let err = Curated::parse(
            "[[phrase]]\ncommand = \"center-column\"\nconfirm = true\nsay = [\"a\"]\n\n\
             [[phrase]]\ncommand = \"center-column\"\nargs = [1]\nsay = [\"b\"]\n",
            "b.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("b.toml, line 7") && err.contains("line 2") && err.contains("agree"),
            "{err}"
        );
        assert!(
            Curated::parse(
                "[[phrase]]\ncommand = \"quit\"\nconfirm = \"yes\"\nsay = [\"bye\"]\n",
                "c.toml"
            )
            .is_err(),
            "confirm is a boolean"
        );
        let custom = Curated::parse(
            "[[phrase]]\ncommand = \"center-column\"\nconfirm = true\nsay = [\"a\"]\n",
            "d.toml",
        )
        .expect("parses");
        assert!(custom.confirms("center-column") && custom.confirms("quit"));
        assert!(!custom.confirms("maximize-column"));
    }

    #[test]
    fn bad_numbers_are_found_for_slot_phrases_only() {
        let curated = Curated::builtin().expect("built-in phrases");
        let bad = |text: &str| {
            curated
                .table
                .lookup_bad_number(text)
                .map(|(a, n)| (a.command.clone(), n))
        };
        assert_eq!(
            bad("workspace minus 1"),
            Some(("focus-workspace".into(), "-1".into()))
        );
        assert_eq!(
            bad("go to workspace 0"),
            Some(("focus-workspace".into(), "0".into()))
        );
        assert_eq!(
            bad("move it to workspace plus 12"),
            Some(("move-window-to-workspace".into(), "+12".into()))
        );
        assert_eq!(
            bad("workspace 99999999999999999999"),
            Some(("focus-workspace".into(), "99999999999999999999".into()))
        );
        // A number that is fine, no number, or no phrase.
        assert_eq!(bad("workspace 3"), None);
        assert_eq!(bad("workspace minus"), None);
        assert_eq!(bad("close minus 1"), None);
        assert_eq!(bad(""), None);
    }
}
