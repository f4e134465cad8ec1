//! The application family: focus, start or close the application or window a name says
//! ("switch to firefox", "the terminal", "close spotify", "launch gimp"), from installed
//! desktop entries, the profiles and the context's windows. Window titles are never read.

use crate::apps::{AppEntry, app_forms};
use crate::context::{Context, Likeness};
use crate::phrases::Curated;
use crate::plan::{APP_VERBS, AppLookup, Matched, Sources};
use crate::profiles::Kind;
use crate::text::{strip_word_prefix, strip_word_suffix};
use utter_protocol::serde_json::{Value, json};

/// The names a spoken target may be: as said, and without a trailing "window"/"windows"
/// ("the foot window" is foot).
pub(crate) fn target_names(target: &str) -> Vec<&str> {
    // "bring discord to the front": where it goes is no part of the name.
    let target = ["to the front", "to the foreground", "into view", "forward"]
        .iter()
        .find_map(|place| strip_word_suffix(target, place).filter(|r| !r.is_empty()))
        .unwrap_or(target);
    let mut names = vec![target];
    for suffix in ["windows", "window"] {
        if let Some(rest) = strip_word_suffix(target, suffix).filter(|r| !r.is_empty()) {
            names.push(rest);
            break;
        }
    }
    names
}

/// The app_id of a context window that `target` names, if there is a context. A likelier
/// match of any form of the name beats a looser one of another ([`Likeness`]): "xx" focuses
/// the `xx` window before the `X-X` one, whichever comes first.
fn window_named<'a>(target: &str, context: Option<&'a Context>) -> Option<&'a str> {
    let context = context?;
    let forms: Vec<String> = target_names(target)
        .into_iter()
        .flat_map(app_forms)
        .collect();
    Likeness::ALL.into_iter().find_map(|likeness| {
        forms
            .iter()
            .find_map(|form| context.window_app_as(form, likeness))
    })
}

/// True when `text` is a focus or close phrase ("switch to foot", "close foot"), whose
/// target may be a window of the context.
pub fn names_a_window(text: &str, curated: &Curated) -> bool {
    curated
        .focus_verbs
        .iter()
        .chain(&curated.close_verbs)
        .any(|verb| strip_word_prefix(text, verb).is_some_and(|rest| !rest.is_empty()))
}

/// The installed application `target` names.
fn app_named(target: &str, apps: &dyn AppLookup) -> Option<AppEntry> {
    target_names(target)
        .into_iter()
        .find_map(|name| apps.find(name))
}

/// "check my email", "check the weather": "check" (or "check on") brings up the installed
/// application the rest names, by its name or its kind; nothing else ("check" is no verb of
/// opening a site or of a guess at a name).
pub(crate) fn check(text: &str, sources: &Sources<'_>) -> Option<Matched> {
    // (The name's lookup and the kind's drop "my" and "the" themselves.)
    let target = strip_word_prefix(text, "check on")
        .or_else(|| strip_word_prefix(text, "check"))
        .filter(|t| !t.is_empty())?;
    if let Some(app) = app_named(target, sources.apps) {
        return Some(switch_step(&app, sources));
    }
    match of_kind(target, sources)? {
        OfKind::Window(app_id) => Some(focus_window(&app_id)),
        OfKind::Installed(app) => Some(switch_step(&app, sources)),
    }
}

/// Rule 5: focus or start the application `target` names.
pub(crate) fn switch_to(target: &str, sources: &Sources<'_>) -> Option<Matched> {
    // "the terminal", "my browser": the open window of that kind comes before the installed
    // application whose description says it (kitty open, foot installed: kitty).
    if target_names(target)
        .into_iter()
        .any(|n| kind_named(n).is_some())
        && let Some(app_id) = profile_window(target, sources)
    {
        return Some(focus_window(app_id));
    }
    if let Some(app) = app_named(target, sources.apps) {
        return Some(switch_step(&app, sources));
    }
    if let Some(app_id) =
        window_named(target, sources.context).or_else(|| profile_window(target, sources))
    {
        return Some(focus_window(app_id));
    }
    match of_kind(target, sources) {
        Some(OfKind::Window(app_id)) => return Some(focus_window(&app_id)),
        Some(OfKind::Installed(app)) => return Some(switch_step(&app, sources)),
        None => {}
    }
    profile_launch(target, sources)
}

/// What a kind of application said as such names ([`of_kind`]).
enum OfKind {
    /// The `app_id` of an open window of that kind.
    Window(String),
    /// The one installed application of that kind.
    Installed(Box<AppEntry>),
}

