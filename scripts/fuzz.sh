#!/usr/bin/env bash
# Fuzzes every reader of a file a person hands embshard: builds the libFuzzer
# targets (tests/fuzz/targets/, clang with ASan+UBSan) into build-fuzz/ and
# runs each for SECONDS, one after the other, printing its executions,
# coverage and findings. Exit status 1 when any target found something; its
# input is kept under build-fuzz/fuzz-findings/<target>/ (tests/fuzz/README.md
# says how to turn it into a regression test).
#   scripts/fuzz.sh [SECONDS] [TARGET...]     SECONDS: per target, default 60
# EMBSHARD_FUZZ_BUILD_DIR: another build directory. Each target's corpus
# grows in <build dir>/fuzz-corpus/<target>/ from run to run.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
seconds=${1:-60}
shift || true
build=${EMBSHARD_FUZZ_BUILD_DIR:-$root/build-fuzz}

if ! command -v clang++-14 >/dev/null || [ ! -d /usr/lib/llvm-14/lib/clang ]; then
  ./scripts/install_deps.sh
fi

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for source in tests/fuzz/targets/*.cpp; do targets+=("$(basename "$source" .cpp)"); done
fi
binaries=()
for t in "${targets[@]}"; do
  [ -f "tests/fuzz/targets/$t.cpp" ] || { echo "fuzz.sh: no target '$t' (tests/fuzz/targets/)" >&2; exit 2; }
  binaries+=("fuzz_$t")
done

CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DEMBSHARD_FUZZ=ON -DEMBSHARD_WITH_TORCH=OFF -DEMBSHARD_PYTHON=OFF >/dev/null
cmake --build "$build" -j2 --target "${binaries[@]}"

mkdir -p "$build/fuzz-logs"
printf '%-16s %12s %8s %8s %8s  %s\n' target executions exec/s cov ft findings
found=0
for t in "${targets[@]}"; do
  work="$build/fuzz-corpus/$t"
  findings="$build/fuzz-findings/$t"
  log="$build/fuzz-logs/$t.log"
  mkdir -p "$work" "$findings"
  : >"$log"
  max_len=$(sed -n 's/^\/\/ fuzz-max-len: \([0-9]*\).*/\1/p' "tests/fuzz/targets/$t.cpp" | head -1)
  seeds=("tests/fuzz/corpus/$t")
  [ -d "tests/fuzz/regressions/$t" ] && seeds+=("tests/fuzz/regressions/$t")
  before=$(find "$findings" -type f | wc -l)
  execs=0 busy=0 rc=0 start=$SECONDS
  # Runs until the time is spent. A timeout on a busy machine (others' jobs on
  # the same cores) is told from a slow input by running the input again
  # alone: one that runs in time is set aside and the fuzzing goes on.
  while left=$((seconds - (SECONDS - start))); [ "$left" -gt 0 ]; do
    part="$log.part"
    touch "$part.start"
    rc=0
    # -timeout: a second per input; -rss_limit_mb: 1 GiB (also the largest single allocation).
    "$build/fuzz_$t" -max_total_time="$left" -rss_limit_mb=1024 -timeout=1 \
      -max_len="${max_len:-4096}" -dict="tests/fuzz/dict/$t.dict" -print_final_stats=1 \
      -artifact_prefix="$findings/" "$work" "${seeds[@]}" >"$part" 2>&1 || rc=$?
    cat "$part" >>"$log"
    n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$part" | tail -1)
    execs=$((execs + ${n:-0}))
    [ "$rc" -eq 70 ] || break
    slow=0
    for input in $(find "$findings" -name 'timeout-*' -newer "$part.start"); do
      if "$build/fuzz_$t" -runs=3 -timeout=1 -rss_limit_mb=1024 \
        -artifact_prefix="$build/fuzz-logs/rerun-" "$input" >>"$log" 2>&1; then
        mv "$input" "$build/fuzz-logs/unreproduced-$t-$(basename "$input")"
        echo "fuzz.sh: $input ran in time alone: a busy machine's timeout" >>"$log"
        busy=$((busy + 1))
      else
        slow=1
      fi
    done
    [ "$slow" -eq 0 ] || break
    rc=0
  done
  rm -f "$log.part" "$log.part.start"
  elapsed=$((SECONDS - start))
  rate=$((execs / (elapsed > 0 ? elapsed : 1)))
  cov=$( (grep -o 'cov: [0-9]*' "$log" || true) | tail -1 | cut -d' ' -f2)
  ft=$( (grep -o 'ft: [0-9]*' "$log" || true) | tail -1 | cut -d' ' -f2)
  after=$(find "$findings" -type f | wc -l)
  if [ "$rc" -ne 0 ] || [ "$after" -gt "$before" ]; then
    found=1
    what="FOUND (exit $rc): $( (grep -m1 -E 'ERROR:|FINDING|runtime error' "$log" || true) | cut -c1-120) -- $log"
  else
    what=none
  fi
  [ "$busy" -eq 0 ] || what="$what ($busy timeouts of a busy machine not reproduced)"
  printf '%-16s %12s %8s %8s %8s  %s\n' "$t" "$execs" "$rate" "${cov:-?}" "${ft:-?}" "$what"
done
exit "$found"
