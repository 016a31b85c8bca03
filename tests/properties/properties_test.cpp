// Each property on a case where it must hold and on observations where it must fail, and the
// classification of verdict pairs.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "core/case_detail.h"
#include "oracles/eager.h"
#include "properties/generator.h"
#include "properties/report.h"
#include "suts/subject.h"
#include "tests/cases.h"
#include "tests/paths.h"

namespace recheck {
namespace {

Case parse(const char* text) { return case_from_json(nlohmann::json::parse(text)); }

using test_cases::kStashedDropoutCase;

struct Fixture : ::testing::Test {
  Case c = parse(kStashedDropoutCase);
  EagerExecution eager_impl;
  std::unique_ptr<CheckpointImplementation> oracle_impl = make_checkpoint("nonclearing");
  std::unique_ptr<CheckpointImplementation> sut_impl = make_checkpoint("clearing");
  Observations eager = run_case(c, eager_impl);
  Observations oracle = run_case(c, *oracle_impl);
  Observations sut = run_case(c, *sut_impl);

  Verdict check(const char* name, const Observations& subject) {
    const Property* p = find_property(name);
    EXPECT_NE(p, nullptr) << name;
    return p->check(subject, Runs{eager, oracle});
  }
};

TEST_F(Fixture, every_property_holds_for_clearing_on_a_dropout_case) {
  ASSERT_FALSE(eager.error) << eager.error->error.message;
  ASSERT_EQ(sut.iterations.size(), 2u);
  for (const PropertyResult& r : check_properties(eager, oracle, sut)) {
    EXPECT_EQ(r.classification, Classification::pass) << r.property << ": " << r.sut.describe() << r.oracle.describe();
  }
  ASSERT_EQ(sut.segment_calls.size(), 2u);  // one checkpoint, two iterations
  EXPECT_EQ(sut.segment_calls[0].calls.size(), 2u);  // forward and recomputation
}

TEST_F(Fixture, grads_bitwise_names_leaf_element_values_and_ulp) {
  Observations broken = sut;
  at::Tensor& grad = broken.iterations[1].leaf_grads[1];
  const float original = grad.view({-1})[4].item<float>();
  grad.view({-1})[4] = std::nextafter(original, INFINITY);
  const Verdict v = check("grads-bitwise", broken);
  ASSERT_FALSE(v.holds);
  EXPECT_EQ(v.where, "iteration 1, leaf v1 .grad");
  ASSERT_TRUE(v.difference);
  EXPECT_EQ(v.difference->index, 4);
  EXPECT_EQ(v.difference->ulp, 1);
}

TEST_F(Fixture, grads_bitwise_counts_a_signed_zero) {
  Observations broken = sut;
  broken.iterations[0].leaf_grads[0] = at::zeros({3, 3});
  Observations negative = broken;
  negative.iterations[0].leaf_grads[0] = -at::zeros({3, 3});
  EXPECT_FALSE(find_property("grads-bitwise")->check(negative, Runs{eager, broken}).holds);
}

TEST_F(Fixture, grads_bitwise_fails_on_a_missing_grad) {
  Observations broken = sut;
  broken.iterations[0].leaf_grads[0] = at::Tensor();
  const Verdict v = check("grads-bitwise", broken);
  ASSERT_FALSE(v.holds);
  EXPECT_EQ(v.difference->kind, "defined");
}

TEST_F(Fixture, outputs_bitwise_fails_on_a_changed_loss) {
  Observations broken = sut;
  broken.iterations[0].loss = broken.iterations[0].loss + 1;
  const Verdict v = check("outputs-bitwise", broken);
  ASSERT_FALSE(v.holds);
  EXPECT_EQ(v.where, "iteration 0, loss");
}

TEST_F(Fixture, recompute_fidelity_fails_when_a_recomputation_differs) {
  Observations broken = sut;
  broken.segment_calls[0].calls[1][0] = broken.segment_calls[0].calls[1][0] * 2;
  const Verdict v = check("recompute-fidelity", broken);
  ASSERT_FALSE(v.holds);
  EXPECT_EQ(v.where, "root.ops[0] at iteration 0, recomputed output 0 vs forward");
}

TEST_F(Fixture, grads_match_eager_allows_the_bound_and_no_more) {
  Observations near = sut;
  at::Tensor& grad = near.iterations[0].leaf_grads[0];
  grad = grad * (1 + 1e-7);
  EXPECT_TRUE(check("grads-match-eager", near).holds);
  Observations far = sut;
  far.iterations[0].leaf_grads[0] = far.iterations[0].leaf_grads[0] * 1.01;
  const Verdict v = check("grads-match-eager", far);
  ASSERT_FALSE(v.holds);
  EXPECT_GT(v.difference->ulp, grad_ulp_bound(at::kFloat));
}

TEST_F(Fixture, rng_restored_names_the_state_that_differs) {
  Observations broken = sut;
  broken.iterations[1].rng.tracker.at("model-parallel-rng")[0] ^= 1;
  const Verdict v = check("rng-restored", broken);
  ASSERT_FALSE(v.holds);
  EXPECT_EQ(v.describe(), "after iteration 1: differs from eager: tracker state 'model-parallel-rng'");
}

TEST_F(Fixture, errors_match_fails_when_only_the_subject_raises) {
  Observations broken = sut;
  broken.iterations.resize(1);
  broken.iterations[0].error = ErrorRecord{0, "backward", {"ValueError", "boom"}, broken.iterations[0].rng, broken.iterations[0].rng};
  broken.error = broken.iterations[0].error;
  const Verdict v = check("errors-match", broken);
  ASSERT_FALSE(v.holds);
  EXPECT_EQ(v.detail, "ValueError in iteration 0 backward: boom | eager: no error");
}

TEST_F(Fixture, errors_match_tells_a_backward_error_that_left_the_rng_moved) {
  Observations broken = sut;
  rng::Snapshot moved = broken.iterations[0].rng;
  moved.cpu[0] ^= 1;
  broken.iterations.resize(1);
  broken.iterations[0].error = ErrorRecord{0, "backward", {"ValueError", "boom"}, moved, broken.iterations[0].rng};
  broken.error = broken.iterations[0].error;
  const Verdict v = check("errors-match", broken);
  ASSERT_FALSE(v.holds);
  EXPECT_EQ(v.detail,
            "ValueError in iteration 0 backward: boom | eager: no error; RNG not restored when the error reached "
            "the caller: CPU generator");
}

TEST_F(Fixture, no_side_effects_fails_when_the_flag_is_left_set) {
  Observations broken = sut;
  broken.iterations[0].checkpointing_flag = true;
  EXPECT_EQ(check("no-side-effects", broken).describe(), "after iteration 0: is-checkpointing flag left set");
}

// What an exception leaves behind (issue 24). One leaf, one checkpoint whose body raises in
// forward: Megatron's forward sets the is-checkpointing flag and, raising, leaves it set (no
// try/finally), which eager mode never does.
const char* kRaisingBodyCase = R"({"format": "recheck-case", "version": 1, "seed": 3, "dtype": "float32",
  "device": "cpu", "iterations": 1,
  "leaves": [{"shape": [2, 2], "requires_grad": true, "fill": "randn"}],
  "root": {"ops": [
    {"op": "checkpoint", "distribute": false, "args": [{"ref": 0}], "body": {"ops": [
      {"op": "random", "fn": "dropout", "source": "cpu", "p": 0.5, "x": 0},
      {"op": "raise", "x": 1}
    ], "outputs": [1]}}
  ], "outputs": [1]}})";

