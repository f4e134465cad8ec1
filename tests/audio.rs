//! `utter audio sources` and `utter audio record` against a real, private PipeWire with a
//! virtual microphone (PipeWire + WirePlumber + pw-loopback; see `common::PipeWireSession`).

use crate::common;

use common::{ChildEnv, FAKE_MIC, PipeWireSession, espeak_wav, run_utter};
use std::path::Path;
use std::time::Duration;

fn config(dir: &Path, audio: &str) -> std::path::PathBuf {
    let path = dir.join("config.toml");
    std::fs::write(
        &path,
        format!(
            "config_version = 1\n[[plugin]]\nid = \"rules\"\nkind = \"router\"\nentrypoint = [\"utter\", \"plugin\", \"rules\"]\n\n[[plugin]]\nid = \"audio\"\nkind = \"audio\"\nentrypoint = [\"utter-audio-pipewire\"]\n\n[audio]\n{audio}\n"
        ),
    )
    .unwrap();
    path
}

#[tokio::test]
async fn sources_lists_the_virtual_microphone() {
    let pw = PipeWireSession::start();
    let run = run_utter(&["audio", "sources", "--json"], &pw.env()).await;
    assert_eq!(run.code, Some(0), "{run}");
    let list = run.json();
    let sources = list.as_array().expect("a JSON array");
    let mic = sources
        .iter()
        .find(|s| s["name"] == FAKE_MIC)
        .unwrap_or_else(|| panic!("{FAKE_MIC} is not listed:\n{run}"));
    assert_eq!(mic["media_class"], "Audio/Source");
    assert_eq!(mic["channels"], 1, "pw-loopback made a mono source: {mic}");
    assert!(mic["id"].as_u64().is_some());
    // The sink feeding it is no source.
    assert!(
        !sources.iter().any(|s| s["name"] == "fake_mic_sink"),
        "{run}"
    );

    let table = run_utter(&["audio", "sources"], &pw.env()).await;
    assert_eq!(table.code, Some(0), "{table}");
    assert!(table.stdout.starts_with("  NAME"), "{table}");
    assert!(
        table
            .stdout
            .lines()
            .any(|l| l[2..].starts_with(FAKE_MIC) && l.contains(" 1 ")),
        "{table}"
    );
}

#[tokio::test]
async fn without_pipewire_sources_is_a_clear_error() {
    let empty = tempfile::tempdir().unwrap();
    let env = ChildEnv::new()
        .with("XDG_RUNTIME_DIR", empty.path())
        .with("PIPEWIRE_RUNTIME_DIR", empty.path())
        .without("PIPEWIRE_REMOTE");
    let run = run_utter(&["audio", "sources", "--json"], &env).await;
    assert_eq!(run.code, Some(4), "{run}");
    assert!(run.stderr.contains("PipeWire is not running"), "{run}");
    assert!(!run.stderr.contains("panicked"), "{run}");
    assert!(run.stdout.is_empty(), "{run}");
}

#[tokio::test]
async fn a_missing_source_is_reported_with_the_available_ones() {
    let pw = PipeWireSession::start();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "source = \"usb_mic_that_is_not_there\"");
    let out = dir.path().join("never.wav");
    let run = run_utter(
        &[
            "--config".as_ref(),
            cfg.as_os_str(),
            "audio".as_ref(),
            "record".as_ref(),
            "--seconds".as_ref(),
            "1".as_ref(),
            "--out".as_ref(),
            out.as_os_str(),
        ],
        &pw.env(),
    )
    .await;
    assert_eq!(run.code, Some(4), "{run}");
    assert!(
        run.stderr.contains("\"usb_mic_that_is_not_there\"")
            && run.stderr.contains("does not exist")
            && run
                .stderr
                .contains(&format!("available sources: {FAKE_MIC}")),
        "{run}"
    );
    assert!(!out.exists(), "nothing may be recorded from another device");
}

