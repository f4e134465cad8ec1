//! The `Exec` key of a desktop entry, turned into an argument vector.
//!
//! This follows the Desktop Entry Specification 1.5, section "The Exec key". Input is the
//! value *after* the general string escapes (`\s`, `\n`, `\t`, `\r`, `\\`) were undone, which
//! the entry parser does for every value. Then, in this order:
//!
//! 1. **Quoting is undone.** Arguments are separated by spaces (tabs and newlines are accepted
//!    too). Inside double quotes, a backslash escapes `"`, `` ` ``, `$` and `\`; before any
//!    other character it stays a literal backslash. A quoted part may touch unquoted text
//!    (`--title="a b"` is one argument `--title=a b`), as in GLib and KDE.
//! 2. **Field codes are expanded** in every argument, quoted or not, since the spec undoes
//!    quoting first. We never pass files or URLs, so:
//!
//!    | code | becomes |
//!    |---|---|
//!    | `%f` `%u` | nothing: an argument made of only the code is dropped; inside a longer argument the code is removed |
//!    | `%F` `%U` | nothing; must be an argument on its own (spec), else the line is invalid |
//!    | `%i` | the two arguments `--icon <Icon>`, or nothing when `Icon` is empty or missing; must stand alone |
//!    | `%c` | the translated `Name`, as one argument or inside one |
//!    | `%k` | the path of the desktop file |
//!    | `%%` | `%` |
//!    | `%d` `%D` `%n` `%N` `%v` `%m` | deprecated: dropped like `%f` |
//!
//!    A replacement is never split into several arguments nor scanned again for codes.
//!
//! A line is **invalid** (and must not be run) when a quote is left open, a `%` is followed
//! by a character that is not a listed code (or by nothing), `%F`/`%U`/`%i` share an argument
//! with other text, more than one of `%f %F %u %U` appears, or nothing is left to run.
//!
//! Two choices where the spec is silent: outside quotes a backslash escapes the next
//! character (GLib and KDE do the same), and an unquoted single quote is refused: the spec
//! only quotes with double quotes, while launchers that use shell rules would read `'a b'` as
//! one argument, so running it either way could run something the author did not mean.

/// What the field codes expand to.
#[derive(Debug, Clone, Copy)]
pub struct ExecContext<'a> {
    /// The `Name` translated for the user's locale, for `%c`.
    pub name: &'a str,
    /// The `Icon` key, for `%i` (`None` or empty: `%i` expands to nothing).
    pub icon: Option<&'a str>,
    /// The location of the desktop file, for `%k`.
    pub location: &'a str,
}

/// Why an `Exec` value cannot be run. Byte offsets count into the value after string
/// unescaping.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    /// No argument at all, or only field codes that expanded to nothing.
    #[error("the Exec value has no program to run")]
    Empty,
    /// The first argument is the empty string.
    #[error("the program name is empty")]
    EmptyProgram,
    /// The spec forbids `=` in the name or path of the program.
    #[error("the program name {0:?} contains '=', which the specification forbids")]
    EqualsInProgram(String),
    /// A `"` with no closing partner.
    #[error("the double quote at byte {0} is never closed")]
    UnterminatedQuote(usize),
    /// A backslash at the very end, outside quotes.
    #[error("the Exec value ends with a lone backslash")]
    TrailingBackslash,
    /// A `'` outside double quotes.
    #[error(
        "unquoted single quote at byte {0}: the specification quotes arguments with double \
         quotes only (write \"...\")"
    )]
    SingleQuote(usize),
    /// `%` followed by a character that is not a field code.
    #[error("unknown field code %{0} (known: %f %F %u %U %i %c %k %%; write %% for a literal %)")]
    UnknownFieldCode(char),
    /// `%` as the last character of an argument.
    #[error("a lone % ends an argument (write %% for a literal %)")]
    LonePercent,
    /// `%F`, `%U` or `%i` inside a longer argument.
    #[error("%{0} must be an argument on its own")]
    NotStandalone(char),
    /// More than one of `%f %F %u %U`.
    #[error("more than one of %f, %F, %u, %U (the specification allows at most one)")]
    SeveralFileCodes,
}

