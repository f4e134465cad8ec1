//! The decision head's deterministic matcher: when no rule plans, a name the recogniser
//! misheard ("open gate hub", "launch fire fox", "pause spot if i") is matched against
//! candidates built from trusted sources only, and the best one acts, asks, or is shown.
//!
//! * **Verb class** ([`classify`]): an open verb ("open", "go to", "launch"…), a switch verb
//!   ("switch to", "focus"…), a close verb, or a playback command with a player; the rest of
//!   the utterance is the spoken name. Without a verb, an utterance of two words or more is
//!   compared whole with the compositor phrases that have no number slot, and only acts or
//!   asks (never "unsure").
//! * **Candidates**: the site catalog (names, aliases), installed applications (`Name`,
//!   `GenericName`), profiles whose program is on `PATH` (name, aliases), the context's
//!   window `app_id`s (switch and close) and the known players. Each is a fully resolved step with a human label; the
//!   utterance only picks among them, never writes an argument.
//! * **Score** ([`similarity`]): edit distance with spaces removed (`strsim`'s normalised
//!   Damerau-Levenshtein) and Jaro-Winkler, raised when the Double Metaphone keys of the
//!   two agree (`rphonetic`), from 0 to 1. A winner within [`MARGIN`] of the runner-up never
//!   acts: it asks.
//! * **Tiers** (the runner's `[decide]`, sent as `router.plan`'s `decide {act, ask}`): at or
//!   above `act` the step is planned; at or above `ask` it is planned with `confirm: true`
//!   and `ask: "did you mean GitHub?"`, so the runner asks first through its doors; below,
//!   the plan escalates (`unsure`) naming the best two.
//! * **Chooser** (`decide.chooser: "llm.choose"`, sent when the runner has a chooser running):
//!   below `act`, when two or more candidates are near ([`Decision::Choose`]), the plan offers
//!   the nearest [`MAX_CHOICES`] as candidates for the chooser to pick one by id, each asking
//!   first, with the matcher's own decision as the plan's `fallback` (for a chooser that fails
//!   or is unsure). Near means at or above [`CHOICE_FLOOR`] × `ask` and within
//!   [`CHOICE_SPREAD`] of the best: a chooser adds knowledge only where the matcher cannot
//!   tell two names apart; offered names the matcher already ranks far apart ("get hub":
//!   GitHub 0.85, GitLab 0.55) or that are all faint ("my heart": AUR 0.58, IRS 0.54) it only
//!   turns into wrong questions, as a small model picks among them nearly at random.

use crate::plan::{Matched, Sources};
use crate::text::{compact, normalize, strip_word_prefix};
use rphonetic::{DoubleMetaphone, Encoder};
use utter_protocol::serde_json::{Value, json};

/// The tiers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// Act at or above this.
    pub act: f64,
    /// Ask at or above this.
    pub ask: f64,
    /// A chooser (`llm.choose`) runs: offer the near candidates to it.
    pub chooser: bool,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            act: 0.88,
            ask: 0.72,
            chooser: false,
        }
    }
}

impl Thresholds {
    /// `params.decide` (`{act, ask, chooser?}`: numbers from 0 to 1 with `ask <= act`, else
    /// the defaults, values out of range ignored; `chooser` is `"llm.choose"` when a chooser
    /// runs).
    pub fn from_param(value: Option<&Value>) -> Thresholds {
        let mut t = Thresholds::default();
        let num = |k: &str| {
            value
                .and_then(|v| v.get(k))
                .and_then(Value::as_f64)
                .filter(|x| (0.0..=1.0).contains(x))
        };
        if let (Some(act), Some(ask)) = (num("act"), num("ask"))
            && ask <= act
        {
            t = Thresholds {
                act,
                ask,
                chooser: false,
            };
        }
        t.chooser =
            value.and_then(|v| v.get("chooser")).and_then(Value::as_str) == Some("llm.choose");
        t
    }
}

