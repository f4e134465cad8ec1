//! The rules: from a normalised utterance to its steps (one, or two for an agent typed
//! into a terminal; `lib.rs` joins the plans of "X and Y" into one of several steps).
//!
//! This file is the cascade only: the order of the families and the readings tried when
//! none plans. Each family is a module of its own, and what they share (the step,
//! [`Escalation`], [`Sources`]) is the leaf [`crate::plan`]: [`crate::media`] (rule 2),
//! [`crate::web`] (4, 18), the compositor phrases and generated actions of
//! [`crate::phrases`], [`crate::niri_config`] and [`crate::space`] (5, 6),
//! [`crate::windows`] (9-11), [`crate::language`] (1, 3, 7, 8, 12, 13), [`crate::inapp`]
//! (14-17) and, when nothing plans, [`crate::explain`].
//!
//! Rules are tried in a fixed order and the first that matches decides (before all of
//! them, "undo that", "scratch that" and "undo the last two" plan op `undo {count}`, which
//! the runner turns into the inverse steps of its journal's last commands):
//!
//! 1. `open_url`: an address said in full ("open `https://github.com/rust-lang/rust`", "go
//!    to example.com/docs") → op `ensure_url {url, site}`, the address kept as said; and
//!    `app_phrase`: a phrase the focused application's profile names exactly ("search" in
//!    Spotify, "clear" in a terminal), see [`crate::language`].
//! 2. `media`: playback commands ("pause", "next track", "pause spotify", "spotify pause",
//!    "skip on vlc") → op `media`, args `{command, player?}`.
//! 3. `search`: "search youtube for cats", "google X", "look up X" → op `open_url` of a
//!    search template (the site's, Google's, the focused browser's, or the default engine).
//! 4. `open_site`: "open / go to / visit / show \<site\>" for a site of the catalog
//!    → op `ensure_url`, args `{url, site}`, `site` being the catalog entry's name
//!    ("YouTube"), which the desktop plugin looks for in browser window titles.
//! 5. `compositor`: a curated phrase of `data/compositor-phrases.toml` ("workspace two",
//!    "the third workspace", "move this to workspace 3", "focus left", "close this window",
//!    "take a screenshot") → op `niri`, args `{command, args?, options?}`.
//! 6. `niri_bind`: a phrase generated from the user's own niri key bindings ("focus workspace
//!    one", a binding's hotkey-overlay-title such as "open a terminal", see
//!    [`crate::niri_config`]) → op `niri` with the bound action.
//! 7. `shortcut`: a shortcut of the focused application's profile by name or synonym ("new
//!    tab", "reload the page"), aimed at a named application ("firefox new tab"), or a
//!    common chord ("copy", "undo") → op `key {chord, app?}`; escalates when only another
//!    kind of application knows it ("new tab" in a terminal: `needs_browser`).
//! 8. `agent`: "start claude", "boot up a codex session", "run aider in a new terminal",
//!    "launch claude code here" → typed into the focused terminal (unless a new one was
//!    asked for), else `niri spawn` of a terminal profile's `run` argv with the agent's
//!    command ("here" with no terminal focused: `needs_terminal`).
//! 9. `ensure_app` / `focus_app`: "switch to / focus / show / go to / bring up \<app\>"
//!    (the verbs of the phrase file's `[apps]`) → op `ensure_app`, args `{app, desktop_id,
//!    wm_class?}`, for an installed application; else op `focus_app`, args `{app}`, for a
//!    window of the context whose app_id is the spoken name or one of its profile's.
//! 10. `close_app`: "close / quit / exit \<app\>" → op `close_app`, args `{app}`: a window's
//!     app_id from the context, else an installed application's id.
//! 11. `launch_app`: "open / launch / start / run \<app\>" for an installed application
//!     → op `launch_app`, args `{app_id, name}` ("open" with a window of it open: the
//!     focus-or-launch); a profile's application without a desktop entry → `ensure_app
//!     {app, argv}` with the profile's `launch`.
//! 12. `terminal`: "run / execute \<command\>" with a terminal focused → op `terminal
//!     {command}` (the runner keeps it off by default and confirms it); else `needs_terminal`.
//! 13. `aimed_input`: "foot press enter", "type hello in kitty" → the in-app step with `app`.
//! 14. `type_text`: "type / type in / write / enter the text \<text\>" → op `type_text`, args
//!     `{text}`, the text as it was said (see [`crate::inapp`]).
//! 15. `key`: "press / hit / tap \<chord\> [N times]" → op `key`, args `{chord, repeat?}`
//!     with X keysym names ("press control shift t" → `ctrl+shift+t`).
//! 16. `scroll`: "scroll up / down / left / right [a little | a lot | N times]" → op
//!     `scroll`, args `{direction, amount}`.
//! 17. `click_element`: "click / click on / tap on \<element\>", and "press / hit the
//!     \<name\> button" or "tap \<name\>" when the words are no key chord → op
//!     `click_element`, args `{description}`.
//! 18. `open_domain`: "open / go to / visit / show \<host name\>" → op `ensure_url`, args
//!     `{url: "https://<host>", site: "<host>"}`.
//! 19. `chat_message`: "send \<message\>" in a messenger (a desktop entry whose categories
//!     say `InstantMessaging` or `Chat`) → op `type_text {text}`, then `key Return`.
//!
//! When none plans, three readings of the whole utterance are tried, in order, before
//! giving up (they only ever plan what every rule above left unplanned):
//!
//! - an application named at the start, or after "in"/"on"/"into" at either end
//!   ("terminal press enter", "in vs code save the file", "paste that into the terminal";
//!   "the terminal" and "the browser" name an open window of that kind): the rest planned
//!   as if it were focused, if that gives steps acting inside a window → the application
//!   focused (or started) first, then those steps;
//! - `loose_shortcut`: a shortcut name or synonym said with other words around it, compared
//!   by content words in any order ("reopen the tab I just closed", "zoom out a bit",
//!   "go to the end of the line"), and "the third tab" in a browser;
//! - a one-key phrase said with how many times ("undo three times") → its `key` with
//!   `repeat`;
//! - `site_query`: a site with a search of its own named first, then what to search for
//!   ("duckduckgo wayland screen sharing", "youtube lofi beats") → its search.
//!
//! When none of those plans, [`plan_steps`] answers an [`Escalation`]: the first rule's that
//! recognised the phrase but could not plan it, else [`crate::explain::explained`]'s, else `no_rule`.
//!
//! Why this order:
//!
//! - A catalog site keeps "go to \<site\>" and "show \<site\>" (4 before 5-11): a catalog is a
//!   list of names somebody chose, and no curated phrase is a site's name (a test checks that
//!   against the built-in catalog).
//! - Workspace, window and monitor words beat application names (5 before 9): "switch to
//!   workspace 2" is never a search for an application called "workspace 2", and "close this
//!   window" is not `close_app` of an application called "this window".
//! - Curated phrases beat the generated ones (5 before 6) when both claim a phrase, and a
//!   generated phrase beats the application rules (6 before 9-11): "open a terminal" is what
//!   the user's own binding says it is.
//! - "open X" still prefers a site, then an application, then a host name (4, 11, 18).
//! - The in-app rules (13-17) come after everything that names a site, an application or a
//!   compositor action, so none of them can take a phrase of those: "pause" stays media,
//!   "close this window" and "take a screenshot" stay the compositor's, "enter fullscreen"
//!   is not typing. Their verbs (type, write, enter the text, press, hit, tap, scroll,
//!   click) open no phrase of rules 2-11 either; a test checks every curated phrase and
//!   every "\<site verb\> \<site\>" against them. Only the user's own niri bindings could
//!   say "press ..." or "type ...", and then the user's binding wins (6 before 13-17).
//! - Among themselves: "press" and "hit" are a key first and click only "the \<name\>
//!   button" (or link, tab, icon, ...) whose name is no key; "tap" is a key when its words
//!   are a chord and a click otherwise; "page down" is a key, "scroll down" a scroll (see
//!   [`crate::inapp`]).
//! - 13-17 and 18 share no verb, so the host-name rule keeps "open example.com".
//!
//! Rule 5 plans on every compositor: the op `niri` names niri's actions, and the compositor
//! plugin maps each to sway's command where sway has one (and says clearly when it has
//! none). Rule 6 comes from the user's niri config, so it is skipped when the context names
//! another compositor (sway). Without a context (no compositor plugin) both plan.
//!
//! Numbers: rules 5 and 6 compare the utterance with every spoken number written as digits
//! ([`crate::numbers`]), so "workspace two", "workspace 2", "the second workspace" and
//! "the 2nd workspace" are one phrase. A workspace number is 1 to 255: "workspace 0",
//! "workspace 300" and a signed "workspace -1" (which normalisation writes "workspace minus
//! 1", as it does "workspace minus one") match no phrase at all, so no other number is ever
//! planned in their place.
//!
//! Confirmation: a step of a destructive compositor action (closing the focused window,
//! quitting the session, powering the monitors off; see [`crate::phrases::Curated::confirms`]) carries
//! `confirm: true`, and the runner asks the person before it runs (PROTOCOL.md §9.5). That
//! holds for the curated phrases ("close it", "kill this window") and for the user's niri
//! bindings of the same actions alike. Every other step says `confirm: false`; `close_app` is
//! confirmed by the runner's own policy.
//!
//! When nothing matches, [`crate::explain::explain`] says why if a rule came close (a number out of range, a
//! niri binding on another compositor, an unknown name after "switch to" or "close"), so
//! the empty plan's message helps the person rephrase.
//!
//! Provenance and the context: every argument here comes from the utterance, the curated
//! file, the user's niri config or a desktop entry, and the step keeps the request's
//! provenance (`user` for spoken words). The one value taken from the context is the
//! `app_id` of `focus_app`/`close_app`, and it is taken only when it equals the spoken name
//! up to case, spaces, dashes and dots: the context *selects* which spelling to send, it
//! cannot add anything the user did not say, so nothing marks the step specially. Window
//! titles are never read.
//!
//! The in-app rules take their values from the utterance as received
//! ([`Sources::utterance`]) rather than from the normalised words: the text to type keeps
//! its case and punctuation, and so does the name of the element to click.
//!
//! Everything here is pure over the given [`Sources`], which is how the unit tests drive it;
//! `lib.rs` supplies the real ones.

