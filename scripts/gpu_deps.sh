#!/usr/bin/env bash
# nmt's C++ dependencies for a machine that has a CUDA LibTorch (pip's torch) but not Debian's
# -dev packages: SentencePiece, CLI11, spdlog with its fmt, nlohmann/json, GoogleTest, and
# cpp-httplib (nmt serve) with the OpenSSL and Brotli headers its header includes.
#   scripts/gpu_deps.sh fetch DIR           downloads the Debian bookworm packages into DIR
#                                           (on a Debian machine: apt-get download, no root)
#   scripts/gpu_deps.sh unpack DIR PREFIX   unpacks them into PREFIX (needs only dpkg-deb);
#                                           then build with NMT_DEPS=PREFIX/usr scripts/gpu_build.sh
set -euo pipefail
PACKAGES=(libsentencepiece0 libsentencepiece-dev libxxhash-dev libcli11-dev libspdlog1.10 libspdlog-dev libfmt9
  libfmt-dev nlohmann-json3-dev libgtest-dev libgmock-dev
  libcpp-httplib0.11 libcpp-httplib-dev libssl3 libssl-dev libbrotli1 libbrotli-dev)
case "${1:-}" in
  fetch)
    mkdir -p "$2"
    (cd "$2" && apt-get download "${PACKAGES[@]}")
    ;;
  unpack)
    mkdir -p "$3"
    for deb in "$2"/*.deb; do dpkg-deb -x "$deb" "$3"; done
    echo "gpu_deps.sh: unpacked $(ls "$2"/*.deb | wc -l) packages into $3 (NMT_DEPS=$3/usr)"
    ;;
  *)
    sed -n '2,8p' "$0" >&2
    exit 2
    ;;
esac
