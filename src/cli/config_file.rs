//! `utter config migrate [PATH] [--dry-run] [--json]`: rewrite a configuration file in an
//! older format to the current `config_version` ([`utter_core::config::migrate`]), keeping
//! every comment, the order and the formatting. The file is replaced atomically after a copy
//! of the original is kept beside it (`PATH.v<old version>.bak`); `--dry-run` prints the
//! changes and the new text and writes nothing (`--json`: `{path, from, to, changes, written,
//! backup, text}`). A file whose migrated form would still be
//! invalid is never written (exit 3, with `file:line: key` errors).
//!
//! `utter config set KEY VALUE [--dry-run] [--json]`: change one value in place
//! ([`utter_core::config::set_in_file`]): comments, order and layout stay, and nothing is
//! written when the result would not pass `utter check-config` (exit 3). `--json`:
//! `{path, key, value, changed, written, text?}`.
//!
//! `utter config default`: the built-in default config, which every file is layered over.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use serde_json::json;
use utter_core::config;

use super::output::{exit, out};

/// What `utter config` does.
#[derive(clap::Subcommand)]
pub enum Action {
    /// Rewrite a config in an older format to the current config_version, keeping its
    /// comments (a copy of the original is kept as PATH.v<N>.bak).
    ///
    /// Example: utter config migrate --dry-run
    Migrate(MigrateArgs),
    /// Change one value of the config file in place, keeping its comments; nothing is
    /// written when the result would not pass check-config. The running service reads it on
    /// `utter reload`.
    ///
    /// Examples: utter config set ptt.evdev true;
    /// utter config set ptt.evdev_key KEY_PAUSE;
    /// utter config set policy.enabled_ops '["terminal"]'
    Set(SetArgs),
    /// Print the built-in default config, every key with its comment: what a config file is
    /// layered over (a key the file leaves out has the value printed here).
    ///
    /// Example: utter config default > ~/.config/utter/config.toml
    Default,
}

/// The arguments of `utter config set`.
#[derive(clap::Args)]
pub struct SetArgs {
    /// The dotted key: ptt.evdev, audio.vad.trim, policy.enabled_ops, ...
    key: String,
    /// The value, read as TOML (true, 200, "text", ["a", "b"]); anything that is not TOML is
    /// taken as a string (KEY_PAUSE).
    #[arg(allow_hyphen_values = true)]
    value: String,
    /// Print the new text; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print JSON: {path, key, value, changed, written, text} (text with --dry-run).
    #[arg(long)]
    json: bool,
}

/// The arguments of `utter config migrate`.
#[derive(clap::Args)]
pub struct MigrateArgs {
    /// The file (default: --config, else $XDG_CONFIG_HOME/utter/config.toml).
    path: Option<PathBuf>,
    /// Print the changes and the migrated text; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print JSON: {path, from, to, changes, written, backup, text} (text: the migrated file,
    /// with --dry-run).
    #[arg(long)]
    json: bool,
}

/// Run `utter config ACTION`.
pub fn run(action: &Action, config: Option<PathBuf>) -> u8 {
    match action {
        Action::Migrate(args) => migrate(args, config),
        Action::Set(args) => set(args, config),
        Action::Default => {
            print!("{}", config::DEFAULT_CONFIG);
            exit::OK
        }
    }
}

