#!/usr/bin/env bash
# Ensemble cost: nmt translate of Multi30k test_2016_flickr with one checkpoint and with an
# ensemble of N copies of it (N models' work), greedy and beam 5, alternating in one run; prints
# each time and the ratio ensemble / one model (the goal: at most N + 0.1).
#   scripts/bench_ensemble.sh CHECKPOINT [N] [THREADS] [REPEATS]   (defaults: 2, 2, 3)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/bench_lib.sh
CKPT="$1"
N="${2:-2}"
THREADS="${3:-2}"
REPEATS="${4:-3}"
SRC=data/multi30k/test_2016_flickr.en
require_nmt
ensure_multi30k data/multi30k/test_2016_flickr.de
ensemble=()
for ((i = 0; i < N; i++)); do ensemble+=(--checkpoint "$CKPT"); done
seconds() {  # the translation time nmt logs, model loading excluded
  build/nmt translate "$@" --threads "$THREADS" --input "$SRC" --output /dev/null 2>&1 |
    sed -n 's/.*translated [0-9]* lines in \([0-9.]*\) s.*/\1/p'
}
for beam in 1 5; do
  one=0 many=0
  for ((r = 0; r < REPEATS; r++)); do
    a=$(seconds --checkpoint "$CKPT" --beam "$beam")
    b=$(seconds "${ensemble[@]}" --beam "$beam")
    echo "beam $beam repeat $r: one model ${a} s, ensemble of $N ${b} s"
    one=$(echo "$one + $a" | bc -l) many=$(echo "$many + $b" | bc -l)
  done
  printf "beam %s, %s threads: ensemble of %s / one model = %.2f (goal <= %s.1)\n" \
    "$beam" "$THREADS" "$N" "$(echo "$many / $one" | bc -l)" "$N"
done