/// "the file manager", "my email client", "a video player": the application of that kind,
/// by the desktop entry `Categories` or the desktop ids that `data/commands.toml` `[kinds]`
/// gives the words.
/// An open window of an application of the kind comes first; else the one installed
/// application of the kind; of several, the person's default for the kind's MIME type
/// (`mimeapps.list`), else none is guessed.
fn of_kind(target: &str, sources: &Sources<'_>) -> Option<OfKind> {
    let installed = installed_of_kind(target, sources)?;
    let open = sources.context.and_then(|c| {
        c.app_ids
            .iter()
            .find(|id| installed.iter().any(|a| a.has_app_id(id)))
    });
    if let Some(app_id) = open {
        return Some(OfKind::Window(app_id.clone()));
    }
    match installed.as_slice() {
        [one] => Some(OfKind::Installed(Box::new((*one).clone()))),
        // Several installed: the person's default for the kind's MIME type, if it is one.
        _ => {
            let mime = kind_of(target, sources)?.mime.as_deref()?;
            let chosen = sources.apps.defaults_for(mime).into_iter().find_map(|id| {
                installed
                    .iter()
                    .find(|a| a.id.eq_ignore_ascii_case(&id))
                    .copied()
            })?;
            Some(OfKind::Installed(Box::new(chosen.clone())))
        }
    }
}

/// The `app_id` of an open window of the kind `target` says with "the" ("the pdf", "the
/// browser"), when one is open.
pub(crate) fn open_window_of_kind(target: &str, sources: &Sources<'_>) -> Option<String> {
    target.strip_prefix("the ")?;
    match of_kind(target, sources)? {
        OfKind::Window(app_id) => Some(app_id),
        OfKind::Installed(_) => None,
    }
}

/// Whether `target` says a kind of application ("the document", "a browser", "the
/// terminal") rather than naming one.
pub(crate) fn says_a_kind(target: &str, sources: &Sources<'_>) -> bool {
    kind_of(target, sources).is_some()
        || target_names(target)
            .into_iter()
            .any(|n| kind_named(n).is_some())
}

/// The `[kinds]` entry `target` says ("the browser", "a file manager", "my email").
fn kind_of<'s>(target: &str, sources: &Sources<'s>) -> Option<&'s crate::commands::AppKind> {
    let spoken = ["the ", "my ", "a ", "an "]
        .iter()
        .find_map(|a| target.strip_prefix(a))
        .unwrap_or(target);
    let names = target_names(spoken);
    names
        .iter()
        .find_map(|name| sources.words.kinds.get(*name))
        .or_else(|| {
            // "the music program", "the photo application": the head noun people use for
            // any program, where `[kinds]` says "app" (or nothing).
            names.iter().find_map(|name| {
                let rest = [
                    "program",
                    "programme",
                    "application",
                    "software",
                    "tool",
                    "thing",
                ]
                .iter()
                .find_map(|head| strip_word_suffix(name, head))
                .filter(|rest| !rest.is_empty())?;
                sources
                    .words
                    .kinds
                    .get(&format!("{rest} app"))
                    .or_else(|| sources.words.kinds.get(rest))
            })
        })
}

/// The installed applications of the kind `target` says, in the scanner's order; `None`
/// when `target` says no kind.
///
/// An application's variants count as the application: an entry whose name extends another
/// installed entry's name by words and whose program extends that entry's program ("Foot
/// Server" running `foot --server`, "Foot Client" running `footclient`, beside "Foot"
/// running `foot`) is left out when that entry is of the kind too, so "open a terminal"
/// opens Foot instead of asking which of three.
fn installed_of_kind<'s>(target: &str, sources: &Sources<'s>) -> Option<Vec<&'s AppEntry>> {
    let kind = kind_of(target, sources)?;
    let all: Vec<&AppEntry> = sources.apps.all().iter().filter(|a| kind.has(a)).collect();
    let kept = all
        .iter()
        .filter(|a| !all.iter().any(|base| is_variant_of(a, base)))
        .copied()
        .collect();
    Some(kept)
}

/// Whether `entry` is a variant of `base`: its name is `base`'s name and more words, and its
/// program's file name begins with `base`'s (both known).
fn is_variant_of(entry: &AppEntry, base: &AppEntry) -> bool {
    let (Some(program), Some(base_program)) = (&entry.exec, &base.exec) else {
        return false;
    };
    let name = entry.name.to_lowercase();
    let base_name = base.name.to_lowercase();
    name.strip_prefix(&base_name)
        .is_some_and(|rest| rest.starts_with(' ') && !rest.trim().is_empty())
        && program.starts_with(base_program.as_str())
}

