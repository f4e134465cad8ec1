//! The evdev fallback trigger: read one key from every keyboard under `/dev/input`.
//!
//! [`KeyMapper`] is the pure part: it turns `evdev::InputEvent`s of named devices into
//! [`KeyTransition`]s (key down → press, key up of the last device holding it → release,
//! autorepeat (value 2) and other keys ignored, a device that vanished while holding the key →
//! lost). [`run`] is the I/O around it, the same code the runner and the QEMU uinput test
//! (`examples/uinput_ptt.rs`, `tests/qemu/uinput.sh`) use: it scans the directory, opens each
//! `event*` node whose device reports the key, reads them with tokio, and re-scans every
//! [`RESCAN_INTERVAL`] for hot-plugged devices.
//!
//! Why a periodic re-scan rather than inotify: udev creates the node first and applies its
//! group and ACL a moment later, so an inotify `IN_CREATE` often fires while the node is not
//! yet readable and a retry loop is needed anyway; a scan of `/dev/input` every two seconds
//! costs a `readdir` of a few dozen entries, and removal is seen at once through the read
//! error (`ENODEV`) of the device's own stream, not through the scan.
//!
//! The devices are not grabbed (`EVIOCGRAB`): the key still reaches the compositor and other
//! programs. Reading `/dev/input/event*` needs membership in the group `input` (or an ACL);
//! without it the trigger's status says `no-permission` and what to do.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ::evdev::raw_stream::RawDevice;
use ::evdev::{EventType, InputEvent, KeyCode, SynchronizationCode};
use tokio::sync::mpsc;

use utter_core::ptt::{CancelReason, Ptt, PttEvent, Source};

/// Parse an evdev key name such as `KEY_F13` or `KEY_RIGHTCTRL` (the names of
/// `linux/input-event-codes.h`, as the `evdev` crate spells them).
///
/// # Errors
/// A sentence naming the bad name and valid examples.
pub fn parse_key(name: &str) -> Result<KeyCode, String> {
    name.trim().parse::<KeyCode>().map_err(|_| {
        format!(
            "{name:?} is not an evdev key name; use a name from linux/input-event-codes.h such as KEY_F13, KEY_RIGHTCTRL, KEY_RIGHTALT, KEY_PAUSE or KEY_SCROLLLOCK"
        )
    })
}

/// How often `/dev/input` is scanned for new devices.
pub const RESCAN_INTERVAL: Duration = Duration::from_secs(2);

/// The directory holding evdev nodes.
pub const INPUT_DIR: &str = "/dev/input";

/// What a key event means for push-to-talk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyTransition {
    /// The key went down on some device.
    Press,
    /// The key went up and no device holds it any more.
    Release,
    /// The last device holding the key disappeared: its release will never come.
    Lost,
}

/// Maps the key events of several devices (named by their node path) to transitions.
#[derive(Debug, Clone)]
pub struct KeyMapper {
    key: KeyCode,
    devices: BTreeSet<PathBuf>,
    holding: BTreeSet<PathBuf>,
}

impl KeyMapper {
    /// A mapper for `key`.
    pub fn new(key: KeyCode) -> KeyMapper {
        KeyMapper {
            key,
            devices: BTreeSet::new(),
            holding: BTreeSet::new(),
        }
    }

    /// The key it follows.
    pub fn key(&self) -> KeyCode {
        self.key
    }

    /// A device was opened. Never a transition (a key already down when the device was
    /// opened is only seen at its release, which then releases nothing).
    pub fn device_added(&mut self, device: &Path) -> Option<KeyTransition> {
        self.devices.insert(device.to_path_buf());
        None
    }

    /// The devices being read.
    pub fn devices(&self) -> impl Iterator<Item = &Path> {
        self.devices.iter().map(PathBuf::as_path)
    }

