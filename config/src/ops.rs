//! The ops the runner knows by name: the registry the policy engine starts from
//! (`utter_core::policy`), and the names `[policy] enabled_ops`/`disabled_ops` are checked
//! against (`crate::validate`). An action plugin may offer other ops too (its
//! `action.capabilities`); those are open strings the registry does not list.

/// The ops the policy special-cases: (op, enabled, needs confirmation, URL schemes, concrete
/// argument keys). Compatible with the older runner's registry.
pub const BUILTIN: &[(&str, bool, bool, bool, &[&str])] = &[
    ("ensure_url", true, false, true, &["url"]),
    ("open_url", true, false, true, &["url"]),
    ("close_tab", true, false, true, &["url", "site"]),
    ("terminal", false, true, false, &["command", "argv"]),
    (
        "input",
        false,
        true,
        false,
        &["text", "key", "chord", "action", "button"],
    ),
    (
        "niri",
        true,
        false,
        false,
        &["app_id", "window_id", "command"],
    ),
    ("launch_app", true, false, false, &["app_id", "command"]),
    ("ensure_app", true, false, false, &["app", "argv"]),
    ("focus_app", true, false, false, &["app", "window_id"]),
    (
        "key",
        true,
        false,
        false,
        &["chord", "key", "app", "window_id"],
    ),
    (
        "type_text",
        true,
        false,
        false,
        &["text", "app", "window_id"],
    ),
    (
        "type_keys",
        true,
        false,
        false,
        &["text", "app", "window_id"],
    ),
    (
        "delete_text",
        true,
        false,
        false,
        &["text", "at", "app", "window_id"],
    ),
    ("scroll", true, false, false, &["direction", "amount"]),
    ("media", true, false, false, &["command", "app", "player"]),
    ("click_element", true, false, false, &["description"]),
    ("click_point", true, false, false, &["x", "y"]),
    ("pointer_move", true, false, false, &["x", "y"]),
    ("search", true, false, false, &["query", "q"]),
    ("close_app", true, true, false, &["app", "window_id"]),
];

/// The names of the built-in ops, in registry order.
pub fn builtin_names() -> impl Iterator<Item = &'static str> {
    BUILTIN.iter().map(|(op, ..)| *op)
}

/// The built-in op nearest to `name` by spelling (Jaro-Winkler similarity at least 0.8),
/// for "did you mean" hints; `None` when nothing is near.
pub fn nearest(name: &str) -> Option<&'static str> {
    nearest_of(name, builtin_names())
}

/// The word of `candidates` nearest to `name` by spelling (Jaro-Winkler similarity at least
/// 0.8), for "did you mean" hints (ops, config sections); `None` when nothing is near.
pub fn nearest_of<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .map(|word| (strsim::jaro_winkler(name, word), word))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, word)| word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_finds_its_op_and_nonsense_finds_none() {
        assert_eq!(nearest("termnal"), Some("terminal"));
        assert_eq!(nearest("opne_url"), Some("open_url"));
        assert_eq!(nearest("typetext"), Some("type_text"));
        assert_eq!(nearest("zzzz"), None);
        assert!(builtin_names().any(|op| op == "terminal"));
    }
}
