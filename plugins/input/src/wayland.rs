//! The Wayland backend: one `zwp_virtual_keyboard_v1` and one `zwlr_virtual_pointer_v1`,
//! created on the session's compositor (`$WAYLAND_DISPLAY`) when the plugin starts and kept
//! until it exits. wlroots compositors (sway, Hyprland, river…) offer both; niri offers the
//! virtual keyboard and the virtual pointer too. A compositor that offers neither leaves
//! this backend unavailable with the reason.
//!
//! Every call ends with a `wl_display.sync` round trip, so a result means the compositor
//! has taken every event (it cannot say whether the application acted on them: that is for
//! the caller to read back where it can). Timestamps are milliseconds since the backend
//! started, increasing by one per event.
//!
//! Protocols: virtual-keyboard-unstable-v1 (wayland-protocols-misc), wlr-virtual-pointer-
//! unstable-v1 (wlr-protocols). Keycodes in `key` are evdev codes; see [`crate::keymap`].

use crate::keymap::Keymap;
use crate::keys::Modifier;
use std::io::Write;
use std::os::fd::AsFd;
use std::time::Instant;
use wayland_client::globals::{GlobalListContents, registry_queue_init};
use wayland_client::protocol::wl_pointer::{Axis, AxisSource, ButtonState};
use wayland_client::protocol::{wl_registry, wl_seat::WlSeat};
use wayland_client::{Connection, Dispatch, EventQueue, QueueHandle, delegate_noop};
use wayland_protocols_misc::zwp_virtual_keyboard_v1::client::zwp_virtual_keyboard_manager_v1::ZwpVirtualKeyboardManagerV1;
use wayland_protocols_misc::zwp_virtual_keyboard_v1::client::zwp_virtual_keyboard_v1::ZwpVirtualKeyboardV1;
use wayland_protocols_wlr::virtual_pointer::v1::client::zwlr_virtual_pointer_manager_v1::ZwlrVirtualPointerManagerV1;
use wayland_protocols_wlr::virtual_pointer::v1::client::zwlr_virtual_pointer_v1::ZwlrVirtualPointerV1;
use xkeysym::Keysym;

/// `wl_keyboard.keymap_format.xkb_v1`.
const XKB_V1: u32 = 1;
/// `wl_keyboard.key_state`.
const RELEASED: u32 = 0;
const PRESSED: u32 = 1;
/// Events sent between flushes, so a long text never fills the socket buffer unflushed.
const FLUSH_EVERY: usize = 64;
/// Events sent between round trips, so the compositor keeps up with a long text.
const SYNC_EVERY: usize = 512;
/// One wheel step in `wl_pointer.axis` units (what libinput reports for a mouse wheel click).
pub const WHEEL_STEP: f64 = 15.0;

/// A key event for [`Wayland::keys`]: an evdev code of the current keymap going down or up,
/// or the modifier mask the compositor should now hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyEvent {
    /// Key down.
    Press(u32),
    /// Key up.
    Release(u32),
    /// `modifiers(depressed, 0, 0, 0)`.
    Modifiers(u32),
}

/// What is needed to type one stroke under a keymap: modifiers held around a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stroke {
    /// Held around the key, in chord order.
    pub modifiers: Vec<Modifier>,
    /// The key pressed and released while they are held; `None` presses the modifiers only.
    pub key: Option<Keysym>,
}

/// The press/release events of `strokes` under `keymap`: each stroke presses its modifiers
/// in order, then its key, then releases in reverse order, so every press has its release.
/// `None` when a keysym is not in the keymap.
pub fn key_events(keymap: &Keymap, strokes: &[Stroke]) -> Option<Vec<KeyEvent>> {
    let mut events = Vec::new();
    for stroke in strokes {
        let mut mask = 0;
        let mut held = Vec::new();
        for m in &stroke.modifiers {
            let code = keymap.code(m.keysym())?;
            mask |= m.mask();
            events.push(KeyEvent::Press(code));
            events.push(KeyEvent::Modifiers(mask));
            held.push(code);
        }
        if let Some(key) = stroke.key {
            let code = keymap.code(key)?;
            events.push(KeyEvent::Press(code));
            events.push(KeyEvent::Release(code));
        }
        for code in held.into_iter().rev() {
            events.push(KeyEvent::Release(code));
        }
        if mask != 0 {
            events.push(KeyEvent::Modifiers(0));
        }
    }
    Some(events)
}

