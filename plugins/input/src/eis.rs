//! The libei backend: a sender context on an EIS server (the emulated-input protocol of
//! libei/libeis 1.x, spoken with the pure-Rust `reis`), which is how GNOME (Mutter 46+) and
//! KDE (KWin 6.1+) take input from a program. The socket comes from the RemoteDesktop portal
//! ([`crate::portal`]), or, where `LIBEI_SOCKET` names one (libei's own variable: a path,
//! relative ones under `$XDG_RUNTIME_DIR`), straight from it.
//!
//! The server offers seats with capabilities; the plugin binds the keyboard, absolute
//! pointer, button and scroll capabilities of the first seat, and the server answers with
//! devices, which it resumes when they may send. Keys are evdev codes read through the
//! keymap the server sends with its keyboard (the person's own layout, so a German layout
//! types what was asked), else the layout of the environment ([`LayoutMap`]). Each event is
//! followed by a frame, every press by its release, and a call ends with a round trip
//! (`ei_connection.sync`), so the server has read every event when the call returns.

use crate::layout::{KeyEvent, LayoutMap};
use crate::portal::PortalSession;
use crate::wayland::PointerAction;
use reis::PendingRequestResult;
use reis::ei;
use reis::event::{Device, DeviceCapability, EiEvent, EiEventConverter};
use reis::handshake::EiHandshaker;
use std::cell::Cell;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The backend name results carry.
pub const EIS_BACKEND: &str = "libei";

/// How long the handshake and the first devices may take.
const SETUP_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a paused device is waited for before a call fails, and a round trip's limit.
const RESUME_TIMEOUT: Duration = Duration::from_secs(1);
const ROUNDTRIP_TIMEOUT: Duration = Duration::from_secs(2);
/// The largest keymap read from the server.
const MAX_KEYMAP: u32 = 4 << 20;
/// More open file descriptors than this and the connection is given up (see
/// [`Eis::refresh`]).
const MAX_OPEN_FDS: usize = 4096;

/// The longest a key call may take: the round trip's limit plus a millisecond per event
/// (2000 characters typed are about 8000 events), at most 30 s.
fn call_budget(events: usize) -> Duration {
    (ROUNDTRIP_TIMEOUT + Duration::from_millis(events as u64)).min(Duration::from_secs(30))
}

/// Linux button codes the `ei_button` interface takes.
const BTN_LEFT: u32 = 0x110;
const BTN_MIDDLE: u32 = 0x112;

/// One wheel step in the 120ths `ei_scroll.scroll_discrete` counts in.
const WHEEL_STEP: i32 = 120;

/// A failed EIS call.
#[derive(Debug, thiserror::Error)]
pub enum EisError {
    /// No EIS server could be reached.
    #[error("{0}")]
    Connect(String),
    /// The person declined in the RemoteDesktop portal's dialog; not asked again until
    /// the plugin restarts.
    #[error("{0} (restart the service to be asked again)")]
    Declined(String),
    /// The connection failed; it is dropped and made again at the next call.
    #[error("the connection to {from} broke: {why}")]
    Broken {
        /// Where the socket came from.
        from: String,
        /// What happened.
        why: String,
    },
    /// The server offers no device with the capability.
    #[error("{from} offers no {what}")]
    Missing {
        /// Where the socket came from.
        from: String,
        /// `keyboard`, `absolute pointer`, `button`, `scroll`.
        what: &'static str,
    },
    /// The server holds the device paused (the compositor takes no input from us now).
    #[error("the EIS server keeps the {0} paused, so input would be dropped; nothing was sent")]
    Paused(&'static str),
    /// The caller went away; keys pressed so far were released.
    #[error("cancelled after {0} key presses (every key pressed was released)")]
    Cancelled(usize),
    /// The server paused or removed the device (or its seat) during the call; keys sent
    /// after that may have been dropped.
    #[error(
        "the EIS server paused or removed the {what} during the call, after {sent} key presses had been sent; some may have been dropped (every key pressed was released)"
    )]
    Interrupted {
        /// The device.
        what: &'static str,
        /// Presses sent before it was noticed.
        sent: usize,
    },
    /// A point outside the regions the absolute pointer covers.
    #[error("the point {x},{y} is outside the screen regions the EIS server offers")]
    Outside {
        /// Layout x.
        x: u32,
        /// Layout y.
        y: u32,
    },
}

