//! Finding programs and starting them detached: no shell, stdin/stdout/stderr on
//! `/dev/null`, a process group of their own (so a signal to the plugin's group does not
//! reach them), and a background task that reaps them when they exit so no zombie is left.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use tokio::process::{Child, Command};

/// Used when `$PATH` is unset, like most shells do.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Whether `path` is a regular file with an execute bit set.
pub fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Resolve a program the way `execvp` would: a name with a `/` is taken as a path (relative
/// ones against `cwd`), anything else is looked up in `$PATH`. `None` when nothing
/// executable is found.
pub fn find_program(program: &str, cwd: Option<&Path>) -> Option<PathBuf> {
    if program.contains('/') {
        let path = match cwd {
            Some(dir) if !Path::new(program).is_absolute() => dir.join(program),
            _ => PathBuf::from(program),
        };
        return is_executable(&path).then_some(path);
    }
    if program.is_empty() {
        return None;
    }
    let search = std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into());
    std::env::split_paths(&search)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

/// A program to start.
#[derive(Debug)]
pub struct Detached<'a> {
    /// The resolved executable.
    pub program: &'a Path,
    /// The full argument vector; `argv[0]` is passed as the process name.
    pub argv: &'a [String],
    /// Working directory, if not the plugin's own.
    pub cwd: Option<&'a Path>,
}

/// Start the program detached and return the child. The caller either waits for it (see
/// [`reap_in_background`]) or hands it straight to [`reap_in_background`].
///
/// # Errors
///
/// The `spawn` error (program vanished, not executable, working directory missing...).
pub fn start(what: &Detached<'_>) -> std::io::Result<Child> {
    let mut cmd = Command::new(what.program);
    if let Some((arg0, rest)) = what.argv.split_first() {
        cmd.arg0(OsStr::new(arg0)).args(rest);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .kill_on_drop(false);
    if let Some(dir) = what.cwd {
        cmd.current_dir(dir);
    }
    cmd.spawn()
}

/// Wait for `child` in a background task so that it is reaped when it exits.
pub fn reap_in_background(mut child: Child, label: String) {
    tokio::spawn(async move {
        match child.wait().await {
            Ok(status) => tracing::debug!(%label, %status, "detached child exited"),
            Err(e) => tracing::warn!(%label, error = %e, "could not wait for detached child"),
        }
    });
}

/// A short description of an exit status: `status 3` or `signal 9`.
pub fn describe_status(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("status {code}"),
        (None, Some(signal)) => format!("signal {signal}"),
        (None, None) => "an unknown status".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_found_in_path_or_by_path() {
        assert_eq!(
            find_program("/bin/sh", None),
            Some(PathBuf::from("/bin/sh"))
        );
        assert!(find_program("sh", None).is_some());
        assert_eq!(find_program("no-such-program-utter", None), None);
        assert_eq!(find_program("/no/such/program", None), None);
        assert_eq!(find_program("", None), None);
        // A directory is not a program.
        assert_eq!(find_program("/bin", None), None);
        assert_eq!(
            find_program("./sh", Some(Path::new("/bin"))),
            Some(PathBuf::from("/bin/./sh"))
        );
    }
}
