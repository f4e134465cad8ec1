//! The checks a loaded config must pass, one function per section. Each records its errors
//! (the config is refused) and warnings (it runs, and says so) in [`Checks`], with the key's
//! line in the file.

use std::collections::BTreeMap;
use std::path::Path;

use utter_protocol::capability::Capability;
use utter_protocol::manifest::Entrypoint;

use crate::diagnostics::{ConfigIssue, Seg, issue_at};
use crate::schema::*;

/// The issues found so far in one file's text.
pub(crate) struct Checks<'a> {
    /// The file's text (for the line of a key).
    pub(crate) text: &'a str,
    /// The file's name as messages show it.
    pub(crate) origin: &'a str,
    /// Errors: the config is refused.
    pub(crate) errors: Vec<ConfigIssue>,
    /// Warnings: the config runs.
    pub(crate) warnings: Vec<ConfigIssue>,
}

impl Checks<'_> {
    /// An error at the key `path`.
    fn error(&mut self, path: &[Seg], message: String) {
        let issue = issue_at(self.text, self.origin, path, message);
        self.errors.push(issue);
    }

    /// A warning at the key `path`.
    fn warn(&mut self, path: &[Seg], message: String) {
        let issue = issue_at(self.text, self.origin, path, message);
        self.warnings.push(issue);
    }
}

/// Run every section's checks on `config`.
pub(crate) fn validate(config: &Config, c: &mut Checks<'_>) {
    plugin_entries(config, c);
    security(config, c);
    plugins_section(config, c);
    policy(config, c);
    runner(config, c);
    socket(config, c);
    decide(config, c);
    ptt(config, c);
    audio(config, c);
    stt(config, c);
    llm(config, c);
    models(config, c);
    roles(config, c);
}

/// `[[plugin]]`: each entry's id (present, unique, no spaces), kind, entrypoint, permissions, sandbox paths, runtime, capabilities and working directory.
fn plugin_entries(config: &Config, c: &mut Checks<'_>) {
    let mut seen = BTreeMap::new();
    for (i, p) in config.plugin.iter().enumerate() {
        let at = |key: &str| {
            vec![
                Seg::Key("plugin".into()),
                Seg::Index(i),
                Seg::Key(key.into()),
            ]
        };
        if p.id.trim().is_empty() {
            c.error(&at("id"), "the plugin id must not be empty".into());
        } else if let Some(first) = seen.insert(p.id.clone(), i) {
            c.error(
                &at("id"),
                format!(
                    "duplicate plugin id {:?} (also plugin[{first}]); ids must be unique",
                    p.id
                ),
            );
        }
        if p.id.chars().any(|c| c.is_control() || c.is_whitespace()) {
            c.error(
                &at("id"),
                format!(
                    "{:?}: a plugin id may not contain spaces or control characters",
                    p.id
                ),
            );
        }
        let kinds = utter_protocol::manifest::kinds();
        if !kinds.contains(&p.kind) {
            c.warn(
                &at("kind"),
                format!(
                    "unknown kind {:?}; known kinds: {}",
                    p.kind,
                    kinds.join(", ")
                ),
            );
        }
        if let Entrypoint::Program(program) = &p.entrypoint {
            if program.contains(' ') {
                c.warn(&at("entrypoint"),
                    format!("{program:?} is one program path (never split on spaces); to pass arguments write a list such as {:?}", program.split_whitespace().collect::<Vec<_>>()));
            }
        }
        // The default's own entries (inherited, not written here) say what they need under a
        // sandbox in case one is switched on: nothing to warn about.
        if !config.security.enforce
            && !config.plugins_inherited
            && c.origin != DEFAULT_CONFIG_ORIGIN
            && (!p.read_paths.is_empty() || !p.write_paths.is_empty())
        {
            c.warn(
                &at(if p.read_paths.is_empty() {
                    "write_paths"
                } else {
                    "read_paths"
                }),
                "read_paths and write_paths only apply in a sandbox: set [security] enforce = true"
                    .into(),
            );
        }
        let argv = p.entrypoint.argv();
        let words: Vec<&str> = argv.iter().map(String::as_str).collect();
        let starts_apps = words.ends_with(&["plugin", "desktop"])
            || words.first().and_then(|a| a.rsplit('/').next()) == Some("utter-desktop");
        if config.security.enforce && p.sandbox && starts_apps {
            c.warn(&at("entrypoint"),
                format!(
                    "the desktop plugin {:?} starts applications, which would inherit its sandbox (no home directory, no network): add sandbox = false to its entry unless that is what you want",
                    p.id
                ));
        }
        let known = utter_protocol::manifest::permission_names();
        for (j, name) in p.permissions.iter().enumerate() {
            if !known.iter().any(|k| k == name) {
                c.warn(
                    &[
                        Seg::Key("plugin".into()),
                        Seg::Index(i),
                        Seg::Key("permissions".into()),
                        Seg::Index(j),
                    ],
                    format!(
                        "{name:?} is not a permission (known: {}); it grants nothing",
                        known.join(", ")
                    ),
                );
            }
        }
        for (key, paths) in [
            ("read_paths", &p.read_paths),
            ("write_paths", &p.write_paths),
        ] {
            for (j, path) in paths.iter().enumerate() {
                let at_path = [
                    Seg::Key("plugin".into()),
                    Seg::Index(i),
                    Seg::Key(key.into()),
                    Seg::Index(j),
                ];
                if !Path::new(path).is_absolute() {
                    c.error(&at_path, format!("{path:?} is not an absolute path"));
                } else if Path::new(path).parent().is_none() {
                    c.error(&at_path,
                        "\"/\" would give the plugin the whole file system; name the directories it needs".into());
                } else if config.security.enforce && !Path::new(path).exists() {
                    c.warn(
                        &at_path,
                        format!("{path:?} does not exist, so the sandbox does not include it"),
                    );
                }
            }
        }
        let argv = p.entrypoint.argv();
        if argv.is_empty() || argv[0].trim().is_empty() {
            c.error(&at("entrypoint"),
                "the entrypoint must name a program: a non-empty argv list such as [\"utter-rules\"]".into());
        }
        if p.runtime != Runtime::Subprocess {
            c.warn(
                &at("runtime"),
                "only runtime = \"subprocess\" runs today; this plugin will be reported as failed"
                    .into(),
            );
        }
        for (key, list) in [("provides", &p.provides), ("requires", &p.requires)] {
            for (j, cap) in list.iter().enumerate() {
                if let Err(e) = cap.parse::<Capability>() {
                    let mut path = at(key);
                    path.push(Seg::Index(j));
                    c.error(&path, e);
                }
            }
        }
        if !p.cwd.is_empty() && !Path::new(&p.cwd).is_dir() {
            c.warn(&at("cwd"), format!("{:?} is not a directory", p.cwd));
        }
    }
}

