//! The runner as a service: the supervisor, the policy, confirmations, events and reload,
//! shared by the CLI (`utter say` in-process), the client socket and the D-Bus object.
//!
//! Its parts that serve one kind of caller are child modules: [`host`] (plugins' callbacks),
//! [`invoke`] (a client's relay) and [`voice`] (the voice loop). They extend [`Runner`]; the
//! modules below the runner (pipeline, supervisor, policy, ...) never name it.

pub mod capture;
pub mod host;
pub mod invoke;
pub mod voice;

use serde_json::Value;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::{broadcast, watch};
use utter_protocol::ErrorObject;

use crate::audit::{Audit, AuditEntry};
use crate::config::{self, Config, ConfigError, LoadedConfig};
use crate::confirm::{Confirmations, Door};
use crate::events::{Event, ServiceState};
use crate::handles::HandleStore;
use crate::pipeline::{CommandOptions, CommandOutcome, ConfirmRequest, Confirmer, Pipeline};
use crate::policy::{Policy, Provenance};
use crate::ptt::Ptt;
use crate::supervisor::{PluginReport, ReloadReport, Supervisor, SupervisorOptions};

pub use utter_ipc::status::Status;

/// The runner's version, as `runner.version` and D-Bus `Version` report it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Capacity of the event channel; a subscriber further behind than this is dropped.
pub const EVENT_BACKLOG: usize = 256;

/// Starts the push-to-talk triggers that need I/O of their own (the portal shortcut, evdev
/// keyboards) for a `[ptt]` section, each feeding `ptt`; returns their tasks, which the
/// runner aborts on reload and shutdown. Supplied by the daemon.
pub type TriggerStarter =
    Arc<dyn Fn(&crate::config::PttSection, &Ptt) -> Vec<tokio::task::JoinHandle<()>> + Send + Sync>;

/// A started runner.
pub struct Runner {
    /// The plugin supervisor. Not public: a door reaches a plugin only through the runner's
    /// typed requests ([`Runner::invoke`] and its gate, [`Runner::command`],
    /// [`Runner::capture`], [`Runner::subscribe_stream`]).
    pub(crate) supervisor: Arc<Supervisor>,
    policy: RwLock<Policy>,
    /// Pending confirmations.
    pub confirmations: Arc<Confirmations>,
    events: broadcast::Sender<Event>,
    state: watch::Sender<ServiceState>,
    config: RwLock<LoadedConfig>,
    /// The file reloads read (`None`: the user's config, else the embedded default).
    config_path: Option<PathBuf>,
    /// Serialises reloads.
    reload_lock: tokio::sync::Mutex<()>,
    /// The last gate decisions.
    audit: Audit,
    /// The last commands that acted ([`crate::history`]).
    history: crate::history::History,
    /// The voice loop's dictation mode ([`crate::dictation`]).
    dictation: crate::dictation::Dictation,
    /// The desktop context reader (the last good snapshot with it).
    pub(crate) context: crate::context::Context,
    /// The input rate limit every acting path shares ([`crate::rate`]).
    pub(crate) input_rate: crate::rate::InputRate,
    /// The handle store (`None` when its directory could not be made).
    pub handles: Option<Arc<HandleStore>>,
    /// Push-to-talk: every trigger feeds this one state machine ([`crate::ptt`]).
    pub ptt: Ptt,
    /// The voice loop ([`crate::voice`]).
    pub voice: voice::Voice,
    /// The running push-to-talk triggers (portal, evdev), stopped at shutdown.
    ptt_triggers: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// What [`Runner::start_ptt_triggers`] was given (a reload restarts changed triggers).
    ptt_starter: std::sync::Mutex<Option<TriggerStarter>>,
    /// The stream relay (PROTOCOL.md §10.3).
    pub streams: Arc<crate::streams::StreamHub>,
}

/// Open the handle store of `[runner]` and start its collector.
fn open_handle_store(section: &crate::config::RunnerSection) -> Option<Arc<HandleStore>> {
    let root = HandleStore::default_root(&section.handle_root);
    let ttl = Duration::try_from_secs_f64(section.handle_ttl)
        .ok()
        .filter(|d| !d.is_zero())
        .unwrap_or(Duration::from_secs(300));
    match HandleStore::open(
        root.clone(),
        ttl,
        section.handle_quota,
        section.handle_quota_total,
    ) {
        Ok(store) => {
            store.spawn_collector();
            Some(store)
        }
        Err(e) => {
            tracing::error!(root = %root.display(), error = %e, "the handle store cannot be opened; handle.* and fd.pass of handles are unavailable");
            None
        }
    }
}

