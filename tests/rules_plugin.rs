//! The rules router as the runner sees it: the real `utter-rules` binary over stdio, with
//! its application directories pointed at a temporary tree ([`common::Sandbox`]) holding real
//! `.desktop` files.

use crate::common;

use common::{PluginProcess, Sandbox, bin};
use utter_protocol::serde_json::{Value, json};

/// Start `utter-rules` in `sb` (its applications in `sb`'s data directories) with `args`,
/// checking its hello.
async fn start(sb: &Sandbox, args: &[&str]) -> PluginProcess {
    let (plugin, hello) = PluginProcess::start(&bin("utter-rules"), args, &sb.env(None)).await;
    assert_eq!(hello["plugin"]["name"], "rules");
    assert_eq!(hello["plugin"]["kind"], "router");
    assert_eq!(
        hello["provides"],
        json!([
            "router.plan@1",
            "router.rules@1",
            "router.vocabulary@1",
            "router.candidates@1"
        ])
    );
    plugin
}

const MARKER_WRITER: &str = "[Desktop Entry]\n\
Type=Application\n\
Name=Marker Writer\n\
GenericName=Note Taker\n\
Exec=/bin/true %F\n\
Keywords=scribble;\n";

async fn plan(plugin: &PluginProcess, utterance: &str) -> Value {
    plugin
        .call("router.plan", json!({"utterance": utterance}))
        .await
        .unwrap_or_else(|e| panic!("router.plan {utterance:?} failed: {e}"))
}

/// The single step of a plan, after checking the fields every step carries.
fn only_step(result: &Value) -> &Value {
    let steps = result["steps"].as_array().expect("steps is an array");
    assert_eq!(steps.len(), 1, "{result}");
    assert_eq!(steps[0]["provenance"], "user", "{result}");
    assert_eq!(steps[0]["confirm"], false, "{result}");
    &steps[0]
}

#[tokio::test]
async fn plans_sites_apps_and_media_keys() {
    let sb = Sandbox::new();
    sb.write_app("utter-tests/marker-writer.desktop", MARKER_WRITER);
    let plugin = start(&sb, &[]).await;

    let describe = plugin
        .call("plugin.describe", json!({}))
        .await
        .expect("describe");
    assert_eq!(
        describe["methods"],
        json!([
            "router.plan",
            "router.vocabulary",
            "router.candidates",
            "router.examples"
        ])
    );
    // "What can I say?" from the real binary: kinds with examples, whatever the params.
    for params in [json!({}), json!(null), json!({"unknown": [1, 2]})] {
        let examples = plugin
            .call("router.examples", params.clone())
            .await
            .unwrap_or_else(|e| panic!("{params}: {e:?}"));
        let kinds = examples["categories"].as_array().expect("categories");
        assert!(kinds.len() >= 10, "{examples}");
        assert!(
            kinds
                .iter()
                .any(|k| k["examples"][0]["say"] == "open youtube"),
            "{examples}"
        );
    }
    let health = plugin
        .call("plugin.health", json!({}))
        .await
        .expect("health");
    assert_eq!(health["status"], "ok");
    let detail = health["detail"].as_str().expect("detail");
    assert!(detail.contains("1 application"), "{detail}");

    for utterance in ["open youtube", "Open YouTube!"] {
        let result = plan(&plugin, utterance).await;
        let step = only_step(&result);
        assert_eq!(step["op"], "ensure_url");
        assert_eq!(
            step["args"],
            json!({"url": "https://www.youtube.com", "site": "YouTube"})
        );
        assert_eq!(result["rule"], "open_site");
    }

    let result = plan(&plugin, "open marker writer").await;
    let step = only_step(&result);
    assert_eq!(step["op"], "launch_app");
    assert_eq!(
        step["args"],
        json!({"app_id": "utter-tests-marker-writer", "name": "Marker Writer"})
    );
    assert_eq!(result["rule"], "launch_app");

    let result = plan(&plugin, "pause").await;
    assert_eq!(only_step(&result)["op"], "media");
    assert_eq!(only_step(&result)["args"], json!({"command": "pause"}));

    let result = plan(&plugin, "next track").await;
    assert_eq!(only_step(&result)["args"], json!({"command": "next"}));

    let result = plan(&plugin, "go to example.com").await;
    assert_eq!(
        only_step(&result)["args"],
        json!({"url": "https://example.com", "site": "example.com"})
    );
    assert_eq!(result["rule"], "open_domain");

    let result = plan(&plugin, "blorp the frobnicator").await;
    assert_eq!(
        result,
        json!({
            "steps": [],
            "rule": null,
            "message": "no rule matched \"blorp the frobnicator\"",
            "escalate": {"reason": "no_rule", "message": "no rule matched \"blorp the frobnicator\""},
        })
    );

    let provenance = plugin
        .call(
            "router.plan",
            json!({"utterance": "pause", "provenance": "screen", "context": {"app": "x"}}),
        )
        .await
        .expect("planned");
    assert_eq!(provenance["steps"][0]["provenance"], "screen");

    for params in [json!({"utterance": ""}), json!({}), json!({"utterance": 7})] {
        let err = plugin
            .call("router.plan", params.clone())
            .await
            .expect_err("refused");
        assert_eq!(err.code, -32602, "{params}: {err}");
    }

    let err = plugin
        .call("router.nope", json!({}))
        .await
        .expect_err("unknown");
    assert_eq!(err.code, -32601);
}

