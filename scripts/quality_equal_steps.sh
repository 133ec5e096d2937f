#!/usr/bin/env bash
# BLEU after equal steps, the protocol docs/performance.md uses to check that a speed change does
# not cost quality: configs/multi30k_en_de_base.json (CONFIG to change) for STEPS steps with
# warm-up over the same STEPS, one SentencePiece model for every run, 1 thread each, every
# (setting, seed) run side by side, seeds 1 and 2 (SEEDS to change). Val is the trainer's greedy
# validation at the last step (decoded in the run's precision); test is `nmt eval --checkpoint RUN
# --beam 1` (float32) on test_2016_flickr, by the setting's binary. Each SETTING is as in scripts/bench_env.sh: "default",
# or VAR=VALUE, set:KEY=VALUE and bin:PATH items separated by commas.
# Prints a Markdown table, one row per run, then the mean of each setting over the seeds.
#   scripts/quality_equal_steps.sh STEPS OUT_DIR SETTING...
#   e.g. scripts/quality_equal_steps.sh 800 runs/q set:train.precision=fp32 set:train.precision=bf16
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/bench_lib.sh
[[ $# -ge 3 ]] || { sed -n '2,11p' "$0" >&2; exit 2; }
STEPS="$1" OUT="$2"
shift 2
SETTINGS=("$@")
SEEDS=(${SEEDS:-1 2})
TEST=data/multi30k/test_2016_flickr
require_nmt
ensure_multi30k
rm -rf "$OUT" && mkdir -p "$OUT"
CONFIG="${CONFIG:-configs/multi30k_en_de_base.json}"
common=(--config "$CONFIG" --set train.max_steps="$STEPS"
  --set train.warmup_steps="$STEPS" --set train.threads=1 --set train.log_every=100)
SPM=$(shared_vocab "$OUT/vocab" "${common[@]}" --set train.valid_every=0 --set data.valid_src= \
  --set data.valid_tgt=)

name_of() { echo "$1" | tr -c 'A-Za-z0-9_.=-' '_' | sed 's/_$//'; }
pids=()
for setting in "${SETTINGS[@]}"; do
  parse_setting "$setting"
  for seed in "${SEEDS[@]}"; do
    run="$OUT/$(name_of "$setting")-seed$seed"
    env "${SETTING_VARS[@]}" "$SETTING_BIN" train "${common[@]}" "${SETTING_SETS[@]}" \
      --set train.seed="$seed" --set vocab.model="$SPM" --run-dir "$run" >"$run.log" 2>&1 &
    pids+=($!)
  done
done
for pid in "${pids[@]}"; do wait "$pid" || { echo "a run failed: see $OUT/*.log" >&2; exit 1; }; done

echo "| setting | seed | target tokens seen | val BLEU | val chrF2 | val ppl | test BLEU | test chrF2 | test ppl |"
echo "|---|---|---|---|---|---|---|---|---|"
for setting in "${SETTINGS[@]}"; do
  parse_setting "$setting"
  for seed in "${SEEDS[@]}"; do
    run="$OUT/$(name_of "$setting")-seed$seed"
    env "${SETTING_VARS[@]}" "$SETTING_BIN" eval --checkpoint "$run/checkpoints/$(ls "$run/checkpoints" | sort | tail -1)" \
      --src "$TEST.en" --ref "$TEST.de" --beam 1 --threads 1 --json >"$run.test.json" 2>/dev/null
    python3 - "$setting" "$seed" "$run/metrics.jsonl" "$run.test.json" <<'PY'
import json, sys
setting, seed, metrics, test = sys.argv[1:5]
rows = [json.loads(l) for l in open(metrics)]
tokens = sum(r["tgt_tokens"] for r in rows if "loss" in r)
val = [r for r in rows if "valid_bleu" in r][-1]
t = json.load(open(test))
print(f"| {setting} | {seed} | {tokens:,} | {val['valid_bleu']:.2f} | {val['valid_chrf']:.2f} "
      f"| {val['valid_ppl']:.2f} | {t['bleu']:.2f} | {t['chrf']:.2f} | {t['ppl']:.2f} |")
PY
  done
done | tee "$OUT/table.md"
python3 - "$OUT/table.md" <<'PY'
import collections, sys
cols = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = [x.strip() for x in line.strip().strip("|").split("|")]
    cols[f[0]].append([float(x) for x in f[3:]])
for setting, rows in cols.items():
    mean = [sum(c) / len(c) for c in zip(*rows)]
    print(f"| {setting} | mean | | " + " | ".join(f"{m:.2f}" for m in mean) + " |")
PY
