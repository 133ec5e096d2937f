#!/usr/bin/env bash
# Sweeps beam size and length penalty on the validation set (never a test set) for one trained
# run, with `nmt eval --json`, and prints a Markdown table of BLEU / chrF2 / decoding seconds.
#
#   scripts/sweep_decoding.sh RUN_DIR SRC TGT [BEAMS] [PENALTIES]
#
#   RUN_DIR    a run directory (`--checkpoint RUN_DIR` picks best or averaged) or a checkpoint
#   SRC TGT    language suffixes of data/multi30k/val.*, e.g. de en
#   BEAMS      space-separated beam sizes, default "1 3 5 8"
#   PENALTIES  space-separated GNMT length penalties, default "0 0.6 1.0" (ignored for beam 1)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
[[ $# -ge 3 ]] || { sed -n '5,10p' "$0" >&2; exit 2; }
RUN="$1" SRC="$2" TGT="$3"
read -r -a BEAMS <<<"${4:-1 3 5 8}"
read -r -a PENALTIES <<<"${5:-0 0.6 1.0}"
NMT="${NMT:-build/nmt}"
[[ -x "$NMT" ]] || { echo "sweep_decoding.sh: $NMT not built (run scripts/setup.sh)" >&2; exit 1; }
for f in "data/multi30k/val.$SRC" "data/multi30k/val.$TGT"; do
  [[ -s "$f" ]] || { echo "sweep_decoding.sh: $f missing (scripts/get_data.sh multi30k)" >&2; exit 1; }
done

echo "| beam | length penalty | val BLEU | val chrF2 | decoding s |"
echo "|---|---|---|---|---|"
for beam in "${BEAMS[@]}"; do
  lps=("${PENALTIES[@]}")
  [[ $beam == 1 ]] && lps=(-)  # greedy search has no length penalty
  for lp in "${lps[@]}"; do
    lp_flag=()
    [[ $lp != - ]] && lp_flag=(--length-penalty "$lp")
    start=$(date +%s.%N)
    json=$("$NMT" eval --checkpoint "$RUN" --src "data/multi30k/val.$SRC" \
      --ref "data/multi30k/val.$TGT" --beam "$beam" "${lp_flag[@]}" --json 2>/dev/null)
    end=$(date +%s.%N)
    python3 - "$beam" "$lp" "$start" "$end" "$json" <<'PY'
import json, sys
beam, lp, start, end, doc = sys.argv[1:]
r = json.loads(doc)
print(f"| {beam} | {lp} | {r['bleu']:.2f} | {r['chrf']:.2f} | {float(end) - float(start):.1f} |")
PY
  done
done
