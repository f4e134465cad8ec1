//! The runner as a service: the supervisor, the policy, confirmations, events and reload,
//! shared by the CLI (`utter say` in-process), the client socket and the D-Bus object.

use serde::Serialize;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::{broadcast, watch};
use utter_protocol::ErrorObject;

use crate::audit::{Audit, AuditEntry};
use crate::config::{self, ConfigError, LoadedConfig};
use crate::confirm::{Confirmations, Door};
use crate::events::{Event, ServiceState};
use crate::handles::HandleStore;
use crate::pipeline::{CommandOptions, CommandOutcome, ConfirmRequest, Confirmer, Pipeline};
use crate::policy::{Policy, Provenance};
use crate::ptt::{Ptt, PttState};
use crate::supervisor::{HostHandler, PluginReport, ReloadReport, Supervisor, SupervisorOptions};
use serde_json::{Value, json};
use std::future::Future;
use std::pin::Pin;
use std::sync::Weak;
use std::sync::atomic::Ordering;
use utter_protocol::ErrorCode;

/// The runner's version, as `runner.version` and D-Bus `Version` report it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Capacity of the event channel; a subscriber further behind than this is dropped.
pub const EVENT_BACKLOG: usize = 256;

/// A full status snapshot: `{version, state, config, plugins}`.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// Runner version.
    pub version: &'static str,
    /// Overall state.
    pub state: ServiceState,
    /// Where the config came from.
    pub config: String,
    /// Every plugin.
    pub plugins: Vec<PluginReport>,
    /// Push-to-talk: held or not, the limits, each trigger's state.
    pub ptt: PttState,
    /// The voice loop: its state, the stt plugin and the microphone.
    pub voice: crate::voice::VoiceStatus,
}

