#!/usr/bin/env bash
# Installs the Debian 12 packages goose needs to build, test and plot. Idempotent; run as root.
set -euo pipefail
# python3-numpy: ../shared/tools/inflate_gguf.py (the inflated pair of the Graft benchmarks).
# clang + libfuzzer-14-dev: the fuzz targets (tools/run-fuzz.sh).
# libboost1.74-dev: goose serve's HTTP layer (Beast + Asio, header-only); libcpp-httplib-dev:
# the server tests' HTTP client.
pkgs=(cmake g++ make pkg-config googletest libgtest-dev libpcre2-dev nlohmann-json3-dev
      libcli11-dev libboost1.74-dev libcpp-httplib-dev zlib1g-dev gnuplot-nox clang
      libfuzzer-14-dev python3 python3-numpy)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
# Node and npm run the server's tests with the official openai client (tests/server). Any
# Node >= 18 will do, so one already installed (e.g. from NodeSource, with its own npm) is kept.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
fi
