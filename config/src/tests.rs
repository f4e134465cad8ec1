//! The config's tests: loading, validation, migration and edits.

use crate::diagnostics::*;
use crate::edit::*;
use crate::load::*;
use crate::migrate::*;
use crate::schema::*;
use std::path::Path;

#[test]
fn embedded_default_is_valid() {
    let loaded = parse(DEFAULT_CONFIG, DEFAULT_CONFIG_ORIGIN).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert!(loaded.config.active_plugins().count() >= 2);
}

#[test]
fn unknown_transport_names_file_line_and_key() {
    let text = "config_version = 1\n\n[[plugin]]\nid = \"x\"\ntransport = \"pigeon\"\nentrypoint = [\"x\"]\n";
    let err = parse(text, "c.toml").unwrap_err();
    let issue = &err.errors[0];
    assert_eq!(issue.line, Some(5), "{issue}");
    assert_eq!(issue.key.as_deref(), Some("plugin[0].transport"), "{issue}");
    assert!(issue.message.contains("stdio"), "{issue}");
}

#[test]
fn unknown_keys_warn_with_lines() {
    let text = "config_version = 1\n[runner]\nrpc_timeout = 5\n[[plugin]]\nid = \"x\"\nentrypoint = \"x\"\nflavour = 1\n";
    let loaded = parse(text, "c.toml").unwrap();
    let keys: Vec<_> = loaded
        .warnings
        .iter()
        .map(|w| (w.key.clone().unwrap(), w.line))
        .collect();
    assert_eq!(
        keys,
        vec![
            ("runner.rpc_timeout".to_string(), Some(3)),
            ("plugin[0].flavour".to_string(), Some(7))
        ]
    );
}

#[test]
fn older_format_is_accepted_with_a_note() {
    let loaded = parse("[[plugin]]\nid = \"x\"\nentrypoint = [\"x\"]\n", "old.toml").unwrap();
    assert!(loaded.warnings[0].message.contains("older"));
    assert!(
        loaded.warnings[0].message.contains("utter config migrate"),
        "{:?}",
        loaded.warnings
    );
}

#[test]
fn an_older_files_string_booleans_are_read_as_what_they_say() {
    // As the older runner wrote them; it read every non-empty string as true.
    let text = "# mine\n[security]\nenforce = \"true\" # on\n[socket]\nallow_same_uid = \"Off\"\n[[plugin]]\nid = \"x\"\nentrypoint = [\"x\"]\nenabled = \"no\"\n";
    let loaded = parse(text, "old.toml").unwrap();
    assert!(loaded.config.security.enforce);
    assert!(!loaded.config.socket.as_ref().unwrap().allow_same_uid);
    assert!(!loaded.config.plugin[0].enabled);
    let notes: Vec<_> = loaded
        .warnings
        .iter()
        .filter(|w| w.message.contains("is read as the boolean"))
        .map(|w| (w.key.clone().unwrap(), w.line.unwrap()))
        .collect();
    assert_eq!(
        notes,
        [
            ("security.enforce".to_owned(), 3),
            ("socket.allow_same_uid".to_owned(), 5),
            ("plugin[0].enabled".to_owned(), 9),
        ]
    );
    // What the runner reads is what migration writes.
    let migrated = migrate(text, "old.toml").unwrap();
    let mut read = parse(&migrated.text, "new.toml").unwrap().config;
    read.config_version = None;
    assert_eq!(read, loaded.config);
    // A word that says no boolean is still refused, where it is.
    let e = parse("[security]\nenforce = \"maybe\"\n", "old.toml").unwrap_err();
    assert_eq!(e.errors[0].line, Some(2), "{e}");
    // A current file's strings are not booleans.
    assert!(
        parse(
            "config_version = 1\n[security]\nenforce = \"true\"\n",
            "c.toml"
        )
        .is_err()
    );
}

#[test]
fn a_duplicate_key_is_named() {
    let text = "config_version = 1\n[policy]\nenabled_ops = []\nenabled_ops = [\"terminal\"]\n";
    let err = parse(text, "dup.toml").unwrap_err();
    assert_eq!(err.errors[0].line, Some(4), "{err:?}");
    assert!(
        err.errors[0]
            .message
            .starts_with("duplicate key \"enabled_ops\""),
        "{err:?}"
    );
}

#[test]
fn a_string_entrypoint_is_one_program() {
    let loaded = parse(
        "config_version = 1\n[[plugin]]\nid = \"x\"\nentrypoint = \"/usr/bin/my plugin\"\n",
        "c",
    )
    .unwrap();
    assert_eq!(
        loaded.config.plugin[0].entrypoint.argv(),
        vec!["/usr/bin/my plugin"]
    );
}

#[test]
fn semantic_errors_are_collected() {
    let text = "config_version = 1\n[[plugin]]\nid = \"a\"\nentrypoint = []\n[[plugin]]\nid = \"a\"\nentrypoint = [\"b\"]\nrequires = [\"nope\"]\n";
    let err = parse(text, "c.toml").unwrap_err();
    let keys: Vec<_> = err
        .errors
        .iter()
        .map(|e| (e.key.clone().unwrap(), e.line))
        .collect();
    assert_eq!(
        keys,
        vec![
            ("plugin[0].entrypoint".to_string(), Some(4)),
            ("plugin[1].id".to_string(), Some(6)),
            ("plugin[1].requires[0]".to_string(), Some(8)),
        ]
    );
}

#[test]
fn type_errors_name_the_key() {
    let err = parse(
        "config_version = 1\n[runner]\nrpc_timeout_ms = \"soon\"\n",
        "c.toml",
    )
    .unwrap_err();
    let issue = &err.errors[0];
    assert_eq!(
        (issue.line, issue.key.as_deref()),
        (Some(3), Some("runner.rpc_timeout_ms")),
        "{issue}"
    );
}