#[tokio::test]
async fn record_writes_a_16k_mono_wav_of_what_was_spoken() {
    let pw = PipeWireSession::start();
    let dir = tempfile::tempdir().unwrap();
    let speech = dir.path().join("open_youtube.wav");
    espeak_wav("open youtube", &speech);
    let cfg = config(dir.path(), &format!("source = \"{FAKE_MIC}\""));
    let out = dir.path().join("mic.wav");
    let args = [
        "--config".as_ref(),
        cfg.as_os_str(),
        "audio".as_ref(),
        "record".as_ref(),
        "--seconds".as_ref(),
        "3".as_ref(),
        "--out".as_ref(),
        out.as_os_str(),
        "--json".as_ref(),
    ];
    // The 1.1 s of speech is played again and again while `utter` records: however long the
    // stream takes to come up on a loaded machine, whole utterances reach the 3 s window.
    let env = pw.env();
    let recording = run_utter(&args, &env);
    tokio::pin!(recording);
    let mut player: Option<std::process::Child> = None;
    let run = loop {
        tokio::select! {
            run = &mut recording => break run,
            () = tokio::time::sleep(Duration::from_millis(50)) => {
                let idle = match player.as_mut() {
                    None => true,
                    Some(child) => match child.try_wait().expect("pw-play runs") {
                        Some(played) => {
                            assert!(played.success(), "pw-play failed: {played}");
                            true
                        }
                        None => false,
                    },
                };
                if idle {
                    player = Some(pw.play(&speech));
                }
            }
        }
    };
    if let Some(mut child) = player {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert_eq!(run.code, Some(0), "{run}");
    let report = run.json();
    let reader = hound::WavReader::open(&out).expect("a readable WAV");
    let spec = reader.spec();
    assert_eq!(spec.sample_rate, 16_000);
    assert_eq!(spec.channels, 1);
    assert_eq!(spec.sample_format, hound::SampleFormat::Float);
    let samples: Vec<f32> = reader.into_samples::<f32>().map(Result::unwrap).collect();
    assert_eq!(
        samples.len() as u64,
        report["samples"].as_u64().unwrap(),
        "{run}"
    );
    assert_eq!(report["source"], FAKE_MIC, "{run}");
    assert_eq!(report["rate"], 16_000);
    assert_eq!(report["channels"], 1);
    assert_eq!(report["has_speech"], true, "{run}");
    assert!(!samples.is_empty());
    let peak = samples.iter().fold(0.0f32, |m, s| m.max(s.abs()));
    assert!(peak > 0.1, "peak {peak}: the speech did not reach the file");
    let captured = report["captured_ms"].as_u64().unwrap();
    assert!((2_900..=3_300).contains(&captured), "{run}");

    // Nothing playing: a valid WAV, and no speech.
    let quiet = dir.path().join("quiet.wav");
    let run = run_utter(
        &[
            "--config".as_ref(),
            cfg.as_os_str(),
            "audio".as_ref(),
            "record".as_ref(),
            "--seconds".as_ref(),
            "1".as_ref(),
            "--out".as_ref(),
            quiet.as_os_str(),
            "--json".as_ref(),
            "--no-trim".as_ref(),
        ],
        &pw.env(),
    )
    .await;
    assert_eq!(run.code, Some(0), "{run}");
    assert_eq!(run.json()["has_speech"], false, "{run}");
    let reader = hound::WavReader::open(&quiet).expect("a readable WAV");
    assert_eq!(reader.spec().sample_rate, 16_000);
    // Untrimmed: about one second of (silent) samples.
    let n = reader.len();
    assert!((15_000..=17_000).contains(&n), "{n} samples for 1 s");
}

/// `dir/config.toml` running only the rules router and the desktop plugin.
fn rules_and_desktop_config(dir: &std::path::Path) -> std::path::PathBuf {
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        "config_version = 1\n[[plugin]]\nid = \"rules\"\nkind = \"router\"\nentrypoint = [\"utter\", \"plugin\", \"rules\"]\n\n[[plugin]]\nid = \"desktop\"\nkind = \"action\"\nentrypoint = [\"utter\", \"plugin\", \"desktop\"]\n",
    )
    .unwrap();
    config
}

