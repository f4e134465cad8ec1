//! Who writes to a unix stream socket: with `SO_PASSCRED` on the receiving end, the kernel
//! attaches the writing process's credentials to every write (`SCM_CREDENTIALS`), and a
//! single read never returns bytes of two writers with different credentials. A connection
//! admitted for *who* connected (its peer's executable, `SO_PEERCRED` at `connect`) can so
//! tell when another process writes on it: one that took the descriptor with
//! `pidfd_getfd`, or inherited it (see [`crate::Connection::spawn_unix_tracking_senders`]).
//!
//! A writer cannot claim another process's pid (the kernel refuses credentials other than
//! the sender's own without `CAP_SYS_ADMIN`). Bytes written before `SO_PASSCRED` was set
//! carry no credentials and are reported as pid 0.

use std::io::IoSliceMut;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use nix::sys::socket::{ControlMessageOwned, MsgFlags, UnixCredentials, recvmsg};
use tokio::io::{AsyncRead, Interest, ReadBuf};
use tokio::net::unix::OwnedReadHalf;

/// The most distinct writers remembered between two looks; past it only the fact that there
/// were more is kept.
const MAX_WRITERS: usize = 16;

/// One process that wrote to the connection: its pid (0 when the kernel attached none) and
/// its uid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Writer {
    /// The writing process's pid in the runner's PID namespace; 0 when unknown.
    pub pid: u32,
    /// Its user id.
    pub uid: u32,
}

#[derive(Debug, Default)]
struct Log {
    /// Distinct writers since the last [`Senders::take`].
    new: Vec<Writer>,
    /// More than [`MAX_WRITERS`] distinct writers came since then.
    overflowed: bool,
    /// The writer of the last bytes read.
    last: Option<Writer>,
}

/// The writers a tracked connection has seen; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Senders {
    log: Arc<Mutex<Log>>,
}

impl Senders {
    /// The distinct writers seen since the last call, and whether there were more than could
    /// be kept (then treat the connection as written by strangers).
    pub fn take(&self) -> (Vec<Writer>, bool) {
        let mut log = self
            .log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let overflowed = std::mem::take(&mut log.overflowed);
        (std::mem::take(&mut log.new), overflowed)
    }

    fn saw(&self, writer: Writer) {
        let mut log = self
            .log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if log.last == Some(writer) {
            return;
        }
        log.last = Some(writer);
        if log.new.contains(&writer) {
            return;
        }
        if log.new.len() >= MAX_WRITERS {
            log.overflowed = true;
        } else {
            log.new.push(writer);
        }
    }
}

/// The read half of a unix stream that records each read's writer in [`Senders`]. The
/// socket must have `SO_PASSCRED` set (see [`pass_credentials`]). Descriptors a peer sends
/// along are closed unread.
pub(crate) struct TrackedRead {
    half: OwnedReadHalf,
    senders: Senders,
}

impl TrackedRead {
    pub(crate) fn new(half: OwnedReadHalf, senders: Senders) -> TrackedRead {
        TrackedRead { half, senders }
    }
}

/// Ask the kernel to attach the writer's credentials to what `stream` receives.
///
/// # Errors
/// `setsockopt`'s error.
pub fn pass_credentials(stream: &tokio::net::UnixStream) -> std::io::Result<()> {
    nix::sys::socket::setsockopt(stream, nix::sys::socket::sockopt::PassCred, &true)
        .map_err(std::io::Error::from)
}

impl AsyncRead for TrackedRead {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            let stream: &tokio::net::UnixStream = this.half.as_ref();
            ready!(stream.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            let read = stream.try_io(Interest::READABLE, || {
                let mut iov = [IoSliceMut::new(unfilled)];
                let mut space = nix::cmsg_space!(UnixCredentials, [std::os::fd::RawFd; 8]);
                let msg = recvmsg::<()>(
                    stream.as_raw_fd(),
                    &mut iov,
                    Some(&mut space),
                    MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_DONTWAIT,
                )
                .map_err(std::io::Error::from)?;
                let mut writer = None;
                if let Ok(cmsgs) = msg.cmsgs() {
                    for cmsg in cmsgs {
                        match cmsg {
                            ControlMessageOwned::ScmCredentials(c) => {
                                writer = Some(Writer {
                                    pid: u32::try_from(c.pid()).unwrap_or(0),
                                    uid: c.uid(),
                                });
                            }
                            ControlMessageOwned::ScmRights(fds) => {
                                for fd in fds {
                                    // SAFETY: a fresh descriptor the kernel just gave us;
                                    // nobody else owns it. Closed at once: clients send none.
                                    drop(unsafe { OwnedFd::from_raw_fd(fd) });
                                }
                            }
                            _ => {}
                        }
                    }
                }
                Ok((msg.bytes, writer))
            });
            match read {
                Ok((n, writer)) => {
                    if n > 0 {
                        this.senders
                            .saw(writer.unwrap_or(Writer { pid: 0, uid: 0 }));
                    }
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn each_read_names_its_writer() {
        let (ours, mut theirs) = tokio::net::UnixStream::pair().unwrap();
        pass_credentials(&ours).unwrap();
        let (read, _write) = ours.into_split();
        let senders = Senders::default();
        let mut reader = TrackedRead::new(read, senders.clone());
        theirs.write_all(b"hello").await.unwrap();
        let mut buf = [0u8; 16];
        let n = reader.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"hello");
        let (seen, overflowed) = senders.take();
        assert!(!overflowed);
        assert_eq!(
            seen,
            vec![Writer {
                pid: std::process::id(),
                uid: nix::unistd::getuid().as_raw()
            }]
        );
        assert_eq!(senders.take().0, vec![], "taken");
        // A second writer on the same socket: a child process that inherited it.
        let std_theirs = theirs.into_std().unwrap();
        std_theirs.set_nonblocking(false).unwrap();
        let fd: OwnedFd = std_theirs.into();
        let raw = fd.as_raw_fd();
        let mut command = std::process::Command::new("sh");
        command.args(["-c", "printf again >&3"]);
        // SAFETY: dup2 is async-signal-safe; `fd` outlives the spawn.
        unsafe {
            use std::os::unix::process::CommandExt;
            command.pre_exec(move || {
                if nix::libc::dup2(raw, 3) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = command.spawn().unwrap();
        drop(fd);
        let child_pid = child.id();
        child.wait().unwrap();
        let n = reader.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"again");
        let (seen, _) = senders.take();
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert_eq!(seen[0].pid, child_pid);
    }
}
