// Verify-cost measurement and its cache: a sane curve for the tiny model, the monotone fix, and
// the cache round trip, a corrupt file and a key mismatch (both re-measured with a warning).
#include "budget/cost_cache.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "bench/bench_test_util.h"

namespace goose {
namespace {

using nlohmann::json;

const Model& Tiny() {
  static const std::unique_ptr<Model> m = [] {
    auto r = Model::Load(testing::TinyModel());
    if (!r.ok()) std::abort();
    return std::move(r).value();
  }();
  return *m;
}

VerifyCostOptions TinyOptions() {
  VerifyCostOptions o;
  o.nodes = {1, 4, 16};
  o.prefix = 8;
  o.reps = 1;
  return o;
}

TEST(VerifyCost, TinyModelGivesASaneCurve) {
  ThreadPool pool(1);
  auto curve = MeasureVerifyCost(Tiny(), &pool, TinyOptions());
  ASSERT_TRUE(curve.ok()) << curve.status().message();
  ASSERT_EQ(curve->size(), 3u);
  const int want[] = {1, 4, 16};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*curve)[i].nodes, want[i]);
    EXPECT_GT((*curve)[i].seconds, 0.0);
    EXPECT_LT((*curve)[i].seconds, 10.0);  // a 260K-parameter pass, not a hang
    EXPECT_GT((*curve)[i].matmul_share, 0.0);
    EXPECT_LE((*curve)[i].matmul_share, 1.0);
  }
  VerifyCostOptions bad = TinyOptions();
  bad.reps = 0;
  EXPECT_FALSE(MeasureVerifyCost(Tiny(), &pool, bad).ok());
  bad = TinyOptions();
  bad.nodes.clear();
  EXPECT_FALSE(MeasureVerifyCost(Tiny(), &pool, bad).ok());
  bad = TinyOptions();
  bad.prefix = 1 << 20;  // beyond the model's context
  const auto r = MeasureVerifyCost(Tiny(), &pool, bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("context"), std::string::npos) << r.status().message();
}

TEST(VerifyCost, MonotoneFixTakesTheSuffixMinimum) {
  // Noise: 4 nodes measured cheaper than 2, and 12 dearer than 16.
  std::vector<VerifyCostPoint> c = {{16, 2.5}, {1, 1.0}, {2, 1.2}, {4, 1.1}, {8, 2.0}, {12, 3.0}};
  MakeMonotone(&c);
  const std::vector<std::pair<int, double>> want = {{1, 1.0}, {2, 1.1},  {4, 1.1},
                                                    {8, 2.0}, {12, 2.5}, {16, 2.5}};
  ASSERT_EQ(c.size(), want.size());
  for (size_t i = 0; i < c.size(); ++i) {
    EXPECT_EQ(c[i].nodes, want[i].first);
    EXPECT_DOUBLE_EQ(c[i].seconds, want[i].second) << c[i].nodes;
  }
}

