//! Living under systemd: readiness notification (`sd_notify`) and whether stderr is the
//! journal.
//!
//! `utter daemon` runs as a `Type=notify` user unit (`systemd/utter.service`). The service
//! manager hands it `NOTIFY_SOCKET`; the daemon says `READY=1` once its doors are open,
//! `RELOADING=1` (with `MONOTONIC_USEC`, which `Type=notify-reload` on systemd ≥ 253 asks for)
//! while a SIGHUP reload runs and `READY=1` again after it, and `STOPPING=1` when it starts
//! to shut down. Each message carries a `STATUS=` line that `systemctl status` shows.
//!
//! Without `NOTIFY_SOCKET` every call does nothing. A notification that cannot be sent is a
//! warning in the log, never an error: the daemon works the same with or without a manager.
//! The socket must be a path (as systemd's user and system managers use); an abstract
//! `@name` socket is not supported and only logged.
//!
//! [`stderr_is_journal`] tells whether systemd connected stderr to the journal, so that
//! `utter daemon` can log to journald with structured fields instead of plain lines.

use sd_notify::NotifyState;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;

/// The environment variable holding the manager's notification socket.
const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// `READY=1` with `STATUS=ready`: the socket and D-Bus doors are open.
pub fn notify_ready() {
    send(&[NotifyState::Ready, NotifyState::Status("ready")]);
}

/// `RELOADING=1` with `MONOTONIC_USEC=<now>` (CLOCK_MONOTONIC, µs) and a status; follow it
/// with [`notify_ready`] when the reload is over, whether it succeeded or not.
pub fn notify_reloading() {
    let status = NotifyState::Status("reloading the configuration");
    match NotifyState::monotonic_usec_now() {
        Ok(now) => send(&[NotifyState::Reloading, now, status]),
        Err(e) => {
            tracing::debug!("cannot read CLOCK_MONOTONIC for MONOTONIC_USEC: {e}");
            send(&[NotifyState::Reloading, status]);
        }
    }
}

/// `STOPPING=1` with `STATUS=stopping`.
pub fn notify_stopping() {
    send(&[NotifyState::Stopping, NotifyState::Status("stopping")]);
}

/// `STATUS=<text>` alone: a one-line free-form state for `systemctl status`. Line breaks
/// in `text` become spaces (a newline would end the field).
pub fn notify_status(text: &str) {
    let one_line = one_line(text);
    send(&[NotifyState::Status(&one_line)]);
}

fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

/// Whether a manager asked for notifications at all.
fn notify_socket_set() -> bool {
    std::env::var_os(NOTIFY_SOCKET).is_some_and(|v| !v.is_empty())
}

