//! "What can I say?": the router's kinds of command with examples (`data/examples.toml`,
//! embedded), served as `router.examples {}` → `{categories: [{name, about, examples: [{say,
//! op, focused?}]}]}` (side-effect-free) for the settings app's Commands page.
//!
//! The examples are checked against the router itself by this crate's tests: each is planned
//! in the window it names and must give steps whose first op is the one it states.

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
}