use crate::context::Context;
use crate::language;
use crate::media;
use crate::numbers;
use crate::phrases::NiriAction;
use crate::plan::{Escalation, Matched, Sources, targets};
use crate::web::{self, SITE_VERBS, open_site, site_target};
use crate::windows::{self, close, switch_to};
use crate::{explain::explained, inapp};
use std::sync::Arc;
use utter_protocol::serde_json::{Value, json};

/// Apply the rules to `text`, which must already be normalised with fillers stripped: the
/// first step of [`plan_steps`], when it plans.
pub fn plan(text: &str, sources: &Sources<'_>) -> Option<Matched> {
    plan_steps(text, sources).ok()?.into_iter().next()
}

/// Apply the rules to `text` (normalised, fillers stripped): the steps of the first rule
/// that plans (one, or two for an agent typed into a terminal), else why none does.
///
/// # Errors
/// The [`Escalation`] of the first rule that recognised the phrase but could not plan it,
/// else [`crate::explain::explain`]'s, else `no_rule`.
pub fn plan_steps(text: &str, sources: &Sources<'_>) -> Result<Vec<Matched>, Escalation> {
    let planned = plan_rules(text, sources);
    match planned {
        Ok(steps) => Ok(steps),
        Err(e) => aimed_at_app(text, sources)
            .or_else(|| named_window_action(text, sources))
            .or_else(|| particle_after(text, sources))
            .or_else(|| language::loose_shortcut(text, sources).map(|m| vec![m]))
            .or_else(|| repeated(text, sources))
            .or_else(|| object_first(text, sources))
            .or_else(|| new_instance(text, sources))
            .or_else(|| entered(sources))
            .or_else(|| named_alone(text, sources))
            .or_else(|| said_here(text, sources))
            .or_else(|| said_after_a_comma(sources))
            .or_else(|| {
                let (m, query) = language::site_query(sources, sources.spoken(text))?;
                // The query read alone, as its own utterance.
                let alone = sources.saying("");
                let command = plan_rules(&query, &alone).is_ok()
                    || language::loose_shortcut(&query, &alone).is_some();
                (!command).then(|| vec![m])
            })
            .ok_or(e),
    }
}

/// Words that take back what follows them: a clause after them is no command.
/// (Normalised words: "don't" is "dont", "do not" holds "not".)
const TAKING_BACK: &[&str] = &["dont", "never", "not", "no"];

