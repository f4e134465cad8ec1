//! Choosing the element a person described ("the blue button") among the actionable nodes of
//! the focused application.
//!
//! The description is the person's own words; the candidates' names come from the screen
//! and are untrusted, so they only *select*: nothing of a name is ever used as an argument.
//! Both sides are normalised the same way (lower case, punctuation as spaces, words), the
//! articles "the", "a", "an" are dropped from the description, and a word of the description
//! that names the candidate's role ("button" for a push button, "link" for a link) is dropped
//! for that candidate unless its own name carries the word too, and so is a word that only
//! says what kind of thing it is ("the general channel", "the invoices folder").
//!
//! A candidate whose words equal the description's scores [`Score::Exact`]; one whose name
//! contains every word of the description scores [`Score::Contains`]; the rest do not match.
//! Exactly one candidate with the best score is a clear match.

/// How well one candidate matches a description.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Score {
    /// No match.
    None,
    /// The candidate's name contains every word of the description.
    Contains,
    /// The candidate's name is the description, word for word.
    Exact,
}

/// One element that may be clicked: its role name (as AT-SPI spells it) and its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The role's name, e.g. `"push button"`.
    pub role: String,
    /// The accessible name, e.g. `"Blue Button"` (untrusted).
    pub name: String,
}

/// What [`choose`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// Exactly one clear match: its index among the candidates.
    One(usize),
    /// Several candidates matched equally well: their indices.
    Several(Vec<usize>),
    /// Nothing matched: the indices of up to five candidates that came closest.
    Nothing(Vec<usize>),
}

/// Words dropped from every description.
const ARTICLES: [&str; 3] = ["the", "a", "an"];

/// The words a person may use for each role, dropped from the description for a candidate
/// of that role.
fn role_words(role: &str) -> &'static [&'static str] {
    match role {
        "push button" | "button" => &["button"],
        "toggle button" => &["button", "toggle"],
        "link" => &["link"],
        "menu item" => &["menu", "item", "entry"],
        "check menu item" => &["menu", "item", "check", "checkbox"],
        "radio menu item" => &["menu", "item", "radio", "option"],
        "check box" => &["checkbox", "check", "box", "tickbox"],
        "radio button" => &["radio", "button", "option"],
        _ => &[],
    }
}

/// Lower-case words of `text`: every character that is not a letter or digit separates.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Words people add to a name to say what kind of thing it is, whatever its role ("the
/// general channel", "the invoices folder"): dropped unless the candidate's name has them.
const KIND_WORDS: &[&str] = &[
    "channel",
    "folder",
    "chat",
    "conversation",
    "contact",
    "tab",
    "icon",
    "option",
    "setting",
    "entry",
    "item",
];

/// The description's words as they apply to `candidate`.
fn description_for(description: &[String], candidate_words: &[String], role: &str) -> Vec<String> {
    let drop = role_words(role);
    description
        .iter()
        .filter(|w| !ARTICLES.contains(&w.as_str()))
        .filter(|w| {
            !(drop.contains(&w.as_str()) || KIND_WORDS.contains(&w.as_str()))
                || candidate_words.contains(w)
        })
        .cloned()
        .collect()
}

/// How well `candidate` matches `description`.
pub fn score(description: &str, candidate: &Candidate) -> Score {
    let name = words(&candidate.name);
    let wanted = description_for(&words(description), &name, &candidate.role);
    if wanted.is_empty() || name.is_empty() {
        return Score::None;
    }
    if wanted == name {
        Score::Exact
    } else if wanted.iter().all(|w| name.contains(w)) {
        Score::Contains
    } else {
        Score::None
    }
}

/// How many of the description's words the candidate's name shares (for "did you mean").
fn overlap(description: &str, candidate: &Candidate) -> usize {
    let name = words(&candidate.name);
    words(description)
        .iter()
        .filter(|w| !ARTICLES.contains(&w.as_str()))
        .filter(|w| name.iter().any(|n| n == *w || n.starts_with(w.as_str())))
        .count()
}

