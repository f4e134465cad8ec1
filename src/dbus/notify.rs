//! The confirmation door by desktop notification, as the Desktop Notifications Specification
//! 1.2 describes the server `org.freedesktop.Notifications` at `/org/freedesktop/Notifications`.
//!
//! For each pending confirmation the door sends
//! `Notify("Utter", 0, "", "Confirm: <op>", "<summary>\n<exact args JSON>\nfrom <provenance>",
//! ["approve", "Approve", "deny", "Deny"], {"urgency": byte 2}, 0)` (critical urgency, never
//! expires) and waits for the server's answer about *that* notification id:
//!
//! * `ActionInvoked(id, "approve")` → approve, `ActionInvoked(id, "deny")` → deny;
//! * `NotificationClosed(id, 2)` (dismissed by the user) → deny;
//! * `NotificationClosed(id, 1 | 3 | 4)` (expired, closed by a call, other) → no answer: the
//!   door drops out and the other doors (or the timeout) decide.
//!
//! Servers often send these signals to the `Notify` caller only (unicast), so the door listens
//! on the connection that called `Notify`, and accepts a signal only when its sender is the
//! connection that answered the `Notify` call *and* still owns `org.freedesktop.Notifications`;
//! anything else is logged and ignored. A server that is a plugin, or a process a plugin
//! started, is never asked (its notification is withdrawn at once): a plugin could otherwise
//! claim the name while no notification daemon runs and approve its own steps. The server's
//! capabilities are read first: a server
//! without `actions` cannot ask, so the door stays out; with `body-markup`, `&`, `<` and `>` of
//! the body are escaped, so the arguments show exactly as they are.
//!
//! When the door's answer is no longer wanted (another door answered, the timeout passed) its
//! future is dropped, and a guard withdraws the notification with `CloseNotification(id)`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use zbus::fdo;
use zbus::message::Type as MessageType;
use zbus::names::{BusName, OwnedUniqueName};
use zbus::zvariant::Value;
use zbus::{Connection, MatchRule, MessageStream};

use utter_core::confirm::{Door, PendingConfirmation};
use utter_core::runner::Runner;

/// The notification server's well-known name.
pub const SERVER_NAME: &str = "org.freedesktop.Notifications";
/// Its object path.
pub const SERVER_PATH: &str = "/org/freedesktop/Notifications";
/// Its interface.
pub const SERVER_INTERFACE: &str = "org.freedesktop.Notifications";

/// The action keys of the prompt, with their labels.
const ACTIONS: [&str; 4] = ["approve", "Approve", "deny", "Deny"];
/// `NotificationClosed` reason: dismissed by the user.
const CLOSED_BY_USER: u32 = 2;
/// Critical urgency (the hint `urgency` is a byte: 0 low, 1 normal, 2 critical).
const URGENCY_CRITICAL: u8 = 2;
/// How many signals may wait in one door's queue before the oldest are dropped.
const SIGNAL_QUEUE: usize = 64;

/// The door: ask `pending` by notification on `conn`, answer as the module doc says.
pub fn door(conn: Connection) -> Door {
    Arc::new(move |pending: PendingConfirmation| Box::pin(ask(conn.clone(), pending)))
}

/// The prompt's summary line.
pub fn summary_of(pending: &PendingConfirmation) -> String {
    format!(
        "Confirm: {}",
        utter_protocol::text::clip(&pending.request.op, 64)
    )
}

/// The prompt's body: the summary, the exact arguments as JSON, the provenance. All of it
/// escaped ([`utter_protocol::text`]): a summary or an argument cannot add a line, reverse
/// the text or hide a word in what the person approves.
pub fn body_of(pending: &PendingConfirmation) -> String {
    let args = serde_json::to_string(&pending.request.args).unwrap_or_default();
    format!(
        "{}\n{}\nfrom {}",
        utter_protocol::text::clip(&pending.request.summary, 600),
        utter_protocol::text::json_display_safe(&args),
        pending.request.provenance
    )
}

/// Escape the three characters that body markup would read.
fn escape_markup(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            _ => out.push(c),
        }
    }
    out
}

