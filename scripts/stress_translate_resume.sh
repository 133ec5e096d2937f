#!/usr/bin/env bash
# Kills `nmt translate --output` twice with SIGKILL at random moments, resumes it with --resume
# each time, and checks that the finished file is byte-identical to an uninterrupted run's.
# Prints one line a try and a summary; exits 1 if any try differed.
#
#   scripts/stress_translate_resume.sh CHECKPOINT INPUT [TRIES] [-- translate flags]
#
# Default: 3 tries; flags --beam 5 --threads 2. The kills come 2-20 s after each (re)start.
# Work files go to a temporary directory, removed at the end.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NMT="${NMT:-$ROOT/build/nmt}"
[[ $# -ge 2 ]] || { sed -n 2,9p "$0" >&2; exit 2; }
CKPT="$1" INPUT="$2"
shift 2
TRIES=3
if [[ $# -gt 0 && "$1" != "--" ]]; then TRIES="$1"; shift; fi
[[ $# -gt 0 && "$1" == "--" ]] && shift
FLAGS=("$@")
[[ ${#FLAGS[@]} -gt 0 ]] || FLAGS=(--beam 5 --threads 2)
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
job() { "$NMT" translate --checkpoint "$CKPT" --input "$INPUT" "${FLAGS[@]}" --output "$@"; }

start=$(date +%s)
job "$WORK/whole.txt" 2>"$WORK/whole.log"
whole_s=$(($(date +%s) - start))
echo "uninterrupted: $(wc -l <"$WORK/whole.txt") lines in ${whole_s} s"
failed=0
for try in $(seq 1 "$TRIES"); do
  out="$WORK/try$try.txt"
  kills=""
  for k in 1 2; do
    resume=()
    [[ $k -gt 1 ]] && resume=(--resume)
    # exec: $! is nmt itself, not a subshell that would leave it running when killed.
    (exec "$NMT" translate --checkpoint "$CKPT" --input "$INPUT" "${FLAGS[@]}" --output "$out" \
      "${resume[@]}" 2>>"$WORK/try$try.log") &
    pid=$!
    delay=$((2 + RANDOM % 19))
    sleep "$delay"
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    kills+=" ${delay}s:$(wc -l <"$out")"
  done
  job "$out" --resume 2>>"$WORK/try$try.log"
  if cmp -s "$out" "$WORK/whole.txt"; then
    echo "try $try: identical (killed after start+delay:lines written$kills)"
  else
    echo "try $try: DIFFERS (killed$kills)"
    failed=$((failed + 1))
  fi
done
echo "$((TRIES - failed)) of $TRIES tries byte-identical"
[[ $failed -eq 0 ]]
