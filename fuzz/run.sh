#!/usr/bin/env bash
# Build the fuzz targets with libFuzzer on the stable toolchain and run each for a bounded
# time: SanitizerCoverage instrumentation through stable `-C passes`/`-C llvm-args` flags
# (what `cargo fuzz --sanitizer none` passes), no sanitizer, panics abort. A crash fails the
# run, leaving the input in fuzz/artifacts/TARGET/.
#
# Usage: fuzz/run.sh [--build-only] [SECONDS_PER_TARGET (default 60)] [TARGET...]
# The corpus of each target starts from fuzz/seeds/TARGET (committed) and grows in
# target/fuzz-corpus/TARGET (not committed). Needs a C++ compiler (g++) for libFuzzer.
# libFuzzer runs one target on one core: FUZZ_JOBS targets (default: the number of cores)
# run side by side, each still for SECONDS_PER_TARGET, so two cores fuzz six targets for
# 30 s each in 90 s.
set -euo pipefail
cd "$(dirname "$0")"
build_only=false
if [[ ${1:-} == --build-only ]]; then
    # Compile the targets and stop (CI compiles them beside the test stage).
    build_only=true
    shift
fi
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
if $build_only; then
    exit 0
fi
jobs=${FUZZ_JOBS:-$(nproc)}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
fuzz_one() {
    local target=$1
    local corpus="$CARGO_TARGET_DIR/../fuzz-corpus/$target"
    mkdir -p "$corpus" "artifacts/$target"
    "$CARGO_TARGET_DIR/$triple/release/$target" -max_total_time="$seconds" -print_final_stats=1 \
        -artifact_prefix="artifacts/$target/" -rss_limit_mb=2048 -timeout=10 \
        "$corpus" "seeds/$target" >"$logs/$target.log" 2>&1
}
# Start up to $jobs targets, then wait for each in turn; every target runs to its end, and
# every crash is reported.
failed=()
total_runs=0
report() {
    local target=$1 pid=$2
    if ! wait "$pid"; then
        tail -n 40 "$logs/$target.log" >&2
        echo "fuzz/run.sh: $target FAILED; the input is in fuzz/artifacts/$target/" >&2
        failed+=("$target")
        return
    fi
    local runs cov
    runs=$(awk '/stat::number_of_executed_units/ {print $2}' "$logs/$target.log")
    cov=$(grep -o 'cov: [0-9]*' "$logs/$target.log" | tail -n1 | cut -d' ' -f2)
    echo "fuzz/run.sh: $target: ${runs:-?} executions in ${seconds} s, coverage ${cov:-?}, no crash"
    total_runs=$((total_runs + ${runs:-0}))
}
running=()
pids=()
for target in "${targets[@]}"; do
    fuzz_one "$target" &
    running+=("$target")
    pids+=($!)
    if ((${#running[@]} >= jobs)); then
        report "${running[0]}" "${pids[0]}"
        running=("${running[@]:1}")
        pids=("${pids[@]:1}")
    fi
done
for i in "${!running[@]}"; do
    report "${running[$i]}" "${pids[$i]}"
done
if ((${#failed[@]})); then
    echo "fuzz/run.sh: crashes in ${failed[*]}" >&2
    exit 1
fi
echo "fuzz/run.sh: ${#targets[@]} targets, $total_runs executions, 0 crashes"
