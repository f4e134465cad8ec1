//! Text normalisation shared by every rule.
//!
//! Speech-to-text output and typed commands differ in case, punctuation and politeness, none
//! of which changes what is meant. [`normalize`] folds those differences away so the rules
//! can compare plain lowercase words. Words that look like host names (`example.com`) keep
//! their dots and dashes, because there the punctuation is the content.

use std::ops::Range;

/// Lowercase `input`, drop punctuation and quotes, and collapse whitespace to single spaces.
///
/// A word that is a host name once its surrounding punctuation is removed is kept as it is
/// (`"Example.COM!"` becomes `example.com`). In any other word, apostrophes are dropped
/// (`what's` → `whats`) and every other character that is not a letter or digit separates
/// words (`play/pause` → `play pause`).
///
/// A sign is not punctuation when a number follows it: `-1` becomes `minus 1` and `+2`
/// becomes `plus 2` (also with the sign as a word of its own, `- 1`, and with the Unicode
/// minus `−` or an en dash `–`), so that "workspace -1" can never read as workspace 1.
pub fn normalize(input: &str) -> String {
    let words: Vec<String> = normalize_words(input).into_iter().map(|w| w.text).collect();
    words.join(" ")
}

/// One word of [`normalize`]'s output with the whitespace-separated word of the input it
/// came from, so that a rule can hand on part of the utterance as it was said (the text of
/// "type ...", see [`crate::inapp`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpokenWord {
    /// The normalised word.
    pub text: String,
    /// The byte range of the input word it came from. One input word may give several
    /// words ("play/pause", "-1") and then they share the range.
    pub raw: Range<usize>,
}

