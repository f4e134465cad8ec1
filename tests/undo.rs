//! "undo that" on a real desktop (issue 35): headless sway with the GTK form on a real
//! accessibility bus, the built-in rules, compositor and a11y plugins and `utter-input` as
//! real processes under an in-process runner (the harness of `trust_desktop`).
//!
//! - "workspace 3" then "undo that" gives the focus back to the window that had it, on the
//!   workspace it was on;
//! - "type hello world" into the form's entry then "scratch that" leaves the entry as it was
//!   (the form writes its text on every change);
//! - with nothing left to undo, "undo that" is the focused application's undo chord;
//! - an inverse whose window is gone is refused, and says why;
//! - "volume up" then "undo that" puts a real mpv's MPRIS volume back, and "pause" then
//!   "undo that" plays it again, through `utter daemon` with its built-in configuration;
//! - "mute" and "volume up" on the system sound (a real PipeWire's default sink) are put
//!   back by "undo that", read back with `wpctl`;
//! - an application launched from its desktop entry is closed by "undo that", asking first
//!   (declined, it stays); a scroll of the form is scrolled back; text typed as keystrokes
//!   into a terminal is backspaced away;
//! - spoken dictation (espeak-ng into a private PipeWire microphone, Whisper tiny.en) held
//!   on the dictation key lands in a GTK text view with its marks and a line break, and a
//!   spoken "scratch that" takes the last phrase back.
//!
//! Debian packages: as tests/trust_desktop.rs, and mpv, mpv-mpris, dbus-daemon.

use crate::common::daemon::Daemon;
use crate::common::voice::{Follower, LIMIT as VOICE_LIMIT, VoiceDaemon, speak_into_mic};
use crate::common::{DbusSession, Mpris, Mpv, PipeWireSession, Sandbox, bin, whisper_model};
use crate::desktop::Desktop;
use crate::sway_session::poll;
use crate::trust_desktop::{command, desktop_runner, next_question, wait_context};
use std::sync::Arc;
use std::time::Duration;
use utter_core::pipeline::CommandOptions;
use utter_core::runner::Runner;
use utter_protocol::serde_json::{self, Value};

const LIMIT: Duration = Duration::from_secs(60);

/// The form's app_id, once the runner's context shows it focused.
async fn form_ready(desktop: &Desktop, r: &Runner) -> String {
    let form_id = desktop.context()["focused"]["app_id"]
        .as_str()
        .expect("the form's app_id")
        .to_owned();
    wait_context(r, &form_id, None).await;
    form_id
}

/// Run `words` as the person's command; the outcome as JSON.
async fn say(r: &Arc<Runner>, words: &str) -> Value {
    let outcome = tokio::time::timeout(LIMIT, r.command(words, &CommandOptions::default(), None))
        .await
        .expect("the command finishes")
        .expect("the command is planned");
    serde_json::to_value(outcome).expect("JSON")
}

