//! In-app rules: typing text, pressing keys, scrolling and clicking in the focused window.
//!
//! Four families, tried in this order (rules 8 to 11 of [`crate::rules`]):
//!
//! 1. `type_text`: "type hello world", "type in …", "write …", "enter the text …" → op
//!    `type_text`, args `{text}`. The text is the rest of the utterance *as it was said*,
//!    taken from the raw transcript, not from the normalised words: case, inner punctuation
//!    and spacing stay, and so do trailing politeness words ("type thank you" types "thank
//!    you"). One trailing period, which speech-to-text adds to every sentence, is dropped; an
//!    ellipsis ("...") is kept. The verb must open the utterance (after a leading "please" or
//!    "hey utter"): "type" inside other words ("switch keyboard type") is never typing.
//! 2. `key`: "press / hit / tap \<chord\>" → op `key`, args `{chord, repeat?}`. A chord is
//!    modifiers and at most one key, written as X keysym names joined by `+` with the
//!    modifiers first in the order `ctrl`, `shift`, `alt`, `super` ("press control shift t"
//!    → `ctrl+shift+t`, "press alt f4" → `alt+F4`, "press the tab key" → `Tab`, "press the
//!    windows key" → `super`). "… three times", "twice" add `repeat` (2 to
//!    [`MAX_REPEAT`]; more is cut to [`MAX_REPEAT`], and a single press has no `repeat`).
//!    A word that names no key plans nothing, and the empty plan's message names the word.
//! 3. `scroll`: "scroll up / down / left / right [a little | a lot | N times]" → op `scroll`,
//!    args `{direction, amount}`, in steps: [`SCROLL_STEPS`] by default, [`SCROLL_LITTLE`]
//!    for "a little", [`SCROLL_LOT`] for "a lot", [`SCROLL_PAGE`] for "a page", and N steps
//!    (wheel clicks) for "N times" or a bare "scroll down five", at most [`MAX_SCROLL`]: a
//!    counted scroll counts the wheel's clicks, as people who count them expect.
//! 4. `click_element`: "click / click on / tap on / press on \<element\>" → op
//!    `click_element`, args `{description}`: the words after the verb as said (case kept,
//!    punctuation and quotes around them trimmed, trailing politeness dropped), which the
//!    action plugin looks for in the accessibility tree. "Click it" or "click here" plan
//!    nothing: they point at something without naming it.
//!
//! Conflicts resolved between the families:
//!
//! - "press" and "hit" are keys first. Only when the words are no chord *and* end with the
//!   name of a kind of element ("press the blue button", "hit the settings tab") do they
//!   click. "press the enter button" presses Return; "press a button" clicks (a lone letter
//!   before "button" is an article, not the key). "press the tab" is the Tab key.
//! - "tap" is a key when the words are a chord ("tap enter") and a click otherwise ("tap
//!   OK"): nobody taps a key that has no name.
//! - "page down" and "page up" are keys (after "press"); "scroll down" is scrolling. A bare
//!   "page down" plans nothing.
//! - "enter" is the Return key after "press"; as a verb it types only in "enter the text …"
//!   and "enter text …", so the compositor's "enter fullscreen" keeps its meaning (and comes
//!   first anyway).
//!
//! Every value comes from the utterance; the step keeps the request's provenance.

use crate::numbers;
use crate::plan::Matched;
use crate::text::{SpokenWord, filler_span, normalize_words};
use utter_protocol::serde_json::json;

/// The most presses one `key` step asks for.
pub const MAX_REPEAT: u32 = 20;

/// Scroll steps (wheel clicks) of a plain "scroll down".
pub const SCROLL_STEPS: u32 = 5;

/// Scroll steps of "a little".
pub const SCROLL_LITTLE: u32 = 2;

/// Scroll steps of "a lot".
pub const SCROLL_LOT: u32 = 15;

/// Scroll steps of "a page" (about a screenful of a document at three lines a step).
pub const SCROLL_PAGE: u32 = 10;

/// The most scroll steps one `scroll` step asks for.
pub const MAX_SCROLL: u32 = 50;

/// Verbs that type the rest of the utterance, longest first. The first that opens the
/// utterance decides: "type in" with nothing after it types nothing (not "in").
pub(crate) const TYPE_VERBS: &[&str] = &[
    "enter the number",
    "input the number",
    "put in the number",
    "fill in the number",
    "enter the text",
    "enter text",
    "type the text",
    "type the words",
    "type out",
    "type in",
    "type",
    "write the text",
    "write",
    "dictate",
    // A message's text said as the answer to one ("reply with on my way").
    "reply with",
    "respond with",
    "answer with",
];

/// Punctuation said as words in dictation, and the mark each stands for. The mark joins the
/// word before it ("thanks comma see you" types "thanks, see you").
const SPOKEN_MARKS: &[(&str, &str)] = &[
    ("exclamation mark", "!"),
    ("exclamation point", "!"),
    ("question mark", "?"),
    ("full stop", "."),
    ("comma", ","),
    ("semicolon", ";"),
    ("colon", ":"),
    ("period", "."),
];

/// Symbols said by name, as dictation tools take them: the name, the symbol, and whether the
/// name alone (with or without "a"/"an"/"the") means the symbol. Other names mean it only
/// with "sign", "symbol", "mark" or "character" after them ("type a euro sign"; "type
/// euro" types the word).
const NAMED_SYMBOLS: &[(&str, &str, bool)] = &[
    ("em dash", "\u{2014}", true),
    ("en dash", "\u{2013}", true),
    ("ellipsis", "\u{2026}", true),
    ("ampersand", "&", true),
    ("asterisk", "*", true),
    ("tilde", "~", true),
    ("bullet point", "\u{2022}", true),
    ("check mark", "\u{2713}", true),
    ("right arrow", "\u{2192}", true),
    ("left arrow", "\u{2190}", true),
    ("euro", "\u{20ac}", false),
    ("pound", "\u{a3}", false),
    ("pound sterling", "\u{a3}", false),
    ("yen", "\u{a5}", false),
    ("dollar", "$", false),
    ("cent", "\u{a2}", false),
    ("degree", "\u{b0}", false),
    ("degrees", "\u{b0}", false),
    ("copyright", "\u{a9}", false),
    ("registered trademark", "\u{ae}", false),
    ("registered", "\u{ae}", false),
    ("trademark", "\u{2122}", false),
    ("section", "\u{a7}", false),
    ("paragraph", "\u{b6}", false),
    ("bullet", "\u{2022}", false),
    ("at", "@", false),
    ("hash", "#", false),
    ("percent", "%", false),
    ("plus minus", "\u{b1}", false),
    ("plus or minus", "\u{b1}", false),
    ("multiplication", "\u{d7}", false),
    ("division", "\u{f7}", false),
    ("infinity", "\u{221e}", false),
    ("micro", "\u{b5}", false),
    ("caret", "^", false),
    ("pipe", "|", false),
];

/// The symbol `text` names as a whole ([`NAMED_SYMBOLS`]): "an em dash", "a euro sign", "the
/// copyright symbol".
fn named_symbol(text: &str) -> Option<&'static str> {
    let lower = text
        .trim()
        .trim_end_matches(['.', '!', '?'])
        .to_lowercase()
        .replace('-', " ");
    let name = ["a ", "an ", "the "]
        .iter()
        .find_map(|a| lower.strip_prefix(a))
        .unwrap_or(&lower)
        .trim();
    let (name, suffixed) = [" sign", " symbol", " mark", " character"]
        .iter()
        .find_map(|s| name.strip_suffix(s).map(|n| (n.trim(), true)))
        .unwrap_or((name, false));
    NAMED_SYMBOLS
        .iter()
        .find(|(said, _, alone)| *said == name && (suffixed || *alone))
        .map(|(_, symbol, _)| *symbol)
}

/// How a mark of [`JOINED_MARKS`] joins the words beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Join {
    /// To the word before it (a closing bracket).
    Before,
    /// To the word after it (an opening brace).
    After,
    /// To both (a slash, a call's parenthesis).
    Both,
}

/// Marks said as words that join the words beside them, as typed in code and paths.
const JOINED_MARKS: &[(&str, &str, Join)] = &[
    ("slash", "/", Join::Both),
    ("forward slash", "/", Join::Both),
    ("backslash", "\\", Join::Both),
    ("underscore", "_", Join::Both),
    // A call's parenthesis and an index's bracket follow the name: "library(tidyverse)".
    ("open paren", "(", Join::Both),
    ("open parenthesis", "(", Join::Both),
    ("left paren", "(", Join::Both),
    ("close paren", ")", Join::Before),
    ("close parenthesis", ")", Join::Before),
    ("right paren", ")", Join::Before),
    ("open bracket", "[", Join::Both),
    ("close bracket", "]", Join::Before),
    ("open brace", "{", Join::After),
    ("close brace", "}", Join::Before),
];