#[test]
fn warnings_are_kept_beside_errors() {
    let err = parse(
        "config_version = 1\n[[plugin]]\nid = \"a\"\nflavour = 1\nentrypoint = []\n",
        "c",
    )
    .unwrap_err();
    assert_eq!(err.errors[0].key.as_deref(), Some("plugin[0].entrypoint"));
    assert_eq!(err.warnings[0].key.as_deref(), Some("plugin[0].flavour"));
}

#[test]
fn an_op_name_that_is_not_built_in_is_a_warning_naming_the_nearest() {
    let text = "config_version = 1\n[policy]\nenabled_ops = [\"terminal\",\n  \"termnal\"]\ndisabled_ops = [\"action.open_url\", \"my_plugin_op\"]\n";
    let loaded = parse(text, "c.toml").unwrap();
    let ops: Vec<_> = loaded
        .warnings
        .iter()
        .filter(|w| w.key.as_deref().is_some_and(|k| k.starts_with("policy.")))
        .collect();
    assert_eq!(ops.len(), 2, "{ops:?}");
    assert_eq!(ops[0].key.as_deref(), Some("policy.enabled_ops[1]"));
    assert_eq!(ops[0].line, Some(4), "{}", ops[0]);
    assert!(
        ops[0].message.contains("did you mean \"terminal\""),
        "{}",
        ops[0]
    );
    assert_eq!(ops[1].key.as_deref(), Some("policy.disabled_ops[1]"));
    assert!(!ops[1].message.contains("did you mean"), "{}", ops[1]);
    assert!(
        ops[1].message.contains("action plugin offers"),
        "{}",
        ops[1]
    );
}

#[test]
fn migration_adds_the_version_keeps_comments_and_fixes_string_booleans() {
    let old = "# my utter config\n# second line\n\n[security]\n# why: testing\nenforce = \"false\" # as a string\n\n[[plugin]]\nid = \"r\" # the router\nentrypoint = [\"utter\", \"plugin\", \"rules\"]\nenabled = \"yes\"\n";
    let m = migrate(old, "c.toml").expect("migrates");
    assert_eq!((m.from, m.to), (0, CONFIG_VERSION));
    assert!(
        m.text
            .starts_with("# my utter config\n# second line\n\nconfig_version = 1\n"),
        "{}",
        m.text
    );
    for comment in [
        "# my utter config",
        "# second line",
        "# why: testing",
        "# as a string",
        "# the router",
    ] {
        assert!(m.text.contains(comment), "{comment} lost: {}", m.text);
    }
    assert!(
        m.text.contains("enforce = false # as a string"),
        "{}",
        m.text
    );
    assert!(m.text.contains("enabled = true"), "{}", m.text);
    assert_eq!(m.changes.len(), 3, "{:?}", m.changes);
    let loaded = parse(&m.text, "c.toml").unwrap();
    assert!(!loaded.config.security.enforce);
    assert!(
        loaded
            .warnings
            .iter()
            .all(|w| w.key.as_deref() != Some("config_version"))
    );
    // Current already: unchanged.
    let again = migrate(&m.text, "c.toml").unwrap();
    assert_eq!(again.text, m.text);
    assert!(again.changes.is_empty());
    // Newer: refused.
    let newer = migrate("config_version = 9\n", "c.toml").unwrap_err();
    assert!(newer.errors[0].message.contains("newer"), "{newer}");
    // Not TOML: refused with its line.
    let broken = migrate("a = 1\n[b\n", "c.toml").unwrap_err();
    assert_eq!(broken.errors[0].line, Some(2), "{broken}");
}

#[test]
fn sandbox_paths_take_the_home_directory_and_the_desktop_plugin_is_warned_about() {
    let home = std::env::var("HOME").unwrap_or_default();
    let text = "config_version = 1\n[security]\nenforce = true\nsandbox = \"landlock\"\n[[plugin]]\nid = \"d\"\nkind = \"action\"\nentrypoint = [\"utter\", \"plugin\", \"desktop\"]\nread_paths = [\"~/.config/utter/profiles\"]\n";
    let loaded = parse(text, "c.toml").unwrap();
    if !home.is_empty() {
        assert_eq!(
            loaded.config.plugin[0].read_paths,
            vec![format!("{home}/.config/utter/profiles")]
        );
    }
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.message.contains("starts applications") && w.line == Some(8)),
        "{:?}",
        loaded.warnings
    );
    let quiet = text.replace("read_paths", "sandbox = false\nread_paths");
    let loaded = parse(&quiet, "c.toml").unwrap();
    assert!(
        !loaded
            .warnings
            .iter()
            .any(|w| w.message.contains("starts applications"))
    );
    let bad = parse(&text.replace("\"landlock\"", "\"jail\""), "c.toml").unwrap_err();
    assert_eq!(
        bad.errors[0].key.as_deref(),
        Some("security.sandbox"),
        "{bad}"
    );
}

#[test]
fn doubtful_settings_are_flagged() {
    let text = "config_version = 1\n[security]\nenforce = true\n[policy]\nenabled_ops = [\"terminal\"]\ndisabled_ops = [\"action.terminal\"]\n[plugins]\ndisabled = [\"nope\"]\n[[plugin]]\nid = \"a\"\nkind = \"bogus\"\nentrypoint = \"utter plugin rules\"\nread_paths = [\"/x\"]\n";
    let loaded = parse(text, "c").unwrap();
    let keys: Vec<_> = loaded
        .warnings
        .iter()
        .map(|w| w.key.clone().unwrap())
        .collect();
    for key in [
        "policy.enabled_ops[0]",
        "plugins.disabled[0]",
        "plugin[0].kind",
        "plugin[0].entrypoint",
        "plugin[0].read_paths[0]",
    ] {
        assert!(keys.contains(&key.to_string()), "{key} not in {keys:?}");
    }
    assert!(parse("config_version = 0\n", "c").is_err());
    assert!(
        parse(
            "config_version = 1\n[[plugin]]\nid = \"a b\"\nentrypoint = [\"x\"]\n",
            "c"
        )
        .is_err()
    );
}

