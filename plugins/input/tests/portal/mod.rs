//! What the libei tests stand in for a GNOME or KDE session: an EIS server (the compositor's
//! side of libei, spoken with `reis`' server half) that records every event it is sent, and
//! a RemoteDesktop portal frontend (`org.freedesktop.portal.Desktop` on a private session
//! bus, the `org.freedesktop.portal.RemoteDesktop` interface at version 2 with
//! `ConnectToEIS`) that hands the server's socket out the way xdg-desktop-portal does:
//! request objects answering through `org.freedesktop.portal.Request.Response`, a session
//! object, a restore token.
//!
//! The portal is a fake because Debian 12's xdg-desktop-portal (1.16) has no `ConnectToEIS`
//! (it came with 1.18) and no backend here implements RemoteDesktop; it speaks the real wire
//! (the D-Bus names, signatures and the request/response flow of the portal specification),
//! and ashpd, the library the plugin uses, talks to it unchanged.

#![allow(dead_code)]

use reis::PendingRequestResult;
use reis::eis;
use reis::handshake::EisHandshaker;
use reis::request::{DeviceCapability, EisRequest, EisRequestConverter};
use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zbus::zvariant::{ObjectPath, OwnedFd as ZFd, OwnedObjectPath, OwnedValue, Value};

/// What the EIS server saw, one line per event: `key 30 press`, `button 272 release`,
/// `scroll 0 -240`, `scroll-stop`, `move 100 200`, `start`, `stop`, `bind <mask>`.
pub type Log = Arc<Mutex<Vec<String>>>;

/// How the EIS server behaves.
#[derive(Clone, Default)]
pub struct ServerOptions {
    /// The keymap its keyboard sends (xkb text), if any.
    pub keymap: Option<String>,
    /// The region of its absolute pointer: x, y, width, height.
    pub region: Option<(u32, u32, u32, u32)>,
    /// Add the devices paused and never resume them.
    pub never_resume: bool,
    /// Pause every device once this many key events arrived (then read nothing for 0.5 s).
    pub pause_after_keys: Option<usize>,
    /// Add the devices this long after the bind, not at once.
    pub add_late: Option<Duration>,
}

/// Serve one EIS connection on `stream` in a thread until the client goes; events go to
/// `log`.
pub fn serve(stream: UnixStream, options: ServerOptions, log: Log) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        if let Err(e) = serve_here(stream, &options, &log) {
            log.lock().unwrap().push(format!("server-error {e}"));
        }
    })
}

fn wait(context: &eis::Context, deadline: Instant) -> Result<(), String> {
    let left = deadline.saturating_duration_since(Instant::now());
    let mut fds = [nix::poll::PollFd::new(
        context.as_fd(),
        nix::poll::PollFlags::POLLIN,
    )];
    let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
    match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(ms)) {
        Ok(n) if n > 0 => Ok(()),
        Ok(_) => Err("timeout".into()),
        Err(e) => Err(e.to_string()),
    }
}