/// "show disk usage, df dash h", "stop it, control c": a short description (two to six
/// words), a comma, then the command itself, when the whole planned nothing: the last clause
/// alone, if it acts in the focused window (a key, a terminal command, a scroll). Not when
/// the first part takes it back ("don't, …").
fn said_after_a_comma(sources: &Sources<'_>) -> Option<Vec<Matched>> {
    let (head, tail) = sources.utterance.rsplit_once(',')?;
    let head = crate::text::normalize(head);
    let tail = tail.trim();
    // One word before the comma is a piece of the command the recogniser split off
    // ("reopen, close tab" is a misheard "reopen closed tab"), not a description.
    let head_words = head.split(' ').filter(|w| !w.is_empty()).count();
    // "we ship tomorrow, right?": a one-word question tag asks, it does not command.
    let question_tag = tail.ends_with('?') && !tail.trim_end_matches('?').contains(' ');
    if tail.is_empty()
        || question_tag
        || crate::quotes(&head)
        || !(2..=6).contains(&head_words)
        || head.split(' ').any(|w| TAKING_BACK.contains(&w))
    {
        return None;
    }
    let alone = sources.saying(tail);
    let acts = |steps: &Vec<Matched>| {
        steps
            .iter()
            .all(|s| matches!(s.op, "key" | "terminal" | "scroll"))
    };
    if let Some(steps) = plan_rules(&crate::text::normalize(tail), &alone)
        .ok()
        .filter(acts)
    {
        return Some(steps);
    }
    // "stop it, control c": a chord said alone is pressed.
    let pressed = format!("press {tail}");
    let press = sources.saying(&pressed);
    plan_rules(&crate::text::normalize(&pressed), &press)
        .ok()
        .filter(|steps| steps.iter().all(|s| s.op == "key"))
}

/// Words after a command that only say it is meant for the focused window.
const HERE: &[&str] = &[
    " on this page",
    " on the page",
    " on this site",
    " on this website",
    " in this tab",
    " in this window",
    " in this app",
    " in here",
    " right here",
    " here",
];

/// "zoom in on this page", "scroll down in this window": the command without the words
/// that say where, when what is left acts on the focused window (a key, a scroll, a click)
/// and nothing else planned the whole.
fn said_here(text: &str, sources: &Sources<'_>) -> Option<Vec<Matched>> {
    let rest = HERE.iter().find_map(|here| text.strip_suffix(here))?.trim();
    if rest.is_empty() {
        return None;
    }
    let alone = sources.saying("");
    plan_rules(rest, &alone).ok().filter(|steps| {
        steps.iter().all(|s| {
            matches!(s.op, "key" | "scroll" | "click_element") && s.args.get("app").is_none()
        })
    })
}

/// What Talon's grammar says first, before the verb ("tab close", "window new").
const OBJECTS_FIRST: &[&str] = &[
    "tab",
    "tabs",
    "window",
    "file",
    "page",
    "workspace",
    "column",
];

/// "tab close", "tab restore", "window new", "workspace next": Talon's object-first order,
/// planned as the verb first ("close tab") when that plans and the whole did not. Two or
/// three words only: a longer one is a sentence of its own.
fn object_first(text: &str, sources: &Sources<'_>) -> Option<Vec<Matched>> {
    let (object, rest) = text.split_once(' ')?;
    if !OBJECTS_FIRST.contains(&object) || rest.split(' ').count() > 2 {
        return None;
    }
    let turned = format!("{rest} {object}");
    let alone = sources.saying(&turned);
    plan_rules(&turned, &alone).ok()
}

/// The kinds of application a bare "new" or "another" opens a window of.
const NEW_KINDS: &[&str] = &[
    "terminal",
    "browser",
    "browser window",
    "file manager",
    "editor",
];

/// "new terminal", "another firefox": a bare "new" or "another" before an application or a
/// kind of one, as "open a new terminal" would plan it (a new window of it), when nothing
/// else planned the whole.
fn new_instance(text: &str, sources: &Sources<'_>) -> Option<Vec<Matched>> {
    let rest = ["new", "another"]
        .iter()
        .find_map(|lead| crate::text::strip_word_prefix(text, lead))
        .filter(|rest| !rest.is_empty())?;
    // Only an application by its name or the kinds people open windows of: "new task",
    // "new document" or "new password" name things made inside an application.
    let named = crate::text::strip_word_suffix(rest, "window").map_or(rest, str::trim_end);
    let said = crate::text::compact(named);
    let an_app = sources.apps.all().iter().any(|a| {
        crate::text::name_key(&a.name) == said || crate::text::compact(&a.id.to_lowercase()) == said
    });
    if !an_app && !NEW_KINDS.contains(&named) {
        return None;
    }
    let said = format!("open a new {rest}");
    let alone = sources.saying(&said);
    plan_rules(&said, &alone)
        .ok()
        .filter(|steps| steps.iter().all(|s| s.op == "launch_app"))
}

/// First words after "say", "insert" or "enter" that make no text to type: what is asked,
/// or a thing an application inserts.
const NOT_TEXT: &[&str] = &[
    "it",
    "that",
    "this",
    "what",
    "when",
    "so",
    "again",
    "something",
    "anything",
    "key",
    "tab",
    "space",
    "link",
    "table",
    "image",
    "picture",
    "photo",
    "signature",
    "attachment",
    "file",
    "comment",
    "snippet",
    "code",
    "mode",
    "emoji",
    "new",
    "line",
    "row",
    "column",
    "cursor",
    "page",
    "break",
    "date",
    "time",
    "symbol",
    "character",
    "footnote",
    "header",
    "footer",
];

/// "enter jdoe", "enter john smith", Talon's "say good morning" and "insert maintenance
/// window": text typed as "type …" types it, when the phrase planned nothing else ("enter
/// fullscreen" and a bare "enter" are rules of their own).
fn entered(sources: &Sources<'_>) -> Option<Vec<Matched>> {
    let spoken = crate::inapp::Spoken::new(sources.utterance);
    let after = spoken.after_verb(&["enter", "say", "insert"])?;
    // "say it again", "say what", "let's say 5", "say, are you free": no text to type; "insert
    // link", "enter key": what is named is an application's command, not words.
    let said = crate::text::normalize(sources.utterance);
    if said.starts_with("lets ")
        || said.starts_with("let us ")
        || sources
            .utterance
            .split_whitespace()
            .next()
            .is_some_and(|w| w.ends_with(','))
        || spoken
            .words
            .get(after)
            .is_some_and(|w| NOT_TEXT.contains(&w.text.as_str()))
    {
        return None;
    }
    if after >= spoken.last {
        return None;
    }
    let rest = sources.utterance[spoken.raw_start(after)..spoken.raw_end(spoken.last)].trim();
    // "enter my password", "enter the address": what to enter is described, not said.
    let described = [
        "my", "the", "your", "a", "an", "this", "that", "our", "his", "her",
    ]
    .contains(&spoken.words[after].text.as_str());
    if rest.is_empty() || described {
        return None;
    }
    let said = format!("type {rest}");
    let typing = sources.saying(&said);
    let steps = plan_rules(&crate::text::normalize(&said), &typing).ok()?;
    steps.iter().all(|s| s.op == "type_text").then_some(steps)
}

