//! Bad input through the real `utter` binary: every mistake a user can make on the command
//! line or in the configuration ends with the documented exit code and a message that says
//! what is wrong (see the exit codes in `utter --help`).

use crate::common;
// The OpenAI-compatible test server of the chooser plugin's own tests.
use crate::openai;

use common::{Sandbox, UtterRun, bin, run_utter, run_utter_at};
use std::path::PathBuf;
use utter_protocol::serde_json::{Value, json};

/// Write `utter.toml` in the sandbox (outside `XDG_CONFIG_HOME`, so only `--config` or
/// `check-config FILE` reads it).
fn write_config(sb: &Sandbox, text: &str) -> PathBuf {
    sb.write("utter.toml", text)
}

/// `[[plugin]]` lines running `program` with `args` (absolute paths, so no lookup is
/// involved).
fn plugin_entry(id: &str, kind: &str, program: &str, args: &[&str]) -> String {
    let mut argv = vec![program];
    argv.extend_from_slice(args);
    format!(
        "[[plugin]]\nid = \"{id}\"\nkind = \"{kind}\"\nentrypoint = {}\n",
        json!(argv)
    )
}

fn assert_mentions(text: &str, needles: &[&str], run: &UtterRun) {
    for needle in needles {
        assert!(text.contains(needle), "{needle:?} missing: {run}");
    }
}