std::map<std::string, Classification> classifications(const Case& c, const char* oracle_name, const char* sut_name) {
  auto oracle = make_checkpoint(oracle_name);
  auto sut = make_checkpoint(sut_name);
  std::map<std::string, Classification> by_property;
  for (const PropertyResult& r : check_case(c, *oracle, *sut).results) by_property[r.property] = r.classification;
  return by_property;
}

// Every random op, at its default p, from every source: the released function and the clearing
// change recompute what each drew (every property passes), and a function that restores only
// the CPU generator recomputes other draws where they came from the device's generator or a
// tracker state, which recompute-fidelity sees and eager mode names a regression.
class EveryRandomOp : public ::testing::TestWithParam<case_detail::Names<Random::Fn>> {};

TEST_P(EveryRandomOp, recomputes_what_it_drew_and_a_cpu_only_restore_is_caught) {
  const Case c = parse(test_cases::random_ops_case(GetParam().name, case_detail::random_default_p(GetParam().value)).c_str());
  for (const auto& [property, classification] : classifications(c, "nonclearing", "clearing")) {
    EXPECT_EQ(classification, Classification::pass) << property;
  }
  const auto mistaken = classifications(c, "nonclearing", "cpu-rng-only");
  ASSERT_EQ(mistaken.count("recompute-fidelity"), 1u);
  EXPECT_EQ(mistaken.at("recompute-fidelity"), Classification::regression);
  EXPECT_EQ(mistaken.at("grads-match-eager"), Classification::regression);
}

