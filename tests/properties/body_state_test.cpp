// What a checkpoint's body sees and leaves: the is-checkpointing flag while it runs
// (flag-in-body), and what it stashes, as the user finds it after the iteration (stash-kept,
// stash-grads). Each property both ways: the mistake it is for fails, the correct code and a fix
// of the released function pass.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "oracles/eager.h"
#include "properties/body_state.h"
#include "properties/generator.h"
#include "properties/report.h"
#include "tests/cases.h"
#include "tests/three_runs.h"

namespace recheck {
namespace {

using test_cases::kStashedDropoutCase;

// A checkpoint whose body runs a nested checkpoint and then one more op: Megatron's nested
// checkpoint unsets the flag on its way out, so that op reads it unset.
const char* const kNestedCase = R"({"format": "recheck-case", "version": 1, "seed": 7,
  "dtype": "float32", "device": "cpu", "iterations": 1,
  "leaves": [{"shape": [2, 2], "requires_grad": true, "fill": "randn"},
             {"shape": [2, 2], "requires_grad": true, "fill": "randn"}],
  "root": {"ops": [
    {"op": "checkpoint", "distribute": false, "args": [{"ref": 0}, {"ref": 1}], "body": {"ops": [
      {"op": "checkpoint", "distribute": false, "args": [{"ref": 0}], "body": {"ops": [
        {"op": "unary", "fn": "tanh", "x": 0}], "outputs": [1]}},
      {"op": "binary", "fn": "mul", "a": 2, "b": 1}
    ], "outputs": [3]}}
  ], "outputs": [2]}})";

std::vector<PropertyResult> check(const Runs3& r, const std::string& claims = "none") {
  return check_properties(r.eager, r.oracle, r.sut, ChangeClaims::made, parse_claims(claims));
}

TEST(FlagInBody, every_call_reads_before_each_op_of_its_body_and_once_it_returned) {
  const Runs3 r = run_three(kNestedCase, "nonclearing", "clearing");
  // The outer checkpoint (forward, recomputation); the inner one run by the outer's forward
  // (never differentiated); the inner one run by the recomputation (forward, recomputation).
  ASSERT_EQ(r.oracle.segment_calls.size(), 3u);
  const SegmentCall& outer = r.oracle.segment_calls.front();
  ASSERT_EQ(outer.flag_reads.size(), 2u);  // forward, recomputation
  EXPECT_EQ(outer.flag_reads[0], (std::vector<bool>{true, false, false}));
  EXPECT_EQ(outer.flag_reads[1], (std::vector<bool>{true, false, false}));
  EXPECT_EQ(r.oracle.segment_calls[2].flag_reads, (std::vector<std::vector<bool>>{{true, true}, {true, true}}));
  EXPECT_TRUE(r.eager.segment_calls.front().flag_reads.empty()) << "eager mode keeps no flag";
}

// Megatron's own behaviour, pre-existing: the clearing change shares it.
TEST(FlagInBody, megatron_unsets_the_flag_for_the_rest_of_a_body_after_a_nested_checkpoint) {
  const Runs3 r = run_three(kNestedCase, "nonclearing", "clearing");
  const std::vector<PropertyResult> results = check(r);
  const PropertyResult* flag = result_for(results, "flag-in-body");
  ASSERT_NE(flag, nullptr);
  EXPECT_EQ(flag->classification, Classification::pre_existing);
  EXPECT_EQ(flag->oracle.describe(),
            "root.ops[0] at iteration 0, forward: is_checkpointing() read False before root.ops[0].body.ops[1]");
}

TEST(FlagInBody, a_fix_that_puts_the_flag_back_as_it_found_it_is_fixed) {
  const Runs3 r = run_three(kNestedCase, "nonclearing", "flag-restored-after-nesting");
  const std::vector<PropertyResult> results = check(r);
  EXPECT_EQ(result_for(results, "flag-in-body")->classification, Classification::fixed);
  for (const PropertyResult& p : results) EXPECT_FALSE(is_alarm(p.classification)) << p.property << " " << p.sut.describe();
}

TEST(FlagInBody, setting_the_flag_after_the_body_ran_is_a_regression) {
  const Runs3 r = run_three(kStashedDropoutCase, "nonclearing", "flag-set-after-body");
  const std::vector<PropertyResult> results = check(r, "clearing");
  const PropertyResult* flag = result_for(results, "flag-in-body");
  ASSERT_NE(flag, nullptr);
  EXPECT_TRUE(flag->oracle.holds);
  EXPECT_EQ(flag->classification, Classification::regression);
  EXPECT_NE(flag->sut.describe().find("forward: is_checkpointing() read False before root.ops[0].body.ops[0]"),
            std::string::npos)
      << flag->sut.describe();
}

