//! `utter-settings`: Utter's settings app, a client of the runner like the CLI.
//!
//! Pages:
//! - **Status**: the service (start, stop, restart, enable through systemd's user manager),
//!   the runner's state and every plugin with its kind, epoch, status, restarts and the
//!   reason of one that is not running;
//! - **Voice** ([`voice`]): push-to-talk (the portal shortcut, the keyboard monitor, evdev,
//!   their keys, and what the runner says of each: one the desktop does not have is
//!   insensitive with the reason), the capture plugin's state and the microphone with a live
//!   level meter, the speech model in use (a catalog name or a model directory) and the
//!   catalog with its download progress, and a "Try it" button that shows what was heard,
//!   the plan and the timings;
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
//! written. The page tabs are one bar under the header at any width, and every control has
//! an accessible name and action (the settings test drives them through AT-SPI). Colours
//! follow libadwaita's style manager; a `colors.css` beside the config
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

/// Set `what` of `widget`'s accessible properties (its name or description, as a screen
/// reader says it) to `text`.
///
/// gtk4-rs binds `GtkAccessible` only from GTK 4.10 on, and Debian 12 has 4.8; the function
/// this calls, `gtk_accessible_update_property_value`, is GTK's own since 4.0 (in the
/// libgtk-4 that gtk4-sys links), declared here as GTK's header declares it.
fn accessible(widget: &impl IsA<gtk::Widget>, what: gtk::AccessibleProperty, text: &str) {
    use gtk::glib::translate::{IntoGlib, ToGlibPtr};
    unsafe extern "C" {
        fn gtk_accessible_update_property_value(
            accessible: *mut gtk::ffi::GtkWidget,
            n_properties: std::ffi::c_int,
            properties: *mut gtk::ffi::GtkAccessibleProperty,
            values: *const gtk::glib::gobject_ffi::GValue,
        );
    }
    let value = text.to_value();
    let mut properties = [what.into_glib()];
    let widget: &gtk::Widget = widget.as_ref();
    // SAFETY: a widget is a GtkAccessible; one property and one value, both alive for the
    // call (GTK copies the string).
    unsafe {
        gtk_accessible_update_property_value(
            widget.to_glib_none().0,
            1,
            properties.as_mut_ptr(),
            value.to_glib_none().0,
        );
    }
}

/// The accessible name of `widget` (what a screen reader calls it).
fn name(widget: &impl IsA<gtk::Widget>, text: &str) {
    accessible(widget, gtk::AccessibleProperty::Label, text);
}

/// The accessible description of `widget` (what a screen reader adds after its name).
fn describe(widget: &impl IsA<gtk::Widget>, text: &str) {
    accessible(widget, gtk::AccessibleProperty::Description, text);
}

/// A button whose visible label is short ("Use", "Edit") and whose accessible name says what
/// it acts on ("Use tiny.en"), so a screen reader tells one row's button from another's.
fn button_for(label: &str, name: &str) -> gtk::Button {
    let b = button(label);
    crate::name(&b, name);
    b
}

/// `widget`'s descendants, depth first.
fn descendants(widget: &gtk::Widget) -> impl Iterator<Item = gtk::Widget> {
    let mut stack: Vec<gtk::Widget> = widget.first_child().into_iter().collect();
    std::iter::from_fn(move || {
        let next = stack.pop()?;
        stack.extend(next.next_sibling());
        stack.extend(next.first_child());
        Some(next)
    })
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
    /// The runner's last status (`None` until one came, or while the runner is away).
    status: RefCell<Option<utter_ipc::Status>>,
    /// Why there is no status: the runner could not be asked.
    runner_error: RefCell<Option<String>>,
    /// The running router's id (kind `router`), once the status named one.
    router_plugin: RefCell<Option<String>>,
    target: Target,
    message: gtk::Label,
}

