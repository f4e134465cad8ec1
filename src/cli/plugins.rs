//! `utter plugins`: start the configured plugins in this process, show each one's kind,
//! epoch, status and capabilities (or, with `--json`, the plugin reports), and stop them
//! again. Exit 0 when every plugin came up (or was stopped on purpose), 4 otherwise.
//! [`print_plugins`] is the plugin table `utter status` shows too.

use std::path::Path;
use utter_core::runner::Runner;
use utter_core::supervisor::SupervisorOptions;
use utter_ipc::{PluginReport, PluginStatus};

use super::check_config;
use super::output::{exit, out, print_json, sanitize};

/// The arguments of `utter plugins`.
#[derive(clap::Args)]
pub struct Args {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Run `utter plugins`; `config` is `--config`.
pub async fn run(args: &Args, config: Option<&Path>) -> u8 {
    let Some(loaded) = check_config::load(config) else {
        return exit::CONFIG;
    };
    let options = SupervisorOptions::from_config(&loaded.config);
    let waiting = check_config::waiting_for_model(&loaded.config);
    // A built-in plugin whose program is not installed (the file names no plugins of its
    // own) is shown with its install command, and is no failure of this command.
    let not_installed = check_config::default_plugins_not_installed(&loaded.config);
    let runner = Runner::start(loaded, options, None).await;
    let reports = runner.plugins();
    runner.shutdown().await;
    if args.json {
        print_json(&reports);
    } else {
        print_plugins(&reports, true);
        if let Some((ids, why)) = &waiting {
            out!("{}: not started: {why}", ids.join(", "));
        }
    }
    if reports.iter().all(|p| {
        p.status.is_running() || p.status == PluginStatus::Stopped || not_installed.contains(&p.id)
    }) {
        exit::OK
    } else {
        exit::RUNNER
    }
}

/// The width of the PROVIDES column, in characters.
const PROVIDES_WIDTH: usize = 40;

/// `items` joined by commas into lines of at most `width` characters, broken between items
/// (an item longer than `width` has a line of its own).
fn wrap_list(items: &[String], width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for item in items {
        match lines.last_mut() {
            // Room for the item and the comma that may follow it.
            Some(line) if line.chars().count() + item.chars().count() + 2 <= width => {
                line.push(',');
                line.push_str(item);
            }
            Some(line) => {
                line.push(',');
                lines.push(item.clone());
            }
            None => lines.push(item.clone()),
        }
    }
    lines
}

/// The plugin table: id, kind, epoch, status, what each provides and requires, and under
/// it its last error (or, degraded and `why`, its health detail) and its sandbox (when
/// `[security] enforce` asks for one). `utter plugins` asks each plugin now and shows why;
/// `utter status` shows the running service's table, whose health is refreshed on a timer,
/// and leaves a detail that may be a few seconds old to the sections below it.
pub fn print_plugins(reports: &[PluginReport], why: bool) {
    let list = |items: &[String], none: &str| {
        if items.is_empty() {
            none.to_owned()
        } else {
            items.join(",")
        }
    };
    out!(
        "{:<12} {:<8} {:>5}  {:<10} {:<40} REQUIRES",
        "ID",
        "KIND",
        "EPOCH",
        "STATUS",
        "PROVIDES"
    );
    for p in reports {
        // The capabilities wrap inside their column, a line each time it is full.
        let provides: Vec<String> = p.provides.iter().map(|c| sanitize(c)).collect();
        let mut lines = wrap_list(&provides, PROVIDES_WIDTH).into_iter();
        out!(
            "{:<12} {:<8} {:>5}  {:<10} {:<40} {}",
            sanitize(&p.id),
            sanitize(&p.kind),
            p.epoch,
            p.status.as_str(),
            lines.next().unwrap_or_default(),
            list(&p.requires, "-")
        );
        for more in lines {
            out!("{:>40}{more}", "");
        }
        if let Some(e) = &p.last_error {
            out!("{:>14}last error: {}", "", sanitize(e));
        } else if why && p.status == PluginStatus::Degraded && !p.health.trim().is_empty() {
            // Degraded: the plugin's own words for why (no compositor, no session bus).
            let why = p.health.trim();
            out!(
                "{:>14}why: {}",
                "",
                sanitize(why.strip_prefix("degraded: ").unwrap_or(why))
            );
        }
        // The sandbox, when one is asked for (`--json` has the whole report).
        match &p.sandbox {
            Some(jail) if jail.enforced => out!(
                "{:>14}sandbox: {}, network {}{}",
                "",
                sanitize(&jail.mechanism),
                sanitize(&jail.network),
                match jail.limits.len() {
                    0 => String::new(),
                    n => format!(" ({n} limits: see --json)"),
                }
            ),
            Some(jail) => {
                if let Some(why) = jail
                    .why
                    .as_deref()
                    .filter(|w| !w.contains("enforce is off"))
                {
                    out!("{:>14}sandbox: none: {}", "", sanitize(why));
                }
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::wrap_list;

    #[test]
    fn capabilities_wrap_between_items_within_the_column() {
        let items: Vec<String> = ["router.plan@1", "router.rules@1", "router.vocabulary@1"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let lines = wrap_list(&items, 32);
        assert_eq!(
            lines,
            ["router.plan@1,router.rules@1,", "router.vocabulary@1"]
        );
        assert!(lines.iter().all(|l| l.chars().count() <= 32));
        // One item longer than the column has its own line; nothing is lost.
        let long = vec!["x".repeat(50), "y".to_owned()];
        assert_eq!(
            wrap_list(&long, 10),
            [format!("{},", "x".repeat(50)), "y".to_owned()]
        );
        assert!(wrap_list(&[], 10).is_empty());
    }
}
