//! `utter-rules`: the deterministic rules router (kind `router`, PROTOCOL.md §8).
//!
//! It serves `router.plan`: a spoken or typed utterance goes in, and at most one step comes
//! out, chosen by fixed rules without any model: media keys, web sites from a catalog,
//! installed desktop applications and bare host names (see [`rules`] for the order). An
//! utterance no rule understands is not an error: the answer has no steps, `rule: null` and
//! a message, so the runner can fall back to another router.
//!
//! Usage: `utter-rules [--sites <catalog.toml>]`. Without `--sites`, `$UTTER_SITES` names
//! the catalog, and without either the built-in `data/sites.toml` is used. A catalog that
//! cannot be read or parsed stops the plugin at start with a message naming file and line.
//!
//! Module map: [`text`] normalises utterances, [`sites`] loads the site catalog, [`apps`]
//! finds installed applications, [`rules`] turns text into a step.

pub mod apps;
pub mod rules;
pub mod sites;
pub mod text;

use apps::AppScanner;
use rules::{AppLookup, Matched};
use sites::Catalog;
use std::cell::OnceCell;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use utter_protocol::ErrorObject;
use utter_protocol::handshake::HealthResult;
use utter_protocol::plugin::{self, Call, Handler};
use utter_protocol::serde_json::{Value, json};

const MANIFEST: &str = include_str!("../utter-plugin.toml");

/// The method this plugin serves.
const PLAN: &str = "router.plan";

/// What a request shares: the catalog, fixed at start, and the application scanner.
struct State {
    catalog: Catalog,
    apps: AppScanner,
}

/// The `router.plan` handler.
struct RulesRouter {
    state: Arc<State>,
}

/// Reads the installed applications at most once per plan, and only if a rule asks.
struct LazyApps<'a> {
    scanner: &'a AppScanner,
    apps: OnceCell<Arc<Vec<apps::AppEntry>>>,
}

impl AppLookup for LazyApps<'_> {
    fn find(&self, spoken: &str) -> Option<apps::AppEntry> {
        let apps = self.apps.get_or_init(|| self.scanner.apps());
        apps::find_app(apps, spoken).cloned()
    }
}

/// The validated params of one `router.plan` request.
struct PlanRequest {
    utterance: String,
    provenance: String,
}

impl PlanRequest {
    fn from_params(params: &Value) -> Result<PlanRequest, ErrorObject> {
        let utterance = match params.get("utterance") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_owned(),
            Some(Value::String(_)) => {
                return Err(ErrorObject::invalid_params(
                    "router.plan: utterance is blank; send the words to plan for",
                ));
            }
            None | Some(Value::Null) => {
                return Err(ErrorObject::invalid_params(
                    "router.plan needs params.utterance (a non-empty string)",
                ));
            }
            Some(other) => {
                return Err(ErrorObject::invalid_params(format!(
                    "router.plan: utterance must be a string, not {}",
                    json_type(other)
                )));
            }
        };
        let provenance = match params.get("provenance") {
            None | Some(Value::Null) => "user".to_owned(),
            Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_owned(),
            Some(other) => {
                return Err(ErrorObject::invalid_params(format!(
                    "router.plan: provenance must be a non-empty string such as \"user\" or \
                     \"screen\", not {other}"
                )));
            }
        };
        Ok(PlanRequest {
            utterance,
            provenance,
        })
    }
}

/// `1 site`, `25 sites`.
fn plural(count: usize, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl State {
    /// Plan one request. Blocking: it may read the application directories.
    fn plan(&self, request: &PlanRequest) -> Value {
        let normalized = text::normalize(&request.utterance);
        let lazy = LazyApps {
            scanner: &self.apps,
            apps: OnceCell::new(),
        };
        match rules::plan(text::strip_fillers(&normalized), &self.catalog, &lazy) {
            Some(Matched {
                rule,
                op,
                args,
                message,
            }) => json!({
                "steps": [{
                    "op": op,
                    "args": args,
                    "provenance": request.provenance,
                    "confirm": false,
                }],
                "rule": rule,
                "message": message,
            }),
            None => json!({
                "steps": [],
                "rule": null,
                "message": format!("no rule matched \"{}\"", request.utterance),
            }),
        }
    }
}

impl Handler for RulesRouter {
    fn methods(&self) -> Vec<String> {
        vec![PLAN.into()]
    }

    fn side_effect_free(&self) -> Vec<String> {
        vec![PLAN.into()]
    }

    async fn health(&self) -> HealthResult {
        let state = self.state.clone();
        let apps = tokio::task::spawn_blocking(move || state.apps.apps().len()).await;
        let mut health = HealthResult::ok();
        health.detail = match apps {
            Ok(count) => format!(
                "{} from {}, {}",
                plural(self.state.catalog.sites().len(), "site"),
                self.state.catalog.source(),
                plural(count, "application"),
            ),
            Err(e) => format!("application scan failed: {e}"),
        };
        health
    }

    async fn handle(&self, call: Call) -> Result<Value, ErrorObject> {
        match call.method.as_str() {
            PLAN => {
                let request = PlanRequest::from_params(&call.params)?;
                let state = self.state.clone();
                tokio::task::spawn_blocking(move || state.plan(&request))
                    .await
                    .map_err(|e| ErrorObject::internal(format!("router.plan failed: {e}")))
            }
            other => Err(ErrorObject::method_not_found(other)),
        }
    }
}

/// Where the site catalog comes from, per the command line and environment.
fn catalog_path(args: &[String]) -> Result<Option<PathBuf>, String> {
    let mut path = None;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "--sites" {
            let value = iter
                .next()
                .ok_or("--sites needs a path: utter-rules --sites <catalog.toml>")?;
            path = Some(PathBuf::from(value));
        } else if let Some(value) = arg.strip_prefix("--sites=") {
            path = Some(PathBuf::from(value));
        } else {
            return Err(format!(
                "unknown argument {arg:?}; usage: utter-rules [--sites <catalog.toml>]"
            ));
        }
    }
    if path.is_none() {
        path = std::env::var_os("UTTER_SITES")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
    }
    Ok(path)
}

