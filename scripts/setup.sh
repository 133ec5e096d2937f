#!/usr/bin/env bash
# Installs nmt's Debian packages, makes the quickstart corpus, and builds build/nmt (Release).
# Safe to run again: installed packages are skipped and the build is incremental.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${NMT_BUILD_DIR:-$ROOT/build}"
JOBS="${NMT_JOBS:-$(nproc)}"

PACKAGES=(
  build-essential cmake pkg-config python3
  libtorch-dev            # LibTorch 1.13 (CPU)
  libgloo-dev             # Gloo headers: data-parallel training through c10d
  libopenblas0-openmp     # replaces the reference BLAS that libtorch-dev pulls in (~25x faster)
  libsentencepiece-dev sentencepiece
  libcli11-dev libspdlog-dev nlohmann-json3-dev
  libcpp-httplib-dev      # nmt serve's HTTP server
  zlib1g-dev              # gzip corpora (nmt prepare)
  libxxhash-dev           # the token store's checksums (XXH3)
  libgtest-dev libbenchmark-dev
  iproute2                # ip netns: the two-machine data-parallel test (scripts/two_machines.sh)
  iptables                # a firewall on one of those machines (FIREWALL=1)
  python3-torch python3-sentencepiece  # reference scripts: golden fixtures, the PyTorch peer
)

missing=()
for p in "${PACKAGES[@]}"; do
  [[ "$p" == \#* ]] && continue
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} > 0)); then
  if ! command -v apt-get >/dev/null 2>&1 || [[ "$(id -u)" != 0 ]]; then
    echo "setup.sh: these Debian packages are missing: ${missing[*]}" >&2
    echo "Install them as root, then run scripts/setup.sh again:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y ${PACKAGES[*]}" >&2
    exit 1
  fi
  echo "setup.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${PACKAGES[@]}" >/dev/null
fi

# The quickstart corpus is generated, never downloaded.
if [[ ! -s "$ROOT/data/quickstart/test.de" ]]; then
  python3 "$ROOT/scripts/make_quickstart_data.py" --out "$ROOT/data/quickstart"
fi

cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
echo "setup.sh: built $BUILD_DIR/nmt"