/// Undo the quoting of an `Exec` value and split it into arguments, without expanding field
/// codes. See the module documentation for the rules.
///
/// # Errors
///
/// [`ExecError::UnterminatedQuote`], [`ExecError::TrailingBackslash`],
/// [`ExecError::SingleQuote`].
pub fn split(exec: &str) -> Result<Vec<String>, ExecError> {
    let mut args = Vec::new();
    let mut current = String::new();
    let mut in_arg = false;
    let mut chars = exec.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            ' ' | '\t' | '\n' | '\r' => {
                if in_arg {
                    args.push(std::mem::take(&mut current));
                    in_arg = false;
                }
            }
            '"' => {
                in_arg = true;
                loop {
                    match chars.next() {
                        None => return Err(ExecError::UnterminatedQuote(at)),
                        Some((_, '"')) => break,
                        Some((_, '\\')) => match chars.next() {
                            None => return Err(ExecError::UnterminatedQuote(at)),
                            Some((_, e @ ('"' | '`' | '$' | '\\'))) => current.push(e),
                            Some((_, other)) => {
                                current.push('\\');
                                current.push(other);
                            }
                        },
                        Some((_, other)) => current.push(other),
                    }
                }
            }
            '\\' => {
                in_arg = true;
                match chars.next() {
                    None => return Err(ExecError::TrailingBackslash),
                    Some((_, escaped)) => current.push(escaped),
                }
            }
            '\'' => return Err(ExecError::SingleQuote(at)),
            other => {
                in_arg = true;
                current.push(other);
            }
        }
    }
    if in_arg {
        args.push(current);
    }
    Ok(args)
}

/// Turn an `Exec` value into the argument vector to run (`argv[0]` is the program, looked up
/// in `$PATH` by the caller when it has no `/`). No file or URL is passed.
///
/// # Errors
///
/// Any [`ExecError`]: the line is invalid and must not be run.
pub fn expand(exec: &str, ctx: &ExecContext<'_>) -> Result<Vec<String>, ExecError> {
    let mut argv = Vec::new();
    let mut file_codes = 0usize;
    for word in split(exec)? {
        if let Some(code) = lone_code(&word) {
            match code {
                'f' | 'F' | 'u' | 'U' => {
                    file_codes += 1;
                    continue;
                }
                'i' => {
                    if let Some(icon) = ctx.icon.filter(|icon| !icon.is_empty()) {
                        argv.push("--icon".to_owned());
                        argv.push(icon.to_owned());
                    }
                    continue;
                }
                'd' | 'D' | 'n' | 'N' | 'v' | 'm' => continue,
                // %c, %k, %% and unknown codes go through the general path below.
                _ => {}
            }
        }
        argv.push(expand_word(&word, ctx, &mut file_codes)?);
    }
    if file_codes > 1 {
        return Err(ExecError::SeveralFileCodes);
    }
    let program = argv.first().ok_or(ExecError::Empty)?;
    if program.is_empty() {
        return Err(ExecError::EmptyProgram);
    }
    if program.contains('=') {
        return Err(ExecError::EqualsInProgram(program.clone()));
    }
    Ok(argv)
}

/// The code letter when `word` is exactly `%` plus one character.
fn lone_code(word: &str) -> Option<char> {
    let mut chars = word.chars();
    match (chars.next(), chars.next(), chars.next()) {
        (Some('%'), Some(code), None) => Some(code),
        _ => None,
    }
}

