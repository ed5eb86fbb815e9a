// The method registry: every registered method and variant parses, keys are canonical and
// distinct, and the facts the engine and the benchmark read from a method are coherent.
#include <gtest/gtest.h>

#include <set>

#include "method/method.h"

namespace goose {
namespace {

TEST(Registry, NoneIsFirstAndNamesAreUnique) {
  ASSERT_FALSE(Methods().empty());
  EXPECT_STREQ(Methods()[0]->name(), "none");
  std::set<std::string> names;
  for (const Method* m : Methods()) {
    EXPECT_TRUE(names.insert(m->name()).second) << m->name();
    EXPECT_EQ(FindMethod(m->name()), m);
    EXPECT_GT(std::string(m->summary()).size(), 10u) << m->name();
  }
  EXPECT_EQ(FindMethod("nope"), nullptr);
}

TEST(Registry, EveryVariantParsesToADistinctCanonicalKey) {
  std::set<std::string> keys;
  for (const std::string& v : AllVariants()) {
    SCOPED_TRACE(v);
    SpecParams spec;
    ASSERT_TRUE(ParseSpecVariant(v, &spec).ok());
    const std::string key = SpecVariantKey(spec);
    EXPECT_TRUE(keys.insert(key).second) << "two variants share the key " << key;
    SpecParams again;
    ASSERT_TRUE(ParseSpecVariant(key, &again).ok());
    EXPECT_EQ(SpecVariantKey(again), key) << "a key parses back to itself";
    EXPECT_GE(ResolvedBudget(spec), 1);
    EXPECT_LE(ResolvedBudget(spec), 128);
  }
  // Every method is run by at least one variant.
  for (const Method* m : Methods()) {
    bool found = false;
    for (const std::string& v : AllVariants()) found |= v.rfind(m->name(), 0) == 0;
    EXPECT_TRUE(found) << m->name();
  }
}

TEST(Registry, TableLifetimeModifiersOnlyForTableMethods) {
  for (const Method* m : Methods()) {
    SpecParams spec;
    const Status st = ParseSpecVariant(std::string(m->name()) + "+keep", &spec);
    EXPECT_EQ(st.ok(), m->uses_table()) << m->name();
    if (!st.ok()) {
      EXPECT_NE(st.message().find("keep"), std::string::npos) << st.message();
    }
  }
}

TEST(Registry, AnExplicitBudgetWins) {
  SpecParams spec;
  ASSERT_TRUE(ParseSpecVariant("goose", &spec).ok());
  EXPECT_EQ(ResolvedBudget(spec), MethodOf(spec).DefaultBudget(spec));
  spec.budget = 7;
  EXPECT_EQ(ResolvedBudget(spec), 7);
}

}  // namespace
}  // namespace goose
