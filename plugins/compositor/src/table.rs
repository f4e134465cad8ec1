//! The action table: `data/compositor-actions.toml`, embedded at build time. It maps each
//! niri action name (as `niri msg action <name>` spells it) to its positional parameters,
//! its named options, the niri IPC `Action` JSON, the sway command and the Hyprland command
//! doing the same (where one exists) and how the effect is verified. The file's header
//! documents the format.
//!
//! [`Table::resolve`] checks a call's `args`/`options` against an entry and renders what
//! will be sent: [`Resolved::niri`], [`Resolved::sway`] and [`Resolved::hyprland`].

use serde::Deserialize;
use serde_json::{Map, Number, Value};
use std::collections::BTreeMap;
use std::sync::LazyLock;

/// The table's source text.
pub const SOURCE: &str = include_str!("../../../data/compositor-actions.toml");

/// The longest string accepted for a parameter (a workspace or output name).
pub const MAX_STRING: usize = 128;

/// The most program arguments an `argv` parameter takes (the program included).
pub const MAX_ARGV: usize = 64;

/// The longest single program argument or shell command line, in bytes.
pub const MAX_ARG: usize = 4096;

/// The parsed table, loaded once.
pub static TABLE: LazyLock<Table> =
    LazyLock::new(|| Table::parse(SOURCE).expect("data/compositor-actions.toml is valid"));

/// A parameter's or option's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ParamType {
    /// A whole number (JSON integer or a string of digits), within `min..=max`.
    Integer,
    /// A workspace: an index `0..=255` (number or digit string) or a name.
    Workspace,
    /// A short string without control characters.
    String,
    /// `true` or `false` (or those words as strings).
    Bool,
    /// niri's size change: `"+10%"`, `"-10%"`, `"50%"`, `"+20"`, `"800"` (or an integer:
    /// pixels).
    Size,
    /// A keyboard layout target: `"next"`, `"prev"` or an index `0..=255`.
    Layout,
    /// A program and its arguments: every remaining positional value, 1 to [`MAX_ARGV`]
    /// strings of at most [`MAX_ARG`] bytes without control characters. Only as the last
    /// parameter.
    Argv,
    /// A shell command line for `sh -c`: one string of at most [`MAX_ARG`] bytes without
    /// control characters.
    Shell,
    /// The state a window should end in: `"on"`, `"off"` or `"toggle"`. Only as an option
    /// of an entry verified by `fullscreen`; it chooses whether anything is sent to niri and
    /// renders as `enable` / `disable` / `toggle` in a sway template.
    State,
}

impl ParamType {
    fn describe(self) -> &'static str {
        match self {
            ParamType::Integer => "integer",
            ParamType::Workspace => "workspace (index number or name)",
            ParamType::String => "string",
            ParamType::Bool => "bool",
            ParamType::Size => "size change like \"+10%\", \"50%\" or \"800\"",
            ParamType::Layout => "layout (\"next\", \"prev\" or an index)",
            ParamType::Argv => "program and arguments (strings)",
            ParamType::Shell => "shell command line",
            ParamType::State => "\"on\", \"off\" or \"toggle\"",
        }
    }
}

/// One positional parameter or named option.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Param {
    /// Its name, used as `$name` in the niri template and `{name}` in the sway one.
    pub name: String,
    /// Its type.
    #[serde(rename = "type")]
    pub kind: ParamType,
    /// What it means.
    #[serde(default)]
    pub doc: Option<String>,
    /// The smallest integer accepted (integers only).
    #[serde(default)]
    pub min: Option<i64>,
    /// The largest integer accepted (integers only).
    #[serde(default)]
    pub max: Option<i64>,
    /// `"width"` or `"height"`: which dimension a size change resizes on sway.
    #[serde(default)]
    pub axis: Option<String>,
    /// The default value (options only).
    #[serde(default)]
    pub default: Option<toml::Value>,
}

/// How an action's effect is checked from the snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verify {
    /// The focused workspace is the `reference` parameter.
    FocusedWorkspace,
    /// The window focused before is on the `reference` workspace.
    WindowWorkspace,
    /// The window focused before is on another workspace.
    WindowWorkspaceChanged,
    /// Another workspace is focused.
    WorkspaceChanged,
    /// Another output is focused.
    OutputChanged,
    /// The window focused before is on another output.
    WindowOutputChanged,
    /// The window focused before is in the fullscreen state the `state` option asks for
    /// (`on`, `off`; `toggle`, the default, means the other state than before).
    Fullscreen,
    /// The window focused before moved between the floating and the tiling layout.
    FloatingFlipped,
    /// The window focused before is floating.
    FloatingOn,
    /// The window focused before is tiled.
    FloatingOff,
    /// A window that was not there before appeared.
    WindowOpened,
    /// The window focused before is gone.
    WindowGone,
    /// niri's overview is in the other state.
    OverviewFlipped,
    /// The compositor reported a screenshot taken (niri's `ScreenshotCaptured`).
    Screenshot,
    /// The keyboard layout changed.
    LayoutChanged,
    /// Any change of the snapshot.
    Any,
    /// Nothing the snapshot shows.
    None,
}

/// One table entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Action {
    /// niri's CLI action name, e.g. `focus-workspace`.
    pub name: String,
    /// A one-line description.
    pub doc: String,
    /// Positional parameters, all required.
    #[serde(default)]
    pub params: Vec<Param>,
    /// Named options with defaults.
    #[serde(default)]
    pub options: Vec<Param>,
    /// The niri Action JSON template (text; parsed into [`Action::niri_template`]).
    pub niri: String,
    /// The sway command template, if sway can do it.
    #[serde(default)]
    pub sway: Option<String>,
    /// The sway command when the option `focus` is false.
    #[serde(default)]
    pub sway_no_focus: Option<String>,
    /// How the effect is verified.
    pub verify: Verify,
    /// Another entry to suggest when sway cannot do this one (it names an entry sway can do).
    #[serde(default)]
    pub hint: Option<String>,
    /// The Hyprland command template (`dispatch <dispatcher> <args>`, or `switchxkblayout
    /// …`), if Hyprland can do it.
    #[serde(default)]
    pub hyprland: Option<String>,
    /// The Hyprland command when the option `focus` is false.
    #[serde(default)]
    pub hyprland_no_focus: Option<String>,
    /// Another entry to suggest when Hyprland cannot do this one (it names an entry Hyprland
    /// can do).
    #[serde(default)]
    pub hyprland_hint: Option<String>,
    /// For monitor focus and moves: the direction of the monitor acted on, so that a call
    /// with no monitor there is refused before anything is sent.
    #[serde(default)]
    pub monitor: Option<MonitorDirection>,
    /// How the runner undoes it ("undo that"), see [`Action::undo_rules`]: `focus-before`,
    /// `itself`, `state`, `layout`, `back-to-workspace <entry>`, `none: <why>`, or the name
    /// of the entry that reverses it with the same values. Absent: it cannot be undone.
    #[serde(default)]
    pub undo: Option<String>,
    /// The parsed niri template.
    #[serde(skip)]
    pub niri_template: Value,
}

/// Where a monitor action looks for the monitor, relative to the focused one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MonitorDirection {
    /// To the left.
    Left,
    /// To the right.
    Right,
    /// Above.
    Up,
    /// Below.
    Down,
    /// The next one in the compositor's order (any other monitor).
    Next,
    /// The previous one in the compositor's order (any other monitor).
    Previous,
}

impl MonitorDirection {
    /// `"to the right of"`, `"above"`, … for messages (`"other than"` for next/previous).
    pub fn relation(self) -> &'static str {
        match self {
            MonitorDirection::Left => "to the left of",
            MonitorDirection::Right => "to the right of",
            MonitorDirection::Up => "above",
            MonitorDirection::Down => "below",
            MonitorDirection::Next | MonitorDirection::Previous => "other than",
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    action: Vec<Action>,
}

/// The whole table.
#[derive(Debug, Clone)]
pub struct Table {
    actions: Vec<Action>,
}

/// A parameter value converted to the table's meaning.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    /// An integer.
    Integer(i64),
    /// A workspace by index.
    WorkspaceIndex(u8),
    /// A workspace by name.
    WorkspaceName(String),
    /// A string.
    Str(String),
    /// A bool.
    Bool(bool),
    /// A size change.
    Size(SizeChange),
    /// A layout target.
    Layout(LayoutTarget),
    /// A program and its arguments.
    Argv(Vec<String>),
    /// A shell command line.
    Shell(String),
    /// A wanted window state.
    State(WantedState),
}

/// The state a window should end in (the `state` option).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WantedState {
    /// Enabled (fullscreen).
    On,
    /// Disabled (not fullscreen).
    Off,
    /// The other state than now.
    Toggle,
}

impl WantedState {
    /// The wanted value given the current one: `None` when the current one is unknown and
    /// the call is a toggle (the result then cannot be named).
    pub fn target(self, now: Option<bool>) -> Option<bool> {
        match self {
            WantedState::On => Some(true),
            WantedState::Off => Some(false),
            WantedState::Toggle => now.map(|b| !b),
        }
    }
}

