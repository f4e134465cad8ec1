//! "What can I say here?" as the runner and `utter commands` see it: the real `utter-rules`
//! binary over stdio, with a private home (no installed application, no niri config or
//! profiles of this machine). `router.examples {context}` puts the focused application's
//! category and the compositor's first, and every example it generates plans, through the
//! same plugin, to the op it states in the context it was asked for.

use utter_protocol::serde_json::{Value, json};
use utter_protocol::testkit::TestPlugin;

mod common;

const COMPOSITOR: &str = utter_rules::examples::COMPOSITOR_CATEGORY;

async fn start(home: &tempfile::TempDir) -> TestPlugin {
    common::start_router(home, None).await
}

async fn request(plugin: &TestPlugin, method: &str, params: Value) -> Value {
    plugin
        .request(method, params.clone())
        .await
        .unwrap_or_else(|e| panic!("{method} {params} failed: {e:?}"))
}

/// The headings of an answer, in order.
fn names(answer: &Value) -> Vec<String> {
    answer["categories"]
        .as_array()
        .expect("categories")
        .iter()
        .map(|c| c["name"].as_str().expect("a name").to_owned())
        .collect()
}

/// The category named `name`.
fn category<'a>(answer: &'a Value, name: &str) -> &'a Value {
    answer["categories"]
        .as_array()
        .expect("categories")
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no category {name:?} in {:?}", names(answer)))
}