/// Endings of file names that are also top-level domains: said alone, "main dot rs" is a
/// file, not a site.
const FILE_ENDINGS: &[&str] = &[
    "rs", "md", "py", "sh", "pl", "so", "js", "ts", "cc", "in", "am", "mk", "zip", "sc",
];

/// "xfce terminal please", "firefox": an installed application's whole `Name` said alone
/// focuses or starts it, when the name is a brand rather than a word (its desktop id holds
/// it: `firefox`, `xfce4-terminal` is not, so two words or more) — "files" or "web" alone
/// is no request. Else a catalog site's name alone opens it, when it is a brand the same
/// way (its address holds it: "reddit", "youtube"). An address said in words alone ("claude
/// dot ai") opens it.
fn named_alone(text: &str, sources: &Sources<'_>) -> Option<Vec<Matched>> {
    let said = crate::text::compact(text);
    let app = sources.apps.all().iter().find(|a| {
        crate::text::name_key(&a.name) == said && (text.contains(' ') || a.id_holds(&said))
    });
    if let Some(app) = app {
        return crate::windows::switch_to(&app.name.to_lowercase(), sources).map(|m| vec![m]);
    }
    // "claude dot ai": an address said in words, alone; not a file name ("main dot rs",
    // "readme dot md"), unless the catalog knows the site ("docs dot rs").
    if text.contains(" dot ")
        && let Some(m) = crate::web::address(text)
    {
        let host = m.args["url"]
            .as_str()
            .unwrap_or("")
            .trim_start_matches("https://");
        let ending = host.rsplit('.').next().unwrap_or("");
        if !FILE_ENDINGS.contains(&ending) || sources.catalog.lookup(host).is_some() {
            return Some(vec![m]);
        }
    }
    // "reddit please": a catalog site's own name, when its address holds it (a brand, not a
    // word such as "news" or "maps").
    let site = sources.catalog.lookup(text)?;
    let brand =
        crate::text::name_key(&site.name) == said && site.url.to_lowercase().contains(&said);
    brand.then(|| vec![crate::web::open_site(site, false)])
}

/// The ops a phrase aimed at an application may plan: what acts inside the focused window.
/// A terminal command only where the rest's words as said are found in the utterance (a
/// command is run as said, "ls dash la" written out); not text ("type hello in kitty" is
/// the `aimed_input` rule's, with the words as said).
const IN_APP_OPS: &[&str] = &["key", "click_element", "scroll", "terminal"];

/// "terminal press enter", "in vs code save the file", "scroll down in firefox", "in
/// ghostty run htop", "kitty git status": a phrase
/// that plans nothing as a whole, but names an application (open, installed or with a
/// profile) in one of its [`app_readings`]. The rest is planned as if that application were
/// focused; when it plans only [`IN_APP_OPS`] steps, the plan is the application focused (or
/// started) first, then those steps (a key step also names it, so the action plugin focuses
/// it again). `None` when no reading plans, or the rest names another application.
fn aimed_at_app(text: &str, sources: &Sources<'_>) -> Option<Vec<Matched>> {
    if let Some(steps) = aimed_playback(text, sources) {
        return Some(steps);
    }
    for (name, rest, app_last) in app_readings(text) {
        let Some(focus) = switch_to(&name, sources) else {
            continue;
        };
        // "reload firefox": the application last, with no article before it ("paste the
        // code" is no VS Code), named by its own name or id (not a word of its
        // description: "copy citation" is no Zotero), and open.
        if app_last {
            let said = crate::text::compact(&name);
            // Its own name that its desktop id holds too (a brand, as "firefox" in
            // `firefox`; not a word such as "files" for `org.gnome.Nautilus`).
            let own_name = sources.apps.all().iter().any(|a| {
                (crate::text::name_key(&a.name) == said || a.id.to_lowercase() == said)
                    && a.id_holds(&said)
            });
            let article = rest.rsplit(' ').next().is_some_and(|w| {
                matches!(
                    w,
                    "the" | "my" | "a" | "an" | "this" | "that" | "your" | "our"
                )
            });
            let open = brought_up(&focus).is_some_and(|id| {
                sources
                    .context
                    .is_some_and(|c| c.app_ids.iter().any(|a| a.eq_ignore_ascii_case(id)))
            });
            if !own_name || article || !open {
                continue;
            }
        }
        let Some(app_id) = brought_up(&focus).map(str::to_owned) else {
            continue;
        };
        let mut context = sources.context.cloned().unwrap_or_default();
        context.focused_app_id = Some(app_id.clone());
        // The rest's words as said, for a terminal command ("in ghostty run ls dash la"),
        // with the symbols after its last word (they are no words: "~", ".."): to the
        // utterance's end when the rest ends it, else to the word that follows it ("run cd
        // .. in foot": up to "in").
        let raw = sources.spoken(text);
        let said = language::raw_part(raw, &rest).map_or("", |part| {
            let start = part.as_ptr() as usize - raw.as_ptr() as usize;
            let end = start + part.len();
            if text.ends_with(rest.as_str()) {
                return raw[start..].trim();
            }
            let Some(next) = text
                .strip_prefix(rest.as_str())
                .and_then(|after| after.split_whitespace().next())
            else {
                return part;
            };
            let spoken = crate::inapp::Spoken::new(raw);
            spoken
                .words
                .iter()
                .find(|w| w.raw.start >= end && w.text == next)
                .map_or(part, |w| raw[start..w.raw.start].trim())
        });
        let aimed = Sources {
            context: Some(&context),
            utterance: said,
            ..*sources
        };
        let Ok(steps) = plan_rules(&rest, &aimed).or_else(|e| {
            language::loose_shortcut(&rest, &aimed)
                .map(|m| vec![m])
                .ok_or(e)
        }) else {
            continue;
        };
        if steps.is_empty()
            || !steps.iter().all(|m| IN_APP_OPS.contains(&m.op))
            || said.is_empty() && steps.iter().any(|m| m.op == "terminal")
        {
            continue;
        }
        // A shortcut by name needs the application's own profile, or an installed entry
        // with a window of its own: otherwise the chord is a common one (ctrl+z, ctrl+c,
        // ctrl+s), which a program running in a terminal (vim's entry says Terminal=true)
        // takes as suspend, interrupt or freeze. A key the person names ("press enter")
        // is theirs.
        let desktop_id = focus.args["app"].as_str().unwrap_or("");
        let profiled = sources.profiles.for_app_id(&app_id).is_some()
            || sources.profiles.for_app_id(desktop_id).is_some()
            || sources
                .installed_for(&app_id)
                .or_else(|| sources.installed_for(desktop_id))
                .is_some_and(crate::apps::AppEntry::is_graphical);
        if !profiled
            && steps
                .iter()
                .any(|m| matches!(m.rule, "shortcut" | "loose_shortcut"))
        {
            continue;
        }
        // Two applications named ("save in vs code in firefox"): which one is meant is not
        // known.
        if names_an_app(&rest, &focus, sources) {
            return None;
        }
        // Keys aimed at an open window focus it themselves (their `app`): no step for it.
        let open = sources
            .context
            .is_some_and(|c| c.app_ids.iter().any(|id| id.eq_ignore_ascii_case(&app_id)));
        let mut plan = if open && steps.iter().all(|m| m.op == "key") {
            Vec::new()
        } else {
            vec![focus]
        };
        for mut step in steps {
            if step.op == "key"
                && let Value::Object(map) = &mut step.args
            {
                map.insert("app".into(), Value::String(app_id.clone()));
            }
            plan.push(step);
        }
        return Some(plan);
    }
    None
}

