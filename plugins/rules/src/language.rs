//! The rules that read the focused application: web addresses said in full, searches,
//! application shortcuts and editing keys through profiles ([`crate::profiles`]), coding
//! agents, terminal commands, and keys or typing aimed at a named application. Each is
//! called by [`crate::rules::plan_steps`] at its place in the rule order.
//!
//! Every value of a step comes from the utterance (the user's words), a profile, the site
//! catalog or `data/commands.toml`; the context contributes the focused window's `app_id`,
//! which only *selects* the profile. When a rule recognises the phrase but the desktop is
//! not in a state to do it ("new tab" with no browser focused, "run ls" with no terminal),
//! it answers an [`Escalation`] naming why, instead of a step.

use crate::inapp::Spoken;
use crate::plan::{Escalation, Matched, Sources};
use crate::profiles::{Command, Kind, Profile, known_op};
use crate::sites::fill_template;
use crate::text::{compact, is_hostname, normalize, strip_word_prefix, strip_word_suffix};
use utter_protocol::serde_json::{Value, json};

/// The profile of the focused window, if it has one.
pub fn focused_profile<'a>(sources: &Sources<'a>) -> Option<&'a Profile> {
    let app_id = sources.context?.focused_app_id.as_deref()?;
    sources.profile_of(app_id)
}

/// What opens a message said to be sent, longest first.
const SEND_LEADS: &[&str] = &[
    "send a message saying",
    "send the message",
    "send a message",
    "send message",
    "reply with",
    "reply saying",
    "send",
];

/// Rule `chat_message`, tried last: "send sure, I can take it by Thursday" in a messenger
/// (a focused window of an application whose desktop entry's categories say
/// `InstantMessaging` or `Chat`) types the message and presses Return. "send" followed by
/// what names a thing ("send the file", "send it", "send this window …") is no message.
pub fn chat_message(sources: &Sources<'_>, raw: &str) -> Option<Vec<Matched>> {
    let focused = sources.context?.focused_app_id.as_deref()?;
    let messenger = sources.installed_for(focused).is_some_and(|app| {
        app.categories
            .iter()
            .any(|c| c == "InstantMessaging" || c == "Chat")
    });
    if !messenger {
        return None;
    }
    let said = raw
        .trim()
        .trim_start_matches(|c: char| !c.is_alphanumeric());
    let lead = SEND_LEADS.iter().find(|lead| {
        said.get(..lead.len())
            .is_some_and(|l| l.eq_ignore_ascii_case(lead))
            && said[lead.len()..].starts_with([' ', ','])
    })?;
    let message = said[lead.len()..]
        .trim_start_matches([' ', ',', ':'])
        .trim();
    // What follows names or places the message rather than saying it ("send the link",
    // "send me the link", "send bob a message" is caught by "a" later, "send now", "reply
    // with the password"): no message to type.
    let first = message.split_whitespace().next()?.to_ascii_lowercase();
    if [
        "the",
        "this",
        "that",
        "these",
        "those",
        "it",
        "them",
        "a",
        "an",
        "my",
        "your",
        "our",
        "to",
        "me",
        "him",
        "her",
        "us",
        "you",
        "now",
        "later",
        "anyway",
        "and",
        "out",
        "over",
        "back",
        "off",
        "for",
        "all",
        "everyone",
        "everybody",
        "again",
        "when",
        "once",
        "after",
        "before",
        "soon",
    ]
    .contains(&first.as_str())
    {
        return None;
    }
    // "send bob a message", "send alice the file": a person, then what is sent.
    let words: Vec<String> = message
        .split_whitespace()
        .map(str::to_ascii_lowercase)
        .collect();
    if matches!(
        words.get(1).map(String::as_str),
        Some("a" | "an" | "the" | "my" | "this")
    ) {
        return None;
    }
    let text = crate::inapp::written_marks(message);
    if text.is_empty() || text.chars().any(char::is_control) {
        return None;
    }
    Some(vec![
        Matched {
            rule: "chat_message",
            op: "type_text",
            message: format!("type the message {:?}", text),
            args: json!({"text": text}),
            confirm: false,
        },
        Matched {
            rule: "chat_message",
            op: "key",
            message: "press Return to send it".into(),
            args: json!({"chord": "Return"}),
            confirm: false,
        },
    ])
}

/// Verbs that open an address (the site verbs without "show", which also focuses, and
/// with "load").
const URL_VERBS: &[&str] = &[
    "navigate to",
    "take me to",
    "browse to",
    "open up",
    "go to",
    "goto",
    "visit",
    "open",
    "load",
];

/// Rule `open_url`: "open `https://github.com/rust-lang/rust`", "go to example.com/docs": an
/// address with a scheme, a path, a query or a `www.`, kept exactly as said (its case, its
/// path), as `ensure_url {url, site}` with the host as `site`. A bare host name is left to
/// the catalog and the host-name rule.
pub fn url(raw: &str) -> Option<Matched> {
    let spoken = Spoken::new(raw);
    let after = spoken.after_verb(URL_VERBS)?;
    if after >= spoken.last {
        return None;
    }
    // One word of the utterance, which may have given several normalised words.
    let first = &spoken.words[after].raw;
    if !spoken.words[after..spoken.last]
        .iter()
        .all(|w| &w.raw == first)
    {
        // "go to reddit dot com slash r slash linux": the address said in words.
        let verb = spoken.raw[..spoken.raw_start(after)].trim();
        let words: Vec<&str> = spoken.words[after..spoken.last]
            .iter()
            .map(|w| w.text.as_str())
            .collect();
        let address = crate::text::spoken_address(&words)?;
        return url(&format!("{verb} {address}"));
    }
    let token = raw[first.clone()]
        .trim_matches(|c: char| matches!(c, '"' | '\'' | '<' | '>' | '(' | ')' | ',' | '!' | '?'))
        .trim_end_matches(['.', ';', ':']);
    let lower = token.to_ascii_lowercase();
    let (url, rest) = if let Some(rest) = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"))
    {
        (token.to_owned(), rest.to_owned())
    } else if lower.contains("://") {
        return None;
    } else {
        (format!("https://{token}"), lower.clone())
    };
    // No backslash (browsers read it as a slash, so "evil.com\@good.com" is evil.com), no
    // user name or password before the host, nothing invisible.
    if token.contains('\\') || token.chars().any(|c| c.is_control() || is_invisible(c)) {
        return None;
    }
    let host_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let host = &rest[..host_end];
    if host.contains('@') {
        return None;
    }
    let host = host.split(':').next().unwrap_or(host);
    let said_more = host_end < rest.len() || lower.contains("://") || host.starts_with("www.");
    if !said_more || !is_hostname(host) || url.chars().any(char::is_control) {
        return None;
    }
    Some(Matched {
        rule: "open_url",
        op: "ensure_url",
        message: format!("open {url}"),
        args: json!({"url": url, "site": host}),
        confirm: false,
    })
}

/// Unicode format characters that change how text reads without showing (bidirectional
/// overrides and isolates, zero-width joiners and spaces, the byte-order mark).
pub fn is_invisible(c: char) -> bool {
    matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

/// Verbs of a search, longest first; the query follows.
const SEARCH_VERBS: &[&str] = &[
    "search the web for",
    "search the internet for",
    "search online for",
    "do a web search for",
    "web search for",
    "web search",
    "search google for",
    "google search for",
    "google search",
    "search for",
    "search",
    "google for",
    "google",
    "look up",
    "lookup",
    "find me",
];

/// Verbs that search a site named after "on" ("find cat videos on youtube", "play lofi on
/// youtube"): only with a site of the catalog that has a search.
const SITE_SEARCH_VERBS: &[&str] = &[
    "look for",
    "listen to",
    "search for",
    "find",
    "play",
    "watch",
    "show me",
];

/// Words that end an utterance asking to search for what came before them ("what does
/// ephemeral mean, look it up").
const TRAILING_SEARCH: &[&str] = &[
    "look it up",
    "look that up",
    "search for it",
    "search for that",
    "google it",
    "google that",
];

/// Rule `search`: "search youtube for cats", "search for rust on github", "look up the
/// weather", "google rust traits": `open_url` of a search template with the query
/// form-encoded. A named site uses the catalog's template; "google" Google's; otherwise the
/// focused browser's profile, else `data/commands.toml`'s engine (or `UTTER_SEARCH_URL`).
pub fn search(sources: &Sources<'_>, raw: &str) -> Option<Result<Matched, Escalation>> {
    let spoken = Spoken::new(raw);
    if let Some(found) = site_search(sources, &spoken) {
        return Some(found);
    }
    let after = spoken.after_verb(SEARCH_VERBS)?;
    let verb = spoken.text(spoken.first)[..after - spoken.first].join(" ");
    let words = spoken.text(after);

    // "search youtube for cats": a site between the verb and "for".
    if verb == "search" {
        if let Some(for_at) = words.iter().position(|w| *w == "for") {
            let site_words = words[..for_at].join(" ");
            if let Some(site) = sources.catalog.lookup_search(&site_words) {
                let start = after + for_at + 1;
                return on_site(&spoken, start, spoken.last, site);
            }
        }
    }
    // "search for cats on youtube", "find a video about cats on youtube".
    if let Some(on_at) = words.iter().rposition(|w| *w == "on" || *w == "in") {
        let site_words = words[on_at + 1..].join(" ");
        if let Some(site) = sources.catalog.lookup_search(&site_words) {
            let lead = what_is_searched(&words[..on_at]);
            return on_site(&spoken, after + lead, after + on_at, site);
        }
    }
    // "find me a video on youtube about irish soda bread": the site in the middle, then
    // what it is about.
    for (on_at, _) in words
        .iter()
        .enumerate()
        .filter(|(_, w)| **w == "on" || **w == "in")
    {
        for len in 1..=3 {
            let Some(about) = words.get(on_at + 1 + len) else {
                break;
            };
            if !matches!(*about, "about" | "for" | "of" | "called" | "on") {
                continue;
            }
            let site_words = words[on_at + 1..on_at + 1 + len].join(" ");
            if let Some(site) = sources.catalog.lookup_search(&site_words)
                && on_at + 2 + len < words.len()
            {
                return on_site(&spoken, after + on_at + 2 + len, spoken.last, site);
            }
        }
    }
    let (template, engine) = if verb.starts_with("google") || verb.contains("google") {
        let google = sources
            .catalog
            .lookup("google")
            .and_then(|s| s.search.clone());
        (
            google.unwrap_or_else(|| sources.words.search_url.clone()),
            "Google".to_owned(),
        )
    } else if let Some(browser) =
        focused_profile(sources).filter(|p| p.kind == Kind::Browser && p.search_url.is_some())
    {
        (
            browser.search_url.clone().unwrap_or_default(),
            format!("{}'s search", browser.name),
        )
    } else {
        (search_engine(sources), "the web".to_owned())
    };
    Some(query_step(&spoken, after, spoken.last, &template, &engine))
}

/// How many leading words of a site's query say what kind of thing is searched rather
/// than what it is about ("a video about cats" on YouTube is "cats"); the site's search
/// finds that kind already.
fn what_is_searched(words: &[&str]) -> usize {
    // What a video or music site holds anyway ("a recipe", "a tutorial" are what is sought).
    const KINDS: &[&str] = &["video", "videos", "clip", "clips", "song", "songs"];
    let mut at = usize::from(words.first() == Some(&"me"));
    if matches!(words.get(at).copied(), Some("a" | "an" | "some" | "the")) {
        at += 1;
    }
    match (words.get(at), words.get(at + 1)) {
        (Some(kind), Some(about))
            if KINDS.contains(kind)
                && matches!(*about, "about" | "on" | "of" | "for" | "called")
                && words.len() > at + 2 =>
        {
            at + 2
        }
        _ => 0,
    }
}

/// Where a find in the focused window looks, said after the words ("find pricing on this
/// page") or after "search" ("search this page for pricing").
const FIND_PLACES: &[&[&str]] = &[
    &["on", "page"],
    &["on", "this", "page"],
    &["on", "the", "page"],
    &["in", "this", "page"],
    &["in", "the", "page"],
    &["on", "this", "site"],
    &["in", "this", "document"],
    &["in", "the", "document"],
    &["in", "this", "file"],
    &["in", "the", "file"],
];

/// Rule `find_in_page`: "find pricing on this page", "look for pricing on the page",
/// "search this page for pricing": the focused application's find chord (its profile's,
/// else the common one), then the words typed into the find bar as said. `None` in a
/// terminal (no find chord of its own) or without words to find. `text` is the normalised
/// utterance, `raw` the words as said; most utterances name no place and leave at once.
pub fn find_in_page(sources: &Sources<'_>, text: &str, raw: &str) -> Option<Vec<Matched>> {
    let names_a_place = text
        .split(' ')
        .any(|word| FIND_PLACES.iter().any(|place| place.last() == Some(&word)));
    if !names_a_place {
        return None;
    }
    let spoken = Spoken::new(raw);
    let words = spoken.text(spoken.first);
    let (start, end) = if let Some(after) = spoken.after_verb(&["search", "find in", "search in"]) {
        // "search this page for pricing", "search on the page for methods".
        let rest = &words[after - spoken.first..];
        let place = FIND_PLACES
            .iter()
            .map(|p| &p[..])
            .chain(FIND_PLACES.iter().map(|p| &p[1..]))
            .find(|p| rest.starts_with(p))?;
        (rest.get(place.len()) == Some(&"for")).then_some(())?;
        (after + place.len() + 1, spoken.last)
    } else {
        // "find pricing on this page", or the place first: "find on page pricing".
        let after = spoken.after_verb(&["find", "look for", "search for"])?;
        let rest = &words[after - spoken.first..];
        if let Some(place) = FIND_PLACES.iter().find(|p| words.ends_with(p)) {
            (after, spoken.last - place.len())
        } else {
            let place = FIND_PLACES.iter().find(|p| rest.starts_with(p))?;
            (after + place.len(), spoken.last)
        }
    };
    if start >= end {
        return None;
    }
    let text = spoken.raw[spoken.raw_start(start)..spoken.raw_end(end)]
        .trim()
        .trim_matches(|c: char| matches!(c, '"' | '\u{201c}' | '\u{201d}'))
        .trim();
    // "find the word refund on this page": the word, not its description.
    let text = crate::text::after_lead(
        text,
        &["the word ", "the words ", "the phrase ", "the text "],
    )
    .map(str::trim)
    .unwrap_or(text);
    if text.is_empty() {
        return None;
    }
    let find = focused_phrase("find", sources).or_else(|| shortcut("find", sources)?.ok())?;
    if find.op != "key" {
        return None;
    }
    let typed = Matched {
        rule: "find_in_page",
        op: "type_text",
        message: format!("type \"{text}\" into the find bar"),
        args: json!({"text": text}),
        confirm: false,
    };
    Some(vec![find, typed])
}

/// Rule `go_to_line`: "go to line forty two", "jump to line 7", "go to line one twenty"
/// ([`crate::numbers::said_number`]) with an application focused whose profile has a "go to
/// line" key, and the same for a page with its "go to page" key ("go to page 12" in a
/// document viewer): that key, the number typed, Enter. `None` where the focused
/// application has none (a browser, a terminal).
pub fn go_to_line(text: &str, sources: &Sources<'_>) -> Option<Vec<Matched>> {
    const PLACES: &[(&str, &str, &[&str])] = &[
        (
            "go to line",
            "go_to_line",
            &[
                "go to line number",
                "jump to line number",
                "go to line",
                "jump to line",
                "goto line",
                "line number",
            ],
        ),
        (
            "go to page",
            "go_to_page",
            &[
                "go to page number",
                "jump to page number",
                "go to page",
                "jump to page",
                "goto page",
                "turn to page",
                "page number",
            ],
        ),
    ];
    let (shortcut, rule, rest) = PLACES.iter().find_map(|(shortcut, rule, leads)| {
        leads
            .iter()
            .find_map(|lead| strip_word_prefix(text, lead))
            .map(|rest| (*shortcut, *rule, rest))
    })?;
    let number = crate::numbers::said_number(rest).filter(|n| (1..=1_000_000).contains(n))?;
    let profile = focused_profile(sources)?;
    let chord = profile.shortcuts.get(shortcut)?.clone();
    let step = |op: &'static str, message: String, args: Value| Matched {
        rule,
        op,
        message,
        args,
        confirm: false,
    };
    Some(vec![
        step(
            "key",
            format!("open {}'s {shortcut}", profile.name),
            json!({"chord": chord}),
        ),
        step(
            "type_text",
            format!("type {number}"),
            json!({"text": number.to_string()}),
        ),
        step("key", "press Return".into(), json!({"chord": "Return"})),
    ])
}

