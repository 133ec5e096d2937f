#!/usr/bin/env bash
# Back-translation and distillation on Multi30k en→de, end to end, and one table of the results
# (docs/workflows.md explains each step for your own data).
#
#   scripts/pipeline_multi30k.sh [--quick] [--work DIR] [--part all|bt|distill] [--teachers 1|2]
#
#   --quick     the same steps with small budgets, 2,000-line subsets of B and train, and
#               200-line subsets of val and test: a smoke test (36 minutes on the 2-core AMD EPYC
#               (Zen 4), most of them beside the test suite: docs/workflows.md); its figures say
#               nothing about quality
#   --work      where every step's outputs go (default runs/pipeline_multi30k, with --quick
#               runs/pipeline_multi30k_quick). A step whose outputs exist is skipped, and training
#               runs and translations resume, so an interrupted pipeline continues where it stopped.
#   --part      bt: only the back-translation rows (about 2 hours on 2 cores); distill: only the
#               teacher and student rows (about 2.5 hours); all (the default): both, one table
#   --teachers  2 (the default): the student learns the ensemble of the seed-1 and seed-2 teachers;
#               1: it learns the seed-1 teacher alone (row student-distilled-1; no seed-2 teacher
#               is trained), which can share a --work directory with a 2-teacher run
#
# Environment: NMT (default build/nmt), THREADS (default 2), NMT_DATA_FROM (see Data), and the
# budgets: training steps, so that a busy machine changes the time, not the result, and the lines
# kept of the data (defaults without / with --quick):
#   EN_DE_STEPS    2000 / 100   each en→de run of the back-translation half
#   DE_EN_STEPS    2000 / 100   the de→en model that back-translates B
#   TEACHER_STEPS  6000 / 200   each teacher
#   STUDENT_STEPS  3000 / 100   each student
#   VALID_EVERY     500 / 100   steps between validations (and checkpoints) of every run
#   SUBSET_LINES      0 / 2000  lines of B and train kept (0: all)
#   EVAL_LINES        0 / 200   lines of val and test kept (0: all)
# A step already done in the work directory does not run again for a new budget: give a new --work.
#
# Data: data/multi30k when present; else copied from $NMT_DATA_FROM or ../shared/data/multi30k
# when one exists, else downloaded by scripts/get_data.sh (scripts/bench_lib.sh's ensure_multi30k,
# as scripts/reproduce_multi30k.sh).
#
# Steps:
#   data      A = the first 14,500 pairs of train (parallel), B = the other 14,500 (its German
#             only, as monolingual text; its English only for the topline)
#   baseline  en→de on A
#   de_en     de→en on A, which translates B with beam 5 (bt-beam) and by sampling (bt-sampling)
#   bt-*      en→de on A + BT(B): beam, sampling, and the better of the two by validation BLEU
#             tagged "<BT>" (bt-tagged)
#   topline   en→de on A + B with the real English
#   teacher   the en→de recipe on all of train, seeds 1 and 2, ensembled (with --teachers 1, seed
#             1 alone); it translates train.en with beam 5 (sequence-level distillation, Kim &
#             Rush 2016)
#   students  configs/multi30k_en_de_student.json (one decoder layer) on the teacher's output
#             (student-distilled, with --teachers 1 student-distilled-1) and on the real targets
#             (student-real), same budget
#   table     test_2016_flickr BLEU (beam 5, the recipe's length penalty 1.4) and chrF2 by
#             nmt eval, and translation speed (beam 5, THREADS threads) of teachers and students
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

QUICK=0
WORK=""
PART=all
TEACHERS=2
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --work) WORK="$2"; shift ;;
    --part) PART="$2"; shift ;;
    --teachers) TEACHERS="$2"; shift ;;
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; exit 0 ;;
    *) echo "pipeline_multi30k.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
case "$PART" in
  all | bt | distill) ;;
  *) echo "pipeline_multi30k.sh: --part is all, bt or distill, not '$PART'" >&2; exit 2 ;;
esac
case "$TEACHERS" in
  1 | 2) ;;
  *) echo "pipeline_multi30k.sh: --teachers is 1 or 2, not '$TEACHERS'" >&2; exit 2 ;;
esac
NMT="${NMT:-build/nmt}"
THREADS="${THREADS:-2}"
[[ -x "$NMT" ]] || { echo "pipeline_multi30k.sh: $NMT not built (run scripts/setup.sh)" >&2; exit 1; }

