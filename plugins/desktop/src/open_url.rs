//! The `open_url` op: open an `http`, `https` or `mailto` URL in the user's preferred
//! application. `ensure_url` ([`crate::ensure`]) opens through [`open`] when it finds no
//! browser window to reuse.
//!
//! The xdg-desktop-portal (`org.freedesktop.portal.OpenURI`) is tried first when a session
//! bus is reachable and the portal is running or activatable; without one, or when the portal
//! call fails, `xdg-open <url>` is run (argument list, no shell), detached. Its exit status
//! is reported when it ends within [`XDG_OPEN_WAIT`]; a handler that keeps running (a
//! browser started in the foreground) is reported as started.

use crate::bus;
use crate::portal;
use crate::spawn;
use crate::{invalid_params, plugin_error};
use serde::Deserialize;
use serde_json::{Value, json};
use std::time::Duration;
use utter_protocol::ErrorObject;

/// Schemes this plugin opens.
pub const ALLOWED_SCHEMES: [&str; 3] = ["http", "https", "mailto"];

/// Longest URL accepted, in bytes.
const MAX_URL_BYTES: usize = 8192;

/// How long to wait for `xdg-open` to exit before reporting it as started.
pub const XDG_OPEN_WAIT: Duration = Duration::from_secs(5);

/// `{url}` of `open_url`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UrlArgs {
    /// An absolute `http`, `https` or `mailto` URL.
    pub url: String,
}

/// The JSON Schema of [`UrlArgs`].
pub fn args_schema() -> Value {
    json!({
        "type": "object",
        "required": ["url"],
        "additionalProperties": false,
        "properties": {"url": url_schema()}
    })
}

/// The JSON Schema of one `url` argument (shared with `ensure_url`).
pub fn url_schema() -> Value {
    json!({
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_URL_BYTES,
        "pattern": "^(?i:https?://[^\\s/?#]+|mailto:\\S)",
        "description": "An absolute http, https or mailto URL."
    })
}

/// Check a URL: an allowed scheme, no whitespace or control characters, a host for http(s).
/// Returns the lowercased scheme.
///
/// # Errors
///
/// `-32602` saying what is wrong; a refused scheme carries `data: {allowed: [..]}`.
pub fn check_url(url: &str) -> Result<String, ErrorObject> {
    let allowed = ALLOWED_SCHEMES.join(", ");
    if url.len() > MAX_URL_BYTES {
        return Err(invalid_params(format!(
            "the URL is {} bytes long; at most {MAX_URL_BYTES} are accepted",
            url.len()
        )));
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(invalid_params(
            "the URL contains whitespace or control characters; percent-encode them (a space is %20)",
        ));
    }
    let scheme = url.split_once(':').map(|(scheme, _)| scheme).filter(|s| {
        let mut chars = s.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    });
    let Some(scheme) = scheme else {
        return Err(invalid_params(format!(
            "{url:?} is not an absolute URL (no scheme); allowed schemes: {allowed}"
        ))
        .with_data(json!({"allowed": ALLOWED_SCHEMES})));
    };
    let scheme = scheme.to_ascii_lowercase();
    if !ALLOWED_SCHEMES.contains(&scheme.as_str()) {
        return Err(invalid_params(format!(
            "the URL scheme {scheme:?} is not allowed; allowed schemes: {allowed}"
        ))
        .with_data(json!({"allowed": ALLOWED_SCHEMES})));
    }
    let rest = &url[scheme.len() + 1..];
    if scheme == "mailto" {
        if rest.is_empty() {
            return Err(invalid_params("a mailto: URL needs an address"));
        }
    } else {
        let host = rest
            .strip_prefix("//")
            .map(|r| r.split(['/', '?', '#']).next().unwrap_or(""))
            .unwrap_or("");
        if host.is_empty() {
            return Err(invalid_params(format!(
                "{url:?} has no host; write it as {scheme}://host/path"
            )));
        }
    }
    Ok(scheme)
}

/// Run `open_url`.
///
/// Result: `{ok, dry_run, detail, url, via: "portal" | "xdg-open", ...}`; with `xdg-open`
/// also `portal_skipped` (why the portal was not used) and, when it ended in time,
/// `exit_status`. A dry run through xdg-open names the `handler` it would open the URL with;
/// when there is none its result is a failed step (`ok: false`, `handler: null`, `error`),
/// as the real run would fail.
///
/// # Errors
///
/// `-32602` for a bad URL; `-32000` when nothing could open it (the message says what to
/// install or configure).
pub async fn run(args: UrlArgs, dry_run: bool) -> Result<Value, ErrorObject> {
    open(args.url, dry_run).await
}

