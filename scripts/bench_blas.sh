#!/usr/bin/env bash
# Training throughput by OpenBLAS kernel choice (NMT_BLAS_CORE, src/util/blas.h), interleaved in one
# run on this machine: configs/multi30k_en_de_base.json, STEPS steps a run, the first 10 not counted.
#   scripts/bench_blas.sh [STEPS] [THREADS] [REPEATS] [CORES...]
#   (defaults: 40 steps, 2 threads, 2 repeats, cores "auto keep")
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/bench_lib.sh
STEPS="${1:-40}"
THREADS="${2:-2}"
REPEATS="${3:-2}"
shift $(($# < 3 ? $# : 3))
CORES=("$@")
((${#CORES[@]})) || CORES=(auto keep)
OUT="$ROOT/bench/blas"
require_nmt
ensure_multi30k
rm -rf "$OUT" && mkdir -p "$OUT"
common=(--config configs/multi30k_en_de_base.json --set train.threads="$THREADS" --set train.log_every=10
        --set train.valid_every=0 --set data.valid_src= --set data.valid_tgt=)
# One vocabulary for all runs, so only the products differ.
build/nmt train "${common[@]}" --run-dir "$OUT/vocab" --set train.max_steps=1 >/dev/null 2>&1
for ((i = 1; i <= REPEATS; i++)); do
  for core in "${CORES[@]}"; do
    run="$OUT/$core-$i"
    NMT_BLAS_CORE="$core" build/nmt train "${common[@]}" --run-dir "$run" \
      --set vocab.model="$OUT/vocab/spm.model" --set train.max_steps="$STEPS" >"$run.log" 2>&1
    printf 'NMT_BLAS_CORE=%-10s %8s tgt tok/s  | %s\n' "$core" "$(train_rate "$run/metrics.jsonl" 1)" \
      "$(grep -o 'GEMM backend: .*' "$run.log")"
  done
done
