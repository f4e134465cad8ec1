//! The devices' owner: one thread that holds the compositor connection and the virtual
//! keyboard and pointer for the plugin's whole life (never a device per call: a device that
//! comes and goes makes compositors drop keys and lose the physical keyboard's state, niri
//! #2314). Calls queue to it and run one at a time, so two actions never interleave keys.
//!
//! The thread connects when the plugin starts and again before a call if it is not
//! connected (the compositor may start after the runner, or restart); a connection that
//! broke is dropped and made again on the next call.

use crate::keymap::{self, Keymap};
use crate::keys::Chord;
use crate::wayland::{PointerAction, Stroke, Wayland, WaylandError, key_events};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;
use xkeysym::Keysym;

/// The backend name results carry for the Wayland protocols.
pub const WAYLAND_KEYBOARD: &str = "wayland-virtual-keyboard";
/// The backend name of the wlr virtual pointer.
pub const WAYLAND_POINTER: &str = "wlr-virtual-pointer";

/// What a key call sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The backend used ([`WAYLAND_KEYBOARD`], [`WAYLAND_POINTER`]).
    pub backend: &'static str,
    /// `$WAYLAND_DISPLAY` it went to.
    pub display: String,
    /// Key presses sent (each with its release); 0 for pointer actions.
    pub presses: usize,
}

/// What the devices can do now, for `plugin.health` and `utter status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceStatus {
    /// The keyboard backend in use, if any.
    pub keyboard: Option<&'static str>,
    /// The pointer backend in use, if any.
    pub pointer: Option<&'static str>,
    /// `$WAYLAND_DISPLAY` of the connection.
    pub display: Option<String>,
    /// Why each backend that is not in use is not (one line each).
    pub unavailable: Vec<String>,
    /// Whether the thread has tried to connect at least once.
    pub checked: bool,
}

enum Job {
    Keys {
        pieces: Vec<Vec<Stroke>>,
        reply: oneshot::Sender<Result<Sent, String>>,
    },
    Pointer {
        actions: Vec<PointerAction>,
        reply: oneshot::Sender<Result<Sent, String>>,
    },
}

/// The handle the service holds.
pub struct Devices {
    jobs: Mutex<mpsc::Sender<Job>>,
    status: Arc<Mutex<DeviceStatus>>,
}

impl Default for Devices {
    fn default() -> Self {
        Devices::start()
    }
}

impl Devices {
    /// Start the owner thread; it connects at once.
    pub fn start() -> Devices {
        let (tx, rx) = mpsc::channel::<Job>();
        let status = Arc::new(Mutex::new(DeviceStatus::default()));
        let shared = status.clone();
        std::thread::Builder::new()
            .name("utter-input-devices".into())
            .spawn(move || owner(rx, shared))
            .expect("spawn the device thread");
        Devices {
            jobs: Mutex::new(tx),
            status,
        }
    }

