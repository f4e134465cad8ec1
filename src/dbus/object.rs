//! The served object: the `dev.utter.Runner1` interface over a [`Runner`], the uid gate every
//! method passes, and the task that turns the runner's events into signals.
//!
//! (The `interface` macro generates undocumented public helpers, such as a signals trait,
//! hence the module-wide `allow`; nothing here is public outside [`crate::dbus`].)

#![allow(missing_docs)]

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;
use zbus::fdo;
use zbus::interface;
use zbus::message::Header;
use zbus::names::BusName;
use zbus::object_server::{InterfaceRef, SignalEmitter};
use zbus::zvariant::OwnedValue;

use super::{Error, INTERFACE, command_options, to_json};
use utter_core::events::Event;
use utter_core::runner::{Runner, VERSION};

/// How many admitted callers (unique names) are remembered; past this the memory is cleared and
/// callers are asked about again.
const ADMITTED_CACHE: usize = 256;

/// Who may call: callers whose uid (as the bus reports it) is ours.
pub(super) struct Gate {
    pub(super) bus: fdo::DBusProxy<'static>,
    pub(super) uid: u32,
    /// Unique names already admitted. A unique name is never reused on a bus, and a
    /// connection's uid cannot change, so an admission holds for the connection's lifetime.
    pub(super) admitted: Mutex<HashSet<String>>,
}

impl Gate {
    async fn admit(&self, header: &Header<'_>) -> Result<(), Error> {
        let Some(sender) = header.sender() else {
            return Err(Error::AccessDenied(
                "the call has no sender, so its uid cannot be checked".into(),
            ));
        };
        if self
            .admitted
            .lock()
            .expect("admitted lock")
            .contains(sender.as_str())
        {
            return Ok(());
        }
        let uid = self
            .bus
            .get_connection_unix_user(BusName::Unique(sender.clone()))
            .await
            .map_err(|e| {
                Error::AccessDenied(format!("cannot learn the uid of caller {sender}: {e}"))
            })?;
        if uid != self.uid {
            tracing::warn!(caller = %sender, uid, "D-Bus: refused a call from another user");
            return Err(Error::AccessDenied(format!(
                "caller {sender} runs as uid {uid}; only uid {} may use {INTERFACE}",
                self.uid
            )));
        }
        let mut admitted = self.admitted.lock().expect("admitted lock");
        if admitted.len() >= ADMITTED_CACHE {
            admitted.clear();
        }
        admitted.insert(sender.as_str().to_owned());
        Ok(())
    }

    /// [`Gate::admit`] for a member that acts (command, confirm, push-to-talk, reload): the
    /// caller must also not be one of the runner's plugins or a process one started
    /// ([`Runner::refuse_plugin_caller`]; the bus tells its pid).
    async fn admit_actor(
        &self,
        header: &Header<'_>,
        runner: &Runner,
        member: &str,
    ) -> Result<(), Error> {
        self.admit(header).await?;
        let Some(sender) = header.sender() else {
            return Err(Error::AccessDenied("the call has no sender".into()));
        };
        let pid = self
            .bus
            .get_connection_unix_process_id(BusName::Unique(sender.clone()))
            .await
            .map_err(|e| {
                Error::AccessDenied(format!(
                    "cannot learn the process of caller {sender}, so {member} is refused: {e}"
                ))
            })?;
        runner
            .refuse_plugin_caller(Some(pid), &format!("D-Bus {member}"))
            .map_err(|e| Error::AccessDenied(e.message))
    }

    /// [`Gate::admit`] for a property read (`org.freedesktop.DBus.Properties.Get`/`GetAll`),
    /// which answers with the standard `org.freedesktop.DBus.Error.AccessDenied`. No header
    /// means the runner itself reads the value (to send `PropertiesChanged`).
    async fn admit_reader(&self, header: Option<&Header<'_>>) -> fdo::Result<()> {
        match header {
            None => Ok(()),
            Some(header) => self.admit(header).await.map_err(|e| match e {
                Error::AccessDenied(text) => fdo::Error::AccessDenied(text),
                other => fdo::Error::Failed(other.to_string()),
            }),
        }
    }
}