/// Extensions of files and sites a spoken "dot" joins ("draft dot md", "example dot com").
const EXTENSIONS: &[&str] = &[
    "com", "org", "net", "io", "dev", "de", "uk", "lan", "local", "md", "txt", "rs", "py", "js",
    "ts", "json", "toml", "yaml", "yml", "sh", "html", "css", "pdf", "csv", "docx", "odt", "png",
    "jpg", "log", "conf", "env", "lock", "go", "c", "h", "cpp",
];

/// `text` with its spoken punctuation written as marks ([`SPOKEN_MARKS`]): a mark word
/// after another word becomes the mark joined to that word, and the words are then
/// single-spaced. "period" and "full stop" only end the text ("the period is over" keeps
/// its word), the others stand anywhere; after an article a mark word is the mark's name
/// ("use a comma here").
pub(crate) fn written_marks(text: &str) -> String {
    // "type the word comma": the word itself, as said.
    if let Some(word) = crate::text::after_lead(text, &["the word "])
        .map(str::trim)
        .filter(|w| !w.is_empty())
    {
        return word.to_owned();
    }
    // "type john at example dot com": an address said in words, also after the words
    // that only say what it is ("type my email john at example dot com").
    // "type my email, info at example dot com": the recogniser's comma after the lead.
    let uncomma = text.replacen(", ", " ", 1);
    let lead_text = if ["my email", "my e-mail", "the email", "the address"]
        .iter()
        .any(|lead| text.to_lowercase().starts_with(&format!("{lead},")))
    {
        uncomma.as_str()
    } else {
        text
    };
    let address = crate::text::after_lead(
        lead_text,
        &[
            "my email address is ",
            "my email is ",
            "my email address ",
            "my email ",
            "my e-mail address ",
            "my e-mail ",
            "the email address ",
            "the address ",
        ],
    )
    .unwrap_or(lead_text);
    if let Some(email) = spoken_email(address) {
        return email;
    }
    // "type localhost colon three thousand": a development server's address, as typed
    // in an address bar.
    if let Some(url) = crate::web::local_address(&crate::text::normalize(text)) {
        return url.trim_start_matches("http://").to_owned();
    }
    // "type the number forty two": the number in digits.
    if let Some(n) = crate::text::after_lead(text, &["the number "])
        .and_then(|rest| crate::numbers::said_number(&crate::text::normalize(rest)))
    {
        return n.to_string();
    }
    // "type question mark": a mark said alone is that mark.
    let alone = text.trim_end_matches(['.', '!', '?']).to_lowercase();
    if let Some((_, mark)) = SPOKEN_MARKS.iter().find(|(said, _)| *said == alone) {
        return (*mark).to_owned();
    }
    // "type a euro sign", "type an em dash": a symbol by its name.
    if let Some(symbol) = named_symbol(text) {
        return symbol.to_owned();
    }
    // "ten dot zero dot zero dot twenty": an address of numbers, in digits.
    let dotted = crate::numbers::dotted_numbers(text);
    let words: Vec<&str> = dotted.split(' ').filter(|w| !w.is_empty()).collect();
    let mut out = String::with_capacity(text.len());
    let mut changed = dotted != text;
    // Whether the next word joins the last without a space ("application slash json").
    let mut glue = false;
    let mut i = 0;
    while i < words.len() {
        let named = i == 0
            || matches!(
                words[i - 1].to_lowercase().as_str(),
                "a" | "an" | "the" | "this" | "that"
            );
        // Marks that join words: a slash joins both sides, an opening bracket the word
        // after it, a closing one the word before it; a dot only before a file's or a
        // site's extension ("draft dot md", "example dot com").
        let joined = JOINED_MARKS.iter().find_map(|(said, mark, join)| {
            let n = said.split(' ').count();
            let same = words
                .get(i..i + n)?
                .iter()
                .map(|w| w.to_lowercase())
                .eq(said.split(' ').map(str::to_owned));
            same.then_some((n, *mark, *join))
        });
        let dot = words[i].eq_ignore_ascii_case("dot")
            && i > 0
            && !matches!(
                words[i - 1].to_lowercase().as_str(),
                "at" | "the" | "a" | "an" | "to" | "in" | "on" | "of" | "and" | "or" | "with"
            )
            && words
                .get(i + 1)
                .is_some_and(|next| EXTENSIONS.contains(&next.to_lowercase().as_str()));
        let joined = joined.or(dot.then_some((1, ".", Join::Both)));
        if let Some((n, mark, join)) = joined.filter(|_| !named || i == 0) {
            if !out.is_empty() && !glue && join == Join::After {
                out.push(' ');
            }
            out.push_str(mark);
            glue = join != Join::Before;
            changed = true;
            i += n;
            continue;
        }
        let found = SPOKEN_MARKS.iter().find_map(|(said, mark)| {
            let n = said.split(' ').count();
            let same = words
                .get(i..i + n)?
                .iter()
                .map(|w| w.trim_end_matches(['.', ',', '!', '?']).to_lowercase())
                .eq(said.split(' ').map(str::to_owned));
            let ends = i + n == words.len();
            (same && (ends || !matches!(*said, "period" | "full stop"))).then_some((n, *mark))
        });
        match found.filter(|_| !named) {
            Some((n, mark)) => {
                while out.ends_with(['.', ',']) && !out.ends_with("..") {
                    out.pop();
                }
                out.push_str(mark);
                changed = true;
                i += n;
            }
            None => {
                if !out.is_empty() && !glue {
                    out.push(' ');
                }
                out.push_str(words[i]);
                glue = false;
                i += 1;
            }
        }
    }
    // Without a mark said, the text stays exactly as said (spaces and all).
    if changed { out } else { text.to_owned() }
}

/// Whether `text` describes a secret of the person's ("my wallet password", "the pin",
/// "your credit card number") rather than saying words to type.
fn describes_a_secret(text: &str) -> bool {
    const OWNERS: &[&str] = &["my", "the", "your", "our", "his", "her", "their"];
    const SECRETS: &[&str] = &[
        "password",
        "passwords",
        "passphrase",
        "passcode",
        "pin",
        "pin code",
        "credit card",
        "card number",
        "security code",
        "social security",
        "private key",
        "seed phrase",
        "recovery phrase",
        "api key",
        "token",
    ];
    let normalized = crate::text::normalize(text);
    if !normalized
        .split(' ')
        .next()
        .is_some_and(|first| OWNERS.contains(&first))
    {
        return false;
    }
    // The secret ends the phrase, or only where it goes follows ("… into signal"); "the
    // password field is empty" is words to type.
    let padded = format!(" {normalized} ");
    SECRETS.iter().any(|secret| {
        padded
            .match_indices(&format!(" {secret} "))
            .any(|(at, found)| {
                let after = padded[at + found.len()..].trim();
                after.is_empty()
                    || ["into ", "in ", "to ", "for ", "here", "there"]
                        .iter()
                        .any(|lead| after.starts_with(lead))
            })
    })
}

/// An e-mail address said in words, the whole of `text`: "john at example dot com" is
/// `john@example.com`, "jane dot doe at mail dot example dot org" `jane.doe@mail.example.org`
/// (the name's words joined by dot, underscore or dash; the domain as
/// [`crate::text::spoken_address`] reads it). `None` for anything else ("meet me at
/// home").
fn spoken_email(text: &str) -> Option<String> {
    // A hyphen the recogniser wrote ("lingua-partners") is the address's own: said "dash".
    let text = text.replace('-', " dash ");
    let normalized = crate::text::normalize(text.trim_end_matches(['.', '!', '?']));
    let words: Vec<&str> = normalized.split(' ').filter(|w| !w.is_empty()).collect();
    let at = words.iter().position(|w| *w == "at")?;
    let (name, domain) = (&words[..at], &words[at + 1..]);
    let mut user = String::new();
    for (i, word) in name.iter().enumerate() {
        let joiner = match *word {
            "dot" => ".",
            "underscore" => "_",
            "dash" | "hyphen" => "-",
            w if w.chars().all(|c| c.is_ascii_alphanumeric()) => {
                // Two name words in a row are not one address ("meet me at …").
                if i > 0 && !user.ends_with(['.', '_', '-']) {
                    return None;
                }
                user.push_str(w);
                continue;
            }
            _ => return None,
        };
        if user.is_empty() || i + 1 == name.len() {
            return None;
        }
        user.push_str(joiner);
    }
    if user.is_empty() {
        return None;
    }
    let domain = crate::text::spoken_address(domain)?;
    (!domain.contains('/')).then(|| format!("{user}@{domain}"))
}

/// Verbs of a key chord. "tap" also clicks when its words are no chord.
pub(crate) const KEY_VERBS: &[&str] = &["press", "hit", "tap"];

