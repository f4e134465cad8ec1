//! The real `utter-llm` program, started as the runner starts it: JSON-RPC 2.0 on its stdio.

#![allow(dead_code)]

use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};
use utter_protocol::serde_json::{Value, json};
use utter_protocol::{Connection, ConnectionOptions, ErrorObject};

/// The plugin program cargo built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_utter-llm");

/// A running plugin after its handshake.
pub struct Plugin {
    pub conn: Connection,
    _child: Child,
}

impl Plugin {
    /// Start `utter-llm ARGS` with `env` (and none of the UTTER_LLM_* variables of the test's
    /// own environment), then say `protocol.hello`.
    pub async fn start(args: &[&str], env: &[(&str, &str)]) -> Plugin {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        for var in [
            "UTTER_LLM_MODEL",
            "UTTER_LLM_ENDPOINT",
            "UTTER_LLM_API",
            "UTTER_LLM_API_MODEL",
            "UTTER_LLM_TIMEOUT_MS",
        ] {
            cmd.env_remove(var);
        }
        cmd.envs(env.iter().copied());
        let mut child = cmd.spawn().expect("utter-llm starts");
        let (conn, _incoming) = Connection::spawn(
            child.stdout.take().unwrap(),
            child.stdin.take().unwrap(),
            ConnectionOptions::default(),
        );
        conn.request(
            "protocol.hello",
            json!({"protocol": "1.0", "abi": 1, "runner": "tests", "epoch": 1}),
            Some(Duration::from_secs(10)),
        )
        .await
        .expect("hello");
        Plugin {
            conn,
            _child: child,
        }
    }

    /// One request, at most 120 s.
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, ErrorObject> {
        self.conn
            .request(method, params, Some(Duration::from_secs(120)))
            .await
    }
}

/// `{utterance, candidates}` with ids c1, c2, ... for `labels`.
pub fn choose_params(utterance: &str, labels: &[&str]) -> Value {
    let candidates: Vec<Value> = labels
        .iter()
        .enumerate()
        .map(|(i, l)| json!({"id": format!("c{}", i + 1), "op": "ensure_url", "summary": l}))
        .collect();
    json!({"utterance": utterance, "candidates": candidates})
}

/// The distribution's sum.
pub fn total(answer: &Value) -> f64 {
    answer["distribution"]
        .as_object()
        .expect("a distribution")
        .values()
        .map(|v| v.as_f64().expect("numbers"))
        .sum()
}