/// Open `url` (or, in a dry run, say how it would be opened). The result is [`run`]'s.
///
/// # Errors
///
/// As [`run`].
pub async fn open(url: String, dry_run: bool) -> Result<Value, ErrorObject> {
    let scheme = check_url(&url)?;

    // Try the portal.
    let skipped = match bus::connect().await {
        Err(e) => e.to_string(),
        Ok((conn, _address)) => match portal::available(&conn).await {
            Err(why) => why,
            Ok(()) if dry_run => match portal::version(&conn).await {
                Ok(version) => {
                    return Ok(json!({
                        "ok": true,
                        "dry_run": true,
                        "detail": format!(
                            "would open {url} through the desktop portal \
                             ({} OpenURI, version {version})",
                            portal::PORTAL_NAME
                        ),
                        "url": url,
                        "via": "portal",
                    }));
                }
                Err(why) => why,
            },
            Ok(()) => match portal::open_uri(&conn, &url).await {
                Ok(outcome) => {
                    let how = match outcome {
                        portal::Outcome::Opened => "opened",
                        portal::Outcome::Pending => {
                            "asked the portal to open (no answer yet; it may be asking which app to use)"
                        }
                    };
                    return Ok(json!({
                        "ok": true,
                        "dry_run": false,
                        "detail": format!("{how} {url} through the desktop portal ({} OpenURI)", portal::PORTAL_NAME),
                        "url": url,
                        "via": "portal",
                    }));
                }
                Err(portal::Failure::Cancelled) => {
                    return Err(plugin_error(format!(
                        "opening {url} was cancelled in the desktop portal's dialog"
                    )));
                }
                Err(portal::Failure::Failed(why)) => format!("the portal failed: {why}"),
            },
        },
    };
    tracing::info!(%url, reason = %skipped, "not using the desktop portal");

    // Fall back to xdg-open.
    let Some(xdg_open) = spawn::find_program("xdg-open", None) else {
        return Err(plugin_error(format!(
            "cannot open {url}: the desktop portal is not usable ({skipped}) and xdg-open is \
             not in PATH; install xdg-utils or run xdg-desktop-portal"
        )));
    };
    let argv = vec!["xdg-open".to_owned(), url.clone()];
    if dry_run {
        // Say what xdg-open would hand the URL to; with nothing to hand it to, the real run
        // would fail, so the dry run does too.
        let Some(handler) = url_handler(&scheme).await else {
            let why = format!(
                "the desktop portal is not usable ({skipped}) and no application is set to open {scheme} URLs; set one with `xdg-mime default APP.desktop x-scheme-handler/{scheme}` (e.g. firefox.desktop){}",
                if scheme == "mailto" {
                    ""
                } else {
                    " or set BROWSER"
                }
            );
            // A failed step, not an error: the dry run answers, and what it says is that the
            // real run would fail.
            return Ok(json!({
                "ok": false,
                "dry_run": true,
                "detail": format!("would fail to open {url}: {why}"),
                "url": url,
                "via": "xdg-open",
                "argv": argv,
                "handler": null,
                "portal_skipped": skipped,
                "error": {"code": -32000, "message": format!("cannot open {url}: {why}")},
            }));
        };
        return Ok(json!({
            "ok": true,
            "dry_run": true,
            "detail": format!("would run {} {url}, which opens it with {handler} (desktop portal not used: {skipped})", xdg_open.display()),
            "url": url,
            "via": "xdg-open",
            "argv": argv,
            "handler": handler,
            "portal_skipped": skipped,
        }));
    }
    let child = spawn::start(&spawn::Detached {
        program: &xdg_open,
        argv: &argv,
        cwd: None,
    })
    .map_err(|e| plugin_error(format!("cannot start {}: {e}", xdg_open.display())))?;
    let (exit_status, detail) = wait_a_little(child, &url, &scheme).await?;
    let mut result = json!({
        "ok": true,
        "dry_run": false,
        "detail": format!("{detail} (desktop portal not used: {skipped})"),
        "url": url,
        "via": "xdg-open",
        "argv": argv,
        "portal_skipped": skipped,
    });
    if let Some(code) = exit_status {
        result["exit_status"] = json!(code);
    }
    Ok(result)
}

/// The browsers xdg-open's generic mode tries, in its order, when no default application is
/// set and `BROWSER` is empty (xdg-utils, `open_generic`).
const XDG_OPEN_FALLBACK_BROWSERS: &[&str] = &[
    "x-www-browser",
    "firefox",
    "iceweasel",
    "seamonkey",
    "mozilla",
    "epiphany",
    "konqueror",
    "chromium",
    "chromium-browser",
    "google-chrome",
    "www-browser",
    "links2",
    "elinks",
    "links",
    "lynx",
    "w3m",
];

