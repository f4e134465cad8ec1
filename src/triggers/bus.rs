//! Following a session-bus service for a trigger that binds through it (the portal, the a11y
//! keyboard monitor).
//!
//! A binding made with a service lives in that service's process: when it exits or is
//! replaced, the trigger's signals stop coming although nothing on our side fails. So
//! [`follow`] watches the bus daemon's `NameOwnerChanged` for the service's well-known name
//! (a match rule on arg0, D-Bus specification "Message Bus Messages"), subscribed before
//! the first `GetNameOwner` so no change is missed:
//!
//! * no owner → status `unavailable` (why), then sleep until an owner appears;
//! * an owner → run one *session* (bind, then feed push-to-talk until it ends);
//! * the owner goes away while bound → the session is dropped, a hold it started is
//!   cancelled (`device-lost`: its release can never come), status `unavailable` ("… went
//!   away; waiting for it to come back");
//! * a new owner (after an absence, or replacing the old one) → a new session;
//! * the session ends by itself (an error, a refusal) → its status stays until the owner
//!   changes; nothing is retried with the same owner.
//!
//! Everything waits on signals: no timer, no polling.

use std::future::Future;

use futures::StreamExt;
use zbus::Connection;
use zbus::fdo::{DBusProxy, NameOwnerChangedStream};
use zbus::names::{BusName, OwnedUniqueName};

use utter_core::ptt::{CancelReason, Ptt, Source};

/// What a trigger follows on the bus.
pub struct Service {
    /// The trigger's name in status (`portal`, `keyboard-monitor`).
    pub trigger: &'static str,
    /// The source its presses have, so a hold it started can be cancelled when it goes.
    pub source: Source,
    /// The service's well-known name.
    pub name: &'static str,
    /// The status detail while the name has had no owner since the trigger started.
    pub absent: String,
    /// The status detail after the owner went away.
    pub gone: String,
    /// Run a session even though the name has no owner at start (the name is activatable:
    /// the first call starts it).
    pub activate: bool,
}

/// How a session ended by itself: the trigger's state word and detail, kept until the
/// service's owner changes.
pub type Ended = (&'static str, String);

/// The current owner of `name`, `None` when it has none (or the bus daemon would not say).
async fn owner_of(bus: &DBusProxy<'_>, name: &str) -> Option<OwnedUniqueName> {
    let name = BusName::try_from(name).ok()?;
    bus.get_name_owner(name).await.ok()
}

/// The next owner change that matters given the owner we know (`current`): a change whose
/// new owner is `current` (the echo of what `GetNameOwner` already said) is skipped; while
/// `current` is `None`, a first owner that appears is adopted without returning when
/// `adopt` is true (the service a session is activating). `Err(())`: the stream ended (the
/// bus connection closed).
async fn next_owner(
    changes: &mut NameOwnerChangedStream,
    current: &mut Option<OwnedUniqueName>,
    adopt: bool,
) -> Result<Option<OwnedUniqueName>, ()> {
    loop {
        let signal = changes.next().await.ok_or(())?;
        let Ok(args) = signal.args() else {
            // The bus daemon sends well-formed signals; anything else is not for us.
            continue;
        };
        let new = args
            .new_owner()
            .as_ref()
            .map(|o| OwnedUniqueName::from(o.to_owned()));
        if new == *current {
            continue;
        }
        if adopt && current.is_none() && args.old_owner().is_none() {
            *current = new;
            continue;
        }
        return Ok(new);
    }
}

/// Follow `service` on `conn` for as long as the task runs, starting a `session` for each
/// owner. A session sets status `bound` itself once it has bound, and returns only when it
/// ends by itself ([`Ended`]); [`follow`] drops it when the owner changes.
pub async fn follow<F, Fut>(ptt: &Ptt, conn: &Connection, service: Service, mut session: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Ended>,
{
    let bus = match DBusProxy::builder(conn)
        .cache_properties(zbus::proxy::CacheProperties::No)
        .build()
        .await
    {
        Ok(bus) => bus,
        Err(e) => {
            ptt.set_trigger(
                service.trigger,
                "unavailable",
                &format!("cannot talk to the bus daemon: {e}"),
            );
            return;
        }
    };
    let mut changes = match bus
        .receive_name_owner_changed_with_args(&[(0, service.name)])
        .await
    {
        Ok(stream) => stream,
        Err(e) => {
            ptt.set_trigger(
                service.trigger,
                "unavailable",
                &format!("cannot follow {} on the bus: {e}", service.name),
            );
            return;
        }
    };
    let closed = |ptt: &Ptt| {
        ptt.set_trigger(
            service.trigger,
            "unavailable",
            "the session bus connection closed",
        );
    };
    let mut owner = owner_of(&bus, service.name).await;
    let mut activate = service.activate && owner.is_none();
    let mut seen = owner.is_some();
    loop {
        if owner.is_none() && !activate {
            let detail = if seen { &service.gone } else { &service.absent };
            tracing::info!(trigger = service.trigger, "push-to-talk: {detail}");
            ptt.set_trigger(service.trigger, "unavailable", detail);
            match next_owner(&mut changes, &mut owner, false).await {
                Ok(new) => owner = new,
                Err(()) => return closed(ptt),
            }
            continue;
        }
        let adopt = std::mem::take(&mut activate);
        seen = true;
        let ended = {
            let run = session();
            tokio::pin!(run);
            tokio::select! {
                ended = &mut run => Some(ended),
                change = next_owner(&mut changes, &mut owner, adopt) => match change {
                    Ok(new) => {
                        tracing::info!(
                            trigger = service.trigger,
                            service = service.name,
                            new_owner = new.as_ref().map(|o| o.as_str()),
                            "push-to-talk: the service's owner changed"
                        );
                        owner = new;
                        None
                    }
                    Err(()) => return closed(ptt),
                },
            }
        };
        // A hold this trigger started cannot be released by it any more.
        if ptt.state().source == Some(service.source) {
            ptt.cancel(CancelReason::DeviceLost);
        }
        if let Some((state, detail)) = ended {
            ptt.set_trigger(service.trigger, state, &detail);
            // Nothing is retried with the same owner: wait until it changes.
            match next_owner(&mut changes, &mut owner, false).await {
                Ok(new) => owner = new,
                Err(()) => return closed(ptt),
            }
        }
    }
}
