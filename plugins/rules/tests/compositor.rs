//! Compositor phrases as the runner sees them: the real `utter-rules` binary over stdio, with
//! a private home whose `niri/config.kdl` holds key bindings, a desktop entry of its own, and
//! requests carrying a compositor context, broken configs and hostile input.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;
use utter_protocol::serde_json::{Value, json};
use utter_protocol::testkit::{SpawnOptions, TestPlugin};

const BIN: &str = env!("CARGO_BIN_EXE_utter-rules");

/// A temporary home: `home/`, `config/` (XDG_CONFIG_HOME), `data/` and `sys/` (the XDG data
/// directories, so that no installed application of this machine is seen).
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        let home = Home {
            dir: tempfile::tempdir().expect("temp dir"),
        };
        for sub in [
            "home",
            "config/niri",
            "data/applications",
            "sys/applications",
        ] {
            std::fs::create_dir_all(home.path(sub)).expect("mkdir");
        }
        std::fs::write(
            home.path("sys/applications/org.mozilla.firefox.desktop"),
            "[Desktop Entry]\nType=Application\nName=Firefox\nExec=firefox %u\n\
             StartupWMClass=firefox\n",
        )
        .expect("write desktop entry");
        home
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn niri_config(&self) -> PathBuf {
        self.path("config/niri/config.kdl")
    }

    fn env(&self) -> Vec<(OsString, OsString)> {
        let var = |k: &str, v: &Path| (OsString::from(k), v.as_os_str().to_owned());
        vec![
            var("HOME", &self.path("home")),
            var("XDG_CONFIG_HOME", &self.path("config")),
            var("XDG_DATA_HOME", &self.path("data")),
            var("XDG_DATA_DIRS", &self.path("sys")),
            // Empty counts as unset: the config comes from XDG_CONFIG_HOME.
            ("NIRI_CONFIG".into(), "".into()),
            ("UTTER_SITES".into(), "".into()),
        ]
    }

    async fn start(&self) -> TestPlugin {
        let options = SpawnOptions {
            env: self.env(),
            ..SpawnOptions::default()
        };
        TestPlugin::start(&[BIN.into()], options)
            .await
            .unwrap_or_else(|e| panic!("utter-rules starts: {e}"))
    }
}

async fn plan(plugin: &TestPlugin, params: Value) -> Value {
    plugin
        .request("router.plan", params.clone())
        .await
        .unwrap_or_else(|e| panic!("router.plan {params} failed: {e:?}"))
}

/// The `(rule, op, args)` of a plan with one step, or `None` for an empty plan.
async fn step(plugin: &TestPlugin, utterance: &str) -> Option<(String, String, Value)> {
    let result = plan(plugin, json!({"utterance": utterance})).await;
    let steps = result["steps"].as_array().expect("steps is an array");
    if steps.is_empty() {
        assert!(result["rule"].is_null(), "{result}");
        return None;
    }
    assert_eq!(steps.len(), 1, "{result}");
    assert_eq!(steps[0]["provenance"], "user", "{result}");
    let rule = result["rule"].as_str().expect("rule").to_owned();
    let op = steps[0]["op"].as_str().expect("op").to_owned();
    Some((rule, op, steps[0]["args"].clone()))
}

async fn health(plugin: &TestPlugin) -> Value {
    plugin
        .request("plugin.health", json!({}))
        .await
        .expect("plugin.health answers")
}

fn niri(rule: &str, args: Value) -> Option<(String, String, Value)> {
    Some((rule.to_owned(), "niri".to_owned(), args))
}

const CONFIG: &str = r#"// A niri config as people write them (KDL v1: bare true/false).
input {
    keyboard {
        xkb {
            layout "us,de"
        }
    }
}

binds {
    Mod+T hotkey-overlay-title="Open a Terminal" { spawn "foot"; }
    Mod+Shift+3 { move-column-to-workspace 3 focus=false; }
    Mod+W { toggle-column-tabbed-display; }
    Mod+B { focus-workspace "browser"; }
    Mod+Q repeat=false { close-window; }
    Mod+Ctrl+L hotkey-overlay-title="Lock the Screen" { spawn "swaylock"; }
}
"#;

