//! Text that came from elsewhere (a plugin's stderr, a window title, a compositor's reply)
//! made safe to print or log: the one escaping every part of Utter uses.

/// Whether `c` changes how the text around it is shown without being visible itself: every
/// format character (Unicode general category Cf: bidirectional embeddings, overrides and
/// isolates, zero-width characters, the soft hyphen, interlinear annotation marks, Arabic
/// and Syriac number signs, tag characters, ...) and the characters that show as nothing
/// though they are letters or marks (Hangul fillers, the Braille blank, the Khmer inherent
/// vowels, the combining grapheme joiner). A window title could otherwise print reversed,
/// hide words, or carry text only a language model reads.
pub fn is_invisible_format(c: char) -> bool {
    matches!(c,
        // Cf, as of Unicode 15.1.
        '\u{00AD}' | '\u{0600}'..='\u{0605}' | '\u{061C}' | '\u{06DD}' | '\u{070F}'
        | '\u{0890}'..='\u{0891}' | '\u{08E2}' | '\u{180E}' | '\u{200B}'..='\u{200F}'
        | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}'
        | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}' | '\u{110BD}' | '\u{110CD}'
        | '\u{13430}'..='\u{1343F}' | '\u{1BCA0}'..='\u{1BCA3}' | '\u{1D173}'..='\u{1D17A}'
        // Tag characters: invisible, yet a language model reads them as ASCII.
        | '\u{E0000}'..='\u{E007F}'
        // Shown as blank.
        | '\u{034F}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}' | '\u{2800}'
        | '\u{3164}' | '\u{FFA0}')
}

/// Variation selectors (U+FE00–U+FE0F, U+E0100–U+E01EF): shown with an emoji or a CJK
/// character they change, so text for people keeps them, but no name has one.
pub fn is_variation_selector(c: char) -> bool {
    matches!(c, '\u{FE00}'..='\u{FE0F}' | '\u{E0100}'..='\u{E01EF}')
}

/// Whether `c` is escaped wherever text from elsewhere is shown: a control character (C0,
/// C1), an invisible formatting character ([`is_invisible_format`]), or a line or paragraph
/// separator (U+2028, U+2029), which some displays break the line at. The one predicate
/// behind [`escape_unprintable`], [`json_display_safe`] and the runner's refusal of such
/// characters in names that become arguments.
pub fn is_unprintable(c: char) -> bool {
    c.is_control() || is_invisible_format(c) || matches!(c, '\u{2028}' | '\u{2029}')
}

/// The first character of `text` that [`is_unprintable`] refuses, if any.
pub fn first_unprintable(text: &str) -> Option<char> {
    text.chars().find(|c| is_unprintable(*c))
}

/// The first character of `text` no name (an app id, a workspace, an output) holds: one
/// [`is_unprintable`] escapes, or a variation selector.
pub fn first_outside_names(text: &str) -> Option<char> {
    text.chars()
        .find(|c| is_unprintable(*c) || is_variation_selector(*c))
}

