//! Push-to-talk: one press/release state machine fed by every trigger.
//!
//! Triggers ([`Source`]): the xdg-desktop-portal `GlobalShortcuts` portal (`utter` daemon's portal trigger), a
//! compositor key binding that runs `utter ptt press|release|toggle` (the client socket's
//! `runner.ptt`) or calls the D-Bus methods `PushToTalk(b)` / `TogglePushToTalk()`, the
//! compositor's `org.freedesktop.a11y.KeyboardMonitor` (niri 25.08+; the daemon's
//! keyboard-monitor trigger), and the evdev fallback that reads keyboards under `/dev/input`
//! (the daemon's evdev trigger).
//!
//! The logic is [`Machine`]: pure, no I/O and no clock of its own (every call takes the
//! `Instant` it happens at), so it is unit-tested without waiting. [`Ptt`] is the cloneable
//! handle the runner owns: it drives a [`Machine`] with the wall clock, arms the stuck-key
//! timer, and publishes every transition as a [`PttEvent`] on a broadcast channel.
//!
//! Rules:
//! * A press while already held is ignored (the first press's source keeps the hold); any
//!   trigger's release ends the hold (two triggers bound to the same physical key both
//!   report it).
//! * Released sooner than `min_hold` after the press: [`PttEvent::Cancelled`] with
//!   [`CancelReason::TooShort`] (a bounce or a mistaken tap is not an utterance).
//! * Held longer than `max_hold`: released automatically as [`PttEvent::Cancelled`] with
//!   [`CancelReason::Stuck`] (a key whose release was lost, e.g. the compositor ate it).
//! * The evdev device holding the key vanished, or the bus service a hold came through went
//!   away: [`CancelReason::DeviceLost`].
//! * Otherwise the release is [`PttEvent::Released`] with how long it was held: a valid
//!   utterance window.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, watch};

pub use utter_ipc::event::{CancelReason, PttEvent};
pub use utter_ipc::status::Source;
pub use utter_ipc::status::{PttState, TriggerStatus};

/// Capacity of the push-to-talk event channel; a subscriber further behind loses the oldest.
pub const PTT_BACKLOG: usize = 64;

/// The shortcut id the runner binds through the portal (and the trigger's name in status).
pub const PORTAL_SHORTCUT_ID: &str = "push-to-talk";

/// The shortcut id of the key held to dictate (`[ptt] dictation_key`), bound beside
/// [`PORTAL_SHORTCUT_ID`].
pub const PORTAL_DICTATION_ID: &str = "dictation";

/// The pure press/release state machine. Every method takes the moment it happens at.
#[derive(Debug, Clone)]
pub struct Machine {
    min_hold: Duration,
    max_hold: Duration,
    held: Option<(Source, Instant)>,
    /// The hold began with [`Machine::toggle`].
    toggled: bool,
    /// The hold is to dictate (a press with `dictation`).
    dictation: bool,
}

impl Machine {
    /// A released machine. `min_hold`: shorter holds are cancelled as too short;
    /// `max_hold`: longer holds are cancelled as stuck (zero disables the timeout).
    pub fn new(min_hold: Duration, max_hold: Duration) -> Machine {
        Machine {
            min_hold,
            max_hold,
            held: None,
            toggled: false,
            dictation: false,
        }
    }

    /// Change the limits (a config reload); a hold in progress keeps going.
    pub fn set_limits(&mut self, min_hold: Duration, max_hold: Duration) {
        self.min_hold = min_hold;
        self.max_hold = max_hold;
    }

    /// The minimum hold.
    pub fn min_hold(&self) -> Duration {
        self.min_hold
    }

    /// The stuck-key timeout (zero: none).
    pub fn max_hold(&self) -> Duration {
        self.max_hold
    }

    /// Who holds push-to-talk and since when.
    pub fn held(&self) -> Option<(Source, Instant)> {
        self.held
    }

    /// When the current hold counts as stuck, if held and a timeout is set.
    pub fn deadline(&self) -> Option<Instant> {
        if self.max_hold.is_zero() {
            return None;
        }
        self.held.map(|(_, since)| since + self.max_hold)
    }

    /// Press: `Pressed` when released before; `None` when already held (by anyone, even
    /// past the stuck deadline: call [`Machine::tick`] first).
    pub fn press(&mut self, source: Source, now: Instant) -> Option<PttEvent> {
        self.press_for(source, now, false)
    }

