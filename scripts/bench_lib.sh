# Shared by the bench_*.sh scripts (sourced from the repository root, not run).

# require_nmt: stop with a hint when build/nmt has not been built.
require_nmt() {
  [[ -x build/nmt ]] || { echo "build/nmt is missing: run scripts/setup.sh" >&2; exit 1; }
}

# ensure_multi30k [FILE]: copy Multi30k in from ../shared when FILE (default
# data/multi30k/train.de) is missing or empty.
ensure_multi30k() {
  if [[ ! -s "${1:-data/multi30k/train.de}" ]]; then
    scripts/get_data.sh multi30k --from "$ROOT/../shared/data/multi30k"
  fi
}

# train_rate METRICS_JSONL [SKIP]: target tokens/s over a run's logged training intervals,
# leaving out the first SKIP (warm-up) intervals. Prints it with one decimal.
train_rate() {
  python3 - "$1" "${2:-0}" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l][int(sys.argv[2]):]
if not rows:
    sys.exit(f"train_rate: {sys.argv[1]} has no training interval after the first {sys.argv[2]}; "
             "run more steps or log more often (train.log_every)")
tokens = sum(r["tgt_tokens"] for r in rows)
seconds = sum(r["tgt_tokens"] / r["tok_per_s"] for r in rows)
print(f"{tokens / seconds:.1f}")
PY
}

# translate_rate LOG: "sentences/s target-tokens/s" from the closing line of an nmt translate log.
translate_rate() {
  sed -n 's/.*translated [0-9]* lines in [0-9.]* s (\([0-9.]*\) sentences\/s, \([0-9.]*\) target tokens\/s).*/\1 \2/p' "$1"
}
