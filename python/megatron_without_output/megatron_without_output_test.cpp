// The third subject, megatron-checkpoint-without-output (python/megatron_without_output/): Megatron's
// CheckpointWithoutOutput from megatron-core, whose outputs a discard op frees and whose
// recomputation a later tensor's gradient triggers; the case model's checkpoints without output and
// discards, the properties they need, and the clearing change's question for this function.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/case.h"
#include "core/interpreter.h"
#include "oracles/eager.h"
#include "properties/generator.h"
#include "properties/report.h"
#include "python/bridge.h"
#include "suts/subject.h"
#include "tests/paths.h"
#include "tests/shell.h"

namespace recheck {
namespace {

const Subject& subject() {
  python::register_bridge();
  return find_subject("megatron-checkpoint-without-output");
}

// x [4, 3], w [3, 3]: v2 = checkpoint_without_output(x){ body }, v3 = v2 @ w, then the outputs
// discarded with the recomputation on v3's gradient; the case returns v3.
Case discarded_case(Segment body, bool stash_input = false) {
  Case c;
  Leaf x, w;
  x.shape = {4, 3};
  w.shape = {3, 3};
  c.leaves = {x, w};
  if (stash_input) body.ops.insert(body.ops.begin(), Stash{0});
  Checkpoint checkpoint;
  checkpoint.without_output = true;
  checkpoint.args = {Ref{0}};
  checkpoint.body = Box<Segment>(std::move(body));
  c.root.ops.push_back(std::move(checkpoint));
  c.root.ops.push_back(Matmul{2, 1});
  c.root.ops.push_back(Discard{{2}, 3});
  c.root.outputs = {3};
  validate(c);
  return c;
}

Segment tanh_body() {
  Segment body;
  body.ops = {Unary{Unary::Fn::tanh, 0}};
  body.outputs = {1};
  return body;
}

const PropertyResult& result_of(const CaseResult& result, const std::string& property) {
  for (const PropertyResult& r : result.results) {
    if (r.property == property) return r;
  }
  throw std::runtime_error(property + " not reported: " + describe_results(result.results));
}

TEST(MegatronWithoutOutput, the_subject_declares_the_released_function_the_change_and_mutants_made_in_it) {
  const Subject& s = subject();
  EXPECT_EQ(s.oracle, "megatron-without-output");
  EXPECT_EQ(s.change, "megatron-without-output-clearing");
  EXPECT_GE(s.of_kind(VariantKind::mutant).size(), 2u);
  for (const SubjectImplementation* mutant : s.of_kind(VariantKind::mutant)) EXPECT_EQ(mutant->made_from, s.oracle);
  auto released = s.make(s.oracle);
  EXPECT_TRUE(released->runs_without_output());
  EXPECT_EQ(released->code(), s.make(s.change)->code());  // one code: allocations compared
  EXPECT_TRUE(options_for(GenOptions{}, *released).without_output);
}

TEST(MegatronWithoutOutput, a_case_with_a_checkpoint_without_output_is_refused_where_none_runs) {
  auto port = make_checkpoint(default_subject().oracle);
  const Case c = discarded_case(tanh_body());
  try {
    check_case(c, *port, *port);
    FAIL() << "the C++ port ran a checkpoint without output";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("root.ops[0] runs without output"), std::string::npos) << e.what();
  }
}

// The released function frees the output at the discard, the consumer's gradient recomputes it
// once, and the gradients are eager mode's.
TEST(MegatronWithoutOutput, a_discarded_output_is_freed_recomputed_once_and_the_gradients_are_eager_mode_s) {
  auto released = subject().make(subject().oracle);
  const Case c = discarded_case(tanh_body());
  const Observations run = run_case(c, *released);
  ASSERT_FALSE(run.error) << run.error->error.message;
  ASSERT_EQ(run.iterations.at(0).discards.size(), 1u);
  const DiscardRecord& d = run.iterations.at(0).discards.at(0);
  EXPECT_TRUE(d.freed);
  EXPECT_EQ(d.recomputations, 1);
  EXPECT_TRUE(d.touched.empty());
  EagerExecution eager;
  const Observations eager_run = run_case(c, eager);
  EXPECT_FALSE(eager_run.iterations.at(0).discards.at(0).freed);  // eager mode frees nothing

  const CaseResult result = check_case(c, *released, *released, RunOptions{}, EagerRun::always);
  std::set<std::string> reported;
  for (const PropertyResult& r : result.results) {
    EXPECT_EQ(r.classification, Classification::pass) << r.property << ": " << describe_results(result.results);
    reported.insert(r.property);
  }
  EXPECT_EQ(reported, std::set<std::string>(subject().properties.begin(), subject().properties.end()));
}

// A body that returns its argument: the output the function returns is a view of the caller's x,
// and the discard frees x's storage with it. Eager mode has nothing to free.
TEST(MegatronWithoutOutput, discard_own_outputs_tells_a_discard_that_frees_the_caller_s_argument) {
  auto released = subject().make(subject().oracle);
  Segment identity;
  identity.outputs = {0};
  const Case c = discarded_case(std::move(identity));
  const CaseResult result = check_case(c, *released, *released, RunOptions{}, EagerRun::always);
  const PropertyResult& own = result_of(result, "discard-own-outputs");
  EXPECT_FALSE(own.sut.holds);
  EXPECT_EQ(own.classification, Classification::pre_existing);
  EXPECT_NE(own.sut.detail.find("v0: storage 48 -> 0 bytes"), std::string::npos) << own.sut.describe();
}

// The mutant that gives the outputs their storage back without the recomputed bytes: the output
// reads zeros after backward, which discard-recomputed tells (and the gradients, through it).
TEST(MegatronWithoutOutput, discard_recomputed_tells_outputs_given_back_without_their_data) {
  auto released = subject().make(subject().oracle);
  auto mutant = subject().make("megatron-without-output-not-copied-back");
  const CaseResult result = check_case(discarded_case(tanh_body()), *released, *mutant, RunOptions{}, EagerRun::always);
  const PropertyResult& recomputed = result_of(result, "discard-recomputed");
  EXPECT_EQ(recomputed.classification, Classification::regression) << recomputed.sut.describe();
  EXPECT_NE(recomputed.sut.detail.find("differs from forward's"), std::string::npos) << recomputed.sut.describe();
}

// The mutant that offloads the checkpoint's argument at the discard and gives it back before the
// recomputation: the caller's v2 is empty in between, which only discard-own-outputs sees (nothing
// reads v2 then, and the gradients, outputs and state after the iteration are the released
// function's). Held to the change's memory claims the mutant fails no-extra-allocations too (the
// copy it keeps is an allocation): the check leaves the claims out (`--claims none`), and asserts
// the claims see the copy and nothing else.
TEST(MegatronWithoutOutput, discard_own_outputs_alone_kills_a_discard_that_offloads_the_arguments) {
  Case c = discarded_case(tanh_body());
  // v2 = tanh(x) becomes the checkpoint's argument: every value after it moves up by one.
  c.root.ops.insert(c.root.ops.begin(), Unary{Unary::Fn::tanh, 0});
  std::get<Checkpoint>(c.root.ops[1]).args = {Ref{2}};
  c.root.ops[2] = Matmul{3, 1};
  c.root.ops[3] = Discard{{3}, 4};
  c.root.outputs = {4};
  validate(c);
  auto released = subject().make(subject().oracle);
  auto mutant = subject().make("megatron-without-output-inputs-offloaded");
  const CaseResult result = check_case(c, *released, *mutant, RunOptions{}, EagerRun::always, parse_claims("none"));
  for (const PropertyResult& r : result.results) {
    if (r.property == "discard-own-outputs") {
      EXPECT_EQ(r.classification, Classification::regression) << r.sut.describe();
      EXPECT_NE(r.sut.detail.find("v2: storage 48 -> 0 bytes"), std::string::npos) << r.sut.describe();
    } else {
      EXPECT_EQ(r.classification, Classification::pass) << r.property << ": " << r.sut.describe();
    }
  }
  EXPECT_TRUE(result_of(result, "discard-own-outputs").oracle.holds);
  const CaseResult claimed = check_case(c, *released, *mutant, RunOptions{}, EagerRun::always);
  EXPECT_EQ(result_of(claimed, "no-extra-allocations").classification, Classification::regression);
  EXPECT_EQ(result_of(claimed, "grad-released").classification, Classification::pass);
}

// The change's question for this function: a body that keeps its input (a module caching it)
// keeps the detached recomputation input alive, and with it the .grad backward collected from it,
// as in CheckpointFunction; the clearing change applied to this backward lets go of it.
TEST(MegatronWithoutOutput, a_stashed_recomputation_input_keeps_its_grad_unless_the_change_clears_it) {
  auto released = subject().make(subject().oracle);
  auto clearing = subject().make(subject().change);
  const Case c = discarded_case(tanh_body(), /*stash_input=*/true);
  const Observations kept = run_case(c, *released);
  ASSERT_FALSE(kept.error);
  EXPECT_EQ(kept.iterations.at(0).detached_inputs_holding_grad.size(), 1u);
  const Observations cleared = run_case(c, *clearing);
  ASSERT_FALSE(cleared.error);
  EXPECT_TRUE(cleared.iterations.at(0).detached_inputs_holding_grad.empty());
  const CaseResult result = check_case(c, *released, *clearing, RunOptions{}, EagerRun::always);
  EXPECT_FALSE(result.has_alarm()) << describe_results(result.results);
  EXPECT_TRUE(result_of(result, "grad-released").sut.holds);
  EXPECT_FALSE(result_of(result, "grad-released").oracle.holds);
}

// A crash the released function makes on a case is reported and is not a failure of the run;
// the run's table holds the subject's properties.
TEST(MegatronWithoutOutput, recheck_run_holds_the_change_to_the_released_function_without_alarm) {
  const std::string out = ::testing::TempDir() + "/without-output-run";
  const auto run = test_shell::run_shell(std::string(test_paths::recheck_binary()) +
                                         " run --subject megatron-checkpoint-without-output --cases 150 --seed 11 --jobs 2 "
                                         "--quiet --out " + out + " 2>&1");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("discard-own-outputs"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("discard-recomputed"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("OK: no regression, no divergence"), std::string::npos) << run.output;
}

TEST(MegatronWithoutOutput, generated_cases_hold_checkpoints_without_output_and_discards) {
  auto released = subject().make(subject().oracle);
  const GenOptions options = options_for(GenOptions{}, *released);
  std::set<std::string> seen;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    for (const std::string& feature : case_features(draw_case(options, seed))) seen.insert(feature);
  }
  for (const char* feature : {"checkpoint without output", "checkpoint without output, nested", "discard",
                              "discard: several checkpoints under one hook", "discard: hook does not require grad",
                              "discard inside a checkpoint"}) {
    EXPECT_EQ(seen.count(feature), 1u) << feature;
  }
  // Megatron's CheckpointFunction's cases draw none.
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    const Case c = draw_case(GenOptions{}, seed);
    EXPECT_FALSE(any_op(c.root, [](const Op& op) { return std::holds_alternative<Discard>(op); }));
  }
}

