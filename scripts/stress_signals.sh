#!/usr/bin/env bash
# Sends SIGTERM or SIGINT to `nmt train` at random moments and checks that every try ends as
# documented: exit status 143 (SIGTERM) or 130 (SIGINT), the "received" line in the log, and a
# checkpoint at the last logged step (step 0 when the signal came before the first step) that
# `nmt translate` loads. Prints one line a try and a summary; exits 1 if any try failed.
#
#   scripts/stress_signals.sh [--quick] [--tries N] [--signals TERM,INT] [--delay MIN-MAX]
#                             [--seed S] [--bin PATH] [--work DIR]
#
# Default: the quickstart recipe as a user runs it (configs/quickstart.json, a row every step,
# no periodic saves), signalled MIN-MAX seconds (10-30) after launch.
# --quick: what CI runs. The quickstart model on 2,000 pairs with a shared vocabulary, validation
# every 10 steps and a save every 6. The tries cycle through six moments: at start-up (the first
# log line: set-up), right after the row of step 1 (the first steps), of step 10 (during the
# validation that follows it), of step 6 (during the save), and twice MIN-MAX (0-3) s after
# start-up (anywhere).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NMT="$ROOT/build/nmt"
WORK=""
TRIES=20
SIGNALS="TERM"
DELAY=""
SEED=1
QUICK=0
while (($# > 0)); do
  case "$1" in
    --quick) QUICK=1 ;;
    --tries) TRIES="$2"; shift ;;
    --signals) SIGNALS="$2"; shift ;;
    --delay) DELAY="$2"; shift ;;
    --seed) SEED="$2"; shift ;;
    --bin) NMT="$2"; shift ;;
    --work) WORK="$2"; shift ;;
    *) echo "stress_signals.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
if [[ -z "$WORK" ]]; then
  WORK="$(mktemp -d)"
  trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$WORK"
IFS=, read -r -a SIGS <<< "$SIGNALS"
[[ -n "$DELAY" ]] || DELAY=$([[ $QUICK == 1 ]] && echo 0-3 || echo 10-30)
DMIN="${DELAY%-*}"
DMAX="${DELAY#*-}"
RANDOM="$SEED"

ARGS=(--config "$ROOT/configs/quickstart.json" --set train.log_every=1 --set train.max_steps=100000)
if [[ $QUICK == 1 ]]; then
  python3 "$ROOT/scripts/make_quickstart_data.py" --out "$WORK/data" --train 2000 --valid 40 \
    --test 5 >/dev/null
  ARGS+=(--set "data.train_src=$WORK/data/train.en" --set "data.train_tgt=$WORK/data/train.de"
         --set "data.valid_src=$WORK/data/valid.en" --set "data.valid_tgt=$WORK/data/valid.de"
         --set train.valid_every=10 --set train.save_every=6 --set train.keep_last=2)
  # One vocabulary for all tries: a try's time goes to training, not to SentencePiece.
  "$NMT" train "${ARGS[@]}" --run-dir "$WORK/vocab" --set train.max_steps=1 \
    --set train.valid_every=0 >"$WORK/vocab.log" 2>&1
  ARGS+=(--set "vocab.model=$WORK/vocab/spm.model")
else
  ARGS+=(--set train.save_every=1000000)
fi
echo "hello world" >"$WORK/in.txt"

# Fractional seconds in [DMIN, DMAX], in steps of 10 ms.
random_delay() {
  local span=$(((DMAX - DMIN) * 100))
  local cs=$((DMIN * 100 + (span > 0 ? (RANDOM * 32768 + RANDOM) % (span + 1) : 0)))
  printf '%d.%02d' $((cs / 100)) $((cs % 100))
}

# Polls LOG every 10 ms until it holds TEXT or the process is gone.
wait_for_line() {
  local n
  for ((n = 0; n < 6000; n++)); do
    grep -qF "$3" "$2" 2>/dev/null && return 0
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.01
  done
}

failed=0
declare -A by_status=()
for ((i = 1; i <= TRIES; i++)); do
  sig="${SIGS[$(((i - 1) % ${#SIGS[@]}))]}"
  want=$([[ "$sig" == INT ]] && echo 130 || echo 143)
  run="$WORK/run-$i"
  rm -rf "$run"
  delay=$(random_delay)
  "$NMT" train "${ARGS[@]}" --run-dir "$run" >"$run.log" 2>&1 &
  pid=$!
  moment="after ${delay}s"
  if [[ $QUICK == 1 ]]; then
    # The first log line comes once main() routes the signals.
    wait_for_line "$pid" "$run.log" "nmt train: run dir"
    case $(((i - 1) % 6)) in
      0) delay=0; moment="at start-up" ;;
      1) delay=0; moment="after step 1"; wait_for_line "$pid" "$run.log" "step 1 |" ;;
      2) delay=0; moment="in validation"; wait_for_line "$pid" "$run.log" "step 10 |" ;;
      3) delay=0; moment="in a save"; wait_for_line "$pid" "$run.log" "step 6 |" ;;
      *) moment="${delay}s after start-up" ;;
    esac
  fi
  sleep "$delay"
  kill -"$sig" "$pid" 2>/dev/null || true
  status=0
  wait "$pid" || status=$?
  by_status[$status]=$((${by_status[$status]:-0} + 1))
  problem=""
  last_row=$(grep -o '"step":[0-9]*' "$run/metrics.jsonl" 2>/dev/null | tail -1 | cut -d: -f2 || true)
  step=${last_row:-0}
  ckpt=$(printf '%s/checkpoints/ckpt-%08d' "$run" "$step")
  if [[ $status != "$want" ]]; then
    problem="exit status $status, expected $want: $( (grep -aE 'corrupt|invalid|error' \
      "$run.log" | grep -v 'invalid UTF-8' | head -1) || true)"
  elif ! grep -q "SIG$sig received" "$run.log"; then
    problem="no 'SIG$sig received' line in the log"
  elif [[ ! -f "$ckpt/model.pt" ]]; then
    problem="no checkpoint at the last logged step $step"
  elif ! "$NMT" translate --checkpoint "$ckpt" --input "$WORK/in.txt" >/dev/null 2>"$run.translate"
  then
    problem="$ckpt does not load: $(tail -1 "$run.translate" || true)"
  fi
  if [[ -n "$problem" ]]; then
    failed=$((failed + 1))
    echo "try $i: SIG$sig $moment: FAILED: $problem"
  else
    echo "try $i: SIG$sig $moment: exit $status, checkpoint at step $step loads"
    rm -rf "$run" "$run.log" "$run.translate"
  fi
done
summary=""
for s in "${!by_status[@]}"; do summary+=" $s:${by_status[$s]}"; done
echo "stress_signals: $TRIES tries, $failed failed; exit statuses (status:count):$summary"
((failed == 0))