/// A winner closer than this to the runner-up asks rather than acts.
pub const MARGIN: f64 = 0.04;

/// The most candidates offered to a chooser.
pub const MAX_CHOICES: usize = 8;

/// A candidate is offered to a chooser only at or above this fraction of the `ask` tier
/// (0.85 × 0.72 ≈ 0.61 with the defaults).
pub const CHOICE_FLOOR: f64 = 0.85;

/// … and only within this much of the best candidate's score.
pub const CHOICE_SPREAD: f64 = 0.1;

/// What the matcher concluded.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Plan it.
    Act(Matched),
    /// Plan it, asking first (`confirm: true`, the question in `ask`).
    Ask(Matched, String),
    /// Too unsure: the best two labels with their scores.
    Unsure(Vec<(String, f64)>),
    /// Let the chooser pick among these (each asking first: `confirm: true`), the matcher's
    /// own decision as the fallback.
    Choose(Vec<Choice>, Box<Decision>),
}

/// A candidate offered to the chooser.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// Its step (with `confirm: true`).
    pub step: Matched,
    /// Its name, as in "did you mean GitHub?".
    pub label: String,
    /// The matcher's score.
    pub score: f64,
    /// What the chooser reads: the verb and the name ("open GitHub").
    pub summary: String,
}

/// One candidate.
#[derive(Debug, Clone)]
struct Candidate {
    label: String,
    /// The spoken forms it is compared with (normalised).
    names: Vec<String>,
    step: Matched,
}

/// The verb class of an utterance and its spoken name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Open,
    Switch,
    Close,
    /// A playback command; the name is a player.
    Media(&'static str),
    /// No verb: the whole utterance, compared with the compositor phrases ("focus lift").
    Phrase,
}

pub(crate) const MEDIA_VERBS: &[(&str, &str)] = &[
    ("pause", "pause"),
    ("play", "play"),
    ("resume", "play"),
    ("stop", "stop"),
    ("next track on", "next"),
    ("next on", "next"),
    ("next", "next"),
    ("skip", "next"),
    ("previous", "previous"),
];

/// The verbs of the open class, longest first ("show" is the switch class's).
pub(crate) const OPEN_VERBS: &[&str] = &[
    "navigate to",
    "take me to",
    "browse to",
    "start up",
    "fire up",
    "open up",
    "go to",
    "launch",
    "visit",
    "start",
    "open",
    "run",
];

/// The verb class and the spoken name after it, articles and "app"/"website" dropped.
fn classify<'t>(text: &'t str, sources: &Sources<'_>) -> Option<(Class, &'t str)> {
    let strip = |rest: &'t str| -> &'t str {
        let mut rest = rest;
        for article in ["the ", "my ", "a "] {
            rest = rest.strip_prefix(article).unwrap_or(rest);
        }
        for suffix in [" app", " application", " website", " site", " window"] {
            rest = rest.strip_suffix(suffix).unwrap_or(rest);
        }
        rest
    };
    for verb in &sources.curated.close_verbs {
        if let Some(rest) = strip_word_prefix(text, verb).filter(|r| !r.is_empty()) {
            return Some((Class::Close, strip(rest)));
        }
    }
    for verb in OPEN_VERBS {
        if let Some(rest) = strip_word_prefix(text, verb).filter(|r| !r.is_empty()) {
            return Some((Class::Open, strip(rest)));
        }
    }
    for verb in &sources.curated.focus_verbs {
        if let Some(rest) = strip_word_prefix(text, verb).filter(|r| !r.is_empty()) {
            return Some((Class::Switch, strip(rest)));
        }
    }
    for (verb, command) in MEDIA_VERBS {
        if let Some(rest) = strip_word_prefix(text, verb).filter(|r| !r.is_empty()) {
            let rest = rest.strip_prefix("on ").unwrap_or(rest);
            return Some((Class::Media(command), strip(rest)));
        }
    }
    None
}

