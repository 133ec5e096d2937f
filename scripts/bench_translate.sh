#!/usr/bin/env bash
# Translation speed and quality: nmt greedy and beam 5 vs the PyTorch peer's greedy
# (scripts/peer_torch.py translate, which re-decodes the whole prefix at every step), on
# Multi30k test_2016_flickr en->de, with models trained for the same steps in this run.
#   scripts/bench_translate.sh [STEPS] [THREADS]     (defaults: 800 steps, 2 threads)
# Environment: WARMUP (Noam warm-up for both trainers, default STEPS), RETRAIN=1 to retrain
# models left by an earlier run in bench/translate, PEER (default scripts/peer_torch.py).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/bench_lib.sh
STEPS="${1:-800}"
THREADS="${2:-2}"
WARMUP="${WARMUP:-$STEPS}"
PEER="${PEER:-$ROOT/scripts/peer_torch.py}"
OUT="$ROOT/bench/translate"
SRC=data/multi30k/test_2016_flickr.en
REF=data/multi30k/test_2016_flickr.de

require_nmt
[[ -f "$PEER" ]] || { echo "peer script not found: $PEER" >&2; exit 1; }
ensure_multi30k "$REF"

CKPT="$OUT/nmt/checkpoints/$(printf 'ckpt-%08d' "$STEPS")"
if [[ "${RETRAIN:-0}" == 1 || ! -f "$CKPT/model.pt" || ! -f "$OUT/peer.pt" ]]; then
  rm -rf "$OUT" && mkdir -p "$OUT"
  echo "== training nmt: configs/multi30k_en_de_base.json, $STEPS steps, warm-up $WARMUP, $THREADS threads"
  build/nmt train --config configs/multi30k_en_de_base.json --run-dir "$OUT/nmt" \
    --set train.max_steps="$STEPS" --set train.threads="$THREADS" \
    --set train.warmup_steps="$WARMUP" --set train.save_every="$STEPS" \
    --set train.valid_every=0 --set data.valid_src= --set data.valid_tgt= >"$OUT/nmt_train.log" 2>&1
  echo "== training peer: same steps, warm-up, threads and SentencePiece model"
  /usr/bin/python3 "$PEER" train --spm "$OUT/nmt/spm.model" --src data/multi30k/train.en \
    --tgt data/multi30k/train.de --steps "$STEPS" --warmup "$WARMUP" --threads "$THREADS" \
    --save "$OUT/peer.pt" >"$OUT/peer_train.json" 2>"$OUT/peer_train.log"
else
  echo "== reusing the models in $OUT (RETRAIN=1 to train again)"
fi

# Runs nmt translate and prints "sentences/s target-tokens/s" from its closing log line.
nmt_translate() {
  local beam="$1" out="$2"
  shift 2
  build/nmt translate --checkpoint "$CKPT" --beam "$beam" --threads "$THREADS" \
    --input "$SRC" --output "$out" "$@" 2>"$out.log"
  translate_rate "$out.log"
}
bleu() { build/nmt eval --hyp "$1" --ref "$REF" --json 2>/dev/null; }

echo "== translating $(wc -l <"$SRC") sentences of $SRC at $THREADS threads"
read -r g_sps g_tps < <(nmt_translate 1 "$OUT/nmt.greedy.de")
read -r b_sps b_tps < <(nmt_translate 5 "$OUT/nmt.beam5.de")
read -r qg_sps qg_tps < <(nmt_translate 1 "$OUT/nmt.greedy.int8.de" --quantize int8)
read -r qb_sps qb_tps < <(nmt_translate 5 "$OUT/nmt.beam5.int8.de" --quantize int8)
/usr/bin/python3 "$PEER" translate --ckpt "$OUT/peer.pt" --spm "$OUT/nmt/spm.model" \
  --src "$SRC" --out "$OUT/peer.greedy.de" --threads "$THREADS" >"$OUT/peer_translate.json"

python3 - "$OUT/peer_translate.json" "$(bleu "$OUT/peer.greedy.de")" "$STEPS" "$THREADS" \
  "nmt greedy" "$g_sps" "$g_tps" "$(bleu "$OUT/nmt.greedy.de")" \
  "nmt beam 5" "$b_sps" "$b_tps" "$(bleu "$OUT/nmt.beam5.de")" \
  "greedy int8" "$qg_sps" "$qg_tps" "$(bleu "$OUT/nmt.greedy.int8.de")" \
  "beam 5 int8" "$qb_sps" "$qb_tps" "$(bleu "$OUT/nmt.beam5.int8.de")" <<'PY'
import json, sys
peer = json.load(open(sys.argv[1]))
p_sps, p_tps = peer["sent_per_s"], peer["tok_per_s"]
rows = [(a[0], float(a[1]), float(a[2]), json.loads(a[3]))
        for a in zip(*[iter(sys.argv[5:])] * 4)]
rows.append(("peer greedy", p_sps, p_tps, json.loads(sys.argv[2])))
print(f"\ntranslation of test_2016_flickr, models trained {sys.argv[3]} steps, {sys.argv[4]} threads")
print(f"  {'run':<12} {'sent/s':>9} {'tgt tok/s':>10} {'x peer sent/s':>14} {'BLEU':>6} {'chrF2':>6}")
for name, sps, tps, b in rows:
    print(f"  {name:<12} {sps:9.1f} {tps:10.1f} {sps / p_sps:13.2f}x {b['bleu']:6.2f} {b['chrf']:6.2f}")
print(f"  BLEU signature: {rows[0][3]['bleu_signature']}")
PY
