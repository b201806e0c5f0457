#!/usr/bin/env bash
# Runs an MPI command with its ranks grouped as hosts on this one machine:
# each host a network namespace of its own, joined to the others through a
# bridge by a veth link shaped with tbf to GBPS each way; MPI over TCP only
# (no shared memory), so that ranks on different hosts talk through the
# shaped links and ranks on one host through the namespace's loopback.
#
#   scripts/emulated_hosts.sh HOSTS DEVICES_PER_HOST GBPS -- COMMAND [ARGS...]
#
# runs `mpirun -np HOSTS*DEVICES_PER_HOST COMMAND ARGS...`, rank r on host
# r / DEVICES_PER_HOST; GBPS 0 leaves the links unshaped (the same layout at
# the veth's own speed, to compare against). Needs root, iproute2 (ip, tc)
# and Open MPI; the hosts take 10.77.0.0/24 (one run at a time); cleans up
# the namespaces and links on exit. What it emulates: per-host link bandwidth
# and the sharing of one link by a host's devices. What it does not: the
# latency of a real network (a veth adds microseconds), or the intra-host
# links of GPUs (inside a host the ranks talk over kernel TCP).
set -euo pipefail

usage() { echo "usage: $0 HOSTS DEVICES_PER_HOST GBPS -- COMMAND [ARGS...]" >&2; exit 2; }
[[ $# -ge 5 && $4 == "--" ]] || usage
hosts=$1 per_host=$2 gbps=$3
shift 4
[[ $hosts =~ ^[0-9]+$ && $hosts -ge 2 && $hosts -le 16 ]] || { echo "$0: HOSTS is '$hosts', must be 2-16" >&2; exit 2; }
[[ $per_host =~ ^[0-9]+$ && $per_host -ge 1 ]] || { echo "$0: DEVICES_PER_HOST is '$per_host', must be at least 1" >&2; exit 2; }
[[ $gbps =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "$0: GBPS is '$gbps', must be a number (GB/s)" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "$0: needs root (network namespaces)" >&2; exit 1; }
for tool in ip tc mpirun; do
  command -v $tool > /dev/null || { echo "$0: no $tool (apt-get install iproute2 openmpi-bin)" >&2; exit 1; }
done

# tbf: rate in bits, a burst of 1 ms at that rate (at least 64 KB).
rate_bit=$(awk -v g="$gbps" 'BEGIN { printf "%.0f", g * 8e9 }')
burst=$(awk -v g="$gbps" 'BEGIN { b = g * 1e6; if (b < 65536) b = 65536; printf "%.0f", b }')
prefix=es$$
bridge=${prefix}br

cleanup() {
  for ((h = 0; h < hosts; h++)); do
    ip netns del "${prefix}h$h" 2> /dev/null || true
    ip link del "${prefix}b$h" 2> /dev/null || true
  done
  ip link del "$bridge" 2> /dev/null || true
}
trap cleanup EXIT

ip link add "$bridge" type bridge
ip addr add 10.77.0.254/24 dev "$bridge"
ip link set "$bridge" up
for ((h = 0; h < hosts; h++)); do
  ns=${prefix}h$h
  ip netns add "$ns"
  ip link add "${prefix}b$h" type veth peer name "${prefix}n$h"
  ip link set "${prefix}n$h" netns "$ns"
  ip link set "${prefix}b$h" master "$bridge" up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "10.77.0.$((h + 1))/24" dev "${prefix}n$h"
  ip -n "$ns" link set "${prefix}n$h" up
  [[ $gbps == 0 || $gbps == 0.0 ]] && continue
  # The host's outgoing traffic, and (on the bridge's end) its incoming.
  ip netns exec "$ns" tc qdisc add dev "${prefix}n$h" root tbf rate "$rate_bit" burst "$burst" latency 100ms
  tc qdisc add dev "${prefix}b$h" root tbf rate "$rate_bit" burst "$burst" latency 100ms
done

launcher=$(mktemp "${TMPDIR:-/tmp}/emulated_hosts.XXXXXX")
trap 'cleanup; rm -f "$launcher"' EXIT
cat > "$launcher" << EOF
#!/usr/bin/env bash
exec ip netns exec ${prefix}h\$((OMPI_COMM_WORLD_RANK / $per_host)) "\$@"
EOF
chmod +x "$launcher"

echo "emulated_hosts.sh: $hosts hosts x $per_host ranks, ${gbps} GB/s each way per host (0: unshaped)" >&2
# The ranks reach mpirun's PMIx server through the bridge's address.
PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include=10.77.0.0/24 \
mpirun --allow-run-as-root --oversubscribe -np $((hosts * per_host)) \
  --mca btl self,tcp --mca btl_tcp_if_include 10.77.0.0/24 \
  "$launcher" "$@"
