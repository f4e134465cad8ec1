//! `utter-settings`: Utter's settings app, a client of the runner like the CLI.
//!
//! Pages:
//! - **Status**: the service (start, stop, restart, enable through systemd's user manager),
//!   the runner's state and every plugin with its kind, epoch, status, restarts and the
//!   reason of one that is not running;
//! - **Voice**: push-to-talk (the portal shortcut, evdev and its key) saved to the config
//!   file, and a "Try it" button that toggles listening and shows what was heard;
//! - **Commands**: a phrase box that dry-runs a command and shows the plan;
//! - **Safety**: the confirmations waiting, with Approve and Deny, and the enabled ops;
//! - **Events**: the runner's events as they happen.
//!
//! It talks to the runner through `utter-ipc` (never by parsing CLI text) and edits
//! `~/.config/utter/config.toml` through the runner's own comment-preserving editor and
//! checker: a change that would make the file invalid is shown with file:line and not
//! written. Colours follow libadwaita's style manager; a `colors.css` beside the config
//! (for example written by a matugen template) is loaded on top when present.

mod backend;

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;

use adw::prelude::*;
use clap::Parser;
use gtk::glib;
use utter_ipc::Event;

use backend::Target;

/// The application id (also the `.desktop` and metainfo file names).
const APP_ID: &str = "dev.utter.Settings";

/// Utter's settings: service state, push-to-talk, commands, confirmations and live events.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The config file to edit (default: $XDG_CONFIG_HOME/utter/config.toml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// The runner's client socket (default: as `utter` finds it).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Open on this page: status, voice, commands, safety or events.
    #[arg(long, default_value = "status")]
    page: String,
}

fn main() -> glib::ExitCode {
    let args = Args::parse();
    let target = match Target::resolve(args.socket.clone(), args.config.clone()) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("utter-settings: {e}; pass --config PATH");
            return glib::ExitCode::from(2);
        }
    };
    let app = adw::Application::builder()
        .application_id(APP_ID)
        // Several instances (one per config, in tests) may run side by side.
        .flags(gtk::gio::ApplicationFlags::NON_UNIQUE)
        .build();
    let page = args.page.clone();
    app.connect_activate(move |app| build(app, target.clone(), &page));
    // GTK must not see our options.
    app.run_with_args(&[std::env::args().next().unwrap_or_default()])
}

/// A line of text that wraps, left-aligned, selectable for copying.
fn text(label: &str) -> gtk::Label {
    gtk::Label::builder()
        .label(label)
        .wrap(true)
        .xalign(0.0)
        .selectable(true)
        .build()
}

fn button(label: &str) -> gtk::Button {
    gtk::Button::builder()
        .label(label)
        .valign(gtk::Align::Center)
        .build()
}

/// Shared widgets the event stream updates.
struct Live {
    state_row: adw::ActionRow,
    plugins: adw::PreferencesGroup,
    plugin_rows: RefCell<Vec<adw::ActionRow>>,
    pending: adw::PreferencesGroup,
    pending_rows: RefCell<Vec<adw::ActionRow>>,
    heard: gtk::Label,
    events: gtk::TextBuffer,
    target: Target,
    message: gtk::Label,
}

fn build(app: &adw::Application, target: Target, first_page: &str) {
    load_palette(&target);
    let stack = adw::ViewStack::new();
    stack.set_vexpand(true);
    let title = adw::ViewSwitcherTitle::builder()
        .title("Utter")
        .stack(&stack)
        .build();
    let header = adw::HeaderBar::builder().title_widget(&title).build();
    let message = text("");
    message.set_margin_start(12);
    message.set_margin_end(12);
    message.set_visible(false);
    let content = gtk::Box::new(gtk::Orientation::Vertical, 0);
    content.append(&header);
    content.append(&message);
    content.append(&stack);

    let live = Rc::new(Live {
        state_row: adw::ActionRow::builder()
            .title("Runner")
            .subtitle("connecting…")
            .build(),
        plugins: adw::PreferencesGroup::builder().title("Plugins").build(),
        plugin_rows: RefCell::new(Vec::new()),
        pending: adw::PreferencesGroup::builder()
            .title("Waiting for your answer")
            .description("Steps that run only when you approve them")
            .build(),
        pending_rows: RefCell::new(Vec::new()),
        heard: text("Nothing heard yet."),
        events: gtk::TextBuffer::new(None),
        target: target.clone(),
        message: message.clone(),
    });

    stack.add_titled_with_icon(
        &status_page(&live),
        Some("status"),
        "Status",
        "utilities-system-monitor-symbolic",
    );
    stack.add_titled_with_icon(
        &voice_page(&live),
        Some("voice"),
        "Voice",
        "audio-input-microphone-symbolic",
    );
    stack.add_titled_with_icon(
        &commands_page(&live),
        Some("commands"),
        "Commands",
        "system-run-symbolic",
    );
    stack.add_titled_with_icon(
        &safety_page(&live),
        Some("safety"),
        "Safety",
        "security-high-symbolic",
    );
    stack.add_titled_with_icon(
        &events_page(&live),
        Some("events"),
        "Events",
        "view-list-symbolic",
    );
    stack.set_visible_child_name(first_page);

    let window = adw::ApplicationWindow::builder()
        .application(app)
        .title("Utter Settings")
        .default_width(760)
        .default_height(620)
        .content(&content)
        .build();
    window.present();

    follow_events(live.clone());
    refresh_status(live.clone());
    refresh_pending(live);
}