fn set(args: &SetArgs, config: Option<PathBuf>) -> u8 {
    let Some(path) = config.or_else(config::user_config_path) else {
        eprintln!("utter config set: XDG_CONFIG_HOME and HOME are unset; pass --config PATH");
        return exit::USAGE;
    };
    // TOML when it reads as a TOML value, else the words as they are.
    let value: toml_edit::Value = args
        .value
        .parse()
        .unwrap_or_else(|_| toml_edit::Value::from(args.value.as_str()));
    let edits = [(args.key.clone(), value.clone())];
    let edited = match config::set_in_file(&path, &edits, !args.dry_run) {
        Ok(edited) => edited,
        Err(e) => {
            for issue in &e.errors {
                eprintln!("error: {issue}");
            }
            eprintln!("utter config set: nothing was written");
            return exit::CONFIG;
        }
    };
    for issue in &edited.warnings {
        eprintln!("warning: {issue}");
    }
    let changed = !edited.changed.is_empty();
    let written = changed && !args.dry_run;
    let shown = {
        let mut v = value.clone();
        v.decor_mut().clear();
        v.to_string()
    };
    if args.json {
        out!(
            "{}",
            json!({
                "path": path.display().to_string(),
                "key": args.key,
                "value": shown,
                "changed": changed,
                "written": written,
                "text": args.dry_run.then_some(&edited.text),
            })
        );
        return exit::OK;
    }
    if args.dry_run {
        out!("{}", edited.text.trim_end());
    }
    match (changed, written) {
        (false, _) => out!("{} = {shown} already in {}", args.key, path.display()),
        (true, true) => out!(
            "set {} = {shown} in {} (the running service reads it on `utter reload`)",
            args.key,
            path.display()
        ),
        (true, false) => out!("would set {} = {shown} in {}", args.key, path.display()),
    }
    exit::OK
}

fn migrate(args: &MigrateArgs, config: Option<PathBuf>) -> u8 {
    let Some(path) = args
        .path
        .clone()
        .or(config)
        .or_else(config::user_config_path)
    else {
        eprintln!(
            "utter config migrate: no config file is named and XDG_CONFIG_HOME and HOME are unset; pass PATH"
        );
        return exit::USAGE;
    };
    // A link is written through to its target (a dotfile manager's link stays a link).
    let path = std::fs::canonicalize(&path).unwrap_or(path);
    let text = match utter_core::paths::read_regular_file(&path, config::MAX_CONFIG_BYTES) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!(
                "utter config migrate: {} does not exist: nothing to migrate (the built-in default is current)",
                path.display()
            );
            return exit::CONFIG;
        }
        Err(e) => {
            eprintln!("utter config migrate: cannot read {}: {e}", path.display());
            return exit::CONFIG;
        }
    };
    let origin = path.display().to_string();
    let migration = match config::migrate(&text, &origin) {
        Ok(m) => m,
        Err(e) => {
            for issue in &e.errors {
                eprintln!("error: {issue}");
            }
            eprintln!(
                "utter config migrate: nothing was written; fix the errors above (see `utter check-config`)"
            );
            return exit::CONFIG;
        }
    };
    // An earlier backup is never overwritten: the next free name is used.
    let backup = (0..)
        .map(|n| {
            PathBuf::from(match n {
                0 => format!("{}.v{}.bak", path.display(), migration.from),
                n => format!("{}.v{}.bak.{n}", path.display(), migration.from),
            })
        })
        .find(|p| p.symlink_metadata().is_err())
        .expect("a free backup name");
    let write = !args.dry_run && !migration.changes.is_empty();
    if write {
        let mode = std::fs::metadata(&path)
            .map(|m| m.permissions().mode() & 0o7777)
            .unwrap_or(0o600);
        let done = utter_core::paths::write_atomic(&backup, text.as_bytes(), mode)
            .and_then(|()| utter_core::paths::write_atomic(&path, migration.text.as_bytes(), mode));
        if let Err(e) = done {
            eprintln!("utter config migrate: {e}; the file was not changed");
            return exit::NOT_DONE;
        }
    }
    if args.json {
        out!(
            "{}",
            json!({
                "path": origin,
                "from": migration.from,
                "to": migration.to,
                "changes": migration.changes,
                "written": write,
                "backup": write.then(|| backup.display().to_string()),
                "text": args.dry_run.then_some(&migration.text),
            })
        );
        return exit::OK;
    }
    if migration.changes.is_empty() {
        out!(
            "{origin} is at config_version {} already: nothing to do",
            migration.to
        );
        return exit::OK;
    }
    let verb = if write { "migrated" } else { "would migrate" };
    out!(
        "{verb} {origin} from version {} to {}:",
        migration.from,
        migration.to
    );
    for change in &migration.changes {
        out!("  - {change}");
    }
    if write {
        out!("the original is kept as {}", backup.display());
    } else {
        out!("dry run: nothing was written; the migrated file would read:\n");
        out!("{}", migration.text);
    }
    exit::OK
}
