//! "What can I say?": the router's kinds of command with examples, served as
//! `router.examples {context?, all?}` → `{categories: [{name, about, examples: [{say, op,
//! focused?}]}]}` (side-effect-free) for the settings app's Commands page and `utter
//! commands`.
//!
//! The built-in categories are a file (`data/examples.toml`, embedded). A request that
//! carries a desktop context (the `router.plan` shape, [`Context`]) gets two more, first
//! ([`for_context`]): the focused application's, made from its profile's shortcuts and
//! commands ("In Firefox": `new tab` → `key`), and, where the compositor may be niri, the
//! compositor actions said by the words of their own names ("focus column left" → `niri`),
//! chosen to cover many verbs. `all: true` adds every other profile's category too.
//!
//! Nothing is shown that does not plan as it says: the built-in file is checked by this
//! crate's tests, each of its examples is planned where it is asked for and shown with the
//! op it plans to there, or left out when it plans nothing ([`as_planned`]: an application
//! that is not installed), and every generated example is planned before it is offered (the
//! caller's `plans_as`), so a profile phrase another rule takes first is left out.

use crate::context::Context;
use crate::phrases::is_destructive;
use crate::profiles::{Command, Profile, Profiles};
use crate::space::{Slot, sayables};
use serde::{Deserialize, Serialize};

/// The built-in examples file.
pub const BUILTIN_TOML: &str = include_str!("../../../data/examples.toml");

/// The examples, by category, in the file's order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Examples {
    /// `[[category]]` in the file, `categories` on the wire.
    #[serde(rename(serialize = "categories", deserialize = "category"))]
    pub categories: Vec<Category>,
}

/// One kind of command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Category {
    /// The heading, e.g. `Websites`.
    pub name: String,
    /// One line on what these commands do.
    pub about: String,
    /// What to say, in order.
    pub examples: Vec<Example>,
}

/// One thing to say.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Example {
    /// The words, e.g. `open youtube`.
    pub say: String,
    /// The op of the plan's first step, e.g. `ensure_url`.
    pub op: String,
    /// The `app_id` of the window that must be focused for it, when one must.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub focused: Option<String>,
}

impl Examples {
    /// The built-in examples.
    ///
    /// # Errors
    /// When the embedded file does not parse (a build of a broken file; the tests catch it).
    pub fn builtin() -> Result<Examples, String> {
        toml::from_str(BUILTIN_TOML).map_err(|e| format!("data/examples.toml: {e}"))
    }
}

/// The most examples of one application's category.
pub const MAX_APP_EXAMPLES: usize = 40;

/// The most examples of the compositor category.
pub const MAX_COMPOSITOR_EXAMPLES: usize = 30;

/// The heading of the compositor category.
pub const COMPOSITOR_CATEGORY: &str = "Compositor actions (niri)";

/// Whether `say`, planned in `context`, gives a first step of op `op`: the router's own
/// planner, which [`for_context`] asks before it offers an example.
pub trait PlansAs {
    /// True when the plan of `say` in `context` starts with a step of `op`.
    fn plans_as(&mut self, say: &str, context: Option<&Context>, op: &str) -> bool;
}

impl<F: FnMut(&str, Option<&Context>, &str) -> bool> PlansAs for F {
    fn plans_as(&mut self, say: &str, context: Option<&Context>, op: &str) -> bool {
        self(say, context, op)
    }
}