#[tokio::test]
async fn the_users_niri_bindings_plan_their_actions() {
    let home = Home::new();
    std::fs::write(home.niri_config(), CONFIG).expect("write config");
    let plugin = home.start().await;

    assert_eq!(
        step(&plugin, "Open a terminal.").await,
        niri("niri_bind", json!({"command": "spawn", "args": ["foot"]}))
    );
    assert_eq!(
        step(&plugin, "lock the screen").await,
        niri(
            "niri_bind",
            json!({"command": "spawn", "args": ["swaylock"]})
        )
    );
    assert_eq!(
        step(&plugin, "move column to workspace three").await,
        niri(
            "niri_bind",
            json!({"command": "move-column-to-workspace", "args": [3], "options": {"focus": false}})
        )
    );
    assert_eq!(
        step(&plugin, "toggle column tabbed display").await,
        niri(
            "niri_bind",
            json!({"command": "toggle-column-tabbed-display"})
        )
    );
    assert_eq!(
        step(&plugin, "focus workspace browser").await,
        niri(
            "niri_bind",
            json!({"command": "focus-workspace", "args": ["browser"]})
        )
    );
    // The curated phrase wins a clash (same action here).
    assert_eq!(
        step(&plugin, "close window").await,
        niri("compositor", json!({"command": "close-window"}))
    );
    let h = health(&plugin).await;
    assert_eq!(h["status"], "ok", "{h}");
    let detail = h["detail"].as_str().expect("detail");
    assert!(detail.contains("6 niri bindings"), "{detail}");
    assert!(detail.contains("config.kdl"), "{detail}");

    // A changed file is read again at the next plan, without a restart.
    let changed = CONFIG.replace(
        "Mod+W { toggle-column-tabbed-display; }",
        "Mod+W hotkey-overlay-title=\"Tabbed Columns\" { toggle-column-tabbed-display; }\n    \
         Mod+O { toggle-overview; }",
    );
    std::fs::write(home.niri_config(), changed).expect("rewrite config");
    assert_eq!(
        step(&plugin, "tabbed columns").await,
        niri(
            "niri_bind",
            json!({"command": "toggle-column-tabbed-display"})
        )
    );
    let h = health(&plugin).await;
    assert!(
        h["detail"]
            .as_str()
            .unwrap_or("")
            .contains("7 niri bindings"),
        "{h}"
    );

    // Desktop applications and contexts, end to end.
    assert_eq!(
        step(&plugin, "switch to firefox").await,
        Some((
            "ensure_app".into(),
            "ensure_app".into(),
            json!({"app": "org.mozilla.firefox", "desktop_id": "org.mozilla.firefox.desktop",
                   "wm_class": "firefox"})
        ))
    );
    let with_context = plan(
        &plugin,
        json!({
            "utterance": "switch to foot",
            "context": {
                "compositor": {"name": "niri", "version": "25.08"},
                "focused": {"id": 4, "app_id": "foot", "title": "switch to evil", "pid": 9,
                            "workspace": "1", "workspace_id": 1, "output": "DP-1",
                            "focused": true, "fullscreen": false},
                "windows": [{"id": 4, "app_id": "foot", "title": "switch to evil"}],
                "workspaces": [{"id": 1, "index": 1, "name": null, "output": "DP-1",
                                "focused": true, "active": true}],
                "outputs": [{"name": "DP-1", "focused": true}],
                "keyboard_layout": "English (US)",
                "provenance": {"title": "title"},
            },
        }),
    )
    .await;
    assert_eq!(with_context["rule"], "focus_app", "{with_context}");
    assert_eq!(with_context["steps"][0]["args"], json!({"app": "foot"}));
    let on_sway = plan(
        &plugin,
        json!({"utterance": "open a terminal", "context": {"compositor": {"name": "sway"}}}),
    )
    .await;
    assert_eq!(
        on_sway["steps"],
        json!([]),
        "no niri actions on sway: {on_sway}"
    );
}