#[test]
fn ptt_section_defaults_and_errors() {
    let loaded = parse("config_version = 1\n", "c").unwrap();
    assert_eq!(loaded.config.ptt, PttSection::default());
    let loaded = parse(
        "config_version = 1\n[ptt]\nmin_hold_ms = 100\nevdev = true\nevdev_key = \"KEY_RIGHTCTRL\"\nloudness = 3\n",
        "c",
    )
    .unwrap();
    assert_eq!(loaded.config.ptt.min_hold_ms, 100);
    assert!(loaded.config.ptt.evdev);
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.key.as_deref() == Some("ptt.loudness") && w.line == Some(6)),
        "{:?}",
        loaded.warnings
    );
    let err = parse(
        "config_version = 1\n[ptt]\nevdev_key = \"F13\"\nmax_hold_ms = 10\n",
        "c",
    )
    .unwrap_err();
    let keys: Vec<_> = err
        .errors
        .iter()
        .map(|e| (e.key.clone().unwrap(), e.line))
        .collect();
    assert_eq!(
        keys,
        vec![
            ("ptt.evdev_key".to_string(), Some(3)),
            ("ptt.max_hold_ms".to_string(), Some(4))
        ]
    );
    assert!(
        err.errors[0].message.contains("KEY_F13"),
        "{}",
        err.errors[0]
    );
}

#[test]
fn newer_config_version_is_refused() {
    assert!(parse("config_version = 9\n", "c").is_err());
}

#[test]
fn audio_section_defaults_values_and_errors() {
    let base = "config_version = 1\n[[plugin]]\nid = \"x\"\nentrypoint = [\"x\"]\n";
    let loaded = parse(base, "c.toml").unwrap();
    assert_eq!(loaded.config.audio, AudioSection::default());
    assert_eq!(loaded.config.audio.pre_roll_ms, 300);
    assert_eq!(loaded.config.audio.vad.silence_threshold_db, -50.0);
    let embedded = parse(DEFAULT_CONFIG, DEFAULT_CONFIG_ORIGIN).unwrap();
    assert_eq!(embedded.config.audio, AudioSection::default());

    let text = format!(
        "{base}[audio]\nsource = \"alsa_input.usb-mic\"\npre_roll_ms = 500\nloudness = 3\n[audio.vad]\nsilence_threshold_db = -42\ntrim = false\n"
    );
    let loaded = parse(&text, "c.toml").unwrap();
    let audio = &loaded.config.audio;
    assert_eq!(audio.source, "alsa_input.usb-mic");
    assert_eq!(audio.pre_roll_ms, 500);
    assert_eq!(audio.max_seconds, 30);
    assert_eq!(audio.vad.silence_threshold_db, -42.0);
    assert!(!audio.vad.trim);
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    assert_eq!(loaded.warnings[0].key.as_deref(), Some("audio.loudness"));
    assert_eq!(loaded.warnings[0].line, Some(8));

    let text = format!(
        "{base}[audio]\npre_roll_ms = 9000\nsource = \" mic\"\n[audio.vad]\nsilence_threshold_db = 3\n"
    );
    let err = parse(&text, "c.toml").unwrap_err();
    let keys: Vec<_> = err.errors.iter().map(|e| e.key.clone().unwrap()).collect();
    assert_eq!(
        keys,
        vec![
            "audio.pre_roll_ms",
            "audio.source",
            "audio.vad.silence_threshold_db"
        ],
        "{:?}",
        err.errors
    );
    assert_eq!(err.errors[0].line, Some(6));
    assert!(err.errors[0].message.contains("between 0 and 5000"));
}

#[test]
fn decoding_and_end_of_speech_settings_are_checked_by_name() {
    let text = "config_version = 1\n[stt]\nwindow = \"half\"\nbeam_size = 0\nhypotheses = 3\nno_speech_threshold = 1.5\npartial_ms = 50\n[audio]\nend_silence_ms = 20000\n[audio.vad]\ndetector = \"silero\"\n";
    let err = parse(text, "test.toml").unwrap_err();
    let keys: Vec<String> = err
        .errors
        .iter()
        .map(|e| e.key.clone().unwrap_or_default())
        .collect();
    for key in [
        "stt.window",
        "stt.beam_size",
        "stt.hypotheses",
        "stt.no_speech_threshold",
        "stt.partial_ms",
        "audio.end_silence_ms",
        "audio.vad.detector",
    ] {
        assert!(keys.iter().any(|k| k == key), "{key} not in {keys:?}");
    }
    let window = err
        .errors
        .iter()
        .find(|e| e.key.as_deref() == Some("stt.window"))
        .unwrap();
    assert_eq!(window.line, Some(3));
    assert!(window.message.contains("\"fit\""), "{}", window.message);
    // The defaults pass, and go to the plugins as they are.
    let ok = parse("config_version = 1\n", "t.toml").unwrap().config;
    assert_eq!(ok.stt.window, "fit");
    assert_eq!((ok.stt.beam_size, ok.stt.hypotheses), (5, 3));
    assert_eq!(ok.stt.partial_ms, 1_000);
    // 0 turns the partial transcripts off.
    let off = parse("config_version = 1\n[stt]\npartial_ms = 0\n", "t.toml").unwrap();
    assert_eq!(off.config.stt.partial_ms, 0);
    assert_eq!(ok.audio.configure_params()["end_silence_ms"], 600);
    assert_eq!(ok.audio.configure_params()["vad"]["detector"], "earshot");
}

