//! Receiving descriptors on a plugin's socket (PROTOCOL.md §10.2): a reader that reads with
//! `recvmsg` and keeps every `SCM_RIGHTS` descriptor that arrives.
//!
//! The runner sends the descriptor of an `fd.pass` response with the first byte of that
//! response frame, so once the response has been read its descriptor is in the [`FdInbox`]:
//!
//! ```no_run
//! # async fn demo(conn: utter_protocol::Connection, inbox: utter_protocol::fd::FdInbox) {
//! use utter_protocol::serde_json::json;
//! let answer = conn
//!     .request("fd.pass", json!({"kind": "handle", "meta": {"handle": "handle://…"}}), None)
//!     .await
//!     .unwrap();
//! let file = std::fs::File::from(inbox.take().expect("the descriptor came with the answer"));
//! # }
//! ```
//!
//! [`crate::plugin::run`] wires this up on socket transports; its inbox is
//! [`crate::plugin::received_fds`]. Over stdio no descriptor can arrive.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};

/// The descriptors received so far, oldest first. Cheap to clone.
#[derive(Clone, Default, Debug)]
pub struct FdInbox(Arc<Mutex<VecDeque<OwnedFd>>>);

impl FdInbox {
    /// Take the oldest descriptor received.
    pub fn take(&self) -> Option<OwnedFd> {
        self.0.lock().expect("fd inbox").pop_front()
    }

    /// How many descriptors wait to be taken.
    pub fn len(&self) -> usize {
        self.0.lock().expect("fd inbox").len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn push(&self, fd: OwnedFd) {
        self.0.lock().expect("fd inbox").push_back(fd);
    }
}

/// The read half of a unix socket, read with `recvmsg`; descriptors go to its [`FdInbox`]
/// (received close-on-exec).
#[derive(Debug)]
pub struct FdReader {
    stream: tokio::net::unix::OwnedReadHalf,
    inbox: FdInbox,
}

/// Split `stream` into a descriptor-keeping reader, the write half, and the inbox.
pub fn split(
    stream: tokio::net::UnixStream,
) -> (FdReader, tokio::net::unix::OwnedWriteHalf, FdInbox) {
    split_into(stream, FdInbox::default())
}

/// Like [`split`], delivering descriptors to `inbox`.
pub fn split_into(
    stream: tokio::net::UnixStream,
    inbox: FdInbox,
) -> (FdReader, tokio::net::unix::OwnedWriteHalf, FdInbox) {
    let (read, write) = stream.into_split();
    (
        FdReader {
            stream: read,
            inbox: inbox.clone(),
        },
        write,
        inbox,
    )
}

impl AsyncRead for FdReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
        let this = self.get_mut();
        let stream: &tokio::net::UnixStream = this.stream.as_ref();
        loop {
            std::task::ready!(stream.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            let got = stream.try_io(tokio::io::Interest::READABLE, || {
                let mut space = nix::cmsg_space!([RawFd; 8]);
                let mut iov = [std::io::IoSliceMut::new(unfilled)];
                let msg = recvmsg::<()>(
                    stream.as_raw_fd(),
                    &mut iov,
                    Some(&mut space),
                    MsgFlags::MSG_CMSG_CLOEXEC,
                )
                .map_err(std::io::Error::from)?;
                let mut fds = Vec::new();
                if let Ok(cmsgs) = msg.cmsgs() {
                    for cmsg in cmsgs {
                        if let ControlMessageOwned::ScmRights(received) = cmsg {
                            fds.extend(received);
                        }
                    }
                }
                Ok((msg.bytes, fds))
            });
            match got {
                Ok((n, fds)) => {
                    for fd in fds {
                        // SAFETY: a descriptor the kernel just installed for us.
                        this.inbox.push(unsafe { OwnedFd::from_raw_fd(fd) });
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