/// Verbs that click an element, longest first.
pub(crate) const CLICK_VERBS: &[&str] = &[
    "click on", "click", "tap on", "press on", "hit on", "untick", "tick", "uncheck",
];

/// Kinds of element: after "press" or "hit", words that are no chord but end with one of
/// these click the element ("press the blue button").
const ELEMENT_NOUNS: &[&str] = &[
    "button", "link", "tab", "icon", "checkbox", "box", "menu", "item", "option", "field",
    "toggle", "switch", "entry", "image", "picture", "tile", "card", "row", "arrow",
];

/// Click targets that point without naming anything.
const DEICTIC: &[&str] = &[
    "it", "this", "that", "here", "there", "this one", "that one",
];

/// Modifier words and the name they have in a chord, in the chord's order.
const MODIFIERS: &[(&str, &[&str])] = &[
    ("ctrl", &["control", "ctrl", "ctl"]),
    ("shift", &["shift"]),
    ("alt", &["alt", "alternate"]),
    ("super", &["super", "windows", "win", "meta", "logo"]),
];

/// The spoken key names of [`KEYS`] ("enter", "page down"), for the candidates that sound
/// like a misheard key (`router.candidates`).
pub(crate) fn key_names() -> impl Iterator<Item = &'static str> {
    KEYS.iter().map(|(spoken, _)| *spoken)
}

/// Spoken key names (one to three normalised words) and their X keysym names. Letters,
/// digits and function keys are handled apart (see [`key_at`]).
const KEYS: &[(&str, &str)] = &[
    ("enter", "Return"),
    ("return", "Return"),
    ("escape", "Escape"),
    ("esc", "Escape"),
    ("tab", "Tab"),
    ("backspace", "BackSpace"),
    ("back space", "BackSpace"),
    ("delete", "Delete"),
    ("del", "Delete"),
    ("insert", "Insert"),
    ("space", "space"),
    ("spacebar", "space"),
    ("space bar", "space"),
    ("left", "Left"),
    ("left arrow", "Left"),
    ("arrow left", "Left"),
    ("right", "Right"),
    ("right arrow", "Right"),
    ("arrow right", "Right"),
    ("up", "Up"),
    ("up arrow", "Up"),
    ("arrow up", "Up"),
    ("down", "Down"),
    ("down arrow", "Down"),
    ("arrow down", "Down"),
    ("home", "Home"),
    ("end", "End"),
    ("page up", "Page_Up"),
    ("pageup", "Page_Up"),
    ("pgup", "Page_Up"),
    ("page down", "Page_Down"),
    ("pagedown", "Page_Down"),
    ("pgdn", "Page_Down"),
    ("print screen", "Print"),
    ("printscreen", "Print"),
    ("caps lock", "Caps_Lock"),
    ("capslock", "Caps_Lock"),
    ("menu", "Menu"),
    ("period", "period"),
    ("full stop", "period"),
    ("dot", "period"),
    ("comma", "comma"),
    ("slash", "slash"),
    ("forward slash", "slash"),
    ("backslash", "backslash"),
    ("back slash", "backslash"),
    ("minus", "minus"),
    ("dash", "minus"),
    ("hyphen", "minus"),
    ("plus", "plus"),
    ("equals", "equal"),
    ("equal", "equal"),
    ("semicolon", "semicolon"),
];

/// The NATO alphabet, for letters that speech-to-text mishears when said alone.
const NATO: &[&str] = &[
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
    "uniform", "victor", "whiskey", "xray", "yankee", "zulu",
];

/// What the in-app rules make of an utterance: not theirs, a step, or a reason why not.
type Outcome = Option<Result<Matched, String>>;

/// The step of rules 8 to 11 for `utterance`, the request's text as received (the
/// normalisation happens here, because `type_text` needs the words as they were said).
pub fn plan(utterance: &str) -> Option<Matched> {
    decide(utterance)?.ok()
}

/// Why rules 8 to 11 plan nothing for `utterance` when one of their verbs opened it ("press
/// blorp", "type", "scroll sideways"); `None` when none did or when they plan a step.
pub fn explain(utterance: &str) -> Option<String> {
    decide(utterance)?.err()
}

fn decide(utterance: &str) -> Outcome {
    let spoken = Spoken::new(utterance);
    if spoken.first >= spoken.last {
        return None;
    }
    type_text(&spoken)
        .or_else(|| key(&spoken))
        .or_else(|| scroll(&spoken))
        .or_else(|| click(&spoken))
        .or_else(|| bare_chord(&spoken))
}

/// A shortcut said on its own, the way people read it off a menu ("ctrl z", "control shift
/// t", "alt f4"): pressed as if "press" came before it. Only a chord that opens with a
/// modifier and names one key that is a letter, a digit said as a digit or a function key
/// ("alt right" is a direction, "shift one" a work shift, "super mario" a game), and only
/// when nothing else in the utterance is left over. "alt tab" is not one: it is the
/// compositor's window switch (a curated phrase), which a tapped chord is not on every
/// compositor. A chord that closes a window, quits an application or reaches the system
/// (alt+F4, ctrl+q, ctrl+alt+…, super+shift+e) asks first: said without "press", it is too
/// easily heard in speech.
fn bare_chord(spoken: &Spoken<'_>) -> Outcome {
    let rest = spoken.text(spoken.first);
    let opens_with_modifier = rest.first().is_some_and(|first| {
        matches!(
            *first,
            "control" | "ctrl" | "ctl" | "shift" | "alt" | "super"
        )
    });
    if !opens_with_modifier {
        return None;
    }
    let words: Vec<&str> = rest
        .iter()
        .copied()
        .filter(|w| !matches!(*w, "key" | "keys"))
        .collect();
    let chord = parse_chord(&words).ok()?;
    let key = chord.key.as_deref()?;
    let function_key = key
        .strip_prefix('F')
        .is_some_and(|n| n.parse::<u8>().is_ok());
    let said_as_character = key.chars().count() == 1 && words.contains(&key);
    if !(function_key || said_as_character) {
        return None;
    }
    let name = chord.name();
    if name == "alt+Tab" {
        return None;
    }
    Some(Ok(Matched {
        rule: "key",
        op: "key",
        args: json!({"chord": name}),
        message: format!("press {name}"),
        confirm: chord.ends_something(),
    }))
}

/// An utterance as normalised words that remember where they came from.
pub(crate) struct Spoken<'a> {
    pub(crate) raw: &'a str,
    pub(crate) words: Vec<SpokenWord>,
    /// The first word after the leading fillers ("please", "hey utter").
    pub(crate) first: usize,
    /// One past the last word before the trailing fillers ("please", "thanks").
    pub(crate) last: usize,
}