fn build(app: &adw::Application, target: Target, first_page: &str) {
    load_palette(&target);
    let stack = adw::ViewStack::new();
    stack.set_vexpand(true);
    // The header names the page shown; the page tabs are one bar that is always there, at
    // any width (a tiled window is often narrow, where a switcher in the header would give
    // way to the title and leave no tabs at all), and one set of tabs on the accessibility
    // bus, each a "page tab" with its name and a click action.
    let title = adw::WindowTitle::new("Utter", "");
    let header = adw::HeaderBar::builder().title_widget(&title).build();
    let tabs = adw::ViewSwitcherBar::builder()
        .stack(&stack)
        .reveal(true)
        .build();
    // The tab list is the bar's switcher, which a screen reader announces with the tabs.
    if let Some(switcher) = descendants(tabs.upcast_ref()).find(|w| w.is::<adw::ViewSwitcher>()) {
        crate::name(&switcher, "Pages");
    }
    let message = text("");
    message.set_margin_start(12);
    message.set_margin_end(12);
    message.set_visible(false);
    let content = gtk::Box::new(gtk::Orientation::Vertical, 0);
    content.append(&header);
    content.append(&tabs);
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
        status: RefCell::new(None),
        runner_error: RefCell::new(None),
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
        &text_page(&live.events, "Events"),
        Some("events"),
        "Events",
        "view-list-symbolic",
    );
    stack.add_titled_with_icon(
        &text_page(&live.logs, "Logs"),
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
    // The page shown is named in the header and in the window's title, which is what a
    // screen reader says of the window (GTK 4.8 tells it nothing else of which page is
    // shown: the hidden pages stay on the accessibility bus).
    let named = window.downgrade();
    let shown = move |stack: &adw::ViewStack| {
        let page = stack
            .visible_child()
            .and_then(|child| stack.page(&child).title())
            .unwrap_or_default();
        title.set_subtitle(&page);
        if let Some(window) = named.upgrade() {
            window.set_title(Some(&format!("Utter Settings: {page}")));
        }
    };
    shown(&stack);
    stack.connect_visible_child_notify(shown);
    window.present();

    follow_events(live.clone());
    refresh_status(live.clone());
    // A plugin's health detail can change without an event of its own (a capture plugin
    // whose PipeWire went away says why in its detail): ask again now and then, so the pages
    // do not go on showing a state that is over.
    {
        let live = live.clone();
        glib::timeout_add_local(STATUS_EVERY, move || {
            refresh_status(live.clone());
            glib::ControlFlow::Continue
        });
    }
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

/// How often the status is asked for besides the runner's events.
const STATUS_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

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

/// Ask the runner for its status and show it: the Status page (its plugin rows made again
/// only when a plugin changed), the router the Commands page asks, and the Voice page when
/// what it shows changed.
fn refresh_status(live: Rc<Live>) {
    glib::spawn_future_local(async move {
        let target = live.target.clone();
        let status = match backend::spawn(async move { target.status().await }).await {
            Ok(status) => status,
            Err(e) => Err(e.to_string()),
        };
        let before = live.status.replace(status.as_ref().ok().cloned());
        live.runner_error.replace(status.as_ref().err().cloned());
        if let Ok(status) = &status {
            let router = status
                .plugins
                .iter()
                .find(|p| p.kind == "router" && p.status.as_str() == "ok")
                .map(|p| p.id.clone());
            if *live.router_plugin.borrow() != router {
                live.router_plugin.replace(router);
                commands::refresh_examples(live.clone());
            }
        }
        voice::status_changed(&live, before.as_ref(), status.as_ref().ok());
        let subtitle = match &status {
            Ok(status) => {
                let mut line = format!(
                    "{} · version {} · config {}",
                    status.state.as_str(),
                    status.version,
                    status.config
                );
                if status.dictation {
                    line.push_str(" · dictating (say “stop dictation” to end it)");
                }
                // What "undo that" would reverse (the runner's journal).
                if let Some(undoable) = &status.undoable {
                    line.push_str(&format!(" · say “undo that” to undo “{undoable}”"));
                }
                line
            }
            Err(e) => format!("not running: {e}"),
        };
        if live.state_row.subtitle().as_deref() != Some(subtitle.as_str()) {
            live.state_row.set_subtitle(&subtitle);
        }
        let plugins = status.as_ref().ok().map(|s| &s.plugins);
        if before.as_ref().map(|s| &s.plugins) == plugins {
            return;
        }
        for row in live.plugin_rows.borrow_mut().drain(..) {
            live.plugins.remove(&row);
        }
        for p in plugins.into_iter().flatten() {
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
                let b = button_for(label, &format!("{label}: {}", p.request.summary));
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

/// A read-only, scrolling page of lines, named `name` on the accessibility bus.
fn text_page(buffer: &gtk::TextBuffer, name: &str) -> gtk::ScrolledWindow {
    let view = gtk::TextView::builder()
        .buffer(buffer)
        .editable(false)
        .monospace(true)
        .wrap_mode(gtk::WrapMode::WordChar)
        .top_margin(12)
        .left_margin(12)
        .right_margin(12)
        .build();
    crate::name(&view, name);
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
                // What was heard so far while the key is held, in place of "Listening…".
                Event::VoicePartial(partial) => {
                    say(&live, &voice::describe_partial(partial), false);
                }
                Event::ConfirmationRequested(_) | Event::ConfirmationResolved { .. } => {
                    refresh_pending(live.clone());
                    refresh_audit(live.clone());
                }
                Event::CommandFinished { .. } => {
                    refresh_audit(live.clone());
                    // The status says what "undo that" would reverse now.
                    refresh_status(live.clone());
                }
                Event::Snapshot { .. }
                | Event::PluginState { .. }
                | Event::State { .. }
                | Event::Dictation { .. }
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
