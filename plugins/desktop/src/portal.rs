//! The xdg-desktop-portal `OpenURI` call, with plain zbus.
//!
//! `org.freedesktop.portal.OpenURI.OpenURI(s parent_window, s uri, a{sv} options) -> o`
//! returns a request object; the outcome arrives later as its
//! `org.freedesktop.portal.Request.Response(u response, a{sv} results)` signal, with
//! `response` 0 for success, 1 when the user cancelled a dialog, 2 for any other failure.
//! The request path is predictable from our unique name and the `handle_token` option, so we
//! subscribe to it *before* calling, and cannot miss a fast answer.
//!
//! Why zbus and not `ashpd`: this is one method and one signal, the plugin already needs
//! zbus for MPRIS, and calling it directly adds no dependency and puts every wait under a
//! limit we choose (a portal may keep a chooser dialog open for as long as the user likes,
//! and a voice command should get an answer within the runner's timeout).

use crate::bus::bounded;
use futures::StreamExt;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use zbus::Connection;
use zbus::names::BusName;
use zbus::proxy::CacheProperties;
use zbus::zvariant::{ObjectPath, OwnedObjectPath, OwnedValue, Value};

/// The portal frontend's bus name.
pub const PORTAL_NAME: &str = "org.freedesktop.portal.Desktop";
/// The portal frontend's object.
pub const PORTAL_PATH: &str = "/org/freedesktop/portal/desktop";

/// Limit for quick questions to the bus daemon or the portal.
const QUICK: Duration = Duration::from_secs(2);
/// Limit for the `OpenURI` call itself, which may D-Bus-activate the portal first.
const CALL: Duration = Duration::from_secs(5);
/// How long to wait for the `Response` signal before reporting "accepted, no answer yet".
const RESPONSE: Duration = Duration::from_secs(3);

#[zbus::proxy(
    interface = "org.freedesktop.portal.OpenURI",
    default_service = "org.freedesktop.portal.Desktop",
    default_path = "/org/freedesktop/portal/desktop",
    gen_blocking = false
)]
trait OpenUri {
    /// Ask the portal to open `uri` in the user's preferred application.
    #[zbus(name = "OpenURI")]
    fn open_uri(
        &self,
        parent_window: &str,
        uri: &str,
        options: HashMap<&str, Value<'_>>,
    ) -> zbus::Result<OwnedObjectPath>;

    /// The interface version.
    #[zbus(property, name = "version")]
    fn version(&self) -> zbus::Result<u32>;
}

#[zbus::proxy(
    interface = "org.freedesktop.portal.Screenshot",
    default_service = "org.freedesktop.portal.Desktop",
    default_path = "/org/freedesktop/portal/desktop",
    gen_blocking = false
)]
trait Screenshot {
    /// Ask for a screenshot; the answer's `uri` names the file it was saved to.
    fn screenshot(
        &self,
        parent_window: &str,
        options: HashMap<&str, Value<'_>>,
    ) -> zbus::Result<OwnedObjectPath>;
}

#[zbus::proxy(
    interface = "org.freedesktop.portal.Request",
    default_service = "org.freedesktop.portal.Desktop",
    gen_blocking = false
)]
trait Request {
    /// The outcome of a portal request.
    #[zbus(signal)]
    fn response(&self, response: u32, results: HashMap<String, OwnedValue>) -> zbus::Result<()>;
}

/// Whether the portal can be asked at all: its name has an owner or is activatable.
///
/// # Errors
///
/// A sentence saying why not (absent, or the bus daemon did not answer).
pub async fn available(conn: &Connection) -> Result<(), String> {
    let dbus = bounded(QUICK, "bus daemon", zbus::fdo::DBusProxy::new(conn)).await?;
    let name = BusName::from_static_str(PORTAL_NAME).map_err(|e| e.to_string())?;
    if bounded(QUICK, "NameHasOwner", dbus.name_has_owner(name)).await? {
        return Ok(());
    }
    let activatable = bounded(QUICK, "ListActivatableNames", dbus.list_activatable_names()).await?;
    if activatable.iter().any(|n| n.as_str() == PORTAL_NAME) {
        return Ok(());
    }
    Err(format!(
        "{PORTAL_NAME} has no owner and is not activatable on the session bus"
    ))
}