/// Pointer actions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PointerAction {
    /// Move to `(x, y)` of a `(width, height)` area (the output layout's bounding box, its
    /// top-left corner at 0, 0).
    MoveTo {
        /// Horizontal position, 0 ≤ x < width.
        x: u32,
        /// Vertical position, 0 ≤ y < height.
        y: u32,
        /// Width of the area.
        width: u32,
        /// Height of the area.
        height: u32,
    },
    /// Press and release a button (`BTN_LEFT` 0x110, `BTN_RIGHT` 0x111, `BTN_MIDDLE` 0x112)
    /// `count` times.
    Click {
        /// The Linux input button code.
        button: u32,
        /// Clicks (2 for a double click).
        count: u32,
    },
    /// `steps` wheel clicks; positive is down (vertical) or right (horizontal).
    Scroll {
        /// Horizontal instead of vertical.
        horizontal: bool,
        /// Signed steps.
        steps: i32,
    },
}

/// The open devices on one compositor connection.
pub struct Wayland {
    conn: Connection,
    queue: EventQueue<State>,
    state: State,
    keyboard: Option<ZwpVirtualKeyboardV1>,
    pointer: Option<ZwlrVirtualPointerV1>,
    keymap: Option<Keymap>,
    started: Instant,
    clock: u32,
    display: String,
}

struct State;

impl Dispatch<wl_registry::WlRegistry, GlobalListContents> for State {
    fn event(
        _: &mut Self,
        _: &wl_registry::WlRegistry,
        _: wl_registry::Event,
        _: &GlobalListContents,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
    }
}

delegate_noop!(State: ignore WlSeat);
delegate_noop!(State: ZwpVirtualKeyboardManagerV1);
delegate_noop!(State: ZwpVirtualKeyboardV1);
delegate_noop!(State: ZwlrVirtualPointerManagerV1);
delegate_noop!(State: ZwlrVirtualPointerV1);

/// Why a Wayland call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WaylandError {
    /// No compositor connection (`$WAYLAND_DISPLAY` unset or refused).
    #[error("no Wayland compositor: {0}")]
    Connect(String),
    /// The compositor offers neither device.
    #[error("the compositor offers neither the virtual-keyboard nor the virtual-pointer protocol")]
    NoProtocols,
    /// The keyboard protocol is missing.
    #[error(
        "the compositor does not offer the virtual-keyboard protocol (zwp_virtual_keyboard_manager_v1)"
    )]
    NoKeyboard,
    /// The pointer protocol is missing.
    #[error(
        "the compositor does not offer the virtual-pointer protocol (zwlr_virtual_pointer_manager_v1)"
    )]
    NoPointer,
    /// The connection broke while sending.
    #[error("the Wayland connection to {display} broke: {why}")]
    Broken {
        /// `$WAYLAND_DISPLAY`.
        display: String,
        /// The error.
        why: String,
    },
    /// The keymap could not be handed over.
    #[error("the keymap could not be passed to the compositor: {0}")]
    Keymap(String),
    /// The caller went away (`$/cancel`, a timeout) part way; this many presses were sent,
    /// each released.
    #[error("cancelled after {0} key press(es); the rest was not sent")]
    Cancelled(usize),
}

