// Machine facts for benchmark reports: memory read bandwidth, the arithmetic of a pass and the
// CPU's nominal peak, to put measured pass times next to what the hardware allows.
#pragma once

#include <cstddef>

#include "model/llama_config.h"
#include "util/thread_pool.h"

namespace goose {

// Read bandwidth in GB/s (1e9 bytes/s): best of a few passes summing a buffer much larger than
// the caches, split across the pool's threads.
double MeasureReadBandwidth(ThreadPool* pool, size_t bytes = size_t{1} << 30);

// Arithmetic of one pass of `nodes` tree nodes after `prefix` committed tokens, in FLOP (one
// multiply-add = 2): every weight matrix (all layers and the output head; the embedding row is
// a lookup) per node, plus attention's QK and AV over prefix + 1 keys per node and head (tree
// ancestors beyond the node itself are left out: a slight lower bound).
double PassFlops(const LlamaConfig& c, int nodes, int prefix);

// The CPU's nominal peak, from /proc/cpuinfo: cores (= threads used, at most the hardware's)
// x clock ("cpu MHz", the highest listed) x operations per cycle of the widest kernel path,
// assuming two vector pipes of the path's width per core (AVX-512: 2 x 16 f32 FMA = 64 FLOP,
// 2 x 64 int8 VNNI MACs = 256 OP; AVX2: 32 FLOP and 2 x 32 x 2 = 128 OP via maddubs). Cores
// that split 512-bit ops into two 256-bit halves (AMD Zen 4) reach half of the AVX-512 figure.
struct CpuPeak {
  int cores = 1;
  double ghz = 0;
  const char* path = "";          // widest kernel path, e.g. "avx512-vnni"
  double f32_flop_per_cycle = 0;  // per core
  double int8_op_per_cycle = 0;   // per core
  double f32_gflops() const { return cores * ghz * f32_flop_per_cycle; }
  double int8_gops() const { return cores * ghz * int8_op_per_cycle; }
};
CpuPeak EstimateCpuPeak(int threads);

}  // namespace goose
