//! `utter-compositor` against a real sway: a headless sway 1.7 (wlroots headless backend,
//! pixman renderer), real `foot` windows, the real plugin binary over stdio, and every
//! effect read back from sway itself with `swaymsg`.
//!
//! sway refuses to run as root, so when the tests run as root sway and its windows run as
//! the user `nobody` (65534) through `setpriv`; root then talks to the socket directly.
//! Debian packages these tests need: sway, foot, util-linux (setpriv). When sway cannot
//! start, the tests fail and say why.

use serde_json::{Value, json};
use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;
use utter_protocol::ErrorObject;
use utter_protocol::testkit::{SpawnOptions, TestPlugin};

mod sway_session;

use sway_session::{SwaySession, which};

async fn start_plugin(swaysock: Option<&Path>) -> TestPlugin {
    start_plugin_with(swaysock, Vec::new()).await
}

async fn start_plugin_with(
    swaysock: Option<&Path>,
    extra: Vec<(OsString, OsString)>,
) -> TestPlugin {
    let mut env: Vec<(OsString, OsString)> = vec![
        ("NIRI_SOCKET".into(), "".into()),
        ("HYPRLAND_INSTANCE_SIGNATURE".into(), "".into()),
        ("I3SOCK".into(), "".into()),
        ("SWAYSOCK".into(), "".into()),
    ];
    if let Some(sock) = swaysock {
        env.push(("SWAYSOCK".into(), sock.into()));
    }
    env.extend(extra);
    let options = SpawnOptions {
        env,
        timeout: Duration::from_secs(15),
        ..Default::default()
    };
    TestPlugin::start(&[env!("CARGO_BIN_EXE_utter-compositor").into()], options)
        .await
        .expect("the plugin starts and passes the handshake")
}

async fn invoke(
    plugin: &TestPlugin,
    op: &str,
    args: Value,
    dry_run: bool,
) -> Result<Value, ErrorObject> {
    plugin
        .request(
            "action.invoke",
            json!({"op": op, "args": args, "provenance": "user", "dry_run": dry_run}),
        )
        .await
}

async fn niri(plugin: &TestPlugin, command: &str, args: Value) -> Value {
    match invoke(
        plugin,
        "niri",
        json!({"command": command, "args": args}),
        false,
    )
    .await
    {
        Ok(v) => {
            assert_eq!(v["ok"], true, "{command}: {v}");
            v
        }
        Err(e) => panic!(
            "niri {command} {args} failed: {e}; stderr:\n{}",
            plugin.stderr()
        ),
    }
}

fn ok(result: Result<Value, ErrorObject>, what: &str) -> Value {
    match result {
        Ok(v) => {
            assert_eq!(v["ok"], true, "{what}: {v}");
            v
        }
        Err(e) => panic!("{what} failed: {e}"),
    }
}

fn err(result: Result<Value, ErrorObject>, what: &str) -> ErrorObject {
    match result {
        Ok(v) => panic!("{what} should fail, got {v}"),
        Err(e) => e,
    }
}

#[tokio::test]
async fn without_a_compositor_the_plugin_starts_degraded_and_says_why() {
    let plugin = start_plugin(None).await;
    let health = plugin
        .request("plugin.health", json!({}))
        .await
        .expect("health");
    assert_eq!(health["status"], "degraded", "{health}");
    let detail = health["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("NIRI_SOCKET, HYPRLAND_INSTANCE_SIGNATURE, SWAYSOCK, I3SOCK"),
        "{detail}"
    );

    let e = plugin
        .request("context.snapshot", json!({}))
        .await
        .expect_err("no compositor");
    assert_eq!(e.code, -32000);
    assert!(e.message.contains("SWAYSOCK"), "{}", e.message);

    let caps = plugin
        .request("action.capabilities", json!({}))
        .await
        .expect("capabilities");
    assert_eq!(caps["ops"].as_array().map(Vec::len), Some(4));

    let e = err(
        invoke(
            &plugin,
            "niri",
            json!({"command": "focus-workspace", "args": [2]}),
            false,
        )
        .await,
        "niri without a compositor",
    );
    assert_eq!(e.code, -32000);
    // Bad arguments are still bad arguments.
    let e = err(
        invoke(
            &plugin,
            "niri",
            json!({"command": "focus-workspace"}),
            false,
        )
        .await,
        "no args",
    );
    assert_eq!(e.code, -32602);
}

