#!/usr/bin/env bash
# Synthetic workload calibration: generates workloads with `embshard synth`
# and measures them with `embshard inspect --json --compare`, then prints a
# Markdown table of the distances to the published statistics.
#
# usage: scripts/experiments/synth_calibration.sh [EMBSHARD_BINARY] [--quick]
#   default binary: build/embshard; --quick skips the batch-65536 runs.
# Each run is exactly:
#   embshard synth --profile P --tables T --batch B --seed S -o DIR &&
#   embshard inspect DIR --json --compare P
set -euo pipefail

embshard=${1:-build/embshard}
quick=${2:-}
command -v jq > /dev/null || { echo "synth_calibration.sh: needs jq" >&2; exit 1; }
[[ -x $embshard ]] || { echo "synth_calibration.sh: no embshard binary at '$embshard'" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/embshard_calibration.XXXXXX")
trap 'rm -rf "$work"' EXIT

runs=()
for profile in 2021 2022; do
  for seed in 1 2 3 4 5; do runs+=("$profile 100 4096 $seed"); done
done
if [[ $quick != --quick ]]; then
  runs+=("2021 100 65536 1" "2022 100 65536 1")
fi

echo "| profile | tables | batch | seed | avg pooling (published) | unique ratio (published) | TV rows | TV lookups | pooling err | unique ratio err | per-table pooling min/median/max | synth s |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for run in "${runs[@]}"; do
  read -r profile tables batch seed <<< "$run"
  dir="$work/w_${profile}_${tables}_${batch}_${seed}"
  start=$(date +%s.%N)
  "$embshard" synth --profile "$profile" --tables "$tables" --batch "$batch" --seed "$seed" \
    -o "$dir" 2> "$work/synth.log" || { cat "$work/synth.log" >&2; exit 1; }
  seconds=$(echo "$(date +%s.%N) - $start" | bc)
  "$embshard" inspect "$dir" --json --compare "$profile" | jq -r \
    --arg p "$profile" --arg t "$tables" --arg b "$batch" --arg s "$seed" --arg secs "$seconds" '
    "| \($p) | \($t) | \($b) | \($s) | " +
    "\(.aggregate.avg_pooling_factor * 1000 | round / 1000) (\(.comparison.avg_pooling_factor * 1000 | round / 1000)) | " +
    "\(.aggregate.unique_ratio * 10000 | round / 10000) (\(.comparison.unique_ratio * 10000 | round / 10000)) | " +
    "\(.comparison.row_reuse_tv * 100000 | round / 100000) | \(.comparison.lookup_reuse_tv * 100000 | round / 100000) | " +
    "\(.comparison.pooling_rel_error * 10000 | round / 100)% | \(.comparison.unique_ratio_rel_error * 10000 | round / 100)% | " +
    "\(.aggregate.pooling_factor | "\(.min * 100 | round / 100) / \(.median * 100 | round / 100) / \(.max * 10 | round / 10)") | " +
    "\($secs | tonumber * 10 | round / 10) |"'
  rm -rf "$dir"
done