/// A window moved to another workspace is moved back, fullscreen is left and a floated
/// window tiled again, each read back from sway itself.
#[tokio::test(flavor = "multi_thread")]
async fn undo_that_moves_a_window_back_and_leaves_fullscreen_and_floating() {
    let desktop = Desktop::start();
    let r = desktop_runner(&desktop, "http://127.0.0.1:9").await;
    let form_id = form_ready(&desktop, &r).await;
    let home = desktop.sway.focused_workspace();
    let workspace_of = || {
        desktop
            .sway
            .window(&form_id)
            .map(|(_, workspace)| workspace)
    };

    let out = say(&r, "move this window to workspace 5").await;
    assert_eq!(out["results"][0]["ok"], true, "{out}");
    assert_eq!(workspace_of().as_deref(), Some("5"), "{out}");
    wait_context(&r, &form_id, None).await;
    let out = say(&r, "undo that").await;
    assert_eq!(out["results"][0]["ok"], true, "{out}");
    assert_eq!(workspace_of(), Some(home.clone()), "{out}");
    wait_context(&r, &form_id, None).await;

    // A field of the form's node in sway's tree.
    let field = |key: &str| {
        desktop
            .sway
            .window(&form_id)
            .map(|(node, _)| node[key].clone())
    };
    let fullscreen = || field("fullscreen_mode");
    let out = say(&r, "fullscreen").await;
    assert_eq!(out["results"][0]["ok"], true, "{out}");
    assert_eq!(fullscreen(), Some(serde_json::json!(1)), "{out}");
    let out = say(&r, "undo that").await;
    assert_eq!(out["results"][0]["ok"], true, "{out}");
    assert_eq!(fullscreen(), Some(serde_json::json!(0)), "{out}");

    // Floated, then tiled again.
    let kind = || field("type");
    let out = say(&r, "float this window").await;
    assert_eq!(out["results"][0]["ok"], true, "{out}");
    assert_eq!(kind(), Some(serde_json::json!("floating_con")), "{out}");
    let out = say(&r, "undo that").await;
    assert_eq!(out["results"][0]["ok"], true, "{out}");
    assert_eq!(kind(), Some(serde_json::json!("con")), "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn undo_that_reverses_a_workspace_switch_and_typed_text_and_refuses_when_the_window_is_gone()
{
    let mut desktop = Desktop::start();
    let r = desktop_runner(&desktop, "http://127.0.0.1:9").await;
    let form_id = form_ready(&desktop, &r).await;
    let home = desktop.sway.focused_workspace();

    // A workspace switch, undone: the form has the focus again, on its workspace.
    let out = say(&r, "workspace 3").await;
    assert_eq!(out["results"][0]["ok"], true, "{out}");
    assert_eq!(desktop.sway.focused_workspace(), "3");
    let out = say(&r, "undo that").await;
    let step = &out["results"][0];
    assert_eq!(step["op"], "focus_app", "{out}");
    assert_eq!(step["ok"], true, "{out}");
    assert_eq!(desktop.sway.focused_workspace(), home, "{out}");
    assert_eq!(
        desktop.sway.focused_app().as_deref(),
        Some(form_id.as_str())
    );
    wait_context(&r, &form_id, None).await;

    // Typed text, scratched: exactly it is deleted, read back from the form itself.
    let out = say(&r, "type hello world").await;
    assert_eq!(out["results"][0]["result"]["path"], "a11y", "{out}");
    let typed = poll(Duration::from_secs(5), || {
        (desktop.read("entry.txt").as_deref() == Some("hello world")).then_some(())
    });
    assert!(typed.is_some(), "the entry did not get the text: {out}");
    let out = say(&r, "scratch that").await;
    let step = &out["results"][0];
    assert_eq!(step["op"], "delete_text", "{out}");
    assert_eq!(step["ok"], true, "{out}");
    assert_eq!(step["verified"], true, "{out}");
    assert_eq!(desktop.read("entry.txt").as_deref(), Some(""), "{out}");

    // The journal shows what was undone and by what.
    let journal = r.history(None);
    assert_eq!(journal.len(), 4, "{journal:#?}");
    assert_eq!(journal[0].undid, vec![journal[1].id]);
    assert!(journal[1].undone && journal[3].undone, "{journal:#?}");

    // Nothing is left to undo: "undo that" is the form's own undo chord.
    let out = say(&r, "undo that").await;
    assert_eq!(out["results"][0]["op"], "key", "{out}");
    assert_eq!(out["results"][0]["args"]["chord"], "ctrl+z", "{out}");
    let message = out["plan"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("the focused application's own undo"),
        "{out}"
    );
    // Said again, the same: an application's undo run for "undo that" is no command to undo.
    let out = say(&r, "undo that").await;
    assert_eq!(out["results"][0]["args"]["chord"], "ctrl+z", "{out}");

    // The window the focus would go back to is gone: refused, with why, and nothing acts.
    let out = say(&r, "workspace 4").await;
    assert_eq!(out["results"][0]["ok"], true, "{out}");
    let _ = desktop.form.kill();
    let _ = desktop.form.wait();
    let gone = poll(Duration::from_secs(5), || {
        desktop.window().is_none().then_some(())
    });
    assert!(gone.is_some(), "the form's window did not go");
    // The runner's context must see it gone too.
    let deadline = tokio::time::Instant::now() + LIMIT;
    while r
        .context_now()
        .await
        .map(|c| {
            c.snapshot["windows"]
                .as_array()
                .is_some_and(|w| !w.is_empty())
        })
        .unwrap_or(true)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the context still shows the form"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let out = say(&r, "undo that").await;
    let step = &out["results"][0];
    assert_eq!(step["op"], "undo", "{out}");
    assert_eq!(step["ok"], false, "{out}");
    let why = step["error"]["message"].as_str().unwrap_or_default();
    assert!(
        why.contains("is gone") && why.contains("workspace 4"),
        "{why}"
    );
    assert_eq!(desktop.sway.focused_workspace(), "4");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_up_and_pause_are_undone_on_a_real_mpv() {
    let sb = Sandbox::new();
    let bus = DbusSession::start();
    let _mpv = Mpv::start(&sb, &bus);
    let mpris = Mpris::connect(&bus).await;
    assert_eq!(
        mpris.wait_for_status("Playing", LIMIT).await.as_deref(),
        Some("Playing"),
        "mpv did not show up on the bus, playing"
    );
    let before = mpris.volume().await.expect("mpv's volume");
    // The built-in configuration, on the bus where mpv is (and no PipeWire: "volume up" is
    // the player's own volume, and its result says so).
    let daemon = Daemon::builder(&sb)
        .env(
            sb.env(Some(&bus.address))
                .with("XDG_STATE_HOME", sb.path("state")),
        )
        .start()
        .await;
    let say = |words: &'static str| {
        let (daemon, sb) = (&daemon, &sb);
        async move {
            let run = daemon.utter(sb, &["say", words, "--json"]).await;
            (run.code, run.json())
        }
    };
    let (code, out) = say("volume down").await;
    assert_eq!(code, Some(0), "{out}\n{}", daemon.log());
    let lowered = mpris.volume().await.expect("volume");
    assert!(lowered < before - 0.01, "{before} -> {lowered}: {out}");
    let (code, out) = say("undo that").await;
    assert_eq!(code, Some(0), "{out}\n{}", daemon.log());
    let step = &out["results"][0];
    assert_eq!(step["op"], "media", "{out}");
    assert_eq!(step["args"]["command"], "set_volume", "{out}");
    let after = mpris.volume().await.expect("volume");
    assert!(
        (after - before).abs() < 0.011,
        "{before} -> {lowered} -> {after}: {out}"
    );

    let (code, out) = say("pause").await;
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        mpris.wait_for_status("Paused", LIMIT).await.as_deref(),
        Some("Paused")
    );
    let (code, out) = say("undo that").await;
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(out["results"][0]["args"]["command"], "play", "{out}");
    assert_eq!(
        mpris.wait_for_status("Playing", LIMIT).await.as_deref(),
        Some("Playing"),
        "{out}"
    );
    // Both undos are in the journal, each marking what it undid.
    let run = daemon.utter(&sb, &["history", "--json"]).await;
    let journal = run.json();
    assert_eq!(
        journal[0]["undid"],
        serde_json::json!([journal[1]["id"]]),
        "{run}"
    );
    assert_eq!(journal[1]["undone"], true, "{run}");
    assert_eq!(
        journal[2]["undid"],
        serde_json::json!([journal[3]["id"]]),
        "{run}"
    );
}

/// Where the form's scrolled area comes to rest (GTK's smooth scrolling runs on after the
/// event): its position once two reads 300 ms apart agree, 0 before it ever moved.
fn scroll_settled(desktop: &Desktop) -> i64 {
    let read = || {
        desktop
            .read("scroll")
            .and_then(|s| s.parse::<i64>().ok())
            .unwrap_or(0)
    };
    let mut last = read();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(300));
        let now = read();
        if now == last {
            return now;
        }
        last = now;
    }
    last
}