fn serve_here(stream: UnixStream, options: &ServerOptions, log: &Log) -> Result<(), String> {
    let context = eis::Context::new(stream).map_err(|e| e.to_string())?;
    let mut handshaker = EisHandshaker::new(&context, 1);
    let deadline = Instant::now() + Duration::from_secs(10);
    let response = 'hs: loop {
        wait(&context, deadline)?;
        if context.read().map_err(|e| e.to_string())? == 0 {
            return Err("client closed during the handshake".into());
        }
        while let Some(p) = context.pending_request() {
            if let PendingRequestResult::Request(r) = p {
                if let Some(resp) = handshaker.handle_request(r).map_err(|e| e.to_string())? {
                    break 'hs resp;
                }
            }
        }
    };
    log.lock().unwrap().push(format!(
        "hello {}",
        response.name.clone().unwrap_or_default()
    ));
    let mut converter = EisRequestConverter::new(&context, response, 1);
    let seat = converter.handle().add_seat(
        Some("default"),
        DeviceCapability::Keyboard
            | DeviceCapability::PointerAbsolute
            | DeviceCapability::Button
            | DeviceCapability::Scroll,
    );
    let _ = converter.handle().flush();
    let mut devices: Vec<reis::request::Device> = Vec::new();
    let mut keys_seen = 0usize;
    let mut late: Option<(Instant, Caps)> = None;
    loop {
        if let Some((at, caps)) = late
            && Instant::now() >= at
        {
            late = None;
            add_devices(&seat, caps, options, &mut devices);
            log.lock().unwrap().push("added".into());
            let _ = converter.handle().flush();
        }
        // Short waits, so that late devices come on time; the client's end ends the loop.
        if wait(&context, Instant::now() + Duration::from_millis(100)).is_err() {
            continue;
        }
        match context.read() {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => return Ok(()),
        }
        while let Some(p) = context.pending_request() {
            if let PendingRequestResult::Request(r) = p {
                converter.handle_request(r).map_err(|e| e.to_string())?;
            }
        }
        while let Some(request) = converter.next_request() {
            let line = match request {
                EisRequest::Disconnect => return Ok(()),
                EisRequest::Bind(bind) => {
                    match options.add_late {
                        Some(delay) => late = Some((Instant::now() + delay, bind.capabilities)),
                        None => add_devices(&seat, bind.capabilities, options, &mut devices),
                    }
                    format!("bind {}", bind.capabilities.bits())
                }
                EisRequest::DeviceStartEmulating(_) => "start".into(),
                EisRequest::DeviceStopEmulating(_) => "stop".into(),
                EisRequest::KeyboardKey(k) => {
                    keys_seen += 1;
                    let line = format!(
                        "key {} {}",
                        k.key,
                        if k.state == eis::keyboard::KeyState::Press {
                            "press"
                        } else {
                            "release"
                        }
                    );
                    if options.pause_after_keys == Some(keys_seen) {
                        for d in &devices {
                            d.paused();
                        }
                        let _ = converter.handle().flush();
                        log.lock().unwrap().extend([line, "paused".into()]);
                        // Read nothing for a while, so a client that goes on sending fills the
                        // socket and reads the pause before it could have sent everything.
                        std::thread::sleep(Duration::from_millis(500));
                        continue;
                    } else {
                        line
                    }
                }
                EisRequest::Button(b) => format!(
                    "button {} {}",
                    b.button,
                    if b.state == eis::button::ButtonState::Press {
                        "press"
                    } else {
                        "release"
                    }
                ),
                EisRequest::ScrollDiscrete(s) => {
                    format!("scroll {} {}", s.discrete_dx, s.discrete_dy)
                }
                EisRequest::ScrollStop(_) => "scroll-stop".into(),
                EisRequest::PointerMotionAbsolute(m) => {
                    format!("move {} {}", m.dx_absolute, m.dy_absolute)
                }
                _ => continue,
            };
            log.lock().unwrap().push(line);
        }
        let _ = converter.handle().flush();
    }
}

type Caps = reis::enumflags2::BitFlags<DeviceCapability>;

/// Add a keyboard (sending the keymap of the options) and a pointer for the bound
/// capabilities, and resume them unless the options say never.
fn add_devices(
    seat: &reis::request::Seat,
    capabilities: Caps,
    options: &ServerOptions,
    devices: &mut Vec<reis::request::Device>,
) {
    if capabilities.contains(DeviceCapability::Keyboard) {
        let keymap = options.keymap.clone();
        devices.push(seat.add_device(
            Some("test keyboard"),
            eis::device::DeviceType::Virtual,
            DeviceCapability::Keyboard.into(),
            move |d| {
                if let (Some(text), Some(kb)) = (keymap, d.interface::<eis::Keyboard>()) {
                    let fd = keymap_fd(&text);
                    kb.keymap(
                        eis::keyboard::KeymapType::Xkb,
                        text.len() as u32,
                        fd.as_fd(),
                    );
                }
            },
        ));
    }
    let pointer_caps =
        DeviceCapability::PointerAbsolute | DeviceCapability::Button | DeviceCapability::Scroll;
    if capabilities.intersects(pointer_caps) {
        let region = options.region;
        devices.push(seat.add_device(
            Some("test pointer"),
            eis::device::DeviceType::Virtual,
            capabilities & pointer_caps,
            move |d| {
                if let Some((x, y, w, h)) = region {
                    d.device().region(x, y, w, h, 1.0);
                }
            },
        ));
    }
    if !options.never_resume {
        for d in devices.iter() {
            d.resumed();
        }
    }
}

/// An unlinked file holding `text`, as compositors hand keymaps out.
fn keymap_fd(text: &str) -> OwnedFd {
    use std::io::Write;
    let mut file = tempfile::tempfile().expect("a temp file");
    file.write_all(text.as_bytes()).expect("write the keymap");
    file.into()
}