/// How alike a spoken name and a candidate's name are, from 0 to 1.
pub fn similarity(spoken: &str, name: &str) -> f64 {
    Heard::new(spoken).similarity(name)
}

/// A spoken name made ready for many comparisons (compacted, its phonetic key).
struct Heard {
    compact: String,
    len: usize,
    key: String,
}

impl Heard {
    fn new(spoken: &str) -> Heard {
        let compact = compact(&normalize(spoken));
        let key = phonetic_key(&compact);
        Heard {
            len: compact.chars().count(),
            compact,
            key,
        }
    }

    fn similarity(&self, name: &str) -> f64 {
        let a = &self.compact;
        let b = compact(&normalize(name));
        if a.is_empty() || b.is_empty() {
            return 0.0;
        }
        if *a == b {
            return 1.0;
        }
        let blen = b.chars().count();
        // Lengths this far apart score below every tier: no need to look closer.
        if blen * 2 < self.len || self.len * 2 < blen {
            return 0.0;
        }
        let edit = strsim::normalized_damerau_levenshtein(a, &b);
        let jw = strsim::jaro_winkler(a, &b);
        let mut score = 0.7 * edit + 0.3 * jw;
        // The phonetic key only matters where the spelling is already near.
        if score > 0.5 && !self.key.is_empty() && self.key == phonetic_key(&b) {
            score += (1.0 - score) * 0.5;
        }
        // Short names are easy to hit by chance: "door" is not "dota".
        let shorter = self.len.min(blen);
        if shorter < 5 {
            score *= 0.85 + 0.03 * shorter as f64;
        }
        score.clamp(0.0, 1.0)
    }
}

/// The Double Metaphone key of `text`'s ASCII letters ("" without any): the encoder slices
/// by bytes, and a name with other letters ("Éditeur", "workspace ١") must not reach it.
pub(crate) fn phonetic_key(text: &str) -> String {
    let ascii: String = text.chars().filter(char::is_ascii_alphabetic).collect();
    if ascii.is_empty() {
        return String::new();
    }
    DoubleMetaphone::new(Some(8)).encode(&ascii)
}

fn step(rule: &'static str, op: &'static str, args: Value, message: String) -> Matched {
    Matched {
        rule,
        op,
        args,
        message,
        confirm: false,
    }
}

