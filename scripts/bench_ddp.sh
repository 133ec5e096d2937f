#!/usr/bin/env bash
# Data-parallel training on this machine: 1 process x 2 threads against 2 processes x 1 thread
# (Gloo over loopback, `nmt train --nproc 2`), configs/multi30k_en_de_base.json, the same tokens per
# update on both sides (1 x 2 accumulates 2 batches, each of the 2 processes takes 1), rounds
# alternating because this VM is noisy.
#   scripts/bench_ddp.sh [STEPS] [ROUNDS]      (defaults: 40 steps, 2 rounds)
# Prints target tokens/s of each run, the ratio 2x1 / 1x2 per round, and the all-reduce wait per
# step of the 2-process runs (the part of communication that backward did not hide).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/bench_lib.sh
STEPS="${1:-40}"
ROUNDS="${2:-2}"
OUT="$ROOT/bench/ddp"

require_nmt
ensure_multi30k
rm -rf "$OUT" && mkdir -p "$OUT"
bench_train_args "$STEPS" 5
common=("${BENCH_ARGS[@]}")
SPM=$(shared_vocab "$OUT/vocab" "${common[@]}")

rows=()
for round in $(seq "$ROUNDS"); do
  build/nmt train "${common[@]}" --run-dir "$OUT/1x2-$round" --set vocab.model="$SPM" \
    --set train.threads=2 --set train.accum_steps=2 >"$OUT/1x2-$round.log" 2>&1
  build/nmt train "${common[@]}" --run-dir "$OUT/2x1-$round" --set vocab.model="$SPM" \
    --set train.threads=1 --nproc 2 >"$OUT/2x1-$round.log" 2>&1
  rows+=("$(train_rate "$OUT/1x2-$round/metrics.jsonl" 1)" "$(train_rate "$OUT/2x1-$round/metrics.jsonl" 1)")
  echo "   round $round done"
done

python3 - "$STEPS" "$OUT" "${rows[@]}" <<'PY'
import json, sys
steps, out = sys.argv[1], sys.argv[2]
vals = list(map(float, sys.argv[3:]))
print(f"\ntraining target tokens/s, configs/multi30k_en_de_base.json, {steps} steps, 8192 tokens an update")
print(f"  {'round':>5} {'1 proc x 2 thr':>15} {'2 proc x 1 thr':>15} {'2x1 / 1x2':>10} {'all-reduce wait/step':>21}")
ratios = []
for i in range(0, len(vals), 2):
    r = i // 2 + 1
    rows = [json.loads(l) for l in open(f"{out}/2x1-{r}/metrics.jsonl") if '"loss"' in l][1:]
    n = sum(1 for _ in rows) * 5
    wait = sum(x.get("sync_s", 0.0) for x in rows) / max(1, n)
    ratios.append(vals[i + 1] / vals[i])
    print(f"  {r:>5} {vals[i]:15.1f} {vals[i + 1]:15.1f} {ratios[-1]:9.2f}x {wait * 1000:17.1f} ms")
print(f"  mean ratio {sum(ratios) / len(ratios):.2f}x (goal >= 1.00x)")
PY