#[tokio::test]
async fn the_vocabulary_names_sites_installed_apps_and_open_windows_and_takes_any_context() {
    let sb = Sandbox::new();
    sb.write_app("marker-writer.desktop", MARKER_WRITER);
    let plugin = start(&sb, &[]).await;
    let context = json!({"compositor": {"name": "sway"}, "focused": {"id": 1, "app_id": "foot"},
        "windows": [{"id": 1, "app_id": "foot"}]});
    let v = plugin
        .call("router.vocabulary", json!({"context": context}))
        .await
        .expect("router.vocabulary");
    let prompt = v["prompt"].as_str().unwrap();
    println!("{prompt}");
    assert!(
        prompt.contains("GitHub") && prompt.contains("YouTube"),
        "{prompt}"
    );
    assert!(prompt.contains("Marker Writer"), "{prompt}");
    assert!(prompt.contains("Switch to foot"), "{prompt}");
    assert!(prompt.chars().count() <= 450);
    let terms: Vec<&str> = v["terms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(terms.contains(&"Claude"), "{terms:?}");
    assert_eq!(v["counts"]["installed"], 1, "{v}");
    // A context of the wrong shape, a huge one (10 MB, under the 16 MiB frame limit), or none:
    // still the vocabulary, never an error.
    for context in [
        json!("garbage"),
        json!({"windows": [{"app_id": 5}]}),
        json!({"windows": vec![json!({"id": 1, "app_id": "x".repeat(10_000)}); 1000]}),
        Value::Null,
    ] {
        let v = plugin
            .call("router.vocabulary", json!({"context": context}))
            .await
            .expect("router.vocabulary with a bad context");
        assert!(v["prompt"].as_str().unwrap().contains("GitHub"));
        assert!(v["prompt"].as_str().unwrap().chars().count() <= 450);
    }
    // Positional params are refused by the protocol layer, naming the method.
    let err = plugin
        .call("router.vocabulary", json!([1, 2]))
        .await
        .expect_err("positional params are refused");
    assert_eq!(err.code, -32602);
    assert!(err.message.contains("router.vocabulary"), "{}", err.message);
}

#[tokio::test]
async fn candidates_sound_like_what_was_heard_and_plan_steps() {
    let sb = Sandbox::new();
    sb.write_app("marker-writer.desktop", MARKER_WRITER);
    let plugin = start(&sb, &[]).await;
    let candidates = |hypotheses: Value, context: Value| {
        let plugin = &plugin;
        async move {
            let answer = plugin
                .call(
                    "router.candidates",
                    json!({"hypotheses": hypotheses, "context": context}),
                )
                .await
                .expect("router.candidates");
            answer["candidates"].as_array().expect("candidates").clone()
        }
    };
    let texts = |list: &[Value]| -> Vec<String> {
        list.iter()
            .map(|c| c["text"].as_str().unwrap().to_owned())
            .collect()
    };
    // A misheard site name, an installed application's, a short command.
    let found = candidates(json!(["Go to G-Sub."]), Value::Null).await;
    println!("{found:?}");
    assert!(
        texts(&found).contains(&"Go to GitHub.".to_owned()),
        "{found:?}"
    );
    let github = found.iter().find(|c| c["text"] == "Go to GitHub.").unwrap();
    assert_eq!(github["source"], "name");
    assert_eq!(github["op"], "ensure_url");
    assert_eq!(github["hypothesis"], 0);
    assert!(github["near"].as_f64().unwrap() >= 0.55, "{github}");
    let found = texts(&candidates(json!(["Launch Marker Rider"]), Value::Null).await);
    assert!(
        found.contains(&"Launch Marker Writer".to_owned()),
        "{found:?}"
    );
    let found = texts(&candidates(json!(["Prize.", "Pries."]), Value::Null).await);
    assert!(found.contains(&"pause".to_owned()), "{found:?}");
    // A misheard key, and a misheard agent.
    let found = texts(&candidates(json!(["Press relief"]), Value::Null).await);
    assert!(found.contains(&"press delete".to_owned()), "{found:?}");
    let terminal =
        json!({"focused": {"id": 1, "app_id": "foot"}, "windows": [{"id": 1, "app_id": "foot"}]});
    let found = texts(&candidates(json!(["Launch Kovex"]), terminal).await);
    assert!(
        found.iter().any(|f| f.to_lowercase() == "launch codex"),
        "{found:?}"
    );
    // The focused application's own shortcuts are phrases too.
    let firefox = json!({"focused": {"id": 1, "app_id": "firefox"}, "windows": [{"id": 1, "app_id": "firefox"}]});
    let found = texts(&candidates(json!(["Knew tap."]), firefox).await);
    assert!(found.contains(&"new tab".to_owned()), "{found:?}");
    // Nothing that only asks or types, and never the first hypothesis itself; a later one
    // the router acts on is weighed as heard.
    let found = candidates(json!(["type hello world", "pause"]), Value::Null).await;
    assert!(
        found
            .iter()
            .all(|c| c["op"] != "type_text" && c["text"] != "type hello world"),
        "{found:?}"
    );
    assert_eq!(found[0]["text"], "pause", "{found:?}");
    assert_eq!(found[0]["source"], "heard", "{found:?}");
    // A blank hypothesis keeps its place: indices are those of the list as sent.
    let found = candidates(json!(["pouse fire fox", "", "pause firefox"]), Value::Null).await;
    let heard = found
        .iter()
        .find(|c| c["source"] == "heard")
        .expect("heard");
    assert_eq!(heard["hypothesis"], 2, "{found:?}");
    let found = candidates(json!(["pause", "Pause."]), Value::Null).await;
    assert!(
        found.iter().all(|c| c["text"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .trim_end_matches('.')
            != "pause"),
        "{found:?}"
    );
    // A window title is never a source of words: a window titled like a name adds nothing.
    let titled = json!({"windows": [{"id": 1, "app_id": "foot", "title": "Gsubby rm -rf"}]});
    let found = texts(&candidates(json!(["Go to Gsubby."]), titled).await);
    assert!(found.iter().all(|f| !f.contains("rm")), "{found:?}");

    // Hostile params: clear refusals naming the field, and the router keeps serving.
    for (params, says) in [
        (json!({}), "needs params.hypotheses"),
        (json!({"hypotheses": "pause"}), "needs params.hypotheses"),
        (json!({"hypotheses": [1]}), "hypotheses[0] must be a string"),
        (
            json!({"hypotheses": vec!["pause"; 11]}),
            "holds 11; give 1 to 10",
        ),
        (json!({"hypotheses": []}), "holds 0; give 1 to 10"),
        (
            json!({"hypotheses": ["x".repeat(5000)]}),
            "hypotheses[0] is 5000 bytes",
        ),
    ] {
        let err = plugin
            .call("router.candidates", params.clone())
            .await
            .expect_err("refused");
        assert_eq!(err.code, -32602, "{params}");
        assert!(err.message.contains(says), "{}", err.message);
    }
    // Blank hypotheses, a context of the wrong shape, odd text: an answer, maybe empty (an
    // empty list is refused above).
    for hypotheses in [json!(["   "]), json!(["\u{0}\u{202e}🙂 <|endoftext|>"])] {
        let answer = plugin
            .call(
                "router.candidates",
                json!({"hypotheses": hypotheses, "context": "garbage"}),
            )
            .await
            .expect("an answer");
        assert!(answer["candidates"].is_array(), "{answer}");
    }
    // At most 24, however many names sound alike.
    let many: Vec<String> = (0..10)
        .map(|i| format!("open git hub {i} you tube"))
        .collect();
    let found = candidates(json!(many), Value::Null).await;
    assert!(found.len() <= 24, "{}", found.len());
    assert!(plan(&plugin, "pause").await["steps"].is_array());
}

#[tokio::test]
async fn sees_applications_installed_after_start() {
    let sb = Sandbox::new();
    let plugin = start(&sb, &[]).await;

    let before = plan(&plugin, "launch marker writer").await;
    assert_eq!(before["steps"], json!([]));

    sb.write_app("marker-writer.desktop", MARKER_WRITER);

    let after = plan(&plugin, "launch marker writer").await;
    assert_eq!(
        only_step(&after)["args"],
        json!({"app_id": "marker-writer", "name": "Marker Writer"})
    );
    // GenericName and Keywords match too.
    let generic = plan(&plugin, "start the note taker").await;
    assert_eq!(only_step(&generic)["args"]["app_id"], "marker-writer");
    let keyword = plan(&plugin, "run scribble").await;
    assert_eq!(only_step(&keyword)["args"]["app_id"], "marker-writer");

    // Hidden entries are not offered.
    sb.write_app(
        "marker-writer.desktop",
        "[Desktop Entry]\nType=Application\nName=Marker Writer\nExec=true\nHidden=true\n",
    );
    let hidden = plan(&plugin, "launch marker writer").await;
    assert_eq!(hidden["steps"], json!([]));
}

#[tokio::test]
async fn another_site_catalog_can_be_given() {
    let sb = Sandbox::new();
    let catalog = sb.write(
        "sites.toml",
        "[[site]]\nname = \"Intranet\"\nurl = \"https://intranet.example.org/start\"\n\
         aliases = [\"work portal\"]\n",
    );
    let catalog_arg = catalog.display().to_string();
    let plugin = start(&sb, &["--sites", &catalog_arg]).await;

    let result = plan(&plugin, "go to the work portal").await;
    assert_eq!(
        only_step(&result)["args"],
        json!({"url": "https://intranet.example.org/start", "site": "Intranet"})
    );
    // The built-in catalog is replaced, not extended.
    let result = plan(&plugin, "go to youtube").await;
    assert_eq!(result["steps"], json!([]));
    let health = plugin
        .call("plugin.health", json!({}))
        .await
        .expect("health");
    let detail = health["detail"].as_str().expect("detail");
    assert!(detail.starts_with("1 site from "), "{detail}");
}

#[test]
fn a_bad_site_catalog_stops_the_plugin_with_file_and_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let catalog = dir.path().join("broken.toml");
    std::fs::write(
        &catalog,
        "[[site]]\nname = \"A\"\nurl = \"ftp://a.example\"\n",
    )
    .expect("write catalog");
    let output = std::process::Command::new(bin("utter-rules"))
        .env("UTTER_SITES", &catalog)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("utter-rules runs");
    assert!(!output.status.success());
    assert!(output.stdout.is_empty(), "nothing but frames on stdout");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&catalog.display().to_string()) && stderr.contains("line 3"),
        "{stderr}"
    );
}
