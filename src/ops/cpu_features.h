// CPU feature levels for the kernels. The baseline build targets x86-64-v2; wider paths
// (AVX2+F16C, AVX-512, AVX-512 + AMX tiles) are chosen at run time. Every level computes the
// *same* lane-wise float operations (16 independent lanes, no FMA) and exact integer sums, so
// results are bit-identical across levels; the cap exists so tests can prove that.
#pragma once

#include <string>

namespace goose {

// kAmx: AVX-512 plus AMX-INT8 tiles that the OS lets this process use (the int8 kernels' widest
// path for batches; f32 kernels run their AVX-512 code there).
enum class CpuLevel : int { kBaseline = 0, kAvx2 = 1, kAvx512 = 2, kAmx = 3 };
constexpr CpuLevel kMaxCpuLevel = CpuLevel::kAmx;

// The CPU features the kernels are compiled for (their files' target pragmas), as this CPU and
// OS report them.
struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512dq = false, avx512vl = false;
  bool avx512vnni = false;  // the AVX-512 int8 kernel (ops/qmatmul.h) and kAmx
  bool amx_int8 = false;    // AMX-TILE + AMX-INT8, enabled by the OS and granted (HasAmxInt8)
};
CpuFeatures DetectCpuFeatures();

// The widest level whose every feature f has (a pure function, so the decision is testable on
// any CPU): kAvx2 needs avx2, fma and f16c; kAvx512 those and avx512f, bw, dq and vl (every
// feature its kernels are compiled for: an avx512f-only CPU runs kAvx2); kAmx those,
// avx512vnni and amx_int8.
CpuLevel CpuLevelFor(const CpuFeatures& f);
// The features `level` needs that f lacks, comma-separated ("" if none): what a test names
// when it skips a level this CPU cannot run.
std::string MissingCpuFeatures(const CpuFeatures& f, CpuLevel level);

// The best level this CPU (and OS) supports: CpuLevelFor(DetectCpuFeatures()).
CpuLevel DetectCpuLevel();
// The level kernels use now: min(DetectCpuLevel(), cap). Default cap: the environment's
// GOOSE_CPU (a CpuLevelName), else none.
CpuLevel ActiveCpuLevel();
// Limits the level kernels use (tests). Not thread-safe w.r.t. running kernels.
void SetCpuLevelCap(CpuLevel cap);
const char* CpuLevelName(CpuLevel level);
// The kAvx512 level's features plus AVX-512 VNNI (the int8 kernels' AVX-512 path; qmatmul.h).
bool HasAvx512Vnni();
// AMX-TILE + AMX-INT8 in the CPU, enabled by the OS (XCR0) and granted to this process
// (Linux arch_prctl ARCH_REQ_XCOMP_PERM, requested once on first call).
bool HasAmxInt8();
// An AMD CPU (the kernels' prefetch policy differs by vendor, as measured: qmatmul_internal.h).
bool IsAmdCpu();
// /proc/cpuinfo's "model name", or "unknown".
std::string CpuModelName();

}  // namespace goose