#[tokio::test]
async fn the_plugin_drives_real_sway() {
    let mut sway = SwaySession::start();
    sway.open_window("alpha");
    sway.open_window("beta");
    // A desktop entry for ensure_app {desktop_id}, found through XDG_DATA_HOME.
    let data = tempfile::tempdir().expect("data dir");
    std::fs::create_dir_all(data.path().join("applications")).expect("applications dir");
    std::fs::write(
        data.path().join("applications/utter-test-delta.desktop"),
        "[Desktop Entry]\nType=Application\nName=Delta Test\nExec=foot --app-id delta\n",
    )
    .expect("desktop entry");
    let plugin = start_plugin_with(
        Some(&sway.socket),
        vec![("XDG_DATA_HOME".into(), data.path().into())],
    )
    .await;

    // Health and the handshake.
    let health = plugin
        .request("plugin.health", json!({}))
        .await
        .expect("health");
    assert_eq!(health["status"], "ok", "{health}");
    assert!(
        health["detail"]
            .as_str()
            .unwrap_or_default()
            .starts_with("connected to sway 1."),
        "{health}"
    );
    let describe = plugin
        .request("plugin.describe", json!({}))
        .await
        .expect("describe");
    assert!(
        describe["methods"].to_string().contains("context.snapshot"),
        "{describe}"
    );

    // The snapshot lists both windows and the focused one, as sway does.
    let snapshot = plugin
        .request("context.snapshot", json!({}))
        .await
        .expect("snapshot");
    assert_eq!(snapshot["compositor"]["name"], "sway");
    let apps: Vec<&str> = snapshot["windows"]
        .as_array()
        .expect("windows")
        .iter()
        .filter_map(|w| w["app_id"].as_str())
        .collect();
    assert!(
        apps.contains(&"alpha") && apps.contains(&"beta"),
        "{snapshot}"
    );
    assert_eq!(sway.focused_app().as_deref(), Some("beta"));
    assert_eq!(snapshot["focused"]["app_id"], "beta", "{snapshot}");
    assert_eq!(snapshot["focused"]["workspace"], "1", "{snapshot}");
    assert_eq!(snapshot["provenance"]["title"], "title");
    assert_eq!(snapshot["outputs"][0]["name"], "HEADLESS-1", "{snapshot}");

    // A dry run says what it would send and sends nothing.
    let dry = ok(
        invoke(
            &plugin,
            "niri",
            json!({"command": "focus-workspace", "args": [2]}),
            true,
        )
        .await,
        "dry run",
    );
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["sent"], "workspace number 2");
    assert_eq!(sway.focused_workspace(), "1");

    // focus-workspace 2 really changes the focused workspace.
    let r = niri(&plugin, "focus-workspace", json!([2])).await;
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(r["sent"], "workspace number 2");
    assert_eq!(r["compositor"], "sway");
    assert_eq!(sway.focused_workspace(), "2");
    let r = niri(&plugin, "focus-workspace", json!(["1"])).await;
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(sway.focused_workspace(), "1");

    // move-window-to-workspace 3 moves the focused window (beta), and the focus follows.
    let r = niri(&plugin, "move-window-to-workspace", json!([3])).await;
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(r["window"]["app_id"], "beta", "{r}");
    assert_eq!(sway.window("beta").expect("beta").1, "3");
    assert_eq!(sway.window("alpha").expect("alpha").1, "1");
    assert_eq!(sway.focused_workspace(), "3");

    // fullscreen-window flips the focused window's fullscreen state, both ways.
    let r = niri(&plugin, "fullscreen-window", json!([])).await;
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(r["window"]["fullscreen"], true, "{r}");
    assert_eq!(sway.window("beta").expect("beta").0["fullscreen_mode"], 1);
    let r = niri(&plugin, "fullscreen-window", json!([])).await;
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(sway.window("beta").expect("beta").0["fullscreen_mode"], 0);

    // focus_app focuses the chosen app's window (on another workspace).
    let r = ok(
        invoke(&plugin, "focus_app", json!({"app": "alpha"}), false).await,
        "focus_app",
    );
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(r["window"]["app_id"], "alpha");
    assert_eq!(sway.focused_app().as_deref(), Some("alpha"));
    assert_eq!(sway.focused_workspace(), "1");
    // ...matching the app name ignoring case too.
    let r = ok(
        invoke(&plugin, "focus_app", json!({"app": "BETA"}), false).await,
        "focus_app BETA",
    );
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(sway.focused_app().as_deref(), Some("beta"));
    let e = err(
        invoke(&plugin, "focus_app", json!({"app": "delta"}), false).await,
        "focus_app delta",
    );
    assert_eq!(e.code, -32000);
    assert!(
        e.message.contains("no window of delta is open"),
        "{}",
        e.message
    );

    // ensure_app focuses an existing window...
    let r = ok(
        invoke(
            &plugin,
            "ensure_app",
            json!({"app": "alpha", "argv": ["false"]}),
            false,
        )
        .await,
        "ensure_app alpha",
    );
    assert_eq!(r["launched"], false, "{r}");
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(sway.focused_app().as_deref(), Some("alpha"));

    // ...and launches a missing one through sway's exec, waiting for its focused window.
    let dry = ok(
        invoke(
            &plugin,
            "ensure_app",
            json!({"app": "gamma", "argv": ["foot", "--app-id", "gamma"]}),
            true,
        )
        .await,
        "ensure_app gamma dry run",
    );
    assert_eq!(dry["sent"], "exec exec 'foot' '--app-id' 'gamma'", "{dry}");
    assert!(
        dry.get("verified").is_none(),
        "a dry run verifies nothing: {dry}"
    );
    assert!(sway.window("gamma").is_none());
    let r = ok(
        invoke(
            &plugin,
            "ensure_app",
            json!({"app": "gamma", "argv": ["foot", "--app-id", "gamma"]}),
            false,
        )
        .await,
        "ensure_app gamma",
    );
    assert_eq!(r["launched"], true, "{r}");
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(r["window"]["app_id"], "gamma", "{r}");
    assert!(sway.window("gamma").is_some());
    assert_eq!(sway.focused_app().as_deref(), Some("gamma"));
    // A desktop id is resolved through its entry and started through the compositor too.
    let r = ok(
        invoke(
            &plugin,
            "ensure_app",
            json!({"app": "delta", "desktop_id": "utter-test-delta"}),
            false,
        )
        .await,
        "ensure_app delta by desktop id",
    );
    assert_eq!(r["launched"], true, "{r}");
    assert_eq!(r["verified"], true, "{r}");
    let foot = which("foot").expect("foot");
    assert_eq!(
        r["sent"],
        format!("exec exec '{}' '--app-id' 'delta'", foot.display()),
        "{r}"
    );
    assert_eq!(sway.focused_app().as_deref(), Some("delta"));
    let r = ok(
        invoke(&plugin, "close_app", json!({"app": "delta"}), false).await,
        "close delta",
    );
    assert_eq!(r["verified"], true, "{r}");
    let e = err(
        invoke(&plugin, "ensure_app", json!({"app": "delta"}), false).await,
        "ensure_app delta",
    );
    assert_eq!(e.code, -32602);
    assert!(e.message.contains("argv"), "{}", e.message);

    // close_app: a dry run closes nothing, then the window really goes.
    let dry = ok(
        invoke(&plugin, "close_app", json!({"app": "gamma"}), true).await,
        "close dry run",
    );
    assert!(
        dry["sent"].as_str().unwrap_or_default().ends_with("] kill"),
        "{dry}"
    );
    assert!(sway.window("gamma").is_some());
    let r = ok(
        invoke(&plugin, "close_app", json!({"app": "gamma"}), false).await,
        "close_app",
    );
    assert_eq!(r["verified"], true, "{r}");
    assert!(
        r["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("no other gamma window"),
        "{r}"
    );
    assert!(sway.window("gamma").is_none(), "gamma is still open");
    assert!(sway.window("alpha").is_some() && sway.window("beta").is_some());

    // The snapshot followed all of it.
    let snapshot = plugin
        .request("context.snapshot", json!({}))
        .await
        .expect("snapshot");
    let apps: Vec<&str> = snapshot["windows"]
        .as_array()
        .expect("windows")
        .iter()
        .filter_map(|w| w["app_id"].as_str())
        .collect();
    assert!(!apps.contains(&"gamma"), "{snapshot}");

    // A niri-only action is a clear error on sway, never a silent no-op.
    let e = err(
        invoke(
            &plugin,
            "niri",
            json!({"command": "toggle-overview"}),
            false,
        )
        .await,
        "toggle-overview",
    );
    assert_eq!(e.code, -32000);
    assert!(
        e.message.starts_with("sway cannot do toggle-overview"),
        "{}",
        e.message
    );

    // sway's own refusal is passed on in its words.
    let e = err(
        invoke(
            &plugin,
            "niri",
            json!({"command": "focus-monitor", "args": ["NOPE-9"]}),
            false,
        )
        .await,
        "focus-monitor NOPE-9",
    );
    assert_eq!(e.code, -32000, "{}", e.message);
    assert!(e.message.contains("sway refused"), "{}", e.message);
}

