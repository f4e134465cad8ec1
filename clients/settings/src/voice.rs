//! The Voice page: push-to-talk (the portal shortcut, evdev and its key), the microphone
//! (PipeWire's sources through the capture plugin's `audio.sources`, with a live level meter
//! polled from its `audio.status`), the speech model (the catalog, a download with its
//! progress, the one in use) and "Try it" (listen once; what was heard, the plan and the
//! timings). Every setting is saved to the config file and the runner is reloaded.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use adw::prelude::*;
use gtk::glib;
use serde_json::{Value, json};
use utter_ipc::VoiceReport;

use crate::backend::{self, Pull};
use crate::{Live, button, describe_outcome, say, text};

/// How often the level meter asks for the level while the Voice page is shown.
const LEVEL_EVERY: Duration = Duration::from_millis(100);

/// The quietest level the meter shows, in dBFS (its left end).
const METER_FLOOR_DB: f64 = -70.0;

/// The page's widgets the rest of the app updates.
pub struct VoiceWidgets {
    /// The microphones, one row each (rebuilt by [`refresh_sources`]).
    pub sources: adw::PreferencesGroup,
    source_rows: RefCell<Vec<adw::ActionRow>>,
    /// The level meter and its reading.
    meter: gtk::LevelBar,
    meter_row: adw::ActionRow,
    /// The models, one row each (rebuilt by [`refresh_models`]).
    pub models: adw::PreferencesGroup,
    model_rows: RefCell<Vec<adw::ActionRow>>,
    /// What "Try it" heard, planned and took.
    pub heard: gtk::Label,
}

impl VoiceWidgets {
    /// The widgets, empty until the page is built and refreshed.
    pub fn new() -> VoiceWidgets {
        let meter = gtk::LevelBar::builder()
            .min_value(0.0)
            .max_value(1.0)
            .hexpand(true)
            .valign(gtk::Align::Center)
            .build();
        meter.set_size_request(200, -1);
        VoiceWidgets {
            sources: adw::PreferencesGroup::builder()
                .title("Microphone")
                .description("The PipeWire source push-to-talk records from ([audio] source)")
                .build(),
            source_rows: RefCell::new(Vec::new()),
            meter_row: adw::ActionRow::builder()
                .title("Level")
                .subtitle("no capture plugin yet")
                .build(),
            meter,
            models: adw::PreferencesGroup::builder()
                .title("Speech model")
                .description("What turns your voice into text ([stt] model)")
                .build(),
            model_rows: RefCell::new(Vec::new()),
            heard: text("Nothing heard yet."),
        }
    }
}

/// A row with a title, a line that explains it and a switch.
fn switch_row(title: &str, subtitle: &str, active: bool) -> (adw::ActionRow, gtk::Switch) {
    let switch = gtk::Switch::builder()
        .active(active)
        .valign(gtk::Align::Center)
        .build();
    let row = adw::ActionRow::builder()
        .title(title)
        .subtitle(subtitle)
        .activatable_widget(&switch)
        .build();
    row.add_suffix(&switch);
    (row, switch)
}

/// Save `edits` to the config file, then reload the runner; say how it went, and run
/// `after` once the runner reloaded (or did not).
fn save_and_reload(
    live: &Rc<Live>,
    edits: Vec<(String, toml_edit::Value)>,
    after: impl FnOnce(&Rc<Live>) + 'static,
) -> bool {
    match backend::save_config(&live.target.config, &edits) {
        Ok(changed) if changed.is_empty() => {
            say(live, "Nothing changed.", false);
            false
        }
        Ok(changed) => {
            say(
                live,
                &format!("Saved: {}. Reloading the runner…", changed.join(", ")),
                false,
            );
            let live = live.clone();
            glib::spawn_future_local(async move {
                let target = live.target.clone();
                match backend::spawn(async move { target.reload().await }).await {
                    Ok(Ok(())) => say(&live, "Saved and reloaded.", false),
                    Ok(Err(e)) => say(
                        &live,
                        &format!("Saved; the runner did not reload: {e}"),
                        true,
                    ),
                    Err(e) => say(&live, &e.to_string(), true),
                }
                after(&live);
            });
            true
        }
        Err(e) => {
            say(live, &format!("Not saved:\n{e}"), true);
            false
        }
    }
}