/// "put netflix on", "pull my calendar up", "fire steam up": a verb whose particle
/// ("on", "up") was said after what it opens is the verb said whole ("put on netflix").
fn particle_after(text: &str, sources: &Sources<'_>) -> Option<Vec<Matched>> {
    web::SITE_VERBS
        .iter()
        .chain(crate::plan::APP_VERBS)
        .filter_map(|verb| verb.split_once(' '))
        .filter(|(_, particle)| matches!(*particle, "up" | "on"))
        .find_map(|(verb, particle)| {
            let middle = text
                .strip_prefix(verb)?
                .strip_prefix(' ')?
                .strip_suffix(particle)?
                .strip_suffix(' ')?
                .trim();
            if middle.is_empty() {
                return None;
            }
            plan_rules(&format!("{verb} {particle} {middle}"), sources).ok()
        })
}

/// Whether `name` is the application's own name for the window `app_id`: its `app_id` (or
/// the last part of a reverse-DNS one), its installed `Name` or a word of it ("obs" of "OBS
/// Studio"), or its profile's name or aliases; not a description a fuzzy match found.
fn own_name(name: &str, app_id: &str, sources: &Sources<'_>) -> bool {
    let compact = |text: &str| crate::text::compact(&crate::text::normalize(text));
    let key = compact(name);
    let last = app_id.rsplit('.').next().unwrap_or(app_id);
    key == compact(app_id)
        || key == compact(last)
        || sources.installed_for(app_id).is_some_and(|a| {
            compact(&a.name) == key
                || a.name
                    .split_whitespace()
                    .any(|w| w.chars().count() >= 3 && compact(w) == key)
        })
        || sources
            .profiles
            .for_app_id(app_id)
            .is_some_and(|p| compact(&p.name) == key || p.spoken.iter().any(|s| compact(s) == key))
}

/// The longest name [`named_window_action`] looks for, in words.
const MAX_WINDOW_NAME: usize = 3;

/// "move spotify to workspace four", "fullscreen blender", "put discord on the left
/// monitor": a compositor action on a window that names an open window's application where
/// "this window" would stand. The action is planned for "this window", and the named window
/// is focused first unless it is the focused one. Only actions of the compositor (`niri`
/// steps), only open windows (a name of something not running is no window to move), only
/// names (a kind, "the document", names none), the longest name first.
fn named_window_action(text: &str, sources: &Sources<'_>) -> Option<Vec<Matched>> {
    let context = sources.context?;
    let words: Vec<&str> = text.split(' ').filter(|w| !w.is_empty()).collect();
    let n = words.len();
    let focused = |app_id: &str| {
        context
            .focused_app_id
            .as_deref()
            .is_some_and(|f| f.eq_ignore_ascii_case(app_id))
    };
    let open = |app_id: &str| {
        focused(app_id)
            || context
                .app_ids
                .iter()
                .any(|id| id.eq_ignore_ascii_case(app_id))
    };
    let alone = sources.saying("");
    for k in (1..=MAX_WINDOW_NAME.min(n.saturating_sub(1))).rev() {
        for i in 0..=n - k {
            let name = words[i..i + k].join(" ");
            // A kind names the open window of that kind ("put the pdf on workspace two");
            // a kind with no window of it open is no window's name ("the top of the
            // document").
            let app_id = if windows::says_a_kind(&name, sources) {
                let Some(app_id) = windows::open_window_of_kind(&name, sources) else {
                    continue;
                };
                app_id
            } else {
                let Some(focus) = switch_to(&name, sources) else {
                    continue;
                };
                let Some(app_id) = brought_up(&focus)
                    .map(str::to_owned)
                    .filter(|id| open(id) && own_name(&name, id, sources))
                else {
                    continue;
                };
                app_id
            };
            let said = [&words[..i], &["this", "window"][..], &words[i + k..]]
                .concat()
                .join(" ");
            let Ok(steps) = plan_rules(&said, &alone) else {
                continue;
            };
            // A window action, or scrolling that window ("scroll the pdf down").
            let window_steps =
                steps.iter().all(|m| m.op == "niri") || steps.iter().all(|m| m.op == "scroll");
            if steps.is_empty() || !window_steps {
                continue;
            }
            if focused(&app_id) {
                return Some(steps);
            }
            return Some(
                std::iter::once(windows::focus_window(&app_id))
                    .chain(steps)
                    .collect(),
            );
        }
    }
    None
}

/// "pause haruna", "haruna next", "opera, play the video": a playback command and, before
/// or after it, an installed player (or a browser, whose videos its own MPRIS player plays)
/// by its name: the command with that name as its player.
fn aimed_playback(text: &str, sources: &Sources<'_>) -> Option<Vec<Matched>> {
    let words: Vec<&str> = text.split(' ').filter(|w| !w.is_empty()).collect();
    let n = words.len();
    for k in 1..=4.min(n.saturating_sub(1)) {
        for (name, rest) in [
            (words[..k].join(" "), words[k..].join(" ")),
            (words[n - k..].join(" "), words[..n - k].join(" ")),
        ] {
            let Some(mut step) =
                crate::media::plan(&rest).filter(|m| m.args.get("player").is_none())
            else {
                continue;
            };
            // "in spotify, next song", "on vlc pause": where, then what.
            let name = ["in ", "on "]
                .iter()
                .find_map(|p| name.strip_prefix(p))
                .unwrap_or(&name);
            let name = ["the ", "my "]
                .iter()
                .find_map(|a| name.strip_prefix(a))
                .unwrap_or(name)
                .to_owned();
            let player = sources.apps.find(&name).filter(|a| {
                crate::media::plays(a) || a.categories.iter().any(|c| c == "WebBrowser")
            });
            if let Some(app) = player {
                let mpris = crate::media::mpris_name(&app, &name);
                step.message = format!("{} on {name}", step.message);
                step.args["player"] = Value::String(mpris);
                return Some(vec![step]);
            }
        }
    }
    None
}

