#!/usr/bin/env bash
# The evdev push-to-talk reader through the real kernel input path, in a QEMU guest.
#
# The CI machines (and most containers) have no /dev/uinput and cannot load modules, so this
# boots Debian's own kernel in QEMU with software emulation (TCG; nested KVM does not work on
# these machines), with an initrd holding busybox, the kernel's evdev.ko and uinput.ko, and the
# example `uinput_ptt` (examples/uinput_ptt.rs). That program runs the runner's own evdev
# reader (utter::triggers::evdev::run), creates a uinput keyboard, presses, autorepeats, releases
# and unplugs it, and prints PTT_EVDEV_ROUNDTRIP_OK when push-to-talk saw exactly what it
# should. Then the input plugin's own uinput keyboard (plugins/input/examples/uinput_keys.rs)
# types text and chords under the US layout and under the German layout that libxkbcommon
# computed here on the host, and prints UINPUT_KEYS_OK when an evdev reader in the guest saw
# exactly the key codes each layout needs (z and y swapped, @ through AltGr, ö). This script
# fails unless both markers appear.
#
# Needs: qemu-system-x86 busybox-static (installed here when running as root), apt-get
# download access to Debian's archive (for linux-image-amd64's kernel package), ~20 s.
# Usage: tests/qemu/uinput.sh        (CARGO_TARGET_DIR is honoured)
set -euo pipefail
cd "$(dirname "$0")/../.."

packages=(qemu-system-x86 busybox-static)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    if [[ $(id -u) -eq 0 ]]; then
        echo "uinput.sh: installing ${missing[*]}" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        echo "uinput.sh: missing Debian packages; install them with:" >&2
        echo "  sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
        exit 1
    fi
fi

# Both examples in one --workspace build: dependency features unified as tests/run.sh's
# build unified them, so after it only the two examples are compiled (`--example` of one
# package, or `-p`, resolves features for that package alone and compiles a hundred crates
# again).
cargo build --workspace --example uinput_ptt --example uinput_keys
target=${CARGO_TARGET_DIR:-target}
probe="$target/debug/examples/uinput_ptt"
keys="$target/debug/examples/uinput_keys"
[[ -x $probe ]] || { echo "uinput.sh: $probe was not built" >&2; exit 1; }
[[ -x $keys ]] || { echo "uinput.sh: $keys was not built" >&2; exit 1; }

work=$(mktemp -d /tmp/utter-uinput-XXXX)
trap 'rm -rf "$work"' EXIT

# The kernel package linux-image-amd64 points to (its name changes with point releases).
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
if [[ -z $kpkg ]]; then
    [[ $(id -u) -eq 0 ]] && apt-get update -qq
    kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
fi
[[ -n $kpkg ]] || { echo "uinput.sh: apt-cache knows no linux-image-amd64 (run apt-get update)" >&2; exit 1; }
(cd "$work" && apt-get download -qq -o APT::Sandbox::User=root "$kpkg")
dpkg-deb -x "$work"/linux-image-*.deb "$work/k"
vmlinuz=$(ls "$work"/k/boot/vmlinuz-*)

root="$work/initrd"
mkdir -p "$root"/{bin,mods,proc,sys,dev}
cp /bin/busybox "$root/bin/busybox"
for applet in sh mount insmod poweroff echo; do ln -s busybox "$root/bin/$applet"; done
for mod in evdev uinput; do
    ko=$(find "$work/k/lib/modules" -name "$mod.ko*" | head -n1)
    [[ -n $ko ]] || { echo "uinput.sh: no $mod.ko in $kpkg" >&2; exit 1; }
    case $ko in
        *.xz) xz -dc "$ko" >"$root/mods/$mod.ko" ;;
        *.zst) zstd -qdc "$ko" >"$root/mods/$mod.ko" ;;
        *) cp "$ko" "$root/mods/$mod.ko" ;;
    esac
done
# Without their debug information the two fit the guest's memory as an initramfs.
strip -o "$root/bin/uinput_ptt" "$probe"
strip -o "$root/bin/uinput_keys" "$keys"
# The German layout as the host's libxkbcommon and xkb-data compile it (the guest has
# neither).
"$keys" --dump-layout de >"$root/layout-de.json"
# The examples are linked dynamically against glibc: copy the libraries they name.
for lib in $(ldd "$probe" "$keys" | grep -v ':$' | grep -o '/[^ ]*' | sort -u); do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
done
cat >"$root/init" <<'EOF'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
insmod /mods/evdev.ko
insmod /mods/uinput.ko
/bin/uinput_ptt
echo "uinput_ptt exit=$?"
/bin/uinput_keys --layout /layout-de.json
echo "uinput_keys exit=$?"
poweroff -f
EOF
chmod +x "$root/init"
(cd "$root" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1 >"$work/initrd.gz")

start=$(date +%s)
timeout 300 qemu-system-x86_64 -accel tcg -m 512 -nographic -no-reboot \
    -kernel "$vmlinuz" -initrd "$work/initrd.gz" \
    -append "console=ttyS0 panic=-1 loglevel=3" </dev/null | tee "$work/console.log" | grep -v '^\s*$' | grep -E 'uinput|reader|key|device|layout|PTT_|UINPUT_' || true
echo "uinput.sh: guest ran $(( $(date +%s) - start )) s"
if grep -q PTT_EVDEV_ROUNDTRIP_OK "$work/console.log" && grep -q UINPUT_KEYS_OK "$work/console.log"; then
    echo "uinput.sh: ok"
else
    echo "uinput.sh: FAILED; the guest console:" >&2
    cat "$work/console.log" >&2
    exit 1
fi
