//! The real xdg-desktop-portal frontend (`/usr/libexec/xdg-desktop-portal`, Debian package
//! `xdg-desktop-portal`) on a private bus, with a GlobalShortcuts + Access + Screenshot
//! *backend* served by the test: no headless desktop implements GlobalShortcuts (nor a
//! screenshot backend that runs here), so the backend is the only fake, and it speaks the real
//! `org.freedesktop.impl.portal.*` interfaces to the real frontend.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use zbus::Connection;
use zbus::object_server::SignalEmitter;
use zbus::zvariant::{ObjectPath, OwnedObjectPath, OwnedValue, Value as DbusValue};

/// The frontend's program.
pub const FRONTEND: &str = "/usr/libexec/xdg-desktop-portal";

/// What the fake backend was asked.
#[derive(Default)]
pub struct Seen {
    pub session: Option<OwnedObjectPath>,
    /// (id, preferred_trigger, description) of each bound shortcut.
    pub bound: Vec<(String, String, String)>,
    /// The options of each `Screenshot` call (`interactive`, `modal`, …), as booleans.
    pub screenshots: Vec<HashMap<String, bool>>,
    /// Answer `Screenshot` with 1 (the person dismissed the dialog) instead of a file.
    pub refuse_screenshots: bool,
}

/// The smallest PNG there is (one transparent pixel): what the fake screenshot backend saves.
pub const ONE_PIXEL_PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0a, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
    0x42, 0x60, 0x82,
];

/// `org.freedesktop.impl.portal.Screenshot` (xdg-desktop-portal's
/// `org.freedesktop.impl.portal.Screenshot.xml`): saves [`ONE_PIXEL_PNG`] under `dir` with a
/// space in its name (so the URI is percent-encoded) and answers its `file://` URI.
pub struct FakeScreenshot {
    pub seen: Arc<Mutex<Seen>>,
    pub dir: std::path::PathBuf,
}

#[zbus::interface(name = "org.freedesktop.impl.portal.Screenshot")]
impl FakeScreenshot {
    async fn screenshot(
        &self,
        _handle: OwnedObjectPath,
        _app_id: &str,
        _parent_window: &str,
        options: HashMap<String, OwnedValue>,
    ) -> (u32, HashMap<String, OwnedValue>) {
        let flags = options
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), bool::try_from(v).ok()?)))
            .collect();
        let refuse = {
            let mut seen = self.seen.lock().unwrap();
            seen.screenshots.push(flags);
            seen.refuse_screenshots
        };
        if refuse {
            return (1, HashMap::new());
        }
        let n = self.seen.lock().unwrap().screenshots.len();
        let path = self.dir.join(format!("Screenshot {n}.png"));
        std::fs::write(&path, ONE_PIXEL_PNG).expect("write the screenshot");
        let uri = format!("file://{}", path.display().to_string().replace(' ', "%20"));
        (0, HashMap::from([("uri".to_owned(), ov(uri))]))
    }

    #[zbus(property(emits_changed_signal = "const"), name = "version")]
    fn version(&self) -> u32 {
        2
    }
}

pub fn ov<'a>(v: impl Into<DbusValue<'a>>) -> OwnedValue {
    OwnedValue::try_from(v.into()).expect("owned value")
}

fn string_option(options: &HashMap<String, OwnedValue>, key: &str) -> String {
    options
        .get(key)
        .and_then(|v| String::try_from(v.try_clone().ok()?).ok())
        .unwrap_or_default()
}

/// `org.freedesktop.impl.portal.GlobalShortcuts`, the backend interface the frontend calls
/// (xdg-desktop-portal's `org.freedesktop.impl.portal.GlobalShortcuts.xml`).
pub struct FakeShortcuts(pub Arc<Mutex<Seen>>);

#[zbus::interface(name = "org.freedesktop.impl.portal.GlobalShortcuts")]
impl FakeShortcuts {
    async fn create_session(
        &self,
        _handle: OwnedObjectPath,
        session_handle: OwnedObjectPath,
        _app_id: &str,
        _options: HashMap<String, OwnedValue>,
    ) -> (u32, HashMap<String, OwnedValue>) {
        self.0.lock().unwrap().session = Some(session_handle);
        (0, HashMap::new())
    }