impl Runner {
    /// Start every plugin of `config` and wait for their handshakes. `config_path` is the
    /// file a reload reads again.
    pub async fn start(
        config: LoadedConfig,
        options: SupervisorOptions,
        config_path: Option<PathBuf>,
    ) -> Arc<Runner> {
        let (events, _) = broadcast::channel(EVENT_BACKLOG);
        let (state, _) = watch::channel(ServiceState::Starting);
        let supervisor = Arc::new(Supervisor::start(&config.config, options).await);
        let confirmations = Arc::new(Confirmations::new(
            Duration::from_millis(config.config.runner.confirm_timeout_ms),
            events.clone(),
        ));
        let handles = open_handle_store(&config.config.runner);
        let ptt = Ptt::from_config(&config.config.ptt);
        let streams = Arc::new(crate::streams::StreamHub::new(
            config.config.runner.lossy_queue,
            config.config.runner.credit_window,
            handles.clone(),
        ));
        let runner = Arc::new(Runner {
            streams,
            handles,
            ptt,
            voice: voice::Voice::new(),
            ptt_triggers: std::sync::Mutex::new(Vec::new()),
            ptt_starter: std::sync::Mutex::new(None),
            supervisor,
            policy: RwLock::new(Policy::new(&config.config.policy)),
            confirmations,
            events,
            state,
            config: RwLock::new(config),
            config_path,
            reload_lock: tokio::sync::Mutex::new(()),
            audit: Audit::new(),
            history: crate::history::History::new(),
            dictation: crate::dictation::Dictation::new(),
            context: crate::context::Context::new(),
            input_rate: crate::rate::InputRate::new(),
        });
        runner.supervisor.set_host(Arc::new(host::RunnerHost {
            runner: Arc::downgrade(&runner),
        }));
        runner.update_state();
        runner.forward_ptt();
        // Read the desktop context once, so status names the compositor from the start.
        let _ = runner
            .context
            .read(&runner.supervisor, runner.supervisor.rpc_timeout(), None)
            .await;
        // Forward plugin status changes and keep the overall state current.
        let mut plugin_events = runner.supervisor.events();
        let weak = Arc::downgrade(&runner);
        tokio::spawn(async move {
            loop {
                let event = match plugin_events.recv().await {
                    Ok(e) => e,
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                let Some(runner) = weak.upgrade() else { return };
                // Streams of a gone (or replaced) instance end, with the reason.
                let running = event.status.is_running();
                let reason = runner
                    .supervisor
                    .plugins()
                    .into_iter()
                    .find(|p| p.id == event.id)
                    .and_then(|p| p.last_error)
                    .map(|e| format!("plugin {} is {}: {e}", event.id, event.status.as_str()))
                    .unwrap_or_else(|| format!("plugin {} is {}", event.id, event.status.as_str()));
                runner
                    .streams
                    .plugin_changed(&event.id, event.epoch, running, &reason);
                // A plugin process that is gone holds no handles any more.
                if !event.status.is_running() {
                    if let Some(store) = &runner.handles {
                        store.drop_scope(&crate::handles::Scope::Plugin(event.id.clone()));
                    }
                }
                let _ = runner.events.send(Event::PluginState {
                    id: event.id,
                    epoch: event.epoch,
                    status: event.status,
                });
                runner.update_state();
            }
        });
        runner
    }

    /// Publish push-to-talk transitions and trigger changes as runner events.
    fn forward_ptt(&self) {
        let mut transitions = self.ptt.subscribe();
        let mut triggers = self.ptt.subscribe_triggers();
        let events = self.events.clone();
        tokio::spawn(async move {
            loop {
                let event = tokio::select! {
                    t = transitions.recv() => match t {
                        Ok(t) => Event::Ptt(t),
                        Err(broadcast::error::RecvError::Lagged(_)) => continue,
                        Err(broadcast::error::RecvError::Closed) => return,
                    },
                    t = triggers.recv() => match t {
                        Ok(t) => Event::PttTrigger(t),
                        Err(broadcast::error::RecvError::Lagged(_)) => continue,
                        Err(broadcast::error::RecvError::Closed) => return,
                    },
                };
                let _ = events.send(event);
            }
        });
    }

    /// Start the push-to-talk triggers of `[ptt]` with `starter` (the daemon's portal and
    /// evdev triggers; the core names neither). `utter daemon` calls this once; a one-shot
    /// `utter say` does not (it must not bind keys). The socket and D-Bus triggers need
    /// nothing started. A reload that changes which triggers run or their keys
    /// ([`crate::config::PttSection::same_triggers`]) stops the running triggers and calls
    /// `starter` again.
    pub fn start_ptt_triggers(&self, starter: TriggerStarter) {
        let section = self.config().config.ptt;
        let mut tasks = self.ptt_triggers.lock().expect("ptt trigger lock");
        for task in tasks.drain(..) {
            task.abort();
        }
        tasks.extend(starter(&section, &self.ptt));
        *self.ptt_starter.lock().expect("ptt starter lock") = Some(starter);
    }

    fn update_state(&self) {
        if *self.state.borrow() == ServiceState::Stopping {
            return;
        }
        let plugins = self.supervisor.plugins();
        let state = if plugins.iter().all(|p| p.status.is_running()) {
            ServiceState::Ready
        } else {
            ServiceState::Degraded
        };
        if self.state.send_if_modified(|s| {
            let changed = *s != state;
            *s = state;
            changed
        }) {
            let _ = self.events.send(Event::State { state });
        }
    }

    /// Run one utterance. `client` is the requesting client's confirmation door (a
    /// `host.confirm` on its connection, or the terminal for `utter say`).
    ///
    /// # Errors
    /// As [`Pipeline::run`].
    pub async fn command(
        &self,
        utterance: &str,
        options: &CommandOptions,
        client: Option<Door>,
    ) -> Result<CommandOutcome, ErrorObject> {
        // A caller's `timeout_ms` also bounds each confirmation wait, so a caller that gives
        // up is not followed by a step approved later.
        let confirm_cap = options
            .confirm_timeout_ms
            .or(options.timeout_ms)
            .filter(|ms| *ms > 0)
            .map(Duration::from_millis);
        let confirmer = self.confirmer(client, confirm_cap);
        let policy = || self.policy();
        // The router is told the decision head's tiers of the config in force.
        let mut options = options.clone();
        options.decide.get_or_insert(self.config().config.decide);
        let options = &options;
        let dictating_before = self.dictation.is_on();
        let span = tracing::info_span!(
            "command",
            utterance = %utterance.chars().take(200).collect::<String>(),
            dry_run = options.dry_run
        );
        let outcome = tracing::Instrument::instrument(
            Pipeline {
                supervisor: &self.supervisor,
                policy: &policy,
                confirmer: &confirmer,
                audit: Some(&self.audit),
                context: &self.context,
                input_rate: &self.input_rate,
                history: Some(&self.history),
                dictation: Some(&self.dictation),
            }
            .run(utterance, options),
            span,
        )
        .await;
        let dictating = self.dictation.is_on();
        if dictating != dictating_before {
            let _ = self.events.send(Event::Dictation { on: dictating });
        }
        if let Ok(outcome) = &outcome {
            let _ = self.events.send(Event::CommandFinished {
                utterance: outcome.utterance.clone(),
                results: serde_json::to_value(&outcome.results).unwrap_or_default(),
                undoable: self.undoable(),
            });
        }
        outcome
    }

    /// Ask the router for the plan of `utterance` in `context`, checking and running
    /// nothing (what `utter eval` scores): the router's id and its answer as it gave it.
    ///
    /// # Errors
    /// `-32005` when no router runs; the router's error.
    pub async fn plan_only(
        &self,
        utterance: &str,
        context: Option<serde_json::Value>,
        timeout_ms: Option<u64>,
    ) -> Result<(String, serde_json::Value), ErrorObject> {
        let router = self.supervisor.find_router().ok_or_else(|| {
            ErrorObject::new(
                utter_protocol::ErrorCode::CapabilityMissing,
                "no router plugin is running (one providing router.plan@1); see `utter plugins`",
            )
        })?;
        let timeout = self.supervisor.effective_timeout(timeout_ms);
        // The decision head's tiers of the config in force, as the pipeline sends them.
        let decide = self.config().config.decide;
        let mut params = serde_json::json!({
            "utterance": utterance,
            "provenance": "user",
            "decide": {"act": decide.act, "ask": decide.ask},
        });
        if let Some(context) = context {
            params["context"] = context;
        }
        let planned = self
            .supervisor
            .call_as(
                &router,
                "router.plan",
                params,
                timeout,
                crate::policy::Provenance::User,
            )
            .await?;
        Ok((router, planned))
    }

    /// The confirmer of one command: every door of [`Confirmations`], plus `client`; each
    /// wait ends after `cap` when one is given (a denial, `by: "timeout"`).
    pub(crate) fn confirmer(&self, client: Option<Door>, cap: Option<Duration>) -> Confirmer {
        let confirmations = self.confirmations.clone();
        Arc::new(move |request: ConfirmRequest| {
            let confirmations = confirmations.clone();
            let client = client.clone();
            Box::pin(async move {
                let ask = confirmations.ask(request, client);
                match cap {
                    None => ask.await,
                    // Dropping `ask` withdraws the confirmation from every door.
                    Some(cap) => {
                        tokio::time::timeout(cap, ask)
                            .await
                            .unwrap_or(crate::confirm::Resolution {
                                approved: false,
                                by: "timeout".into(),
                            })
                    }
                }
            })
        })
    }

    /// The gate decisions kept in memory (the last 1000), oldest first; with `since`
    /// (seconds since the Unix epoch) only those at or after it.
    pub fn audit(&self, since: Option<u64>) -> Vec<AuditEntry> {
        self.audit.entries(since)
    }

    /// The last `limit` commands that acted (all kept when `None`), newest first
    /// ([`crate::history`]).
    pub fn history(&self, limit: Option<usize>) -> Vec<crate::history::HistoryEntry> {
        self.history.entries(limit)
    }

    /// Whether the voice loop dictates (types what it hears).
    pub fn dictating(&self) -> bool {
        self.dictation.is_on()
    }

    /// What "undo that" would reverse now: the utterance of the journal's newest command not
    /// undone, clipped to 200 characters.
    pub fn undoable(&self) -> Option<String> {
        let newest = self.history.undoable(1).ok()?;
        newest
            .first()
            .map(|e| utter_protocol::text::clip(&e.utterance, 200))
    }

    /// The current policy.
    pub fn policy(&self) -> Policy {
        self.policy.read().expect("policy lock").clone()
    }

    /// The audit trail the gate writes to.
    pub(crate) fn audit_trail(&self) -> &Audit {
        &self.audit
    }

    /// Refuse a door's caller that is one of this runner's plugins or was started by one
    /// ([`crate::groups::plugin_of_process`]): a plugin may not command, confirm, invoke, talk
    /// or reload through a client door (PROTOCOL.md §9.8); it acts only through `host.*`,
    /// where the gate knows it is a plugin. `what` names the refused member for the error.
    ///
    /// # Errors
    /// `-32003` naming the plugin; the refusal is logged and audited.
    pub fn refuse_plugin_caller(&self, pid: Option<u32>, what: &str) -> Result<(), ErrorObject> {
        let Some(pid) = pid else {
            return Ok(());
        };
        let plugin = match crate::groups::owner_of_process(pid) {
            crate::groups::ProcessOwner::Other => return Ok(()),
            crate::groups::ProcessOwner::Plugin(plugin) => plugin,
            crate::groups::ProcessOwner::Gone => {
                tracing::warn!(pid, what, "refused a client call whose process is gone");
                return Err(ErrorObject::new(
                    utter_protocol::ErrorCode::Denied,
                    format!(
                        "{what} is refused: the process that opened this connection (pid {pid}) is gone, so whoever holds the connection now cannot be told from a plugin; connect again"
                    ),
                ));
            }
        };
        tracing::warn!(plugin = %plugin, pid, what, "refused a client call from a plugin's process");
        self.audit.record(
            AuditEntry::new(
                &format!("{what} from pid {pid}"),
                what,
                &serde_json::json!({"pid": pid}),
                Provenance::Screen,
                "denied",
            )
            .code(utter_protocol::ErrorCode::Denied.code())
            .by("door")
            .plugin(plugin.clone()),
        );
        Err(ErrorObject::new(
            utter_protocol::ErrorCode::Denied,
            format!(
                "{what} is refused: the caller (pid {pid}) is plugin {plugin:?} or a process it started; plugins act only through host.action, where the gate asks the person"
            ),
        ))
    }

    /// The supervisor itself, for tests that drive a test plugin past the gate (its
    /// `test.die`, host callbacks under a chosen provenance). Only with the `testkit`
    /// feature, which the service's own build does not enable.
    #[cfg(feature = "testkit")]
    #[doc(hidden)]
    pub fn supervisor(&self) -> &Arc<Supervisor> {
        &self.supervisor
    }

    /// `stream.subscribe` for a client connection (PROTOCOL.md §10.3): the stream hub asks
    /// the plugin that lists the stream; see [`crate::streams::StreamHub::subscribe`].
    ///
    /// # Errors
    /// As [`crate::streams::StreamHub::subscribe`].
    pub async fn subscribe_stream(
        &self,
        client: utter_protocol::Connection,
        owner: u64,
        params: &Value,
    ) -> Result<(Value, Box<dyn FnOnce() + Send>), ErrorObject> {
        self.streams
            .subscribe(&self.supervisor, client, owner, params)
            .await
    }

    /// The plugins and their states.
    pub fn plugins(&self) -> Vec<PluginReport> {
        self.supervisor.plugins()
    }

    /// A full snapshot.
    /// (The config is read under its lock once, not copied, and the plugins listed once:
    /// `runner.status` is what a bar widget polls.)
    pub fn status(&self) -> Status {
        let plugins = self.plugins();
        let loaded = self.config.read().expect("config lock");
        let decide = decide_status(&loaded.config, &plugins);
        let mut status = Status::new(
            VERSION.to_owned(),
            *self.state.borrow(),
            loaded.origin.clone(),
            plugins,
            self.ptt.state(),
            self.voice_status(&loaded.config),
        );
        status.context = self.context.status();
        status.decide = decide;
        status.undoable = self.undoable();
        status.dictation = self.dictation.is_on();
        status
    }

    /// The voice loop's status, with what to do when `[stt] model` names a model that is not
    /// installed (looked at now, so `utter models pull` shows at once).
    fn voice_status(&self, config: &Config) -> utter_ipc::VoiceStatus {
        let mut voice = self.voice.status();
        if config.plugin_for(&config.stt.plugin, "stt").is_some() {
            voice.missing_model = config.stt.missing_model();
        }
        voice
    }

    /// The desktop context now (`runner.context`): the context plugin's snapshot.
    ///
    /// # Errors
    /// `-32005` when no plugin provides `context.live`; `-32000` with the plugin's words
    /// when its `context.snapshot` fails.
    pub async fn context_now(&self) -> Result<utter_ipc::methods::ContextReply, ErrorObject> {
        match self
            .context
            .read(&self.supervisor, self.supervisor.rpc_timeout(), None)
            .await
        {
            crate::context::ContextRead::Fresh { source, snapshot } => {
                Ok(utter_ipc::methods::ContextReply { source, snapshot })
            }
            crate::context::ContextRead::NoPlugin => Err(ErrorObject::new(
                utter_protocol::ErrorCode::CapabilityMissing,
                "no context plugin is running (one providing context.live@1, e.g. the \
                 compositor plugin); see `utter plugins`",
            )),
            crate::context::ContextRead::Failed { source, error } => Err(ErrorObject::plugin(
                format!("the context plugin {source:?} could not read the desktop: {error}"),
            )),
        }
    }

    /// The overall state.
    pub fn state(&self) -> ServiceState {
        *self.state.borrow()
    }

    /// Subscribe to events (take a [`Runner::status`] snapshot first).
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// Publish an event (used by the doors, e.g. a plugin's `host.emit`).
    pub fn publish(&self, event: Event) {
        let _ = self.events.send(event);
    }

    /// The config in force.
    pub fn config(&self) -> LoadedConfig {
        self.config.read().expect("config lock").clone()
    }

    /// Read the config file again and apply it. The new file is parsed and validated first;
    /// on any error the running config stays and the error (file:line: key) is returned.
    ///
    /// # Errors
    /// The [`ConfigError`] of the new file.
    pub async fn reload(&self) -> Result<ReloadReport, ConfigError> {
        let _guard = self.reload_lock.lock().await;
        let loaded = config::load(self.config_path.as_deref())?;
        // A config that would leave no router stops every command: keep the one in force.
        let had_one = self
            .config
            .read()
            .expect("config lock")
            .config
            .runs_a_router();
        if had_one && !loaded.config.runs_a_router() {
            return Err(ConfigError {
                errors: vec![config::ConfigIssue {
                    file: loaded.origin.clone(),
                    line: None,
                    key: None,
                    message: "this config runs no router plugin (kind \"router\"), so every command would fail with \"no router plugin is running\"; the running config is kept. Add the built-in one ([[plugin]] id = \"rules\", kind = \"router\", entrypoint = [\"utter\", \"plugin\", \"rules\"]), or remove every [[plugin]] entry to run the built-in plugins".into(),
                }],
                warnings: loaded.warnings,
            });
        }
        for warning in &loaded.warnings {
            tracing::warn!("config: {warning}");
        }
        let options = SupervisorOptions::from_config(&loaded.config);
        let report = self.supervisor.reload(&loaded.config, options).await;
        // A router that is configured but does not start (its program is missing or exits
        // at once) stops every command too: the previous config is started again.
        if had_one && self.supervisor.find_router().is_none() {
            let why: Vec<String> = self
                .supervisor
                .plugins()
                .into_iter()
                .filter(|p| {
                    loaded
                        .config
                        .plugin
                        .iter()
                        .any(|e| e.id == p.id && e.kind == "router")
                })
                .map(|p| {
                    format!(
                        "{}: {}",
                        p.id,
                        p.last_error.unwrap_or_else(|| p.status.as_str().to_owned())
                    )
                })
                .collect();
            let previous = self.config.read().expect("config lock").config.clone();
            let options = SupervisorOptions::from_config(&previous);
            self.supervisor.reload(&previous, options).await;
            return Err(ConfigError {
                errors: vec![config::ConfigIssue {
                    file: loaded.origin.clone(),
                    line: None,
                    key: None,
                    message: format!(
                        "no router plugin of this config started ({}), so every command would fail; the previous config runs again",
                        if why.is_empty() {
                            "none is configured".to_owned()
                        } else {
                            why.join("; ")
                        }
                    ),
                }],
                warnings: loaded.warnings,
            });
        }
        self.ptt.set_limits(&loaded.config.ptt);
        let old_ptt = self.config.read().expect("config lock").config.ptt.clone();
        let starter = self.ptt_starter.lock().expect("ptt starter lock").clone();
        let restart_triggers = starter.is_some() && !old_ptt.same_triggers(&loaded.config.ptt);
        *self.policy.write().expect("policy lock") = Policy::new(&loaded.config.policy);
        self.confirmations.set_timeout(Duration::from_millis(
            loaded.config.runner.confirm_timeout_ms,
        ));
        tracing::info!(
            config = %loaded.origin,
            added = %report.added.join(","),
            removed = %report.removed.join(","),
            restarted = %report.restarted.join(","),
            unchanged = report.unchanged.len(),
            "config reloaded"
        );
        let audio_changed =
            self.config.read().expect("config lock").config.audio != loaded.config.audio;
        *self.config.write().expect("config lock") = loaded;
        self.voice.reconfigure(self, audio_changed).await;
        if let Some(starter) = starter.filter(|_| restart_triggers) {
            self.start_ptt_triggers(starter);
        }
        let _ = self.events.send(Event::Reloaded {
            report: report.clone(),
        });
        self.update_state();
        Ok(report)
    }

    /// Drain every plugin, then remove every handle blob (none outlives a clean stop).
    pub async fn shutdown(&self) {
        for task in self
            .ptt_triggers
            .lock()
            .expect("ptt trigger lock")
            .drain(..)
        {
            task.abort();
        }
        self.state.send_replace(ServiceState::Stopping);
        let _ = self.events.send(Event::State {
            state: ServiceState::Stopping,
        });
        self.supervisor.shutdown().await;
        if let Some(store) = &self.handles {
            store.remove_all();
        }
    }
}

/// The decision head's tiers and its chooser, as `runner.status` reports them (`plugins`:
/// the supervisor's reports, for the chooser's state).
fn decide_status(config: &Config, plugins: &[PluginReport]) -> utter_ipc::DecideStatus {
    let d = &config.decide;
    let chooser = config
        .plugin_for(&config.llm.plugin, "llm")
        .map(|p| p.id.clone());
    let report = chooser
        .as_ref()
        .and_then(|id| plugins.iter().find(|p| &p.id == id));
    let set = |s: &str| Some(s.trim().to_owned()).filter(|s| !s.is_empty());
    utter_ipc::DecideStatus {
        act: d.act,
        ask: d.ask,
        chooser_enabled: d.chooser,
        chooser_min: d.chooser_min,
        planner: d.planner,
        chooser_status: report.map(|r| r.status),
        chooser_health: report.map(|r| r.health.clone()).unwrap_or_default(),
        chooser,
        model: set(&config.llm.model),
        endpoint: set(&config.llm.endpoint),
    }
}