    /// [`Machine::press`] to command (`dictation` false) or to dictate: the hold, and the
    /// `Released` that ends it, carry `dictation`.
    pub fn press_for(&mut self, source: Source, now: Instant, dictation: bool) -> Option<PttEvent> {
        if self.held.is_some() {
            return None;
        }
        self.held = Some((source, now));
        self.toggled = false;
        self.dictation = dictation;
        Some(PttEvent::Pressed { source, dictation })
    }

    /// Whether the current hold is to dictate (false when not held).
    pub fn dictating(&self) -> bool {
        self.held.is_some() && self.dictation
    }

    /// Release (by any source): `Released` or `Cancelled` (too short, or past the stuck
    /// deadline); `None` when not held.
    pub fn release(&mut self, _source: Source, now: Instant) -> Option<PttEvent> {
        let (owner, since) = self.held.take()?;
        let held = now.saturating_duration_since(since);
        if !self.max_hold.is_zero() && held > self.max_hold {
            return Some(PttEvent::Cancelled {
                source: owner,
                reason: CancelReason::Stuck,
                held,
            });
        }
        if held < self.min_hold {
            return Some(PttEvent::Cancelled {
                source: owner,
                reason: CancelReason::TooShort,
                held,
            });
        }
        Some(PttEvent::Released {
            source: owner,
            held,
            dictation: self.dictation,
        })
    }

    /// Toggle: press when released, release when held.
    pub fn toggle(&mut self, source: Source, now: Instant) -> Option<PttEvent> {
        self.toggle_for(source, now, false)
    }

    /// [`Machine::toggle`]; a press it makes is to dictate when `dictation`.
    pub fn toggle_for(
        &mut self,
        source: Source,
        now: Instant,
        dictation: bool,
    ) -> Option<PttEvent> {
        // A toggle of the other mode (to dictate while a command hold runs, or the
        // reverse) changes nothing, as a second press does not.
        if self.held.is_some() && self.dictation != dictation {
            return None;
        }
        if self.held.is_some() {
            self.release(source, now)
        } else {
            let pressed = self.press_for(source, now, dictation);
            self.toggled = pressed.is_some();
            pressed
        }
    }

    /// Whether the current hold began with a toggle (false when not held).
    pub fn toggled(&self) -> bool {
        self.held.is_some() && self.toggled
    }

    /// End a hold without an utterance; `None` when not held.
    pub fn cancel(&mut self, reason: CancelReason, now: Instant) -> Option<PttEvent> {
        let (owner, since) = self.held.take()?;
        Some(PttEvent::Cancelled {
            source: owner,
            reason,
            held: now.saturating_duration_since(since),
        })
    }

    /// The stuck-key check: `Cancelled {reason: stuck}` when held past `max_hold`.
    pub fn tick(&mut self, now: Instant) -> Option<PttEvent> {
        let deadline = self.deadline()?;
        if now >= deadline {
            self.cancel(CancelReason::Stuck, now)
        } else {
            None
        }
    }
}

struct Inner {
    machine: Mutex<Machine>,
    events: broadcast::Sender<PttEvent>,
    listening: watch::Sender<bool>,
    triggers: Mutex<BTreeMap<String, TriggerStatus>>,
    trigger_changes: broadcast::Sender<TriggerStatus>,
}

/// The push-to-talk handle the runner owns; cheap to clone. Every method is synchronous and
/// never blocks (a short mutex); transitions are published on [`Ptt::subscribe`].
///
/// The stuck-key timer needs a tokio runtime: a press spawns a task that sleeps until the
/// deadline.
#[derive(Clone)]
pub struct Ptt {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Ptt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ptt").field("state", &self.state()).finish()
    }
}

impl Ptt {
    /// A released push-to-talk with these limits (see [`Machine::new`]). The triggers
    /// `socket` and `dbus` are listed as ready.
    pub fn new(min_hold: Duration, max_hold: Duration) -> Ptt {
        let (events, _) = broadcast::channel(PTT_BACKLOG);
        let (trigger_changes, _) = broadcast::channel(PTT_BACKLOG);
        let (listening, _) = watch::channel(false);
        let ptt = Ptt {
            inner: Arc::new(Inner {
                machine: Mutex::new(Machine::new(min_hold, max_hold)),
                events,
                listening,
                triggers: Mutex::new(BTreeMap::new()),
                trigger_changes,
            }),
        };
        ptt.set_trigger(
            "socket",
            "ready",
            "utter ptt press|release|toggle (runner.ptt on the client socket)",
        );
        ptt
    }

