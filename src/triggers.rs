//! Push-to-talk triggers that need I/O of their own: the xdg-desktop-portal
//! `GlobalShortcuts` shortcut ([`portal`]), the compositor's a11y keyboard monitor
//! ([`keyboard_monitor`], niri 25.08+) and keyboards read through evdev ([`evdev`]). All feed
//! the core's one state machine ([`utter_core::ptt::Ptt`]); [`starter`] gives the core the
//! function that starts them for a `[ptt]` section. The two bus-based triggers follow their
//! service's owner on the bus ([`bus`]): bound while it is there, bound again when it comes
//! back.

pub mod bus;
pub mod evdev;
pub mod keyboard_monitor;
pub mod portal;

use std::sync::Arc;

use utter_core::config::PttSection;
use utter_core::ptt::Ptt;
use utter_core::runner::TriggerStarter;

/// The triggers of `[ptt]`: the portal (when `portal = true` and `use_bus`), the keyboard
/// monitor (when `keyboard_monitor = true` and `use_bus`), evdev (when `evdev = true`). Each
/// one that does not run says why in its trigger status. `use_bus` false (`utter daemon
/// --no-dbus`) keeps the bus-based triggers off the session bus.
pub fn starter(use_bus: bool) -> TriggerStarter {
    Arc::new(move |section: &PttSection, ptt: &Ptt| {
        let mut tasks = Vec::new();
        if section.portal && !use_bus {
            ptt.set_trigger("portal", "disabled", "utter daemon --no-dbus");
        } else if section.portal {
            let dictate = Some(section.dictation_key.trim())
                .filter(|k| !k.is_empty())
                .map(str::to_owned);
            tasks.push(portal::spawn(
                ptt.clone(),
                section.shortcut.clone(),
                dictate,
            ));
        } else {
            ptt.set_trigger("portal", "disabled", "[ptt] portal = false");
        }
        let monitor = keyboard_monitor::TRIGGER;
        if section.keyboard_monitor && !use_bus {
            ptt.set_trigger(monitor, "disabled", "utter daemon --no-dbus");
        } else if section.keyboard_monitor {
            let dictate = match section.dictation_key.trim() {
                "" => Ok(None),
                name => keyboard_monitor::Key::parse(name).map(Some),
            };
            match (
                keyboard_monitor::Key::parse(&section.keyboard_monitor_key),
                dictate,
            ) {
                (Ok(talk), Ok(dictate)) => {
                    // The same keysym twice is push-to-talk only.
                    let dictate = dictate.filter(|d| d.keysym != talk.keysym);
                    let keys = keyboard_monitor::Keys { talk, dictate };
                    tasks.push(keyboard_monitor::spawn(ptt.clone(), keys));
                }
                (Err(e), _) | (_, Err(e)) => ptt.set_trigger(monitor, "error", &e),
            }
        } else {
            ptt.set_trigger(monitor, "disabled", "[ptt] keyboard_monitor = false");
        }
        if section.evdev {
            match evdev::parse_key(&section.evdev_key) {
                Ok(key) => tasks.push(evdev::spawn(ptt.clone(), key)),
                Err(e) => ptt.set_trigger("evdev", "unavailable", &e),
            }
        } else {
            ptt.set_trigger("evdev", "disabled", "[ptt] evdev = false");
        }
        tasks
    })
}

/// A connection of its own to the session bus (`crate::dbus::session_address`), for one
/// trigger.
///
/// # Errors
/// A sentence for the trigger's status.
pub(crate) async fn session_bus() -> Result<zbus::Connection, String> {
    let address = crate::dbus::session_address()?;
    let built = match zbus::connection::Builder::address(address.as_str()) {
        Ok(b) => b.build().await,
        Err(e) => Err(e),
    };
    built.map_err(|e| format!("cannot connect to the session bus at {address}: {e}"))
}
