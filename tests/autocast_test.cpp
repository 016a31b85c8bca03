// State beyond RNG that a recomputation must see (issue 25): autocast regions in cases, run by
// the interpreter, and what Megatron's function (and its port) does with them.
#include <gtest/gtest.h>

#include <map>

#include <nlohmann/json.hpp>

#include "core/torch_compat.h"
#include "oracles/eager.h"
#include "properties/generator.h"
#include "properties/report.h"
#include "suts/checkpoint.h"

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

std::map<std::string, PropertyResult> results_of(const Case& c, const char* oracle_name, const char* sut_name) {
  auto oracle = make_checkpoint(oracle_name);
  auto sut = make_checkpoint(sut_name);
  std::map<std::string, PropertyResult> by_property;
  for (const PropertyResult& r : check_case(c, *oracle, *sut).results) by_property[r.property] = r;
  return by_property;
}

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

}  // namespace
}  // namespace recheck
