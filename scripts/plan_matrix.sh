#!/usr/bin/env bash
# Plans a fixed matrix (every planner x the analytic and neural cost models x
# three task shapes x four sets of sharding types, fixed seeds) with the
# built CLI and prints one line per plan: its SHA-256, then its name. The
# plan JSON is hashed as written, but for `search_s` (the search's own time).
# Two builds that print the same lines plan alike: a change meant to keep
# behaviour (a refactoring) is checked by diffing this output before and after.
#   scripts/plan_matrix.sh [OUT_DIR]   (default: a temporary folder, removed)
# EMBSHARD_BUILD_DIR: the build whose CLI plans (default: build/).
set -euo pipefail
cd "$(dirname "$0")/.."
cli=${EMBSHARD_BUILD_DIR:-$PWD/build}/embshard
[ -x "$cli" ] || { echo "plan_matrix.sh: no CLI at $cli (scripts/build.sh builds it)" >&2; exit 2; }
if [ $# -ge 1 ]; then
  out=$1
  mkdir -p "$out"
else
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi

# name: synth arguments | devices | memory per device
shapes=(
  "small|--profile 2021 --tables 30 --batch 2048 --seed 11|4|2200MiB"
  "wide|--profile 2022 --tables 80 --batch 4096 --seed 12|8|9GiB"
  "stress|--profile 2021 --tables 40 --batch 4096 --seed 13 --huge-tables 2 --huge-rows 4000000 --hot-tables 3 --hot-pooling 60|4|7GiB"
)
type_sets=(all table_wise table_wise,column_wise table_wise,row_wise,data_parallel)
planners=(random size_greedy dim_greedy lookup_greedy size_lookup_greedy torchrec neuroshard
  dreamshard autoshard)

for shape in "${shapes[@]}"; do
  IFS='|' read -r name synth devices mem <<<"$shape"
  [ -d "$out/$name" ] || "$cli" synth $synth -o "$out/$name" >/dev/null
  for model in analytic neural; do
    for types in "${type_sets[@]}"; do
      for algo in "${planners[@]}"; do
        plan="$out/plan-$name-$model-${types//,/+}-$algo.json"
        args=(plan "$out/$name" --devices "$devices" --mem-per-device "$mem" --algo "$algo"
          --cost-model "$model" --threads 1 -o "$plan")
        [ "$types" = all ] || args+=(--sharding-types "$types")
        if ! "$cli" "${args[@]}" >/dev/null 2>"$plan.err"; then
          # A refusal is part of the behaviour too: its message is hashed instead.
          mv "$plan.err" "$plan"
        fi
        rm -f "$plan.err"
        hash=$(sed -E 's/"search_s": *[-0-9.eE+]+/"search_s": 0/' "$plan" | sha256sum | cut -c1-16)
        echo "$hash $(basename "$plan" .json)"
      done
    done
  done
done