/// The answer to `router.examples {context?, all?}`.
///
/// Without a context (and without `all`) it is `builtin` unchanged. With a context it is, in
/// order: the focused application's category ([`app_category`], when a profile has the
/// focused window's `app_id`), the compositor category ([`compositor_category`], unless the
/// context names a compositor other than niri), with `all` every other profile's category
/// (each planned as if a window of it were focused), then `builtin`'s categories. A
/// generated category with no example that plans is left out.
pub fn for_context(
    builtin: Examples,
    context: Option<&Context>,
    profiles: &Profiles,
    all: bool,
    mut plans_as: impl PlansAs,
) -> Examples {
    let mut categories = Vec::new();
    let focused = context.and_then(|c| {
        let app_id = c.focused_app_id.as_deref()?;
        Some((profiles.for_app_id(app_id)?, app_id))
    });
    if let Some((profile, app_id)) = focused {
        categories.extend(app_category(profile, app_id, context, &mut plans_as));
    }
    if (context.is_some() || all) && Context::may_be_niri(context) {
        categories.extend(compositor_category(context, &mut plans_as));
    }
    if all {
        for profile in profiles.iter() {
            if focused.is_some_and(|(p, _)| p.id == profile.id) {
                continue;
            }
            let Some(app_id) = profile.app_ids.first() else {
                continue;
            };
            let there = focused_on(context, app_id);
            categories.extend(app_category(profile, app_id, Some(&there), &mut plans_as));
        }
    }
    categories.extend(builtin.categories);
    Examples { categories }
}

/// `examples` as they plan in `context`: each is planned (with a window of its `focused`
/// app_id focused, when it names one) and shown with the op its plan starts with, or left
/// out when it plans nothing here ("launch the calculator" with no calculator installed);
/// a category left empty is left out. `first_op` is the router's planner: the op of the
/// first step it plans for `say` in a context, `None` when it plans none.
pub fn as_planned(
    examples: Examples,
    context: Option<&Context>,
    mut first_op: impl FnMut(&str, Option<&Context>) -> Option<String>,
) -> Examples {
    let categories = examples
        .categories
        .into_iter()
        .filter_map(|mut category| {
            category.examples.retain_mut(|example| {
                let planned = match &example.focused {
                    Some(app_id) => first_op(&example.say, Some(&focused_on(context, app_id))),
                    None => first_op(&example.say, context),
                };
                match planned {
                    Some(op) => {
                        example.op = op;
                        true
                    }
                    None => false,
                }
            });
            (!category.examples.is_empty()).then_some(category)
        })
        .collect();
    Examples { categories }
}

/// `context` (or an empty one) with a window of `app_id` focused.
fn focused_on(context: Option<&Context>, app_id: &str) -> Context {
    let mut there = context.cloned().unwrap_or_default();
    there.app_ids.retain(|a| a != app_id);
    there.app_ids.insert(0, app_id.to_owned());
    there.focused_app_id = Some(app_id.to_owned());
    there
}

/// What a profile offers to say, in its file's order (shortcuts by name, then commands):
/// `(phrase, op, what it does)`, the last telling apart phrases that do the same thing.
fn profile_phrases(profile: &Profile) -> Vec<(String, String, String)> {
    let shortcuts = profile
        .shortcuts
        .iter()
        .map(|(name, chord)| (name.clone(), "key".to_owned(), format!("key {chord}")));
    let commands = profile
        .commands
        .iter()
        .map(|(phrase, command)| match command {
            Command::Chord(chord) => (phrase.clone(), "key".to_owned(), format!("key {chord}")),
            Command::Step { op, args } => (phrase.clone(), op.clone(), format!("{op} {args}")),
        });
    shortcuts.chain(commands).collect()
}

/// The category of one application: "In Firefox", each of its profile's shortcuts and
/// commands said by its phrase, with `focused: app_id`, at most [`MAX_APP_EXAMPLES`]. One
/// phrase of each different effect comes first ("clear" but not also "clear the screen"),
/// then the other phrases while there is room; they are listed in the profile's order. Only
/// the phrases that plan in `context` to the op they state are offered. `None` when none does.
pub fn app_category(
    profile: &Profile,
    app_id: &str,
    context: Option<&Context>,
    plans_as: &mut impl PlansAs,
) -> Option<Category> {
    let phrases = profile_phrases(profile);
    let mut seen_effects: Vec<&str> = Vec::new();
    let (first, rest): (Vec<usize>, Vec<usize>) = (0..phrases.len()).partition(|&i| {
        let effect = phrases[i].2.as_str();
        let new = !seen_effects.contains(&effect);
        if new {
            seen_effects.push(effect);
        }
        new
    });
    let mut chosen: Vec<usize> = Vec::new();
    for i in first.into_iter().chain(rest) {
        if chosen.len() >= MAX_APP_EXAMPLES {
            break;
        }
        let (say, op, _) = &phrases[i];
        if plans_as.plans_as(say, context, op) {
            chosen.push(i);
        }
    }
    if chosen.is_empty() {
        return None;
    }
    chosen.sort_unstable();
    Some(Category {
        name: format!("In {}", profile.name),
        about: format!(
            "{}'s own shortcuts and commands, while its window is focused; from the profile {}",
            profile.name, profile.source
        ),
        examples: chosen
            .into_iter()
            .map(|i| Example {
                say: phrases[i].0.clone(),
                op: phrases[i].1.clone(),
                focused: Some(app_id.to_owned()),
            })
            .collect(),
    })
}

