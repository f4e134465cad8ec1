//! The Commands page: a phrase box that dry-runs a command and shows the plan, "What can I
//! say?" (the router's `router.examples`: its kinds of command with examples, each one a
//! button that dry-runs it), and the application profiles with a shortcut editor
//! ([`crate::profile_edit`]).

use std::cell::RefCell;
use std::rc::Rc;

use adw::prelude::*;
use gtk::glib;
use serde_json::{Value, json};

use crate::profile_edit::{self, Editable};
use crate::{Live, backend, button, button_for, describe_outcome, say, text};

/// The page's widgets the rest of the app updates.
pub struct CommandsWidgets {
    phrase: adw::EntryRow,
    plan: gtk::Label,
    /// "What can I say?", one expander per kind (rebuilt by [`refresh_examples`]).
    examples: adw::PreferencesGroup,
    example_rows: RefCell<Vec<adw::ExpanderRow>>,
    profiles: adw::PreferencesGroup,
    profile_rows: RefCell<Vec<adw::ActionRow>>,
    editor: adw::PreferencesGroup,
    editor_rows: RefCell<Vec<gtk::Widget>>,
    editing: RefCell<Option<Editable>>,
}

impl CommandsWidgets {
    /// The widgets, empty until the page is built.
    pub fn new() -> CommandsWidgets {
        CommandsWidgets {
            phrase: adw::EntryRow::builder()
                .title("Phrase")
                .show_apply_button(true)
                .build(),
            plan: text(""),
            examples: adw::PreferencesGroup::builder()
                .title("What can I say?")
                .description("The router's kinds of command; press an example to see its plan")
                .build(),
            example_rows: RefCell::new(Vec::new()),
            profiles: adw::PreferencesGroup::builder()
                .title("Application profiles")
                .description(
                    "What \"new tab\" or \"copy\" presses in each application; yours are in $XDG_CONFIG_HOME/utter/profiles",
                )
                .build(),
            profile_rows: RefCell::new(Vec::new()),
            editor: adw::PreferencesGroup::builder().visible(false).build(),
            editor_rows: RefCell::new(Vec::new()),
            editing: RefCell::new(None),
        }
    }
}

/// The Commands page.
pub fn page(live: &Rc<Live>) -> adw::PreferencesPage {
    let page = adw::PreferencesPage::new();
    let w = &live.commands;
    let group = adw::PreferencesGroup::builder()
        .title("What would it do?")
        .description("Type what you would say; nothing runs (a dry run)")
        .build();
    let plan = &w.plan;
    plan.set_margin_top(8);
    plan.set_margin_bottom(8);
    plan.set_margin_start(12);
    plan.set_margin_end(12);
    let plan_row = adw::PreferencesRow::new();
    plan_row.set_child(Some(plan));
    group.add(&w.phrase);
    group.add(&plan_row);
    let dry_run = button("Dry run");
    group.set_header_suffix(Some(&dry_run));
    page.add(&group);
    {
        let live = live.clone();
        w.phrase.connect_apply(move |_| show_plan(&live));
    }
    {
        let live = live.clone();
        dry_run.connect_clicked(move |_| show_plan(&live));
    }
    page.add(&w.examples);
    page.add(&w.profiles);
    page.add(&w.editor);
    refresh_profiles(live);
    page
}

/// Dry-run what the phrase box says and show the plan.
fn show_plan(live: &Rc<Live>) {
    let utterance = live.commands.phrase.text().to_string();
    let live = live.clone();
    glib::spawn_future_local(async move {
        let target = live.target.clone();
        let outcome = backend::spawn(async move { target.dry_run(utterance).await }).await;
        live.commands.plan.set_label(&describe_outcome(outcome));
    });
}

// ---------------------------------------------------------------------------------------
// What can I say?

/// Ask the router for its examples again (when it started or changed).
pub fn refresh_examples(live: Rc<Live>) {
    glib::spawn_future_local(async move {
        let w = &live.commands;
        for row in w.example_rows.borrow_mut().drain(..) {
            w.examples.remove(&row);
        }
        let Some(router) = live.router_plugin.borrow().clone() else {
            w.examples
                .set_description(Some("No router is running, so there is nothing to ask."));
            return;
        };
        let target = live.target.clone();
        let answer =
            backend::spawn(
                async move { target.invoke(router, "router.examples", json!({})).await },
            )
            .await;
        let categories = match answer {
            Ok(Ok(answer)) => answer["categories"].as_array().cloned().unwrap_or_default(),
            Ok(Err(e)) => {
                w.examples
                    .set_description(Some(&format!("This router has no examples to show ({e}).")));
                return;
            }
            Err(e) => {
                say(&live, &e.to_string(), true);
                return;
            }
        };
        w.examples.set_description(Some(
            "The router's kinds of command; press an example to see its plan",
        ));
        for (i, category) in categories.iter().take(64).enumerate() {
            let row = example_row(&live, category);
            // The first kind open, to show what the rows hold.
            row.set_expanded(i == 0);
            w.examples.add(&row);
            w.example_rows.borrow_mut().push(row);
        }
    });
}

