#!/usr/bin/env bash
# Training throughput: nmt vs the PyTorch peer (scripts/peer_torch.py), same data, same
# SentencePiece model, same steps, same threads, in one run on this machine; then the machine's
# sgemm peak, measured in the same run, and the fraction of it that training turns into useful work.
#   scripts/bench_train.sh [STEPS] [THREADS]     (defaults: 100 steps, 2 threads)
# NMT_SET="KEY=VALUE ..." adds config settings to nmt's run, e.g. NMT_SET=train.precision=fp32
# (the config's precision is auto: bfloat16 products on AVX512-BF16 CPUs, else float32). The
# peer runs in float32, its default; when nmt ran in bf16, the peer runs again with --bf16
# (torch.autocast("cpu", bfloat16) around its forward pass, the one-line change a PyTorch user
# could make) and gets a ratio of its own (PEER_AUTOCAST=0 skips it). PEER names another peer
# script. The efficiency figure is taken against the float32 (sgemm) peak, and against the
# bfloat16 GEMM's where the CPU has one.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/bench_lib.sh
STEPS="${1:-100}"
THREADS="${2:-2}"
PEER="${PEER:-$ROOT/scripts/peer_torch.py}"
OUT="$ROOT/bench/train"

require_nmt
[[ -f "$PEER" ]] || { echo "peer script not found: $PEER" >&2; exit 1; }
ensure_multi30k

EXTRA=()
for kv in ${NMT_SET:-}; do EXTRA+=(--set "$kv"); done

rm -rf "$OUT" && mkdir -p "$OUT"
echo "== nmt: configs/multi30k_en_de_base.json, $STEPS steps, $THREADS threads ${NMT_SET:-}"
scripts/peak_rss.py "$OUT/nmt.rss" build/nmt train --config configs/multi30k_en_de_base.json --run-dir "$OUT/nmt" \
  --set train.max_steps="$STEPS" --set train.threads="$THREADS" --set train.log_every=10 \
  --set train.valid_every=0 --set data.valid_src= --set data.valid_tgt= "${EXTRA[@]}" 2>&1 | tee "$OUT/nmt.log" | grep -E "step|data" || true
ours=$(train_rate "$OUT/nmt/metrics.jsonl")

# run_peer NAME [FLAGS...]: the peer trains STEPS steps at THREADS threads on nmt's
# SentencePiece model; its JSON line in $OUT/NAME.json (and shown), its stderr in $OUT/NAME.log,
# its peak RSS in $OUT/NAME.rss.
run_peer() {
  local name="$1"
  shift
  scripts/peak_rss.py "$OUT/$name.rss" /usr/bin/python3 "$PEER" train --spm "$OUT/nmt/spm.model" \
    --src data/multi30k/train.en --tgt data/multi30k/train.de --steps "$STEPS" --threads "$THREADS" \
    "$@" 2>"$OUT/$name.log" | tee "$OUT/$name.json"
}
# peer_rate NAME: the target tokens/s in $OUT/NAME.json.
peer_rate() {
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tgt_tok_per_s"])' "$OUT/$1.json"
}

echo "== peer: $PEER, $STEPS steps, $THREADS threads"
run_peer peer
peer=$(peer_rate peer)

precision=$(sed -n 's/.*, precision \([a-z0-9]*\).*/\1/p' "$OUT/nmt.log" | head -1)
peer_bf16=0
if [[ "$precision" == bf16 && "${PEER_AUTOCAST:-1}" != 0 ]]; then
  echo "== peer with CPU bf16 autocast (--bf16): $STEPS steps, $THREADS threads"
  run_peer peer_bf16 --bf16
  peer_bf16=$(peer_rate peer_bf16)
fi

echo "== the machine's sgemm peak at $THREADS threads, now"
peak=$(gemm_peak "$THREADS")
mflop=$(train_flops_per_token configs/multi30k_en_de_base.json "$OUT/nmt/spm.model")

bf16_peak=$(sed -n 's/^bf16_peak_gflops \([0-9.]*\).*/\1/p' "$ROOT/bench/gemm_peak.txt")

python3 - "$ours" "$peer" "$STEPS" "$THREADS" "$(cat "$OUT/nmt.rss")" "$(cat "$OUT/peer.rss")" \
  "$peak" "$mflop" "${bf16_peak:-0}" "${precision:-?}" "$peer_bf16" <<'PY'
import sys
ours, peer, steps, threads = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
rss_ours, rss_peer = int(sys.argv[5]), int(sys.argv[6])
peak, mflop, bf16_peak = float(sys.argv[7]), float(sys.argv[8]), float(sys.argv[9])
precision, peer_bf16 = sys.argv[10], float(sys.argv[11])
print(f"\ntraining target tokens/s over {steps} steps at {threads} threads")
print(f"  nmt  : {ours:9.1f}  (precision {precision})")
print(f"  peer : {peer:9.1f}  (fp32)")
print(f"  ratio: {ours / peer:9.2f}x")
if peer_bf16 > 0:
    print(f"  peer with CPU bf16 autocast: {peer_bf16:9.1f}")
    print(f"  ratio to it                : {ours / peer_bf16:9.2f}x")
print("peak RSS while training")
print(f"  nmt  : {rss_ours:9d} kB")
print(f"  peer : {rss_peer:9d} kB")
print(f"  ratio: {rss_ours / rss_peer:9.2f}x")
useful = ours * mflop / 1e3
print(f"efficiency: {mflop:.2f} MFLOP per target token x {ours:.1f} tok/s = {useful:.1f} GFLOP/s")
print(f"  of the sgemm peak measured now ({peak:.1f} GFLOP/s at {threads} threads): {useful / peak:.1%}")
if bf16_peak > 0:
    print(f"  of the bfloat16 GEMM peak measured now ({bf16_peak:.1f} GFLOP/s): {useful / bf16_peak:.1%}")
PY
