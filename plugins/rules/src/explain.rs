//! Why nothing planned: the message and reason code of a phrase that a rule came close to
//! ("workspace 300", a niri binding on sway, "press blorp", "switch to fierfox" with the
//! similar names there are).

use crate::apps::app_forms;
use crate::context::Context;
use crate::inapp;
use crate::numbers;
use crate::plan::{APP_VERBS, Escalation, Sources};
use crate::text::strip_word_prefix;
use crate::web::SITE_VERBS;
use crate::windows::target_names;

/// Why [`plan`] found no step for `text`, when a rule came close enough to say so:
///
/// - a phrase with a workspace number that is no workspace number ("workspace -1",
///   "workspace 0", "go to workspace 300"): which numbers there are;
/// - one of the user's niri binding phrases while the context names another compositor:
///   that the binding is niri's and which compositor runs;
/// - an in-app verb without what it needs ("press blorp" names the unknown key word, "type"
///   alone, "scroll sideways", "click it"; see [`inapp::explain`]);
/// - a focus or close verb with a name that is neither an installed application nor an
///   app_id of the context's windows ("switch to firefox" without Firefox): that nothing is
///   called so, with up to [`MAX_CLOSE_NAMES`] similar names from both when there are any
///   (and from the site catalog after a verb that also opens sites, "go to" or "show").
///
/// `None` when no rule came close; the caller then says that no rule matched. Call it only
/// after [`plan`] returned `None`: it does not check again that nothing matches.
pub fn explain(text: &str, sources: &Sources<'_>) -> Option<String> {
    explained(text, sources).map(|e| e.message)
}

/// [`explain`] with its reason code: `bad_number`, `other_compositor`, `incomplete` (an
/// in-app verb without what it needs), `needs_terminal` (a shell command said with no
/// terminal focused) or `unknown_target`.
pub fn explained(text: &str, sources: &Sources<'_>) -> Option<Escalation> {
    if text.is_empty() {
        return None;
    }
    let because = |reason: &'static str| move |message: String| Escalation { reason, message };
    let canonical = numbers::digits(text);
    if let Some((action, number)) = sources.curated.table.lookup_bad_number(&canonical) {
        return Some(format!(
            "{} needs a number from 1 to {}, not {number}",
            action.command,
            crate::phrases::MAX_SLOT
        ))
        .map(because("bad_number"));
    }
    if !Context::may_be_niri(sources.context) && sources.binds.lookup(&canonical).is_some() {
        let compositor = sources
            .context
            .and_then(|c| c.compositor.as_deref())
            .unwrap_or("another compositor");
        return Some(format!(
            "\"{text}\" is one of your niri key bindings, but this session runs {compositor}"
        ))
        .map(because("other_compositor"));
    }
    if let Some(message) = inapp::explain(sources.spoken(text)) {
        return Some(because("incomplete")(message));
    }
    // A shell command said without "run" while no terminal is focused ("git pull").
    if let Some(command) = crate::language::shell_command(sources, sources.spoken(text)) {
        return Some(because("needs_terminal")(format!(
            "\"{}\" is a shell command ({command}): focus a terminal and say it again",
            sources.spoken(text).trim()
        )));
    }
    let launch_verbs: Vec<String> = APP_VERBS.iter().map(|v| (*v).to_owned()).collect();
    let verbs = sources
        .curated
        .focus_verbs
        .iter()
        .chain(&sources.curated.close_verbs)
        .chain(&launch_verbs);
    let (verb, target) = verbs
        .filter_map(|verb| Some((verb, strip_word_prefix(text, verb)?)))
        .find(|(_, rest)| !rest.is_empty())?;
    // "open the browser" with two installed and none the default: which one.
    let closing = sources.curated.close_verbs.contains(verb);
    if let Some(names) = crate::windows::kind_choices(target, sources).filter(|_| !closing) {
        let (last, rest) = names.split_last()?;
        return Some(Escalation {
            reason: "unsure",
            message: format!(
                "which one: {} or {last}? Say its name (a default set with xdg-mime or xdg-settings is used)",
                rest.join(", ")
            ),
        });
    }
    let name = spoken_name(target);
    // "go to" and "show" also open sites: then a site's name is as likely as an application's.
    let sites_too = SITE_VERBS.contains(&verb.as_str());
    let mut message = format!(
        "no {}installed application or open window is called \"{name}\"",
        if sites_too { "site, " } else { "" }
    );
    let mut candidates: Vec<String> = sources.apps.names();
    if let Some(context) = sources.context {
        candidates.extend(context.app_ids.iter().cloned());
    }
    if sites_too {
        candidates.extend(sources.catalog.sites().iter().map(|s| s.name.clone()));
    }
    let close = close_names(&name, candidates);
    if !close.is_empty() {
        // An app_id is written by the application, like a title: its control characters
        // (an escape sequence) are shown escaped, never sent to a terminal.
        let shown: Vec<String> = close
            .iter()
            .map(|n| utter_protocol::text::clip(n, 80))
            .collect();
        message.push_str(&format!("; similar names: {}", shown.join(", ")));
    }
    Some(because("unknown_target")(message))
}

