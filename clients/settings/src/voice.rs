//! The Voice page: push-to-talk (the portal shortcut, the compositor's keyboard monitor,
//! evdev, and their keys), the microphone (the capture plugin's state, PipeWire's sources
//! through its `audio.sources`, with a live level meter polled from its `audio.status`), the
//! speech model (the one in use, then the catalog with a download and its progress) and "Try
//! it" (listen once; what was heard, the plan and the timings). Every setting is saved to the
//! config file and the runner is reloaded.
//!
//! What the page says of the runner comes from its status (`runner.status`): the plugins'
//! `status`, `health` and `last_error`, the voice loop's model and why it did not load, and
//! each push-to-talk trigger's state and detail. A trigger the desktop does not offer (the
//! runner says `unavailable`) is shown switched as the file says but insensitive, with the
//! runner's reason; nothing is guessed from the environment.

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use adw::prelude::*;
use gtk::glib;
use serde_json::{Value, json};
use utter_ipc::{PluginReport, Status, VoiceReport};

use crate::backend::{self, Pull};
use crate::{Live, button, button_for, describe_outcome, say, text};

/// How often the level meter asks for the level while the Voice page is shown.
const LEVEL_EVERY: Duration = Duration::from_millis(100);

/// The quietest level the meter shows, in dBFS (its left end).
const METER_FLOOR_DB: f64 = -70.0;

/// The page's widgets the rest of the app updates.
pub struct VoiceWidgets {
    /// The push-to-talk switches (set when the page is built).
    triggers: RefCell<Vec<TriggerSwitch>>,
    /// The capture plugin's state and the microphones, one row each (rebuilt by
    /// [`refresh_sources`]).
    pub sources: adw::PreferencesGroup,
    source_rows: RefCell<Vec<adw::ActionRow>>,
    /// The capture plugin the level is read from: one that runs (`ok` or `degraded`).
    capture: RefCell<Option<String>>,
    /// The level meter and its reading.
    meter: gtk::LevelBar,
    meter_row: adw::ActionRow,
    /// The model in use (rebuilt by [`refresh_models`]).
    pub models: adw::PreferencesGroup,
    model_rows: RefCell<Vec<adw::ActionRow>>,
    /// The catalog's models, one row each.
    catalog: adw::PreferencesGroup,
    catalog_rows: RefCell<Vec<adw::ActionRow>>,
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
        crate::name(&meter, "Microphone level");
        VoiceWidgets {
            triggers: RefCell::new(Vec::new()),
            sources: adw::PreferencesGroup::builder()
                .title("Microphone")
                .description("The PipeWire source push-to-talk records from ([audio] source)")
                .build(),
            source_rows: RefCell::new(Vec::new()),
            capture: RefCell::new(None),
            meter_row: adw::ActionRow::builder()
                .title("Level")
                .subtitle("no reading yet")
                .build(),
            meter,
            models: adw::PreferencesGroup::builder()
                .title("Speech model")
                .description("What turns your voice into text ([stt] model)")
                .build(),
            model_rows: RefCell::new(Vec::new()),
            catalog: adw::PreferencesGroup::builder()
                .title("Models to download")
                .description(
                    "Utter's catalog: Download fetches and verifies one, Use sets [stt] model to it (a model directory of your own is set as its path)",
                )
                .build(),
            catalog_rows: RefCell::new(Vec::new()),
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
    let refresh = button_for("Refresh", "Refresh the microphones");
    {
        let live = live.clone();
        refresh.connect_clicked(move |_| refresh_sources(live.clone()));
    }
    voice.sources.set_header_suffix(Some(&refresh));
    page.add(&voice.sources);
    page.add(&voice.models);
    page.add(&voice.catalog);
    page.add(&try_group(live));
    follow_level(live.clone());
    // Until the runner's status comes, the rows say so; [`status_changed`] fills them.
    refresh_sources(live.clone());
    refresh_models(live);
    page
}

/// The runner's status changed from `before` to `now` (`None`: none, the runner is away):
/// show again what of it the page shows.
pub fn status_changed(live: &Rc<Live>, before: Option<&Status>, now: Option<&Status>) {
    let triggers = |s: Option<&Status>| s.map(|s| s.ptt.triggers.clone());
    if triggers(before) != triggers(now) {
        apply_triggers(live);
    }
    let capture = |s: Option<&Status>| {
        s.map(|s| {
            (
                plugins_of(s, "audio"),
                s.voice.audio_plugin.clone(),
                s.voice.missing_model.clone(),
            )
        })
    };
    if capture(before) != capture(now) {
        refresh_sources(live.clone());
    }
    let model = |s: Option<&Status>| {
        s.map(|s| {
            (
                plugins_of(s, "stt"),
                s.voice.stt_plugin.clone(),
                s.voice.model.clone(),
                s.voice.model_error.clone(),
                s.voice.missing_model.clone(),
            )
        })
    };
    if model(before) != model(now) {
        refresh_models(live);
    }
}

/// The plugins of `kind` in `status`.
fn plugins_of(status: &Status, kind: &str) -> Vec<PluginReport> {
    status
        .plugins
        .iter()
        .filter(|p| p.kind == kind)
        .cloned()
        .collect()
}

/// What the runner's status says of the plugin `configured` names for a role (`[audio]
/// plugin`, `[stt] plugin`, or the first of `kind`): its report, the runner's own choice
/// (`chosen`, from the voice loop) first.
fn report_for<'a>(
    status: &'a Status,
    chosen: Option<&str>,
    configured: Option<&str>,
    kind: &str,
) -> Option<&'a PluginReport> {
    match chosen.or(configured) {
        Some(id) => status.plugins.iter().find(|p| p.id == id),
        None => status.plugins.iter().find(|p| p.kind == kind),
    }
}

