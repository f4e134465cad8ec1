//! `utter-settings` (clients/settings) in a real headless sway, driven through the real
//! accessibility bus as a screen reader would (`tests/settings/drive.py`, pyatspi): it edits
//! the config file exactly where it must with every comment kept, the runner reloads it,
//! Approve runs a step that waits for confirmation, and a broken config file is shown with
//! file:line and never written. Each page is photographed with grim (PNG files in a
//! temporary directory; with `UTTER_SCREENSHOT_DIR` set they are copied there, which is how
//! the README's pictures were made).
//!
//! The app runs as root on a private session bus and on sway's Wayland display (sway runs as
//! `nobody`, see `plugins/compositor/tests/sway_session`). Debian packages: sway, grim,
//! dbus-daemon, at-spi2-core, python3-pyatspi, gir1.2-atspi-2.0, libgtk-4-1, libadwaita-1-0;
//! tests/run.sh installs them.

mod common;
#[path = "../plugins/a11y/tests/desktop/mod.rs"]
#[allow(unused_imports)]
mod desktop;
#[path = "../plugins/compositor/tests/sway_session/mod.rs"]
mod sway_session;

use common::Sandbox;
use common::daemon::{Daemon, LIMIT, write_config};
use desktop::SessionBus;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};
use sway_session::SwaySession;
use utter_protocol::serde_json::{Value, json};

/// The app, killed on drop.
struct App {
    child: Child,
    log: PathBuf,
}

impl App {
    fn start(
        sway: &SwaySession,
        bus: &SessionBus,
        sb: &Sandbox,
        config: &Path,
        socket: &Path,
        page: &str,
    ) -> App {
        let log = sb.path(&format!("settings-{page}.log"));
        let home = sb.path("settings-home");
        std::fs::create_dir_all(&home).unwrap();
        let child = Command::new(common::bin("utter-settings"))
            .arg("--config")
            .arg(config)
            .arg("--socket")
            .arg(socket)
            .args(["--page", page])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("XDG_RUNTIME_DIR", sway.runtime_dir())
            .env("XDG_STATE_HOME", sb.path("state"))
            .env("WAYLAND_DISPLAY", "wayland-1")
            .env("GDK_BACKEND", "wayland")
            .env("GSK_RENDERER", "cairo")
            .env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("utter-settings starts");
        App { child, log }
    }

