// The CPU level decision as a function of a feature set (every feature a level's kernels are
// compiled for, not just its first), the integer kernel each level runs, and one test per level
// that says, as a skip naming the missing features, which levels this CPU cannot run: the
// other tests that loop over levels (ops_test.cc, sampler, model) silently cover only these.
#include "ops/cpu_features.h"

#include <gtest/gtest.h>

#include <string>

#include "ops/qmatmul.h"

namespace goose {
namespace {

CpuFeatures Avx2Features() {
  CpuFeatures f;
  f.avx2 = f.fma = f.f16c = true;
  return f;
}

CpuFeatures Avx512Features() {
  CpuFeatures f = Avx2Features();
  f.avx512f = f.avx512bw = f.avx512dq = f.avx512vl = true;
  return f;
}

TEST(CpuFeaturesTest, LevelNeedsEveryFeatureItsKernelsAreCompiledFor) {
  EXPECT_EQ(CpuLevelFor(CpuFeatures{}), CpuLevel::kBaseline);
  CpuFeatures f = Avx2Features();
  EXPECT_EQ(CpuLevelFor(f), CpuLevel::kAvx2);
  for (bool CpuFeatures::*has : {&CpuFeatures::avx2, &CpuFeatures::fma, &CpuFeatures::f16c}) {
    CpuFeatures g = Avx512Features();
    g.*has = false;
    EXPECT_EQ(CpuLevelFor(g), CpuLevel::kBaseline);
  }
  // AVX-512F alone (or without any one of BW, DQ, VL) is not the AVX-512 level: its kernels
  // use all four.
  f.avx512f = true;
  EXPECT_EQ(CpuLevelFor(f), CpuLevel::kAvx2);
  for (bool CpuFeatures::*has : {&CpuFeatures::avx512f, &CpuFeatures::avx512bw,
                                 &CpuFeatures::avx512dq, &CpuFeatures::avx512vl}) {
    CpuFeatures g = Avx512Features();
    g.*has = false;
    g.avx512vnni = g.amx_int8 = true;
    EXPECT_EQ(CpuLevelFor(g), CpuLevel::kAvx2);
  }
  f = Avx512Features();
  EXPECT_EQ(CpuLevelFor(f), CpuLevel::kAvx512);
  f.amx_int8 = true;  // AMX without VNNI: the AMX level's few-token kernels are VNNI's
  EXPECT_EQ(CpuLevelFor(f), CpuLevel::kAvx512);
  f.amx_int8 = false;
  f.avx512vnni = true;
  EXPECT_EQ(CpuLevelFor(f), CpuLevel::kAvx512);
  f.amx_int8 = true;
  EXPECT_EQ(CpuLevelFor(f), CpuLevel::kAmx);
}

TEST(CpuFeaturesTest, MissingFeaturesNameWhatALevelLacks) {
  CpuFeatures f = Avx2Features();
  f.avx512f = true;
  EXPECT_EQ(MissingCpuFeatures(f, CpuLevel::kBaseline), "");
  EXPECT_EQ(MissingCpuFeatures(f, CpuLevel::kAvx2), "");
  EXPECT_EQ(MissingCpuFeatures(f, CpuLevel::kAvx512), "avx512bw, avx512dq, avx512vl");
  f = Avx512Features();
  EXPECT_EQ(MissingCpuFeatures(f, CpuLevel::kAmx),
            "avx512vnni, amx-int8 (with the OS's tile grant)");
  EXPECT_EQ(MissingCpuFeatures(CpuFeatures{}, CpuLevel::kAvx2), "avx2, fma, f16c");
}

TEST(CpuFeaturesTest, IntKernelOfEachLevel) {
  CpuFeatures f = Avx512Features();
  EXPECT_EQ(IntKernelFor(CpuLevel::kBaseline, f), IntKernel::kScalar);
  EXPECT_EQ(IntKernelFor(CpuLevel::kAvx2, f), IntKernel::kAvx2);
  EXPECT_EQ(IntKernelFor(CpuLevel::kAvx512, f), IntKernel::kAvx2);  // no VNNI
  f.avx512vnni = true;
  EXPECT_EQ(IntKernelFor(CpuLevel::kAvx512, f), IntKernel::kAvx512Vnni);
  EXPECT_EQ(IntKernelFor(CpuLevel::kAmx, f), IntKernel::kAvx512Vnni);  // capped: no AMX
  f.amx_int8 = true;
  EXPECT_EQ(IntKernelFor(CpuLevel::kAmx, f), IntKernel::kAmx);
  f.avx512bw = false;  // VNNI on a CPU that is not at the AVX-512 level: AVX2
  EXPECT_EQ(IntKernelFor(CpuLevel::kAvx512, f), IntKernel::kAvx2);
}

TEST(CpuFeaturesTest, DetectedLevelIsTheDecisionOnThisCpu) {
  const CpuFeatures f = DetectCpuFeatures();
  EXPECT_EQ(DetectCpuLevel(), CpuLevelFor(f));
  EXPECT_EQ(MissingCpuFeatures(f, DetectCpuLevel()), "");
  EXPECT_EQ(HasAvx512Vnni(), DetectCpuLevel() >= CpuLevel::kAvx512 && f.avx512vnni);
  RecordProperty("cpu_level", CpuLevelName(DetectCpuLevel()));
  RecordProperty("int_kernel", IntKernelName(IntKernelFor(DetectCpuLevel())));
}

// One test per level: run (the cap reaches it) or skipped with the features this CPU lacks.
class CpuLevelTest : public ::testing::TestWithParam<CpuLevel> {};

TEST_P(CpuLevelTest, ThisCpuRunsTheLevel) {
  const CpuLevel level = GetParam();
  const std::string missing = MissingCpuFeatures(DetectCpuFeatures(), level);
  if (!missing.empty()) {
    GTEST_SKIP() << "level " << CpuLevelName(level)
                 << " not tested on this CPU (its tests run the levels below); missing: "
                 << missing;
  }
  SetCpuLevelCap(level);
  EXPECT_EQ(ActiveCpuLevel(), level);
  SetCpuLevelCap(kMaxCpuLevel);
}

INSTANTIATE_TEST_SUITE_P(Levels, CpuLevelTest,
                         ::testing::Values(CpuLevel::kBaseline, CpuLevel::kAvx2, CpuLevel::kAvx512,
                                           CpuLevel::kAmx),
                         [](const ::testing::TestParamInfo<CpuLevel>& info) {
                           std::string name = CpuLevelName(info.param);
                           for (char& c : name) {
                             if (c == '-' || c == '+') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace goose