/// Expand the field codes inside one argument that stays one argument.
fn expand_word(
    word: &str,
    ctx: &ExecContext<'_>,
    file_codes: &mut usize,
) -> Result<String, ExecError> {
    let mut out = String::with_capacity(word.len());
    let mut chars = word.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            None => return Err(ExecError::LonePercent),
            Some('%') => out.push('%'),
            Some('c') => out.push_str(ctx.name),
            Some('k') => out.push_str(ctx.location),
            Some('f' | 'u') => *file_codes += 1,
            Some(code @ ('F' | 'U' | 'i')) => return Err(ExecError::NotStandalone(code)),
            Some('d' | 'D' | 'n' | 'N' | 'v' | 'm') => {}
            Some(other) => return Err(ExecError::UnknownFieldCode(other)),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CTX: ExecContext<'static> = ExecContext {
        name: "Text Editor",
        icon: Some("accessories-text-editor"),
        location: "/usr/share/applications/org.example.Editor.desktop",
    };

    fn ok(exec: &str) -> Vec<String> {
        match expand(exec, &CTX) {
            Ok(argv) => argv,
            Err(e) => panic!("{exec:?} should expand, got {e}"),
        }
    }

    fn err(exec: &str) -> ExecError {
        match expand(exec, &CTX) {
            Ok(argv) => panic!("{exec:?} should be invalid, got {argv:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn plain_words_are_split_on_blanks() {
        assert_eq!(ok("gedit"), ["gedit"]);
        assert_eq!(
            ok("  /usr/bin/app   -a\t-b \n c "),
            ["/usr/bin/app", "-a", "-b", "c"]
        );
    }

    #[test]
    fn double_quotes_group_and_escape() {
        assert_eq!(ok(r#"app "two words" x"#), ["app", "two words", "x"]);
        assert_eq!(ok(r#"app "say \"hi\"""#), ["app", r#"say "hi""#]);
        assert_eq!(
            ok(r#"app "\$HOME \`id\` back\\slash""#),
            ["app", r"$HOME `id` back\slash"]
        );
        // An empty quoted argument is a real (empty) argument.
        assert_eq!(ok(r#"app "" x"#), ["app", "", "x"]);
        // A backslash before another character stays literal inside quotes.
        assert_eq!(ok(r#"app "a\nb""#), ["app", r"a\nb"]);
        // Quoted and unquoted parts of one word join up.
        assert_eq!(ok(r#"app --title="a b"c"#), ["app", "--title=a bc"]);
        // Reserved characters are ordinary inside quotes; no shell ever sees them.
        assert_eq!(
            ok(r#"sh -c "echo 'x' | cat > /tmp/f; exit""#),
            ["sh", "-c", "echo 'x' | cat > /tmp/f; exit"]
        );
    }

    #[test]
    fn the_string_level_backslash_escape_then_quoting_gives_one_backslash() {
        // In the file, `\\\\` is one literal backslash in a quoted argument: the string
        // escape turns it into `\\` (what `expand` sees), quoting into `\`.
        assert_eq!(ok(r#"app "a\\b""#), ["app", r"a\b"]);
        // `\\$` in the file is `\$` here: a literal dollar sign.
        assert_eq!(ok(r#"app "\$x""#), ["app", "$x"]);
    }

    #[test]
    fn backslash_outside_quotes_escapes_the_next_character() {
        assert_eq!(ok(r"app a\ b \x"), ["app", "a b", "x"]);
        assert_eq!(err(r"app a\"), ExecError::TrailingBackslash);
    }

    #[test]
    fn file_and_url_codes_vanish_when_nothing_is_opened() {
        for code in ["%f", "%F", "%u", "%U"] {
            assert_eq!(ok(&format!("app {code}")), ["app"], "{code}");
            assert_eq!(
                ok(&format!("app \"{code}\" -x")),
                ["app", "-x"],
                "quoted {code}"
            );
        }
        // Inside a longer argument %f/%u are removed, the argument stays.
        assert_eq!(ok("app --file=%f"), ["app", "--file="]);
        assert_eq!(ok("app --url=%u!"), ["app", "--url=!"]);
    }

    #[test]
    fn icon_code_expands_to_two_arguments_or_none() {
        assert_eq!(
            ok("app %i -x"),
            ["app", "--icon", "accessories-text-editor", "-x"]
        );
        let no_icon = ExecContext { icon: None, ..CTX };
        assert_eq!(
            expand("app %i -x", &no_icon),
            Ok(vec!["app".into(), "-x".into()])
        );
        let empty_icon = ExecContext {
            icon: Some(""),
            ..CTX
        };
        assert_eq!(expand("app %i", &empty_icon), Ok(vec!["app".into()]));
    }

    #[test]
    fn name_and_location_stay_one_argument_even_with_spaces() {
        assert_eq!(ok("app %c"), ["app", "Text Editor"]);
        assert_eq!(ok("app --name=%c"), ["app", "--name=Text Editor"]);
        assert_eq!(ok(r#"app "Open %c now""#), ["app", "Open Text Editor now"]);
        assert_eq!(
            ok("app %k"),
            ["app", "/usr/share/applications/org.example.Editor.desktop"]
        );
        assert_eq!(
            ok("app --from=%k"),
            [
                "app",
                "--from=/usr/share/applications/org.example.Editor.desktop"
            ]
        );
    }

    #[test]
    fn replacements_are_not_expanded_again() {
        let tricky = ExecContext {
            name: "100%c %f",
            ..CTX
        };
        assert_eq!(
            expand("app %c", &tricky),
            Ok(vec!["app".into(), "100%c %f".into()])
        );
    }

    #[test]
    fn percent_percent_is_a_literal_percent() {
        assert_eq!(ok("app 100%%"), ["app", "100%"]);
        assert_eq!(ok("app %%"), ["app", "%"]);
        assert_eq!(ok(r#"app "%%c""#), ["app", "%c"]);
        assert_eq!(ok("app %%%c"), ["app", "%Text Editor"]);
    }

    #[test]
    fn deprecated_codes_are_removed() {
        for code in ["%d", "%D", "%n", "%N", "%v", "%m"] {
            assert_eq!(ok(&format!("app {code} -x")), ["app", "-x"], "{code}");
            assert_eq!(ok(&format!("app a{code}b")), ["app", "ab"], "inside {code}");
        }
    }

    #[test]
    fn unknown_codes_and_lone_percent_are_invalid() {
        assert_eq!(err("app %x"), ExecError::UnknownFieldCode('x'));
        assert_eq!(err("app --a=%1"), ExecError::UnknownFieldCode('1'));
        assert_eq!(err(r#"app "%s""#), ExecError::UnknownFieldCode('s'));
        assert_eq!(err("app 100%"), ExecError::LonePercent);
        assert_eq!(err("app %"), ExecError::LonePercent);
    }

    #[test]
    fn list_and_icon_codes_must_stand_alone() {
        assert_eq!(err("app --files=%F"), ExecError::NotStandalone('F'));
        assert_eq!(err("app x%U"), ExecError::NotStandalone('U'));
        assert_eq!(err("app --icon=%i"), ExecError::NotStandalone('i'));
    }

    #[test]
    fn at_most_one_file_code() {
        assert_eq!(err("app %f %u"), ExecError::SeveralFileCodes);
        assert_eq!(err("app %F --x=%u"), ExecError::SeveralFileCodes);
    }

    #[test]
    fn broken_quoting_is_invalid() {
        assert_eq!(err(r#"app "open"#), ExecError::UnterminatedQuote(4));
        assert_eq!(
            err(r#"app "ends in escape\"#),
            ExecError::UnterminatedQuote(4)
        );
        assert_eq!(err("sh -c 'echo hi'"), ExecError::SingleQuote(6));
    }

    #[test]
    fn the_program_must_be_present_and_without_equals() {
        assert_eq!(err(""), ExecError::Empty);
        assert_eq!(err("   "), ExecError::Empty);
        assert_eq!(err("%f"), ExecError::Empty);
        assert_eq!(err(r#""" -x"#), ExecError::EmptyProgram);
        assert_eq!(
            err("FOO=1 app"),
            ExecError::EqualsInProgram("FOO=1".to_owned())
        );
        // `env FOO=1 app` is the correct way and is fine.
        assert_eq!(ok("env FOO=1 app"), ["env", "FOO=1", "app"]);
    }

    #[test]
    fn split_only_unquotes() {
        assert_eq!(
            split(r#"a "b c" %f"#),
            Ok(vec!["a".into(), "b c".into(), "%f".into()])
        );
        assert_eq!(split(""), Ok(vec![]));
    }
}