/// "quick open main dot rs", "go to file readme dot md", "find file app dot tsx" in an editor
/// whose profile has a "quick open" key: the key, then the file's name typed into its picker
/// (symbols said as words written: `main.rs`); after any lead but "quick open" the name must
/// be said with its extension ("open the file manager" is no file). "open", "go to" and
/// "jump to" a whole name then press Return (the first match opens). "quick open a file"
/// alone is the key.
pub fn quick_open(text: &str, sources: &Sources<'_>) -> Option<Vec<Matched>> {
    let (lead, rest) = [
        "quick open the file",
        "quick open file",
        "quick open",
        "go to the file",
        "go to file",
        "jump to the file",
        "jump to file",
        "find the file",
        "find file",
        "open the file",
        "open file",
    ]
    .iter()
    .find_map(|lead| Some((*lead, strip_word_prefix(text, lead)?)))?;
    // After words that are not the picker's own name, only a file's name said with its
    // extension ("go to file main dot rs"): "open the file manager" is an application.
    if !lead.starts_with("quick open") && !rest.trim().is_empty() && !rest.contains("dot ") {
        return None;
    }
    let profile = focused_profile(sources).filter(|p| p.kind == Kind::Editor)?;
    let chord = profile.shortcuts.get("quick open")?.clone();
    let step = |op: &'static str, message: String, args: Value| Matched {
        rule: "quick_open",
        op,
        message,
        args,
        confirm: false,
    };
    let key = step(
        "key",
        format!("open {}'s quick open", profile.name),
        json!({"chord": chord}),
    );
    // "a file", "a file by name": what the picker is for, not a name.
    let name = rest
        .trim()
        .strip_prefix("called ")
        .or_else(|| rest.trim().strip_prefix("named "))
        .unwrap_or(rest.trim());
    if name.is_empty()
        || matches!(
            name,
            "a file" | "a file by name" | "by name" | "files" | "a document"
        )
    {
        return Some(vec![key]);
    }
    // One file name: a few words at most.
    if name.split(' ').count() > 6 {
        return None;
    }
    let written = spoken_symbols(name);
    let written = if written.contains(['.', '/']) {
        written.replace(' ', "")
    } else {
        written
    };
    let mut steps = vec![
        key,
        step(
            "type_text",
            format!("type {written:?}"),
            json!({"text": written}),
        ),
    ];
    // "open the file readme dot md": a whole name said to open it, so the picker's first
    // match is opened; "quick open" and "find the file" leave the picker to the person.
    let opens = ["open", "go to", "jump to"]
        .iter()
        .any(|verb| lead.starts_with(verb));
    if opens && written.contains('.') {
        steps.push(step(
            "key",
            "open the first match".into(),
            json!({"chord": "Return"}),
        ));
    }
    Some(steps)
}

/// The site searches that do not open with a search verb: "youtube search rust tutorial"
/// (a site, then "search"), "find cat videos on youtube" and "play lofi on youtube" (a verb
/// of [`SITE_SEARCH_VERBS`], the query, "on" and a site with a search), and "what does
/// ephemeral mean, look it up" (the query, then [`TRAILING_SEARCH`]: the default engine).
fn site_search(sources: &Sources<'_>, spoken: &Spoken<'_>) -> Option<Result<Matched, Escalation>> {
    let words = spoken.text(spoken.first);
    // "search on amazon left handed mouse", "search in google scholar single cell", "look
    // on youtube for western blot tutorial": the site after "on" or "in", then the query
    // ("look" only with "for" after the site: "look on amazon, it's cheaper" is advice).
    if let Some(after) = spoken.after_verb(&["search for", "look for", "search", "look", "find"]) {
        let rest = spoken.text(after);
        let look = spoken.words[after - 1].text == "look";
        if matches!(rest.first(), Some(&("on" | "in"))) {
            // "search in google scholar": the site alone is opened.
            if let Some(site) = sources.catalog.lookup_web(&rest[1..].join(" "))
                && !look
                && rest.len() > 1
                && rest[1..].join("").chars().count() >= 3
            {
                return Some(Ok(crate::web::open_site(site, false)));
            }
            for k in (1..=4.min(rest.len().saturating_sub(2))).rev() {
                let Some(site) = sources.catalog.lookup_search(&rest[1..=k].join(" ")) else {
                    continue;
                };
                // A one- or two-letter name ("x") is a word here, not the site.
                if rest[1..=k].join("").chars().count() < 3 {
                    continue;
                }
                let with_for = rest.get(k + 1) == Some(&"for");
                if look && !with_for {
                    continue;
                }
                // "search on amazon, it's cheaper there": a comma after the site ends the
                // command; what follows is a remark, not a query.
                let site_end = spoken.words[after + k].raw.end;
                let next = spoken
                    .words
                    .get(after + 1 + k)
                    .map_or(site_end, |w| w.raw.start);
                if spoken
                    .raw
                    .get(site_end..next)
                    .is_some_and(|gap| gap.contains(','))
                {
                    return None;
                }
                let start = after + 1 + k + usize::from(with_for);
                if start < spoken.last {
                    return on_site(spoken, start, spoken.last, site);
                }
            }
        }
    }
    // "google scholar zebrafish fin regeneration", "google maps bakeries": a site whose name
    // begins with "google", not a Google search for the rest.
    if words.first() == Some(&"google") {
        for k in (1..=2.min(words.len().saturating_sub(2))).rev() {
            if let Some(site) = sources
                .catalog
                .lookup_web(&words[..=k].join(" "))
                .filter(|s| s.search.is_some() && s.name.to_lowercase().starts_with("google "))
            {
                return on_site(spoken, spoken.first + k + 1, spoken.last, site);
            }
        }
    }
    // "youtube search rust tutorial", "wikipedia search for quantum computing".
    for k in 1..=4.min(words.len()) {
        if words.get(k) != Some(&"search") {
            continue;
        }
        let Some(site) = sources.catalog.lookup_search(&words[..k].join(" ")) else {
            continue;
        };
        let mut start = spoken.first + k + 1;
        if words.get(k + 1) == Some(&"for") {
            start += 1;
        }
        return on_site(spoken, start, spoken.last, site);
    }
    // "find youtube videos about split keyboards": a site right after the verb, then what
    // kind of thing is sought and what it is about.
    if let Some(after) = spoken
        .after_verb(SEARCH_VERBS)
        .or_else(|| spoken.after_verb(SITE_SEARCH_VERBS))
    {
        let rest = spoken.text(after);
        for len in (1..=3.min(rest.len())).rev() {
            let lead = what_is_searched(&rest[len..]);
            if lead == 0 {
                continue;
            }
            if let Some(site) = sources.catalog.lookup_search(&rest[..len].join(" ")) {
                return on_site(spoken, after + len + lead, spoken.last, site);
            }
        }
    }
    // "on youtube find how to solder", "on github search for niri".
    if matches!(words.first(), Some(&("on" | "in"))) {
        for k in 1..=4.min(words.len().saturating_sub(2)) {
            let Some(site) = sources.catalog.lookup_search(&words[1..=k].join(" ")) else {
                continue;
            };
            let rest = &words[k + 1..];
            let verb = SITE_SEARCH_VERBS
                .iter()
                .chain(&["search for", "search", "look up"])
                .find(|v| rest.starts_with(&v.split(' ').collect::<Vec<_>>()[..]));
            if let Some(verb) = verb {
                let start = spoken.first + k + 1 + verb.split(' ').count();
                if start < spoken.last {
                    return on_site(spoken, start, spoken.last, site);
                }
            }
        }
    }
    // "find cat videos on youtube", "play lofi on youtube".
    if let Some(after) = spoken.after_verb(SITE_SEARCH_VERBS) {
        let rest = spoken.text(after);
        if let Some(on_at) = rest.iter().rposition(|w| *w == "on") {
            if let Some(site) = sources.catalog.lookup_search(&rest[on_at + 1..].join(" ")) {
                // "watch something on twitch": nothing to search for; the site itself.
                if matches!(
                    rest[..on_at].join(" ").as_str(),
                    "something" | "anything" | "stuff" | "some stuff" | "whatever"
                ) {
                    return Some(Ok(crate::web::open_site(site, false)));
                }
                let lead = what_is_searched(&rest[..on_at]);
                return on_site(spoken, after + lead, after + on_at, site);
            }
        }
    }
    // "what does ephemeral mean, look it up".
    for tail in TRAILING_SEARCH {
        let tail: Vec<&str> = tail.split(' ').collect();
        if words.len() > tail.len() && words.ends_with(&tail) {
            let end = spoken.last - tail.len();
            return Some(query_step(
                spoken,
                spoken.first,
                end,
                &search_engine(sources),
                "the web",
            ));
        }
    }
    None
}

