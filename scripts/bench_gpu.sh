#!/usr/bin/env bash
# GPU throughput: nmt against the PyTorch peer (scripts/peer_torch.py) on one CUDA device,
# same data, same SentencePiece model, same steps, all in one run.
#   scripts/bench_gpu.sh [STEPS] [TRANSLATE_STEPS]      (defaults: 500 and 1000)
# 1. Training target tokens/s of configs/multi30k_en_de_base.json at 4096 and 16384 batch tokens:
#    nmt in fp32 and bf16, the peer in fp32, --tf32 and --bf16. Each side is timed over its whole
#    training loop (the first step's CUDA start-up included on both sides).
# 2. Translation of test_2016_flickr (1,000 sentences, en->de) on the GPU with models trained
#    TRANSLATE_STEPS steps at 4096 tokens: nmt greedy and beam 5, in fp32 and bf16, against the
#    peer's greedy (fp32), with each output's BLEU.
# Environment: NMT (default build-gpu/nmt, else build/nmt), PEER (default scripts/peer_torch.py),
# PYTHON (a python3 with torch and sentencepiece; default python3), DATA (a Multi30k directory;
# default data/multi30k, copied from ../shared/data/multi30k when missing), BATCHES (default
# "4096 16384").
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/bench_lib.sh
STEPS="${1:-500}"
TSTEPS="${2:-1000}"
BATCHES="${BATCHES:-4096 16384}"
PYTHON="${PYTHON:-python3}"
PEER="${PEER:-$ROOT/scripts/peer_torch.py}"
NMT="${NMT:-}"
[[ -z "$NMT" && -x build-gpu/nmt ]] && NMT=build-gpu/nmt
[[ -z "$NMT" ]] && NMT=build/nmt
DATA="${DATA:-data/multi30k}"
OUT="$ROOT/bench/gpu"

[[ -x "$NMT" ]] || { echo "$NMT is missing: scripts/gpu_build.sh builds it" >&2; exit 1; }
[[ -f "$PEER" ]] || { echo "peer script not found: $PEER" >&2; exit 1; }
if [[ ! -s "$DATA/train.de" ]]; then
  scripts/get_data.sh multi30k --from "$ROOT/../shared/data/multi30k"
  DATA=data/multi30k
fi
rm -rf "$OUT" && mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
FIRST="${BATCHES%% *}"

# nmt_train NAME BATCH STEPS [ARGS...]: an nmt training run on the GPU into $OUT/NAME.
nmt_train() {
  local name="$1" batch="$2" steps="$3"
  shift 3
  "$NMT" train --config configs/multi30k_en_de_base.json --run-dir "$OUT/$name" --device cuda \
    --set data.train_src="$DATA/train.en" --set data.train_tgt="$DATA/train.de" \
    --set data.valid_src= --set data.valid_tgt= --set train.valid_every=0 \
    --set train.batch_tokens="$batch" --set train.max_steps="$steps" --set train.log_every=10 \
    --set train.save_every="$steps" "$@" >"$OUT/$name.log" 2>&1
}
# peer_train NAME BATCH STEPS [ARGS...]: a peer training run; prints its target tokens/s.
peer_train() {
  local name="$1" batch="$2" steps="$3"
  shift 3
  "$PYTHON" "$PEER" train --spm "$SPM" --src "$DATA/train.en" --tgt "$DATA/train.de" \
    --steps "$steps" --max-tokens "$batch" --device cuda "$@" \
    >"$OUT/$name.json" 2>"$OUT/$name.log"
  "$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["tgt_tok_per_s"])' \
    "$OUT/$name.json"
}

echo "== training, $STEPS steps per run"
nmt_train "nmt-fp32-$FIRST" "$FIRST" "$STEPS"
SPM="$OUT/nmt-fp32-$FIRST/spm.model"
rows=()
for B in $BATCHES; do
  [[ "$B" == "$FIRST" ]] || nmt_train "nmt-fp32-$B" "$B" "$STEPS" --set vocab.model="$SPM"
  nmt_train "nmt-bf16-$B" "$B" "$STEPS" --set vocab.model="$SPM" --set train.precision=bf16
  rows+=("$B" "$(train_rate "$OUT/nmt-fp32-$B/metrics.jsonl")"
    "$(train_rate "$OUT/nmt-bf16-$B/metrics.jsonl")"
    "$(peer_train "peer-fp32-$B" "$B" "$STEPS")"
    "$(peer_train "peer-tf32-$B" "$B" "$STEPS" --tf32)"
    "$(peer_train "peer-bf16-$B" "$B" "$STEPS" --bf16)")
  echo "   batch $B done"
