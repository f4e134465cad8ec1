//! The client socket against real processes: `utter daemon --no-dbus` as a child process in
//! a sandbox, clients as the `utter` CLI, as `python3` (a binary the runner does not admit
//! on its own), as this test process, and as the user `nobody`.
//!
//! Every daemon gets its own sandbox (`XDG_RUNTIME_DIR`, `XDG_STATE_HOME` for the token
//! file) and a config with `utter-test-plugin` (the router, recording every message it gets,
//! planning `terminal <command>` as a terminal step) and `fake_rs` (the open_url action).
//! Timeouts are generous and nothing is timed: these run on shared two-core machines.

use crate::common;
// The OpenAI-compatible test server of the chooser plugin's own tests.
use crate::openai;

use common::daemon::{Daemon, LIMIT, TERMINAL_ON, env, tokio_util_frames, write_config};
use common::{Sandbox, bin, repo_root, run_utter, wait_for};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use utter_protocol::Incoming;
use utter_protocol::serde_json::{self, Value, json};

/// A small python3 client: connect, send each request of `requests` (a JSON array) and
/// print its one reply as a JSON line; with `drain`, then print every further frame and
/// `{"eof": true}` at the end. A refused connect prints `{"connect_error": "EACCES"}`.
const PY_CLIENT: &str = r#"
import errno, json, socket, sys
path, requests, drain = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3] == "drain"
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(30)
try:
    s.connect(path)
except OSError as e:
    print(json.dumps({"connect_error": errno.errorcode.get(e.errno, str(e.errno))}))
    sys.exit(0)
buf = b""
def frame():
    global buf
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(4096)
        if not chunk:
            return None
        buf += chunk
    head, buf = buf.split(b"\r\n\r\n", 1)
    n = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0]
    while len(buf) < n:
        chunk = s.recv(4096)
        if not chunk:
            return None
        buf += chunk
    body, buf = buf[:n], buf[n:]
    return json.loads(body)
for r in requests:
    body = json.dumps(r).encode()
    s.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    print(json.dumps(frame()), flush=True)
if drain:
    while True:
        f = frame()
        if f is None:
            break
        print(json.dumps(f), flush=True)
    print(json.dumps({"eof": True}))
"#;

/// Run [`PY_CLIENT`] with `program` (a python3), optionally as another user (`prefix`, e.g.
/// setpriv ...); one JSON value per output line.
async fn python(
    prefix: &[&str],
    program: &str,
    socket: &Path,
    requests: Value,
    drain: bool,
) -> Vec<Value> {
    let mut argv: Vec<String> = prefix.iter().map(|s| s.to_string()).collect();
    argv.push(program.into());
    let mut cmd = tokio::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .arg("-c")
        .arg(PY_CLIENT)
        .arg(socket)
        .arg(requests.to_string())
        .arg(if drain { "drain" } else { "once" })
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(LIMIT, cmd.output())
        .await
        .expect("python finishes in time")
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "python client failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn rpc(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).expect("stat").permissions().mode() & 0o777
}