/// niri's `SizeChange`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SizeChange {
    /// Set in logical pixels.
    SetFixed(i32),
    /// Set as a percentage of the working area (`50.0` is half).
    SetProportion(f64),
    /// Add (or subtract) logical pixels.
    AdjustFixed(i32),
    /// Add (or subtract) a percentage of the working area.
    AdjustProportion(f64),
}

/// niri's `LayoutSwitchTarget`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayoutTarget {
    /// The next layout.
    Next,
    /// The previous layout.
    Prev,
    /// A layout by index (0 is the first).
    Index(u8),
}

/// A call checked against its entry.
#[derive(Debug, Clone)]
pub struct Resolved<'a> {
    /// The entry.
    pub action: &'a Action,
    /// Every parameter and option by name, converted.
    pub values: BTreeMap<String, Arg>,
}

/// Why a call does not fit its entry: the message names the command and its parameters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ArgError(pub String);

/// Why a call cannot be sent to sway or Hyprland as a command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// The compositor has no command doing this action.
    #[error("the compositor has no command for this action")]
    Unsupported,
    /// An argument cannot pass through the compositor's command syntax safely (the message
    /// says which and why).
    #[error("{0}")]
    Unsafe(String),
}

impl Table {
    /// Parse and check the table text.
    ///
    /// # Errors
    /// A message naming the entry at fault: TOML errors, a niri template that is not a JSON
    /// object with one key, a placeholder naming no parameter, an option without a valid
    /// default, a duplicate name.
    pub fn parse(text: &str) -> Result<Table, String> {
        let file: File = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut actions = Vec::with_capacity(file.action.len());
        let mut seen = std::collections::BTreeSet::new();
        for mut action in file.action {
            let name = action.name.clone();
            if !seen.insert(name.clone()) {
                return Err(format!("{name}: listed twice"));
            }
            let template: Value = serde_json::from_str(&action.niri)
                .map_err(|e| format!("{name}: the niri template is not JSON: {e}"))?;
            match &template {
                Value::Object(map) if map.len() == 1 && map.values().all(Value::is_object) => {}
                _ => {
                    return Err(format!(
                        "{name}: the niri template must be an object with one key whose value is an object"
                    ));
                }
            }
            let names: Vec<&str> = action
                .params
                .iter()
                .chain(action.options.iter())
                .map(|p| p.name.as_str())
                .collect();
            let mut used = Vec::new();
            placeholders(&template, &mut used);
            for p in &used {
                if !names.contains(&p.as_str()) {
                    return Err(format!(
                        "{name}: the niri template uses ${p}, which is no parameter"
                    ));
                }
            }
            for p in action.params.iter().chain(action.options.iter()) {
                // A state option decides what is sent rather than being sent itself.
                if p.kind != ParamType::State && !used.contains(&p.name) {
                    return Err(format!(
                        "{name}: the parameter {} is not used in the niri template",
                        p.name
                    ));
                }
            }
            for sway in action.sway.iter().chain(action.sway_no_focus.iter()) {
                for p in sway_placeholders(sway) {
                    if !names.contains(&p.as_str()) {
                        return Err(format!(
                            "{name}: the sway template uses {{{p}}}, which is no parameter"
                        ));
                    }
                }
            }
            for hyprland in action
                .hyprland
                .iter()
                .chain(action.hyprland_no_focus.iter())
            {
                for p in sway_placeholders(hyprland) {
                    if !names.contains(&p.as_str()) {
                        return Err(format!(
                            "{name}: the hyprland template uses {{{p}}}, which is no parameter"
                        ));
                    }
                }
                if !(hyprland.starts_with("dispatch ") || hyprland.starts_with("switchxkblayout "))
                {
                    return Err(format!(
                        "{name}: a hyprland template is a dispatch or switchxkblayout command"
                    ));
                }
            }
            for (i, param) in action.params.iter().enumerate() {
                if param.kind == ParamType::Argv && i + 1 != action.params.len() {
                    return Err(format!(
                        "{name}: the argv parameter {} must be the last one",
                        param.name
                    ));
                }
                if param.kind == ParamType::State {
                    return Err(format!(
                        "{name}: the state parameter {} must be an option",
                        param.name
                    ));
                }
            }
            for option in &action.options {
                if matches!(option.kind, ParamType::Argv | ParamType::Shell) {
                    return Err(format!(
                        "{name}: the option {} cannot be of type argv or shell",
                        option.name
                    ));
                }
                if option.kind == ParamType::State
                    && (option.name != "state" || action.verify != Verify::Fullscreen)
                {
                    return Err(format!(
                        "{name}: a state option must be called state and needs verify = fullscreen"
                    ));
                }
            }
            if action.sway_no_focus.is_some() && !action.options.iter().any(|o| o.name == "focus") {
                return Err(format!("{name}: sway_no_focus without a focus option"));
            }
            if action.hyprland_no_focus.is_some()
                && !action.options.iter().any(|o| o.name == "focus")
            {
                return Err(format!("{name}: hyprland_no_focus without a focus option"));
            }
            for option in &action.options {
                let Some(default) = &option.default else {
                    return Err(format!("{name}: the option {} has no default", option.name));
                };
                let json = serde_json::to_value(default)
                    .map_err(|e| format!("{name}: option {}: {e}", option.name))?;
                convert(option, &json)
                    .map_err(|e| format!("{name}: the default of {}: {e}", option.name))?;
            }
            for param in &action.params {
                if param.default.is_some() {
                    return Err(format!(
                        "{name}: the parameter {} has a default; make it an option",
                        param.name
                    ));
                }
                if param.kind == ParamType::Size
                    && !matches!(param.axis.as_deref(), Some("width" | "height"))
                {
                    return Err(format!(
                        "{name}: the size parameter {} needs axis = width or height",
                        param.name
                    ));
                }
            }
            action.niri_template = template;
            actions.push(action);
        }
        for action in &actions {
            if let Some(hint) = &action.hint {
                if action.sway.is_some() {
                    return Err(format!(
                        "{}: a hint is only for entries sway cannot do",
                        action.name
                    ));
                }
                if !actions.iter().any(|a| &a.name == hint && a.sway.is_some()) {
                    return Err(format!(
                        "{}: the hint {hint} names no entry sway can do",
                        action.name
                    ));
                }
            }
            if let Some(hint) = &action.hyprland_hint {
                if action.hyprland.is_some() {
                    return Err(format!(
                        "{}: a hyprland_hint is only for entries Hyprland cannot do",
                        action.name
                    ));
                }
                if !actions
                    .iter()
                    .any(|a| &a.name == hint && a.hyprland.is_some())
                {
                    return Err(format!(
                        "{}: the hyprland_hint {hint} names no entry Hyprland can do",
                        action.name
                    ));
                }
            }
        }
        for action in &actions {
            action.undo_rules(&actions)?;
        }
        Ok(Table { actions })
    }

    /// Every entry, in file order.
    pub fn actions(&self) -> &[Action] {
        &self.actions
    }

    /// The entry called `name`.
    pub fn get(&self, name: &str) -> Option<&Action> {
        self.actions.iter().find(|a| a.name == name)
    }

    /// Up to five names close to `name` (sharing a word, or at most 3 edits away).
    ///
    /// A name longer than [`MAX_HINTED_NAME`] bytes gets no hints: no action name is
    /// that long, and the cost of comparing must not grow with a hostile caller's input.
    pub fn close_names(&self, name: &str) -> Vec<&str> {
        if name.len() > MAX_HINTED_NAME {
            return Vec::new();
        }
        let query = name.to_ascii_lowercase();
        let mut scored: Vec<(usize, &str)> = self
            .actions
            .iter()
            .filter_map(|a| {
                let distance = strsim::levenshtein(&query, &a.name);
                let shares_word = query
                    .split(['-', '_', ' '])
                    .filter(|w| w.len() >= 3)
                    .any(|w| a.name.contains(w));
                (distance <= 3 || shares_word).then_some((distance, a.name.as_str()))
            })
            .collect();
        scored.sort();
        scored.into_iter().take(5).map(|(_, n)| n).collect()
    }