/// Reading `site_query`, tried only when nothing else planned: a site of the catalog that
/// has a search of its own, named first, and what to search for after it ("duckduckgo
/// wayland screen sharing", "youtube lofi beats", "amazon usb c cable"), as the site's
/// search, with the query's normalised words (the caller refuses a query that is itself a
/// command: "github new tab"). The site's name is at most four words and the query at
/// least one.
pub fn site_query(sources: &Sources<'_>, raw: &str) -> Option<(Matched, String)> {
    let spoken = Spoken::new(raw);
    let words = spoken.text(spoken.first);
    (1..=4.min(words.len().saturating_sub(1)))
        .rev()
        .find_map(|k| {
            // The site's own name, not an alias ("drive", "x") nor a name that means the site
            // only where the web is meant ("spotify" is the application's).
            let name = compact(&words[..k].join(" "));
            if name.chars().count() < 3 {
                return None;
            }
            let site = sources
                .catalog
                .sites()
                .iter()
                .find(|s| s.search.is_some() && compact(&normalize(&s.name)) == name)?;
            // "youtube is down again", "github has an outage": a remark about the site.
            if words[k..].iter().any(|w| REMARK_WORDS.contains(w)) {
                return None;
            }
            // "youtube videos about cats": what the site holds anyway is not searched.
            let lead = what_is_searched(&words[k..]);
            let mut m = query_step(
                &spoken,
                spoken.first + k + lead,
                spoken.last,
                site.search.as_deref()?,
                &site.name,
            )
            .ok()?;
            m.rule = "site_query";
            Some((m, words[k..].join(" ")))
        })
}

/// Words that make "<site> ..." a remark about the site rather than a search on it.
const REMARK_WORDS: &[&str] = &[
    "is", "are", "was", "were", "has", "have", "had", "does", "did", "do", "will", "would", "can",
    "could", "should", "isnt", "arent", "wasnt", "doesnt", "didnt", "wont", "cant", "raised",
    "keeps", "sucks", "just", "always", "never", "again",
];

/// The default search template: `UTTER_SEARCH_URL` when it is a valid one, else the table's.
fn search_engine(sources: &Sources<'_>) -> String {
    let Some(own) = std::env::var("UTTER_SEARCH_URL")
        .ok()
        .filter(|t| !t.is_empty())
    else {
        return sources.words.search_url.clone();
    };
    let problem = if own.starts_with("https://") {
        crate::sites::check_search_template(&own)
    } else {
        Some(format!("{own:?} must start with https://"))
    };
    match problem {
        None => own,
        Some(problem) => {
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| {
                tracing::warn!(
                    "UTTER_SEARCH_URL is not used: {problem}; searching with {}",
                    sources.words.search_url
                );
            });
            sources.words.search_url.clone()
        }
    }
}

/// The search step of the raw words `start..end`.
/// [`query_step`] with `site`'s own search (`None` for a site that has none).
fn on_site(
    spoken: &Spoken<'_>,
    start: usize,
    end: usize,
    site: &crate::sites::Site,
) -> Option<Result<Matched, Escalation>> {
    Some(query_step(
        spoken,
        start,
        end,
        site.search.as_deref()?,
        &site.name,
    ))
}

fn query_step(
    spoken: &Spoken<'_>,
    start: usize,
    end: usize,
    template: &str,
    engine: &str,
) -> Result<Matched, Escalation> {
    let query = if start < end {
        spoken.raw[spoken.raw_start(start)..spoken.raw_end(end)]
            .trim()
            .trim_matches(|c: char| matches!(c, '"' | '\u{201c}' | '\u{201d}'))
            // A recogniser's pause is a comma: "mechanical keyboards," searches without it.
            .trim_end_matches(['.', '?', '!', ',', ';', ':'])
            .trim()
    } else {
        ""
    };
    // "search the web for uh pandoc templates": a hesitation is no word of the query.
    let query = crate::text::after_lead(query, &["uh, ", "um, ", "uh ", "um ", "erm ", "uhm "])
        .filter(|rest| !rest.is_empty())
        .unwrap_or(query);
    // "play some lofi beats", "find me a sourdough recipe": "some", "me a" ask for no
    // word of the query.
    let query = crate::text::after_lead(query, &["me some ", "me a ", "me an ", "me ", "some "])
        .filter(|rest| !rest.is_empty())
        .unwrap_or(query);
    // "show me where the eiffel tower is on the map": on a map, the place without the
    // question.
    let query = crate::text::after_lead(query, &["where the ", "where "])
        .filter(|_| engine.to_lowercase().contains("maps"))
        .and_then(|rest| {
            let lower = rest.to_lowercase();
            [" is", " are"]
                .iter()
                .find(|end| lower.ends_with(*end))
                .map(|end| rest[..rest.len() - end.len()].trim())
        })
        .filter(|place| !place.is_empty())
        .unwrap_or(query);
    if query.is_empty() {
        return Err(Escalation {
            reason: "incomplete",
            message: "a search needs what to search for, e.g. \"search for rust traits\"".into(),
        });
    }
    // "google it", "search that", "search me": a pronoun points at something the router
    // cannot see (the selection, the last thing said); searching for the word is wrong.
    if matches!(
        query.to_lowercase().as_str(),
        "it" | "that" | "this" | "me" | "them" | "those" | "these" | "him" | "her"
    ) {
        return Err(Escalation {
            reason: "incomplete",
            message: format!(
                "\"{query}\" says nothing to search for; say the words, e.g. \"search for rust traits\""
            ),
        });
    }
    let url = fill_template(template, query);
    Ok(Matched {
        rule: "search",
        op: "open_url",
        message: format!("search {engine} for {query:?}"),
        args: json!({"url": url}),
        confirm: false,
    })
}

/// The `app_id` a step aimed at `profile`'s application names: the open window's own (the
/// compositor matches it as reported: `slack`, not the profile's first `Slack`), else the
/// profile's first.
fn aimed_app_id<'a>(profile: &'a Profile, sources: &Sources<'a>) -> &'a str {
    sources
        .context
        .and_then(|c| c.app_ids.iter().find(|id| profile.has_app_id(id)))
        .or_else(|| profile.app_ids.first())
        .map_or(profile.id.as_str(), String::as_str)
}

/// What a phrase means in one profile: its own command, else a shortcut by name or synonym,
/// else its command the synonym names.
fn in_profile(phrase: &str, profile: &Profile, sources: &Sources<'_>) -> Option<Command> {
    let lookup = |phrase: &str| {
        if let Some(command) = profile.commands.get(phrase) {
            return Some(command.clone());
        }
        let name = sources.words.shortcut_name(phrase);
        profile
            .shortcuts
            .get(name)
            .map(|chord| Command::Chord(chord.clone()))
            // A synonym of one of its own commands ("stop whatever is running": "interrupt").
            .or_else(|| profile.commands.get(name).cloned())
    };
    lookup(phrase)
        .or_else(|| {
            // "make this line heading one", "turn this into a bullet list": the format named.
            let rest = crate::text::after_lead(phrase, FORMAT_LEADS)?;
            let rest = crate::text::after_lead(rest, &["a ", "an "]).unwrap_or(rest);
            lookup(rest).filter(|_| !rest.is_empty())
        })
        .or_else(|| {
            // "go back one slide", "forward a page": the profile's "previous slide", "next
            // page".
            let named = stepwise(phrase)?;
            lookup(&named)
        })
        .or_else(|| {
            // "reply to this one", "forward this email": the phrase, and what it acts on
            // being what is selected.
            let head = SELECTED_OBJECTS
                .iter()
                .find_map(|object| strip_word_suffix(phrase, object))?
                .trim_end();
            let head = strip_word_suffix(head, "to").map_or(head, str::trim_end);
            lookup(head).filter(|_| !head.is_empty())
        })
}

/// A step back or forward by one of something, as its "previous"/"next" name: "go back one
/// slide" and "one slide back" are "previous slide", "skip ahead a page" is "next page".
/// `None` for anything else.
fn stepwise(phrase: &str) -> Option<String> {
    let words: Vec<&str> = phrase.split(' ').collect();
    let words = match words.first() {
        Some(&("go" | "move" | "skip" | "jump" | "step")) => &words[1..],
        _ => &words[..],
    };
    let way = |w: &str| match w {
        "back" | "backward" | "backwards" => Some("previous"),
        "forward" | "forwards" | "ahead" | "on" => Some("next"),
        _ => None,
    };
    let one = |w: &str| matches!(w, "one" | "a" | "1");
    let (way, noun) = match words {
        // "back one slide"
        [w, n, noun] if one(n) => (way(w)?, *noun),
        // "one slide back"
        [n, noun, w] if one(n) => (way(w)?, *noun),
        _ => return None,
    };
    Some(format!("{way} {noun}"))
}

/// What a phrase may end with to say it acts on what is selected ("reply to this one").
const SELECTED_OBJECTS: &[&str] = &[
    "this one",
    "that one",
    "this email",
    "this message",
    "this mail",
    "this item",
    "the selected one",
    "this",
    "that",
    "it",
];

/// What is said before a format to set on the selection or the line ("make this line
/// heading one"), longest first.
const FORMAT_LEADS: &[&str] = &[
    "make this paragraph ",
    "make this line ",
    "make this text ",
    "make the line ",
    "make this ",
    "make it ",
    "turn this line into ",
    "turn this into ",
    "turn it into ",
    "set this line to ",
    "set this to ",
    "change this to ",
    "format this as ",
];

