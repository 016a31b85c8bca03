// tools/gate-pr's ways out, each with its summary: both stages failing, one failing, recheck
// dying without a report, code it cannot run, an interrupt, a refusal. recheck is stood in for by
// tests/data/fake-recheck, which does what FAKE_SLICE and FAKE_BUDGET say, so that every path is
// taken on purpose and quickly (the real gate on real code: gate_pr_test.cpp, label python).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "tests/paths.h"
#include "tests/shell.h"

namespace recheck {
namespace {

const std::string& work_dir() {
  // Never destroyed: the exit handler below reads it after static objects are gone.
  static const std::string* dir = [] {
    // One folder per test process: CTest runs these tests side by side, and each removes its own.
    std::string pattern = ::testing::TempDir() + "/gate-pr-exits-XXXXXX";
    EXPECT_NE(mkdtemp(pattern.data()), nullptr) << pattern;
    const std::string d = pattern;
    const std::string tree = "/megatron/core/tensor_parallel";
    EXPECT_EQ(system(("mkdir -p " + d + "/base" + tree + " " + d + "/head" + tree).c_str()), 0);
    // One checkpoint function, the same in both: the stand-in's stages are all that runs.
    for (const char* side : {"/base", "/head"}) std::ofstream(d + side + tree + "/random.py") << "class CheckpointFunction:\n    pass\n";
    std::atexit([] { (void)system(("rm -rf " + work_dir()).c_str()); });
    return new std::string(d);
  }();
  return *dir;
}

std::string gate_line(const std::string& slice, const std::string& budget, const std::string& out) {
  return "cd " + work_dir() + " && exec env FAKE_SLICE=" + slice + " FAKE_BUDGET=" + budget + " " + test_paths::source_dir() +
         "/tools/gate-pr --base base --head head --recheck " + test_paths::source_dir() + "/tests/data/fake-recheck --out " +
         out;
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The verdict leads and closes the summary; the finding that decides it comes right after it,
// with its minimized case and replay line.
TEST(GatePrExits, both_stages_failing_print_the_verdict_the_deciding_finding_and_every_stage) {
  const auto run = test_shell::run_shell(gate_line("alarm", "alarm", "both"));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_EQ(run.output.rfind("tools/gate-pr: FAIL: the head regresses", 0), 0u) << run.output;
  EXPECT_EQ(count_of(run.output, "tools/gate-pr: FAIL: the head regresses"), 2u) << run.output;
  const size_t decides = run.output.find("the finding that decides it:\n  regression grads-match-eager in case 7 of the CheckpointFunction.slice");
  EXPECT_NE(decides, std::string::npos) << run.output;
  EXPECT_NE(run.output.find("minimized: slice-bucket-1.min.json (4 ops)\n    replay: PYTHONPATH=x recheck repro"), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("tools/gate-pr: CheckpointFunction.slice: exit 1: seed 42, 10 cases"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("tools/gate-pr: CheckpointFunction.budget: exit 1: seed 42, 10 cases"), std::string::npos) << run.output;
  // Pre-existing findings counted by known cause, not listed bucket by bucket.
  EXPECT_NE(run.output.find("by known cause (docs/known-causes.md): non-tensor-argument 5"), std::string::npos) << run.output;
}

TEST(GatePrExits, one_stage_failing_fails_the_gate_and_names_that_stage) {
  const auto run = test_shell::run_shell(gate_line("pass", "alarm", "budget-only"));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("the finding that decides it:\n  regression grads-match-eager in case 7 of the CheckpointFunction.budget"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("tools/gate-pr: CheckpointFunction.slice: exit 0"), std::string::npos) << run.output;
}

TEST(GatePrExits, a_stage_that_dies_without_a_report_is_an_error_not_a_verdict) {
  const auto run = test_shell::run_shell(gate_line("pass", "silent", "silent"));
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_EQ(run.output.rfind("tools/gate-pr: ERROR: the gate could not run the code", 0), 0u) << run.output;
  EXPECT_NE(run.output.find("CheckpointFunction.budget: exit 1: no report written"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("(it printed nothing on its error output)"), std::string::npos) << run.output;
}

TEST(GatePrExits, code_recheck_cannot_run_is_named_and_the_budget_is_not_run) {
  const auto run = test_shell::run_shell(gate_line("error", "alarm", "error"));
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("  recheck run: importing head/random.py raised SyntaxError"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("budget:"), std::string::npos) << run.output;
}

TEST(GatePrExits, a_pass_says_so_first_and_last) {
  const auto run = test_shell::run_shell(gate_line("pass", "pass", "pass"));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(count_of(run.output, "tools/gate-pr: PASS: the head is no worse than the base\n"), 2u) << run.output;
}

// Interrupted (a CI job cancelled: SIGTERM; Ctrl-C: SIGINT) in the budget: the stage ends with its
// report, the summary lists what ran, and the exit says interrupted, unless an alarm was already
// found, which fails the gate as it would have anyway.
TEST(GatePrExits, an_interrupt_ends_the_stage_and_still_prints_the_summary) {
  for (const auto& [slice, signal_number, expected] :
       {std::tuple<std::string, int, int>{"pass", SIGTERM, 143}, {"pass", SIGINT, 130}, {"alarm", SIGTERM, 1}}) {
    const std::string out = work_dir() + "/interrupted-" + slice + std::to_string(signal_number);
    const std::string log = out + ".log";
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      signal(SIGINT, SIG_DFL);  // a test runner may have it ignored: the gate must be able to trap it
      // The shell becomes the gate (exec), which gets the signal alone, as from a CI runner.
      execl("/bin/sh", "sh", "-c", (gate_line(slice, "hang", out) + " > " + log + " 2>&1").c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    // The budget started: its fake waits for the signal.
    for (int i = 0; i < 200 && !std::ifstream(out + "/CheckpointFunction.budget.log").good(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(pid, signal_number);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    std::ifstream in(log);
    const std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_TRUE(WIFEXITED(status)) << output;
    EXPECT_EQ(WEXITSTATUS(status), expected) << slice << " " << signal_number << "\n" << output;
    EXPECT_NE(output.find("tools/gate-pr: CheckpointFunction.budget: exit " + std::to_string(expected == 1 ? 143 : expected) +
                          ": seed 42, 10 cases in 2 s, interrupted"),
              std::string::npos)
        << output;
    EXPECT_NE(output.find(expected == 1 ? "tools/gate-pr: FAIL:" : "tools/gate-pr: INTERRUPTED: no verdict"),
              std::string::npos)
        << output;
  }
}

// A change none of whose lines that can run ran in any case is not reached (exit 3), never a
// pass; the lines no case ran are listed, in the summary, gate.json and gate.xml. A comment-only
// change has no such line and passes.
TEST(GatePrExits, a_change_no_case_ran_is_not_reached_and_its_lines_are_listed) {
  const std::string dir = work_dir() + "/change";
  const std::string tree = "/megatron/core/tensor_parallel";
  ASSERT_EQ(system(("mkdir -p " + dir + "/base" + tree + " " + dir + "/head" + tree + " " + dir + "/comment" + tree).c_str()), 0);
  std::ofstream(dir + "/base" + tree + "/random.py") << "import os\n\ndef checkpoint(x):\n    return x\n";
  std::ofstream(dir + "/head" + tree + "/random.py") << "import os\n\ndef checkpoint(x):\n    y = x + 1\n    return y\n";
  std::ofstream(dir + "/comment" + tree + "/random.py") << "import os\n\ndef checkpoint(x):\n    # x as it came\n    return x\n";
  auto gate = [&](const std::string& head, const std::string& ran, const std::string& out) {
    return test_shell::run_shell("cd " + dir + " && FAKE_RAN=" + ran + " " + test_paths::source_dir() +
                                 "/tools/gate-pr --base base --head " + head + " --recheck " + test_paths::source_dir() +
                                 "/tests/data/fake-recheck --out " + out);
  };
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const auto unreached = gate("head", "", "unreached");
  EXPECT_EQ(unreached.exit_code, 3) << unreached.output;
  EXPECT_EQ(unreached.output.rfind("tools/gate-pr: NOT REACHED: no case ran a line the change can run", 0), 0u)
      << unreached.output;
  EXPECT_NE(unreached.output.find("the change: 2 changed lines of random.py run in functions; 0 of them ran in some case; "
                                  "no case ran random.py:4-5"),
            std::string::npos)
      << unreached.output;
  EXPECT_NE(read(dir + "/unreached/gate.json").find("\"not_run\": [\n      4,\n      5\n    ]"), std::string::npos)
      << read(dir + "/unreached/gate.json");
  EXPECT_NE(read(dir + "/unreached/gate.xml").find("name=\"changed lines run\"><failure"), std::string::npos)
      << read(dir + "/unreached/gate.xml");

  const auto partly = gate("head", "4", "partly");
  EXPECT_EQ(partly.exit_code, 0) << partly.output;
  EXPECT_NE(partly.output.find("1 of them ran in some case; no case ran random.py:5"), std::string::npos) << partly.output;

  const auto comment = gate("comment", "", "comment");
  EXPECT_EQ(comment.exit_code, 0) << comment.output;
  EXPECT_NE(comment.output.find("none of them in a function"), std::string::npos) << comment.output;
}

// Every checkpoint function both trees hold runs its slice, each through its subject; one only a
// tree holds is named; the budget goes to the functions whose slice ran a line of the change.
TEST(GatePrExits, every_function_both_trees_hold_runs_and_one_a_tree_lacks_is_named) {
  const std::string dir = work_dir() + "/functions";
  const std::string tree = "/megatron/core/tensor_parallel";
  ASSERT_EQ(system(("mkdir -p " + dir + "/base" + tree + " " + dir + "/head" + tree).c_str()), 0);
  const std::string common =
      "class CheckpointFunction:\n    pass\n\nclass CheckpointWithoutOutput:\n    def f(self):\n        return 1\n";
  std::ofstream(dir + "/base" + tree + "/random.py") << common << "\ndef checkpoint(f):\n    return f\n";
  std::ofstream(dir + "/head" + tree + "/random.py")
      << "class CheckpointFunction:\n    pass\n\nclass CheckpointWithoutOutput:\n    def f(self):\n        return 2\n"
      << "\nclass MHCCheckpointManager:\n    pass\n";
  // The stand-in records the changed line 6 for the CheckpointWithoutOutput runs alone.
  const auto gate = test_shell::run_shell("cd " + dir + " && FAKE_RAN=6 FAKE_RAN_FOR=CheckpointWithoutOutput " +
                                          test_paths::source_dir() + "/tools/gate-pr --base base --head head --seconds 30 --recheck " +
                                          test_paths::source_dir() + "/tests/data/fake-recheck --out out");
  EXPECT_EQ(gate.exit_code, 0) << gate.output;
  EXPECT_NE(gate.output.find("function CheckpointFunction (the autograd Function): slice 10 cases\n"), std::string::npos)
      << gate.output;
  EXPECT_NE(gate.output.find("function CheckpointWithoutOutput (a checkpoint whose outputs the caller discards, each discard "
                             "its own; subject megatron-checkpoint-without-output): slice 10 cases, budget 10 cases\n"),
            std::string::npos)
      << gate.output;
  EXPECT_NE(gate.output.find("function checkpoint (the checkpoint() wrapper around it): not run: the head removes it"),
            std::string::npos)
      << gate.output;
  EXPECT_NE(gate.output.find("function MHCCheckpointManager (CheckpointWithoutOutput, the discards of a layer made by the MHC "
                             "manager; subject megatron-checkpoint-without-output): not run: only the head holds it"),
            std::string::npos)
      << gate.output;
  // The whole budget went to the function that reached the change, through its subject.
  std::ifstream args(dir + "/out/CheckpointWithoutOutput.budget.log");
  const std::string budget((std::istreambuf_iterator<char>(args)), std::istreambuf_iterator<char>());
  EXPECT_NE(budget.find("args: run --oracle python:"), std::string::npos) << budget;
  EXPECT_NE(budget.find("random.py:CheckpointWithoutOutput --subject megatron-checkpoint-without-output --claims none"),
            std::string::npos)
      << budget;
  EXPECT_NE(budget.find("--seconds 30"), std::string::npos) << budget;
  EXPECT_FALSE(std::ifstream(dir + "/out/CheckpointFunction.budget.json").good());

  const auto chosen = test_shell::run_shell("cd " + dir + " && " + test_paths::source_dir() +
                                            "/tools/gate-pr --base base --head head --functions CheckpointFunction,checkpoint "
                                            "--recheck " + test_paths::source_dir() + "/tests/data/fake-recheck --out chosen");
  EXPECT_EQ(chosen.exit_code, 2) << chosen.output;
  EXPECT_NE(chosen.output.find("--functions: 'checkpoint' is not a checkpoint function both trees hold (they hold: "
                               "CheckpointFunction,CheckpointWithoutOutput)"),
            std::string::npos)
      << chosen.output;
}

TEST(GatePrExits, a_refusal_is_one_line_with_exit_2) {
  const auto run = test_shell::run_shell(gate_line("pass", "pass", "refused") + " --minimize-seconds soon");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_EQ(std::count(run.output.begin(), run.output.end(), '\n'), 1) << run.output;
  EXPECT_NE(run.output.find("--minimize-seconds: expected a whole number"), std::string::npos) << run.output;
}

// tools/gate-real-history on a history of two commits (a clone made here), the gate's stages stood
// in for: a commit listed as having brought a bug is CAUGHT when the gate fails it with alarms of
// the properties the bug fails only (a crash the base has alone too is no alarm), MISSED when the
// gate passes it, and a FALSE ALARM when another property raised one; a correct commit the gate
// fails is a false alarm. Only false alarms (and errors) fail the tool.
TEST(GateRealHistory, a_commit_that_brought_a_bug_is_caught_missed_or_a_false_alarm_by_what_raised) {
  const std::string dir = work_dir() + "/real-history";
  const std::string file = dir + "/clone/megatron/core/tensor_parallel/random.py";
  const std::string git = "git -C " + dir + "/clone -c user.name=t -c user.email=t@t ";
  ASSERT_EQ(system(("mkdir -p " + dir + "/clone/megatron/core/tensor_parallel && " + git + "init -q && printf "
                    "'class CheckpointFunction:\\n    pass\\n' > " + file + " && " + git + "add -A && " + git +
                    "commit -qm base && printf 'class CheckpointFunction:\\n    x = 1\\n' > " + file + " && " + git +
                    "commit -qam head").c_str()),
            0);
  const std::string head = test_shell::run_shell(git + "rev-parse --short=10 HEAD").output.substr(0, 10);
  const auto history = [&](const std::string& kind, const std::string& brings, const std::string& budget) {
    std::ofstream(dir + "/commits.json")
        << "{\"commits\": [{\"commit\": \"" << head << "\", \"kind\": \"" << kind << "\", \"touches\": \"t\", "
        << "\"title\": \"t\"" << (kind == "brings-a-bug" ? ", \"brings\": [\"" + brings + "\"], \"shown_by\": \"a script\"" : "")
        << "}]}\n";
    return test_shell::run_shell("cd " + dir + " && FAKE_RAN=2 FAKE_BUDGET=" + budget + " " + test_paths::source_dir() +
                                 "/tools/gate-real-history --mirror clone --commits commits.json --recheck " +
                                 test_paths::source_dir() + "/tests/data/fake-recheck");
  };
  const auto caught = history("brings-a-bug", "grads-match-eager", "alarm");
  EXPECT_EQ(caught.exit_code, 0) << caught.output;
  EXPECT_NE(caught.output.find("  CAUGHT\n"), std::string::npos) << caught.output;
  EXPECT_NE(caught.output.find("1 bugs brought caught, 0 missed, 0 false alarms"), std::string::npos) << caught.output;
  const auto missed = history("brings-a-bug", "grads-match-eager", "pass");
  EXPECT_EQ(missed.exit_code, 0) << missed.output;
  EXPECT_NE(missed.output.find("  MISSED\n            no case reached the bug it brought (grads-match-eager: a script)"),
            std::string::npos)
      << missed.output;
  const auto other = history("brings-a-bug", "recompute-fidelity", "alarm");
  EXPECT_EQ(other.exit_code, 1) << other.output;
  EXPECT_NE(other.output.find("  FALSE ALARM\n"), std::string::npos) << other.output;
  EXPECT_NE(other.output.find("grads-match-eager regression: 1"), std::string::npos) << other.output;
  EXPECT_EQ(other.output.find("runs-to-completion"), std::string::npos) << other.output;
  const auto correct = history("fix", "", "alarm");
  EXPECT_EQ(correct.exit_code, 1) << correct.output;
  EXPECT_NE(correct.output.find("1 false alarms (" + head + ")"), std::string::npos) << correct.output;
  // The gate's folder is this tool's to remove, and it says so rather than naming a folder gone.
  EXPECT_NE(correct.output.find("FAIL: the head regresses (its reports and cases are removed: --keep DIR keeps them)"),
            std::string::npos)
      << correct.output;
  EXPECT_EQ(correct.output.find("reports and cases under"), std::string::npos) << correct.output;
  const auto listed = history("brings-a-bug", "", "pass");
  EXPECT_EQ(listed.exit_code, 2) << listed.output;
  EXPECT_NE(listed.output.find("commits[0].brings: expected a non-empty list of property names"), std::string::npos)
      << listed.output;
}

}  // namespace
}  // namespace recheck