#[test]
fn stt_and_tts_must_name_a_plugin_of_their_kind() {
    let text = "config_version = 1\n[stt]\nplugin = \"rules\"\n[tts]\nplugin = \"nope\"\n\n[[plugin]]\nid = \"rules\"\nkind = \"router\"\nentrypoint = [\"utter\", \"plugin\", \"rules\"]\n";
    let err = parse(text, "test.toml").unwrap_err();
    let issues: Vec<(String, Option<usize>, String)> = err
        .errors
        .iter()
        .map(|e| (e.key.clone().unwrap_or_default(), e.line, e.message.clone()))
        .collect();
    assert_eq!(issues.len(), 2, "{issues:?}");
    assert_eq!(issues[0].0, "stt.plugin");
    assert_eq!(issues[0].1, Some(3));
    assert!(
        issues[0].2.contains("is of kind \"router\", not \"stt\""),
        "{issues:?}"
    );
    assert_eq!(issues[1].0, "tts.plugin");
    assert!(
        issues[1].2.contains("no [[plugin]] has id \"nope\""),
        "{issues:?}"
    );
}

#[test]
fn a_bad_keyboard_monitor_key_fails_the_load() {
    let loaded = parse("config_version = 1\n", "c").unwrap();
    assert!(loaded.config.ptt.keyboard_monitor);
    assert_eq!(loaded.config.ptt.keyboard_monitor_key, "F13");
    let err = parse(
        "config_version = 1\n[ptt]\nkeyboard_monitor = true\nkeyboard_monitor_key = \"KEY_F13\"\n",
        "c",
    )
    .unwrap_err();
    assert_eq!(err.errors.len(), 1, "{err:?}");
    assert_eq!(
        err.errors[0].key.as_deref(),
        Some("ptt.keyboard_monitor_key")
    );
    assert_eq!(err.errors[0].line, Some(4));
    // Another key restarts the triggers; other limits do not.
    let a = PttSection::default();
    let b = PttSection {
        keyboard_monitor_key: "F14".into(),
        ..PttSection::default()
    };
    let c = PttSection {
        min_hold_ms: 10,
        ..PttSection::default()
    };
    assert!(!a.same_triggers(&b));
    assert!(a.same_triggers(&c));
    // The dictation key: none by default, a keysym when set, a restart when changed.
    assert_eq!(loaded.config.ptt.dictation_key, "");
    let dictate = parse("config_version = 1\n[ptt]\ndictation_key = \"F14\"\n", "c").unwrap();
    assert_eq!(dictate.config.ptt.dictation_key, "F14");
    assert!(!a.same_triggers(&dictate.config.ptt));
    let err = parse(
        "config_version = 1\n[ptt]\ndictation_key = \"KEY_F14\"\n",
        "c",
    )
    .unwrap_err();
    assert_eq!(
        err.errors[0].key.as_deref(),
        Some("ptt.dictation_key"),
        "{err:?}"
    );
    // The push-to-talk key itself, by name or number, is refused.
    for same in ["F13", "0xffca"] {
        let err = parse(
            &format!("config_version = 1\n[ptt]\ndictation_key = \"{same}\"\n"),
            "c",
        )
        .unwrap_err();
        assert!(err.errors[0].message.contains("push-to-talk"), "{err:?}");
    }
}

#[test]
fn the_capture_plugin_runs_only_with_an_stt_plugin_or_when_picked() {
    let entry = |id: &str, kind: &str| {
        format!("[[plugin]]\nid = \"{id}\"\nkind = \"{kind}\"\nentrypoint = [\"x\"]\n")
    };
    let ids = |c: &Config| c.active_plugins().map(|p| p.id.clone()).collect::<Vec<_>>();
    // (No model named: the stt plugin's own setting, so it runs.)
    let text = format!(
        "config_version = 1\n[stt]\nmodel = \"\"\n{}{}",
        entry("rules", "router"),
        entry("mic", "audio")
    );
    let without_stt = parse(&text, "t.toml").unwrap().config;
    assert_eq!(ids(&without_stt), ["rules"]);
    assert_eq!(ids(&without_stt.clone().only_plugin("mic")), ["mic"]);
    assert_eq!(
        without_stt.capture_plugin().map(|p| p.id.as_str()),
        Some("mic")
    );
    let with_stt = parse(&format!("{text}{}", entry("stt", "stt")), "t.toml")
        .unwrap()
        .config;
    assert_eq!(ids(&with_stt), ["rules", "mic", "stt"]);
    // `utter say` needs none of the voice loop's plugins.
    assert_eq!(ids(&with_stt.without_voice()), ["rules"]);
}

