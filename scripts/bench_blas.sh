#!/usr/bin/env bash
# Training throughput by OpenBLAS kernel choice (NMT_BLAS_CORE, src/util/blas.h), interleaved in one
# run on this machine (scripts/bench_env.sh with NMT_BLAS_CORE=<core> settings).
#   scripts/bench_blas.sh [STEPS] [THREADS] [REPEATS] [CORES...]
#   (defaults: 40 steps, 2 threads, 2 repeats, cores "auto keep")
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STEPS="${1:-40}"
THREADS="${2:-2}"
REPEATS="${3:-2}"
shift $(($# < 3 ? $# : 3))
CORES=("$@")
((${#CORES[@]})) || CORES=(auto keep)
exec "$ROOT/scripts/bench_env.sh" "$STEPS" "$THREADS" "$REPEATS" "${CORES[@]/#/NMT_BLAS_CORE=}"
