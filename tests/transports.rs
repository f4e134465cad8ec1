//! The socket transports (`connect`, `listen`) against real processes and sockets: the test
//! plugin serves over either, its socket is private, an impostor cannot take it, a dropped
//! socket restarts the plugin, and stopping removes the socket file.

use crate::common;

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use utter_core::config;
use utter_core::supervisor::{PluginStatus, Supervisor, SupervisorOptions};
use utter_protocol::serde_json::json;

/// A test rig: a private runtime directory and a config of test plugins, each with its
/// transport and extra arguments (`{tmp}` in an argument stands for the rig's directory).
struct Rig {
    tmp: tempfile::TempDir,
    socket_dir: PathBuf,
    config: config::Config,
}

impl Rig {
    fn new(plugins: &[(&str, &str, &[&str])]) -> Rig {
        Rig::with_program("utter-test-plugin", plugins)
    }

    fn with_program(program: &str, plugins: &[(&str, &str, &[&str])]) -> Rig {
        let tmp = tempfile::tempdir().expect("temp dir");
        let socket_dir = tmp.path().join("utter").join("plugins");
        let program = common::bin(program);
        let mut text = "config_version = 1\n[runner]\nrpc_timeout_ms = 5000\n".to_string();
        for (id, transport, args) in plugins {
            let mut argv = vec![program.display().to_string()];
            argv.extend(
                args.iter()
                    .map(|s| s.replace("{tmp}", &tmp.path().display().to_string())),
            );
            text.push_str(&format!(
                "[[plugin]]\nid = \"{id}\"\nkind = \"bundle\"\ntransport = \"{transport}\"\nentrypoint = {}\n",
                json!(argv)
            ));
        }
        let parsed = config::parse(&text, "test.toml").expect("test config is valid");
        assert!(
            parsed.warnings.is_empty(),
            "socket transports are served, so no warning: {:?}",
            parsed.warnings
        );
        Rig {
            tmp,
            socket_dir,
            config: parsed.config,
        }
    }

    fn options(&self) -> SupervisorOptions {
        let mut options = SupervisorOptions::from_config(&self.config);
        options.socket_dir = self.socket_dir.clone();
        options
    }

    async fn start(&self) -> Supervisor {
        Supervisor::start(&self.config, self.options()).await
    }

    fn socket(&self, id: &str) -> PathBuf {
        self.socket_dir.join(format!("{id}.sock"))
    }
}

fn status_of(sup: &Supervisor, id: &str) -> (PluginStatus, u64, Option<String>) {
    let p = sup
        .plugins()
        .into_iter()
        .find(|p| p.id == id)
        .expect("plugin listed");
    (p.status, p.epoch, p.last_error)
}

fn mode_of(path: &Path) -> u32 {
    std::fs::metadata(path).expect("stat").permissions().mode() & 0o777
}

