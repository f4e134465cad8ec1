//! The keyboard-monitor trigger: hold-to-talk through the compositor's
//! `org.freedesktop.a11y.KeyboardMonitor`, the interface screen readers use to get keys from
//! a Wayland compositor. niri 25.08+ serves it when run as a session; it has no
//! GlobalShortcuts portal, so this is its way to real hold-to-talk (press *and* release).
//!
//! The interface, as this module relies on it (GNOME mutter's
//! `data/dbus-interfaces/org.freedesktop.a11y.xml`, the definition niri implements in
//! `src/dbus/freedesktop_a11y.rs`):
//!
//! * well-known name `org.freedesktop.a11y.Manager`, object `/org/freedesktop/a11y/Manager`;
//! * `SetKeyGrabs(modifiers: au, keystrokes: a(uu))` replaces the caller's grabs: each
//!   keystroke is (XKB keysym, XKB modifier mask); a grabbed key is not handled by the
//!   compositor as usual and is reported to the caller alone. The grabs last until the next
//!   call or until the caller's bus connection closes;
//! * signal `KeyEvent(released: b, state: u, keysym: u, unichar: u, keycode: q)`, sent to the
//!   grabbing client (niri emits it with that client as destination) for every press and
//!   release of a grabbed key; `state` is the XKB modifier mask in effect;
//! * `WatchKeyboard()` (every key, not only grabbed ones) and `GrabKeyboard()` exist too; this
//!   trigger calls neither: it asks for one key and sees no other typing.
//!
//! niri matches a keystroke grab only when the modifier mask equals the keyboard's mask
//! exactly, so the key is grabbed with each combination of the lock modifiers
//! ([`LOCK_MASKS`]: none, Caps Lock, Num Lock, both), as X11 key grabs are. The key held with
//! another modifier (Shift, Ctrl…) is not grabbed; a release seen with one (Shift pressed
//! during the hold) is not reported, and the stuck-key timeout (`max_hold_ms`) ends that hold.
//!
//! GNOME (mutter), KDE (KWin) and COSMIC serve the interface only to the owner of Orca's
//! name `org.gnome.Orca.KeyboardMonitor`; this trigger does not pose as Orca. There
//! `SetKeyGrabs` is refused and the status says `unavailable` (the portal trigger is the way
//! on those desktops).
//!
//! Only `KeyEvent`s from the current owner of the well-known name count (zbus filters the
//! signal stream by the owner's unique name). The owner is followed with
//! [`super::bus::follow`]: gone → `unavailable`, back (or replaced) → the grabs are set again.
//!
//! Status words (trigger `keyboard-monitor`): `disabled`, `starting`, `unavailable` (not on
//! the bus, went away, refused), `bound` (the detail names the key), `error` (SetKeyGrabs
//! failed otherwise; the detail has the bus error).

use std::time::Duration;

use futures::StreamExt;
use zbus::Connection;

use utter_core::ptt::{Ptt, Source};

/// The trigger's name in status.
pub const TRIGGER: &str = "keyboard-monitor";
/// The well-known bus name the compositor owns.
pub const SERVICE: &str = "org.freedesktop.a11y.Manager";
/// The object serving the interface.
pub const PATH: &str = "/org/freedesktop/a11y/Manager";
/// The interface.
pub const INTERFACE: &str = "org.freedesktop.a11y.KeyboardMonitor";

/// XKB's `Lock` modifier bit (Caps Lock).
pub const LOCK_MASK: u32 = 1 << 1;
/// XKB's `Mod2` modifier bit, Num Lock on common keymaps.
pub const NUM_LOCK_MASK: u32 = 1 << 4;
/// The modifier masks the key is grabbed with: none, Caps Lock, Num Lock, both.
pub const LOCK_MASKS: [u32; 4] = [0, LOCK_MASK, NUM_LOCK_MASK, LOCK_MASK | NUM_LOCK_MASK];

/// How long `SetKeyGrabs` may take before the binding counts as failed.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The client side of `org.freedesktop.a11y.KeyboardMonitor`, the members this trigger uses.
#[zbus::proxy(
    interface = "org.freedesktop.a11y.KeyboardMonitor",
    default_service = "org.freedesktop.a11y.Manager",
    default_path = "/org/freedesktop/a11y/Manager",
    gen_blocking = false
)]
trait KeyboardMonitor {
    /// Replace this client's grabs: `modifiers` are keysyms grabbed together with every key
    /// pressed while they are down; `keystrokes` are (keysym, modifier mask) pairs.
    fn set_key_grabs(&self, modifiers: &[u32], keystrokes: &[(u32, u32)]) -> zbus::Result<()>;

    /// A grabbed key went down (`released` false) or up; `state` is the XKB modifier mask,
    /// `unichar` the character (0: none), `keycode` the hardware keycode.
    #[zbus(signal)]
    fn key_event(
        &self,
        released: bool,
        state: u32,
        keysym: u32,
        unichar: u32,
        keycode: u16,
    ) -> zbus::Result<()>;
}

/// The key to grab: its name as configured and its XKB keysym.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    /// `[ptt] keyboard_monitor_key` as written, e.g. `F13`.
    pub name: String,
    /// Its XKB keysym, e.g. 0xffca.
    pub keysym: u32,
}

