//! Command corpora: utterances in a desktop context with the steps a router should plan,
//! scored per category. The project's own corpus is `tests/corpus/commands.toml`; `utter
//! eval FILE` runs any file of this form against the configured router, and the rules
//! plugin's tests run the project's against this router.
//!
//! ```toml
//! [[case]]
//! category = "browser"          # any name; the report has one row per category
//! say = "open a new tab"
//! focused = "firefox"           # the focused window's app_id (optional)
//! windows = ["foot"]            # more open windows' app_ids (optional)
//! compositor = "niri"           # the context's compositor (default niri)
//! expect = [{ op = "key", args = { chord = "ctrl+t" } }]
//! # expect = [] (or no expect) is a negative: nothing may be planned;
//! # escalate = "needs_browser" then also checks the plan's escalate.reason.
//! ```
//!
//! A plan is right when it has exactly the expected steps in order, each with the expected
//! op and at least the expected args (equal values; args the case does not name may be
//! anything). A case expecting steps that gets none is a false escalation; a negative that
//! gets steps is a false positive.

use serde::Deserialize;
use std::collections::BTreeMap;
use utter_protocol::serde_json::{self, Value, json};

/// One case of a corpus.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// The report row it counts in.
    pub category: String,
    /// The utterance.
    pub say: String,
    /// The focused window's `app_id`.
    #[serde(default)]
    pub focused: Option<String>,
    /// Other open windows' `app_id`s.
    #[serde(default)]
    pub windows: Vec<String>,
    /// The compositor the context names (default `niri`).
    #[serde(default)]
    pub compositor: Option<String>,
    /// The steps expected; empty for a negative.
    #[serde(default)]
    pub expect: Vec<Expected>,
    /// For a negative: the escalation reason expected.
    #[serde(default)]
    pub escalate: Option<String>,
    /// A note for people.
    #[serde(default)]
    pub note: Option<String>,
}

/// One expected step.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Expected {
    /// Its op.
    pub op: String,
    /// Args it must have (a subset of the planned ones).
    #[serde(default)]
    pub args: toml::Table,
    /// The step's `confirm`, when the case cares (the decision head's ask tier is
    /// `confirm = true`).
    #[serde(default)]
    pub confirm: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    case: Vec<Case>,
}

/// Read a corpus; `source` names it in errors.
///
/// # Errors
/// `source: <the TOML parser's message, with line and column>`, or an empty corpus.
pub fn parse(text: &str, source: &str) -> Result<Vec<Case>, String> {
    let file: File = toml::from_str(text).map_err(|e| format!("{source}: {e}"))?;
    if file.case.is_empty() {
        return Err(format!("{source}: no [[case]] tables"));
    }
    Ok(file.case)
}

impl Case {
    /// The desktop context the case is planned in (the compositor plugin's snapshot shape).
    pub fn context(&self) -> Value {
        let compositor = self.compositor.as_deref().unwrap_or("niri");
        let mut windows: Vec<Value> = Vec::new();
        let mut id = 1;
        let mut window = |app_id: &str| {
            let w = json!({"id": id, "app_id": app_id});
            id += 1;
            w
        };
        let focused = self.focused.as_deref().map(&mut window);
        if let Some(f) = &focused {
            windows.push(f.clone());
        }
        for app_id in &self.windows {
            windows.push(window(app_id));
        }
        json!({
            "compositor": {"name": compositor},
            "focused": focused,
            "windows": windows,
        })
    }

    /// Whether nothing may be planned.
    pub fn is_negative(&self) -> bool {
        self.expect.is_empty()
    }
}

/// How a plan fared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// As expected.
    Right,
    /// Steps, but not the expected ones (why).
    Wrong(String),
    /// Steps where none were expected.
    FalsePositive(String),
    /// No steps where some were expected (the plan's message).
    FalseEscalation(String),
    /// Not the steps expected, but steps of the same effect in the case's desktop: an
    /// application op for another with the same outcome ([`same_effect`]). Counted apart
    /// from [`Verdict::Right`], never as it.
    SameEffect(String),
}

/// What an application op does to application `app` in a desktop where `open` says whether
/// a window of it is open: a new window, focus on the open one, or nothing.
fn app_effect(op: &str, open: bool) -> Option<&'static str> {
    match (op, open) {
        ("launch_app", _) | ("ensure_app", false) => Some("new window"),
        ("ensure_app", true) | ("focus_app", true) => Some("focus"),
        _ => None,
    }
}

/// The application an application op's args name (`app`, else `app_id`), lowercase.
fn app_of(args: &Value) -> Option<String> {
    ["app", "app_id"]
        .iter()
        .find_map(|k| args.get(*k).and_then(Value::as_str))
        .map(str::to_lowercase)
}

