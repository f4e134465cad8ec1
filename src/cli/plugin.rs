//! `utter plugin rules|desktop|compositor|a11y|check`: the built-in plugins, and the
//! conformance checks. The `rules` router, the `desktop` action plugin, the `compositor`
//! context and action plugin and the `a11y` plugin are compiled into this binary, so one
//! installed `utter` carries them; the runner starts each as its own process (`utter plugin
//! rules`), which speaks the plugin protocol on stdin/stdout and logs on its own terms (no
//! logging is set up for it here). `check` runs any plugin through the protocol's checks
//! (`plugin_check`). Exit 0 when the plugin ended cleanly, 4 when it failed.

use std::process::ExitCode;

use super::output::exit;
use super::plugin_check;

/// `utter plugin ...`: a built-in plugin, or the conformance checks.
#[derive(clap::Subcommand)]
pub enum Action {
    /// The deterministic rules router (stdin/stdout).
    Rules {
        /// Arguments for the plugin (e.g. `--sites FILE`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Open URLs, launch applications, control media players (stdin/stdout).
    Desktop {
        /// Arguments for the plugin (none yet).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// The desktop context and compositor actions on niri and sway (stdin/stdout).
    Compositor {
        /// Arguments for the plugin (none yet).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Acting inside apps through accessibility (AT-SPI): type into the focused text field,
    /// press the button named (stdin/stdout).
    A11y {
        /// Arguments for the plugin (none yet).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run a plugin through the protocol's conformance checks and say what to fix.
    ///
    /// Example: utter plugin check -- ./target/debug/my-plugin --flag
    Check(plugin_check::CheckArgs),
}

/// Run `utter plugin ...`.
pub async fn run(action: Action) -> u8 {
    let code = match action {
        Action::Check(args) => return plugin_check::run(args).await,
        Action::Rules { args } => utter_rules::run(args).await,
        Action::Desktop { .. } => utter_desktop::run(true).await,
        Action::Compositor { .. } => utter_compositor::run(true).await,
        Action::A11y { .. } => utter_a11y::run(true).await,
    };
    if code == ExitCode::SUCCESS {
        exit::OK
    } else {
        exit::RUNNER
    }
}