/// `[security]`: the sandbox mechanism, and bwrap installed when it is chosen and enforced.
fn security(config: &Config, c: &mut Checks<'_>) {
    if !["auto", "bwrap", "landlock"].contains(&config.security.sandbox.as_str()) {
        c.error(&[Seg::Key("security".into()), Seg::Key("sandbox".into())],
            format!(
                "{:?} is not a sandbox; use \"auto\" (bwrap, else Landlock), \"bwrap\" or \"landlock\"",
                config.security.sandbox
            ));
    }
    if config.security.enforce
        && config.security.sandbox == "bwrap"
        && crate::paths::find_on_path("bwrap").is_none()
    {
        c.warn(&[Seg::Key("security".into()), Seg::Key("enforce".into())],
            "bwrap is not installed, so plugins would run unconfined (and be reported so): install bubblewrap".into());
    }
}

/// `[plugins] disabled`: each id names a `[[plugin]]`; and `plugin = []`, which runs nothing.
fn plugins_section(config: &Config, c: &mut Checks<'_>) {
    for (i, id) in config.plugins.disabled.iter().enumerate() {
        if !config.plugin.iter().any(|p| &p.id == id) {
            c.warn(
                &[
                    Seg::Key("plugins".into()),
                    Seg::Key("disabled".into()),
                    Seg::Index(i),
                ],
                format!("no [[plugin]] has the id {id:?}"),
            );
        }
    }
    if config.plugin.is_empty() {
        c.warnings.push(ConfigIssue {
            file: c.origin.to_owned(),
            line: None,
            key: None,
            message: "plugin = [] names no plugin: nothing will run (remove the key to run the built-in plugins, or add [[plugin]] entries)".into(),
        });
    }
}

