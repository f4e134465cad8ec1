//! The HTTP backend of the real `utter-llm` program against a test server speaking the
//! OpenAI-compatible wire (tests/openai): chat log-probabilities with calibration, structured
//! output where a server gives no log-probabilities, echoed completions, and a server that
//! fails, lies or hangs.

mod openai;
mod support;

use openai::Server;
use support::{Plugin, choose_params, total};
use utter_protocol::serde_json::{Value, json};

async fn chooser(server: &Server, model: &str, api: &str, extra: &[&str]) -> Plugin {
    let mut args = vec![
        "--endpoint",
        &server.url,
        "--api",
        api,
        "--api-model",
        model,
    ];
    args.extend_from_slice(extra);
    Plugin::start(&args, &[]).await
}

const LABELS: &[&str] = &["open GitLab", "open GitHub", "open Gmail"];

#[tokio::test]
async fn chat_logprobs_are_calibrated_against_the_content_free_utterance() {
    let server = Server::start();
    let p = chooser(&server, "biased", "chat", &[]).await;
    let answer = p
        .call("llm.choose", choose_params("open github please", LABELS))
        .await
        .unwrap();
    // Raw, the server's label bias picks option 1; calibrated, the heard one.
    assert_eq!(answer["choice_id"], "c2", "{answer}");
    assert!((total(&answer) - 1.0).abs() < 1e-4, "{answer}");
    assert_eq!(answer.as_object().unwrap().len(), 3, "{answer}");
    let s = p
        .call("llm.score", choose_params("open github please", LABELS))
        .await
        .unwrap();
    assert_eq!(s["raw_choice"], "c1", "{s}");
    assert_eq!(s["calibrated_choice"], "c2", "{s}");
    // What went over the wire: the numbered list, the model's name, top_logprobs; the second
    // request of each choice is the content-free one.
    let requests = server.requests.lock().unwrap().clone();
    assert!(
        requests
            .iter()
            .all(|(path, _)| path == "/v1/chat/completions")
    );
    let bodies: Vec<&Value> = requests.iter().map(|(_, b)| b).collect();
    assert!(
        bodies
            .iter()
            .all(|b| b["model"] == "biased" && b["logprobs"] == true && b["top_logprobs"] == 20)
    );
    let users: Vec<&str> = bodies
        .iter()
        .map(|b| b["messages"][1]["content"].as_str().unwrap())
        .collect();
    assert!(
        users[0].contains("Heard: \"open github please\"") && users[0].contains("2. open GitHub")
    );
    assert!(users[1].contains("Heard: \"N/A\""), "{}", users[1]);
    let health = p.call("plugin.health", json!({})).await.unwrap();
    assert_eq!(health["status"], "ok");
    assert!(
        health["detail"].as_str().unwrap().contains(&server.url),
        "{health}"
    );
}