/// A started runner.
pub struct Runner {
    /// The plugin supervisor.
    pub supervisor: Arc<Supervisor>,
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
    /// The last context snapshot read for `host.context` (already tagged untrusted).
    context_cache: std::sync::Mutex<Option<Value>>,
    /// The handle store (`None` when its directory could not be made).
    pub handles: Option<Arc<HandleStore>>,
    /// Push-to-talk: every trigger feeds this one state machine ([`crate::ptt`]).
    pub ptt: Ptt,
    /// The voice loop ([`crate::voice`]).
    pub voice: crate::voice::Voice,
    /// The running push-to-talk triggers (portal, evdev), stopped at shutdown.
    ptt_triggers: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// Whether [`Runner::start_ptt_triggers`] ran (a reload then restarts changed triggers).
    ptt_triggers_started: std::sync::atomic::AtomicBool,
    /// The `use_bus` of the last [`Runner::start_ptt_triggers`].
    ptt_use_bus: std::sync::atomic::AtomicBool,
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
    match HandleStore::open(root.clone(), ttl, section.handle_quota) {
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
            voice: crate::voice::Voice::new(),
            ptt_triggers: std::sync::Mutex::new(Vec::new()),
            ptt_triggers_started: std::sync::atomic::AtomicBool::new(false),
            ptt_use_bus: std::sync::atomic::AtomicBool::new(true),
            supervisor,
            policy: RwLock::new(Policy::new(&config.config.policy)),
            confirmations,
            events,
            state,
            config: RwLock::new(config),
            config_path,
            reload_lock: tokio::sync::Mutex::new(()),
            audit: Audit::new(),
            context_cache: std::sync::Mutex::new(None),
        });
        runner.supervisor.set_host(Arc::new(RunnerHost {
            runner: Arc::downgrade(&runner),
        }));
        runner.update_state();
        runner.forward_ptt();
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

    /// Start the push-to-talk triggers of `[ptt]`: the portal (when `portal = true`) and
    /// evdev (when `evdev = true`). `utter daemon` calls this once; a one-shot `utter say`
    /// does not (it must not bind keys). The socket and D-Bus triggers need nothing started.
    /// A reload that changes `portal`, `shortcut`, `evdev` or `evdev_key` restarts them.
    /// `use_bus` false (`utter daemon --no-dbus`) keeps the portal off the session bus.
    pub fn start_ptt_triggers(&self, use_bus: bool) {
        self.ptt_triggers_started.store(true, Ordering::Relaxed);
        self.ptt_use_bus.store(use_bus, Ordering::Relaxed);
        let section = self.config().config.ptt;
        let mut tasks = self.ptt_triggers.lock().expect("ptt trigger lock");
        for task in tasks.drain(..) {
            task.abort();
        }
        if section.portal && !use_bus {
            self.ptt
                .set_trigger("portal", "disabled", "utter daemon --no-dbus");
        } else if section.portal {
            tasks.push(crate::ptt::portal::spawn(
                self.ptt.clone(),
                section.shortcut.clone(),
            ));
        } else {
            self.ptt
                .set_trigger("portal", "disabled", "[ptt] portal = false");
        }
        if section.evdev {
            match crate::ptt::parse_key(&section.evdev_key) {
                Ok(key) => tasks.push(crate::ptt::evdev::spawn(self.ptt.clone(), key)),
                Err(e) => self.ptt.set_trigger("evdev", "unavailable", &e),
            }
        } else {
            self.ptt
                .set_trigger("evdev", "disabled", "[ptt] evdev = false");
        }
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
        let outcome = Pipeline {
            supervisor: &self.supervisor,
            policy: &policy,
            confirmer: &confirmer,
            audit: Some(&self.audit),
        }
        .run(utterance, options)
        .await;
        if let Ok(outcome) = &outcome {
            let _ = self.events.send(Event::CommandFinished {
                utterance: outcome.utterance.clone(),
                results: serde_json::to_value(&outcome.results).unwrap_or_default(),
            });
        }
        outcome
    }

    /// The confirmer of one command: every door of [`Confirmations`], plus `client`; each
    /// wait ends after `cap` when one is given (a denial, `by: "timeout"`).
    fn confirmer(&self, client: Option<Door>, cap: Option<Duration>) -> Confirmer {
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

    /// The current policy.
    pub fn policy(&self) -> Policy {
        self.policy.read().expect("policy lock").clone()
    }

    /// Run the current policy's gates for one step ([`Policy::check`]) without copying the
    /// policy (a copy costs more than the check; `runner.invoke` runs this per call).
    ///
    /// # Errors
    /// As [`Policy::check`].
    pub fn check_policy(
        &self,
        op: &str,
        args: &serde_json::Value,
        provenance: crate::policy::Provenance,
        confirm_requested: bool,
    ) -> Result<crate::policy::Decision, ErrorObject> {
        self.policy
            .read()
            .expect("policy lock")
            .check(op, args, provenance, confirm_requested)
    }

    /// The plugins and their states.
    pub fn plugins(&self) -> Vec<PluginReport> {
        self.supervisor.plugins()
    }

    /// A full snapshot.
    pub fn status(&self) -> Status {
        Status {
            version: VERSION,
            state: *self.state.borrow(),
            config: self.config.read().expect("config lock").origin.clone(),
            plugins: self.plugins(),
            ptt: self.ptt.state(),
            voice: self.voice.status(),
        }
    }

    /// The overall state.
    pub fn state(&self) -> ServiceState {
        *self.state.borrow()
    }

    /// Follow the overall state.
    pub fn watch_state(&self) -> watch::Receiver<ServiceState> {
        self.state.subscribe()
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
        for warning in &loaded.warnings {
            tracing::warn!("config: {warning}");
        }
        let options = SupervisorOptions::from_config(&loaded.config);
        let report = self.supervisor.reload(&loaded.config, options).await;
        self.ptt.set_limits(&loaded.config.ptt);
        let old_ptt = self.config.read().expect("config lock").config.ptt.clone();
        let restart_triggers = self.ptt_triggers_started.load(Ordering::Relaxed)
            && (
                old_ptt.portal,
                &old_ptt.shortcut,
                old_ptt.evdev,
                &old_ptt.evdev_key,
            ) != (
                loaded.config.ptt.portal,
                &loaded.config.ptt.shortcut,
                loaded.config.ptt.evdev,
                &loaded.config.ptt.evdev_key,
            );
        *self.policy.write().expect("policy lock") = Policy::new(&loaded.config.policy);
        self.confirmations.set_timeout(Duration::from_millis(
            loaded.config.runner.confirm_timeout_ms,
        ));
        tracing::info!(config = %loaded.origin, ?report, "config reloaded");
        let audio_changed =
            self.config.read().expect("config lock").config.audio != loaded.config.audio;
        *self.config.write().expect("config lock") = loaded;
        self.voice.reconfigure(self, audio_changed).await;
        if restart_triggers {
            self.start_ptt_triggers(self.ptt_use_bus.load(Ordering::Relaxed));
        }
        let _ = self.events.send(Event::Reloaded {
            report: report.clone(),
        });
        self.update_state();
        Ok(report)
    }

    /// Drain every plugin.
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
    }
}

