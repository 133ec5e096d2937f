#!/usr/bin/env bash
# Builds nmt and its tests with AddressSanitizer + UndefinedBehaviorSanitizer (NMT_SANITIZE=ON,
# in build-asan/) and runs the whole test suite under them, the nmt processes the tests start
# included. Clean means: every test passes and no process wrote a sanitizer report.
#   scripts/sanitize.sh [ctest args...]     e.g. scripts/sanitize.sh -R Fuzz
# Env: NMT_ASAN_BUILD_DIR (default build-asan), NMT_JOBS (default: all cores).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${NMT_ASAN_BUILD_DIR:-$ROOT/build-asan}"
JOBS="${NMT_JOBS:-$(nproc)}"

cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNMT_SANITIZE=ON >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"

# Reports go to files as well as stderr, so one from a process whose exit status a test does not
# look at (a child killed on purpose, say) still fails the run.
REPORTS="$BUILD_DIR/sanitizer-reports"
rm -rf "$REPORTS" && mkdir -p "$REPORTS"
export ASAN_OPTIONS="log_path=$REPORTS/asan:log_exe_name=1:halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:detect_invalid_pointer_pairs=0"
export UBSAN_OPTIONS="log_path=$REPORTS/ubsan:log_exe_name=1:halt_on_error=1:print_stacktrace=1"
export LSAN_OPTIONS="suppressions=$ROOT/tests/sanitizer/lsan.supp:print_suppressions=0"

status=0
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" "$@" || status=$?

if compgen -G "$REPORTS/*" >/dev/null; then
  echo "sanitize.sh: sanitizer reports in $REPORTS:" >&2
  for f in "$REPORTS"/*; do
    echo "==== $f" >&2
    head -n 60 "$f" >&2
  done
  exit 1
fi
if ((status != 0)); then
  echo "sanitize.sh: tests failed under the sanitizers (no sanitizer report written)" >&2
  exit "$status"
fi
echo "sanitize.sh: clean: all tests passed under ASan + UBSan, no reports"
