//! The runner as a service: the supervisor, the policy, confirmations, events and reload,
//! shared by the CLI (`utter say` in-process), the client socket and the D-Bus object.

use serde::Serialize;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::{broadcast, watch};
use utter_protocol::ErrorObject;

use crate::config::{self, ConfigError, LoadedConfig};
use crate::confirm::{Confirmations, Door};
use crate::events::{Event, ServiceState};
use crate::pipeline::{self, CommandOptions, CommandOutcome, ConfirmRequest, Confirmer};
use crate::policy::Policy;
use crate::supervisor::{PluginReport, ReloadReport, Supervisor, SupervisorOptions};

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
        let runner = Arc::new(Runner {
            supervisor,
            policy: RwLock::new(Policy::new(&config.config.policy)),
            confirmations,
            events,
            state,
            config: RwLock::new(config),
            config_path,
            reload_lock: tokio::sync::Mutex::new(()),
        });
        runner.update_state();
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
    /// As [`pipeline::run_command`].
    pub async fn command(
        &self,
        utterance: &str,
        options: &CommandOptions,
        client: Option<Door>,
    ) -> Result<CommandOutcome, ErrorObject> {
        let confirmations = self.confirmations.clone();
        let confirmer: Confirmer = Arc::new(move |request: ConfirmRequest| {
            let confirmations = confirmations.clone();
            let client = client.clone();
            Box::pin(async move { confirmations.ask(request, client).await.approved })
        });
        let policy = self.policy.read().expect("policy lock").clone();
        let outcome =
            pipeline::run_command(&self.supervisor, &policy, &confirmer, utterance, options).await;
        if let Ok(outcome) = &outcome {
            let _ = self.events.send(Event::CommandFinished {
                utterance: outcome.utterance.clone(),
                results: serde_json::to_value(&outcome.results).unwrap_or_default(),
            });
        }
        outcome
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
        *self.policy.write().expect("policy lock") = Policy::new(&loaded.config.policy);
        self.confirmations.set_timeout(Duration::from_millis(
            loaded.config.runner.confirm_timeout_ms,
        ));
        tracing::info!(config = %loaded.origin, ?report, "config reloaded");
        *self.config.write().expect("config lock") = loaded;
        let _ = self.events.send(Event::Reloaded {
            report: report.clone(),
        });
        self.update_state();
        Ok(report)
    }

    /// Drain every plugin.
    pub async fn shutdown(&self) {
        self.state.send_replace(ServiceState::Stopping);
        let _ = self.events.send(Event::State {
            state: ServiceState::Stopping,
        });
        self.supervisor.shutdown().await;
    }
}
