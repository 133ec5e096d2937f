#!/usr/bin/env bash
# Translates the quickstart test split with a trained model (greedy unless BEAM is set) and prints
# the exact-match sentence accuracy; exits non-zero below the 90% goal.
#   [BEAM=K] scripts/check_quickstart.sh [RUN_OR_CHECKPOINT_DIR]   (default: runs/quickstart)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
CKPT="${1:-runs/quickstart}"
HYP="$(mktemp)"
trap 'rm -f "$HYP"' EXIT
build/nmt translate --checkpoint "$CKPT" --beam "${BEAM:-1}" --input data/quickstart/test.en --output "$HYP"
python3 - "$HYP" data/quickstart/test.de <<'PY'
import sys
hyp = open(sys.argv[1], encoding="utf-8").read().split("\n")[:-1]
ref = open(sys.argv[2], encoding="utf-8").read().split("\n")[:-1]
assert len(hyp) == len(ref), f"{len(hyp)} hypotheses for {len(ref)} references"
exact = sum(h == r for h, r in zip(hyp, ref))
print(f"exact match: {exact}/{len(ref)} = {100.0 * exact / len(ref):.1f}%")
sys.exit(0 if exact >= 0.9 * len(ref) else 1)
PY
