// State beyond RNG that a recomputation must see (issue 25): autocast regions in cases, run by
// the interpreter, and what Megatron's function (and its port) does with them.
#include <gtest/gtest.h>

#include <map>

#include <nlohmann/json.hpp>

#include "core/torch_compat.h"
#include "oracles/eager.h"
#include "properties/generator.h"
#include "properties/report.h"
#include "suts/megatron_checkpoint_function/checkpoint.h"
#include "tests/results.h"

namespace recheck {
namespace {

// The forward in a CPU bfloat16 autocast region, backward outside it: a checkpointed
// tanh(matmul(x, w)), the matmul cast to bfloat16 by autocast.
const char* kAutocastAroundACheckpoint = R"({"format": "recheck-case", "version": 1, "seed": 8, "dtype": "float32",
  "device": "cpu", "iterations": 1,
  "leaves": [{"shape": [8, 8], "requires_grad": true, "fill": "randn"},
             {"shape": [8, 8], "requires_grad": true, "fill": "randn"}],
  "root": {"ops": [
    {"op": "autocast", "enabled": true, "device_type": "cpu", "dtype": "bfloat16", "args": [0, 1], "body": {"ops": [
      {"op": "checkpoint", "distribute": false, "args": [{"ref": 0}, {"ref": 1}], "body": {"ops": [
        {"op": "matmul", "a": 0, "b": 1},
        {"op": "unary", "fn": "tanh", "x": 2}
      ], "outputs": [3]}}
    ], "outputs": [2]}}
  ], "outputs": [2]}})";

Case parse(const char* text) { return case_from_json(nlohmann::json::parse(text)); }

using test_results::results_of;

TEST(Autocast, a_region_casts_what_autocast_casts_and_ends_with_the_state_before_it) {
  const Case c = parse(kAutocastAroundACheckpoint);
  EagerExecution eager;
  const Observations run = run_case(c, eager);
  ASSERT_EQ(run.iterations.size(), 1u);
  EXPECT_EQ(run.iterations[0].outputs[0].scalar_type(), at::kBFloat16);  // tanh of a bfloat16 matmul
  EXPECT_EQ(run.iterations[0].leaf_grads[0].scalar_type(), at::kFloat);  // the leaves' own dtype
  EXPECT_FALSE(compat::autocast_state(at::kCPU).enabled);
  // The same case without the region computes in float32.
  Case plain = c;
  plain.root.ops[0] = std::get<Autocast>(c.root.ops[0]);
  std::get<Autocast>(plain.root.ops[0]).enabled = false;
  EXPECT_EQ(run_case(plain, eager).iterations[0].outputs[0].scalar_type(), at::kFloat);
}

// Megatron's CheckpointFunction records the RNG states and nothing else: its recomputation, in
// backward, outside the region, runs in float32 where forward ran in bfloat16. The port records
// what Megatron records, so the finding shows on it, pre-existing.
TEST(Autocast, megatron_recomputes_outside_the_region_and_the_port_does_as_megatron_does) {
  const Case c = parse(kAutocastAroundACheckpoint);
  auto results = results_of(c, "nonclearing", "clearing");
  EXPECT_EQ(results.at("recompute-fidelity").classification, Classification::pre_existing)
      << results.at("recompute-fidelity").sut.describe();
  EXPECT_NE(results.at("recompute-fidelity").sut.describe().find("BFloat16"), std::string::npos)
      << results.at("recompute-fidelity").sut.describe();
  EXPECT_EQ(results.at("grads-match-eager").classification, Classification::pre_existing)
      << results.at("grads-match-eager").sut.describe();
  // The change itself changes nothing here.
  for (const auto& [property, r] : results) EXPECT_FALSE(is_alarm(r.classification)) << property;
}

TEST(Autocast, a_region_is_written_read_shown_and_reduced) {
  const Case c = parse(kAutocastAroundACheckpoint);
  EXPECT_EQ(to_json(case_from_json(to_json(c))).dump(), to_json(c).dump());
  EXPECT_NE(show(c).find("autocast('cpu', dtype=bfloat16, v0, v1)"), std::string::npos) << show(c);
  nlohmann::json bad = to_json(c);
  bad["root"]["ops"][0]["dtype"] = "float8";
  EXPECT_THROW(case_from_json(bad), CaseError);
}

