//! The compositor family of the command space: every action of the compositor plugin's
//! table (`data/compositor-actions.toml`, the same file the compositor plugin embeds) is
//! sayable by the words of its own name, each word by any phrase of the shared grammar
//! ([`crate::grammar`]), in any order: "focus-column-left" is "focus the column on the
//! left", "go one column to the right" is "focus-column-right", "move this column to the
//! workspace above" is "move-column-to-workspace-up". A new action in the table is sayable
//! without a rule. The grammar's `[aliases]` name the actions people say in other words
//! ("swap this column right" is "move-column-right"), and the size words plan the actions
//! whose parameter is a size ("make the column a bit wider": `set-column-width "+5%"`).
//!
//! Reading is strict: every word of the utterance must be a word of the grammar or of the
//! action's name, or the family plans nothing and the rules after it are tried. Rules:
//!
//! - the verb must be the name's verb (or say it: "send" is move), or absent for a focus or
//!   toggle action ("next column", "overview"); "make"/"set" may stand beside another verb;
//! - the column or window acted on may go unsaid ("focus left" is focus-column-left,
//!   "move down" is move-window-down), the fewest unsaid words win, then the table's order;
//! - "move this to workspace 3" moves the window (the thing moved goes unsaid before a
//!   destination);
//! - a number is the action's index when it follows the object ("column three", "workspace
//!   number four") or, with no direction said, comes before it ("the third column"); other
//!   numbers count how far: one is the action ("go one column to the right"), more plan
//!   nothing here (the rules' repeated family repeats the step: "two columns to the right");
//! - what follows "in"/"out of" is where, not what ("move this window up in the column");
//! - where no action has the direction said, next and previous mean the neighbour along the
//!   object's axis: right and left for columns, down and up for windows and workspaces.
//!
//! Every step is `niri {command, args?}` and carries `confirm: true` for the actions that
//! always ask ([`crate::phrases::is_destructive`]).

use crate::grammar::{Grammar, Token};
use crate::phrases::{MAX_SLOT, NiriAction, is_destructive};
use crate::plan::Matched;
use serde::Deserialize;
use std::sync::LazyLock;
use utter_protocol::serde_json::{Map, json};

/// The compositor plugin's action table, compiled in.
pub const ACTIONS_TOML: &str = include_str!("../../../data/compositor-actions.toml");

/// What an action's one parameter takes, as far as speech can fill it.
#[derive(Debug, Clone, PartialEq)]
pub enum Slot {
    /// No parameter.
    None,
    /// An index or a workspace number.
    Index,
    /// A size change along `width` or `height`.
    Size(String),
    /// A parameter speech does not fill here (a program, a layout, an output name).
    Other,
}

/// One sayable form of an action: its words (the verb, then the rest canonical).
#[derive(Debug, Clone)]
pub struct Sayable {
    /// The action's name in the table.
    pub command: String,
    /// The name as said: alias or own name.
    pub said: String,
    verb: String,
    rest: Vec<Token>,
    /// Whether the name says where the thing is ("out-of", "from", "in"): an utterance
    /// that says a place ("out of its column") fits it better than a name whose words
    /// say a destination ("pull-window-into-column").
    names_place: bool,
    /// The parameter.
    pub slot: Slot,
}

#[derive(Deserialize)]
struct Table {
    action: Vec<Entry>,
}

#[derive(Deserialize)]
struct Entry {
    name: String,
    #[serde(default)]
    params: Vec<Param>,
}

#[derive(Deserialize)]
struct Param {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    axis: Option<String>,
}

/// Every sayable form of every action, in the table's order, aliases after the names.
pub fn sayables() -> &'static [Sayable] {
    static ALL: LazyLock<Vec<Sayable>> = LazyLock::new(|| {
        build(ACTIONS_TOML, Grammar::builtin()).expect("the action table parses (tested)")
    });
    &ALL
}

