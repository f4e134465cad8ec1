#!/usr/bin/env bash
# Build the .deb and the .rpm, check them, and install, run and remove the .deb on this
# (Debian) machine through scripts/install.sh: what a person gets from a package.
#
#   tests/package.sh [--profile dev|release]     (or --tools: only install the packagers)
#
# CI packages the binaries tests/run.sh already built (--profile dev, the default here), so
# CTranslate2 is not built a second time; a release package is `--profile release`. Needs
# root (dpkg -i, apt). Installs what it uses: cargo-deb and cargo-generate-rpm from
# crates.io, lintian, rpm and systemd from Debian.
set -euo pipefail
cd "$(dirname "$0")/.."

profile=dev
tools_only=false
if [[ ${1:-} == --profile ]]; then
    profile=${2:?--profile needs dev or release}
elif [[ ${1:-} == --tools ]]; then
    # Only install the packagers (CI does it beside the test stage, so that compiling them
    # overlaps the tests' waiting).
    tools_only=true
fi
case "$profile" in
dev) dir=debug ;;
release) dir=release ;;
*)
    echo "tests/package.sh: --profile is dev or release" >&2
    exit 2
    ;;
esac

step() { printf '\n== %s\n' "$*"; }
fail() {
    echo "tests/package.sh: FAILED: $*" >&2
    exit 1
}

install_tools() {
    # The packagers, at the versions this script was written against (their builds are
    # cached in ~/.cargo/bin by cargo install). cargo-deb is built unoptimised (--debug):
    # it compiles in 44 CPU seconds instead of 112 and packages as fast (its compression is
    # liblzma's C). cargo-generate-rpm is not: unoptimised, its digests and archive of the
    # 160 MB payload take 90 s instead of a few, on the critical path.
    command -v cargo-deb >/dev/null || cargo install --locked --quiet --debug cargo-deb --version '^3.6'
    command -v cargo-generate-rpm >/dev/null ||
        cargo install --locked --quiet cargo-generate-rpm --version '^0.21'
}
if $tools_only; then
    install_tools
    exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
    fail "run as root (it installs and removes the package)"
