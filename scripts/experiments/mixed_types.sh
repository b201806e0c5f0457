#!/usr/bin/env bash
# A workload of mixed data types, planned and measured: 24 synthetic tables
# (2021 profile, batch 2048) planned on 4 devices three times: training with
# every table fp32, training with a third each fp32, fp16 and bf16, and
# inference (--task inference) with a quarter each fp32, fp16, int8 and
# int4; each plan (and torchrec's) measured on the executor beside its
# prediction (`plan --verify 1 --verify-rounds 1`). Prints the verification
# tables.
#
# usage: scripts/experiments/mixed_types.sh [EMBSHARD_BINARY] [SEED]
#   default binary: build/embshard; seed 11. Uses jq to set the types.
set -euo pipefail

embshard=${1:-build/embshard}
seed=${2:-11}
command -v jq > /dev/null || { echo "mixed_types.sh: needs jq" >&2; exit 1; }
[[ -x $embshard ]] || { echo "mixed_types.sh: no embshard binary at '$embshard'" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/embshard_mixed.XXXXXX")
trap 'rm -rf "$work"' EXIT

"$embshard" synth --profile 2021 --tables 24 --batch 2048 --seed "$seed" -o "$work/w" &> /dev/null
for types in fp32 mixed inference; do
  task=training
  case $types in
    fp32) filter='.tables |= map(. + {data_type: "fp32"})' ;;
    mixed) filter='.tables |= [to_entries[] | .value + {data_type: (["fp32", "fp16", "bf16"][.key % 3])}]' ;;
    inference)
      filter='.tables |= [to_entries[] | .value + {data_type: (["fp32", "fp16", "int8", "int4"][.key % 4])}]'
      task=inference ;;
  esac
  jq "$filter" "$work/w/tables.json" > "$work/tables.json" && mv "$work/tables.json" "$work/w/tables.json"
  echo "== $types tables ($task)"
  "$embshard" plan "$work/w" --devices 4 --task "$task" --verify 1 --verify-rounds 1 2> /dev/null |
    sed -n '/^data types:/p; /^candidate/,/^chosen:/p'
done