/// Rule `loose_shortcut`, tried only when no rule planned the utterance: a shortcut name of
/// the focused application's profile (or a common one) said in other words: its content
/// words, in any order, without articles and "go"/"show" verbs ([`crate::text::loose_key`]),
/// are those of the name or of one of its synonyms. "reopen the tab I just closed" is
/// "reopen tab", "zoom out a bit" is "zoom out", "go to the end of the line" is "end of
/// line". A key two names share names neither. In a terminal only its profile's names count
/// (the common chords would go to the program running in it). Also "the third tab" / "tab
/// 3" in a browser: ctrl+3 (1 to 8), or the modifier of the profile's "first tab" (alt+3 in
/// Firefox on Linux).
pub fn loose_shortcut(text: &str, sources: &Sources<'_>) -> Option<Matched> {
    // "the third tab" alone names the tab to go to (a verb left out, as learners of English
    // do); any other word with it is no tab number.
    let tab_alone = text
        .strip_prefix("the ")
        .is_some_and(|rest| tab_number(rest).is_some() && rest.ends_with(" tab"));
    // "I love this song" says something about the person; "the undo", "my history" are
    // noun phrases, not commands: a command starts with its verb or the shortcut's name.
    if !tab_alone
        && matches!(
            text.split(' ').next(),
            Some(
                "i" | "the"
                    | "a"
                    | "an"
                    | "my"
                    | "some"
                    | "more"
                    | "our"
                    | "your"
                    | "this"
                    | "that"
            )
        )
    {
        return None;
    }
    let key = crate::text::loose_key(text);
    if key.is_empty() {
        return None;
    }
    // "open close tab" (a misheard "reopen closed tab"): a dropped verb that says the
    // opposite of the one kept is no command at all.
    let mut said = text.split(' ');
    if let (Some(dropped), Some(kept)) = (said.next(), key.split(' ').next())
        && matches!(
            (dropped, kept),
            (
                "open" | "show" | "start",
                "close" | "hide" | "exit" | "quit" | "stop"
            )
        )
    {
        return None;
    }
    let focused = focused_profile(sources);
    if focused.is_some_and(|p| p.kind == Kind::Browser)
        && let Some(n) = tab_number(&key)
    {
        // The modifier of the browser's own "first tab" (Firefox on Linux: alt+1).
        let modifier = focused
            .and_then(|p| p.shortcuts.get("first tab"))
            .and_then(|chord| chord.strip_suffix("+1"))
            .unwrap_or("ctrl");
        return command_step(
            Command::Chord(format!("{modifier}+{n}")),
            text,
            focused.map_or("", |p| p.name.as_str()),
            None,
        );
    }
    let terminal = focused.is_some_and(|p| p.kind == Kind::Terminal);
    let chord_of = |name: &str| -> Option<(String, String)> {
        // A shortcut of the profile, or one of its own phrases that presses a chord ("stop
        // the command" in a terminal).
        let own = focused.and_then(|p| {
            p.shortcuts
                .get(name)
                .or(match p.commands.get(name) {
                    Some(Command::Chord(chord)) => Some(chord),
                    _ => None,
                })
                .map(|chord| (chord.clone(), p.name.clone()))
        });
        if own.is_some() {
            return own;
        }
        if terminal {
            return None;
        }
        sources
            .words
            .common
            .get(name)
            .map(|chord| (chord.clone(), "common keys".to_owned()))
    };
    let names = focused
        .into_iter()
        .flat_map(|p| p.shortcuts.keys().chain(p.commands.keys()))
        .chain(sources.words.common.keys())
        .map(String::as_str);
    let matching = |key: &str| -> Vec<&str> {
        let mut found: Vec<&str> = names
            .clone()
            .filter(|name| crate::text::loose_key(name) == key)
            .chain(
                sources
                    .words
                    .synonym_phrases()
                    .filter(|(phrase, _)| crate::text::loose_key(phrase) == key)
                    .map(|(_, name)| name),
            )
            .filter(|name| chord_of(name).is_some())
            .collect();
        found.sort_unstable();
        found.dedup();
        found
    };
    let mut found = matching(&key);
    let editor = focused.is_some_and(|p| p.kind == Kind::Editor);
    // In an editor a file is its tab: "close this file" is Zed's "close tab".
    if found.is_empty() && editor {
        let words: Vec<&str> = text
            .split(' ')
            .map(|w| {
                if matches!(w, "file" | "document") {
                    "tab"
                } else {
                    w
                }
            })
            .collect();
        found = matching(&crate::text::loose_key(&words.join(" ")));
    }
    // The focused application said by its kind ("close this editor tab", "open the
    // integrated terminal" in an editor): the words that only say where.
    if found.is_empty() {
        let kind = focused.map(|p| p.kind.as_str());
        let words: Vec<&str> = text
            .split(' ')
            .filter(|w| Some(*w) != kind && !matches!(*w, "integrated" | "builtin" | "built-in"))
            .collect();
        let relaxed = crate::text::loose_key(&words.join(" "));
        if relaxed != key {
            found = matching(&relaxed);
        }
        // "open the terminal", "hide the sidebar" for a "toggle …" name.
        if found.is_empty()
            && let Some((verb, rest)) = relaxed.split_once(' ')
            && matches!(verb, "open" | "show" | "hide" | "close")
        {
            found = matching(&crate::text::loose_key(&format!("toggle {rest}")));
        }
        // "quick open a file", "save the file": what a name's verb acts on in an editor.
        if found.is_empty() && editor {
            let words: Vec<&str> = words
                .into_iter()
                .filter(|w| !matches!(*w, "file" | "files" | "a"))
                .collect();
            found = matching(&crate::text::loose_key(&words.join(" ")));
        }
    }
    // Names that press the same chord ("interrupt", "stop the command") are one key.
    let chords: Vec<String> = found
        .iter()
        .filter_map(|n| chord_of(n).map(|(chord, _)| chord))
        .collect();
    if chords.windows(2).all(|pair| pair[0] == pair[1]) {
        found.truncate(1);
    }
    let [name] = found.as_slice() else {
        return None;
    };
    // "open a new browser window" with a terminal focused: a kind said that is not the
    // focused application's, and that the name does not hold, is another application's
    // command (the terminal's own "new window" is not it).
    let other_kind = text.split(' ').any(|w| {
        matches!(w, "browser" | "terminal" | "editor")
            && focused.is_none_or(|p| p.kind.as_str() != w)
            && !name.split(' ').any(|n| n == w)
    });
    if other_kind {
        return None;
    }
    let (chord, owner) = chord_of(name)?;
    let mut m = command_step(Command::Chord(chord), text, &owner, None)?;
    m.rule = "loose_shortcut";
    m.message = format!("{text} (as \"{name}\"): {}", m.message);
    Some(m)
}

/// The tab number a loose key says: "third tab", "tab 3", "tab three" → 3 (1 to 8).
fn tab_number(key: &str) -> Option<u32> {
    const ORDINALS: &[&str] = &[
        "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth",
    ];
    let mut words = key.split(' ').filter(|w| *w != "tab" && *w != "number");
    let word = words.next()?;
    if words.next().is_some() || !key.split(' ').any(|w| w == "tab") {
        return None;
    }
    let n = ORDINALS
        .iter()
        .position(|o| *o == word)
        .map(|i| i as u32 + 1)
        .or_else(|| crate::numbers::digits(word).parse().ok())?;
    (1..=8).contains(&n).then_some(n)
}

/// The step of a command, aimed at `app` when given.
fn command_step(command: Command, phrase: &str, owner: &str, app: Option<&str>) -> Option<Matched> {
    let (op, mut args, message) = match command {
        Command::Chord(chord) => (
            "key",
            json!({"chord": chord}),
            format!("{phrase}: press {chord} ({owner})"),
        ),
        Command::Step { op, args } => {
            let op = known_op(&op)?;
            (op, args, format!("{phrase}: {op} ({owner})"))
        }
    };
    if let (Some(app), Value::Object(map)) = (app, &mut args)
        && matches!(op, "key" | "type_text")
    {
        map.insert("app".into(), Value::String(app.to_owned()));
    }
    Some(Matched {
        rule: "shortcut",
        op,
        args,
        message,
        confirm: false,
    })
}

/// Rule `app_phrase`: a phrase the focused application's profile names exactly, as a
/// command or a shortcut (by name or synonym), else one of the person's own commands
/// (`commands.toml`, in any application). Tried before every other rule, so "search" in
/// Spotify is Spotify's search field, "clear" in a terminal clears it, and the person's
/// "run tests" is theirs.
pub fn focused_phrase(text: &str, sources: &Sources<'_>) -> Option<Matched> {
    if let Some(profile) = focused_profile(sources) {
        if let Some(command) = in_profile(text, profile, sources) {
            return command_step(command, text, &profile.name, None);
        }
        // "run the spell check", "do a find and replace": the phrase with a verb of doing
        // said before it.
        if let Some(phrase) = DOING_LEADS
            .iter()
            .find_map(|lead| strip_word_prefix(text, lead))
            .filter(|p| !p.is_empty())
            && let Some(command) = in_profile(phrase, profile, sources)
        {
            return command_step(command, phrase, &profile.name, None);
        }
    }
    // The person's own commands (`commands.toml`), whatever is focused.
    let global = sources.profiles.global()?;
    let command = global.commands.get(text)?.clone();
    command_step(command, text, &global.name, None)
}

/// Verbs of doing said before an application's phrase ("run the spell check").
const DOING_LEADS: &[&str] = &[
    "run the",
    "run a",
    "do the",
    "do a",
    "start the",
    "use the",
    "open the",
    // "compose a new message", "start a new chat": a phrase that names what is made.
    "compose a",
    "create a",
    "start a",
    "write a",
    "make a",
    "begin a",
    "open a",
];

/// Verbs of common chords that take what they act on ("copy that cell", "save the
/// translation"), and the words that open such an object.
const OBJECT_VERBS: &[&str] = &["copy", "cut", "save", "print"];
const OBJECT_DETERMINERS: &[&str] = &["the", "this", "that", "these", "those", "my", "our"];

/// Rule `shortcut`: a phrase aimed at a named application's profile ("firefox new tab",
/// "new tab in firefox"; the step's `app` then focuses it first), else a common chord
/// ("copy", "undo"). The focused application's own phrases ("new tab" in Firefox, "copy"
/// in a terminal) are [`focused_phrase`]'s, tried before every rule. A phrase that only another kind of application knows escalates
/// ("new tab" with a terminal focused: `needs_browser`).
pub fn shortcut(text: &str, sources: &Sources<'_>) -> Option<Result<Matched, Escalation>> {
    let focused = focused_profile(sources);
    // "<app> <phrase>" and "<phrase> in <app>".
    for profile in sources.profiles.iter() {
        for phrase in aimed(text, profile) {
            if let Some(command) = in_profile(phrase, profile, sources) {
                let app = aimed_app_id(profile, sources);
                return command_step(command, phrase, &profile.name, Some(app)).map(Ok);
            }
        }
    }
    let name = sources.words.shortcut_name(text);
    if let Some(chord) = sources.words.common.get(name) {
        // Not in a terminal: its program reads those keys (ctrl+z suspends, ctrl+c
        // interrupts), so only the terminal's own profile may say what "undo" presses.
        if let Some(terminal) = focused.filter(|p| p.kind == Kind::Terminal) {
            return Some(Err(Escalation {
                reason: "no_key",
                message: format!(
                    "\"{text}\" has no key in {} (its profile names none, and the common {chord} would go to the program running in it)",
                    terminal.name
                ),
            }));
        }
        return command_step(Command::Chord(chord.clone()), text, "common keys", None).map(Ok);
    }
    // "copy that cell", "save the translation": the verb's chord, what it acts on being
    // what is selected or open (one or two words after "the", "this", …).
    if let Some((verb, object)) = text.split_once(' ')
        && OBJECT_VERBS.contains(&verb)
        && let Some(rest) = object.split_once(' ').and_then(|(det, rest)| {
            OBJECT_DETERMINERS.contains(&det).then_some(rest)
        })
        && (1..=2).contains(&rest.split(' ').count())
        && !rest.split(' ').any(|w| w == "times" || w.parse::<u32>().is_ok())
        // A link, a tab or an image is no selection: copying one is another command.
        && !rest.split(' ').any(|w| {
            matches!(
                w,
                "link" | "url" | "address" | "tab" | "window" | "image" | "picture" | "location"
            )
        })
        && !focused.is_some_and(|p| p.kind == Kind::Terminal)
    {
        if let Some(profile) = focused
            && let Some(command) = in_profile(verb, profile, sources)
        {
            return command_step(command, verb, &profile.name, None).map(Ok);
        }
        if let Some(chord) = sources.words.common.get(verb) {
            return command_step(Command::Chord(chord.clone()), verb, "common keys", None).map(Ok);
        }
    }
    // Known, but to another kind of application.
    let owner = sources
        .profiles
        .iter()
        .find(|p| p.commands.contains_key(text) || p.shortcuts.contains_key(name))?;
    Some(Err(Escalation::needs(owner.kind, text)))
}

