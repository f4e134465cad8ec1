//! A real, headless sway session for tests and benchmarks, with real `foot` windows.
//!
//! sway refuses to run as root, so when the tests run as root sway and its windows run as
//! the user `nobody` (65534) through `setpriv`, with a runtime directory that user owns; root
//! (the test, the runner, its plugins) then talks to the IPC socket directly. Effects are read
//! back from sway itself with `swaymsg`. Everything is killed on drop.
//!
//! Debian packages: sway, foot, a font (fonts-dejavu-core), util-linux (setpriv);
//! `tests/run.sh` installs them. When sway cannot start, [`SwaySession::start`] panics and says
//! why: a test that needs a compositor must not pass without one.
//!
//! Used by this crate's `tests/sway.rs`, the root crate's tests and the benchmarks:
//! `#[path = "../plugins/compositor/tests/sway_session/mod.rs"] mod sway_session;` (needs
//! serde_json and tempfile).

#![allow(dead_code)]

use serde_json::Value;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The unprivileged user sway and its clients run as when the tests run as root.
pub const NOBODY: u32 = 65534;

/// Whether this process is root.
pub fn running_as_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

/// A private headless sway and the windows started in it; everything is killed on drop.
pub struct SwaySession {
    dir: tempfile::TempDir,
    /// The IPC socket (`SWAYSOCK`).
    pub socket: PathBuf,
    sway: Child,
    windows: Vec<Child>,
}

impl SwaySession {
    /// The session's runtime directory (`XDG_RUNTIME_DIR`, owned by nobody under root).
    pub fn runtime_dir(&self) -> &Path {
        self.dir.path()
    }

