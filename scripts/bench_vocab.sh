#!/usr/bin/env bash
# Vocabulary training on a large corpus: time, peak RSS and the vocabulary's quality, for the
# defaults and for any other settings, in one run.
#
#   scripts/bench_vocab.sh N [SETTING ...]     e.g. scripts/bench_vocab.sh 10000000
#                                                   scripts/bench_vocab.sh 2000000 vocab.input_sentence_size=500000
#
# The corpus is scripts/make_synthetic_corpus.py's N pairs (bench/data/synthetic-N, shared with
# bench_data.sh); held-out text is 20,000 pairs of another seed. Each row runs
# `nmt prepare --vocab-only` with the config of configs/multi30k_en_de_base.json (8,000 pieces,
# joint unigram) on train.threads=2 under /usr/bin/time -v, then encodes the held-out text with
# the result: pieces per whitespace token (source and target lines together). A SETTING is one
# or more --set KEY=VALUE joined by commas; "default" is the config as it is.
# Env: NMT_BIN (default build/nmt; a second binary can be compared as BIN=/path:default).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
N="${1:?usage: scripts/bench_vocab.sh N [SETTING ...]}"
shift
SETTINGS=("$@")
((${#SETTINGS[@]} > 0)) || SETTINGS=(default)
NMT="${NMT_BIN:-build/nmt}"
OUT="bench/data"
CORPUS="$OUT/synthetic-$N"
HELD="$OUT/heldout-20000"
RUNS="$OUT/vocab-$N"
mkdir -p "$OUT" "$RUNS"
if [[ ! -s "$CORPUS.tgt" ]]; then
  echo "bench_vocab: generating $N pairs into $CORPUS.{src,tgt}" >&2
  /usr/bin/python3 scripts/make_synthetic_corpus.py "$N" "$CORPUS.tmp"
  mv "$CORPUS.tmp.src" "$CORPUS.src" && mv "$CORPUS.tmp.tgt" "$CORPUS.tgt"
fi
if [[ ! -s "$HELD.tgt" ]]; then
  /usr/bin/python3 scripts/make_synthetic_corpus.py 20000 "$HELD" --seed 2
fi

printf "%-58s %10s %12s %14s\n" "setting" "seconds" "peak RSS GB" "pieces/token"
i=0
for setting in "${SETTINGS[@]}"; do
  i=$((i + 1))
  bin="$NMT"
  spec="$setting"
  if [[ "$setting" == BIN=* ]]; then  # BIN=/path/to/nmt:SETTING
    spec="${setting#BIN=}"
    bin="${spec%%:*}"
    spec="${spec#*:}"
  fi
  sets=()
  if [[ "$spec" != default ]]; then
    IFS=, read -r -a kv <<<"$spec"
    for x in "${kv[@]}"; do sets+=(--set "$x"); done
  fi
  dir="$RUNS/row$i"
  rm -rf "$dir"
  /usr/bin/time -v -o "$dir.time" "$bin" prepare --config configs/multi30k_en_de_base.json \
    --set "data.train_src=$CORPUS.src" --set "data.train_tgt=$CORPUS.tgt" --set data.valid_src= \
    --set data.valid_tgt= --set train.threads=2 "${sets[@]}" --vocab-only --out "$dir" \
    >"$dir.log" 2>&1 || { echo "bench_vocab: $setting failed, see $dir.log" >&2; tail -3 "$dir.log" >&2; continue; }
  secs=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$dir.time" |
    awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.1f", s }')
  peak=$(awk '/Maximum resident set size/ { printf "%.2f", $NF / 1048576 }' "$dir.time")
  ppt=$(/usr/bin/python3 - "$dir/spm.model" "$HELD.src" "$HELD.tgt" <<'PY'
import sys
import sentencepiece as spm
sp = spm.SentencePieceProcessor(model_file=sys.argv[1])
pieces = tokens = 0
for path in sys.argv[2:]:
    for line in open(path, encoding="utf-8", errors="replace"):
        line = line.strip()
        if not line:
            continue
        tokens += len(line.split())
        pieces += len(sp.encode(line))
print(f"{pieces / tokens:.4f}")
PY
)
  printf "%-58s %10s %12s %14s\n" "$setting" "$secs" "$peak" "$ppt"
done
