#!/usr/bin/env bash
# Build the fuzz targets with libFuzzer on the stable toolchain and run each for a bounded
# time: SanitizerCoverage instrumentation through stable `-C passes`/`-C llvm-args` flags
# (what `cargo fuzz --sanitizer none` passes), no sanitizer, panics abort. A crash fails the
# run, leaving the input in fuzz/artifacts/TARGET/.
#
# Usage: fuzz/run.sh [SECONDS_PER_TARGET (default 60)] [TARGET...]
# The corpus of each target starts from fuzz/seeds/TARGET (committed) and grows in
# target/fuzz-corpus/TARGET (not committed). Needs a C++ compiler (g++) for libFuzzer.
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-60}
shift || true
targets=("$@")
if ((${#targets[@]} == 0)); then
    targets=(frame jsonrpc manifest config normalise session)
fi
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-../target/fuzz}
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
# An explicit --target keeps the instrumentation out of build scripts and proc macros,
# which run on the host without libFuzzer (as cargo-fuzz does).
triple=$(rustc -vV | awk '/^host:/ {print $2}')
cargo build --release --bins --target "$triple"
total_runs=0
for target in "${targets[@]}"; do
    corpus="$CARGO_TARGET_DIR/../fuzz-corpus/$target"
    mkdir -p "$corpus" "artifacts/$target"
    log=$(mktemp)
    if ! "$CARGO_TARGET_DIR/$triple/release/$target" -max_total_time="$seconds" -print_final_stats=1 \
        -artifact_prefix="artifacts/$target/" -rss_limit_mb=2048 -timeout=10 \
        "$corpus" "seeds/$target" >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        echo "fuzz/run.sh: $target FAILED; the input is in fuzz/artifacts/$target/" >&2
        exit 1
    fi
    runs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n1 | cut -d' ' -f2)
    echo "fuzz/run.sh: $target: ${runs:-?} executions in ${seconds} s, coverage ${cov:-?}, no crash"
    total_runs=$((total_runs + ${runs:-0}))
    rm -f "$log"
done
echo "fuzz/run.sh: ${#targets[@]} targets, $total_runs executions, 0 crashes"
