//! A GTK desktop for the in-app action tests: headless sway (as the user `nobody` under
//! root, see `plugins/compositor/tests/sway_session`), a private session `dbus-daemon` (its
//! own `HOME`, and sway's `XDG_RUNTIME_DIR`, so the accessibility bus that
//! `at-spi-bus-launcher` starts on demand is private too and its socket sits beside the
//! Wayland socket, as on a desktop), and `plugins/a11y/tests/fixtures/form.py` on that bus
//! and that Wayland display. Effects are read from the files the fixture writes.
//!
//! Included with `#[path]` by the a11y plugin's tests, the input plugin's tests and the
//! root crate's; the including file must also include `sway_session`.
//!
//! Debian packages: sway, foot, util-linux (setpriv), dbus-daemon, at-spi2-core,
//! libatk-adaptor, python3-gi, gir1.2-gtk-3.0, wtype. When one is missing the tests fail
//! and say so.

#![allow(dead_code)]

use super::sway_session::{SwaySession, poll, which};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A private session bus; its process group (with the accessibility bus launcher and the
/// registry it activates) is ended on drop.
pub struct SessionBus {
    /// The bus address (`unix:path=…`).
    pub address: String,
    child: Child,
    _dir: tempfile::TempDir,
}

impl SessionBus {
    /// A bus in its own directory, which is also its `XDG_RUNTIME_DIR`.
    pub fn start() -> SessionBus {
        SessionBus::start_in(None)
    }

    /// A bus whose services (the accessibility bus launcher) get `runtime` as their
    /// `XDG_RUNTIME_DIR`, as on a desktop where the session's runtime directory holds the
    /// Wayland socket and `at-spi/` alike; `None`: the bus's own directory.
    pub fn start_in(runtime: Option<&Path>) -> SessionBus {
        assert!(
            which("dbus-daemon").is_some(),
            "dbus-daemon is not installed (Debian: dbus-daemon)"
        );
        assert!(
            Path::new("/usr/libexec/at-spi-bus-launcher").exists(),
            "/usr/libexec/at-spi-bus-launcher is missing (Debian: at-spi2-core)"
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let socket = dir.path().join("bus");
        let mut cmd = Command::new("dbus-daemon");
        cmd.args(["--session", "--nofork", "--print-address=1"])
            .arg(format!("--address=unix:path={}", socket.display()))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", dir.path())
            .env("XDG_RUNTIME_DIR", runtime.unwrap_or(dir.path()))
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd.spawn().expect("start dbus-daemon");
        let mut line = String::new();
        use std::io::BufRead;
        std::io::BufReader::new(child.stdout.take().expect("piped"))
            .read_line(&mut line)
            .expect("dbus-daemon prints its address");
        assert!(line.starts_with("unix:"), "dbus-daemon said {line:?}");
        SessionBus {
            address: line.trim().to_owned(),
            child,
            _dir: dir,
        }
    }
}

impl Drop for SessionBus {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// sway, the bus and the form window, all ended on drop (the form first).
pub struct Desktop {
    /// The fixture's process.
    pub form: Child,
    keyboard: Child,
    /// Where the fixture writes what the tests observe.
    pub out: tempfile::TempDir,
    /// The session bus of the fixture and the plugins.
    pub bus: SessionBus,
    /// The compositor.
    pub sway: SwaySession,
}

impl Drop for Desktop {
    fn drop(&mut self) {
        for child in [&mut self.form, &mut self.keyboard] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Desktop {
    pub fn start() -> Desktop {
        Desktop::start_with(&[])
    }

    /// The notes window instead of the form: one multi-line text view, its text in
    /// `notes.txt` (the fixture's `notes` mode).
    pub fn start_notes() -> Desktop {
        Desktop::start_with(&["notes"])
    }

    fn start_with(fixture_args: &[&str]) -> Desktop {
        let sway = SwaySession::start();
        // Headless sway has no input device, so no client ever gets the keyboard focus and
        // GTK marks nothing FOCUSED. A virtual keyboard (wtype, held open by a long sleep
        // before its only key) gives the seat one, as a real desktop has.
        assert!(
            which("wtype").is_some(),
            "wtype is not installed (Debian: wtype)"
        );
        let keyboard = sway
            .command("wtype", &[("WAYLAND_DISPLAY", "wayland-1")])
            .args(["-s", "3600000", "-k", "Shift_L"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start wtype");
        let has_keyboard = poll(Duration::from_secs(5), || {
            let seats = sway.try_msg(&["-t", "get_seats"])?;
            let caps = seats.get(0)?.get("capabilities")?.as_u64()?;
            (caps & 2 != 0).then_some(())
        });
        assert!(
            has_keyboard.is_some(),
            "the virtual keyboard did not reach sway's seat"
        );
        // The accessibility bus's socket lands in sway's runtime directory beside the
        // Wayland socket, where a sandboxed plugin is given it.
        let bus = SessionBus::start_in(Some(sway.runtime_dir()));
        let out = tempfile::tempdir().expect("temp dir");
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .map(|dir| dir.join("plugins/a11y/tests/fixtures/form.py"))
            .find(|p| p.exists())
            .expect("plugins/a11y/tests/fixtures/form.py in the workspace");
        // Debian's python3-gi belongs to the system interpreter (PATH may name another one).
        let form = Command::new("/usr/bin/python3")
            .arg(&fixture)
            .arg(out.path())
            .args(fixture_args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", out.path())
            .env("XDG_RUNTIME_DIR", sway.runtime_dir())
            .env("WAYLAND_DISPLAY", "wayland-1")
            .env("GDK_BACKEND", "wayland")
            .env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
            .env("NO_AT_BRIDGE", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(out.path().join("form.log")).expect("log"))
            .spawn()
            .expect("start python3 (Debian: python3-gi gir1.2-gtk-3.0)");
        let mut desktop = Desktop {
            form,
            keyboard,
            out,
            bus,
            sway,
        };
        let ready = poll(Duration::from_secs(15), || {
            if let Ok(Some(status)) = desktop.form.try_wait() {
                panic!("the form exited with {status}:\n{}", desktop.form_log());
            }
            desktop.path("ready").exists().then_some(())
        });
        assert!(
            ready.is_some(),
            "the form did not come up in 15 s:\n{}",
            desktop.form_log()
        );
        let shown = poll(Duration::from_secs(10), || desktop.window());
        assert!(shown.is_some(), "sway shows no window of the form");
        desktop
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.out.path().join(name)
    }

    pub fn form_log(&self) -> String {
        std::fs::read_to_string(self.path("form.log")).unwrap_or_default()
    }

    pub fn read(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.path(name)).ok()
    }

    /// The form's window as sway reports it.
    pub fn window(&self) -> Option<Value> {
        let pid = self.form.id();
        self.sway
            .views()
            .into_iter()
            .map(|(n, _)| n)
            .find(|n| n["pid"] == pid)
    }

    /// The desktop context the runner would send: the focused window from sway with its
    /// content rectangle, and the outputs (what the compositor plugin reports, read here
    /// straight from sway as the tests' own oracle).
    pub fn context(&self) -> Value {
        let w = self.window().expect("the form's window");
        assert_eq!(
            w["focused"], true,
            "the form's window should have the focus: {w}"
        );
        let rect = json!({
            "x": w["rect"]["x"].as_i64().unwrap_or(0) + w["window_rect"]["x"].as_i64().unwrap_or(0),
            "y": w["rect"]["y"].as_i64().unwrap_or(0) + w["window_rect"]["y"].as_i64().unwrap_or(0),
            "width": w["window_rect"]["width"],
            "height": w["window_rect"]["height"],
        });
        let outputs: Vec<Value> = self
            .sway
            .msg(&["-t", "get_outputs"])
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|o| {
                json!({"name": o["name"], "x": o["rect"]["x"], "y": o["rect"]["y"],
                            "width": o["rect"]["width"], "height": o["rect"]["height"]})
            })
            .collect();
        let focused = json!({"id": w["id"], "app_id": w["app_id"], "title": w["name"],
                             "pid": w["pid"], "rect": rect});
        json!({"focused": focused, "windows": [focused], "workspaces": [], "outputs": outputs})
    }
}

pub async fn wait_for_file(desktop: &Desktop, name: &str, want: &str) -> bool {
    for _ in 0..60 {
        if desktop.read(name).as_deref() == Some(want) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// `utter` of this build: beside the test binary's `deps/` directory (`cargo build
/// --workspace --bins`, as tests/run.sh does first).
pub fn utter_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    let path = exe
        .parent()
        .and_then(Path::parent)
        .expect("target profile dir")
        .join("utter");
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace --bins` (tests/run.sh does)",
        path.display()
    );
    path
}

/// `utter say --local --json WORDS` with the embedded default configuration, in the
/// desktop's session (sway, the private bus); the exit code and the outcome.
pub fn say(desktop: &Desktop, words: &str) -> (Option<i32>, Value) {
    say_with_env(desktop, words, &[])
}

/// [`say`] with extra environment variables for `utter` (the runner passes its `UTTER_*`
/// variables on to the plugins, e.g. `UTTER_GROUNDING_URL` to the a11y plugin).
pub fn say_with_env(desktop: &Desktop, words: &str, env: &[(&str, &str)]) -> (Option<i32>, Value) {
    utter_json(desktop, &["say", "--local", "--json", words], env)
}

/// `utter ARGS…` (which should print JSON) in the desktop's session, as [`say`] runs it:
/// the exit code and what it printed.
pub fn utter_json(desktop: &Desktop, args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, Value) {
    let home = desktop.out.path().join("home");
    std::fs::create_dir_all(home.join("config")).expect("home");
    let output = Command::new(utter_binary())
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_RUNTIME_DIR", desktop.sway.runtime_dir())
        .env("SWAYSOCK", &desktop.sway.socket)
        .env("WAYLAND_DISPLAY", "wayland-1")
        .env("DBUS_SESSION_BUS_ADDRESS", &desktop.bus.address)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run utter");
    let outcome = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "utter {args:?} printed no JSON ({e}):\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.code(), outcome)
}
