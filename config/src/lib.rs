//! Utter's configuration: the file's sections as types ([`Config`]), loading and layering
//! over the embedded default ([`load`], [`parse`]), one validation per section, migration of
//! older files ([`migrate`]), edits that keep comments ([`set_values`]), and diagnostics that
//! name the file, line and key. Also the files around it: where they live ([`paths`]), the
//! speech-model catalog ([`models`]), the ops the policy knows by name ([`ops`]).
//!
//! The file is `$XDG_CONFIG_HOME/utter/config.toml` (else `~/.config/utter/config.toml`); when
//! it does not exist the default compiled from `data/config.default.toml` is used. The keys
//! are those of the older runner (`[runner]`, `[socket]`, `[security]`, `[policy]`,
//! `[plugins]`, `[[plugin]]`) plus `config_version = 1`. A file without `config_version` is
//! read as the older format, which has the same keys. Unknown keys are warnings; type errors
//! and bad values are errors that name the file, the line and the key, and say what is allowed.

#![warn(missing_docs)]

mod diagnostics;
mod edit;
mod load;
mod migrate;
pub mod models;
mod older;
pub mod ops;
pub mod paths;
mod schema;
pub mod text_style;
mod validate;

pub use diagnostics::{ConfigError, ConfigIssue};
pub use edit::{Edited, MAX_KEY_BYTES, MAX_KEY_PARTS, NEW_FILE, set_in_file, set_values};
pub use load::{default_plugins, load, parse, salvage_client_settings, user_config_path};
pub use migrate::{Migration, migrate};
pub use schema::*;

#[cfg(test)]
mod tests;
