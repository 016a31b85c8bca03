// The training loop's own choices (Case::backward): torch.autograd.grad and backward(inputs=),
// which a reentrant checkpoint refuses as Megatron's function does, and a second backward with
// the graph retained, which every function takes.
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

using test_results::results_of;

// Two leaves that require grad, x and a weight w; one checkpoint computes tanh(x @ w); then a
// second product with w outside it. `backward`: the case's backward field, or null.
Case two_parameter_case(const nlohmann::json& backward) {
  nlohmann::json j = nlohmann::json::parse(R"({"format": "recheck-case", "version": 1, "seed": 11, "dtype": "float64",
    "device": "cpu", "iterations": 2,
    "leaves": [{"shape": [3, 3], "requires_grad": true, "fill": "randn"}, {"shape": [3, 3], "requires_grad": true, "fill": "randn"}],
    "root": {"ops": [{"op": "checkpoint", "distribute": false, "args": [{"ref": 0}, {"ref": 1}], "body": {"ops": [
        {"op": "matmul", "a": 0, "b": 1}, {"op": "unary", "fn": "tanh", "x": 2}], "outputs": [3]}},
      {"op": "matmul", "a": 2, "b": 1}], "outputs": [3]}})");
  if (!backward.is_null()) j["backward"] = backward;
  return case_from_json(j);
}

Observations eager_run(const Case& c) {
  EagerExecution eager;
  return run_case(c, eager);
}

TEST(TrainingLoop, torch_autograd_grad_returns_what_backward_accumulates_and_writes_no_grad) {
  const Observations accumulated = eager_run(two_parameter_case(nullptr));
  const Observations returned = eager_run(two_parameter_case({{"call", "grad"}, {"inputs", {0, 1}}}));
  ASSERT_EQ(returned.iterations.size(), 2u);
  ASSERT_FALSE(returned.error);
  // Iteration 0: the same gradients; backward then accumulates, grad returns each iteration's.
  for (size_t leaf = 0; leaf < 2; ++leaf) {
    EXPECT_TRUE(at::equal(returned.iterations[0].leaf_grads[leaf], accumulated.iterations[0].leaf_grads[leaf]));
    EXPECT_TRUE(at::equal(returned.iterations[1].leaf_grads[leaf], returned.iterations[0].leaf_grads[leaf]));
    EXPECT_FALSE(at::equal(accumulated.iterations[1].leaf_grads[leaf], accumulated.iterations[0].leaf_grads[leaf]));
  }
  // A leaf not asked for has no gradient: grad writes no .grad.
  const Observations one = eager_run(two_parameter_case({{"call", "grad"}, {"inputs", {1}}}));
  EXPECT_FALSE(one.iterations[0].leaf_grads[0].defined());
  EXPECT_TRUE(at::equal(one.iterations[0].leaf_grads[1], accumulated.iterations[0].leaf_grads[1]));
  // backward(inputs=[1]) accumulates into the weight alone.
  const Observations only = eager_run(two_parameter_case({{"call", "backward"}, {"inputs", {1}}}));
  EXPECT_FALSE(only.iterations[0].leaf_grads[0].defined());
  EXPECT_TRUE(at::equal(only.iterations[1].leaf_grads[1], accumulated.iterations[1].leaf_grads[1]));
}

TEST(TrainingLoop, a_second_backward_with_the_graph_retained_adds_the_gradients_again) {
  const Observations once = eager_run(two_parameter_case(nullptr));
  for (const char* call : {"backward", "grad"}) {
    nlohmann::json backward = {{"call", call}, {"twice", true}};
    if (std::string(call) == "grad") backward["inputs"] = {0, 1};
    const Case c = two_parameter_case(backward);
    const Observations twice = eager_run(c);
    ASSERT_FALSE(twice.error) << call << ": " << twice.error->error.message;
    EXPECT_TRUE(at::equal(twice.iterations[0].leaf_grads[1], once.iterations[0].leaf_grads[1] * 2)) << call;
    if (std::string(call) == "grad") continue;  // a reentrant checkpoint refuses it (the test below)
    // Megatron's function recomputes in each backward; the change clears each one's inputs.
    auto r = results_of(c, "nonclearing", "clearing");
    for (const char* property : {"grads-match-eager", "grads-bitwise", "errors-match", "grad-released"}) {
      EXPECT_EQ(r.at(property).classification, Classification::pass) << call << " " << property << ": "
                                                                     << r.at(property).sut.describe();
    }
  }
}

TEST(TrainingLoop, a_reentrant_checkpoint_refuses_grad_and_inputs_as_megatron_s_function_does) {
  for (const nlohmann::json& backward : {nlohmann::json{{"call", "grad"}, {"inputs", {0, 1}}},
                                         nlohmann::json{{"call", "backward"}, {"inputs", {1}}}}) {
    const Case c = two_parameter_case(backward);
    EXPECT_FALSE(eager_run(c).error) << backward;
    auto megatron = make_checkpoint("nonclearing");
    const Observations m = run_case(c, *megatron);
    ASSERT_TRUE(m.error) << backward;
    EXPECT_EQ(m.error->phase, "backward");
    EXPECT_NE(m.error->error.message.find("Checkpointing is not compatible with .grad()"), std::string::npos) << m.error->error.message;
    auto r = results_of(c, "nonclearing", "clearing");
    EXPECT_EQ(r.at("errors-match").classification, Classification::pre_existing) << backward;
    for (const PropertyResult& result : check_case(c, *make_checkpoint("nonclearing"), *make_checkpoint("clearing")).results) {
      EXPECT_NE(result.classification, Classification::regression) << result.property;
      EXPECT_NE(result.classification, Classification::divergent) << result.property;
    }
  }
}

}  // namespace
}  // namespace recheck
