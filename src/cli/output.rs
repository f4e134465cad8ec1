//! What every subcommand prints with: the `out!` macro (a `println!` that remembers a failed
//! write instead of panicking, so plugins are still shut down and the exit code tells), the
//! `--json` printers, [`sanitize`] for text that came from plugins or people, and the exit
//! codes with the table `utter --help` shows. The runner's answers are printed with their keys
//! in alphabetical order ([`print_answer`], [`answer_line`]), as they always have been; what
//! this process computed itself keeps its fields' declaration order ([`print_json`]).

use serde::Serialize;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set when writing to stdout failed (a full disk; not a pipe its reader closed): reported
/// as exit code 4.
pub static STDOUT_FAILED: AtomicBool = AtomicBool::new(false);

/// Whether a write to stdout has failed.
pub fn stdout_failed() -> bool {
    STDOUT_FAILED.load(Ordering::Relaxed)
}

/// `println!` that never panics: a failed write is remembered, not fatal, so the plugins are
/// still shut down properly.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        // A reader that closed the pipe (`utter status | head -3`) took what it wanted: not
        // a failure. Any other failed write (a full disk) is.
        if let Err(e) = writeln!(std::io::stdout(), $($arg)*) {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                $crate::cli::output::STDOUT_FAILED
                    .store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }};
}
pub(crate) use out;

/// Exit codes, as listed in `utter --help` ([`EXIT_CODES`]).
pub mod exit {
    /// Success: every step ran (or would run).
    pub const OK: u8 = 0;
    /// Nothing was done: no rule matched, a step failed or was denied.
    pub const NOT_DONE: u8 = 1;
    /// Bad arguments.
    pub const USAGE: u8 = 2;
    /// An invalid configuration or manifest.
    pub const CONFIG: u8 = 3;
    /// The runner could not do its job, or no runner listens.
    pub const RUNNER: u8 = 4;
}

/// The exit-code table and the notes at the end of `utter --help`.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  success: every step ran (or, with --dry-run, would run)
  1  nothing was done: no rule matched, or a step failed or was denied
  2  usage error (bad arguments, empty utterance)
  3  the configuration (or a manifest given to check-manifest) is invalid
  4  the runner could not do its job (no router running, a plugin failed), or no runner
     listens on the socket (status, confirm, pending, reload, events, audit, ptt, listen)

Configuration: --config PATH, else $XDG_CONFIG_HOME/utter/config.toml, else the built-in
default (which runs the `rules` router, the `desktop` action plugin, the `compositor`
context and action plugin, the `a11y` plugin and, when `utter-input` is installed, the
`input` plugin; the speech-to-text and microphone plugins only for the voice loop, once
`utter models pull tiny.en` has installed its model).
Logs go to stderr (`utter daemon` started by systemd logs to the journal); set the level with
--log-level or RUST_LOG.";

/// Print any serialisable value as pretty JSON on stdout, fields in declaration order (for
/// `--json` of what this process found itself: `say --local`, `plugins`, `install`). Like
/// every JSON this CLI prints, display-safe ([`utter_protocol::text::json_display_safe`]):
/// the same value, with no raw control or bidi character of a title or an app id.
pub fn print_json(value: &impl Serialize) {
    out!(
        "{}",
        utter_protocol::text::json_display_safe(
            &serde_json::to_string_pretty(value).unwrap_or_default()
        )
    );
}

/// Print one of the runner's answers as pretty JSON on stdout, keys sorted (for `--json` of
/// `status`, `pending`, `audit`, `reload`, `ptt` and `say` through the service).
pub fn print_answer(value: &impl Serialize) {
    out!(
        "{}",
        utter_protocol::text::json_display_safe(
            &serde_json::to_string_pretty(&sorted(value)).unwrap_or_default()
        )
    );
}

/// One of the runner's answers (an event, a voice report) as one line of JSON, keys sorted.
pub fn answer_line(value: &impl Serialize) -> String {
    utter_protocol::text::json_display_safe(&sorted(value).to_string())
}

/// `value` as a JSON tree; `serde_json`'s maps keep their keys sorted.
fn sorted(value: &impl Serialize) -> Value {
    serde_json::to_value(value).unwrap_or_default()
}

/// The most characters of one piece of text from a plugin or the desktop printed on a line;
/// the rest is cut with a note (the whole text is in `--json`).
pub const MAX_PRINTED_CHARS: usize = 2000;

/// Text from plugins, the desktop (window titles) or utterances as it is safe to print
/// ([`utter_protocol::text::escape_unprintable`]); more than [`MAX_PRINTED_CHARS`]
/// characters are cut with a note.
pub fn sanitize(text: &str) -> String {
    let (mut out, left_out) = utter_protocol::text::escape_unprintable(text, MAX_PRINTED_CHARS);
    if left_out > 0 {
        out.push_str(&format!("… ({left_out} more characters; see --json)"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_escapes_controls_and_invisible_formatting_and_cuts_long_text() {
        assert_eq!(sanitize("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(sanitize("x\u{9b}y"), "x\\u{9b}y");
        assert_eq!(sanitize("evil\u{202e}txt.exe"), "evil\\u{202e}txt.exe");
        assert_eq!(sanitize("hid\u{200b}den"), "hid\\u{200b}den");
        assert_eq!(sanitize("Grüße, 日本"), "Grüße, 日本");
        let long = "y".repeat(MAX_PRINTED_CHARS + 10);
        let shown = sanitize(&long);
        assert!(shown.starts_with(&"y".repeat(MAX_PRINTED_CHARS)));
        assert!(
            shown.ends_with("(10 more characters; see --json)"),
            "{shown}"
        );
    }
}
