//! The command-line interface: the clap definitions ([`args`]), one module per subcommand,
//! and what they share: printing and exit codes ([`output`]), reaching the running service
//! ([`connect`]) and the terminal confirmation prompt ([`confirm_prompt`]). `main.rs` only
//! sets up logging and the runtime and dispatches to a subcommand's `run`.

pub mod args;
pub mod confirm_prompt;
pub mod connect;
pub mod output;

pub mod audio;
pub mod audit;
pub mod check_config;
pub mod check_manifest;
pub mod commands;
pub mod config_file;
pub mod confirm;
pub mod context;
pub mod daemon;
pub mod doctor;
pub mod eval;
pub mod events;
pub mod history;
pub mod install;
pub mod listen;
pub mod models;
pub mod pending;
pub mod plugin;
pub mod plugin_check;
pub mod plugins;
pub mod profiles;
pub mod ptt;
pub mod reload;
pub mod say;
pub mod status;