/// Where the notification is: not shown yet, shown (by `server` with `id`), done with, or
/// abandoned before `Notify` answered (then whoever learns the id closes it).
#[derive(Debug, Clone, PartialEq)]
enum Shown {
    Waiting,
    Showing { id: u32, server: OwnedUniqueName },
    Finished,
    Abandoned,
}

/// Withdraws the notification when dropped, unless the server already closed it.
struct Withdraw {
    conn: Connection,
    shown: Arc<Mutex<Shown>>,
}

impl Withdraw {
    fn finished(&self) {
        *self.shown.lock().expect("shown lock") = Shown::Finished;
    }
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        let mut shown = self.shown.lock().expect("shown lock");
        match std::mem::replace(&mut *shown, Shown::Finished) {
            Shown::Showing { id, server } => close_later(&self.conn, id, server),
            Shown::Waiting => *shown = Shown::Abandoned,
            Shown::Finished | Shown::Abandoned => {}
        }
    }
}

/// Call `CloseNotification(id)` on `server` in a task of its own (drop cannot wait).
fn close_later(conn: &Connection, id: u32, server: OwnedUniqueName) {
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let conn = conn.clone();
    handle.spawn(async move {
        let destination = BusName::Unique(server.into());
        match conn
            .call_method(
                Some(destination),
                SERVER_PATH,
                Some(SERVER_INTERFACE),
                "CloseNotification",
                &(id,),
            )
            .await
        {
            Ok(_) => tracing::debug!(id, "notification withdrawn"),
            Err(e) => tracing::debug!(id, error = %e, "withdrawing the notification failed"),
        }
    });
}

async fn capabilities(conn: &Connection) -> zbus::Result<Vec<String>> {
    conn.call_method(
        Some(SERVER_NAME),
        SERVER_PATH,
        Some(SERVER_INTERFACE),
        "GetCapabilities",
        &(),
    )
    .await?
    .body()
    .deserialize()
}

/// Send `Notify` and record who answered with which id. Runs as a task of its own, so that a
/// door dropped while waiting for the answer still has its notification closed.
async fn show(
    conn: Connection,
    summary: String,
    body: String,
    shown: Arc<Mutex<Shown>>,
) -> Option<(u32, OwnedUniqueName)> {
    let hints: HashMap<&str, Value<'_>> = HashMap::from([("urgency", Value::U8(URGENCY_CRITICAL))]);
    let reply = conn
        .call_method(
            Some(SERVER_NAME),
            SERVER_PATH,
            Some(SERVER_INTERFACE),
            "Notify",
            &(
                "Utter",
                0u32,
                "",
                summary.as_str(),
                body.as_str(),
                &ACTIONS[..],
                hints,
                0i32,
            ),
        )
        .await;
    let reply = match reply {
        Ok(reply) => reply,
        Err(e) => {
            tracing::warn!(error = %e, "confirmation by notification: Notify failed");
            return None;
        }
    };
    let id: u32 = match reply.body().deserialize() {
        Ok(id) => id,
        Err(e) => {
            tracing::warn!(error = %e, "confirmation by notification: Notify answered without an id");
            return None;
        }
    };
    let Some(server) = reply
        .header()
        .sender()
        .map(|s| OwnedUniqueName::from(s.to_owned()))
    else {
        tracing::warn!("confirmation by notification: the Notify answer has no sender");
        return None;
    };
    // The server is trusted as the person: never a plugin, nor a process a plugin started
    // (one could claim the name while no notification daemon runs and approve its own steps).
    if let Some(why) = untrusted_server(&conn, &server).await {
        tracing::warn!(server = %server, "confirmation by notification refused: {why}");
        close_later(&conn, id, server);
        return None;
    }
    let mut state = shown.lock().expect("shown lock");
    if *state == Shown::Abandoned {
        *state = Shown::Finished;
        drop(state);
        close_later(&conn, id, server);
        return None;
    }
    *state = Shown::Showing {
        id,
        server: server.clone(),
    };
    Some((id, server))
}