    async fn bind_shortcuts(
        &self,
        _handle: OwnedObjectPath,
        _session_handle: OwnedObjectPath,
        shortcuts: Vec<(String, HashMap<String, OwnedValue>)>,
        _parent_window: &str,
        _options: HashMap<String, OwnedValue>,
    ) -> (u32, HashMap<String, OwnedValue>) {
        let mut out: Vec<(String, HashMap<String, OwnedValue>)> = Vec::new();
        for (id, info) in shortcuts {
            let preferred = string_option(&info, "preferred_trigger");
            let description = string_option(&info, "description");
            self.0
                .lock()
                .unwrap()
                .bound
                .push((id.clone(), preferred.clone(), description.clone()));
            out.push((
                id,
                HashMap::from([
                    ("description".to_owned(), ov(description)),
                    ("trigger_description".to_owned(), ov(preferred)),
                ]),
            ));
        }
        (0, HashMap::from([("shortcuts".to_owned(), ov(out))]))
    }

    async fn list_shortcuts(
        &self,
        _handle: OwnedObjectPath,
        _session_handle: OwnedObjectPath,
    ) -> (u32, HashMap<String, OwnedValue>) {
        let out: Vec<(String, HashMap<String, OwnedValue>)> = Vec::new();
        (0, HashMap::from([("shortcuts".to_owned(), ov(out))]))
    }

    #[zbus(signal)]
    async fn activated(
        emitter: &SignalEmitter<'_>,
        session_handle: ObjectPath<'_>,
        shortcut_id: &str,
        timestamp: u64,
        options: HashMap<String, OwnedValue>,
    ) -> zbus::Result<()>;

    #[zbus(signal)]
    async fn deactivated(
        emitter: &SignalEmitter<'_>,
        session_handle: ObjectPath<'_>,
        shortcut_id: &str,
        timestamp: u64,
        options: HashMap<String, OwnedValue>,
    ) -> zbus::Result<()>;

    #[zbus(property(emits_changed_signal = "const"), name = "version")]
    fn version(&self) -> u32 {
        1
    }
}

/// `org.freedesktop.impl.portal.Access`: every dialog is granted.
pub struct FakeAccess;

#[zbus::interface(name = "org.freedesktop.impl.portal.Access")]
impl FakeAccess {
    #[allow(clippy::too_many_arguments)]
    async fn access_dialog(
        &self,
        _handle: OwnedObjectPath,
        _app_id: &str,
        _parent_window: &str,
        _title: &str,
        _subtitle: &str,
        _body: &str,
        _options: HashMap<String, OwnedValue>,
    ) -> (u32, HashMap<String, OwnedValue>) {
        (0, HashMap::new())
    }
}

pub const BACKEND_NAME: &str = "org.freedesktop.impl.portal.desktop.uttertest";
pub const BACKEND_PATH: &str = "/org/freedesktop/portal/desktop";

/// The frontend plus the fake backend, both on one bus; the frontend is killed on drop.
pub struct FakePortal {
    /// What the backend was asked.
    pub seen: Arc<Mutex<Seen>>,
    backend: Connection,
    frontend: std::process::Child,
    dir: tempfile::TempDir,
    bus: String,
}

