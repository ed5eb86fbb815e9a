#!/usr/bin/env bash
# Builds tests/consumer against an installed goose three ways (find_package with goose::goose,
# with goose::goose_static, and pkg-config) and runs each on the model.
# Usage: run.sh PREFIX BUILD_DIR MODEL [C_FLAGS]
set -euo pipefail
prefix=$1 build=$2 model=$3 flags=${4:-}
src=$(cd "$(dirname "$0")" && pwd)
rm -rf "$build"
cmake -S "$src" -B "$build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_C_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" > "$build.log" 2>&1 ||
  { cat "$build.log"; exit 1; }
cmake --build "$build" >> "$build.log" 2>&1 || { cat "$build.log"; exit 1; }
"$build/consumer_shared" "$model"
"$build/consumer_static" "$model"
pc=$(dirname "$(find "$prefix" -name goose.pc | head -1)")
export PKG_CONFIG_PATH="$pc"
libdir=$(pkg-config --variable=libdir goose)
# shellcheck disable=SC2046,SC2086
cc $flags "$src/consumer.c" -o "$build/consumer_pc" $(pkg-config --cflags --libs goose) \
   -Wl,-rpath,"$libdir"
"$build/consumer_pc" "$model"
# shellcheck disable=SC2046,SC2086
cc $flags "$src/consumer.c" -o "$build/consumer_pc_static" $(pkg-config --cflags goose) \
   "$libdir/libgoose.a" $(pkg-config --libs --static goose | sed "s/-lgoose\b//")
"$build/consumer_pc_static" "$model"
echo "consumer: shared, static and pkg-config builds all ran"