/// Whether a planned step has the effect of an expected one in `case`'s desktop although it
/// differs: a browser's other chord for the same command ([`same_in_browsers`]), a key's
/// times written as `count` ([`counted_as_repeat`]), a key for a
/// step ([`same_as_key`]), a state set where it was to be toggled ([`set_where_toggled`]), a
/// program spawned for its application launched ([`spawned_app`]), the same query on another
/// web search engine ([`same_web_search`]), the same control with or without its role word
/// ([`same_control`]), the journal undo whose `otherwise` is the expected step (what it
/// runs with nothing to undo), or another application op with the same outcome
/// ([`same_app_effect`]).
pub fn same_effect(case: &Case, step: &Value, want: &Expected) -> bool {
    let op = step.get("op").and_then(Value::as_str).unwrap_or("");
    let args = step.get("args").cloned().unwrap_or(Value::Null);
    match (op, want.op.as_str()) {
        ("key", "key") => same_in_browsers(case, &args, want) || counted_as_repeat(&args, want),
        ("key", "terminal" | "scroll") => same_as_key(&args, want),
        ("niri", "niri") => set_where_toggled(&args, want),
        ("niri", "launch_app" | "ensure_app") => spawned_app(case, &args, want),
        ("open_url", "open_url") => same_web_search(&args, want),
        ("click_element", "click_element") => same_control(&args, want),
        // "undo that" is the runner's journal undo, which runs its `otherwise` (the focused
        // application's undo chord) when nothing recent is in the journal, as in a corpus
        // case, said on a fresh desktop.
        ("undo", _) => args
            .get("otherwise")
            .filter(|o| o.is_object())
            .is_some_and(|o| step_matches(o, want).is_ok() || same_effect(case, o, want)),
        _ => same_app_effect(case, op, &args, want),
    }
}

/// A key pressed `repeat` times where the case wrote the times as `count` (the sixteenth
/// set's brief named the argument so), the other args as expected.
fn counted_as_repeat(args: &Value, want: &Expected) -> bool {
    let Some(count) = want.args.get("count").and_then(toml::Value::as_integer) else {
        return false;
    };
    args.get("repeat").and_then(Value::as_i64) == Some(count)
        && want
            .args
            .iter()
            .all(|(k, v)| k == "count" || args.get(k) == serde_json::to_value(v).ok().as_ref())
}

/// A key that does what an expected step does: ctrl+l clears a terminal as `clear` does,
/// Page_Down and Page_Up scroll a page down and up.
fn same_as_key(args: &Value, want: &Expected) -> bool {
    let chord = args.get("chord").and_then(Value::as_str).unwrap_or("");
    let wanted = |key: &str| want.args.get(key).and_then(toml::Value::as_str);
    match want.op.as_str() {
        "terminal" => chord == "ctrl+l" && wanted("command") == Some("clear"),
        "scroll" => matches!(
            (chord, wanted("direction")),
            ("Page_Down", Some("down")) | ("Page_Up", Some("up"))
        ),
        _ => false,
    }
}

/// The strings of a step's positional `args` (a `niri spawn` argv); empty without them.
fn spawn_argv(args: &Value) -> Vec<&str> {
    args.get("args")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// `niri spawn` of a program alone where launching the application of that program was
/// expected (or bringing it up, with no window of it open): the desktop id's last part is the
/// program (`com.mitchellh.ghostty`, `ghostty`).
fn spawned_app(case: &Case, args: &Value, want: &Expected) -> bool {
    let argv = spawn_argv(args);
    let wanted = if want.op == "launch_app" {
        want.args.get("app_id").and_then(toml::Value::as_str)
    } else {
        want.args
            .get("app")
            .and_then(toml::Value::as_str)
            .filter(|app| !case.focused.iter().chain(&case.windows).any(|w| w == app))
    };
    match (argv.as_slice(), wanted) {
        ([program], Some(id)) => {
            args.get("command").and_then(Value::as_str) == Some("spawn")
                && id
                    .rsplit('.')
                    .next()
                    .is_some_and(|last| last.eq_ignore_ascii_case(program))
        }
        _ => false,
    }
}

/// The same control described with or without the word for its role ("submit button" and
/// "submit"): the accessibility matcher drops a role word that names the candidate's role.
fn same_control(args: &Value, want: &Expected) -> bool {
    const ROLES: &[&str] = &[
        "button",
        "link",
        "tab",
        "checkbox",
        "check box",
        "icon",
        "folder",
        "menu",
        "field",
        "box",
        "option",
        "item",
    ];
    let bare = |text: &str| {
        let text = text.trim().to_lowercase();
        ROLES
            .iter()
            .find_map(|role| text.strip_suffix(role).map(|t| t.trim_end().to_owned()))
            .filter(|t| !t.is_empty())
            .unwrap_or(text)
    };
    let planned = args.get("description").and_then(Value::as_str);
    let wanted = want.args.get("description").and_then(toml::Value::as_str);
    // One role word taken from one side: "new item button" is "new item" (whose last word
    // is a role word too), but "new item" is not "new folder".
    matches!((planned, wanted), (Some(p), Some(w)) if {
        let (p, w) = (p.trim().to_lowercase(), w.trim().to_lowercase());
        p != w && (bare(&p) == w || bare(&w) == p)
    })
}

/// A web search for the same words on another general engine (the router's default engine
/// is configurable: `[search]` in `data/commands.toml`, `UTTER_SEARCH_URL`).
fn same_web_search(args: &Value, want: &Expected) -> bool {
    /// General engines: the URL's start, and the parameter that holds the query.
    const ENGINES: &[(&str, &str)] = &[
        ("https://www.google.com/search?", "q"),
        ("https://duckduckgo.com/?", "q"),
        ("https://www.bing.com/search?", "q"),
        ("https://search.brave.com/search?", "q"),
        ("https://www.startpage.com/do/search?", "query"),
    ];
    let query = |url: &str| {
        ENGINES.iter().find_map(|(start, key)| {
            let rest = url.strip_prefix(start)?;
            form_urlencoded::parse(rest.as_bytes())
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.to_lowercase())
        })
    };
    let planned = args.get("url").and_then(Value::as_str).and_then(query);
    let wanted = want
        .args
        .get("url")
        .and_then(toml::Value::as_str)
        .and_then(query);
    planned.is_some() && planned == wanted
}

