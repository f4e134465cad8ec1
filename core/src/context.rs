//! The desktop context: the one reader of the context plugin's `context.snapshot`
//! (PROTOCOL.md §8, capability `context.live@1`).
//!
//! Every command is planned in the context read just before `router.plan`, a confirmation is
//! checked against the context read again after the yes, and after every step that acted the
//! context is read again before the next step ([`crate::pipeline`]). Plugins read the same
//! snapshot through `host.context` ([`crate::runner::host`]), and `runner.status` reports
//! which compositor the last good snapshot came from.
//!
//! A context plugin answers from its own event-stream cache, so a read is one local round
//! trip; it is bounded by [`READ_TIMEOUT`] so that a hung context plugin delays a command
//! by at most that much, and the last good snapshot is kept so `host.context` can serve it
//! (marked stale) when the plugin fails.

use serde_json::{Value, json};
use std::sync::Mutex;
use std::time::Duration;

use crate::policy::Provenance;
use crate::supervisor::Supervisor;
use utter_ipc::status::ContextStatus;

/// The longest one context read may take, whatever the caller's own timeout.
pub const READ_TIMEOUT: Duration = Duration::from_millis(1000);

/// One read of the desktop context.
#[derive(Debug, Clone, PartialEq)]
pub enum ContextRead {
    /// No running plugin provides `context.live` (`context.snapshot`).
    NoPlugin,
    /// The plugin `source` answered `snapshot`.
    Fresh {
        /// The context plugin's id.
        source: String,
        /// Its `context.snapshot` result, as it is.
        snapshot: Value,
    },
    /// The plugin `source` failed with `error`.
    Failed {
        /// The context plugin's id.
        source: String,
        /// Its error message.
        error: String,
    },
}

impl ContextRead {
    /// The snapshot, if this read got one.
    pub fn snapshot(&self) -> Option<&Value> {
        match self {
            ContextRead::Fresh { snapshot, .. } => Some(snapshot),
            _ => None,
        }
    }

    /// The form [`crate::pipeline::context_drift`] compares: `None` when there is no
    /// context plugin, `Some(Null)` when it failed, else the snapshot.
    pub fn for_drift(&self) -> Option<Value> {
        match self {
            ContextRead::NoPlugin => None,
            ContextRead::Failed { .. } => Some(Value::Null),
            ContextRead::Fresh { snapshot, .. } => Some(snapshot.clone()),
        }
    }
}

/// The reader, with the last good snapshot.
#[derive(Debug, Default)]
pub struct Context {
    last: Mutex<Option<(String, Value)>>,
    /// The last failure's message, so that one lasting cause (no compositor in this
    /// session) is logged once, not with every command.
    last_error: Mutex<Option<(String, String)>>,
}

impl Context {
    /// A reader with nothing read yet.
    pub fn new() -> Context {
        Context::default()
    }

    /// Ask the context plugin for its snapshot, within `timeout` (clamped to
    /// [`READ_TIMEOUT`]). A snapshot must be a JSON object; anything else counts as a
    /// failed read (routers are not handed a string where a desktop should be). The request carries provenance `screen`: what the plugin serves
    /// describes the screen. A plugin that is `exclude` is not asked (a plugin reading the
    /// context through `host.context` is not asked for its own).
    pub async fn read(
        &self,
        supervisor: &Supervisor,
        timeout: Duration,
        exclude: Option<&str>,
    ) -> ContextRead {
        self.read_with(supervisor, timeout, exclude, json!({}))
            .await
    }

    /// [`Context::read`] with `refresh: true`: the context plugin reads the compositor's
    /// state afresh instead of serving what its events kept (sway sends no event when a
    /// floating window moves). What a plugin-written point is checked against.
    pub async fn read_refreshed(&self, supervisor: &Supervisor, timeout: Duration) -> ContextRead {
        self.read_with(supervisor, timeout, None, json!({"refresh": true}))
            .await
    }

