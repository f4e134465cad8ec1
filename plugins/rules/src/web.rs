//! The web family: a site of the catalog named after an opening verb ("open reddit",
//! "reddit in a new tab", "spotify in the browser"), and an address said as a host name or
//! a local development server ("localhost port 3000").

use crate::numbers;
use crate::plan::Matched;
use crate::sites::{Catalog, site_forms};
use crate::text::{is_hostname, strip_word_prefix, strip_word_suffix};
use utter_protocol::serde_json::json;

/// Verbs that open a web site or a host name, longest first so "show me" wins over "show".
pub(crate) const SITE_VERBS: &[&str] = &[
    "navigate to",
    "take me to",
    "browse to",
    "check out",
    "show me",
    "open up",
    "pull up",
    "put on",
    "go to",
    "goto",
    "visit",
    "check",
    "open",
    "show",
];

/// Words after a site that ask for a new tab ("open reddit in a new tab"): the step is
/// `open_url` (a new tab) instead of `ensure_url` (the tab showing it, if one does).
const NEW_TAB: &[&str] = &["in a new tab", "in new tab", "in another tab", "in a tab"];

/// Words after a name that say the web is meant ("open spotify in the browser"): the site's
/// `web_names` count too ([`Catalog::lookup_web`]).
const ON_THE_WEB: &[&str] = &[
    "in the browser",
    "in a browser",
    "in my browser",
    "on the web",
    "website",
    "web site",
    "web app",
    // "switch to my netflix tab": the site's tab is the site.
    "tab",
    "browser tab",
];

/// The site a target names ("reddit", "reddit in a new tab", "spotify in the browser") and
/// whether a new tab was asked for.
pub(crate) fn site_target<'c>(
    target: &str,
    catalog: &'c Catalog,
) -> Option<(&'c crate::sites::Site, bool)> {
    let mut target = target;
    let mut new_tab = false;
    for words in NEW_TAB {
        if let Some(rest) = strip_word_suffix(target, words).filter(|r| !r.is_empty()) {
            target = rest;
            new_tab = true;
            break;
        }
    }
    for words in ON_THE_WEB {
        if let Some(rest) = strip_word_suffix(target, words).filter(|r| !r.is_empty()) {
            return catalog.lookup_web(rest).map(|s| (s, new_tab));
        }
    }
    catalog
        .lookup(target)
        .or_else(|| new_tab.then(|| catalog.lookup_web(target)).flatten())
        .map(|s| (s, new_tab))
}

/// True when an installed application's `Name` or `GenericName` is `target` itself
/// (without "the", "my") and the site was found by another of its names: "my calendar" is
/// the Calendar application (or Merkuro, whose GenericName is Calendar) before Google
/// Calendar; "google calendar" stays the site.
pub(crate) fn an_app_is_named(
    target: &str,
    site: &crate::sites::Site,
    sources: &crate::plan::Sources<'_>,
) -> bool {
    let spoken = ["the ", "my ", "a "]
        .iter()
        .find_map(|a| target.strip_prefix(a))
        .unwrap_or(target);
    let said = crate::text::compact(spoken);
    crate::text::name_key(&site.name) != said
        && sources.apps.all().iter().any(|a| {
            crate::text::name_key(&a.name) == said
                || a.generic_name
                    .as_deref()
                    .is_some_and(|g| crate::text::name_key(g) == said)
        })
}

/// The step that opens `site`: in a new tab (`open_url`), or the tab showing it if a browser
/// has one, else a new one (`ensure_url`).
pub(crate) fn open_site(site: &crate::sites::Site, new_tab: bool) -> Matched {
    if new_tab {
        return Matched {
            rule: "open_site",
            op: "open_url",
            args: json!({"url": site.url}),
            message: format!("open {} ({}) in a new tab", site.name, site.url),
            confirm: false,
        };
    }
    open_page(site, &site.url)
}