/// A plugin's state in words: its status, and its health or last error when that says more
/// (the runner writes a degraded health as `degraded: WHY`).
fn plugin_state(p: &PluginReport) -> String {
    let health = p.health.strip_prefix("degraded: ").unwrap_or(&p.health);
    let why = match (p.status.as_str(), p.last_error.as_deref()) {
        ("ok" | "degraded", _) | (_, None) => health,
        (_, Some(error)) => error,
    };
    if why.is_empty() {
        p.status.as_str().to_owned()
    } else {
        format!("{}: {why}", p.status.as_str())
    }
}

// ---------------------------------------------------------------------------------------
// Push-to-talk

/// One push-to-talk trigger's switch in its row.
struct TriggerSwitch {
    /// The trigger's name in the runner's status (`portal`, `keyboard-monitor`, `evdev`).
    trigger: &'static str,
    /// The config key (`ptt.portal`).
    key: &'static str,
    /// What the row says of it whatever the runner says.
    about: &'static str,
    /// Whether it is a service of the desktop (the portal, the keyboard monitor): when the
    /// runner finds it `unavailable` the desktop does not have it, and the switch and its
    /// key are insensitive. evdev's troubles (permissions, devices) are the person's to fix.
    desktop: bool,
    row: adw::ActionRow,
    switch: gtk::Switch,
    /// The row of its key (the portal's shortcut, the keyboard monitor's key).
    key_row: adw::EntryRow,
    /// Shown when it is on in the file but the desktop does not have it.
    turn_off: gtk::Button,
    /// Why the desktop does not have it, as the runner last said while it was on: kept
    /// while it is off (then the runner does not try it and says only `disabled`).
    unavailable: RefCell<Option<String>>,
}

/// What a trigger's row shows.
#[derive(Debug, PartialEq)]
struct TriggerView {
    /// Whether the switch can be changed.
    sensitive: bool,
    /// The row's subtitle (also the switch's accessible description).
    subtitle: String,
}

/// The view of a trigger whose row says `about`, switched `on` in the form, from what the
/// runner said of it (`said`: state and detail; `None` without a status) and what it said
/// while the trigger was on (`remembered`).
fn trigger_view(
    about: &str,
    desktop: bool,
    on: bool,
    said: Option<(&str, &str)>,
    remembered: Option<&str>,
) -> TriggerView {
    let not_here = |why: &str| TriggerView {
        sensitive: false,
        subtitle: format!("{about}\nNot available on this desktop: {why}"),
    };
    match said {
        None => TriggerView {
            sensitive: true,
            subtitle: about.to_owned(),
        },
        Some(("unavailable", detail)) if desktop => not_here(detail),
        Some(("disabled", detail)) => match remembered {
            Some(why) if desktop => not_here(why),
            // On in the file, off in the runner (`utter daemon --no-dbus`, not reloaded yet).
            _ if on => TriggerView {
                sensitive: true,
                subtitle: format!("{about}\ndisabled: {detail}"),
            },
            _ => TriggerView {
                sensitive: true,
                subtitle: about.to_owned(),
            },
        },
        Some((state, detail)) => TriggerView {
            sensitive: true,
            subtitle: format!("{about}\n{state}: {detail}"),
        },
    }
}