/// The keymap of an xkb layout in text form, compiled by libxkbcommon (as a compositor
/// configured with that layout would send it).
pub fn keymap_of(layout: &str) -> String {
    let xkb = xkbcommon_dl::xkbcommon_option().expect("libxkbcommon0 is installed");
    let c = |s: &str| std::ffi::CString::new(s).unwrap();
    let (rules, model, layout, variant) = (c("evdev"), c("pc105"), c(layout), c(""));
    let names = xkbcommon_dl::xkb_rule_names {
        rules: rules.as_ptr(),
        model: model.as_ptr(),
        layout: layout.as_ptr(),
        variant: variant.as_ptr(),
        options: std::ptr::null(),
    };
    // SAFETY: the names outlive the calls; each object is checked and unreferenced once.
    unsafe {
        let ctx = (xkb.xkb_context_new)(
            xkbcommon_dl::xkb_context_flags::XKB_CONTEXT_NO_ENVIRONMENT_NAMES,
        );
        assert!(!ctx.is_null());
        let keymap = (xkb.xkb_keymap_new_from_names)(
            ctx,
            &names,
            xkbcommon_dl::xkb_keymap_compile_flags::XKB_KEYMAP_COMPILE_NO_FLAGS,
        );
        assert!(!keymap.is_null(), "the layout compiles (xkb-data)");
        let text = (xkb.xkb_keymap_get_as_string)(
            keymap,
            xkbcommon_dl::xkb_keymap_format::XKB_KEYMAP_FORMAT_TEXT_V1,
        );
        let owned = std::ffi::CStr::from_ptr(text)
            .to_string_lossy()
            .into_owned();
        libc_free(text.cast_mut().cast());
        (xkb.xkb_keymap_unref)(keymap);
        (xkb.xkb_context_unref)(ctx);
        owned
    }
}

unsafe extern "C" {
    #[link_name = "free"]
    fn libc_free(p: *mut std::ffi::c_void);
}

/// What the fake portal was asked, for the tests to check.
#[derive(Debug, Default, Clone)]
pub struct PortalCalls {
    /// `SelectDevices` options: `types`, `persist_mode`, `restore_token` (as text).
    pub select: Vec<HashMap<String, String>>,
    /// Sessions started.
    pub started: usize,
    /// `ConnectToEIS` calls.
    pub connected: usize,
}

/// How the fake portal answers.
#[derive(Clone)]
pub struct PortalOptions {
    /// The interface version it reports (2 has `ConnectToEIS`).
    pub version: u32,
    /// `Start` answers 1 (the person declined) instead of 0.
    pub decline: bool,
    /// The restore token `Start` returns.
    pub restore_token: String,
    /// The EIS server's options.
    pub server: ServerOptions,
}

impl Default for PortalOptions {
    fn default() -> Self {
        PortalOptions {
            version: 2,
            decline: false,
            restore_token: "restore-1".into(),
            server: ServerOptions::default(),
        }
    }
}

struct RemoteDesktop {
    options: PortalOptions,
    calls: Arc<Mutex<PortalCalls>>,
    log: Log,
}

struct Session;

#[zbus::interface(name = "org.freedesktop.portal.Session")]
impl Session {
    async fn close(&self) {}

    #[zbus(property, name = "version")]
    fn version(&self) -> u32 {
        1
    }
}

/// `/org/freedesktop/portal/desktop/<kind>/<sender>/<token>`, as the portal specification
/// builds request and session handles.
fn handle_path(kind: &str, sender: &str, token: &str) -> OwnedObjectPath {
    let sender = sender.trim_start_matches(':').replace('.', "_");
    ObjectPath::try_from(format!(
        "/org/freedesktop/portal/desktop/{kind}/{sender}/{token}"
    ))
    .expect("a valid path")
    .into()
}

fn token(options: &HashMap<String, OwnedValue>, key: &str) -> String {
    options
        .get(key)
        .and_then(|v| v.downcast_ref::<String>().ok())
        .unwrap_or_else(|| "t".into())
}

async fn respond(
    conn: &zbus::Connection,
    sender: &str,
    path: &OwnedObjectPath,
    code: u32,
    results: HashMap<&str, Value<'_>>,
) {
    conn.emit_signal(
        Some(sender),
        path,
        "org.freedesktop.portal.Request",
        "Response",
        &(code, results),
    )
    .await
    .expect("emit Response");
}

