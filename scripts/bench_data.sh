#!/usr/bin/env bash
# Large-corpus data benchmark: a synthetic corpus of N pairs (scripts/make_synthetic_corpus.py),
# its vocabulary, nmt prepare, and training from the store. Prints one table.
#
#   scripts/bench_data.sh N [THREADS]        e.g. scripts/bench_data.sh 1000000 2
#
# Rows: vocabulary training (the default sample of vocab.input_sentence_size lines: time, peak
# RSS); prepare with the vocabulary given (time, pairs/s, peak RSS); the store's bytes per token
# and per pair; training from the store with configs/multi30k_en_de_base.json's model: seconds
# from launch to the first step, fresh and with --resume; RSS after 100 steps (and what of it is
# the mapped store); the store's pages in two local ranks (--nproc 2: each one's resident store
# pages and their proportional share); target tok/s from the mapping against data.in_memory=true
# (ids copied into memory), two runs each, interleaved; the same model's RSS on Multi30k.
# Files go to bench/data/ (the corpus is kept for the next run of the same N).
# Env: NMT_BIN (default build/nmt), STEPS (default 100).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
N="${1:?usage: scripts/bench_data.sh N [THREADS]}"
THREADS="${2:-$(nproc)}"
NMT="${NMT_BIN:-build/nmt}"
STEPS="${STEPS:-100}"
OUT="bench/data"
CORPUS="$OUT/synthetic-$N"
RUNS="$OUT/runs-$N"
mkdir -p "$OUT"
rm -rf "$RUNS" && mkdir -p "$RUNS"

if [[ ! -s "$CORPUS.tgt" ]]; then
  echo "bench_data: generating $N pairs into $CORPUS.{src,tgt}" >&2
  /usr/bin/python3 scripts/make_synthetic_corpus.py "$N" "$CORPUS.tmp"
  mv "$CORPUS.tmp.src" "$CORPUS.src" && mv "$CORPUS.tmp.tgt" "$CORPUS.tgt"
fi

DATA=(--config configs/multi30k_en_de_base.json --set "data.train_src=$CORPUS.src"
  --set "data.train_tgt=$CORPUS.tgt" --set data.valid_src= --set data.valid_tgt=
  --set "train.threads=$THREADS")