    /// What a client of the session needs: `SWAYSOCK`, `WAYLAND_DISPLAY`, `XDG_RUNTIME_DIR`.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("SWAYSOCK".into(), self.socket.display().to_string()),
            ("WAYLAND_DISPLAY".into(), "wayland-1".into()),
            (
                "XDG_RUNTIME_DIR".into(),
                self.dir.path().display().to_string(),
            ),
        ]
    }

    /// The command prefix that runs a program as the session's user with a clean environment.
    pub fn command(&self, program: &str, env: &[(&str, &str)]) -> Command {
        command_as_session_user(self.dir.path(), program, env)
    }

    /// Start sway on a 1024x768 headless output; wait (15 s) for its socket and `wayland-1`.
    ///
    /// # Panics
    /// When sway or foot is missing or sway does not come up (with its log).
    pub fn start() -> SwaySession {
        for program in ["sway", "foot", "swaymsg"] {
            assert!(
                which(program).is_some(),
                "{program} is not installed: these tests need sway, foot and swaymsg (Debian: apt-get install sway foot)"
            );
        }
        let dir = tempfile::Builder::new()
            .prefix("utter-sway-")
            .tempdir_in("/tmp")
            .expect("a temp dir in /tmp");
        let path = dir.path();
        std::fs::write(path.join("conf"), "output HEADLESS-1 resolution 1024x768\n")
            .expect("write sway config");
        if running_as_root() {
            std::os::unix::fs::chown(path, Some(NOBODY), Some(NOBODY))
                .expect("chown the runtime dir");
            std::os::unix::fs::chown(path.join("conf"), Some(NOBODY), Some(NOBODY))
                .expect("chown the config");
        }
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).expect("chmod 700");
        let log = std::fs::File::create(path.join("sway.log")).expect("sway log");
        let conf = path.join("conf");
        let mut cmd = command_as_session_user(
            path,
            "sway",
            &[
                ("WLR_BACKENDS", "headless"),
                ("WLR_LIBINPUT_NO_DEVICES", "1"),
                ("WLR_RENDERER", "pixman"),
                // foot runs the user's shell; nobody's is nologin, which would end it at once.
                ("SHELL", "/bin/sh"),
            ],
        );
        cmd.arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log fd"))
            .stderr(log);
        let sway = cmd.spawn().expect("start sway");
        let mut session = SwaySession {
            socket: PathBuf::new(),
            dir,
            sway,
            windows: Vec::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let socket = std::fs::read_dir(session.dir.path())
                .expect("read the runtime dir")
                .filter_map(Result::ok)
                .map(|e| e.path())
                .find(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("sway-ipc.") && n.ends_with(".sock"))
                });
            let display = session.dir.path().join("wayland-1").exists();
            if let (Some(socket), true) = (socket, display) {
                session.socket = socket;
                if session.try_msg(&["-t", "get_version"]).is_some() {
                    break;
                }
            }
            if let Ok(Some(status)) = session.sway.try_wait() {
                panic!(
                    "sway exited with {status} before it was ready; its log:\n{}",
                    session.log()
                );
            }
            assert!(
                Instant::now() < deadline,
                "sway did not create its IPC socket and wayland-1 in 15 s; its log:\n{}",
                session.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        session
    }

    /// sway's own log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sway.log")).unwrap_or_default()
    }

    /// Start `foot --app-id <app_id>` as a window of this session and wait until sway
    /// shows it.
    pub fn open_window(&mut self, app_id: &str) {
        let mut cmd = self.command(
            "foot",
            &[("WAYLAND_DISPLAY", "wayland-1"), ("SHELL", "/bin/sh")],
        );
        cmd.args(["--app-id", app_id])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        self.windows.push(cmd.spawn().expect("start foot"));
        let found = poll(Duration::from_secs(10), || self.window(app_id));
        assert!(
            found.is_some(),
            "foot --app-id {app_id} did not show a window in 10 s"
        );
    }

    /// Start `foot --app-id <app_id> --title <title>` as a window of this session and wait
    /// until sway shows a window of that app_id with that title (a fake browser window
    /// showing a page, say).
    pub fn open_window_titled(&mut self, app_id: &str, title: &str) {
        let mut cmd = self.command(
            "foot",
            &[("WAYLAND_DISPLAY", "wayland-1"), ("SHELL", "/bin/sh")],
        );
        cmd.args(["--app-id", app_id, "--title", title])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        self.windows.push(cmd.spawn().expect("start foot"));
        let found = poll(Duration::from_secs(10), || {
            self.views()
                .into_iter()
                .find(|(n, _)| n["app_id"] == app_id && n["name"] == title)
        });
        assert!(
            found.is_some(),
            "foot --app-id {app_id} --title {title:?} did not show a window in 10 s"
        );
    }

    /// `swaymsg -r <args>` as JSON, `None` when it failed.
    pub fn try_msg(&self, args: &[&str]) -> Option<Value> {
        let out = Command::new("swaymsg")
            .arg("-s")
            .arg(&self.socket)
            .args(["-r"])
            .args(args)
            .output()
            .ok()?;
        serde_json::from_slice(&out.stdout).ok()
    }

    /// `swaymsg -r <args>` as JSON.
    pub fn msg(&self, args: &[&str]) -> Value {
        self.try_msg(args)
            .unwrap_or_else(|| panic!("swaymsg {args:?} failed; sway log:\n{}", self.log()))
    }

    /// The focused workspace's name.
    pub fn focused_workspace(&self) -> String {
        let workspaces = self.msg(&["-t", "get_workspaces"]);
        workspaces
            .as_array()
            .expect("workspaces")
            .iter()
            .find(|w| w["focused"] == true)
            .and_then(|w| w["name"].as_str())
            .expect("a focused workspace")
            .to_owned()
    }

    /// Every view of the tree as (node, workspace name).
    pub fn views(&self) -> Vec<(Value, String)> {
        fn walk(node: &Value, ws: &str, out: &mut Vec<(Value, String)>) {
            let ws = if node["type"] == "workspace" {
                node["name"].as_str().unwrap_or(ws)
            } else {
                ws
            };
            if node["app_id"].is_string() {
                out.push((node.clone(), ws.to_owned()));
            }
            for key in ["nodes", "floating_nodes"] {
                for child in node[key].as_array().into_iter().flatten() {
                    walk(child, ws, out);
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.msg(&["-t", "get_tree"]), "", &mut out);
        out
    }

    /// The first view with this app_id, with its workspace's name.
    pub fn window(&self, app_id: &str) -> Option<(Value, String)> {
        self.views()
            .into_iter()
            .find(|(n, _)| n["app_id"] == app_id)
    }

    /// The focused view's app_id.
    pub fn focused_app(&self) -> Option<String> {
        self.views()
            .into_iter()
            .find(|(n, _)| n["focused"] == true)
            .and_then(|(n, _)| n["app_id"].as_str().map(str::to_owned))
    }
}

impl Drop for SwaySession {
    fn drop(&mut self) {
        for child in &mut self.windows {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Windows started by sway's exec die with the display; sway's own group goes too.
        let _ = Command::new("kill")
            .args(["-TERM", "--", &format!("-{}", self.sway.id())])
            .status();
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.sway.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.sway.kill();
        let _ = self.sway.wait();
    }
}

/// `program` as the session user (root → nobody via setpriv) with only PATH,
/// XDG_RUNTIME_DIR and `env`, in a process group of its own.
pub fn command_as_session_user(runtime: &Path, program: &str, env: &[(&str, &str)]) -> Command {
    let mut cmd = if running_as_root() {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "env",
            "-i",
        ]);
        c
    } else {
        let mut c = Command::new("env");
        c.arg("-i");
        c
    };
    cmd.arg(format!(
        "PATH={}",
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
    ))
    .arg(format!("XDG_RUNTIME_DIR={}", runtime.display()))
    .arg("HOME=/tmp");
    for (k, v) in env {
        cmd.arg(format!("{k}={v}"));
    }
    cmd.arg(program);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    cmd
}

/// `program` on PATH.
pub fn which(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// Poll `f` every 50 ms until it returns `Some`, at most `timeout`.
pub fn poll<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
