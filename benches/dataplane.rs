//! The data plane's throughput (a bench binary that prints figures; asserts nothing).
//!
//! * **Stream relay**: a real `utter daemon --no-dbus` with `utter-test-plugin` producing
//!   `test.ticks` (stdio); a blocking client on `runner.sock` subscribes and reads until
//!   `stream.end`. Figures: frames delivered per second, and frames the plugin produced per
//!   second (lossy drops the difference), for small frames (`{n, pad: ""}`, ~60 B on the wire)
//!   and 3.2 KB frames (100 ms of 16 kHz 16-bit audio), lossy and reliable (the client acks
//!   every half window). Target: ≥ 200 000 small frames/s lossy.
//! * **Handle ingest**: `HandleStore::create` of a 32 MiB file in-process (read, SHA-256 and
//!   atomic write) and `handle.create {data_b64}` of 8 MiB of it over the socket, beside
//!   `sha256sum` of the same file in the same run. Target: in-process ≥ 0.8× `sha256sum`.
//! * **fd.pass**: `fd.pass {kind: "memfd"}` round trips over `runner.sock`, beside a bare
//!   `sendmsg` of one byte and one descriptor over a socketpair answered by a thread.
//! * **memfd.ring**: frames/s of 3.2 KB frames through a 1024-slot ring, producer and
//!   consumer threads in this process (the ring does not care whether they are processes).
//!
//! Needs `cargo build --release --workspace --bins` first. The machine may be shared: run it
//! a few times and read the figures as orders of magnitude.

mod common;

use common::{Daemon, bin};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

impl Daemon {
    fn start() -> Daemon {
        let daemon = Daemon::spawn(&format!(
            "config_version = 1\n[runner]\nhandle_quota = 268435456\n[[plugin]]\nid = \"ticks\"\nkind = \"bundle\"\nentrypoint = [{:?}, \"--stream\", \"test.ticks\"]\n",
            bin("utter-test-plugin").display().to_string()
        ));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(mut client) = daemon.try_client() {
                let status = client.call("runner.status", json!({}));
                if status["result"]["plugins"][0]["status"] == "ok" {
                    break;
                }
            }
            assert!(Instant::now() < deadline, "utter daemon did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
        daemon
    }

    fn try_client(&self) -> std::io::Result<Client> {
        let mut client = Client::connect(&self.socket)?;
        let token = std::fs::read_to_string(&self.token_file)?;
        let reply = client.call("runner.auth", json!({"token": token.trim()}));
        if reply.get("result").is_none() {
            return Err(std::io::Error::other(reply.to_string()));
        }
        Ok(client)
    }
}

/// A blocking client that reads frames with `recvmsg` (keeping descriptors).
struct Client {
    stream: UnixStream,
    reader: BufReader<FdRead>,
    next_id: u64,
    line: String,
}

/// `Read` over `recvmsg`, keeping the descriptors that arrive.
struct FdRead {
    stream: UnixStream,
    fds: Vec<OwnedFd>,
}

impl std::io::Read for FdRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
        let mut space = nix::cmsg_space!([std::os::fd::RawFd; 2]);
        let mut iov = [std::io::IoSliceMut::new(buf)];
        let msg = recvmsg::<()>(
            self.stream.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        )
        .map_err(std::io::Error::from)?;
        for cmsg in msg.cmsgs().map_err(std::io::Error::from)? {
            if let ControlMessageOwned::ScmRights(fds) = cmsg {
                for fd in fds {
                    // SAFETY: a descriptor SCM_RIGHTS just gave us.
                    self.fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
                }
            }
        }
        Ok(msg.bytes)
    }
}

impl Client {
    fn connect(path: &Path) -> std::io::Result<Client> {
        let stream = UnixStream::connect(path)?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        Ok(Client {
            reader: BufReader::with_capacity(
                1 << 20,
                FdRead {
                    stream: stream.try_clone()?,
                    fds: Vec::new(),
                },
            ),
            stream,
            next_id: 0,
            line: String::new(),
        })
    }

    fn send(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let body =
            json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
                .to_string();
        let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        frame.extend_from_slice(body.as_bytes());
        self.stream.write_all(&frame).expect("write a request");
        self.next_id
    }

    fn notify(&mut self, method: &str, params: Value) {
        let body = json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string();
        let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        frame.extend_from_slice(body.as_bytes());
        self.stream.write_all(&frame).expect("write a notification");
    }