/// `input` with every terminal escape sequence replaced by a space: CSI (`ESC [ … final`),
/// OSC (`ESC ] … BEL` or `ESC \\`) and two-character escapes (`ESC c`). Other text is kept
/// as it was; an escape cut off at the end is dropped.
pub fn without_escape_sequences(input: &str) -> String {
    if !input.contains('\u{1b}') {
        return input.to_owned();
    }
    let mut out = String::with_capacity(input.len());
    let mut chars = input.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        out.push(' ');
        match chars.next() {
            // CSI: parameter and intermediate bytes, then one final byte.
            Some('[') => {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            // OSC: up to BEL or the string terminator ESC \.
            Some(']') => {
                while let Some(c) = chars.next() {
                    if c == '\u{7}' {
                        break;
                    }
                    if c == '\u{1b}' {
                        chars.next_if_eq(&'\\');
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// [`normalize`] word by word: its output is these words' texts joined by single spaces.
pub fn normalize_words(input: &str) -> Vec<SpokenWord> {
    let mut words: Vec<SpokenWord> = Vec::new();
    let raws: Vec<(usize, &str)> = input
        .split_whitespace()
        .map(|raw| (raw.as_ptr() as usize - input.as_ptr() as usize, raw))
        .collect();
    for (i, &(start, raw)) in raws.iter().enumerate() {
        let range = start..start + raw.len();
        let mut push = |text: &str| {
            words.push(SpokenWord {
                text: text.to_owned(),
                raw: range.clone(),
            })
        };
        let lower = raw.to_lowercase();
        let trimmed = lower.trim_matches(|c: char| !c.is_alphanumeric());
        let next_is_number = || {
            raws.get(i + 1)
                .and_then(|(_, w)| w.chars().find(|c| c.is_alphanumeric()))
                .is_some_and(|c| c.is_ascii_digit())
        };
        if let Some(sign) = leading_sign(&lower) {
            push(sign);
        } else if trimmed.is_empty() && next_is_number() {
            if let Some(sign) = sign_word(&lower) {
                push(sign);
            }
        }
        if is_hostname(trimmed) {
            push(trimmed);
            continue;
        }
        let mut word = String::new();
        for c in trimmed.chars() {
            if c.is_alphanumeric() {
                word.push(c);
            } else if is_apostrophe(c) {
                // Joined, not split: "what's" is one word.
            } else if c == '&' {
                word.push_str(" and ");
            } else {
                word.push(' ');
            }
        }
        for w in word.split_whitespace() {
            match slang(w) {
                Some(expanded) => expanded.split(' ').for_each(&mut push),
                None => push(w),
            }
        }
    }
    words
}

/// Spoken contractions written as one word, as they are said ("gimme a new tab", "lemme see
/// discord"): the words they stand for.
fn slang(word: &str) -> Option<&'static str> {
    Some(match word {
        "gimme" => "give me",
        "lemme" => "let me",
        "wanna" => "want to",
        "gonna" => "going to",
        "gotta" => "got to",
        "pls" | "plz" => "please",
        "thx" => "thanks",
        _ => return None,
    })
}

/// "minus" or "plus" for a sign character.
fn sign_name(c: char) -> Option<&'static str> {
    match c {
        '-' | '\u{2212}' | '\u{2013}' => Some("minus"),
        '+' => Some("plus"),
        _ => None,
    }
}

/// The sign of a word whose first letter or digit is a digit right after a sign (`-1`,
/// `(−2)`, `+3`); `None` for `x-1`, `-x` and plain numbers.
fn leading_sign(word: &str) -> Option<&'static str> {
    let start = word.find(|c: char| c.is_alphanumeric())?;
    let (before, from) = word.split_at(start);
    if !from.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    before.chars().next_back().and_then(sign_name)
}

/// The sign a word made of one sign character stands for (`-`, `−`, `+`).
fn sign_word(word: &str) -> Option<&'static str> {
    let mut chars = word.chars();
    let sign = chars.next().and_then(sign_name)?;
    chars.next().is_none().then_some(sign)
}

fn is_apostrophe(c: char) -> bool {
    matches!(c, '\'' | '\u{2018}' | '\u{2019}' | '`')
}

/// Politeness and wake words dropped from the start of an utterance, longest first.
const LEADING_FILLERS: &[&str] = &[
    "hey utter",
    "hi utter",
    "ok utter",
    "okay utter",
    "hey there",
    "hey google",
    "ok google",
    "okay google",
    "hey siri",
    "alexa",
    "hey",
    "please",
    "can you",
    "could you",
    "would you",
    "will you",
    "i want to",
    "i would like to",
    "id like to",
    "i need to",
    "i want you to",
    "i wanna",
    "id love to",
    "would you mind",
    "do me a favor and",
    "go ahead and",
    "lets",
    "let us",
    "let me",
    "let",
    "yo",
    "yoo",
    "nah",
    "nope",
    "never mind",
    "nevermind",
    "no wait",
    "wait",
    "bro",
    "dude",
    "okay so",
    "ok so",
    "okay",
    "ok",
    "alright",
    "oops",
    "whoops",
    "uhm",
    "ugh",
    "uh",
    "um",
    "erm",
    "er",
    "hmm",
    "so",
    "just",
    "quickly",
    // What joins one command to the one before it ("and now one workspace up again"). Not
    // "then" or "and then": a recogniser's segment that starts so is most often the middle
    // of a story ("then end the meeting", "and then close firefox"), not a command.
    "and now",
];

/// Politeness and haste dropped from the end of an utterance ("quit discord for now", "open
/// obs real quick"). Not "for a moment" and the like: "pause for a moment" is a person
/// pausing their speech, not the music.
const TRAILING_FILLERS: &[&str] = &[
    "please",
    "thank you",
    "thanks",
    "for me",
    "for now",
    "real quick",
    "right now",
    "right away",
    // Said again ("make it smaller again", "play the music again"): the command is the same.
    "again",
    // Whom it is said to ("print this page for me, dear").
    "dear",
    "my dear",
    "love",
    "honey",
    "sweetie",
    "mate",
    "buddy",
    "pal",
];

/// Verbs whose object is words to write: a trailing "thanks" after them is the message.
const MESSAGE_VERBS: &[&str] = &[
    "send",
    "say",
    "type",
    "write",
    "reply",
    "reply with",
    "insert",
];

/// Remove politeness fillers ("please", "can you", "hey utter", ...) from both ends of a
/// [`normalize`]d utterance, repeatedly, so "hey utter could you please pause" is "pause".
pub fn strip_fillers(text: &str) -> &str {
    let (start, end) = filler_span(text);
    &text[start..end]
}

/// The byte range of `text` that [`strip_fillers`] keeps.
pub fn filler_span(text: &str) -> (usize, usize) {
    let mut start = text.len() - text.trim_start().len();
    let mut end = text.trim_end().len().max(start);
    loop {
        let before = (start, end);
        for filler in LEADING_FILLERS {
            if let Some(after) = strip_word_prefix(&text[start..end], filler) {
                start = end - after.len();
            }
        }
        for filler in TRAILING_FILLERS {
            if let Some(rest) = strip_word_suffix(&text[start..end], filler) {
                // "send thanks", "type thank you": the words are the message, not manners.
                if MESSAGE_VERBS.contains(&rest.trim()) {
                    continue;
                }
                end = start + rest.len();
            }
        }
        if (start, end) == before {
            return (start, end);
        }
    }
}

/// `text` without the whole-word prefix `prefix` (and the space after it), or `None`.
/// The prefix may also be the whole text, which leaves an empty string.
pub fn strip_word_prefix<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = text.strip_prefix(prefix)?;
    if rest.is_empty() {
        Some(rest)
    } else {
        rest.strip_prefix(' ')
    }
}

/// `text` without the whole-word suffix `suffix` (and the space before it), or `None`.
/// The suffix may also be the whole text, which leaves an empty string.
pub fn strip_word_suffix<'a>(text: &'a str, suffix: &str) -> Option<&'a str> {
    let rest = text.strip_suffix(suffix)?;
    if rest.is_empty() {
        Some(rest)
    } else {
        rest.strip_suffix(' ')
    }
}