impl Key {
    /// Resolve `[ptt] keyboard_monitor_key` ([`utter_keys::grab_keysym`]).
    ///
    /// # Errors
    /// The sentence of [`utter_keys::grab_keysym`].
    pub fn parse(name: &str) -> Result<Key, String> {
        Ok(Key {
            name: name.trim().to_owned(),
            keysym: utter_keys::grab_keysym(name)?,
        })
    }

    /// The keystrokes `SetKeyGrabs` is called with: the keysym with each of [`LOCK_MASKS`].
    pub fn keystrokes(&self) -> Vec<(u32, u32)> {
        LOCK_MASKS.iter().map(|&mask| (self.keysym, mask)).collect()
    }

    fn describe(&self) -> String {
        format!("{} (keysym {:#x})", self.name, self.keysym)
    }
}

/// The keys grabbed: push-to-talk, and the one held to dictate (`[ptt] dictation_key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    /// `[ptt] keyboard_monitor_key`.
    pub talk: Key,
    /// `[ptt] dictation_key`, when set (and not the same keysym as `talk`).
    pub dictate: Option<Key>,
}

impl Keys {
    /// Every keystroke grabbed.
    pub fn keystrokes(&self) -> Vec<(u32, u32)> {
        let mut all = self.talk.keystrokes();
        if let Some(d) = &self.dictate {
            all.extend(d.keystrokes());
        }
        all
    }

    /// The transition a `KeyEvent` of `keysym` causes, and whether its key dictates; `None`
    /// for a key not grabbed.
    pub fn transition(&self, released: bool, keysym: u32) -> Option<(KeyTransition, bool)> {
        if let Some(t) = transition(&self.talk, released, keysym) {
            return Some((t, false));
        }
        let dictate = self.dictate.as_ref()?;
        transition(dictate, released, keysym).map(|t| (t, true))
    }

    fn describe(&self) -> String {
        match &self.dictate {
            Some(d) => format!(
                "{} to talk and {} to dictate",
                self.talk.describe(),
                d.describe()
            ),
            None => self.talk.describe(),
        }
    }
}

/// What one `KeyEvent` means for push-to-talk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyTransition {
    /// The key went down.
    Press,
    /// The key went up.
    Release,
}

/// The transition a well-formed `KeyEvent` of `keysym` causes for `key`; `None` for another
/// key.
pub fn transition(key: &Key, released: bool, keysym: u32) -> Option<KeyTransition> {
    (keysym == key.keysym).then_some(if released {
        KeyTransition::Release
    } else {
        KeyTransition::Press
    })
}

/// Whether a refusal of `SetKeyGrabs` means "not for you" (mutter, KWin and COSMIC admit only
/// Orca) rather than a failure.
fn is_refusal(e: &zbus::Error) -> bool {
    match e {
        zbus::Error::MethodError(name, _, _) => matches!(
            name.as_str(),
            "org.freedesktop.DBus.Error.AccessDenied"
                | "org.freedesktop.DBus.Error.AuthFailed"
                | "org.freedesktop.DBus.Error.UnknownInterface"
                | "org.freedesktop.DBus.Error.UnknownObject"
                | "org.freedesktop.DBus.Error.UnknownMethod"
        ),
        zbus::Error::FDO(e) => matches!(
            **e,
            zbus::fdo::Error::AccessDenied(_)
                | zbus::fdo::Error::AuthFailed(_)
                | zbus::fdo::Error::UnknownInterface(_)
                | zbus::fdo::Error::UnknownObject(_)
                | zbus::fdo::Error::UnknownMethod(_)
        ),
        _ => false,
    }
}