/// The Voice page.
pub fn page(live: &Rc<Live>) -> adw::PreferencesPage {
    let page = adw::PreferencesPage::new();
    page.add(&ptt_group(live));

    let voice = &live.voice;
    voice.meter_row.add_suffix(&voice.meter);
    voice.sources.add(&voice.meter_row);
    let refresh = button("Refresh");
    {
        let live = live.clone();
        refresh.connect_clicked(move |_| refresh_sources(live.clone()));
    }
    voice.sources.set_header_suffix(Some(&refresh));
    page.add(&voice.sources);
    page.add(&voice.models);
    page.add(&try_group(live));
    follow_level(live.clone());
    // Says "no capture plugin" until the runner's status names one (then lists again).
    refresh_sources(live.clone());
    refresh_models(live);
    page
}

fn ptt_group(live: &Rc<Live>) -> adw::PreferencesGroup {
    let config = backend::read_config(&live.target.config);
    let (ptt, broken) = match &config {
        Ok(c) => (c.ptt.clone(), None),
        Err(e) => (Default::default(), Some(e.clone())),
    };
    let group = adw::PreferencesGroup::builder()
        .title("Push-to-talk")
        .description(format!("Saved to {}", live.target.config.display()))
        .build();
    let (portal_row, portal) = switch_row(
        "Desktop portal shortcut",
        "Bind the key through the GlobalShortcuts portal (KDE, GNOME 48+, Hyprland)",
        ptt.portal,
    );
    let shortcut = adw::EntryRow::builder()
        .title("Portal shortcut")
        .text(&ptt.shortcut)
        .build();
    let (evdev_row, evdev) = switch_row(
        "Read the key from evdev",
        "From /dev/input keyboards; needs membership of the group input",
        ptt.evdev,
    );
    let evdev_key = adw::EntryRow::builder()
        .title("evdev key")
        .text(&ptt.evdev_key)
        .build();
    group.add(&portal_row);
    group.add(&shortcut);
    group.add(&evdev_row);
    group.add(&evdev_key);
    let save = button("Save");
    save.add_css_class("suggested-action");
    group.set_header_suffix(Some(&save));
    if let Some(e) = broken {
        say(
            live,
            &format!("The config file is invalid; nothing will be saved until it is fixed:\n{e}"),
            true,
        );
    }
    let live = live.clone();
    // What the file held when the page opened or was last saved.
    let initial = Rc::new(RefCell::new(ptt));
    save.connect_clicked(move |_| {
        // Only what the person changed: a key the file does not have stays out of it.
        let mut edits: Vec<(String, toml_edit::Value)> = Vec::new();
        {
            let initial = initial.borrow();
            if portal.is_active() != initial.portal {
                edits.push(("ptt.portal".into(), portal.is_active().into()));
            }
            if shortcut.text() != initial.shortcut {
                edits.push(("ptt.shortcut".into(), shortcut.text().as_str().into()));
            }
            if evdev.is_active() != initial.evdev {
                edits.push(("ptt.evdev".into(), evdev.is_active().into()));
            }
            if evdev_key.text() != initial.evdev_key {
                edits.push(("ptt.evdev_key".into(), evdev_key.text().as_str().into()));
            }
        }
        if save_and_reload(&live, edits, |_| {}) {
            let mut initial = initial.borrow_mut();
            initial.portal = portal.is_active();
            initial.shortcut = shortcut.text().to_string();
            initial.evdev = evdev.is_active();
            initial.evdev_key = evdev_key.text().to_string();
        }
    });
    group
}

// ---------------------------------------------------------------------------------------
// Microphone