/// The ways `text` may name an application and what to do in it, as (name, rest), the name
/// without a leading "the"/"my": "in <app> <rest>", "<rest> in <app>" (also "on", "into",
/// "inside"), "<app> <rest>", and last "<rest> <app>" (two words at most); names of at most
/// four words.
fn app_readings(text: &str) -> Vec<(String, String, bool)> {
    const MAX: usize = 4;
    let words: Vec<&str> = text.split(' ').filter(|w| !w.is_empty()).collect();
    let n = words.len();
    let preposition = |w: &str| matches!(w, "in" | "on" | "inside" | "into");
    let mut readings: Vec<(String, String)> = Vec::new();
    if n < 2 {
        return Vec::new();
    }
    if preposition(words[0]) {
        for k in 1..=MAX.min(n.saturating_sub(2)) {
            readings.push((words[1..1 + k].join(" "), words[1 + k..].join(" ")));
        }
    }
    for cut in 1..n - 1 {
        if preposition(words[cut]) && n - cut - 1 <= MAX {
            readings.push((words[cut + 1..].join(" "), words[..cut].join(" ")));
        }
    }
    for k in 1..=MAX.min(n - 1) {
        readings.push((words[..k].join(" "), words[k..].join(" ")));
    }
    let ordinary = readings.len();
    // "reload firefox", "save vs code": the command, then the application (two words at
    // most), tried last (and held to more: see `aimed_at_app`).
    for k in 1..=2.min(n - 1) {
        readings.push((words[n - k..].join(" "), words[..n - k].join(" ")));
    }
    readings
        .into_iter()
        .enumerate()
        // The application last is named bare ("paste the code" names code, not VS Code).
        .filter(|(i, (name, _))| {
            *i < ordinary || !(name.starts_with("the ") || name.starts_with("my "))
        })
        .map(|(i, (name, rest))| {
            let name = ["the ", "my "]
                .iter()
                .find_map(|a| name.strip_prefix(a))
                .map_or(name.clone(), str::to_owned);
            (name, rest, i >= ordinary)
        })
        .filter(|(name, rest, _)| !name.is_empty() && !rest.is_empty())
        .collect()
}

/// The application a step that brings one up names: its `StartupWMClass` (the window's
/// app_id), else its `app`, else its `app_id`.
fn brought_up(step: &Matched) -> Option<&str> {
    ["wm_class", "app", "app_id"]
        .iter()
        .find_map(|k| step.args.get(*k).and_then(Value::as_str))
}

/// Whether `rest` itself names an application in one of its [`app_readings`] other than
/// the one `focus` brings up ("in mullvad browser close the browser tab" names one).
fn names_an_app(rest: &str, focus: &Matched, sources: &Sources<'_>) -> bool {
    let id = |m: &Matched| brought_up(m).unwrap_or("").to_owned();
    let ours = id(focus);
    // The same application under its desktop id or its window's app_id (one profile).
    let same = |other: &str| {
        other.eq_ignore_ascii_case(&ours)
            || sources
                .profiles
                .for_app_id(other)
                .zip(sources.profiles.for_app_id(&ours))
                .is_some_and(|(a, b)| a.id == b.id)
    };
    app_readings(rest)
        .iter()
        .any(|(name, _, _)| switch_to(name, sources).is_some_and(|other| !same(&id(&other))))
}

/// "undo three times", "next tab twice", "backspace five times", "delete the last two
/// words", "go back two pages", "move down four lines": a phrase that plans one key press,
/// said with how many times (2 to [`crate::inapp::MAX_REPEAT`]), or with a count of what
/// the key moves over ([`COUNTED_UNITS`]): that press repeated. A key said by its name
/// alone ("backspace", "arrow up") counts here as if pressed ("press backspace"). More
/// than the cap is refused, not cut: "undo fifty times" done twenty times is neither what
/// was asked nor nothing.
fn repeated(text: &str, sources: &Sources<'_>) -> Option<Vec<Matched>> {
    let canonical = numbers::digits(text);
    let words: Vec<&str> = canonical.split(' ').collect();
    let (times, rest) = match crate::inapp::repetition(&words).ok()? {
        (times, rest) if rest.len() < words.len() && !rest.is_empty() => (times, rest.join(" ")),
        _ => counted_units(&words)?,
    };
    if !(2..=crate::inapp::MAX_REPEAT).contains(&times) {
        return None;
    }
    // "undo that three times" is the application's undo chord, three times; the journal's
    // undo is counted as "undo the last three".
    let rest = if journal_undo(&rest).is_some() {
        "undo".to_owned()
    } else {
        rest
    };
    let one = |text: &str| -> Option<Matched> {
        let steps = plan_rules(text, sources)
            .ok()
            .or_else(|| language::loose_shortcut(text, sources).map(|m| vec![m]))?;
        let [step]: [Matched; 1] = steps.try_into().ok()?;
        Some(step)
    };
    let pressed =
        || inapp::plan(&format!("press {rest}")).filter(|m| m.op == "key" && m.rule == "key");
    let mut step = one(&rest).or_else(pressed)?;
    if step.op == "niri" {
        // "go two columns to the right", "move this column three workspaces down": a
        // move or focus along a direction, that many times (niri takes no count).
        return directional(&step).then(|| vec![step; times as usize]);
    }
    if step.op != "key" || step.args.get("repeat").is_some() {
        return None;
    }
    step.args["repeat"] = json!(times);
    step.message = format!("{} ({times} times)", step.message);
    Some(vec![step])
}

/// True for a niri step that goes one place along a direction (`focus-column-right`,
/// `move-column-to-workspace-down`): the only compositor steps a count repeats.
fn directional(step: &Matched) -> bool {
    let command = step.args["command"].as_str().unwrap_or("");
    step.args.get("args").is_none()
        && !step.confirm
        && ["-left", "-right", "-up", "-down"]
            .iter()
            .any(|way| command.ends_with(way))
}