    /// Read one frame's body.
    fn frame(&mut self) -> Vec<u8> {
        let mut length = 0;
        loop {
            self.line.clear();
            let n = self
                .reader
                .read_line(&mut self.line)
                .expect("read a header");
            assert!(n > 0, "the runner closed the connection");
            let trimmed = self.line.trim_end();
            if trimmed.is_empty() {
                break;
            }
            if let Some(v) = trimmed.strip_prefix("Content-Length: ") {
                length = v.parse().expect("a length");
            }
        }
        let mut body = vec![0; length];
        std::io::Read::read_exact(&mut self.reader, &mut body).expect("read a body");
        body
    }

    /// Call and wait for the response with that id (notifications in between are skipped).
    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        loop {
            let v: Value = serde_json::from_slice(&self.frame()).expect("JSON");
            if v["id"] == id {
                return v;
            }
        }
    }
}

/// Subscribe to `count` frames of `size` padding bytes and read them all; (delivered,
/// produced, seconds).
fn relay(daemon: &Daemon, mode: &str, count: u64, size: u64) -> (u64, u64, f64) {
    let mut client = daemon.try_client().expect("a client");
    let window = 64;
    let started = Instant::now();
    let answer = client.call(
        "stream.subscribe",
        json!({"method": "test.ticks", "mode": mode, "params": {"count": count, "size": size, "end": true}}),
    );
    let id = answer["result"]["stream_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"))
        .to_owned();
    let mut delivered = 0u64;
    loop {
        let body = client.frame();
        // Only `stream.end` and our frames arrive here; look for the end without parsing.
        if body.starts_with(br#"{"jsonrpc":"2.0","method":"stream.end""#)
            || memchr_find(&body, b"\"method\":\"stream.end\"")
        {
            let end: Value = serde_json::from_slice(&body).expect("JSON");
            let produced = end["params"]["last_seq"].as_u64().unwrap_or(0);
            return (delivered, produced, started.elapsed().as_secs_f64());
        }
        if memchr_find(&body, b"\"id\":") && !memchr_find(&body, b"\"method\"") {
            continue; // an ack's response
        }
        delivered += 1;
        if mode == "reliable" && delivered.is_multiple_of(window / 2) {
            client.notify("stream.ack", json!({"stream_id": id, "seq": delivered}));
        }
    }
}

