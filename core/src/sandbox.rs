//! Plugin sandboxes: with `[security] enforce = true` each plugin process is started under
//! bubblewrap (`bwrap`), and what confines it is reported from the same plan that built its
//! command line ([`SandboxReport`]), so `utter plugins` and `runner.validate_plugin` say
//! exactly what is in force.
//!
//! The bubblewrap sandbox of a plugin:
//! - a root of its own: the system directories (`/usr`, `/etc`, `/lib*`, `/bin`, `/sbin`,
//!   `/opt`) read-only, its program and the absolute paths its entrypoint names read-only,
//!   its `read_paths` and the user's utter configuration (`$XDG_CONFIG_HOME/utter`, where
//!   the router's profiles are) read-only (a plugin of kind `stt` also the speech models,
//!   `$XDG_DATA_HOME/utter/models`), its `write_paths` writable; `/proc`, a minimal
//!   `/dev` and a private `/tmp`. Nothing else: not the rest of the home directory, not
//!   `$XDG_RUNTIME_DIR`;
//! - a network namespace of its own (no network at all, not even the host's loopback) unless
//!   its `[[plugin]]` entry grants `network`;
//! - its own PID namespace (it sees and signals only its own processes), its own IPC and UTS
//!   namespaces, no capabilities (`--cap-drop ALL`), no new privileges
//!   (bubblewrap sets `PR_SET_NO_NEW_PRIVS` itself), and death with the runner
//!   (`--die-with-parent`, on top of the runner's `PR_SET_PDEATHSIG` on `bwrap` itself);
//! - the session sockets its environment names that its permissions grant, bound one by
//!   one: the session bus (`DBUS_SESSION_BUS_ADDRESS`, a `unix:path=` address) with `dbus`,
//!   the Wayland display with `wayland`, the compositor's IPC socket (`NIRI_SOCKET`,
//!   `SWAYSOCK`, `I3SOCK`, Hyprland's two sockets of `HYPRLAND_INSTANCE_SIGNATURE`) with
//!   `compositor`, the accessibility bus with `accessibility`,
//!   PipeWire with `microphone`, `/dev/uinput` with `input-injection`, and the plugin
//!   socket directory for the `connect` and `listen` transports. The variables naming
//!   what is not passed in are withheld;
//!
//! Permissions are granted by the `[[plugin]]` entry only; what a plugin declares in its
//! hello never widens its sandbox (the older runner's weakness, reference §12 item 40).
//! Permissions that travel over the session bus or the Wayland socket (`screenshot`,
//! `clipboard`, `notifications`, ...) are reported advisory: the sandbox cannot tell those
//! calls apart.
//!
//! Where bwrap is missing or does not work, Landlock (Linux 6.7+, ABI 4) confines the plugin
//! process itself instead (`[security] sandbox = "auto"`, or chosen with `"landlock"`): the
//! same paths as above for reading and writing, enforced by the kernel on the unchanged file
//! system, and TCP `connect`/`bind` denied without `network` (Landlock rules cover TCP only,
//! so the report says `tcp-denied`). It cannot give a private `/tmp` or restrict unix
//! sockets, and says so. With neither, plugins run unconfined and every permission is
//! reported advisory with the reason.
//!
//! `systemd-run --user` is not a fallback, for reasons measured with systemd 252: a scope
//! (`--scope`, which keeps the plugin the runner's child) accepts only resource-control and
//! kill settings, and refuses the sandbox ones (`-p PrivateNetwork=yes` and
//! `-p ProtectHome=yes` both end in "Unknown assignment"); a transient service (`--pipe`)
//! takes them, but its process is the user manager's child, not the runner's (the
//! supervisor's kill, epoch and parent-death rules need its own child), and under a user
//! manager `PrivateNetwork=yes` was not applied (the service still saw the host's
//! interfaces) while the file-system settings were. A report built from such a unit could
//! not be exactly what is in force, so Landlock is the fallback where bwrap is missing.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use utter_ipc::status::{PermissionReport, SandboxReport};

use crate::config::PluginEntry;

/// The variables that name a compositor's IPC socket.
const COMPOSITOR_VARIABLES: [&str; 3] = ["NIRI_SOCKET", "SWAYSOCK", "I3SOCK"];

/// System directories every sandboxed plugin may read (those that exist; a symbolic link,
/// such as `/bin` → `usr/bin` on merged-/usr systems, is recreated as a link).
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/opt",
];