/// List the capture plugin's sources again, one row each, with "Use" on all but the one in
/// use. Without a capture plugin, or when PipeWire is not there, the row says why.
pub fn refresh_sources(live: Rc<Live>) {
    glib::spawn_future_local(async move {
        let plugin = live.audio_plugin.borrow().clone();
        let voice = &live.voice;
        for row in voice.source_rows.borrow_mut().drain(..) {
            voice.sources.remove(&row);
        }
        let Some(plugin) = plugin else {
            let row = adw::ActionRow::builder()
                .title("No capture plugin is running")
                .subtitle("Add a [[plugin]] of kind \"audio\" (utter-audio-pipewire) to the config")
                .build();
            voice.sources.add(&row);
            voice.source_rows.borrow_mut().push(row);
            return;
        };
        let target = live.target.clone();
        let answer =
            backend::spawn(async move { target.invoke(plugin, "audio.sources", json!({})).await })
                .await;
        let configured = backend::read_config(&live.target.config)
            .map(|c| c.audio.source)
            .unwrap_or_default();
        let sources = match answer {
            Ok(Ok(answer)) => answer["sources"].as_array().cloned().unwrap_or_default(),
            Ok(Err(e)) => {
                let row = adw::ActionRow::builder()
                    .title("The microphones cannot be listed")
                    .subtitle(&e)
                    .subtitle_lines(3)
                    .build();
                voice.sources.add(&row);
                voice.source_rows.borrow_mut().push(row);
                return;
            }
            Err(e) => {
                say(&live, &e.to_string(), true);
                return;
            }
        };
        // The session's default first (an empty name), then each source by its description.
        let mut choices = vec![(
            String::new(),
            "The session's default microphone".to_owned(),
            "follows the desktop's choice".to_owned(),
        )];
        for s in &sources {
            let name = s["name"].as_str().unwrap_or_default().to_owned();
            let description = s["description"].as_str().unwrap_or(&name).to_owned();
            let default = if s["is_default"] == true {
                " · the default now"
            } else {
                ""
            };
            choices.push((name.clone(), description, format!("{name}{default}")));
        }
        for (name, title, subtitle) in choices {
            let row = adw::ActionRow::builder()
                .title(&title)
                .subtitle(&subtitle)
                .build();
            if name == configured {
                row.add_suffix(&gtk::Label::new(Some("In use")));
            } else {
                let use_it = button("Use");
                let live = live.clone();
                use_it.connect_clicked(move |_| {
                    let edits = vec![("audio.source".to_owned(), name.as_str().into())];
                    save_and_reload(&live, edits, |live| refresh_sources(live.clone()));
                });
                row.add_suffix(&use_it);
            }
            voice.sources.add(&row);
            voice.source_rows.borrow_mut().push(row);
        }
    });
}

/// Poll `audio.status` every [`LEVEL_EVERY`] while the Voice page is shown and move the
/// meter; one call at a time.
fn follow_level(live: Rc<Live>) {
    let busy = Rc::new(std::cell::Cell::new(false));
    glib::timeout_add_local(LEVEL_EVERY, move || {
        let shown = live.stack.visible_child_name().as_deref() == Some("voice");
        let plugin = live.audio_plugin.borrow().clone();
        if !shown || busy.get() {
            return glib::ControlFlow::Continue;
        }
        let Some(plugin) = plugin else {
            return glib::ControlFlow::Continue;
        };
        busy.set(true);
        let live = live.clone();
        let busy = busy.clone();
        glib::spawn_future_local(async move {
            let target = live.target.clone();
            let status =
                backend::spawn(
                    async move { target.invoke(plugin, "audio.status", json!({})).await },
                )
                .await;
            busy.set(false);
            let (fraction, reading) = match status {
                Ok(Ok(status)) => meter_reading(&status),
                Ok(Err(e)) => (0.0, format!("cannot read the level: {e}")),
                Err(e) => (0.0, e.to_string()),
            };
            live.voice.meter.set_value(fraction);
            live.voice.meter_row.set_subtitle(&reading);
        });
        glib::ControlFlow::Continue
    });
}