/// JSON text (as `serde_json` writes it) with every [`is_unprintable`] character written as
/// a `\uXXXX` escape (a surrogate pair above U+FFFF): the same JSON value, but text a door
/// can show or a client print without a right-to-left override or a hidden tag taking
/// effect. `serde_json` escapes only U+0000–U+001F itself; outside strings JSON holds none
/// of these characters, so only string contents change.
pub fn json_display_safe(json: &str) -> String {
    if !json.chars().any(is_unprintable) {
        return json.to_owned();
    }
    let mut out = String::with_capacity(json.len() + 16);
    let mut units = [0u16; 2];
    for c in json.chars() {
        if is_unprintable(c) && !matches!(c, '\n' | '\r' | '\t') {
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` with control characters (C0 and C1) and invisible formatting characters
/// ([`is_invisible_format`]) shown escaped (`\u{1b}`), so nothing printed can move the cursor,
/// fake another line or reorder what is shown; the result has at most `max_chars`
/// characters (escapes count with their full length). Returns the escaped text and how many
/// characters of `text` were left out.
pub fn escape_unprintable(text: &str, max_chars: usize) -> (String, usize) {
    let mut out = String::with_capacity(text.len().min(max_chars.saturating_add(16)));
    let mut shown = 0usize;
    for (taken, c) in text.chars().enumerate() {
        let escape = is_unprintable(c);
        let width = if escape {
            c.escape_default().count()
        } else {
            1
        };
        if shown + width > max_chars {
            return (out, text.chars().count() - taken);
        }
        shown += width;
        if escape {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    (out, 0)
}

/// `text` as an error message or a log line may repeat it: escaped as
/// [`escape_unprintable`] does, and cut to `max_chars` characters with
/// `… (N more characters)` after it when it was longer. Whatever a peer sent (a method
/// name, a key, an utterance) is echoed through this, so a 10 MB name makes a short
/// message. What the marker would save is not worth it: a text at most
/// [`CLIP_SLACK`] characters over `max_chars` is shown whole.
pub fn clip(text: &str, max_chars: usize) -> String {
    let (mut shown, left) = escape_unprintable(text, max_chars);
    if left == 0 {
        return shown;
    }
    if left <= CLIP_SLACK {
        let (whole, still) = escape_unprintable(text, max_chars + CLIP_SLACK);
        if still == 0 {
            return whole;
        }
    }
    shown.push_str(&format!("… ({left} more characters)"));
    shown
}

/// How many characters past its limit [`clip`] still shows rather than cut (about the
/// length of its `… (N more characters)` marker).
pub const CLIP_SLACK: usize = 24;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_cuts_long_text_and_says_how_much() {
        assert_eq!(clip("runner.status", 200), "runner.status");
        // A few characters over the limit are shown rather than replaced by a longer marker.
        let over = "n".repeat(204);
        assert_eq!(clip(&over, 200), over);
        assert!(clip(&"n".repeat(260), 200).ends_with("… (60 more characters)"));
        let long = "m".repeat(10_000_000);
        let clipped = clip(&long, 200);
        assert!(clipped.starts_with(&"m".repeat(200)));
        assert!(
            clipped.ends_with("… (9999800 more characters)"),
            "{clipped}"
        );
        assert!(clipped.len() < 240);
    }

    #[test]
    fn controls_and_invisible_formatting_are_escaped_and_long_text_is_cut() {
        assert_eq!(
            escape_unprintable("a\u{1b}[2Jb", 100),
            ("a\\u{1b}[2Jb".into(), 0)
        );
        assert_eq!(
            escape_unprintable("x\u{9b}y\u{202e}z\u{200b}", 100).0,
            "x\\u{9b}y\\u{202e}z\\u{200b}"
        );
        assert_eq!(escape_unprintable("Grüße, 日本\t", 100).0, "Grüße, 日本\\t");
        assert_eq!(escape_unprintable("abcdef", 4), ("abcd".into(), 2));
        assert_eq!(escape_unprintable("abcd", 4), ("abcd".into(), 0));
        // An escape counts with its length: "\\u{1b}" is 6 characters.
        assert_eq!(escape_unprintable("a\u{1b}b", 6), ("a".into(), 2));
        // Line separators and invisible tags are escaped too.
        assert_eq!(
            escape_unprintable("a\u{2028}b\u{e0041}", 100).0,
            "a\\u{2028}b\\u{e0041}"
        );
    }

    #[test]
    fn json_made_display_safe_reads_as_the_same_value() {
        let value = serde_json::json!({"app": "spotify\n\n\u{2705}\u{202e}", "tag": "x\u{e0041}", "ok": "Grüße"});
        let text = serde_json::to_string(&value).unwrap();
        let safe = json_display_safe(&text);
        assert!(!safe.chars().any(is_unprintable), "{safe}");
        assert!(safe.contains("\\u202e"), "{safe}");
        assert!(safe.contains("\\udb40\\udc41"), "{safe}");
        assert!(safe.contains("Grüße"), "{safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, value);
        assert_eq!(json_display_safe("{\"a\":1}"), "{\"a\":1}");
        assert_eq!(first_unprintable("fine"), None);
        assert_eq!(first_unprintable("bad\u{202e}"), Some('\u{202e}'));
        // What a hostile trial found let through before: every Cf character, blank fillers.
        for c in [
            '\u{FFF9}',
            '\u{206A}',
            '\u{1D173}',
            '\u{1BCA0}',
            '\u{13430}',
            '\u{110BD}',
            '\u{0600}',
            '\u{06DD}',
            '\u{070F}',
            '\u{08E2}',
            '\u{115F}',
            '\u{3164}',
            '\u{FFA0}',
            '\u{2800}',
            '\u{17B4}',
            '\u{034F}',
        ] {
            assert_eq!(first_unprintable(&format!("a{c}b")), Some(c), "{c:?}");
        }
        // Variation selectors stay in text for people, never in names.
        assert_eq!(first_unprintable("\u{2764}\u{FE0F}"), None);
        assert_eq!(first_outside_names("firefox\u{FE0F}"), Some('\u{FE0F}'));
        assert_eq!(first_outside_names("x\u{E0100}"), Some('\u{E0100}'));
    }
}