TEST(FlagInBody, is_not_checked_where_a_run_keeps_no_flag) {
  auto oracle = make_checkpoint("nonclearing");
  EagerExecution eager;
  const auto reasons = properties_not_checked(*oracle, eager, parse_claims("none"));
  ASSERT_EQ(reasons.count("flag-in-body"), 1u);
  EXPECT_EQ(reasons.at("flag-in-body"), "the sut's code keeps no is-checkpointing flag");
}

TEST(StashKept, records_the_detached_input_a_body_stashed_as_its_user_finds_it) {
  const Runs3 r = run_three(kStashedDropoutCase, "nonclearing", "clearing");
  ASSERT_EQ(r.oracle.iterations.size(), 2u);
  ASSERT_EQ(r.oracle.iterations[0].stashed.size(), 1u);
  const StashRecord& kept = r.oracle.iterations[0].stashed[0];
  EXPECT_EQ(kept.site, "root.ops[0].body.ops[0]");
  EXPECT_TRUE(kept.tensor && kept.requires_grad && kept.is_leaf);
  EXPECT_EQ(kept.data.sizes(), (std::vector<int64_t>{3, 3}));
  EXPECT_TRUE(kept.grad.defined()) << "the function without the change leaves the .grad";
  EXPECT_FALSE(r.sut.iterations[0].stashed[0].grad.defined()) << "the change clears it";
  for (const PropertyResult& p : check(r, "clearing")) EXPECT_FALSE(is_alarm(p.classification)) << p.property;
}

TEST(StashKept, freeing_the_detached_inputs_a_user_kept_is_a_regression) {
  const Runs3 r = run_three(kStashedDropoutCase, "nonclearing", "detached-inputs-freed");
  const std::vector<PropertyResult> results = check(r, "clearing");
  const PropertyResult* kept = result_for(results, "stash-kept");
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->classification, Classification::regression);
  EXPECT_NE(kept->sut.describe().find("after iteration 0, the stash at root.ops[0].body.ops[0] data: shape: [0] vs [3, 3]"),
            std::string::npos)
      << kept->sut.describe();
}

// detach-drops-requires-grad cannot show it: with no input requiring grad, its backward raises.
TEST(StashKept, a_stash_that_no_longer_requires_grad_is_told_apart) {
  const Runs3 r = run_three(kStashedDropoutCase, "nonclearing", "nonclearing");
  Observations changed = r.sut;
  changed.iterations[1].stashed[0].requires_grad = false;
  const Verdict v = stash_kept(changed, Runs{r.eager, r.oracle});
  EXPECT_EQ(v.describe(), "after iteration 1, the stash at root.ops[0].body.ops[0]: requires_grad False, the oracle's True");
  changed = r.sut;
  changed.iterations[0].stashed[0].version += 1;
  EXPECT_NE(stash_kept(changed, Runs{r.eager, r.oracle}).describe().find("_version 1, the oracle's 0"), std::string::npos);
  EXPECT_TRUE(stash_kept(r.sut, Runs{r.eager, r.oracle}).holds);
}

// The base frees what the user kept; the head does not: eager mode's stash holds the head's data.
TEST(StashKept, a_head_that_stops_freeing_them_is_fixed_as_eager_mode_judges) {
  const Runs3 r = run_three(kStashedDropoutCase, "detached-inputs-freed", "clearing");
  const std::vector<PropertyResult> results = check(r, "clearing");
  const PropertyResult* kept = result_for(results, "stash-kept");
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->classification, Classification::fixed);
  EXPECT_NE(kept->sut.detail.find("eager mode's stash at root.ops[0].body.ops[0]"), std::string::npos)
      << kept->sut.detail;
}

// A pull request that claims nothing about .grad is held to leaving it as the base does; the
// clearing change claims it, and is not.
TEST(StashGrads, clearing_what_a_user_kept_is_a_regression_unless_grad_released_is_claimed) {
  const Runs3 r = run_three(kStashedDropoutCase, "nonclearing", "clearing");
  const std::vector<PropertyResult> results = check(r, "none");
  const PropertyResult* grads = result_for(results, "stash-grads");
  ASSERT_NE(grads, nullptr);
  EXPECT_EQ(grads->classification, Classification::regression);
  EXPECT_NE(grads->sut.describe().find(".grad"), std::string::npos) << grads->sut.describe();
  for (const char* claims : {"clearing", "grad-released"}) {
    const std::vector<PropertyResult> held = check(r, claims);
    EXPECT_EQ(result_for(held, "stash-grads"), nullptr) << claims;
  }
  const std::vector<PropertyResult> floor_only = check(r, "memory-floor");
  EXPECT_NE(result_for(floor_only, "stash-grads"), nullptr);
  auto oracle = make_checkpoint("nonclearing");
  auto sut = make_checkpoint("clearing");
  const auto reasons = properties_not_checked(*oracle, *sut, ClaimChoice{});
  ASSERT_EQ(reasons.count("stash-grads"), 1u);
  EXPECT_NE(reasons.at("stash-grads").find("grad-released"), std::string::npos);
}

}  // namespace
}  // namespace recheck
