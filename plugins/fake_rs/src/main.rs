//! `fake_rs`: the minimal action plugin (PROTOCOL.md §8). It serves `action.capabilities`
//! and `action.invoke` for the ops `open_url` and `ensure_url`, and answers every invoke with
//! what it would have opened, without opening anything.

use std::process::ExitCode;
use utter_protocol::plugin::{self, Call, Handler};
use utter_protocol::serde_json::{Value, json};
use utter_protocol::{ErrorCode, ErrorObject};

const MANIFEST: &str = include_str!("../utter-plugin.toml");

/// The ops it serves.
const OPS: &[&str] = &["open_url", "ensure_url"];

struct FakeRs;

impl Handler for FakeRs {
    fn methods(&self) -> Vec<String> {
        vec!["action.capabilities".into(), "action.invoke".into()]
    }

    fn side_effect_free(&self) -> Vec<String> {
        vec!["action.capabilities".into()]
    }

    async fn handle(&self, call: Call) -> Result<Value, ErrorObject> {
        match call.method.as_str() {
            "action.capabilities" => {
                let schema = json!({
                    "type": "object",
                    "required": ["url"],
                    "properties": {"url": {"type": "string"}}
                });
                let ops: Vec<Value> = OPS
                    .iter()
                    .map(|op| json!({"op": op, "side_effect": true, "needs_confirm": false, "args_schema": schema}))
                    .collect();
                Ok(json!({ "ops": ops }))
            }
            "action.invoke" => {
                let op = call.params.get("op").and_then(Value::as_str).unwrap_or("");
                if !OPS.contains(&op) {
                    return Err(ErrorObject::new(
                        ErrorCode::MethodNotFound,
                        format!("fake_rs only knows the ops {OPS:?}, not {op:?}"),
                    ));
                }
                let url = call
                    .params
                    .pointer("/args/url")
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        ErrorObject::invalid_params(format!("{op} needs args.url (a string)"))
                    })?;
                Ok(json!({
                    "ok": true,
                    "dry_run": true,
                    "detail": format!("fake_rs would open {url}"),
                }))
            }
            other => Err(ErrorObject::method_not_found(other)),
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    plugin::run_stdio(MANIFEST, FakeRs).await
}
