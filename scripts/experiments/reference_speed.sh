#!/usr/bin/env bash
# Search speed side by side with NeuroShard's own Python search, in one run:
# for each size, NeuroShard (neuroshard_reference.py beside this script, one
# thread) and embshard's neural search (`bench plan --threads 1`, every
# sharding type and table/column only) on the same tables (synth 2021, batch 4096, seed 1: what
# `bench plan` plans), devices, memory rule and search parameters, in turns,
# `repeats` rounds; medians and their ratios.
#
# usage: scripts/experiments/reference_speed.sh NEUROSHARD_DIR [EMBSHARD_BINARY] [REPEATS] [SIZES]
#   NEUROSHARD_DIR: a checkout of daochenzha/neuroshard (not part of this
#   repository); needs Debian's python3 with python3-torch (or PYTHON=another
#   interpreter with torch).
#   defaults: build/embshard, 3, "50x4 100x8 200x16"
set -euo pipefail

reference=${1:?usage: scripts/experiments/reference_speed.sh NEUROSHARD_DIR [EMBSHARD_BINARY] [REPEATS] [SIZES]}
embshard=${2:-build/embshard}
repeats=${3:-3}
sizes=${4:-50x4 100x8 200x16}
python=${PYTHON:-/usr/bin/python3}  # PYTHON: another interpreter with torch
here=$(cd "$(dirname "$0")" && pwd)
[[ -f $reference/neuroshard/neurosharder.py ]] ||
  { echo "reference_speed.sh: no NeuroShard checkout at '$reference' (neuroshard/neurosharder.py)" >&2; exit 1; }
[[ -x $embshard ]] || { echo "reference_speed.sh: no embshard binary at '$embshard'" >&2; exit 1; }
$python -c 'import torch' 2> /dev/null ||
  { echo "reference_speed.sh: $python has no torch (apt-get install python3-torch)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/embshard_reference.XXXXXX")
trap 'rm -rf "$work"' EXIT

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
search_s() {  # embshard bench plan's median search seconds for one size
  "$embshard" bench plan --sizes "$1" --cost-models neural --threads 1 --repeats 1 "${@:2}" \
    2> /dev/null | awk '$1 ~ /^[0-9]+$/ {print $(NF-5)}'  # search s (median)
}

echo "| size | NeuroShard (Python) s | embshard, every type s | speedup | embshard, table+column s | speedup |"
echo "|---|---:|---:|---:|---:|---:|"
for size in $sizes; do
  tables=${size%x*} devices=${size#*x}
  "$embshard" synth --profile 2021 --tables "$tables" --batch 4096 --seed 1 -o "$work/w$tables" > /dev/null 2>&1
  : > "$work/ref" ; : > "$work/all" ; : > "$work/twcw"
  for ((r = 0; r < repeats; r++)); do
    $python "$here/neuroshard_reference.py" "$reference" "$work/w$tables" "$devices" >> "$work/ref"
    search_s "$size" >> "$work/all"
    search_s "$size" --sharding-types table_wise,column_wise >> "$work/twcw"
  done
  ref=$(median < "$work/ref") all=$(median < "$work/all") twcw=$(median < "$work/twcw")
  awk -v s="$size" -v r="$ref" -v a="$all" -v t="$twcw" \
    'BEGIN {printf "| %s | %.3f | %.4f | %.0fx | %.4f | %.0fx |\n", s, r, a, r / a, t, r / t}'
done
echo "medians of $repeats rounds; one thread each; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