/// Ask the portal for its `OpenURI` version: proof that it answers (dry runs use this).
///
/// # Errors
///
/// Why the portal did not answer.
pub async fn version(conn: &Connection) -> Result<u32, String> {
    let proxy = bounded(
        QUICK,
        "OpenURI proxy",
        OpenUriProxy::builder(conn)
            .cache_properties(CacheProperties::No)
            .build(),
    )
    .await?;
    bounded(CALL, "OpenURI version", proxy.version()).await
}

/// How an `OpenURI` request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// `Response` 0: the portal opened it.
    Opened,
    /// The call was accepted but no `Response` came within the wait; the portal may be
    /// showing a chooser dialog.
    Pending,
}

/// An `OpenURI` request that did not open anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// `Response` 1: the user dismissed the portal's dialog. Not worth a fallback.
    Cancelled,
    /// The call failed or `Response` was 2; a fallback may work.
    Failed(String),
}

static TOKENS: AtomicU64 = AtomicU64::new(0);

/// A fresh `handle_token` and the request path the portal will answer on (documented as
/// `/org/freedesktop/portal/desktop/request/SENDER/TOKEN`, SENDER the unique name without
/// its `:` and with `.` as `_`), so the answer can be subscribed to before calling.
fn request_path(conn: &Connection) -> Result<(String, String), Failure> {
    let token = format!(
        "utter_{}_{}",
        std::process::id(),
        TOKENS.fetch_add(1, Ordering::Relaxed)
    );
    let sender = conn
        .unique_name()
        .map(|n| n.trim_start_matches(':').replace('.', "_"))
        .ok_or_else(|| Failure::Failed("the bus gave us no unique name".to_owned()))?;
    let expected = format!("{PORTAL_PATH}/request/{sender}/{token}");
    Ok((token, expected))
}

/// One portal request: subscribe to its answer on the path the portal will use, make the
/// call (`call` gets the `handle_token` to pass), and follow the path the portal answered
/// with when it differs (portals before 0.9 ignore `handle_token`).
async fn request<F, Fut>(conn: &Connection, call: F) -> Result<ResponseStream, Failure>
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = Result<OwnedObjectPath, String>>,
{
    let (token, expected) = request_path(conn)?;
    let responses = subscribe(conn, &expected).await.map_err(Failure::Failed)?;
    let handle = call(token).await.map_err(Failure::Failed)?;
    if handle.as_str() != expected {
        return subscribe(conn, handle.as_str())
            .await
            .map_err(Failure::Failed);
    }
    Ok(responses)
}

/// Open `uri` through the portal and wait (bounded) for the outcome.
///
/// # Errors
///
/// [`Failure::Cancelled`] or [`Failure::Failed`] with the reason.
pub async fn open_uri(conn: &Connection, uri: &str) -> Result<Outcome, Failure> {
    let mut responses = request(conn, |token| async move {
        let proxy = bounded(
            QUICK,
            "OpenURI proxy",
            OpenUriProxy::builder(conn)
                .cache_properties(CacheProperties::No)
                .build(),
        )
        .await?;
        let options = HashMap::from([("handle_token", Value::from(token.as_str()))]);
        bounded(CALL, "OpenURI", proxy.open_uri("", uri, options)).await
    })
    .await?;

    match tokio::time::timeout(RESPONSE, responses.next()).await {
        Err(_) => Ok(Outcome::Pending),
        Ok(None) => Err(Failure::Failed(
            "the bus connection closed before the portal answered".to_owned(),
        )),
        Ok(Some(signal)) => answered(&signal).map(|_| Outcome::Opened),
    }
}

/// The results of a portal's `Response` that says 0 (done); 1 is [`Failure::Cancelled`]
/// (the person dismissed the portal's dialog), anything else [`Failure::Failed`].
fn answered(signal: &Response) -> Result<HashMap<String, OwnedValue>, Failure> {
    let args = signal
        .args()
        .map_err(|e| Failure::Failed(format!("unreadable portal Response: {e}")))?;
    match args.response {
        0 => Ok(args.results),
        1 => Err(Failure::Cancelled),
        other => Err(Failure::Failed(format!(
            "the portal answered {other} (failure)"
        ))),
    }
}

async fn subscribe(conn: &Connection, path: &str) -> Result<ResponseStream, String> {
    let path = ObjectPath::try_from(path.to_owned()).map_err(|e| e.to_string())?;
    let builder = RequestProxy::builder(conn)
        .path(path)
        .map_err(|e| e.to_string())?
        .cache_properties(CacheProperties::No);
    let request = bounded(QUICK, "Request proxy", builder.build()).await?;
    bounded(QUICK, "subscribing to Response", request.receive_response()).await
}