/// What a key or a compositor move goes over, said with a count ("two words", "three
/// columns"), singular and plural.
const COUNTED_UNITS: &[(&str, &str)] = &[
    ("column", "columns"),
    ("workspace", "workspaces"),
    ("window", "windows"),
    ("monitor", "monitors"),
    ("word", "words"),
    ("line", "lines"),
    ("page", "pages"),
    ("character", "characters"),
    ("letter", "letters"),
    ("tab", "tabs"),
    ("paragraph", "paragraphs"),
];

/// "delete the last 2 words" → (2, "delete the last word"): a count said before one of
/// [`COUNTED_UNITS`] (digits, as [`numbers::digits`] writes them), and the phrase for one.
fn counted_units(words: &[&str]) -> Option<(u32, String)> {
    let at = words.windows(2).position(|pair| {
        pair[0].parse::<u32>().is_ok() && COUNTED_UNITS.iter().any(|(_, many)| *many == pair[1])
    })?;
    let times: u32 = words[at].parse().ok()?;
    let one = COUNTED_UNITS
        .iter()
        .find(|(_, many)| *many == words[at + 1])
        .map(|(one, _)| *one)?;
    let mut phrase: Vec<&str> = words[..at].to_vec();
    // "the last two words" is "the last word"; "two words back" is "a word back".
    if !matches!(phrase.last(), Some(&("last" | "previous" | "next"))) {
        phrase.push("a");
    }
    phrase.push(one);
    phrase.extend_from_slice(&words[at + 2..]);
    Some((times, phrase.join(" ")))
}

/// [`plan_steps`] without the reading of [`aimed_at_app`].
fn plan_rules(text: &str, sources: &Sources<'_>) -> Result<Vec<Matched>, Escalation> {
    let one = |m: Matched| Ok(vec![m]);
    if text.is_empty() {
        return Err(Escalation {
            reason: "no_rule",
            message: "nothing was said".into(),
        });
    }
    let raw = sources.spoken(text);
    let mut pending: Option<Escalation> = None;
    if let Some(m) = language::url(raw) {
        return one(m);
    }
    // The focused application's own phrase decides first (Talon's per-app context).
    // "undo that" reverses what the last command did (the runner's journal), before the
    // focused application's phrases ("undo" alone still presses the application's own
    // chord, and so does "undo that" when nothing recent is journaled: `otherwise`).
    // "start dictation", "stop dictation": the runner's mode.
    if let Some(m) = crate::dictation::switch(text) {
        return one(m);
    }
    if let Some(mut m) = journal_undo(text).or_else(|| regretted_undo(text, sources)) {
        // With nothing recent in the journal, the application in front of the person is
        // what "undo that" means: its own undo chord, when it has one.
        // (Planned as "undo" said alone: the regret that made "nope, undo" the journal's
        // is not said again.)
        let alone = sources.saying("undo");
        if m.args["count"] == 1
            && let Ok(chord) = plan_rules("undo", &alone)
            && let [key] = chord.as_slice()
            && key.op == "key"
        {
            m.args["otherwise"] =
                utter_protocol::serde_json::json!({"op": key.op, "args": key.args});
        }
        return one(m);
    }
    if let Some(m) = language::focused_phrase(text, sources) {
        return one(m);
    }
    if let Some(steps) = language::find_in_page(sources, text, raw) {
        return Ok(steps);
    }
    if let Some(steps) = language::go_to_line(text, sources) {
        return Ok(steps);
    }
    if let Some(steps) = language::quick_open(text, sources) {
        return Ok(steps);
    }
    if let Some(found) = plan_head(text, sources, raw, &mut pending) {
        return one(found);
    }
    match language::agent(text, sources) {
        Some(Ok(steps)) => return Ok(steps),
        Some(Err(e)) => {
            pending.get_or_insert(e);
        }
        None => {}
    }
    if let Some(found) = plan_tail(text, sources, raw, &mut pending) {
        return one(found);
    }
    if let Some(steps) = language::chat_message(sources, raw) {
        return Ok(steps);
    }
    Err(pending
        .or_else(|| too_often(text, sources))
        .or_else(|| explained(text, sources))
        .unwrap_or_else(|| Escalation {
            reason: "no_rule",
            message: format!("no rule matched \"{}\"", raw.trim()),
        }))
}

/// Words of regret that open an utterance ("nope, undo", "oops, undo"): what just happened
/// was not wanted.
const REGRETS: &[&str] = &["nope", "oops", "whoops", "no", "nah", "damn", "argh", "ugh"];

/// "nope, undo", "oops undo": a plain "undo" said right after regret is about what was just
/// done, so it is the journal's undo of the last command (which presses the focused
/// application's own chord when nothing recent is journaled), as "undo that" is.
fn regretted_undo(text: &str, sources: &Sources<'_>) -> Option<Matched> {
    if text != "undo" {
        return None;
    }
    let said = crate::text::normalize(sources.utterance);
    let first = said.split(' ').next()?;
    if !REGRETS.contains(&first) {
        return None;
    }
    journal_undo("undo that")
}

/// "undo that", "scratch that", "undo the last two (commands)": op `undo {count}`, which
/// the runner turns into the inverse steps of the last `count` commands it ran. Plain
/// "undo" ("undo three times") is the focused application's own undo chord, as before.
fn journal_undo(text: &str) -> Option<Matched> {
    // What was done, said as "that" or as the assistant's own doing.
    const THAT: &[&str] = &[
        "that",
        "this",
        "it",
        "that last command",
        "what you did",
        "what you just did",
        "what you just did there",
        "your last command",
        "your last action",
        "the last command",
        "the last action",
        "the last thing",
        "the last step",
        "the last thing you did",
        "last command",
        "last action",
    ];
    // Said without "undo": ways back to where things were.
    const BACK: &[&str] = &[
        "scratch that",
        "scratch this",
        "take that back",
        "take it back",
        "revert that",
        "reverse that",
        "put it back",
        "put it back the way it was",
        "put that back",
        "put things back",
        "put everything back",
        "put it back how it was",
        "take me back",
        "take me back to where i was",
        "go back to where i was",
        "back to where i was",
        // A learner's passive ("make it undone", German "rückgängig machen").
        "make it undone",
        "make that undone",
        "make this undone",
    ];
    let canonical = numbers::digits(text);
    let said = canonical.trim();
    let count = if BACK.contains(&said)
        || said
            .strip_prefix("undo ")
            .is_some_and(|rest| THAT.contains(&rest))
    {
        1
    } else {
        // "undo the last 2", "undo your last 3 commands", "undo the last 2 things you did".
        let rest = said.strip_prefix("undo ")?;
        let rest = ["the last ", "your last ", "last ", "my last "]
            .iter()
            .find_map(|lead| rest.strip_prefix(lead))?;
        let rest = rest
            .strip_suffix(" you did")
            .or_else(|| rest.strip_suffix(" you just did"))
            .unwrap_or(rest);
        let mut words = rest.split(' ');
        let number = words.next()?;
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        // Out of range ("undo the last 0", "the last 50"): the runner says what it takes.
        let n: usize = number.parse().unwrap_or(usize::MAX);
        match (words.next(), words.next()) {
            (
                None
                | Some("commands" | "actions" | "things" | "steps" | "command" | "action" | "thing"),
                None,
            ) => {}
            _ => return None,
        }
        n
    };
    Some(Matched {
        rule: "undo",
        op: "undo",
        args: utter_protocol::serde_json::json!({"count": count}),
        message: if count == 1 {
            "undo the last command".to_owned()
        } else {
            format!("undo the last {count} commands")
        },
        confirm: false,
    })
}

