//! `utter-settings`: Utter's settings app, a client of the runner like the CLI.
//!
//! Pages:
//! - **Status**: the service (start, stop, restart, enable through systemd's user manager),
//!   the runner's state and every plugin with its kind, epoch, status, restarts and the
//!   reason of one that is not running;
//! - **Voice** ([`voice`]): push-to-talk (the portal shortcut, evdev and its key), the
//!   microphone with a live level meter, the speech model with its download progress, and a
//!   "Try it" button that shows what was heard, the plan and the timings;
//! - **Commands** ([`commands`]): a phrase box that dry-runs a command and shows the plan,
//!   "What can I say?", and the application profiles with a shortcut editor;
//! - **Safety**: the confirmations waiting, with Approve and Deny, the enabled ops and the
//!   audit log of recent decisions;
//! - **Events**: the runner's events as they happen;
//! - **Logs**: the runner's own log lines as they happen (INFO and above).
//!
//! It talks to the runner through `utter-ipc` (never by parsing CLI text) and edits
//! `~/.config/utter/config.toml` through the runner's own comment-preserving editor and
//! checker: a change that would make the file invalid is shown with file:line and not
//! written. Colours follow libadwaita's style manager; a `colors.css` beside the config
//! (for example written by a matugen template) is loaded on top when present.

mod backend;
mod commands;
mod profile_edit;
mod voice;

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

/// Utter's settings: the service and its plugins, push-to-talk, the microphone and speech
/// model, what you can say and the profiles, confirmations and the audit log, live events
/// and logs.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The config file to edit (default: $XDG_CONFIG_HOME/utter/config.toml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// The runner's client socket (default: as `utter` finds it).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Open on this page.
    #[arg(long, default_value = "status",
        value_parser = ["status", "voice", "commands", "safety", "events", "logs"])]
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

