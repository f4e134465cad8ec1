//! The session service, with real files and processes: `utter install --user` and
//! `utter uninstall --user` into temporary XDG directories, the unit checked by
//! `systemd-analyze --user verify`, the Wayland-readiness wrapper `systemd/utter-session-env`
//! against real unix sockets and a stub `systemctl`, `utter daemon`'s sd_notify messages on a
//! datagram socket the test binds, its journald logging (in a private mount namespace), and
//! the installed unit started, reloaded and stopped by a real `systemd --user`.
//!
//! Tests that need something this machine may lack (`systemd-analyze`, root for
//! `unshare -m`, `/lib/systemd/systemd`) print why and pass without checking.

use crate::common;

use common::systemd::{UserManager, cannot_unshare};
use common::{ChildEnv, Sandbox, UtterRun, bin, repo_root, run_utter};
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use utter_protocol::serde_json::Value;

// ---------------------------------------------------------------------------------------
// Helpers

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

fn sha256_hex(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    utter_protocol::digest::sha256_hex(&bytes)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The test's PATH with `dir` in front.
fn path_with(dir: &Path) -> String {
    let rest = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
    format!("{}:{rest}", dir.display())
}

/// A `systemctl` stand-in in `<sandbox>/stub-bin`: it appends its arguments to
/// `systemctl.log` and, for `--user show-environment`, prints `manager-env` (if written).
/// Returns the directory to put first on PATH.
fn stub_systemctl(sb: &Sandbox) -> PathBuf {
    let log = sb.path("systemctl.log");
    let env_file = sb.path("manager-env");
    sb.write_script(
        "stub-bin/systemctl",
        &format!(
            "#!/bin/sh\n\
             echo \"$*\" >> '{}'\n\
             if [ \"$1 $2\" = '--user show-environment' ] && [ -f '{}' ]; then cat '{}'; fi\n\
             exit 0\n",
            log.display(),
            env_file.display(),
            env_file.display()
        ),
    );
    sb.path("stub-bin")
}

fn systemctl_calls(sb: &Sandbox) -> Vec<String> {
    std::fs::read_to_string(sb.path("systemctl.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The environment `utter install` runs in: the sandbox's, XDG_STATE_HOME inside it, and the
/// stub systemctl first on PATH.
fn install_env(sb: &Sandbox) -> ChildEnv {
    let stub = stub_systemctl(sb);
    sb.env(None)
        .with("XDG_STATE_HOME", sb.path("state"))
        .with("PATH", path_with(&stub))
}

/// Where the default install puts each file in the sandbox.
struct Installed {
    binary: PathBuf,
    wrapper: PathBuf,
    unit: PathBuf,
    dbus: PathBuf,
    manifest: PathBuf,
}

impl Installed {
    fn in_sandbox(sb: &Sandbox) -> Installed {
        Installed {
            binary: sb.path("home/.local/bin/utter"),
            wrapper: sb.path("home/.local/libexec/utter/utter-session-env"),
            unit: sb.path("config/systemd/user/utter.service"),
            dbus: sb.path("data/dbus-1/services/dev.utter.Runner1.service"),
            manifest: sb.path("state/utter/installed.json"),
        }
    }

    fn all(&self) -> [&PathBuf; 4] {
        [&self.binary, &self.wrapper, &self.unit, &self.dbus]
    }
}

/// The `ExecStart=` (or other `key=`) lines of a unit or service file.
fn lines_with(text: &str, key: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with(key))
        .map(str::to_owned)
        .collect()
}

/// `systemd-analyze --user verify FILE`, or `None` (with the reason printed) when it
/// cannot run here.
fn systemd_analyze_verify(unit: &Path, sb: &Sandbox) -> Option<Output> {
    let probe = Command::new("systemd-analyze").arg("--version").output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!("SKIP systemd-analyze verify: systemd-analyze is not installed");
        return None;
    }
    let output = Command::new("systemd-analyze")
        .args(["--user", "verify"])
        .arg(unit)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", sb.path("home"))
        .env("XDG_RUNTIME_DIR", sb.path("run"))
        .env("XDG_CONFIG_HOME", sb.path("config"))
        .output()
        .expect("systemd-analyze runs");
    Some(output)
}

// ---------------------------------------------------------------------------------------
// install / uninstall

#[tokio::test]
async fn install_puts_four_files_in_place_and_uninstall_removes_exactly_them() {
    let sb = Sandbox::new();
    let env = install_env(&sb);
    let at = Installed::in_sandbox(&sb);
    // Something of the user's own beside our unit, which uninstall must leave.
    let neighbour = sb.write("config/systemd/user/other.service", "[Service]\n");
    // Only built-in plugins: no program of a plugin's to install (that is the next test).
    sb.write(
        "config/utter/config.toml",
        "config_version = 1\n[[plugin]]\nid = \"rules\"\nkind = \"router\"\nentrypoint = [\"utter\", \"plugin\", \"rules\"]\n",
    );

    let run = run_utter(&["install", "--user", "--json"], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    let report = run.json();
    let files = report["files"].as_array().expect("files");
    let expected = [
        ("binary", &at.binary, 0o755),
        ("wrapper", &at.wrapper, 0o755),
        ("unit", &at.unit, 0o644),
        ("dbus-service", &at.dbus, 0o644),
    ];
    assert_eq!(files.len(), expected.len(), "{run}");
    for ((kind, path, file_mode), reported) in expected.iter().zip(files) {
        assert_eq!(reported["kind"], *kind, "{run}");
        assert_eq!(reported["path"], path.to_str().unwrap(), "{run}");
        assert_eq!(reported["action"], "created", "{run}");
        assert_eq!(mode(path), *file_mode, "mode of {}", path.display());
    }
    assert_eq!(report["manifest"], at.manifest.to_str().unwrap());
    assert_eq!(report["dry_run"], false);
    // The configured plugins are recorded in the install lockfile `utter doctor` reads.
    let lock: Value =
        utter_protocol::serde_json::from_str(&read(&sb.path("state/utter/install.lock")))
            .expect("the install lockfile");
    assert_eq!(lock["lock_version"], 1, "{lock}");
    assert!(
        lock["plugins"].as_array().is_some_and(|p| p
            .iter()
            .any(|e| e["id"] == "rules" && e["version"].is_string())),
        "{lock}"
    );

    // The binary is this build's, byte for byte; the wrapper is the repository's.
    assert_eq!(sha256_hex(&at.binary), sha256_hex(&bin("utter")));
    assert_eq!(
        read(&at.wrapper),
        read(&repo_root().join("systemd/utter-session-env"))
    );
    // The paths in the unit and the activation file are the installed ones.
    let unit = read(&at.unit);
    assert_eq!(
        lines_with(&unit, "ExecStart="),
        vec![format!(
            "ExecStart={} {} daemon",
            at.wrapper.display(),
            at.binary.display()
        )]
    );
    assert!(unit.contains("\nType=notify\n"), "{unit}");
    assert!(!unit.contains("/usr/bin/utter"), "{unit}");
    let dbus = read(&at.dbus);
    assert_eq!(
        lines_with(&dbus, "Exec="),
        vec![format!("Exec={} daemon", at.binary.display())]
    );
    assert_eq!(lines_with(&dbus, "Name="), vec!["Name=dev.utter.Runner1"]);
    assert_eq!(
        lines_with(&dbus, "SystemdService="),
        vec!["SystemdService=utter.service"]
    );

    // The manifest lists the four files with the hashes of what is on disk.
    let manifest: Value =
        utter_protocol::serde_json::from_str(&read(&at.manifest)).expect("manifest is JSON");
    assert_eq!(manifest["manifest_version"], 1);
    let listed: Vec<(String, String)> = manifest["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_owned(),
                f["sha256"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = at
        .all()
        .iter()
        .map(|p| (p.to_str().unwrap().to_owned(), sha256_hex(p)))
        .collect();
    assert_eq!(listed, want);

    // It asked the (stub) user manager to reload, and said so.
    assert_eq!(systemctl_calls(&sb), vec!["--user daemon-reload"]);
    assert_eq!(report["daemon_reload"]["ok"], true, "{run}");
    assert_eq!(
        report["next_steps"][0],
        "systemctl --user enable --now utter.service"
    );

    // The installed unit passes systemd's own checks, with its real paths.
    if let Some(out) = systemd_analyze_verify(&at.unit, &sb) {
        assert!(
            out.status.success(),
            "systemd-analyze verify: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // Again: nothing to do.
    let run = run_utter(&["install", "--user"], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert_eq!(run.stdout.matches("unchanged").count(), 4, "{run}");
    assert!(!run.stdout.contains("created"), "{run}");

    // A changed unit and a wrapper that lost its x bit are put right, with a note.
    std::fs::write(&at.unit, "[Service]\nExecStart=/bin/false\n").unwrap();
    std::fs::set_permissions(&at.wrapper, std::fs::Permissions::from_mode(0o644)).unwrap();
    let run = run_utter(&["install", "--user"], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        run.stdout.contains(&format!(
            "replaced   unit          {} (its content differed)",
            at.unit.display()
        )),
        "{run}"
    );
    assert!(run.stdout.contains("(its mode was 0644)"), "{run}");
    assert_eq!(read(&at.unit), unit);
    assert_eq!(mode(&at.wrapper), 0o755);

    // A dry run of uninstall removes nothing.
    let run = run_utter(&["uninstall", "--user", "--dry-run"], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(run.stdout.contains("dry run"), "{run}");
    assert!(at.all().iter().all(|p| p.exists()));

    // A file changed since install is kept (exit 1) and stays in the manifest ...
    std::fs::write(&at.dbus, "[D-BUS Service]\nName=mine\n").unwrap();
    std::fs::remove_file(sb.path("systemctl.log")).unwrap();
    let run = run_utter(&["uninstall", "--user"], &env).await;
    assert_eq!(run.code, Some(1), "{run}");
    assert!(
        run.stdout
            .contains(&format!("kept     dbus-service  {}", at.dbus.display())),
        "{run}"
    );
    for (kind, p) in [
        ("binary", &at.binary),
        ("wrapper", &at.wrapper),
        ("unit", &at.unit),
    ] {
        assert!(!p.exists(), "{} was not removed: {run}", p.display());
        assert!(
            run.stdout
                .contains(&format!("removed  {kind:<13} {}", p.display())),
            "{run}"
        );
    }
    assert!(at.dbus.exists());
    assert_eq!(
        systemctl_calls(&sb),
        vec!["--user disable --now utter.service", "--user daemon-reload"]
    );
    let manifest: Value = utter_protocol::serde_json::from_str(&read(&at.manifest)).unwrap();
    assert_eq!(manifest["files"].as_array().unwrap().len(), 1);
    assert_eq!(manifest["files"][0]["kind"], "dbus-service");

    // ... until --force.
    let run = run_utter(&["uninstall", "--user", "--force", "--json"], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    let report = run.json();
    assert_eq!(report["files"][0]["action"], "removed", "{run}");
    assert!(!at.dbus.exists());
    assert!(!at.manifest.exists(), "the manifest goes last");
    assert!(
        !sb.path("home/.local/libexec/utter").exists(),
        "the wrapper's own directory goes too"
    );
    assert!(neighbour.exists(), "other files are never touched");
    assert!(
        sb.path("home/.local/bin").exists(),
        "shared directories stay"
    );

    // Nothing left to do.
    let run = run_utter(&["uninstall", "--user"], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(run.stdout.contains("nothing to uninstall"), "{run}");
}

/// `utter install --user` installs what runs (issue 30): the programs of the config's
/// plugins (the default config's `utter-input`, `utter-audio-pipewire`, `utter-stt-whisper`,
/// found beside the running `utter`) go beside the installed binary, the lockfile records
/// them there, and the installed `utter doctor` then sees no drift. A program that is not
/// there is named with how to get it; uninstall removes what install put.
#[tokio::test]
async fn install_installs_the_plugin_programs_and_the_installed_doctor_sees_no_drift() {
    let sb = Sandbox::new();
    let env = install_env(&sb);
    let at = Installed::in_sandbox(&sb);
    let run = run_utter(&["install", "--user", "--json"], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    let report = run.json();
    let bin_dir = at.binary.parent().unwrap();
    let plugins: Vec<&Value> = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "plugin")
        .collect();
    for program in ["utter-input", "utter-audio-pipewire", "utter-stt-whisper"] {
        let installed = bin_dir.join(program);
        assert!(
            plugins
                .iter()
                .any(|f| f["path"] == installed.to_str().unwrap()),
            "{program} was not installed: {run}"
        );
        assert_eq!(
            sha256_hex(&installed),
            sha256_hex(&bin(program)),
            "{program}"
        );
        assert_eq!(mode(&installed), 0o755);
    }
    assert_eq!(report["missing_plugins"], Value::Array(Vec::new()), "{run}");
    // The lockfile records the installed programs, not the build's.
    let lock = read(&sb.path("state/utter/install.lock"));
    assert!(
        lock.contains(&bin_dir.join("utter-input").display().to_string()),
        "{lock}"
    );
    assert!(!lock.contains("target/debug"), "{lock}");
    // The installed doctor (the service's binary) finds them where the lockfile says.
    let mut doctor = std::process::Command::new(&at.binary);
    doctor
        .args(["doctor", "--json"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::null());
    env.apply(&mut doctor);
    let doctor = tokio::process::Command::from(doctor)
        .output()
        .await
        .expect("the installed utter runs");
    let stdout = String::from_utf8_lossy(&doctor.stdout);
    let doctor: Value = utter_protocol::serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("doctor printed no JSON ({e}): {stdout}"));
    let drift: Vec<&Value> = doctor["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["lock"] == "drift")
        .collect();
    assert!(drift.is_empty(), "drift after install: {drift:#?}");
    // A program the config names that is not beside utter is reported, not invented.
    sb.write(
        "config/utter/config.toml",
        "config_version = 1\n[[plugin]]\nid = \"rules\"\nkind = \"router\"\nentrypoint = [\"utter\", \"plugin\", \"rules\"]\n[[plugin]]\nid = \"x\"\nkind = \"action\"\nentrypoint = [\"utter-nowhere\"]\n",
    );
    let run = run_utter(&["install", "--user", "--json"], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    let missing = &run.json()["missing_plugins"];
    assert_eq!(missing[0]["plugin"], "x", "{run}");
    assert_eq!(missing[0]["program"], "utter-nowhere", "{run}");
    let run = run_utter(&["uninstall", "--user", "--json"], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        !bin_dir.join("utter-input").exists(),
        "uninstall removes the plugins too"
    );
}

/// A file of the person's where a plugin program would go is left as it is (and so is not
/// removed by uninstall), and a plugin run by an interpreter is never copied over theirs.
#[tokio::test]
async fn install_never_takes_over_a_file_of_the_persons() {
    let sb = Sandbox::new();
    let env = install_env(&sb);
    let at = Installed::in_sandbox(&sb);
    let bin_dir = at.binary.parent().unwrap().to_path_buf();
    std::fs::create_dir_all(&bin_dir).unwrap();
    let own = bin_dir.join("utter-input");
    std::fs::write(&own, "#!/bin/sh\necho mine\n").unwrap();
    std::fs::write(bin_dir.join("python3"), "#!/bin/sh\necho my python\n").unwrap();
    sb.write(
        "config/utter/config.toml",
        "config_version = 1\n[[plugin]]\nid = \"rules\"\nkind = \"router\"\nentrypoint = [\"utter\", \"plugin\", \"rules\"]\n[[plugin]]\nid = \"input\"\nkind = \"action\"\nentrypoint = [\"utter-input\"]\n[[plugin]]\nid = \"py\"\nkind = \"action\"\nentrypoint = [\"python3\", \"x.py\"]\n",
    );
    let run = run_utter(&["install", "--user", "--json"], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(run.stdout.contains("left as it is"), "{run}");
    assert_eq!(
        read(&own),
        "#!/bin/sh\necho mine\n",
        "their utter-input is untouched"
    );
    assert_eq!(
        read(&bin_dir.join("python3")),
        "#!/bin/sh\necho my python\n"
    );
    let run = run_utter(&["uninstall", "--user", "--json"], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        own.exists() && bin_dir.join("python3").exists(),
        "uninstall keeps them"
    );
}

#[tokio::test]
async fn a_dry_run_writes_nothing_and_says_what_it_would_do() {
    let sb = Sandbox::new();
    let env = install_env(&sb);
    let at = Installed::in_sandbox(&sb);
    let run = run_utter(&["install", "--user", "--dry-run"], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(run.stdout.contains("dry run: nothing was written"), "{run}");
    // The four files, and the plugin programs of the default config (built beside utter).
    let creates: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("  create "))
        .collect();
    let plugins = creates.iter().filter(|l| l.contains(" plugin ")).count();
    assert_eq!(creates.len() - plugins, 4, "{run}");
    for program in ["utter-input", "utter-audio-pipewire", "utter-stt-whisper"] {
        assert!(
            creates.iter().any(|l| l.ends_with(&format!("/{program}"))),
            "{program}: {run}"
        );
    }
    for p in at.all() {
        assert!(!p.exists(), "{} was written", p.display());
        assert!(run.stdout.contains(p.to_str().unwrap()), "{run}");
    }
    assert!(!at.manifest.exists());
    assert!(systemctl_calls(&sb).is_empty(), "a dry run runs nothing");
}

#[tokio::test]
async fn bin_dir_with_awkward_characters_is_quoted_in_the_unit() {
    let sb = Sandbox::new();
    let env = install_env(&sb);
    let prefix = sb.path("my apps/100%");
    let bin_dir = prefix.join("bin");
    let run = run_utter(
        &[
            "install",
            "--user",
            "--no-systemctl",
            "--bin-dir",
            bin_dir.to_str().unwrap(),
        ],
        &env,
    )
    .await;
    assert_eq!(run.code, Some(0), "{run}");
    assert!(systemctl_calls(&sb).is_empty(), "--no-systemctl: {run}");
    assert!(
        run.stdout
            .contains("systemctl --user daemon-reload && systemctl --user enable --now"),
        "{run}"
    );
    let binary = bin_dir.join("utter");
    let wrapper = prefix.join("libexec/utter/utter-session-env");
    assert!(binary.exists() && wrapper.exists(), "{run}");
    let unit_path = sb.path("config/systemd/user/utter.service");
    let unit = read(&unit_path);
    let quoted = |p: &Path| format!("\"{}\"", p.to_str().unwrap().replace('%', "%%"));
    assert_eq!(
        lines_with(&unit, "ExecStart="),
        vec![format!(
            "ExecStart={} {} daemon",
            quoted(&wrapper),
            quoted(&binary)
        )]
    );
    let dbus = read(&sb.path("data/dbus-1/services/dev.utter.Runner1.service"));
    assert_eq!(
        lines_with(&dbus, "Exec="),
        vec![format!("Exec='{}' daemon", binary.display())]
    );
    // systemd reads the quoted paths back: verify checks that both programs exist.
    if let Some(out) = systemd_analyze_verify(&unit_path, &sb) {
        assert!(
            out.status.success(),
            "systemd-analyze verify: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[tokio::test]
async fn install_and_uninstall_want_user_and_a_home() {
    let sb = Sandbox::new();
    let env = install_env(&sb);
    for cmd in ["install", "uninstall"] {
        let run = run_utter(&[cmd], &env).await;
        assert_eq!(run.code, Some(2), "{run}");
        assert!(run.stderr.contains(&format!("utter {cmd} --user")), "{run}");
    }
    let no_home = env
        .clone()
        .without("HOME")
        .without("XDG_CONFIG_HOME")
        .without("XDG_DATA_HOME")
        .without("XDG_STATE_HOME");
    let run: UtterRun = run_utter(&["install", "--user"], &no_home).await;
    assert_eq!(run.code, Some(4), "{run}");
    assert!(run.stderr.contains("HOME"), "{run}");
    // A broken manifest stops uninstall with advice, and touches nothing.
    sb.write("state/utter/installed.json", "{ broken");
    let run = run_utter(&["uninstall", "--user"], &env).await;
    assert_eq!(run.code, Some(4), "{run}");
    assert!(run.stderr.contains("remove those files by hand"), "{run}");
}

#[test]
fn the_shipped_unit_verifies() {
    // The template as shipped: its wrapper path does not exist here, so verify it with the
    // two paths pointed at programs that do.
    let sb = Sandbox::new();
    let template = read(&repo_root().join("systemd/utter.service"));
    let unit = template.replace(
        "ExecStart=/usr/libexec/utter/utter-session-env /usr/bin/utter daemon",
        &format!(
            "ExecStart={} {} daemon",
            repo_root().join("systemd/utter-session-env").display(),
            bin("utter").display()
        ),
    );
    assert_ne!(unit, template, "the template's ExecStart= line changed");
    for needle in [
        "\nType=notify\n",
        "\nExecReload=/bin/kill -HUP $MAINPID\n",
        "\nRestart=on-failure\n",
        "\nRestartSec=2\n",
        "\nPartOf=graphical-session.target\n",
        "\nAfter=graphical-session.target\n",
        "\nWantedBy=graphical-session.target\n",
        "\nBusName=dev.utter.Runner1\n",
    ] {
        assert!(unit.contains(needle), "{needle:?} missing from the unit");
    }
    let path = sb.write("units/utter.service", &unit);
    if let Some(out) = systemd_analyze_verify(&path, &sb) {
        assert!(
            out.status.success(),
            "systemd-analyze verify: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

// ---------------------------------------------------------------------------------------
// The wrapper

/// A run of `utter-session-env` with `env` as the whole environment (plus PATH with the stub
/// systemctl first, XDG_RUNTIME_DIR = `<sandbox>/run`).
struct WrapperRun {
    pid: u32,
    output: Output,
    took: Duration,
}

impl WrapperRun {
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
    /// The `NAME=value` lines `env` printed.
    fn env(&self) -> BTreeMap<String, String> {
        self.stdout()
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }
}

impl std::fmt::Display for WrapperRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?} after {:?}\n--- stdout\n{}--- stderr\n{}---",
            self.output.status,
            self.took,
            self.stdout(),
            self.stderr()
        )
    }
}

fn spawn_wrapper(sb: &Sandbox, vars: &[(&str, &str)], command: &[&str]) -> Child {
    let stub = stub_systemctl(sb);
    let mut cmd = Command::new("sh");
    cmd.arg(repo_root().join("systemd/utter-session-env"))
        .args(command)
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", stub.display()))
        .env("XDG_RUNTIME_DIR", sb.path("run"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.spawn().expect("sh runs the wrapper")
}

fn finish_wrapper(child: Child, started: Instant) -> WrapperRun {
    let pid = child.id();
    let output = child.wait_with_output().expect("the wrapper finishes");
    WrapperRun {
        pid,
        output,
        took: started.elapsed(),
    }
}

fn run_wrapper(sb: &Sandbox, vars: &[(&str, &str)], command: &[&str]) -> WrapperRun {
    let started = Instant::now();
    finish_wrapper(spawn_wrapper(sb, vars, command), started)
}

/// A real listening unix socket at `path` (what a compositor leaves in XDG_RUNTIME_DIR).
fn listen(path: &Path) -> UnixListener {
    UnixListener::bind(path).unwrap_or_else(|e| panic!("bind {}: {e}", path.display()))
}

#[test]
fn the_wrapper_takes_the_session_from_the_user_manager_and_execs_the_command() {
    let sb = Sandbox::new();
    let _wayland = listen(&sb.path("run/wayland-7"));
    let niri = sb.path("run/niri.wayland-7.4242.sock");
    let _niri = listen(&niri);
    sb.write(
        "manager-env",
        &format!(
            "HOME=/nowhere\nWAYLAND_DISPLAY=wayland-7\nXDG_CURRENT_DESKTOP=niri\nNIRI_SOCKET={}\n",
            niri.display()
        ),
    );
    let run = run_wrapper(&sb, &[("UTTER_WAYLAND_WAIT", "5")], &["env"]);
    assert!(run.output.status.success(), "{run}");
    let env = run.env();
    assert_eq!(
        env.get("WAYLAND_DISPLAY").map(String::as_str),
        Some("wayland-7"),
        "{run}"
    );
    assert_eq!(
        env.get("XDG_CURRENT_DESKTOP").map(String::as_str),
        Some("niri"),
        "{run}"
    );
    assert_eq!(
        env.get("NIRI_SOCKET"),
        Some(&niri.display().to_string()),
        "{run}"
    );
    assert!(
        !env.contains_key("HOME"),
        "only the session variables are taken: {run}"
    );
    assert!(run.stderr().is_empty(), "{run}");
    assert!(run.took < Duration::from_secs(4), "{run}");
    assert!(
        systemctl_calls(&sb)
            .iter()
            .all(|c| c == "--user show-environment"),
        "{:?}",
        systemctl_calls(&sb)
    );

    // It execs: the command runs as the wrapper's own process (what Type=notify needs).
    let run = run_wrapper(&sb, &[], &["sh", "-c", "echo $$"]);
    assert_eq!(run.stdout().trim(), run.pid.to_string(), "{run}");

    // Arguments pass through untouched.
    let run = run_wrapper(&sb, &[], &["printf", "[%s]", "a b", "", "$HOME"]);
    assert_eq!(run.stdout(), "[a b][][$HOME]", "{run}");
}

#[test]
fn the_wrapper_keeps_what_is_already_set_and_finds_sockets_itself() {
    let sb = Sandbox::new();
    let _mine = listen(&sb.path("run/wayland-mine"));
    let _other = listen(&sb.path("run/wayland-7"));
    sb.write(
        "manager-env",
        "WAYLAND_DISPLAY=wayland-7\nXDG_CURRENT_DESKTOP=sway\n",
    );
    let run = run_wrapper(
        &sb,
        &[
            ("WAYLAND_DISPLAY", "wayland-mine"),
            ("UTTER_WAYLAND_WAIT", "5"),
        ],
        &["env"],
    );
    let env = run.env();
    assert_eq!(
        env.get("WAYLAND_DISPLAY").map(String::as_str),
        Some("wayland-mine"),
        "{run}"
    );
    assert_eq!(
        env.get("XDG_CURRENT_DESKTOP").map(String::as_str),
        Some("sway"),
        "{run}"
    );
    assert!(!env.contains_key("NIRI_SOCKET"), "{run}");

    // Nothing set anywhere: the wayland-* socket in XDG_RUNTIME_DIR is found (a lock file
    // is not a socket); under niri its IPC socket for that display too.
    let sb = Sandbox::new();
    sb.write("run/wayland-1.lock", "");
    let _wayland = listen(&sb.path("run/wayland-1"));
    let _niri_other_display = listen(&sb.path("run/niri.wayland-9.1.sock"));
    let niri = sb.path("run/niri.wayland-1.777.sock");
    let _niri = listen(&niri);
    let run = run_wrapper(
        &sb,
        &[("XDG_CURRENT_DESKTOP", "niri"), ("UTTER_WAYLAND_WAIT", "5")],
        &["env"],
    );
    let env = run.env();
    assert_eq!(
        env.get("WAYLAND_DISPLAY").map(String::as_str),
        Some("wayland-1"),
        "{run}"
    );
    assert_eq!(
        env.get("NIRI_SOCKET"),
        Some(&niri.display().to_string()),
        "{run}"
    );
    assert!(run.stderr().is_empty(), "{run}");
}

#[test]
fn the_wrapper_waits_for_a_compositor_that_comes_late() {
    let sb = Sandbox::new();
    let started = Instant::now();
    let child = spawn_wrapper(
        &sb,
        &[("UTTER_WAYLAND_WAIT", "20")],
        &["sh", "-c", "echo started; env"],
    );
    std::thread::sleep(Duration::from_millis(1200));
    // The compositor appears and puts its display into the manager's environment.
    let _wayland = listen(&sb.path("run/wayland-3"));
    sb.write("manager-env", "WAYLAND_DISPLAY=wayland-3\n");
    let run = finish_wrapper(child, started);
    assert!(run.output.status.success(), "{run}");
    assert!(run.took >= Duration::from_millis(1200), "{run}");
    assert!(
        run.took < Duration::from_secs(10),
        "it did not wait the full 20 s: {run}"
    );
    assert_eq!(
        run.env().get("WAYLAND_DISPLAY").map(String::as_str),
        Some("wayland-3"),
        "{run}"
    );
    assert!(run.stderr().is_empty(), "{run}");
}

#[test]
fn without_a_compositor_the_wrapper_starts_the_command_anyway_with_a_warning() {
    let sb = Sandbox::new();
    let run = run_wrapper(&sb, &[("UTTER_WAYLAND_WAIT", "1")], &["echo", "ran"]);
    assert!(run.output.status.success(), "{run}");
    assert_eq!(run.stdout(), "ran\n", "{run}");
    assert!(run.stderr().contains("gave up after 1s"), "{run}");
    assert!(run.stderr().contains("starting anyway"), "{run}");
    assert!(run.took >= Duration::from_millis(900), "{run}");
    assert!(run.took < Duration::from_secs(8), "{run}");

    // The same for a display whose socket never appears, and for a bad wait value.
    let run = run_wrapper(
        &sb,
        &[
            ("UTTER_WAYLAND_WAIT", "1"),
            ("WAYLAND_DISPLAY", "wayland-gone"),
        ],
        &["echo", "ran"],
    );
    assert_eq!(run.stdout(), "ran\n", "{run}");
    assert!(run.stderr().contains("wayland-gone"), "{run}");
    let _wayland = listen(&sb.path("run/wayland-0"));
    let run = run_wrapper(&sb, &[("UTTER_WAYLAND_WAIT", "soon")], &["echo", "ran"]);
    assert_eq!(run.stdout(), "ran\n", "{run}");
    assert!(run.stderr().contains("UTTER_WAYLAND_WAIT=soon"), "{run}");

    // No command at all is a usage error.
    let run = run_wrapper(&sb, &[], &[]);
    assert_eq!(run.output.status.code(), Some(2), "{run}");
}

// ---------------------------------------------------------------------------------------
// utter daemon under a (stand-in) service manager

/// A child process killed when the test ends, however it ends.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl KillOnDrop {
    fn signal(&self, signal: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.0.id() as i32), signal)
            .expect("signal the daemon");
    }

    /// Wait up to `limit` for the exit code.
    fn wait(&mut self, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.0.try_wait().expect("try_wait") {
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "the process did not exit within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The next datagram on `socket`, as text.
fn next_message(socket: &UnixDatagram, log: &Path) -> String {
    let mut buf = vec![0u8; 64 * 1024];
    match socket.recv(&mut buf) {
        Ok(n) => String::from_utf8_lossy(&buf[..n]).into_owned(),
        Err(e) => panic!(
            "no notification ({e}); the daemon's stderr:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        ),
    }
}

/// A config with only the rules router (or nothing), outside XDG_CONFIG_HOME.
fn daemon_config(sb: &Sandbox, with_rules: bool) -> PathBuf {
    let mut text = String::from("config_version = 1\n");
    if with_rules {
        text.push_str(&format!(
            "\n[[plugin]]\nid = \"rules\"\nkind = \"router\"\nentrypoint = [{:?}, \"plugin\", \"rules\"]\n",
            bin("utter").display().to_string()
        ));
    }
    sb.write("daemon.toml", &text)
}

fn daemon_command(sb: &Sandbox, config: &Path) -> Command {
    let mut cmd = Command::new(bin("utter"));
    cmd.args(["daemon", "--no-dbus", "--socket"])
        .arg(sb.path("run/runner.sock"))
        .arg("--config")
        .arg(config)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    sb.env(None).apply(&mut cmd);
    cmd
}

#[test]
fn the_daemon_notifies_ready_reloading_and_stopping() {
    let sb = Sandbox::new();
    let notify_path = sb.path("run/notify.sock");
    let notify = UnixDatagram::bind(&notify_path).expect("bind NOTIFY_SOCKET");
    notify
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let log = sb.path("daemon.log");
    let config = daemon_config(&sb, false);
    let mut cmd = daemon_command(&sb, &config);
    cmd.env("NOTIFY_SOCKET", &notify_path)
        .stderr(std::fs::File::create(&log).unwrap());
    let mut daemon = KillOnDrop(cmd.spawn().expect("utter daemon starts"));

    let ready = next_message(&notify, &log);
    assert_eq!(ready, "READY=1\nSTATUS=ready\n");

    daemon.signal(nix::sys::signal::Signal::SIGHUP);
    let reloading = next_message(&notify, &log);
    let lines: Vec<&str> = reloading.lines().collect();
    assert_eq!(lines.first(), Some(&"RELOADING=1"), "{reloading:?}");
    let usec = lines
        .iter()
        .find_map(|l| l.strip_prefix("MONOTONIC_USEC="))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no MONOTONIC_USEC in {reloading:?}"));
    assert!(usec > 0);
    assert_eq!(next_message(&notify, &log), "READY=1\nSTATUS=ready\n");

    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(next_message(&notify, &log), "STOPPING=1\nSTATUS=stopping\n");
    let code = daemon.wait(Duration::from_secs(30));
    assert_eq!(
        code,
        Some(0),
        "stderr:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

// ---------------------------------------------------------------------------------------
// Things that need root: a private mount namespace (journald), a real systemd --user

/// One journal entry in the native protocol: `NAME=value\n`, or `NAME\n` + 64-bit LE
/// length + value + `\n` for values that need it.
fn parse_journal_entry(mut data: &[u8]) -> Vec<(String, String)> {
    let mut fields = Vec::new();
    while !data.is_empty() {
        let Some(end) = data.iter().position(|&b| b == b'\n' || b == b'=') else {
            break;
        };
        let name = String::from_utf8_lossy(&data[..end]).into_owned();
        if data[end] == b'=' {
            let rest = &data[end + 1..];
            let stop = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
            fields.push((name, String::from_utf8_lossy(&rest[..stop]).into_owned()));
            data = rest.get(stop + 1..).unwrap_or_default();
        } else {
            let rest = &data[end + 1..];
            if rest.len() < 8 {
                break;
            }
            let len = u64::from_le_bytes(rest[..8].try_into().unwrap()) as usize;
            let value = rest.get(8..8 + len).unwrap_or_default();
            fields.push((name, String::from_utf8_lossy(value).into_owned()));
            data = rest.get(8 + len + 1..).unwrap_or_default();
        }
    }
    fields
}

/// `utter daemon` in a private mount namespace whose `/run` is an empty tmpfs (so no real
/// journal is reached), with stderr a file named by JOURNAL_STREAM; when `journal` is given,
/// that datagram socket is bind-mounted at /run/systemd/journal/socket.
fn daemon_in_namespace(sb: &Sandbox, journal: Option<&Path>, log: &Path) -> KillOnDrop {
    let stderr = std::fs::File::create(log).unwrap();
    let meta = stderr.metadata().unwrap();
    let config = daemon_config(sb, true);
    let daemon = daemon_command(sb, &config);
    let mut script = String::from("set -e\nmount -t tmpfs tmpfs /run\n");
    if journal.is_some() {
        script.push_str(
            "mkdir -p /run/systemd/journal\n\
             touch /run/systemd/journal/socket\n\
             mount --bind \"$JOURNAL_SOCKET_FOR_TEST\" /run/systemd/journal/socket\n",
        );
    }
    script.push_str("exec \"$@\"\n");
    let mut cmd = Command::new("unshare");
    cmd.args(["-m", "sh", "-c", &script, "sh"])
        .arg(daemon.get_program())
        .args(daemon.get_args())
        .env_clear();
    for (k, v) in daemon.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    if let Some(socket) = journal {
        cmd.env("JOURNAL_SOCKET_FOR_TEST", socket);
    }
    cmd.env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    KillOnDrop(cmd.spawn().expect("unshare runs"))
}

#[test]
fn under_systemd_the_daemon_logs_to_the_journal_with_fields() {
    if let Some(why) = cannot_unshare() {
        eprintln!("SKIP journald logging: {why}");
        return;
    }
    let sb = Sandbox::new();
    let journal_path = sb.path("run/journal.sock");
    let journal = UnixDatagram::bind(&journal_path).expect("bind the stand-in journal");
    journal
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let log = sb.path("daemon.log");
    let mut daemon = daemon_in_namespace(&sb, Some(&journal_path), &log);

    let mut entries: Vec<BTreeMap<String, String>> = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    while !entries
        .iter()
        .any(|e| e.get("MESSAGE").is_some_and(|m| m == "ready"))
    {
        let n = journal
            .recv(&mut buf)
            .unwrap_or_else(|e| panic!("no journal entry ({e}); stderr:\n{}", read(&log)));
        if n > 0 {
            entries.push(parse_journal_entry(&buf[..n]).into_iter().collect());
        }
    }
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(
        daemon.wait(Duration::from_secs(30)),
        Some(0),
        "{}",
        read(&log)
    );

    let plugin = entries
        .iter()
        .find(|e| e.get("UTTER_PLUGIN").is_some_and(|p| p == "rules"))
        .unwrap_or_else(|| panic!("no entry with UTTER_PLUGIN=rules: {entries:#?}"));
    assert_eq!(
        plugin.get("UTTER_EPOCH").map(String::as_str),
        Some("0"),
        "{plugin:?}"
    );
    assert_eq!(
        plugin.get("SYSLOG_IDENTIFIER").map(String::as_str),
        Some("utter")
    );
    assert!(plugin.contains_key("PRIORITY"), "{plugin:?}");
    let starting = entries
        .iter()
        .find(|e| e.get("MESSAGE").is_some_and(|m| m == "starting"))
        .unwrap_or_else(|| panic!("no `starting` entry: {entries:#?}"));
    assert!(starting.contains_key("UTTER_SOCKET"), "{starting:?}");
    // Nothing went to stderr as plain log lines.
    let stderr = read(&log);
    assert!(!stderr.contains("ready"), "logged to stderr too:\n{stderr}");
}

#[test]
fn without_a_journal_socket_the_daemon_logs_to_stderr() {
    if let Some(why) = cannot_unshare() {
        eprintln!("SKIP journald fallback: {why}");
        return;
    }
    let sb = Sandbox::new();
    let log = sb.path("daemon.log");
    let mut daemon = daemon_in_namespace(&sb, None, &log);
    let up = {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains("ready") || Instant::now() > deadline {
                break text.contains("ready");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    let code = daemon.wait(Duration::from_secs(30));
    let stderr = read(&log);
    assert!(up, "never logged `ready`:\n{stderr}");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("journald's socket cannot be reached"),
        "{stderr}"
    );
    assert!(stderr.contains("plugin=rules epoch=0"), "{stderr}");
}

fn ok(out: &Output) -> bool {
    out.status.success()
}

fn show(out: &Output) -> String {
    format!(
        "{:?}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test]
async fn a_real_user_manager_starts_reloads_and_stops_the_installed_unit() {
    let sb = Sandbox::new();
    let manager = match UserManager::start(&sb) {
        Ok(m) => m,
        Err(why) => {
            eprintln!("SKIP real systemd --user: {why}");
            return;
        }
    };
    // The installer talks to this manager (real systemctl, the sandbox's runtime dir).
    let env = sb.env(None).with("XDG_STATE_HOME", sb.path("state"));
    let run = run_utter(&["install", "--user", "--json"], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert_eq!(run.json()["daemon_reload"]["ok"], true, "{run}");
    let at = Installed::in_sandbox(&sb);

    // A compositor socket, announced in the manager's environment as a session would.
    let _wayland = listen(&sb.path("run/wayland-test"));
    assert!(ok(&manager.systemctl(&[
        "set-environment",
        "WAYLAND_DISPLAY=wayland-test"
    ])));

    let start = manager.systemctl(&["start", "utter.service"]);
    assert!(
        ok(&start),
        "start: {}\nmanager log:\n{}",
        show(&start),
        std::fs::read_to_string(sb.path("systemd-user.log")).unwrap_or_default()
    );
    assert_eq!(manager.property("ActiveState"), "active");
    assert_eq!(manager.property("StatusText"), "ready");
    assert_eq!(
        manager.property("FragmentPath"),
        at.unit.display().to_string()
    );
    // The main process is the installed binary (the wrapper exec'd it), and it got the
    // session's display.
    let pid = manager.property("MainPID");
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).expect("the main process exists");
    assert_eq!(exe, at.binary);
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    assert!(
        environ
            .split(|&b| b == 0)
            .any(|v| v == b"WAYLAND_DISPLAY=wayland-test"),
        "no WAYLAND_DISPLAY in the daemon's environment"
    );

    let reload = manager.systemctl(&["reload", "utter.service"]);
    assert!(ok(&reload), "reload: {}", show(&reload));
    assert!(
        common::wait_for(Duration::from_secs(20), || {
            manager.property("ActiveState") == "active" && manager.property("StatusText") == "ready"
        })
        .await,
        "not active and ready after reload"
    );
    assert_eq!(
        manager.property("MainPID"),
        pid,
        "a reload keeps the process"
    );

    let stop = manager.systemctl(&["stop", "utter.service"]);
    assert!(ok(&stop), "stop: {}", show(&stop));
    assert_eq!(manager.property("ActiveState"), "inactive");
    assert_eq!(manager.property("Result"), "success");

    // D-Bus activation through systemd: a call to the name starts utter.service (the
    // activation file's SystemdService=), when the manager runs a session bus (Debian's
    // dbus-user-session gives it dbus.socket).
    if String::from_utf8_lossy(&manager.systemctl(&["is-active", "dbus.socket"]).stdout).trim()
        == "active"
    {
        let ping = Command::new("busctl")
            .args(["--user", "--timeout=60", "call", "dev.utter.Runner1", "/"])
            .args(["org.freedesktop.DBus.Peer", "Ping"])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("XDG_RUNTIME_DIR", sb.path("run"))
            .env(
                "DBUS_SESSION_BUS_ADDRESS",
                format!("unix:path={}", sb.path("run/bus").display()),
            )
            .output()
            .expect("busctl runs");
        assert!(ok(&ping), "activation call: {}", show(&ping));
        // The bus name is owned before READY=1 (sent once every plugin has started), so
        // the unit may still be "activating" for a moment; it must become "active".
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while manager.property("ActiveState") == "activating"
            && std::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(manager.property("ActiveState"), "active");
        let stop = manager.systemctl(&["stop", "utter.service"]);
        assert!(ok(&stop), "stop: {}", show(&stop));
    } else {
        eprintln!("SKIP D-Bus activation through systemd: the user manager has no dbus.socket");
    }

    // Uninstall disables and reloads through the same manager.
    let run = run_utter(&["uninstall", "--user", "--json"], &env).await;
    assert_eq!(run.code, Some(0), "{run}");
    let calls = run.json()["systemctl"].clone();
    assert_eq!(calls[0]["ok"], true, "{run}");
    assert_eq!(calls[1]["ok"], true, "{run}");
    assert_eq!(manager.property("LoadState"), "not-found");
}
