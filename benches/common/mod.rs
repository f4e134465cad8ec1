//! Helpers shared by the benchmarks: the built binaries, a private `utter daemon`, and
//! criterion's saved estimates.

#![allow(dead_code)]

use std::path::PathBuf;

/// A binary of this build (`target/<profile>/<name>`), checked to exist.
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("bench executable path");
    let deps = exe.parent().expect("deps dir");
    let path = deps.parent().expect("profile dir").join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --release --workspace --bins` first",
        path.display()
    );
    path
}

/// Criterion's median estimate for a benchmark id (`group/name`), in nanoseconds, read from
/// `target/criterion/<id>/new/estimates.json`.
pub fn median_ns(id: &str) -> Option<f64> {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    let text = std::fs::read_to_string(
        dir.join("criterion")
            .join(id)
            .join("new")
            .join("estimates.json"),
    )
    .ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["median"]["point_estimate"].as_f64()
}

/// `utter daemon --no-dbus` with the TOML `config`, its socket, state and runtime dirs in a
/// temporary directory (`dir`, kept for the bench's own files); SIGTERM, then SIGKILL after
/// 5 s, on drop. Not waited for: each bench checks readiness with its own client.
pub struct Daemon {
    child: std::process::Child,
    /// The client socket.
    pub socket: PathBuf,
    /// The client token file (`$XDG_STATE_HOME/utter/runner-token`).
    pub token_file: PathBuf,
    /// The temporary directory holding all of it.
    pub dir: tempfile::TempDir,
}

impl Daemon {
    /// Write `config` and start the daemon on it.
    pub fn spawn(config: &str) -> Daemon {
        let dir = tempfile::tempdir().expect("temp dir");
        let config_path = dir.path().join("bench.toml");
        std::fs::write(&config_path, config).expect("write the config");
        let socket = dir.path().join("sock").join("runner.sock");
        let child = std::process::Command::new(bin("utter"))
            .args(["daemon", "--no-dbus", "--log-level", "warn", "--config"])
            .arg(&config_path)
            .arg("--socket")
            .arg(&socket)
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .env("XDG_RUNTIME_DIR", dir.path().join("run"))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("utter daemon starts");
        Daemon {
            child,
            token_file: dir.path().join("state/utter/runner-token"),
            socket,
            dir,
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        use nix::sys::signal::{Signal, kill};
        let _ = kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            Signal::SIGTERM,
        );
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