/// The phrases of `text` aimed at `profile`: after one of its names ("firefox new tab"), or
/// before "in"/"on" and one of its names ("new tab in firefox").
fn aimed<'t>(text: &'t str, profile: &Profile) -> Vec<&'t str> {
    aimed_at(text, |name| profile.is_named(name), false)
}

/// [`aimed`] for any naming: the phrases of `text` aimed at what `is_named` accepts, as
/// "<name> <phrase>" or "<phrase> in|on|from <name>", and with `in_first` "in <name> <phrase>".
fn aimed_at(text: &str, is_named: impl Fn(&str) -> bool, in_first: bool) -> Vec<&str> {
    let mut found = Vec::new();
    let words: Vec<&str> = text.split(' ').collect();
    // A name is a few words: only the first and the last few are looked at, so a long
    // utterance costs no more than a short one.
    let n = words.len();
    for cut in (1..n).filter(|&cut| cut <= MAX_NAME_WORDS || n - cut <= MAX_NAME_WORDS + 1) {
        if cut <= MAX_NAME_WORDS {
            let head = words[..cut].join(" ");
            let name = match in_first {
                // "in slack …", "over in slack …".
                true => {
                    let head = head.strip_prefix("over ").unwrap_or(&head);
                    head.strip_prefix("in ")
                        .or_else(|| head.strip_prefix("on "))
                        .unwrap_or(head)
                }
                false => &head,
            };
            if is_named(name) {
                let rest = strip_word_prefix(text, &head).unwrap_or("");
                if !rest.is_empty() {
                    found.push(rest);
                }
            }
        }
        // "from <app>" only for what is taken out of it ("copy the password from keepass"):
        // "paste from chromium" names where the text comes from, not where it goes.
        let from = words[cut] == "from" && words[0] == "copy";
        if n - cut <= MAX_NAME_WORDS + 1 && (matches!(words[cut], "in" | "on") || from) {
            let tail = words[cut..].join(" ");
            let name = tail
                .strip_prefix("in ")
                .or_else(|| tail.strip_prefix("on "))
                .or_else(|| tail.strip_prefix("from "))
                .unwrap_or("");
            if is_named(name) {
                let phrase = strip_word_suffix(text, &tail).unwrap_or("").trim_end();
                if !phrase.is_empty() {
                    found.push(phrase);
                }
            }
        }
    }
    found
}

/// The most words of an application's spoken name looked for at either end of an
/// utterance.
const MAX_NAME_WORDS: usize = 4;

/// Where the person said an agent should run: "here" (the focused terminal), "in a new
/// terminal" (a new window), or nothing said (the focused terminal if one is, else a new
/// window).
#[derive(Clone, Copy, PartialEq, Eq)]
enum AgentPlace {
    Here,
    NewWindow,
    Either,
    /// "in the terminal": the focused terminal, else the open terminal window, else a new one.
    TheOpen,
}

/// Words after an agent's name that say where it runs, longest first.
const AGENT_PLACES: &[(&str, AgentPlace)] = &[
    ("in a new terminal window", AgentPlace::NewWindow),
    ("in a new terminal", AgentPlace::NewWindow),
    ("in a new window", AgentPlace::NewWindow),
    ("in a fresh terminal window", AgentPlace::NewWindow),
    ("in a fresh terminal", AgentPlace::NewWindow),
    ("in a fresh window", AgentPlace::NewWindow),
    ("in a separate terminal", AgentPlace::NewWindow),
    ("in another terminal", AgentPlace::NewWindow),
    ("in a terminal", AgentPlace::Either),
    ("in the terminal", AgentPlace::TheOpen),
    ("in my terminal", AgentPlace::TheOpen),
    ("in terminal", AgentPlace::Either),
    ("right here in this terminal", AgentPlace::Here),
    ("right here in this shell", AgentPlace::Here),
    ("here in this terminal", AgentPlace::Here),
    ("here in this shell", AgentPlace::Here),
    ("in this terminal", AgentPlace::Here),
    ("in this shell", AgentPlace::Here),
    ("in this window", AgentPlace::Here),
    ("right here", AgentPlace::Here),
    ("in here", AgentPlace::Here),
    ("here", AgentPlace::Here),
];

/// Words before an agent's name that ask for a new terminal running it ("a terminal with
/// codex", after the article), longest first.
const NEW_TERMINAL_WITH: &[&str] = &[
    "terminal window with",
    "terminal window running",
    "terminal with",
    "terminal running",
    "terminal and run",
    "terminal and start",
    // "new terminal, aider please": the comma is gone by now.
    "terminal",
];

/// Words before "terminal" that ask for a new one ("another terminal with codex").
const NEW_TERMINAL_LEADS: &[&str] = &[
    "a new",
    "new",
    "another",
    "a fresh",
    "fresh",
    "a separate",
    "separate",
];

/// Words after an agent's name that name it no further ("claude code session", "aider agent").
const AGENT_NOUNS: &[&str] = &["session", "agent", "instance"];

/// The agent an utterance's object names ("the claude code session in a new terminal"), and
/// where it should run.
/// An agent's object and the file said after it ("aider on glossary dot py":
/// `glossary.py`), when the last words after "on", "with" or "for" name one file.
fn agent_file(rest: &str) -> (&str, Option<String>) {
    for sep in [" on ", " with ", " for "] {
        if let Some(at) = rest.rfind(sep) {
            let file = spoken_symbols(rest[at + sep.len()..].trim());
            let one_file = !file.contains(char::is_whitespace)
                && file.rsplit_once('.').is_some_and(|(stem, ext)| {
                    !stem.is_empty()
                        && !ext.is_empty()
                        && ext.chars().all(|c| c.is_ascii_alphanumeric())
                });
            if one_file {
                return (rest[..at].trim_end(), Some(file));
            }
        }
    }
    (rest, None)
}

fn agent_object<'a>(
    object: &str,
    sources: &'a Sources<'_>,
) -> Option<(&'a crate::commands::Agent, AgentPlace)> {
    let mut rest = object;
    for article in ["the", "a", "an", "my"].iter().chain(NEW_TERMINAL_LEADS) {
        if let Some(r) = strip_word_prefix(rest, article).filter(|r| !r.is_empty()) {
            rest = r;
        }
    }
    let mut place = AgentPlace::Either;
    // "open a terminal with claude code running in it": the new terminal said first.
    if let Some(r) = NEW_TERMINAL_WITH
        .iter()
        .find_map(|lead| strip_word_prefix(rest, lead).filter(|r| !r.is_empty()))
    {
        let r = ["running in it", "in it", "running"]
            .iter()
            .find_map(|tail| {
                strip_word_suffix(r, tail)
                    .map(str::trim_end)
                    .filter(|r| !r.is_empty())
            })
            .unwrap_or(r);
        return sources.words.agent(r).map(|a| (a, AgentPlace::NewWindow));
    }
    if let Some((r, p)) = AGENT_PLACES.iter().find_map(|(words, p)| {
        strip_word_suffix(rest, words)
            .map(str::trim_end)
            .filter(|r| !r.is_empty())
            .map(|r| (r, *p))
    }) {
        rest = r;
        place = p;
    }
    let bare = AGENT_NOUNS.iter().find_map(|noun| {
        strip_word_suffix(rest, noun)
            .map(str::trim_end)
            .filter(|r| !r.is_empty())
    });
    [Some(rest), bare]
        .into_iter()
        .flatten()
        .find_map(|name| sources.words.agent(name))
        .map(|a| (a, place))
}

/// "continue my last claude session", "resume codex in a new terminal": an agent with a
/// `resume` argv, said after a verb of going on with it; "session", "conversation" and
/// "chat" are dropped wherever they stand.
fn resumed_agent<'a>(
    text: &str,
    sources: &'a Sources<'_>,
) -> Option<(&'static str, &'a crate::commands::Agent, AgentPlace)> {
    const GO_ON: &[&str] = &["continue", "resume", "pick up", "reopen", "go back to"];
    const WHICH: &[&str] = &[
        "my last",
        "the last",
        "my previous",
        "the previous",
        "my most recent",
        "the most recent",
        "my",
        "the",
        "last",
    ];
    let (verb, rest) = GO_ON
        .iter()
        .find_map(|verb| Some((*verb, strip_word_prefix(text, verb)?)))?;
    let rest = WHICH
        .iter()
        .find_map(|w| strip_word_prefix(rest, w))
        .unwrap_or(rest);
    let rest: Vec<&str> = rest
        .split(' ')
        .filter(|w| !matches!(*w, "session" | "conversation" | "chat"))
        .collect();
    let (agent, place) = agent_object(&rest.join(" "), sources)?;
    agent.resume.as_ref()?;
    Some((verb, agent, place))
}

/// Rule `agent`: "start claude", "run codex", "boot up aider in a new terminal", "start a
/// claude code session here": in a focused terminal, the agent's command typed and entered
/// (`type_text`, then `key Return`); otherwise, or when a new terminal was asked for, a new
/// window of an installed terminal running it (`niri spawn` of the terminal profile's `run`
/// argv and the command).
pub fn agent(text: &str, sources: &Sources<'_>) -> Option<Result<Vec<Matched>, Escalation>> {
    let resumed = resumed_agent(text, sources);
    let (verb, agent, place, file) = resumed
        .map(|(verb, agent, place)| (verb, agent, place, None))
        .or_else(|| {
            crate::plan::APP_VERBS.iter().find_map(|verb| {
                let rest = strip_word_prefix(text, verb)?;
                // "run aider on glossary dot py": the file it works on.
                let (rest, file) = agent_file(rest);
                agent_object(rest, sources).map(|(a, place)| (*verb, a, place, file))
            })
        })
        // "new terminal with codex": the new terminal said, with no verb.
        .or_else(|| {
            let (agent, place) = agent_object(text, sources)?;
            let new = NEW_TERMINAL_LEADS
                .iter()
                .any(|lead| strip_word_prefix(text, lead).is_some());
            (new && place == AgentPlace::NewWindow).then_some(("start", agent, place, None))
        })?;
    let agent_argv = match (&agent.resume, resumed.is_some()) {
        (Some(resume), true) => resume,
        _ => &agent.command,
    };
    let agent_argv: Vec<String> = agent_argv.iter().cloned().chain(file).collect();
    let line = agent_argv.join(" ");
    let in_terminal = focused_profile(sources).is_some_and(|p| p.kind == Kind::Terminal);
    // The command typed into a terminal and entered.
    let typed = || {
        vec![
            Matched {
                rule: "agent",
                op: "type_text",
                message: format!("{verb} {}: type {line:?} in the terminal", agent.name),
                args: json!({"text": line}),
                confirm: false,
            },
            Matched {
                rule: "agent",
                op: "key",
                message: "press Return".into(),
                args: json!({"chord": "Return"}),
                confirm: false,
            },
        ]
    };
    if in_terminal && place != AgentPlace::NewWindow {
        return Some(Ok(typed()));
    }
    // "start opencode in the terminal" from the editor: the open terminal window.
    let open_terminal = sources.context.and_then(|c| {
        c.app_ids.iter().find(|id| {
            sources
                .profile_of(id)
                .is_some_and(|p| p.kind == Kind::Terminal)
        })
    });
    if let (AgentPlace::TheOpen, Some(app_id)) = (place, open_terminal) {
        let focus = Matched {
            rule: "agent",
            ..crate::windows::focus_window(app_id)
        };
        return Some(Ok(std::iter::once(focus).chain(typed()).collect()));
    }
    if place == AgentPlace::Here {
        return Some(Err(Escalation {
            reason: "needs_terminal",
            message: format!(
                "\"{text}\": the focused window is not a terminal; focus one, or say \"{verb} {} in a new terminal\"",
                agent.name
            ),
        }));
    }
    let Some(terminal) = installed_terminal(sources) else {
        return Some(Err(Escalation {
            reason: "needs_terminal",
            message: format!(
                "\"{text}\" needs a terminal: focus one, or install one of {}",
                terminal_names(sources)
            ),
        }));
    };
    let (terminal_name, mut argv) = terminal;
    argv.extend(agent_argv.iter().cloned());
    Some(Ok(vec![Matched {
        rule: "agent",
        op: "niri",
        message: format!("{verb} {} in a new {terminal_name} window", agent.name),
        args: json!({"command": "spawn", "args": argv}),
        confirm: false,
    }]))
}