/// Why the notification server `server` may not answer confirmations, if it may not: it is a
/// plugin or a process of one, or its process cannot be told.
async fn untrusted_server(conn: &Connection, server: &OwnedUniqueName) -> Option<String> {
    let bus = match fdo::DBusProxy::new(conn).await {
        Ok(bus) => bus,
        Err(e) => return Some(format!("cannot ask the bus who the server is: {e}")),
    };
    let pid = match bus
        .get_connection_unix_process_id(BusName::Unique(server.as_ref()))
        .await
    {
        Ok(pid) => pid,
        Err(e) => return Some(format!("cannot learn the server's process: {e}")),
    };
    match utter_core::groups::owner_of_process(pid) {
        utter_core::groups::ProcessOwner::Other => None,
        utter_core::groups::ProcessOwner::Plugin(id) => Some(format!(
            "the notification server (pid {pid}) is the plugin {id} or a process it started"
        )),
        utter_core::groups::ProcessOwner::Gone => Some(format!(
            "the notification server's process (pid {pid}) cannot be told apart from a plugin's"
        )),
    }
}

async fn ask(conn: Connection, pending: PendingConfirmation) -> Option<bool> {
    // Listen before asking: the answer can come quickly, and it may be sent to us alone.
    let rule = MatchRule::builder()
        .msg_type(MessageType::Signal)
        .interface(SERVER_INTERFACE)
        .ok()?
        .path(SERVER_PATH)
        .ok()?
        .build();
    let mut signals = match MessageStream::for_match_rule(rule, &conn, Some(SIGNAL_QUEUE)).await {
        Ok(stream) => stream,
        Err(e) => {
            tracing::warn!(error = %e, "confirmation by notification: cannot listen for answers");
            return None;
        }
    };
    let caps = match capabilities(&conn).await {
        Ok(caps) => caps,
        Err(e) => {
            tracing::warn!(error = %e, "confirmation by notification: GetCapabilities failed");
            return None;
        }
    };
    if !caps.iter().any(|c| c == "actions") {
        tracing::info!(
            "confirmation by notification: the notification server has no actions; not asking there"
        );
        return None;
    }
    let mut body = body_of(&pending);
    if caps.iter().any(|c| c == "body-markup") {
        body = escape_markup(&body);
    }
    let shown = Arc::new(Mutex::new(Shown::Waiting));
    let guard = Withdraw {
        conn: conn.clone(),
        shown: shown.clone(),
    };
    let (id, server) = tokio::spawn(show(conn.clone(), summary_of(&pending), body, shown))
        .await
        .ok()??;
    tracing::info!(confirmation = %pending.id, notification = id, server = %server, "confirmation asked by notification");
    let bus = fdo::DBusProxy::builder(&conn)
        .cache_properties(zbus::proxy::CacheProperties::No)
        .build()
        .await
        .ok()?;
    while let Some(message) = signals.next().await {
        let Ok(message) = message else { continue };
        let header = message.header();
        let member = header.member().map(|m| m.as_str().to_owned());
        let (notification, answer) = match member.as_deref() {
            Some("ActionInvoked") => match message.body().deserialize::<(u32, String)>() {
                Ok((n, key)) => (n, Signal::Action(key)),
                Err(_) => continue,
            },
            Some("NotificationClosed") => match message.body().deserialize::<(u32, u32)>() {
                Ok((n, reason)) => (n, Signal::Closed(reason)),
                Err(_) => continue,
            },
            _ => continue,
        };
        if notification != id {
            continue;
        }
        let sender = header.sender().map(|s| s.as_str().to_owned());
        if sender.as_deref() != Some(server.as_str()) {
            tracing::warn!(
                notification = id,
                sender = sender.as_deref().unwrap_or("(none)"),
                server = %server,
                "confirmation by notification: ignored a signal that did not come from the notification server"
            );
            continue;
        }
        let owner = bus
            .get_name_owner(BusName::WellKnown(SERVER_NAME.try_into().ok()?))
            .await;
        if !matches!(&owner, Ok(o) if o.as_str() == server.as_str()) {
            tracing::warn!(
                notification = id,
                sender = %server,
                "confirmation by notification: ignored a signal from a server that no longer owns {SERVER_NAME}"
            );
            continue;
        }
        match answer {
            Signal::Action(key) => match key.as_str() {
                "approve" => return Some(true),
                "deny" => return Some(false),
                other => tracing::debug!(notification = id, action = other, "unknown action"),
            },
            Signal::Closed(reason) => {
                guard.finished();
                if reason == CLOSED_BY_USER {
                    return Some(false);
                }
                tracing::info!(
                    notification = id,
                    reason,
                    "confirmation by notification: the notification expired or was withdrawn; the other doors decide"
                );
                return None;
            }
        }
    }
    None
}

