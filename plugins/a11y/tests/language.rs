//! The command language in a real session: `utter say` (the embedded default config, the
//! rules router with the context of the moment) against headless sway and the GTK form of
//! `tests/fixtures/form.py`, with a profile of the person's own for the form's `app_id`.
//! The focused window picks the profile; a plan of several steps runs in order; a phrase
//! only a browser knows escalates and sends nothing.
//!
//! Debian packages: those of the `desktop` harness (sway, dbus-daemon, at-spi2-core,
//! libatk-adaptor, python3-gi, gir1.2-gtk-3.0).

mod desktop;
#[path = "../../compositor/tests/sway_session/mod.rs"]
mod sway_session;

use desktop::{Desktop, say, wait_for_file};
use std::time::Duration;
use sway_session::poll;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_focused_apps_profile_multi_step_plans_and_escalations_in_a_real_session() {
    let desktop = Desktop::start();
    let app_id = desktop
        .window()
        .and_then(|w| w["app_id"].as_str().map(str::to_owned))
        .expect("the form's window has an app_id");
    // A profile of the person's own for the form: "shout" presses shift+a.
    let profiles = desktop.out.path().join("home/config/utter/profiles");
    std::fs::create_dir_all(&profiles).expect("profiles dir");
    std::fs::write(
        profiles.join("form.toml"),
        format!(
            "id = \"form\"\nname = \"Test Form\"\nkind = \"app\"\napp_ids = [\"{app_id}\"]\n\
             [shortcuts]\n\"shout\" = \"shift+a\"\n[commands]\n\"wipe the field\" = \"ctrl+a\"\n"
        ),
    )
    .expect("write the profile");

    // Several steps: typing, then the common "select all", then typing again, in order.
    let (code, out) = say(&desktop, "type hello world and select all, then type bye");
    assert_eq!(code, Some(0), "{out}");
    let ops: Vec<&str> = out["plan"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["op"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["type_text", "key", "type_text"], "{out}");
    assert!(
        wait_for_file(&desktop, "entry.txt", "bye").await,
        "the entry holds {:?}: {out}",
        desktop.read("entry.txt")
    );

    // The form's own profile: "shout" is its shortcut, sent by the virtual keyboard.
    let _ = std::fs::remove_file(desktop.path("keys.log"));
    let (code, out) = say(&desktop, "shout");
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(out["plan"]["steps"][0]["args"]["chord"], "shift+a", "{out}");
    assert_eq!(out["results"][0]["plugin"], "input", "{out}");
    let keys = poll(Duration::from_secs(5), || {
        let log = desktop.read("keys.log")?;
        log.lines().any(|l| l.starts_with("A ")).then_some(log)
    });
    assert!(keys.is_some(), "the form saw no shift+a: {out}");

    // A profile command, then typing replaces the selection.
    let (code, out) = say(&desktop, "wipe the field");
    assert_eq!(code, Some(0), "{out}");
    let (code, out2) = say(&desktop, "type x");
    assert_eq!(code, Some(0), "{out} {out2}");
    assert!(
        wait_for_file(&desktop, "entry.txt", "x").await,
        "the entry holds {:?}",
        desktop.read("entry.txt")
    );

    // "new tab" is a browser's: with the form focused it plans nothing and says why.
    let before = desktop.read("entry.txt");
    let (code, out) = say(&desktop, "new tab");
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(out["plan"]["steps"], serde_json::json!([]), "{out}");
    assert_eq!(out["plan"]["escalate"]["reason"], "needs_browser", "{out}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(desktop.read("entry.txt"), before, "nothing was sent");
}
