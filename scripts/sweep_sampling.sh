#!/usr/bin/env bash
# Validation sweep of subword sampling on the Multi30k en->de recipe: trains the recipe under
# eight sampling settings at once (none; both sides at alpha 0.1, 0.2, 0.3, 0.5; source or
# target only at 0.3; both at 0.3 among the 64 best), each for SECONDS of training or 6,000
# steps, and prints each run's steps and greedy val BLEU at every validation.
#
#   scripts/sweep_sampling.sh SECONDS [RUN_ROOT] [-- extra train flags]
#
#   SECONDS   training time of each run (train.max_time; the cool-down follows it)
#   RUN_ROOT  default runs/sweep_sampling; one run directory per setting
#   NMT       environment: the binary (default build/nmt)
#   extra     e.g. -- --device cuda --set train.threads=2 (eight runs share the machine: give
#             each runs' threads a share of the cores)
# Tune on val only: the test sets are not read.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
[[ $# -ge 1 && "$1" =~ ^[0-9]+$ ]] || { sed -n '2,13p' "$0" >&2; exit 2; }
SECONDS_EACH="$1"
shift
RUNS=runs/sweep_sampling
if [[ $# -ge 1 && "$1" != "--" ]]; then
  RUNS="$1"
  shift
fi
[[ $# -ge 1 && "$1" == "--" ]] && shift
EXTRA=("$@")
NMT="${NMT:-build/nmt}"
[[ -x "$NMT" ]] || { echo "sweep_sampling.sh: $NMT not built" >&2; exit 1; }
source scripts/bench_lib.sh
ensure_multi30k "data/multi30k/val.de"
mkdir -p "$RUNS"

both() { echo --set "data.src_sampling.$1" --set "data.tgt_sampling.$1"; }
declare -A SETTINGS=(
  [none]="$(both enabled=false)"
  [both_a01]="$(both alpha=0.1)"
  [both_a02]="$(both alpha=0.2)"
  [both_a03]=""
  [both_a05]="$(both alpha=0.5)"
  [src_a03]="--set data.tgt_sampling.enabled=false"
  [tgt_a03]="--set data.src_sampling.enabled=false"
  [both_a03_nb64]="$(both nbest=64)"
)
for name in "${!SETTINGS[@]}"; do
  # shellcheck disable=SC2086  # the settings are words
  "$NMT" train --config configs/multi30k_en_de.json --run-dir "$RUNS/$name" \
    $(both alpha=0.3) ${SETTINGS[$name]} --set train.max_steps=6000 \
    --set train.max_time="$SECONDS_EACH" --set train.average_last=0 \
    --set train.average_best=false --set train.keep_last=1 "${EXTRA[@]}" \
    > "$RUNS/$name.out" 2>&1 &
done
failed=0
for job in $(jobs -p); do wait "$job" || failed=1; done
for name in none both_a01 both_a02 both_a03 both_a05 src_a03 tgt_a03 both_a03_nb64; do
  python3 - "$RUNS/$name" <<'PY'
import json, os, sys
rows = [json.loads(l) for l in open(os.path.join(sys.argv[1], "metrics.jsonl"))]
steps = max(r["step"] for r in rows if "loss" in r)
val = [r for r in rows if "valid_bleu" in r]
print(f"{os.path.basename(sys.argv[1]):14s} {steps:5d} steps | val BLEU (greedy) by step: "
      + " ".join(f"{r['step']}:{r['valid_bleu']:.2f}" for r in val))
PY
done
exit "$failed"