/// With a browser focused, the other chord of a pair browsers take for one command (F5 for
/// ctrl+r, ctrl+Page_Down for ctrl+Tab), the other args as expected.
fn same_in_browsers(case: &Case, args: &Value, want: &Expected) -> bool {
    const BROWSERS: &[&str] = &[
        "firefox",
        "chromium",
        "google-chrome",
        "brave-browser",
        "vivaldi-stable",
        "microsoft-edge",
        "librewolf",
        "zen",
        "floorp",
        "opera",
    ];
    const SAME_IN_BROWSERS: &[[&str; 2]] = &[
        ["F5", "ctrl+r"],
        ["ctrl+Page_Down", "ctrl+Tab"],
        ["ctrl+Page_Up", "ctrl+shift+Tab"],
    ];
    let browser = case
        .focused
        .as_deref()
        .is_some_and(|f| BROWSERS.contains(&f));
    let chord = args.get("chord").and_then(Value::as_str).unwrap_or("");
    let wanted = want
        .args
        .get("chord")
        .and_then(toml::Value::as_str)
        .unwrap_or("");
    let others_same = want
        .args
        .iter()
        .all(|(k, v)| k == "chord" || args.get(k) == serde_json::to_value(v).ok().as_ref());
    browser
        && others_same
        && chord != wanted
        && SAME_IN_BROWSERS
            .iter()
            .any(|pair| pair.contains(&chord) && pair.contains(&wanted))
}

/// A niri action that sets the state a toggle was expected to flip, in the state a case's
/// desktop is in (its context says nothing of either): niri's overview is closed, so
/// `open-overview` does what `toggle-overview` does; a window is tiled (niri's default), so
/// `move-window-to-floating` does what `toggle-window-floating` does.
fn set_where_toggled(args: &Value, want: &Expected) -> bool {
    const SET_FOR_TOGGLE: &[[&str; 2]] = &[
        ["open-overview", "toggle-overview"],
        ["move-window-to-floating", "toggle-window-floating"],
    ];
    let command = args.get("command").and_then(Value::as_str).unwrap_or("");
    let wanted = want
        .args
        .get("command")
        .and_then(toml::Value::as_str)
        .unwrap_or("");
    SET_FOR_TOGGLE.contains(&[command, wanted])
}