/// Show what the runner's status says of each trigger.
fn apply_triggers(live: &Rc<Live>) {
    let status = live.status.borrow();
    for t in live.voice.triggers.borrow().iter() {
        let said = status.as_ref().and_then(|s| {
            s.ptt
                .triggers
                .iter()
                .find(|x| x.trigger == t.trigger)
                .map(|x| (x.state.as_str(), x.detail.as_str()))
        });
        match said {
            Some(("unavailable", detail)) => {
                t.unavailable.replace(Some(detail.to_owned()));
            }
            Some(("disabled", _)) | None => {}
            Some(_) => {
                t.unavailable.replace(None);
            }
        }
        let view = trigger_view(
            t.about,
            t.desktop,
            t.switch.is_active(),
            said,
            t.unavailable.borrow().as_deref(),
        );
        t.row.set_subtitle(&view.subtitle);
        t.switch.set_sensitive(view.sensitive);
        t.key_row.set_sensitive(view.sensitive);
        crate::describe(&t.switch, &view.subtitle);
        t.turn_off
            .set_visible(!view.sensitive && t.switch.is_active());
    }
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
    let trigger = |trigger, key, title: &str, about, desktop, active, key_title: &str, value| {
        let (row, switch) = switch_row(title, about, active);
        let key_row = adw::EntryRow::builder()
            .title(key_title)
            .text(value)
            .build();
        let turn_off = button_for("Turn off", &format!("Turn off {title}"));
        turn_off.set_visible(false);
        row.add_suffix(&turn_off);
        TriggerSwitch {
            trigger,
            key,
            about,
            desktop,
            row,
            switch,
            key_row,
            turn_off,
            unavailable: RefCell::new(None),
        }
    };
    let portal = trigger(
        "portal",
        "ptt.portal",
        "Desktop portal shortcut",
        "Bind the key through the GlobalShortcuts portal (KDE, GNOME 48+, Hyprland)",
        true,
        ptt.portal,
        "Portal shortcut",
        &ptt.shortcut,
    );
    let monitor = trigger(
        "keyboard-monitor",
        "ptt.keyboard_monitor",
        "Compositor keyboard monitor",
        "Hold the key through org.freedesktop.a11y.KeyboardMonitor (niri 25.08+)",
        true,
        ptt.keyboard_monitor,
        "Keyboard monitor key",
        &ptt.keyboard_monitor_key,
    );
    let evdev = trigger(
        "evdev",
        "ptt.evdev",
        "Read the key from evdev",
        "From /dev/input keyboards; needs membership of the group input",
        false,
        ptt.evdev,
        "evdev key",
        &ptt.evdev_key,
    );
    for t in [&portal, &monitor, &evdev] {
        group.add(&t.row);
        group.add(&t.key_row);
    }
    let save = button_for("Save", "Save push-to-talk");
    save.add_css_class("suggested-action");
    group.set_header_suffix(Some(&save));
    if let Some(e) = broken {
        say(
            live,
            &format!("The config file is invalid; nothing will be saved until it is fixed:\n{e}"),
            true,
        );
    }
    // What the file held when the page opened or was last saved.
    let initial = Rc::new(RefCell::new(ptt));
    let switches = [
        portal.switch.clone(),
        monitor.switch.clone(),
        evdev.switch.clone(),
    ];
    let keys = [
        portal.key_row.clone(),
        monitor.key_row.clone(),
        evdev.key_row.clone(),
    ];
    {
        let live = live.clone();
        let initial = initial.clone();
        save.connect_clicked(move |_| {
            let [portal, monitor, evdev] = switches.each_ref().map(|s| s.is_active());
            let [shortcut, monitor_key, evdev_key] = keys.each_ref().map(|k| k.text().to_string());
            // Only what the person changed: a key the file does not have stays out of it.
            let mut edits: Vec<(String, toml_edit::Value)> = Vec::new();
            {
                let was = initial.borrow();
                let mut flag = |key: &str, now: bool, then: bool| {
                    if now != then {
                        edits.push((key.into(), now.into()));
                    }
                };
                flag("ptt.portal", portal, was.portal);
                flag("ptt.keyboard_monitor", monitor, was.keyboard_monitor);
                flag("ptt.evdev", evdev, was.evdev);
                let mut word = |key: &str, now: &str, then: &str| {
                    if now != then {
                        edits.push((key.into(), now.into()));
                    }
                };
                word("ptt.shortcut", &shortcut, &was.shortcut);
                word(
                    "ptt.keyboard_monitor_key",
                    &monitor_key,
                    &was.keyboard_monitor_key,
                );
                word("ptt.evdev_key", &evdev_key, &was.evdev_key);
            }
            if save_and_reload(&live, edits, |_| {}) {
                let mut was = initial.borrow_mut();
                was.portal = portal;
                was.shortcut = shortcut;
                was.keyboard_monitor = monitor;
                was.keyboard_monitor_key = monitor_key;
                was.evdev = evdev;
                was.evdev_key = evdev_key;
            }
        });
    }
    for t in [&portal, &monitor] {
        let live = live.clone();
        let initial = initial.clone();
        let (key, switch) = (t.key, t.switch.clone());
        t.turn_off.connect_clicked(move |turn_off| {
            let edits = vec![(key.to_owned(), false.into())];
            if save_and_reload(&live, edits, |_| {}) {
                switch.set_active(false);
                turn_off.set_visible(false);
                let mut was = initial.borrow_mut();
                match key {
                    "ptt.portal" => was.portal = false,
                    _ => was.keyboard_monitor = false,
                }
            }
        });
    }
    live.voice.triggers.replace(vec![portal, monitor, evdev]);
    apply_triggers(live);
    group
}

