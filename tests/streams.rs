//! Streams and the plugin side of the data plane against a real daemon, real plugin
//! processes and the real client socket (PROTOCOL.md §10): lossy and reliable delivery,
//! ownership of acks and stops, end of stream, disconnects, plugin-side handles with ranged
//! fetch, and `fd.pass` to plugins.

use crate::common;

use common::{Sandbox, bin};
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::mpsc::Receiver;
use utter_protocol::serde_json::{Value, json};
use utter_protocol::{Connection, ConnectionOptions, ErrorObject, Incoming};

const LIMIT: Duration = Duration::from_secs(60);

/// A daemon in its own sandbox running the test plugin as `test` (stdio, producing the
/// stream `test.ticks`) plus `extra` config; SIGTERM on drop.
struct Daemon {
    sb: Sandbox,
    process: common::daemon::Daemon,
    record: PathBuf,
}

impl std::ops::Deref for Daemon {
    type Target = common::daemon::Daemon;
    fn deref(&self) -> &Self::Target {
        &self.process
    }
}

fn plugin_entry(id: &str, transport: &str, record: &std::path::Path) -> String {
    format!(
        "[[plugin]]\nid = \"{id}\"\nkind = \"bundle\"\ntransport = \"{transport}\"\nentrypoint = {}\n",
        json!([
            bin("utter-test-plugin").display().to_string(),
            "--stream",
            "test.ticks",
            "--record",
            record.display().to_string()
        ])
    )
}