/// The served object.
pub(super) struct RunnerObject {
    pub(super) runner: Arc<Runner>,
    pub(super) gate: Gate,
}

#[interface(name = "dev.utter.Runner1")]
impl RunnerObject {
    /// Run one utterance: plan it with the router, check every step against the policy, act.
    /// Returns the outcome as JSON: {utterance, dry_run, plan, results}.
    #[zbus(out_args("outcome"))]
    async fn command(
        &self,
        #[zbus(header)] header: Header<'_>,
        utterance: String,
        options: HashMap<String, OwnedValue>,
    ) -> Result<String, Error> {
        self.gate
            .admit_actor(&header, &self.runner, "Command")
            .await?;
        let options = command_options(&options)?;
        let outcome = self
            .runner
            .command(&utterance, &options, None)
            .await
            .map_err(|e| Error::from_rpc(&e))?;
        to_json(&outcome)
    }

    /// A full snapshot as JSON: {version, state, config, plugins}.
    #[zbus(out_args("status"))]
    async fn status(&self, #[zbus(header)] header: Header<'_>) -> Result<String, Error> {
        self.gate.admit(&header).await?;
        to_json(&self.runner.status())
    }

    /// Read the config file again and apply it. Returns {added, removed, restarted,
    /// unchanged} as JSON; an invalid file is refused and the running config stays.
    #[zbus(out_args("report"))]
    async fn reload(&self, #[zbus(header)] header: Header<'_>) -> Result<String, Error> {
        self.gate
            .admit_actor(&header, &self.runner, "Reload")
            .await?;
        match self.runner.reload().await {
            Ok(report) => to_json(&report),
            Err(e) => Err(Error::ConfigInvalid(
                e.errors
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("\n"),
            )),
        }
    }

    /// Answer a pending confirmation: approved true runs the step, false denies it. Prefer
    /// ConfirmDigest, which binds the answer to the step that was shown.
    async fn confirm(
        &self,
        #[zbus(header)] header: Header<'_>,
        id: String,
        approved: bool,
    ) -> Result<(), Error> {
        self.gate
            .admit_actor(&header, &self.runner, "Confirm")
            .await?;
        self.runner
            .confirmations
            .answer(&id, approved, "dbus")
            .map_err(|e| Error::NoSuchConfirmation(e.message))
    }

    /// Answer a pending confirmation only if it is still for the step with this digest (the
    /// digest field of ListPending and of ConfirmationRequested): approved true runs the
    /// step, false denies it. A different digest is refused (NoSuchConfirmation) and the
    /// confirmation keeps waiting.
    async fn confirm_digest(
        &self,
        #[zbus(header)] header: Header<'_>,
        id: String,
        digest: String,
        approved: bool,
    ) -> Result<(), Error> {
        self.gate
            .admit_actor(&header, &self.runner, "ConfirmDigest")
            .await?;
        self.runner
            .confirmations
            .answer_digest(&id, &digest, approved, "dbus")
            .map_err(|e| Error::NoSuchConfirmation(e.message))
    }

    /// The confirmations waiting for an answer, oldest first, as a JSON list.
    #[zbus(out_args("pending"))]
    async fn list_pending(&self, #[zbus(header)] header: Header<'_>) -> Result<String, Error> {
        self.gate.admit(&header).await?;
        to_json(&self.runner.confirmations.pending())
    }

    /// Push-to-talk from a compositor binding: true presses, false releases (source dbus).
    /// Returns {action, transition, listening, state} as JSON; transition is null when
    /// nothing changed, or {transition: "cancelled", reason: "too-short"} for a release
    /// sooner than [ptt] min_hold_ms.
    #[zbus(out_args("outcome"))]
    async fn push_to_talk(
        &self,
        #[zbus(header)] header: Header<'_>,
        pressed: bool,
    ) -> Result<String, Error> {
        self.gate
            .admit_actor(&header, &self.runner, "PushToTalk")
            .await?;
        let action = if pressed {
            utter_core::ptt::Action::Press
        } else {
            utter_core::ptt::Action::Release
        };
        to_json(&self.runner.ptt.act(action, utter_core::ptt::Source::Dbus))
    }

