//! Files the runner keeps: [`BaseDirs`] (from `utter-ipc`, the one reader of the XDG
//! variables), private directories and atomic writes.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::Path;

pub use utter_ipc::paths::{APP, BaseDirs};

/// Create `dir` (and its parents) as a directory only this user can enter (mode 0700), or
/// check that an existing one is a real directory owned by this user and make it 0700.
///
/// # Errors
/// A sentence naming the directory and what is wrong with it (not a directory, a symlink,
/// owned by another user, or the OS error).
pub fn ensure_private_dir(dir: &Path) -> Result<(), String> {
    if let Some(parent) = dir.parent() {
        // Missing parents are ours too ($XDG_RUNTIME_DIR/utter above .../groups): private
        // as well. Existing ones are left as they are.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
    }
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| format!("cannot stat {}: {e}", dir.display()))?;
    if !meta.is_dir() {
        return Err(format!(
            "{} exists but is not a directory (a symlink or a file); remove it",
            dir.display()
        ));
    }
    let uid = nix::unistd::getuid().as_raw();
    if meta.uid() != uid {
        return Err(format!(
            "{} belongs to uid {}, not to this user (uid {uid}); remove it or choose another path",
            dir.display(),
            meta.uid()
        ));
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("cannot make {} private (0700): {e}", dir.display()))?;
    }
    Ok(())
}

/// Atomic writes live with the other file helpers every crate shares (the plugins too):
/// [`utter_protocol::files::write_atomic`].
pub use utter_protocol::files::{find_on_path, write_atomic, write_atomic_with};

/// Read a regular file of at most `max_bytes` as UTF-8 (see
/// [`utter_protocol::files::read_regular_file`]: a FIFO, device or directory is refused
/// without being opened for a blocking read).
pub use utter_protocol::files::read_regular_file;

/// `program` as `execvp` would run it: a path as given, a bare name as found on `PATH`
/// (as given when it is not there).
pub fn executable_path(program: &Path) -> std::path::PathBuf {
    if program.components().count() > 1 {
        return program.to_path_buf();
    }
    find_on_path(&program.to_string_lossy()).unwrap_or_else(|| program.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    #[test]
    fn private_dir_is_made_and_tightened() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        ensure_private_dir(&dir).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        ensure_private_dir(&dir).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        let file = tmp.path().join("f");
        std::fs::write(&file, "x").unwrap();
        assert!(
            ensure_private_dir(&file)
                .unwrap_err()
                .contains("not a directory")
        );
    }

    #[test]
    fn atomic_write_replaces_whole_files() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("x.json");
        write_atomic(&path, b"one", 0o600).unwrap();
        write_atomic(&path, b"two", 0o644).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o644);
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
    }
}
