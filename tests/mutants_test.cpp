// The tests of the tests: every mutant variant must be killed (a regression or divergence in at
// least one property) within a fixed budget of generated cases from a fixed seed.
#include <gtest/gtest.h>

#include "properties/generator.h"
#include "properties/report.h"

namespace recheck {
namespace {

constexpr uint64_t kFirstSeed = 1;
constexpr int kBudget = 200;

class MutantTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MutantTest, is_killed_within_the_budget) {
  auto oracle = make_checkpoint("nonclearing");
  auto mutant = make_checkpoint(GetParam());
  for (int i = 0; i < kBudget; ++i) {
    const CaseResult result = check_case(draw_case(GenOptions{}, kFirstSeed + i), *oracle, *mutant);
    if (result.has_alarm()) return;  // killed
  }
  FAIL() << GetParam() << " survived " << kBudget << " cases from draw seed " << kFirstSeed;
}

std::vector<std::string> mutant_names() {
  std::vector<std::string> names;
  for (const Variant& v : variants()) {
    if (v.name != "clearing" && v.name != "nonclearing") names.push_back(v.name);
  }
  return names;
}

INSTANTIATE_TEST_SUITE_P(Mutants, MutantTest, ::testing::ValuesIn(mutant_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

}  // namespace
}  // namespace recheck