# The budgets: the environment's, else these (see the header).
if [[ $QUICK == 1 ]]; then
  WORK="${WORK:-runs/pipeline_multi30k_quick}"
  EN_DE_STEPS="${EN_DE_STEPS:-100}"
  DE_EN_STEPS="${DE_EN_STEPS:-100}"
  TEACHER_STEPS="${TEACHER_STEPS:-200}"
  STUDENT_STEPS="${STUDENT_STEPS:-100}"
  VALID_EVERY="${VALID_EVERY:-100}"
  SUBSET_LINES="${SUBSET_LINES:-2000}"
  EVAL_LINES="${EVAL_LINES:-200}"
else
  WORK="${WORK:-runs/pipeline_multi30k}"
  # 2,000 steps: about 15 minutes in bf16 on 2 cores; 6,000: the 45-minute recipe there.
  EN_DE_STEPS="${EN_DE_STEPS:-2000}"
  DE_EN_STEPS="${DE_EN_STEPS:-2000}"
  TEACHER_STEPS="${TEACHER_STEPS:-6000}"
  STUDENT_STEPS="${STUDENT_STEPS:-3000}"
  VALID_EVERY="${VALID_EVERY:-500}"
  SUBSET_LINES="${SUBSET_LINES:-0}"
  EVAL_LINES="${EVAL_LINES:-0}"
fi
for v in EN_DE_STEPS DE_EN_STEPS TEACHER_STEPS STUDENT_STEPS VALID_EVERY; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] ||
    { echo "pipeline_multi30k.sh: $v is a number of steps (1 or more), not '${!v}'" >&2; exit 2; }
done
for v in SUBSET_LINES EVAL_LINES; do
  [[ ${!v} =~ ^[0-9]+$ ]] ||
    { echo "pipeline_multi30k.sh: $v is a number of lines (0: all), not '${!v}'" >&2; exit 2; }
done
mkdir -p "$WORK"
D="$WORK/data"
M=data/multi30k
source scripts/bench_lib.sh

log() { echo "== $(date +%H:%M:%S) $*"; }

# Runs "$@" once: a step marked done is skipped.
once() {
  local name="$1"
  shift
  if [[ -e "$WORK/$name.done" ]]; then
    log "$name: done before"
    return
  fi
  log "$name"
  "$@"
  touch "$WORK/$name.done"
}

# 1. Data.
get_data() {
  ensure_multi30k "$M/test_2016_flickr.de"
  mkdir -p "$D"
  head -n 14500 $M/train.en >"$D/A.en"
  head -n 14500 $M/train.de >"$D/A.de"
  tail -n +14501 $M/train.en >"$D/B.en"
  tail -n +14501 $M/train.de >"$D/B.de"
  local f
  for f in train.en train.de val.en val.de test_2016_flickr.en test_2016_flickr.de; do
    [[ -e $M/$f ]] && cp "$M/$f" "$D/$f"
  done
  if [[ $SUBSET_LINES -gt 0 ]]; then
    for f in B.en B.de train.en train.de; do
      head -n "$SUBSET_LINES" "$D/$f" >"$D/$f.tmp" && mv "$D/$f.tmp" "$D/$f"
    done
  fi
  if [[ $EVAL_LINES -gt 0 ]]; then
    for f in val.en val.de test_2016_flickr.en test_2016_flickr.de; do
      head -n "$EVAL_LINES" "$D/$f" >"$D/$f.tmp" && mv "$D/$f.tmp" "$D/$f"
    done
  fi
}
once data get_data

# A run's config: a recipe with data.train set to corpora (SRC TGT [TAG] triples as
# "src|tgt|tag" words) and a step budget.
write_config() {
  local recipe="$1" out="$2" steps="$3" seed="$4"
  shift 4
  python3 - "$recipe" "$out" "$steps" "$seed" "$VALID_EVERY" "$THREADS" "$D" "$@" <<'PY'
import json, sys
recipe, out, steps, seed, every, threads, data = sys.argv[1:8]
c = json.load(open(recipe))
# The recipe's validation pair, from the work directory's copies (subsets with --quick).
for key in ("valid_src", "valid_tgt"):
    c["data"][key] = data + "/" + c["data"][key].rsplit("/", 1)[1]
corpora = []
for spec in sys.argv[8:]:
    src, tgt, tag = (spec.split("|") + [""])[:3]
    corpora.append({"src": src, "tgt": tgt, **({"tag": tag} if tag else {})})
for key in ("train_src", "train_tgt"):
    c["data"].pop(key, None)
c["data"]["train"] = corpora
c["train"].update({"max_steps": int(steps), "max_time": 0, "seed": int(seed),
                   "threads": int(threads), "valid_every": int(every),
                   "save_every": int(every)})
json.dump(c, open(out, "w"), indent=1)
PY
}

