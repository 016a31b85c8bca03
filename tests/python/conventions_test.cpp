// Calling conventions given with a spec (python/conventions.py): a checkpoint function vendored
// into someone's code base, called as that code calls it, with no adapter written.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "tests/paths.h"
#include "tests/shell.h"

namespace recheck {
namespace {

const std::string kVendored = std::string(test_paths::source_dir()) + "/tests/data/vendored_checkpoint.py";

test_shell::Result run_with(const std::string& spec, const std::string& out) {
  return test_shell::run_shell(std::string(test_paths::recheck_binary()) + " run --seed 1 --cases 200 --quiet " +
                               "--minimize-seconds 0 --sut " + spec + " --out " + ::testing::TempDir() + "/" + out);
}

// tests/data/vendored_checkpoint.py's checkpoint(func, inputs, params, flag) saves no RNG state:
// called as its convention says, recheck runs it and finds that its recomputation draws other
// numbers than its forward and leaves the RNG elsewhere than eager mode, and every replay line
// carries the convention (shell words, unquoted). No subject declares it: it is judged against
// eager mode alone, with the properties that compare with eager mode (not Megatron's flag), and
// its findings are findings (not regressions against Megatron's port) that fail the run.
TEST(Conventions, a_vendored_function_runs_as_its_convention_says_and_its_finding_replays) {
  const std::string spec = "python:" + kVendored + ":checkpoint@fn,tuple,empty,true";
  const test_shell::Result run = run_with(spec, "vendored-findings");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("finding: recompute-fidelity in case"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("finding: rng-restored in case"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("regression: "), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("flag-in-body"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("memory-eager-floor"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("against eager mode (no subject declares it"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("--sut " + spec + " --oracle " + spec), std::string::npos) << run.output;
  // flag=False: the function runs its body without checkpointing it: nothing is recomputed, and
  // the RNG is where eager mode leaves it.
  const test_shell::Result plain = run_with("python:" + kVendored + ":checkpoint@fn,tuple,empty,false", "vendored-plain");
  EXPECT_EQ(plain.output.find(": recompute-fidelity in case"), std::string::npos) << plain.output;
  EXPECT_EQ(plain.output.find(": rng-restored in case"), std::string::npos) << plain.output;
}

// A convention that does not fit the function, or is not one, is refused before any case, in
// one line that says what recheck tried or which word it does not know.
TEST(Conventions, a_convention_that_does_not_fit_is_refused_in_one_line_saying_what_was_tried) {
  const std::pair<std::string, std::string> refusals[] = {
      {"checkpoint@fn,args", "recheck tried checkpoint(fn, *args) on a body of one tensor, and TypeError: "},
      {"checkpoint@fn,bogus", "'bogus' is not a word of a calling convention (known: fn, args,"},
      {"checkpoint@tuple,empty,true", "a calling convention passes fn (the function to run) once"},
      {"checkpoint@fn,args,tuple", "a calling convention passes the arguments once: args, tuple or list"},
      {"checkpoint@fn,tuple,empty,flag=args", "'flag=args': args unpacks, so it cannot be a keyword's value"},
      {"no_such_function@fn,args", "has no attribute no_such_function"},
  };
  for (const auto& [attr, says] : refusals) {
    const test_shell::Result run = run_with("python:" + kVendored + ":" + attr, "refused");
    EXPECT_EQ(run.exit_code, 2) << attr << ": " << run.output;
    EXPECT_EQ(std::count(run.output.begin(), run.output.end(), '\n'), 1) << attr << ": " << run.output;
    EXPECT_NE(run.output.find(says), std::string::npos) << attr << ": " << run.output;
  }
}

// A function whose backward never returns (tests/data/hanging_checkpoint.py, after the probe of
// its convention): each case that reaches it is killed after --case-seconds and reported as a
// hang, with the oracle's hang found alike (here the function is its own oracle), and the run
// ends, failed, instead of waiting for good.
TEST(Conventions, a_function_that_hangs_is_killed_after_its_time_and_the_run_goes_on) {
  const std::string spec = "python:" + std::string(test_paths::source_dir()) + "/tests/data/hanging_checkpoint.py:checkpoint@fn,args";
  const std::string out = ::testing::TempDir() + "/hanging";
  // The run's output, then the crash files it wrote (which say how the case ended).
  const test_shell::Result run = test_shell::run_shell(
      "rm -rf " + out + "; timeout 300 " + std::string(test_paths::recheck_binary()) +
      " run --seed 1 --cases 10 --quiet --minimize-seconds 0 --case-seconds 2 --sut " + spec + " --out " + out +
      "; status=$?; cat " + out + "/*-runs-to-completion-crash.json; exit $status");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("did not finish the case within 2 s (--case-seconds) and was killed"), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("of them with the oracle too (pre-existing)"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("FAIL: 0 findings and "), std::string::npos) << run.output;
  // Its replay line holds the replay to the same time.
  EXPECT_NE(run.output.find(spec + " --case-seconds 2\n"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace recheck