async fn niri_with(plugin: &TestPlugin, command: &str, args: Value, options: Value) -> Value {
    ok(
        invoke(
            plugin,
            "niri",
            json!({"command": command, "args": args, "options": options}),
            false,
        )
        .await,
        &format!("niri {command} {args} {options}"),
    )
}

#[tokio::test]
async fn spawn_window_states_and_monitor_limits_on_real_sway() {
    let mut sway = SwaySession::start();
    sway.open_window("alpha");
    let plugin = start_plugin(Some(&sway.socket)).await;

    // spawn, as the rules router plans it from a niri bind, starts foot through sway's
    // exec and is verified by its new window.
    let r = niri(&plugin, "spawn", json!(["foot", "--app-id", "spawned"])).await;
    assert_eq!(r["sent"], "exec exec 'foot' '--app-id' 'spawned'", "{r}");
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(r["window"]["app_id"], "spawned", "{r}");
    assert!(sway.window("spawned").is_some());
    sway_session::poll(Duration::from_secs(5), || {
        (sway.focused_app().as_deref() == Some("spawned")).then_some(())
    })
    .expect("the spawned window has the focus");
    let fullscreen =
        |sway: &SwaySession| sway.window("spawned").expect("spawned").0["fullscreen_mode"].clone();

    // Fullscreen by state: "off" on a normal window leaves it alone, "on" twice is one
    // fullscreen, "off" ends it.
    let r = niri_with(
        &plugin,
        "fullscreen-window",
        json!([]),
        json!({"state": "off"}),
    )
    .await;
    assert_eq!(r["sent"], "fullscreen disable", "{r}");
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(r["window"]["fullscreen"], false, "{r}");
    assert_eq!(fullscreen(&sway), 0);
    for _ in 0..2 {
        let r = niri_with(
            &plugin,
            "fullscreen-window",
            json!([]),
            json!({"state": "on"}),
        )
        .await;
        assert_eq!(r["sent"], "fullscreen enable", "{r}");
        assert_eq!(r["verified"], true, "{r}");
        assert_eq!(r["window"]["fullscreen"], true, "{r}");
        assert_eq!(fullscreen(&sway), 1);
    }
    let r = niri_with(
        &plugin,
        "fullscreen-window",
        json!([]),
        json!({"state": "off"}),
    )
    .await;
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(fullscreen(&sway), 0);

    // Floating, verified through the window's floating field.
    let node_type = |sway: &SwaySession| sway.window("spawned").expect("spawned").0["type"].clone();
    for _ in 0..2 {
        let r = niri(&plugin, "move-window-to-floating", json!([])).await;
        assert_eq!(r["sent"], "floating enable", "{r}");
        assert_eq!(r["verified"], true, "{r}");
        assert_eq!(r["window"]["floating"], true, "{r}");
        assert_eq!(node_type(&sway), "floating_con");
    }
    let r = niri(&plugin, "move-window-to-tiling", json!([])).await;
    assert_eq!(r["sent"], "floating disable", "{r}");
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(r["window"]["floating"], false, "{r}");
    assert_eq!(node_type(&sway), "con");
    let r = niri(&plugin, "toggle-window-floating", json!([])).await;
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(r["window"]["floating"], true, "{r}");
    let r = niri(&plugin, "toggle-window-floating", json!([])).await;
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(node_type(&sway), "con");
    let snapshot = plugin
        .request("context.snapshot", json!({}))
        .await
        .expect("snapshot");
    assert_eq!(snapshot["focused"]["floating"], false, "{snapshot}");
    assert_eq!(snapshot["outputs"][0]["x"], 0, "{snapshot}");
    assert_eq!(snapshot["outputs"][0]["y"], 0, "{snapshot}");

    // One output: every monitor direction is a clear error, at once, with nothing sent.
    let workspace_before = sway.focused_workspace();
    for (command, message) in [
        (
            "focus-monitor-right",
            "there is no monitor to the right of HEADLESS-1",
        ),
        (
            "focus-monitor-left",
            "there is no monitor to the left of HEADLESS-1",
        ),
        (
            "move-window-to-monitor-left",
            "there is no monitor to the left of HEADLESS-1",
        ),
        (
            "move-column-to-monitor-down",
            "there is no monitor below HEADLESS-1",
        ),
        (
            "focus-monitor-next",
            "there is no monitor other than HEADLESS-1",
        ),
    ] {
        let started = std::time::Instant::now();
        for dry_run in [false, true] {
            let e = err(
                invoke(&plugin, "niri", json!({"command": command}), dry_run).await,
                command,
            );
            assert_eq!(e.code, -32000, "{command}: {}", e.message);
            assert_eq!(e.message, message);
            assert_eq!(
                e.data.as_ref().map(|d| d["output"].clone()),
                Some(json!("HEADLESS-1"))
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{command} took {:?}",
            started.elapsed()
        );
    }
    assert_eq!(sway.focused_workspace(), workspace_before);
    assert_eq!(sway.window("spawned").expect("spawned").1, workspace_before);

    // What sway cannot do: a short message with a hint, the list in data.
    let e = err(
        invoke(
            &plugin,
            "niri",
            json!({"command": "maximize-column"}),
            false,
        )
        .await,
        "maximize-column",
    );
    assert_eq!(e.code, -32000);
    assert_eq!(
        e.message,
        "sway cannot do maximize-column (it exists only in niri); try fullscreen-window"
    );
    let data = e.data.expect("data");
    let supported: Vec<&str> = data["supported"]
        .as_array()
        .expect("data.supported")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(supported.contains(&"fullscreen-window"), "{data}");
    assert!(supported.contains(&"spawn"), "{data}");
    assert!(!supported.contains(&"maximize-column"), "{data}");
    assert_eq!(data["hint"], "fullscreen-window");
    let e = err(
        invoke(
            &plugin,
            "niri",
            json!({"command": "toggle-overview"}),
            false,
        )
        .await,
        "toggle-overview",
    );
    assert_eq!(
        e.message,
        "sway cannot do toggle-overview (it exists only in niri)"
    );

    // A dry run verifies nothing, so it says nothing about it.
    for (command, options) in [
        ("focus-workspace", json!({})),
        ("fullscreen-window", json!({"state": "on"})),
        ("move-window-to-floating", json!({})),
    ] {
        let args = if command == "focus-workspace" {
            json!([2])
        } else {
            json!([])
        };
        let dry = ok(
            invoke(
                &plugin,
                "niri",
                json!({"command": command, "args": args, "options": options}),
                true,
            )
            .await,
            command,
        );
        assert_eq!(dry["dry_run"], true, "{dry}");
        assert!(dry.get("verified").is_none(), "{dry}");
        assert!(
            dry["detail"]
                .as_str()
                .unwrap_or_default()
                .starts_with("would send"),
            "{dry}"
        );
    }
    let dry = ok(
        invoke(
            &plugin,
            "niri",
            json!({"command": "spawn", "args": ["foot", "--app-id", "never"]}),
            true,
        )
        .await,
        "spawn dry run",
    );
    assert!(dry.get("verified").is_none(), "{dry}");
    let dry = ok(
        invoke(&plugin, "focus_app", json!({"app": "alpha"}), true).await,
        "focus_app dry run",
    );
    assert!(dry.get("verified").is_none(), "{dry}");
    assert_eq!(fullscreen(&sway), 0);
    assert_eq!(node_type(&sway), "con");
    assert!(sway.window("never").is_none());

    // spawn-sh runs a shell line; sway's command separators inside it stay the shell's.
    let r = niri(&plugin, "spawn-sh", json!(["true; foot --app-id from-sh"])).await;
    assert_eq!(r["sent"], "exec sh -c 'true; foot --app-id from-sh'", "{r}");
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(r["window"]["app_id"], "from-sh", "{r}");
    assert!(
        sway.window("spawned").is_some(),
        "sway ran no `kill` of its own"
    );

    // A program that opens no window: accepted, honestly not verified.
    let r = niri(&plugin, "spawn", json!(["true"])).await;
    assert_eq!(r["verified"], false, "{r}");
    assert!(
        r["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("no new window appeared within 3 s"),
        "{r}"
    );
}

#[tokio::test]
async fn hostile_arguments_are_refused_and_the_plugin_keeps_serving() {
    let mut sway = SwaySession::start();
    sway.open_window("alpha");
    let plugin = start_plugin(Some(&sway.socket)).await;
    let workspaces_before = sway.msg(&["-t", "get_workspaces"]).as_array().map(Vec::len);

    let huge = "x".repeat(200_000);
    let cases = [
        json!({"op": "niri", "args": [1, 2]}),
        json!({"op": "niri", "args": "focus-workspace"}),
        json!({"op": "niri", "args": {}}),
        json!({"op": "niri", "args": {"command": 5}}),
        json!({"op": "niri", "args": {"command": huge}}),
        json!({"op": "niri", "args": {"command": "focus-workspace", "args": [huge]}}),
        json!({"op": "niri", "args": {"command": "focus-workspace", "args": [{"Index": 1}]}}),
        json!({"op": "niri", "args": {"command": "focus-workspace", "args": [1, 2]}}),
        json!({"op": "niri", "args": {"command": "focus-workspace", "args": [256]}}),
        json!({"op": "niri", "args": {"command": "focus-workspace", "args": ["1; exec touch /tmp/pwned"]}}),
        json!({"op": "niri", "args": {"command": "focus-workspace", "args": ["a\"; kill"]}}),
        json!({"op": "niri", "args": {"command": "focus-workspace", "args": 2}}),
        json!({"op": "niri", "args": {"command": "move-window-to-workspace", "args": [2], "options": {"focus": "maybe"}}}),
        json!({"op": "niri", "args": {"command": "move-window-to-workspace", "args": [2], "options": []}}),
        json!({"op": "niri", "args": {"command": "set-column-width", "args": ["lots"]}}),
        json!({"op": "niri", "args": {"command": "focus-workspac"}}),
        json!({"op": "niri", "args": {"command": "focus-workspace", "args": [2], "extra": true}}),
        json!({"op": "focus_app", "args": {"app": huge}}),
        json!({"op": "focus_app", "args": {"app": 7}}),
        json!({"op": "focus_app", "args": {"app": "alpha", "window_id": -1}}),
        json!({"op": "ensure_app", "args": {"app": "x", "argv": []}}),
        json!({"op": "ensure_app", "args": {"app": "x", "argv": "foot"}}),
        json!({"op": "ensure_app", "args": {"app": "x", "argv": ["sh", "-c", "it's"]}}),
        json!({"op": "ensure_app", "args": {"app": "x", "argv": ["foot\n"]}}),
        json!({"op": "close_app", "args": {"app": ["alpha"]}}),
        // spawn: strings only, bounded, and nothing that could leave sway's quoting.
        json!({"op": "niri", "args": {"command": "spawn"}}),
        json!({"op": "niri", "args": {"command": "spawn", "args": []}}),
        json!({"op": "niri", "args": {"command": "spawn", "args": [7]}}),
        json!({"op": "niri", "args": {"command": "spawn", "args": ["foot", {"x": 1}]}}),
        json!({"op": "niri", "args": {"command": "spawn", "args": ["foot", huge]}}),
        json!({"op": "niri", "args": {"command": "spawn", "args": vec!["a"; 80]}}),
        json!({"op": "niri", "args": {"command": "spawn", "args": ["foot\u{0}"]}}),
        json!({"op": "niri", "args": {"command": "spawn", "args": ["foot\nkill"]}}),
        json!({"op": "niri", "args": {"command": "spawn", "args": ["foot", "x' ; kill ; '"]}}),
        json!({"op": "niri", "args": {"command": "spawn", "args": ["foot", "a\\", "; kill ; exec touch /tmp/pwned"]}}),
        json!({"op": "niri", "args": {"command": "spawn", "args": ["--kill"]}}),
        json!({"op": "niri", "args": {"command": "spawn-sh", "args": ["echo 'x'; kill"]}}),
        json!({"op": "niri", "args": {"command": "spawn-sh", "args": ["a\\; kill"]}}),
        json!({"op": "niri", "args": {"command": "spawn-sh", "args": ["a", "b"]}}),
        json!({"op": "niri", "args": {"command": "spawn-sh", "args": ["touch /tmp/pwned\nkill"]}}),
        json!({"op": "niri", "args": {"command": "fullscreen-window", "options": {"state": "maybe"}}}),
        json!({"op": "niri", "args": {"command": "fullscreen-window", "options": {"state": "on; kill"}}}),
        json!({"op": "niri", "args": {"command": "fullscreen-window", "options": {"state": 1}}}),
        json!({"op": "niri", "args": {"command": "fullscreen-window", "options": {"state": huge}}}),
        json!({"op": "close_app", "args": null, "dry_run": 1}),
    ];
    for case in cases {
        let shown: String = case.to_string().chars().take(120).collect();
        let e = plugin
            .request("action.invoke", case)
            .await
            .expect_err(&format!("{shown} should be refused"));
        assert_eq!(e.code, -32602, "{shown}: {}", e.message);
        assert!(
            e.message.len() < 2000,
            "{shown}: a {} byte message",
            e.message.len()
        );
    }
    let e = plugin
        .request(
            "action.invoke",
            json!({"op": "niri", "args": {"command": "focus-workspac"}}),
        )
        .await
        .expect_err("unknown command");
    assert!(
        e.message.contains("did you mean") && e.message.contains("focus-workspace"),
        "{}",
        e.message
    );
    let e = plugin
        .request(
            "action.invoke",
            json!({"op": "niri", "args": {"command": "focus-workspace", "args": []}}),
        )
        .await
        .expect_err("missing argument");
    assert!(e.message.contains("<reference: workspace"), "{}", e.message);
    let e = plugin
        .request("action.invoke", json!({"op": "teleport", "args": {}}))
        .await
        .expect_err("unknown op");
    assert_eq!(e.code, -32601);

    // Nothing happened to sway, and the plugin still serves.
    assert!(!Path::new("/tmp/pwned").exists());
    assert_eq!(
        sway.msg(&["-t", "get_workspaces"]).as_array().map(Vec::len),
        workspaces_before
    );
    assert_eq!(sway.focused_workspace(), "1");
    let snapshot = plugin
        .request("context.snapshot", json!({}))
        .await
        .expect("snapshot after abuse");
    assert_eq!(snapshot["focused"]["app_id"], "alpha", "{snapshot}");
    let health = plugin
        .request("plugin.health", json!({}))
        .await
        .expect("health");
    assert_eq!(health["status"], "ok");
}

#[tokio::test]
async fn a_dead_sway_is_reported_not_served_as_connected() {
    let session = SwaySession::start();
    let plugin = start_plugin(Some(&session.socket)).await;
    let snapshot = plugin
        .request("context.snapshot", json!({}))
        .await
        .expect("snapshot while sway lives");
    assert_eq!(snapshot["compositor"]["connected"], true, "{snapshot}");
    drop(session);

    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let error = loop {
        match plugin.request("context.snapshot", json!({})).await {
            Ok(s) if s["compositor"]["connected"] == false => {}
            Ok(s) => assert_eq!(s["compositor"]["connected"], true),
            Err(e) => break e,
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the snapshot kept being served after sway died"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(error.code, -32000);
    assert!(
        error.message.contains("lost the connection to sway"),
        "{}",
        error.message
    );
    let health = plugin
        .request("plugin.health", json!({}))
        .await
        .expect("health");
    assert_eq!(health["status"], "degraded", "{health}");
    let e = err(
        invoke(&plugin, "focus_app", json!({"app": "foot"}), true).await,
        "an action on a dead sway",
    );
    assert_eq!(e.code, -32000);
    assert!(e.message.contains("reconnecting"), "{}", e.message);
}

/// A program that is not installed is a failure before anything is sent (issue 30): sway
/// would only log `exec: firefox: not found`, and the step would read as a slow start. The
/// dry run says the same; a coding agent inside a terminal's argv is looked up too.
#[tokio::test]
async fn starting_a_program_that_is_not_installed_fails_and_says_what_to_install() {
    let sway = SwaySession::start();
    let plugin = start_plugin(Some(&sway.socket)).await;
    let windows_before = sway.views().len();
    for dry_run in [true, false] {
        let e = plugin
            .request(
                "action.invoke",
                json!({"op": "ensure_app", "dry_run": dry_run,
                       "args": {"app": "firefox", "argv": ["no-such-browser-utter"]}}),
            )
            .await
            .expect_err("not installed");
        assert_eq!(e.code, -32000, "{}", e.message);
        assert!(
            e.message.contains("no-such-browser-utter is not installed")
                && e.message.contains("apt install"),
            "{}",
            e.message
        );
        let e = plugin
            .request(
                "action.invoke",
                json!({"op": "niri", "dry_run": dry_run,
                       "args": {"command": "spawn", "args": ["foot", "-e", "no-such-agent-utter"]}}),
            )
            .await
            .expect_err("the agent is not installed");
        assert!(
            e.message.contains("no-such-agent-utter is not installed"),
            "{}",
            e.message
        );
    }
    // An installed one is found (a dry run: nothing starts).
    let ok = plugin
        .request(
            "action.invoke",
            json!({"op": "ensure_app", "dry_run": true, "args": {"app": "nothing-open", "argv": ["foot"]}}),
        )
        .await
        .expect("foot is installed");
    assert_eq!(ok["ok"], true, "{ok}");
    assert_eq!(sway.views().len(), windows_before, "nothing was started");
}

/// sway has no screenshot action: "take a screenshot" (niri's screenshot-screen) is taken
/// with grim into ~/Pictures/Screenshots and read back as a PNG (issue 30); a dry run only
/// says where it would go.
#[tokio::test]
async fn screenshots_on_sway_are_taken_with_grim_and_checked() {
    let mut sway = SwaySession::start();
    sway.open_window("alpha");
    let home = tempfile::tempdir().expect("home");
    let runtime = sway.runtime_dir().to_path_buf();
    let plugin = start_plugin_with(
        Some(&sway.socket),
        vec![
            ("HOME".into(), home.path().into()),
            ("XDG_RUNTIME_DIR".into(), runtime.into()),
            ("WAYLAND_DISPLAY".into(), "wayland-1".into()),
        ],
    )
    .await;
    let dir = home.path().join("Pictures/Screenshots");
    let dry = plugin
        .request(
            "action.invoke",
            json!({"op": "niri", "dry_run": true, "args": {"command": "screenshot-screen"}}),
        )
        .await
        .expect("a dry run");
    assert_eq!(dry["tool"], "grim", "{dry}");
    assert!(!dir.exists(), "a dry run takes nothing");
    for command in ["screenshot-screen", "screenshot-window", "screenshot"] {
        let taken = plugin
            .request(
                "action.invoke",
                json!({"op": "niri", "args": {"command": command}}),
            )
            .await
            .unwrap_or_else(|e| panic!("{command}: {}", e.message));
        assert_eq!(taken["verified"], true, "{command}: {taken}");
        let path = taken["path"].as_str().expect("a path");
        assert!(path.starts_with(&dir.display().to_string()), "{path}");
        let bytes = std::fs::read(path).expect("the screenshot file");
        assert!(bytes.starts_with(b"\x89PNG"), "{command}: not a PNG");
    }
    // Each got a file of its own, even within one second.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 3);
}