/// `[policy]`: op names that are not built in (with the nearest one), and an op both enabled and disabled.
fn policy(config: &Config, c: &mut Checks<'_>) {
    for (key, ops) in [
        ("enabled_ops", &config.policy.enabled_ops),
        ("disabled_ops", &config.policy.disabled_ops),
    ] {
        for (i, op) in ops.iter().enumerate() {
            let name = utter_protocol::digest::normalise_op(op);
            if crate::ops::builtin_names().any(|known| known == name) {
                continue;
            }
            let hint = match crate::ops::nearest(name) {
                Some(near) => format!("did you mean {near:?}? "),
                None => String::new(),
            };
            c.warn(&[
                    Seg::Key("policy".into()),
                    Seg::Key(key.into()),
                    Seg::Index(i),
                ],
                format!(
                    "{op:?} is not a built-in op ({hint}known: {}); it only applies if an action plugin offers an op of that name",
                    crate::ops::builtin_names().collect::<Vec<_>>().join(", ")
                ));
        }
    }
    for (i, op) in config.policy.enabled_ops.iter().enumerate() {
        if config.policy.disabled_ops.iter().any(|d| {
            utter_protocol::digest::normalise_op(d) == utter_protocol::digest::normalise_op(op)
        }) {
            c.warn(
                &[
                    Seg::Key("policy".into()),
                    Seg::Key("enabled_ops".into()),
                    Seg::Index(i),
                ],
                format!("{op:?} is also in disabled_ops, which wins: it stays disabled"),
            );
        }
    }
}

/// `[runner]`: lower bounds of its limits and timeouts, the handle lifetime, the socket transport.
fn runner(config: &Config, c: &mut Checks<'_>) {
    let r = &config.runner;
    for (key, value, min) in [
        ("rpc_timeout_ms", r.rpc_timeout_ms, 1),
        ("confirm_timeout_ms", r.confirm_timeout_ms, 1),
        ("lossy_queue", r.lossy_queue, 1),
        ("credit_window", r.credit_window, 1),
        ("handle_quota", r.handle_quota, 1),
        ("handle_quota_total", r.handle_quota_total, 1),
        ("max_frame_bytes", r.max_frame_bytes, 1024),
        ("restart_delay_ms", r.restart_delay_ms, 10),
        (
            "restart_delay_max_ms",
            r.restart_delay_max_ms,
            r.restart_delay_ms.max(10),
        ),
    ] {
        if value < min {
            c.error(
                &[Seg::Key("runner".into()), Seg::Key(key.into())],
                format!("must be at least {min}, got {value}"),
            );
        }
    }
    // NaN fails the range test too.
    if !(1.0..=604_800.0).contains(&r.handle_ttl) {
        c.error(
            &[Seg::Key("runner".into()), Seg::Key("handle_ttl".into())],
            format!(
                "must be between 1 and 604800 (seconds, a week), got {}",
                r.handle_ttl
            ),
        );
    }
    if !matches!(r.socket_transport.as_str(), "" | "unix") {
        c.error(
            &[
                Seg::Key("runner".into()),
                Seg::Key("socket_transport".into()),
            ],
            format!(
                "{:?} is not supported; allowed: \"unix\" (or leave it out)",
                r.socket_transport
            ),
        );
    }
}

/// `[socket]`: the idle and frame timeouts.
fn socket(config: &Config, c: &mut Checks<'_>) {
    if let Some(socket) = &config.socket {
        for (key, value) in [
            ("idle_timeout_ms", socket.idle_timeout_ms),
            ("frame_timeout_ms", socket.frame_timeout_ms),
        ] {
            if value < 100 {
                c.error(
                    &[Seg::Key("socket".into()), Seg::Key(key.into())],
                    format!("must be at least 100 (milliseconds), got {value}"),
                );
            }
        }
    }
}

/// `[decide]`: the confidence tiers, each from 0 to 1, ask at most act.
fn decide(config: &Config, c: &mut Checks<'_>) {
    let decide = &config.decide;
    let decide_key = |key: &str| [Seg::Key("decide".into()), Seg::Key(key.into())];
    for (key, value) in [
        ("act", decide.act),
        ("ask", decide.ask),
        ("chooser_min", decide.chooser_min),
    ] {
        if !(0.0..=1.0).contains(&value) {
            c.error(
                &decide_key(key),
                format!("must be a confidence from 0 to 1, got {value}"),
            );
        }
    }
    if decide.ask > decide.act {
        c.error(
            &decide_key("ask"),
            format!(
                "must be at most act ({}), got {} (ask is the lower tier: asked, not acted on)",
                decide.act, decide.ask
            ),
        );
    }
}