/// The meter's position (0 to 1) and what its row says, from `audio.status`.
fn meter_reading(status: &Value) -> (f64, String) {
    let capture = &status["capture"];
    match capture["level_db"].as_f64() {
        Some(db) => (
            ((db - METER_FLOOR_DB) / -METER_FLOOR_DB).clamp(0.0, 1.0),
            format!(
                "{db:.0} dBFS from {}",
                capture["linked_source"]
                    .as_str()
                    .unwrap_or("the default source")
            ),
        ),
        None => (
            0.0,
            match status["state"].as_str() {
                Some("failed") => format!(
                    "the microphone failed: {}",
                    status["error"].as_str().unwrap_or("no reason given")
                ),
                Some(state) => format!("no level yet ({state})"),
                None => "no level yet".to_owned(),
            },
        ),
    }
}

// ---------------------------------------------------------------------------------------
// Models

/// A size in bytes for people (decimal units, as `utter models list`).
fn bytes(n: u64) -> String {
    let n = n as f64;
    if n >= 1e9 {
        format!("{:.1} GB", n / 1e9)
    } else if n >= 1e6 {
        format!("{:.0} MB", n / 1e6)
    } else if n >= 1e3 {
        format!("{:.0} kB", n / 1e3)
    } else {
        format!("{n} B")
    }
}

/// List the catalog's models again, with Download (and its progress) or Use.
pub fn refresh_models(live: &Rc<Live>) {
    let voice = &live.voice;
    for row in voice.model_rows.borrow_mut().drain(..) {
        voice.models.remove(&row);
    }
    let models = match backend::models() {
        Ok(m) => m,
        Err(e) => {
            let row = adw::ActionRow::builder()
                .title("The model catalog cannot be read")
                .subtitle(&e)
                .build();
            voice.models.add(&row);
            voice.model_rows.borrow_mut().push(row);
            return;
        }
    };
    let in_use = backend::read_config(&live.target.config)
        .map(|c| c.stt.model)
        .unwrap_or_default();
    for model in models {
        let state = match model.state {
            "installed" => "installed",
            "incomplete" => "partly downloaded",
            _ => "not installed",
        };
        let row = adw::ActionRow::builder()
            .title(&model.name)
            .subtitle(format!(
                "{} · {} · {state}",
                model.description,
                bytes(model.size)
            ))
            .subtitle_lines(2)
            .build();
        if model.state == "installed" && model.name == in_use {
            row.add_suffix(&gtk::Label::new(Some("In use")));
        } else if model.state == "installed" {
            let use_it = button("Use");
            let live = live.clone();
            let name = model.name.clone();
            use_it.connect_clicked(move |_| {
                let edits = vec![("stt.model".to_owned(), name.as_str().into())];
                save_and_reload(&live, edits, refresh_models);
            });
            row.add_suffix(&use_it);
        } else {
            let progress = gtk::ProgressBar::builder()
                .show_text(true)
                .valign(gtk::Align::Center)
                .visible(false)
                .build();
            let download = button("Download");
            row.add_suffix(&progress);
            row.add_suffix(&download);
            let live = live.clone();
            let name = model.name.clone();
            download.connect_clicked(move |download| {
                download.set_sensitive(false);
                progress.set_visible(true);
                progress.set_text(Some("starting…"));
                pull(live.clone(), name.clone(), progress.clone());
            });
        }
        voice.models.add(&row);
        voice.model_rows.borrow_mut().push(row);
    }
}