/// A scroll is scrolled back, and an application launched from its desktop entry is closed
/// by "undo that" after asking (declined, its window stays), each read back from the form
/// and from sway.
#[tokio::test(flavor = "multi_thread")]
async fn undo_that_scrolls_back_and_closes_the_window_it_launched_asking_first() {
    let desktop = Desktop::start();
    // An installed application whose window is "gamma": a desktop entry that starts foot,
    // in the plugins' own $HOME (desktop_runner's).
    let foot = crate::sway_session::which("foot").expect("foot (Debian: foot)");
    let apps = desktop.path("home/.local/share/applications");
    std::fs::create_dir_all(&apps).expect("applications dir");
    std::fs::write(
        apps.join("gamma.desktop"),
        format!(
            "[Desktop Entry]\nType=Application\nName=Gamma\nExec={} --app-id gamma\nStartupWMClass=gamma\n",
            foot.display()
        ),
    )
    .expect("desktop entry");
    let r = desktop_runner(&desktop, "http://127.0.0.1:9").await;
    let form_id = form_ready(&desktop, &r).await;

    // Scrolled down, then up by one wheel step, the second undone: the area is back where
    // the first left it.
    let out = say(&r, "scroll down").await;
    assert_eq!(out["results"][0]["ok"], true, "{out}");
    let first = scroll_settled(&desktop);
    assert!(first > 0, "the form did not scroll: {out}");
    let out = say(&r, "scroll up one").await;
    assert_eq!(out["results"][0]["ok"], true, "{out}");
    let second = scroll_settled(&desktop);
    assert!(second < first, "{first} -> {second}: {out}");
    let out = say(&r, "undo that").await;
    let step = &out["results"][0];
    assert_eq!(step["op"], "scroll", "{out}");
    assert_eq!(step["args"]["direction"], "down", "{out}");
    assert_eq!(step["args"]["amount"], 1, "{out}");
    assert_eq!(step["ok"], true, "{out}");
    assert_eq!(
        scroll_settled(&desktop),
        first,
        "{first} -> {second} -> undo: {out}"
    );

    // "open gamma" launches it from its entry; its window gets the focus.
    let out = say(&r, "open gamma").await;
    let step = &out["results"][0];
    assert_eq!(step["op"], "ensure_app", "{out}");
    assert_eq!(step["result"]["launched"], true, "{out}");
    let shown = poll(Duration::from_secs(10), || desktop.sway.window("gamma"));
    assert!(shown.is_some(), "gamma did not open: {out}");
    wait_context(&r, "gamma", None).await;

    // "undo that" asks before closing it; declined, the window stays and nothing is undone.
    let mut events = r.subscribe();
    let call = command(&r, "undo that");
    let asked = next_question(&mut events).await;
    assert_eq!(asked.request.op, "close_app", "{asked:?}");
    assert!(asked.request.summary.contains("gamma"), "{asked:?}");
    r.confirmations
        .answer(&asked.id, false, "test")
        .expect("answered");
    let out = tokio::time::timeout(LIMIT, call).await.unwrap().unwrap();
    assert_eq!(out["results"][0]["ok"], false, "{out}");
    assert!(desktop.sway.window("gamma").is_some(), "{out}");

    // Asked again and approved: exactly that window is closed; the form stays.
    let call = command(&r, "undo that");
    let asked = next_question(&mut events).await;
    assert_eq!(asked.request.op, "close_app", "{asked:?}");
    r.confirmations
        .answer(&asked.id, true, "test")
        .expect("answered");
    let out = tokio::time::timeout(LIMIT, call).await.unwrap().unwrap();
    assert_eq!(out["results"][0]["ok"], true, "{out}");
    let closed = poll(Duration::from_secs(10), || {
        desktop.sway.window("gamma").is_none().then_some(())
    });
    assert!(closed.is_some(), "gamma is still open: {out}");
    assert!(desktop.sway.window(&form_id).is_some(), "{out}");
}