/// `[ptt]`: the evdev key name, the keyboard monitor's keysym, the portal shortcut, the hold limits.
fn ptt(config: &Config, c: &mut Checks<'_>) {
    let ptt = &config.ptt;
    let ptt_key = |key: &str| [Seg::Key("ptt".into()), Seg::Key(key.into())];
    if let Err(e) = utter_keys::check_evdev_key_name(&ptt.evdev_key) {
        c.error(&ptt_key("evdev_key"), e);
    }
    if let Err(e) = utter_keys::grab_keysym(&ptt.keyboard_monitor_key) {
        c.error(&ptt_key("keyboard_monitor_key"), e);
    }
    if !ptt.dictation_key.trim().is_empty() {
        match utter_keys::grab_keysym(&ptt.dictation_key) {
            Err(e) => c.error(&ptt_key("dictation_key"), e),
            // One key cannot both talk and dictate.
            Ok(sym) if utter_keys::grab_keysym(&ptt.keyboard_monitor_key) == Ok(sym) => c.error(
                &ptt_key("dictation_key"),
                format!(
                    "{:?} is the push-to-talk key (keyboard_monitor_key = {:?}); choose another key to dictate with, or leave it \"\" for none",
                    ptt.dictation_key, ptt.keyboard_monitor_key
                ),
            ),
            Ok(_) if ptt.dictation_key.trim().eq_ignore_ascii_case(ptt.shortcut.trim()) => c.error(
                &ptt_key("dictation_key"),
                format!(
                    "{:?} is the portal's push-to-talk shortcut (shortcut = {:?}); choose another key to dictate with",
                    ptt.dictation_key, ptt.shortcut
                ),
            ),
            Ok(_) => {}
        }
    }
    if ptt.portal && ptt.shortcut.trim().is_empty() {
        c.error(&ptt_key("shortcut"),
            "must name a key in the XDG shortcuts format, e.g. \"F13\" or \"CTRL+ALT+space\" (or set portal = false)".into());
    }
    if ptt.max_hold_ms != 0 && ptt.max_hold_ms <= ptt.min_hold_ms {
        c.error(
            &ptt_key("max_hold_ms"),
            format!(
                "must be larger than min_hold_ms ({}), got {} (0 disables the stuck-key timeout)",
                ptt.min_hold_ms, ptt.max_hold_ms
            ),
        );
    }
}

/// `[audio]` and `[audio.vad]`: ranges, the detector, the silence threshold, the source name.
fn audio(config: &Config, c: &mut Checks<'_>) {
    let a = &config.audio;
    let audio_key = |key: &str| {
        let mut path = vec![Seg::Key("audio".into())];
        path.extend(key.split('.').map(|k| Seg::Key(k.into())));
        path
    };
    for (key, value, min, max) in [
        ("pre_roll_ms", a.pre_roll_ms, 0, 5000),
        ("max_seconds", a.max_seconds, 1, 600),
        ("end_silence_ms", a.end_silence_ms, 0, 10_000),
        ("vad.margin_ms", a.vad.margin_ms, 0, 2000),
        ("vad.min_speech_ms", a.vad.min_speech_ms, 0, 5000),
    ] {
        if !(min..=max).contains(&value) {
            c.error(
                &audio_key(key),
                format!("must be between {min} and {max}, got {value}"),
            );
        }
    }
    if a.vad.detector != "earshot" && a.vad.detector != "energy" {
        c.error(&audio_key("vad.detector"),
            format!(
                "must be \"earshot\" (a voice-activity detector) or \"energy\" (the level alone), got {:?}",
                a.vad.detector
            ));
    }
    let threshold = a.vad.silence_threshold_db;
    if !(-120.0..=0.0).contains(&threshold) {
        c.error(
            &audio_key("vad.silence_threshold_db"),
            format!("must be between -120 and 0 (dBFS), got {threshold}"),
        );
    }
    if a.source.chars().any(|c| c.is_control()) || a.source.trim() != a.source {
        c.error(&audio_key("source"),
            format!(
                "{:?} is not a PipeWire node name (no surrounding spaces or control characters); `utter audio sources` lists them",
                a.source
            ));
    }
}

