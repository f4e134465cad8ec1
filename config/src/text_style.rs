//! How a text file spells its line ends, and whether it starts with a byte-order mark, so
//! that a file edited in place keeps both.
//!
//! `toml_edit` keeps comments, order and spacing, but it reads a leading byte-order mark
//! (U+FEFF) as nothing and writes every line end it prints as `\n`. A config or profile
//! written on Windows, or by an editor set to CRLF, would come back from `utter config set`,
//! `utter config migrate` or the settings app with every line changed. [`TextStyle::of`]
//! notes the style before the edit and [`TextStyle::apply`] gives it back afterwards.
//!
//! ```
//! use utter_config::text_style::TextStyle;
//! let (style, body) = TextStyle::of("\u{feff}a = 1\r\nb = 2\r\n");
//! assert_eq!(body, "a = 1\r\nb = 2\r\n");
//! assert_eq!(style.apply("a = 1\nb = 3\n".to_owned()), "\u{feff}a = 1\r\nb = 3\r\n");
//! ```

/// The byte-order mark, U+FEFF (in UTF-8: EF BB BF).
const BOM: char = '\u{feff}';

/// A text file's line ends and byte-order mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TextStyle {
    /// The file starts with a byte-order mark.
    pub bom: bool,
    /// The file's first line ends in `\r\n` (CRLF); it is the style every line end outside
    /// multi-line strings gets back. A file without any line end counts as `\n`.
    pub crlf: bool,
}

impl TextStyle {
    /// The style of `text`, and `text` without its byte-order mark (what a parser is given).
    pub fn of(text: &str) -> (TextStyle, &str) {
        let body = text.strip_prefix(BOM);
        let bom = body.is_some();
        let body = body.unwrap_or(text);
        let crlf = body.find('\n').is_some_and(|at| body[..at].ends_with('\r'));
        (TextStyle { bom, crlf }, body)
    }

    /// `text` (TOML, as `toml_edit` printed it) in this style: every line end as this style
    /// spells it (a `\r\n` already there is not doubled), and the byte-order mark first when
    /// there was one.
    ///
    /// A line end inside a multi-line string (`"""…"""` or `'''…'''`, TOML 1.0 §String) is
    /// part of the string's value, so it is left as written: `utter config set` given a value
    /// with a newline must not find `\r\n` in it afterwards. As a backstop, when the restyled
    /// text would not read as the same TOML (text this scan does not understand), the line
    /// ends stay as `\n` and only the mark is given back.
    pub fn apply(self, text: String) -> String {
        let text = if self.crlf {
            let styled = crlf_outside_strings(&text);
            let same = match (text.parse::<toml::Table>(), styled.parse::<toml::Table>()) {
                // Compared as printed: `nan` is not equal to itself as a float.
                (Ok(before), Ok(after)) => before.to_string() == after.to_string(),
                (Err(_), Err(_)) => true,
                _ => false,
            };
            if same { styled } else { text }
        } else {
            text
        };
        match (self.bom, text.starts_with(BOM)) {
            (true, false) => format!("{BOM}{text}"),
            _ => text,
        }
    }
}

/// Where a scan of TOML text is, for [`crlf_outside_strings`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scan {
    /// Keys, values other than strings, punctuation, whitespace.
    Plain,
    /// After `#`, to the end of the line.
    Comment,
    /// Inside `"…"`: `\` escapes the next character.
    Basic,
    /// Inside `'…'`: no escapes.
    Literal,
    /// Inside `"""…"""`: line ends are the value's.
    MultiBasic,
    /// Inside `'''…'''`: line ends are the value's.
    MultiLiteral,
}

