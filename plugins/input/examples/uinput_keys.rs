//! The input plugin's uinput keyboard through the real kernel input path: run inside a
//! machine that has `/dev/uinput` (the QEMU guest of `tests/qemu/uinput.sh`; this host has
//! none).
//!
//! * `uinput_keys --dump-layout LAYOUT` (on the host, where libxkbcommon and xkb-data are):
//!   print the layout's keysym → key map as JSON.
//! * `uinput_keys [--layout FILE]` (in the guest): open the plugin's uinput device
//!   (`utter_input::uinput::Uinput`) with the US layout or the one in FILE, find its event
//!   node in `/dev/input` the way any evdev reader does, type text and a chord through it,
//!   and check that the reader saw exactly the key codes that layout needs. Prints
//!   `UINPUT_KEYS_OK` and exits 0 when it did.

use evdev::{Device, EventType};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use utter_input::keys::{char_keysym, parse_chord};
use utter_input::layout::LayoutMap;
use utter_input::uinput::{DEVICE_NAME, Uinput, key_events};
use utter_input::wayland::Stroke;

fn typing(text: &str) -> Vec<Stroke> {
    text.chars()
        .map(|c| Stroke {
            modifiers: Vec::new(),
            key: char_keysym(c),
        })
        .collect()
}

fn find_reader() -> Result<Device, String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        for (path, device) in evdev::enumerate() {
            if device.name() == Some(DEVICE_NAME) {
                println!("reader: {}", path.display());
                return Ok(device);
            }
        }
        if Instant::now() > deadline {
            return Err("no evdev node carries the uinput keyboard".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn check(layout: LayoutMap, text: &str, chord: &str) -> Result<(), String> {
    let c = parse_chord(chord).map_err(|e| e.to_string())?;
    let mut strokes = typing(text);
    strokes.push(Stroke {
        modifiers: c.modifiers.clone(),
        key: c.key,
    });
    let want = key_events(&layout, &strokes).map_err(|k| format!("no key for {k:?}"))?;
    println!(
        "layout {}: {} key events for {text:?} + {chord}",
        layout.name,
        want.len()
    );
    let mut device = Uinput::open(layout).map_err(|e| format!("cannot open /dev/uinput: {e}"))?;
    let mut reader = find_reader()?;
    // Let udev-less /dev settle: the node exists, the reader is open.
    std::thread::sleep(Duration::from_millis(200));
    let sent = device.keys(&want, &|| false).map_err(|e| e.to_string())?;
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.len() < want.len() && Instant::now() < deadline {
        for ev in reader.fetch_events().map_err(|e| e.to_string())? {
            if ev.event_type() == EventType::KEY && ev.value() != 2 {
                seen.push((ev.code(), ev.value() == 1));
            }
        }
    }
    if seen != want {
        return Err(format!(
            "sent {want:?} ({sent} presses) but the reader saw {seen:?}"
        ));
    }
    println!("the reader saw the {} events exactly", seen.len());
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, layout] = args.as_slice()
        && flag == "--dump-layout"
    {
        return match LayoutMap::from_names(layout, "") {
            Ok(map) => {
                println!("{}", serde_json::to_string(&map).expect("serialisable"));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("uinput_keys: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let mut runs = vec![(LayoutMap::us(), "Hi, you!", "ctrl+shift+t")];
    if let [flag, file] = args.as_slice()
        && flag == "--layout"
    {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        match serde_json::from_str::<LayoutMap>(&text) {
            // "zy@" on a German layout: z and y swapped, @ through AltGr.
            Ok(map) => runs.push((map, "zy@ öl", "ctrl+z")),
            Err(e) => {
                eprintln!("uinput_keys: {file}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    for (layout, text, chord) in runs {
        if let Err(e) = check(layout, text, chord) {
            println!("uinput_keys: FAILED: {e}");
            return ExitCode::FAILURE;
        }
    }
    println!("UINPUT_KEYS_OK");
    ExitCode::SUCCESS
}
