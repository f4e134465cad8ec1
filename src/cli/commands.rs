//! `utter commands`: "What can I say here?". It reads the desktop context (`runner.context`)
//! and asks the router plugin for its examples in that context (`router.examples {context,
//! all?}` through `runner.invoke`), from the running service or, when none runs (or with
//! `--local`), from the configured plugins started in this process for the one question.
//!
//! The router is the first plugin of kind `router` whose `plugin.describe` lists
//! `router.examples` (the built-in `rules` router does; see `plugins/rules/src/examples.rs`
//! for what it answers). The answer is printed for people, category by category (heading,
//! about line, then `  say this  → op`, the focused application's category first, as the
//! router orders them), or with `--json` as the router gave it: `{categories: [{name, about,
//! examples: [{say, op, focused?}]}]}`. A context that cannot be read (no context plugin, no
//! compositor) is no reason to fail: the router then answers with what can be said anywhere,
//! and a note on stderr says why nothing is about the focused window.
//!
//! Exit 0 when the examples were listed; 3 for an invalid config; 4 when no router is
//! configured or running, when the router does not serve `router.examples`, when it failed,
//! or when a named `--socket` does not answer (with `--json`, `{error: {code, message}}` on
//! stdout when the router could not be asked or failed).

use serde::Deserialize;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use utter_core::confirm::Door;
use utter_core::handles::Scope;
use utter_core::runner::Runner;
use utter_core::supervisor::{PluginReport, SupervisorOptions};
use utter_ipc::client::{Client, ClientError};
use utter_protocol::{ErrorCode, ErrorObject};

use super::output::{exit, out, print_answer, sanitize};
use super::{check_config, connect};

/// The router method this command calls.
pub const EXAMPLES_METHOD: &str = "router.examples";

/// The most characters of a phrase the aligned column makes room for; a longer phrase pushes
/// its own arrow out.
const MAX_SAY_COLUMN: usize = 40;

/// The arguments of `utter commands`.
#[derive(clap::Args)]
pub struct Args {
    /// Print the router's answer as JSON: {categories: [{name, about, examples: [{say, op,
    /// focused?}]}]}, focused = the app_id of the window that must be focused; on failure
    /// {error: {code, message}}.
    #[arg(long)]
    json: bool,
    /// Every category: also the commands of every other application the router has a
    /// profile for, as they are said once its window is focused.
    #[arg(long)]
    all: bool,
    /// Ask the plugins in this process even when the service is running.
    #[arg(long)]
    local: bool,
}

/// Where the answer comes from: the running service, or a runner started here.
enum Asked {
    Service(Client),
    Local(Arc<Runner>),
}

impl Asked {
    /// Every plugin with its kind, status and the methods it describes.
    async fn plugins(&self) -> Result<Vec<PluginReport>, ErrorObject> {
        match self {
            Asked::Service(client) => Ok(client.status().await?.plugins),
            Asked::Local(runner) => Ok(runner.plugins()),
        }
    }

    /// The desktop context snapshot, or why there is none.
    async fn context(&self) -> Result<Value, ErrorObject> {
        let reply = match self {
            Asked::Service(client) => client.context().await?,
            Asked::Local(runner) => runner.context_now().await?,
        };
        Ok(reply.snapshot)
    }

    /// `runner.invoke` of `method` on `plugin`.
    async fn invoke(
        &self,
        plugin: &str,
        method: &str,
        params: Value,
    ) -> Result<Value, ErrorObject> {
        match self {
            Asked::Service(client) => client.invoke(plugin, method, params).await,
            Asked::Local(runner) => {
                // Listing examples never acts: were the router to want a confirmation for it,
                // the answer is no.
                let door: Door = Arc::new(|_| Box::pin(async { Some(false) }));
                runner
                    .invoke(
                        utter_ipc::methods::InvokeParams {
                            plugin: plugin.to_owned(),
                            method: method.to_owned(),
                            params: Some(params),
                        },
                        door,
                        Scope::Client(0),
                        "utter commands",
                    )
                    .await
            }
        }
    }

    async fn finish(self) {
        if let Asked::Local(runner) = self {
            runner.shutdown().await;
        }
    }
}

/// Run `utter commands`.
pub async fn run(args: &Args, config: Option<PathBuf>, socket: Option<&Path>) -> u8 {
    let Some(loaded) = check_config::load(config.as_deref()) else {
        return exit::CONFIG;
    };
    let service = if args.local {
        None
    } else {
        let (path, token) = connect::endpoint(socket, &loaded.config);
        match Client::connect(&path, token, None).await {
            Ok(client) => Some(client),
            // No service: ask the plugins here, as `utter context` does.
            Err(ClientError::NotListening { .. }) if socket.is_none() => None,
            Err(e) => {
                eprintln!(
                    "utter commands: {e} (or pass --local to ask the plugins in this process)"
                );
                return exit::RUNNER;
            }
        }
    };
    let asked = match service {
        Some(client) => Asked::Service(client),
        None => {
            let mut loaded = loaded;
            loaded.config = loaded.config.without_voice();
            let options = SupervisorOptions::from_config(&loaded.config);
            Asked::Local(Runner::start(loaded, options, config).await)
        }
    };
    let answer = ask(&asked, args.all).await;
    asked.finish().await;
    match answer {
        Ok((answer, _)) if args.json => {
            print_answer(&answer);
            exit::OK
        }
        Ok((answer, focused)) => match serde_json::from_value::<Answer>(answer) {
            Ok(answer) => {
                print_answer_for_people(&answer, focused.as_deref(), args.all);
                exit::OK
            }
            Err(e) => {
                eprintln!(
                    "utter commands: the router's answer to {EXAMPLES_METHOD} is not a list of categories ({}); see it with --json",
                    sanitize(&e.to_string())
                );
                exit::RUNNER
            }
        },
        Err(e) => {
            if args.json {
                out!("{}", json!({ "error": e }));
            }
            eprintln!("utter commands: {} [{}]", sanitize(&e.message), e.code);
            exit::RUNNER
        }
    }
}