/// `text` (as said, any case) after the first of `leads` it begins with, up to ASCII case,
/// with the space after it: `after_lead("The word refund", &["the word "])` is `refund`.
/// Each lead ends in a space, so only whole words are taken. `None` when none begins it.
pub fn after_lead<'a>(text: &'a str, leads: &[&str]) -> Option<&'a str> {
    leads.iter().find_map(|lead| {
        text.get(..lead.len())
            .filter(|l| l.eq_ignore_ascii_case(lead))
            .map(|_| text[lead.len()..].trim_start())
    })
}

/// [`compact`] of the [`normalize`]d `name`: how a spoken name and a written one are
/// compared whole ("Visual Studio Code" and "visual studio code." are one key).
pub fn name_key(name: &str) -> String {
    compact(&normalize(name))
}

/// The comparison key that ignores how a name is split into words: spaces, dots and dashes
/// removed ("you tube", "YouTube" and "you-tube" all become `youtube`).
pub fn compact(text: &str) -> String {
    text.chars()
        .filter(|c| !matches!(c, ' ' | '.' | '-'))
        .collect()
}

/// Join a spoken host name: `news dot ycombinator dot com` → `news.ycombinator.com`.
/// Returns `None` when `text` has no `dot` between two words.
pub fn join_spoken_dots(text: &str) -> Option<String> {
    let words: Vec<&str> = text.split(' ').collect();
    let has_inner_dot = words.len() >= 3
        && words[1..words.len() - 1].contains(&"dot")
        && words.first() != Some(&"dot")
        && words.last() != Some(&"dot");
    if !has_inner_dot {
        return None;
    }
    let mut out = String::new();
    let mut previous_was_dot = true;
    for word in words {
        if word == "dot" {
            if previous_was_dot {
                return None;
            }
            out.push('.');
            previous_was_dot = true;
        } else {
            if !previous_was_dot {
                // Two words with no "dot" between them cannot be one host name.
                return None;
            }
            out.push_str(word);
            previous_was_dot = false;
        }
    }
    Some(out)
}