impl<'a> Spoken<'a> {
    pub(crate) fn new(raw: &'a str) -> Spoken<'a> {
        let words = normalize_words(raw);
        let joined = words
            .iter()
            .map(|w| w.text.as_str())
            .collect::<Vec<_>>()
            .join(" ");
        let (start, end) = filler_span(&joined);
        let first = joined[..start].split_whitespace().count();
        let last = first + joined[start..end].split_whitespace().count();
        Spoken {
            raw,
            words,
            first,
            last,
        }
    }

    /// The normalised words from `from` to the trailing fillers.
    pub(crate) fn text(&self, from: usize) -> Vec<&str> {
        self.words
            .get(from..self.last)
            .unwrap_or_default()
            .iter()
            .map(|w| w.text.as_str())
            .collect()
    }

    /// The index after the first of `verbs` that opens the utterance.
    pub(crate) fn after_verb(&self, verbs: &[&str]) -> Option<usize> {
        let words = self.text(self.first);
        verbs.iter().find_map(|verb| {
            let verb: Vec<&str> = verb.split(' ').collect();
            words.starts_with(&verb).then_some(self.first + verb.len())
        })
    }

    /// Where in the raw text word `index` begins, when the word before it is the last of a
    /// verb: after the raw word of that verb word, or inside it when they share one.
    pub(crate) fn raw_start(&self, index: usize) -> usize {
        let Some(previous) = index.checked_sub(1).and_then(|i| self.words.get(i)) else {
            return 0;
        };
        match self.words.get(index) {
            Some(word) if word.raw == previous.raw => self
                .run_of(index)
                .map_or(word.raw.start, |(start, _)| start),
            _ => previous.raw.end,
        }
    }

    /// Where in the raw text the words up to `end` (exclusive) end.
    pub(crate) fn raw_end(&self, end: usize) -> usize {
        let Some(last) = end.checked_sub(1).and_then(|i| self.words.get(i)) else {
            return 0;
        };
        match self.words.get(end) {
            Some(next) if next.raw == last.raw => self
                .run_of(end - 1)
                .map_or(last.raw.end, |(_, run_end)| run_end),
            _ => last.raw.end,
        }
    }

    /// The raw byte range of word `index` when its raw word splits into as many runs of
    /// letters and digits as it gave words ("type:hello"), which is when they match one to
    /// one; `None` when it does not (a host name, "&", a sign).
    fn run_of(&self, index: usize) -> Option<(usize, usize)> {
        let word = &self.words[index];
        let siblings: Vec<usize> = (0..self.words.len())
            .filter(|&i| self.words[i].raw == word.raw)
            .collect();
        let position = siblings.iter().position(|&i| i == index)?;
        let raw = &self.raw[word.raw.clone()];
        let mut runs: Vec<(usize, usize)> = Vec::new();
        let mut current: Option<usize> = None;
        for (offset, c) in raw.char_indices() {
            let inside = c.is_alphanumeric() || matches!(c, '\'' | '\u{2018}' | '\u{2019}' | '`');
            match (inside, current) {
                (true, None) => current = Some(offset),
                (false, Some(start)) => {
                    runs.push((start, offset));
                    current = None;
                }
                _ => {}
            }
        }
        if let Some(start) = current {
            runs.push((start, raw.len()));
        }
        (runs.len() == siblings.len())
            .then(|| runs[position])
            .map(|(s, e)| (word.raw.start + s, word.raw.start + e))
    }
}

/// `text` cut to a length fit for a one-line message.
fn short(text: &str) -> String {
    const MAX: usize = 60;
    if text.chars().count() <= MAX {
        text.to_owned()
    } else {
        let cut: String = text.chars().take(MAX).collect();
        format!("{cut}…")
    }
}

/// Words after a text to type that only say it is not to be entered (typing never presses
/// Enter): "type git status but don't run it".
/// A "but" before one goes with it.
const NOT_ENTERED: &[&str] = &[
    "don't run it",
    "do not run it",
    "don't enter it",
    "don't press enter",
    "do not press enter",
    "don't hit enter",
    "don't send it",
    "do not send it",
    "without running it",
    "without pressing enter",
    "without sending it",
];

/// Where typed text goes, said after it ("type admin in this field"); never typed.
const TYPE_PLACES: &[&str] = &[
    "in this field",
    "into this field",
    "in the field",
    "into the field",
    "in this box",
    "into this box",
    "in the box",
    "in the search box",
    "into the search box",
    "in the search field",
    "in the text box",
    "into the text box",
    "in the text field",
    "in this text field",
];

/// Rule 8: type the rest of the utterance.
fn type_text(spoken: &Spoken<'_>) -> Outcome {
    // "insert an em dash", "add a degree sign": a symbol by its name, with the verbs that
    // otherwise mean other things ("insert a row").
    if let Some(after) = spoken.after_verb(&["insert", "add", "put in", "put"]) {
        let rest = spoken.raw[spoken.raw_start(after)..].trim();
        if let Some(symbol) = named_symbol(rest) {
            return Some(Ok(Matched {
                rule: "type_text",
                op: "type_text",
                message: format!("type {symbol:?}"),
                args: json!({"text": symbol}),
                confirm: false,
            }));
        }
    }
    let after = spoken.after_verb(TYPE_VERBS)?;
    let verb = spoken.text(spoken.first)[..after - spoken.first].join(" ");
    let mut text = spoken.raw[spoken.raw_start(after)..].trim();
    if text.ends_with('.') && !text.ends_with("..") {
        text = text[..text.len() - 1].trim_end();
    }
    // "type admin in this field": where it goes is no part of the text (a bare "here" may
    // be, "type I'm here").
    let lower = text.to_lowercase();
    if let Some(place) = TYPE_PLACES.iter().find(|p| {
        lower.ends_with(*p)
            && lower.len() > p.len()
            && lower.as_bytes()[lower.len() - p.len() - 1] == b' '
    }) {
        text = text[..text.len() - place.len()].trim_end();
    }
    // "type git status but don't run it": typing never presses Enter; saying so is no text.
    let lower = text.to_lowercase();
    if let Some(tail) = NOT_ENTERED.iter().find(|t| {
        lower.ends_with(*t)
            && lower.len() > t.len()
            && matches!(lower.as_bytes()[lower.len() - t.len() - 1], b' ' | b',')
    }) {
        let kept = text[..text.len() - tail.len()].trim_end();
        text = kept
            .strip_suffix(" but")
            .or_else(|| kept.strip_suffix(" But"))
            .unwrap_or(kept)
            .trim_end_matches(',')
            .trim_end();
    }
    // Quotes around the whole text are the speaker's (or the recogniser's), not the text.
    for (open, close) in [
        ('"', '"'),
        ('\'', '\''),
        ('\u{201c}', '\u{201d}'),
        ('\u{2018}', '\u{2019}'),
    ] {
        if let Some(inner) = text
            .strip_prefix(open)
            .and_then(|t| t.strip_suffix(close))
            .filter(|t| !t.trim().is_empty() && !t.contains(open) && !t.contains(close))
        {
            text = inner.trim();
            break;
        }
    }
    if text.is_empty() {
        return Some(Err(format!(
            "\"{verb}\" needs the text to type after it, e.g. \"type hello world\""
        )));
    }
    // "type my wallet password into signal": a secret described, not said. Typing the
    // description is never what is meant, and the secret is not Utter's to know.
    if describes_a_secret(text) {
        return Some(Err(format!(
            "\"{verb} {text}\" describes a secret instead of saying the text; Utter types only words said aloud and never looks up a password"
        )));
    }
    // "enter the number forty two": a number, in digits, or no typing at all ("enter the
    // number of guests" asks for something else).
    // A text that is one number of 10 or more said in words ("type forty two") is typed in
    // digits, as dictation writes numbers; below ten the word stays ("type one").
    let whole_number = || {
        text.chars()
            .all(|c| c.is_alphabetic() || c == ' ' || c == '-')
            .then(|| crate::numbers::said_number(&crate::text::normalize(text)))
            .flatten()
            .filter(|n| *n >= 10)
    };
    let written = if verb.ends_with("the number") {
        crate::numbers::said_number(&crate::text::normalize(text))?.to_string()
    } else if let Some(n) = whole_number() {
        n.to_string()
    } else {
        written_marks(text)
    };
    let text = written.as_str();
    // Speech has no control characters: a line break or an escape in the text would press
    // Enter in a shell or drive the terminal, which "type" never means.
    if text.chars().any(char::is_control) {
        return Some(Err(format!(
            "\"{verb}\": the text holds a control character (a line break, tab or escape), which is never typed; say \"press enter\" for a new line"
        )));
    }
    Some(Ok(Matched {
        rule: "type_text",
        op: "type_text",
        message: format!("type {:?}", short(text)),
        args: json!({"text": text}),
        confirm: false,
    }))
}

/// A chord that did not parse.
#[derive(Debug, PartialEq)]
enum ChordError {
    /// No key and no modifier.
    Empty,
    /// A word that names no key.
    Unknown(String),
    /// Two keys besides the modifiers.
    TwoKeys(String, String),
}

/// A parsed chord: modifiers (as bits in [`MODIFIERS`] order) and the key.
#[derive(Debug, PartialEq)]
struct Chord {
    modifiers: [bool; 4],
    key: Option<String>,
}

impl Chord {
    /// `ctrl+shift+t`.
    fn name(&self) -> String {
        let mut parts: Vec<&str> = MODIFIERS
            .iter()
            .zip(self.modifiers)
            .filter(|(_, on)| *on)
            .map(|((name, _), _)| *name)
            .collect();
        if let Some(key) = &self.key {
            parts.push(key);
        }
        parts.join("+")
    }

    /// True for a chord that closes a window, quits an application or reaches the system
    /// (alt+F4, ctrl+q, ctrl+w, ctrl+alt+anything, super+shift+e or q): the step asks first,
    /// as closing a window by its compositor action does, since a misheard chord loses work.
    fn ends_something(&self) -> bool {
        let [ctrl, shift, alt, logo] = self.modifiers;
        let key = self.key.as_deref().unwrap_or("");
        (alt && (ctrl || key == "F4"))
            || (ctrl && matches!(key, "q" | "w"))
            || (logo && shift && matches!(key, "e" | "q"))
    }