/// `(say, op, focused)` of a category's examples.
fn examples(category: &Value) -> Vec<(String, String, Option<String>)> {
    category["examples"]
        .as_array()
        .expect("examples")
        .iter()
        .map(|e| {
            (
                e["say"].as_str().expect("say").to_owned(),
                e["op"].as_str().expect("op").to_owned(),
                e["focused"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

/// How many phrases the built-in profile `id` has (shortcuts and commands), at most the
/// category's 40.
fn phrases_of(id: &str) -> usize {
    let profiles = utter_rules::profiles::Profiles::builtin();
    let profile = profiles.by_id(id).expect("a built-in profile");
    (profile.shortcuts.len() + profile.commands.len()).min(utter_rules::examples::MAX_APP_EXAMPLES)
}

/// The examples of the generated categories (those before the built-in file's) that do not
/// plan, in `context`, to the op they state: `"say" (category): the plan`.
async fn misplanned(plugin: &TestPlugin, answer: &Value, context: &Value) -> Vec<String> {
    let builtin = request(plugin, "router.examples", json!({})).await;
    let generated = answer["categories"].as_array().expect("categories").len()
        - builtin["categories"].as_array().expect("categories").len();
    let mut wrong = Vec::new();
    for category in &answer["categories"].as_array().expect("categories")[..generated] {
        for (say, op, _) in examples(category) {
            let planned = request(
                plugin,
                "router.plan",
                json!({"utterance": say, "context": context}),
            )
            .await;
            if planned["steps"][0]["op"] != op.as_str() {
                wrong.push(format!("{say:?} ({}): {planned}", category["name"]));
            }
        }
    }
    wrong
}

#[tokio::test]
async fn the_focused_application_and_the_compositor_come_first_and_every_example_plans() {
    let home = tempfile::tempdir().expect("temp dir");
    let plugin = start(&home).await;
    let builtin = request(&plugin, "router.examples", json!({})).await;
    let builtin_names = names(&builtin);
    assert!(builtin_names.len() >= 10, "{builtin_names:?}");

    // Firefox focused, the compositor unnamed (it may be niri).
    let firefox = json!({
        "compositor": null,
        "focused": {"id": 7, "app_id": "firefox", "title": "Rust - Mozilla Firefox"},
        "windows": [{"id": 7, "app_id": "firefox"}, {"id": 8, "app_id": "foot"}],
    });
    let answer = request(&plugin, "router.examples", json!({"context": firefox})).await;
    let headings = names(&answer);
    assert_eq!(headings[0], "In Firefox", "{headings:?}");
    assert_eq!(headings[1], COMPOSITOR, "{headings:?}");
    assert_eq!(
        headings[2..],
        builtin_names[..],
        "the built-in categories follow"
    );
    let in_firefox = examples(category(&answer, "In Firefox"));
    assert!(
        in_firefox.contains(&("new tab".into(), "key".into(), Some("firefox".into()))),
        "{in_firefox:?}"
    );
    // Every phrase of the built-in profile plans as it says: none was left out.
    assert_eq!(in_firefox.len(), phrases_of("firefox"), "{in_firefox:?}");
    assert!(category(&answer, "In Firefox")["about"].is_string());
    let compositor = examples(category(&answer, COMPOSITOR));
    assert!(
        (15..=30).contains(&compositor.len()),
        "{} compositor examples",
        compositor.len()
    );
    assert!(
        compositor
            .iter()
            .all(|(_, op, focused)| op == "niri" && focused.is_none())
    );
    assert!(
        compositor
            .iter()
            .any(|(say, ..)| say == "focus column left"),
        "{compositor:?}"
    );
    let mut verbs: Vec<&str> = compositor
        .iter()
        .map(|(say, ..)| say.split(' ').next().expect("a verb"))
        .collect();
    verbs.sort_unstable();
    verbs.dedup();
    assert!(verbs.len() >= 8, "only the verbs {verbs:?}");
    let wrong = misplanned(&plugin, &answer, &firefox).await;
    assert!(
        wrong.is_empty(),
        "examples that plan otherwise:\n{}",
        wrong.join("\n")
    );

    // foot focused on niri: the terminal's own commands, one phrase per effect first.
    let foot = json!({
        "compositor": {"name": "niri", "version": "25.08"},
        "focused": {"id": 8, "app_id": "foot"},
        "windows": [{"id": 8, "app_id": "foot"}],
    });
    let answer = request(&plugin, "router.examples", json!({"context": foot})).await;
    let headings = names(&answer);
    assert_eq!(headings[..2], ["In foot", COMPOSITOR], "{headings:?}");
    let in_foot = examples(category(&answer, "In foot"));
    for say in ["copy", "paste", "clear", "interrupt"] {
        assert!(
            in_foot.iter().any(|(s, op, focused)| s == say
                && op == "key"
                && focused.as_deref() == Some("foot")),
            "{say:?} is not in {in_foot:?}"
        );
    }
    assert_eq!(in_foot.len(), phrases_of("foot"), "{in_foot:?}");
    let wrong = misplanned(&plugin, &answer, &foot).await;
    assert!(
        wrong.is_empty(),
        "examples that plan otherwise:\n{}",
        wrong.join("\n")
    );

    // On sway the niri actions would fail: no compositor category. An application without a
    // profile has no category either.
    let sway = json!({
        "compositor": {"name": "sway"},
        "focused": {"app_id": "org.example.NoProfile"},
    });
    let answer = request(&plugin, "router.examples", json!({"context": sway})).await;
    assert_eq!(names(&answer), builtin_names);

    // all: every profile's category, the focused one first, each planned with its window.
    let answer = request(
        &plugin,
        "router.examples",
        json!({"context": foot, "all": true}),
    )
    .await;
    let headings = names(&answer);
    assert_eq!(headings[..2], ["In foot", COMPOSITOR], "{headings:?}");
    for name in ["In Firefox", "In kitty", "In Visual Studio Code"] {
        assert!(headings.iter().any(|h| h == name), "{name} in {headings:?}");
    }
    assert_eq!(headings.iter().filter(|h| *h == "In foot").count(), 1);
    let in_firefox = examples(category(&answer, "In Firefox"));
    assert!(
        in_firefox
            .iter()
            .all(|(_, _, f)| f.as_deref() == Some("firefox"))
    );
    for (say, op, _) in in_firefox {
        let planned = request(
            &plugin,
            "router.plan",
            json!({"utterance": say, "context": {"focused": {"app_id": "firefox"}}}),
        )
        .await;
        assert_eq!(planned["steps"][0]["op"], op.as_str(), "{say:?}: {planned}");
    }
    plugin
        .shutdown(std::time::Duration::from_secs(5))
        .await
        .expect("stops");
}

#[tokio::test]
async fn a_context_of_the_wrong_shape_still_gets_the_builtin_list() {
    let home = tempfile::tempdir().expect("temp dir");
    let plugin = start(&home).await;
    let builtin = request(&plugin, "router.examples", json!({})).await;
    for context in [
        json!("firefox"),
        json!(42),
        json!([{"app_id": "firefox"}]),
        json!({"focused": {"app_id": 7}}),
        json!({"focused": "firefox"}),
        json!({"compositor": "niri", "focused": {"app_id": "firefox"}}),
        json!({"windows": {"app_id": "firefox"}}),
        json!(null),
    ] {
        let answer = request(&plugin, "router.examples", json!({"context": context})).await;
        assert_eq!(answer, builtin, "context {context}");
    }
    // An app_id far too long, or with control characters, names no profile.
    let long = "f".repeat(100_000);
    let answer = request(
        &plugin,
        "router.examples",
        json!({"context": {"compositor": {"name": "sway"}, "focused": {"app_id": long}}}),
    )
    .await;
    assert_eq!(answer, builtin);
    let answer = request(
        &plugin,
        "router.examples",
        json!({"context": {"compositor": {"name": "sway"}, "focused": {"app_id": "fire\u{202e}fox"}}}),
    )
    .await;
    assert_eq!(answer, builtin);
    // A bad `all` is the caller's mistake: invalid params, saying which.
    let refused = plugin
        .request("router.examples", json!({"all": "yes"}))
        .await
        .expect_err("refused");
    assert_eq!(refused.code, -32602, "{refused:?}");
    assert!(refused.message.contains("all"), "{}", refused.message);
    // Still serving, and still side-effect-free for the runner's gate.
    let described = request(&plugin, "plugin.describe", json!({})).await;
    assert!(
        described["side_effect_free"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m == "router.examples")),
        "{described}"
    );
    plugin
        .shutdown(std::time::Duration::from_secs(5))
        .await
        .expect("stops");
}
