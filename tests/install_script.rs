//! `scripts/install.sh`: the distribution it detects from an `os-release` file decides the
//! package manager and the package names it installs (dry runs against the fixture files of
//! Debian, Ubuntu, Fedora, Rocky, Arch, EndeavourOS, openSUSE and an unknown one), and bad
//! usage is refused with the documented exit codes. Its real apt path (installing a built
//! `.deb`) runs in CI (`tests/package.sh`).

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

fn install_sh(args: &[&str]) -> Run {
    let out = Command::new("bash")
        .arg(root().join("scripts/install.sh"))
        .args(args)
        .env("HOME", "/nonexistent-home")
        .output()
        .expect("bash runs");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn fixture(name: &str) -> String {
    root()
        .join("tests/fixtures/os-release")
        .join(name)
        .display()
        .to_string()
}

/// The lines the script would run (those it prints with a leading "+ ").
fn commands(run: &Run) -> Vec<String> {
    run.stdout
        .lines()
        .filter_map(|l| l.strip_prefix("+ "))
        .map(str::to_owned)
        .collect()
}

#[test]
fn each_distribution_gets_its_own_package_manager() {
    // (fixture, the first word of the install command, a package name only that family uses)
    let cases = [
        ("debian-12", "apt-get install", "libpipewire-0.3-dev"),
        ("ubuntu-24.04", "apt-get install", "libpipewire-0.3-dev"),
        ("fedora-41", "dnf install", "pipewire-devel"),
        ("rocky-9", "dnf install", "pipewire-devel"),
        ("arch", "pacman -S --needed", "base-devel"),
        ("endeavouros", "pacman -S --needed", "base-devel"),
        ("opensuse-tumbleweed", "zypper", "pipewire-devel"),
    ];
    for (name, tool, only) in cases {
        let run = install_sh(&["--dry-run", "--yes", "--os-release", &fixture(name)]);
        assert_eq!(run.code, Some(0), "{name}: {run}");
        let commands = commands(&run);
        let install = commands
            .iter()
            .find(|c| c.contains(tool) && c.contains("bubblewrap"))
            .unwrap_or_else(|| panic!("{name}: no `{tool}` line: {run}"));
        assert!(install.contains(only), "{name}: {install}");
        // Only this family's tool, never another's.
        for other in ["apt-get", "dnf", "pacman", "zypper"] {
            if !tool.starts_with(other) {
                assert!(
                    !commands.iter().any(|c| c.starts_with(other)),
                    "{name} runs {other}: {run}"
                );
            }
        }
        // Without --package it builds from this tree and installs for the user.
        assert!(
            commands
                .iter()
                .any(|c| c.starts_with("cargo build --release")),
            "{run}"
        );
        assert!(
            commands.iter().any(|c| c.ends_with("utter install --user")),
            "{run}"
        );
        assert!(run.stdout.contains("dry run; nothing was changed"), "{run}");
    }
}

#[test]
fn yes_is_passed_to_each_package_manager_in_its_own_words() {
    for (name, flag) in [
        ("debian-12", "-y"),
        ("fedora-41", "-y"),
        ("arch", "--noconfirm"),
        ("opensuse-tumbleweed", "--non-interactive"),
    ] {
        let with = install_sh(&["--dry-run", "--yes", "--os-release", &fixture(name)]);
        let without = install_sh(&["--dry-run", "--os-release", &fixture(name)]);
        let has = |run: &Run| {
            commands(run)
                .iter()
                .any(|c| c.contains("bubblewrap") && c.split(' ').any(|w| w == flag))
        };
        assert!(has(&with), "{name} --yes: {with}");
        assert!(!has(&without), "{name}: {without}");
    }
}

#[test]
fn a_package_file_is_installed_instead_of_a_build() {
    let dir = tempfile::tempdir().unwrap();
    let deb = dir.path().join("utter_0.1.0-1_amd64.deb");
    let rpm = dir.path().join("utter-0.1.0-1.x86_64.rpm");
    std::fs::write(&deb, b"not really a package").unwrap();
    std::fs::write(&rpm, b"not really a package").unwrap();
    let deb = deb.display().to_string();
    let rpm = rpm.display().to_string();

    let run = install_sh(&[
        "--dry-run",
        "--os-release",
        &fixture("debian-12"),
        "--package",
        &deb,
    ]);
    assert_eq!(run.code, Some(0), "{run}");
    let lines = commands(&run);
    assert!(
        lines
            .iter()
            .any(|c| c.starts_with("apt-get install") && c.ends_with(&deb)),
        "{run}"
    );
    assert!(!lines.iter().any(|c| c.starts_with("cargo")), "{run}");
    // The build tools are not needed for a package.
    assert!(
        !lines.iter().any(|c| c.contains("libpipewire-0.3-dev")),
        "{run}"
    );

    let run = install_sh(&[
        "--dry-run",
        "--os-release",
        &fixture("fedora-41"),
        "--package",
        &rpm,
    ]);
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        commands(&run)
            .iter()
            .any(|c| c.starts_with("dnf install") && c.ends_with(&rpm)),
        "{run}"
    );

    // A .deb on Fedora does not fit: refused before anything runs.
    let run = install_sh(&[
        "--os-release",
        &fixture("fedora-41"),
        "--no-system-packages",
        "--package",
        &deb,
    ]);
    assert_eq!(run.code, Some(1), "{run}");
    assert!(run.stderr.contains("does not fit dnf"), "{run}");
}