#[test]
fn stt_model_names_resolve_in_the_models_dir_and_paths_stay_paths() {
    let data = tempfile::tempdir().unwrap();
    let dirs = crate::paths::BaseDirs::from_lookup(|name| match name {
        "HOME" => Some("/home/u".into()),
        "XDG_DATA_HOME" => Some(data.path().as_os_str().to_owned()),
        _ => None,
    });
    let stt = |model: &str| SttSection {
        model: model.into(),
        ..SttSection::default()
    };
    let models = data.path().join("utter/models");
    let path = |p: &Path| Some(p.to_string_lossy().into_owned());
    assert_eq!(
        stt("tiny.en").model_path_in(&dirs),
        path(&models.join("tiny.en"))
    );
    assert_eq!(stt("").model_path_in(&dirs), None);
    assert_eq!(stt("/m/w").model_path_in(&dirs), Some("/m/w".into()));
    assert_eq!(stt("./w").model_path_in(&dirs), Some("./w".into()));
    assert_eq!(stt("~/w").model_name(), None);

    let catalog = crate::models::Catalog::parse(
        "[[model]]\nname = \"tiny.en\"\nsource = \"http://h/\"\n[[model.file]]\nname = \"a\"\nsize = 2\nsha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"\n",
        "t",
    )
    .unwrap();
    assert_eq!(
        stt("tiny.en").missing_model_in(&dirs, &catalog).as_deref(),
        Some("speech model tiny.en is not installed: run `utter models pull tiny.en`")
    );
    assert_eq!(stt("/m/w").missing_model_in(&dirs, &catalog), None);
    assert_eq!(stt("").missing_model_in(&dirs, &catalog), None);
    std::fs::create_dir_all(models.join("tiny.en")).unwrap();
    std::fs::write(models.join("tiny.en/a.partial"), "x").unwrap();
    let incomplete = stt("tiny.en").missing_model_in(&dirs, &catalog).unwrap();
    assert!(
        incomplete.contains("incomplete (missing a)"),
        "{incomplete}"
    );
    std::fs::write(models.join("tiny.en/a"), "xy").unwrap();
    assert_eq!(stt("tiny.en").missing_model_in(&dirs, &catalog), None);
    // A name the catalog does not know is fine when its directory exists.
    let other = stt("mine").missing_model_in(&dirs, &catalog).unwrap();
    assert!(other.contains("`utter models list`"), "{other}");
    std::fs::create_dir_all(models.join("mine")).unwrap();
    assert_eq!(stt("mine").missing_model_in(&dirs, &catalog), None);
}

#[test]
fn voice_plugins_wait_for_a_named_model_and_models_source_is_checked() {
    let text = "config_version = 1\n[stt]\nmodel = \"utter-test-no-such-model\"\n[[plugin]]\nid = \"rules\"\nkind = \"router\"\nentrypoint = [\"x\"]\n[[plugin]]\nid = \"mic\"\nkind = \"audio\"\nentrypoint = [\"x\"]\n[[plugin]]\nid = \"stt\"\nkind = \"stt\"\nentrypoint = [\"x\"]\n";
    let config = parse(text, "t.toml").unwrap().config;
    let ids: Vec<&str> = config.active_plugins().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["rules"]);
    let ids: Vec<String> = config
        .clone()
        .only_plugin("mic")
        .active_plugins()
        .map(|p| p.id.clone())
        .collect();
    assert_eq!(ids, ["mic"]);

    let loaded = parse(
        "config_version = 1\n[models]\nsource = \"https://mirror.example/tiny.en/\"\n",
        "t",
    )
    .unwrap();
    assert_eq!(
        loaded.config.models.source,
        "https://mirror.example/tiny.en/"
    );
    let err = parse(
        "config_version = 1\n[models]\nsource = \"mirror:8000\"\n",
        "t",
    )
    .unwrap_err();
    assert_eq!(err.errors[0].key.as_deref(), Some("models.source"));
    assert_eq!(err.errors[0].line, Some(3));
    assert!(
        err.errors[0].message.contains("http://"),
        "{}",
        err.errors[0]
    );
    let embedded = parse(DEFAULT_CONFIG, DEFAULT_CONFIG_ORIGIN).unwrap().config;
    assert_eq!(embedded.stt.model, "tiny.en");
    assert_eq!(embedded.models, ModelsSection::default());
}

#[test]
fn llm_endpoints_must_be_a_plain_http_base_address() {
    for ok in [
        "",
        "http://127.0.0.1:8080",
        "http://localhost:11434/",
        "http://h:1/v1",
    ] {
        assert_eq!(endpoint_problem(ok), None, "{ok}");
    }
    for (bad, why) in [
        ("localhost:8080", "not an http:// URL"),
        (":11434", "not an http:// URL"),
        ("https://h:1", "https is not supported"),
        ("http://h:1/v1/chat/completions", "not an API path"),
    ] {
        let e = endpoint_problem(bad).unwrap_or_default();
        assert!(e.contains(why), "{bad}: {e}");
    }
    // A model with no plugin to use it is said, not silently ignored.
    let text = "config_version = 1\n[llm]\nendpoint = \"http://127.0.0.1:1\"\n";
    let loaded = parse(text, "t.toml").unwrap();
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.message.contains("no [[plugin]] of kind \"llm\"")),
        "{:?}",
        loaded.warnings
    );
}

fn set(text: &str, edits: &[(&str, toml_edit::Value)]) -> Result<Edited, ConfigError> {
    let edits: Vec<(String, toml_edit::Value)> = edits
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    set_values(text, "test.toml", &edits)
}

#[test]
fn a_key_deeper_or_longer_than_any_setting_is_refused_at_once() {
    let deep = vec!["a"; 5000].join(".");
    let e = set("", &[(deep.as_str(), true.into())]).expect_err("deep");
    assert!(e.to_string().contains("longer than any setting"), "{e}");
    let long = "x".repeat(300);
    assert!(set("", &[(long.as_str(), true.into())]).is_err());
    // The deepest real setting still works.
    assert!(set("", &[("ptt.evdev", true.into())]).is_ok());
}

