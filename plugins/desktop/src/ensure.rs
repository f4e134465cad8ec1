//! The `ensure_url {url, site?}` op: bring up a browser window that already shows the site,
//! and open the URL only when there is none.
//!
//! 1. The plugin asks the runner for the desktop context (`host.context`, PROTOCOL.md §9.6)
//!    on the connection it was called on.
//! 2. Among the context's `windows` it looks for one whose `app_id` is a known web browser
//!    ([`BROWSER_APP_IDS`]) and whose title mentions `site` as a word ([`title_mentions`]).
//!    The site defaults to the URL's host without `www.`.
//! 3. It asks the runner to focus that window: `host.action {op: "focus_app", args: {app,
//!    window_id}}`, which passes the runner's gate like any other step and is served by the
//!    compositor plugin.
//! 4. When there is no such window, no context plugin, a callback fails or the focus fails, it
//!    opens the URL like `open_url` ([`crate::open_url::open`]) and says why in `detail`.
//!
//! Window titles are written by whatever runs in the window (here: a web page), so they are
//! untrusted. A title only *selects* one of the windows the context lists: the window is
//! named to `focus_app` by its id and by its app_id, which must equal one of the known
//! browser names, and no text of a title ever reaches an argument or the `detail`.
//!
//! A dry run reads the context and says what it would do; it neither focuses nor opens.

use crate::open_url::{self, check_url};
use crate::{invalid_params, plugin_error};
use serde::Deserialize;
use serde_json::{Value, json};
use std::time::Duration;
use utter_protocol::{Connection, ErrorObject};

/// The app_ids (Wayland) and X11 classes of the web browsers whose windows may be reused,
/// lowercase; compared ignoring case. The only list of browsers in this plugin.
pub const BROWSER_APP_IDS: &[&str] = &[
    "firefox",
    "org.mozilla.firefox",
    "firefox-esr",
    "firefox-developer-edition",
    "firefoxdeveloperedition",
    "nightly",
    "librewolf",
    "io.gitlab.librewolf-community",
    "waterfox",
    "floorp",
    "zen",
    "chromium",
    "chromium-browser",
    "org.chromium.chromium",
    "google-chrome",
    "google-chrome-beta",
    "google-chrome-unstable",
    "com.google.chrome",
    "brave-browser",
    "com.brave.browser",
    "microsoft-edge",
    "microsoft-edge-beta",
    "com.microsoft.edge",
    "epiphany",
    "org.gnome.epiphany",
    "vivaldi",
    "vivaldi-stable",
    "com.vivaldi.vivaldi",
    "opera",
    "qutebrowser",
    "org.qutebrowser.qutebrowser",
    "falkon",
    "org.kde.falkon",
    "midori",
    "org.midori_browser.midori",
    "konqueror",
    "org.kde.konqueror",
    "yandex-browser",
    "thorium-browser",
    "ungoogled-chromium",
];

/// How long to wait for the runner's `host.context` answer (the runner itself gives the
/// context plugin at most 1 s).
pub const CONTEXT_WAIT: Duration = Duration::from_secs(2);

/// How long to wait for `host.action focus_app` (the compositor plugin watches up to 1.5 s
/// for the focus change).
pub const FOCUS_WAIT: Duration = Duration::from_secs(3);

/// At most this many windows of a snapshot are looked at; the rest are ignored.
pub const MAX_WINDOWS: usize = 1024;

/// At most this many characters of a title are searched for the site name.
pub const MAX_TITLE_CHARS: usize = 4096;

/// Longest `site` accepted, in bytes.
const MAX_SITE_BYTES: usize = 256;

/// Longest piece of foreign text (an error message from the runner) quoted in `detail`.
const MAX_QUOTED_CHARS: usize = 200;

/// `{url, site?}` of `ensure_url`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnsureArgs {
    /// An absolute `http`, `https` or `mailto` URL.
    pub url: String,
    /// The site's name as it appears in browser window titles ("YouTube"); the URL's host
    /// without `www.` when absent.
    #[serde(default)]
    pub site: Option<String>,
}

/// The JSON Schema of [`EnsureArgs`].
pub fn args_schema() -> Value {
    json!({
        "type": "object",
        "required": ["url"],
        "additionalProperties": false,
        "properties": {
            "url": open_url::url_schema(),
            "site": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_SITE_BYTES,
                "description": "The site's name as browser window titles show it (\"YouTube\"); a window of a known browser whose title mentions it is focused instead of opening the URL again. Default: the URL's host."
            }
        }
    })
}

/// Whether `app_id` is one of [`BROWSER_APP_IDS`], ignoring case.
pub fn is_browser(app_id: &str) -> bool {
    BROWSER_APP_IDS
        .iter()
        .any(|known| known.eq_ignore_ascii_case(app_id))
}