    /// The devices' state as last seen.
    pub fn status(&self) -> DeviceStatus {
        self.status.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The devices' state once the first connection attempt is over (at most `wait`).
    pub async fn checked_status(&self, wait: std::time::Duration) -> DeviceStatus {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let s = self.status();
            if s.checked || tokio::time::Instant::now() >= deadline {
                return s;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    async fn run(
        &self,
        job: impl FnOnce(oneshot::Sender<Result<Sent, String>>) -> Job,
    ) -> Result<Sent, String> {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .lock()
            .map_err(|_| "the device thread is gone".to_owned())?
            .send(job(reply))
            .map_err(|_| "the device thread is gone".to_owned())?;
        answer
            .await
            .map_err(|_| "the device thread ended the call".to_owned())?
    }

    /// Press `chord` `repeat` times.
    pub async fn chord(&self, chord: &Chord, repeat: u32) -> Result<Sent, String> {
        let stroke = Stroke {
            modifiers: chord.modifiers.clone(),
            key: chord.key,
        };
        let strokes = vec![stroke; repeat as usize];
        self.run(|reply| Job::Keys {
            pieces: vec![strokes],
            reply,
        })
        .await
    }

    /// Type `keysyms` in order, one press and release each.
    pub async fn type_keysyms(&self, keysyms: &[Keysym]) -> Result<Sent, String> {
        let pieces = keymap::chunks(keysyms)
            .into_iter()
            .map(|piece| {
                piece
                    .iter()
                    .map(|&k| Stroke {
                        modifiers: Vec::new(),
                        key: Some(k),
                    })
                    .collect()
            })
            .collect();
        self.run(|reply| Job::Keys { pieces, reply }).await
    }

    /// Do pointer actions in order.
    pub async fn pointer(&self, actions: Vec<PointerAction>) -> Result<Sent, String> {
        self.run(|reply| Job::Pointer { actions, reply }).await
    }
}

fn describe(w: &Wayland) -> DeviceStatus {
    let mut unavailable = Vec::new();
    for m in w.missing() {
        unavailable.push(match *m {
            "keyboard" => WaylandError::NoKeyboard.to_string(),
            _ => WaylandError::NoPointer.to_string(),
        });
    }
    unavailable.extend(other_backends());
    DeviceStatus {
        keyboard: w.has_keyboard().then_some(WAYLAND_KEYBOARD),
        pointer: w.has_pointer().then_some(WAYLAND_POINTER),
        display: Some(w.display().to_owned()),
        unavailable,
        checked: true,
    }
}

/// Why the backends this build does not drive are not in use.
fn other_backends() -> Vec<String> {
    let uinput = if std::path::Path::new("/dev/uinput").exists() {
        "uinput: /dev/uinput exists, but this build does not drive it yet"
    } else {
        "uinput: /dev/uinput is missing (needs the uinput module and write access)"
    };
    vec![
        uinput.to_owned(),
        "RemoteDesktop portal (libei): not driven by this build yet".to_owned(),
    ]
}

fn connect(status: &Mutex<DeviceStatus>) -> Option<Wayland> {
    match Wayland::connect() {
        Ok(w) => {
            tracing::info!(
                "virtual devices on {}: keyboard {}, pointer {}",
                w.display(),
                if w.has_keyboard() { "yes" } else { "no" },
                if w.has_pointer() { "yes" } else { "no" }
            );
            if let Ok(mut s) = status.lock() {
                *s = describe(&w);
            }
            Some(w)
        }
        Err(e) => {
            tracing::warn!("no virtual devices: {e}");
            if let Ok(mut s) = status.lock() {
                let mut unavailable = vec![format!("wayland: {e}")];
                unavailable.extend(other_backends());
                *s = DeviceStatus {
                    unavailable,
                    checked: true,
                    ..DeviceStatus::default()
                };
            }
            None
        }
    }
}

/// The keysyms the keyboard's keymap carries, in keycode order. It only grows, so a key
/// sent earlier keeps its meaning when the keymap changes: an application may translate a
/// key it received under the old keymap after the new one has arrived (GTK matches its key
/// bindings that way), and a code that changed meaning would be misread.
#[derive(Debug)]
struct Assigned {
    keysyms: Vec<Keysym>,
}

impl Default for Assigned {
    /// The keysyms of the first keymap ([`keymap::base_keysyms`]).
    fn default() -> Self {
        Assigned {
            keysyms: keymap::base_keysyms(),
        }
    }
}

/// How long to let the applications take the last keys before a keymap that reuses their
/// codes for other keysyms replaces it.
const KEYMAP_RESET_PAUSE: std::time::Duration = std::time::Duration::from_millis(150);

impl Assigned {
    /// The keymap holding every keysym of `strokes`, growing the assigned set; when it
    /// would overflow, a fresh set after a pause.
    fn keymap_for(&mut self, strokes: &[Stroke]) -> Option<Keymap> {
        let mut wanted: Vec<Keysym> = Vec::new();
        for s in strokes {
            for sym in s.modifiers.iter().map(|m| m.keysym()).chain(s.key) {
                if !wanted.contains(&sym) {
                    wanted.push(sym);
                }
            }
        }
        let mut grown = self.keysyms.clone();
        grown.extend(wanted.iter().filter(|k| !self.keysyms.contains(k)));
        if let Some(map) = Keymap::new(&grown) {
            self.keysyms = grown;
            return Some(map);
        }
        std::thread::sleep(KEYMAP_RESET_PAUSE);
        let map = Keymap::new(&wanted)?;
        self.keysyms = wanted;
        Some(map)
    }
}

fn owner(jobs: mpsc::Receiver<Job>, status: Arc<Mutex<DeviceStatus>>) {
    let mut wayland = connect(&status);
    let mut assigned = Assigned::default();
    while let Ok(job) = jobs.recv() {
        if wayland.is_none() {
            wayland = connect(&status);
            // A new connection starts from the base keymap.
            assigned = Assigned::default();
        }
        let (result, reply) = match job {
            Job::Keys { pieces, reply } => (
                keys(wayland.as_mut(), &pieces, &mut assigned, &status),
                reply,
            ),
            Job::Pointer { actions, reply } => {
                (pointer(wayland.as_mut(), &actions, &status), reply)
            }
        };
        if let Err(WaylandError::Broken { .. }) = &result {
            wayland = None;
        }
        let _ = reply.send(result.map_err(|e| e.to_string()));
    }
}

fn unavailable(status: &Mutex<DeviceStatus>) -> WaylandError {
    let why = status
        .lock()
        .ok()
        .and_then(|s| s.unavailable.first().cloned())
        .unwrap_or_else(|| "no compositor connection".into());
    WaylandError::Connect(why)
}

fn keys(
    wayland: Option<&mut Wayland>,
    pieces: &[Vec<Stroke>],
    assigned: &mut Assigned,
    status: &Mutex<DeviceStatus>,
) -> Result<Sent, WaylandError> {
    let w = wayland.ok_or_else(|| unavailable(status))?;
    let mut presses = 0;
    for strokes in pieces {
        let map = assigned
            .keymap_for(strokes)
            .ok_or_else(|| WaylandError::Keymap("the keys do not fit one keymap".into()))?;
        let map = &map;
        let events = key_events(map, strokes)
            .ok_or_else(|| WaylandError::Keymap("a keysym is missing from its keymap".into()))?;
        presses += w.keys(map, &events)?;
    }
    Ok(Sent {
        backend: WAYLAND_KEYBOARD,
        display: w.display().to_owned(),
        presses,
    })
}

fn pointer(
    wayland: Option<&mut Wayland>,
    actions: &[PointerAction],
    status: &Mutex<DeviceStatus>,
) -> Result<Sent, WaylandError> {
    let w = wayland.ok_or_else(|| unavailable(status))?;
    for a in actions {
        w.pointer(*a)?;
    }
    Ok(Sent {
        backend: WAYLAND_POINTER,
        display: w.display().to_owned(),
        presses: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typing(text: &str) -> Vec<Stroke> {
        text.chars()
            .map(|c| Stroke {
                modifiers: Vec::new(),
                key: crate::keys::char_keysym(c),
            })
            .collect()
    }

    #[test]
    fn codes_keep_their_keysym_as_the_keymap_grows() {
        let mut assigned = Assigned::default();
        assert_eq!(
            assigned.keymap_for(&typing("a")).unwrap(),
            Keymap::new(&keymap::base_keysyms()).unwrap(),
            "the base keymap holds a"
        );
        let first = assigned.keymap_for(&typing("\u{4e00}\u{4e01}")).unwrap();
        let a = first.code(Keysym::new(0x0100_4e00)).unwrap();
        let second = assigned.keymap_for(&typing("\u{4e02}\u{4e00}")).unwrap();
        assert_eq!(second.code(Keysym::new(0x0100_4e00)), Some(a));
        assert_eq!(
            second.code(Keysym::new(0x0100_4e01)),
            first.code(Keysym::new(0x0100_4e01))
        );
        assert!(second.code(Keysym::new(0x0100_4e02)).is_some());
        // The same keys again: the same keymap, so nothing is uploaded.
        assert_eq!(
            assigned.keymap_for(&typing("\u{4e01}\u{4e00}")).unwrap(),
            second
        );
    }

    #[test]
    fn a_full_keymap_starts_over_with_what_is_needed() {
        let mut assigned = Assigned {
            keysyms: Vec::new(),
        };
        let many: String = (0..keymap::MAX_KEYS - 10)
            .map(|i| char::from_u32(0x4e00 + i as u32).unwrap())
            .collect();
        assigned.keymap_for(&typing(&many)).unwrap();
        let more: String = (0..50)
            .map(|i| char::from_u32(0x5e00 + i).unwrap())
            .collect();
        let map = assigned.keymap_for(&typing(&more)).unwrap();
        assert_eq!(map.len(), 54);
    }
}