// The generator draws autocast regions after the graph: around the forward, and toggled inside a
// checkpoint's body (off inside a region, on inside a plain forward).
TEST(Autocast, the_generator_draws_regions_around_the_forward_and_inside_bodies) {
  std::map<std::string, int> counts;
  constexpr int kCases = 600;
  for (int i = 0; i < kCases; ++i) {
    for (const std::string& f : case_features(draw_case(GenOptions{}, 1 + static_cast<uint64_t>(i)))) ++counts[f];
  }
  EXPECT_GT(counts["autocast on"], kCases / 10);
  EXPECT_GT(counts["autocast off inside a checkpoint"], kCases / 100);
  EXPECT_GT(counts["autocast on inside a checkpoint"], kCases / 100);
}

// The fix records the autocast state in forward and recomputes under it, as torch's checkpoint
// does: recompute-fidelity and grads-match-eager are fixed, and the properties that compare with
// the oracle's run (its gradients, its memory), whose recomputation ran another graph, say the
// oracle is no reference there: fixed, never an alarm.
TEST(Autocast, the_fix_recomputes_under_forward_s_state_and_is_fixed_never_an_alarm) {
  const Case c = parse(kAutocastAroundACheckpoint);
  auto results = results_of(c, "nonclearing", "autocast-restored");
  EXPECT_EQ(results.at("recompute-fidelity").classification, Classification::fixed);
  EXPECT_EQ(results.at("grads-match-eager").classification, Classification::fixed);
  EXPECT_EQ(results.at("grads-bitwise").classification, Classification::fixed);
  EXPECT_NE(results.at("grads-bitwise").sut.describe().find("the oracle is no reference here"), std::string::npos);
  for (const auto& [property, r] : results) EXPECT_FALSE(is_alarm(r.classification)) << property << ": " << r.sut.describe();
}

// A recomputation under another state fails recompute-fidelity even where the outputs it returns
// match forward's: here the matmul autocast casts is computed and not returned.
TEST(Autocast, a_recomputation_under_another_state_fails_fidelity_where_its_outputs_match) {
  Case c = parse(kAutocastAroundACheckpoint);
  Segment& body = *std::get<Checkpoint>(std::get<Autocast>(c.root.ops[0]).body->ops[0]).body;
  body.ops[1] = Unary{Unary::Fn::tanh, 0};  // tanh(x), the matmul left unused
  const auto results = results_of(c, "nonclearing", "clearing");
  const Verdict& sut = results.at("recompute-fidelity").sut;
  ASSERT_TRUE(sut.difference.has_value()) << sut.describe();
  EXPECT_EQ(sut.difference->kind, "autocast") << sut.describe();
  EXPECT_NE(sut.describe().find("cpu disabled, BFloat16 vs cpu enabled, BFloat16"), std::string::npos) << sut.describe();
  EXPECT_EQ(results.at("recompute-fidelity").classification, Classification::pre_existing);
}

// An outer checkpoint outside autocast whose body turns it on around an inner checkpoint: the
// two record different states. A fix that keeps the state on the function, not per call,
// recomputes the outer body under the inner's state: an alarm, where the fix is fixed.
const char* kStateOnlyTheInnerRecords = R"({"format": "recheck-case", "version": 1, "seed": 3, "dtype": "float32",
  "device": "cpu", "iterations": 1,
  "leaves": [{"shape": [4, 4], "requires_grad": true, "fill": "randn"},
             {"shape": [4, 4], "requires_grad": true, "fill": "randn"}],
  "root": {"ops": [
    {"op": "checkpoint", "distribute": false, "args": [{"ref": 0}, {"ref": 1}], "body": {"ops": [
      {"op": "matmul", "a": 0, "b": 1},
      {"op": "autocast", "enabled": true, "device_type": "cpu", "dtype": "bfloat16", "args": [2, 1], "body": {"ops": [
        {"op": "checkpoint", "distribute": false, "args": [{"ref": 0}, {"ref": 1}], "body": {"ops": [
          {"op": "matmul", "a": 0, "b": 1}
        ], "outputs": [2]}}
      ], "outputs": [2]}}
    ], "outputs": [3]}}
  ], "outputs": [2]}})";

