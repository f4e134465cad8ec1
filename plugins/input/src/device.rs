//! The devices' owner: one thread that holds the compositor connection and the virtual
//! keyboard and pointer for the plugin's whole life (never a device per call: a device that
//! comes and goes makes compositors drop keys and lose the physical keyboard's state, niri
//! #2314). Calls queue to it and run one at a time, so two actions never interleave keys.
//!
//! The thread connects when the plugin starts and again before a call if it is not
//! connected (the compositor may start after the runner, or restart); a connection that
//! broke is dropped and made again on the next call.

use crate::eis::{EIS_BACKEND, Eis, EisError};
use crate::keymap::{self, Keymap};
use crate::keys::Chord;
use crate::layout::LayoutMap;
use crate::uinput::Uinput;
use crate::wayland::{PointerAction, Stroke, Wayland, WaylandError, key_events};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;
use xkeysym::Keysym;

/// The backend name results carry for the Wayland protocols.
pub const WAYLAND_KEYBOARD: &str = "wayland-virtual-keyboard";
/// The backend name of the wlr virtual pointer.
pub const WAYLAND_POINTER: &str = "wlr-virtual-pointer";
/// The backend name of the uinput keyboard.
pub const UINPUT: &str = "uinput";
/// The backend name of the uinput device's wheels and buttons (no absolute moves).
pub const UINPUT_WHEEL: &str = "uinput-wheel";

/// What a key call sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The backend used ([`WAYLAND_KEYBOARD`], [`WAYLAND_POINTER`], [`UINPUT`],
    /// [`UINPUT_WHEEL`], [`EIS_BACKEND`]).
    pub backend: &'static str,
    /// Where it went: `$WAYLAND_DISPLAY`, `/dev/uinput`, or the EIS server.
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
    /// The xkb layout the uinput keyboard types under, when it is in use.
    pub layout: Option<String>,
    /// Where the libei devices come from, when connected.
    pub eis_source: Option<String>,
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

impl Job {
    fn reply(&self) -> &oneshot::Sender<Result<Sent, String>> {
        match self {
            Job::Keys { reply, .. } | Job::Pointer { reply, .. } => reply,
        }
    }
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

/// Which keyboard backend to use: `UTTER_INPUT_BACKEND` = `auto` (default: uinput where
/// `/dev/uinput` opens, else the Wayland virtual keyboard, else libei), `uinput`, `wayland`,
/// or `eis` (also `libei`, `portal`: libei alone, through `LIBEI_SOCKET` or the
/// RemoteDesktop portal).
fn wanted_backend() -> &'static str {
    match std::env::var("UTTER_INPUT_BACKEND")
        .as_deref()
        .map(str::trim)
    {
        Ok("uinput") => "uinput",
        Ok("wayland") => "wayland",
        Ok("eis" | "libei" | "portal") => "eis",
        _ => "auto",
    }
}

/// The devices the owner thread holds.
struct Backends {
    wayland: Option<Wayland>,
    wayland_error: Option<String>,
    uinput: Option<Uinput>,
    uinput_error: Option<String>,
    layout_note: Option<String>,
    eis: Option<Eis>,
    eis_error: Option<String>,
    /// Whether libei is wanted: asked for, or needed because nothing else has a keyboard.
    eis_wanted: bool,
    /// When a call may try libei again after a failed connection; `None` after the person
    /// declined in the portal's dialog (asking again at every call would nag).
    eis_retry_at: Option<std::time::Instant>,
}

/// How long after a failed libei connection a call tries again.
const EIS_RETRY: std::time::Duration = std::time::Duration::from_secs(10);