/// How plugins are confined, decided once when the supervisor starts (and again when a
/// reload changes `[security]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mechanism {
    /// `[security] enforce = false` (the default): plugins run unconfined.
    Off,
    /// bubblewrap, at this path; it passed the probe.
    Bwrap(PathBuf),
    /// Landlock rules applied to the plugin process itself (the kernel has ABI 4 or newer).
    Landlock,
    /// `enforce = true`, but no mechanism works here: why (and what to install).
    Unavailable(String),
}

/// The Landlock ABI the rules are written for: 4 (Linux 6.7), the first with TCP rules.
const LANDLOCK_ABI: landlock::ABI = landlock::ABI::V4;

impl Mechanism {
    /// The mechanism for `enforce` and `[security] sandbox` (`auto`: bwrap when it works,
    /// else Landlock; `bwrap` or `landlock`: only that one). bwrap is probed with a sandbox
    /// like a plugin's running `true` (exit 0 within 5 s); Landlock by creating a ruleset.
    pub async fn detect(enforce: bool, choice: &str) -> Mechanism {
        if !enforce {
            return Mechanism::Off;
        }
        let bwrap = if choice == "landlock" {
            Err("[security] sandbox = \"landlock\"".to_owned())
        } else {
            probe_bwrap().await
        };
        let bwrap_why = match bwrap {
            Ok(path) => return Mechanism::Bwrap(path),
            Err(why) => why,
        };
        if choice == "bwrap" {
            return Mechanism::Unavailable(bwrap_why);
        }
        match landlock_ruleset(&LandlockRules::default()) {
            Ok(_) => Mechanism::Landlock,
            Err(why) if choice == "landlock" => Mechanism::Unavailable(why),
            Err(why) => Mechanism::Unavailable(format!("{bwrap_why}; and {why}")),
        }
    }
}

