//! `utter profiles`: the application profiles the rules router plans with: the built-in
//! ones (`data/profiles/`) and the user's (`$XDG_CONFIG_HOME/utter/profiles/*.toml`, which
//! replace a built-in one of the same id), each with its kind, window `app_id`s and how many
//! shortcuts and commands it names, and the person's own commands (`commands.toml` beside the
//! directory, meant in any application); files that do not load are listed with `file:line:
//! column: problem`. `--json` prints `{profiles: [...], problems: [...], dir, commands_file,
//! commands}`. Exit 0 when every file loaded, 3 when one did not.

use std::path::PathBuf;
use utter_rules::profiles::{self, Profiles};

use super::output::{exit, out, print_json, sanitize};

/// The arguments of `utter profiles`.
#[derive(clap::Args)]
pub struct Args {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Read the user's profiles from this directory instead of
    /// $XDG_CONFIG_HOME/utter/profiles.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Run `utter profiles`.
pub fn run(args: &Args) -> u8 {
    let dir = args.dir.clone().or_else(profiles::default_user_dir);
    if let Some(d) = args.dir.as_deref().filter(|d| !d.exists()) {
        eprintln!(
            "utter profiles: note: {} does not exist, so only the built-in profiles are listed",
            d.display()
        );
    }
    let loaded = Profiles::load(dir.as_deref());
    if args.json {
        let list: Vec<serde_json::Value> = loaded
            .iter()
            .map(|p| {
                serde_json::json!({
                    "id": p.id,
                    "name": p.name,
                    "kind": p.kind.as_str(),
                    "app_ids": p.app_ids,
                    "launch": p.launch,
                    "run": p.run,
                    "search_url": p.search_url,
                    "shortcuts": p.shortcuts,
                    "commands": p.commands.keys().collect::<Vec<_>>(),
                    "source": p.source,
                })
            })
            .collect();
        print_json(&serde_json::json!({
            "profiles": list,
            "problems": loaded.problems,
            "dir": dir,
            "commands_file": dir.as_deref().and_then(profiles::commands_file),
            "commands": loaded.global().map(|g| g.commands.keys().collect::<Vec<_>>()),
        }));
    } else {
        // Columns as wide as their longest value ("mullvad-browser", "gnome-console").
        let rows: Vec<(String, &str, String)> = loaded
            .iter()
            .map(|p| (sanitize(&p.id), p.kind.as_str(), sanitize(&p.name)))
            .collect();
        let width = |column: fn(&(String, &str, String)) -> usize, title: &str| {
            rows.iter()
                .map(column)
                .chain([title.len()])
                .max()
                .unwrap_or(0)
        };
        let id_width = width(|r| r.0.chars().count(), "id");
        let kind_width = width(|r| r.1.chars().count(), "kind");
        let name_width = width(|r| r.2.chars().count(), "name");
        out!(
            "{:<id_width$} {:<kind_width$} {:<name_width$} {:>9} {:>8}  source",
            "id",
            "kind",
            "name",
            "shortcuts",
            "commands"
        );
        for (p, (id, kind, name)) in loaded.iter().zip(&rows) {
            out!(
                "{id:<id_width$} {kind:<kind_width$} {name:<name_width$} {:>9} {:>8}  {}",
                p.shortcuts.len(),
                p.commands.len(),
                sanitize(&p.source)
            );
        }
        match &dir {
            Some(dir) => out!(
                "your profiles: {} (one TOML file per application; see `utter profiles --help`)",
                dir.display()
            ),
            None => out!("your profiles: none (neither XDG_CONFIG_HOME nor HOME is set)"),
        }
        if let Some(file) = dir.as_deref().and_then(profiles::commands_file) {
            match loaded.global() {
                Some(g) => out!(
                    "your commands: {} ({} phrases, meant in any application: {})",
                    file.display(),
                    g.commands.len(),
                    g.commands
                        .keys()
                        .take(8)
                        .map(|k| sanitize(k))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None if file.exists() || file.is_symlink() => out!(
                    "your commands: {} (not loaded: see the problem below)",
                    file.display()
                ),
                None => out!(
                    "your commands: {} (none yet: a [commands] table of \"phrase\" = chord or {{ op, args }}, meant in any application)",
                    file.display()
                ),
            }
        }
        for problem in &loaded.problems {
            eprintln!("utter profiles: {}", sanitize(problem));
        }
    }
    if loaded.problems.is_empty() {
        exit::OK
    } else {
        exit::CONFIG
    }
}