/// The sayable forms of `table` under `grammar`.
///
/// # Errors
/// The TOML parser's message.
pub fn build(table: &str, grammar: &Grammar) -> Result<Vec<Sayable>, String> {
    let table: Table = toml::from_str(table).map_err(|e| e.to_string())?;
    let slot_of = |e: &Entry| match e.params.as_slice() {
        [] => Slot::None,
        [p] if p.kind == "integer" || p.kind == "workspace" => Slot::Index,
        [p] if p.kind == "size" => Slot::Size(p.axis.clone().unwrap_or_else(|| "width".into())),
        _ => Slot::Other,
    };
    let said = |name: &str, command: &str, slot: Slot| -> Sayable {
        let mut words = name.split('-');
        let verb = words.next().unwrap_or_default().to_owned();
        let rest = words
            .filter_map(|w| match grammar.word(w) {
                Some(Token::To | Token::In | Token::Index | Token::Filler) => None,
                Some(Token::Size(_) | Token::Fraction(_) | Token::Number(_)) | None => {
                    Some(Token::Word(w.to_owned()))
                }
                Some(token) => Some(token),
            })
            .collect();
        let names_place = name
            .split('-')
            .any(|w| matches!(grammar.word(w), Some(Token::In)));
        Sayable {
            command: command.to_owned(),
            said: name.to_owned(),
            verb,
            rest,
            names_place,
            slot,
        }
    };
    let mut out: Vec<Sayable> = table
        .action
        .iter()
        .map(|e| said(&e.name, &e.name, slot_of(e)))
        .collect();
    for (from, to) in &grammar.aliases {
        for entry in &table.action {
            let Some(rest) = entry.name.strip_prefix(to.as_str()) else {
                continue;
            };
            if !(rest.is_empty() || rest.starts_with('-')) {
                continue;
            }
            out.push(said(&format!("{from}{rest}"), &entry.name, slot_of(entry)));
        }
    }
    Ok(out)
}

/// What an utterance says, read for this family.
#[derive(Debug, Default, Clone)]
struct Reading {
    verbs: Vec<Vec<String>>,
    /// What is acted on and how: objects, directions, other words, in order.
    rest: Vec<Token>,
    /// Objects said after "in"/"out of": where the thing is; they may say a word of the
    /// name, and need not.
    places: Vec<Token>,
    index: Option<u32>,
    /// A number said with "percent".
    percent: Option<u32>,
    /// The `[sizes]` words, as words of their own (`width`, `wider`, ...).
    sizes: Vec<String>,
    fraction: Option<f64>,
}

impl Reading {
    /// The reading with its size words read as plain words, for the names that hold them
    /// ("switch-preset-column-width").
    fn sizes_as_words(&self) -> Option<Reading> {
        if self.fraction.is_some() || self.percent.is_some() || self.sizes.is_empty() {
            return None;
        }
        let mut r = self.clone();
        r.rest.extend(r.sizes.drain(..).map(Token::Word));
        Some(r)
    }
}

/// Read `text` (normalised, fillers stripped) for the family: `None` when it says two
/// indices.
fn reading(text: &str, grammar: &Grammar) -> Option<Reading> {
    let tokens = grammar.read(text);
    let directed = tokens.iter().any(|t| matches!(t, Token::Direction(_)));
    let mut r = Reading::default();
    let mut place_next = false;
    let mut destination_first = false;
    let mut seen_object = false;
    let mut previous: Option<&Token> = None;
    let mut numbers: Vec<u32> = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let next = tokens[i + 1..].iter().find(|t| !matches!(t, Token::Filler));
        match token {
            Token::Filler => {
                // A filler breaks "column three" apart only for the index rule.
                previous = Some(token);
                continue;
            }
            Token::In => place_next = true,
            Token::Index => {}
            Token::To => {
                if !seen_object {
                    destination_first = true;
                }
            }
            Token::Object(_) if place_next => {
                place_next = false;
                r.places.push(token.clone());
            }
            Token::Object(_) => {
                seen_object = true;
                r.rest.push(token.clone());
            }
            Token::Number(n) if matches!(next, Some(Token::Size(s)) if s == "percent") => {
                r.percent = Some(*n);
            }
            Token::Number(n) => {
                let after_object = matches!(previous, Some(Token::Object(_) | Token::Index));
                let before_object = matches!(next, Some(Token::Object(_)));
                let before_direction = matches!(next, Some(Token::Direction(_)));
                // "one workspace down", "one to the left": with a way to go said, a number
                // before an object or the way counts how far, even right after another
                // object ("this column one workspace down"). One step is the action; more
                // are the repeated family's ("two columns to the right"), never one step
                // said as two.
                let how_far = directed && (before_object || before_direction);
                if how_far && *n > 1 {
                    return None;
                }
                if !how_far && (after_object || before_object) {
                    if *n > MAX_SLOT {
                        return None;
                    }
                    numbers.push(*n);
                } else if !directed {
                    // A number that is no index and counts nothing ("workspace 1.5").
                    return None;
                }
            }
            Token::Verb(verbs) => r.verbs.push(verbs.clone()),
            Token::Size(size) => r.sizes.push(size.clone()),
            Token::Fraction(f) => r.fraction = Some(*f),
            // One direction said twice ("up to the workspace above") is one.
            Token::Direction(_) if r.rest.contains(token) => {}
            Token::Direction(_) | Token::Word(_) => r.rest.push(token.clone()),
        }
        previous = Some(token);
    }
    if numbers.len() > 1 {
        return None;
    }
    // "the last workspace i was on": "last" is the one before, not the end.
    let previous = Token::Direction("previous".into());
    if r.rest.contains(&previous) {
        r.rest.retain(|t| *t != Token::Direction("last".into()));
    }
    // "the first window on the left", "the last column on the right": the side of the end
    // says the end again.
    for (end, side) in [("first", "left"), ("last", "right")] {
        if r.rest.contains(&Token::Direction(end.into())) {
            r.rest.retain(|t| *t != Token::Direction(side.into()));
        }
    }
    r.index = numbers.first().copied();
    // "move this to workspace 3": the window is what moves.
    if destination_first && r.verbs.iter().any(|v| v.iter().any(|v| v == "move")) {
        r.rest.insert(0, Token::Object("window".into()));
    }
    Some(r)
}

