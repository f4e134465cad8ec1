//! Push-to-talk triggers that need I/O of their own: the xdg-desktop-portal
//! `GlobalShortcuts` shortcut ([`portal`]) and keyboards read through evdev ([`evdev`]). Both
//! feed the core's one state machine ([`utter_core::ptt::Ptt`]); [`starter`] gives the core
//! the function that starts them for a `[ptt]` section.

pub mod evdev;
pub mod portal;

use std::sync::Arc;

use utter_core::config::PttSection;
use utter_core::ptt::Ptt;
use utter_core::runner::TriggerStarter;

/// The triggers of `[ptt]`: the portal (when `portal = true` and `use_bus`), evdev (when
/// `evdev = true`). Each one that does not run says why in its trigger status. `use_bus`
/// false (`utter daemon --no-dbus`) keeps the portal off the session bus.
pub fn starter(use_bus: bool) -> TriggerStarter {
    Arc::new(move |section: &PttSection, ptt: &Ptt| {
        let mut tasks = Vec::new();
        if section.portal && !use_bus {
            ptt.set_trigger("portal", "disabled", "utter daemon --no-dbus");
        } else if section.portal {
            tasks.push(portal::spawn(ptt.clone(), section.shortcut.clone()));
        } else {
            ptt.set_trigger("portal", "disabled", "[ptt] portal = false");
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