    /// Check `args` (positional) and `options` (named) against the entry `name`.
    ///
    /// # Errors
    /// An unknown name ([`ArgError`] listing close names), a wrong count or type of
    /// arguments, an unknown option.
    pub fn resolve<'a>(
        &'a self,
        name: &str,
        args: &[Value],
        options: &Map<String, Value>,
    ) -> Result<Resolved<'a>, ArgError> {
        let Some(action) = self.get(name) else {
            let close = self.close_names(name);
            let hint = if close.is_empty() {
                String::new()
            } else {
                format!("; did you mean {}?", close.join(", "))
            };
            return Err(ArgError(format!(
                "unknown niri action {:?}{hint} (action.capabilities lists all {})",
                truncate(name),
                self.actions.len()
            )));
        };
        let variadic = action
            .params
            .last()
            .is_some_and(|p| p.kind == ParamType::Argv);
        let fixed = action.params.len() - usize::from(variadic);
        if variadic {
            if args.len() <= fixed || args.len() > fixed + MAX_ARGV {
                return Err(ArgError(format!(
                    "{} takes {} to {} arguments ({}), not {}",
                    action.name,
                    fixed + 1,
                    fixed + MAX_ARGV,
                    action.signature(),
                    args.len()
                )));
            }
        } else if args.len() != action.params.len() {
            return Err(ArgError(format!(
                "{} takes {} argument{} ({}), not {}",
                action.name,
                action.params.len(),
                if action.params.len() == 1 { "" } else { "s" },
                action.signature(),
                args.len()
            )));
        }
        let mut values = BTreeMap::new();
        if variadic {
            let param = action.params.last().expect("variadic");
            let argv = convert_argv(&args[fixed..]).map_err(|e| {
                ArgError(format!(
                    "{}: argument {}: {e} ({})",
                    action.name,
                    param.name,
                    action.signature()
                ))
            })?;
            values.insert(param.name.clone(), Arg::Argv(argv));
        }
        for (param, value) in action.params[..fixed].iter().zip(args) {
            let arg = convert(param, value).map_err(|e| {
                ArgError(format!(
                    "{}: argument {}: {e} ({})",
                    action.name,
                    param.name,
                    action.signature()
                ))
            })?;
            values.insert(param.name.clone(), arg);
        }
        for (key, value) in options {
            let Some(option) = action.options.iter().find(|o| &o.name == key) else {
                let known: Vec<&str> = action.options.iter().map(|o| o.name.as_str()).collect();
                return Err(ArgError(format!(
                    "{} has no option {:?}; its options: {}",
                    action.name,
                    truncate(key),
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                )));
            };
            let arg = convert(option, value)
                .map_err(|e| ArgError(format!("{}: option {key}: {e}", action.name)))?;
            values.insert(key.clone(), arg);
        }
        for option in &action.options {
            if !values.contains_key(&option.name) {
                let default =
                    serde_json::to_value(option.default.as_ref().expect("checked at parse"))
                        .expect("a TOML value is JSON");
                values.insert(
                    option.name.clone(),
                    convert(option, &default).expect("checked at parse"),
                );
            }
        }
        Ok(Resolved { action, values })
    }
}

impl Action {
    /// `name <param: type> ... [--option=default]`, for messages and schemas.
    pub fn signature(&self) -> String {
        let mut parts = vec![self.name.clone()];
        for p in &self.params {
            if p.kind == ParamType::Argv {
                parts.push(format!("<{}: {}>...", p.name, p.kind.describe()));
            } else {
                parts.push(format!("<{}: {}>", p.name, p.kind.describe()));
            }
        }
        for o in &self.options {
            let default = o
                .default
                .as_ref()
                .map(|d| d.to_string())
                .unwrap_or_default();
            parts.push(format!("[{}={default}]", o.name));
        }
        parts.join(" ")
    }

    /// This entry as `action.capabilities` describes it.
    pub fn describe(&self) -> Value {
        let param = |p: &Param| {
            let mut v = serde_json::json!({"name": p.name, "type": p.kind});
            if let Some(doc) = &p.doc {
                v["doc"] = doc.clone().into();
            }
            if let Some(d) = &p.default {
                v["default"] = serde_json::to_value(d).unwrap_or(Value::Null);
            }
            v
        };
        serde_json::json!({
            "name": self.name,
            "doc": self.doc,
            "params": self.params.iter().map(param).collect::<Vec<_>>(),
            "options": self.options.iter().map(param).collect::<Vec<_>>(),
            "sway": self.sway.is_some(),
            "sway_hint": self.hint,
            "hyprland": self.hyprland.is_some(),
            "hyprland_hint": self.hyprland_hint,
        })
    }

    /// This entry's rules of the op `niri`'s `undo` declaration (the runner's `crate::undo`
    /// in utter-core): each matches `{"command": <name>}` and says how the runner reverses it
    /// from the journal. `all` is the whole table, for entries named by `undo`.
    ///
    /// # Errors
    /// An `undo` of unknown form, or naming an entry that does not exist.
    pub fn undo_rules(&self, all: &[Action]) -> Result<Vec<Value>, String> {
        use serde_json::json;
        let name = &self.name;
        let when = |extra: Value| {
            let mut w = json!({"command": name});
            if let Value::Object(more) = extra {
                w.as_object_mut().expect("object").extend(more);
            }
            w
        };
        let send = |command: &str, args: Value, options: Value| json!({"op": "niri", "args": {"command": command, "args": args, "options": options}});
        let Some(undo) = self.undo.as_deref() else {
            return Ok(vec![json!({"when": when(Value::Null),
                "none": format!("{name} cannot be undone")})]);
        };
        let rules = match undo
            .split_once(' ')
            .map_or((undo, ""), |(a, b)| (a, b.trim()))
        {
            ("focus-before", "") => vec![
                json!({"when": when(Value::Null),
                    "steps": [{"op": "focus_app", "args": {"app": "$before.focused.app_id",
                                                           "window_id": "$before.focused.id"}}],
                    "requires": {"window": "$before.focused.id"}}),
                json!({"when": when(Value::Null),
                    "steps": [send("focus-workspace", json!(["$before.workspace.index"]), json!({}))]}),
            ],
            ("itself", "") => vec![json!({"when": when(Value::Null),
                "steps": [{"op": "niri", "args": "$args"}]})],
            ("state", "") => vec![
                json!({"when": when(json!({"options": {"state": "on"}})),
                    "steps": [send(name, json!([]), json!({"state": "off"}))]}),
                json!({"when": when(json!({"options": {"state": "off"}})),
                    "steps": [send(name, json!([]), json!({"state": "on"}))]}),
                json!({"when": when(Value::Null), "steps": [{"op": "niri", "args": "$args"}]}),
            ],
            ("layout", "") => vec![
                json!({"when": when(json!({"args": ["next"]})),
                    "steps": [send(name, json!(["prev"]), json!({}))]}),
                json!({"when": when(json!({"args": ["prev"]})),
                    "steps": [send(name, json!(["next"]), json!({}))]}),
                json!({"when": when(Value::Null),
                    "none": "a layout chosen by number cannot be undone (the one before is not recorded)"}),
            ],
            ("back-to-workspace", entry) if all.iter().any(|a| a.name == entry) => vec![json!({
                "when": when(Value::Null),
                "steps": [send(entry, json!(["$before.workspace.index"]), json!({"focus": true}))],
                "requires": {"focused": "$before.focused.id"}})],
            ("none:", why) if !why.is_empty() => {
                vec![json!({"when": when(Value::Null), "none": why})]
            }
            (entry, "") if all.iter().any(|a| a.name == entry) => {
                vec![json!({"when": when(Value::Null),
                    "steps": [{"op": "niri", "args": {"command": entry, "args": "$args.args?",
                                                       "options": "$args.options?"}}]})]
            }
            _ => {
                return Err(format!(
                    "{name}: undo {undo:?} is not focus-before, itself, state, layout, \"back-to-workspace <entry>\", \"none: <why>\" or an entry's name"
                ));
            }
        };
        Ok(rules)
    }

    /// The option `state`'s value in `values`, if this entry has one.
    pub fn wanted_state(values: &BTreeMap<String, Arg>) -> Option<WantedState> {
        match values.get("state") {
            Some(Arg::State(s)) => Some(*s),
            _ => None,
        }
    }
}

impl serde::Serialize for ParamType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match self {
            ParamType::Integer => "integer",
            ParamType::Workspace => "workspace",
            ParamType::String => "string",
            ParamType::Bool => "bool",
            ParamType::Size => "size",
            ParamType::Layout => "layout",
            ParamType::Argv => "argv",
            ParamType::Shell => "shell",
            ParamType::State => "state",
        })
    }
}

impl Resolved<'_> {
    /// The niri Action JSON with every placeholder filled in.
    pub fn niri(&self) -> Value {
        fill(&self.action.niri_template, &self.values)
    }

    /// The option `state` of this call, if its entry has one.
    pub fn wanted_state(&self) -> Option<WantedState> {
        Action::wanted_state(&self.values)
    }

    /// The sway command.
    ///
    /// # Errors
    /// [`CommandError::Unsupported`] when sway cannot do this action,
    /// [`CommandError::Unsafe`] when an argument cannot pass through sway's `exec` quoting (a
    /// single quote, a backslash) or the command would be longer than sway reads.
    pub fn sway(&self) -> Result<String, CommandError> {
        let out = self.command(
            self.action.sway.as_ref(),
            self.action.sway_no_focus.as_ref(),
            sway_value,
        )?;
        if out.len() > crate::sway::MAX_EXEC {
            return Err(CommandError::Unsafe(format!(
                "the sway command would be {} bytes, more than the {} sway's exec reads",
                out.len(),
                crate::sway::MAX_EXEC
            )));
        }
        Ok(out)
    }

    /// The Hyprland command (as sent after its flags: `dispatch workspace 2`).
    ///
    /// # Errors
    /// [`CommandError::Unsupported`] when Hyprland cannot do this action,
    /// [`CommandError::Unsafe`] when an argument cannot be said in Hyprland's syntax (an
    /// exact size: `resizeactive exact` sets both sides at once) or the command would be
    /// longer than [`crate::hyprland::MAX_REQUEST`].
    pub fn hyprland(&self) -> Result<String, CommandError> {
        let out = self.command(
            self.action.hyprland.as_ref(),
            self.action.hyprland_no_focus.as_ref(),
            hyprland_value,
        )?;
        // The request is `/` and this.
        if out.len() + 1 > crate::hyprland::MAX_REQUEST {
            return Err(CommandError::Unsafe(format!(
                "the Hyprland command would be {} bytes, more than the {} this client sends",
                out.len(),
                crate::hyprland::MAX_REQUEST - 1
            )));
        }
        Ok(out)
    }

    /// A command template of a compositor (`template`, or `no_focus` when the option `focus`
    /// is false and it has one) with each `{name}` replaced by `value` of the parameter.
    fn command(
        &self,
        template: Option<&String>,
        no_focus: Option<&String>,
        value: fn(&Arg, &Param) -> Result<String, String>,
    ) -> Result<String, CommandError> {
        let focus = !matches!(self.values.get("focus"), Some(Arg::Bool(false)));
        let template = if focus {
            template
        } else {
            no_focus.or(template)
        }
        .ok_or(CommandError::Unsupported)?;
        let mut out = template.clone();
        for param in self.action.params.iter().chain(self.action.options.iter()) {
            let placeholder = format!("{{{}}}", param.name);
            if !out.contains(&placeholder) {
                continue;
            }
            let rendered = value(&self.values[&param.name], param).map_err(CommandError::Unsafe)?;
            out = out.replace(&placeholder, &rendered);
        }
        Ok(out)
    }
}

