//! Reaching the running service from the client commands (`status`, `pending`, `confirm`,
//! `audit`, `reload`, `events`, `ptt`, `listen`, and `say` when the service answers): the
//! socket comes from `--socket`, else the config's `[runner] socket_path`, else
//! `$UTTER_RUNNER_SOCK`, else `$XDG_RUNTIME_DIR/utter/runner.sock`; the token, used only when
//! the runner asks for one, from `[socket] token`, else the token file. Every failure is
//! reported on stderr as `utter WHAT: ...` and turned into its exit code here.

use std::path::{Path, PathBuf};
use utter_core::config;
use utter_core::config::Config;
use utter_ipc::client::{Client, client_token};
use utter_protocol::ErrorObject;

use super::output::{exit, print_json};

/// Where the client commands look for the service: `--socket` and `--config` as given.
#[derive(Clone, Copy)]
pub struct Service<'a> {
    /// `--socket`.
    pub socket: Option<&'a Path>,
    /// `--config`.
    pub config: Option<&'a Path>,
    /// `--json` was given: a failure to connect is also printed on stdout, as
    /// `{"running": false, "socket", "error": {"message"}}` (the `error` object as other
    /// `--json` failures print it), so that a script reading stdout gets JSON
    /// either way (the exit code is 4 all the same).
    pub json: bool,
}

impl<'a> Service<'a> {
    /// The same service for a subcommand whose `--json` is `json`.
    pub fn with_json(self, json: bool) -> Service<'a> {
        Service { json, ..self }
    }
}

impl Service<'_> {
    /// Connect for the subcommand `what`. An invalid config must not keep a client from the
    /// service, which runs the config it loaded: its errors are printed as a warning and
    /// the socket is looked for where the file says (when that much of it reads as TOML) or
    /// at the default path.
    ///
    /// # Errors
    /// The exit code, after saying what went wrong: 4 when nothing (or a stranger) answers on
    /// the socket (with a reminder of the broken config when there is one).
    pub async fn connect(self, what: &str) -> Result<Client, u8> {
        let (config, broken) = match config::load(self.config) {
            Ok(loaded) => (loaded.config, None),
            // With an explicit --socket the file only matters for the token.
            Err(e) => {
                if self.socket.is_none() {
                    for issue in &e.errors {
                        eprintln!("warning: {issue}");
                    }
                }
                (config::salvage_client_settings(self.config), Some(e))
            }
        };
        let (path, token) = endpoint(self.socket, &config);
        if broken.is_some() && self.socket.is_none() {
            eprintln!(
                "utter {what}: the configuration is invalid (fix it, see `utter check-config`); the running service keeps the one it loaded, reached at {}",
                path.display()
            );
        }
        Client::connect(&path, token, None).await.map_err(|e| {
            eprintln!("utter {what}: {e}");
            if self.json {
                // stdout stays JSON for a script: the runner is not running, and why.
                print_json(&serde_json::json!({
                    "running": false,
                    "socket": path.display().to_string(),
                    "error": {"message": e.to_string()},
                }));
            }
            if broken.is_some() && self.socket.is_none() {
                eprintln!(
                    "utter {what}: if the service uses another socket than the broken config shows, pass --socket"
                );
            }
            exit::RUNNER
        })
    }
}

/// The socket to connect to and the token to offer, from `--socket` and `config`.
pub fn endpoint(socket: Option<&Path>, config: &Config) -> (PathBuf, Option<String>) {
    let path = utter::socket::resolve_path(socket, config);
    let token = client_token(config.socket.as_ref().map(|s| s.token.as_str()));
    (path, token)
}

/// Report a failed call of the subcommand `what` (the message and the code, on stderr);
/// returns exit code 4.
pub fn call_failed(what: &str, e: &ErrorObject) -> u8 {
    eprintln!("utter {what}: {} [{}]", e.message, e.code);
    exit::RUNNER
}
