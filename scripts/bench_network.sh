#!/usr/bin/env bash
# Data-parallel training over a network link of a given rate: two "machines" made of this one
# (scripts/two_machines.sh: network namespaces joined by a virtual link, Gloo over TCP), one
# process of one thread on each, configs/multi30k_en_de_base.json, the link limited to each rate
# in turn (tc tbf, both ways). Checks the scaling model of docs/distributed.md on a real TCP
# stack: the gradient all-reduce hides behind backward until the link is too slow for it.
#   scripts/bench_network.sh [STEPS] [RATE ...]   (defaults: 30 steps; none 1gbit 300mbit 100mbit)
# Needs root (network namespaces). Prints per rate: target tokens/s, the all-reduce wait per step
# (sync_s: the part backward did not hide), backward per step, and the model's wire times: the
# gradients' bytes (a 2-process all-reduce sends them once each way) and the last bucket's
# (the embeddings, ready last, so never hidden) at that rate.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/bench_lib.sh
STEPS="${1:-30}"
shift || true
RATES=("$@")
[[ ${#RATES[@]} -gt 0 ]] || RATES=(none 1gbit 300mbit 100mbit)
OUT="$ROOT/bench/network"

require_nmt
ensure_multi30k
rm -rf "$OUT" && mkdir -p "$OUT"
bench_train_args "$STEPS" 5
common=("${BENCH_ARGS[@]}" --set train.threads=1 --set train.dist_timeout=600)
SPM=$(shared_vocab "$OUT/vocab" "${common[@]}")

for rate in "${RATES[@]}"; do
  limit="$rate"
  [[ "$rate" == none ]] && limit=""
  r=$(RATE="$limit" LOGS="$OUT/$rate" scripts/two_machines.sh train "${common[@]}" \
    --run-dir "$OUT/$rate" --set vocab.model="$SPM")
  [[ "$r" == *"node0 0"*"node1 0"* ]] || {
    echo "rate $rate: $r (see $OUT/$rate.node0.out)" >&2
    exit 1
  }
  echo "   rate $rate done"
done

python3 - "$STEPS" "$OUT" "${RATES[@]}" <<'PY'
import json, re, sys
steps, out, rates = sys.argv[1], sys.argv[2], sys.argv[3:]
m = re.search(r"model: \w+ (\d+) parameters, vocab (\d+) / (\d+)", open(f"{out}/vocab/train.log").read())
params, vocab = int(m[1]), int(m[2])
d_model = json.load(open("configs/multi30k_en_de_base.json"))["model"]["d_model"]
emb = vocab * d_model  # the tied embeddings (tie_embeddings "all"): the last bucket
def bits_per_s(rate):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg]?)bit", rate)
    return float(m[1]) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m[2]] if m else None
print(f"\n2 machines x 1 process x 1 thread, configs/multi30k_en_de_base.json, {steps} steps")
print(f"gradients: {params:,} parameters, {params * 4 / 1e6:.1f} MB a step; "
      f"last bucket (embeddings) {emb * 4 / 1e6:.1f} MB")
print(f"  {'link':>8} {'tok/s':>8} {'vs none':>8} {'wait/step':>10} {'backward/step':>14} "
      f"{'wire: all':>10} {'wire: last':>11}")
base = None
for rate in rates:
    every = [json.loads(l) for l in open(f"{out}/{rate}/metrics.jsonl") if '"loss"' in l]
    rows = every[1:]  # the first interval holds the start-up
    n = every[-1]["step"] - every[0]["step"]
    tokens = sum(r["tgt_tokens"] for r in rows)
    tps = tokens / sum(r["tgt_tokens"] / r["tok_per_s"] for r in rows)
    base = base or tps
    wait = sum(r["sync_s"] for r in rows) / n
    backward = sum(r["backward_s"] for r in rows) / n
    b = bits_per_s(rate)
    wire = f"{params * 32 / b * 1e3:8.0f} ms" if b else f"{'-':>10}"
    last = f"{emb * 32 / b * 1e3:9.0f} ms" if b else f"{'-':>11}"
    print(f"  {rate:>8} {tps:8.1f} {tps / base:7.2f}x {wait * 1e3:7.0f} ms {backward * 1e3:11.0f} ms "
          f"{wire} {last}")
PY