#[tokio::test]
async fn destructive_steps_ask_first_and_empty_plans_say_why() {
    let home = Home::new();
    std::fs::write(
        home.niri_config(),
        "binds {\n    Mod+Escape { toggle-keyboard-shortcuts-inhibit; }\n    \
         Mod+Shift+E hotkey-overlay-title=\"Leave the Session\" { quit; }\n}\n",
    )
    .expect("write config");
    let plugin = home.start().await;

    // Closing the focused window asks first; the runner binds the question to the step.
    for utterance in ["close this window", "Close it.", "kill this window"] {
        let result = plan(&plugin, json!({"utterance": utterance})).await;
        assert_eq!(result["rule"], "compositor", "{result}");
        assert_eq!(
            result["steps"],
            json!([{
                "op": "niri",
                "args": {"command": "close-window"},
                "provenance": "user",
                "confirm": true,
            }]),
            "{utterance}"
        );
    }
    // So does a binding of a destructive action; a harmless one does not ask.
    let result = plan(&plugin, json!({"utterance": "leave the session"})).await;
    assert_eq!(result["rule"], "niri_bind", "{result}");
    assert_eq!(result["steps"][0]["args"], json!({"command": "quit"}));
    assert_eq!(result["steps"][0]["confirm"], true, "{result}");
    let result = plan(&plugin, json!({"utterance": "exit fullscreen"})).await;
    assert_eq!(
        result["steps"][0]["args"],
        json!({"command": "fullscreen-window", "options": {"state": "off"}})
    );
    assert_eq!(result["steps"][0]["confirm"], false, "{result}");
    assert_eq!(
        step(&plugin, "put this window on workspace 4").await,
        niri(
            "compositor",
            json!({"command": "move-window-to-workspace", "args": [4]})
        )
    );

    // Empty plans say why.
    let message = |result: Value| {
        assert_eq!(result["steps"], json!([]), "{result}");
        assert!(result["rule"].is_null(), "{result}");
        result["message"].as_str().expect("message").to_owned()
    };
    let sway = json!({"compositor": {"name": "sway"}, "windows": [{"app_id": "foot"}]});
    assert_eq!(
        message(
            plan(
                &plugin,
                json!({"utterance": "toggle keyboard shortcuts inhibit", "context": sway})
            )
            .await
        ),
        "\"toggle keyboard shortcuts inhibit\" is one of your niri key bindings, but this session runs sway"
    );
    // A misheard name is the decision head's: "firefix" is Firefox, sure enough to act.
    let misheard = plan(
        &plugin,
        json!({"utterance": "switch to firefix", "context": sway}),
    )
    .await;
    assert_eq!(misheard["rule"], "decide", "{misheard}");
    assert_eq!(misheard["steps"][0]["op"], "ensure_app", "{misheard}");
    assert_eq!(misheard["steps"][0]["confirm"], false, "{misheard}");
    assert_eq!(
        message(
            plan(
                &plugin,
                json!({"utterance": "switch to zzyzx", "context": sway})
            )
            .await
        ),
        "no installed application or open window is called \"zzyzx\""
    );
    assert_eq!(
        message(
            plan(
                &plugin,
                json!({"utterance": "close kitty", "context": sway})
            )
            .await
        ),
        "no installed application or open window is called \"kitty\""
    );
    assert_eq!(
        message(plan(&plugin, json!({"utterance": "workspace -1"})).await),
        "focus-workspace needs a number from 1 to 255, not -1"
    );
    assert_eq!(
        message(plan(&plugin, json!({"utterance": "blorp"})).await),
        "no rule matched \"blorp\""
    );
}

#[tokio::test]
async fn a_broken_config_degrades_health_and_curated_phrases_go_on() {
    let home = Home::new();
    std::fs::write(
        home.niri_config(),
        "binds {\n    Mod+T { spawn \"foot\"; }\n    Mod+Q { close-window; \n",
    )
    .expect("write broken config");
    let plugin = home.start().await;

    let h = health(&plugin).await;
    assert_eq!(h["status"], "degraded", "{h}");
    let detail = h["detail"].as_str().expect("detail");
    let shown = home.niri_config().display().to_string();
    assert!(
        detail.contains(&format!("{shown}:")),
        "file named: {detail}"
    );
    let line: usize = detail
        .split(&format!("{shown}:"))
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a line number after the file in {detail}"));
    assert!((1..=4).contains(&line), "line {line} in {detail}");

    assert_eq!(
        step(&plugin, "workspace two").await,
        niri(
            "compositor",
            json!({"command": "focus-workspace", "args": [2]})
        )
    );
    assert_eq!(step(&plugin, "spawn foot").await, None);
    // The warning went to stderr, with the file.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stderr = plugin.stderr();
    assert!(
        stderr.contains("WARN") && stderr.contains(&shown),
        "{stderr}"
    );

    // Fixed: healthy again, the bindings plan.
    std::fs::write(home.niri_config(), CONFIG).expect("fix config");
    assert_eq!(
        step(&plugin, "spawn foot").await,
        niri("niri_bind", json!({"command": "spawn", "args": ["foot"]}))
    );
    assert_eq!(health(&plugin).await["status"], "ok");
}

