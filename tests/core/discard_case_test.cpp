// Checkpoints without output and discard ops in the case model (core/case.h): JSON, show,
// validation, the generator's draws for an implementation that runs them, and eager mode's run of
// them. Megatron's CheckpointWithoutOutput itself runs in the python tier
// (python/megatron_without_output/megatron_without_output_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/case.h"
#include "core/interpreter.h"
#include "oracles/eager.h"
#include "properties/generator.h"

namespace recheck {
namespace {

using nlohmann::json;

// x [2, 2] requires grad, w [2, 2]: v2 = checkpoint_without_output(x){tanh}, v3 = v2 @ w, discard.
json discard_case() {
  return json::parse(R"({"format": "recheck-case", "version": 1, "seed": 3, "dtype": "float32",
    "device": "cpu", "iterations": 1,
    "leaves": [{"shape": [2, 2], "requires_grad": true, "fill": "randn"},
               {"shape": [2, 2], "requires_grad": true, "fill": "randn"}],
    "root": {"ops": [
      {"op": "checkpoint", "distribute": false, "without_output": true, "args": [{"ref": 0}],
       "body": {"ops": [{"op": "unary", "fn": "tanh", "x": 0}], "outputs": [1]}},
      {"op": "matmul", "a": 2, "b": 1},
      {"op": "discard", "checkpoints": [2], "hook": 3}],
     "outputs": [3]}})");
}

std::string load_error(const json& j) {
  try {
    case_from_json(j);
  } catch (const CaseError& error) {
    return error.what();
  }
  return "no error";
}

TEST(DiscardCase, round_trips_and_shows_what_it_discards_and_where_it_recomputes) {
  const json j = discard_case();
  const Case c = case_from_json(j);
  EXPECT_EQ(to_json(c)["root"], j["root"]);
  const std::string text = show(c);
  EXPECT_NE(text.find("v2 = checkpoint_without_output(v0)"), std::string::npos) << text;
  EXPECT_NE(text.find("discard_outputs([v2], recompute_on_grad_of=v3)"), std::string::npos) << text;
  // A plain checkpoint writes no without_output: every earlier case file reads as before.
  json plain = j;
  plain["root"]["ops"][0].erase("without_output");
  plain["root"]["ops"].erase(2);
  EXPECT_EQ(to_json(case_from_json(plain))["root"]["ops"][0].count("without_output"), 0u);
}

TEST(DiscardCase, a_discard_names_the_first_output_of_a_checkpoint_without_output_once_and_a_tensor_hook) {
  json j = discard_case();
  j["root"]["ops"][2]["checkpoints"] = {3};
  EXPECT_EQ(load_error(j), "case.root.ops[2].checkpoints[0]: value v3 is not the first output of a checkpoint without "
                           "output of this segment");
  j = discard_case();
  j["root"]["ops"][0].erase("without_output");
  EXPECT_NE(load_error(j).find("is not the first output of a checkpoint without output"), std::string::npos);
  j = discard_case();
  j["root"]["ops"][2]["checkpoints"] = {2, 2};
  EXPECT_EQ(load_error(j), "case.root.ops[2].checkpoints[1]: the outputs of the checkpoint giving v2 are discarded twice");
  j = discard_case();
  j["root"]["ops"][2]["checkpoints"] = json::array();
  EXPECT_NE(load_error(j).find("root.ops[2].checkpoints"), std::string::npos) << load_error(j);
  j = discard_case();
  j["root"]["ops"][2]["hook"] = 9;
  EXPECT_NE(load_error(j).find("root.ops[2].hook: value v9 is not defined here"), std::string::npos) << load_error(j);
  j = discard_case();
  j["root"]["ops"][0]["distribute"] = true;
  EXPECT_EQ(load_error(j), "case.root.ops[0].distribute: a checkpoint without output does not distribute");
  j = discard_case();
  j["root"]["ops"][2]["extra"] = 1;
  EXPECT_NE(load_error(j).find("extra"), std::string::npos) << load_error(j);
}

// Eager mode runs the body as any body and frees nothing at the discard: the discard's record says
// so, and no caller's tensor changed.
TEST(DiscardCase, eager_mode_runs_a_checkpoint_without_output_as_a_body_and_frees_nothing) {
  const Case c = case_from_json(discard_case());
  EagerExecution eager;
  const Observations run = run_case(c, eager);
  ASSERT_FALSE(run.error) << run.error->error.message;
  ASSERT_EQ(run.iterations.at(0).discards.size(), 1u);
  const DiscardRecord& d = run.iterations.at(0).discards.at(0);
  EXPECT_EQ(d.site, "root.ops[2]");
  EXPECT_EQ(d.checkpoint, "root.ops[0]");
  EXPECT_FALSE(d.freed);
  EXPECT_TRUE(d.touched.empty());
  EXPECT_EQ(d.recomputations, 0);
  ASSERT_EQ(d.after.size(), 1u);
  EXPECT_TRUE(d.after[0].defined());
  EXPECT_TRUE(at::equal(d.after[0], d.forward[0]));
  EXPECT_TRUE(run.iterations.at(0).leaf_grads.at(0).defined());
}

// Only an implementation that runs them draws them, and Megatron's cases stay what they were.
TEST(DiscardCase, only_an_implementation_that_runs_them_draws_them) {
  GenOptions options;
  options.without_output = true;
  int with = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const Case c = draw_case(options, seed);
    const json once = to_json(c);
    EXPECT_EQ(to_json(case_from_json(once)), once) << "draw seed " << seed;
    if (any_op(c.root, [](const Op& op) { return std::holds_alternative<Discard>(op); })) ++with;
    EXPECT_FALSE(any_op(draw_case(GenOptions{}, seed).root, [](const Op& op) {
      const auto* checkpoint = std::get_if<Checkpoint>(&op);
      return std::holds_alternative<Discard>(op) || (checkpoint != nullptr && checkpoint->without_output);
    }));
  }
  EXPECT_GT(with, 40);
}