impl Daemon {
    async fn start(runner: &str, extra_plugins: &str) -> Daemon {
        let sb = Sandbox::new();
        let record = sb.path("plugin.jsonl");
        let config = sb.write(
            "utter.toml",
            &format!(
                "config_version = 1\n[runner]\nhandle_root = {}\n{runner}\n{}{extra_plugins}",
                json!(sb.path("handles").display().to_string()),
                plugin_entry("test", "stdio", &record),
            ),
        );
        let process = common::daemon::Daemon::builder(&sb)
            .config(&config)
            .log(&sb.path("daemon.log"))
            .spawn();
        let daemon = Daemon {
            sb,
            process,
            record,
        };
        let deadline = tokio::time::Instant::now() + LIMIT;
        loop {
            if daemon.sb.path("state/utter/runner-token").exists() {
                if let Ok(client) = daemon.try_client().await {
                    let status = client.call("runner.status", json!({})).await.unwrap();
                    let up = status["plugins"]
                        .as_array()
                        .is_some_and(|p| p.iter().all(|p| p["status"] == "ok"));
                    if up {
                        break;
                    }
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no daemon with running plugins:\n{}",
                daemon.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        daemon
    }

    /// The plugin's record, one JSON value per line.
    fn recorded(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| utter_protocol::serde_json::from_str(l).ok())
            .collect()
    }

    async fn wait_recorded(&self, what: &str, check: impl Fn(&Value) -> bool) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + LIMIT;
        loop {
            let lines = self.recorded();
            if lines.iter().any(&check) {
                return lines;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the plugin never recorded {what}: {lines:?}\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn try_client(&self) -> Result<Client, String> {
        let stream = tokio::net::UnixStream::connect(&self.socket)
            .await
            .map_err(|e| e.to_string())?;
        let (read, write) = stream.into_split();
        let (conn, incoming) = Connection::spawn(read, write, ConnectionOptions::default());
        let client = Client { conn, incoming };
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
    incoming: Receiver<Incoming>,
}

impl Client {
    async fn call(&self, method: &str, params: Value) -> Result<Value, ErrorObject> {
        self.conn.request(method, params, Some(LIMIT)).await
    }

    /// Ask the test plugin `plugin` to call the runner: `{result}` or `{error}`.
    async fn via_plugin(&self, plugin: &str, method: &str, params: Value) -> Value {
        self.call(
            "runner.invoke",
            json!({"plugin": plugin, "method": "test.host", "params": {"method": method, "params": params, "provenance": "user"}}),
        )
        .await
        .unwrap()
    }

    /// The next notification (method, params).
    async fn next_note(&mut self) -> (String, Value) {
        match tokio::time::timeout(LIMIT, self.incoming.recv()).await {
            Ok(Some(Incoming::Notification(n))) => (n.method, n.params),
            Ok(Some(Incoming::Request(r))) => panic!("unexpected request {r:?}"),
            Ok(None) => panic!("the runner closed the connection"),
            Err(_) => panic!("no notification within {LIMIT:?}"),
        }
    }
}

fn ticks(id: &str) -> impl Fn(&(String, Value)) -> bool + '_ {
    move |(m, p)| m == "test.ticks" && p["stream_id"] == id
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lossy_stream_drops_the_oldest_frames_for_a_slow_client_and_shows_the_gaps() {
    let daemon = Daemon::start("lossy_queue = 8", "").await;
    let mut client = daemon.client().await;
    let total = 5000u64;
    let answer = client
        .call(
            "stream.subscribe",
            json!({"method": "test.ticks", "params": {"count": total, "size": 3200, "end": true}}),
        )
        .await
        .unwrap();
    assert_eq!(answer["mode"], "lossy");
    let id = answer["stream_id"].as_str().unwrap().to_owned();
    assert!(id.len() >= 32, "an unguessable id: {id}");
    // A slow client: read nothing until the plugin has sent everything.
    daemon
        .wait_recorded("the end of its stream", |l| l["sent"] == total)
        .await;
    let mut seqs = Vec::new();
    let end = loop {
        let note = client.next_note().await;
        if ticks(&id)(&note) {
            assert_eq!(note.1["data"]["pad"].as_str().unwrap().len(), 3200);
            assert_eq!(note.1["data"]["n"], note.1["seq"]);
            seqs.push(note.1["seq"].as_u64().unwrap());
        } else if note.0 == "stream.end" {
            break note.1;
        }
    };
    assert_eq!(end["stream_id"], id.as_str());
    assert_eq!(end["last_seq"], total);
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "in order");
    assert_eq!(*seqs.last().unwrap(), total, "the newest frame is kept");
    let dropped = end["dropped"].as_u64().unwrap();
    assert!(dropped > 0, "a slow client must lose frames: {end}");
    assert_eq!(
        seqs.len() as u64 + dropped,
        total,
        "every frame delivered or counted dropped"
    );
    assert!(
        seqs.windows(2).any(|w| w[1] > w[0] + 1),
        "the drops show as gaps in seq"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reliable_stream_pauses_the_plugin_and_loses_nothing() {
    let daemon = Daemon::start("credit_window = 16", "").await;
    let mut client = daemon.client().await;
    let total = 400u64;
    let answer = client
        .call(
            "stream.subscribe",
            json!({"method": "test.ticks", "mode": "reliable", "params": {"count": total, "size": 3200, "end": true}}),
        )
        .await
        .unwrap();
    assert_eq!(answer["mode"], "reliable");
    let id = answer["stream_id"].as_str().unwrap().to_owned();
    // No acks: the window's worth of frames arrives, then the plugin is out of credit.
    let mut seqs = Vec::new();
    while seqs.len() < 16 {
        let note = client.next_note().await;
        assert!(ticks(&id)(&note), "{note:?}");
        seqs.push(note.1["seq"].as_u64().unwrap());
    }
    daemon
        .wait_recorded("a pause", |l| l["paused_at"] == 17)
        .await;
    // Paused at 17: frame 17 was never sent, so nothing more can be waiting for us.
    assert!(
        client.incoming.try_recv().is_err(),
        "nothing beyond the window"
    );
    // Resume acking: every frame arrives, in order.
    client
        .call("stream.ack", json!({"stream_id": id, "seq": 16}))
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", daemon.log()));
    let end = loop {
        let note = client.next_note().await;
        if ticks(&id)(&note) {
            let seq = note.1["seq"].as_u64().unwrap();
            seqs.push(seq);
            if seq % 8 == 0 {
                let acked = client
                    .call("stream.ack", json!({"stream_id": id, "seq": seq}))
                    .await;
                // Also after the end of the stream: a late ack is answered {}.
                assert_eq!(acked.unwrap(), json!({}));
            }
        } else if note.0 == "stream.end" {
            break note.1;
        }
    };
    assert_eq!(seqs, (1..=total).collect::<Vec<_>>(), "zero frames lost");
    assert_eq!(end["dropped"], 0);
    assert_eq!(end["last_seq"], total);
    let lines = daemon
        .wait_recorded("the end of its stream", |l| l["stream_done"] == id.as_str())
        .await;
    let done = lines
        .iter()
        .find(|l| l["stream_done"] == id.as_str())
        .unwrap();
    assert_eq!(done["sent"], total);
    assert!(done["pauses"].as_u64().unwrap() >= 1, "{done}");
}

#[tokio::test(flavor = "multi_thread")]
async fn only_the_subscriber_may_ack_or_stop_and_stop_is_idempotent() {
    let daemon = Daemon::start("", "").await;
    let mut alice = daemon.client().await;
    let bob = daemon.client().await;
    let id = alice
        .call(
            "stream.subscribe",
            json!({"method": "test.ticks", "mode": "reliable", "params": {"interval_ms": 20}}),
        )
        .await
        .unwrap()["stream_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let first = alice.next_note().await;
    assert!(ticks(&id)(&first), "{first:?}");
    for method in ["stream.ack", "stream.stop"] {
        let e = bob
            .call(method, json!({"stream_id": id, "seq": 1}))
            .await
            .unwrap_err();
        assert_eq!(e.code, -32003, "{method}: {e:?}");
        assert!(e.message.contains("another connection"), "{e:?}");
    }
    let e = alice
        .call("stream.ack", json!({"stream_id": id, "seq": "one"}))
        .await
        .unwrap_err();
    assert_eq!(e.code, -32602);
    alice
        .call("stream.ack", json!({"stream_id": id, "seq": 1}))
        .await
        .unwrap();
    assert_eq!(
        alice
            .call("stream.stop", json!({"stream_id": id}))
            .await
            .unwrap(),
        json!({})
    );
    assert_eq!(
        alice
            .call("stream.stop", json!({"stream_id": id}))
            .await
            .unwrap(),
        json!({}),
        "stop is idempotent"
    );
    let lines = daemon
        .wait_recorded("the stop", |l| {
            l["stream_done"] == id.as_str() && l["stopped"] == true
        })
        .await;
    let stops = lines
        .iter()
        .filter(|l| l["method"] == "stream.stop" && l["params"]["stream_id"] == id.as_str())
        .count();
    assert_eq!(stops, 1, "the plugin is told once: {lines:?}");
    // A late ack of the stopped stream is harmless; a stranger is still refused; an id that
    // never existed is unknown.
    assert_eq!(
        alice
            .call("stream.ack", json!({"stream_id": id, "seq": 2}))
            .await
            .unwrap(),
        json!({})
    );
    let e = bob
        .call("stream.stop", json!({"stream_id": id}))
        .await
        .unwrap_err();
    assert_eq!(e.code, -32003);
    let e = alice
        .call("stream.ack", json!({"stream_id": "stream-0", "seq": 2}))
        .await
        .unwrap_err();
    assert_eq!(e.code, -32602, "{e:?}");
    let e = alice
        .call("stream.subscribe", json!({"method": "nobody.streams"}))
        .await
        .unwrap_err();
    assert_eq!(e.code, -32005);
    let e = alice
        .call(
            "stream.subscribe",
            json!({"method": "test.ticks", "mode": "eventually"}),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, -32602);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_death_of_the_producing_plugin_ends_the_stream_with_a_reason() {
    let daemon = Daemon::start("", "").await;
    let mut client = daemon.client().await;
    let id = client
        .call(
            "stream.subscribe",
            json!({"method": "test.ticks", "params": {"interval_ms": 10}}),
        )
        .await
        .unwrap()["stream_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let first = client.next_note().await;
    assert!(ticks(&id)(&first), "{first:?}");
    let died = client
        .call(
            "runner.invoke",
            json!({"plugin": "test", "method": "test.die", "params": {"provenance": "user"}}),
        )
        .await;
    assert!(died.is_err());
    let end = loop {
        let note = client.next_note().await;
        if note.0 == "stream.end" {
            break note.1;
        }
    };
    assert_eq!(end["stream_id"], id.as_str());
    let reason = end["reason"].as_str().unwrap();
    assert!(reason.contains("plugin test"), "{reason}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_disconnects_stops_its_streams() {
    let daemon = Daemon::start("", "").await;
    let mut client = daemon.client().await;
    let id = client
        .call(
            "stream.subscribe",
            json!({"method": "test.ticks", "params": {"interval_ms": 10}}),
        )
        .await
        .unwrap()["stream_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let first = client.next_note().await;
    assert!(ticks(&id)(&first), "{first:?}");
    client.conn.close();
    drop(client);
    daemon
        .wait_recorded("stream.stop for the gone client", |l| {
            l["method"] == "stream.stop" && l["params"]["stream_id"] == id.as_str()
        })
        .await;
}

/// Bytes that differ at every offset of a 64 KiB chunk.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

fn fnv1a(bytes: &[u8]) -> String {
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{hash:016x}")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_creates_fetches_in_ranges_stats_and_releases_its_own_handles() {
    let daemon = Daemon::start("", "").await;
    let client = daemon.client().await;
    // 300 000 bytes: about 2 s of 16 kHz f32 audio.
    let bytes = pattern(300_000);
    let made = client
        .via_plugin(
            "test",
            "handle.create",
            json!({"data_b64": utter_core::handles::b64_encode(&bytes)}),
        )
        .await;
    let handle = made["result"]["handle"]
        .as_str()
        .unwrap_or_else(|| panic!("{made}"))
        .to_owned();
    assert_eq!(made["result"]["size"], 300_000);
    // The plugin's handle is in its scope (and the scope of the client it was relayed to),
    // not another client's.
    let stranger = daemon.client().await;
    let e = stranger
        .call("handle.stat", json!({"handle": handle}))
        .await
        .unwrap_err();
    assert_eq!(e.code, -32602);
    // Whole: too large inline.
    let whole = client
        .via_plugin("test", "handle.fetch", json!({"handle": handle}))
        .await;
    assert_eq!(whole["error"]["code"], -32007, "{whole}");
    // Ranged: at most 64 KiB per reply, even when more is asked for.
    let mut got = Vec::new();
    loop {
        let part = client
            .via_plugin(
                "test",
                "handle.fetch",
                json!({"handle": handle, "offset": got.len(), "length": 100_000}),
            )
            .await;
        let part = &part["result"];
        assert_eq!(part["size"], 300_000, "{part}");
        assert_eq!(part["offset"], got.len());
        let data = utter_core::handles::b64_decode(part["data_b64"].as_str().unwrap()).unwrap();
        assert_eq!(part["length"], data.len());
        assert!(data.len() <= 65_536);
        if data.is_empty() {
            break;
        }
        got.extend(data);
    }
    assert_eq!(got, bytes, "the chunks reassemble the blob");
    let past = client
        .via_plugin(
            "test",
            "handle.fetch",
            json!({"handle": handle, "offset": 300_001}),
        )
        .await;
    assert_eq!(past["error"]["code"], -32602, "{past}");
    let stat = client
        .via_plugin("test", "handle.stat", json!({"handle": handle}))
        .await;
    assert_eq!(stat["result"]["size"], 300_000, "{stat}");
    assert_eq!(stat["result"]["refcount"], 1);
    let retained = client
        .via_plugin("test", "handle.retain", json!({"handle": handle}))
        .await;
    assert_eq!(retained["result"]["refcount"], 2, "{retained}");
    for left in [1, 0] {
        let released = client
            .via_plugin("test", "handle.release", json!({"handle": handle}))
            .await;
        assert_eq!(released["result"]["refcount"], left, "{released}");
    }
    // (Naming the handle again in a relayed call would pass it to the plugin once more, so
    // that it sees it after the release is the relay rule, not a leak.)
}

#[tokio::test(flavor = "multi_thread")]
async fn fd_pass_reaches_a_socket_plugin_and_fails_cleanly_over_stdio() {
    let record = std::env::temp_dir().join(format!("utter-sock-{}.jsonl", std::process::id()));
    let daemon = Daemon::start("", &plugin_entry("sock", "connect", &record)).await;
    let client = daemon.client().await;
    let bytes = pattern(200_000);
    let made = client
        .via_plugin(
            "sock",
            "handle.create",
            json!({"data_b64": utter_core::handles::b64_encode(&bytes)}),
        )
        .await;
    let handle = made["result"]["handle"]
        .as_str()
        .unwrap_or_else(|| panic!("{made}"))
        .to_owned();
    let passed = client
        .call(
            "runner.invoke",
            json!({"plugin": "sock", "method": "test.fdpass", "params": {"handle": handle, "provenance": "user"}}),
        )
        .await
        .unwrap();
    assert_eq!(passed["size"], 200_000, "{passed}");
    assert_eq!(passed["fnv1a"], fnv1a(&bytes), "{passed}");
    assert_eq!(passed["answer"]["kind"], "handle");
    // A handle outside the plugin's scope is refused.
    let unknown = format!(
        "handle://{}",
        utter_core::handles::digest_hex(b"nobody made this")
    );
    let refused = client
        .call(
            "runner.invoke",
            json!({"plugin": "sock", "method": "test.fdpass", "params": {"handle": unknown, "provenance": "user"}}),
        )
        .await
        .unwrap();
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    // Over stdio there is nothing to carry a descriptor.
    let stdio = client
        .via_plugin(
            "test",
            "fd.pass",
            json!({"kind": "memfd", "meta": {"data": "x"}}),
        )
        .await;
    assert_eq!(stdio["error"]["code"], -32005, "{stdio}");
    assert!(
        stdio["error"]["message"]
            .as_str()
            .unwrap()
            .contains("stdio"),
        "{stdio}"
    );
    // And the plugin still answers.
    let echo = client
        .call(
            "runner.invoke",
            json!({"plugin": "test", "method": "test.echo", "params": {"provenance": "user"}}),
        )
        .await
        .unwrap();
    assert!(echo["pid"].is_number());
    let _ = std::fs::remove_file(record);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stopping_runner_ends_every_stream_with_a_reason() {
    let daemon = Daemon::start("", "").await;
    let mut client = daemon.client().await;
    let id = client
        .call(
            "stream.subscribe",
            json!({"method": "test.ticks", "mode": "reliable", "params": {"interval_ms": 10}}),
        )
        .await
        .unwrap()["stream_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let first = client.next_note().await;
    assert!(ticks(&id)(&first), "{first:?}");
    let pid = nix::unistd::Pid::from_raw(daemon.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let end = loop {
        let note = client.next_note().await;
        if note.0 == "stream.end" {
            break note.1;
        }
    };
    assert_eq!(end["stream_id"], id.as_str());
    assert_eq!(end["reason"], "the runner is stopping");
}

/// A plugin written for the older runner (it keeps no credit of ours: told `reliable`, it
/// would wait for `stream.ack` requests that never come) is sent neither the mode nor acks;
/// the runner holds its frames and keeps the window toward the subscriber, so a reliable
/// subscription still gets every frame, in order, as it acknowledges.
#[tokio::test(flavor = "multi_thread")]
async fn an_older_plugins_reliable_stream_resumes_after_acks() {
    let script = common::repo_root().join("tests/old_stream_plugin.py");
    let record = Sandbox::new();
    let old_record = record.path("old.jsonl");
    let daemon = Daemon::start(
        "credit_window = 16",
        &format!(
            "[[plugin]]\nid = \"old\"\nkind = \"bundle\"\nentrypoint = {}\n",
            json!([
                "python3",
                script.display().to_string(),
                old_record.display().to_string()
            ])
        ),
    )
    .await;
    let mut client = daemon.client().await;
    let total = 100u64;
    let answer = client
        .call(
            "stream.subscribe",
            json!({"method": "old.ticks", "mode": "reliable", "params": {"count": total}}),
        )
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", daemon.log()));
    assert_eq!(answer["mode"], "reliable");
    let id = answer["stream_id"].as_str().unwrap().to_owned();
    let mut seqs = Vec::new();
    // The window toward the client holds: 16 frames, then nothing until an ack.
    while seqs.len() < 16 {
        let (method, params) = client.next_note().await;
        assert_eq!(method, "old.ticks", "{params}");
        seqs.push(params["seq"].as_u64().unwrap());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        client.incoming.try_recv().is_err(),
        "nothing beyond the window"
    );
    client
        .call("stream.ack", json!({"stream_id": id, "seq": 16}))
        .await
        .unwrap();
    loop {
        let (method, params) = client.next_note().await;
        if method == "stream.end" {
            break;
        }
        assert_eq!(method, "old.ticks", "{params}");
        let seq = params["seq"].as_u64().unwrap();
        seqs.push(seq);
        if seq % 8 == 0 {
            client
                .call("stream.ack", json!({"stream_id": id, "seq": seq}))
                .await
                .unwrap();
        }
    }
    assert_eq!(
        seqs,
        (1..=total).collect::<Vec<_>>(),
        "every frame, in order"
    );
    // The plugin was never told about credit: no mode, no window, no ack.
    let told = std::fs::read_to_string(&old_record).unwrap_or_default();
    let subscribe = told
        .lines()
        .find(|l| l.contains("\"stream.subscribe\""))
        .expect("it was asked to subscribe");
    assert!(
        !subscribe.contains("\"mode\"") && !subscribe.contains("\"window\""),
        "{subscribe}"
    );
    assert!(!told.contains("\"stream.ack\""), "{told}");
}