INSTANTIATE_TEST_SUITE_P(RandomOps, EveryRandomOp, ::testing::ValuesIn(case_detail::kRandomFns),
                         [](const ::testing::TestParamInfo<case_detail::Names<Random::Fn>>& info) {
                           std::string name = info.param.name;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(AfterAnError, the_flag_megatron_leaves_set_is_a_pre_existing_finding_and_a_fix_is_fixed) {
  const Case c = parse(kRaisingBodyCase);
  EagerExecution eager_impl;
  auto oracle = make_checkpoint("nonclearing");
  const Observations eager = run_case(c, eager_impl);
  const Observations released = run_case(c, *oracle);
  ASSERT_EQ(released.iterations.size(), 1u);
  ASSERT_TRUE(released.iterations[0].error.has_value());
  EXPECT_TRUE(released.iterations[0].checkpointing_flag);
  EXPECT_FALSE(eager.iterations[0].checkpointing_flag);
  const Verdict v = find_property("no-side-effects")->check(released, Runs{eager, released});
  EXPECT_EQ(v.describe(), "after iteration 0 (after its error): is-checkpointing flag left set");
  EXPECT_TRUE(v.after_error);
  EXPECT_EQ(classifications(c, "nonclearing", "clearing")["no-side-effects"], Classification::pre_existing);
  // A variant that unsets the flag when forward raises (a try/finally) fixes it...
  EXPECT_EQ(classifications(c, "nonclearing", "flag-reset-on-error")["no-side-effects"], Classification::fixed);
  // ...and against such a base, a change that leaves the flag set only on the error path is a
  // regression.
  EXPECT_EQ(classifications(c, "flag-reset-on-error", "clearing")["no-side-effects"], Classification::regression);
}

// Eager mode leaves the RNG states where the body's draws before the error took them; a variant
// that rewinds them when forward raises is caught by errors-match, on the error path alone.
TEST(AfterAnError, rng_states_rewound_only_on_the_error_path_are_a_regression) {
  const Case c = parse(kRaisingBodyCase);
  const auto by_property = classifications(c, "nonclearing", "rng-rewound-on-error");
  EXPECT_EQ(by_property.at("errors-match"), Classification::regression);
  EXPECT_EQ(by_property.at("rng-restored"), Classification::pass);  // no iteration completed
  EXPECT_EQ(classifications(c, "nonclearing", "clearing").at("errors-match"), Classification::pass);
}

// A loop that goes on after an error: iteration 0 raises (after the checkpoint's forward), and
// iteration 1 runs from the state it left and is checked like any other. The draw after the
// checkpoint is what a recomputation that does not restore the RNG states loses.
TEST(AfterAnError, the_iteration_after_an_error_runs_and_every_property_is_checked_on_it) {
  Case c = parse(R"({"format": "recheck-case", "version": 1, "seed": 5, "dtype": "float32",
    "device": "cpu", "iterations": 2, "continue_after_error": true,
    "leaves": [{"shape": [3, 3], "requires_grad": true, "fill": "randn"}],
    "root": {"ops": [
      {"op": "checkpoint", "distribute": false, "args": [{"ref": 0}], "body": {"ops": [
        {"op": "random", "fn": "dropout", "source": "cpu", "p": 0.5, "x": 0}
      ], "outputs": [1]}},
      {"op": "raise", "when": "first-iteration", "x": 1},
      {"op": "random", "fn": "dropout", "source": "cpu", "p": 0.5, "x": 2}
    ], "outputs": [3]}})");
  EagerExecution eager_impl;
  auto oracle = make_checkpoint("nonclearing");
  const Observations eager = run_case(c, eager_impl);
  const Observations released = run_case(c, *oracle);
  ASSERT_EQ(released.iterations.size(), 2u);
  EXPECT_TRUE(released.iterations[0].error.has_value());
  EXPECT_FALSE(released.iterations[1].error.has_value());
  EXPECT_TRUE(released.iterations[1].leaf_grads[0].defined());
  ASSERT_TRUE(released.error.has_value());
  EXPECT_EQ(released.error->iteration, 0);
  for (const auto& [property, classification] : classifications(c, "nonclearing", "clearing")) {
    EXPECT_EQ(classification, Classification::pass) << property;
  }
  // Recomputing without restoring the RNG states shows in iteration 1, the one after the error.
  auto skip = make_checkpoint("skip-rng-restore");
  const Verdict v = find_property("rng-restored")->check(run_case(c, *skip), Runs{eager, released});
  EXPECT_EQ(v.iteration, 1) << v.describe();
  EXPECT_EQ(classifications(c, "nonclearing", "skip-rng-restore").at("rng-restored"), Classification::regression);
  // Without going on, the run stops at the error and iteration 1 is never run.
  c.continue_after_error = false;
  EXPECT_EQ(run_case(c, *oracle).iterations.size(), 1u);
}

// The change's claim after an error: a checkpoint whose backward returned (ops[1], which keeps
// its recomputation input alive through a stash) let go of what it collected, although a later
// backward (ops[0]'s recomputation) raised. Without the change the input still holds its .grad.
TEST(AfterAnError, recomputation_inputs_of_a_backward_that_returned_are_held_to_the_claim) {
  const Case c = parse(R"({"format": "recheck-case", "version": 1, "seed": 6, "dtype": "float32",
    "device": "cpu", "iterations": 1,
    "leaves": [{"shape": [2, 2], "requires_grad": true, "fill": "randn"}],
    "root": {"ops": [
      {"op": "checkpoint", "distribute": false, "args": [{"ref": 0}], "body": {"ops": [
        {"op": "raise", "when": "recompute", "x": 0},
        {"op": "unary", "fn": "tanh", "x": 1}
      ], "outputs": [2]}},
      {"op": "checkpoint", "distribute": false, "args": [{"ref": 1}], "body": {"ops": [
        {"op": "stash", "x": 0},
        {"op": "unary", "fn": "sigmoid", "x": 0}
      ], "outputs": [1]}}
    ], "outputs": [2]}})");
  auto no_clear = make_checkpoint("no-clear");
  EagerExecution eager_impl;
  const Observations eager = run_case(c, eager_impl);
  const Observations kept = run_case(c, *no_clear);
  ASSERT_EQ(kept.iterations.size(), 1u);
  ASSERT_TRUE(kept.iterations[0].error.has_value());
  EXPECT_EQ(kept.iterations[0].error->phase, "backward");
  const Verdict v = find_property("grad-released")->check(kept, Runs{eager, kept});
  EXPECT_EQ(v.describe(), "after iteration 0 (after its error): 1 recomputation input(s) still hold a .grad, first "
                          "root.ops[1] input 0: .grad of 16 bytes");
  EXPECT_EQ(classifications(c, "nonclearing", "no-clear").at("grad-released"), Classification::regression);
  EXPECT_EQ(classifications(c, "nonclearing", "clearing").at("grad-released"), Classification::pass);
}

