//! Argument-bearing confirmations and the doors that answer them.
//!
//! A step that needs a person's yes becomes a *pending confirmation* with an unguessable id,
//! the op, its exact arguments, its provenance, a one-line summary and the `digest` of
//! (op, args, provenance). An id is answered at most once, and a door that knows the digest
//! can bind its answer to it ([`Confirmations::answer_digest`]). The first answer wins,
//! from whichever door gives it:
//!
//! * the requesting client, asked with `host.confirm` on its own connection;
//! * any admitted client, with `runner.confirm {id, approved}`;
//! * D-Bus `Confirm(id, approved)`;
//! * a desktop notification with Approve and Deny actions (closing it denies).
//!
//! No answer within `confirm_timeout_ms` is a denial, and every other door is withdrawn
//! (the client is sent `$/cancel`, the notification is closed). Only an explicit boolean
//! `true` approves: any other answer counts as a denial.

use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{broadcast, oneshot};
use utter_protocol::ErrorObject;

use crate::events::Event;
use utter_ipc::command::ConfirmRequest;

pub use utter_ipc::command::PendingConfirmation;

/// A boxed future that resolves to a door's answer: `Some(true)` approve, `Some(false)` deny,
/// `None` when the door cannot answer (it then stays out of the race).
pub type DoorAnswer = Pin<Box<dyn Future<Output = Option<bool>> + Send>>;

/// A door that is asked actively (the requesting client, a notification): given the pending
/// confirmation, it returns its answer. Dropping the future withdraws the question.
pub type Door = Arc<dyn Fn(PendingConfirmation) -> DoorAnswer + Send + Sync>;

/// Something that can ask a person: resolves to the answer and the door that gave it. Only an
/// explicit yes approves.
pub type Confirmer =
    Arc<dyn Fn(ConfirmRequest) -> Pin<Box<dyn Future<Output = Resolution> + Send>> + Send + Sync>;

/// The outcome of one confirmation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resolution {
    /// Whether the step may run.
    pub approved: bool,
    /// Which door answered: `client`, `runner.confirm`, `dbus`, `notification`, `timeout`
    /// (or `cancelled` when the request that asked went away).
    pub by: String,
}

struct Waiting {
    info: PendingConfirmation,
    answer: oneshot::Sender<Resolution>,
}

