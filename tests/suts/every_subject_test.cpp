// Every implementation of every subject gets the verdicts its kind promises, generated from the
// subjects' declarations (suts/subject.h) in the manner of PyTorch's OpInfo: a subject added is
// tested here without a line of its own. Each mutant is killed within the budget from the first
// hunt seed of `recheck mutants` (as it hunts: runner/mutant_hunts.h); the change, each equivalent
// rewrite and each fix raise no alarm on the same cases, and a fix is `fixed` on some of them.
// Built into both test programs: recheck_tests holds the built-in subjects, recheck_python_tests
// (RECHECK_TEST_BRIDGE_SUBJECTS) the ones the Python bridge registers.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "properties/generator.h"
#include "properties/report.h"
#include "runner/isolated_check.h"
#include "runner/mutant_hunts.h"
#include "suts/subject.h"
#ifdef RECHECK_TEST_BRIDGE_SUBJECTS
#include "python/bridge.h"
#endif

namespace recheck {
namespace {

// `recheck mutants`' first hunt seed, and a budget its default (200) leaves room under: the
// slowest kill of a built-in mutant from this seed is case 77.
constexpr uint64_t kFirstSeed = 1;
constexpr int64_t kBudget = 300;
// Cases each correct implementation is checked on, from the same seed.
constexpr int64_t kControlCases = 150;

struct Tested {
  std::string subject;
  std::string implementation;
};

// The subjects this program tests, and of each every implementation but its oracle (crash
// variants crash on purpose: tests/cli/cli_isolation_test.cpp).
std::vector<Tested> implementations() {
#ifdef RECHECK_TEST_BRIDGE_SUBJECTS
  python::register_bridge();
  const bool bridge_s = true;  // the built-in ones are recheck_workload_tests'
#else
  const bool bridge_s = false;
#endif
  std::vector<Tested> all;
  for (const Subject& subject : subjects()) {
    // A subject is the bridge's when its implementations run through it (whichever test file
    // registered the bridge first).
    if (needs_python_bridge(resolve_checkpoint_alias(subject.oracle)) != bridge_s) continue;
    for (const SubjectImplementation& implementation : subject.implementations) {
      if (implementation.kind == VariantKind::oracle || implementation.kind == VariantKind::crash) continue;
      all.push_back({subject.name, implementation.name});
    }
  }
  return all;
}

// In a test's description: "megatron-checkpoint-function no-clear".
void PrintTo(const Tested& tested, std::ostream* os) { *os << tested.subject << " " << tested.implementation; }

class Implementation : public ::testing::TestWithParam<Tested> {};

TEST_P(Implementation, gets_the_verdicts_its_kind_promises) {
  const Subject& subject = find_subject(GetParam().subject);
  const SubjectImplementation& declared = *subject.find(GetParam().implementation);
  auto oracle = subject.make(subject.oracle);
  runner::MutantHuntPlan plan;
  plan.subject = &subject;
  plan.gen = options_for(GenOptions{}, *oracle);  // cases its oracle can run
  plan.seeds = 1;
  plan.budget = kBudget;
  plan.first_seed = kFirstSeed;
  if (declared.kind == VariantKind::mutant) {
    if (!declared.cannot_be_killed_on_cpu.empty()) GTEST_SKIP() << declared.name << ": " << declared.cannot_be_killed_on_cpu;
    const std::vector<runner::MutantHunts> hunted = runner::hunt_mutants(plan, {&declared}, *oracle);
    ASSERT_EQ(hunted.size(), 1u);
    EXPECT_EQ(hunted[0].killed, 1) << declared.name << " survived " << kBudget << " cases from draw seed " << kFirstSeed;
    if (hunted[0].killed == 1) RecordProperty("killed_by", hunted[0].killed_by);
    return;
  }
  // The change, an equivalent rewrite or a fix: any alarm is a false alarm of recheck.
  auto implementation = subject.make(declared.name);
  int fixed = 0;
  for (int64_t i = 0; i < kControlCases; ++i) {
    const uint64_t draw_seed = plan.start_of(0) + static_cast<uint64_t>(i);
    const Case c = draw_case(plan.gen, draw_seed);
    if (subject.cases_may_crash) {
      // Its released function can crash the process: each case in a process of its own, a crash
      // the oracle makes too being the released function's.
      const runner::OwnProcessVerdict verdict = runner::first_alarm_in_own_process(c, *oracle, *implementation);
      EXPECT_FALSE(verdict.alarm) << declared.name << ": " << verdict.describe() << " on draw seed " << draw_seed;
      continue;
    }
    const CaseResult result = check_case(c, *oracle, *implementation);
    EXPECT_FALSE(result.has_alarm()) << declared.name << " on draw seed " << draw_seed << "\n"
                                     << describe_results(result.results);
    for (const PropertyResult& r : result.results) fixed += r.classification == Classification::fixed ? 1 : 0;
  }
  if (declared.kind == VariantKind::fix) {
    EXPECT_GT(fixed, 0) << declared.name << " fixed nothing in " << kControlCases << " cases";
  }
}

// "megatron-checkpoint-function.no-clear" -> "megatron_checkpoint_function__no_clear".
std::string test_name(const ::testing::TestParamInfo<Tested>& info) {
  std::string name = info.param.subject + "__" + info.param.implementation;
  for (char& c : name) c = (c == '-' || c == '.') ? '_' : c;
  return name;
}

INSTANTIATE_TEST_SUITE_P(EverySubject, Implementation, ::testing::ValuesIn(implementations()), test_name);

}  // namespace
}  // namespace recheck