/// The browser window chosen for reuse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// The compositor's window id, as the context gave it.
    pub window_id: u64,
    /// The window's app_id, exactly as the context gave it (one of [`BROWSER_APP_IDS`] but
    /// for case).
    pub app_id: String,
    /// How many browser windows mention the site (the chosen one included).
    pub matches: usize,
}

/// Characters that are dropped from titles before matching and from anything quoted in a
/// `detail`: C0/C1 controls, and the invisible formatting characters (zero-width ones, bidi
/// embeddings, overrides and isolates, the BOM) that can disguise text.
fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{061C}'
                | '\u{180E}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{2069}'
                | '\u{FEFF}'
                | '\u{FFF9}'..='\u{FFFB}'
        )
}

/// `text` with hidden characters replaced by spaces, runs of whitespace collapsed, at most
/// `max` characters (an ellipsis marks a cut): safe to put in a `detail`.
pub fn sanitize(text: &str, max: usize) -> String {
    let visible: String = text
        .chars()
        .map(|c| if is_hidden(c) { ' ' } else { c })
        .collect();
    let words = visible.split_whitespace().collect::<Vec<_>>().join(" ");
    if words.chars().count() <= max {
        return words;
    }
    let mut cut: String = words.chars().take(max).collect();
    cut.push('…');
    cut
}

/// The form titles and site names are compared in: hidden characters as spaces, lowercase,
/// at most [`MAX_TITLE_CHARS`] characters of the input.
fn fold(text: &str) -> String {
    text.chars()
        .take(MAX_TITLE_CHARS)
        .map(|c| if is_hidden(c) { ' ' } else { c })
        .flat_map(char::to_lowercase)
        .collect()
}