#[test]
fn set_values_changes_only_the_values_in_place_with_their_comments() {
    let text = "config_version = 1\n# mine\n[ptt]\nportal = false   # none here\nevdev = false     # not yet\nevdev_key = 'KEY_F13' # thumb\n\n[audio]\nmax_seconds = 30\n";
    let edited = set(
        text,
        &[
            ("ptt.evdev", true.into()),
            ("ptt.evdev_key", "KEY_PAUSE".into()),
            ("ptt.portal", false.into()),
        ],
    )
    .unwrap();
    assert_eq!(edited.changed, ["ptt.evdev", "ptt.evdev_key"]);
    assert_eq!(
        edited.text,
        text.replace("evdev = false     # not yet", "evdev = true     # not yet")
            .replace(
                "evdev_key = 'KEY_F13' # thumb",
                "evdev_key = \"KEY_PAUSE\" # thumb"
            )
    );
    // The same value, spelled otherwise, is no change.
    let same = set(
        text,
        &[
            ("ptt.evdev_key", "KEY_F13".into()),
            ("audio.max_seconds", 30.into()),
        ],
    )
    .unwrap();
    assert!(same.changed.is_empty());
    assert_eq!(same.text, text);
}

#[test]
fn type_errors_name_toml_types_not_rust_ones() {
    for (text, line, said) in [
        (
            "config_version = 1\n\nptt = 3\n",
            3,
            "invalid type: integer `3`, expected a table",
        ),
        (
            "config_version = 1\n[audio]\nmax_seconds = -4\n",
            3,
            "invalid value: integer `-4`, expected a whole number from 0 to 4294967295",
        ),
        (
            "config_version = 1\n[policy]\nenabled_ops = \"terminal\"\n",
            3,
            "invalid type: string \"terminal\", expected an array",
        ),
        (
            "config_version = 1\n[[plugin]]\nid = \"a\"\nentrypoint = 5\n",
            4,
            "invalid type: integer `5`, expected a string (one program) or an array of strings (the program and its arguments)",
        ),
        (
            "config_version = 1\n[[plugin]]\nid = \"a\"\nentrypoint = \"a\"\nenv = 2\n",
            5,
            "invalid type: integer `2`, expected a table",
        ),
    ] {
        let e = parse(text, "c.toml").unwrap_err();
        assert_eq!(e.errors[0].line, Some(line), "{e}");
        assert_eq!(e.errors[0].message, said, "{e}");
    }
    assert_eq!(
        in_toml_words("expected struct X or u64"),
        "expected a table or u64"
    );
    assert_eq!(in_toml_words("expected something"), "expected something");
    assert_eq!(in_toml_words("expected "), "expected ");
}

#[test]
fn every_wrong_type_is_named_in_one_run() {
    let text = "config_version = 1\n[runner]\nrpc_timeout_ms = \"soon\"\n[ptt]\nevdev = 3\nmin_hold_ms = 150\n[audio]\nmax_seconds = 1.5\n";
    let e = parse(text, "c.toml").unwrap_err();
    let found: Vec<_> = e
        .errors
        .iter()
        .map(|i| (i.line, i.key.clone().unwrap_or_default()))
        .collect();
    assert_eq!(
        found,
        [
            (Some(3), "runner.rpc_timeout_ms".to_owned()),
            (Some(5), "ptt.evdev".to_owned()),
            (Some(8), "audio.max_seconds".to_owned()),
        ],
        "{e}"
    );
    // A required field of the wrong type is one error, not also "missing field".
    let e = parse(
        "config_version = 1\n[[plugin]]\nid = 5\nentrypoint = \"x\"\n",
        "c.toml",
    )
    .unwrap_err();
    assert_eq!(e.errors.len(), 1, "{e}");
    // An array over several lines cannot go alone: the first error stands by itself.
    let e = parse(
        "config_version = 1\n[policy]\nenabled_ops = [\n1,\n]\n[ptt]\nevdev = 3\n",
        "c.toml",
    )
    .unwrap_err();
    assert_eq!(e.errors[0].line, Some(4), "{e}");
}

#[test]
fn shapes_and_words_serde_would_get_wrong() {
    let plugin = "[[plugin]]\nid = \"a\"\nentrypoint = \"a\"\n";
    for (text, line, key, said) in [
        (
            format!("config_version = 1\n{plugin}transport = \"udp\"\n"),
            5,
            "plugin[0].transport",
            "unknown transport \"udp\": use \"stdio\", \"connect\" or \"listen\"",
        ),
        (
            format!("config_version = 1\n{plugin}transport = {{ stdio = {{}} }}\n"),
            5,
            "plugin[0].transport",
            "invalid type: table, expected a string",
        ),
        (
            format!("config_version = 1\n{plugin}runtime = \"Subprocess\"\n"),
            5,
            "plugin[0].runtime",
            "unknown runtime \"Subprocess\": use \"subprocess\" (\"wasm\" and \"native\" are reserved)",
        ),
        (
            "config_version = 1\nrunner = [30000, 2000]\n".to_owned(),
            2,
            "runner",
            "must be a table, not an array: write it as [runner] with its keys on the lines below",
        ),
        (
            "config_version = 1\n[audio]\nvad = []\n".to_owned(),
            3,
            "audio.vad",
            "must be a table, not an array: write it as [audio.vad] with its keys on the lines below",
        ),
        (
            "config_version = 1\naudio = []\n".to_owned(),
            2,
            "audio",
            "must be a table, not an array: write it as [audio] with its keys on the lines below",
        ),
        (
            "config_version = 1\nplugin = [[\"a\", \"router\"]]\n".to_owned(),
            2,
            "plugin[0]",
            "must be a table of keys (id, entrypoint, ...): write each plugin as [[plugin]] with its keys below",
        ),
        (
            "config_version = 1\n[plugin]\nid = \"a\"\n".to_owned(),
            2,
            "plugin",
            "must be an array of tables: write each plugin as [[plugin]] (two brackets), not [plugin]",
        ),
        (
            "config_version = 1\n[runner]\nhandle_ttl = nan\n".to_owned(),
            3,
            "runner.handle_ttl",
            "must be between 1 and 604800 (seconds, a week), got NaN",
        ),
        (
            "config_version = 1\n[runner]\nhandle_quota = 18446744073709551616\n".to_owned(),
            3,
            "runner.handle_quota",
            "invalid type: integer `18446744073709551616` (past what TOML holds), expected a whole number, 0 or more",
        ),
    ] {
        let e = parse(&text, "c.toml").unwrap_err();
        assert_eq!(e.errors.len(), 1, "{e}");
        assert_eq!(e.errors[0].line, Some(line), "{e}");
        assert_eq!(e.errors[0].key.as_deref(), Some(key), "{e}");
        assert_eq!(e.errors[0].message, said, "{e}");
    }
    // A quoted key holds anything: printed escaped, it cannot forge a line of its own.
    let loaded = parse(
        "config_version = 1\n[ptt]\n\"x\\nerror: forged\\u001b[31m\" = []\n",
        "c.toml",
    )
    .unwrap();
    let shown: String = loaded.warnings.iter().map(ToString::to_string).collect();
    assert!(
        !shown.contains('\u{1b}') && shown.contains("x\\nerror: forged\\u{1b}[31m"),
        "{shown}"
    );
}