/// bwrap's path when it works here, else why not.
async fn probe_bwrap() -> Result<PathBuf, String> {
    let Some(bwrap) = crate::paths::find_on_path("bwrap") else {
        return Err(
            "bwrap is not installed (install bubblewrap: apt install bubblewrap, dnf install bubblewrap, pacman -S bubblewrap)".into(),
        );
    };
    let mut probe = tokio::process::Command::new(&bwrap);
    for dir in SYSTEM_DIRS {
        probe.arg("--ro-bind-try").arg(dir).arg(dir);
    }
    probe
        .args(["--proc", "/proc", "--dev", "/dev", "--unshare-net"])
        .args(["--unshare-ipc", "--die-with-parent", "--cap-drop", "ALL"])
        .args(["--", "true"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    match tokio::time::timeout(Duration::from_secs(5), probe.output()).await {
        Ok(Ok(out)) if out.status.success() => Ok(bwrap),
        Ok(Ok(out)) => Err(format!(
            "{} does not work here ({}: {}); user namespaces may be off (sysctl kernel.unprivileged_userns_clone=1)",
            bwrap.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Ok(Err(e)) => Err(format!("cannot run {}: {e}", bwrap.display())),
        Err(_) => Err(format!(
            "{} did not finish its probe within 5 s",
            bwrap.display()
        )),
    }
}

/// What a Landlock-confined plugin may touch ([`Plan::landlock`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LandlockRules {
    /// Read (and execute) beneath these.
    pub read: Vec<PathBuf>,
    /// Read and write beneath these.
    pub write: Vec<PathBuf>,
    /// TCP `connect` and `bind` allowed (the `network` permission).
    pub tcp: bool,
}

/// The kernel ruleset for `rules`, created in the runner before the plugin is spawned; the
/// child only applies it ([`restrict`]). Paths that cannot be opened are left out.
///
/// # Errors
/// Why Landlock (ABI 4) cannot be used here: not built into the kernel, not enabled, too old.
pub fn landlock_ruleset(rules: &LandlockRules) -> Result<landlock::RulesetCreated, String> {
    use landlock::{
        Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
        RulesetCreatedAttr, Scope, path_beneath_rules,
    };
    let why = |e: landlock::RulesetError| {
        format!("Landlock (ABI 4, Linux 6.7 or newer, with lsm=landlock) is not usable: {e}")
    };
    let all = AccessFs::from_all(LANDLOCK_ABI);
    let read = AccessFs::from_read(LANDLOCK_ABI);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(all)
        .map_err(why)?;
    if !rules.tcp {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(LANDLOCK_ABI))
            .map_err(why)?;
    }
    let existing = |paths: &[PathBuf]| -> Vec<PathBuf> {
        paths.iter().filter(|p| p.exists()).cloned().collect()
    };
    // Signals to processes outside the sandbox (Landlock ABI 6, where the kernel has it).
    let ruleset = ruleset
        .set_compatibility(CompatLevel::BestEffort)
        .scope(Scope::Signal)
        .map_err(why)?;
    ruleset
        .create()
        .map_err(why)?
        .set_compatibility(CompatLevel::BestEffort)
        .add_rules(path_beneath_rules(existing(&rules.read), read))
        .and_then(|r| r.add_rules(path_beneath_rules(existing(&rules.write), all)))
        .map_err(why)
}

/// Apply `ruleset` to the calling process (a spawned plugin, between fork and exec): no new
/// privileges, then `landlock_restrict_self`. Allocates nothing on success.
///
/// # Errors
/// `EPERM` when the kernel refused.
pub fn restrict(ruleset: landlock::RulesetCreated) -> std::io::Result<()> {
    match ruleset.restrict_self() {
        Ok(_) => Ok(()),
        Err(_) => Err(std::io::Error::from_raw_os_error(nix::libc::EPERM)),
    }
}

/// The sandbox of one plugin start: the command line to put before its program (empty
/// when it runs unconfined) and the report of what that command line enforces.
#[derive(Debug, Clone)]
pub struct Plan {
    /// `bwrap ARGS… --`, or nothing.
    pub prefix: Vec<OsString>,
    /// The Landlock rules to apply to the plugin process, under [`Mechanism::Landlock`].
    pub landlock: Option<LandlockRules>,
    /// What is in force (its `permissions` are filled per report, see [`permissions`]).
    pub report: SandboxReport,
    /// Environment variables the plugin does not get, because what they name is not passed
    /// in (`DBUS_SESSION_BUS_ADDRESS` without the `dbus` permission), so it says "no session
    /// bus" instead of failing to connect to a path that is not there.
    pub withheld_env: Vec<&'static str>,
    /// Environment variables the plugin gets from the sandbox: `AT_SPI_BUS_ADDRESS` (the
    /// accessibility bus's socket, passed in with `accessibility`), which a plugin without
    /// the session bus cannot ask `org.a11y.Bus` for.
    pub extra_env: Vec<(&'static str, String)>,
    /// Session sockets a permission grants that did not exist when the plugin started
    /// (PipeWire or the compositor started after the runner): a bind needs the socket, so
    /// the plugin has to start again once it appears ([`Plan::appeared`]).
    pub awaited: Vec<PathBuf>,
}

impl Plan {
    /// The first of [`Plan::awaited`] that exists now.
    pub fn appeared(awaited: &[PathBuf]) -> Option<&Path> {
        use std::os::unix::fs::FileTypeExt;
        awaited
            .iter()
            .find(|p| std::fs::metadata(p).is_ok_and(|m| m.file_type().is_socket()))
            .map(PathBuf::as_path)
    }
}

/// What the plugin is started in: the environment it gets (to find the session sockets),
/// its resolved program and the plugin socket directory of a socket transport.
#[derive(Clone, Copy)]
pub struct Start<'a> {
    /// The plugin's `[[plugin]]` entry.
    pub entry: &'a PluginEntry,
    /// Its program, resolved.
    pub program: &'a Path,
    /// `UTTER_PLUGIN_SOCKET`'s directory, for `connect` and `listen`.
    pub socket_dir: Option<&'a Path>,
    /// A variable of the environment it gets (`None`: not set).
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

/// The plan for one start under `mechanism`.
pub fn plan(mechanism: &Mechanism, start: Start<'_>) -> Plan {
    let unconfined = |why: String| Plan {
        prefix: Vec::new(),
        landlock: None,
        report: SandboxReport {
            mechanism: "none".into(),
            enforced: false,
            why: Some(why),
            network: "unrestricted".into(),
            read_paths: Vec::new(),
            write_paths: Vec::new(),
            sockets: Vec::new(),
            permissions: Vec::new(),
            limits: Vec::new(),
        },
        withheld_env: Vec::new(),
        extra_env: Vec::new(),
        awaited: Vec::new(),
    };
    let bwrap = match mechanism {
        Mechanism::Off => return unconfined("[security] enforce is off".into()),
        Mechanism::Unavailable(why) => return unconfined(format!("no sandbox: {why}")),
        _ if !start.entry.sandbox => {
            return unconfined(format!(
                "sandbox = false in the [[plugin]] entry {:?}",
                start.entry.id
            ));
        }
        Mechanism::Landlock => return landlock_plan(start),
        Mechanism::Bwrap(path) => path,
    };
    let granted = |name: &str| start.entry.permissions.iter().any(|p| p == name);
    let mut args: Vec<OsString> = vec![bwrap.clone().into()];
    let mut arg = |a: &str| args.push(a.into());
    arg("--die-with-parent");
    // A session of its own inside too: no controlling terminal to push keystrokes into.
    arg("--new-session");
    arg("--cap-drop");
    arg("ALL");
    arg("--unshare-pid");
    arg("--unshare-ipc");
    arg("--unshare-uts");
    arg("--unshare-cgroup-try");
    let network = if granted("network") {
        "allowed"
    } else {
        arg("--unshare-net");
        "denied"
    };
    let mut read = Vec::new();
    let mut write = Vec::new();
    let mut sockets = Vec::new();
    let mut binds: Vec<(&'static str, PathBuf)> = Vec::new();
    for dir in SYSTEM_DIRS {
        let path = Path::new(dir);
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(path) {
                    binds.push(("--symlink", target));
                    binds.push(("", path.to_path_buf()));
                }
            }
            Ok(_) => {
                binds.push(("--ro-bind", path.to_path_buf()));
                read.push(dir.to_string());
            }
            Err(_) => {}
        }
    }
    // Its program, what its entrypoint names, its read_paths and cwd; its write_paths and
    // socket directory: the same list Landlock gets. What does not exist is not bound, and
    // not reported (check-config warns about it).
    let (allowed_read, allowed_write) = allowed_paths(&start);
    for path in allowed_read {
        if !read.contains(&path) && !SYSTEM_DIRS.contains(&path.as_str()) {
            binds.push(("--ro-bind", PathBuf::from(&path)));
            read.push(path);
        }
    }
    for path in allowed_write {
        binds.push(("--bind", PathBuf::from(&path)));
        write.push(path);
    }
    // Session sockets, each one by one.
    let runtime = (start.env)("XDG_RUNTIME_DIR").map(PathBuf::from);
    // Only sockets: a variable naming a directory or a file passes nothing in.
    let mut awaited = Vec::new();
    let mut socket = |path: PathBuf, binds: &mut Vec<(&'static str, PathBuf)>| {
        use std::os::unix::fs::FileTypeExt;
        let is_socket = std::fs::metadata(&path).is_ok_and(|m| m.file_type().is_socket());
        if path.is_absolute() && is_socket {
            sockets.push(path.display().to_string());
            binds.push(("--bind", path));
        } else if path.is_absolute() && !path.exists() {
            awaited.push(path);
        }
    };
    // The session bus only with `dbus`: over it a plugin could reach every service of the
    // session, the runner's own D-Bus interface among them.
    let mut withheld_env = Vec::new();
    let mut extra_env = Vec::new();
    match (start.env)("DBUS_SESSION_BUS_ADDRESS") {
        Some(bus) if granted("dbus") => {
            for part in bus.split(';') {
                if let Some(path) = part
                    .strip_prefix("unix:")
                    .and_then(|rest| rest.split(',').find_map(|kv| kv.strip_prefix("path=")))
                {
                    socket(PathBuf::from(path), &mut binds);
                }
            }
        }
        Some(_) => withheld_env.push("DBUS_SESSION_BUS_ADDRESS"),
        None => {}
    }
    // The Wayland display only with `wayland` (a Wayland client can type and click through
    // the virtual keyboard and pointer protocols, and read the screen), the compositor's
    // IPC only with `compositor` (over it a plugin could run any program: sway's `exec`,
    // niri's `spawn`).
    match (start.env)("WAYLAND_DISPLAY") {
        Some(display) if granted("wayland") => {
            let path = PathBuf::from(&display);
            match (&runtime, path.is_absolute()) {
                (_, true) => socket(path, &mut binds),
                (Some(dir), false) => socket(dir.join(display), &mut binds),
                (None, false) => {}
            }
        }
        Some(_) => withheld_env.push("WAYLAND_DISPLAY"),
        None => {}
    }
    for name in COMPOSITOR_VARIABLES {
        match (start.env)(name) {
            Some(path) if granted("compositor") => socket(PathBuf::from(path), &mut binds),
            Some(_) => withheld_env.push(name),
            None => {}
        }
    }
    // Hyprland names an instance, not a socket: its two sockets are
    // `$XDG_RUNTIME_DIR/hypr/<signature>/.socket.sock` and `.socket2.sock` (one path
    // component: a signature holding `/` or `..` binds nothing).
    match (start.env)("HYPRLAND_INSTANCE_SIGNATURE") {
        Some(signature) if granted("compositor") => {
            let one_component = !signature.is_empty()
                && !signature.contains('/')
                && signature != "."
                && signature != "..";
            if let (Some(dir), true) = (&runtime, one_component) {
                let instance = dir.join("hypr").join(&signature);
                socket(instance.join(".socket.sock"), &mut binds);
                socket(instance.join(".socket2.sock"), &mut binds);
            }
        }
        Some(_) => withheld_env.push("HYPRLAND_INSTANCE_SIGNATURE"),
        None => {}
    }
    if granted("microphone") {
        let pipewire = (start.env)("PIPEWIRE_RUNTIME_DIR")
            .map(PathBuf::from)
            .or_else(|| runtime.clone());
        if let Some(dir) = pipewire {
            socket(dir.join("pipewire-0"), &mut binds);
        }
    }
    if granted("accessibility") {
        // The accessibility bus's socket directory (only its sockets live there).
        if let Some(dir) = runtime
            .as_ref()
            .map(|d| d.join("at-spi"))
            .filter(|d| d.is_dir())
        {
            if let Some(bus) = accessibility_bus_socket(&dir) {
                extra_env.push(("AT_SPI_BUS_ADDRESS", format!("unix:path={}", bus.display())));
            }
            sockets.push(dir.display().to_string());
            binds.push(("--bind", dir));
        }
    }
    // The fresh mounts first: a bind below /tmp (a test's directory) must land on the
    // private /tmp, not under it.
    args.extend(["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"].map(OsString::from));
    for (flag, path) in binds.iter() {
        match *flag {
            "--symlink" => args.extend(["--symlink".into(), path.clone().into_os_string()]),
            "" => args.push(path.clone().into_os_string()),
            flag => args.extend([
                flag.into(),
                path.clone().into_os_string(),
                path.clone().into_os_string(),
            ]),
        }
    }
    if granted("input-injection") && Path::new("/dev/uinput").exists() {
        args.extend(["--dev-bind", "/dev/uinput", "/dev/uinput"].map(OsString::from));
    }
    if !start.entry.cwd.is_empty() {
        args.extend(["--chdir".into(), OsString::from(&start.entry.cwd)]);
    }
    args.push("--".into());
    write.push("/tmp (private)".into());
    Plan {
        prefix: args,
        landlock: None,
        report: SandboxReport {
            mechanism: "bwrap".into(),
            enforced: true,
            why: None,
            network: network.into(),
            read_paths: read,
            write_paths: write,
            sockets,
            permissions: Vec::new(),
            limits: Vec::new(),
        },
        withheld_env,
        extra_env,
        awaited,
    }
}

/// The accessibility bus's socket in `dir` (`$XDG_RUNTIME_DIR/at-spi`): `bus`, or the
/// `bus_<display>` at-spi2-core 2.47 and later make; the first such socket by name.
fn accessibility_bus_socket(dir: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name == "bus" || name.starts_with("bus_")
        })
        .filter(|e| e.file_type().is_ok_and(|t| t.is_socket()))
        .map(|e| e.path())
        .collect();
    found.sort();
    found.into_iter().next()
}

