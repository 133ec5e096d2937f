#!/usr/bin/env bash
# Data-parallel training on two "machines" made of this one: two network namespaces, each with
# its own network stack, host name and /etc/hosts, joined by a virtual Ethernet link (10.77.N.1
# and 10.77.N.2). The run directory stays on the file system both share. One torchrun agent
# runs in each, as on two real machines; node 0's host name is the master address.
#   scripts/two_machines.sh train --config C --run-dir D [more nmt arguments]
# Environment:
#   NPROC=1         processes per machine (torchrun --nproc_per_node)
#   RDZV=static     static: --master_addr of node 0's host name; c10d: --rdzv_backend c10d
#   RATE=           a rate limit on the link both ways (tc tbf, e.g. 1gbit, 200mbit); "" = none
#   FIREWALL=       1: node 1 drops the connections others open to it (iptables), as a firewall
#                   would; its own connections out (to the store on node 0) still work
#   TIMEOUT=600     seconds before both agents are stopped
#   LOGS=bench/two_machines   each node's output goes to LOGS.node0.out and LOGS.node1.out
#   NMT=build/nmt   the binary
# Needs root (ip netns, unshare) and iproute2; exits 77, saying why, when the machines cannot
# be made here.
# Prints "node0 STATUS" and "node1 STATUS" (torchrun's exit statuses).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[[ $# -gt 0 ]] || { echo "usage: scripts/two_machines.sh train --config C --run-dir D ..." >&2; exit 2; }
NPROC="${NPROC:-1}"
RDZV="${RDZV:-static}"
RATE="${RATE:-}"
FIREWALL="${FIREWALL:-}"
TIMEOUT="${TIMEOUT:-600}"
LOGS="${LOGS:-$ROOT/bench/two_machines}"
mkdir -p "$(dirname "$LOGS")"
NMT="${NMT:-$ROOT/build/nmt}"

# Names unique to this run, so that runs side by side do not meet.
id=$$
subnet="10.77.$((id % 250 + 1))"
ns=("nmt${id}a" "nmt${id}b")
hosts=("machine${id}a" "machine${id}b")
port=$((20000 + id % 20000))

cleanup() {
  for n in "${ns[@]}"; do
    ip netns del "$n" 2>/dev/null || true
    rm -rf "/etc/netns/$n"
  done
}
trap cleanup EXIT

# Both machines and their link; fails (status 1) at the first step this machine refuses.
make_machines() {
  command -v ip >/dev/null && command -v unshare >/dev/null || {
    echo "needs ip (iproute2) and unshare"
    return 1
  }
  ip netns add "${ns[0]}" && ip netns add "${ns[1]}" || return 1
  ip link add "v${id}a" netns "${ns[0]}" type veth peer name "v${id}b" netns "${ns[1]}" || return 1
  local i dev other
  for i in 0 1; do
    dev="v${id}$([[ $i == 0 ]] && echo a || echo b)"
    ip -n "${ns[$i]}" addr add "$subnet.$((i + 1))/24" dev "$dev" &&
      ip -n "${ns[$i]}" link set "$dev" up && ip -n "${ns[$i]}" link set lo up || return 1
    if [[ -n "$RATE" ]]; then
      ip netns exec "${ns[$i]}" tc qdisc add dev "$dev" root tbf rate "$RATE" burst 256kb \
        latency 100ms || return 1
    fi
    # ip netns exec mounts /etc/netns/NAME/hosts over /etc/hosts for the commands it runs. Each
    # machine knows its own name as 127.0.1.1 (Debian's installer writes that) and the other's
    # by its address (as DNS would give it).
    other=$((1 - i))
    mkdir -p "/etc/netns/${ns[$i]}" &&
      printf '127.0.0.1 localhost\n127.0.1.1 %s\n%s.%d %s\n' "${hosts[$i]}" "$subnet" \
        "$((other + 1))" "${hosts[$other]}" >"/etc/netns/${ns[$i]}/hosts" || return 1
    ip netns exec "${ns[$i]}" unshare --uts sh -c 'hostname "$0"' "${hosts[$i]}" || return 1
  done
  if [[ "$FIREWALL" == 1 ]]; then
    command -v iptables >/dev/null || { echo "FIREWALL=1 needs iptables"; return 1; }
    ip netns exec "${ns[1]}" iptables -A INPUT -p tcp --syn -j DROP || return 1
  fi
}
if ! why=$(make_machines 2>&1); then
  echo "two_machines: cannot make two machines here: $why" >&2
  exit 77
fi

if [[ "$RDZV" == c10d ]]; then
  launch=(--rdzv_backend c10d --rdzv_endpoint "${hosts[0]}:$port" --rdzv_id "job$id")
else
  launch=(--master_addr "${hosts[0]}" --master_port "$port")
fi
pids=()
for i in 1 0; do
  ip netns exec "${ns[$i]}" unshare --uts sh -c 'hostname "$0"; exec "$@"' "${hosts[$i]}" \
    timeout -k 10 "$TIMEOUT" "$ROOT/scripts/torchrun" --nnodes 2 --node_rank "$i" \
    --nproc_per_node "$NPROC" "${launch[@]}" --no_python "$NMT" "$@" >"$LOGS.node$i.out" 2>&1 &
  pids[i]=$!
done
for i in 0 1; do
  status=0
  wait "${pids[$i]}" || status=$?
  echo "node$i $status"
done
