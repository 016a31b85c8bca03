// The state op and module-state-matches-eager: what a run records of each module, the second
// update every released function makes in its recomputation (pre-existing), a step counter the
// recomputation reads one step on, and the mutant that recomputes twice, which the property
// sees where no value shows it.
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

// One checkpoint whose body takes the running mean of its argument into module 0 and returns
// tanh of it; with `counted`, the body's output is scaled by module 1's step counter.
Case stateful_body(bool counted) {
  nlohmann::json j = nlohmann::json::parse(R"({"format": "recheck-case", "version": 1, "seed": 5, "dtype": "float32",
    "device": "cpu", "iterations": 2, "leaves": [{"shape": [2, 3], "requires_grad": true, "fill": "randn"}],
    "root": {"ops": [{"op": "checkpoint", "distribute": false, "args": [{"ref": 0}], "body": {"ops": [
        {"op": "state", "fn": "running-mean", "module": 0, "x": 0},
        {"op": "unary", "fn": "tanh", "x": 1},
        {"op": "state", "fn": "count", "module": 1, "x": 2}], "outputs": [2]}}], "outputs": [1]}})");
  if (counted) j["root"]["ops"][0]["body"]["outputs"][0] = 3;
  return case_from_json(j);
}

using test_results::results_of;

TEST(ModuleState, each_module_s_state_is_recorded_after_every_iteration_and_carried_to_the_next) {
  const Case c = stateful_body(/*counted=*/true);
  EagerExecution eager;
  const Observations e = run_case(c, eager);
  ASSERT_EQ(e.iterations.size(), 2u);
  const double mean = make_leaves(c)[0].to(at::kDouble).mean().item<double>();
  for (size_t i = 0; i < 2; ++i) {
    const std::vector<ModuleRecord>& modules = e.iterations[i].modules;
    ASSERT_EQ(modules.size(), 2u);
    EXPECT_EQ(modules[0].module, 0);
    EXPECT_EQ(modules[0].updates, static_cast<int64_t>(i + 1));
    EXPECT_EQ(modules[1].steps, static_cast<int64_t>(i + 1));
  }
  EXPECT_EQ(e.iterations[0].modules[0].running_mean, 0.1 * mean);
  EXPECT_EQ(e.iterations[1].modules[0].running_mean, 0.9 * (0.1 * mean) + 0.1 * mean);
  // Step 1 scales by 1.25, step 2 by 1.5: the output of iteration 1 is 1.5 / 1.25 times iteration 0's.
  EXPECT_TRUE(at::allclose(e.iterations[1].outputs[0], e.iterations[0].outputs[0] * (1.5 / 1.25)));
}

// Every released function runs its body again in backward, and the layer's running statistics
// move twice per step (pytorch#96136): pre-existing, the change passing as the oracle does.
TEST(ModuleState, the_recomputation_updates_a_running_mean_again_a_pre_existing_finding) {
  auto r = results_of(stateful_body(/*counted=*/false), "nonclearing", "clearing");
  EXPECT_EQ(r.at("module-state-matches-eager").classification, Classification::pre_existing);
  EXPECT_EQ(r.at("module-state-matches-eager").sut.where, "iteration 0, module 0");
  EXPECT_EQ(r.at("module-state-matches-eager").sut.detail.rfind("updated more times than eager mode's (2 vs 1)", 0), 0u)
      << r.at("module-state-matches-eager").sut.detail;
  for (const char* property : {"grads-bitwise", "grads-match-eager", "outputs-bitwise", "recompute-fidelity"}) {
    EXPECT_EQ(r.at(property).classification, Classification::pass) << property;
  }
}

// A body reading a step counter it increments: the recomputation reads the next step, scales by
// another factor than forward did, and backward differentiates that: wrong gradients, silently.
TEST(ModuleState, a_step_counter_read_again_by_the_recomputation_gives_other_gradients) {
  auto r = results_of(stateful_body(/*counted=*/true), "nonclearing", "clearing");
  for (const char* property : {"module-state-matches-eager", "grads-match-eager", "recompute-fidelity"}) {
    EXPECT_EQ(r.at(property).classification, Classification::pre_existing) << property;
  }
  // Forward's outputs are eager mode's in iteration 0; iteration 1 starts a step further on.
  EXPECT_EQ(r.at("outputs-bitwise").classification, Classification::pre_existing);
  EXPECT_EQ(r.at("outputs-bitwise").sut.iteration, 1);
}

// Recomputing twice gives every value and gradient as recomputing once: of the value properties
// only module state sees it (3 updates against the oracle's 2 and eager mode's 1: divergent).
TEST(ModuleState, recomputing_twice_is_seen_by_the_module_state_where_no_value_shows_it) {
  auto r = results_of(stateful_body(/*counted=*/false), "nonclearing", "recompute-twice");
  EXPECT_EQ(r.at("module-state-matches-eager").classification, Classification::divergent);
  EXPECT_EQ(r.at("module-state-matches-eager").sut.detail.rfind("updated more times than eager mode's (3 vs 1)", 0), 0u)
      << r.at("module-state-matches-eager").sut.detail;
  for (const char* property : {"grads-bitwise", "grads-match-eager", "outputs-bitwise", "recompute-fidelity", "rng-restored",
                               "hooks-match-eager", "stash-kept"}) {
    EXPECT_EQ(r.at(property).classification, Classification::pass) << property;
  }
}

}  // namespace
}  // namespace recheck