/// The registry of pending confirmations.
pub struct Confirmations {
    pending: Mutex<HashMap<String, Waiting>>,
    events: broadcast::Sender<Event>,
    timeout: Mutex<Duration>,
    notifier: Mutex<Option<Door>>,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// 128 random bits as 32 lowercase hex digits.
pub fn random_id() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // The kernel's generator is always there on Linux; fall back to time and address
        // entropy only so that a failure can never panic the runner.
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let address = &t as *const u128 as usize as u128;
        bytes = (t ^ address.rotate_left(64)).to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Confirmations {
    /// A registry that times out after `timeout` and reports on `events`.
    pub fn new(timeout: Duration, events: broadcast::Sender<Event>) -> Confirmations {
        Confirmations {
            pending: Mutex::new(HashMap::new()),
            events,
            timeout: Mutex::new(timeout),
            notifier: Mutex::new(None),
        }
    }

    /// Change the timeout (config reload).
    pub fn set_timeout(&self, timeout: Duration) {
        *self.timeout.lock().expect("timeout lock") = timeout;
    }

    /// Install the notification door (the D-Bus module does this when a notification
    /// server is on the bus).
    pub fn set_notifier(&self, door: Option<Door>) {
        *self.notifier.lock().expect("notifier lock") = door;
    }

    /// Ask for a confirmation and wait for the first answer. `client` is the requesting
    /// client's door, if there is one.
    pub async fn ask(&self, request: ConfirmRequest, client: Option<Door>) -> Resolution {
        let timeout = *self.timeout.lock().expect("timeout lock");
        let created = now_secs();
        let info = PendingConfirmation {
            id: random_id(),
            request,
            created,
            expires: created + timeout.as_secs(),
        };
        let (tx, rx) = oneshot::channel();
        self.pending.lock().expect("pending lock").insert(
            info.id.clone(),
            Waiting {
                info: info.clone(),
                answer: tx,
            },
        );
        let _ = self.events.send(Event::ConfirmationRequested(info.clone()));
        // If this future is dropped (the requesting client went away and its request was
        // aborted), the confirmation must not stay listed as pending.
        let mut withdrawn = WithdrawOnDrop {
            confirmations: self,
            id: Some(info.id.clone()),
        };
        let notifier = self.notifier.lock().expect("notifier lock").clone();
        let never = || -> DoorAnswer { Box::pin(std::future::pending()) };
        let mut client_answer = client.map(|door| door(info.clone())).unwrap_or_else(never);
        let mut notification = notifier
            .map(|door| door(info.clone()))
            .unwrap_or_else(never);
        let mut rx = rx;
        let resolution = tokio::select! {
            answer = &mut rx => answer.unwrap_or(Resolution { approved: false, by: "runner".into() }),
            Some(approved) = &mut client_answer => Resolution { approved, by: "client".into() },
            Some(approved) = &mut notification => Resolution { approved, by: "notification".into() },
            _ = tokio::time::sleep(timeout) => Resolution { approved: false, by: "timeout".into() },
        };
        // Withdraw the other doors: dropping their futures cancels the client's request and
        // closes the notification.
        drop(client_answer);
        drop(notification);
        withdrawn.id = None;
        self.pending.lock().expect("pending lock").remove(&info.id);
        tracing::info!(id = %info.id, op = %info.request.op, approved = resolution.approved, by = %resolution.by, "confirmation resolved");
        let _ = self.events.send(Event::ConfirmationResolved {
            id: info.id.clone(),
            approved: resolution.approved,
            by: resolution.by.clone(),
        });
        resolution
    }

    /// Answer a pending confirmation from a passive door (`runner.confirm`, D-Bus).
    ///
    /// # Errors
    /// `-32602` when no confirmation with that id is pending (answered, timed out, or never
    /// asked).
    pub fn answer(&self, id: &str, approved: bool, by: &str) -> Result<(), ErrorObject> {
        let waiting = self.pending.lock().expect("pending lock").remove(id);
        match waiting {
            Some(w) => {
                let _ = w.answer.send(Resolution {
                    approved,
                    by: by.to_owned(),
                });
                Ok(())
            }
            None => Err(ErrorObject::invalid_params(format!(
                "no pending confirmation with id {id:?} (already answered, timed out, or unknown); see `utter pending`"
            ))),
        }
    }

    /// Answer a pending confirmation only if it is still for the step with `digest` (the
    /// `digest` of its [`ConfirmRequest`]): a client that shows the person one step cannot
    /// have its approval applied to another. A mismatch leaves the confirmation pending.
    ///
    /// # Errors
    /// `-32602` when no confirmation with that id is pending, or its digest differs.
    pub fn answer_digest(
        &self,
        id: &str,
        digest: &str,
        approved: bool,
        by: &str,
    ) -> Result<(), ErrorObject> {
        {
            let pending = self.pending.lock().expect("pending lock");
            if let Some(w) = pending.get(id) {
                if w.info.request.digest != digest {
                    return Err(ErrorObject::invalid_params(format!(
                        "confirmation {id:?} is for a different step (digest {}), not {digest:?}",
                        w.info.request.digest
                    )));
                }
            }
        }
        self.answer(id, approved, by)
    }

    /// The confirmations waiting for an answer, oldest first.
    pub fn pending(&self) -> Vec<PendingConfirmation> {
        let mut list: Vec<_> = self
            .pending
            .lock()
            .expect("pending lock")
            .values()
            .map(|w| w.info.clone())
            .collect();
        list.sort_by_key(|p| p.created);
        list
    }
}

/// Removes a confirmation whose asking future was dropped before it resolved, and reports it
/// as denied `by: "cancelled"`.
struct WithdrawOnDrop<'a> {
    confirmations: &'a Confirmations,
    id: Option<String>,
}

impl Drop for WithdrawOnDrop<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let removed = match self.confirmations.pending.lock() {
            Ok(mut pending) => pending.remove(&id).is_some(),
            Err(_) => false,
        };
        if removed {
            tracing::info!(%id, "confirmation withdrawn: its request was cancelled");
            let _ = self.confirmations.events.send(Event::ConfirmationResolved {
                id,
                approved: false,
                by: "cancelled".into(),
            });
        }
    }
}