impl Wayland {
    /// Connect to `$WAYLAND_DISPLAY` and create the devices the compositor offers.
    ///
    /// # Errors
    /// [`WaylandError::Connect`], [`WaylandError::NoProtocols`], or a broken connection.
    pub fn connect() -> Result<Wayland, WaylandError> {
        let display = std::env::var("WAYLAND_DISPLAY").unwrap_or_default();
        if display.is_empty() {
            return Err(WaylandError::Connect(
                "WAYLAND_DISPLAY is not set (the runner passes it from the session; run \
                 `systemctl --user import-environment WAYLAND_DISPLAY` in the compositor's startup)"
                    .into(),
            ));
        }
        let conn = Connection::connect_to_env()
            .map_err(|e| WaylandError::Connect(format!("{display}: {e}")))?;
        let (globals, queue) = registry_queue_init::<State>(&conn)
            .map_err(|e| WaylandError::Connect(format!("{display}: {e}")))?;
        let qh = queue.handle();
        let seat: Option<WlSeat> = globals.bind(&qh, 1..=1, ()).ok();
        let keyboard = match (
            &seat,
            globals.bind::<ZwpVirtualKeyboardManagerV1, _, _>(&qh, 1..=1, ()),
        ) {
            (Some(seat), Ok(manager)) => Some(manager.create_virtual_keyboard(seat, &qh, ())),
            _ => None,
        };
        let pointer = match globals.bind::<ZwlrVirtualPointerManagerV1, _, _>(&qh, 1..=1, ()) {
            Ok(manager) => Some(manager.create_virtual_pointer(seat.as_ref(), &qh, ())),
            Err(_) => None,
        };
        if keyboard.is_none() && pointer.is_none() {
            return Err(WaylandError::NoProtocols);
        }
        let mut w = Wayland {
            conn,
            queue,
            state: State,
            keyboard,
            pointer,
            keymap: None,
            started: Instant::now(),
            clock: 0,
            display,
        };
        // A keyboard without a keymap may not send keys; the base keymap also gives the
        // seat its keyboard capability from the start.
        if w.keyboard.is_some() {
            let base = Keymap::new(&crate::keymap::base_keysyms()).expect("the base keymap fits");
            w.upload(&base)?;
        }
        w.sync()?;
        Ok(w)
    }

    /// `$WAYLAND_DISPLAY` of this connection.
    pub fn display(&self) -> &str {
        &self.display
    }

    /// Whether the virtual keyboard exists.
    pub fn has_keyboard(&self) -> bool {
        self.keyboard.is_some()
    }

    /// Whether the virtual pointer exists.
    pub fn has_pointer(&self) -> bool {
        self.pointer.is_some()
    }

    fn broken(&self, why: impl std::fmt::Display) -> WaylandError {
        WaylandError::Broken {
            display: self.display.clone(),
            why: why.to_string(),
        }
    }

    fn time(&mut self) -> u32 {
        let now = u32::try_from(self.started.elapsed().as_millis()).unwrap_or(u32::MAX);
        self.clock = now.max(self.clock.saturating_add(1));
        self.clock
    }

    fn sync(&mut self) -> Result<(), WaylandError> {
        self.queue
            .roundtrip(&mut self.state)
            .map(|_| ())
            .map_err(|e| self.broken(e))
    }

    fn flush(&mut self) -> Result<(), WaylandError> {
        self.conn.flush().map_err(|e| self.broken(e))
    }

    /// Hand `keymap` to the compositor unless it is the one it has.
    ///
    /// # Errors
    /// [`WaylandError::NoKeyboard`], [`WaylandError::Keymap`], a broken connection.
    pub fn upload(&mut self, keymap: &Keymap) -> Result<(), WaylandError> {
        let Some(keyboard) = &self.keyboard else {
            return Err(WaylandError::NoKeyboard);
        };
        if self.keymap.as_ref() == Some(keymap) {
            return Ok(());
        }
        let fd =
            nix::sys::memfd::memfd_create(c"utter-keymap", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)
                .map_err(|e| WaylandError::Keymap(format!("memfd_create: {e}")))?;
        let mut file = std::fs::File::from(fd);
        let mut bytes = keymap.text.as_bytes().to_vec();
        bytes.push(0);
        file.write_all(&bytes)
            .map_err(|e| WaylandError::Keymap(e.to_string()))?;
        let size =
            u32::try_from(bytes.len()).map_err(|_| WaylandError::Keymap("too large".into()))?;
        keyboard.keymap(XKB_V1, file.as_fd(), size);
        self.keymap = Some(keymap.clone());
        // The compositor compiles the keymap and sends it to the focused client before the
        // next key; a round trip makes sure it took it.
        self.sync()
    }

