#!/usr/bin/env bash
# README's second command: install (TorchRec from PyPI among it), build and run every test; then build the
# readers and their tests under AddressSanitizer + UndefinedBehaviorSanitizer
# and run those too; then fuzz every reader for 20 s.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
# TorchRec from PyPI (about a minute and 3 GB on a fresh machine): the tests
# that run embshard's plans in TorchRec, TorchRec's planner and FBGEMM's kernels.
./scripts/install_torchrec.sh
(cd build && ctest --output-on-failure -j2)
# `pip install --no-build-isolation .` from this tree into a temporary folder,
# then a plan from the installed package alone (Debian's python3, the
# extension built in build/ rather than afresh).
(cd build && EMBSHARD_TEST_PIP=1 EMBSHARD_PIP_BUILD_DIR="$PWD" ctest -R '^python_embshard$' \
  --output-on-failure)

# The CUDA build compiles and links (nvcc and the CUDA runtime are on the machine; no GPU is:
# its tests start and skip). Where no toolkit is installed, said so and left out.
if command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]]; then
  ./scripts/build_cuda.sh
  ./build-cuda/embshard bench compute --help | grep -q -- '--executor TEXT:{cpu,cuda}'
  for t in test_tbe_cuda test_executor_cuda; do ./build-cuda/$t --gtest_brief=1; done
else
  echo "CUDA build left out: no CUDA toolkit (nvcc) on this machine"
fi

# Reader tests (trace file, tables.json, .pt files, record files, plan files, cost data, JSON fields,
# model files and eval records taken together) under ASan+UBSan.
sanitized_tests=(test_trace test_record_file test_pt_reader test_stats test_plan_diff test_neural
  test_cost_data test_json_field test_eval_combine)
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DEMBSHARD_SANITIZE=ON \
  -DEMBSHARD_WITH_TORCH=OFF -DEMBSHARD_PYTHON=OFF -DEMBSHARD_NATIVE=OFF >/dev/null
present=()
for t in "${sanitized_tests[@]}"; do
  if ls tests/*/"$t".cpp >/dev/null 2>&1; then present+=("$t"); fi
done
cmake --build build-asan -j2 --target "${present[@]}"
for t in "${present[@]}"; do
  echo "== $t (ASan+UBSan)"
  # The CLI is not built here: tests that run it (named *.Cli) are left to the build above.
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 "./build-asan/$t" --gtest_brief=1 \
    --gtest_filter=-*.Cli
done
echo "sanitized reader tests: ${#present[@]} binaries passed"

# Every reader fuzzed for 20 s (clang, ASan+UBSan; build-fuzz/): exit 1 on a finding.
./scripts/fuzz.sh 20
