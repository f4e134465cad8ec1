//! `utter-desktop`: the desktop action plugin (kind `action`, PROTOCOL.md §8).
//!
//! Ops, all with side effects and all honouring `dry_run` (resolve everything, say exactly
//! what would be done, do nothing):
//!
//! * `open_url {url}`: [`open_url`] (portal `OpenURI`, else `xdg-open`).
//! * `ensure_url {url, site?}`: [`ensure`]: focus a browser window whose title shows the
//!   site (read with `host.context`, focused with `host.action focus_app`), else open the URL
//!   like `open_url`.
//! * `launch_app {app_id, name?}`: [`launch`] (desktop entry, `Exec` expansion, detached).
//! * `media {command, player?}`: [`media`] (MPRIS over the session bus; the volume with no
//!   player named: the default audio sink, [`volume`]).
//!
//! Errors: `-32601` for an unknown op, `-32602` for bad arguments, `-32000` when the action
//! could not be done (the message says what to fix). `plugin.health` is always `ok`; its
//! detail says whether a session bus is reachable.

pub mod bus;
pub mod ensure;
pub mod entry;
pub mod exec;
pub mod launch;
pub mod media;
pub mod open_url;
pub mod portal;
pub mod spawn;
pub mod volume;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::process::ExitCode;
use utter_protocol::handshake::{HealthResult, HealthStatus};
use utter_protocol::plugin::{self, Call, Handler};
use utter_protocol::{Connection, ErrorCode, ErrorObject};

const MANIFEST: &str = include_str!("../utter-plugin.toml");

/// The ops this plugin serves, in `action.capabilities` order.
const OPS: [&str; 5] = ["open_url", "ensure_url", "launch_app", "media", "close_tab"];

/// A `-32602` error.
pub(crate) fn invalid_params(message: impl Into<String>) -> ErrorObject {
    ErrorObject::invalid_params(message)
}

/// A `-32000` error: the action could not be done.
pub(crate) fn plugin_error(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(ErrorCode::PluginError, message)
}

struct Desktop;

impl Handler for Desktop {
    fn methods(&self) -> Vec<String> {
        vec!["action.capabilities".into(), "action.invoke".into()]
    }

    fn side_effect_free(&self) -> Vec<String> {
        vec!["action.capabilities".into()]
    }

    async fn health(&self) -> HealthResult {
        let detail = match bus::connect().await {
            Ok((_conn, address)) => format!("session bus reachable at {address}"),
            Err(e) => format!(
                "{e}: open_url and ensure_url use xdg-open, media cannot work, launch_app is \
                 unaffected"
            ),
        };
        HealthResult {
            status: HealthStatus::Ok,
            detail,
        }
    }

    async fn handle(&self, call: Call) -> Result<Value, ErrorObject> {
        match call.method.as_str() {
            "action.capabilities" => Ok(capabilities()),
            "action.invoke" => invoke(call.params, Some(&call.peer)).await,
            other => Err(ErrorObject::method_not_found(other)),
        }
    }
}

fn capabilities() -> Value {
    let op = |name: &str, schema: Value, undo: Value| json!({"op": name, "side_effect": true, "needs_confirm": false, "args_schema": schema, "undo": undo});
    // How the runner undoes each op ("undo that"; utter-core's `undo`), from the journal.
    let opened = json!({"none": "the page stays open; say \"close tab\" to close it"});
    let ensure_undo = json!([
        {"when": {"$result.reused": true},
         "steps": [{"op": "focus_app", "args": {"app": "$before.focused.app_id",
                                                "window_id": "$before.focused.id"}}],
         "requires": {"window": "$before.focused.id"}},
        // Opened: the tab showing the site in the focused browser window is closed (the
        // plugin checks that window before pressing anything).
        {"when": {"$result.reused": false},
         "steps": [{"op": "close_tab", "args": {"url": "$args.url", "site": "$args.site?"}}]},
        opened,
    ]);
    json!({
        "ops": [
            op("open_url", open_url::args_schema(), json!([opened])),
            op("ensure_url", ensure::args_schema(), ensure_undo),
            op("launch_app", launch::args_schema(),
                json!([{"none": "a started app is not closed by undo; say \"close\" and its name"}])),
            op("media", media::args_schema(), media::undo_rules()),
            op("close_tab", ensure::args_schema(),
                json!([{"none": "a closed tab is opened again with \"reopen closed tab\""}])),
        ]
    })
}