impl EisError {
    /// Whether the connection must be made again.
    pub fn is_broken(&self) -> bool {
        matches!(self, EisError::Broken { .. })
    }
}

/// An open sender context with the devices the server gave it.
pub struct Eis {
    context: ei::Context,
    converter: EiEventConverter,
    devices: Vec<(Device, bool)>,
    /// Whether the first seat is bound (only that one is).
    bound: bool,
    /// Devices paused or removed, and seats removed, so far: a call that sees it change
    /// knows its device went away under it.
    interruptions: u64,
    layout: Option<LayoutMap>,
    source: String,
    sequence: u32,
    // Kept for its life: dropping it ends the portal session.
    _portal: Option<PortalSession>,
}

impl std::fmt::Debug for Eis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Eis")
            .field("source", &self.source)
            .field("devices", &self.devices.len())
            .finish_non_exhaustive()
    }
}

impl Eis {
    /// Connect where `LIBEI_SOCKET` points, else through the RemoteDesktop portal (which
    /// may ask the person first; see [`crate::portal`]).
    ///
    /// # Errors
    /// [`EisError::Connect`] saying why neither is there.
    pub fn connect() -> Result<Eis, EisError> {
        if let Some(path) = std::env::var_os("LIBEI_SOCKET").filter(|p| !p.is_empty()) {
            let mut path = std::path::PathBuf::from(path);
            if path.is_relative() {
                path = utter_ipc::paths::BaseDirs::from_env().runtime.join(path);
            }
            let stream = UnixStream::connect(&path).map_err(|e| {
                EisError::Connect(format!(
                    "cannot connect to the EIS socket {} (LIBEI_SOCKET): {e}",
                    path.display()
                ))
            })?;
            return Eis::from_stream(
                stream,
                format!("the EIS server at {} (LIBEI_SOCKET)", path.display()),
                None,
            );
        }
        let token = utter_ipc::paths::BaseDirs::from_env().remote_desktop_token();
        let (fd, session) = crate::portal::connect(token).map_err(|e| match e {
            crate::portal::PortalError::Declined(why) => EisError::Declined(why),
            crate::portal::PortalError::Failed(why) => EisError::Connect(why),
        })?;
        Eis::from_stream(
            UnixStream::from(fd),
            "the RemoteDesktop portal's EIS server".into(),
            Some(session),
        )
    }