/// `text` with each `\n` outside multi-line strings written `\r\n` (one already preceded by
/// `\r` is left alone).
fn crlf_outside_strings(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    let mut scan = Scan::Plain;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let opens_three = rest.starts_with("\"\"\"") || rest.starts_with("'''");
        // How many bytes to copy as they are, and the state after them.
        let (take, next) = match (scan, c) {
            (Scan::MultiBasic | Scan::MultiLiteral, '\n') => (1, scan),
            (_, '\n') => {
                if !out.ends_with('\r') {
                    out.push('\r');
                }
                // A line end closes a comment, and a (broken) one-line string.
                (1, Scan::Plain)
            }
            (Scan::Plain, '#') => (1, Scan::Comment),
            (Scan::Plain, '"') if opens_three => (3, Scan::MultiBasic),
            (Scan::Plain, '\'') if opens_three => (3, Scan::MultiLiteral),
            (Scan::Plain, '"') => (1, Scan::Basic),
            (Scan::Plain, '\'') => (1, Scan::Literal),
            (Scan::Basic | Scan::MultiBasic, '\\') => {
                // The escaped character goes with its backslash: an escaped quote does not
                // close, and a backslash before a line end is TOML's line-ending backslash.
                let escaped = rest[1..].chars().next().map_or(0, char::len_utf8);
                (1 + escaped, scan)
            }
            (Scan::Basic, '"') | (Scan::Literal, '\'') => (1, Scan::Plain),
            (Scan::MultiBasic, '"') | (Scan::MultiLiteral, '\'') if opens_three => {
                // Up to two more quotes before the closing three belong to the value.
                let run = rest.bytes().take_while(|&q| q == c as u8).count().min(5);
                (run, Scan::Plain)
            }
            _ => (c.len_utf8(), scan),
        };
        out.push_str(&rest[..take]);
        rest = &rest[take..];
        scan = next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::TextStyle;

    #[test]
    fn a_plain_file_comes_back_as_it_was() {
        let (style, body) = TextStyle::of("a = 1\nb = 2\n");
        assert_eq!(style, TextStyle::default());
        assert_eq!(body, "a = 1\nb = 2\n");
        assert_eq!(style.apply("a = 1\n".into()), "a = 1\n");
    }

    #[test]
    fn crlf_and_the_mark_are_given_back_without_doubling() {
        let (style, body) = TextStyle::of("\u{feff}# c\r\nx = 1\r\n");
        assert!(style.bom && style.crlf);
        assert_eq!(body, "# c\r\nx = 1\r\n");
        // Line ends the editor kept and ones it wrote, mixed.
        assert_eq!(
            style.apply("# c\r\nx = 2\ny = 3".into()),
            "\u{feff}# c\r\nx = 2\r\ny = 3"
        );
    }

    #[test]
    fn the_first_line_end_decides_and_odd_input_is_left_alone() {
        assert!(!TextStyle::of("a\nb\r\n").0.crlf);
        assert!(TextStyle::of("a\r\nb\n").0.crlf);
        assert_eq!(TextStyle::of(""), (TextStyle::default(), ""));
        assert_eq!(TextStyle::of("\r"), (TextStyle::default(), "\r"));
        // A mark in the middle is text, not a mark.
        let (style, body) = TextStyle::of("a\u{feff}");
        assert!(!style.bom);
        assert_eq!(body, "a\u{feff}");
    }

    #[test]
    fn line_ends_inside_multi_line_strings_are_the_values_and_stay() {
        let style = TextStyle {
            bom: false,
            crlf: true,
        };
        // What toml_edit prints for a value with a newline, beside comments and one-line
        // strings that hold quotes (an escaped quote, three quotes in a comment).
        let printed = concat!(
            "# a \"\"\" in a comment\n",
            "a = \"\"\"\nline one\nline two\"\"\"\n",
            "b = '''\nx\ny'''\n",
            "c = \"say \\\"hi\\\"\"\n",
            "d = \"\"\"two quotes at the end\"\"\"\"\"\n",
            "e = 1\n",
        );
        let styled = style.apply(printed.to_owned());
        assert_eq!(
            styled,
            concat!(
                "# a \"\"\" in a comment\r\n",
                "a = \"\"\"\nline one\nline two\"\"\"\r\n",
                "b = '''\nx\ny'''\r\n",
                "c = \"say \\\"hi\\\"\"\r\n",
                "d = \"\"\"two quotes at the end\"\"\"\"\"\r\n",
                "e = 1\r\n",
            )
        );
        let before: toml::Table = printed.parse().unwrap();
        let after: toml::Table = styled.parse().unwrap();
        assert_eq!(before, after);
        assert_eq!(after["a"].as_str(), Some("line one\nline two"));
        assert_eq!(after["d"].as_str(), Some("two quotes at the end\"\""));
        // A value that is not equal to itself (NaN) does not make the text look changed.
        assert_eq!(style.apply("x = nan\n".into()), "x = nan\r\n");
    }

    #[test]
    fn text_that_is_not_toml_is_still_restyled() {
        let style = TextStyle {
            bom: true,
            crlf: true,
        };
        // Nothing to compare, so the scan's result stands.
        assert_eq!(style.apply("a = [\n".into()), "\u{feff}a = [\r\n");
    }
}