// The findings' standalone scripts (docs/scripts/), with torch and megatron-core alone: each
// shows its finding (exit 1).
TEST(MegatronWithoutOutput, the_findings_standalone_scripts_show_them) {
  const std::string python = std::string(test_paths::python_executable()) + " " + test_paths::source_dir() + "/docs/scripts/";
  const std::pair<const char*, const char*> scripts[] = {
      {"without_output_discard_frees_argument.py", "x's storage: 48 bytes before the discard, 0 after"},
      {"without_output_fp8_default.py", "CheckpointWithoutOutput(fp8=False).fp8 = True"},
      {"without_output_hook_on_its_own_output_never_freed.py",
       "hook on a later tensor: the checkpoint object freed; hook on its own output: alive after gc.collect()"},
  };
  for (const auto& [script, shows] : scripts) {
    const auto shown = test_shell::run_shell(python + script + " 2>&1");
    EXPECT_EQ(shown.exit_code, 1) << script << "\n" << shown.output;
    EXPECT_NE(shown.output.find(shows), std::string::npos) << script << "\n" << shown.output;
  }
}

// The smallest case of the change's question, in the corpus, as a standalone script: it fails
// grad-released with megatron-core's function and holds with the clearing change; the script in
// docs/scripts/ is what export-python writes for it today.
TEST(MegatronWithoutOutput, the_kept_grad_s_exported_script_shows_it_with_megatron_core_alone) {
  const std::string corpus = std::string(test_paths::source_dir()) + "/corpus/python/without-output-stashed-input-keeps-its-grad.json";
  const std::string committed = std::string(test_paths::source_dir()) + "/docs/scripts/without_output_stashed_input_keeps_grad.py";
  const std::string script = ::testing::TempDir() + "/kept-grad-" + std::to_string(getpid()) + ".py";
  const auto exported = test_shell::run_shell(std::string(test_paths::recheck_binary()) + " export-python " + corpus +
                                              " --out " + script + " 2>&1");
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_NE(exported.output.find("(grad-released, --checkpoint megatron)"), std::string::npos) << exported.output;
  EXPECT_EQ(test_shell::run_shell("cmp " + script + " " + committed + " 2>&1").exit_code, 0)
      << "docs/scripts/without_output_stashed_input_keeps_grad.py is not what export-python writes: "
         "build-py/recheck export-python " << corpus << " --out " << committed;
  const std::string python = std::string(test_paths::python_executable()) + " " + script;
  const auto kept = test_shell::run_shell(python + " 2>&1");
  EXPECT_EQ(kept.exit_code, 1) << kept.output;
  EXPECT_NE(kept.output.find("grad-released: FAILS: after iteration 0: recomputation inputs still holding .grad: "
                             "root.ops[0] input 0"),
            std::string::npos)
      << kept.output;
  const auto cleared = test_shell::run_shell(python + " --checkpoint megatron-clearing 2>&1");
  EXPECT_EQ(cleared.exit_code, 0) << cleared.output;
  EXPECT_NE(cleared.output.find("checkpoint megatron-clearing, grad-released: holds"), std::string::npos) << cleared.output;
  // The discards' properties in the script: the released function holds them on this case.
  const auto discards = test_shell::run_shell(python + " --property discard-own-outputs,discard-recomputed 2>&1");
  EXPECT_EQ(discards.exit_code, 0) << discards.output;
  // torch has no checkpoint without output: refused in one line.
  const auto torch = test_shell::run_shell(std::string(test_paths::recheck_binary()) + " export-python " + corpus +
                                           " --checkpoint torch 2>&1");
  EXPECT_EQ(torch.exit_code, 2) << torch.output;
  EXPECT_NE(torch.output.find("holds checkpoints without output"), std::string::npos) << torch.output;
}

