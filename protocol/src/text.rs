//! Text that came from elsewhere (a plugin's stderr, a window title, a compositor's reply)
//! made safe to print or log: the one escaping every part of Utter uses.

/// Whether `c` changes how the text around it is shown without being visible itself:
/// bidirectional embeddings, overrides and isolates (Unicode UAX #9: U+202A–U+202E,
/// U+2066–U+2069, U+200E/U+200F, U+061C) and zero-width characters (U+200B–U+200D, U+2060,
/// U+FEFF). A window title could otherwise print reversed or hide words.
pub fn is_invisible_format(c: char) -> bool {
    matches!(c,
        '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2069}'
        | '\u{061C}' | '\u{FEFF}')
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
        let escape = c.is_control() || is_invisible_format(c);
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
/// message.
pub fn clip(text: &str, max_chars: usize) -> String {
    let (mut shown, left) = escape_unprintable(text, max_chars);
    if left > 0 {
        shown.push_str(&format!("… ({left} more characters)"));
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_cuts_long_text_and_says_how_much() {
        assert_eq!(clip("runner.status", 200), "runner.status");
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
    }
}