/// How well `reading` says `action`: the number of its words left unsaid (an implied column
/// or window), or `None` when it does not say it.
fn fits(reading: &Reading, action: &Sayable, rest: &[Token]) -> Option<usize> {
    match (&action.slot, reading.index) {
        (Slot::Index, Some(_)) | (Slot::None, None) => {}
        _ => return None,
    }
    let mut wanted: Vec<&Token> = action.rest.iter().collect();
    // The verb: said by one verb phrase. Another verb phrase may be "make"/"set", or a word
    // of the name ("toggle windowed fullscreen").
    let saying: Vec<usize> = (0..reading.verbs.len())
        .filter(|&i| reading.verbs[i].contains(&action.verb))
        .collect();
    match saying.as_slice() {
        [] if reading.verbs.is_empty() && matches!(action.verb.as_str(), "focus" | "toggle") => {}
        [one] => {
            for (i, verbs) in reading.verbs.iter().enumerate() {
                if i == *one || verbs.iter().any(|v| v == "set") {
                    continue;
                }
                let at = wanted
                    .iter()
                    .position(|w| matches!(w, Token::Word(word) if verbs.contains(word)))?;
                wanted.remove(at);
            }
        }
        _ => return None,
    }
    // Every word said is the name's, in any order.
    for token in rest {
        let at = wanted.iter().position(|w| *w == token)?;
        wanted.remove(at);
    }
    // Where the thing is may say a word of the name.
    for place in &reading.places {
        if let Some(at) = wanted.iter().position(|w| *w == place) {
            wanted.remove(at);
        }
    }
    if wanted.is_empty() {
        return Some(0);
    }
    // The column or window acted on may go unsaid, with a verb and a way to go or a word of
    // the name said ("focus left", "move down", "toggle tabbed display"), never with a bare
    // verb ("close") or "back" ("go back").
    let spatial = rest.iter().any(|t| match t {
        Token::Direction(d) => matches!(
            d.as_str(),
            "left" | "right" | "up" | "down" | "first" | "last"
        ),
        Token::Word(_) => true,
        _ => false,
    });
    // "to" of the name goes unsaid inside a direction ("all the way to the left").
    let implied = |t: &&Token| {
        matches!(t, Token::To) || matches!(t, Token::Object(o) if o == "window" || o == "column")
    };
    (spatial && !reading.verbs.is_empty() && wanted.iter().all(implied)).then_some(wanted.len())
}