/// Find the router, read the context and ask: the router's answer and the focused window's
/// `app_id`, if the context named one.
async fn ask(asked: &Asked, all: bool) -> Result<(Value, Option<String>), ErrorObject> {
    let plugins = asked.plugins().await?;
    let router = pick_router(&plugins)?;
    let context = match asked.context().await {
        Ok(snapshot) => Some(snapshot),
        Err(e) => {
            eprintln!(
                "utter commands: no desktop context ({}); showing what can be said in any window",
                sanitize(&e.message)
            );
            None
        }
    };
    let focused = context
        .as_ref()
        .and_then(|c| c.pointer("/focused/app_id"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut params = json!({});
    if let Some(context) = context {
        params["context"] = context;
    }
    if all {
        params["all"] = Value::Bool(true);
    }
    match asked.invoke(&router, EXAMPLES_METHOD, params).await {
        Ok(answer) => Ok((answer, focused)),
        Err(e) if e.kind() == ErrorCode::MethodNotFound => Err(not_served(&router)),
        Err(e) => Err(ErrorObject::new(
            e.kind(),
            format!("the router plugin {router:?} failed: {}", e.message),
        )),
    }
}

/// The id of the router to ask: the first plugin of kind `router` that is running and lists
/// `router.examples` among its methods.
///
/// # Errors
/// `-32005` when no router is configured or none is running; `-32601` when the routers that
/// run do not serve `router.examples`. Each message says what to do.
fn pick_router(plugins: &[PluginReport]) -> Result<String, ErrorObject> {
    let routers: Vec<&PluginReport> = plugins.iter().filter(|p| p.kind == "router").collect();
    if routers.is_empty() {
        return Err(ErrorObject::new(
            ErrorCode::CapabilityMissing,
            "no router plugin is configured, and the router is what knows what can be said: \
             add the built-in one ([[plugin]] id = \"rules\", kind = \"router\", entrypoint = \
             [\"utter\", \"plugin\", \"rules\"]), or remove every [[plugin]] entry to run the \
             built-in plugins (see `utter config default`)",
        ));
    }
    if let Some(router) = routers
        .iter()
        .find(|p| p.status.is_running() && p.methods.iter().any(|m| m == EXAMPLES_METHOD))
    {
        return Ok(router.id.clone());
    }
    if let Some(router) = routers.iter().find(|p| p.status.is_running()) {
        return Err(not_served(&router.id));
    }
    let router = routers[0];
    Err(ErrorObject::new(
        ErrorCode::CapabilityMissing,
        format!(
            "the router plugin {:?} is not running (status {}{}); see `utter plugins` or `utter status`",
            router.id,
            router.status.as_str(),
            router
                .last_error
                .as_deref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default()
        ),
    ))
}

/// The error for a router that does not answer `router.examples`.
fn not_served(router: &str) -> ErrorObject {
    ErrorObject::new(
        ErrorCode::MethodNotFound,
        format!(
            "the router plugin {router:?} does not serve {EXAMPLES_METHOD} (-32601), so it cannot \
             say what it understands; the built-in rules router does (entrypoint = [\"utter\", \
             \"plugin\", \"rules\"])"
        ),
    )
}

/// The router's answer, as far as it is printed.
#[derive(Deserialize)]
struct Answer {
    categories: Vec<Category>,
}

/// One category of the answer.
#[derive(Deserialize)]
struct Category {
    name: String,
    #[serde(default)]
    about: String,
    #[serde(default)]
    examples: Vec<Example>,
}

/// One example of a category.
#[derive(Deserialize)]
struct Example {
    say: String,
    op: String,
    #[serde(default)]
    focused: Option<String>,
}

/// The categories for a person. Every string is the router's and goes through
/// [`sanitize`]. An example for another window than the focused one says which; when all
/// of a category's examples are for the same other window, its heading says so once.
fn print_answer_for_people(answer: &Answer, focused: Option<&str>, all: bool) {
    fn elsewhere<'a>(e: &'a Example, focused: Option<&str>) -> Option<&'a str> {
        e.focused.as_deref().filter(|f| Some(*f) != focused)
    }
    for (n, category) in answer.categories.iter().enumerate() {
        if n > 0 {
            out!("");
        }
        let shared = category
            .examples
            .first()
            .and_then(|e| elsewhere(e, focused))
            .filter(|f| {
                category
                    .examples
                    .iter()
                    .all(|e| e.focused.as_deref() == Some(*f))
            });
        match shared {
            Some(window) => out!(
                "{} (with {} focused)",
                sanitize(&category.name),
                sanitize(window)
            ),
            None => out!("{}", sanitize(&category.name)),
        }
        if !category.about.is_empty() {
            out!("{}", sanitize(&category.about));
        }
        let said: Vec<String> = category.examples.iter().map(|e| sanitize(&e.say)).collect();
        let width = said
            .iter()
            .map(|s| s.chars().count())
            .filter(|&w| w <= MAX_SAY_COLUMN)
            .max()
            .unwrap_or(0);
        for (example, say) in category.examples.iter().zip(&said) {
            let pad = " ".repeat(width.saturating_sub(say.chars().count()));
            let note = match elsewhere(example, focused) {
                Some(window) if shared.is_none() => format!(" (with {} focused)", sanitize(window)),
                _ => String::new(),
            };
            out!("  {say}{pad}  → {}{note}", sanitize(&example.op));
        }
    }
    if !all {
        out!("");
        out!("(utter commands --all also lists every other application's commands)");
    }
}