impl Backends {
    fn open() -> Backends {
        let mut b = Backends {
            wayland: None,
            wayland_error: None,
            uinput: None,
            uinput_error: None,
            layout_note: None,
            eis: None,
            eis_error: None,
            eis_wanted: false,
            eis_retry_at: None,
        };
        let wanted = wanted_backend();
        if wanted == "eis" {
            b.uinput_error = Some(format!("uinput: not used (UTTER_INPUT_BACKEND={wanted})"));
            b.wayland_error = Some(format!("wayland: not used (UTTER_INPUT_BACKEND={wanted})"));
            b.eis_wanted = true;
            b.connect_eis();
            return b;
        }
        if wanted == "wayland" {
            b.uinput_error = Some("uinput: not used (UTTER_INPUT_BACKEND=wayland)".into());
        } else if !std::path::Path::new("/dev/uinput").exists() {
            b.uinput_error =
                Some("uinput: /dev/uinput is missing (needs the uinput kernel module)".into());
        } else {
            let (layout, note) = LayoutMap::from_environment();
            b.layout_note = note;
            match Uinput::open(layout) {
                Ok(u) => {
                    tracing::info!("uinput keyboard open, layout {}", u.layout().name);
                    b.uinput = Some(u);
                }
                Err(e) => {
                    b.uinput_error = Some(format!(
                        "uinput: /dev/uinput cannot be opened ({e}; it needs write access, e.g. a udev rule giving the user's group rw)"
                    ));
                }
            }
        }
        b.connect_wayland();
        let keyboard = b.uinput.is_some() || b.wayland.as_ref().is_some_and(|w| w.has_keyboard());
        if !keyboard && wanted == "auto" {
            b.eis_wanted = true;
            b.connect_eis();
        }
        b
    }

    /// Whether the Wayland connection is one to keep making (not switched off).
    fn wayland_used(&self) -> bool {
        wanted_backend() != "eis"
    }

    fn connect_eis(&mut self) {
        let connected = std::panic::catch_unwind(Eis::connect).unwrap_or_else(|_| {
            Err(EisError::Connect(
                "the EIS server's setup failed inside reis".into(),
            ))
        });
        match connected {
            Ok(e) => {
                tracing::info!(
                    "libei devices from {}: keyboard {}, pointer {}",
                    e.source(),
                    if e.has_keyboard() { "yes" } else { "no" },
                    if e.has_pointer() { "yes" } else { "no" }
                );
                self.eis = Some(e);
                self.eis_error = None;
            }
            Err(e) => {
                tracing::warn!("no libei devices: {e}");
                let declined = matches!(e, EisError::Declined(_));
                self.eis = None;
                self.eis_error = Some(format!("libei: {e}"));
                self.eis_retry_at = (!declined).then(|| std::time::Instant::now() + EIS_RETRY);
            }
        }
    }

    fn connect_wayland(&mut self) {
        match Wayland::connect() {
            Ok(w) => {
                tracing::info!(
                    "Wayland devices on {}: keyboard {}, pointer {}",
                    w.display(),
                    if w.has_keyboard() { "yes" } else { "no" },
                    if w.has_pointer() { "yes" } else { "no" }
                );
                self.wayland = Some(w);
                self.wayland_error = None;
            }
            Err(e) => {
                tracing::warn!("no Wayland devices: {e}");
                self.wayland = None;
                self.wayland_error = Some(format!("wayland: {e}"));
            }
        }
    }

