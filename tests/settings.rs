//! `utter-settings` (clients/settings) in a real headless sway, driven through the real
//! accessibility bus as a screen reader would (`tests/settings/drive.py`, pyatspi): it edits
//! the config file exactly where it must with every comment kept, the runner reloads it,
//! Approve runs a step that waits for confirmation, and a broken config file is shown with
//! file:line and never written. The Voice page tells what runs (a capture plugin that is
//! configured but degraded, with its reason; a model directory as the model in use) and
//! what the desktop lacks (insensitive switches with the runner's reason); the page tabs
//! are switched through their actions, at half the screen too, and every control has a
//! name. Each page is photographed with grim (PNG files in a
//! temporary directory; with `UTTER_SCREENSHOT_DIR` set they are copied there, which is how
//! the book's pictures in docs/src/screenshots/ were made).
//!
//! The app runs as root on a private session bus and on sway's Wayland display (sway runs as
//! `nobody`, see `plugins/compositor/tests/sway_session`). Debian packages: sway, grim,
//! dbus-daemon, at-spi2-core, python3-pyatspi, gir1.2-atspi-2.0, libgtk-4-1, libadwaita-1-0;
//! tests/run.sh installs them.

use crate::common;
use crate::desktop;
use crate::sway_session;

use common::daemon::{Daemon, LIMIT, write_config};
use common::systemd::UserManager;
use common::voice::VoiceDaemon;
use common::{ChildEnv, PipeWireSession, Sandbox, espeak_wav, whisper_model};
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
        App::start_with(
            sway,
            &bus.address,
            sb,
            config,
            socket,
            page,
            &ChildEnv::new(),
        )
    }

    /// [`App::start`] on the session bus at `bus`, with `extra` in its environment.
    fn start_with(
        sway: &SwaySession,
        bus: &str,
        sb: &Sandbox,
        config: &Path,
        socket: &Path,
        page: &str,
        extra: &ChildEnv,
    ) -> App {
        let log = sb.path(&format!("settings-{page}.log"));
        let home = sb.path("settings-home");
        std::fs::create_dir_all(&home).unwrap();
        let mut command = Command::new(common::bin("utter-settings"));
        command
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
            .env("DBUS_SESSION_BUS_ADDRESS", bus)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        extra.apply(&mut command);
        let child = command.spawn().expect("utter-settings starts");
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
        Driver::start_on(&bus.address)
    }

    /// [`Driver::start`] on the session bus at `bus`.
    fn start_on(bus: &str) -> Driver {
        let mut child = Command::new("/usr/bin/python3")
            .arg(common::repo_root().join("tests/settings/drive.py"))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("DBUS_SESSION_BUS_ADDRESS", bus)
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

impl Driver {
    /// The text of every node of `role` (e.g. the Events and Logs pages' text views).
    fn texts(&mut self, role: &str) -> Vec<String> {
        let answer = self.ask(json!({"op": "texts", "role": role}));
        answer["texts"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| t.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The text of the label whose name matches `name` (`*` as in drive.py), once one does;
    /// the failure shows the labels and buttons there were.
    fn label(&mut self, what: &str, name: &str) -> String {
        let deadline = Instant::now() + LIMIT;
        loop {
            let said = self.ask(json!({"op": "read", "role": "label", "name": name, "timeout": 0}));
            if let Some(text) = said["text"].as_str() {
                return text.to_owned();
            }
            if Instant::now() > deadline {
                let tree = self.ask(json!({"op": "tree"}));
                let shown: Vec<&str> = tree["tree"]
                    .as_array()
                    .map(|t| t.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                panic!(
                    "{what}: no label {name:?} within {LIMIT:?}; the tree:\n{}",
                    shown.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Driver {
    /// Every page tab: name, selected, shown (has a size on screen) and actions.
    fn tabs(&mut self) -> Vec<Value> {
        let answer = self.ask(json!({"op": "tabs"}));
        answer["tabs"].as_array().cloned().unwrap_or_default()
    }

    /// Switch to `page` as a screen reader does: the page tab's click action; then the tab
    /// says it is selected and the window's title names the page (what a screen reader
    /// announces).
    fn switch_to(&mut self, page: &str, app: &mut App) {
        self.must(
            json!({"op": "action", "role": "page tab", "name": page}),
            app,
        );
        let title = format!("Utter Settings: {page}");
        wait_until(&format!("the tab {page} is selected"), || {
            let tabs = self.tabs();
            let frames = self.ask(json!({"op": "names", "role": "frame"}));
            (tabs
                .iter()
                .any(|t| t["name"] == page && t["selected"] == true && t["shown"] == true)
                && frames["names"]
                    .as_array()?
                    .iter()
                    .any(|n| *n == title.as_str()))
            .then_some(())
        });
    }

    /// The node's name, description, states, actions and whether it is shown.
    fn state(&mut self, role: &str, name: &str, app: &mut App) -> Value {
        self.must(json!({"op": "state", "role": role, "name": name}), app)
    }

    /// The labels and buttons of the settings row (list item) named `name`.
    fn row(&mut self, name: &str, app: &mut App) -> (Vec<String>, Vec<String>) {
        let row = self.must(json!({"op": "row", "name": name}), app);
        let strings = |k: &str| -> Vec<String> {
            row[k]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        (strings("labels"), strings("buttons"))
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

/// Make sway's output taller, so that a picture of the Voice page shows all of it (the
/// window fills the output; nothing scrolls it, sway has no input devices here).
fn tall(sway: &SwaySession) {
    let done = sway.try_msg(&["output", "HEADLESS-1", "resolution", "1024x1400"]);
    assert!(done.is_some(), "swaymsg output resolution");
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
        json!({"op": "action", "role": "push button", "name": "Save push-to-talk"}),
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
    driver.switch_to("Safety", &mut app);
    driver.must(
        json!({"op": "wait", "role": "push button", "name": "Approve:*", "timeout": 20}),
        &mut app,
    );
    screenshot(&sway, &sb, "safety");
    driver.must(
        json!({"op": "action", "role": "push button", "name": "Approve:*"}),
        &mut app,
    );
    let outcome = tokio::time::timeout(LIMIT, command)
        .await
        .expect("the command ends after the approval")
        .unwrap()
        .expect("the command ran");
    assert_eq!(outcome["results"][0]["ok"], true, "{outcome}");
    // The audit log on the same page says who approved it.
    let decision = driver.label("the decision is listed", "confirmed: terminal*");
    assert!(decision.contains("echo approved in the app"), "{decision}");

    // A dry run from the Commands page shows the plan and runs nothing.
    driver.switch_to("Commands", &mut app);
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
        driver.switch_to(page, &mut app);
        std::thread::sleep(Duration::from_millis(500));
        screenshot(&sway, &sb, &page.to_lowercase());
    }

    // The Logs page has the runner's own lines, the reload among them.
    driver.switch_to("Logs", &mut app);
    let logged = wait_until("the reload is in the log", || {
        let texts = driver.texts("text");
        texts
            .into_iter()
            .find(|t| t.contains("INFO") && t.contains("config reloaded"))
    });
    assert!(
        logged
            .lines()
            .any(|l| l.contains("config reloaded") && l.contains("unchanged=")),
        "{logged}"
    );
    screenshot(&sway, &sb, "logs");
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
        json!({"op": "action", "role": "push button", "name": "Save push-to-talk"}),
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

/// The Commands page with the real rules router: "What can I say?" lists its kinds of
/// command and an example shows its plan; a shortcut added in the profile editor lands in the
/// user's copy of the profile with every built-in comment kept, and a chord the router would
/// refuse is shown with its place and not written.
#[tokio::test(flavor = "multi_thread")]
async fn the_commands_page_says_what_to_say_and_edits_a_profile() {
    let sb = Sandbox::new();
    let config = sb.write(
        "utter.toml",
        &format!(
            "config_version = 1\n[[plugin]]\nid = \"rules\"\nkind = \"router\"\nentrypoint = [{utter:?}, \"plugin\", \"rules\"]\n\n[[plugin]]\nid = \"desktop\"\nkind = \"action\"\nentrypoint = [{utter:?}, \"plugin\", \"desktop\"]\n",
            utter = common::bin("utter").display().to_string()
        ),
    );
    let daemon = Daemon::start(&sb, &config, None).await;
    let sway = SwaySession::start();
    let bus = SessionBus::start();
    let profiles = sb.path("settings-config/utter/profiles");
    let env = ChildEnv::new().with("XDG_CONFIG_HOME", sb.path("settings-config"));
    let mut app = App::start_with(
        &sway,
        &bus.address,
        &sb,
        &config,
        &daemon.socket,
        "commands",
        &env,
    );
    let mut driver = Driver::start(&bus);

    // What can I say: the kinds, each with examples that show their plan.
    driver.must(
        json!({"op": "wait", "role": "label", "name": "Websites", "timeout": 30}),
        &mut app,
    );
    // The first kind is open from the start.
    driver.must(
        json!({"op": "action", "role": "push button", "near": "“open youtube”"}),
        &mut app,
    );
    let plan = driver.label("the example's plan", "1 step*");
    assert!(plan.contains("ensure_url"), "{plan}");
    assert!(plan.contains("youtube.com"), "{plan}");
    screenshot(&sway, &sb, "commands-examples");

    // The profile editor: foot's shortcuts, then one more.
    driver.must(
        json!({"op": "action", "role": "push button", "near": "foot"}),
        &mut app,
    );
    driver.must(
        json!({"op": "wait", "role": "label", "name": "Shortcuts of foot", "timeout": 20}),
        &mut app,
    );
    let builtin = include_str!("../data/profiles/foot.toml");
    // A chord the router refuses: shown with file:line:column, nothing written.
    driver.must(
        json!({"op": "set_text", "role": "text", "name": "Shortcut name", "text": "explode"}),
        &mut app,
    );
    driver.must(
        json!({"op": "set_text", "role": "text", "name": "Keys", "text": "ctrl+nosuchkey"}),
        &mut app,
    );
    driver.must(
        json!({"op": "action", "role": "push button", "name": "Add shortcut"}),
        &mut app,
    );
    let refusal = driver.label("the refusal", "Not saved*");
    let file = profiles.join("foot.toml");
    assert!(
        refusal.contains(&format!("{}:", file.display())) && refusal.contains("nosuchkey"),
        "{refusal}"
    );
    assert!(!file.exists(), "nothing was written");

    driver.must(
        json!({"op": "set_text", "role": "text", "name": "Shortcut name", "text": "scroll to the top"}),
        &mut app,
    );
    driver.must(
        json!({"op": "set_text", "role": "text", "name": "Keys", "text": "shift+Home"}),
        &mut app,
    );
    driver.must(
        json!({"op": "action", "role": "push button", "name": "Add shortcut"}),
        &mut app,
    );
    let written = wait_until("the profile is written", || {
        std::fs::read_to_string(&file).ok()
    });
    assert_eq!(
        written.replace("\"scroll to the top\" = \"shift+Home\"\n", ""),
        builtin,
        "only the new shortcut is new"
    );
    driver.must(
        json!({"op": "wait", "role": "label", "name": "scroll to the top", "timeout": 20}),
        &mut app,
    );
    screenshot(&sway, &sb, "commands-profile");

    // The router plans with it (it reads the directory again by itself).
    let planned = wait_until("the router uses the new shortcut", || {
        let out = Command::new(common::bin("utter"))
            .args(["profiles", "--json", "--dir"])
            .arg(&profiles)
            .output()
            .ok()?;
        let list: Value = utter_protocol::serde_json::from_slice(&out.stdout).ok()?;
        let foot = list["profiles"]
            .as_array()?
            .iter()
            .find(|p| p["id"] == "foot")?
            .clone();
        (foot["shortcuts"]["scroll to the top"] == "shift+Home").then_some(foot)
    });
    assert!(
        planned["source"]
            .as_str()
            .is_some_and(|s| s.ends_with("foot.toml"))
    );
}

/// A small HTTP server (python3's http.server) that sends one file in 32 KiB pieces, 60 ms
/// apart, so a download takes a few seconds and its progress can be watched. Killed on drop.
struct SlowServer {
    child: Child,
    port: u16,
}

impl SlowServer {
    fn start(file: &Path) -> SlowServer {
        let script = r#"
import http.server, os, sys, time
path = sys.argv[1]
class Slow(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path != "/" + os.path.basename(path):
            self.send_error(404)
            return
        data = open(path, "rb").read()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        for i in range(0, len(data), 32768):
            self.wfile.write(data[i:i + 32768])
            self.wfile.flush()
            time.sleep(0.06)
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Slow)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;
        let mut child = Command::new("/usr/bin/python3")
            .args(["-c", script])
            .arg(file)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the server's port");
        SlowServer { child, port }
    }
}

impl Drop for SlowServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Voice page's model list: Download shows the progress of `utter models pull` as it
/// goes, the verified model is installed, and Use names it in `[stt] model`.
#[tokio::test(flavor = "multi_thread")]
async fn the_voice_page_downloads_a_model_with_progress_and_uses_it() {
    use sha2::Digest as _;
    let sb = Sandbox::new();
    // 2 MiB of bytes that are not all alike, pinned by size and SHA-256 in a catalog.
    let bytes: Vec<u8> = (0..2u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let weights = sb.path("served/model.bin");
    std::fs::create_dir_all(weights.parent().unwrap()).unwrap();
    std::fs::write(&weights, &bytes).unwrap();
    let server = SlowServer::start(&weights);
    let catalog = sb.write(
        "catalog.toml",
        &format!(
            "[[model]]\nname = \"tiny-test\"\ndescription = \"a model for this test\"\nsource = \"http://127.0.0.1:{}/\"\n\n[[model.file]]\nname = \"model.bin\"\nsize = {}\nsha256 = \"{}\"\n",
            server.port,
            bytes.len(),
            sha2::Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        ),
    );
    let config = write_config(&sb, "# speech\n[stt]\nmodel = \"\"   # none yet\n");
    let before = std::fs::read_to_string(&config).unwrap();
    let daemon = Daemon::start(&sb, &config, None).await;
    let sway = SwaySession::start();
    tall(&sway);
    let bus = SessionBus::start();
    let env = ChildEnv::new()
        .with("XDG_DATA_HOME", sb.path("settings-data"))
        .with("UTTER_MODELS_CATALOG", &catalog);
    let mut app = App::start_with(
        &sway,
        &bus.address,
        &sb,
        &config,
        &daemon.socket,
        "voice",
        &env,
    );
    let mut driver = Driver::start(&bus);

    driver.must(
        json!({"op": "wait", "role": "label", "name": "tiny-test", "timeout": 30}),
        &mut app,
    );
    driver.must(
        json!({"op": "action", "role": "push button", "near": "tiny-test"}),
        &mut app,
    );
    // The bar moves while the file comes in: some reading between none and all of it.
    let midway = wait_until("the download shows its progress", || {
        let values = driver.ask(json!({"op": "values", "role": "progress bar"}));
        values["values"]
            .as_array()?
            .iter()
            .filter_map(Value::as_f64)
            .find(|v| *v > 0.0 && *v < 1.0)
    });
    assert!(midway > 0.0 && midway < 1.0, "{midway}");
    screenshot(&sway, &sb, "voice-download");
    let done = driver.label("the download ends", "Downloaded and verified tiny-test*");
    assert!(done.contains("Use"), "{done}");
    let installed = sb.path("settings-data/utter/models/tiny-test/model.bin");
    assert_eq!(
        std::fs::read(&installed).unwrap(),
        bytes,
        "the verified file is in place"
    );

    driver.must(
        json!({"op": "action", "role": "push button", "near": "tiny-test"}),
        &mut app,
    );
    let after = wait_until("the config names the model", || {
        let now = std::fs::read_to_string(&config).unwrap();
        (now != before).then_some(now)
    });
    assert_eq!(
        after,
        before.replace(
            "model = \"\"   # none yet",
            "model = \"tiny-test\"   # none yet"
        )
    );
}

/// The Voice page on a real PipeWire with the Whisper plugin: the microphones are listed with
/// the one in use, the level meter rises while speech plays into the virtual microphone,
/// "Use" on another source saves it, and Talk, speech, Talk shows what was heard, the plan
/// and the timings.
#[tokio::test(flavor = "multi_thread")]
async fn the_voice_page_meters_the_microphone_and_tries_a_spoken_command() {
    let pw = PipeWireSession::start();
    let model = whisper_model();
    let daemon = VoiceDaemon::start(&pw, &model, "[ptt]\nportal = false\nmin_hold_ms = 0");
    wait_until("the voice loop is ready", || {
        let out = daemon.command(&["status", "--json"]).output().ok()?;
        let status: Value = utter_protocol::serde_json::from_slice(&out.stdout).ok()?;
        matches!(
            status["voice"]["state"].as_str(),
            Some("ready" | "degraded")
        )
        .then_some(())
    });
    let sb = Sandbox::new();
    let wav = sb.path("open-youtube.wav");
    espeak_wav("open youtube", &wav);
    let sway = SwaySession::start();
    let bus = SessionBus::start();
    let config = daemon.config();
    let before = std::fs::read_to_string(&config).unwrap();
    let env = ChildEnv::new().with("XDG_STATE_HOME", daemon.state_home());
    let mut app = App::start_with(
        &sway,
        &bus.address,
        &sb,
        &config,
        daemon.socket(),
        "voice",
        &env,
    );
    let mut driver = Driver::start(&bus);

    // The meter reads the microphone: low in silence, high while speech plays.
    let quiet = driver.label("the meter reads", "*dBFS from*");
    assert!(
        quiet.ends_with(&format!("dBFS from {}", common::FAKE_MIC)),
        "{quiet}"
    );
    let level = |text: &str| -> f64 {
        text.split(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(f64::MIN)
    };
    assert!(level(&quiet) < -50.0, "silence reads {quiet}");
    // The meter is read through AT-SPI while the speech plays, and a second after: on a
    // loaded machine a read can take longer than the clip, so it is played up to three times
    // until one read falls inside it.
    let mut loudest = f64::MIN;
    for _ in 0..3 {
        let mut player = pw.play(&wav);
        let mut ended: Option<std::time::Instant> = None;
        while ended.is_none_or(|at| at.elapsed() < Duration::from_secs(1)) {
            let said = driver
                .ask(json!({"op": "read", "role": "label", "name": "*dBFS from*", "timeout": 0}));
            loudest = loudest.max(level(said["text"].as_str().unwrap_or_default()));
            if ended.is_none() && player.try_wait().unwrap().is_some() {
                ended = Some(std::time::Instant::now());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        player.wait().expect("pw-play ends");
        if loudest > -50.0 {
            break;
        }
    }
    // Silence reads at the floor; speech (whichever 100 ms windows were read) well above.
    assert!(
        loudest > -50.0 && loudest - level(&quiet) >= 20.0,
        "the speech peaked at {loudest} dBFS on the meter, silence read {quiet}"
    );
    screenshot(&sway, &sb, "voice-microphone");

    // Talk, speak, Talk: what was heard, the plan and the timings.
    driver.must(
        json!({"op": "action", "role": "push button", "name": "Talk"}),
        &mut app,
    );
    driver.label("it listens", "Listening*");
    common::voice::speak_into_mic(&pw, &wav);
    driver.must(
        json!({"op": "action", "role": "push button", "name": "Talk"}),
        &mut app,
    );
    let heard = driver.label("the spoken command's report", "Heard:*");
    assert!(heard.to_lowercase().contains("youtube"), "{heard}");
    assert!(heard.contains("ensure_url"), "{heard}");
    assert!(heard.contains("Timings: held"), "{heard}");
    screenshot(&sway, &sb, "voice-try");

    // Use the session's default microphone instead: the file says so, comments kept.
    driver.must(
        json!({"op": "action", "role": "push button", "near": "The session's default microphone"}),
        &mut app,
    );
    let after = wait_until("the config names the source", || {
        let now = std::fs::read_to_string(&config).unwrap();
        (now != before).then_some(now)
    });
    assert_eq!(
        after,
        before.replace(
            &format!("source = \"{}\"", common::FAKE_MIC),
            "source = \"\""
        )
    );
}

/// Start and Stop on the Status page drive the installed unit through a real `systemd --user`
/// on the app's session bus, the app says what the unit became, and the runner's state
/// follows.
#[tokio::test(flavor = "multi_thread")]
async fn the_status_page_starts_and_stops_the_service_through_systemd() {
    let sb = Sandbox::new();
    let manager = UserManager::start(&sb)
        .unwrap_or_else(|why| panic!("a systemd --user (DESKTOP-TESTING §1): {why}"));
    let env = sb.env(None).with("XDG_STATE_HOME", sb.path("state"));
    let install = common::run_utter(&["install", "--user", "--json"], &env).await;
    assert_eq!(install.code, Some(0), "{install}");
    // The service's config: the test router and action plugin.
    let config = write_config(&sb, "# the service's config\n");
    std::fs::create_dir_all(sb.path("config/utter")).unwrap();
    std::fs::rename(&config, sb.path("config/utter/config.toml")).unwrap();
    let config = sb.path("config/utter/config.toml");
    // A compositor socket, announced in the manager's environment as a session would.
    let _wayland = std::os::unix::net::UnixListener::bind(sb.path("run/wayland-test")).unwrap();
    let set = manager.systemctl(&["set-environment", "WAYLAND_DISPLAY=wayland-test"]);
    assert!(set.status.success(), "{set:?}");
    // The session bus is the manager's own (dbus.socket of dbus-user-session, at
    // $XDG_RUNTIME_DIR/bus), with systemd on it; the accessibility bus is activated there.
    let bus = format!("unix:path={}", sb.path("run/bus").display());
    wait_until("systemd is on the session bus", || {
        let out = Command::new("busctl")
            .args([
                "--address",
                &bus,
                "call",
                "org.freedesktop.DBus",
                "/org/freedesktop/DBus",
            ])
            .args([
                "org.freedesktop.DBus",
                "NameHasOwner",
                "s",
                "org.freedesktop.systemd1",
            ])
            .output()
            .ok()?;
        (String::from_utf8_lossy(&out.stdout).trim() == "b true").then_some(())
    });
    let sway = SwaySession::start();
    let socket = sb.path("run/utter/runner.sock");
    let mut app = App::start_with(
        &sway,
        &bus,
        &sb,
        &config,
        &socket,
        "status",
        &ChildEnv::new(),
    );
    let mut driver = Driver::start_on(&bus);
    driver.label("the runner is not running yet", "not running*");

    driver.must(
        json!({"op": "action", "role": "push button", "name": "Start"}),
        &mut app,
    );
    driver.label("the app says the unit is active", "utter.service is active");
    assert_eq!(manager.property("ActiveState"), "active");
    let state = driver.label("the runner's state is shown", "ready · version*");
    assert!(state.contains(&config.display().to_string()), "{state}");

    driver.must(
        json!({"op": "action", "role": "push button", "name": "Stop"}),
        &mut app,
    );
    driver.label(
        "the app says the unit is inactive",
        "utter.service is inactive",
    );
    assert_eq!(manager.property("ActiveState"), "inactive");
    assert_eq!(manager.property("Result"), "success");
    driver.label("the page says the runner is gone", "not running*");
}

/// `utter daemon --config CONFIG --socket SOCKET` on the session bus `bus` (not
/// `--no-dbus`), as a desktop session starts it: its push-to-talk triggers look for the
/// portal and the keyboard monitor on that bus. In the sandbox's runtime directory, where no
/// PipeWire runs. Stopped on drop.
struct BusRunner {
    child: Child,
    socket: PathBuf,
    state: PathBuf,
    log: PathBuf,
}

impl BusRunner {
    fn start(sb: &Sandbox, bus: &SessionBus, config: &Path) -> BusRunner {
        let socket = sb.path("run/utter/runner.sock");
        let state = sb.path("state");
        let log = sb.path("bus-runner.log");
        let mut command = Command::new(common::bin("utter"));
        command
            .arg("daemon")
            .arg("--config")
            .arg(config)
            .arg("--socket")
            .arg(&socket)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        sb.env(Some(&bus.address))
            .with("XDG_STATE_HOME", &state)
            .apply(&mut command);
        let child = command.spawn().expect("utter daemon starts");
        let mut runner = BusRunner {
            child,
            socket,
            state,
            log,
        };
        wait_until("the runner answers", || {
            if let Ok(Some(exit)) = runner.child.try_wait() {
                panic!("utter daemon exited with {exit}:\n{}", runner.log());
            }
            runner.status()
        });
        runner
    }

    /// `utter status --json` (each plugin's health as the runner last heard it).
    fn status(&self) -> Option<Value> {
        let out = Command::new(common::bin("utter"))
            .args(["status", "--json", "--socket"])
            .arg(&self.socket)
            .env("XDG_STATE_HOME", &self.state)
            .output()
            .ok()?;
        utter_protocol::serde_json::from_slice(&out.stdout).ok()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for BusRunner {
    fn drop(&mut self) {
        common::terminate(&mut self.child);
    }
}

/// The trigger `name` of a status: `(state, detail)`.
fn trigger(status: &Value, name: &str) -> Option<(String, String)> {
    let t = status["ptt"]["triggers"]
        .as_array()?
        .iter()
        .find(|t| t["trigger"] == name)?;
    Some((
        t["state"].as_str()?.to_owned(),
        t["detail"].as_str()?.to_owned(),
    ))
}

/// A first day under sway (issue 30): the Voice page tells what is so. The capture plugin
/// (the real `utter-audio-pipewire`, with no PipeWire running) is configured but degraded,
/// and the page says so with its reason instead of asking for a `[[plugin]]`; the model is
/// a directory, which the stt plugin was given and loaded, and the page shows it as the model
/// in use instead of offering the catalog's download; sway's session has no GlobalShortcuts
/// portal and no keyboard monitor, so those switches are insensitive with the runner's
/// reason, and "Turn off" still writes the file. The page tabs are one set, shown at half
/// the screen too, and switched through their click actions; every control has a name.
#[tokio::test(flavor = "multi_thread")]
async fn the_voice_page_says_what_runs_what_is_degraded_and_what_this_desktop_lacks() {
    let sb = Sandbox::new();
    let model = sb.path("models/faster-whisper-tiny.en");
    std::fs::create_dir_all(&model).unwrap();
    std::fs::write(model.join("model.bin"), b"weights").unwrap();
    let model = model.display().to_string();
    let utter = common::bin("utter").display().to_string();
    let config = sb.write(
        "utter.toml",
        &format!(
            "config_version = 1\n\
             # a first day under sway\n\
             [ptt]\nportal = true   # as a new user leaves it\n\n\
             [stt]\nmodel = {model:?}   # a model directory of my own\n\n\
             [[plugin]]\nid = \"mic\"\nkind = \"audio\"\nentrypoint = {}\n\n\
             [[plugin]]\nid = \"whisper\"\nkind = \"stt\"\nentrypoint = {}\n\n\
             [[plugin]]\nid = \"rules\"\nkind = \"router\"\nentrypoint = [{utter:?}, \"plugin\", \"rules\"]\n",
            json!([common::bin("utter-audio-pipewire").display().to_string()]),
            // The speech-to-text plugin here answers stt.load and says what it loaded; the
            // real one needs CTranslate2 and a model (the microphone test above uses it).
            json!([
                common::bin("utter-test-plugin").display().to_string(),
                "--answer",
                format!("stt.load={}", json!({"model": model})),
                "--health",
                format!("model {model}"),
            ]),
        ),
    );
    let before = std::fs::read_to_string(&config).unwrap();
    let mut sway = SwaySession::start();
    tall(&sway);
    let bus = SessionBus::start();
    let runner = BusRunner::start(&sb, &bus, &config);
    // What the runner says, which the page must show: the capture plugin degraded, the model
    // given to the stt plugin, the portal and the keyboard monitor unavailable.
    let status = wait_until("the runner has found out", || {
        let status = runner.status()?;
        let mic = status["plugins"]
            .as_array()?
            .iter()
            .find(|p| p["id"] == "mic")?;
        let unavailable = |t: &str| trigger(&status, t).is_some_and(|(s, _)| s == "unavailable");
        (mic["status"] == "degraded"
            && status["voice"]["model"] == model.as_str()
            && unavailable("portal")
            && unavailable("keyboard-monitor"))
        .then_some(status.clone())
    });
    let mic = status["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "mic")
        .unwrap();
    let degraded = mic["health"].as_str().unwrap().to_owned();
    assert!(degraded.contains("PipeWire is not running"), "{mic}");
    let (_, portal_why) = trigger(&status, "portal").unwrap();
    let (_, monitor_why) = trigger(&status, "keyboard-monitor").unwrap();

    let mut app = App::start(&sway, &bus, &sb, &config, &runner.socket, "voice");
    let mut driver = Driver::start(&bus);

    // The capture plugin: degraded, with the runner's reason, never "add a [[plugin]]".
    let said = driver.label("the capture plugin's state", "degraded: PipeWire*");
    assert_eq!(said, degraded);
    let (labels, _) = driver.row("Capture plugin mic is degraded", &mut app);
    assert!(labels.contains(&degraded), "{labels:?}");
    let names = driver.ask(json!({"op": "names", "role": "list item"}));
    assert!(
        !names.to_string().contains("No capture plugin"),
        "a configured capture plugin is never called missing: {names}"
    );

    // The model in use: the directory, that it is there, the stt plugin's state; not the
    // catalog's tiny.en to download.
    let (labels, _) = driver.row(&model, &mut app);
    let about = labels.join("\n");
    assert!(
        about.contains("a model directory ([stt] model) · the directory is there"),
        "{about}"
    );
    assert!(
        about.contains(&format!("stt plugin whisper: ok: model {model}")),
        "{about}"
    );
    assert!(labels.iter().any(|l| l == "In use"), "{labels:?}");
    let (labels, buttons) = driver.row("tiny.en", &mut app);
    assert!(!labels.iter().any(|l| l == "In use"), "{labels:?}");
    assert_eq!(
        buttons,
        ["Download tiny.en"],
        "the catalog's model is one to download"
    );

    // The portal and the keyboard monitor: on in the file, insensitive, with the runner's
    // reason in the row and in the switch's description.
    for (switch, why) in [
        ("Desktop portal shortcut", &portal_why),
        ("Compositor keyboard monitor", &monitor_why),
    ] {
        let state = driver.state("check box", switch, &mut app);
        let states: Vec<&str> = state["states"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(states.contains(&"checked"), "{switch}: {state}");
        assert!(
            !states.contains(&"sensitive") && !states.contains(&"enabled"),
            "{switch} is insensitive: {state}"
        );
        let description = state["description"].as_str().unwrap();
        assert!(
            description.contains(&format!("Not available on this desktop: {why}")),
            "{switch}: {state}"
        );
        let (labels, _) = driver.row(switch, &mut app);
        assert!(
            labels.iter().any(|l| l.contains(why.as_str())),
            "{labels:?}"
        );
    }
    let evdev = driver.state("check box", "Read the key from evdev", &mut app);
    assert!(
        evdev["states"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s == "sensitive"),
        "evdev is the person's to switch on: {evdev}"
    );
    std::thread::sleep(Duration::from_millis(300));
    screenshot(&sway, &sb, "voice-first-day");

    // Turn off, through its action: the file says so, in place, with its comment; the runner
    // stops trying; the switch stays insensitive, the desktop still has no portal.
    driver.must(
        json!({"op": "action", "role": "push button", "name": "Turn off Desktop portal shortcut"}),
        &mut app,
    );
    let after = wait_until("the config file changes", || {
        let now = std::fs::read_to_string(&config).unwrap();
        (now != before).then_some(now)
    });
    assert_eq!(
        after,
        before.replace(
            "portal = true   # as a new user leaves it",
            "portal = false   # as a new user leaves it"
        )
    );
    wait_until("the runner reloads the new [ptt]", || {
        let status = runner.status()?;
        (trigger(&status, "portal")?.0 == "disabled").then_some(())
    });
    let state = driver.state("check box", "Desktop portal shortcut", &mut app);
    assert!(
        !state["states"].to_string().contains("\"sensitive\""),
        "{state}"
    );

    // The page tabs: one set, each a page tab with a click action, shown in a window that
    // has half the screen (sway tiles it beside another); switched through AT-SPI.
    sway.open_window("beside-settings");
    let names = ["Status", "Voice", "Commands", "Safety", "Events", "Logs"];
    let tabs = wait_until("the tabs are shown at half the width", || {
        let tabs = driver.tabs();
        tabs.iter().all(|t| t["shown"] == true).then_some(tabs)
    });
    let listed: Vec<&str> = tabs.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(listed, names, "one set of tabs: {tabs:?}");
    for t in &tabs {
        assert_eq!(t["actions"], json!(["click"]), "{t}");
        assert_eq!(t["selected"], t["name"] == "Voice", "{t}");
    }
    driver.switch_to("Status", &mut app);
    // The Status page is the one shown now, and says the same of the capture plugin.
    let plugin = driver.state("list item", "mic", &mut app);
    assert_eq!(plugin["shown"], true, "{plugin}");
    let (labels, _) = driver.row("mic", &mut app);
    assert!(
        labels.iter().any(|l| l.contains("PipeWire is not running")),
        "{labels:?}"
    );
    screenshot(&sway, &sb, "status-half");
    driver.switch_to("Voice", &mut app);

    // Every control has a name of its own (not empty, not GTK's class name), and the buttons
    // can be told apart.
    let controls = driver.ask(json!({"op": "controls"}));
    let controls = controls["controls"].as_array().unwrap();
    assert!(controls.len() > 20, "{controls:?}");
    let mut buttons = std::collections::BTreeSet::new();
    for c in controls {
        let name = c["name"].as_str().unwrap();
        assert!(
            !name.is_empty() && !name.starts_with("Gtk") && !name.starts_with("Adw"),
            "a control without a name: {c}"
        );
        if c["role"] == "push button" || c["role"] == "check box" || c["role"] == "page tab" {
            assert!(!c["actions"].as_array().unwrap().is_empty(), "{c}");
        }
        if c["role"] == "push button" {
            assert!(
                buttons.insert(name.to_owned()),
                "two buttons named {name:?}"
            );
        }
    }
    drop(app);
    let log = runner.log();
    assert!(!log.contains("panicked"), "{log}");
}