/// Both application ops (`launch_app`, `ensure_app`, `focus_app`) on the same application,
/// doing the same given whether a window of it is open (start it, or focus its window):
/// "open spotify" planned `launch_app` where `ensure_app` was expected and no Spotify window
/// is open.
fn same_app_effect(case: &Case, op: &str, args: &Value, want: &Expected) -> bool {
    let want_args = serde_json::to_value(&want.args).unwrap_or(Value::Null);
    let (Some(app), Some(wanted)) = (app_of(args), app_of(&want_args)) else {
        return false;
    };
    let wm_class = args
        .get("wm_class")
        .and_then(Value::as_str)
        .map(str::to_lowercase);
    if app != wanted && wm_class.as_deref() != Some(wanted.as_str()) {
        return false;
    }
    // A window of it is open when a window's app_id is the application's id or the
    // StartupWMClass the plan names (a flatpak's `com.spotify.Client` has `spotify` windows).
    let open = case.focused.iter().chain(&case.windows).any(|id| {
        id.eq_ignore_ascii_case(&wanted)
            || wm_class
                .as_deref()
                .is_some_and(|w| id.eq_ignore_ascii_case(w))
    });
    match (app_effect(op, open), app_effect(&want.op, open)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// `planned` with each step's `app` that is the window class (`StartupWMClass`) of an
/// installed application written as that application's desktop id, where `case` names the
/// application by its desktop id and never by the class: a window of `com.spotify.Client`
/// has the app id `spotify`, and the router aims at a window by its app id, so
/// `close_app {app: "spotify"}` closes the application the case calls `com.spotify.Client`.
/// `classes` maps a lowercased window class to its desktop id (without `.desktop`); see
/// [`window_classes`].
pub fn by_desktop_id(case: &Case, planned: &Value, classes: &BTreeMap<String, String>) -> Value {
    let expected: Vec<String> = case
        .expect
        .iter()
        .filter_map(|want| want.args.get("app").and_then(toml::Value::as_str))
        .map(str::to_owned)
        .collect();
    let mut planned = planned.clone();
    let Some(steps) = planned.get_mut("steps").and_then(Value::as_array_mut) else {
        return planned;
    };
    for step in steps {
        let Some(app) = step.pointer_mut("/args/app") else {
            continue;
        };
        let Some(said) = app.as_str().map(str::to_owned) else {
            continue;
        };
        // The class is the id the case expects already, or names another application.
        if expected.contains(&said) {
            continue;
        }
        if let Some(id) = classes.get(&said.to_lowercase())
            && expected.contains(id)
        {
            *app = json!(id);
        }
    }
    planned
}

/// The window classes of the desktop entries in `dir` (`StartupWMClass`, lowercased) and
/// the desktop id each belongs to, for [`by_desktop_id`]; read by the router's own
/// [`crate::apps::AppScanner`], which skips what it cannot parse.
pub fn window_classes(dir: &std::path::Path) -> BTreeMap<String, String> {
    crate::apps::AppScanner::new(vec![dir.to_path_buf()])
        .apps()
        .iter()
        .filter_map(|app| Some((app.wm_class.as_ref()?.to_lowercase(), app.id.clone())))
        .collect()
}

/// Judge a router's `router.plan` answer for `case`.
pub fn judge(case: &Case, planned: &Value) -> Verdict {
    let steps = planned
        .get("steps")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if case.is_negative() {
        if !steps.is_empty() {
            return Verdict::FalsePositive(shown(&steps));
        }
        if let Some(want) = &case.escalate {
            let got = planned
                .pointer("/escalate/reason")
                .and_then(Value::as_str)
                .unwrap_or("(none)");
            if got != want {
                return Verdict::Wrong(format!("escalate.reason {got}, expected {want}"));
            }
        }
        return Verdict::Right;
    }
    if steps.is_empty() {
        return Verdict::FalseEscalation(
            planned
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("no steps")
                .to_owned(),
        );
    }
    if let Some(why) = typed_and_entered(&steps, &case.expect) {
        return Verdict::SameEffect(why);
    }
    if let Some(why) = spelled_out(case, &steps) {
        return Verdict::SameEffect(why);
    }
    if steps.len() != case.expect.len() {
        return Verdict::Wrong(format!(
            "{} steps ({}), expected {}",
            steps.len(),
            shown(&steps),
            case.expect.len()
        ));
    }
    let mut same = None;
    for (i, (step, want)) in steps.iter().zip(&case.expect).enumerate() {
        let Err(why) = step_matches(step, want) else {
            continue;
        };
        let why = format!("step {}: {}", i + 1, why);
        if same_effect(case, step, want) {
            same.get_or_insert(why);
            continue;
        }
        return Verdict::Wrong(why);
    }
    same.map_or(Verdict::Right, Verdict::SameEffect)
}

/// Where fewer steps were planned than expected: the planned steps written out as the
/// expected ones are, matching them step for step. A step aimed at an application (its
/// `app` arg: "in ghostty run htop" as `terminal {command, app}`) is that application
/// brought up, then the step; a new terminal running a program (`niri spawn` of
/// `[ghostty, -e, claude]`) is the terminal, then the program typed in it.
fn spelled_out(case: &Case, steps: &[Value]) -> Option<String> {
    if steps.len() >= case.expect.len() {
        return None;
    }
    // The steps written out, each with whether it is an application brought up that the
    // plan left to the aimed step (only those may stand for another bringing-up op).
    let mut out: Vec<(Value, bool)> = Vec::new();
    for step in steps {
        let op = step["op"].as_str().unwrap_or("");
        let args = &step["args"];
        let app = args.get("app").and_then(Value::as_str);
        let argv = spawn_argv(args);
        let run_at = argv.iter().position(|a| *a == "-e" || *a == "--");
        if let (Some(app), false) = (app, APP_OPS.contains(&op)) {
            let mut rest = args.clone();
            rest.as_object_mut()?.remove("app");
            out.push((json!({"op": "ensure_app", "args": {"app": app}}), true));
            out.push((json!({"op": op, "args": rest}), false));
        } else if op == "niri" && args["command"] == "spawn" && run_at.is_some_and(|i| i > 0) {
            let at = run_at?;
            out.push((
                json!({"op": "niri", "args": {"command": "spawn", "args": argv[..at]}}),
                false,
            ));
            out.push((
                json!({"op": "terminal", "args": {"command": argv[at + 1..].join(" ")}}),
                false,
            ));
        } else {
            out.push((step.clone(), false));
        }
    }
    if out.len() != case.expect.len() {
        return None;
    }
    let all = out.iter().zip(&case.expect).all(|((step, added), want)| {
        step_matches(step, want).is_ok() || same_effect(case, step, want) || {
            // An application brought up where it was expected focused, opened or started.
            let mut step = step.clone();
            step["op"] = json!(want.op);
            *added && BRING_UP_OPS.contains(&want.op.as_str()) && step_matches(&step, want).is_ok()
        }
    });
    let written: Vec<Value> = out.into_iter().map(|(step, _)| step).collect();
    all.then(|| format!("{} written out as {}", shown(steps), shown(&written)))
}

/// The ops that bring an application up or end it.
const APP_OPS: &[&str] = &["ensure_app", "launch_app", "focus_app", "close_app"];

/// The ops that bring an application up.
const BRING_UP_OPS: &[&str] = &["ensure_app", "launch_app", "focus_app"];

/// Steps as the report shows them: `op args`, comma-separated.
fn shown(steps: &[Value]) -> String {
    steps
        .iter()
        .map(|s| format!("{} {}", s["op"].as_str().unwrap_or("?"), s["args"]))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether `step` is `want` (its op, its confirm when named, and at least the args named),
/// else what differs.
fn step_matches(step: &Value, want: &Expected) -> Result<(), String> {
    let shown = shown(std::slice::from_ref(step));
    let op = step.get("op").and_then(Value::as_str).unwrap_or("");
    if op != want.op {
        return Err(format!("{shown} (expected op {})", want.op));
    }
    if let Some(want) = want.confirm {
        let got = step
            .get("confirm")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if got != want {
            return Err(format!("{shown} has confirm {got}, expected {want}"));
        }
    }
    let args = step.get("args").cloned().unwrap_or(Value::Null);
    for (key, value) in &want.args {
        let want_value = serde_json::to_value(value).unwrap_or(Value::Null);
        // A control is found by its name without regard to case (speech has none): "sign
        // in" is the button "Sign in".
        let caseless = op == "click_element" && key == "description";
        let same = match (args.get(key), &want_value) {
            (Some(Value::String(got)), Value::String(wanted)) if caseless => {
                got.to_lowercase() == wanted.to_lowercase()
            }
            (got, wanted) => got == Some(wanted),
        };
        if !same {
            return Err(format!("{shown} (expected {key} = {want_value})"));
        }
    }
    Ok(())
}

/// A command typed into the focused window and entered (`type_text {text}`, `key Return`)
/// where the case expects it run in the focused terminal (`terminal {command}`): the same
/// keystrokes reach the same shell. The text must be the command when the case names one.
fn typed_and_entered(steps: &[Value], expect: &[Expected]) -> Option<String> {
    // Steps before it (a terminal window focused first) must match as they are.
    let (want, before_wanted) = expect.split_last()?;
    let [before @ .., typed, entered] = steps else {
        return None;
    };
    if before.len() != before_wanted.len()
        || !before
            .iter()
            .zip(before_wanted)
            .all(|(step, want)| step_matches(step, want).is_ok())
    {
        return None;
    }
    let text = (typed["op"] == "type_text").then(|| typed["args"]["text"].as_str())??;
    let enter = entered["op"] == "key" && entered["args"]["chord"] == "Return";
    let command = want.args.get("command").and_then(toml::Value::as_str);
    (want.op == "terminal" && enter && command.is_none_or(|c| c == text))
        .then(|| format!("typed {text:?} and pressed Return (expected op terminal)"))
}

/// One row of the report.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Row {
    /// Cases.
    pub cases: usize,
    /// Right ones.
    pub right: usize,
    /// Negatives that got steps.
    pub false_positives: usize,
    /// Positives that got none.
    pub false_escalations: usize,
    /// Not right, but steps of the same effect ([`Verdict::SameEffect`]).
    pub same_effect: usize,
}

impl Row {
    /// Right ones in percent.
    pub fn accuracy(&self) -> f64 {
        if self.cases == 0 {
            0.0
        } else {
            100.0 * self.right as f64 / self.cases as f64
        }
    }

    /// Right ones and those of the same effect, in percent.
    pub fn effect_accuracy(&self) -> f64 {
        if self.cases == 0 {
            0.0
        } else {
            100.0 * (self.right + self.same_effect) as f64 / self.cases as f64
        }
    }
}

/// A wrong case, for the report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Miss {
    /// Its category.
    pub category: String,
    /// The utterance.
    pub say: String,
    /// The focused app_id.
    pub focused: Option<String>,
    /// `wrong`, `same_effect`, `false_positive` or `false_escalation`.
    pub kind: &'static str,
    /// What was planned or said.
    pub detail: String,
}

/// The per-category table and the misses.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Report {
    /// Category → row, in name order.
    pub categories: BTreeMap<String, Row>,
    /// Every case that was not right.
    pub misses: Vec<Miss>,
}