/// Lines of the test plugin's record (one JSON object per message it received).
fn record(sb: &Sandbox) -> Vec<Value> {
    std::fs::read_to_string(sb.path("record.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The path of the python3 executable as the kernel reports it (`/proc/<pid>/exe`).
async fn python_exe() -> PathBuf {
    let out = tokio::process::Command::new("python3")
        .args(["-c", "import os; print(os.readlink('/proc/self/exe'))"])
        .output()
        .await
        .expect("python3 runs");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

// ---------------------------------------------------------------------------------------
// Admission

#[tokio::test]
async fn the_utter_binary_is_admitted_without_configuration_in_a_private_layout() {
    let sb = Sandbox::new();
    let config = write_config(&sb, TERMINAL_ON);
    // Default layout: $XDG_RUNTIME_DIR/utter/runner.sock.
    let daemon = Daemon::start(&sb, &config, None).await;

    let dir = sb.path("run/utter");
    assert_eq!(mode(&dir), 0o700, "socket directory");
    let meta = std::fs::symlink_metadata(&daemon.socket).expect("socket exists");
    assert!(meta.file_type().is_socket());
    assert_eq!(mode(&daemon.socket), 0o600, "socket");
    let lock = std::fs::read_to_string(dir.join("runner.sock.lock")).expect("lock file");
    assert_eq!(
        lock.trim(),
        daemon.pid().to_string(),
        "the lock holds the runner's pid"
    );
    assert_eq!(mode(&daemon.token_file), 0o600, "token file");
    assert_eq!(
        daemon.token().len(),
        43,
        "32 random bytes, unpadded base64url"
    );

    // The CLI finds the socket on its own and needs no token (its state dir has none).
    let client_env = env(&sb, "client-state");
    let run = run_utter(&["status", "--json"], &client_env).await;
    assert_eq!(run.code, Some(0), "{run}\n{}", daemon.log());
    let status = run.json();
    let ids: Vec<&str> = status["plugins"]
        .as_array()
        .expect("plugins")
        .iter()
        .filter_map(|p| p["id"].as_str())
        .collect();
    assert_eq!(ids, ["test", "fake_rs"], "{run}");
    assert_eq!(status["state"], "ready", "{run}");
    assert!(!sb.path("client-state/utter/runner-token").exists());

    let run = run_utter(&["status"], &client_env).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        run.stdout.contains("ready") && run.stdout.contains("fake_rs"),
        "{run}"
    );

    // `say` uses the service (its router is the test plugin) ...
    let run = run_utter(
        &["say", "open https://example.com", "--dry-run", "--json"],
        &client_env,
    )
    .await;
    assert_eq!(run.code, Some(0), "{run}");
    let outcome = run.json();
    assert_eq!(outcome["plan"]["router"], "test", "{run}");
    assert_eq!(outcome["results"][0]["plugin"], "fake_rs", "{run}");
    // ... unless --local: then the built-in default config runs in this process.
    let run = run_utter(
        &["say", "open example.com", "--dry-run", "--json", "--local"],
        &client_env,
    )
    .await;
    assert_eq!(run.json()["plan"]["router"], "rules", "{run}");
}

#[tokio::test]
async fn a_second_runner_refuses_to_start_and_a_stale_socket_is_replaced() {
    let sb = Sandbox::new();
    let config = write_config(&sb, "");
    let socket = sb.path("sock/runner.sock");
    let mut first = Daemon::start(&sb, &config, Some(&socket)).await;

    let config_str = config.display().to_string();
    let socket_str = socket.display().to_string();
    let second = run_utter(
        &[
            "daemon",
            "--no-dbus",
            "--config",
            &config_str,
            "--socket",
            &socket_str,
        ],
        &env(&sb, "state"),
    )
    .await;
    assert_eq!(second.code, Some(4), "{second}");
    assert!(
        second.stderr.contains("another runner")
            && second.stderr.contains(&format!("pid {}", first.pid()))
            && second.stderr.contains(&socket_str),
        "{second}"
    );
    // The first one still serves.
    let run = first.utter(&sb, &["status", "--json"]).await;
    assert_eq!(run.code, Some(0), "{run}\n{}", first.log());

    // A runner that died leaves its socket file; the next one replaces it.
    first.kill();
    assert!(socket.exists(), "a killed runner leaves its socket file");
    let next = Daemon::start(&sb, &config, Some(&socket)).await;
    let run = next.utter(&sb, &["status", "--json"]).await;
    assert_eq!(run.code, Some(0), "{run}\n{}", next.log());
}

/// A file by the lock's name that is not a lock (someone's data, a FIFO) is refused with its
/// name and left as it was: never truncated, never waited on.
#[tokio::test]
async fn a_lock_file_that_is_not_a_lock_is_refused_and_kept() {
    let sb = Sandbox::new();
    let config = write_config(&sb, "");
    let dir = sb.path("sock");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let socket = dir.join("runner.sock");
    let lock = dir.join("runner.sock.lock");
    let data = "my notes, not a pid\n";
    std::fs::write(&lock, data).unwrap();
    let args = |socket: &Path| {
        vec![
            "daemon".to_owned(),
            "--no-dbus".to_owned(),
            "--config".to_owned(),
            config.display().to_string(),
            "--socket".to_owned(),
            socket.display().to_string(),
        ]
    };
    let argv = args(&socket);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let run = run_utter(&argv, &env(&sb, "state")).await;
    assert_ne!(run.code, Some(0), "{run}");
    assert!(
        run.stderr.contains("is not a lock file") && run.stderr.contains("runner.sock.lock"),
        "{run}"
    );
    assert_eq!(std::fs::read_to_string(&lock).unwrap(), data);

    std::fs::remove_file(&lock).unwrap();
    nix::unistd::mkfifo(&lock, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let run = run_utter(&argv, &env(&sb, "state")).await;
    assert_ne!(run.code, Some(0), "{run}");
    assert!(run.stderr.contains("is not a lock file"), "{run}");
}

#[tokio::test]
async fn a_directory_others_could_tamper_with_is_refused() {
    let sb = Sandbox::new();
    let config = write_config(&sb, "");
    let config_str = config.display().to_string();
    let daemon = |socket: PathBuf| {
        let config_str = config_str.clone();
        let env = env(&sb, "state");
        async move {
            run_utter(
                &[
                    "daemon",
                    "--no-dbus",
                    "--config",
                    &config_str,
                    "--socket",
                    &socket.display().to_string(),
                ],
                &env,
            )
            .await
        }
    };
    let shared = sb.path("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let run = daemon(shared.join("runner.sock")).await;
    assert_eq!(run.code, Some(4), "{run}");
    assert!(run.stderr.contains("other users may write to it"), "{run}");
    assert!(!shared.join("runner.sock").exists());

    if nix::unistd::getuid().is_root() {
        let theirs = sb.path("theirs");
        std::fs::create_dir(&theirs).unwrap();
        nix::unistd::chown(&theirs, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
        let run = daemon(theirs.join("runner.sock")).await;
        assert_eq!(run.code, Some(4), "{run}");
        assert!(run.stderr.contains("belongs to uid 65534"), "{run}");
    }
}

#[tokio::test]
async fn other_processes_need_the_token_unless_allow_listed_exactly() {
    let sb = Sandbox::new();
    let config = write_config(&sb, "");
    let socket = sb.path("sock/runner.sock");
    let daemon = Daemon::start(&sb, &config, Some(&socket)).await;
    let token = daemon.token();
    let exe = python_exe().await;
    let name = exe
        .file_name()
        .expect("python has a file name")
        .to_string_lossy()
        .into_owned();

    let status = |id| rpc(id, "runner.status", json!({}));
    // No [socket] table: python3 may only authenticate.
    let replies = python(
        &[],
        "python3",
        &socket,
        json!([status(1), rpc(2, "runner.version", json!({}))]),
        false,
    )
    .await;
    assert_eq!(replies[0]["error"]["code"], -32003, "{replies:?}");
    assert_eq!(
        replies[0]["error"]["message"],
        "authentication required (send runner.auth {token})"
    );
    assert_eq!(
        replies[1]["result"]["protocol"], "1.0",
        "runner.version is open: {replies:?}"
    );
    assert_eq!(replies[1]["result"]["authenticated"], false);

    // A wrong token is refused; the right one admits.
    let replies = python(
        &[],
        "python3",
        &socket,
        json!([
            rpc(1, "runner.auth", json!({"token": "not-the-token"})),
            status(2),
            rpc(3, "runner.auth", json!({"token": token})),
            status(4),
            rpc(5, "runner.auth", json!({"token": token})),
        ]),
        false,
    )
    .await;
    assert_eq!(replies[0]["error"]["code"], -32003, "{replies:?}");
    assert_eq!(replies[0]["error"]["message"], "invalid token");
    assert_eq!(replies[1]["error"]["code"], -32003);
    assert_eq!(replies[2]["result"], json!({}));
    assert!(replies[3]["result"]["plugins"].is_array(), "{replies:?}");
    assert_eq!(
        replies[4]["result"],
        json!({}),
        "runner.auth when authenticated is {{}}"
    );
    assert!(
        daemon.log().contains("invalid token"),
        "refusals are logged"
    );

    // allow_binaries, changed by reloads: only exact names or whole paths admit.
    // A prefix of the name (the older runner admitted `python3.1` + digits) and, for
    // `python3.11`, `python3`.
    let mut near_misses = vec![name[..name.len() - 1].to_owned()];
    if name != "python3" && name.starts_with("python3") {
        near_misses.push("python3".into());
    }
    let cases: Vec<(Vec<String>, bool)> = vec![
        (near_misses.clone(), false),
        (vec![name.clone()], true),
        (vec![exe.display().to_string()], true),
        (vec![format!("/elsewhere/{name}")], false),
    ];
    for (entries, admitted) in cases {
        let text = rewrite_socket_table(&std::fs::read_to_string(&config).unwrap(), &entries);
        std::fs::write(&config, &text).unwrap();
        let reload = daemon.utter(&sb, &["reload", "--json"]).await;
        assert_eq!(reload.code, Some(0), "{reload}\n{text}");
        let replies = python(&[], "python3", &socket, json!([status(1)]), false).await;
        if admitted {
            assert!(
                replies[0]["result"]["plugins"].is_array(),
                "{entries:?} should admit {}: {replies:?}",
                exe.display()
            );
        } else {
            assert_eq!(
                replies[0]["error"]["code"],
                -32003,
                "{entries:?} must not admit {}: {replies:?}",
                exe.display()
            );
        }
    }
}

/// `text` with its `[socket]` table replaced by one holding `allow_binaries = entries`.
fn rewrite_socket_table(text: &str, entries: &[String]) -> String {
    let mut out = String::new();
    let mut skipping = false;
    for line in text.split_inclusive('\n') {
        if line.starts_with('[') {
            skipping = line.starts_with("[socket]");
        }
        if !skipping {
            out.push_str(line);
        }
    }
    out.replacen(
        "config_version = 1\n",
        &format!(
            "config_version = 1\n[socket]\nallow_binaries = {}\n",
            json!(entries)
        ),
        1,
    )
}

/// How to run a program as `nobody` (uid 65534), when this test runs as root.
fn as_nobody() -> Option<Vec<&'static str>> {
    if !nix::unistd::getuid().is_root() {
        eprintln!("skipped: running a client as another user needs root");
        return None;
    }
    if Path::new("/usr/bin/setpriv").exists() {
        Some(vec![
            "/usr/bin/setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ])
    } else if Path::new("/usr/sbin/runuser").exists() {
        Some(vec!["/usr/sbin/runuser", "-u", "nobody", "--"])
    } else {
        eprintln!("skipped: neither setpriv nor runuser is installed");
        None
    }
}

/// A python3 that `nobody` can run (not one under root's home).
fn system_python() -> Option<&'static str> {
    ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
}

#[tokio::test]
async fn another_user_is_refused_by_the_filesystem_and_by_its_credentials() {
    let (Some(prefix), Some(py)) = (as_nobody(), system_python()) else {
        return;
    };
    let sb = Sandbox::new();
    // Let everyone reach the sandbox, so that only what the runner sets up stands in the way.
    for dir in ["", "run"] {
        std::fs::set_permissions(sb.path(dir), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let config = write_config(&sb, "");
    let status = json!([rpc(1, "runner.version", json!({}))]);

    // 1. The default layout: $XDG_RUNTIME_DIR/utter is 0700, so nobody cannot even reach
    //    the socket.
    let private = Daemon::start(&sb, &config, None).await;
    assert_eq!(mode(&sb.path("run/utter")), 0o700);
    let replies = python(&prefix, py, &private.socket, status.clone(), false).await;
    assert_eq!(replies, [json!({"connect_error": "EACCES"})]);

    // 2. An explicit socket in a directory others may enter: the runner keeps the
    //    directory's mode (it did not create it), the socket itself is 0600 ...
    let open_dir = sb.path("open");
    std::fs::create_dir(&open_dir).unwrap();
    std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let socket = open_dir.join("runner.sock");
    let open = Daemon::start(&sb, &config, Some(&socket)).await;
    assert_eq!(
        mode(&open_dir),
        0o755,
        "an existing directory keeps its mode"
    );
    assert_eq!(mode(&socket), 0o600);
    let replies = python(&prefix, py, &socket, status.clone(), false).await;
    assert_eq!(replies, [json!({"connect_error": "EACCES"})]);
    assert!(open.log().contains("open to other users"), "{}", open.log());

    // 3. ... and with the socket opened up by hand, SO_PEERCRED still refuses: one -32003
    //    error frame naming the reason, then the end of the connection.
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let replies = python(&prefix, py, &socket, json!([]), true).await;
    assert_eq!(replies.len(), 2, "{replies:?}");
    assert_eq!(replies[0]["id"], Value::Null, "{replies:?}");
    assert_eq!(replies[0]["error"]["code"], -32003, "{replies:?}");
    let message = replies[0]["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("uid 65534"), "{message}");
    assert_eq!(replies[1], json!({"eof": true}));
    // The refusal is logged with pid, uid and executable.
    let log = open.log();
    assert!(
        log.contains("client refused") && log.contains("uid=65534") && log.contains("exe="),
        "{log}"
    );
    // Same user still fine.
    let run = open.utter(&sb, &["status", "--json"]).await;
    assert_eq!(run.code, Some(0), "{run}");
    // 4. The other way round: a socket served by another user's process is not this user's
    //    runner; the CLI says so and sends it nothing.
    let theirs = sb.path("theirs");
    std::fs::create_dir(&theirs).unwrap();
    nix::unistd::chown(&theirs, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
    let fake = theirs.join("runner.sock");
    let mut argv = prefix.clone();
    argv.push(py);
    let mut server = tokio::process::Command::new(argv[0])
        .args(&argv[1..])
        .arg("-c")
        .arg("import os, socket, sys, time\ns = socket.socket(socket.AF_UNIX)\ns.bind(sys.argv[1])\nos.chmod(sys.argv[1], 0o666)\ns.listen(4)\ntime.sleep(120)")
        .arg(&fake)
        .kill_on_drop(true)
        .spawn()
        .expect("a python server as nobody");
    assert!(
        wait_for(LIMIT, || fake.exists()).await,
        "the fake server is up"
    );
    let fake_str = fake.display().to_string();
    let run = run_utter(
        &["status", "--socket", &fake_str],
        &env(&sb, "client-state"),
    )
    .await;
    assert_eq!(run.code, Some(4), "{run}");
    assert!(
        run.stderr.contains("served by a process of uid 65534"),
        "{run}"
    );
    let _ = server.kill().await;
}

// ---------------------------------------------------------------------------------------
// Compatibility with clients of the older runner

#[tokio::test]
async fn a_client_written_for_the_older_runner_works() {
    let sb = Sandbox::new();
    let config = write_config(&sb, TERMINAL_ON);
    let socket = sb.path("sock/runner.sock");
    let daemon = Daemon::start(&sb, &config, Some(&socket)).await;
    let script = repo_root().join("tests/compat_client.py");
    let out = tokio::time::timeout(
        Duration::from_secs(300),
        tokio::process::Command::new("python3")
            .arg(&script)
            .arg(&socket)
            .arg(daemon.token())
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("compat_client.py finishes")
    .expect("python3 runs");
    assert!(
        out.status.success(),
        "compat_client.py failed ({}):\n{}\n{}\n--- runner log\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        daemon.log()
    );
}

// ---------------------------------------------------------------------------------------
// Confirmations and cancellation

#[tokio::test]
async fn a_second_client_answers_a_confirmation_the_first_waits_for() {
    let sb = Sandbox::new();
    let config = write_config(&sb, TERMINAL_ON);
    let socket = sb.path("sock/runner.sock");
    let daemon = Daemon::start(&sb, &config, Some(&socket)).await;

    let mut first = daemon.client().await;
    let command = tokio::spawn({
        let conn = first.conn.clone();
        async move {
            conn.request(
                "runner.command",
                json!({"utterance": "terminal echo hi there"}),
                Some(LIMIT),
            )
            .await
        }
    });
    // The runner asks the first client (and does not get an answer from it).
    let asked = loop {
        if let Incoming::Request(r) = first.next_incoming().await {
            assert_eq!(r.method, "host.confirm");
            break r;
        }
    };
    let id = asked.params["id"]
        .as_str()
        .expect("confirmation id")
        .to_owned();
    assert_eq!(asked.params["op"], "terminal");
    assert_eq!(asked.params["args"], json!({"command": "echo hi there"}));

    // Another client sees it, with the exact args, and answers it.
    let run = daemon.utter(&sb, &["pending", "--json"]).await;
    assert_eq!(run.code, Some(0), "{run}");
    let pending = run.json();
    assert_eq!(pending.as_array().map(Vec::len), Some(1), "{run}");
    assert_eq!(pending[0]["id"], id.as_str());
    assert_eq!(pending[0]["op"], "terminal");
    assert_eq!(pending[0]["args"], json!({"command": "echo hi there"}));
    assert_eq!(pending[0]["provenance"], "user");
    let run = daemon.utter(&sb, &["pending"]).await;
    assert!(
        run.stdout.contains(&id) && run.stdout.contains("echo hi there"),
        "{run}"
    );

    let second = daemon.client().await;
    let not_bool = second
        .call("runner.confirm", json!({"id": id, "approved": "yes"}))
        .await
        .expect_err("approved must be a boolean");
    assert_eq!(not_bool.code, -32602, "{not_bool:?}");
    let run = daemon.utter(&sb, &["confirm", &id, "yes"]).await;
    assert_eq!(run.code, Some(0), "{run}");

    let outcome = command
        .await
        .unwrap()
        .expect("the command finished after the approval");
    assert_eq!(outcome["results"][0]["ok"], true, "{outcome}");
    assert_eq!(outcome["results"][0]["plugin"], "test", "{outcome}");
    // The question to the first client is withdrawn.
    let cancel = loop {
        if let Incoming::Notification(n) = first.next_incoming().await {
            if n.method == "$/cancel" {
                break n;
            }
        }
    };
    assert_eq!(cancel.params["id"], asked.id.to_value());
    // Answered once only.
    let run = daemon.utter(&sb, &["confirm", &id, "no"]).await;
    assert_eq!(run.code, Some(1), "{run}");
    assert!(run.stderr.contains("no pending confirmation"), "{run}");
    let run = daemon.utter(&sb, &["pending", "--json"]).await;
    assert_eq!(run.json(), json!([]), "{run}");

    // `utter say` through the service with no terminal: denied at once.
    let run = daemon.utter(&sb, &["say", "terminal ls"]).await;
    assert_eq!(run.code, Some(1), "{run}");
    assert!(run.stderr.contains("stdin is not a terminal"), "{run}");
    assert!(run.stdout.contains("failed (-32003)"), "{run}");
}

#[tokio::test]
async fn a_client_that_goes_away_cancels_its_work() {
    let sb = Sandbox::new();
    let config = write_config(&sb, TERMINAL_ON);
    let socket = sb.path("sock/runner.sock");
    let daemon = Daemon::start(&sb, &config, Some(&socket)).await;
    let hang = json!({"plugin": "test", "method": "test.hang", "params": {"provenance": "user"}});
    let hang_ids = |sb: &Sandbox| -> Vec<Value> {
        record(sb)
            .into_iter()
            .filter(|m| m["method"] == "test.hang")
            .map(|m| m["id"].clone())
            .collect()
    };
    let cancelled = |sb: &Sandbox, id: &Value| {
        record(sb)
            .iter()
            .any(|m| m["notification"] == "$/cancel" && m["params"]["id"] == *id)
    };

    // 1. Disconnecting mid-request: the plugin is sent $/cancel.
    let client = daemon.client().await;
    let call = tokio::spawn({
        let conn = client.conn.clone();
        let hang = hang.clone();
        async move { conn.request("runner.invoke", hang, None).await }
    });
    assert!(
        wait_for(LIMIT, || hang_ids(&sb).len() == 1).await,
        "test.hang reached the plugin"
    );
    let id = hang_ids(&sb)[0].clone();
    client.conn.close();
    drop(client);
    let _ = call.await;
    assert!(
        wait_for(LIMIT, || cancelled(&sb, &id)).await,
        "the plugin got $/cancel {id}: {:?}\n{}",
        record(&sb),
        daemon.log()
    );

    // 2. $/cancel from the client (sent when its call is dropped): the same.
    let client = daemon.client().await;
    {
        let call = client.call("runner.invoke", hang.clone());
        tokio::pin!(call);
        let reached = tokio::time::timeout(LIMIT, async {
            loop {
                tokio::select! {
                    answer = &mut call => panic!("test.hang was answered: {answer:?}"),
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {
                        if hang_ids(&sb).len() == 2 {
                            return;
                        }
                    }
                }
            }
        })
        .await;
        assert!(
            reached.is_ok(),
            "test.hang reached the plugin: {:?}",
            record(&sb)
        );
        // Dropping the call here makes the client send $/cancel.
    }
    let id = hang_ids(&sb)[1].clone();
    assert!(
        wait_for(LIMIT, || cancelled(&sb, &id)).await,
        "the plugin got $/cancel {id}: {:?}",
        record(&sb)
    );
    assert!(client.call("runner.version", json!({})).await.is_ok());

    // 3. A confirmation asked for a client that leaves is withdrawn.
    let mut client = daemon.client().await;
    let call = tokio::spawn({
        let conn = client.conn.clone();
        async move {
            conn.request("runner.command", json!({"utterance": "terminal ls"}), None)
                .await
        }
    });
    loop {
        if let Incoming::Request(r) = client.next_incoming().await {
            assert_eq!(r.method, "host.confirm");
            break;
        }
    }
    let observer = daemon.client().await;
    let pending = observer.call("runner.pending", json!({})).await.unwrap();
    assert_eq!(pending.as_array().map(Vec::len), Some(1), "{pending}");
    client.conn.close();
    drop(client);
    let _ = call.await;
    let mut empty = false;
    for _ in 0..600 {
        let pending = observer.call("runner.pending", json!({})).await.unwrap();
        if pending == json!([]) {
            empty = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(empty, "the confirmation of a client that left is withdrawn");
    // Nothing was run.
    assert!(
        !record(&sb)
            .iter()
            .any(|m| m["method"] == "action.invoke" && m["params"]["op"] == "terminal")
    );
}

// ---------------------------------------------------------------------------------------
// Events

/// `utter events FLAG --socket SOCKET`, killed on drop, and its stdout lines.
fn utter_events(
    sb: &Sandbox,
    socket: &Path,
    flag: &str,
) -> (
    tokio::process::Child,
    tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
) {
    use tokio::io::AsyncBufReadExt;
    let mut cli = tokio::process::Command::new(bin("utter"));
    cli.args(["events", flag, "--socket"])
        .arg(socket)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    env(sb, "client-state").apply(cli.as_std_mut());
    let mut cli = cli.spawn().expect("utter events runs");
    let lines = tokio::io::BufReader::new(cli.stdout.take().unwrap()).lines();
    (cli, lines)
}

#[tokio::test]
async fn events_start_with_a_snapshot_then_follow_the_plugins() {
    let sb = Sandbox::new();
    let config = write_config(&sb, "");
    let socket = sb.path("sock/runner.sock");
    let daemon = Daemon::start(&sb, &config, Some(&socket)).await;

    // The CLI: the first line is the snapshot.
    let (mut cli, mut lines) = utter_events(&sb, &socket, "--json");
    let first = tokio::time::timeout(LIMIT, lines.next_line())
        .await
        .expect("a line in time")
        .expect("readable")
        .expect("a first line");
    let first: Value = serde_json::from_str(&first).expect("one JSON object per line");
    assert_eq!(first["event"], "snapshot", "{first}");
    assert_eq!(first["status"]["state"], "ready", "{first}");

    // The socket: snapshot first, then the changes.
    let mut client = daemon.client().await;
    let subscribed = client.call("runner.subscribe", json!({})).await.unwrap();
    let subscription = subscribed["subscription"]
        .as_str()
        .expect("an id")
        .to_owned();
    let snapshot = client.next_event().await;
    assert_eq!(snapshot["event"], "snapshot", "{snapshot}");
    let test = snapshot["status"]["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "test")
        .expect("the test plugin is in the snapshot")
        .clone();
    assert_eq!(test["status"], "ok");
    let pid = test["pid"].as_i64().expect("its pid") as i32;

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the test plugin");
    let mut seen = Vec::new();
    loop {
        let event = client.next_event().await;
        seen.push(event.clone());
        if event["event"] == "plugin_state"
            && event["id"] == "test"
            && event["epoch"] == 1
            && event["status"] == "ok"
        {
            break;
        }
    }
    assert!(
        seen.iter()
            .any(|e| e["event"] == "plugin_state" && e["id"] == "test" && e["status"] != "ok"),
        "the crash is reported before the restart: {seen:?}"
    );
    // The CLI saw it too.
    let mut cli_saw_restart = false;
    while let Ok(Ok(Some(line))) = tokio::time::timeout(LIMIT, lines.next_line()).await {
        let event: Value = serde_json::from_str(&line).unwrap();
        if event["event"] == "plugin_state" && event["id"] == "test" && event["epoch"] == 1 {
            cli_saw_restart = true;
            break;
        }
    }
    assert!(cli_saw_restart);
    let _ = cli.kill().await;

    assert_eq!(
        client
            .call("runner.unsubscribe", json!({"subscription": subscription}))
            .await
            .unwrap(),
        json!({})
    );
    let again = client
        .call("runner.unsubscribe", json!({"subscription": subscription}))
        .await
        .expect_err("already ended");
    assert_eq!(again.code, -32602);
}

/// A typed client (`utter_ipc::Client`, as the settings app uses) that is dropped closes its
/// connection: a hundred of them, one after the other, never fill the runner's connection
/// limits (64 unauthenticated, 16 more), and the next one is served.
#[tokio::test]
async fn dropped_clients_free_their_connections() {
    let sb = Sandbox::new();
    let config = write_config(&sb, "");
    let socket = sb.path("sock/runner.sock");
    let daemon = Daemon::start(&sb, &config, Some(&socket)).await;
    let token = Some(daemon.token());
    for n in 0..100 {
        let client = utter_ipc::Client::connect(&socket, token.clone(), None)
            .await
            .unwrap_or_else(|e| panic!("connection {n}: {e}"));
        client
            .status()
            .await
            .unwrap_or_else(|e| panic!("call {n}: {}", e.message));
    }
    let last = utter_ipc::Client::connect(&socket, token, None)
        .await
        .expect("connects");
    assert!(last.status().await.is_ok());
}

/// Several subscriptions with logs on one connection, from a client that reads: each gets its
/// snapshot and every kept log line, and none is dropped. Their first bursts together pass the
/// connection's frame slots (6 × 201 frames against 1024), which once dropped the later ones
/// as "stopped reading".
#[tokio::test(flavor = "multi_thread")]
async fn many_log_subscriptions_on_one_reading_connection_are_all_served() {
    const SUBSCRIPTIONS: usize = 6;
    let sb = Sandbox::new();
    let plugin = |id: &str| {
        format!(
            "[[plugin]]\nid = \"{id}\"\nkind = \"router\"\nentrypoint = {}\n",
            json!([bin("utter-test-plugin").display().to_string()])
        )
    };
    let ids = ["t1", "t2", "t3", "t4", "t5"];
    let config = sb.write(
        "utter.toml",
        &format!(
            "config_version = 1\n{}",
            ids.iter().map(|id| plugin(id)).collect::<String>()
        ),
    );
    let daemon = Daemon::start(&sb, &config, None).await;
    // 5 × 50 plain stderr lines are logged at INFO: the runner keeps its last 200 lines.
    let setup = daemon.client().await;
    for id in ids {
        setup
            .call(
                "runner.invoke",
                json!({"plugin": id, "method": "test.stderr_flood", "params": {"lines": 50}}),
            )
            .await
            .unwrap();
    }
    let kept = wait_for(LIMIT, || {
        daemon
            .log()
            .lines()
            .filter(|l| l.contains("flood line 49"))
            .count()
            == ids.len()
    })
    .await;
    assert!(kept, "the lines reached the log: {}", daemon.log());

    let common::daemon::TestClient { conn, mut incoming } = daemon.client().await;
    // A client that reads: everything that arrives is taken off the socket at once.
    let reader = tokio::spawn(async move {
        let mut logs = std::collections::HashMap::<String, usize>::new();
        let mut dropped = Vec::new();
        // Until every subscription has its 200 kept lines, one is dropped, or LIMIT passes
        // (a slow machine may pause for seconds between frames).
        let _ = tokio::time::timeout(LIMIT, async {
            while let Some(message) = incoming.recv().await {
                if let Incoming::Notification(n) = message {
                    let sub = n.params["subscription"].as_str().unwrap_or("").to_owned();
                    match n.params["event"]["event"].as_str() {
                        Some("log") => *logs.entry(sub).or_default() += 1,
                        Some("dropped") => dropped.push(n.params["event"].clone()),
                        _ => {}
                    }
                }
                let all_served =
                    logs.len() == SUBSCRIPTIONS && logs.values().all(|&count| count >= 200);
                if all_served || !dropped.is_empty() {
                    break;
                }
            }
        })
        .await;
        (logs, dropped)
    });
    // Sent together, as a client that follows several views at once does.
    let asked: Vec<_> = (0..SUBSCRIPTIONS)
        .map(|_| conn.request("runner.subscribe", json!({"logs": true}), Some(LIMIT)))
        .collect();
    for answer in futures::future::join_all(asked).await {
        answer.expect("subscribed");
    }
    let (logs, dropped) = reader.await.unwrap();
    assert!(dropped.is_empty(), "dropped: {dropped:?}");
    assert_eq!(logs.len(), SUBSCRIPTIONS, "{logs:?}");
    for (sub, count) in &logs {
        assert!(*count >= 200, "{sub} got {count} log lines");
    }
}

/// `runner.subscribe {logs: true}` adds the runner's log lines (the last ones kept, then each
/// new one) for that subscriber only; `utter events --logs` prints them.
#[tokio::test]
async fn log_lines_go_only_to_those_who_ask_for_them() {
    let sb = Sandbox::new();
    let config = write_config(&sb, "");
    let socket = sb.path("sock/runner.sock");
    let daemon = Daemon::start(&sb, &config, Some(&socket)).await;

    let mut logs = daemon.client().await;
    logs.call("runner.subscribe", json!({"logs": true}))
        .await
        .unwrap();
    let mut plain = daemon.client().await;
    plain
        .call("runner.subscribe", json!({"logs": null}))
        .await
        .unwrap();
    assert_eq!(logs.next_event().await["event"], "snapshot");
    assert_eq!(plain.next_event().await["event"], "snapshot");
    // The lines logged before the subscription come first: the daemon said it was ready.
    let ready = loop {
        let event = logs.next_event().await;
        assert_eq!(
            event["event"], "log",
            "the kept lines come right after the snapshot"
        );
        if event["message"] == "ready" {
            break event;
        }
    };
    assert_eq!(ready["level"], "INFO", "{ready}");
    assert!(
        ready["time_ms"]
            .as_u64()
            .is_some_and(|t| t > 1_700_000_000_000),
        "{ready}"
    );
    assert!(
        ready["target"]
            .as_str()
            .is_some_and(|t| t.starts_with("utter")),
        "{ready}"
    );

    // A reload is logged, with its fields, to the one that asked.
    let reloaded = daemon.client().await;
    reloaded.call("runner.reload", json!({})).await.unwrap();
    let line = loop {
        let event = logs.next_event().await;
        if event["event"] == "log" && event["message"] == "config reloaded" {
            break event;
        }
    };
    assert_eq!(line["fields"]["unchanged"], "2", "{line}");
    loop {
        let event = plain.next_event().await;
        assert_ne!(event["event"], "log", "not asked for: {event}");
        if event["event"] == "reloaded" {
            break;
        }
    }

    // Anything but true or false is refused, and the connection goes on.
    for bad in [json!("yes"), json!(1), json!({"all": true})] {
        let e = plain
            .call("runner.subscribe", json!({"logs": bad}))
            .await
            .expect_err("not a boolean");
        assert_eq!(e.code, -32602, "{bad}: {e:?}");
        assert!(e.message.contains("params.logs"), "{}", e.message);
    }
    assert!(plain.call("runner.version", json!({})).await.is_ok());

    // The CLI prints them as lines for people.
    let (mut cli, mut lines) = utter_events(&sb, &socket, "--logs");
    let mut printed = Vec::new();
    while let Ok(Ok(Some(line))) = tokio::time::timeout(LIMIT, lines.next_line()).await {
        let done = line.starts_with("log ") && line.contains("INFO") && line.ends_with(": ready");
        printed.push(line);
        if done {
            break;
        }
    }
    assert!(
        printed.last().is_some_and(|l| l.ends_with(": ready")),
        "{printed:#?}"
    );
    let _ = cli.kill().await;
}

// ---------------------------------------------------------------------------------------
// Bad input, limits, and the CLI's errors

#[tokio::test]
async fn bad_input_is_answered_and_never_stops_the_runner() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let sb = Sandbox::new();
    let config = write_config(&sb, "");
    let socket = sb.path("sock/runner.sock");
    let daemon = Daemon::start(&sb, &config, Some(&socket)).await;

    // A header that loses the frame boundary: -32700, then the connection ends.
    let mut raw = tokio::net::UnixStream::connect(&socket).await.unwrap();
    raw.write_all(b"Content-Length: lots\r\n\r\n{}")
        .await
        .unwrap();
    let mut reply = Vec::new();
    tokio::time::timeout(LIMIT, raw.read_to_end(&mut reply))
        .await
        .expect("closed in time")
        .unwrap();
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.contains("-32700"), "{reply}");

    // Header lines ended by a bare "\n" are read, and `{}` (no request, no response) is
    // answered with -32600 and id null; the connection goes on.
    let mut raw = tokio::net::UnixStream::connect(&socket).await.unwrap();
    let version = br#"{"jsonrpc":"2.0","id":9,"method":"runner.version","params":{}}"#;
    let mut frames = b"Content-Length: 2\n\n{}".to_vec();
    frames.extend_from_slice(format!("Content-Length: {}\n\n", version.len()).as_bytes());
    frames.extend_from_slice(version);
    raw.write_all(&frames).await.unwrap();
    let mut seen = Vec::new();
    let mut chunk = [0u8; 4096];
    while !(String::from_utf8_lossy(&seen).contains("-32600")
        && String::from_utf8_lossy(&seen).contains("\"version\""))
    {
        let n = tokio::time::timeout(LIMIT, raw.read(&mut chunk))
            .await
            .expect("answered in time")
            .unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&chunk[..n]);
    }
    let seen = String::from_utf8_lossy(&seen);
    assert!(seen.contains(r#""id":null"#), "{seen}");
    drop(raw);

    // Bad JSON, a batch, unknown methods: answered, and the connection goes on.
    let replies = python(
        &[],
        "python3",
        &socket,
        json!([
            [1, 2],
            {"jsonrpc": "2.0", "id": 1, "method": "runner.version", "params": [1]},
            rpc(2, "runner.nope", json!({})),
            rpc(3, "runner.version", json!({})),
        ]),
        false,
    )
    .await;
    // A batch gets JSON-RPC's answer for a batch: one -32600 per member.
    let batch = replies[0].as_array().expect("an array answers a batch");
    assert_eq!(batch.len(), 2, "{replies:?}");
    assert!(
        batch
            .iter()
            .all(|r| r["error"]["code"] == -32600 && r["id"].is_null()),
        "{replies:?}"
    );
    assert_eq!(replies[1]["error"]["code"], -32602, "{replies:?}");
    // Unauthenticated: unknown methods are refused before dispatch.
    assert_eq!(replies[2]["error"]["code"], -32003, "{replies:?}");
    assert_eq!(replies[3]["result"]["version"], env!("CARGO_PKG_VERSION"));

    let client = daemon.client().await;
    let unknown = client
        .call("runner.nope", json!({}))
        .await
        .expect_err("unknown");
    assert_eq!(unknown.code, -32601);
    assert_eq!(unknown.message, "unknown method: runner.nope");
    for (params, code) in [
        (json!({}), -32602),
        (json!({"utterance": 7}), -32602),
        (
            json!({"utterance": "open https://example.com", "dry_run": "yes"}),
            -32602,
        ),
        (
            json!({"utterance": "open https://example.com", "provenance": "admin"}),
            -32602,
        ),
    ] {
        let e = client
            .call("runner.command", params.clone())
            .await
            .expect_err("refused");
        assert_eq!(e.code, code, "{params}: {e:?}");
    }

    // The rate limit: 1000 requests per 10 s on one connection.
    let mut raw = tokio::net::UnixStream::connect(&socket).await.unwrap();
    let mut burst = Vec::new();
    for id in 0..1001 {
        burst.extend(utter_protocol::frame::encode_frame(
            rpc(id, "runner.version", json!({})).to_string().as_bytes(),
        ));
    }
    raw.write_all(&burst).await.unwrap();
    let (read, _write) = raw.into_split();
    let mut frames = tokio_util_frames(read);
    let mut last = Value::Null;
    for _ in 0..1001 {
        last = frames.recv().await.expect("a reply per request");
    }
    assert_eq!(last["id"], 1000, "{last}");
    assert_eq!(last["error"]["code"], -32003, "{last}");
    assert!(
        last["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("rate limit"),
        "{last}"
    );

    // Still serving.
    let run = daemon.utter(&sb, &["status", "--json"]).await;
    assert_eq!(run.code, Some(0), "{run}\n{}", daemon.log());
    assert!(!daemon.log().contains("panicked"), "{}", daemon.log());
}

#[tokio::test]
async fn the_cli_says_when_no_runner_listens_and_reports_reloads() {
    let sb = Sandbox::new();
    let nowhere = sb.path("nowhere/runner.sock");
    let nowhere_str = nowhere.display().to_string();
    for command in [
        vec!["status"],
        vec!["status", "--json"],
        vec!["pending", "--json"],
        vec!["confirm", "abc", "yes"],
        vec!["reload"],
        vec!["events"],
        vec!["say", "open https://example.com", "--dry-run"],
    ] {
        let mut args: Vec<&str> = command.clone();
        args.extend(["--socket", &nowhere_str]);
        let run = run_utter(&args, &env(&sb, "client-state")).await;
        assert_eq!(run.code, Some(4), "{command:?}: {run}");
        assert!(
            run.stderr
                .contains(&format!("no runner is listening on {nowhere_str}"))
                && run.stderr.contains("utter daemon")
                && run.stderr.contains("systemctl --user start utter"),
            "{command:?}: {run}"
        );
        // With --json, stdout is JSON all the same: not running, where, and why.
        if command.contains(&"--json") {
            let said: serde_json::Value = serde_json::from_str(&run.stdout)
                .unwrap_or_else(|e| panic!("{command:?}: stdout is not JSON ({e}): {run}"));
            assert_eq!(said["running"], false, "{run}");
            assert_eq!(said["socket"], nowhere_str.as_str(), "{run}");
            assert!(
                said["error"]["message"]
                    .as_str()
                    .is_some_and(|e| e.contains("no runner is listening")),
                "{run}"
            );
        } else {
            assert!(run.stdout.is_empty(), "{command:?}: {run}");
        }
    }

    let config = write_config(&sb, "");
    let socket = sb.path("sock/runner.sock");
    let daemon = Daemon::start(&sb, &config, Some(&socket)).await;
    let run = daemon.utter(&sb, &["pending"]).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(run.stdout.contains("no confirmations are pending"), "{run}");
    let run = daemon
        .utter(&sb, &["confirm", "0123456789abcdef", "no"])
        .await;
    assert_eq!(run.code, Some(1), "{run}");

    let run = daemon.utter(&sb, &["reload", "--json"]).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert_eq!(run.json()["unchanged"], json!(["test", "fake_rs"]), "{run}");
    let run = daemon.utter(&sb, &["reload"]).await;
    assert!(run.stdout.contains("config reloaded"), "{run}");

    // An invalid config is refused with file:line: key, and the running one is kept.
    let good = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        good.replace(
            "kind = \"router\"",
            "kind = \"router\"\ntransport = \"pigeon\"",
        ),
    )
    .unwrap();
    let run = daemon.utter(&sb, &["reload"]).await;
    assert_eq!(run.code, Some(3), "{run}");
    let at = format!("{}:", config.display());
    assert!(
        run.stderr.contains(&at)
            && run.stderr.contains("plugin[0].transport")
            && run.stderr.contains("pigeon"),
        "{run}"
    );
    let client = daemon.client().await;
    let e = client
        .call("runner.reload", json!({}))
        .await
        .expect_err("refused");
    assert_eq!(e.code, -32602);
    assert!(
        e.data
            .as_ref()
            .is_some_and(|d| d["errors"][0]["key"] == "plugin[0].transport"),
        "{e:?}"
    );
    let run = daemon.utter(&sb, &["status", "--json"]).await;
    assert_eq!(run.json()["state"], "ready", "{run}");
}

/// A broken config file does not keep the client commands from the running service (which
/// runs the config it loaded): they warn that the file is invalid and find the socket where
/// the file says, when that much of it reads as TOML, or at the default path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_commands_reach_the_service_while_the_config_is_broken() {
    let sb = Sandbox::new();
    // The user's config file (read without --config), naming a socket of its own.
    let socket = sb.path("elsewhere/runner.sock");
    let good = format!(
        "[runner]\nsocket_path = \"{}\"\n{TERMINAL_ON}",
        socket.display()
    );
    let config = write_config(&sb, &good);
    let user_config = sb.path("config/utter/config.toml");
    std::fs::create_dir_all(user_config.parent().unwrap()).unwrap();
    std::fs::copy(&config, &user_config).unwrap();
    let daemon = Daemon::start(&sb, &user_config, Some(&socket)).await;
    let utter = |args: &'static [&'static str]| {
        let env = env(&sb, "client-state");
        async move { run_utter(args, &env).await }
    };
    let run = utter(&["status", "--json"]).await;
    assert_eq!(run.code, Some(0), "{run}");

    // Valid TOML with an invalid value: the socket path still reads.
    let text = std::fs::read_to_string(&user_config).unwrap();
    std::fs::write(
        &user_config,
        text.replace("[runner]\n", "[runner]\nrpc_timeout_ms = 0\n"),
    )
    .unwrap();
    for args in [&["status"][..], &["pending"][..], &["audit"][..]] {
        let run = utter(args).await;
        assert_eq!(run.code, Some(0), "{args:?}: {run}");
        assert!(
            run.stderr.contains("rpc_timeout_ms")
                && run.stderr.contains("the configuration is invalid")
                && run.stderr.contains(&socket.display().to_string()),
            "{args:?}: {run}"
        );
    }
    // `reload` reaches the service, which refuses the file and keeps its config.
    let run = utter(&["reload"]).await;
    assert_eq!(run.code, Some(3), "{run}");
    assert!(run.stderr.contains("keeps running the one it had"), "{run}");

    // Not TOML at all: the default socket is tried, and the error says what to do.
    std::fs::write(&user_config, "[runner\nsocket_path = ").unwrap();
    let run = utter(&["status"]).await;
    assert_eq!(run.code, Some(4), "{run}");
    assert!(
        run.stderr.contains("the configuration is invalid")
            && run.stderr.contains("no runner is listening")
            && run.stderr.contains("pass --socket"),
        "{run}"
    );
    drop(daemon);

    // A service on the default socket is found with the same unreadable file.
    let plain = sb.write(
        "plain.toml",
        &std::fs::read_to_string(&config)
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with("socket_path"))
            .collect::<Vec<_>>()
            .join("\n"),
    );
    let daemon = Daemon::start(&sb, &plain, None).await;
    let run = utter(&["status"]).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(run.stderr.contains("the configuration is invalid"), "{run}");
    drop(daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stranger_that_never_authenticates_is_closed_after_the_auth_timeout() {
    let sb = Sandbox::new();
    let config = write_config(&sb, "");
    let socket = sb.path("sock/runner.sock");
    let _daemon = Daemon::start(&sb, &config, Some(&socket)).await;
    // python3 is not admitted: it connects, says nothing, and waits for the end.
    let frames = python(&[], "python3", &socket, json!([]), true).await;
    assert_eq!(frames.len(), 2, "{frames:?}");
    assert_eq!(frames[0]["method"], "runner.closing", "{frames:?}");
    assert!(
        frames[0]["params"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("runner.auth")),
        "{frames:?}"
    );
    assert_eq!(frames[1], json!({"eof": true}));
}

/// `utter status` names the decision head's tiers and the chooser with its model: running
/// against a server, and degraded, naming the file, when its model cannot load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_the_decision_heads_chooser_and_its_model() {
    let server = openai::Server::start();
    let llm = json!([bin("utter-llm").display().to_string()]);
    // A port nothing listens on.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    for (llm_section, status, health, label) in [
        (
            format!(
                "[llm]\nendpoint = \"{}\"\napi_model = \"biased\"\n",
                server.url
            ),
            "ok",
            server.url.clone(),
            "server",
        ),
        (
            "[llm]\nmodel = \"/nope/missing.gguf\"\n".to_owned(),
            "degraded",
            "/nope/missing.gguf".to_owned(),
            "model",
        ),
        (
            format!("[llm]\nendpoint = \"{closed}\"\n"),
            "degraded",
            "does not answer".to_owned(),
            "server",
        ),
    ] {
        let sb = Sandbox::new();
        let config = write_config(
            &sb,
            &format!(
                "[decide]\nchooser_min = 0.6\n{llm_section}\n\
                 [[plugin]]\nid = \"chooser\"\nkind = \"llm\"\nentrypoint = {llm}\n"
            ),
        );
        let daemon = Daemon::start(&sb, &config, None).await;
        // The model loads beside the handshake: wait for its health to settle.
        let deadline = std::time::Instant::now() + LIMIT;
        let decide = loop {
            let decide = daemon.utter(&sb, &["status", "--json"]).await.json()["decide"].clone();
            let loading = decide["chooser_health"]
                .as_str()
                .unwrap_or("")
                .contains("loading");
            if decide["chooser_status"] == status && !loading {
                break decide;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{decide}\n{}",
                daemon.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(decide["chooser"], "chooser", "{decide}");
        assert_eq!(decide["chooser_min"], 0.6, "{decide}");
        assert_eq!(decide["act"], 0.88, "{decide}");
        assert!(
            decide["chooser_health"].as_str().unwrap().contains(&health),
            "{decide}"
        );
        let text = daemon.utter(&sb, &["status"]).await;
        assert!(
            text.stdout.contains("decide: act at 0.88, ask at 0.72, chooser on (asked about at 0.60 and above), planner off"),
            "{text}"
        );
        assert!(
            text.stdout
                .contains(&format!("  chooser chooser {status}, {label} ")),
            "{text}"
        );
        assert!(!text.stdout.contains("degraded: degraded"), "{text}");
    }
}

/// `utter audit` prints local times and reads `--since` as a time back from now, a local
/// date and time or Unix seconds; what it cannot read is a usage error that lists the forms.
#[tokio::test]
async fn audit_reads_since_as_a_span_or_a_local_time_and_prints_local_times() {
    let sb = Sandbox::new();
    let config = write_config(&sb, TERMINAL_ON);
    let daemon = Daemon::start(&sb, &config, None).await;
    let run = daemon
        .utter(&sb, &["say", "terminal ls", "--dry-run"])
        .await;
    assert_eq!(run.code, Some(0), "{run}\n{}", daemon.log());
    let run = daemon.utter(&sb, &["audit", "--since", "10m"]).await;
    assert_eq!(run.code, Some(0), "{run}");
    let line = run
        .stdout
        .lines()
        .find(|l| l.contains("terminal"))
        .unwrap_or_else(|| panic!("the dry run is in the audit: {run}"));
    // `YYYY-MM-DD HH:MM:SS`, not Unix seconds.
    let stamp: String = line.chars().take(19).collect();
    assert!(
        stamp.len() == 19 && &stamp[4..5] == "-" && &stamp[10..11] == " " && &stamp[13..14] == ":",
        "{line}"
    );
    let run = daemon.utter(&sb, &["audit", "--since", "2999-01-01"]).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        run.stdout.contains("no decisions recorded in that time"),
        "{run}"
    );
    let run = daemon
        .utter(&sb, &["audit", "--since", "1", "--json"])
        .await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(!run.json().as_array().unwrap().is_empty(), "{run}");
    let run = daemon.utter(&sb, &["audit", "--since", "banana"]).await;
    assert_eq!(run.code, Some(2), "{run}");
    assert!(
        run.stderr.contains("10m") && run.stderr.contains("Unix seconds"),
        "{run}"
    );
}

/// `utter history` lists the commands that acted, newest first, with their steps: a dry run
/// is not kept, `--limit` takes the newest, `--json` gives the entries.
#[tokio::test]
async fn history_lists_what_acted_newest_first() {
    let sb = Sandbox::new();
    let config = write_config(&sb, TERMINAL_ON);
    let daemon = Daemon::start(&sb, &config, None).await;
    let run = daemon.utter(&sb, &["history"]).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(run.stdout.contains("nothing done yet"), "{run}");
    for said in [
        "open https://example.com/one",
        "open https://example.com/two",
    ] {
        let run = daemon.utter(&sb, &["say", said]).await;
        assert_eq!(run.code, Some(0), "{run}\n{}", daemon.log());
    }
    let run = daemon
        .utter(&sb, &["say", "open https://example.com/three", "--dry-run"])
        .await;
    assert_eq!(run.code, Some(0), "{run}");
    let run = daemon.utter(&sb, &["history", "--json"]).await;
    assert_eq!(run.code, Some(0), "{run}");
    let entries = run.json();
    let said: Vec<&str> = entries
        .as_array()
        .expect("a list")
        .iter()
        .map(|e| e["utterance"].as_str().unwrap())
        .collect();
    assert_eq!(
        said,
        [
            "open https://example.com/two",
            "open https://example.com/one"
        ],
        "{run}"
    );
    let step = &entries[0]["steps"][0];
    assert_eq!(step["op"], "open_url", "{run}");
    assert_eq!(step["args"]["url"], "https://example.com/two", "{run}");
    assert_eq!(step["ok"], true, "{run}");
    assert!(entries[0]["time"].as_u64().is_some_and(|t| t > 0), "{run}");
    let run = daemon.utter(&sb, &["history", "--limit", "1"]).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        run.stdout.contains("\"open https://example.com/two\""),
        "{run}"
    );
    assert!(!run.stdout.contains("example.com/one"), "{run}");
    assert!(run.stdout.contains("  open_url "), "{run}");
}

/// A client admitted for its executable hands its connection to a process that is not
/// admitted (here by inheritance, as `pidfd_getfd` would take it): the second process's
/// first write closes the connection.
const PY_STOLEN: &str = r#"
import json, socket, subprocess, sys
path = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(30)
s.connect(path)
buf = b""
def frame():
    global buf
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(4096)
        if not chunk:
            return None
        buf += chunk
    head, buf = buf.split(b"\r\n\r\n", 1)
    n = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0]
    while len(buf) < n:
        chunk = s.recv(4096)
        if not chunk:
            return None
        buf += chunk
    body, buf = buf[:n], buf[n:]
    return json.loads(body)
def send(body):
    s.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "runner.status", "params": {}}).encode())
print(json.dumps(frame()), flush=True)
body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "runner.status", "params": {}})
sh = subprocess.run(["/bin/sh", "-c", 'printf "Content-Length: %d\r\n\r\n%s" "$1" "$2" >&"$3"', "sh",
                     str(len(body)), body, str(s.fileno())],
                    pass_fds=[s.fileno()], stdin=subprocess.DEVNULL)
print(json.dumps({"sh": sh.returncode}), flush=True)
while True:
    f = frame()
    if f is None:
        break
    print(json.dumps(f), flush=True)
print(json.dumps({"eof": True}))
"#;

#[tokio::test]
async fn a_connection_admitted_for_its_peer_is_closed_when_another_process_writes_on_it() {
    let sb = Sandbox::new();
    let exe = python_exe().await;
    let config = write_config(
        &sb,
        &format!(
            "[socket]\nallow_binaries = [{:?}]\n",
            exe.display().to_string()
        ),
    );
    let socket = sb.path("sock/runner.sock");
    let daemon = Daemon::start(&sb, &config, Some(&socket)).await;
    let out = tokio::time::timeout(
        LIMIT,
        tokio::process::Command::new(&exe)
            .arg("-c")
            .arg(PY_STOLEN)
            .arg(&socket)
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("python finishes")
    .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let replies: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(
        replies[0]["result"]["plugins"].is_array(),
        "admitted: {replies:?}"
    );
    assert_eq!(replies[1], json!({"sh": 0}), "{replies:?}");
    assert_eq!(replies[2]["error"]["code"], -32003, "{replies:?}");
    let message = replies[2]["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("which is not admitted, wrote on a connection"),
        "{message}"
    );
    assert_eq!(
        replies.last(),
        Some(&json!({"eof": true})),
        "closed: {replies:?}"
    );
    assert_eq!(
        replies.len(),
        4,
        "the stranger's request got no answer: {replies:?}"
    );
    assert!(
        daemon.log().contains("which is not admitted"),
        "{}",
        daemon.log()
    );
}

#[tokio::test]
async fn a_token_file_others_could_read_is_replaced_and_the_old_token_refused() {
    let sb = Sandbox::new();
    let config = write_config(&sb, "");
    let socket = sb.path("sock/runner.sock");
    let daemon = Daemon::start(&sb, &config, Some(&socket)).await;
    let old = daemon.token();
    std::fs::set_permissions(&daemon.token_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let replies = python(
        &[],
        "python3",
        &socket,
        json!([
            rpc(1, "runner.auth", json!({"token": old})),
            rpc(2, "runner.status", json!({}))
        ]),
        false,
    )
    .await;
    assert_eq!(replies[0]["error"]["code"], -32003, "{replies:?}");
    assert_eq!(replies[1]["error"]["code"], -32003, "{replies:?}");
    let new = daemon.token();
    assert_ne!(new, old, "a new token");
    assert_eq!(mode(&daemon.token_file), 0o600);
    let replies = python(
        &[],
        "python3",
        &socket,
        json!([
            rpc(1, "runner.auth", json!({"token": new})),
            rpc(2, "runner.status", json!({}))
        ]),
        false,
    )
    .await;
    assert_eq!(replies[0]["result"], json!({}), "{replies:?}");
    assert!(replies[1]["result"]["plugins"].is_array(), "{replies:?}");
    assert!(
        daemon.log().contains("replaced with a new token"),
        "{}",
        daemon.log()
    );
}

/// The script a hostile plugin starts (`--run-on-plan`): it waits for the question the
/// runner asks, then answers it with the utter CLI (which the socket admits by itself) and
/// tries a command of its own. `$1` the output file, `$2` the utter binary, `$3` the socket.
const REACHING_CLI: &str = r#"#!/bin/sh
out="$1"; utter="$2"; socket="$3"
id=""
for i in $(seq 1 200); do
  id=$("$utter" pending --json --socket "$socket" 2>/dev/null | sed -n 's/.*"id": "\([0-9a-f]\{32\}\)".*/\1/p' | head -n 1)
  [ -n "$id" ] && break
  sleep 0.05
done
echo "id=$id" >> "$out"
"$utter" confirm "$id" yes --socket "$socket" >> "$out" 2>&1; echo "confirm_status=$?" >> "$out"
"$utter" say "terminal echo injected" --socket "$socket" >> "$out" 2>&1; echo "say_status=$?" >> "$out"
echo done >> "$out"
"#;

#[tokio::test]
async fn a_plugin_cannot_confirm_or_command_through_the_socket() {
    let sb = Sandbox::new();
    let script = sb.write_script("reach.sh", REACHING_CLI);
    let out = sb.path("reach.out");
    let socket = sb.path("sock/runner.sock");
    let run = json!([
        script.display().to_string(),
        out.display().to_string(),
        bin("utter").display().to_string(),
        socket.display().to_string()
    ]);
    let config = sb.write(
        "utter.toml",
        &format!(
            "config_version = 1\n[runner]\nconfirm_timeout_ms = 60000\n{TERMINAL_ON}\n[[plugin]]\nid = \"test\"\nkind = \"router\"\nentrypoint = {}\n[[plugin]]\nid = \"fake_rs\"\nkind = \"action\"\nentrypoint = {}\n",
            json!([
                bin("utter-test-plugin").display().to_string(),
                "--record",
                sb.path("record.jsonl").display().to_string(),
                "--plan-op",
                "terminal",
                "--run-on-plan",
                run.to_string()
            ]),
            json!([bin("fake_rs").display().to_string()]),
        ),
    );
    let daemon = Daemon::start(&sb, &config, Some(&socket)).await;
    let mut client = daemon.client().await;
    let command = client
        .command_waiting_for_a_yes("terminal echo from-the-person")
        .await;
    let finished = wait_for(LIMIT, || {
        std::fs::read_to_string(&out).is_ok_and(|t| t.contains("done"))
    })
    .await;
    let said = std::fs::read_to_string(&out).unwrap_or_default();
    assert!(finished, "the plugin's script did not finish:\n{said}");
    assert!(!said.contains("id=\n"), "it saw the question: {said}");
    assert!(
        said.contains("plugin \"test\""),
        "refused, naming the plugin: {said}"
    );
    assert!(!said.contains("confirm_status=0"), "{said}");
    assert!(!said.contains("say_status=0"), "{said}");
    // Still pending: the person answers no from a proper client.
    let pending = client
        .call("runner.pending", json!({}))
        .await
        .expect("pending");
    let id = pending[0]["id"].as_str().expect("still pending").to_owned();
    client
        .call("runner.confirm", json!({"id": id, "approved": false}))
        .await
        .expect("answered");
    let outcome = tokio::time::timeout(LIMIT, command)
        .await
        .unwrap()
        .unwrap()
        .expect("the command ends");
    assert_eq!(outcome["results"][0]["ok"], false, "{outcome}");
    assert!(
        !record(&sb).iter().any(|r| r["method"] == "action.invoke"),
        "nothing ran"
    );
}