    fn status(&self) -> DeviceStatus {
        let mut unavailable = Vec::new();
        let w = self.wayland.as_ref();
        let e = self.eis.as_ref();
        let keyboard = if self.uinput.is_some() {
            Some(UINPUT)
        } else if w.is_some_and(|w| w.has_keyboard()) {
            Some(WAYLAND_KEYBOARD)
        } else {
            e.filter(|e| e.has_keyboard()).map(|_| EIS_BACKEND)
        };
        let pointer = if w.is_some_and(|w| w.has_pointer()) {
            Some(WAYLAND_POINTER)
        } else if e.is_some_and(|e| e.has_pointer()) {
            Some(EIS_BACKEND)
        } else {
            self.uinput.as_ref().map(|_| UINPUT_WHEEL)
        };
        if let Some(e) = &self.uinput_error {
            unavailable.push(e.clone());
        }
        if let Some(note) = &self.layout_note {
            unavailable.push(format!("xkb layout: {note}; typing with the US layout"));
        }
        match (w, &self.wayland_error) {
            (_, Some(e)) => unavailable.push(e.clone()),
            (Some(w), None) => {
                if !w.has_keyboard() {
                    unavailable.push(WaylandError::NoKeyboard.to_string());
                }
                if !w.has_pointer() {
                    unavailable.push(WaylandError::NoPointer.to_string());
                }
            }
            (None, None) => {}
        }
        match (e, &self.eis_error) {
            (_, Some(err)) => unavailable.push(err.clone()),
            (Some(e), None) => {
                if !e.has_keyboard() {
                    unavailable.push(format!("libei: {} offers no keyboard", e.source()));
                }
                if !e.has_pointer() {
                    unavailable.push(format!("libei: {} offers no pointer", e.source()));
                }
            }
            (None, None) => unavailable.push(
                "libei (RemoteDesktop portal): not needed, another backend has the keyboard".into(),
            ),
        }
        DeviceStatus {
            keyboard,
            pointer,
            display: w.map(|w| w.display().to_owned()),
            eis_source: e.map(|e| e.source().to_owned()),
            layout: self.uinput.as_ref().map(|u| u.layout().name.clone()),
            unavailable,
            checked: true,
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
    let mut backends = Backends::open();
    let publish = |b: &Backends| {
        if let Ok(mut s) = status.lock() {
            *s = b.status();
        }
    };
    publish(&backends);
    let mut assigned = Assigned::default();
    while let Ok(job) = jobs.recv() {
        // The caller went away ($/cancel, a timeout) before its turn: send nothing. One that
        // goes away part way is stopped between strokes (`cancelled` below).
        if job.reply().is_closed() {
            continue;
        }
        if backends.wayland.is_none() && backends.wayland_used() {
            backends.connect_wayland();
            // A new connection starts from the base keymap.
            assigned = Assigned::default();
            publish(&backends);
        }
        let retry = backends
            .eis_retry_at
            .is_some_and(|at| std::time::Instant::now() >= at);
        if backends.eis.is_none() && backends.eis_wanted && retry {
            backends.connect_eis();
            publish(&backends);
        }
        // A backend library that panics on what its peer sent must not end the thread
        // (every later call would fail): the call fails, its connections are dropped and
        // made again at the next call. The caller's reply goes with the panicking job.
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match job {
            Job::Keys { pieces, reply } => {
                let cancelled = || reply.is_closed();
                (
                    keys(&mut backends, &pieces, &mut assigned, &cancelled),
                    reply,
                )
            }
            Job::Pointer { actions, reply } => {
                let cancelled = || reply.is_closed();
                (pointer(&mut backends, &actions, &cancelled), reply)
            }
        }));
        let Ok((result, reply)) = ran else {
            tracing::error!("a backend failed inside its library; its connections are made again");
            backends.wayland = None;
            if backends.eis.take().is_some() {
                backends.eis_error = Some("libei: the connection failed inside reis".into());
                backends.eis_retry_at = Some(std::time::Instant::now());
            }
            assigned = Assigned::default();
            publish(&backends);
            continue;
        };
        match &result {
            Err(DeviceError::Wayland(WaylandError::Broken { .. })) => {
                backends.wayland = None;
                publish(&backends);
            }
            Err(DeviceError::Eis(e)) if e.is_broken() => {
                // It worked before: the next call connects again at once.
                backends.eis = None;
                backends.eis_error = Some(format!("libei: {e}"));
                backends.eis_retry_at = Some(std::time::Instant::now());
                publish(&backends);
            }
            // libei devices may have come or gone during the call.
            _ if backends.eis.is_some() => publish(&backends),
            _ => {}
        }
        let _ = reply.send(result.map_err(|e| e.to_string()));
    }
}

