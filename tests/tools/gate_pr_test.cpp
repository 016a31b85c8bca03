// tools/gate-pr, the pull-request gate, run as a user's CI runs it: on a checkout made at test
// time, from different folders, with bad arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/megatron_tree.h"
#include "tests/paths.h"
#include "tests/shell.h"

namespace recheck {
namespace {

// A file's whole text ("" when it cannot be read).
std::string text_of(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The gate on a checkout made at test time, claiming nothing (the default) and claiming the
// clearing change's claims (a .recheck-claims file in the head). Claiming nothing, a refactor
// passes, a change that clears before backward collects (the gradients lost) fails, and so does
// the clearing change itself: what a body stashed loses its .grad, which the base left (a user's
// module caching its input sees it). Claiming them, the clearing change passes and a head that
// does not clear fails grad-released.
TEST(Python, the_pull_request_gate_passes_a_correct_head_and_fails_a_broken_one) {
  const std::string original_path = megatron_random_py();
  if (original_path.empty()) GTEST_SKIP() << "megatron-core is not installed for the embedded Python";
  const std::string package = original_path.substr(0, original_path.find("/megatron/core/")) + "/megatron";
  const std::string repo = ::testing::TempDir() + "/gate-repo";
  const std::string file = repo + "/megatron/core/tensor_parallel/random.py";
  const std::string git = "git -C " + repo + " -c user.email=recheck@test -c user.name=recheck ";
  const std::string collect =
      "        grads = tuple(inp.grad if isinstance(inp, torch.Tensor) else inp for inp in detached_inputs)\n";
  const std::string clear =
      "        for inp in detached_inputs:\n            if isinstance(inp, torch.Tensor):\n                inp.grad = None\n";
  // A head commit: the base's random.py with `before` and `after` around the line that collects
  // the gradients, and a .recheck-claims file when `claims` is not empty.
  auto commit_head = [&](const std::string& before, const std::string& after, const std::string& claims) {
    std::string text = text_of(original_path);
    text.replace(text.find(collect), collect.size(), before + collect + after);
    std::ofstream(file) << text;
    if (!claims.empty()) std::ofstream(repo + "/.recheck-claims") << "# what this change claims\n" << claims << "\n";
    return system((git + "add -A && " + git + "commit -qm head").c_str());
  };
  auto gate = [&](const std::string& out) {
    return test_shell::run_shell(std::string(test_paths::source_dir()) + "/tools/gate-pr --repo " + repo +
                                 " --base HEAD~1 --head HEAD --functions CheckpointFunction --cases 80 --seconds 0 --jobs 2 --recheck " +
                                 test_paths::recheck_binary() + " --out " + out);
  };
  auto junit_of = [](const std::string& out) { return text_of(out + "/CheckpointFunction.slice.xml"); };
  ASSERT_EQ(system(("rm -rf " + repo + " && mkdir -p " + repo + " && cp -r " + package + " " + repo + "/ && " + git +
                    "init -q && " + git + "add -A && " + git + "commit -qm base").c_str()),
            0);
  const std::string reset = git + "reset -q --hard HEAD~1";

  ASSERT_EQ(commit_head("        # every input's gradient, None where there is none\n", "", ""), 0);
  const auto refactor = gate(::testing::TempDir() + "/gate-refactor");
  EXPECT_EQ(refactor.exit_code, 0) << refactor.output;
  EXPECT_NE(refactor.output.find("claims held: none (from the default)"), std::string::npos) << refactor.output;
  EXPECT_NE(junit_of(::testing::TempDir() + "/gate-refactor").find("<skipped message=\"not a claim this run holds"),
            std::string::npos);

  ASSERT_EQ(system(reset.c_str()), 0);
  ASSERT_EQ(commit_head("", clear, ""), 0);
  const std::string unclaimed_out = ::testing::TempDir() + "/gate-unclaimed";
  const auto unclaimed = gate(unclaimed_out);
  EXPECT_EQ(unclaimed.exit_code, 1) << unclaimed.output;
  EXPECT_NE(junit_of(unclaimed_out).find("name=\"stash-grads\">\n    <failure"), std::string::npos)
      << junit_of(unclaimed_out);

  ASSERT_EQ(system(reset.c_str()), 0);
  ASSERT_EQ(commit_head("", clear, "clearing"), 0);
  const auto correct = gate(::testing::TempDir() + "/gate-correct");
  EXPECT_EQ(correct.exit_code, 0) << correct.output;
  EXPECT_NE(correct.output.find("claims held: clearing (from the head's .recheck-claims)"), std::string::npos)
      << correct.output;
  EXPECT_NE(junit_of(::testing::TempDir() + "/gate-correct").find("<skipped message=\"the run holds the claim grad-released"),
            std::string::npos);

  ASSERT_EQ(system(reset.c_str()), 0);
  ASSERT_EQ(commit_head(clear, "", ""), 0);
  const std::string lost_out = ::testing::TempDir() + "/gate-lost";
  const auto lost = gate(lost_out);
  EXPECT_EQ(lost.exit_code, 1) << lost.output;
  EXPECT_NE(junit_of(lost_out).find("name=\"grads-match-eager\">\n    <failure"), std::string::npos) << junit_of(lost_out);
  // The summary names the finding and a replay line that runs as printed, from another folder.
  const size_t replay = lost.output.find("replay: PYTHONPATH=");
  ASSERT_NE(replay, std::string::npos) << lost.output;
  const std::string line = lost.output.substr(replay + 8, lost.output.find('\n', replay) - replay - 8);
  EXPECT_NE(line.find(std::string(test_paths::recheck_binary()) + " repro "), std::string::npos) << line;
  EXPECT_EQ(test_shell::run_shell("cd / && " + line).exit_code, 1) << line;

  ASSERT_EQ(system(reset.c_str()), 0);
  ASSERT_EQ(commit_head("", "        pass\n", "clearing"), 0);
  const std::string broken_out = ::testing::TempDir() + "/gate-broken";
  const auto broken = gate(broken_out);
  EXPECT_EQ(broken.exit_code, 1) << broken.output;
  EXPECT_NE(broken.output.find("claims held: clearing (from the head's .recheck-claims)"), std::string::npos)
      << broken.output;
  EXPECT_NE(junit_of(broken_out).find("name=\"grad-released\">\n    <failure"), std::string::npos) << junit_of(broken_out);
  EXPECT_TRUE(std::ifstream(broken_out + "/CheckpointFunction.slice.json").good());
  // Nothing is left registered in the user's checkout: the revisions were extracted, not checked out.
  const auto worktrees = test_shell::run_shell(git + "worktree list --porcelain | grep -c '^worktree '");
  EXPECT_EQ(worktrees.output, "1\n") << worktrees.output;
}

// The module name a tree's file is loaded under, and so every verdict, does not depend on the
// folder the gate is run from: from a folder where the trees' paths are importable as packages
// (trees.head.megatron...), the reports are the ones run from elsewhere.
TEST(Python, the_gate_gives_the_same_verdicts_from_any_folder) {
  const std::string original_path = megatron_random_py();
  if (original_path.empty()) GTEST_SKIP() << "megatron-core is not installed for the embedded Python";
  const std::string package = original_path.substr(0, original_path.find("/megatron/core/")) + "/megatron";
  const std::string work = ::testing::TempDir() + "/gate-folders";
  ASSERT_EQ(system(("rm -rf " + work + " && mkdir -p " + work + "/trees/base " + work + "/trees/head " + work +
                    "/elsewhere && cp -r " + package + " " + work + "/trees/base/ && cp -r " + package + " " + work +
                    "/trees/head/").c_str()),
            0);
  auto gate_from = [&](const std::string& folder, const std::string& out) {
    return test_shell::run_shell("cd " + folder + " && " + std::string(test_paths::source_dir()) +
                                 "/tools/gate-pr --base trees/base --head trees/head --functions CheckpointFunction --cases 40 --seconds 0 --recheck " +
                                 test_paths::recheck_binary() + " --out " + out);
  };
  auto summary_of = [](const std::string& out) {
    std::ifstream in(out + "/CheckpointFunction.slice.json");
    const nlohmann::json report = nlohmann::json::parse(in);
    return report.at("summary").dump(1) + "\nlogged: " + report.value("logged", nlohmann::json()).dump();
  };
  ASSERT_EQ(system(("ln -s " + work + "/trees " + work + "/elsewhere/trees").c_str()), 0);
  const auto inside = gate_from(work, work + "/out-inside");
  const auto outside = gate_from(work + "/elsewhere", work + "/out-outside");
  EXPECT_EQ(inside.exit_code, 0) << inside.output;
  EXPECT_EQ(outside.exit_code, 0) << outside.output;
  const std::string a = summary_of(work + "/out-inside");
  EXPECT_EQ(a, summary_of(work + "/out-outside"));
  // Allocations compared: both files load as the same code, megatron.core.tensor_parallel.random.
  EXPECT_EQ(a.find("not_checked\": \"allocations"), std::string::npos) << a;
}

// Two copies of the installed megatron package, WORK/A/megatron and WORK/B/megatron (the second's
// random.py to be edited by the test), made afresh; the path of the second's random.py, or "" when
// megatron-core is not installed or the copy failed.
std::string two_trees(const std::string& work, const std::string& a, const std::string& b) {
  const std::string original_path = megatron_random_py();
  if (original_path.empty()) return "";
  const std::string package = original_path.substr(0, original_path.find("/megatron/core/")) + "/megatron";
  if (system(("rm -rf " + work + " && mkdir -p " + work + "/" + a + " " + work + "/" + b + " && cp -r " + package + " " +
              work + "/" + a + "/ && cp -r " + package + " " + work + "/" + b + "/").c_str()) != 0) {
    return "";
  }
  return work + "/" + b + "/megatron/core/tensor_parallel/random.py";
}

// A class of false alarm the gate raised on a fix, kept as a case in tests/data/gate/: replayed
// with the head holding the fix (the base the mistake), nothing is an alarm and `property` is
// classified with its reason `why`; replayed the other way, the case still fails where it can
// tell the mistake (`mistake_shows`; a pair both runs get wrong has no judge either way).
struct FixClass {
  FixClass(std::string file_, std::string property_, std::string why_, bool mistake_shows_ = true,
           std::string function_ = "CheckpointFunction", std::string subject_ = "")
      : file(std::move(file_)), property(std::move(property_)), why(std::move(why_)), mistake_shows(mistake_shows_),
        function(std::move(function_)), subject(std::move(subject_)) {}
  std::string file, property, why;
  bool mistake_shows;
  std::string function;
  std::string subject;  // --subject, where not the function's default
};

// `recheck repro` of the class's case, the sut and the oracle loaded from those random.py files
// (WORK/clean, megatron-core as installed, first on the path), claiming nothing (the gate's way).
test_shell::Result repro_fix_class(const std::string& work, const FixClass& c, const std::string& sut,
                                   const std::string& oracle) {
  return test_shell::run_shell("cd " + work + " && PYTHONPATH=" + work + "/clean " + test_paths::recheck_binary() +
                               " repro " + test_paths::source_dir() + "/tests/data/gate/" + c.file +
                               (c.subject.empty() ? "" : " --subject " + c.subject) + " --sut python:" + sut + ":" +
                               c.function + " --oracle python:" + oracle + ":" + c.function + " --claims none");
}

// Replays each class with WORK/clean (megatron-core as installed) and `mistake_file` (its
// random.py with the mistake).
void expect_no_alarm_on_the_fix(const std::string& work, const std::string& mistake_file,
                                const std::vector<FixClass>& classes) {
  const std::string clean_file = work + "/clean/megatron/core/tensor_parallel/random.py";
  for (const FixClass& c : classes) {
    const auto fix = repro_fix_class(work, c, clean_file, mistake_file);
    EXPECT_EQ(fix.exit_code, 0) << c.file << "\n" << fix.output;
    EXPECT_NE(fix.output.find(c.property + "\n"), std::string::npos) << c.file << "\n" << fix.output;
    EXPECT_NE(fix.output.find(c.why), std::string::npos) << c.file << "\n" << fix.output;
    EXPECT_EQ(fix.output.find(" regression\n"), std::string::npos) << c.file << "\n" << fix.output;
    EXPECT_EQ(fix.output.find(" divergent\n"), std::string::npos) << c.file << "\n" << fix.output;
    if (!c.mistake_shows) continue;
    const auto mistake = repro_fix_class(work, c, mistake_file, clean_file);
    EXPECT_EQ(mistake.exit_code, 1) << c.file << "\n" << mistake.output;
  }
}

// `file` with each `edits` (old text, new text) made once; fails the test when one is missing.
void edit_file(const std::string& file, const std::vector<std::pair<std::string, std::string>>& edits) {
  std::string text = text_of(file);
  for (const auto& [old, replacement] : edits) {
    const size_t at = text.find(old);
    ASSERT_NE(at, std::string::npos) << old;
    text.replace(at, old.size(), replacement);
  }
  std::ofstream(file) << text;
}

// The classes of false alarm the gate's budget raised on Megatron's fix of its tracker
// (965cfd316c, base its parent), replayed on megatron-core 0.16.1 against 0.16.1 with that fix
// undone (tools/gate-history's stale-nested-fork).
TEST(Python, a_head_that_fixes_part_of_what_its_base_gets_wrong_raises_no_alarm) {
  const std::string work = ::testing::TempDir() + "/gate-fix-classes";
  const std::string stale_file = two_trees(work, "clean", "stale");
  if (stale_file.empty()) GTEST_SKIP() << "megatron-core is not installed for the embedded Python";
  ASSERT_NO_FATAL_FAILURE(edit_file(stale_file, {{"self.states_[orig_state_name] = orig_cuda_rng_state", "pass"},
                         {"orig_cuda_rng_state = self.states_[orig_state_name]", "pass"}}));
  expect_no_alarm_on_the_fix(
      work, stale_file,
      {{"error-after-an-rng-fix.json", "errors-match         pre-existing",
        "where the oracle first fails this run holds, and the oracle raised this error at this point too"},
       {"stash-after-an-error-eager-mode-does-not-raise.json", "stash-kept           pre-existing",
        "in the state an error left that both runs raise and eager mode does not", false}});
}

// What the tracker fix 965cfd316c also brought, and the same fix completed. It made a fork
// nested in a fork of the same name draw from the name's live state, and left the checkpoint's
// recomputation on the stale state the checkpoint saved (known cause tracker-name-not-restored,
// which its parent has not): the checkpointed gradients differ from its own eager ones. Replayed
// on megatron-core 0.16.1 (that fix) against 0.16.1 with it undone (its parent's tracker), two
// cases the gate's budget raised on Megatron-LM's history: recompute-fidelity regressions, true
// alarms. The fix completed (the saved RNG states carry the tracker's current state name, set
// again for the recomputation): no alarm against either, and `fixed` against 0.16.1.
TEST(Python, a_tracker_fix_that_leaves_its_recomputation_on_a_stale_state_fails_and_its_completion_passes) {
  const std::string work = ::testing::TempDir() + "/gate-stale-recomputation";
  const std::string stale_file = two_trees(work, "clean", "stale");
  if (stale_file.empty()) GTEST_SKIP() << "megatron-core is not installed for the embedded Python";
  const std::string complete_file = two_trees(work + "/completed", "unused", "complete");
  ASSERT_FALSE(complete_file.empty());
  ASSERT_NO_FATAL_FAILURE(edit_file(stale_file, {{"self.states_[orig_state_name] = orig_cuda_rng_state", "pass"},
                                                 {"orig_cuda_rng_state = self.states_[orig_state_name]", "pass"}}));
  ASSERT_NO_FATAL_FAILURE(edit_file(
      complete_file,
      {{"    return cpu_rng_state, cuda_rng_state, cuda_rng_state_tracker\n",
        "    return cpu_rng_state, cuda_rng_state, cuda_rng_state_tracker, get_cuda_rng_tracker()._current_state_name\n"},
       {"def _set_all_rng_states(cpu_rng_state, cuda_rng_state, cuda_rng_state_tracker):",
        "def _set_all_rng_states(cpu_rng_state, cuda_rng_state, cuda_rng_state_tracker, name=\"default-rng\"):"},
       {"    get_cuda_rng_tracker().set_states(cuda_rng_state_tracker)\n",
        "    get_cuda_rng_tracker().set_states(cuda_rng_state_tracker)\n"
        "    get_cuda_rng_tracker()._current_state_name = name\n"}}));
  const std::string clean_file = work + "/clean/megatron/core/tensor_parallel/random.py";
  for (const FixClass& c : {FixClass("recomputation-after-an-rng-fix.json", "", ""),
                            FixClass("recomputation-left-on-a-stale-tracker-state.json", "", "", true, "checkpoint")}) {
    const auto brought = repro_fix_class(work, c, clean_file, stale_file);
    EXPECT_EQ(brought.exit_code, 1) << c.file << "\n" << brought.output;
    EXPECT_NE(brought.output.find("recompute-fidelity   regression\n"), std::string::npos) << c.file << "\n" << brought.output;
    const auto completed = repro_fix_class(work, c, complete_file, stale_file);
    EXPECT_EQ(completed.exit_code, 0) << c.file << "\n" << completed.output;
    EXPECT_EQ(completed.output.find(" regression\n"), std::string::npos) << c.file << "\n" << completed.output;
    EXPECT_EQ(completed.output.find(" divergent\n"), std::string::npos) << c.file << "\n" << completed.output;
    const auto against_released = repro_fix_class(work, c, complete_file, clean_file);
    EXPECT_EQ(against_released.exit_code, 0) << c.file << "\n" << against_released.output;
    EXPECT_NE(against_released.output.find("recompute-fidelity   fixed\n"), std::string::npos)
        << c.file << "\n" << against_released.output;
  }
}

// The classes of false alarm the gate's default options raised on a fix of where recomputation
// draws its numbers: megatron-core 0.16.1 against 0.16.1 with forward's RNG states set after the
// recomputation instead of before it (tools/gate-history's rng-set-after-recompute), through
// each function whose run raised one.
TEST(Python, a_fix_of_where_recomputation_draws_its_numbers_raises_no_alarm) {
  const std::string work = ::testing::TempDir() + "/gate-recompute-rng-classes";
  const std::string mistake_file = two_trees(work, "clean", "mistake");
  if (mistake_file.empty()) GTEST_SKIP() << "megatron-core is not installed for the embedded Python";
  ASSERT_NO_FATAL_FAILURE(edit_file(mistake_file, {{"_set_all_rng_states(*ctx.rng_states)", "pass"},
                           {"outputs = ctx.run_function(*detached_inputs)",
                            "outputs = ctx.run_function(*detached_inputs)\n            _set_all_rng_states(*ctx.rng_states)"}}));
  const std::string without_output = "megatron-checkpoint-without-output";
  expect_no_alarm_on_the_fix(
      work, mistake_file,
      {{"recomputation-both-runs-get-wrong.json", "recompute-fidelity   pre-existing",
        "ops it recomputes from other values than forward, or drawing other numbers, wherever "
        "this run does and more"},
       {"recomputation-both-runs-get-wrong-without-output.json", "recompute-fidelity   pre-existing",
        "ops it recomputes from other values than forward, or drawing other numbers, wherever "
        "this run does and more", true,
        "CheckpointWithoutOutput", without_output},
       {"gradients-after-an-unfaithful-recomputation.json", "grads-bitwise        fixed",
        "the oracle's recomputation parts from its forward (recompute-fidelity: root.ops[0]", true, "checkpoint"},
       // Rule 12 finds the base's recomputation parting at more ops than the head's too (fixed).
       {"stash-both-recomputations-get-wrong.json", "stash-kept           fixed",
        "in both runs this stash was last written by a recomputation that got other values", false, "checkpoint"},
       {"leak-both-runs-have.json", "memory-eager-floor   pre-existing",
        "both runs keep the same recomputation inputs and checkpoint objects (root.ops[0].body.ops[0] of iteration 0) "
        "alive past this iteration, held alike",
        false,
        "CheckpointWithoutOutput", without_output},
       {"gradients-both-recomputations-get-wrong.json", "grads-match-eager    pre-existing",
        "ops it recomputes from other values than forward, or drawing other numbers, wherever "
        "this run does and more", true, "checkpoint"},
       {"gradients-where-the-oracle-recomputes-more-otherwise.json", "stash-grads          fixed",
        "ops it recomputes from other values than forward, or drawing other numbers, wherever "
        "this run does and more", true,
        "CheckpointWithoutOutput", without_output},
       {"gradients-a-later-iteration-both-recompute-wrong.json", "grads-match-eager    pre-existing",
        "both runs recompute the same ops from other values than their forwards did", true, "CheckpointWithoutOutput",
        without_output}});
}

// The class of false alarm the gate's default options raised on a fix of what the saved RNG
// states share with the tracker: megatron-core 0.16.1 against 0.16.1 saving the tracker's own
// dictionary instead of a copy (tools/gate-history's tracker-states-by-reference). A checkpoint
// without output whose hook is on its own output, which no loss reads, outlives the iteration in
// both runs (its hook keeps it), and the fix's object holds one RNG state more (a copy where the
// mistake's is the tracker's): pre-existing. A head that keeps every such object alive still
// fails where its base lets one go.
TEST(Python, a_fix_of_what_saved_rng_states_share_with_the_tracker_raises_no_alarm) {
  const std::string work = ::testing::TempDir() + "/gate-tracker-states-classes";
  const std::string mistake_file = two_trees(work, "clean", "mistake");
  if (mistake_file.empty()) GTEST_SKIP() << "megatron-core is not installed for the embedded Python";
  const std::string keeps_file = two_trees(work + "/keeps", "unused", "keeps");
  ASSERT_FALSE(keeps_file.empty());
  ASSERT_NO_FATAL_FAILURE(edit_file(mistake_file, {{"cuda_rng_state_tracker = get_cuda_rng_tracker().get_states()",
                                                    "cuda_rng_state_tracker = get_cuda_rng_tracker().states_"}}));
  ASSERT_NO_FATAL_FAILURE(edit_file(keeps_file, {{"        self.rng_states = _get_all_rng_states()\n",
                                                  "        self.rng_states = _get_all_rng_states()\n"
                                                  "        _every_checkpoint.append(self)\n"},
                                                 {"\ndef _get_all_rng_states():",
                                                  "\n_every_checkpoint = []\n\n\ndef _get_all_rng_states():"}}));
  const std::string without_output = "megatron-checkpoint-without-output";
  const std::string why = "both runs keep the same checkpoint objects (root.ops[0] of iteration 0) alive past this iteration";
  const FixClass one{"checkpoint-object-both-runs-leak.json", "memory-eager-floor   pre-existing", why, false,
                     "CheckpointWithoutOutput", without_output};
  const FixClass two{"checkpoint-objects-the-head-leaks-more.json", "memory-eager-floor   pre-existing", why, false,
                     "CheckpointWithoutOutput", without_output};
  expect_no_alarm_on_the_fix(work, mistake_file, {one, two});
  const auto keeps = repro_fix_class(work, two, keeps_file, mistake_file);
  EXPECT_EQ(keeps.exit_code, 1) << keeps.output;
  EXPECT_NE(keeps.output.find("memory-eager-floor   regression"), std::string::npos) << keeps.output;
  EXPECT_NE(keeps.output.find("checkpoint objects alive: root.ops[0] of iteration 0, root.ops[2] of iteration 0"),
            std::string::npos)
      << keeps.output;
}

// A mistake that behaves otherwise on the process's first call only: the clearing change, made
// on every call but the first. In a long-lived worker it clears on all cases but that worker's
// first; each case in a fresh process (the gate's default) sees the first call every time, and
// the gate fails grad-released.
TEST(Python, a_mistake_on_the_first_call_in_a_process_fails_the_gate) {
  const std::string work = ::testing::TempDir() + "/gate-first-call";
  const std::string head_file = two_trees(work, "base", "head");
  if (head_file.empty()) GTEST_SKIP() << "megatron-core is not installed for the embedded Python";
  {
    std::string text = text_of(head_file);
    const std::string collect =
        "        grads = tuple(inp.grad if isinstance(inp, torch.Tensor) else inp for inp in detached_inputs)\n";
    const size_t at = text.find(collect);
    ASSERT_NE(at, std::string::npos);
    text.insert(at + collect.size(),
                "        if getattr(CheckpointFunction, '_called_before', False):\n"
                "            for inp in detached_inputs:\n"
                "                if isinstance(inp, torch.Tensor):\n"
                "                    inp.grad = None\n"
                "        CheckpointFunction._called_before = True\n");
    std::ofstream(head_file) << text;
  }
  const auto gate = test_shell::run_shell("cd " + work + " && " + std::string(test_paths::source_dir()) +
                                          "/tools/gate-pr --base base --head head --claims clearing --functions CheckpointFunction --cases 60 --seconds 0 "
                                          "--jobs 2 --minimize-seconds 5 --recheck " +
                                          test_paths::recheck_binary() + " --out " + work + "/out");
  EXPECT_EQ(gate.exit_code, 1) << gate.output;
  EXPECT_NE(gate.output.find("the finding that decides it:\n  regression grad-released"), std::string::npos) << gate.output;
}

// The gate runs every checkpoint function both trees hold, with its default options: a change
// to CheckpointWithoutOutput's recomputation that drops forward's RNG states fails through
// CheckpointWithoutOutput's own runs (its subject's properties), the summary lists what ran of
// each function; the same recomputation rewritten correctly passes.
TEST(Python, the_gate_runs_every_checkpoint_function_the_trees_hold) {
  const std::string work = ::testing::TempDir() + "/gate-functions";
  const std::string head_file = two_trees(work, "base", "head");
  if (head_file.empty()) GTEST_SKIP() << "megatron-core is not installed for the embedded Python";
  const std::string original = text_of(head_file);
  const size_t recompute = original.find("    def _recompute(self, _):");
  ASSERT_NE(recompute, std::string::npos);
  const std::string restore = "            _set_all_rng_states(*self.rng_states)\n";
  const size_t at = original.find(restore, recompute);
  ASSERT_NE(at, std::string::npos);
  auto gate = [&](const std::string& replacement, const std::string& out) {
    std::string text = original;
    text.replace(at, restore.size(), replacement);
    std::ofstream(head_file) << text;
    return test_shell::run_shell("cd " + work + " && " + std::string(test_paths::source_dir()) +
                                 "/tools/gate-pr --base base --head head --cases 100 --seconds 0 --jobs 2 "
                                 "--minimize-seconds 5 --recheck " + test_paths::recheck_binary() + " --out " + work + "/" + out);
  };
  const auto mistake = gate("            pass  # the recomputation draws from backward's states\n", "mistake");
  EXPECT_EQ(mistake.exit_code, 1) << mistake.output;
  EXPECT_NE(mistake.output.find("of the CheckpointWithoutOutput.slice"), std::string::npos) << mistake.output;
  // (A slice's count is of the cases judged: the released CheckpointWithoutOutput crashes in some
  // drawn cases, with the oracle too, and those are counted as crashes.)
  for (const std::string ran :
       {"function CheckpointFunction (the autograd Function): slice 100 cases\n",
        "function checkpoint (the checkpoint() wrapper around it): slice 100 cases\n",
        "function CheckpointWithoutOutput (a checkpoint whose outputs the caller discards, each discard its own; subject "
        "megatron-checkpoint-without-output): slice ",
        "function CheckpointFunction+cudagraphable-rng (CheckpointFunction with the tracker Megatron makes for CUDA graphs "
        "(use_cudagraphable_rng)): not run unless --functions names it: on CPU its generator states are recheck's "
        "emulation"}) {
    EXPECT_NE(mistake.output.find(ran), std::string::npos) << ran << "\n" << mistake.output;
  }
  // The change's only line is CheckpointWithoutOutput's: the others run it in no case.
  EXPECT_NE(mistake.output.find("tools/gate-pr: CheckpointFunction.slice: exit 0"), std::string::npos) << mistake.output;
  // Each function is judged by its subject's properties: CheckpointWithoutOutput's include the
  // discards' and leave out flag-in-body (it sets no is-checkpointing flag).
  const std::string junit = text_of(work + "/mistake/CheckpointWithoutOutput.slice.xml");
  EXPECT_NE(junit.find("name=\"discard-recomputed\""), std::string::npos) << junit;
  EXPECT_EQ(junit.find("name=\"flag-in-body\""), std::string::npos) << junit;

  const auto rewrite = gate("            states = self.rng_states\n            _set_all_rng_states(*states)\n", "rewrite");
  EXPECT_EQ(rewrite.exit_code, 0) << rewrite.output;
}

// Bad arguments to the gate: one line naming what was wrong, exit 2 (1 means a regression).
TEST(Python, the_gate_refuses_bad_arguments_in_one_line_with_exit_2) {
  const std::string gate = std::string(test_paths::source_dir()) + "/tools/gate-pr";
  for (const std::string& args : {std::string("--base"), std::string("--base a --head b --cases abc"),
                                  std::string("--base a --head b --claims"), std::string("--repo /tmp --base x --head y"),
                                  std::string("--base /nonexistent --head /nonexistent")}) {
    const test_shell::Result run = test_shell::run_shell(gate + " " + args + " --recheck " + test_paths::recheck_binary() +
                                                         " --out " + ::testing::TempDir() + "/gate-bad-args");
    EXPECT_EQ(run.exit_code, 2) << args << "\n" << run.output;
    EXPECT_EQ(std::count(run.output.begin(), run.output.end(), '\n'), 1) << args << "\n" << run.output;
  }
}

}  // namespace
}  // namespace recheck