// megatron-core 0.16.1 has no manager: the managed variant is refused before any case, naming why.
TEST(MegatronWithoutOutput, the_managed_variant_is_refused_where_megatron_has_no_manager) {
  const char* path = std::getenv("PYTHONPATH");
  if (path != nullptr && *path != '\0') GTEST_SKIP() << "PYTHONPATH is set: a tree on it may have a manager";
  try {
    subject().make("megatron-without-output-managed");
    FAIL() << "made the managed variant on megatron-core without a manager";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("has no checkpoint manager (CheckpointWithoutOutputManager or MHCCheckpointManager)"),
              std::string::npos)
        << e.what();
  }
}

// A Megatron older than CheckpointWithoutOutput (here a stand-in tree whose random.py lacks it):
// every variant is refused before any case, in one line naming the file and the first version.
TEST(MegatronWithoutOutput, a_megatron_without_the_function_is_refused_before_any_case) {
  const std::string tree = ::testing::TempDir() + "/old-megatron-" + std::to_string(getpid());
  const std::string package = tree + "/megatron/core/tensor_parallel";
  ASSERT_EQ(test_shell::run_shell("mkdir -p " + package + " && touch " + tree + "/megatron/core/__init__.py " + package +
                                  "/__init__.py && echo 'class CheckpointFunction: pass' > " + package + "/random.py")
                .exit_code,
            0);
  const auto run = test_shell::run_shell("PYTHONPATH=" + tree + " " + test_paths::recheck_binary() +
                                         " run --subject megatron-checkpoint-without-output --cases 1 2>&1");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("/old-megatron-" + std::to_string(getpid()) +
                            "/megatron/core/tensor_parallel/random.py has no CheckpointWithoutOutput (Megatron-LM since 3b141a2471"),
            std::string::npos)
      << run.output;
}