/// Serves plugins' `host.*` callbacks (PROTOCOL.md §9.6) on behalf of the runner.
struct RunnerHost {
    runner: Weak<Runner>,
}

impl HostHandler for RunnerHost {
    fn handle(
        &self,
        plugin: String,
        epoch: u64,
        method: String,
        params: Value,
        provenance: Provenance,
    ) -> Pin<Box<dyn Future<Output = Result<Value, ErrorObject>> + Send>> {
        let runner = self.runner.clone();
        Box::pin(async move {
            let Some(runner) = runner.upgrade() else {
                return Err(ErrorObject::plugin("the runner is shutting down"));
            };
            runner
                .host_call(&plugin, epoch, &method, params, provenance)
                .await
        })
    }

    fn notify(&self, plugin: &str, _epoch: u64, method: &str, params: Value) {
        if let Some(runner) = self.runner.upgrade() {
            runner
                .streams
                .on_plugin_notification(plugin, method, params);
        }
    }

    fn fd_pass(
        &self,
        plugin: &str,
        params: &Value,
    ) -> Result<(Value, std::os::fd::OwnedFd), ErrorObject> {
        let Some(runner) = self.runner.upgrade() else {
            return Err(ErrorObject::plugin("the runner is shutting down"));
        };
        crate::socket::session::fd_pass(
            &runner,
            &crate::handles::Scope::Plugin(plugin.to_owned()),
            params,
        )
    }
}

/// The provenance tag of a context field, by its key.
fn field_provenance(key: &str) -> Provenance {
    match key {
        "title" | "titles" => Provenance::Title,
        "clipboard" => Provenance::Clipboard,
        "ocr" | "ocr_text" => Provenance::Ocr,
        "a11y" | "accessibility" | "name" | "role" | "label" => Provenance::A11y,
        _ => Provenance::Screen,
    }
}

/// Tag every scalar of a context snapshot as untrusted: `{value, provenance}`, the
/// provenance chosen by the nearest key that says where it came from.
fn tag_untrusted(value: &Value, inherited: Provenance) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let p = match field_provenance(k) {
                        Provenance::Screen => inherited,
                        specific => specific,
                    };
                    (k.clone(), tag_untrusted(v, p))
                })
                .collect(),
        ),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| tag_untrusted(v, inherited)).collect())
        }
        scalar => json!({"value": scalar, "provenance": inherited.as_str()}),
    }
}