// For an implementation whose checkpoints without output take None and literals (Megatron-LM's
// since 2026), some of their arguments after the first are such; never for one that takes
// tensors only (megatron-core 0.16.1), and the draws for it are as before.
TEST(DiscardCase, non_tensor_arguments_are_drawn_only_where_the_implementation_takes_them) {
  GenOptions tensors_only;
  tensors_only.without_output = true;
  GenOptions mixed = tensors_only;
  mixed.without_output_non_tensors = true;
  const auto mixes = [](const Case& c) {
    const std::vector<std::string> features = case_features(c);
    return std::find(features.begin(), features.end(), "checkpoint without output, non-tensor argument") != features.end();
  };
  int with = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const Case c = draw_case(mixed, seed);
    EXPECT_NO_THROW(validate(c)) << "draw seed " << seed;
    with += mixes(c);
    EXPECT_FALSE(mixes(draw_case(tensors_only, seed))) << "draw seed " << seed;
  }
  EXPECT_GT(with, 20);
  // Eager mode runs them (the body gets the literal as it is): most such cases complete.
  EagerExecution eager;
  int mixed_cases = 0;
  int completed = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const Case c = draw_case(mixed, seed);
    if (!mixes(c)) continue;
    ++mixed_cases;
    completed += !run_case(c, eager).error;
  }
  EXPECT_GT(completed, mixed_cases / 2) << completed << " of " << mixed_cases;
}

// The fuzzer's byte decoder draws them as the generator does, for an implementation that runs
// them: every decoded case validates and round-trips, and a decoder for one that runs none draws
// none.
TEST(DiscardCase, the_byte_decoder_draws_them_for_an_implementation_that_runs_them) {
  GenOptions options;
  options.without_output = true;
  std::mt19937_64 bytes_of(20261203);
  int with = 0;
  for (int input = 0; input < 300; ++input) {
    std::vector<uint8_t> data(64 + bytes_of() % 960);
    for (uint8_t& byte : data) byte = static_cast<uint8_t>(bytes_of());
    const Case c = decode_case(data.data(), data.size(), options);
    EXPECT_NO_THROW(validate(c)) << "input " << input;
    const json once = to_json(c);
    EXPECT_EQ(to_json(case_from_json(once)), once) << "input " << input;
    if (any_op(c.root, [](const Op& op) { return std::holds_alternative<Discard>(op); })) ++with;
    EXPECT_FALSE(any_op(decode_case(data.data(), data.size()).root, [](const Op& op) {
      const auto* checkpoint = std::get_if<Checkpoint>(&op);
      return std::holds_alternative<Discard>(op) || (checkpoint != nullptr && checkpoint->without_output);
    }));
  }
  EXPECT_GT(with, 30);
}

}  // namespace
}  // namespace recheck