    /// Ask each context source in turn ([`Supervisor::find_context_sources`]) until one
    /// answers: the compositor plugin first; where it has no compositor to read (GNOME, KDE
    /// Plasma), a plugin that serves `context.snapshot` without declaring `context.live` (the
    /// a11y plugin's focused application). When none answers, the first one's failure.
    async fn read_with(
        &self,
        supervisor: &Supervisor,
        timeout: Duration,
        exclude: Option<&str>,
        params: Value,
    ) -> ContextRead {
        let sources: Vec<String> = supervisor
            .find_context_sources()
            .into_iter()
            .filter(|s| Some(s.as_str()) != exclude)
            .collect();
        let mut first_failure = None;
        for source in sources {
            match self
                .read_one(supervisor, source, timeout, params.clone())
                .await
            {
                fresh @ ContextRead::Fresh { .. } => return fresh,
                failed => {
                    first_failure.get_or_insert(failed);
                }
            }
        }
        first_failure.unwrap_or(ContextRead::NoPlugin)
    }

    async fn read_one(
        &self,
        supervisor: &Supervisor,
        source: String,
        timeout: Duration,
        params: Value,
    ) -> ContextRead {
        match supervisor
            .call_as(
                &source,
                "context.snapshot",
                params,
                timeout.min(READ_TIMEOUT),
                Provenance::Screen,
            )
            .await
        {
            Ok(snapshot) if !snapshot.is_object() => {
                let error = format!(
                    "context.snapshot answered {}, not an object; ignored",
                    match snapshot {
                        Value::Null => "null",
                        Value::Bool(_) => "a boolean",
                        Value::Number(_) => "a number",
                        Value::String(_) => "a string",
                        Value::Array(_) => "an array",
                        Value::Object(_) => "an object",
                    }
                );
                tracing::info!(plugin = %source, "{error}");
                *self.last_error.lock().expect("context lock") =
                    Some((source.clone(), error.clone()));
                ContextRead::Failed { source, error }
            }
            Ok(snapshot) => {
                *self.last.lock().expect("context lock") = Some((source.clone(), snapshot.clone()));
                // Another source's lasting failure (no compositor IPC, when the a11y plugin
                // answered instead) stays, so it is logged once and status can say it.
                let mut last_error = self.last_error.lock().expect("context lock");
                if last_error.as_ref().is_some_and(|(s, _)| *s == source) {
                    *last_error = None;
                }
                drop(last_error);
                ContextRead::Fresh { source, snapshot }
            }
            Err(e) => {
                let failure = (source.clone(), e.message.clone());
                let repeated = self
                    .last_error
                    .lock()
                    .expect("context lock")
                    .replace(failure.clone())
                    == Some(failure);
                if repeated {
                    tracing::debug!(plugin = %source, error = %e.message, "context.snapshot failed again");
                } else {
                    // Not a warning: outside a compositor session (a one-shot `utter say` on a
                    // server) this is expected, and `utter status` and `utter context` say it.
                    tracing::info!(plugin = %source, error = %e.message, "context.snapshot failed; planning without a context");
                }
                ContextRead::Failed {
                    source,
                    error: e.message,
                }
            }
        }
    }

    /// The last good snapshot and the plugin it came from.
    pub fn last(&self) -> Option<(String, Value)> {
        self.last.lock().expect("context lock").clone()
    }

    /// What `runner.status` says about the context: the plugin and the compositor of the
    /// last good snapshot (its `compositor` object: `{name, version, socket}`), and the last
    /// read's error when it failed.
    pub fn status(&self) -> Option<ContextStatus> {
        let error = self.last_error.lock().expect("context lock").clone();
        let Some((plugin, snapshot)) = self.last() else {
            let (plugin, error) = error?;
            return Some(ContextStatus {
                plugin,
                compositor: None,
                version: None,
                socket: None,
                error: Some(error),
            });
        };
        let compositor = snapshot.get("compositor");
        let text = |key: &str| {
            compositor
                .and_then(|c| c.get(key))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        Some(ContextStatus {
            plugin,
            compositor: text("name"),
            version: text("version"),
            socket: text("socket"),
            error: error.map(|(_, e)| e),
        })
    }
}