/// Read a `host.confirm` answer strictly: `true` or `{"approved": true}` (or the older
/// `{"ok": true}`) approve; everything else (`"yes"`, `1`, `{}`, `{"approved": "true"}`)
/// denies.
pub fn read_answer(answer: &Value) -> bool {
    match answer {
        Value::Bool(b) => *b,
        Value::Object(map) => match map.get("approved").or_else(|| map.get("ok")) {
            Some(Value::Bool(b)) => *b,
            _ => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Provenance;
    use serde_json::json;

    fn request() -> ConfirmRequest {
        ConfirmRequest::new(
            "terminal",
            &json!({"command": "ls"}),
            Provenance::User,
            "run command \"ls\"",
        )
    }

    #[test]
    fn only_explicit_true_approves() {
        assert!(read_answer(&json!(true)));
        assert!(read_answer(&json!({"approved": true})));
        assert!(read_answer(&json!({"ok": true})));
        for no in [
            json!("yes"),
            json!(1),
            json!({}),
            json!({"approved": "true"}),
            json!(null),
            json!(false),
        ] {
            assert!(!read_answer(&no), "{no}");
        }
    }

    #[tokio::test]
    async fn a_passive_answer_wins_and_unknown_ids_are_refused() {
        let (events, mut rx) = broadcast::channel(16);
        let c = Arc::new(Confirmations::new(Duration::from_secs(30), events));
        let asking = tokio::spawn({
            let c = c.clone();
            async move { c.ask(request(), None).await }
        });
        let id = match rx.recv().await.unwrap() {
            Event::ConfirmationRequested(p) => p.id,
            other => panic!("{other:?}"),
        };
        assert_eq!(id.len(), 32);
        assert_eq!(c.pending().len(), 1);
        assert!(c.answer("nope", true, "dbus").is_err());
        c.answer(&id, true, "dbus").unwrap();
        assert_eq!(
            asking.await.unwrap(),
            Resolution {
                approved: true,
                by: "dbus".into()
            }
        );
        assert!(c.pending().is_empty());
        assert!(
            c.answer(&id, true, "dbus").is_err(),
            "an answer counts once"
        );
    }

    #[tokio::test]
    async fn a_dropped_question_is_withdrawn() {
        let (events, mut rx) = broadcast::channel(16);
        let c = Arc::new(Confirmations::new(Duration::from_secs(30), events));
        let asking = tokio::spawn({
            let c = c.clone();
            async move { c.ask(request(), None).await }
        });
        let id = match rx.recv().await.unwrap() {
            Event::ConfirmationRequested(p) => p.id,
            other => panic!("{other:?}"),
        };
        asking.abort();
        let _ = asking.await;
        assert!(c.pending().is_empty());
        assert_eq!(
            rx.recv().await.unwrap(),
            Event::ConfirmationResolved {
                id,
                approved: false,
                by: "cancelled".into()
            }
        );
    }

    #[tokio::test]
    async fn an_answer_bound_to_another_digest_does_not_count() {
        let (events, mut rx) = broadcast::channel(16);
        let c = Arc::new(Confirmations::new(Duration::from_secs(30), events));
        let asking = tokio::spawn({
            let c = c.clone();
            async move { c.ask(request(), None).await }
        });
        let p = match rx.recv().await.unwrap() {
            Event::ConfirmationRequested(p) => p,
            other => panic!("{other:?}"),
        };
        let other =
            ConfirmRequest::new("terminal", &json!({"command": "rm"}), Provenance::User, "x");
        assert!(c.answer_digest(&p.id, &other.digest, true, "dbus").is_err());
        assert_eq!(c.pending().len(), 1, "still pending");
        c.answer_digest(&p.id, &p.request.digest, true, "dbus")
            .unwrap();
        assert!(asking.await.unwrap().approved);
    }

    #[tokio::test]
    async fn no_answer_is_a_denial_by_timeout() {
        let (events, _rx) = broadcast::channel(16);
        let c = Confirmations::new(Duration::from_millis(50), events);
        let r = c.ask(request(), None).await;
        assert_eq!(
            r,
            Resolution {
                approved: false,
                by: "timeout".into()
            }
        );
    }

    #[tokio::test]
    async fn the_client_door_can_answer_and_a_silent_door_stays_out() {
        let (events, _rx) = broadcast::channel(16);
        let c = Confirmations::new(Duration::from_secs(30), events);
        let yes: Door = Arc::new(|_| Box::pin(async { Some(true) }));
        assert_eq!(c.ask(request(), Some(yes)).await.by, "client");
        let c = Confirmations::new(Duration::from_millis(50), broadcast::channel(4).0);
        let silent: Door = Arc::new(|_| Box::pin(async { None }));
        assert_eq!(c.ask(request(), Some(silent)).await.by, "timeout");
    }
}