/// "r slash homelab", "the homelab subreddit": a subreddit of Reddit (one word, letters,
/// digits and underscores), its page as a Reddit page. `target` is normalised.
pub(crate) fn subreddit(target: &str, catalog: &crate::sites::Catalog) -> Option<Matched> {
    let words: Vec<&str> = target.split(' ').collect();
    let reddit = catalog.lookup("reddit")?;
    let name = match words.as_slice() {
        ["r", "slash", name] | ["r", name] | ["slash", "r", "slash", name] => *name,
        ["the", name, "subreddit"] | [name, "subreddit"] | ["subreddit", name] => *name,
        // "the we are the music makers subreddit": a name said in words is written as one,
        // with or without underscores (r/wearethemusicmakers, r/linux_gaming), which speech
        // does not tell: Reddit's own search for communities finds it.
        [said @ .., "subreddit"] if said.len() > 1 => {
            let said = said.strip_prefix(&["the"]).unwrap_or(said);
            let mut step = open_page(
                reddit,
                &format!(
                    "https://www.reddit.com/search/?q={}&type=communities",
                    said.join("+")
                ),
            );
            step.message = format!("find the {} subreddit on Reddit", said.join(" "));
            return Some(step);
        }
        _ => return None,
    };
    let valid = (2..=21).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid.then(|| open_page(reddit, &format!("https://www.reddit.com/r/{name}")))
}

/// The step that shows `url` of `site` (its home, or a page: "my github notifications"):
/// the tab showing the site if a browser has one, at `url`, else a new one (`ensure_url`).
pub(crate) fn open_page(site: &crate::sites::Site, url: &str) -> Matched {
    Matched {
        rule: "open_site",
        op: "ensure_url",
        args: json!({"url": url, "site": site.name}),
        message: format!("open {} ({url})", site.name),
        confirm: false,
    }
}

/// "localhost port 3000", "localhost colon 8080", "local host 5173", "localhost three
/// thousand" ([`spoken_port`]): the development server
/// on this machine, over plain http (what `npm run dev` and the like print).
pub(crate) fn local_address(target: &str) -> Option<String> {
    let rest = strip_word_prefix(target, "localhost")
        .or_else(|| strip_word_prefix(target, "local host"))?;
    let rest = ["port ", "colon ", "on port ", ""]
        .iter()
        .find_map(|p| rest.strip_prefix(p))?;
    let words: Vec<&str> = rest.split(' ').filter(|w| !w.is_empty()).collect();
    let port = spoken_port(&words)?;
    Some(format!("http://localhost:{port}"))
}

/// A port said in words: "three thousand", "eight thousand eighty", "eight zero eight
/// zero", "five one seven three", "three thousand and one"; 1–65535.
fn spoken_port(words: &[&str]) -> Option<u16> {
    let digits = numbers::digits(&words.join(" "));
    let parts: Vec<&str> = digits.split(' ').filter(|w| *w != "and").collect();
    let value = |w: &str| w.parse::<u32>().ok();
    let port = match parts.as_slice() {
        [] => return None,
        [one] => value(one)?,
        [thousands, "thousand", rest @ ..] => {
            let below: u32 = match rest {
                [] => 0,
                [a] => value(a)?,
                [a, b] if value(a)? % 10 == 0 && value(b)? < 10 => value(a)? + value(b)?,
                _ => return None,
            };
            (below < 1000).then_some(())?;
            value(thousands)? * 1000 + below
        }
        // Said digit by digit.
        many if many
            .iter()
            .all(|w| w.len() == 1 && w.chars().all(|c| c.is_ascii_digit())) =>
        {
            many.concat().parse().ok()?
        }
        _ => return None,
    };
    u16::try_from(port).ok().filter(|p| *p > 0)
}

/// The address a target says, after an opening verb: a development server on this machine
/// ([`local_address`]) or a host name ("example.com"), as an `ensure_url` step.
pub(crate) fn address(target: &str) -> Option<Matched> {
    // "grafana on localhost port three thousand": what runs there, then where.
    let local = local_address(target).or_else(|| {
        [" on ", " at "].iter().find_map(|on| {
            let (_, place) = target.split_once(on)?;
            local_address(place)
        })
    });
    let (url, site) = if let Some(url) = local {
        let site = url.trim_start_matches("http://").to_owned();
        (url, site)
    } else {
        let host = site_forms(target).into_iter().find(|f| is_hostname(f))?;
        (format!("https://{host}"), host)
    };
    Some(Matched {
        rule: "open_domain",
        op: "ensure_url",
        message: format!("open {url}"),
        args: json!({"url": url, "site": site}),
        confirm: false,
    })
}
