//! What a killed runner's plugins left behind, found and stopped by the next runner.
//!
//! Each plugin runs in a process group of its own (its pid is the group id) and dies with
//! the runner (`PR_SET_PDEATHSIG`, see the supervisor). What the plugin itself started
//! stays in its group and is stopped when the plugin is drained; but a runner killed with
//! SIGKILL drains nothing, and those processes would run on under init. So while a plugin
//! runs, the runner keeps a marker file for its group,
//! `$XDG_RUNTIME_DIR/utter/groups/<runner pid>-<group id>` holding the plugin's id, and
//! removes it when the group was stopped. A runner that starts ([`sweep`]) looks at the
//! markers of runners that are no longer alive and stops (SIGKILL) every process of this
//! user that is still in such a group *and* carries that plugin's `UTTER_PLUGIN_ID` in its
//! environment (the runner sets it for each plugin; the two together keep an unrelated
//! group that reused the id safe), then removes the marker.
//!
//! Under systemd the service's cgroup is stopped as a whole when the runner dies, which
//! covers the same ground; the markers make it hold for `utter daemon` in a terminal too.

use std::path::{Path, PathBuf};

/// The marker directory, `$XDG_RUNTIME_DIR/utter/groups`.
pub fn dir() -> PathBuf {
    crate::paths::BaseDirs::from_env().plugin_groups()
}

fn marker(dir: &Path, group: u32) -> PathBuf {
    dir.join(format!("{}-{group}", std::process::id()))
}

/// The plugin processes of this runner that run now: group id (the plugin's pid) → plugin id.
static LIVE: std::sync::Mutex<std::collections::BTreeMap<u32, String>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Record that `group` holds plugin `plugin` of this runner. Failures are logged: the
/// marker only helps a later runner clean up.
pub fn record(group: u32, plugin: &str) {
    LIVE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(group, plugin.to_owned());
    let dir = dir();
    let written = crate::paths::ensure_private_dir(&dir)
        .map_err(std::io::Error::other)
        .and_then(|()| std::fs::write(marker(&dir, group), plugin));
    if let Err(e) = written {
        tracing::debug!(dir = %dir.display(), error = %e, "cannot record a plugin's process group");
    }
}

/// The group was stopped: forget it.
pub fn forget(group: u32) {
    LIVE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .remove(&group);
    let _ = std::fs::remove_file(marker(&dir(), group));
}

/// The plugin of this runner whose process `pid` is, or descends from: `pid`'s chain of
/// parents (`/proc/<pid>/stat`) reaches a plugin's process. A door asks this of a caller
/// before it lets it command, confirm or invoke (PROTOCOL.md §9.8): a plugin must not answer
/// its own question or plan for the person. What a plugin starts detached from itself
/// (a double fork, its parent then being the user's service manager) is not found this
/// way unless the plugin runs under bubblewrap, whose PID namespace keeps every process it
/// starts below the plugin's own; the desktop plugin starts the applications it launches
/// so, on purpose, since they are the person's, not the plugin's.
pub fn plugin_of_process(pid: u32) -> Option<String> {
    match owner_of_process(pid) {
        ProcessOwner::Plugin(plugin) => Some(plugin),
        ProcessOwner::Other | ProcessOwner::Gone => None,
    }
}

/// Whose a door's caller is, by its process ([`owner_of_process`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessOwner {
    /// The plugin with this id, or a process it started.
    Plugin(String),
    /// No plugin's.
    Other,
    /// The process (or one above it) is gone while it was looked at: the one that opened
    /// the caller's connection exited, so whoever holds the connection now cannot be told
    /// (a plugin's child that connects, hands its connection to a grandchild and exits).
    Gone,
}

/// [`plugin_of_process`], telling a process that is gone apart from one that is no
/// plugin's.
pub fn owner_of_process(pid: u32) -> ProcessOwner {
    let live = LIVE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    if live.is_empty() {
        return ProcessOwner::Other;
    }
    let own = std::process::id();
    let mut current = pid;
    // A bound on the walk: process trees are never this deep, and a racing reuse of pids
    // cannot make it loop.
    for _ in 0..256 {
        if let Some(plugin) = live.get(&current) {
            return ProcessOwner::Plugin(plugin.clone());
        }
        if current <= 1 || current == own {
            return ProcessOwner::Other;
        }
        let parent = i32::try_from(current)
            .ok()
            .and_then(parent_of)
            .and_then(|p| u32::try_from(p).ok());
        match parent {
            Some(parent) => current = parent,
            None => return ProcessOwner::Gone,
        }
    }
    ProcessOwner::Other
}