#[test]
fn unknown_distributions_and_bad_usage_are_refused_with_what_to_do() {
    let run = install_sh(&["--dry-run", "--os-release", &fixture("gentoo")]);
    assert_eq!(run.code, Some(3), "{run}");
    assert!(run.stderr.contains("Gentoo Linux"), "{run}");
    assert!(run.stderr.contains("--no-system-packages"), "{run}");
    assert!(commands(&run).is_empty(), "{run}");

    let run = install_sh(&["--os-release", "/nonexistent/os-release"]);
    assert_eq!(run.code, Some(3), "{run}");
    assert!(run.stderr.contains("cannot read"), "{run}");

    let run = install_sh(&["--frobnicate"]);
    assert_eq!(run.code, Some(2), "{run}");
    assert!(run.stderr.contains("--help"), "{run}");

    let run = install_sh(&["--package"]);
    assert_eq!(run.code, Some(2), "{run}");

    let run = install_sh(&["--help"]);
    assert_eq!(run.code, Some(0), "{run}");
    assert!(run.stdout.contains("--dry-run"), "{run}");
}

#[test]
fn hostile_os_release_values_are_read_not_run() {
    // os-release is read for its keys only: a value with shell syntax is not executed.
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let file = dir.path().join("os-release");
    std::fs::write(
        &file,
        format!(
            "ID=\"$(touch {m})\"\nID_LIKE=`touch {m}`; debian\nPRETTY_NAME=\"x; touch {m}\"\n",
            m = marker.display()
        ),
    )
    .unwrap();
    let run = install_sh(&["--dry-run", "--os-release", &file.display().to_string()]);
    assert!(!Path::new(&marker).exists(), "the file was executed: {run}");
    // ID_LIKE's words are matched one by one; "debian" is among them.
    assert_eq!(run.code, Some(0), "{run}");
    assert!(run.stdout.contains("using apt"), "{run}");
}

#[test]
fn only_regular_files_are_read_and_a_missing_package_is_refused_first() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    // A FIFO, a device or a directory would block or confuse the reader: refused at once.
    for path in [
        fifo.display().to_string(),
        "/dev/zero".to_owned(),
        dir.path().display().to_string(),
    ] {
        let run = install_sh(&["--dry-run", "--os-release", &path]);
        assert_eq!(run.code, Some(2), "{path}: {run}");
        assert!(run.stderr.contains("not a regular file"), "{run}");
    }
    // A package that is not there: refused before any command is printed.
    let run = install_sh(&[
        "--dry-run",
        "--os-release",
        &fixture("debian-12"),
        "--package",
        "/nonexistent/utter.deb",
    ]);
    assert_eq!(run.code, Some(2), "{run}");
    assert!(commands(&run).is_empty(), "{run}");
}