/// What xdg-open would open a `scheme` URL with, as far as can be told without opening
/// one: the default application of `x-scheme-handler/SCHEME` (`xdg-mime query default`,
/// which reads `mimeapps.list`), else for http(s) `$BROWSER`, else the first of xdg-open's
/// fallback browsers found in `PATH`. `None`: nothing would open it.
async fn url_handler(scheme: &str) -> Option<String> {
    if let Some(xdg_mime) = spawn::find_program("xdg-mime", None) {
        let query = tokio::process::Command::new(&xdg_mime)
            .args(["query", "default", &format!("x-scheme-handler/{scheme}")])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .output();
        if let Ok(Ok(out)) = tokio::time::timeout(XDG_OPEN_WAIT, query).await {
            let default = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            if out.status.success() && !default.is_empty() {
                return Some(format!(
                    "{default} (the default for x-scheme-handler/{scheme})"
                ));
            }
        }
    }
    if scheme == "mailto" {
        return None;
    }
    if let Some(browser) = std::env::var("BROWSER")
        .ok()
        .filter(|b| !b.trim().is_empty())
    {
        return Some(format!("$BROWSER ({browser})"));
    }
    XDG_OPEN_FALLBACK_BROWSERS
        .iter()
        .find_map(|b| spawn::find_program(b, None))
        .map(|path| format!("{} (xdg-open's fallback browser)", path.display()))
}

/// Wait up to [`XDG_OPEN_WAIT`] for `xdg-open`. Returns the exit status when it ended in
/// time (`None`: still running, reaped later) and the sentence for `detail`.
///
/// # Errors
///
/// `-32000` when it exited unsuccessfully, explained with the codes of xdg-open(1).
async fn wait_a_little(
    mut child: tokio::process::Child,
    url: &str,
    scheme: &str,
) -> Result<(Option<i32>, String), ErrorObject> {
    let status = match tokio::time::timeout(XDG_OPEN_WAIT, child.wait()).await {
        Err(_) => {
            spawn::reap_in_background(child, format!("xdg-open {url}"));
            return Ok((
                None,
                format!(
                    "started xdg-open {url}; it was still running after {} s",
                    XDG_OPEN_WAIT.as_secs()
                ),
            ));
        }
        Ok(Err(e)) => {
            return Err(plugin_error(format!(
                "started xdg-open {url} but could not wait for it: {e}"
            )));
        }
        Ok(Ok(status)) => status,
    };
    if status.success() {
        return Ok((
            Some(0),
            format!("ran xdg-open {url}; it exited with status 0"),
        ));
    }
    let meaning = match status.code() {
        Some(1) => "error in command line syntax",
        Some(2) => "one of the files passed does not exist",
        Some(3) => "a required tool could not be found",
        Some(4) => "the action failed",
        _ => "unexpected failure",
    };
    Err(plugin_error(format!(
        "xdg-open {url} failed with {} ({meaning}); check that a default application is set \
         (xdg-mime query default x-scheme-handler/{scheme}) and that a display is available (WAYLAND_DISPLAY or \
         DISPLAY)",
        spawn::describe_status(status)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_urls_pass() {
        assert_eq!(
            check_url("https://www.youtube.com").ok().as_deref(),
            Some("https")
        );
        assert_eq!(
            check_url("HTTP://example.org/a?b#c").ok().as_deref(),
            Some("http")
        );
        assert_eq!(
            check_url("mailto:someone@example.org").ok().as_deref(),
            Some("mailto")
        );
    }

    #[test]
    fn other_schemes_are_refused_with_the_allowed_list() {
        for url in [
            "javascript:alert(1)",
            "file:///etc/passwd",
            "ftp://x.org",
            "data:,x",
        ] {
            let e = check_url(url).expect_err(url);
            assert_eq!(e.code, -32602, "{url}");
            assert!(e.message.contains("http, https, mailto"), "{}", e.message);
            assert_eq!(
                e.data,
                Some(json!({"allowed": ["http", "https", "mailto"]}))
            );
        }
    }

    #[test]
    fn malformed_urls_are_refused() {
        for url in [
            "",
            "www.youtube.com",
            "https:",
            "https:/x",
            "https:///path",
            "https://a b",
            "https://a\nb",
            "mailto:",
            ":foo",
            "1http://x",
        ] {
            assert_eq!(check_url(url).map_err(|e| e.code), Err(-32602), "{url:?}");
        }
        assert!(check_url(&format!("https://x.org/{}", "a".repeat(9000))).is_err());
    }
}