    fn log(&mut self) -> String {
        let exit = match self.child.try_wait() {
            Ok(Some(status)) => format!("(the app exited: {status})\n"),
            _ => String::new(),
        };
        exit + &std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `tests/settings/drive.py` on the session bus.
struct Driver {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Driver {
    fn start(bus: &SessionBus) -> Driver {
        let mut child = Command::new("/usr/bin/python3")
            .arg(common::repo_root().join("tests/settings/drive.py"))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs (Debian: python3-pyatspi gir1.2-atspi-2.0)");
        Driver {
            input: child.stdin.take().unwrap(),
            output: BufReader::new(child.stdout.take().unwrap()),
            child,
        }
    }

    fn ask(&mut self, command: Value) -> Value {
        writeln!(self.input, "{command}").unwrap();
        let mut line = String::new();
        self.output.read_line(&mut line).unwrap();
        utter_protocol::serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("driver said {line:?} ({e}) to {command}"))
    }

    /// `ask`, which must succeed.
    fn must(&mut self, command: Value, app: &mut App) -> Value {
        let answer = self.ask(command.clone());
        assert_eq!(
            answer["ok"],
            true,
            "{command} -> {answer}\n--- app log\n{}",
            app.log()
        );
        answer
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A PNG of the whole output, named after `page`.
fn screenshot(sway: &SwaySession, sb: &Sandbox, page: &str) -> PathBuf {
    let path = sb.path(&format!("settings-{page}.png"));
    let out = Command::new("grim")
        .arg(&path)
        .env("XDG_RUNTIME_DIR", sway.runtime_dir())
        .env("WAYLAND_DISPLAY", "wayland-1")
        .output()
        .expect("grim runs (Debian: grim)");
    assert!(
        out.status.success(),
        "grim: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let png = std::fs::read(&path).unwrap();
    assert!(png.starts_with(b"\x89PNG") && png.len() > 2000, "{page}");
    if let Some(dir) = std::env::var_os("UTTER_SCREENSHOT_DIR") {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(&path, Path::new(&dir).join(format!("settings-{page}.png"))).unwrap();
    }
    path
}

fn wait_until<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {LIMIT:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

const PTT: &str = "\
# Push-to-talk, as a person set it up.
[ptt]
portal = false          # no portal on this desktop
evdev = false           # not yet
evdev_key = \"KEY_F13\"   # the key under my thumb
";

#[tokio::test(flavor = "multi_thread")]
async fn the_app_edits_the_config_in_place_and_approves_a_step() {
    let sb = Sandbox::new();
    let config = write_config(
        &sb,
        &format!(
            "[policy]\nenabled_ops = [\"terminal\"]   # the test plans terminal steps\n\n{PTT}"
        ),
    );
    let before = std::fs::read_to_string(&config).unwrap();
    let daemon = Daemon::start(&sb, &config, None).await;
    let sway = SwaySession::start();
    let bus = SessionBus::start();
    let mut app = App::start(&sway, &bus, &sb, &config, &daemon.socket, "voice");
    let mut driver = Driver::start(&bus);

    // The Voice page shows the file's values.
    driver.must(
        json!({"op": "wait", "role": "text", "name": "evdev key", "timeout": 30}),
        &mut app,
    );
    driver.must(
        json!({"op": "set_text", "role": "text", "name": "evdev key", "text": "KEY_PAUSE"}),
        &mut app,
    );
    driver.must(
        json!({"op": "action", "role": "check box", "near": "Read the key from evdev"}),
        &mut app,
    );
    std::thread::sleep(Duration::from_millis(300));
    screenshot(&sway, &sb, "voice");
    driver.must(
        json!({"op": "action", "role": "push button", "name": "Save"}),
        &mut app,
    );

    // Exactly those two values changed, in place, with their comments.
    let after = wait_until("the config file changes", || {
        let now = std::fs::read_to_string(&config).unwrap();
        (now != before).then_some(now)
    });
    let expected = before
        .replace(
            "evdev = false           # not yet",
            "evdev = true           # not yet",
        )
        .replace(
            "evdev_key = \"KEY_F13\"   # the key under my thumb",
            "evdev_key = \"KEY_PAUSE\"   # the key under my thumb",
        );
    assert_eq!(after, expected, "--- app log\n{}", app.log());

    // The runner reloaded it: its evdev trigger is no longer off.
    wait_until("the runner reloads the new [ptt]", || {
        let status = std::process::Command::new(common::bin("utter"))
            .args(["status", "--json", "--socket"])
            .arg(&daemon.socket)
            .env("XDG_STATE_HOME", sb.path("state"))
            .output()
            .ok()?;
        let status: Value = utter_protocol::serde_json::from_slice(&status.stdout).ok()?;
        let evdev = status["ptt"]["triggers"]
            .as_array()?
            .iter()
            .find(|t| t["trigger"] == "evdev")?
            .clone();
        (evdev["state"] != "disabled").then_some(())
    });

    // A step that waits for a yes: Approve on the Safety page runs it.
    let mut asker = daemon.client().await;
    let command = asker
        .command_waiting_for_a_yes("terminal echo approved in the app")
        .await;
    driver.must(
        json!({"op": "action", "role": "page tab", "name": "Safety"}),
        &mut app,
    );
    driver.must(
        json!({"op": "wait", "role": "push button", "name": "Approve", "timeout": 20}),
        &mut app,
    );
    screenshot(&sway, &sb, "safety");
    driver.must(
        json!({"op": "action", "role": "push button", "name": "Approve"}),
        &mut app,
    );
    let outcome = tokio::time::timeout(LIMIT, command)
        .await
        .expect("the command ends after the approval")
        .unwrap()
        .expect("the command ran");
    assert_eq!(outcome["results"][0]["ok"], true, "{outcome}");

    // A dry run from the Commands page shows the plan and runs nothing.
    driver.must(
        json!({"op": "action", "role": "page tab", "name": "Commands"}),
        &mut app,
    );
    driver.must(
        json!({"op": "set_text", "role": "text", "name": "Phrase", "text": "terminal ls -la"}),
        &mut app,
    );
    driver.must(
        json!({"op": "action", "role": "push button", "name": "Dry run"}),
        &mut app,
    );
    let plan = wait_until("the plan is shown", || {
        let text =
            driver.ask(json!({"op": "read", "role": "label", "name": "1 step*", "timeout": 0}));
        text["text"].as_str().map(str::to_owned)
    });
    assert!(plan.contains("terminal"), "{plan}");
    assert!(plan.contains("1 step"), "{plan}");
    assert!(plan.contains("asks you first"), "{plan}");
    screenshot(&sway, &sb, "commands");

    for page in ["Status", "Events"] {
        driver.must(
            json!({"op": "action", "role": "page tab", "name": page}),
            &mut app,
        );
        std::thread::sleep(Duration::from_millis(500));
        screenshot(&sway, &sb, &page.to_lowercase());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_config_is_shown_with_its_line_and_never_written() {
    let sb = Sandbox::new();
    let text =
        "config_version = 1\n# my settings\n[ptt]\nevdev = \"yes\"   # should be true or false\n";
    let config = sb.write("broken.toml", text);
    let sway = SwaySession::start();
    let bus = SessionBus::start();
    // No runner: the app must still open and say what is wrong with the file.
    let socket = sb.path("nobody-listens.sock");
    let mut app = App::start(&sway, &bus, &sb, &config, &socket, "voice");
    let mut driver = Driver::start(&bus);
    driver.must(
        json!({"op": "wait", "role": "text", "name": "evdev key", "timeout": 30}),
        &mut app,
    );
    let message = wait_until("the error is shown", || {
        let said = driver.ask(json!({"op": "read", "role": "label", "name": "The config file is invalid*", "timeout": 0}));
        said["text"].as_str().map(str::to_owned)
    });
    let at = format!("{}:4", config.display());
    assert!(message.contains(&at), "{message}");
    assert!(message.contains("evdev"), "{message}");

    driver.must(
        json!({"op": "set_text", "role": "text", "name": "evdev key", "text": "KEY_PAUSE"}),
        &mut app,
    );
    driver.must(
        json!({"op": "action", "role": "push button", "name": "Save"}),
        &mut app,
    );
    let message = wait_until("the refusal is shown", || {
        let said =
            driver.ask(json!({"op": "read", "role": "label", "name": "Not saved*", "timeout": 0}));
        said["text"].as_str().map(str::to_owned)
    });
    assert!(message.contains(&at), "{message}");
    screenshot(&sway, &sb, "broken-config");
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        text,
        "the file was written"
    );
}
