//! `memfd.ring` across two real processes: this test binary re-runs itself as the consumer,
//! handing it the ring's fd; 100 000 frames pass through a 64-slot ring (wrapping about 1 560
//! times) and the consumer checks the order and a checksum of every frame.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::time::{Duration, Instant};
use utter_protocol::ring::{self, Pop, RingReader};

const FRAMES: u64 = 100_000;
const FRAME_SIZE: usize = 64;
const CHILD_ENV: &str = "UTTER_RING_CONSUMER_FD";

/// FNV-1a over the bytes: a cheap checksum the consumer recomputes.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
    })
}

/// Frame `seq`: 8 bytes of seq, a payload whose length and bytes vary with seq, 8 bytes of
/// checksum over everything before it.
fn frame(seq: u64, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&seq.to_le_bytes());
    let len = (seq % 41) as usize;
    out.extend((0..len).map(|i| (seq.wrapping_mul(31).wrapping_add(i as u64) & 0xff) as u8));
    let sum = fnv(out);
    out.extend_from_slice(&sum.to_le_bytes());
}

/// The consumer half; does nothing unless started by the producer test.
#[test]
fn ring_consumer_child() {
    let Ok(fd) = std::env::var(CHILD_ENV) else {
        return;
    };
    let fd: i32 = fd.parse().expect("fd number");
    // SAFETY: the parent passed this fd to us and nothing else owns it.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut reader = RingReader::open(owned).expect("a valid ring");
    let mut buf = vec![0u8; reader.frame_size()];
    let mut expected = 0u64;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match reader.pop(&mut buf) {
            Pop::Frame(len) => {
                let body = &buf[..len];
                let seq = u64::from_le_bytes(body[..8].try_into().unwrap());
                assert_eq!(seq, expected, "frames out of order");
                let (data, sum) = body.split_at(len - 8);
                assert_eq!(
                    fnv(data),
                    u64::from_le_bytes(sum.try_into().unwrap()),
                    "frame {seq} corrupt"
                );
                expected += 1;
            }
            Pop::Empty => {
                assert!(Instant::now() < deadline, "producer stalled at {expected}");
                std::thread::yield_now();
            }
            Pop::Closed => break,
        }
    }
    println!("RING-CONSUMED {expected}");
}

#[test]
fn a_producer_process_and_a_consumer_process_exchange_every_frame() {
    let (mut writer, fd) = ring::create(64, FRAME_SIZE as u32).expect("ring");
    // A duplicate without close-on-exec, for the child to inherit.
    let raw = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_DUPFD(10)).expect("dup");
    // SAFETY: F_DUPFD returned a new descriptor that only we own.
    let inheritable = unsafe { OwnedFd::from_raw_fd(raw) };
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "ring_consumer_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, inheritable.as_raw_fd().to_string())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("consumer starts");
    drop(inheritable);
    drop(fd);
    let mut buf = Vec::with_capacity(FRAME_SIZE);
    let deadline = Instant::now() + Duration::from_secs(120);
    for seq in 0..FRAMES {
        frame(seq, &mut buf);
        while !writer.push(&buf).expect("frame fits") {
            assert!(Instant::now() < deadline, "consumer stalled at {seq}");
            std::thread::yield_now();
        }
    }
    writer.close();
    let out = child.wait_with_output().expect("consumer finishes");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains(&format!("RING-CONSUMED {FRAMES}")),
        "{stdout}"
    );
}