/// True for a plain host name: ASCII letters, digits, dots and dashes; at least two labels;
/// labels of 1 to 63 characters that neither start nor end with a dash; a top-level domain
/// of at least two letters; at most 253 characters.
pub fn is_hostname(text: &str) -> bool {
    if text.is_empty() || text.len() > 253 {
        return false;
    }
    let labels: Vec<&str> = text.split('.').collect();
    if labels.len() < 2 {
        return false;
    }
    let label_ok = |label: &str| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    let tld_ok = labels
        .last()
        .is_some_and(|tld| tld.len() >= 2 && tld.chars().all(|c| c.is_ascii_lowercase()));
    tld_ok && labels.iter().all(|label| label_ok(label))
}

/// The 1-based line of byte `offset` in `text` (an offset past the end is on the last line).
pub fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The 1-based column (in characters) of byte `offset` in `text`.
pub fn column_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    let line_start = text.as_bytes()[..end]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    String::from_utf8_lossy(&text.as_bytes()[line_start..end])
        .chars()
        .count()
        + 1
}

/// Words a shortcut's name does without: articles, pronouns, "a bit", and verbs that only
/// say "go there" or "show it" (`go`, `open`, `show`, ...). See [`loose_key`].
const LOOSE_DROPPED: &[&str] = &[
    "the", "a", "an", "this", "that", "these", "those", "my", "our", "your", "current", "it",
    "its", "i", "just", "here", "there", "now", "some", "bit", "little", "slightly", "more", "of",
    "on", "to", "into", "please", "also", "again", "go", "switch", "jump", "take", "show",
    "display", "open", "get", "make", "browser", "browsing", "running",
];

/// Words said for a shortcut name's own word (`refresh` for `reload`).
const LOOSE_SAME: &[(&str, &str)] = &[
    ("refresh", "reload"),
    ("restore", "reopen"),
    ("favourites", "bookmark"),
    ("favorites", "bookmark"),
    ("favourite", "bookmark"),
    ("favorite", "bookmark"),
    ("process", "command"),
    ("cancel", "stop"),
    ("abort", "stop"),
    ("halt", "stop"),
    ("italicize", "italic"),
    ("italicise", "italic"),
    ("embolden", "bold"),
];

/// A phrase's content words in order: the words of a normalised phrase without
/// [`LOOSE_DROPPED`], [`LOOSE_SAME`] replaced, "bring back" read as "reopen". Empty when
/// nothing is left. See [`loose_key`].
pub fn loose_words(phrase: &str) -> Vec<&str> {
    let words: Vec<&str> = phrase.split_whitespace().collect();
    let mut kept: Vec<&str> = Vec::with_capacity(words.len());
    let mut i = 0;
    while i < words.len() {
        let word = words[i];
        if word == "bring" && words.get(i + 1) == Some(&"back") {
            kept.push("reopen");
            i += 2;
            continue;
        }
        // "open again the tab I closed" (a learner's word order): reopen.
        if word == "open" && words.get(i + 1) == Some(&"again") {
            kept.push("reopen");
            i += 2;
            continue;
        }
        // "pull up my downloads", "bring up the history": verbs that only say "show it".
        if matches!(word, "pull" | "bring") && words.get(i + 1) == Some(&"up") {
            i += 2;
            continue;
        }
        // "show me my downloads": the person asking, not what is shown ("save me" keeps it).
        if matches!(word, "show" | "get" | "give") && words.get(i + 1) == Some(&"me") {
            i += 2;
            continue;
        }
        i += 1;
        if LOOSE_DROPPED.contains(&word) {
            continue;
        }
        kept.push(
            LOOSE_SAME
                .iter()
                .find(|(said, _)| *said == word)
                .map_or(word, |(_, same)| same),
        );
    }
    kept
}

/// [`loose_words`] as one key: the first content word (the verb, as said), then the others
/// sorted, so order matters only for the first. "reopen the tab I just closed" and "reopen
/// closed tab" have one key (`reopen closed tab`); so have "zoom out a bit" and "zoom out";
/// "in zoom" and "zoom in" do not. A word said twice counts twice.
pub fn loose_key(phrase: &str) -> String {
    let mut words = loose_words(phrase);
    if words.len() > 2 {
        words[1..].sort_unstable();
    }
    words.join(" ")
}

