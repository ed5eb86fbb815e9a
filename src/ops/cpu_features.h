// CPU feature levels for the kernels. The baseline build targets x86-64-v2; wider paths
// (AVX2+F16C, AVX-512) are chosen at run time. Every level computes the *same* lane-wise
// float operations (16 independent lanes, no FMA), so results are bit-identical across levels;
// the cap exists so tests can prove that.
#pragma once

namespace goose {

enum class CpuLevel : int { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };

// The best level this CPU supports.
CpuLevel DetectCpuLevel();
// The level kernels use now: min(DetectCpuLevel(), cap). Default cap: none.
CpuLevel ActiveCpuLevel();
// Limits the level kernels use (tests). Not thread-safe w.r.t. running kernels.
void SetCpuLevelCap(CpuLevel cap);
const char* CpuLevelName(CpuLevel level);
// AVX-512 VNNI + BW + DQ + VL (the int8 dot-product kernels' widest path; see qmatmul.h).
bool HasAvx512Vnni();

}  // namespace goose
