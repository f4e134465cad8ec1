//! The evdev push-to-talk reader through the real kernel input path: run inside a machine
//! that has `/dev/uinput` (the QEMU guest of `tests/qemu/uinput.sh`; this host has none).
//!
//! It starts the runner's own reader, `utter::triggers::evdev::run`, over `/dev/input`, then
//! creates a virtual keyboard with uinput (so the reader must find it by re-scanning:
//! hot-plug), and checks through `Ptt::subscribe`:
//! 1. key down → `Pressed {source: evdev}`; autorepeat (value 2) → nothing;
//! 2. key up after 300 ms → `Released` with `held_ms` ≥ 300;
//! 3. key down, then one write of a thousand other key events (more than the kernel's
//!    per-reader buffer holds: it overflows, `SYN_DROPPED`) ending with the key's release →
//!    `Released`, with no further event to wake the reader;
//! 4. key down, then the device is destroyed while held → `Cancelled {reason: device-lost}`.
//!
//! Prints `PTT_EVDEV_ROUNDTRIP_OK` and exits 0 when all of it held; otherwise prints what
//! failed and exits 1.

use std::process::ExitCode;
use std::time::Duration;

use evdev::uinput::VirtualDevice;
use evdev::{AttributeSet, EventType, InputEvent, KeyCode};
use utter_core::ptt::{CancelReason, Ptt, PttEvent, Source};

const KEY: KeyCode = KeyCode::KEY_F13;
const WAIT: Duration = Duration::from_secs(20);

fn key(value: i32) -> InputEvent {
    InputEvent::new(EventType::KEY.0, KEY.code(), value)
}

async fn next(events: &mut tokio::sync::broadcast::Receiver<PttEvent>) -> Result<PttEvent, String> {
    match tokio::time::timeout(WAIT, events.recv()).await {
        Ok(Ok(e)) => Ok(e),
        Ok(Err(e)) => Err(format!("event channel: {e}")),
        Err(_) => Err(format!("no push-to-talk event within {WAIT:?}")),
    }
}

async fn round_trip() -> Result<(), String> {
    let ptt = Ptt::new(Duration::from_millis(100), Duration::from_secs(60));
    let mut events = ptt.subscribe();
    let reader = tokio::spawn(utter::triggers::evdev::run(
        ptt.clone(),
        KEY,
        utter::triggers::evdev::INPUT_DIR.into(),
        Duration::from_millis(200),
    ));

    let mut keys = AttributeSet::<KeyCode>::new();
    keys.insert(KEY);
    keys.insert(KeyCode::KEY_A);
    let mut device = VirtualDevice::builder()
        .and_then(|b| b.name("utter-ptt-test-keyboard").with_keys(&keys))
        .and_then(|b| b.build())
        .map_err(|e| format!("cannot create the uinput keyboard: {e}"))?;
    println!("uinput keyboard created");

    // Wait until the reader found it by re-scanning.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let state = ptt.state();
        let evdev = state.triggers.iter().find(|t| t.trigger == "evdev");
        if let Some(t) = evdev.filter(|t| t.state == "listening") {
            println!("reader: {}", t.detail);
            break;
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("the reader never opened the keyboard: {evdev:?}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    device.emit(&[key(1)]).map_err(|e| e.to_string())?;
    match next(&mut events).await? {
        PttEvent::Pressed {
            source: Source::Evdev,
            dictation: false,
        } => println!("key down → pressed"),
        other => return Err(format!("key down gave {other:?}")),
    }
    device.emit(&[key(2)]).map_err(|e| e.to_string())?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    device.emit(&[key(0)]).map_err(|e| e.to_string())?;
    match next(&mut events).await? {
        PttEvent::Released {
            source: Source::Evdev,
            held,
            ..
        } if held >= Duration::from_millis(300) => {
            println!("autorepeat ignored; key up → released after {held:?}")
        }
        other => {
            return Err(format!(
                "key up gave {other:?} (autorepeat must not end a hold)"
            ));
        }
    }

    device.emit(&[key(1)]).map_err(|e| e.to_string())?;
    match next(&mut events).await? {
        PttEvent::Pressed { .. } => {}
        other => return Err(format!("second key down gave {other:?}")),
    }
    // Held long enough not to count as too short.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let report = InputEvent::new(EventType::SYNCHRONIZATION.0, 0, 0);
    let mut flood = Vec::new();
    for _ in 0..250 {
        for value in [1, 0] {
            flood.push(InputEvent::new(
                EventType::KEY.0,
                KeyCode::KEY_A.code(),
                value,
            ));
            flood.push(report);
        }
    }
    flood.push(key(0));
    device.emit(&flood).map_err(|e| e.to_string())?;
    match next(&mut events).await? {
        PttEvent::Released { .. } => {
            println!("key up at the end of an overflowing burst (SYN_DROPPED) → released")
        }
        other => return Err(format!("key up after SYN_DROPPED gave {other:?}")),
    }

    device.emit(&[key(1)]).map_err(|e| e.to_string())?;
    match next(&mut events).await? {
        PttEvent::Pressed { .. } => {}
        other => return Err(format!("third key down gave {other:?}")),
    }
    drop(device);
    match next(&mut events).await? {
        PttEvent::Cancelled {
            reason: CancelReason::DeviceLost,
            ..
        } => println!("device destroyed while held → cancelled (device-lost)"),
        other => return Err(format!("unplug while held gave {other:?}")),
    }
    if ptt.listening() {
        return Err("still listening after the device vanished".into());
    }
    reader.abort();
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    match round_trip().await {
        Ok(()) => {
            println!("PTT_EVDEV_ROUNDTRIP_OK");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("PTT_EVDEV_ROUNDTRIP_FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}
