#!/usr/bin/env bash
# Builds nmt and its tests against a CUDA LibTorch, such as the one inside pip's torch.
#   scripts/gpu_build.sh [BUILD_DIR]                     (default: build-gpu)
# Environment:
#   TORCH_PYTHON  the python3 whose torch package to build against (default: python3)
#   NMT_DEPS      a prefix holding SentencePiece, CLI11, spdlog, fmt, nlohmann/json and GoogleTest
#                 when they are not installed system-wide (scripts/gpu_deps.sh makes one)
#   NMT_TARGETS   targets to build (default: all)
#   NMT_JOBS      parallel jobs (default: all cores)
# The link and include flags such a LibTorch needs are detected by cmake/nmt_torch.cmake.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build-gpu}"
PY="${TORCH_PYTHON:-python3}"
prefix="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
[[ -n "${NMT_DEPS:-}" ]] && prefix="$prefix;$NMT_DEPS"
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
cmake -S "$ROOT" -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix"
targets=()
for t in ${NMT_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$BUILD" -j "${NMT_JOBS:-$(nproc)}" "${targets[@]}"
echo "gpu_build.sh: built $BUILD/nmt"