    /// Push-to-talk toggle (for bindings that only fire on key press): press when released,
    /// release when held. Returns the outcome as PushToTalk does.
    #[zbus(out_args("outcome"))]
    async fn toggle_push_to_talk(
        &self,
        #[zbus(header)] header: Header<'_>,
    ) -> Result<String, Error> {
        self.gate
            .admit_actor(&header, &self.runner, "TogglePushToTalk")
            .await?;
        to_json(&self.runner.ptt.act(
            utter_core::ptt::Action::Toggle,
            utter_core::ptt::Source::Dbus,
        ))
    }

    /// Whether push-to-talk is held (the runner is listening).
    #[zbus(property)]
    async fn listening(&self, #[zbus(header)] header: Option<Header<'_>>) -> fdo::Result<bool> {
        self.gate.admit_reader(header.as_ref()).await?;
        Ok(self.runner.ptt.listening())
    }

    /// Push-to-talk status as JSON: {listening, source, held_ms, min_hold_ms, max_hold_ms,
    /// triggers: [{trigger, state, detail}]}.
    #[zbus(property)]
    async fn push_to_talk_status(
        &self,
        #[zbus(header)] header: Option<Header<'_>>,
    ) -> fdo::Result<String> {
        self.gate.admit_reader(header.as_ref()).await?;
        Ok(to_json(&self.runner.ptt.state()).unwrap_or_else(|_| "{}".to_owned()))
    }

    /// The runner's version.
    #[zbus(property(emits_changed_signal = "const"))]
    async fn version(&self, #[zbus(header)] header: Option<Header<'_>>) -> fdo::Result<String> {
        self.gate.admit_reader(header.as_ref()).await?;
        Ok(VERSION.to_owned())
    }

    /// The runner's overall state: starting, ready, degraded or stopping.
    #[zbus(property)]
    async fn state(&self, #[zbus(header)] header: Option<Header<'_>>) -> fdo::Result<String> {
        self.gate.admit_reader(header.as_ref()).await?;
        Ok(self.runner.state().as_str().to_owned())
    }

    /// Every plugin, as a JSON array of reports.
    #[zbus(property)]
    async fn plugins(&self, #[zbus(header)] header: Option<Header<'_>>) -> fdo::Result<String> {
        self.gate.admit_reader(header.as_ref()).await?;
        Ok(to_json(&self.runner.plugins()).unwrap_or_else(|_| "[]".to_owned()))
    }

    /// A step waits for a person's yes; args is the JSON text of its exact arguments.
    #[zbus(signal)]
    async fn confirmation_requested(
        emitter: &SignalEmitter<'_>,
        id: &str,
        op: &str,
        summary: &str,
        args: &str,
    ) -> zbus::Result<()>;

    /// A confirmation was answered, denied or timed out; by names the door that answered.
    #[zbus(signal)]
    async fn confirmation_resolved(
        emitter: &SignalEmitter<'_>,
        id: &str,
        approved: bool,
        by: &str,
    ) -> zbus::Result<()>;

    /// A plugin's status changed.
    #[zbus(signal)]
    async fn plugin_state_changed(
        emitter: &SignalEmitter<'_>,
        id: &str,
        epoch: u32,
        status: &str,
    ) -> zbus::Result<()>;

    /// A command finished; results is the JSON of its per-step results.
    #[zbus(signal)]
    async fn command_finished(
        emitter: &SignalEmitter<'_>,
        utterance: &str,
        results: &str,
    ) -> zbus::Result<()>;

    /// A push-to-talk cycle ended: outcome `ok`, `failed` or `no-speech`, what was heard
    /// (empty when nothing), and the JSON of the whole report (`utter_core::runner::voice::VoiceReport`:
    /// stage, error, command results, latency split).
    #[zbus(signal)]
    async fn voice_finished(
        emitter: &SignalEmitter<'_>,
        outcome: &str,
        transcript: &str,
        report: &str,
    ) -> zbus::Result<()>;