// A Megatron-LM tree with a manager (RECHECK_MEGATRON_MAIN_TREE, RECHECK_MEGATRON_DEV_TREE: the
// folder holding megatron/, git archive of NVIDIA/Megatron-LM's main or dev). The clearing change
// made in the tree's function raises no alarm. The tree's manager and its checkpoints refer to
// each other, so a checkpoint whose recomputation never runs keeps its inputs until Python's cycle
// collector runs: the managed variant keeps more than eager mode and the per-object discards
// (memory-eager-floor, memory-floor, and grad-released where what it keeps is a recomputation
// input), and nothing else differs; the finding's script shows it with the tree alone.
TEST(MegatronWithoutOutput, a_tree_s_manager_keeps_the_checkpoints_it_never_recomputed_until_gc) {
  int trees = 0;
  for (const char* variable : {"RECHECK_MEGATRON_MAIN_TREE", "RECHECK_MEGATRON_DEV_TREE"}) {
    const char* tree = std::getenv(variable);
    if (tree == nullptr || *tree == '\0') continue;
    ++trees;
    const std::string json = ::testing::TempDir() + "/tree-run-" + std::to_string(getpid()) + ".json";
    const std::string run = "PYTHONPATH=" + std::string(tree) + " " + test_paths::recheck_binary() +
                            " run --subject megatron-checkpoint-without-output --cases 150 --seed 11 --jobs 2 --quiet --out " +
                            ::testing::TempDir() + "/tree-run --json " + json + " ";
    const auto change = test_shell::run_shell(run + "2>&1");
    EXPECT_EQ(change.exit_code, 0) << variable << ": " << change.output;
    const auto managed = test_shell::run_shell(run + "--sut megatron-without-output-managed --oracle megatron-without-output 2>&1");
    EXPECT_EQ(managed.exit_code, 1) << variable << ": " << managed.output;
    const nlohmann::json report = nlohmann::json::parse(test_shell::run_shell("cat " + json).output);
    int memory = 0;
    for (const auto& finding : report.at("findings")) {
      const std::string property = finding.at("property").get<std::string>();
      const std::string classification = finding.at("classification").get<std::string>();
      if (classification != "regression" && classification != "divergent") continue;
      EXPECT_TRUE(property == "memory-eager-floor" || property == "memory-floor" || property == "grad-released")
          << variable << ": " << finding.dump();
      memory += property == "memory-eager-floor";
    }
    EXPECT_GT(memory, 0) << variable << ": " << managed.output;
    EXPECT_NE(report.dump().find(std::string(tree) + "/megatron/core/tensor_parallel/random.py"), std::string::npos)
        << "the report does not name the tree's file";
    const auto script = test_shell::run_shell("PYTHONPATH=" + std::string(tree) + " " + test_paths::python_executable() + " " +
                                              test_paths::source_dir() +
                                              "/docs/scripts/without_output_manager_keeps_inputs_until_gc.py 2>&1");
    EXPECT_EQ(script.exit_code, 1) << variable << ": " << script.output;
    EXPECT_NE(script.output.find("x alive once the caller let go; after gc.collect(): freed"), std::string::npos)
        << script.output;
  }
  if (trees == 0) GTEST_SKIP() << "RECHECK_MEGATRON_MAIN_TREE and RECHECK_MEGATRON_DEV_TREE name no Megatron-LM tree";
}

}  // namespace
}  // namespace recheck