/// Choose among `candidates` for `description` (see the module docs).
pub fn choose(description: &str, candidates: &[Candidate]) -> Choice {
    let scores: Vec<Score> = candidates.iter().map(|c| score(description, c)).collect();
    let best = scores.iter().copied().max().unwrap_or(Score::None);
    if best == Score::None {
        let mut near: Vec<(usize, usize)> = candidates
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.name.trim().is_empty())
            .map(|(i, c)| (overlap(description, c), i))
            .collect();
        // The closest first; among equals, the tree's order.
        near.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut seen: Vec<&str> = Vec::new();
        let mut out = Vec::new();
        for (_, i) in near {
            let name = candidates[i].name.as_str();
            if seen.contains(&name) {
                continue;
            }
            seen.push(name);
            out.push(i);
            if out.len() == 5 {
                break;
            }
        }
        return Choice::Nothing(out);
    }
    let top: Vec<usize> = (0..candidates.len())
        .filter(|&i| scores[i] == best)
        .collect();
    if top.len() == 1 {
        Choice::One(top[0])
    } else {
        Choice::Several(top)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(role: &str, name: &str) -> Candidate {
        Candidate {
            role: role.into(),
            name: name.into(),
        }
    }

    fn form() -> Vec<Candidate> {
        vec![
            c("push button", "Blue Button"),
            c("push button", "Red Button"),
            c("link", "Help"),
            c("push button", "OK"),
        ]
    }

    #[test]
    fn the_blue_button_is_the_blue_button() {
        assert_eq!(choose("the blue button", &form()), Choice::One(0));
        assert_eq!(choose("Blue", &form()), Choice::One(0));
        assert_eq!(choose("red!", &form()), Choice::One(1));
        assert_eq!(choose("the RED button.", &form()), Choice::One(1));
    }

    #[test]
    fn role_words_are_dropped_only_for_that_role() {
        assert_eq!(choose("the ok button", &form()), Choice::One(3));
        assert_eq!(choose("help link", &form()), Choice::One(2));
        // "link" is not a word for a push button: "ok link" names nothing.
        assert!(matches!(choose("ok link", &form()), Choice::Nothing(_)));
    }

    #[test]
    fn words_that_only_say_a_kind_are_dropped_unless_the_name_has_them() {
        let list = vec![
            c("list item", "# general"),
            c("list item", "# random"),
            c("push button", "Channel settings"),
        ];
        assert_eq!(choose("the general channel", &list), Choice::One(0));
        assert_eq!(choose("channel settings", &list), Choice::One(2));
        assert!(matches!(
            choose("the music channel", &list),
            Choice::Nothing(_)
        ));
    }

    #[test]
    fn button_alone_is_ambiguous() {
        match choose("button", &form()) {
            Choice::Several(v) => assert_eq!(v, vec![0, 1]),
            other => panic!("{other:?}"),
        }
        assert!(matches!(choose("the", &form()), Choice::Nothing(_)));
    }

    #[test]
    fn an_exact_name_beats_a_containing_one() {
        let list = vec![c("push button", "Save"), c("push button", "Save As")];
        assert_eq!(choose("save", &list), Choice::One(0));
        assert_eq!(choose("save as", &list), Choice::One(1));
    }

    #[test]
    fn nothing_lists_the_closest_names_first() {
        match choose("the green button", &form()) {
            Choice::Nothing(v) => {
                assert!(v.len() <= 5);
                assert_eq!(v.len(), 4);
            }
            other => panic!("{other:?}"),
        }
        let many: Vec<Candidate> = (0..10)
            .map(|i| c("push button", &format!("Item {i}")))
            .collect();
        match choose("purple", &many) {
            Choice::Nothing(v) => assert_eq!(v.len(), 5),
            other => panic!("{other:?}"),
        }
    }
}