    /// One event read from `device`: key down (value 1) is [`KeyTransition::Press`] (every
    /// time: a press while held is ignored by the state machine, and a down after a lost up
    /// must press again), key up (value 0) is [`KeyTransition::Release`] once no device
    /// holds the key; autorepeat (value 2), other keys and other event types are `None`.
    pub fn on_event(&mut self, device: &Path, event: &InputEvent) -> Option<KeyTransition> {
        if event.event_type() != EventType::KEY || event.code() != self.key.code() {
            return None;
        }
        match event.value() {
            1 => {
                self.holding.insert(device.to_path_buf());
                Some(KeyTransition::Press)
            }
            0 => {
                let was_holding = self.holding.remove(device);
                (was_holding && self.holding.is_empty()).then_some(KeyTransition::Release)
            }
            _ => None,
        }
    }

    /// `device` is gone: [`KeyTransition::Lost`] when it was the last one holding the key.
    pub fn device_removed(&mut self, device: &Path) -> Option<KeyTransition> {
        self.devices.remove(device);
        let was_holding = self.holding.remove(device);
        (was_holding && self.holding.is_empty()).then_some(KeyTransition::Lost)
    }
}

/// Feed a transition to push-to-talk as source `evdev`.
pub fn apply(ptt: &Ptt, transition: KeyTransition) -> Option<PttEvent> {
    match transition {
        KeyTransition::Press => ptt.press(Source::Evdev),
        KeyTransition::Release => ptt.release(Source::Evdev),
        KeyTransition::Lost => ptt.cancel(CancelReason::DeviceLost),
    }
}

/// What one scan of the directory found.
#[derive(Debug, Default)]
struct Scan {
    /// Nodes newly opened that report the key: (path, device name, device).
    opened: Vec<(PathBuf, String, RawDevice)>,
    /// Nodes that could not be opened for lack of permission.
    denied: usize,
    /// Nodes seen at all.
    nodes: usize,
    /// The directory itself is missing or unreadable.
    missing: Option<String>,
}

fn is_event_node(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("event"))
}

/// Open every `event*` node in `dir` that is not in `known`; keep those reporting `key`,
/// add the rest to `known` too (so they are not opened again until they disappear).
fn scan(dir: &Path, key: KeyCode, known: &mut BTreeSet<PathBuf>) -> Scan {
    let mut scan = Scan::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            scan.missing = Some(format!("cannot read {}: {e}", dir.display()));
            return scan;
        }
    };
    let present: BTreeSet<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| is_event_node(p))
        .collect();
    // Forget nodes that went away, so a new device with a reused number is opened.
    known.retain(|p| present.contains(p));
    scan.nodes = present.len();
    for path in present {
        if known.contains(&path) {
            continue;
        }
        match RawDevice::open(&path) {
            Ok(device) => {
                known.insert(path.clone());
                if device.supported_keys().is_some_and(|k| k.contains(key)) {
                    let name = device.name().unwrap_or("unnamed device").to_owned();
                    scan.opened.push((path, name, device));
                }
            }
            Err(e) if is_denied(&e) => scan.denied += 1,
            Err(e) => {
                tracing::debug!(node = %path.display(), error = %e, "evdev: cannot open");
            }
        }
    }
    scan
}

/// Whether opening a node failed for lack of permission (`EACCES`, `EPERM`): the user is
/// not in group `input`.
fn is_denied(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied || e.raw_os_error() == Some(nix::libc::EPERM)
}

enum Msg {
    Event(PathBuf, InputEvent),
    Gone(PathBuf, io::Error),
}

/// What the reader does with one raw event under the kernel's rule for a full buffer
/// (`Documentation/input/event-codes.rst`, `SYN_DROPPED`): every event from `SYN_DROPPED` up
/// to and including the next `SYN_REPORT` is stale and skipped, and at that `SYN_REPORT` the
/// device's key state is read again (`EVIOCGKEY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RawStep {
    /// An event to map.
    Forward,
    /// Stale, or a synchronization event: nothing to map.
    Skip,
    /// Events were lost: read the key's state now.
    Resync,
}

/// Follows `SYN_DROPPED` across the raw events of one device (see [`RawStep`]).
#[derive(Debug, Default)]
struct DropFilter {
    dropping: bool,
}

