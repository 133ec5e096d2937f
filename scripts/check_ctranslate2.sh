#!/usr/bin/env bash
# Checks `nmt export --format ctranslate2` against a real CTranslate2 build: translates
# test_2016_flickr with nmt and with the exported model (greedy and beam 5, the same length
# limits), prints the share of identical lines, the BLEU of both and both speeds at 1 and 2
# threads (sentences/s and target tokens/s, same run), CTranslate2 int8 included.
#
#   scripts/check_ctranslate2.sh --checkpoint RUN_OR_CKPT [--ct2-source DIR] [--ct2-prefix DIR]
#                                [--work DIR] [--threads "1 2"]
#
# CTranslate2 is built for the CPU (OpenBLAS for float32, Ruy for int8; no MKL) from
# --ct2-source, or from a clone of github.com/OpenNMT/CTranslate2 v4.8.1 with its submodules
# in third_party/ctranslate2 (ignored by git), and installed into --ct2-prefix (default
# third_party/ctranslate2/install); an installed prefix is reused. Needs libopenblas-dev,
# libopenblas-openmp-dev, libcpuinfo-dev, libsentencepiece-dev and bc. Not run by CI:
# CTranslate2 is no Debian package.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NMT="$ROOT/build/nmt"
CKPT=""
SRC_DIR=""
PREFIX="$ROOT/third_party/ctranslate2/install"
WORK="$ROOT/third_party/ctranslate2/check"
THREADS="1 2"
# Debian's python3 has python3-sentencepiece; another python3 first on PATH may not.
PY="${PYTHON:-$([[ -x /usr/bin/python3 ]] && echo /usr/bin/python3 || echo python3)}"
while (($#)); do
  case "$1" in
    --checkpoint) CKPT="$2"; shift ;;
    --ct2-source) SRC_DIR="$2"; shift ;;
    --ct2-prefix) PREFIX="$2"; shift ;;
    --work) WORK="$2"; shift ;;
    --threads) THREADS="$2"; shift ;;
    *) echo "check_ctranslate2.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[[ -n "$CKPT" ]] || { echo "check_ctranslate2.sh: --checkpoint is required" >&2; exit 2; }
DATA="$ROOT/data/multi30k"
[[ -s "$DATA/test_2016_flickr.en" ]] || "$ROOT/scripts/get_data.sh"
mkdir -p "$WORK"

# 1. CTranslate2, built once.
if [[ ! -f "$PREFIX/include/ctranslate2/translator.h" ]]; then
  if [[ -z "$SRC_DIR" ]]; then
    SRC_DIR="$ROOT/third_party/ctranslate2/src"
    [[ -d "$SRC_DIR" ]] || git clone --recursive --branch v4.8.1 --depth 1 \
      https://github.com/OpenNMT/CTranslate2.git "$SRC_DIR"
  fi
  # Ruy needs cpuinfo; Debian's libcpuinfo-dev ships CMake files with a wrong prefix, so a
  # two-line package config points at its library instead.
  SHIM="$WORK/cpuinfo-shim"; mkdir -p "$SHIM"
  cat > "$SHIM/cpuinfo-config.cmake" <<'CMAKE'
add_library(cpuinfo::cpuinfo SHARED IMPORTED)
set_target_properties(cpuinfo::cpuinfo PROPERTIES IMPORTED_LOCATION
  /usr/lib/x86_64-linux-gnu/libcpuinfo.so.0 INTERFACE_INCLUDE_DIRECTORIES /usr/include)
CMAKE
  cmake -S "$SRC_DIR" -B "$WORK/ct2-build" -DCMAKE_BUILD_TYPE=Release -DWITH_MKL=OFF \
    -DOPENMP_RUNTIME=COMP -DWITH_OPENBLAS=ON -DWITH_RUY=ON -DBUILD_CLI=OFF \
    -DRUY_FIND_CPUINFO=ON -Dcpuinfo_DIR="$SHIM" -DCMAKE_INSTALL_PREFIX="$PREFIX"
  cmake --build "$WORK/ct2-build" -j "$(nproc)"
  cmake --install "$WORK/ct2-build"
fi
LIBDIR="$PREFIX/lib"; [[ -d "$LIBDIR" ]] || LIBDIR="$PREFIX/lib64"