/// Serve the rules router on stdin/stdout until the runner closes stdin.
///
/// `args` are the command-line arguments after the program name (`[--sites <catalog>]`).
/// Returns a failure exit code when the arguments or the catalog are invalid.
pub async fn run(args: Vec<String>) -> ExitCode {
    let catalog = match catalog_path(&args) {
        Ok(Some(path)) => Catalog::load(&path),
        Ok(None) => Catalog::builtin(),
        Err(usage) => {
            eprintln!("utter-rules: {usage}");
            return ExitCode::FAILURE;
        }
    };
    let catalog = match catalog {
        Ok(catalog) => catalog,
        Err(e) => {
            eprintln!("utter-rules: {e}");
            return ExitCode::FAILURE;
        }
    };
    let dirs = apps::application_dirs(|name| std::env::var(name).ok());
    let state = State {
        catalog,
        apps: AppScanner::new(dirs),
    };
    plugin::run_stdio(
        MANIFEST,
        RulesRouter {
            state: Arc::new(state),
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> State {
        State {
            catalog: Catalog::builtin().expect("built-in catalog"),
            // No directories: no applications.
            apps: AppScanner::new(Vec::new()),
        }
    }

    fn plan(params: Value) -> Result<Value, ErrorObject> {
        let request = PlanRequest::from_params(&params)?;
        Ok(state().plan(&request))
    }

    #[test]
    fn plan_result_shape() {
        let result = plan(json!({"utterance": "Open YouTube!"})).expect("planned");
        assert_eq!(
            result,
            json!({
                "steps": [{
                    "op": "ensure_url",
                    "args": {"url": "https://www.youtube.com"},
                    "provenance": "user",
                    "confirm": false,
                }],
                "rule": "open_site",
                "message": "open YouTube (https://www.youtube.com)",
            })
        );
        let result = plan(json!({"utterance": "pause", "provenance": "screen", "context": {}}))
            .expect("planned");
        assert_eq!(result["steps"][0]["provenance"], "screen");
        assert_eq!(result["steps"][0]["args"], json!({"command": "pause"}));
    }

    #[test]
    fn no_match_is_an_empty_plan() {
        let result = plan(json!({"utterance": " blorp the frobnicator "})).expect("planned");
        assert_eq!(
            result,
            json!({
                "steps": [],
                "rule": null,
                "message": "no rule matched \"blorp the frobnicator\"",
            })
        );
        // Punctuation only is not blank, just not understood.
        let result = plan(json!({"utterance": "?!"})).expect("planned");
        assert_eq!(result["steps"], json!([]));
    }

    #[test]
    fn bad_params_are_invalid_params() {
        for params in [
            json!({}),
            json!({"utterance": ""}),
            json!({"utterance": "   "}),
            json!({"utterance": null}),
            json!({"utterance": 3}),
            json!({"utterance": ["open", "youtube"]}),
            json!({"utterance": "pause", "provenance": 1}),
            json!({"utterance": "pause", "provenance": ""}),
        ] {
            let err = plan(params.clone()).expect_err("refused");
            assert_eq!(err.code, -32602, "{params}");
            assert!(err.message.contains("router.plan"), "{}", err.message);
        }
    }

    #[test]
    fn command_line() {
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            catalog_path(&args(&["--sites", "/x.toml"])),
            Ok(Some(PathBuf::from("/x.toml")))
        );
        assert_eq!(
            catalog_path(&args(&["--sites=/y.toml"])),
            Ok(Some(PathBuf::from("/y.toml")))
        );
        assert!(catalog_path(&args(&["--sites"])).is_err());
        assert!(catalog_path(&args(&["--frob"])).is_err());
    }

    #[test]
    fn manifest_is_valid() {
        let manifest =
            utter_protocol::manifest::Manifest::from_toml_str(MANIFEST, "utter-plugin.toml")
                .expect("manifest validates");
        assert_eq!(manifest.name, "rules");
    }
}