/// Shared widgets the event stream updates, and what the pages learnt of the runner.
struct Live {
    stack: adw::ViewStack,
    state_row: adw::ActionRow,
    plugins: adw::PreferencesGroup,
    plugin_rows: RefCell<Vec<adw::ActionRow>>,
    pending: adw::PreferencesGroup,
    pending_rows: RefCell<Vec<adw::ActionRow>>,
    audit: adw::PreferencesGroup,
    audit_rows: RefCell<Vec<adw::ActionRow>>,
    voice: voice::VoiceWidgets,
    commands: commands::CommandsWidgets,
    events: gtk::TextBuffer,
    logs: gtk::TextBuffer,
    /// The running capture plugin's id (kind `audio`), once the status named one.
    audio_plugin: RefCell<Option<String>>,
    /// The running router's id (kind `router`), once the status named one.
    router_plugin: RefCell<Option<String>>,
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
        stack: stack.clone(),
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
        audit: adw::PreferencesGroup::builder()
            .title("Recent decisions")
            .description("The audit log: what ran, what was refused and who said yes")
            .build(),
        audit_rows: RefCell::new(Vec::new()),
        voice: voice::VoiceWidgets::new(),
        commands: commands::CommandsWidgets::new(),
        events: gtk::TextBuffer::new(None),
        logs: gtk::TextBuffer::new(None),
        audio_plugin: RefCell::new(None),
        router_plugin: RefCell::new(None),
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
        &voice::page(&live),
        Some("voice"),
        "Voice",
        "audio-input-microphone-symbolic",
    );
    stack.add_titled_with_icon(
        &commands::page(&live),
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
        &text_page(&live.events),
        Some("events"),
        "Events",
        "view-list-symbolic",
    );
    stack.add_titled_with_icon(
        &text_page(&live.logs),
        Some("logs"),
        "Logs",
        "text-x-generic-symbolic",
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
    refresh_pending(live.clone());
    refresh_audit(live);
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
        let running_of = |status: &utter_ipc::Status, kind: &str| {
            status
                .plugins
                .iter()
                .find(|p| p.kind == kind && p.status.as_str() == "ok")
                .map(|p| p.id.clone())
        };
        if let Ok(Ok(status)) = &status {
            let audio = running_of(status, "audio");
            if *live.audio_plugin.borrow() != audio {
                live.audio_plugin.replace(audio);
                voice::refresh_sources(live.clone());
            }
            let router = running_of(status, "router");
            if *live.router_plugin.borrow() != router {
                live.router_plugin.replace(router);
                commands::refresh_examples(live.clone());
            }
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
                if let Some(e) = r.error.as_ref().filter(|e| e.message != r.detail) {
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
    page.add(&live.audit);
    page
}

/// How many of the latest decisions the Safety page lists.
const AUDIT_SHOWN: usize = 30;

/// List the latest decisions again, newest first.
fn refresh_audit(live: Rc<Live>) {
    glib::spawn_future_local(async move {
        let target = live.target.clone();
        let audit = backend::spawn(async move { target.audit().await }).await;
        for row in live.audit_rows.borrow_mut().drain(..) {
            live.audit.remove(&row);
        }
        let entries = match audit {
            Ok(Ok(entries)) => entries,
            Ok(Err(e)) => {
                live.audit
                    .set_description(Some(&format!("The audit log cannot be read: {e}")));
                return;
            }
            Err(_) => return,
        };
        for e in entries.iter().rev().take(AUDIT_SHOWN) {
            let when = glib::DateTime::from_unix_local(i64::try_from(e.time).unwrap_or(0))
                .and_then(|t| t.format("%Y-%m-%d %H:%M:%S"))
                .map(|t| t.to_string())
                .unwrap_or_default();
            let mut about = vec![when, format!("{}", e.provenance)];
            if let Some(by) = &e.by {
                about.push(format!("by {by}"));
            }
            if let Some(code) = e.code {
                about.push(format!("code {code}"));
            }
            if !e.utterance.is_empty() {
                about.push(format!("“{}”", e.utterance));
            }
            let row = adw::ActionRow::builder()
                .title(format!("{}: {} {}", e.decision, e.op, e.args))
                .subtitle(about.join(" · "))
                .subtitle_lines(2)
                .build();
            live.audit.add(&row);
            live.audit_rows.borrow_mut().push(row);
        }
    });
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
// Events and logs

/// A read-only, scrolling page of lines.
fn text_page(buffer: &gtk::TextBuffer) -> gtk::ScrolledWindow {
    let view = gtk::TextView::builder()
        .buffer(buffer)
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
        let mut shown = utter_ipc::LogCursor::default();
        while let Some(event) = rx.recv().await {
            let Some(event) = event else {
                live.state_row
                    .set_subtitle("not running (retrying every 2 s)");
                continue;
            };
            if let Event::Log(line) = &event {
                // A new subscription replays the kept lines; those shown stay out.
                if !shown.take(line) {
                    continue;
                }
                let when = glib::DateTime::from_unix_local(
                    i64::try_from(line.time_ms / 1000).unwrap_or(0),
                )
                .and_then(|t| t.format("%H:%M:%S"))
                .map(|t| t.to_string())
                .unwrap_or_default();
                append_line(&live.logs, &format!("{when} {}", line.display()));
                continue;
            }
            append_line(
                &live.events,
                &serde_json::to_string(&event).unwrap_or_default(),
            );
            match &event {
                Event::Voice(report) => {
                    live.voice.heard.set_label(&voice::describe_voice(report));
                    // "Listening…" is over; the report is under Try it.
                    say(&live, "", false);
                    refresh_audit(live.clone());
                }
                Event::ConfirmationRequested(_) | Event::ConfirmationResolved { .. } => {
                    refresh_pending(live.clone());
                    refresh_audit(live.clone());
                }
                Event::CommandFinished { .. } => refresh_audit(live.clone()),
                Event::Snapshot { .. }
                | Event::PluginState { .. }
                | Event::State { .. }
                | Event::Reloaded { .. } => refresh_status(live.clone()),
                _ => {}
            }
        }
    });
}

/// The most lines the Events and Logs pages keep.
const LINES_KEPT: i32 = 500;

/// Append `line` to `buffer`, keeping its last [`LINES_KEPT`] lines.
fn append_line(buffer: &gtk::TextBuffer, line: &str) {
    let mut end = buffer.end_iter();
    buffer.insert(&mut end, &format!("{line}\n"));
    if buffer.line_count() > LINES_KEPT {
        let mut start = buffer.start_iter();
        let mut cut = buffer
            .iter_at_line(buffer.line_count() - LINES_KEPT)
            .unwrap_or_else(|| buffer.start_iter());
        buffer.delete(&mut start, &mut cut);
    }
}