/// Show `text` above the pages (an error in the error style).
fn say(live: &Live, what: &str, error: bool) {
    live.message.set_label(what);
    live.message.set_visible(!what.is_empty());
    if error {
        live.message.add_css_class("error");
    } else {
        live.message.remove_css_class("error");
    }
}

/// `colors.css` beside the config file (a matugen template can write it), on top of
/// libadwaita's own palette, which follows the desktop's light or dark preference.
fn load_palette(target: &Target) {
    let Some(css) = target.config.parent().map(|d| d.join("colors.css")) else {
        return;
    };
    if !css.is_file() {
        return;
    }
    let provider = gtk::CssProvider::new();
    provider.load_from_path(&css);
    if let Some(display) = gtk::gdk::Display::default() {
        gtk::style_context_add_provider_for_display(
            &display,
            &provider,
            gtk::STYLE_PROVIDER_PRIORITY_USER,
        );
    }
}

// ---------------------------------------------------------------------------------------
// Status

fn status_page(live: &Rc<Live>) -> adw::PreferencesPage {
    let page = adw::PreferencesPage::new();
    let service = adw::PreferencesGroup::builder()
        .title("Service")
        .description("utter.service in your systemd user session")
        .build();
    let actions = gtk::Box::new(gtk::Orientation::Horizontal, 6);
    for (label, verb) in [
        ("Start", "start"),
        ("Stop", "stop"),
        ("Restart", "restart"),
        ("Enable", "enable"),
    ] {
        let b = button(label);
        let live = live.clone();
        b.connect_clicked(move |_| {
            let live = live.clone();
            glib::spawn_future_local(async move {
                match backend::spawn(backend::systemd(verb)).await {
                    Ok(Ok(done)) => say(&live, &format!("utter.service {done}"), false),
                    Ok(Err(e)) => say(&live, &e, true),
                    Err(e) => say(&live, &e.to_string(), true),
                }
                refresh_status(live);
            });
        });
        actions.append(&b);
    }
    live.state_row.add_suffix(&actions);
    service.add(&live.state_row);
    page.add(&service);
    page.add(&live.plugins);
    page
}

fn refresh_status(live: Rc<Live>) {
    glib::spawn_future_local(async move {
        let target = live.target.clone();
        let status = backend::spawn(async move { target.status().await }).await;
        for row in live.plugin_rows.borrow_mut().drain(..) {
            live.plugins.remove(&row);
        }
        match status {
            Ok(Ok(status)) => {
                live.state_row.set_subtitle(&format!(
                    "{} · version {} · config {}",
                    status.state.as_str(),
                    status.version,
                    status.config
                ));
                for p in &status.plugins {
                    let mut subtitle = format!(
                        "{} · {} · epoch {} · {} restart{}",
                        p.kind,
                        p.status.as_str(),
                        p.epoch,
                        p.restarts,
                        if p.restarts == 1 { "" } else { "s" }
                    );
                    let why = p.last_error.as_deref().unwrap_or(p.health.as_str());
                    if p.status.as_str() != "ok" && !why.is_empty() {
                        subtitle.push_str(" · ");
                        subtitle.push_str(why);
                    }
                    let row = adw::ActionRow::builder()
                        .title(&p.id)
                        .subtitle(&subtitle)
                        .subtitle_lines(3)
                        .build();
                    live.plugins.add(&row);
                    live.plugin_rows.borrow_mut().push(row);
                }
            }
            Ok(Err(e)) => live.state_row.set_subtitle(&format!("not running: {e}")),
            Err(e) => live.state_row.set_subtitle(&e.to_string()),
        }
    });
}

// ---------------------------------------------------------------------------------------
// Voice

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

