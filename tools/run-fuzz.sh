#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan: fuzz/CMakeLists.txt) and runs each one for a
# bounded time, one target at a time, one process each. CI runs it after tools/run-tests.sh.
#
# The corpora are built here: the seeds fuzz_make_seeds writes (cuts of ../shared, which must not
# be committed, and files goose itself writes), fuzz/seeds/<target>/ and fuzz/regressions/<target>/.
# Fails on any crash, leak, hang (-timeout), out-of-memory or sanitizer report; the input is kept
# under <corpus>/findings/<target>/: once fixed, copy it into fuzz/regressions/<target>/, which
# every test run replays (ctest fuzz_regressions.<target>).
#
# Usage: tools/run-fuzz.sh [--time SECONDS] [--target NAME]... [--corpus DIR]
#                          [--build-only | --no-build]
#   --time     seconds per target (default 45)
#   --target   run only these targets (default: every fuzz/<name>_fuzz.cc)
#   --corpus   corpora, logs and findings (default build-fuzz/corpus; kept between runs)
# Per-target libFuzzer flags come from the target's "// run-fuzz flags:" line, its dictionary
# from fuzz/dicts/<name>.dict. Prints runs, exec/s and coverage (cov: edges, ft: features).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

time_per_target=45
targets=()
corpus=build-fuzz/corpus
build_only=0
no_build=0
while [ $# -gt 0 ]; do
  case "$1" in
    --time) time_per_target=$2; shift 2 ;;
    --target) targets+=("$2"); shift 2 ;;
    --corpus) corpus=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    --no-build) no_build=1; shift ;;
    *) echo "run-fuzz.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
jobs=$(nproc)
start=$(date +%s)

# clang cannot build src/ops (GCC vector builtins and target pragmas): the fuzz build links the
# kernels of the release build (the one tools/run-tests.sh configures the same way).
if [ "$no_build" = 0 ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j"$jobs" --target goose_ops >/dev/null
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -DGOOSE_FUZZ=ON -DGOOSE_BUILD_TESTS=OFF \
    -DGOOSE_FUZZ_OPS_LIB="$root/build/libgoose_ops.a" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" >/dev/null
  cmake --build build-fuzz -j"$jobs" --target fuzz_all
  echo "fuzz build: $(( $(date +%s) - start )) s"
fi
[ "$build_only" = 1 ] && exit 0

if [ ${#targets[@]} -eq 0 ]; then
  for f in fuzz/*_fuzz.cc; do
    n=$(basename "$f" _fuzz.cc)
    targets+=("$n")
  done
fi

mkdir -p "$corpus"
corpus=$(cd "$corpus" && pwd)
rm -rf "$corpus/generated"
build-fuzz/fuzz/fuzz_make_seeds "$corpus/generated"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
failed=()
summary=()
for t in "${targets[@]}"; do
  bin=build-fuzz/fuzz/fuzz_$t
  [ -x "$bin" ] || { echo "run-fuzz.sh: no target $t ($bin)" >&2; exit 2; }
  mkdir -p "$corpus/$t" "$corpus/findings/$t"
  seeds=()
  for d in "$corpus/generated/$t" "fuzz/seeds/$t" "fuzz/regressions/$t"; do
    [ -d "$d" ] && seeds+=("$d")
  done
  flags=$(sed -n 's|^// run-fuzz flags: *||p' "fuzz/${t}_fuzz.cc")
  dict=()
  [ -f "fuzz/dicts/$t.dict" ] && dict=(-dict="fuzz/dicts/$t.dict")
  log=$corpus/$t.log
  echo "== fuzz $t: ${time_per_target} s (log $log)"
  rc=0
  # shellcheck disable=SC2086  # flags are words
  "$bin" "$corpus/$t" "${seeds[@]}" -max_total_time="$time_per_target" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -print_funcs=0 \
    -artifact_prefix="$corpus/findings/$t/" "${dict[@]}" $flags >"$log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1 || true)
  line=$(printf '%-18s runs %-9s exec/s %-7s %s' "$t" "${runs:-?}" "${speed:-?}" "${cov:-cov: ?}")
  summary+=("$line")
  echo "$line"
  if [ "$rc" != 0 ]; then
    failed+=("$t")
    echo "-- fuzz $t FAILED (exit $rc); the end of its log:"
    grep -v '^#[0-9]' "$log" | tail -60
    echo "-- inputs kept under $corpus/findings/$t/:"
    ls -l "$corpus/findings/$t/"
  fi
done

echo "== fuzz summary ($(( $(date +%s) - start )) s in all)"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: ${#failed[@]} of ${#targets[@]} targets failed: ${failed[*]}"
  exit 1
fi
echo "fuzz: ${#targets[@]} targets ran ${time_per_target} s each with no finding"