    /// From the `[ptt]` section.
    pub fn from_config(section: &crate::config::PttSection) -> Ptt {
        Ptt::new(
            Duration::from_millis(section.min_hold_ms),
            Duration::from_millis(section.max_hold_ms),
        )
    }

    /// Apply new limits from a reloaded `[ptt]` section.
    pub fn set_limits(&self, section: &crate::config::PttSection) {
        self.machine().set_limits(
            Duration::from_millis(section.min_hold_ms),
            Duration::from_millis(section.max_hold_ms),
        );
    }

    fn machine(&self) -> std::sync::MutexGuard<'_, Machine> {
        self.inner.machine.lock().expect("ptt lock")
    }

    /// Press; returns the transition it caused (`None`: already held).
    pub fn press(&self, source: Source) -> Option<PttEvent> {
        self.press_for(source, false)
    }

    /// Press to dictate when `dictation` ([`Machine::press_for`]).
    pub fn press_for(&self, source: Source, dictation: bool) -> Option<PttEvent> {
        let now = Instant::now();
        let (stuck, event, deadline) = {
            let mut m = self.machine();
            let stuck = m.tick(now);
            let event = m.press_for(source, now, dictation);
            (stuck, event, m.deadline())
        };
        if let Some(stuck) = stuck {
            self.publish(stuck);
        }
        self.after(event, deadline)
    }

    /// Release; returns the transition it caused (`Released`, or `Cancelled` as too short
    /// or stuck; `None`: it was not held).
    pub fn release(&self, source: Source) -> Option<PttEvent> {
        let event = self.machine().release(source, Instant::now());
        self.after(event, None)
    }

    /// Toggle: press when released, release when held.
    pub fn toggle(&self, source: Source) -> Option<PttEvent> {
        self.toggle_for(source, false)
    }

    /// Toggle; a press it makes is to dictate when `dictation`.
    pub fn toggle_for(&self, source: Source, dictation: bool) -> Option<PttEvent> {
        let now = Instant::now();
        let (event, deadline) = {
            let mut m = self.machine();
            let event = match m.tick(now) {
                // Held past its deadline: that hold ends as stuck (the toggle's release).
                Some(stuck) => Some(stuck),
                None => m.toggle_for(source, now, dictation),
            };
            (event, m.deadline())
        };
        self.after(event, deadline)
    }

    /// The end of speech was heard (voice-activity detection): release a hold that began
    /// with a toggle, as its owner would; a held key is left alone (`None`).
    pub fn end_of_speech(&self) -> Option<PttEvent> {
        let event = {
            let mut m = self.machine();
            if !m.toggled() {
                return None;
            }
            let (owner, _) = m.held()?;
            m.release(owner, Instant::now())
        };
        self.after(event, None)
    }

    /// End a hold without an utterance (e.g. its evdev device vanished).
    pub fn cancel(&self, reason: CancelReason) -> Option<PttEvent> {
        let event = self.machine().cancel(reason, Instant::now());
        self.after(event, None)
    }

    fn after(&self, event: Option<PttEvent>, deadline: Option<Instant>) -> Option<PttEvent> {
        let event = event?;
        if let (PttEvent::Pressed { .. }, Some(deadline)) = (&event, deadline) {
            self.arm_stuck_timer(deadline);
        }
        self.publish(event.clone());
        Some(event)
    }

    fn publish(&self, event: PttEvent) {
        self.inner.listening.send_replace(event.listening());
        match &event {
            PttEvent::Cancelled {
                reason: CancelReason::Stuck,
                held,
                source,
            } => {
                tracing::warn!(
                    source = source.as_str(),
                    held_ms = held.as_millis() as u64,
                    "push-to-talk held longer than [ptt] max_hold_ms: released automatically (stuck key?)"
                );
            }
            other => tracing::debug!(?other, "push-to-talk"),
        }
        let _ = self.inner.events.send(event);
    }

    fn arm_stuck_timer(&self, deadline: Instant) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak = Arc::downgrade(&self.inner);
        handle.spawn(async move {
            tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)).await;
            let Some(inner) = weak.upgrade() else { return };
            let ptt = Ptt { inner };
            let event = ptt.machine().tick(Instant::now());
            if let Some(event) = event {
                ptt.publish(event);
            }
        });
    }

    /// The current state and triggers.
    pub fn state(&self) -> PttState {
        let now = Instant::now();
        let m = self.machine().clone();
        PttState {
            listening: m.held().is_some(),
            source: m.held().map(|(s, _)| s),
            held_ms: m.held().map(|(_, since)| {
                u64::try_from(now.saturating_duration_since(since).as_millis()).unwrap_or(u64::MAX)
            }),
            dictation: m.dictating(),
            min_hold_ms: u64::try_from(m.min_hold().as_millis()).unwrap_or(u64::MAX),
            max_hold_ms: u64::try_from(m.max_hold().as_millis()).unwrap_or(u64::MAX),
            triggers: self
                .inner
                .triggers
                .lock()
                .expect("trigger lock")
                .values()
                .cloned()
                .collect(),
        }
    }

    /// Whether push-to-talk is held now.
    pub fn listening(&self) -> bool {
        *self.inner.listening.borrow()
    }

    /// Follow every transition.
    pub fn subscribe(&self) -> broadcast::Receiver<PttEvent> {
        self.inner.events.subscribe()
    }

    /// Follow `listening` (true while held).
    pub fn watch_listening(&self) -> watch::Receiver<bool> {
        self.inner.listening.subscribe()
    }

    /// Follow trigger state changes.
    pub fn subscribe_triggers(&self) -> broadcast::Receiver<TriggerStatus> {
        self.inner.trigger_changes.subscribe()
    }

    /// Set one trigger's state (the triggers call this; a change is published).
    pub fn set_trigger(&self, trigger: &str, state: &str, detail: &str) {
        let status = TriggerStatus {
            trigger: trigger.to_owned(),
            state: state.to_owned(),
            detail: detail.to_owned(),
        };
        let changed = {
            let mut triggers = self.inner.triggers.lock().expect("trigger lock");
            let changed = triggers.get(trigger) != Some(&status);
            triggers.insert(trigger.to_owned(), status.clone());
            changed
        };
        if changed {
            let _ = self.inner.trigger_changes.send(status);
        }
    }
}

