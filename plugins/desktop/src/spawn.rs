//! Finding programs and starting them detached: no shell, stdin/stdout/stderr on
//! `/dev/null`, a process group of their own (so a signal to the plugin's group does not
//! reach them), and a background task that reaps them when they exit so no zombie is left.
//! Applications the person launches are started by [`launch`]: a session of their own and
//! not the plugin's children (a double fork), so the runner does not take them, or a
//! terminal in them, for the plugin's own processes (PROTOCOL.md §9.8).

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

/// The variables the runner sets for the plugin itself, which the person's applications
/// must not carry.
const PLUGIN_VARIABLES: &[&str] = &[
    "UTTER_PLUGIN_ID",
    "UTTER_PLUGIN_TRANSPORT",
    "UTTER_PLUGIN_SOCKET",
];

/// Start the person's application `what`: detached from this plugin (a double fork; its
/// parent is then the session's reaper, not the plugin), in a session of its own, without
/// the plugin's own variables. Returns its pid once it runs `what.program` (an exec that
/// fails is this call's error).
///
/// # Errors
/// The `spawn` error (program vanished, not executable, working directory missing...).
pub fn launch(what: &Detached<'_>) -> std::io::Result<u32> {
    use std::io::Read;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::process::CommandExt;
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two descriptors it creates; both are owned below.
    if unsafe { nix::libc::pipe2(fds.as_mut_ptr(), nix::libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fresh descriptors from pipe2, owned by nothing else.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let mut cmd = std::process::Command::new(what.program);
    if let Some((arg0, rest)) = what.argv.split_first() {
        cmd.arg0(OsStr::new(arg0)).args(rest);
    }
    for key in PLUGIN_VARIABLES {
        cmd.env_remove(key);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(dir) = what.cwd {
        cmd.current_dir(dir);
    }
    let pid_pipe = write_end.as_raw_fd();
    // SAFETY: between fork and exec the closure calls only fork, setsid, write and _exit,
    // which are async-signal-safe, and allocates nothing.
    unsafe {
        cmd.pre_exec(move || match nix::libc::fork() {
            -1 => Err(std::io::Error::last_os_error()),
            0 => {
                nix::libc::setsid();
                Ok(())
            }
            pid => {
                let bytes = pid.to_ne_bytes();
                nix::libc::write(pid_pipe, bytes.as_ptr().cast(), bytes.len());
                nix::libc::_exit(0)
            }
        });
    }
    // Returns once the grandchild ran the program (or failed to: its error).
    let mut middle = cmd.spawn()?;
    drop(write_end);
    let _ = middle.wait();
    let mut bytes = [0u8; 4];
    std::fs::File::from(read_end).read_exact(&mut bytes)?;
    u32::try_from(i32::from_ne_bytes(bytes))
        .map_err(|_| std::io::Error::other("the launched program's pid did not come back"))
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
    fn launched_programs_are_not_the_plugins_children_and_lose_its_variables() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("env");
        // SAFETY: a test of this process's own environment, set before any thread reads it.
        unsafe { std::env::set_var("UTTER_PLUGIN_ID", "desktop") };
        let argv = vec![
            "sh".to_owned(),
            "-c".to_owned(),
            format!(
                "(cat /proc/$$/stat; env) > {}.tmp; mv {0}.tmp {0}; sleep 1",
                out.display()
            ),
        ];
        let pid = launch(&Detached {
            program: Path::new("/bin/sh"),
            argv: &argv,
            cwd: None,
        })
        .unwrap();
        let text = (0..100)
            .find_map(|_| {
                std::thread::sleep(std::time::Duration::from_millis(20));
                std::fs::read_to_string(&out).ok()
            })
            .expect("the program ran");
        let stat = text.lines().next().unwrap();
        let rest = &stat[stat.rfind(')').unwrap() + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        assert_eq!(
            fields[1]
                .parse::<u32>()
                .ok()
                .map(|p| p == std::process::id()),
            Some(false),
            "{stat}"
        );
        // Its own session: the session id is its own pid.
        assert_eq!(fields[3].parse::<u32>().unwrap(), pid, "{stat}");
        assert!(!text.contains("UTTER_PLUGIN_ID"), "{text}");
        let missing = launch(&Detached {
            program: Path::new("/no/such/program"),
            argv: &["x".to_owned()],
            cwd: None,
        });
        assert!(missing.is_err());
    }

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