/// The rest of `reading` with next/previous turned into the neighbour along the object's
/// axis (columns: right/left; windows and workspaces: down/up).
fn along_axis(rest: &[Token]) -> Option<Vec<Token>> {
    let object = rest.iter().find_map(|t| match t {
        Token::Object(o) => Some(o.as_str()),
        _ => None,
    });
    let (next, previous) = match object {
        Some("column") => ("right", "left"),
        Some("window" | "workspace") => ("down", "up"),
        _ => return None,
    };
    let mut changed = false;
    let out = rest
        .iter()
        .map(|t| match t {
            Token::Direction(d) if d == "next" => {
                changed = true;
                Token::Direction(next.into())
            }
            Token::Direction(d) if d == "previous" => {
                changed = true;
                Token::Direction(previous.into())
            }
            other => other.clone(),
        })
        .collect::<Vec<Token>>();
    // "the next column to the right": the neighbour said twice is one.
    let out: Vec<Token> = out.into_iter().fold(Vec::new(), |mut kept, t| {
        if !(matches!(t, Token::Direction(_)) && kept.contains(&t)) {
            kept.push(t);
        }
        kept
    });
    changed.then_some(out)
}

/// Plan `text` (normalised, fillers stripped) as a compositor action of the table.
pub fn plan(text: &str) -> Option<Matched> {
    plan_with(text, Grammar::builtin(), sayables())
}

/// [`plan`] over the given grammar and sayable forms.
pub fn plan_with(text: &str, grammar: &Grammar, actions: &[Sayable]) -> Option<Matched> {
    let reading = reading(text, grammar)?;
    let sized =
        !reading.sizes.is_empty() || reading.fraction.is_some() || reading.percent.is_some();
    if sized && let Some(m) = size(&reading, actions) {
        return Some(m);
    }
    let reading = match sized {
        // "move this window over to the left a bit": a little of a move is one step.
        true if reading.fraction.is_none()
            && reading.percent.is_none()
            && reading.sizes.iter().all(|s| s == "little") =>
        {
            let mut once = reading.clone();
            once.sizes.clear();
            once
        }
        true => reading.sizes_as_words()?,
        false => reading,
    };
    // The fewest unsaid words win; then a name that says a place when the phrase does
    // ("out of the column": expel, not the "into" of consume); then the action whose verb
    // the phrase says first (its own name: "open the overview" is open-overview before
    // toggle-overview); then the table's order.
    let place_differs = |a: &Sayable| a.names_place == reading.places.is_empty();
    let verb_rank = |a: &Sayable| {
        reading
            .verbs
            .iter()
            .find_map(|v| v.iter().position(|x| *x == a.verb))
            .unwrap_or(0)
    };
    let best = |rest: &[Token]| {
        actions
            .iter()
            .filter_map(|a| {
                fits(&reading, a, rest).map(|missing| (missing, place_differs(a), verb_rank(a), a))
            })
            .min_by_key(|(missing, place, rank, _)| (*missing, *place, *rank))
            .map(|(_, _, _, a)| a)
    };
    let action =
        best(&reading.rest).or_else(|| along_axis(&reading.rest).and_then(|r| best(&r)))?;
    let args = match (&action.slot, reading.index) {
        (Slot::Index, Some(n)) => vec![json!(n)],
        _ => Vec::new(),
    };
    Some(step(&action.command, args))
}

/// "make the column a bit wider", "make the window taller", "half the screen width", "set
/// the column width to 40 percent": the table's size action along the axis said.
fn size(reading: &Reading, actions: &[Sayable]) -> Option<Matched> {
    if reading.verbs.iter().any(|v| !v.iter().any(|v| v == "set")) {
        return None;
    }
    // "ten percent", "half", "it's full": an amount alone is an answer to someone, not a
    // size change; a verb, the column or window, or a size word must be said with it.
    let size_word = reading
        .sizes
        .iter()
        .any(|s| !matches!(s.as_str(), "percent" | "little" | "lot"));
    if reading.verbs.is_empty() && reading.rest.is_empty() && !size_word {
        return None;
    }
    let mut object: Option<&str> = None;
    for token in &reading.rest {
        match token {
            Token::Object(o) if o == "column" || o == "window" => {
                if object.is_some_and(|have| have != o) {
                    return None;
                }
                object = Some(o);
            }
            // "half the screen width": the screen is what the fraction is of.
            Token::Object(o) if o == "monitor" && reading.fraction.is_some() => {}
            _ => return None,
        }
    }
    let has = |s: &str| reading.sizes.iter().any(|x| x == s);
    let (axis, sign) = match (
        has("wider") || has("width"),
        has("narrower"),
        has("taller") || has("height"),
        has("shorter"),
    ) {
        (_, true, false, false) => ("width", "-"),
        (true, false, false, false) => ("width", "+"),
        (false, false, _, true) => ("height", "-"),
        (false, false, true, false) => ("height", "+"),
        // A window's share of the screen ("half the screen") is its column's width: niri
        // sets a window's height only within its column.
        (false, false, false, false) => match object {
            Some("window") if reading.fraction.is_none() => ("height", "+"),
            _ => ("width", "+"),
        },
        _ => return None,
    };
    let comparative = has("wider") || has("narrower") || has("taller") || has("shorter");
    if reading.index.is_some() {
        return None;
    }
    let change = match (reading.fraction, reading.percent, comparative) {
        (Some(f), None, false) => format!("{}%", trim(f)),
        (None, Some(n), false) if (1..=100).contains(&n) => format!("{n}%"),
        (None, Some(n), true) if (1..=100).contains(&n) => format!("{sign}{n}%"),
        (None, None, true) => {
            let step = if has("little") {
                5
            } else if has("lot") {
                20
            } else {
                10
            };
            format!("{sign}{step}%")
        }
        _ => return None,
    };
    let action = actions
        .iter()
        .find(|a| a.said == a.command && a.slot == Slot::Size(axis.to_owned()))?;
    Some(step(&action.command, vec![json!(change)]))
}