/// "open the browser" with Vivaldi and Chromium installed, no window of either open and no
/// default browser set: the names of the installed applications of the kind, to ask which
/// ([`crate::explain::explained`]); `None` when [`of_kind`] decides or no kind is said.
pub(crate) fn kind_choices(target: &str, sources: &Sources<'_>) -> Option<Vec<String>> {
    if of_kind(target, sources).is_some() {
        return None;
    }
    let installed = installed_of_kind(target, sources)?;
    (installed.len() > 1).then(|| installed.iter().map(|a| a.name.clone()).collect())
}

/// The step that focuses `app`'s window or starts it.
/// The step that brings `app` up: its open window's `app_id` focused when the context has
/// a window of it under an `app_id` other than its desktop id (Zoom's `zoom` for
/// `us.zoom.Zoom`: the compositor would not know the two are one), else focus-or-launch.
fn switch_step(app: &AppEntry, sources: &Sources<'_>) -> Matched {
    let open = sources.context.and_then(|c| {
        c.app_ids
            .iter()
            .find(|id| app.has_app_id(id) && !id.eq_ignore_ascii_case(&app.id))
    });
    match open {
        Some(app_id) => focus_window(app_id),
        None => ensure_step(app),
    }
}

/// The step that brings up `app`: its window focused, or the application started
/// (`ensure_app {app, desktop_id, wm_class?}`).
pub(crate) fn ensure_step(app: &AppEntry) -> Matched {
    let mut args = json!({
        "app": app.id,
        "desktop_id": format!("{}.desktop", app.id),
    });
    if let Some(wm_class) = &app.wm_class {
        args["wm_class"] = Value::String(wm_class.clone());
    }
    Matched {
        rule: "ensure_app",
        op: "ensure_app",
        message: format!("switch to {} ({})", app.name, app.id),
        args,
        confirm: false,
    }
}

/// The step that focuses an open window of `app_id`.
pub(crate) fn focus_window(app_id: &str) -> Matched {
    Matched {
        rule: "focus_app",
        op: "focus_app",
        message: format!("focus the {app_id} window"),
        args: json!({"app": app_id}),
        confirm: false,
    }
}

/// Focus or start the application of the profile `target` names ("firefox", "the vs code
/// app"), through its `launch` argv, when no desktop entry is installed for it; or, when
/// none is and a site is called so where the web is meant, open that site.
fn profile_launch(target: &str, sources: &Sources<'_>) -> Option<Matched> {
    let forms = app_forms(target);
    let profile = target_names(target)
        .into_iter()
        .chain(forms.iter().map(String::as_str))
        .find_map(|name| sources.profiles.named(name))?;
    // An installed entry of the profile's application (its id or StartupWMClass is one of
    // the profile's app_ids): launched as any installed application is.
    if let Some(app) = sources.apps.all().iter().find(|a| {
        profile.has_app_id(&a.id) || a.wm_class.as_deref().is_some_and(|w| profile.has_app_id(w))
    }) {
        return Some(start_step(app, target, sources));
    }
    let profile = Some(profile).filter(|p| !p.launch.is_empty())?;
    // Not installed, and a site of the catalog is called so where the web is meant ("open
    // spotify" with no Spotify application: Spotify Web's `web_names`): the site opens, as
    // it always can, rather than a program that is not there ("switch to spotify": the tab
    // showing it, if one does).
    if let Some(site) = target_names(target)
        .into_iter()
        .chain(forms.iter().map(String::as_str))
        .find_map(|name| sources.catalog.lookup_web(name))
    {
        return Some(crate::web::open_site(site, false));
    }
    let app = profile.app_ids.first().unwrap_or(&profile.id);
    Some(Matched {
        rule: "ensure_app",
        op: "ensure_app",
        message: format!("open {} ({})", profile.name, profile.launch.join(" ")),
        args: json!({"app": app, "argv": profile.launch}),
        confirm: false,
    })
}