/// The paths a plugin's sandbox lets it read and write, the same under either mechanism:
/// system directories, its program and the absolute paths its entrypoint names, its
/// `read_paths` and working directory (read); its `write_paths` and socket directory (write).
/// Only existing paths, each listed once.
fn allowed_paths(start: &Start<'_>) -> (Vec<String>, Vec<String>) {
    let mut read: Vec<String> = SYSTEM_DIRS
        .iter()
        .filter(|d| Path::new(d).is_dir())
        .map(|d| d.to_string())
        .collect();
    let program = crate::paths::executable_path(start.program);
    let named = start.entry.entrypoint.argv()[1..]
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .collect::<Vec<_>>();
    let cwd = Some(start.entry.cwd.as_str())
        .filter(|c| !c.is_empty())
        .map(PathBuf::from);
    // The user's utter configuration ($XDG_CONFIG_HOME/utter: the router's profiles), which
    // holds nothing secret (the token lives in the state directory).
    let dirs = utter_ipc::paths::BaseDirs::from_lookup(|name| {
        (start.env)(name).map(std::ffi::OsString::from)
    });
    let utter_config = dirs
        .config_file()
        .and_then(|f| f.parent().map(Path::to_path_buf));
    // A speech-to-text plugin reads the models `utter models pull` installs.
    let models = dirs.models_dir().filter(|_| start.entry.kind == "stt");
    let extra = std::iter::once(program)
        .chain(utter_config)
        .chain(models)
        .chain(named)
        .chain(start.entry.read_paths.iter().map(PathBuf::from))
        .chain(cwd);
    for path in extra {
        // `/` would cover the private /tmp, /dev and /proc (check-config refuses it).
        if path.parent().is_some() && path.exists() && !under_any(&path, &read) {
            read.push(path.display().to_string());
        }
    }
    let mut write: Vec<String> = start
        .entry
        .write_paths
        .iter()
        .filter(|p| Path::new(p).parent().is_some() && Path::new(p).exists())
        .cloned()
        .collect();
    if let Some(dir) = start.socket_dir {
        write.push(dir.display().to_string());
    }
    (read, write)
}