/// Typed as keystrokes (a terminal has no accessible text field), "scratch that" sends as
/// many BackSpaces: a shell's `read` in a real foot window gets only what was typed after.
#[tokio::test(flavor = "multi_thread")]
async fn scratch_that_backspaces_text_typed_as_keystrokes_in_a_terminal() {
    let desktop = Desktop::start();
    let r = desktop_runner(&desktop, "http://127.0.0.1:9").await;
    form_ready(&desktop, &r).await;
    // The session's user (nobody, when the tests run as root) writes the line here.
    let shared = tempfile::tempdir().expect("temp dir");
    std::fs::set_permissions(
        shared.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .expect("chmod");
    let out_file = shared.path().join("line.txt");
    let script = format!(
        "read line; printf '%s' \"$line\" > '{}'",
        out_file.display()
    );
    let mut foot = desktop
        .sway
        .command("foot", &[("WAYLAND_DISPLAY", "wayland-1")])
        .args(["--app-id", "typing", "sh", "-c", &script])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start foot");
    let shown = poll(Duration::from_secs(10), || desktop.sway.window("typing"));
    assert!(shown.is_some(), "foot did not open");
    wait_context(&r, "typing", None).await;

    let out = say(&r, "type hello").await;
    let step = &out["results"][0];
    assert_eq!(step["ok"], true, "{out}");
    assert_ne!(step["result"]["path"], "a11y", "{out}");
    let out = say(&r, "scratch that").await;
    let step = &out["results"][0];
    assert_eq!(step["op"], "key", "{out}");
    assert_eq!(step["args"]["chord"], "BackSpace", "{out}");
    assert_eq!(step["args"]["repeat"], 5, "{out}");
    assert_eq!(step["ok"], true, "{out}");
    let out = say(&r, "type ok").await;
    assert_eq!(out["results"][0]["ok"], true, "{out}");
    let out = say(&r, "press enter").await;
    assert_eq!(out["results"][0]["ok"], true, "{out}");
    let line = poll(Duration::from_secs(10), || {
        std::fs::read_to_string(&out_file).ok()
    });
    assert_eq!(line.as_deref(), Some("ok"), "{out}");
    let _ = foot.kill();
    let _ = foot.wait();
}

/// "mute", "volume up" and "set the volume to thirty percent" on the system sound, each
/// undone: a real PipeWire's default sink is back at its level and unmuted, read back with
/// `wpctl` (the test's own oracle), through `utter daemon` with its built-in configuration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mute_and_volume_up_on_the_system_sound_are_undone_under_a_real_pipewire() {
    let pw = PipeWireSession::start();
    pw.reset_sink(0.5);
    let sb = Sandbox::new();
    // The daemon's own runtime directory is the sandbox's; PipeWire is found through
    // PIPEWIRE_RUNTIME_DIR, and no bus has a player on it: the sound is the system's.
    let daemon = Daemon::builder(&sb)
        .env(
            sb.env(None)
                .with("XDG_STATE_HOME", sb.path("state"))
                .with("PIPEWIRE_RUNTIME_DIR", pw.runtime_dir()),
        )
        .start()
        .await;
    let say = |words: &'static str| {
        let (daemon, sb) = (&daemon, &sb);
        async move {
            let run = daemon.utter(sb, &["say", words, "--json"]).await;
            (run.code, run.json())
        }
    };
    // The sink at `level` (a fraction of full), not muted.
    let at = |level: f64, out: &Value| {
        let now = pw.sink_level();
        assert!(
            (pw.sink_volume() - level).abs() < 0.011 && !now.contains("[MUTED]"),
            "{now}, not {level}: {out}"
        );
    };
    let (code, out) = say("mute").await;
    assert_eq!(code, Some(0), "{out}\n{}", daemon.log());
    assert_eq!(out["results"][0]["result"]["target"], "system", "{out}");
    assert!(
        pw.sink_level().contains("[MUTED]"),
        "{}: {out}",
        pw.sink_level()
    );
    let (code, out) = say("undo that").await;
    assert_eq!(code, Some(0), "{out}\n{}", daemon.log());
    assert_eq!(out["results"][0]["args"]["command"], "set_volume", "{out}");
    assert_eq!(out["results"][0]["verified"], true, "{out}");
    at(0.5, &out);

    let (code, out) = say("volume up").await;
    assert_eq!(code, Some(0), "{out}");
    at(0.55, &out);
    let (code, out) = say("undo that").await;
    assert_eq!(code, Some(0), "{out}");
    at(0.5, &out);

    // A level said in words, then undone.
    let (code, out) = say("set the volume to thirty percent").await;
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(out["results"][0]["verified"], true, "{out}");
    at(0.3, &out);
    let (code, out) = say("undo that").await;
    assert_eq!(code, Some(0), "{out}");
    at(0.5, &out);
}

