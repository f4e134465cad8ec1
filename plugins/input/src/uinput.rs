//! The uinput backend: one kernel virtual keyboard-and-wheel device (`/dev/uinput`, through
//! the `evdev` crate), created when the plugin starts and kept until it exits. Every
//! compositor reads it like a physical keyboard, so the codes sent must be those of the
//! person's layout: [`crate::layout::LayoutMap`] finds, for each keysym, the key and the
//! level modifiers (Shift, AltGr) that type it.
//!
//! It can press keys, scroll (`REL_WHEEL`, `REL_HWHEEL`) and click where the pointer is; it
//! cannot put the pointer at a point (that needs the Wayland virtual pointer).

use crate::layout::LayoutMap;
use evdev::uinput::VirtualDevice;
use evdev::{AttributeSet, EventType, InputEvent, KeyCode, RelativeAxisCode};

/// The device name compositors and `libinput list-devices` show.
pub const DEVICE_NAME: &str = "Utter virtual keyboard";

pub use crate::layout::{KeyEvent, key_events};

/// The open device.
pub struct Uinput {
    device: VirtualDevice,
    layout: LayoutMap,
}

impl Uinput {
    /// Create the device on `/dev/uinput` with every key code, the three buttons and the
    /// wheels, typing under `layout`.
    ///
    /// # Errors
    /// `/dev/uinput` is missing or not writable, or the kernel refused the device.
    pub fn open(layout: LayoutMap) -> std::io::Result<Uinput> {
        let mut keys = AttributeSet::<KeyCode>::new();
        for code in 1..=248u16 {
            keys.insert(KeyCode::new(code));
        }
        for b in [KeyCode::BTN_LEFT, KeyCode::BTN_RIGHT, KeyCode::BTN_MIDDLE] {
            keys.insert(b);
        }
        let mut axes = AttributeSet::<RelativeAxisCode>::new();
        for a in [
            RelativeAxisCode::REL_X,
            RelativeAxisCode::REL_Y,
            RelativeAxisCode::REL_WHEEL,
            RelativeAxisCode::REL_HWHEEL,
        ] {
            axes.insert(a);
        }
        let device = VirtualDevice::builder()?
            .name(DEVICE_NAME)
            .with_keys(&keys)?
            .with_relative_axes(&axes)?
            .build()?;
        Ok(Uinput { device, layout })
    }

    /// The layout keys are typed under.
    pub fn layout(&self) -> &LayoutMap {
        &self.layout
    }

    /// Send `events`, each key event with its own `SYN_REPORT`. On a write error the keys
    /// still down are released (best effort) before the error is returned. `cancelled` is
    /// asked before each stroke; when it says yes, nothing more is sent.
    ///
    /// # Errors
    /// The write to the device failed.
    pub fn keys(
        &mut self,
        events: &[KeyEvent],
        cancelled: &dyn Fn() -> bool,
    ) -> std::io::Result<usize> {
        let mut down: Vec<u16> = Vec::new();
        let mut presses = 0;
        for &(code, pressed) in events {
            // A cancelled call stops between strokes, when no key is down.
            if pressed && down.is_empty() && cancelled() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::Interrupted,
                    format!("cancelled after {presses} key press(es); the rest was not sent"),
                ));
            }
            let ev = InputEvent::new(EventType::KEY.0, code, i32::from(pressed));
            if let Err(e) = self.device.emit(&[ev]) {
                for &c in down.iter().rev() {
                    let _ = self.device.emit(&[InputEvent::new(EventType::KEY.0, c, 0)]);
                }
                return Err(e);
            }
            if pressed {
                presses += 1;
                down.push(code);
            } else {
                down.retain(|&c| c != code);
            }
        }
        Ok(presses)
    }

    /// `steps` wheel clicks (positive: down or right).
    ///
    /// # Errors
    /// The write to the device failed.
    pub fn scroll(&mut self, horizontal: bool, steps: i32) -> std::io::Result<()> {
        // REL_WHEEL counts up as positive; REL_HWHEEL counts right as positive.
        let (axis, one) = if horizontal {
            (RelativeAxisCode::REL_HWHEEL, steps.signum())
        } else {
            (RelativeAxisCode::REL_WHEEL, -steps.signum())
        };
        for _ in 0..steps.unsigned_abs() {
            self.device
                .emit(&[InputEvent::new(EventType::RELATIVE.0, axis.0, one)])?;
        }
        Ok(())
    }

    /// Press and release `button` (`BTN_LEFT` 0x110 …) `count` times where the pointer is.
    ///
    /// # Errors
    /// The write to the device failed.
    pub fn click(&mut self, button: u16, count: u32) -> std::io::Result<()> {
        for _ in 0..count {
            self.device
                .emit(&[InputEvent::new(EventType::KEY.0, button, 1)])?;
            self.device
                .emit(&[InputEvent::new(EventType::KEY.0, button, 0)])?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{Modifier, parse_chord};
    use crate::wayland::Stroke;
    use xkeysym::Keysym;

    fn typing(text: &str) -> Vec<Stroke> {
        text.chars()
            .map(|c| Stroke {
                modifiers: Vec::new(),
                key: crate::keys::char_keysym(c),
            })
            .collect()
    }

    #[test]
    fn capitals_take_shift_and_every_press_is_released() {
        let us = LayoutMap::us();
        let events = key_events(&us, &typing("Hi!")).unwrap();
        assert_eq!(
            events,
            [
                (42, true),
                (35, true),
                (35, false),
                (42, false),
                (23, true),
                (23, false),
                (42, true),
                (2, true),
                (2, false),
                (42, false),
            ]
        );
    }

    #[test]
    fn a_chord_holds_its_modifiers_once() {
        let us = LayoutMap::us();
        let c = parse_chord("ctrl+shift+T").unwrap();
        let stroke = Stroke {
            modifiers: c.modifiers.clone(),
            key: c.key,
        };
        let events = key_events(&us, &[stroke]).unwrap();
        assert_eq!(
            events,
            [
                (29, true),
                (42, true),
                (20, true),
                (20, false),
                (42, false),
                (29, false)
            ]
        );
        let sup = Stroke {
            modifiers: vec![Modifier::Super],
            key: None,
        };
        assert_eq!(
            key_events(&us, &[sup]).unwrap(),
            [(125, true), (125, false)]
        );
    }

    #[test]
    fn german_layout_codes_come_from_libxkbcommon() {
        let de = LayoutMap::from_names("de", "").expect("libxkbcommon");
        // "zy@": z on the US y key, y on the US z key, @ with AltGr on q.
        let events = key_events(&de, &typing("zy@")).unwrap();
        assert_eq!(
            events,
            [
                (21, true),
                (21, false),
                (44, true),
                (44, false),
                (100, true),
                (16, true),
                (16, false),
                (100, false)
            ]
        );
    }

    #[test]
    fn a_keysym_the_layout_lacks_is_named() {
        let us = LayoutMap::us();
        assert_eq!(key_events(&us, &typing("aé")), Err(Keysym::eacute));
    }
}