/// The plan under [`Mechanism::Landlock`]: no wrapper, rules for the process itself.
fn landlock_plan(start: Start<'_>) -> Plan {
    let granted = |name: &str| start.entry.permissions.iter().any(|p| p == name);
    let (mut read, write) = allowed_paths(&start);
    // What every program needs to start: the kernel's process view and the usual devices.
    read.push("/proc".into());
    read.push("/dev".into());
    let mut rules = LandlockRules {
        read: read.iter().map(PathBuf::from).collect(),
        write: write.iter().map(PathBuf::from).collect(),
        tcp: granted("network"),
    };
    for dev in ["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"] {
        rules.write.push(PathBuf::from(dev));
    }
    Plan {
        prefix: Vec::new(),
        landlock: Some(rules.clone()),
        report: SandboxReport {
            mechanism: "landlock".into(),
            enforced: true,
            why: None,
            network: if rules.tcp { "allowed" } else { "tcp-denied" }.into(),
            read_paths: read,
            write_paths: write,
            sockets: Vec::new(),
            permissions: Vec::new(),
            limits: vec![
                "UDP and unix sockets are not restricted (Landlock rules cover TCP only)".into(),
                "/tmp is the shared one, readable and writable only where listed above".into(),
                "no mount, network, PID or IPC namespace of its own (bwrap gives those)".into(),
                "the session bus, the Wayland display and the compositor's IPC stay reachable (unix sockets) whatever the dbus, wayland and compositor permissions say".into(),
            ],
        },
        withheld_env: [
            ("dbus", &["DBUS_SESSION_BUS_ADDRESS"][..]),
            ("wayland", &["WAYLAND_DISPLAY"][..]),
            ("compositor", &COMPOSITOR_VARIABLES[..]),
        ]
        .into_iter()
        .filter(|(permission, _)| !granted(permission))
        .flat_map(|(_, names)| names.iter().copied())
        .collect(),
        extra_env: Vec::new(),
        awaited: Vec::new(),
    }
}