/// "volume up" with no player named is the desktop's sound (issue 30): the default audio
/// sink's volume changes, read back with `wpctl` here as the test's own oracle; "mute" and
/// "unmute" likewise.
#[tokio::test]
async fn volume_up_and_mute_change_the_default_sink_under_a_real_pipewire() {
    let pw = PipeWireSession::start();
    let dir = tempfile::tempdir().unwrap();
    let config = rules_and_desktop_config(dir.path());
    // A known start: 50%, not muted.
    pw.reset_sink(0.5);
    let config = config.display().to_string();
    let say = |words: &'static str| {
        let config = config.clone();
        let env = pw.env();
        async move { run_utter(&["--config", &config, "say", words, "--json"], &env).await }
    };
    let run = say("volume up").await;
    assert_eq!(run.code, Some(0), "{run}");
    let step = &run.json()["results"][0];
    assert_eq!(step["op"], "media", "{run}");
    assert_eq!(step["result"]["target"], "system", "{run}");
    assert_eq!(step["verified"], true, "{run}");
    assert!(
        (pw.sink_volume() - 0.55).abs() < 0.011,
        "{} after: {run}",
        pw.sink_level()
    );
    let run = say("turn the volume down").await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        (pw.sink_volume() - 0.50).abs() < 0.011,
        "{} after: {run}",
        pw.sink_level()
    );
    let run = say("mute").await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        pw.sink_level().contains("[MUTED]"),
        "{} after: {run}",
        pw.sink_level()
    );
    let run = say("unmute").await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        !pw.sink_level().contains("[MUTED]"),
        "{} after: {run}",
        pw.sink_level()
    );
    // Above full already: "volume up" is refused and changes nothing (wpctl's limit would
    // have set it back to 100%).
    let set = pw
        .command("wpctl")
        .args(["set-volume", "@DEFAULT_AUDIO_SINK@", "1.5"])
        .status()
        .expect("wpctl runs");
    assert!(set.success());
    let run = say("volume up").await;
    assert_eq!(run.code, Some(1), "{run}");
    assert!(run.stdout.contains("not raised"), "{run}");
    assert!(
        (pw.sink_volume() - 1.5).abs() < 0.011,
        "{}",
        pw.sink_level()
    );
}

/// A `wpctl` that lies is never taken at its word: a change it does not make, a level that
/// is no level, and endless output all end in a failure that says why (exit 1).
#[tokio::test]
async fn a_wpctl_that_lies_or_floods_is_a_failure_never_a_success() {
    let dir = tempfile::tempdir().unwrap();
    let config = rules_and_desktop_config(dir.path());
    let fake = dir.path().join("bin");
    std::fs::create_dir(&fake).unwrap();
    let path = format!(
        "{}:{}",
        fake.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let sb = common::Sandbox::new();
    for (script, expect) in [
        // Takes the change, changes nothing.
        (
            "case \"$1\" in get-volume) echo 'Volume: 0.40';; esac",
            "did not take",
        ),
        // A level that is no level.
        ("echo 'Volume: 1e308'", "no volume"),
        // Never stops talking.
        ("exec cat /dev/zero", "did not answer within 5 s"),
    ] {
        let wpctl = fake.join("wpctl");
        std::fs::write(&wpctl, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&wpctl, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let env = sb.env(None).with("PATH", &path);
        let run = run_utter(
            &[
                "--config",
                &config.display().to_string(),
                "say",
                "volume up",
                "--json",
            ],
            &env,
        )
        .await;
        assert_eq!(run.code, Some(1), "{script}: {run}");
        assert!(run.stdout.contains(expect), "{script}: {run}");
        assert!(!run.stdout.contains("\"verified\":true"), "{script}: {run}");
    }
}