/// `[stt]`: timeout, window, partial interval, beam and hypotheses, the no-speech threshold,
/// the language code.
fn stt(config: &Config, c: &mut Checks<'_>) {
    let stt = &config.stt;
    let stt_key = |key: &str| vec![Seg::Key("stt".into()), Seg::Key(key.into())];
    if !(1_000..=600_000).contains(&stt.timeout_ms) {
        c.error(
            &stt_key("timeout_ms"),
            format!("must be between 1000 and 600000, got {}", stt.timeout_ms),
        );
    }
    if stt.window != "fit" && stt.window != "full" {
        c.error(
            &stt_key("window"),
            format!(
                "must be \"fit\" (the audio plus 1 s) or \"full\" (30 s), got {:?}",
                stt.window
            ),
        );
    }
    if stt.partial_ms != 0 && !(300..=10_000).contains(&stt.partial_ms) {
        c.error(
            &stt_key("partial_ms"),
            format!(
                "must be 0 (off) or between 300 and 10000, got {}",
                stt.partial_ms
            ),
        );
    }
    if !(1..=10).contains(&stt.beam_size) {
        c.error(
            &stt_key("beam_size"),
            format!("must be between 1 and 10, got {}", stt.beam_size),
        );
    }
    if stt.hypotheses < 1 || stt.hypotheses > stt.beam_size.max(1) {
        c.error(
            &stt_key("hypotheses"),
            format!(
                "must be between 1 and beam_size ({}), got {}",
                stt.beam_size, stt.hypotheses
            ),
        );
    }
    if !(0.0..=1.0).contains(&stt.no_speech_threshold) {
        c.error(
            &stt_key("no_speech_threshold"),
            format!("must be between 0 and 1, got {}", stt.no_speech_threshold),
        );
    }
    if !stt.language.is_empty()
        && (!(2..=3).contains(&stt.language.len())
            || !stt.language.chars().all(|c| c.is_ascii_lowercase()))
    {
        c.error(&stt_key("language"),
            format!(
                "{:?} is not a language code; use an ISO 639-1 code like \"en\" or \"de\", or \"\" to detect",
                stt.language
            ));
    }
}

/// `[llm]`: timeout, model or endpoint (not both; an endpoint that can be reached), an llm plugin to use them, the API.
fn llm(config: &Config, c: &mut Checks<'_>) {
    let llm = &config.llm;
    let llm_key = |key: &str| vec![Seg::Key("llm".into()), Seg::Key(key.into())];
    if !(100..=600_000).contains(&llm.timeout_ms) {
        c.error(
            &llm_key("timeout_ms"),
            format!("must be between 100 and 600000, got {}", llm.timeout_ms),
        );
    }
    if !llm.model.trim().is_empty() && !llm.endpoint.trim().is_empty() {
        c.error(
            &llm_key("endpoint"),
            "set model (a GGUF file run in process) or endpoint (a server), not both".into(),
        );
    }
    if let Some(why) = endpoint_problem(llm.endpoint.trim()) {
        c.error(&llm_key("endpoint"), why);
    }
    let named = !llm.model.trim().is_empty() || !llm.endpoint.trim().is_empty();
    if named && config.plugin_for(&llm.plugin, "llm").is_none() {
        c.warn(
            &llm_key(if llm.model.trim().is_empty() {
                "endpoint"
            } else {
                "model"
            }),
            "no [[plugin]] of kind \"llm\" is configured, so nothing uses it; add one with \
             entrypoint = [\"utter-llm\"]"
                .into(),
        );
    }
    if !["chat", "completions"].contains(&llm.api.as_str()) {
        c.error(&llm_key("api"),
            format!(
                "{:?} is no API; use \"chat\" (/v1/chat/completions) or \"completions\" (/v1/completions)",
                llm.api
            ));
    }
}

/// `[models]`: the source speech models are pulled from.
fn models(config: &Config, c: &mut Checks<'_>) {
    if let Some(why) = crate::models::source_problem(config.models.source.trim()) {
        c.error(&[Seg::Key("models".into()), Seg::Key("source".into())], why);
    }
}

/// `[stt]`, `[tts]` and `[llm]` `plugin`: an id of a `[[plugin]]` of that kind, when set.
fn roles(config: &Config, c: &mut Checks<'_>) {
    let stt = &config.stt;
    let llm = &config.llm;
    for (section, key, id, kind) in [
        ("stt", "plugin", &stt.plugin, "stt"),
        ("tts", "plugin", &config.tts.plugin, "tts"),
        ("llm", "plugin", &llm.plugin, "llm"),
    ] {
        if id.is_empty() {
            continue;
        }
        let message = match config.plugin.iter().find(|p| p.id == *id) {
            None => format!(
                "no [[plugin]] has id {id:?}; name a plugin of kind {kind:?} or leave it empty"
            ),
            Some(p) if p.kind != kind => format!(
                "plugin {id:?} is of kind {:?}, not {kind:?}; name a plugin of kind {kind:?} or leave it empty",
                p.kind
            ),
            Some(_) => continue,
        };
        c.error(&[Seg::Key(section.into()), Seg::Key(key.into())], message);
    }
}