/// Dictation on the GTK form: "start dictation", then what is heard (the voice loop's
/// `dictation` option) is typed with its spoken marks, a capital and spaces; "scratch that"
/// takes back the last phrase (read back from the form); "command …" runs one command;
/// "stop dictation" ends it.
#[tokio::test(flavor = "multi_thread")]
async fn dictation_types_what_is_heard_and_scratch_that_takes_back_a_phrase() {
    let desktop = Desktop::start();
    let r = desktop_runner(&desktop, "http://127.0.0.1:9").await;
    form_ready(&desktop, &r).await;
    let heard = |words: &'static str| {
        let r = r.clone();
        async move {
            // As the voice loop does: dictated when dictation is on as it is heard.
            let options = CommandOptions {
                dictation: r.dictating(),
                ..CommandOptions::default()
            };
            let outcome = tokio::time::timeout(LIMIT, r.command(words, &options, None))
                .await
                .expect("the command finishes")
                .expect("the command is planned");
            serde_json::to_value(outcome).expect("JSON")
        }
    };
    let entry = |want: &'static str| {
        let desktop = &desktop;
        async move {
            poll(Duration::from_secs(5), || {
                (desktop.read("entry.txt").as_deref() == Some(want)).then_some(())
            })
            .is_some()
        }
    };

    // Not on yet: heard words are commands.
    assert!(!r.status().dictation);
    let out = say(&r, "start dictation").await;
    assert_eq!(out["results"][0]["op"], "dictation", "{out}");
    assert_eq!(out["results"][0]["ok"], true, "{out}");
    assert!(r.status().dictation);
    // Nothing a plugin did: not in the journal.
    assert!(r.history(None).is_empty());

    let out = heard("hello comma how are you").await;
    assert_eq!(out["results"][0]["op"], "type_text", "{out}");
    assert!(entry("Hello, how are you").await, "{out}");
    let out = heard("i am fine period").await;
    assert!(entry("Hello, how are you i am fine.").await, "{out}");
    let out = heard("scratch that").await;
    assert_eq!(out["results"][0]["op"], "delete_text", "{out}");
    assert!(entry("Hello, how are you").await, "{out}");
    let out = heard("question mark").await;
    assert!(entry("Hello, how are you?").await, "{out}");
    // One command without leaving dictation.
    let out = heard("command select all").await;
    assert_eq!(out["results"][0]["op"], "key", "{out}");
    assert_eq!(out["results"][0]["args"]["chord"], "ctrl+a", "{out}");
    assert!(r.status().dictation);
    let out = heard("stop dictation").await;
    assert_eq!(out["results"][0]["op"], "dictation", "{out}");
    assert!(!r.status().dictation);
    // Off: heard words are commands again ("type" is a verb, not text).
    let out = heard("type ok").await;
    assert_eq!(out["results"][0]["args"]["text"], "ok", "{out}");

    // A new dictation's "scratch that" takes back nothing from before it.
    say(&r, "start dictation").await;
    let out = heard("scratch that").await;
    assert_eq!(out["results"][0]["ok"], false, "{out}");
    let why = out["results"][0]["error"]["message"].as_str().unwrap_or("");
    assert!(why.starts_with("nothing to undo"), "{out}");
    // Content read from the screen cannot switch it.
    let screen = CommandOptions {
        provenance: Some(utter_protocol::Provenance::Screen),
        ..CommandOptions::default()
    };
    let out = r
        .command("stop dictation", &screen, None)
        .await
        .expect("planned");
    assert!(!out.results[0].ok, "{out:?}");
    assert!(r.status().dictation);
}