/// How long a portal screenshot may take, from the call to its answer: the portal may ask
/// the person once whether Utter may take screenshots.
pub const SCREENSHOT_WAIT: Duration = Duration::from_secs(30);

/// Take a screenshot of the whole screen through the portal
/// (`org.freedesktop.portal.Screenshot.Screenshot` with `interactive: false`, `modal:
/// false`): the way on desktops where `grim` cannot capture (GNOME, KDE Plasma). The
/// portal saves the PNG itself (GNOME: in `~/Pictures/Screenshots`) and answers its
/// `file://` URI; the returned path is that file, checked to exist.
///
/// # Errors
///
/// [`Failure::Cancelled`] when the person refused (the portal's dialog, or a permission
/// denied), [`Failure::Failed`] with the reason otherwise (no portal, no Screenshot
/// interface, no answer within [`SCREENSHOT_WAIT`], an answer that names no local file).
pub async fn screenshot(conn: &Connection) -> Result<std::path::PathBuf, Failure> {
    let mut responses = request(conn, |token| async move {
        let proxy = bounded(
            QUICK,
            "Screenshot proxy",
            ScreenshotProxy::builder(conn)
                .cache_properties(CacheProperties::No)
                .build(),
        )
        .await?;
        let options = HashMap::from([
            ("handle_token", Value::from(token.as_str())),
            ("interactive", Value::from(false)),
            ("modal", Value::from(false)),
        ]);
        bounded(CALL, "Screenshot", proxy.screenshot("", options)).await
    })
    .await?;
    let signal = match tokio::time::timeout(SCREENSHOT_WAIT, responses.next()).await {
        Err(_) => {
            return Err(Failure::Failed(format!(
                "the portal gave no screenshot within {} s",
                SCREENSHOT_WAIT.as_secs()
            )));
        }
        Ok(None) => {
            return Err(Failure::Failed(
                "the bus connection closed before the portal answered".to_owned(),
            ));
        }
        Ok(Some(signal)) => signal,
    };
    let results = answered(&signal)?;
    let uri = results
        .get("uri")
        .and_then(|v| String::try_from(v.try_clone().ok()?).ok())
        .ok_or_else(|| Failure::Failed("the portal's answer has no uri".to_owned()))?;
    let path = file_path(&uri).ok_or_else(|| {
        Failure::Failed(format!(
            "the portal's screenshot is not a local file: {}",
            utter_protocol::text::escape_unprintable(&uri, 200).0
        ))
    })?;
    if !path.is_file() {
        return Err(Failure::Failed(format!(
            "the portal named {} but there is no such file",
            path.display()
        )));
    }
    Ok(path)
}

/// The local path of a `file://` URI, percent-decoded (`None` for another scheme, a host
/// other than empty or `localhost`, a relative path or an invalid escape).
pub fn file_path(uri: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    let rest = uri.strip_prefix("file://")?;
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    if !rest.starts_with('/') {
        return None;
    }
    let mut bytes = Vec::with_capacity(rest.len());
    let mut it = rest.bytes();
    while let Some(b) = it.next() {
        if b == b'%' {
            let hi = (it.next()? as char).to_digit(16)?;
            let lo = (it.next()? as char).to_digit(16)?;
            bytes.push(u8::try_from(hi * 16 + lo).ok()?);
        } else {
            bytes.push(b);
        }
    }
    // No NUL, and nothing a message would print as a control sequence.
    if bytes.iter().any(|b| b.is_ascii_control()) {
        return None;
    }
    Some(std::path::PathBuf::from(std::ffi::OsString::from_vec(
        bytes,
    )))
}

#[cfg(test)]
mod tests {
    use super::file_path;
    use std::path::Path;

    #[test]
    fn file_uris_become_paths() {
        assert_eq!(
            file_path("file:///home/a/Pictures/Screenshot%20from%202026.png").as_deref(),
            Some(Path::new("/home/a/Pictures/Screenshot from 2026.png"))
        );
        assert_eq!(
            file_path("file://localhost/tmp/x.png").as_deref(),
            Some(Path::new("/tmp/x.png"))
        );
        for bad in [
            "http://x/y.png",
            "file://host/x.png",
            "file://relative",
            "file:///a%zz",
            "file:///a%00b",
            "file:///tmp/a%0Ab%1B[31m.png",
            "file:///a%4",
        ] {
            assert_eq!(file_path(bad), None, "{bad}");
        }
    }
}