/// "undo 25 times": a step that plans, asked more often than a step is repeated
/// ([`crate::inapp::MAX_REPEAT`]; [`repeated`] refuses it rather than cut it): why nothing
/// planned, as `bad_number`.
fn too_often(text: &str, sources: &Sources<'_>) -> Option<Escalation> {
    let canonical = numbers::digits(text);
    let words: Vec<&str> = canonical.split(' ').collect();
    let (times, rest) = crate::inapp::repetition(&words).ok()?;
    if times <= crate::inapp::MAX_REPEAT || rest.is_empty() {
        return None;
    }
    let rest = rest.join(" ");
    plan_rules(&rest, sources).ok()?;
    Some(Escalation {
        reason: "bad_number",
        message: format!(
            "\"{rest}\" is repeated at most {} times, not {times}; say a smaller number",
            crate::inapp::MAX_REPEAT
        ),
    })
}

/// A step or an escalation, noting the escalation to give if no later rule plans.
fn settle(
    outcome: Option<Result<Matched, Escalation>>,
    pending: &mut Option<Escalation>,
) -> Option<Matched> {
    match outcome? {
        Ok(m) => Some(m),
        Err(e) => {
            pending.get_or_insert(e);
            None
        }
    }
}

/// The rules before the agent rule, in order (see the module docs).
fn plan_head(
    text: &str,
    sources: &Sources<'_>,
    raw: &str,
    pending: &mut Option<Escalation>,
) -> Option<Matched> {
    if let Some(m) = media::plan_here(text, sources) {
        return Some(m);
    }
    // "show me my pull requests on github": a page of the site, not a search on it.
    for target in targets(text, SITE_VERBS) {
        if let Some((site, url)) = sources.catalog.lookup_page(target) {
            return Some(crate::web::open_page(site, url));
        }
        // "open r studio": an application's name said in two words, not r/studio.
        if let Some(m) = crate::web::subreddit(target, sources.catalog)
            && !sources
                .catalog
                .lookup("reddit")
                .is_some_and(|reddit| crate::web::an_app_is_named(target, reddit, sources))
        {
            return Some(m);
        }
    }
    // "google drive", "google maps": a site's whole name, said alone, is that site, not a
    // search of its first word's site for the rest.
    if text.contains(' ')
        && let Some((site, new_tab)) = site_target(text, sources.catalog)
        && !crate::web::an_app_is_named(text, site, sources)
    {
        return Some(open_site(site, new_tab));
    }
    if let Some(m) = settle(language::search(sources, raw), pending) {
        return Some(m);
    }
    // A learner's "go on google scholar" (German "geh auf"): a site of the catalog right
    // after "go on", as written ("go on, indeed" is "continue").
    if let Some(target) = text.strip_prefix("go on ")
        && raw.trim_start().to_lowercase().starts_with("go on ")
        && let Some((site, new_tab)) = site_target(target, sources.catalog)
        && !crate::web::an_app_is_named(target, site, sources)
    {
        return Some(open_site(site, new_tab));
    }
    for target in targets(text, SITE_VERBS) {
        if let Some((site, new_tab)) = site_target(target, sources.catalog) {
            // "show me my calendar" with a Calendar installed: the application, not Google
            // Calendar, unless the site's own name was said.
            if !new_tab && crate::web::an_app_is_named(target, site, sources) {
                continue;
            }
            return Some(open_site(site, new_tab));
        }
    }
    let canonical = numbers::digits(text);
    let niri = |rule: &'static str, (action, n): (Arc<NiriAction>, Option<u32>)| Matched {
        rule,
        op: "niri",
        args: action.step_args(n),
        message: action.describe(n),
        // A binding of a destructive action asks as the curated phrase for it does.
        confirm: action.confirm || sources.curated.confirms(&action.command),
    };
    if let Some(found) = sources.curated.table.lookup(&canonical) {
        return Some(niri("compositor", found));
    }
    if Context::may_be_niri(sources.context)
        && let Some(found) = sources.binds.lookup(&canonical)
    {
        return Some(niri("niri_bind", found));
    }
    if let Some(m) = crate::space::plan(text) {
        return Some(m);
    }
    if let Some(m) = settle(language::shortcut(text, sources), pending) {
        return Some(m);
    }
    None
}

/// The rules after the agent rule, in order.
fn plan_tail(
    text: &str,
    sources: &Sources<'_>,
    raw: &str,
    pending: &mut Option<Escalation>,
) -> Option<Matched> {
    for target in targets(text, &sources.curated.focus_verbs) {
        if let Some(matched) = switch_to(target, sources) {
            return Some(matched);
        }
    }
    // "switch to github": no application or window is called so, the site is (its tab is
    // focused when a browser shows it, else it opens).
    for target in targets(text, &sources.curated.focus_verbs) {
        if let Some((site, new_tab)) = site_target(target, sources.catalog) {
            return Some(open_site(site, new_tab));
        }
    }
    for target in targets(text, &sources.curated.close_verbs) {
        if let Some(matched) = close(target, sources) {
            return Some(matched);
        }
    }
    if let Some(m) = windows::launch(text, sources) {
        return Some(m);
    }
    if let Some(m) = windows::check(text, sources) {
        return Some(m);
    }
    if let Some(m) = settle(language::terminal(sources, raw), pending) {
        return Some(m);
    }
    if let Some(m) = language::aimed_input(text, sources, raw) {
        return Some(m);
    }
    if let Some(matched) = inapp::plan(raw) {
        return Some(matched);
    }
    targets(text, SITE_VERBS).find_map(web::address)
}

#[cfg(test)]
mod tests;
