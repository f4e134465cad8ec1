#!/usr/bin/env bash
# Install Utter on this machine.
#
# It reads /etc/os-release to tell the distribution, installs the system packages Utter uses
# with that distribution's own tool (apt on Debian and Ubuntu, dnf on Fedora and RHEL-likes,
# pacman on Arch, zypper on openSUSE), then either installs a package file you give it
# (--package utter_*.deb or utter-*.rpm) or builds Utter from this source tree with cargo and
# installs it for your user (~/.local/bin, the systemd user unit, D-Bus activation).
# Every command it runs is printed first, prefixed with "+"; --dry-run prints them and runs
# nothing. It ends with a summary of what it did.
#
# Usage: scripts/install.sh [--dry-run] [--package FILE] [--no-system-packages]
#                           [--os-release FILE] [--yes]
set -euo pipefail

usage() {
    cat <<'EOF'
scripts/install.sh: install Utter (system packages, then the package file or a source build)

Options:
  --dry-run               print every command it would run; run nothing
  --package FILE          install this .deb or .rpm (built with cargo-deb / cargo-generate-rpm)
                          instead of building from source
  --no-system-packages    skip the distribution's packages (you installed them yourself)
  --os-release FILE       read the distribution from FILE instead of /etc/os-release
  --yes                   answer yes to the package manager's questions
  -h, --help              this text

Supported: Debian, Ubuntu and their derivatives (apt), Fedora, RHEL, CentOS Stream, Rocky,
AlmaLinux (dnf), Arch, Manjaro, EndeavourOS (pacman), openSUSE Tumbleweed and Leap (zypper).
Exit status: 0 done, 1 a step failed, 2 bad usage, 3 distribution not supported.
EOF
}

dry_run=0
package=""
system_packages=1
os_release=/etc/os-release
assume_yes=0
while (($#)); do
    case "$1" in
    --dry-run) dry_run=1 ;;
    --package)
        [[ $# -ge 2 ]] || { echo "install.sh: --package needs a file" >&2; exit 2; }
        package=$2
        shift
        ;;
    --no-system-packages) system_packages=0 ;;
    --os-release)
        [[ $# -ge 2 ]] || { echo "install.sh: --os-release needs a file" >&2; exit 2; }
        os_release=$2
        shift
        ;;
    --yes | -y) assume_yes=1 ;;
    -h | --help)
        usage
        exit 0
        ;;
    *)
        echo "install.sh: unknown option '$1' (see --help)" >&2
        exit 2
        ;;
    esac
    shift
done

source_dir=$(cd "$(dirname "$0")/.." && pwd)
done_steps=()

# Print a command, then run it unless this is a dry run.
run() {
    printf '+'
    printf ' %q' "$@"
    printf '\n'
    if ((dry_run == 0)); then
        "$@"
    fi
}

# As root the command runs as it is; otherwise through sudo (printed as such).
as_root() {
    if [[ $(id -u) -eq 0 ]]; then
        run "$@"
    else
        run sudo "$@"
    fi
}

# --- What was asked ----------------------------------------------------------------------
# Checked before anything runs. A package file must be one.
if [[ -n $package && ! -f $package ]]; then
    echo "install.sh: --package $package is not a file (build one with cargo deb or cargo generate-rpm, see docs/src/packages.md)" >&2
    exit 2
fi
# os-release is read, never run; only a regular file (or a link to one) is read at all, so a
# FIFO or a device cannot make the script wait for ever.
if [[ -e $os_release && ! -f $os_release ]]; then
    echo "install.sh: $os_release is not a regular file" >&2
    exit 2
fi

# --- Which distribution -------------------------------------------------------------------
if [[ ! -r $os_release ]]; then
    echo "install.sh: cannot read $os_release, so the distribution is unknown; install the packages listed in README.md yourself and run with --no-system-packages" >&2
    exit 3
