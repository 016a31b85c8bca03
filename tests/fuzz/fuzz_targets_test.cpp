// The fuzz targets as a campaign runs them, and the reducer on the cases that kill mutants (the
// workload tier: generated-case hunts and libFuzzer runs).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/case.h"
#include "properties/generator.h"
#include "properties/reduce.h"
#include "properties/report.h"
#include "suts/subject.h"
#include "tests/paths.h"
#include "tests/shell.h"

namespace recheck {
namespace {

using test_shell::Result;
using test_shell::run_shell;

std::string fresh_dir(const std::string& name) { return test_shell::fresh_folder(::testing::TempDir() + "/" + name); }

const std::string kRecheck = test_paths::recheck_binary();
const std::string kSeedCorpus = std::string(test_paths::source_dir()) + "/corpus/fuzz-check";

// A generated case that kills `mutant`, reduced while the same property fails the same way.
struct Reduced {
  Case original;
  Case smallest;
  FailureSignature signature;
};

Reduced reduce_a_kill(const std::string& mutant) {
  const auto oracle = make_checkpoint("nonclearing");
  const auto sut = make_checkpoint(mutant);
  const Hunt h = hunt(*oracle, *sut, GenOptions{}, 1, 200);
  EXPECT_TRUE(h.killed) << mutant;
  Reduced r;
  r.original = draw_case(GenOptions{}, h.draw_seed);
  const auto signature = find_alarm(check_case(r.original, *oracle, *sut));
  EXPECT_TRUE(signature.has_value());
  r.signature = *signature;
  r.smallest = reduce_case(r.original, [&](const Case& c) { return shows(check_case(c, *oracle, *sut), r.signature); });
  return r;
}

class ReduceTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ReduceTest, keeps_the_failure_and_ends_at_ten_ops_or_fewer) {
  const Reduced r = reduce_a_kill(GetParam());
  const auto oracle = make_checkpoint("nonclearing");
  const auto sut = make_checkpoint(GetParam());
  EXPECT_TRUE(shows(check_case(r.smallest, *oracle, *sut), r.signature));
  EXPECT_NO_THROW(validate(r.smallest));
  EXPECT_LE(stats(r.smallest).ops, 10) << show(r.smallest);
  EXPECT_LE(stats(r.smallest).ops, stats(r.original).ops);
  EXPECT_LE(stats(r.smallest).max_depth, stats(r.original).max_depth);
}

INSTANTIATE_TEST_SUITE_P(Mutants, ReduceTest,
                         ::testing::Values("skip-rng-restore", "clear-before-collect", "args-out-of-order",
                                           "distributed-not-restored", "no-clear"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& ch : name) ch = ch == '-' ? '_' : ch;
                           return name;
                         });

// Candidates checked side by side (recheck minimize --jobs N) keep the case that checking them
// one at a time keeps: of each batch the first still failing is taken, the rest dropped.
TEST(Reduce, batches_of_candidates_end_at_the_case_one_at_a_time_ends_at) {
  for (const char* mutant : {"clear-before-collect", "skip-rng-restore", "distributed-not-restored"}) {
    const Reduced r = reduce_a_kill(mutant);
    const auto oracle = make_checkpoint("nonclearing");
    const auto sut = make_checkpoint(mutant);
    for (const int batch : {2, 5}) {
      ReduceStats one_stats;
      ReduceStats batch_stats;
      (void)reduce_case(r.original, [&](const Case& c) { return shows(check_case(c, *oracle, *sut), r.signature); },
                        &one_stats);
      const Case batched = reduce_case_batched(r.original, batch, [&](const std::vector<Case>& candidates) {
        std::vector<bool> fails;
        for (const Case& c : candidates) fails.push_back(shows(check_case(c, *oracle, *sut), r.signature));
        return fails;
      }, &batch_stats);
      EXPECT_EQ(to_json(batched).dump(), to_json(r.smallest).dump()) << mutant << ", batches of " << batch;
      EXPECT_EQ(batch_stats.accepted, one_stats.accepted) << mutant << ", batches of " << batch;
      EXPECT_GE(batch_stats.candidates, one_stats.candidates) << mutant << ", batches of " << batch;
    }
  }
}