// ---------------------------------------------------------------------------------------
// Microphone

/// What the Microphone group says of the capture plugin.
#[derive(Debug, PartialEq)]
struct CaptureView {
    /// The row's title.
    title: String,
    /// Its subtitle: the state and why, or what to add.
    subtitle: String,
    /// The plugin to ask for sources and the level: one that runs.
    running: Option<String>,
}

/// The capture plugin as the config file names it (`configured`: `[audio] plugin`, else
/// the first enabled `[[plugin]]` of kind `audio`) and as the runner's `status` reports it
/// (`None`: the runner could not be asked, `runner_error` says why).
fn capture_view(
    configured: Option<&str>,
    status: Option<&Status>,
    runner_error: Option<&str>,
) -> CaptureView {
    let view = |title: String, subtitle: String, running: Option<String>| CaptureView {
        title,
        subtitle,
        running,
    };
    let Some(status) = status else {
        let why = match runner_error {
            Some(e) => format!("the runner is not running: {e}"),
            None => "asking the runner…".to_owned(),
        };
        return match configured {
            Some(id) => view(format!("Capture plugin {id}"), why, None),
            None => view("No capture plugin is configured".into(), why, None),
        };
    };
    let report = report_for(
        status,
        status.voice.audio_plugin.as_deref(),
        configured,
        "audio",
    );
    match (report, configured) {
        (Some(p), _) => {
            let title = match p.status.as_str() {
                "ok" => format!("Capture plugin {}", p.id),
                "degraded" => format!("Capture plugin {} is degraded", p.id),
                "starting" => format!("Capture plugin {} is starting", p.id),
                _ => format!("Capture plugin {} is not running", p.id),
            };
            let mut subtitle = plugin_state(p);
            if p.restarts > 0 {
                subtitle.push_str(&format!(
                    " ({} restart{})",
                    p.restarts,
                    if p.restarts == 1 { "" } else { "s" }
                ));
            }
            let running = p.status.is_running().then(|| p.id.clone());
            view(title, subtitle, running)
        }
        (None, Some(id)) => {
            let why = match &status.voice.missing_model {
                Some(missing) => format!(
                    "configured, not started: it starts with the speech model ({missing}, then `utter reload`)"
                ),
                None => format!(
                    "configured in this file, but the runner (config {}) has no plugin {id}: `utter reload` loads the file",
                    status.config
                ),
            };
            view(format!("Capture plugin {id} is not running"), why, None)
        }
        (None, None) => view(
            "No capture plugin is configured".into(),
            "Add a [[plugin]] of kind \"audio\" to the config, e.g. entrypoint = [\"utter-audio-pipewire\"]".into(),
            None,
        ),
    }
}