fn send(states: &[NotifyState<'_>]) {
    if !notify_socket_set() {
        return;
    }
    if let Err(e) = sd_notify::notify(states) {
        let socket = std::env::var_os(NOTIFY_SOCKET).unwrap_or_default();
        let what: Vec<String> = states.iter().map(ToString::to_string).collect();
        tracing::warn!(
            socket = %socket.to_string_lossy(),
            "cannot notify the service manager ({}): {e}",
            what.join(" ")
        );
    }
}

/// Whether stderr is the stream systemd connected to the journal: `JOURNAL_STREAM` is set and
/// names the device and inode of stderr (the check `sd_journal_stream_fd(3)` recommends, so a
/// child that merely inherited the variable, with stderr redirected elsewhere, is not fooled).
pub fn stderr_is_journal() -> bool {
    let Some(value) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Some(value) = value.to_str() else {
        return false;
    };
    let Ok(stderr) = std::io::stderr().as_fd().try_clone_to_owned() else {
        return false;
    };
    stream_matches(value, &std::fs::File::from(stderr))
}

/// Whether `journal_stream` (`DEVICE:INODE`, both decimal) names `file`.
fn stream_matches(journal_stream: &str, file: &std::fs::File) -> bool {
    let Some((dev, ino)) = parse_journal_stream(journal_stream) else {
        return false;
    };
    file.metadata()
        .is_ok_and(|meta| meta.dev() == dev && meta.ino() == ino)
}

/// Parse `DEVICE:INODE`.
fn parse_journal_stream(value: &str) -> Option<(u64, u64)> {
    let (dev, ino) = value.trim().split_once(':')?;
    Some((dev.parse().ok()?, ino.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixDatagram;
    use std::process::Command;
    use std::time::Duration;

    /// Set in the child test process that sends the notifications.
    const CHILD_MARKER: &str = "UTTER_SYSTEMD_TEST_CHILD";

    /// Not a test of its own: run by [`notifications_reach_a_real_datagram_socket`] in a child
    /// process, whose NOTIFY_SOCKET points at the parent's socket (so no test changes its
    /// own process environment).
    #[test]
    #[ignore = "run as a child process by notifications_reach_a_real_datagram_socket"]
    fn child_sends_notifications() {
        if std::env::var_os(CHILD_MARKER).is_none() {
            return;
        }
        notify_ready();
        notify_reloading();
        notify_ready();
        notify_status("two\nlines");
        notify_stopping();
    }

    fn run_child(notify_socket: &std::ffi::OsStr) -> std::process::Output {
        let exe = std::env::current_exe().expect("test binary path");
        Command::new(exe)
            .args([
                "--exact",
                "systemd::tests::child_sends_notifications",
                "--ignored",
                "--test-threads=1",
            ])
            .env(CHILD_MARKER, "1")
            .env(NOTIFY_SOCKET, notify_socket)
            .output()
            .expect("the child test runs")
    }

    fn receive(socket: &UnixDatagram) -> String {
        let mut buf = vec![0u8; 4096];
        let n = socket.recv(&mut buf).expect("a notification arrives");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    fn monotonic_now_usec() -> i128 {
        match NotifyState::monotonic_usec_now().expect("CLOCK_MONOTONIC") {
            NotifyState::MonotonicUsec(us) => us,
            _ => unreachable!("monotonic_usec_now gives MonotonicUsec"),
        }
    }

    #[test]
    fn notifications_reach_a_real_datagram_socket() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("notify.sock");
        let socket = UnixDatagram::bind(&path).expect("bind the notify socket");
        socket
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("read timeout");
        let before = monotonic_now_usec();
        let out = run_child(path.as_os_str());
        let after = monotonic_now_usec();
        assert!(out.status.success(), "child failed: {out:?}");

        assert_eq!(receive(&socket), "READY=1\nSTATUS=ready\n");
        let reloading = receive(&socket);
        let lines: Vec<&str> = reloading.lines().collect();
        assert_eq!(lines.len(), 3, "{reloading:?}");
        assert_eq!(lines[0], "RELOADING=1");
        let usec: i128 = lines[1]
            .strip_prefix("MONOTONIC_USEC=")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("MONOTONIC_USEC line: {reloading:?}"));
        assert!(
            (before..=after).contains(&usec),
            "{usec} not in {before}..={after}"
        );
        assert_eq!(lines[2], "STATUS=reloading the configuration");
        assert_eq!(receive(&socket), "READY=1\nSTATUS=ready\n");
        assert_eq!(receive(&socket), "STATUS=two lines\n");
        assert_eq!(receive(&socket), "STOPPING=1\nSTATUS=stopping\n");
    }

    #[test]
    fn a_missing_or_unusable_socket_is_not_fatal() {
        // NOTIFY_SOCKET names nothing that listens: every call is a logged no-op.
        let dir = tempfile::tempdir().expect("temp dir");
        let out = run_child(dir.path().join("nobody-listens").as_os_str());
        assert!(out.status.success(), "child failed: {out:?}");
        let out = run_child(std::ffi::OsStr::new("@abstract-is-unsupported"));
        assert!(out.status.success(), "child failed: {out:?}");
        // And this process has no NOTIFY_SOCKET of its own under `cargo test`.
        if !notify_socket_set() {
            notify_ready();
            notify_reloading();
            notify_stopping();
        }
    }

    #[test]
    fn journal_stream_names_device_and_inode() {
        assert_eq!(parse_journal_stream("8:1234"), Some((8, 1234)));
        assert_eq!(parse_journal_stream(" 8:1234\n"), Some((8, 1234)));
        for bad in ["", "8", "8:", ":1", "a:b", "8:1:2", "-1:3"] {
            assert_eq!(parse_journal_stream(bad), None, "{bad:?}");
        }
        let file = tempfile::tempfile().expect("temp file");
        let meta = file.metadata().expect("metadata");
        assert!(stream_matches(
            &format!("{}:{}", meta.dev(), meta.ino()),
            &file
        ));
        assert!(!stream_matches(
            &format!("{}:{}", meta.dev(), meta.ino() + 1),
            &file
        ));
        assert!(!stream_matches("garbage", &file));
    }

    #[test]
    fn status_text_is_one_line() {
        assert_eq!(one_line("a\nb\r\nc"), "a b  c");
    }
}