TEST(FuzzTargets, check_target_finds_a_mutant_and_minimize_makes_a_replayable_case) {
  const std::string dir = fresh_dir("fuzz-mutant");
  const std::string corpus = dir + "/corpus";
  std::filesystem::create_directories(corpus);
  const Result fuzz = run_shell(std::string(test_paths::fuzz_check()) + " --sut=clear-before-collect -seed=1 -runs=20000 " +
                                "-artifact_prefix=" + dir + "/ " + corpus + " " + kSeedCorpus);
  ASSERT_NE(fuzz.exit_code, 0) << fuzz.output;
  EXPECT_NE(fuzz.output.find("recheck_fuzz_check: clear-before-collect fails"), std::string::npos) << fuzz.output;
  std::string crash;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("crash-", 0) == 0) crash = entry.path().string();
  }
  ASSERT_FALSE(crash.empty()) << fuzz.output;
  const std::string minimized = dir + "/minimized.json";
  const Result min = run_shell(kRecheck + " minimize " + crash + " --sut clear-before-collect --out " + minimized);
  ASSERT_EQ(min.exit_code, 0) << min.output;
  const Case c = load_case_file(minimized);
  EXPECT_LE(stats(c).ops, 10) << show(c);
  ASSERT_FALSE(c.expect.empty());
  EXPECT_EQ(c.expect[0].sut, "clear-before-collect");
  const Result replay = run_shell(kRecheck + " replay " + minimized);
  EXPECT_EQ(replay.exit_code, 0) << replay.output;
  // Three workers checking candidates side by side write the same case.
  const Result jobs = run_shell(kRecheck + " minimize " + crash + " --sut clear-before-collect --jobs 3 --out " + dir +
                                "/minimized-3.json");
  ASSERT_EQ(jobs.exit_code, 0) << jobs.output;
  EXPECT_EQ(to_json(load_case_file(dir + "/minimized-3.json")).dump(), to_json(c).dump());
  // The crash file itself replays as fuzzer bytes.
  const Result repro = run_shell(kRecheck + " repro " + crash + " --sut clear-before-collect");
  EXPECT_EQ(repro.exit_code, 1) << repro.output;
}

TEST(FuzzTargets, check_target_raises_no_alarm_on_the_correct_variant) {
  const std::string dir = fresh_dir("fuzz-clearing");
  const Result fuzz = run_shell(std::string(test_paths::fuzz_check()) + " -seed=2 -runs=1500 " + dir + " " + kSeedCorpus);
  EXPECT_EQ(fuzz.exit_code, 0) << fuzz.output;
  EXPECT_NE(fuzz.output.find("Done 1500 runs"), std::string::npos) << fuzz.output;
}

// Inputs that decode to a case already checked get its verdicts again without a second check.
TEST(FuzzTargets, check_target_checks_each_decoded_case_once) {
  const std::string dir = fresh_dir("fuzz-seen");
  std::filesystem::copy_file(kSeedCorpus + "/seed-000", dir + "/again");
  const Result fuzz = run_shell(std::string(test_paths::fuzz_check()) + " " + kSeedCorpus + "/seed-000 " + kSeedCorpus +
                                "/seed-001 " + dir + "/again");
  EXPECT_EQ(fuzz.exit_code, 0) << fuzz.output;
  EXPECT_NE(fuzz.output.find("recheck_fuzz_check: 3 inputs, 2 distinct cases checked"), std::string::npos)
      << fuzz.output;
}

TEST(FuzzTargets, inputs_target_runs_clean_on_json_and_bytes) {
  const std::string dir = fresh_dir("fuzz-inputs");
  const Result fuzz = run_shell(std::string(test_paths::fuzz_inputs()) + " -seed=3 -runs=20000 -dict=" +
                                std::string(test_paths::source_dir()) + "/fuzz/recheck_fuzz_inputs.dict " + dir + " " +
                                std::string(test_paths::source_dir()) + "/corpus/seeds");
  EXPECT_EQ(fuzz.exit_code, 0) << fuzz.output;
}

TEST(FuzzTargets, unknown_variant_is_refused_at_start) {
  const Result r = run_shell(std::string(test_paths::fuzz_check()) + " --sut=no-such-variant -runs=1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("no-such-variant"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace recheck
