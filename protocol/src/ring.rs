//! `memfd.ring`: a single-producer, single-consumer ring buffer of frames in a memfd, shared
//! between two processes (PROTOCOL.md §10.4).
//!
//! The producer and the consumer map the same memfd; frames move without a system call per
//! frame. Layout (all integers little-endian, native atomics):
//!
//! ```text
//! offset  size  field
//!      0     4  magic        b"UTRG"
//!      4     4  version      1
//!      8     4  capacity     number of slots, a power of two
//!     12     4  frame_size   largest payload of one slot, bytes
//!     16     4  closed       0, or 1 once the producer is done (end of stream)
//!     64     8  head         frames written so far (producer-owned)
//!    128     8  tail         frames read so far (consumer-owned)
//!    256     …  slots        capacity × (4-byte payload length + frame_size bytes)
//! ```
//!
//! `head` and `tail` are free-running counters on their own cache lines; slot `i` lives at
//! `i mod capacity`. The ring is empty when `head == tail` and full when
//! `head - tail == capacity`.
//!
//! Memory ordering: the producer writes a slot, then stores `head + 1` with *Release*; the
//! consumer loads `head` with *Acquire* before reading a slot, then stores `tail + 1` with
//! *Release*; the producer loads `tail` with *Acquire* before reusing a slot. `closed` is
//! stored with *Release* after the last `head` and loaded with *Acquire*. Each side only
//! writes its own counter, so no compare-and-swap is needed.

use memmap2::MmapMut;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// `b"UTRG"` as read little-endian.
pub const RING_MAGIC: u32 = u32::from_le_bytes(*b"UTRG");
/// The layout version described above.
pub const RING_VERSION: u32 = 1;
/// Bytes before the first slot.
pub const RING_HEADER_BYTES: usize = 256;
const OFF_MAGIC: usize = 0;
const OFF_VERSION: usize = 4;
const OFF_CAPACITY: usize = 8;
const OFF_FRAME: usize = 12;
const OFF_CLOSED: usize = 16;
const OFF_HEAD: usize = 64;
const OFF_TAIL: usize = 128;
/// Largest accepted ring, to refuse absurd headers: 1 GiB.
const MAX_RING_BYTES: u64 = 1 << 30;

/// Errors creating or opening a ring.
#[derive(Debug, thiserror::Error)]
pub enum RingError {
    /// The capacity is not a power of two, or the sizes are zero or too large.
    #[error("bad ring geometry: {0}")]
    Geometry(String),
    /// The memfd does not hold a ring of this version.
    #[error("not a memfd.ring: {0}")]
    BadHeader(String),
    /// An OS call failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// A frame larger than the ring's `frame_size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("frame of {len} bytes exceeds the ring's frame size of {max}")]
pub struct FrameTooLarge {
    /// The frame's length.
    pub len: usize,
    /// The ring's frame size.
    pub max: usize,
}

struct Mapping {
    map: MmapMut,
    capacity: u64,
    frame_size: usize,
}

impl Mapping {
    fn u32_at(&self, offset: usize) -> &AtomicU32 {
        // SAFETY: offsets are inside the header, 4-byte aligned (the map is page-aligned),
        // and the memory stays mapped as long as `self`.
        unsafe { &*(self.map.as_ptr().add(offset) as *const AtomicU32) }
    }

    fn u64_at(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: as above, 8-byte aligned.
        unsafe { &*(self.map.as_ptr().add(offset) as *const AtomicU64) }
    }

    fn slot_offset(&self, counter: u64) -> usize {
        let index = (counter & (self.capacity - 1)) as usize;
        RING_HEADER_BYTES + index * (4 + self.frame_size)
    }

