#!/usr/bin/env bash
# Transformer vs RNN-Bahdanau vs RNN-Luong on Multi30k en->de after the same wall-clock training
# budget each (one after the other, same threads): trains each shipped recipe for MINUTES, stopped
# by SIGINT (which saves a checkpoint), then scores that last checkpoint on test_2016_flickr
# (cased sacreBLEU and chrF2, beam 5 and greedy). Prints a Markdown table. No validation runs
# during the budget. The Transformer recipe's Noam schedule warms up over 4,000 steps, more than
# a short budget reaches, so here it trains with the RNN recipes' schedule shape instead
# (TRANSFORMER_SETS; set it empty for the recipe as shipped).
#   scripts/compare_archs.sh [MINUTES] [THREADS] [OUT_DIR]   (defaults: 12 2 runs/compare)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/bench_lib.sh
MINUTES="${1:-12}"
THREADS="${2:-2}"
TRANSFORMER_SETS="${TRANSFORMER_SETS---set train.lr_schedule=inverse_sqrt --set train.lr=0.001 --set train.warmup_steps=500}"
OUT="${3:-runs/compare}"
TEST=data/multi30k/test_2016_flickr
[ -f "$TEST.en" ] || { echo "no $TEST.en: run scripts/get_data.sh multi30k first" >&2; exit 1; }
mkdir -p "$OUT"
NAMES=(transformer rnn_bahdanau rnn_luong)
CONFIGS=(configs/multi30k_en_de_base.json configs/multi30k_en_de_rnn.json
         configs/multi30k_en_de_rnn_luong.json)
SETS=("$TRANSFORMER_SETS" "" "")
for i in "${!NAMES[@]}"; do
  run="$OUT/${NAMES[$i]}"
  rm -rf "$run"
  # SIGINT stops training at the next step boundary with a checkpoint; exit status 130.
  status=0
  timeout -s INT "${MINUTES}m" build/nmt train --config "${CONFIGS[$i]}" --run-dir "$run" \
    --set train.threads="$THREADS" --set train.valid_every=0 ${SETS[$i]} > "$run.train.log" 2>&1 \
    || status=$?
  # 124: timeout stopped it (the trainer saved and exited on the signal).
  if [ "$status" -ne 0 ] && [ "$status" -ne 124 ]; then
    echo "training ${NAMES[$i]} failed ($status):" >&2; tail -5 "$run.train.log" >&2; exit 1
  fi
done
echo "| model | config | steps | parameters | train tgt tok/s | test BLEU (beam 5) | chrF2 | BLEU (greedy) |"
echo "|---|---|---|---|---|---|---|---|"
for i in "${!NAMES[@]}"; do
  run="$OUT/${NAMES[$i]}"
  params=$(sed -n 's/.*model: [a-z]* \([0-9]*\) parameters.*/\1/p' "$run.train.log")
  last="$(ls -d "$run"/checkpoints/ckpt-* | tail -1)"
  steps=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['step'])" "$last/state.json")
  rate=$(train_rate "$run/metrics.jsonl" 1)
  build/nmt eval --checkpoint "$last" --src "$TEST.en" --ref "$TEST.de" --threads "$THREADS" \
    --beam 5 --json > "$run.beam5.json"
  build/nmt eval --checkpoint "$last" --src "$TEST.en" --ref "$TEST.de" --threads "$THREADS" \
    --beam 1 --json > "$run.greedy.json"
  python3 - "${NAMES[$i]}" "${CONFIGS[$i]}" "$steps" "$params" "$rate" "$run.beam5.json" \
    "$run.greedy.json" <<'PY'
import json, sys
name, config, steps, params, rate, beam, greedy = sys.argv[1:]
b, g = json.load(open(beam)), json.load(open(greedy))
print(f"| {name} | `{config}` | {steps} | {int(params):,} | {float(rate):,.0f} | "
      f"{b['bleu']:.2f} | {b['chrf']:.2f} | {g['bleu']:.2f} |")
PY
done