    /// True when the key is a lone letter or digit.
    fn is_character(&self) -> bool {
        self.key.as_ref().is_some_and(|k| k.chars().count() == 1)
    }
}

/// The key that starts at `words[i]`, with the number of words it takes.
fn key_at(words: &[&str], i: usize) -> Option<(String, usize)> {
    for len in (1..=3).rev() {
        let Some(phrase) = words.get(i..i + len) else {
            continue;
        };
        let phrase = phrase.join(" ");
        if let Some((_, keysym)) = KEYS.iter().find(|(spoken, _)| *spoken == phrase) {
            // "plus" between two parts joins them; only at the end is it the key.
            if phrase == "plus" && i + 1 < words.len() {
                continue;
            }
            return Some(((*keysym).to_owned(), len));
        }
    }
    let word = words[i];
    let function = |number: &str| {
        number
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=24).contains(n) && !number.starts_with('0'))
            .map(|n| format!("F{n}"))
    };
    if let Some(number) = word.strip_prefix('f').filter(|n| !n.is_empty())
        && let Some(name) = function(number)
    {
        return Some((name, 1));
    }
    if word == "f"
        && let Some(name) = words.get(i + 1).and_then(|n| function(n))
    {
        return Some((name, 2));
    }
    if word == "x" && words.get(i + 1) == Some(&"ray") {
        return Some(("x".to_owned(), 2));
    }
    if let Some(letter) = NATO.iter().find(|n| **n == word) {
        return Some((letter[..1].to_owned(), 1));
    }
    if word == "juliett" || word == "whisky" {
        return Some((word[..1].to_owned(), 1));
    }
    let mut chars = word.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) if c.is_ascii_lowercase() || c.is_ascii_digit() => Some((c.to_string(), 1)),
        _ => None,
    }
}

/// Parse the words of a chord (numbers already digits, "the" and "key" already gone).
fn parse_chord(words: &[&str]) -> Result<Chord, ChordError> {
    let mut chord = Chord {
        modifiers: [false; 4],
        key: None,
    };
    let mut key_words = String::new();
    let mut i = 0;
    while i < words.len() {
        let word = words[i];
        if let Some(m) = MODIFIERS
            .iter()
            .position(|(_, spoken)| spoken.contains(&word))
        {
            chord.modifiers[m] = true;
            i += 1;
            continue;
        }
        if matches!(word, "and" | "plus") && i > 0 && i + 1 < words.len() {
            i += 1;
            continue;
        }
        let Some((key, len)) = key_at(words, i) else {
            return Err(ChordError::Unknown(word.to_owned()));
        };
        let said = words[i..i + len].join(" ");
        if chord.key.is_some() {
            return Err(ChordError::TwoKeys(key_words, said));
        }
        chord.key = Some(key);
        key_words = said;
        i += len;
    }
    if chord.key.is_none() && !chord.modifiers.contains(&true) {
        return Err(ChordError::Empty);
    }
    Ok(chord)
}

