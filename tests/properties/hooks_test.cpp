// The hook op and the two hook properties: what a run records of each hook's calls, a scaling
// hook's effect, Megatron's second call of a hook on a checkpoint's argument (pre-existing), and
// the mutant one backward per output makes, which only the hook properties see.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "oracles/eager.h"
#include "properties/report.h"
#include "suts/subject.h"
#include "tests/results.h"

namespace recheck {
namespace {

// One checkpoint whose body hangs a hook on `hooked` (0: its argument; 1: neg of it), and
// returns tanh and sigmoid of that neg: two outputs fed by one value.
Case hooked_body(int hooked, double scale = 1.0) {
  nlohmann::json j = nlohmann::json::parse(R"({"format": "recheck-case", "version": 1, "seed": 3, "dtype": "float32",
    "device": "cpu", "iterations": 2, "leaves": [{"shape": [3, 3], "requires_grad": true, "fill": "randn"}],
    "root": {"ops": [{"op": "checkpoint", "distribute": false, "args": [{"ref": 0}], "body": {"ops": [
        {"op": "unary", "fn": "neg", "x": 0},
        {"op": "hook", "kind": "tensor", "x": 0},
        {"op": "unary", "fn": "tanh", "x": 1},
        {"op": "unary", "fn": "sigmoid", "x": 1}], "outputs": [3, 4]}}], "outputs": [1, 2]}})");
  j["root"]["ops"][0]["body"]["ops"][1]["x"] = hooked;
  j["root"]["ops"][0]["body"]["ops"][1]["scale"] = scale;
  return case_from_json(j);
}

using test_results::results_of;

TEST(Hooks, each_call_is_recorded_with_where_it_was_hung_and_the_gradient_it_saw) {
  EagerExecution eager;
  const Observations e = run_case(hooked_body(1), eager);
  ASSERT_EQ(e.iterations.size(), 2u);
  for (const IterationRecord& record : e.iterations) {
    ASSERT_EQ(record.hook_calls.size(), 1u);  // a hook of iteration 0 records nothing in iteration 1
    EXPECT_EQ(record.hook_calls[0].site, "root.ops[0].body.ops[1]");
    EXPECT_FALSE(record.hook_calls[0].hung_in_recomputation);
    EXPECT_EQ(record.hook_calls[0].grad.sizes(), (std::vector<int64_t>{3, 3}));
    // d(neg x)/dx is -1: the leaf's gradient is minus what the hook saw.
    EXPECT_TRUE(at::equal(record.hook_calls[0].grad.neg(), e.iterations[0].leaf_grads[0]));
  }
  auto megatron = make_checkpoint("nonclearing");
  const Observations m = run_case(hooked_body(1), *megatron);
  ASSERT_EQ(m.iterations[0].hook_calls.size(), 1u);  // forward ran under no_grad: hung only when recomputing
  EXPECT_TRUE(m.iterations[0].hook_calls[0].hung_in_recomputation);
}

// A hook that returns the gradient times 1/2 halves every gradient behind it, in eager mode and
// in the checkpoint alike (the hook sits inside the recomputation's graph).
TEST(Hooks, a_scaling_hook_scales_the_gradient_behind_it) {
  EagerExecution eager;
  const Observations plain = run_case(hooked_body(1), eager);
  const Observations halved = run_case(hooked_body(1, 0.5), eager);
  EXPECT_TRUE(at::equal(halved.iterations[0].leaf_grads[0], plain.iterations[0].leaf_grads[0] * 0.5));
  for (const auto& [property, r] : results_of(hooked_body(1, 0.5), "nonclearing", "clearing")) {
    EXPECT_EQ(r.classification, Classification::pass) << property << ": " << r.sut.describe() << r.oracle.describe();
  }
}

// Megatron's function hangs a body's hook on its argument twice: in forward on the caller's
// tensor (an argument requires grad even under no_grad), and in the recomputation on the
// detached input. Eager mode calls it once; with a scale the gradient is scaled twice.
TEST(Hooks, a_hook_on_a_checkpoint_argument_is_called_twice_by_megatron_s_function_a_pre_existing_finding) {
  auto r = results_of(hooked_body(0), "nonclearing", "clearing");
  EXPECT_EQ(r.at("hooks-match-eager").classification, Classification::pre_existing);
  EXPECT_EQ(r.at("hooks-match-eager").sut.detail,
            "called more times than eager mode's (2 vs 1), hung in forward and in a recomputation");
  EXPECT_EQ(r.at("hooks-bitwise").classification, Classification::pass);
  EXPECT_EQ(r.at("grads-match-eager").classification, Classification::pass);
  r = results_of(hooked_body(0, 0.5), "nonclearing", "clearing");
  EXPECT_EQ(r.at("grads-match-eager").classification, Classification::pre_existing);
}

// One backward per output calls the hook on the value both outputs read once per output, with a
// part of its gradient each time; the gradients are the same bits (neg is exact, and a sum of two
// parts does not depend on their order), so only the hook properties see it. As the base of a
// head that calls it once, it is judged by eager mode: fixed, not a regression.
TEST(Hooks, one_backward_per_output_is_seen_by_the_hook_properties_alone_and_undoing_it_is_fixed) {
  auto r = results_of(hooked_body(1), "nonclearing", "backward-per-output");
  EXPECT_EQ(r.at("hooks-match-eager").classification, Classification::regression);
  EXPECT_EQ(r.at("hooks-bitwise").classification, Classification::regression);
  for (const char* property : {"grads-bitwise", "grads-match-eager", "outputs-bitwise", "recompute-fidelity"}) {
    EXPECT_EQ(r.at(property).classification, Classification::pass) << property;
  }
  r = results_of(hooked_body(1), "backward-per-output", "nonclearing");
  EXPECT_EQ(r.at("hooks-match-eager").classification, Classification::fixed);
  EXPECT_EQ(r.at("hooks-bitwise").classification, Classification::fixed) << r.at("hooks-bitwise").sut.describe();
}

// A DDP-style hook on the accumulator of a weight two checkpoints capture: eager mode's backward
// accumulates the weight's gradient once, each reentrant recomputation's backward once more, so
// Megatron's function calls the hook twice, the first time with one checkpoint's part of the
// gradient (pytorch#81296's "marked ready twice"). The last call sees eager mode's .grad.
TEST(Hooks, an_accumulator_hook_on_a_weight_two_checkpoints_capture_is_called_once_per_checkpoint) {
  const Case c = case_from_json(nlohmann::json::parse(R"({"format": "recheck-case", "version": 1, "seed": 3,
    "dtype": "float64", "device": "cpu", "iterations": 1,
    "leaves": [{"shape": [3, 3], "requires_grad": true, "fill": "randn"}, {"shape": [3, 3], "requires_grad": true, "fill": "randn"}],
    "root": {"ops": [{"op": "hook", "kind": "accumulator", "x": 1},
      {"op": "checkpoint", "distribute": false, "args": [{"ref": 0}], "body": {"ops": [
        {"op": "capture", "leaf": 1}, {"op": "matmul", "a": 0, "b": 1}], "outputs": [2]}},
      {"op": "checkpoint", "distribute": false, "args": [{"ref": 3}], "body": {"ops": [
        {"op": "capture", "leaf": 1}, {"op": "matmul", "a": 0, "b": 1}], "outputs": [2]}}], "outputs": [4]}})"));
  EagerExecution eager;
  const Observations e = run_case(c, eager);
  ASSERT_EQ(e.iterations.at(0).hook_calls.size(), 1u);
  EXPECT_TRUE(at::equal(e.iterations[0].hook_calls[0].grad, e.iterations[0].leaf_grads[1]));
  auto megatron = make_checkpoint("nonclearing");
  const Observations m = run_case(c, *megatron);
  ASSERT_EQ(m.iterations.at(0).hook_calls.size(), 2u);
  EXPECT_FALSE(at::equal(m.iterations[0].hook_calls[0].grad, m.iterations[0].leaf_grads[1]));
  EXPECT_TRUE(at::allclose(m.iterations[0].hook_calls[1].grad, e.iterations[0].leaf_grads[1]));
  auto r = results_of(c, "nonclearing", "clearing");
  EXPECT_EQ(r.at("hooks-match-eager").classification, Classification::pre_existing);
  EXPECT_EQ(r.at("hooks-match-eager").sut.detail, "called more times than eager mode's (2 vs 1), hung in forward");
  EXPECT_EQ(r.at("hooks-bitwise").classification, Classification::pass);
}

// PyTorch calls a parameter's post-accumulate-grad hooks inside its accumulator, before the
// accumulator's own post hooks, each kind in the order hung; a tensor hook before both.
TEST(Hooks, post_accumulate_hooks_come_before_accumulator_hooks_in_the_order_pytorch_calls_them) {
  const Case c = case_from_json(nlohmann::json::parse(R"({"format": "recheck-case", "version": 1, "seed": 3,
    "dtype": "float64", "device": "cpu", "iterations": 1,
    "leaves": [{"shape": [3], "requires_grad": true, "fill": "randn"}],
    "root": {"ops": [{"op": "hook", "kind": "accumulator", "x": 0}, {"op": "hook", "kind": "post-accumulate", "x": 0},
      {"op": "hook", "kind": "accumulator", "x": 0}, {"op": "hook", "kind": "post-accumulate", "x": 0},
      {"op": "hook", "kind": "tensor", "x": 0}, {"op": "unary", "fn": "square", "x": 0}], "outputs": [6]}})"));
  EagerExecution eager;
  const Observations e = run_case(c, eager);
  std::vector<std::string> sites;
  for (const HookCall& call : e.iterations.at(0).hook_calls) sites.push_back(call.site);
  EXPECT_EQ(sites, (std::vector<std::string>{"root.ops[4]", "root.ops[1]", "root.ops[3]", "root.ops[0]", "root.ops[2]"}));
  // Each post hook saw the .grad accumulated.
  EXPECT_TRUE(at::equal(e.iterations[0].hook_calls[1].grad, e.iterations[0].leaf_grads[0]));
  EXPECT_TRUE(at::equal(e.iterations[0].hook_calls[4].grad, e.iterations[0].leaf_grads[0]));
}

}  // namespace
}  // namespace recheck