    /// What was heard so far while the key is held (a preview, never run), and from how
    /// many milliseconds of audio.
    #[zbus(signal)]
    async fn voice_partial(
        emitter: &SignalEmitter<'_>,
        text: &str,
        audio_ms: f64,
    ) -> zbus::Result<()>;

    /// A plugin emitted an event with `host.emit`; data is its JSON.
    #[zbus(signal)]
    async fn plugin_event(
        emitter: &SignalEmitter<'_>,
        plugin: &str,
        name: &str,
        data: &str,
    ) -> zbus::Result<()>;
}

/// Turn the runner's events into signals and `PropertiesChanged`.
pub(super) async fn follow_events(
    iface: InterfaceRef<RunnerObject>,
    mut events: broadcast::Receiver<Event>,
) {
    loop {
        let event = match events.recv().await {
            Ok(event) => event,
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                // Signals were lost; at least bring the properties up to date.
                tracing::warn!(missed, "D-Bus: fell behind the runner's events");
                let object = iface.get().await;
                let emitter = iface.signal_emitter();
                let _ = object.state_changed(emitter).await;
                let _ = object.plugins_changed(emitter).await;
                let _ = object.listening_changed(emitter).await;
                let _ = object.push_to_talk_status_changed(emitter).await;
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let emitter = iface.signal_emitter();
        let sent = match event {
            Event::PluginState { id, epoch, status } => {
                let epoch = u32::try_from(epoch).unwrap_or(u32::MAX);
                let signal =
                    RunnerObject::plugin_state_changed(emitter, &id, epoch, status.as_str()).await;
                let property = iface.get().await.plugins_changed(emitter).await;
                signal.and(property)
            }
            Event::State { .. } => iface.get().await.state_changed(emitter).await,
            Event::Reloaded { .. } => iface.get().await.plugins_changed(emitter).await,
            Event::ConfirmationRequested(pending) => {
                let args = to_json(&pending.request.args).unwrap_or_default();
                RunnerObject::confirmation_requested(
                    emitter,
                    &pending.id,
                    &pending.request.op,
                    &pending.request.summary,
                    &args,
                )
                .await
            }
            Event::ConfirmationResolved { id, approved, by } => {
                RunnerObject::confirmation_resolved(emitter, &id, approved, &by).await
            }
            Event::CommandFinished {
                utterance, results, ..
            } => {
                let results = to_json(&results).unwrap_or_default();
                let utterance = utter_protocol::text::clip(&utterance, 2000);
                RunnerObject::command_finished(emitter, &utterance, &results).await
            }
            Event::PluginEvent {
                plugin,
                event,
                data,
            } => {
                let data = to_json(&data).unwrap_or_default();
                let event = utter_protocol::text::clip(&event, 200);
                RunnerObject::plugin_event(emitter, &plugin, &event, &data).await
            }
            Event::Ptt(_) => {
                let object = iface.get().await;
                let listening = object.listening_changed(emitter).await;
                listening.and(object.push_to_talk_status_changed(emitter).await)
            }
            Event::PttTrigger(_) => iface.get().await.push_to_talk_status_changed(emitter).await,
            Event::Voice(report) => {
                let json = to_json(&report).unwrap_or_default();
                let transcript =
                    utter_protocol::text::clip(report.transcript.as_deref().unwrap_or(""), 2000);
                RunnerObject::voice_finished(emitter, &report.outcome, &transcript, &json).await
            }
            Event::VoicePartial(partial) => {
                let text = utter_protocol::text::clip(&partial.text, 2000);
                RunnerObject::voice_partial(emitter, &text, partial.audio_ms).await
            }
            // Subscription bookkeeping of the socket (and the log lines a socket subscriber
            // asks for), never broadcast by the runner.
            Event::Snapshot { .. } | Event::Dropped { .. } | Event::Log(_) | Event::Unknown => {
                Ok(())
            }
            // An event a newer utter-ipc adds gets its signal when this object learns it.
            _ => Ok(()),
        };
        if let Err(e) = sent {
            tracing::debug!(error = %e, "D-Bus: could not emit a signal");
        }
    }
}