/// The frontend on `bus`, with the `uttertest.portal` file and its runtime directory under
/// `dir`, logging (appending) to `dir/xdp.log`.
fn spawn_frontend(bus: &str, dir: &Path) -> std::process::Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("xdp.log"))
        .unwrap();
    std::process::Command::new(FRONTEND)
        .args(["--replace", "--verbose"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("DBUS_SESSION_BUS_ADDRESS", bus)
        .env("XDG_RUNTIME_DIR", dir.join("run"))
        .env("XDG_DESKTOP_PORTAL_DIR", dir.join("portals"))
        .env("XDG_CURRENT_DESKTOP", "uttertest")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("xdg-desktop-portal starts")
}

impl FakePortal {
    /// Serve the backend on `bus`, start the frontend with a `uttertest.portal` file naming
    /// it, and wait (up to 60 s) until `org.freedesktop.portal.Desktop` has an owner.
    pub async fn start(bus: &str) -> FakePortal {
        assert!(
            Path::new(FRONTEND).exists(),
            "{FRONTEND} is missing: apt-get install xdg-desktop-portal (tests/run.sh does)"
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let portals = dir.path().join("portals");
        let runtime = dir.path().join("run");
        std::fs::create_dir_all(&portals).expect("portals dir");
        std::fs::create_dir_all(&runtime).expect("runtime dir");
        std::fs::write(
            portals.join("uttertest.portal"),
            format!(
                "[portal]\nDBusName={BACKEND_NAME}\nInterfaces=org.freedesktop.impl.portal.GlobalShortcuts;org.freedesktop.impl.portal.Access;org.freedesktop.impl.portal.Screenshot;\nUseIn=uttertest\n"
            ),
        )
        .expect("portal file");
        let seen = Arc::new(Mutex::new(Seen::default()));
        let backend = zbus::connection::Builder::address(bus)
            .unwrap()
            .name(BACKEND_NAME)
            .unwrap()
            .serve_at(BACKEND_PATH, FakeShortcuts(seen.clone()))
            .unwrap()
            .serve_at(BACKEND_PATH, FakeAccess)
            .unwrap()
            .serve_at(
                BACKEND_PATH,
                FakeScreenshot {
                    seen: seen.clone(),
                    dir: dir.path().to_path_buf(),
                },
            )
            .unwrap()
            .method_timeout(Duration::from_secs(60))
            .build()
            .await
            .expect("the fake backend is on the bus");
        let frontend = spawn_frontend(bus, dir.path());
        let portal = FakePortal {
            seen,
            backend,
            frontend,
            dir,
            bus: bus.to_owned(),
        };
        portal.wait_for_frontend().await;
        portal
    }

    /// Wait (up to 60 s) until `org.freedesktop.portal.Desktop` has an owner.
    async fn wait_for_frontend(&self) {
        let dbus = zbus::fdo::DBusProxy::new(&self.backend)
            .await
            .expect("bus proxy");
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !dbus
            .name_has_owner("org.freedesktop.portal.Desktop".try_into().unwrap())
            .await
            .unwrap_or(false)
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the portal frontend never took its name; its log:\n{}",
                self.frontend_log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Kill the frontend (as a crash would) and wait until its name has no owner.
    pub async fn stop_frontend(&mut self) {
        let _ = self.frontend.kill();
        let _ = self.frontend.wait();
        let dbus = zbus::fdo::DBusProxy::new(&self.backend)
            .await
            .expect("bus proxy");
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while dbus
            .name_has_owner("org.freedesktop.portal.Desktop".try_into().unwrap())
            .await
            .unwrap_or(false)
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the killed frontend still owns its name"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Start a new frontend process (after [`FakePortal::stop_frontend`]) and wait for its
    /// name.
    pub async fn start_frontend(&mut self) {
        self.frontend = spawn_frontend(&self.bus, self.dir.path());
        self.wait_for_frontend().await;
    }

    /// The backend's bus connection.
    pub fn connection(&self) -> &Connection {
        &self.backend
    }

    /// What the frontend logged so far (`--verbose`).
    pub fn frontend_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("xdp.log")).unwrap_or_default()
    }

    /// The session the frontend created with the backend, once it has.
    pub fn session(&self) -> Option<OwnedObjectPath> {
        self.seen.lock().unwrap().session.clone()
    }

    /// Emit `Activated` (`down`) or `Deactivated` for shortcut `id` in `session`, as a
    /// compositor does when the key goes down or up.
    pub async fn key(&self, session: &OwnedObjectPath, id: &str, down: bool, timestamp: u64) {
        let emitter = SignalEmitter::new(&self.backend, BACKEND_PATH).unwrap();
        let sent = if down {
            FakeShortcuts::activated(&emitter, session.as_ref(), id, timestamp, HashMap::new())
                .await
        } else {
            FakeShortcuts::deactivated(&emitter, session.as_ref(), id, timestamp, HashMap::new())
                .await
        };
        sent.expect("emit the shortcut signal");
    }
}

impl Drop for FakePortal {
    fn drop(&mut self) {
        let _ = self.frontend.kill();
        let _ = self.frontend.wait();
    }
}