# timed NAME COMMAND...: runs it under /usr/bin/time -v into $RUNS/NAME.{log,time}.
timed() {
  local name="$1"
  shift
  /usr/bin/time -v -o "$RUNS/$name.time" "$@" >"$RUNS/$name.log" 2>&1 ||
    { echo "bench_data: $name failed, see $RUNS/$name.log" >&2; tail -5 "$RUNS/$name.log" >&2; exit 1; }
}
wall() { sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$1" |
  awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.1f", s }'; }
peak_mb() { awk '/Maximum resident set size/ { printf "%.0f", $NF / 1024 }' "$1"; }

timed vocab "$NMT" prepare "${DATA[@]}" --vocab-only --out "$RUNS/vocab"
VOCAB="$RUNS/vocab/spm.model"
timed prepare "$NMT" prepare "${DATA[@]}" --set "vocab.model=$VOCAB" --threads "$THREADS" \
  --out "$RUNS/store"
STORE="$RUNS/store"
read -r PAIRS TOKENS < <(python3 -c "
import json; h = json.load(open('$STORE/header.json'))
print(h['pairs'], h['tokens']['src'] + h['tokens']['tgt'])")
STORE_BYTES=$(du -cb "$STORE"/{tokens,offsets,lengths}.bin "$STORE/header.json" | tail -1 | cut -f1)
READ=$(python3 -c "import json; print(json.load(open('$STORE/header.json'))['counts']['read'])")

TRAIN=("${DATA[@]}" --set "data.train_store=$STORE" --set train.log_every=1
  --set train.save_every=100000 --set "train.max_steps=$STEPS")

# first_step RUN LOGFILE COMMAND...: starts the command, prints the seconds to the first training
# row of RUN/metrics.jsonl after launch (with --resume: the first row after the ones already
# there) and, once row STEPS is written, the RSS and its file-backed part (MB); waits for it.
first_step() {
  local run="$1" log="$2"
  shift 2
  local before=0
  [[ -f "$run/metrics.jsonl" ]] && before=$(grep -c '"loss"' "$run/metrics.jsonl")
  local t0
  t0=$(date +%s.%N)
  "$@" >"$log" 2>&1 &
  local pid=$! first="" rss="" file=""
  while kill -0 "$pid" 2>/dev/null; do
    local rows=0
    [[ -f "$run/metrics.jsonl" ]] && rows=$(grep -c '"loss"' "$run/metrics.jsonl" || true)
    if [[ -z "$first" && $rows -gt $before ]]; then
      first=$(python3 -c "import time; print(f'{time.time() - $t0:.1f}')")
    fi
    if [[ -z "$rss" && $rows -ge $((before + STEPS)) ]]; then
      rss=$(awk '/^VmRSS/ { printf "%.0f", $2 / 1024 }' "/proc/$pid/status" 2>/dev/null || true)
      file=$(awk '/^RssFile/ { printf "%.0f", $2 / 1024 }' "/proc/$pid/status" 2>/dev/null || true)
    fi
    sleep 0.05
  done
  wait "$pid" || { echo "bench_data: $log failed" >&2; tail -5 "$log" >&2; exit 1; }
  echo "$first ${rss:-?} ${file:-?}"
}

read -r FIRST RSS RSS_FILE < <(first_step "$RUNS/mapped" "$RUNS/mapped.log" \
  "$NMT" train "${TRAIN[@]}" --run-dir "$RUNS/mapped")
read -r RESUME _ _ < <(first_step "$RUNS/mapped" "$RUNS/resume.log" \
  "$NMT" train "${TRAIN[@]}" --run-dir "$RUNS/mapped" --resume --set "train.max_steps=$((STEPS + 5))")
# The same model on Multi30k (from text, with this vocabulary): the RSS to compare with.
source scripts/bench_lib.sh
ensure_multi30k
read -r _ RSS_M30K _ < <(first_step "$RUNS/multi30k" "$RUNS/multi30k.log" \
  "$NMT" train "${TRAIN[@]}" --run-dir "$RUNS/multi30k" --set data.train_store= \
  --set data.train_src=data/multi30k/train.en --set data.train_tgt=data/multi30k/train.de \
  --set "vocab.model=$VOCAB")
# Speed: mapped and in memory, interleaved, twice each.
RATES_MAP=() RATES_MEM=()
for round in 1 2; do
  "$NMT" train "${TRAIN[@]}" --run-dir "$RUNS/map$round" >"$RUNS/map$round.log" 2>&1
  RATES_MAP+=("$(train_rate "$RUNS/map$round/metrics.jsonl" 10)")
  "$NMT" train "${TRAIN[@]}" --run-dir "$RUNS/mem$round" --set data.in_memory=true \
    >"$RUNS/mem$round.log" 2>&1
  RATES_MEM+=("$(train_rate "$RUNS/mem$round/metrics.jsonl" 10)")
done

# Two local ranks: each one's resident store pages and their proportional share (smaps).
"$NMT" train "${TRAIN[@]}" --run-dir "$RUNS/ranks" --nproc 2 --set train.threads=1 \
  --set "train.max_steps=$((STEPS / 2))" >"$RUNS/ranks.log" 2>&1 &
LAUNCHER=$!
SHARE=""
while kill -0 "$LAUNCHER" 2>/dev/null; do
  rows=$(grep -c '"loss"' "$RUNS/ranks/metrics.jsonl" 2>/dev/null || true)
  if [[ -z "$SHARE" && ${rows:-0} -ge 10 ]]; then
    SHARE=$(for pid in $(pgrep -P "$LAUNCHER"); do
      awk -v store="$STORE" '/^[0-9a-f]+-[0-9a-f]+ / { keep = index($0, store) > 0 }
        keep && /^Rss:/ { rss += $2 } keep && /^Pss:/ { pss += $2 }
        END { printf "%.0f/%.0f ", rss / 1024, pss / 1024 }' "/proc/$pid/smaps"
    done)
  fi
  sleep 0.2
done
wait "$LAUNCHER" || { echo "bench_data: --nproc 2 failed, see $RUNS/ranks.log" >&2; exit 1; }

PREP_S=$(wall "$RUNS/prepare.time")
python3 - <<PY
n, pairs, tokens, store_bytes = $READ, $PAIRS, $TOKENS, $STORE_BYTES
prep_s = $PREP_S
rows = [
    ("synthetic corpus", f"{n:,} pairs read, {pairs:,} kept, {tokens:,} tokens"),
    ("vocabulary training (sample)", f"{float('$(wall "$RUNS/vocab.time")'):.1f} s, peak RSS {$(peak_mb "$RUNS/vocab.time"):,} MB"),
    ("prepare, vocabulary given ($THREADS threads)", f"{prep_s:.1f} s, {n / prep_s:,.0f} pairs/s, peak RSS {$(peak_mb "$RUNS/prepare.time"):,} MB"),
    ("store size", f"{store_bytes / 1e6:,.1f} MB: {store_bytes / tokens:.3f} bytes a token, "
                   f"{(store_bytes - 2 * tokens) / pairs:.2f} bytes a pair beyond 2 a token"),
    ("first step after launch, fresh", "$FIRST s"),
    ("first step after launch, --resume", "$RESUME s"),
    ("RSS after $STEPS steps", "$RSS MB (of which mapped files $RSS_FILE MB); "
                               "the same model on Multi30k: $RSS_M30K MB"),
    ("store pages, 2 local ranks (RSS/PSS each)", "${SHARE:-?} MB".strip()),
    ("train tok/s: mapped vs in memory", "${RATES_MAP[*]} vs ${RATES_MEM[*]}: "
     + f"{(${RATES_MAP[0]} + ${RATES_MAP[1]}) / (${RATES_MEM[0]} + ${RATES_MEM[1]}):.3f}x"),
]
width = max(len(r[0]) for r in rows)
print(f"bench_data.sh {n} pairs, {$THREADS} threads")
for name, value in rows:
    print(f"  {name:<{width}}  {value}")
PY