/// What to do with push-to-talk, as `runner.ptt`'s `action` and `utter ptt ACTION` name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Start listening.
    Press,
    /// Stop listening.
    Release,
    /// Press when released, release when held.
    Toggle,
    /// Change nothing; report the state.
    State,
    /// Drop the hold without an utterance (reason `cancelled`), e.g. Ctrl-C in
    /// `utter listen --once`.
    Cancel,
}

impl Action {
    /// Parse the wire word (`press`, `release`, `toggle`, `state`).
    ///
    /// # Errors
    /// A sentence naming the allowed words.
    pub fn parse(word: &str) -> Result<Action, String> {
        match word {
            "press" => Ok(Action::Press),
            "release" => Ok(Action::Release),
            "toggle" => Ok(Action::Toggle),
            "state" | "status" => Ok(Action::State),
            "cancel" => Ok(Action::Cancel),
            other => Err(format!(
                "{other:?} is not a push-to-talk action; use \"press\", \"release\", \"toggle\", \"cancel\" or \"state\""
            )),
        }
    }

    /// The wire word.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Press => "press",
            Action::Release => "release",
            Action::Toggle => "toggle",
            Action::State => "state",
            Action::Cancel => "cancel",
        }
    }
}

impl Ptt {
    /// Do `action` as `source`; the outcome as `runner.ptt` and D-Bus return it:
    /// `{action, transition, listening, state}` where `transition` is the [`PttEvent`] the
    /// action caused (`null`: none, e.g. a press while already held) and `state` is
    /// [`PttState`].
    pub fn act(&self, action: Action, source: Source) -> serde_json::Value {
        self.act_for(action, source, false)
    }

    /// [`Ptt::act`]; a press (or a toggle's press) is to dictate when `dictation`.
    pub fn act_for(&self, action: Action, source: Source, dictation: bool) -> serde_json::Value {
        let transition = match action {
            Action::Press => self.press_for(source, dictation),
            Action::Release => self.release(source),
            Action::Toggle => self.toggle_for(source, dictation),
            Action::State => None,
            Action::Cancel => self.cancel(CancelReason::Cancelled),
        };
        let state = self.state();
        serde_json::json!({
            "action": action.as_str(),
            "transition": transition,
            "listening": state.listening,
            "state": state,
        })
    }
}

