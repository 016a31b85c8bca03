// The CUDA tests (the gpu tier: ci/gpu runs them with -L gpu): each skips, saying so, where this
// build or this machine has no CUDA device.
#include <gtest/gtest.h>

#include <string>

#include "core/torch_compat.h"
#include "properties/generator.h"
#include "properties/report.h"
#include "suts/subject.h"
#include "tests/memory_cases.h"
#include "tests/paths.h"
#include "tests/shell.h"

namespace recheck {
namespace {

TEST(Gpu, memory_floor_on_cuda_is_within_the_allocator_rounding) {
  if (!compat::cuda_available()) GTEST_SKIP() << "no CUDA device in this build or on this machine";
  ResidualStreamOptions model = small_model();
  model.device = "cuda";
  const Case c = residual_stream_case(model);
  auto oracle = make_checkpoint("nonclearing");
  auto clearing = make_checkpoint("clearing");
  const CaseResult result = check_case(c, *oracle, *clearing);
  for (const PropertyResult& r : result.results) {
    EXPECT_FALSE(is_alarm(r.classification)) << r.property << ": " << r.sut.describe();
  }
  EXPECT_EQ(classification_of(result, "memory-floor"), Classification::pass);
}

TEST(Gpu, generated_cases_raise_no_alarm_on_cuda) {
  if (!compat::cuda_available()) GTEST_SKIP() << "no CUDA device in this build or on this machine";
  GenOptions options;
  options.device = "cuda";
  auto oracle = make_checkpoint("nonclearing");
  auto clearing = make_checkpoint("clearing");
  const Hunt h = hunt(*oracle, *clearing, options, 1, 100);
  EXPECT_FALSE(h.killed) << h.property << " " << to_string(h.classification) << " on draw seed " << h.draw_seed;
}

// Workers sharing one GPU (run --jobs 2 --device cuda): each held to its share of the device's
// memory, and the run as clean as with one worker.
TEST(Gpu, jobs_share_one_gpu) {
  if (!compat::cuda_available()) GTEST_SKIP() << "no CUDA device in this build or on this machine";
  const test_shell::Result run = test_shell::run_shell(std::string(test_paths::recheck_binary()) +
                                                       " run --device cuda --jobs 2 --cases 40 --seed 3 --quiet --out " +
                                                       ::testing::TempDir() + "/gpu-jobs 2>&1");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("2 jobs, each worker held to 1/2 of the GPU's memory"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace recheck