/// Each of `names` (the plugin's permissions, config ∪ hello) as `report` enforces it;
/// `configured` are those its `[[plugin]]` entry grants.
pub fn permissions(
    report: &SandboxReport,
    names: &[String],
    configured: &[String],
) -> Vec<PermissionReport> {
    names
        .iter()
        .map(|name| {
            let granted = configured.contains(name);
            let advisory = |detail: String| PermissionReport {
                name: name.clone(),
                enforced: false,
                mechanism: None,
                detail,
            };
            if !report.enforced {
                return advisory(report.why.clone().unwrap_or_else(|| "no sandbox".into()));
            }
            let enforced = |detail: &str| PermissionReport {
                name: name.clone(),
                enforced: true,
                mechanism: Some(report.mechanism.clone()),
                detail: detail.to_owned(),
            };
            let not_granted = "declared by the plugin but not granted in its [[plugin]] permissions: denied";
            if report.mechanism == "landlock" {
                return match name.as_str() {
                    "network" if granted => enforced("granted: TCP allowed"),
                    "network" => enforced("not granted: TCP connect and bind denied (Landlock covers TCP only; UDP and unix sockets stay open)"),
                    "filesystem.read" => enforced("only the system directories, /proc, /dev, its program and its read_paths"),
                    "filesystem.write" => enforced("only its write_paths and its socket directory (no private /tmp)"),
                    _ => advisory(
                        "reached over sockets, which Landlock does not restrict: not enforced"
                            .into(),
                    ),
                };
            }
            match name.as_str() {
                "network" if granted => enforced("granted: it shares the host's network"),
                "network" => enforced(not_granted),
                "filesystem.read" => enforced("only the system directories, its program and its read_paths"),
                "filesystem.write" => enforced("only its write_paths, its socket directory and a private /tmp"),
                "microphone" if granted && report.sockets.iter().any(|s| s.ends_with("pipewire-0")) => {
                    enforced("granted: the PipeWire socket is passed in")
                }
                "microphone" if granted => {
                    enforced("granted, but no PipeWire socket was found to pass in")
                }
                "microphone" => enforced("not granted: no PipeWire socket"),
                "accessibility" if granted => enforced("granted: the accessibility bus is passed in"),
                "accessibility" => enforced("not granted: no accessibility bus"),
                "dbus" if granted => enforced("granted: the session bus is passed in"),
                "dbus" => enforced("not granted: no session bus"),
                "wayland" if granted => enforced("granted: the Wayland display is passed in"),
                "wayland" => enforced("not granted: no Wayland display"),
                "compositor" if granted => enforced("granted: the compositor's IPC socket is passed in"),
                "compositor" => enforced("not granted: no compositor IPC"),
                _ => advisory(
                    "reached over the session bus or the Wayland socket, which the sandbox passes in whole: not enforced"
                        .into(),
                ),
            }
        })
        .collect()
}