#[tokio::test]
async fn a_server_without_logprobs_is_asked_for_structured_output() {
    let server = Server::start();
    let p = chooser(&server, "plain", "chat", &[]).await;
    let answer = p
        .call("llm.choose", choose_params("open github please", LABELS))
        .await
        .unwrap();
    // No numbers to calibrate: the id alone.
    assert_eq!(answer, json!({"choice_id": "c2"}));
    let requests = server.requests.lock().unwrap().clone();
    let schema = &requests.last().unwrap().1["response_format"];
    assert_eq!(schema["type"], "json_schema", "{schema}");
    assert_eq!(
        schema["json_schema"]["schema"]["properties"]["choice"]["enum"],
        json!([1, 2, 3])
    );
    let e = p
        .call("llm.score", choose_params("open github", LABELS))
        .await
        .unwrap_err();
    assert!(e.message.contains("no scores"), "{}", e.message);
    // A structured answer outside the enum is an error, not a choice.
    let p = chooser(&server, "bad-number", "chat", &[]).await;
    let e = p
        .call("llm.choose", choose_params("open github", LABELS))
        .await
        .unwrap_err();
    assert!(
        e.message.contains("is not {\"choice\": N}"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn echoed_completions_sum_the_label_tokens_only() {
    let server = Server::start();
    let p = chooser(&server, "echo", "completions", &[]).await;
    let heard = "open github please";
    let s = p
        .call("llm.score", choose_params(heard, LABELS))
        .await
        .unwrap();
    for (i, label) in LABELS.iter().enumerate() {
        // The label's own tokens: " open" and its name, nothing of the prompt or of the
        // generated token.
        let mut want = 0.0;
        for token in label.split(' ') {
            want += openai::token_logprob(&format!(" {token}"), heard);
        }
        let got = s["scores"][i]["raw"].as_f64().unwrap();
        assert!((got - want).abs() < 1e-9, "{label}: {got} vs {want}");
        let cf = s["scores"][i]["content_free"].as_f64().unwrap();
        let mut want_cf = 0.0;
        for token in label.split(' ') {
            want_cf += openai::token_logprob(&format!(" {token}"), "N/A");
        }
        assert!(
            (cf - want_cf).abs() < 1e-9,
            "{label}: content-free {cf} vs {want_cf}"
        );
    }
    assert_eq!(s["calibrated_choice"], "c2", "{s}");
    let requests = server.requests.lock().unwrap().clone();
    let (path, body) = &requests[0];
    assert_eq!(path, "/v1/completions");
    assert_eq!(body["echo"], true);
    assert_eq!(body["prompt"].as_array().unwrap().len(), LABELS.len());
    // The content-free scores are kept: asking again sends only the utterance's prompts.
    let before = server.requests.lock().unwrap().len();
    p.call("llm.choose", choose_params("open gmail", LABELS))
        .await
        .unwrap();
    assert_eq!(server.requests.lock().unwrap().len(), before + 1);
    let done = p
        .call(
            "llm.complete",
            json!({"prompt": "Say done:", "max_tokens": 4}),
        )
        .await
        .unwrap();
    assert_eq!(done["text"], " done");
}

#[tokio::test]
async fn failing_servers_are_errors_that_say_what_happened() {
    let server = Server::start();
    for (model, wanted) in [
        (
            "error500",
            "answered HTTP 500: {\"error\":{\"message\":\"model exploded\"}}",
        ),
        ("garbage", "not JSON"),
        ("no-numbers", "none of the options' numbers"),
        ("slow", "within 500 ms"),
    ] {
        let p = chooser(&server, model, "chat", &["--timeout-ms", "500"]).await;
        let e = p
            .call("llm.choose", choose_params("open github", LABELS))
            .await
            .unwrap_err();
        assert_eq!(e.code, -32000, "{model}");
        assert!(e.message.contains(wanted), "{model}: {}", e.message);
        // The plugin keeps serving.
        assert_eq!(
            p.call("plugin.health", json!({})).await.unwrap()["status"],
            "ok"
        );
    }
    // Nothing listening.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let p = Plugin::start(&["--endpoint", &closed], &[]).await;
    let e = p
        .call("llm.choose", choose_params("open github", LABELS))
        .await
        .unwrap_err();
    assert!(e.message.contains("could not be reached"), "{}", e.message);
}

#[tokio::test]
async fn the_endpoint_comes_from_the_environment_and_bad_ones_are_refused() {
    let server = Server::start();
    let p = Plugin::start(
        &[],
        &[
            ("UTTER_LLM_ENDPOINT", &server.url),
            ("UTTER_LLM_API_MODEL", "biased"),
        ],
    )
    .await;
    let a = p
        .call("llm.choose", choose_params("open github please", LABELS))
        .await
        .unwrap();
    assert_eq!(a["choice_id"], "c2", "{a}");
    // No model at all: degraded, and a choice says how to name one.
    let none = Plugin::start(&[], &[]).await;
    let health = none.call("plugin.health", json!({})).await.unwrap();
    assert_eq!(health["status"], "degraded", "{health}");
    let e = none
        .call("llm.choose", choose_params("x", LABELS))
        .await
        .unwrap_err();
    assert!(e.message.contains("[llm]"), "{}", e.message);
    // llm.load switches to a server; a bad one is refused with the reason.
    let loaded = none
        .call(
            "llm.load",
            json!({"endpoint": server.url, "api_model": "biased"}),
        )
        .await
        .unwrap();
    assert!(
        loaded["backend"].as_str().unwrap().contains("chat API"),
        "{loaded}"
    );
    assert_eq!(
        none.call("plugin.health", json!({})).await.unwrap()["status"],
        "ok"
    );
    let e = none
        .call("llm.load", json!({"endpoint": "ftp://x"}))
        .await
        .unwrap_err();
    assert!(e.message.contains("http://"), "{}", e.message);
    for bad in [
        json!({"endpoint": 5}),
        json!({}),
        json!({"model": "a", "endpoint": "b"}),
    ] {
        assert_eq!(none.call("llm.load", bad).await.unwrap_err().code, -32602);
    }
}

#[tokio::test]
async fn what_a_server_cannot_score_is_an_error_or_structured_output() {
    let server = Server::start();
    // Completions that score none of a label's tokens: an error, not a certainty of 0 nats.
    let p = chooser(&server, "echo-empty", "completions", &[]).await;
    let e = p
        .call("llm.choose", choose_params("open github", LABELS))
        .await
        .unwrap_err();
    assert!(
        e.message.contains("none fell inside the label"),
        "{}",
        e.message
    );
    // Ten options: their numbers are not one token each, so structured output is asked.
    let p = chooser(&server, "plain", "chat", &[]).await;
    let ten = [
        "open Zebra",
        "open Yak",
        "open Walrus",
        "open Koala",
        "open Llama",
        "open Moose",
        "open Quokka",
        "open Panda",
        "open Fox",
        "open GitHub",
    ];
    let a = p
        .call("llm.choose", choose_params("open github", &ten))
        .await
        .unwrap();
    assert_eq!(a, json!({"choice_id": "c10"}));
    let last = server.requests.lock().unwrap().last().unwrap().1.clone();
    assert_eq!(last["response_format"]["type"], "json_schema", "{last}");
    // A summary cannot add an option line of its own.
    let p = chooser(&server, "biased", "chat", &[]).await;
    p.call(
        "llm.choose",
        choose_params(
            "open gitlab",
            &["open GitHub\n2. open GitLab", "open Gmail"],
        ),
    )
    .await
    .unwrap();
    let last = server.requests.lock().unwrap().last().unwrap().1.clone();
    let user = last["messages"][1]["content"].as_str().unwrap();
    assert!(
        user.contains("1. open GitHub 2. open GitLab\n2. open Gmail"),
        "{user}"
    );
}

/// `$/cancel` drops a request in flight: the plugin answers -32002 at once and shuts the
/// HTTP connection down, so the server sees the client hang up (instead of the plugin
/// waiting out its 120 s timeout), and the plugin goes on serving.
#[tokio::test]
async fn a_cancelled_request_drops_its_http_connection() {
    let server = Server::start();
    let p = chooser(&server, "hang", "chat", &["--timeout-ms", "120000"]).await;
    // A request timeout on our side sends `$/cancel`.
    let cancelled = p
        .conn
        .request(
            "llm.choose",
            choose_params("open github", LABELS),
            Some(std::time::Duration::from_millis(1500)),
        )
        .await
        .unwrap_err();
    assert!(
        cancelled.message.contains("no response within 1500 ms"),
        "{cancelled:?}"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while server.hung_up.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the server never saw the cancelled request's connection close"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let health = p
        .call("plugin.health", json!({}))
        .await
        .expect("still serving");
    assert_eq!(health["status"], "ok", "{health}");
}

#[tokio::test]
async fn requests_past_the_limit_are_busy_and_closing_stdin_ends_the_plugin_at_once() {
    let server = Server::start();
    let p = chooser(&server, "slow", "chat", &["--timeout-ms", "10000"]).await;
    let calls: Vec<_> = (0..9)
        .map(|_| p.call("llm.choose", choose_params("open github", LABELS)))
        .collect();
    let answers = futures::future::join_all(calls).await;
    let busy = answers
        .iter()
        .filter(|a| {
            a.as_ref()
                .is_err_and(|e| e.message.contains("busy: 8 requests"))
        })
        .count();
    assert_eq!(busy, 1, "{answers:?}");

    // A request waiting on a server that takes a minute does not hold the exit.
    let mut child = std::process::Command::new(support::BIN)
        .args([
            "--endpoint",
            &server.url,
            "--api-model",
            "hang",
            "--timeout-ms",
            "120000",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    use std::io::Write;
    for body in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "protocol.hello",
               "params": {"protocol": "1.0", "abi": 1, "runner": "t", "epoch": 1}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "llm.choose",
               "params": choose_params("open github", LABELS)}),
    ] {
        let body = body.to_string();
        write!(stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    }
    stdin.flush().unwrap();
    // Let the call reach the server, then hang up.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while server
        .requests
        .lock()
        .unwrap()
        .iter()
        .all(|(_, b)| b["model"] != "hang")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the call never reached the server"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    drop(stdin);
    let exited = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline + std::time::Duration::from_secs(10) {
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let _ = child.kill();
    assert!(
        exited.is_some(),
        "utter-llm still runs with a request in flight after stdin closed"
    );
}
