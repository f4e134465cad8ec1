#!/usr/bin/env bash
# Build the Utter book (docs/src/*.md) into docs/book/ with mdBook.
#
# When `mdbook` is not on PATH it is installed first with `cargo install` (into
# $CARGO_HOME/bin, usually ~/.cargo/bin, where cargo installs every program), without its
# default features, unoptimised: the book needs neither `mdbook serve`, `mdbook watch` nor the search
# index. That compiles mdBook once, a few minutes on two cores. CI runs this script (.ci/run);
# so can you, from anywhere in the checkout. Extra arguments go to `mdbook build`.
set -euo pipefail
cd "$(dirname "$0")/.."

# Pinned, so that CI and a person build with the same mdBook: the newest 0.4 release.
MDBOOK_VERSION=0.4.52

if ! command -v mdbook >/dev/null 2>&1; then
    bin_dir="${CARGO_HOME:-$HOME/.cargo}/bin"
    echo "docs/build.sh: mdbook is not on PATH; installing mdBook $MDBOOK_VERSION into $bin_dir"
    # Unoptimised (--debug): it compiles in about two thirds of the CPU time, and builds
    # this book in well under a second all the same.
    cargo install mdbook --locked --debug --no-default-features --version "$MDBOOK_VERSION"
    case ":$PATH:" in
    *":$bin_dir:"*) ;;
    *) export PATH="$bin_dir:$PATH" ;;
    esac
fi

echo "docs/build.sh: $(mdbook --version)"
# mdBook reports a missing chapter or include file as an error or a warning and still
# exits 0 for some of them; any warning fails this script, so that CI notices.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
mdbook build docs "$@" 2>&1 | tee "$log"
if grep -E '\b(WARN|ERROR)\b' "$log" >/dev/null; then
    echo "docs/build.sh: mdbook printed warnings or errors (above)" >&2
    exit 1
fi
echo "docs/build.sh: the book is in docs/book/ (open docs/book/index.html)"
