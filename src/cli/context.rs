//! `utter context`: the desktop context the commands are planned in (`runner.context`): which
//! compositor, the focused window, every window, the workspaces and the outputs. It asks the
//! running service, or, when none runs, starts the configured plugins in this process for the
//! one read. `--json` prints `{source, snapshot}`. Exit 0 when the context was read, 1 when no
//! context plugin runs or it could not reach the compositor (with `--json`, `{error}` on
//! stdout), 3 for an invalid config, 4 when a named `--socket` does not answer.

use serde_json::Value;
use std::path::{Path, PathBuf};
use utter_core::runner::Runner;
use utter_core::supervisor::SupervisorOptions;
use utter_ipc::client::{Client, ClientError};
use utter_ipc::methods::ContextReply;
use utter_protocol::ErrorObject;

use super::output::{exit, out, print_answer, sanitize};
use super::{check_config, connect};

/// The arguments of `utter context`.
#[derive(clap::Args)]
pub struct Args {
    /// Print JSON: {source, snapshot: {compositor, focused, windows, workspaces, outputs,
    /// keyboard_layout, overview, provenance}}, or {error: {code, message}} when it could not
    /// be read.
    #[arg(long)]
    json: bool,
    /// Read it in this process even when the service is running.
    #[arg(long)]
    local: bool,
}

/// Run `utter context`.
pub async fn run(args: &Args, config: Option<PathBuf>, socket: Option<&Path>) -> u8 {
    let Some(loaded) = check_config::load(config.as_deref()) else {
        return exit::CONFIG;
    };
    let read = if args.local {
        None
    } else {
        let (path, token) = connect::endpoint(socket, &loaded.config);
        match Client::connect(&path, token, None).await {
            Ok(client) => Some(client.context().await),
            Err(ClientError::NotListening { .. }) if socket.is_none() => None,
            Err(e) => {
                eprintln!("utter context: {e} (or pass --local to read it in this process)");
                return exit::RUNNER;
            }
        }
    };
    let read = match read {
        Some(read) => read,
        None => {
            let mut loaded = loaded;
            loaded.config = loaded.config.without_voice();
            let options = SupervisorOptions::from_config(&loaded.config);
            let runner = Runner::start(loaded, options, config).await;
            let read = runner.context_now().await;
            runner.shutdown().await;
            read
        }
    };
    match read {
        Ok(reply) if args.json => {
            print_answer(&reply);
            exit::OK
        }
        Ok(reply) => {
            print_context(&reply);
            exit::OK
        }
        Err(e) => {
            if args.json {
                out!("{}", serde_json::json!({ "error": e }));
            }
            failed(&e)
        }
    }
}

fn failed(e: &ErrorObject) -> u8 {
    eprintln!("utter context: {} [{}]", sanitize(&e.message), e.code);
    exit::NOT_DONE
}

/// The snapshot for a person. Every string from the desktop goes through [`sanitize`]: titles
/// are written by whatever runs in the window.
fn print_context(reply: &ContextReply) {
    let s = &reply.snapshot;
    let text = |v: Option<&Value>| {
        v.map(|v| match v {
            Value::String(s) => sanitize(s),
            Value::Null => "-".to_owned(),
            other => sanitize(&other.to_string()),
        })
        .unwrap_or_else(|| "-".to_owned())
    };
    let compositor = s.get("compositor");
    out!(
        "compositor: {} {} (plugin {})",
        text(compositor.and_then(|c| c.get("name"))),
        text(compositor.and_then(|c| c.get("version"))),
        sanitize(&reply.source)
    );
    // A desktop without compositor IPC (GNOME, KDE Plasma): say what the context lacks.
    if compositor
        .and_then(|c| c.get("source"))
        .and_then(Value::as_str)
        == Some("accessibility")
    {
        out!(
            "(no compositor IPC here: the focused application comes from accessibility; \
             windows, workspaces and outputs are unknown)"
        );
    }
    if let Some(layout) = s.get("keyboard_layout").filter(|l| !l.is_null()) {
        out!("keyboard layout: {}", text(Some(layout)));
    }
    let window = |w: &Value| {
        format!(
            "{} {} \"{}\" on workspace {} ({})",
            text(w.get("id")),
            text(w.get("app_id")),
            text(w.get("title")),
            text(w.get("workspace")),
            text(w.get("output")),
        )
    };
    match s.get("focused").filter(|f| f.is_object()) {
        Some(f) => out!("focused: {}", window(f)),
        None => out!("focused: nothing"),
    }
    let list = |key: &str| {
        s.get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let windows = list("windows");
    out!("windows ({}):", windows.len());
    for w in &windows {
        let mark = if w.get("focused") == Some(&Value::Bool(true)) {
            "*"
        } else {
            " "
        };
        out!(" {mark} {}", window(w));
    }
    let workspaces = list("workspaces");
    out!("workspaces ({}):", workspaces.len());
    for w in &workspaces {
        let mark = if w.get("focused") == Some(&Value::Bool(true)) {
            "*"
        } else {
            " "
        };
        out!(
            " {mark} {} (index {}) on {}{}",
            text(w.get("name")),
            text(w.get("index")),
            text(w.get("output")),
            if w.get("active") == Some(&Value::Bool(true)) {
                ", visible"
            } else {
                ""
            }
        );
    }
    let outputs = list("outputs");
    out!("outputs ({}):", outputs.len());
    for o in &outputs {
        let mark = if o.get("focused") == Some(&Value::Bool(true)) {
            "*"
        } else {
            " "
        };
        out!(
            " {mark} {} {}x{}",
            text(o.get("name")),
            text(o.get("width")),
            text(o.get("height"))
        );
    }
    out!("(titles come from the windows themselves: untrusted, they only select)");
}