/// An address said in words ("reddit dot com slash r slash linux" → `reddit.com/r/linux`,
/// "docs dot rs"): only letters and digits and the words dot, slash, dash, colon, with at
/// least one dot, each before letters or digits. `None` for anything else.
pub fn spoken_address(words: &[&str]) -> Option<String> {
    let mut out = String::new();
    let mut dotted = false;
    for (i, word) in words.iter().enumerate() {
        match *word {
            "dot" => {
                let next = words.get(i + 1)?;
                if next.is_empty() || !next.chars().all(|c| c.is_ascii_alphanumeric()) {
                    return None;
                }
                dotted = true;
                out.push('.');
            }
            "slash" => out.push('/'),
            "dash" | "hyphen" => out.push('-'),
            "colon" => out.push(':'),
            w if w.chars().all(|c| c.is_ascii_alphanumeric()) => out.push_str(w),
            _ => return None,
        }
    }
    (dotted && !out.starts_with(['.', '/'])).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_are_no_words() {
        assert_eq!(
            without_escape_sequences("open\u{1b}[31m youtube"),
            "open  youtube"
        );
        assert_eq!(without_escape_sequences("a\u{1b}]0;title\u{7}b"), "a b");
        assert_eq!(without_escape_sequences("a\u{1b}]0;t\u{1b}\\b"), "a b");
        assert_eq!(without_escape_sequences("a\u{1b}cb"), "a b");
        assert_eq!(without_escape_sequences("cut\u{1b}[12"), "cut ");
        assert_eq!(without_escape_sequences("plain words"), "plain words");
    }

    #[test]
    fn a_lead_is_taken_whole_and_in_any_case() {
        assert_eq!(
            after_lead("The word  refund", &["the word "]),
            Some("refund")
        );
        assert_eq!(after_lead("the wordy", &["the word "]), None);
        assert_eq!(
            after_lead("me some tea", &["me a ", "me some "]),
            Some("tea")
        );
        assert_eq!(after_lead("é", &["ab "]), None);
        assert_eq!(name_key("Visual Studio-Code."), "visualstudiocode");
    }

    #[test]
    fn normalize_folds_case_punctuation_and_space() {
        assert_eq!(normalize("Open YouTube!"), "open youtube");
        assert_eq!(normalize("  pause,   please. "), "pause please");
        assert_eq!(normalize("\"Next\" track?!"), "next track");
        assert_eq!(normalize("what's up; ok: fine"), "whats up ok fine");
        assert_eq!(normalize("play/pause"), "play pause");
        assert_eq!(
            normalize("it\u{2019}s \u{201c}quoted\u{201d}"),
            "its quoted"
        );
        assert_eq!(normalize("Café Crème"), "café crème");
        assert_eq!(normalize("!?.,"), "");
    }

    #[test]
    fn signs_before_numbers_are_words() {
        assert_eq!(normalize("workspace -1"), "workspace minus 1");
        assert_eq!(normalize("Workspace −2."), "workspace minus 2");
        assert_eq!(normalize("workspace (–3)"), "workspace minus 3");
        assert_eq!(normalize("workspace +4"), "workspace plus 4");
        assert_eq!(normalize("workspace - 5"), "workspace minus 5");
        // Dashes that are no sign stay separators.
        assert_eq!(normalize("twenty-one"), "twenty one");
        assert_eq!(normalize("x-1 -x"), "x 1 x");
        assert_eq!(normalize("open youtube - now"), "open youtube now");
        assert_eq!(normalize("-10%"), "minus 10");
    }

    #[test]
    fn normalize_keeps_host_names() {
        assert_eq!(normalize("Open Example.COM."), "open example.com");
        assert_eq!(
            normalize("go to news.ycombinator.com, please"),
            "go to news.ycombinator.com please"
        );
        assert_eq!(normalize("(docs.rs)"), "docs.rs");
        assert_eq!(normalize("my-site.co.uk"), "my-site.co.uk");
        // Not host names: the dots and dashes go.
        assert_eq!(normalize("e.g."), "e g");
        assert_eq!(normalize("v1.2"), "v1 2");
        assert_eq!(normalize("play-pause"), "play pause");
    }

    #[test]
    fn fillers_are_dropped_at_both_ends() {
        assert_eq!(strip_fillers("hey utter could you please pause"), "pause");
        assert_eq!(strip_fillers("open youtube please"), "open youtube");
        assert_eq!(
            strip_fillers("can you open youtube for me thanks"),
            "open youtube"
        );
        assert_eq!(strip_fillers("please"), "");
        // Only whole words.
        assert_eq!(strip_fillers("pleased"), "pleased");
        assert_eq!(strip_fillers("play canyon"), "play canyon");
    }

    #[test]
    fn normalized_words_know_their_raw_words() {
        let input = "Hey, play/pause -1 Example.COM!";
        let words = normalize_words(input);
        let texts: Vec<&str> = words.iter().map(|w| w.text.as_str()).collect();
        assert_eq!(texts, ["hey", "play", "pause", "minus", "1", "example.com"]);
        let raws: Vec<&str> = words.iter().map(|w| &input[w.raw.clone()]).collect();
        assert_eq!(
            raws,
            [
                "Hey,",
                "play/pause",
                "play/pause",
                "-1",
                "-1",
                "Example.COM!"
            ]
        );
        assert_eq!(normalize(input), texts.join(" "));
    }

    #[test]
    fn filler_span_is_what_strip_fillers_keeps() {
        for text in [
            "hey utter could you please pause",
            "open youtube please",
            "please",
            "type thank you",
            "",
        ] {
            let (start, end) = filler_span(text);
            assert_eq!(&text[start..end], strip_fillers(text), "{text}");
        }
        assert_eq!(filler_span("please pause thanks"), (7, 12));
    }

    #[test]
    fn hostnames() {
        for good in [
            "example.com",
            "news.ycombinator.com",
            "a-b.c.io",
            "x.co",
            "1.2.3.io",
        ] {
            assert!(is_hostname(good), "{good}");
        }
        for bad in [
            "example",
            "example.c",
            "example.c0m",
            "-a.com",
            "a-.com",
            "a..com",
            ".com",
            "com.",
            "exa_mple.com",
            "exämple.com",
            "Example.com",
            "1.2.3.4",
        ] {
            assert!(!is_hostname(bad), "{bad}");
        }
    }

    #[test]
    fn spoken_dots_join_into_host_names() {
        assert_eq!(
            join_spoken_dots("news dot ycombinator dot com").as_deref(),
            Some("news.ycombinator.com")
        );
        assert_eq!(
            join_spoken_dots("example dot com").as_deref(),
            Some("example.com")
        );
        assert_eq!(join_spoken_dots("example com"), None);
        assert_eq!(join_spoken_dots("dot com"), None);
        assert_eq!(join_spoken_dots("my example dot com"), None);
        assert_eq!(join_spoken_dots("a dot dot com"), None);
    }

    #[test]
    fn compact_ignores_word_splits() {
        assert_eq!(compact("you tube"), "youtube");
        assert_eq!(compact("crates.io"), "cratesio");
        assert_eq!(compact("stack-overflow"), "stackoverflow");
    }

    #[test]
    fn loose_keys_ignore_order_articles_and_go_verbs() {
        assert_eq!(
            loose_key("reopen the tab i just closed"),
            loose_key("reopen closed tab")
        );
        assert_eq!(
            loose_key("bring back the closed tab"),
            loose_key("reopen closed tab")
        );
        assert_eq!(
            loose_key("open again the tab i closed"),
            loose_key("reopen closed tab")
        );
        assert_ne!(loose_key("zoom in"), loose_key("zoom"));
        assert_eq!(loose_key("zoom out a bit"), "zoom out");
        assert_ne!(loose_key("in zoom"), loose_key("zoom in"));
        assert_ne!(loose_key("line of the end"), loose_key("end of line"));
        assert_ne!(loose_key("save me"), loose_key("save"));
        assert_eq!(
            loose_key("go to the end of the line"),
            loose_key("end of line")
        );
        assert_eq!(
            loose_key("add this to my favourites"),
            loose_key("add a bookmark")
        );
        assert_ne!(loose_key("next tab"), loose_key("next page"));
        assert_eq!(loose_key("the"), "");
    }
}