fn alive(pid: u64) -> bool {
    // A reaped process has no /proc entry; a zombie would say "Z".
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_and_listen_plugins_handshake_and_serve_over_private_sockets() {
    let rig = Rig::new(&[("dialer", "connect", &[]), ("server", "listen", &[])]);
    let sup = rig.start().await;
    for id in ["dialer", "server"] {
        assert_eq!(status_of(&sup, id), (PluginStatus::Ok, 0, None), "{id}");
        let echo = sup
            .call(id, "test.echo", json!({"via": id}), Duration::from_secs(5))
            .await
            .expect("echo answered");
        assert_eq!(echo["params"], json!({"via": id}));
        assert_eq!(echo["epoch"], 0);
        let socket = rig.socket(id);
        let meta = std::fs::symlink_metadata(&socket).expect("the socket file exists");
        assert!(meta.file_type().is_socket(), "{id}: a socket");
        assert_eq!(mode_of(&socket), 0o600, "{id}: socket mode");
    }
    assert_eq!(mode_of(&rig.socket_dir), 0o700, "socket directory mode");
    sup.shutdown().await;
    for id in ["dialer", "server"] {
        assert_eq!(status_of(&sup, id).0, PluginStatus::Stopped);
        assert!(
            !rig.socket(id).exists(),
            "{id}: stopping removes the socket file"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_on_the_protocol_crates_server_runs_on_every_transport() {
    let rig = Rig::with_program(
        "fake_rs",
        &[
            ("s", "stdio", &[]),
            ("c", "connect", &[]),
            ("l", "listen", &[]),
        ],
    );
    let sup = rig.start().await;
    for id in ["s", "c", "l"] {
        assert_eq!(status_of(&sup, id), (PluginStatus::Ok, 0, None), "{id}");
        let answer = sup
            .call(
                id,
                "action.invoke",
                json!({"op": "open_url", "args": {"url": "https://example.org/"}}),
                Duration::from_secs(5),
            )
            .await
            .expect("fake_rs answers");
        assert_eq!(answer["dry_run"], true, "{id}");
    }
    sup.shutdown().await;
    assert!(!rig.socket("c").exists() && !rig.socket("l").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_are_sanitised_into_socket_names_and_stale_files_replaced() {
    let rig = Rig::new(&[("odd:id/x", "connect", &[])]);
    std::fs::create_dir_all(&rig.socket_dir).expect("socket dir");
    let path = rig.socket_dir.join("odd_id_x.sock");
    // A stale socket from an earlier run.
    drop(std::os::unix::net::UnixListener::bind(&path).expect("bind a stale socket"));
    assert!(path.exists());
    let sup = rig.start().await;
    assert_eq!(status_of(&sup, "odd:id/x").0, PluginStatus::Ok);
    sup.shutdown().await;
    assert!(!path.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impostor_cannot_take_a_connect_plugins_socket() {
    let rig = Rig::new(&[("slow", "connect", &["--dial-delay-ms", "1500"])]);
    let socket = rig.socket("slow");
    let config = rig.config.clone();
    let options = rig.options();
    let starting = tokio::spawn(async move { Supervisor::start(&config, options).await });
    assert!(
        common::wait_for(Duration::from_secs(5), || socket.exists()).await,
        "the runner binds before spawning"
    );
    // This test process is the runner's process, not the plugin or its descendant.
    let mut impostor = tokio::net::UnixStream::connect(&socket)
        .await
        .expect("the connection itself is accepted");
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(3), impostor.read(&mut buf))
        .await
        .expect("the impostor is closed promptly");
    assert!(
        matches!(read, Ok(0) | Err(_)),
        "the impostor got nothing: {read:?}"
    );
    let sup = starting.await.expect("start");
    assert_eq!(status_of(&sup, "slow"), (PluginStatus::Ok, 0, None));
    let echo = sup
        .call("slow", "test.echo", json!({}), Duration::from_secs(5))
        .await
        .expect("the real plugin is served");
    assert_eq!(echo["epoch"], 0);
    sup.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_socket_bound_by_another_process_is_not_used() {
    let rig = Rig::new(&[(
        "slow",
        "listen",
        &["--dial-delay-ms", "1500", "--pid-file", "{tmp}/slow.pid"],
    )]);
    let pid_file = rig.tmp.path().join("slow.pid");
    let socket = rig.socket("slow");
    let config = rig.config.clone();
    let options = rig.options();
    let starting = tokio::spawn(async move { Supervisor::start(&config, options).await });
    assert!(
        common::wait_for(Duration::from_secs(5), || pid_file.exists()).await,
        "the plugin started"
    );
    // While the plugin waits, this process takes the socket path and listens on it.
    let impostor = tokio::net::UnixListener::bind(&socket).expect("the impostor binds");
    let dialed = tokio::spawn(async move {
        let (mut stream, _) = impostor
            .accept()
            .await
            .expect("the runner dials the impostor");
        let mut buf = [0u8; 64];
        tokio::time::timeout(Duration::from_secs(3), stream.read(&mut buf)).await
    });
    let read = dialed.await.expect("impostor task");
    assert!(
        matches!(read, Ok(Ok(0)) | Ok(Err(_))),
        "the runner sent the impostor nothing and hung up: {read:?}"
    );
    let sup = starting.await.expect("start");
    assert_eq!(status_of(&sup, "slow"), (PluginStatus::Ok, 0, None));
    let echo = sup
        .call("slow", "test.echo", json!({}), Duration::from_secs(5))
        .await
        .expect("the real plugin is served");
    assert_eq!(echo["epoch"], 0);
    sup.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_socket_with_a_living_process_restarts_the_plugin() {
    let rig = Rig::new(&[("c", "connect", &[]), ("l", "listen", &[])]);
    let sup = rig.start().await;
    for id in ["c", "l"] {
        let before = sup
            .call(id, "test.echo", json!({}), Duration::from_secs(5))
            .await
            .expect("echo");
        let old_pid = before["pid"].as_u64().expect("pid");
        let answer = sup
            .call(id, "test.drop_socket", json!({}), Duration::from_secs(5))
            .await
            .expect("drop_socket answered");
        assert_eq!(answer["dropping"], true);
        assert!(
            common::wait_for(Duration::from_secs(20), || status_of(&sup, id).0
                == PluginStatus::Ok
                && status_of(&sup, id).1 == 1)
            .await,
            "{id}: restarted with epoch 1: {:?}",
            status_of(&sup, id)
        );
        assert!(
            !alive(old_pid),
            "{id}: the old process (which ignored the drop) was killed"
        );
        let after = sup
            .call(id, "test.echo", json!({}), Duration::from_secs(5))
            .await
            .expect("the new instance serves");
        assert_eq!(after["epoch"], 1);
        assert_ne!(after["pid"].as_u64(), Some(old_pid));
    }
    sup.shutdown().await;
    assert!(!rig.socket("c").exists() && !rig.socket("l").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_plugin_that_exits_before_connecting_fails_with_minus_32000() {
    let rig = Rig::new(&[
        ("gone-c", "connect", &["--exit-before-hello"]),
        ("gone-l", "listen", &["--exit-before-hello"]),
    ]);
    let sup = rig.start().await;
    for id in ["gone-c", "gone-l"] {
        let (status, _, last_error) = status_of(&sup, id);
        assert_ne!(status, PluginStatus::Ok, "{id}");
        let last_error = last_error.expect("an error is recorded");
        assert!(
            last_error.contains("before its socket"),
            "{id}: {last_error}"
        );
    }
    let err = sup
        .call("gone-l", "test.echo", json!({}), Duration::from_secs(1))
        .await
        .expect_err("not running");
    assert_eq!(err.code, -32000);
    sup.shutdown().await;
}