fn memchr_find(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn ingest(daemon: &Daemon) {
    let size = 32 << 20;
    let bytes: Vec<u8> = (0..size)
        .map(|i: usize| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let file = daemon.dir.path().join("blob.bin");
    std::fs::write(&file, &bytes).expect("write the blob");
    let mb = size as f64 / 1e6;

    let t = Instant::now();
    let out = Command::new("sha256sum").arg(&file).output();
    let sha256sum = t.elapsed().as_secs_f64();
    let sha256sum_ok = out.is_ok_and(|o| o.status.success());

    let root = daemon.dir.path().join("store");
    let store =
        utter_core::handles::HandleStore::open(root, Duration::from_secs(300), 1 << 30, 1 << 31)
            .expect("a store");
    let scope = utter_core::handles::Scope::Client(1);
    let t = Instant::now();
    let read = std::fs::read(&file).expect("read the blob");
    store.create(&scope, &read).expect("create");
    let in_process = t.elapsed().as_secs_f64();

    // 8 MiB over the socket: its base64 must fit the 16 MiB frame limit.
    // Where the time goes: the digest alone (no read, no write, no fsync).
    let t = Instant::now();
    let _ = utter_core::handles::digest_hex(&read);
    let digest_only = t.elapsed().as_secs_f64();

    let mut client = daemon.try_client().expect("a client");
    let socket_part = &bytes[..8 << 20];
    let encoded = utter_core::handles::b64_encode(socket_part);
    let t = Instant::now();
    let reply = client.call("handle.create", json!({"data_b64": encoded}));
    let over_socket = t.elapsed().as_secs_f64() * 4.0;
    assert!(reply.get("result").is_some(), "{reply}");

    println!("handle ingest, 32 MiB:");
    if sha256sum_ok {
        println!(
            "  sha256sum                      {:8.0} MB/s",
            mb / sha256sum
        );
    } else {
        println!("  sha256sum                      unavailable (install coreutils)");
    }
    println!(
        "  HandleStore::create (in-proc)  {:8.0} MB/s  ({:.2}x sha256sum)",
        mb / in_process,
        sha256sum / in_process
    );
    println!(
        "  of which SHA-256 alone          {:8.0} MB/s",
        mb / digest_only
    );
    println!(
        "  handle.create over the socket  {:8.0} MB/s  (8 MiB as base64 in JSON)",
        mb / over_socket
    );
}

fn fd_pass(daemon: &Daemon) {
    // One connection may make 1000 requests per 10 s (the client rate limit).
    let rounds = 900;
    let mut client = daemon.try_client().expect("a client");
    for _ in 0..50 {
        client.call("fd.pass", json!({"kind": "memfd", "meta": {"data": "x"}}));
        client.reader.get_mut().fds.clear();
    }
    let t = Instant::now();
    for _ in 0..rounds {
        let reply = client.call("fd.pass", json!({"kind": "memfd", "meta": {"data": "x"}}));
        assert!(reply.get("result").is_some(), "{reply}");
        assert_eq!(client.reader.get_mut().fds.len(), 1);
        client.reader.get_mut().fds.clear();
    }
    let relay = t.elapsed().as_secs_f64() / rounds as f64;

    // The floor: one byte with one descriptor, answered by one byte.
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let (a, b) = UnixStream::pair().expect("a socketpair");
    let echo = std::thread::spawn(move || {
        let mut reader = FdRead {
            stream: b.try_clone().expect("clone"),
            fds: Vec::new(),
        };
        let mut b = b;
        let mut byte = [0u8; 1];
        loop {
            match std::io::Read::read(&mut reader, &mut byte) {
                Ok(1) => {
                    reader.fds.clear();
                    b.write_all(&byte).expect("answer");
                }
                _ => return,
            }
        }
    });
    let file = std::fs::File::open("/dev/null").expect("/dev/null");
    let mut a_read = a.try_clone().expect("clone");
    let mut byte = [0u8; 1];
    let t = Instant::now();
    for _ in 0..rounds {
        sendmsg::<()>(
            a.as_raw_fd(),
            &[std::io::IoSlice::new(b"x")],
            &[ControlMessage::ScmRights(&[file.as_raw_fd()])],
            MsgFlags::empty(),
            None,
        )
        .expect("sendmsg");
        std::io::Read::read_exact(&mut a_read, &mut byte).expect("the answer");
    }
    let bare = t.elapsed().as_secs_f64() / rounds as f64;
    drop(a);
    drop(a_read);
    let _ = echo.join();
    println!("fd.pass round trip ({rounds} rounds):");
    println!("  fd.pass memfd over runner.sock {:8.1} µs", relay * 1e6);
    println!(
        "  bare sendmsg + 1 fd, answered  {:8.1} µs  (fd.pass is {:.1}x)",
        bare * 1e6,
        relay / bare
    );
}

fn ring() {
    let frames = 1_000_000u64;
    let (mut writer, fd) = utter_protocol::ring::create(1024, 3200).expect("a ring");
    let mut reader = utter_protocol::ring::RingReader::open(fd).expect("open the ring");
    let t = Instant::now();
    let producer = std::thread::spawn(move || {
        let mut frame = vec![0u8; 3200];
        for n in 0..frames {
            frame[..8].copy_from_slice(&n.to_le_bytes());
            while !writer.push(&frame).expect("fits") {
                std::hint::spin_loop();
            }
        }
        writer.close();
    });
    let mut buf = vec![0u8; 3200];
    let mut got = 0u64;
    loop {
        match reader.pop(&mut buf) {
            utter_protocol::ring::Pop::Frame(_) => {
                assert_eq!(u64::from_le_bytes(buf[..8].try_into().unwrap()), got);
                got += 1;
            }
            utter_protocol::ring::Pop::Empty => std::hint::spin_loop(),
            _ => break,
        }
    }
    producer.join().expect("producer");
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(got, frames);
    println!("memfd.ring, 3.2 KB frames, 1024 slots:");
    println!(
        "  {:8.0} frames/s  ({:.0} MB/s)",
        frames as f64 / secs,
        frames as f64 * 3200.0 / secs / 1e6
    );
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` runs this with no args: keep that
    // quick by doing nothing.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let daemon = Daemon::start();
    println!("stream relay (plugin → runner → runner.sock client):");
    for (mode, count, size, label) in [
        ("lossy", 400_000, 0, "small"),
        ("lossy", 100_000, 3200, "3.2 KB"),
        ("reliable", 200_000, 0, "small"),
        ("reliable", 50_000, 3200, "3.2 KB"),
    ] {
        let (delivered, produced, secs) = relay(&daemon, mode, count, size);
        println!(
            "  {mode:8} {label:6}: {:9.0} frames/s delivered, {:9.0} frames/s produced ({delivered}/{produced} frames in {secs:.2} s)",
            delivered as f64 / secs,
            produced as f64 / secs
        );
    }
    ingest(&daemon);
    fd_pass(&daemon);
    ring();
}