/// The `app_id` of an open window of the application profile `target` names ("vs code" →
/// `code`).
fn profile_window<'a>(target: &str, sources: &Sources<'a>) -> Option<&'a str> {
    let context = sources.context?;
    target_names(target).into_iter().find_map(|name| {
        if let Some(profile) = sources.profiles.named(name) {
            return context
                .app_ids
                .iter()
                .find(|id| profile.has_app_id(id))
                .map(String::as_str);
        }
        // "the terminal", "my browser", "the editor": the first open window (the focused
        // one first) whose profile is of that kind.
        let kind = kind_named(name)?;
        context
            .app_ids
            .iter()
            .find(|id| sources.profile_of(id).is_some_and(|p| p.kind == kind))
            .map(String::as_str)
    })
}

/// The kind of application a common noun names: "terminal", "browser", "code editor".
fn kind_named(name: &str) -> Option<Kind> {
    let name = ["the ", "my ", "a "]
        .iter()
        .find_map(|a| name.strip_prefix(a))
        .unwrap_or(name);
    match name {
        "terminal" | "terminal emulator" | "console" | "shell" => Some(Kind::Terminal),
        "browser" | "web browser" => Some(Kind::Browser),
        "editor" | "code editor" | "ide" => Some(Kind::Editor),
        _ => None,
    }
}

/// Rule 6: close the application `target` names; an open window first, then an open window
/// of the kind it names ("close the calculator"), then the installed application.
pub(crate) fn close(target: &str, sources: &Sources<'_>) -> Option<Matched> {
    if let Some(app_id) =
        window_named(target, sources.context).or_else(|| profile_window(target, sources))
    {
        return Some(close_window(app_id));
    }
    let Some(app) = app_named(target, sources.apps) else {
        return match of_kind(target, sources)? {
            OfKind::Window(app_id) => Some(close_window(&app_id)),
            OfKind::Installed(_) => None,
        };
    };
    // Its open window by the app_id the compositor knows it by (`transmission-gtk` for the
    // entry `com.transmissionbt.Transmission`), else the entry's id.
    let open = sources
        .context
        .and_then(|c| c.app_ids.iter().find(|id| app.has_app_id(id)));
    Some(Matched {
        message: format!("close {} ({})", app.name, app.id),
        ..close_window(open.map_or(app.id.as_str(), String::as_str))
    })
}

/// The step that closes the window of `app_id`.
fn close_window(app_id: &str) -> Matched {
    Matched {
        rule: "close_app",
        op: "close_app",
        message: format!("close the {app_id} window"),
        args: json!({"app": app_id}),
        confirm: false,
    }
}

/// Rule 7: start the application an opening verb names ("launch gimp"); "open X" with a
/// window of X open focuses it instead (focus-or-launch), and a profile's application with
/// no desktop entry starts through the profile's own argv.
pub(crate) fn launch(text: &str, sources: &Sources<'_>) -> Option<Matched> {
    if let Some(m) = another(text, sources) {
        return Some(m);
    }
    for verb in APP_VERBS {
        let Some(target) = strip_word_prefix(text, verb).filter(|t| !t.is_empty()) else {
            continue;
        };
        // "open the terminal" with kitty open: that window, not a new foot ("open a
        // terminal" asks for one).
        if verb.starts_with("open")
            && (target.starts_with("the ") || target.starts_with("my "))
            && target_names(target).iter().any(|n| kind_named(n).is_some())
            && let Some(app_id) = profile_window(target, sources)
        {
            return Some(focus_window(app_id));
        }
        if let Some(app) = sources.apps.find(target) {
            // "open firefox" with a Firefox window open focuses it (focus-or-launch).
            let open = verb.starts_with("open")
                && sources.context.is_some_and(|c| {
                    c.app_ids.iter().any(|id| {
                        app.has_app_id(id)
                            || sources
                                .profiles
                                .for_app_id(id)
                                .is_some_and(|p| p.is_named(target))
                    })
                });
            if open {
                return switch_to(target, sources);
            }
            return Some(start_step(&app, target, sources));
        }
        // "open the file manager": the application of that kind. A kind's word that also
        // names a profile ("open my files": GNOME Files) is the person's installed
        // application of the kind before that profile's program, which is not installed.
        let kind = || match of_kind(target, sources) {
            Some(OfKind::Window(app_id)) if verb.starts_with("open") => Some(focus_window(&app_id)),
            Some(OfKind::Installed(app)) => Some(start_step(&app, target, sources)),
            _ => None,
        };
        if let Some(matched) = kind() {
            return Some(matched);
        }
        // A profile's application without a desktop entry: its own launch argv.
        if let Some(matched) = profile_launch(target, sources) {
            return Some(matched);
        }
    }
    None
}