TEST(ParseCostCacheTest, AcceptsOnlyCurvesGooseCouldHaveWritten) {
  const json key = {{"cpu", "c"}, {"threads", 2}};
  auto parse = [&](const json& curve) {
    return ParseCostCache(json{{"key", key}, {"curve", curve}}.dump(), key);
  };
  auto ok = parse(json::array({{{"nodes", 4}, {"seconds", 2e-4}},
                               {{"nodes", 1}, {"seconds", 3e-4}},
                               {{"nodes", 128}, {"seconds", 9e-4}}}));
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  ASSERT_EQ(ok->curve.size(), 3u);
  EXPECT_EQ(ok->curve[0].nodes, 1);
  EXPECT_DOUBLE_EQ(ok->curve[0].seconds, 2e-4);  // made monotone
  EXPECT_EQ(ok->curve[2].nodes, 128);
  EXPECT_FALSE(ok->measure_again);
  // Found by fuzz_cost_cache (fuzz/regressions/cost_cache/): nodes past the largest tree made
  // BudgetChooser allocate [nodes]^2 counters; a float nodes count converted to int is UB.
  for (const json& bad : {json(129), json(100000), json(1e10), json(1.5), json(0), json(-1),
                          json("1"), json(18446744073709551615ull)}) {
    auto r = parse(
        json::array({{{"nodes", 1}, {"seconds", 1e-4}}, {{"nodes", bad}, {"seconds", 2e-4}}}));
    ASSERT_FALSE(r.ok()) << bad.dump();
    EXPECT_NE(r.status().message().find("unreadable"), std::string::npos) << r.status().message();
  }
  for (const json& bad : {json(0.0), json(-1e-4), json("x"), json(nullptr)}) {
    EXPECT_FALSE(parse(json::array({{{"nodes", 1}, {"seconds", bad}}})).ok()) << bad.dump();
  }
  EXPECT_FALSE(parse(json::array({{{"nodes", 2}, {"seconds", 1e-4}}})).ok());  // no 1-node point
  auto other = ParseCostCache(
      json{{"key", {{"cpu", "d"}, {"threads", 2}}}, {"curve", json::array()}}.dump(), key);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().message(), "measured for another cpu");
}

class CostCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir("cost_cache");
    const char* old = std::getenv("XDG_CACHE_HOME");
    had_old_ = old != nullptr;
    if (old) old_ = old;
    setenv("XDG_CACHE_HOME", dir_.c_str(), 1);
  }
  void TearDown() override {
    if (had_old_) {
      setenv("XDG_CACHE_HOME", old_.c_str(), 1);
    } else {
      unsetenv("XDG_CACHE_HOME");
    }
    std::filesystem::remove_all(dir_);
  }
  StatusOr<CostCalibration> Load(bool recalibrate = false) {
    const VerifyCostOptions o = TinyOptions();
    return LoadOrMeasureCost(Tiny(), testing::TinyModel(), &pool_, recalibrate, &o);
  }
  json ReadCache(const std::string& path) {
    std::ifstream in(path);
    return json::parse(in);
  }
  void WriteCache(const std::string& path, const json& j) {
    std::ofstream(path, std::ios::trunc) << j.dump();
  }
  // A first calibration, marked quiet whatever the machine is doing now (tests cannot depend on
  // how busy it is).
  StatusOr<CostCalibration> LoadQuiet() {
    auto r = Load();
    if (r.ok()) {
      json j = ReadCache(r->cache_path);
      j["noisy"] = false;
      WriteCache(r->cache_path, j);
    }
    return r;
  }
  ThreadPool pool_{1};
  std::string dir_, old_;
  bool had_old_ = false;
};

TEST_F(CostCacheTest, RoundTripAndKey) {
  auto first = LoadQuiet();
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_FALSE(first->from_cache);
  EXPECT_TRUE(first->note.empty()) << first->note;
  EXPECT_EQ(first->cache_path.rfind(dir_ + "/goose/cost-", 0), 0u) << first->cache_path;
  const json j = ReadCache(first->cache_path);
  for (const char* field : {"model", "threads", "cpu", "isa", "build"}) {
    EXPECT_TRUE(j["key"].contains(field)) << field;
  }
  EXPECT_EQ(j["key"]["threads"], 1);
  for (size_t i = 1; i < first->curve.size(); ++i) {
    EXPECT_LE(first->curve[i - 1].seconds, first->curve[i].seconds);  // stored monotone
  }
  auto second = Load();
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->from_cache);
  ASSERT_EQ(second->curve.size(), first->curve.size());
  for (size_t i = 0; i < first->curve.size(); ++i) {
    EXPECT_EQ(second->curve[i].nodes, first->curve[i].nodes);
    EXPECT_DOUBLE_EQ(second->curve[i].seconds, first->curve[i].seconds);
  }
  auto again = Load(/*recalibrate=*/true);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->from_cache);
}