/// The most similar names [`explain`] lists.
pub const MAX_CLOSE_NAMES: usize = 3;

/// The name a focus or close target is about: without a trailing "window", a leading article
/// and a trailing "app" ("the firefox window" → "firefox").
fn spoken_name(target: &str) -> String {
    let names = target_names(target);
    let last = names.last().copied().unwrap_or(target);
    app_forms(last).pop().unwrap_or_else(|| last.to_owned())
}

/// Up to [`MAX_CLOSE_NAMES`] of `candidates` that look like `spoken`, most similar first:
/// one contains the other (at least three letters of it), or they are a few typos apart
/// (one edit for short names, two from five letters, three from nine), comparing lowercase
/// letters and digits only.
fn close_names(spoken: &str, candidates: Vec<String>) -> Vec<String> {
    let key = |text: &str| -> Vec<char> {
        text.to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric())
            .collect()
    };
    let wanted = key(spoken);
    if wanted.len() < 2 {
        return Vec::new();
    }
    let mut scored: Vec<(usize, String)> = Vec::new();
    for candidate in candidates {
        let have = key(&candidate);
        if have.is_empty() || have == wanted {
            continue;
        }
        let (short, long) = if have.len() < wanted.len() {
            (&have, &wanted)
        } else {
            (&wanted, &have)
        };
        let contained = short.len() >= 3 && long.windows(short.len()).any(|w| w == &short[..]);
        let allowed = match short.len() {
            0..=4 => 1,
            5..=8 => 2,
            _ => 3,
        };
        let score = if contained {
            Some(0)
        } else {
            edit_distance(&wanted, &have, allowed)
        };
        if let Some(score) = score {
            scored.push((score, candidate));
        }
    }
    scored.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    let mut out: Vec<String> = Vec::new();
    for (_, name) in scored {
        if !out.iter().any(|o| o.eq_ignore_ascii_case(&name)) {
            out.push(name);
        }
        if out.len() == MAX_CLOSE_NAMES {
            break;
        }
    }
    out
}

/// The Levenshtein distance between `a` and `b` (strsim's) when it is at most `limit`.
fn edit_distance(a: &[char], b: &[char], limit: usize) -> Option<usize> {
    if a.len().abs_diff(b.len()) > limit {
        return None;
    }
    Some(strsim::generic_levenshtein(&a.to_vec(), &b.to_vec())).filter(|&d| d <= limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_names_rank_containment_then_typos() {
        let names = |spoken: &str, candidates: &[&str]| {
            close_names(spoken, candidates.iter().map(|c| (*c).to_owned()).collect())
        };
        assert_eq!(
            names(
                "firefox",
                &["Firefox Developer Edition", "firefax", "foot", "Files"]
            ),
            ["Firefox Developer Edition", "firefax"]
        );
        assert_eq!(names("foot", &["feet", "food", "fo"]), ["food"]);
        assert_eq!(names("x", &["x1", "xx"]), Vec::<String>::new());
        assert_eq!(
            names(
                "term",
                &["Term", "TERM", "terms", "xterm", "aterm", "uterm"]
            )
            .len(),
            MAX_CLOSE_NAMES
        );
        assert_eq!(edit_distance(&['a', 'b'], &['a', 'b'], 0), Some(0));
        assert_eq!(edit_distance(&['a'], &['b', 'c', 'd'], 1), None);
    }
}
