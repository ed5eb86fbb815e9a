// none: plain decoding, one token per pass (the one-node tree). The baseline every method's
// output must equal.
#include "method/method.h"

namespace goose {
namespace {

class PlainDrafter : public Drafter {
 public:
  Proposal Propose(const CycleInput& in) override {
    Proposal p;
    p.tree.Reset(in.anchor);
    return p;
  }
};

class Plain : public Method {
 public:
  const char* name() const override { return "none"; }
  const char* summary() const override { return "plain decoding, one token per pass"; }
  int DefaultBudget(const SpecParams&) const override { return 1; }
  bool budget_grows_tree() const override { return false; }
  bool propose_reads_only() const override { return true; }
  std::unique_ptr<Drafter> NewDrafter(const SpecParams&, Learned&,
                                      const DrafterEnv&) const override {
    return std::make_unique<PlainDrafter>();
  }
};

}  // namespace

const Method& PlainMethod() {
  static const Plain m;
  return m;
}

}  // namespace goose
