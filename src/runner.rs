//! The runner: a supervisor, a policy and a confirmer, started from a config.

use std::sync::Arc;
use utter_protocol::ErrorObject;

use crate::config::LoadedConfig;
use crate::pipeline::{self, CommandOptions, CommandOutcome, Confirmer};
use crate::policy::Policy;
use crate::supervisor::{PluginReport, Supervisor, SupervisorOptions};

/// A started runner.
pub struct Runner {
    /// The plugin supervisor.
    pub supervisor: Arc<Supervisor>,
    /// The policy from `[policy]`.
    pub policy: Policy,
    /// Who answers confirmations.
    pub confirmer: Confirmer,
    /// The config it was started with.
    pub config: LoadedConfig,
}

impl Runner {
    /// Start every plugin of `config` and wait for their handshakes.
    pub async fn start(
        config: LoadedConfig,
        options: SupervisorOptions,
        confirmer: Confirmer,
    ) -> Runner {
        let supervisor = Arc::new(Supervisor::start(&config.config, options).await);
        Runner {
            supervisor,
            policy: Policy::new(&config.config.policy),
            confirmer,
            config,
        }
    }

    /// Run one utterance; see [`pipeline::run_command`].
    ///
    /// # Errors
    /// As [`pipeline::run_command`].
    pub async fn command(
        &self,
        utterance: &str,
        options: &CommandOptions,
    ) -> Result<CommandOutcome, ErrorObject> {
        pipeline::run_command(
            &self.supervisor,
            &self.policy,
            &self.confirmer,
            utterance,
            options,
        )
        .await
    }

    /// The plugins and their states.
    pub fn plugins(&self) -> Vec<PluginReport> {
        self.supervisor.plugins()
    }

    /// Drain every plugin.
    pub async fn shutdown(&self) {
        self.supervisor.shutdown().await;
    }
}