/// The terminal profiles' names, for messages.
fn terminal_names(sources: &Sources<'_>) -> String {
    sources
        .profiles
        .iter()
        .filter(|p| p.kind == Kind::Terminal)
        .map(|p| p.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A terminal to start a program in, as its name and the argv that runs a program in a new
/// window: a profile's with a window open (the context's), else one that is installed (a
/// desktop entry of its name), else an installed terminal emulator without a profile (its
/// desktop entry's category) run as nearly all of them take a program: `<program> -e`.
fn installed_terminal(sources: &Sources<'_>) -> Option<(String, Vec<String>)> {
    profiled_terminal(sources)
        .map(|p| (p.name.clone(), p.run.clone()))
        .or_else(|| {
            let app = sources.apps.all().iter().find(|a| {
                a.is_of(&["TerminalEmulator".to_owned()])
                    && sources.profiles.for_app_id(&a.id).is_none()
            })?;
            let program = app.exec.clone()?;
            Some((app.name.clone(), vec![program, "-e".to_owned()]))
        })
}

/// [`installed_terminal`]'s profile, where one fits.
fn profiled_terminal<'a>(sources: &Sources<'a>) -> Option<&'a Profile> {
    let terminals: Vec<&Profile> = sources
        .profiles
        .iter()
        .filter(|p| p.kind == Kind::Terminal && !p.run.is_empty())
        .collect();
    if let Some(context) = sources.context
        && let Some(open) = terminals
            .iter()
            .find(|p| context.app_ids.iter().any(|id| p.has_app_id(id)))
    {
        return Some(open);
    }
    terminals.into_iter().find(|p| {
        sources
            .apps
            .find(&crate::text::normalize(&p.name))
            .is_some()
    })
}

/// Verbs of a shell command; the command follows as said.
const TERMINAL_VERBS: &[&str] = &[
    "run the command",
    "execute the command",
    "run command",
    "execute command",
    "execute",
    "run",
];

/// Where a command runs, said after it: the focused terminal, which is where it runs anyway.
const PLACES: &[&[&str]] = &[
    &["in", "the", "terminal"],
    &["in", "this", "terminal"],
    &["in", "the", "shell"],
    &["in", "this", "shell"],
    &["in", "the", "console"],
    &["in", "here"],
    &["here"],
];

/// One past the last word of a command said from word `first` on: without a trailing
/// "please" and where it runs ([`PLACES`], "in the terminal"), in either order; at least
/// one word is kept.
fn command_end(spoken: &Spoken<'_>, first: usize) -> usize {
    let mut last = spoken.words.len();
    let ends_with = |last: usize, words: &[&str]| {
        last >= first + 1 + words.len()
            && spoken.words[last - words.len()..last]
                .iter()
                .map(|w| w.text.as_str())
                .eq(words.iter().copied())
    };
    for _ in 0..2 {
        if ends_with(last, &["please"]) {
            last -= 1;
        }
        if let Some(place) = PLACES.iter().find(|p| ends_with(last, p)) {
            last -= place.len();
        }
    }
    last
}

/// A shell command with the symbols said as words written as symbols: "dash la" is `-la`,
/// "dash dash release" `--release`, "slash etc" `/etc`, "dot dot" `..`, "file dot txt"
/// `file.txt`, "tilde" `~`, "dash l a" `-la` (single letters after a dash are one flag),
/// "if equals dev zero" `if=/dev/zero` (a device said without its slashes), "python three"
/// `python3`. Only whole words count, case aside; a command said without them stays
/// exactly as it was (spaces and all).
pub fn spoken_symbols(command: &str) -> String {
    // "ping one dot one dot one dot one": an address of numbers is written in digits.
    let dotted = crate::numbers::dotted_numbers(command);
    let command = dotted.as_str();
    let words: Vec<&str> = command.split(' ').filter(|w| !w.is_empty()).collect();
    let symbolic = |w: &str| {
        matches!(
            w.to_lowercase().as_str(),
            "dash" | "hyphen" | "slash" | "dot" | "tilde" | "equals" | "dev" | "three"
        )
    };
    if !words.iter().any(|w| symbolic(w)) {
        return command.to_owned();
    }
    let mut out = String::with_capacity(command.len());
    // Whether the next word joins the last without a space.
    let mut glue = false;
    let mut i = 0;
    while i < words.len() {
        let word = words[i].to_lowercase();
        let next = words.get(i + 1).map(|w| w.to_lowercase());
        let (symbol, joins_before, used) = match (word.as_str(), next.as_deref()) {
            ("dash", Some("dash")) => ("--", false, 2),
            ("dash" | "hyphen", _) => ("-", false, 1),
            // Inside a path ("home slash me" after a slash) the slash joins the word before.
            ("slash", _) => {
                let segment = out.rsplit(' ').next().unwrap_or("");
                (
                    "/",
                    segment.contains(['/', '~']) || segment.ends_with('.'),
                    1,
                )
            }
            ("dot", Some("dot")) => ("..", out.ends_with('/'), 2),
            // "notes dot txt" is one name; "add dot" at the end is the current directory.
            ("dot", Some(_)) => (".", !out.is_empty() && !out.ends_with(' '), 1),
            ("dot", None) => (".", false, 1),
            ("tilde", _) => ("~", false, 1),
            ("equals", Some(_)) => ("=", true, 1),
            // "dev sda", "dev zero": a device file, unless a slash was said before it.
            ("dev", Some(device)) if !out.ends_with('/') && is_device(device) => {
                ("/dev/", out.ends_with('='), 1)
            }
            // "python three", "pip three": the versioned program.
            ("three", _) if matches!(out.rsplit(' ').next(), Some("python" | "pip")) => {
                ("3", true, 1)
            }
            _ => ("", false, 0),
        };
        // "dash l a": the single letters after a dash are one cluster of flags.
        if symbol == "-" && used == 1 {
            let letters: String = words[i + 1..]
                .iter()
                .take_while(|w| w.len() == 1 && w.chars().all(|c| c.is_ascii_alphabetic()))
                .copied()
                .collect();
            if letters.len() > 1 {
                if !out.is_empty() && !glue {
                    out.push(' ');
                }
                out.push('-');
                out.push_str(&letters);
                glue = false;
                i += 1 + letters.len();
                continue;
            }
        }
        if used == 0 {
            if !out.is_empty() && !glue {
                out.push(' ');
            }
            out.push_str(words[i]);
            glue = false;
            i += 1;
            continue;
        }
        if !out.is_empty() && !glue && !joins_before {
            out.push(' ');
        }
        out.push_str(symbol);
        // A versioned program's digit ends its word; every other symbol joins the next.
        glue = symbol != "3";
        i += used;
    }
    out
}

/// Whether a word said after "dev" names a device file (`/dev/sda`, `/dev/null`).
fn is_device(word: &str) -> bool {
    let numbered = |rest: &str| {
        rest.chars()
            .all(|c| c.is_ascii_digit() || c == 'n' || c == 'p')
    };
    matches!(word, "zero" | "null" | "random" | "urandom" | "mem")
        // sda, sdb1, vdc, hda
        || ["sd", "hd", "vd"].iter().any(|p| {
            word.strip_prefix(p).is_some_and(|rest| {
                let mut chars = rest.chars();
                chars.next().is_some_and(|c| c.is_ascii_lowercase())
                    && chars.all(|c| c.is_ascii_digit())
            })
        })
        // nvme0n1p2, mmcblk0, loop0
        || ["nvme", "mmcblk", "loop"]
            .iter()
            .any(|p| word.strip_prefix(p).is_some_and(|rest| !rest.is_empty() && numbered(rest)))
}

/// Words of a sentence about something rather than a command: "python is slow", "ping me
/// when you're done", "cargo test is failing, can you fix it".
const NOT_IN_COMMANDS: &[&str] = &[
    "is", "are", "was", "were", "be", "been", "isnt", "arent", "wasnt", "me", "you", "my", "your",
    "our", "we", "they", "i", "im", "it", "its", "when", "can", "could", "would", "should", "will",
    "wont", "into", "later", "the", "a", "an", "and", "but", "so", "then", "please", "again",
    "why", "what", "how", "not", "dont", "doesnt", "didnt", "has", "have", "had", "for", "about",
    "like", "really",
];

/// Whether `words` (normalised) are a command of `[shell] programs`: a listed program, then
/// one of the words it takes first (a subcommand, or anything for `*`; nothing at all for a
/// program listed alone), at most eight words, none of [`NOT_IN_COMMANDS`].
fn said_as_command(words: &[&str], flags: &[bool], sources: &Sources<'_>) -> bool {
    let Some((program, rest)) = words.split_first() else {
        return false;
    };
    // A flag's letters are no words of a sentence ("docker ps dash a", "ls -a").
    let flag = |i: usize| {
        flags.get(i + 1).copied().unwrap_or(false)
            || i > 0 && matches!(rest[i - 1], "dash" | "minus")
    };
    // A coding agent's own command with its flags first ("claude dash dash continue"; not
    // "claude dot ai", an address).
    let agent = sources
        .words
        .agents
        .iter()
        .any(|a| a.command.first().is_some_and(|c| c == program));
    let first_ok = match (sources.words.shell_programs.get(*program), rest.first()) {
        (Some(_), None) => true,
        (Some(then), Some(word)) => then.iter().any(|t| t == "*" || t == word),
        (None, first) => agent && first.is_some() && (flag(0) || rest[0] == "dash"),
    };
    // Symbols said as words are one word of the command with what they join ("ten dot
    // zero dot zero dot five" is one address).
    let said = rest
        .iter()
        .filter(|w| !matches!(**w, "dot" | "slash" | "dash" | "colon" | "at"))
        .count();
    first_ok
        && said <= 8
        && !rest
            .iter()
            .enumerate()
            .any(|(i, w)| !flag(i) && NOT_IN_COMMANDS.contains(w))
}

/// Words said before a command that are no part of it ("okay git push").
const COMMAND_LEADS: &[&str] = &["okay", "ok", "so", "now", "alright", "and", "do", "a", "an"];

