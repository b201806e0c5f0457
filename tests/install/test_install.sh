#!/usr/bin/env bash
# The install test (ctest: install_consumer). Installs this build to a
# temporary prefix; builds tests/install/consumer against it with
# find_package(embshard) and runs it from a folder outside the source tree;
# moves the prefix and plans with its `embshard` from outside the source tree;
# checks that a bad EMBSHARD_DATA_DIR is a clear error. Any step failing fails
# the test. It installs what is built: run it after a full build.
#
# Usage: test_install.sh CMAKE SOURCE_DIR BUILD_DIR GENERATOR MAKE_PROGRAM CXX_COMPILER BUILD_TYPE
set -euo pipefail
cmake=$1 source_dir=$2 build_dir=$3 generator=$4 make_program=$5 cxx=$6 build_type=${7:-Release}

work=$(mktemp -d "${TMPDIR:-/tmp}/embshard_install_test.XXXXXX")
trap 'rm -rf "$work"' EXIT
unset EMBSHARD_DATA_DIR
start_s=$SECONDS

fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== [$((SECONDS - start_s)) s] $*"; }
# Runs a command, its output into $work/out; prints it when the command fails.
run() {
  if ! timeout 300 "$@" >"$work/out" 2>&1; then
    cat "$work/out"
    fail "exit status non-zero: $*"
  fi
}
expect_in_out() { grep -qF -- "$1" "$work/out" || { cat "$work/out"; fail "no '$1' in the output"; }; }

step "cmake --install to $work/prefix"
run "$cmake" --install "$build_dir" --prefix "$work/prefix"
prefix=$work/prefix
for f in bin/embshard include/embshard/search/planning.h include/embshard/util/data_dir.h \
         share/embshard/models/analytic.json share/embshard/models/neural/manifest.json \
         share/embshard/data/published/dlrm_datasets_2021_locality_stats.txt; do
  [ -e "$prefix/$f" ] || fail "the install has no $f"
done
for layer in util workload kernel measure cost plan search bench eval; do
  [ -n "$(find "$prefix" -name "libembshard_$layer.a")" ] || fail "the install has no libembshard_$layer.a"
done
[ -n "$(find "$prefix" -name embshardConfig.cmake)" ] || fail "the install has no embshardConfig.cmake"
stray=$(find "$prefix/share/embshard/models" -name '*.jsonl.gz' -o -name '*.svg' -o -name data)
[ -z "$stray" ] || fail "measurement files installed with the models: $stray"
# Nothing may find the data through the source tree: no path to it compiled in.
for f in "$prefix/bin/embshard" $(find "$prefix" -name 'libembshard*.a'); do
  for sub in models data/published; do
    if grep -qaF "$source_dir/$sub" "$f"; then fail "$f holds the path $source_dir/$sub"; fi
  done
done

step "build the consumer against the install (find_package(embshard))"
make_args=()
[ -n "$make_program" ] && make_args=(-DCMAKE_MAKE_PROGRAM="$make_program")
run "$cmake" -S "$source_dir/tests/install/consumer" -B "$work/consumer" -G "$generator" \
    "${make_args[@]}" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE="$build_type" \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
expect_in_out "data root $prefix/share/embshard"
run "$cmake" --build "$work/consumer"

step "run the consumer from outside the source tree"
mkdir -p "$work/elsewhere"
cd "$work/elsewhere"
run "$work/consumer/plan_tables"
expect_in_out "data root: $prefix/share/embshard"
expect_in_out "cost model: neural"
grep -qE '^predicted cost: [0-9.]+ ms' "$work/out" || { cat "$work/out"; fail "no predicted cost"; }
grep -qE '^predicted cost: 0\.0+ ms' "$work/out" && { cat "$work/out"; fail "a zero predicted cost"; }
cat "$work/out"

