#!/usr/bin/env bash
# The scaling table of docs/performance.md: training target tokens/s and peak RSS for 1 and 2
# threads x batch_tokens 2048/4096/8192 x d_model 256/512 (configs/multi30k_en_de_base.json otherwise,
# d_ff = 4 d_model, heads = d_model / 64), then translation sentences/s of test_2016_flickr for
# beams 1, 4 and 8 at 2 threads with the model scripts/bench_translate.sh trained.
#   scripts/bench_scaling.sh [STEPS]     (default 9: the first third is warm-up and not counted)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/bench_lib.sh
STEPS="${1:-9}"
EVERY=$(( STEPS / 3 > 0 ? STEPS / 3 : 1 ))
OUT="$ROOT/bench/scaling"
SPM="$ROOT/bench/train/nmt/spm.model"

require_nmt
[[ -f "$SPM" ]] || { echo "run scripts/bench_train.sh first (its SentencePiece model is reused)" >&2; exit 1; }
rm -rf "$OUT" && mkdir -p "$OUT"

echo "| threads | batch_tokens | d_model | tgt tok/s | peak RSS (MB) |"
echo "|---|---|---|---|---|"
for threads in 1 2; do
  for bt in 2048 4096 8192; do
    for d in 256 512; do
      run="$OUT/t$threads-b$bt-d$d"
      scripts/peak_rss.py "$run.rss" build/nmt train --config configs/multi30k_en_de_base.json \
        --run-dir "$run" --set vocab.model="$SPM" --set model.d_model="$d" \
        --set model.d_ff=$((4 * d)) --set model.heads=$((d / 64)) --set train.batch_tokens="$bt" \
        --set train.threads="$threads" --set train.max_steps="$STEPS" --set train.log_every="$EVERY" \
        --set train.save_every="$STEPS" --set train.valid_every=0 --set data.valid_src= \
        --set data.valid_tgt= >"$run.log" 2>&1
      # The first interval is warm-up.
      python3 -c 'import sys; t, b, d, rate, kb = sys.argv[1:]
print(f"| {t} | {b} | {d} | {float(rate):,.0f} | {int(kb) / 1024:,.0f} |")' \
        "$threads" "$bt" "$d" "$(train_rate "$run/metrics.jsonl" 1)" "$(cat "$run.rss")"
    done
  done
done

CKPT=$(ls -d bench/translate/nmt/checkpoints/ckpt-* 2>/dev/null | tail -1 || true)
if [[ -z "$CKPT" ]]; then
  echo "no bench/translate model: run scripts/bench_translate.sh for the translation rows" >&2
  exit 0
fi
SRC=data/multi30k/test_2016_flickr.en
echo
echo "translation of $SRC ($(wc -l <"$SRC") lines) with $CKPT, 2 threads"
echo "| beam | sentences/s | target tokens/s |"
echo "|---|---|---|"
for beam in 1 4 8; do
  build/nmt translate --checkpoint "$CKPT" --beam "$beam" --threads 2 --input "$SRC" \
    --output "$OUT/beam$beam.de" 2>"$OUT/beam$beam.log"
  read -r sps tps < <(translate_rate "$OUT/beam$beam.log")
  echo "| $beam | $sps | $tps |"
done