/// espeak-ng's received-pronunciation English at 140 words a minute into `path`: the voice
/// and speed tiny.en hears these phrases best in (measured; how well it hears people is the
/// spoken set's business, not this test's).
fn slow_speech(text: &str, path: &std::path::Path) {
    let status = std::process::Command::new("espeak-ng")
        .args(["-v", "en-gb-x-rp", "-s", "140", "-w"])
        .arg(path)
        .arg(text)
        .status()
        .expect("espeak-ng runs (Debian: espeak-ng)");
    assert!(status.success(), "espeak-ng {text:?}: {status}");
}

/// Spoken dictation end to end: `utter daemon` hears a private PipeWire microphone, its
/// plugins reach headless sway and the accessibility bus of a GTK text view; each phrase is
/// spoken with the key held to dictate (`utter ptt press --dictation`). "The sun is out
/// comma the sky is blue period" lands with a full stop for "period" (what tiny.en makes of
/// "comma" through the microphone varies), "new line" as a line break (the
/// recogniser's "in your line" weighed back to the command against the audio), "I am fine
/// period" after it, and "scratch that" takes that last phrase back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spoken_dictation_types_a_paragraph_into_a_text_view_and_scratch_that_takes_a_phrase_back()
{
    let model = whisper_model();
    let desktop = Desktop::start_notes();
    let pw = PipeWireSession::start();
    let home = desktop.out.path().join("home");
    std::fs::create_dir_all(home.join("config")).expect("home");
    let env = format!(
        "{{ WAYLAND_DISPLAY = \"wayland-1\", XDG_RUNTIME_DIR = {:?}, SWAYSOCK = {:?}, DBUS_SESSION_BUS_ADDRESS = {:?}, HOME = {:?}, XDG_CONFIG_HOME = {:?} }}",
        desktop.sway.runtime_dir().display().to_string(),
        desktop.sway.socket.display().to_string(),
        desktop.bus.address,
        home.display().to_string(),
        home.join("config").display().to_string(),
    );
    let mut config = VoiceDaemon::config_text(&model, "[ptt]\nportal = false\nmin_hold_ms = 0", "");
    let utter = bin("utter").display().to_string();
    for (id, argv) in [
        (
            "compositor",
            format!("[{utter:?}, \"plugin\", \"compositor\"]"),
        ),
        ("a11y", format!("[{utter:?}, \"plugin\", \"a11y\"]")),
        (
            "input",
            format!("[{:?}]", bin("utter-input").display().to_string()),
        ),
    ] {
        config.push_str(&format!(
            "\n[[plugin]]\nid = \"{id}\"\nkind = \"bundle\"\nentrypoint = {argv}\nenv = {env}\n"
        ));
    }
    let daemon = VoiceDaemon::spawn(&pw, &config);
    let notes = |want: &dyn Fn(&str) -> bool| {
        poll(Duration::from_secs(10), || {
            desktop.read("notes.txt").filter(|t| want(t))
        })
    };
    // Ready: the stt plugin up, the microphone open, the text view focused in the context.
    let deadline = std::time::Instant::now() + VOICE_LIMIT;
    loop {
        let status = daemon.utter(&["status", "--json"]).await;
        let ready = status.code == Some(0) && {
            let s = status.json();
            let voice = &s["voice"]["state"];
            (voice == "ready" || voice == "degraded")
                && s["plugins"].as_array().is_some_and(|ps| {
                    ps.iter()
                        .filter(|p| {
                            ["stt", "a11y", "compositor", "input"]
                                .contains(&p["id"].as_str().unwrap_or(""))
                        })
                        .all(|p| p["status"] == "ok")
                })
        };
        if ready {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not ready: {status}\n{}",
            daemon.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let follower = Follower::start(&daemon);
    let wavs = tempfile::tempdir().expect("temp dir");
    let mut spoken = 0;
    let mut dictate = |words: &str| {
        spoken += 1;
        let wav = wavs.path().join(format!("{spoken}.wav"));
        slow_speech(words, &wav);
        wav
    };
    let phrases = [
        dictate("the sun is out comma the sky is blue period"),
        dictate("new line"),
        dictate("i am fine period"),
        dictate("scratch that"),
    ];
    let say = async |wav: &std::path::Path| {
        let press = daemon.utter(&["ptt", "press", "--dictation"]).await;
        assert_eq!(press.code, Some(0), "{press}\n{}", daemon.log());
        speak_into_mic(&pw, wav);
        let release = daemon.utter(&["ptt", "release"]).await;
        assert_eq!(release.code, Some(0), "{release}");
        let report = follower.next(&daemon);
        eprintln!("heard {}: {}", report["transcript"], report["hypotheses"]);
        report
    };

    let report = say(&phrases[0]).await;
    // "period" is written as a full stop; the comma is tiny.en's to hear (it writes one of
    // its own, or "common": the written marks are the text dictation test's to check).
    let first = notes(&|t| t.ends_with('.'));
    let words = |t: &str| t.to_lowercase().contains("comma") || t.to_lowercase().contains("period");
    assert!(
        first
            .as_deref()
            .is_some_and(|t| t.starts_with("The sun") && !words(t)),
        "the first phrase with its marks: {first:?}\n{report:#}\n{}",
        daemon.log()
    );
    let first = first.unwrap_or_default();
    let report = say(&phrases[1]).await;
    let broken = notes(&|t| t.ends_with('\n'));
    assert_eq!(
        broken.as_deref(),
        Some(format!("{first}\n").as_str()),
        "a line break after it: {report:#}"
    );
    let report = say(&phrases[2]).await;
    let fine = notes(&|t| t.len() > first.len() + 1 && t.ends_with('.'));
    assert!(
        fine.as_deref()
            .is_some_and(|t| t.starts_with(&format!("{first}\nI"))),
        "the next sentence, capitalised after the break: {fine:?}\n{report:#}"
    );
    let report = say(&phrases[3]).await;
    assert_eq!(
        report["command"]["results"][0]["op"],
        "delete_text",
        "scratch that is the undo of the last phrase: {report:#}\n{}",
        daemon.log()
    );
    let back = notes(&|t| t == format!("{first}\n"));
    assert!(
        back.is_some(),
        "the last phrase taken back: {:?}\n{report:#}",
        desktop.read("notes.txt")
    );
}