enum Signal {
    Action(String),
    Closed(u32),
}

/// Keep the notification door installed while a notification server is on the bus (owning
/// `org.freedesktop.Notifications` or activatable under it), and take it away when it goes.
pub(crate) async fn follow_server(
    conn: Connection,
    bus: fdo::DBusProxy<'static>,
    runner: Arc<Runner>,
) {
    let mut changes = match bus
        .receive_name_owner_changed_with_args(&[(0, SERVER_NAME)])
        .await
    {
        Ok(stream) => Some(stream),
        Err(e) => {
            tracing::warn!(error = %e, "D-Bus: cannot follow the notification server");
            None
        }
    };
    let activatable = bus
        .list_activatable_names()
        .await
        .map(|names| names.iter().any(|n| n.as_str() == SERVER_NAME))
        .unwrap_or(false);
    let running = match BusName::try_from(SERVER_NAME) {
        Ok(name) => bus.name_has_owner(name).await.unwrap_or(false),
        Err(_) => false,
    };
    let mut installed = false;
    let mut apply = |available: bool| {
        if available == installed {
            return;
        }
        installed = available;
        if available {
            runner.confirmations.set_notifier(Some(door(conn.clone())));
            tracing::info!(
                "D-Bus: a notification server is on the bus; confirmations are also asked by desktop notification"
            );
        } else {
            runner.confirmations.set_notifier(None);
            tracing::info!(
                "D-Bus: the notification server left the bus; confirmations are no longer asked by notification"
            );
        }
    };
    apply(running || activatable);
    let Some(changes) = changes.as_mut() else {
        return;
    };
    while let Some(change) = changes.next().await {
        let Ok(args) = change.args() else { continue };
        apply(args.new_owner().is_some() || activatable);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use utter_core::pipeline::ConfirmRequest;
    use utter_core::policy::Provenance;

    #[test]
    fn the_prompt_carries_the_exact_arguments_and_markup_is_escaped_only_when_read() {
        let pending = PendingConfirmation {
            id: "0".repeat(32),
            request: ConfirmRequest::new(
                "terminal",
                &json!({"command": "echo <b>&</b>"}),
                Provenance::User,
                "run command",
            ),
            created: 0,
            expires: 30,
        };
        assert_eq!(summary_of(&pending), "Confirm: terminal");
        let body = body_of(&pending);
        assert_eq!(
            body,
            "run command\n{\"command\":\"echo <b>&</b>\"}\nfrom user"
        );
        assert_eq!(
            escape_markup(&body),
            "run command\n{\"command\":\"echo &lt;b&gt;&amp;&lt;/b&gt;\"}\nfrom user"
        );
    }

    #[test]
    fn a_crafted_app_id_cannot_forge_the_prompt() {
        let pending = PendingConfirmation {
            id: "0".repeat(32),
            request: ConfirmRequest::new(
                "close_app",
                &json!({"app": "spotify\n\n\u{2705} approved\u{202e}"}),
                Provenance::User,
                "close app spotify\n\n\u{2705} approved\u{202e}",
            ),
            created: 0,
            expires: 30,
        };
        let body = body_of(&pending);
        assert_eq!(body.lines().count(), 3, "{body}");
        assert!(!body.contains('\u{202e}'), "{body}");
        assert!(body.contains("\\u{202e}"), "{body}");
        assert!(body.contains("\\u202e"), "{body}");
    }
}