# Trains run NAME from its config, resuming a run that has checkpoints (and what --resume reads).
train() {
  local name="$1" run="$WORK/$1"
  if [[ -e $run/config.json && -e $run/metrics.jsonl ]] &&
    compgen -G "$run/checkpoints/ckpt-*" >/dev/null; then
    "$NMT" train --run-dir "$run" --resume
  else
    rm -rf "$run"
    "$NMT" train --config "$WORK/$name.json" --run-dir "$run"
  fi
}

# NAME.test.json: BLEU and chrF2 of test_2016_flickr, beam 5, as nmt eval --json prints them.
evaluate() {  # NAME CHECKPOINT...
  local name="$1"
  shift
  local args=()
  for c in "$@"; do args+=(--checkpoint "$c"); done
  "$NMT" eval "${args[@]}" --threads "$THREADS" --src "$D/test_2016_flickr.en" \
    --ref "$D/test_2016_flickr.de" --json >"$WORK/$name.test.json"
}

# Writes NAME's config, trains it and scores it on test (a table row's figures as soon as they
# exist): RECIPE STEPS SEED CORPUS...
run_once() {
  local name="$1" recipe="$2" steps="$3" seed="$4"
  shift 4
  write_config "$recipe" "$WORK/$name.json" "$steps" "$seed" "$@"
  once "$name" train "$name"
  [[ $name == de_en ]] || once "$name.eval" evaluate "$name" "$WORK/$name"
}

EN_DE=configs/multi30k_en_de.json
DE_EN=configs/multi30k_de_en.json
STUDENT=configs/multi30k_en_de_student.json

translate_job() {  # OUTPUT CHECKPOINT... -- FLAGS...: resumable, with progress
  local out="$1"
  shift
  "$NMT" translate --threads "$THREADS" --output "$out" --resume --progress "$@"
}

# 2. Back-translation.
back_translation() {
  run_once baseline $EN_DE "$EN_DE_STEPS" 1 "$D/A.en|$D/A.de"
  run_once topline $EN_DE "$EN_DE_STEPS" 1 "$D/A.en|$D/A.de" "$D/B.en|$D/B.de"
  run_once de_en $DE_EN "$DE_EN_STEPS" 1 "$D/A.de|$D/A.en"
  once bt-beam.translate translate_job "$D/bt-beam.en" --checkpoint "$WORK/de_en" \
    --input "$D/B.de" --beam 5
  once bt-sampling.translate translate_job "$D/bt-sampling.en" --checkpoint "$WORK/de_en" \
    --input "$D/B.de" --sampling --seed 1
  run_once bt-beam $EN_DE "$EN_DE_STEPS" 1 "$D/A.en|$D/A.de" "$D/bt-beam.en|$D/B.de"
  run_once bt-sampling $EN_DE "$EN_DE_STEPS" 1 "$D/A.en|$D/A.de" "$D/bt-sampling.en|$D/B.de"

  # The better BT variant by validation BLEU (never the test set) gets the tag.
  local beam sampling best=sampling
  beam=$(val_bleu bt-beam)
  sampling=$(val_bleu bt-sampling)
  python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)' \
    "$beam" "$sampling" && best=beam
  echo "$best" >"$WORK/bt-tagged.variant"
  log "bt-tagged tags the $best back-translation (validation BLEU: beam $beam, sampling $sampling)"
  run_once bt-tagged $EN_DE "$EN_DE_STEPS" 1 "$D/A.en|$D/A.de" "$D/bt-$best.en|$D/B.de|<BT>"
}
val_bleu() { python3 -c 'import json,sys; print("%.2f" % json.load(open(sys.argv[1]))["best_value"])' \
  "$WORK/$1/checkpoints/best/state.json"; }

# 3. Distillation.
# Sentences/s of beam 5 over test_2016_flickr (1,000 lines): the better of two runs.
speed() {  # NAME CHECKPOINT...
  local name="$1"
  shift
  local args=() best=0
  for c in "$@"; do args+=(--checkpoint "$c"); done
  for _ in 1 2; do
    local s
    s=$("$NMT" translate "${args[@]}" --threads "$THREADS" --beam 5 \
      --input "$D/test_2016_flickr.en" --output /dev/null 2>&1 |
      sed -n 's/.*(\([0-9.]*\) sentences\/s.*/\1/p')
    best=$(python3 -c 'import sys; print(max(float(sys.argv[1]), float(sys.argv[2])))' "$best" "$s")
  done
  echo "$best" >"$WORK/$name.speed"
}

