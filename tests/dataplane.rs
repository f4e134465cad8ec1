//! The data plane against a real daemon: handles (create, fetch, stat, retain, release,
//! scoping, expiry, collection, quota) over the real client socket, with the blobs observed
//! on disk.

use crate::common;

use common::{Sandbox, bin};
use std::path::{Path, PathBuf};
use std::time::Duration;
use utter_protocol::serde_json::{Value, json};
use utter_protocol::{Connection, ConnectionOptions, ErrorObject};

const LIMIT: Duration = Duration::from_secs(60);

/// A daemon in its own sandbox with `runner` added to its `[runner]` table; SIGTERM on drop.
struct Daemon {
    sb: Sandbox,
    process: common::daemon::Daemon,
}

impl std::ops::Deref for Daemon {
    type Target = common::daemon::Daemon;
    fn deref(&self) -> &Self::Target {
        &self.process
    }
}

impl std::ops::DerefMut for Daemon {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.process
    }
}

impl Daemon {
    async fn start(runner: &str) -> Daemon {
        let sb = Sandbox::new();
        let handles = sb.path("handles");
        // What a runner that died left behind (no process has this pid).
        sb.write("handles/runner-99999999/stale", "left over");
        let config = sb.write(
            "utter.toml",
            &format!(
                "config_version = 1\n[runner]\nhandle_root = {}\n{runner}\n\
                 [[plugin]]\nid = \"fake_rs\"\nkind = \"action\"\nentrypoint = {}\n",
                json!(handles.display().to_string()),
                json!([bin("fake_rs").display().to_string()]),
            ),
        );
        let process = common::daemon::Daemon::builder(&sb)
            .config(&config)
            .log(&sb.path("daemon.log"))
            .spawn();
        let mut daemon = Daemon { sb, process };
        let deadline = tokio::time::Instant::now() + LIMIT;
        loop {
            if let Ok(Some(status)) = daemon.child.try_wait() {
                panic!("the daemon exited with {status}:\n{}", daemon.log());
            }
            if daemon.sb.path("state/utter/runner-token").exists() {
                if let Ok(client) = daemon.try_client().await {
                    drop(client);
                    break;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no daemon:\n{}",
                daemon.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        daemon
    }

    fn handles(&self) -> PathBuf {
        self.sb.path("handles")
    }

    async fn try_client(&self) -> Result<Client, String> {
        let stream = tokio::net::UnixStream::connect(&self.socket)
            .await
            .map_err(|e| e.to_string())?;
        let (read, write) = stream.into_split();
        let (conn, incoming) = Connection::spawn(read, write, ConnectionOptions::default());
        let client = Client {
            conn,
            _incoming: incoming,
        };
        let token = std::fs::read_to_string(self.sb.path("state/utter/runner-token"))
            .map_err(|e| e.to_string())?;
        client
            .call("runner.auth", json!({"token": token.trim()}))
            .await
            .map_err(|e| e.message)?;
        Ok(client)
    }

    async fn client(&self) -> Client {
        self.try_client().await.expect("an authenticated client")
    }
}

struct Client {
    conn: Connection,
    _incoming: tokio::sync::mpsc::Receiver<utter_protocol::Incoming>,
}

impl Client {
    async fn call(&self, method: &str, params: Value) -> Result<Value, ErrorObject> {
        self.conn.request(method, params, Some(LIMIT)).await
    }
}

fn b64(bytes: &[u8]) -> String {
    utter_core::handles::b64_encode(bytes)
}

/// Where the daemon keeps the blob `sha`: in its `runner-<pid>` directory under `dir`.
fn blob(dir: &Path, sha: &Value) -> PathBuf {
    let mut runners: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(runners.len(), 1, "one runner directory: {runners:?}");
    runners
        .pop()
        .unwrap()
        .join(sha.as_str().expect("sha256 is a string"))
}

async fn eventually(mut check: impl FnMut() -> bool) -> bool {
    common::wait_for(Duration::from_secs(20), &mut check).await
}

#[tokio::test(flavor = "multi_thread")]
async fn handles_are_created_fetched_stated_retained_and_released() {
    let daemon = Daemon::start("").await;
    let client = daemon.client().await;
    assert!(
        !daemon.handles().join("runner-99999999").exists(),
        "a dead runner's blobs are removed at start"
    );

    let made = client
        .call("handle.create", json!({"data_b64": b64(b"hello, handles")}))
        .await
        .unwrap();
    let sha = utter_core::handles::digest_hex(b"hello, handles");
    assert_eq!(made["sha256"], sha);
    assert_eq!(made["size"], 14);
    assert_eq!(made["handle"], format!("handle://{sha}"));
    let on_disk = blob(&daemon.handles(), &made["sha256"]);
    assert_eq!(std::fs::read(&on_disk).unwrap(), b"hello, handles");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(daemon.handles())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);

    let fetched = client
        .call("handle.fetch", json!({"handle": made["handle"]}))
        .await
        .unwrap();
    assert_eq!(fetched["data_b64"], b64(b"hello, handles"));
    assert_eq!(fetched["sha256"], sha);
    assert_eq!(fetched["size"], 14);

    let text = client
        .call("handle.create", json!({"data": "plain text"}))
        .await
        .unwrap();
    assert_eq!(text["size"], 10);
    let zeros = client
        .call("handle.create", json!({"size": 3}))
        .await
        .unwrap();
    assert_eq!(zeros["sha256"], utter_core::handles::digest_hex(&[0, 0, 0]));

    let stat = client
        .call("handle.stat", json!({"handle": made["handle"]}))
        .await
        .unwrap();
    assert_eq!(stat["size"], 14);
    assert_eq!(stat["refcount"], 1);
    assert_eq!(stat["ttl"], 300.0);
    let expires = stat["expires"].as_f64().unwrap() - stat["created"].as_f64().unwrap();
    assert!((expires - 300.0).abs() < 1e-6, "{stat}");

    // Bad input: strict base64, strict handle syntax (never a path).
    for (method, params) in [
        ("handle.create", json!({"data_b64": "aGVsbG8"})),
        ("handle.create", json!({})),
        (
            "handle.fetch",
            json!({"handle": "handle://../../etc/passwd"}),
        ),
        (
            "handle.fetch",
            json!({"handle": format!("handle://{}", sha.to_uppercase())}),
        ),
        (
            "handle.fetch",
            json!({"handle": format!("handle://{}", "0".repeat(64))}),
        ),
    ] {
        let e = client.call(method, params.clone()).await.unwrap_err();
        assert_eq!(e.code, -32602, "{method} {params}: {e:?}");
    }

    // Retain twice, release three times: the blob goes once nobody holds it.
    assert_eq!(
        client
            .call("handle.retain", json!({"handle": made["handle"]}))
            .await
            .unwrap()["refcount"],
        2
    );
    for left in [1, 0] {
        let r = client
            .call("handle.release", json!({"handle": made["handle"]}))
            .await
            .unwrap();
        assert_eq!(r["refcount"], left);
    }
    assert!(
        eventually(|| !on_disk.exists()).await,
        "the released blob was not collected"
    );
    let e = client
        .call("handle.fetch", json!({"handle": made["handle"]}))
        .await
        .unwrap_err();
    assert_eq!(e.code, -32602);

    // A connection that leaves gives up its handles.
    let text_blob = blob(&daemon.handles(), &text["sha256"]);
    assert!(text_blob.exists());
    drop(client);
    assert!(
        eventually(|| !text_blob.exists()).await,
        "a closed connection's blob stayed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sixty_four_kib_is_inline_and_one_byte_more_is_not() {
    let daemon = Daemon::start("").await;
    let client = daemon.client().await;
    let exact: Vec<u8> = (0..65_536u32).map(|i| (i % 251) as u8).collect();
    let made = client
        .call("handle.create", json!({"data_b64": b64(&exact)}))
        .await
        .unwrap();
    let fetched = client
        .call("handle.fetch", json!({"handle": made["handle"]}))
        .await
        .unwrap();
    assert_eq!(
        utter_core::handles::b64_decode(fetched["data_b64"].as_str().unwrap()).unwrap(),
        exact
    );
    let big = client
        .call("handle.create", json!({"size": 65_537}))
        .await
        .unwrap();
    let e = client
        .call("handle.fetch", json!({"handle": big["handle"]}))
        .await
        .unwrap_err();
    assert_eq!(e.code, -32007);
    assert_eq!(
        e.data,
        Some(json!({"size": 65_537, "max_inline": 65_536, "handle": big["handle"]}))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn another_connection_cannot_see_a_handle_it_was_not_given() {
    let daemon = Daemon::start("").await;
    let alice = daemon.client().await;
    let bob = daemon.client().await;
    let made = alice
        .call("handle.create", json!({"data": "alice's secret"}))
        .await
        .unwrap();
    for method in [
        "handle.fetch",
        "handle.stat",
        "handle.retain",
        "handle.release",
    ] {
        let e = bob
            .call(method, json!({"handle": made["handle"]}))
            .await
            .unwrap_err();
        assert_eq!(e.code, -32602, "{method}: {e:?}");
    }
    // Alice still has it, and creating the same bytes gives Bob his own reference.
    alice
        .call("handle.fetch", json!({"handle": made["handle"]}))
        .await
        .unwrap();
    let mine = bob
        .call("handle.create", json!({"data": "alice's secret"}))
        .await
        .unwrap();
    assert_eq!(mine["handle"], made["handle"]);
    bob.call("handle.fetch", json!({"handle": made["handle"]}))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn handles_expire_and_are_collected_from_disk() {
    let daemon = Daemon::start("handle_ttl = 1.0").await;
    let client = daemon.client().await;
    let made = client
        .call("handle.create", json!({"data": "short-lived"}))
        .await
        .unwrap();
    let on_disk = blob(&daemon.handles(), &made["sha256"]);
    assert!(on_disk.exists());
    assert!(
        eventually(|| !on_disk.exists()).await,
        "the expired blob stayed on disk"
    );
    let e = client
        .call("handle.fetch", json!({"handle": made["handle"]}))
        .await
        .unwrap_err();
    assert_eq!(e.code, -32602);
}

/// A client holds at most its quota, over all its connections (one process): the same bytes
/// again cost nothing, a second connection of the same process shares the quota, and what
/// is released is free again.
#[tokio::test(flavor = "multi_thread")]
async fn a_client_cannot_hold_more_than_its_quota() {
    let daemon = Daemon::start("handle_quota = 1000").await;
    let client = daemon.client().await;
    let first = client
        .call("handle.create", json!({"size": 600}))
        .await
        .unwrap();
    let e = client
        .call("handle.create", json!({"data": "x".repeat(500)}))
        .await
        .unwrap_err();
    assert_eq!(e.code, -32005, "{e:?}");
    assert_eq!(e.data.as_ref().unwrap()["quota"], 1000);
    let e = client
        .call("handle.create", json!({"size": 5000}))
        .await
        .unwrap_err();
    assert_eq!(e.code, -32005);
    // The same bytes again cost nothing, on either connection of this process.
    client
        .call("handle.create", json!({"size": 600}))
        .await
        .unwrap();
    let other = daemon.client().await;
    other
        .call("handle.create", json!({"size": 600}))
        .await
        .unwrap();
    let e = other
        .call("handle.create", json!({"data": "x".repeat(500)}))
        .await
        .unwrap_err();
    assert_eq!(
        e.code, -32005,
        "the second connection shares the quota: {e:?}"
    );
    for holder in [&client, &client, &other] {
        holder
            .call("handle.release", json!({"handle": first["handle"]}))
            .await
            .unwrap();
    }
    other
        .call("handle.create", json!({"data": "x".repeat(500)}))
        .await
        .unwrap();
}

/// A blocking client speaking raw frames, reading with `recvmsg` so that descriptors that
/// ride on a response are received.
struct FdClient {
    stream: std::os::unix::net::UnixStream,
    buffer: Vec<u8>,
    fds: Vec<std::os::fd::OwnedFd>,
    next_id: i64,
}

impl FdClient {
    fn connect(daemon: &Daemon) -> FdClient {
        let stream = std::os::unix::net::UnixStream::connect(&daemon.socket).unwrap();
        stream.set_read_timeout(Some(LIMIT)).unwrap();
        let mut client = FdClient {
            stream,
            buffer: Vec::new(),
            fds: Vec::new(),
            next_id: 1,
        };
        let token = std::fs::read_to_string(daemon.sb.path("state/utter/runner-token")).unwrap();
        let (reply, fd) = client.call("runner.auth", json!({"token": token.trim()}));
        assert!(reply.get("result").is_some(), "{reply}");
        assert!(fd.is_none());
        client
    }

    /// Send a request; the response and the descriptor that came with it, if any.
    fn call(&mut self, method: &str, params: Value) -> (Value, Option<std::os::fd::OwnedFd>) {
        use std::io::Write;
        let body =
            json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
                .to_string();
        self.next_id += 1;
        write!(self.stream, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        loop {
            if let Some(frame) = self.take_frame() {
                let fd = if self.fds.is_empty() {
                    None
                } else {
                    Some(self.fds.remove(0))
                };
                assert!(self.fds.is_empty(), "one descriptor per response");
                return (frame, fd);
            }
            self.receive();
        }
    }

    fn take_frame(&mut self) -> Option<Value> {
        let text = std::str::from_utf8(&self.buffer).ok()?;
        let end = text.find("\r\n\r\n")?;
        let length: usize = text[..end]
            .strip_prefix("Content-Length: ")
            .unwrap()
            .parse()
            .unwrap();
        if self.buffer.len() < end + 4 + length {
            return None;
        }
        let body: Vec<u8> = self
            .buffer
            .drain(..end + 4 + length)
            .skip(end + 4)
            .collect();
        Some(utter_protocol::serde_json::from_slice(&body).unwrap())
    }

    fn receive(&mut self) {
        use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
        use std::os::fd::{AsRawFd, FromRawFd};
        let mut chunk = [0u8; 65536];
        let mut space = nix::cmsg_space!([std::os::fd::RawFd; 4]);
        let (n, fds) = {
            let mut iov = [std::io::IoSliceMut::new(&mut chunk)];
            let msg = recvmsg::<()>(
                self.stream.as_raw_fd(),
                &mut iov,
                Some(&mut space),
                MsgFlags::MSG_CMSG_CLOEXEC,
            )
            .expect("recvmsg");
            let mut fds = Vec::new();
            for cmsg in msg.cmsgs().unwrap() {
                if let ControlMessageOwned::ScmRights(received) = cmsg {
                    fds.extend(received);
                }
            }
            (msg.bytes, fds)
        };
        assert!(n > 0, "the runner closed the connection");
        self.buffer.extend_from_slice(&chunk[..n]);
        // SAFETY: SCM_RIGHTS hands us new descriptors that nothing else owns.
        self.fds.extend(
            fds.into_iter()
                .map(|fd| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }),
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn fd_pass_hands_over_a_blob_a_sealed_memfd_and_a_ring() {
    use std::io::{Read, Seek, Write};
    let daemon = Daemon::start("").await;
    let mut client = FdClient::connect(&daemon);

    // A handle: a read-only descriptor of the blob, even one too large to fetch inline.
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 241) as u8).collect();
    let (made, _) = client.call("handle.create", json!({"data_b64": b64(&data)}));
    let handle = made["result"]["handle"].clone();
    let (reply, fd) = client.call(
        "fd.pass",
        json!({"kind": "handle", "meta": {"handle": handle}}),
    );
    assert_eq!(reply["result"]["size"], 200_000, "{reply}");
    let mut file = std::fs::File::from(fd.expect("a descriptor with the response"));
    let mut read = Vec::new();
    file.read_to_end(&mut read).unwrap();
    assert_eq!(read, data);
    assert!(
        file.write_all(b"x").is_err(),
        "the blob's descriptor is read-only"
    );

    // The descriptor travels with its own response, in order, among ordinary frames.
    let (reply, fd) = client.call("runner.version", json!({}));
    assert!(reply["result"]["version"].is_string());
    assert!(fd.is_none());

    // Another connection's handle is not passed.
    let mut other = FdClient::connect(&daemon);
    let (reply, fd) = other.call(
        "fd.pass",
        json!({"kind": "handle", "meta": {"handle": handle}}),
    );
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    assert!(fd.is_none());

    // A memfd: the data, at the requested size, sealed, close-on-exec.
    let (reply, fd) = client.call(
        "fd.pass",
        json!({"kind": "memfd", "meta": {"data": "memfd payload", "size": 4096}}),
    );
    assert_eq!(reply["result"], json!({"kind": "memfd", "size": 4096}));
    let fd = fd.expect("a memfd");
    let seals = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_GET_SEALS).unwrap();
    let wanted = libc_seals();
    assert_eq!(seals & wanted, wanted, "grow, shrink and seal are sealed");
    let mut file = std::fs::File::from(fd);
    assert!(file.set_len(8192).is_err(), "it cannot grow");
    assert!(file.set_len(10).is_err(), "it cannot shrink");
    assert_eq!(file.metadata().unwrap().len(), 4096);
    let mut head = vec![0u8; 13];
    file.rewind().unwrap();
    file.read_exact(&mut head).unwrap();
    assert_eq!(head, b"memfd payload");

    // A ring: the runner wrote three frames and closed it; this side reads them.
    let (reply, fd) = client.call(
        "fd.pass",
        json!({"kind": "memfd.ring", "meta": {"capacity": 8, "frame_size": 64, "frames": ["one", "two", "three"], "close": true}}),
    );
    assert_eq!(
        reply["result"],
        json!({"kind": "memfd.ring", "capacity": 8, "frame_size": 64})
    );
    let mut ring = utter_protocol::ring::RingReader::open(fd.expect("a ring")).unwrap();
    let mut buf = vec![0u8; ring.frame_size()];
    let mut frames = Vec::new();
    loop {
        match ring.pop(&mut buf) {
            utter_protocol::ring::Pop::Frame(n) => frames.push(buf[..n].to_vec()),
            utter_protocol::ring::Pop::Closed => break,
            utter_protocol::ring::Pop::Empty => panic!("the ring was closed after its frames"),
        }
    }
    assert_eq!(frames, [&b"one"[..], b"two", b"three"]);

    // Bad requests are answered without a descriptor.
    for meta in [
        json!({"kind": "memfd.ring", "meta": {"capacity": 3, "frame_size": 64}}),
        json!({"kind": "pipe", "meta": {}}),
        json!({"kind": "handle", "meta": {"handle": "/etc/passwd"}}),
    ] {
        let (reply, fd) = client.call("fd.pass", meta.clone());
        assert_eq!(reply["error"]["code"], -32602, "{meta}: {reply}");
        assert!(fd.is_none());
    }
}

/// F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW.
fn libc_seals() -> i32 {
    0x0001 | 0x0002 | 0x0004
}

#[tokio::test(flavor = "multi_thread")]
async fn naming_someone_elses_handle_in_a_relayed_call_does_not_reveal_it() {
    let plugin = format!(
        "[[plugin]]\nid = \"test\"\nkind = \"router\"\nentrypoint = {}\n",
        json!([bin("utter-test-plugin").display().to_string()])
    );
    // The [runner] table is open: close it by starting the plugin list after it.
    let daemon = Daemon::start(&plugin).await;
    let alice = daemon.client().await;
    let bob = daemon.client().await;
    let made = alice
        .call("handle.create", json!({"data": "alice's blob"}))
        .await
        .unwrap();
    let echoed = alice
        .call(
            "runner.invoke",
            json!({"plugin": "test", "method": "test.echo", "params": {"h": made["handle"], "provenance": "user"}}),
        )
        .await
        .unwrap();
    assert_eq!(echoed["params"]["h"], made["handle"]);
    // Bob names the handle; the plugin (which saw it) echoes it; Bob still cannot read it.
    let echoed = bob
        .call(
            "runner.invoke",
            json!({"plugin": "test", "method": "test.echo", "params": {"h": made["handle"], "provenance": "user"}}),
        )
        .await
        .unwrap();
    assert_eq!(echoed["params"]["h"], made["handle"]);
    let e = bob
        .call("handle.fetch", json!({"handle": made["handle"]}))
        .await
        .unwrap_err();
    assert_eq!(e.code, -32602, "{e:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugins_handle_is_adopted_only_when_its_bytes_match() {
    let plugin = format!(
        "[[plugin]]\nid = \"test\"\nkind = \"router\"\nentrypoint = {}\n",
        json!([bin("utter-test-plugin").display().to_string()])
    );
    let daemon = Daemon::start(&plugin).await;
    let client = daemon.client().await;
    // The client names only the digest, so the handle reaches it from the plugin's reply.
    let honest_sha = utter_core::handles::digest_hex(b"plugin bytes");
    let honest = format!("handle://{honest_sha}");
    let reply = client
        .call(
            "runner.invoke",
            json!({"plugin": "test", "method": "test.blob", "params": {"sha256": honest_sha, "data_b64": b64(b"plugin bytes"), "provenance": "user"}}),
        )
        .await
        .unwrap();
    assert_eq!(reply["handle"], honest);
    let fetched = client
        .call("handle.fetch", json!({"handle": honest}))
        .await
        .unwrap();
    assert_eq!(fetched["data_b64"], b64(b"plugin bytes"));

    // A handle whose bytes do not hash to its name is not adopted.
    let lying_sha = utter_core::handles::digest_hex(b"what it claims");
    let lying = format!("handle://{lying_sha}");
    client
        .call(
            "runner.invoke",
            json!({"plugin": "test", "method": "test.blob", "params": {"sha256": lying_sha, "data_b64": b64(b"something else"), "provenance": "user"}}),
        )
        .await
        .unwrap();
    let e = client
        .call("handle.fetch", json!({"handle": lying}))
        .await
        .unwrap_err();
    assert_eq!(e.code, -32602, "{e:?}");
    assert!(daemon.log().contains("not adopted"), "{}", daemon.log());
}