/// The client socket's `runner.ptt {action, dictation?}` (the action word, `press`,
/// `release`, `toggle`, `cancel` or `state`; `dictation` holds to dictate), as source
/// `socket`; see [`Ptt::act`] for the result.
///
/// # Errors
/// `-32602` (invalid params) when `action` is not one of the words, or `dictation` is given
/// with an action that presses nothing.
pub fn socket_method(
    ptt: &Ptt,
    word: &str,
    dictation: bool,
) -> Result<serde_json::Value, utter_protocol::ErrorObject> {
    let action = Action::parse(word)
        .map_err(|e| utter_protocol::ErrorObject::invalid_params(format!("runner.ptt: {e}")))?;
    if dictation && !matches!(action, Action::Press | Action::Toggle) {
        return Err(utter_protocol::ErrorObject::invalid_params(format!(
            "runner.ptt: \"dictation\" goes with \"press\" or \"toggle\", not \"{}\"",
            action.as_str()
        )));
    }
    Ok(ptt.act_for(action, Source::Socket, dictation))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_millis(150);
    const MAX: Duration = Duration::from_secs(30);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_hold_longer_than_the_minimum_is_a_release_with_its_length() {
        let t0 = Instant::now();
        let mut m = Machine::new(MIN, MAX);
        assert_eq!(
            m.press(Source::Socket, t0),
            Some(PttEvent::Pressed {
                source: Source::Socket,
                dictation: false,
            })
        );
        assert_eq!(
            m.release(Source::Socket, t0 + ms(800)),
            Some(PttEvent::Released {
                source: Source::Socket,
                held: ms(800),
                dictation: false,
            })
        );
        assert_eq!(m.held(), None);
        assert_eq!(m.release(Source::Socket, t0 + ms(900)), None);
    }

    #[test]
    fn a_release_before_the_minimum_hold_is_cancelled_as_too_short() {
        let t0 = Instant::now();
        let mut m = Machine::new(MIN, MAX);
        m.press(Source::Dbus, t0);
        assert_eq!(
            m.release(Source::Dbus, t0 + ms(149)),
            Some(PttEvent::Cancelled {
                source: Source::Dbus,
                reason: CancelReason::TooShort,
                held: ms(149)
            })
        );
        // Exactly the minimum counts.
        m.press(Source::Dbus, t0 + ms(200));
        assert!(matches!(
            m.release(Source::Dbus, t0 + ms(350)),
            Some(PttEvent::Released { .. })
        ));
    }

    #[test]
    fn a_stuck_key_is_released_at_the_deadline_and_not_before() {
        let t0 = Instant::now();
        let mut m = Machine::new(MIN, MAX);
        m.press(Source::Evdev, t0);
        assert_eq!(m.deadline(), Some(t0 + MAX));
        assert_eq!(m.tick(t0 + MAX - ms(1)), None);
        assert_eq!(
            m.tick(t0 + MAX),
            Some(PttEvent::Cancelled {
                source: Source::Evdev,
                reason: CancelReason::Stuck,
                held: MAX
            })
        );
        assert_eq!(m.held(), None);
        // The late real release changes nothing.
        assert_eq!(m.release(Source::Evdev, t0 + MAX + ms(5)), None);
        // A release seen after the deadline before the timer fired is stuck too.
        m.press(Source::Evdev, t0);
        assert!(matches!(
            m.release(Source::Evdev, t0 + MAX + ms(1)),
            Some(PttEvent::Cancelled {
                reason: CancelReason::Stuck,
                ..
            })
        ));
    }

    #[test]
    fn a_hold_to_dictate_says_so_from_press_to_release() {
        let mut m = Machine::new(MIN, MAX);
        let t0 = Instant::now();
        assert_eq!(
            m.press_for(Source::KeyboardMonitor, t0, true),
            Some(PttEvent::Pressed {
                source: Source::KeyboardMonitor,
                dictation: true
            })
        );
        assert!(m.dictating());
        // A second press (the other key) changes nothing.
        assert_eq!(m.press_for(Source::KeyboardMonitor, t0, false), None);
        assert!(m.dictating());
        assert!(matches!(
            m.release(Source::KeyboardMonitor, t0 + MIN + ms(1)),
            Some(PttEvent::Released {
                dictation: true,
                ..
            })
        ));
        assert!(!m.dictating());
        // The next plain press is to command.
        m.press(Source::Socket, t0);
        assert!(!m.dictating());
        assert!(matches!(
            m.release(Source::Socket, t0 + MIN + ms(1)),
            Some(PttEvent::Released {
                dictation: false,
                ..
            })
        ));
        // A toggle to dictate, and its wire: `dictation` is left out when false.
        assert!(m.toggle_for(Source::Socket, t0, true).is_some());
        assert!(m.dictating());
        // A toggle of the other mode leaves the hold alone; its own mode's ends it.
        assert_eq!(m.toggle_for(Source::Socket, t0 + MIN, false), None);
        assert!(m.dictating());
        assert!(matches!(
            m.toggle_for(Source::Socket, t0 + MIN + ms(1), true),
            Some(PttEvent::Released {
                dictation: true,
                ..
            })
        ));
        let wire = serde_json::to_value(PttEvent::Pressed {
            source: Source::Socket,
            dictation: false,
        })
        .unwrap();
        assert_eq!(
            wire,
            serde_json::json!({"transition": "pressed", "source": "socket"})
        );
    }

    #[tokio::test]
    async fn the_socket_method_takes_dictation_only_with_a_press() {
        let ptt = Ptt::new(MIN, MAX);
        let err = socket_method(&ptt, "release", true).unwrap_err();
        assert_eq!(err.code, -32602);
        assert!(err.message.contains("press"), "{err:?}");
        let reply = socket_method(&ptt, "press", true).unwrap();
        assert_eq!(reply["transition"]["dictation"], true, "{reply}");
        assert_eq!(reply["state"]["dictation"], true, "{reply}");
        let reply = socket_method(&ptt, "cancel", false).unwrap();
        assert_eq!(reply["state"]["dictation"], false, "{reply}");
    }

    #[test]
    fn zero_max_hold_disables_the_timeout() {
        let t0 = Instant::now();
        let mut m = Machine::new(MIN, Duration::ZERO);
        m.press(Source::Portal, t0);
        assert_eq!(m.deadline(), None);
        assert_eq!(m.tick(t0 + Duration::from_secs(3600)), None);
        assert!(matches!(
            m.release(Source::Portal, t0 + Duration::from_secs(3600)),
            Some(PttEvent::Released { .. })
        ));
    }

    #[test]
    fn the_first_press_owns_the_hold_and_any_release_ends_it() {
        let t0 = Instant::now();
        let mut m = Machine::new(MIN, MAX);
        m.press(Source::Portal, t0);
        assert_eq!(m.press(Source::Evdev, t0 + ms(1)), None);
        assert_eq!(
            m.release(Source::Evdev, t0 + ms(500)),
            Some(PttEvent::Released {
                source: Source::Portal,
                held: ms(500),
                dictation: false,
            })
        );
        assert_eq!(m.release(Source::Portal, t0 + ms(501)), None);
    }

    #[test]
    fn toggle_presses_then_releases() {
        let t0 = Instant::now();
        let mut m = Machine::new(MIN, MAX);
        assert!(matches!(
            m.toggle(Source::Socket, t0),
            Some(PttEvent::Pressed { .. })
        ));
        assert!(matches!(
            m.toggle(Source::Socket, t0 + ms(20)),
            Some(PttEvent::Cancelled {
                reason: CancelReason::TooShort,
                ..
            })
        ));
        assert!(matches!(
            m.toggle(Source::Socket, t0 + ms(40)),
            Some(PttEvent::Pressed { .. })
        ));
        assert!(matches!(
            m.toggle(Source::Socket, t0 + ms(1040)),
            Some(PttEvent::Released { .. })
        ));
    }

    #[test]
    fn events_serialise_with_wire_words() {
        let e = PttEvent::Cancelled {
            source: Source::Socket,
            reason: CancelReason::TooShort,
            held: ms(20),
        };
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            serde_json::json!({"transition": "cancelled", "source": "socket", "reason": "too-short", "held_ms": 20})
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_handle_releases_a_stuck_key_by_itself_and_publishes_it() {
        let ptt = Ptt::new(ms(10), ms(500));
        let mut events = ptt.subscribe();
        let mut listening = ptt.watch_listening();
        assert!(matches!(
            ptt.press(Source::Dbus),
            Some(PttEvent::Pressed { .. })
        ));
        assert!(matches!(
            events.recv().await.unwrap(),
            PttEvent::Pressed { .. }
        ));
        assert!(*listening.borrow_and_update());
        // Paused time: the runtime jumps to the timer. The machine reads the real clock,
        // so wait for the real deadline to pass too.
        std::thread::sleep(ms(510));
        let stuck = events.recv().await.unwrap();
        assert!(
            matches!(
                stuck,
                PttEvent::Cancelled {
                    reason: CancelReason::Stuck,
                    ..
                }
            ),
            "{stuck:?}"
        );
        assert!(!ptt.listening());
        assert!(!ptt.state().listening);
    }
}