/// A failed call.
#[derive(Debug, thiserror::Error)]
enum DeviceError {
    #[error(transparent)]
    Wayland(#[from] WaylandError),
    #[error(transparent)]
    Eis(#[from] EisError),
    #[error("no virtual input device: {0}")]
    NoDevice(String),
    #[error("the uinput device failed: {0}")]
    Uinput(std::io::Error),
    #[error("the {layout} layout has no key that types {key}")]
    NoKey { layout: String, key: String },
    #[error("{0}")]
    Unsupported(String),
}

/// Every reason no backend is there, the one asked for first.
fn no_device(b: &Backends) -> DeviceError {
    let mut why: Vec<String> = Vec::new();
    let eis = b.eis_error.clone().filter(|_| b.eis_wanted);
    for reason in [eis, b.wayland_error.clone(), b.uinput_error.clone()]
        .into_iter()
        .flatten()
    {
        if !reason.contains("not used (UTTER_INPUT_BACKEND") {
            why.push(reason);
        }
    }
    if why.is_empty() {
        why.push("no backend could be opened".into());
    }
    DeviceError::NoDevice(why.join("; "))
}

fn keys(
    b: &mut Backends,
    pieces: &[Vec<Stroke>],
    assigned: &mut Assigned,
    cancelled: &dyn Fn() -> bool,
) -> Result<Sent, DeviceError> {
    if let Some(u) = b.uinput.as_mut() {
        let strokes: Vec<Stroke> = pieces.iter().flatten().cloned().collect();
        let events =
            crate::uinput::key_events(u.layout(), &strokes).map_err(|k| DeviceError::NoKey {
                layout: u.layout().name.clone(),
                key: crate::keys::keysym_name(k),
            })?;
        let presses = u.keys(&events, cancelled).map_err(DeviceError::Uinput)?;
        return Ok(Sent {
            backend: UINPUT,
            display: "/dev/uinput".into(),
            presses,
        });
    }
    let display = b.wayland.as_ref().map(|w| w.display().to_owned());
    let w = match b.wayland.as_mut() {
        Some(w) if w.has_keyboard() => w,
        _ => {
            if let Some(e) = b.eis.as_mut() {
                // Devices the server added (or took away) since the last call.
                e.refresh()?;
                if !e.has_keyboard() {
                    return Err(EisError::Missing {
                        from: e.source().to_owned(),
                        what: "keyboard",
                    }
                    .into());
                }
                let strokes: Vec<Stroke> = pieces.iter().flatten().cloned().collect();
                let layout = e.layout().clone();
                let events = crate::layout::key_events(&layout, &strokes).map_err(|k| {
                    DeviceError::NoKey {
                        layout: layout.name.clone(),
                        key: crate::keys::keysym_name(k),
                    }
                })?;
                let presses = e.keys(&events, cancelled)?;
                return Ok(Sent {
                    backend: EIS_BACKEND,
                    display: e.source().to_owned(),
                    presses,
                });
            }
            if b.wayland.is_some() {
                return Err(WaylandError::NoKeyboard.into());
            }
            return Err(no_device(b));
        }
    };
    let mut presses = 0;
    for strokes in pieces {
        let map = assigned
            .keymap_for(strokes)
            .ok_or_else(|| WaylandError::Keymap("the keys do not fit one keymap".into()))?;
        let events = key_events(&map, strokes)
            .ok_or_else(|| WaylandError::Keymap("a keysym is missing from its keymap".into()))?;
        presses += match w.keys(&map, &events, cancelled) {
            Ok(n) => n,
            Err(WaylandError::Cancelled(n)) => {
                return Err(WaylandError::Cancelled(presses + n).into());
            }
            Err(e) => return Err(e.into()),
        };
    }
    Ok(Sent {
        backend: WAYLAND_KEYBOARD,
        display: display.unwrap_or_default(),
        presses,
    })
}

fn pointer(
    b: &mut Backends,
    actions: &[PointerAction],
    cancelled: &dyn Fn() -> bool,
) -> Result<Sent, DeviceError> {
    if let Some(w) = b.wayland.as_mut().filter(|w| w.has_pointer()) {
        for a in actions {
            if cancelled() {
                return Err(DeviceError::Unsupported(
                    "cancelled; the rest of the pointer actions was not sent".into(),
                ));
            }
            w.pointer(*a)?;
        }
        return Ok(Sent {
            backend: WAYLAND_POINTER,
            display: w.display().to_owned(),
            presses: 0,
        });
    }
    if let Some(e) = b.eis.as_mut() {
        e.refresh()?;
        if !e.has_pointer() {
            return Err(EisError::Missing {
                from: e.source().to_owned(),
                what: "pointer",
            }
            .into());
        }
        for a in actions {
            if cancelled() {
                return Err(DeviceError::Unsupported(
                    "cancelled; the rest of the pointer actions was not sent".into(),
                ));
            }
            e.pointer(*a)?;
        }
        return Ok(Sent {
            backend: EIS_BACKEND,
            display: e.source().to_owned(),
            presses: 0,
        });
    }
    let Some(u) = b.uinput.as_mut() else {
        return Err(no_device(b));
    };
    for a in actions {
        match *a {
            PointerAction::MoveTo { .. } => {
                return Err(DeviceError::Unsupported(
                    "the pointer cannot be put at a point: the compositor offers no virtual pointer and uinput moves it only relatively"
                        .into(),
                ));
            }
            PointerAction::Scroll { horizontal, steps } => {
                u.scroll(horizontal, steps).map_err(DeviceError::Uinput)?
            }
            PointerAction::Click { button, count } => {
                u.click(button as u16, count).map_err(DeviceError::Uinput)?
            }
        }
    }
    Ok(Sent {
        backend: UINPUT_WHEEL,
        display: "/dev/uinput".into(),
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