impl Runner {
    /// Serve one `host.*` callback of plugin `plugin`. `provenance` is the least trusted
    /// provenance of the requests that plugin is serving.
    async fn host_call(
        &self,
        plugin: &str,
        epoch: u64,
        method: &str,
        params: Value,
        provenance: Provenance,
    ) -> Result<Value, ErrorObject> {
        let timeout = self.supervisor.rpc_timeout();
        let text = |key: &str| {
            params
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        match method {
            "host.context" => {
                let Some(source) = self
                    .supervisor
                    .find_provider("context.live", "context.snapshot")
                    .filter(|s| s != plugin)
                else {
                    return Ok(json!({"snapshot": null, "provenance": "screen"}));
                };
                let fresh = self
                    .supervisor
                    .call_as(
                        &source,
                        "context.snapshot",
                        json!({}),
                        timeout,
                        Provenance::Screen,
                    )
                    .await;
                let mut cache = self
                    .context_cache
                    .lock()
                    .expect("context cache lock")
                    .clone();
                let stale = match fresh {
                    Ok(snapshot) => {
                        let tagged = tag_untrusted(&snapshot, Provenance::Screen);
                        *self.context_cache.lock().expect("context cache lock") =
                            Some(tagged.clone());
                        cache = Some(tagged);
                        false
                    }
                    // The context plugin failed: serve the last snapshot, marked stale.
                    Err(e) if cache.is_some() => {
                        tracing::warn!(plugin = %source, error = %e.message, "context.snapshot failed; serving the cached snapshot");
                        true
                    }
                    Err(e) => return Err(e),
                };
                Ok(json!({
                    "snapshot": cache,
                    "provenance": "screen",
                    "source": source,
                    "stale": stale,
                }))
            }
            "host.perceive" => {
                let wanted = text("method");
                if !wanted.starts_with("perception.") {
                    return Err(ErrorObject::invalid_params(format!(
                        "host.perceive needs a \"method\" of the perception.* family, got {wanted:?}"
                    )));
                }
                let family = wanted.clone();
                let Some(target) = self
                    .supervisor
                    .find_provider(&family, &wanted)
                    .or_else(|| self.supervisor.find_provider("perception", &wanted))
                else {
                    return Err(ErrorObject::new(
                        ErrorCode::CapabilityMissing,
                        format!("no running plugin provides {wanted}"),
                    ));
                };
                let inner = params.get("params").cloned().unwrap_or_else(|| json!({}));
                let result = self
                    .supervisor
                    .call_as(&target, &wanted, inner, timeout, Provenance::Screen)
                    .await?;
                Ok(json!({"value": result, "provenance": "screen", "plugin": target}))
            }
            "host.action" => {
                let op = text("op");
                if op.is_empty() {
                    return Err(ErrorObject::invalid_params(
                        "host.action needs {op, args}: \"op\" is missing",
                    ));
                }
                let args = params.get("args").cloned().unwrap_or_else(|| json!({}));
                let confirmer = self.confirmer(None, None);
                let policy = || self.policy();
                let label = format!("host.action from plugin {plugin} (epoch {epoch})");
                let result = Pipeline {
                    supervisor: &self.supervisor,
                    policy: &policy,
                    confirmer: &confirmer,
                    audit: Some(&self.audit),
                }
                .run_single(&label, &op, &args, provenance, &CommandOptions::default())
                .await;
                match &result.error {
                    Some(e) if result.plugin.is_none() => Err(e.clone()),
                    _ => Ok(serde_json::to_value(&result).unwrap_or(Value::Null)),
                }
            }
            "host.confirm" => {
                let op = text("op");
                if op.is_empty() {
                    return Err(ErrorObject::invalid_params(
                        "host.confirm needs {op, args, summary}: \"op\" is missing",
                    ));
                }
                let args = params.get("args").cloned().unwrap_or_else(|| json!({}));
                let summary = format!("plugin {plugin} asks: {}", text("summary"));
                let request = ConfirmRequest::new(&op, &args, provenance, &summary);
                let resolution = self.confirmations.ask(request, None).await;
                self.audit.record(
                    AuditEntry::new(
                        &format!("host.confirm from plugin {plugin}"),
                        &op,
                        &args,
                        provenance,
                        if resolution.approved {
                            "confirmed"
                        } else {
                            "denied"
                        },
                    )
                    .by(resolution.by.clone())
                    .plugin(plugin),
                );
                Ok(json!({"approved": resolution.approved, "by": resolution.by}))
            }
            "host.emit" => {
                let event = text("event");
                if event.is_empty() {
                    return Err(ErrorObject::invalid_params(
                        "host.emit needs {event, data}: \"event\" is missing",
                    ));
                }
                self.publish(Event::PluginEvent {
                    plugin: plugin.to_owned(),
                    event,
                    data: params.get("data").cloned().unwrap_or(Value::Null),
                });
                Ok(json!({"delivered": true}))
            }
            // The plugin's own handle scope (PROTOCOL.md §10.1).
            "handle.create" | "handle.fetch" | "handle.stat" | "handle.retain"
            | "handle.release" => crate::socket::session::handle_method(
                self,
                &crate::handles::Scope::Plugin(plugin.to_owned()),
                method,
                &params,
            ),
            other => Err(ErrorObject::method_not_found(other)),
        }
    }
}