#[test]
fn edits_keep_the_files_line_ends_and_byte_order_mark() {
    // Written on Windows, or by an editor set to CRLF: toml_edit alone would give back
    // every line with "\n" and drop the mark.
    let text = "\u{feff}config_version = 1\r\n# mine\r\n[ptt]\r\nevdev = false # not yet\r\n";
    let edited = set(
        text,
        &[("ptt.evdev", true.into()), ("audio.max_seconds", 20.into())],
    )
    .unwrap();
    assert_eq!(
        edited.text,
        "\u{feff}config_version = 1\r\n# mine\r\n[ptt]\r\nevdev = true # not yet\r\n\r\n[audio]\r\nmax_seconds = 20\r\n"
    );
    let old = "\u{feff}# old\r\n[security]\r\nenforce = \"true\"\r\n";
    let m = migrate(old, "c.toml").unwrap();
    assert_eq!(
        m.text,
        "\u{feff}# old\r\nconfig_version = 1\r\n\r\n[security]\r\nenforce = true\r\n"
    );
    assert_eq!(migrate(&m.text, "c.toml").unwrap().text, m.text);
    // A value's own line ends are its own: not made "\r\n" with the file's.
    let edited = set(text, &[("llm.api_model", "first\nsecond".into())]).unwrap();
    assert!(edited.text.contains("\r\n[llm]\r\n"), "{:?}", edited.text);
    let read: toml::Table = edited.text.trim_start_matches('\u{feff}').parse().unwrap();
    assert_eq!(read["llm"]["api_model"].as_str(), Some("first\nsecond"));
}

#[test]
fn a_file_that_cannot_be_layered_is_refused_not_read_alone() {
    // Past what a TOML table holds: read alone it would run no plugins.
    for text in [
        "config_version = 1\nx = 99999999999999999999999\n",
        "config_version = 1\n[runner]\nrpc_timeout_ms = 9223372036854775808\n",
    ] {
        let err = parse(text, "big.toml").unwrap_err();
        assert!(!err.errors.is_empty(), "{text}");
    }
}

#[test]
fn a_file_with_nothing_but_its_version_is_the_built_in_default() {
    // Every value a file leaves out is the built-in default's: one key changes one key.
    let embedded = parse(DEFAULT_CONFIG, DEFAULT_CONFIG_ORIGIN).unwrap().config;
    let mut bare = parse("config_version = 1\n", "bare.toml").unwrap().config;
    assert!(bare.plugins_inherited);
    bare.plugins_inherited = false;
    // A missing [socket] table reads as an empty one (it opens nothing either way).
    bare.socket = bare.socket.or_else(|| Some(SocketSection::default()));
    let mut differ = Vec::new();
    macro_rules! same {
        ($($field:ident),*) => {$(
            if embedded.$field != bare.$field {
                differ.push(format!("{}: {:?} != {:?}", stringify!($field), embedded.$field, bare.$field));
            }
        )*};
    }
    same!(
        runner, socket, security, policy, plugins, ptt, audio, stt, tts, decide, llm, models,
        plugin
    );
    assert!(
        differ.is_empty(),
        "the struct defaults differ from data/config.default.toml:\n{}",
        differ.join("\n")
    );
}

#[test]
fn a_file_that_names_no_plugins_runs_the_built_in_ones() {
    let one_key = parse("config_version = 1\n[ptt]\nevdev = true\n", "one.toml").unwrap();
    assert!(one_key.config.ptt.evdev);
    assert!(one_key.config.plugins_inherited);
    let ids: Vec<&str> = one_key
        .config
        .plugin
        .iter()
        .map(|p| p.id.as_str())
        .collect();
    let defaults: Vec<&str> = default_plugins().iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, defaults);
    assert!(ids.contains(&"rules") && ids.contains(&"a11y"), "{ids:?}");
    assert!(
        !one_key
            .warnings
            .iter()
            .any(|w| w.message.contains("nothing will run")),
        "{:?}",
        one_key.warnings
    );
    // `[[plugin]]` entries choose; `plugin = []` chooses none, and says so.
    let own = parse(
        "config_version = 1\n[[plugin]]\nid = \"mine\"\nkind = \"router\"\nentrypoint = [\"/bin/true\"]\n",
        "own.toml",
    )
    .unwrap();
    assert_eq!(own.config.plugin.len(), 1);
    assert!(!own.config.plugins_inherited);
    let none = parse("config_version = 1\nplugin = []\n", "none.toml").unwrap();
    assert!(none.config.plugin.is_empty());
    assert!(
        none.warnings
            .iter()
            .any(|w| w.message.contains("nothing will run")),
        "{:?}",
        none.warnings
    );
}

