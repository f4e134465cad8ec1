//! The in-app rules as the runner sees them: the real `utter-rules` binary over stdio, with
//! a private home (no installed application, no niri config of this machine), planning
//! typing, key chords, scrolling and clicks, and leaving the earlier rules' phrases alone.

use utter_protocol::serde_json::{Value, json};
use utter_protocol::testkit::TestPlugin;

mod common;

async fn start(home: &tempfile::TempDir) -> TestPlugin {
    common::start_router(home, None).await
}

async fn plan(plugin: &TestPlugin, params: Value) -> Value {
    plugin
        .request("router.plan", params.clone())
        .await
        .unwrap_or_else(|e| panic!("router.plan {params} failed: {e:?}"))
}

#[tokio::test]
async fn in_app_steps_through_the_plugin() {
    let home = tempfile::tempdir().expect("temp dir");
    let plugin = start(&home).await;

    let cases = [
        (
            "Type Dear Anna, see you at 5.",
            "type_text",
            json!({"text": "Dear Anna, see you at 5"}),
        ),
        (
            "press control shift t",
            "key",
            json!({"chord": "ctrl+shift+t"}),
        ),
        (
            "Press enter three times.",
            "key",
            json!({"chord": "Return", "repeat": 3}),
        ),
        ("press alt f5", "key", json!({"chord": "alt+F5"})),
        (
            "scroll down a lot",
            "scroll",
            json!({"direction": "down", "amount": 15}),
        ),
        (
            "click on the Settings link",
            "click_element",
            json!({"description": "Settings link"}),
        ),
        (
            "press the blue button",
            "click_element",
            json!({"description": "blue button"}),
        ),
    ];
    for (utterance, op, args) in cases {
        let result = plan(&plugin, json!({"utterance": utterance})).await;
        assert_eq!(result["rule"], op, "{utterance}: {result}");
        assert_eq!(
            result["steps"],
            json!([{"op": op, "args": args, "provenance": "user", "confirm": false}]),
            "{utterance}"
        );
    }

    // A chord that closes the window asks first, as closing it by its action does.
    let result = plan(&plugin, json!({"utterance": "press alt f4"})).await;
    assert_eq!(
        result["steps"],
        json!([{"op": "key", "args": {"chord": "alt+F4"}, "provenance": "user", "confirm": true}]),
        "{result}"
    );

    // The step keeps the request's provenance.
    let result = plan(
        &plugin,
        json!({"utterance": "type hello", "provenance": "screen"}),
    )
    .await;
    assert_eq!(result["steps"][0]["provenance"], "screen", "{result}");

    // Earlier rules keep their phrases.
    for (utterance, rule) in [
        ("pause", "media"),
        ("open youtube", "open_site"),
        ("close this window", "compositor"),
        ("take a screenshot", "compositor"),
    ] {
        let result = plan(&plugin, json!({"utterance": utterance})).await;
        assert_eq!(result["rule"], rule, "{utterance}: {result}");
    }

    // Near misses plan nothing and say why.
    for (utterance, wanted) in [
        ("press blorp", "no key is called \"blorp\""),
        ("press", "needs a key"),
        ("type", "needs the text to type"),
        ("scroll", "needs a direction"),
        ("click here", "needs the name"),
    ] {
        let result = plan(&plugin, json!({"utterance": utterance})).await;
        assert_eq!(result["steps"], json!([]), "{utterance}: {result}");
        assert!(result["rule"].is_null(), "{utterance}: {result}");
        let message = result["message"].as_str().unwrap_or_default();
        assert!(message.contains(wanted), "{utterance}: {message}");
    }
}