/// Whether `path` lies under one of `dirs`.
fn under_any(path: &Path, dirs: &[String]) -> bool {
    dirs.iter().any(|d| path.starts_with(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(text: &str) -> PluginEntry {
        let config: crate::config::Config = toml::from_str(&format!(
            "config_version = 1\n[[plugin]]\nid = \"p\"\nentrypoint = [\"/bin/sh\", \"/nonexistent/script\"]\n{text}"
        ))
        .expect("a config");
        config.plugin.into_iter().next().expect("a plugin")
    }

    fn plan_for(text: &str, env: &[(&str, &str)]) -> Plan {
        let entry = entry(text);
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let lookup = move |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        plan(
            &Mechanism::Bwrap("/usr/bin/bwrap".into()),
            Start {
                entry: &entry,
                program: Path::new("/bin/sh"),
                socket_dir: None,
                env: &lookup,
            },
        )
    }

    fn args(plan: &Plan) -> Vec<String> {
        plan.prefix
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn network_is_cut_unless_granted_and_the_report_says_so() {
        let cut = plan_for("", &[]);
        assert!(args(&cut).contains(&"--unshare-net".to_owned()));
        assert_eq!(cut.report.network, "denied");
        let open = plan_for("permissions = [\"network\"]\n", &[]);
        assert!(!args(&open).contains(&"--unshare-net".to_owned()));
        assert_eq!(open.report.network, "allowed");
        assert_eq!(args(&open).last().map(String::as_str), Some("--"));
    }

    #[test]
    fn paths_and_sockets_are_bound_as_configured() {
        let dir = tempfile::tempdir().unwrap();
        let bus = dir.path().join("bus");
        let _listener = std::os::unix::net::UnixListener::bind(&bus).unwrap();
        let not_a_socket = dir.path().join("display");
        std::fs::write(&not_a_socket, "").unwrap();
        let models = dir.path().join("models");
        let out = dir.path().join("out");
        std::fs::create_dir(&models).unwrap();
        std::fs::create_dir(&out).unwrap();
        let plan = plan_for(
            &format!(
                "read_paths = [\"{}\", \"/nonexistent/dir\"]\nwrite_paths = [\"{}\"]\npermissions = [\"dbus\"]\n",
                models.display(),
                out.display()
            ),
            &[
                (
                    "DBUS_SESSION_BUS_ADDRESS",
                    &format!("unix:path={},guid=1", bus.display()),
                ),
                // Not a socket: nothing is passed in for it.
                ("WAYLAND_DISPLAY", &not_a_socket.display().to_string()),
            ],
        );
        let a = args(&plan).join(" ");
        assert!(
            a.contains(&format!("--ro-bind {0} {0}", models.display())),
            "{a}"
        );
        assert!(a.contains(&format!("--bind {0} {0}", out.display())), "{a}");
        assert!(a.contains(&format!("--bind {0} {0}", bus.display())), "{a}");
        assert!(!a.contains("/nonexistent/dir"), "{a}");
        assert!(
            plan.report
                .read_paths
                .contains(&models.display().to_string())
        );
        assert!(plan.report.write_paths.contains(&out.display().to_string()));
        assert_eq!(plan.report.sockets, vec![bus.display().to_string()]);
        assert_eq!(
            plan.withheld_env,
            ["WAYLAND_DISPLAY"],
            "no wayland permission"
        );
        // Paths that do not exist are not bound.
        assert!(!a.contains("/nonexistent/script"), "{a}");
        // Without `dbus` the session bus is neither bound nor named.
        let env = [(
            "DBUS_SESSION_BUS_ADDRESS",
            format!("unix:path={},guid=1", bus.display()),
        )];
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let plan = plan_for("", &env);
        let a = args(&plan).join(" ");
        assert!(!a.contains(&bus.display().to_string()), "{a}");
        assert!(plan.report.sockets.is_empty());
        assert_eq!(plan.withheld_env, ["DBUS_SESSION_BUS_ADDRESS"]);
        // The compositor's IPC only with `compositor`: over it any program could be run.
        let sway = dir.path().join("sway.sock");
        let _sway = std::os::unix::net::UnixListener::bind(&sway).unwrap();
        let sway_env = [("SWAYSOCK", sway.display().to_string())];
        let sway_env: Vec<(&str, &str)> = sway_env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let plan = plan_for("", &sway_env);
        assert!(!args(&plan).join(" ").contains(&sway.display().to_string()));
        assert_eq!(plan.withheld_env, ["SWAYSOCK"]);
        let plan = plan_for("permissions = [\"compositor\"]\n", &sway_env);
        assert!(
            args(&plan)
                .join(" ")
                .contains(&format!("--bind {0} {0}", sway.display()))
        );
        assert!(plan.withheld_env.is_empty());
        assert!(args(&plan).contains(&"--new-session".to_owned()));
        // Hyprland's two sockets, found from the signature under the runtime directory.
        let instance = dir.path().join("hypr").join("sig_1");
        std::fs::create_dir_all(&instance).unwrap();
        let _requests =
            std::os::unix::net::UnixListener::bind(instance.join(".socket.sock")).unwrap();
        let _events =
            std::os::unix::net::UnixListener::bind(instance.join(".socket2.sock")).unwrap();
        let runtime = dir.path().display().to_string();
        let hypr_env = [
            ("HYPRLAND_INSTANCE_SIGNATURE", "sig_1"),
            ("XDG_RUNTIME_DIR", runtime.as_str()),
        ];
        let plan = plan_for("", &hypr_env);
        assert!(!args(&plan).join(" ").contains("sig_1"));
        assert_eq!(plan.withheld_env, ["HYPRLAND_INSTANCE_SIGNATURE"]);
        let plan = plan_for("permissions = [\"compositor\"]\n", &hypr_env);
        let a = args(&plan).join(" ");
        for name in [".socket.sock", ".socket2.sock"] {
            let path = instance.join(name);
            assert!(
                a.contains(&format!("--bind {0} {0}", path.display())),
                "{a}"
            );
        }
        let hostile = [
            ("HYPRLAND_INSTANCE_SIGNATURE", "../hypr/sig_1"),
            ("XDG_RUNTIME_DIR", runtime.as_str()),
        ];
        let plan = plan_for("permissions = [\"compositor\"]\n", &hostile);
        assert!(!args(&plan).join(" ").contains(".socket.sock"));
    }

    #[test]
    fn hello_permissions_never_widen_the_sandbox() {
        let plan = plan_for("", &[]);
        let report = permissions(&plan.report, &["network".into(), "clipboard".into()], &[]);
        assert!(report[0].enforced && report[0].detail.contains("not granted"));
        assert!(!report[1].enforced && report[1].detail.contains("not enforced"));
    }

    #[test]
    fn without_a_mechanism_everything_is_advisory_with_the_reason() {
        let entry = entry("");
        let lookup = |_: &str| None;
        let plan = plan(
            &Mechanism::Unavailable("bwrap is not installed".into()),
            Start {
                entry: &entry,
                program: Path::new("/bin/sh"),
                socket_dir: None,
                env: &lookup,
            },
        );
        assert!(plan.prefix.is_empty());
        assert_eq!(plan.report.network, "unrestricted");
        let report = permissions(&plan.report, &["network".into()], &["network".into()]);
        assert!(!report[0].enforced);
        assert!(
            report[0].detail.contains("bwrap is not installed"),
            "{report:?}"
        );
    }
}