    /// Send key events under `keymap` (uploaded first when it is new), then wait for the
    /// compositor to have taken them. Returns the number of key presses sent. `cancelled` is
    /// asked before each stroke; when it says yes, nothing more is sent.
    ///
    /// # Errors
    /// [`WaylandError::NoKeyboard`], a keymap or connection failure. On a failure part way
    /// the compositor releases the keys still down when the connection closes.
    pub fn keys(
        &mut self,
        keymap: &Keymap,
        events: &[KeyEvent],
        cancelled: &dyn Fn() -> bool,
    ) -> Result<usize, WaylandError> {
        self.upload(keymap)?;
        let keyboard = self.keyboard.clone().ok_or(WaylandError::NoKeyboard)?;
        let mut presses = 0;
        let mut down = 0usize;
        for (i, event) in events.iter().enumerate() {
            // A cancelled call stops between strokes, when no key is down.
            if down == 0 && matches!(event, KeyEvent::Press(_)) && cancelled() {
                self.sync()?;
                return Err(WaylandError::Cancelled(presses));
            }
            let time = self.time();
            match *event {
                KeyEvent::Press(code) => {
                    keyboard.key(time, code, PRESSED);
                    presses += 1;
                    down += 1;
                }
                KeyEvent::Release(code) => {
                    keyboard.key(time, code, RELEASED);
                    down = down.saturating_sub(1);
                }
                KeyEvent::Modifiers(mask) => keyboard.modifiers(mask, 0, 0, 0),
            }
            if (i + 1) % SYNC_EVERY == 0 {
                self.sync()?;
            } else if (i + 1) % FLUSH_EVERY == 0 {
                self.flush()?;
            }
        }
        self.sync()?;
        Ok(presses)
    }

    /// Do one pointer action, then wait for the compositor to have taken it.
    ///
    /// # Errors
    /// [`WaylandError::NoPointer`], a broken connection.
    pub fn pointer(&mut self, action: PointerAction) -> Result<(), WaylandError> {
        let pointer = self.pointer.clone().ok_or(WaylandError::NoPointer)?;
        match action {
            PointerAction::MoveTo {
                x,
                y,
                width,
                height,
            } => {
                let time = self.time();
                pointer.motion_absolute(time, x, y, width.max(1), height.max(1));
                pointer.frame();
            }
            PointerAction::Click { button, count } => {
                for _ in 0..count {
                    let time = self.time();
                    pointer.button(time, button, ButtonState::Pressed);
                    pointer.frame();
                    let time = self.time();
                    pointer.button(time, button, ButtonState::Released);
                    pointer.frame();
                }
            }
            PointerAction::Scroll { horizontal, steps } => {
                let axis = if horizontal {
                    Axis::HorizontalScroll
                } else {
                    Axis::VerticalScroll
                };
                let sign = steps.signum();
                for _ in 0..steps.unsigned_abs() {
                    let time = self.time();
                    pointer.axis_source(AxisSource::Wheel);
                    pointer.axis_discrete(time, axis, WHEEL_STEP * f64::from(sign), sign);
                    pointer.frame();
                }
                let time = self.time();
                pointer.axis_source(AxisSource::Wheel);
                pointer.axis_stop(time, axis);
                pointer.frame();
            }
        }
        self.sync()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::parse_chord;

    #[test]
    fn every_press_has_its_release_and_modifiers_wrap_the_key() {
        let chord = parse_chord("ctrl+shift+t").unwrap();
        let map = Keymap::new(&chord.keysyms()).unwrap();
        let stroke = Stroke {
            modifiers: chord.modifiers.clone(),
            key: chord.key,
        };
        let events = key_events(&map, &[stroke.clone(), stroke]).unwrap();
        let ctrl = map.code(Keysym::Control_L).unwrap();
        let shift = map.code(Keysym::Shift_L).unwrap();
        let t = map.code(Keysym::t).unwrap();
        assert_eq!(
            &events[..9],
            [
                KeyEvent::Press(ctrl),
                KeyEvent::Modifiers(4),
                KeyEvent::Press(shift),
                KeyEvent::Modifiers(5),
                KeyEvent::Press(t),
                KeyEvent::Release(t),
                KeyEvent::Release(shift),
                KeyEvent::Release(ctrl),
                KeyEvent::Modifiers(0),
            ]
        );
        let presses = events
            .iter()
            .filter(|e| matches!(e, KeyEvent::Press(_)))
            .count();
        let releases = events
            .iter()
            .filter(|e| matches!(e, KeyEvent::Release(_)))
            .count();
        assert_eq!((presses, releases), (6, 6));
    }

    #[test]
    fn a_keysym_outside_the_keymap_sends_nothing() {
        let map = Keymap::new(&[Keysym::a]).unwrap();
        let stroke = Stroke {
            modifiers: vec![],
            key: Some(Keysym::b),
        };
        assert_eq!(key_events(&map, &[stroke]), None);
    }
}
