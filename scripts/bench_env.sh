#!/usr/bin/env bash
# Training throughput under different environment settings (OpenMP wait policy, OpenBLAS kernels,
# anything nmt or its libraries read at start-up), runs interleaved in one run on this machine:
# configs/multi30k_en_de_base.json, STEPS steps a run, the first 10 not counted, one shared
# vocabulary so that only the setting differs. Each SETTING is one or more VAR=VALUE (environment),
# set:KEY=VALUE (a config setting, nmt's --set) or bin:PATH (another nmt binary, such as a build
# from before a change; default build/nmt) separated by commas, or "default" for the environment
# and config as they are.
#   scripts/bench_env.sh STEPS THREADS REPEATS SETTING...
#   e.g. scripts/bench_env.sh 40 2 2 default OMP_WAIT_POLICY=passive GOMP_SPINCOUNT=10000
#        scripts/bench_env.sh 40 2 2 set:train.precision=fp32 set:train.precision=bf16
#        scripts/bench_env.sh 40 2 2 bin:/tmp/nmt-before default
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/bench_lib.sh
[[ $# -ge 4 ]] || { sed -n '2,12p' "$0" >&2; exit 2; }
STEPS="$1" THREADS="$2" REPEATS="$3"
shift 3
SETTINGS=("$@")
OUT="$ROOT/bench/env"
require_nmt
ensure_multi30k
rm -rf "$OUT" && mkdir -p "$OUT"
bench_train_args "$STEPS" 10
common=("${BENCH_ARGS[@]}" --set train.threads="$THREADS")
SPM=$(shared_vocab "$OUT/vocab" "${common[@]}")
for ((i = 1; i <= REPEATS; i++)); do
  for setting in "${SETTINGS[@]}"; do
    parse_setting "$setting"
    run="$OUT/$(echo "$setting" | tr -c 'A-Za-z0-9_.=-' '_')-$i"
    /usr/bin/time -f '%U %S' -o "$run.cpu" env "${SETTING_VARS[@]}" "$SETTING_BIN" train \
      "${common[@]}" "${SETTING_SETS[@]}" --run-dir "$run" --set vocab.model="$SPM" >"$run.log" 2>&1
    read -r user sys <"$run.cpu"
    printf '%-40s %8s tgt tok/s  user %6.1f s  sys %5.1f s  | %s\n' "$setting" \
      "$(train_rate "$run/metrics.jsonl" 1)" "$user" "$sys" "$(grep -o 'GEMM backend: .*' "$run.log")"
  done
done