fn voice_page(live: &Rc<Live>) -> adw::PreferencesPage {
    let page = adw::PreferencesPage::new();
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
    page.add(&group);
    if let Some(e) = broken {
        say(
            live,
            &format!("The config file is invalid; nothing will be saved until it is fixed:\n{e}"),
            true,
        );
    }
    {
        let live = live.clone();
        // What the file held when the page opened or was last saved.
        let initial = Rc::new(RefCell::new(ptt.clone()));
        save.connect_clicked(move |_| {
            let mut initial = initial.borrow_mut();
            // Only what the person changed: a key the file does not have stays out of it.
            let mut edits: Vec<(String, toml_edit::Value)> = Vec::new();
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
            match backend::save_config(&live.target.config, &edits) {
                Ok(changed) if changed.is_empty() => say(&live, "Nothing changed.", false),
                Ok(changed) => {
                    initial.portal = portal.is_active();
                    initial.shortcut = shortcut.text().to_string();
                    initial.evdev = evdev.is_active();
                    initial.evdev_key = evdev_key.text().to_string();
                    say(
                        &live,
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
                    });
                }
                Err(e) => say(&live, &format!("Not saved:\n{e}"), true),
            }
        });
    }

    let try_group = adw::PreferencesGroup::builder()
        .title("Try it")
        .description("Starts listening; press again (or stay silent) to stop")
        .build();
    let try_button = button("Talk");
    {
        let live = live.clone();
        try_button.connect_clicked(move |_| {
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
    try_group.set_header_suffix(Some(&try_button));
    let heard_row = adw::PreferencesRow::new();
    live.heard.set_margin_top(8);
    live.heard.set_margin_bottom(8);
    live.heard.set_margin_start(12);
    live.heard.set_margin_end(12);
    heard_row.set_child(Some(&live.heard));
    try_group.add(&heard_row);
    page.add(&try_group);
    page
}

// ---------------------------------------------------------------------------------------
// Commands

fn commands_page(live: &Rc<Live>) -> adw::PreferencesPage {
    let page = adw::PreferencesPage::new();
    let group = adw::PreferencesGroup::builder()
        .title("What would it do?")
        .description("Type what you would say; nothing runs (a dry run)")
        .build();
    let phrase = adw::EntryRow::builder()
        .title("Phrase")
        .show_apply_button(true)
        .build();
    let plan = text("");
    plan.set_margin_top(8);
    plan.set_margin_bottom(8);
    plan.set_margin_start(12);
    plan.set_margin_end(12);
    let plan_row = adw::PreferencesRow::new();
    plan_row.set_child(Some(&plan));
    group.add(&phrase);
    group.add(&plan_row);
    page.add(&group);
    let dry_run = button("Dry run");
    group.set_header_suffix(Some(&dry_run));
    let show_plan = {
        let live = live.clone();
        let phrase = phrase.clone();
        move || {
            let utterance = phrase.text().to_string();
            let plan = plan.clone();
            let live = live.clone();
            glib::spawn_future_local(async move {
                let target = live.target.clone();
                let outcome = backend::spawn(async move { target.dry_run(utterance).await }).await;
                plan.set_label(&describe_outcome(outcome));
            });
        }
    };
    let again = show_plan.clone();
    phrase.connect_apply(move |_| again());
    dry_run.connect_clicked(move |_| show_plan());
    page
}

/// The plan of a dry run, one line per step, for people.
fn describe_outcome(
    outcome: Result<Result<utter_ipc::CommandOutcome, String>, tokio::task::JoinError>,
) -> String {
    match outcome {
        Ok(Ok(outcome)) => {
            let mut lines = vec![format!(
                "{} step{}:",
                outcome.results.len(),
                if outcome.results.len() == 1 { "" } else { "s" }
            )];
            for r in &outcome.results {
                lines.push(format!(
                    "{} {} {}{}",
                    if r.ok { "✓" } else { "✗" },
                    r.op,
                    r.args,
                    if r.needs_confirm {
                        " (asks you first)"
                    } else {
                        ""
                    }
                ));
                if !r.detail.is_empty() {
                    lines.push(format!("    {}", r.detail));
                }
                if let Some(e) = &r.error {
                    lines.push(format!("    {}", e.message));
                }
            }
            lines.join("\n")
        }
        Ok(Err(e)) => format!("The runner could not plan it: {e}"),
        Err(e) => e.to_string(),
    }
}

// ---------------------------------------------------------------------------------------
// Safety

fn safety_page(live: &Rc<Live>) -> adw::PreferencesPage {
    let page = adw::PreferencesPage::new();
    page.add(&live.pending);
    let ops = adw::PreferencesGroup::builder()
        .title("Enabled ops")
        .description("Ops that are off by default and switched on in [policy] enabled_ops")
        .build();
    let enabled = match backend::read_config(&live.target.config) {
        Ok(c) if c.policy.enabled_ops.is_empty() => "none".to_owned(),
        Ok(c) => c.policy.enabled_ops.join(", "),
        Err(e) => format!("the config file is invalid: {e}"),
    };
    ops.add(&adw::ActionRow::builder().title(&enabled).build());
    page.add(&ops);
    page
}

fn refresh_pending(live: Rc<Live>) {
    glib::spawn_future_local(async move {
        let target = live.target.clone();
        let pending = backend::spawn(async move { target.pending().await }).await;
        for row in live.pending_rows.borrow_mut().drain(..) {
            live.pending.remove(&row);
        }
        let list = match pending {
            Ok(Ok(list)) => list,
            _ => Vec::new(),
        };
        if list.is_empty() {
            let row = adw::ActionRow::builder()
                .title("Nothing waits for an answer")
                .build();
            live.pending.add(&row);
            live.pending_rows.borrow_mut().push(row);
        }
        for p in list {
            let row = adw::ActionRow::builder()
                .title(&p.request.summary)
                .subtitle(format!("{} {}", p.request.op, p.request.args))
                .subtitle_lines(2)
                .build();
            for (label, approved) in [("Approve", true), ("Deny", false)] {
                let b = button(label);
                if approved {
                    b.add_css_class("suggested-action");
                } else {
                    b.add_css_class("destructive-action");
                }
                let live = live.clone();
                let id = p.id.clone();
                b.connect_clicked(move |_| {
                    let live = live.clone();
                    let id = id.clone();
                    glib::spawn_future_local(async move {
                        let target = live.target.clone();
                        match backend::spawn(async move { target.confirm(id, approved).await })
                            .await
                        {
                            Ok(Ok(())) => {
                                say(&live, if approved { "Approved." } else { "Denied." }, false)
                            }
                            Ok(Err(e)) => say(&live, &e, true),
                            Err(e) => say(&live, &e.to_string(), true),
                        }
                        refresh_pending(live);
                    });
                });
                row.add_suffix(&b);
            }
            live.pending.add(&row);
            live.pending_rows.borrow_mut().push(row);
        }
    });
}

// ---------------------------------------------------------------------------------------
// Events

fn events_page(live: &Rc<Live>) -> gtk::ScrolledWindow {
    let view = gtk::TextView::builder()
        .buffer(&live.events)
        .editable(false)
        .monospace(true)
        .wrap_mode(gtk::WrapMode::WordChar)
        .top_margin(12)
        .left_margin(12)
        .right_margin(12)
        .build();
    gtk::ScrolledWindow::builder().child(&view).build()
}

/// Follow the runner's events for as long as the app runs: each one is appended to the
/// Events page and refreshes what it changes.
fn follow_events(live: Rc<Live>) {
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    backend::spawn(live.target.clone().follow(tx));
    glib::spawn_future_local(async move {
        while let Some(event) = rx.recv().await {
            let Some(event) = event else {
                live.state_row
                    .set_subtitle("not running (retrying every 2 s)");
                continue;
            };
            let line = serde_json::to_string(&event).unwrap_or_default();
            let mut end = live.events.end_iter();
            live.events.insert(&mut end, &format!("{line}\n"));
            // Keep the last 500 lines.
            if live.events.line_count() > 500 {
                let mut start = live.events.start_iter();
                let mut cut = live
                    .events
                    .iter_at_line(live.events.line_count() - 500)
                    .unwrap_or_else(|| live.events.start_iter());
                live.events.delete(&mut start, &mut cut);
            }
            match &event {
                Event::Voice(report) => {
                    live.heard
                        .set_label(&match (&report.transcript, &report.error) {
                            (Some(t), _) if !t.is_empty() => {
                                format!("Heard: “{t}” ({})", report.outcome)
                            }
                            (_, Some(e)) => format!("{}: {e}", report.outcome),
                            _ => report.outcome.clone(),
                        });
                }
                Event::ConfirmationRequested(_) | Event::ConfirmationResolved { .. } => {
                    refresh_pending(live.clone());
                }
                Event::Snapshot { .. }
                | Event::PluginState { .. }
                | Event::State { .. }
                | Event::Reloaded { .. } => refresh_status(live.clone()),
                _ => {}
            }
        }
    });
}