TEST(Autocast, a_fix_that_keeps_the_state_on_the_function_is_killed_where_the_fix_is_fixed) {
  const Case c = parse(kStateOnlyTheInnerRecords);
  const auto fixed = results_of(c, "nonclearing", "autocast-restored");
  EXPECT_EQ(fixed.at("recompute-fidelity").classification, Classification::fixed)
      << fixed.at("recompute-fidelity").oracle.describe();
  for (const auto& [property, r] : fixed) EXPECT_FALSE(is_alarm(r.classification)) << property << ": " << r.sut.describe();
  const auto mutant = results_of(c, "nonclearing", "autocast-on-the-function");
  EXPECT_TRUE(is_alarm(mutant.at("recompute-fidelity").classification))
      << to_string(mutant.at("recompute-fidelity").classification) << ": " << mutant.at("recompute-fidelity").sut.describe();
  EXPECT_NE(mutant.at("recompute-fidelity").sut.describe().find("root.ops[0] at iteration 0, recomputation vs forward"), std::string::npos)
      << mutant.at("recompute-fidelity").sut.describe();
}

// Only where a case's autocast dtype is not the device's default does restoring the flag alone
// differ from restoring the state: float16 on CPU, from libtorch 2.1. Before it, such a case is
// refused by name.
TEST(Autocast, a_fix_that_loses_the_dtype_is_killed_by_a_float16_case_where_cpu_autocast_has_it) {
  Case c = parse(kAutocastAroundACheckpoint);
  std::get<Autocast>(c.root.ops[0]).dtype = Autocast::Precision::float16;
  if (!compat::kCpuAutocastHasFloat16) {
    try {
      validate(c);
      FAIL() << "a float16 CPU autocast case was accepted by libtorch " << TORCH_VERSION;
    } catch (const CaseError& e) {
      EXPECT_NE(std::string(e.what()).find("root.ops[0].dtype: float16 autocast on cpu needs libtorch 2.1"),
                std::string::npos) << e.what();
    }
    EXPECT_FALSE(find_variant("autocast-dtype-lost").cannot_be_killed_on_cpu.empty());
    GTEST_SKIP() << "CPU autocast has no float16 in libtorch " << TORCH_VERSION;
  }
  const auto fixed = results_of(c, "nonclearing", "autocast-restored");
  EXPECT_EQ(fixed.at("recompute-fidelity").classification, Classification::fixed);
  const auto mutant = results_of(c, "nonclearing", "autocast-dtype-lost");
  EXPECT_TRUE(is_alarm(mutant.at("recompute-fidelity").classification))
      << to_string(mutant.at("recompute-fidelity").classification) << ": " << mutant.at("recompute-fidelity").sut.describe();
  EXPECT_NE(mutant.at("recompute-fidelity").sut.describe().find("BFloat16 vs cpu enabled, Half"), std::string::npos)
      << mutant.at("recompute-fidelity").sut.describe();
}

// A checkpoint that leaves autocast on after its forward (a region entered and never left): the
// state a run leaves is compared with eager mode's.
class LeavesAutocastOn : public MegatronCheckpoint {
 public:
  LeavesAutocastOn() : MegatronCheckpoint(find_variant("clearing")) {}
  std::string name() const override { return "leaves-autocast-on"; }
  Values apply(const RunFunction& run_function, const CallSettings& settings, const Values& args) override {
    Values outputs = MegatronCheckpoint::apply(run_function, settings, args);
    compat::set_autocast_state(at::kCPU, {true, at::kBFloat16});
    return outputs;
  }
};

TEST(Autocast, a_state_left_on_after_a_run_is_a_side_effect) {
  Case c = parse(kAutocastAroundACheckpoint);
  const Segment plain = *std::get<Autocast>(c.root.ops[0]).body;  // the checkpoint, no region around it
  c.root = plain;
  auto oracle = make_checkpoint("nonclearing");
  LeavesAutocastOn leaky;
  std::map<std::string, PropertyResult> results;
  for (const PropertyResult& r : check_case(c, *oracle, leaky).results) results[r.property] = r;
  compat::set_autocast_states(compat::default_autocast_states());
  EXPECT_EQ(results.at("no-side-effects").classification, Classification::regression);
  EXPECT_NE(results.at("no-side-effects").sut.describe().find("autocast: cpu enabled, BFloat16 vs cpu disabled, BFloat16"),
            std::string::npos) << results.at("no-side-effects").sut.describe();
}

}  // namespace
}  // namespace recheck