/// Whether `title` mentions `site` as a word: ignoring case, and with no letter or digit
/// right before or after it ("YouTube" is in "Video - YouTube — Mozilla Firefox", not in
/// "MyYouTubeFan"). A site name needs two letters or digits to be looked for at all.
pub fn title_mentions(title: &str, site: &str) -> bool {
    let site = fold(site);
    let site = site.trim();
    if site.chars().filter(|c| c.is_alphanumeric()).count() < 2 {
        return false;
    }
    let title = fold(title);
    title.match_indices(site).any(|(at, found)| {
        let before = title[..at].chars().next_back();
        let after = title[at + found.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

/// A context scalar: `host.context` wraps each as `{value, provenance}`; a bare scalar is
/// taken as it is.
fn scalar(v: Option<&Value>) -> Option<&Value> {
    let v = v?;
    match v {
        Value::Object(map) => map.get("value"),
        other => Some(other),
    }
}

/// Choose the browser window to reuse from a `host.context` answer
/// (`{snapshot, provenance, source, stale}`, PROTOCOL.md §9.6).
///
/// Among windows with an integer id, an app_id of [`BROWSER_APP_IDS`] and a title that
/// [`title_mentions`] the site, the focused one wins, else the first in the context's order.
///
/// # Errors
///
/// Why no window was chosen, as a sentence for `detail` (it quotes no title).
pub fn choose_window(answer: &Value, site: &str) -> Result<Choice, String> {
    let Some(answer) = answer.as_object() else {
        return Err("the runner's host.context answer is not an object".into());
    };
    let snapshot = match answer.get("snapshot") {
        None => return Err("the runner's host.context answer has no snapshot".into()),
        Some(Value::Null) => {
            return Err("no context plugin runs, so the open windows are unknown".into());
        }
        Some(s) => s,
    };
    let Some(windows) = snapshot.get("windows").and_then(Value::as_array) else {
        return Err("the desktop context has no list of windows".into());
    };
    let mut browsers = 0;
    let mut elsewhere = 0;
    let mut found: Vec<(u64, String, bool)> = Vec::new();
    for window in windows.iter().take(MAX_WINDOWS) {
        let field = |key: &str| scalar(window.get(key));
        let id = field("id")
            .or_else(|| field("window_id"))
            .and_then(Value::as_u64);
        let app_id = field("app_id").and_then(Value::as_str);
        let title = field("title").and_then(Value::as_str).unwrap_or("");
        let (Some(id), Some(app_id)) = (id, app_id) else {
            continue;
        };
        let mentions = title_mentions(title, site);
        if !is_browser(app_id) {
            elsewhere += usize::from(mentions);
            continue;
        }
        browsers += 1;
        if mentions {
            let focused = field("focused").and_then(Value::as_bool) == Some(true);
            found.push((id, app_id.to_owned(), focused));
        }
    }
    let site = sanitize(site, MAX_QUOTED_CHARS);
    let matches = found.len();
    let best = found
        .iter()
        .position(|(_, _, focused)| *focused)
        .unwrap_or(0);
    if let Some((window_id, app_id, _)) = found.into_iter().nth(best) {
        return Ok(Choice {
            window_id,
            app_id,
            matches,
        });
    }
    let also = match elsewhere {
        0 => String::new(),
        1 => format!("; 1 window of another app mentions {site}, but only browsers are reused"),
        n => format!("; {n} windows of other apps mention {site}, but only browsers are reused"),
    };
    Err(match browsers {
        0 => format!("no window of a known web browser is open{also}"),
        1 => format!("the one browser window's title does not mention {site}{also}"),
        n => format!("none of the {n} browser windows has {site} in its title{also}"),
    })
}

/// The site name `ensure_url` looks for: `site` when given (checked), else the URL's host
/// without `www.` (`None` for a `mailto:` URL, which no browser window shows).
///
/// # Errors
///
/// `-32602` for an empty or too long `site`, or one with control characters.
pub fn site_name(url: &str, site: Option<&str>) -> Result<Option<String>, ErrorObject> {
    if let Some(site) = site {
        let trimmed = site.trim();
        if trimmed.is_empty() {
            return Err(invalid_params("ensure_url: \"site\" must not be empty"));
        }
        if site.len() > MAX_SITE_BYTES {
            return Err(invalid_params(format!(
                "ensure_url: \"site\" is {} bytes long; at most {MAX_SITE_BYTES} are accepted",
                site.len()
            )));
        }
        if site.chars().any(is_hidden) {
            return Err(invalid_params(
                "ensure_url: \"site\" contains control or invisible formatting characters",
            ));
        }
        return Ok(Some(trimmed.to_owned()));
    }
    let Some(rest) = url.split_once("://").map(|(_, rest)| rest) else {
        return Ok(None);
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    let host = host.split(':').next().unwrap_or("").to_ascii_lowercase();
    let host = host.strip_prefix("www.").unwrap_or(&host).to_owned();
    Ok((!host.is_empty()).then_some(host))
}

/// Ask the runner for the context and choose a window; `Err` says why none was chosen.
async fn find_window(runner: Option<&Connection>, site: &str) -> Result<Choice, String> {
    let Some(runner) = runner else {
        return Err("no connection to the runner to read the desktop context".into());
    };
    let answer = runner
        .request("host.context", json!({}), Some(CONTEXT_WAIT))
        .await
        .map_err(|e| {
            // Short: this lands in the detail of every "open <site>" outside a compositor
            // session (the README's first command).
            format!(
                "no desktop context: {}",
                sanitize(first_clause(strip_context_plugin_prefix(&e.message)), 80)
            )
        })?;
    choose_window(&answer, site)
}

/// The first clause of an error message, what went wrong without how to fix it ("no
/// compositor found" of "no compositor found: none of NIRI_SOCKET, … is set …"): the fix is
/// the compositor's to give, and the detail of an opened site is not the place for it.
fn first_clause(message: &str) -> &str {
    let end = [": ", "; ", ". "]
        .iter()
        .filter_map(|sep| message.find(sep))
        .min()
        .unwrap_or(message.len());
    message[..end].trim_end_matches('.')
}

/// The reason inside the runner's `host.context` error, without its "the context plugin
/// \"X\" failed: " preamble.
fn strip_context_plugin_prefix(message: &str) -> &str {
    message
        .split_once(" failed: ")
        .map_or(message, |(_, reason)| reason)
}

/// The `host.action` params that focus the chosen window.
fn focus_params(choice: &Choice) -> Value {
    json!({
        "op": "focus_app",
        "args": {"app": choice.app_id, "window_id": choice.window_id},
    })
}

/// Ask the runner to focus the chosen window; `Ok` carries the step's `verified`, `Err` why
/// it did not work.
async fn focus(runner: &Connection, choice: &Choice) -> Result<Option<bool>, String> {
    let failed = |why: &str| {
        format!(
            "focusing {} window {} failed: {}",
            choice.app_id,
            choice.window_id,
            sanitize(why, MAX_QUOTED_CHARS)
        )
    };
    let step = runner
        .request("host.action", focus_params(choice), Some(FOCUS_WAIT))
        .await
        .map_err(|e| failed(&e.message))?;
    if let Some(why) = utter_protocol::plugin::step_failure(&step) {
        return Err(failed(why));
    }
    Ok(step
        .get("verified")
        .and_then(Value::as_bool)
        .or_else(|| step.pointer("/result/verified").and_then(Value::as_bool)))
}

/// Run `ensure_url`. `runner` is the connection the request came on (`None` when there is
/// none, in tests).
///
/// Result when a window was reused: `{ok: true, dry_run, detail, url, site, reused: true,
/// via: "focus_app", window_id, app_id, focus: {op, args}, verified?}` (`verified` as the
/// `focus_app` step reported it; absent in a dry run). Otherwise [`open_url::open`]'s result
/// plus `site`, `reused: false` and `reuse_skipped` (why no window was reused, also said in
/// `detail`).
///
/// # Errors
///
/// `-32602` for a bad URL or site; `-32000` when the URL had to be opened and nothing could
/// open it.
pub async fn run(
    args: EnsureArgs,
    dry_run: bool,
    runner: Option<&Connection>,
) -> Result<Value, ErrorObject> {
    check_url(&args.url)?;
    let site = site_name(&args.url, args.site.as_deref())?;
    let url = args.url;
    let skipped = match &site {
        None => "a mailto: URL is not shown in a browser window".to_owned(),
        Some(site) => match find_window(runner, site).await {
            Err(why) => why,
            Ok(choice) => {
                let shown = sanitize(site, MAX_QUOTED_CHARS);
                let what = format!(
                    "the {} window already showing {shown} (window {})",
                    choice.app_id, choice.window_id
                );
                let mut result = json!({
                    "ok": true,
                    "dry_run": dry_run,
                    "url": url,
                    "site": site,
                    "reused": true,
                    "via": "focus_app",
                    "window_id": choice.window_id,
                    "app_id": choice.app_id,
                    "focus": focus_params(&choice),
                });
                if choice.matches > 1 {
                    result["matching_windows"] = choice.matches.into();
                }
                if dry_run {
                    result["detail"] =
                        format!("would focus {what} instead of opening {url}").into();
                    return Ok(result);
                }
                // find_window returned a choice, so there is a runner.
                match runner.map(|r| focus(r, &choice)) {
                    None => "no connection to the runner".to_owned(),
                    Some(attempt) => match attempt.await {
                        Err(why) => why,
                        Ok(verified) => {
                            result["detail"] = match verified {
                                Some(true) => format!("focused {what}"),
                                Some(false) => format!(
                                    "asked to focus {what}, but the focus change was not observed"
                                ),
                                None => format!(
                                    "asked to focus {what}; focus_app did not say whether it took effect"
                                ),
                            }
                            .into();
                            if let Some(verified) = verified {
                                result["verified"] = verified.into();
                            }
                            return Ok(result);
                        }
                    },
                }
            }
        },
    };
    tracing::info!(%url, reason = %skipped, "ensure_url reuses no window");
    // What was done (or would be) comes first; why no open window was used, after it.
    let mut result = open_url::open(url, dry_run).await?;
    if let Some(detail) = result.get("detail").and_then(Value::as_str) {
        result["detail"] =
            format!("{detail} (no open window to switch to instead: {skipped})").into();
    }
    result["site"] = site.map_or(Value::Null, Value::String);
    result["reused"] = false.into();
    result["reuse_skipped"] = skipped.into();
    Ok(result)
}

/// The chord that closes the current tab in every browser of [`BROWSER_APP_IDS`].
pub const CLOSE_TAB_CHORD: &str = "ctrl+w";

/// How long `close_tab` watches for the tab to go after pressing [`CLOSE_TAB_CHORD`].
pub const CLOSE_WAIT: Duration = Duration::from_millis(1500);

/// The focused window of a `host.context` answer: `(id, app_id, title)`, scalars unwrapped.
fn focused_window(answer: &Value) -> Option<(u64, String, String)> {
    let focused = answer.pointer("/snapshot/focused")?;
    let id = scalar(focused.get("id"))?.as_u64()?;
    let app_id = scalar(focused.get("app_id"))?.as_str()?.to_owned();
    let title = scalar(focused.get("title"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .chars()
        .take(MAX_TITLE_CHARS)
        .collect();
    Some((id, app_id, title))
}

/// Run `close_tab {url, site?}` (what an undo of an `ensure_url` that opened a page sends):
/// press the browser's close-tab chord in the focused window, only when that window is a
/// browser's whose title mentions the site (the title selects, and the chord is the
/// plugin's own: nothing of the title becomes an argument). Result: `{ok, dry_run, detail,
/// window_id, app_id, chord, verified?}` (`verified`: the window went, or its title no
/// longer mentions the site, within [`CLOSE_WAIT`]).
///
/// # Errors
///
/// `-32602` for a bad URL or site; `-32000` when the desktop cannot be read, the focused
/// window is not a browser showing the site (nothing is pressed then), or the key press
/// failed.
pub async fn close_tab(
    args: EnsureArgs,
    dry_run: bool,
    runner: Option<&Connection>,
) -> Result<Value, ErrorObject> {
    check_url(&args.url)?;
    let Some(site) = site_name(&args.url, args.site.as_deref())? else {
        return Err(plugin_error("a mailto: URL opens no tab to close"));
    };
    let shown = sanitize(&site, MAX_QUOTED_CHARS);
    let Some(runner) = runner else {
        return Err(plugin_error(
            "no connection to the runner to read the desktop context",
        ));
    };
    let read = || async {
        runner
            .request("host.context", json!({}), Some(CONTEXT_WAIT))
            .await
            .map_err(|e| {
                plugin_error(format!(
                    "the desktop context cannot be read: {}",
                    sanitize(&e.message, MAX_QUOTED_CHARS)
                ))
            })
    };
    let answer = read().await?;
    let Some((id, app_id, title)) = focused_window(&answer) else {
        return Err(plugin_error(format!(
            "no window has the focus, so no tab of {shown} was closed"
        )));
    };
    if !is_browser(&app_id) {
        return Err(plugin_error(format!(
            "the focused window ({}) is not a web browser, so no tab of {shown} was closed",
            sanitize(&app_id, MAX_QUOTED_CHARS)
        )));
    }
    if !title_mentions(&title, &site) {
        return Err(plugin_error(format!(
            "the focused {} window no longer shows {shown} (its tab changed), so no tab was closed",
            sanitize(&app_id, MAX_QUOTED_CHARS)
        )));
    }
    let mut result = json!({
        "ok": true, "dry_run": dry_run, "window_id": id, "app_id": app_id,
        "chord": CLOSE_TAB_CHORD, "site": site,
    });
    let what = format!(
        "the {shown} tab of {} window {id}",
        sanitize(&app_id, MAX_QUOTED_CHARS)
    );
    if dry_run {
        result["detail"] = format!("would close {what} with {CLOSE_TAB_CHORD}").into();
        return Ok(result);
    }
    let step = runner
        .request(
            "host.action",
            json!({"op": "key", "args": {"chord": CLOSE_TAB_CHORD, "window_id": id}}),
            Some(FOCUS_WAIT),
        )
        .await
        .map_err(|e| {
            plugin_error(format!(
                "pressing {CLOSE_TAB_CHORD} failed: {}",
                sanitize(&e.message, MAX_QUOTED_CHARS)
            ))
        })?;
    if let Some(why) = utter_protocol::plugin::step_failure(&step) {
        return Err(plugin_error(format!(
            "pressing {CLOSE_TAB_CHORD} failed: {}",
            sanitize(why, MAX_QUOTED_CHARS)
        )));
    }
    let deadline = tokio::time::Instant::now() + CLOSE_WAIT;
    let verified = loop {
        if let Ok(answer) = read().await {
            let windows = answer
                .pointer("/snapshot/windows")
                .and_then(Value::as_array);
            let still = windows.and_then(|all| {
                all.iter()
                    .find(|w| scalar(w.get("id")).and_then(Value::as_u64) == Some(id))
            });
            let gone = windows.is_some() && still.is_none();
            let moved_on = still.is_some_and(|w| {
                !title_mentions(
                    scalar(w.get("title")).and_then(Value::as_str).unwrap_or(""),
                    &site,
                )
            });
            if gone || moved_on {
                break true;
            }
        }
        if tokio::time::Instant::now() >= deadline {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    result["verified"] = verified.into();
    result["detail"] = if verified {
        format!("closed {what} with {CLOSE_TAB_CHORD}; the window no longer shows it")
    } else {
        format!("pressed {CLOSE_TAB_CHORD} in {what}, but the window still shows {shown}")
    }
    .into();
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use utter_protocol::{ConnectionOptions, Incoming, connection::memory_pair};

    /// A window as `host.context` sends it: every scalar as `{value, provenance}`.
    fn tagged(id: u64, app_id: &str, title: &str, focused: bool) -> Value {
        json!({
            "id": {"value": id, "provenance": "screen"},
            "app_id": {"value": app_id, "provenance": "screen"},
            "title": {"value": title, "provenance": "title"},
            "focused": {"value": focused, "provenance": "screen"},
        })
    }

    fn answer(windows: Vec<Value>) -> Value {
        json!({
            "snapshot": {"windows": windows, "focused": null},
            "provenance": "screen",
            "source": "compositor",
            "stale": false,
        })
    }

    #[test]
    fn titles_mention_sites_as_words_ignoring_case() {
        let title = "Some Video - YouTube — Mozilla Firefox";
        assert!(title_mentions(title, "YouTube"));
        assert!(title_mentions(title, "youtube"));
        assert!(title_mentions("YOUTUBE", "YouTube"));
        assert!(title_mentions(
            "(3) Inbox - me@example.org - Gmail",
            "Gmail"
        ));
        assert!(title_mentions("docs.rs - Rust", "docs.rs"));
        assert!(title_mentions("Hacker News — Firefox", "hacker news"));
        assert!(title_mentions("Ärger — Straße", "straße"));
        // Not inside another word, not spread over hidden characters.
        assert!(!title_mentions("MyYouTubeFan", "YouTube"));
        assert!(!title_mentions("YouTubers united", "YouTube"));
        assert!(!title_mentions("You\u{200B}Tube", "YouTube"));
        assert!(!title_mentions("You\u{7}Tube", "YouTube"));
        assert!(!title_mentions(title, "GitHub"));
        // A site name needs two letters or digits.
        assert!(!title_mentions("Home / X", "X"));
        assert!(!title_mentions("anything", " "));
        assert!(!title_mentions("", "YouTube"));
        // Only the first MAX_TITLE_CHARS characters are searched.
        let long = format!("{} YouTube", "a ".repeat(MAX_TITLE_CHARS));
        assert!(!title_mentions(&long, "YouTube"));
    }

    #[test]
    fn the_browser_list_ignores_case() {
        for app in [
            "firefox",
            "Firefox",
            "org.mozilla.firefox",
            "firefox-esr",
            "librewolf",
            "chromium",
            "Chromium-browser",
            "google-chrome",
            "brave-browser",
            "microsoft-edge",
            "epiphany",
            "org.gnome.Epiphany",
            "vivaldi",
            "qutebrowser",
            "falkon",
        ] {
            assert!(is_browser(app), "{app}");
        }
        for app in ["foot", "firefox2", "", "mpv", "org.gnome.Nautilus"] {
            assert!(!is_browser(app), "{app}");
        }
        for known in BROWSER_APP_IDS {
            assert_eq!(*known, known.to_lowercase(), "keep the list lowercase");
        }
    }

    #[test]
    fn the_matching_browser_window_is_chosen() {
        let windows = vec![
            tagged(3, "foot", "YouTube notes", true),
            tagged(5, "chromium", "GitHub — Chromium", false),
            tagged(
                7,
                "firefox",
                "Some Video - YouTube — Mozilla Firefox",
                false,
            ),
        ];
        assert_eq!(
            choose_window(&answer(windows.clone()), "YouTube"),
            Ok(Choice {
                window_id: 7,
                app_id: "firefox".into(),
                matches: 1
            })
        );
        assert_eq!(
            choose_window(&answer(windows.clone()), "GitHub").map(|c| c.window_id),
            Ok(5)
        );
        let why = choose_window(&answer(windows), "Wikipedia").unwrap_err();
        assert_eq!(
            why,
            "none of the 2 browser windows has Wikipedia in its title"
        );
    }

    #[test]
    fn the_focused_match_wins_and_the_app_id_is_kept_as_written() {
        let windows = vec![
            tagged(1, "Firefox", "A - YouTube", false),
            tagged(2, "org.mozilla.firefox", "B - YouTube", true),
        ];
        assert_eq!(
            choose_window(&answer(windows), "youtube"),
            Ok(Choice {
                window_id: 2,
                app_id: "org.mozilla.firefox".into(),
                matches: 2
            })
        );
        // Bare scalars (not tagged) are read too.
        let bare = answer(vec![
            json!({"id": 9, "app_id": "FIREFOX", "title": "YouTube"}),
        ]);
        assert_eq!(
            choose_window(&bare, "YouTube").map(|c| (c.window_id, c.app_id)),
            Ok((9, "FIREFOX".to_owned()))
        );
    }

    #[test]
    fn a_window_of_another_app_is_never_reused() {
        let windows = vec![tagged(
            3,
            "foot",
            "Some Video - YouTube — Mozilla Firefox",
            true,
        )];
        let why = choose_window(&answer(windows), "YouTube").unwrap_err();
        assert_eq!(
            why,
            "no window of a known web browser is open; 1 window of another app mentions \
             YouTube, but only browsers are reused"
        );
        let windows = vec![
            tagged(3, "firefoxx", "YouTube", true),
            tagged(4, "firefox", "Mail", false),
        ];
        assert_eq!(
            choose_window(&answer(windows), "YouTube").unwrap_err(),
            "the one browser window's title does not mention YouTube; 1 window of another \
             app mentions YouTube, but only browsers are reused"
        );
    }

    #[test]
    fn answers_of_the_wrong_shape_choose_nothing() {
        let cases = [
            (
                json!(null),
                "the runner's host.context answer is not an object",
            ),
            (
                json!([1, 2]),
                "the runner's host.context answer is not an object",
            ),
            (
                json!({}),
                "the runner's host.context answer has no snapshot",
            ),
            (
                json!({"snapshot": null, "provenance": "screen"}),
                "no context plugin runs, so the open windows are unknown",
            ),
            (
                json!({"snapshot": 5}),
                "the desktop context has no list of windows",
            ),
            (
                json!({"snapshot": {"windows": {"id": 1}}}),
                "the desktop context has no list of windows",
            ),
        ];
        for (answer, why) in cases {
            assert_eq!(
                choose_window(&answer, "YouTube"),
                Err(why.into()),
                "{answer}"
            );
        }
        // Windows without an integer id or a string app_id are skipped.
        let odd = answer(vec![
            json!({"id": {"value": "7"}, "app_id": "firefox", "title": "YouTube"}),
            json!({"id": -1, "app_id": "firefox", "title": "YouTube"}),
            json!({"id": 1.5, "app_id": "firefox", "title": "YouTube"}),
            json!({"id": 2, "app_id": {"value": ["firefox"]}, "title": "YouTube"}),
            json!({"id": 3, "app_id": "firefox", "title": {"value": 42}}),
            json!("firefox"),
            json!(null),
        ]);
        assert_eq!(
            choose_window(&odd, "YouTube"),
            Err("the one browser window's title does not mention YouTube".into())
        );
    }

    #[test]
    fn huge_snapshots_are_looked_at_only_so_far() {
        let mut windows: Vec<Value> = (0..MAX_WINDOWS as u64)
            .map(|i| tagged(i, "firefox", &"x".repeat(10_000), false))
            .collect();
        windows.push(tagged(99_999, "firefox", "YouTube", true));
        let why = choose_window(&answer(windows), "YouTube").unwrap_err();
        assert!(
            why.contains(&format!("{MAX_WINDOWS} browser windows")),
            "{why}"
        );
    }

    #[test]
    fn detail_text_is_sanitized() {
        assert_eq!(sanitize("a\u{1b}[31mb\nc\u{202E}d", 100), "a [31mb c d");
        assert_eq!(sanitize("  lots   of\tspace ", 100), "lots of space");
        assert_eq!(sanitize("abcdef", 3), "abc…");
        let why = choose_window(&answer(vec![]), "Tube\u{7}").unwrap_err();
        assert!(!why.chars().any(char::is_control), "{why:?}");
    }

    #[test]
    fn the_site_defaults_to_the_host() {
        let name = |url: &str, site: Option<&str>| site_name(url, site).map_err(|e| e.code);
        assert_eq!(
            name("https://www.youtube.com", None),
            Ok(Some("youtube.com".into()))
        );
        assert_eq!(
            name("https://user@Example.ORG:8443/a?b", None),
            Ok(Some("example.org".into()))
        );
        assert_eq!(name("mailto:a@b.org", None), Ok(None));
        assert_eq!(
            name("https://www.youtube.com", Some(" YouTube ")),
            Ok(Some("YouTube".into()))
        );
        assert_eq!(name("https://x.org", Some("  ")), Err(-32602));
        assert_eq!(name("https://x.org", Some("You\u{0}Tube")), Err(-32602));
        assert_eq!(name("https://x.org", Some("You\u{202E}Tube")), Err(-32602));
        assert_eq!(name("https://x.org", Some(&"a".repeat(300))), Err(-32602));
    }

    /// A fake runner on the other end of an in-memory connection: answers `host.context`
    /// with `context` and `host.action` with `action`, and reports each request it got.
    fn fake_runner(
        context: Result<Value, ErrorObject>,
        action: Result<Value, ErrorObject>,
    ) -> (
        Connection,
        tokio::sync::mpsc::UnboundedReceiver<(String, Value)>,
    ) {
        let opts = |label: &str| ConnectionOptions {
            label: label.into(),
            ..Default::default()
        };
        let ((plugin_side, _plugin_incoming), (runner_side, mut incoming)) =
            memory_pair(opts("plugin"), opts("runner"));
        let (seen_tx, seen_rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(message) = incoming.recv().await {
                if let Incoming::Request(request) = message {
                    let answer = match request.method.as_str() {
                        "host.context" => context.clone(),
                        "host.action" => action.clone(),
                        other => Err(ErrorObject::method_not_found(other)),
                    };
                    let _ = seen_tx.send((request.method.clone(), request.params.clone()));
                    let _ = runner_side.respond(request.id, answer).await;
                }
            }
        });
        (plugin_side, seen_rx)
    }

    fn youtube() -> EnsureArgs {
        EnsureArgs {
            url: "https://www.youtube.com".into(),
            site: Some("YouTube".into()),
        }
    }

    #[tokio::test]
    async fn a_matching_window_is_focused_through_the_runner() {
        let context = answer(vec![
            tagged(3, "foot", "notes", true),
            tagged(
                7,
                "firefox",
                "Some Video - YouTube — Mozilla Firefox",
                false,
            ),
        ]);
        let step = json!({"op": "focus_app", "ok": true, "detail": "focused firefox window 7",
            "verified": true, "result": {"ok": true, "verified": true}});
        let (runner, mut seen) = fake_runner(Ok(context), Ok(step));
        let result = run(youtube(), false, Some(&runner)).await.expect("ok");
        assert_eq!(result["reused"], true, "{result}");
        assert_eq!(result["verified"], true, "{result}");
        assert_eq!(result["window_id"], 7, "{result}");
        assert_eq!(
            result["detail"],
            "focused the firefox window already showing YouTube (window 7)"
        );
        assert_eq!(
            seen.recv().await.map(|s| s.0).as_deref(),
            Some("host.context")
        );
        assert_eq!(
            seen.recv().await,
            Some((
                "host.action".to_owned(),
                json!({"op": "focus_app", "args": {"app": "firefox", "window_id": 7}})
            ))
        );
    }

    #[tokio::test]
    async fn a_dry_run_reads_the_context_and_focuses_nothing() {
        let context = answer(vec![tagged(7, "firefox", "YouTube", false)]);
        let (runner, mut seen) = fake_runner(Ok(context), Err(ErrorObject::plugin("unused")));
        let result = run(youtube(), true, Some(&runner)).await.expect("ok");
        assert_eq!(result["reused"], true, "{result}");
        assert_eq!(result["dry_run"], true, "{result}");
        assert_eq!(
            result["detail"],
            "would focus the firefox window already showing YouTube (window 7) instead of \
             opening https://www.youtube.com"
        );
        assert_eq!(
            result["focus"]["args"],
            json!({"app": "firefox", "window_id": 7})
        );
        assert_eq!(
            seen.recv().await.map(|s| s.0).as_deref(),
            Some("host.context")
        );
        // Nothing else was asked.
        drop(runner);
        assert_eq!(seen.recv().await, None);
    }

    #[tokio::test]
    async fn a_refused_focus_or_a_failed_context_falls_back_to_opening() {
        // Dry runs only: the fallback must not really open anything in a unit test.
        let (runner, _seen) = fake_runner(
            Err(ErrorObject::plugin("compositor \u{1b}[2Jgone")),
            Err(ErrorObject::plugin("unused")),
        );
        let result = run(youtube(), true, Some(&runner)).await.expect("ok");
        assert_eq!(result["reused"], false, "{result}");
        let detail = result["detail"].as_str().unwrap_or_default();
        assert!(
            detail.contains("no desktop context: compositor \\u{1b}[2Jgone"),
            "{detail}"
        );
        assert!(!detail.chars().any(char::is_control), "{detail:?}");
        // What would be done first, why no window was used after it.
        assert!(detail.starts_with("would "), "{detail}");
        assert!(
            detail.contains("(no open window to switch to instead: no desktop context"),
            "{detail}"
        );
        assert_eq!(
            first_clause("no compositor found: none of NIRI_SOCKET, SWAYSOCK is set. Run it"),
            "no compositor found"
        );
        assert_eq!(result["url"], "https://www.youtube.com");

        let (runner, _seen) = fake_runner(Ok(json!({"snapshot": null})), Ok(json!({})));
        let result = run(youtube(), true, Some(&runner)).await.expect("ok");
        assert_eq!(result["reused"], false, "{result}");
        assert_eq!(
            result["reuse_skipped"],
            "no context plugin runs, so the open windows are unknown"
        );

        let result = run(youtube(), true, None).await.expect("ok");
        assert_eq!(result["reused"], false, "{result}");

        // A wrong answer to host.context is no reason to fail.
        let (runner, _seen) = fake_runner(Ok(json!("windows")), Ok(json!({})));
        let result = run(youtube(), true, Some(&runner)).await.expect("ok");
        assert_eq!(result["reused"], false, "{result}");
    }

    #[tokio::test]
    async fn a_failed_focus_is_explained() {
        let choice = Choice {
            window_id: 7,
            app_id: "firefox".into(),
            matches: 1,
        };
        let (runner, _seen) = fake_runner(
            Ok(json!({})),
            Err(ErrorObject::new(
                utter_protocol::ErrorCode::Denied,
                "focus_app is disabled\u{7}",
            )),
        );
        assert_eq!(
            focus(&runner, &choice).await,
            // The runner's error text arrives escaped (the connection escapes every peer's
            // error message once, at receipt).
            Err("focusing firefox window 7 failed: focus_app is disabled\\u{7}".into())
        );
        let (runner, _seen) = fake_runner(
            Ok(json!({})),
            Ok(json!({"ok": false, "error": {"code": -32000, "message": "no window 7"}})),
        );
        assert_eq!(
            focus(&runner, &choice).await,
            Err("focusing firefox window 7 failed: no window 7".into())
        );
        let (runner, _seen) = fake_runner(Ok(json!({})), Ok(json!([true])));
        assert!(focus(&runner, &choice).await.is_err());
        let (runner, _seen) = fake_runner(
            Ok(json!({})),
            Ok(json!({"ok": true, "result": {"verified": false}})),
        );
        assert_eq!(focus(&runner, &choice).await, Ok(Some(false)));
    }
}