#[tokio::test]
async fn no_config_is_fine_and_a_directory_is_a_problem() {
    let home = Home::new();
    let plugin = home.start().await;
    let h = health(&plugin).await;
    assert_eq!(h["status"], "ok", "{h}");
    assert!(
        h["detail"]
            .as_str()
            .unwrap_or("")
            .contains("no niri config"),
        "{h}"
    );
    assert_eq!(
        step(&plugin, "take a screenshot").await,
        niri("compositor", json!({"command": "screenshot"}))
    );
    drop(plugin);

    // A directory where the file should be cannot be read: degraded, never stuck.
    std::fs::create_dir_all(home.niri_config()).expect("mkdir in the way");
    let plugin = home.start().await;
    let h = health(&plugin).await;
    assert_eq!(h["status"], "degraded", "{h}");
    assert!(
        h["detail"]
            .as_str()
            .unwrap_or("")
            .contains("not a regular file"),
        "{h}"
    );
    assert!(step(&plugin, "next workspace").await.is_some());
}

#[tokio::test]
async fn hostile_input_gets_an_answer_and_the_plugin_keeps_serving() {
    let home = Home::new();
    let plugin = home.start().await;

    let huge = "workspace two ".repeat(20_000);
    let err = plugin
        .request("router.plan", json!({"utterance": huge}))
        .await
        .expect_err("too long");
    assert_eq!(err.code, -32602, "{err:?}");
    assert!(err.message.contains("at most"), "{}", err.message);

    for weird in [
        "\u{202e}owt ecapskrow\u{202c}",
        "work\u{200d}space \u{0661}",
        "ｗｏｒｋｓｐａｃｅ ２",
        "𝔴𝔬𝔯𝔨𝔰𝔭𝔞𝔠𝔢 𝟐",
        "e\u{301}\u{301}\u{301}\u{301} 🪟🪟🪟",
        "workspace \u{0}\u{7} two",
        "\u{fffd}\u{fffd}",
        "İSTANBUL workspace ǅ",
    ] {
        let result = plan(&plugin, json!({"utterance": weird})).await;
        assert!(result["steps"].is_array(), "{weird:?}: {result}");
    }

    for context in [
        json!("niri"),
        json!(42),
        json!([{"app_id": "foot"}]),
        json!({"windows": "foot"}),
        json!({"windows": [1, 2, 3]}),
        json!({"focused": {"app_id": 7}}),
        json!({"compositor": "niri"}),
        json!({"compositor": {"name": ["niri"]}}),
    ] {
        // A context of the wrong shape is no context: the plan is made without it, and says
        // so because "switch to" could have found a window in it.
        // (An app with neither a desktop entry nor a profile: "foot" has a profile now,
        // whose launch argv would start it.)
        let result = plan(
            &plugin,
            json!({"utterance": "switch to westonterm", "context": context}),
        )
        .await;
        assert_eq!(result["steps"], json!([]), "{context}: {result}");
        let message = result["message"].as_str().expect("message");
        assert!(
            message.contains("desktop context was not used") && message.contains("context"),
            "{context}: {message}"
        );
        let result = plan(
            &plugin,
            json!({"utterance": "workspace two", "context": context}),
        )
        .await;
        assert_eq!(
            result["steps"][0]["args"],
            json!({"command": "focus-workspace", "args": [2]}),
            "{context}: {result}"
        );
    }

    // Still serving, and a null context is no context.
    let result = plan(
        &plugin,
        json!({"utterance": "workspace two", "context": null}),
    )
    .await;
    assert_eq!(
        result["steps"][0]["args"],
        json!({"command": "focus-workspace", "args": [2]})
    );
    assert_eq!(health(&plugin).await["status"], "ok");
    let status = plugin
        .shutdown(Duration::from_secs(5))
        .await
        .expect("exits");
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn a_deeply_nested_config_is_refused_and_the_plugin_keeps_serving() {
    let home = Home::new();
    std::fs::write(home.niri_config(), "a {".repeat(1000)).expect("write config");
    // The handshake (hello, describe, health) is answered: no stack overflow.
    let plugin = home.start().await;
    let h = health(&plugin).await;
    assert_eq!(h["status"], "degraded", "{h}");
    let detail = h["detail"].as_str().expect("detail");
    let shown = home.niri_config().display().to_string();
    assert!(
        detail.contains(&format!("{shown}:1:")) && detail.contains("nested more than 32"),
        "{detail}"
    );
    assert_eq!(
        step(&plugin, "workspace 2").await,
        niri(
            "compositor",
            json!({"command": "focus-workspace", "args": [2]})
        )
    );
    drop(plugin);

    // Balanced, one level a line: the line where the limit is passed.
    let text = format!("{}{}", "a {\n".repeat(300), "}\n".repeat(300));
    std::fs::write(home.niri_config(), text).expect("write config");
    let plugin = home.start().await;
    let detail = health(&plugin).await["detail"].to_string();
    assert!(detail.contains(&format!("{shown}:33:")), "{detail}");
    assert!(step(&plugin, "next workspace").await.is_some());
}

#[tokio::test]
async fn an_oversized_config_is_refused_and_the_handshake_does_not_wait() {
    let home = Home::new();
    let line = "    Mod+1 { focus-workspace 1; }\n";
    let text = format!("binds {{\n{}}}\n", line.repeat(1024 * 1024 / line.len()));
    std::fs::write(home.niri_config(), text).expect("write config");
    let started = std::time::Instant::now();
    let plugin = home.start().await;
    // Generous: what matters is that it answers at all, not how fast.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let h = health(&plugin).await;
    assert_eq!(h["status"], "degraded", "{h}");
    let detail = h["detail"].as_str().expect("detail");
    assert!(
        detail.contains("larger than") && detail.contains("a niri config is usually under 50 KB"),
        "{detail}"
    );
    assert_eq!(
        step(&plugin, "workspace 2").await,
        niri(
            "compositor",
            json!({"command": "focus-workspace", "args": [2]})
        )
    );
}

#[tokio::test]
async fn odd_contexts_still_plan() {
    let home = Home::new();
    let plugin = home.start().await;
    let windows: Vec<Value> = (0..5000)
        .map(|i| json!({"id": i, "app_id": format!("app{i}"), "title": "t"}))
        .collect();
    let result = plan(
        &plugin,
        json!({"utterance": "switch to app17", "context": {"windows": windows}}),
    )
    .await;
    assert_eq!(
        result["steps"][0]["args"],
        json!({"app": "app17"}),
        "{result}"
    );
    let result = plan(
        &plugin,
        json!({"utterance": "workspace 2", "context": {"windows": windows}}),
    )
    .await;
    assert_eq!(
        result["steps"][0]["args"],
        json!({"command": "focus-workspace", "args": [2]})
    );
    for context in [json!("a string"), json!({"compositor": 7})] {
        let result = plan(
            &plugin,
            json!({"utterance": "workspace 2", "context": context}),
        )
        .await;
        assert_eq!(
            result["steps"][0]["args"],
            json!({"command": "focus-workspace", "args": [2]}),
            "{context}"
        );
        assert!(
            !result["message"].to_string().contains("context"),
            "{result}"
        );
    }
    // A bad utterance is still invalid params, whatever the context.
    let err = plugin
        .request("router.plan", json!({"utterance": 7, "context": "x"}))
        .await
        .expect_err("refused");
    assert_eq!(err.code, -32602, "{err:?}");
}

#[tokio::test]
async fn a_large_config_is_read_in_the_background() {
    let home = Home::new();
    let mut text = String::from(
        "binds {\n    Mod+Z hotkey-overlay-title=\"Feed the Zebra\" { spawn \"zebra\"; }\n",
    );
    let mut i = 0;
    while text.len() < 500 * 1024 {
        text.push_str(&format!(
            "    Mod+F{i} {{ focus-workspace {}; }}\n",
            i % 200 + 1
        ));
        i += 1;
    }
    text.push_str("}\n");
    std::fs::write(home.niri_config(), text).expect("write config");
    let plugin = home.start().await;
    // The curated phrases plan at once, whether or not the read is done.
    assert!(step(&plugin, "workspace 2").await.is_some());
    // The binding arrives once the read is done.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        if step(&plugin, "feed the zebra").await.is_some() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never read");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(health(&plugin).await["status"], "ok");
}