fi
# os-release is a list of shell-compatible assignments (os-release(5)); read only the two
# keys, without running the file.
os_value() {
    local line value
    line=$(grep -E "^$1=" "$os_release" | tail -n 1 || true)
    value=${line#*=}
    value=${value#\"}
    value=${value%\"}
    value=${value#\'}
    value=${value%\'}
    printf '%s' "$value"
}
os_id=$(os_value ID)
os_like=$(os_value ID_LIKE)
os_name=$(os_value PRETTY_NAME)
[[ -n $os_name ]] || os_name=$os_id

family=""
# The words of ID and ID_LIKE, split but never globbed.
set -f
for id in $os_id $os_like; do
    case "$id" in
    debian | ubuntu) family=apt ;;
    fedora | rhel | centos | rocky | almalinux) family=dnf ;;
    arch | archlinux) family=pacman ;;
    opensuse* | suse | sles) family=zypper ;;
    esac
    [[ -n $family ]] && break
done
set +f
if [[ -z $family ]]; then
    echo "install.sh: $os_name (ID=$os_id${os_like:+, ID_LIKE=$os_like}) is not one this script knows; install the packages listed in README.md with your package manager and run it again with --no-system-packages" >&2
    exit 3
fi
echo "install.sh: $os_name: using $family"

# --- The distribution's packages ------------------------------------------------------------
# At run time: bubblewrap (plugin sandboxes), PipeWire (the microphone), espeak-ng (spoken
# replies), xdg-utils (opening URLs), AT-SPI (inside apps), wtype (typing fallback).
# To build from source as well: a C/C++ toolchain, cmake and clang (CTranslate2 and the
# PipeWire bindings), pkg-config and the PipeWire headers.
case "$family" in
apt)
    runtime=(bubblewrap pipewire espeak-ng xdg-utils at-spi2-core wtype dbus-user-session)
    build=(build-essential cmake clang libclang-dev pkg-config libpipewire-0.3-dev libspa-0.2-dev)
    update=(apt-get update)
    install=(apt-get install --no-install-recommends)
    ((assume_yes)) && install+=(-y)
    ;;
dnf)
    runtime=(bubblewrap pipewire espeak-ng xdg-utils at-spi2-core wtype)
    build=(gcc gcc-c++ make cmake clang clang-devel pkgconf-pkg-config pipewire-devel)
    update=()
    install=(dnf install)
    ((assume_yes)) && install+=(-y)
    ;;
pacman)
    runtime=(bubblewrap pipewire espeak-ng xdg-utils at-spi2-core wtype)
    build=(base-devel cmake clang pkgconf)
    update=()
    install=(pacman -S --needed)
    ((assume_yes)) && install+=(--noconfirm)
    ;;
zypper)
    runtime=(bubblewrap pipewire espeak-ng xdg-utils at-spi2-core wtype)
    build=(gcc gcc-c++ make cmake clang clang-devel pkg-config pipewire-devel)
    update=()
    install=(zypper install)
    ((assume_yes)) && install=(zypper --non-interactive install)
    ;;
esac

wanted=("${runtime[@]}")
[[ -z $package ]] && wanted+=("${build[@]}")
if ((system_packages)); then
    if ((${#update[@]})); then
        as_root "${update[@]}"
    fi
    as_root "${install[@]}" "${wanted[@]}"
    done_steps+=("installed the system packages with $family: ${wanted[*]}")
else
    done_steps+=("skipped the system packages (--no-system-packages)")
fi

# --- Utter itself --------------------------------------------------------------------------
if [[ -n $package ]]; then
    case "$package:$family" in
    *.deb:apt)
        # apt resolves the package's own dependencies; a path needs the ./ form.
        [[ $package == /* || $package == ./* ]] || package=./$package
        as_root "${install[@]}" "$package"
        ;;
    *.rpm:dnf | *.rpm:zypper)
        as_root "${install[@]}" "$package"
        ;;
    *)
        echo "install.sh: a ${package##*.} file does not fit $family; build from source instead (leave out --package)" >&2
        exit 1
        ;;
    esac
    done_steps+=("installed $package")
    utter=/usr/bin/utter
    unit_hint="systemctl --user enable --now utter.service"
else
    if ! command -v cargo >/dev/null && ((dry_run == 0)); then
        echo "install.sh: cargo is not installed; install Rust from https://rustup.rs (or your distribution's rust package) and run this again" >&2
        exit 1
    fi
    run cargo build --release --manifest-path "$source_dir/Cargo.toml" \
        -p utter -p utter-input -p utter-audio-pipewire -p utter-stt-whisper
    utter=$source_dir/target/release/utter
    # `utter install --user` puts the binary, the wrapper, the unit and the D-Bus activation
    # file in place and records them; the plugin programs go beside the binary.
    run "$utter" install --user
    for plugin in utter-input utter-audio-pipewire utter-stt-whisper; do
        run install -m 0755 "$source_dir/target/release/$plugin" "$HOME/.local/bin/$plugin"
    done
    done_steps+=("built Utter from $source_dir and installed it for $(id -un) in ~/.local/bin")
    utter=$HOME/.local/bin/utter
    unit_hint="utter status   (the unit is enabled with the graphical session)"
fi

echo
if ((dry_run)); then
    echo "install.sh: dry run; nothing was changed. It would have:"
else
    echo "install.sh: done. It:"
fi
for step in "${done_steps[@]}"; do
    echo "  - $step"
done
echo "Next: $unit_hint"
echo "      $utter doctor      (checks the install, the compositor, the microphone and the model)"
echo "      $utter models pull tiny.en   (the speech model, for voice)"