    fn open(file: File) -> Result<Mapping, RingError> {
        let len = file.metadata()?.len();
        if len < RING_HEADER_BYTES as u64 || len > MAX_RING_BYTES {
            return Err(RingError::BadHeader(format!("size {len} bytes")));
        }
        // SAFETY: a shared mapping of a memfd; the peer may write it concurrently, which is
        // why every shared field is read through atomics and slot bytes are copied only
        // after the Acquire load that publishes them.
        let map = unsafe { MmapMut::map_mut(&file)? };
        let read = |off: usize| u32::from_le_bytes(map[off..off + 4].try_into().expect("4 bytes"));
        if read(OFF_MAGIC) != RING_MAGIC {
            return Err(RingError::BadHeader("wrong magic".into()));
        }
        if read(OFF_VERSION) != RING_VERSION {
            return Err(RingError::BadHeader(format!(
                "version {}",
                read(OFF_VERSION)
            )));
        }
        let capacity = u64::from(read(OFF_CAPACITY));
        let frame_size = read(OFF_FRAME) as usize;
        if !capacity.is_power_of_two() || frame_size == 0 {
            return Err(RingError::BadHeader(format!(
                "capacity {capacity}, frame size {frame_size}"
            )));
        }
        let needed = RING_HEADER_BYTES as u64 + capacity * (4 + frame_size as u64);
        if needed > len {
            return Err(RingError::BadHeader(format!(
                "{needed} bytes needed, memfd has {len}"
            )));
        }
        Ok(Mapping {
            map,
            capacity,
            frame_size,
        })
    }
}

/// The producing end.
pub struct RingWriter {
    m: Mapping,
    head: u64,
}

/// The consuming end.
pub struct RingReader {
    m: Mapping,
    tail: u64,
}

/// Create a ring in a new memfd (close-on-exec, sealed against growing and shrinking).
/// Returns the writer and the fd to hand to the consumer (e.g. with `fd.pass`).
///
/// # Errors
/// [`RingError::Geometry`] unless `capacity` is a power of two and the total size is at most
/// 1 GiB; [`RingError::Io`] when the memfd cannot be made.
pub fn create(capacity: u32, frame_size: u32) -> Result<(RingWriter, OwnedFd), RingError> {
    use nix::fcntl::{FcntlArg, SealFlag, fcntl};
    use nix::sys::memfd::{MFdFlags, memfd_create};
    if !capacity.is_power_of_two() || frame_size == 0 {
        return Err(RingError::Geometry(format!(
            "capacity {capacity} must be a power of two and frame size {frame_size} above 0"
        )));
    }
    let total = RING_HEADER_BYTES as u64 + u64::from(capacity) * (4 + u64::from(frame_size));
    if total > MAX_RING_BYTES {
        return Err(RingError::Geometry(format!(
            "{total} bytes is more than 1 GiB"
        )));
    }
    let fd = memfd_create(
        c"utter-ring",
        MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING,
    )
    .map_err(std::io::Error::from)?;
    let file = File::from(fd.try_clone()?);
    file.set_len(total)?;
    {
        // SAFETY: a fresh memfd nobody else has yet.
        let mut map = unsafe { MmapMut::map_mut(&file)? };
        map[OFF_MAGIC..OFF_MAGIC + 4].copy_from_slice(&RING_MAGIC.to_le_bytes());
        map[OFF_VERSION..OFF_VERSION + 4].copy_from_slice(&RING_VERSION.to_le_bytes());
        map[OFF_CAPACITY..OFF_CAPACITY + 4].copy_from_slice(&capacity.to_le_bytes());
        map[OFF_FRAME..OFF_FRAME + 4].copy_from_slice(&frame_size.to_le_bytes());
        map.flush()?;
    }
    fcntl(
        fd.as_fd(),
        FcntlArg::F_ADD_SEALS(
            SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_SEAL,
        ),
    )
    .map_err(std::io::Error::from)?;
    let m = Mapping::open(file)?;
    Ok((RingWriter { m, head: 0 }, fd))
}

impl RingWriter {
    /// Append one frame. Returns `Ok(false)` when the ring is full (try again later).
    ///
    /// # Errors
    /// [`FrameTooLarge`] when `frame` is longer than the ring's frame size.
    pub fn push(&mut self, frame: &[u8]) -> Result<bool, FrameTooLarge> {
        if frame.len() > self.m.frame_size {
            return Err(FrameTooLarge {
                len: frame.len(),
                max: self.m.frame_size,
            });
        }
        let tail = self.m.u64_at(OFF_TAIL).load(Ordering::Acquire);
        if self.head.wrapping_sub(tail) >= self.m.capacity {
            return Ok(false);
        }
        let off = self.m.slot_offset(self.head);
        let map = &mut self.m.map;
        map[off..off + 4].copy_from_slice(&(frame.len() as u32).to_le_bytes());
        map[off + 4..off + 4 + frame.len()].copy_from_slice(frame);
        self.head += 1;
        self.m.u64_at(OFF_HEAD).store(self.head, Ordering::Release);
        Ok(true)
    }