/// A folder said as people say folders in a shell command's slot: the person's own (XDG
/// user directories, "my downloads folder" → `~/Downloads`, "my home folder" → `~`), or
/// another named with "the"/"my" and "folder"/"directory" ("the build folder" → `build`).
/// `None` when `said` is no folder said so.
fn known_folder(said: &str) -> Option<String> {
    const OWN: &[(&str, &str)] = &[
        ("downloads", "~/Downloads"),
        ("download", "~/Downloads"),
        ("documents", "~/Documents"),
        ("docs", "~/Documents"),
        ("pictures", "~/Pictures"),
        ("photos", "~/Pictures"),
        ("music", "~/Music"),
        ("videos", "~/Videos"),
        ("desktop", "~/Desktop"),
        ("templates", "~/Templates"),
        ("public", "~/Public"),
        ("home", "~"),
    ];
    // Cut on the lowercase text, kept as said ("the Projects folder" is `Projects`): the
    // cut words are ASCII, so the lengths agree.
    let lower = said.to_lowercase();
    let lead = ["my ", "the "].iter().find(|a| lower.starts_with(*a));
    let owned = lead.is_some();
    let start = lead.map_or(0, |a| a.len());
    let tail = [" folder", " directory", " dir"]
        .iter()
        .find(|f| lower.len() > start + f.len() && lower.ends_with(*f));
    let foldered = tail.is_some();
    let end = said.len() - tail.map_or(0, |f| f.len());
    if lower.len() != said.len() || !said.is_char_boundary(start) || !said.is_char_boundary(end) {
        return None;
    }
    let name = said[start..end].trim();
    if let Some((_, path)) = OWN.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
        return (owned || foldered).then(|| (*path).to_owned());
    }
    (owned && foldered && !name.is_empty() && !name.contains(' ')).then(|| spoken_symbols(name))
}

/// A shell command said without a verb while a terminal is focused: a phrase of
/// `[shell.phrases]` ("go up one directory" → `cd ..`, "cd into src" → `cd src`), a topic
/// of `[shell.intents]` asked about ("how much disk space is left" → `df -h`), or words
/// opening with a program of `[shell] programs` ("git pull", "cargo test please"), as said.
fn bare_command(sources: &Sources<'_>, spoken: &Spoken<'_>) -> Option<Matched> {
    if let Some(m) = conversion(sources, spoken) {
        return Some(m);
    }
    let skip = |mut first: usize, leads: &[&str]| {
        while spoken
            .words
            .get(first)
            .is_some_and(|w| leads.contains(&w.text.as_str()))
        {
            first += 1;
        }
        first
    };
    let first = skip(spoken.first, COMMAND_LEADS);
    // "sudo apt update": a command said as root is the command after it, run with sudo.
    if let Some(elevate) = spoken
        .words
        .get(first)
        .map(|w| w.text.as_str())
        .filter(|w| matches!(*w, "sudo" | "doas"))
    {
        let mut m = bare_command_from(sources, spoken, first + 1)?;
        let command = m.args.get("command").and_then(Value::as_str)?;
        let elevated = format!("{elevate} {command}");
        m.message = format!("run {elevated:?} in the terminal");
        m.args["command"] = Value::String(elevated);
        return Some(m);
    }
    // "start htop", "show the git log dash dash oneline": a verb that only says to run it,
    // tried when the words as said are no command ("show hidden files" is one).
    bare_command_from(sources, spoken, first)
        .or_else(|| bare_command_from(sources, spoken, skip(first, RUN_LEADS)))
}

/// Formats a file is converted to, as said, with their extensions.
const FORMATS: &[(&str, &str)] = &[
    ("pdf", "pdf"),
    ("a pdf", "pdf"),
    ("word", "docx"),
    ("word document", "docx"),
    ("docx", "docx"),
    ("markdown", "md"),
    ("md", "md"),
    ("html", "html"),
    ("a web page", "html"),
    ("plain text", "txt"),
    ("text", "txt"),
    ("txt", "txt"),
    ("odt", "odt"),
    ("open document", "odt"),
    ("libreoffice", "odt"),
    ("epub", "epub"),
    ("an ebook", "epub"),
    ("latex", "tex"),
    ("csv", "csv"),
    ("mp3", "mp3"),
    ("wav", "wav"),
    ("flac", "flac"),
    ("ogg", "ogg"),
    ("mp4", "mp4"),
    ("mkv", "mkv"),
    ("webm", "webm"),
    ("gif", "gif"),
    ("png", "png"),
    ("jpg", "jpg"),
    ("jpeg", "jpg"),
    ("webp", "webp"),
];

/// Which converter a format belongs to.
fn converter_of(extension: &str) -> Option<&'static str> {
    match extension {
        "md" | "markdown" | "docx" | "odt" | "html" | "txt" | "epub" | "tex" | "rst" | "org" => {
            Some("pandoc")
        }
        "doc" | "xlsx" | "xls" | "ods" | "pptx" | "ppt" | "odp" | "rtf" => Some("libreoffice"),
        "mp3" | "wav" | "flac" | "ogg" | "m4a" | "opus" | "mp4" | "mkv" | "webm" | "mov"
        | "avi" => Some("ffmpeg"),
        "png" | "jpg" | "jpeg" | "webp" | "gif" | "bmp" | "tiff" | "svg" => Some("magick"),
        _ => None,
    }
}

/// "convert notes dot md to a word file with pandoc", "turn contract dot docx into a pdf":
/// a file converted by the tool of its formats (pandoc for documents, LibreOffice for office
/// files to PDF, ffmpeg for audio and video, ImageMagick for images), or the tool said;
/// the output beside it with the new extension.
fn conversion(sources: &Sources<'_>, spoken: &Spoken<'_>) -> Option<Matched> {
    let said = spoken.raw.trim().trim_end_matches(['.', '!', '?']);
    let lower = said.to_lowercase();
    let verb = ["convert ", "turn ", "change "]
        .iter()
        .find(|v| lower.starts_with(*v))?;
    let rest = &lower[verb.len()..];
    let (file, target) = match rest.find(" into ") {
        Some(at) => (&rest[..at], &rest[at + " into ".len()..]),
        None => {
            let at = rest.rfind(" to ")?;
            (&rest[..at], &rest[at + " to ".len()..])
        }
    };
    let (target, tool) = match [" with ", " using "]
        .iter()
        .find_map(|w| target.find(w).map(|at| (at, w.len())))
    {
        Some((at, len)) => (&target[..at], Some(target[at + len..].trim())),
        None => (target, None),
    };
    let target = target
        .trim()
        .trim_end_matches(" format")
        .trim_end_matches(" file")
        .trim_end_matches(" document")
        .trim();
    // "a pdf" and "a web page" are names of their own; "a word file" is "word".
    let format = |said: &str| FORMATS.iter().find(|(f, _)| *f == said).map(|(_, e)| *e);
    let to = format(target).or_else(|| {
        let bare = ["a ", "an ", "the "]
            .iter()
            .find_map(|a| target.strip_prefix(a))?;
        format(bare)
    })?;
    let input = spoken_symbols(file.trim());
    if input.contains(char::is_whitespace) {
        return None;
    }
    let (stem, from) = input.rsplit_once('.')?;
    if stem.is_empty() || from == to {
        return None;
    }
    let output = format!("{stem}.{to}");
    let tool = match tool {
        Some(t) if t.contains("pandoc") => "pandoc",
        Some(t) if t.contains("libre") || t.contains("office") => "libreoffice",
        Some(t) if t.contains("ffmpeg") || t.contains("f f m peg") => "ffmpeg",
        Some(t) if t.contains("magick") || t.contains("image") => "magick",
        Some(_) => return None,
        None => match (converter_of(from)?, to) {
            ("pandoc" | "libreoffice", "pdf") if from != "md" => "libreoffice",
            ("libreoffice", _) => "libreoffice",
            (tool, _) => tool,
        },
    };
    let command = match tool {
        "pandoc" => format!("pandoc {input} -o {output}"),
        "libreoffice" => format!("libreoffice --headless --convert-to {to} {input}"),
        "ffmpeg" => format!("ffmpeg -i {input} {output}"),
        _ => format!("magick {input} {output}"),
    };
    let message = format!("convert {input} to {output} with {tool}: run {command:?}");
    Some(terminal_step(sources, &command, message))
}

/// Verbs said before a command that only ask for it to run ("start htop", "show me the git
/// log"), and the articles after them.
const RUN_LEADS: &[&str] = &["start", "launch", "show", "me", "the", "open", "up"];

/// [`bare_command`] from word `first` on.
fn bare_command_from(sources: &Sources<'_>, spoken: &Spoken<'_>, first: usize) -> Option<Matched> {
    let last = command_end(spoken, first);
    let said: Vec<&str> = spoken.words[first..last]
        .iter()
        .map(|w| w.text.as_str())
        .collect();
    // Which words were said as a flag ("-a": a dash right before the word as written).
    let said_flags: Vec<bool> = (first..last)
        .map(|i| {
            let at = spoken.words[i].raw.start;
            spoken.raw[..at].ends_with('-') || spoken.raw[at..].starts_with('-')
        })
        .collect();
    let phrase = said.join(" ");
    // A slot takes one name (a file, a folder): "change into my pajamas" is no command,
    // nor is "cd into it".
    let one_name = |raw: &str| -> Option<String> {
        let raw = raw.trim().trim_end_matches(['.', ',']);
        if let Some(folder) = known_folder(raw) {
            return Some(folder);
        }
        let name = spoken_symbols(raw);
        (!name.is_empty()
            && !name.contains(char::is_whitespace)
            && !matches!(
                name.to_lowercase().as_str(),
                "it" | "this"
                    | "that"
                    | "there"
                    | "here"
                    | "the"
                    | "my"
                    | "a"
                    | "an"
                    | "another"
                    | "other"
                    | "again"
                    | "above"
                    | "below"
                    | "up"
                    | "down"
                    | "and"
                    | "then"
                    | "structure"
                    | "view"
                    | "tree"
                    | "list"
                    | "icon"
                    | "name"
            ))
        .then_some(name)
    };
    // Of the phrases with a slot that fit, the one with the most words of its own wins (the
    // table is a map: "go to {x} folder" and "go to the folder {x}" must not depend on its
    // order), then the first by text.
    let slotted = || {
        sources
            .words
            .shell_phrases
            .iter()
            .filter_map(|(said_as, run)| {
                let (head, tail) = said_as.split_once(" {x}")?;
                let tail = tail.trim_start();
                let rest = strip_word_prefix(&phrase, head).filter(|r| !r.is_empty())?;
                let n_tail = match tail {
                    "" => 0,
                    tail => {
                        strip_word_suffix(rest, tail).filter(|r| !r.trim().is_empty())?;
                        tail.split(' ').count()
                    }
                };
                let n = head.split(' ').count();
                let end = last.checked_sub(n_tail).filter(|end| *end > first + n)?;
                let name = one_name(&spoken.raw[spoken.raw_start(first + n)..spoken.raw_end(end)])?;
                Some((said_as, run.replace("{x}", &name)))
            })
            .max_by(|(a, _), (b, _)| a.len().cmp(&b.len()).then_with(|| b.cmp(a)))
            .map(|(_, command)| command)
    };
    let command = if let Some(command) = sources.words.shell_phrases.get(&phrase) {
        command.clone()
    } else if let Some(command) = slotted() {
        command
    } else if let Some(command) = sources.words.shell_intent(&phrase) {
        command.to_owned()
    } else if said_as_command(&said, &said_flags, sources) {
        let said = spoken.raw[spoken.raw_start(first)..spoken.raw_end(last)].trim();
        // A recogniser's sentence end, not a path's dot ("git add ." keeps it).
        let said = match said.strip_suffix(['.', ',']) {
            Some(cut) if cut.ends_with(|c: char| c.is_alphanumeric()) => cut,
            _ => said,
        };
        // The recogniser capitalises a sentence's first word; the program's name is lower
        // case ("Cargo test" runs `cargo test`).
        let (program, rest) = said.split_once(' ').unwrap_or((said, ""));
        let program = program.to_lowercase();
        let mut rest = spoken_symbols(rest);
        // "ssh root at ten dot zero dot zero dot five": a remote login's user at its host.
        if matches!(program.as_str(), "ssh" | "scp" | "rsync" | "mosh" | "sftp")
            && let Some((user, host)) = rest.split_once(" at ")
            && !user.contains(' ')
            && !user.is_empty()
        {
            rest = format!("{user}@{}", host.trim_start());
        }
        format!("{program} {rest}").trim_end().to_owned()
    } else {
        return None;
    };
    // Said without "run", a command is one simple command: what joins, chains or
    // substitutes commands (";", "&&", "|", "$(", "`", redirections) needs "run".
    if command.is_empty()
        || command.chars().any(|c| c.is_control() || is_invisible(c))
        || command.contains([';', '&', '|', '$', '`', '>', '<', '(', ')', '\\'])
    {
        return None;
    }
    let message = format!("run {command:?} in the terminal");
    Some(terminal_step(sources, &command, message))
}