/// `action.invoke {op, args, provenance, dry_run?}`. `runner` is the connection the request
/// came on, for `ensure_url`'s host callbacks.
async fn invoke(params: Value, runner: Option<&Connection>) -> Result<Value, ErrorObject> {
    let op = params
        .get("op")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid_params("action.invoke needs \"op\" (a string)"))?
        .to_owned();
    let dry_run = utter_protocol::plugin::dry_run(&params)?;
    let args = match params.get("args") {
        None | Some(Value::Null) => json!({}),
        Some(args @ Value::Object(_)) => args.clone(),
        Some(other) => {
            return Err(invalid_params(format!(
                "\"args\" must be an object, not {other}"
            )));
        }
    };
    let provenance = params
        .get("provenance")
        .and_then(Value::as_str)
        .unwrap_or("");
    tracing::info!(%op, dry_run, provenance, "invoke");
    let result = match op.as_str() {
        "open_url" => open_url::run(parse(&op, args)?, dry_run).await,
        "ensure_url" => ensure::run(parse(&op, args)?, dry_run, runner).await,
        "close_tab" => ensure::close_tab(parse(&op, args)?, dry_run, runner).await,
        "launch_app" => launch::run(parse(&op, args)?, dry_run).await,
        "media" => media::run(parse(&op, args)?, dry_run).await,
        other => Err(ErrorObject::new(
            ErrorCode::MethodNotFound,
            format!(
                "unknown op {other:?}; the desktop plugin serves {}",
                OPS.join(", ")
            ),
        )),
    };
    if let Err(e) = &result {
        tracing::warn!(%op, code = e.code, message = %e.message, "invoke failed");
    }
    result
}

/// Deserialize an op's args, turning serde's complaint into a `-32602` naming the op and
/// the expected shape.
fn parse<T: DeserializeOwned>(op: &str, args: Value) -> Result<T, ErrorObject> {
    serde_json::from_value(args).map_err(|e| {
        let shape = match op {
            "open_url" => "{url: string}",
            "ensure_url" | "close_tab" => "{url: string, site?: string}",
            "launch_app" => "{app_id: string, name?: string}",
            _ => "{command: \"play\"|\"pause\"|\"play_pause\"|\"stop\"|\"next\"|\"previous\"|\"volume_up\"|\"volume_down\"|\"mute\"|\"unmute\"|\"set_volume\", player?: string, level?: number (set_volume), muted?: bool}",
        };
        invalid_params(format!("bad args for {op}: {e}; expected {shape}"))
    })
}

/// Serve the desktop action plugin on stdin/stdout until the runner closes stdin.
///
/// `log_to_stderr` installs a stderr logger (level from `UTTER_LOG`, default `info`); pass
/// `false` when the caller already installed one.
pub async fn run(log_to_stderr: bool) -> ExitCode {
    if log_to_stderr {
        utter_protocol::plugin::init_stderr_logging();
    }
    // Which player the person used last, from the start.
    tokio::spawn(media::watch());
    plugin::run_stdio(MANIFEST, Desktop).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_list_every_op_with_a_schema() {
        let caps = capabilities();
        let ops = caps["ops"].as_array().expect("ops array");
        let names: Vec<&str> = ops.iter().filter_map(|o| o["op"].as_str()).collect();
        assert_eq!(names, OPS);
        for op in ops {
            assert_eq!(op["side_effect"], true);
            assert_eq!(op["needs_confirm"], false);
            assert_eq!(op["args_schema"]["type"], "object");
        }
    }

    #[test]
    fn the_manifest_parses() {
        let m = utter_protocol::manifest::Manifest::from_toml_str(MANIFEST, "utter-plugin.toml")
            .expect("valid manifest");
        assert_eq!(m.name, "desktop");
    }

    #[tokio::test]
    async fn bad_invocations_get_the_right_codes() {
        let code = |params: Value| async move { invoke(params, None).await.map_err(|e| e.code) };
        assert_eq!(code(json!({"op": "fly", "args": {}})).await, Err(-32601));
        assert_eq!(code(json!({"args": {}})).await, Err(-32602));
        assert_eq!(
            code(json!({"op": "launch_app", "args": {}})).await,
            Err(-32602)
        );
        assert_eq!(
            code(json!({"op": "launch_app", "args": {"app_id": "x", "extra": 1}})).await,
            Err(-32602)
        );
        assert_eq!(
            code(json!({"op": "open_url", "args": {"url": "javascript:alert(1)"}})).await,
            Err(-32602)
        );
        assert_eq!(
            code(json!({"op": "media", "args": {"command": "louder"}})).await,
            Err(-32602)
        );
        assert_eq!(
            code(json!({"op": "media", "args": {"command": "play"}, "dry_run": "yes"})).await,
            Err(-32602)
        );
        assert_eq!(code(json!({"op": "media", "args": []})).await, Err(-32602));
    }
}