    /// Mark the end of the stream; the reader sees it after the last frame.
    pub fn close(&self) {
        self.m.u32_at(OFF_CLOSED).store(1, Ordering::Release);
    }

    /// The largest frame, bytes.
    pub fn frame_size(&self) -> usize {
        self.m.frame_size
    }
}

impl Drop for RingWriter {
    fn drop(&mut self) {
        self.close();
    }
}

/// What [`RingReader::pop`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pop {
    /// A frame of this many bytes was copied into the buffer.
    Frame(usize),
    /// Nothing yet.
    Empty,
    /// The producer closed the ring and every frame has been read.
    Closed,
}

impl RingReader {
    /// Map a ring received as an fd, checking its header.
    ///
    /// # Errors
    /// [`RingError::BadHeader`] when the memfd is not a ring of this version or is too small
    /// for its declared geometry.
    pub fn open(fd: OwnedFd) -> Result<RingReader, RingError> {
        let m = Mapping::open(File::from(fd))?;
        let tail = m.u64_at(OFF_TAIL).load(Ordering::Acquire);
        Ok(RingReader { m, tail })
    }

    /// Take the next frame into `buf` (which must hold `frame_size` bytes).
    pub fn pop(&mut self, buf: &mut [u8]) -> Pop {
        let head = self.m.u64_at(OFF_HEAD).load(Ordering::Acquire);
        if head == self.tail {
            if self.m.u32_at(OFF_CLOSED).load(Ordering::Acquire) == 1
                && self.m.u64_at(OFF_HEAD).load(Ordering::Acquire) == self.tail
            {
                return Pop::Closed;
            }
            return Pop::Empty;
        }
        let off = self.m.slot_offset(self.tail);
        let map = &self.m.map;
        let declared = u32::from_le_bytes(map[off..off + 4].try_into().expect("4 bytes")) as usize;
        // A misbehaving producer cannot make us read past the slot.
        let len = declared.min(self.m.frame_size).min(buf.len());
        buf[..len].copy_from_slice(&map[off + 4..off + 4 + len]);
        self.tail += 1;
        self.m.u64_at(OFF_TAIL).store(self.tail, Ordering::Release);
        Pop::Frame(len)
    }

    /// The largest frame, bytes.
    pub fn frame_size(&self) -> usize {
        self.m.frame_size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_wrap_around_in_order() {
        let (mut w, fd) = create(4, 16).unwrap();
        let mut r = RingReader::open(fd).unwrap();
        let mut buf = [0u8; 16];
        for round in 0u32..10 {
            for i in 0..4u32 {
                assert!(w.push(&(round * 4 + i).to_le_bytes()).unwrap());
            }
            assert!(!w.push(b"x").unwrap(), "full after capacity frames");
            for i in 0..4u32 {
                assert_eq!(r.pop(&mut buf), Pop::Frame(4));
                assert_eq!(
                    u32::from_le_bytes(buf[..4].try_into().unwrap()),
                    round * 4 + i
                );
            }
            assert_eq!(r.pop(&mut buf), Pop::Empty);
        }
        w.close();
        assert_eq!(r.pop(&mut buf), Pop::Closed);
    }

    #[test]
    fn bad_geometry_and_oversized_frames_are_refused() {
        assert!(create(3, 16).is_err());
        assert!(create(4, 0).is_err());
        let (mut w, _fd) = create(2, 4).unwrap();
        assert_eq!(w.push(b"12345"), Err(FrameTooLarge { len: 5, max: 4 }));
    }

    #[test]
    fn seals_hold_and_foreign_memfds_are_refused() {
        let (_w, fd) = create(2, 8).unwrap();
        let file = File::from(fd.try_clone().unwrap());
        assert!(file.set_len(1 << 20).is_err(), "grow is sealed");
        assert!(file.set_len(8).is_err(), "shrink is sealed");
        let plain = nix::sys::memfd::memfd_create(c"plain", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)
            .unwrap();
        File::from(plain.try_clone().unwrap())
            .set_len(4096)
            .unwrap();
        assert!(matches!(
            RingReader::open(plain),
            Err(RingError::BadHeader(_))
        ));
    }
}