/// Show the capture plugin's state, then list its sources again, one row each, with "Use"
/// on all but the one in use. When it does not run, or PipeWire is not there, the rows say
/// why.
pub fn refresh_sources(live: Rc<Live>) {
    let config = backend::read_config(&live.target.config).ok();
    let configured = config
        .as_ref()
        .and_then(|c| c.plugin_for(&c.audio.plugin, "audio"))
        .map(|p| p.id.clone());
    let view = capture_view(
        configured.as_deref(),
        live.status.borrow().as_ref(),
        live.runner_error.borrow().as_deref(),
    );
    let in_use = config.map(|c| c.audio.source).unwrap_or_default();
    live.voice.capture.replace(view.running.clone());
    glib::spawn_future_local(async move {
        let answer = match view.running.clone() {
            Some(plugin) => {
                let target = live.target.clone();
                let asked = backend::spawn(async move {
                    target.invoke(plugin, "audio.sources", json!({})).await
                })
                .await;
                Some(asked.map_err(|e| e.to_string()).and_then(|a| a))
            }
            None => None,
        };
        // Everything is taken down and put up again here, with no await in between.
        let voice = &live.voice;
        for row in voice.source_rows.borrow_mut().drain(..) {
            voice.sources.remove(&row);
        }
        let add = |row: adw::ActionRow| {
            voice.sources.add(&row);
            voice.source_rows.borrow_mut().push(row);
        };
        let state = adw::ActionRow::builder()
            .title(&view.title)
            .subtitle(&view.subtitle)
            .build();
        if view.running.is_none() {
            voice.meter_row.set_subtitle("no reading");
            voice.meter.set_value(0.0);
        }
        add(state);
        let sources = match answer {
            None => return,
            Some(Ok(answer)) => answer["sources"].as_array().cloned().unwrap_or_default(),
            // The plugin's own state above says the same already (PipeWire is not running).
            Some(Err(e))
                if view
                    .subtitle
                    .contains(e.strip_prefix("audio.sources: ").unwrap_or(&e)) =>
            {
                return;
            }
            Some(Err(e)) => {
                add(adw::ActionRow::builder()
                    .title("The microphones cannot be listed")
                    .subtitle(&e)
                    .build());
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
            if name == in_use {
                row.add_suffix(&gtk::Label::new(Some("In use")));
            } else {
                let use_it = button_for("Use", &format!("Use {title}"));
                let live = live.clone();
                use_it.connect_clicked(move |_| {
                    let edits = vec![("audio.source".to_owned(), name.as_str().into())];
                    save_and_reload(&live, edits, |live| refresh_sources(live.clone()));
                });
                row.add_suffix(&use_it);
            }
            add(row);
        }
    });
}

/// Poll `audio.status` every [`LEVEL_EVERY`] while the Voice page is shown and move the
/// meter; one call at a time.
fn follow_level(live: Rc<Live>) {
    let busy = Rc::new(std::cell::Cell::new(false));
    glib::timeout_add_local(LEVEL_EVERY, move || {
        let shown = live.stack.visible_child_name().as_deref() == Some("voice");
        let plugin = live.voice.capture.borrow().clone();
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
                    status["error"]
                        .as_str()
                        .or(status["last_error"].as_str())
                        .unwrap_or("no reason given")
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

/// What is at a model directory's path.
#[derive(Debug, Clone, Copy, PartialEq)]
enum OnDisk {
    Directory,
    NotDirectory,
    Missing,
}

impl OnDisk {
    fn of(path: &Path) -> OnDisk {
        match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => OnDisk::Directory,
            Ok(_) => OnDisk::NotDirectory,
            Err(_) => OnDisk::Missing,
        }
    }
}

/// What the config file's `[stt] model` is.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ModelSetting<'a> {
    /// Empty.
    Unset,
    /// A model's name, with its state in the catalog (`installed`, `incomplete`,
    /// `not-installed`; `None`: the catalog has no model of that name).
    Name(&'a str, Option<&'static str>),
    /// A directory (the `~/` expanded), and what is there.
    Directory(&'a str, OnDisk),
}

/// What the Speech model group says of the model in use.
#[derive(Debug, PartialEq)]
struct ModelView {
    title: String,
    subtitle: String,
    /// "In use" (the stt plugin runs and the model loaded), "Not loaded", or nothing (the
    /// runner could not be asked, or no model is set).
    badge: Option<&'static str>,
}

/// The model `setting` names, with what the runner's `status` says of the stt plugin (the
/// one the file names is `stt`) and of the model it was given.
fn model_view(
    setting: ModelSetting,
    stt: Option<&str>,
    status: Option<&Status>,
    runner_error: Option<&str>,
) -> ModelView {
    let (title, mut lines) = match setting {
        ModelSetting::Unset => (
            "No speech model is set".to_owned(),
            vec!["Download one below and press Use, or set [stt] model to the path of a model directory".to_owned()],
        ),
        ModelSetting::Name(name, state) => (
            name.to_owned(),
            vec![match state {
                Some("installed") => "from the catalog · installed".to_owned(),
                Some("incomplete") => "from the catalog · partly downloaded: Download it below".to_owned(),
                Some(_) => "from the catalog · not installed: Download it below".to_owned(),
                None => "not in the catalog; looked for in the models directory".to_owned(),
            }],
        ),
        ModelSetting::Directory(path, on_disk) => (
            path.to_owned(),
            vec![format!(
                "a model directory ([stt] model) · {}",
                match on_disk {
                    OnDisk::Directory => "the directory is there",
                    OnDisk::NotDirectory => "this is not a directory",
                    OnDisk::Missing => "there is no such directory",
                }
            )],
        ),
    };
    let Some(status) = status else {
        lines.push(match runner_error {
            Some(e) => format!("the runner is not running: {e}"),
            None => "asking the runner…".to_owned(),
        });
        return ModelView {
            title,
            subtitle: lines.join("\n"),
            badge: None,
        };
    };
    let voice = &status.voice;
    let report = report_for(status, voice.stt_plugin.as_deref(), stt, "stt");
    lines.push(match (report, stt) {
        (Some(p), _) => format!("stt plugin {}: {}", p.id, plugin_state(p)),
        (None, Some(id)) => match &voice.missing_model {
            Some(missing) => format!("stt plugin {id} is not started: {missing}"),
            None => format!(
                "stt plugin {id} is configured in this file, but the runner (config {}) has none of that name",
                status.config
            ),
        },
        (None, None) => {
            "no stt plugin is configured: add a [[plugin]] of kind \"stt\" (utter-stt-whisper)"
                .to_owned()
        }
    });
    if let Some(e) = &voice.model_error {
        lines.push(format!("it did not load: {e}"));
    }
    if let (ModelSetting::Directory(path, _), Some(given)) = (setting, &voice.model)
        && given != path
    {
        lines.push(format!("the runner was given {given}"));
    }
    let loaded = report.is_some_and(|p| p.status.is_running())
        && voice.model.is_some()
        && voice.model_error.is_none()
        && voice.missing_model.is_none();
    let badge = match setting {
        ModelSetting::Unset => None,
        _ if loaded => Some("In use"),
        _ => Some("Not loaded"),
    };
    ModelView {
        title,
        subtitle: lines.join("\n"),
        badge,
    }
}

/// Whether `a` and `b` name the same directory (both exist and resolve alike).
fn same_dir(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Show the model in use again, then the catalog's models, with Download (and its progress)
/// or Use.
pub fn refresh_models(live: &Rc<Live>) {
    let voice = &live.voice;
    for row in voice.model_rows.borrow_mut().drain(..) {
        voice.models.remove(&row);
    }
    for row in voice.catalog_rows.borrow_mut().drain(..) {
        voice.catalog.remove(&row);
    }
    let config = backend::read_config(&live.target.config).ok();
    let stt = config.as_ref().map(|c| &c.stt);
    let models = backend::models();
    let catalog = models.as_deref().unwrap_or_default();
    let path = stt.and_then(|s| s.model_path());
    let setting = match (stt.and_then(|s| s.model_name()), &path) {
        (Some(name), _) => ModelSetting::Name(
            name,
            catalog.iter().find(|m| m.name == name).map(|m| m.state),
        ),
        (None, Some(path)) => ModelSetting::Directory(path, OnDisk::of(Path::new(path))),
        (None, None) => ModelSetting::Unset,
    };
    let stt_plugin = config
        .as_ref()
        .and_then(|c| c.plugin_for(&c.stt.plugin, "stt"))
        .map(|p| p.id.as_str());
    let view = model_view(
        setting,
        stt_plugin,
        live.status.borrow().as_ref(),
        live.runner_error.borrow().as_deref(),
    );
    let row = adw::ActionRow::builder()
        .title(&view.title)
        .subtitle(&view.subtitle)
        .build();
    if let Some(badge) = view.badge {
        row.add_suffix(&gtk::Label::new(Some(badge)));
    }
    voice.models.add(&row);
    voice.model_rows.borrow_mut().push(row);

    let models = match models {
        Ok(m) => m,
        Err(e) => {
            let row = adw::ActionRow::builder()
                .title("The model catalog cannot be read")
                .subtitle(&e)
                .build();
            voice.catalog.add(&row);
            voice.catalog_rows.borrow_mut().push(row);
            return;
        }
    };
    for model in models {
        let state = match model.state {
            "installed" => "installed",
            "incomplete" => "partly downloaded",
            _ => "not installed",
        };
        let in_use = match setting {
            ModelSetting::Name(name, _) => name == model.name,
            ModelSetting::Directory(path, _) => same_dir(Path::new(path), &model.dir),
            ModelSetting::Unset => false,
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
        if model.state == "installed" && in_use {
            row.add_suffix(&gtk::Label::new(Some("In use")));
        } else if model.state == "installed" {
            let use_it = button_for("Use", &format!("Use {}", model.name));
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
            crate::name(&progress, &format!("Downloading {}", model.name));
            let download = button_for("Download", &format!("Download {}", model.name));
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
        voice.catalog.add(&row);
        voice.catalog_rows.borrow_mut().push(row);
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

/// What the message line shows while the key is held: what was heard so far.
pub fn describe_partial(partial: &utter_ipc::VoicePartial) -> String {
    format!(
        "Listening… heard so far: “{}”",
        utter_protocol::text::clip(&partial.text, 200)
    )
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

    /// A status with `plugins` (id, kind, status, health, last error) and the voice loop's
    /// model, its error, and the ptt triggers (name, state, detail).
    fn status(plugins: &[(&str, &str, &str, &str, Option<&str>)], model: Option<&str>) -> Status {
        let plugins: Vec<Value> = plugins
            .iter()
            .map(|(id, kind, status, health, error)| {
                json!({"id": id, "kind": kind, "epoch": 0, "status": status, "provides": [],
                       "requires": [], "permissions": [], "methods": [], "health": health,
                       "restarts": 0, "pid": null, "last_error": error, "warnings": []})
            })
            .collect();
        serde_json::from_value(json!({
            "version": "0.1.0", "state": "ready", "config": "/c/utter.toml", "plugins": plugins,
            "ptt": {"listening": false, "source": null, "held_ms": null, "min_hold_ms": 150,
                    "max_hold_ms": 30000, "triggers": []},
            "voice": {"state": "ready", "detail": "", "stt_plugin": null, "model": model,
                      "audio_plugin": null, "microphone": null, "model_error": null},
        }))
        .expect("a status")
    }

    #[test]
    fn a_configured_capture_plugin_that_is_degraded_is_not_called_missing() {
        let pipewire = "PipeWire is not running (cannot connect); start it";
        let s = status(
            &[(
                "mic",
                "audio",
                "degraded",
                &format!("degraded: {pipewire}"),
                None,
            )],
            None,
        );
        let view = capture_view(Some("mic"), Some(&s), None);
        assert_eq!(view.title, "Capture plugin mic is degraded");
        assert_eq!(view.subtitle, format!("degraded: {pipewire}"));
        assert_eq!(view.running.as_deref(), Some("mic"), "it still runs");

        let s = status(
            &[(
                "mic",
                "audio",
                "crash-loop",
                "",
                Some("exited with status 3"),
            )],
            None,
        );
        let view = capture_view(Some("mic"), Some(&s), None);
        assert_eq!(view.title, "Capture plugin mic is not running");
        assert_eq!(view.subtitle, "crash-loop: exited with status 3");
        assert_eq!(view.running, None);

        // Configured, the runner does not have it; the runner away; nothing configured.
        let s = status(&[], None);
        let view = capture_view(Some("mic"), Some(&s), None);
        assert!(view.subtitle.contains("has no plugin mic"), "{view:?}");
        let view = capture_view(Some("mic"), None, Some("connection refused"));
        assert_eq!(view.title, "Capture plugin mic");
        assert!(view.subtitle.contains("connection refused"), "{view:?}");
        let view = capture_view(None, Some(&s), None);
        assert_eq!(view.title, "No capture plugin is configured");
        assert!(view.subtitle.contains("[[plugin]] of kind \"audio\""));
    }

    #[test]
    fn a_model_directory_is_the_model_in_use_with_the_stt_plugins_state() {
        let dir = "/models/faster-whisper-tiny.en";
        let s = status(
            &[("whisper", "stt", "ok", &format!("model {dir}"), None)],
            Some(dir),
        );
        let view = model_view(
            ModelSetting::Directory(dir, OnDisk::Directory),
            Some("whisper"),
            Some(&s),
            None,
        );
        assert_eq!(view.title, dir);
        assert_eq!(
            view.subtitle,
            format!(
                "a model directory ([stt] model) · the directory is there\nstt plugin whisper: ok: model {dir}"
            )
        );
        assert_eq!(view.badge, Some("In use"));

        let mut s = s;
        s.voice.model_error = Some("no model.bin".into());
        let view = model_view(
            ModelSetting::Directory(dir, OnDisk::Missing),
            Some("whisper"),
            Some(&s),
            None,
        );
        assert!(
            view.subtitle.contains("there is no such directory"),
            "{view:?}"
        );
        assert!(
            view.subtitle.ends_with("it did not load: no model.bin"),
            "{view:?}"
        );
        assert_eq!(view.badge, Some("Not loaded"));

        let view = model_view(
            ModelSetting::Name("tiny.en", Some("not-installed")),
            None,
            None,
            None,
        );
        assert!(
            view.subtitle.contains("not installed: Download it below"),
            "{view:?}"
        );
        assert_eq!(view.badge, None, "without the runner nothing is claimed");
    }

    #[test]
    fn a_trigger_the_desktop_does_not_have_is_insensitive_with_the_runners_reason() {
        let why = "the desktop portal has no GlobalShortcuts";
        let view = trigger_view("Bind it", true, true, Some(("unavailable", why)), None);
        assert!(!view.sensitive);
        assert_eq!(
            view.subtitle,
            format!("Bind it\nNot available on this desktop: {why}")
        );
        // Switched off later: the runner only says disabled, what it said before stands.
        let view = trigger_view(
            "Bind it",
            true,
            false,
            Some(("disabled", "[ptt] portal = false")),
            Some(why),
        );
        assert!(!view.sensitive, "{view:?}");
        // evdev's troubles are for the person to fix: said, not locked.
        let view = trigger_view(
            "From /dev/input",
            false,
            true,
            Some(("unavailable", "no keyboards")),
            None,
        );
        assert!(view.sensitive);
        assert!(
            view.subtitle.ends_with("\nunavailable: no keyboards"),
            "{view:?}"
        );
        let view = trigger_view(
            "From /dev/input",
            false,
            false,
            Some(("disabled", "[ptt] evdev = false")),
            None,
        );
        assert_eq!(view.subtitle, "From /dev/input");
        // On in the file, not run by this runner: said so.
        let view = trigger_view(
            "Hold the key",
            true,
            true,
            Some(("disabled", "utter daemon --no-dbus")),
            None,
        );
        assert!(view.sensitive);
        assert_eq!(
            view.subtitle,
            "Hold the key\ndisabled: utter daemon --no-dbus"
        );
        let view = trigger_view(
            "Bind it",
            true,
            true,
            Some(("bound", "utter-ptt bound to F13")),
            None,
        );
        assert!(view.sensitive);
        assert!(trigger_view("Bind it", true, true, None, None).sensitive);
    }

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
        // A stream that never opened: the reason is the last error.
        let (_, said) = meter_reading(
            &json!({"state": "failed", "error": null, "last_error": "PipeWire is not running"}),
        );
        assert_eq!(said, "the microphone failed: PipeWire is not running");
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