TEST_F(CostCacheTest, CorruptFileIsRemeasuredWithAWarning) {
  auto first = Load();
  ASSERT_TRUE(first.ok());
  for (const std::string& junk :
       {std::string("{\"curve\": [1, 2"), std::string("\x01\x02garbage"), std::string()}) {
    std::ofstream(first->cache_path, std::ios::trunc) << junk;
    auto r = Load();
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_FALSE(r->from_cache);
    EXPECT_NE(r->note.find("unreadable"), std::string::npos) << r->note;
    EXPECT_EQ(r->curve.size(), 3u);
    EXPECT_TRUE(ReadCache(first->cache_path).contains("curve"));  // rewritten
  }
  // A readable file with a bad point is not trusted either.
  json j = ReadCache(first->cache_path);
  j["curve"][1]["seconds"] = -1.0;
  std::ofstream(first->cache_path, std::ios::trunc) << j.dump();
  auto r = Load();
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->from_cache);
  EXPECT_GT(r->curve[1].seconds, 0.0);
}

TEST_F(CostCacheTest, KeyMismatchIsRemeasured) {
  auto first = Load();
  ASSERT_TRUE(first.ok());
  for (const char* field : {"cpu", "isa", "build", "model"}) {
    json j = ReadCache(first->cache_path);
    j["key"][field] = "something else";
    std::ofstream(first->cache_path, std::ios::trunc) << j.dump();
    auto r = Load();
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r->from_cache) << field;
    EXPECT_NE(r->note.find(std::string("another ") + field), std::string::npos) << r->note;
    j = ReadCache(first->cache_path);
    EXPECT_NE(j["key"][field], "something else");
    j["noisy"] = false;
    WriteCache(first->cache_path, j);
    auto cached = Load();
    ASSERT_TRUE(cached.ok());
    EXPECT_TRUE(cached->from_cache) << "the re-measured curve is cached under the current key";
  }
  // A cache from before the key existed.
  json j = ReadCache(first->cache_path);
  j.erase("key");
  std::ofstream(first->cache_path, std::ios::trunc) << j.dump();
  auto r = Load();
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->from_cache);
}

// A curve measured on a busy machine heals: a noisy calibration, or one that real runs beat
// by far (stale), is measured again at the next run, keeping the fastest figure per size, at
// most kMaxCalibrations times in a row.
TEST_F(CostCacheTest, NoisyOrStaleCurvesAreMeasuredAgainAndMerged) {
  auto first = LoadQuiet();
  ASSERT_TRUE(first.ok());
  // Pretend the first calibration was noisy and far too slow at one size.
  json j = ReadCache(first->cache_path);
  j["noisy"] = true;
  j["curve"][0]["seconds"] = 10.0;  // c(1) = 10 s: surely beaten by a new measurement
  const double old_c16 = j["curve"][2]["seconds"].get<double>();
  WriteCache(first->cache_path, j);
  auto again = Load();
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->from_cache);
  EXPECT_NE(again->note.find("busy"), std::string::npos) << again->note;
  EXPECT_LT(again->curve[0].seconds, 10.0);
  EXPECT_LE(again->curve[2].seconds, old_c16) << "the fastest of the old and new figures";
  EXPECT_EQ(ReadCache(first->cache_path)["calibrations"], 2);
  // Noisy for ever: measured at most kMaxCalibrations times, then used as it is.
  for (int i = 0; i < 2 * kMaxCalibrations; ++i) {
    j = ReadCache(first->cache_path);
    j["noisy"] = true;
    WriteCache(first->cache_path, j);
    auto r = Load();
    ASSERT_TRUE(r.ok());
    if (j["calibrations"].get<int>() >= kMaxCalibrations) {
      EXPECT_TRUE(r->from_cache);
    }
  }
  EXPECT_EQ(ReadCache(first->cache_path)["calibrations"], kMaxCalibrations);

  // Passes far below the curve no longer mark it for measuring again (their times correct it);
  // a cache marked "stale" by an older goose still is measured again.
  j = ReadCache(first->cache_path);
  j["noisy"] = false;
  j["calibrations"] = 1;
  WriteCache(first->cache_path, j);
  auto quiet = Load();
  ASSERT_TRUE(quiet.ok() && quiet->from_cache);
  ASSERT_TRUE(RecordObservedCosts(*quiet, {{4, quiet->curve[1].seconds * 0.9}}).ok());
  ASSERT_TRUE(RecordObservedCosts(*quiet, {{4, quiet->curve[1].seconds / 3}}).ok());
  EXPECT_FALSE(ReadCache(first->cache_path).value("stale", false));
  auto still = Load();
  ASSERT_TRUE(still.ok());
  EXPECT_TRUE(still->from_cache);
  j = ReadCache(first->cache_path);
  j["stale"] = true;
  WriteCache(first->cache_path, j);
  auto remeasured = Load();
  ASSERT_TRUE(remeasured.ok());
  EXPECT_FALSE(remeasured->from_cache);
  EXPECT_FALSE(ReadCache(first->cache_path).value("stale", false));
  // The observed pass times survive the recalibration.
  ASSERT_EQ(remeasured->observed.size(), 1u);
  EXPECT_NEAR(remeasured->observed[0].seconds, quiet->curve[1].seconds * (0.9 + 1.0 / 3) / 2,
              1e-15);
}