step "move the prefix; plan with its embshard from outside the source tree"
mv "$prefix" "$work/moved"
moved=$work/moved
cp "$source_dir/tests/install/tables.json" "$work/elsewhere/tables.json"
run "$moved/bin/embshard" plan --tables tables.json --devices 2 --mem-per-device 8GB -o plan.json
expect_in_out "with cost model neural"
expect_in_out "predicted cost"
[ -s plan.json ] || fail "plan wrote no plan.json"
grep -qF '"shards"' plan.json || fail "plan.json holds no shards"
tail -n 5 "$work/out"
# The models it read are the moved prefix's: without them it says where it looked.
mv "$moved/share/embshard/models/neural" "$work/neural.away"
run "$moved/bin/embshard" plan --tables tables.json --devices 2 --mem-per-device 8GB
expect_in_out "no trained model directory $moved/share/embshard/models/neural"
mv "$work/neural.away" "$moved/share/embshard/models/neural"

# The Python package, where the build has it (python/CMakeLists.txt installs it
# beside the library), run by the Python it was built for.
module=$(find "$moved" -name '_embshard*.so' | head -n 1)
if [ -n "$module" ]; then
  step "plan with the moved install's Python package from outside the source tree"
  python=""
  for candidate in /usr/bin/python3 python3; do
    suffix=$("$candidate" -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))" 2>/dev/null) || continue
    if [[ "$module" == *"$suffix" ]]; then python=$candidate; break; fi
  done
  [ -n "$python" ] || fail "no python3 here loads $module"
  run env PYTHONPATH="$(dirname "$(dirname "$module")")" "$python" -c "
import embshard
plan = embshard.plan('tables.json', devices=2, mem_per_device='8GB')
assert embshard.__file__.startswith('$moved/'), embshard.__file__
assert plan.predicted_cost_ms > 0, plan.predicted_cost_ms
print('python: predicted cost', plan.predicted_cost_ms, 'ms')"
  cat "$work/out"
fi

step "the consumer after the move: a clear error, then EMBSHARD_DATA_DIR"
if "$work/consumer/plan_tables" >"$work/out" 2>&1; then cat "$work/out"; fail "planned with a data root that moved away"; fi
expect_in_out "found no embshard data root"
expect_in_out "embshard-data-dir names $prefix/share/embshard: no such folder"
run env EMBSHARD_DATA_DIR="$moved/share/embshard" "$work/consumer/plan_tables"
expect_in_out "data root: $moved/share/embshard"

step "a lone binary: a model set of its own and complete tables need no data root"
run "$moved/bin/embshard" synth --profile 2021 --tables 4 --batch 1024 -o "$work/synth"
mkdir -p "$work/lone"
cp "$moved/bin/embshard" "$work/lone/"
mkdir -p "$work/own_set"  # networks and the calibration of their collectives
cp -r "$moved/share/embshard/models/neural" "$moved/share/embshard/models/analytic.json" "$work/own_set/"
if "$work/lone/embshard" plan --tables "$work/synth/tables.json" --devices 2 \
    --mem-per-device 8GB >"$work/out" 2>&1; then
  cat "$work/out"; fail "a lone binary planned without a data root or a model"
fi
expect_in_out "found no embshard data root"
run "$work/lone/embshard" plan --tables "$work/synth/tables.json" --devices 2 \
    --mem-per-device 8GB --model "$work/own_set"
expect_in_out "with cost model neural"

step "a bad EMBSHARD_DATA_DIR: non-zero exit and a clear error"
if env EMBSHARD_DATA_DIR="$work/nowhere" "$moved/bin/embshard" plan --tables tables.json \
    --devices 2 --mem-per-device 8GB >"$work/out" 2>&1; then
  cat "$work/out"; fail "planned with EMBSHARD_DATA_DIR naming no folder"
fi
expect_in_out "EMBSHARD_DATA_DIR='$work/nowhere' names no embshard data root"
cat "$work/out"

step "passed"
