# Shared by the bench_*.sh and Multi30k scripts (sourced from the repository root, with ROOT set
# to it; not run).

# require_nmt: stop with a hint when build/nmt has not been built.
require_nmt() {
  [[ -x build/nmt ]] || { echo "build/nmt is missing: run scripts/setup.sh" >&2; exit 1; }
}

# ensure_multi30k [FILE]: the rule every script finds Multi30k by. The data is data/multi30k;
# when FILE (default data/multi30k/train.de) is missing or empty, scripts/get_data.sh fills it,
# copying from $NMT_DATA_FROM when set, else from ../shared/data/multi30k when that exists, else
# downloading.
ensure_multi30k() {
  [[ -s "${1:-data/multi30k/train.de}" ]] && return 0
  local from="${NMT_DATA_FROM:-}"
  [[ -z $from && -d $ROOT/../shared/data/multi30k ]] && from="$ROOT/../shared/data/multi30k"
  if [[ -n $from ]]; then
    scripts/get_data.sh multi30k --from "$from"
  else
    scripts/get_data.sh multi30k
  fi
}

# bench_train_args STEPS LOG_EVERY: the training arguments the throughput benchmarks share, into
# the array BENCH_ARGS: configs/multi30k_en_de_base.json for STEPS steps, logged every LOG_EVERY
# steps, with no validation and no checkpoint before the end.
bench_train_args() {
  BENCH_ARGS=(--config configs/multi30k_en_de_base.json --set train.max_steps="$1" --set train.log_every="$2"
    --set train.valid_every=0 --set data.valid_src= --set data.valid_tgt= --set train.save_every=100000)
}

# shared_vocab DIR ARGS...: train the vocabulary once, by a one-step run of ARGS in DIR (its log in
# DIR.log), so that every run of a benchmark reads the same pieces. Prints the SentencePiece model.
shared_vocab() {
  local dir="$1"
  shift
  build/nmt train "$@" --run-dir "$dir" --set train.max_steps=1 >"$dir.log" 2>&1 ||
    { echo "shared_vocab: the one-step run failed, see $dir.log" >&2; exit 1; }
  echo "$dir/spm.model"
}

# parse_setting SETTING: a benchmark setting, "default" or items separated by commas (VAR=VALUE
# for the environment, set:KEY=VALUE for nmt's --set, bin:PATH for another nmt binary), split
# into SETTING_VARS, SETTING_SETS (--set pairs) and SETTING_BIN (default build/nmt).
parse_setting() {
  SETTING_VARS=() SETTING_SETS=() SETTING_BIN=build/nmt
  local items=() item
  [[ $1 != default ]] && IFS=, read -r -a items <<<"$1"
  for item in "${items[@]}"; do
    case $item in
      set:*) SETTING_SETS+=(--set "${item#set:}") ;;
      bin:*) SETTING_BIN="${item#bin:}" ;;
      *) SETTING_VARS+=("$item") ;;
    esac
  done
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

# gemm_peak THREADS: the machine's sgemm peak in GFLOP/s at THREADS threads, measured now: the
# best of OpenBLAS (its own kernel choice) and oneDNN on 2048³ and 4096³ products
# (tests/bench/gemm_backends.cpp, built here with g++ in a second). The full report goes to stderr
# and to bench/gemm_peak.txt, whose bf16_peak_gflops line (CPUs with AVX512-BF16) is oneDNN's
# bfloat16 GEMM on the same products.
gemm_peak() {
  local bin="$ROOT/bench/gemm_backends" report="$ROOT/bench/gemm_peak.txt"
  mkdir -p "$ROOT/bench"
  g++ -O2 -fopenmp "$ROOT/tests/bench/gemm_backends.cpp" -ldl -o "$bin"
  env -u OPENBLAS_CORETYPE "$bin" --peak "$1" 3 >"$report"
  cat "$report" >&2
  sed -n 's/^peak_gflops \([0-9.]*\).*/\1/p' "$report"
}

# train_flops_per_token CONFIG SPM: training FLOPs per target token of CONFIG's Transformer on its
# training data, counted from the model's products (3 × the forward multiply-adds × 2): the
# linear layers, the attention score and value products at the data's mean sentence lengths, and
# the output projection; source-side work is scaled by the data's source/target piece ratio
# (SentencePiece model SPM). Padding is not counted: it is not useful work.
train_flops_per_token() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
import sentencepiece as spm
cfg = json.load(open(sys.argv[1]))
sp = spm.SentencePieceProcessor(model_file=sys.argv[2])
m, data = cfg["model"], cfg["data"]
d, ff, le, ld = m["d_model"], m["d_ff"], m["encoder_layers"], m["decoder_layers"]
def pieces(path):
    lines = [l.rstrip("\n") for l in open(path, encoding="utf-8")]
    return sum(len(p) + 1 for p in sp.encode(lines)), len(lines)  # + EOS
src, n = pieces(data["train_src"])
tgt, _ = pieces(data["train_tgt"])
ls, lt, ratio = src / n, tgt / n, src / tgt
enc = le * (4 * d * d + 2 * d * ff + 2 * ls * d)              # per source token
dec = ld * (4 * d * d + 2 * d * d + 2 * d * ff + 2 * lt * d + 2 * ls * d) + d * sp.get_piece_size()
cross_kv = ld * 2 * d * d                                      # per source token
macs = ratio * (enc + cross_kv) + dec
print(f"{6 * macs / 1e6:.2f}")
PY
}
