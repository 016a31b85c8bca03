// The Python bridge (python/bridge.cpp), built with -DRECHECK_PYTHON=ON: megatron-core's
// CheckpointFunction, recheck's wrapper of the PR's change around it, and PyTorch's reentrant
// checkpoint, each run as a variant against the C++ oracle. The test skips a variant whose Python
// package is not installed (torch itself always is: the build embeds it).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/case.h"
#include "core/interpreter.h"
#include "properties/generator.h"
#include "properties/report.h"
#include "python/bridge.h"
#include "suts/subject.h"
#include "tests/megatron_tree.h"
#include "tests/paths.h"
#include "tests/shell.h"

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

// Why making the variant `name` is refused; a test failure, and "", when it is accepted.
std::string refusal_of(const std::string& name) {
  python::register_bridge();
  try {
    make_checkpoint(name);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  ADD_FAILURE() << name << " was accepted";
  return "";
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
  // And Megatron's own split and gather, over a process group of one rank.
  EXPECT_TRUE(features.count("distribute_saved_activations")) << "no distributing checkpoint in 60 cases";
}

// Megatron's Python variants distribute saved activations through Megatron's own
// split_tensor_into_1d_equal_chunks and gather_split_1d_tensor, over a gloo group of one rank
// that the bridge starts; PyTorch's checkpoint has no such option; on a GPU they do not (not
// tried there).
TEST(Python, megatron_distributes_through_a_process_group_and_torch_does_not) {
  auto released = python_variant("megatron-py");
  SKIP_WITHOUT(released);
  EXPECT_TRUE(released->distributes(/*on_cuda=*/false));
  EXPECT_FALSE(released->distributes(/*on_cuda=*/true));
  EXPECT_FALSE(python_variant("torch-py")->distributes(/*on_cuda=*/false));
  EXPECT_GT(options_for(GenOptions{}, *released).distribute_one_in, 0);
}

// The collective's worker thread lets go of Megatron's chunk when it starts the next collective,
// a moment after the gather returned, or later on a busy machine: the floor was read before it
// did about once in a thousand cases ("floor 300 bytes, above the oracle's 280"). The bridge
// settles the group (an all-reduce behind the run's collectives) before recheck reads the floor.
// Each check is a fresh chance for the thread to be late.
TEST(Python, a_distributed_chunk_is_released_before_the_floor_is_read) {
  auto released = python_variant("megatron-py");
  SKIP_WITHOUT(released);
  auto oracle = make_checkpoint("nonclearing");
  const Case c = load_case_file(std::string(test_paths::source_dir()) +
                                "/corpus/python/distributed-chunk-released-late-by-the-collective-thread.json");
  for (int i = 0; i < 200; ++i) {
    for (const PropertyResult& r : check_case(c, *oracle, *released).results) {
      if (r.property == "memory-floor") {
        ASSERT_EQ(r.classification, Classification::pass) << i << ": " << r.sut.describe();
      }
    }
  }
}

// What gloo's all-gather allocates (a flat copy of the output on the calling thread and another
// on its worker thread) is the communication library's, not Megatron's: not counted, so that a
// distributing case peaks where recheck's port peaks. Megatron's own buffers stay counted.
TEST(Python, the_collective_s_own_buffers_do_not_count_as_the_checkpoint_s) {
  auto clearing = python_variant("megatron-py-clearing");
  SKIP_WITHOUT(clearing);
  auto oracle = make_checkpoint("nonclearing");
  for (const char* name : {"gloo-all-gather-buffers-are-not-the-checkpoint-s.json", "gloo-all-gather-buffers-at-the-peak.json"}) {
    const Case c = load_case_file(std::string(test_paths::source_dir()) + "/corpus/python/" + name);
    for (const PropertyResult& r : check_case(c, *oracle, *clearing).results) {
      if (r.property == "memory-floor") {
        EXPECT_EQ(r.classification, Classification::pass) << name << ": " << r.sut.describe();
      }
    }
  }
}

// With --world-size 2 each case runs in two processes, one per rank, each keeping its own chunk
// of what a checkpoint distributes: a leaf whose checkpoint's backward never runs keeps Megatron's
// 1-D chunk as its data, 6 of its 12 elements at two ranks, all 12 at one.
TEST(Python, two_ranks_each_keep_their_own_chunk) {
  SKIP_WITHOUT(python_variant("megatron-py"));
  const std::string file = ::testing::TempDir() + "/kept-chunk.json";
  std::ofstream(file) << R"({"device": "cpu", "dtype": "float32", "format": "recheck-case", "iterations": 1,
    "seed": 1, "version": 1, "leaves": [{"fill": "randn", "requires_grad": false, "shape": [2, 6]}],
    "root": {"ops": [{"op": "checkpoint", "distribute": true, "args": [{"ref": 0}],
                      "body": {"ops": [{"fn": "neg", "op": "unary", "x": 0}], "outputs": [1]}}],
             "outputs": [0, 1]}})";
  auto evidence = [&](int world_size) {
    const std::string json = ::testing::TempDir() + "/kept-chunk-" + std::to_string(world_size) + ".json";
    const test_shell::Result run = test_shell::run_shell(
        std::string(test_paths::recheck_binary()) + " repro " + file + " --sut megatron-py-clearing --oracle megatron-py --world-size " +
        std::to_string(world_size) + " --json " + json + " 2>&1");
    std::ifstream in(json);
    const std::string report((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_FALSE(report.empty()) << run.output;
    return report;
  };
  EXPECT_NE(evidence(2).find("output 0: shape: [6] vs [2, 6]"), std::string::npos);
  EXPECT_NE(evidence(1).find("output 0: shape: [12] vs [2, 6]"), std::string::npos);
}

// A run of two ranks: the head's change against the base, both Megatron's Python code.
// recheck's C++ port keeps one rank, and is refused as either variant of such a run.
TEST(Python, a_run_of_two_ranks_holds_the_change_and_refuses_the_cpp_port) {
  SKIP_WITHOUT(python_variant("megatron-py"));
  const std::string json = ::testing::TempDir() + "/two-ranks.json";
  const test_shell::Result run = test_shell::run_shell(
      std::string(test_paths::recheck_binary()) + " run --quiet --sut megatron-py-clearing --oracle megatron-py --world-size 2 " +
      "--seed 20261129 --cases 60 --json " + json + " --out " + ::testing::TempDir() + "/two-ranks-findings 2>&1");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  std::ifstream in(json);
  const std::string report((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(report.find("\"world_size\": 2"), std::string::npos) << report.substr(0, 400);
  const test_shell::Result refused = test_shell::run_shell(
      std::string(test_paths::recheck_binary()) + " run --sut megatron-py-clearing --world-size 2 --cases 5 2>&1");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("--world-size 2: needs Megatron's Python code as both --sut and --oracle"),
            std::string::npos)
      << refused.output;
}

// Megatron's tracker logs a warning at every fork in which a case draws the CPU generator. A run
// counts what Python logs and lists each message once, with its count, at the end.
TEST(Python, what_python_logs_is_counted_and_listed_once_at_the_end) {
  SKIP_WITHOUT(python_variant("megatron-py"));
  const test_shell::Result run = test_shell::run_shell(std::string(test_paths::recheck_binary()) +
                                                       " run --quiet --sut megatron-py --seed 20261129 --cases 120 --out " +
                                                       ::testing::TempDir() + "/logged-findings 2>&1");
  const std::string& output = run.output;
  const std::string message = "CPU RNG state changed within GPU RNG context";
  const size_t first = output.find(message);
  ASSERT_NE(first, std::string::npos) << output;
  EXPECT_EQ(output.find(message, first + 1), std::string::npos) << "shown more than once:\n" << output;
  const size_t summary = output.find("logged by the code under test: ");
  ASSERT_NE(summary, std::string::npos) << output;
  EXPECT_LT(summary, first) << output;
}

TEST(Python, torch_utils_checkpoint_gets_cases_it_can_run) {
  auto sut = python_variant("torch-py");
  ASSERT_TRUE(sut);
  const RngSources sources = sut->rng_sources(/*on_cuda=*/false);
  EXPECT_TRUE(sources.cpu);
  EXPECT_FALSE(sources.device) << "on CPU PyTorch stashes no state for the stand-in device generator";
  EXPECT_FALSE(sources.tracker);
  EXPECT_EQ(sut->change_claims(), ChangeClaims::not_applicable);
  // Its cases draw from the CPU generator only, and PyTorch restores it: rng-restored holds on
  // every one (a device or tracker draw inside a checkpoint would break it).
  auto oracle = make_checkpoint("nonclearing");
  const GenOptions options = options_for(GenOptions{}, *sut);
  std::set<std::string> features;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    const Case c = draw_case(options, seed);
    for (const std::string& f : case_features(c)) features.insert(f);
    for (const PropertyResult& r : check_case(c, *oracle, *sut).results) {
      if (r.property == "rng-restored") {
        EXPECT_TRUE(r.sut.holds) << "draw seed " << seed << ": " << r.sut.describe();
      }
      EXPECT_NE(r.property, "memory-floor") << "the change's claims are not PyTorch's";
    }
  }
  EXPECT_TRUE(features.count("random: cpu"));
  EXPECT_FALSE(features.count("random: device"));
  EXPECT_FALSE(features.count("random: tracker"));
  EXPECT_FALSE(features.count("tracker fork"));
}

// The wrapper is the PR's change: on a case whose body keeps its input (a module caching it),
// the released function leaves a .grad on the detached input and the wrapper does not.
TEST(Python, the_pr_wrapper_clears_what_the_released_function_keeps) {
  auto released = python_variant("megatron-py");
  SKIP_WITHOUT(released);
  auto clearing = python_variant("megatron-py-clearing");
  auto oracle = make_checkpoint("nonclearing");
  const Case c = load_case_file(std::string(test_paths::source_dir()) + "/corpus/regressions/memory-floor-stashed-no-grad-view.json");
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

// Real patches of megatron-core's random.py, made here from the installed file, each declared as
// the change (python-change:FILE:CheckpointFunction, no wrapper): the correct one passes, and
// each mistake fails in one run, by the property its mistake breaks.
TEST(Python, a_real_patch_declared_as_the_change_is_held_to_its_claims) {
  const std::string original_path = megatron_random_py();
  if (original_path.empty()) GTEST_SKIP() << "megatron-core is not installed for the embedded Python";
  std::ifstream in(original_path);
  const std::string original((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string collect =
      "        grads = tuple(inp.grad if isinstance(inp, torch.Tensor) else inp for inp in detached_inputs)\n";
  ASSERT_NE(original.find(collect), std::string::npos) << "megatron-core's backward changed: " << original_path;
  const std::string clear_all =
      "        for inp in detached_inputs:\n            if isinstance(inp, torch.Tensor):\n                inp.grad = None\n";
  const std::string clear_first =
      "        if detached_inputs and isinstance(detached_inputs[0], torch.Tensor):\n"
      "            detached_inputs[0].grad = None\n";
  struct Patch {
    std::string name;
    std::string replacement;          // of the line that collects the gradients
    std::set<std::string> must_fail;  // properties with a regression in the run
  };
  const std::vector<Patch> patches = {
      {"correct", collect + clear_all, {}},
      {"clears-nothing", collect, {"grad-released", "memory-floor"}},
      {"clears-the-first-input-only", collect + clear_first, {"grad-released"}},
      {"clears-before-collecting", clear_all + collect, {"grads-bitwise"}},
  };
  auto oracle = make_checkpoint("nonclearing");
  for (const Patch& patch : patches) {
    std::string text = original;
    text.replace(text.find(collect), collect.size(), patch.replacement);
    // In a package of the same name, as in a Megatron checkout: its relative imports find the
    // installed package's other modules.
    const std::string tree = ::testing::TempDir() + "/patched-" + patch.name;
    std::filesystem::create_directories(tree + "/megatron/core/tensor_parallel");
    for (const char* package : {"/megatron", "/megatron/core", "/megatron/core/tensor_parallel"}) {
      std::ofstream(tree + package + "/__init__.py");
    }
    const std::string path = tree + "/megatron/core/tensor_parallel/random.py";
    std::ofstream(path) << text;
    auto sut = python_variant("python-change:" + path + ":CheckpointFunction");
    ASSERT_TRUE(sut) << patch.name;
    EXPECT_EQ(sut->change_claims(), ChangeClaims::made);
    const GenOptions options = options_for(GenOptions{}, *sut);
    std::set<std::string> regressions;
    int alarms = 0;
    // 120 cases at least (the correct patch must raise nothing in them), and on until each
    // mistake has shown its regression (some need a case that reaches them: up to 600).
    const auto all_shown = [&] {
      return std::all_of(patch.must_fail.begin(), patch.must_fail.end(),
                         [&](const std::string& property) { return regressions.count(property) != 0; });
    };
    for (uint64_t seed = 1; seed <= 120 || (!all_shown() && seed <= 600); ++seed) {
      const CaseResult result = check_case(draw_case(options, seed), *oracle, *sut);
      for (const PropertyResult& r : result.results) {
        if (r.classification == Classification::regression) regressions.insert(r.property);
      }
      alarms += result.has_alarm();
    }
    if (patch.must_fail.empty()) {
      EXPECT_EQ(alarms, 0) << patch.name << ": the correct patch raised alarms";
    }
    for (const std::string& property : patch.must_fail) {
      EXPECT_TRUE(regressions.count(property)) << patch.name << ": no " << property << " regression in 600 cases";
    }
  }
}

// A module whose tracker the bridge cannot use (no fork to enter a state through) is refused when
// the variant is made, before any case, naming what is missing and what is supported;
// `recheck run` exits 2 with that line instead of crashing every case. A tracker that keeps no
// current state name (Megatron before 2026-01) is not refused: it is compared without one.
TEST(Python, a_tracker_the_bridge_cannot_read_is_refused_before_any_case) {
  const std::string path = ::testing::TempDir() + "/old_megatron_random.py";
  std::ofstream(path) << "import torch\n"
                         "class CudaRNGStatesTracker:\n"
                         "    def __init__(self):\n"
                         "        self.states_ = {}\n"
                         "    def add(self, name, seed): pass\n"
                         "_TRACKER = CudaRNGStatesTracker()\n"
                         "def get_cuda_rng_tracker(): return _TRACKER\n"
                         "def model_parallel_cuda_manual_seed(seed): pass\n"
                         "class CheckpointFunction(torch.autograd.Function): pass\n";
  const std::string what = refusal_of("python-change:" + path + ":CheckpointFunction");
  EXPECT_NE(what.find("lacks fork"), std::string::npos) << what;
  EXPECT_NE(what.find("supported: megatron-core 0.2 or later"), std::string::npos) << what;
  const test_shell::Result run = test_shell::run_shell(std::string(test_paths::recheck_binary()) + " run --cases 5 --sut python-change:" +
                                                       path + ":CheckpointFunction --out " + ::testing::TempDir() +
                                                       "/old-findings");
  const std::string& output = run.output;
  EXPECT_EQ(run.exit_code, 2) << output;
  EXPECT_NE(output.find("lacks fork"), std::string::npos) << output;
  EXPECT_EQ(output.find("crash"), std::string::npos) << output;
}

// megatron-core 0.15 and earlier keep no current state name: such a random.py runs, its tracker
// compared without the name. The installed 0.16.1 with the name taken away stands for one.
TEST(Python, a_tracker_without_a_current_state_name_runs_and_is_compared_without_it) {
  const std::string original_path = megatron_random_py();
  if (original_path.empty()) GTEST_SKIP() << "megatron-core is not installed for the embedded Python";
  const std::string package = original_path.substr(0, original_path.find("/megatron/core/")) + "/megatron";
  const std::string tree = ::testing::TempDir() + "/no-current-name";
  ASSERT_EQ(system(("rm -rf " + tree + " && mkdir -p " + tree + " && cp -r " + package + " " + tree + "/").c_str()), 0);
  const std::string file = tree + "/megatron/core/tensor_parallel/random.py";
  // The same tracker under another attribute name: it works, and keeps no _current_state_name.
  ASSERT_EQ(system(("sed -i 's/_current_state_name/_state_name_kept_elsewhere/g' " + file).c_str()), 0);
  const test_shell::Result run = test_shell::run_shell(
      "PYTHONPATH=" + tree + " " + std::string(test_paths::recheck_binary()) + " run --cases 60 --seed 20261129 --sut python:" + file +
      ":CheckpointFunction --oracle megatron-py --claims none --quiet --out " + ::testing::TempDir() + "/no-name-findings");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("tracker current state"), std::string::npos) << run.output;
}

// An error raised in a recomputation crosses Megatron's Python backward and the engine with its
// Python type and message: errors-match compares them with eager mode's.
TEST(Python, errors_cross_python_with_their_type_and_message) {
  auto sut = python_variant("megatron-py");
  SKIP_WITHOUT(sut);
  const Case c =
      load_case_file(std::string(test_paths::source_dir()) + "/corpus/regressions/restore-not-exception-safe.json");
  const Observations run = run_case(c, *sut);
  ASSERT_TRUE(run.error) << "the recomputation did not raise";
  EXPECT_EQ(run.error->phase, "backward");
  EXPECT_EQ(run.error->error.type, "RuntimeError");
  EXPECT_NE(run.error->error.message.find("mat1 and mat2 shapes cannot be multiplied"), std::string::npos)
      << run.error->error.message;
}

// An exported script replays a finding with torch and megatron-core alone: it fails where recheck
// says the property fails, and holds where it holds.
int run_exported(const std::string& case_file, const std::string& options, std::string& output) {
  // Named by process: ctest runs the tests that export side by side, each in a process of its own.
  const std::string dir = ::testing::TempDir() + "/recheck-export-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string script = dir + "/recheck-export-test.py";
  const std::string export_command = std::string(test_paths::recheck_binary()) + " export-python " + case_file + " " + options +
                                     " --out " + script + " 2>&1";
  if (std::system(export_command.c_str()) != 0) {
    output = "export failed: " + export_command;
    return -1;
  }
  const std::string log = dir + "/recheck-export-test.log";
  const int status = std::system((std::string(test_paths::python_executable()) + " " + script + " > " + log + " 2>&1").c_str());
  std::ifstream in(log);
  output.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(Python, an_exported_script_replays_a_finding_without_recheck) {
  const std::string corpus = std::string(test_paths::source_dir()) + "/corpus/";
  std::string output;
  // PyTorch's zero .grad for an unused returned input: recheck calls it pre-existing.
  EXPECT_EQ(run_exported(corpus + "python/torch-reentrant-zero-grad-for-unused-returned-input.json", "", output), 1)
      << output;
  EXPECT_NE(output.find("AssertionError: grads-match-eager"), std::string::npos) << output;
  // The same case holds errors-match under PyTorch's checkpoint, as in recheck.
  EXPECT_EQ(run_exported(corpus + "python/torch-reentrant-zero-grad-for-unused-returned-input.json",
                         "--property errors-match --checkpoint torch", output),
            0)
      << output;
  if (!python_variant("megatron-py")) GTEST_SKIP() << "megatron-core is not installed";
  // Megatron: a body that is not a pure function of its inputs (a raise only in recomputation)
  // fails errors-match in eager's terms, in the script as in recheck; and the tracker draws, the
  // seeds and the leaf data agree with recheck's, or rng-restored and outputs-bitwise would not hold.
  EXPECT_EQ(run_exported(corpus + "regressions/restore-not-exception-safe.json", "--property errors-match", output), 1)
      << output;
  EXPECT_EQ(run_exported(corpus + "seeds/nested-three-deep.json",
                         "--property rng-restored,outputs-bitwise,recompute-fidelity,no-side-effects", output),
            0)
      << output;
}

// Every property's result for `sut` on `c`, checked once against the C++ oracle.
std::map<std::string, PropertyResult> results_by_property(const Case& c, CheckpointImplementation& sut) {
  auto oracle = make_checkpoint("nonclearing");
  std::map<std::string, PropertyResult> by_property;
  for (const PropertyResult& r : check_case(c, *oracle, sut).results) by_property[r.property] = r;
  return by_property;
}

// What an exception leaves behind, on the real code (issue 24): megatron-core's forward leaves
// the is-checkpointing flag set when its body raises, as the port does; PyTorch's checkpoint has
// no such flag. The exported script shows it with torch and megatron-core alone.
TEST(Python, the_flag_megatron_core_leaves_set_after_an_error_is_reported_as_on_the_port) {
  const std::string flag_case = std::string(test_paths::source_dir()) + "/corpus/regressions/flag-left-set-after-an-error-in-forward.json";
  const Case c = load_case_file(flag_case);
  auto torch_py = python_variant("torch-py");
  SKIP_WITHOUT(torch_py);
  EXPECT_EQ(results_by_property(c, *torch_py).at("no-side-effects").classification, Classification::pass);  // no flag
  std::string output;
  EXPECT_EQ(run_exported(flag_case, "--checkpoint torch", output), 0) << output;
  auto released = python_variant("megatron-py");
  if (!released) GTEST_SKIP() << "megatron-core is not installed";
  const PropertyResult r = results_by_property(c, *released).at("no-side-effects");
  EXPECT_EQ(r.classification, Classification::pre_existing) << r.sut.describe();
  EXPECT_EQ(r.sut.describe(), "after iteration 0 (after its error): is-checkpointing flag left set");
  EXPECT_EQ(run_exported(flag_case, "--checkpoint megatron", output), 1) << output;
  EXPECT_NE(output.find("is-checkpointing flag True, eager False"), std::string::npos) << output;
}

// is_checkpointing() inside a body (issue 31): megatron-core's nested checkpoint unsets the flag
// for the rest of the outer body, as the port does; PyTorch's checkpoint keeps no such flag, so
// the property is not checked for it. The exported script shows it with torch and megatron-core
// alone.
TEST(Python, megatron_core_unsets_the_flag_for_the_rest_of_a_body_after_a_nested_checkpoint) {
  const std::string file = std::string(test_paths::source_dir()) + "/corpus/regressions/flag-unset-by-a-nested-checkpoint.json";
  const Case c = load_case_file(file);
  auto torch_py = python_variant("torch-py");
  SKIP_WITHOUT(torch_py);
  EXPECT_EQ(results_by_property(c, *torch_py).count("flag-in-body"), 0u);
  auto released = python_variant("megatron-py");
  if (!released) GTEST_SKIP() << "megatron-core is not installed";
  const PropertyResult r = results_by_property(c, *released).at("flag-in-body");
  EXPECT_EQ(r.classification, Classification::pre_existing) << r.sut.describe();
  EXPECT_EQ(r.sut.describe(),
            "root.ops[0] at iteration 0, forward: is_checkpointing() read False before root.ops[0].body.ops[1]");
  std::string output;
  EXPECT_EQ(run_exported(file, "--checkpoint megatron --property flag-in-body", output), 1) << output;
  EXPECT_NE(output.find("is_checkpointing() read False before root.ops[0].body.ops[1]"), std::string::npos) << output;
}

// What a body stashed, in the exported script as in recheck: the clearing wrapper clears the
// stashed detached input's .grad (stash-grads fails against megatron-core's function) and leaves
// the rest of it as it was (stash-kept holds).
TEST(Python, the_exported_script_compares_what_a_body_stashed_with_megatron_s) {
  const std::string file = std::string(test_paths::source_dir()) + "/corpus/regressions/detached-inputs-freed.json";
  if (!python_variant("megatron-py")) GTEST_SKIP() << "megatron-core is not installed";
  std::string output;
  EXPECT_EQ(run_exported(file, "--checkpoint megatron-clearing --property stash-kept", output), 0) << output;
  EXPECT_EQ(run_exported(file, "--checkpoint megatron-clearing --property stash-grads", output), 1) << output;
  EXPECT_NE(output.find("the stash at root.ops[0].body.ops[0] .grad: defined"), std::string::npos) << output;
  EXPECT_EQ(run_exported(file, "--checkpoint megatron --property stash-kept,stash-grads", output), 0) << output;
}

// Autocast (issue 25): PyTorch's reentrant checkpoint records the autocast state and recomputes
// under it, bitwise eager's; megatron-core's records only the RNG states and recomputes in
// float32, as the port does. The exported script shows both with torch and megatron-core alone.
TEST(Python, autocast_is_recorded_by_torch_s_checkpoint_and_not_by_megatron_s) {
  const std::string file = std::string(test_paths::source_dir()) + "/corpus/python/autocast-recorded-by-torch-not-by-megatron.json";
  const Case c = load_case_file(file);
  auto torch_py = python_variant("torch-py");
  SKIP_WITHOUT(torch_py);
  const auto by_torch = results_by_property(c, *torch_py);
  EXPECT_EQ(by_torch.at("recompute-fidelity").classification, Classification::pass);
  EXPECT_EQ(by_torch.at("grads-match-eager").classification, Classification::pass);
  std::string output;
  EXPECT_EQ(run_exported(file, "--checkpoint torch --property recompute-fidelity,grads-match-eager", output), 0) << output;
  auto released = python_variant("megatron-py");
  if (!released) GTEST_SKIP() << "megatron-core is not installed";
  const auto by_megatron = results_by_property(c, *released);
  EXPECT_EQ(by_megatron.at("recompute-fidelity").classification, Classification::pre_existing);
  EXPECT_EQ(by_megatron.at("grads-match-eager").classification, Classification::pre_existing);
  EXPECT_EQ(run_exported(file, "--checkpoint megatron --property recompute-fidelity", output), 1) << output;
  EXPECT_NE(output.find("recompute-fidelity: FAILS"), std::string::npos) << output;
}

// A module that fails to import is refused with the exception's type and where it was raised:
// megatron-core 0.15's import compiles CUDA code, and torch's builder raises a bare IndexError
// ("list index out of range") on a machine without a GPU.
TEST(Python, a_module_that_fails_to_import_is_refused_with_the_exception_and_its_place) {
  const std::string path = ::testing::TempDir() + "/fails_on_import.py";
  std::ofstream(path) << "import torch\n"
                         "\n"
                         "arch_list = []\n"
                         "arch_list[-1] += '+PTX'\n";
  const std::string what = refusal_of("python:" + path + ":CheckpointFunction");
  EXPECT_NE(what.find("raised IndexError: list index out of range at "), std::string::npos) << what;
  EXPECT_NE(what.find("fails_on_import.py:4"), std::string::npos) << what;
}

// A tree whose random.py imports a module that fails to import (a missing third-party module in
// one of Megatron's own files): the refusal names the exception and the file and line in that
// tree, not "put its source tree on PYTHONPATH", which it is.
TEST(Python, an_import_failure_inside_a_tree_names_its_file_and_line_in_the_tree) {
  const std::string original_path = megatron_random_py();
  if (original_path.empty()) GTEST_SKIP() << "megatron-core is not installed for the embedded Python";
  const std::string package = original_path.substr(0, original_path.find("/megatron/core/")) + "/megatron";
  const std::string tree = ::testing::TempDir() + "/broken-import-tree";
  ASSERT_EQ(system(("rm -rf " + tree + " && mkdir -p " + tree + " && cp -r " + package + " " + tree + "/ && sed -i "
                    "'1i import a_module_nobody_installed' " + tree + "/megatron/core/tensor_parallel/utils.py").c_str()),
            0);
  const test_shell::Result run = test_shell::run_shell(
      "cd / && PYTHONPATH=" + tree + " " + std::string(test_paths::recheck_binary()) + " run --cases 1 --sut python:" + tree +
      "/megatron/core/tensor_parallel/random.py:CheckpointFunction --claims none --out " + ::testing::TempDir() +
      "/broken-import-findings");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("ModuleNotFoundError: No module named 'a_module_nobody_installed'"), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("broken-import-tree/megatron/core/tensor_parallel/utils.py:1"), std::string::npos)
      << run.output;
  EXPECT_EQ(run.output.find("put its source tree"), std::string::npos) << run.output;
}

TEST(Python, a_missing_module_is_refused_by_name) {
  const std::string what = refusal_of("python:no_such_module_here:CheckpointFunction");
  EXPECT_NE(what.find("no_such_module_here"), std::string::npos) << what;
  EXPECT_THROW(make_checkpoint("python:torch.utils.checkpoint"), std::invalid_argument);
}

// recheck run starts Python and imports the variant's module before it forks its workers. On a
// GPU node, an import that asks torch.cuda.is_available() the default way initialises CUDA and
// poisons the fork (megatron-core's import does). The bridge has torch count devices with NVML.
TEST(Python, python_starts_with_torch_counting_devices_without_initialising_cuda) {
  ASSERT_NE(python_variant("torch-py"), nullptr);
  const char* check = std::getenv("PYTORCH_NVML_BASED_CUDA_CHECK");
  ASSERT_NE(check, nullptr);
  EXPECT_STREQ(check, "1");
}

}  // namespace
}  // namespace recheck
