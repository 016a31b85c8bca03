// The Python bridge (python/bridge.cpp), built with -DRECHECK_PYTHON=ON: megatron-core's
// CheckpointFunction, recheck's wrapper of the PR's change around it, and PyTorch's reentrant
// checkpoint, each run as a variant against the C++ oracle. The test skips a variant whose Python
// package is not installed (torch itself always is: the build embeds it).
#include <gtest/gtest.h>

#include <set>

#include "core/case.h"
#include "core/interpreter.h"
#include "properties/generator.h"
#include "properties/report.h"
#include "python/bridge.h"
#include "suts/checkpoint.h"

namespace recheck {
namespace {

std::unique_ptr<CheckpointImplementation> python_variant(const std::string& name) {
  python::register_bridge();
  try {
    return make_checkpoint(name);
  } catch (const std::invalid_argument& error) {
    if (std::string(error.what()).find("No module named 'megatron'") != std::string::npos) return nullptr;
    throw;
  }
}

#define SKIP_WITHOUT(variant)                                                         \
  if (!(variant)) GTEST_SKIP() << "megatron-core is not installed for the embedded Python"

// Over generated cases, `sut` shows no regression and no divergence against the C++ oracle.
void expect_no_alarm(CheckpointImplementation& sut, int cases, uint64_t first_seed, std::set<std::string>* features) {
  auto oracle = make_checkpoint("nonclearing");
  const GenOptions options = options_for(GenOptions{}, sut);
  for (int i = 0; i < cases; ++i) {
    const Case c = draw_case(options, first_seed + static_cast<uint64_t>(i));
    if (features) {
      for (const std::string& f : case_features(c)) features->insert(f);
    }
    const CaseResult result = check_case(c, *oracle, sut);
    ASSERT_FALSE(result.has_alarm()) << sut.name() << " on draw seed " << first_seed + i << ":\n"
                                     << describe_results(result.results) << show(c);
  }
}

TEST(Python, megatron_core_checkpoint_function_agrees_with_the_port) {
  auto sut = python_variant("megatron-py");
  SKIP_WITHOUT(sut);
  std::set<std::string> features;
  expect_no_alarm(*sut, 60, 1, &features);
  // The cases reached the tracker, nesting and non-tensor arguments through Python.
  EXPECT_TRUE(features.count("tracker draw inside a checkpoint")) << "no tracker draw in 60 cases";
}

TEST(Python, torch_utils_checkpoint_gets_cases_it_can_run) {
  auto sut = python_variant("torch-py");
  ASSERT_TRUE(sut);
  const RngSources sources = sut->rng_sources(/*on_cuda=*/false);
  EXPECT_TRUE(sources.cpu);
  EXPECT_FALSE(sources.device) << "on CPU PyTorch stashes no state for the stand-in device generator";
  EXPECT_FALSE(sources.tracker);
  expect_no_alarm(*sut, 60, 1, nullptr);
}

// The wrapper is the PR's change: on a case whose body keeps its input (a module caching it),
// the released function leaves a .grad on the detached input and the wrapper does not.
TEST(Python, the_pr_wrapper_clears_what_the_released_function_keeps) {
  auto released = python_variant("megatron-py");
  SKIP_WITHOUT(released);
  auto clearing = python_variant("megatron-py-clearing");
  auto oracle = make_checkpoint("nonclearing");
  const Case c = load_case_file(std::string(RECHECK_SOURCE_DIR) + "/corpus/regressions/memory-floor-stashed-no-grad-view.json");
  auto result = [&](CheckpointImplementation& sut, const std::string& property) {
    for (const PropertyResult& r : check_case(c, *oracle, sut).results) {
      if (r.property == property) return r;
    }
    ADD_FAILURE() << property << " not checked for " << sut.name();
    return PropertyResult{};
  };
  const PropertyResult with_change = result(*clearing, "grad-released");
  EXPECT_TRUE(with_change.sut.holds) << with_change.sut.describe();
  EXPECT_EQ(with_change.classification, Classification::pass);
  // Released code is held to what the oracle does: it keeps the .grad as the oracle does.
  const PropertyResult released_result = result(*released, "grad-released");
  EXPECT_FALSE(released_result.sut.holds);
  EXPECT_EQ(released_result.classification, Classification::pre_existing);
}

// An error raised in a recomputation crosses Megatron's Python backward and the engine with its
// Python type and message: errors-match compares them with eager mode's.
TEST(Python, errors_cross_python_with_their_type_and_message) {
  auto sut = python_variant("megatron-py");
  SKIP_WITHOUT(sut);
  const Case c =
      load_case_file(std::string(RECHECK_SOURCE_DIR) + "/corpus/regressions/restore-not-exception-safe.json");
  const Observations run = run_case(c, *sut);
  ASSERT_TRUE(run.error) << "the recomputation did not raise";
  EXPECT_EQ(run.error->phase, "backward");
  EXPECT_EQ(run.error->error.type, "RuntimeError");
  EXPECT_NE(run.error->error.message.find("mat1 and mat2 shapes cannot be multiplied"), std::string::npos)
      << run.error->error.message;
}

TEST(Python, a_missing_module_is_refused_by_name) {
  python::register_bridge();
  try {
    make_checkpoint("python:no_such_module_here:CheckpointFunction");
    FAIL() << "no error";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("no_such_module_here"), std::string::npos) << error.what();
  }
  EXPECT_THROW(make_checkpoint("python:torch.utils.checkpoint"), std::invalid_argument);
}

}  // namespace
}  // namespace recheck