impl DropFilter {
    fn step(&mut self, event: &InputEvent) -> RawStep {
        if event.event_type() == EventType::SYNCHRONIZATION {
            if event.code() == SynchronizationCode::SYN_DROPPED.0 {
                self.dropping = true;
            } else if event.code() == SynchronizationCode::SYN_REPORT.0 && self.dropping {
                self.dropping = false;
                return RawStep::Resync;
            }
            return RawStep::Skip;
        }
        if self.dropping {
            RawStep::Skip
        } else {
            RawStep::Forward
        }
    }
}

/// The key event that states `key`'s current position on a device (down: value 1, up: 0),
/// as read after events were dropped. Mapping it is harmless when nothing was lost: a press
/// while held and a release of a key not held are no transitions.
fn key_state_event(key: KeyCode, down: bool) -> InputEvent {
    InputEvent::new(EventType::KEY.0, key.code(), i32::from(down))
}

/// Read `device` in a task of its own, sending its events to `tx`. The raw stream is used
/// (not the `evdev` crate's synchronizing one, which reads the device's state back only once
/// the next event arrives): after `SYN_DROPPED` the key's state is read at once, so a release
/// lost in a full kernel buffer ends the hold now, not at the next key event.
fn spawn_reader(
    path: PathBuf,
    device: RawDevice,
    key: KeyCode,
    tx: mpsc::Sender<Msg>,
) -> io::Result<()> {
    let mut stream = device.into_event_stream()?;
    tokio::spawn(async move {
        let mut filter = DropFilter::default();
        loop {
            let event = match stream.next_event().await {
                Ok(event) => event,
                Err(e) => {
                    let _ = tx.send(Msg::Gone(path, e)).await;
                    return;
                }
            };
            let event = match filter.step(&event) {
                RawStep::Forward => event,
                RawStep::Skip => continue,
                RawStep::Resync => match stream.device().get_key_state() {
                    Ok(keys) => {
                        tracing::info!(node = %path.display(), "evdev: events were dropped (SYN_DROPPED); key state read again");
                        key_state_event(key, keys.contains(key))
                    }
                    Err(e) => {
                        let _ = tx.send(Msg::Gone(path, e)).await;
                        return;
                    }
                },
            };
            if tx.send(Msg::Event(path.clone(), event)).await.is_err() {
                return;
            }
        }
    });
    Ok(())
}

/// Read `key` from the keyboards in `dir` (normally [`INPUT_DIR`]) and feed `ptt` until the
/// task is dropped. Status goes to trigger `evdev`: `listening` (with the devices),
/// `no-devices`, `no-permission` or `unavailable`.
pub async fn run(ptt: Ptt, key: KeyCode, dir: PathBuf, rescan: Duration) {
    let key_name = format!("{key:?}");
    let mut mapper = KeyMapper::new(key);
    let mut known = BTreeSet::new();
    let mut names: BTreeMap<PathBuf, String> = BTreeMap::new();
    let (tx, mut rx) = mpsc::channel::<Msg>(256);
    let mut ticker = tokio::time::interval(rescan);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                let found = scan(&dir, key, &mut known);
                for (path, name, device) in found.opened {
                    match spawn_reader(path.clone(), device, key, tx.clone()) {
                        Ok(()) => {
                            tracing::info!(node = %path.display(), device = %name, key = %key_name, "evdev: reading push-to-talk key");
                            mapper.device_added(&path);
                            names.insert(path, name);
                        }
                        Err(e) => tracing::warn!(node = %path.display(), error = %e, "evdev: cannot read the device"),
                    }
                }
                report(&ptt, &key_name, &dir, &names, found.denied, found.nodes, found.missing.as_deref());
            }
            msg = rx.recv() => {
                let Some(msg) = msg else { return };
                match msg {
                    Msg::Event(path, event) => {
                        if let Some(t) = mapper.on_event(&path, &event) {
                            apply(&ptt, t);
                        }
                    }
                    Msg::Gone(path, e) => {
                        tracing::info!(node = %path.display(), error = %e, "evdev: device gone");
                        known.remove(&path);
                        names.remove(&path);
                        if let Some(t) = mapper.device_removed(&path) {
                            apply(&ptt, t);
                        }
                        report(&ptt, &key_name, &dir, &names, 0, 0, None);
                    }
                }
            }
        }
    }
}