/// The parent process id of `pid`, from `/proc/<pid>/stat`.
pub fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may itself hold spaces and parentheses: the
    // fields after the last ')' are "state ppid ...".
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Stop what plugins of runners that are gone left in their groups (see the module docs);
/// returns how many processes were sent SIGKILL.
pub fn sweep() -> usize {
    sweep_in(&dir())
}

fn sweep_in(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let own = std::process::id();
    let uid = nix::unistd::getuid().as_raw();
    let mut killed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some((runner, group)) = name.to_str().and_then(|n| {
            let (r, g) = n.split_once('-')?;
            Some((r.parse::<u32>().ok()?, g.parse::<u32>().ok()?))
        }) else {
            continue;
        };
        let alive = runner == own
            || !matches!(
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(runner as i32), None),
                Err(nix::errno::Errno::ESRCH)
            );
        if alive || group <= 1 {
            continue;
        }
        let plugin = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let stopped = members(group, uid, plugin.trim())
            .into_iter()
            .filter(|pid| {
                nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(*pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                )
                .is_ok()
            })
            .count();
        killed += stopped;
        if stopped > 0 {
            tracing::info!(
                plugin = plugin.trim(),
                group,
                runner,
                stopped,
                "stopped what a plugin of a runner that was killed left running"
            );
        }
        let _ = std::fs::remove_file(entry.path());
    }
    killed
}

/// Processes of `uid` in process group `group` whose environment has
/// `UTTER_PLUGIN_ID=<plugin>`.
fn members(group: u32, uid: u32, plugin: &str) -> Vec<u32> {
    use std::os::unix::fs::MetadataExt;
    let Ok(proc) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let wanted = format!("UTTER_PLUGIN_ID={plugin}");
    proc.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let base = PathBuf::from(format!("/proc/{pid}"));
            let ours = std::fs::metadata(&base).is_ok_and(|m| m.uid() == uid);
            ours && process_group(&base) == Some(group)
                && std::fs::read(base.join("environ"))
                    .is_ok_and(|env| env.split(|b| *b == 0).any(|var| var == wanted.as_bytes()))
        })
        .collect()
}

/// Field 5 of `/proc/PID/stat` (`pgrp`), read after the command name's closing parenthesis
/// (the name itself may hold spaces and parentheses).
fn process_group(base: &Path) -> Option<u32> {
    let stat = std::fs::read_to_string(base.join("stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(2)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugin_and_what_it_started_are_known_by_their_pids() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .spawn()
            .expect("sh");
        let pid = child.id();
        let grandchild = (0..100).find_map(|_| {
            std::thread::sleep(std::time::Duration::from_millis(20));
            let text = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
            text.split_whitespace().next()?.parse::<u32>().ok()
        });
        assert_eq!(plugin_of_process(pid), None, "not recorded yet");
        record(pid, "hostile");
        assert_eq!(plugin_of_process(pid).as_deref(), Some("hostile"));
        let grandchild = grandchild.expect("sh started sleep");
        assert_eq!(plugin_of_process(grandchild).as_deref(), Some("hostile"));
        // The runner itself and its other children are no plugin's.
        assert_eq!(plugin_of_process(std::process::id()), None);
        let _ = child.kill();
        let _ = child.wait();
        // The plugin's process is gone and reaped: what it started is still told apart from
        // a process that no plugin started, and a pid that is gone is not "no plugin's".
        assert_eq!(owner_of_process(999_999_999), ProcessOwner::Gone);
        forget(pid);
        assert_eq!(plugin_of_process(grandchild), None);
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(grandchild as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }

    #[test]
    fn the_group_of_this_process_is_read_from_proc() {
        let own = PathBuf::from(format!("/proc/{}", std::process::id()));
        let expected = nix::unistd::getpgrp().as_raw() as u32;
        assert_eq!(process_group(&own), Some(expected));
    }

    #[test]
    fn markers_of_live_runners_and_odd_names_are_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        // This runner is alive; a name that is not <pid>-<group> is not ours to judge.
        std::fs::write(
            dir.path().join(format!("{}-999999", std::process::id())),
            "x",
        )
        .unwrap();
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        assert_eq!(sweep_in(dir.path()), 0);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }
}