/// Download model `name`, moving `progress` as `utter models pull` reports.
fn pull(live: Rc<Live>, name: String, progress: gtk::ProgressBar) {
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    backend::spawn(backend::pull_model(
        live.target.config.clone(),
        name.clone(),
        tx,
    ));
    glib::spawn_future_local(async move {
        while let Some(report) = rx.recv().await {
            match report {
                Pull::Progress {
                    file,
                    bytes: have,
                    size,
                } => {
                    if size > 0 {
                        progress.set_fraction(have as f64 / size as f64);
                    }
                    progress.set_text(Some(&format!("{file}: {} of {}", bytes(have), bytes(size))));
                }
                Pull::Done(Ok(_)) => {
                    say(
                        &live,
                        &format!("Downloaded and verified {name}; press Use to speak with it."),
                        false,
                    );
                    refresh_models(&live);
                }
                Pull::Done(Err(e)) => {
                    say(&live, &format!("{name} was not downloaded: {e}"), true);
                    refresh_models(&live);
                }
            }
        }
    });
}

// ---------------------------------------------------------------------------------------
// Try it

fn try_group(live: &Rc<Live>) -> adw::PreferencesGroup {
    let group = adw::PreferencesGroup::builder()
        .title("Try it")
        .description("Starts listening; press again (or stay silent) to stop")
        .build();
    let talk = button("Talk");
    {
        let live = live.clone();
        talk.connect_clicked(move |_| {
            let live = live.clone();
            glib::spawn_future_local(async move {
                let target = live.target.clone();
                match backend::spawn(async move { target.toggle_ptt().await }).await {
                    Ok(Ok(true)) => say(&live, "Listening…", false),
                    Ok(Ok(false)) => say(&live, "Stopped listening.", false),
                    Ok(Err(e)) => say(&live, &e, true),
                    Err(e) => say(&live, &e.to_string(), true),
                }
            });
        });
    }
    group.set_header_suffix(Some(&talk));
    let heard_row = adw::PreferencesRow::new();
    let heard = &live.voice.heard;
    heard.set_margin_top(8);
    heard.set_margin_bottom(8);
    heard.set_margin_start(12);
    heard.set_margin_end(12);
    heard_row.set_child(Some(heard));
    group.add(&heard_row);
    group
}

/// What "Try it" shows for a finished voice cycle: what was heard, the plan and its
/// results, and where the time went.
pub fn describe_voice(report: &VoiceReport) -> String {
    let mut lines = vec![match (&report.transcript, &report.error) {
        (Some(t), _) if !t.is_empty() => format!("Heard: “{t}” ({})", report.outcome),
        (_, Some(e)) => format!("{}: {e}", report.outcome),
        _ => report.outcome.clone(),
    }];
    if let Some(outcome) = report.command_outcome() {
        lines.push(describe_outcome(Ok(Ok(outcome))));
    }
    let t = &report.timings;
    lines.push(format!(
        "Timings: held {:.0} ms; after release: capture {:.0} ms, speech to text {:.0} ms, plan and act {:.0} ms, {:.0} ms in all",
        t.held_ms,
        t.capture_flush_ms + t.handoff_ms,
        t.stt_ms,
        t.pipeline_ms,
        t.total_ms
    ));
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_meter_maps_dbfs_and_says_why_it_has_no_level() {
        let (f, said) = meter_reading(
            &json!({"state": "streaming", "capture": {"level_db": -35.0, "linked_source": "mic"}}),
        );
        assert!((f - 0.5).abs() < 1e-9, "{f}");
        assert_eq!(said, "-35 dBFS from mic");
        let (f, _) = meter_reading(&json!({"capture": {"level_db": -120.0}}));
        assert_eq!(f, 0.0);
        let (f, _) = meter_reading(&json!({"capture": {"level_db": 3.0}}));
        assert_eq!(f, 1.0);
        let (_, said) = meter_reading(&json!({"state": "failed", "error": "unplugged"}));
        assert_eq!(said, "the microphone failed: unplugged");
        let (_, said) = meter_reading(&json!("hostile"));
        assert_eq!(said, "no level yet");
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(bytes(77_691_713), "78 MB");
        assert_eq!(bytes(1_500_000_000), "1.5 GB");
        assert_eq!(bytes(999), "999 B");
    }
}