fn report(
    ptt: &Ptt,
    key: &str,
    dir: &Path,
    names: &BTreeMap<PathBuf, String>,
    denied: usize,
    nodes: usize,
    missing: Option<&str>,
) {
    if !names.is_empty() {
        let list: Vec<String> = names
            .iter()
            .map(|(p, n)| format!("{n} ({})", p.display()))
            .collect();
        ptt.set_trigger(
            "evdev",
            "listening",
            &format!("{key} on {}", list.join(", ")),
        );
    } else if let Some(why) = missing {
        ptt.set_trigger("evdev", "unavailable", why);
    } else if denied > 0 {
        ptt.set_trigger(
            "evdev",
            "no-permission",
            &format!(
                "no permission to read {denied} of {nodes} input devices in {}: add your user to group input (sudo usermod -aG input $USER), then log in again",
                dir.display()
            ),
        );
    } else {
        ptt.set_trigger(
            "evdev",
            "no-devices",
            &format!("no keyboard in {} has {key}", dir.display()),
        );
    }
}

/// Start [`run`] on [`INPUT_DIR`] as a task.
pub fn spawn(ptt: Ptt, key: KeyCode) -> tokio::task::JoinHandle<()> {
    ptt.set_trigger("evdev", "starting", &format!("scanning {INPUT_DIR}"));
    tokio::spawn(run(ptt, key, PathBuf::from(INPUT_DIR), RESCAN_INTERVAL))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;
    use utter_core::ptt::{Machine, PttEvent};

    fn key(code: KeyCode, value: i32) -> InputEvent {
        InputEvent::new(EventType::KEY.0, code.code(), value)
    }

    fn syn() -> InputEvent {
        InputEvent::new(EventType::SYNCHRONIZATION.0, 0, 0)
    }

    const F13: KeyCode = KeyCode::KEY_F13;

    /// The raw events of one device through [`DropFilter`] and the mapper, with `down` as
    /// the key state a resync reads.
    fn through_filter(
        mapper: &mut KeyMapper,
        filter: &mut DropFilter,
        events: &[InputEvent],
        down: bool,
    ) -> Vec<KeyTransition> {
        let dev = Path::new("/dev/input/event3");
        events
            .iter()
            .filter_map(|e| match filter.step(e) {
                RawStep::Forward => mapper.on_event(dev, e),
                RawStep::Skip => None,
                RawStep::Resync => mapper.on_event(dev, &key_state_event(F13, down)),
            })
            .collect()
    }

    #[test]
    fn a_release_lost_to_syn_dropped_is_read_back_at_the_next_report() {
        let dropped = InputEvent::new(EventType::SYNCHRONIZATION.0, 3, 0);
        let mut mapper = KeyMapper::new(F13);
        let mut filter = DropFilter::default();
        mapper.device_added(Path::new("/dev/input/event3"));
        let got = through_filter(&mut mapper, &mut filter, &[key(F13, 1), syn()], true);
        assert_eq!(got, vec![KeyTransition::Press]);
        // The buffer overflowed: what follows SYN_DROPPED up to its report is stale (here a
        // stale "down"); at the report the key reads as up, which releases at once.
        let got = through_filter(
            &mut mapper,
            &mut filter,
            &[dropped, key(F13, 1), key(KeyCode::KEY_A, 0), syn()],
            false,
        );
        assert_eq!(got, vec![KeyTransition::Release]);
        // Afterwards events flow as before.
        let got = through_filter(&mut mapper, &mut filter, &[key(F13, 1), syn()], true);
        assert_eq!(got, vec![KeyTransition::Press]);
        // A resync that finds the key still down presses again, which a hold ignores.
        let got = through_filter(&mut mapper, &mut filter, &[dropped, syn()], true);
        assert_eq!(got, vec![KeyTransition::Press]);
        let got = through_filter(&mut mapper, &mut filter, &[key(F13, 0), syn()], false);
        assert_eq!(got, vec![KeyTransition::Release]);
    }

    #[test]
    fn down_up_autorepeat_and_other_keys() {
        let kbd = Path::new("/dev/input/event3");
        let mut m = KeyMapper::new(F13);
        assert_eq!(m.device_added(kbd), None);
        assert_eq!(m.on_event(kbd, &key(F13, 1)), Some(KeyTransition::Press));
        assert_eq!(m.on_event(kbd, &syn()), None);
        // Autorepeat while held.
        assert_eq!(m.on_event(kbd, &key(F13, 2)), None);
        assert_eq!(m.on_event(kbd, &key(F13, 2)), None);
        // Another key, and a relative axis event with the same code number.
        assert_eq!(m.on_event(kbd, &key(KeyCode::KEY_A, 1)), None);
        assert_eq!(m.on_event(kbd, &key(KeyCode::KEY_A, 0)), None);
        assert_eq!(
            m.on_event(kbd, &InputEvent::new(EventType::RELATIVE.0, F13.code(), 0)),
            None
        );
        assert_eq!(m.on_event(kbd, &key(F13, 0)), Some(KeyTransition::Release));
        // An up without a down (held before the device was opened) releases nothing.
        assert_eq!(m.on_event(kbd, &key(F13, 0)), None);
    }

    #[test]
    fn two_keyboards_release_when_the_last_lets_go() {
        let (a, b) = (
            Path::new("/dev/input/event1"),
            Path::new("/dev/input/event2"),
        );
        let mut m = KeyMapper::new(F13);
        m.device_added(a);
        m.device_added(b);
        assert_eq!(m.on_event(a, &key(F13, 1)), Some(KeyTransition::Press));
        assert_eq!(m.on_event(b, &key(F13, 1)), Some(KeyTransition::Press));
        assert_eq!(m.on_event(a, &key(F13, 0)), None);
        assert_eq!(m.on_event(b, &key(F13, 0)), Some(KeyTransition::Release));
    }

    #[test]
    fn a_device_that_disappears_while_held_is_lost_and_cancels() {
        let (a, b) = (
            Path::new("/dev/input/event1"),
            Path::new("/dev/input/event2"),
        );
        let mut m = KeyMapper::new(F13);
        m.device_added(a);
        m.device_added(b);
        // Removing a device that does not hold the key changes nothing.
        assert_eq!(m.device_removed(b), None);
        m.on_event(a, &key(F13, 1));
        assert_eq!(m.device_removed(a), Some(KeyTransition::Lost));
        assert_eq!(m.devices().count(), 0);

        // Through the handle: the hold ends as device-lost, not as an utterance.
        let ptt = Ptt::new(Duration::ZERO, Duration::from_secs(30));
        let mut events = ptt.subscribe();
        assert!(matches!(
            apply(&ptt, KeyTransition::Press),
            Some(PttEvent::Pressed {
                source: Source::Evdev,
                dictation: false,
            })
        ));
        assert!(matches!(
            apply(&ptt, KeyTransition::Lost),
            Some(PttEvent::Cancelled {
                reason: CancelReason::DeviceLost,
                ..
            })
        ));
        assert!(!ptt.listening());
        assert!(matches!(events.try_recv(), Ok(PttEvent::Pressed { .. })));
        assert!(matches!(events.try_recv(), Ok(PttEvent::Cancelled { .. })));
    }

    #[test]
    fn a_stuck_key_times_out_and_the_next_press_works() {
        let kbd = Path::new("/dev/input/event3");
        let mut m = KeyMapper::new(F13);
        let mut machine = Machine::new(Duration::from_millis(150), Duration::from_secs(30));
        let t0 = Instant::now();
        m.device_added(kbd);
        let feed = |machine: &mut Machine, t: Option<KeyTransition>, now: Instant| match t {
            Some(KeyTransition::Press) => machine.press(Source::Evdev, now),
            Some(KeyTransition::Release) => machine.release(Source::Evdev, now),
            Some(KeyTransition::Lost) => machine.cancel(CancelReason::DeviceLost, now),
            None => None,
        };
        let t = m.on_event(kbd, &key(F13, 1));
        assert!(feed(&mut machine, t, t0).is_some());
        // The up is lost; autorepeat never ends a hold.
        let t = m.on_event(kbd, &key(F13, 2));
        assert_eq!(feed(&mut machine, t, t0 + Duration::from_secs(10)), None);
        assert!(matches!(
            machine.tick(t0 + Duration::from_secs(30)),
            Some(PttEvent::Cancelled {
                reason: CancelReason::Stuck,
                ..
            })
        ));
        // The late up releases nothing; the next down presses again.
        let t = m.on_event(kbd, &key(F13, 0));
        assert_eq!(feed(&mut machine, t, t0 + Duration::from_secs(31)), None);
        let t = m.on_event(kbd, &key(F13, 1));
        assert!(matches!(
            feed(&mut machine, t, t0 + Duration::from_secs(32)),
            Some(PttEvent::Pressed { .. })
        ));
    }

    #[test]
    fn nodes_the_user_may_not_read_say_to_join_group_input() {
        assert!(is_denied(&io::Error::from_raw_os_error(nix::libc::EACCES)));
        assert!(is_denied(&io::Error::from_raw_os_error(nix::libc::EPERM)));
        assert!(!is_denied(&io::Error::from_raw_os_error(nix::libc::ENODEV)));
        let ptt = Ptt::new(Duration::ZERO, Duration::ZERO);
        report(
            &ptt,
            "KEY_F13",
            Path::new("/dev/input"),
            &BTreeMap::new(),
            5,
            5,
            None,
        );
        let state = ptt.state();
        let t = state
            .triggers
            .iter()
            .find(|t| t.trigger == "evdev")
            .unwrap();
        assert_eq!(t.state, "no-permission", "{t:?}");
        assert!(
            t.detail.contains("5 of 5") && t.detail.contains("group input"),
            "{t:?}"
        );
        // Once a keyboard is open, that is what status shows.
        let names = BTreeMap::from([(
            PathBuf::from("/dev/input/event3"),
            "Some Keyboard".to_owned(),
        )]);
        report(&ptt, "KEY_F13", Path::new("/dev/input"), &names, 2, 5, None);
        let state = ptt.state();
        let t = state
            .triggers
            .iter()
            .find(|t| t.trigger == "evdev")
            .unwrap();
        assert_eq!(t.state, "listening", "{t:?}");
        assert!(
            t.detail.contains("Some Keyboard (/dev/input/event3)"),
            "{t:?}"
        );
    }

    #[tokio::test]
    async fn a_missing_input_directory_is_reported_unavailable() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("input");
        let ptt = Ptt::new(Duration::ZERO, Duration::ZERO);
        let task = tokio::spawn(run(ptt.clone(), F13, gone, Duration::from_millis(20)));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let state = ptt.state();
            if let Some(t) = state.triggers.iter().find(|t| t.trigger == "evdev") {
                assert_eq!(t.state, "unavailable", "{t:?}");
                assert!(t.detail.contains("cannot read"), "{t:?}");
                break;
            }
            assert!(Instant::now() < deadline, "no evdev status");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        task.abort();
    }

    #[tokio::test]
    async fn nodes_that_cannot_be_read_as_devices_are_no_devices() {
        // Plain files named event*: opened, but not evdev devices (the ioctl fails), so no
        // keyboard has the key.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("event0"), b"").unwrap();
        let ptt = Ptt::new(Duration::ZERO, Duration::ZERO);
        let task = tokio::spawn(run(
            ptt.clone(),
            F13,
            dir.path().to_path_buf(),
            Duration::from_millis(20),
        ));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(t) = ptt.state().triggers.iter().find(|t| t.trigger == "evdev") {
                assert_eq!(t.state, "no-devices", "{t:?}");
                assert!(t.detail.contains("KEY_F13"), "{t:?}");
                break;
            }
            assert!(Instant::now() < deadline, "no evdev status");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        task.abort();
    }

    #[test]
    fn key_names_parse_and_a_bad_one_names_examples() {
        assert_eq!(parse_key("KEY_F13").unwrap(), KeyCode::KEY_F13);
        assert_eq!(parse_key("KEY_RIGHTCTRL").unwrap(), KeyCode::KEY_RIGHTCTRL);
        let e = parse_key("F13").unwrap_err();
        assert!(e.contains("KEY_F13") && e.contains("KEY_RIGHTCTRL"), "{e}");
        assert!(parse_key("KEY_NOSUCHKEY").is_err());
    }
}