// What real runs' passes took is kept for the next run: each size the mean of its old and new
// median; sizes the curve lacks and unusable times are dropped; an unreadable "observed" array
// costs only itself.
TEST_F(CostCacheTest, ObservedPassTimesAreKeptAndMerged) {
  auto cal = LoadQuiet();
  ASSERT_TRUE(cal.ok()) << cal.status().message();
  EXPECT_TRUE(cal->observed.empty());
  const int n1 = cal->curve[0].nodes, n2 = cal->curve[1].nodes;
  const double c2 = cal->curve[1].seconds;
  ASSERT_TRUE(RecordObservedCosts(
                  *cal, {{n2, 2 * c2}, {n1, 3 * c2}, {129, 1.0}, {n1 + 1000, 1.0}, {n2 + 1, -1.0}})
                  .ok());
  auto next = Load();
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(next->from_cache);
  ASSERT_EQ(next->observed.size(), 2u);
  EXPECT_EQ(next->observed[0].nodes, n1);
  EXPECT_DOUBLE_EQ(next->observed[0].seconds, 3 * c2);
  EXPECT_EQ(next->observed[1].nodes, n2);
  EXPECT_DOUBLE_EQ(next->observed[1].seconds, 2 * c2);
  ASSERT_TRUE(RecordObservedCosts(*next, {{n2, 4 * c2}}).ok());
  auto third = Load();
  ASSERT_TRUE(third.ok());
  ASSERT_EQ(third->observed.size(), 2u);
  EXPECT_DOUBLE_EQ(third->observed[1].seconds, 3 * c2);  // (2 + 4) / 2
  EXPECT_FALSE(ReadCache(third->cache_path).value("stale", false));

  for (const json& bad : {json("x"), json::array({{{"nodes", "1"}, {"seconds", 1.0}}}),
                          json::array({{{"nodes", 1}, {"seconds", -1.0}}}), json::array({7})}) {
    json j = ReadCache(third->cache_path);
    j["observed"] = bad;
    WriteCache(third->cache_path, j);
    auto r = Load();
    ASSERT_TRUE(r.ok()) << bad.dump();
    EXPECT_TRUE(r->from_cache) << bad.dump();
    EXPECT_TRUE(r->observed.empty()) << bad.dump();
    ASSERT_EQ(r->curve.size(), third->curve.size());
    // The next record starts the array afresh.
    ASSERT_TRUE(RecordObservedCosts(*r, {{n1, c2}}).ok());
    EXPECT_EQ(ReadCache(r->cache_path)["observed"].size(), 1u) << bad.dump();
  }
}

}  // namespace
}  // namespace goose