/// A percentage without a needless fraction: 50.0 → "50", 33.333 → "33.333".
fn trim(value: f64) -> String {
    let text = format!("{value:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn step(command: &str, args: Vec<utter_protocol::serde_json::Value>) -> Matched {
    let action = NiriAction {
        command: command.to_owned(),
        args,
        options: Map::new(),
        confirm: is_destructive(command),
    };
    Matched {
        rule: "compositor_space",
        op: "niri",
        args: action.step_args(None),
        message: action.describe(None),
        confirm: action.confirm,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(text: &str) -> Option<(String, Vec<utter_protocol::serde_json::Value>)> {
        let m = plan(&crate::text::normalize(text))?;
        let args = m.args["args"].as_array().cloned().unwrap_or_default();
        Some((m.args["command"].as_str()?.to_owned(), args))
    }

    fn command(text: &str) -> Option<String> {
        planned(text).map(|(c, _)| c)
    }

    /// "pull this window into the column on the left" and "out of the column": a place said
    /// ("out of") picks the name that says one, not the "into" of consume.
    #[test]
    fn a_window_is_pulled_into_a_column_or_taken_out_of_it() {
        assert_eq!(
            command("pull this window into the column on the left").as_deref(),
            Some("consume-or-expel-window-left")
        );
        assert_eq!(
            command("take this window out of the column").as_deref(),
            Some("expel-window-from-column")
        );
        assert_eq!(
            command("pull this window out of its column").as_deref(),
            Some("expel-window-from-column")
        );
        assert_eq!(
            command("pull the next window into this column").as_deref(),
            Some("consume-window-into-column")
        );
        assert_eq!(
            command("move this window up in the column").as_deref(),
            Some("move-window-up")
        );
        assert_eq!(
            command("show the windows in this column as tabs").as_deref(),
            Some("toggle-column-tabbed-display")
        );
    }

    /// Every action of the table plans from its own name (a parameter said after it).
    #[test]
    fn every_action_of_the_table_plans_from_its_own_name() {
        let mut failed = Vec::new();
        for action in sayables().iter().filter(|a| a.said == a.command) {
            let words = action.command.replace('-', " ");
            let (text, args) = match &action.slot {
                Slot::None => (words, vec![]),
                Slot::Index => (format!("{words} 3"), vec![json!(3)]),
                Slot::Size(_) => (format!("{words} 40 percent"), vec![json!("40%")]),
                Slot::Other => continue,
            };
            match planned(&text) {
                Some((c, a)) if c == action.command && a == args => {}
                other => failed.push(format!("{text:?} → {other:?}")),
            }
        }
        assert!(failed.is_empty(), "{failed:#?}");
    }

    #[test]
    fn the_shared_words_say_the_actions_in_any_order() {
        for (said, want) in [
            ("focus the column on the left", "focus-column-left"),
            ("go one column to the right", "focus-column-right"),
            ("next column", "focus-column-right"),
            ("jump to the very last column", "focus-column-last"),
            ("select the window above this one", "focus-window-up"),
            (
                "switch back to the previous window",
                "focus-window-previous",
            ),
            (
                "move this column to the workspace above",
                "move-column-to-workspace-up",
            ),
            (
                "shove this column down one workspace",
                "move-column-to-workspace-down",
            ),
            ("move the window down", "move-window-down"),
            ("move this window up in the column", "move-window-up"),
            (
                "put this window into the column on the left",
                "consume-or-expel-window-left",
            ),
            (
                "pop this window out of its column to the right",
                "consume-or-expel-window-right",
            ),
            (
                "swap this column with the one on its right",
                "move-column-right",
            ),
            ("centre this column", "center-column"),
            (
                "send this window to the left screen",
                "move-window-to-monitor-left",
            ),
            ("go to the other monitor", "focus-monitor-next"),
            (
                "move the workspace to the monitor on the right",
                "move-workspace-to-monitor-right",
            ),
            ("toggle tabbed display", "toggle-column-tabbed-display"),
            ("show me the overview", "open-overview"),
            (
                "send this column one workspace down",
                "move-column-to-workspace-down",
            ),
            (
                "move this column all the way to the left",
                "move-column-to-first",
            ),
            ("make this column tabbed", "toggle-column-tabbed-display"),
            (
                "switch this column to tabbed mode",
                "toggle-column-tabbed-display",
            ),
            (
                "stick this window into the column on the left",
                "consume-or-expel-window-left",
            ),
            (
                "switch focus to the floating windows",
                "switch-focus-between-floating-and-tiling",
            ),
            (
                "cycle through the preset window heights",
                "switch-preset-window-height",
            ),
            ("show me the hotkeys", "show-hotkey-overlay"),
            ("jump to the last window", "focus-column-last"),
            (
                "go all the way to the last window on the right",
                "focus-column-last",
            ),
            ("jump to the first window on the left", "focus-column-first"),
            (
                "take me back to the workspace i was just on",
                "focus-workspace-previous",
            ),
            ("toggle floating for this window", "toggle-window-floating"),
            ("focus the next column to the right", "focus-column-right"),
            ("widen this column by ten percent", "set-column-width"),
            ("cycle the column width", "switch-preset-column-width"),
            ("expand the column", "expand-column-to-available-width"),
            ("focus left", "focus-column-left"),
            ("move down", "move-window-down"),
            ("turn off the screens", "power-off-monitors"),
        ] {
            assert_eq!(command(said).as_deref(), Some(want), "{said:?}");
        }
        assert_eq!(
            planned("send the column to workspace four"),
            Some(("move-column-to-workspace".into(), vec![json!(4)]))
        );
        assert_eq!(
            planned("move this to workspace 3"),
            Some(("move-window-to-workspace".into(), vec![json!(3)]))
        );
        assert_eq!(
            planned("focus column three"),
            Some(("focus-column".into(), vec![json!(3)]))
        );
        assert_eq!(
            planned("the third column"),
            Some(("focus-column".into(), vec![json!(3)]))
        );
    }

    #[test]
    fn sizes_are_planned_along_the_axis_said() {
        for (said, want, change) in [
            ("make this column a bit wider", "set-column-width", "+5%"),
            ("make the column narrower", "set-column-width", "-10%"),
            ("make the window taller", "set-window-height", "+10%"),
            ("make the window a lot shorter", "set-window-height", "-20%"),
            (
                "make the column half the screen width",
                "set-column-width",
                "50%",
            ),
            (
                "set the column width to 40 percent",
                "set-column-width",
                "40%",
            ),
            ("two thirds width", "set-column-width", "66.667%"),
        ] {
            assert_eq!(
                planned(said),
                Some((want.to_owned(), vec![json!(change)])),
                "{said:?}"
            );
        }
    }

    #[test]
    fn words_it_does_not_know_plan_nothing() {
        for said in [
            "next tab",
            "go back",
            "close",
            "select all",
            "switch to firefox",
            "scroll down",
            "go to the end of the line",
            "move the window to the trash",
            "make it bold",
            "focus column 3 and 4",
            "page down",
            "open a new window",
        ] {
            assert_eq!(planned(said), None, "{said:?}");
        }
    }

    #[test]
    fn destructive_actions_ask_first() {
        let m = plan("close the focused window").expect("planned");
        assert_eq!(m.args["command"], "close-window");
        assert!(m.confirm);
        assert!(plan("power off the monitors").expect("planned").confirm);
    }
}