fi
export DEBIAN_FRONTEND=noninteractive
need=()
for p in lintian rpm systemd dpkg-dev; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if ((${#need[@]})); then
    step "installing ${need[*]}"
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
install_tools

bins=(utter utter-input utter-audio-pipewire utter-stt-whisper utter-tts-espeak utter-settings)
step "building the binaries ($profile profile)"
# The same command tests/run.sh builds with (dev): nothing is compiled again, and the
# features are unified as they were there.
if [[ $profile == dev ]]; then
    cargo build --workspace --bins --tests
else
    cargo build --profile "$profile" --workspace --bins
fi
for b in "${bins[@]}"; do
    [[ -x target/$dir/$b ]] || fail "target/$dir/$b was not built"
done

step "cargo deb"
rm -rf target/debian
cargo deb --no-build --strip --profile "$profile" -p utter
deb=$(ls target/debian/utter_*.deb)
echo "$deb ($(du -h "$deb" | cut -f1))"
dpkg-deb --info "$deb" | sed -n '/Package:/,$p'
contents=$(dpkg-deb --contents "$deb")
for path in usr/bin/utter usr/bin/utter-input usr/bin/utter-audio-pipewire usr/bin/utter-stt-whisper \
    usr/bin/utter-tts-espeak usr/libexec/utter/utter-session-env usr/lib/systemd/user/utter.service \
    usr/share/dbus-1/services/dev.utter.Runner1.service usr/share/utter/noctalia/utter/manifest.json \
    usr/share/utter/noctalia/utter/Main.qml usr/share/doc/utter/copyright; do
    grep -q " \./$path\$" <<<"$contents" || fail "$path is not in $deb"
done

step "lintian (errors fail this script; warnings are printed)"
lintian_out=$(lintian --tag-display-limit 0 "$deb" 2>&1 || true)
echo "$lintian_out"
if grep -q '^E:' <<<"$lintian_out"; then
    fail "lintian reported errors"
fi

step "cargo generate-rpm"
rm -rf target/generate-rpm target/rpm-stage
# The binaries stripped, as in the .deb (`cargo deb --strip`). The assets name
# target/release; with --target-dir the staged copies stand in for them.
mkdir -p "target/rpm-stage/$dir" target/generate-rpm
for b in "${bins[@]}"; do
    strip -o "target/rpm-stage/$dir/$b" "target/$dir/$b"
done
# A release package has the default payload, zstd at level 19. A dev package's stripped
# binaries are still 160 MB, which zstd -19 takes minutes of CPU over (the unstripped ones
# took eight); CI's dev package is gzip'd, in seconds.
compress=()
[[ $profile == dev ]] && compress=(--payload-compress gzip)
cargo generate-rpm -p . --target-dir target/rpm-stage --profile "$profile" -o target/generate-rpm/ \
    "${compress[@]}" || fail "cargo generate-rpm"
rpm_file=$(ls target/generate-rpm/utter-*.rpm)
# The header's and the payload's digests (the package is not signed).
rpm --checksig --nosignature "$rpm_file" || fail "$rpm_file does not verify"
rpm -qip "$rpm_file" 2>/dev/null | head -n 12
rpm_list=$(rpm -qlp "$rpm_file" 2>/dev/null)
echo "$rpm_list"
for path in /usr/bin/utter /usr/lib/systemd/user/utter.service /usr/share/dbus-1/services/dev.utter.Runner1.service \
    /usr/libexec/utter/utter-session-env /usr/share/utter/noctalia/utter/manifest.json; do
    grep -qx "$path" <<<"$rpm_list" || fail "$path is not in $rpm_file"
done

step "scripts/install.sh --package (the apt path on this machine)"
# The runtime packages are installed by the script; the build tools are not needed.
scripts/install.sh --yes --package "$deb"
dpkg-query -W -f='${Status}\n' utter | grep -q "install ok installed" || fail "utter is not installed"
installed=$(dpkg -L utter)

step "the installed package"
/usr/bin/utter --version
home=$(mktemp -d)
# A user with nothing set up yet: doctor runs and says what is missing (its exit status
# says whether anything failed; a fresh user without a compositor has failures, so only a
# crash or unknown output fails here).
set +e
HOME=$home XDG_RUNTIME_DIR=$home/run XDG_CONFIG_HOME=$home/config XDG_STATE_HOME=$home/state \
    /usr/bin/utter doctor --json >"$home/doctor.json"
doctor=$?
set -e
((doctor == 0 || doctor == 1)) || fail "utter doctor exited $doctor"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["doctor_version"] >= 1; print("doctor:", "ok" if d["ok"] else "reports failures", "-", len(d["checks"]), "checks")' "$home/doctor.json"
# The packaged unit, checked as it is installed (verify needs no user manager, only a
# runtime directory).
mkdir -p -m 0700 "$home/run"
XDG_RUNTIME_DIR=$home/run systemd-analyze --user verify /usr/lib/systemd/user/utter.service ||
    fail "systemd-analyze verify"
grep -qx 'ExecStart=/usr/libexec/utter/utter-session-env /usr/bin/utter daemon' /usr/lib/systemd/user/utter.service ||
    fail "the unit's ExecStart does not name the installed wrapper and binary"
grep -qx 'Exec=/usr/bin/utter daemon' /usr/share/dbus-1/services/dev.utter.Runner1.service ||
    fail "the D-Bus activation file does not name the installed binary"
# The plugins the embedded default config names are found beside /usr/bin/utter (a missing
# one is a "program not found" warning).
HOME=$home XDG_CONFIG_HOME=$home/config /usr/bin/utter check-config >"$home/check.out" 2>&1 || true
cat "$home/check.out"
if grep -q "program not found" "$home/check.out"; then
    fail "a plugin program of the default config is missing from the package"
fi
grep -q "config OK" "$home/check.out" || fail "utter check-config did not pass"
rm -rf "$home"

step "dpkg -r"
dpkg -r utter
if dpkg-query -W -f='${Status}\n' utter 2>/dev/null | grep -q "install ok installed"; then
    fail "utter is still installed"
fi
left=()
while IFS= read -r path; do
    # Directories the package shared with others (/usr/bin, /usr/share/doc, ...) stay.
    [[ -e $path && ! -d $path ]] && left+=("$path")
done <<<"$installed"
for d in /usr/libexec/utter /usr/share/utter /usr/share/doc/utter; do
    [[ -e $d ]] && left+=("$d")
done
if ((${#left[@]})); then
    fail "left behind after dpkg -r: ${left[*]}"
fi
echo "removed; nothing of it is left"
printf '\ntests/package.sh: OK (%s, %s)\n' "$(basename "$deb")" "$(basename "$rpm_file")"
