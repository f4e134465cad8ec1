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
//! use utter_core::text_style::TextStyle;
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
    /// The file's first line ends in `\r\n` (CRLF); it is the style the whole file gets back.
    /// A file without any line end counts as `\n`.
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

    /// `text` in this style: every line end as this style spells it (a `\r\n` already there
    /// is not doubled), and the byte-order mark first when there was one.
    pub fn apply(self, text: String) -> String {
        let text = if self.crlf {
            let mut out = String::with_capacity(text.len() + text.len() / 16);
            let mut rest = text.as_str();
            while let Some(at) = rest.find('\n') {
                let line = &rest[..at];
                out.push_str(line.strip_suffix('\r').unwrap_or(line));
                out.push_str("\r\n");
                rest = &rest[at + 1..];
            }
            out.push_str(rest);
            out
        } else {
            text
        };
        match (self.bom, text.starts_with(BOM)) {
            (true, false) => format!("{BOM}{text}"),
            _ => text,
        }
    }
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
}