#[tokio::test]
async fn an_empty_or_missing_utterance_is_a_usage_error() {
    let sb = Sandbox::new();
    let env = sb.env(None);

    for blank in ["", "   "] {
        let run = run_utter(&["say", blank], &env).await;
        assert_eq!(run.code, Some(2), "{run}");
        assert!(run.stderr.contains("the utterance is empty"), "{run}");
        assert!(run.stdout.is_empty(), "{run}");
    }

    // With --json the refusal is JSON on stdout too, for scripts.
    let run = run_utter(&["say", "--json", ""], &env).await;
    assert_eq!(run.code, Some(2), "{run}");
    assert_eq!(run.json()["error"]["code"], -32602, "{run}");
    assert!(
        run.json()["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("the utterance is empty")),
        "{run}"
    );

    let run = run_utter(&["say"], &env).await;
    assert_eq!(run.code, Some(2), "{run}");
    assert!(run.stderr.contains("<UTTERANCE>"), "clap names it: {run}");

    // An utterance longer than the router plans is the caller's mistake too (2, not 4).
    let long = "open ".repeat(1000);
    let run = run_utter(&["say", "--local", &long], &env).await;
    assert_eq!(run.code, Some(2), "{run}");
    assert!(run.stderr.contains("at most 4096"), "{run}");
}

const PIGEON: &str = "config_version = 1\n\
\n\
[[plugin]]\n\
id = \"rules\"\n\
transport = \"pigeon\"\n\
entrypoint = [\"utter-rules\"]\n";

#[tokio::test]
async fn an_unknown_transport_is_a_config_error_with_file_line_and_key() {
    let sb = Sandbox::new();
    let env = sb.env(None);
    let file = write_config(&sb, PIGEON);
    let file_str = file.display().to_string();
    // file:line: key: message, and the values that are allowed.
    let at = format!("{file_str}:5: plugin[0].transport:");
    let needles = [at.as_str(), "pigeon", "stdio", "connect", "listen"];

    let run = run_utter(&["check-config", &file_str], &env).await;
    assert_eq!(run.code, Some(3), "{run}");
    assert_mentions(&run.stdout, &needles, &run);
    assert!(run.stdout.contains("config INVALID"), "{run}");

    let run = run_utter(&["check-config", &file_str, "--json"], &env).await;
    assert_eq!(run.code, Some(3), "{run}");
    let report = run.json();
    assert_eq!(report["ok"], false, "{run}");
    assert_eq!(report["warnings"], json!([]), "{run}");
    let errors = report["errors"].as_array().expect("errors");
    assert_eq!(errors.len(), 1, "{run}");
    assert_eq!(
        (&errors[0]["file"], &errors[0]["line"], &errors[0]["key"]),
        (&json!(file_str), &json!(5), &json!("plugin[0].transport")),
        "{run}"
    );

    // Any command that loads the config refuses it the same way, on stderr.
    let run = run_utter(&["say", "x", "--config", &file_str], &env).await;
    assert_eq!(run.code, Some(3), "{run}");
    assert_mentions(&run.stderr, &needles, &run);
    assert!(run.stdout.is_empty(), "{run}");
}

#[tokio::test]
async fn unknown_keys_are_warnings_with_their_lines() {
    let sb = Sandbox::new();
    let env = sb.env(None);
    let file = write_config(
        &sb,
        "config_version = 1\n\
         [runner]\n\
         rpc_timeout = 5\n\
         [[plugin]]\n\
         id = \"rules\"\n\
         entrypoint = \"utter-rules\"\n\
         kind = \"router\"\n\
         flavour = \"mint\"\n",
    );
    let file_str = file.display().to_string();

    let run = run_utter(&["check-config", &file_str], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    let first = format!("warning: {file_str}:3: runner.rpc_timeout: unknown key");
    let second = format!("warning: {file_str}:8: plugin[0].flavour: unknown key");
    assert_mentions(&run.stdout, &[&first, &second, "config OK"], &run);

    let run = run_utter(&["check-config", &file_str, "--json"], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    let report = run.json();
    assert_eq!(report["ok"], true, "{run}");
    assert_eq!(report["origin"], file_str.as_str(), "{run}");
    assert_eq!(report["errors"], json!([]), "{run}");
    let warnings: Vec<(&Value, &Value, &Value)> = report["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .map(|w| (&w["file"], &w["key"], &w["line"]))
        .collect();
    assert_eq!(
        warnings,
        [
            (&json!(file_str), &json!("runner.rpc_timeout"), &json!(3)),
            (&json!(file_str), &json!("plugin[0].flavour"), &json!(8)),
        ],
        "{run}"
    );
}

/// A job or a service that clears `HOME` still gets a valid default: its `~/` sandbox paths
/// are under the password database's home (CI runs the tests so).
#[tokio::test]
async fn the_embedded_default_is_valid_without_home() {
    let sb = Sandbox::new();
    let run = run_utter(&["check-config", "--json"], &sb.env(None).without("HOME")).await;
    assert_eq!(run.code, Some(0), "{run}");
    let report = run.json();
    assert_eq!(report["ok"], true, "{run}");
    assert_eq!(report["errors"], json!([]), "{run}");
    assert!(!run.stdout.contains("is not an absolute path"), "{run}");
}

#[tokio::test]
async fn without_a_config_file_the_embedded_default_is_checked() {
    let sb = Sandbox::new();
    let run = run_utter(&["check-config", "--json"], &sb.env(None)).await;
    assert_eq!(run.code, Some(0), "{run}");
    let report = run.json();
    // Valid; the one thing it says is that voice waits for its model (none is installed in
    // the sandbox), naming the command that fixes it.
    assert_eq!(report["ok"], true, "{run}");
    assert_eq!(
        report["origin"], "<embedded data/config.default.toml>",
        "{run}"
    );
    assert_eq!(report["errors"], json!([]), "{run}");
    let warnings = report["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{run}");
    assert_eq!(warnings[0]["key"], "stt.model", "{run}");
    let message = warnings[0]["message"].as_str().unwrap();
    assert!(
        message.contains("plugins audio, stt will not start")
            && message.contains("utter models pull tiny.en"),
        "{run}"
    );
    // The same in text, and in `utter plugins`.
    let run = run_utter(&["check-config"], &sb.env(None)).await;
    assert!(
        run.stdout.contains("warning:") && run.stdout.contains("utter models pull tiny.en"),
        "{run}"
    );
}

#[tokio::test]
async fn a_plugin_whose_requirement_nobody_provides_is_reported_with_minus_32005() {
    let sb = Sandbox::new();
    let rules = bin("utter-rules").display().to_string();
    let test_plugin = bin("utter-test-plugin").display().to_string();
    let file = write_config(
        &sb,
        &format!(
            "config_version = 1\n{}{}",
            plugin_entry("rules", "router", &rules, &[]),
            plugin_entry(
                "lonely",
                "action",
                &test_plugin,
                &["--requires", "perception.a11y@1"]
            ),
        ),
    );
    let file_str = file.display().to_string();

    let run = run_utter(&["plugins", "--json", "--config", &file_str], &sb.env(None)).await;
    assert_eq!(run.code, Some(4), "{run}");
    let plugins = run.json();
    let find = |id: &str| -> &Value {
        plugins
            .as_array()
            .expect("an array of plugins")
            .iter()
            .find(|p| p["id"] == id)
            .unwrap_or_else(|| panic!("{id} is listed: {run}"))
    };
    assert_eq!(find("rules")["status"], "ok", "{run}");
    let lonely = find("lonely");
    assert_eq!(lonely["status"], "error", "{run}");
    assert_eq!(lonely["requires"], json!(["perception.a11y@1"]), "{run}");
    let last_error = lonely["last_error"].as_str().unwrap_or("");
    assert!(
        last_error.contains("-32005") && last_error.contains("perception.a11y@1"),
        "{run}"
    );
}

#[tokio::test]
async fn a_router_program_that_does_not_exist_is_a_runner_failure() {
    let sb = Sandbox::new();
    let desktop = bin("utter-desktop").display().to_string();
    // A bare name: looked up beside `utter`, then on PATH; found in neither.
    let file = write_config(
        &sb,
        &format!(
            "config_version = 1\n{}{}",
            plugin_entry("rules", "router", "utter-no-such-router", &[]),
            plugin_entry("desktop", "action", &desktop, &[]),
        ),
    );
    let file_str = file.display().to_string();

    let run = run_utter(
        &["say", "open youtube", "--config", &file_str],
        &sb.env(None),
    )
    .await;
    assert_eq!(run.code, Some(4), "{run}");
    assert_mentions(
        &run.stderr,
        &[
            "no router plugin is running",
            "plugin rules is error",
            "cannot start plugin \"rules\": program not found: utter-no-such-router",
            "looked beside the utter binary and on PATH",
        ],
        &run,
    );
    assert!(run.stdout.is_empty(), "{run}");
}

/// The embedded default names every plugin Utter ships; on a machine with only some of
/// them installed, a command runs with those and says nothing of the rest, while `utter
/// plugins` names each missing program and how to install it. A plugin the user's own
/// config names is still a warning when its program is missing.
#[tokio::test]
async fn the_default_config_skips_a_plugin_that_is_not_installed_without_a_warning() {
    let sb = Sandbox::new();
    let dir = sb.path("bin");
    std::fs::create_dir_all(&dir).expect("bin dir");
    // utter with the router and the action plugins beside it, and no utter-input.
    for program in ["utter", "utter-rules", "utter-desktop", "utter-compositor"] {
        std::fs::copy(bin(program), dir.join(program)).expect("copy a binary");
    }
    let utter = dir.join("utter");
    let run = run_utter_at(&utter, &["say", "open youtube", "--dry-run"], &sb.env(None)).await;
    assert!(run.stdout.contains("ensure_url"), "{run}");
    for noise in ["WARN", "failed to start", "utter-input"] {
        assert!(!run.stderr.contains(noise), "{noise:?} on stderr: {run}");
    }
    let plugins = run_utter_at(&utter, &["plugins"], &sb.env(None)).await;
    assert_mentions(
        &plugins.stdout,
        &[
            "input",
            "program not found: utter-input",
            "cargo install --path plugins/input",
        ],
        &plugins,
    );
    // A degraded plugin says why under its line (here the compositor plugin finds no
    // compositor: the sandbox sets no NIRI_SOCKET or SWAYSOCK).
    assert!(
        plugins
            .stdout
            .lines()
            .any(|l| l.starts_with("compositor") && l.contains("degraded")),
        "{plugins}"
    );
    assert!(
        plugins.stdout.contains("why: no compositor found"),
        "{plugins}"
    );
    // Named in the user's own file, the same missing program is a warning.
    let file = write_config(
        &sb,
        &format!(
            "config_version = 1\n{}{}",
            plugin_entry(
                "rules",
                "router",
                &bin("utter-rules").display().to_string(),
                &[]
            ),
            plugin_entry("input", "action", "utter-input", &[]),
        ),
    );
    let file = file.display().to_string();
    let own = run_utter_at(
        &utter,
        &["say", "open youtube", "--dry-run", "--config", &file],
        &sb.env(None),
    )
    .await;
    assert_mentions(
        &own.stderr,
        &["WARN", "program not found: utter-input"],
        &own,
    );
}

#[tokio::test]
async fn help_lists_the_exit_codes_and_the_say_options() {
    let sb = Sandbox::new();
    let env = sb.env(None);

    let run = run_utter(&["--help"], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    let after = run
        .stdout
        .split_once("Exit codes:")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no exit codes: {run}"));
    for code in 0..=4 {
        assert!(
            after
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{code} "))),
            "exit code {code} is not listed: {run}"
        );
    }

    let run = run_utter(&["say", "--help"], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert_mentions(&run.stdout, &["--dry-run", "--json"], &run);
}

#[test]
fn a_stdout_that_cannot_be_written_is_exit_4_not_a_panic() {
    let sb = Sandbox::new();
    // The dry run names what would open the URL: something must.
    sb.install_url_recorder();
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full exists");
    let mut cmd = std::process::Command::new(common::bin("utter"));
    cmd.args(["say", "open youtube", "--dry-run", "--json"])
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(full)
        .stderr(std::process::Stdio::piped());
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    sb.env(None).apply(&mut cmd);
    let out = cmd.output().expect("utter runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[tokio::test]
async fn eval_scores_a_corpus_against_the_configured_router() {
    let sb = Sandbox::new();
    let env = sb.env(None);
    let corpus = sb.write(
        "corpus.toml",
        "[[case]]\ncategory = \"sites\"\nsay = \"open youtube\"\n\
         expect = [{ op = \"ensure_url\", args = { url = \"https://www.youtube.com\" } }]\n\n\
         [[case]]\ncategory = \"browser\"\nsay = \"new tab\"\nfocused = \"firefox\"\n\
         expect = [{ op = \"key\", args = { chord = \"ctrl+t\" } }]\n\n\
         [[case]]\ncategory = \"browser\"\nsay = \"new tab\"\nfocused = \"foot\"\n\
         expect = [{ op = \"key\", args = { chord = \"ctrl+t\" } }]\n\n\
         [[case]]\ncategory = \"negative\"\nsay = \"tell me a joke\"\nescalate = \"no_rule\"\n",
    );
    let path = corpus.to_str().unwrap();
    let run = run_utter(&["eval", path], &env).await;
    // One case is written wrong on purpose: "new tab" in a terminal plans nothing.
    assert_eq!(run.code, Some(1), "{run}");
    assert!(run.stdout.contains("against router rules"), "{run}");
    assert!(
        run.stdout
            .lines()
            .any(|l| l.starts_with("browser") && l.contains(" 2 ") && l.contains("50.0%")),
        "{run}"
    );
    assert!(
        run.stdout
            .contains("miss [browser] \"new tab\" (focused foot): false_escalation"),
        "{run}"
    );
    let run = run_utter(&["eval", path, "--json"], &env).await;
    let report = run.json();
    assert_eq!(report["total"]["cases"], 4, "{run}");
    assert_eq!(report["total"]["right"], 3, "{run}");
    assert_eq!(report["total"]["false_escalations"], 1, "{run}");
    assert_eq!(report["categories"]["negative"]["right"], 1, "{run}");

    // A corpus that does not parse names the file and line, exit 3.
    let bad = sb.write("bad.toml", "[[case]]\ncategory = \"x\"\nsay = 5\n");
    let run = run_utter(&["eval", bad.to_str().unwrap()], &env).await;
    assert_eq!(run.code, Some(3), "{run}");
    assert!(
        run.stderr.contains("bad.toml") && run.stderr.contains("line 3"),
        "{run}"
    );
}

#[tokio::test]
async fn profiles_lists_built_in_and_own_profiles_and_names_a_broken_file() {
    let sb = Sandbox::new();
    let env = sb.env(None);
    let run = run_utter(&["profiles", "--json"], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    let ids: Vec<String> = run.json()["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_owned())
        .collect();
    for id in ["firefox", "chromium", "foot", "kitty", "vscode", "spotify"] {
        assert!(ids.contains(&id.to_owned()), "{id}: {run}");
    }
    sb.write(
        "config/utter/profiles/firefox.toml",
        "id = \"firefox\"\nname = \"My Firefox\"\nkind = \"browser\"\napp_ids = [\"firefox\"]\n[shortcuts]\n\"new tab\" = \"ctrl+alt+t\"\n",
    );
    sb.write(
        "config/utter/profiles/broken.toml",
        "id = \"broken\"\nname = \"B\"\nkind = \"app\"\n[shortcuts]\n\"go\" = \"ctrl+nosuchkey\"\n",
    );
    let run = run_utter(&["profiles"], &env).await;
    assert_eq!(run.code, Some(3), "{run}");
    assert!(
        run.stdout.contains("My Firefox"),
        "the user's replaces the built-in one: {run}"
    );
    assert!(run.stderr.contains("broken.toml:5:"), "{run}");
    assert!(run.stderr.contains("nosuchkey"), "{run}");
    // The router plans with the user's profile.
    let corpus = sb.write(
        "mine.toml",
        "[[case]]\ncategory = \"browser\"\nsay = \"new tab\"\nfocused = \"firefox\"\n\
         expect = [{ op = \"key\", args = { chord = \"ctrl+alt+t\" } }]\n",
    );
    let run = run_utter(&["eval", corpus.to_str().unwrap()], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
}

#[tokio::test]
async fn eval_counts_a_case_the_router_refuses_as_a_miss_and_goes_on() {
    let sb = Sandbox::new();
    let env = sb.env(None);
    let long = "a".repeat(5000);
    let corpus = sb.write(
        "corpus.toml",
        &format!(
            "[[case]]\ncategory = \"x\"\nsay = \"{long}\"\n\n\
             [[case]]\ncategory = \"x\"\nsay = \"pause\"\nexpect = [{{ op = \"media\" }}]\n"
        ),
    );
    let run = run_utter(&["eval", corpus.to_str().unwrap(), "--json"], &env).await;
    assert_eq!(run.code, Some(1), "{run}");
    let report = run.json();
    assert_eq!(report["total"]["cases"], 2, "{run}");
    assert_eq!(report["total"]["right"], 1, "{run}");
    assert!(
        report["misses"][0]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("-32602")),
        "{run}"
    );
}

#[tokio::test]
async fn a_misheard_name_asks_did_you_mean_and_nothing_runs_unanswered() {
    let sb = Sandbox::new();
    let env = sb.env(None);
    // "gate hub" is GitHub in the ask tier: the step needs a yes, and with no terminal to
    // answer (stdin is not one) it is denied with the question in the message.
    let run = run_utter(&["say", "--local", "--json", "open gate hub"], &env).await;
    assert_eq!(run.code, Some(1), "{run}");
    let outcome = run.json();
    assert_eq!(outcome["plan"]["rule"], "decide", "{run}");
    assert_eq!(
        outcome["plan"]["steps"][0]["ask"], "did you mean GitHub?",
        "{run}"
    );
    assert_eq!(outcome["plan"]["steps"][0]["confirm"], true, "{run}");
    let message = outcome["results"][0]["error"]["message"]
        .as_str()
        .unwrap_or("");
    assert!(
        message.contains("did you mean GitHub? (open URL https://github.com)"),
        "{run}"
    );
    // With [decide] ask above the match's confidence the router only names the closest.
    let utter = bin("utter");
    let config = write_config(
        &sb,
        &format!(
            "config_version = 1\n[decide]\nact = 0.95\nask = 0.9\n\n{}",
            plugin_entry(
                "rules",
                "router",
                utter.to_str().unwrap(),
                &["plugin", "rules"]
            )
        ),
    );
    let run = run_utter(
        &[
            "--config",
            config.to_str().unwrap(),
            "say",
            "--local",
            "--json",
            "open gate hub",
        ],
        &env,
    )
    .await;
    let outcome = run.json();
    assert_eq!(outcome["plan"]["steps"], json!([]), "{run}");
    assert_eq!(outcome["plan"]["escalate"]["reason"], "unsure", "{run}");
    // A broken [decide] is a config error with the line.
    let bad = write_config(&sb, "config_version = 1\n[decide]\nact = 0.5\nask = 0.7\n");
    let run = run_utter(&["check-config", bad.to_str().unwrap()], &env).await;
    assert_eq!(run.code, Some(3), "{run}");
    assert!(
        run.stderr.contains("decide.ask") || run.stdout.contains("decide.ask"),
        "{run}"
    );
}

/// A config with the rules router, the desktop plugin and the chooser plugin against
/// `server` (`extra` goes into `[llm]` after its endpoint, or before it when it opens a table
/// of its own), and the sandbox's environment.
fn chooser_config(
    sb: &Sandbox,
    server: &openai::Server,
    extra: &str,
) -> (PathBuf, common::ChildEnv) {
    let utter = bin("utter");
    let utter = utter.to_str().unwrap();
    let llm = bin("utter-llm");
    let (before, after) = if extra.starts_with('[') {
        (extra, "")
    } else {
        ("", extra)
    };
    let config = write_config(
        sb,
        &format!(
            "config_version = 1\n{before}[llm]\nendpoint = \"{}\"\n{after}\n{}\n{}\n{}",
            server.url,
            plugin_entry("rules", "router", utter, &["plugin", "rules"]),
            plugin_entry("desktop", "action", utter, &["plugin", "desktop"]),
            plugin_entry("llm", "llm", llm.to_str().unwrap(), &[]),
        ),
    );
    (config, sb.env(None))
}

/// `utter --config CONFIG say --local --json WORDS`.
async fn say_json(config: &std::path::Path, env: &common::ChildEnv, words: &str) -> UtterRun {
    run_utter(
        &[
            "--config",
            config.to_str().unwrap(),
            "say",
            "--local",
            "--json",
            words,
        ],
        env,
    )
    .await
}

#[tokio::test]
async fn a_chooser_picks_among_near_names_and_its_pick_is_asked_about() {
    let sb = Sandbox::new();
    // The dry run names what would open the URL: something must.
    sb.install_url_recorder();
    let server = openai::Server::start();
    let (config, env) = chooser_config(&sb, &server, "api_model = \"biased\"\n");
    let say = |words| say_json(&config, &env, words);
    // "nearly wiki" is near both Arch Wiki and niri wiki: the chooser picks, the person is
    // asked (no terminal answers here, so it is denied with the question).
    let run = say("open nearly wiki").await;
    let outcome = run.json();
    let step = &outcome["results"][0];
    assert_eq!(step["selected_by"]["method"], "llm.choose", "{run}");
    assert_eq!(step["selected_by"]["plugin"], "llm", "{run}");
    assert_eq!(
        outcome["plan"]["steps"][0]["ask"], "did you mean Arch Wiki?",
        "{run}"
    );
    assert!(
        step["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("did you mean Arch Wiki?")),
        "{run}"
    );
    assert_eq!(run.code, Some(1), "{run}");
    // The chooser was asked with the near candidates only, and never with their arguments
    // to write: the numbered labels.
    let asked = server.requests.lock().unwrap().clone();
    let user = asked[0].1["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        user.contains("1. open Arch Wiki") && user.contains("open niri wiki"),
        "{user}"
    );
    assert!(!user.contains("https://"), "{user}");
    // A clear name acts without asking anyone.
    let before = server.requests.lock().unwrap().len();
    let run = run_utter(
        &[
            "--config",
            config.to_str().unwrap(),
            "say",
            "--local",
            "--json",
            "--dry-run",
            "open github",
        ],
        &env,
    )
    .await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(run.json()["results"][0]["selected_by"].is_null(), "{run}");
    assert_eq!(
        server.requests.lock().unwrap().len(),
        before,
        "the chooser was not asked"
    );
}

#[tokio::test]
async fn the_planner_proposes_only_when_no_rule_matched_and_its_steps_are_asked_about() {
    let sb = Sandbox::new();
    // The dry run names what would open the URL: something must.
    sb.install_url_recorder();
    let server = openai::Server::start();
    let (config, env) = chooser_config(&sb, &server, "[decide]\nplanner = true\n");
    let say = |words| say_json(&config, &env, words);
    let run = say("show me where the rust language lives online").await;
    let outcome = run.json();
    assert_eq!(outcome["plan"]["rule"], "planner", "{run}");
    let step = &outcome["plan"]["steps"][0];
    assert_eq!(step["op"], "open_url", "{run}");
    assert_eq!(step["confirm"], true, "{run}");
    // Nobody answers the question here: nothing opened.
    assert_eq!(outcome["results"][0]["ok"], false, "{run}");
    assert!(
        outcome["results"][0]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("the language model proposes this")),
        "{run}"
    );
    // A proposal outside the vocabulary is refused by the plugin; the escalation stays and
    // says so.
    let run = say("wipe my home directory please").await;
    let outcome = run.json();
    assert_eq!(outcome["plan"]["steps"], json!([]), "{run}");
    let message = outcome["plan"]["escalate"]["message"]
        .as_str()
        .unwrap_or("");
    assert!(
        message.contains("the planner \"llm\" failed") && message.contains("not offered"),
        "{run}"
    );
    // A command a rule plans never reaches the planner.
    let before = server.requests.lock().unwrap().len();
    let run = run_utter(
        &[
            "--config",
            config.to_str().unwrap(),
            "say",
            "--local",
            "--json",
            "--dry-run",
            "open github",
        ],
        &env,
    )
    .await;
    assert_eq!(run.code, Some(0), "{run}");
    assert_eq!(server.requests.lock().unwrap().len(), before);
}

/// Entrypoints that can never start are errors in `check-config` (a directory, a file
/// without the execute permission, a link to nothing); one not installed yet is a warning
/// that says how to fix it. A config file that is a dangling link is an error, not a silent
/// fall back to the built-in default.
#[tokio::test]
async fn check_config_refuses_unstartable_entrypoints_and_dangling_config_links() {
    let sb = Sandbox::new();
    let dir = sb.path("a-directory");
    std::fs::create_dir_all(&dir).unwrap();
    let plain = sb.write("not-a-program", "just text\n");
    let link = sb.path("dangling");
    std::os::unix::fs::symlink(sb.path("nowhere"), &link).unwrap();
    for (program, needle) in [
        (dir.display().to_string(), "is a directory"),
        (plain.display().to_string(), "is not executable"),
        (link.display().to_string(), "symbolic link"),
    ] {
        let config = write_config(
            &sb,
            &format!(
                "config_version = 1\n{}",
                plugin_entry("p", "router", &program, &[])
            ),
        );
        let run = run_utter(
            &["check-config", &config.display().to_string(), "--json"],
            &sb.env(None),
        )
        .await;
        assert_eq!(run.code, Some(3), "{program}: {run}");
        let report = run.json();
        let error = report["errors"][0]["message"].as_str().unwrap_or_default();
        assert!(error.contains(needle), "{program}: {run}");
        assert_eq!(report["errors"][0]["key"], "plugin[0].entrypoint", "{run}");
    }
    let config = write_config(
        &sb,
        &format!(
            "config_version = 1\n{}",
            plugin_entry("p", "router", "utter-no-such-plugin-program", &[])
        ),
    );
    let run = run_utter(
        &["check-config", &config.display().to_string(), "--json"],
        &sb.env(None),
    )
    .await;
    assert_eq!(run.code, Some(0), "{run}");
    let warning = run.json()["warnings"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(warning.contains("program not found"), "{run}");
    assert!(
        warning.contains("install it") && warning.contains("[plugins] disabled"),
        "{run}"
    );

    // The user's config file is a link to nothing: an error naming the link, at start too.
    let user_config = sb.path("config/utter/config.toml");
    std::fs::create_dir_all(user_config.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(sb.path("gone.toml"), &user_config).unwrap();
    let run = run_utter(&["check-config"], &sb.env(None)).await;
    assert_eq!(run.code, Some(3), "{run}");
    assert!(run.stdout.contains("symbolic link"), "{run}");
    let run = run_utter(
        &["say", "open youtube", "--dry-run", "--local"],
        &sb.env(None),
    )
    .await;
    assert_eq!(
        run.code,
        Some(3),
        "a dangling config link is not the default: {run}"
    );
}

/// `check-manifest` refuses what the runner would refuse at start (PROTOCOL.md §4, §11) and
/// warns about capabilities it does not know; the built-in plugins' manifests pass.
#[tokio::test]
async fn check_manifest_enforces_what_the_protocol_says_is_refused() {
    let sb = Sandbox::new();
    let base = |extra: &str, protocol: &str, abi: &str, runtime: &str| {
        format!(
            "name = \"pp\"\nversion = \"0.1.0\"\nkind = \"router\"\nprotocol = \"{protocol}\"\nabi = {abi}\nruntime = \"{runtime}\"\ntransport = \"stdio\"\nentrypoint = [\"p\"]\n{extra}"
        )
    };
    for (text, needle) in [
        (base("", "1.0", "2", "subprocess"), "abi:"),
        (base("", "2.0", "1", "subprocess"), "protocol:"),
        (base("", "1.0", "1", "wasm"), "runtime:"),
        (
            base("min_runner = \"banana\"\n", "1.0", "1", "subprocess"),
            "min_runner:",
        ),
        (
            base("min_runner = \">=99.0\"\n", "1.0", "1", "subprocess"),
            "needs a runner >=99.0",
        ),
    ] {
        let path = sb.write("utter-plugin.toml", &text);
        let run = run_utter(
            &["check-manifest", &path.display().to_string(), "--json"],
            &sb.env(None),
        )
        .await;
        assert_eq!(run.code, Some(3), "{text}\n{run}");
        let report = run.json();
        assert_eq!(report[0]["ok"], false, "{run}");
        let errors = report[0]["errors"].to_string();
        assert!(errors.contains(needle), "{needle}: {run}");
    }
    let path = sb.write(
        "utter-plugin.toml",
        &base(
            "provides = [\"router.plan@1\", \"router.telepathy@1\"]\n",
            "1.0",
            "1",
            "subprocess",
        ),
    );
    let run = run_utter(
        &["check-manifest", &path.display().to_string()],
        &sb.env(None),
    )
    .await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        run.stdout
            .contains("warning: provides: unknown capability \"router.telepathy@1\""),
        "{run}"
    );
    assert!(run.stdout.contains(": OK"), "{run}");
    // Every manifest in the tree passes.
    let root = common::repo_root();
    let mut manifests: Vec<String> = std::fs::read_dir(root.join("plugins"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("utter-plugin.toml"))
        .filter(|p| p.exists())
        .map(|p| p.display().to_string())
        .collect();
    manifests.sort();
    let mut args = vec!["check-manifest".to_string()];
    args.extend(manifests);
    let run = run_utter(&args, &sb.env(None)).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(!run.stdout.contains("warning"), "{run}");
}

/// `utter config migrate` rewrites the older runner's format (no `config_version`) to the
/// current one: a dry run writes nothing, the real run keeps every comment and a backup, a
/// current file is left alone, and a newer one is refused.
#[tokio::test]
async fn config_migrate_keeps_every_comment_and_refuses_what_it_cannot_read() {
    let sb = Sandbox::new();
    let old = "# Utter, as the older runner read it\n\n[runner]\n# calls may take a while\nrpc_timeout_ms = 20000 # twice the default\n\n[security]\nenforce = \"false\"  # a string, as the older runner allowed\n\n[[plugin]]\n# the router\nid = \"rules\"\nkind = \"router\"\nentrypoint = [\"utter\", \"plugin\", \"rules\"]\n";
    let config = write_config(&sb, old);
    let path = config.display().to_string();
    let comments: Vec<&str> = old
        .lines()
        .filter_map(|l| l.find('#').map(|i| &l[i..]))
        .collect();

    let dry = run_utter(&["config", "migrate", &path, "--dry-run"], &sb.env(None)).await;
    assert_eq!(dry.code, Some(0), "{dry}");
    assert_mentions(
        &dry.stdout,
        &["would migrate", "config_version = 1", "dry run"],
        &dry,
    );
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        old,
        "a dry run writes nothing"
    );

    let run = run_utter(&["config", "migrate", &path, "--json"], &sb.env(None)).await;
    assert_eq!(run.code, Some(0), "{run}");
    let report = run.json();
    assert_eq!(
        (report["from"].clone(), report["to"].clone()),
        (json!(0), json!(1)),
        "{run}"
    );
    assert_eq!(report["written"], true, "{run}");
    let migrated = std::fs::read_to_string(&config).unwrap();
    for comment in &comments {
        assert!(migrated.contains(comment), "{comment:?} lost:\n{migrated}");
    }
    assert!(migrated.contains("config_version = 1"), "{migrated}");
    assert!(migrated.contains("enforce = false"), "{migrated}");
    assert_eq!(
        std::fs::read_to_string(format!("{path}.v0.bak")).unwrap(),
        old,
        "the original is kept"
    );
    let check = run_utter(&["check-config", &path, "--json"], &sb.env(None)).await;
    assert_eq!(check.code, Some(0), "{check}");
    assert!(
        !check.stdout.contains("no config_version"),
        "the migrated file is current: {check}"
    );

    let again = run_utter(&["config", "migrate", &path], &sb.env(None)).await;
    assert_eq!(again.code, Some(0), "{again}");
    assert!(again.stdout.contains("already"), "{again}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), migrated);

    let newer = write_config(&sb, "config_version = 7\n");
    let run = run_utter(
        &["config", "migrate", &newer.display().to_string()],
        &sb.env(None),
    )
    .await;
    assert_eq!(run.code, Some(3), "{run}");
    assert!(run.stderr.contains("newer than this runner reads"), "{run}");
    assert_eq!(
        std::fs::read_to_string(&newer).unwrap(),
        "config_version = 7\n"
    );
}

/// `utter config migrate` refuses what is not a regular file (a FIFO would block it for
/// ever), writes through a symbolic link (the link stays), puts the version on its own line
/// after a last comment without a newline, and never overwrites an earlier backup.
#[tokio::test]
async fn config_migrate_refuses_special_files_and_keeps_links_and_backups() {
    let sb = Sandbox::new();
    let fifo = sb.path("fifo.toml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let run = run_utter(
        &["config", "migrate", &fifo.display().to_string()],
        &sb.env(None),
    )
    .await;
    assert_eq!(run.code, Some(3), "{run}");
    assert!(run.stderr.contains("FIFO"), "{run}");

    let target = write_config(&sb, "# only a comment, no newline");
    let link = sb.path("link.toml");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    std::fs::write(format!("{}.v0.bak", target.display()), "an older backup").unwrap();
    let run = run_utter(
        &["config", "migrate", &link.display().to_string()],
        &sb.env(None),
    )
    .await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        link.symlink_metadata().unwrap().file_type().is_symlink(),
        "the link stays a link"
    );
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "# only a comment, no newline\nconfig_version = 1\n\n"
    );
    assert_eq!(
        std::fs::read_to_string(format!("{}.v0.bak", target.display())).unwrap(),
        "an older backup",
        "an earlier backup is kept"
    );
    assert_eq!(
        std::fs::read_to_string(format!("{}.v0.bak.1", target.display())).unwrap(),
        "# only a comment, no newline"
    );
}

/// `utter config set` changes one value in place, comments kept; a value the checker refuses,
/// a key through an array of tables and a broken file are refused with file:line and nothing
/// is written; a missing file is created as a valid config.
#[tokio::test]
async fn config_set_edits_in_place_and_writes_nothing_it_would_refuse() {
    let sb = Sandbox::new();
    let env = sb.env(None);
    let text = "config_version = 1\n# mine\n[ptt]\nevdev = false   # not yet\nevdev_key = \"KEY_F13\"  # thumb\n";
    let path = sb.write("edit.toml", text);
    let config = path.display().to_string();
    let set = |args: &[&str]| {
        let mut all = vec!["config", "set"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--config", &config]);
        all.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };

    let run = run_utter(&set(&["ptt.evdev", "true"]), &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(run.stdout.contains("set ptt.evdev = true"), "{run}");
    let run = run_utter(&set(&["ptt.evdev_key", "KEY_PAUSE", "--json"]), &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert_eq!(run.json()["written"], true, "{run}");
    assert_eq!(run.json()["value"], "\"KEY_PAUSE\"", "{run}");
    let now = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        now,
        text.replace("evdev = false   # not yet", "evdev = true   # not yet")
            .replace("\"KEY_F13\"  # thumb", "\"KEY_PAUSE\"  # thumb")
    );
    // The same value again: nothing to do.
    let run = run_utter(&set(&["ptt.evdev", "true"]), &env).await;
    assert!(run.stdout.contains("already"), "{run}");
    // A dry run prints the text and writes nothing.
    let run = run_utter(&set(&["ptt.min_hold_ms", "200", "--dry-run"]), &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(run.stdout.contains("min_hold_ms = 200"), "{run}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), now);

    // Refused, with the line, and nothing written.
    for (args, needle) in [
        (&["ptt.evdev", "yes"][..], "edit.toml:4"),
        (&["ptt.min_hold_ms", "-5"][..], "edit.toml"),
        (&["plugin.id", "x"][..], "edit.toml"),
        (&["ptt", "1"][..], "names a table"),
        (&["ptt..evdev", "1"][..], "dotted key"),
    ] {
        let run = run_utter(&set(args), &env).await;
        assert_eq!(run.code, Some(3), "{args:?}: {run}");
        assert!(run.stderr.contains(needle), "{args:?}: {run}");
        assert!(run.stderr.contains("nothing was written"), "{run}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), now, "{args:?}");
    }
    let broken = sb.write("broken.toml", "config_version = 1\n[ptt\n");
    let run = run_utter(
        &[
            "config",
            "set",
            "ptt.evdev",
            "true",
            "--config",
            &broken.display().to_string(),
        ],
        &env,
    )
    .await;
    assert_eq!(run.code, Some(3), "{run}");
    assert!(run.stderr.contains("broken.toml:2"), "{run}");
    assert_eq!(
        std::fs::read_to_string(&broken).unwrap(),
        "config_version = 1\n[ptt\n"
    );

    // A file that does not exist yet is created, as a config the runner accepts.
    let fresh = sb.path("new/config.toml");
    let run = run_utter(
        &[
            "config",
            "set",
            "ptt.evdev",
            "true",
            "--config",
            &fresh.display().to_string(),
        ],
        &env,
    )
    .await;
    assert_eq!(run.code, Some(0), "{run}");
    let check = run_utter(&["check-config", &fresh.display().to_string()], &env).await;
    assert_eq!(check.code, Some(0), "{check}");

    // Quoted or bracketed keys are not read as TOML key syntax: refused.
    for key in ["\"ptt\".evdev", "plugin[0].id", "ptt. evdev"] {
        let run = run_utter(&set(&[key, "true"]), &env).await;
        assert_eq!(run.code, Some(3), "{key}: {run}");
        assert!(run.stderr.contains("dotted key"), "{key}: {run}");
    }
    // A key the runner does not read is refused: setting it would change nothing.
    let before = std::fs::read(&path).unwrap();
    let run = run_utter(&set(&["ptt.evdev_kye", "KEY_PAUSE"]), &env).await;
    assert_eq!(run.code, Some(3), "{run}");
    assert!(
        run.stderr
            .contains("ptt.evdev_kye: is not a key utter reads"),
        "{run}"
    );
    assert!(run.stderr.contains("nothing was written"), "{run}");
    assert_eq!(std::fs::read(&path).unwrap(), before);

    // A link is written through; a link to nothing is refused and stays a link.
    let target = sb.write("target.toml", "config_version = 1\n");
    let link = sb.path("link.toml");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let dangling = sb.path("dangling.toml");
    std::os::unix::fs::symlink(sb.path("missing.toml"), &dangling).unwrap();
    for (path, code) in [(&link, 0), (&dangling, 3)] {
        let run = run_utter(
            &[
                "config",
                "set",
                "ptt.evdev",
                "true",
                "--config",
                &path.display().to_string(),
            ],
            &env,
        )
        .await;
        assert_eq!(run.code, Some(code), "{run}");
        assert!(
            std::fs::symlink_metadata(path)
                .unwrap()
                .file_type()
                .is_symlink(),
            "{}",
            path.display()
        );
    }
    assert!(
        std::fs::read_to_string(&target)
            .unwrap()
            .contains("evdev = true")
    );
    assert!(!sb.path("missing.toml").exists());

    // Edits at the same time all land (the directory is locked from read to rename).
    let shared = sb.write("shared.toml", "config_version = 1\n[plugins]\n");
    let shared = shared.display().to_string();
    // Twelve keys the runner reads, each in range at 100 + i.
    const KEYS: [&str; 12] = [
        "runner.rpc_timeout_ms",
        "runner.confirm_timeout_ms",
        "runner.drain_timeout_ms",
        "runner.kill_timeout_ms",
        "runner.lossy_queue",
        "runner.credit_window",
        "audio.pre_roll_ms",
        "audio.end_silence_ms",
        "audio.vad.margin_ms",
        "audio.vad.min_speech_ms",
        "socket.idle_timeout_ms",
        "socket.frame_timeout_ms",
    ];
    let runs = KEYS.iter().enumerate().map(|(i, key)| {
        let env = env.clone();
        let args = vec![
            "config".to_owned(),
            "set".to_owned(),
            (*key).to_owned(),
            (100 + i).to_string(),
            "--config".to_owned(),
            shared.clone(),
        ];
        tokio::spawn(async move { run_utter(&args, &env).await })
    });
    for run in futures::future::join_all(runs).await {
        let run = run.unwrap();
        assert_eq!(run.code, Some(0), "{run}");
    }
    let text = std::fs::read_to_string(&shared).unwrap();
    let read: toml::Table = text.parse().unwrap();
    for (i, key) in KEYS.iter().enumerate() {
        let value = key
            .split('.')
            .try_fold(&read, |table, part| match table.get(part) {
                Some(toml::Value::Table(t)) => Ok(t),
                Some(v) => Err(Some(v)),
                None => Err(None),
            })
            .err()
            .flatten();
        assert_eq!(
            value.and_then(toml::Value::as_integer),
            Some(100 + i as i64),
            "{key} lost:\n{text}"
        );
    }
}

/// A reader that closed the pipe (`utter … | head -1`) took what it wanted: the command still
/// exits 0, where a failed write used to report 4 ("the runner could not do its job").
#[test]
fn a_closed_pipe_on_stdout_is_not_a_failure() {
    let sb = Sandbox::new();
    let config = sb.write(
        "utter.toml",
        &format!(
            "config_version = 1\n[[plugin]]\nid = \"t\"\nkind = \"router\"\nentrypoint = {}\n",
            json!([bin("utter-test-plugin").display().to_string()])
        ),
    );
    // The read end is closed before the program starts: its first write fails with EPIPE.
    let (read, write) = nix::unistd::pipe().unwrap();
    drop(read);
    let mut command = std::process::Command::new(bin("utter"));
    command.args(["check-config", &config.display().to_string()]);
    sb.env(None).apply(&mut command);
    let status = command
        .stdout(std::process::Stdio::from(write))
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0), "{status}");
}

/// The first day (issue 30): on a fresh account `utter config set` of one key writes that
/// key alone (the file is layered over the default), and a reload keeps every plugin; a file written by
/// hand with one setting runs the built-in plugins too; a config that would leave no router
/// is refused by `utter reload`, and the running one stays.
#[tokio::test]
async fn one_changed_setting_never_stops_the_assistant() {
    let sb = Sandbox::new();
    let env = common::daemon::env(&sb, "state");
    let daemon = common::daemon::Daemon::start_default(&sb).await;
    let plugins = |status: &Value| -> Vec<String> {
        status["plugins"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["id"].as_str().map(str::to_owned))
            .collect()
    };
    let before = run_utter(&["status", "--json"], &env).await;
    assert_eq!(before.code, Some(0), "{before}");
    let before = plugins(&before.json());
    assert!(before.contains(&"rules".to_owned()), "{before:?}");

    // 1. One key, on a fresh account (no config file yet).
    // (A directory that is not there: the speech plugins stay off, as before.)
    let model = sb.path("models/my-whisper");
    let set = run_utter(
        &["config", "set", "stt.model", &model.display().to_string()],
        &env,
    )
    .await;
    assert_eq!(set.code, Some(0), "{set}");
    let file = sb.path("config/utter/config.toml");
    let text = std::fs::read_to_string(&file).expect("config set wrote the file");
    // The one key and nothing else: the default's plugins are inherited, not copied.
    assert!(!text.contains("id = \"rules\""), "{text}");
    assert!(
        text.contains("[stt]") && text.contains("my-whisper"),
        "{text}"
    );
    let check = run_utter(&["check-config", "--json"], &env).await;
    assert_eq!(check.json()["ok"], true, "{check}");
    let reload = run_utter(&["reload", "--json"], &env).await;
    assert_eq!(reload.code, Some(0), "{reload}");
    assert_eq!(reload.json()["removed"], json!([]), "{reload}");
    // Nothing that ran before is gone (a model directory now named starts the speech
    // plugins as well).
    let after = run_utter(&["status", "--json"], &env).await;
    let now = plugins(&after.json());
    assert!(before.iter().all(|p| now.contains(p)), "{before:?} {now:?}");
    let say = run_utter(&["say", "open youtube", "--dry-run", "--json"], &env).await;
    assert_eq!(say.json()["plan"]["router"], "rules", "{say}");

    // 2. A file written by hand with one setting: the built-in plugins run.
    std::fs::write(&file, "config_version = 1\n[ptt]\nmin_hold_ms = 200\n").unwrap();
    let reload = run_utter(&["reload", "--json"], &env).await;
    assert_eq!(reload.code, Some(0), "{reload}");
    let after = run_utter(&["status", "--json"], &env).await;
    assert_eq!(plugins(&after.json()), before, "{after}");

    // 3. A config with no router: refused, and the running config stays.
    std::fs::write(
        &file,
        format!(
            "config_version = 1\n{}",
            plugin_entry(
                "fake_rs",
                "action",
                &bin("fake_rs").display().to_string(),
                &[]
            )
        ),
    )
    .unwrap();
    let check = run_utter(&["check-config"], &env).await;
    assert!(
        check.stdout.contains("no [[plugin]] of kind \"router\""),
        "{check}"
    );
    let reload = run_utter(&["reload"], &env).await;
    assert_eq!(reload.code, Some(3), "{reload}");
    assert!(reload.stderr.contains("runs no router plugin"), "{reload}");
    let after = run_utter(&["status", "--json"], &env).await;
    assert_eq!(plugins(&after.json()), before, "{after}");
    let say = run_utter(&["say", "open youtube", "--dry-run", "--json"], &env).await;
    assert_eq!(say.json()["plan"]["router"], "rules", "{say}");

    // 4. The router disabled, or left with only the compositor bundle: refused the same.
    std::fs::write(
        &file,
        "config_version = 1\n[plugins]\ndisabled = [\"rules\"]\n",
    )
    .unwrap();
    let reload = run_utter(&["reload"], &env).await;
    assert_eq!(reload.code, Some(3), "{reload}");
    assert!(reload.stderr.contains("runs no router plugin"), "{reload}");

    // 5. A router that does not start (its program exits at once): the previous config
    // runs again and says so.
    std::fs::write(
        &file,
        "config_version = 1\n[[plugin]]\nid = \"broken\"\nkind = \"router\"\nentrypoint = [\"/bin/false\"]\n",
    )
    .unwrap();
    let reload = run_utter(&["reload"], &env).await;
    assert_eq!(reload.code, Some(3), "{reload}");
    assert!(
        reload
            .stderr
            .contains("no router plugin of this config started")
            && reload.stderr.contains("previous config runs again"),
        "{reload}"
    );
    let say = run_utter(&["say", "open youtube", "--dry-run", "--json"], &env).await;
    assert_eq!(say.json()["plan"]["router"], "rules", "{say}");
    drop(daemon);
}

/// The person's own commands (issue 30): `~/.config/utter/commands.toml` names a phrase once,
/// and the router plans it whatever is focused (a browser, a terminal, nothing), before its
/// own rules; `utter profiles` shows the file.
#[tokio::test]
async fn a_global_command_of_ones_own_plans_in_any_focused_app() {
    let sb = Sandbox::new();
    let env = sb.env(None);
    sb.write(
        "config/utter/commands.toml",
        "[commands]\n\"run tests\" = { op = \"terminal\", args = { command = \"cargo test\" } }\n\"ship it\" = \"ctrl+shift+p\"\n",
    );
    let mut corpus = String::new();
    for focused in ["", "firefox", "foot", "code"] {
        let focus = if focused.is_empty() {
            String::new()
        } else {
            format!("focused = \"{focused}\"\n")
        };
        corpus.push_str(&format!(
            "[[case]]\ncategory = \"own\"\nsay = \"run tests\"\n{focus}expect = [{{ op = \"terminal\", args = {{ command = \"cargo test\" }} }}]\n\n\
             [[case]]\ncategory = \"own\"\nsay = \"ship it\"\n{focus}expect = [{{ op = \"key\", args = {{ chord = \"ctrl+shift+p\" }} }}]\n\n"
        ));
    }
    let corpus = sb.write("own.toml", &corpus);
    let run = run_utter(&["eval", corpus.to_str().unwrap(), "--json"], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert_eq!(run.json()["total"]["right"], 8, "{run}");
    let listed = run_utter(&["profiles", "--json"], &env).await;
    assert_eq!(listed.code, Some(0), "{listed}");
    assert_eq!(
        listed.json()["commands"],
        json!(["run tests", "ship it"]),
        "{listed}"
    );
    // A bad file is named with its line, and `utter profiles` exits 3.
    sb.write(
        "config/utter/commands.toml",
        "[commands]\n\"x\" = \"ctrl+nokey\"\n",
    );
    let listed = run_utter(&["profiles"], &env).await;
    assert_eq!(listed.code, Some(3), "{listed}");
    assert!(listed.stderr.contains("commands.toml:2:"), "{listed}");
}

/// The names of `utter commands --json`'s categories, in order.
fn category_names(answer: &Value) -> Vec<String> {
    answer["categories"]
        .as_array()
        .expect("categories")
        .iter()
        .map(|c| c["name"].as_str().expect("a name").to_owned())
        .collect()
}

/// "What can I say here?" (issue 29 item 6) with the rules router and no compositor: the
/// kinds of command that work anywhere, from the router itself, and nothing about a focused
/// window; the same for people, without --local when no service runs.
#[tokio::test]
async fn commands_lists_what_the_rules_router_understands() {
    let sb = Sandbox::new();
    let env = sb.env(None);
    let utter = bin("utter").display().to_string();
    let file = write_config(
        &sb,
        &format!(
            "config_version = 1\n{}",
            plugin_entry("rules", "router", &utter, &["plugin", "rules"])
        ),
    );
    let config = file.to_str().unwrap();
    let run = run_utter(&["commands", "--json", "--local", "--config", config], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    let answer = run.json();
    let names = category_names(&answer);
    for name in [
        "Websites",
        "Search",
        "Keys",
        "Media",
        "Windows and workspaces",
    ] {
        assert!(names.iter().any(|n| n == name), "{name}: {run}");
    }
    assert_eq!(names[0], "Websites", "no focused category first: {run}");
    assert!(
        !names
            .iter()
            .any(|n| n == "Compositor actions (niri)" || n == "In Firefox"),
        "{run}"
    );
    let websites = &answer["categories"][0]["examples"];
    assert!(
        websites
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["say"] == "open youtube" && e["op"] == "ensure_url"),
        "{run}"
    );
    // No context plugin: said on stderr, and not a failure.
    assert!(run.stderr.contains("no desktop context"), "{run}");

    // For people; no service listens in the sandbox, so the plugins are asked here.
    let run = run_utter(&["commands", "--config", config], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines[0], "Websites", "{run}");
    assert!(lines[1].starts_with("Open a site"), "{run}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("  open youtube ") && l.ends_with("→ ensure_url")),
        "{run}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("  copy ") && l.ends_with("→ key (with foot focused)")),
        "{run}"
    );
}

/// With niri (the fake one) and Firefox focused, the compositor plugin's context reaches the
/// router: Firefox's own commands first, then the niri actions; `--all` adds every other
/// application's, each marked with the window it needs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_put_the_focused_application_and_the_compositor_first() {
    let niri = crate::niri_server::FakeNiri::start().await;
    let sb = Sandbox::new();
    let env = sb.env(None);
    let utter = bin("utter").display().to_string();
    let plugin_env = format!(
        "env = {{ NIRI_SOCKET = {:?}, SWAYSOCK = \"\" }}\n",
        niri.socket().display().to_string()
    );
    let file = write_config(
        &sb,
        &format!(
            "config_version = 1\n{}{}{plugin_env}",
            plugin_entry("rules", "router", &utter, &["plugin", "rules"]),
            plugin_entry("compositor", "bundle", &utter, &["plugin", "compositor"]),
        ),
    );
    let config = file.to_str().unwrap();
    let run = run_utter(&["commands", "--json", "--local", "--config", config], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    let answer = run.json();
    let names = category_names(&answer);
    assert_eq!(
        names[..3],
        ["In Firefox", "Compositor actions (niri)", "Websites"],
        "{run}"
    );
    assert!(
        answer["categories"][0]["examples"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| *e == json!({"say": "new tab", "op": "key", "focused": "firefox"})),
        "{run}"
    );

    let run = run_utter(&["commands", "--all", "--local", "--config", config], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines[0], "In Firefox", "{run}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("  new tab ") && l.ends_with("→ key")),
        "{run}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("  focus column left ") && l.ends_with("→ niri")),
        "{run}"
    );
    assert!(lines.contains(&"In foot (with foot focused)"), "{run}");
}

/// The mistakes `utter commands` can meet say what to do: no router at all, and a router
/// that does not list its examples.
#[tokio::test]
async fn commands_says_what_to_do_without_a_router_that_lists_examples() {
    let sb = Sandbox::new();
    let env = sb.env(None);
    let desktop = bin("utter").display().to_string();
    let file = write_config(
        &sb,
        &format!(
            "config_version = 1\n{}",
            plugin_entry("desktop", "action", &desktop, &["plugin", "desktop"])
        ),
    );
    let run = run_utter(
        &["commands", "--local", "--config", file.to_str().unwrap()],
        &env,
    )
    .await;
    assert_eq!(run.code, Some(4), "{run}");
    assert_mentions(
        &run.stderr,
        &["no router plugin is configured", "kind = \"router\""],
        &run,
    );

    let test_plugin = bin("utter-test-plugin").display().to_string();
    let file = write_config(
        &sb,
        &format!(
            "config_version = 1\n{}",
            plugin_entry("planner", "router", &test_plugin, &[])
        ),
    );
    let run = run_utter(
        &[
            "commands",
            "--json",
            "--local",
            "--config",
            file.to_str().unwrap(),
        ],
        &env,
    )
    .await;
    assert_eq!(run.code, Some(4), "{run}");
    assert_eq!(run.json()["error"]["code"], -32601, "{run}");
    assert_mentions(
        &run.stderr,
        &["\"planner\" does not serve router.examples", "rules"],
        &run,
    );
}