#[zbus::interface(name = "org.freedesktop.portal.RemoteDesktop")]
impl RemoteDesktop {
    async fn create_session(
        &self,
        options: HashMap<String, OwnedValue>,
        #[zbus(header)] header: zbus::message::Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> OwnedObjectPath {
        let sender = header.sender().expect("a sender").to_string();
        let request = handle_path("request", &sender, &token(&options, "handle_token"));
        let session = handle_path("session", &sender, &token(&options, "session_handle_token"));
        conn.object_server()
            .at(session.as_ref(), Session)
            .await
            .expect("serve the session");
        let mut results = HashMap::new();
        results.insert("session_handle", Value::from(session.as_str().to_owned()));
        respond(conn, &sender, &request, 0, results).await;
        request
    }

    async fn select_devices(
        &self,
        _session: OwnedObjectPath,
        options: HashMap<String, OwnedValue>,
        #[zbus(header)] header: zbus::message::Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> OwnedObjectPath {
        let sender = header.sender().expect("a sender").to_string();
        let request = handle_path("request", &sender, &token(&options, "handle_token"));
        let seen = options
            .iter()
            .filter(|(k, _)| k.as_str() != "handle_token")
            .map(|(k, v)| {
                let text = v
                    .downcast_ref::<String>()
                    .ok()
                    .or_else(|| v.downcast_ref::<u32>().ok().map(|n| n.to_string()))
                    .unwrap_or_else(|| format!("{v:?}"));
                (k.clone(), text)
            })
            .collect();
        self.calls.lock().unwrap().select.push(seen);
        respond(conn, &sender, &request, 0, HashMap::new()).await;
        request
    }

    async fn start(
        &self,
        _session: OwnedObjectPath,
        _parent_window: String,
        options: HashMap<String, OwnedValue>,
        #[zbus(header)] header: zbus::message::Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> OwnedObjectPath {
        let sender = header.sender().expect("a sender").to_string();
        let request = handle_path("request", &sender, &token(&options, "handle_token"));
        self.calls.lock().unwrap().started += 1;
        if self.options.decline {
            respond(conn, &sender, &request, 1, HashMap::new()).await;
        } else {
            let mut results = HashMap::new();
            results.insert("devices", Value::from(3u32));
            results.insert(
                "restore_token",
                Value::from(self.options.restore_token.clone()),
            );
            respond(conn, &sender, &request, 0, results).await;
        }
        request
    }

    #[zbus(name = "ConnectToEIS")]
    async fn connect_to_eis(
        &self,
        _session: OwnedObjectPath,
        _options: HashMap<String, OwnedValue>,
    ) -> zbus::fdo::Result<ZFd> {
        if self.options.version < 2 {
            return Err(zbus::fdo::Error::UnknownMethod("ConnectToEIS".into()));
        }
        self.calls.lock().unwrap().connected += 1;
        let (ours, theirs) = UnixStream::pair().expect("a socket pair");
        serve(ours, self.options.server.clone(), self.log.clone());
        Ok(ZFd::from(OwnedFd::from(theirs)))
    }

    #[zbus(property)]
    fn available_device_types(&self) -> u32 {
        3
    }

    #[zbus(property, name = "version")]
    fn version(&self) -> u32 {
        self.options.version
    }
}

/// The fake frontend, served until dropped.
pub struct Portal {
    _conn: zbus::Connection,
    /// What it was asked.
    pub calls: Arc<Mutex<PortalCalls>>,
    /// What its EIS servers saw.
    pub log: Log,
}

impl Portal {
    /// Own `org.freedesktop.portal.Desktop` on the bus at `address`.
    pub async fn start(address: &str, options: PortalOptions) -> Portal {
        let calls = Arc::new(Mutex::new(PortalCalls::default()));
        let log: Log = Arc::default();
        let iface = RemoteDesktop {
            options,
            calls: calls.clone(),
            log: log.clone(),
        };
        let conn = zbus::connection::Builder::address(address)
            .expect("an address")
            .name("org.freedesktop.portal.Desktop")
            .expect("the name")
            .serve_at("/org/freedesktop/portal/desktop", iface)
            .expect("serve")
            .build()
            .await
            .expect("connect the fake portal");
        Portal {
            _conn: conn,
            calls,
            log,
        }
    }
}

/// Lines of `log` that match `keep`, waiting (at most 5 s) until there are `n`.
pub async fn wait_lines(log: &Log, n: usize, keep: impl Fn(&str) -> bool) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let lines: Vec<String> = log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| keep(l))
            .cloned()
            .collect();
        if lines.len() >= n || Instant::now() >= deadline {
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