done

echo "== translation models, $TSTEPS steps at $FIRST tokens (warm-up $TSTEPS)"
nmt_train nmt-translate "$FIRST" "$TSTEPS" --set vocab.model="$SPM" \
  --set train.warmup_steps="$TSTEPS"
"$PYTHON" "$PEER" train --spm "$SPM" --src "$DATA/train.en" --tgt "$DATA/train.de" \
  --steps "$TSTEPS" --warmup "$TSTEPS" --max-tokens "$FIRST" --device cuda \
  --save "$OUT/peer.pt" >"$OUT/peer-translate.json" 2>"$OUT/peer-translate.log"
SRC="$DATA/test_2016_flickr.en"
REF="$DATA/test_2016_flickr.de"
CKPT="$OUT/nmt-translate"
nmt_translate() {
  local name="$1"
  shift
  "$NMT" translate --checkpoint "$CKPT" --device cuda --input "$SRC" --output "$OUT/$name.de" \
    "$@" 2>"$OUT/$name.log"
  echo "$name $(translate_rate "$OUT/$name.log") $("$NMT" eval --hyp "$OUT/$name.de" --ref "$REF" \
    --json 2>/dev/null | "$PYTHON" -c 'import json,sys; j=json.load(sys.stdin); print(j["bleu"], j["chrf"])')"
}
trows=()
for run in "greedy --beam 1" "beam5 --beam 5" "greedy-bf16 --beam 1 --precision bf16" \
  "beam5-bf16 --beam 5 --precision bf16"; do
  # shellcheck disable=SC2086
  trows+=("$(nmt_translate $run)")
done
"$PYTHON" "$PEER" translate --ckpt "$OUT/peer.pt" --spm "$SPM" --src "$SRC" \
  --out "$OUT/peer-greedy.de" --device cuda >"$OUT/peer-translate-greedy.json"
peer_bleu=$("$NMT" eval --hyp "$OUT/peer-greedy.de" --ref "$REF" --json 2>/dev/null)

"$PYTHON" - "$STEPS" "$TSTEPS" "$OUT/peer-translate-greedy.json" "$peer_bleu" "${#rows[@]}" \
  "${rows[@]}" "${trows[@]}" <<'PY'
import json, sys
steps, tsteps = sys.argv[1], sys.argv[2]
peer_t = json.load(open(sys.argv[3]))
peer_b = json.loads(sys.argv[4])
n = int(sys.argv[5])
rows = sys.argv[6:6 + n]
trows = sys.argv[6 + n:]
print(f"\ntraining target tokens/s, configs/multi30k_en_de_base.json, {steps} steps per run")
print(f"  {'batch':>6} {'nmt fp32':>9} {'nmt bf16':>9} {'peer fp32':>10} {'peer tf32':>10}"
      f" {'peer bf16':>10} {'best nmt / best peer':>21}")
for i in range(0, len(rows), 6):
    b, nf, nb, pf, pt, pb = rows[i], *map(float, rows[i + 1:i + 6])
    print(f"  {b:>6} {nf:9.0f} {nb:9.0f} {pf:10.0f} {pt:10.0f} {pb:10.0f}"
          f" {max(nf, nb) / max(pf, pt, pb):20.2f}x")
p_sps = peer_t["sent_per_s"]
print(f"\ntranslation of test_2016_flickr on the GPU, models trained {tsteps} steps")
print(f"  {'run':<14} {'sent/s':>9} {'tgt tok/s':>10} {'x peer greedy':>14} {'BLEU':>6} {'chrF2':>6}")
for r in trows:
    name, sps, tps, bleu, chrf = r.split()
    print(f"  {'nmt ' + name:<14} {float(sps):9.1f} {float(tps):10.1f} {float(sps) / p_sps:13.2f}x"
          f" {float(bleu):6.2f} {float(chrf):6.2f}")
print(f"  {'peer greedy':<14} {p_sps:9.1f} {peer_t['tok_per_s']:10.1f} {1:13.2f}x"
      f" {peer_b['bleu']:6.2f} {peer_b['chrf']:6.2f}")
PY
