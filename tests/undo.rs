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
//!   "undo that" plays it again, through `utter daemon` with its built-in configuration.
//!
//! Debian packages: as tests/trust_desktop.rs, and mpv, mpv-mpris, dbus-daemon.

use crate::common::daemon::Daemon;
use crate::common::{DbusSession, Mpris, Mpv, Sandbox};
use crate::desktop::Desktop;
use crate::sway_session::poll;
use crate::trust_desktop::{desktop_runner, wait_context};
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
