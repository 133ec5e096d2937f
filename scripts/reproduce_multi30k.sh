#!/usr/bin/env bash
# Reproduces one row of the README's Multi30k table end to end: gets the data, trains the shipped
# recipe (averaging its checkpoints at the end when the recipe says so), decodes test_2016_flickr
# with the recipe's decoding (beam) and greedily, and scores both with `nmt eval --json`.
#
#   scripts/reproduce_multi30k.sh DIRECTION [RUN_DIR] [-- extra train flags]
#
#   DIRECTION  en_de | de_en | en_fr    (configs/multi30k_DIRECTION.json)
#   RUN_DIR    default runs/multi30k_DIRECTION. An existing run is resumed (bit-exact), so an
#              interrupted reproduction continues where it stopped.
#   extra      e.g. -- --set train.max_time=45m   (the budgeted variant)
#   SEEDS      environment, e.g. SEEDS="1 2": trains one run per seed (RUN-seedS, each with the
#              whole budget: the budget is per model) and scores their ensemble
#              (RUN-ensemble.{beam,greedy}.json) beside each run's own rows.
#
# Data: data/multi30k when present; else copied from $NMT_DATA_FROM or ../shared/data/multi30k
# when one exists, else downloaded by scripts/get_data.sh (scripts/bench_lib.sh's ensure_multi30k).
# Prints a summary and writes RUN_DIR/test_2016_flickr.{beam,greedy}.{json,hyp}.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

usage() {
  sed -n '6,17p' "$0" >&2
  exit 2
}
[[ $# -ge 1 ]] || usage
DIRECTION="$1"
shift
case "$DIRECTION" in
  en_de | de_en | en_fr) ;;
  *) echo "reproduce_multi30k.sh: unknown direction '$DIRECTION' (en_de, de_en or en_fr)" >&2; exit 2 ;;
esac
SRC="${DIRECTION%_*}"
TGT="${DIRECTION#*_}"
RUN="runs/multi30k_$DIRECTION"
if [[ $# -ge 1 && "$1" != "--" ]]; then
  RUN="$1"
  shift
fi
[[ $# -ge 1 && "$1" == "--" ]] && shift
EXTRA=("$@")
CONFIG="configs/multi30k_$DIRECTION.json"
NMT="${NMT:-build/nmt}"
[[ -x "$NMT" ]] || { echo "reproduce_multi30k.sh: $NMT not built (run scripts/setup.sh)" >&2; exit 1; }

# 1. Data.
source scripts/bench_lib.sh
ensure_multi30k "data/multi30k/test_2016_flickr.$TGT"

# With SEEDS: each seed's run is this script's, then the ensemble of their chosen checkpoints.
if [[ -n "${SEEDS:-}" ]]; then
  members=()
  for seed in $SEEDS; do
    SEEDS="" "$0" "$DIRECTION" "$RUN-seed$seed" -- "${EXTRA[@]}" --set train.seed="$seed"
    members+=(--checkpoint "$RUN-seed$seed")
  done
  for mode in beam greedy; do
    beam_flag=()
    [[ $mode == greedy ]] && beam_flag=(--beam 1)
    "$NMT" eval "${members[@]}" --src "data/multi30k/test_2016_flickr.$SRC" \
      --ref "data/multi30k/test_2016_flickr.$TGT" "${beam_flag[@]}" --json \
      >"$RUN-ensemble.$mode.json"
  done
  python3 - "$RUN" "$DIRECTION" $SEEDS <<'PY'
import json, sys
run, direction, seeds = sys.argv[1], sys.argv[2], sys.argv[3:]
print(f"\nMulti30k {direction}, test_2016_flickr, ensemble of {len(seeds)} models "
      f"(seeds {' '.join(seeds)}; the budget is per model)")
for mode in ("beam", "greedy"):
    r = json.load(open(f"{run}-ensemble.{mode}.json"))
    print(f"  {mode:6s} (beam {r['beam']}): BLEU {r['bleu']:.2f}  chrF2 {r['chrf']:.2f}")
PY
  exit 0
fi

# 2. Training (resumed when the run exists; a finished run is left as it is).
if compgen -G "$RUN/checkpoints/ckpt-*" >/dev/null; then
  echo "== resuming $RUN"
  "$NMT" train --run-dir "$RUN" --resume "${EXTRA[@]}"
else
  echo "== training $CONFIG into $RUN"
  "$NMT" train --config "$CONFIG" --run-dir "$RUN" "${EXTRA[@]}"
fi

# 3. Decoding and scoring: --checkpoint RUN takes the better of best and averaged by validation.
for mode in beam greedy; do
  beam_flag=()
  [[ $mode == greedy ]] && beam_flag=(--beam 1)
  "$NMT" eval --checkpoint "$RUN" --src "data/multi30k/test_2016_flickr.$SRC" \
    --ref "data/multi30k/test_2016_flickr.$TGT" "${beam_flag[@]}" \
    --hyp-out "$RUN/test_2016_flickr.$mode.hyp" --json >"$RUN/test_2016_flickr.$mode.json"
done

# 4. Summary: the README's columns.
python3 - "$RUN" "$DIRECTION" <<'PY'
import json, os, re, sys
run, direction = sys.argv[1], sys.argv[2]
# The newest complete checkpoint's state holds the run's last step and training clock; the
# metrics rows stop at the last logged interval, before the final partial one. A save cut short
# leaves ckpt-N.tmp-PID, which the full match skips.
ckdir = f"{run}/checkpoints"
ckpts = sorted(d for d in os.listdir(ckdir) if re.fullmatch(r"ckpt-\d+", d))
state = json.load(open(os.path.join(ckdir, ckpts[-1], "state.json"))) if ckpts else {}
steps = state.get("step", 0)
secs = state.get("elapsed_s", 0.0)
print(f"\nMulti30k {direction}, test_2016_flickr, {run} ({steps} steps, "
      f"training time {int(secs // 3600)}:{int(secs % 3600 // 60):02d}:{int(secs % 60):02d})")
for mode in ("beam", "greedy"):
    r = json.load(open(f"{run}/test_2016_flickr.{mode}.json"))
    print(f"  {mode:6s} (beam {r['beam']}): BLEU {r['bleu']:.2f}  chrF2 {r['chrf']:.2f}  "
          f"BLEU lowercased {r['bleu_lowercase']:.2f}  checkpoint {r['checkpoint']}")
print(f"  BLEU signature: {r['bleu_signature']}")
print(f"  lowercased:     {r['bleu_lowercase_signature']}")
print(f"  chrF2 signature: {r['chrf_signature']}")
PY