impl Report {
    /// Count one case.
    pub fn add(&mut self, case: &Case, verdict: Verdict) {
        let row = self.categories.entry(case.category.clone()).or_default();
        row.cases += 1;
        let (kind, detail) = match verdict {
            Verdict::Right => {
                row.right += 1;
                return;
            }
            Verdict::Wrong(d) => ("wrong", d),
            Verdict::SameEffect(d) => {
                row.same_effect += 1;
                ("same_effect", d)
            }
            Verdict::FalsePositive(d) => {
                row.false_positives += 1;
                ("false_positive", d)
            }
            Verdict::FalseEscalation(d) => {
                row.false_escalations += 1;
                ("false_escalation", d)
            }
        };
        self.misses.push(Miss {
            category: case.category.clone(),
            say: case.say.clone(),
            focused: case.focused.clone(),
            kind,
            detail,
        });
    }

    /// All categories together.
    pub fn total(&self) -> Row {
        let mut total = Row::default();
        for row in self.categories.values() {
            total.cases += row.cases;
            total.right += row.right;
            total.false_positives += row.false_positives;
            total.false_escalations += row.false_escalations;
            total.same_effect += row.same_effect;
        }
        total
    }

    /// The table for people: one line per category and a total.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{:<14} {:>6} {:>6} {:>9} {:>10} {:>11} {:>9}\n",
            "category", "cases", "right", "accuracy", "false pos", "false escal", "by effect"
        );
        let line = |name: &str, r: &Row| {
            format!(
                "{:<14} {:>6} {:>6} {:>8.1}% {:>10} {:>11} {:>8.1}%\n",
                name,
                r.cases,
                r.right,
                r.accuracy(),
                r.false_positives,
                r.false_escalations,
                r.effect_accuracy()
            )
        };
        for (name, row) in &self.categories {
            out.push_str(&line(name, row));
        }
        out.push_str(&line("total", &self.total()));
        out
    }

    /// The report as JSON: `{categories: {name: row + accuracy}, total, misses}`.
    pub fn to_json(&self) -> Value {
        let row = |r: &Row| {
            let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
            v["accuracy"] = json!((r.accuracy() * 10.0).round() / 10.0);
            v["effect_accuracy"] = json!((r.effect_accuracy() * 10.0).round() / 10.0);
            v
        };
        json!({
            "categories": self.categories.iter().map(|(k, r)| (k.clone(), row(r))).collect::<serde_json::Map<_, _>>(),
            "total": row(&self.total()),
            "misses": self.misses,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(text: &str) -> Case {
        parse(text, "t.toml").unwrap().remove(0)
    }

    /// A window's class is its application's desktop id where the case names that id, and
    /// only there.
    #[test]
    fn a_window_class_is_read_as_the_desktop_id_the_case_names() {
        let classes = BTreeMap::from([("spotify".to_owned(), "com.spotify.Client".to_owned())]);
        let plan = json!({"steps": [{"op": "close_app", "args": {"app": "spotify"}}]});
        let by_id = case(
            "[[case]]\ncategory = \"apps\"\nsay = \"close spotify\"\nwindows = [\"spotify\"]\n\
             expect = [{ op = \"close_app\", args = { app = \"com.spotify.Client\" } }]\n",
        );
        assert!(matches!(judge(&by_id, &plan), Verdict::Wrong(_)));
        let read = by_desktop_id(&by_id, &plan, &classes);
        assert!(matches!(judge(&by_id, &read), Verdict::Right));
        // A case that names the class keeps it, and so does a class no entry has.
        let by_class = case(
            "[[case]]\ncategory = \"apps\"\nsay = \"close spotify\"\nwindows = [\"spotify\"]\n\
             expect = [{ op = \"close_app\", args = { app = \"spotify\" } }]\n",
        );
        assert_eq!(by_desktop_id(&by_class, &plan, &classes), plan);
        assert_eq!(by_desktop_id(&by_id, &plan, &BTreeMap::new()), plan);
    }

    /// A control's name is compared without case (speech has none); its role word taken
    /// from either side is the same control, by effect.
    #[test]
    fn a_control_is_named_without_case_and_with_or_without_its_role() {
        let plan =
            |d: &str| json!({"steps": [{"op": "click_element", "args": {"description": d}}]});
        let c = case(
            "[[case]]\ncategory = \"t\"\nsay = \"x\"\nexpect = [{ op = \"click_element\", args = { description = \"New item\" } }]\n",
        );
        assert!(matches!(judge(&c, &plan("new item")), Verdict::Right));
        assert!(matches!(
            judge(&c, &plan("new item button")),
            Verdict::SameEffect(_)
        ));
        assert!(matches!(judge(&c, &plan("new folder")), Verdict::Wrong(_)));
    }

    /// A step aimed at an application, written out as the application brought up then the
    /// step, is of the same effect; a close written out never counts as an opening, nor
    /// another planned step as the application brought up.
    #[test]
    fn a_step_aimed_at_an_application_is_written_out_but_never_a_close_for_an_open() {
        let plan = |steps: Value| json!({"steps": steps, "message": "m"});
        let c = case(
            "[[case]]\ncategory = \"t\"\nsay = \"in kitty run ls\"\nexpect = [{ op = \"ensure_app\", args = { app = \"kitty\" } }, { op = \"terminal\", args = { command = \"ls\" } }]\n",
        );
        assert!(matches!(
            judge(
                &c,
                &plan(json!([{"op": "terminal", "args": {"command": "ls", "app": "kitty"}}]))
            ),
            Verdict::SameEffect(_)
        ));
        let closing = case(
            "[[case]]\ncategory = \"t\"\nsay = \"x\"\nexpect = [{ op = \"ensure_app\", args = { app = \"firefox\" } }, { op = \"ensure_app\", args = { app = \"kitty\" } }, { op = \"terminal\", args = { command = \"ls\" } }]\n",
        );
        assert!(matches!(
            judge(
                &closing,
                &plan(json!([
                    {"op": "close_app", "args": {"app": "firefox"}},
                    {"op": "terminal", "args": {"command": "ls", "app": "kitty"}}
                ]))
            ),
            Verdict::Wrong(_)
        ));
        let new_terminal = case(
            "[[case]]\ncategory = \"a\"\nsay = \"claude in a new terminal\"\nexpect = [{ op = \"niri\", args = { command = \"spawn\" } }, { op = \"terminal\", args = { command = \"claude\" } }]\n",
        );
        assert!(matches!(
            judge(
                &new_terminal,
                &plan(
                    json!([{"op": "niri", "args": {"command": "spawn", "args": ["foot", "-e", "claude"]}}])
                )
            ),
            Verdict::SameEffect(_)
        ));
    }

    /// The same words searched on another general engine are of the same effect, never
    /// right; another query is wrong.
    #[test]
    fn the_same_query_on_another_engine_is_the_same_effect() {
        let plan = |url: &str| json!({"steps": [{"op": "open_url", "args": {"url": url}}], "message": "m"});
        let c = case(
            "[[case]]\ncategory = \"s\"\nsay = \"search for cats\"\nexpect = [{ op = \"open_url\", args = { url = \"https://www.google.com/search?q=cats\" } }]\n",
        );
        assert!(matches!(
            judge(&c, &plan("https://duckduckgo.com/?q=cats")),
            Verdict::SameEffect(_)
        ));
        assert!(matches!(
            judge(&c, &plan("https://duckduckgo.com/?q=dogs")),
            Verdict::Wrong(_)
        ));
        assert!(matches!(
            judge(&c, &plan("https://example.com/?q=cats")),
            Verdict::Wrong(_)
        ));
    }

    #[test]
    fn judging_counts_subsets_order_and_negatives() {
        let c = case(
            "[[case]]\ncategory = \"x\"\nsay = \"new tab\"\nfocused = \"firefox\"\nexpect = [{ op = \"key\", args = { chord = \"ctrl+t\" } }]\n",
        );
        assert_eq!(c.context()["focused"]["app_id"], "firefox");
        let plan = |steps: Value| json!({"steps": steps, "message": "m"});
        assert_eq!(
            judge(
                &c,
                &plan(json!([{"op": "key", "args": {"chord": "ctrl+t", "app": "x"}}]))
            ),
            Verdict::Right
        );
        assert!(matches!(
            judge(
                &c,
                &plan(json!([{"op": "key", "args": {"chord": "ctrl+n"}}]))
            ),
            Verdict::Wrong(_)
        ));
        assert!(matches!(
            judge(&c, &plan(json!([]))),
            Verdict::FalseEscalation(_)
        ));
        let n = case("[[case]]\ncategory = \"n\"\nsay = \"hello\"\nescalate = \"no_rule\"\n");
        assert!(matches!(
            judge(&n, &plan(json!([{"op": "key", "args": {}}]))),
            Verdict::FalsePositive(_)
        ));
        assert_eq!(
            judge(&n, &json!({"steps": [], "escalate": {"reason": "no_rule"}})),
            Verdict::Right
        );
        let mut report = Report::default();
        report.add(&c, Verdict::Right);
        report.add(&n, Verdict::FalsePositive("key".into()));
        assert_eq!(report.total().cases, 2);
        assert!(report.table().contains("total"));
        assert_eq!(report.to_json()["total"]["false_positives"], 1);
    }

    #[test]
    fn application_ops_of_the_same_effect_count_apart() {
        let open = |windows: &str| {
            case(&format!(
                "[[case]]\ncategory = \"apps\"\nsay = \"open spotify\"\nwindows = [{windows}]\nexpect = [{{ op = \"ensure_app\", args = {{ app = \"spotify\" }} }}]\n"
            ))
        };
        let plan = |op: &str, key: &str| json!({"steps": [{"op": op, "args": {key: "Spotify"}}]});
        // Nothing open: a launch is what ensure_app does.
        assert!(matches!(
            judge(&open(""), &plan("launch_app", "app_id")),
            Verdict::SameEffect(_)
        ));
        // A Spotify window open: ensure_app focuses it, a launch starts another one.
        assert!(matches!(
            judge(&open("\"spotify\""), &plan("launch_app", "app_id")),
            Verdict::Wrong(_)
        ));
        assert!(matches!(
            judge(&open("\"spotify\""), &plan("focus_app", "app")),
            Verdict::SameEffect(_)
        ));
        // Nothing open: focus_app does nothing.
        assert!(matches!(
            judge(&open(""), &plan("focus_app", "app")),
            Verdict::Wrong(_)
        ));
        // Another application is never the same effect.
        let other = json!({"steps": [{"op": "launch_app", "args": {"app_id": "vlc"}}]});
        assert!(matches!(judge(&open(""), &other), Verdict::Wrong(_)));
        let mut report = Report::default();
        report.add(&open(""), judge(&open(""), &plan("launch_app", "app_id")));
        assert_eq!(report.total().right, 0);
        assert_eq!(report.total().same_effect, 1);
        assert!((report.total().effect_accuracy() - 100.0).abs() < 1e-9);
    }

    #[test]
    fn a_typed_command_and_an_opened_overview_count_apart() {
        let run = case(
            "[[case]]\ncategory = \"agents\"\nsay = \"run aider\"\nfocused = \"foot\"\nexpect = [{ op = \"terminal\", args = { command = \"aider\" } }]\n",
        );
        let typed = |text: &str| {
            json!({"steps": [
                {"op": "type_text", "args": {"text": text}},
                {"op": "key", "args": {"chord": "Return"}},
            ]})
        };
        assert!(matches!(
            judge(&run, &typed("aider")),
            Verdict::SameEffect(_)
        ));
        assert!(matches!(judge(&run, &typed("claude")), Verdict::Wrong(_)));
        let overview = case(
            "[[case]]\ncategory = \"c\"\nsay = \"show the overview\"\nexpect = [{ op = \"niri\", args = { command = \"toggle-overview\" } }]\n",
        );
        let niri = |command: &str| json!({"steps": [{"op": "niri", "args": {"command": command}}]});
        assert!(matches!(
            judge(&overview, &niri("open-overview")),
            Verdict::SameEffect(_)
        ));
        assert!(matches!(
            judge(&overview, &niri("close-overview")),
            Verdict::Wrong(_)
        ));
        assert_eq!(judge(&overview, &niri("toggle-overview")), Verdict::Right);
        let float = case(
            "[[case]]\ncategory = \"c\"\nsay = \"float this\"\nexpect = [{ op = \"niri\", args = { command = \"toggle-window-floating\" } }]\n",
        );
        assert!(matches!(
            judge(&float, &niri("move-window-to-floating")),
            Verdict::SameEffect(_)
        ));
        assert!(matches!(
            judge(&float, &niri("move-window-to-tiling")),
            Verdict::Wrong(_)
        ));
        let reload = |focused: &str| {
            case(&format!(
                "[[case]]\ncategory = \"b\"\nsay = \"reload\"\nfocused = \"{focused}\"\nexpect = [{{ op = \"key\", args = {{ chord = \"ctrl+r\" }} }}]\n"
            ))
        };
        let f5 = json!({"steps": [{"op": "key", "args": {"chord": "F5"}}]});
        assert!(matches!(
            judge(&reload("firefox"), &f5),
            Verdict::SameEffect(_)
        ));
        // Only in a browser: a terminal's F5 is not its ctrl+r.
        assert!(matches!(judge(&reload("foot"), &f5), Verdict::Wrong(_)));
    }

    #[test]
    fn bad_corpora_are_refused_with_the_line() {
        assert!(parse("", "e.toml").unwrap_err().contains("no [[case]]"));
        let e = parse("[[case]]\ncategory = \"x\"\nsay = 1\n", "e.toml").unwrap_err();
        assert!(e.contains("line 3"), "{e}");
        let e = parse(
            "[[case]]\ncategory = \"x\"\nsay = \"a\"\nfocus = \"y\"\n",
            "e.toml",
        )
        .unwrap_err();
        assert!(e.contains("focus"), "{e}");
    }

    /// A key with a step's effect, a control with or without its role word, a terminal's
    /// program spawned where its application was expected, and a command typed into a
    /// terminal focused first, count as of the same effect; other keys and names do not.
    #[test]
    fn keys_controls_and_spawned_terminals_of_the_same_effect() {
        let plan = |steps: Value| json!({"steps": steps, "message": "m"});
        let same =
            |c: &Case, steps: Value| matches!(judge(c, &plan(steps)), Verdict::SameEffect(_));
        let clear = case(
            "[[case]]\ncategory = \"t\"\nsay = \"clear\"\nfocused = \"foot\"\nexpect = [{ op = \"terminal\", args = { command = \"clear\" } }]\n",
        );
        assert!(same(
            &clear,
            json!([{"op": "key", "args": {"chord": "ctrl+l"}}])
        ));
        assert!(!same(
            &clear,
            json!([{"op": "key", "args": {"chord": "ctrl+c"}}])
        ));
        let page = case(
            "[[case]]\ncategory = \"t\"\nsay = \"page down\"\nexpect = [{ op = \"scroll\", args = { direction = \"down\" } }]\n",
        );
        assert!(same(
            &page,
            json!([{"op": "key", "args": {"chord": "Page_Down"}}])
        ));
        assert!(!same(
            &page,
            json!([{"op": "key", "args": {"chord": "Page_Up"}}])
        ));
        let click = case(
            "[[case]]\ncategory = \"t\"\nsay = \"press submit\"\nexpect = [{ op = \"click_element\", args = { description = \"submit\" } }]\n",
        );
        let clicked = |d: &str| json!([{"op": "click_element", "args": {"description": d}}]);
        assert!(same(&click, clicked("submit button")));
        assert!(!same(&click, clicked("cancel button")));
        let spawned = case(
            "[[case]]\ncategory = \"t\"\nsay = \"codex in a new terminal\"\nexpect = [{ op = \"launch_app\", args = { app_id = \"com.mitchellh.ghostty\" } }, { op = \"terminal\", args = { command = \"codex\" } }]\n",
        );
        let spawn =
            |argv: Value| json!([{"op": "niri", "args": {"command": "spawn", "args": argv}}]);
        assert!(same(&spawned, spawn(json!(["ghostty", "-e", "codex"]))));
        assert!(!same(&spawned, spawn(json!(["kitty", "-e", "codex"]))));
        let there = case(
            "[[case]]\ncategory = \"t\"\nsay = \"x\"\nexpect = [{ op = \"focus_app\", args = { app = \"foot\" } }, { op = \"terminal\", args = { command = \"aider\" } }]\n",
        );
        let typed = |app: &str| {
            json!([
                {"op": "focus_app", "args": {"app": app}},
                {"op": "type_text", "args": {"text": "aider"}},
                {"op": "key", "args": {"chord": "Return"}},
            ])
        };
        assert!(same(&there, typed("foot")));
        assert!(!same(&there, typed("kitty")));
    }
}