/// The candidates of a verb class, from trusted sources only.
fn candidates(class: Class, sources: &Sources<'_>) -> Vec<Candidate> {
    let mut out = Vec::new();
    match class {
        Class::Open => {
            for site in sources.catalog.sites() {
                out.push(Candidate {
                    label: site.name.clone(),
                    names: std::iter::once(site.name.clone())
                        .chain(site.keys().iter().cloned())
                        .collect(),
                    step: step(
                        "decide",
                        "ensure_url",
                        json!({"url": site.url, "site": site.name}),
                        format!("open {} ({})", site.name, site.url),
                    ),
                });
            }
            for app in sources.apps.all() {
                // "open" brings up its window if one is open, as the open rule does.
                out.push(Candidate {
                    label: app.name.clone(),
                    names: std::iter::once(app.name.clone())
                        .chain(app.generic_name.clone())
                        .collect(),
                    step: Matched {
                        rule: "decide",
                        ..crate::windows::ensure_step(app)
                    },
                });
            }
            // A profile's application without a desktop entry only where its program is
            // installed: a guess at a name must not offer what cannot start.
            for profile in sources.profiles.iter().filter(|p| p.launch_installed()) {
                let app = profile.app_ids.first().unwrap_or(&profile.id);
                out.push(Candidate {
                    label: profile.name.clone(),
                    names: profile_names(profile),
                    step: step(
                        "decide",
                        "ensure_app",
                        json!({"app": app, "argv": profile.launch}),
                        format!("open {} ({})", profile.name, profile.launch.join(" ")),
                    ),
                });
            }
        }
        Class::Switch | Class::Close => {
            let close = class == Class::Close;
            if let Some(context) = sources.context {
                for app_id in &context.app_ids {
                    let (op, message) = if close {
                        ("close_app", format!("close the {app_id} window"))
                    } else {
                        ("focus_app", format!("focus the {app_id} window"))
                    };
                    let mut names = vec![app_id.clone()];
                    if let Some(p) = sources.profiles.for_app_id(app_id) {
                        names.extend(profile_names(p));
                    }
                    out.push(Candidate {
                        label: app_id.clone(),
                        names,
                        step: step("decide", op, json!({"app": app_id}), message),
                    });
                }
            }
            for app in sources.apps.all() {
                let (op, args, message) = if close {
                    (
                        "close_app",
                        json!({"app": app.id}),
                        format!("close {} ({})", app.name, app.id),
                    )
                } else {
                    (
                        "ensure_app",
                        json!({"app": app.id, "desktop_id": format!("{}.desktop", app.id)}),
                        format!("switch to {} ({})", app.name, app.id),
                    )
                };
                out.push(Candidate {
                    label: app.name.clone(),
                    names: vec![app.name.clone()],
                    step: step("decide", op, args, message),
                });
            }
        }
        Class::Phrase => {
            // The phrases without a number slot: a misheard number is not guessed.
            for phrase in sources.curated.table.phrases() {
                let Some((action, None)) = sources.curated.table.lookup(phrase) else {
                    continue;
                };
                if action.has_slot() {
                    continue;
                }
                let mut m = step(
                    "decide",
                    "niri",
                    action.step_args(None),
                    action.describe(None),
                );
                m.confirm = action.confirm || sources.curated.confirms(&action.command);
                out.push(Candidate {
                    label: format!("\"{phrase}\""),
                    names: vec![phrase.to_owned()],
                    step: m,
                });
            }
        }
        Class::Media(command) => {
            for player in crate::plan::KNOWN_PLAYERS {
                out.push(Candidate {
                    label: (*player).to_owned(),
                    names: vec![(*player).to_owned()],
                    step: step(
                        "decide",
                        "media",
                        json!({"command": command, "player": player}),
                        format!("{command} on {player}"),
                    ),
                });
            }
        }
    }
    out
}

