//! A real `systemd --user` for the tests that drive the installed unit (`tests/systemd.rs`,
//! the settings app's Start and Stop in `tests/settings.rs`).

use super::Sandbox;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Why tests needing `unshare -m` cannot run here, if they cannot.
pub fn cannot_unshare() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("not root, so no private mount namespace (unshare -m)".into());
    }
    match Command::new("unshare").args(["-m", "true"]).output() {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!(
            "unshare -m fails here: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Some(format!("unshare is not available: {e}")),
    }
}

/// A `systemd --user` manager in a private mount namespace (DESKTOP-TESTING §1: a tmpfs
/// `/run/systemd` with a `system` directory makes it believe it runs under systemd), with
/// the sandbox's HOME, XDG_CONFIG_HOME and XDG_RUNTIME_DIR. `systemctl --user` from
/// outside reaches it through `$XDG_RUNTIME_DIR/systemd/private`. Told to exit on drop.
pub struct UserManager {
    child: Child,
    env: Vec<(String, PathBuf)>,
}

impl UserManager {
    pub fn start(sb: &Sandbox) -> Result<UserManager, String> {
        if let Some(why) = cannot_unshare() {
            return Err(why);
        }
        let systemd = Path::new("/lib/systemd/systemd");
        if !systemd.exists() {
            return Err("/lib/systemd/systemd is not installed".into());
        }
        let env = vec![
            ("HOME".to_owned(), sb.path("home")),
            ("XDG_CONFIG_HOME".to_owned(), sb.path("config")),
            ("XDG_DATA_HOME".to_owned(), sb.path("data")),
            ("XDG_STATE_HOME".to_owned(), sb.path("state")),
            ("XDG_RUNTIME_DIR".to_owned(), sb.path("run")),
        ];
        let mut cmd = Command::new("unshare");
        cmd.args([
            "-m",
            "sh",
            "-c",
            "set -e; mount -t tmpfs tmpfs /run/systemd 2>/dev/null || mount -t tmpfs tmpfs /run; \
             mkdir -p /run/systemd/system; exec \"$0\" --user",
        ])
        .arg(systemd)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(sb.path("systemd-user.log")).map_err(|e| e.to_string())?);
        for (k, v) in &env {
            cmd.env(k, v);
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start systemd --user: {e}"))?;
        let mut manager = UserManager { child, env };
        let private = sb.path("run/systemd/private");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !private.exists() {
            if Instant::now() > deadline || manager.child.try_wait().ok().flatten().is_some() {
                return Err(format!(
                    "systemd --user did not come up: {}",
                    std::fs::read_to_string(sb.path("systemd-user.log")).unwrap_or_default()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(manager)
    }

    pub fn systemctl(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new("systemctl");
        cmd.arg("--user")
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin");
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.output().expect("systemctl runs")
    }

    pub fn property(&self, name: &str) -> String {
        let out = self.systemctl(&["show", "--value", "-p", name, "utter.service"]);
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

impl Drop for UserManager {
    fn drop(&mut self) {
        let _ = self.systemctl(&["exit"]);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