/// One binding with the current owner: subscribe to `KeyEvent`, set the grabs, then feed
/// `ptt` until the signal stream ends. Returns why it ended.
async fn session(ptt: Ptt, conn: Connection, key: Keys) -> super::bus::Ended {
    let proxy = match KeyboardMonitorProxy::builder(&conn)
        .cache_properties(zbus::proxy::CacheProperties::No)
        .build()
        .await
    {
        Ok(p) => p,
        Err(e) => return ("error", format!("cannot make a proxy for {SERVICE}: {e}")),
    };
    // Subscribe first, so a press right after the grab is not lost.
    let mut events = match proxy.receive_key_event().await {
        Ok(s) => s,
        Err(e) => {
            return (
                "error",
                format!("cannot subscribe to {INTERFACE}.KeyEvent: {e}"),
            );
        }
    };
    let grabbed =
        tokio::time::timeout(CALL_TIMEOUT, proxy.set_key_grabs(&[], &key.keystrokes())).await;
    match grabbed {
        Ok(Ok(())) => {}
        Ok(Err(e)) if is_refusal(&e) => {
            let why = format!(
                "{SERVICE} refused SetKeyGrabs ({e}); GNOME, KDE and COSMIC serve the keyboard monitor only to the Orca screen reader – use the portal trigger there"
            );
            tracing::info!("push-to-talk: {why}");
            return ("unavailable", why);
        }
        Ok(Err(e)) => {
            let why = format!("SetKeyGrabs for {} failed: {e}", key.describe());
            tracing::warn!("push-to-talk: keyboard monitor: {why}");
            return ("error", why);
        }
        Err(_) => {
            let why = format!(
                "{SERVICE} did not answer SetKeyGrabs within {} s",
                CALL_TIMEOUT.as_secs()
            );
            tracing::warn!("push-to-talk: keyboard monitor: {why}");
            return ("error", why);
        }
    }
    let bound = format!(
        "{} grabbed through {INTERFACE}: hold it to talk",
        key.describe()
    );
    let bound = match &key.dictate {
        Some(_) => bound.replace("hold it to talk", "hold one to speak"),
        None => bound,
    };
    tracing::info!("push-to-talk: {bound}");
    ptt.set_trigger(TRIGGER, "bound", &bound);
    let mut malformed: u64 = 0;
    while let Some(event) = events.next().await {
        match event.args() {
            Ok(args) => match key.transition(args.released, args.keysym) {
                Some((KeyTransition::Press, dictation)) => {
                    ptt.press_for(Source::KeyboardMonitor, dictation);
                }
                Some((KeyTransition::Release, _)) => {
                    ptt.release(Source::KeyboardMonitor);
                }
                None => {}
            },
            Err(e) => {
                malformed += 1;
                let signature = event.message().body().signature().to_string();
                tracing::warn!(
                    signature = %signature,
                    error = %e,
                    "push-to-talk: ignored a malformed KeyEvent (want (buuuq))"
                );
                ptt.set_trigger(
                    TRIGGER,
                    "bound",
                    &format!(
                        "{bound}; ignored {malformed} malformed KeyEvent signal(s), the last with signature {signature} instead of (buuuq)"
                    ),
                );
            }
        }
    }
    (
        "unavailable",
        format!("the KeyEvent signals of {SERVICE} stopped"),
    )
}

/// Follow the keyboard monitor on `conn` and feed `ptt` with `key` until the task is dropped.
pub async fn run(ptt: Ptt, conn: Connection, key: Keys) {
    let service = super::bus::Service {
        trigger: TRIGGER,
        source: Source::KeyboardMonitor,
        name: SERVICE,
        absent: format!(
            "{SERVICE} is not on the session bus: the a11y keyboard monitor needs niri 25.08+ run as a session (niri-session); waiting for it to appear"
        ),
        gone: format!("{SERVICE} went away; waiting for it to come back"),
        activate: false,
    };
    let (p, c) = (ptt.clone(), conn.clone());
    super::bus::follow(&ptt, &conn, service, move || {
        session(p.clone(), c.clone(), key.clone())
    })
    .await;
}

/// Connect to the session bus and start [`run`] as a task; without a session bus the trigger
/// is `unavailable` at once.
pub fn spawn(ptt: Ptt, key: Keys) -> tokio::task::JoinHandle<()> {
    ptt.set_trigger(
        TRIGGER,
        "starting",
        &format!("looking for {SERVICE} on the session bus"),
    );
    tokio::spawn(async move {
        match super::session_bus().await {
            Ok(conn) => run(ptt, conn, key).await,
            Err(why) => ptt.set_trigger(TRIGGER, "unavailable", &why),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_grabbed_with_every_lock_combination() {
        let key = Key::parse("F13").unwrap();
        assert_eq!(key.keysym, 0xffca);
        assert_eq!(
            key.keystrokes(),
            vec![(0xffca, 0), (0xffca, 2), (0xffca, 16), (0xffca, 18)]
        );
        assert!(Key::parse("KEY_F13").unwrap_err().contains("F13"));
    }

    #[test]
    fn only_the_grabbed_keysym_presses_and_releases() {
        let key = Key::parse("F13").unwrap();
        assert_eq!(transition(&key, false, 0xffca), Some(KeyTransition::Press));
        assert_eq!(transition(&key, true, 0xffca), Some(KeyTransition::Release));
        assert_eq!(transition(&key, false, 0xffcb), None);
        assert_eq!(transition(&key, true, u32::from(b'a')), None);
        // With a dictation key: each key says whether it dictates; a release of either
        // releases.
        let keys = Keys {
            talk: key,
            dictate: Some(Key::parse("F14").unwrap()),
        };
        assert_eq!(
            keys.transition(false, 0xffca),
            Some((KeyTransition::Press, false))
        );
        assert_eq!(
            keys.transition(false, 0xffcb),
            Some((KeyTransition::Press, true))
        );
        assert_eq!(
            keys.transition(true, 0xffcb),
            Some((KeyTransition::Release, true))
        );
        assert_eq!(keys.keystrokes().len(), 8);
        assert_eq!(keys.transition(false, 0xffcc), None);
    }

    #[test]
    fn access_denied_is_a_refusal_and_failed_is_not() {
        let denied = zbus::Error::FDO(Box::new(zbus::fdo::Error::AccessDenied("no".into())));
        assert!(is_refusal(&denied));
        let failed = zbus::Error::FDO(Box::new(zbus::fdo::Error::Failed("boom".into())));
        assert!(!is_refusal(&failed));
    }
}