/// One kind of command: its name and what it does, and its examples as buttons.
fn example_row(live: &Rc<Live>, category: &Value) -> adw::ExpanderRow {
    let field = |v: &Value, k: &str| v[k].as_str().unwrap_or_default().to_owned();
    let row = adw::ExpanderRow::builder()
        .title(field(category, "name"))
        .subtitle(field(category, "about"))
        .build();
    let examples = category["examples"].as_array().cloned().unwrap_or_default();
    for example in examples.iter().take(32) {
        let say_it = field(example, "say");
        let title = match example["focused"].as_str() {
            Some(app) => format!("“{say_it}” in {app}"),
            None => format!("“{say_it}”"),
        };
        let line = adw::ActionRow::builder().title(&title).build();
        let try_it = button_for("Show the plan", &format!("Show the plan of {title}"));
        {
            let live = live.clone();
            try_it.connect_clicked(move |_| {
                live.commands.phrase.set_text(&say_it);
                show_plan(&live);
            });
        }
        line.add_suffix(&try_it);
        row.add_row(&line);
    }
    row
}

// ---------------------------------------------------------------------------------------
// Profiles

/// List the profiles again, each with Edit; files that did not load are listed with their
/// `file:line:column`.
pub fn refresh_profiles(live: &Rc<Live>) {
    let w = &live.commands;
    for row in w.profile_rows.borrow_mut().drain(..) {
        w.profiles.remove(&row);
    }
    let dir = utter_rules::profiles::default_user_dir();
    let loaded = profile_edit::list(dir.as_deref());
    for problem in &loaded.problems {
        let row = adw::ActionRow::builder()
            .title("A profile file was skipped")
            .subtitle(problem)
            .subtitle_lines(3)
            .build();
        row.add_css_class("error");
        w.profiles.add(&row);
        w.profile_rows.borrow_mut().push(row);
    }
    for p in loaded.iter() {
        let origin = if p.source.ends_with("(built in)") {
            "built in"
        } else {
            "yours"
        };
        let row = adw::ActionRow::builder()
            .title(&p.name)
            .subtitle(format!(
                "{} · {} shortcut{} · {} command{} · {origin}",
                p.kind.as_str(),
                p.shortcuts.len(),
                if p.shortcuts.len() == 1 { "" } else { "s" },
                p.commands.len(),
                if p.commands.len() == 1 { "" } else { "s" },
            ))
            .build();
        if let Some(dir) = dir.clone() {
            let edit = button_for("Edit", &format!("Edit the shortcuts of {}", p.name));
            let live = live.clone();
            let id = p.id.clone();
            edit.connect_clicked(move |_| match profile_edit::open(&id, &dir) {
                Ok(editable) => show_editor(&live, editable),
                Err(e) => say(&live, &e, true),
            });
            row.add_suffix(&edit);
        }
        w.profiles.add(&row);
        w.profile_rows.borrow_mut().push(row);
    }
}

/// Show the shortcut editor for `editable`: each shortcut with Remove, and a name and keys
/// to add one.
fn show_editor(live: &Rc<Live>, editable: Editable) {
    let w = &live.commands;
    for row in w.editor_rows.borrow_mut().drain(..) {
        w.editor.remove(&row);
    }
    let profile = match editable.profile() {
        Ok(p) => p,
        Err(e) => {
            say(
                live,
                &format!("This profile cannot be edited here:\n{e}"),
                true,
            );
            return;
        }
    };
    w.editor
        .set_title(&format!("Shortcuts of {}", profile.name));
    w.editor.set_description(Some(&format!(
        "Saved to {}{}",
        editable.path.display(),
        if editable.from_builtin {
            " (a copy of the built-in profile, made when you first save)"
        } else {
            ""
        }
    )));
    let mut rows: Vec<gtk::Widget> = Vec::new();
    for (name, chord) in &profile.shortcuts {
        let row = adw::ActionRow::builder()
            .title(name)
            .subtitle(chord)
            .build();
        let remove = button_for("Remove", &format!("Remove the shortcut {name}"));
        remove.add_css_class("destructive-action");
        let live_ = live.clone();
        let name = name.clone();
        remove.connect_clicked(move |_| edit_shortcut(&live_, &name, None));
        row.add_suffix(&remove);
        rows.push(row.upcast());
    }
    let name = adw::EntryRow::builder().title("Shortcut name").build();
    let keys = adw::EntryRow::builder().title("Keys").build();
    let add = button("Add shortcut");
    add.add_css_class("suggested-action");
    {
        let live = live.clone();
        let (name, keys) = (name.clone(), keys.clone());
        add.connect_clicked(move |_| {
            edit_shortcut(&live, name.text().as_str(), Some(keys.text().as_str()));
        });
    }
    let close = button_for("Close", "Close the editor");
    {
        let live = live.clone();
        close.connect_clicked(move |_| {
            live.commands.editor.set_visible(false);
            live.commands.editing.replace(None);
        });
    }
    let actions = gtk::Box::new(gtk::Orientation::Horizontal, 6);
    actions.append(&add);
    actions.append(&close);
    w.editor.set_header_suffix(Some(&actions));
    rows.push(name.upcast());
    rows.push(keys.upcast());
    for row in &rows {
        w.editor.add(row);
    }
    w.editor_rows.replace(rows);
    w.editing.replace(Some(editable));
    w.editor.set_visible(true);
}

/// Set (or with `None` remove) one shortcut of the profile being edited, check it and save
/// it; a refusal says where and writes nothing.
fn edit_shortcut(live: &Rc<Live>, name: &str, chord: Option<&str>) {
    let Some(mut editable) = live.commands.editing.borrow().clone() else {
        return;
    };
    let saved = editable
        .with_shortcut(name, chord)
        .and_then(|text| editable.save(text));
    match saved {
        Ok(()) => {
            say(
                live,
                &format!(
                    "Saved {}; the router reads it again by itself.",
                    editable.path.display()
                ),
                false,
            );
            show_editor(live, editable);
            refresh_profiles(live);
        }
        Err(e) => say(live, &format!("Not saved:\n{e}"), true),
    }
}
