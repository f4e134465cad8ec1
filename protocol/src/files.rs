//! Reading the files a person writes (configs, profiles, command lists) without being made
//! to wait or to fill memory: a named pipe or a device where a file was expected is refused
//! by its type, never opened for a blocking read, and a file is read up to a bound.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

/// The text of a regular file of at most `max_bytes` (a configuration, a lockfile), read
/// without ever blocking on a FIFO or reading a device without end: anything else (a
/// directory, a FIFO, `/dev/zero`, a socket) is refused before it is opened. Symbolic links
/// are followed.
///
/// # Errors
/// `InvalidInput` naming what the path is, or that it is over the limit; the I/O error of
/// opening or reading; `InvalidData` for text that is not UTF-8.
pub fn read_regular_file(path: &Path, max_bytes: u64) -> std::io::Result<String> {
    use std::io::Read as _;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let invalid = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, what);
    let meta = std::fs::metadata(path)?;
    let kind = meta.file_type();
    if !kind.is_file() {
        let what = if kind.is_dir() {
            "a directory"
        } else if kind.is_fifo() {
            "a FIFO (named pipe)"
        } else if kind.is_socket() {
            "a socket"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else {
            "not a regular file"
        };
        return Err(invalid(format!(
            "{} is {what}, not a regular file",
            path.display()
        )));
    }
    if meta.len() > max_bytes {
        return Err(invalid(format!(
            "{} is {} bytes, more than the {max_bytes} accepted",
            path.display(),
            meta.len()
        )));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)?;
    let mut bytes = Vec::new();
    file.take(max_bytes + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(invalid(format!(
            "{} grew past the {max_bytes} bytes accepted while it was read",
            path.display()
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{} is not UTF-8 text: {e}", path.display()),
        )
    })
}

/// Write `bytes` to `path` atomically: a temporary file in the same directory, synced, then
/// renamed over `path` (tempfile's `persist`), so a reader sees the old file or the new one,
/// never a part. `mode` sets the new file's permissions exactly (whatever the umask).
///
/// # Errors
/// The I/O error, with the path in its message.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    write_atomic_with(path, mode, |file| file.write_all(bytes))
}

/// [`write_atomic`] with the content written by `fill` (e.g. a copy from another file), then
/// the directory synced so the rename itself survives a crash.
///
/// # Errors
/// The I/O error of `fill`, of the temporary file or of the rename, with the path.
pub fn write_atomic_with(
    path: &Path,
    mode: u32,
    fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let dir = dir.unwrap_or(Path::new("."));
    let context =
        |e: std::io::Error| std::io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let mut file = tempfile::Builder::new()
        .prefix(".utter-")
        .permissions(std::fs::Permissions::from_mode(mode))
        .tempfile_in(dir)
        .map_err(context)?;
    fill(file.as_file_mut()).map_err(context)?;
    // The umask may have taken bits off at creation.
    file.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(context)?;
    file.as_file().sync_all().map_err(context)?;
    file.persist(path).map_err(|e| context(e.error))?;
    if let Ok(d) = std::fs::File::open(dir) {
        // Durability of the rename; a failure here loses nothing that matters.
        let _ = d.sync_all();
    }
    Ok(())
}

/// The first executable file called `name` in a directory of `PATH`, as `execvp` would
/// find it; `None` when there is none (or `PATH` is unset).
pub fn find_on_path(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}