#[test]
fn setting_a_key_of_a_file_that_does_not_exist_writes_that_key_over_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("utter/config.toml");
    let edited = set_in_file(
        &path,
        &[("stt.model".into(), toml_edit::Value::from("/models/tiny"))],
        true,
    )
    .unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text, edited.text);
    // The one value alone; the default's plugins run, inherited.
    assert!(!text.contains("id = \"rules\""), "{text}");
    assert!(text.starts_with(NEW_FILE), "{text}");
    let loaded = parse(&text, "x").unwrap().config;
    assert!(loaded.plugins_inherited);
    assert_eq!(loaded.stt.model, "/models/tiny");
    let default = parse(DEFAULT_CONFIG, DEFAULT_CONFIG_ORIGIN).unwrap().config;
    assert_eq!(loaded.plugin, default.plugin);
    // A change that leaves a plugin out says so.
    let edited = set_in_file(
        &path,
        &[(
            "plugins.disabled".into(),
            "[\"a11y\"]".parse::<toml_edit::Value>().unwrap(),
        )],
        false,
    )
    .unwrap();
    assert!(
        edited
            .warnings
            .iter()
            .any(|w| w.message.contains("no longer run: a11y")),
        "{:?}",
        edited.warnings
    );
}

#[test]
fn set_values_adds_missing_keys_and_tables() {
    let text = "config_version = 1\n[ptt]\nevdev = false\n";
    let edited = set(
        text,
        &[
            ("ptt.min_hold_ms", 200.into()),
            ("audio.vad.trim", false.into()),
        ],
    )
    .unwrap();
    let loaded = parse(&edited.text, "test.toml").unwrap();
    assert_eq!(loaded.config.ptt.min_hold_ms, 200);
    assert!(!loaded.config.audio.vad.trim);
    assert!(
        edited
            .text
            .starts_with("config_version = 1\n[ptt]\nevdev = false\nmin_hold_ms = 200\n"),
        "{}",
        edited.text
    );
    // An empty file gets what it needs, and stays a valid config.
    let fresh = set("", &[("ptt.evdev", true.into())]).unwrap();
    assert!(parse(&fresh.text, "test.toml").unwrap().config.ptt.evdev);
}

#[test]
fn set_values_refuses_what_the_runner_would_refuse_and_says_where() {
    let text = "config_version = 1\n[ptt]\nevdev = false\n";
    // A value of the wrong type: the checker's own error, with the line.
    let e = set(text, &[("ptt.evdev", "yes".into())]).unwrap_err();
    assert_eq!(e.errors[0].line, Some(3), "{e:?}");
    assert!(e.errors[0].to_string().contains("test.toml:3"), "{e:?}");
    // Through something that is not a table.
    let e = set(
        "config_version = 1\n[[plugin]]\nid = \"x\"\nkind = \"router\"\nentrypoint = [\"x\"]\n",
        &[("plugin.id", "y".into())],
    )
    .unwrap_err();
    assert!(e.errors[0].message.contains("not a table"), "{e:?}");
    // A table is not a value; an empty part is not a key.
    assert!(set(text, &[("ptt", true.into())]).is_err());
    assert!(set(text, &[("ptt..evdev", true.into())]).is_err());
    assert!(set(text, &[("", true.into())]).is_err());
    // A key the runner does not read is not written: it would change nothing.
    let e = set(text, &[("ptt.evdevv", true.into())]).unwrap_err();
    assert_eq!(e.errors[0].key.as_deref(), Some("ptt.evdevv"), "{e:?}");
    assert!(
        e.errors[0].message.starts_with("is not a key utter reads"),
        "{e:?}"
    );
    // A misspelt key of a section is met with the nearest key of that section.
    assert!(
        e.errors[0].message.contains("did you mean \"evdev\"?"),
        "{e:?}"
    );
    let e = set(text, &[("stt.partal_ms", 500.into())]).unwrap_err();
    assert!(
        e.errors[0].message.contains("did you mean \"partial_ms\"?"),
        "{e:?}"
    );
    let e = set(text, &[("audio.vad.margn_ms", 3.into())]).unwrap_err();
    assert!(
        e.errors[0].message.contains("did you mean \"margin_ms\"?"),
        "{e:?}"
    );
    let e = set(text, &[("secruity.enforce", true.into())]).unwrap_err();
    assert!(
        e.errors[0].message.contains("did you mean \"security\"?"),
        "{e:?}"
    );
    // Warnings about what was set are shown, down to its elements.
    let edited = set(
        text,
        &[(
            "policy.enabled_ops",
            toml_edit::Value::from_iter(["termnal"]),
        )],
    )
    .unwrap();
    assert!(
        edited.warnings[0]
            .message
            .contains("did you mean \"terminal\""),
        "{:?}",
        edited.warnings
    );
    // Text that is not TOML: its line.
    let e = set("config_version = 1\n[ptt\n", &[("ptt.evdev", true.into())]).unwrap_err();
    assert_eq!(e.errors[0].line, Some(2), "{e:?}");
    // An error at the start of a line is on that line (not the one before), as in
    // check-config.
    let bad = "config_version = 1\n\n\n= 3\n";
    let e = set(bad, &[("ptt.evdev", true.into())]).unwrap_err();
    assert_eq!(e.errors[0].line, Some(4), "{e:?}");
    let e = migrate(bad, "test.toml").unwrap_err();
    assert_eq!(e.errors[0].line, Some(4), "{e:?}");
    assert_eq!(parse(bad, "test.toml").unwrap_err().errors[0].line, Some(4));
}