/// Rule `terminal`: "run ls -la", "execute git status" with a terminal focused → op
/// `terminal {command}` (off by default and always confirmed, by the runner's policy); with
/// none focused, `needs_terminal`. "run \<application\>" is the launch rule's, earlier.
pub fn terminal(sources: &Sources<'_>, raw: &str) -> Option<Result<Matched, Escalation>> {
    let spoken = Spoken::new(raw);
    let terminal_focused = focused_profile(sources).is_some_and(|p| p.kind == Kind::Terminal);
    // "run the tests with cargo": a phrase of `[shell.phrases]` that opens with "run".
    if terminal_focused
        && spoken.after_verb(TERMINAL_VERBS).is_some()
        && let Some(m) = bare_command(sources, &spoken)
    {
        return Some(Ok(m));
    }
    let after = match spoken.after_verb(TERMINAL_VERBS) {
        Some(after) => after,
        // Said without "run", with a terminal focused: a shell idiom said in words, or a
        // command opening with a program's name ("git pull", "okay cargo test").
        None if terminal_focused => return bare_command(sources, &spoken).map(Ok),
        None => return None,
    };
    if after >= spoken.words.len() {
        return None;
    }
    // Everything after the verb, as said: symbols ("cd ..", "ls *", "echo $?") are the
    // command too.
    // A "please" said after the command is politeness, not an argument ("run git pull
    // please"), and so is where it runs ("run ls in the terminal"); other trailing words
    // are kept, since a command may end in anything.
    let last = command_end(&spoken, after);
    let end = if last == spoken.words.len() {
        spoken.raw.len()
    } else {
        spoken.raw_end(last)
    };
    let mut command = spoken.raw[spoken.raw_start(after)..end]
        .trim()
        .trim_end_matches(',')
        .trim_end();
    // A recogniser's sentence period, not ".." or a path's dot.
    if command.ends_with('.')
        && !command.ends_with("..")
        && command[..command.len() - 1]
            .chars()
            .last()
            .is_some_and(char::is_alphanumeric)
    {
        command = command[..command.len() - 1].trim_end();
    }
    // Quotes around the whole command only.
    for (open, close) in [('"', '"'), ('\u{201c}', '\u{201d}'), ('`', '`')] {
        if let Some(inner) = command
            .strip_prefix(open)
            .and_then(|c| c.strip_suffix(close))
            .filter(|c| !c.contains(open) && !c.contains(close) && !c.trim().is_empty())
        {
            command = inner.trim();
            break;
        }
    }
    if command.is_empty() {
        return None;
    }
    let written = spoken_symbols(command);
    let command = written.as_str();
    if command.chars().any(|c| c.is_control() || is_invisible(c)) {
        return Some(Err(Escalation {
            reason: "incomplete",
            message: "a terminal command is one line, without control or invisible characters"
                .into(),
        }));
    }
    if !focused_profile(sources).is_some_and(|p| p.kind == Kind::Terminal) {
        // A wipe is refused however it was said: "focus a terminal" would invite it again.
        // (With a terminal focused the step is planned, and the router refuses it whole.)
        if let Some(refused) = refuse_wipe(command) {
            return Some(Err(refused));
        }
        return Some(Err(Escalation {
            reason: "needs_terminal",
            message: format!("running {command:?} needs a terminal to be focused"),
        }));
    }
    let message = format!("run {command:?} in the terminal");
    Some(Ok(terminal_step(sources, command, message)))
}

/// The shell command `raw` says without "run" ("git pull", "check disk space" → `df -h`), as
/// the `terminal` rule would type it with a terminal focused; `None` when it says none. For
/// [`crate::explain`]: with no terminal focused such a phrase needs one, it is not unknown.
pub(crate) fn shell_command(sources: &Sources<'_>, raw: &str) -> Option<String> {
    let spoken = Spoken::new(raw);
    let m = bare_command(sources, &spoken)?;
    m.args
        .get("command")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The `terminal` step of `command` in the terminal that is focused now: the action plugin
/// focuses it again before it types (a confirmation asked in between may have moved the
/// focus).
fn terminal_step(sources: &Sources<'_>, command: &str, message: String) -> Matched {
    let mut args = json!({"command": command});
    if let Some(app) = sources.context.and_then(|c| c.focused_app_id.clone()) {
        args["app"] = Value::String(app);
    }
    Matched {
        rule: "terminal",
        op: "terminal",
        message,
        args,
        confirm: false,
    }
}

/// The refusal of a shell command that [`wipes_the_system`] (reason `refused`); `None` for
/// others. One wording wherever a wipe is caught: planned, typed, or said with no terminal.
pub fn refuse_wipe(command: &str) -> Option<Escalation> {
    let why = wipes_the_system(command)?;
    Some(Escalation {
        reason: "refused",
        message: format!(
            "{command:?} {why}; Utter does not run or type that for a voice (type it yourself if you mean it)"
        ),
    })
}

/// Why a shell command would wipe the system, the home folder or a disk (`rm -rf /`, `rm -r
/// ~`, `mkfs`, `dd of=/dev/sda`, a write to a disk device, `chmod -R 777 /`, a fork bomb),
/// `None` for others. A misheard or half-heard command must never be one of these; the
/// policy's confirmation comes after the plan, and a tired "yes" is one click away.
pub fn wipes_the_system(command: &str) -> Option<&'static str> {
    let words: Vec<&str> = command.split_whitespace().collect();
    let words: Vec<&str> = match words.first() {
        Some(&("sudo" | "doas")) => words[1..].to_vec(),
        _ => words,
    };
    const ROOTS: &[&str] = &[
        "/", "/*", "~", "~/", "~/*", "$HOME", "$HOME/", "/home", "/etc", "/usr", "/boot",
    ];
    // The same said in words, as a recogniser writes a request ("rm -rf on my home
    // directory", "rm -r everything"): a word that names the home folder, the system or all
    // of it is taken as that, not as a file of that name.
    const ROOT_WORDS: &[&str] = &[
        "home",
        "root",
        "everything",
        "system",
        "computer",
        "disk",
        "drive",
        "all",
    ];
    let targets_root = |args: &[&str]| {
        args.iter().any(|a| {
            ROOTS.contains(a)
                || a.starts_with("--no-preserve-root")
                || ROOT_WORDS.contains(&a.trim_end_matches(['.', ',', '!']).to_lowercase().as_str())
        })
    };
    // -r, -R, -rf, --recursive: said in words, a flag has no case ("dash r" for -R).
    let recursive = |args: &[&str]| {
        args.iter().any(|a| {
            *a == "--recursive"
                || (a.starts_with('-') && !a.starts_with("--") && a.contains(['r', 'R']))
        })
    };
    match words.as_slice() {
        ["rm", args @ ..] if recursive(args) && targets_root(args) => {
            Some("would delete the whole system or home folder")
        }
        ["chmod" | "chown", args @ ..] if recursive(args) && targets_root(args) => {
            Some("would change every file of the system or home folder")
        }
        [program, ..]
            if program.starts_with("mkfs")
                || *program == "wipefs"
                || *program == "shred" && command.contains("/dev/") =>
        {
            Some("would erase a disk")
        }
        // "of=/dev/sda", and a device said in words that were not all written ("of=dev
        // nvme zero n one").
        ["dd", args @ ..]
            if args
                .iter()
                .any(|a| a.starts_with("of=/dev/") || a.starts_with("of=dev")) =>
        {
            Some("would overwrite a disk")
        }
        _ if command.contains(":(){") || command.replace(' ', "").contains(":(){:|:&};:") => {
            Some("is a fork bomb")
        }
        _ if command.contains("> /dev/sd")
            || command.contains(">/dev/sd")
            || command.contains("> /dev/nvme") =>
        {
            Some("would overwrite a disk")
        }
        _ => None,
    }
}

/// Rule `aimed_input`: "firefox type hello", "foot press enter", "type hello in kitty": an
/// in-app step aimed at the application a profile names, which the action plugin focuses
/// first (its `app` argument).
pub fn aimed_input(text: &str, sources: &Sources<'_>, raw: &str) -> Option<Matched> {
    for profile in sources.profiles.iter() {
        // "in slack type on my way" too.
        for phrase in aimed_at(text, |name| profile.is_named(name), true) {
            // The raw words of the phrase: the utterance without the application's words.
            let raw_phrase = raw_part(raw, phrase)?;
            if let Some(mut matched) = crate::inapp::plan(raw_phrase)
                && matches!(matched.op, "key" | "type_text")
            {
                let app = aimed_app_id(profile, sources);
                matched.args["app"] = Value::String(app.to_owned());
                matched.message = format!("{} in {}", matched.message, profile.name);
                return Some(matched);
            }
        }
    }
    // An open window named by its app_id or its desktop entry's name ("in slack type on my
    // way"): typing and keys go to it.
    let context = sources.context?;
    // Each spoken name is looked up among the installed applications once, whatever the
    // number of windows it is compared with.
    let found: std::cell::RefCell<
        std::collections::HashMap<String, Option<crate::apps::AppEntry>>,
    > = Default::default();
    let installed = |name: &str| {
        found
            .borrow_mut()
            .entry(name.to_owned())
            .or_insert_with(|| sources.apps.find(name))
            .clone()
    };
    // Profiled applications too: their installed entry may call them otherwise than their
    // profile does ("in text editor type …" for GNOME Text Editor, whose entry says "Text
    // Editor").
    for app_id in &context.app_ids {
        let own = compact(&normalize(app_id));
        let named = |name: &str| {
            let spoken = compact(name);
            !spoken.is_empty()
                && (spoken == own || installed(name).is_some_and(|a| a.has_app_id(app_id)))
        };
        for phrase in aimed_at(text, named, true) {
            let Some(raw_phrase) = raw_part(raw, phrase) else {
                continue;
            };
            if let Some(mut matched) = crate::inapp::plan(raw_phrase)
                && matches!(matched.op, "key" | "type_text")
            {
                matched.args["app"] = Value::String(app_id.clone());
                matched.message = format!("{} in {app_id}", matched.message);
                return Some(matched);
            }
        }
    }
    None
}

/// The stretch of `raw` whose normalised words are `phrase`'s, if there is one.
pub(crate) fn raw_part<'r>(raw: &'r str, phrase: &str) -> Option<&'r str> {
    let spoken = Spoken::new(raw);
    let want: Vec<&str> = phrase.split(' ').collect();
    let words: Vec<&str> = spoken.words.iter().map(|w| w.text.as_str()).collect();
    let start = (0..=words.len().checked_sub(want.len())?)
        .find(|&i| words[i..i + want.len()] == want[..])?;
    let end = start + want.len();
    Some(raw[spoken.raw_start(start)..spoken.raw_end(end)].trim())
}

#[cfg(test)]
mod tests {
    use super::stepwise;

    #[test]
    fn a_step_by_one_is_previous_or_next() {
        assert_eq!(
            stepwise("go back one slide").as_deref(),
            Some("previous slide")
        );
        assert_eq!(stepwise("back a page").as_deref(), Some("previous page"));
        assert_eq!(
            stepwise("skip ahead one slide").as_deref(),
            Some("next slide")
        );
        assert_eq!(stepwise("one slide forward").as_deref(), Some("next slide"));
        assert_eq!(stepwise("go back two slides"), None);
        assert_eq!(stepwise("go back"), None);
        assert_eq!(stepwise("back one"), None);
    }
}