/// The number of presses that "… N times", "once", "twice" or "thrice" at the end of
/// `words` asks for, and the words before it. `Err` with the number for zero.
pub(crate) fn repetition<'w>(words: &'w [&'w str]) -> Result<(u32, &'w [&'w str]), u32> {
    let n = words.len();
    let counted = |count: &str| count.parse::<u32>().ok();
    match words {
        [.., "once"] => Ok((1, &words[..n - 1])),
        [.., "twice"] => Ok((2, &words[..n - 1])),
        [.., "thrice"] => Ok((3, &words[..n - 1])),
        [.., count, "times" | "time"] if counted(count).is_some() => {
            let count = counted(count).unwrap_or(1);
            if count == 0 {
                Err(0)
            } else {
                Ok((count, &words[..n - 2]))
            }
        }
        _ => Ok((1, words)),
    }
}

/// The message for a chord that did not parse.
fn chord_problem(verb: &str, error: ChordError) -> String {
    match error {
        ChordError::Empty => {
            format!("\"{verb}\" needs a key to press, e.g. \"press enter\" or \"press control a\"")
        }
        ChordError::Unknown(word) => format!(
            "no key is called \"{word}\": say a key such as enter, escape, tab, space, \
             backspace, page down, f5 or a letter, with control, shift, alt or super before it"
        ),
        ChordError::TwoKeys(first, second) => format!(
            "\"{first}\" and \"{second}\" are two keys; a chord is modifiers and one key, \
             e.g. \"press control shift t\""
        ),
    }
}

/// The buttons of standard dialogs ("press ok"), which no key is called.
const DIALOG_BUTTONS: &[&str] = &[
    "ok", "okay", "cancel", "yes", "no", "apply", "accept", "decline", "agree", "continue",
    "submit", "done", "allow", "deny", "confirm", "retry", "skip", "finish", "install", "upload",
    "sign in", "log in", "login", "sign out", "log out", "dismiss", "got it",
];

/// Rule 9: press a key chord (and click, for "press the blue button" and "tap OK").
fn key(spoken: &Spoken<'_>) -> Outcome {
    let after = spoken.after_verb(KEY_VERBS)?;
    let verb = spoken.words[after - 1].text.clone();
    let rest = spoken.text(after);
    if rest.first() == Some(&"on") {
        // "press on the send button" is a click (rule 11).
        return None;
    }
    let canonical = numbers::digits(&rest.join(" "));
    let all: Vec<&str> = canonical.split(' ').filter(|w| !w.is_empty()).collect();
    let parsed = match repetition(&all) {
        Err(zero) => Err(format!(
            "a key is pressed 1 to {MAX_REPEAT} times, not {zero}"
        )),
        Ok((times, words)) => {
            let words: Vec<&str> = words
                .iter()
                .copied()
                .skip_while(|w| *w == "the")
                .filter(|w| !matches!(*w, "key" | "keys"))
                .collect();
            let (words, buttoned) = match words.split_last() {
                Some((&"button", before)) => (before.to_vec(), true),
                _ => (words, false),
            };
            match parse_chord(&words) {
                // "press a button": the letter is an article, not the key.
                Ok(chord) if buttoned && chord.is_character() => {
                    Err(chord_problem(&verb, ChordError::Unknown(words.join(" "))))
                }
                Ok(chord) => Ok((chord, times)),
                Err(e) => Err(chord_problem(&verb, e)),
            }
        }
    };
    match parsed {
        Ok((chord, times)) => {
            let name = chord.name();
            let confirm = chord.ends_something();
            let repeat = times.min(MAX_REPEAT);
            let mut args = json!({"chord": name});
            let mut message = format!("press {name}");
            if repeat > 1 {
                args["repeat"] = json!(repeat);
                message.push_str(&format!(" {repeat} times"));
            }
            if times > MAX_REPEAT {
                message.push_str(&format!(" (at most {MAX_REPEAT})"));
            }
            Some(Ok(Matched {
                rule: "key",
                op: "key",
                args,
                message,
                confirm,
            }))
        }
        Err(problem) => {
            let names_element = rest.last().is_some_and(|w| ELEMENT_NOUNS.contains(w));
            // "press ok", "press the little arrow thing": a dialog's button, or a thing said
            // with its article, that is no key (and no modifier makes it a chord) is a
            // control to click; "press blorp" stays a key nobody has.
            let described = verb == "press"
                && rest.len() >= 3
                && matches!(rest.first().copied(), Some("the" | "that" | "this"));
            let control = described || DIALOG_BUTTONS.contains(&rest.join(" ").as_str());
            let no_chord = control
                && !rest.iter().any(|w| {
                    matches!(
                        *w,
                        "control"
                            | "ctrl"
                            | "shift"
                            | "alt"
                            | "super"
                            | "meta"
                            | "command"
                            | "cmd"
                            | "windows"
                            | "win"
                            | "function"
                            | "fn"
                    )
                })
                && problem.starts_with("no key is called");
            if verb == "tap" || names_element || no_chord {
                click_after(spoken, after).or(Some(Err(problem)))
            } else {
                Some(Err(problem))
            }
        }
    }
}

/// Rule 10: scroll the focused window.
fn scroll(spoken: &Spoken<'_>) -> Outcome {
    let after = spoken.after_verb(&[
        "keep scrolling",
        "continue scrolling",
        "keep going",
        "keep moving",
        "scroll",
        "wheel",
        "mouse wheel",
        "swipe",
        // "further down please", "a bit further up": on with the scrolling.
        "a bit further",
        "a little further",
        "further",
        // "go down the page", "move down the document", "roll it down": only with what
        // scrolls said (a bare "go down" moves the focus).
        "go",
        "move",
        "roll",
    ])?;
    let verb = spoken.words[after - 1].text.clone();
    let needs_object = matches!(verb.as_str(), "go" | "move" | "roll");
    let problem = || {
        Some(Err(format!(
            "\"scroll\" needs a direction (up, down, left or right) and may say how far: \
             \"a little\", \"a lot\" or \"three times\" (at most {MAX_SCROLL} steps)"
        )))
    };
    let words = spoken.text(after);
    let mut words: &[&str] = &words;
    let objects: &[&[&str]] = &[
        &["the", "page"],
        &["this", "page"],
        &["the", "window"],
        &["this", "window"],
        &["page"],
        &["it"],
    ];
    // What scrolls, said as where ("scroll up in the output", "scroll down on the page"):
    // the window under the pointer, whatever it shows (an application said there, "in the
    // terminal", is the window to scroll, planned as a target elsewhere).
    const SCROLLED: &[&str] = &[
        "page",
        "window",
        "output",
        "document",
        "list",
        "log",
        "logs",
        "file",
        "feed",
        "timeline",
        "results",
        "thread",
        "conversation",
        "sidebar",
    ];
    let place = |w: &[&str]| {
        matches!(w, [prep, article, noun]
            if matches!(*prep, "in" | "on" | "through")
                && matches!(*article, "the" | "this" | "my")
                && SCROLLED.contains(noun))
    };
    // "scroll the page down", "scroll down the page", "scroll the timeline to the right".
    let named = |w: &[&str]| {
        matches!(w, [article, noun]
            if matches!(*article, "the" | "this" | "my") && SCROLLED.contains(noun))
    };
    let skip_object = |words: &mut &[&str]| {
        if let Some(object) = objects.iter().find(|o| words.starts_with(o)) {
            *words = &words[object.len()..];
        } else if words.len() >= 3 && place(&words[..3]) {
            *words = &words[3..];
        } else if words.len() >= 2 && named(&words[..2]) {
            *words = &words[2..];
        }
    };
    let after_it = words.first() == Some(&"it");
    skip_object(&mut words);
    // "scroll back up", "scroll to the right", "scroll over to the left".
    for lead in [
        &["back"][..],
        &["over"],
        &["to", "the"],
        &["towards", "the"],
        &["to"],
    ] {
        if words.starts_with(lead) {
            words = &words[lead.len()..];
        }
    }
    // How far, said before the direction: "scroll way down", "scroll all the way up".
    let mut far = false;
    let mut lot = false;
    if words.starts_with(&["all", "the", "way"]) {
        far = true;
        words = &words[3..];
    } else if let [degree, _, ..] = words
        && matches!(*degree, "way" | "far" | "much")
    {
        lot = true;
        words = &words[1..];
    }
    let Some((direction, mut amount)) = words.split_first() else {
        return if needs_object { None } else { problem() };
    };
    if !matches!(*direction, "up" | "down" | "left" | "right") {
        return if needs_object { None } else { problem() };
    }
    let before_object = amount.len();
    skip_object(&mut amount);
    // "go down the page": the verb of moving scrolls only what scrolls, said ("roll it down"
    // says it first).
    let object_said = amount.len() < before_object || (verb == "roll" && after_it);
    if needs_object && !object_said {
        return None;
    }
    // "scroll up to the older messages": where to, after the direction; the top or the
    // bottom is as far as a scroll goes.
    if let [to, rest @ ..] = amount
        && matches!(*to, "to" | "until" | "till" | "towards")
        && !rest.is_empty()
    {
        far = matches!(
            rest.last().copied(),
            Some("top" | "bottom" | "beginning" | "end" | "start")
        );
        amount = &[];
    }
    let amount = amount.join(" ");
    let steps = match amount.as_str() {
        "" if far => MAX_SCROLL,
        "" if lot => SCROLL_LOT,
        "" | "more" | "some more" | "again" | "further" | "a bit further" => SCROLL_STEPS,
        "a little" | "a little bit" | "a bit" | "a tiny bit" | "slightly" | "just a little"
        | "a little more" | "a bit more" => SCROLL_LITTLE,
        "a lot" | "a lot more" | "lots" | "a long way" | "far" | "way more" | "a bunch"
        | "a ton" | "loads" | "much more" | "a good bit" => SCROLL_LOT,
        // About a screenful: what Page Down moves in most viewers.
        "a page" | "one page" | "a screen" | "one screen" | "a screenful" | "a page or so" => {
            SCROLL_PAGE
        }
        other => {
            let counted = numbers::digits(other);
            let counted: Vec<&str> = counted.split(' ').collect();
            let times = match (repetition(&counted), counted.as_slice()) {
                (Ok((times, [])), _) => times,
                // "scroll down three": as many clicks.
                (_, [n]) => match n.parse::<u32>() {
                    Ok(times @ 1..) => times,
                    _ => return problem(),
                },
                _ => return problem(),
            };
            times.min(MAX_SCROLL)
        }
    };
    Some(Ok(Matched {
        rule: "scroll",
        op: "scroll",
        message: format!("scroll {direction} {steps} steps"),
        args: json!({"direction": direction, "amount": steps}),
        confirm: false,
    }))
}

/// Rule 11: click an element named after a click verb.
fn click(spoken: &Spoken<'_>) -> Outcome {
    let after = spoken.after_verb(CLICK_VERBS)?;
    let verb = spoken.text(spoken.first)[..after - spoken.first].join(" ");
    Some(click_after(spoken, after).unwrap_or_else(|| {
        Err(format!(
            "\"{verb}\" needs the name of what to click, e.g. \"click the send button\""
        ))
    }))
}

/// Where an element is, said after its name ("click downloads in the sidebar"): the
/// speaker's orientation, not part of the name.
const CLICK_PLACES: &[&str] = &[
    "in the sidebar",
    "on the sidebar",
    "in the side bar",
    "in the toolbar",
    "on the toolbar",
    "in the menu bar",
    "in the top bar",
    "in the header",
    "in the footer",
    "in the panel",
    "in the dialog",
    "in the dialogue",
    "in the corner",
    "in the top left corner",
    "in the top right corner",
    "in the bottom left corner",
    "in the bottom right corner",
    "at the top",
    "at the bottom",
    "at the top left",
    "at the top right",
    "at the bottom left",
    "at the bottom right",
    "on the left",
    "on the right",
    "on the left side",
    "on the right side",
    "up top",
    "down below",
];

/// The `click_element` step for the words from `after` on, as said; `None` when they are
/// none or only point ("it", "here").
fn click_after(spoken: &Spoken<'_>, after: usize) -> Option<Result<Matched, String>> {
    let words = spoken.text(after);
    if words.is_empty() || DEICTIC.contains(&words.join(" ").as_str()) {
        return None;
    }
    let raw = &spoken.raw[spoken.raw_start(after)..spoken.raw_end(spoken.last)];
    let description = raw.trim().trim_matches(|c: char| {
        c.is_whitespace() || ".,!?;:\"'\u{201c}\u{201d}\u{2018}\u{2019}".contains(c)
    });
    // "the send button" is the button called Send: the article is the speaker's ("a blue
    // button" too, as a recogniser may write "the").
    let after_article = ["the ", "an ", "a "].iter().find_map(|article| {
        description
            .get(..article.len())
            .filter(|head| head.eq_ignore_ascii_case(article))
            .map(|_| description[article.len()..].trim_start())
    });
    let description = after_article.unwrap_or(description);
    // "downloads in the sidebar", "the save icon at the top": where it is, said to help
    // find it, is no word of its name.
    let lower = description.to_lowercase();
    let description = CLICK_PLACES
        .iter()
        .find_map(|place| {
            lower
                .strip_suffix(place)
                .filter(|head| head.ends_with(' ') && !head.trim().is_empty())
                .map(|head| description[..head.len()].trim_end())
        })
        .unwrap_or(description);
    // "tick the box that says i agree": the box is found by what it says.
    let description = crate::text::after_lead(
        description,
        &[
            "box that says ",
            "checkbox that says ",
            "check box that says ",
            "box labelled ",
            "box labeled ",
            "box next to ",
            "box for ",
        ],
    )
    .filter(|rest| !rest.is_empty())
    .unwrap_or(description);
    // "the button reply": a button or link said first, after an article, then the name it
    // carries (a learner's order). Not "option 2" (no article: a name), "the menu icon" (an
    // icon), nor "the button labelled send" (the matcher reads the label itself).
    let description = ["button", "link"]
        .iter()
        .filter(|_| after_article.is_some())
        .find_map(|noun| {
            let lower = description.to_lowercase();
            let rest = lower.strip_prefix(noun)?.strip_prefix(' ')?;
            let words: Vec<&str> = rest.split(' ').collect();
            // One or two words of a name: not where ("below", "next to send"), how often
            // ("twice"), a pronoun, a number or a state, and nothing after a comma or a
            // question mark.
            let not_a_name = |w: &str| {
                ELEMENT_NOUNS.contains(&w)
                    || w.chars()
                        .any(|c| c.is_ascii_digit() || matches!(c, ',' | '?' | '!'))
                    || matches!(
                        w,
                        "called"
                            | "named"
                            | "labelled"
                            | "labeled"
                            | "that"
                            | "saying"
                            | "with"
                            | "for"
                            | "of"
                            | "in"
                            | "on"
                            | "off"
                            | "at"
                            | "to"
                            | "below"
                            | "above"
                            | "under"
                            | "over"
                            | "there"
                            | "here"
                            | "it"
                            | "this"
                            | "twice"
                            | "again"
                            | "once"
                            | "up"
                            | "down"
                            | "left"
                            | "right"
                            | "next"
                            | "please"
                            | "now"
                            | "too"
                            | "as"
                            | "and"
                            | "or"
                            | "no"
                            | "not"
                    )
            };
            if words.is_empty() || words.len() > 2 || words.iter().any(|w| not_a_name(w)) {
                return None;
            }
            let name = description[description.len() - rest.len()..].trim();
            (!name.is_empty()).then_some(name)
        })
        .unwrap_or(description);
    if description.is_empty() {
        return None;
    }
    Some(Ok(Matched {
        rule: "click_element",
        op: "click_element",
        message: format!("click {:?}", short(description)),
        args: json!({"description": description}),
        confirm: false,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use utter_protocol::serde_json::Value;

    fn step(utterance: &str) -> Option<(&'static str, Value)> {
        plan(utterance).map(|m| (m.op, m.args))
    }

    fn typed(utterance: &str) -> Option<String> {
        match step(utterance) {
            Some(("type_text", args)) => args["text"].as_str().map(str::to_owned),
            _ => None,
        }
    }

    #[test]
    fn an_address_or_a_number_said_in_words_is_typed_written() {
        for (said, text) in [
            ("type john at example dot com", "john@example.com"),
            (
                "type jane dot doe at mail dot example dot org",
                "jane.doe@mail.example.org",
            ),
            ("type the number forty two", "42"),
            ("type a euro sign", "\u{20ac}"),
            ("type an em dash", "\u{2014}"),
            ("insert the copyright symbol", "\u{a9}"),
            ("type euro", "euro"),
            (
                "type anna at lingua-partners dot de",
                "anna@lingua-partners.de",
            ),
            ("enter the number forty two", "42"),
            ("enter the number one two three", "123"),
            ("type git status but don't run it", "git status"),
            ("type hello, without sending it", "hello"),
            ("input the number 7", "7"),
            ("type localhost colon three thousand", "localhost:3000"),
            ("type the number 7", "7"),
            // Not an address or a number: as said.
            ("type meet me at home", "meet me at home"),
            (
                "type see you at the station dot",
                "see you at the station dot",
            ),
            ("type the number of the beast", "the number of the beast"),
            ("type at dot com", "at dot com"),
            (
                "type the password field is empty",
                "the password field is empty",
            ),
        ] {
            assert_eq!(typed(said).as_deref(), Some(text), "{said}");
        }
    }

    #[test]
    fn a_secret_described_is_not_typed() {
        for said in [
            "type my wallet password into signal",
            "type my password",
            "type the pin code",
            "enter your credit card number",
        ] {
            assert_eq!(typed(said), None, "{said}");
        }
        assert_eq!(typed("type password123").as_deref(), Some("password123"));
    }

    #[test]
    fn entering_the_number_of_something_is_no_typing() {
        assert_eq!(typed("enter the number of guests"), None);
    }

    fn chord(utterance: &str) -> Option<Value> {
        match step(utterance) {
            Some(("key", args)) => Some(args),
            _ => None,
        }
    }

    fn clicked(utterance: &str) -> Option<String> {
        match step(utterance) {
            Some(("click_element", args)) => args["description"].as_str().map(str::to_owned),
            _ => None,
        }
    }

    #[test]
    fn a_shortcut_said_alone_is_pressed() {
        for (utterance, name) in [
            ("ctrl z", "ctrl+z"),
            ("control shift t", "ctrl+shift+t"),
            ("shift f5", "shift+F5"),
            ("super 1", "super+1"),
            ("please control s", "ctrl+s"),
        ] {
            assert_eq!(
                chord(utterance),
                Some(json!({"chord": name})),
                "{utterance}"
            );
        }
        // A modifier word that opens something else, or a modifier with no key, is no chord.
        for utterance in [
            "shift the window left",
            "super mario",
            "control",
            "alt",
            "ctrl z now",
            "alt tab",
            "alt right",
            "shift one",
            "super one",
            "shift tab",
            "control alt delete",
        ] {
            assert_eq!(chord(utterance), None, "{utterance}");
        }
        // A chord that ends a window, an application or the session asks first.
        for utterance in [
            "alt f4",
            "control alt f2",
            "ctrl q",
            "super shift e",
            "ctrl w",
        ] {
            assert_eq!(
                plan(utterance).map(|m| m.confirm),
                Some(true),
                "{utterance}"
            );
        }
        assert_eq!(plan("ctrl z").map(|m| m.confirm), Some(false));
        // The same chords after "press" ask too.
        assert_eq!(plan("press alt f4").map(|m| m.confirm), Some(true));
        assert_eq!(
            plan("press control alt delete").map(|m| m.confirm),
            Some(true)
        );
        assert_eq!(plan("press enter").map(|m| m.confirm), Some(false));
    }

    #[test]
    fn typing_keeps_the_words_as_said() {
        let cases = [
            ("type hello world", "hello world"),
            ("type in hello world", "hello world"),
            ("write hello world", "hello world"),
            ("enter the text hello world", "hello world"),
            ("Type Hello World.", "Hello World"),
            (
                "Type: Dear Anna, see you at 5 p.m. OK?",
                "Dear Anna, see you at 5 p.m. OK?",
            ),
            ("Please type hello, world.", "hello, world"),
            ("Hey Utter, type it's 3:15 now.", "it's 3:15 now"),
            ("type thank you", "thank you"),
            ("type hello please", "hello please"),
            ("type wait...", "wait..."),
            ("type example.com", "example.com"),
            ("type \"quoted\" words", "\"quoted\" words"),
            ("type ?", "?"),
            ("type:hello there", "hello there"),
            ("type the", "the"),
            ("type pause", "pause"),
            ("type open youtube", "open youtube"),
            ("type   two   spaces", "two   spaces"),
        ];
        for (utterance, text) in cases {
            assert_eq!(typed(utterance).as_deref(), Some(text), "{utterance}");
        }
        assert_eq!(
            plan("type hello world").map(|m| (m.rule, m.message, m.confirm)),
            Some(("type_text", "type \"hello world\"".to_owned(), false))
        );
    }

    #[test]
    fn where_typed_text_goes_is_not_typed() {
        for (utterance, text) in [
            ("type admin in this field", "admin"),
            ("type hello world into the search box", "hello world"),
            ("type I'm here", "I'm here"),
        ] {
            assert_eq!(
                step(utterance),
                Some(("type_text", json!({"text": text}))),
                "{utterance}"
            );
        }
    }

    #[test]
    fn a_number_of_ten_or_more_said_alone_is_typed_in_digits() {
        for (utterance, text) in [
            ("type forty two", "42"),
            ("type twelve", "12"),
            ("type one hundred and twenty", "120"),
            ("Type two thousand twenty six.", "2026"),
            // Below ten, and numbers inside other words, stay as said.
            ("type one", "one"),
            ("type seven", "seven"),
            ("type forty two apples", "forty two apples"),
            ("type twenty-one pilots", "twenty-one pilots"),
        ] {
            assert_eq!(typed(utterance).as_deref(), Some(text), "{utterance}");
        }
    }

    #[test]
    fn typing_needs_text_and_the_verb_first() {
        for utterance in [
            "type",
            "Type.",
            "type in",
            "write",
            "enter the text",
            "please type",
        ] {
            assert_eq!(plan(utterance), None, "{utterance}");
            let why = explain(utterance).unwrap_or_default();
            assert!(why.contains("needs the text to type"), "{utterance}: {why}");
        }
        for utterance in [
            "switch keyboard type",
            "what type is this",
            "change the keyboard type",
            "enter fullscreen",
            "enter",
        ] {
            assert_eq!(typed(utterance), None, "{utterance}");
        }
    }

    #[test]
    fn keys_are_x_keysyms() {
        let cases = [
            ("press enter", "Return"),
            ("hit return", "Return"),
            ("press escape", "Escape"),
            ("press esc", "Escape"),
            ("press control a", "ctrl+a"),
            ("press ctrl shift t", "ctrl+shift+t"),
            ("press shift control t", "ctrl+shift+t"),
            ("Press Ctrl+Shift+T.", "ctrl+shift+t"),
            ("press control plus c", "ctrl+c"),
            ("press control and c", "ctrl+c"),
            ("press control plus", "ctrl+plus"),
            ("press control minus", "ctrl+minus"),
            ("press alt f4", "alt+F4"),
            ("press Alt+F4", "alt+F4"),
            ("press super left", "super+Left"),
            ("press the windows key", "super"),
            ("press meta", "super"),
            ("press f5", "F5"),
            ("press F12", "F12"),
            ("press f five", "F5"),
            ("press f twenty four", "F24"),
            ("press the tab key", "Tab"),
            ("press the tab", "Tab"),
            ("press backspace", "BackSpace"),
            ("press back space", "BackSpace"),
            ("press delete", "Delete"),
            ("press page down", "Page_Down"),
            ("press page up", "Page_Up"),
            ("press space", "space"),
            ("press the space bar", "space"),
            ("press home", "Home"),
            ("press end", "End"),
            ("press the up arrow", "Up"),
            ("press arrow down", "Down"),
            ("press control alpha", "ctrl+a"),
            ("press ctrl x ray", "ctrl+x"),
            ("press 1", "1"),
            ("press alt one", "alt+1"),
            ("press the enter button", "Return"),
            ("tap enter", "Return"),
            ("please press enter", "Return"),
            ("press enter please", "Return"),
        ];
        for (utterance, want) in cases {
            assert_eq!(
                chord(utterance),
                Some(json!({"chord": want})),
                "{utterance}"
            );
        }
    }

    #[test]
    fn keys_repeat_up_to_a_cap() {
        let cases = [
            (
                "press enter three times",
                json!({"chord": "Return", "repeat": 3}),
            ),
            (
                "press enter 3 times",
                json!({"chord": "Return", "repeat": 3}),
            ),
            (
                "hit backspace twice",
                json!({"chord": "BackSpace", "repeat": 2}),
            ),
            ("press tab once", json!({"chord": "Tab"})),
            (
                "press down fifty times",
                json!({"chord": "Down", "repeat": 20}),
            ),
            (
                "press the tab key 4 times",
                json!({"chord": "Tab", "repeat": 4}),
            ),
        ];
        for (utterance, want) in cases {
            assert_eq!(chord(utterance), Some(want), "{utterance}");
        }
        assert_eq!(
            plan("press down fifty times").map(|m| m.message),
            Some("press Down 20 times (at most 20)".to_owned())
        );
        assert_eq!(plan("press enter zero times"), None);
        assert_eq!(
            explain("press enter 0 times").as_deref(),
            Some("a key is pressed 1 to 20 times, not 0")
        );
    }

    #[test]
    fn unknown_keys_plan_nothing_and_are_named() {
        for (utterance, word) in [
            ("press blorp", "blorp"),
            ("press control blorp", "blorp"),
            ("press command c", "command"),
            ("hit the road", "road"),
            ("press play", "play"),
            ("press send", "send"),
        ] {
            assert_eq!(plan(utterance), None, "{utterance}");
            let why = explain(utterance).unwrap_or_default();
            assert!(
                why.starts_with(&format!("no key is called \"{word}\"")),
                "{utterance}: {why}"
            );
        }
        assert_eq!(plan("press"), None);
        assert!(explain("press").unwrap_or_default().contains("needs a key"));
        assert_eq!(plan("press the key"), None);
        assert_eq!(plan("press a b"), None);
        assert!(
            explain("press a b")
                .unwrap_or_default()
                .contains("two keys")
        );
        assert_eq!(plan("press f25"), None);
    }

    #[test]
    fn scrolling_in_steps() {
        let cases = [
            ("scroll down", "down", 5),
            ("scroll up", "up", 5),
            ("scroll left", "left", 5),
            ("Scroll right.", "right", 5),
            ("scroll up a lot", "up", 15),
            ("scroll down a little", "down", 2),
            ("scroll down a bit", "down", 2),
            ("scroll down three times", "down", 3),
            ("scroll down 3 times", "down", 3),
            ("scroll up twice", "up", 2),
            ("scroll down once", "down", 1),
            ("scroll down twenty times", "down", 20),
            ("scroll the page down", "down", 5),
            ("scroll the timeline to the right", "right", 5),
            ("scroll my feed down a lot", "down", 15),
            ("scroll way down", "down", 15),
            ("scroll all the way up", "up", MAX_SCROLL),
            ("scroll down the page a lot", "down", 15),
            ("please scroll down", "down", 5),
            ("scroll to the right", "right", 5),
            ("scroll back up please", "up", 5),
            ("scroll down more", "down", 5),
            ("wheel down", "down", 5),
            ("scroll over to the left a little", "left", 2),
            ("scroll up three", "up", 3),
            ("can you scroll down 5", "down", 5),
            ("scroll up to the older messages", "up", 5),
            ("scroll down to the bottom", "down", MAX_SCROLL),
        ];
        for (utterance, direction, amount) in cases {
            assert_eq!(
                step(utterance),
                Some(("scroll", json!({"direction": direction, "amount": amount}))),
                "{utterance}"
            );
        }
        for utterance in [
            "scroll",
            "scroll sideways",
            "scroll down the drain",
            "scroll down 0 times",
        ] {
            assert_eq!(plan(utterance), None, "{utterance}");
            assert!(
                explain(utterance)
                    .unwrap_or_default()
                    .contains("needs a direction"),
                "{utterance}"
            );
        }
        // "page down" is a key, not a scroll; bare it is nothing.
        assert_eq!(
            chord("press page down"),
            Some(json!({"chord": "Page_Down"}))
        );
        assert_eq!(plan("page down"), None);
    }

    #[test]
    fn spoken_punctuation_is_written() {
        let cases = [
            (
                "type thanks comma see you soon period",
                "thanks, see you soon.",
            ),
            ("write sounds good exclamation mark", "sounds good!"),
            ("type lunch at noon question mark", "lunch at noon?"),
            (
                "type Hello, comma how are you question mark.",
                "Hello, how are you?",
            ),
            ("dictate note colon buy milk", "note: buy milk"),
            // "period" and "full stop" inside the text stay words.
            ("type the period is over", "the period is over"),
            // A mark said alone is the mark; "the word" keeps it a word.
            ("type comma", ","),
            ("type question mark", "?"),
            ("type the word comma", "comma"),
        ];
        for (utterance, text) in cases {
            assert_eq!(typed(utterance).as_deref(), Some(text), "{utterance}");
        }
    }

    #[test]
    fn typed_text_never_holds_a_control_character() {
        for utterance in ["type hello\npress enter", "type \u{1b}[2J", "type a\tb"] {
            assert_eq!(plan(utterance), None, "{utterance:?}");
            assert!(
                explain(utterance)
                    .unwrap_or_default()
                    .contains("control character"),
                "{utterance:?}"
            );
        }
    }

    #[test]
    fn clicks_name_the_element_as_said() {
        let cases = [
            ("click the send button", "send button"),
            ("click send", "send"),
            ("Click Send.", "Send"),
            ("press the blue button", "blue button"),
            ("hit the settings tab", "settings tab"),
            ("press the back button", "back button"),
            ("press a button", "button"),
            ("Press a blue button.", "blue button"),
            ("click an OK button", "OK button"),
            ("click A", "A"),
            ("tap OK", "OK"),
            ("tap on Save as", "Save as"),
            ("click on the settings link", "settings link"),
            ("click on \"Save as…\"", "Save as…"),
            ("press on the send button", "send button"),
            ("click send please", "send"),
            ("click on Downloads in the sidebar", "Downloads"),
            ("click the save icon at the top", "save icon"),
            ("tick the box that says I agree", "I agree"),
            ("please click the Next button, thanks", "Next button"),
        ];
        for (utterance, description) in cases {
            assert_eq!(
                clicked(utterance).as_deref(),
                Some(description),
                "{utterance}"
            );
        }
        for utterance in ["click", "click on", "click it", "click here", "tap on this"] {
            assert_eq!(plan(utterance), None, "{utterance}");
            assert!(
                explain(utterance)
                    .unwrap_or_default()
                    .contains("needs the name"),
                "{utterance}"
            );
        }
        // Double and right clicks are not single clicks.
        assert_eq!(plan("double click the icon"), None);
        assert_eq!(plan("right click the file"), None);
    }

    #[test]
    fn other_utterances_are_not_in_app() {
        for utterance in [
            "pause",
            "open youtube",
            "close this window",
            "take a screenshot",
            "switch to firefox",
            "workspace two",
            "open example.com",
            "blorp the frobnicator",
            "please",
        ] {
            assert_eq!(decide(utterance), None, "{utterance}");
        }
    }

    #[test]
    fn raw_positions_follow_the_words() {
        let spoken = Spoken::new("Hey Utter, type:Hello there!");
        assert_eq!((spoken.first, spoken.last), (2, 5));
        assert_eq!(&spoken.raw[spoken.raw_start(3)..], "Hello there!");
        assert_eq!(&spoken.raw[..spoken.raw_end(4)], "Hey Utter, type:Hello");
        // A word whose runs do not match its words is taken whole.
        let spoken = Spoken::new("click a&b");
        assert_eq!(
            spoken.raw[spoken.raw_start(1)..spoken.raw_end(4)].trim(),
            "a&b"
        );
        assert_eq!(spoken.raw_start(2), "click ".len());
    }
}