// Each property is declared once (properties/properties.cpp) and each subject decides about every
// one: holds it, or leaves it out saying why. A subject that forgets one, names one twice or names
// one that does not exist is refused, naming what is wrong.
TEST(Properties, every_subject_holds_or_leaves_out_every_property_and_a_forgotten_one_is_refused) {
  for (const Subject& subject : subjects()) EXPECT_NO_THROW(require_every_property_decided(subject)) << subject.name;
  auto refusal = [](const Subject& subject) {
    try {
      require_every_property_decided(subject);
    } catch (const std::logic_error& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  Subject forgot = default_subject();
  forgot.leaves_out.pop_back();
  EXPECT_NE(refusal(forgot).find("neither holds nor leaves out the property discard-recomputed"), std::string::npos)
      << refusal(forgot);
  Subject twice = default_subject();
  twice.leaves_out.emplace_back("grads-bitwise", "twice");
  EXPECT_NE(refusal(twice).find("names grads-bitwise twice"), std::string::npos) << refusal(twice);
  Subject unknown = default_subject();
  unknown.properties.emplace_back("grads-bitwize");
  EXPECT_NE(refusal(unknown).find("names no property grads-bitwize"), std::string::npos) << refusal(unknown);
  Subject silent = default_subject();
  silent.leaves_out.back().second.clear();
  EXPECT_NE(refusal(silent).find("without saying why"), std::string::npos) << refusal(silent);
  // Every field a consumer reads is declared: a property that reads eager mode's run says what
  // (EagerRead), one located at a value or an error is one whose check compares those.
  for (const Property& p : properties()) {
    EXPECT_TRUE(p.description != nullptr && *p.description != '\0') << p.name;
    if (p.claim_of_change) {
      EXPECT_FALSE(p.reads_eager()) << p.name << ": a claim is judged on the sut alone";
    }
    for (const Rule rule : p.by_eager) EXPECT_NE(rule, nullptr) << p.name;
  }
}

TEST(Classify, pairs_of_verdicts) {
  const Verdict ok = Verdict::pass();
  const Verdict a = Verdict::fail("x", std::nullopt, "a");
  const Verdict b = Verdict::fail("x", std::nullopt, "b");
  EXPECT_EQ(classify(ok, ok), Classification::pass);
  EXPECT_EQ(classify(ok, a), Classification::regression);
  EXPECT_EQ(classify(a, a), Classification::pre_existing);
  EXPECT_EQ(classify(a, ok), Classification::fixed);
  EXPECT_EQ(classify(a, b), Classification::divergent);
}

// A run that stopped at an error never reached what the other run failed after it: its "holds"
// says nothing, and the pair is unreached, neither a regression nor fixed.
// memory-eager-floor's verdicts carry how far over eager mode's floor a run is: where both runs
// are over it, a change that keeps less than the released function is no alarm, one that keeps
// more is a regression (it was "divergent" whenever the byte counts differed).
TEST(Classify, both_over_a_bound_the_sut_no_further_over_is_pre_existing_and_further_a_regression) {
  Verdict oracle = Verdict::fail_in(0, "after iteration 0", std::nullopt, "floor 15248 bytes, 15200 bytes above");
  oracle.excess = 15200;
  Verdict less = Verdict::fail_in(0, "after iteration 0", std::nullopt, "floor 15232 bytes, 15184 bytes above");
  less.excess = 15184;
  Verdict more = Verdict::fail_in(0, "after iteration 0", std::nullopt, "floor 15264 bytes, 15216 bytes above");
  more.excess = 15216;
  EXPECT_EQ(classify(oracle, less), Classification::pre_existing);
  EXPECT_EQ(classify(oracle, oracle), Classification::pre_existing);
  EXPECT_EQ(classify(oracle, more), Classification::regression);
  Verdict later = more;
  later.iteration = 1;
  EXPECT_EQ(classify(oracle, later), Classification::divergent);  // not the same point: compared as before
}

TEST(Classify, a_failure_in_an_iteration_the_other_run_did_not_complete_is_unreached) {
  Observations completed_one;
  completed_one.iterations.resize(1);
  Observations completed_none;  // stopped at an error in iteration 0
  const Verdict ok = Verdict::pass();
  const Verdict in_0 = Verdict::fail_in(0, "iteration 0, leaf v1 data", std::nullopt, "a");
  EXPECT_EQ(classify(ok, in_0, completed_none, completed_one), Classification::unreached);
  EXPECT_EQ(classify(in_0, ok, completed_one, completed_none), Classification::unreached);
  EXPECT_EQ(classify(ok, in_0, completed_one, completed_one), Classification::regression);
  EXPECT_EQ(classify(in_0, ok, completed_one, completed_one), Classification::fixed);
  // Both fail, the oracle first (iteration 0, where it stopped), the sut later (iteration 1,
  // which the oracle never reached): nothing to compare. The other way round, the sut failed
  // where the oracle still held: divergent, an alarm.
  Observations completed_two;
  completed_two.iterations.resize(2);
  const Verdict in_1 = Verdict::fail_in(1, "error", std::nullopt, "c");
  EXPECT_EQ(classify(in_0, in_1, completed_none, completed_two), Classification::unreached);
  EXPECT_EQ(classify(in_1, in_0, completed_two, completed_none), Classification::divergent);
  EXPECT_EQ(classify(in_0, in_1, completed_two, completed_two), Classification::divergent);
  const Verdict whole_run = Verdict::fail("error", std::nullopt, "b");  // no iteration: always reached
  EXPECT_EQ(classify(ok, whole_run, completed_none, completed_one), Classification::regression);
  EXPECT_FALSE(is_alarm(Classification::unreached));
}

// The case of issue 20: the oracle raises in backward (args[0] of the second distributing
// checkpoint still holds the 1-D chunk the first one left, whose backward never runs); clearing
// does not, so errors-match is fixed, and the sut's no-side-effects failure (that same chunk) is
// at a point the oracle never reached.
TEST(Classify, the_oracle_stopped_by_an_error_judges_nothing_after_it) {
  const Case c = load_case_file(std::string(test_paths::source_dir()) + "/corpus/regressions/unreached-after-the-oracle-raised.json");
  auto oracle = make_checkpoint("nonclearing");
  auto sut = make_checkpoint("clearing");
  const CaseResult result = check_case(c, *oracle, *sut);
  std::map<std::string, Classification> by_property;
  for (const PropertyResult& r : result.results) by_property[r.property] = r.classification;
  EXPECT_EQ(by_property["errors-match"], Classification::fixed);
  EXPECT_EQ(by_property["no-side-effects"], Classification::unreached);
  EXPECT_FALSE(result.has_alarm()) << describe_results(result.results);
}

TEST(Errors, errors_match_holds_when_both_raise_the_same_error) {
  const Case c = parse(R"({"format": "recheck-case", "version": 1, "seed": 8, "dtype": "float32",
    "device": "cpu", "iterations": 1, "leaves": [{"shape": [2, 3], "requires_grad": true, "fill": "arange"}],
    "root": {"ops": [{"op": "checkpoint", "distribute": false, "args": [{"ref": 0}], "body": {"ops": [
      {"op": "random", "fn": "dropout", "source": "device", "p": 0.5, "x": 0}, {"op": "raise", "x": 1}],
      "outputs": [2]}}], "outputs": [1]}})");
  EagerExecution eager;
  auto sut = make_checkpoint("clearing");
  const Observations e = run_case(c, eager);
  const Observations s = run_case(c, *sut);
  ASSERT_TRUE(e.error);
  EXPECT_EQ(e.error->error.type, "RuntimeError");
  EXPECT_TRUE(find_property("errors-match")->check(s, Runs{e, e}).holds);
}

// A fixed-seed slice of what `recheck run` does: no false alarm for the change under test.
TEST(Generated, clearing_shows_no_regression_on_a_fixed_seed_slice) {
  auto oracle = make_checkpoint("nonclearing");
  auto sut = make_checkpoint("clearing");
  Summary summary;
  for (uint64_t seed = 1000; seed < 1300; ++seed) {
    const Case c = draw_case(GenOptions{}, seed);
    const CaseResult result = check_case(c, *oracle, *sut);
    summary.add(result);
    for (const PropertyResult& r : result.results) {
      EXPECT_FALSE(is_alarm(r.classification)) << "draw seed " << seed << ", " << r.property << ": " << r.sut.describe();
    }
  }
  EXPECT_EQ(summary.cases(), 300);
}

// The fuzz target runs eager mode only when the sut and the oracle disagree on something a
// property compares with it. Against the full check, on the correct change and on mutants that
// break what eager mode is compared on (and what it is not): the same alarms, the same verdicts
// for every property kept, and only non-alarms for the properties left out.
TEST(Generated, eager_mode_skipped_when_sut_and_oracle_agree_loses_no_alarm) {
  auto oracle = make_checkpoint("nonclearing");
  int skipped = 0, ran = 0, alarms = 0;
  for (const char* variant : {"clearing", "skip-rng-restore", "restore-not-exception-safe", "zero-grad-in-place",
                              "detach-drops-requires-grad", "flag-left-set", "no-clear"}) {
    auto sut = make_checkpoint(variant);
    for (uint64_t seed = 500; seed < 620; ++seed) {
      const Case c = draw_case(GenOptions{}, seed);
      const CaseResult full = check_case(c, *oracle, *sut);
      const CaseResult lazy = check_case(c, *oracle, *sut, {}, EagerRun::when_needed);
      const std::string where = std::string(variant) + ", draw seed " + std::to_string(seed);
      EXPECT_EQ(lazy.has_alarm(), full.has_alarm()) << where;
      // An alarm comes with every property's verdict, eager mode's included, as in `repro`.
      if (full.has_alarm()) {
        EXPECT_EQ(lazy.results.size(), full.results.size()) << where;
      }
      alarms += full.has_alarm();
      (lazy.results.size() < full.results.size() ? skipped : ran) += 1;
      size_t k = 0;
      for (const PropertyResult& r : full.results) {
        if (k < lazy.results.size() && lazy.results[k].property == r.property) {
          EXPECT_EQ(lazy.results[k].classification, r.classification) << where << ", " << r.property;
          EXPECT_EQ(lazy.results[k].sut.describe(), r.sut.describe()) << where << ", " << r.property;
          ++k;
        } else {
          EXPECT_TRUE(find_property(r.property)->reads_eager()) << where << ", " << r.property;
          EXPECT_FALSE(is_alarm(r.classification)) << where << ", " << r.property << ": " << r.sut.describe();
        }
      }
      EXPECT_EQ(k, lazy.results.size()) << where;
    }
  }
  // Both paths taken, and the mutants caught on them.
  EXPECT_GT(skipped, 100);
  EXPECT_GT(ran, 20);
  EXPECT_GT(alarms, 10);
}

// The eager-agreement shortcut is derived from what the properties that read eager mode's run
// declare they read (properties/properties.cpp, eager_reads). Held here from the other side: a
// run changed in any one thing it records, wherever that change moves one of those properties'
// verdicts, no longer agrees with the run it was copied from; and a change in something none of
// them reads (what a body stashed) leaves the two agreeing.
TEST(Generated, agreement_for_eager_covers_everything_a_property_reading_eager_mode_reads) {
  EagerExecution eager_impl;
  auto oracle = make_checkpoint("nonclearing");
  const auto bump = [](at::Tensor& t) {
    if (t.defined() && t.is_floating_point() && t.numel() > 0) t = t.clone().add_(1);
  };
  using Change = std::function<void(Observations&)>;
  const std::vector<std::pair<std::string, Change>> changes = {
      {"an output", [&](Observations& o) { for (auto& t : o.iterations.at(0).outputs) bump(t); }},
      {"the loss", [&](Observations& o) { bump(o.iterations.at(0).loss); }},
      {"a leaf's .grad", [&](Observations& o) { for (auto& t : o.iterations.at(0).leaf_grads) bump(t); }},
      {"a leaf's data", [&](Observations& o) { for (auto& t : o.iterations.at(0).leaf_data) bump(t); }},
      {"the CPU generator", [](Observations& o) { o.iterations.at(0).rng.cpu.at(0) ^= 1; }},
      {"a tracker state the run seeded", [](Observations& o) { o.tracker_seeded["a-pull-request-s-own"] = {1}; }},
      {"the is-checkpointing flag", [](Observations& o) { o.iterations.at(0).checkpointing_flag ^= true; }},
      {"the autocast state", [](Observations& o) { o.iterations.at(0).autocast.cpu.enabled ^= true; }},
      {"a hook call's gradient", [&](Observations& o) { for (auto& call : o.iterations.at(0).hook_calls) bump(call.grad); }},
      {"a module's state", [](Observations& o) { for (auto& m : o.iterations.at(0).modules) m.steps += 1; }},
      {"an error's message", [](Observations& o) {
         for (auto& r : o.iterations) {
           if (r.error) r.error->error.message += " (changed)";
         }
       }},
  };
  std::map<std::string, int> moved;
  for (uint64_t seed = 700; seed < 760; ++seed) {
    const Case c = draw_case(GenOptions{}, seed);
    const Observations eager = run_case(c, eager_impl);
    const Observations a = run_case(c, *oracle);
    if (a.iterations.empty()) continue;
    ASSERT_TRUE(agree_for_eager(a, a));
    for (const auto& [what, change] : changes) {
      Observations b = a;
      change(b);
      bool verdict_moved = false;
      for (const Property& p : properties()) {
        if (!p.reads_eager() || !subject_for(a.implementation).applies(p.name)) continue;
        const Verdict va = p.check(a, Runs{eager, a});
        const Verdict vb = p.check(b, Runs{eager, a});
        verdict_moved = verdict_moved || va.holds != vb.holds || va.describe() != vb.describe();
      }
      moved[what] += verdict_moved;
      if (verdict_moved) {
        EXPECT_FALSE(agree_for_eager(a, b)) << what << " changed, draw seed " << seed;
      }
    }
    Observations b = a;
    b.iterations.at(0).stashed.clear();
    EXPECT_TRUE(agree_for_eager(a, b)) << "what a body stashed is read by no property of eager mode's, seed " << seed;
  }
  // Each change moved some verdict somewhere: the test reached every field it names.
  for (const auto& [what, change] : changes) EXPECT_GT(moved[what], 0) << what;
}

TEST(Generated, cases_nest_checkpoints_as_deep_as_allowed_and_no_deeper) {
  for (int max_depth : {2, GenOptions{}.max_depth}) {
    GenOptions options;
    options.max_depth = max_depth;
    int deepest = 0;
    for (uint64_t seed = 0; seed < 300; ++seed) deepest = std::max(deepest, stats(draw_case(options, seed)).max_depth);
    EXPECT_EQ(deepest, max_depth);
  }
}

}  // namespace
}  // namespace recheck