/// True when a phrase may be what was heard as `spoken`: every object, direction and verb
/// said is in the phrase (a verb by any phrase of the same verb: "shut" says close), and
/// each word of the phrase that carries meaning and was not said (an object, a direction,
/// a verb, a plain word such as "floating") stands where a word the grammar does not know
/// was heard (a mishearing: "focus lift" may be "focus left"). "move the window down" is no
/// mishearing of "move the window to workspace down", "move the window" none of "close the
/// window" and "move the window to" none of "move the window to the floating layer": their
/// words name another action, and asking about it would be a wrong question.
fn same_frame(spoken: &str, phrase: &str) -> bool {
    use crate::grammar::Token;
    let grammar = crate::grammar::Grammar::builtin();
    let framing = |word: &str| {
        matches!(
            grammar.word(word),
            Some(Token::Object(_) | Token::Direction(_))
        )
    };
    let words = |text: &str| -> Vec<String> {
        normalize(text)
            .split(' ')
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let said = words(spoken);
    let candidate = words(phrase);
    let candidate_compact = compact(&candidate.join(" "));
    let said_compact = compact(&said.join(" "));
    if said
        .iter()
        .filter(|w| framing(w))
        .any(|w| !candidate_compact.contains(w.as_str()))
    {
        return false;
    }
    let shares_a_verb = |word: &str, others: &[String]| {
        grammar.verbs(word).is_some_and(|mine| {
            others.iter().any(|o| {
                grammar
                    .verbs(o)
                    .is_some_and(|theirs| theirs.iter().any(|v| mine.contains(v)))
            })
        })
    };
    let digits = |w: &str| w.chars().all(|c| c.is_ascii_digit());
    // A verb said that the phrase has no verb of may only be a mishearing ("grab a screen
    // shut"): it must stand for a word of the phrase that was not said.
    let foreign_verb = |w: &str| grammar.verbs(w).is_some() && !shares_a_verb(w, &candidate);
    let carries_meaning = |word: &str| {
        if grammar.verbs(word).is_some() {
            return !shares_a_verb(word, &said);
        }
        match grammar.word(word) {
            Some(Token::Object(_) | Token::Direction(_)) => true,
            Some(_) => false,
            None => !grammar.knows(word) && !digits(word),
        }
    };
    let unsaid: Vec<&String> = candidate
        .iter()
        .filter(|w| carries_meaning(w) && !said_compact.contains(w.as_str()))
        .collect();
    // At least one word of the phrase was heard as it is: "good night" is no mishearing of
    // "go right", though each of its words could be one.
    let small = |w: &str| {
        matches!(
            grammar.word(w),
            Some(Token::Filler | Token::To | Token::In | Token::Index)
        )
    };
    if !candidate.iter().any(|w| !small(w) && said.contains(w)) {
        return false;
    }
    // What may have been misheard: each word the grammar does not know or a foreign verb,
    // alone or joined with the word after it ("screen shut" for "screenshot").
    let misheard = |w: &str| (!grammar.knows(w) && !digits(w)) || foreign_verb(w);
    let mut heard: Vec<(Vec<usize>, String)> = Vec::new();
    for (i, w) in said.iter().enumerate() {
        if misheard(w) {
            heard.push((vec![i], w.clone()));
        }
        if let Some(next) = said.get(i + 1)
            && (misheard(w) || misheard(next))
        {
            heard.push((vec![i, i + 1], format!("{w}{next}")));
        }
    }
    let mut used: Vec<usize> = Vec::new();
    // Each phrase word that was not said needs an unknown word heard in its place that
    // could be it misheard ("lift" for "left", "work space" for "workspace"): "page" is no
    // mishearing of "workspace", nor "topic", so "go back to the previous page" is not
    // "go back to the previous workspace".
    for word in unsaid {
        let Some((at, _)) = heard
            .iter()
            .filter(|(at, _)| at.iter().all(|i| !used.contains(i)))
            .map(|(at, text)| (at, strsim::jaro_winkler(text, word)))
            .filter(|(_, score)| *score >= MISHEARD_WORD)
            .max_by(|a, b| a.1.total_cmp(&b.1))
        else {
            return false;
        };
        used.extend(at.iter().copied());
    }
    said.iter()
        .enumerate()
        .all(|(i, w)| !foreign_verb(w) || used.contains(&i))
}

/// How alike (Jaro-Winkler) a heard word must be to a phrase's word to stand for it.
const MISHEARD_WORD: f64 = 0.7;

fn profile_names(profile: &crate::profiles::Profile) -> Vec<String> {
    std::iter::once(profile.name.clone())
        .chain(profile.spoken.iter().cloned())
        .collect()
}

/// Whether `label` shares a word with `spoken` and has, beside it, a word that nothing said
/// resembles, while a word said is not in it ("youtube studio" and "YouTube Music"; not "vs
/// cold" and "VS Code", where "cold" may be "code" misheard): another thing of the same
/// family, not the same name misheard.
fn another_word(spoken: &str, label: &str) -> bool {
    let said: Vec<String> = normalize(spoken).split(' ').map(str::to_owned).collect();
    let named: Vec<String> = normalize(label).split(' ').map(str::to_owned).collect();
    if said.len() < 2 || named.len() < 2 || !said.iter().any(|w| named.contains(w)) {
        return false;
    }
    let unlike = |word: &String, others: &[String]| {
        others
            .iter()
            .all(|o| strsim::normalized_damerau_levenshtein(word, o) < 0.4)
    };
    said.iter().any(|w| !named.contains(w) && unlike(w, &named))
        && named.iter().any(|w| !said.contains(w) && unlike(w, &said))
}

/// Match a misheard name (see the module docs). `None` when the utterance has no verb
/// class, or no candidate is even remotely like it.
pub fn decide(text: &str, sources: &Sources<'_>, thresholds: Thresholds) -> Option<Decision> {
    let (class, spoken) = classify(text, sources).unwrap_or((Class::Phrase, text));
    if spoken.is_empty() || spoken.len() > 64 {
        return None;
    }
    // A whole utterance is a phrase only when it has two words or more and is near one: a
    // bare word ("close") or a sentence far from every phrase is no misheard phrase.
    if class == Class::Phrase && spoken.split(' ').filter(|w| !w.is_empty()).count() < 2 {
        return None;
    }
    let heard = Heard::new(spoken);
    let mut scored: Vec<(f64, Candidate)> = candidates(class, sources)
        .into_iter()
        .map(|c| {
            // The first name is the candidate's own (`Name`, the site's name); the others
            // (a GenericName, aliases) count a little less, so a name beats a description.
            let best = c
                .names
                .iter()
                .enumerate()
                .map(|(i, n)| heard.similarity(n) * if i == 0 { 1.0 } else { 0.97 })
                .fold(0.0, f64::max);
            (best, c)
        })
        .filter(|(s, _)| *s > 0.0)
        .filter(|(_, c)| class != Class::Phrase || same_frame(spoken, &c.names[0]))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    // The same label from two sources (a site and an app called alike, an open window and its
    // application) counts once: the first, which is the open window's for a switch.
    scored.dedup_by(|b, a| a.1.label.eq_ignore_ascii_case(&b.1.label));
    // Many phrases say one action ("full screen", "fullscreen it"): it counts once, by its
    // best phrase, so that the runner-up is another action.
    let mut seen: Vec<(&'static str, String)> = Vec::new();
    scored.retain(|(_, c)| {
        let key = (c.step.op, c.step.args.to_string());
        let new = !seen.contains(&key);
        if new {
            seen.push(key);
        }
        new
    });
    let (top, best) = scored.first()?.clone();
    let second = scored.get(1).map_or(0.0, |s| s.0);
    // "youtube studio" is not a mishearing of "YouTube Music": a name that shares a word with
    // what was heard but has another, unlike word in its place is asked, never acted on.
    let own =
        if top >= thresholds.act && top - second >= MARGIN && !another_word(spoken, &best.label) {
            let mut m = best.step;
            m.message = format!(
                "heard \"{spoken}\": {} (confidence {top:.2}); {}",
                best.label, m.message
            );
            return Some(Decision::Act(m));
        } else if top >= thresholds.ask {
            let mut m = best.step.clone();
            m.confirm = true;
            m.message = format!(
                "heard \"{spoken}\": did you mean {}? (confidence {top:.2}); {}",
                best.label, m.message
            );
            Decision::Ask(m, format!("did you mean {}?", best.label))
        } else if top < thresholds.ask * 0.75 || class == Class::Phrase {
            return None;
        } else {
            Decision::Unsure(
                scored
                    .iter()
                    .take(2)
                    .map(|(s, c)| (c.label.clone(), *s))
                    .collect(),
            )
        };
    let floor = (thresholds.ask * CHOICE_FLOOR).max(top - CHOICE_SPREAD);
    let near: Vec<Choice> = scored
        .iter()
        .take_while(|(s, _)| *s >= floor)
        .take(MAX_CHOICES)
        .map(|(score, c)| {
            let mut step = c.step.clone();
            step.confirm = true;
            step.message = format!(
                "heard \"{spoken}\": did you mean {}? (confidence {score:.2}); {}",
                c.label, step.message
            );
            Choice {
                summary: format!("{} {}", class.verb(), c.label).trim().to_owned(),
                label: c.label.clone(),
                score: *score,
                step,
            }
        })
        .collect();
    if thresholds.chooser && near.len() >= 2 {
        return Some(Decision::Choose(near, Box::new(own)));
    }
    Some(own)
}

impl Class {
    /// The verb a chooser reads before a candidate's name.
    fn verb(self) -> &'static str {
        match self {
            Class::Open => "open",
            Class::Switch => "switch to",
            Class::Close => "close",
            Class::Media(command) => command,
            Class::Phrase => "",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mishearings_score_their_name_first() {
        for (spoken, right, wrong) in [
            ("gate hub", "GitHub", "Gmail"),
            ("get hub", "GitHub", "Google"),
            ("spot if i", "Spotify", "Signal"),
            ("fire fox", "Firefox", "Files"),
            ("you tube", "YouTube", "Twitch"),
            ("red it", "Reddit", "Netflix"),
        ] {
            assert!(
                similarity(spoken, right) > similarity(spoken, wrong),
                "{spoken}: {right} {} vs {wrong} {}",
                similarity(spoken, right),
                similarity(spoken, wrong)
            );
        }
        assert_eq!(similarity("GitHub", "git hub"), 1.0);
        assert!(similarity("door", "discord") < 0.72);
        assert_eq!(similarity("", "x"), 0.0);
        // Letters the phonetic encoder cannot take are left out of its key, not a panic.
        for odd in [
            "work\u{200d}space \u{661}",
            "Éditeur de texte",
            "١٢٣",
            "日本語",
        ] {
            let _ = similarity(odd, "workspace 1");
            let _ = similarity("workspace 1", odd);
        }
        assert_eq!(phonetic_key("١"), "");
    }

    #[test]
    fn a_phrase_word_not_said_needs_a_misheard_twin() {
        // "lift" may be "left"; "page" is no "workspace", "topic" no "workspace".
        assert!(same_frame("focus lift", "focus left"));
        assert!(!same_frame(
            "go back to the previous page",
            "go back to the previous workspace"
        ));
        assert!(!same_frame(
            "move on to the next topic",
            "move onto the next workspace"
        ));
    }

    #[test]
    fn another_verb_or_an_unsaid_word_names_another_action() {
        // A verb said that the phrase has not: another action, not a mishearing.
        assert!(!same_frame("move the window", "close the window"));
        assert!(same_frame("shut the window", "close the window"));
        // The word that says which action was not said at all.
        assert!(!same_frame(
            "move the window to",
            "move the window to the floating layer"
        ));
        // Nothing of the phrase heard as it is: chit-chat, not "go right".
        assert!(!same_frame("good night", "go right"));
        // A verb may itself be misheard, alone or joined with its neighbour.
        assert!(same_frame("grab a screen shut", "grab a screenshot"));
        assert!(same_frame("clothes the window", "close the window"));
    }

    #[test]
    fn thresholds_come_from_the_request_or_default() {
        assert_eq!(Thresholds::from_param(None), Thresholds::default());
        let t = Thresholds::from_param(Some(&json!({"act": 0.9, "ask": 0.5})));
        assert_eq!((t.act, t.ask), (0.9, 0.5));
        for bad in [
            json!({"act": 0.5, "ask": 0.9}),
            json!({"act": 2, "ask": 0.5}),
            json!({"act": "x"}),
        ] {
            assert_eq!(
                Thresholds::from_param(Some(&bad)),
                Thresholds::default(),
                "{bad}"
            );
        }
    }

    #[test]
    fn another_word_in_a_shared_name_is_another_thing() {
        assert!(another_word("youtube studio", "YouTube Music"));
        assert!(another_word("google classroom", "Google Calendar"));
        assert!(!another_word("vs cold", "VS Code"));
        assert!(!another_word("fire fox", "Firefox"));
        assert!(!another_word("youtube music", "YouTube Music"));
        assert!(!another_word("gate hub", "GitHub"));
    }
}