/// The step for "open X" / "start X" with no window of X in the context: focus-or-launch
/// (`ensure_app`) where a compositor backend can look for a window when the step runs, so
/// that saying it twice, or a window that opened after the context was taken, focuses
/// instead of starting a second copy. "a"/"an" before a kind ("open a terminal") asks for a
/// new one, and with no compositor in the context (GNOME, KDE) only `launch_app` can act.
fn start_step(app: &AppEntry, target: &str, sources: &Sources<'_>) -> Matched {
    let asks_for_new = target.starts_with("a ") || target.starts_with("an ");
    if asks_for_new || !Context::has_window_ipc(sources.context) {
        return launch_step(app);
    }
    let mut step = ensure_step(app);
    step.message = format!("open {} ({})", app.name, app.id);
    step
}

/// Words that ask for one more window of the focused application.
const ANOTHER_OF_THESE: &[&str] = &[
    "another one of these",
    "one more of these",
    "a new one of these",
    "another window of this",
    "another window of this app",
    "another instance of this",
    "another instance of this app",
    "another copy of this app",
];

/// "launch a new kitty window", "open another firefox", "start another instance of gimp",
/// "another one of these": a new window of an installed application (the focused one's for
/// "these"/"this"), launched even when one is open, since another was asked for.
fn another(text: &str, sources: &Sources<'_>) -> Option<Matched> {
    let rest = APP_VERBS
        .iter()
        .find_map(|verb| strip_word_prefix(text, verb).filter(|r| !r.is_empty()))
        .unwrap_or(text);
    let app = if ANOTHER_OF_THESE.contains(&rest) {
        let focused = sources.context?.focused_app_id.as_deref()?;
        sources
            .apps
            .all()
            .iter()
            .find(|a| a.has_app_id(focused))?
            .clone()
    } else {
        let (lead, name) = [
            "a new",
            "another new",
            "another",
            "one more",
            "a second",
            "new",
        ]
        .iter()
        .find_map(|lead| Some((*lead, strip_word_prefix(rest, lead)?)))?;
        let name = ["instance of", "copy of", "window of"]
            .iter()
            .find_map(|lead| strip_word_prefix(name, lead))
            .unwrap_or(name);
        let tail = ["window", "instance"]
            .iter()
            .find_map(|tail| strip_word_suffix(name, tail));
        // "new firefox window", but "new tab" and "new file" are the focused app's.
        if lead == "new" && tail.is_none() {
            return None;
        }
        let said_window = tail.is_some();
        let name = tail.unwrap_or(name).trim();
        if name.is_empty() {
            return None;
        }
        // "a new terminal": a new window of the kind's application (the open one's); with
        // one of the kind focused, "a new browser window" is its own new-window key.
        let focused_is = |app: &AppEntry| {
            sources
                .context
                .and_then(|c| c.focused_app_id.as_deref())
                .is_some_and(|id| app.has_app_id(id))
        };
        match sources.apps.find(name) {
            Some(app) => app,
            None if said_window
                && installed_of_kind(name, sources)?
                    .into_iter()
                    .any(focused_is) =>
            {
                return None;
            }
            None => match of_kind(name, sources) {
                Some(OfKind::Installed(app)) => *app,
                Some(OfKind::Window(app_id)) => sources
                    .apps
                    .all()
                    .iter()
                    .find(|a| a.has_app_id(&app_id))?
                    .clone(),
                // A profile's application without a desktop entry: its launch argv, spawned
                // by the compositor (a new window, as asked).
                None => {
                    let profile = sources
                        .profiles
                        .named(name)
                        .filter(|p| !p.launch.is_empty())?;
                    return Some(Matched {
                        rule: "launch_app",
                        op: "niri",
                        message: format!(
                            "launch another {} ({})",
                            profile.name,
                            profile.launch.join(" ")
                        ),
                        args: json!({"command": "spawn", "args": profile.launch}),
                        confirm: false,
                    });
                }
            },
        }
    };
    let mut step = launch_step(&app);
    step.message = format!("launch another {} ({})", app.name, app.id);
    Some(step)
}

/// The step that starts `app` (a new window even when one is open).
fn launch_step(app: &AppEntry) -> Matched {
    Matched {
        rule: "launch_app",
        op: "launch_app",
        message: format!("launch {} ({})", app.name, app.id),
        args: json!({"app_id": app.id, "name": app.name}),
        confirm: false,
    }
}