# 2. The test program.
CT2_BIN="$WORK/ct2_translate"
g++ -std=c++17 -O2 "$ROOT/scripts/ct2/ct2_translate.cpp" -o "$CT2_BIN" -I"$PREFIX/include" \
  -L"$LIBDIR" -lctranslate2 -lsentencepiece -Wl,-rpath,"$LIBDIR"

# 3. Export, float32 and int8. The length limits and penalty come from the checkpoint's config.
rm -rf "$WORK/model-f32" "$WORK/model-int8"
"$NMT" export --checkpoint "$CKPT" --format ctranslate2 --output "$WORK/model-f32"
"$NMT" export --checkpoint "$CKPT" --format ctranslate2 --output "$WORK/model-int8" \
  --quantization int8
# A run directory and its checkpoints hold the same config.json and SentencePiece model.
read -r A B CAP LP SPM < <("$PY" - "$CKPT" <<'PY'
import json, os, sys
d = sys.argv[1]
c = json.load(open(os.path.join(d, "config.json")))
spm = "spm.model"
if not os.path.exists(os.path.join(d, spm)):
    sys.exit("check_ctranslate2.sh: needs a joint vocabulary (spm.model)")
print(c["decode"]["max_len_a"], c["decode"]["max_len_b"], c["model"]["max_positions"] - 1,
      c["decode"]["length_penalty"], os.path.join(d, spm))
PY
)
SRC="$DATA/test_2016_flickr.en"; REF="$DATA/test_2016_flickr.de"

# Target tokens of an output file: its pieces plus one EOS a line, counted alike for both.
tokens_of() { "$PY" - "$SPM" "$1" <<'PY'
import sys, sentencepiece as s
p = s.SentencePieceProcessor(model_file=sys.argv[1])
print(sum(len(p.encode(l.rstrip("\n"))) + 1 for l in open(sys.argv[2], encoding="utf-8")))
PY
}
bleu_of() { "$NMT" eval --hyp "$1" --ref "$REF" --json |
  "$PY" -c 'import json,sys; print("%.2f" % json.load(sys.stdin)["bleu"])'; }
same_share() { "$PY" - "$1" "$2" <<'PY'
import sys
a = open(sys.argv[1], encoding="utf-8").read().splitlines()
b = open(sys.argv[2], encoding="utf-8").read().splitlines()
print(f"{100.0 * sum(x == y for x, y in zip(a, b)) / max(len(a), 1):.1f}")
PY
}
lines=$(wc -l < "$SRC")
printf "%-34s %7s %9s %10s %8s %8s\n" run threads sent/s tgt_tok/s BLEU same%
for beam in 1 5; do
  for t in $THREADS; do
    ref_out="$WORK/nmt.b$beam.t$t"
    secs=$("$NMT" translate --checkpoint "$CKPT" --beam "$beam" --threads "$t" --input "$SRC" \
      --output "$ref_out" 2>&1 | sed -n 's/.*translated [0-9]* lines in \([0-9.]*\) s.*/\1/p')
    tok=$(tokens_of "$ref_out")
    printf "%-34s %7s %9.1f %10.1f %8s %8s\n" "nmt beam $beam" "$t" \
      "$(echo "$lines/$secs" | bc -l)" "$(echo "$tok/$secs" | bc -l)" "$(bleu_of "$ref_out")" -
    for kind in f32 int8; do
      ct=float32; [[ $kind == int8 ]] && ct=int8
      out="$WORK/ct2-$kind.b$beam.t$t"
      secs=$("$CT2_BIN" "$WORK/model-$kind" "$SPM" "$SRC" "$out" --beam "$beam" --threads "$t" \
        --compute-type "$ct" --length-penalty "$LP" --max-len-a "$A" --max-len-b "$B" \
        --cap "$CAP" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["seconds"])')
      tok=$(tokens_of "$out")
      printf "%-34s %7s %9.1f %10.1f %8s %8s\n" "ctranslate2 $ct beam $beam" "$t" \
        "$(echo "$lines/$secs" | bc -l)" "$(echo "$tok/$secs" | bc -l)" "$(bleu_of "$out")" \
        "$(same_share "$ref_out" "$out")"
    done
  done
done
