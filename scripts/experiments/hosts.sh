#!/usr/bin/env bash
# Hosts (docs/status.md, "Hosts"): on ranks grouped as hosts by
# scripts/emulated_hosts.sh,
# 1. the all-to-alls of 30 random placements measured at each link speed
#    (0: unshaped) and the shipped model with the inter-host level
#    validated on them (`validate --devices-per-host`);
# 2. a never-seen task set planned with the hosts (neuroshard) and without
#    (neuroshard:flat), both measured on the hosts. KIND standard: the
#    standard sets' pool and tasks (docs/eval.md); stress: the stress sets'
#    (docs/sharding_types.md: huge and hot tables that need row splits).
# Usage: scripts/experiments/hosts.sh HOSTS PER_HOST GBPS SEED PROFILE BATCH [KIND=standard] [OUT=build/hosts]
# (5-15 minutes at 2 x 2; needs root, a build and mpirun).
set -euo pipefail
cd "$(dirname "$0")/../.."
usage="usage: scripts/experiments/hosts.sh HOSTS PER_HOST GBPS SEED PROFILE BATCH [KIND] [OUT]"
hosts=${1:?$usage} per_host=${2:?$usage} gbps=${3:?$usage}
seed=${4:?$usage} profile=${5:?$usage} batch=${6:?$usage} kind=${7:-standard} out=${8:-build/hosts}
case $kind in
  standard) pool_args=(--tables 80) task_args=(--tables 20-60 --mem-cap 384MiB --count 10) ;;
  stress) pool_args=(--tables 40 --huge-tables 3 --huge-rows 20000000 --hot-tables 4 --hot-pooling 300)
          task_args=(--oversized --tables 15-25 --dims 8,16,32 --mem-cap 2GB --count 8) ;;
  *) echo "$usage (KIND: standard or stress)" >&2; exit 2 ;;
esac
bin=$PWD/build/embshard
[ -x "$bin" ] || { echo "no $bin: run scripts/build.sh first" >&2; exit 1; }
ranks=$((hosts * per_host))
emulate=(scripts/emulated_hosts.sh "$hosts" "$per_host")
topology=(--devices-per-host "$per_host" --inter-host-gbps "$gbps")
mkdir -p "$out"
name="$out/h${hosts}x${per_host}_g${gbps}_s${seed}_$kind"

for rate in 0 "$gbps"; do
  "${emulate[@]}" "$rate" -- "$bin" bench comm --samples 30 --seed "$seed" --batch "$batch" \
    --show 0 -o "${name}_comm_g$rate.jsonl" > "${name}_comm_g$rate.log" 2>&1
done
echo "== the shipped model with the hosts' links, on the all-to-alls measured there (raw clock)"
for rate in 0 "$gbps"; do
  link=$rate
  [ "$rate" = 0 ] && link=1000  # unshaped: the veth's own speed, far above the flat model's
  "$bin" validate --data "${name}_comm_g$rate.jsonl" --raw --devices-per-host "$per_host" \
    --inter-host-gbps "$link"
done

pool="$out/pool_${kind}_${profile}_s$seed"
[ -d "$pool" ] || "$bin" synth --profile "$profile" "${pool_args[@]}" --batch "$batch" \
  --seed "$seed" -o "$pool" > /dev/null 2>&1
tasks="$pool/tasks.json"
[ -f "$tasks" ] || "$bin" tasks --pool "$pool" "${task_args[@]}" --seed "$seed" -o "$tasks" \
  > /dev/null 2>&1
echo "== $tasks on $hosts hosts x $per_host devices at $gbps GB/s: searched on the hosts and not"
"${emulate[@]}" "$gbps" -- "$bin" eval --tasks "$tasks" --devices "$ranks" "${topology[@]}" \
  --algos torchrec,neuroshard,neuroshard:flat --plan-threads 1 --raw-clock \
  -o "${name}_eval.jsonl" 2>&1 | grep -v "^eval: [0-9]*/"
"$bin" eval-report "${name}_eval.jsonl" --against neuroshard:flat
