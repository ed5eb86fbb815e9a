#!/usr/bin/env bash
# Builds and runs the whole test suite twice: an optimized build, then an ASan+UBSan build.
# Usage: tools/run-tests.sh [--no-sanitize]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$jobs"
ctest --test-dir build -j"$jobs" --output-on-failure
if [ "${1:-}" != "--no-sanitize" ]; then
  cmake -S . -B build-asan -DGOOSE_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g"
  cmake --build build-asan -j"$jobs"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan -j"$jobs" --output-on-failure
fi