/// The compositor actions that can be offered, as said: those of the action table with no
/// parameter that are not destructive (they would ask first), by the words of their own
/// names, in the table's order, each with its kind, the first two words of its name:
/// `("focus column left", "focus-column")`.
fn compositor_phrases() -> Vec<(String, String)> {
    sayables()
        .iter()
        .filter(|s| s.said == s.command && s.slot == Slot::None && !is_destructive(&s.command))
        .map(|s| {
            let kind = s
                .command
                .splitn(3, '-')
                .take(2)
                .collect::<Vec<_>>()
                .join("-");
            (s.command.replace('-', " "), kind)
        })
        .collect()
}

/// The compositor category: niri actions said by the words of their names, all of op
/// `niri`, at most [`MAX_COMPOSITOR_EXAMPLES`]. The first action of every verb comes first
/// (focus, move, toggle, screenshot, …); the room left is shared a kind at a time, a kind
/// being a verb with what it acts on (the first "focus column" action, the first "focus
/// window" one, the first "move workspace" one, …, then the second of each). They are
/// listed in the table's order. Only those that plan in `context` to `niri` are offered.
/// `None` when none does.
pub fn compositor_category(
    context: Option<&Context>,
    plans_as: &mut impl PlansAs,
) -> Option<Category> {
    let phrases = compositor_phrases();
    let verb = |i: usize| phrases[i].1.split('-').next().unwrap_or_default();
    let mut order: Vec<usize> = Vec::with_capacity(phrases.len());
    for i in 0..phrases.len() {
        if !order.iter().any(|&j| verb(j) == verb(i)) {
            order.push(i);
        }
    }
    let mut kinds: Vec<&str> = Vec::new();
    for (_, kind) in &phrases {
        if !kinds.contains(&kind.as_str()) {
            kinds.push(kind);
        }
    }
    // Round robin: the n-th phrase of every kind before the (n+1)-th of any.
    let by_kind: Vec<Vec<usize>> = kinds
        .iter()
        .map(|k| (0..phrases.len()).filter(|&i| phrases[i].1 == *k).collect())
        .collect();
    // A verb's first phrase was its kind's first: that kind's second waits for the others'.
    let mut round = 0;
    while by_kind.iter().any(|l| round < l.len()) {
        for i in by_kind.iter().filter_map(|l| l.get(round).copied()) {
            if !order.contains(&i) {
                order.push(i);
            }
        }
        round += 1;
    }
    let mut chosen: Vec<usize> = Vec::new();
    for i in order {
        if chosen.len() >= MAX_COMPOSITOR_EXAMPLES {
            break;
        }
        if plans_as.plans_as(&phrases[i].0, context, "niri") {
            chosen.push(i);
        }
    }
    if chosen.is_empty() {
        return None;
    }
    chosen.sort_unstable();
    Some(Category {
        name: COMPOSITOR_CATEGORY.to_owned(),
        about: "Any niri action, said by the words of its name (the Windows and workspaces \
                category has shorter ways)"
            .to_owned(),
        examples: chosen
            .into_iter()
            .map(|i| Example {
                say: phrases[i].0.clone(),
                op: "niri".to_owned(),
                focused: None,
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_file_parses_and_every_category_has_examples() {
        let examples = Examples::builtin().expect("parses");
        assert!(examples.categories.len() >= 10);
        for c in &examples.categories {
            assert!(!c.examples.is_empty(), "{} has no examples", c.name);
            assert!(!c.about.is_empty());
        }
    }

    /// Says yes to everything, and remembers what it was asked.
    fn yes(asked: &mut Vec<String>) -> impl FnMut(&str, Option<&Context>, &str) -> bool + '_ {
        |say, _, _| {
            asked.push(say.to_owned());
            true
        }
    }

    #[test]
    fn the_compositor_category_shows_every_verb_and_no_destructive_action() {
        let mut asked = Vec::new();
        let category = compositor_category(None, &mut yes(&mut asked)).expect("a category");
        assert_eq!(category.examples.len(), MAX_COMPOSITOR_EXAMPLES);
        assert_eq!(
            asked.len(),
            MAX_COMPOSITOR_EXAMPLES,
            "no more planned than needed"
        );
        let said: Vec<&str> = category.examples.iter().map(|e| e.say.as_str()).collect();
        let mut verbs: Vec<String> = Vec::new();
        for (say, _) in compositor_phrases() {
            let verb = say.split(' ').next().expect("a verb").to_owned();
            if !verbs.contains(&verb) {
                verbs.push(verb);
            }
        }
        // Every verb of the table, as long as there is room for one of each.
        for verb in verbs.iter().take(MAX_COMPOSITOR_EXAMPLES) {
            assert!(
                said.iter()
                    .any(|s| s.split(' ').next() == Some(verb.as_str())),
                "no {verb:?} in {said:?}"
            );
        }
        for say in [
            "focus column left",
            "focus window down",
            "move workspace down",
        ] {
            assert!(said.contains(&say), "{say:?} not in {said:?}");
        }
        for destructive in ["close window", "quit", "power off monitors"] {
            assert!(!said.contains(&destructive), "{said:?}");
        }
        assert!(
            category
                .examples
                .iter()
                .all(|e| e.op == "niri" && e.focused.is_none())
        );
        // Listed in the table's order.
        let table: Vec<String> = compositor_phrases().into_iter().map(|(s, _)| s).collect();
        let at = |s: &str| table.iter().position(|t| t == s).expect("in the table");
        assert!(said.windows(2).all(|w| at(w[0]) < at(w[1])), "{said:?}");
    }

    #[test]
    fn a_phrase_that_plans_otherwise_is_left_out_and_the_next_takes_its_place() {
        let mut plans_as = |say: &str, _: Option<&Context>, _: &str| say != "focus column left";
        let category = compositor_category(None, &mut plans_as).expect("a category");
        let said: Vec<&str> = category.examples.iter().map(|e| e.say.as_str()).collect();
        assert!(!said.contains(&"focus column left"), "{said:?}");
        assert_eq!(said.len(), MAX_COMPOSITOR_EXAMPLES);
        let mut nothing = |_: &str, _: Option<&Context>, _: &str| false;
        assert!(compositor_category(None, &mut nothing).is_none());
    }

    #[test]
    fn an_application_shows_one_phrase_per_effect_before_synonyms_and_at_most_forty() {
        // 30 different chords, each said three ways: 90 phrases.
        let mut text = String::from(
            "id = \"many\"\nname = \"Many\"\nkind = \"app\"\napp_ids = [\"org.many\"]\n[commands]\n",
        );
        for n in 1..=30 {
            let chord = format!("ctrl+{}", ["a", "b", "c", "d", "e", "f"][n % 6]);
            let chord = format!(
                "{chord}{}",
                ["", "+shift", "+alt", "+super", "+shift+alt"][n / 6 % 5]
            );
            for how in ["do", "please do", "now do"] {
                text.push_str(&format!("\"{how} thing {}\" = \"{chord}\"\n", words(n)));
            }
        }
        let profile = crate::profiles::parse(&text, "many.toml").expect("parses");
        let mut asked = Vec::new();
        let category =
            app_category(&profile, "org.many", None, &mut yes(&mut asked)).expect("a category");
        assert_eq!(category.name, "In Many");
        assert_eq!(category.examples.len(), MAX_APP_EXAMPLES);
        let mut effects: Vec<&String> = category
            .examples
            .iter()
            .map(|e| {
                let command = &profile.commands[&e.say];
                match command {
                    Command::Chord(chord) => chord,
                    Command::Step { op, .. } => op,
                }
            })
            .collect();
        effects.sort_unstable();
        effects.dedup();
        assert_eq!(effects.len(), 30, "every effect is shown once at least");
        assert!(
            category
                .examples
                .iter()
                .all(|e| e.op == "key" && e.focused.as_deref() == Some("org.many"))
        );
    }

    /// `1` → `one`…: phrase words without digits.
    fn words(n: usize) -> String {
        const ONES: [&str; 10] = [
            "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
        ];
        format!("{} {}", ONES[n / 10], ONES[n % 10])
    }

    #[test]
    fn builtin_examples_show_the_op_they_plan_to_here_or_are_left_out() {
        let builtin = Examples {
            categories: vec![
                Category {
                    name: "Applications".into(),
                    about: "apps".into(),
                    examples: vec![
                        Example {
                            say: "open firefox".into(),
                            op: "launch_app".into(),
                            focused: None,
                        },
                        Example {
                            say: "launch the calculator".into(),
                            op: "launch_app".into(),
                            focused: None,
                        },
                    ],
                },
                Category {
                    name: "Nothing here".into(),
                    about: "none".into(),
                    examples: vec![Example {
                        say: "launch the calculator".into(),
                        op: "launch_app".into(),
                        focused: None,
                    }],
                },
                Category {
                    name: "In the application".into(),
                    about: "keys".into(),
                    examples: vec![Example {
                        say: "new tab".into(),
                        op: "key".into(),
                        focused: Some("firefox".into()),
                    }],
                },
            ],
        };
        let mut asked = Vec::new();
        let planned = as_planned(builtin, None, |say: &str, context: Option<&Context>| {
            asked.push((
                say.to_owned(),
                context.and_then(|c| c.focused_app_id.clone()),
            ));
            match say {
                "open firefox" => Some("ensure_app".to_owned()),
                "new tab"
                    if context.is_some_and(|c| c.focused_app_id.as_deref() == Some("firefox")) =>
                {
                    Some("key".to_owned())
                }
                _ => None,
            }
        });
        let names: Vec<&str> = planned.categories.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["Applications", "In the application"]);
        assert_eq!(planned.categories[0].examples.len(), 1);
        assert_eq!(planned.categories[0].examples[0].op, "ensure_app");
        assert_eq!(planned.categories[1].examples[0].op, "key");
        assert!(asked.contains(&("new tab".to_owned(), Some("firefox".to_owned()))));
    }

    #[test]
    fn no_context_is_the_builtin_list_and_sway_gets_no_niri_actions() {
        let builtin = Examples::builtin().expect("parses");
        let profiles = Profiles::builtin();
        let mut asked = Vec::new();
        let answer = for_context(builtin.clone(), None, &profiles, false, yes(&mut asked));
        assert_eq!(answer, builtin);
        assert!(asked.is_empty(), "nothing planned without a context");
        let sway = Context {
            compositor: Some("sway".into()),
            app_ids: vec!["firefox".into()],
            focused_app_id: Some("firefox".into()),
        };
        let answer = for_context(
            builtin.clone(),
            Some(&sway),
            &profiles,
            false,
            yes(&mut asked),
        );
        assert_eq!(answer.categories[0].name, "In Firefox");
        assert_eq!(answer.categories[1..], builtin.categories[..]);
        let all = for_context(
            builtin.clone(),
            Some(&sway),
            &profiles,
            true,
            yes(&mut asked),
        );
        let generated = all.categories.len() - builtin.categories.len();
        assert_eq!(
            generated,
            profiles.iter().filter(|p| !p.app_ids.is_empty()).count(),
            "one category per profile of an application, none for niri"
        );
    }
}