/// `"$name"` strings in a template.
fn placeholders(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => {
            if let Some(name) = s.strip_prefix('$') {
                out.push(name.to_owned());
            }
        }
        Value::Array(items) => items.iter().for_each(|i| placeholders(i, out)),
        Value::Object(map) => map.values().for_each(|i| placeholders(i, out)),
        _ => {}
    }
}

/// `{name}` spans in a sway template.
fn sway_placeholders(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find('{') {
        let after = &rest[start + 1..];
        match after.find('}') {
            Some(end) => {
                out.push(after[..end].to_owned());
                rest = &after[end + 1..];
            }
            None => break,
        }
    }
    out
}

fn fill(template: &Value, values: &BTreeMap<String, Arg>) -> Value {
    match template {
        Value::String(s) => match s.strip_prefix('$').and_then(|n| values.get(n)) {
            Some(arg) => niri_value(arg),
            None => template.clone(),
        },
        Value::Array(items) => Value::Array(items.iter().map(|i| fill(i, values)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), fill(v, values)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn float(f: f64) -> Value {
    Number::from_f64(f).map_or(Value::Null, Value::Number)
}

/// An argument in niri's JSON form.
fn niri_value(arg: &Arg) -> Value {
    match arg {
        Arg::Integer(n) => Value::from(*n),
        Arg::WorkspaceIndex(i) => serde_json::json!({"Index": i}),
        Arg::WorkspaceName(n) => serde_json::json!({"Name": n}),
        Arg::Str(s) => Value::String(s.clone()),
        Arg::Bool(b) => Value::Bool(*b),
        Arg::Size(SizeChange::SetFixed(n)) => serde_json::json!({"SetFixed": n}),
        Arg::Size(SizeChange::AdjustFixed(n)) => serde_json::json!({"AdjustFixed": n}),
        Arg::Size(SizeChange::SetProportion(p)) => serde_json::json!({"SetProportion": float(*p)}),
        Arg::Size(SizeChange::AdjustProportion(p)) => {
            serde_json::json!({"AdjustProportion": float(*p)})
        }
        Arg::Layout(LayoutTarget::Next) => Value::String("Next".into()),
        Arg::Layout(LayoutTarget::Prev) => Value::String("Prev".into()),
        Arg::Layout(LayoutTarget::Index(i)) => serde_json::json!({"Index": i}),
        Arg::Argv(argv) => Value::from(argv.clone()),
        Arg::Shell(s) => Value::String(s.clone()),
        Arg::State(WantedState::On) => Value::String("on".into()),
        Arg::State(WantedState::Off) => Value::String("off".into()),
        Arg::State(WantedState::Toggle) => Value::String("toggle".into()),
    }
}

/// A double-quoted sway string (strings are checked to hold no quote or backslash; a `$`
/// is refused here, since sway would expand it as a config variable inside the quotes).
fn sway_quote(s: &str) -> Result<String, String> {
    crate::sway::refuse_variables(s)?;
    Ok(format!("\"{s}\""))
}

/// The words sway's `workspace` and `move … to workspace` commands read as something else
/// than a workspace name (compared ignoring case, as sway does).
pub const SWAY_WORKSPACE_KEYWORDS: [&str; 7] = [
    "prev",
    "next",
    "current",
    "back_and_forth",
    "next_on_output",
    "prev_on_output",
    "number",
];

/// A workspace name as a sway command argument: refused when sway would read it as one of
/// its keywords ([`SWAY_WORKSPACE_KEYWORDS`], or an option such as
/// `--no-auto-back-and-forth`) rather than as a name.
fn sway_workspace_name(name: &str) -> Result<String, String> {
    let first = name.split_whitespace().next().unwrap_or_default();
    if first.starts_with("--")
        || SWAY_WORKSPACE_KEYWORDS
            .iter()
            .any(|k| first.eq_ignore_ascii_case(k))
    {
        return Err(format!(
            "sway reads the workspace name {:?} as its keyword {first:?} (prev, next, current, \
             back_and_forth, next_on_output, prev_on_output, number and options starting with \
             -- are not names there); use a workspace number or another name",
            truncate(name)
        ));
    }
    sway_quote(name)
}

/// An argument in sway's command syntax (`Err` when it cannot pass safely).
fn sway_value(arg: &Arg, param: &Param) -> Result<String, String> {
    let axis = param.axis.as_deref().unwrap_or("width");
    Ok(match arg {
        Arg::Integer(n) => n.to_string(),
        Arg::WorkspaceIndex(i) => format!("number {i}"),
        Arg::WorkspaceName(n) => sway_workspace_name(n)?,
        Arg::Str(s) => sway_quote(s)?,
        Arg::Bool(b) => b.to_string(),
        Arg::Size(SizeChange::SetFixed(n)) => format!("set {axis} {n} px"),
        Arg::Size(SizeChange::SetProportion(p)) => format!("set {axis} {} ppt", p.round() as i64),
        Arg::Size(SizeChange::AdjustFixed(n)) if *n < 0 => {
            format!("shrink {axis} {} px", n.unsigned_abs())
        }
        Arg::Size(SizeChange::AdjustFixed(n)) => format!("grow {axis} {n} px"),
        Arg::Size(SizeChange::AdjustProportion(p)) if *p < 0.0 => {
            format!("shrink {axis} {} ppt", p.abs().round() as i64)
        }
        Arg::Size(SizeChange::AdjustProportion(p)) => {
            format!("grow {axis} {} ppt", p.round() as i64)
        }
        Arg::Layout(LayoutTarget::Next) => "next".into(),
        Arg::Layout(LayoutTarget::Prev) => "prev".into(),
        Arg::Layout(LayoutTarget::Index(i)) => i.to_string(),
        Arg::Argv(argv) => crate::sway::exec_argv(argv)?,
        Arg::Shell(s) => crate::sway::exec_quote(s)?,
        Arg::State(WantedState::On) => "enable".into(),
        Arg::State(WantedState::Off) => "disable".into(),
        Arg::State(WantedState::Toggle) => "toggle".into(),
    })
}

/// Whether Hyprland reads `name` as a monitor's name rather than another selector: not a
/// direction, a number, a relative `+n`/`-n`, `current`, and no `desc:` or other prefix.
fn is_connector_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    !(name.contains(':')
        || name.contains(' ')
        || name.starts_with(['+', '-'])
        || name.bytes().all(|b| b.is_ascii_digit())
        || ["l", "r", "u", "d", "left", "right", "up", "down", "current"].contains(&lower.as_str()))
}

/// An argument in Hyprland's dispatcher syntax (`Err` when it cannot be said there).
/// Strings were checked on the way in to hold no control character, quote, backslash, `;` or
/// `,` (a `,` would start a window selector after a workspace).
fn hyprland_value(arg: &Arg, param: &Param) -> Result<String, String> {
    let width = param.axis.as_deref() != Some("height");
    let delta = |d: String| {
        if width {
            format!("{d} 0")
        } else {
            format!("0 {d}")
        }
    };
    Ok(match arg {
        Arg::Integer(n) => n.to_string(),
        Arg::WorkspaceIndex(0) => {
            return Err("Hyprland numbers workspaces from 1; there is no workspace 0".into());
        }
        Arg::WorkspaceIndex(i) => i.to_string(),
        Arg::WorkspaceName(n) => format!("name:{n}"),
        // A monitor is named by its connector: Hyprland would read a direction, a number, a
        // `+1`, `current` or `desc:…` as another kind of selector.
        Arg::Str(s) if param.name == "output" && !is_connector_name(s) => {
            return Err(format!(
                "{:?} is not a monitor's connector name (such as DP-1 or HDMI-A-1)",
                truncate(s)
            ));
        }
        Arg::Str(s) => s.clone(),
        Arg::Bool(b) => b.to_string(),
        Arg::Size(SizeChange::AdjustFixed(n)) => delta(n.to_string()),
        // Hyprland reads a relative percentage as one of the window's own size.
        Arg::Size(SizeChange::AdjustProportion(p)) => delta(format!("{}%", p.round() as i64)),
        Arg::Size(SizeChange::SetFixed(_) | SizeChange::SetProportion(_)) => {
            return Err(format!(
                "Hyprland's resizeactive sets both sides at once, so an exact {} cannot be set \
                 alone; say a change instead (\"+10%\", \"-100\")",
                if width { "width" } else { "height" }
            ));
        }
        Arg::Layout(LayoutTarget::Next) => "next".into(),
        Arg::Layout(LayoutTarget::Prev) => "prev".into(),
        Arg::Layout(LayoutTarget::Index(i)) => i.to_string(),
        Arg::Argv(argv) => crate::hyprland::exec_argv(argv)?,
        Arg::Shell(s) => format!("sh -c {}", crate::hyprland::sh_quote(s)?),
        Arg::State(WantedState::On) => "set".into(),
        Arg::State(WantedState::Off) => "unset".into(),
        Arg::State(WantedState::Toggle) => "toggle".into(),
    })
}

/// Longest name, in bytes, that [`Table::close_names`] compares with the table.
pub const MAX_HINTED_NAME: usize = 64;

fn truncate(s: &str) -> String {
    if s.chars().count() > 40 {
        let head: String = s.chars().take(40).collect();
        format!("{head}…")
    } else {
        s.to_owned()
    }
}

/// A string argument: bounded, no control characters, and nothing that could end a sway
/// quoted string or command (`"`, `\`, `;`, `,`).
fn check_string(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err("must not be empty".into());
    }
    if s.chars().count() > MAX_STRING {
        return Err(format!("is longer than {MAX_STRING} characters"));
    }
    if s.chars()
        .any(|c| c.is_control() || matches!(c, '"' | '\\' | ';' | ','))
    {
        return Err("must not contain control characters, quotes, backslashes, ';' or ','".into());
    }
    Ok(s.to_owned())
}

/// One program argument or shell line: bounded, without control characters (NUL among
/// them). Quotes and other shell characters are fine here: niri passes argv without a
/// shell, and sway's quoting is checked when the sway command is rendered.
fn check_arg(s: &str) -> Result<(), String> {
    if s.len() > MAX_ARG {
        return Err(format!("is longer than {MAX_ARG} bytes"));
    }
    if s.chars().any(char::is_control) {
        return Err("must not contain control characters (newlines, NUL, …)".into());
    }
    Ok(())
}

/// The values of an `argv` parameter: strings only, the first one a program name.
fn convert_argv(values: &[Value]) -> Result<Vec<String>, String> {
    let mut argv = Vec::with_capacity(values.len());
    for (i, value) in values.iter().enumerate() {
        let Value::String(s) = value else {
            return Err(format!(
                "value {} must be a string, not {}",
                i + 1,
                shown(value)
            ));
        };
        check_arg(s).map_err(|e| format!("value {} {e}", i + 1))?;
        argv.push(s.clone());
    }
    if argv.first().is_none_or(|p| p.trim().is_empty()) {
        return Err("the first value must name a program".into());
    }
    Ok(argv)
}

fn integer_of(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Whether `value` is a whole number too large for an `i64` (a JSON integer beyond it, or
/// a digit string of one): such a value is out of range, not of the wrong kind.
fn huge_integer(value: &Value) -> bool {
    match value {
        Value::Number(n) => {
            n.as_i64().is_none()
                && (n.is_u64()
                    || n.as_f64()
                        .is_some_and(|f| f.is_finite() && f.fract() == 0.0))
        }
        Value::String(s) => {
            let t = s.trim();
            let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
            !digits.is_empty()
                && digits.bytes().all(|b| b.is_ascii_digit())
                && t.parse::<i64>().is_err()
        }
        _ => false,
    }
}

/// A workspace index: `0..=255`, the same range for a JSON number and a digit string.
fn workspace_index(value: &Value) -> Result<Arg, String> {
    if huge_integer(value) {
        return Err(format!(
            "workspace index {} is out of range (0..=255)",
            shown(value)
        ));
    }
    let n = integer_of(value)
        .ok_or_else(|| format!("expected a workspace index or name, got {}", shown(value)))?;
    u8::try_from(n)
        .map(Arg::WorkspaceIndex)
        .map_err(|_| format!("workspace index {n} is outside 0..=255"))
}

/// Whether a string is meant as a number (digits, perhaps signed), not as a name.
fn numeric(s: &str) -> bool {
    let t = s.trim();
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

fn shown(value: &Value) -> String {
    truncate(&value.to_string())
}

/// Convert one JSON value by its parameter's type.
fn convert(param: &Param, value: &Value) -> Result<Arg, String> {
    match param.kind {
        ParamType::Integer => {
            if huge_integer(value) {
                let (min, max) = (
                    param.min.unwrap_or(0),
                    param.max.unwrap_or(i64::from(u32::MAX)),
                );
                return Err(format!("{} is out of range ({min}..={max})", shown(value)));
            }
            let n = integer_of(value)
                .ok_or_else(|| format!("expected an integer, got {}", shown(value)))?;
            let min = param.min.unwrap_or(0);
            let max = param.max.unwrap_or(i64::from(u32::MAX));
            if n < min || n > max {
                return Err(format!("{n} is outside {min}..={max}"));
            }
            Ok(Arg::Integer(n))
        }
        ParamType::Workspace => match value {
            Value::Number(_) => workspace_index(value),
            Value::String(s) if numeric(s) => workspace_index(value),
            Value::String(s) => check_string(s).map(Arg::WorkspaceName),
            _ => Err(format!(
                "expected a workspace index or name, got {}",
                shown(value)
            )),
        },
        ParamType::String => match value {
            Value::String(s) => check_string(s).map(Arg::Str),
            _ => Err(format!("expected a string, got {}", shown(value))),
        },
        ParamType::Bool => match value {
            Value::Bool(b) => Ok(Arg::Bool(*b)),
            Value::String(s) if s == "true" => Ok(Arg::Bool(true)),
            Value::String(s) if s == "false" => Ok(Arg::Bool(false)),
            _ => Err(format!("expected true or false, got {}", shown(value))),
        },
        ParamType::Size => match value {
            Value::Number(_) => {
                if huge_integer(value) {
                    return Err(format!("{} pixels is out of range", shown(value)));
                }
                let n = integer_of(value)
                    .ok_or_else(|| format!("expected a size change, got {}", shown(value)))?;
                let n = i32::try_from(n).map_err(|_| format!("{n} pixels is out of range"))?;
                check_size(SizeChange::SetFixed(n), &n.to_string()).map(Arg::Size)
            }
            Value::String(s) => parse_size(s).and_then(|c| check_size(c, s)).map(Arg::Size),
            _ => Err(format!(
                "expected a size change like \"+10%\", got {}",
                shown(value)
            )),
        },
        ParamType::Layout => match value {
            Value::String(s) if s.eq_ignore_ascii_case("next") => {
                Ok(Arg::Layout(LayoutTarget::Next))
            }
            Value::String(s) if s.eq_ignore_ascii_case("prev") => {
                Ok(Arg::Layout(LayoutTarget::Prev))
            }
            _ => {
                let n = integer_of(value).ok_or_else(|| {
                    format!(
                        "expected \"next\", \"prev\" or a layout index, got {}",
                        shown(value)
                    )
                })?;
                u8::try_from(n)
                    .map(|i| Arg::Layout(LayoutTarget::Index(i)))
                    .map_err(|_| format!("layout index {n} is outside 0..=255"))
            }
        },
        ParamType::Argv => convert_argv(std::slice::from_ref(value)).map(Arg::Argv),
        ParamType::Shell => match value {
            Value::String(s) if s.trim().is_empty() => Err("must not be empty".into()),
            Value::String(s) => check_arg(s).map(|()| Arg::Shell(s.clone())),
            _ => Err(format!("expected a string, got {}", shown(value))),
        },
        ParamType::State => match value {
            Value::String(s) if s == "on" => Ok(Arg::State(WantedState::On)),
            Value::String(s) if s == "off" => Ok(Arg::State(WantedState::Off)),
            Value::String(s) if s == "toggle" => Ok(Arg::State(WantedState::Toggle)),
            _ => Err(format!(
                "expected \"on\", \"off\" or \"toggle\", got {}",
                shown(value)
            )),
        },
    }
}

/// A size change that does something: a size to set is positive (at least 1 pixel, or a
/// percentage that rounds to at least 1, as sway only takes whole ones), a change is not
/// zero (nor a percentage that rounds to zero).
fn check_size(change: SizeChange, shown_as: &str) -> Result<SizeChange, String> {
    let shown_as = truncate(shown_as);
    match change {
        SizeChange::SetFixed(n) if n < 1 => Err(format!(
            "{shown_as:?} would set a size of {n} pixels; a size to set must be at least 1 (use \"-{}\" as a string to shrink)",
            n.unsigned_abs()
        )),
        SizeChange::SetProportion(p) if p.round() < 1.0 => Err(format!(
            "{shown_as:?} would set a size of {p}%, which rounds to nothing; a size to set must be at least 1%"
        )),
        SizeChange::AdjustFixed(0) => Err(format!("{shown_as:?} changes the size by nothing")),
        SizeChange::AdjustProportion(p) if p.round() == 0.0 => Err(format!(
            "{shown_as:?} changes the size by {p}%, which rounds to nothing"
        )),
        ok => Ok(ok),
    }
}

/// niri's size-change syntax: an optional sign (adjust rather than set), a number, an
/// optional `%` (a percentage of the working area rather than pixels).
fn parse_size(s: &str) -> Result<SizeChange, String> {
    let bad = || {
        format!(
            "{:?} is not a size change like \"+10%\", \"-10%\", \"50%\", \"+20\" or \"800\"",
            truncate(s)
        )
    };
    if s.len() > 16 {
        return Err(bad());
    }
    let (number, percent) = match s.strip_suffix('%') {
        Some(n) => (n, true),
        None => (s, false),
    };
    let adjust = number.starts_with(['+', '-']);
    if number.is_empty() || number.contains('%') {
        return Err(bad());
    }
    if percent {
        let value: f64 = number.parse().map_err(|_| bad())?;
        if !value.is_finite() || value.abs() > 1000.0 {
            return Err(bad());
        }
        Ok(if adjust {
            SizeChange::AdjustProportion(value)
        } else {
            SizeChange::SetProportion(value)
        })
    } else {
        let value: i32 = number.parse().map_err(|_| bad())?;
        Ok(if adjust {
            SizeChange::AdjustFixed(value)
        } else {
            SizeChange::SetFixed(value)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn resolve(name: &str, args: Value, options: Value) -> Result<(Value, Option<String>), String> {
        let args = args.as_array().cloned().unwrap_or_default();
        let options = options.as_object().cloned().unwrap_or_default();
        TABLE
            .resolve(name, &args, &options)
            .map(|r| (r.niri(), r.sway().ok()))
            .map_err(|e| e.0)
    }

    fn sway_of(name: &str, args: Value, options: Value) -> Result<String, CommandError> {
        let args = args.as_array().cloned().unwrap_or_default();
        let options = options.as_object().cloned().unwrap_or_default();
        TABLE
            .resolve(name, &args, &options)
            .expect("resolves")
            .sway()
    }

    fn hyprland_of(name: &str, args: Value, options: Value) -> Result<String, CommandError> {
        let args = args.as_array().cloned().unwrap_or_default();
        let options = options.as_object().cloned().unwrap_or_default();
        TABLE
            .resolve(name, &args, &options)
            .expect("resolves")
            .hyprland()
    }

    #[test]
    fn every_action_has_a_hyprland_command_a_hint_or_a_reason() {
        // What Hyprland has nothing close to: niri's scrolling columns and overview, and the
        // workspace order (Hyprland's workspaces are numbered, not stacked). Screenshots are
        // grim's there, as on sway.
        let without = [
            "move-workspace-down",
            "move-workspace-up",
            "focus-column",
            "focus-floating",
            "focus-tiling",
            "switch-focus-between-floating-and-tiling",
            "center-visible-columns",
            "reset-window-height",
            "toggle-overview",
            "open-overview",
            "close-overview",
            "show-hotkey-overlay",
            "screenshot",
            "screenshot-screen",
            "screenshot-window",
        ];
        for action in TABLE.actions() {
            let covered = action.hyprland.is_some() || action.hyprland_hint.is_some();
            assert!(
                covered || without.contains(&action.name.as_str()),
                "{}: no hyprland command, hint or reason",
                action.name
            );
            assert!(
                !(covered && without.contains(&action.name.as_str())),
                "{}: listed as without a command but has one",
                action.name
            );
        }
    }

    #[test]
    fn arguments_render_in_hyprland_dispatcher_syntax() {
        let h = |name: &str, args: Value, options: Value| hyprland_of(name, args, options).unwrap();
        assert_eq!(
            h("focus-workspace", json!([2]), json!({})),
            "dispatch workspace 2"
        );
        assert_eq!(
            h("focus-workspace", json!(["chat room"]), json!({})),
            "dispatch workspace name:chat room"
        );
        assert_eq!(
            h("move-window-to-workspace", json!([3]), json!({})),
            "dispatch movetoworkspace 3"
        );
        assert_eq!(
            h(
                "move-window-to-workspace",
                json!([3]),
                json!({"focus": false})
            ),
            "dispatch movetoworkspacesilent 3"
        );
        assert_eq!(
            h("move-column-to-monitor-left", json!([]), json!({})),
            "dispatch movewindow mon:l"
        );
        assert_eq!(
            h("set-column-width", json!(["+10%"]), json!({})),
            "dispatch resizeactive 10% 0"
        );
        assert_eq!(
            h("set-window-height", json!(["-40"]), json!({})),
            "dispatch resizeactive 0 -40"
        );
        assert_eq!(
            h("focus-monitor", json!(["HDMI-A-1"]), json!({})),
            "dispatch focusmonitor HDMI-A-1"
        );
        for selector in ["r", "-1", "1", "current", "desc:Dell Inc.", "DP 1"] {
            assert!(
                matches!(
                    hyprland_of("focus-monitor", json!([selector]), json!({})),
                    Err(CommandError::Unsafe(_))
                ),
                "{selector}"
            );
        }
        assert_eq!(
            h("switch-layout", json!(["next"]), json!({})),
            "switchxkblayout all next"
        );
        assert_eq!(
            h("spawn", json!(["foot", "--title", "it's"]), json!({})),
            r"dispatch exec exec 'foot' '--title' 'it'\''s'"
        );
        assert_eq!(
            h("spawn-sh", json!(["echo hi; [x] $(id)"]), json!({})),
            "dispatch exec sh -c 'echo hi; [x] $(id)'"
        );
        // fullscreen's state is decided by the plugin (only a toggle is sent).
        assert_eq!(
            h("fullscreen-window", json!([]), json!({"state": "on"})),
            "dispatch fullscreen 0"
        );
        // Not sayable there: an exact size (both sides at once), workspace 0.
        for (name, args) in [
            ("set-column-width", json!(["50%"])),
            ("set-window-height", json!(["800"])),
            ("focus-workspace", json!([0])),
        ] {
            assert!(
                matches!(
                    hyprland_of(name, args.clone(), json!({})),
                    Err(CommandError::Unsafe(_))
                ),
                "{name} {args}"
            );
        }
        assert_eq!(
            hyprland_of("toggle-overview", json!([]), json!({})),
            Err(CommandError::Unsupported)
        );
        assert_eq!(
            TABLE.get("center-column").unwrap().hyprland_hint.as_deref(),
            Some("center-window")
        );
    }

    #[test]
    fn broken_hyprland_columns_are_refused() {
        let entry = |extra: &str| {
            format!(
                "[[action]]\nname = \"a\"\ndoc = \"d\"\nniri = '{{\"A\":{{}}}}'\nverify = \"any\"\n{extra}\n"
            )
        };
        for (extra, why) in [
            ("hyprland = \"workspace 2\"", "dispatch or switchxkblayout"),
            ("hyprland = \"dispatch workspace {nope}\"", "no parameter"),
            (
                "hyprland_no_focus = \"dispatch x\"",
                "without a focus option",
            ),
            (
                "hyprland = \"dispatch x\"\nhyprland_hint = \"a\"",
                "only for entries",
            ),
            ("hyprland_hint = \"missing\"", "names no entry"),
        ] {
            let err = Table::parse(&entry(extra)).expect_err(extra);
            assert!(err.contains(why), "{extra}: {err}");
        }
    }

    #[test]
    fn every_entry_parses_and_its_template_is_an_object() {
        let table = Table::parse(SOURCE).expect("parses");
        assert!(table.actions().len() >= 40);
        for action in table.actions() {
            let t = action.niri_template.as_object().expect("object");
            assert_eq!(t.len(), 1, "{}", action.name);
            assert!(
                t.values().next().expect("one").is_object(),
                "{}",
                action.name
            );
            // niri's action names are kebab-case forms of the variant names.
            let variant = t.keys().next().expect("one key");
            let kebab: String = variant
                .chars()
                .enumerate()
                .flat_map(|(i, c)| {
                    let lower = c.to_ascii_lowercase();
                    if c.is_ascii_uppercase() && i > 0 {
                        vec!['-', lower]
                    } else {
                        vec![lower]
                    }
                })
                .collect();
            assert_eq!(kebab, action.name, "variant {variant}");
        }
    }

    #[test]
    fn the_required_vocabulary_is_there() {
        for name in [
            "focus-workspace",
            "focus-workspace-down",
            "focus-workspace-up",
            "focus-workspace-previous",
            "move-window-to-workspace",
            "move-column-to-workspace",
            "move-window-to-workspace-down",
            "move-window-to-workspace-up",
            "focus-column-left",
            "focus-column-right",
            "focus-window-down",
            "focus-window-up",
            "focus-column-first",
            "focus-column-last",
            "focus-monitor-left",
            "focus-monitor-right",
            "focus-monitor-up",
            "focus-monitor-down",
            "focus-monitor-next",
            "focus-monitor-previous",
            "move-column-to-monitor-left",
            "move-column-to-monitor-right",
            "move-column-to-monitor-up",
            "move-column-to-monitor-down",
            "move-window-to-monitor-left",
            "move-window-to-monitor-right",
            "move-window-to-monitor-up",
            "move-window-to-monitor-down",
            "maximize-column",
            "fullscreen-window",
            "toggle-window-floating",
            "close-window",
            "toggle-overview",
            "screenshot",
            "screenshot-window",
            "screenshot-screen",
            "center-column",
            "switch-preset-column-width",
            "set-column-width",
            "consume-or-expel-window-left",
            "consume-or-expel-window-right",
            "power-off-monitors",
            "switch-layout",
            "spawn",
            "spawn-sh",
            "move-window-to-floating",
            "move-window-to-tiling",
        ] {
            assert!(TABLE.get(name).is_some(), "{name} missing");
        }
        assert!(TABLE.get("quit").is_none());
        assert!(TABLE.get("toggle-overview").unwrap().sway.is_none());
    }

    #[test]
    fn arguments_render_into_both_forms() {
        assert_eq!(
            resolve("focus-workspace", json!([2]), json!({})).unwrap(),
            (
                json!({"FocusWorkspace": {"reference": {"Index": 2}}}),
                Some("workspace number 2".into())
            )
        );
        assert_eq!(
            resolve("focus-workspace", json!(["chat"]), json!({})).unwrap(),
            (
                json!({"FocusWorkspace": {"reference": {"Name": "chat"}}}),
                Some("workspace \"chat\"".into())
            )
        );
        assert_eq!(
            resolve("focus-workspace", json!(["3"]), json!({}))
                .unwrap()
                .0,
            json!({"FocusWorkspace": {"reference": {"Index": 3}}})
        );
        assert_eq!(
            resolve("move-window-to-workspace", json!([3]), json!({})).unwrap(),
            (
                json!({"MoveWindowToWorkspace": {"window_id": null, "reference": {"Index": 3}, "focus": true}}),
                Some("move container to workspace number 3; workspace number 3".into())
            )
        );
        assert_eq!(
            resolve(
                "move-window-to-workspace",
                json!([3]),
                json!({"focus": false})
            )
            .unwrap(),
            (
                json!({"MoveWindowToWorkspace": {"window_id": null, "reference": {"Index": 3}, "focus": false}}),
                Some("move container to workspace number 3".into())
            )
        );
        assert_eq!(
            resolve("focus-column-left", json!([]), json!({})).unwrap(),
            (json!({"FocusColumnLeft": {}}), Some("focus left".into()))
        );
        assert_eq!(
            resolve("close-window", json!([]), json!({})).unwrap(),
            (json!({"CloseWindow": {"id": null}}), Some("kill".into()))
        );
        assert_eq!(
            resolve("toggle-overview", json!([]), json!({})).unwrap(),
            (json!({"ToggleOverview": {}}), None)
        );
        assert_eq!(
            resolve("set-column-width", json!(["+10%"]), json!({})).unwrap(),
            (
                json!({"SetColumnWidth": {"change": {"AdjustProportion": 10.0}}}),
                Some("resize grow width 10 ppt".into())
            )
        );
        assert_eq!(
            resolve("set-column-width", json!(["-20"]), json!({}))
                .unwrap()
                .1,
            Some("resize shrink width 20 px".into())
        );
        assert_eq!(
            resolve("set-column-width", json!(["50%"]), json!({}))
                .unwrap()
                .0,
            json!({"SetColumnWidth": {"change": {"SetProportion": 50.0}}})
        );
        assert_eq!(
            resolve("switch-layout", json!(["next"]), json!({})).unwrap(),
            (
                json!({"SwitchLayout": {"layout": "Next"}}),
                Some("input type:keyboard xkb_switch_layout next".into())
            )
        );
        assert_eq!(
            resolve("switch-layout", json!([1]), json!({})).unwrap().0,
            json!({"SwitchLayout": {"layout": {"Index": 1}}})
        );
        assert_eq!(
            resolve(
                "screenshot-window",
                json!([]),
                json!({"write_to_disk": false})
            )
            .unwrap()
            .0,
            json!({"ScreenshotWindow": {"id": null, "write_to_disk": false, "show_pointer": false, "path": null}})
        );
    }

    #[test]
    fn bad_arguments_name_the_command_and_its_parameters() {
        let err = resolve("focus-workspace", json!([]), json!({})).unwrap_err();
        assert!(err.contains("focus-workspace takes 1 argument"), "{err}");
        assert!(err.contains("<reference: workspace"), "{err}");
        let err = resolve("focus-workspace", json!([1, 2]), json!({})).unwrap_err();
        assert!(err.contains("not 2"), "{err}");
        let err = resolve("focus-workspace", json!([true]), json!({})).unwrap_err();
        assert!(err.contains("argument reference"), "{err}");
        assert!(resolve("focus-workspace", json!([300]), json!({})).is_err());
        assert!(resolve("focus-workspace", json!([-1]), json!({})).is_err());
        assert!(resolve("focus-workspace", json!(["x".repeat(10_000)]), json!({})).is_err());
        assert!(resolve("focus-workspace", json!(["a;kill"]), json!({})).is_err());
        assert!(resolve("focus-workspace", json!(["a\"b"]), json!({})).is_err());
        assert!(resolve("focus-column-left", json!([1]), json!({})).is_err());
        assert!(resolve("focus-column", json!([0]), json!({})).is_err());
        assert!(resolve("set-column-width", json!(["ten"]), json!({})).is_err());
        assert!(resolve("set-column-width", json!(["10%%"]), json!({})).is_err());
        assert!(resolve("switch-layout", json!(["sideways"]), json!({})).is_err());
        let err = resolve(
            "move-window-to-workspace",
            json!([1]),
            json!({"fokus": true}),
        )
        .unwrap_err();
        assert!(err.contains("its options: focus"), "{err}");
        assert!(resolve("move-window-to-workspace", json!([1]), json!({"focus": 3})).is_err());
    }

    #[test]
    fn unknown_names_get_close_suggestions() {
        let err = resolve("focus-workspce", json!([]), json!({})).unwrap_err();
        assert!(
            err.contains("did you mean") && err.contains("focus-workspace"),
            "{err}"
        );
        let err = resolve(&"z".repeat(5000), json!([]), json!({})).unwrap_err();
        assert!(err.len() < 300, "{err}");
    }

    #[test]
    fn broken_tables_are_refused() {
        let entry =
            |body: &str| format!("[[action]]\nname = \"x\"\ndoc = \"d\"\nverify = \"any\"\n{body}");
        assert!(Table::parse(&entry("niri = '[1]'")).is_err());
        assert!(Table::parse(&entry("niri = '{\"A\":{},\"B\":{}}'")).is_err());
        assert!(Table::parse(&entry("niri = '{\"A\":{\"x\":\"$nope\"}}'")).is_err());
        assert!(
            Table::parse(&entry(
                "params = [{name = \"p\", type = \"integer\"}]\nniri = '{\"A\":{}}'"
            ))
            .is_err()
        );
        assert!(
            Table::parse(&entry(
                "options = [{name = \"o\", type = \"bool\"}]\nniri = '{\"A\":{\"o\":\"$o\"}}'"
            ))
            .is_err()
        );
        assert!(Table::parse(&entry("niri = '{\"A\":{}}'\nsway = \"focus {p}\"")).is_err());
        assert!(Table::parse(&entry("niri = '{\"A\":{}}'\nhint = \"nope\"")).is_err());
        assert!(
            Table::parse(&entry(
                "params = [{name = \"a\", type = \"argv\"}, {name = \"b\", type = \"integer\"}]\nniri = '{\"A\":{\"a\":\"$a\",\"b\":\"$b\"}}'"
            ))
            .is_err()
        );
        assert!(
            Table::parse(&entry(
                "options = [{name = \"state\", type = \"state\", default = \"toggle\"}]\nniri = '{\"A\":{}}'"
            ))
            .is_err(),
            "a state option needs verify = fullscreen"
        );
        assert!(Table::parse(&entry("niri = '{\"A\":{}}'")).is_ok());
    }

    #[test]
    fn spawn_takes_an_argv_and_quotes_it_for_sway() {
        assert_eq!(
            resolve("spawn", json!(["foot", "--flag"]), json!({})).unwrap(),
            (
                json!({"Spawn": {"command": ["foot", "--flag"]}}),
                Some("exec exec 'foot' '--flag'".into())
            )
        );
        // Shell characters stay literal: quoted for sway and sh, passed as is to niri.
        let (niri, sway) = resolve(
            "spawn",
            json!(["notify-send", "a; kill, [x] `id` \"q\""]),
            json!({}),
        )
        .unwrap();
        assert_eq!(
            niri,
            json!({"Spawn": {"command": ["notify-send", "a; kill, [x] `id` \"q\""]}})
        );
        assert_eq!(
            sway.as_deref(),
            Some("exec exec 'notify-send' 'a; kill, [x] `id` \"q\"'")
        );
        // What cannot be quoted for sway is refused there, and only there.
        for bad in ["it's", "a\\", "x' ; kill '"] {
            let args = json!(["sh", "-c", bad]);
            assert!(resolve("spawn", args.clone(), json!({})).is_ok(), "{bad}");
            assert!(
                matches!(
                    sway_of("spawn", args, json!({})),
                    Err(CommandError::Unsafe(_))
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            sway_of("spawn", json!(["-x"]), json!({})),
            Err(CommandError::Unsafe(_))
        ));
        assert!(matches!(
            sway_of("spawn", json!(["prog", "y".repeat(4000)]), json!({})),
            Err(CommandError::Unsafe(_))
        ));
        // Strings only, bounded, no control characters, a program first.
        for bad in [
            json!([]),
            json!([""]),
            json!([" "]),
            json!([5]),
            json!(["foot", 5]),
            json!(["foot", null]),
            json!(["foot", ["x"]]),
            json!(["foo\u{0}t"]),
            json!(["foot", "a\nb"]),
            json!(["foot", "x".repeat(MAX_ARG + 1)]),
            Value::Array(vec![json!("a"); MAX_ARGV + 1]),
        ] {
            let shown: String = bad.to_string().chars().take(60).collect();
            assert!(resolve("spawn", bad, json!({})).is_err(), "{shown}");
        }
        assert!(resolve("spawn", Value::Array(vec![json!("a"); MAX_ARGV]), json!({})).is_ok());
        let err = resolve("spawn", json!([]), json!({})).unwrap_err();
        assert!(err.contains("spawn takes 1 to 64 arguments"), "{err}");
    }

    #[test]
    fn spawn_sh_is_one_shell_line() {
        assert_eq!(
            resolve("spawn-sh", json!(["notify-send hi && foot"]), json!({})).unwrap(),
            (
                json!({"SpawnSh": {"command": "notify-send hi && foot"}}),
                Some("exec sh -c 'notify-send hi && foot'".into())
            )
        );
        assert_eq!(
            sway_of("spawn-sh", json!(["a; kill"]), json!({})).unwrap(),
            "exec sh -c 'a; kill'"
        );
        assert!(matches!(
            sway_of("spawn-sh", json!(["echo 'hi'"]), json!({})),
            Err(CommandError::Unsafe(_))
        ));
        for bad in [
            json!([]),
            json!([""]),
            json!(["a", "b"]),
            json!([1]),
            json!(["a\nkill"]),
        ] {
            assert!(
                resolve("spawn-sh", bad.clone(), json!({})).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_state_option_renders_for_sway_and_not_for_niri() {
        for (state, sway) in [
            (json!({}), "fullscreen toggle"),
            (json!({"state": "toggle"}), "fullscreen toggle"),
            (json!({"state": "on"}), "fullscreen enable"),
            (json!({"state": "off"}), "fullscreen disable"),
        ] {
            let (niri, got) = resolve("fullscreen-window", json!([]), state.clone()).unwrap();
            assert_eq!(niri, json!({"FullscreenWindow": {"id": null}}), "{state}");
            assert_eq!(got.as_deref(), Some(sway), "{state}");
        }
        let args = |o: Value| o.as_object().cloned().unwrap_or_default();
        let r = TABLE
            .resolve("fullscreen-window", &[], &args(json!({"state": "off"})))
            .unwrap();
        assert_eq!(r.wanted_state(), Some(WantedState::Off));
        for bad in [
            json!({"state": "OFF"}),
            json!({"state": true}),
            json!({"state": "off; kill"}),
            json!({"state": ["off"]}),
        ] {
            assert!(
                resolve("fullscreen-window", json!([]), bad.clone()).is_err(),
                "{bad}"
            );
        }
        assert_eq!(
            resolve("move-window-to-floating", json!([]), json!({})).unwrap(),
            (
                json!({"MoveWindowToFloating": {"id": null}}),
                Some("floating enable".into())
            )
        );
        assert_eq!(
            resolve("move-window-to-tiling", json!([]), json!({})).unwrap(),
            (
                json!({"MoveWindowToTiling": {"id": null}}),
                Some("floating disable".into())
            )
        );
    }

    #[test]
    fn hints_and_monitor_directions_are_in_the_table() {
        assert_eq!(
            TABLE.get("maximize-column").unwrap().hint.as_deref(),
            Some("fullscreen-window")
        );
        assert_eq!(
            sway_of("maximize-column", json!([]), json!({})),
            Err(CommandError::Unsupported)
        );
        assert_eq!(
            TABLE.get("focus-monitor-right").unwrap().monitor,
            Some(MonitorDirection::Right)
        );
        assert_eq!(
            TABLE.get("move-window-to-monitor-left").unwrap().monitor,
            Some(MonitorDirection::Left)
        );
        assert_eq!(TABLE.get("focus-monitor").unwrap().monitor, None);
    }

    #[test]
    fn sway_variables_are_refused_in_every_string_it_would_expand() {
        for (name, args) in [
            ("spawn", json!(["touch", "/tmp/a-$x"])),
            ("spawn", json!(["$x"])),
            ("spawn-sh", json!(["echo $x"])),
            ("focus-workspace", json!(["$x"])),
            ("move-window-to-workspace", json!(["chat$x"])),
        ] {
            match sway_of(name, args.clone(), json!({})) {
                Err(CommandError::Unsafe(why)) => assert!(why.contains("expand"), "{name}: {why}"),
                other => panic!("{name} {args}: {other:?}"),
            }
            // niri takes them literally.
            assert!(resolve(name, args, json!({})).is_ok());
        }
        assert!(crate::sway::exec_quote("a$b").is_err());
        assert!(crate::sway::exec_argv(&["foot".into(), "$HOME".into()]).is_err());
    }

    #[test]
    fn sway_keywords_are_no_workspace_names() {
        for name in [
            "prev",
            "NEXT",
            "current",
            "back_and_forth",
            "next_on_output",
            "prev_on_output",
            "number",
            "--no-auto-back-and-forth",
            "--anything",
            "prev 2",
        ] {
            for command in ["focus-workspace", "move-window-to-workspace"] {
                match sway_of(command, json!([name]), json!({})) {
                    Err(CommandError::Unsafe(why)) => assert!(why.contains("keyword"), "{why}"),
                    other => panic!("{command} {name:?}: {other:?}"),
                }
            }
            // niri has no such keywords.
            let (niri, _) = resolve("focus-workspace", json!([name]), json!({})).expect("niri");
            assert_eq!(niri["FocusWorkspace"]["reference"]["Name"], name);
        }
        assert_eq!(
            sway_of("focus-workspace", json!(["previous-ish"]), json!({})).expect("a name"),
            "workspace \"previous-ish\""
        );
    }

    #[test]
    fn digit_strings_are_workspace_numbers_with_the_numbers_range() {
        assert_eq!(
            sway_of("focus-workspace", json!(["7"]), json!({})).expect("seven"),
            "workspace number 7"
        );
        for bad in [
            json!("99999999999999999999"),
            json!(99999999999999999999u128 as f64),
            json!("256"),
            json!(256),
            json!("-1"),
        ] {
            let e = resolve("focus-workspace", json!([bad.clone()]), json!({}))
                .expect_err("out of range");
            assert!(
                e.contains("out of range") || e.contains("outside 0..=255"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn sizes_that_do_nothing_or_are_negative_are_refused() {
        for bad in [
            json!("0.4%"),
            json!("0%"),
            json!("-0%"),
            json!("+0.3%"),
            json!("+0"),
            json!("0"),
            json!(-5),
            json!(0),
        ] {
            let e =
                resolve("set-column-width", json!([bad.clone()]), json!({})).expect_err("refused");
            assert!(e.contains("set-column-width"), "{bad}: {e}");
        }
        assert_eq!(
            sway_of("set-column-width", json!(["-5"]), json!({})).expect("shrink"),
            "resize shrink width 5 px"
        );
        assert_eq!(
            sway_of("set-column-width", json!(["0.6%"]), json!({})).expect("one"),
            "resize set width 1 ppt"
        );
        let e = resolve("set-column-width", json!([2f64.powi(70)]), json!({})).expect_err("huge");
        assert!(e.contains("out of range"), "{e}");
    }

    #[test]
    fn a_huge_integer_is_out_of_range() {
        let e = resolve("focus-column", json!([2f64.powi(70)]), json!({})).expect_err("huge");
        assert!(e.contains("out of range"), "{e}");
        let e = resolve("focus-column", json!(["1180591620717411303424"]), json!({}))
            .expect_err("huge");
        assert!(e.contains("out of range"), "{e}");
    }

    #[test]
    fn close_names_hint_near_misses_and_skip_huge_names() {
        assert!(
            TABLE
                .close_names("focus-workspac")
                .contains(&"focus-workspace")
        );
        assert!(TABLE.close_names(&"x".repeat(200_000)).is_empty());
        let long_miss = format!("focus-workspace{}", "-".repeat(MAX_HINTED_NAME));
        assert!(TABLE.close_names(&long_miss).is_empty());
    }
}