# With --teachers 1 the student learns teacher-seed1 alone, under names of its own (distill-1,
# train.distilled-1.de, student-distilled-1), so that both variants can share a work directory.
distillation() {
  local teachers=("$WORK/teacher-seed1") job=distill student=student-distilled
  local distilled="$D/train.distilled.de"
  if [[ $TEACHERS == 1 ]]; then
    job=distill-1 student=student-distilled-1 distilled="$D/train.distilled-1.de"
  fi
  run_once teacher-seed1 $EN_DE "$TEACHER_STEPS" 1 "$D/train.en|$D/train.de"
  if [[ $TEACHERS == 2 ]]; then
    run_once teacher-seed2 $EN_DE "$TEACHER_STEPS" 2 "$D/train.en|$D/train.de"
    teachers+=("$WORK/teacher-seed2")
    once teacher.eval evaluate teacher "${teachers[@]}"
  fi
  once "$job.translate" translate_job "$distilled" \
    --checkpoint "${teachers[@]}" --input "$D/train.en" --beam 5
  run_once student-real $STUDENT "$STUDENT_STEPS" 1 "$D/train.en|$D/train.de"
  run_once "$student" $STUDENT "$STUDENT_STEPS" 1 "$D/train.en|$distilled"
  local name
  for name in teacher-seed1 student-real "$student"; do
    once "$name.speed" speed "$name" "$WORK/$name"
  done
  [[ $TEACHERS == 1 ]] || once teacher.speed speed teacher "${teachers[@]}"
}

[[ $PART == distill ]] || back_translation
[[ $PART == bt ]] || distillation

# 4. The table.
python3 - "$WORK" "$PART" "$TEACHERS" <<'PY' | tee "$WORK/table.md"
import json, os, re, sys
work, part, teachers = sys.argv[1], sys.argv[2], int(sys.argv[3])

def pairs(run):
    for line in open(f"{work}/{run}/train.log"):
        m = re.search(r"training data: (\d+) pairs read, (\d+) kept", line)
        if m:
            return int(m.group(2))
    return 0

def budget(run):
    ck = f"{work}/{run}/checkpoints"
    last = sorted(d for d in os.listdir(ck) if re.fullmatch(r"ckpt-\d+", d))[-1]
    s = json.load(open(f"{ck}/{last}/state.json"))
    return f"{s['step']:,} steps, {s['elapsed_s'] / 60:.0f} min"

rows = []
if part != "distill":
    bt_best = open(f"{work}/bt-tagged.variant").read().strip()
    rows += [("baseline", "baseline", "A"), ("bt-beam", "bt-beam", "A + BT(B), beam"),
             ("bt-sampling", "bt-sampling", "A + BT(B), sampling"),
             ("bt-tagged", "bt-tagged", f"A + BT(B), {bt_best}, tagged"),
             ("topline", "topline", "A + B, real English")]
if part != "bt" and teachers == 2:
    rows += [("teacher", None, "ensemble of teacher-1 and teacher-2"),
             ("teacher-1", "teacher-seed1", "recipe, seed 1"),
             ("teacher-2", "teacher-seed2", "recipe, seed 2"),
             ("student-real", "student-real", "train, real targets"),
             ("student-distilled", "student-distilled", "train, teacher's beam-5 targets")]
if part != "bt" and teachers == 1:
    rows += [("teacher-1", "teacher-seed1", "recipe, seed 1"),
             ("student-real", "student-real", "train, real targets"),
             ("student-distilled-1", "student-distilled-1", "train, teacher-1's beam-5 targets")]
speeds = {"teacher": "teacher", "teacher-1": "teacher-seed1", "student-real": "student-real",
          "student-distilled": "student-distilled", "student-distilled-1": "student-distilled-1"}
print("| row | data | training pairs | budget | BLEU (beam 5) | chrF2 | sentences/s |")
print("|---|---|---|---|---|---|---|")
for row, run, what in rows:
    r = json.load(open(f"{work}/{'teacher' if run is None else run}.test.json"))
    n = pairs("teacher-seed1" if run is None else run)
    b = "2 x " + budget("teacher-seed1") if run is None else budget(run)
    sp = speeds.get(row)
    s = open(f"{work}/{sp}.speed").read().strip() if sp else ""
    print(f"| {row} | {what} | {n:,} | {b} | {r['bleu']:.2f} | {r['chrf']:.2f} | {s} |")
print(f"\nBLEU: {r['bleu_signature']}")
PY