    /// Handshake on `stream`, bind the first seat's capabilities and wait (at most
    /// [`SETUP_TIMEOUT`]) for the devices the server adds.
    ///
    /// # Errors
    /// [`EisError::Broken`] when the server closes, speaks wrongly or takes too long.
    pub fn from_stream(
        stream: UnixStream,
        source: String,
        portal: Option<PortalSession>,
    ) -> Result<Eis, EisError> {
        let broken = |why: String| EisError::Broken {
            from: source.clone(),
            why,
        };
        let context = ei::Context::new(stream).map_err(|e| broken(e.to_string()))?;
        let deadline = Instant::now() + SETUP_TIMEOUT;
        let mut handshaker = EiHandshaker::new("utter-input", ei::handshake::ContextType::Sender);
        let response = 'handshake: loop {
            wait_readable(&context, deadline).map_err(&broken)?;
            read(&context).map_err(&broken)?;
            while let Some(pending) = context.pending_event() {
                let event = match pending {
                    PendingRequestResult::Request(event) => event,
                    PendingRequestResult::ParseError(e) => {
                        return Err(broken(format!("a malformed message: {e}")));
                    }
                    PendingRequestResult::InvalidObject(_) => continue,
                };
                match handshaker.handle_event(event) {
                    Ok(Some(response)) => break 'handshake response,
                    Ok(None) => {}
                    Err(e) => return Err(broken(format!("handshake: {e}"))),
                }
            }
        };
        let converter = EiEventConverter::new(&context, response);
        let mut eis = Eis {
            context,
            converter,
            devices: Vec::new(),
            bound: false,
            interruptions: 0,
            layout: None,
            source,
            sequence: 0,
            _portal: portal,
        };
        // The seat, then (after the bind) the devices. A server that adds them later is
        // read again before each call.
        let mut synced = false;
        while Instant::now() < deadline {
            eis.dispatch(deadline.min(Instant::now() + Duration::from_millis(100)))?;
            if eis.bound && !synced {
                synced = true;
                eis.roundtrip()?;
            }
            if synced && !eis.devices.is_empty() && eis.devices.iter().all(|d| d.1) {
                break;
            }
        }
        if !eis.bound {
            return Err(EisError::Missing {
                from: eis.source.clone(),
                what: "seat",
            });
        }
        Ok(eis)
    }

    /// Where the socket came from, for messages and `plugin.health`.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether a device has the keyboard capability.
    pub fn has_keyboard(&self) -> bool {
        self.find(DeviceCapability::Keyboard).is_some()
    }

    /// Whether a device can put the pointer at a point, press buttons or scroll.
    pub fn has_pointer(&self) -> bool {
        [
            DeviceCapability::PointerAbsolute,
            DeviceCapability::Button,
            DeviceCapability::Scroll,
        ]
        .into_iter()
        .any(|c| self.find(c).is_some())
    }

    /// The keymap keys are read through: the server's, else the environment's.
    pub fn layout(&mut self) -> &LayoutMap {
        if self.layout.is_none() {
            let from_server = self.find(DeviceCapability::Keyboard).and_then(|d| {
                keymap_text(d).map(|t| (t, d.name().unwrap_or("keyboard").to_owned()))
            });
            if from_server.is_none()
                && self
                    .find(DeviceCapability::Keyboard)
                    .is_some_and(|d| d.keymap().is_some())
            {
                tracing::warn!(
                    "the EIS keyboard's keymap cannot be read (not xkb text, empty, larger than {MAX_KEYMAP} bytes or unreadable); using the environment's layout"
                );
            }
            let layout = match from_server {
                Some((text, name)) => {
                    LayoutMap::from_keymap_text(&text, &format!("{name} (EIS keymap)"))
                        .unwrap_or_else(|e| {
                            tracing::warn!(
                                "the EIS keymap does not load ({e}); using the environment's layout"
                            );
                            LayoutMap::from_environment().0
                        })
                }
                None => LayoutMap::from_environment().0,
            };
            self.layout = Some(layout);
        }
        self.layout.as_ref().expect("set above")
    }

    /// Send key `events` (evdev codes, from [`crate::layout::key_events`]), a frame after
    /// each, stopping between strokes (when no key is held) once `cancelled` says so.
    /// Returns the presses sent.
    ///
    /// # Errors
    /// No keyboard, a paused one, a broken connection, or [`EisError::Cancelled`].
    pub fn keys(
        &mut self,
        events: &[KeyEvent],
        cancelled: &dyn Fn() -> bool,
    ) -> Result<usize, EisError> {
        let device = self.ready(DeviceCapability::Keyboard, "keyboard")?;
        let keyboard: ei::Keyboard = device.interface().ok_or_else(|| EisError::Missing {
            from: self.source.clone(),
            what: "keyboard",
        })?;
        // One deadline for the whole call, whatever the server's pace.
        let deadline = Instant::now() + call_budget(events.len());
        let interruptions = self.interruptions;
        self.start_emulating(&device);
        let mut held: Vec<u16> = Vec::new();
        let mut presses = 0;
        let mut outcome = Ok(());
        for &(code, down) in events {
            if held.is_empty() && cancelled() {
                outcome = Err(EisError::Cancelled(presses));
                break;
            }
            if held.is_empty() && self.interruptions != interruptions {
                outcome = Err(EisError::Interrupted {
                    what: "keyboard",
                    sent: presses,
                });
                break;
            }
            let state = if down {
                held.push(code);
                presses += 1;
                ei::keyboard::KeyState::Press
            } else {
                held.retain(|&c| c != code);
                ei::keyboard::KeyState::Released
            };
            keyboard.key(u32::from(code), state);
            self.frame(&device);
            if held.is_empty() {
                // Between strokes: send, and read what the server said meanwhile (a pause,
                // a removed device) before the next stroke.
                if let Err(e) = self
                    .flush_until(deadline)
                    .and_then(|()| self.dispatch(Instant::now()))
                {
                    outcome = Err(e);
                    break;
                }
            }
        }
        // Whatever happened, nothing stays held.
        for &code in held.iter().rev() {
            keyboard.key(u32::from(code), ei::keyboard::KeyState::Released);
            self.frame(&device);
        }
        device.device().stop_emulating(self.serial());
        outcome?;
        self.roundtrip()?;
        if self.interruptions != interruptions {
            // Paused or removed while the keys were on their way: some may be lost.
            return Err(EisError::Interrupted {
                what: "keyboard",
                sent: presses,
            });
        }
        Ok(presses)
    }

    /// Do one pointer action.
    ///
    /// # Errors
    /// No device with the capability, a paused one, a point outside the server's regions,
    /// a broken connection.
    pub fn pointer(&mut self, action: PointerAction) -> Result<(), EisError> {
        match action {
            PointerAction::MoveTo { x, y, .. } => {
                let device = self.ready(DeviceCapability::PointerAbsolute, "absolute pointer")?;
                let regions = device.regions();
                let inside = regions.is_empty()
                    || regions.iter().any(|r| {
                        (r.x..r.x.saturating_add(r.width)).contains(&x)
                            && (r.y..r.y.saturating_add(r.height)).contains(&y)
                    });
                if !inside {
                    return Err(EisError::Outside { x, y });
                }
                let pointer: ei::PointerAbsolute = device
                    .interface()
                    .ok_or_else(|| self.missing("absolute pointer"))?;
                self.start_emulating(&device);
                // Logical pixels of the layout, as the regions are.
                pointer.motion_absolute(x as f32, y as f32);
                self.frame(&device);
                device.device().stop_emulating(self.serial());
            }
            PointerAction::Click { button, count } => {
                if !(BTN_LEFT..=BTN_MIDDLE).contains(&button) {
                    return Err(self.missing("such button"));
                }
                let device = self.ready(DeviceCapability::Button, "button")?;
                let buttons: ei::Button =
                    device.interface().ok_or_else(|| self.missing("button"))?;
                self.start_emulating(&device);
                for _ in 0..count {
                    buttons.button(button, ei::button::ButtonState::Press);
                    self.frame(&device);
                    buttons.button(button, ei::button::ButtonState::Released);
                    self.frame(&device);
                }
                device.device().stop_emulating(self.serial());
            }
            PointerAction::Scroll { horizontal, steps } => {
                let device = self.ready(DeviceCapability::Scroll, "scroll")?;
                let scroll: ei::Scroll =
                    device.interface().ok_or_else(|| self.missing("scroll"))?;
                self.start_emulating(&device);
                let sign = steps.signum();
                for _ in 0..steps.unsigned_abs() {
                    let (dx, dy) = if horizontal {
                        (sign * WHEEL_STEP, 0)
                    } else {
                        (0, sign * WHEEL_STEP)
                    };
                    scroll.scroll_discrete(dx, dy);
                    self.frame(&device);
                }
                let (sx, sy) = if horizontal { (1, 0) } else { (0, 1) };
                scroll.scroll_stop(sx, sy, 0);
                self.frame(&device);
                device.device().stop_emulating(self.serial());
            }
        }
        self.roundtrip()
    }

    fn missing(&self, what: &'static str) -> EisError {
        EisError::Missing {
            from: self.source.clone(),
            what,
        }
    }

    fn broken(&self, why: impl Into<String>) -> EisError {
        EisError::Broken {
            from: self.source.clone(),
            why: why.into(),
        }
    }

    fn find(&self, capability: DeviceCapability) -> Option<&Device> {
        self.devices
            .iter()
            .map(|(d, _)| d)
            .find(|d| d.has_capability(capability))
    }

    /// A resumed device with `capability`, reading what the server sent meanwhile and
    /// waiting up to [`RESUME_TIMEOUT`] for a paused one.
    fn ready(
        &mut self,
        capability: DeviceCapability,
        what: &'static str,
    ) -> Result<Device, EisError> {
        self.dispatch(Instant::now())?;
        let deadline = Instant::now() + RESUME_TIMEOUT;
        loop {
            match self
                .devices
                .iter()
                .find(|(d, _)| d.has_capability(capability))
            {
                None => return Err(self.missing(what)),
                Some((d, true)) => return Ok(d.clone()),
                Some((_, false)) if Instant::now() >= deadline => {
                    return Err(EisError::Paused(what));
                }
                Some(_) => self.dispatch(deadline)?,
            }
        }
    }

    fn serial(&self) -> u32 {
        self.converter.connection().serial()
    }

    fn start_emulating(&mut self, device: &Device) {
        self.sequence = self.sequence.wrapping_add(1);
        device
            .device()
            .start_emulating(self.serial(), self.sequence);
    }

    fn frame(&self, device: &Device) {
        device.device().frame(self.serial(), now_micros());
    }

    /// Read what the server sent since the last call (devices added late, paused, removed),
    /// without waiting; a connection holding an absurd number of received file descriptors
    /// is given up (reis keeps every fd a message brought, so a hostile server could
    /// exhaust the process's).
    ///
    /// # Errors
    /// [`EisError::Broken`].
    pub fn refresh(&mut self) -> Result<(), EisError> {
        self.dispatch(Instant::now())?;
        let open = std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count);
        if open > MAX_OPEN_FDS {
            return Err(self.broken(format!(
                "the process holds {open} file descriptors, most of them sent by the server"
            )));
        }
        Ok(())
    }

    /// Write out what is buffered, waiting (bounded) while the socket is full and reading
    /// meanwhile so a server that writes too cannot deadlock us.
    fn flush(&mut self) -> Result<(), EisError> {
        self.flush_until(Instant::now() + ROUNDTRIP_TIMEOUT)
    }

    /// [`Eis::flush`] with a given deadline.
    fn flush_until(&mut self, deadline: Instant) -> Result<(), EisError> {
        loop {
            match self.context.flush() {
                Ok(()) => return Ok(()),
                Err(e) if std::io::Error::from(e).kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        return Err(self.broken("the server stopped reading"));
                    }
                    let mut fds = [nix::poll::PollFd::new(
                        self.context.as_fd(),
                        nix::poll::PollFlags::POLLOUT,
                    )];
                    let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(50u16));
                    self.dispatch(Instant::now())?;
                }
                Err(e) => return Err(self.broken(e.to_string())),
            }
        }
    }

    /// `ei_connection.sync`: returns once the server has read everything sent before it.
    fn roundtrip(&mut self) -> Result<(), EisError> {
        let done = Rc::new(Cell::new(false));
        let callback = self.converter.connection().connection().sync(1);
        let flag = done.clone();
        self.converter
            .add_callback_handler(callback, move |_| flag.set(true));
        self.flush()?;
        let deadline = Instant::now() + ROUNDTRIP_TIMEOUT;
        while !done.get() {
            if Instant::now() >= deadline {
                return Err(self.broken("no answer to a sync within 2 s"));
            }
            self.dispatch(deadline)?;
        }
        Ok(())
    }

    /// Read and handle what the server sent, waiting until `until` for the first bytes
    /// (not at all when it is now or past).
    fn dispatch(&mut self, until: Instant) -> Result<(), EisError> {
        if wait_readable(&self.context, until).is_ok() {
            read(&self.context).map_err(|why| self.broken(why))?;
        }
        while let Some(pending) = self.context.pending_event() {
            match pending {
                PendingRequestResult::Request(event) => self
                    .converter
                    .handle_event(event)
                    .map_err(|e| self.broken(format!("a protocol error: {e}")))?,
                PendingRequestResult::ParseError(e) => {
                    return Err(self.broken(format!("a malformed message: {e}")));
                }
                PendingRequestResult::InvalidObject(_) => {}
            }
        }
        while let Some(event) = self.converter.next_event() {
            match event {
                // Only the first seat is bound (compositors offer one); later ones are
                // left alone.
                EiEvent::SeatAdded(added) if !self.bound => {
                    added.seat.bind_capabilities(
                        DeviceCapability::Keyboard
                            | DeviceCapability::PointerAbsolute
                            | DeviceCapability::Button
                            | DeviceCapability::Scroll,
                    );
                    self.bound = true;
                }
                EiEvent::SeatRemoved(_) => self.interruptions += 1,
                EiEvent::DeviceAdded(added) => {
                    tracing::info!(
                        "EIS device {:?} from {}",
                        added.device.name().unwrap_or("?"),
                        self.source
                    );
                    self.layout = None;
                    self.devices.push((added.device, false));
                }
                EiEvent::DeviceRemoved(removed) => {
                    self.interruptions += 1;
                    self.devices.retain(|(d, _)| *d != removed.device);
                    self.layout = None;
                }
                EiEvent::DeviceResumed(resumed) => {
                    for (d, on) in &mut self.devices {
                        if *d == resumed.device {
                            *on = true;
                        }
                    }
                }
                EiEvent::DevicePaused(paused) => {
                    self.interruptions += 1;
                    for (d, on) in &mut self.devices {
                        if *d == paused.device {
                            *on = false;
                        }
                    }
                }
                EiEvent::Disconnected(d) => {
                    return Err(self.broken(format!(
                        "the server disconnected ({:?}{})",
                        d.reason,
                        d.explanation.map(|e| format!(": {e}")).unwrap_or_default()
                    )));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Wait until `context` is readable or `until` passes (`Err` on timeout).
fn wait_readable(context: &ei::Context, until: Instant) -> Result<(), String> {
    let left = until.saturating_duration_since(Instant::now());
    let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
    let mut fds = [nix::poll::PollFd::new(
        context.as_fd(),
        nix::poll::PollFlags::POLLIN,
    )];
    match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(ms)) {
        Ok(n) if n > 0 => Ok(()),
        Ok(_) => Err("the EIS server did not answer in time".into()),
        Err(e) => Err(format!("poll: {e}")),
    }
}

/// Read what is there; the end of the stream is an error.
fn read(context: &ei::Context) -> Result<(), String> {
    match context.read() {
        Ok(0) => Err("the server closed the connection".into()),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            Err("the server closed the connection".into())
        }
        Err(e) => Err(e.to_string()),
    }
}

/// The text of the keyboard's keymap, when the server sent one of xkb's text format.
fn keymap_text(device: &Device) -> Option<String> {
    let keymap = device.keymap()?;
    if keymap.type_ != ei::keyboard::KeymapType::Xkb || keymap.size == 0 || keymap.size > MAX_KEYMAP
    {
        return None;
    }
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::from(keymap.fd.try_clone().ok()?);
    // Read at offset 0 without moving the offset: the server may share the fd.
    let mut bytes = vec![0; keymap.size as usize];
    file.read_exact_at(&mut bytes, 0).ok()?;
    String::from_utf8(bytes).ok()
}

/// `CLOCK_MONOTONIC` in microseconds, the clock of `ei_device.frame` timestamps.
fn now_micros() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as u64 * 1_000_000 + t.tv_nsec() as u64 / 1_000)
        .unwrap_or(0)
}
